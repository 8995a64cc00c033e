/*
 * model_load.c - open a GGUF, read hyper-parameters, bind weight views.
 *
 * Every tensor is looked up by its llama.cpp name and checked for type
 * support and exact shape before use, so the forward pass can trust
 * shapes without re-checking them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* ------------------------------------------------------------------------
 * Tensor lookup
 * ---------------------------------------------------------------------- */

static bool get_tensor(bd_model *m, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, bool required,
                       bd_mat *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const bd_gguf_tensor *t = bd_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (!required) return true;
        return bd_err(err, errlen, "%s: missing tensor '%s'", m->path, name);
    }
    const bd_type_traits *tt = bd_type_get(t->type);
    if (!tt || !tt->supported)
        return bd_err(err, errlen, "%s: tensor '%s' has type %s (%u), which blockdraft cannot compute with",
                      m->path, name, bd_type_name(t->type), t->type);
    if (t->ne[0] != (uint64_t)ne0 || t->ne[1] != (uint64_t)ne1 || t->ne[2] != (uint64_t)ne2 || t->ne[3] != 1) {
        if (ne2 == 1)
            return bd_err(err, errlen, "%s: tensor '%s' has shape {%llu, %llu, %llu, %llu}, expected {%lld, %lld}",
                          m->path, name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                          (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], (long long)ne0, (long long)ne1);
        return bd_err(err, errlen, "%s: tensor '%s' has shape {%llu, %llu, %llu, %llu}, expected {%lld, %lld, %lld}",
                      m->path, name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                      (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], (long long)ne0, (long long)ne1,
                      (long long)ne2);
    }
    out->type = t->type;
    out->ncols = ne0;
    out->nrows = ne1 * ne2;
    if (!bd_row_size(t->type, ne0, &out->row_bytes))
        return bd_err(err, errlen, "%s: tensor '%s': bad row size", m->path, name);
    out->data = t->data;
    m->weight_bytes += t->nbytes;
    return true;
}

bool bd_model_get_mat(bd_model *m, const char *name, int64_t ne0, int64_t ne1, bool required, bd_mat *out,
                      char *err, size_t errlen) {
    return get_tensor(m, name, ne0, ne1, 1, required, out, err, errlen);
}

bool bd_model_get_mat3(bd_model *m, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, bool required,
                       bd_mat *out, char *err, size_t errlen) {
    return get_tensor(m, name, ne0, ne1, ne2, required, out, err, errlen);
}

bool bd_model_get_f32(bd_model *m, const char *name, int64_t ne0, int64_t ne1, bool required, const float **out,
                      char *err, size_t errlen) {
    *out = NULL;
    bd_mat v;
    if (!bd_model_get_mat(m, name, ne0, ne1, required, &v, err, errlen)) return false;
    if (!v.data) return true;
    if (v.type == BD_TYPE_F32) {
        *out = v.data;
        return true;
    }
    /* Another type (F16 norms, say): converted once into model-owned
     * memory, which bd_model_open sized for every such tensor. */
    const size_t n = (size_t)(ne0 * ne1);
    if (m->owned_used + n > m->owned_cap)
        return bd_err(err, errlen, "%s: too many converted tensors", m->path);
    float *dst = m->owned + m->owned_used;
    for (int64_t r = 0; r < ne1; r++)
        if (!bd_dequantize_row(v.type, (const uint8_t *)v.data + r * v.row_bytes, dst + r * ne0, ne0))
            return bd_err(err, errlen, "%s: cannot convert tensor '%s'", m->path, name);
    m->owned_used += n;
    *out = dst;
    return true;
}

bool bd_model_get_vec(bd_model *m, const char *name, int64_t n, bool required, const float **out, char *err,
                      size_t errlen) {
    return bd_model_get_f32(m, name, n, 1, required, out, err, errlen);
}

/* ------------------------------------------------------------------------
 * Hyper-parameters
 * ---------------------------------------------------------------------- */

bool bd_model_key_u32(bd_model *m, const char *prefix, const char *key, bool required, int32_t def, int32_t *out,
                      char *err, size_t errlen) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", prefix, key);
    uint32_t v;
    if (!bd_gguf_get_u32(m->gguf, full, &v)) {
        if (bd_gguf_find(m->gguf, full))
            return bd_err(err, errlen, "%s: key '%s' has the wrong type", m->path, full);
        if (required) return bd_err(err, errlen, "%s: missing key '%s'", m->path, full);
        *out = def;
        return true;
    }
    if (v > (1u << 30)) return bd_err(err, errlen, "%s: key '%s' = %u is out of range", m->path, full, v);
    *out = (int32_t)v;
    return true;
}

bool bd_model_key_f32(bd_model *m, const char *prefix, const char *key, bool required, float def, float *out,
                      char *err, size_t errlen) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", prefix, key);
    if (!bd_gguf_get_f32(m->gguf, full, out)) {
        if (bd_gguf_find(m->gguf, full))
            return bd_err(err, errlen, "%s: key '%s' has the wrong type", m->path, full);
        if (required) return bd_err(err, errlen, "%s: missing key '%s'", m->path, full);
        *out = def;
    }
    return true;
}

void bd_rope_params_make(bd_rope_params *rp, float base, int32_t n_rot, const bd_rope_scaling *sc,
                         const float *freq_factors) {
    *rp = (bd_rope_params){.base = base, .freq_scale = 1.0f, .attn_factor = sc->attn, .freq_factors = freq_factors};
    if (sc->type == BD_ROPE_SCALING_NONE) return; /* llama.cpp: "never scale if scaling type is none" */
    rp->freq_scale = sc->freq_scale;
    if (sc->type != BD_ROPE_SCALING_YARN) return;
    rp->ext_factor = 1.0f;
    /* llama.cpp's attention factor get_mscale(f) / (1 + 0.1 ln f) is 1 for
     * f > 1 and 1 / (1 + 0.1 ln f) below (get_mscale(f <= 1) = 1); ggml then
     * multiplies by 1 + 0.1 ln f */
    const float f = 1.0f / rp->freq_scale;
    const float mscale = f <= 1.0f ? 1.0f : 0.1f * logf(f) + 1.0f;
    rp->attn_factor = mscale * (1.0f / (1.0f + 0.1f * logf(f))) * sc->attn;
    /* ggml_rope_yarn_corr_dims, in its float operations */
    const float two_log_base = 2 * logf(base), nd = (float)n_rot;
    const float lo = floorf(nd * logf((float)sc->orig_ctx / (32.0f * 2 * (float)M_PI)) / two_log_base);
    const float hi = ceilf(nd * logf((float)sc->orig_ctx / (1.0f * 2 * (float)M_PI)) / two_log_base);
    rp->corr_dims[0] = fmaxf(0.0f, lo);
    rp->corr_dims[1] = fminf(nd - 1, hi);
}

/* RoPE scaling, with llama.cpp v0.5.0's keys and defaults
 * (llama-model.cpp, llama-context.cpp): rope.scaling.type none, linear or
 * yarn, linear when absent; rope.scaling.factor (or the older
 * rope.scale_linear), 0 or absent = 1, ignored for none; YaRN ramps over
 * rope.scaling.original_context_length (context_length when absent or 0) with
 * beta_fast 32 and beta_slow 1 (the file's yarn_* keys are not read for
 * these architectures there either), and its magnitude factor cancels
 * against llama.cpp's attention factor to rope.scaling.attn_factor. */
static bool load_rope_scaling(bd_model *m, const char *p, char *err, size_t errlen) {
    bd_hparams *hp = &m->hp;
    char key[128];
    const char *stype = NULL;
    uint64_t slen = 0;
    int32_t type = BD_ROPE_SCALING_LINEAR;
    snprintf(key, sizeof key, "%s.rope.scaling.type", p);
    if (bd_gguf_get_str(m->gguf, key, &stype, &slen)) {
        type = slen == 4 && !memcmp(stype, "none", 4)   ? BD_ROPE_SCALING_NONE
               : slen == 4 && !memcmp(stype, "yarn", 4) ? BD_ROPE_SCALING_YARN
               : slen == 6 && !memcmp(stype, "linear", 6) ? BD_ROPE_SCALING_LINEAR
                                                          : 0;
        if (!type)
            return bd_err(err, errlen, "%s: '%s' = '%.*s' is not supported (none, linear, yarn)", m->path, key,
                          (int)(slen > 32 ? 32 : slen), stype);
    } else if (bd_gguf_find(m->gguf, key)) {
        return bd_err(err, errlen, "%s: key '%s' has the wrong type", m->path, key);
    }
    float factor = 0.0f, attn = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.factor", p);
    const char *fkey = bd_gguf_find(m->gguf, key) ? "rope.scaling.factor" : "rope.scale_linear";
    if (!bd_model_key_f32(m, p, fkey, false, 0.0f, &factor, err, errlen) ||
        !bd_model_key_f32(m, p, "rope.scaling.attn_factor", false, 1.0f, &attn, err, errlen))
        return false;
    if (!(factor >= 0.0f) || !isfinite(factor) || (factor > 0.0f && factor < 1e-3f) || factor > 1e6f)
        return bd_err(err, errlen, "%s: '%s.%s' = %g is not a usable scaling factor", m->path, p, fkey,
                      (double)factor);
    if (!(attn > 0.0f) || !isfinite(attn) || attn > 1e3f)
        return bd_err(err, errlen, "%s: '%s.rope.scaling.attn_factor' = %g is not usable", m->path, p, (double)attn);
    int32_t orig;
    if (!bd_model_key_u32(m, p, "rope.scaling.original_context_length", false, hp->n_ctx_train, &orig, err, errlen))
        return false;
    if (orig < 1) orig = hp->n_ctx_train; /* llama.cpp: 0 = the trained context */
    hp->rope_scaling =
        (bd_rope_scaling){.type = type, .freq_scale = factor > 0.0f ? 1.0f / factor : 1.0f, .attn = attn, .orig_ctx = orig};
    bd_rope_params_make(&hp->rope, hp->rope_base, hp->n_rot, &hp->rope_scaling, NULL);
    return true;
}

bool bd_model_load_hparams(bd_model *m, const char *p, char *err, size_t errlen) {
    bd_hparams *hp = &m->hp;
    if (!bd_model_key_u32(m, p, "block_count", true, 0, &hp->n_layer, err, errlen) ||
        !bd_model_key_u32(m, p, "embedding_length", true, 0, &hp->n_embd, err, errlen) ||
        !bd_model_key_u32(m, p, "feed_forward_length", !m->arch_info->moe, 0, &hp->n_ff, err, errlen) ||
        !bd_model_key_u32(m, p, "attention.head_count", true, 0, &hp->n_head, err, errlen) ||
        !bd_model_key_u32(m, p, "context_length", false, 2048, &hp->n_ctx_train, err, errlen))
        return false;
    hp->n_layer_all = hp->n_layer; /* hybrid loaders subtract their MTP blocks */
    if (hp->n_layer < 1 || hp->n_layer > BD_MAX_LAYERS || hp->n_embd < 1 || hp->n_head < 1 ||
        (hp->n_ff < 1 && !m->arch_info->moe))
        return bd_err(err, errlen, "%s: implausible hyper-parameters (layers %d, width %d, heads %d)",
                      m->path, hp->n_layer, hp->n_embd, hp->n_head);
    if (!bd_model_key_u32(m, p, "attention.head_count_kv", false, hp->n_head, &hp->n_kv, err, errlen)) return false;
    if (hp->n_kv < 1 || hp->n_head % hp->n_kv != 0)
        return bd_err(err, errlen, "%s: head_count %d is not a multiple of head_count_kv %d", m->path,
                      hp->n_head, hp->n_kv);
    int32_t def_hd = hp->n_embd / hp->n_head;
    if (!bd_model_key_u32(m, p, "attention.key_length", false, def_hd, &hp->hd, err, errlen) ||
        !bd_model_key_u32(m, p, "attention.value_length", false, hp->hd, &hp->hd_v, err, errlen))
        return false;
    if (hp->hd < 2 || hp->hd % 2 || hp->hd_v != hp->hd)
        return bd_err(err, errlen, "%s: unsupported head dims (key %d, value %d)", m->path, hp->hd, hp->hd_v);
    if (!bd_model_key_u32(m, p, "rope.dimension_count", false, hp->hd, &hp->n_rot, err, errlen)) return false;
    if (hp->n_rot < 2 || hp->n_rot > hp->hd || hp->n_rot % 2)
        return bd_err(err, errlen, "%s: rope.dimension_count %d does not fit head dim %d", m->path,
                      hp->n_rot, hp->hd);
    if (!bd_model_key_f32(m, p, "rope.freq_base", false, 10000.0f, &hp->rope_base, err, errlen) ||
        !bd_model_key_f32(m, p, "attention.layer_norm_rms_epsilon", false, 1e-5f, &hp->rms_eps, err, errlen))
        return false;
    if (!(hp->rope_base > 0) || !(hp->rms_eps > 0))
        return bd_err(err, errlen, "%s: invalid rope base or rms epsilon", m->path);
    return load_rope_scaling(m, p, err, errlen);
}

/* A key that llama.cpp reads as "scalar or one value per layer": we take
 * the scalar, or an array whose trunk values are all equal. */
bool bd_model_key_u32_uniform(bd_model *m, const char *p, const char *name, bool required, int32_t def,
                              int32_t *out, char *err, size_t errlen) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", p, name);
    const bd_gguf_kv *kv = bd_gguf_find(m->gguf, key);
    if (kv && kv->type == GGUF_VTYPE_ARRAY) {
        if (kv->arr_count != (uint64_t)m->hp.n_layer_all)
            return bd_err(err, errlen, "%s: '%s' has %llu entries, block_count is %d", m->path, key,
                          (unsigned long long)kv->arr_count, m->hp.n_layer_all);
        int64_t first = 0;
        for (int32_t i = 0; i < m->hp.n_layer; i++) {
            int64_t v;
            if (!bd_gguf_arr_i64(kv, (uint64_t)i, &v) || v < 0 || v > (1 << 30))
                return bd_err(err, errlen, "%s: '%s'[%d] is not a valid size", m->path, key, i);
            if (i == 0) first = v;
            else if (v != first)
                return bd_err(err, errlen, "%s: '%s' differs between layers (%lld, %lld); blockdraft needs one "
                              "value", m->path, key, (long long)first, (long long)v);
        }
        *out = (int32_t)first;
        return true;
    }
    return bd_model_key_u32(m, p, name, required, def, out, err, errlen);
}

/* ------------------------------------------------------------------------
 * Mixture of experts (qwen3moe, qwen35moe): keys and per-layer tensors
 * ---------------------------------------------------------------------- */

bool bd_model_load_moe_hparams(bd_model *m, const char *p, char *err, size_t errlen) {
    bd_hparams *hp = &m->hp;
    if (!bd_model_key_u32(m, p, "expert_count", true, 0, &hp->n_expert, err, errlen) ||
        !bd_model_key_u32_uniform(m, p, "expert_used_count", true, 0, &hp->n_expert_used, err, errlen))
        return false;
    if (hp->n_expert < 1 || hp->n_expert > BD_MAX_EXPERTS)
        return bd_err(err, errlen, "%s: '%s.expert_count' = %d is outside 1..%d", m->path, p, hp->n_expert,
                      BD_MAX_EXPERTS);
    if (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert || hp->n_expert_used > BD_MAX_EXPERTS_USED)
        return bd_err(err, errlen, "%s: '%s.expert_used_count' = %d is outside 1..%d", m->path, p,
                      hp->n_expert_used, hp->n_expert < BD_MAX_EXPERTS_USED ? hp->n_expert : BD_MAX_EXPERTS_USED);
    /* llama.cpp: n_ff_exp defaults to n_ff / n_expert_used */
    if (!bd_model_key_u32_uniform(m, p, "expert_feed_forward_length", false, hp->n_ff / hp->n_expert_used,
                                  &hp->n_ff_exp, err, errlen))
        return false;
    if (hp->n_ff_exp < 1)
        return bd_err(err, errlen, "%s: '%s.expert_feed_forward_length' is missing or 0 (and no "
                      "feed_forward_length to derive it from)", m->path, p);
    hp->n_ff_shexp = 0;
    if (m->arch_info->moe_shared_expert &&
        !bd_model_key_u32(m, p, "expert_shared_feed_forward_length", false, hp->n_ff, &hp->n_ff_shexp, err, errlen))
        return false;
    /* Neither qwen3moe nor qwen35moe reads a routed-weights scale in
     * llama.cpp v0.5.0 (their routers always normalize, unscaled): a file
     * carrying one was not written for the architecture, and either reading
     * would be a guess. */
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_scale", p);
    if (bd_gguf_find(m->gguf, key))
        return bd_err(err, errlen, "%s: '%s' is not part of the %s schema (llama.cpp ignores it); refusing "
                      "rather than guessing", m->path, key, p);
    hp->expert_weights_scale = 0.0f;
    return true;
}

bool bd_model_bind_moe(bd_model *m, int il, char *err, size_t errlen) {
    const bd_hparams *hp = &m->hp;
    bd_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, ne = hp->n_expert, ff = hp->n_ff_exp;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    if (bd_gguf_find_tensor(m->gguf, NAME("ffn_gate.weight")) || bd_gguf_find_tensor(m->gguf, NAME("ffn_up.weight")))
        return bd_err(err, errlen, "%s: '%s' is a dense feed-forward tensor in a mixture-of-experts %s layer",
                      m->path, name, m->arch_name);
    if (!bd_model_get_mat(m, NAME("ffn_gate_inp.weight"), E, ne, true, &L->router, err, errlen)) return false;
    if (bd_gguf_find_tensor(m->gguf, NAME("ffn_gate_up_exps.weight"))) {
        if (!m->arch_info->moe_fused_gate_up)
            return bd_err(err, errlen, "%s: fused '%s' is not part of the %s schema (expected ffn_gate_exps and "
                          "ffn_up_exps)", m->path, name, m->arch_name);
        if (!bd_model_get_mat3(m, name, E, 2 * ff, ne, true, &L->gate_up_exps, err, errlen)) return false;
    } else {
        if (!bd_model_get_mat3(m, NAME("ffn_gate_exps.weight"), E, ff, ne, true, &L->gate_exps, err, errlen) ||
            !bd_model_get_mat3(m, NAME("ffn_up_exps.weight"), E, ff, ne, true, &L->up_exps, err, errlen))
            return false;
    }
    if (!bd_model_get_mat3(m, NAME("ffn_down_exps.weight"), ff, E, ne, true, &L->down_exps, err, errlen))
        return false;
    /* the shared expert: all four tensors or none, and only where the
     * architecture has one */
    static const char *const sh[] = {"ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                                     "ffn_down_shexp.weight"};
    int have = 0;
    for (int k = 0; k < 4; k++) {
        snprintf(name, sizeof name, "blk.%d.%s", il, sh[k]);
        if (bd_gguf_find_tensor(m->gguf, name)) have++;
    }
    if (have && !m->arch_info->moe_shared_expert)
        return bd_err(err, errlen, "%s: layer %d has shared-expert tensors (ffn_*_shexp), which %s does not have",
                      m->path, il, m->arch_name);
    if (have && have < 4)
        return bd_err(err, errlen, "%s: layer %d has some but not all shared-expert tensors (ffn_*_shexp)", m->path,
                      il);
    if (have == 4) {
        if (hp->n_ff_shexp < 1)
            return bd_err(err, errlen, "%s: shared expert without a width (expert_shared_feed_forward_length)",
                          m->path);
        if (!bd_model_get_mat(m, NAME("ffn_gate_inp_shexp.weight"), E, 1, true, &L->shexp_gate_inp, err, errlen) ||
            !bd_model_get_mat(m, NAME("ffn_gate_shexp.weight"), E, hp->n_ff_shexp, true, &L->gate_shexp, err,
                              errlen) ||
            !bd_model_get_mat(m, NAME("ffn_up_shexp.weight"), E, hp->n_ff_shexp, true, &L->up_shexp, err, errlen) ||
            !bd_model_get_mat(m, NAME("ffn_down_shexp.weight"), hp->n_ff_shexp, E, true, &L->down_shexp, err,
                              errlen))
            return false;
    }
#undef NAME
    return true;
}

/* ------------------------------------------------------------------------
 * Layers
 * ---------------------------------------------------------------------- */

bool bd_model_load_layers(bd_model *m, const char *prefix, char *err, size_t errlen) {
    (void)prefix;
    const bd_hparams *hp = &m->hp;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return bd_err(err, errlen, "out of memory");
    int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->hd, KV = (int64_t)hp->n_kv * hp->hd;
    bool qk_norm = m->arch_info->qk_norm;
    char name[96];
#define T(field, fmt_suffix, ne0, ne1, req)                                                   \
    do {                                                                                      \
        snprintf(name, sizeof name, "blk.%d." fmt_suffix, il);                                 \
        if (!bd_model_get_mat(m, name, ne0, ne1, req, &L->field, err, errlen)) return false; \
    } while (0)
#define V(field, fmt_suffix, n, req)                                                          \
    do {                                                                                      \
        snprintf(name, sizeof name, "blk.%d." fmt_suffix, il);                                 \
        if (!bd_model_get_vec(m, name, n, req, &L->field, err, errlen)) return false;        \
    } while (0)
    m->hp.n_attn_layers = hp->n_layer;
    for (int il = 0; il < hp->n_layer; il++) {
        bd_layer *L = &m->layers[il];
        L->kv_slot = il;
        L->rs_slot = -1;
        snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", il);
        if (bd_gguf_find_tensor(m->gguf, name))
            return bd_err(err, errlen, "%s: fused '%s' is not supported (expected separate attn_q/k/v)",
                          m->path, name);
        /* biases as llama.cpp v0.5.0 reads them: q/k/v optional for every
         * dense target (create_tensor_qkv), the output projection's for
         * llama only; the feed-forward's are not implemented */
        static const char *const refused_bias[] = {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias",
                                                   "attn_qkv.bias", NULL};
        for (const char *const *b = refused_bias; *b; b++) {
            snprintf(name, sizeof name, "blk.%d.%s", il, *b);
            if (bd_gguf_find_tensor(m->gguf, name))
                return bd_err(err, errlen, "%s: '%s' is not supported", m->path, name);
        }
        snprintf(name, sizeof name, "blk.%d.attn_output.bias", il);
        if (m->arch_info->id != BD_ARCH_LLAMA && bd_gguf_find_tensor(m->gguf, name))
            return bd_err(err, errlen, "%s: '%s' is not supported for %s", m->path, name, m->arch_name);
        V(attn_norm, "attn_norm.weight", E, true);
        T(wq, "attn_q.weight", E, Q, true);
        T(wk, "attn_k.weight", E, KV, true);
        T(wv, "attn_v.weight", E, KV, true);
        T(wo, "attn_output.weight", Q, E, true);
        V(bq, "attn_q.bias", Q, false);
        V(bk, "attn_k.bias", KV, false);
        V(bv, "attn_v.bias", KV, false);
        V(bo, "attn_output.bias", E, false);
        V(q_norm, "attn_q_norm.weight", hp->hd, qk_norm);
        V(k_norm, "attn_k_norm.weight", hp->hd, qk_norm);
        V(ffn_norm, "ffn_norm.weight", E, true);
        if (m->arch_info->moe) {
            if (!bd_model_bind_moe(m, il, err, errlen)) return false;
            continue;
        }
        T(w_gate, "ffn_gate.weight", E, hp->n_ff, true);
        T(w_up, "ffn_up.weight", E, hp->n_ff, true);
        T(w_down, "ffn_down.weight", hp->n_ff, E, true);
    }
#undef T
#undef V
    return true;
}

/* ------------------------------------------------------------------------
 * Open
 * ---------------------------------------------------------------------- */

/* llama / qwen3 / qwen3moe targets (their rows in arch.c): attention in
 * every layer, a dense or mixture-of-experts feed-forward. */
bool bd_load_dense(bd_model *m, char *err, size_t errlen) {
    const char *p = m->arch_name;
    if (!bd_model_load_hparams(m, p, err, errlen)) return false;
    const bd_hparams *hp = &m->hp;
    if (m->arch_info->moe && !bd_model_load_moe_hparams(m, p, err, errlen)) return false;
    const bd_gguf_tensor *te = bd_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!te) return bd_err(err, errlen, "%s: missing tensor 'token_embd.weight'", m->path);
    if (te->ne[1] < 1 || te->ne[1] > (1u << 24))
        return bd_err(err, errlen, "%s: implausible vocabulary size %llu", m->path,
                      (unsigned long long)te->ne[1]);
    m->hp.n_vocab = (int32_t)te->ne[1];
    if (m->tok && bd_tokenizer_n_vocab(m->tok) != hp->n_vocab)
        return bd_err(err, errlen, "%s: tokenizer has %d tokens but token_embd has %d rows", m->path,
                      bd_tokenizer_n_vocab(m->tok), hp->n_vocab);
    if (!bd_model_get_mat(m, "token_embd.weight", hp->n_embd, hp->n_vocab, true, &m->tok_embd, err, errlen) ||
        !bd_model_get_vec(m, "output_norm.weight", hp->n_embd, true, &m->output_norm, err, errlen) ||
        !bd_model_get_mat(m, "output.weight", hp->n_embd, hp->n_vocab, false, &m->output, err, errlen))
        return false;
    if (!m->output.data) {
        m->output = m->tok_embd;
        m->tied = true;
    }
    if (bd_gguf_find_tensor(m->gguf, "output.bias"))
        return bd_err(err, errlen, "%s: 'output.bias' is not supported", m->path);
    /* Llama 3.1+ bake their RoPE scaling into per-pair frequency factors
     * (llama.cpp reads them for llama only; elsewhere they would be ignored
     * there and are refused here) */
    if (bd_gguf_find_tensor(m->gguf, "rope_freqs.weight")) {
        if (m->arch_info->id != BD_ARCH_LLAMA)
            return bd_err(err, errlen, "%s: 'rope_freqs.weight' (scaled RoPE) is not supported for %s", m->path,
                          m->arch_info->name);
        const float *ff;
        if (!bd_model_get_vec(m, "rope_freqs.weight", hp->n_rot / 2, true, &ff, err, errlen)) return false;
        for (int32_t i = 0; i < hp->n_rot / 2; i++)
            if (!(ff[i] > 0) || !isfinite(ff[i]))
                return bd_err(err, errlen, "%s: rope_freqs.weight[%d] = %g: frequency factors must be positive",
                              m->path, i, (double)ff[i]);
        m->hp.rope.freq_factors = ff;
    }
    m->hp.rope_type = m->arch_info->rope;
    return bd_model_load_layers(m, p, err, errlen);
}

/* ------------------------------------------------------------------------
 * Interleaving the weights (kernels.h's BD_LAYOUT_IL16)
 * ---------------------------------------------------------------------- */

/* The matrices bd_matmul reads, with the row count of the views the
 * forward takes of each (an expert's rows for expert stacks, moe.c; the
 * whole matrix otherwise). Embeddings only where the output head is tied
 * to them: the head is streamed on every token (a sixth of a Qwen3-4B
 * file, a third of 0.6B), and bd_mat_get_row reads the embedding rows
 * back out of the layout (one row a token). Untied embeddings stay in the
 * file's layout: nothing multiplies by them. Fills up to max; returns the
 * count. */
typedef struct {
    bd_mat *W;
    int64_t slab;
} il_item;
#define IL_PER_LAYER 19

static int interleave_list(bd_model *m, il_item *it, int max) {
    int n = 0;
#define IL_ADD(M, S)                                              \
    do {                                                          \
        if ((M).data && n < max) it[n++] = (il_item){&(M), (S)}; \
    } while (0)
    IL_ADD(m->output, m->output.nrows);
    /* the same bytes (tied, or a drafter's head defaulting to its
     * embeddings): the twin takes the head's layout */
    if (m->tok_embd.data == m->output.data) IL_ADD(m->tok_embd, m->tok_embd.nrows);
    IL_ADD(m->dflash.fc, m->dflash.fc.nrows);
    const int64_t FE = m->hp.n_ff_exp, E = m->hp.n_embd;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        bd_layer *L = &m->layers[l];
        bd_mat *dense[] = {&L->wq,     &L->wk,      &L->wv,      &L->wo,         &L->w_gate,   &L->w_up,
                           &L->w_down, &L->w_qkv,   &L->w_z,     &L->w_beta,     &L->w_alpha,  &L->ssm_out,
                           &L->gate_shexp, &L->up_shexp, &L->down_shexp};
        for (size_t i = 0; i < sizeof dense / sizeof *dense; i++) IL_ADD(*dense[i], dense[i]->nrows);
        IL_ADD(L->gate_exps, FE);
        IL_ADD(L->up_exps, FE);
        IL_ADD(L->gate_up_exps, 2 * FE);
        IL_ADD(L->down_exps, E);
    }
#undef IL_ADD
    return n;
}

/* After the prefetch copied the file into private memory: the matrices of
 * interleave_list rewritten in the IL16 layout where the kernel table has
 * a kernel for it (kernels.h's il_rows) and their views hold whole
 * 16-row groups. Same bytes, same results; a file left mapped (--mmap,
 * files under bd_fmap_copy_min, no transparent huge pages) keeps the
 * file's layout. A matrix met twice (the same bytes under two names) is
 * interleaved once: both views then say so. Returns the bytes interleaved. */
static uint64_t model_interleave(bd_model *m) {
    const bd_kernels *k = bd_kernels_get();
    /* BLOCKDRAFT_INTERLEAVE=0 / 1: off / on wherever the level has the
     * kernels, whatever its default (A/Bs, tests) */
    const char *env = getenv("BLOCKDRAFT_INTERLEAVE");
    if (!k->tile || !k->tile->il_rows || !m->layers) return 0;
    if (env && *env ? !strcmp(env, "0") : !k->tile->il_default) return 0;
    const int max = IL_PER_LAYER * (m->hp.n_layer + 1);
    il_item *it = calloc((size_t)max, sizeof *it);
    if (!it) return 0;
    const int n = interleave_list(m, it, max);
    uint64_t max_row = 0, bytes = 0;
    for (int i = 0; i < n; i++)
        if (bd_il16_supports(it[i].W->type, it[i].W->ncols) && it[i].W->row_bytes > max_row)
            max_row = it[i].W->row_bytes;
    void *tmp = max_row ? malloc(BD_IL16_ROWS * (size_t)max_row) : NULL;
    if (tmp && bd_gguf_set_writable(m->gguf, true)) {
        for (int i = 0; i < n; i++) {
            bd_mat *W = it[i].W;
            if (it[i].slab <= 0 || it[i].slab % BD_IL16_ROWS != 0) continue;
            /* interleaved Q8_0 gives its row groups' f32 order, not
             * vec_dot_n's (kernels.h): only where every product is
             * bd_matmul_fast, a DFlash drafter; a target's Q8_0 keeps the
             * bits of the file's layout */
            if (W->type == BD_TYPE_Q8_0 && m->arch_info->role != BD_ROLE_DRAFTER) continue;
            const bd_mat *twin = NULL;
            for (int j = 0; j < i && !twin; j++)
                if (it[j].W->data == W->data) twin = it[j].W;
            if (twin) W->layout = twin->layout;
            else if (bd_mat_interleave(W, tmp)) bytes += W->row_bytes * (uint64_t)W->nrows;
        }
        bd_gguf_set_writable(m->gguf, false);
    }
    free(tmp);
    free(it);
    return bytes;
}

bd_model *bd_model_open(const char *path, char *err, size_t errlen) {
    /* a BLOCKDRAFT_ISA this machine cannot run is an error, not a fallback */
    if (!bd_kernels_check(err, errlen)) return NULL;
    bd_model *m = calloc(1, sizeof *m);
    if (!m) {
        bd_err(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(m->path, sizeof m->path, "%s", path);
    m->gguf = bd_gguf_open(path, err, errlen);
    if (!m->gguf) goto fail;
    if (!bd_gguf_get_strz(m->gguf, "general.architecture", m->arch_name, sizeof m->arch_name)) {
        bd_err(err, errlen, "%s: missing key 'general.architecture'", path);
        goto fail;
    }
    m->arch_info = bd_arch_find(m->arch_name);
    if (!m->arch_info || m->arch_info->unsupported || !m->arch_info->load) {
        char why[400];
        if (m->arch_info && m->arch_info->role == BD_ROLE_DRAFTER)
            snprintf(why, sizeof why, "architecture '%s' is not loadable: %s", m->arch_name,
                     m->arch_info->unsupported ? m->arch_info->unsupported : "no loader");
        else
            bd_arch_target_problem(m->arch_name, why, sizeof why);
        bd_err(err, errlen, "%s: %s", path, why);
        goto fail;
    }
    m->arch = m->arch_info->id;
    /* Room for converting every 1-D tensor if the file stores norms as F16. */
    size_t cap = 0;
    for (int64_t i = 0; i < bd_gguf_tensor_count(m->gguf); i++) {
        const bd_gguf_tensor *t = bd_gguf_tensor_at(m->gguf, i);
        if (t->type == BD_TYPE_F32) continue;
        if (t->n_dims == 1 && t->ne[0] <= (1u << 20)) cap += (size_t)t->ne[0];
        /* the GDN conv kernels, read as f32 like the norms */
        const size_t nl = strlen(t->name);
        if (t->n_dims == 2 && nl > 17 && !strcmp(t->name + nl - 17, "ssm_conv1d.weight") &&
            t->ne[0] * t->ne[1] <= (1u << 26))
            cap += (size_t)(t->ne[0] * t->ne[1]);
    }
    if (cap) {
        m->owned = malloc(cap * sizeof(float));
        if (!m->owned) {
            bd_err(err, errlen, "out of memory");
            goto fail;
        }
        m->owned_cap = cap;
    }
    if (bd_gguf_find(m->gguf, "tokenizer.ggml.model")) {
        m->tok = bd_tokenizer_load(m->gguf, err, errlen);
        if (!m->tok) goto fail;
    }
    const char *tmpl;
    uint64_t tlen;
    if (bd_gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl, &tlen) && tlen < (64u << 20)) {
        m->chat_template = malloc(tlen + 1);
        if (!m->chat_template) {
            bd_err(err, errlen, "out of memory");
            goto fail;
        }
        memcpy(m->chat_template, tmpl, tlen);
        m->chat_template[tlen] = '\0';
    }
    if (!m->arch_info->load(m, err, errlen)) goto fail;
    bd_gguf_prefetch(m->gguf);
    m->interleaved_bytes = model_interleave(m);
    return m;
fail:
    bd_model_free(m);
    return NULL;
}

void bd_model_free(bd_model *m) {
    if (!m) return;
    if (m->tok) bd_tokenizer_free(m->tok);
    if (m->gguf) bd_gguf_close(m->gguf);
    free(m->layers);
    free(m->owned);
    free(m->chat_template);
    free(m);
}

/* ------------------------------------------------------------------------
 * Accessors
 * ---------------------------------------------------------------------- */

const char *bd_model_arch(const bd_model *m) { return m->arch_name; }
int32_t bd_model_n_vocab(const bd_model *m) { return m->hp.n_vocab; }
int32_t bd_model_n_embd(const bd_model *m) { return m->hp.n_embd; }
int32_t bd_model_n_layer(const bd_model *m) { return m->hp.n_layer; }
int32_t bd_model_n_ctx_train(const bd_model *m) { return m->hp.n_ctx_train; }
uint64_t bd_model_weight_bytes(const bd_model *m) { return m->weight_bytes; }
uint64_t bd_model_interleaved_bytes(const bd_model *m) { return m->interleaved_bytes; }
const char *bd_model_chat_template(const bd_model *m) { return m->chat_template; }
bool bd_model_intact(const bd_model *m) { return bd_gguf_intact(m->gguf); }
void bd_use_mmap(bool on) { bd_fmap_set_copy(!on); }
bool bd_mmap_guard_install(char *err, size_t errlen) { return bd_fmap_guard_install(err, errlen); }

int bd_tokenize(const bd_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                int32_t *out, int max_out) {
    if (!m->tok) return 0;
    return bd_tokenizer_encode(m->tok, text, len, add_special, parse_special, out, max_out);
}

int bd_token_piece(const bd_model *m, int32_t id, char *buf, int bufsize, bool render_special) {
    if (!m->tok) return 0;
    return bd_tokenizer_piece(m->tok, id, buf, bufsize, render_special);
}

bool bd_token_is_eog(const bd_model *m, int32_t id) { return m->tok && bd_tokenizer_is_eog(m->tok, id); }
int32_t bd_token_bos(const bd_model *m) { return m->tok ? bd_tokenizer_bos(m->tok) : -1; }
int32_t bd_token_eos(const bd_model *m) { return m->tok ? bd_tokenizer_eos(m->tok) : -1; }
