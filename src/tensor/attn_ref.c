/*
 * attn_ref.c - scalar twins of the f32 attention kernels.
 *
 * The SIMD versions (kernels_avx2.c, kernels_avx512.c) perform exactly the
 * f32 operations written here, in the same order, so all three tables give
 * bit-identical results (tests/unit/test_kernels.c). The order is chosen to
 * vectorize, and it is fixed per output element: one query row's scores and
 * output do not depend on which other rows, heads or threads run beside it.
 * Speculative verification relies on that (model/attention.c).
 *
 * Canonical orders:
 *   scores  element i of a dot goes to lane i mod 16; each lane is an fma
 *           chain in increasing i starting from +0; the 16 lanes are summed
 *           as a tree: l + (l+8), then + (l+4), then + (l+2), then 0 + 1;
 *           the sum is multiplied by scale.
 *   softmax x[j] = bd_expf_poly(x[j] - mx); the sum of the results uses the
 *           same 16-lane layout over j (lane j mod 16, plain additions).
 *   accum   out[i] = fma(p[j], v_j[i], out[i]) for j = 0, 1, ..., starting
 *           from the caller's out (so a long j range may be split into
 *           consecutive calls without changing a bit).
 * The Gated DeltaNet step of the hybrid models (linear attention) is here
 * too; its order is stated in kernels.h. So are the conversions of a KV
 * cache's rows: f32 -> f16 rounding to nearest even and the exact widening
 * back, and q8_0 rows to f32.
 */
#include <math.h>

#include "kernels.h"

float bd_lanes16_tree(const float a[16]) {
    float b[8], c[4];
    for (int l = 0; l < 8; l++) b[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) c[l] = b[l] + b[l + 4];
    float d0 = c[0] + c[2], d1 = c[1] + c[3];
    return d0 + d1;
}

float bd_expf_poly(float x) {
    if (!(x >= BD_EXP_LO)) return 0.0f; /* also NaN: a score can't be NaN
                                           unless the model already is */
    if (x > BD_EXP_HI) x = BD_EXP_HI;
    float n = nearbyintf(x * BD_EXP_LOG2E);
    float r = fmaf(n, -BD_EXP_LN2_HI, x);
    r = fmaf(n, -BD_EXP_LN2_LO, r);
    float p = BD_EXP_C7;
    p = fmaf(p, r, BD_EXP_C6);
    p = fmaf(p, r, BD_EXP_C5);
    p = fmaf(p, r, BD_EXP_C4);
    p = fmaf(p, r, BD_EXP_C3);
    p = fmaf(p, r, BD_EXP_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    union { uint32_t u; float f; } s = {.u = (uint32_t)((int32_t)n + 127) << 23};
    return p * s.f;
}

static float scores_ref(int32_t hd, const float *q, const float *k, int64_t k_stride, int32_t len,
                        float scale, float *out) {
    float mx = -INFINITY;
    for (int32_t j = 0; j < len; j++) {
        const float *kr = k + (int64_t)j * k_stride;
        float acc[16] = {0};
        for (int32_t i = 0; i < hd; i++) acc[i & 15] = fmaf(q[i], kr[i], acc[i & 15]);
        out[j] = bd_lanes16_tree(acc) * scale;
        if (out[j] > mx) mx = out[j];
    }
    return mx;
}

static float softmax_ref(int32_t len, float *x, float mx) {
    float acc[16] = {0};
    for (int32_t j = 0; j < len; j++) {
        x[j] = bd_expf_poly(x[j] - mx);
        acc[j & 15] += x[j];
    }
    return bd_lanes16_tree(acc);
}

static void accum_ref(int32_t hd, const float *p, const float *v, int64_t v_stride, int32_t len,
                      float *out) {
    for (int32_t j = 0; j < len; j++) {
        const float *vr = v + (int64_t)j * v_stride;
        for (int32_t i = 0; i < hd; i++) out[i] = fmaf(p[j], vr[i], out[i]);
    }
}

static void f16_to_f32_ref(int64_t n, const bd_f16 *x, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = bd_f16_to_f32(x[i]);
}

static void f32_to_f16_ref(int64_t n, const float *x, bd_f16 *y) {
    for (int64_t i = 0; i < n; i++) y[i] = bd_f32_to_f16(x[i]);
}

/* the cache types' widening: the reference dequantizers */
#define KV_TO_F32_REF(NAME, TYPE) \
    static void NAME(int64_t n, const void *x, float *y) { bd_dequantize_row(TYPE, x, y, n); }
KV_TO_F32_REF(bf16_to_f32_ref, BD_TYPE_BF16)
KV_TO_F32_REF(q8_0_to_f32_ref, BD_TYPE_Q8_0)
KV_TO_F32_REF(q4_0_to_f32_ref, BD_TYPE_Q4_0)
KV_TO_F32_REF(q4_1_to_f32_ref, BD_TYPE_Q4_1)
KV_TO_F32_REF(iq4_nl_to_f32_ref, BD_TYPE_IQ4_NL)
KV_TO_F32_REF(q5_0_to_f32_ref, BD_TYPE_Q5_0)
KV_TO_F32_REF(q5_1_to_f32_ref, BD_TYPE_Q5_1)

float bd_expf_dd(float xf) {
    if (xf != xf) return xf; /* NaN */
    double x = xf;
    if (x < BD_EXPD_LO) x = BD_EXPD_LO;
    if (x > BD_EXPD_HI) x = BD_EXPD_HI;
    double n = nearbyint(x * BD_EXPD_LOG2E);
    double r = fma(n, -BD_EXPD_LN2_HI, x);
    r = fma(n, -BD_EXPD_LN2_LO, r);
    static const double c[10] = BD_EXPD_COEFS;
    double p = c[0];
    for (int k = 1; k < 10; k++) p = fma(p, r, c[k]);
    p = fma(p, r, 1.0);
    p = fma(p, r, 1.0);
    return (float)ldexp(p, (int)n);
}

/* SiLU through bd_expf_dd (not libm's expf) so that the SIMD tables can
 * match it bit for bit; the division is IEEE in both. */
static void silu_mul_ref(int64_t n, float *g, const float *u) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + bd_expf_dd(-g[i])) * u[i];
}

/* Gated DeltaNet step (kernels.h, bd_gdn_step_fn): dots in 16 lanes of
 * plain adds, merged by bd_lanes16_tree. */
static float gdn_dot16(const float *a, const float *b, int32_t n) {
    float acc[16] = {0};
    int32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] += a[i + l] * b[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] += a[i] * b[i];
    return bd_lanes16_tree(acc);
}

/* Rows are independent, so each row is finished before the next: one pass
 * over the state instead of four, the same arithmetic per element. */
void bd_gdn_step_ref(const float *src, float *dst, int32_t d_k, int32_t d_v, const float *k, const float *v,
                     float g, float beta, const float *q, float scale, float *out) {
    const float e = expf(g);
    for (int32_t j = 0; j < d_v; j++) {
        const float *ms = src + (int64_t)j * d_k;
        float *md = dst + (int64_t)j * d_k;
        for (int32_t i = 0; i < d_k; i++) md[i] = ms[i] * e;
        const float d = (v[j] - gdn_dot16(md, k, d_k)) * beta;
        for (int32_t i = 0; i < d_k; i++) md[i] += k[i] * d;
        if (q) out[j] = gdn_dot16(md, q, d_k) * scale;
    }
}

void bd_attn_kernels_fill_ref(bd_kernels *k) {
    k->silu_mul = silu_mul_ref;
    k->gdn_step = bd_gdn_step_ref;
    k->argmax = bd_argmax;
    k->attn_scores = scores_ref;
    k->attn_softmax = softmax_ref;
    k->attn_accum = accum_ref;
    k->f16_to_f32 = f16_to_f32_ref;
    k->f32_to_f16 = f32_to_f16_ref;
    k->kv_to_f32[BD_TYPE_BF16] = bf16_to_f32_ref;
    k->kv_to_f32[BD_TYPE_Q8_0] = q8_0_to_f32_ref;
    k->kv_to_f32[BD_TYPE_Q4_0] = q4_0_to_f32_ref;
    k->kv_to_f32[BD_TYPE_Q4_1] = q4_1_to_f32_ref;
    k->kv_to_f32[BD_TYPE_IQ4_NL] = iq4_nl_to_f32_ref;
    k->kv_to_f32[BD_TYPE_Q5_0] = q5_0_to_f32_ref;
    k->kv_to_f32[BD_TYPE_Q5_1] = q5_1_to_f32_ref;
}
