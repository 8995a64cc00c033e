/*
 * forward.c - the blocks of a batched causal forward, and the dense
 * llama / qwen3 decoder built from them.
 *
 * One chunk of n_b tokens at positions n_past..n_past+n_b-1:
 *
 *   x = token_embd[tokens]                                  [n_b][n_embd]
 *   per layer:  (tap: copy x, the layer *input*, if asked)
 *     h = RMSNorm(x) * attn_norm
 *     q, k, v = Wq h, Wk h, Wv h      (qwen3: per-head RMSNorm of q and k)
 *     RoPE(q, k) at each row's position (NORM for llama, NEOX for qwen3)
 *     K/V rows -> cache; att = causal softmax(q kᵀ / sqrt(hd)) v   (GQA, over q)
 *     x += Wo att
 *     h = RMSNorm(x) * ffn_norm;  x += Wdown(silu(Wgate h) * Wup h)
 *   logits rows = output · (RMSNorm(x) * output_norm)
 *
 * The hybrid qwen35 forward (qwen35.c) uses the same blocks: its attention
 * layers are this attention with a per-head output gate, its feed-forward
 * this one or the mixture of experts (moe.c).
 *
 * The matmuls and attention run on the session's pool, and so do the
 * per-row ops when there are enough rows (or, for SiLU, elements) to pay
 * for waking it: each row's arithmetic is the same however the rows are
 * split, so results do not depend on the thread count.
 */
#include <string.h>

#include "attention.h"
#include "forward.h"

/* ------------------------------------------------------------------------
 * Per-row ops on the pool
 * ---------------------------------------------------------------------- */

enum { ROWS_NORM, ROWS_QK, ROWS_SILU_MUL, ROWS_ADD, ROWS_SIGMOID_MUL };

typedef struct {
    int op;
    bd_session *s;
    const bd_layer *L;
    float *dst;           /* NORM: out rows; SILU_MUL: gate; ADD: x; SIGMOID_MUL: x */
    const float *src;     /* NORM: in rows; SILU_MUL: up; ADD: h; SIGMOID_MUL: gate */
    const float *w;       /* NORM: weight */
    int64_t width, count; /* NORM/QK: row width and rows; SILU_MUL/ADD: elements */
    char *kc, *vc;        /* QK: this layer's caches (rows of the session's k_type / v_type) */
    int32_t p0;
} rows_ctx;

static void rows_worker(void *arg, int ith, int nth) {
    const rows_ctx *c = arg;
    const bd_hparams *hp = &c->s->m->hp;
    int64_t lo, hi;
    bd_split(c->count, ith, nth, &lo, &hi);
    switch (c->op) {
    case ROWS_NORM:
        bd_rmsnorm_rows(c->dst + lo * c->width, c->src + lo * c->width, c->w, c->width, hp->rms_eps, hi - lo,
                        c->width);
        break;
    case ROWS_QK: {
        const int64_t Q = (int64_t)hp->n_head * hp->hd, KV = (int64_t)hp->n_kv * hp->hd;
        const bd_session *s = c->s;
        for (int64_t t = lo; t < hi; t++) {
            float *q = c->s->q + t * Q, *k = c->s->kn + t * KV, *v = c->s->vn + t * KV;
            /* biases right after the projections, as ggml adds them */
            if (c->L->bq)
                for (int64_t i = 0; i < Q; i++) q[i] += c->L->bq[i];
            if (c->L->bk)
                for (int64_t i = 0; i < KV; i++) k[i] += c->L->bk[i];
            if (c->L->bv)
                for (int64_t i = 0; i < KV; i++) v[i] += c->L->bv[i];
            if (c->L->q_norm) {
                bd_rmsnorm_rows(q, q, c->L->q_norm, hp->hd, hp->rms_eps, hp->n_head, hp->hd);
                bd_rmsnorm_rows(k, k, c->L->k_norm, hp->hd, hp->rms_eps, hp->n_kv, hp->hd);
            }
            bd_rope(q, hp->n_head, hp->hd, hp->n_rot, c->p0 + (int32_t)t, &c->s->rope, hp->rope_type);
            bd_rope(k, hp->n_kv, hp->hd, hp->n_rot, c->p0 + (int32_t)t, &c->s->rope, hp->rope_type);
            if (s->k_rot) { /* a quantized cache's basis (attention.h) */
                bd_attn_rotate(q, Q, s->k_rot);
                bd_attn_rotate(k, KV, s->k_rot);
            }
            if (s->v_rot) bd_attn_rotate(v, KV, s->v_rot);
            for (int32_t h = 0; h < hp->n_kv; h++) {
                const int64_t row = (int64_t)h * s->n_ctx + c->p0 + t; /* head-major */
                bd_attn_kv_store(c->kc + row * s->k_row_bytes, s->k_type, k + h * hp->hd, hp->hd);
                bd_attn_kv_store(c->vc + row * s->v_row_bytes, s->v_type, v + h * hp->hd, hp->hd);
            }
        }
        break;
    }
    case ROWS_SILU_MUL:
        bd_kernels_get()->silu_mul(hi - lo, c->dst + lo, c->src + lo);
        break;
    case ROWS_SIGMOID_MUL:
        for (int64_t i = lo; i < hi; i++) c->dst[i] *= bd_sigmoid(c->src[i]);
        break;
    default:
        for (int64_t i = lo; i < hi; i++) c->dst[i] += c->src[i];
        break;
    }
}

/* min_count: below it the calling thread does the work alone */
static void rows_run(bd_session *s, rows_ctx *c, int64_t min_count) {
    c->s = s;
    if (c->count < min_count) rows_worker(c, 0, 1);
    else bd_pool_run(s->pool, rows_worker, c);
}

void bd_fwd_rmsnorm(bd_session *s, float *out, const float *x, const float *w, int32_t n, int64_t width) {
    rows_ctx c = {.op = ROWS_NORM, .dst = out, .src = x, .w = w, .width = width, .count = n};
    rows_run(s, &c, 4);
}

void bd_fwd_add(bd_session *s, float *x, const float *h, int64_t count) {
    rows_ctx c = {.op = ROWS_ADD, .dst = x, .src = h, .count = count};
    rows_run(s, &c, 1 << 16);
}

void bd_fwd_silu_mul(bd_session *s, float *g, const float *u, int64_t count) {
    rows_ctx c = {.op = ROWS_SILU_MUL, .dst = g, .src = u, .count = count};
    rows_run(s, &c, 4096);
}

/* ------------------------------------------------------------------------
 * Blocks
 * ---------------------------------------------------------------------- */

void bd_fwd_embed(bd_session *s, const int32_t *tokens, int32_t n) {
    const int64_t E = s->m->hp.n_embd;
    for (int32_t t = 0; t < n; t++) bd_mat_get_row(&s->m->tok_embd, tokens[t], s->x + t * E);
    memcpy(s->tokens + s->n_past, tokens, (size_t)n * sizeof *tokens);
}

void bd_fwd_tap(bd_session *s, int32_t il, int32_t n) {
    const int64_t E = s->m->hp.n_embd;
    if (s->tap_slot[il] < 0) return;
    for (int32_t t = 0; t < n; t++)
        memcpy(s->taps + ((int64_t)t * s->n_tap + s->tap_slot[il]) * E, s->x + t * E, (size_t)E * sizeof(float));
}

/* x += attention(RMSNorm(x)). Gated attention (qwen35, wq with 2 n_head hd
 * rows): each head's query comes with an output gate, applied as
 * o * sigmoid(gate) before Wo. */
void bd_fwd_attention(bd_session *s, const bd_layer *L, int32_t n) {
    const bd_hparams *hp = &s->m->hp;
    const int64_t E = hp->n_embd, hd = hp->hd, Q = (int64_t)hp->n_head * hd, KV = (int64_t)hp->n_kv * hd;
    const int32_t p0 = s->n_past;
    const bool gated = L->wq.nrows == 2 * Q;
    bd_fwd_rmsnorm(s, s->h, s->x, L->attn_norm, n, E);
    /* Q, K and V in one run over one converted input; q/k norm and RoPE
     * then work on the new rows, which go to the head-major cache */
    const int64_t rows = (int64_t)L->kv_slot * s->n_ctx * hp->n_kv; /* this layer's first row */
    char *kc = (char *)s->k_cache + rows * s->k_row_bytes, *vc = (char *)s->v_cache + rows * s->v_row_bytes;
    const bd_matmul_out qkv[3] = {
        {&L->wq, gated ? s->qg : s->q, gated ? 2 * Q : Q}, {&L->wk, s->kn, KV}, {&L->wv, s->vn, KV}};
    bd_matmul_multi(s->pool, qkv, 3, s->h, E, n, s->mm_scratch);
    if (gated)
        for (int32_t t = 0; t < n; t++)
            for (int32_t h = 0; h < hp->n_head; h++) {
                const float *src = s->qg + (int64_t)t * 2 * Q + (int64_t)h * 2 * hd;
                memcpy(s->q + t * Q + h * hd, src, (size_t)hd * sizeof(float));
                memcpy(s->agate + t * Q + h * hd, src + hd, (size_t)hd * sizeof(float));
            }
    rows_ctx qk = {.op = ROWS_QK, .L = L, .count = n, .kc = kc, .vc = vc, .p0 = p0};
    rows_run(s, &qk, 2);
    bd_attn_args aa = {
        .q = s->q, .k_cache = kc, .v_cache = vc, .kv_head_stride = (int64_t)s->n_ctx * hd,
        .k_type = s->k_type, .v_type = s->v_type, .kv_tmp = s->kv_tmp,
        .out = s->q /* in place */, .scores = s->scores,
        .scores_stride = s->n_ctx + s->n_batch, .n = n, .n_head = hp->n_head, .n_kv = hp->n_kv,
        .hd = hp->hd, .n_past = p0, .causal = true, .v_rot = s->v_rot,
    };
    bd_attention(s->pool, &aa);
    if (gated) {
        rows_ctx sg = {.op = ROWS_SIGMOID_MUL, .dst = s->q, .src = s->agate, .count = (int64_t)n * Q};
        rows_run(s, &sg, 1 << 14);
    }
    bd_matmul(s->pool, &L->wo, s->q, Q, n, s->h, E, s->mm_scratch);
    if (L->bo)
        for (int32_t t = 0; t < n; t++)
            for (int64_t i = 0; i < E; i++) s->h[t * E + i] += L->bo[i];
    bd_fwd_add(s, s->x, s->h, (int64_t)n * E);
}

/* x += FFN(RMSNorm(x) * ffn_norm): dense SwiGLU, or the mixture of
 * experts when the layer has a router. In near-equal row chunks of at most
 * BD_FFN_ROWS, or BD_MOE_ROWS for a mixture (the gate/up buffers are the
 * largest per-row scratch; a batch of more than BD_MATMUL_EXACT_ROWS rows
 * never leaves a chunk that small, so every row of a batch takes the same
 * kernels). */
void bd_fwd_ffn(bd_session *s, const bd_layer *L, int32_t n) {
    const bd_hparams *hp = &s->m->hp;
    const int64_t E = hp->n_embd, FF = hp->n_ff;
    bd_fwd_rmsnorm(s, s->h, s->x, L->ffn_norm, n, E);
    const int32_t max_rows = L->router.data ? BD_MOE_ROWS : BD_FFN_ROWS;
    const int32_t n_chunks = (n + max_rows - 1) / max_rows;
    for (int32_t c = 0; c < n_chunks; c++) {
        const int32_t r0 = (int32_t)((int64_t)n * c / n_chunks);
        const int32_t rows = (int32_t)((int64_t)n * (c + 1) / n_chunks) - r0;
        float *h = s->h + (int64_t)r0 * E;
        if (L->router.data) {
            bd_moe_ffn(s, L, h, rows);
            continue;
        }
        const bd_matmul_out gate_up[2] = {{&L->w_gate, s->gate, FF}, {&L->w_up, s->up, FF}};
        bd_matmul_multi(s->pool, gate_up, 2, h, E, rows, s->mm_scratch);
        bd_fwd_silu_mul(s, s->gate, s->up, (int64_t)rows * FF);
        /* the chunk's normed input is spent: its rows take the output */
        bd_matmul(s->pool, &L->w_down, s->gate, FF, rows, h, E, s->mm_scratch);
    }
    bd_fwd_add(s, s->x, s->h, (int64_t)n * E);
}

/* Taps of the output (layer n_layer), the logits of the rows asked for. */
void bd_fwd_head(bd_session *s, int32_t n, enum bd_logits_mode mode) {
    const bd_model *m = s->m;
    const int64_t E = m->hp.n_embd;
    bd_fwd_tap(s, m->hp.n_layer, n);
    s->n_taps_rows = n;
    s->n_logits = 0;
    if (mode != BD_LOGITS_NONE) {
        int32_t first = mode == BD_LOGITS_ALL ? 0 : n - 1;
        int32_t rows = n - first;
        bd_fwd_rmsnorm(s, s->h, s->x + (int64_t)first * E, m->output_norm, rows, E);
        bd_matmul(s->pool, &m->output, s->h, E, rows, s->logits, m->hp.n_vocab, s->mm_scratch);
        s->n_logits = rows;
    }
}

/* ------------------------------------------------------------------------
 * The dense decoder, and the entry point
 * ---------------------------------------------------------------------- */

void bd_forward_dense(bd_session *s, const int32_t *tokens, int32_t n, enum bd_logits_mode mode) {
    const bd_hparams *hp = &s->m->hp;
    bd_fwd_embed(s, tokens, n);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const bd_layer *L = &s->m->layers[il];
        bd_fwd_tap(s, il, n);
        bd_fwd_attention(s, L, n);
        bd_fwd_ffn(s, L, n);
    }
    bd_fwd_head(s, n, mode);
    s->n_past += n;
}

bool bd_session_forward(bd_session *s, const int32_t *tokens, int32_t n, enum bd_logits_mode mode,
                        char *err, size_t errlen) {
    const bd_hparams *hp = &s->m->hp;
    if (n <= 0) return bd_err(err, errlen, "forward: empty batch");
    if ((int64_t)s->n_past + n > s->n_ctx)
        return bd_err(err, errlen, "forward: context full (%d + %d tokens > n_ctx %d)", s->n_past, n,
                      s->n_ctx);
    if (mode == BD_LOGITS_ALL && n > s->n_out_max)
        return bd_err(err, errlen, "forward: %d rows of logits asked, the session holds at most %d", n,
                      s->n_out_max);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return bd_err(err, errlen, "forward: token id %d at index %d is outside the vocabulary (%d)",
                          tokens[i], i, hp->n_vocab);
    for (int32_t off = 0; off < n; off += s->n_batch) {
        int32_t nb = n - off < s->n_batch ? n - off : s->n_batch;
        bool last = off + nb == n;
        s->m->arch_info->forward(s, tokens + off, nb, last ? mode : BD_LOGITS_NONE);
    }
    /* the weights read may have been zeros standing in for a truncated
     * file (bd_mmap_guard_install): then these logits mean nothing */
    if (!bd_model_intact(s->m))
        return bd_err(err, errlen, "model file %s changed on disk while in use (truncated or rewritten): "
                      "reopen the model", s->m->path);
    return true;
}
