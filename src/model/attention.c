/*
 * attention.c - multi-head attention over a KV cache, GQA, multi-threaded.
 *
 * Work items are (row, head) pairs split evenly across the pool. Row t of a
 * batch sits at position n_past + t. Causal: it sees cache rows
 * [0, n_past + t]; non-causal (the DFlash drafter's block): every row sees
 * [0, n_past + n). The new rows' K/V must already be in the cache.
 */
#include <math.h>

#include "attention.h"

typedef struct {
    const bd_attn_args *a;
} attn_ctx;

static void attn_worker(void *arg, int ith, int nth) {
    const bd_attn_args *a = ((attn_ctx *)arg)->a;
    int64_t lo, hi;
    bd_split((int64_t)a->n * a->n_head, ith, nth, &lo, &hi);
    const int32_t hd = a->hd;
    const int32_t kvw = a->n_kv * hd; /* floats per cache row */
    const int32_t group = a->n_head / a->n_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    float *sc = a->scores + (int64_t)ith * a->scores_stride;
    for (int64_t w = lo; w < hi; w++) {
        int32_t t = (int32_t)(w / a->n_head), h = (int32_t)(w % a->n_head);
        int32_t kvh = h / group;
        int32_t len = a->causal ? a->n_past + t + 1 : a->n_past + a->n;
        const float *q = a->q + (int64_t)t * a->n_head * hd + (int64_t)h * hd;
        const float *kc = a->k_cache + (int64_t)kvh * hd;
        float mx = -INFINITY;
        for (int32_t j = 0; j < len; j++) {
            const float *kr = kc + (int64_t)j * kvw;
            float d = 0.0f;
            for (int32_t i = 0; i < hd; i++) d += q[i] * kr[i];
            d *= scale;
            sc[j] = d;
            if (d > mx) mx = d;
        }
        double sum = 0.0;
        for (int32_t j = 0; j < len; j++) {
            float e = expf(sc[j] - mx);
            sc[j] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        float *o = a->out + (int64_t)t * a->n_head * hd + (int64_t)h * hd;
        for (int32_t i = 0; i < hd; i++) o[i] = 0.0f;
        const float *vc = a->v_cache + (int64_t)kvh * hd;
        for (int32_t j = 0; j < len; j++) {
            float p = sc[j] * inv;
            const float *vr = vc + (int64_t)j * kvw;
            for (int32_t i = 0; i < hd; i++) o[i] += p * vr[i];
        }
    }
}

void bd_attention(bd_pool *pool, const bd_attn_args *a) {
    attn_ctx c = {a};
    /* multiply-adds of the whole call; tiny ones stay on this thread */
    int64_t work = (int64_t)a->n * a->n_head * (a->n_past + a->n) * a->hd;
    if (work < (1 << 15)) attn_worker(&c, 0, 1);
    else bd_pool_run(pool, attn_worker, &c);
}
