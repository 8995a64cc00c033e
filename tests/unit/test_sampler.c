/*
 * test_sampler.c - bd_sampler_dist's candidate list against a reference
 * written out here from llama.cpp's sampler chain (top-k, then top-p on
 * the softmax at temperature 1, then min-p against the best logit, then
 * the temperature and a normalization), with a full qsort where the
 * sampler keeps a heap of k. Ties are broken by the lower token id on both
 * sides (the documented order of bd_sampler_dist). Rows of a 151936-token
 * vocabulary (Qwen3's) with many exact ties, a few NaN logits (never a
 * candidate), -inf logits, and k larger than the finite logits.
 * Probabilities: the reference computes in double; tolerance 1e-6
 * relative (the sampler's expf in float).
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
#include "decode/sampler.h"

typedef struct {
    float v;
    int32_t id;
} cand;

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The reference chain; returns the candidate count, ids / probs in order. */
static int ref_dist(const float *lg, int n, const bd_sampler_params *p, int32_t *ids, double *probs) {
    cand *c = malloc((size_t)n * sizeof *c);
    assert_non_null(c);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(lg[i])) c[m].v = lg[i], c[m++].id = i;
    qsort(c, (size_t)m, sizeof *c, cand_cmp);
    if (p->top_k > 0 && p->top_k < m) m = p->top_k;
    if (p->top_p < 1.0f) {
        double sum = 0, cum = 0;
        for (int i = 0; i < m; i++) sum += exp((double)c[i].v - c[0].v);
        for (int i = 0; i < m; i++) {
            cum += exp((double)c[i].v - c[0].v) / sum;
            if (cum >= p->top_p) {
                m = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) {
        const double thr = c[0].v + log(p->min_p);
        int keep = 1;
        while (keep < m && c[keep].v >= thr) keep++;
        m = keep;
    }
    double sum = 0;
    for (int i = 0; i < m; i++) sum += probs[i] = exp(((double)c[i].v - c[0].v) / p->temperature);
    for (int i = 0; i < m; i++) ids[i] = c[i].id, probs[i] /= sum;
    while (m > 1 && !(probs[m - 1] > 0)) m--;
    free(c);
    return m;
}

static void check_row(const float *lg, int n, const bd_sampler_params *p) {
    bd_sampler *s = bd_sampler_create(p, n);
    assert_non_null(s);
    int32_t *rid = malloc((size_t)n * sizeof *rid);
    double *rp = malloc((size_t)n * sizeof *rp);
    assert_true(rid && rp);
    const int32_t *ids;
    const float *probs;
    const int got = bd_sampler_dist(s, lg, NULL, 0, &ids, &probs);
    const int want = ref_dist(lg, n, p, rid, rp);
    assert_int_equal(got, want);
    for (int i = 0; i < got; i++) {
        assert_int_equal(ids[i], rid[i]);
        assert_true(fabs(probs[i] - rp[i]) <= 1e-6 * rp[i] + 1e-12);
    }
    free(rid);
    free(rp);
    bd_sampler_free(s);
}

/* logits quantized to a coarse grid (many exact ties), planted NaN / -inf
 * and -0 (equal to the grid's +0s, so tied with them by id) */
static void fill_row(float *lg, int n, unsigned seed, float grid) {
    srand(seed);
    for (int i = 0; i < n; i++) lg[i] = grid * (float)(rand() % 2000 - 1000) / 100.0f;
    for (int i = 0; i < 20; i++) lg[rand() % n] = NAN;
    for (int i = 0; i < 20; i++) lg[rand() % n] = -INFINITY;
    for (int i = 0; i < 20; i++) lg[rand() % n] = -0.0f;
}

static void topk_matches_reference(void **st) {
    (void)st;
    enum { N = 151936 };
    float *lg = malloc(N * sizeof *lg);
    assert_non_null(lg);
    const int ks[] = {1, 2, 8, 40, 100, 1000};
    for (unsigned seed = 1; seed <= 3; seed++) {
        fill_row(lg, N, seed, seed == 1 ? 1.0f : 0.25f);
        for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
            bd_sampler_params p = {.temperature = 1.0f, .top_k = ks[k], .top_p = 1.0f, .min_p = 0.0f, .seed = 1};
            check_row(lg, N, &p);
        }
        bd_sampler_params d = bd_sampler_default_params(); /* T 0.8, k 40, p 0.95, min_p 0.05 */
        d.seed = 1;
        check_row(lg, N, &d);
        d.top_k = 1000, d.top_p = 0.5f, d.min_p = 0.0f, d.temperature = 1.5f;
        check_row(lg, N, &d);
    }
    free(lg);
}

/* no top-k (k 0, or k past the vocabulary): the candidates that top-p and
 * min-p keep are found without sorting the vocabulary; the same list as
 * the reference's full sort, for each filter alone, both, neither (pure
 * temperature), and top-p close to 1 */
static void no_topk_matches_reference(void **st) {
    (void)st;
    enum { N = 151936 };
    float *lg = malloc(N * sizeof *lg);
    assert_non_null(lg);
    const struct {
        float top_p, min_p, temp;
        int32_t k;
    } c[] = {
        {0.95f, 0.0f, 1.0f, 0}, {1.0f, 0.05f, 0.8f, 0}, {0.95f, 0.05f, 0.8f, 0}, {0.5f, 0.0f, 1.5f, -1},
        {0.9995f, 0.0f, 1.0f, 0}, {1.0f, 0.0f, 1.0f, 0}, {0.7f, 0.01f, 1.0f, N},
    };
    for (unsigned seed = 1; seed <= 3; seed++) {
        fill_row(lg, N, seed, seed == 1 ? 1.0f : 0.25f);
        if (seed == 3) /* a peaked row: a handful of tokens hold the mass */
            for (int i = 0; i < 5; i++) lg[1000 * i + 7] = 40.0f - (float)i;
        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
            bd_sampler_params p = {.temperature = c[i].temp, .top_k = c[i].k, .top_p = c[i].top_p,
                                   .min_p = c[i].min_p, .seed = 1};
            check_row(lg, N, &p);
        }
    }
    free(lg);
}

/* fewer finite logits than k: the NaNs stay out, the -infs are kept at
 * probability 0 and then dropped */
static void topk_small_rows(void **st) {
    (void)st;
    const float nan = NAN, inf = INFINITY;
    const float a[] = {nan, 1.0f, nan, 1.0f, -inf, 0.5f};
    bd_sampler_params p = {.temperature = 1.0f, .top_k = 5, .top_p = 1.0f, .min_p = 0.0f, .seed = 1};
    check_row(a, 6, &p);
    p.top_k = 2;
    check_row(a, 6, &p);
    const int32_t *ids;
    const float *probs;
    bd_sampler *s = bd_sampler_create(&p, 6);
    assert_non_null(s);
    assert_int_equal(bd_sampler_dist(s, a, NULL, 0, &ids, &probs), 2);
    assert_int_equal(ids[0], 1); /* the tie of 1.0 at ids 1 and 3: lower id first */
    assert_int_equal(ids[1], 3);
    bd_sampler_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(topk_matches_reference),
        cmocka_unit_test(topk_small_rows),
        cmocka_unit_test(no_topk_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
