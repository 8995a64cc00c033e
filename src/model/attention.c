/*
 * attention.c - multi-head attention over a KV cache, GQA, multi-threaded.
 *
 * Work items are a KV head and up to BD_ATTN_QB of the query rows that read
 * it, taken by the threads from a shared counter (see attn_worker). Row t
 * of a batch sits at position n_past + t. Causal: it sees cache rows
 * [0, n_past + t]; non-causal (the DFlash drafter's block): every row sees
 * [0, n_past + n_blk), n_blk = n unless the call asks for a subset of the
 * batch's rows (q_off, n_blk: the drafter's last layer; query t is then
 * batch row q_off + t and sits at n_past + q_off + t). A window W > 0 moves
 * the first visible key of a row at position p up to p - W + 1. The new
 * rows' K/V must already be in the cache.
 *
 * The cache holds rows of f32 or of one of llama.cpp's other cache types
 * (-ctk / -ctv: f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1; f16
 * takes half the memory of f32, q8_0 27 %, q4_0 14 %). A block of keys or
 * values of another type than f32 is widened into the thread's f32 buffer
 * once for all the item's queries (exactly: an f16 or bf16 is an f32, and
 * a quantized value is one product or one multiply-add, as its
 * dequantizer forms it), and the f32 kernels read it there: the bits are
 * those of an f32 cache holding the rounded values. (Widening inside the
 * kernels would repeat it for each of an item's queries, up to BD_ATTN_QB
 * of them.) The kernel table widens (f16_to_f32, kv_to_f32 with the
 * reference dequantizers' bits); rows are stored as llama.cpp stores them
 * (bd_quantize_row_kv; q8_0: the kernel table's activation quantizer,
 * f16: its SIMD conversion).
 *
 * The cache is head-major ([n_kv][capacity][hd]): a work item walks one
 * head's keys as one contiguous stream. (Position-major rows put a head's
 * keys n_kv * hd floats apart, 4 KiB for 8 heads of 128: every key in the
 * same L1 set and a new page, which the hardware prefetchers do not cross;
 * copying key blocks out of that layout was 6-11 % of a 16-token verify.)
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockdraft.h"

#include "attention.h"
#include "../tensor/kernels.h"

typedef struct {
    const bd_attn_args *a;
    const bd_kernels *k;
    atomic_llong next; /* next work item */
} attn_ctx;

/*
 * One work item = one KV head and up to BD_ATTN_QB of the query rows that
 * read it (the group's heads of consecutive batch rows). The keys are
 * walked in blocks of KB rows; each block is dotted with every query of
 * the item while it sits in L1, so a 16-token verify reads the context's
 * K and V about once per KV head rather than once per query.
 *
 * Per query: scores = scale * q.k_j (attn_scores), x_j = exp(score_j - max)
 * (attn_softmax, which also returns the sum), out = (sum_j x_j v_j) / sum
 * (attn_accum, chained block after block). The kernels fix their f32 order
 * per output element (tensor/attn_ref.c) and blocking only splits the
 * j-chains, never reorders them, so a row's output does not depend on the
 * batch around it or on the thread count.
 *
 * Threads take items one at a time from a shared counter: in a causal
 * batch later rows see more keys (contiguous shares would leave one thread
 * with all the long rows), and on a shared machine a descheduled thread's
 * items go to the others.
 */
#define KB BD_ATTN_KB

bool bd_attn_cache_type(int32_t kv_type, uint32_t *type) {
    static const uint32_t types[BD_KV_COUNT] = {BD_TYPE_F32,  BD_TYPE_F32,  BD_TYPE_F16,    BD_TYPE_Q8_0, BD_TYPE_BF16,
                                                BD_TYPE_Q4_0, BD_TYPE_Q4_1, BD_TYPE_IQ4_NL, BD_TYPE_Q5_0, BD_TYPE_Q5_1};
    if (kv_type < BD_KV_DEFAULT || kv_type >= BD_KV_COUNT) return false;
    *type = types[kv_type];
    return true;
}

size_t bd_attn_row_bytes(uint32_t type, int32_t hd) {
    uint64_t rb = 0;
    return hd > 0 && bd_row_size(type, hd, &rb) ? (size_t)rb : 0;
}

void bd_attn_kv_store(void *dst, uint32_t type, const float *row, int32_t n) {
    const bd_kernels *k = bd_kernels_get();
    if (type == BD_TYPE_F32) memcpy(dst, row, (size_t)n * sizeof(float));
    else if (type == BD_TYPE_F16) k->f32_to_f16(n, row, dst);
    else if (type == BD_TYPE_Q8_0) k->from_float[BD_TYPE_Q8_0](row, dst, n);
    else bd_quantize_row_kv(type, row, dst, n); /* n: whole blocks (bd_attn_row_bytes checked hd) */
}

int32_t bd_attn_rot(uint32_t type, int32_t hd, bool is_v) {
    const bd_type_traits *t = bd_type_get(type);
    if (!t || !t->is_quant || hd <= 0 || hd % 64) return 0;
    const char *off = getenv("LLAMA_ATTN_ROT_DISABLE"); /* as llama-kv-cache.cpp reads it */
    if (off && atoi(off) != 0) return 0;
    if (is_v) return 64;
    int32_t r = 64;
    while (hd % (2 * r) == 0) r *= 2;
    return r;
}

void bd_attn_rotate(float *x, int64_t n, int32_t rot) {
    const float scale = 1.0f / sqrtf((float)rot);
    for (int64_t c = 0; c + rot <= n; c += rot) {
        float *y = x + c;
        for (int32_t i = 0; i < rot; i++) y[i] *= scale;
        for (int32_t len = 1; len < rot; len *= 2)
            for (int32_t i = 0; i < rot; i += 2 * len)
                for (int32_t j = i; j < i + len; j++) {
                    const float u = y[j], v = y[j + len];
                    y[j] = u + v;
                    y[j + len] = u - v;
                }
    }
}

/* Rows [lo, hi) of one KV head's cache (its first row at head, rows of rb
 * bytes, contiguous) as f32: the cache itself when it is f32, else the
 * rows widened into tmp ([KB][hd], row lo at tmp[(lo - j0) * hd]).
 * Returns where row j0 would start; rows outside [lo, hi) must not be
 * read through it. */
static const float *kv_rows(const bd_kernels *k, const char *head, uint32_t type, size_t rb, int32_t hd, int32_t j0,
                            int32_t lo, int32_t hi, float *tmp) {
    if (type == BD_TYPE_F32) return (const float *)(head + (size_t)j0 * rb);
    const int64_t n = (int64_t)(hi - lo) * hd;
    float *dst = tmp + (int64_t)(lo - j0) * hd;
    const void *src = head + (size_t)lo * rb;
    if (type == BD_TYPE_F16) k->f16_to_f32(n, src, dst);
    else k->kv_to_f32[type](n, src, dst);
    return tmp;
}

static void attn_worker(void *arg, int ith, int nth) {
    (void)nth;
    attn_ctx *ctx = arg;
    const bd_attn_args *a = ctx->a;
    const bd_kernels *k = ctx->k;
    const int32_t hd = a->hd;
    const int32_t group = a->n_head / a->n_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    const int64_t nq_all = (int64_t)a->n * group;       /* queries per KV head */
    const int64_t n_qb = (nq_all + BD_ATTN_QB - 1) / BD_ATTN_QB;
    float *scratch = a->scores + (int64_t)ith * BD_ATTN_QB * a->scores_stride;
    float *tmp = a->kv_tmp ? a->kv_tmp + (int64_t)ith * KB * hd : NULL;
    const float *qp[BD_ATTN_QB];
    float *op[BD_ATTN_QB], *sc[BD_ATTN_QB], sum[BD_ATTN_QB], mx[BD_ATTN_QB];
    int32_t len[BD_ATTN_QB], beg[BD_ATTN_QB];
    const int64_t n_items = (int64_t)a->n_kv * n_qb;
    const size_t krb = bd_attn_row_bytes(a->k_type, hd), vrb = bd_attn_row_bytes(a->v_type, hd);
    const int32_t n_blk = a->n_blk > 0 ? a->n_blk : a->q_off + a->n;
    for (;;) {
        const int64_t w = (int64_t)atomic_fetch_add_explicit(&ctx->next, 1, memory_order_relaxed);
        if (w >= n_items) break;
        const int32_t kvh = (int32_t)(w / n_qb);
        const int64_t q0 = (w % n_qb) * BD_ATTN_QB;
        const int nq = (int)(nq_all - q0 < BD_ATTN_QB ? nq_all - q0 : BD_ATTN_QB);
        const int64_t head_row = kvh * a->kv_head_stride / hd; /* this head's first cache row */
        const char *kh = (const char *)a->k_cache + (size_t)head_row * krb;
        const char *vh = (const char *)a->v_cache + (size_t)head_row * vrb;
        int32_t maxlen = 0, minbeg = INT32_MAX;
        for (int i = 0; i < nq; i++) {
            int32_t t = (int32_t)((q0 + i) / group), h = kvh * group + (int32_t)((q0 + i) % group);
            qp[i] = a->q + (int64_t)t * a->n_head * hd + (int64_t)h * hd;
            op[i] = a->out + (int64_t)t * a->n_head * hd + (int64_t)h * hd;
            sc[i] = scratch + (int64_t)i * a->scores_stride;
            const int32_t pos = a->n_past + a->q_off + t; /* the row's own position */
            len[i] = a->causal ? pos + 1 : a->n_past + n_blk;
            beg[i] = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
            if (len[i] > maxlen) maxlen = len[i];
            if (beg[i] < minbeg) minbeg = beg[i];
            mx[i] = -INFINITY;
        }
        /* blocks from the one holding the first visible key (windowed rows) */
        const int32_t jb = minbeg / KB * KB;
        for (int32_t j0 = jb; j0 < maxlen; j0 += KB) {
            const int32_t lo = minbeg > j0 ? minbeg : j0, hi = maxlen < j0 + KB ? maxlen : j0 + KB;
            const float *kb = kv_rows(k, kh, a->k_type, krb, hd, j0, lo, hi, tmp);
            for (int i = 0; i < nq; i++) {
                const int32_t s0 = beg[i] > j0 ? beg[i] : j0, e0 = len[i] < j0 + KB ? len[i] : j0 + KB;
                if (e0 > s0) {
                    float m = k->attn_scores(hd, qp[i], kb + (int64_t)(s0 - j0) * hd, hd, e0 - s0, scale, sc[i] + s0);
                    if (m > mx[i]) mx[i] = m;
                }
            }
        }
        for (int i = 0; i < nq; i++) {
            sum[i] = k->attn_softmax(len[i] - beg[i], sc[i] + beg[i], mx[i]);
            for (int32_t e = 0; e < hd; e++) op[i][e] = 0.0f;
        }
        for (int32_t j0 = jb; j0 < maxlen; j0 += KB) {
            const int32_t lo = minbeg > j0 ? minbeg : j0, hi = maxlen < j0 + KB ? maxlen : j0 + KB;
            const float *vb = kv_rows(k, vh, a->v_type, vrb, hd, j0, lo, hi, tmp);
            for (int i = 0; i < nq; i++) {
                const int32_t s0 = beg[i] > j0 ? beg[i] : j0, e0 = len[i] < j0 + KB ? len[i] : j0 + KB;
                if (e0 > s0) k->attn_accum(hd, sc[i] + s0, vb + (int64_t)(s0 - j0) * hd, hd, e0 - s0, op[i]);
            }
        }
        for (int i = 0; i < nq; i++) {
            float inv = 1.0f / sum[i];
            for (int32_t e = 0; e < hd; e++) op[i][e] *= inv;
            if (a->v_rot) bd_attn_rotate(op[i], hd, a->v_rot); /* back from the V cache's basis */
        }
    }
}

void bd_attention(bd_pool *pool, const bd_attn_args *a) {
    attn_ctx c = {.a = a, .k = bd_kernels_get()};
    atomic_store_explicit(&c.next, 0, memory_order_relaxed);
    /* multiply-adds of the whole call; tiny ones stay on this thread */
    int64_t work = (int64_t)a->n * a->n_head * (a->n_past + (a->n_blk > 0 ? a->n_blk : a->q_off + a->n)) * a->hd;
    if (work < (1 << 15)) attn_worker(&c, 0, 1);
    else bd_pool_run(pool, attn_worker, &c);
}
