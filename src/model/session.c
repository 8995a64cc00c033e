/*
 * session.c - session creation (all buffers of the token loop are
 * allocated here, once), truncation and accessors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "model.h"

bd_session_params bd_session_default_params(void) {
    bd_session_params p = {0};
    return p;
}

static const char *const k_kv_names[BD_KV_COUNT] = {"f32",  "f32",  "f16",    "q8_0", "bf16",
                                                     "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}; /* by enum bd_kv_type */

bool bd_kv_type_parse(const char *name, int32_t *t) {
    for (int32_t i = BD_KV_F32; i < BD_KV_COUNT; i++)
        if (!strcmp(name, k_kv_names[i])) {
            *t = i;
            return true;
        }
    return false;
}

const char *bd_kv_type_name(int32_t t) { return t >= BD_KV_DEFAULT && t < BD_KV_COUNT ? k_kv_names[t] : "?"; }


static size_t max_scratch(const bd_model *m, int32_t n_batch, int32_t n_out) {
    size_t mx = 0;
    const int32_t MR = n_batch < BD_MOE_ROWS ? n_batch : BD_MOE_ROWS; /* rows of one MoE pass */
#define UPD(W, n)                                                           \
    do {                                                                    \
        if ((W).data) {                                                     \
            size_t s_ = bd_matmul_scratch_size(&(W), n);                    \
            if (s_ > mx) mx = s_;                                           \
        }                                                                   \
    } while (0)
    for (int il = 0; il < m->hp.n_layer; il++) {
        const bd_layer *L = &m->layers[il];
        UPD(L->wq, n_batch);
        UPD(L->wk, n_batch);
        UPD(L->wv, n_batch);
        UPD(L->wo, n_batch);
        UPD(L->w_gate, n_batch);
        UPD(L->w_up, n_batch);
        UPD(L->w_down, n_batch);
        UPD(L->w_qkv, n_batch);
        UPD(L->w_z, n_batch);
        UPD(L->w_beta, n_batch);
        UPD(L->w_alpha, n_batch);
        UPD(L->ssm_out, n_batch);
        UPD(L->router, MR);
        UPD(L->gate_exps, MR);
        UPD(L->up_exps, MR);
        UPD(L->gate_up_exps, MR);
        UPD(L->down_exps, MR);
        UPD(L->shexp_gate_inp, MR);
        UPD(L->gate_shexp, MR);
        UPD(L->up_shexp, MR);
        UPD(L->down_shexp, MR);
    }
    UPD(m->output, n_out);
#undef UPD
    /* bd_moe_ffn's grouped passes: gate | up over GR rows, two groups an
     * expert at most; the downs over every routed pair. Each group gathers
     * its own copy of its rows, so split gate and up stacks gather every
     * routed pair twice (GU rows sized them once: with a small n_batch,
     * where nothing else needs more scratch, a qwen35moe "small" file
     * wrote past the buffer) */
    const int32_t GR = n_batch < BD_MOE_GROUP_ROWS ? n_batch : BD_MOE_GROUP_ROWS;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const bd_layer *L = &m->layers[il];
        const int64_t NE = m->hp.n_expert, GU = (int64_t)GR * m->hp.n_expert_used;
        const bd_mat *gu = L->gate_up_exps.data ? &L->gate_up_exps : L->gate_exps.data ? &L->gate_exps : NULL;
        if (gu) {
            size_t s_ = bd_matmul_grouped_scratch_size(gu, GR, L->gate_up_exps.data ? GU : 2 * GU, (int)(2 * NE));
            if (s_ > mx) mx = s_;
        }
        if (L->down_exps.data) {
            size_t s_ = bd_matmul_grouped_scratch_size(&L->down_exps, GU, GU, (int)NE);
            if (s_ > mx) mx = s_;
        }
    }
    return mx;
}

bd_session *bd_session_create_on_pool(bd_model *m, const bd_session_params *p, bd_pool *pool, char *err,
                                      size_t errlen);

static size_t kv_row_bytes(const bd_model *m, uint32_t type) { return bd_attn_row_bytes(type, m->hp.hd); }

/* One of the K and V caches: [n_attn_layers][n_kv][n_ctx] rows of hd
 * elements of type. */
static size_t kv_cache_bytes(const bd_model *m, int64_t n_ctx, uint32_t type) {
    const bd_hparams *hp = &m->hp;
    return (size_t)hp->n_attn_layers * (size_t)n_ctx * (size_t)hp->n_kv * kv_row_bytes(m, type);
}

uint64_t bd_session_kv_bytes(const bd_model *m, const bd_session_params *p) {
    if (m->arch == BD_ARCH_DFLASH) return 0;
    bd_session_params d = bd_session_default_params();
    if (!p) p = &d;
    uint32_t tk = BD_TYPE_F32, tv = BD_TYPE_F32;
    bd_attn_cache_type(p->type_k, &tk);
    bd_attn_cache_type(p->type_v, &tv);
    const int32_t n_ctx = p->n_ctx > 0 ? p->n_ctx : 4096;
    return (uint64_t)kv_cache_bytes(m, n_ctx, tk) + (uint64_t)kv_cache_bytes(m, n_ctx, tv);
}

bd_session *bd_session_create(bd_model *m, const bd_session_params *p, char *err, size_t errlen) {
    return bd_session_create_on_pool(m, p, p && p->threadpool ? p->threadpool->pool : NULL, err, errlen);
}

/* pool == NULL: the session creates and owns its pool; else it borrows
 * pool (a draft model sharing its target's threads). */
bd_session *bd_session_create_on_pool(bd_model *m, const bd_session_params *p, bd_pool *pool, char *err,
                                      size_t errlen) {
    if (m->arch == BD_ARCH_DFLASH) {
        bd_err(err, errlen, "%s: a dflash drafter runs attached to a target model, not on its own", m->path);
        return NULL;
    }
    bd_session_params d = bd_session_default_params();
    if (!p) p = &d;
    const bd_hparams *hp = &m->hp;
    bd_session *s = calloc(1, sizeof *s);
    if (!s) {
        bd_err(err, errlen, "out of memory");
        return NULL;
    }
    s->m = m;
    /* RoPE: the file's, with llama.cpp's context overrides */
    if (p->rope_scaling < BD_ROPE_SCALING_FILE || p->rope_scaling > BD_ROPE_SCALING_YARN ||
        !(p->rope_freq_base >= 0.0f) || !isfinite(p->rope_freq_base) || !(p->rope_freq_scale >= 0.0f) ||
        !isfinite(p->rope_freq_scale) || p->yarn_orig_ctx < 0) {
        bd_err(err, errlen, "invalid RoPE override (scaling %d, base %g, scale %g, original context %d)",
               p->rope_scaling, (double)p->rope_freq_base, (double)p->rope_freq_scale, p->yarn_orig_ctx);
        goto fail;
    }
    bd_rope_scaling sc = hp->rope_scaling;
    if (p->rope_scaling != BD_ROPE_SCALING_FILE) sc.type = p->rope_scaling;
    if (p->rope_freq_scale > 0.0f) sc.freq_scale = p->rope_freq_scale;
    if (p->yarn_orig_ctx > 0) sc.orig_ctx = p->yarn_orig_ctx;
    bd_rope_params_make(&s->rope, p->rope_freq_base > 0.0f ? p->rope_freq_base : hp->rope_base, hp->n_rot, &sc,
                        hp->rope.freq_factors);
    if (!bd_attn_cache_type(p->type_k, &s->k_type) || !bd_attn_cache_type(p->type_v, &s->v_type)) {
        bd_err(err, errlen, "invalid KV cache type (K %d, V %d)", p->type_k, p->type_v);
        goto fail;
    }
    if (hp->n_attn_layers > 0 && (!kv_row_bytes(m, s->k_type) || !kv_row_bytes(m, s->v_type))) {
        bd_err(err, errlen, "KV cache type %s needs a head size that is a multiple of %lld (the model's is %d)",
               bd_type_name(kv_row_bytes(m, s->k_type) ? s->v_type : s->k_type),
               (long long)bd_type_get(kv_row_bytes(m, s->k_type) ? s->v_type : s->k_type)->blck, hp->hd);
        goto fail;
    }
    s->k_row_bytes = kv_row_bytes(m, s->k_type);
    s->v_row_bytes = kv_row_bytes(m, s->v_type);
    s->k_rot = bd_attn_rot(s->k_type, hp->hd, false);
    s->v_rot = bd_attn_rot(s->v_type, hp->hd, true);
    s->n_ctx = p->n_ctx > 0 ? p->n_ctx : 4096; /* llama.cpp's default, whatever the trained length */
    if (s->n_ctx < 1) s->n_ctx = 1;
    s->n_batch = p->n_batch > 0 ? p->n_batch : 512;
    if (s->n_batch > s->n_ctx) s->n_batch = s->n_ctx;
    s->n_out_max = p->n_outputs > 0 ? p->n_outputs : 32;
    if (s->n_out_max > s->n_batch) s->n_out_max = s->n_batch;
    if (p->n_tap < 0 || p->n_tap > BD_MAX_TAPS || (p->n_tap > 0 && !p->tap_layers)) {
        bd_err(err, errlen, "invalid tap layer count %d (max %d)", p->n_tap, BD_MAX_TAPS);
        goto fail;
    }
    for (int i = 0; i <= hp->n_layer && i <= BD_MAX_LAYERS; i++) s->tap_slot[i] = -1;
    s->n_tap = p->n_tap;
    for (int i = 0; i < p->n_tap; i++) {
        int32_t l = p->tap_layers[i];
        if (l < 0 || l > hp->n_layer) {
            bd_err(err, errlen, "tap layer %d is out of range (the model has %d layers)", l, hp->n_layer);
            goto fail;
        }
        if (s->tap_slot[l] >= 0) {
            bd_err(err, errlen, "tap layer %d is listed twice", l);
            goto fail;
        }
        s->tap_layers[i] = l;
        s->tap_slot[l] = i;
    }
    s->owns_pool = pool == NULL;
    s->pool = pool ? pool : bd_pool_create(p->n_threads);
    if (!s->pool) {
        bd_err(err, errlen, "cannot create thread pool");
        goto fail;
    }
    const int64_t E = hp->n_embd, B = s->n_batch, Q = (int64_t)hp->n_head * hp->hd, FF = hp->n_ff;
    const size_t k_bytes = kv_cache_bytes(m, s->n_ctx, s->k_type), v_bytes = kv_cache_bytes(m, s->n_ctx, s->v_type);
    const size_t kv_bytes = k_bytes + v_bytes;
    s->tokens = bd_alloc((size_t)s->n_ctx * sizeof *s->tokens);
    /* attention reads cache rows below n_past + n only, all written first */
    s->k_cache = bd_alloc_raw(k_bytes);
    s->v_cache = bd_alloc_raw(v_bytes);
    s->x = bd_alloc((size_t)(B * E) * sizeof(float));
    s->h = bd_alloc((size_t)(B * E) * sizeof(float));
    s->q = bd_alloc((size_t)(B * Q) * sizeof(float));
    if (kv_bytes) {
        const int64_t KV = (int64_t)hp->n_kv * hp->hd;
        s->kn = bd_alloc((size_t)(B * KV) * sizeof(float));
        s->vn = bd_alloc((size_t)(B * KV) * sizeof(float));
        if (!s->kn || !s->vn) goto oom;
    }
    const int64_t FR = B < BD_FFN_ROWS ? B : BD_FFN_ROWS;
    if (FF > 0) {
        s->gate = bd_alloc((size_t)(FR * FF) * sizeof(float));
        s->up = bd_alloc((size_t)(FR * FF) * sizeof(float));
        if (!s->gate || !s->up) goto oom;
    }
    if (hp->n_rec_layers > 0 || m->arch_info->recurrent) {
        const int64_t VD = (int64_t)hp->ssm_n_v * hp->ssm_d_state;
        s->qg = bd_alloc((size_t)(B * 2 * Q) * sizeof(float));
        s->agate = bd_alloc((size_t)(B * Q) * sizeof(float));
        s->z = bd_alloc((size_t)(B * VD) * sizeof(float));
        s->o = bd_alloc((size_t)(B * VD) * sizeof(float));
        if (!s->qg || !s->agate || !s->z || !s->o) goto oom;
        const int32_t n_save = p->n_rollback > 0 ? p->n_rollback : s->n_out_max;
        if (n_save > s->n_ctx) {
            bd_err(err, errlen, "n_rollback %d exceeds the context (%d)", n_save, s->n_ctx);
            goto fail;
        }
        if (!bd_recurrent_create(&s->rs, m, n_save, s->n_batch, err, errlen)) goto fail;
    }
    if (hp->n_expert > 0) {
        const int64_t MR = B < BD_MOE_ROWS ? B : BD_MOE_ROWS; /* rows of one MoE pass */
        const int64_t U = hp->n_expert_used, FE = hp->n_ff_exp,
                      FS = hp->n_ff_shexp > FE ? hp->n_ff_shexp : FE;
        s->moe_logits = bd_alloc((size_t)(MR * hp->n_expert) * sizeof(float));
        s->moe_sel = bd_alloc((size_t)(MR * U) * sizeof(int32_t));
        s->moe_w = bd_alloc((size_t)(MR * U) * sizeof(float));
        s->moe_out = bd_alloc((size_t)(MR * U * E) * sizeof(float));
        s->moe_rows = bd_alloc((size_t)(MR * U) * sizeof(int32_t));
        /* grouped passes (BD_MOE_GROUP_ROWS) keep every routed pair's
         * gate | up and down output at once */
        const int64_t GR = B < BD_MOE_GROUP_ROWS ? B : BD_MOE_GROUP_ROWS, GU = MR > GR * U ? MR : GR * U;
        s->moe_x = bd_alloc((size_t)(MR * E) * sizeof(float));
        s->moe_gu = bd_alloc((size_t)(GU * 2 * FS) * sizeof(float));
        s->moe_y = bd_alloc((size_t)(GU * E) * sizeof(float));
        s->moe_cnt = bd_alloc((size_t)(hp->n_expert + 1) * sizeof(int32_t));
        s->moe_tok = bd_alloc((size_t)(GR * U) * sizeof(int32_t));
        s->moe_seq = bd_alloc((size_t)(GR * U) * sizeof(int32_t));
        s->moe_views = bd_alloc((size_t)(2 * hp->n_expert) * sizeof(bd_mat));
        s->moe_grp = bd_alloc((size_t)(2 * hp->n_expert) * sizeof(bd_matmul_grp));
        if (!s->moe_logits || !s->moe_sel || !s->moe_w || !s->moe_out || !s->moe_rows || !s->moe_x ||
            !s->moe_gu || !s->moe_y || !s->moe_cnt || !s->moe_tok || !s->moe_seq || !s->moe_views || !s->moe_grp)
            goto oom;
    }
    s->scores = bd_alloc((size_t)bd_pool_size(s->pool) * BD_ATTN_QB * (size_t)(s->n_ctx + B) * sizeof(float));
    if (kv_bytes && (s->k_type != BD_TYPE_F32 || s->v_type != BD_TYPE_F32)) {
        s->kv_tmp = bd_alloc((size_t)bd_pool_size(s->pool) * BD_ATTN_KB * (size_t)hp->hd * sizeof(float));
        if (!s->kv_tmp) goto oom;
    }
    s->logits = bd_alloc_raw((size_t)s->n_out_max * (size_t)hp->n_vocab * sizeof(float)); /* rows < n_logits */
    s->mm_scratch_size = max_scratch(m, s->n_batch, s->n_out_max);
    s->mm_scratch = bd_alloc(s->mm_scratch_size);
    if (s->n_tap > 0) s->taps = bd_alloc((size_t)(B * s->n_tap * E) * sizeof(float));
    if (!s->tokens || (kv_bytes && (!s->k_cache || !s->v_cache)) || !s->x || !s->h || !s->q || !s->scores ||
        !s->logits || !s->mm_scratch || (s->n_tap > 0 && !s->taps))
        goto oom;
    return s;
oom:
    bd_err(err, errlen, "out of memory allocating a session (n_ctx %d, KV cache %.1f MiB, recurrent state %.1f MiB)",
           s->n_ctx, (double)kv_bytes / (1 << 20),
           (double)bd_recurrent_bytes(m, p->n_rollback > 0 ? p->n_rollback : s->n_out_max) / (1 << 20));
fail:
    bd_session_free(s);
    return NULL;
}

uint64_t bd_session_cache_bytes(const bd_session *s) {
    return (uint64_t)kv_cache_bytes(s->m, s->n_ctx, s->k_type) + (uint64_t)kv_cache_bytes(s->m, s->n_ctx, s->v_type);
}

void bd_session_free(bd_session *s) {
    if (!s) return;
    if (s->owns_pool) bd_pool_free(s->pool);
    bd_free(s->tokens);
    bd_free(s->k_cache);
    bd_free(s->v_cache);
    bd_free(s->kv_tmp);
    bd_free(s->x);
    bd_free(s->h);
    bd_free(s->q);
    bd_free(s->gate);
    bd_free(s->up);
    bd_recurrent_free(&s->rs);
    bd_free(s->kn);
    bd_free(s->vn);
    bd_free(s->qg);
    bd_free(s->agate);
    bd_free(s->z);
    bd_free(s->o);
    bd_free(s->moe_logits);
    bd_free(s->moe_sel);
    bd_free(s->moe_w);
    bd_free(s->moe_out);
    bd_free(s->moe_rows);
    bd_free(s->moe_x);
    bd_free(s->moe_gu);
    bd_free(s->moe_y);
    bd_free(s->moe_cnt);
    bd_free(s->moe_tok);
    bd_free(s->moe_seq);
    bd_free(s->moe_views);
    bd_free(s->moe_grp);
    bd_free(s->scores);
    bd_free(s->logits);
    bd_free(s->mm_scratch);
    bd_free(s->taps);
    free(s);
}

int32_t bd_session_length(const bd_session *s) { return s->n_past; }
int32_t bd_session_n_ctx(const bd_session *s) { return s->n_ctx; }
const int32_t *bd_session_tokens(const bd_session *s) { return s->tokens; }

void bd_session_checkpoint(bd_session *s) {
    bd_recurrent *rs = &s->rs;
    if (!rs->conv[0]) return;
    rs->base = rs->cur;
    rs->p0 = s->n_past;
    rs->n_saved = 0;
    rs->saved = true;
}

uint64_t bd_session_recurrent_bytes(const bd_session *s) {
    return bd_recurrent_bytes(s->m, s->rs.n_save);
}

bool bd_session_truncate(bd_session *s, int32_t n_keep) {
    if (n_keep < 0 || n_keep > s->n_past) return false;
    /* Recurrent layers roll back within the last forward only (or to 0);
     * the session is unchanged when they cannot. */
    if (!bd_recurrent_truncate(s, n_keep)) return false;
    /* Cache rows past n_keep are simply overwritten by later forwards:
     * attention only ever reads rows below the current length. */
    s->n_past = n_keep;
    return true;
}

const float *bd_session_logits(const bd_session *s, int32_t i) {
    if (i < 0 || i >= s->n_logits) return NULL;
    return s->logits + (int64_t)i * s->m->hp.n_vocab;
}

const float *bd_session_taps(const bd_session *s, int32_t *rows) {
    if (rows) *rows = s->n_tap > 0 ? s->n_taps_rows : 0;
    return s->n_tap > 0 ? s->taps : NULL;
}
