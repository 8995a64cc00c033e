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
 *   Q6_K/IQ4_XS: (dx * dw) * isum
 *   Q4_K/Q5_K:  fixed f32 order, bit for bit llama.cpp's (see kq_dot below)
 */
#include <math.h>
#include <string.h>

#include "tensor.h"

static inline float f16f(bd_f16 h) { return bd_f16_to_f32(h); }

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
static inline void q32_accum(float acc[8], const int w[32], const int8_t *y, float d) {
    for (int l = 0; l < 8; l++) {
        int lane = 0;
        for (int e = 4 * l; e < 4 * l + 4; e++) lane += w[e] * y[e];
        acc[l] = fmaf((float)lane, d, acc[l]);
    }
}

static float dot_q4_0(int64_t nb, const block_q4_0 *w, const block_q8_0 *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        int q[32];
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
        int q[32];
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
        int q[32];
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
        int q[32];
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
        int q[32];
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

/*
 * Q4_K / Q5_K: the f32 arithmetic is fixed lane by lane, in the order of
 * llama.cpp's (v0.5.0) x86 vec_dot, so a dot here is bit-identical to
 * llama.cpp's and to our SIMD twins (test_kernels.c, test_quant.c).
 *
 * Why not just "within rounding": these dots subtract two large terms
 * (d * sum sc*q*y and dmin * sum m*bsum), so their last-bit error is large
 * relative to the result, and the next layer's int8 activation quantization
 * turns such a difference, whenever a value sits near a rounding step, into
 * a whole step, which then grows through the layers. Same arithmetic, same
 * rounding: no such divergence from llama.cpp.
 *
 * Per block i, with d = dx * dw and dmin = -dx * dwmin:
 *   lane l (0..7) = sum over sub-blocks s of sc_s * sum_{e=4l}^{4l+3} q[32s+e] y[32s+e]
 *   acc[l] = fmaf(d, (float)lane l, acc[l])
 *   mins: P_s = bsums[2s] + bsums[2s+1], mp[k] = m_2k P_2k + m_2k+1 P_2k+1 (k = 0..3)
 *     Q4_K: accm[k] = fmaf(dmin, (float)mp[k], accm[k])
 *     Q5_K: summ = fmaf(dmin, (float)(mp[0] + mp[1] + mp[2] + mp[3]), summ)
 * result = hsum8(acc) + (Q4_K: (accm0 + accm2) + (accm1 + accm3); Q5_K: summ)
 * hsum8(a) = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
 */
static inline float kq_hsum8(const float a[8]) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* qh: the Q5_K high-bit plane, or NULL for Q4_K. */
static float kq_dot(int64_t nb, const void *vw, size_t bbytes, bool q5, const block_q8_K *x) {
    float acc[8] = {0}, accm[4] = {0}, summ = 0;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = (const uint8_t *)vw + (size_t)i * bbytes;
        bd_f16 hd, hdmin;
        memcpy(&hd, blk, 2);
        memcpy(&hdmin, blk + 2, 2);
        const uint8_t *scales = blk + 4;
        const uint8_t *qh = q5 ? blk + 4 + K_SCALE_SIZE : NULL;
        const uint8_t *qs = blk + 4 + K_SCALE_SIZE + (q5 ? QK_K / 8 : 0);
        const float d = x[i].d * f16f(hd);
        const float dmin = -x[i].d * f16f(hdmin);
        int sc[8], m[8];
        for (int s = 0; s < 8; s++) kq_scale_min(scales, s, &sc[s], &m[s]);
        int lane[8] = {0};
        for (int c = 0; c < 4; c++) { /* sub-blocks 2c (low nibbles), 2c+1 (high) */
            const uint8_t *q = qs + 32 * c;
            const int8_t *y = x[i].qs + 64 * c;
            for (int l = 0; l < 8; l++) {
                int s0 = 0, s1 = 0;
                for (int e = 4 * l; e < 4 * l + 4; e++) {
                    int q0 = q[e] & 0xF, q1 = q[e] >> 4;
                    if (q5) {
                        q0 |= ((qh[e] >> (2 * c)) & 1) << 4;
                        q1 |= ((qh[e] >> (2 * c + 1)) & 1) << 4;
                    }
                    s0 += q0 * y[e];
                    s1 += q1 * y[e + 32];
                }
                lane[l] += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
            }
        }
        for (int l = 0; l < 8; l++) acc[l] = fmaf(d, (float)lane[l], acc[l]);
        int mp[4];
        for (int k = 0; k < 4; k++)
            mp[k] = m[2 * k] * (x[i].bsums[4 * k] + x[i].bsums[4 * k + 1]) +
                    m[2 * k + 1] * (x[i].bsums[4 * k + 2] + x[i].bsums[4 * k + 3]);
        if (q5) summ = fmaf(dmin, (float)(mp[0] + mp[1] + mp[2] + mp[3]), summ);
        else
            for (int k = 0; k < 4; k++) accm[k] = fmaf(dmin, (float)mp[k], accm[k]);
    }
    return kq_hsum8(acc) + (q5 ? summ : (accm[0] + accm[2]) + (accm[1] + accm[3]));
}

static float dot_q4_K(int64_t nb, const block_q4_K *w, const block_q8_K *x) {
    return kq_dot(nb, w, sizeof *w, false, x);
}

static float dot_q5_K(int64_t nb, const block_q5_K *w, const block_q8_K *x) {
    return kq_dot(nb, w, sizeof *w, true, x);
}

static float dot_q6_K(int64_t nb, const block_q6_K *w, const block_q8_K *x) {
    float sum = 0;
    for (int64_t i = 0; i < nb; i++) {
        int isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const int8_t *sc = w[i].scales + 8 * h;
            const int8_t *y = x[i].qs + 128 * h;
            int g[8] = {0}; /* per 16-group integer sums */
            for (int l = 0; l < 32; l++) {
                int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                g[l / 16] += q0 * y[l];
                g[2 + l / 16] += q1 * y[l + 32];
                g[4 + l / 16] += q2 * y[l + 64];
                g[6 + l / 16] += q3 * y[l + 96];
            }
            for (int k = 0; k < 8; k++) isum += sc[k] * g[k];
        }
        sum += (x[i].d * f16f(w[i].d)) * (float)isum;
    }
    return sum;
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

float bd_vec_dot_ref(uint32_t type, int64_t n, const void *w, const void *x) {
    const bd_type_traits *t = bd_type_get(type);
    if (!t || !t->supported || n < 0 || n % t->blck != 0) return NAN;
    int64_t nb = n / t->blck;
    switch (type) {
    case BD_TYPE_F32: {
        const float *a = w, *b = x;
        float sum = 0;
        for (int64_t i = 0; i < n; i++) sum += a[i] * b[i];
        return sum;
    }
    case BD_TYPE_F16: {
        const bd_f16 *a = w, *b = x;
        float sum = 0;
        for (int64_t i = 0; i < n; i++) sum += bd_f16_to_f32(a[i]) * bd_f16_to_f32(b[i]);
        return sum;
    }
    case BD_TYPE_BF16: {
        const bd_bf16 *a = w, *b = x;
        float sum = 0;
        for (int64_t i = 0; i < n; i++) sum += bd_bf16_to_f32(a[i]) * bd_bf16_to_f32(b[i]);
        return sum;
    }
    case BD_TYPE_Q4_0: return dot_q4_0(nb, w, x);
    case BD_TYPE_Q4_1: return dot_q4_1(nb, w, x);
    case BD_TYPE_Q5_0: return dot_q5_0(nb, w, x);
    case BD_TYPE_Q5_1: return dot_q5_1(nb, w, x);
    case BD_TYPE_Q8_0: return dot_q8_0(nb, w, x);
    case BD_TYPE_IQ4_NL: return dot_iq4_nl(nb, w, x);
    case BD_TYPE_Q4_K: return dot_q4_K(nb, w, x);
    case BD_TYPE_Q5_K: return dot_q5_K(nb, w, x);
    case BD_TYPE_Q6_K: return dot_q6_K(nb, w, x);
    case BD_TYPE_IQ4_XS: return dot_iq4_xs(nb, w, x);
    default: return NAN;
    }
}

/*
 * The tile order (Q4_K, Q6_K, Q8_0): the f32 steps of the AMX matmul
 * (kernels_amx.c), which computes each block's whole integer sum before
 * touching floats, so its f32 work is one or two fmas per block:
 *   Q4_K: sumi = sum_s sc_s * sum_{e in s} q_e y_e,  summ = sum_s m_s * (bsums 2s + 2s+1)
 *         acc = fmaf(dx * d, (float)sumi, acc); acc = fmaf(-(dx * dmin), (float)summ, acc)
 *   Q6_K: sumi = sum_s sc_s * (sum_{e in s} q_e y_e - 32 * bsums_s)   (q = 6-bit code)
 *         acc = fmaf(dx * d, (float)sumi, acc)
 *   Q8_0: sumi = sum_e q_e y_e (a 32-element block; activations Q8_0)
 *         acc = fmaf((float)sumi, dx * d, acc)
 * blocks in order, acc from +0. The integer sums equal those of the dots
 * above; only the f32 steps differ (so results agree to rounding).
 */
float bd_vec_dot_tile_ref(uint32_t type, int64_t n, const void *w, const void *x) {
    if (type == BD_TYPE_Q8_0) {
        if (n < 0 || n % QK8_0) return NAN;
        const block_q8_0 *b = w, *y = x;
        float acc = 0.0f;
        for (int64_t i = 0; i < n / QK8_0; i++) {
            int sumi = 0;
            for (int e = 0; e < QK8_0; e++) sumi += b[i].qs[e] * y[i].qs[e];
            acc = fmaf((float)sumi, f16f(y[i].d) * f16f(b[i].d), acc);
        }
        return acc;
    }
    if (n < 0 || n % QK_K) return NAN;
    const block_q8_K *y = x;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (type == BD_TYPE_Q4_K) {
            const block_q4_K *b = (const block_q4_K *)w + i;
            int sumi = 0, summ = 0;
            for (int s = 0; s < 8; s++) {
                int sc, m, isum = 0;
                kq_scale_min(b->scales, s, &sc, &m);
                for (int e = 0; e < 32; e++) {
                    uint8_t byte = b->qs[32 * (s / 2) + e];
                    isum += ((s & 1) ? byte >> 4 : byte & 0xF) * y[i].qs[32 * s + e];
                }
                sumi += sc * isum;
                summ += m * (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
            }
            acc = fmaf(y[i].d * f16f(b->d), (float)sumi, acc);
            acc = fmaf(-(y[i].d * f16f(b->dmin)), (float)summ, acc);
        } else if (type == BD_TYPE_Q6_K) {
            const block_q6_K *b = (const block_q6_K *)w + i;
            int sumi = 0;
            for (int s = 0; s < 16; s++) {
                int isum = 0;
                for (int e = 16 * s; e < 16 * s + 16; e++) {
                    int h = e / 128, l = e % 128, quarter = l / 32, j = l % 32;
                    uint8_t lo = b->ql[64 * h + j + 32 * (quarter & 1)];
                    int q = ((quarter < 2) ? (lo & 0xF) : (lo >> 4)) |
                            (((b->qh[32 * h + j] >> (2 * quarter)) & 3) << 4);
                    isum += q * y[i].qs[e];
                }
                sumi += b->scales[s] * (isum - 32 * y[i].bsums[s]);
            }
            acc = fmaf(y[i].d * f16f(b->d), (float)sumi, acc);
        } else {
            return NAN;
        }
    }
    return acc;
}
