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
 * Runtime state
 * ---------------------------------------------------------------------- */

struct bd_dflash {
    bd_model *dm, *tm;
    bd_pool *pool;
    int32_t n_ctx, n_batch, max_rows, B, K;
    int32_t n_rows;        /* committed context rows */
    bd_mat embd, out;      /* borrowed from the target unless the drafter ships its own */
    char *k_cache;         /* [n_layer][n_kv][n_ctx + B] rows of hd elements of k_type, head-major
                              (attention.c) */
    char *v_cache;         /* [n_layer][n_kv][n_ctx + B] rows of v_type */
    uint32_t k_type, v_type; /* BD_TYPE_F32 or another cache type (-ctkd / -ctvd; bd_attn_cache_type) */
    size_t k_rb, v_rb;     /* bytes of one row */
    int32_t k_rot, v_rot;  /* bd_attn_rot of the caches (q, k, v rotated before the store) */
    float *kv_tmp;         /* [n_threads][BD_ATTN_KB][hd] widened rows; NULL when both are f32 */
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
    bd_free(d->kv_tmp);
    bd_free(d->logits);
    bd_free(d->mm_scratch);
    free(d);
}

bd_dflash *bd_dflash_create(bd_model *dm, bd_model *tm, bd_pool *pool, int32_t n_ctx, int32_t n_batch,
                            int32_t type_k, int32_t type_v, char *err, size_t errlen) {
    if (dm->arch != BD_ARCH_DFLASH) {
        bd_err(err, errlen, "%s: not a dflash drafter (architecture '%s')", dm->path, dm->arch_name);
        return NULL;
    }
    if (tm->arch == BD_ARCH_DFLASH) {
        bd_err(err, errlen, "%s: the target model is itself a drafter", tm->path);
        return NULL;
    }
    /* The pair's fit (width, taps within the trunk, mask id and embeddings
     * within the vocabulary, same tokenizer): the same checks the gallery
     * ran at install. */
    bd_pairing_report rep;
    bd_pairing_report_init(&rep);
    if (!bd_pairing_run(tm->gguf, dm->gguf, &rep, NULL, err, errlen)) return NULL;
    const bd_hparams *dh = &dm->hp, *th = &tm->hp;
    uint32_t tk, tv;
    if (!bd_attn_cache_type(type_k, &tk) || !bd_attn_cache_type(type_v, &tv)) {
        bd_err(err, errlen, "invalid drafter KV cache type (K %d, V %d)", type_k, type_v);
        return NULL;
    }
    if (!bd_attn_row_bytes(tk, dh->hd) || !bd_attn_row_bytes(tv, dh->hd)) {
        const uint32_t bad = bd_attn_row_bytes(tk, dh->hd) ? tv : tk;
        bd_err(err, errlen, "drafter KV cache type %s needs a head size that is a multiple of %lld (the drafter's is %d)",
               bd_type_name(bad), (long long)bd_type_get(bad)->blck, dh->hd);
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
    d->k_type = tk;
    d->v_type = tv;
    d->k_rb = bd_attn_row_bytes(tk, dh->hd);
    d->v_rb = bd_attn_row_bytes(tv, dh->hd);
    d->k_rot = bd_attn_rot(tk, dh->hd, false);
    d->v_rot = bd_attn_rot(tv, dh->hd, true);
    d->embd = dm->tok_embd.data ? dm->tok_embd : tm->tok_embd;
    d->out = dm->tok_embd.data ? dm->output : tm->output;
    const int64_t E = dh->n_embd, Q = (int64_t)dh->n_head * dh->hd, KV = (int64_t)dh->n_kv * dh->hd,
                  R = d->max_rows, B = d->B, FF = dh->n_ff, V = th->n_vocab;
    const size_t rows = (size_t)dh->n_layer * (size_t)(n_ctx + B) * (size_t)dh->n_kv;
    const size_t kv = rows * (d->k_rb + d->v_rb);
    /* the drafter's attention reads context and block rows, all written first */
    d->k_cache = bd_alloc_raw(rows * d->k_rb);
    d->v_cache = bd_alloc_raw(rows * d->v_rb);
    if (tk != BD_TYPE_F32 || tv != BD_TYPE_F32) {
        d->kv_tmp = bd_alloc((size_t)bd_pool_size(pool) * BD_ATTN_KB * (size_t)dh->hd * sizeof(float));
        if (!d->kv_tmp) {
            bd_err(err, errlen, "out of memory allocating the drafter state");
            bd_dflash_free(d);
            return NULL;
        }
    }
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
               (double)kv / (1 << 20));
        bd_dflash_free(d);
        return NULL;
    }
    return d;
}

/* ------------------------------------------------------------------------
 * Context rows
 * ---------------------------------------------------------------------- */

/* Row pos of one layer's head-major caches (kc, vc) := k, v ([n_kv*hd]
 * each, rotated here in place where the caches' types ask it:
 * attention.h), in the caches' types. */
static void kv_store(const bd_dflash *d, char *kc, char *vc, int32_t pos, float *k, float *v) {
    const bd_hparams *hp = &d->dm->hp;
    if (d->k_rot) bd_attn_rotate(k, (int64_t)hp->n_kv * hp->hd, d->k_rot);
    if (d->v_rot) bd_attn_rotate(v, (int64_t)hp->n_kv * hp->hd, d->v_rot);
    for (int32_t h = 0; h < hp->n_kv; h++) {
        const size_t row = (size_t)h * (size_t)(d->n_ctx + d->B) + (size_t)pos; /* head-major */
        bd_attn_kv_store(kc + row * d->k_rb, d->k_type, k + (int64_t)h * hp->hd, hp->hd);
        bd_attn_kv_store(vc + row * d->v_rb, d->v_type, v + (int64_t)h * hp->hd, hp->hd);
    }
}

/* Layer il's first row in the K and V caches. */
static char *layer_k(const bd_dflash *d, int32_t il) {
    return d->k_cache + (size_t)il * (size_t)(d->n_ctx + d->B) * (size_t)d->dm->hp.n_kv * d->k_rb;
}
static char *layer_v(const bd_dflash *d, int32_t il) {
    return d->v_cache + (size_t)il * (size_t)(d->n_ctx + d->B) * (size_t)d->dm->hp.n_kv * d->v_rb;
}

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
        char *kc = layer_k(d, il), *vc = layer_v(d, il);
        for (int32_t t = 0; t < n; t++) {
            float *k = d->k + t * KV;
            for (int32_t h = 0; h < hp->n_kv; h++)
                bd_rmsnorm(k + h * hp->hd, k + h * hp->hd, L->k_norm, hp->hd, hp->rms_eps);
            bd_rope(k, hp->n_kv, hp->hd, hp->n_rot, d->n_rows + t, &hp->rope, BD_ROPE_NEOX);
            kv_store(d, kc, vc, d->n_rows + t, k, d->v + t * KV);
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
        char *kc = layer_k(d, il), *vc = layer_v(d, il);
        /* Rows r0 .. r0 + nr - 1 get the query, attention, output
         * projection and feed-forward: all b rows, except in the last
         * layer, whose output only the head reads (rows 1..n_draft). K and
         * V are made for every row in every layer (each row's attention
         * sees the whole block). Outside attention rows do not mix, and the
         * kernels give a row the same bits in any batch, so the drafts are
         * the full block's (a one-token draft at 16 block rows skips 15
         * rows of the last layer's query and output projections and
         * feed-forward). */
        const int32_t r0 = il == hp->n_layer - 1 ? 1 : 0, nr = il == hp->n_layer - 1 ? n_draft : b;
        float *xr = d->x + (int64_t)r0 * E; /* [nr][E] */
        for (int32_t i = 0; i < b; i++) bd_rmsnorm(d->h + i * E, d->x + i * E, L->attn_norm, E, hp->rms_eps);
        bd_matmul_fast(d->pool, &L->wq, d->h + (int64_t)r0 * E, E, nr, d->q, Q, d->mm_scratch); /* [nr][Q] */
        bd_matmul_fast(d->pool, &L->wk, d->h, E, b, d->k, KV, d->mm_scratch);                   /* [b][KV] */
        bd_matmul_fast(d->pool, &L->wv, d->h, E, b, d->v, KV, d->mm_scratch);
        for (int32_t i = 0; i < b; i++) {
            float *k = d->k + i * KV;
            if (i >= r0 && i < r0 + nr) {
                float *q = d->q + (i - r0) * Q;
                for (int32_t h = 0; h < hp->n_head; h++)
                    bd_rmsnorm(q + h * hp->hd, q + h * hp->hd, L->q_norm, hp->hd, hp->rms_eps);
                bd_rope(q, hp->n_head, hp->hd, hp->n_rot, P + i, &hp->rope, BD_ROPE_NEOX);
                if (d->k_rot) bd_attn_rotate(q, Q, d->k_rot);
            }
            for (int32_t h = 0; h < hp->n_kv; h++)
                bd_rmsnorm(k + h * hp->hd, k + h * hp->hd, L->k_norm, hp->hd, hp->rms_eps);
            bd_rope(k, hp->n_kv, hp->hd, hp->n_rot, P + i, &hp->rope, BD_ROPE_NEOX);
            /* block K/V go above the committed rows: scratch, never committed */
            kv_store(d, kc, vc, P + i, k, d->v + i * KV);
        }
        bd_attn_args aa = {
            .q = d->q, .k_cache = kc, .v_cache = vc, .kv_head_stride = (int64_t)(d->n_ctx + d->B) * hp->hd,
            .k_type = d->k_type, .v_type = d->v_type, .kv_tmp = d->kv_tmp,
            .out = d->att, .scores = d->scores,
            .scores_stride = d->n_ctx + d->B, .n = nr, .n_head = hp->n_head, .n_kv = hp->n_kv,
            .hd = hp->hd, .n_past = P, .q_off = r0, .n_blk = b, .causal = dm->dflash.causal,
            .window = dm->dflash.swa_layer[il] ? dm->dflash.swa_window : 0, .v_rot = d->v_rot,
        };
        bd_attention(d->pool, &aa);
        bd_matmul_fast(d->pool, &L->wo, d->att, Q, nr, d->h, E, d->mm_scratch);
        for (int64_t i = 0; i < (int64_t)nr * E; i++) xr[i] += d->h[i];
        for (int32_t i = 0; i < nr; i++) bd_rmsnorm(d->h + i * E, xr + i * E, L->ffn_norm, E, hp->rms_eps);
        bd_matmul_fast(d->pool, &L->w_gate, d->h, E, nr, d->gate, FF, d->mm_scratch);
        bd_matmul_fast(d->pool, &L->w_up, d->h, E, nr, d->up, FF, d->mm_scratch);
        bd_kernels_get()->silu_mul((int64_t)nr * FF, d->gate, d->up);
        bd_matmul_fast(d->pool, &L->w_down, d->gate, FF, nr, d->h, E, d->mm_scratch);
        for (int64_t i = 0; i < (int64_t)nr * E; i++) xr[i] += d->h[i];
    }
    /* rows 1..n_draft only: row 0 (the anchor) predicts nothing we use */
    for (int32_t i = 1; i <= n_draft; i++)
        bd_rmsnorm(d->h + (i - 1) * E, d->x + i * E, dm->output_norm, E, hp->rms_eps);
    bd_matmul_fast(d->pool, &d->out, d->h, E, n_draft, d->logits, V, d->mm_scratch);
    for (int32_t i = 0; i < n_draft; i++) {
        const float *lg = d->logits + (int64_t)i * V;
        out[i] = bd_kernels_get()->argmax(lg, V);
    }
    if (!bd_model_intact(d->dm))
        return bd_err(err, errlen, "drafter file %s changed on disk while in use (truncated or rewritten): "
                      "reopen the model", d->dm->path);
    return true;
}
