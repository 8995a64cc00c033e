/*
 * test_grammar_sampling.c - speculative sampling under a grammar draws
 * from exactly the masked distribution plain sampling draws from.
 *
 * The chi-square design of test_spec_sampling.c, with a grammar whose mask
 * depends on what came before: `root ::= [a-z ]{0,5}` (at most five
 * characters, lowercase letters and spaces), so the tokens allowed after
 * " his" are very different from those allowed after " his do". Model:
 * stories260K with its
 * trained DFlash drafter (its drafts are right often, so verify rows
 * after accepted drafts are masked with the advanced state); T = 1,
 * top-k 8, prompt "Tom and", EOG ignored. For N runs (seed = run index)
 * the first three generated tokens are recorded; when the five characters
 * are used up the grammar ends the text, recorded as -1.
 *
 * Expected law: the product of the plain sampler's distributions
 * (bd_sampler_dist) after masking the logits with an independent
 * predicate written here (a token is allowed iff its piece is non-empty,
 * only [a-z ], and fits in the characters left), not with the grammar
 * engine. Pearson's chi-square against the critical value at 0.001
 * (Wilson-Hilferty); a sample outside the support fails outright.
 *
 * Calibration and power: plain sampling under the grammar passes; the
 * speculative loop passes; two deliberately wrong variants fail: the wrong
 * acceptance rule of spec_internal.h (accept any draft whose probability
 * exceeds 0.1), and a wrong grammar hook (bd_grammar_test_stale_rows: the
 * grammar is not advanced over accepted drafts, so later rows are masked
 * with a stale state).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "blockdraft.h"
#include "decode/grammar.h"
#include "decode/sampler.h"
#include "decode/spec_internal.h"

#define N_RUNS 3000
#define MAXC 8192
#define LIMIT 5
#define GRAMMAR "root ::= [a-z ]{0,5}"

typedef struct {
    int32_t x[3];
    double p;
    long obs;
} cell;

static bd_model *g_m, *g_dm;
static bd_grammar_vocab *g_v;
static bd_grammar *g_g;
static cell g_cells[MAXC];
static int g_nc;
static int32_t g_prompt[16];
static int g_np;
static bd_sampler_params g_sp;
static int32_t g_len[4096]; /* piece length, or -1 if it is not [a-z ]+ */

static void load_pieces(void) {
    int32_t V = bd_model_n_vocab(g_m);
    assert_true(V <= 4096);
    for (int32_t t = 0; t < V; t++) {
        char buf[256];
        int n = bd_token_piece(g_m, t, buf, sizeof buf, false);
        g_len[t] = n > 0 ? n : -1;
        for (int i = 0; i < n; i++)
            if (!((buf[i] >= 'a' && buf[i] <= 'z') || buf[i] == ' ')) g_len[t] = -1;
        if (bd_token_is_eog(g_m, t)) g_len[t] = -1; /* EOG is ignored in this test */
    }
}

/* Masked plain distribution after toks, with `used` characters spent. */
static int dist_after(bd_session *s, const int32_t *toks, int n, int used, int32_t *ids, float *pr) {
    char err[256];
    int32_t V = bd_model_n_vocab(g_m);
    bd_session_truncate(s, 0);
    assert_true(bd_session_forward(s, toks, n, BD_LOGITS_LAST, err, sizeof err));
    float *lg = malloc((size_t)V * sizeof *lg);
    const float *raw = bd_session_logits(s, 0);
    int allowed = 0;
    for (int32_t t = 0; t < V; t++) {
        bool ok = g_len[t] > 0 && used + g_len[t] <= LIMIT;
        lg[t] = ok ? raw[t] : -INFINITY;
        allowed += ok;
    }
    int k = 0;
    if (allowed == 0) { /* the grammar ends the text */
        ids[0] = -1;
        pr[0] = 1.0f;
        k = 1;
    } else {
        bd_sampler *smp = bd_sampler_create(&g_sp, V);
        const int32_t *di;
        const float *dp;
        k = bd_sampler_dist(smp, lg, NULL, 0, &di, &dp); /* no penalty: no history */
        memcpy(ids, di, (size_t)k * sizeof *ids);
        memcpy(pr, dp, (size_t)k * sizeof *pr);
        bd_sampler_free(smp);
    }
    free(lg);
    return k;
}

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
    int k1 = dist_after(s, seq, g_np, 0, i1, p1);
    g_nc = 0;
    for (int a = 0; a < k1; a++) {
        int u1 = i1[a] >= 0 ? g_len[i1[a]] : 0;
        int k2 = 1;
        if (i1[a] >= 0) {
            seq[g_np] = i1[a];
            k2 = dist_after(s, seq, g_np + 1, u1, i2, p2);
        } else {
            i2[0] = -1, p2[0] = 1;
        }
        for (int b = 0; b < k2; b++) {
            int u2 = u1 + (i2[b] >= 0 ? g_len[i2[b]] : 0);
            int k3 = 1;
            if (i2[b] >= 0) {
                seq[g_np + 1] = i2[b];
                k3 = dist_after(s, seq, g_np + 2, u2, i3, p3);
            } else {
                i3[0] = -1, p3[0] = 1;
            }
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

/* Upper tail of the chi-square distribution, Q(df/2, x/2), by the series
 * for the lower incomplete gamma function (x < a + 1) or its continued
 * fraction (Lentz); for the report only (the test decides with the
 * critical value). */
static double chi2_pvalue(double x, int df) {
    double a = df / 2.0, y = x / 2.0;
    if (y <= 0) return 1.0;
    double lg = lgamma(a);
    if (y < a + 1) {
        double sum = 1.0 / a, term = sum;
        for (int n = 1; n < 1000; n++) {
            term *= y / (a + n);
            sum += term;
            if (term < sum * 1e-15) break;
        }
        return 1.0 - sum * exp(-y + a * log(y) - lg);
    }
    double b = y + 1 - a, c = 1e300, d = 1 / b, f = d;
    for (int i = 1; i < 1000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1 / d;
        double del = d * c;
        f *= del;
        if (fabs(del - 1) < 1e-15) break;
    }
    return exp(-y + a * log(y) - lg) * f;
}

typedef struct {
    double excess;  /* chi-square minus the critical value (> 0: reject) */
    long outside;   /* samples of probability 0 */
    long drafted, accepted;
} result;

static result run_experiment(bool spec) {
    char err[256];
    bd_session_params sp = bd_session_default_params();
    int32_t taps[16];
    sp.n_ctx = 64;
    sp.n_threads = 1;
    sp.n_tap = bd_dflash_tap_layers(g_dm, taps, 16);
    sp.tap_layers = taps;
    bd_session *s = bd_session_create(g_m, &sp, err, sizeof err);
    assert_non_null(s);
    bd_spec *x = NULL;
    if (spec) {
        bd_spec_params p = bd_spec_default_params();
        p.type = BD_SPEC_DRAFT_DFLASH;
        p.n_max = 3;
        x = bd_spec_create(s, g_dm, &p, NULL, 0, err, sizeof err);
        assert_non_null(x);
    }
    for (int i = 0; i < g_nc; i++) g_cells[i].obs = 0;
    result res = {0};
    for (int run = 0; run < N_RUNS; run++) {
        /* n_predict above 3 (the callback stops at 3), so that a step
         * drafts up to n_max tokens and x3 often comes from a row after
         * an accepted draft */
        bd_gen_params gp = {.n_predict = 10, .sampling = g_sp, .ignore_eog = true, .grammar = g_g};
        gp.sampling.seed = 1000 + (uint64_t)run;
        rec r = {{-1, -1, -1}, 0};
        bd_gen_stats st;
        bool ok = spec ? bd_spec_generate(x, g_prompt, g_np, &gp, on_tok, &r, &st, err, sizeof err)
                       : bd_generate(s, g_prompt, g_np, &gp, on_tok, &r, &st, err, sizeof err);
        if (!ok) fail_msg("generation failed: %s", err);
        if (r.n < 3) assert_true(st.stopped_eog); /* only the grammar ends early */
        res.drafted += st.spec.n_drafted;
        res.accepted += st.spec.n_accepted;
        int j = 0;
        while (j < g_nc && memcmp(g_cells[j].x, r.got, sizeof r.got)) j++;
        if (j == g_nc) {
            res.outside++;
            continue;
        }
        g_cells[j].obs++;
    }
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
    printf("%s%s%s: %d runs, %d cells (df %d), chi2 %.1f (p = %.3g), critical %.1f at alpha 0.001; %ld outside the "
           "support; drafted %ld accepted %ld\n",
           spec ? "speculative" : "plain", spec && bd_spec_test_wrong_rule ? " (WRONG acceptance rule)" : "",
           spec && bd_grammar_test_stale_rows ? " (WRONG grammar hook)" : "", N_RUNS, g_nc, df, chi2,
           chi2_pvalue(chi2, df), crit, res.outside, res.drafted, res.accepted);
    if (spec) {
        assert_true(res.drafted > N_RUNS / 2); /* the accept/reject path really ran */
        assert_true(res.accepted > N_RUNS / 10); /* ... with rows after accepted drafts */
    }
    bd_spec_free(x);
    bd_session_free(s);
    res.excess = chi2 - crit;
    return res;
}

static void plain_matches(void **st) {
    (void)st;
    result r = run_experiment(false);
    assert_int_equal(r.outside, 0);
    assert_true(r.excess < 0);
}

static void speculative_matches(void **st) {
    (void)st;
    result r = run_experiment(true);
    assert_int_equal(r.outside, 0);
    assert_true(r.excess < 0);
}

static void wrong_rule_is_detected(void **st) {
    (void)st;
    bd_spec_test_wrong_rule = true;
    result r = run_experiment(true);
    bd_spec_test_wrong_rule = false;
    assert_true(r.outside > 0 || r.excess > 0);
}

static void stale_grammar_hook_is_detected(void **st) {
    (void)st;
    bd_grammar_test_stale_rows = true;
    result r = run_experiment(true);
    bd_grammar_test_stale_rows = false;
    assert_true(r.outside > 0 || r.excess > 0);
}

/* Greedy under a grammar: speculative == plain, the grammar ends the
 * text, n_predict still cuts it, and with ignore_eog the text runs until
 * the grammar allows nothing else. */
typedef struct {
    int32_t ids[64];
    int n;
} seq;

static bool on_seq(int32_t t, void *u) {
    seq *q = u;
    if (q->n < 64) q->ids[q->n++] = t;
    return true;
}

static void greedy(const char *grammar, int n_predict, bool ignore_eog, bool spec, seq *out, bd_gen_stats *st) {
    char err[256];
    bd_grammar *g = bd_grammar_create(grammar, strlen(grammar), g_v, err, sizeof err);
    assert_non_null(g);
    bd_session_params sp = bd_session_default_params();
    int32_t taps[16];
    sp.n_ctx = 256;
    sp.n_threads = 1;
    sp.n_tap = bd_dflash_tap_layers(g_dm, taps, 16);
    sp.tap_layers = taps;
    bd_session *s = bd_session_create(g_m, &sp, err, sizeof err);
    assert_non_null(s);
    bd_gen_params gp = {.n_predict = n_predict, .sampling = g_sp, .ignore_eog = ignore_eog, .grammar = g};
    gp.sampling.temperature = 0;
    out->n = 0;
    bool ok;
    if (spec) {
        bd_spec_params p = bd_spec_default_params();
        p.type = BD_SPEC_DRAFT_DFLASH;
        bd_spec *x = bd_spec_create(s, g_dm, &p, NULL, 0, err, sizeof err);
        assert_non_null(x);
        ok = bd_spec_generate(x, g_prompt, g_np, &gp, on_seq, out, st, err, sizeof err);
        bd_spec_free(x);
    } else {
        ok = bd_generate(s, g_prompt, g_np, &gp, on_seq, out, st, err, sizeof err);
    }
    if (!ok) fail_msg("%s", err);
    /* what was emitted is in the language (a complete text if it ended by itself) */
    bd_grammar_state gs = bd_grammar_start(g);
    for (int i = 0; i < out->n; i++) gs = bd_grammar_advance_token(g, gs, out->ids[i]);
    assert_true(gs.id >= 0);
    if (st->stopped_eog) assert_true(bd_grammar_is_complete(g, gs));
    bd_session_free(s);
    bd_grammar_free(g);
}

static void greedy_generation(void **st) {
    (void)st;
    static const char *const grammars[] = {
        "root ::= [a-z ]{0,40} \".\"",
        "root ::= \"{\" ws \"\\\"name\\\": \\\"\" [a-zA-Z ,.]{1,60} \"\\\"\" ws \"}\"\nws ::= \" \"?",
        "root ::= (\" \" [a-z]{1,12}){3,6} \"!\"",
    };
    for (int i = 0; i < 3; i++) {
        seq a, b;
        bd_gen_stats sa, sb;
        greedy(grammars[i], 200, false, false, &a, &sa);
        greedy(grammars[i], 200, false, true, &b, &sb);
        printf("grammar %d: %d tokens, ended by the grammar %d; speculative: drafted %lld accepted %lld\n", i, a.n,
               sa.stopped_eog, (long long)sb.spec.n_drafted, (long long)sb.spec.n_accepted);
        assert_true(sa.stopped_eog);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.ids, b.ids, (size_t)a.n * sizeof a.ids[0]);
        assert_true(sb.spec.n_drafted > 0);
        /* n_predict still cuts a text the grammar has not finished */
        seq c;
        bd_gen_stats sc;
        greedy(grammars[i], 2, false, true, &c, &sc);
        assert_int_equal(c.n, 2);
        assert_false(sc.stopped_eog);
        assert_memory_equal(c.ids, a.ids, 2 * sizeof a.ids[0]);
    }
    /* ignore_eog: EOG is masked, the text runs until the grammar allows
     * nothing else (five characters) */
    seq d;
    bd_gen_stats sd;
    greedy("root ::= [a-z ]{0,5}", 100, true, false, &d, &sd);
    assert_true(sd.stopped_eog);
    int chars = 0;
    for (int i = 0; i < d.n; i++) chars += g_len[d.ids[i]];
    assert_int_equal(chars, 5);
}

static int setup(void **st) {
    (void)st;
    char err[256], path[1024];
    const char *sh = getenv("BD_SHARED");
    if (!sh) sh = "../shared";
    snprintf(path, sizeof path, "%s/fixtures/stories260K/stories260K.gguf", sh);
    g_m = bd_model_open(path, err, sizeof err);
    snprintf(path, sizeof path, "%s/fixtures/stories260K/stories260K-dflash.gguf", sh);
    g_dm = bd_model_open(path, err, sizeof err);
    if (!g_m || !g_dm) return -1;
    g_v = bd_grammar_vocab_create(g_m, err, sizeof err);
    if (!g_v) return -1;
    g_g = bd_grammar_create(GRAMMAR, strlen(GRAMMAR), g_v, err, sizeof err);
    if (!g_g) return -1;
    g_np = bd_tokenize(g_m, "Tom and", 7, true, false, g_prompt, 16);
    g_sp = bd_sampler_default_params();
    g_sp.temperature = 1.0f;
    g_sp.top_k = 8;
    g_sp.top_p = 1.0f;
    g_sp.min_p = 0.0f;
    load_pieces();
    build_expected();
    return 0;
}

static int teardown(void **st) {
    (void)st;
    bd_grammar_free(g_g);
    bd_grammar_vocab_free(g_v);
    bd_model_free(g_dm);
    bd_model_free(g_m);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_matches),
        cmocka_unit_test(speculative_matches),
        cmocka_unit_test(wrong_rule_is_detected),
        cmocka_unit_test(stale_grammar_hook_is_detected),
        cmocka_unit_test(greedy_generation),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
