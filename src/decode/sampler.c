/*
 * sampler.c - see sampler.h. The generator is xoshiro256** seeded through
 * splitmix64; it is not llama.cpp's mt19937, so sampled texts differ from
 * llama.cpp's for the same seed, while the distributions are the same.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampler.h"

struct bd_sampler {
    bd_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];
    int32_t *ids;   /* [n_vocab] candidate ids */
    float *vals;    /* [n_vocab] logits, then probabilities */
    int32_t *tmp_ids; /* [n_vocab] radix/merge scratch */
    float *tmp_vals;  /* [n_vocab] */
};

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

bd_sampler_params bd_sampler_default_params(void) {
    bd_sampler_params p = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                           .seed = BD_SEED_RANDOM};
    return p;
}

bd_sampler *bd_sampler_create(const bd_sampler_params *p, int32_t n_vocab) {
    if (n_vocab < 1) return NULL;
    bd_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->ids = malloc((size_t)n_vocab * sizeof *s->ids);
    s->vals = malloc((size_t)n_vocab * sizeof *s->vals);
    s->tmp_ids = malloc((size_t)n_vocab * sizeof *s->tmp_ids);
    s->tmp_vals = malloc((size_t)n_vocab * sizeof *s->tmp_vals);
    if (!s->ids || !s->vals || !s->tmp_ids || !s->tmp_vals) {
        bd_sampler_free(s);
        return NULL;
    }
    uint64_t seed = p->seed;
    if (seed == BD_SEED_RANDOM) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)s;
    }
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
    return s;
}

void bd_sampler_free(bd_sampler *s) {
    if (!s) return;
    free(s->ids);
    free(s->vals);
    free(s->tmp_ids);
    free(s->tmp_vals);
    free(s);
}

bool bd_sampler_is_greedy(const bd_sampler *s) { return !(s->p.temperature > 0.0f); }

double bd_sampler_uniform(bd_sampler *s) { return (double)(xoshiro_next(s->rng) >> 11) * 0x1.0p-53; }

int32_t bd_sampler_argmax(const float *logits, int32_t n_vocab) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Sort candidates by value, descending, stable on id (ids ascending on
 * ties), with a bottom-up merge sort over the scratch arrays: no allocation,
 * O(n log n) worst case. */
static void sort_desc(bd_sampler *s, int32_t n) {
    int32_t *a_id = s->ids, *b_id = s->tmp_ids;
    float *a_v = s->vals, *b_v = s->tmp_vals;
    for (int32_t w = 1; w < n; w *= 2) {
        for (int32_t lo = 0; lo < n; lo += 2 * w) {
            int32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                if (a_v[j] > a_v[i]) { b_v[k] = a_v[j]; b_id[k++] = a_id[j++]; }
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

/* Keep the k largest logits (unsorted) with a quickselect partition. */
static void select_top_k(bd_sampler *s, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    int32_t *id = s->ids;
    float *v = s->vals;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] > pivot) i++;
            while (v[j] < pivot) j--;
            if (i <= j) {
                float tv = v[i]; v[i] = v[j]; v[j] = tv;
                int32_t ti = id[i]; id[i] = id[j]; id[j] = ti;
                i++;
                j--;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

int32_t bd_sampler_dist(bd_sampler *s, const float *logits, const int32_t **ids, const float **probs) {
    int32_t n = s->n_vocab;
    if (bd_sampler_is_greedy(s)) {
        s->ids[0] = bd_sampler_argmax(logits, n);
        s->vals[0] = 1.0f;
        *ids = s->ids;
        *probs = s->vals;
        return 1;
    }
    for (int32_t i = 0; i < n; i++) {
        s->ids[i] = i;
        s->vals[i] = logits[i];
    }
    /* top-k */
    if (s->p.top_k > 0 && s->p.top_k < n) {
        select_top_k(s, n, s->p.top_k);
        n = s->p.top_k;
    }
    sort_desc(s, n);
    /* top-p on the softmax at temperature 1 */
    if (s->p.top_p < 1.0f) {
        double sum = 0.0;
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
    *ids = s->ids;
    *probs = s->vals;
    return n;
}

int32_t bd_sampler_sample(bd_sampler *s, const float *logits) {
    const int32_t *ids;
    const float *probs;
    int32_t n = bd_sampler_dist(s, logits, &ids, &probs);
    if (n == 1) return ids[0];
    double u = bd_sampler_uniform(s), cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += probs[i];
        if (u < cum) return ids[i];
    }
    return ids[n - 1];
}
