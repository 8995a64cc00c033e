/*
 * llama_api.c - llama-server's own endpoints (its tools/server/README.md,
 * llama.cpp v0.5.0): POST /completion (and /completions), /tokenize,
 * /detokenize, /apply-template, GET /props, GET /slots.
 *
 * Errors are llama-server's {"error": {"code", "message", "type"}}.
 *
 * /completion takes a prompt as a string, token ids, a mix of both, or an
 * array of such prompts (the answer is then an array, one result per
 * prompt, each with its "index"). Fields that would make llama-server
 * sample differently and that this engine cannot honour are refused with
 * a 400 naming them -- never ignored: post_sampling_probs with n_probs,
 * n_probs above 20, and samplers that are switched on (typical_p < 1, DRY, XTC, mirostat, dynamic temperature,
 * top_n_sigma). At their "off" values (what llama.cpp's own web UI sends)
 * they are accepted. Fields llama-server does not define are ignored, as
 * it does. grammar / json_schema constrain the output (constrain.h; one of
 * them, else a 400); presence_penalty, frequency_penalty and logit_bias
 * (llama-server's shapes: [[id or text, bias or false], ...] or {"id or
 * text": bias or false}) are the sampler's.
 *
 * cache_prompt is accepted either way: the slot's prefix is always reused
 * because reuse cannot change the output here (the engine's rows do not
 * depend on the batch they were computed in).
 */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "compat.h"
#include "constrain.h"
#include "stats_json.h"

#define LLAMA_RANDOM_SEED 4294967295u /* llama-server's "random seed" (LLAMA_DEFAULT_SEED) */
#define MAX_PROMPTS 16

/* The samplers this engine applies, in its order (decode/sampler.c), and
 * llama.cpp's names and letters for them. Index into want[]; SAMPLER_OFF:
 * a sampler llama.cpp has and this engine does not (its own fields keep
 * it off, or are refused); SAMPLER_UNKNOWN: no sampler at all. */
enum { N_OURS = 5, SAMPLER_OFF = -1, SAMPLER_UNKNOWN = -2 };
static const char *const OUR_SAMPLERS[N_OURS] = {"penalties", "top_k", "top_p", "min_p", "temperature"};

static int sampler_name(const char *nm) {
    for (int k = 0; k < N_OURS; k++)
        if (!strcmp(nm, OUR_SAMPLERS[k])) return k;
    static const char *const off[] = {"dry", "typ_p", "xtc", "top_n_sigma", "infill"};
    for (size_t k = 0; k < sizeof off / sizeof off[0]; k++)
        if (!strcmp(nm, off[k])) return SAMPLER_OFF;
    return SAMPLER_UNKNOWN;
}

static int sampler_letter(char c) {
    switch (c) {
    case 'e': return 0; /* penalties */
    case 'k': return 1;
    case 'p': return 2;
    case 'm': return 3;
    case 't': return 4;
    case 'd': case 'y': case 'x': case 's': return SAMPLER_OFF; /* dry, typ_p, xtc, top_n_sigma */
    default: return SAMPLER_UNKNOWN;
    }
}

/* ------------------------------------------------------------------------
 * Model choice
 * ---------------------------------------------------------------------- */

/* The model a request names ("model" in the body, or ?model=), else the
 * -m model. NULL with a response queued. */
static srv_model *pick_model(srv_req *r, json_t *root, char *name_out, size_t name_n, int *rc) {
    server *s = r->srv;
    const char *name = NULL;
    json_t *jm = root ? json_object_get(root, "model") : NULL;
    if (jm && !json_is_null(jm)) {
        if (!json_is_string(jm)) {
            *rc = srv_send_llama_error(r, 400, "\"model\" must be a string");
            return NULL;
        }
        name = json_string_value(jm);
    }
    if (!name) name = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "model");
    if (!name || !name[0]) name = s->default_model[0] ? s->default_model : NULL;
    if (!name) {
        *rc = srv_send_llama_error(r, 400, "no model is loaded at start (-m): name one with \"model\"");
        return NULL;
    }
    if (name_out) snprintf(name_out, name_n, "%s", name);
    int status = 500;
    char err[700];
    srv_model *m = srv_model_find(s, name, &status, err, sizeof err);
    if (!m) *rc = srv_send_llama_error(r, status, "%s", err);
    return m;
}

/* The sampling defaults of model m: engine, model config, command line. */
static void model_defaults(const server *s, const srv_model *m, bd_sampler_params *sp, int32_t *n_predict) {
    *sp = bd_sampler_default_params();
    *n_predict = -1;
    if (m && m->has_cfg) gallery_config_apply(&m->cfg, NULL, sp, n_predict, NULL);
    srv_cli_defaults_apply(s, sp, n_predict);
}

/* ------------------------------------------------------------------------
 * Parameters (llama-server's `params` / `generation_settings` object)
 * ---------------------------------------------------------------------- */

typedef struct cmpl_params {
    bd_sampler_params sp;
    long long seed_asked;  /* -1 = random (shown as llama-server's 4294967295) */
    int n_predict;         /* -1 = until EOG or the context end; 0 = prompt only */
    bool stream, ignore_eos, return_tokens;
    json_t *stop;          /* borrowed: NULL, string or array of strings */
    json_t *response_fields; /* borrowed: NULL or array of strings */
    bd_logit_bias *bias;   /* [n_bias] owned until the jobs have their copies; sp.logit_bias */
    int n_bias;
    char *gbnf;            /* owned: the grammar (constrain.h), or NULL */
    const char *gbnf_field;
    int n_probs;           /* 0: none; else top alternatives per token (<= SRV_TOP_LOGPROBS_MAX) */
} cmpl_params;

static void cmpl_params_free(cmpl_params *p) {
    free(p->bias);
    free(p->gbnf);
    p->bias = NULL;
    p->gbnf = NULL;
    p->sp.logit_bias = NULL;
    p->sp.n_logit_bias = 0;
}

static json_t *params_json(const srv_model *m, const cmpl_params *p) {
    json_t *o = json_object();
    const bd_sampler_params *sp = &p->sp;
    json_object_set_new(o, "n_predict", json_integer(p->n_predict));
    json_object_set_new(o, "seed", json_integer(p->seed_asked < 0 ? (json_int_t)LLAMA_RANDOM_SEED : p->seed_asked));
    json_object_set_new(o, "temperature", json_real(sp->temperature));
    json_object_set_new(o, "dynatemp_range", json_real(0));
    json_object_set_new(o, "dynatemp_exponent", json_real(1));
    json_object_set_new(o, "top_k", json_integer(sp->top_k));
    json_object_set_new(o, "top_p", json_real(sp->top_p));
    json_object_set_new(o, "min_p", json_real(sp->min_p));
    json_object_set_new(o, "top_n_sigma", json_real(-1));
    json_object_set_new(o, "xtc_probability", json_real(0));
    json_object_set_new(o, "xtc_threshold", json_real(0.1));
    json_object_set_new(o, "typical_p", json_real(1));
    json_object_set_new(o, "repeat_last_n", json_integer(sp->repeat_last_n));
    json_object_set_new(o, "repeat_penalty", json_real(sp->repeat_penalty > 0 ? sp->repeat_penalty : 1.0));
    json_object_set_new(o, "presence_penalty", json_real(sp->presence_penalty));
    json_object_set_new(o, "frequency_penalty", json_real(sp->frequency_penalty));
    json_object_set_new(o, "dry_multiplier", json_real(0));
    json_object_set_new(o, "dry_base", json_real(1.75));
    json_object_set_new(o, "dry_allowed_length", json_integer(2));
    json_object_set_new(o, "dry_penalty_last_n", json_integer(-1));
    json_object_set_new(o, "mirostat", json_integer(0));
    json_object_set_new(o, "mirostat_tau", json_real(5));
    json_object_set_new(o, "mirostat_eta", json_real(0.1));
    json_t *stop = json_array();
    if (json_is_string(p->stop)) json_array_append(stop, p->stop);
    for (size_t i = 0; json_is_array(p->stop) && i < json_array_size(p->stop); i++)
        json_array_append(stop, json_array_get(p->stop, i));
    json_object_set_new(o, "stop", stop);
    json_object_set_new(o, "max_tokens", json_integer(p->n_predict));
    json_object_set_new(o, "n_keep", json_integer(0));
    json_object_set_new(o, "n_discard", json_integer(0));
    json_object_set_new(o, "ignore_eos", json_boolean(p->ignore_eos));
    json_object_set_new(o, "stream", json_boolean(p->stream));
    json_object_set_new(o, "n_probs", json_integer(p->n_probs));
    json_object_set_new(o, "min_keep", json_integer(0));
    json_object_set_new(o, "grammar", json_string(""));
    /* the order this engine applies them in (decode/sampler.c) */
    json_t *smp = json_array();
    for (int i = 0; i < N_OURS; i++) json_array_append_new(smp, json_string(OUR_SAMPLERS[i]));
    json_object_set_new(o, "samplers", smp);
    bd_spec *spec = m && m->slots ? m->slots[0].spec : NULL;
    json_object_set_new(o, "speculative.types",
                        json_string(bd_spec_type_name(m && m->slots ? m->spp.type : BD_SPEC_NONE)));
    json_object_set_new(o, "speculative.n_max", json_integer(spec ? bd_spec_n_max(spec) : 0));
    json_object_set_new(o, "speculative.n_min", json_integer(m ? m->spp.n_min : 0));
    json_object_set_new(o, "speculative.p_min", json_real(m ? m->spp.p_min : 0));
    /* blockdraft's own: the draft length picked each step (bd_spec_adaptive_default) */
    json_object_set_new(o, "speculative.adaptive", json_boolean(m && m->slots && m->spp.adaptive));
    json_object_set_new(o, "timings_per_token", json_false());
    json_object_set_new(o, "post_sampling_probs", json_false());
    json_object_set_new(o, "lora", json_array());
    return o;
}

/* A JSON number field; false when present and not a number. */
static bool num_field(json_t *root, const char *key, double *out, bool *has) {
    json_t *v = json_object_get(root, key);
    *has = v && !json_is_null(v);
    if (!*has) return true;
    if (!json_is_number(v)) return false;
    *out = json_number_value(v);
    return true;
}

static bool int_field(json_t *root, const char *key, long long *out, bool *has) {
    json_t *v = json_object_get(root, key);
    *has = v && !json_is_null(v);
    if (!*has) return true;
    if (!json_is_integer(v)) return false;
    *out = json_integer_value(v);
    return true;
}

static bool bool_field(json_t *root, const char *key, bool *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return false;
    *out = json_is_true(v);
    return true;
}

/* Samplers llama-server has and this engine does not: accepted at the
 * value that switches them off, else refused. */
typedef struct off_value {
    const char *key;
    double off;
    int cmp; /* 0: must equal off; 1: must be <= off */
    const char *what;
} off_value;

static const off_value OFF_VALUES[] = {
    {"typical_p", 1.0, 0, "locally typical sampling"},
    {"dry_multiplier", 0.0, 0, "DRY sampling"},
    {"xtc_probability", 0.0, 0, "XTC sampling"},
    {"mirostat", 0.0, 0, "mirostat sampling"},
    {"dynatemp_range", 0.0, 0, "dynamic temperature"},
    {"top_n_sigma", 0.0, 1, "top-n-sigma sampling"},
    {"min_keep", 1.0, 1, "min_keep"},
    {"t_max_predict_ms", 0.0, 0, "a prediction time limit (t_max_predict_ms)"},
    {"n_indent", 0.0, 0, "n_indent"},
    {"n_cmpl", 1.0, 0, "several completions per prompt (n_cmpl)"},
};

/* One logit_bias entry: a bias number, or false (banned: a bias no logit
 * survives; finite, so a request that bans every token still samples). */
static bool bias_value(json_t *v, float *out) {
    if (json_is_false(v)) return *out = -1e30f, true;
    if (!json_is_number(v) || !(json_number_value(v) >= -1e6 && json_number_value(v) <= 1e6)) return false;
    *out = (float)json_number_value(v);
    return true;
}

/* Add key's tokens (a token id, or text whose tokens all get the bias). */
static bool bias_add(cmpl_params *p, const bd_model *bm, const char *key, size_t klen, bool is_id, long long id,
                     float bias, size_t *cap) {
    int32_t nv = bd_model_n_vocab(bm);
    if (!is_id) {
        char *end;
        id = strtoll(key, &end, 10);
        is_id = klen > 0 && (size_t)(end - key) == klen;
    }
    if (is_id) {
        if (id < 0 || id >= nv) return true; /* llama-server skips ids out of range */
        if (!bd_grow(&p->bias, cap, (size_t)p->n_bias + 1, sizeof *p->bias)) return false;
        p->bias[p->n_bias++] = (bd_logit_bias){(int32_t)id, bias};
        return true;
    }
    int n = bd_tokenize(bm, key, klen, false, false, NULL, 0);
    if (n < 0) n = -n;
    if (!bd_grow(&p->bias, cap, (size_t)p->n_bias + (size_t)n + 1, sizeof *p->bias)) return false;
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) return false;
    n = bd_tokenize(bm, key, klen, false, false, ids, n + 1);
    for (int i = 0; i < n; i++) p->bias[p->n_bias++] = (bd_logit_bias){ids[i], bias};
    free(ids);
    return n >= 0;
}

/* llama-server's logit_bias: [[token id or text, bias or false], ...] or
 * {"token id or text": bias or false}. At most 1024 entries. */
static bool parse_logit_bias(srv_req *r, json_t *root, const srv_model *m, cmpl_params *p, int *rc) {
    json_t *lb = json_object_get(root, "logit_bias");
    if (!lb || json_is_null(lb)) return true;
    const char *shape = "\"logit_bias\" must be [[token id or text, bias or false], ...] or {\"token id or text\": "
                        "bias or false} (at most 1024 entries, biases within +-1e6)";
    size_t n = json_is_array(lb) ? json_array_size(lb) : json_is_object(lb) ? json_object_size(lb) : SIZE_MAX;
    if (n > 1024 || !m) {
        *rc = srv_send_llama_error(r, 400, "%s", shape);
        return false;
    }
    size_t cap = 0;
    bool ok = true, oom = false;
    if (json_is_array(lb)) {
        for (size_t i = 0; ok && !oom && i < n; i++) {
            json_t *e = json_array_get(lb, i), *k = json_array_get(e, 0);
            float b;
            ok = json_is_array(e) && json_array_size(e) == 2 && (json_is_integer(k) || json_is_string(k)) &&
                 bias_value(json_array_get(e, 1), &b);
            if (ok)
                oom = !bias_add(p, m->m, json_is_string(k) ? json_string_value(k) : "",
                                json_is_string(k) ? json_string_length(k) : 0, json_is_integer(k),
                                json_is_integer(k) ? json_integer_value(k) : 0, b, &cap);
        }
    } else {
        const char *key;
        json_t *v;
        json_object_foreach(lb, key, v) {
            float b;
            if (!(ok = bias_value(v, &b)) || (oom = !bias_add(p, m->m, key, strlen(key), false, 0, b, &cap))) break;
        }
    }
    if (!ok || oom) {
        *rc = oom ? srv_send_llama_error(r, 500, "out of memory") : srv_send_llama_error(r, 400, "%s", shape);
        return false;
    }
    p->sp.logit_bias = p->bias;
    p->sp.n_logit_bias = p->n_bias;
    return true;
}

/* Parse and check everything but the prompt. Returns false with a 400
 * queued. */
static bool parse_cmpl_params(srv_req *r, json_t *root, const srv_model *m, cmpl_params *p, int *rc) {
    server *s = r->srv;
    memset(p, 0, sizeof *p);
    int32_t np = -1;
    model_defaults(s, m, &p->sp, &np);
    p->n_predict = np;
    p->seed_asked = s->p.has_seed ? s->p.seed : -1;
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (uint64_t)(bd_time_ms() * 1e3);
    if (p->seed_asked < 0) p->sp.seed = seed;

    /* constrained generation: grammar or json_schema */
    int status = 400;
    char gerr[800];
    if (!srv_constraint_parse(s, root, false, &p->gbnf, &p->gbnf_field, &status, gerr, sizeof gerr)) {
        *rc = srv_send_llama_error(r, status, "%s", gerr);
        return false;
    }
    for (size_t i = 0; i < sizeof OFF_VALUES / sizeof OFF_VALUES[0]; i++) {
        double v;
        bool has;
        const off_value *o = &OFF_VALUES[i];
        if (!num_field(root, o->key, &v, &has)) {
            *rc = srv_send_llama_error(r, 400, "\"%s\" must be a number", o->key);
            return false;
        }
        if (has && (o->cmp == 0 ? v != o->off : v > o->off)) {
            *rc = srv_send_llama_error(r, 400, "\"%s\": %s is not supported by blockdraft (%s %g turns it off)",
                                       o->key, o->what, o->cmp == 0 ? "only" : "at most", o->off);
            return false;
        }
    }
    if (!parse_logit_bias(r, root, m, p, rc)) return false;
    json_t *lora = json_object_get(root, "lora");
    if (lora && !json_is_null(lora) && !(json_is_array(lora) && json_array_size(lora) == 0)) {
        *rc = srv_send_llama_error(r, 400, "\"lora\" adapters are not supported by blockdraft");
        return false;
    }
    bool tpt = false, progress = false;
    if (!bool_field(root, "timings_per_token", &tpt) || tpt) {
        *rc = srv_send_llama_error(r, 400, "\"timings_per_token\": only false is supported (the final result "
                                           "carries the timings)");
        return false;
    }
    if (!bool_field(root, "return_progress", &progress) || progress) {
        *rc = srv_send_llama_error(r, 400, "\"return_progress\": only false is supported");
        return false;
    }
    long long id_slot;
    bool has;
    if (!int_field(root, "id_slot", &id_slot, &has) || (has && id_slot != -1)) {
        *rc = srv_send_llama_error(r, 400, "\"id_slot\": only -1 (any idle slot) is supported; the scheduler "
                                           "picks the slot");
        return false;
    }

    double v;
    if (!num_field(root, "temperature", &v, &has) || (has && !(v >= -10 && v <= 100))) {
        *rc = srv_send_llama_error(r, 400, "\"temperature\" must be a number (<= 0: greedy)");
        return false;
    }
    if (has) p->sp.temperature = (float)v;
    if (!num_field(root, "top_p", &v, &has) || (has && !(v >= 0 && v <= 1))) {
        *rc = srv_send_llama_error(r, 400, "\"top_p\" must be a number between 0 and 1");
        return false;
    }
    if (has) p->sp.top_p = (float)v;
    if (!num_field(root, "min_p", &v, &has) || (has && !(v >= 0 && v <= 1))) {
        *rc = srv_send_llama_error(r, 400, "\"min_p\" must be a number between 0 and 1");
        return false;
    }
    if (has) p->sp.min_p = (float)v;
    if (!num_field(root, "repeat_penalty", &v, &has) || (has && !(v > 0 && v <= 100))) {
        *rc = srv_send_llama_error(r, 400, "\"repeat_penalty\" must be a number greater than 0 (1 = off)");
        return false;
    }
    if (has) p->sp.repeat_penalty = (float)v;
    const char *pen[2] = {"presence_penalty", "frequency_penalty"};
    for (int i = 0; i < 2; i++) {
        if (!num_field(root, pen[i], &v, &has) || (has && !(v >= -100 && v <= 100))) {
            *rc = srv_send_llama_error(r, 400, "\"%s\" must be a number between -100 and 100 (0 = off)", pen[i]);
            return false;
        }
        if (has) *(i ? &p->sp.frequency_penalty : &p->sp.presence_penalty) = (float)v;
    }
    long long iv;
    if (!int_field(root, "top_k", &iv, &has) || (has && (iv < 0 || iv > (1 << 24)))) {
        *rc = srv_send_llama_error(r, 400, "\"top_k\" must be a non-negative integer (0 = off)");
        return false;
    }
    if (has) p->sp.top_k = (int32_t)iv;
    if (!int_field(root, "repeat_last_n", &iv, &has) || (has && (iv < -1 || iv > (1 << 24)))) {
        *rc = srv_send_llama_error(r, 400, "\"repeat_last_n\" must be an integer, -1 (all) or more");
        return false;
    }
    if (has) p->sp.repeat_last_n = (int32_t)iv;
    if (!int_field(root, "seed", &iv, &has) || (has && iv < -1)) {
        *rc = srv_send_llama_error(r, 400, "\"seed\" must be an integer, -1 for a random seed");
        return false;
    }
    if (has) {
        p->seed_asked = iv;
        p->sp.seed = iv < 0 || iv == LLAMA_RANDOM_SEED ? seed : (uint64_t)iv;
        if (iv == LLAMA_RANDOM_SEED) p->seed_asked = -1;
    }
    /* n_predict, or max_tokens (llama-server reads both) */
    const char *np_names[2] = {"n_predict", "max_tokens"};
    for (int i = 0; i < 2; i++) {
        if (!int_field(root, np_names[i], &iv, &has) || (has && (iv < -1 || iv > (1 << 24)))) {
            *rc = srv_send_llama_error(r, 400, "\"%s\" must be an integer, -1 (no limit) or more", np_names[i]);
            return false;
        }
        if (has) {
            p->n_predict = (int)iv;
            break;
        }
    }
    int limit = s->p.max_tokens > 0 ? s->p.max_tokens : (m ? m->n_ctx : 0);
    if (limit > 0 && p->n_predict > limit) {
        *rc = srv_send_llama_error(r, 400, "\"n_predict\" is %d; this server allows at most %d", p->n_predict, limit);
        return false;
    }
    bool cache_prompt = true, post_sampling_probs = false;
    if (!bool_field(root, "stream", &p->stream) || !bool_field(root, "ignore_eos", &p->ignore_eos) ||
        !bool_field(root, "return_tokens", &p->return_tokens) || !bool_field(root, "cache_prompt", &cache_prompt) ||
        !bool_field(root, "post_sampling_probs", &post_sampling_probs)) {
        *rc = srv_send_llama_error(r, 400, "stream, ignore_eos, return_tokens, cache_prompt and "
                                           "post_sampling_probs must be booleans");
        return false;
    }
    /* n_probs: the model's own distribution (softmax of the raw logits,
     * as llama-server reports it without post_sampling_probs) */
    json_t *npj = json_object_get(root, "n_probs");
    if (npj && !json_is_null(npj)) {
        if (!json_is_integer(npj) || json_integer_value(npj) < 0 || json_integer_value(npj) > SRV_TOP_LOGPROBS_MAX) {
            *rc = srv_send_llama_error(r, 400, "\"n_probs\" must be an integer between 0 and %d", SRV_TOP_LOGPROBS_MAX);
            return false;
        }
        p->n_probs = (int)json_integer_value(npj);
    }
    if (post_sampling_probs && p->n_probs > 0) {
        *rc = srv_send_llama_error(r, 400, "\"post_sampling_probs\": probabilities after the sampler chain are not "
                                           "supported; n_probs alone reports the model's own distribution");
        return false;
    }
    json_t *st = json_object_get(root, "stop");
    if (st && !json_is_null(st)) {
        bool ok = json_is_string(st) ? json_string_length(st) > 0 && json_string_length(st) <= 256
                                     : json_is_array(st) && json_array_size(st) <= 16;
        for (size_t i = 0; ok && json_is_array(st) && i < json_array_size(st); i++) {
            json_t *e = json_array_get(st, i);
            ok = json_is_string(e) && json_string_length(e) > 0 && json_string_length(e) <= 256;
        }
        if (!ok) {
            *rc = srv_send_llama_error(r, 400, "\"stop\" must be an array of at most 16 non-empty strings "
                                               "(each up to 256 bytes)");
            return false;
        }
        p->stop = st;
    }
    /* samplers: the ones left out are switched off; the order is fixed */
    json_t *smp = json_object_get(root, "samplers");
    if (smp && !json_is_null(smp)) {
        if (!json_is_array(smp) && !json_is_string(smp)) {
            *rc = srv_send_llama_error(r, 400, "\"samplers\" must be an array of sampler names");
            return false;
        }
        bool want[N_OURS] = {false};
        size_t n = json_is_array(smp) ? json_array_size(smp) : json_string_length(smp);
        for (size_t i = 0; i < n; i++) {
            int k;
            if (json_is_string(smp)) { /* llama.cpp's one-letter form, e.g. "ekpmt" */
                k = sampler_letter(json_string_value(smp)[i]);
            } else {
                json_t *e = json_array_get(smp, i);
                k = sampler_name(json_is_string(e) ? json_string_value(e) : "");
            }
            if (k == SAMPLER_UNKNOWN) {
                *rc = srv_send_llama_error(r, 400, "\"samplers\": entry %zu is not a sampler blockdraft knows "
                                                   "(penalties, top_k, top_p, min_p, temperature; dry, typ_p, "
                                                   "xtc, top_n_sigma are accepted and stay off)",
                                           i);
                return false;
            }
            if (k >= 0) want[k] = true;
        }
        if (!want[0]) p->sp.repeat_penalty = 1.0f;
        if (!want[1]) p->sp.top_k = 0;
        if (!want[2]) p->sp.top_p = 1.0f;
        if (!want[3]) p->sp.min_p = 0.0f;
        if (!want[4]) p->sp.temperature = 1.0f; /* no temperature sampler: llama.cpp samples unscaled */
    }
    json_t *rf = json_object_get(root, "response_fields");
    if (rf && !json_is_null(rf)) {
        bool ok = json_is_array(rf);
        for (size_t i = 0; ok && i < json_array_size(rf); i++) ok = json_is_string(json_array_get(rf, i));
        if (!ok) {
            *rc = srv_send_llama_error(r, 400, "\"response_fields\" must be an array of strings");
            return false;
        }
        p->response_fields = rf;
    }
    return true;
}

/* ------------------------------------------------------------------------
 * Prompts
 * ---------------------------------------------------------------------- */

typedef struct ids_buf {
    int32_t *v;
    int n;
    size_t cap;
} ids_buf;

static bool ids_push(ids_buf *b, const int32_t *v, int n) {
    if (n <= 0) return true;
    if (!bd_grow(&b->v, &b->cap, (size_t)b->n + (size_t)n, sizeof *b->v)) return false;
    memcpy(b->v + b->n, v, (size_t)n * sizeof *v);
    b->n += n;
    return true;
}

static bool tok_text(const bd_model *m, const char *t, size_t len, bool add_special, bool parse_special, ids_buf *out) {
    int n = bd_tokenize(m, t, len, add_special, parse_special, NULL, 0);
    if (n < 0) n = -n;
    int32_t *v = malloc(((size_t)n + 1) * sizeof *v);
    if (!v) return false;
    n = bd_tokenize(m, t, len, add_special, parse_special, v, n + 1);
    bool ok = n >= 0 && ids_push(out, v, n);
    free(v);
    return ok;
}

/* Tokenize llama-server's "string or mixed array" (tokenize_mixed): the
 * first element gets the special tokens (BOS) when it is a string; ids
 * are taken as they are (checked against the vocabulary). Returns NULL or
 * the 400 message. */
static const char *tokenize_mixed(const bd_model *m, json_t *v, bool add_special, bool parse_special, ids_buf *out,
                                  char *buf, size_t bn) {
    int32_t n_vocab = bd_model_n_vocab(m);
    if (json_is_string(v)) {
        if (!tok_text(m, json_string_value(v), json_string_length(v), add_special, parse_special, out))
            return "out of memory";
        return NULL;
    }
    if (!json_is_array(v)) return "must be a string, an array of token ids, or a mix of strings and ids";
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        if (json_is_string(e)) {
            if (!tok_text(m, json_string_value(e), json_string_length(e), add_special && i == 0, parse_special, out))
                return "out of memory";
        } else if (json_is_integer(e)) {
            json_int_t id = json_integer_value(e);
            if (id < 0 || id >= n_vocab)
                return snprintf(buf, bn, "token id %lld at position %zu is not in the vocabulary (0..%d)",
                                (long long)id, i, n_vocab - 1),
                       buf;
            int32_t t = (int32_t)id;
            if (!ids_push(out, &t, 1)) return "out of memory";
        } else {
            return snprintf(buf, bn, "element %zu must be a string or a token id", i), buf;
        }
    }
    return NULL;
}

static bool has_integer(json_t *a) {
    for (size_t i = 0; json_is_array(a) && i < json_array_size(a); i++)
        if (json_is_integer(json_array_get(a, i))) return true;
    return false;
}

/* ------------------------------------------------------------------------
 * POST /completion
 * ---------------------------------------------------------------------- */

typedef struct cmpl_job {
    srv_job *j;
    int index;
    int n_prompt;
} cmpl_job;

/* The prompt as text, special tokens written out (llama-server's "prompt"). */
static json_t *prompt_text(const srv_model *m, const int32_t *ids, int n) {
    bd_buf b = {0};
    char small[256];
    for (int i = 0; i < n; i++) {
        int k = bd_token_piece(m->m, ids[i], small, (int)sizeof small, true);
        if (k > 0) bd_buf_put(&b, small, (size_t)k);
        else if (k < 0 && bd_buf_reserve(&b, (size_t)-k)) {
            k = bd_token_piece(m->m, ids[i], b.p + b.n, -k, true);
            if (k > 0) b.n += (size_t)k;
        }
    }
    json_t *s = srv_jstr(b.p ? b.p : "", b.failed ? 0 : b.n);
    bd_buf_free(&b);
    return s;
}

static json_t *ids_json(const int32_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

static const char *stop_type(const srv_job *j, int n_predict) {
    (void)n_predict;
    if (j->stop_word) return "word";
    if (j->st.stopped_eog) return "eos";
    return "limit";
}

/* llama-server's response_fields: keep the listed fields; "a/b" takes
 * field b of object a and puts it at the top level under the name "a/b". */
static json_t *select_fields(json_t *full, json_t *fields) {
    json_t *o = json_object();
    for (size_t i = 0; i < json_array_size(fields); i++) {
        const char *path = json_string_value(json_array_get(fields, i));
        json_t *v = full;
        char part[256];
        const char *p = path;
        while (v && *p) {
            const char *sl = strchr(p, '/');
            size_t n = sl ? (size_t)(sl - p) : strlen(p);
            if (n >= sizeof part) {
                v = NULL;
                break;
            }
            memcpy(part, p, n);
            part[n] = '\0';
            v = json_is_object(v) ? json_object_get(v, part) : NULL;
            p = sl ? sl + 1 : p + n;
        }
        if (v) json_object_set(o, path, v);
    }
    json_decref(full);
    return o;
}

/* One token as llama-server's probability entries show it: "token" (its
 * text; bytes that are not UTF-8 on their own as "byte: \\xNN...") and
 * "bytes" (the raw bytes). */
static void token_fields(json_t *o, const bd_model *bm, int32_t id) {
    char small[64], *big = NULL;
    const char *t = small;
    int n = bd_token_piece(bm, id, small, (int)sizeof small, true);
    if (n < 0 && (big = malloc((size_t)-n))) {
        n = bd_token_piece(bm, id, big, -n, true);
        t = big;
    }
    if (n < 0) n = 0;
    json_t *bytes = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(bytes, json_integer((unsigned char)t[i]));
    json_t *str = json_stringn(t, (size_t)n);
    if (!str) {
        bd_buf b = {0};
        bd_buf_put(&b, "byte: ", 6);
        for (int i = 0; i < n; i++) {
            char hx[8];
            snprintf(hx, sizeof hx, "\\x%02x", (unsigned char)t[i]);
            bd_buf_put(&b, hx, strlen(hx));
        }
        str = srv_jstr(b.p ? b.p : "", b.failed ? 0 : b.n);
        bd_buf_free(&b);
    }
    json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "token", str);
    json_object_set_new(o, "bytes", bytes);
    free(big);
}

/* llama-server's completion_probabilities for generated tokens [from, to)
 * of job j (under j->mu): {id, token, bytes, logprob, top_logprobs: [...]}. */
static json_t *probs_json(const srv_job *j, size_t from, size_t to) {
    const bd_model *bm = j->model->m;
    json_t *arr = json_array();
    for (size_t i = from; i < to && i < j->n_lp; i++) {
        const srv_logprob *l = &j->lp[i];
        json_t *e = json_object();
        token_fields(e, bm, l->id);
        json_object_set_new(e, "logprob", json_real(l->logprob));
        json_t *top = json_array();
        for (int k = 0; k < l->n_top; k++) {
            json_t *t = json_object();
            token_fields(t, bm, l->top_id[k]);
            json_object_set_new(t, "logprob", json_real(l->top_lp[k]));
            json_array_append_new(top, t);
        }
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(arr, e);
    }
    return arr;
}

/* Entries of the tokens whose text is in the output (a stop string may cut
 * the last ones off). */
static size_t probs_count(const srv_job *j) {
    size_t n = 0;
    while (n < j->n_lp && (!j->stop_hit || j->lp[n].start < j->len)) n++;
    return n;
}

/* The final result of one prompt (stream: content and tokens were sent
 * in the chunks, so they are empty here, as llama-server does). */
static json_t *final_json(srv_req *r, const cmpl_params *p, const cmpl_job *cj, const char *model_name, bool stream) {
    srv_job *j = cj->j;
    const srv_model *m = j->model;
    pthread_mutex_lock(&j->mu);
    json_t *o = json_object();
    json_object_set_new(o, "index", json_integer(cj->index));
    json_object_set_new(o, "content", stream ? json_string("") : srv_jstr(j->text, j->len));
    json_object_set_new(o, "tokens", stream || !p->return_tokens ? json_array() : ids_json(j->ids, j->n_ids));
    json_object_set_new(o, "id_slot", json_integer(j->slot_id));
    json_object_set_new(o, "stop", json_true());
    json_object_set_new(o, "model", srv_jstr(model_name, strlen(model_name)));
    json_object_set_new(o, "tokens_predicted", json_integer(j->n_ids));
    json_object_set_new(o, "tokens_evaluated", json_integer(j->n_prompt));
    cmpl_params gs = *p;
    gs.n_predict = p->n_predict;
    json_object_set_new(o, "generation_settings", params_json(m, &gs));
    json_object_set_new(o, "prompt", prompt_text(m, j->prompt, j->n_prompt));
    json_object_set_new(o, "has_new_line", json_boolean(j->text && memchr(j->text, '\n', j->len)));
    const char *stype = stop_type(j, p->n_predict);
    bool truncated = !strcmp(stype, "limit") && j->n_prompt + j->n_ids >= m->n_ctx;
    json_object_set_new(o, "truncated", json_boolean(truncated));
    json_object_set_new(o, "stop_type", json_string(stype));
    json_object_set_new(o, "stopping_word", json_string(j->stop_word ? j->stop_word : ""));
    /* the README: prompt tokens re-used from the previous completion */
    json_object_set_new(o, "tokens_cached", json_integer(j->st.n_prompt_cached));
    json_object_set_new(o, "timings", srv_json_timings(&j->st, j->n_ids));
    json_object_set_new(o, "speculative", srv_job_spec_json(j)); /* blockdraft's own */
    if (!stream && p->n_probs > 0) json_object_set_new(o, "completion_probabilities", probs_json(j, 0, probs_count(j)));
    pthread_mutex_unlock(&j->mu);
    (void)r;
    return p->response_fields ? select_fields(o, p->response_fields) : o;
}

/* Streaming: one SSE `data:` event per batch of new text (with the ids
 * generated since the last event), then the final result; prompts one
 * after the other; no [DONE] (llama-server sends none here). */
typedef struct cmpl_stream {
    srv_stream base; /* first: http.c sees this */
    cmpl_job jobs[MAX_PROMPTS];
    int n_jobs, cur;
    size_t sent;   /* bytes of the current job's text sent */
    int ids_sent;  /* ids of the current job sent */
    cmpl_params p;
    json_t *root;  /* owns what p borrows */
    char model[GALLERY_NAME_MAX];
    srv_model *m;  /* held (srv_model_get) until the stream ends */
} cmpl_stream;

static void sse_data(bd_buf *b, json_t *o /* stolen */) {
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return;
    bd_buf_put(b, "data: ", 6);
    bd_buf_put(b, s, strlen(s));
    bd_buf_put(b, "\n\n", 2);
    free(s);
}

static char *cmpl_stream_next(srv_stream *base, size_t *n, bool *done) {
    cmpl_stream *cs = (cmpl_stream *)base;
    bd_buf b = {0};
    cmpl_job *cj = &cs->jobs[cs->cur];
    srv_job *j = cj->j;
    pthread_mutex_lock(&j->mu);
    if (j->safe <= cs->sent && j->n_ids <= cs->ids_sent && j->state != JOB_DONE) {
        struct timespec ts;
        bd_deadline_after_ms(&ts, 200);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    bool fin = j->state == JOB_DONE;
    size_t to = j->safe;
    int to_ids = j->n_ids;
    json_t *chunk = NULL;
    if (to > cs->sent || (to_ids > cs->ids_sent && !fin)) {
        chunk = json_object();
        json_object_set_new(chunk, "index", json_integer(cj->index));
        json_object_set_new(chunk, "content", srv_jstr(j->text + cs->sent, to - cs->sent));
        json_object_set_new(chunk, "tokens", ids_json(j->ids + cs->ids_sent, to_ids - cs->ids_sent));
        json_object_set_new(chunk, "stop", json_false());
        json_object_set_new(chunk, "id_slot", json_integer(j->slot_id));
        json_object_set_new(chunk, "tokens_predicted", json_integer(to_ids));
        json_object_set_new(chunk, "tokens_evaluated", json_integer(j->n_prompt));
        if (cs->p.n_probs > 0 && to_ids > cs->ids_sent)
            json_object_set_new(chunk, "completion_probabilities", probs_json(j, (size_t)cs->ids_sent, (size_t)to_ids));
        cs->sent = to;
        cs->ids_sent = to_ids;
    }
    bool ok = j->ok;
    char err[512];
    snprintf(err, sizeof err, "%s", j->err);
    pthread_mutex_unlock(&j->mu);
    if (chunk) sse_data(&b, chunk);
    if (fin && cs->sent >= to) {
        if (!ok) {
            json_t *e = json_pack("{s:{s:i,s:s,s:s}}", "error", "code", 500, "message", err, "type", "server_error");
            if (e) sse_data(&b, e);
            *done = true;
        } else {
            sse_data(&b, final_json(NULL, &cs->p, cj, cs->model, true));
            cs->cur++;
            cs->sent = 0;
            cs->ids_sent = 0;
            if (cs->cur >= cs->n_jobs) *done = true;
        }
    }
    *n = b.n;
    return b.p;
}

static void cmpl_stream_release(srv_stream *base) {
    cmpl_stream *cs = (cmpl_stream *)base;
    for (int i = 0; i < cs->n_jobs; i++) {
        atomic_store(&cs->jobs[i].j->cancel, true); /* no effect once done */
        srv_job_withdraw(cs->base.srv, cs->jobs[i].j);
        srv_job_unref(cs->jobs[i].j);
    }
    srv_model_put(cs->base.srv, cs->m); /* after the jobs that use it */
    json_decref(cs->root);
    free(cs);
}

/* Build and queue one job; NULL with a response queued. */
static srv_job *queue_job(srv_req *r, srv_model *m, const cmpl_params *p, const int32_t *ids, int n, int *rc) {
    if (n <= 0) {
        *rc = srv_send_llama_error(r, 400, "the prompt is empty (it produced no tokens)");
        return NULL;
    }
    if (n >= m->n_ctx) {
        json_t *e = json_object();
        char msg[300];
        snprintf(msg, sizeof msg, "the request exceeds the available context size (%d tokens; the context holds %d)",
                 n, m->n_ctx);
        json_object_set_new(e, "code", json_integer(400));
        json_object_set_new(e, "message", json_string(msg));
        json_object_set_new(e, "type", json_string("exceed_context_size_error"));
        json_object_set_new(e, "n_prompt_tokens", json_integer(n));
        json_object_set_new(e, "n_ctx", json_integer(m->n_ctx));
        *rc = srv_send_json(r, 400, json_pack("{s:o}", "error", e));
        return NULL;
    }
    srv_job *j = srv_job_create(m, ids, n);
    if (!j) {
        *rc = srv_send_llama_error(r, 500, "out of memory");
        return NULL;
    }
    int room = m->n_ctx - n;
    j->gp.sampling = p->sp;
    char gerr[800];
    if (!srv_job_own_bias(j)) {
        srv_job_unref(j);
        *rc = srv_send_llama_error(r, 500, "out of memory");
        return NULL;
    }
    if (p->gbnf && !(j->grammar = srv_grammar_compile(m, p->gbnf, gerr, sizeof gerr))) {
        srv_job_unref(j);
        *rc = srv_send_llama_error(r, 400, "\"%s\": %s", p->gbnf_field, gerr);
        return NULL;
    }
    j->gp.grammar = j->grammar;
    j->gp.ignore_eog = p->ignore_eos;
    j->gp.n_predict = p->n_predict < 0 || p->n_predict > room ? room : p->n_predict;
    if (p->n_probs > 0) j->top_logprobs = p->n_probs;
    j->deadline_ms = bd_time_ms() + r->srv->p.timeout_s * 1e3;
    if (json_is_string(p->stop)) srv_job_add_stop(j, json_string_value(p->stop), json_string_length(p->stop));
    for (size_t i = 0; json_is_array(p->stop) && i < json_array_size(p->stop); i++) {
        json_t *e = json_array_get(p->stop, i);
        srv_job_add_stop(j, json_string_value(e), json_string_length(e));
    }
    if (m->has_cfg)
        for (int i = 0; i < m->cfg.n_stopwords; i++) srv_job_add_stop(j, m->cfg.stopwords[i], strlen(m->cfg.stopwords[i]));
    int status = 503;
    char err[300];
    if (!srv_job_submit(r->srv, j, &status, err, sizeof err)) {
        srv_job_unref(j);
        r->retry_after = "2";
        *rc = srv_send_llama_error(r, status, "%s", err);
        return NULL;
    }
    return j;
}

int llama_api_completion(srv_req *r) {
    int rc = 0;
    json_t *root = srv_parse_object(r, true, &rc);
    if (!root) return rc;
    cmpl_job jobs[MAX_PROMPTS];
    int n_jobs = 0;
    ids_buf ib = {0};
    cmpl_params p;
    memset(&p, 0, sizeof p);
    char model_name[GALLERY_NAME_MAX] = "";
    srv_model *m = pick_model(r, root, model_name, sizeof model_name, &rc);
    if (!m) goto done;
    if (!parse_cmpl_params(r, root, m, &p, &rc)) goto done;
    json_t *prompt = json_object_get(root, "prompt");
    if (!prompt || json_is_null(prompt)) {
        rc = srv_send_llama_error(r, 400, "\"prompt\" is required");
        goto done;
    }
    /* one prompt (a string, ids, or a mix), or an array of prompts */
    json_t *list[MAX_PROMPTS];
    size_t n_list = 0;
    if (json_is_array(prompt) && !has_integer(prompt)) {
        if (json_array_size(prompt) == 0) {
            rc = srv_send_llama_error(r, 400, "\"prompt\" must not be empty");
            goto done;
        }
        if (json_array_size(prompt) > MAX_PROMPTS) {
            rc = srv_send_llama_error(r, 400, "\"prompt\" holds %zu prompts; at most %d per request",
                                      json_array_size(prompt), MAX_PROMPTS);
            goto done;
        }
        for (size_t i = 0; i < json_array_size(prompt); i++) list[n_list++] = json_array_get(prompt, i);
    } else {
        list[n_list++] = prompt;
    }
    for (size_t i = 0; i < n_list; i++) {
        json_t *one = list[i];
        if (json_is_object(one)) {
            json_t *md = json_object_get(one, "multimodal_data");
            if (md && !json_is_null(md)) {
                rc = srv_send_llama_error(r, 400, "\"multimodal_data\": this server has no multimodal support");
                goto done;
            }
            one = json_object_get(one, "prompt_string");
        }
        char buf[200];
        ib.n = 0;
        const char *why = one ? tokenize_mixed(m->m, one, true, true, &ib, buf, sizeof buf)
                              : "must be a string, an array of token ids, a mix, or {\"prompt_string\": ...}";
        if (why) {
            rc = srv_send_llama_error(r, !strcmp(why, "out of memory") ? 500 : 400, "\"prompt\"%s: %s",
                                      n_list > 1 ? " element" : "", why);
            goto done;
        }
        srv_job *j = queue_job(r, m, &p, ib.v, ib.n, &rc);
        if (!j) goto done;
        jobs[n_jobs++] = (cmpl_job){.j = j, .index = (int)i, .n_prompt = ib.n};
    }
    cmpl_params_free(&p); /* each job has its own bias and grammar */
    if (p.stream) {
        cmpl_stream *cs = calloc(1, sizeof *cs);
        if (!cs) {
            rc = srv_send_llama_error(r, 500, "out of memory");
            goto done;
        }
        cs->base.next = cmpl_stream_next;
        cs->base.release = cmpl_stream_release;
        memcpy(cs->jobs, jobs, (size_t)n_jobs * sizeof *jobs);
        cs->n_jobs = n_jobs;
        cs->p = p;
        cs->root = root; /* p borrows from it */
        snprintf(cs->model, sizeof cs->model, "%s", model_name);
        cs->m = m; /* the stream holds the model until it ends */
        m = NULL;
        n_jobs = 0;
        root = NULL;
        rc = srv_send_stream(r, &cs->base);
        goto done;
    }
    for (int i = 0; i < n_jobs; i++) {
        if (!srv_wait_job(r, jobs[i].j)) {
            rc = MHD_NO;
            goto done;
        }
    }
    for (int i = 0; i < n_jobs; i++) {
        if (!jobs[i].j->ok) {
            int st = jobs[i].j->err_status ? jobs[i].j->err_status : 500;
            rc = srv_send_llama_error(r, st == 499 ? 503 : st, "%s", jobs[i].j->err);
            goto done;
        }
    }
    if (n_jobs == 1) {
        rc = srv_send_json(r, 200, final_json(r, &p, &jobs[0], model_name, false));
    } else {
        json_t *arr = json_array();
        for (int i = 0; i < n_jobs; i++) json_array_append_new(arr, final_json(r, &p, &jobs[i], model_name, false));
        rc = srv_send_json(r, 200, arr);
    }
done:
    for (int i = 0; i < n_jobs; i++) {
        atomic_store(&jobs[i].j->cancel, true); /* no effect once done */
        srv_job_withdraw(r->srv, jobs[i].j);
        srv_job_unref(jobs[i].j);
    }
    srv_model_put(r->srv, m);
    cmpl_params_free(&p);
    free(ib.v);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------------------
 * POST /tokenize, POST /detokenize
 * ---------------------------------------------------------------------- */

/* One token's bytes (control tokens written out, as llama-server does). */
static char *piece_of(const bd_model *m, int32_t id, int *len) {
    int n = bd_token_piece(m, id, NULL, 0, true);
    if (n > 0) n = 0;
    n = -n;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    int k = n > 0 ? bd_token_piece(m, id, s, n, true) : 0;
    if (k < 0) k = 0;
    s[k] = '\0';
    *len = k;
    return s;
}

int llama_api_tokenize(srv_req *r) {
    int rc = 0;
    json_t *root = srv_parse_object(r, true, &rc);
    if (!root) return rc;
    ids_buf ib = {0};
    srv_model *m = pick_model(r, root, NULL, 0, &rc);
    if (!m) goto done;
    bool add_special = false, parse_special = true, with_pieces = false;
    if (!bool_field(root, "add_special", &add_special) || !bool_field(root, "parse_special", &parse_special) ||
        !bool_field(root, "with_pieces", &with_pieces)) {
        rc = srv_send_llama_error(r, 400, "add_special, parse_special and with_pieces must be booleans");
        goto done;
    }
    json_t *content = json_object_get(root, "content");
    if (content && !json_is_null(content)) {
        char buf[200];
        const char *why = tokenize_mixed(m->m, content, add_special, parse_special, &ib, buf, sizeof buf);
        if (why) {
            rc = srv_send_llama_error(r, !strcmp(why, "out of memory") ? 500 : 400, "\"content\" %s", why);
            goto done;
        }
    }
    json_t *tokens = json_array();
    for (int i = 0; i < ib.n; i++) {
        if (!with_pieces) {
            json_array_append_new(tokens, json_integer(ib.v[i]));
            continue;
        }
        int len = 0;
        char *pc = piece_of(m->m, ib.v[i], &len);
        json_t *piece = pc ? json_stringn(pc, (size_t)len) : json_string("");
        if (!piece) { /* not valid UTF-8 on its own: the bytes */
            piece = json_array();
            for (int k = 0; k < len; k++) json_array_append_new(piece, json_integer((unsigned char)pc[k]));
        }
        free(pc);
        json_array_append_new(tokens, json_pack("{s:i,s:o}", "id", (json_int_t)ib.v[i], "piece", piece));
    }
    rc = srv_send_json(r, 200, json_pack("{s:o}", "tokens", tokens));
done:
    srv_model_put(r->srv, m);
    free(ib.v);
    json_decref(root);
    return rc;
}

int llama_api_detokenize(srv_req *r) {
    int rc = 0;
    json_t *root = srv_parse_object(r, true, &rc);
    if (!root) return rc;
    bd_buf b = {0};
    srv_model *m = pick_model(r, root, NULL, 0, &rc);
    if (!m) goto done;
    json_t *tokens = json_object_get(root, "tokens");
    if (tokens && !json_is_null(tokens) && !json_is_array(tokens)) {
        rc = srv_send_llama_error(r, 400, "\"tokens\" must be an array of token ids");
        goto done;
    }
    int32_t n_vocab = bd_model_n_vocab(m->m);
    for (size_t i = 0; json_is_array(tokens) && i < json_array_size(tokens); i++) {
        json_t *e = json_array_get(tokens, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= n_vocab) {
            rc = srv_send_llama_error(r, 400, "\"tokens\"[%zu] is not a token id of this model (0..%d)", i, n_vocab - 1);
            goto done;
        }
        int len = 0;
        char *pc = piece_of(m->m, (int32_t)json_integer_value(e), &len);
        if (pc) bd_buf_put(&b, pc, (size_t)len);
        free(pc);
    }
    if (b.failed) {
        rc = srv_send_llama_error(r, 500, "out of memory");
        goto done;
    }
    rc = srv_send_json(r, 200, json_pack("{s:o}", "content", srv_jstr(b.p ? b.p : "", b.n)));
done:
    srv_model_put(r->srv, m);
    bd_buf_free(&b);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------------------
 * POST /apply-template
 * ---------------------------------------------------------------------- */

int llama_api_apply_template(srv_req *r) {
    int rc = 0;
    json_t *root = srv_parse_object(r, true, &rc);
    if (!root) return rc;
    char *prompt = NULL;
    int32_t *ids = NULL;
    json_t *kw = NULL;
    srv_model *m = pick_model(r, root, NULL, 0, &rc);
    if (!m) goto done;
    char buf[300];
    const char *why = srv_check_messages(json_object_get(root, "messages"), buf, sizeof buf);
    if (why) {
        rc = srv_send_llama_error(r, 400, "%s", why);
        goto done;
    }
    json_t *tools = json_object_get(root, "tools");
    if (tools && json_is_null(tools)) tools = NULL;
    if (tools && !json_is_array(tools)) {
        rc = srv_send_llama_error(r, 400, "\"tools\" must be an array");
        goto done;
    }
    json_t *ctk = json_object_get(root, "chat_template_kwargs");
    if (ctk && !json_is_null(ctk) && !json_is_object(ctk)) {
        rc = srv_send_llama_error(r, 400, "\"chat_template_kwargs\" must be an object");
        goto done;
    }
    kw = json_is_object(ctk) ? json_deep_copy(ctk) : json_object();
    size_t plen = 0;
    int n_ids = 0, status = 500;
    bool think = false;
    char err[800];
    if (!srv_chat_prompt(m, json_object_get(root, "messages"), tools, kw, &prompt, &plen, &ids, &n_ids, &think,
                         &status, err, sizeof err)) {
        rc = srv_send_llama_error(r, status, "%s", err);
        goto done;
    }
    rc = srv_send_json(r, 200, json_pack("{s:o}", "prompt", srv_jstr(prompt, plen)));
done:
    srv_model_put(r->srv, m);
    free(prompt);
    free(ids);
    json_decref(kw);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------------------
 * GET /props, GET /slots
 * ---------------------------------------------------------------------- */

/* The model /props and /slots describe: ?model=NAME, else the -m model
 * (never waiting for a load: 503 while it is loading). NULL with a
 * response queued, or NULL and *none when there is no model at all.
 * A model returned is held: srv_model_put it. */
static srv_model *described_model(srv_req *r, bool *none, int *rc) {
    server *s = r->srv;
    *none = false;
    const char *q = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "model");
    if (q && q[0]) return pick_model(r, NULL, NULL, 0, rc);
    if (!s->default_model[0]) {
        *none = true;
        return NULL;
    }
    srv_model *m = NULL;
    pthread_mutex_lock(&s->models_mu);
    for (srv_model *x = s->models; x && !m; x = x->next)
        if (x->from_cli && !atomic_load(&x->removed) && !x->retired) m = x;
    if (m && atomic_load(&m->state) == MODEL_LOADED) m->users++;
    else m = NULL;
    pthread_mutex_unlock(&s->models_mu);
    if (!m) {
        *rc = srv_send_llama_error(r, 503, "Loading model");
        return NULL;
    }
    return m;
}

static json_t *slot_json(server *s, srv_model *m, srv_slot *sl) {
    cmpl_params p;
    memset(&p, 0, sizeof p);
    int32_t np;
    model_defaults(s, m, &p.sp, &np);
    p.n_predict = np;
    p.seed_asked = s->p.has_seed ? s->p.seed : -1;
    /* the job being run, under qmu (it cannot be freed meanwhile) */
    pthread_mutex_lock(&s->qmu);
    srv_job *j = sl->busy ? sl->cur : NULL;
    bool busy = j != NULL;
    int64_t task = -1;
    int n_decoded = 0, n_predict = -1;
    bool nl = false;
    if (j) {
        pthread_mutex_lock(&j->mu);
        busy = j->state != JOB_DONE;
        task = j->id;
        n_decoded = j->n_ids;
        n_predict = j->gp.n_predict;
        nl = j->text && memchr(j->text, '\n', j->len);
        p.sp = j->gp.sampling;
        p.n_predict = j->gp.n_predict;
        p.seed_asked = (long long)(j->gp.sampling.seed & 0x7fffffffffffffffULL);
        p.ignore_eos = j->gp.ignore_eog;
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_unlock(&s->qmu);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(sl->id));
    json_object_set_new(o, "id_task", json_integer(busy ? task : -1));
    json_object_set_new(o, "n_ctx", json_integer(m->n_ctx));
    json_object_set_new(o, "speculative", json_boolean(sl->spec != NULL));
    json_object_set_new(o, "is_processing", json_boolean(busy));
    json_object_set_new(o, "params", params_json(m, &p));
    json_t *nt = json_object();
    json_object_set_new(nt, "has_next_token", json_boolean(busy));
    json_object_set_new(nt, "has_new_line", json_boolean(busy && nl));
    json_object_set_new(nt, "n_remain", json_integer(busy && n_predict >= 0 ? n_predict - n_decoded : -1));
    json_object_set_new(nt, "n_decoded", json_integer(busy ? n_decoded : 0));
    json_object_set_new(o, "next_token", nt);
    return o;
}

int llama_api_props(srv_req *r) {
    server *s = r->srv;
    int rc = 0;
    bool none;
    srv_model *m = described_model(r, &none, &rc);
    if (!m && !none) return rc;
    json_t *o = json_object();
    json_t *dgs;
    if (m) {
        dgs = slot_json(s, m, &m->slots[0]);
        json_object_set_new(dgs, "id_task", json_integer(-1));
        json_object_set_new(dgs, "is_processing", json_false());
        json_object_set_new(dgs, "prompt", json_string(""));
    } else {
        cmpl_params p;
        memset(&p, 0, sizeof p);
        int32_t np;
        model_defaults(s, NULL, &p.sp, &np);
        p.n_predict = np;
        p.seed_asked = s->p.has_seed ? s->p.seed : -1;
        dgs = json_pack("{s:i,s:o}", "n_ctx", (json_int_t)0, "params", params_json(NULL, &p));
    }
    json_object_set_new(o, "default_generation_settings", dgs);
    json_object_set_new(o, "total_slots", json_integer(m ? m->n_slots : 0));
    json_object_set_new(o, "model_alias", json_string(m ? m->name : ""));
    json_object_set_new(o, "model_path", srv_jstr(m ? m->target_path : "", m ? strlen(m->target_path) : 0));
    json_t *mod = json_object();
    json_object_set_new(mod, "vision", json_false());
    json_object_set_new(mod, "video", json_false());
    json_object_set_new(mod, "audio", json_false());
    json_object_set_new(o, "modalities", mod);
    json_object_set_new(o, "endpoint_slots", json_boolean(s->p.slots_endpoint));
    json_object_set_new(o, "endpoint_props", json_false());
    json_object_set_new(o, "endpoint_metrics", json_true());
    const char *tmpl = !m                                      ? ""
                       : m->from_cli && s->template_override   ? s->template_override
                       : bd_model_chat_template(m->m)           ? bd_model_chat_template(m->m)
                                                               : chat_template_chatml;
    json_object_set_new(o, "chat_template", srv_jstr(tmpl, strlen(tmpl)));
    json_object_set_new(o, "chat_template_caps", json_object());
    json_object_set_new(o, "bos_token", json_string(m && m->bos_str ? m->bos_str : ""));
    json_object_set_new(o, "eos_token", json_string(m && m->eos_str ? m->eos_str : ""));
    char bi[64];
    snprintf(bi, sizeof bi, "blockdraft %s", bd_version());
    json_object_set_new(o, "build_info", json_string(bi));
    json_object_set_new(o, "is_sleeping", json_false());
    srv_model_put(s, m);
    return srv_send_json(r, 200, o);
}

int llama_api_slots(srv_req *r) {
    server *s = r->srv;
    if (!s->p.slots_endpoint)
        return srv_send_llama_error(r, 501, "This server does not support slots endpoint. Start it with `--slots`");
    int rc = 0;
    bool none;
    srv_model *m = described_model(r, &none, &rc);
    if (!m && !none) return rc;
    json_t *arr = json_array();
    int idle = 0;
    for (int i = 0; m && i < m->n_slots; i++) {
        json_t *o = slot_json(s, m, &m->slots[i]);
        idle += !json_is_true(json_object_get(o, "is_processing"));
        json_array_append_new(arr, o);
    }
    srv_model_put(s, m);
    const char *f = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot");
    if (f && f[0] && idle == 0) {
        json_decref(arr);
        return srv_send_llama_error(r, 503, "no slot available");
    }
    return srv_send_json(r, 200, arr);
}
