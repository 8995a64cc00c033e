/*
 * qwen35.c - the forward of the hybrid Qwen3.5/3.6 targets (`qwen35`,
 * `qwen35moe`) and of Qwen3-Next (`qwen3next`, the same blocks): Gated
 * DeltaNet layers with gated full attention every few layers, dense or
 * mixture-of-experts feed-forward (qwen35-hybrid.md §2-§5). What differs
 * for qwen3next is read at load (qwen35_load.c): NEOX RoPE on the first
 * n_rot lanes, and the value-to-key head mapping (bd_gdn_key_head).
 *
 *   x = token_embd[tokens]
 *   per trunk layer il:  (tap: x, the layer input, as for qwen3)
 *     x += (recurrent(il) ? GDN : GatedAttention)(RMSNorm(x) * attn_norm)
 *     x += FFN(RMSNorm(x) * post_attention_norm)
 *   logits = output · (RMSNorm(x) * output_norm)
 *
 * Gated DeltaNet of one layer, n rows (bd_gdn_layer):
 *   qkv = W_qkv h   z = W_z h   beta = sigmoid(W_beta h)
 *   g = softplus(W_alpha h + dt_bias) * ssm_a                   (log decay <= 0)
 *   xc = silu(causal depthwise conv of qkv over the window of the
 *        d_conv - 1 previous raw rows)                          [n][conv_dim]
 *   q, k: each key head L2-normalized; v as is
 *   per value head h (key head h % n_k; qwen3next h / (n_v / n_k)), token by token:
 *     bd_gdn_step: the state update and o_h = (M^T q) / sqrt(d_k)
 *   o = RMSNorm_per_head(o) * ssm_norm * silu(z);  out = W_out o
 *
 * The recurrence runs token by token for every batch -- one token or a
 * verify block or a prompt -- with the same per-token arithmetic, so a
 * token decoded alone and the same token inside a verify batch get the
 * same bits (bd_matmul is batch-invariant). The state buffers and the rollback: model.h (bd_recurrent).
 */
#include <math.h>
#include <string.h>

#include "forward.h"

enum { GDN_GATES, GDN_CONV, GDN_SILU, GDN_QKNORM, GDN_SCAN, GDN_OUTNORM };

#define GDN_SILU_CHUNK 256 /* floats per SiLU work item */
#define GDN_MAX_CONV 16    /* longest convolution kernel (the loader refuses longer ones) */

typedef struct {
    int phase;
    bd_session *s;
    const bd_layer *L;
    int32_t n;
    float *raw, *xc, *g, *beta;   /* [n][conv_dim], [n][conv_dim], [n][n_v], [n][n_v] */
    const float *win_src;         /* [d_conv-1][conv_dim] window before the first row */
    float *win_dst;               /* [d_conv-1][conv_dim] window after the last row */
    const float *ssm_src;         /* [n_v][d_v][d_k] state before the first row */
    float *ssm_dst;               /* [n_v][d_v][d_k] state after the last row */
} gdn_ctx;

static void gdn_worker(void *arg, int ith, int nth) {
    const gdn_ctx *c = arg;
    const bd_session *s = c->s;
    const bd_hparams *hp = &s->m->hp;
    const bd_recurrent *rs = &s->rs;
    const bd_layer *L = c->L;
    const int32_t n = c->n, cd = rs->conv_dim, nv = rs->n_v, dk = rs->d_k, K = rs->d_conv, nk = hp->ssm_n_k;
    int64_t lo, hi;
    switch (c->phase) {
    case GDN_GATES: /* beta = sigmoid(.), g = softplus(. + dt_bias) * a, as ggml's ops */
        bd_split((int64_t)n * nv, ith, nth, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            const int64_t h = i % nv;
            c->beta[i] = bd_sigmoid(c->beta[i]);
            const float x = c->g[i] + L->dt_bias[h];
            const float sp = x > 20.0f ? x : logf(1.0f + expf(x));
            c->g[i] = sp * L->ssm_a[h];
        }
        break;
    case GDN_CONV: { /* this thread's channels, row by row (SiLU: next phase) */
        bd_split(cd, ith, nth, &lo, &hi);
        const float *tap[GDN_MAX_CONV]; /* tap[j]: the row that weight j meets, index t + j - (K - 1) */
        for (int32_t t = 0; t < n; t++) {
            for (int32_t j = 0; j < K; j++) {
                const int32_t i = t + j - (K - 1); /* < 0: in the window */
                tap[j] = i < 0 ? c->win_src + (int64_t)(K - 1 + i) * cd : c->raw + (int64_t)i * cd;
            }
            /* channels innermost: rows are read along their length (a
             * channel-major walk hit one cache set per row, the rows being
             * conv_dim floats apart); each sum still adds its K products in
             * order from +0, whatever the batch */
            float *out = c->xc + (int64_t)t * cd;
            for (int64_t ch = lo; ch < hi; ch++) {
                const float *w = L->conv1d + ch * K;
                float sum = 0.0f;
                for (int32_t j = 0; j < K; j++) sum += w[j] * tap[j][ch];
                out[ch] = sum;
            }
        }
        /* the window after the last row: the last K-1 of [window ; rows] */
        for (int32_t j = 0; j < K - 1; j++) {
            const int32_t i = n - (K - 1) + j;
            const float *row = i < 0 ? c->win_src + (int64_t)(K - 1 + i) * cd : c->raw + (int64_t)i * cd;
            memcpy(c->win_dst + (int64_t)j * cd + lo, row + lo, (size_t)(hi - lo) * sizeof(float));
        }
        break;
    }
    case GDN_SILU: { /* xc = silu(xc): the kernel table's silu_mul against ones (x * 1 is exact) */
        float ones[GDN_SILU_CHUNK];
        for (int i = 0; i < GDN_SILU_CHUNK; i++) ones[i] = 1.0f;
        const int64_t per_row = (cd + GDN_SILU_CHUNK - 1) / GDN_SILU_CHUNK;
        bd_split((int64_t)n * per_row, ith, nth, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            const int64_t c0 = (i % per_row) * GDN_SILU_CHUNK;
            const int64_t len = cd - c0 < GDN_SILU_CHUNK ? cd - c0 : GDN_SILU_CHUNK;
            bd_kernels_get()->silu_mul(len, c->xc + (i / per_row) * cd + c0, ones);
        }
        break;
    }
    case GDN_QKNORM: { /* L2 norm of each q and k head: rms_norm(x, eps/d) / sqrt(d), as llama.cpp */
        const float eps = hp->rms_eps / (float)dk, sc = 1.0f / sqrtf((float)dk);
        bd_split((int64_t)n * 2 * nk, ith, nth, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            float *x = c->xc + (i / (2 * nk)) * cd + (i % (2 * nk)) * dk;
            bd_rmsnorm(x, x, NULL, dk, eps);
            for (int32_t e = 0; e < dk; e++) x[e] *= sc;
        }
        break;
    }
    case GDN_SCAN: { /* per value head, token by token */
        const float scale = 1.0f / sqrtf((float)dk);
        const int64_t hs = (int64_t)dk * dk, key_dim = (int64_t)nk * dk;
        bd_split(nv, ith, nth, &lo, &hi);
        for (int64_t h = lo; h < hi; h++) {
            const int64_t kh = bd_gdn_key_head(hp, h);
            for (int32_t t = 0; t < n; t++) {
                const float *row = c->xc + (int64_t)t * cd;
                bd_gdn_step(t == 0 ? c->ssm_src + h * hs : c->ssm_dst + h * hs, c->ssm_dst + h * hs, dk, dk,
                            row + key_dim + kh * dk, row + 2 * key_dim + h * dk, c->g[(int64_t)t * nv + h],
                            c->beta[(int64_t)t * nv + h], row + kh * dk, scale,
                            s->o + (int64_t)t * rs->value_dim + h * dk);
            }
        }
        break;
    }
    default: /* GDN_OUTNORM: o = RMSNorm(o) * ssm_norm per head, then z = silu(z) * o */
        bd_split((int64_t)n * nv, ith, nth, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            float *o = s->o + i * dk, *z = s->z + i * dk;
            bd_rmsnorm(o, o, L->ssm_norm, dk, hp->rms_eps);
            bd_kernels_get()->silu_mul(dk, z, o);
        }
        break;
    }
}

static void gdn_run(gdn_ctx *c, int phase, int64_t work) {
    c->phase = phase;
    if (work < (1 << 14)) gdn_worker(c, 0, 1);
    else bd_pool_run(c->s->pool, gdn_worker, c);
}

void bd_gdn_layer(bd_session *s, const bd_layer *L, int32_t n, int src, int dst, int32_t save_row) {
    const bd_hparams *hp = &s->m->hp;
    bd_recurrent *rs = &s->rs;
    const int64_t E = hp->n_embd, cd = rs->conv_dim, nv = rs->n_v, VD = rs->value_dim, r = L->rs_slot;
    gdn_ctx c = {.s = s, .L = L, .n = n};
    if (save_row >= 0) { /* this layer's save area: what a rollback replays */
        c.raw = rs->raw + (r * rs->n_save + save_row) * cd;
        c.xc = rs->xc + (r * rs->n_save + save_row) * cd;
        c.g = rs->g + (r * rs->n_save + save_row) * nv;
        c.beta = rs->beta + (r * rs->n_save + save_row) * nv;
    } else {
        c.raw = rs->raw_big;
        c.xc = rs->xc_big;
        c.g = rs->g_big;
        c.beta = rs->beta_big;
    }
    c.win_src = rs->conv[src] + r * rs->conv_floats;
    c.win_dst = rs->conv[dst] + r * rs->conv_floats;
    c.ssm_src = rs->ssm[src] + r * rs->ssm_floats;
    c.ssm_dst = rs->ssm[dst] + r * rs->ssm_floats;

    bd_fwd_rmsnorm(s, s->h, s->x, L->attn_norm, n, E);
    const bd_matmul_out proj[4] = {
        {&L->w_qkv, c.raw, cd}, {&L->w_z, s->z, VD}, {&L->w_beta, c.beta, nv}, {&L->w_alpha, c.g, nv}};
    bd_matmul_multi(s->pool, proj, 4, s->h, E, n, s->mm_scratch);
    gdn_run(&c, GDN_GATES, (int64_t)n * nv * 16);
    gdn_run(&c, GDN_CONV, (int64_t)n * cd * rs->d_conv);
    gdn_run(&c, GDN_SILU, (int64_t)n * cd * 8);
    gdn_run(&c, GDN_QKNORM, (int64_t)n * 2 * rs->key_dim);
    gdn_run(&c, GDN_SCAN, (int64_t)n * nv * rs->d_k * rs->d_k);
    gdn_run(&c, GDN_OUTNORM, (int64_t)n * VD * 4);
    bd_matmul(s->pool, &L->ssm_out, s->z, VD, n, s->h, E, s->mm_scratch);
    bd_fwd_add(s, s->x, s->h, (int64_t)n * E);
}

void bd_forward_qwen35(bd_session *s, const int32_t *tokens, int32_t n, enum bd_logits_mode mode) {
    const bd_hparams *hp = &s->m->hp;
    bd_recurrent *rs = &s->rs;
    int32_t save_row;
    int src, dst;
    bd_recurrent_begin(rs, s->n_past, n, &save_row, &src, &dst);
    bd_fwd_embed(s, tokens, n);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const bd_layer *L = &s->m->layers[il];
        bd_fwd_tap(s, il, n);
        if (L->recurrent) bd_gdn_layer(s, L, n, src, dst, save_row);
        else bd_fwd_attention(s, L, n);
        bd_fwd_ffn(s, L, n);
    }
    bd_fwd_head(s, n, mode);
    bd_recurrent_commit(rs, n, save_row, dst);
    s->n_past += n;
}
