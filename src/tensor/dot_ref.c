/*
 * dot_ref.c - scalar reference dot products, weight row x activation row.
 *
 * Same arithmetic as ggml: for the quantized types, each block's integer
 * products are summed exactly in int32 (sub-block scales applied as
 * integers), then the block sum is scaled once by the product of the two
 * block scales and added to an f32 accumulator. So a SIMD twin that keeps
 * the integer part exact differs from these only by the order of the f32
 * block additions.
 *
 * Block result conventions (the SIMD kernels use the same ones):
 *   IQ4_NL:     (dw * dx) * isum
 *   Q4_0/Q4_1/Q5_0/Q5_1/Q8_0: fixed f32 order, bit for bit llama.cpp's
 *               (see q32_accum below)
 *   IQ4_XS:     (dx * dw) * isum
 *   Q5_K:       fixed f32 order, bit for bit llama.cpp's (see q5k_dot below)
 *   Q4_K/Q6_K:  fixed f32 order, the "tile order" shared with the AMX
 *               matmul (see kt_dot below)
 *   Q2_K/Q3_K:  fixed f32 order, bit for bit llama.cpp's (see q2k_dot below)
 */
#include <math.h>
#include <string.h>

#include "tensor.h"
#include "type_ref.h"

static inline float f16f(bd_f16 h) { return bd_f16_to_f32_inline(h); }

/*
 * 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): the f32 arithmetic
 * is fixed lane by lane, in the order of llama.cpp's (v0.5.0) x86 vec_dot
 * and of our SIMD twins, so all three are bit-identical
 * (tests/unit/test_quant.c pins Q4_1 and Q5_0 to llama.cpp's own results):
 *   lane l (l < 8) = exact int sum of elements 4l..4l+3 of the block
 *   acc[l] = fmaf((float)lane l, dw * dx, acc[l])           block by block
 *   result = hsum8(acc)          (+ summ for Q4_1/Q5_1, summ += mw * sx
 *                                 block by block, a separate f32 sum)
 */
static inline float q32_hsum8(const float a[8]) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* acc[l] += d * (sum of w[e] * y[e] over e = 4l..4l+3), fused as above */
static inline void q32_accum(float acc[8], const int8_t w[32], const int8_t *y, float d) {
    /* the integer sums first, apart from the f32 steps, in 16-bit products
     * (|w y| <= 2^14), so that they vectorize */
    int16_t pr[32];
    for (int e = 0; e < 32; e++) pr[e] = (int16_t)(w[e] * y[e]);
    int lane[8];
    for (int l = 0; l < 8; l++) lane[l] = pr[4 * l] + pr[4 * l + 1] + pr[4 * l + 2] + pr[4 * l + 3];
    for (int l = 0; l < 8; l++) acc[l] = fmaf((float)lane[l], d, acc[l]);
}

static float dot_q4_0(int64_t nb, const block_q4_0 *w, const block_q8_0 *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        int8_t q[32]; /* -128 .. 127 */
        for (int j = 0; j < 16; j++) {
            q[j] = (w[i].qs[j] & 0xF) - 8;
            q[j + 16] = (w[i].qs[j] >> 4) - 8;
        }
        q32_accum(acc, q, x[i].qs, f16f(w[i].d) * f16f(x[i].d));
    }
    return q32_hsum8(acc);
}

static float dot_q4_1(int64_t nb, const block_q4_1 *w, const block_q8_1 *x) {
    float acc[8] = {0}, summ = 0;
    for (int64_t i = 0; i < nb; i++) {
        int8_t q[32]; /* -128 .. 127 */
        for (int j = 0; j < 16; j++) {
            q[j] = w[i].qs[j] & 0xF;
            q[j + 16] = w[i].qs[j] >> 4;
        }
        summ += f16f(w[i].m) * f16f(x[i].s);
        q32_accum(acc, q, x[i].qs, f16f(w[i].d) * f16f(x[i].d));
    }
    return q32_hsum8(acc) + summ;
}

static float dot_q5_0(int64_t nb, const block_q5_0 *w, const block_q8_0 *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        uint32_t qh;
        memcpy(&qh, w[i].qh, 4);
        int8_t q[32]; /* -128 .. 127 */
        for (int j = 0; j < 16; j++) {
            q[j] = ((w[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4)) - 16;
            q[j + 16] = ((w[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
        }
        q32_accum(acc, q, x[i].qs, f16f(w[i].d) * f16f(x[i].d));
    }
    return q32_hsum8(acc);
}

static float dot_q5_1(int64_t nb, const block_q5_1 *w, const block_q8_1 *x) {
    float acc[8] = {0}, summ = 0;
    for (int64_t i = 0; i < nb; i++) {
        uint32_t qh;
        memcpy(&qh, w[i].qh, 4);
        int8_t q[32]; /* -128 .. 127 */
        for (int j = 0; j < 16; j++) {
            q[j] = (w[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            q[j + 16] = (w[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        }
        summ += f16f(w[i].m) * f16f(x[i].s);
        q32_accum(acc, q, x[i].qs, f16f(w[i].d) * f16f(x[i].d));
    }
    return q32_hsum8(acc) + summ;
}

static float dot_q8_0(int64_t nb, const block_q8_0 *w, const block_q8_0 *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        int8_t q[32]; /* -128 .. 127 */
        for (int j = 0; j < QK8_0; j++) q[j] = w[i].qs[j];
        q32_accum(acc, q, x[i].qs, f16f(w[i].d) * f16f(x[i].d));
    }
    return q32_hsum8(acc);
}

static float dot_iq4_nl(int64_t nb, const block_iq4_nl *w, const block_q8_0 *x) {
    float sum = 0;
    for (int64_t i = 0; i < nb; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += bd_kvalues_iq4nl[w[i].qs[j] & 0xF] * x[i].qs[j] +
                    bd_kvalues_iq4nl[w[i].qs[j] >> 4] * x[i].qs[j + 16];
        sum += (f16f(w[i].d) * f16f(x[i].d)) * (float)isum;
    }
    return sum;
}

/* 6-bit scale and min of sub-block s of a Q4_K/Q5_K scales array. */
static inline void kq_scale_min(const uint8_t *b, int s, int *sc, int *m) {
    if (s < 4) {
        *sc = b[s] & 63;
        *m = b[s + 4] & 63;
    } else {
        *sc = (b[s + 4] & 0x0F) | ((b[s - 4] >> 6) << 4);
        *m = (b[s + 4] >> 4) | ((b[s] >> 6) << 4);
    }
}

/* The integer parts of the K-quant dots below, written so that they
 * vectorize: a block's codes are unpacked into element order first, then
 * multiplied with the activations in 16 bits (|q y| <= 63 * 128), then
 * summed four at a time into the lanes. Integer sums, so the order of
 * these steps changes no bit. */
static inline void kq_products(const int8_t q[QK_K], const int8_t y[QK_K], int16_t pr[QK_K]) {
    for (int e = 0; e < QK_K; e++) pr[e] = (int16_t)(q[e] * y[e]);
}
static inline int kq_sum4(const int16_t *p) { return p[0] + p[1] + p[2] + p[3]; }
/* Q2_K / Q3_K codes, element e = 128 h + 32 k + j: bits 2k, 2k + 1 of
 * qs[32 h + j] (bd_k23_code) */
static inline void k23_codes(const uint8_t qs[64], int8_t q[QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 32; j++) q[128 * h + 32 * k + j] = (int8_t)((qs[32 * h + j] >> (2 * k)) & 3);
}
/* lane l += sc[2c + l / 4] * (products 32c + 4l .. + 3), c = 0..7 */
static inline void k23_lanes(const int16_t pr[QK_K], const int sc[16], int lane[8]) {
    for (int c = 0; c < 8; c++)
        for (int l = 0; l < 8; l++) lane[l] += sc[2 * c + l / 4] * kq_sum4(pr + 32 * c + 4 * l);
}

/*
 * Q5_K: the f32 arithmetic is fixed lane by lane, in the order of
 * llama.cpp's (v0.5.0) x86 vec_dot, so a dot here is bit-identical to
 * llama.cpp's and to our SIMD twins (test_kernels.c, test_quant.c).
 *
 * Why a fixed order and not just "within rounding": these dots subtract two
 * large terms (d * sum sc*q*y and dmin * sum m*bsum), so their last-bit
 * error is large relative to the result, and the next layer's int8
 * activation quantization turns such a difference, whenever a value sits
 * near a rounding step, into a whole step, which then grows through the
 * layers.
 *
 * Per block i, with d = dx * dw and dmin = -dx * dwmin:
 *   lane l (0..7) = sum over sub-blocks s of sc_s * sum_{e=4l}^{4l+3} q[32s+e] y[32s+e]
 *   acc[l] = fmaf(d, (float)lane l, acc[l])
 *   mins: P_s = bsums[2s] + bsums[2s+1], mp[k] = m_2k P_2k + m_2k+1 P_2k+1 (k = 0..3)
 *   summ = fmaf(dmin, (float)(mp[0] + mp[1] + mp[2] + mp[3]), summ)
 * result = hsum8(acc) + summ
 * hsum8(a) = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
 */
static inline float kq_hsum8(const float a[8]) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static float q5k_dot(int64_t nb, const block_q5_K *w, const block_q8_K *x) {
    float acc[8] = {0}, summ = 0;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *qh = w[i].qh, *qs = w[i].qs;
        const float d = x[i].d * f16f(w[i].d);
        const float dmin = -x[i].d * f16f(w[i].dmin);
        int sc[8], m[8];
        for (int s = 0; s < 8; s++) kq_scale_min(w[i].scales, s, &sc[s], &m[s]);
        /* codes 0..31: sub-block 2c (elements 64c + e) the low nibbles of
         * qs[32c + e] with qh[e] bit 2c, sub-block 2c + 1 the high ones
         * with bit 2c + 1 */
        int8_t q[QK_K];
        for (int c = 0; c < 4; c++)
            for (int e = 0; e < 32; e++) {
                q[64 * c + e] = (int8_t)((qs[32 * c + e] & 0xF) | (((qh[e] >> (2 * c)) & 1) << 4));
                q[64 * c + 32 + e] = (int8_t)((qs[32 * c + e] >> 4) | (((qh[e] >> (2 * c + 1)) & 1) << 4));
            }
        int16_t pr[QK_K];
        kq_products(q, x[i].qs, pr);
        int lane[8] = {0};
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 8; l++)
                lane[l] += sc[2 * c] * kq_sum4(pr + 64 * c + 4 * l) + sc[2 * c + 1] * kq_sum4(pr + 64 * c + 32 + 4 * l);
        for (int l = 0; l < 8; l++) acc[l] = fmaf(d, (float)lane[l], acc[l]);
        int mp = 0;
        for (int s = 0; s < 8; s++) mp += m[s] * (x[i].bsums[2 * s] + x[i].bsums[2 * s + 1]);
        summ = fmaf(dmin, (float)mp, summ);
    }
    return kq_hsum8(acc) + summ;
}

/*
 * Q4_K / Q6_K: the "tile order". Each block's whole integer sum is formed
 * first (exact in int32), so the f32 work is one or two fmas per block,
 * in block order from +0:
 *   Q4_K: sumi = sum_s sc_s * sum_{e in s} q_e y_e    (s: 8 sub-blocks of 32)
 *         summ = sum_s m_s * (bsums 2s + bsums 2s+1)
 *         acc = fmaf(dx * dw, (float)sumi, acc)
 *         acc = fmaf(-(dx * dwmin), (float)summ, acc)
 *   Q6_K: sumi = sum_s sc_s * (sum_{e in s} q_e y_e - 32 * bsums_s)
 *         (s: 16 sub-blocks of 16, q the 6-bit code 0..63)
 *         acc = fmaf(dx * dw, (float)sumi, acc)
 * dx is the Q8_K row's block scale. Every kernel table computes these bits
 * for every batch size: the AVX2 / AVX-512 multi-row dots (decode and
 * small verify batches) and the AMX tiles (larger verify batches and
 * prompts), where the integer sums come straight out of the tile unit and
 * two fmas per 256 elements are all that is left. Fixing one order for
 * all of them is what lets a speculative verify batch take the tiles and
 * still see exactly the logits of one-token decoding. (llama.cpp keeps
 * eight f32 lanes per block instead; the results agree to rounding,
 * tests/unit/test_quant.c.)
 */
static float q4k_dot(int64_t nb, const block_q4_K *w, const block_q8_K *x) {
    float acc = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0, summ = 0;
        for (int s = 0; s < 8; s++) {
            int sc, m, isum = 0;
            kq_scale_min(w[i].scales, s, &sc, &m);
            for (int e = 0; e < 32; e++) {
                const uint8_t byte = w[i].qs[32 * (s / 2) + e];
                isum += ((s & 1) ? byte >> 4 : byte & 0xF) * x[i].qs[32 * s + e];
            }
            sumi += sc * isum;
            summ += m * (x[i].bsums[2 * s] + x[i].bsums[2 * s + 1]);
        }
        acc = fmaf(x[i].d * f16f(w[i].d), (float)sumi, acc);
        acc = fmaf(-(x[i].d * f16f(w[i].dmin)), (float)summ, acc);
    }
    return acc;
}

static float q6k_dot(int64_t nb, const block_q6_K *w, const block_q8_K *x) {
    float acc = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        /* the codes 0..63 in element order: half h has 64 ql bytes and 32
         * qh bytes; element 128 h + 32 k + j takes a nibble of ql[64 h + j
         * + 32 (k & 1)] (low for k < 2) and qh[32 h + j] bits 2k, 2k + 1 */
        int8_t q[QK_K];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            int8_t *o = q + 128 * h;
            for (int j = 0; j < 32; j++) {
                o[j] = (int8_t)((ql[j] & 0xF) | ((qh[j] & 3) << 4));
                o[j + 32] = (int8_t)((ql[j + 32] & 0xF) | (((qh[j] >> 2) & 3) << 4));
                o[j + 64] = (int8_t)((ql[j] >> 4) | (((qh[j] >> 4) & 3) << 4));
                o[j + 96] = (int8_t)((ql[j + 32] >> 4) | (((qh[j] >> 6) & 3) << 4));
            }
        }
        int16_t pr[QK_K];
        kq_products(q, x[i].qs, pr);
        int sumi = 0;
        for (int s = 0; s < 16; s++) {
            int isum = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++) isum += pr[e];
            sumi += w[i].scales[s] * (isum - 32 * x[i].bsums[s]);
        }
        acc = fmaf(x[i].d * f16f(w[i].d), (float)sumi, acc);
    }
    return acc;
}

/*
 * Q2_K / Q3_K: the f32 steps of llama.cpp v0.5.0's x86 vec_dot (its AVX2
 * code, which its AVX-512 builds run too), so a dot here is bit-identical
 * to llama.cpp's and to our SIMD twins. dx is the Q8_K row's block scale,
 * d = dx * dw; every integer sum is exact in int32. Per block, eight lanes:
 *   lane l = sum over the 8 chunks c of 32 elements of
 *            sc_{2c + l/4} * sum_{t < 4} q_{32c + 4l + t} y_{32c + 4l + t}
 *   (chunk c's elements 0..15 are sub-block 2c, 16..31 sub-block 2c+1)
 *   Q2_K: q the 2-bit code 0..3, sc_s = scales[s] & 15, and first
 *         mp[l] = (scales[2l] >> 4) * bsums[2l] + (scales[2l+1] >> 4) * bsums[2l+1]
 *         acc[l] = fmaf(-dx * dwmin, (float)mp[l], acc[l])
 *   Q3_K: q = 2-bit code - 4 * !hbit (-4..3), sc_s = 6-bit code - 32
 *   then acc[l] = fmaf(d, (float)lane l, acc[l])
 * result = hsum8(acc) (as Q5_K above). (llama.cpp repacks Q2_K matrices on
 * AVX-512 CPUs when repacking is on, with another f32 order; the oracle
 * runs without repacking, tests/oracle/oracle.c.)
 */
static float q2k_dot(int64_t nb, const block_q2_K *w, const block_q8_K *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        const float d = x[i].d * f16f(w[i].d), dmin = -x[i].d * f16f(w[i].dmin);
        const uint8_t *sc = w[i].scales;
        int8_t q[QK_K];
        int16_t pr[QK_K];
        int scl[16], lane[8] = {0};
        k23_codes(w[i].qs, q);
        kq_products(q, x[i].qs, pr);
        for (int s = 0; s < 16; s++) scl[s] = sc[s] & 0xF;
        k23_lanes(pr, scl, lane);
        for (int l = 0; l < 8; l++) {
            const int mp = (sc[2 * l] >> 4) * x[i].bsums[2 * l] + (sc[2 * l + 1] >> 4) * x[i].bsums[2 * l + 1];
            acc[l] = fmaf(dmin, (float)mp, acc[l]);
        }
        for (int l = 0; l < 8; l++) acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    return kq_hsum8(acc);
}

static float q3k_dot(int64_t nb, const block_q3_K *w, const block_q8_K *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        int8_t q[QK_K];
        int16_t pr[QK_K];
        int scl[16], lane[8] = {0};
        k23_codes(w[i].qs, q);
        /* minus 4 where element 32 b + j's bit b of hmask[j] is clear */
        for (int b = 0; b < 8; b++)
            for (int j = 0; j < 32; j++) q[32 * b + j] = (int8_t)(q[32 * b + j] - 4 + 4 * ((w[i].hmask[j] >> b) & 1));
        kq_products(q, x[i].qs, pr);
        for (int s = 0; s < 16; s++) scl[s] = bd_q3k_scale(w[i].scales, s) - 32;
        k23_lanes(pr, scl, lane);
        const float d = x[i].d * f16f(w[i].d);
        for (int l = 0; l < 8; l++) acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    return kq_hsum8(acc);
}

static float dot_iq4_xs(int64_t nb, const block_iq4_xs *w, const block_q8_K *x) {
    float sum = 0;
    for (int64_t i = 0; i < nb; i++) {
        int isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((w[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                     (((w[i].scales_h >> (2 * ib)) & 3) << 4);
            const uint8_t *q = w[i].qs + 16 * ib;
            const int8_t *y = x[i].qs + 32 * ib;
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += bd_kvalues_iq4nl[q[j] & 0xF] * y[j] + bd_kvalues_iq4nl[q[j] >> 4] * y[j + 16];
            isum += (ls - 32) * s;
        }
        sum += (x[i].d * f16f(w[i].d)) * (float)isum;
    }
    return sum;
}

/* ------------------------------------------------------------------------
 * The type table's dots (types.c): nx activation rows x_stride bytes apart,
 * each dotted with the one weight row, one after the other. n is a
 * multiple of the block size (bd_vec_dot_ref checks it).
 * ---------------------------------------------------------------------- */

/* Float rows: eight running sums, lane l taking elements l, l + 8, ...,
 * merged as q32_hsum8 merges its lanes. No f32 order is owed here (the
 * SIMD twins are checked against these within rounding bounds), and eight
 * independent chains instead of one let the compiler keep them in vector
 * registers: this is the production path where no SIMD table is built
 * (aarch64) and under BLOCKDRAFT_ISA=ref (make test runs the F32
 * stories260K model there; one chain made that 18x slower than avx2). */
#define DOT_LANES8(CVT)                                                     \
    float acc[8] = {0};                                                     \
    int64_t i = 0;                                                          \
    for (; i + 8 <= n; i += 8)                                              \
        for (int l = 0; l < 8; l++) acc[l] += CVT(a[i + l]) * CVT(b[i + l]); \
    for (int l = 0; i < n; i++, l++) acc[l] += CVT(a[i]) * CVT(b[i]);       \
    return q32_hsum8(acc)

static inline float f32_id(float v) { return v; }
static inline float bf16_widen(bd_bf16 h) { /* bd_bf16_to_f32, inline */
    union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16};
    return v.f;
}
static float dot_f32(int64_t n, const float *a, const float *b) { DOT_LANES8(f32_id); }
static float dot_f16(int64_t n, const bd_f16 *a, const bd_f16 *b) { DOT_LANES8(bd_f16_to_f32_inline); }
static float dot_bf16(int64_t n, const bd_bf16 *a, const bd_bf16 *b) { DOT_LANES8(bf16_widen); }
#undef DOT_LANES8

/* FN takes the block count (element count for the float types, QK 1) */
#define REF_DOT(T, FN, QK)                                                                            \
    void bd_ref_dot_##T(int64_t n, const void *w, const void *x, size_t x_stride, int nx, float *out) { \
        for (int j = 0; j < nx; j++) out[j] = FN(n / (QK), w, (const void *)((const uint8_t *)x + (size_t)j * x_stride)); \
    }
REF_DOT(f32, dot_f32, 1)
REF_DOT(f16, dot_f16, 1)
REF_DOT(bf16, dot_bf16, 1)
REF_DOT(q4_0, dot_q4_0, QK4_0)
REF_DOT(q4_1, dot_q4_1, QK4_1)
REF_DOT(q5_0, dot_q5_0, QK5_0)
REF_DOT(q5_1, dot_q5_1, QK5_1)
REF_DOT(q8_0, dot_q8_0, QK8_0)
REF_DOT(iq4_nl, dot_iq4_nl, QK4_NL)
REF_DOT(q2_K, q2k_dot, QK_K)
REF_DOT(q3_K, q3k_dot, QK_K)
REF_DOT(q4_K, q4k_dot, QK_K)
REF_DOT(q5_K, q5k_dot, QK_K)
REF_DOT(q6_K, q6k_dot, QK_K)
REF_DOT(iq4_xs, dot_iq4_xs, QK_K)

/*
 * The f32 order of the AMX matmul (kernels_amx.c), for the types whose
 * traits have a vec_dot_tile. Q4_K / Q6_K: the tile order above, which is
 * also their reference dot (the type table points at those). Q8_0 (per
 * 32-element block, activations Q8_0): sumi = sum_e q_e y_e, acc =
 * fmaf((float)sumi, dx * dw, acc), blocks in order from +0; the AVX
 * kernels keep llama.cpp's eight lanes there, so bd_matmul sends only
 * prompts and the DFlash drafter's batches (bd_matmul_fast) through Q8_0
 * tiles.
 */
float bd_ref_dot_tile_q8_0(int64_t n, const void *w, const void *x) {
    const block_q8_0 *b = w, *y = x;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int sumi = 0;
        for (int e = 0; e < QK8_0; e++) sumi += b[i].qs[e] * y[i].qs[e];
        acc = fmaf((float)sumi, f16f(y[i].d) * f16f(b[i].d), acc);
    }
    return acc;
}

float bd_ref_dot_tile_q4_K(int64_t n, const void *w, const void *x) { return q4k_dot(n / QK_K, w, x); }
float bd_ref_dot_tile_q6_K(int64_t n, const void *w, const void *x) { return q6k_dot(n / QK_K, w, x); }
