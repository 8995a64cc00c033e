/*
 * kernels_simd.h - what the x86 kernel files share (kernels_avx2.c,
 * kernels_avx512.c, kernels_amx.c; x86-64 builds only).
 *
 * Each of those files is compiled with its own -m flags and includes this
 * header, so the inline helpers here compile to that file's instructions:
 * where a helper has a better form on a wider ISA it picks it by the
 * compiler's feature macros (q5_high_bits). Everything needs at least AVX2,
 * FMA and F16C, which all three files have.
 *
 *   - the generator of the per-type vec_dot_n entry points (BD_DOT_N), so
 *     a kernel body is written once with its row count as a constant;
 *   - 256-bit helpers: horizontal sums in the f32 order the twins fix,
 *     nibble and fifth-bit unpacking, the 32-element block unpackers of
 *     the Q8_0 and Q8_1 families;
 *   - the Q2_K / Q3_K dot kernels (one form for both files);
 *   - the K-quant 6-bit scale unpacking;
 *   - the float-type dot kernel (ggml's summation order) for any vector
 *     width (BD_FLOAT_KERNEL);
 *   - the Q8_K quantizer's choice of the largest-magnitude value.
 */
#ifndef BD_KERNELS_SIMD_H
#define BD_KERNELS_SIMD_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

#define BD_INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")
/* KEEP(v): v stays in a register as computed at this point (an empty asm
 * that claims to read and write it; no instruction). Written after each
 * step of an accumulator chain of integer vector adds, it stops GCC's
 * reassociation from regrouping the chain into a tree that computes all of
 * a block's products first and spills them to the stack (AVX2 has 16
 * registers). Integer sums are exact in any order: the bits do not change.
 * kbench, Zen 4, one thread, 2048 x 2048 Q4_K in cache, AVX2 rows: 16 rows
 * ~0.97 -> ~0.80 ms, 64 rows 3.45 -> 2.55 ms. Building with
 * OPT="-O2 -DBD_NO_KEEP" leaves the markers out, for A/B runs. */
#ifdef BD_NO_KEEP
#define KEEP(v) ((void)0)
#else
#define KEEP(v) __asm__("" : "+x"(v))
#endif

#define NX_MAX 16 /* activation rows per vec_dot_n call (kernels.h) */

BD_INLINE float f16f(bd_f16 h) { return _cvtsh_ss(h); }

/* Interleaved weights (kernels.h's BD_LAYOUT_IL16): a group's blocks are
 * one forward stream. While block p (n bytes) is used, the lines
 * bd_il_prefetch_bytes further on are asked into L2 (the L1 prefetcher
 * doing the rest) or, on Zen 5, into L1 (bd_il_prefetch_l1, kernels.c says
 * why). Past the group's end the hint lands in the next group (which the
 * same work item usually reads next) or nowhere (prefetches never fault).
 * Zen 4, 2 threads, 9728 x 2560 from memory, one activation row (kbench),
 * ms per 512 MiB Q4_K / Q6_K: into L1 two blocks ahead 19.9 / 32.6, none
 * 18.4 / 17.2, into L2 2 KiB ahead 17.7 / 22.0, 4 KiB 18.0 / 17.3, 8 KiB
 * 17.0 / 16.9. (Zen 5 had measured none 25 % slower than into L1.) On
 * Zen 5 (family 26, same kbench, `avx512` / `avxvnni`, two alternating
 * builds each) 1, 4, 8 and 16 KiB all landed in 12.2-14.8 / 13.6-17.3 ms
 * (Q4_K) and 10.1-14.2 / 13.2-16.5 (Q6_K): within that VM's noise, so AMD
 * keeps 8 KiB. On an Intel Xeon (family 6, AMX; 4B Q4_K_M decode, `avx512`,
 * 2 threads, two rounds of bench -r 2 -n 64, tok/s) 512 B 10.6 / 10.6,
 * 1 KiB 10.9 / 10.7, 1.5 KiB 10.6 / 10.6, 2 KiB 10.4 / 10.5, 4 KiB 9.5 /
 * 9.4, 8 KiB 9.4 / 9.4; hence 1 KiB there (kernels.c). Build with
 * CFLAGS=-DIL_PF_BYTES=N to measure others. */
BD_INLINE void il_prefetch(const uint8_t *p, size_t n) {
#ifdef IL_PF_BYTES
    const char *q = (const char *)p + IL_PF_BYTES;
#else
    const char *q = (const char *)p + bd_il_prefetch_bytes;
#endif
    /* (kernels.h's bd_il_prefetch_l1: the hint is an immediate, so two loops) */
    if (bd_il_prefetch_l1)
        for (size_t o = 0; o < n; o += 64) _mm_prefetch(q + o, _MM_HINT_T0);
    else
        for (size_t o = 0; o < n; o += 64) _mm_prefetch(q + o, _MM_HINT_T1);
}

BD_INLINE const void *row_at(const void *x, size_t stride, int r) {
    return (const uint8_t *)x + (size_t)r * stride;
}

/* ------------------------------------------------------------------------
 * vec_dot_n entry points
 *
 * BD_DOT_N(NAME, KERNEL, ROWS) defines NAME (a bd_vec_dot_n_fn) from an
 * always-inline KERNEL(n, w, x, xs, out, NX) whose row count NX is a
 * constant at each call, so its row loops unroll and the accumulators
 * become registers. ROWS = 16: one instantiation per row count 1..16;
 * ROWS = 8, 4 or 2: the powers of two up to ROWS, the rows taken greedily
 * (7 = 4 + 2 + 1), fewer instantiations for kernels that gain little from
 * more rows or have fewer registers. Each row's result must not depend on
 * the split (batch invariance, test_kernels.c).
 * ---------------------------------------------------------------------- */

#define BD_NX_CASE(KERNEL, K) \
    case K: KERNEL(n, w, x, xs, out, K); break;
#define BD_NX_CASES_2(KERNEL) BD_NX_CASE(KERNEL, 1) default: KERNEL(n, w, x, xs, out, 2); break;
#define BD_NX_CASES_4(KERNEL) BD_NX_CASE(KERNEL, 1) BD_NX_CASE(KERNEL, 2) default: KERNEL(n, w, x, xs, out, 4); break;
#define BD_NX_CASES_8(KERNEL) \
    BD_NX_CASE(KERNEL, 1) BD_NX_CASE(KERNEL, 2) BD_NX_CASE(KERNEL, 4) default: KERNEL(n, w, x, xs, out, 8); break;
#define BD_NX_CASES_16(KERNEL)                                                                                \
    BD_NX_CASE(KERNEL, 1) BD_NX_CASE(KERNEL, 2) BD_NX_CASE(KERNEL, 3) BD_NX_CASE(KERNEL, 4)                   \
    BD_NX_CASE(KERNEL, 5) BD_NX_CASE(KERNEL, 6) BD_NX_CASE(KERNEL, 7) BD_NX_CASE(KERNEL, 8)                   \
    BD_NX_CASE(KERNEL, 9) BD_NX_CASE(KERNEL, 10) BD_NX_CASE(KERNEL, 11) BD_NX_CASE(KERNEL, 12)                \
    BD_NX_CASE(KERNEL, 13) BD_NX_CASE(KERNEL, 14) BD_NX_CASE(KERNEL, 15) default: KERNEL(n, w, x, xs, out, 16); \
    break;

/* rows of the next KERNEL call: all up to `rows`, or (rows < 16) the
 * largest power of two */
BD_INLINE int nx_take(int nx, const int rows) {
    int k = nx < rows ? nx : rows;
    if (rows < NX_MAX) k = 1 << (31 - __builtin_clz((unsigned)k));
    return k;
}

#define BD_DOT_N(NAME, KERNEL, ROWS)                                                          \
    static void NAME(int64_t n, const void *w, const void *x, size_t xs, int nx, float *out) { \
        while (nx > 0) {                                                                      \
            const int k = nx_take(nx, ROWS);                                                  \
            switch (k) { BD_NX_CASES_##ROWS(KERNEL) }                                         \
            nx -= k;                                                                          \
            x = (const uint8_t *)x + (size_t)k * xs;                                          \
            out += k;                                                                         \
        }                                                                                     \
    }

/* ------------------------------------------------------------------------
 * 256-bit helpers
 * ---------------------------------------------------------------------- */

/* Sum of 8 f32 lanes as ((0+4) + (2+6)) + ((1+5) + (3+7)): the order of
 * dot_ref.c's hsum8 (llama.cpp's x86 reduction). */
BD_INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

BD_INLINE int hsum8i(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* 16 nibble bytes -> 32 bytes: low nibbles (elements 0..15), then high. */
BD_INLINE __m256i nibbles32(const uint8_t *qs) {
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* The 32 fifth bits of a Q5_0 / Q5_1 block as 0x10 bytes, element order. */
BD_INLINE __m256i q5_high_bits(const uint8_t *qh4) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(0x10));
#else
    /* byte j gets qh byte j/8, then test bit j%8 */
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                    _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                                       0x0303030303030303ll));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
#endif
}

/* Block unpackers of the 32-element types: block i's codes as 32 bytes in
 * element order and its scale d (and min m). Q8_0 family (activations
 * Q8_0): signed values. Q8_1 family: unsigned codes. */
BD_INLINE __m256i unpack_q8_0(const void *w, int64_t i, float *d) {
    const block_q8_0 *b = (const block_q8_0 *)w + i;
    *d = f16f(b->d);
    return _mm256_loadu_si256((const __m256i *)b->qs);
}
BD_INLINE __m256i unpack_q4_0(const void *w, int64_t i, float *d) {
    const block_q4_0 *b = (const block_q4_0 *)w + i;
    *d = f16f(b->d);
    return _mm256_sub_epi8(nibbles32(b->qs), _mm256_set1_epi8(8));
}
BD_INLINE __m256i unpack_q5_0(const void *w, int64_t i, float *d) {
    const block_q5_0 *b = (const block_q5_0 *)w + i;
    *d = f16f(b->d);
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b->qs), q5_high_bits(b->qh)), _mm256_set1_epi8(16));
}
BD_INLINE __m256i unpack_iq4_nl(const void *w, int64_t i, float *d) {
    const block_iq4_nl *b = (const block_iq4_nl *)w + i;
    *d = f16f(b->d);
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)bd_kvalues_iq4nl));
    return _mm256_shuffle_epi8(tab, nibbles32(b->qs));
}
BD_INLINE __m256i unpack_q4_1(const void *w, int64_t i, float *d, float *m) {
    const block_q4_1 *b = (const block_q4_1 *)w + i;
    *d = f16f(b->d);
    *m = f16f(b->m);
    return nibbles32(b->qs);
}
BD_INLINE __m256i unpack_q5_1(const void *w, int64_t i, float *d, float *m) {
    const block_q5_1 *b = (const block_q5_1 *)w + i;
    *d = f16f(b->d);
    *m = f16f(b->m);
    return _mm256_or_si256(nibbles32(b->qs), q5_high_bits(b->qh));
}

/* int32 lane l = sum of the products u[4l + k] * v[4l + k], k < 4, of
 * unsigned bytes u and signed bytes v: vpdpbusd where the file has it,
 * else vpmaddubsw + vpmaddwd, which gives the same integers as long as no
 * pair of products leaves int16 (it saturates): true where u < 128 and
 * |v| <= 127, e.g. 5-bit codes against Q8 activations. */
BD_INLINE __m256i dot4_u8s8(__m256i u, __m256i v) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, v);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, v);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, v), _mm256_set1_epi16(1));
#endif
}

/* KV cache rows of the 32-element block types to f32 (bd_kv_to_f32_fn):
 * the unpacked codes widened to int32, to f32 (exact), times d, plus m
 * for the types with a min, one rounding each as in quant_ref.c's
 * dequantizers (a multiply and an add, never an fma). */
BD_INLINE void kv_widen32(__m256i q, float d, const float *m, float *y) {
    const __m256 vd = _mm256_set1_ps(d);
    const __m128i h[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    UNROLL for (int c = 0; c < 4; c++) {
        const __m256i w = _mm256_cvtepi8_epi32(c & 1 ? _mm_srli_si128(h[c / 2], 8) : h[c / 2]);
        __m256 f = _mm256_mul_ps(vd, _mm256_cvtepi32_ps(w));
        if (m) f = _mm256_add_ps(f, _mm256_set1_ps(*m));
        _mm256_storeu_ps(y + 8 * c, f);
    }
}
#define KV_TO_F32_D(NAME, UNPACK)                                   \
    static inline void NAME(int64_t n, const void *x, float *y) {   \
        for (int64_t i = 0; i < n / 32; i++) {                      \
            float d;                                                \
            const __m256i q = UNPACK(x, i, &d);                     \
            kv_widen32(q, d, NULL, y + 32 * i);                     \
        }                                                           \
    }
#define KV_TO_F32_DM(NAME, UNPACK)                                  \
    static inline void NAME(int64_t n, const void *x, float *y) {   \
        for (int64_t i = 0; i < n / 32; i++) {                      \
            float d, m;                                             \
            const __m256i q = UNPACK(x, i, &d, &m);                 \
            kv_widen32(q, d, &m, y + 32 * i);                       \
        }                                                           \
    }
KV_TO_F32_D(kv_q4_0_to_f32, unpack_q4_0)
KV_TO_F32_D(kv_q5_0_to_f32, unpack_q5_0)
KV_TO_F32_D(kv_iq4_nl_to_f32, unpack_iq4_nl)
KV_TO_F32_DM(kv_q4_1_to_f32, unpack_q4_1)
KV_TO_F32_DM(kv_q5_1_to_f32, unpack_q5_1)

/* bf16 -> f32: each 16-bit pattern shifted into the top of its lane
 * (exact, NaNs included), 8 at a time; the tail as the twin does it. */
static inline void kv_bf16_to_f32(int64_t n, const void *x, float *y) {
    const bd_bf16 *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) y[i] = bd_bf16_to_f32(h[i]);
}

/* Bytes per block of the type an unpacker reads (for prefetching). */
#define BD_BLOCK_BYTES(UNPACK) BD_BB_##UNPACK
#define BD_BB_unpack_q8_0 sizeof(block_q8_0)
#define BD_BB_unpack_q4_0 sizeof(block_q4_0)
#define BD_BB_unpack_q5_0 sizeof(block_q5_0)
#define BD_BB_unpack_iq4_nl sizeof(block_iq4_nl)
#define BD_BB_unpack_q4_1 sizeof(block_q4_1)
#define BD_BB_unpack_q5_1 sizeof(block_q5_1)

/* Q4_1 / Q5_1 x Q8_1 (unsigned codes): per block and row, the int32 lanes
 * of dot4_u8s8 added to an 8-lane f32 accumulator by fma with dw * dx,
 * the mins (mw * sx) to a separate f32 sum; the result hsum8(acc) + that
 * sum: dot_ref.c's q32_accum order. NXM: rows per call at most. */
#define BD_Q81_KERNEL(NAME, UNPACK, NXM)                                                          \
    BD_INLINE void NAME(int64_t n, const void *w, const void *x, size_t xs, float *out, const int NX) { \
        __m256 acc[NXM];                                                                          \
        float accm[NXM];                                                                          \
        UNROLL for (int r = 0; r < NX; r++) {                                                     \
            acc[r] = _mm256_setzero_ps();                                                         \
            accm[r] = 0;                                                                          \
        }                                                                                         \
        for (int64_t i = 0; i < n / QK8_1; i++) {                                                 \
            float dw, mw;                                                                         \
            _mm_prefetch((const char *)w + (size_t)i * BD_BLOCK_BYTES(UNPACK) + 1024, _MM_HINT_T0); \
            const __m256i W = UNPACK(w, i, &dw, &mw);                                             \
            UNROLL for (int r = 0; r < NX; r++) {                                                 \
                const block_q8_1 *y = (const block_q8_1 *)row_at(x, xs, r) + i;                   \
                const __m256i s = dot4_u8s8(W, _mm256_loadu_si256((const __m256i *)y->qs));       \
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * f16f(y->d)), acc[r]); \
                accm[r] += mw * f16f(y->s);                                                       \
            }                                                                                     \
        }                                                                                         \
        UNROLL for (int r = 0; r < NX; r++) out[r] = hsum8(acc[r]) + accm[r];                     \
    }

/* ------------------------------------------------------------------------
 * Q2_K / Q3_K x Q8_K: dot_ref.c's q2k_dot / q3k_dot (llama.cpp's eight
 * lanes per block). Chunk c of a block (32 elements, sub-blocks 2c and
 * 2c+1) is the byte vector qs[32 (c / 4) ..] >> 2 (c % 4) & 3, unpacked
 * once and used for every row: vpmaddubsw against the chunk's activations
 * leaves sub-block 2c in the low 128-bit half and 2c+1 in the high one, and
 * vpmaddwd with the two scales as int16 gives lane l = elements 4l..4l+3,
 * scaled. Q3_K's codes are signed (-4..3): |q| against sign(y, q) (the
 * activation quantizer never emits -128), or for one row u = q + 4. Each
 * row holds an int32 and an f32 accumulator: the files instantiate these
 * kernels with 4 rows a call at most (AVX2, 16 vector registers) or 8
 * (AVX-512, 32).
 * ---------------------------------------------------------------------- */

/* The 16 sub-block scales of a Q2_K / Q3_K block as int32 lanes of two
 * vectors (lo: sub-blocks 0..7, hi: 8..15), each scale in both int16
 * halves of its lane, so one vpermd per chunk picks the chunk's pair. */
BD_INLINE void k23_scales(const uint8_t *blk, const bool q3, __m256i *lo, __m256i *hi) {
    __m128i s8;
    if (q3) {
        /* bd_q3k_scale, four at a time: low nibbles from scales[0..7], high
         * bit pairs from scales[8..11] */
        const block_q3_K *b = (const block_q3_K *)blk;
        uint32_t u0, u1, u2;
        memcpy(&u0, b->scales, 4);
        memcpy(&u1, b->scales + 4, 4);
        memcpy(&u2, b->scales + 8, 4);
        const uint32_t m4 = 0x0F0F0F0Fu, m2 = 0x03030303u;
        s8 = _mm_setr_epi32((int)((u0 & m4) | ((u2 & m2) << 4)), (int)((u1 & m4) | (((u2 >> 2) & m2) << 4)),
                            (int)(((u0 >> 4) & m4) | (((u2 >> 4) & m2) << 4)),
                            (int)(((u1 >> 4) & m4) | (((u2 >> 6) & m2) << 4)));
        s8 = _mm_sub_epi8(s8, _mm_set1_epi8(32));
        const __m256i l = _mm256_cvtepi8_epi32(s8), h = _mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8));
        *lo = _mm256_or_si256(_mm256_and_si256(l, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(l, 16));
        *hi = _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(h, 16));
    } else {
        s8 = _mm_and_si128(_mm_loadu_si128((const __m128i *)((const block_q2_K *)blk)->scales), _mm_set1_epi8(0x0F));
        const __m256i l = _mm256_cvtepu8_epi32(s8), h = _mm256_cvtepu8_epi32(_mm_srli_si128(s8, 8));
        *lo = _mm256_or_si256(l, _mm256_slli_epi32(l, 16));
        *hi = _mm256_or_si256(h, _mm256_slli_epi32(h, 16));
    }
}

BD_INLINE void k23_kernel(int64_t n, const void *vw, const void *x, size_t xs, float *out, const int NX,
                          const bool q3) {
    const size_t bb = q3 ? sizeof(block_q3_K) : sizeof(block_q2_K);
    /* Q3_K, one row: the unsigned u = q + 4 and the pair sums of 4y taken
     * off (vpmaddubsw twice, no |q| and sign(y, q): one vector op fewer a
     * chunk); more rows: |q| once, sign(y, q) per row. Same integers. */
    const bool uform = q3 && NX == 1;
    const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    __m256 acc[NX_MAX];
    UNROLL for (int r = 0; r < NX; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)vw + (size_t)i * bb;
        const uint8_t *qs = q3 ? ((const block_q3_K *)blk)->qs : ((const block_q2_K *)blk)->qs;
        _mm_prefetch((const char *)blk + 1024, _MM_HINT_T0);
        __m256i slo, shi;
        k23_scales(blk, q3, &slo, &shi);
        const __m256i hm = q3 ? _mm256_loadu_si256((const __m256i *)((const block_q3_K *)blk)->hmask)
                              : _mm256_setzero_si256();
        const __m256i bits0 = _mm256_loadu_si256((const __m256i *)qs);
        const __m256i bits1 = _mm256_loadu_si256((const __m256i *)(qs + 32));
        __m256i sumi[NX_MAX];
        UNROLL for (int r = 0; r < NX; r++) sumi[r] = _mm256_setzero_si256();
        UNROLL for (int c = 0; c < 8; c++) {
            __m256i q = _mm256_and_si256(_mm256_srli_epi16(c < 4 ? bits0 : bits1, 2 * (c % 4)), m3);
            if (q3) { /* u = code + 4 * hbit: hmask bit c moved to bit 2 of each byte; q = u - 4 */
                const __m256i h = c >= 2 ? _mm256_srli_epi16(hm, c - 2) : _mm256_slli_epi16(hm, 2 - c);
                q = _mm256_or_si256(q, _mm256_and_si256(h, four));
                if (!uform) q = _mm256_sub_epi8(q, four);
            }
            const __m256i W = q3 && !uform ? _mm256_abs_epi8(q) : q;
            const int k = 2 * (c % 4);
            const __m256i SC = _mm256_permutevar8x32_epi32(c < 4 ? slo : shi,
                                                           _mm256_setr_epi32(k, k, k, k, k + 1, k + 1, k + 1, k + 1));
            UNROLL for (int r = 0; r < NX; r++) {
                const block_q8_K *y = (const block_q8_K *)row_at(x, xs, r) + i;
                __m256i Y = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * c));
                if (q3 && !uform) Y = _mm256_sign_epi8(Y, q);
                __m256i p = _mm256_maddubs_epi16(W, Y);
                if (uform) p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(four, Y));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, SC));
            }
        }
        if (q3) {
            const float dw = f16f(((const block_q3_K *)blk)->d);
            UNROLL for (int r = 0; r < NX; r++) {
                const block_q8_K *y = (const block_q8_K *)row_at(x, xs, r) + i;
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * dw), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            }
        } else {
            const block_q2_K *b = (const block_q2_K *)blk;
            const __m128i sc = _mm_loadu_si128((const __m128i *)b->scales);
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0F)));
            const float dw = f16f(b->d), dmw = f16f(b->dmin);
            UNROLL for (int r = 0; r < NX; r++) {
                const block_q8_K *y = (const block_q8_K *)row_at(x, xs, r) + i;
                const __m256i mp = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y->bsums));
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(-y->d * dmw), _mm256_cvtepi32_ps(mp), acc[r]);
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * dw), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            }
        }
    }
    UNROLL for (int r = 0; r < NX; r++) out[r] = hsum8(acc[r]);
}
BD_INLINE void q2k_kernel(int64_t n, const void *w, const void *x, size_t xs, float *out, const int NX) {
    k23_kernel(n, w, x, xs, out, NX, false);
}
BD_INLINE void q3k_kernel(int64_t n, const void *w, const void *x, size_t xs, float *out, const int NX) {
    k23_kernel(n, w, x, xs, out, NX, true);
}

/* ------------------------------------------------------------------------
 * K-quant scales
 * ---------------------------------------------------------------------- */

/* The 12 scale bytes of a Q4_K / Q5_K block: byte s of *sc8 / *m8 is the
 * 6-bit scale / min of sub-block s (dot_ref.c's kq_scale_min, eight at a
 * time). */
BD_INLINE void kq_unpack_scales(const uint8_t *b, uint64_t *sc8, uint64_t *m8) {
    uint32_t u0, u1, u2;
    memcpy(&u0, b, 4);
    memcpy(&u1, b + 4, 4);
    memcpy(&u2, b + 8, 4);
    const uint32_t sc_lo = u0 & 0x3F3F3F3Fu, m_lo = u1 & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (u2 & 0x0F0F0F0Fu) | ((u0 >> 2) & 0x30303030u);
    const uint32_t m_hi = ((u2 >> 4) & 0x0F0F0F0Fu) | ((u1 >> 2) & 0x30303030u);
    *sc8 = sc_lo | ((uint64_t)sc_hi << 32);
    *m8 = m_lo | ((uint64_t)m_hi << 32);
}

/* ------------------------------------------------------------------------
 * Q4_K one-row dot (decode), the tile order's f32 steps: the including file
 * defines q4k_block_z(w, y), a block's integers as 8 int32 lanes (0-3 add
 * up to sumi, 4-7 to summ), then instantiates BD_Q4K_ONE_ROW. Two blocks
 * share one horizontal-add tree.
 * ---------------------------------------------------------------------- */

/* (dx * d, dx * dmin) of a Q4_K block: its two f16 scales converted together */
BD_INLINE __m128 q4k_dd(const block_q4_K *w, float dx) {
    int32_t h;
    memcpy(&h, w, 4);
    return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(h)), _mm_set1_ps(dx));
}

#define BD_Q4K_ONE_ROW(NAME, AHEAD)                                                                              \
    static float NAME(int64_t n, const block_q4_K *w, const block_q8_K *y) {                                     \
        const int64_t nb = n / QK_K;                                                                             \
        float acc = 0.0f;                                                                                        \
        int64_t i = 0;                                                                                           \
        for (; i + 1 < nb; i += 2) {                                                                             \
            UNROLL for (int l = 0; l < 5; l++) _mm_prefetch((const char *)(w + i) + (AHEAD) + 64 * l, _MM_HINT_T0); \
            __m256i h = _mm256_hadd_epi32(q4k_block_z(w + i, y + i), q4k_block_z(w + i + 1, y + i + 1));          \
            h = _mm256_hadd_epi32(h, h); /* lane 0 sumi of block i, 1 of i + 1; lanes 4, 5 their summ */         \
            const __m256 f = _mm256_cvtepi32_ps(h);                                                              \
            const __m128 si = _mm256_castps256_ps128(f), sm = _mm256_extractf128_ps(f, 1);                       \
            const __m128 d0 = q4k_dd(w + i, y[i].d), d1 = q4k_dd(w + i + 1, y[i + 1].d);                         \
            acc = fmaf(_mm_cvtss_f32(d0), _mm_cvtss_f32(si), acc);                                               \
            acc = fmaf(-_mm_cvtss_f32(_mm_movehdup_ps(d0)), _mm_cvtss_f32(sm), acc);                             \
            acc = fmaf(_mm_cvtss_f32(d1), _mm_cvtss_f32(_mm_movehdup_ps(si)), acc);                              \
            acc = fmaf(-_mm_cvtss_f32(_mm_movehdup_ps(d1)), _mm_cvtss_f32(_mm_movehdup_ps(sm)), acc);            \
        }                                                                                                        \
        if (i < nb) {                                                                                            \
            __m256i h = q4k_block_z(w + i, y + i);                                                               \
            h = _mm256_hadd_epi32(h, h);                                                                         \
            h = _mm256_hadd_epi32(h, h);                                                                         \
            const __m128 d0 = q4k_dd(w + i, y[i].d);                                                             \
            acc = fmaf(_mm_cvtss_f32(d0), (float)_mm256_cvtsi256_si32(h), acc);                                  \
            acc = fmaf(-_mm_cvtss_f32(_mm_movehdup_ps(d0)), (float)_mm_cvtsi128_si32(_mm256_extracti128_si256(h, 1)), \
                       acc);                                                                                     \
        }                                                                                                        \
        return acc;                                                                                              \
    }

/* ------------------------------------------------------------------------
 * Q4_K / Q6_K few-row dots (verify batches of 2-8 rows), the same f32
 * steps per row as the one-row dots: each weight block is unpacked once
 * (the including file's q4k_unpack / q6k_unpack into its q4k_unit /
 * q6k_unit) and dotted against every row (q4k_row_z: the 8 lanes of
 * q4k_block_z; q6k_row_z: 8 int32 lanes adding up to the block's sumi),
 * two blocks per step. The integers of two blocks x NX rows are finished
 * in one horizontal-add tree: h_r = hadd(z_i, z_i+1) of row r, then
 * hadd(h_0, h_1) and hadd(h_2, h_3) hold, per 128-bit lane, the (row,
 * block) sums in the order [r0 i, r0 i+1, r1 i, r1 i+1] (Q4_K: sumi in the
 * low lane, summ in the high; Q6_K: the two lanes' parts, added), and
 * shufps gathers block i's sums of all rows into one vector. The f32 steps
 * then run for the rows at once (lane r = row r): the same multiplies and
 * fused adds, in the same block order, as the one-row dot, so each row
 * gets its bits whatever the batch. Rows go in quads (each with its own
 * tree and accumulator), all quads of a call sharing one unpacking. With
 * one weight row streamed once for all of them, 2-8 rows cost far less
 * than the row groups' 16-row unpacking where the weights come from
 * memory (the tables' exact_rows say from where the row groups pay).
 * ---------------------------------------------------------------------- */

/* The activation rows' scales of block i, lane r = row r < NX (built in
 * registers: a vector load of scalar stores would stall on forwarding). */
BD_INLINE __m128 kq_rows_dx(const void *x, size_t xs, int64_t i, const int NX) {
    __m128 v = _mm_load_ss(&((const block_q8_K *)x)[i].d);
    if (NX > 1) v = _mm_insert_ps(v, _mm_load_ss(&((const block_q8_K *)row_at(x, xs, 1))[i].d), 0x10);
    if (NX > 2) v = _mm_insert_ps(v, _mm_load_ss(&((const block_q8_K *)row_at(x, xs, 2))[i].d), 0x20);
    if (NX > 3) v = _mm_insert_ps(v, _mm_load_ss(&((const block_q8_K *)row_at(x, xs, 3))[i].d), 0x30);
    return v;
}

/* The tree's second level: g01 = hadd(h_0, h_1), g23 = hadd(h_2, h_3)
 * (absent rows repeat present ones; their lanes are never stored). */
BD_INLINE void kq_rows_g(const __m256i hh[4], __m256i *g01, __m256i *g23, const int NX) {
    *g01 = _mm256_hadd_epi32(hh[0], NX > 1 ? hh[1] : hh[0]);
    *g23 = NX > 2 ? _mm256_hadd_epi32(hh[2], NX > 3 ? hh[3] : hh[2]) : *g01;
}

/* Q4_K: Si, Sj = [sumi of the rows | summ of the rows] of blocks i, i+1 */
BD_INLINE void q4k_rows_sums(const __m256i hh[4], __m256 *si, __m256 *sj, const int NX) {
    __m256i g01, g23;
    kq_rows_g(hh, &g01, &g23, NX);
    const __m256 f01 = _mm256_cvtepi32_ps(g01), f23 = _mm256_cvtepi32_ps(g23);
    *si = _mm256_shuffle_ps(f01, f23, 0x88);
    *sj = _mm256_shuffle_ps(f01, f23, 0xDD);
}

/* Q6_K: the two 128-bit lanes hold parts of each sum, added as integers
 * before the one conversion (float(a) + float(b) need not be float(a + b));
 * the low halves of Si, Sj hold the rows' sumi of blocks i, i+1 */
BD_INLINE void q6k_rows_sums(const __m256i hh[4], __m256 *si, __m256 *sj, const int NX) {
    __m256i g01, g23;
    kq_rows_g(hh, &g01, &g23, NX);
    const __m128 f01 = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(g01), _mm256_extracti128_si256(g01, 1)));
    const __m128 f23 = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(g23), _mm256_extracti128_si256(g23, 1)));
    *si = _mm256_castps128_ps256(_mm_shuffle_ps(f01, f23, 0x88));
    *sj = _mm256_castps128_ps256(_mm_shuffle_ps(f01, f23, 0xDD));
}

BD_INLINE void kq_rows_store(__m128 acc, float *out, const int NX) {
    float o[4];
    _mm_storeu_ps(o, acc);
    UNROLL for (int r = 0; r < NX; r++) out[r] = o[r];
}

/* Q4_K f32 steps of one block for the rows: S = [sumi of rows | summ of rows] */
BD_INLINE __m128 q4k_rows_f32(__m128 acc, const block_q4_K *w, __m128 dx, __m256 S) {
    int32_t h;
    memcpy(&h, w, 4);
    const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(h));
    const __m128 d = _mm_shuffle_ps(dd, dd, 0x00), dmin = _mm_shuffle_ps(dd, dd, 0x55);
    acc = _mm_fmadd_ps(_mm_mul_ps(dx, d), _mm256_castps256_ps128(S), acc);
    return _mm_fnmadd_ps(_mm_mul_ps(dx, dmin), _mm256_extractf128_ps(S, 1), acc);
}

/* Q6_K: S's low half = the rows' sumi */
BD_INLINE __m128 q6k_rows_f32(__m128 acc, const block_q6_K *w, __m128 dx, __m256 S) {
    return _mm_fmadd_ps(_mm_mul_ps(dx, _mm_set1_ps(f16f(w->d))), _mm256_castps256_ps128(S), acc);
}

/* NAME(n, w, x, xs, out, NX) for TYPE (q4k or q6k), NX <= 8: rows in
 * quads (acc[h]: rows 4h .. 4h + 3), one unpacking for all of them. */
#define BD_KQ_FEW_ROWS(NAME, TYPE, BLOCK, LINES, AHEAD)                                                          \
    BD_INLINE void NAME(int64_t n, const BLOCK *w, const void *x, size_t xs, float *out, const int NX) {         \
        const int64_t nb = n / QK_K;                                                                             \
        __m128 acc[2] = {_mm_setzero_ps(), _mm_setzero_ps()};                                                    \
        for (int64_t i = 0; i < nb; i += 2) {                                                                    \
            UNROLL for (int l = 0; l < (LINES); l++)                                                             \
                _mm_prefetch((const char *)(w + i) + (AHEAD) + 64 * l, _MM_HINT_T0);                             \
            const bool two = i + 1 < nb;                                                                         \
            TYPE##_unit u;                                                                                       \
            __m256i z[8], hh[8];                                                                                 \
            TYPE##_unpack(w + i, &u);                                                                            \
            UNROLL for (int r = 0; r < NX; r++) z[r] = TYPE##_row_z(&u, (const block_q8_K *)row_at(x, xs, r) + i); \
            if (two) {                                                                                           \
                TYPE##_unpack(w + i + 1, &u);                                                                    \
                UNROLL for (int r = 0; r < NX; r++)                                                              \
                    hh[r] = _mm256_hadd_epi32(z[r], TYPE##_row_z(&u, (const block_q8_K *)row_at(x, xs, r) + i + 1)); \
            } else {                                                                                             \
                UNROLL for (int r = 0; r < NX; r++) hh[r] = _mm256_hadd_epi32(z[r], _mm256_setzero_si256());     \
            }                                                                                                    \
            UNROLL for (int h = 0; h < (NX + 3) / 4; h++) {                                                      \
                const int nh = NX - 4 * h < 4 ? NX - 4 * h : 4;                                                  \
                const void *xh = row_at(x, xs, 4 * h);                                                           \
                __m256 si, sj;                                                                                   \
                TYPE##_rows_sums(hh + 4 * h, &si, &sj, nh);                                                      \
                acc[h] = TYPE##_rows_f32(acc[h], w + i, kq_rows_dx(xh, xs, i, nh), si);                          \
                if (two) acc[h] = TYPE##_rows_f32(acc[h], w + i + 1, kq_rows_dx(xh, xs, i + 1, nh), sj);         \
            }                                                                                                    \
        }                                                                                                        \
        UNROLL for (int h = 0; h < (NX + 3) / 4; h++)                                                            \
            kq_rows_store(acc[h], out + 4 * h, NX - 4 * h < 4 ? NX - 4 * h : 4);                                 \
    }

/* ------------------------------------------------------------------------
 * F32 / F16 / BF16 dots in ggml's summation order (llama.cpp's build for
 * the same ISA): four W-lane accumulators over steps of 4 W elements,
 * reduced by REDUCE4 (the width's own order, see the files), then the
 * n % 4W leftovers added one by one, in float for F32 and in double for
 * the 16-bit types, as ggml does. Matching the order keeps logits within
 * rounding of llama.cpp even where an int8 activation rounding would
 * amplify a last-bit difference. The multi-row kernel keeps this order per
 * row.
 *   VEC, W, ZERO, FMADD: the vector type, its lanes, its zero and fma;
 *   LOAD(p, j): W elements from element j of row p as f32;
 *   SC(p, j): element j as f32; ESZ: element bytes; ACC: float or double;
 *   NXM: rows per call at most (the accumulator arrays' size).
 * ---------------------------------------------------------------------- */

BD_INLINE float sc_f32(const void *p, int64_t j) { return ((const float *)p)[j]; }
BD_INLINE float sc_f16(const void *p, int64_t j) { return bd_f16_to_f32(((const bd_f16 *)p)[j]); }
BD_INLINE float sc_bf16(const void *p, int64_t j) { return bd_bf16_to_f32(((const bd_bf16 *)p)[j]); }

#define BD_FLOAT_KERNEL(NAME, VEC, W, ZERO, FMADD, REDUCE4, LOAD, SC, ESZ, ACC, NXM)                \
    BD_INLINE void NAME(int64_t n, const void *w, const void *x, size_t xs, float *out, const int NX) { \
        VEC acc[NXM][4];                                                                            \
        UNROLL for (int r = 0; r < NX; r++) UNROLL for (int k = 0; k < 4; k++) acc[r][k] = ZERO();  \
        const int64_t np = n / (4 * W) * (4 * W);                                                   \
        for (int64_t j = 0; j < np; j += 4 * W) {                                                   \
            _mm_prefetch((const char *)w + j * ESZ + 2048, _MM_HINT_T0);                            \
            UNROLL for (int k = 0; k < 4; k++) {                                                    \
                const VEC wv = LOAD(w, j + W * k);                                                  \
                UNROLL for (int r = 0; r < NX; r++)                                                 \
                    acc[r][k] = FMADD(wv, LOAD(row_at(x, xs, r), j + W * k), acc[r][k]);            \
            }                                                                                       \
        }                                                                                           \
        UNROLL for (int r = 0; r < NX; r++) {                                                       \
            ACC sum = (ACC)REDUCE4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);                     \
            const void *xr = row_at(x, xs, r);                                                      \
            for (int64_t t = np; t < n; t++) sum += (ACC)(SC(w, t) * SC(xr, t));                    \
            out[r] = (float)sum;                                                                    \
        }                                                                                           \
    }

/* ------------------------------------------------------------------------
 * Row groups' activations (kernels_avx2.c, kernels_avx512.c)
 *
 * A row group takes block i of every activation row of its batch in turn.
 * For prompts, whose Q8_K rows lie a whole row apart (up to 11 KiB), that
 * is dozens of interleaved streams the hardware prefetcher does not
 * follow; so batches of more than 16 rows are first copied block-major per
 * group of 16 rows ([block i][row t], 16 blocks in a row). Verify batches
 * (at most 16 rows) are read in place. Q8_0 activation blocks are always
 * packed, each with -128 times the sum of its bytes: the row groups feed
 * vpdpbusd the weights plus 128 (it wants unsigned bytes) and start the
 * dot at that correction, so sum (w + 128) y - 128 sum(y) = sum w y.
 * ---------------------------------------------------------------------- */

/* One Q8_0 activation block, packed [group of 16 rows][block i][row t]. */
typedef struct {
    int8_t qs[QK8_0];
    float d;
    int32_t corr; /* -128 * sum(qs) */
} rg_x8;

static inline size_t rg8_pack_bytes(int64_t ncols, int64_t n_tok) {
    return (size_t)((n_tok + 15) / 16) * 16 * (size_t)(ncols / QK8_0) * sizeof(rg_x8);
}

static inline void rg8_pack(int64_t ncols, const void *xq, size_t xs, int64_t n_tok, int64_t g, void *pack) {
    const int64_t nb = ncols / QK8_0;
    rg_x8 *dst = (rg_x8 *)pack + g * 16 * nb;
    const int nt = (int)(n_tok - 16 * g < 16 ? n_tok - 16 * g : 16);
    for (int t = 0; t < nt; t++) {
        const block_q8_0 *src = (const block_q8_0 *)((const uint8_t *)xq + (size_t)(16 * g + t) * xs);
        for (int64_t i = 0; i < nb; i++) {
            rg_x8 *o = &dst[i * 16 + t];
            memcpy(o->qs, src[i].qs, QK8_0);
            o->d = bd_f16_to_f32(src[i].d);
            int sum = 0;
            for (int e = 0; e < QK8_0; e++) sum += src[i].qs[e];
            o->corr = -128 * sum;
        }
    }
}

/* K-quants (Q8_K activations): packed beyond 16 rows; Q8_0: always (the
 * blocks carry their correction). */
static inline size_t rg_pack_bytes(uint32_t type, int64_t ncols, int64_t n_tok) {
    if (type == BD_TYPE_Q8_0) return rg8_pack_bytes(ncols, n_tok);
    if (n_tok <= 16) return 0;
    return (size_t)((n_tok + 15) / 16) * 16 * (size_t)(ncols / QK_K) * sizeof(block_q8_K);
}

static inline void rg_pack(uint32_t type, int64_t ncols, const void *xq, size_t xs, int64_t n_tok, int64_t g,
                           void *pack) {
    if (type == BD_TYPE_Q8_0) {
        rg8_pack(ncols, xq, xs, n_tok, g, pack);
        return;
    }
    const int64_t nb = ncols / QK_K;
    block_q8_K *dst = (block_q8_K *)pack + g * 16 * nb;
    const int nt = (int)(n_tok - 16 * g < 16 ? n_tok - 16 * g : 16);
    for (int t = 0; t < nt; t++) {
        const block_q8_K *src = (const block_q8_K *)((const uint8_t *)xq + (size_t)(16 * g + t) * xs);
        for (int64_t i = 0; i < nb; i++) memcpy(&dst[i * 16 + t], &src[i], sizeof *src);
    }
}

/* Block i of activation row t: packed (pack != NULL) or in place. */
static inline const block_q8_K *rg_xblock(const void *xq, size_t xs, const void *pack, int64_t nb, int64_t t, int64_t i) {
    if (pack) return (const block_q8_K *)pack + ((t / 16) * nb + i) * 16 + t % 16;
    return (const block_q8_K *)((const uint8_t *)xq + (size_t)t * xs) + i;
}

/* ------------------------------------------------------------------------
 * Activation quantizers
 * ---------------------------------------------------------------------- */

/* Q8_K: the value of largest magnitude of the 256 in x, given the largest
 * (hi) and smallest (lo) of them; a tie of +a and -a goes to the first in
 * order, as in quant_ref.c's signed_absmax. */
BD_INLINE float q8k_extreme(const float *x, float hi, float lo) {
    if (hi > -lo) return hi;
    if (-lo > hi) return lo;
    for (int j = 0; j < QK_K; j++)
        if (x[j] == hi || x[j] == lo) return x[j];
    return 0.0f;
}

/* The table entries the AVX2 and AVX-512 files fill alike: each defines
 * these functions under these names (dot_n_<type>, from_float_<type>, the
 * attention and SiLU kernels, k_rg_ops for the row groups). BF16 is left
 * to the file (AVX-512 takes vdpbf16ps when the CPU has it). */
#define BD_SIMD_FILL_COMMON(k)                                  \
    do {                                                        \
        (k)->vec_dot_n[BD_TYPE_Q2_K] = dot_n_q2_K;              \
        (k)->vec_dot_n[BD_TYPE_Q3_K] = dot_n_q3_K;              \
        (k)->vec_dot_n[BD_TYPE_Q4_K] = dot_n_q4_K;              \
        (k)->vec_dot_n[BD_TYPE_Q5_K] = dot_n_q5_K;              \
        (k)->vec_dot_n[BD_TYPE_Q6_K] = dot_n_q6_K;              \
        (k)->vec_dot_n[BD_TYPE_Q8_0] = dot_n_q8_0;              \
        (k)->vec_dot_n[BD_TYPE_Q4_0] = dot_n_q4_0;              \
        (k)->vec_dot_n[BD_TYPE_Q5_0] = dot_n_q5_0;              \
        (k)->vec_dot_n[BD_TYPE_IQ4_NL] = dot_n_iq4_nl;          \
        (k)->vec_dot_n[BD_TYPE_Q4_1] = dot_n_q4_1;              \
        (k)->vec_dot_n[BD_TYPE_Q5_1] = dot_n_q5_1;              \
        (k)->vec_dot_n[BD_TYPE_IQ4_XS] = dot_n_iq4_xs;          \
        (k)->vec_dot_n[BD_TYPE_F32] = dot_n_f32;                \
        (k)->vec_dot_n[BD_TYPE_F16] = dot_n_f16;                \
        (k)->from_float[BD_TYPE_Q8_0] = from_float_q8_0;        \
        (k)->from_float[BD_TYPE_Q8_1] = from_float_q8_1;        \
        (k)->from_float[BD_TYPE_Q8_K] = from_float_q8_K;        \
        (k)->attn_scores = attn_scores;                         \
        (k)->attn_softmax = attn_softmax;                       \
        (k)->attn_accum = attn_accum;                           \
        (k)->f16_to_f32 = f16_to_f32;                           \
        (k)->f32_to_f16 = f32_to_f16;                           \
        (k)->kv_to_f32[BD_TYPE_Q8_0] = q8_0_to_f32;             \
        (k)->kv_to_f32[BD_TYPE_BF16] = kv_bf16_to_f32;          \
        (k)->kv_to_f32[BD_TYPE_Q4_0] = kv_q4_0_to_f32;          \
        (k)->kv_to_f32[BD_TYPE_Q4_1] = kv_q4_1_to_f32;          \
        (k)->kv_to_f32[BD_TYPE_IQ4_NL] = kv_iq4_nl_to_f32;      \
        (k)->kv_to_f32[BD_TYPE_Q5_0] = kv_q5_0_to_f32;          \
        (k)->kv_to_f32[BD_TYPE_Q5_1] = kv_q5_1_to_f32;          \
        (k)->silu_mul = silu_mul;                               \
        (k)->gdn_step = gdn_step;                               \
        (k)->tile = &k_rg_ops;                                  \
    } while (0)

#endif
