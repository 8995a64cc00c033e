/*
 * make_seeds.c - write small valid GGUF files into DIR as a fuzz seed
 * corpus (`make fuzz` adds prefixes of the real fixtures next to them).
 * usage: make_seeds DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/bd_gguf.h"
#include "tensor/tensor.h"

static int write_seed(bd_gguf_writer *w, const char *dir, const char *name) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int ok = bd_gguf_writer_write_file(w, path, err, sizeof err);
    if (!ok) fprintf(stderr, "make_seeds: %s\n", err);
    bd_gguf_writer_free(w);
    return ok ? 0 : 1;
}

/* Micro shapes: width 32, 2 heads of 16 (8 rotary lanes, sections
 * 2+1+1), GDN 1 key head / 2 value heads of 8, 2 layers (the second is
 * attention), vocabulary 16; matrices Q8_0 (32-wide rows), the rest F32. */
enum { E = 32, HD = 16, NH = 2, NKV = 1, DS = 8, NK = 1, NV = 2, FF = 32, VOC = 16, NL = 2, NEXP = 4 };

static void add_zero(bd_gguf_writer *w, const char *name, uint32_t type, uint64_t ne0, uint64_t ne1, uint64_t ne2) {
    static unsigned char buf[1 << 16];
    uint64_t rows = ne1 * ne2, rb;
    bd_row_size(type, (int64_t)ne0, &rb);
    uint64_t ne[3] = {ne0, ne1, ne2};
    /* small non-zero values: F32 1.0, Q8_0 scale 1 and quants 1 */
    if (type == BD_TYPE_F32) {
        for (uint64_t i = 0; i < rb * rows / 4; i++) ((float *)buf)[i] = -0.5f;
    } else {
        for (uint64_t i = 0; i < rb * rows; i++) buf[i] = (i % 34) == 1 ? 0x3c : 1; /* f16 1.0 = 0x3c00 */
    }
    bd_gguf_writer_add_tensor(w, name, type, ne2 > 1 ? 3 : (ne1 > 1 ? 2 : 1), ne, buf, rb * rows);
}

/* moe: qwen35moe; next: qwen3next (MoE, no sections, fused ssm_in /
 * ssm_ba, one group of rows per key head) */
static bd_gguf_writer *micro_hybrid(bool moe, bool next) {
    const char *a = next ? "qwen3next" : moe ? "qwen35moe" : "qwen35";
    moe = moe || next;
    char k[96];
    bd_gguf_writer *w = bd_gguf_writer_create();
    bd_gguf_writer_set_str(w, "general.architecture", a);
#define U(key, v) (snprintf(k, sizeof k, "%s." key, a), bd_gguf_writer_set_u32(w, k, v))
    U("block_count", NL);
    U("embedding_length", E);
    U("feed_forward_length", FF);
    U("attention.head_count", NH);
    U("attention.head_count_kv", NKV);
    U("attention.key_length", HD);
    U("attention.value_length", HD);
    U("rope.dimension_count", 8);
    U("ssm.conv_kernel", 4);
    U("ssm.state_size", DS);
    U("ssm.group_count", NK);
    U("ssm.time_step_rank", NV);
    U("ssm.inner_size", NV * DS);
    U("full_attention_interval", 2);
    if (moe) {
        U("expert_count", NEXP);
        U("expert_used_count", 2);
        U("expert_feed_forward_length", FF);
        U("expert_shared_feed_forward_length", FF);
    }
#undef U
    snprintf(k, sizeof k, "%s.rope.dimension_sections", a);
    const int32_t sec[4] = {2, 1, 1, 0};
    if (!next) bd_gguf_writer_set_arr(w, k, GGUF_VTYPE_INT32, sec, 4);
    add_zero(w, "token_embd.weight", BD_TYPE_Q8_0, E, VOC, 1);
    add_zero(w, "output_norm.weight", BD_TYPE_F32, E, 1, 1);
    const uint64_t conv_dim = 2 * NK * DS + NV * DS;
    for (int l = 0; l < NL; l++) {
        char n[64];
#define T(sfx, type, a0, a1, a2) (snprintf(n, sizeof n, "blk.%d." sfx, l), add_zero(w, n, type, a0, a1, a2))
        T("attn_norm.weight", BD_TYPE_F32, E, 1, 1);
        T("post_attention_norm.weight", BD_TYPE_F32, E, 1, 1);
        if (l == 0) {
            if (next) {
                T("ssm_in.weight", BD_TYPE_Q8_0, E, conv_dim + NV * DS, 1);
                T("ssm_ba.weight", BD_TYPE_Q8_0, E, 2 * NV, 1);
            } else {
                T("attn_qkv.weight", BD_TYPE_Q8_0, E, conv_dim, 1);
                T("attn_gate.weight", BD_TYPE_Q8_0, E, NV * DS, 1);
                T("ssm_beta.weight", BD_TYPE_Q8_0, E, NV, 1);
                T("ssm_alpha.weight", BD_TYPE_Q8_0, E, NV, 1);
            }
            T("ssm_dt.bias", BD_TYPE_F32, NV, 1, 1);
            T("ssm_a", BD_TYPE_F32, NV, 1, 1);
            T("ssm_conv1d.weight", BD_TYPE_F32, 4, conv_dim, 1);
            T("ssm_norm.weight", BD_TYPE_F32, DS, 1, 1);
            T("ssm_out.weight", BD_TYPE_F32, NV * DS, E, 1);
        } else {
            T("attn_q.weight", BD_TYPE_Q8_0, E, 2 * NH * HD, 1);
            T("attn_k.weight", BD_TYPE_Q8_0, E, NKV * HD, 1);
            T("attn_v.weight", BD_TYPE_Q8_0, E, NKV * HD, 1);
            T("attn_output.weight", BD_TYPE_Q8_0, NH * HD, E, 1);
            T("attn_q_norm.weight", BD_TYPE_F32, HD, 1, 1);
            T("attn_k_norm.weight", BD_TYPE_F32, HD, 1, 1);
        }
        if (moe) {
            T("ffn_gate_inp.weight", BD_TYPE_F32, E, NEXP, 1);
            T("ffn_gate_up_exps.weight", BD_TYPE_Q8_0, E, 2 * FF, NEXP);
            T("ffn_down_exps.weight", BD_TYPE_Q8_0, FF, E, NEXP);
            T("ffn_gate_inp_shexp.weight", BD_TYPE_F32, E, 1, 1);
            T("ffn_gate_shexp.weight", BD_TYPE_Q8_0, E, FF, 1);
            T("ffn_up_shexp.weight", BD_TYPE_Q8_0, E, FF, 1);
            T("ffn_down_shexp.weight", BD_TYPE_Q8_0, FF, E, 1);
        } else {
            T("ffn_gate.weight", BD_TYPE_Q8_0, E, FF, 1);
            T("ffn_up.weight", BD_TYPE_Q8_0, E, FF, 1);
            T("ffn_down.weight", BD_TYPE_Q8_0, FF, E, 1);
        }
#undef T
    }
    return w;
}

/* A micro qwen3moe: attention in both layers (q/k norms), split expert
 * stacks, no shared expert. */
static bd_gguf_writer *micro_qwen3moe(void) {
    bd_gguf_writer *w = bd_gguf_writer_create();
    bd_gguf_writer_set_str(w, "general.architecture", "qwen3moe");
    bd_gguf_writer_set_u32(w, "qwen3moe.block_count", NL);
    bd_gguf_writer_set_u32(w, "qwen3moe.embedding_length", E);
    bd_gguf_writer_set_u32(w, "qwen3moe.feed_forward_length", FF);
    bd_gguf_writer_set_u32(w, "qwen3moe.attention.head_count", NH);
    bd_gguf_writer_set_u32(w, "qwen3moe.attention.head_count_kv", NKV);
    bd_gguf_writer_set_u32(w, "qwen3moe.attention.key_length", HD);
    bd_gguf_writer_set_u32(w, "qwen3moe.attention.value_length", HD);
    bd_gguf_writer_set_u32(w, "qwen3moe.expert_count", NEXP);
    bd_gguf_writer_set_u32(w, "qwen3moe.expert_used_count", 2);
    bd_gguf_writer_set_u32(w, "qwen3moe.expert_feed_forward_length", FF);
    add_zero(w, "token_embd.weight", BD_TYPE_Q8_0, E, VOC, 1);
    add_zero(w, "output_norm.weight", BD_TYPE_F32, E, 1, 1);
    for (int l = 0; l < NL; l++) {
        char n[64];
#define T(sfx, type, a0, a1, a2) (snprintf(n, sizeof n, "blk.%d." sfx, l), add_zero(w, n, type, a0, a1, a2))
        T("attn_norm.weight", BD_TYPE_F32, E, 1, 1);
        T("attn_q.weight", BD_TYPE_Q8_0, E, NH * HD, 1);
        T("attn_k.weight", BD_TYPE_Q8_0, E, NKV * HD, 1);
        T("attn_v.weight", BD_TYPE_Q8_0, E, NKV * HD, 1);
        T("attn_output.weight", BD_TYPE_Q8_0, NH * HD, E, 1);
        T("attn_q_norm.weight", BD_TYPE_F32, HD, 1, 1);
        T("attn_k_norm.weight", BD_TYPE_F32, HD, 1, 1);
        T("ffn_norm.weight", BD_TYPE_F32, E, 1, 1);
        T("ffn_gate_inp.weight", BD_TYPE_F32, E, NEXP, 1);
        T("ffn_gate_exps.weight", BD_TYPE_Q8_0, E, FF, NEXP);
        T("ffn_up_exps.weight", BD_TYPE_Q8_0, E, FF, NEXP);
        T("ffn_down_exps.weight", BD_TYPE_Q8_0, FF, E, NEXP);
#undef T
    }
    return w;
}

/* Micro dense targets with the optional parts of their loaders: qwen2
 * with q/k/v biases and YaRN scaling keys, llama with Llama 3.1's
 * rope_freqs.weight, an output-projection bias and linear scaling. */
static bd_gguf_writer *micro_dense(const char *arch) {
    const bool llama = !strcmp(arch, "llama");
    bd_gguf_writer *w = bd_gguf_writer_create();
    char k[96];
#define KEY(sfx) (snprintf(k, sizeof k, "%s.%s", arch, sfx), k)
    bd_gguf_writer_set_str(w, "general.architecture", arch);
    bd_gguf_writer_set_u32(w, KEY("block_count"), NL);
    bd_gguf_writer_set_u32(w, KEY("embedding_length"), E);
    bd_gguf_writer_set_u32(w, KEY("feed_forward_length"), FF);
    bd_gguf_writer_set_u32(w, KEY("attention.head_count"), NH);
    bd_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), NKV);
    bd_gguf_writer_set_u32(w, KEY("context_length"), 64);
    bd_gguf_writer_set_str(w, KEY("rope.scaling.type"), llama ? "linear" : "yarn");
    bd_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 4.0f);
    if (!llama) bd_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 16);
#undef KEY
    add_zero(w, "token_embd.weight", BD_TYPE_Q8_0, E, VOC, 1);
    add_zero(w, "output_norm.weight", BD_TYPE_F32, E, 1, 1);
    if (llama) { /* positive factors, as the loader requires */
        const float ff[HD / 2] = {1, 1, 1, 2, 4, 8, 8, 8};
        bd_gguf_writer_add_tensor(w, "rope_freqs.weight", BD_TYPE_F32, 1, (const uint64_t[]){HD / 2}, ff, sizeof ff);
    }
    for (int l = 0; l < NL; l++) {
        char n[64];
#define T(sfx, type, a0, a1) (snprintf(n, sizeof n, "blk.%d." sfx, l), add_zero(w, n, type, a0, a1, 1))
        T("attn_norm.weight", BD_TYPE_F32, E, 1);
        T("attn_q.weight", BD_TYPE_Q8_0, E, NH * HD);
        T("attn_k.weight", BD_TYPE_Q8_0, E, NKV * HD);
        T("attn_v.weight", BD_TYPE_Q8_0, E, NKV * HD);
        T("attn_output.weight", BD_TYPE_Q8_0, NH * HD, E);
        if (llama) {
            T("attn_output.bias", BD_TYPE_F32, E, 1);
        } else {
            T("attn_q.bias", BD_TYPE_F32, NH * HD, 1);
            T("attn_k.bias", BD_TYPE_F32, NKV * HD, 1);
            T("attn_v.bias", BD_TYPE_F32, NKV * HD, 1);
        }
        T("ffn_norm.weight", BD_TYPE_F32, E, 1);
        T("ffn_gate.weight", BD_TYPE_Q8_0, E, FF);
        T("ffn_up.weight", BD_TYPE_Q8_0, E, FF);
        T("ffn_down.weight", BD_TYPE_Q8_0, FF, E);
#undef T
    }
    return w;
}

static bd_gguf_writer *micro_drafter(void) {
    bd_gguf_writer *w = bd_gguf_writer_create();
    bd_gguf_writer_set_str(w, "general.architecture", "dflash");
    bd_gguf_writer_set_u32(w, "dflash.block_count", 1);
    bd_gguf_writer_set_u32(w, "dflash.embedding_length", E);
    bd_gguf_writer_set_u32(w, "dflash.feed_forward_length", FF);
    bd_gguf_writer_set_u32(w, "dflash.attention.head_count", NH);
    bd_gguf_writer_set_u32(w, "dflash.attention.head_count_kv", NKV);
    bd_gguf_writer_set_u32(w, "dflash.attention.key_length", HD);
    bd_gguf_writer_set_u32(w, "dflash.attention.value_length", HD);
    bd_gguf_writer_set_u32(w, "dflash.block_size", 4);
    bd_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", VOC - 1);
    bd_gguf_writer_set_u32(w, "dflash.attention.sliding_window", 8);
    const uint8_t pat[1] = {1};
    bd_gguf_writer_set_arr(w, "dflash.attention.sliding_window_pattern", GGUF_VTYPE_BOOL, pat, 1);
    const int32_t taps[2] = {0, 1}, sec[4] = {HD / 2, 0, 0, 0};
    bd_gguf_writer_set_arr(w, "dflash.target_layers", GGUF_VTYPE_INT32, taps, 2);
    bd_gguf_writer_set_arr(w, "dflash.rope.dimension_sections", GGUF_VTYPE_INT32, sec, 4);
    add_zero(w, "fc.weight", BD_TYPE_Q8_0, 2 * E, E, 1);
    add_zero(w, "enc.output_norm.weight", BD_TYPE_F32, E, 1, 1);
    add_zero(w, "output_norm.weight", BD_TYPE_F32, E, 1, 1);
    const char *sfx[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
                         "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    const uint64_t ne0[] = {E, E, E, E, NH * HD, HD, HD, E, E, E, FF};
    const uint64_t ne1[] = {1, NH * HD, NKV * HD, NKV * HD, E, 1, 1, 1, FF, FF, E};
    for (int i = 0; i < 11; i++) {
        char n[64];
        snprintf(n, sizeof n, "blk.0.%s.weight", sfx[i]);
        add_zero(w, n, ne1[i] == 1 ? BD_TYPE_F32 : BD_TYPE_Q8_0, ne0[i], ne1[i], 1);
    }
    return w;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    int rc = 0;

    /* every value type */
    bd_gguf_writer *w = bd_gguf_writer_create();
    bd_gguf_writer_set_str(w, "general.architecture", "llama");
    bd_gguf_writer_set_u8(w, "a.u8", 1);
    bd_gguf_writer_set_i8(w, "a.i8", -1);
    bd_gguf_writer_set_u16(w, "a.u16", 2);
    bd_gguf_writer_set_i16(w, "a.i16", -2);
    bd_gguf_writer_set_u32(w, "a.u32", 3);
    bd_gguf_writer_set_i32(w, "a.i32", -3);
    bd_gguf_writer_set_u64(w, "a.u64", 4);
    bd_gguf_writer_set_i64(w, "a.i64", -4);
    bd_gguf_writer_set_f32(w, "a.f32", 0.5f);
    bd_gguf_writer_set_f64(w, "a.f64", 0.25);
    bd_gguf_writer_set_bool(w, "a.bool", true);
    const char *words[] = {"<unk>", "<s>", "", "hello"};
    bd_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", words, 4);
    const float sc[] = {0, -1, -2, -3};
    bd_gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_VTYPE_FLOAT32, sc, 4);
    /* nested [[1,2],["x"]] */
    const unsigned char nested[] = {2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,   /* u16 x2 */
                                    1, 0, 2, 0,
                                    8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,   /* string x1 */
                                    1, 0, 0, 0, 0, 0, 0, 0, 'x'};
    unsigned char enc[12 + sizeof nested] = {9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    memcpy(enc + 12, nested, sizeof nested);
    bd_gguf_writer_set_raw(w, "a.nested", GGUF_VTYPE_ARRAY, enc, sizeof enc);
    rc |= write_seed(w, dir, "seed-kv.gguf");

    /* tensors of several types, alignment 64 */
    w = bd_gguf_writer_create();
    bd_gguf_writer_set_alignment(w, 64);
    bd_gguf_writer_set_str(w, "general.architecture", "llama");
    static unsigned char zero[4096];
    bd_gguf_writer_add_tensor(w, "f32", BD_TYPE_F32, 2, (const uint64_t[]){4, 2}, zero, 32);
    bd_gguf_writer_add_tensor(w, "q8", BD_TYPE_Q8_0, 1, (const uint64_t[]){64}, zero, 68);
    bd_gguf_writer_add_tensor(w, "q4k", BD_TYPE_Q4_K, 1, (const uint64_t[]){256}, zero, 144);
    bd_gguf_writer_add_tensor(w, "f16", BD_TYPE_F16, 3, (const uint64_t[]){2, 2, 2}, zero, 16);
    bd_gguf_writer_add_tensor(w, "empty", BD_TYPE_F32, 2, (const uint64_t[]){0, 3}, zero, 0);
    rc |= write_seed(w, dir, "seed-tensors.gguf");

    /* empty file */
    rc |= write_seed(bd_gguf_writer_create(), dir, "seed-empty.gguf");

    /* micro hybrids: valid qwen35 / qwen35moe / qwen3next files of tiny sizes (the
     * loader accepts them), a micro qwen3moe, and a DFlash drafter for the
     * dense hybrid */
    rc |= write_seed(micro_hybrid(false, false), dir, "seed-qwen35.gguf");
    rc |= write_seed(micro_hybrid(true, false), dir, "seed-qwen35moe.gguf");
    rc |= write_seed(micro_hybrid(true, true), dir, "seed-qwen3next.gguf");
    rc |= write_seed(micro_dense("qwen2"), dir, "seed-qwen2.gguf");
    rc |= write_seed(micro_dense("llama"), dir, "seed-llama3.gguf");
    rc |= write_seed(micro_qwen3moe(), dir, "seed-qwen3moe.gguf");
    rc |= write_seed(micro_drafter(), dir, "seed-dflash.gguf");
    return rc;
}
