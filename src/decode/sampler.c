/*
 * sampler.c - see sampler.h. The generator is base.h's bd_rng
 * (xoshiro256** seeded through splitmix64); it is not llama.cpp's
 * mt19937, so sampled texts differ from llama.cpp's for the same seed,
 * while the distributions are the same.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampler.h"
#include "../tensor/kernels.h"

struct bd_sampler {
    bd_sampler_params p;
    int32_t n_vocab;
    bd_rng rng;
    int32_t *ids;   /* [n_vocab] candidate ids */
    float *vals;    /* [n_vocab] logits, then probabilities */
    int32_t *tmp_ids; /* [n_vocab] merge / radix scratch */
    float *tmp_vals;  /* [n_vocab] */
    uint32_t *key;     /* [n_vocab] radix sort keys ... */
    uint32_t *tmp_key; /* [n_vocab] ... and their scratch */
    uint32_t *seen;   /* [n_vocab] penalty: == epoch when the token was counted in this call */
    int32_t *cnt;     /* [n_vocab] occurrences in the window (valid where seen == epoch) */
    int32_t *uniq;    /* [n_vocab] the distinct tokens of the window, in order of first sight */
    uint32_t epoch;
    bd_logit_bias *bias; /* [n_bias] copied from the params, tokens in range */
    int32_t n_bias;
};

bd_sampler_params bd_sampler_default_params(void) {
    bd_sampler_params p = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                           .seed = BD_SEED_RANDOM, .repeat_penalty = 1.0f, .repeat_last_n = 64};
    return p;
}

bd_sampler *bd_sampler_create(const bd_sampler_params *p, int32_t n_vocab) {
    if (n_vocab < 1) return NULL;
    bd_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    if (!(s->p.repeat_penalty > 0.0f)) s->p.repeat_penalty = 1.0f; /* 0: a zeroed struct, off */
    s->p.logit_bias = NULL; /* borrowed by the params: the sampler keeps its own copy */
    s->p.n_logit_bias = 0;
    s->n_vocab = n_vocab;
    s->ids = malloc((size_t)n_vocab * sizeof *s->ids);
    s->vals = malloc((size_t)n_vocab * sizeof *s->vals);
    s->tmp_ids = malloc((size_t)n_vocab * sizeof *s->tmp_ids);
    s->tmp_vals = malloc((size_t)n_vocab * sizeof *s->tmp_vals);
    s->key = malloc((size_t)n_vocab * sizeof *s->key);
    s->tmp_key = malloc((size_t)n_vocab * sizeof *s->tmp_key);
    bool pen = bd_sampler_has_penalty(s);
    if (pen) {
        s->seen = calloc((size_t)n_vocab, sizeof *s->seen);
        s->cnt = malloc((size_t)n_vocab * sizeof *s->cnt);
        s->uniq = malloc((size_t)n_vocab * sizeof *s->uniq);
    }
    if (p->logit_bias && p->n_logit_bias > 0) s->bias = malloc((size_t)p->n_logit_bias * sizeof *s->bias);
    if (!s->ids || !s->vals || !s->tmp_ids || !s->tmp_vals || !s->key || !s->tmp_key ||
        (pen && (!s->seen || !s->cnt || !s->uniq)) || (p->logit_bias && p->n_logit_bias > 0 && !s->bias)) {
        bd_sampler_free(s);
        return NULL;
    }
    for (int32_t i = 0; s->bias && i < p->n_logit_bias; i++)
        if (p->logit_bias[i].token >= 0 && p->logit_bias[i].token < n_vocab) s->bias[s->n_bias++] = p->logit_bias[i];
    uint64_t seed = p->seed;
    if (seed == BD_SEED_RANDOM) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)s;
    }
    bd_rng_seed(&s->rng, seed);
    return s;
}

void bd_sampler_free(bd_sampler *s) {
    if (!s) return;
    free(s->ids);
    free(s->vals);
    free(s->tmp_ids);
    free(s->tmp_vals);
    free(s->key);
    free(s->tmp_key);
    free(s->seen);
    free(s->cnt);
    free(s->uniq);
    free(s->bias);
    free(s);
}

bool bd_sampler_is_greedy(const bd_sampler *s) { return !(s->p.temperature > 0.0f); }

bool bd_sampler_has_penalty(const bd_sampler *s) {
    return (s->p.repeat_penalty != 1.0f || s->p.frequency_penalty != 0.0f || s->p.presence_penalty != 0.0f) &&
           s->p.repeat_last_n != 0;
}

bool bd_sampler_has_bias(const bd_sampler *s) { return s->n_bias > 0; }

/* llama.cpp's penalties on vals[] (indexed by token id): every distinct
 * token of the window (the last repeat_last_n of hist), once: the
 * repetition penalty (divide a positive logit, multiply a negative one),
 * then minus count * frequency_penalty + presence_penalty. */
static void penalize(bd_sampler *s, float *vals, const int32_t *hist, int32_t n_hist) {
    int32_t from = s->p.repeat_last_n < 0 || n_hist <= s->p.repeat_last_n ? 0 : n_hist - s->p.repeat_last_n;
    if (++s->epoch == 0) { /* wrapped: forget the old stamps */
        memset(s->seen, 0, (size_t)s->n_vocab * sizeof *s->seen);
        s->epoch = 1;
    }
    int32_t nu = 0;
    for (int32_t i = from; i < n_hist; i++) {
        int32_t t = hist[i];
        if (t < 0 || t >= s->n_vocab) continue;
        if (s->seen[t] != s->epoch) {
            s->seen[t] = s->epoch;
            s->cnt[t] = 0;
            s->uniq[nu++] = t;
        }
        s->cnt[t]++;
    }
    const float pen = s->p.repeat_penalty, fq = s->p.frequency_penalty, pr = s->p.presence_penalty;
    for (int32_t k = 0; k < nu; k++) {
        int32_t t = s->uniq[k];
        float v = vals[t];
        if (pen != 1.0f) v = v <= 0.0f ? v * pen : v / pen;
        vals[t] = v - ((float)s->cnt[t] * fq + pr);
    }
}

/* The logit bias on vals[] (indexed by token id). */
static void add_bias(const bd_sampler *s, float *vals) {
    for (int32_t i = 0; i < s->n_bias; i++) vals[s->bias[i].token] += s->bias[i].bias;
}

/* Uniform double in [0, 1) from the sampler's generator: every draw goes
 * through bd_sampler_pick, so plain and speculative decoding stay in step. */
static double sampler_uniform(bd_sampler *s) { return bd_rng_uniform(&s->rng); }

/* Sort candidates by value, descending, ids ascending on ties (whatever
 * order they come in), with a bottom-up merge sort over the scratch
 * arrays: no allocation, O(n log n) worst case. */
static void sort_desc_merge(bd_sampler *s, int32_t n) {
    int32_t *a_id = s->ids, *b_id = s->tmp_ids;
    float *a_v = s->vals, *b_v = s->tmp_vals;
    for (int32_t w = 1; w < n; w *= 2) {
        for (int32_t lo = 0; lo < n; lo += 2 * w) {
            int32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                if (a_v[j] > a_v[i] || (a_v[j] == a_v[i] && a_id[j] < a_id[i])) { b_v[k] = a_v[j]; b_id[k++] = a_id[j++]; }
                else { b_v[k] = a_v[i]; b_id[k++] = a_id[i++]; }
            }
            while (i < mid) { b_v[k] = a_v[i]; b_id[k++] = a_id[i++]; }
            while (j < hi) { b_v[k] = a_v[j]; b_id[k++] = a_id[j++]; }
        }
        int32_t *ti = a_id; a_id = b_id; b_id = ti;
        float *tv = a_v; a_v = b_v; b_v = tv;
    }
    if (a_id != s->ids) {
        memcpy(s->ids, a_id, (size_t)n * sizeof *a_id);
        memcpy(s->vals, a_v, (size_t)n * sizeof *a_v);
    }
}

/* A float's radix key: unsigned order of keys = descending order of the
 * floats, -0 and +0 one key (they compare equal); never called on NaN. */
static inline uint32_t radix_key(float v) {
    if (v == 0.0f) v = 0.0f;
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u = u & 0x80000000u ? ~u : u | 0x80000000u; /* ascending order */
    return ~u;
}

static inline float radix_value(uint32_t k) {
    uint32_t u = ~k;
    u = u & 0x80000000u ? u & 0x7FFFFFFFu : ~u;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* sort_desc_merge's order for candidates that come in ascending id order
 * (select_above's): an LSD radix sort on radix_key in three passes of 11
 * bits. Each pass is stable, so equal values keep their ids ascending.
 * Sorting the whole vocabulary (no top-k, top-p or min-p: plain
 * temperature sampling) took 14.7 ms a token by merging at 151936. */
static void sort_desc_radix(bd_sampler *s, int32_t n) {
    enum { BITS = 11, BUCKETS = 1 << BITS, PASSES = 3 };
    uint32_t count[PASSES][BUCKETS];
    memset(count, 0, sizeof count);
    uint32_t *ka = s->key, *kb = s->tmp_key;
    int32_t *ia = s->ids, *ib = s->tmp_ids;
    for (int32_t i = 0; i < n; i++) {
        const uint32_t k = radix_key(s->vals[i]);
        ka[i] = k;
        for (int p = 0; p < PASSES; p++) count[p][(k >> (BITS * p)) & (BUCKETS - 1)]++;
    }
    for (int p = 0; p < PASSES; p++) {
        const int shift = BITS * p;
        uint32_t *c = count[p];
        if (c[(ka[0] >> shift) & (BUCKETS - 1)] == (uint32_t)n) continue; /* one bucket: order kept */
        uint32_t sum = 0;
        for (int b = 0; b < BUCKETS; b++) {
            const uint32_t t = c[b];
            c[b] = sum;
            sum += t;
        }
        for (int32_t i = 0; i < n; i++) {
            const uint32_t o = c[(ka[i] >> shift) & (BUCKETS - 1)]++;
            kb[o] = ka[i];
            ib[o] = ia[i];
        }
        uint32_t *tk = ka; ka = kb; kb = tk;
        int32_t *ti = ia; ia = ib; ib = ti;
    }
    if (ia != s->ids) memcpy(s->ids, ia, (size_t)n * sizeof *ia);
    for (int32_t i = 0; i < n; i++) s->vals[i] = radix_value(ka[i]);
}

/* Heap order of the top-k selection: a is worse than b (lower value, or
 * the same value and a higher id), so the root is the weakest kept. */
static inline bool cand_worse(float va, int32_t ia, float vb, int32_t ib) {
    return va < vb || (va == vb && ia > ib);
}

static void heap_sift_down(int32_t *id, float *v, int32_t k, int32_t r) {
    for (;;) {
        int32_t c = 2 * r + 1;
        if (c >= k) return;
        if (c + 1 < k && cand_worse(v[c + 1], id[c + 1], v[c], id[c])) c++;
        if (!cand_worse(v[c], id[c], v[r], id[r])) return;
        float tv = v[r]; v[r] = v[c]; v[c] = tv;
        int32_t ti = id[r]; id[r] = id[c]; id[c] = ti;
        r = c;
    }
}

/* The k best of vals[0..n) (indexed by token id; NaN never a candidate) by
 * value, ties to the lower id, into ids / vals[0..return) unsorted: a
 * min-heap of k over one pass. Tokens come in id order, so a token only
 * displaces the root when its value is strictly greater: one compare per
 * token for nearly all of them (the quickselect this replaces copied and
 * partitioned the whole vocabulary, ~2 ms a token at 151936). vals is
 * the logits or tmp_vals, never s->vals. */
static int32_t select_top_k(bd_sampler *s, const float *vals, int32_t n, int32_t k) {
    int32_t *id = s->ids;
    float *v = s->vals;
    int32_t m = 0, i = 0;
    for (; i < n && m < k; i++)
        if (!isnan(vals[i])) v[m] = vals[i], id[m++] = i;
    for (int32_t r = m / 2 - 1; r >= 0; r--) heap_sift_down(id, v, m, r);
    if (m < k) return m;
    for (; i < n; i++) {
        const float x = vals[i];
        if (x > v[0]) {
            v[0] = x;
            id[0] = i;
            heap_sift_down(id, v, k, 0);
        }
    }
    return k;
}

/* Without top-k: the candidates that top-p and min-p can keep, into ids /
 * vals[0..return) unsorted (NaN never a candidate), so that only they are
 * sorted instead of the whole vocabulary (14.7 ms a token at 151936).
 * The kept set is the one sorting everything would give: min-p keeps v >=
 * max + log(min_p) (the float its step computes) and top-p a prefix of the
 * sorted candidates, which lies inside every set {v >= t} holding at least
 * top_p of the mass. One pass adds each token's weight into the normalizer
 * and into a bin by its distance e below the maximum (bin 0: e < 0.5, bin
 * b: 0.5 * 2^(b-1) <= e < 0.5 * 2^b); the first bins whose mass reaches
 * top_p plus 1e-3 (a margin far beyond either sum's rounding) set t =
 * max - 2 * 0.5 * 2^b, twice their reach so that rounding at a bin's edge
 * cannot leave one of their tokens out. *zall gets top-p's normalizer over
 * the whole vocabulary (0 when top-p is off). */
static int32_t select_above(bd_sampler *s, const float *vals, int32_t n, double *zall) {
    float mx = -INFINITY;
    bool any = false;
    for (int32_t i = 0; i < n; i++)
        if (!isnan(vals[i])) {
            any = true;
            if (vals[i] > mx) mx = vals[i];
        }
    *zall = 0.0;
    if (!any) return 0;
    float t = -INFINITY;
    if (mx > -INFINITY) { /* all -inf: every candidate stays, as before */
        if (s->p.min_p > 0.0f) t = mx + logf(s->p.min_p);
        if (s->p.top_p < 1.0f) {
            double z = 0.0, bin[64] = {0};
            for (int32_t i = 0; i < n; i++) {
                const float v = vals[i];
                if (!(v > -INFINITY)) continue; /* NaN, or -inf: weight 0 */
                const double w = exp((double)v - mx);
                const float q = 2.0f * (mx - v); /* e / 0.5 */
                int b = 0;
                if (q >= 1.0f) {
                    uint32_t u;
                    memcpy(&u, &q, sizeof u);
                    b = (int)((u >> 23) & 0xFF) - 127 + 1; /* floor(log2 q) + 1 */
                    if (b > 63) b = 63;
                }
                z += w;
                bin[b] += w;
            }
            *zall = z;
            double mass = 0.0;
            for (int b = 0; b < 63; b++) {
                mass += bin[b];
                if (mass >= ((double)s->p.top_p + 1e-3) * z) {
                    const float tp = mx - ldexpf(1.0f, b); /* 2 * 0.5 * 2^b */
                    if (tp > t) t = tp;
                    break;
                }
            }
        }
    }
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (vals[i] >= t) s->vals[m] = vals[i], s->ids[m++] = i; /* NaN fails the compare */
    return m;
}

int32_t bd_sampler_dist(bd_sampler *s, const float *logits, const int32_t *hist, int32_t n_hist,
                        const int32_t **ids, const float **probs) {
    int32_t n = s->n_vocab;
    bool pen = bd_sampler_has_penalty(s) && n_hist > 0;
    if (bd_sampler_is_greedy(s)) {
        if (pen || s->n_bias) {
            memcpy(s->tmp_vals, logits, (size_t)n * sizeof *logits);
            add_bias(s, s->tmp_vals);
            if (pen) penalize(s, s->tmp_vals, hist, n_hist);
            logits = s->tmp_vals;
        }
        s->ids[0] = bd_kernels_get()->argmax(logits, n);
        s->vals[0] = 1.0f;
        *ids = s->ids;
        *probs = s->vals;
        return 1;
    }
    const float *vals = logits;
    double zall = 0.0; /* > 0: the top-p normalizer over the whole vocabulary (select_above) */
    if (pen || s->n_bias) {
        memcpy(s->tmp_vals, logits, (size_t)n * sizeof *logits);
        add_bias(s, s->tmp_vals);
        if (pen) penalize(s, s->tmp_vals, hist, n_hist);
        vals = s->tmp_vals;
    }
    const bool top_k = s->p.top_k > 0 && s->p.top_k < n;
    if (top_k) n = select_top_k(s, vals, n, s->p.top_k);
    else n = select_above(s, vals, n, &zall);
    if (n == 0) { /* every logit NaN: nothing to rank, token 0 */
        s->ids[0] = 0;
        s->vals[0] = 1.0f;
        *ids = s->ids;
        *probs = s->vals;
        return 1;
    }
    /* select_above's list is in id order, the heap's is not */
    if (!top_k && n >= 1024) sort_desc_radix(s, n);
    else sort_desc_merge(s, n);
    /* top-p on the softmax at temperature 1 (over every candidate left
     * by top-k: without a k, the whole vocabulary's normalizer) */
    if (s->p.top_p < 1.0f) {
        double sum = zall;
        if (!(sum > 0.0))
            for (int32_t i = 0; i < n; i++) sum += exp((double)s->vals[i] - s->vals[0]);
        double cum = 0.0;
        int32_t keep = n;
        for (int32_t i = 0; i < n; i++) {
            cum += exp((double)s->vals[i] - s->vals[0]) / sum;
            if (cum >= s->p.top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    /* min-p relative to the most likely candidate */
    if (s->p.min_p > 0.0f) {
        float thr = s->vals[0] + logf(s->p.min_p);
        int32_t keep = 1;
        while (keep < n && s->vals[keep] >= thr) keep++;
        n = keep;
    }
    /* temperature, then normalize */
    double sum = 0.0;
    float mx = s->vals[0];
    for (int32_t i = 0; i < n; i++) {
        float e = expf((s->vals[i] - mx) / s->p.temperature);
        s->vals[i] = e;
        sum += e;
    }
    for (int32_t i = 0; i < n; i++) s->vals[i] = (float)(s->vals[i] / sum);
    /* grammar hook: candidates of probability 0 (logit -inf, masked by a
     * grammar) are dropped, so no fallback below can return one */
    while (n > 1 && !(s->vals[n - 1] > 0.0f)) n--;
    /* a distribution over >= 1 candidates, most likely first */
    BD_ASSERT(n >= 1 && sum >= 1.0 && s->vals[0] >= s->vals[n - 1]);
    *ids = s->ids;
    *probs = s->vals;
    return n;
}

int32_t bd_sampler_sample(bd_sampler *s, const float *logits, const int32_t *hist, int32_t n_hist) {
    const int32_t *ids;
    const float *probs;
    int32_t n = bd_sampler_dist(s, logits, hist, n_hist, &ids, &probs);
    return bd_sampler_pick(s, ids, probs, n);
}

int32_t bd_sampler_pick(bd_sampler *s, const int32_t *ids, const float *probs, int32_t n) {
    if (n == 1) return ids[0];
    double u = sampler_uniform(s), cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += probs[i];
        if (u < cum) return ids[i];
    }
    return ids[n - 1];
}
