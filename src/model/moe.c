/*
 * moe.c - the mixture-of-experts feed-forward (qwen3moe, qwen35moe), as
 * llama.cpp's build_moe_ffn computes it with softmax gating and normalized
 * weights (qwen35-hybrid.md §5, gguf-and-architectures.md §7):
 *
 *   p      = softmax(W_router y)                                [n_expert]
 *   sel    = the n_used largest p, largest first; equal p: lower expert id
 *            first (what ggml's argsort gives for up to 16 experts, where
 *            its sort is an insertion sort)
 *   w_k    = p[sel_k] / max(sum_k p[sel_k], 2^-14)   (times expert_weights_scale
 *            when that is neither 0 nor 1)
 *   routed = ((w_0 E_0(y) + w_1 E_1(y)) + w_2 E_2(y)) + ...   in selection order,
 *            E_e(y) = down_e(silu(gate_e y) * up_e y)
 *   FFN(y) = routed + sigmoid(g_sh . y) * down_sh(silu(gate_sh y) * up_sh y)
 *            (the shared-expert term where the layer has one: qwen35moe)
 *
 * Experts run over the rows routed to them (gathered), on the pool: for
 * passes of up to BD_MOE_GROUP_ROWS rows all of a layer's experts in two
 * grouped matmuls, for longer ones (prompts) one expert at a time. A row's
 * numbers do not depend on which other rows share its
 * experts: every expert matmul of a verify batch has at most as many rows
 * as the batch (<= BD_MATMUL_EXACT_ROWS), where bd_matmul is
 * batch-invariant, and the routed sum is taken per row in its own order.
 */
#include <math.h>
#include <string.h>

#include "forward.h"

/* Softmax over the router logits of one row, in place, as ggml's soft_max
 * does it: shift by the max, exp, sum in double, scale by 1/sum. */
static void router_softmax(float *x, int32_t n) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int32_t i = 0; i < n; i++) x[i] *= inv;
}

/* The k largest of p[0..n), largest first, ties to the lower index. */
void bd_moe_topk(const float *p, int32_t n, int32_t k, int32_t *sel) {
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < n; e++) {
            bool taken = false;
            for (int32_t i = 0; i < j && !taken; i++) taken = sel[i] == e;
            if (taken) continue;
            /* strictly greater: among equal values the first (lowest id) stays */
            if (best < 0 || p[e] > p[best]) best = e;
        }
        sel[j] = best;
    }
}

void bd_moe_route(const float *logits, int32_t n_expert, int32_t n_used, float scale, float *probs, int32_t *sel,
                  float *w) {
    if (probs != logits) memcpy(probs, logits, (size_t)n_expert * sizeof(float));
    router_softmax(probs, n_expert);
    bd_moe_topk(probs, n_expert, n_used, sel);
    float sum = 0.0f;
    for (int32_t k = 0; k < n_used; k++) sum += probs[sel[k]];
    if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
    for (int32_t k = 0; k < n_used; k++) {
        w[k] = probs[sel[k]] / sum;
        if (scale != 0.0f && scale != 1.0f) w[k] *= scale;
    }
}

/* The routed experts of a short pass (decode, verify) in two grouped
 * matmuls: the (row, slot) pairs sorted by expert (stable: a pair's rows
 * keep their order, as in the per-expert loop below), every expert's gate
 * and up in one run, SwiGLU, every expert's down in one run, then each
 * output weighted into its (row, slot) place. Each expert sees exactly the
 * rows the per-expert loop gives it, through the same kernels: the same
 * bits. False, before any output, where bd_matmul_grouped cannot take the
 * gate and up (the caller runs the loop); the downs fall back per expert. */
static bool moe_experts_grouped(bd_session *s, const bd_layer *L, const float *h, int32_t n) {
    const bd_hparams *hp = &s->m->hp;
    const int32_t E = hp->n_embd, NE = hp->n_expert, U = hp->n_expert_used, FE = hp->n_ff_exp, P = n * U;
    int32_t *cnt = s->moe_cnt;
    memset(cnt, 0, (size_t)(NE + 1) * sizeof *cnt);
    for (int32_t i = 0; i < P; i++) cnt[s->moe_sel[i] + 1]++;
    for (int32_t e = 0; e < NE; e++) cnt[e + 1] += cnt[e]; /* cnt[e]: expert e's first sorted pair */
    for (int32_t i = 0; i < P; i++) {
        const int32_t k = cnt[s->moe_sel[i]]++;
        s->moe_rows[k] = i;
        s->moe_tok[k] = i / U;
        s->moe_seq[k] = k;
    }
    /* cnt[e] is now expert e's end: its pairs are [cnt[e - 1], cnt[e]) */
    int ng = 0;
    for (int32_t e = 0, off = 0; e < NE; off = cnt[e++]) {
        const int32_t m = cnt[e] - off;
        if (m == 0) continue;
        float *gu = s->moe_gu + (int64_t)off * 2 * FE;
        if (L->gate_up_exps.data) {
            s->moe_views[ng] = bd_mat_rows(&L->gate_up_exps, (int64_t)e * 2 * FE, 2 * FE);
            s->moe_grp[ng] = (bd_matmul_grp){&s->moe_views[ng], s->moe_tok + off, m, gu, 2 * FE};
            ng++;
        } else {
            s->moe_views[ng] = bd_mat_rows(&L->gate_exps, (int64_t)e * FE, FE);
            s->moe_grp[ng] = (bd_matmul_grp){&s->moe_views[ng], s->moe_tok + off, m, gu, 2 * FE};
            ng++;
            s->moe_views[ng] = bd_mat_rows(&L->up_exps, (int64_t)e * FE, FE);
            s->moe_grp[ng] = (bd_matmul_grp){&s->moe_views[ng], s->moe_tok + off, m, gu + FE, 2 * FE};
            ng++;
        }
    }
    if (!bd_matmul_grouped(s->pool, s->moe_grp, ng, h, E, n, s->mm_scratch)) return false;
    for (int32_t k = 0; k < P; k++) {
        float *row = s->moe_gu + (int64_t)k * 2 * FE;
        bd_kernels_get()->silu_mul(FE, row, row + FE);
    }
    ng = 0;
    for (int32_t e = 0, off = 0; e < NE; off = cnt[e++]) {
        const int32_t m = cnt[e] - off;
        if (m == 0) continue;
        s->moe_views[ng] = bd_mat_rows(&L->down_exps, (int64_t)e * E, E);
        s->moe_grp[ng] = (bd_matmul_grp){&s->moe_views[ng], s->moe_seq + off, m, s->moe_y + (int64_t)off * E, E};
        ng++;
    }
    if (!bd_matmul_grouped(s->pool, s->moe_grp, ng, s->moe_gu, 2 * FE, P, s->mm_scratch))
        for (int g = 0; g < ng; g++) {
            const int32_t off = s->moe_grp[g].rows[0];
            bd_matmul(s->pool, s->moe_grp[g].W, s->moe_gu + (int64_t)off * 2 * FE, 2 * FE, s->moe_grp[g].n_tok,
                      s->moe_grp[g].Y, E, s->mm_scratch);
        }
    for (int32_t k = 0; k < P; k++) {
        const int32_t i = s->moe_rows[k];
        const float wk = s->moe_w[i];
        float *dst = s->moe_out + (int64_t)i * E;
        const float *src = s->moe_y + (int64_t)k * E;
        for (int32_t c = 0; c < E; c++) dst[c] = src[c] * wk;
    }
    return true;
}

/* The routed experts one at a time, each over the rows routed to it
 * (gathered); outputs land in their (row, slot) places, already weighted. */
static void moe_experts_each(bd_session *s, const bd_layer *L, const float *h, int32_t n) {
    const bd_hparams *hp = &s->m->hp;
    const int32_t E = hp->n_embd, NE = hp->n_expert, U = hp->n_expert_used, FE = hp->n_ff_exp;
    for (int32_t e = 0; e < NE; e++) {
        int32_t m = 0;
        for (int32_t i = 0; i < n * U; i++)
            if (s->moe_sel[i] == e) s->moe_rows[m++] = i;
        if (m == 0) continue;
        for (int32_t j = 0; j < m; j++)
            memcpy(s->moe_x + (int64_t)j * E, h + (int64_t)(s->moe_rows[j] / U) * E, (size_t)E * sizeof(float));
        if (L->gate_up_exps.data) {
            const bd_mat gu = bd_mat_rows(&L->gate_up_exps, (int64_t)e * 2 * FE, 2 * FE);
            bd_matmul(s->pool, &gu, s->moe_x, E, m, s->moe_gu, 2 * FE, s->mm_scratch);
        } else {
            const bd_mat g = bd_mat_rows(&L->gate_exps, (int64_t)e * FE, FE), u = bd_mat_rows(&L->up_exps, (int64_t)e * FE, FE);
            const bd_matmul_out outs[2] = {{&g, s->moe_gu, 2 * FE}, {&u, s->moe_gu + FE, 2 * FE}};
            bd_matmul_multi(s->pool, outs, 2, s->moe_x, E, m, s->mm_scratch);
        }
        for (int32_t j = 0; j < m; j++) {
            float *row = s->moe_gu + (int64_t)j * 2 * FE;
            bd_kernels_get()->silu_mul(FE, row, row + FE);
        }
        const bd_mat d = bd_mat_rows(&L->down_exps, (int64_t)e * E, E);
        bd_matmul(s->pool, &d, s->moe_gu, 2 * FE, m, s->moe_y, E, s->mm_scratch);
        for (int32_t j = 0; j < m; j++) {
            const float wk = s->moe_w[s->moe_rows[j]];
            float *dst = s->moe_out + (int64_t)s->moe_rows[j] * E;
            const float *src = s->moe_y + (int64_t)j * E;
            for (int32_t i = 0; i < E; i++) dst[i] = src[i] * wk;
        }
    }
}

void bd_moe_ffn(bd_session *s, const bd_layer *L, float *h, int32_t n) {
    const bd_hparams *hp = &s->m->hp;
    const int32_t E = hp->n_embd, NE = hp->n_expert, U = hp->n_expert_used;

    /* routing */
    bd_matmul(s->pool, &L->router, h, E, n, s->moe_logits, NE, s->mm_scratch);
    for (int32_t r = 0; r < n; r++) {
        float *p = s->moe_logits + (int64_t)r * NE;
        bd_moe_route(p, NE, U, hp->expert_weights_scale, p, s->moe_sel + (int64_t)r * U, s->moe_w + (int64_t)r * U);
    }

    /* the routed experts; outputs land in their (row, slot) places,
     * already weighted */
    if (n > BD_MOE_GROUP_ROWS || !moe_experts_grouped(s, L, h, n)) moe_experts_each(s, L, h, n);

    /* the shared expert, on all rows; its output gate is one scalar per row */
    const bool shared = L->gate_shexp.data != NULL;
    if (shared) {
        const int32_t FS = hp->n_ff_shexp;
        const bd_matmul_out gu[2] = {{&L->gate_shexp, s->moe_gu, 2 * FS}, {&L->up_shexp, s->moe_gu + FS, 2 * FS}};
        bd_matmul_multi(s->pool, gu, 2, h, E, n, s->mm_scratch);
        for (int32_t r = 0; r < n; r++) {
            float *row = s->moe_gu + (int64_t)r * 2 * FS;
            bd_kernels_get()->silu_mul(FS, row, row + FS);
        }
        bd_matmul(s->pool, &L->down_shexp, s->moe_gu, 2 * FS, n, s->moe_y, E, s->mm_scratch);
        /* moe_logits is free again: it takes the scalar gates */
        bd_matmul(s->pool, &L->shexp_gate_inp, h, E, n, s->moe_logits, 1, s->mm_scratch);
    }

    /* per row: the routed sum in selection order, then + the shared expert */
    for (int32_t r = 0; r < n; r++) {
        float *dst = h + (int64_t)r * E;
        const float *o = s->moe_out + (int64_t)r * U * E;
        memcpy(dst, o, (size_t)E * sizeof(float));
        for (int32_t k = 1; k < U; k++)
            for (int32_t i = 0; i < E; i++) dst[i] += o[(int64_t)k * E + i];
        if (shared) {
            const float gs = bd_sigmoid(s->moe_logits[r]);
            const float *y = s->moe_y + (int64_t)r * E;
            for (int32_t i = 0; i < E; i++) dst[i] += y[i] * gs;
        }
    }
}
