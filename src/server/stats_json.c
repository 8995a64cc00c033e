/*
 * stats_json.c - see stats_json.h.
 */
#include "stats_json.h"

json_t *srv_json_spec_stats(const bd_spec_stats *ss, int32_t n_max) {
    json_t *o = json_object(), *acc = json_array();
    if (!o || !acc) {
        json_decref(o);
        json_decref(acc);
        return NULL;
    }
    json_object_set_new(o, "type", json_string(ss->type[0] ? ss->type : "none"));
    json_object_set_new(o, "n_drafted", json_integer(ss->n_drafted));
    json_object_set_new(o, "n_accepted", json_integer(ss->n_accepted));
    json_object_set_new(o, "acceptance_rate",
                        json_real(ss->n_drafted ? (double)ss->n_accepted / (double)ss->n_drafted : 0));
    json_object_set_new(o, "tau", json_real(ss->tau));
    json_object_set_new(o, "target_forwards", json_integer(ss->target_forwards));
    json_object_set_new(o, "draft_steps", json_integer(ss->n_steps));
    for (int i = 0; i < 32 && ss->drafted_at[i]; i++)
        json_array_append_new(acc, json_real((double)ss->accepted_at[i] / (double)ss->drafted_at[i]));
    json_object_set_new(o, "acceptance_by_position", acc);
    json_object_set_new(o, "draft_ms", json_real(ss->draft_ms));
    json_object_set_new(o, "verify_ms", json_real(ss->verify_ms));
    json_object_set_new(o, "other_ms", json_real(ss->other_ms));
    json_object_set_new(o, "short_block_steps", json_integer(ss->n_short_blocks));
    json_object_set_new(o, "adaptive", json_boolean(ss->adaptive));
    if (n_max > 0) json_object_set_new(o, "n_max", json_integer(n_max));
    return o;
}

json_t *srv_json_gen_stats(const bd_gen_stats *st) {
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "n_prompt", json_integer(st->n_prompt));
    json_object_set_new(o, "n_prompt_cached", json_integer(st->n_prompt_cached));
    json_object_set_new(o, "n_gen", json_integer(st->n_gen));
    json_object_set_new(o, "prompt_ms", json_real(st->prompt_ms));
    json_object_set_new(o, "gen_ms", json_real(st->gen_ms));
    json_object_set_new(o, "prompt_tps", json_real(st->prompt_tps));
    json_object_set_new(o, "gen_tps", json_real(st->gen_tps));
    json_object_set_new(o, "stopped_eog", json_boolean(st->stopped_eog));
    return o;
}

json_t *srv_json_timings(const bd_gen_stats *st, int32_t n_gen_override) {
    int32_t fwd = st->n_prompt - st->n_prompt_cached;
    int32_t n_gen = n_gen_override >= 0 ? n_gen_override : st->n_gen;
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "cache_n", json_integer(st->n_prompt_cached));
    json_object_set_new(o, "prompt_n", json_integer(fwd));
    json_object_set_new(o, "prompt_ms", json_real(st->prompt_ms));
    json_object_set_new(o, "prompt_per_token_ms", json_real(fwd > 0 ? st->prompt_ms / fwd : 0.0));
    json_object_set_new(o, "prompt_per_second", json_real(st->prompt_tps));
    json_object_set_new(o, "predicted_n", json_integer(n_gen));
    json_object_set_new(o, "predicted_ms", json_real(st->gen_ms));
    json_object_set_new(o, "predicted_per_token_ms", json_real(n_gen > 0 ? st->gen_ms / n_gen : 0.0));
    json_object_set_new(o, "predicted_per_second",
                        json_real(st->gen_ms > 0 ? 1e3 * n_gen / st->gen_ms : 0.0));
    if (st->spec.n_drafted > 0) {
        json_object_set_new(o, "draft_n", json_integer(st->spec.n_drafted));
        json_object_set_new(o, "draft_n_accepted", json_integer(st->spec.n_accepted));
    }
    return o;
}
