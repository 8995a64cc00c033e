/*
 * kernels.h - the one dispatch point for compute kernels.
 *
 * A bd_kernels table holds, per weight type, the activation quantizer and
 * the multi-row dot product, plus the attention kernels and, on AMX, the
 * tile matmul. There is one table per ISA level (bd_isa): the scalar
 * reference (the type table's functions, tensor.h, and attn_ref.c), then
 * levels compiled in their own translation units with their own -m flags
 * (kernels_avx2.c, kernels_avxvnni.c, kernels_avx512.c, kernels_amx.c;
 * kernels_simd.h holds
 * what they share). kernels.c describes each level once (name, the CPU
 * features its file is compiled for, its fill function, the table it is
 * laid over) and builds every table the CPU can run at first use;
 * bd_kernels_get() hands out the best one, or the one BLOCKDRAFT_ISA
 * forces. Entries a level does not fill come from the table below it, so
 * every entry is always callable. On a non-x86-64 build only the reference
 * level exists.
 */
#ifndef BD_KERNELS_H
#define BD_KERNELS_H

#include "../base/base.h"
#include "tensor.h"

/* vec_dot_n entries (bd_vec_dot_n_fn, tensor.h): out[j] = dot(w, x +
 * j*x_stride) for j < nx (nx <= 16). The weight row is read once for all
 * activation rows (this is what makes a 16-token verify cost little more
 * than one token), and out[j] has the same bits whatever nx is and wherever
 * the row sits in the batch (decode is nx = 1; matmul.c). */

/* Attention kernels over f32 rows (scalar twins and canonical order:
 * attn_ref.c; every table gives bit-identical results).
 *   attn_scores:  out[j] = scale * dot(q, k + j*k_stride) for j < len (hd floats each);
 *                 returns the largest of them (NaNs skipped; -inf if none)
 *   attn_softmax: x[j] = exp(x[j] - mx) for j < len; returns the sum of the new x
 *   attn_accum:   out[i] += sum_j p[j] * v[j*v_stride + i] for i < hd (j in order) */
typedef float (*bd_attn_scores_fn)(int32_t hd, const float *q, const float *k, int64_t k_stride,
                                  int32_t len, float scale, float *out);
typedef float (*bd_attn_softmax_fn)(int32_t len, float *x, float mx);
typedef void (*bd_attn_accum_fn)(int32_t hd, const float *p, const float *v, int64_t v_stride,
                                 int32_t len, float *out);
/* y[i] = x[i] widened from f16, exactly (an f16 KV cache's rows before the
 * f32 attention kernels); the same bits in every table. */
typedef void (*bd_f16_to_f32_fn)(int64_t n, const bd_f16 *x, float *y);
/* y[i] = x[i] rounded to f16, to nearest even (bd_f32_to_f16: as F16C's
 * vcvtps2ph and ggml round, NaNs quiet with their payload's top bits):
 * rows going into an f16 KV cache; the same bits in every table. */
typedef void (*bd_f32_to_f16_fn)(int64_t n, const float *x, bd_f16 *y);
/* n elements (a whole number of blocks) of a KV cache type's rows to f32:
 * the values the cache holds (q8_0: d * q; q4_1: d * q + m, a multiply and
 * then an add; bf16: the bits shifted up), with the bits of the reference
 * dequantizer (bd_dequantize_row) in every table. */
typedef void (*bd_kv_to_f32_fn)(int64_t n, const void *x, float *y);

/* SiLU-gated product of the feed-forward: g[i] = silu(g[i]) * u[i] for
 * i < n, silu(x) = x / (1 + bd_expf_dd(-x)) (attn_ref.c), the same bits
 * in every table. */
typedef void (*bd_silu_mul_fn)(int64_t n, float *g, const float *u);

/* Index of the largest of x[0..n) (n >= 1) by base.h's bd_argmax rule
 * (compared with '>': ties to the lowest index, a NaN chosen only at
 * index 0); the same index in every table. The reference table's is
 * bd_argmax itself. */
typedef int32_t (*bd_argmax_fn)(const float *x, int32_t n);

/* One Gated DeltaNet step of one value head (qwen35-hybrid.md §3.4): the
 * state M [d_v][d_k] (row j for value lane j, key lanes contiguous) goes
 * from src to dst (src == dst allowed: in place) and, if q is not NULL,
 * out[j] = scale * dot(M'[j], q). Per row j, in ggml's order:
 *   M[j] *= e^g;  d_j = (v_j - dot(M[j], k)) * beta;  M[j] += d_j k
 * with plain multiplies and adds (no fma); each dot puts element i into
 * lane i mod 16 (a lane is a chain of adds in increasing i from +0) and
 * sums the lanes with bd_lanes16_tree. Every table gives the same bits:
 * a token's state and output do not depend on the kernel level, on the
 * batch it came in, or on whether a rollback replays it. */
typedef void (*bd_gdn_step_fn)(const float *src, float *dst, int32_t d_k, int32_t d_v, const float *k,
                               const float *v, float g, float beta, const float *q, float scale, float *out);

/* ISA levels, in order of preference (a later one is the faster where the
 * CPU runs it). BLOCKDRAFT_ISA takes their names. */
typedef enum bd_isa {
    BD_ISA_REF = 0, /* "ref": portable C, the scalar twins */
    BD_ISA_AVX2,    /* "avx2": AVX2 + FMA + F16C (Haswell, Zen 1 on) */
    BD_ISA_AVXVNNI, /* "avxvnni": avx2's kernels with VEX vpdpbusd (Alder Lake, Zen 5 on) */
    BD_ISA_AVX512,  /* "avx512": AVX-512 F/DQ/BW/VL/VNNI (Ice Lake, Zen 4 on) */
    BD_ISA_AMX,     /* "amx": the avx512 table plus AMX int8 tiles (Sapphire Rapids on) */
    BD_ISA_COUNT
} bd_isa;

/*
 * Row-group matmul ("tiles"): a kernel that takes 16 weight rows at a time
 * against a batch of activation rows, unpacking each weight block once for
 * the whole batch. The AMX level's (kernels_amx.c: Q4_K, Q6_K, Q8_0 on the
 * int8 tiles) and the AVX-512 level's (kernels_avx512.c: Q4_K, Q6_K with
 * vpdpbusd) fill it; matmul.c sends them the batches of at least
 * exact_rows[type] rows (callers that need a row's bits independent of its
 * batch) or fast_rows[type] (bd_matmul_fast), 0 for never.
 *   supports(): whether the kernel takes this type and width;
 *   pack_bytes() / pack() (optional, NULL: nothing to pack): a copy of the
 *     activation rows (xq, row stride xs) per group g of 16 rows in the
 *     kernel's own layout, into pack;
 *   rows(): nw weight rows at w (row stride ws; taken 16 at a time)
 *     against all n_tok activation rows (xq / xs, and pack if packed),
 *     y[t*ldy + r]; each element in the f32 order of its type's
 *     vec_dot_tile (tensor.h), whatever n_tok and nw are.
 */
typedef void (*bd_il_rows_fn)(uint32_t type, int64_t ncols, const void *w, size_t ws, int nw, const void *xq,
                              size_t xs, const void *pack, int64_t n_tok, float *y, int64_t ldy);
typedef struct bd_tile_ops {
    bool (*supports)(uint32_t type, int64_t ncols);
    size_t (*pack_bytes)(uint32_t type, int64_t ncols, int64_t n_tok);
    void (*pack)(uint32_t type, int64_t ncols, const void *xq, size_t xs, int64_t n_tok, int64_t g, void *pack);
    void (*rows)(uint32_t type, int64_t ncols, const void *w, size_t ws, int nw, const void *xq, size_t xs,
                 const void *pack, int64_t n_tok, float *y, int64_t ldy);
    int16_t exact_rows[BD_TYPE_COUNT];
    int16_t fast_rows[BD_TYPE_COUNT];
    /* Optional (NULL: the level has none): the same product on weights in
     * the interleaved layout (BD_LAYOUT_IL16, below) for any n_tok >= 1,
     * xq / xs the quantized activation rows in place, and for Q8_0 also
     * pack (what pack() made of them: Q8_0 always needs it); w is the
     * first of nw rows (nw a multiple of 16) and starts a group; each
     * element in the tile order: for Q4_K / Q6_K the bits of vec_dot_n
     * on the rows in the file's layout, for Q8_0 those of its row groups
     * (bd_vec_dot_tile_ref), not vec_dot_n's. The matrices bd_model_open
     * interleaves are those of the types il_rows takes (bd_il16_supports),
     * Q8_0 only in DFlash drafters, whose products are all bd_matmul_fast. */
    bd_il_rows_fn il_rows;
    /* Whether bd_model_open interleaves by default on this level (where it
     * measured faster; BLOCKDRAFT_INTERLEAVE=1 / 0 overrides). */
    bool il_default;
} bd_tile_ops;

typedef struct bd_kernels {
    const char *name;                            /* the level's name: "ref", "avx2", ... */
    bd_isa isa;
    bd_vec_dot_n_fn vec_dot_n[BD_TYPE_COUNT];    /* by weight type */
    bd_from_float_fn from_float[BD_TYPE_COUNT];  /* by activation type */
    bd_attn_scores_fn attn_scores;
    bd_attn_softmax_fn attn_softmax;
    bd_attn_accum_fn attn_accum;
    bd_f16_to_f32_fn f16_to_f32;
    bd_f32_to_f16_fn f32_to_f16;
    bd_kv_to_f32_fn kv_to_f32[BD_TYPE_COUNT];   /* by cache type: BF16, Q8_0, Q4_0, Q4_1, IQ4_NL,
                                                    Q5_0, Q5_1 (f16: f16_to_f32) */
    bd_silu_mul_fn silu_mul;
    bd_gdn_step_fn gdn_step;
    bd_argmax_fn argmax;
    const bd_tile_ops *tile;                     /* row-group matmul; NULL where there is none */
} bd_kernels;

/* The table in use: the level BLOCKDRAFT_ISA names if this machine runs it,
 * else the best level it runs. Never NULL. */
const bd_kernels *bd_kernels_get(void);
/* False, with a message, if BLOCKDRAFT_ISA is set to an unknown level or to
 * one this machine cannot run (naming the missing CPU features, or why the
 * OS refused). bd_model_open calls it, so a forced level that cannot run
 * fails the program instead of silently running another. */
bool bd_kernels_check(char *err, size_t errlen);
/* Where the interleaved kernels' weight-stream prefetch (kernels_simd.h's
 * il_prefetch) puts its lines: true L1 (prefetcht0), false L2
 * (prefetcht1). Set when the tables are built: BLOCKDRAFT_PREFETCH=l1|l2
 * if given (bd_kernels_check refuses another value), else L1 on AMD family
 * 0x1A (Zen 5), where it was measured faster, and L2 elsewhere (the choice
 * measured on Zen 4). A hint only: the results' bits never depend on it. */
extern bool bd_il_prefetch_l1;
/* How far ahead of the block in use that prefetch reaches, bytes: 8 KiB
 * on AMD (the best of the distances measured on Zen 4, kernels_simd.h),
 * 1 KiB elsewhere (an Intel Xeon with AMX, every level without AMX:
 * 4 and 8 KiB left the interleaved 4B decode 15-20 % behind the file's
 * layout). Set when the tables are built; a build with
 * CFLAGS=-DIL_PF_BYTES=N uses N everywhere (to measure others). A hint
 * only: the results' bits never depend on it. */
extern uint32_t bd_il_prefetch_bytes;
/* The most Q4_K activation rows for which the `avx2` level's interleaved
 * groups read the codes inside the pair kernel (kernels_il.h) rather than
 * from a copy unpacked once per block: 16 on Zen 4 (AMD family 0x19 with
 * AVX-512), 6 elsewhere (kernels_avx2.c's measurements). Set when the tables are
 * built; `avxvnni` always reads them in the kernel. The results' bits
 * never depend on it. */
extern int bd_il_fused_rows_avx2;
/* The most activation rows one call of the `avx2` level's Q4_K pair
 * kernel takes (kernels_avx2.c's il_pair_q4k; 1..4): 4 on Zen 4 (AMD
 * family 0x19 with AVX-512), 3 elsewhere (Zen 5 measured 3 faster).
 * `avxvnni` always takes 4. Set when the tables are built; the results'
 * bits never depend on it. */
extern int bd_il_pair_rows_avx2;
/* The most Q6_K activation rows the `avx2` level's interleaved groups
 * take through il_few_q6k (the codes unpacked in registers, up to 6 rows
 * a call, balanced) rather than through a copy unpacked once per block
 * (il_groups): 10 on Zen 4 (AMD family 0x19 with AVX-512), 2 elsewhere
 * (Zen 5 measured, Intel not: kernels.c). `avxvnni` always sends 2. Set when the
 * tables are built; the results' bits never depend on it. */
extern int bd_il_few_rows_q6k_avx2;
/* Where the avx512 level sends one activation row (decode) against
 * interleaved Q4_K or Q6_K weights: the avx2 level's il_rows (256-bit
 * kernels), or NULL for its own 512-bit ones. Set when the tables are
 * built: the avx2 level's on Zen 4 (AMD family 0x19 with AVX-512), which
 * runs each 512-bit operation as two 256-bit halves and streamed these
 * weights from memory 10-20 % slower through the 512-bit one-row loops
 * than through the 256-bit ones (kernels.c's measurements); NULL
 * elsewhere. BLOCKDRAFT_ONE_ROW=256|512 overrides (bd_kernels_check
 * refuses another value). The results' bits never depend on it: every
 * il_rows gives the tile order. */
extern bd_il_rows_fn bd_il_one_row;
/* "256" or "512": the vector width of the avx512 level's one-row
 * interleaved products in use (builds the tables first). */
const char *bd_kernels_one_row_name(void);
/* "l1" or "l2": the choice in use (builds the tables first). */
const char *bd_kernels_prefetch_name(void);
/* The table of one level, or NULL if this machine cannot run it. */
const bd_kernels *bd_kernels_for(bd_isa isa);
/* Whether this machine runs the level; if not, why (e.g. "CPU lacks
 * amx-tile amx-int8", "not built for this architecture"). */
bool bd_isa_available(bd_isa isa, char *why, size_t whylen);
/* Whether a CPU with these features could run the level (its file is
 * built and every feature it is compiled for is there; OS permissions not
 * included); if not, the missing features in why. */
bool bd_isa_runs_on(bd_isa isa, const bd_cpu *cpu, char *why, size_t whylen);
const char *bd_isa_name(bd_isa isa); /* "?" for a bad value */
bool bd_isa_parse(const char *name, bd_isa *isa);

/* Fill functions of the levels (kernels.c calls them; entries left NULL
 * come from the table below). */
void bd_attn_kernels_fill_ref(bd_kernels *k);
void bd_kernels_fill_avx2(bd_kernels *k);
void bd_kernels_fill_avxvnni(bd_kernels *k);
void bd_kernels_fill_avx512(bd_kernels *k);
void bd_kernels_fill_amx(bd_kernels *k);
/* AMX: ask Linux for this process's tile state (arch_prctl); false with
 * the reason if refused. */
bool bd_amx_enable(char *err, size_t errlen);

/* The exp of the attention softmax, written out so that the scalar and SIMD
 * versions round identically (libm's expf and a SIMD exp need not agree):
 * x = n ln2 + r with n = nearbyint(x log2e) and |r| <= ln2/2 (Cody-Waite
 * split of ln2), e^r by its degree-7 Taylor polynomial in Horner form
 * (truncation error < 2^-27 relative), times 2^n built in the exponent
 * bits. x below BD_EXP_LO (where 2^n would leave the normal range) gives 0,
 * x above BD_EXP_HI is clamped. Within 2 ulp of expf (test_kernels.c). */
#define BD_EXP_LO (-87.33f)
#define BD_EXP_HI 88.0f
#define BD_EXP_LOG2E 1.44269504088896341f
#define BD_EXP_LN2_HI 0.693359375f
#define BD_EXP_LN2_LO (-2.12194440e-4f)
#define BD_EXP_C2 (1.0f / 2)
#define BD_EXP_C3 (1.0f / 6)
#define BD_EXP_C4 (1.0f / 24)
#define BD_EXP_C5 (1.0f / 120)
#define BD_EXP_C6 (1.0f / 720)
#define BD_EXP_C7 (1.0f / 5040)
float bd_expf_poly(float x);

/* e^x for the SiLU, evaluated in double and rounded once to float, so it is
 * the correctly rounded expf except within ~1e-14 of a rounding midpoint:
 * it agrees with libm's expf (and with llama.cpp's CPU SiLU, as the
 * oracle's logits tests measure) where bd_expf_poly would drift by an ulp
 * often enough to move Q4_K_M activations across int8 rounding steps.
 * x clamped to [BD_EXPD_LO, BD_EXPD_HI] (e^x is 0 resp. inf in float
 * beyond); n = nearbyint(x log2e), r = x - n ln2 (ln2 split hi + lo),
 * e^r by its degree-11 Taylor polynomial (Horner, fma, double), times 2^n. */
#define BD_EXPD_LO (-150.0)
#define BD_EXPD_HI 90.0
#define BD_EXPD_LOG2E 1.4426950408889634
#define BD_EXPD_LN2_HI 6.93147180369123816490e-01
#define BD_EXPD_LN2_LO 1.90821492927058770002e-10
/* 1/k! for k = 11 down to 2 (the terms 1 + r come as two fmas with 1) */
#define BD_EXPD_COEFS                                                                             \
    {2.505210838544172e-08, 2.755731922398589e-07, 2.7557319223985893e-06, 2.48015873015873e-05, \
     0.0001984126984126984, 0.001388888888888889, 0.008333333333333333, 0.041666666666666664,   \
     0.16666666666666666, 0.5}
float bd_expf_dd(float x);
/* a[l] + a[l+8], then + [l+4], then + [l+2], then lane 0 + lane 1 */
float bd_lanes16_tree(const float a[16]);
/* The reference table's gdn_step (attn_ref.c); the SIMD tables hand it the
 * widths they have no loop for (d_k not a multiple of 16). */
void bd_gdn_step_ref(const float *src, float *dst, int32_t d_k, int32_t d_v, const float *k, const float *v,
                     float g, float beta, const float *q, float scale, float *out);

/* ------------------------------------------------------------------------
 * Matrix multiply
 * ---------------------------------------------------------------------- */

/*
 * Weight layouts.
 *
 * BD_LAYOUT_ROWS: the file's, row after row (row_bytes apart).
 *
 * BD_LAYOUT_IL16 (Q4_K, Q6_K and Q8_0; built in place at load, bd_mat_interleave):
 * rows in groups of 16, group g taking the same 16 row_bytes bytes at
 * data + 16 g row_bytes that its rows took. Inside a group the blocks come
 * in order, block i of all 16 rows in 16 bb bytes at i 16 bb (bb: the
 * type's block bytes), laid out as
 *     byte 64 D + 4 r + b      = byte 4 D + b of row r's block i  (D < bb / 4, b < 4)
 *     byte 64 nd + t r + b     = byte 4 nd + b of row r's block i  (nd = bb / 4, t = bb % 4, b < t)
 * that is, each block's 32-bit words transposed across the 16 rows (Q6_K's
 * last 2 bytes, its scale, row after row after them). A 64-byte load then
 * holds the same word of all 16 rows, one per 32-bit lane: the form the
 * row-group kernels work in, which they otherwise build with 16 x 16
 * transposes on every call. Q8_0 (34-byte blocks, whose 2-byte scale
 * would share a word with the codes; rows of whole pairs of blocks) takes
 * a pair of blocks i = 2 P, 2 P + 1 at a time, in 2 x 16 x 34 = 1088
 * bytes at P 1088:
 *     byte 512 b + 64 D + 4 r + k  = code byte 4 D + k of row r's block 2 P + b  (D < 8)
 *     byte 1024 + 32 b + 2 r + k   = scale byte k of row r's block 2 P + b
 * so every code load is a whole aligned 64-byte word. The group's bytes are also one stream instead
 * of 16, which the hardware prefetchers follow (kbench-like test, Zen 5,
 * 2 threads, 65536 x 4096 Q4_K from memory: 16 rows 15.9 -> 12.6 ms, one
 * row 3.8 -> 3.3 ms against the one-row kernel). Same bytes, same bits
 * (the kernels' tile order); nothing but this file's functions and the
 * tables' il_rows read it.
 */
enum { BD_LAYOUT_ROWS = 0, BD_LAYOUT_IL16 = 1 };
#define BD_IL16_ROWS 16
#define BD_IL16_MAX_ROW_BYTES (64u << 10) /* bd_mat_interleave's limit (a row fits a stack buffer) */

/* A weight matrix view: nrows rows of ncols elements (ggml ne = {ncols, nrows}). */
typedef struct bd_mat {
    uint32_t type;
    int64_t ncols;     /* ne[0], contiguous */
    int64_t nrows;     /* ne[1] (times ne[2] for expert stacks) */
    uint64_t row_bytes;
    const void *data;  /* borrowed (usually from the mmap) */
    uint32_t layout;   /* BD_LAYOUT_*; views of an IL16 matrix start and end on a group */
} bd_mat;

/* Rows r0 .. r0 + n - 1 of W as a matrix of their own (the caller keeps
 * them inside W, and on 16-row groups where W is interleaved). */
static inline bd_mat bd_mat_rows(const bd_mat *W, int64_t r0, int64_t n) {
    bd_mat v = *W;
    v.data = (const uint8_t *)W->data + (size_t)r0 * W->row_bytes;
    v.nrows = n;
    return v;
}

/* Whether a matrix of this type and width can be interleaved (Q4_K / Q6_K,
 * whole blocks; Q8_0, whole pairs of blocks; rows within
 * BD_IL16_MAX_ROW_BYTES; the row count is the
 * caller's to check: a multiple of 16 per view it will take). */
bool bd_il16_supports(uint32_t type, int64_t ncols);
/* Interleave 16 rows (src, row stride ws) into dst (16 * row_bytes bytes;
 * not overlapping src), per the layout above. */
void bd_il16_pack_group(uint32_t type, int64_t ncols, const void *src, size_t ws, void *dst);
/* Block i of row r (< 16) of the interleaved group at group, back in the
 * type's own block layout, into blk (bb bytes). */
void bd_il16_get_block(uint32_t type, const void *group, int r, int64_t i, void *blk);
/* Rewrite W's rows in place in the IL16 layout (W->data must be writable
 * whatever its const: the caller's copy of the file) and set W->layout;
 * tmp: 16 * row_bytes bytes of scratch. False, W untouched, if the type,
 * width or row count (nrows % 16) does not allow it. */
bool bd_mat_interleave(bd_mat *W, void *tmp);

/* Batches of up to this many rows give, row for row, bit-identical results
 * to one row at a time (vec_dot_n is batch-invariant, and the Q4_K / Q6_K
 * tiles share its f32 order); speculative verify batches must stay within
 * it (bd_matmul itself is batch-invariant at any size: the Q8_0 tiles,
 * whose f32 order differs, serve only bd_matmul_fast). */
#define BD_MATMUL_EXACT_ROWS 32

/* Q4_K batches of at least this many rows take the AMX tiles in bd_matmul
 * too (same bits; the AMX table's exact_rows). A 16-token group of tiles
 * costs about the same for 1 or 16 rows (unpacking the weights dominates).
 * Since the tile calls prefetch their next row group block by block
 * (kernels_amx.c), 6 rows from memory, 2 threads, kbench, ms for 400 MiB:
 * tiles against the few-row dots 24 / 32 (2560 x 9728), 30 / 30 (9728 x
 * 2560, 4096 x 2560), 42 / 41 (248320 x 2048); at 5 rows the dots win
 * three of the four. 4B verify t(6) at depth 512: 206-213 -> 195 ms. */
#define BD_MATMUL_TILE_Q4K_ROWS 6

/* The same for Q6_K. Its tiles unpack through byte lookups (kernels_amx.c);
 * from memory, 2 threads, the tiles measured even with vec_dot_n at 10 rows
 * on the output heads (248320 x 2048: 66 against 67 ms for two copies,
 * 151936 x 2560: 49 against 51) and ahead on ffn_down (2560 x 9728: 27
 * against 39); only a mixture-of-experts down projection (2048 x 512), which
 * seldom gets 10 rows, stays faster on vec_dot_n (37 against 40). */
#define BD_MATMUL_TILE_Q6K_ROWS 10

/* Bytes of scratch bd_matmul needs for n_tok activation rows. */
size_t bd_matmul_scratch_size(const bd_mat *W, int64_t n_tok);

/* Y[t][r] = sum_c W[r][c] * X[t][c] for t < n_tok, r < nrows.
 * X: [n_tok][ldx] f32 (ldx >= ncols); Y: [n_tok][ldy] f32.
 * scratch: at least bd_matmul_scratch_size bytes, 64-byte aligned.
 * Runs on all threads of pool. Does not allocate. */
void bd_matmul(bd_pool *pool, const bd_mat *W, const float *X, int64_t ldx, int64_t n_tok,
               float *Y, int64_t ldy, void *scratch);

/* Several matrices applied to the same input X (the attention's Q, K, V;
 * the feed-forward's gate and up): X is converted once and all their rows
 * are shared out in one pool run. Row for row the same bits as separate
 * bd_matmul calls (which it falls back to when the matrices differ in
 * width or activation type). At most BD_MATMUL_MULTI outputs; scratch:
 * the largest bd_matmul_scratch_size among them. */
#define BD_MATMUL_MULTI 4
typedef struct bd_matmul_out {
    const bd_mat *W;
    float *Y;     /* [n_tok][ldy] */
    int64_t ldy;
} bd_matmul_out;
void bd_matmul_multi(bd_pool *pool, const bd_matmul_out *outs, int n_outs, const float *X, int64_t ldx,
                     int64_t n_tok, void *scratch);

/* Several matrices, each applied to its own rows of one input (a mixture
 * of experts: every expert on the rows routed to it). X's n_x rows are
 * converted once, each group's rows gathered from them, and all groups'
 * weight rows shared out in one pool run (per-expert matmuls were two pool
 * runs per expert, ~90 experts a layer in a 16-token verify). Row for row
 * the same bits as bd_matmul on the gathered rows. Groups with n_tok 0 are
 * skipped. A group whose tile batch would pack its activations (AMX) goes
 * through vec_dot_n instead, the same bits. False, nothing written, where
 * the matrices differ in width or activation type or a group is
 * interleaved Q8_0 on a table that packs it: the caller then runs
 * bd_matmul per group. Scratch: bd_matmul_grouped_scratch_size(any W, n_x, the groups'
 * rows in all, n_groups), 64-byte aligned. Does not allocate. */
typedef struct bd_matmul_grp {
    const bd_mat *W;
    const int32_t *rows; /* [n_tok] rows of X, each < n_x */
    int64_t n_tok;
    float *Y; /* [n_tok][ldy] */
    int64_t ldy;
} bd_matmul_grp;
size_t bd_matmul_grouped_scratch_size(const bd_mat *W, int64_t n_x, int64_t n_rows, int n_groups);
bool bd_matmul_grouped(bd_pool *pool, const bd_matmul_grp *g, int n_groups, const float *X, int64_t ldx,
                       int64_t n_x, void *scratch);

/* As bd_matmul, for callers that do not need a row's result to be
 * independent of its batch: the DFlash drafter, whose output only decides
 * which tokens are proposed, never which are emitted. Small batches may
 * then take the tile path too where it is the faster one (Q8_0: the
 * tables' fast_rows; BD_MATMUL_TILE_Q8_ROWS on AMX). Results agree with bd_matmul's to f32
 * rounding. Scratch: bd_matmul_fast_scratch_size. */
#define BD_MATMUL_TILE_Q8_ROWS 4
size_t bd_matmul_fast_scratch_size(const bd_mat *W, int64_t n_tok);
void bd_matmul_fast(bd_pool *pool, const bd_mat *W, const float *X, int64_t ldx, int64_t n_tok,
                    float *Y, int64_t ldy, void *scratch);

/* One row of W dequantized to f32 (used for embeddings lookups). */
bool bd_mat_get_row(const bd_mat *W, int64_t row, float *dst);

#endif
