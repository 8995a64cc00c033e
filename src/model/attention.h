/*
 * attention.h - softmax attention of a batch of query rows over a KV cache.
 */
#ifndef BD_ATTENTION_H
#define BD_ATTENTION_H

#include "../base/base.h"

/* Query rows (row, head pairs of one KV head) that share each pass over
 * the keys: every key block is loaded once for all of them. */
#define BD_ATTN_QB 64
/* Keys per block of a pass; an f16 cache's blocks are widened into
 * kv_tmp, [n_threads][BD_ATTN_KB][hd] floats. */
#define BD_ATTN_KB 32

typedef struct bd_attn_args {
    const float *q;        /* [n][n_head*hd] (already normed and rotated) */
    const void *k_cache;   /* [n_kv][capacity] rows of hd elements of k_type, this layer's: a
                              head's rows are contiguous */
    const void *v_cache;   /* [n_kv][capacity] rows of v_type likewise */
    int64_t kv_head_stride; /* elements from one KV head's rows to the next head's (capacity * hd) */
    uint32_t k_type, v_type; /* BD_TYPE_F32 (0 as well), BD_TYPE_F16 or BD_TYPE_Q8_0 */
    float *kv_tmp;         /* [n_threads][BD_ATTN_KB][hd] scratch; needed unless both are f32 */
    float *out;            /* [n][n_head*hd]; may be q itself: each (row, head)
                              slot's q is read whole before its output is written */
    float *scores;         /* [n_threads][BD_ATTN_QB][scores_stride] scratch */
    int64_t scores_stride; /* >= n_past + n_blk (n_past + n when n_blk is 0) */
    int32_t n, n_head, n_kv, hd;
    int32_t n_past;        /* cache rows before the batch */
    int32_t q_off;         /* q / out row t is batch row q_off + t (0: the batch's first n
                              rows); a row's output does not depend on which others are asked */
    int32_t n_blk;         /* rows of the batch in the cache, >= q_off + n (0: q_off + n);
                              what a non-causal row sees */
    bool causal;
    int32_t window;        /* > 0: row t sees no key more than window - 1 positions before
                              its own (n_past + q_off + t); later keys are unaffected (sliding-window
                              drafter layers, as llama.cpp masks them) */
} bd_attn_args;

/* Runs on every thread of pool; does not allocate. */
void bd_attention(bd_pool *pool, const bd_attn_args *a);

/* A session parameter's KV type (enum bd_kv_type) as the cache's tensor
 * type (BD_TYPE_F32 for BD_KV_DEFAULT); false for a value outside the
 * enum. */
bool bd_attn_cache_type(int32_t kv_type, uint32_t *type);
/* Bytes of a cache row of hd elements of type; 0 when hd is not a whole
 * number of the type's blocks (q8_0: 32). */
size_t bd_attn_row_bytes(uint32_t type, int32_t hd);
/* One row of n elements into a cache of type at dst: f32 as it is, f16
 * rounded to nearest even, q8_0 quantized as ggml quantizes it (absmax /
 * 127 scale, ties to even; our activation quantizer). */
void bd_attn_kv_store(void *dst, uint32_t type, const float *row, int32_t n);

#endif
