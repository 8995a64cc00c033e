/*
 * spec_internal.h - test hooks of the speculative driver. Not part of the
 * public API.
 */
#ifndef BD_SPEC_INTERNAL_H
#define BD_SPEC_INTERNAL_H

#include <stdbool.h>

/* When set, the sampling acceptance rule is replaced by a deliberately
 * wrong one (accept a draft whenever its target probability exceeds 0.1,
 * otherwise resample without it). Exists only so the statistical test of
 * losslessness can show it has the power to reject a wrong rule. */
extern bool bd_spec_test_wrong_rule;

/* When set, every verify row is sampled with the committed history only
 * (the drafts before the row left out of the repetition penalty's window):
 * the mistake the statistical test with a penalty must be able to see. */
extern bool bd_spec_test_wrong_history;

/* Adaptive steps observed since the estimates were last fresh (a new
 * bd_spec, bd_spec_forget, or a generation after none that drafted):
 * grows across generations while adapt_carry carries the state over. */
typedef struct bd_spec bd_spec;
int32_t bd_spec_test_steps_learned(const bd_spec *sp);

/* The adaptive draft-length decision (pure function of its inputs):
 * alpha[1..n_max] acceptance estimates, cost[0..n_max] measured step
 * times with cost_n[i] observations each, vcost[0..n_max] the verify
 * forward's part of them (a DFlash drafter: with two or more measured
 * draft lengths a drafting step then costs one line fitted to all of them;
 * NULL: per-length costs, extrapolated from whole steps). Returns the
 * draft length to use (0 = a plain step: no draft rates 5 % above a plain
 * step's 1 / cost[0]) and the best drafting length in *best_draft_n. */
#include <stdint.h>
int32_t bd_spec_adapt_choose(const double *alpha, const double *cost, const double *vcost, const int32_t *cost_n,
                             int32_t n_max, int32_t *best_draft_n);

/* The same decision for a DFlash drafter whose block length is picked too:
 * a full block (the tables above) or a short one, [anchor, MASK x n],
 * with its own acceptance estimates s_alpha[1..n_max] (s_alpha_n[i]
 * observations each) and whole-step times s_cost[1..n_max] (s_cost_n[i];
 * index 0 unused: plain steps are cost[0]). A short block's unobserved
 * positions take the full block's alpha (capped by the short block's own
 * estimate before them). Until a short block is measured, its cost is the
 * full block's less the drafter rows it skips (the full block's measured
 * drafter pass times 1 - (n + 1) / block, block = the trained block's rows),
 * never below a plain step; measured short costs are never taken above the
 * full block's estimate. The mode with the better E(n)/Cost(n) wins, ties
 * to the short block. force: -1 pick, 0 full only, 1 short only. Returns the draft
 * length (0 = a plain step); *best_draft_n the best drafting length,
 * *short_block its mode, *est_cost its estimated step time. */
int32_t bd_spec_adapt_choose_block(const double *alpha, const double *cost, const double *vcost,
                                   const int32_t *cost_n, const double *s_alpha, const int32_t *s_alpha_n,
                                   const double *s_cost, const int32_t *s_cost_n, int32_t n_max, int32_t block,
                                   int force, int32_t *best_draft_n, bool *short_block, double *est_cost);

/* True when draft length n (> 0) is estimated cheaper than a plain step.
 * A drafting step does a plain step's work and more (a verify of n + 1
 * rows, a drafter pass), so that is a stale plain time (a hiccup during
 * the one plain step measured), not evidence for drafting: without a
 * fresh plain step the driver would keep drafting and never measure plain
 * again. */
bool bd_spec_plain_stale(const double *cost, const double *vcost, const int32_t *cost_n, int32_t n_max, int32_t n);

/* Bounds one step's acceptance estimates (the caller's copies; the
 * estimates themselves stay as observed) where nothing was observed:
 * - a full-block position not observed takes the short block's estimate
 *   there when that is lower, and no position not observed rates above
 *   the one before it: a short block right for 5 and wrong at 6 says the
 *   full block's untried positions 6.. are no sure thing either (the
 *   8-layer MoE pair right for 5 at avx2 went from a short block of 8,
 *   wrong at 6, to a full block of 15: a 280 ms step for 6 tokens);
 * - positions beyond the reach, ADAPT_REACH times the furthest position
 *   observed in either block, count as never accepted: a drafter right
 *   twice in the warm-up does not draft a full block of 15 next on
 *   untested optimism (a 270 ms step for 6 tokens on that pair, ~6 % of
 *   its run). n_max while nothing is observed.
 * alpha / s_alpha [n_max + 1] (full / short block, s_alpha may be NULL
 * with s_alpha_n) are changed in place. Returns the reach. */
int32_t bd_spec_adapt_bound(double *alpha, const int32_t *alpha_n, double *s_alpha, const int32_t *s_alpha_n,
                            int32_t n_max);

/* One drafting step's lesson for one block's acceptance estimates
 * alpha[1..n_max] (alpha_n[i] observations each): positions 1..n_acc were
 * accepted, n_acc + 1 rejected (if drafted); later ones were not seen.
 * Each seen position moves towards what it saw by 1 / (n + 2) of the gap
 * (n its earlier observations), at least 15 %. A position seen for the
 * first time starts from other[i] (the other block's estimate; NULL:
 * none) when that is lower than its own. cap_unreached (the full block):
 * afterwards no position never seen rates above the one before it. */
void bd_spec_adapt_learn(double *alpha, int32_t *alpha_n, const double *other, int32_t n_max, bool cap_unreached,
                         int32_t n_drafted, int32_t n_acc);

/* Plain steps before the next probe: the back-off gap, raised so that the
 * last probe's loss (probe_ms against probe_tokens plain steps of plain_ms
 * each) is at most 1 % of the plain steps' time; at most 256. */
int32_t bd_spec_probe_gap(int32_t backoff, double probe_ms, int32_t probe_tokens, double plain_ms);

#endif
