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

void bd_rope(float *x, int32_t n_heads, int32_t hd, int32_t n_rot, int32_t pos, float base,
             enum bd_rope_type type) {
    float cs[512], sn[512];
    int32_t half = n_rot / 2;
    if (half > 512) half = 512;
    float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int32_t i = 0; i < half; i++) {
        cs[i] = cosf(theta);
        sn[i] = sinf(theta);
        theta *= theta_scale;
    }
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * hd;
        if (type == BD_ROPE_NEOX) {
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
