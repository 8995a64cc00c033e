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

/* The adaptive draft-length decision (pure function of its inputs):
 * alpha[1..n_max] acceptance estimates, cost[0..n_max] measured step
 * times with cost_n[i] observations each, vcost[0..n_max] the verify
 * forward's part of them (a DFlash drafter: with two or more measured
 * draft lengths a drafting step then costs one line fitted to all of them;
 * NULL: per-length costs, extrapolated from whole steps). Returns the
 * draft length to use (0 = a plain step) and the best drafting length in
 * *best_draft_n. */
#include <stdint.h>
int32_t bd_spec_adapt_choose(const double *alpha, const double *cost, const double *vcost, const int32_t *cost_n,
                             int32_t n_max, int32_t *best_draft_n);

/* True when draft length n (> 0) is estimated cheaper than a plain step.
 * A drafting step does a plain step's work and more (a verify of n + 1
 * rows, a drafter pass), so that is a stale plain time (a hiccup during
 * the one plain step measured), not evidence for drafting: without a
 * fresh plain step the driver would keep drafting and never measure plain
 * again. */
bool bd_spec_plain_stale(const double *cost, const double *vcost, const int32_t *cost_n, int32_t n_max, int32_t n);

/* Plain steps before the next probe: the back-off gap, raised so that the
 * last probe's loss (probe_ms against probe_tokens plain steps of plain_ms
 * each) is at most 2 % of the plain steps' time; at most 256. */
int32_t bd_spec_probe_gap(int32_t backoff, double probe_ms, int32_t probe_tokens, double plain_ms);

#endif
