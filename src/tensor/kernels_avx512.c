/*
 * kernels_avx512.c - AVX-512 F/DQ/BW/VL/VNNI kernels (compiled with those
 * flags, plus AVX2/FMA/F16C; kernels.c checks each before it uses them).
 *
 * Multi-row dots (vec_dot_n) are the point of this file: a weight block is
 * loaded and unpacked once into registers, then dotted against up to 16
 * activation rows whose f32 accumulators also stay in registers. Each
 * kernel body is written once as an always-inline function taking the row
 * count as a constant, and instantiated for 1..16 rows (BD_DOT_N,
 * kernels_simd.h), so the row loops unroll and the accumulators become
 * registers.
 *
 * Integer parts are exact (same int32 block sums as dot_ref.c). The f32
 * steps of Q4_K / Q6_K (tile order) and Q5_K (llama.cpp's) are exactly the
 * scalar twins', so those match them bit for bit; for the other types only
 * the order of the f32 additions differs.
 *
 * Activation byte trick for signed x signed int8 (Q8_0 family):
 * vpdpbusd multiplies unsigned by signed bytes, so the activation is fed as
 * (y ^ 0x80) = y + 128 (unsigned) and the accumulator starts at
 * -128 * sum(w) (per lane), which is computed once per weight block:
 * sum((y+128) w) - 128 sum(w) = sum(y w) exactly.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels_simd.h"

/* ------------------------------------------------------------------------
 * Activation quantizers (bit-identical to quant_ref.c)
 * ---------------------------------------------------------------------- */

static void from_float_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(a, absmask),
                                                        _mm512_and_ps(b, absmask)));
        float d = amax / 127.0f;
        float id = amax > 0 ? 127.0f / amax : 0.0f;
        y[i].d = bd_f32_to_f16(d);
        __m512 vid = _mm512_set1_ps(id);
        __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, vid));
        __m512i qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, vid));
        _mm_storeu_si128((__m128i *)y[i].qs, _mm512_cvtsepi32_epi8(qa));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16), _mm512_cvtsepi32_epi8(qb));
    }
}

static void from_float_q8_1(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(a, absmask),
                                                        _mm512_and_ps(b, absmask)));
        float d = amax / 127.0f;
        float id = amax > 0 ? 127.0f / amax : 0.0f;
        __m512 vid = _mm512_set1_ps(id);
        __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, vid));
        __m512i qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, vid));
        _mm_storeu_si128((__m128i *)y[i].qs, _mm512_cvtsepi32_epi8(qa));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16), _mm512_cvtsepi32_epi8(qb));
        int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
        y[i].d = bd_f32_to_f16(d);
        y[i].s = bd_f32_to_f16(d * (float)sum);
    }
}

static void from_float_q8_K(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m512 mx = _mm512_loadu_ps(x), mn = mx;
        for (int j = 16; j < QK_K; j += 16) {
            __m512 v = _mm512_loadu_ps(x + j);
            mx = _mm512_max_ps(mx, v);
            mn = _mm512_min_ps(mn, v);
        }
        float hi = _mm512_reduce_max_ps(mx), lo = _mm512_reduce_min_ps(mn);
        const float max = q8k_extreme(x, hi, lo);
        if (max == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -127.0f / max;
        __m512 vs = _mm512_set1_ps(iscale);
        const __m512i c127 = _mm512_set1_epi32(127);
        for (int g = 0; g < QK_K / 16; g++) {
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), vs));
            q = _mm512_min_epi32(q, c127);
            _mm_storeu_si128((__m128i *)(y[i].qs + 16 * g), _mm512_cvtsepi32_epi8(q));
            y[i].bsums[g] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ------------------------------------------------------------------------
 * K-quants x Q8_K
 *
 * Per block: W[c] (c = 0..3) holds the codes of elements 64c..64c+63 (low
 * nibbles of qs[32c..], then the high nibbles in the upper half), so chunk
 * c covers sub-blocks 2c and 2c+1 and lines up with y.qs[64c..64c+63].
 * Q5_K (kq_block_sums): vpmaddubsw of chunk c gives 2-element sums as int16
 * (|.| <= 2*31*127: no saturation), vpdpwssd multiplies them by the
 * sub-block scale and adds pairs, so int32 lane k of the sum over chunks
 * holds offset 4k of the even sub-blocks (k < 8) or 4(k-8) of the odd
 * ones. Q4_K (q4k_block_sums) takes one vpdpbusd per chunk and scales
 * packed chunk pairs instead; its lanes only ever get added up.
 *
 * Q4_K and Q6_K use dot_ref.c's tile order: each block's integer sum is
 * reduced to one number per activation row before any f32 step. With
 * several rows that is a transposing reduction (rows_reduce): the rows'
 * vectors of partial sums are added pairwise across rows, level by level,
 * until one vector holds one lane per row, and the f32 steps then run for
 * all rows at once (acc lane r = activation row r). Q5_K keeps llama.cpp's
 * eight f32 lanes per row (dot_ref.c's q5k_dot).
 * ---------------------------------------------------------------------- */

/* Per-block scale vectors. SC[c]: int16 scale of each vpmaddubsw lane of
 * chunk c (lanes 0-15: sub-block 2c, 16-31: 2c+1); MN: int16 min of each
 * bsums lane (lane k: sub-block k/2), so vpmaddwd(bsums, MN) has lane s =
 * m_s * (bsums 2s + 2s+1). */
BD_INLINE void kq_block_scales(const uint8_t *scales, __m512i SC[4], __m256i *MN) {
    uint64_t sc8, m8;
    kq_unpack_scales(scales, &sc8, &m8);
    /* int16 lane s of sc16: scale of sub-block s; chunk c's vector takes
     * lanes 2c (x16) and 2c+1 (x16) of it */
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc8)));
    UNROLL for (int c = 0; c < 4; c++)
        SC[c] = _mm512_permutexvar_epi16(
            _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16((short)(2 * c)), _mm512_set1_epi16((short)(2 * c + 1))),
            sc16);
    __m128i m = _mm_cvtsi64_si128((long long)m8);
    *MN = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));
}

/* Codes of one Q4_K / Q5_K block (qh: Q5_K's fifth-bit plane or NULL). */
BD_INLINE void kq_block_codes(const uint8_t *qs, const uint8_t *qh, __m512i W[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
    __m512i h2 = _mm512_setzero_si512();
    if (qh) {
        h2 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
        /* upper half one bit further on: sub-block 2c+1 uses bit 2c+1 */
        h2 = _mm512_mask_srli_epi16(h2, 0xFFFF0000u, h2, 1);
    }
    UNROLL for (int c = 0; c < 4; c++) {
        __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * c)));
        q = _mm512_mask_srli_epi16(q, 0xFFFF0000u, q, 4);
        W[c] = _mm512_and_si512(q, m4);
        if (qh) {
            /* bit 2c of each qh byte -> bit 4: shift left by 4 - 2c (or right) */
            __m512i h;
            switch (c) {
            case 0: h = _mm512_slli_epi16(h2, 4); break;
            case 1: h = _mm512_slli_epi16(h2, 2); break;
            case 2: h = h2; break;
            default: h = _mm512_srli_epi16(h2, 2); break;
            }
            W[c] = _mm512_or_si512(W[c], _mm512_and_si512(h, bit4));
        }
    }
}

/* sum over chunks of vpdpwssd(vpmaddubsw(W[c], y chunk c), SC[c]) */
BD_INLINE __m512i kq_block_sums(const __m512i W[4], const __m512i SC[4], const block_q8_K *y) {
    __m512i t = _mm512_setzero_si512();
    UNROLL for (int c = 0; c < 4; c++)
        t = _mm512_dpwssd_epi32(t, _mm512_maddubs_epi16(W[c], _mm512_loadu_si512(y->qs + 64 * c)), SC[c]);
    return t;
}

/* Q4_K only (its codes are at most 15): the same block sum with one
 * vpdpbusd per chunk in place of vpmaddubsw + vpdpwssd, the scales applied
 * to packed pairs of chunks (as for Q6_K below): |lane| <= 4 * 15 * 128
 * fits int16. vpackssdw of chunks 2p and 2p+1 holds, in 128-bit lane k,
 * int32 lanes 4k..4k+3 of chunk 2p, then of 2p+1; int32 lane l of chunk c
 * belongs to sub-block 2c + l/8. k_q4_scsel[p] picks the scale of each
 * int16 lane. The integer is the same as kq_block_sums' (integer adds
 * in another grouping), with fewer multiplies on the one port that does
 * 512-bit integer products. */
#define S_(s) s, (char)0x80 /* vpshufb: byte s of the scales, then a zero high byte */
static const char k_q4_scsel[2][64] __attribute__((aligned(64))) = {
    {S_(0), S_(0), S_(0), S_(0), S_(2), S_(2), S_(2), S_(2), S_(0), S_(0), S_(0), S_(0), S_(2), S_(2), S_(2), S_(2),
     S_(1), S_(1), S_(1), S_(1), S_(3), S_(3), S_(3), S_(3), S_(1), S_(1), S_(1), S_(1), S_(3), S_(3), S_(3), S_(3)},
    {S_(4), S_(4), S_(4), S_(4), S_(6), S_(6), S_(6), S_(6), S_(4), S_(4), S_(4), S_(4), S_(6), S_(6), S_(6), S_(6),
     S_(5), S_(5), S_(5), S_(5), S_(7), S_(7), S_(7), S_(7), S_(5), S_(5), S_(5), S_(5), S_(7), S_(7), S_(7), S_(7)}};
/* int16 lane k of MN: the min of sub-block k/2 */
static const char k_q4_mnsel[32] __attribute__((aligned(32))) = {S_(0), S_(0), S_(1), S_(1), S_(2), S_(2), S_(3), S_(3),
                                                                  S_(4), S_(4), S_(5), S_(5), S_(6), S_(6), S_(7), S_(7)};
#undef S_

/* SCP[p]: int16 scale of each lane of the packed chunk pair p (the scale
 * bytes broadcast to every 128-bit lane, then picked per int16 lane with
 * vpshufb); MN as in kq_block_scales. */
BD_INLINE void q4k_block_scales(const uint8_t *scales, __m512i SCP[2], __m256i *MN) {
    uint64_t sc8, m8;
    kq_unpack_scales(scales, &sc8, &m8);
    const __m512i sc = _mm512_set1_epi64((long long)sc8);
    SCP[0] = _mm512_shuffle_epi8(sc, _mm512_load_si512(k_q4_scsel[0]));
    SCP[1] = _mm512_shuffle_epi8(sc, _mm512_load_si512(k_q4_scsel[1]));
    *MN = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)m8), _mm256_load_si256((const __m256i *)k_q4_mnsel));
}

BD_INLINE __m512i q4k_block_sums(const __m512i W[4], const __m512i SCP[2], const block_q8_K *y) {
    const __m512i z = _mm512_setzero_si512();
    const __m512i s0 = _mm512_dpbusd_epi32(z, W[0], _mm512_loadu_si512(y->qs));
    const __m512i s1 = _mm512_dpbusd_epi32(z, W[1], _mm512_loadu_si512(y->qs + 64));
    const __m512i s2 = _mm512_dpbusd_epi32(z, W[2], _mm512_loadu_si512(y->qs + 128));
    const __m512i s3 = _mm512_dpbusd_epi32(z, W[3], _mm512_loadu_si512(y->qs + 192));
    const __m512i t = _mm512_dpwssd_epi32(z, _mm512_packs_epi32(s0, s1), SCP[0]);
    return _mm512_dpwssd_epi32(t, _mm512_packs_epi32(s2, s3), SCP[1]);
}

/* Lanes 0-7: pairwise sums of a's lanes (2j + 2j+1); lanes 8-15: b's. */
BD_INLINE __m512i pair_sums(__m512i a, __m512i b) {
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, ie, b), _mm512_permutex2var_epi32(a, io, b));
}

/* Transposing reduction of Z[0..NX-1] (one vector of 16 int32 partial sums
 * per row; absent rows count as zero). Each level pairs neighbouring
 * vectors with pair_sums, halving both the vector count and the lanes per
 * row: after L levels, vector k holds rows 2^L k .. 2^L k + 2^L - 1 one
 * after another, 16 >> L lanes each (lane j of row r's part adds lanes
 * 2^L j .. 2^L j + 2^L - 1 of Z[r]). Integer adds: exact in any order. */
BD_INLINE void rows_reduce(__m512i Z[NX_MAX], const int NX, const int levels) {
    int n = NX;
    UNROLL for (int l = 0; l < levels; l++) {
        UNROLL for (int k = 0; k < (n + 1) / 2; k++)
            Z[k] = pair_sums(Z[2 * k], 2 * k + 1 < n ? Z[2 * k + 1] : _mm512_setzero_si512());
        n = (n + 1) / 2;
    }
}

/* The activation rows' block scales dx of block i, lane r = row r < NX. */
BD_INLINE __m512 kq_row_scales(const void *x, size_t xs, int64_t i, const int NX) {
    const block_q8_K *y0 = (const block_q8_K *)x + i;
    if (NX == 1) return _mm512_set1_ps(y0->d);
    /* row offsets fit int32: a Q8_K row is 292 bytes per 256 columns */
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)xs));
    const __mmask16 rows = (__mmask16)(NX >= 16 ? 0xFFFFu : (1u << NX) - 1);
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), rows, off, &y0->d, 1);
}

BD_INLINE void store_lanes(float *out, __m512 acc, const int NX) {
    _mm512_mask_storeu_ps(out, (__mmask16)(NX >= 16 ? 0xFFFFu : (1u << NX) - 1), acc);
}

/* One activation row (decode). Two blocks per step: each block's sums
 * reduced to 8 lanes (sumi parts, then summ parts), both blocks' four
 * integers finished in one horizontal-add tree, then the f32 steps in
 * block order (a scalar chain: the tile order). */

#define ONE_ROW_AHEAD 2048 /* software prefetch distance of the one-row paths, bytes */

/* One Q4_K block unpacked: codes, scales, mins (shared by all rows). */
typedef struct {
    __m512i W[4], SCP[2];
    __m256i MN;
} q4k_unit;

BD_INLINE void q4k_unpack(const block_q4_K *w, q4k_unit *u) {
    kq_block_codes(w->qs, NULL, u->W);
    q4k_block_scales(w->scales, u->SCP, &u->MN);
}

/* Q4_K block sums of one row: lanes 0-3 add up to sumi, 4-7 to summ. */
BD_INLINE __m256i q4k_row_z(const q4k_unit *u, const block_q8_K *y) {
    const __m512i t = q4k_block_sums(u->W, u->SCP, y);
    const __m256i si = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
    const __m256i sm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), u->MN);
    return _mm256_add_epi32(_mm256_permute2x128_si256(si, sm, 0x20), _mm256_permute2x128_si256(si, sm, 0x31));
}

BD_INLINE __m256i q4k_block_z(const block_q4_K *w, const block_q8_K *y) {
    q4k_unit u;
    q4k_unpack(w, &u);
    return q4k_row_z(&u, y);
}

BD_Q4K_ONE_ROW(q4k_one_row, ONE_ROW_AHEAD)
BD_KQ_FEW_ROWS(q4k_few_rows, q4k, block_q4_K, 5, ONE_ROW_AHEAD)

/* Q4_K x Q8_K, tile order: one row, 2-8 rows (the few-row dot), or, from
 * 9 rows on, the multi-row form below. Z[r]: lanes 0-7 the row's sumi parts (the two
 * halves of the chunk sums added), lanes 8-15 its summ parts (vpmaddwd of
 * bsums and mins); three levels of rows_reduce leave each row's (sumi,
 * summ) in two neighbouring lanes, eight rows per vector. */
BD_INLINE void q4k_kernel(int64_t n, const void *vw, const void *x, size_t xs, float *out,
                          const int NX) {
    const block_q4_K *w = vw;
    if (NX == 1) {
        out[0] = q4k_one_row(n, w, x);
        return;
    }
    if (NX <= 8) {
        q4k_few_rows(n, w, x, xs, out, NX);
        return;
    }
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        /* software prefetch ~1 KiB ahead: on the loaded test machine this
         * helped the memory-bound single-row case (prefetches never fault,
         * so running past the row end is harmless) */
        UNROLL for (int l = 0; l < 3; l++)
            _mm_prefetch((const char *)(w + i) + 1024 + 64 * l, _MM_HINT_T0);
        __m512i W[4], SCP[2], Z[NX_MAX];
        __m256i MN;
        kq_block_codes(w[i].qs, NULL, W);
        q4k_block_scales(w[i].scales, SCP, &MN);
        UNROLL for (int r = 0; r < NX; r++) {
            const block_q8_K *y = (const block_q8_K *)row_at(x, xs, r) + i;
            const __m512i t = q4k_block_sums(W, SCP, y);
            const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
            const __m256i mi = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), MN);
            Z[r] = _mm512_inserti64x4(_mm512_castsi256_si512(lanes), mi, 1);
        }
        rows_reduce(Z, NX, 3);
        const __m512i hi = NX > 8 ? Z[1] : _mm512_setzero_si512();
        const __m512 sumi = _mm512_cvtepi32_ps(_mm512_permutex2var_epi32(Z[0], ie, hi));
        const __m512 summ = _mm512_cvtepi32_ps(_mm512_permutex2var_epi32(Z[0], io, hi));
        const __m512 dx = kq_row_scales(x, xs, i, NX);
        acc = _mm512_fmadd_ps(_mm512_mul_ps(dx, _mm512_set1_ps(f16f(w[i].d))), sumi, acc);
        acc = _mm512_fnmadd_ps(_mm512_mul_ps(dx, _mm512_set1_ps(f16f(w[i].dmin))), summ, acc);
    }
    store_lanes(out, acc, NX);
}
BD_DOT_N(dot_n_q4_K, q4k_kernel, 16)

/* Q5_K x Q8_K in llama.cpp's order (dot_ref.c's q5k_dot): each row's
 * accumulator has the eight block lanes in f32 lanes 0-7 and the mins in
 * lane 8 (the sum over sub-blocks, also copied to 9-11 where DV is 0). */
BD_INLINE void q5k_kernel(int64_t n, const void *vw, const void *x, size_t xs, float *out,
                          const int NX) {
    const block_q5_K *w = vw;
    __m512 acc[NX_MAX];
    UNROLL for (int r = 0; r < NX; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        UNROLL for (int l = 0; l < 3; l++)
            _mm_prefetch((const char *)(w + i) + 1024 + 64 * l, _MM_HINT_T0);
        __m512i W[4], SC[4];
        __m256i MN;
        kq_block_codes(w[i].qs, w[i].qh, W);
        kq_block_scales(w[i].scales, SC, &MN);
        /* lanes 0-7 the weight d, lane 8 -dmin, zero above */
        const __m512 DV = _mm512_mask_blend_ps(0x0100, _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(f16f(w[i].d))),
                                               _mm512_set1_ps(-f16f(w[i].dmin)));
        UNROLL for (int r = 0; r < NX; r++) {
            const block_q8_K *y = (const block_q8_K *)row_at(x, xs, r) + i;
            const __m512i t = kq_block_sums(W, SC, y);
            const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
            const __m256i mi = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), MN);
            __m128i mp = _mm_add_epi32(_mm256_castsi256_si128(mi), _mm256_extracti128_si256(mi, 1));
            mp = _mm_add_epi32(mp, _mm_shuffle_epi32(mp, 0x4E));
            mp = _mm_add_epi32(mp, _mm_shuffle_epi32(mp, 0xB1));
            const __m512i v = _mm512_inserti32x4(_mm512_zextsi256_si512(lanes), mp, 2);
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(y->d), DV), _mm512_cvtepi32_ps(v), acc[r]);
        }
    }
    UNROLL for (int r = 0; r < NX; r++) {
        /* hsum8 of lanes 0-7 in kq_hsum8's order, then the mins lane */
        out[r] = hsum8(_mm512_castps512_ps256(acc[r])) + _mm_cvtss_f32(_mm512_extractf32x4_ps(acc[r], 2));
    }
}
BD_DOT_N(dot_n_q5_K, q5k_kernel, 16)

/* ------------------------------------------------------------------------
 * Q6_K x Q8_K, tile order
 *
 * W[j] (j = 0..3) holds the unsigned 6-bit codes q (0..63) of elements
 * 64j..64j+63. The -32 offset is applied through bsums:
 * sum sc_g (q - 32) y = sum sc_g q y + sum (-32 sc_g) bsum_g, both
 * accumulated by vpdpwssd into one exact int32 vector. The q.y part is
 * vpdpbusd per chunk (lane m of chunk j: group 4j + m/4, |.| <= 4*63*128
 * fits int16), packed pairwise as for Q4_K; k_q6_packidx gives the group
 * of each packed int16 lane for the chunk pairs (0,1) and (2,3). Four
 * levels of rows_reduce leave one lane per row.
 * ---------------------------------------------------------------------- */

static const int16_t k_q6_packidx[2][32] = {
    {0, 0, 0, 0, 4, 4, 4, 4, 1, 1, 1, 1, 5, 5, 5, 5, 2, 2, 2, 2, 6, 6, 6, 6, 3, 3, 3, 3, 7, 7, 7, 7},
    {8,  8,  8,  8,  12, 12, 12, 12, 9,  9,  9,  9,  13, 13, 13, 13,
     10, 10, 10, 10, 14, 14, 14, 14, 11, 11, 11, 11, 15, 15, 15, 15}};

/* One Q6_K block: codes W[0..3], packed scales SC[0..1], and SCB = -32 sc_g
 * in int16 lanes 0-15 (zero above, so the bsums' upper garbage lanes
 * contribute nothing). */
BD_INLINE void q6k_block(const block_q6_K *w, __m512i W[4], __m512i SC[2], __m512i *SCB) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    UNROLL for (int h = 0; h < 2; h++) {
        __m512i ql = _mm512_loadu_si512(w->ql + 64 * h);
        __m256i qh = _mm256_loadu_si256((const __m256i *)(w->qh + 32 * h));
        __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
        W[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh2, 4), m30));
        W[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(qh2, m30));
    }
    __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    __m512i s16z = _mm512_castsi256_si512(s16);
    SC[0] = _mm512_permutexvar_epi16(_mm512_loadu_si512(k_q6_packidx[0]), s16z);
    SC[1] = _mm512_permutexvar_epi16(_mm512_loadu_si512(k_q6_packidx[1]), s16z);
    *SCB = _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s16, 5)));
}

/* The block's sums for one activation row: 16 int32 lanes adding up to sumi. */
BD_INLINE __m512i q6k_block_sums(const __m512i W[4], const __m512i SC[2], __m512i SCB, const block_q8_K *y) {
    __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y->bsums)), SCB);
    const __m512i z = _mm512_setzero_si512();
    const __m512i s0 = _mm512_dpbusd_epi32(z, W[0], _mm512_loadu_si512(y->qs));
    const __m512i s1 = _mm512_dpbusd_epi32(z, W[1], _mm512_loadu_si512(y->qs + 64));
    const __m512i s2 = _mm512_dpbusd_epi32(z, W[2], _mm512_loadu_si512(y->qs + 128));
    const __m512i s3 = _mm512_dpbusd_epi32(z, W[3], _mm512_loadu_si512(y->qs + 192));
    s = _mm512_dpwssd_epi32(s, _mm512_packs_epi32(s0, s1), SC[0]);
    return _mm512_dpwssd_epi32(s, _mm512_packs_epi32(s2, s3), SC[1]);
}

/* One block's sums for one row, unpacking included (the one-row path). */
BD_INLINE __m512i q6k_block_z(const block_q6_K *w, const block_q8_K *y) {
    __m512i W[4], SC[2], SCB;
    q6k_block(w, W, SC, &SCB);
    return q6k_block_sums(W, SC, SCB, y);
}

/* The few-row dot's unit and row sums (kernels_simd.h) */
typedef struct {
    __m512i W[4], SC[2], SCB;
} q6k_unit;

BD_INLINE void q6k_unpack(const block_q6_K *w, q6k_unit *u) { q6k_block(w, u->W, u->SC, &u->SCB); }

BD_INLINE __m256i q6k_row_z(const q6k_unit *u, const block_q8_K *y) {
    const __m512i t = q6k_block_sums(u->W, u->SC, u->SCB, y);
    return _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
}

BD_KQ_FEW_ROWS(q6k_few_rows, q6k, block_q6_K, 7, ONE_ROW_AHEAD)

/* One activation row, two blocks per step as q4k_one_row. */
static float q6k_one_row(int64_t n, const block_q6_K *w, const block_q8_K *y) {
    const int64_t nb = n / QK_K;
    float acc = 0.0f;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        UNROLL for (int l = 0; l < 7; l++) _mm_prefetch((const char *)(w + i) + ONE_ROW_AHEAD + 64 * l, _MM_HINT_T0);
        const __m512i t0 = q6k_block_z(w + i, y + i), t1 = q6k_block_z(w + i + 1, y + i + 1);
        /* 128-bit lanes [t0 0+2, t0 1+3, t1 0+2, t1 1+3], reordered so the
         * 256-bit halves add up to [t0 (4 lanes), t1 (4 lanes)] */
        __m512i u = _mm512_add_epi32(_mm512_shuffle_i64x2(t0, t1, 0x44), _mm512_shuffle_i64x2(t0, t1, 0xEE));
        u = _mm512_shuffle_i64x2(u, u, 0xD8);
        __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
        h = _mm256_hadd_epi32(h, h);
        h = _mm256_hadd_epi32(h, h); /* lane 0: block i's sumi, lane 4: block i + 1's */
        const __m256 f = _mm256_cvtepi32_ps(h);
        acc = fmaf(y[i].d * f16f(w[i].d), _mm256_cvtss_f32(f), acc);
        acc = fmaf(y[i + 1].d * f16f(w[i + 1].d), _mm_cvtss_f32(_mm256_extractf128_ps(f, 1)), acc);
    }
    if (i < nb) acc = fmaf(y[i].d * f16f(w[i].d), (float)_mm512_reduce_add_epi32(q6k_block_z(w + i, y + i)), acc);
    return acc;
}

BD_INLINE void q6k_kernel(int64_t n, const void *vw, const void *x, size_t xs, float *out,
                          const int NX) {
    const block_q6_K *w = vw;
    if (NX == 1) {
        out[0] = q6k_one_row(n, w, x);
        return;
    }
    if (NX <= 8) {
        q6k_few_rows(n, w, x, xs, out, NX);
        return;
    }
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m512i W[4], SC[2], SCB, Z[NX_MAX];
        /* software prefetch ~1 KiB ahead (see q4k_kernel) */
        UNROLL for (int l = 0; l < 4; l++)
            _mm_prefetch((const char *)(w + i) + 1024 + 64 * l, _MM_HINT_T0);
        q6k_block(w + i, W, SC, &SCB);
        UNROLL for (int r = 0; r < NX; r++)
            Z[r] = q6k_block_sums(W, SC, SCB, (const block_q8_K *)row_at(x, xs, r) + i);
        rows_reduce(Z, NX, 4);
        const __m512 dx = kq_row_scales(x, xs, i, NX);
        acc = _mm512_fmadd_ps(_mm512_mul_ps(dx, _mm512_set1_ps(f16f(w[i].d))), _mm512_cvtepi32_ps(Z[0]), acc);
    }
    store_lanes(out, acc, NX);
}
BD_DOT_N(dot_n_q6_K, q6k_kernel, 16)

/* ------------------------------------------------------------------------
 * Q8_0-family x Q8_0: Q8_0, Q4_0, Q5_0, IQ4_NL. The weight block is
 * unpacked to 32 signed bytes (element order), then the byte trick from the
 * file comment. Two blocks per 512-bit register.
 * ---------------------------------------------------------------------- */

/*
 * f32 order (both kernels below, for every row count): one 8-lane f32
 * accumulator per row, blocks added in order as fma(int lanes, dw * dx),
 * then the 8 lanes summed as ((0+4) + (2+6)) + ((1+5) + (3+7)). That is
 * llama.cpp's order (its x86 vec_dot), and it must be the same in both
 * kernels: which one runs depends on how many rows are batched, and a row's
 * result must not (decode vs speculative verify, see matmul.c).
 */
/*
 * Blocks are taken in groups of 16. At the start of a group, the 16
 * activation scales of each row are fetched with one gather (stride 34
 * bytes), converted and multiplied by the 16 weight scales into a small
 * table; the per-block work per row is then load, flip, vpdpbusd, convert
 * and one FMA whose scale is a broadcast from that table.
 */
#define Q80_GROUP_KERNEL(NAME, UNPACK)                                                         \
    BD_INLINE void NAME(int64_t n, const void *w, const void *x, size_t xs, float *out,         \
                        const int NX) {                                                         \
        const __m256i flip = _mm256_set1_epi8((char)0x80);                                      \
        const __m512i didx = _mm512_mullo_epi32(                                                \
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),            \
            _mm512_set1_epi32((int)sizeof(block_q8_0)));                                        \
        __m256 acc[NX_MAX];                                                                     \
        float dd[NX_MAX][16]; /* dw * dx per row and block of the group */                      \
        float dwv[16];                                                                          \
        __m256i Wg[16];                                                                         \
        UNROLL for (int r = 0; r < NX; r++) acc[r] = _mm256_setzero_ps();                       \
        const int64_t nb = n / QK8_0;                                                           \
        for (int64_t g = 0; g < nb; g += 16) {                                                  \
            const int cnt = nb - g >= 16 ? 16 : (int)(nb - g);                                  \
            const __mmask16 km = (__mmask16)(cnt == 16 ? 0xFFFF : (1u << cnt) - 1);              \
            for (int b = 0; b < cnt; b++) {                                                     \
                _mm_prefetch((const char *)w + (size_t)(g + b) * BD_BLOCK_BYTES(UNPACK) + 1024,  \
                             _MM_HINT_T0);                                                      \
                Wg[b] = UNPACK(w, g + b, &dwv[b]);                                              \
            }                                                                                   \
            const __m512 DW = _mm512_maskz_loadu_ps(km, dwv);                                   \
            UNROLL for (int r = 0; r < NX; r++) {                                               \
                const block_q8_0 *y = (const block_q8_0 *)row_at(x, xs, r) + g;                 \
                __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), km, didx,       \
                                                        (const void *)y, 1);                    \
                __m512 dy = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));                          \
                _mm512_storeu_ps(dd[r], _mm512_mul_ps(dy, DW));                                 \
            }                                                                                   \
            for (int b = 0; b < cnt; b++) {                                                     \
                const __m256i W = Wg[b];                                                        \
                /* -128 * (sum of each 4 weights), per lane */                                  \
                const __m256i C = _mm256_sub_epi32(                                             \
                    _mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), flip, W)); \
                UNROLL for (int r = 0; r < NX; r++) {                                           \
                    const block_q8_0 *y = (const block_q8_0 *)row_at(x, xs, r) + g + b;         \
                    __m256i Y = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y->qs), flip); \
                    __m256i s = _mm256_dpbusd_epi32(C, Y, W);                                   \
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dd[r][b]),   \
                                             acc[r]);                                           \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
        UNROLL for (int r = 0; r < NX; r++) out[r] = hsum8(acc[r]);                          \
    }

/* Few rows (1-2): the integer part two blocks per 512-bit register, scales
 * converted inline (the gathered-scale table above does not pay for itself
 * here); the f32 part block by block in the order above. */
#define Q80_PAIR_KERNEL(NAME, UNPACK)                                                         \
    BD_INLINE void NAME(int64_t n, const void *w, const void *x, size_t xs, float *out,         \
                        const int NX) {                                                         \
        const __m512i flip = _mm512_set1_epi8((char)0x80);                                      \
        __m256 acc[NX_MAX];                                                                     \
        UNROLL for (int r = 0; r < NX; r++) acc[r] = _mm256_setzero_ps();                       \
        const int64_t nb = n / QK8_0;                                                           \
        int64_t i = 0;                                                                          \
        for (; i + 1 < nb; i += 2) {                                                            \
            float da, db;                                                                       \
            _mm_prefetch((const char *)w + (size_t)i * BD_BLOCK_BYTES(UNPACK) + 1024, _MM_HINT_T0); \
            _mm_prefetch((const char *)w + (size_t)i * BD_BLOCK_BYTES(UNPACK) + 1088, _MM_HINT_T0); \
            __m256i wa = UNPACK(w, i, &da), wb = UNPACK(w, i + 1, &db);                         \
            __m512i W = _mm512_inserti64x4(_mm512_castsi256_si512(wa), wb, 1);                  \
            /* -128 * (sum of each 4 weights), per lane */                                      \
            __m512i C = _mm512_sub_epi32(_mm512_setzero_si512(),                                \
                                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, W)); \
            UNROLL for (int r = 0; r < NX; r++) {                                               \
                const block_q8_0 *y = (const block_q8_0 *)row_at(x, xs, r) + i;                 \
                __m512i Y = _mm512_inserti64x4(                                                 \
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[0].qs)),       \
                    _mm256_loadu_si256((const __m256i *)y[1].qs), 1);                           \
                __m512 v = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(C, _mm512_xor_si512(Y, flip), W)); \
                acc[r] = _mm256_fmadd_ps(_mm512_castps512_ps256(v),                             \
                                         _mm256_set1_ps(da * f16f(y[0].d)), acc[r]);            \
                acc[r] = _mm256_fmadd_ps(_mm512_extractf32x8_ps(v, 1),                          \
                                         _mm256_set1_ps(db * f16f(y[1].d)), acc[r]);            \
            }                                                                                   \
        }                                                                                       \
        for (; i < nb; i++) {                                                                   \
            float da;                                                                           \
            __m256i W = UNPACK(w, i, &da);                                                      \
            const __m256i flip8 = _mm256_set1_epi8((char)0x80);                                 \
            __m256i C = _mm256_sub_epi32(_mm256_setzero_si256(),                                \
                                         _mm256_dpbusd_epi32(_mm256_setzero_si256(), flip8, W)); \
            UNROLL for (int r = 0; r < NX; r++) {                                               \
                const block_q8_0 *y = (const block_q8_0 *)row_at(x, xs, r) + i;                 \
                __m256i s = _mm256_dpbusd_epi32(                                                \
                    C, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y->qs), flip8), W); \
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(da * f16f(y->d)), \
                                         acc[r]);                                               \
            }                                                                                   \
        }                                                                                       \
        UNROLL for (int r = 0; r < NX; r++) out[r] = hsum8(acc[r]);                          \
    }

#define Q80_FAMILY_KERNEL(NAME, UNPACK)                                                 \
    Q80_PAIR_KERNEL(NAME##_pair, UNPACK)                                                \
    Q80_GROUP_KERNEL(NAME##_group, UNPACK)                                              \
    BD_INLINE void NAME(int64_t n, const void *w, const void *x, size_t xs, float *out, \
                        const int NX) {                                                 \
        if (NX <= 2) NAME##_pair(n, w, x, xs, out, NX);                                 \
        else NAME##_group(n, w, x, xs, out, NX);                                        \
    }

Q80_FAMILY_KERNEL(q8_0_kernel, unpack_q8_0)
Q80_FAMILY_KERNEL(q4_0_kernel, unpack_q4_0)
Q80_FAMILY_KERNEL(q5_0_kernel, unpack_q5_0)
Q80_FAMILY_KERNEL(iq4_nl_kernel, unpack_iq4_nl)
BD_DOT_N(dot_n_q8_0, q8_0_kernel, 16)
BD_DOT_N(dot_n_q4_0, q4_0_kernel, 8)
BD_DOT_N(dot_n_q5_0, q5_0_kernel, 8)
BD_DOT_N(dot_n_iq4_nl, iq4_nl_kernel, 8)

/* ------------------------------------------------------------------------
 * Q4_1 / Q5_1 x Q8_1: unsigned codes, so vpdpbusd takes them directly;
 * block = (dw dx) isum + mw sx.
 * ---------------------------------------------------------------------- */

BD_Q81_KERNEL(q4_1_kernel, unpack_q4_1, 8)
BD_Q81_KERNEL(q5_1_kernel, unpack_q5_1, 8)
BD_DOT_N(dot_n_q4_1, q4_1_kernel, 8)
BD_DOT_N(dot_n_q5_1, q5_1_kernel, 8)

/* ------------------------------------------------------------------------
 * IQ4_XS x Q8_K: table lookup to signed bytes, byte trick with the
 * correction -128*sum(w) per lane; lanes 0-7 / 8-15 of chunk c are
 * sub-blocks 2c / 2c+1, scaled by (ls - 32) with vpmulld.
 * ---------------------------------------------------------------------- */

BD_INLINE void iq4xs_kernel(int64_t n, const void *vw, const void *x, size_t xs, float *out,
                            const int NX) {
    const block_iq4_xs *w = vw;
    const __m512i flip = _mm512_set1_epi8((char)0x80), m4 = _mm512_set1_epi8(0x0F);
    const __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)bd_kvalues_iq4nl));
    __m512 acc[NX_MAX];
    UNROLL for (int r = 0; r < NX; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m512i W[4], C[4], SC[4];
        UNROLL for (int l = 0; l < 3; l++)
            _mm_prefetch((const char *)(w + i) + 1024 + 64 * l, _MM_HINT_T0);
        UNROLL for (int c = 0; c < 4; c++) {
            /* sub-block 2c: qs[32c..32c+15] lo then hi nibbles; sub 2c+1 next 16 */
            __m128i qa = _mm_loadu_si128((const __m128i *)(w[i].qs + 32 * c));
            __m128i qb = _mm_loadu_si128((const __m128i *)(w[i].qs + 32 * c + 16));
            __m512i q = _mm512_castsi128_si512(qa);
            q = _mm512_inserti32x4(q, _mm_srli_epi16(qa, 4), 1);
            q = _mm512_inserti32x4(q, qb, 2);
            q = _mm512_inserti32x4(q, _mm_srli_epi16(qb, 4), 3);
            W[c] = _mm512_shuffle_epi8(tab, _mm512_and_si512(q, m4));
            C[c] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, W[c]));
            int l0 = ((w[i].scales_l[c] & 0xF) | (((w[i].scales_h >> (4 * c)) & 3) << 4)) - 32;
            int l1 = ((w[i].scales_l[c] >> 4) | (((w[i].scales_h >> (4 * c + 2)) & 3) << 4)) - 32;
            SC[c] = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(l0), _mm512_set1_epi32(l1));
        }
        const float d = f16f(w[i].d);
        UNROLL for (int r = 0; r < NX; r++) {
            const block_q8_K *y = (const block_q8_K *)row_at(x, xs, r) + i;
            __m512i t = _mm512_setzero_si512();
            UNROLL for (int c = 0; c < 4; c++) {
                __m512i Y = _mm512_xor_si512(_mm512_loadu_si512(y->qs + 64 * c), flip);
                __m512i s = _mm512_dpbusd_epi32(C[c], Y, W[c]);
                t = _mm512_add_epi32(t, _mm512_mullo_epi32(s, SC[c]));
            }
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(y->d * d), acc[r]);
        }
    }
    UNROLL for (int r = 0; r < NX; r++) out[r] = _mm512_reduce_add_ps(acc[r]);
}
BD_DOT_N(dot_n_iq4_xs, iq4xs_kernel, 8)

/* Q2_K / Q3_K: kernels_simd.h's k23_kernel */
BD_DOT_N(dot_n_q2_K, q2k_kernel, 8)
BD_DOT_N(dot_n_q3_K, q3k_kernel, 8)

/* ------------------------------------------------------------------------
 * F32 / F16 / BF16 (kernels_simd.h's BD_FLOAT_KERNEL): 16 lanes, reduced
 * as (a0 + a2) + (a1 + a3) and then across lanes, as llama.cpp's AVX-512
 * build; four rows at most (four accumulators each).
 * ---------------------------------------------------------------------- */

BD_INLINE __m512 load_f32(const void *p, int64_t j) { return _mm512_loadu_ps((const float *)p + j); }
BD_INLINE __m512 load_f16(const void *p, int64_t j) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const bd_f16 *)p + j)));
}
BD_INLINE __m512 load_bf16(const void *p, int64_t j) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const bd_bf16 *)p + j)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
BD_INLINE float reduce4x16(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)));
}

BD_FLOAT_KERNEL(f32_kernel, __m512, 16, _mm512_setzero_ps, _mm512_fmadd_ps, reduce4x16, load_f32, sc_f32, 4, float, 4)
BD_FLOAT_KERNEL(f16_kernel, __m512, 16, _mm512_setzero_ps, _mm512_fmadd_ps, reduce4x16, load_f16, sc_f16, 2, double, 4)
BD_FLOAT_KERNEL(bf16_kernel, __m512, 16, _mm512_setzero_ps, _mm512_fmadd_ps, reduce4x16, load_bf16, sc_bf16, 2, double,
                4)
BD_DOT_N(dot_n_f32, f32_kernel, 4)
BD_DOT_N(dot_n_f16, f16_kernel, 4)
BD_DOT_N(dot_n_bf16, bf16_kernel, 4)

/* ------------------------------------------------------------------------
 * BF16 with AVX512-BF16 (vdpbf16ps), ggml's order for that ISA: two
 * accumulators over steps of 64 elements (pairs of bf16 products per lane),
 * each reduced across lanes and added to a double, then the n % 64
 * leftovers in double. The only code here that needs AVX512-BF16: compiled
 * for it alone (the file's flags do not include it, kernels.c) and
 * installed only where the CPU has it.
 * ---------------------------------------------------------------------- */

/* gcc takes the target pragma; clang ignores it (make fuzz builds the core
 * with clang) and takes the attribute pragma instead */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512bf16"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512bf16")
#endif

BD_INLINE void bf16dp_kernel(int64_t n, const void *w, const void *x, size_t xs, float *out,
                             const int NX) {
    const bd_bf16 *wb = w;
    __m512 c1[4], c2[4];
    UNROLL for (int r = 0; r < NX; r++) c1[r] = c2[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        _mm_prefetch((const char *)(wb + i) + 2048, _MM_HINT_T0);
        const __m512bh wa = (__m512bh)_mm512_loadu_si512(wb + i);
        const __m512bh wc = (__m512bh)_mm512_loadu_si512(wb + i + 32);
        UNROLL for (int r = 0; r < NX; r++) {
            const bd_bf16 *xr = row_at(x, xs, r);
            c1[r] = _mm512_dpbf16_ps(c1[r], wa, (__m512bh)_mm512_loadu_si512(xr + i));
            c2[r] = _mm512_dpbf16_ps(c2[r], wc, (__m512bh)_mm512_loadu_si512(xr + i + 32));
        }
    }
    UNROLL for (int r = 0; r < NX; r++) {
        const bd_bf16 *xr = row_at(x, xs, r);
        double sum = 0;
        sum += (double)_mm512_reduce_add_ps(c1[r]);
        sum += (double)_mm512_reduce_add_ps(c2[r]);
        for (int64_t t = i; t < n; t++) sum += (double)(bd_bf16_to_f32(wb[t]) * bd_bf16_to_f32(xr[t]));
        out[r] = (float)sum;
    }
}
BD_DOT_N(dot_n_bf16dp, bf16dp_kernel, 4)

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/* ------------------------------------------------------------------------
 * Attention (f32): the canonical order of attn_ref.c, lane for lane
 * (a zmm holds the 16 lanes; tails are masked so absent elements leave the
 * lanes untouched, as the scalar loops skip them).
 * ---------------------------------------------------------------------- */

BD_INLINE float tree16(__m512 acc) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

/* bd_expf_poly on 16 lanes */
BD_INLINE __m512 exp16(__m512 x) {
    const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(BD_EXP_LO), _CMP_GE_OQ);
    x = _mm512_min_ps(x, _mm512_set1_ps(BD_EXP_HI));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(BD_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-BD_EXP_LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-BD_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(BD_EXP_C7);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(BD_EXP_C6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(BD_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(BD_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(BD_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(BD_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(ok, p, _mm512_castsi512_ps(e));
}

/* The 16 lane accumulators of U keys (k0, k0 + ks, ...): U independent fma
 * chains over nc full chunks of 16 elements plus a masked tail of rem. */
BD_INLINE void score_lanes(const float *q, const float *k0, int64_t ks, int32_t nc, int32_t rem, __m512 *a,
                           const int U) {
    const __mmask16 mt = (__mmask16)((1u << rem) - 1);
    UNROLL for (int u = 0; u < U; u++) a[u] = _mm512_setzero_ps();
    for (int32_t c = 0; c < nc; c++) {
        const __m512 qv = _mm512_loadu_ps(q + 16 * c);
        UNROLL for (int u = 0; u < U; u++) a[u] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k0 + u * ks + 16 * c), a[u]);
    }
    if (rem) {
        const __m512 qv = _mm512_maskz_loadu_ps(mt, q + 16 * nc);
        UNROLL for (int u = 0; u < U; u++)
            a[u] = _mm512_mask3_fmadd_ps(qv, _mm512_maskz_loadu_ps(mt, k0 + u * ks + 16 * nc), a[u], mt);
    }
}

/* Sixteen, then four keys at a time, then one (score_lanes), NC full
 * chunks of 16 plus a masked tail of rem elements. */
BD_INLINE void scores_kernel(int32_t hd, const float *q, const float *k, int64_t ks, int32_t len,
                             float scale, float *out, const int32_t NC) {
    const int32_t nc = NC ? NC : hd / 16, rem = NC ? 0 : hd % 16;
    const __m512 vscale = _mm512_set1_ps(scale);
    int32_t j = 0;
    /* 16 keys at a time: 16 lane accumulators, then the four tree levels
     * of tree16 done for all 16 keys at once by merging pairs of vectors.
     * Each lane adds exactly the operands tree16 adds, level by level, so
     * the scores are bit-identical to the one-key paths below; the merges
     * just share each shuffle and add among several keys. */
    for (; j + 16 <= len; j += 16) {
        __m512 a[16];
        score_lanes(q, k + (int64_t)j * ks, ks, nc, rem, a, 16);
        /* level 1, lane l + lane l+8: b[m] = keys 2m (lanes 0-7), 2m+1 (8-15) */
        __m512 b[8];
        UNROLL for (int m = 0; m < 8; m++)
            b[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], 0x44),
                                 _mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], 0xEE));
        /* level 2, l + l+4: c[n] quarter r = key 4n + r */
        __m512 c4[4];
        UNROLL for (int n = 0; n < 4; n++)
            c4[n] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * n], b[2 * n + 1], 0x88),
                                  _mm512_shuffle_f32x4(b[2 * n], b[2 * n + 1], 0xDD));
        /* level 3, l + l+2: d[e] quarter r = keys 8e + r (lanes 0-1), 8e + 4 + r (2-3) */
        __m512 d[2];
        UNROLL for (int e = 0; e < 2; e++)
            d[e] = _mm512_add_ps(_mm512_shuffle_ps(c4[2 * e], c4[2 * e + 1], 0x44),
                                 _mm512_shuffle_ps(c4[2 * e], c4[2 * e + 1], 0xEE));
        /* level 4, lane 0 + lane 1: quarter r lane i = key r + 4i */
        __m512 f = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xDD));
        const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        _mm512_storeu_ps(out + j, _mm512_mul_ps(_mm512_permutexvar_ps(perm, f), vscale));
    }
    for (; j + 4 <= len; j += 4) {
        __m512 a[4];
        score_lanes(q, k + (int64_t)j * ks, ks, nc, rem, a, 4);
        UNROLL for (int u = 0; u < 4; u++) out[j + u] = tree16(a[u]) * scale;
    }
    for (; j < len; j++) {
        __m512 a;
        score_lanes(q, k + (int64_t)j * ks, ks, nc, rem, &a, 1);
        out[j] = tree16(a) * scale;
    }
}

static float attn_scores(int32_t hd, const float *q, const float *k, int64_t ks, int32_t len,
                         float scale, float *out) {
    if (hd == 128) scores_kernel(hd, q, k, ks, len, scale, out, 8);
    else if (hd == 64) scores_kernel(hd, q, k, ks, len, scale, out, 4);
    else scores_kernel(hd, q, k, ks, len, scale, out, 0);
    /* the max over what was just written (still in L1); vmaxps returns its
     * second operand when the first is NaN, so NaNs are skipped as in the
     * scalar twin */
    __m512 m = _mm512_set1_ps(-INFINITY);
    int32_t j = 0;
    for (; j + 16 <= len; j += 16) m = _mm512_max_ps(_mm512_loadu_ps(out + j), m);
    if (j < len) m = _mm512_mask_max_ps(m, (__mmask16)((1u << (len - j)) - 1), _mm512_maskz_loadu_ps((__mmask16)((1u << (len - j)) - 1), out + j), m);
    return _mm512_reduce_max_ps(m);
}

static float attn_softmax(int32_t len, float *x, float mx) {
    const __m512 vmx = _mm512_set1_ps(mx);
    __m512 acc = _mm512_setzero_ps();
    int32_t j = 0;
    for (; j + 16 <= len; j += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), vmx));
        _mm512_storeu_ps(x + j, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (j < len) {
        const __mmask16 m = (__mmask16)((1u << (len - j)) - 1);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vmx));
        _mm512_mask_storeu_ps(x + j, m, e);
        acc = _mm512_mask_add_ps(acc, m, acc, e);
    }
    return tree16(acc);
}

/* NC chunks of 16 outputs held in registers across the whole key loop. */
BD_INLINE void accum_kernel(const float *p, const float *v, int64_t vs, int32_t len, float *out,
                            const int NC) {
    __m512 o[8];
    UNROLL for (int c = 0; c < NC; c++) o[c] = _mm512_loadu_ps(out + 16 * c);
    for (int32_t j = 0; j < len; j++) {
        const __m512 pj = _mm512_set1_ps(p[j]);
        const float *vr = v + (int64_t)j * vs;
        UNROLL for (int c = 0; c < NC; c++) o[c] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vr + 16 * c), o[c]);
    }
    UNROLL for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + 16 * c, o[c]);
}

static void attn_accum(int32_t hd, const float *p, const float *v, int64_t vs, int32_t len,
                       float *out) {
    int32_t i0 = 0;
    for (; i0 + 128 <= hd; i0 += 128) accum_kernel(p, v + i0, vs, len, out + i0, 8);
    for (; i0 + 16 <= hd; i0 += 16) accum_kernel(p, v + i0, vs, len, out + i0, 1);
    if (i0 < hd) {
        const __mmask16 m = (__mmask16)((1u << (hd - i0)) - 1);
        __m512 o = _mm512_maskz_loadu_ps(m, out + i0);
        for (int32_t j = 0; j < len; j++)
            o = _mm512_fmadd_ps(_mm512_set1_ps(p[j]),
                                _mm512_maskz_loadu_ps(m, v + (int64_t)j * vs + i0), o);
        _mm512_mask_storeu_ps(out + i0, m, o);
    }
}

/* vcvtph2ps, 16 at a time, the tail masked */
static void f16_to_f32(int64_t n, const bd_f16 *x, float *y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
    }
}

/* vcvtps2ph to nearest even, 16 at a time, the tail masked */
static void f32_to_f16(int64_t n, const float *x, bd_f16 *y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT));
    }
}

/* q8_0 -> f32, a block at a time: 2 x (16 int8 widened to int32, to f32,
 * times the block's scale), one rounding each as in the twin */
static void q8_0_to_f32(int64_t n, const void *x, float *y) {
    const block_q8_0 *b = x;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
        const __m512 d = _mm512_set1_ps(bd_f16_to_f32(b[i].d));
        UNROLL for (int c = 0; c < 2; c++) {
            const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b[i].qs + 16 * c)));
            _mm512_storeu_ps(y + 16 * c, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q)));
        }
    }
}

/* bd_expf_dd on 8 lanes (double inside) */
BD_INLINE __m512d expdd8(__m512d x) {
    static const double c[10] = BD_EXPD_COEFS;
    /* max/min return the second operand on NaN: x first keeps a NaN out of
     * the clamps, as in the twin */
    x = _mm512_max_pd(_mm512_set1_pd(BD_EXPD_LO), x);
    x = _mm512_min_pd(_mm512_set1_pd(BD_EXPD_HI), x);
    const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(BD_EXPD_LOG2E)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fmadd_pd(n, _mm512_set1_pd(-BD_EXPD_LN2_HI), x);
    r = _mm512_fmadd_pd(n, _mm512_set1_pd(-BD_EXPD_LN2_LO), r);
    __m512d p = _mm512_set1_pd(c[0]);
    UNROLL for (int k = 1; k < 10; k++) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c[k]));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    return _mm512_scalef_pd(p, n);
}

BD_INLINE __m512 expdd16(__m512 x) {
    const __m512d lo = expdd8(_mm512_cvtps_pd(_mm512_castps512_ps256(x)));
    const __m512d hi = expdd8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)));
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}

static void silu_mul(int64_t n, float *g, const float *u) {
    const __m512 one = _mm512_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i);
        const __m512 e = expdd16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), _mm512_loadu_ps(u + i)));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 e = expdd16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, u + i)));
    }
}

/* Gated DeltaNet step (kernels.h): a zmm holds the 16 lanes of each dot;
 * multiplies and adds stay separate (no fma), as in the scalar twin. */
static void gdn_step(const float *src, float *dst, int32_t d_k, int32_t d_v, const float *k, const float *v,
                     float g, float beta, const float *q, float scale, float *out) {
    if (d_k % 16 != 0) {
        bd_gdn_step_ref(src, dst, d_k, d_v, k, v, g, beta, q, scale, out);
        return;
    }
    const __m512 e = _mm512_set1_ps(expf(g));
    for (int32_t j = 0; j < d_v; j++) {
        const float *ms = src + (int64_t)j * d_k;
        float *md = dst + (int64_t)j * d_k;
        __m512 acc = _mm512_setzero_ps();
        for (int32_t i = 0; i < d_k; i += 16) {
            const __m512 m = _mm512_mul_ps(_mm512_loadu_ps(ms + i), e);
            _mm512_storeu_ps(md + i, m);
            acc = _mm512_add_ps(acc, _mm512_mul_ps(m, _mm512_loadu_ps(k + i)));
        }
        const __m512 d = _mm512_set1_ps((v[j] - tree16(acc)) * beta);
        acc = _mm512_setzero_ps();
        for (int32_t i = 0; i < d_k; i += 16) {
            const __m512 m = _mm512_add_ps(_mm512_loadu_ps(md + i), _mm512_mul_ps(_mm512_loadu_ps(k + i), d));
            _mm512_storeu_ps(md + i, m);
            if (q) acc = _mm512_add_ps(acc, _mm512_mul_ps(m, _mm512_loadu_ps(q + i)));
        }
        if (q) out[j] = tree16(acc) * scale;
    }
}

/* ------------------------------------------------------------------------
 * Row groups (verify batches and prompts): 16 weight rows against a batch
 * of activation rows (kernels.h's bd_tile_ops; matmul.c sends them the
 * batches of at least k_rg_ops' row counts).
 *
 * Each weight block of 16 rows is unpacked once for the whole batch into a
 * row-interleaved layout (rg_q4k / rg_q6k): a vector holds 4 consecutive
 * codes of each of the 16 rows, so one vpdpbusd against the broadcast of
 * 4 activation bytes gives each row's 4-product sum in its own lane, and a
 * sub-block's sums come out per row with no horizontal reduction. The
 * integer sums are then the scalar twin's (sub-block scales applied with
 * vpmulld, mins / offsets with vpdpwssd against the activations' bsums),
 * and the f32 steps, done for 16 rows at once, are dot_ref.c's tile order
 * for every row: the bits of vec_dot_n, whatever the batch size. The
 * activation rows are read where they are (no packing).
 * ---------------------------------------------------------------------- */

/* 16 x 16 int32 transpose: out[j] lane r = in[r] lane j. */
BD_INLINE void transpose16_epi32(const __m512i in[16], __m512i out[16]) {
    __m512i t[16], u[16];
    UNROLL for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_epi32(in[2 * k], in[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_epi32(in[2 * k], in[2 * k + 1]);
    }
    /* u[4m + k], 128-bit lane q: element 4q + k of rows 4m .. 4m + 3 */
    UNROLL for (int m = 0; m < 4; m++) {
        u[4 * m] = _mm512_unpacklo_epi64(t[4 * m], t[4 * m + 2]);
        u[4 * m + 1] = _mm512_unpackhi_epi64(t[4 * m], t[4 * m + 2]);
        u[4 * m + 2] = _mm512_unpacklo_epi64(t[4 * m + 1], t[4 * m + 3]);
        u[4 * m + 3] = _mm512_unpackhi_epi64(t[4 * m + 1], t[4 * m + 3]);
    }
    UNROLL for (int k = 0; k < 4; k++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x44), v1 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xEE);
        const __m512i v2 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x44),
                      v3 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xEE);
        out[k] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        out[4 + k] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
        out[8 + k] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        out[12 + k] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
    }
}

/* The 16 bytes at off in block i of each of the 16 rows as four vectors:
 * q[k] lane r = dword k of row r (rows >= nw read as zero). Rows go four
 * to a vector as {m, m + 4, m + 8, m + 12} so that the in-lane transposes
 * leave row r in lane r. */
BD_INLINE void rg_load16x4(const uint8_t *w, size_t ws, int nw, size_t bb, int64_t i, size_t off, __m512i q[4]) {
    __m512i a[4];
    UNROLL for (int m = 0; m < 4; m++) {
        __m128i v[4];
        UNROLL for (int l = 0; l < 4; l++) {
            const int r = m + 4 * l;
            v[l] = r < nw ? _mm_loadu_si128((const __m128i *)(w + (size_t)r * ws + (size_t)i * bb + off)) : _mm_setzero_si128();
        }
        /* immediates spelled out: -O1 builds do not fold l */
        a[m] = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(v[0]), v[1], 1), v[2], 2), v[3], 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]), t1 = _mm512_unpackhi_epi32(a[0], a[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]), t3 = _mm512_unpackhi_epi32(a[2], a[3]);
    q[0] = _mm512_unpacklo_epi64(t0, t2);
    q[1] = _mm512_unpackhi_epi64(t0, t2);
    q[2] = _mm512_unpacklo_epi64(t1, t3);
    q[3] = _mm512_unpackhi_epi64(t1, t3);
}

#define RG_AHEAD 1 /* blocks of each row prefetched ahead of their unpacking */

/* Q4_K's mins two sub-blocks at a time, as in kernels_avx2.c (which says
 * why the sums are the same): q4k_mins2(m), m lane r = 4 mins as bytes,
 * gives lane r = (byte 0, byte 1) and (byte 2, byte 3) as int16 pairs;
 * q8k_bsums2(x) every lane of b[q] = (b_2q, b_2q+1), b_s the sum of
 * sub-block s's 32 activations. */
BD_INLINE void q4k_mins2(__m512i m, __m512i out[2]) {
    /* (byte shuffles stay inside each 128-bit lane; -1 zeroes, and stays
     * negative with 2 added) */
    const __m512i s01 =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13, -1));
    out[0] = _mm512_shuffle_epi8(m, s01);
    out[1] = _mm512_shuffle_epi8(m, _mm512_add_epi16(s01, _mm512_set1_epi16(2)));
}
BD_INLINE void q8k_bsums2(const block_q8_K *x, __m512i b[4]) {
    const __m128i h = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
    const __m512i h4 = _mm512_broadcast_i32x4(h);
    b[0] = _mm512_shuffle_epi32(h4, _MM_PERM_AAAA);
    b[1] = _mm512_shuffle_epi32(h4, _MM_PERM_BBBB);
    b[2] = _mm512_shuffle_epi32(h4, _MM_PERM_CCCC);
    b[3] = _mm512_shuffle_epi32(h4, _MM_PERM_DDDD);
}

/* Q4_K, 16 rows of one block. */
typedef struct {
    __m512i u[8][8]; /* [sub-block s][g]: lane r = codes of elements 32 s + 4 g .. + 3 of row r */
    __m512i sc[8];   /* [s]: lane r = the scale of sub-block s of row r */
    __m512i mn2[4];  /* [q]: lane r = (m_2q, m_2q+1), two sub-blocks' mins as an int16 pair (q4k_mins2) */
    __m512 d, dmin;
} rg_q4k;

BD_INLINE void rg_unpack_q4k(const uint8_t *w, size_t ws, int nw, int64_t i, rg_q4k *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int r = 0; r < nw; r++)
        UNROLL for (int l = 0; l < 3; l++)
            _mm_prefetch((const char *)(w + (size_t)r * ws) + (size_t)(i + RG_AHEAD) * sizeof(block_q4_K) + 64 * l,
                         _MM_HINT_T0);
    /* codes: qs byte 32 c + j holds element 64 c + j (low nibble, sub-block
     * 2 c) and 64 c + 32 + j (high nibble, 2 c + 1) */
    UNROLL for (int half = 0; half < 2; half++) {
        __m512i in[16], out[16];
        UNROLL for (int r = 0; r < 16; r++)
            in[r] = r < nw ? _mm512_loadu_si512(w + (size_t)r * ws + (size_t)i * sizeof(block_q4_K) +
                                                offsetof(block_q4_K, qs) + 64 * half)
                           : _mm512_setzero_si512();
        transpose16_epi32(in, out);
        UNROLL for (int j = 0; j < 16; j++) {
            const int c = 2 * half + j / 8, g = j % 8;
            u->u[2 * c][g] = _mm512_and_si512(out[j], m4);
            u->u[2 * c + 1][g] = _mm512_and_si512(_mm512_srli_epi16(out[j], 4), m4);
        }
    }
    /* d, dmin and the 12 scale bytes (kq_unpack_scales, 16 rows at once) */
    __m512i q[4];
    rg_load16x4(w, ws, nw, sizeof(block_q4_K), i, 0, q);
    const __m512i m6 = _mm512_set1_epi8(0x3F), lo4 = _mm512_set1_epi8(0x0F), hi2 = _mm512_set1_epi8(0x30);
    const __m512i sc_lo = _mm512_and_si512(q[1], m6), m_lo = _mm512_and_si512(q[2], m6);
    const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(q[3], lo4), _mm512_and_si512(_mm512_srli_epi32(q[1], 2), hi2));
    const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(q[3], 4), lo4),
                                         _mm512_and_si512(_mm512_srli_epi32(q[2], 2), hi2));
    const __m512i ff = _mm512_set1_epi32(0xFF);
    UNROLL for (int s = 0; s < 8; s++) {
        const __m512i scs = s < 4 ? sc_lo : sc_hi;
        u->sc[s] = _mm512_and_si512(_mm512_srli_epi32(scs, 8 * (s % 4)), ff);
    }
    q4k_mins2(m_lo, u->mn2);
    q4k_mins2(m_hi, u->mn2 + 2);
    u->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(q[0]));
    u->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(q[0], 16)));
}

/* 4 bytes at p broadcast to every lane, straight from memory (a vpdpbusd
 * can take it as its {1to16} operand) */
BD_INLINE __m512i bcast32(const void *p) { return _mm512_broadcastd_epi32(_mm_loadu_si32(p)); }

/* sumi[j] += sc * (the products of NU code vectors U with the 4 NU bytes
 * at offset off of activation row x[j]), j < NT (<= 8): one vpdpbusd chain
 * per row, the rows interleaved. 8 code vectors, 8 chains and 8 sums fit
 * the 32 registers (two chains per row spilled to the stack: 11 % slower
 * in cache). The integer sums are exact, so their order is free. */
BD_INLINE void rg_scaled_sums(const __m512i *U, const int NU, const block_q8_K *const *x, int off, __m512i sc,
                              __m512i *sumi, const int NT) {
    __m512i a[8];
    UNROLL for (int j = 0; j < NT; j++) a[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), U[0], bcast32(x[j]->qs + off));
    UNROLL for (int g = 1; g < NU; g++)
        UNROLL for (int j = 0; j < NT; j++) a[j] = _mm512_dpbusd_epi32(a[j], U[g], bcast32(x[j]->qs + off + 4 * g));
    UNROLL for (int j = 0; j < NT; j++) sumi[j] = _mm512_add_epi32(sumi[j], _mm512_mullo_epi32(a[j], sc));
}

/* NT (<= 8) activation rows x[j] (Q8_K, block i) against one unpacked Q4_K
 * block: acc[j] lane r = row r's dot so far. A sub-block's 8 code vectors
 * stay in registers while the rows go by (rg_scaled_sums). */
BD_INLINE void rg_block_q4k(const void *vu, const block_q8_K *const *x, __m512 *acc, const int NT) {
    const rg_q4k *u = vu;
    __m512i sumi[8], summ[8];
    UNROLL for (int j = 0; j < NT; j++) sumi[j] = summ[j] = _mm512_setzero_si512();
    UNROLL for (int s = 0; s < 8; s++) {
        __m512i U[8];
        UNROLL for (int g = 0; g < 8; g++) U[g] = _mm512_load_si512(&u->u[s][g]);
        rg_scaled_sums(U, 8, x, 32 * s, u->sc[s], sumi, NT);
    }
    UNROLL for (int j = 0; j < NT; j++) {
        __m512i b2[4];
        q8k_bsums2(x[j], b2);
        UNROLL for (int q = 0; q < 4; q++) summ[j] = _mm512_dpwssd_epi32(summ[j], u->mn2[q], b2[q]);
        const __m512 dx = _mm512_set1_ps(x[j]->d);
        acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(u->d, dx), _mm512_cvtepi32_ps(sumi[j]), acc[j]);
        acc[j] = _mm512_fnmadd_ps(_mm512_mul_ps(u->dmin, dx), _mm512_cvtepi32_ps(summ[j]), acc[j]);
    }
}

/* Q6_K, 16 rows of one block. */
typedef struct {
    __m512i u[16][4]; /* [group G][k]: lane r = codes (0..63) of elements 16 G + 4 k .. + 3 of row r */
    __m512i sc[16];   /* [G]: lane r = the scale of group G of row r */
    __m512i scb[8];   /* [p]: lane r = (-32 sc_2p, -32 sc_2p+1) as an int16 pair: the codes' offset */
    __m512 d;
} rg_q6k;

BD_INLINE void rg_unpack_q6k(const uint8_t *w, size_t ws, int nw, int64_t i, rg_q6k *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    for (int r = 0; r < nw; r++)
        UNROLL for (int l = 0; l < 4; l++)
            _mm_prefetch((const char *)(w + (size_t)r * ws) + (size_t)(i + RG_AHEAD) * sizeof(block_q6_K) + 64 * l,
                         _MM_HINT_T0);
    /* codes in element order (as q6k_block): quarter h2 (64 elements) of each row */
    UNROLL for (int h2 = 0; h2 < 4; h2++) {
        const int h = h2 / 2, hi = h2 % 2;
        __m512i in[16], out[16];
        UNROLL for (int r = 0; r < 16; r++) {
            if (r >= nw) {
                in[r] = _mm512_setzero_si512();
                continue;
            }
            const block_q6_K *b = (const block_q6_K *)(w + (size_t)r * ws) + i;
            const __m512i ql = _mm512_loadu_si512(b->ql + 64 * h);
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
            const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            in[r] = hi ? _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(qh2, m30))
                       : _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh2, 4), m30));
        }
        transpose16_epi32(in, out);
        UNROLL for (int j = 0; j < 16; j++) u->u[4 * h2 + j / 4][j % 4] = out[j];
    }
    __m512i q[4];
    rg_load16x4(w, ws, nw, sizeof(block_q6_K), i, offsetof(block_q6_K, scales), q);
    UNROLL for (int G = 0; G < 16; G++)
        u->sc[G] = _mm512_srai_epi32(_mm512_slli_epi32(q[G / 4], 24 - 8 * (G % 4)), 24);
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    UNROLL for (int p = 0; p < 8; p++) {
        const __m512i a = _mm512_slli_epi32(u->sc[2 * p], 5), b = _mm512_slli_epi32(u->sc[2 * p + 1], 5);
        u->scb[p] = _mm512_or_si512(_mm512_and_si512(_mm512_sub_epi32(_mm512_setzero_si512(), a), lo16),
                                    _mm512_slli_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), b), 16));
    }
    uint16_t dh[16] = {0};
    for (int r = 0; r < nw; r++) memcpy(&dh[r], &((const block_q6_K *)(w + (size_t)r * ws) + i)->d, 2);
    u->d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh));
}

BD_INLINE void rg_block_q6k(const void *vu, const block_q8_K *const *x, __m512 *acc, const int NT) {
    const rg_q6k *u = vu;
    __m512i sumi[8];
    UNROLL for (int j = 0; j < NT; j++) {
        sumi[j] = _mm512_setzero_si512();
        UNROLL for (int p = 0; p < 8; p++) sumi[j] = _mm512_dpwssd_epi32(sumi[j], u->scb[p], bcast32(x[j]->bsums + 2 * p));
    }
    UNROLL for (int G = 0; G < 16; G++) {
        __m512i U[4];
        UNROLL for (int k = 0; k < 4; k++) U[k] = _mm512_load_si512(&u->u[G][k]);
        rg_scaled_sums(U, 4, x, 16 * G, u->sc[G], sumi, NT);
    }
    UNROLL for (int j = 0; j < NT; j++)
        acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(u->d, _mm512_set1_ps(x[j]->d)), _mm512_cvtepi32_ps(sumi[j]), acc[j]);
}

/* ------------------------------------------------------------------------
 * Q8_0 row groups, in the tile order (dot_ref.c's bd_ref_dot_tile_q8_0:
 * each 32-element block's whole int sum, then one fma): the order of the
 * AMX tiles, not vec_dot_n's eight f32 lanes, so exact callers send only
 * prompts here and bd_matmul_fast (the DFlash drafter) its small batches
 * too. vpdpbusd wants unsigned weights: they are unpacked as w + 128, and
 * each activation block carries -128 sum(y) (packed with it), so that
 * sum (w + 128) y - 128 sum(y) = sum w y exactly.
 * ---------------------------------------------------------------------- */

/* Blocks i and i + 1 (if there) of 16 rows: u[b][g] lane r = bytes 4 g ..
 * 4 g + 3 of row r's block i + b, plus 128 (as unsigned bytes). */
typedef struct {
    __m512i u[2][8];
    __m512 d[2];
} rg_q80;

BD_INLINE void rg_unpack_q80(const uint8_t *w, size_t ws, int nw, int64_t i, int two, rg_q80 *u) {
    __m512i in[16], out[16];
    uint16_t dh[2][16] = {{0}};
    for (int r = 0; r < 16; r++) {
        if (r >= nw) {
            in[r] = _mm512_setzero_si512();
            continue;
        }
        const block_q8_0 *b = (const block_q8_0 *)(w + (size_t)r * ws) + i;
        UNROLL for (int l = 0; l < 2; l++) _mm_prefetch((const char *)(b + 2) + 64 * l, _MM_HINT_T0);
        const __m256i lo = _mm256_loadu_si256((const __m256i *)b[0].qs);
        in[r] = _mm512_castsi256_si512(lo);
        memcpy(&dh[0][r], &b[0].d, 2);
        if (two) {
            in[r] = _mm512_inserti64x4(in[r], _mm256_loadu_si256((const __m256i *)b[1].qs), 1);
            memcpy(&dh[1][r], &b[1].d, 2);
        }
    }
    transpose16_epi32(in, out);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    UNROLL for (int j = 0; j < 16; j++) u->u[j / 8][j % 8] = _mm512_xor_si512(out[j], flip);
    u->d[0] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh[0]));
    u->d[1] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh[1]));
}

/* NT (<= 8) activation blocks x[j] against block b of an unpacked pair */
BD_INLINE void rg_block_q80(const rg_q80 *u, int b, const rg_x8 *const *x, __m512 *acc, const int NT) {
    __m512i U[8];
    UNROLL for (int g = 0; g < 8; g++) U[g] = _mm512_load_si512(&u->u[b][g]);
    UNROLL for (int j = 0; j < NT; j++) {
        __m512i a0 = _mm512_dpbusd_epi32(_mm512_set1_epi32(x[j]->corr), U[0], bcast32(x[j]->qs));
        __m512i a1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), U[1], bcast32(x[j]->qs + 4));
        UNROLL for (int g = 2; g < 8; g += 2) {
            a0 = _mm512_dpbusd_epi32(a0, U[g], bcast32(x[j]->qs + 4 * g));
            a1 = _mm512_dpbusd_epi32(a1, U[g + 1], bcast32(x[j]->qs + 4 * g + 4));
        }
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)),
                                 _mm512_mul_ps(_mm512_set1_ps(x[j]->d), u->d[b]), acc[j]);
    }
}

#define RG_R 16     /* rows per group: the lanes of a vector */
#define RG_GROUPS 4 /* groups unpacked per block step: 64 weight rows per chunk of activations */
#define RG_PASS 64  /* activation rows per pass */
#define RG_V __m512
#define RG_VZERO _mm512_setzero_ps
#define RG_VSTORE(p, n, v) _mm512_mask_storeu_ps(p, (__mmask16)((n) >= 16 ? 0xFFFFu : (1u << (n)) - 1), v)
#define RG_NT_Q4 8 /* activation rows per block-kernel call */
#define RG_NT_Q6 8
#define RG_NT_Q8 8
#include "kernels_rows.h"

/* ------------------------------------------------------------------------
 * Row groups on interleaved weights (kernels.h's BD_LAYOUT_IL16): the
 * unpacked form above, read with plain loads. Word D of the 16 rows is the
 * vector at 64 D, so rg_unpack_q4k's transposes are gone and what is left
 * is its masks and shifts; the block kernels are the same ones (same
 * bits as vec_dot_n). A group's blocks are one stream (il_prefetch).
 * ---------------------------------------------------------------------- */

BD_INLINE __m512i il_word(const uint8_t *p, int D) { return _mm512_loadu_si512(p + 64 * D); }

/* Q4_K words: 0 d | dmin, 1-3 the scale bytes, 4 + 16 half + j the codes
 * rg_unpack_q4k's transpose gives as out[j]. */
BD_INLINE void il_unpack_q4k(const uint8_t *p, int sub, rg_q4k *u) {
    (void)sub;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    UNROLL for (int half = 0; half < 2; half++)
        UNROLL for (int j = 0; j < 16; j++) {
            const __m512i v = il_word(p, 4 + 16 * half + j);
            const int c = 2 * half + j / 8, g = j % 8;
            u->u[2 * c][g] = _mm512_and_si512(v, m4);
            u->u[2 * c + 1][g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
    const __m512i q0 = il_word(p, 0), q1 = il_word(p, 1), q2 = il_word(p, 2), q3 = il_word(p, 3);
    const __m512i m6 = _mm512_set1_epi8(0x3F), lo4 = _mm512_set1_epi8(0x0F), hi2 = _mm512_set1_epi8(0x30);
    const __m512i sc_lo = _mm512_and_si512(q1, m6), m_lo = _mm512_and_si512(q2, m6);
    const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(q3, lo4), _mm512_and_si512(_mm512_srli_epi32(q1, 2), hi2));
    const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(q3, 4), lo4),
                                         _mm512_and_si512(_mm512_srli_epi32(q2, 2), hi2));
    const __m512i ff = _mm512_set1_epi32(0xFF);
    UNROLL for (int s = 0; s < 8; s++) {
        const __m512i scs = s < 4 ? sc_lo : sc_hi;
        u->sc[s] = _mm512_and_si512(_mm512_srli_epi32(scs, 8 * (s % 4)), ff);
    }
    q4k_mins2(m_lo, u->mn2);
    q4k_mins2(m_hi, u->mn2 + 2);
    u->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(q0));
    u->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(q0, 16)));
}

/* Q6_K words: 0-31 ql, 32-47 qh, 48-51 the scales, then the 16 rows' d.
 * Word j of quarter h2's codes (rg_unpack_q6k's out[j]) takes ql word
 * 16 h + j and qh word 8 h + j % 8 (shifted right by 2 for j >= 8: the
 * upper half of that 64-byte stretch reads the same qh bytes' next bits). */
BD_INLINE void il_unpack_q6k(const uint8_t *p, int sub, rg_q6k *u) {
    (void)sub;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    UNROLL for (int h2 = 0; h2 < 4; h2++) {
        const int h = h2 / 2, hi = h2 % 2;
        UNROLL for (int j = 0; j < 16; j++) {
            const __m512i ql = il_word(p, 16 * h + j);
            __m512i qh = il_word(p, 32 + 8 * h + j % 8);
            if (j >= 8) qh = _mm512_srli_epi16(qh, 2);
            u->u[4 * h2 + j / 4][j % 4] =
                hi ? _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(qh, m30))
                   : _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
        }
    }
    UNROLL for (int G = 0; G < 16; G++)
        u->sc[G] = _mm512_srai_epi32(_mm512_slli_epi32(il_word(p, 48 + G / 4), 24 - 8 * (G % 4)), 24);
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    UNROLL for (int q = 0; q < 8; q++) {
        const __m512i a = _mm512_slli_epi32(u->sc[2 * q], 5), b = _mm512_slli_epi32(u->sc[2 * q + 1], 5);
        u->scb[q] = _mm512_or_si512(_mm512_and_si512(_mm512_sub_epi32(_mm512_setzero_si512(), a), lo16),
                                    _mm512_slli_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), b), 16));
    }
    u->d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 64 * 52)));
}

/* NT (<= IL_FEW_MAX) activation rows (Q8_K, row j at xq + j xs) against
 * one interleaved group, y[j ldy + r] = row r's dot: the block kernels'
 * sums with the unpacking folded in (nothing goes through memory), each
 * code vector unpacked once for all NT rows. Per row the same integer sums
 * (exact, so their order is free) and the same f32 steps as rg_block_q4k,
 * so the same bits. Registers at NT 4: 4 acc, 4 sumi, 8 chains, 8 masks
 * and scale words, the code vector: 27 of 32. Wider calls spill, yet a
 * 6-row call beats 4 + 2 rows (the unpacking shared by more rows, and a
 * verify's rows in one pass under the weight stream): Zen 4, 2 threads,
 * kbench 9728 x 2560 from memory, ms per 512 MiB, Q4_K at 5 / 6 / 8 rows
 * 29 / 35 / 42 -> 25 / 28 / 35 (8 rows a call), Q6_K at 6 rows 31 -> 28
 * (6 a call); Q6_K at 16 rows 8 a call took 55 against 51 for 4 (its two
 * chains a row spill inside the innermost loop), hence 6 at most. */
#define IL_FEW_MAX 8
#define IL_FEW_MAX_FOR(type) ((type) == BD_TYPE_Q4_K ? 8 : 6)
BD_INLINE void il_few_q4k(int64_t nb, const uint8_t *w, const uint8_t *xq, size_t xs, float *y, int64_t ldy,
                          const int NT) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi8(0x3F), hi2 = _mm512_set1_epi8(0x30),
                  ff = _mm512_set1_epi32(0xFF);
    const size_t ib = 16 * sizeof(block_q4_K);
    __m512 acc[IL_FEW_MAX];
    UNROLL for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *p = w + (size_t)i * ib;
        il_prefetch(p, ib);
        const block_q8_K *x[IL_FEW_MAX];
        UNROLL for (int j = 0; j < NT; j++) x[j] = (const block_q8_K *)(xq + (size_t)j * xs) + i;
        const __m512i q0 = il_word(p, 0), q1 = il_word(p, 1), q2 = il_word(p, 2), q3 = il_word(p, 3);
        const __m512i sc_lo = _mm512_and_si512(q1, m6), m_lo = _mm512_and_si512(q2, m6);
        const __m512i sc_hi =
            _mm512_or_si512(_mm512_and_si512(q3, m4), _mm512_and_si512(_mm512_srli_epi32(q1, 2), hi2));
        const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(q3, 4), m4),
                                             _mm512_and_si512(_mm512_srli_epi32(q2, 2), hi2));
        __m512i sumi[IL_FEW_MAX];
        UNROLL for (int j = 0; j < NT; j++) sumi[j] = _mm512_setzero_si512();
        UNROLL for (int c = 0; c < 4; c++) {
            __m512i alo[IL_FEW_MAX], ahi[IL_FEW_MAX];
            UNROLL for (int j = 0; j < NT; j++) alo[j] = ahi[j] = _mm512_setzero_si512();
            UNROLL for (int g = 0; g < 8; g++) {
                const __m512i v = il_word(p, 4 + 8 * c + g);
                const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                UNROLL for (int j = 0; j < NT; j++) {
                    alo[j] = _mm512_dpbusd_epi32(alo[j], lo, bcast32(x[j]->qs + 64 * c + 4 * g));
                    ahi[j] = _mm512_dpbusd_epi32(ahi[j], hi, bcast32(x[j]->qs + 64 * c + 32 + 4 * g));
                }
            }
            UNROLL for (int h = 0; h < 2; h++) {
                const int s = 2 * c + h;
                const __m512i sc = _mm512_and_si512(_mm512_srli_epi32(s < 4 ? sc_lo : sc_hi, 8 * (s % 4)), ff);
                UNROLL for (int j = 0; j < NT; j++)
                    sumi[j] = _mm512_add_epi32(sumi[j], _mm512_mullo_epi32(h ? ahi[j] : alo[j], sc));
            }
        }
        const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(q0));
        const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(q0, 16)));
        __m512i mn2[4];
        q4k_mins2(m_lo, mn2);
        q4k_mins2(m_hi, mn2 + 2);
        UNROLL for (int j = 0; j < NT; j++) {
            __m512i summ = _mm512_setzero_si512(), b2[4];
            q8k_bsums2(x[j], b2);
            UNROLL for (int q = 0; q < 4; q++) summ = _mm512_dpwssd_epi32(summ, mn2[q], b2[q]);
            const __m512 dx = _mm512_set1_ps(x[j]->d);
            acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(sumi[j]), acc[j]);
            acc[j] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dx), _mm512_cvtepi32_ps(summ), acc[j]);
        }
    }
    UNROLL for (int j = 0; j < NT; j++) _mm512_storeu_ps(y + j * ldy, acc[j]);
}

/* Q6_K: as il_few_q4k, the sums and f32 step of rg_block_q6k. */
BD_INLINE void il_few_q6k(int64_t nb, const uint8_t *w, const uint8_t *xq, size_t xs, float *y, int64_t ldy,
                          const int NT) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m33 = _mm512_set1_epi8(0x33), lo16 = _mm512_set1_epi32(0xFFFF);
    const size_t ib = 16 * sizeof(block_q6_K);
    __m512 acc[IL_FEW_MAX];
    UNROLL for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *p = w + (size_t)i * ib;
        il_prefetch(p, ib);
        const block_q8_K *x[IL_FEW_MAX];
        UNROLL for (int j = 0; j < NT; j++) x[j] = (const block_q8_K *)(xq + (size_t)j * xs) + i;
        __m512i sumi[IL_FEW_MAX];
        UNROLL for (int j = 0; j < NT; j++) sumi[j] = _mm512_setzero_si512();
        /* each ql / qh word read once: its low nibbles are quarter 2 h's
         * codes, its high ones quarter 2 h + 1's (groups G and G + 4) */
        UNROLL for (int h = 0; h < 2; h++)
            UNROLL for (int jq = 0; jq < 4; jq++) {
                const int G = 8 * h + jq;
                __m512i al[IL_FEW_MAX], ah[IL_FEW_MAX];
                UNROLL for (int j = 0; j < NT; j++) al[j] = ah[j] = _mm512_setzero_si512();
                UNROLL for (int k = 0; k < 4; k++) {
                    const int jw = 4 * jq + k;
                    const __m512i ql = il_word(p, 16 * h + jw);
                    __m512i qh = il_word(p, 32 + 8 * h + jw % 8);
                    if (jw >= 8) qh = _mm512_srli_epi16(qh, 2);
                    /* t keeps qh's bits 0-1 and 4-5 of each byte: bits 4-5 are
                     * uh's high bits where they stand, bits 0-1 ul's once
                     * shifted left by 4 (what a byte's shift carries into
                     * its neighbour's bits 0-3 is masked off). Each code
                     * vector is then one select, 0xE4 = m4 ? ql : t: one
                     * instruction less per ql word than gcc made of the
                     * and / or form (236 logic and shift instructions a
                     * block against 268; in L2 on one thread, Intel Xeon,
                     * 2-5 % faster, docs/perf-notes.md) */
                    const __m512i t = _mm512_and_si512(qh, m33);
                    const __m512i ul = _mm512_ternarylogic_epi32(ql, _mm512_slli_epi16(t, 4), m4, 0xE4);
                    const __m512i uh = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), t, m4, 0xE4);
                    UNROLL for (int j = 0; j < NT; j++) {
                        al[j] = _mm512_dpbusd_epi32(al[j], ul, bcast32(x[j]->qs + 16 * G + 4 * k));
                        ah[j] = _mm512_dpbusd_epi32(ah[j], uh, bcast32(x[j]->qs + 16 * (G + 4) + 4 * k));
                    }
                }
                const __m512i sl = _mm512_srai_epi32(_mm512_slli_epi32(il_word(p, 48 + G / 4), 24 - 8 * (G % 4)), 24);
                const __m512i sh =
                    _mm512_srai_epi32(_mm512_slli_epi32(il_word(p, 48 + (G + 4) / 4), 24 - 8 * ((G + 4) % 4)), 24);
                UNROLL for (int j = 0; j < NT; j++)
                    sumi[j] = _mm512_add_epi32(sumi[j], _mm512_add_epi32(_mm512_mullo_epi32(al[j], sl),
                                                                         _mm512_mullo_epi32(ah[j], sh)));
            }
        UNROLL for (int q = 0; q < 8; q++) {
            const __m512i sw = il_word(p, 48 + q / 2);
            const __m512i a = _mm512_slli_epi32(_mm512_srai_epi32(_mm512_slli_epi32(sw, 24 - 8 * (2 * q % 4)), 24), 5);
            const __m512i b =
                _mm512_slli_epi32(_mm512_srai_epi32(_mm512_slli_epi32(sw, 24 - 8 * ((2 * q + 1) % 4)), 24), 5);
            const __m512i scb = _mm512_or_si512(_mm512_and_si512(_mm512_sub_epi32(_mm512_setzero_si512(), a), lo16),
                                                _mm512_slli_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), b), 16));
            UNROLL for (int j = 0; j < NT; j++) sumi[j] = _mm512_dpwssd_epi32(sumi[j], scb, bcast32(x[j]->bsums + 2 * q));
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 64 * 52)));
        UNROLL for (int j = 0; j < NT; j++)
            acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(x[j]->d)), _mm512_cvtepi32_ps(sumi[j]), acc[j]);
    }
    UNROLL for (int j = 0; j < NT; j++) _mm512_storeu_ps(y + j * ldy, acc[j]);
}

/* kernels_il.h's IL_FEW: the NT above as a constant, one copy each. */
#define IL_FEW_CASE(T, N)                                     \
    case N:                                                   \
        il_few_##T(nb, w, xq, xs, y, ldy, N);                 \
        break;
static void il_few(uint32_t type, int64_t nb, const uint8_t *w, const uint8_t *xq, size_t xs, int nt, float *y,
                   int64_t ldy) {
    if (type == BD_TYPE_Q4_K) switch (nt) { IL_FEW_CASE(q4k, 1) IL_FEW_CASE(q4k, 2) IL_FEW_CASE(q4k, 3) IL_FEW_CASE(q4k, 4)
        IL_FEW_CASE(q4k, 5) IL_FEW_CASE(q4k, 6) IL_FEW_CASE(q4k, 7) IL_FEW_CASE(q4k, 8) }
    else switch (nt) { IL_FEW_CASE(q6k, 1) IL_FEW_CASE(q6k, 2) IL_FEW_CASE(q6k, 3) IL_FEW_CASE(q6k, 4)
        IL_FEW_CASE(q6k, 5) IL_FEW_CASE(q6k, 6) }
}
#define IL_FEW il_few

/* Q8_0 on interleaved weights (kernels.h: a pair of blocks' 16 code
 * words, then their 32 scales; the DFlash drafter's matrices): the sums
 * and f32 step of rg_block_q80 (the tile order), each code word loaded
 * and flipped (+ 128) once for all NT activation rows, whose accumulators
 * stay in registers for the whole row of blocks. Registers at NT 16: 16
 * accumulators, 8 words, 2 chains, the scales: 27 of 32. */
#define IL8_MAX 16
#define IL8_PAIR (2 * 16 * sizeof(block_q8_0))
BD_INLINE void il8_few(int64_t nb, const uint8_t *w, const rg_x8 *x, float *y, int64_t ldy, const int NT) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[IL8_MAX];
    UNROLL for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *pair = w + (size_t)(i / 2) * IL8_PAIR, *p = pair + 512 * (size_t)(i % 2);
        il_prefetch(p, 512 + 32 * (size_t)(i % 2));
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pair + 1024 + 32 * (i % 2))));
        __m512i U[8];
        UNROLL for (int g = 0; g < 8; g++) U[g] = _mm512_xor_si512(il_word(p, g), flip);
        const rg_x8 *xb = x + 16 * i;
        UNROLL for (int j = 0; j < NT; j++) {
            __m512i a0 = _mm512_dpbusd_epi32(_mm512_set1_epi32(xb[j].corr), U[0], bcast32(xb[j].qs));
            __m512i a1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), U[1], bcast32(xb[j].qs + 4));
            UNROLL for (int g = 2; g < 8; g += 2) {
                a0 = _mm512_dpbusd_epi32(a0, U[g], bcast32(xb[j].qs + 4 * g));
                a1 = _mm512_dpbusd_epi32(a1, U[g + 1], bcast32(xb[j].qs + 4 * g + 4));
            }
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)),
                                     _mm512_mul_ps(_mm512_set1_ps(xb[j].d), d), acc[j]);
        }
    }
    UNROLL for (int j = 0; j < NT; j++) _mm512_storeu_ps(y + j * ldy, acc[j]);
}

#define IL8_CASE(N)                             \
    case N:                                     \
        il8_few(nb, w, x, y, ldy, N);           \
        break;
static void il8_rows(int64_t nb, const uint8_t *w, const rg_x8 *x, int nt, float *y, int64_t ldy) {
    switch (nt) {
        IL8_CASE(1) IL8_CASE(2) IL8_CASE(3) IL8_CASE(4) IL8_CASE(5) IL8_CASE(6) IL8_CASE(7) IL8_CASE(8)
        IL8_CASE(9) IL8_CASE(10) IL8_CASE(11) IL8_CASE(12) IL8_CASE(13) IL8_CASE(14) IL8_CASE(15) IL8_CASE(16)
    }
}
/* Batches up to this many rows take il_few, larger ones il_groups (Zen 4,
 * 2 threads, 9728 x 2560 from memory, kbench, ms per 512 MiB, il_few
 * against il_groups: Q4_K at 9 / 16 / 32 / 64 rows 36 / 52 / 102 / 195
 * against 49 / 75 / 128 / 230, Q6_K 35 / 50 / 98 / 193 against 43 / 60 /
 * 107 / 186; at 128 and 512 rows within 5 % either way. At 1 / 2 / 4 / 8
 * rows il_few Q4_K 18 / 19 / 21 / 31 where the file layout's few-row dots
 * take 19 / 22 / 40 / 61.) */
#define IL_FEW_ROWS 64
#include "kernels_il.h"

/* bd_tile_ops.il_rows: kernels_il.h's, but one activation row against
 * Q4_K / Q6_K goes where kernels.h's bd_il_one_row says (on Zen 4 the avx2
 * level's 256-bit loops, which stream faster there; same bits) */
static void il_rows_one(uint32_t type, int64_t ncols, const void *w, size_t ws, int nw, const void *xq, size_t xs,
                        const void *pack, int64_t n_tok, float *y, int64_t ldy) {
    const bd_il_rows_fn one = bd_il_one_row;
    if (n_tok == 1 && type != BD_TYPE_Q8_0 && one) one(type, ncols, w, ws, nw, xq, xs, pack, n_tok, y, ldy);
    else il_rows(type, ncols, w, ws, nw, xq, xs, pack, n_tok, y, ldy);
}

/* Q4_K / Q6_K: the bits of vec_dot_n, so exact callers may send any batch;
 * from these sizes on the row groups measured faster than vec_dot_n.
 * Below 9 rows vec_dot_n's few-row dots (kernels_simd.h) read each weight
 * row once for all rows (tools/kbench, Zen 5, 2 threads, weights streamed
 * from memory, ms per 512 MiB, few-row dot against row groups: Q4_K
 * 9728x2560 at 2 / 4 / 5 / 6 / 8 rows 18 / 25 / 28 / 33 / 41 against 31 /
 * 36 / 40 / 42 / 49; one row 16-18); Q6_K's row groups (its unpacking
 * costs more) pay from 12 rows (one Zen 5 core, 2560-column rows in
 * cache), its 9-11 rows go to the multi-row dot. Q8_0: the tile order
 * (see rg8_pack). */
static const bd_tile_ops k_rg_ops = {
    .supports = rg_supports,
    .pack_bytes = rg_pack_bytes,
    .pack = rg_pack,
    .rows = rg_rows,
    .exact_rows = {[BD_TYPE_Q4_K] = 9, [BD_TYPE_Q6_K] = 12},
    /* no exact Q8_0: its row-group order differs from the one-row dot (see matmul.c) */
    .fast_rows = {[BD_TYPE_Q4_K] = 9, [BD_TYPE_Q6_K] = 12, [BD_TYPE_Q8_0] = 2},
    .il_rows = il_rows_one,
    .il_default = true,
};

/* ------------------------------------------------------------------------
 * Table
 * ---------------------------------------------------------------------- */

void bd_kernels_fill_avx512(bd_kernels *k) {
    BD_SIMD_FILL_COMMON(k);
    k->vec_dot_n[BD_TYPE_BF16] = bd_cpu_has(bd_cpu_get(), BD_CPU_AVX512BF16) ? dot_n_bf16dp : dot_n_bf16;
}
