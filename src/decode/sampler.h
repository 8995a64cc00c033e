/*
 * sampler.h - token samplers: greedy, and temperature with top-k, top-p and
 * min-p, applied in llama.cpp's default order (logit bias -> penalties
 * (repetition, frequency, presence) -> top-k -> top-p -> min-p ->
 * temperature -> draw). The speculative verifier
 * reuses bd_sampler_dist to get the exact distribution plain sampling
 * would draw from.
 *
 * History: the repetition penalty reads the tokens before the one being
 * sampled (prompt + generated so far). Callers pass it on every call, so a
 * speculative verify row j is sampled with exactly the history plain
 * decoding would have had there: the committed tokens plus drafts 1..j.
 */
#ifndef BD_SAMPLER_H
#define BD_SAMPLER_H

#include "blockdraft.h"
#include "../base/base.h"

#define BD_SEED_RANDOM 0xFFFFFFFFu /* as llama.cpp's LLAMA_DEFAULT_SEED */

typedef struct bd_sampler bd_sampler;

/* Allocates all scratch for n_vocab; sampling never allocates. */
bd_sampler *bd_sampler_create(const bd_sampler_params *p, int32_t n_vocab);
void bd_sampler_free(bd_sampler *s);
bool bd_sampler_is_greedy(const bd_sampler *s);
/* The penalties change logits (repeat_penalty != 1 or a frequency or
 * presence penalty, and repeat_last_n != 0). */
bool bd_sampler_has_penalty(const bd_sampler *s);
/* A logit bias is set (for a token of the vocabulary). */
bool bd_sampler_has_bias(const bd_sampler *s);

/* The distribution plain sampling draws from after the n_hist tokens of
 * hist (hist may be NULL when n_hist is 0): on return ids and probs point
 * at the candidates (sampler-owned, valid until the next call), probs
 * summing to 1, sorted by probability, descending, ties by the lower id
 * (so the same list whichever way the filters found it); a NaN logit is
 * never a candidate (an all-NaN row gives token 0). Greedy: one candidate
 * (the argmax of the penalized logits, ties to the lowest id). */
int32_t bd_sampler_dist(bd_sampler *s, const float *logits, const int32_t *hist, int32_t n_hist,
                        const int32_t **ids, const float **probs);

/* Draw one token from logits: bd_sampler_dist, then bd_sampler_pick. */
int32_t bd_sampler_sample(bd_sampler *s, const float *logits, const int32_t *hist, int32_t n_hist);

/* The draw itself: one uniform u (none when n == 1), and the first
 * candidate whose running sum of probs exceeds u (the last if rounding
 * leaves u past them all). The speculative verifier draws its tokens with
 * this too, so that a seed gives the same tokens with and without a
 * drafter (spec.c, accept_row). */
int32_t bd_sampler_pick(bd_sampler *s, const int32_t *ids, const float *probs, int32_t n);

#endif
