/*
 * quant_ref.c - scalar reference (de)quantization for the ggml block types.
 *
 * Dequantization follows the block formulas of ggml exactly (the layouts are
 * in tensor.h and shared/reference/gguf-and-architectures.md section 3).
 * Quantization is a round-to-nearest search in the spirit of ggml's
 * reference quantizers: same block encodings, same general strategy
 * (least-squares refits of block scales and mins), not bit-identical output.
 *
 * Rounding: every float->int step uses round-half-to-even (lrintf in the
 * default rounding mode), the same rule the SIMD conversions use, so the
 * scalar and SIMD activation quantizers produce identical blocks.
 */
#include <math.h>
#include <float.h>
#include <string.h>

#include "tensor.h"
#include "type_ref.h"

/* ------------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------- */

static inline int round_even(float v) { return (int)lrintf(v); }

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static inline float f16f(bd_f16 h) { return bd_f16_to_f32(h); }

/* The 6-bit scale and min of sub-block s (0..7) of a Q4_K/Q5_K block. */
static inline void kq_scale_min(const uint8_t *b, int s, int *sc, int *m) {
    if (s < 4) {
        *sc = b[s] & 63;
        *m = b[s + 4] & 63;
    } else {
        *sc = (b[s + 4] & 0x0F) | ((b[s - 4] >> 6) << 4);
        *m = (b[s + 4] >> 4) | ((b[s] >> 6) << 4);
    }
}

/* Inverse of kq_scale_min: pack eight 6-bit scales and mins into 12 bytes. */
static void kq_pack_scales(uint8_t *b, const uint8_t ls[8], const uint8_t lm[8]) {
    memset(b, 0, K_SCALE_SIZE);
    for (int s = 0; s < 8; s++) {
        if (s < 4) {
            b[s] = ls[s];
            b[s + 4] = lm[s];
        } else {
            b[s + 4] = (uint8_t)((ls[s] & 0x0F) | ((lm[s] & 0x0F) << 4));
            b[s - 4] |= (uint8_t)((ls[s] >> 4) << 6);
            b[s] |= (uint8_t)((lm[s] >> 4) << 6);
        }
    }
}

/* Index of the IQ4_NL table entry nearest to v (table is sorted). */
static inline int iq4_nearest(float v) {
    const int8_t *t = bd_kvalues_iq4nl;
    if (v <= t[0]) return 0;
    if (v >= t[15]) return 15;
    int lo = 0, hi = 15; /* invariant: t[lo] < v < t[hi] or equal at ends */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < t[mid]) hi = mid;
        else lo = mid;
    }
    return (v - t[lo] < t[hi] - v) ? lo : hi;
}

/* Value with the largest magnitude (keeps its sign); *amax gets |value|. */
static float signed_absmax(const float *x, int n, float *amax) {
    float m = 0.0f, a = 0.0f;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > a) {
            a = ax;
            m = x[i];
        }
    }
    *amax = a;
    return m;
}

/* ------------------------------------------------------------------------
 * Scale searches
 * ---------------------------------------------------------------------- */

/*
 * Asymmetric fit x[i] ~= scale * L[i] - min with L in 0..nmax, scale >= 0,
 * min >= 0 (i.e. the offset never goes above zero), minimizing the weighted
 * squared error. Tries nstep+1 candidate inverse scales around nmax/(max-min)
 * and refits scale and offset by weighted least squares for each assignment.
 * Returns scale; *min_out gets min.
 */
static float fit_scale_min(const float *x, const float *w, int n, int nmax, uint8_t *L,
                           float *min_out, float rmin, float rdelta, int nstep) {
    float lo = x[0], hi = x[0], sw = 0, sx = 0;
    for (int i = 0; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sw += w[i];
        sx += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi <= lo) { /* constant block (all equal, <= 0) */
        memset(L, 0, (size_t)n);
        *min_out = -lo;
        return 0.0f;
    }
    float iscale = nmax / (hi - lo);
    float scale = 1.0f / iscale;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(round_even(iscale * (x[i] - lo)), 0, nmax);
        L[i] = (uint8_t)l;
        float diff = scale * l + lo - x[i];
        best_err += w[i] * diff * diff;
    }
    uint8_t Laux[32];
    for (int is = 0; is <= nstep; is++) {
        float is_try = (rmin + rdelta * is + nmax) / (hi - lo);
        float sl = 0, sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(round_even(is_try * (x[i] - lo)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sl += w[i] * l;
            sl2 += w[i] * l * l;
            sxl += w[i] * l * x[i];
        }
        float D = sw * sl2 - sl * sl;
        if (D <= 0) continue;
        float s_try = (sw * sxl - sx * sl) / D;
        float m_try = (sl2 * sx - sl * sxl) / D; /* offset, want <= 0 */
        if (m_try > 0) {
            m_try = 0;
            s_try = sl2 > 0 ? sxl / sl2 : 0;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = s_try * Laux[i] + m_try - x[i];
            err += w[i] * diff * diff;
        }
        if (err < best_err) {
            best_err = err;
            memcpy(L, Laux, (size_t)n);
            scale = s_try;
            lo = m_try;
        }
    }
    *min_out = -lo;
    return scale;
}

/*
 * Symmetric fit x[i] ~= scale * l[i], l in -nmax..nmax-1, weighted by w.
 * The largest-magnitude value maps to -nmax (uses the extra negative code);
 * candidates around that inverse scale are refit by least squares.
 * L gets l + nmax (0..2*nmax-1). Returns scale (may be negative).
 */
static float fit_scale_sym(const float *x, const float *w, int n, int nmax, uint8_t *L) {
    float amax;
    float max = signed_absmax(x, n, &amax);
    if (amax < 1e-30f) {
        memset(L, nmax, (size_t)n);
        return 0.0f;
    }
    float best_scale = 0, best_score = -1;
    uint8_t Laux[32];
    for (int is = -9; is <= 9; is++) {
        float iscale = -(nmax + 0.1f * is) / max;
        float sxl = 0, sl2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(round_even(iscale * x[i]), -nmax, nmax - 1);
            Laux[i] = (uint8_t)(l + nmax);
            sxl += w[i] * x[i] * l;
            sl2 += w[i] * l * l;
        }
        /* error = sum w x^2 - sxl^2/sl2, so maximize sxl^2/sl2 */
        if (sl2 > 0) {
            float score = sxl * sxl / sl2;
            if (score > best_score) {
                best_score = score;
                best_scale = sxl / sl2;
                memcpy(L, Laux, (size_t)n);
            }
        }
    }
    return best_scale;
}

/*
 * Fit x[i] ~= d * kvalues_iq4nl[L[i]] (unweighted). Tries inverse scales that
 * map the largest-magnitude value near the table ends, refits d by least
 * squares. Returns d (may be negative).
 */
static float fit_iq4(const float *x, int n, uint8_t *L) {
    float amax;
    float max = signed_absmax(x, n, &amax);
    if (amax < 1e-30f) {
        memset(L, 8, (size_t)n); /* index 8 is the value 1, times d = 0 */
        return 0.0f;
    }
    float best_d = 0, best_score = -1;
    uint8_t Laux[32];
    for (int it = -20; it <= 20; it++) {
        /* the sign of max picks the table end: max -> about -127 */
        float id = (bd_kvalues_iq4nl[0] + 0.5f * it) / max;
        float sqx = 0, sq2 = 0;
        for (int i = 0; i < n; i++) {
            int l = iq4_nearest(id * x[i]);
            Laux[i] = (uint8_t)l;
            float q = bd_kvalues_iq4nl[l];
            sqx += q * x[i];
            sq2 += q * q;
        }
        if (sq2 > 0 && sqx * sqx / sq2 > best_score) {
            best_score = sqx * sqx / sq2;
            best_d = sqx / sq2;
            memcpy(L, Laux, (size_t)n);
        }
    }
    return best_d;
}

/* ------------------------------------------------------------------------
 * Dequantization
 * ---------------------------------------------------------------------- */

static void deq_q4_0(const block_q4_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK4_0) {
        float d = f16f(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * ((b[i].qs[j] & 0xF) - 8);
            y[j + 16] = d * ((b[i].qs[j] >> 4) - 8);
        }
    }
}

static void deq_q4_1(const block_q4_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK4_1) {
        float d = f16f(b[i].d), m = f16f(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (b[i].qs[j] & 0xF) + m;
            y[j + 16] = d * (b[i].qs[j] >> 4) + m;
        }
    }
}

static void deq_q5_0(const block_q5_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK5_0) {
        float d = f16f(b[i].d);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            y[j] = d * (((b[i].qs[j] & 0xF) | (h0 << 4)) - 16);
            y[j + 16] = d * (((b[i].qs[j] >> 4) | (h1 << 4)) - 16);
        }
    }
}

static void deq_q5_1(const block_q5_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK5_1) {
        float d = f16f(b[i].d), m = f16f(b[i].m);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            y[j] = d * ((b[i].qs[j] & 0xF) | (h0 << 4)) + m;
            y[j + 16] = d * ((b[i].qs[j] >> 4) | (h1 << 4)) + m;
        }
    }
}

static void deq_q8_0(const block_q8_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK8_0) {
        float d = f16f(b[i].d);
        for (int j = 0; j < QK8_0; j++) y[j] = d * b[i].qs[j];
    }
}

static void deq_q8_1(const block_q8_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK8_1) {
        float d = f16f(b[i].d);
        for (int j = 0; j < QK8_1; j++) y[j] = d * b[i].qs[j];
    }
}

static void deq_q8_K(const block_q8_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK_K)
        for (int j = 0; j < QK_K; j++) y[j] = b[i].d * b[i].qs[j];
}

/* Q2_K / Q3_K: element e's 2-bit code sits at bits 2 * (e % 128 / 32) of
 * qs[32 * (e / 128) + e % 32] (bd_k23_code); Q3_K's high bit is bit e / 32
 * of hmask[e % 32]. */
static void deq_q2_K(const block_q2_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK_K) {
        float d = f16f(b[i].d), dmin = f16f(b[i].dmin);
        for (int e = 0; e < QK_K; e++) {
            const int sc = b[i].scales[e / 16];
            y[e] = d * (sc & 0xF) * bd_k23_code(b[i].qs, e) - dmin * (sc >> 4);
        }
    }
}

static void deq_q3_K(const block_q3_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK_K) {
        float d = f16f(b[i].d);
        for (int e = 0; e < QK_K; e++) {
            const int hbit = (b[i].hmask[e % 32] >> (e / 32)) & 1;
            y[e] = d * (bd_q3k_scale(b[i].scales, e / 16) - 32) * (bd_k23_code(b[i].qs, e) - (hbit ? 0 : 4));
        }
    }
}

static void deq_q4_K(const block_q4_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK_K) {
        float d = f16f(b[i].d), dmin = f16f(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            int sc0, m0, sc1, m1;
            kq_scale_min(b[i].scales, 2 * c, &sc0, &m0);
            kq_scale_min(b[i].scales, 2 * c + 1, &sc1, &m1);
            float d0 = d * sc0, o0 = dmin * m0, d1 = d * sc1, o1 = dmin * m1;
            const uint8_t *q = b[i].qs + 32 * c;
            for (int l = 0; l < 32; l++) {
                y[64 * c + l] = d0 * (q[l] & 0xF) - o0;
                y[64 * c + 32 + l] = d1 * (q[l] >> 4) - o1;
            }
        }
    }
}

static void deq_q5_K(const block_q5_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK_K) {
        float d = f16f(b[i].d), dmin = f16f(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            int sc0, m0, sc1, m1;
            kq_scale_min(b[i].scales, 2 * c, &sc0, &m0);
            kq_scale_min(b[i].scales, 2 * c + 1, &sc1, &m1);
            float d0 = d * sc0, o0 = dmin * m0, d1 = d * sc1, o1 = dmin * m1;
            const uint8_t *q = b[i].qs + 32 * c;
            for (int l = 0; l < 32; l++) {
                int h0 = (b[i].qh[l] >> (2 * c)) & 1, h1 = (b[i].qh[l] >> (2 * c + 1)) & 1;
                y[64 * c + l] = d0 * ((q[l] & 0xF) + 16 * h0) - o0;
                y[64 * c + 32 + l] = d1 * ((q[l] >> 4) + 16 * h1) - o1;
            }
        }
    }
}

static void deq_q6_K(const block_q6_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK_K) {
        float d = f16f(b[i].d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const int8_t *sc = b[i].scales + 8 * h;
            float *yh = y + 128 * h;
            for (int l = 0; l < 32; l++) {
                int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                /* group of element e is e/16: l/16, (l+32)/16 = 2 + l/16, ... */
                yh[l] = d * sc[l / 16] * q0;
                yh[l + 32] = d * sc[2 + l / 16] * q1;
                yh[l + 64] = d * sc[4 + l / 16] * q2;
                yh[l + 96] = d * sc[6 + l / 16] * q3;
            }
        }
    }
}

static void deq_iq4_nl(const block_iq4_nl *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += QK4_NL) {
        float d = f16f(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * bd_kvalues_iq4nl[b[i].qs[j] & 0xF];
            y[j + 16] = d * bd_kvalues_iq4nl[b[i].qs[j] >> 4];
        }
    }
}

static void deq_iq4_xs(const block_iq4_xs *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = f16f(b[i].d);
        for (int ib = 0; ib < 8; ib++, y += 32) {
            int ls = ((b[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                     (((b[i].scales_h >> (2 * ib)) & 3) << 4);
            float dl = d * (ls - 32);
            const uint8_t *q = b[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * bd_kvalues_iq4nl[q[j] & 0xF];
                y[j + 16] = dl * bd_kvalues_iq4nl[q[j] >> 4];
            }
        }
    }
}

/* The type table's dequantizers (types.c; n is a multiple of the block
 * size, bd_dequantize_row checks it). */
void bd_ref_dequantize_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void bd_ref_dequantize_f16(const void *src, float *dst, int64_t n) {
    const bd_f16 *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = bd_f16_to_f32(h[i]);
}

void bd_ref_dequantize_bf16(const void *src, float *dst, int64_t n) {
    const bd_bf16 *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = bd_bf16_to_f32(h[i]);
}

#define REF_DEQUANTIZE(T, QK) \
    void bd_ref_dequantize_##T(const void *src, float *dst, int64_t n) { deq_##T(src, dst, n / (QK)); }
REF_DEQUANTIZE(q4_0, QK4_0)
REF_DEQUANTIZE(q4_1, QK4_1)
REF_DEQUANTIZE(q5_0, QK5_0)
REF_DEQUANTIZE(q5_1, QK5_1)
REF_DEQUANTIZE(q8_0, QK8_0)
REF_DEQUANTIZE(q8_1, QK8_1)
REF_DEQUANTIZE(q8_K, QK_K)
REF_DEQUANTIZE(q2_K, QK_K)
REF_DEQUANTIZE(q3_K, QK_K)
REF_DEQUANTIZE(q4_K, QK_K)
REF_DEQUANTIZE(q5_K, QK_K)
REF_DEQUANTIZE(q6_K, QK_K)
REF_DEQUANTIZE(iq4_nl, QK4_NL)
REF_DEQUANTIZE(iq4_xs, QK_K)

/* ------------------------------------------------------------------------
 * Quantization: activation formats (Q8_0, Q8_1, Q8_K)
 *
 * These are also the from_float kernels; the SIMD twins compute the same
 * thing (id = 127/amax, round half to even) and must match bit for bit.
 * ---------------------------------------------------------------------- */

static void q_q8_0(const float *x, block_q8_0 *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK8_0) {
        float amax = 0;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f;
        float id = amax > 0 ? 127.0f / amax : 0.0f;
        b[i].d = bd_f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++) b[i].qs[j] = (int8_t)round_even(x[j] * id);
    }
}

static void q_q8_1(const float *x, block_q8_1 *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK8_1) {
        float amax = 0;
        for (int j = 0; j < QK8_1; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f;
        float id = amax > 0 ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            b[i].qs[j] = (int8_t)round_even(x[j] * id);
            sum += b[i].qs[j];
        }
        b[i].d = bd_f32_to_f16(d);
        b[i].s = bd_f32_to_f16(d * (float)sum);
    }
}

static void q_q8_K(const float *x, block_q8_K *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        float amax;
        float max = signed_absmax(x, QK_K, &amax);
        if (amax == 0) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        /* max maps to -127 exactly; the other sign can reach +127 only. */
        float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = round_even(iscale * x[j]);
            b[i].qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += b[i].qs[16 * g + j];
            b[i].bsums[g] = (int16_t)s;
        }
        b[i].d = 1.0f / iscale;
    }
}

/* ------------------------------------------------------------------------
 * Quantization: weight formats
 * ---------------------------------------------------------------------- */

static void q_q4_0(const float *x, block_q4_0 *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK4_0) {
        float amax;
        float max = signed_absmax(x, QK4_0, &amax);
        float d = max / -8.0f; /* max -> code 0 (value -8): uses the extra level */
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = bd_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int q0 = clampi(round_even(x[j] * id) + 8, 0, 15);
            int q1 = clampi(round_even(x[j + 16] * id) + 8, 0, 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void q_q4_1(const float *x, block_q4_1 *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK4_1) {
        float lo = x[0], hi = x[0];
        for (int j = 1; j < QK4_1; j++) {
            lo = fminf(lo, x[j]);
            hi = fmaxf(hi, x[j]);
        }
        float d = (hi - lo) / 15.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = bd_f32_to_f16(d);
        b[i].m = bd_f32_to_f16(lo);
        for (int j = 0; j < 16; j++) {
            int q0 = clampi(round_even((x[j] - lo) * id), 0, 15);
            int q1 = clampi(round_even((x[j + 16] - lo) * id), 0, 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void q_q5_0(const float *x, block_q5_0 *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK5_0) {
        float amax;
        float max = signed_absmax(x, QK5_0, &amax);
        float d = max / -16.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = bd_f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = clampi(round_even(x[j] * id) + 16, 0, 31);
            int q1 = clampi(round_even(x[j + 16] * id) + 16, 0, 31);
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        memcpy(b[i].qh, &qh, 4);
    }
}

static void q_q5_1(const float *x, block_q5_1 *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK5_1) {
        float lo = x[0], hi = x[0];
        for (int j = 1; j < QK5_1; j++) {
            lo = fminf(lo, x[j]);
            hi = fmaxf(hi, x[j]);
        }
        float d = (hi - lo) / 31.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = bd_f32_to_f16(d);
        b[i].m = bd_f32_to_f16(lo);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = clampi(round_even((x[j] - lo) * id), 0, 31);
            int q1 = clampi(round_even((x[j + 16] - lo) * id), 0, 31);
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        memcpy(b[i].qh, &qh, 4);
    }
}

static void q_iq4_nl(const float *x, block_iq4_nl *b, int64_t nb) {
    uint8_t L[32];
    for (int64_t i = 0; i < nb; i++, x += QK4_NL) {
        float d = fit_iq4(x, QK4_NL, L);
        b[i].d = bd_f32_to_f16(d);
        /* requantize against the f16-rounded scale that readers will see */
        float dq = f16f(b[i].d);
        if (dq != 0)
            for (int j = 0; j < 32; j++) L[j] = (uint8_t)iq4_nearest(x[j] / dq);
        for (int j = 0; j < 16; j++) b[i].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

static void q_iq4_xs(const float *x, block_iq4_xs *b, int64_t nb) {
    uint8_t L[QK_K];
    float scales[8];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        float max_s = 0, amax_s = 0;
        for (int ib = 0; ib < 8; ib++) {
            scales[ib] = fit_iq4(x + 32 * ib, 32, L + 32 * ib);
            if (fabsf(scales[ib]) > amax_s) {
                amax_s = fabsf(scales[ib]);
                max_s = scales[ib];
            }
        }
        memset(&b[i], 0, sizeof b[i]);
        if (amax_s == 0) {
            /* all-zero block: d = 0; ls = 32 (low nibble 0, high bits 2)
             * also makes every sub-scale zero on its own */
            b[i].scales_h = 0xAAAA;
            continue;
        }
        float d = -max_s / 32.0f; /* largest scale -> ls-32 = -32 */
        b[i].d = bd_f32_to_f16(d);
        float dq = f16f(b[i].d);
        float id = dq != 0 ? 1.0f / dq : 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            int l = clampi(round_even(id * scales[ib]), -32, 31);
            float dl = dq * l;
            const float *xb = x + 32 * ib;
            uint8_t *Lb = L + 32 * ib;
            if (dl != 0)
                for (int j = 0; j < 32; j++) Lb[j] = (uint8_t)iq4_nearest(xb[j] / dl);
            int ls = l + 32;
            b[i].scales_l[ib / 2] |= (uint8_t)((ls & 0xF) << (4 * (ib % 2)));
            b[i].scales_h |= (uint16_t)((ls >> 4) << (2 * ib));
            for (int j = 0; j < 16; j++)
                b[i].qs[16 * ib + j] = (uint8_t)(Lb[j] | (Lb[j + 16] << 4));
        }
    }
}

/* The symmetric fit of each of the 16 groups of 16 in a 256-block (weights
 * x^2, as ggml): sc[g] and codes L (0..2 nmax - 1); returns the scale of
 * largest magnitude, with its sign (0 for an all-zero block). Q3_K / Q6_K. */
static float fit_groups16_sym(const float *x, int nmax, uint8_t *L, float sc[16]) {
    float w[16], max_s = 0, amax_s = 0;
    for (int g = 0; g < 16; g++) {
        for (int l = 0; l < 16; l++) w[l] = x[16 * g + l] * x[16 * g + l];
        sc[g] = fit_scale_sym(x + 16 * g, w, 16, nmax, L + 16 * g);
        if (fabsf(sc[g]) > amax_s) {
            amax_s = fabsf(sc[g]);
            max_s = sc[g];
        }
    }
    return max_s;
}

/* Q2_K / Q3_K: write 256 codes L (0..3, Q3_K: 0..7) into the block's qs
 * (and hmask: the code's bit 2, which Q3_K reads as "no -4"). */
static void k23_pack(const uint8_t *L, uint8_t *qs, uint8_t *hmask) {
    memset(qs, 0, QK_K / 4);
    if (hmask) memset(hmask, 0, QK_K / 8);
    for (int e = 0; e < QK_K; e++) {
        qs[32 * (e / 128) + e % 32] |= (uint8_t)((L[e] & 3) << (2 * (e % 128 / 32)));
        if (hmask) hmask[e % 32] |= (uint8_t)((L[e] >> 2) << (e / 32));
    }
}

/*
 * Q2_K: per sub-block of 16 an asymmetric fit with codes 0..3 (weights
 * av + |x| as for Q4_K), then the sixteen scales and mins become 4-bit
 * codes against d = max_scale / 15 and dmin = max_min / 15, and the codes
 * are recomputed against the final values.
 */
static void q_q2_K(const float *x, block_q2_K *b, int64_t nb) {
    uint8_t L[QK_K];
    float w[16], sc[16], mn[16];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        float sum_x2 = 0;
        for (int j = 0; j < QK_K; j++) sum_x2 += x[j] * x[j];
        const float av = sqrtf(sum_x2 / QK_K);
        float max_sc = 0, max_mn = 0;
        for (int s = 0; s < 16; s++) {
            for (int l = 0; l < 16; l++) w[l] = av + fabsf(x[16 * s + l]);
            sc[s] = fit_scale_min(x + 16 * s, w, 16, 3, L + 16 * s, &mn[s], -0.5f, 0.1f, 15);
            if (sc[s] > max_sc) max_sc = sc[s];
            if (mn[s] > max_mn) max_mn = mn[s];
        }
        const float isc = max_sc > 0 ? 15.0f / max_sc : 0.0f, imn = max_mn > 0 ? 15.0f / max_mn : 0.0f;
        b[i].d = bd_f32_to_f16(max_sc / 15.0f);
        b[i].dmin = bd_f32_to_f16(max_mn / 15.0f);
        const float d = f16f(b[i].d), dmin = f16f(b[i].dmin);
        for (int s = 0; s < 16; s++) {
            const int ls = clampi(round_even(isc * sc[s]), 0, 15), lm = clampi(round_even(imn * mn[s]), 0, 15);
            b[i].scales[s] = (uint8_t)(ls | (lm << 4));
            const float ds = d * ls, dm = dmin * lm;
            if (ds == 0) continue; /* keep the fit's codes (all decode to -dm) */
            for (int l = 0; l < 16; l++)
                L[16 * s + l] = (uint8_t)clampi(round_even((x[16 * s + l] + dm) / ds), 0, 3);
        }
        k23_pack(L, b[i].qs, NULL);
    }
}

/*
 * Q3_K: symmetric fit of each sub-block of 16 with codes -4..3 (weights
 * x^2), then the sixteen scales become 6-bit codes sc - 32 against
 * d = max_scale / -32, and the codes are recomputed against the final
 * scales.
 */
static void q_q3_K(const float *x, block_q3_K *b, int64_t nb) {
    uint8_t L[QK_K];
    float sc[16];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        const float max_s = fit_groups16_sym(x, 4, L, sc);
        memset(b[i].scales, 0, sizeof b[i].scales);
        const float iscale = max_s != 0 ? -32.0f / max_s : 0.0f;
        b[i].d = bd_f32_to_f16(max_s != 0 ? 1.0f / iscale : 0.0f);
        const float d = f16f(b[i].d);
        for (int s = 0; s < 16; s++) {
            const int q = clampi(round_even(iscale * sc[s]), -32, 31), v = q + 32;
            if (s < 8) b[i].scales[s] |= (uint8_t)(v & 0xF);
            else b[i].scales[s - 8] |= (uint8_t)((v & 0xF) << 4);
            b[i].scales[8 + s % 4] |= (uint8_t)((v >> 4) << (2 * (s / 4)));
            const float ds = d * q;
            if (ds == 0) {
                memset(L + 16 * s, 4, 16); /* code 4 decodes to 0 */
                continue;
            }
            for (int l = 0; l < 16; l++)
                L[16 * s + l] = (uint8_t)(clampi(round_even(x[16 * s + l] / ds), -4, 3) + 4);
        }
        k23_pack(L, b[i].qs, b[i].hmask);
    }
}

/*
 * Q4_K / Q5_K share everything but the number of levels and the qh plane.
 * Per sub-block of 32: asymmetric fit with weights av + |x| (favouring
 * large values, as ggml does), then the eight scales and mins are quantized
 * to 6 bits against the block's d = max_scale/63 and dmin = max_min/63, and
 * the quants are recomputed against the final (f16-rounded) values.
 */
static void q_kquant(const float *x, uint8_t *scales, bd_f16 *dp, bd_f16 *dminp, uint8_t *L,
                     int nmax) {
    float w[32], sc[8], mn[8];
    float sum_x2 = 0;
    for (int j = 0; j < QK_K; j++) sum_x2 += x[j] * x[j];
    float av = sqrtf(sum_x2 / QK_K);
    float max_sc = 0, max_mn = 0;
    for (int s = 0; s < 8; s++) {
        for (int l = 0; l < 32; l++) w[l] = av + fabsf(x[32 * s + l]);
        if (nmax == 15)
            sc[s] = fit_scale_min(x + 32 * s, w, 32, nmax, L + 32 * s, &mn[s], -1.0f, 0.1f, 20);
        else
            sc[s] = fit_scale_min(x + 32 * s, w, 32, nmax, L + 32 * s, &mn[s], -0.5f, 0.1f, 15);
        if (sc[s] > max_sc) max_sc = sc[s];
        if (mn[s] > max_mn) max_mn = mn[s];
    }
    uint8_t ls[8], lm[8];
    float isc = max_sc > 0 ? 63.0f / max_sc : 0.0f;
    float imn = max_mn > 0 ? 63.0f / max_mn : 0.0f;
    for (int s = 0; s < 8; s++) {
        ls[s] = (uint8_t)clampi(round_even(isc * sc[s]), 0, 63);
        lm[s] = (uint8_t)clampi(round_even(imn * mn[s]), 0, 63);
    }
    kq_pack_scales(scales, ls, lm);
    *dp = bd_f32_to_f16(max_sc / 63.0f);
    *dminp = bd_f32_to_f16(max_mn / 63.0f);
    float d = f16f(*dp), dmin = f16f(*dminp);
    for (int s = 0; s < 8; s++) {
        float ds = d * ls[s];
        if (ds == 0) continue; /* keep the fit's L (all map to -dm anyway) */
        float dm = dmin * lm[s];
        for (int l = 0; l < 32; l++)
            L[32 * s + l] = (uint8_t)clampi(round_even((x[32 * s + l] + dm) / ds), 0, nmax);
    }
}

static void q_q4_K(const float *x, block_q4_K *b, int64_t nb) {
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        q_kquant(x, b[i].scales, &b[i].d, &b[i].dmin, L, 15);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

static void q_q5_K(const float *x, block_q5_K *b, int64_t nb) {
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        q_kquant(x, b[i].scales, &b[i].d, &b[i].dmin, L, 31);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int a = L[64 * c + l], h = L[64 * c + 32 + l];
                b[i].qs[32 * c + l] = (uint8_t)((a & 0xF) | ((h & 0xF) << 4));
                b[i].qh[l] |= (uint8_t)(((a >> 4) << (2 * c)) | ((h >> 4) << (2 * c + 1)));
            }
    }
}

/*
 * Q6_K: symmetric fit of each 16-group (weights x^2, as ggml), then the 16
 * group scales become int8 against d = max_scale / -128, and the quants are
 * recomputed against the final scales.
 */
static void q_q6_K(const float *x, block_q6_K *b, int64_t nb) {
    uint8_t L[QK_K];
    float sc[16];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        const float max_s = fit_groups16_sym(x, 32, L, sc);
        memset(&b[i], 0, sizeof b[i]);
        if (max_s == 0) {
            /* codes of 32 decode to zero whatever d is */
            memset(b[i].ql, 0, sizeof b[i].ql);
            memset(b[i].qh, 0xAA, sizeof b[i].qh); /* high bits 2 -> code 32 */
            continue;
        }
        float iscale = -128.0f / max_s;
        b[i].d = bd_f32_to_f16(1.0f / iscale);
        float d = f16f(b[i].d);
        for (int g = 0; g < 16; g++) {
            int q = clampi(round_even(iscale * sc[g]), -128, 127);
            b[i].scales[g] = (int8_t)q;
            float dg = d * q;
            if (dg == 0) {
                memset(L + 16 * g, 32, 16);
                continue;
            }
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (uint8_t)(clampi(round_even(x[16 * g + l] / dg), -32, 31) + 32);
        }
        for (int h = 0; h < 2; h++) {
            const uint8_t *Lh = L + 128 * h;
            uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                  ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

/* The type table's quantizers (types.c; n is a multiple of the block
 * size, bd_quantize_row checks it). */
void bd_ref_quantize_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void bd_ref_quantize_f16(const float *src, void *dst, int64_t n) {
    bd_f16 *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = bd_f32_to_f16(src[i]);
}

void bd_ref_quantize_bf16(const float *src, void *dst, int64_t n) {
    bd_bf16 *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = bd_f32_to_bf16(src[i]);
}

#define REF_QUANTIZE(T, QK) \
    void bd_ref_quantize_##T(const float *src, void *dst, int64_t n) { q_##T(src, dst, n / (QK)); }
REF_QUANTIZE(q4_0, QK4_0)
REF_QUANTIZE(q4_1, QK4_1)
REF_QUANTIZE(q5_0, QK5_0)
REF_QUANTIZE(q5_1, QK5_1)
REF_QUANTIZE(q8_0, QK8_0)
REF_QUANTIZE(q8_1, QK8_1)
REF_QUANTIZE(q8_K, QK_K)
REF_QUANTIZE(q2_K, QK_K)
REF_QUANTIZE(q3_K, QK_K)
REF_QUANTIZE(q4_K, QK_K)
REF_QUANTIZE(q5_K, QK_K)
REF_QUANTIZE(q6_K, QK_K)
REF_QUANTIZE(iq4_nl, QK4_NL)
REF_QUANTIZE(iq4_xs, QK_K)

/* ------------------------------------------------------------------------
 * KV cache rows, as llama.cpp's CPU backend stores them: its type traits'
 * from_float, ggml's row quantizers (quantize_row_*_ref). The scale rules
 * are those of the weight quantizers above; the codes differ where those
 * round halves to even: ggml truncates v + 0.5 (v + 8.5 for q4_0, v + 16.5
 * for q5_0) after the float add, and fits an iq4_nl block's scale once,
 * weighted by x^2, with no search (its file quantizer searches, as q_iq4_nl
 * does). An attention that reads such a cache sees the values llama.cpp's
 * does.
 * ---------------------------------------------------------------------- */

/* (int)v clamped to [0, hi]: ggml's MIN(hi, (int8_t)v) for the v its
 * quantizers form (>= -0.5 or so), defined for any float (NaN -> 0). */
static inline int kv_code(float v, int hi) {
    if (!(v > 0.0f)) return 0;
    return v >= (float)hi ? hi : (int)v;
}

/* The affine types' (q4_1, q5_1) block of n: min m and scale d = (max -
 * min) / levels stored, *lo = the min; returns 1 / d (0 for d = 0). */
static float kv_affine(const float *x, int n, float levels, bd_f16 *d16, bd_f16 *m16, float *lo) {
    float hi = -FLT_MAX;
    *lo = FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *lo) *lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    const float d = (hi - *lo) / levels;
    *d16 = bd_f32_to_f16(d);
    *m16 = bd_f32_to_f16(*lo);
    return d != 0.0f ? 1.0f / d : 0.0f;
}

/* The value of largest magnitude, the first of ties, as ggml picks it. */
static float kv_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void kv_q4_0(const float *x, block_q4_0 *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK4_0) {
        const float d = kv_absmax(x, QK4_0) / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = bd_f32_to_f16(d);
        for (int j = 0; j < QK4_0 / 2; j++)
            b[i].qs[j] = (uint8_t)(kv_code(x[j] * id + 8.5f, 15) | kv_code(x[j + 16] * id + 8.5f, 15) << 4);
    }
}

static void kv_q4_1(const float *x, block_q4_1 *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK4_1) {
        float lo;
        const float id = kv_affine(x, QK4_1, 15.0f, &b[i].d, &b[i].m, &lo);
        for (int j = 0; j < QK4_1 / 2; j++)
            b[i].qs[j] =
                (uint8_t)(kv_code((x[j] - lo) * id + 0.5f, 15) | kv_code((x[j + 16] - lo) * id + 0.5f, 15) << 4);
    }
}

/* Codes c[0..32) of a 5-bit block into its qs / qh. */
static void kv_pack5(const int *c, uint8_t *qs, uint8_t *qh_out) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((c[j] & 0xF) | (c[j + 16] & 0xF) << 4);
        qh |= (uint32_t)(c[j] >> 4) << j | (uint32_t)(c[j + 16] >> 4) << (j + 16);
    }
    memcpy(qh_out, &qh, 4);
}

static void kv_q5_0(const float *x, block_q5_0 *b, int64_t nb) {
    int c[QK5_0];
    for (int64_t i = 0; i < nb; i++, x += QK5_0) {
        const float d = kv_absmax(x, QK5_0) / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = bd_f32_to_f16(d);
        for (int j = 0; j < QK5_0; j++) c[j] = kv_code(x[j] * id + 16.5f, 31);
        kv_pack5(c, b[i].qs, b[i].qh);
    }
}

static void kv_q5_1(const float *x, block_q5_1 *b, int64_t nb) {
    int c[QK5_1];
    for (int64_t i = 0; i < nb; i++, x += QK5_1) {
        float lo;
        const float id = kv_affine(x, QK5_1, 31.0f, &b[i].d, &b[i].m, &lo);
        for (int j = 0; j < QK5_1; j++) c[j] = kv_code((x[j] - lo) * id + 0.5f, 31);
        kv_pack5(c, b[i].qs, b[i].qh);
    }
}

/* iq4_nl: d from the value of largest magnitude (to the table's -127 end),
 * codes nearest to x / d, then d refit by least squares weighted by x^2
 * (the codes kept). */
static void kv_iq4_nl(const float *x, block_iq4_nl *b, int64_t nb) {
    uint8_t L[QK4_NL];
    for (int64_t i = 0; i < nb; i++, x += QK4_NL) {
        const float max = kv_absmax(x, QK4_NL);
        float d = 0.0f;
        memset(L, 0, sizeof L);
        if (fabsf(max) >= 1e-15f) {
            const float id = 1.0f / (max / bd_kvalues_iq4nl[0]);
            float sumqx = 0.0f, sumq2 = 0.0f;
            for (int j = 0; j < QK4_NL; j++) {
                L[j] = (uint8_t)iq4_nearest(id * x[j]);
                const float q = bd_kvalues_iq4nl[L[j]], w = x[j] * x[j];
                sumqx += w * q * x[j];
                sumq2 += w * q * q;
            }
            d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
        }
        b[i].d = bd_f32_to_f16(d);
        for (int j = 0; j < QK4_NL / 2; j++) b[i].qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
    }
}

bool bd_quantize_row_kv(uint32_t type, const float *src, void *dst, int64_t n) {
    uint64_t bytes;
    if (!bd_row_size(type, n, &bytes)) return false;
    switch (type) {
    case BD_TYPE_Q4_0: kv_q4_0(src, dst, n / QK4_0); return true;
    case BD_TYPE_Q4_1: kv_q4_1(src, dst, n / QK4_1); return true;
    case BD_TYPE_Q5_0: kv_q5_0(src, dst, n / QK5_0); return true;
    case BD_TYPE_Q5_1: kv_q5_1(src, dst, n / QK5_1); return true;
    case BD_TYPE_IQ4_NL: kv_iq4_nl(src, dst, n / QK4_NL); return true;
    default: return bd_quantize_row(type, src, dst, n);
    }
}
