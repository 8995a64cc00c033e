/*
 * ops.c - per-row operations shared by the target and drafter forwards.
 * Accumulations follow ggml (double sums for norms and softmax) so our
 * results stay within rounding of llama.cpp's.
 */
#include <math.h>

#include "model.h"

void bd_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    if (w)
        for (int64_t i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
    else
        for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale;
}

void bd_rmsnorm_rows(float *out, const float *x, const float *w, int64_t n, float eps, int64_t rows,
                     int64_t stride) {
    int64_t r = 0;
    /* four rows at once: four independent chains of double additions, so
     * the adder's latency is paid once per four rows; each row's sum is
     * still taken in element order, as bd_rmsnorm does */
    for (; r + 4 <= rows; r += 4) {
        const float *x0 = x + r * stride, *x1 = x0 + stride, *x2 = x1 + stride, *x3 = x2 + stride;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        for (int64_t i = 0; i < n; i++) {
            s0 += (double)(x0[i] * x0[i]);
            s1 += (double)(x1[i] * x1[i]);
            s2 += (double)(x2[i] * x2[i]);
            s3 += (double)(x3[i] * x3[i]);
        }
        const double sum[4] = {s0, s1, s2, s3};
        for (int j = 0; j < 4; j++) {
            const float *xr = x + (r + j) * stride;
            float *o = out + (r + j) * stride;
            float scale = 1.0f / sqrtf((float)(sum[j] / (double)n) + eps);
            if (w)
                for (int64_t i = 0; i < n; i++) o[i] = (xr[i] * scale) * w[i];
            else
                for (int64_t i = 0; i < n; i++) o[i] = xr[i] * scale;
        }
    }
    for (; r < rows; r++) bd_rmsnorm(out + r * stride, x + r * stride, w, n, eps);
}

void bd_rope(float *x, int32_t n_heads, int32_t hd, int32_t n_rot, int32_t pos, const bd_rope_params *rp,
             enum bd_rope_type type) {
    float cs[512], sn[512];
    int32_t half = n_rot / 2;
    if (half > 512) half = 512;
    const float theta_scale = powf(rp->base, -2.0f / (float)n_rot);
    float mscale = rp->attn_factor;
    if (rp->ext_factor != 0.0f) mscale *= 1.0f + 0.1f * logf(1.0f / rp->freq_scale);
    float theta = (float)pos;
    for (int32_t i = 0; i < half; i++) {
        const float extrap = rp->freq_factors ? theta / rp->freq_factors[i] : theta;
        float t = rp->freq_scale * extrap;
        if (rp->ext_factor != 0.0f) {
            /* the operations of ggml's rope_yarn_ramp, in its order */
            const float y = ((float)i - rp->corr_dims[0]) / fmaxf(0.001f, rp->corr_dims[1] - rp->corr_dims[0]);
            const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * rp->ext_factor;
            t = t * (1.0f - mix) + extrap * mix;
        }
        cs[i] = cosf(t) * mscale;
        sn[i] = sinf(t) * mscale;
        theta *= theta_scale;
    }
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * hd;
        /* IMROPE with text positions (every stream at the same position) is
         * NEOX on the first n_rot lanes (qwen35-hybrid.md §4) */
        if (type == BD_ROPE_NEOX || type == BD_ROPE_IMROPE) {
            for (int32_t i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * cs[i] - b * sn[i];
                v[i + half] = a * sn[i] + b * cs[i];
            }
        } else {
            for (int32_t i = 0; i < half; i++) {
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * cs[i] - b * sn[i];
                v[2 * i + 1] = a * sn[i] + b * cs[i];
            }
        }
    }
}

void bd_softmax(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf(x[i] - mx);
        x[i] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

float bd_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

