/*
 * dflash.c - load a `dflash` drafter GGUF and run it against its target.
 *
 * Per committed token t (features f_t = [h_in(g_0) | ... | h_in(g_K-1)]):
 *   c_t      = RMSNorm(fc · f_t) * enc.output_norm                  [n_embd]
 *   Kc[l][t] = RoPE(k_norm(Wk[l] c_t), t),  Vc[l][t] = Wv[l] c_t      per layer
 * One draft step, block [anchor, MASK x n] at positions P..P+n:
 *   h = E_target[block]; per layer: Qwen3 block whose attention sees every
 *   context row and every block row (no causal mask);
 *   logits_i = W_out_target · (RMSNorm(h_i) * output_norm), i = 1..n;
 *   draft_i = argmax logits_i (row i predicts the token AT position P+i).
 *
 * Every matmul here is bd_matmul_fast: the drafter's numbers only decide
 * which tokens are proposed, and the target's verify decides what is
 * emitted, so drafter rows need not be batch-invariant. That lets a block
 * of Q8_0 drafter weights (the published drafters' type) go through the
 * AMX tiles where the CPU has them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "dflash.h"
#include "pairing.h"

/* ------------------------------------------------------------------------
 * Loading
 * ---------------------------------------------------------------------- */

/* Optional `dflash.*` keys of drafter variants this engine does not run.
 * Refused by name rather than ignored: each changes the math. */
static const char *const refused_keys[] = {
    "dflash.attention.sliding_window", "dflash.attention.sliding_window_pattern",
    "dflash.embedding_scale",          "dflash.attention.scale",
    "dflash.logit_scale",              "dflash.final_logit_softcapping",
    "dflash.hidden_activation",        "dflash.conv_kernel_size",
    "dflash.conv_group_size",          "dflash.selector_rank",
    "dflash.selector_top_k",           "dflash.sample_from_anchor",
    "dflash.has_confidence_head",      "dflash.rope.scaling.type",
    "dflash.rope.scaling.factor",      NULL,
};

static bool tensor_expected(const char *name, int32_t n_layer) {
    static const char *const globals[] = {"fc.weight", "enc.output_norm.weight", "output_norm.weight",
                                          "token_embd.weight", "output.weight", NULL};
    static const char *const per_layer[] = {
        "attn_norm.weight",   "attn_q.weight",      "attn_k.weight",   "attn_v.weight",
        "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight", "ffn_norm.weight",
        "ffn_gate.weight",    "ffn_up.weight",      "ffn_down.weight", NULL};
    for (const char *const *g = globals; *g; g++)
        if (!strcmp(name, *g)) return true;
    int il, off = 0;
    if (sscanf(name, "blk.%d.%n", &il, &off) != 1 || off == 0 || il < 0 || il >= n_layer) return false;
    for (const char *const *p = per_layer; *p; p++)
        if (!strcmp(name + off, *p)) return true;
    return false;
}

bool bd_dflash_load(bd_model *m, char *err, size_t errlen) {
    bd_gguf_file *f = m->gguf;
    if (bd_gguf_find(f, "dflash.target_layer_ids") && !bd_gguf_find(f, "dflash.target_layers"))
        return bd_err(err, errlen,
                      "%s: drafter carries the pre-merge key 'dflash.target_layer_ids' instead of "
                      "'dflash.target_layers'; it was converted with a pre-merge llama.cpp branch and "
                      "must be re-converted with upstream llama.cpp",
                      m->path);
    for (const char *const *k = refused_keys; *k; k++)
        if (bd_gguf_find(f, *k))
            return bd_err(err, errlen, "%s: drafter key '%s' is not supported by blockdraft", m->path, *k);
    if (!bd_model_load_hparams(m, "dflash", err, errlen)) return false;
    if (m->hp.hd > 1024) return bd_err(err, errlen, "%s: head dim %d too large", m->path, m->hp.hd);
    m->hp.rope_type = BD_ROPE_NEOX;
    bd_dflash_hp *dh = &m->dflash;
    uint32_t bs = 16;
    if (bd_gguf_find(f, "dflash.block_size") && !bd_gguf_get_u32(f, "dflash.block_size", &bs))
        return bd_err(err, errlen, "%s: 'dflash.block_size' has the wrong type", m->path);
    if (bs < 2 || bs > 64) return bd_err(err, errlen, "%s: dflash.block_size %u out of range [2, 64]", m->path, bs);
    dh->block_size = (int32_t)bs;
    const bd_gguf_kv *tl = bd_gguf_find(f, "dflash.target_layers");
    if (!tl) return bd_err(err, errlen, "%s: missing required key 'dflash.target_layers'", m->path);
    if (tl->type != GGUF_VTYPE_ARRAY || tl->arr_count < 1 || tl->arr_count > BD_MAX_TAPS)
        return bd_err(err, errlen, "%s: 'dflash.target_layers' must be an integer array of 1..%d entries",
                      m->path, BD_MAX_TAPS);
    dh->n_target_layers = (int32_t)tl->arr_count;
    for (uint64_t i = 0; i < tl->arr_count; i++) {
        int64_t v;
        if (!bd_gguf_arr_i64(tl, i, &v) || v < 0 || v > 4096)
            return bd_err(err, errlen, "%s: 'dflash.target_layers'[%llu] is not a valid layer index", m->path,
                          (unsigned long long)i);
        dh->target_layers[i] = (int32_t)v;
    }
    uint32_t mask;
    if (bd_gguf_get_u32(f, "tokenizer.ggml.mask_token_id", &mask) || bd_gguf_get_u32(f, "dflash.mask_token_id", &mask))
        dh->mask_id = (int32_t)mask;
    else
        return bd_err(err, errlen, "%s: missing 'tokenizer.ggml.mask_token_id'", m->path);
    bool causal = false;
    if (bd_gguf_find(f, "dflash.attention.causal") && !bd_gguf_get_bool(f, "dflash.attention.causal", &causal))
        return bd_err(err, errlen, "%s: 'dflash.attention.causal' has the wrong type", m->path);
    dh->causal = causal;
    /* rope.dimension_sections = [hd/2, 0, 0, 0] is plain NEOX; anything else is M-RoPE. */
    const bd_gguf_kv *ds = bd_gguf_find(f, "dflash.rope.dimension_sections");
    if (ds) {
        bool plain = ds->type == GGUF_VTYPE_ARRAY && ds->arr_count >= 1;
        for (uint64_t i = 0; plain && i < ds->arr_count; i++) {
            int64_t v;
            plain = bd_gguf_arr_i64(ds, i, &v) && v == (i == 0 ? m->hp.n_rot / 2 : 0);
        }
        if (!plain)
            return bd_err(err, errlen, "%s: 'dflash.rope.dimension_sections' other than [%d, 0, 0, 0] is not supported",
                          m->path, m->hp.n_rot / 2);
    }
    for (int64_t i = 0; i < bd_gguf_tensor_count(f); i++) {
        const char *name = bd_gguf_tensor_at(f, i)->name;
        if (!tensor_expected(name, m->hp.n_layer))
            return bd_err(err, errlen, "%s: drafter tensor '%s' belongs to a DFlash variant blockdraft does not run",
                          m->path, name);
    }
    const int64_t E = m->hp.n_embd;
    if (!bd_model_get_mat(m, "fc.weight", (int64_t)dh->n_target_layers * E, E, true, &dh->fc, err, errlen) ||
        !bd_model_get_vec(m, "enc.output_norm.weight", E, true, &dh->enc_norm, err, errlen) ||
        !bd_model_get_vec(m, "output_norm.weight", E, true, &m->output_norm, err, errlen))
        return false;
    const bd_gguf_tensor *te = bd_gguf_find_tensor(f, "token_embd.weight");
    if (te) {
        if (te->ne[1] < 1 || te->ne[1] > (1u << 24))
            return bd_err(err, errlen, "%s: implausible token_embd rows", m->path);
        m->hp.n_vocab = (int32_t)te->ne[1];
        if (!bd_model_get_mat(m, "token_embd.weight", E, m->hp.n_vocab, true, &m->tok_embd, err, errlen) ||
            !bd_model_get_mat(m, "output.weight", E, m->hp.n_vocab, false, &m->output, err, errlen))
            return false;
        if (!m->output.data) m->output = m->tok_embd;
    } else if (bd_gguf_find_tensor(f, "output.weight")) {
        return bd_err(err, errlen, "%s: drafter has 'output.weight' but no 'token_embd.weight'", m->path);
    }
    return bd_model_load_layers(m, "dflash", err, errlen);
}

/* ------------------------------------------------------------------------
 * Runtime state
 * ---------------------------------------------------------------------- */

struct bd_dflash {
    bd_model *dm, *tm;
    bd_pool *pool;
    int32_t n_ctx, n_batch, max_rows, B, K;
    int32_t n_rows;        /* committed context rows */
    bd_mat embd, out;      /* borrowed from the target unless the drafter ships its own */
    float *k_cache;        /* [n_layer][n_ctx + B][n_kv*hd] */
    float *v_cache;        /* [n_layer][n_ctx + B][n_kv*hd] */
    float *c;              /* [max_rows][n_embd] projected context rows */
    float *x;              /* [max_rows][n_embd] */
    float *h;              /* [max_rows][n_embd] */
    float *q;              /* [B][n_head*hd] */
    float *k;              /* [max_rows][n_kv*hd] */
    float *v;              /* [max_rows][n_kv*hd] */
    float *att;            /* [B][n_head*hd] */
    float *gate, *up;      /* [B][n_ff] */
    float *scores;         /* [n_threads][BD_ATTN_QB][n_ctx + B] */
    float *logits;         /* [B][n_vocab] */
    void *mm_scratch;
    int32_t block_tokens[64];
};

int32_t bd_dflash_block_size(const bd_dflash *d) { return d->B; }
int32_t bd_dflash_n_taps(const bd_dflash *d) { return d->K; }
const int32_t *bd_dflash_taps(const bd_dflash *d) { return d->dm->dflash.target_layers; }
int32_t bd_dflash_n_rows(const bd_dflash *d) { return d->n_rows; }
void bd_dflash_reset(bd_dflash *d) { d->n_rows = 0; }
void bd_dflash_truncate(bd_dflash *d, int32_t n) {
    if (n >= 0 && n < d->n_rows) d->n_rows = n;
}

void bd_dflash_free(bd_dflash *d) {
    if (!d) return;
    bd_free(d->k_cache);
    bd_free(d->v_cache);
    bd_free(d->c);
    bd_free(d->x);
    bd_free(d->h);
    bd_free(d->q);
    bd_free(d->k);
    bd_free(d->v);
    bd_free(d->att);
    bd_free(d->gate);
    bd_free(d->up);
    bd_free(d->scores);
    bd_free(d->logits);
    bd_free(d->mm_scratch);
    free(d);
}

bd_dflash *bd_dflash_create(bd_model *dm, bd_model *tm, bd_pool *pool, int32_t n_ctx, int32_t n_batch,
                            char *err, size_t errlen) {
    if (dm->arch != BD_ARCH_DFLASH) {
        bd_err(err, errlen, "%s: not a dflash drafter (architecture '%s')", dm->path, dm->arch_name);
        return NULL;
    }
    if (tm->arch == BD_ARCH_DFLASH) {
        bd_err(err, errlen, "%s: the target model is itself a drafter", tm->path);
        return NULL;
    }
    pairing_report rep;
    pairing_drafter_info di;
    pairing_report_init(&rep);
    if (!pairing_run(tm->gguf, dm->gguf, &rep, &di, err, errlen)) return NULL;
    const bd_hparams *dh = &dm->hp, *th = &tm->hp;
    /* The engine's own limits, on top of the header checks. */
    if (dh->n_embd != th->n_embd) {
        bd_err(err, errlen, "drafter width %d does not match the target's %d", dh->n_embd, th->n_embd);
        return NULL;
    }
    for (int i = 0; i < dm->dflash.n_target_layers; i++)
        if (dm->dflash.target_layers[i] >= th->n_layer) {
            bd_err(err, errlen, "drafter taps target layer %d, the target has %d layers",
                   dm->dflash.target_layers[i], th->n_layer);
            return NULL;
        }
    if (dm->dflash.mask_id < 0 || dm->dflash.mask_id >= th->n_vocab) {
        bd_err(err, errlen, "drafter mask id %d is outside the target vocabulary (%d)", dm->dflash.mask_id,
               th->n_vocab);
        return NULL;
    }
    if (dm->tok_embd.data && dm->hp.n_vocab != th->n_vocab) {
        bd_err(err, errlen, "drafter embeddings have %d rows, the target vocabulary %d", dm->hp.n_vocab,
               th->n_vocab);
        return NULL;
    }
    bd_dflash *d = calloc(1, sizeof *d);
    if (!d) {
        bd_err(err, errlen, "out of memory");
        return NULL;
    }
    d->dm = dm;
    d->tm = tm;
    d->pool = pool;
    d->n_ctx = n_ctx;
    d->n_batch = n_batch;
    d->B = dm->dflash.block_size;
    d->K = dm->dflash.n_target_layers;
    d->max_rows = n_batch > d->B ? n_batch : d->B;
    d->embd = dm->tok_embd.data ? dm->tok_embd : tm->tok_embd;
    d->out = dm->tok_embd.data ? dm->output : tm->output;
    const int64_t E = dh->n_embd, Q = (int64_t)dh->n_head * dh->hd, KV = (int64_t)dh->n_kv * dh->hd,
                  R = d->max_rows, B = d->B, FF = dh->n_ff, V = th->n_vocab;
    size_t kv = (size_t)dh->n_layer * (size_t)(n_ctx + B) * (size_t)KV * sizeof(float);
    d->k_cache = bd_alloc(kv);
    d->v_cache = bd_alloc(kv);
    d->c = bd_alloc((size_t)(R * E) * sizeof(float));
    d->x = bd_alloc((size_t)(R * E) * sizeof(float));
    d->h = bd_alloc((size_t)(R * E) * sizeof(float));
    d->q = bd_alloc((size_t)(B * Q) * sizeof(float));
    d->k = bd_alloc((size_t)(R * KV) * sizeof(float));
    d->v = bd_alloc((size_t)(R * KV) * sizeof(float));
    d->att = bd_alloc((size_t)(B * Q) * sizeof(float));
    d->gate = bd_alloc((size_t)(B * FF) * sizeof(float));
    d->up = bd_alloc((size_t)(B * FF) * sizeof(float));
    d->scores = bd_alloc((size_t)bd_pool_size(pool) * BD_ATTN_QB * (size_t)(n_ctx + B) * sizeof(float));
    d->logits = bd_alloc((size_t)(B * V) * sizeof(float));
    size_t mm = bd_matmul_fast_scratch_size(&dm->dflash.fc, R);
    size_t o = bd_matmul_fast_scratch_size(&d->out, B);
    if (o > mm) mm = o;
    for (int il = 0; il < dh->n_layer; il++) {
        const bd_layer *L = &dm->layers[il];
        const bd_mat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t j = 0; j < sizeof ms / sizeof ms[0]; j++) {
            size_t s = bd_matmul_fast_scratch_size(ms[j], R);
            if (s > mm) mm = s;
        }
    }
    d->mm_scratch = bd_alloc(mm);
    if (!d->k_cache || !d->v_cache || !d->c || !d->x || !d->h || !d->q || !d->k || !d->v || !d->att ||
        !d->gate || !d->up || !d->scores || !d->logits || !d->mm_scratch) {
        bd_err(err, errlen, "out of memory allocating the drafter state (%.1f MiB of context cache)",
               2.0 * (double)kv / (1 << 20));
        bd_dflash_free(d);
        return NULL;
    }
    return d;
}

/* ------------------------------------------------------------------------
 * Context rows
 * ---------------------------------------------------------------------- */

bool bd_dflash_append(bd_dflash *d, const float *feats, int32_t n, char *err, size_t errlen) {
    const bd_model *dm = d->dm;
    const bd_hparams *hp = &dm->hp;
    if (n <= 0) return true;
    if (n > d->n_batch) return bd_err(err, errlen, "dflash: %d feature rows exceed the batch (%d)", n, d->n_batch);
    if (d->n_rows + n > d->n_ctx) return bd_err(err, errlen, "dflash: drafter context full (%d rows)", d->n_ctx);
    const int64_t E = hp->n_embd, KV = (int64_t)hp->n_kv * hp->hd, KE = (int64_t)d->K * E;
    bd_matmul_fast(d->pool, &dm->dflash.fc, feats, KE, n, d->x, E, d->mm_scratch);
    for (int32_t t = 0; t < n; t++) bd_rmsnorm(d->c + t * E, d->x + t * E, dm->dflash.enc_norm, E, hp->rms_eps);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const bd_layer *L = &dm->layers[il];
        bd_matmul_fast(d->pool, &L->wk, d->c, E, n, d->k, KV, d->mm_scratch);
        bd_matmul_fast(d->pool, &L->wv, d->c, E, n, d->v, KV, d->mm_scratch);
        float *kc = d->k_cache + (int64_t)il * (d->n_ctx + d->B) * KV;
        float *vc = d->v_cache + (int64_t)il * (d->n_ctx + d->B) * KV;
        for (int32_t t = 0; t < n; t++) {
            float *k = d->k + t * KV;
            for (int32_t h = 0; h < hp->n_kv; h++)
                bd_rmsnorm(k + h * hp->hd, k + h * hp->hd, L->k_norm, hp->hd, hp->rms_eps);
            bd_rope(k, hp->n_kv, hp->hd, hp->n_rot, d->n_rows + t, hp->rope_base, BD_ROPE_NEOX);
            memcpy(kc + (int64_t)(d->n_rows + t) * KV, k, (size_t)KV * sizeof(float));
            memcpy(vc + (int64_t)(d->n_rows + t) * KV, d->v + t * KV, (size_t)KV * sizeof(float));
        }
    }
    d->n_rows += n;
    return true;
}

/* ------------------------------------------------------------------------
 * Block forward
 * ---------------------------------------------------------------------- */

bool bd_dflash_draft(bd_dflash *d, int32_t anchor, int32_t n_draft, int32_t block_rows, int32_t *out, char *err,
                     size_t errlen) {
    const bd_model *dm = d->dm;
    const bd_hparams *hp = &dm->hp;
    if (n_draft < 1 || n_draft >= d->B)
        return bd_err(err, errlen, "dflash: draft length %d outside [1, %d]", n_draft, d->B - 1);
    const int32_t b = block_rows > 0 ? block_rows : d->B, P = d->n_rows;
    if (b <= n_draft || b > d->B) return bd_err(err, errlen, "dflash: block of %d rows for %d drafts", b, n_draft);
    if (P + b > d->n_ctx + d->B) return bd_err(err, errlen, "dflash: drafter context full");
    const int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->hd, KV = (int64_t)hp->n_kv * hp->hd,
                  FF = hp->n_ff, V = d->tm->hp.n_vocab;
    d->block_tokens[0] = anchor;
    for (int32_t i = 1; i < b; i++) d->block_tokens[i] = dm->dflash.mask_id;
    for (int32_t i = 0; i < b; i++) bd_mat_get_row(&d->embd, d->block_tokens[i], d->x + i * E);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const bd_layer *L = &dm->layers[il];
        float *kc = d->k_cache + (int64_t)il * (d->n_ctx + d->B) * KV;
        float *vc = d->v_cache + (int64_t)il * (d->n_ctx + d->B) * KV;
        for (int32_t i = 0; i < b; i++) bd_rmsnorm(d->h + i * E, d->x + i * E, L->attn_norm, E, hp->rms_eps);
        bd_matmul_fast(d->pool, &L->wq, d->h, E, b, d->q, Q, d->mm_scratch);
        bd_matmul_fast(d->pool, &L->wk, d->h, E, b, d->k, KV, d->mm_scratch);
        bd_matmul_fast(d->pool, &L->wv, d->h, E, b, d->v, KV, d->mm_scratch);
        for (int32_t i = 0; i < b; i++) {
            float *q = d->q + i * Q, *k = d->k + i * KV;
            for (int32_t h = 0; h < hp->n_head; h++)
                bd_rmsnorm(q + h * hp->hd, q + h * hp->hd, L->q_norm, hp->hd, hp->rms_eps);
            for (int32_t h = 0; h < hp->n_kv; h++)
                bd_rmsnorm(k + h * hp->hd, k + h * hp->hd, L->k_norm, hp->hd, hp->rms_eps);
            bd_rope(q, hp->n_head, hp->hd, hp->n_rot, P + i, hp->rope_base, BD_ROPE_NEOX);
            bd_rope(k, hp->n_kv, hp->hd, hp->n_rot, P + i, hp->rope_base, BD_ROPE_NEOX);
            /* block K/V go above the committed rows: scratch, never committed */
            memcpy(kc + (int64_t)(P + i) * KV, k, (size_t)KV * sizeof(float));
            memcpy(vc + (int64_t)(P + i) * KV, d->v + i * KV, (size_t)KV * sizeof(float));
        }
        bd_attn_args aa = {
            .q = d->q, .k_cache = kc, .v_cache = vc, .out = d->att, .scores = d->scores,
            .scores_stride = d->n_ctx + d->B, .n = b, .n_head = hp->n_head, .n_kv = hp->n_kv,
            .hd = hp->hd, .n_past = P, .causal = dm->dflash.causal,
        };
        bd_attention(d->pool, &aa);
        bd_matmul_fast(d->pool, &L->wo, d->att, Q, b, d->h, E, d->mm_scratch);
        for (int64_t i = 0; i < (int64_t)b * E; i++) d->x[i] += d->h[i];
        for (int32_t i = 0; i < b; i++) bd_rmsnorm(d->h + i * E, d->x + i * E, L->ffn_norm, E, hp->rms_eps);
        bd_matmul_fast(d->pool, &L->w_gate, d->h, E, b, d->gate, FF, d->mm_scratch);
        bd_matmul_fast(d->pool, &L->w_up, d->h, E, b, d->up, FF, d->mm_scratch);
        bd_kernels_get()->silu_mul((int64_t)b * FF, d->gate, d->up);
        bd_matmul_fast(d->pool, &L->w_down, d->gate, FF, b, d->h, E, d->mm_scratch);
        for (int64_t i = 0; i < (int64_t)b * E; i++) d->x[i] += d->h[i];
    }
    /* rows 1..n_draft only: row 0 (the anchor) predicts nothing we use */
    for (int32_t i = 1; i <= n_draft; i++)
        bd_rmsnorm(d->h + (i - 1) * E, d->x + i * E, dm->output_norm, E, hp->rms_eps);
    bd_matmul_fast(d->pool, &d->out, d->h, E, n_draft, d->logits, V, d->mm_scratch);
    for (int32_t i = 0; i < n_draft; i++) {
        const float *lg = d->logits + (int64_t)i * V;
        int32_t best = 0;
        for (int32_t t = 1; t < V; t++)
            if (lg[t] > lg[best]) best = t;
        out[i] = best;
    }
    return true;
}
