/*
 * test_spec_sampling.c - speculative sampling is lossless (statistically).
 *
 * Models: the stories260K target (vocabulary 512) with its trained DFlash
 * drafter; and a second group on a hybrid qwen35 target (Gated DeltaNet
 * layers whose recurrent state every rejection rolls back), drafted by
 * draft-simple with its own weights in F16 (measured: 1866 of 3000 drafts
 * accepted; the wrong rule scores chi2 ~2000 against a critical ~84). Sampling: T = 1, top-k 8, top-p 0.95, prompt "Tom and" (a high-entropy start). For each of N runs (seed =
 * run index) the first three generated tokens (x1, x2, x3) are recorded.
 * x2 and x3 pass through the speculative accept/reject step (x1 comes from
 * the prefill), so their joint law is what the test probes.
 *
 * Expected law: P(x1, x2, x3) = p(x1) p(x2 | x1) p(x3 | x1 x2), where each
 * p is the distribution plain sampling draws from (bd_sampler_dist after a
 * plain forward). Cells with expected count < 5 are pooled. Pearson's
 * chi-square is compared with the critical value at significance 0.001
 * (Wilson-Hilferty approximation). Any observed sequence outside the
 * support fails outright.
 *
 * Calibration and power: plain sampling must pass the same test, and the
 * speculative loop with a deliberately wrong acceptance rule (accept any
 * draft whose probability exceeds 0.1) must fail it.
 *
 * With a repetition penalty the law of x3 depends on x1 and x2 being in
 * the history; in the speculative loop x2 (and x3) come from verify rows
 * whose history includes the drafts before them. The expected law is then
 * computed here from the raw logits with the penalty applied by this file
 * (llama.cpp's rule, independent of the sampler) and the rest of the
 * chain from bd_sampler_dist without a penalty. The penalty (0.8, so
 * repeated tokens become more likely and the effect is large) must pass
 * plain and speculative, and a verify loop that leaves the drafts out of
 * the history must fail.
 *
 * The same again with the other transforms of the sampler: a logit bias
 * (applied first), frequency and presence penalties (llama.cpp's rule:
 * minus count * freq + presence for a token seen in the window, after the
 * repetition penalty), written out here too. Plain and speculative must
 * pass; with the frequency penalty the wrong-history loop must fail.
 *
 * Stronger than the law: seeded_speculative_is_plain checks that each
 * seed gives plain sampling's very ids (see there).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "blockdraft.h"
#include "model/synth.h"
#include "decode/sampler.h"
#include "decode/spec_internal.h"

#define N_RUNS 3000
#define MAXC 4096

typedef struct {
    int32_t x[3];
    double p;
    long obs;
} cell;

static char g_target[1024], g_draft[1024];
/* DFlash (stories260K's trained drafter) or draft-simple (the hybrid
 * group: a Q8_0 qwen35 target and its own weights in F16 as the draft
 * model, whose greedy drafts agree with the target's greedy choice most of
 * the time but not always) */
static bd_spec_type g_spec_type = BD_SPEC_DRAFT_DFLASH;
static bd_model *g_m, *g_dm;
static cell g_cells[MAXC];
static int g_nc;
static int32_t g_prompt[16];
static int g_np;
static bd_sampler_params g_sp;

/* llama.cpp's bias and penalties, written out here: the bias added first;
 * then each distinct token among the last last_n of hist, seen c times:
 * logit / pen when positive, * pen otherwise, then minus c * freq + pres. */
static void ref_transform(float *lg, int32_t n_vocab, const int32_t *hist, int n_hist, const bd_sampler_params *p) {
    static int count[1 << 16];
    assert_true(n_vocab <= (int32_t)(sizeof count / sizeof count[0]));
    for (int i = 0; i < p->n_logit_bias; i++) lg[p->logit_bias[i].token] += p->logit_bias[i].bias;
    memset(count, 0, (size_t)n_vocab * sizeof count[0]);
    for (int i = n_hist > p->repeat_last_n ? n_hist - p->repeat_last_n : 0; i < n_hist; i++) count[hist[i]]++;
    for (int32_t t = 0; t < n_vocab; t++) {
        if (!count[t]) continue;
        lg[t] = lg[t] <= 0 ? lg[t] * p->repeat_penalty : lg[t] / p->repeat_penalty;
        lg[t] -= (float)count[t] * p->frequency_penalty + p->presence_penalty;
    }
}

static int dist_after(bd_session *s, const int32_t *toks, int n, int32_t *ids, float *pr) {
    char err[256];
    bd_session_truncate(s, 0);
    assert_true(bd_session_forward(s, toks, n, BD_LOGITS_LAST, err, sizeof err));
    int32_t V = bd_model_n_vocab(g_m);
    float *lg = malloc((size_t)V * sizeof *lg);
    assert_non_null(lg);
    memcpy(lg, bd_session_logits(s, 0), (size_t)V * sizeof *lg);
    bd_sampler_params plain = g_sp;
    ref_transform(lg, V, toks, n, &g_sp);
    plain.repeat_penalty = 1.0f;
    plain.frequency_penalty = plain.presence_penalty = 0.0f;
    plain.logit_bias = NULL;
    plain.n_logit_bias = 0;
    bd_sampler *smp = bd_sampler_create(&plain, V);
    const int32_t *di;
    const float *dp;
    int k = bd_sampler_dist(smp, lg, NULL, 0, &di, &dp);
    free(lg);
    memcpy(ids, di, (size_t)k * sizeof *ids);
    memcpy(pr, dp, (size_t)k * sizeof *pr);
    bd_sampler_free(smp);
    return k;
}

/* Enumerate the support of (x1, x2, x3) with exact probabilities. */
static void build_expected(void) {
    char err[256];
    bd_session_params sp = bd_session_default_params();
    sp.n_ctx = 64;
    sp.n_threads = 1;
    bd_session *s = bd_session_create(g_m, &sp, err, sizeof err);
    assert_non_null(s);
    int32_t seq[32], i1[64], i2[64], i3[64];
    float p1[64], p2[64], p3[64];
    memcpy(seq, g_prompt, (size_t)g_np * sizeof *seq);
    int k1 = dist_after(s, seq, g_np, i1, p1);
    g_nc = 0;
    for (int a = 0; a < k1; a++) {
        seq[g_np] = i1[a];
        int k2 = dist_after(s, seq, g_np + 1, i2, p2);
        for (int b = 0; b < k2; b++) {
            seq[g_np + 1] = i2[b];
            int k3 = dist_after(s, seq, g_np + 2, i3, p3);
            for (int c = 0; c < k3; c++) {
                assert_true(g_nc < MAXC);
                cell *e = &g_cells[g_nc++];
                e->x[0] = i1[a];
                e->x[1] = i2[b];
                e->x[2] = i3[c];
                e->p = (double)p1[a] * p2[b] * p3[c];
                e->obs = 0;
            }
        }
    }
    bd_session_free(s);
}

typedef struct {
    int32_t got[3];
    int n;
} rec;

static bool on_tok(int32_t t, void *u) {
    rec *r = u;
    if (r->n < 3) r->got[r->n++] = t;
    return r->n < 3;
}

/* A one-thread target session of n_ctx positions (tapping the drafter's
 * layers for the DFlash group). */
static bd_session *target_session(int32_t n_ctx) {
    char err[256];
    bd_session_params sp = bd_session_default_params();
    int32_t taps[16];
    sp.n_ctx = n_ctx;
    sp.n_threads = 1;
    if (g_spec_type == BD_SPEC_DRAFT_DFLASH) {
        sp.n_tap = bd_dflash_tap_layers(g_dm, taps, 16);
        sp.tap_layers = taps;
    }
    bd_session *s = bd_session_create(g_m, &sp, err, sizeof err);
    assert_non_null(s);
    return s;
}

/* Returns chi-square minus the critical value (> 0: reject). */
static double run_experiment(bool spec) {
    char err[256];
    bd_session *s = target_session(64);
    bd_spec *x = NULL;
    if (spec) {
        bd_spec_params p = bd_spec_default_params();
        p.type = g_spec_type;
        p.n_max = 3;
        x = bd_spec_create(s, g_dm, &p, NULL, 0, err, sizeof err);
        assert_non_null(x);
    }
    for (int i = 0; i < g_nc; i++) g_cells[i].obs = 0;
    long drafted = 0, accepted = 0, outside = 0;
    for (int run = 0; run < N_RUNS; run++) {
        bd_gen_params gp = {.n_predict = 3, .sampling = g_sp, .ignore_eog = true};
        gp.sampling.seed = 1000 + (uint64_t)run;
        rec r = {{0}, 0};
        bd_gen_stats st;
        bool ok = spec ? bd_spec_generate(x, g_prompt, g_np, &gp, on_tok, &r, &st, err, sizeof err)
                       : bd_generate(s, g_prompt, g_np, &gp, on_tok, &r, &st, err, sizeof err);
        assert_true(ok);
        assert_int_equal(r.n, 3);
        drafted += st.spec.n_drafted;
        accepted += st.spec.n_accepted;
        int j = 0;
        while (j < g_nc && memcmp(g_cells[j].x, r.got, sizeof r.got)) j++;
        if (j == g_nc) {
            if (!outside++) printf("sampled (%d %d %d), which has probability 0\n", r.got[0], r.got[1], r.got[2]);
            continue;
        }
        g_cells[j].obs++;
    }
    /* pool cells with expected count < 5 */
    double chi2 = 0, pool_e = 0, pool_o = 0;
    int df = -1;
    for (int i = 0; i < g_nc; i++) {
        double e = g_cells[i].p * N_RUNS;
        if (e < 5) {
            pool_e += e;
            pool_o += (double)g_cells[i].obs;
            continue;
        }
        chi2 += (g_cells[i].obs - e) * (g_cells[i].obs - e) / e;
        df++;
    }
    if (pool_e > 0) {
        chi2 += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        df++;
    }
    double z = 3.0902; /* upper 0.001 quantile of N(0,1) */
    double h = 2.0 / (9.0 * df);
    double crit = df * pow(1 - h + z * sqrt(h), 3);
    printf("%s%s%s (penalty %.2f, freq %.2f, presence %.2f, %d biases): %d runs, %d cells (df %d), chi2 %.1f, critical %.1f at alpha 0.001; drafted %ld accepted %ld\n",
           spec ? "speculative" : "plain", spec && bd_spec_test_wrong_rule ? " (WRONG rule)" : "",
           spec && bd_spec_test_wrong_history ? " (WRONG history)" : "", (double)g_sp.repeat_penalty,
           (double)g_sp.frequency_penalty, (double)g_sp.presence_penalty, g_sp.n_logit_bias, N_RUNS, g_nc, df,
           chi2, crit, drafted, accepted);
    if (outside) printf("%ld runs outside the support: rejected outright\n", outside);
    if (spec) assert_true(drafted > N_RUNS / 2); /* the accept/reject path really ran */
    bd_spec_free(x);
    bd_session_free(s);
    return outside ? INFINITY : chi2 - crit;
}

static void plain_matches(void **st) {
    (void)st;
    assert_true(run_experiment(false) < 0);
}

static void speculative_matches(void **st) {
    (void)st;
    bd_spec_test_wrong_rule = false;
    assert_true(run_experiment(true) < 0);
}

static void wrong_rule_is_detected(void **st) {
    (void)st;
    bd_spec_test_wrong_rule = true;
    double d = run_experiment(true);
    bd_spec_test_wrong_rule = false;
    assert_true(d > 0);
}

/* The same with a repetition penalty of 0.8 (repeats favoured: measured,
 * it moves x3 the most; the wrong-history loop then scores chi2 ~240
 * against a critical ~96 and samples sequences outside the support, the
 * right one ~52). Penalties > 1 move it less here: 1.3 gave the wrong
 * loop 67 against 103. */
static void use_penalty(float pen) {
    g_sp.repeat_penalty = pen;
    g_sp.repeat_last_n = 64;
    build_expected();
}

static void plain_matches_penalty(void **st) {
    (void)st;
    use_penalty(0.8f);
    assert_true(run_experiment(false) < 0);
}

static void speculative_matches_penalty(void **st) {
    (void)st;
    use_penalty(0.8f);
    assert_true(run_experiment(true) < 0);
}

static void wrong_history_is_detected(void **st) {
    (void)st;
    use_penalty(0.8f);
    bd_spec_test_wrong_history = true;
    double d = run_experiment(true);
    bd_spec_test_wrong_history = false;
    assert_true(d > 0);
}

/* Bias, frequency and presence penalties (repetition penalty off). The
 * bias lifts two tokens that are unlikely after "Tom and" and pushes down
 * the most likely one; negative frequency and presence penalties (-2 per
 * occurrence, -1 once) favour repeats so, as with the repetition penalty
 * above, the law of x3 depends on x1 and x2 being in the history.
 * Measured: plain chi2 49, speculative 69, the wrong-history loop 292,
 * against a critical 107 (df 66). Weaker settings lose the power to see
 * the wrong loop (freq -0.8 / presence 0.3: 67 against 129). */
static bd_logit_bias g_bias[3];

static void use_bias_and_penalties(void) {
    g_sp.repeat_penalty = 1.0f;
    g_sp.repeat_last_n = 64;
    g_sp.frequency_penalty = -2.0f;
    g_sp.presence_penalty = -1.0f;
    /* bias: token ids from the plain distribution after the prompt */
    bd_sampler_params plain = g_sp;
    plain.frequency_penalty = plain.presence_penalty = 0.0f;
    plain.logit_bias = NULL;
    plain.n_logit_bias = 0;
    char err[256];
    bd_session_params sp = bd_session_default_params();
    sp.n_ctx = 64;
    sp.n_threads = 1;
    bd_session *s = bd_session_create(g_m, &sp, err, sizeof err);
    assert_non_null(s);
    assert_true(bd_session_forward(s, g_prompt, g_np, BD_LOGITS_LAST, err, sizeof err));
    const float *lg = bd_session_logits(s, 0);
    int32_t V = bd_model_n_vocab(g_m), best = 0, lo1 = -1, lo2 = -1;
    for (int32_t t = 1; t < V; t++)
        if (lg[t] > lg[best]) best = t;
    /* two tokens ranked 20th and 30th: outside top-k 8 unless lifted */
    int32_t *rank = malloc((size_t)V * sizeof *rank);
    assert_non_null(rank);
    for (int32_t t = 0; t < V; t++) {
        rank[t] = 0;
        for (int32_t u = 0; u < V; u++) rank[t] += lg[u] > lg[t];
    }
    for (int32_t t = 0; t < V; t++) {
        if (rank[t] == 20) lo1 = t;
        if (rank[t] == 30) lo2 = t;
    }
    free(rank);
    bd_session_free(s);
    assert_true(lo1 >= 0 && lo2 >= 0);
    g_bias[0] = (bd_logit_bias){best, -1.5f};
    g_bias[1] = (bd_logit_bias){lo1, 4.0f};
    g_bias[2] = (bd_logit_bias){lo2, 3.0f};
    g_sp.logit_bias = g_bias;
    g_sp.n_logit_bias = 3;
    build_expected();
}

static void plain_matches_bias_penalties(void **st) {
    (void)st;
    use_bias_and_penalties();
    assert_true(run_experiment(false) < 0);
}

static void speculative_matches_bias_penalties(void **st) {
    (void)st;
    use_bias_and_penalties();
    assert_true(run_experiment(true) < 0);
}

static void wrong_history_is_detected_freq(void **st) {
    (void)st;
    use_bias_and_penalties();
    bd_spec_test_wrong_history = true;
    double d = run_experiment(true);
    bd_spec_test_wrong_history = false;
    assert_true(d > 0);
}

static int setup(void **st) {
    (void)st;
    char err[256];
    const char *sh = getenv("BD_SHARED");
    if (!sh) sh = "../shared";
    snprintf(g_target, sizeof g_target, "%s/fixtures/stories260K/stories260K.gguf", sh);
    snprintf(g_draft, sizeof g_draft, "%s/fixtures/stories260K/stories260K-dflash.gguf", sh);
    g_m = bd_model_open(g_target, err, sizeof err);
    g_dm = bd_model_open(g_draft, err, sizeof err);
    if (!g_m || !g_dm) return -1;
    g_np = bd_tokenize(g_m, "Tom and", 7, true, false, g_prompt, 16);
    g_sp = bd_sampler_default_params();
    g_sp.temperature = 1.0f;
    g_sp.top_k = 8;
    g_sp.top_p = 0.95f;
    g_sp.min_p = 0.0f;
    build_expected();
    return 0;
}

static int teardown(void **st) {
    (void)st;
    bd_model_free(g_dm);
    bd_model_free(g_m);
    g_dm = g_m = NULL;
    return 0;
}

/* ------------------------------------------------------------------------
 * Seeded identity: the verifier draws each row's token as plain sampling
 * does (one uniform per emitted token, spec.c accept_row), so for every
 * seed the speculative ids equal plain sampling's, whatever the draft
 * lengths: fixed n_max 1 and 7 and the adaptive length (whose choices
 * depend on measured time). A power check: the deliberately wrong rule
 * must break the identity for some seeds.
 * ---------------------------------------------------------------------- */

#define SEED_RUNS 40
#define SEED_TOKENS 16

typedef struct {
    int32_t ids[SEED_TOKENS];
    int n;
} seq;

static bool on_seq(int32_t t, void *u) {
    seq *q = u;
    if (q->n < SEED_TOKENS) q->ids[q->n++] = t;
    return q->n < SEED_TOKENS;
}

/* Runs SEED_RUNS seeds plain, then speculative with n_max (0: adaptive);
 * returns how many seeds gave the plain ids. */
static int seeded_identical(int32_t n_max) {
    char err[256];
    bd_session *s = target_session(96);
    bd_spec_params p = bd_spec_default_params();
    p.type = g_spec_type;
    p.n_max = n_max > 0 ? n_max : 7;
    p.adaptive = n_max == 0;
    bd_spec *x = bd_spec_create(s, g_dm, &p, NULL, 0, err, sizeof err);
    assert_non_null(x);
    int same = 0;
    long drafted = 0, accepted = 0;
    for (int run = 0; run < SEED_RUNS; run++) {
        bd_gen_params gp = {.n_predict = SEED_TOKENS, .sampling = g_sp, .ignore_eog = true};
        gp.sampling.seed = 7000 + (uint64_t)run;
        seq a = {{0}, 0}, b = {{0}, 0};
        bd_gen_stats st;
        assert_true(bd_generate(s, g_prompt, g_np, &gp, on_seq, &a, &st, err, sizeof err));
        assert_true(bd_spec_generate(x, g_prompt, g_np, &gp, on_seq, &b, &st, err, sizeof err));
        assert_int_equal(a.n, SEED_TOKENS);
        assert_int_equal(b.n, SEED_TOKENS);
        drafted += st.spec.n_drafted;
        accepted += st.spec.n_accepted;
        same += !memcmp(a.ids, b.ids, sizeof a.ids);
    }
    printf("seeded, n_max %s%d%s: %d of %d seeds give plain sampling's %d ids; drafted %ld accepted %ld\n",
           n_max ? "" : "adaptive up to ", p.n_max, bd_spec_test_wrong_rule ? " (WRONG rule)" : "", same,
           SEED_RUNS, SEED_TOKENS, drafted, accepted);
    /* rejections and acceptances both ran (the wrong rule may accept all) */
    assert_true(accepted > 0 && (bd_spec_test_wrong_rule || accepted < drafted));
    bd_spec_free(x);
    bd_session_free(s);
    return same;
}

static void seeded_speculative_is_plain(void **st) {
    (void)st;
    bd_spec_test_wrong_rule = false;
    static const int32_t lengths[] = {0, 1, 7}; /* 0: adaptive (up to 7) */
    for (int i = 0; i < 3; i++) assert_int_equal(seeded_identical(lengths[i]), SEED_RUNS);
    bd_spec_test_wrong_rule = true;
    int same = seeded_identical(3);
    bd_spec_test_wrong_rule = false;
    assert_true(same < SEED_RUNS);
}

/* The hybrid group: speculative sampling on a Gated DeltaNet target, where
 * every rejected draft rolls the recurrent state back. */
static char g_dir[64];
static int setup_hybrid(void **st) {
    (void)st;
    char err[256], vocab[1024];
    const char *sh = getenv("BD_SHARED");
    if (!sh) sh = "../shared";
    snprintf(vocab, sizeof vocab, "%s/fixtures/stories260K/stories260K.gguf", sh);
    snprintf(g_dir, sizeof g_dir, "/tmp/bd-spec-hybrid-XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_target, sizeof g_target, "%s/t.gguf", g_dir);
    snprintf(g_draft, sizeof g_draft, "%s/d.gguf", g_dir);
    bd_synth_opts o = {.arch = "qwen35", .shape = "tiny", .mix = "q8_0", .seed = 21, .tied = -1,
                       .vocab_path = vocab, .n_threads = 1};
    if (!bd_synth_write(&o, g_target, err, sizeof err)) return -1;
    o.mix = "f16";
    if (!bd_synth_write(&o, g_draft, err, sizeof err)) return -1;
    g_m = bd_model_open(g_target, err, sizeof err);
    g_dm = bd_model_open(g_draft, err, sizeof err);
    if (!g_m || !g_dm) return -1;
    g_spec_type = BD_SPEC_DRAFT_SIMPLE;
    g_np = bd_tokenize(g_m, "Tom and", 7, true, false, g_prompt, 16);
    g_sp = bd_sampler_default_params();
    g_sp.temperature = 1.0f;
    g_sp.top_k = 8;
    g_sp.top_p = 0.95f;
    g_sp.min_p = 0.0f;
    build_expected();
    return 0;
}

static int teardown_hybrid(void **st) {
    teardown(st);
    unlink(g_target);
    unlink(g_draft);
    rmdir(g_dir);
    g_spec_type = BD_SPEC_DRAFT_DFLASH;
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_matches),
        cmocka_unit_test(speculative_matches),
        cmocka_unit_test(wrong_rule_is_detected),
        cmocka_unit_test(plain_matches_penalty),
        cmocka_unit_test(speculative_matches_penalty),
        cmocka_unit_test(wrong_history_is_detected),
        cmocka_unit_test(plain_matches_bias_penalties),
        cmocka_unit_test(speculative_matches_bias_penalties),
        cmocka_unit_test(wrong_history_is_detected_freq),
        cmocka_unit_test(seeded_speculative_is_plain),
    };
    const struct CMUnitTest hybrid[] = {
        cmocka_unit_test(plain_matches),
        cmocka_unit_test(speculative_matches),
        cmocka_unit_test(wrong_rule_is_detected),
        cmocka_unit_test(seeded_speculative_is_plain),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    return rc | cmocka_run_group_tests_name("hybrid qwen35 target, draft-simple", hybrid, setup_hybrid,
                                            teardown_hybrid);
}
