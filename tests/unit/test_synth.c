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

#include "gguf/bd_gguf.h"
#include "model/synth.h"
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

/* Widths that are not multiples of 256: Q4_K->Q5_0, Q6_K->Q8_0. */
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
    o.mix = "q3_k";
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_use_more_bits_36),
        cmocka_unit_test(test_plan_4b_q4_k_m),
        cmocka_unit_test(test_plan_width_fallback),
        cmocka_unit_test(test_plan_mix_and_errors),
        cmocka_unit_test(test_row_values),
        cmocka_unit_test(test_write_read_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
