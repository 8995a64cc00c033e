/*
 * decode.h - helpers shared by the plain (generate.c) and speculative
 * (spec.c) generation loops. Internal to src/decode.
 */
#ifndef BD_DECODE_H
#define BD_DECODE_H

#include "blockdraft.h"

/* Length of the common prefix of a[0..na) and b[0..nb). */
int32_t bd_decode_common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb);

/* Prefix reuse: keep the longest common prefix of s's cached tokens and
 * prompt, at most min(cap, n_prompt - 1) tokens (the last prompt token is
 * always forwarded, for its logits), by truncating s to it. When the
 * session refuses the truncation (a model whose state cannot be rolled
 * back), s is emptied instead. Returns the tokens kept. */
int32_t bd_decode_reuse_prefix(bd_session *s, const int32_t *prompt, int32_t n_prompt, int32_t cap);

/* Fill the rate fields of st from its counts and times. */
void bd_decode_finish_stats(bd_gen_stats *st);

#endif
