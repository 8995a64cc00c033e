/*
 * kernels_avx2.c - AVX2 + FMA + F16C kernels (compiled with those flags;
 * kernels_avxvnni.c compiles it again with AVX-VNNI added).
 *
 * The level for x86 CPUs without AVX-512 VNNI. Same structure as the
 * AVX-512 file, but with only 16 vector registers: each weight block is
 * unpacked once into small aligned stack arrays (L1-resident), and up to 4
 * activation rows are dotted against it with their accumulators in
 * registers. Integer parts are exact, as in the scalar twins. What this
 * file shares with the AVX-512 and AMX ones is in kernels_simd.h.
 *
 * Signed x signed int8 products use the classic AVX2 form:
 * maddubs(|w|, sign(y, w)) then madd with ones. It is exact unless an
 * activation byte is -128 where w < 0; the Q8_0/Q8_K quantizers never
 * produce -128, so activations made by from_float are always safe. (The
 * Q8_0 row groups, a DFlash drafter's batches, take int16 products
 * instead: exact for any bytes, and fewer multiplier-port instructions.)
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels_simd.h"

/* acc + madd(a, b): int16 pairs multiplied and added into int32 lanes. With
 * AVX-VNNI one vpdpwssd (non-saturating, wrapping like the add): the same
 * bits in one instruction instead of two. kbench, Zen 5, one thread, Q6_K
 * 1024 x 2560 in L2, 16 rows (the verify head's shape), three copies of each
 * binary after dropping the page cache (perf-notes: copies), best 233 ->
 * 248 GOPS, mostly the Q6_K pair kernel's block sums. */
#if defined(__AVXVNNI__)
#define madd_acc(acc, a, b) _mm256_dpwssd_avx_epi32((acc), (a), (b))
#else
#define madd_acc(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#endif

/* ------------------------------------------------------------------------
 * Activation quantizers (bit-identical to quant_ref.c)
 * ---------------------------------------------------------------------- */

/* 32 int32 (four vectors, values in -127..127) -> 32 int8 in order. */
BD_INLINE __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

BD_INLINE float absmax32(const float *x) {
    const __m256 mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_and_ps(_mm256_loadu_ps(x), mask);
    for (int j = 8; j < 32; j += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + j), mask));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One 32-element block: qs (round half to even of x * 127 / amax), the
 * block scale d = amax / 127; returns the sum of the codes. */
BD_INLINE int quant_block32(const float *x, int8_t *qs, float *d) {
    const float amax = absmax32(x);
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    const __m256 v = _mm256_set1_ps(id);
    __m256i q[4];
    for (int j = 0; j < 4; j++) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), v));
    _mm256_storeu_si256((__m256i *)qs, pack32(q[0], q[1], q[2], q[3]));
    *d = amax / 127.0f;
    return hsum8i(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
}

static void from_float_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d;
        quant_block32(x, y[i].qs, &d);
        y[i].d = bd_f32_to_f16(d);
    }
}

static void from_float_q8_1(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float d;
        const int sum = quant_block32(x, y[i].qs, &d);
        y[i].d = bd_f32_to_f16(d);
        y[i].s = bd_f32_to_f16(d * (float)sum);
    }
}

static void from_float_q8_K(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 mx = _mm256_loadu_ps(x), mn = mx;
        for (int j = 8; j < QK_K; j += 8) {
            __m256 v = _mm256_loadu_ps(x + j);
            mx = _mm256_max_ps(mx, v);
            mn = _mm256_min_ps(mn, v);
        }
        float hi, lo;
        {
            __m128 a = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
            a = _mm_max_ps(a, _mm_movehl_ps(a, a));
            hi = _mm_cvtss_f32(_mm_max_ss(a, _mm_movehdup_ps(a)));
            __m128 b = _mm_min_ps(_mm256_castps256_ps128(mn), _mm256_extractf128_ps(mn, 1));
            b = _mm_min_ps(b, _mm_movehl_ps(b, b));
            lo = _mm_cvtss_f32(_mm_min_ss(b, _mm_movehdup_ps(b)));
        }
        const float max = q8k_extreme(x, hi, lo);
        if (max == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -127.0f / max;
        __m256 vs = _mm256_set1_ps(iscale);
        const __m256i c127 = _mm256_set1_epi32(127);
        for (int j = 0; j < QK_K; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++)
                q[k] = _mm256_min_epi32(
                    _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vs)), c127);
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), pack32(q[0], q[1], q[2], q[3]));
            y[i].bsums[j / 16] = (int16_t)hsum8i(_mm256_add_epi32(q[0], q[1]));
            y[i].bsums[j / 16 + 1] = (int16_t)hsum8i(_mm256_add_epi32(q[2], q[3]));
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ------------------------------------------------------------------------
 * K-quants x Q8_K. Per block: wq[256] unsigned codes in element order,
 * sc[s] the int16 scale of each 32-element chunk replicated over 16 lanes
 * (so vpmaddwd applies it to the vpmaddubsw pair sums).
 * ---------------------------------------------------------------------- */

/* Q4_K (nbits 4) and Q5_K (nbits 5) share this kernel's integer part. The
 * f32 steps: Q5_K exactly those of dot_ref.c's q5k_dot (llama.cpp's order:
 * lane l of the int32 vector s is that comment's "lane l", acc gets
 * fma(d, lane), the mins go to summ); Q4_K those of q4k_dot (the tile
 * order: s and the mins reduced to one integer each per block, then two
 * scalar fmas into acc1). */
BD_INLINE void kq45_kernel(int64_t n, const void *vw, const void *x, size_t xs, float *out,
                           const int NX, const int q5) {
    _Alignas(32) uint8_t wq[QK_K];
    _Alignas(32) int16_t sc16[8][16];
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[16];
    float summ[16], acc1[16];
    UNROLL for (int r = 0; r < NX; r++) {
        acc[r] = _mm256_setzero_ps();
        summ[r] = acc1[r] = 0.0f;
    }
    const size_t bbytes = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)vw + (size_t)i * bbytes;
        /* software prefetch ~1 KiB ahead (measurably helps the memory-bound
         * single-row case on the loaded Zen 4 VM; never faults) */
        UNROLL for (int l = 0; l < 3; l++) _mm_prefetch((const char *)blk + 1024 + 64 * l, _MM_HINT_T0);
        bd_f16 dh, dmh;
        memcpy(&dh, blk, 2);
        memcpy(&dmh, blk + 2, 2);
        const uint8_t *scales = blk + 4;
        const uint8_t *qh = blk + 16;
        const uint8_t *qs = q5 ? blk + 48 : blk + 16;
        __m256i hb = q5 ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
        UNROLL for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (q5) {
                const __m256i one = _mm256_set1_epi8(1);
                __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * c), one);
                __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * c + 1), one);
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(b0, 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(b1, 4));
            }
            _mm256_store_si256((__m256i *)(wq + 64 * c), lo);
            _mm256_store_si256((__m256i *)(wq + 64 * c + 32), hi);
        }
        uint64_t sc8, m8;
        kq_unpack_scales(scales, &sc8, &m8);
        for (int s = 0; s < 8; s++) _mm256_store_si256((__m256i *)sc16[s], _mm256_set1_epi16((short)((sc8 >> (8 * s)) & 0xFF)));
        /* lane k of the bsums vector (group k) belongs to sub-block k/2 */
        const __m128i mn = _mm_cvtsi64_si128((long long)m8);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn, mn));
        const float d = f16f(dh), dmin = f16f(dmh);
        UNROLL for (int r = 0; r < NX; r++) {
            const block_q8_K *y = (const block_q8_K *)row_at(x, xs, r) + i;
            __m256i s = _mm256_setzero_si256();
            UNROLL for (int k = 0; k < 8; k++) {
                __m256i p = _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(wq + 32 * k)),
                                                 _mm256_loadu_si256((const __m256i *)(y->qs + 32 * k)));
                s = madd_acc(s, p, _mm256_load_si256((const __m256i *)sc16[k]));
            }
            /* mi lane s = m_s * (bsums 2s + 2s+1) */
            const int mi = hsum8i(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mins));
            if (q5) {
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * d), _mm256_cvtepi32_ps(s), acc[r]);
                summ[r] = fmaf(-y->d * dmin, (float)mi, summ[r]);
            } else {
                acc1[r] = fmaf(y->d * d, (float)hsum8i(s), acc1[r]);
                acc1[r] = fmaf(-(y->d * dmin), (float)mi, acc1[r]);
            }
        }
    }
    UNROLL for (int r = 0; r < NX; r++) out[r] = q5 ? hsum8(acc[r]) + summ[r] : acc1[r];
}

/* ------------------------------------------------------------------------
 * One activation row (decode), Q4_K and Q6_K: everything in registers.
 * Per block, the 32-element products come as dot4_u8s8 int32 lanes (four
 * products each; vpdpbusd where the file is built with AVX-VNNI), are
 * packed in pairs to int16 and scaled with vpmaddwd by a vector of the
 * lanes' sub-block scales (picked from the broadcast scale bytes with
 * vpshufb). Two blocks share one horizontal-add tree for their integers;
 * the f32 steps are the tile order's (dot_ref.c), block by block.
 * ---------------------------------------------------------------------- */

#define ONE_ROW_AHEAD 2048 /* software prefetch distance, bytes */

#define S_(s) s, (char)0x80 /* vpshufb: byte s, then a zero high byte */
/* Q4_K: packs_epi32(d[2c], d[2c+1]) has, per 128-bit lane, 4 int16 of
 * sub-block 2c then 4 of 2c + 1; k_q4_pairsel[c] picks those scales. */
static const char k_q4_pairsel[4][32] __attribute__((aligned(32))) = {
    {S_(0), S_(0), S_(0), S_(0), S_(1), S_(1), S_(1), S_(1), S_(0), S_(0), S_(0), S_(0), S_(1), S_(1), S_(1), S_(1)},
    {S_(2), S_(2), S_(2), S_(2), S_(3), S_(3), S_(3), S_(3), S_(2), S_(2), S_(2), S_(2), S_(3), S_(3), S_(3), S_(3)},
    {S_(4), S_(4), S_(4), S_(4), S_(5), S_(5), S_(5), S_(5), S_(4), S_(4), S_(4), S_(4), S_(5), S_(5), S_(5), S_(5)},
    {S_(6), S_(6), S_(6), S_(6), S_(7), S_(7), S_(7), S_(7), S_(6), S_(6), S_(6), S_(6), S_(7), S_(7), S_(7), S_(7)}};
/* int16 lane k: the min of sub-block k/2 (the bsums lanes' sub-blocks) */
static const char k_q4_minsel[32] __attribute__((aligned(32))) = {S_(0), S_(0), S_(1), S_(1), S_(2), S_(2), S_(3), S_(3),
                                                                   S_(4), S_(4), S_(5), S_(5), S_(6), S_(6), S_(7), S_(7)};
#undef S_

/* One Q4_K block unpacked for any number of rows: the codes of each chunk
 * (low and high nibbles), the chunks' pair scales, the mins. */
typedef struct {
    __m256i lo[4], hi[4], sc[4], mn;
} q4k_unit;

BD_INLINE void q4k_unpack(const block_q4_K *w, q4k_unit *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    uint64_t sc8, m8;
    kq_unpack_scales(w->scales, &sc8, &m8);
    const __m256i scb = _mm256_set1_epi64x((long long)sc8);
    UNROLL for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * c));
        u->lo[c] = _mm256_and_si256(q, m4);
        u->hi[c] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        u->sc[c] = _mm256_shuffle_epi8(scb, _mm256_load_si256((const __m256i *)k_q4_pairsel[c]));
    }
    u->mn = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)m8), _mm256_load_si256((const __m256i *)k_q4_minsel));
}

/* Q4_K block sums of one row: lanes 0-3 add up to sumi, 4-7 to summ. */
BD_INLINE __m256i q4k_row_z(const q4k_unit *u, const block_q8_K *y) {
    __m256i si = _mm256_setzero_si256();
    UNROLL for (int c = 0; c < 4; c++) {
        const __m256i d0 = dot4_u8s8(u->lo[c], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c)));
        const __m256i d1 = dot4_u8s8(u->hi[c], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c + 32)));
        si = madd_acc(si, _mm256_packs_epi32(d0, d1), u->sc[c]);
    }
    const __m256i sm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), u->mn);
    return _mm256_add_epi32(_mm256_permute2x128_si256(si, sm, 0x20), _mm256_permute2x128_si256(si, sm, 0x31));
}

BD_INLINE __m256i q4k_block_z(const block_q4_K *w, const block_q8_K *y) {
    q4k_unit u;
    q4k_unpack(w, &u);
    return q4k_row_z(&u, y);
}

BD_Q4K_ONE_ROW(q4k_one_row, ONE_ROW_AHEAD)
BD_KQ_FEW_ROWS(q4k_few_rows, q4k, block_q4_K, 5, ONE_ROW_AHEAD)

/* Q6_K codes of elements 32k .. 32k + 31 (k = 4h + j) of a block */
BD_INLINE void q6k_codes(const block_q6_K *w, __m256i q[8]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    UNROLL for (int h = 0; h < 2; h++) {
        const __m256i qa = _mm256_loadu_si256((const __m256i *)(w->ql + 64 * h));
        const __m256i qb = _mm256_loadu_si256((const __m256i *)(w->ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(w->qh + 32 * h));
        q[4 * h] = _mm256_or_si256(_mm256_and_si256(qa, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
        q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(qb, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
        q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4), _mm256_and_si256(qh, m30));
        q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    }
}

/* Q6_K: packs_epi32(d[2j], d[2j+1]) has, per 128-bit lane, 4 int16 of group
 * 4j (low lane) / 4j + 1 (high lane), then 4 of 4j + 2 / 4j + 3;
 * k_q6_pairsel picks those scales from the int16 scales of groups 8p ..
 * 8p + 7 broadcast to both lanes (p = j / 2). */
#define P_(a, b) 2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1, \
                 2 * (b), 2 * (b) + 1, 2 * (b), 2 * (b) + 1, 2 * (b), 2 * (b) + 1, 2 * (b), 2 * (b) + 1
static const char k_q6_pairsel[2][32] __attribute__((aligned(32))) = {{P_(0, 2), P_(1, 3)}, {P_(4, 6), P_(5, 7)}};
#undef P_

/* One Q6_K block unpacked for any number of rows: its codes, the pair
 * scales of each chunk pair, and -32 sc_g (the codes' offset). */
typedef struct {
    __m256i q[8], sc[4], off;
} q6k_unit;

BD_INLINE void q6k_unpack(const block_q6_K *w, q6k_unit *u) {
    q6k_codes(w, u->q);
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    u->off = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s16, 5));
    UNROLL for (int p = 0; p < 2; p++) {
        /* groups 8p .. 8p + 7 (immediates spelled out: -O1 builds do not fold p) */
        const __m256i sp = p ? _mm256_permute2x128_si256(s16, s16, 0x11) : _mm256_permute2x128_si256(s16, s16, 0x00);
        UNROLL for (int jj = 0; jj < 2; jj++)
            u->sc[2 * p + jj] = _mm256_shuffle_epi8(sp, _mm256_load_si256((const __m256i *)k_q6_pairsel[jj]));
    }
}

/* One Q6_K block's sumi for one row, in 8 lanes. */
BD_INLINE __m256i q6k_row_z(const q6k_unit *u, const block_q8_K *y) {
    __m256i s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), u->off);
    UNROLL for (int j = 0; j < 4; j++) { /* chunks 2j, 2j + 1 */
        const __m256i d0 = dot4_u8s8(u->q[2 * j], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * j)));
        const __m256i d1 = dot4_u8s8(u->q[2 * j + 1], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * j + 32)));
        s = madd_acc(s, _mm256_packs_epi32(d0, d1), u->sc[j]);
    }
    return s;
}

BD_INLINE __m256i q6k_block_z(const block_q6_K *w, const block_q8_K *y) {
    q6k_unit u;
    q6k_unpack(w, &u);
    return q6k_row_z(&u, y);
}

static float q6k_one_row(int64_t n, const block_q6_K *w, const block_q8_K *y) {
    const int64_t nb = n / QK_K;
    float acc = 0.0f;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        UNROLL for (int l = 0; l < 7; l++) _mm_prefetch((const char *)(w + i) + ONE_ROW_AHEAD + 64 * l, _MM_HINT_T0);
        __m256i h = _mm256_hadd_epi32(q6k_block_z(w + i, y + i), q6k_block_z(w + i + 1, y + i + 1));
        h = _mm256_hadd_epi32(h, h); /* per 128-bit lane: block i's, block i + 1's partial sums */
        const __m128i v = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        const __m128 f = _mm_cvtepi32_ps(v);
        acc = fmaf(y[i].d * f16f(w[i].d), _mm_cvtss_f32(f), acc);
        acc = fmaf(y[i + 1].d * f16f(w[i + 1].d), _mm_cvtss_f32(_mm_movehdup_ps(f)), acc);
    }
    if (i < nb) acc = fmaf(y[i].d * f16f(w[i].d), (float)hsum8i(q6k_block_z(w + i, y + i)), acc);
    return acc;
}

BD_KQ_FEW_ROWS(q6k_few_rows, q6k, block_q6_K, 7, ONE_ROW_AHEAD)

BD_INLINE void q4k_kernel(int64_t n, const void *w, const void *x, size_t xs, float *out, const int NX) {
    if (NX == 1) out[0] = q4k_one_row(n, w, x);
    else if (NX <= 8) q4k_few_rows(n, w, x, xs, out, NX);
    else kq45_kernel(n, w, x, xs, out, NX, 0);
}
BD_INLINE void q5k_kernel(int64_t n, const void *w, const void *x, size_t xs, float *out, const int NX) {
    kq45_kernel(n, w, x, xs, out, NX, 1);
}
BD_DOT_N(dot_n_q4_K, q4k_kernel, 16)
BD_DOT_N(dot_n_q5_K, q5k_kernel, 4)

/* Q6_K: codes 0..63 in element order; the -32 offset goes through bsums.
 * f32 steps: dot_ref.c's q6k_dot (tile order, one scalar fma per block). */
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
    _Alignas(32) uint8_t wq[QK_K];
    _Alignas(32) int16_t sc16[8][16];
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    float acc[16];
    UNROLL for (int r = 0; r < NX; r++) acc[r] = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        UNROLL for (int l = 0; l < 4; l++)
            _mm_prefetch((const char *)(w + i) + 1024 + 64 * l, _MM_HINT_T0);
        UNROLL for (int h = 0; h < 2; h++) {
            __m256i qa = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h));
            __m256i qb = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h));
            uint8_t *o = wq + 128 * h;
            _mm256_store_si256((__m256i *)o, _mm256_or_si256(_mm256_and_si256(qa, m4),
                                                             _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)));
            _mm256_store_si256((__m256i *)(o + 32), _mm256_or_si256(_mm256_and_si256(qb, m4),
                                                                    _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)));
            _mm256_store_si256((__m256i *)(o + 64),
                               _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4),
                                               _mm256_and_si256(qh, m30)));
            _mm256_store_si256((__m256i *)(o + 96),
                               _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)));
        }
        /* chunk k of 32 elements: pair lanes 0-7 are group 2k, 8-15 group 2k+1 */
        for (int k = 0; k < 8; k++) {
            __m128i a = _mm_set1_epi16(w[i].scales[2 * k]), b = _mm_set1_epi16(w[i].scales[2 * k + 1]);
            _mm256_store_si256((__m256i *)sc16[k], _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
        }
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const __m256i scb = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s16, 5));
        const float d = f16f(w[i].d);
        UNROLL for (int r = 0; r < NX; r++) {
            const block_q8_K *y = (const block_q8_K *)row_at(x, xs, r) + i;
            __m256i s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), scb);
            UNROLL for (int k = 0; k < 8; k++) {
                __m256i p = _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(wq + 32 * k)),
                                                 _mm256_loadu_si256((const __m256i *)(y->qs + 32 * k)));
                s = madd_acc(s, p, _mm256_load_si256((const __m256i *)sc16[k]));
            }
            acc[r] = fmaf(y->d * d, (float)hsum8i(s), acc[r]);
        }
    }
    UNROLL for (int r = 0; r < NX; r++) out[r] = acc[r];
}
BD_DOT_N(dot_n_q6_K, q6k_kernel, 16)

/* ------------------------------------------------------------------------
 * Q8_0 family x Q8_0 (Q8_0, Q4_0, Q5_0, IQ4_NL): signed weight bytes.
 * ---------------------------------------------------------------------- */

#define Q80_FAMILY_KERNEL(NAME, UNPACK)                                                         \
    BD_INLINE void NAME(int64_t n, const void *w, const void *x, size_t xs, float *out,         \
                        const int NX) {                                                         \
        const __m256i ones = _mm256_set1_epi16(1);                                              \
        __m256 acc[4];                                                                          \
        UNROLL for (int r = 0; r < NX; r++) acc[r] = _mm256_setzero_ps();                       \
        for (int64_t i = 0; i < n / QK8_0; i++) {                                               \
            float dw;                                                                           \
            _mm_prefetch((const char *)w + (size_t)i * BD_BLOCK_BYTES(UNPACK) + 1024, _MM_HINT_T0); \
            __m256i W = UNPACK(w, i, &dw);                                                      \
            __m256i aw = _mm256_sign_epi8(W, W);                                                \
            UNROLL for (int r = 0; r < NX; r++) {                                               \
                const block_q8_0 *y = (const block_q8_0 *)row_at(x, xs, r) + i;                 \
                __m256i sy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y->qs), W);   \
                __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sy), ones);              \
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * f16f(y->d)), \
                                         acc[r]);                                               \
            }                                                                                   \
        }                                                                                       \
        UNROLL for (int r = 0; r < NX; r++) out[r] = hsum8(acc[r]);                             \
    }

Q80_FAMILY_KERNEL(q8_0_kernel, unpack_q8_0)
Q80_FAMILY_KERNEL(q4_0_kernel, unpack_q4_0)
Q80_FAMILY_KERNEL(q5_0_kernel, unpack_q5_0)
Q80_FAMILY_KERNEL(iq4_nl_kernel, unpack_iq4_nl)
BD_DOT_N(dot_n_q8_0, q8_0_kernel, 4)
BD_DOT_N(dot_n_q4_0, q4_0_kernel, 4)
BD_DOT_N(dot_n_q5_0, q5_0_kernel, 4)
BD_DOT_N(dot_n_iq4_nl, iq4_nl_kernel, 4)

/* ------------------------------------------------------------------------
 * Q4_1 / Q5_1 x Q8_1: unsigned codes; block = (dw dx) isum + mw sx.
 * ---------------------------------------------------------------------- */

BD_Q81_KERNEL(q4_1_kernel, unpack_q4_1, 4)
BD_Q81_KERNEL(q5_1_kernel, unpack_q5_1, 4)
BD_DOT_N(dot_n_q4_1, q4_1_kernel, 4)
BD_DOT_N(dot_n_q5_1, q5_1_kernel, 4)

/* ------------------------------------------------------------------------
 * IQ4_XS x Q8_K: signed table values; per 32-element sub-block the pair
 * sums of maddubs(|w|, sign(y, w)) (|.| <= 2*127*127) are scaled by
 * (ls - 32) with vpmaddwd.
 * ---------------------------------------------------------------------- */

BD_INLINE void iq4xs_kernel(int64_t n, const void *vw, const void *x, size_t xs, float *out,
                            const int NX) {
    const block_iq4_xs *w = vw;
    _Alignas(32) int8_t wv[QK_K];
    _Alignas(32) int16_t sc16[8][16];
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)bd_kvalues_iq4nl));
    __m256 acc[4];
    UNROLL for (int r = 0; r < NX; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int ib = 0; ib < 8; ib++) {
            _mm256_store_si256((__m256i *)(wv + 32 * ib),
                               _mm256_shuffle_epi8(tab, nibbles32(w[i].qs + 16 * ib)));
            int ls = ((w[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                     (((w[i].scales_h >> (2 * ib)) & 3) << 4);
            _mm256_store_si256((__m256i *)sc16[ib], _mm256_set1_epi16((short)(ls - 32)));
        }
        const float d = f16f(w[i].d);
        UNROLL for (int r = 0; r < NX; r++) {
            const block_q8_K *y = (const block_q8_K *)row_at(x, xs, r) + i;
            __m256i s = _mm256_setzero_si256();
            UNROLL for (int k = 0; k < 8; k++) {
                __m256i W = _mm256_load_si256((const __m256i *)(wv + 32 * k));
                __m256i sy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(y->qs + 32 * k)), W);
                __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(W, W), sy);
                s = madd_acc(s, p, _mm256_load_si256((const __m256i *)sc16[k]));
            }
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(y->d * d), acc[r]);
        }
    }
    UNROLL for (int r = 0; r < NX; r++) out[r] = hsum8(acc[r]);
}
BD_DOT_N(dot_n_iq4_xs, iq4xs_kernel, 4)

/* Q2_K / Q3_K: kernels_simd.h's k23_kernel */
BD_DOT_N(dot_n_q2_K, q2k_kernel, 4)
BD_DOT_N(dot_n_q3_K, q3k_kernel, 4)

/* ------------------------------------------------------------------------
 * F32 / F16 / BF16 (kernels_simd.h's BD_FLOAT_KERNEL): 8 lanes, reduced as
 * (a0 + a2) + (a1 + a3), then 128-bit halves and two horizontal adds, as
 * llama.cpp's AVX2 build; two rows at most (four accumulators each).
 * ---------------------------------------------------------------------- */

BD_INLINE __m256 ld_f32(const void *p, int64_t j) { return _mm256_loadu_ps((const float *)p + j); }
BD_INLINE __m256 ld_f16(const void *p, int64_t j) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const bd_f16 *)p + j)));
}
BD_INLINE __m256 ld_bf16(const void *p, int64_t j) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const bd_bf16 *)p + j)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* (a0 + a2) + (a1 + a3), then the 128-bit halves, then two horizontal adds */
BD_INLINE float reduce4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 a = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

/* two rows at most: four accumulators per row in 16 registers */
BD_FLOAT_KERNEL(f32_kernel, __m256, 8, _mm256_setzero_ps, _mm256_fmadd_ps, reduce4x8, ld_f32, sc_f32, 4, float, 2)
BD_FLOAT_KERNEL(f16_kernel, __m256, 8, _mm256_setzero_ps, _mm256_fmadd_ps, reduce4x8, ld_f16, sc_f16, 2, double, 2)
BD_FLOAT_KERNEL(bf16_kernel, __m256, 8, _mm256_setzero_ps, _mm256_fmadd_ps, reduce4x8, ld_bf16, sc_bf16, 2, double, 2)
BD_DOT_N(dot_n_f32, f32_kernel, 2)
BD_DOT_N(dot_n_f16, f16_kernel, 2)
BD_DOT_N(dot_n_bf16, bf16_kernel, 2)

/* ------------------------------------------------------------------------
 * Attention (f32): the canonical order of attn_ref.c. The 16 lanes live in
 * two ymm registers (lanes 0-7, 8-15): 8-element chunk c of a dot goes to
 * the first if c is even. Tails are masked so absent elements leave the
 * lanes untouched, as the scalar loops skip them.
 * ---------------------------------------------------------------------- */

BD_INLINE float tree16x2(__m256 lo, __m256 hi) {
    __m256 a = _mm256_add_ps(lo, hi);
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

/* all-ones in the first n (0..8) int32 lanes */
BD_INLINE __m256i mask8(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* bd_expf_poly on 8 lanes */
BD_INLINE __m256 exp8(__m256 x) {
    const __m256 ok = _mm256_cmp_ps(x, _mm256_set1_ps(BD_EXP_LO), _CMP_GE_OQ);
    x = _mm256_min_ps(x, _mm256_set1_ps(BD_EXP_HI));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(BD_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-BD_EXP_LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-BD_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(BD_EXP_C7);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(BD_EXP_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(BD_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(BD_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(BD_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(BD_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(ok, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* fma of one 8-element chunk (n8 valid elements) into the lane half it
 * belongs to; masked lanes keep their value */
BD_INLINE __m256 fma_chunk(const float *a, const float *b, int n8, __m256 acc) {
    if (n8 == 8) return _mm256_fmadd_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b), acc);
    __m256i m = mask8(n8);
    __m256 r = _mm256_fmadd_ps(_mm256_maskload_ps(a, m), _mm256_maskload_ps(b, m), acc);
    return _mm256_blendv_ps(acc, r, _mm256_castsi256_ps(m));
}

static float attn_scores(int32_t hd, const float *q, const float *k, int64_t ks, int32_t len,
                         float scale, float *out) {
    float mx = -INFINITY;
    for (int32_t j = 0; j < len; j++) {
        const float *kr = k + (int64_t)j * ks;
        __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
        int32_t i = 0;
        for (; i + 16 <= hd; i += 16) {
            lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kr + i), lo);
            hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(kr + i + 8), hi);
        }
        if (i < hd) {
            int n = hd - i;
            lo = fma_chunk(q + i, kr + i, n < 8 ? n : 8, lo);
            if (n > 8) hi = fma_chunk(q + i + 8, kr + i + 8, n - 8, hi);
        }
        out[j] = tree16x2(lo, hi) * scale;
        if (out[j] > mx) mx = out[j];
    }
    return mx;
}

static float attn_softmax(int32_t len, float *x, float mx) {
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int32_t j = 0;
    for (; j + 8 <= len; j += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx));
        _mm256_storeu_ps(x + j, e);
        acc[(j >> 3) & 1] = _mm256_add_ps(acc[(j >> 3) & 1], e);
    }
    if (j < len) {
        __m256i m = mask8(len - j);
        __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + j, m), vmx));
        _mm256_maskstore_ps(x + j, m, e);
        int h = (j >> 3) & 1;
        acc[h] = _mm256_blendv_ps(acc[h], _mm256_add_ps(acc[h], e), _mm256_castsi256_ps(m));
    }
    return tree16x2(acc[0], acc[1]);
}

/* NC chunks of 8 outputs held in registers across the whole key loop. */
BD_INLINE void accum_kernel(const float *p, const float *v, int64_t vs, int32_t len, float *out,
                            const int NC) {
    __m256 o[8];
    UNROLL for (int c = 0; c < NC; c++) o[c] = _mm256_loadu_ps(out + 8 * c);
    for (int32_t j = 0; j < len; j++) {
        const __m256 pj = _mm256_set1_ps(p[j]);
        const float *vr = v + (int64_t)j * vs;
        UNROLL for (int c = 0; c < NC; c++) o[c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 8 * c), o[c]);
    }
    UNROLL for (int c = 0; c < NC; c++) _mm256_storeu_ps(out + 8 * c, o[c]);
}

static void attn_accum(int32_t hd, const float *p, const float *v, int64_t vs, int32_t len,
                       float *out) {
    int32_t i0 = 0;
    for (; i0 + 64 <= hd; i0 += 64) accum_kernel(p, v + i0, vs, len, out + i0, 8);
    for (; i0 + 8 <= hd; i0 += 8) accum_kernel(p, v + i0, vs, len, out + i0, 1);
    if (i0 < hd) {
        __m256i m = mask8(hd - i0);
        __m256 o = _mm256_maskload_ps(out + i0, m);
        for (int32_t j = 0; j < len; j++)
            o = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_maskload_ps(v + (int64_t)j * vs + i0, m), o);
        _mm256_maskstore_ps(out + i0, m, o);
    }
}

/* vcvtph2ps, 8 at a time; the tail through a zeroed copy (AVX2 has no
 * 16-bit masked load) */
static void f16_to_f32(int64_t n, const bd_f16 *x, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    if (i < n) {
        bd_f16 t[8] = {0};
        memcpy(t, x + i, (size_t)(n - i) * sizeof *t);
        _mm256_maskstore_ps(y + i, mask8((int)(n - i)), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t)));
    }
}

/* vcvtps2ph to nearest even, 8 at a time; the tail through a copy */
static void f32_to_f16(int64_t n, const float *x, bd_f16 *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        bd_f16 t[8];
        __m256 v = _mm256_maskload_ps(x + i, mask8((int)(n - i)));
        _mm_storeu_si128((__m128i *)t, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        memcpy(y + i, t, (size_t)(n - i) * sizeof *t);
    }
}

/* q8_0 -> f32, a block at a time: 4 x (8 int8 widened to int32, to f32,
 * times the block's scale), one rounding each as in the twin */
static void q8_0_to_f32(int64_t n, const void *x, float *y) {
    const block_q8_0 *b = x;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
        const __m256 d = _mm256_set1_ps(bd_f16_to_f32(b[i].d));
        UNROLL for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + 8 * c)));
            _mm256_storeu_ps(y + 8 * c, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
        }
    }
}

/* bd_expf_dd on 4 lanes (double inside); 2^n built in the exponent bits
 * (n + 1023 stays within 806..1153 after the clamps: a normal double, so
 * the product is exact, as the twin's ldexp) */
BD_INLINE __m256d expdd4(__m256d x) {
    static const double c[10] = BD_EXPD_COEFS;
    x = _mm256_max_pd(_mm256_set1_pd(BD_EXPD_LO), x);
    x = _mm256_min_pd(_mm256_set1_pd(BD_EXPD_HI), x);
    const __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(BD_EXPD_LOG2E)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fmadd_pd(n, _mm256_set1_pd(-BD_EXPD_LN2_HI), x);
    r = _mm256_fmadd_pd(n, _mm256_set1_pd(-BD_EXPD_LN2_LO), r);
    __m256d p = _mm256_set1_pd(c[0]);
    for (int k = 1; k < 10; k++) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(c[k]));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    const __m256i e = _mm256_slli_epi64(
        _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)), _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

BD_INLINE __m256 expdd8(__m256 x) {
    const __m128 lo = _mm256_cvtpd_ps(expdd4(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
    const __m128 hi = _mm256_cvtpd_ps(expdd4(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
    return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}

static void silu_mul(int64_t n, float *g, const float *u) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = expdd8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + bd_expf_dd(-g[i])) * u[i];
}

/* argmax (kernels.h, bd_argmax's rule) in two passes: the largest value
 * with vmaxps (x as the first operand, so a NaN element leaves the running
 * maximum as it was; +0 and -0 compare equal below, whichever is kept),
 * then the first index equal to it. x[0] NaN: nothing is '>' it, index 0;
 * no element equal (every one NaN or -inf but x[0] = -inf is found): 0. */
static int32_t argmax_avx2(const float *x, int32_t n) {
    if (n < 32 || isnan(x[0])) return bd_argmax(x, n);
    __m256 m[4];
    UNROLL for (int k = 0; k < 4; k++) m[k] = _mm256_set1_ps(-INFINITY);
    int32_t i = 0;
    for (; i + 32 <= n; i += 32)
        UNROLL for (int k = 0; k < 4; k++) m[k] = _mm256_max_ps(_mm256_loadu_ps(x + i + 8 * k), m[k]);
    m[0] = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
    float lane[8], mx = -INFINITY;
    _mm256_storeu_ps(lane, m[0]);
    for (int k = 0; k < 8; k++) mx = lane[k] > mx ? lane[k] : mx;
    for (int32_t j = i; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    const __m256 v = _mm256_set1_ps(mx);
    for (i = 0; i + 8 <= n; i += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), v, _CMP_EQ_OQ));
        if (hit) return i + __builtin_ctz((unsigned)hit);
    }
    for (; i < n; i++)
        if (x[i] == mx) return i;
    return 0;
}

/* Gated DeltaNet step (kernels.h): the 16 lanes of each dot in two ymm
 * (elements i..i+7 of a 16-block in the first); multiplies and adds stay
 * separate (no fma), as in the scalar twin. */
static void gdn_step(const float *src, float *dst, int32_t d_k, int32_t d_v, const float *k, const float *v,
                     float g, float beta, const float *q, float scale, float *out) {
    if (d_k % 16 != 0) {
        bd_gdn_step_ref(src, dst, d_k, d_v, k, v, g, beta, q, scale, out);
        return;
    }
    const __m256 e = _mm256_set1_ps(expf(g));
    for (int32_t j = 0; j < d_v; j++) {
        const float *ms = src + (int64_t)j * d_k;
        float *md = dst + (int64_t)j * d_k;
        __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
        for (int32_t i = 0; i < d_k; i += 16) {
            const __m256 m0 = _mm256_mul_ps(_mm256_loadu_ps(ms + i), e);
            const __m256 m1 = _mm256_mul_ps(_mm256_loadu_ps(ms + i + 8), e);
            _mm256_storeu_ps(md + i, m0);
            _mm256_storeu_ps(md + i + 8, m1);
            lo = _mm256_add_ps(lo, _mm256_mul_ps(m0, _mm256_loadu_ps(k + i)));
            hi = _mm256_add_ps(hi, _mm256_mul_ps(m1, _mm256_loadu_ps(k + i + 8)));
        }
        const __m256 d = _mm256_set1_ps((v[j] - tree16x2(lo, hi)) * beta);
        lo = hi = _mm256_setzero_ps();
        for (int32_t i = 0; i < d_k; i += 16) {
            const __m256 m0 = _mm256_add_ps(_mm256_loadu_ps(md + i), _mm256_mul_ps(_mm256_loadu_ps(k + i), d));
            const __m256 m1 =
                _mm256_add_ps(_mm256_loadu_ps(md + i + 8), _mm256_mul_ps(_mm256_loadu_ps(k + i + 8), d));
            _mm256_storeu_ps(md + i, m0);
            _mm256_storeu_ps(md + i + 8, m1);
            if (q) {
                lo = _mm256_add_ps(lo, _mm256_mul_ps(m0, _mm256_loadu_ps(q + i)));
                hi = _mm256_add_ps(hi, _mm256_mul_ps(m1, _mm256_loadu_ps(q + i + 8)));
            }
        }
        if (q) out[j] = tree16x2(lo, hi) * scale;
    }
}

/* ------------------------------------------------------------------------
 * Table
 * ---------------------------------------------------------------------- */

/* ------------------------------------------------------------------------
 * Row groups (verify batches and prompts): 8 weight rows against a batch
 * of activation rows, the AVX-512 file's scheme in 256 bits (kernels.h's
 * bd_tile_ops). A weight block of 8 rows is unpacked once for the batch
 * into vectors holding 4 consecutive codes of each row (8 x 8 dword
 * transposes), so the products of 4 broadcast activation bytes land per
 * row in its own lane with no horizontal reduction.
 *
 * AVX2: vpmaddubsw gives per row two int16 sums of 2 products; a Q4_K
 * sub-block's 8 of them are added in int16 (<= 8 x 2 x 15 x 127 = 30480:
 * no overflow) and one vpmaddwd against (sc, sc) applies the scale and
 * adds the halves. Q6_K (codes to 63) adds 2 at a time (<= 32004).
 * AVX-VNNI: Q4_K's vpdpbusd chains into int32, scaled with vpmulld (Q6_K
 * keeps the AVX2 form: a vpmulld per 16-element group measured no
 * faster). Either way
 * the integers are the scalar twin's and the f32 steps its tile order,
 * for 8 rows at once: the bits of vec_dot_n.
 * ---------------------------------------------------------------------- */

/* 8 x 8 int32 transpose: out[j] lane r = in[r] lane j. */
BD_INLINE void transpose8_epi32(const __m256i in[8], __m256i out[8]) {
    __m256i t[8], u[8];
    UNROLL for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm256_unpacklo_epi32(in[2 * k], in[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_epi32(in[2 * k], in[2 * k + 1]);
    }
    /* u[4m + k], 128-bit lane q: element 4q + k of rows 4m .. 4m + 3 */
    UNROLL for (int m = 0; m < 2; m++) {
        u[4 * m] = _mm256_unpacklo_epi64(t[4 * m], t[4 * m + 2]);
        u[4 * m + 1] = _mm256_unpackhi_epi64(t[4 * m], t[4 * m + 2]);
        u[4 * m + 2] = _mm256_unpacklo_epi64(t[4 * m + 1], t[4 * m + 3]);
        u[4 * m + 3] = _mm256_unpackhi_epi64(t[4 * m + 1], t[4 * m + 3]);
    }
    UNROLL for (int k = 0; k < 4; k++) {
        out[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
        out[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
    }
}

/* The 16 bytes at off in block i of the 8 rows: q[k] lane r = dword k of
 * row r (rows >= nw read as zero). */
BD_INLINE void rg_load8x4(const uint8_t *w, size_t ws, int nw, size_t bb, int64_t i, size_t off, __m256i q[4]) {
    __m256i a[4];
    UNROLL for (int m = 0; m < 4; m++) {
        const __m128i lo = m < nw ? _mm_loadu_si128((const __m128i *)(w + (size_t)m * ws + (size_t)i * bb + off))
                                  : _mm_setzero_si128();
        const __m128i hi = m + 4 < nw ? _mm_loadu_si128((const __m128i *)(w + (size_t)(m + 4) * ws + (size_t)i * bb + off))
                                      : _mm_setzero_si128();
        a[m] = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    }
    const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    q[0] = _mm256_unpacklo_epi64(t0, t2);
    q[1] = _mm256_unpackhi_epi64(t0, t2);
    q[2] = _mm256_unpacklo_epi64(t1, t3);
    q[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* the low 16 bits of 8 int32 lanes as 8 int16 (f16 bit patterns) */
BD_INLINE __m128i low16_epi32(__m256i v) {
    const __m256i m = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1,
                                                               4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1));
    return _mm_unpacklo_epi64(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
}

BD_INLINE __m256i bcast32(const void *p) { return _mm256_broadcastd_epi32(_mm_loadu_si32(p)); }
/* bcast32 that the compiler may neither merge with an equal one nor move:
 * for loops that read the same activation words once per sub, where GCC
 * otherwise computes each broadcast once, keeps it on the stack and
 * reloads it for the other sub (a store and a reload per product) */
BD_INLINE __m256i bcast32_here(const void *p) {
    __m256i r;
    __asm__ volatile("vpbroadcastd %1, %0" : "=x"(r) : "m"(*(const int32_t *)p));
    return r;
}

/* A scale vector for the int16 sums: (v, v) in each row's lane */
BD_INLINE __m256i pair16(__m256i v) { return _mm256_or_si256(v, _mm256_slli_epi32(v, 16)); }

/* Q4_K's mins two sub-blocks at a time. A sub-block's min meets the sum of
 * its 32 activations, which is a pair of Q8_K bsums (16 elements each):
 * the mins' sum is sum_s m_s (bsums[2s] + bsums[2s + 1]). Summing each
 * pair first (|sum| <= 32 x 128 fits an int16) lets one madd take two
 * sub-blocks, (m_2q, m_2q+1) against (b_2q, b_2q+1): 4 madds a row and
 * block instead of 8 (on Zen 5 they share the pipes of the products).
 * The int32 sum is exact either way, so the same bits.
 * q4k_mins2(m) with m lane r = 4 mins as bytes (m_lo or m_hi below): [0]
 * and [1] lane r = (byte 0, byte 1) and (byte 2, byte 3) as int16 pairs. */
BD_INLINE void q4k_mins2(__m256i m, __m256i out[2]) {
    /* (byte shuffles stay inside each 128-bit lane; -1 zeroes) */
    const __m256i s01 = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13, -1));
    const __m256i s23 = _mm256_add_epi16(s01, _mm256_set1_epi16(2)); /* (-1 plus 2 in the high byte stays negative: zero) */
    out[0] = _mm256_shuffle_epi8(m, s01);
    out[1] = _mm256_shuffle_epi8(m, s23);
}
/* The activation side: b[q] every lane = (b_2q, b_2q+1) as int16s, b_s the
 * sum of sub-block s's 32 activations. */
BD_INLINE void q8k_bsums2(const block_q8_K *x, __m256i b[4]) {
    const __m128i h = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
    const __m256i h2 = _mm256_broadcastsi128_si256(h);
    b[0] = _mm256_shuffle_epi32(h2, 0x00);
    b[1] = _mm256_shuffle_epi32(h2, 0x55);
    b[2] = _mm256_shuffle_epi32(h2, 0xAA);
    b[3] = _mm256_shuffle_epi32(h2, 0xFF);
}

#define RG_AHEAD 1 /* blocks of each row prefetched ahead of their unpacking */

/* Q4_K, 8 rows of one block. */
typedef struct {
    __m256i u[8][8]; /* [sub-block s][g]: lane r = codes of elements 32 s + 4 g .. + 3 of row r */
    __m256i sc[8];   /* [s]: lane r = (sc, sc) int16 pair (AVX2) or sc (AVX-VNNI) of sub-block s */
    __m256i mn2[4];  /* [q]: lane r = (m_2q, m_2q+1), two sub-blocks' mins as an int16 pair (q4k_mins2) */
    __m256 d, dmin;
} rg_q4k;

/* Scales, mins and super-block scales of 8 rows' Q4_K blocks from the
 * blocks' first four 32-bit words side by side (q[k] lane r = word k of
 * row r): what rg_unpack_q4k and il_unpack_q4k both finish with. */
BD_INLINE void rg_q4k_scales(const __m256i q[4], rg_q4k *u) {
    const __m256i m6 = _mm256_set1_epi8(0x3F), lo4 = _mm256_set1_epi8(0x0F), hi2 = _mm256_set1_epi8(0x30);
    const __m256i sc_lo = _mm256_and_si256(q[1], m6), m_lo = _mm256_and_si256(q[2], m6);
    const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(q[3], lo4), _mm256_and_si256(_mm256_srli_epi32(q[1], 2), hi2));
    const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(q[3], 4), lo4),
                                         _mm256_and_si256(_mm256_srli_epi32(q[2], 2), hi2));
    const __m256i ff = _mm256_set1_epi32(0xFF);
    UNROLL for (int s = 0; s < 8; s++) {
        const __m256i sc = _mm256_and_si256(_mm256_srli_epi32(s < 4 ? sc_lo : sc_hi, 8 * (s % 4)), ff);
#if defined(__AVXVNNI__)
        u->sc[s] = sc;
#else
        u->sc[s] = pair16(sc);
#endif
    }
    q4k_mins2(m_lo, u->mn2);
    q4k_mins2(m_hi, u->mn2 + 2);
    u->d = _mm256_cvtph_ps(low16_epi32(q[0]));
    u->dmin = _mm256_cvtph_ps(low16_epi32(_mm256_srli_epi32(q[0], 16)));
}

BD_INLINE void rg_unpack_q4k(const uint8_t *w, size_t ws, int nw, int64_t i, rg_q4k *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int r = 0; r < nw; r++)
        UNROLL for (int l = 0; l < 3; l++)
            _mm_prefetch((const char *)(w + (size_t)r * ws) + (size_t)(i + RG_AHEAD) * sizeof(block_q4_K) + 64 * l,
                         _MM_HINT_T0);
    UNROLL for (int c = 0; c < 4; c++) {
        __m256i in[8], out[8];
        UNROLL for (int r = 0; r < 8; r++)
            in[r] = r < nw ? _mm256_loadu_si256((const __m256i *)(w + (size_t)r * ws + (size_t)i * sizeof(block_q4_K) +
                                                                  offsetof(block_q4_K, qs) + 32 * c))
                           : _mm256_setzero_si256();
        transpose8_epi32(in, out);
        UNROLL for (int g = 0; g < 8; g++) {
            u->u[2 * c][g] = _mm256_and_si256(out[g], m4);
            u->u[2 * c + 1][g] = _mm256_and_si256(_mm256_srli_epi16(out[g], 4), m4);
        }
    }
    __m256i q[4];
    rg_load8x4(w, ws, nw, sizeof(block_q4_K), i, 0, q);
    rg_q4k_scales(q, u);
}

/* NT (<= 4) activation rows x[j] (Q8_K, block i) against one unpacked Q4_K
 * block: acc[j] lane r = row r's dot so far. */
BD_INLINE void rg_block_q4k(const void *vu, const block_q8_K *const *x, __m256 *acc, const int NT) {
    const rg_q4k *u = vu;
    __m256i sumi[4], summ[4];
    UNROLL for (int j = 0; j < NT; j++) sumi[j] = summ[j] = _mm256_setzero_si256();
    UNROLL for (int s = 0; s < 8; s++) {
        __m256i t[4];
        UNROLL for (int j = 0; j < NT; j++) t[j] = _mm256_setzero_si256();
        UNROLL for (int g = 0; g < 8; g++) {
            const __m256i U = _mm256_load_si256(&u->u[s][g]);
            UNROLL for (int j = 0; j < NT; j++) {
                const __m256i b = bcast32(x[j]->qs + 32 * s + 4 * g);
#if defined(__AVXVNNI__)
                t[j] = _mm256_dpbusd_avx_epi32(t[j], U, b);
#else
                t[j] = _mm256_add_epi16(t[j], _mm256_maddubs_epi16(U, b));
                KEEP(t[j]);
#endif
            }
        }
        UNROLL for (int j = 0; j < NT; j++) {
#if defined(__AVXVNNI__)
            sumi[j] = _mm256_add_epi32(sumi[j], _mm256_mullo_epi32(t[j], u->sc[s]));
#else
            sumi[j] = madd_acc(sumi[j], t[j], u->sc[s]);
#endif
        }
    }
    UNROLL for (int j = 0; j < NT; j++) {
        __m256i b2[4];
        q8k_bsums2(x[j], b2);
        UNROLL for (int q = 0; q < 4; q++) summ[j] = madd_acc(summ[j], u->mn2[q], b2[q]);
        const __m256 dx = _mm256_set1_ps(x[j]->d);
        acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(u->d, dx), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
        acc[j] = _mm256_fnmadd_ps(_mm256_mul_ps(u->dmin, dx), _mm256_cvtepi32_ps(summ[j]), acc[j]);
    }
}

BD_INLINE __m256i il_word(const uint8_t *p, int sub, int D) {
    return _mm256_loadu_si256((const __m256i *)(p + 64 * D + 32 * sub));
}

/* Code vector g of sub-block s of one sub of the interleaved Q4_K block p
 * (kernels_il.h's word 4 + 8 (s / 2) + g, low nibbles for even s), as
 * il_unpack_q4k stores it in u[s][g]. */
BD_INLINE __m256i il_q4k_codes(const uint8_t *p, int sub, int s, int g) {
    const __m256i v = il_word(p, sub, 4 + 8 * (s / 2) + g), m4 = _mm256_set1_epi8(0x0F);
    return s % 2 ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
}

/* IL_HI16: the fused pair kernel takes odd sub-blocks' codes as 16 q (the
 * high nibble masked in place, no shift) and even ones' scales times 16,
 * so its integer sums are 16 times the true ones, shifted back at the end
 * (exact: every term is a multiple of 16, |sum| < 2^29). vpdpbusd only:
 * 16 q x 127 would saturate vpmaddubsw's 16-bit pairs. It saves the
 * shift of half the code vectors: kbench, Zen 5, 2 threads, 9728 x 2560
 * from memory, best of 4 alternating, 3 / 6 / 16 rows 18.8 / 26.7 / 62.4
 * -> 17.6 / 25.5 / 58.8 ms (a VM with ~50 % steal; in L2 about 5 % at 6
 * rows). */
#ifndef IL_HI16
#if defined(__AVXVNNI__)
#define IL_HI16 1
#else
#define IL_HI16 0
#endif
#endif
#if IL_HI16 && !defined(__AVXVNNI__)
#error "IL_HI16 needs vpdpbusd (the avxvnni build of this file)"
#endif
static const uint8_t k_il_nibble_mask[2][32] __attribute__((aligned(32))) = {
    {0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F,
     0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F},
    {0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0,
     0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0, 0xF0}};
BD_INLINE __m256i il_q4k_codes16(const uint8_t *p, int sub, int s, int g) {
    /* the mask read from memory: with every register taken, gcc otherwise
     * rebuilt it from an immediate (three instructions) at every use */
    const __m256i v = il_word(p, sub, 4 + 8 * (s / 2) + g);
    return _mm256_and_si256(v, _mm256_load_si256((const __m256i *)k_il_nibble_mask[s % 2]));
}

/* Code vector k of group G of one sub of an interleaved Q6_K block p (ql
 * word 16 h + j, qh word 32 + 8 h + j % 8 with its next two bits for j >=
 * 8, low nibbles for even h2; G = 4 h2 + j / 4, k = j % 4, h = h2 / 2), as
 * il_unpack_q6k stores it in u[G][k]. (Read like this inside the block
 * kernel for batches of one call, as Q4_K does, it measured no faster on
 * avxvnni and 15 % slower on avx2, Zen 5 kbench in cache, 3-4 rows.) */
BD_INLINE __m256i il_q6k_codes(const uint8_t *p, int sub, int G, int k) {
    const int h2 = G / 4, j = 4 * (G % 4) + k, h = h2 / 2;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i ql = il_word(p, sub, 16 * h + j);
    __m256i qh = il_word(p, sub, 32 + 8 * h + j % 8);
    if (j >= 8) qh = _mm256_srli_epi16(qh, 2);
    return h2 % 2 ? _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), m4), _mm256_and_si256(qh, m30))
                  : _mm256_or_si256(_mm256_and_si256(ql, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
}

/* il_pair_q4k's end, per row and sub: the mins against the activation's
 * block sums, then rg_block_q4k's f32 steps (same order, same bits). */
BD_INLINE void il_pair_q4k_tail(const rg_q4k *const *u, const block_q8_K *const *x, __m256i sumi[2][4],
                                __m256 *const *acc, const int NT) {
    UNROLL for (int j = 0; j < NT; j++) {
        __m256i summ[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, b2[4];
        q8k_bsums2(x[j], b2);
        UNROLL for (int q = 0; q < 4; q++)
            UNROLL for (int h = 0; h < 2; h++) summ[h] = madd_acc(summ[h], u[h]->mn2[q], b2[q]);
        const __m256 dx = _mm256_set1_ps(x[j]->d);
        UNROLL for (int h = 0; h < 2; h++) {
            acc[h][j] = _mm256_fmadd_ps(_mm256_mul_ps(u[h]->d, dx), _mm256_cvtepi32_ps(sumi[h][j]), acc[h][j]);
            acc[h][j] = _mm256_fnmadd_ps(_mm256_mul_ps(u[h]->dmin, dx), _mm256_cvtepi32_ps(summ[h]), acc[h][j]);
        }
    }
}

/* NT (<= 4) activation rows against the two unpacked Q4_K blocks of a
 * 16-row interleaved group (kernels_il.h's subs; u0 rows 0-7, u1 rows
 * 8-15): rg_block_q4k on each, each activation broadcast feeding both
 * subs' code vectors. The integer sums are exact and the f32 steps per
 * sub and row are rg_block_q4k's, so the same bits. With one sub at a
 * time, a broadcast load per vpdpbusd (or vpmaddubsw) held the loop near
 * one product a cycle on Zen 5. kbench, Zen 5, 2 threads, 9728 x 2560 Q4_K
 * from memory, 16 rows, best of 10, ms per 512 MiB, avx2 / avxvnni:
 * 38.9 / 38.7 -> 34.1 / 31.1 (NT 3 / 4: NT 4 gave 37.0 on avx2, NT 3
 * 31.4 on avxvnni; NT 2 slower on both). Q6_K's version (il_pair_q6k)
 * pays at avxvnni only (see there).
 * F (a constant after inlining): the codes read from the interleaved
 * block p instead of u0 / u1, which then hold only the scales; with
 * IL_HI16 odd sub-blocks' codes come as 16 q. */
BD_INLINE void il_pair_q4k(const uint8_t *p, const rg_q4k *u0, const rg_q4k *u1, const block_q8_K *const *x,
                           __m256 *acc0, __m256 *acc1, const int NT, const bool F) {
    const rg_q4k *u[2] = {u0, u1};
    __m256 *acc[2] = {acc0, acc1};
    __m256i sumi[2][4];
    UNROLL for (int j = 0; j < NT; j++) sumi[0][j] = sumi[1][j] = _mm256_setzero_si256();
    UNROLL for (int s = 0; s < 8; s++) {
        __m256i t[2][4];
        UNROLL for (int j = 0; j < NT; j++) t[0][j] = t[1][j] = _mm256_setzero_si256();
        UNROLL for (int g = 0; g < 8; g++) {
#if IL_HI16
            const __m256i U0 = F ? il_q4k_codes16(p, 0, s, g) : _mm256_load_si256(&u0->u[s][g]);
            const __m256i U1 = F ? il_q4k_codes16(p, 1, s, g) : _mm256_load_si256(&u1->u[s][g]);
#else
            const __m256i U0 = F ? il_q4k_codes(p, 0, s, g) : _mm256_load_si256(&u0->u[s][g]);
            const __m256i U1 = F ? il_q4k_codes(p, 1, s, g) : _mm256_load_si256(&u1->u[s][g]);
#endif
            UNROLL for (int j = 0; j < NT; j++) {
                const __m256i b = bcast32(x[j]->qs + 32 * s + 4 * g);
#if defined(__AVXVNNI__)
                t[0][j] = _mm256_dpbusd_avx_epi32(t[0][j], U0, b);
                KEEP(t[0][j]);
                t[1][j] = _mm256_dpbusd_avx_epi32(t[1][j], U1, b);
                KEEP(t[1][j]);
#else
                t[0][j] = _mm256_add_epi16(t[0][j], _mm256_maddubs_epi16(U0, b));
                KEEP(t[0][j]);
                t[1][j] = _mm256_add_epi16(t[1][j], _mm256_maddubs_epi16(U1, b));
                KEEP(t[1][j]);
#endif
            }
        }
        UNROLL for (int h = 0; h < 2; h++)
            UNROLL for (int j = 0; j < NT; j++) {
#if defined(__AVXVNNI__)
                __m256i sc = u[h]->sc[s];
#if IL_HI16
                if (F && s % 2 == 0) sc = _mm256_slli_epi32(sc, 4);
#endif
                sumi[h][j] = _mm256_add_epi32(sumi[h][j], _mm256_mullo_epi32(t[h][j], sc));
#else
                sumi[h][j] = madd_acc(sumi[h][j], t[h][j], u[h]->sc[s]);
#endif
                KEEP(sumi[h][j]);
            }
    }
#if IL_HI16
    if (F)
        UNROLL for (int j = 0; j < NT; j++) sumi[0][j] = _mm256_srai_epi32(sumi[0][j], 4),
                                           sumi[1][j] = _mm256_srai_epi32(sumi[1][j], 4);
#endif
    il_pair_q4k_tail(u, x, sumi, acc, NT);
}

/* activation rows per il_pair_q4k call (see its figures); -DIL_PAIR_NT=N
 * to measure others */
#ifndef IL_PAIR_NT
#if defined(__AVXVNNI__)
#define IL_PAIR_NT 4
#else
#define IL_PAIR_NT bd_il_pair_rows_avx2 /* 4 on Zen 4, 3 elsewhere (kernels.c) */
#endif
#endif
/* il_pair_q4k_N: unpacked blocks; il_pairf_q4k_N: the codes read from the
 * interleaved block p (u0 and u1 then hold only the scales, il_scales_q4k's
 * part), no pass through memory for batches of one or two calls a block.
 * Two instantiations with F a constant: with a run-time choice in one
 * body gcc hoisted the shared activation broadcasts out of the branch and
 * spilled them, or tested p at every code vector. */
#define IL_PAIR_FN(N)                                                                                          \
    static void il_pair_q4k_##N(const uint8_t *p, const void *u0, const void *u1, const block_q8_K *const *x,  \
                                __m256 *a0, __m256 *a1) {                                                      \
        (void)p;                                                                                               \
        il_pair_q4k(NULL, u0, u1, x, a0, a1, N, false);                                                        \
    }                                                                                                          \
    static void il_pairf_q4k_##N(const uint8_t *p, const void *u0, const void *u1, const block_q8_K *const *x, \
                                 __m256 *a0, __m256 *a1) {                                                     \
        il_pair_q4k(p, u0, u1, x, a0, a1, N, true);                                                            \
    }
IL_PAIR_FN(1)
IL_PAIR_FN(2)
IL_PAIR_FN(3)
IL_PAIR_FN(4)
typedef void (*il_pair_fn)(const uint8_t *p, const void *u0, const void *u1, const block_q8_K *const *x, __m256 *a0,
                           __m256 *a1);
static const il_pair_fn k_il_pair_q4k[2][4] = {{il_pair_q4k_1, il_pair_q4k_2, il_pair_q4k_3, il_pair_q4k_4},
                                               {il_pairf_q4k_1, il_pairf_q4k_2, il_pairf_q4k_3, il_pairf_q4k_4}};
#define IL_PAIR_Q4 k_il_pair_q4k

/* Q6_K, 8 rows of one block. */
typedef struct {
    __m256i u[16][4]; /* [group G][k]: lane r = codes (0..63) of elements 16 G + 4 k .. + 3 of row r */
    __m256i sc[16];   /* [G]: lane r = (sc, sc), the scale of group G as an int16 pair (AVX-VNNI: sc) */
    __m256i scb[8];   /* [p]: lane r = (-32 sc_2p, -32 sc_2p+1) as an int16 pair: the codes' offset */
    __m256 d;
} rg_q6k;

BD_INLINE void rg_unpack_q6k(const uint8_t *w, size_t ws, int nw, int64_t i, rg_q6k *u) {
    for (int r = 0; r < nw; r++)
        UNROLL for (int l = 0; l < 4; l++)
            _mm_prefetch((const char *)(w + (size_t)r * ws) + (size_t)(i + RG_AHEAD) * sizeof(block_q6_K) + 64 * l,
                         _MM_HINT_T0);
    __m256i codes[8][8]; /* [row][chunk k]: elements 32 k .. 32 k + 31 */
    UNROLL for (int r = 0; r < 8; r++) {
        if (r < nw) q6k_codes((const block_q6_K *)(w + (size_t)r * ws) + i, codes[r]);
        else UNROLL for (int k = 0; k < 8; k++) codes[r][k] = _mm256_setzero_si256();
    }
    UNROLL for (int k = 0; k < 8; k++) {
        __m256i in[8], out[8];
        UNROLL for (int r = 0; r < 8; r++) in[r] = codes[r][k];
        transpose8_epi32(in, out);
        UNROLL for (int d = 0; d < 8; d++) u->u[2 * k + d / 4][d % 4] = out[d];
    }
    __m256i q[4];
    rg_load8x4(w, ws, nw, sizeof(block_q6_K), i, offsetof(block_q6_K, scales), q);
    __m256i sc[16];
    UNROLL for (int G = 0; G < 16; G++) {
        sc[G] = _mm256_srai_epi32(_mm256_slli_epi32(q[G / 4], 24 - 8 * (G % 4)), 24);
#if defined(__AVXVNNI__)
        u->sc[G] = sc[G];
#else
        u->sc[G] = _mm256_or_si256(_mm256_and_si256(sc[G], _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc[G], 16));
#endif
    }
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    UNROLL for (int p = 0; p < 8; p++) {
        const __m256i a = _mm256_slli_epi32(sc[2 * p], 5), b = _mm256_slli_epi32(sc[2 * p + 1], 5);
        u->scb[p] = _mm256_or_si256(_mm256_and_si256(_mm256_sub_epi32(_mm256_setzero_si256(), a), lo16),
                                    _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), b), 16));
    }
    uint16_t dh[8] = {0};
    for (int r = 0; r < nw; r++) memcpy(&dh[r], &((const block_q6_K *)(w + (size_t)r * ws) + i)->d, 2);
    u->d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
}

BD_INLINE void rg_block_q6k(const void *vu, const block_q8_K *const *x, __m256 *acc, const int NT) {
    const rg_q6k *u = vu;
    __m256i sumi[4];
    UNROLL for (int j = 0; j < NT; j++) {
        sumi[j] = _mm256_setzero_si256();
        UNROLL for (int p = 0; p < 8; p++) {
            sumi[j] = madd_acc(sumi[j], u->scb[p], bcast32(x[j]->bsums + 2 * p));
#if !defined(__AVXVNNI__)
            /* one chain: as a tree of eight products GCC kept the partial
             * sums on the stack (rg_q6k_4: 145 -> 120 stack moves; kbench
             * Zen 4, 2560 x 9728 from memory, 2 threads, two alternating
             * rounds, 12 / 16 rows 56.4-56.8 / 70.5-71.2 -> 54.6-54.7 /
             * 67.6-68.2 ms). AVX-VNNI's vpdpwssd is a chain already. */
            KEEP(sumi[j]);
#endif
        }
    }
    UNROLL for (int G = 0; G < 16; G++) {
#if defined(__AVXVNNI__)
        /* a group's four products in one vpdpbusd chain, then its scale
         * (the codes are 0..63, so they are the unsigned operand). kbench,
         * Zen 5, 2 threads, 2560 x 9728 from memory, best of 10, ms per
         * 512 MiB, against the vpmaddubsw pairs: 16 rows 29.1 -> 27.8-28.5,
         * 4 rows 10.5-10.7 -> 10.3-10.4. */
        __m256i U[4], t[4];
        UNROLL for (int k = 0; k < 4; k++) U[k] = _mm256_load_si256(&u->u[G][k]);
        UNROLL for (int j = 0; j < NT; j++) {
            const int8_t *q = x[j]->qs + 16 * G;
            t[j] = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), U[0], bcast32(q));
            UNROLL for (int k = 1; k < 4; k++) t[j] = _mm256_dpbusd_avx_epi32(t[j], U[k], bcast32(q + 4 * k));
        }
        UNROLL for (int j = 0; j < NT; j++) {
            sumi[j] = _mm256_add_epi32(sumi[j], _mm256_mullo_epi32(t[j], u->sc[G]));
            KEEP(sumi[j]);
        }
#else
        UNROLL for (int h = 0; h < 2; h++) { /* two products of a group at a time (int16 room) */
            const __m256i U0 = _mm256_load_si256(&u->u[G][2 * h]), U1 = _mm256_load_si256(&u->u[G][2 * h + 1]);
            UNROLL for (int j = 0; j < NT; j++) {
                const int8_t *q = x[j]->qs + 16 * G + 8 * h;
                const __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(U0, bcast32(q)), _mm256_maddubs_epi16(U1, bcast32(q + 4)));
                sumi[j] = madd_acc(sumi[j], t, u->sc[G]);
                KEEP(sumi[j]);
            }
        }
#endif
    }
    UNROLL for (int j = 0; j < NT; j++)
        acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(u->d, _mm256_set1_ps(x[j]->d)), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
}

#if defined(__AVXVNNI__)
/* NT (<= IL_PAIR_NT6) activation rows against the two unpacked Q6_K blocks
 * of a 16-row interleaved group (kernels_il.h's subs; u0 rows 0-7, u1 rows
 * 8-15): rg_block_q6k's vpdpbusd form on each, each activation broadcast
 * feeding both subs' code vectors. The integer sums are exact and the f32
 * step per sub and row is rg_block_q6k's, so the same bits. One sub at a
 * time, a broadcast per vpdpbusd and four-long chains per group held the
 * loop back. kbench, Zen 5, 2 threads, 2560 x 9728 in cache, best of 4-6
 * alternating, ms, one sub at a time / pairs at NT 4: 3 rows 0.725 /
 * 0.656, 5 rows 1.095 / 0.991, 8 rows 1.374 / 1.342, 15 rows 2.280 /
 * 1.945, 16 rows 2.498 / 2.000 (NT 2 and 3 in between). AVX2 (vpmaddubsw
 * pairs, no vpdpbusd) measured no better with pairs (8 and 15 rows 4-11 %
 * slower, 16 rows 5 % faster) and keeps rg_block_q6k. */
#ifndef IL_PAIR_NT6
#define IL_PAIR_NT6 4 /* (1..4; -DIL_PAIR_NT6=N to measure others) */
#endif
BD_INLINE void il_pair_q6k(const rg_q6k *u0, const rg_q6k *u1, const block_q8_K *const *x, __m256 *acc0,
                           __m256 *acc1, const int NT) {
    const rg_q6k *u[2] = {u0, u1};
    __m256i sumi[2][IL_PAIR_NT6];
    UNROLL for (int j = 0; j < NT; j++) {
        sumi[0][j] = sumi[1][j] = _mm256_setzero_si256();
        UNROLL for (int p = 0; p < 8; p++) {
            const __m256i bs = bcast32(x[j]->bsums + 2 * p);
            sumi[0][j] = madd_acc(sumi[0][j], u0->scb[p], bs);
            sumi[1][j] = madd_acc(sumi[1][j], u1->scb[p], bs);
        }
    }
    UNROLL for (int G = 0; G < 16; G++) {
        __m256i t[2][IL_PAIR_NT6];
        UNROLL for (int j = 0; j < NT; j++) t[0][j] = t[1][j] = _mm256_setzero_si256();
        UNROLL for (int k = 0; k < 4; k++) {
            const __m256i U0 = _mm256_load_si256(&u0->u[G][k]), U1 = _mm256_load_si256(&u1->u[G][k]);
            UNROLL for (int j = 0; j < NT; j++) {
                const __m256i b = bcast32(x[j]->qs + 16 * G + 4 * k);
                t[0][j] = _mm256_dpbusd_avx_epi32(t[0][j], U0, b);
                KEEP(t[0][j]);
                t[1][j] = _mm256_dpbusd_avx_epi32(t[1][j], U1, b);
                KEEP(t[1][j]);
            }
        }
        UNROLL for (int h = 0; h < 2; h++)
            UNROLL for (int j = 0; j < NT; j++) {
                sumi[h][j] = _mm256_add_epi32(sumi[h][j], _mm256_mullo_epi32(t[h][j], u[h]->sc[G]));
                KEEP(sumi[h][j]);
            }
    }
    UNROLL for (int j = 0; j < NT; j++) {
        const __m256 dx = _mm256_set1_ps(x[j]->d);
        acc0[j] = _mm256_fmadd_ps(_mm256_mul_ps(u0->d, dx), _mm256_cvtepi32_ps(sumi[0][j]), acc0[j]);
        acc1[j] = _mm256_fmadd_ps(_mm256_mul_ps(u1->d, dx), _mm256_cvtepi32_ps(sumi[1][j]), acc1[j]);
    }
}

#define IL_PAIR6_FN(N)                                                                                    \
    static void il_pair_q6k_##N(const void *u0, const void *u1, const block_q8_K *const *x, __m256 *a0, \
                                __m256 *a1) {                                                          \
        il_pair_q6k(u0, u1, x, a0, a1, N);                                                             \
    }
IL_PAIR6_FN(1)
IL_PAIR6_FN(2)
IL_PAIR6_FN(3)
IL_PAIR6_FN(4)
typedef void (*il_pair6_fn)(const void *u0, const void *u1, const block_q8_K *const *x, __m256 *a0, __m256 *a1);
static const il_pair6_fn k_il_pair_q6k[4] = {il_pair_q6k_1, il_pair_q6k_2, il_pair_q6k_3, il_pair_q6k_4};
#define IL_PAIR_Q6 k_il_pair_q6k
#endif

/* ------------------------------------------------------------------------
 * Q8_0 row groups, in the tile order (kernels_avx512.c explains it and who
 * takes them): 8 rows of one block per 8 x 8 transpose. AVX-VNNI: weights
 * + 128 against the packed activations with their -128 sum(y) correction.
 *
 * AVX2: int16 products. Each 32-bit lane of a code word holds bytes w0 w1
 * w2 w3 of one weight row; two shifts per 16 bits give lo = (w0, w2) and
 * hi = (w1, w3) sign-extended, and the activations are packed as int16 in
 * the order x0 x2 x1 x3 per four (rg_x16), so vpmaddwd(lo, bcast(x0, x2))
 * + vpmaddwd(hi, bcast(x1, x3)) is the lane's four-element dot, exact for
 * any bytes. Per 32 products of one activation row that is two vpmaddwd
 * and two adds; the |w| / vpsignb / vpmaddubsw / vpmaddwd-with-ones form
 * it replaced took three multiplier-port instructions (Zen 4 runs
 * vpsignb, vpmaddubsw, vpmaddwd and FMA on the same two pipes, 2 a
 * cycle in all; tools/kbench figures at il8_pair). The shifts are made
 * once per code word for all rows of a call.
 * ---------------------------------------------------------------------- */

#if !defined(__AVXVNNI__)
/* One Q8_0 activation block packed for the AVX2 kernels: the codes as
 * int16, each four x0 x1 x2 x3 stored as x0 x2 x1 x3; d as float. */
typedef struct {
    int16_t q[QK8_0];
    float d;
    int32_t pad; /* 72 bytes, a multiple of 8 */
} rg_x16;
#define RG_X8 rg_x16

static size_t rg16_pack_bytes(int64_t ncols, int64_t n_tok) {
    return (size_t)((n_tok + 15) / 16) * 16 * (size_t)(ncols / QK8_0) * sizeof(rg_x16);
}

/* rg8_pack's layout ([group of 16 rows][block i][row t]) with rg_x16 blocks. */
static void rg16_pack(int64_t ncols, const void *xq, size_t xs, int64_t n_tok, int64_t g, void *pack) {
    const int64_t nb = ncols / QK8_0;
    rg_x16 *dst = (rg_x16 *)pack + g * 16 * nb;
    const int nt = (int)(n_tok - 16 * g < 16 ? n_tok - 16 * g : 16);
    for (int t = 0; t < nt; t++) {
        const block_q8_0 *src = (const block_q8_0 *)((const uint8_t *)xq + (size_t)(16 * g + t) * xs);
        for (int64_t i = 0; i < nb; i++) {
            rg_x16 *o = &dst[i * 16 + t];
            for (int e = 0; e < QK8_0; e += 4) {
                o->q[e] = src[i].qs[e];
                o->q[e + 1] = src[i].qs[e + 2];
                o->q[e + 2] = src[i].qs[e + 1];
                o->q[e + 3] = src[i].qs[e + 3];
            }
            o->d = f16f(src[i].d);
            o->pad = 0;
        }
    }
}

static size_t avx2_pack_bytes(uint32_t type, int64_t ncols, int64_t n_tok) {
    return type == BD_TYPE_Q8_0 ? rg16_pack_bytes(ncols, n_tok) : rg_pack_bytes(type, ncols, n_tok);
}

static void avx2_pack(uint32_t type, int64_t ncols, const void *xq, size_t xs, int64_t n_tok, int64_t g, void *pack) {
    if (type == BD_TYPE_Q8_0) rg16_pack(ncols, xq, xs, n_tok, g, pack);
    else rg_pack(type, ncols, xq, xs, n_tok, g, pack);
}
#define RG_PACK_BYTES avx2_pack_bytes
#define RG_PACK avx2_pack

/* A code word's bytes sign-extended: lane (w0, w2) and lane (w1, w3). */
BD_INLINE __m256i q80_lo16(__m256i w) { return _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8); }
BD_INLINE __m256i q80_hi16(__m256i w) { return _mm256_srai_epi16(w, 8); }
#else
#define RG_X8 rg_x8
#define RG_PACK_BYTES rg_pack_bytes
#define RG_PACK rg_pack
#endif

typedef struct {
    __m256i u[2][8]; /* [block][g]: lane r = bytes 4 g .. 4 g + 3 of row r (VNNI: + 128; AVX2: q80_lo16 of them) */
#if !defined(__AVXVNNI__)
    __m256i s[2][8]; /* AVX2: q80_hi16 of them */
#endif
    __m256 d[2];
} rg_q80;

/* Blocks i and i + 1 (if two) of 8 rows. */
BD_INLINE void rg_unpack_q80(const uint8_t *w, size_t ws, int nw, int64_t i, int two, rg_q80 *u) {
    uint16_t dh[2][8] = {{0}};
    for (int b = 0; b <= two; b++) {
        __m256i in[8], out[8];
        for (int r = 0; r < 8; r++) {
            if (r >= nw) {
                in[r] = _mm256_setzero_si256();
                continue;
            }
            const block_q8_0 *q = (const block_q8_0 *)(w + (size_t)r * ws) + i + b;
            _mm_prefetch((const char *)(q + 2), _MM_HINT_T0);
            in[r] = _mm256_loadu_si256((const __m256i *)q->qs);
            memcpy(&dh[b][r], &q->d, 2);
        }
        transpose8_epi32(in, out);
        UNROLL for (int g = 0; g < 8; g++) {
#if defined(__AVXVNNI__)
            u->u[b][g] = _mm256_xor_si256(out[g], _mm256_set1_epi8((char)0x80));
#else
            u->u[b][g] = q80_lo16(out[g]);
            u->s[b][g] = q80_hi16(out[g]);
#endif
        }
        u->d[b] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh[b]));
    }
}

BD_INLINE void rg_block_q80(const rg_q80 *u, int b, const RG_X8 *const *x, __m256 *acc, const int NT) {
#if defined(__AVXVNNI__)
    UNROLL for (int j = 0; j < NT; j++) {
        __m256i a0 = _mm256_set1_epi32(x[j]->corr), a1 = _mm256_setzero_si256();
        UNROLL for (int g = 0; g < 8; g += 2) {
            a0 = _mm256_dpbusd_avx_epi32(a0, _mm256_load_si256(&u->u[b][g]), bcast32(x[j]->qs + 4 * g));
            a1 = _mm256_dpbusd_avx_epi32(a1, _mm256_load_si256(&u->u[b][g + 1]), bcast32(x[j]->qs + 4 * g + 4));
        }
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(a0, a1)),
                                 _mm256_mul_ps(_mm256_set1_ps(x[j]->d), u->d[b]), acc[j]);
    }
#else
    /* each code word's halves loaded once for the NT rows */
    __m256i a0[4], a1[4];
    UNROLL for (int j = 0; j < NT; j++) a0[j] = a1[j] = _mm256_setzero_si256();
    UNROLL for (int g = 0; g < 8; g++) {
        const __m256i lo = _mm256_load_si256(&u->u[b][g]), hi = _mm256_load_si256(&u->s[b][g]);
        UNROLL for (int j = 0; j < NT; j++) {
            a0[j] = madd_acc(a0[j], lo, bcast32(x[j]->q + 4 * g));
            KEEP(a0[j]);
            a1[j] = madd_acc(a1[j], hi, bcast32(x[j]->q + 4 * g + 2));
            KEEP(a1[j]);
        }
    }
    UNROLL for (int j = 0; j < NT; j++)
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(a0[j], a1[j])),
                                 _mm256_mul_ps(_mm256_set1_ps(x[j]->d), u->d[b]), acc[j]);
#endif
}

#define RG_R 8      /* rows per group: the lanes of a vector */
#define RG_GROUPS 8 /* groups unpacked per block step: 64 weight rows per chunk of activations */
#define RG_PASS 64  /* activation rows per pass */
#define RG_V __m256
#define RG_VZERO _mm256_setzero_ps
/* a whole vector with a plain store: vmaskmovps to memory is microcoded on
 * AMD (perf, Zen 4: 11 % of il_groups' own samples sat on it) */
#define RG_VSTORE(p, n, v)                                                                                        \
    ((n) >= RG_R ? _mm256_storeu_ps(p, v)                                                                         \
                 : _mm256_maskstore_ps(                                                                           \
                       p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), v))
#define RG_NT_Q4 4 /* activation rows per block-kernel call (16 registers) */
#define RG_NT_Q6 4
#define RG_NT_Q8 4
#include "kernels_rows.h"

/* ------------------------------------------------------------------------
 * Row groups on interleaved weights (kernels.h's BD_LAYOUT_IL16; the
 * driver is kernels_il.h's): word D of a block's 16 rows is the 64 bytes
 * at 64 D, rows 0-7 in the low 32 (sub 0) and 8-15 in the high 32 (sub 1),
 * so rg_unpack_*'s transposes become 32-byte loads; the masks, shifts and
 * block kernels are the ones above (same bits).
 * ---------------------------------------------------------------------- */

BD_INLINE void il_scales_q4k(const uint8_t *p, int sub, rg_q4k *u) {
    const __m256i q[4] = {il_word(p, sub, 0), il_word(p, sub, 1), il_word(p, sub, 2), il_word(p, sub, 3)};
    rg_q4k_scales(q, u);
}

BD_INLINE void il_unpack_q4k(const uint8_t *p, int sub, rg_q4k *u) {
    UNROLL for (int s = 0; s < 8; s++)
        UNROLL for (int g = 0; g < 8; g++) u->u[s][g] = il_q4k_codes(p, sub, s, g);
    il_scales_q4k(p, sub, u);
}

/* Codes of elements 16 G + 4 k of the 8 rows, G = 4 h2 + j / 4, k = j % 4:
 * ql word 16 h + j and qh word 8 h + j % 8 (its next two bits for j >= 8),
 * h = h2 / 2, low nibbles for even h2. */
BD_INLINE void il_scales_q6k(const uint8_t *p, int sub, rg_q6k *u) {
    __m256i sc[16];
    UNROLL for (int G = 0; G < 16; G++) {
        sc[G] = _mm256_srai_epi32(_mm256_slli_epi32(il_word(p, sub, 48 + G / 4), 24 - 8 * (G % 4)), 24);
#if defined(__AVXVNNI__)
        u->sc[G] = sc[G];
#else
        u->sc[G] = _mm256_or_si256(_mm256_and_si256(sc[G], _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc[G], 16));
#endif
    }
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    UNROLL for (int q = 0; q < 8; q++) {
        const __m256i a = _mm256_slli_epi32(sc[2 * q], 5), b = _mm256_slli_epi32(sc[2 * q + 1], 5);
        u->scb[q] = _mm256_or_si256(_mm256_and_si256(_mm256_sub_epi32(_mm256_setzero_si256(), a), lo16),
                                    _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), b), 16));
    }
    u->d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 64 * 52 + 16 * sub)));
}

BD_INLINE void il_unpack_q6k(const uint8_t *p, int sub, rg_q6k *u) {
    UNROLL for (int G = 0; G < 16; G++)
        UNROLL for (int k = 0; k < 4; k++) u->u[G][k] = il_q6k_codes(p, sub, G, k);
    il_scales_q6k(p, sub, u);
}

/* Few activation rows against one interleaved group, both subs, y[j ldy + r]
 * = row r's dot, the unpacking folded in (nothing goes through memory):
 * il_one_q4k (one Q4_K row; two or more go to il_groups' fused pair kernel,
 * IL_FEW_ROWS_FOR) and il_few_q6k (NT <= IL_FEW_MAX Q6_K rows at xq + j xs,
 * each code vector unpacked once for all of them). The block kernels'
 * integer sums and f32 steps, so the same bits. IL_FEW_MAX: il_few_q6k
 * at 7 or 8 rows a call spilled (kbench below: 8 rows from memory 50.8 ms
 * in one call against 39.6 in two of 4). */
#define IL_FEW_MAX 6
#define IL_FEW_MAX_FOR(type) IL_FEW_MAX

/* One activation row against a group, both subs side by side: each
 * activation broadcast feeds the two subs' code vectors at once (with the
 * subs one after the other, the compiler hoisted the 64 broadcasts of a
 * block out of the sub loop and spilled them to the stack; that form, for
 * up to two rows, was il_few_q4k until two rows went to il_groups). The
 * integer sums are rg_block_q4k's, only added in another order (exact),
 * and the f32 steps per sub are the same, so the same bits. kbench, one thread, in
 * cache: Zen 4 AVX2, 2048 x 2048, 0.081 -> 0.064 ms; Zen 5 AVX-VNNI, 2048
 * x 2560, 0.167 -> 0.137 (from memory both at ~17 ms per 512 MiB). Q6_K's
 * version of this measured no better than il_few_q6k and was left out. */
BD_INLINE void il_one_q4k(int64_t nb, const uint8_t *w, const uint8_t *xq, float *y) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m6 = _mm256_set1_epi8(0x3F), hi2 = _mm256_set1_epi8(0x30),
                  ff = _mm256_set1_epi32(0xFF);
    const size_t ib = 16 * sizeof(block_q4_K);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *p = w + (size_t)i * ib;
        il_prefetch(p, ib);
        const block_q8_K *x = (const block_q8_K *)xq + i;
        __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        UNROLL for (int c = 0; c < 4; c++) {
            __m256i tl[2], th[2];
            tl[0] = th[0] = tl[1] = th[1] = _mm256_setzero_si256();
            UNROLL for (int g = 0; g < 8; g++) {
                const __m256i bl = bcast32(x->qs + 64 * c + 4 * g), bh = bcast32(x->qs + 64 * c + 32 + 4 * g);
                UNROLL for (int sub = 0; sub < 2; sub++) {
                    const __m256i v = il_word(p, sub, 4 + 8 * c + g);
                    const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#if defined(__AVXVNNI__)
                    tl[sub] = _mm256_dpbusd_avx_epi32(tl[sub], lo, bl);
                    th[sub] = _mm256_dpbusd_avx_epi32(th[sub], hi, bh);
#else
                    tl[sub] = _mm256_add_epi16(tl[sub], _mm256_maddubs_epi16(lo, bl));
                    KEEP(tl[sub]);
                    th[sub] = _mm256_add_epi16(th[sub], _mm256_maddubs_epi16(hi, bh));
                    KEEP(th[sub]);
#endif
                }
            }
            UNROLL for (int sub = 0; sub < 2; sub++) {
                const __m256i q1 = il_word(p, sub, 1), q3 = il_word(p, sub, 3);
                UNROLL for (int h = 0; h < 2; h++) {
                    const int s = 2 * c + h;
                    const __m256i sv = s < 4 ? _mm256_and_si256(q1, m6)
                                             : _mm256_or_si256(_mm256_and_si256(q3, m4),
                                                               _mm256_and_si256(_mm256_srli_epi32(q1, 2), hi2));
                    const __m256i sc = _mm256_and_si256(_mm256_srli_epi32(sv, 8 * (s % 4)), ff);
#if defined(__AVXVNNI__)
                    sumi[sub] = _mm256_add_epi32(sumi[sub], _mm256_mullo_epi32(h ? th[sub] : tl[sub], sc));
#else
                    sumi[sub] = madd_acc(sumi[sub], h ? th[sub] : tl[sub], pair16(sc));
#endif
                }
            }
        }
        __m256i summ[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, b2[4];
        q8k_bsums2(x, b2);
        UNROLL for (int sub = 0; sub < 2; sub++) {
            const __m256i q2 = il_word(p, sub, 2), q3 = il_word(p, sub, 3);
            __m256i mn2[4];
            q4k_mins2(_mm256_and_si256(q2, m6), mn2);
            q4k_mins2(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(q3, 4), m4),
                                      _mm256_and_si256(_mm256_srli_epi32(q2, 2), hi2)),
                      mn2 + 2);
            UNROLL for (int q = 0; q < 4; q++) summ[sub] = madd_acc(summ[sub], mn2[q], b2[q]);
        }
        const __m256 dx = _mm256_set1_ps(x->d);
        UNROLL for (int sub = 0; sub < 2; sub++) {
            const __m256i q0 = il_word(p, sub, 0);
            const __m256 d = _mm256_cvtph_ps(low16_epi32(q0)), dmin = _mm256_cvtph_ps(low16_epi32(_mm256_srli_epi32(q0, 16)));
            acc[sub] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(sumi[sub]), acc[sub]);
            acc[sub] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(summ[sub]), acc[sub]);
        }
    }
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + 8, acc[1]);
}

/* vpshufb control putting byte a of every 32-bit lane in its byte 1 and
 * byte b in its byte 3 (bytes 0 and 2 zero): an arithmetic shift of each
 * 16-bit half by 8 then gives the two bytes sign-extended to int16. */
BD_INLINE __m256i il_pick16(int a, int b) {
    const int lo = 0x80 | (a << 8) | (0x80 << 16) | (b << 24);
    return _mm256_add_epi32(_mm256_set1_epi32(lo), _mm256_setr_epi32(0, 0x04000400, 0x08000800, 0x0C000C00, 0,
                                                                      0x04000400, 0x08000800, 0x0C000C00));
}

/* Q6_K, NT rows: the sums and f32 step of rg_block_q6k. Its integer
 * sums come in another order (exact, so the same values): each sub-block
 * scale sign-extended into both int16 halves with one vpshufb and one
 * shift, and the -32 offset as 32 x the bsums product subtracted. */
BD_INLINE void il_few_q6k(int64_t nb, const uint8_t *w, const uint8_t *xq, size_t xs, float *y, int64_t ldy,
                          const int NT) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i pick[4] = {il_pick16(0, 0), il_pick16(1, 1), il_pick16(2, 2), il_pick16(3, 3)};
    const __m256i pair[2] = {il_pick16(0, 1), il_pick16(2, 3)};
    const size_t ib = 16 * sizeof(block_q6_K);
    __m256 acc[2][IL_FEW_MAX];
    UNROLL for (int j = 0; j < NT; j++) acc[0][j] = acc[1][j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *p = w + (size_t)i * ib;
        il_prefetch(p, ib);
        const block_q8_K *x[IL_FEW_MAX];
        UNROLL for (int j = 0; j < NT; j++) x[j] = (const block_q8_K *)(xq + (size_t)j * xs) + i;
        UNROLL for (int sub = 0; sub < 2; sub++) {
            __m256i sumi[IL_FEW_MAX];
            UNROLL for (int j = 0; j < NT; j++) sumi[j] = _mm256_setzero_si256();
            UNROLL for (int q = 0; q < 8; q++) {
                const __m256i sp = _mm256_srai_epi16(_mm256_shuffle_epi8(il_word(p, sub, 48 + q / 2), pair[q % 2]), 8);
                UNROLL for (int j = 0; j < NT; j++) {
                    sumi[j] = _mm256_sub_epi32(sumi[j],
                                               _mm256_slli_epi32(_mm256_madd_epi16(sp, bcast32(x[j]->bsums + 2 * q)), 5));
                    /* one chain, as in rg_block_q6k (kbench, Zen 4, 2560 x
                     * 9728 from memory, 2 threads, two alternating rounds,
                     * 5 / 6 rows 26.4-26.5 / 31.2-31.4 -> 25.2-25.6 /
                     * 28.5-28.8 ms; one row the same) */
                    KEEP(sumi[j]);
                }
            }
            UNROLL for (int h2 = 0; h2 < 4; h2++) {
                const int h = h2 / 2, hi = h2 % 2;
                UNROLL for (int jq = 0; jq < 4; jq++) {
                    const int G = 4 * h2 + jq;
                    const __m256i sc = _mm256_srai_epi16(_mm256_shuffle_epi8(il_word(p, sub, 48 + G / 4), pick[G % 4]), 8);
                    UNROLL for (int hh = 0; hh < 2; hh++) { /* two products at a time (int16 room) */
                        __m256i U[2];
                        UNROLL for (int e = 0; e < 2; e++) {
                            const int jw = 4 * jq + 2 * hh + e;
                            const __m256i ql = il_word(p, sub, 16 * h + jw);
                            __m256i qh = il_word(p, sub, 32 + 8 * h + jw % 8);
                            if (jw >= 8) qh = _mm256_srli_epi16(qh, 2);
                            U[e] = hi ? _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), m4),
                                                        _mm256_and_si256(qh, m30))
                                      : _mm256_or_si256(_mm256_and_si256(ql, m4),
                                                        _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
                        }
                        UNROLL for (int j = 0; j < NT; j++) {
                            const int8_t *q = x[j]->qs + 16 * G + 8 * hh;
                            const __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(U[0], bcast32_here(q)),
                                                               _mm256_maddubs_epi16(U[1], bcast32_here(q + 4)));
                            sumi[j] = madd_acc(sumi[j], t, sc);
                            KEEP(sumi[j]);
                        }
                    }
                }
            }
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 64 * 52 + 16 * sub)));
            UNROLL for (int j = 0; j < NT; j++)
                acc[sub][j] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x[j]->d)), _mm256_cvtepi32_ps(sumi[j]),
                                              acc[sub][j]);
        }
    }
    UNROLL for (int j = 0; j < NT; j++) {
        _mm256_storeu_ps(y + j * ldy, acc[0][j]);
        _mm256_storeu_ps(y + j * ldy + 8, acc[1][j]);
    }
}

/* one function per row count: inlined together into il_few, the 6-row
 * code depended on which other counts sat beside it (kbench, 2560 x 9728
 * from memory, 6 rows: 37.5 ms beside counts 1-6, 31.8 beside 1-8; 30.9-31.6
 * on its own) */
#define IL_FEW6_FN(N)                                                                                           \
    static __attribute__((noinline)) void il_few_q6k_##N(int64_t nb, const uint8_t *w, const uint8_t *xq,       \
                                                         size_t xs, float *y, int64_t ldy) {                    \
        il_few_q6k(nb, w, xq, xs, y, ldy, N);                                                                  \
    }
IL_FEW6_FN(1)
IL_FEW6_FN(2)
IL_FEW6_FN(3)
IL_FEW6_FN(4)
IL_FEW6_FN(5)
IL_FEW6_FN(6)
static void (*const k_il_few_q6k[IL_FEW_MAX])(int64_t, const uint8_t *, const uint8_t *, size_t, float *,
                                               int64_t) = {il_few_q6k_1, il_few_q6k_2, il_few_q6k_3,
                                                           il_few_q6k_4, il_few_q6k_5, il_few_q6k_6};

/* kernels_il.h's IL_FEW: NT as a constant, one copy each; Q4_K only ever
 * gets one row here (IL_FEW_ROWS_FOR). */
static void il_few(uint32_t type, int64_t nb, const uint8_t *w, const uint8_t *xq, size_t xs, int nt, float *y,
                   int64_t ldy) {
    if (type == BD_TYPE_Q4_K) {
        BD_ASSERT(nt == 1);
        il_one_q4k(nb, w, xq, y);
    } else {
        BD_ASSERT(nt >= 1 && nt <= IL_FEW_MAX);
        k_il_few_q6k[nt - 1](nb, w, xq, xs, y, ldy);
    }
}
#define IL_FEW il_few

/* Q8_0 on interleaved weights (kernels.h: a pair of blocks' 16 code
 * words, then their 32 scales; the DFlash drafter's matrices): the sums
 * and f32 step of rg_block_q80 (the tile order), both subs at once, each
 * code word loaded (AVX-VNNI: flipped; AVX2: split into its int16 halves)
 * once for all NT activation rows and each activation broadcast feeding
 * both subs; the rows' accumulators stay for the whole row of blocks (at
 * NT 4 some of the 16 f32 and int sums live on the stack). One sub at a
 * time, as before, spent a broadcast per product: kbench, Zen 5, 2
 * threads, 4096 x 1024 Q8_0 from memory, 16 rows, best of 10, ms per 128
 * MiB, avx2 / avxvnni: 13.2 / 9.8 -> 12.7 / 7.3 (both subs in rows of
 * two: 13.7 / 8.4). The AVX2 int16 form against the |w| / vpsignb one it
 * replaced (Zen 4, kbench, 9728 x 2560 in cache, one thread, best of 10,
 * three alternating rounds): 16 rows 128-130 -> 142-148 GOPS, one row 63
 * -> 90 (2 threads). Its sub-at-a-time form with 8 rows a call spilled
 * and ran at 79. */
#define IL8_MAX 4
#define IL8_PAIR (2 * 16 * sizeof(block_q8_0))
BD_INLINE void il8_pair(int64_t nb, const uint8_t *w, const RG_X8 *x, float *y, int64_t ldy, const int NT) {
    __m256 acc[2][IL8_MAX];
    UNROLL for (int j = 0; j < NT; j++) acc[0][j] = acc[1][j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *pair = w + (size_t)(i / 2) * IL8_PAIR, *p = pair + 512 * (size_t)(i % 2);
        il_prefetch(p, 512 + 32 * (size_t)(i % 2));
        const RG_X8 *xb = x + 16 * i;
        __m256i a[2][IL8_MAX];
#if defined(__AVXVNNI__)
        UNROLL for (int j = 0; j < NT; j++) a[0][j] = a[1][j] = _mm256_set1_epi32(xb[j].corr);
        UNROLL for (int g = 0; g < 8; g++) {
            const __m256i u0 = _mm256_xor_si256(il_word(p, 0, g), _mm256_set1_epi8((char)0x80));
            const __m256i u1 = _mm256_xor_si256(il_word(p, 1, g), _mm256_set1_epi8((char)0x80));
            UNROLL for (int j = 0; j < NT; j++) {
                const __m256i b = bcast32(xb[j].qs + 4 * g);
                a[0][j] = _mm256_dpbusd_avx_epi32(a[0][j], u0, b);
                a[1][j] = _mm256_dpbusd_avx_epi32(a[1][j], u1, b);
            }
        }
#else
        /* both subs' int16 halves (four vectors) against each row's two
         * broadcasts */
        UNROLL for (int j = 0; j < NT; j++) a[0][j] = a[1][j] = _mm256_setzero_si256();
        UNROLL for (int g = 0; g < 8; g++) {
            const __m256i c0 = il_word(p, 0, g), c1 = il_word(p, 1, g);
            const __m256i lo0 = q80_lo16(c0), hi0 = q80_hi16(c0), lo1 = q80_lo16(c1), hi1 = q80_hi16(c1);
            UNROLL for (int j = 0; j < NT; j++) {
                const __m256i xa = bcast32(xb[j].q + 4 * g), xc = bcast32(xb[j].q + 4 * g + 2);
                a[0][j] = madd_acc(a[0][j], lo0, xa);
                KEEP(a[0][j]);
                a[1][j] = madd_acc(a[1][j], lo1, xa);
                KEEP(a[1][j]);
                a[0][j] = madd_acc(a[0][j], hi0, xc);
                KEEP(a[0][j]);
                a[1][j] = madd_acc(a[1][j], hi1, xc);
                KEEP(a[1][j]);
            }
        }
#endif
        UNROLL for (int h = 0; h < 2; h++) {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pair + 1024 + 32 * (i % 2) + 16 * h)));
            UNROLL for (int j = 0; j < NT; j++)
                acc[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[h][j]), _mm256_mul_ps(_mm256_set1_ps(xb[j].d), d), acc[h][j]);
        }
    }
    UNROLL for (int j = 0; j < NT; j++) {
        _mm256_storeu_ps(y + j * ldy, acc[0][j]);
        _mm256_storeu_ps(y + j * ldy + 8, acc[1][j]);
    }
}

static void il8_rows(int64_t nb, const uint8_t *w, const RG_X8 *x, int nt, float *y, int64_t ldy) {
    switch (nt) {
    case 1: il8_pair(nb, w, x, y, ldy, 1); break;
    case 2: il8_pair(nb, w, x, y, ldy, 2); break;
    case 3: il8_pair(nb, w, x, y, ldy, 3); break;
    default: il8_pair(nb, w, x, y, ldy, 4); break;
    }
}
/* Batches up to this many rows take il_few, larger ones il_groups. Zen 4,
 * 2 threads, 9728 x 2560 from memory, kbench, ms per 512 MiB, il_few
 * against il_groups before il_pair_q4k: Q4_K at 3 / 4 / 8 / 16 rows 36 /
 * 43 / 82 / 160 against 38 / 48 / 75 / 125; Q6_K 33 / 37 / 69 / 127
 * against 34 / 35 / 51 / 83. Zen 5 (family 26), same kbench, with
 * il_pair_q4k, best of 10, avx2 / avxvnni: Q4_K at 2 rows 10.3 / 8.8
 * against 10.8 / 10.4, at 3 rows 14.5 / 14.2 against 12.8 / 12.3, at 4
 * rows 17.6 / 14.7 against 14.7 / 13.0; Q6_K (2560 x 9728) at 2 rows 8.5 /
 * 8.6 against 9.3 / 9.1, at 3 rows 11.7 / 11.6 against 9.7 / 9.8. (All
 * before il_few_q6k's broadcasts were pinned with bcast32_here and it took
 * more than 2 rows a call; Zen 4 now sends Q6_K up to 10 rows there:
 * kernels.c's bd_il_few_rows_q6k_avx2.) */
#define IL_FEW_ROWS 2
/* ... per type: two Q4_K rows go to il_groups, whose fused pair kernel
 * (IL_FUSED_ROWS) beats il_few there: Zen 5, kbench, 2 threads, best of 2
 * alternating, avxvnni 9728 x 2560 from memory 15.6 -> 12.5 ms, 4096 x
 * 2048 in cache 301-308 -> 395-414 GOPS. avx2 had read 18.2-18.5 ms both
 * ways against il_groups on unpacked blocks; with the fused kernel (below)
 * 9728 x 2560, 256 MiB a rep, best of 20, four alternating rounds: 9.1-9.7
 * ms in il_few against 6.7-8.2. Q6_K (2560 x 9728) stays (13.7 against
 * 14.4-14.8 at avxvnni). */
#if defined(__AVXVNNI__)
#define IL_FEW_ROWS_FOR(type) ((type) == BD_TYPE_Q4_K ? 1 : IL_FEW_ROWS)
#else
/* ... and Q6_K at the avx2 level: kernels.c's bd_il_few_rows_q6k_avx2
 * (10 on Zen 4, IL_FEW_ROWS elsewhere; see there) */
#define IL_FEW_ROWS_FOR(type) ((type) == BD_TYPE_Q4_K ? 1 : bd_il_few_rows_q6k_avx2)
#endif
/* Q4_K batches up to this many rows read the codes in the pair kernel
 * (kernels_il.h) instead of from an unpacked copy; -DIL_FUSED_ROWS=N to
 * measure others. Zen 5, kbench, 2 threads, 9728 x 2560 from memory (521
 * MiB a rep), best of 8, ms, unpacked / read in the kernel: avxvnni at 3 /
 * 6 / 16 rows 18.2 / 26.1 / 54.5 against 16.4 / 24.7 / 50.4 (prompts of
 * 32 and 64 rows even, in cache). avx2, whose vpmaddubsw + vpaddw pair
 * leaves fewer free ALU slots: 19.5 / 28.1 / 60.4 against 19.0 / 28.7 /
 * 66.5 in that session; measured again (session of 2026-12-06, 256 MiB a
 * rep, best of 16-20, three alternating rounds, unpacked / read in the
 * kernel): 3 rows 10.5-13.0 / 8.2-10.4, 4 rows 13.1-17.4 / 11.2-13.9, 6
 * rows 15.7-17.8 / 14.9-16.3, 8 rows 21.7-34.8 / 21.1-28.3, 16 rows
 * 41.8-49.2 / 42.0-49.8; then 7 rows 17.8-25.1 / 21.6-24.4 and 8 rows
 * even in three more rounds, and a 4B verify curve t(6) 178 / t(7) 276
 * ms: read in the kernel up to 6 rows there (two calls of IL_PAIR_NT 3;
 * each call reads and masks the codes again). Zen 4 reads every batch
 * size faster in the kernel (kernels.c's bd_il_fused_rows_avx2), and the
 * Intel Xeon 16 rows. */
#ifndef IL_FUSED_ROWS
#if defined(__AVXVNNI__)
#define IL_FUSED_ROWS 16
#else
#define IL_FUSED_ROWS bd_il_fused_rows_avx2 /* 16 on Zen 4 and Intel (kernels.c) */
#endif
#endif

#include "kernels_il.h"

/* Q4_K / Q6_K: the bits of vec_dot_n, so exact callers may send any batch;
 * from 9 rows on: below, vec_dot_n's few-row dots (kernels_simd.h) read
 * each weight row once for all rows and measured faster (tools/kbench,
 * Zen 5, 2 threads, weights streamed from memory, ms per 512 MiB, few-row
 * dot against row groups: Q4_K 9728x2560 at 2 / 4 / 5 / 6 / 8 rows 24 /
 * 37 / 44 / 52 / 65 against 28 / 44 / 49 / 54 / 68; Q6_K 16384x2560 at 4
 * / 8 rows 28 / 49 against 43 / 60), AVX2 and AVX-VNNI builds alike.
 * Q8_0: the tile order (see above). */
static const bd_tile_ops k_rg_ops = {
    .supports = rg_supports,
    .pack_bytes = RG_PACK_BYTES,
    .pack = RG_PACK,
    .rows = rg_rows,
    .exact_rows = {[BD_TYPE_Q4_K] = 9, [BD_TYPE_Q6_K] = 9},
    /* no exact Q8_0: its row-group order differs from the one-row dot (see matmul.c) */
    .fast_rows = {[BD_TYPE_Q4_K] = 9, [BD_TYPE_Q6_K] = 9, [BD_TYPE_Q8_0] = 8},
    .il_rows = il_rows,
    /* Zen 5, 2 threads, 4B Q4_K_M at depth 512, tools/ablayout (both
     * layouts in one process, alternating): decode 111 -> 104, 100 -> 97
     * ms (avx2), 99 -> 95 (avxvnni); verify t(16) within 2 % either way.
     * (kbench alone has its one-row Q6_K ~10 % below the one-row dot.) */
    .il_default = true,
};

/* kernels_avxvnni.c builds this file again under another name */
#ifndef BD_AVX2_FILL
#define BD_AVX2_FILL bd_kernels_fill_avx2
#endif

void BD_AVX2_FILL(bd_kernels *k) {
    BD_SIMD_FILL_COMMON(k);
    k->argmax = argmax_avx2;
    k->vec_dot_n[BD_TYPE_BF16] = dot_n_bf16;
}
