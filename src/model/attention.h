/*
 * attention.h - softmax attention of a batch of query rows over a KV cache.
 */
#ifndef BD_ATTENTION_H
#define BD_ATTENTION_H

#include "../base/base.h"

/* Query rows (row, head pairs of one KV head) that share each pass over
 * the keys: every key block is loaded once for all of them. */
#define BD_ATTN_QB 64
/* Keys per block of a pass; an f16 (or other non-f32) cache's blocks are widened into
 * kv_tmp, [n_threads][BD_ATTN_KB][hd] floats. */
#define BD_ATTN_KB 32

typedef struct bd_attn_args {
    const float *q;        /* [n][n_head*hd] (already normed and rotated) */
    const void *k_cache;   /* [n_kv][capacity] rows of hd elements of k_type, this layer's: a
                              head's rows are contiguous */
    const void *v_cache;   /* [n_kv][capacity] rows of v_type likewise */
    int64_t kv_head_stride; /* elements from one KV head's rows to the next head's (capacity * hd) */
    uint32_t k_type, v_type; /* BD_TYPE_F32 (0 as well) or a cache type (bd_attn_cache_type) */
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
    int32_t v_rot;         /* bd_attn_rot of the V cache: > 0, the cache holds rotated values and
                              each output is rotated back (bd_attn_rotate) */
} bd_attn_args;

/* Runs on every thread of pool; does not allocate. */
void bd_attention(bd_pool *pool, const bd_attn_args *a);

/*
 * The rotated basis of a quantized cache, as llama.cpp (v0.5.0,
 * llama-kv-cache.cpp and llama-graph.cpp's build_attn) keeps it: when the
 * K cache's type is a block type (q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1;
 * not f32 / f16 / bf16) and the head size a multiple of 64, every head's
 * query and key are multiplied by the orthonormal Walsh-Hadamard matrix H
 * (Sylvester's order, H = H^T, H H = I) in chunks of the largest power of
 * two dividing the head size, after RoPE and before the key is stored;
 * likewise the value, in chunks of 64, when the V cache is of a block
 * type, and the attention output is multiplied by H again. Scores and
 * outputs are unchanged in exact arithmetic; the rotation spreads a
 * channel's outlier over its chunk, so that the blocks of a real model's
 * keys quantize with less error. blockdraft keeps the same basis so that
 * its quantized caches hold what llama.cpp's do. llama.cpp's switch to turn
 * it off is honoured the same way: the environment variable
 * LLAMA_ATTN_ROT_DISABLE read as an integer (atoi), non-zero = no rotation
 * of either cache, read when a session or drafter cache is created.
 */
/* Chunk length of the rotation of a K (is_v false) or V cache of type with
 * heads of hd, 0 for none (or when LLAMA_ATTN_ROT_DISABLE turns it off). */
int32_t bd_attn_rot(uint32_t type, int32_t hd, bool is_v);
/* x[0 .. n) := H x for each consecutive chunk of rot (a power of two
 * dividing n): x / sqrt(rot), then butterflies of span 1, 2, 4, ... (the
 * order of ggml's CPU transform, so the same bits). */
void bd_attn_rotate(float *x, int64_t n, int32_t rot);

/* A session parameter's KV type (enum bd_kv_type) as the cache's tensor
 * type (BD_TYPE_F32 for BD_KV_DEFAULT); false for a value outside the
 * enum. */
bool bd_attn_cache_type(int32_t kv_type, uint32_t *type);
/* Bytes of a cache row of hd elements of type; 0 when hd is not a whole
 * number of the type's blocks (32 for each block type of the cache). */
size_t bd_attn_row_bytes(uint32_t type, int32_t hd);
/* One row of n elements (whole blocks of type) into a cache of type at
 * dst: f32 as it is, f16 / bf16 rounded to nearest even, q8_0 quantized as
 * ggml quantizes it (absmax / 127 scale, ties to even; our activation
 * quantizer), the 4- and 5-bit types by llama.cpp's rules
 * (bd_quantize_row_kv). The caller has rotated the row where the type asks
 * it (bd_attn_rot). */
void bd_attn_kv_store(void *dst, uint32_t type, const float *row, int32_t n);

#endif
