/*
 * qwen35_load.c - read and check a `qwen35` / `qwen35moe` GGUF (Qwen3.5 and
 * Qwen3.6 hybrids: Gated DeltaNet layers with gated full attention every
 * few layers; dense or mixture-of-experts feed-forward), and `qwen3next`
 * (Qwen3-Next: the same blocks with a mixture of experts, NEOX RoPE on the
 * first n_rot lanes instead of IMROPE sections, each GDN key head's value
 * heads side by side (bd_gdn_key_head), and fused GDN projections).
 *
 * Facts: qwen35-hybrid.md §1-§5, gguf-and-architectures.md §8; llama.cpp
 * v0.5.0 src/models/qwen35*.cpp and qwen3next.cpp. Every inconsistency of the header is
 * refused by name before the layer table is allocated; every tensor is
 * then bound with its exact shape, so the forward (qwen35.c) trusts them.
 *
 * Layer schedule: `<arch>.attention.recurrent_layers` (one bool per block)
 * when present, else layer il is recurrent iff (il + 1) % interval != 0
 * with interval = `<arch>.full_attention_interval` (default 4). Trailing
 * multi-token-prediction blocks (`<arch>.nextn_predict_layers`) are in the
 * file and in block_count but never run: the trunk is block_count - nextn.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define FAIL(...) return bd_err(err, errlen, __VA_ARGS__)

/* The 4 RoPE sections: required; for text every section turns with the
 * same position, so they only have to cover the rotated pairs exactly. */
static bool read_sections(bd_model *m, const char *p, char *err, size_t errlen) {
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", p);
    const bd_gguf_kv *kv = bd_gguf_find(m->gguf, key);
    if (!kv) FAIL("%s: missing key '%s'", m->path, key);
    if (kv->type != GGUF_VTYPE_ARRAY || kv->arr_count < 1 || kv->arr_count > 4)
        FAIL("%s: '%s' must be an integer array of up to 4 entries", m->path, key);
    int64_t sum = 0;
    for (uint64_t i = 0; i < 4; i++) {
        int64_t v = 0;
        if (i < kv->arr_count && (!bd_gguf_arr_i64(kv, i, &v) || v < 0 || v > BD_MAX_HEAD_DIM))
            FAIL("%s: '%s'[%llu] is not a section size", m->path, key, (unsigned long long)i);
        m->hp.rope_sections[i] = (int32_t)v;
        sum += v;
    }
    if (sum != m->hp.n_rot / 2)
        FAIL("%s: '%s' = [%d, %d, %d, %d] adds up to %lld rotary pairs, rope.dimension_count %d has %d", m->path, key,
             m->hp.rope_sections[0], m->hp.rope_sections[1], m->hp.rope_sections[2], m->hp.rope_sections[3],
             (long long)sum, m->hp.n_rot, m->hp.n_rot / 2);
    return true;
}

/* Which trunk layers are recurrent (Gated DeltaNet). */
static bool read_schedule(bd_model *m, const char *p, bool *rec, char *err, size_t errlen) {
    bd_hparams *hp = &m->hp;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", p);
    const bd_gguf_kv *kv = bd_gguf_find(m->gguf, key);
    if (kv) {
        if (kv->type != GGUF_VTYPE_ARRAY || kv->arr_count != (uint64_t)hp->n_layer_all)
            FAIL("%s: '%s' must be an array of one bool per block (%d)", m->path, key, hp->n_layer_all);
        for (int32_t i = 0; i < hp->n_layer; i++) {
            int64_t v;
            if (!bd_gguf_arr_i64(kv, (uint64_t)i, &v) || v < 0 || v > 1)
                FAIL("%s: '%s'[%d] is not a bool", m->path, key, i);
            rec[i] = v != 0;
        }
        return true;
    }
    int32_t interval;
    if (!bd_model_key_u32(m, p, "full_attention_interval", false, 4, &interval, err, errlen)) return false;
    if (interval < 1) FAIL("%s: '%s.full_attention_interval' must be at least 1", m->path, p);
    for (int32_t i = 0; i < hp->n_layer; i++) rec[i] = (i + 1) % interval != 0;
    return true;
}

static bool read_hparams(bd_model *m, bool *rec, char *err, size_t errlen) {
    const char *p = m->arch_name;
    bd_hparams *hp = &m->hp;
    if (!bd_model_load_hparams(m, p, err, errlen)) return false;
    hp->n_layer_all = hp->n_layer;
    int32_t nextn;
    if (!bd_model_key_u32(m, p, "nextn_predict_layers", false, 0, &nextn, err, errlen)) return false;
    if (nextn >= hp->n_layer_all)
        FAIL("%s: '%s.nextn_predict_layers' = %d leaves no trunk layers of block_count %d", m->path, p, nextn,
             hp->n_layer_all);
    hp->n_layer = hp->n_layer_all - nextn;
    if (hp->hd > BD_MAX_HEAD_DIM) FAIL("%s: head dim %d is too large", m->path, hp->hd);
    /* qwen3next turns the first n_rot lanes as NEOX: no sections */
    if (m->arch_info->rope == BD_ROPE_IMROPE && !read_sections(m, p, err, errlen)) return false;
    hp->ssm_v_grouped = m->arch_info->gdn_v_grouped;

    /* Gated DeltaNet sizes */
    int32_t d_inner;
    if (!bd_model_key_u32(m, p, "ssm.conv_kernel", true, 0, &hp->ssm_d_conv, err, errlen) ||
        !bd_model_key_u32(m, p, "ssm.state_size", true, 0, &hp->ssm_d_state, err, errlen) ||
        !bd_model_key_u32(m, p, "ssm.group_count", true, 0, &hp->ssm_n_k, err, errlen) ||
        !bd_model_key_u32(m, p, "ssm.time_step_rank", true, 0, &hp->ssm_n_v, err, errlen) ||
        !bd_model_key_u32(m, p, "ssm.inner_size", true, 0, &d_inner, err, errlen))
        return false;
    if (hp->ssm_d_conv < 2 || hp->ssm_d_conv > 16)
        FAIL("%s: '%s.ssm.conv_kernel' = %d is outside 2..16", m->path, p, hp->ssm_d_conv);
    if (hp->ssm_d_state < 1 || hp->ssm_d_state > BD_MAX_HEAD_DIM)
        FAIL("%s: '%s.ssm.state_size' = %d is outside 1..%d", m->path, p, hp->ssm_d_state, BD_MAX_HEAD_DIM);
    if (hp->ssm_n_k < 1 || hp->ssm_n_v < 1 || hp->ssm_n_v > 4096)
        FAIL("%s: GDN head counts '%s.ssm.group_count' = %d, '%s.ssm.time_step_rank' = %d are not valid", m->path, p,
             hp->ssm_n_k, p, hp->ssm_n_v);
    if (hp->ssm_n_v % hp->ssm_n_k != 0)
        FAIL("%s: '%s.ssm.time_step_rank' (value heads, %d) is not a multiple of '%s.ssm.group_count' (key heads, %d)",
             m->path, p, hp->ssm_n_v, p, hp->ssm_n_k);
    if ((int64_t)d_inner != (int64_t)hp->ssm_n_v * hp->ssm_d_state)
        FAIL("%s: '%s.ssm.inner_size' = %d is not value heads x state size (%d x %d)", m->path, p, d_inner,
             hp->ssm_n_v, hp->ssm_d_state);
    if (!read_schedule(m, p, rec, err, errlen)) return false;

    return !m->arch_info->moe || bd_model_load_moe_hparams(m, p, err, errlen);
}

/* ------------------------------------------------------------------------
 * Tensors
 * ---------------------------------------------------------------------- */

/* Rows of the matrix W, made of n_groups groups of parts part[0..n_parts)
 * rows each (group g's part p first, then its part p + 1, ...), put in
 * part order instead: every group's part 0, then every group's part 1,
 * and so on, so that each part becomes one run of rows. Rows are moved
 * whole, in place (through a copy of the matrix), so any type works. This
 * is how qwen3next's fused projections (ssm_in, ssm_ba; one group
 * per GDN key head) become the row runs qwen35 keeps in separate tensors:
 * the same products, read through views (bd_mat_rows). The loader runs
 * before bd_model_open copies the file into huge pages, so this writes the
 * file's private mapping (copy-on-write pages, never the file); the copy
 * then takes the regrouped rows, and interleaving works on them. */
static bool mat_regroup_rows(bd_model *m, bd_mat *W, int64_t n_groups, const int64_t *part, int n_parts,
                             const char *name, char *err, size_t errlen) {
    int64_t g_rows = 0;
    for (int p = 0; p < n_parts; p++) g_rows += part[p];
    if (g_rows * n_groups != W->nrows) FAIL("%s: tensor '%s': %lld rows are not %lld groups of %lld", m->path, name,
                                            (long long)W->nrows, (long long)n_groups, (long long)g_rows);
    const size_t rb = (size_t)W->row_bytes, bytes = rb * (size_t)W->nrows;
    uint8_t *tmp = malloc(bytes);
    if (!tmp) FAIL("out of memory regrouping tensor '%s' (%zu bytes)", name, bytes);
    memcpy(tmp, W->data, bytes);
    if (!bd_gguf_set_range_writable(m->gguf, W->data, bytes, true)) {
        free(tmp);
        FAIL("%s: cannot make the model's memory writable to regroup tensor '%s'", m->path, name);
    }
    uint8_t *dst = (uint8_t *)W->data;
    for (int64_t p = 0, off = 0; p < n_parts; off += part[p], p++)
        for (int64_t g = 0; g < n_groups; g++) {
            memcpy(dst, tmp + (size_t)(g * g_rows + off) * rb, (size_t)part[p] * rb);
            dst += (size_t)part[p] * rb;
        }
    bd_gguf_set_range_writable(m->gguf, W->data, bytes, false);
    free(tmp);
    if (!bd_gguf_intact(m->gguf)) FAIL("%s: the file was truncated while tensor '%s' was read", m->path, name);
    return true;
}

/* qwen3next's GDN input projections: q/k/v/z from attn_qkv + attn_gate as
 * qwen35 (newer converters) or from the fused ssm_in (older files; llama.cpp
 * v0.5.0 reads both, attn_qkv first), beta/alpha from ssm_ba. Both
 * fused tensors hold one group of rows per key head h: ssm_in [q_h (d_k),
 * k_h (d_k), v (r d_v), z (r d_v)] with r = n_v / n_k and the r value
 * heads h r .. h r + r - 1 side by side, ssm_ba [beta (r), alpha
 * (r)] of the same value heads (qwen3next.cpp's build_qkvz and
 * build_layer_attn_linear views). */
static bool bind_gdn_fused(bd_model *m, int il, char *err, size_t errlen) {
    const bd_hparams *hp = &m->hp;
    bd_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, dk = hp->ssm_d_state, nk = hp->ssm_n_k, nv = hp->ssm_n_v, r = nv / nk;
    const int64_t key_dim = nk * dk, value_dim = nv * dk, conv_dim = 2 * key_dim + value_dim;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", il);
    if (bd_gguf_find_tensor(m->gguf, name)) {
        if (!bd_model_get_mat(m, name, E, conv_dim, true, &L->w_qkv, err, errlen)) return false;
        snprintf(name, sizeof name, "blk.%d.attn_gate.weight", il);
        if (!bd_model_get_mat(m, name, E, value_dim, true, &L->w_z, err, errlen)) return false;
    } else {
        snprintf(name, sizeof name, "blk.%d.ssm_in.weight", il);
        if (!bd_gguf_find_tensor(m->gguf, name))
            FAIL("%s: GDN layer %d has neither 'blk.%d.attn_qkv.weight' (with attn_gate) nor the fused '%s'",
                 m->path, il, il, name);
        bd_mat in;
        const int64_t parts[4] = {dk, dk, r * dk, r * dk};
        if (!bd_model_get_mat(m, name, E, conv_dim + value_dim, true, &in, err, errlen) ||
            !mat_regroup_rows(m, &in, nk, parts, 4, name, err, errlen))
            return false;
        L->w_qkv = bd_mat_rows(&in, 0, conv_dim);
        L->w_z = bd_mat_rows(&in, conv_dim, value_dim);
    }
    snprintf(name, sizeof name, "blk.%d.ssm_ba.weight", il);
    bd_mat ba;
    const int64_t parts[2] = {r, r};
    if (!bd_model_get_mat(m, name, E, 2 * nv, true, &ba, err, errlen) ||
        !mat_regroup_rows(m, &ba, nk, parts, 2, name, err, errlen))
        return false;
    L->w_beta = bd_mat_rows(&ba, 0, nv);
    L->w_alpha = bd_mat_rows(&ba, nv, nv);
    return true;
}

static bool bind_layer(bd_model *m, int il, char *err, size_t errlen) {
    const bd_hparams *hp = &m->hp;
    bd_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, hd = hp->hd, Q = (int64_t)hp->n_head * hd, KV = (int64_t)hp->n_kv * hd;
    const int64_t dk = hp->ssm_d_state, key_dim = (int64_t)hp->ssm_n_k * dk, value_dim = (int64_t)hp->ssm_n_v * dk,
                  conv_dim = 2 * key_dim + value_dim, nv = hp->ssm_n_v;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
#define MAT(field, suffix, ne0, ne1) \
    if (!bd_model_get_mat(m, NAME(suffix), ne0, ne1, true, &L->field, err, errlen)) return false
#define VEC(field, suffix, n) \
    if (!bd_model_get_vec(m, NAME(suffix), n, true, &L->field, err, errlen)) return false
    VEC(attn_norm, "attn_norm.weight", E);
    /* the pre-FFN norm: qwen35 calls it post_attention_norm, and has no ffn_norm */
    VEC(ffn_norm, "post_attention_norm.weight", E);
    if (L->recurrent) {
        if (m->arch_info->gdn_v_grouped) {
            if (!bind_gdn_fused(m, il, err, errlen)) return false;
        } else {
            MAT(w_qkv, "attn_qkv.weight", E, conv_dim);
            MAT(w_z, "attn_gate.weight", E, value_dim);
            MAT(w_beta, "ssm_beta.weight", E, nv);
            MAT(w_alpha, "ssm_alpha.weight", E, nv);
        }
        VEC(dt_bias, "ssm_dt.bias", nv);
        VEC(ssm_a, "ssm_a", nv);
        if (!bd_model_get_f32(m, NAME("ssm_conv1d.weight"), hp->ssm_d_conv, conv_dim, true, &L->conv1d, err, errlen))
            return false;
        VEC(ssm_norm, "ssm_norm.weight", dk);
        MAT(ssm_out, "ssm_out.weight", value_dim, E);
        for (int64_t h = 0; h < nv; h++)
            if (!(L->ssm_a[h] <= 0.0f))
                FAIL("%s: blk.%d.ssm_a[%lld] = %g is not negative (it holds -exp(A_log))", m->path, il,
                     (long long)h, (double)L->ssm_a[h]);
    } else {
        if (bd_gguf_find_tensor(m->gguf, NAME("attn_qkv.weight")) || bd_gguf_find_tensor(m->gguf, NAME("ssm_in.weight")) ||
            bd_gguf_find_tensor(m->gguf, NAME("ssm_a")))
            FAIL("%s: layer %d is an attention layer by the schedule (%s.attention.recurrent_layers or "
                 "full_attention_interval) but holds the Gated DeltaNet tensor '%s'",
                 m->path, il, m->arch_name, name);
        /* each head's query and output gate, back to back */
        MAT(wq, "attn_q.weight", E, 2 * Q);
        MAT(wk, "attn_k.weight", E, KV);
        MAT(wv, "attn_v.weight", E, KV);
        MAT(wo, "attn_output.weight", Q, E);
        VEC(q_norm, "attn_q_norm.weight", hd);
        VEC(k_norm, "attn_k_norm.weight", hd);
    }
    if (!m->arch_info->moe) {
        MAT(w_gate, "ffn_gate.weight", E, hp->n_ff);
        MAT(w_up, "ffn_up.weight", E, hp->n_ff);
        MAT(w_down, "ffn_down.weight", hp->n_ff, E);
        return true;
    }
    return bd_model_bind_moe(m, il, err, errlen);
#undef NAME
#undef MAT
#undef VEC
}

bool bd_load_qwen35(bd_model *m, char *err, size_t errlen) {
    bool rec[BD_MAX_LAYERS];
    memset(rec, 0, sizeof rec);
    if (!read_hparams(m, rec, err, errlen)) return false;
    bd_hparams *hp = &m->hp;
    m->hp.rope_type = m->arch_info->rope;

    const bd_gguf_tensor *te = bd_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!te) FAIL("%s: missing tensor 'token_embd.weight'", m->path);
    if (te->ne[1] < 1 || te->ne[1] > (1u << 24))
        FAIL("%s: implausible vocabulary size %llu", m->path, (unsigned long long)te->ne[1]);
    hp->n_vocab = (int32_t)te->ne[1];
    if (m->tok && bd_tokenizer_n_vocab(m->tok) != hp->n_vocab)
        FAIL("%s: tokenizer has %d tokens but token_embd has %d rows", m->path, bd_tokenizer_n_vocab(m->tok),
             hp->n_vocab);
    if (bd_gguf_find_tensor(m->gguf, "rope_freqs.weight"))
        FAIL("%s: 'rope_freqs.weight' (scaled RoPE) is not supported", m->path);

    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) FAIL("out of memory");
    for (int32_t il = 0; il < hp->n_layer; il++) {
        bd_layer *L = &m->layers[il];
        L->recurrent = rec[il];
        L->kv_slot = L->recurrent ? -1 : hp->n_attn_layers++;
        L->rs_slot = L->recurrent ? hp->n_rec_layers++ : -1;
    }
    if (!bd_model_get_mat(m, "token_embd.weight", hp->n_embd, hp->n_vocab, true, &m->tok_embd, err, errlen) ||
        !bd_model_get_vec(m, "output_norm.weight", hp->n_embd, true, &m->output_norm, err, errlen) ||
        !bd_model_get_mat(m, "output.weight", hp->n_embd, hp->n_vocab, false, &m->output, err, errlen))
        return false;
    if (!m->output.data) {
        m->output = m->tok_embd;
        m->tied = true;
    }
    for (int32_t il = 0; il < hp->n_layer; il++)
        if (!bind_layer(m, il, err, errlen)) return false;
    return true;
}
