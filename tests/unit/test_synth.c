/*
 * test_synth.c - synthetic model generator (src/model/synth.c).
 *
 * References: the Q4_K_M layer lists are the ones stated in
 * shared/reference/gguf-and-architectures.md section 4 (llama.cpp
 * llama-quant.cpp), Qwen3-4B/0.6B shapes from section 6, type ids and
 * block sizes from ggml. Generated files are read back with the GGUF
 * reader and checked against the requested shape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <math.h>

#include "gguf/bd_gguf.h"
#include "model/synth.h"
#include "model/synth_dflash.h"
#include "tensor/tensor.h"

static const char *shared_dir(void) {
    const char *s = getenv("BD_SHARED");
    return s ? s : "../shared";
}

static const bd_synth_tensor *find(const bd_synth_plan *p, const char *name) {
    for (int i = 0; i < p->n_tensors; i++)
        if (!strcmp(p->tensors[i].name, name)) return &p->tensors[i];
    return NULL;
}

/* The doc: "For n = 36 (Qwen3-4B): layers 0-3, 6, 9, 12, 15, 18, 21, 24,
 * 27, 30, 31-35" get more bits. */
static void test_use_more_bits_36(void **state) {
    (void)state;
    const int more[] = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31, 32, 33, 34, 35};
    for (int i = 0; i < 36; i++) {
        bool expect = false;
        for (size_t k = 0; k < sizeof more / sizeof more[0]; k++) expect |= more[k] == i;
        assert_int_equal(bd_synth_use_more_bits(i, 36), expect);
    }
}

static void test_plan_4b_q4_k_m(void **state) {
    (void)state;
    bd_synth_opts o = {.arch = "qwen3", .shape = "4b", .mix = "q4_k_m", .seed = 1, .tied = -1};
    bd_synth_plan p;
    char err[256];
    assert_true(bd_synth_plan_make(&o, 151936, &p, err, sizeof err));
    assert_true(p.tied);                        /* Qwen3-4B ties its embeddings */
    assert_null(find(&p, "output.weight"));
    assert_int_equal(p.file_type, 15);          /* LLAMA_FTYPE_MOSTLY_Q4_K_M */
    const bd_synth_tensor *t = find(&p, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->type, BD_TYPE_Q6_K);    /* tied embedding takes the output rule */
    assert_int_equal(t->ne[0], 2560);
    assert_int_equal(t->ne[1], 151936);
    assert_int_equal(find(&p, "blk.0.attn_q.weight")->ne[1], 4096); /* 32 heads x 128 */
    assert_int_equal(find(&p, "blk.0.attn_k.weight")->ne[1], 1024); /* 8 kv heads x 128 */
    assert_int_equal(find(&p, "blk.0.attn_q_norm.weight")->ne[0], 128);
    assert_int_equal(find(&p, "blk.0.ffn_down.weight")->ne[0], 9728);
    assert_int_equal(find(&p, "blk.35.ffn_up.weight")->ne[1], 9728);
    assert_null(find(&p, "blk.36.ffn_up.weight"));
    char name[64];
    const int more[] = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31, 32, 33, 34, 35};
    for (int l = 0; l < 36; l++) {
        bool m = false;
        for (size_t k = 0; k < sizeof more / sizeof more[0]; k++) m |= more[k] == l;
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        assert_int_equal(find(&p, name)->type, m ? BD_TYPE_Q6_K : BD_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        assert_int_equal(find(&p, name)->type, m ? BD_TYPE_Q6_K : BD_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        assert_int_equal(find(&p, name)->type, BD_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        assert_int_equal(find(&p, name)->type, BD_TYPE_F32);
        snprintf(name, sizeof name, "blk.%d.attn_k_norm.weight", l);
        assert_int_equal(find(&p, name)->type, BD_TYPE_F32);
    }
    bd_synth_plan_free(&p);

    /* Untied: output.weight Q6_K, token_embd stays Q4_K (doc section 4). */
    o.tied = 0;
    assert_true(bd_synth_plan_make(&o, 151936, &p, err, sizeof err));
    assert_int_equal(find(&p, "output.weight")->type, BD_TYPE_Q6_K);
    assert_int_equal(find(&p, "token_embd.weight")->type, BD_TYPE_Q4_K);
    bd_synth_plan_free(&p);
}

/* Widths that are not multiples of 256: Q4_K->Q5_0, Q6_K->Q8_0, Q2_K/Q3_K->Q4_0. */
static void test_plan_width_fallback(void **state) {
    (void)state;
    bd_synth_opts o = {.arch = "qwen3", .shape = "odd", .mix = "q4_k_m", .seed = 1, .tied = 1};
    bd_synth_plan p;
    char err[256];
    assert_true(bd_synth_plan_make(&o, 1000, &p, err, sizeof err));
    assert_int_equal(find(&p, "token_embd.weight")->type, BD_TYPE_Q8_0);   /* output rule, 384 % 256 */
    assert_int_equal(find(&p, "blk.0.attn_q.weight")->type, BD_TYPE_Q5_0);
    /* n_layer 3: use_more_bits holds for layer 2 only (2 >= 7*3/8). */
    assert_int_equal(find(&p, "blk.2.ffn_down.weight")->type, BD_TYPE_Q8_0); /* Q6_K -> Q8_0 */
    assert_int_equal(find(&p, "blk.1.ffn_down.weight")->type, BD_TYPE_Q5_0); /* Q4_K -> Q5_0 */
    assert_int_equal(find(&p, "blk.0.ffn_down.weight")->type, BD_TYPE_Q5_0);
    bd_synth_plan_free(&p);
    o.mix = "iq4_xs";
    assert_true(bd_synth_plan_make(&o, 1000, &p, err, sizeof err));
    assert_int_equal(find(&p, "blk.0.attn_q.weight")->type, BD_TYPE_IQ4_NL);
    bd_synth_plan_free(&p);
    o.mix = "q2_k"; /* Q2_K and Q3_K fall back to Q4_0 (llama.cpp's tensor_type_fallback) */
    assert_true(bd_synth_plan_make(&o, 1000, &p, err, sizeof err));
    assert_int_equal(find(&p, "blk.0.attn_q.weight")->type, BD_TYPE_Q4_0);
    bd_synth_plan_free(&p);
    o.mix = "q3_k";
    assert_true(bd_synth_plan_make(&o, 1000, &p, err, sizeof err));
    assert_int_equal(find(&p, "blk.0.attn_q.weight")->type, BD_TYPE_Q4_0);
    bd_synth_plan_free(&p);
}

static void test_plan_mix_and_errors(void **state) {
    (void)state;
    bd_synth_opts o = {.arch = "llama", .shape = "tiny", .mix = "mix", .seed = 1, .tied = 0};
    bd_synth_plan p;
    char err[256];
    assert_true(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
    bool seen[BD_TYPE_COUNT] = {0};
    for (int i = 0; i < p.n_tensors; i++) {
        seen[p.tensors[i].type] = true;
        assert_true(strstr(p.tensors[i].name, "norm") == NULL || p.tensors[i].type == BD_TYPE_F32);
    }
    assert_true(seen[BD_TYPE_Q4_K] && seen[BD_TYPE_Q6_K] && seen[BD_TYPE_Q8_0] && seen[BD_TYPE_F16] &&
                seen[BD_TYPE_BF16] && seen[BD_TYPE_F32]);
    assert_null(find(&p, "blk.0.attn_q_norm.weight")); /* llama has no q/k norms */
    bd_synth_plan_free(&p);
    o.mix = "q3_k_m"; /* not a mix make-model writes */
    assert_false(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
    o.mix = "f16";
    o.shape = "huge";
    assert_false(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
    o.shape = "tiny";
    o.arch = "gpt2";
    assert_false(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
}

/* Values: deterministic per (seed, name, row), roughly the intended scale. */
static void test_row_values(void **state) {
    (void)state;
    bd_synth_tensor t = {.name = "blk.0.ffn_up.weight", .n_dims = 2, .ne = {4096, 4},
                         .type = BD_TYPE_F32, .init = BD_SYNTH_MATRIX, .scale = 0.05f};
    float a[4096], b[4096];
    bd_synth_row_values(7, &t, 3, a);
    bd_synth_row_values(7, &t, 3, b);
    assert_memory_equal(a, b, sizeof a);
    bd_synth_row_values(8, &t, 3, b);
    assert_memory_not_equal(a, b, sizeof a);
    double s = 0, s2 = 0;
    for (int i = 0; i < 4096; i++) s += a[i], s2 += (double)a[i] * a[i];
    double mean = s / 4096, sd = __builtin_sqrt(s2 / 4096 - mean * mean);
    assert_true(mean > -0.005 && mean < 0.005);
    assert_true(sd > 0.045 && sd < 0.055);
    t.init = BD_SYNTH_NORM;
    t.scale = 0.1f;
    bd_synth_row_values(7, &t, 0, a);
    for (int i = 0; i < 4096; i++) assert_true(a[i] > 0.6f && a[i] < 1.4f);
}

/* Write a small llama with the stories260K vocabulary, read it back. */
static void test_write_read_back(void **state) {
    (void)state;
    char vocab[512], path[256], path2[256], err[512];
    snprintf(vocab, sizeof vocab, "%s/fixtures/stories260K/stories260K.gguf", shared_dir());
    snprintf(path, sizeof path, "/tmp/bd_test_synth_%d.gguf", (int)getpid());
    snprintf(path2, sizeof path2, "/tmp/bd_test_synth_%d_b.gguf", (int)getpid());
    bd_synth_opts o = {.arch = "llama", .shape = "tiny", .mix = "q4_k_m", .seed = 5, .tied = 0,
                       .vocab_path = vocab, .n_threads = 2};
    if (!bd_synth_write(&o, path, err, sizeof err)) fail_msg("%s", err);
    o.n_threads = 1; /* same bytes whatever the thread count */
    if (!bd_synth_write(&o, path2, err, sizeof err)) fail_msg("%s", err);

    bd_gguf_file *f = bd_gguf_open(path, err, sizeof err);
    if (!f) fail_msg("%s", err);
    uint32_t u;
    char s[64];
    assert_true(bd_gguf_get_strz(f, "general.architecture", s, sizeof s));
    assert_string_equal(s, "llama");
    assert_true(bd_gguf_get_u32(f, "llama.block_count", &u) && u == 4);
    assert_true(bd_gguf_get_u32(f, "llama.embedding_length", &u) && u == 256);
    assert_true(bd_gguf_get_u32(f, "llama.attention.head_count_kv", &u) && u == 2);
    assert_true(bd_gguf_get_u32(f, "general.file_type", &u) && u == 15);
    const bd_gguf_kv *tok = bd_gguf_find(f, "tokenizer.ggml.tokens");
    assert_non_null(tok);
    assert_int_equal(tok->arr_count, 512);
    assert_non_null(bd_gguf_find(f, "tokenizer.ggml.scores"));
    const bd_gguf_tensor *emb = bd_gguf_find_tensor(f, "token_embd.weight");
    assert_non_null(emb);
    assert_int_equal(emb->ne[0], 256);
    assert_int_equal(emb->ne[1], 512);
    assert_int_equal(emb->type, BD_TYPE_Q4_K); /* untied: stays at the base type */
    assert_int_equal(bd_gguf_find_tensor(f, "output.weight")->type, BD_TYPE_Q6_K);
    assert_int_equal(bd_gguf_find_tensor(f, "output_norm.weight")->type, BD_TYPE_F32);
    /* Dequantized output rows look like the intended N(0, 4/sqrt(256)). */
    const bd_gguf_tensor *out = bd_gguf_find_tensor(f, "output.weight");
    uint64_t rb;
    assert_true(bd_row_size(out->type, 256, &rb));
    float row[256];
    double s2 = 0;
    for (int r = 0; r < 64; r++) {
        assert_true(bd_dequantize_row(out->type, (const uint8_t *)out->data + r * rb, row, 256));
        for (int i = 0; i < 256; i++) s2 += (double)row[i] * row[i];
    }
    double sd = __builtin_sqrt(s2 / (64 * 256));
    assert_true(sd > 0.2 && sd < 0.3);

    bd_gguf_file *g = bd_gguf_open(path2, err, sizeof err);
    if (!g) fail_msg("%s", err);
    assert_int_equal(bd_gguf_file_size(f), bd_gguf_file_size(g));
    assert_int_equal(bd_gguf_tensor_count(f), bd_gguf_tensor_count(g));
    for (int64_t i = 0; i < bd_gguf_tensor_count(f); i++) {
        const bd_gguf_tensor *a = bd_gguf_tensor_at(f, i), *b = bd_gguf_tensor_at(g, i);
        assert_int_equal(a->nbytes, b->nbytes);
        assert_memory_equal(a->data, b->data, a->nbytes);
    }
    bd_gguf_close(g);
    bd_gguf_close(f);
    unlink(path);
    unlink(path2);

    /* A missing vocabulary fails cleanly and leaves no file. */
    o.vocab_path = "/nonexistent/vocab.gguf";
    assert_false(bd_synth_write(&o, path, err, sizeof err));
    assert_int_not_equal(access(path, F_OK), 0);
}

/* ======================================================================
 * Hybrid archs (qwen35 / qwen35moe). References: tensor names and shapes
 * from llama.cpp v0.5.0 src/models/qwen35.cpp / qwen35moe.cpp
 * (load_arch_tensors), gguf-and-architectures.md section 8; the Q4_K_M
 * rules from section 4 and llama-quant.cpp; published tensor counts of
 * unsloth's GGUFs (4B: 426, 35B-A3B: 733). The e2e script
 * tests/e2e/synth_hybrid.sh checks the same files with llama.cpp itself.
 * ====================================================================== */

static const bd_synth_tensor *need(const bd_synth_plan *p, const char *name) {
    const bd_synth_tensor *t = find(p, name);
    if (!t) fail_msg("tensor %s missing", name);
    return t;
}

static void assert_shape(const bd_synth_plan *p, const char *name, uint64_t a, uint64_t b, uint64_t c,
                         uint32_t n_dims) {
    const bd_synth_tensor *t = need(p, name);
    if (t->ne[0] != a || t->ne[1] != b || t->ne[2] != c || t->n_dims != n_dims)
        fail_msg("%s: {%llu, %llu, %llu} (%u dims), want {%llu, %llu, %llu} (%u dims)", name,
                 (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                 t->n_dims, (unsigned long long)a, (unsigned long long)b, (unsigned long long)c, n_dims);
}

static void assert_type(const bd_synth_plan *p, const char *name, uint32_t type) {
    const bd_synth_tensor *t = need(p, name);
    if (t->type != type) fail_msg("%s: type %s, want %s", name, bd_type_name(t->type), bd_type_name(type));
}

static bd_synth_opts hopts(const char *arch, const char *shape, const char *mix) {
    bd_synth_opts o = {.arch = arch, .shape = shape, .mix = mix, .seed = 1, .tied = -1};
    return o;
}

/* qwen35 tiny: 3 GDN layers then one attention layer (interval 4), every
 * tensor llama.cpp creates, with its shape. */
static void test_hybrid_plan_tiny(void **state) {
    (void)state;
    bd_synth_opts o = hopts("qwen35", "tiny", "f32");
    bd_synth_plan p;
    char err[256], nm[64];
    if (!bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("%s", err);
    /* E 256, heads 4/2 of 64, GDN 2 K / 4 V heads of 64: key_dim 128,
     * value_dim 256, conv_dim 2*128 + 256 = 512 */
    assert_int_equal(p.n_layer, 4);
    assert_true(p.tied && !find(&p, "output.weight"));
    assert_shape(&p, "token_embd.weight", 256, 512, 1, 2);
    assert_shape(&p, "output_norm.weight", 256, 1, 1, 1);
    for (int l = 0; l < 3; l++) {
        assert_int_equal(p.recurrent[l], 1);
#define S(suffix, a, b, nd) snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix), assert_shape(&p, nm, a, b, 1, nd)
        S("attn_norm.weight", 256, 1, 1);
        S("post_attention_norm.weight", 256, 1, 1);
        S("attn_qkv.weight", 256, 512, 2);
        S("attn_gate.weight", 256, 256, 2);
        S("ssm_conv1d.weight", 4, 512, 2);
        S("ssm_dt.bias", 4, 1, 1);
        S("ssm_a", 4, 1, 1);
        S("ssm_alpha.weight", 256, 4, 2);
        S("ssm_beta.weight", 256, 4, 2);
        S("ssm_norm.weight", 64, 1, 1);
        S("ssm_out.weight", 256, 256, 2);
        S("ffn_gate.weight", 256, 512, 2);
        S("ffn_up.weight", 256, 512, 2);
        S("ffn_down.weight", 512, 256, 2);
        snprintf(nm, sizeof nm, "blk.%d.attn_q.weight", l);
        assert_null(find(&p, nm));
        snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", l); /* qwen35 has no ffn_norm */
        assert_null(find(&p, nm));
    }
    int l = 3;
    assert_int_equal(p.recurrent[3], 0);
    S("attn_q.weight", 256, 2 * 64 * 4, 2); /* q and gate per head */
    S("attn_k.weight", 256, 128, 2);
    S("attn_v.weight", 256, 128, 2);
    S("attn_output.weight", 256, 256, 2);
    S("attn_q_norm.weight", 64, 1, 1);
    S("attn_k_norm.weight", 64, 1, 1);
    assert_null(find(&p, "blk.3.attn_qkv.weight"));
    assert_null(find(&p, "blk.3.ssm_a"));
    /* 2 globals + 3 x 14 + 11 */
    assert_int_equal(p.n_tensors, 55);
    /* llama.cpp's order: globals, then by layer, by name within a layer */
    for (int i = 1; i < p.n_tensors; i++) {
        const char *a = p.tensors[i - 1].name, *b = p.tensors[i].name;
        int la = strncmp(a, "blk.", 4) ? -1 : atoi(a + 4), lb = strncmp(b, "blk.", 4) ? -1 : atoi(b + 4);
        if (la > lb || (la == lb && strcmp(a, b) >= 0)) fail_msg("order: %s before %s", a, b);
    }
    /* GDN decay parameters: ssm_a = -exp(A_log) < 0 in real files */
    const bd_synth_tensor *a = need(&p, "blk.0.ssm_a");
    assert_int_equal(a->init, BD_SYNTH_OFFSET);
    assert_true(a->offset + 3.5f * a->scale < 0.0f);
    /* every tensor is F32 in the f32 mix */
    for (int i = 0; i < p.n_tensors; i++) assert_int_equal(p.tensors[i].type, BD_TYPE_F32);
    bd_synth_plan_free(&p);
}

/* Q4_K_M on qwen35 tiny, by the rule of section 4: attn_v-like tensors
 * (attn_qkv of GDN layers, attn_v of attention layers; one per layer) and
 * ffn_down get Q6_K where use_more_bits(i, 4), i.e. layers 2 and 3; the
 * tied token_embd takes the output rule (Q6_K, 256 % 256 == 0); router,
 * conv and 1-D tensors stay F32; everything else Q4_K. */
static void test_hybrid_q4_k_m_tiny(void **state) {
    (void)state;
    assert_false(bd_synth_use_more_bits(0, 4));
    assert_false(bd_synth_use_more_bits(1, 4));
    assert_true(bd_synth_use_more_bits(2, 4));
    assert_true(bd_synth_use_more_bits(3, 4));
    bd_synth_opts o = hopts("qwen35", "tiny", "q4_k_m");
    bd_synth_plan p;
    char err[256];
    if (!bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.file_type, 15);
    assert_type(&p, "token_embd.weight", BD_TYPE_Q6_K);
    assert_type(&p, "blk.0.attn_qkv.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.1.attn_qkv.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.2.attn_qkv.weight", BD_TYPE_Q6_K);
    assert_type(&p, "blk.3.attn_v.weight", BD_TYPE_Q6_K);
    assert_type(&p, "blk.1.ffn_down.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.2.ffn_down.weight", BD_TYPE_Q6_K);
    assert_type(&p, "blk.3.ffn_down.weight", BD_TYPE_Q6_K);
    assert_type(&p, "blk.0.ssm_conv1d.weight", BD_TYPE_F32);
    assert_type(&p, "blk.0.ssm_a", BD_TYPE_F32);
    assert_type(&p, "blk.0.ssm_dt.bias", BD_TYPE_F32);
    assert_type(&p, "blk.0.ssm_norm.weight", BD_TYPE_F32);
    assert_type(&p, "blk.0.ssm_alpha.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.0.ssm_out.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.0.attn_gate.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.3.attn_q.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.3.attn_k.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.3.attn_output.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.3.attn_q_norm.weight", BD_TYPE_F32);
    bd_synth_plan_free(&p);

    /* small: value_dim 384 is not a multiple of 256 -> ssm_out (ne0 = 384)
     * falls back Q4_K -> Q5_0; untied output Q6_K, token_embd Q4_K;
     * n = 8: use_more_bits for layers 0, 3, 6, 7 (0 < 1, 7 >= 7, (i-1)%3==2) */
    o = hopts("qwen35", "small", "q4_k_m");
    if (!bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("%s", err);
    assert_type(&p, "output.weight", BD_TYPE_Q6_K);
    assert_type(&p, "token_embd.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.0.ssm_out.weight", BD_TYPE_Q5_0);
    assert_shape(&p, "blk.0.ssm_out.weight", 384, 512, 1, 2);
    assert_shape(&p, "blk.0.attn_qkv.weight", 512, 2 * 128 + 384, 1, 2);
    const int more[] = {1, 0, 0, 1, 0, 0, 1, 1};
    char nm[64];
    for (int l = 0; l < 8; l++) {
        snprintf(nm, sizeof nm, "blk.%d.ffn_down.weight", l);
        assert_type(&p, nm, more[l] ? BD_TYPE_Q6_K : BD_TYPE_Q4_K);
        snprintf(nm, sizeof nm, (l + 1) % 4 ? "blk.%d.attn_qkv.weight" : "blk.%d.attn_v.weight", l);
        assert_type(&p, nm, more[l] ? BD_TYPE_Q6_K : BD_TYPE_Q4_K);
    }
    bd_synth_plan_free(&p);
}

/* qwen35moe small: 8 experts switch on llama.cpp's 8-expert rules: every
 * attn_v-like tensor and attn_k Q8_0, attn_output Q5_K; expert stacks are
 * 3-D; ffn_down_exps / _shexp take Q6_K by their layer number against
 * block_count (9 with one MTP block: use_more_bits(i, 9) for 0, 3, 6, 7, 8). */
static void test_hybrid_moe_plan(void **state) {
    (void)state;
    bd_synth_opts o = hopts("qwen35moe", "small", "q4_k_m");
    o.n_mtp = 1;
    bd_synth_plan p;
    char err[256], nm[64];
    if (!bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.n_layer, 8);
    assert_int_equal(p.n_mtp, 1);
    assert_shape(&p, "blk.0.ffn_gate_inp.weight", 512, 8, 1, 2);
    assert_type(&p, "blk.0.ffn_gate_inp.weight", BD_TYPE_F32); /* the router is never quantized */
    assert_shape(&p, "blk.0.ffn_gate_exps.weight", 512, 512, 8, 3);
    assert_shape(&p, "blk.0.ffn_up_exps.weight", 512, 512, 8, 3);
    assert_shape(&p, "blk.0.ffn_down_exps.weight", 512, 512, 8, 3);
    assert_shape(&p, "blk.0.ffn_gate_inp_shexp.weight", 512, 1, 1, 1);
    assert_type(&p, "blk.0.ffn_gate_inp_shexp.weight", BD_TYPE_F32);
    assert_shape(&p, "blk.0.ffn_gate_shexp.weight", 512, 512, 1, 2);
    assert_shape(&p, "blk.0.ffn_down_shexp.weight", 512, 512, 1, 2);
    assert_null(find(&p, "blk.0.ffn_gate.weight"));
    assert_type(&p, "blk.0.attn_qkv.weight", BD_TYPE_Q8_0);
    assert_type(&p, "blk.3.attn_v.weight", BD_TYPE_Q8_0);
    assert_type(&p, "blk.3.attn_k.weight", BD_TYPE_Q8_0);
    assert_type(&p, "blk.3.attn_output.weight", BD_TYPE_Q5_K);
    assert_type(&p, "blk.3.attn_q.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.0.ffn_gate_exps.weight", BD_TYPE_Q4_K);
    const int more[] = {1, 0, 0, 1, 0, 0, 1, 1, 1};
    for (int l = 0; l < 9; l++) {
        snprintf(nm, sizeof nm, "blk.%d.ffn_down_exps.weight", l);
        assert_type(&p, nm, more[l] ? BD_TYPE_Q6_K : BD_TYPE_Q4_K);
        snprintf(nm, sizeof nm, "blk.%d.ffn_down_shexp.weight", l);
        assert_type(&p, nm, more[l] ? BD_TYPE_Q6_K : BD_TYPE_Q4_K);
    }
    /* the MTP block (blk.8): an attention block with the MoE FFN and the
     * nextn tensors, as llama.cpp's converter names them */
    assert_int_equal(p.recurrent[8], 0);
    assert_shape(&p, "blk.8.attn_q.weight", 512, 2 * 128 * 8, 1, 2);
    assert_shape(&p, "blk.8.nextn.eh_proj.weight", 1024, 512, 1, 2);
    assert_shape(&p, "blk.8.nextn.enorm.weight", 512, 1, 1, 1);
    assert_shape(&p, "blk.8.nextn.hnorm.weight", 512, 1, 1, 1);
    assert_shape(&p, "blk.8.nextn.shared_head_norm.weight", 512, 1, 1, 1);
    assert_type(&p, "blk.8.nextn.shared_head_norm.weight", BD_TYPE_F32);
    assert_shape(&p, "blk.8.ffn_down_exps.weight", 512, 512, 8, 3);
    assert_null(find(&p, "blk.8.attn_qkv.weight"));
    assert_null(find(&p, "blk.9.attn_norm.weight"));
    bd_synth_plan_free(&p);

    /* fused gate/up experts: one {E, 2 F_exp, n_expert} stack */
    o = hopts("qwen35moe", "tiny", "f32");
    o.fused_gate_up = true;
    if (!bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("%s", err);
    assert_shape(&p, "blk.0.ffn_gate_up_exps.weight", 256, 512, 16, 3);
    assert_null(find(&p, "blk.0.ffn_gate_exps.weight"));
    assert_null(find(&p, "blk.0.ffn_up_exps.weight"));
    bd_synth_plan_free(&p);
    o = hopts("qwen35", "tiny", "f32");
    o.fused_gate_up = true;
    assert_false(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
}

/* Layer schedule: interval rule, --recurrent-layers override, "auto". */
static void test_hybrid_schedule(void **state) {
    (void)state;
    bd_synth_opts o = hopts("qwen35", "small", "f32");
    bd_synth_plan p;
    char err[256];
    if (!bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("%s", err);
    const uint8_t interval[8] = {1, 1, 1, 0, 1, 1, 1, 0};
    assert_memory_equal(p.recurrent, interval, 8);
    assert_false(p.recurrent_key);
    bd_synth_plan_free(&p);
    o.recurrent = "auto";
    if (!bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("%s", err);
    assert_memory_equal(p.recurrent, interval, 8);
    assert_true(p.recurrent_key);
    bd_synth_plan_free(&p);
    /* attention at layer 2 where the interval rule says 3 */
    o = hopts("qwen35", "tiny", "q4_k_m");
    o.recurrent = "1,1,0,1";
    if (!bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("%s", err);
    assert_true(p.recurrent_key);
    assert_non_null(find(&p, "blk.2.attn_q.weight"));
    assert_non_null(find(&p, "blk.3.attn_qkv.weight"));
    assert_null(find(&p, "blk.3.attn_q.weight"));
    /* the attn_v-like counter follows the file order whatever the kind */
    assert_type(&p, "blk.2.attn_v.weight", BD_TYPE_Q6_K);
    assert_type(&p, "blk.3.attn_qkv.weight", BD_TYPE_Q6_K);
    bd_synth_plan_free(&p);
    const char *bad[] = {"1,1,0", "1,1,0,1,1", "1,2,0,1", "1,,0,1", "", "1,1,0,1,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.recurrent = bad[i];
        if (bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("accepted '%s'", bad[i]);
        assert_non_null(strstr(err, "--recurrent-layers"));
    }
    /* --layers keeps the per-layer shape; --mtp appends non-recurrent blocks */
    o = hopts("qwen35moe", "35b-a3b", "q4_k_m");
    o.n_layers = 8;
    o.n_mtp = 1;
    if (!bd_synth_plan_make(&o, 248320, &p, err, sizeof err)) fail_msg("%s", err);
    const uint8_t sched[9] = {1, 1, 1, 0, 1, 1, 1, 0, 0};
    assert_memory_equal(p.recurrent, sched, 9);
    assert_shape(&p, "blk.7.ffn_gate_exps.weight", 2048, 512, 256, 3);
    assert_shape(&p, "blk.8.nextn.eh_proj.weight", 4096, 2048, 1, 2);
    assert_null(find(&p, "blk.9.attn_norm.weight"));
    bd_synth_plan_free(&p);
    /* the hybrid-only options are refused for qwen3/llama, and so is the UD
     * mix; --layers applies to every arch */
    o = hopts("qwen3", "tiny", "q4_k_m");
    o.n_mtp = 1;
    assert_false(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
    o.n_mtp = 0;
    o.recurrent = "auto";
    assert_false(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
    o.recurrent = NULL;
    o.n_layers = 2;
    if (!bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.n_layer, 2);
    assert_non_null(find(&p, "blk.1.ffn_down.weight"));
    assert_null(find(&p, "blk.2.attn_norm.weight"));
    bd_synth_plan_free(&p);
    o = hopts("qwen3", "tiny", "ud-q4_k_m");
    assert_false(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
    o = hopts("qwen35", "35b-a3b", "f32"); /* a qwen35moe shape */
    assert_false(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
}

/* qwen3moe: Qwen3-30B-A3B's shape (48 layers of 12 tensors + 3: 579, untied,
 * split experts, no shared expert), its Q4_K_M types (no 8-expert rules at
 * 128 experts; ffn_down_exps by use_more_bits over the layer index), and
 * --layers keeping the per-layer shape. */
static void test_qwen3moe_plan(void **state) {
    (void)state;
    bd_synth_opts o = hopts("qwen3moe", "30b-a3b", "q4_k_m");
    bd_synth_plan p;
    char err[256], nm[64];
    if (!bd_synth_plan_make(&o, 151936, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.n_layer, 48);
    assert_int_equal(p.n_tensors, 579);
    assert_false(p.tied);
    assert_shape(&p, "output.weight", 2048, 151936, 1, 2);
    assert_shape(&p, "blk.0.attn_q.weight", 2048, 32 * 128, 1, 2);
    assert_shape(&p, "blk.0.attn_k.weight", 2048, 4 * 128, 1, 2);
    assert_shape(&p, "blk.0.attn_q_norm.weight", 128, 1, 1, 1);
    assert_shape(&p, "blk.0.attn_output.weight", 32 * 128, 2048, 1, 2);
    assert_shape(&p, "blk.0.ffn_gate_inp.weight", 2048, 128, 1, 2);
    assert_type(&p, "blk.0.ffn_gate_inp.weight", BD_TYPE_F32);
    assert_shape(&p, "blk.0.ffn_gate_exps.weight", 2048, 768, 128, 3);
    assert_shape(&p, "blk.0.ffn_up_exps.weight", 2048, 768, 128, 3);
    assert_shape(&p, "blk.0.ffn_down_exps.weight", 768, 2048, 128, 3);
    assert_null(find(&p, "blk.0.ffn_gate.weight"));
    assert_null(find(&p, "blk.0.ffn_gate_shexp.weight"));
    assert_type(&p, "output.weight", BD_TYPE_Q6_K);
    assert_type(&p, "token_embd.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.10.attn_output.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.10.attn_k.weight", BD_TYPE_Q4_K);
    for (int l = 0; l < 48; l++) {
        snprintf(nm, sizeof nm, "blk.%d.ffn_down_exps.weight", l);
        assert_type(&p, nm, bd_synth_use_more_bits(l, 48) ? BD_TYPE_Q6_K : BD_TYPE_Q4_K);
        snprintf(nm, sizeof nm, "blk.%d.attn_v.weight", l);
        assert_type(&p, nm, bd_synth_use_more_bits(l, 48) ? BD_TYPE_Q6_K : BD_TYPE_Q4_K);
    }
    bd_synth_plan_free(&p);
    o.n_layers = 8;
    if (!bd_synth_plan_make(&o, 151936, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.n_tensors, 3 + 8 * 12);
    assert_shape(&p, "blk.7.ffn_down_exps.weight", 768, 2048, 128, 3);
    bd_synth_plan_free(&p);
    o = hopts("qwen3moe", "tiny", "f32");
    o.fused_gate_up = true; /* llama.cpp's qwen3moe loads split experts only */
    assert_false(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
    o = hopts("qwen3moe", "4b", "f32"); /* a qwen3 shape */
    assert_false(bd_synth_plan_make(&o, 512, &p, err, sizeof err));
}

/* The published shapes: widths, and tensor counts equal to the published
 * GGUFs' (unsloth Qwen3.5-4B: 426 tensors, tied; Qwen3.6-35B-A3B: 733,
 * untied, split experts). */
static void test_hybrid_real_shapes(void **state) {
    (void)state;
    bd_synth_plan p;
    char err[256];
    bd_synth_opts o = hopts("qwen35", "4b", "q4_k_m");
    assert_int_equal(bd_synth_n_vocab(&o, 151936), 248320);
    if (!bd_synth_plan_make(&o, 248320, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.n_tensors, 426);
    assert_shape(&p, "blk.0.attn_qkv.weight", 2560, 2 * 2048 + 4096, 1, 2);
    assert_shape(&p, "blk.3.attn_q.weight", 2560, 2 * 256 * 16, 1, 2);
    assert_shape(&p, "blk.0.ffn_up.weight", 2560, 9216, 1, 2);
    assert_shape(&p, "token_embd.weight", 2560, 248320, 1, 2);
    bd_synth_plan_free(&p);
    o = hopts("qwen35", "27b", "q4_k_m");
    if (!bd_synth_plan_make(&o, 248320, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.n_tensors, 3 + 48 * 14 + 16 * 11);
    assert_shape(&p, "blk.0.attn_qkv.weight", 5120, 2 * 2048 + 6144, 1, 2); /* 16 K / 48 V heads */
    assert_shape(&p, "blk.0.ssm_alpha.weight", 5120, 48, 1, 2);
    assert_shape(&p, "blk.0.ssm_out.weight", 6144, 5120, 1, 2);
    assert_shape(&p, "blk.63.attn_q.weight", 5120, 2 * 256 * 24, 1, 2);
    assert_shape(&p, "blk.63.attn_k.weight", 5120, 256 * 4, 1, 2);
    assert_shape(&p, "blk.62.ffn_down.weight", 17408, 5120, 1, 2);
    assert_shape(&p, "output.weight", 5120, 248320, 1, 2);
    bd_synth_plan_free(&p);
    o = hopts("qwen35", "9b", "q4_k_m");
    if (!bd_synth_plan_make(&o, 248320, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.n_tensors, 3 + 24 * 14 + 8 * 11);
    assert_shape(&p, "blk.0.attn_qkv.weight", 4096, 2 * 2048 + 4096, 1, 2);
    bd_synth_plan_free(&p);
    o = hopts("qwen35", "0.8b", "q4_k_m");
    if (!bd_synth_plan_make(&o, 248320, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.n_tensors, 2 + 18 * 14 + 6 * 11);
    bd_synth_plan_free(&p);
    o = hopts("qwen35moe", "35b-a3b", "q4_k_m");
    if (!bd_synth_plan_make(&o, 248320, &p, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(p.n_tensors, 733);
    assert_shape(&p, "blk.0.ffn_gate_exps.weight", 2048, 512, 256, 3);
    assert_shape(&p, "blk.0.ffn_down_exps.weight", 512, 2048, 256, 3);
    assert_shape(&p, "blk.0.ffn_gate_inp.weight", 2048, 256, 1, 2);
    assert_shape(&p, "blk.0.ffn_up_shexp.weight", 2048, 512, 1, 2);
    assert_shape(&p, "blk.3.attn_q.weight", 2048, 2 * 256 * 16, 1, 2);
    assert_shape(&p, "blk.3.attn_v.weight", 2048, 256 * 2, 1, 2);
    assert_shape(&p, "blk.0.attn_qkv.weight", 2048, 2 * 2048 + 4096, 1, 2);
    /* 256 experts: no 8-expert rule; the attn_v-like counter gives Q6_K to
     * use_more_bits(i, 40): i < 5, i >= 35, (i - 5) % 3 == 2 */
    assert_type(&p, "blk.0.attn_qkv.weight", BD_TYPE_Q6_K);
    assert_type(&p, "blk.5.attn_qkv.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.7.attn_v.weight", BD_TYPE_Q6_K);
    assert_type(&p, "blk.3.attn_k.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.3.attn_output.weight", BD_TYPE_Q4_K);
    assert_type(&p, "blk.0.ffn_down_exps.weight", BD_TYPE_Q6_K);
    assert_type(&p, "blk.6.ffn_down_exps.weight", BD_TYPE_Q4_K);
    bd_synth_plan_free(&p);
}

/* The UD-style mix puts every type of the recipe in one small file. */
static void test_hybrid_ud_mix(void **state) {
    (void)state;
    const char *archs[] = {"qwen35", "qwen35moe"};
    for (int a = 0; a < 2; a++) {
        bd_synth_opts o = hopts(archs[a], "tiny", "ud-q4_k_m");
        bd_synth_plan p;
        char err[256];
        if (!bd_synth_plan_make(&o, 512, &p, err, sizeof err)) fail_msg("%s", err);
        bool seen[BD_TYPE_COUNT] = {0};
        for (int i = 0; i < p.n_tensors; i++) seen[p.tensors[i].type] = true;
        const uint32_t want[] = {BD_TYPE_IQ4_XS, BD_TYPE_Q4_K, BD_TYPE_Q5_K, BD_TYPE_Q6_K,
                                 BD_TYPE_Q8_0, BD_TYPE_BF16, BD_TYPE_F32};
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            if (!seen[want[k]]) fail_msg("%s ud-q4_k_m has no %s tensor", archs[a], bd_type_name(want[k]));
        assert_type(&p, "blk.0.ssm_alpha.weight", BD_TYPE_Q8_0);
        assert_type(&p, "blk.0.ssm_beta.weight", BD_TYPE_Q8_0);
        assert_type(&p, "blk.0.ssm_out.weight", BD_TYPE_Q8_0);
        assert_type(&p, "token_embd.weight", BD_TYPE_Q8_0); /* tied: the output's type */
        assert_type(&p, "blk.0.ssm_conv1d.weight", BD_TYPE_F32);
        if (a == 1) {
            assert_type(&p, "blk.0.ffn_down_exps.weight", BD_TYPE_Q5_K);
            assert_type(&p, "blk.0.ffn_gate_exps.weight", BD_TYPE_Q4_K);
        }
        bd_synth_plan_free(&p);
    }
}

/* Write a qwen35 file with the Qwen3 vocabulary padded by 4 tokens, one MTP
 * block and an explicit schedule; read the metadata and data back. */
static void test_hybrid_write_read_back(void **state) {
    (void)state;
    char vocab[512], path[256], err[512];
    snprintf(vocab, sizeof vocab, "%s/fixtures/qwen3-tokenizer/qwen3-vocab.gguf", shared_dir());
    snprintf(path, sizeof path, "/tmp/bd_test_synth_h_%d.gguf", (int)getpid());
    bd_synth_opts o = hopts("qwen35", "tiny", "q8_0");
    o.vocab_path = vocab;
    o.n_threads = 2;
    o.n_vocab = 151940;
    o.n_mtp = 1;
    o.recurrent = "1,0,1,1";
    if (!bd_synth_write(&o, path, err, sizeof err)) fail_msg("%s", err);
    bd_gguf_file *f = bd_gguf_open(path, err, sizeof err);
    if (!f) fail_msg("%s", err);
    uint32_t u;
    char s[64];
    assert_true(bd_gguf_get_strz(f, "general.architecture", s, sizeof s));
    assert_string_equal(s, "qwen35");
    assert_true(bd_gguf_get_u32(f, "qwen35.block_count", &u) && u == 5);
    assert_true(bd_gguf_get_u32(f, "qwen35.nextn_predict_layers", &u) && u == 1);
    assert_true(bd_gguf_get_u32(f, "qwen35.ssm.state_size", &u) && u == 64);
    assert_true(bd_gguf_get_u32(f, "qwen35.ssm.group_count", &u) && u == 2);
    assert_true(bd_gguf_get_u32(f, "qwen35.ssm.time_step_rank", &u) && u == 4);
    assert_true(bd_gguf_get_u32(f, "qwen35.ssm.inner_size", &u) && u == 256);
    assert_true(bd_gguf_get_u32(f, "qwen35.ssm.conv_kernel", &u) && u == 4);
    assert_true(bd_gguf_get_u32(f, "qwen35.rope.dimension_count", &u) && u == 16);
    assert_true(bd_gguf_get_u32(f, "qwen35.attention.key_length", &u) && u == 64);
    assert_true(bd_gguf_get_u32(f, "qwen35.full_attention_interval", &u) && u == 4);
    float fv;
    assert_true(bd_gguf_get_f32(f, "qwen35.rope.freq_base", &fv) && fv == 1e7f);
    const bd_gguf_kv *sec = bd_gguf_find(f, "qwen35.rope.dimension_sections");
    assert_non_null(sec);
    assert_int_equal(sec->arr_type, GGUF_VTYPE_INT32);
    assert_int_equal(sec->arr_count, 4);
    int64_t iv, sum = 0;
    for (int i = 0; i < 4; i++) assert_true(bd_gguf_arr_i64(sec, i, &iv)), sum += iv;
    assert_int_equal(sum, 8); /* n_rot / 2 */
    const bd_gguf_kv *rec = bd_gguf_find(f, "qwen35.attention.recurrent_layers");
    assert_non_null(rec);
    assert_int_equal(rec->arr_type, GGUF_VTYPE_BOOL);
    assert_int_equal(rec->arr_count, 5); /* block_count entries, the MTP block 0 */
    const uint8_t want_rec[5] = {1, 0, 1, 1, 0};
    assert_memory_equal(rec->data, want_rec, 5);
    assert_true(bd_gguf_get_strz(f, "tokenizer.ggml.pre", s, sizeof s));
    assert_string_equal(s, "qwen35");
    const bd_gguf_kv *tok = bd_gguf_find(f, "tokenizer.ggml.tokens");
    const bd_gguf_kv *typ = bd_gguf_find(f, "tokenizer.ggml.token_type");
    assert_int_equal(tok->arr_count, 151940);
    assert_int_equal(typ->arr_count, 151940);
    const char *ts;
    uint64_t tl;
    assert_true(bd_gguf_arr_str(tok, 151645, &ts, &tl));
    assert_true(tl == 10 && !memcmp(ts, "<|im_end|>", 10)); /* original tokens kept */
    assert_true(bd_gguf_arr_str(tok, 151939, &ts, &tl));
    assert_true(tl == 11 && !memcmp(ts, "[PAD151939]", 11));
    assert_true(bd_gguf_arr_i64(typ, 151939, &iv) && iv == 5);
    assert_true(bd_gguf_arr_i64(typ, 151645, &iv) && iv == 3);
    const bd_gguf_tensor *emb = bd_gguf_find_tensor(f, "token_embd.weight");
    assert_int_equal(emb->ne[1], 151940);
    assert_null(bd_gguf_find_tensor(f, "blk.1.attn_qkv.weight"));
    assert_non_null(bd_gguf_find_tensor(f, "blk.1.attn_q.weight"));
    assert_non_null(bd_gguf_find_tensor(f, "blk.4.nextn.eh_proj.weight"));
    assert_int_equal(bd_gguf_find_tensor(f, "blk.0.ssm_conv1d.weight")->type, BD_TYPE_F32);
    /* GDN decay: every ssm_a < 0; with dt_bias the per-token decay at
     * alpha = 0 is exp(softplus(dt_bias) * a): over 64 tokens the median
     * head keeps > 10 % of its state (memory beyond 64 tokens) and no head
     * keeps all of it */
    int n_heads = 0, n_keep = 0;
    for (int l = 0; l < 4; l++) {
        char nm[64];
        if (l == 1) continue;
        snprintf(nm, sizeof nm, "blk.%d.ssm_a", l);
        const bd_gguf_tensor *ta = bd_gguf_find_tensor(f, nm);
        snprintf(nm, sizeof nm, "blk.%d.ssm_dt.bias", l);
        const bd_gguf_tensor *tb = bd_gguf_find_tensor(f, nm);
        assert_non_null(ta);
        assert_non_null(tb);
        assert_int_equal(ta->ne[0], 4);
        for (int h = 0; h < 4; h++) {
            float a = ((const float *)ta->data)[h], b = ((const float *)tb->data)[h];
            assert_true(a < 0.0f);
            double keep = exp(64.0 * log1p(exp((double)b)) * (double)a);
            assert_true(keep < 0.999);
            n_keep += keep > 0.1;
            n_heads++;
        }
    }
    assert_true(2 * n_keep > n_heads);
    bd_gguf_close(f);
    unlink(path);

    /* a vocabulary smaller than the file's is refused, nothing written */
    o.n_vocab = 1000;
    assert_false(bd_synth_write(&o, path, err, sizeof err));
    assert_non_null(strstr(err, "--n-vocab"));
    assert_int_not_equal(access(path, F_OK), 0);
}

/* Drafters for hybrid targets: taps counted on the trunk (MTP blocks
 * excluded), M-RoPE sections, rope base 1e7, SWA keys. */
static void test_hybrid_drafter(void **state) {
    (void)state;
    char vocab[512], tpath[256], dpath[256], err[512];
    snprintf(vocab, sizeof vocab, "%s/fixtures/stories260K/stories260K.gguf", shared_dir());
    snprintf(tpath, sizeof tpath, "/tmp/bd_test_synth_ht_%d.gguf", (int)getpid());
    snprintf(dpath, sizeof dpath, "/tmp/bd_test_synth_hd_%d.gguf", (int)getpid());
    bd_synth_opts o = hopts("qwen35", "tiny", "q8_0");
    o.vocab_path = vocab;
    o.n_threads = 1;
    o.n_layers = 10;
    o.n_mtp = 2;
    o.constant_output = true;
    if (!bd_synth_write(&o, tpath, err, sizeof err)) fail_msg("%s", err);
    bd_synth_dflash_opts d = {.target_path = tpath, .accept_k = -1, .weight_type = BD_TYPE_F32,
                              .mask_id = -1, .seed = 1, .swa_window = 8, .swa_pattern = "1,1,1,1,0"};
    if (!bd_synth_dflash_write(&d, dpath, err, sizeof err)) fail_msg("%s", err);
    bd_gguf_file *f = bd_gguf_open(dpath, err, sizeof err);
    if (!f) fail_msg("%s", err);
    /* taps: the reference's spread over the 10 trunk layers (not the 12
     * blocks): HF ids round(1 + i * 6 / 4) = 1, 3 (2.5 away from zero), 4,
     * 6 (5.5), 7; +1 in GGUF */
    const bd_gguf_kv *taps = bd_gguf_find(f, "dflash.target_layers");
    assert_non_null(taps);
    assert_int_equal(taps->arr_count, 5);
    const int64_t want[5] = {2, 4, 5, 7, 8};
    for (int i = 0; i < 5; i++) {
        int64_t t;
        assert_true(bd_gguf_arr_i64(taps, i, &t));
        assert_int_equal(t, want[i]);
    }
    const bd_gguf_kv *sec = bd_gguf_find(f, "dflash.rope.dimension_sections");
    assert_non_null(sec);
    int64_t s0, s1;
    uint32_t u;
    float fv;
    assert_true(bd_gguf_get_u32(f, "dflash.attention.key_length", &u));
    assert_true(bd_gguf_arr_i64(sec, 0, &s0) && bd_gguf_arr_i64(sec, 1, &s1));
    assert_true(s0 == (int64_t)u / 2 && s1 == 0);
    assert_true(bd_gguf_get_f32(f, "dflash.rope.freq_base", &fv) && fv == 1e7f);
    assert_true(bd_gguf_get_u32(f, "dflash.attention.sliding_window", &u) && u == 8);
    const bd_gguf_kv *pat = bd_gguf_find(f, "dflash.attention.sliding_window_pattern");
    assert_non_null(pat);
    assert_int_equal(pat->arr_type, GGUF_VTYPE_BOOL);
    const uint8_t want_pat[5] = {1, 1, 1, 1, 0};
    assert_memory_equal(pat->data, want_pat, 5);
    assert_true(bd_gguf_get_u32(f, "tokenizer.ggml.mask_token_id", &u) && u == 511); /* no 248070 here */
    bd_gguf_close(f);
    /* constructed drafters: the generator's own argmax check against the
     * constant-output target passes */
    d.constructed = true;
    d.accept_k = 3;
    d.swa_window = 0;
    d.swa_pattern = NULL;
    if (!bd_synth_dflash_write(&d, dpath, err, sizeof err)) fail_msg("%s", err);
    /* a pattern of the wrong length is refused */
    d.swa_window = 8;
    d.swa_pattern = "1,1,0";
    assert_false(bd_synth_dflash_write(&d, dpath, err, sizeof err));
    assert_non_null(strstr(err, "--swa-pattern"));
    unlink(tpath);
    unlink(dpath);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_use_more_bits_36),
        cmocka_unit_test(test_plan_4b_q4_k_m),
        cmocka_unit_test(test_plan_width_fallback),
        cmocka_unit_test(test_plan_mix_and_errors),
        cmocka_unit_test(test_row_values),
        cmocka_unit_test(test_write_read_back),
        cmocka_unit_test(test_hybrid_plan_tiny),
        cmocka_unit_test(test_hybrid_q4_k_m_tiny),
        cmocka_unit_test(test_hybrid_moe_plan),
        cmocka_unit_test(test_hybrid_schedule),
        cmocka_unit_test(test_hybrid_real_shapes),
        cmocka_unit_test(test_qwen3moe_plan),
        cmocka_unit_test(test_hybrid_ud_mix),
        cmocka_unit_test(test_hybrid_write_read_back),
        cmocka_unit_test(test_hybrid_drafter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
