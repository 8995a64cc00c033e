/*
 * test_spec_adapt.c - the adaptive draft-length rule, on costs and
 * acceptance estimates given by hand (the rule is a pure function).
 * Expected choices are worked out in the comments from
 * E(n) = 1 + sum_{i<=n} prod_{j<=i} alpha_j and rate = E(n) / Cost(n).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "decode/spec_internal.h"

#define N 15

static double alpha[N + 1], cost[N + 1];
static int32_t cost_n[N + 1];

static void set_alpha(double a) {
    for (int i = 0; i <= N; i++) alpha[i] = a;
}

/* measured: plain 10 ms, full draft 15 ms (a cheap verify, as on a
 * memory-bound CPU); intermediate lengths interpolate 10 + n/3 ms */
static void cheap_verify(void) {
    for (int i = 0; i <= N; i++) cost_n[i] = 0;
    cost[0] = 10, cost_n[0] = 1;
    cost[N] = 15, cost_n[N] = 1;
}

static void always_right_drafts_full_blocks(void **st) {
    (void)st;
    cheap_verify();
    set_alpha(1.0); /* E(15) = 16 at 15 ms vs 1 token at 10 ms */
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), N);
}

static void never_right_goes_plain(void **st) {
    (void)st;
    cheap_verify();
    set_alpha(0.0); /* E(n) = 1 for every n: nothing beats the 10 ms plain step */
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), 0);
    assert_int_equal(bd, 1); /* the probe length is the cheapest draft */
}

static void first_k_right_stops_after_k(void **st) {
    (void)st;
    cheap_verify();
    /* right for the first 5 positions, never after: E(n) = 1 + min(n, 5);
     * rate(5) = 6 / (10 + 5/3) = 0.514 beats rate(6) = 6 / 12 = 0.5 */
    set_alpha(1.0);
    for (int i = 6; i <= N; i++) alpha[i] = 0.0;
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), 5);
}

static void expensive_verify_goes_plain(void **st) {
    (void)st;
    /* compute-bound verify: cost(n) = 10 (1 + n); with alpha 0.9,
     * E(1) / cost(1) = 1.9 / 20 < 1 / 10, and longer drafts are worse */
    for (int i = 0; i <= N; i++) {
        cost[i] = 10.0 * (1 + i);
        cost_n[i] = 1;
    }
    set_alpha(0.9);
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), 0);
}

static void moderate_acceptance_picks_the_optimum(void **st) {
    (void)st;
    /* cost(n) = 10 + 2n, alpha = 0.8: E(n) = 1 + sum 0.8^i = 5 - 4 * 0.8^n.
     * rate: n=3 2.952/16 = 0.1845, n=4 3.362/18 = 0.1868, n=5 3.689/20 =
     * 0.1845: the optimum is 4 */
    for (int i = 0; i <= N; i++) {
        cost[i] = 10.0 + 2.0 * i;
        cost_n[i] = 1;
    }
    set_alpha(0.8);
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), 4);
}

static void slow_drafter_cheap_verify_extrapolates_from_drafts(void **st) {
    (void)st;
    /* measured (the MoE case): plain 31 ms, a 1-token draft 140 ms (a 90 ms
     * drafter pass + a 2-row verify), a 4-token draft 164 ms; alpha 1.
     * Beyond 4 the marginal cost of a drafted token is (164 - 140) / 3 = 8 ms
     * (the drafter's pass is paid once per draft): cost(15) = 164 + 11 * 8 =
     * 252, rate(15) = 16 / 252 = 0.063 > 1 / 31 = 0.032. (A slope from the
     * plain step, 33 ms per token, gives cost(15) = 527 and 16 / 527 = 0.030:
     * plain forever, though full drafts pay 2x.) */
    for (int i = 0; i <= N; i++) cost_n[i] = 0;
    cost[0] = 31, cost_n[0] = 1;
    cost[1] = 140, cost_n[1] = 1;
    cost[4] = 164, cost_n[4] = 1;
    set_alpha(1.0);
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), N);
    /* one measured draft only and no verify times: the slope of whole steps
     * from the plain step, (164 - 31) / 4 = 33 ms per token, says plain */
    cost_n[1] = 0;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), 0);
}

static void one_measured_draft_extrapolates_from_verify_times(void **st) {
    (void)st;
    /* measured: plain 31 ms (its verify 31 ms), a 1-token draft 140 ms of
     * which the verify forward took 36 ms. Per drafted token beyond it the
     * verify costs 36 - 31 = 5 ms more; the 104 ms drafter pass is paid once:
     * cost(15) = 140 + 14 * 5 = 210, rate 16 / 210 = 0.076 > 1 / 31 = 0.032,
     * so draft 15. (Whole steps from the plain step, 109 ms per token, would
     * give cost(15) = 1666 and plain.) */
    double vcost[N + 1] = {0};
    for (int i = 0; i <= N; i++) cost_n[i] = 0;
    cost[0] = 31, vcost[0] = 31, cost_n[0] = 1;
    cost[1] = 140, vcost[1] = 36, cost_n[1] = 1;
    set_alpha(1.0);
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, vcost, cost_n, N, &bd), N);
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), 0);
    /* the same costs with a drafter that has been wrong: E(n) = 1, plain,
     * and the probe length is the cheapest draft */
    set_alpha(0.0);
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, vcost, cost_n, N, &bd), 0);
    assert_int_equal(bd, 1);
}

static void one_line_through_all_drafts_prices_one_more_row(void **st) {
    (void)st;
    /* A DFlash drafter right for the first 5 positions; position 6 rejected
     * twice (alpha 1/3). Measured step / verify times: 5 drafts 250 / 170 ms
     * (6 steps), 6 drafts 245 / 165 (6 steps: noise made one more row look
     * cheaper), 15 drafts 400 / 320 (the first step). Per length, rate(6) =
     * 6.33 / 245 = 0.0259 beats rate(5) = 6 / 250 = 0.0240: drafting 6 would
     * go on. The line through all drafts (weights 6, 6, 1): sw 13, sum w n
     * 81, sum w n^2 591, sum w v 2330, sum w n v 15840; b = (13 x 15840 -
     * 81 x 2330) / (13 x 591 - 81^2) = 17190 / 1122 = 15.32 ms per row, a =
     * (2330 - 15.32 x 81) / 13 = 83.76, drafter pass 80: cost(5) = 240.4,
     * cost(6) = 255.7; rate(5) = 0.02496 > rate(6) = 6.33 / 255.7 = 0.02477,
     * and rate(15) = 6.33 / 393.6 = 0.0161, plain 1 / 75 = 0.0133. */
    double vcost[N + 1] = {0};
    for (int i = 0; i <= N; i++) cost_n[i] = 0;
    cost[0] = 75, vcost[0] = 75, cost_n[0] = 20;
    cost[5] = 250, vcost[5] = 170, cost_n[5] = 6;
    cost[6] = 245, vcost[6] = 165, cost_n[6] = 6;
    cost[15] = 400, vcost[15] = 320, cost_n[15] = 1;
    set_alpha(1.0);
    alpha[6] = 1.0 / 3;
    for (int i = 7; i <= N; i++) alpha[i] = 0.0;
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, vcost, cost_n, N, &bd), 5);
    /* without verify times (a draft model, not DFlash) the per-length costs
     * stand: 6 */
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), 6);
    /* after one rejection only (alpha 1/2) one more position is still worth
     * a try: 6.5 / 255.7 = 0.0254 > 0.02496 */
    alpha[6] = 0.5;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, vcost, cost_n, N, &bd), 6);
    /* a verify time that falls with the draft length (a cold warm-up figure
     * at 5): no line; the pass's mean (65 ms) plus each length's own verify
     * time: cost(5) = 265, cost(6) = 230, which drafts 6 */
    alpha[6] = 1.0 / 3;
    cost_n[15] = 0;
    vcost[5] = 200;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, vcost, cost_n, N, &bd), 6);
}

static void one_measured_draft_prices_shorter_ones_with_its_pass(void **st) {
    (void)st;
    /* The 9B never-right pair after its warm-up (a full block drafting 2,
     * rejected: alpha(1) 1/2) and plain steps: plain 222 ms; the warm-up
     * step 433 ms, 292 of it the verify of 3 rows, so the drafter's pass is
     * 141 ms whatever the length. A full block drafting 1 costs that pass
     * plus a 2-row verify interpolated between the plain step (222) and 3
     * rows (292): 141 + 257 = 398 ms, rate 1.5 / 398 = 0.00377 < plain's
     * 1 / 222 = 0.00450: plain. Interpolating whole steps between the plain
     * step and the warm-up instead priced it at (222 + 433) / 2 = 327.5 ms,
     * rate 0.00458, and probed full blocks of 1 at 2.2x a plain step. */
    double vcost[N + 1] = {0};
    for (int i = 0; i <= N; i++) cost_n[i] = 0;
    cost[0] = 222, vcost[0] = 222, cost_n[0] = 4;
    cost[2] = 433, vcost[2] = 292, cost_n[2] = 1;
    set_alpha(0.5);
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, vcost, cost_n, N, &bd), 0);
    /* a drafter right at position 1 makes the same short draft pay:
     * 2 / 398 = 0.00503 */
    set_alpha(1.0);
    for (int i = 2; i <= N; i++) alpha[i] = 0.0;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, vcost, cost_n, N, &bd), 1);
    /* and a draft model (no verify times) keeps interpolating whole steps:
     * at alpha(1) 0.6 the draft of 1 rates 1.6 / 327.5 = 0.00489 there,
     * above plain's 1.05 / 222 = 0.00473 with the margin; priced as a DFlash
     * drafter (1.6 / 398 = 0.00402) it does not */
    set_alpha(0.6);
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), 1);
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, vcost, cost_n, N, &bd), 0);
}

/* A draft must beat plain's rate by 5 %: plain 100 ms, a draft of 1
 * measured at 140 ms. alpha(1) 0.44: E = 1.44, rate 1.44 / 140 = 0.01029,
 * 3 % above plain's 0.01: plain. alpha(1) 0.5: 1.5 / 140 = 0.01071, 7 %
 * above: the draft. */
static void a_draft_must_beat_plain_by_the_margin(void **st) {
    (void)st;
    for (int i = 0; i <= N; i++) cost_n[i] = 0;
    cost[0] = 100, cost_n[0] = 4;
    cost[1] = 140, cost_n[1] = 4;
    set_alpha(0.0);
    alpha[1] = 0.44;
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, 1, &bd), 0);
    assert_int_equal(bd, 1);
    alpha[1] = 0.5;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, 1, &bd), 1);
}

static void a_draft_cheaper_than_plain_means_a_stale_plain_time(void **st) {
    (void)st;
    /* a plain step measured once at 10 ms during a hiccup (really ~1 ms), a
     * 4-token draft at 2 ms: with nothing ever accepted (E(n) = 1) the rule
     * alone drafts 4 (1 / 2 > 1 / 10), and a one-token draft, interpolated
     * at 10 - 8 / 4 = 8 ms, would look cheaper than plain too */
    for (int i = 0; i <= N; i++) cost_n[i] = 0;
    cost[0] = 10, cost_n[0] = 1;
    cost[4] = 2, cost_n[4] = 1;
    set_alpha(0.0);
    int32_t bd;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), 4);
    assert_true(bd_spec_plain_stale(cost, NULL, cost_n, N, 4));
    assert_true(bd_spec_plain_stale(cost, NULL, cost_n, N, 1));
    /* measured drafts dearer than plain (every real case): not stale */
    cheap_verify();
    for (int n = 1; n <= N; n++) assert_false(bd_spec_plain_stale(cost, NULL, cost_n, N, n));
    assert_false(bd_spec_plain_stale(cost, NULL, cost_n, N, 0));
    /* no plain time at all: nothing to call stale */
    cost_n[0] = 0;
    assert_false(bd_spec_plain_stale(cost, NULL, cost_n, N, N));
}

static void probe_gap_bounds_the_probes_loss(void **st) {
    (void)st;
    /* no plain time measured yet, or no probe yet: the back-off gap alone */
    assert_int_equal(bd_spec_probe_gap(16, 140, 1, 0), 16);
    assert_int_equal(bd_spec_probe_gap(32, 0, 0, 31), 32);
    /* a probe that paid (3 tokens in 80 ms against 3 x 31): no loss */
    assert_int_equal(bd_spec_probe_gap(16, 80, 3, 31), 16);
    /* a cheap probe's loss, 36 - 31 = 5 ms, needs 5 / (0.01 x 31) = 16.1 ->
     * 17 plain steps: more than the back-off gap of 16, less than 32 */
    assert_int_equal(bd_spec_probe_gap(16, 36, 1, 31), 17);
    assert_int_equal(bd_spec_probe_gap(32, 36, 1, 31), 32);
    /* the 8-layer MoE pair: a 57 ms probe for one token at 22 ms a plain
     * token loses 35 ms; 35 / 0.22 = 159.1 -> 160 plain steps */
    assert_int_equal(bd_spec_probe_gap(16, 57, 1, 22), 160);
    assert_int_equal(bd_spec_probe_gap(200, 57, 1, 22), 200);
    /* a 121 ms one-token probe at 31 ms: 90 / 0.31 = 290.3, capped at 256 */
    assert_int_equal(bd_spec_probe_gap(16, 121, 1, 31), 256);
    /* a very slow probe: capped at 256 */
    assert_int_equal(bd_spec_probe_gap(16, 2000, 1, 31), 256);
}

/* The DFlash block length picked too (bd_spec_adapt_choose_block). The
 * full block's tables: plain 50 ms; a warm-up of 4 drafts 180 ms (verify
 * 130) and 15 drafts 370 ms (verify 290). Its line (adapt_fit_cost,
 * weights 1, 1): verify slope (290 - 130) / 11 = 14.545 ms a row, drafter
 * pass ((180 - 130) + (370 - 290)) / 2 = 65 ms, verify intercept (420 -
 * 14.545 x 19) / 2 = 71.82: cost(n) = 136.82 + 14.545 n, so cost(5) =
 * 209.5. A drafter right for the first 5 positions: E(5) = 6. */
static double s_alpha[N + 1], s_cost[N + 1];
static int32_t s_alpha_n[N + 1], s_cost_n[N + 1];
static double vcost_b[N + 1];

static void block_tables(void) {
    for (int i = 0; i <= N; i++) {
        cost_n[i] = 0;
        cost[i] = vcost_b[i] = 0;
        s_alpha[i] = 1.0;
        s_alpha_n[i] = s_cost_n[i] = 0;
        s_cost[i] = 0;
    }
    cost[0] = vcost_b[0] = 50, cost_n[0] = 20;
    cost[4] = 180, vcost_b[4] = 130, cost_n[4] = 1;
    cost[15] = 370, vcost_b[15] = 290, cost_n[15] = 1;
    set_alpha(1.0);
    for (int i = 6; i <= N; i++) alpha[i] = 0.0;
}

static void unmeasured_short_block_is_priced_below_the_full_one(void **st) {
    (void)st;
    block_tables();
    /* nothing known of short blocks: the full block's alpha, and its costs
     * less the drafter rows a short block skips: the full pass is 65 ms
     * for 16 rows, so 5 drafts (6 rows) save 65 x 10 / 16 = 40.625 ms:
     * 209.545 - 40.625 = 168.92, rate 6 / 168.92 = 0.0355 against the full
     * block's 6 / 209.5 = 0.0286 (4 drafts: 5 / (194.99 - 44.69) = 0.0333,
     * 6: 6 / (224.09 - 36.56) = 0.0320). The short block is tried. */
    int32_t bd_full, bd;
    bool shrt = false;
    double est = 0;
    int32_t n_full = bd_spec_adapt_choose(alpha, cost, vcost_b, cost_n, N, &bd_full);
    assert_int_equal(n_full, 5);
    assert_int_equal(bd_spec_adapt_choose_block(alpha, cost, vcost_b, cost_n, s_alpha, s_alpha_n, s_cost, s_cost_n, N,
                                                16, -1, &bd, &shrt, &est),
                     5);
    assert_true(shrt);
    assert_int_equal(bd, 5);
    assert_true(fabs(est - 168.92) < 0.01);
    /* forced full: the same length, on the full block */
    assert_int_equal(bd_spec_adapt_choose_block(alpha, cost, vcost_b, cost_n, s_alpha, s_alpha_n, s_cost, s_cost_n, N,
                                                16, 0, &bd, &shrt, &est),
                     5);
    assert_false(shrt);
    /* never right (alpha 0): plain (a one-token short block at 151.36 -
     * 65 x 14 / 16 = 94.49 ms, 0.0106 against plain's 0.02); the probe is
     * that one-token short block */
    set_alpha(0.0);
    assert_int_equal(bd_spec_adapt_choose_block(alpha, cost, vcost_b, cost_n, s_alpha, s_alpha_n, s_cost, s_cost_n, N,
                                                16, -1, &bd, &shrt, &est),
                     0);
    assert_int_equal(bd, 1);
    assert_true(shrt);
    assert_true(fabs(est - 94.49) < 0.01);
    /* a block of 4 rows: one draft (2 rows) saves 65 x 2 / 4 = 32.5 ms,
     * 151.36 - 32.5 = 118.86 (3 drafts and more: the full block's cost) */
    assert_int_equal(bd_spec_adapt_choose_block(alpha, cost, vcost_b, cost_n, s_alpha, s_alpha_n, s_cost, s_cost_n, N,
                                                4, -1, &bd, &shrt, &est),
                     0);
    assert_true(fabs(est - 118.86) < 0.01);
    /* a plain step of 120 ms (above the fitted verify of 2 rows, 86.36):
     * the one-token short block's 94.49 would be below it, so it is
     * priced at the plain step, never below */
    cost[0] = vcost_b[0] = 120;
    bd_spec_adapt_choose_block(alpha, cost, vcost_b, cost_n, s_alpha, s_alpha_n, s_cost, s_cost_n, N, 16, -1, &bd,
                               &shrt, &est);
    assert_true(shrt);
    assert_int_equal(bd, 1);
    assert_true(fabs(est - 120.0) < 1e-9);
}

static void cheaper_short_block_with_equal_acceptance_wins(void **st) {
    (void)st;
    block_tables();
    /* short blocks measured: 5 drafts 170 ms (10 steps, weight 8), 6 drafts
     * 209 ms (1 step); positions 1..5 accepted, 6 rejected. The free line
     * (sw 9, sum w n 46, sum w n^2 236, sum w c 1569, sum w n c 8054) is
     * b = (9 x 8054 - 46 x 1569) / (9 x 236 - 46^2) = 312 / 8 = 39, a =
     * (1569 - 39 x 46) / 9 = -25: below the plain step (a one-token short
     * draft at 14 ms would look cheaper than plain, and the driver would
     * re-measure plain forever). So the line through plain: b = (8 x 5 x 120
     * + 6 x 159) / 236 = 24.381, cost(n) = 50 + 24.381 n; cost(5) = 171.9
     * (under the full block's 209.5), rate 6 / 171.9 = 0.0349 against the
     * full block's 6 / 209.5 = 0.0286 and cost(4): 5 / 147.5 = 0.0339. */
    for (int i = 1; i <= 5; i++) s_alpha_n[i] = 11;
    s_alpha[6] = 0.0, s_alpha_n[6] = 1;
    s_cost[5] = 170, s_cost_n[5] = 10;
    s_cost[6] = 209, s_cost_n[6] = 1;
    int32_t bd;
    bool shrt = false;
    double est = 0;
    assert_int_equal(bd_spec_adapt_choose_block(alpha, cost, vcost_b, cost_n, s_alpha, s_alpha_n, s_cost, s_cost_n, N,
                                                16, -1, &bd, &shrt, &est),
                     5);
    assert_true(shrt);
    assert_true(fabs(est - 171.9) < 0.1);
    assert_true(est > cost[0]); /* never below a plain step */
}

static void short_block_with_worse_acceptance_loses(void **st) {
    (void)st;
    block_tables();
    /* the same short costs, but the short block's drafts are right less
     * often: alpha 1 at position 1, 0.3 at 2 (observed); unobserved 3.. take
     * the full block's alpha capped at 0.3. E(1) = 2 at 50 + 24.381 = 74.38
     * ms: 0.0269; E(2) = 2.3 at 98.76: 0.0233; E(3) = 2.39 at 123.1: 0.0194.
     * The full block's 0.0286 wins: draft 5 on the full block. */
    s_alpha_n[1] = 11;
    s_alpha[2] = 0.3, s_alpha_n[2] = 11;
    s_cost[5] = 170, s_cost_n[5] = 10;
    s_cost[6] = 209, s_cost_n[6] = 1;
    int32_t bd;
    bool shrt = true;
    double est = 0;
    assert_int_equal(bd_spec_adapt_choose_block(alpha, cost, vcost_b, cost_n, s_alpha, s_alpha_n, s_cost, s_cost_n, N,
                                                16, -1, &bd, &shrt, &est),
                     5);
    assert_false(shrt);
    assert_true(fabs(est - 209.5) < 0.1);
    /* forced short: one token (0.0269 beats plain's 0.02) */
    assert_int_equal(bd_spec_adapt_choose_block(alpha, cost, vcost_b, cost_n, s_alpha, s_alpha_n, s_cost, s_cost_n, N,
                                                16, 1, &bd, &shrt, &est),
                     1);
    assert_true(shrt);
}

static void forced_short_without_a_measured_full_block(void **st) {
    (void)st;
    /* Forced short blocks after a warm-up of 4 on a short block, rejected at
     * position 1: plain 50 ms (20 steps), the warm-up 180 ms; no full block
     * measured (its tables hold the prior: alpha 1, no costs). The short
     * line through plain: b = 4 x 130 / 16 = 32.5, cost(n) = 50 + 32.5 n.
     * alpha: 0.5 at position 1 (one rejection from the prior 1), the
     * unobserved ones capped at 0.5: E(1) = 1.5 at 82.5 ms, 0.0182 a ms;
     * E(2) = 1.75 at 115, 0.0152; plain 1 / 50 = 0.02 wins. (A full block
     * priced at a plain step would cap every short cost at 50 ms: E(15) ~ 2
     * at 50 ms, 0.04, and a 15-token draft.) */
    block_tables();
    for (int i = 1; i <= N; i++) cost_n[i] = 0, cost[i] = vcost_b[i] = 0;
    set_alpha(1.0);
    s_alpha[1] = 0.5, s_alpha_n[1] = 1;
    s_cost[4] = 180, s_cost_n[4] = 1;
    int32_t bd = 0;
    bool shrt = false;
    double est = 0;
    assert_int_equal(bd_spec_adapt_choose_block(alpha, cost, vcost_b, cost_n, s_alpha, s_alpha_n, s_cost, s_cost_n, N,
                                                16, 1, &bd, &shrt, &est),
                     0);
    assert_int_equal(bd, 1);
    assert_true(shrt);
    assert_true(fabs(est - 82.5) < 0.01);
}

/* The warm-up drafted 2, both accepted; nothing else observed. Unbounded,
 * every position rates 1.0 and a cheap verify picks the full 15; bounded,
 * positions past 4 x 2 = 8 count as never accepted: E(8) = 9 at 10 + 8/3
 * ms (0.711) beats E(n > 8) = 9 at more cost, and plain (0.1). */
static void warm_up_reach_bounds_the_next_draft(void **st) {
    (void)st;
    cheap_verify();
    set_alpha(1.0);
    int32_t an[N + 1] = {0}, san[N + 1] = {0}, bd;
    double sa[N + 1];
    an[1] = an[2] = 1;
    for (int i = 0; i <= N; i++) sa[i] = 1.0;
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), N);
    assert_int_equal(bd_spec_adapt_bound(alpha, an, sa, san, N), 8);
    for (int i = 1; i <= N; i++) {
        assert_true(alpha[i] == (i <= 8 ? 1.0 : 0.0));
        assert_true(sa[i] == (i <= 8 ? 1.0 : 0.0));
    }
    assert_int_equal(bd_spec_adapt_choose(alpha, cost, NULL, cost_n, N, &bd), 8);
    /* observed up to 4 (or further): 16 > n_max, nothing is cut */
    set_alpha(1.0);
    an[4] = 1;
    assert_int_equal(bd_spec_adapt_bound(alpha, an, NULL, NULL, N), N);
    assert_true(alpha[N] == 1.0);
    /* nothing observed at all: n_max, estimates as they were */
    int32_t none[N + 1] = {0};
    assert_int_equal(bd_spec_adapt_bound(alpha, none, NULL, NULL, N), N);
    assert_true(alpha[N] == 1.0);
}

/* A short block observed right at 1..5 and wrong once at 6 (its estimate
 * 0.5 there); the full block observed only at 1..2. The full block's
 * untried positions take the short block's lower estimate (6: 0.5) and
 * none rates above the one before it (7..15: 0.5; 3..5 stay 1.0, the short
 * block's own figure). The reach is 4 x 6 = 24 > 15: no cut. Observed
 * positions keep their estimates whatever the other block says. */
static void short_block_observations_bound_the_full_blocks_untried_positions(void **st) {
    (void)st;
    set_alpha(1.0);
    int32_t an[N + 1] = {0}, san[N + 1] = {0};
    double sa[N + 1];
    for (int i = 0; i <= N; i++) sa[i] = 1.0;
    an[1] = an[2] = 1;
    for (int i = 1; i <= 6; i++) san[i] = 1;
    sa[6] = 0.5;
    sa[2] = 0.25; /* observed by the full block: not taken */
    assert_int_equal(bd_spec_adapt_bound(alpha, an, sa, san, N), N);
    for (int i = 1; i <= N; i++) assert_true(alpha[i] == (i <= 5 ? 1.0 : 0.5));
    /* the short block's own estimates are left alone */
    assert_true(sa[2] == 0.25 && sa[6] == 0.5 && sa[7] == 1.0);
}

/* The acceptance update. A full-block warm-up of 2 rejected at 1: alpha(1)
 * moves half way to 0 (its first observation: 1 / (0 + 2)), 0.5, and the
 * positions never reached fall to it. A short block then rejected at 1 for
 * the first time starts from the full block's 0.5, not its prior 1.0:
 * 0.25 (0.5 from the prior). Its next observation is its own: 0.25 moves
 * a third of the way to 0. A short block's unreached positions are left
 * alone (bd_spec_adapt_choose_block fills them). The step never falls
 * below 15 %: the eleventh observation of an estimate 1.0 rejected gives
 * 0.85, not 1 - 1/12. */
static void first_observation_starts_from_the_other_blocks_estimate(void **st) {
    (void)st;
    double fa[N + 1], sa[N + 1];
    int32_t fan[N + 1] = {0}, san[N + 1] = {0};
    for (int i = 0; i <= N; i++) fa[i] = sa[i] = 1.0;
    bd_spec_adapt_learn(fa, fan, sa, N, true, 2, 0);
    assert_true(fa[1] == 0.5 && fan[1] == 1 && fan[2] == 0);
    for (int i = 2; i <= N; i++) assert_true(fa[i] == 0.5);
    bd_spec_adapt_learn(sa, san, fa, N, false, 2, 0);
    assert_true(sa[1] == 0.25 && san[1] == 1 && san[2] == 0 && sa[2] == 1.0);
    bd_spec_adapt_learn(sa, san, fa, N, false, 1, 0);
    assert_true(fabs(sa[1] - 0.25 * 2.0 / 3.0) < 1e-15 && san[1] == 2);
    /* accepted at 1 on a first observation: from 0.5 towards 1 */
    double sb[N + 1];
    int32_t sbn[N + 1] = {0};
    for (int i = 0; i <= N; i++) sb[i] = 1.0;
    bd_spec_adapt_learn(sb, sbn, fa, N, false, 1, 1);
    assert_true(sb[1] == 0.75);
    /* no other block, and the 15 % floor */
    double a[N + 1];
    int32_t an[N + 1] = {0};
    for (int i = 0; i <= N; i++) a[i] = 1.0;
    an[1] = 10;
    bd_spec_adapt_learn(a, an, NULL, N, true, 3, 0);
    assert_true(fabs(a[1] - 0.85) < 1e-15 && an[1] == 11 && an[2] == 0);
    for (int i = 2; i <= N; i++) assert_true(a[i] == a[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(always_right_drafts_full_blocks), cmocka_unit_test(never_right_goes_plain),
        cmocka_unit_test(first_k_right_stops_after_k),     cmocka_unit_test(expensive_verify_goes_plain),
        cmocka_unit_test(moderate_acceptance_picks_the_optimum),
        cmocka_unit_test(slow_drafter_cheap_verify_extrapolates_from_drafts),
        cmocka_unit_test(one_measured_draft_extrapolates_from_verify_times),
        cmocka_unit_test(one_line_through_all_drafts_prices_one_more_row),
        cmocka_unit_test(one_measured_draft_prices_shorter_ones_with_its_pass),
        cmocka_unit_test(a_draft_cheaper_than_plain_means_a_stale_plain_time),
        cmocka_unit_test(probe_gap_bounds_the_probes_loss),
        cmocka_unit_test(unmeasured_short_block_is_priced_below_the_full_one),
        cmocka_unit_test(cheaper_short_block_with_equal_acceptance_wins),
        cmocka_unit_test(short_block_with_worse_acceptance_loses),
        cmocka_unit_test(forced_short_without_a_measured_full_block),
        cmocka_unit_test(a_draft_must_beat_plain_by_the_margin),
        cmocka_unit_test(warm_up_reach_bounds_the_next_draft),
        cmocka_unit_test(short_block_observations_bound_the_full_blocks_untried_positions),
        cmocka_unit_test(first_observation_starts_from_the_other_blocks_estimate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
