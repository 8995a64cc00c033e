/*
 * qwen35_load.c - read and check a `qwen35` / `qwen35moe` GGUF (Qwen3.5 and
 * Qwen3.6 hybrids: Gated DeltaNet layers with gated full attention every
 * few layers; dense or mixture-of-experts feed-forward).
 *
 * Facts: qwen35-hybrid.md §1-§5, gguf-and-architectures.md §8; llama.cpp
 * v0.5.0 src/models/qwen35*.cpp. Every inconsistency of the header is
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
    if (!read_sections(m, p, err, errlen)) return false;

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
        MAT(w_qkv, "attn_qkv.weight", E, conv_dim);
        MAT(w_z, "attn_gate.weight", E, value_dim);
        MAT(w_beta, "ssm_beta.weight", E, nv);
        MAT(w_alpha, "ssm_alpha.weight", E, nv);
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
        if (bd_gguf_find_tensor(m->gguf, NAME("attn_qkv.weight")) || bd_gguf_find_tensor(m->gguf, NAME("ssm_a")))
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
