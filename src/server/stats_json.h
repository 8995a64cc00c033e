/*
 * stats_json.h - generation statistics as JSON: the one rendering of
 * bd_spec_stats used by `run --json` (stats.spec), the server (the
 * "speculative" object of every completion) and `bench --json` (its "spec"
 * object, with the sums over its repetitions), so the three agree on names
 * and meanings. In the server layer so that src/cli can use it too.
 */
#ifndef BD_SERVER_STATS_JSON_H
#define BD_SERVER_STATS_JSON_H

#include <jansson.h>

#include "blockdraft.h"

/* {type, n_drafted, n_accepted, acceptance_rate, tau, target_forwards,
 *  draft_steps, acceptance_by_position [per block position, while drafts
 *  were made there], draft_ms, verify_ms, other_ms[, n_max]}; n_max is
 * left out when < 1 (no speculation). NULL on out-of-memory. */
json_t *srv_json_spec_stats(const bd_spec_stats *ss, int32_t n_max);

/* {n_prompt, n_prompt_cached, n_gen, prompt_ms, gen_ms, prompt_tps,
 *  gen_tps, stopped_eog}: the fields of bd_gen_stats under their own names
 * (`run --json`; the server uses OpenAI's usage and llama-server's
 * timings names instead). */
json_t *srv_json_gen_stats(const bd_gen_stats *st);

/* llama-server's `timings` object (its tools/server README, v0.5.0):
 * {cache_n, prompt_n, prompt_ms, prompt_per_token_ms, prompt_per_second,
 *  predicted_n, predicted_ms, predicted_per_token_ms, predicted_per_second
 *  [, draft_n, draft_n_accepted]}. prompt_n counts the prompt tokens
 * processed (forwarded) and cache_n those kept from the slot's cache, so
 * prompt_n + cache_n + predicted_n is the context in use, as llama-server
 * defines them; draft_n / draft_n_accepted (drafted and accepted tokens)
 * only when speculation drafted anything, as llama-server does. predicted_n
 * is n_gen unless n_gen_override >= 0. NULL on out-of-memory. */
json_t *srv_json_timings(const bd_gen_stats *st, int32_t n_gen_override);

#endif
