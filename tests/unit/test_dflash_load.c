/*
 * test_dflash_load.c - drafter loading and pairing: every refused drafter
 * or pairing gets its own clear message, and the accepted optional keys
 * work.
 *
 * Variants are built from the real stories260K drafter by copying its
 * metadata and tensors through the GGUF writer with one change each.
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

#include "blockdraft.h"
#include "gguf/bd_gguf.h"
#include "model/pairing.h"
#include "tensor/tensor.h"

static char g_target[1024], g_draft[1024], g_dir[256];

typedef struct {
    const char *drop_key;      /* key left out */
    const char *set_str_key;   /* string key set to set_str */
    const char *set_str;
    const char *set_u32_key;   /* u32 key set to set_u32 */
    uint32_t set_u32;
    const char *set_bool_key;
    bool set_bool;
    const char *arr_key;       /* i32 array key set to arr */
    int32_t arr[4];
    int n_arr;
    const char *bool_arr_key;  /* bool array key set to bools */
    bool bools[8];
    int n_bools;
    const char *extra_tensor;  /* an extra 1-D F32 tensor of n_embd */
    int bad_token;             /* >= 0: change this token's text */
} variant;

static void write_variant(const variant *v, const char *path) {
    char err[256];
    bd_gguf_file *f = bd_gguf_open(g_draft, err, sizeof err);
    assert_non_null(f);
    bd_gguf_writer *w = bd_gguf_writer_create();
    for (int64_t i = 0; i < bd_gguf_kv_count(f); i++) {
        const bd_gguf_kv *kv = bd_gguf_kv_at(f, i);
        const char *k = kv->key;
        if ((v->drop_key && !strcmp(k, v->drop_key)) || (v->set_str_key && !strcmp(k, v->set_str_key)) ||
            (v->set_u32_key && !strcmp(k, v->set_u32_key)) || (v->arr_key && !strcmp(k, v->arr_key)))
            continue;
        if (v->bad_token >= 0 && !strcmp(k, "tokenizer.ggml.tokens")) {
            const char **toks = calloc(kv->arr_count, sizeof *toks);
            char **own = calloc(kv->arr_count, sizeof *own);
            for (uint64_t t = 0; t < kv->arr_count; t++) {
                const char *s;
                uint64_t len;
                assert_true(bd_gguf_arr_str(kv, t, &s, &len));
                own[t] = strndup(s, len);
                toks[t] = own[t];
            }
            toks[v->bad_token] = "<blockdraft-different>";
            assert_true(bd_gguf_writer_set_arr_str(w, k, toks, kv->arr_count));
            for (uint64_t t = 0; t < kv->arr_count; t++) free(own[t]);
            free(own);
            free(toks);
            continue;
        }
        assert_true(bd_gguf_writer_copy_kv(w, kv));
    }
    if (v->set_str_key) assert_true(bd_gguf_writer_set_str(w, v->set_str_key, v->set_str));
    if (v->set_u32_key) assert_true(bd_gguf_writer_set_u32(w, v->set_u32_key, v->set_u32));
    if (v->set_bool_key) assert_true(bd_gguf_writer_set_bool(w, v->set_bool_key, v->set_bool));
    if (v->arr_key) assert_true(bd_gguf_writer_set_arr(w, v->arr_key, GGUF_VTYPE_INT32, v->arr, (uint64_t)v->n_arr));
    if (v->bool_arr_key) {
        uint8_t b[8];
        for (int i = 0; i < v->n_bools; i++) b[i] = v->bools[i];
        assert_true(bd_gguf_writer_set_arr(w, v->bool_arr_key, GGUF_VTYPE_BOOL, b, (uint64_t)v->n_bools));
    }
    for (int64_t i = 0; i < bd_gguf_tensor_count(f); i++) {
        const bd_gguf_tensor *t = bd_gguf_tensor_at(f, i);
        assert_true(bd_gguf_writer_add_tensor_ref(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes));
    }
    static float ones[64];
    for (int i = 0; i < 64; i++) ones[i] = 1.0f;
    if (v->extra_tensor) {
        uint64_t ne[1] = {64};
        assert_true(bd_gguf_writer_add_tensor(w, v->extra_tensor, BD_TYPE_F32, 1, ne, ones, sizeof ones));
    }
    assert_true(bd_gguf_writer_write_file(w, path, err, sizeof err));
    bd_gguf_writer_free(w);
    bd_gguf_close(f);
}

/* Try to load the variant and attach it to the stories target. Returns
 * true if everything works; else err holds the first message. */
static bool try_pair(const char *draft_path, char *err, size_t errlen) {
    bd_model *t = bd_model_open(g_target, err, errlen);
    assert_non_null(t);
    bd_model *d = bd_model_open(draft_path, err, errlen);
    bool ok = false;
    if (d) {
        int32_t taps[16];
        bd_session_params sp = bd_session_default_params();
        sp.n_ctx = 128;
        sp.n_threads = 1;
        sp.n_tap = bd_dflash_tap_layers(d, taps, 16);
        sp.tap_layers = taps;
        bd_session *s = bd_session_create(t, &sp, err, errlen);
        if (s) {
            bd_spec_params p = bd_spec_default_params();
            p.type = BD_SPEC_DRAFT_DFLASH;
            bd_spec *x = bd_spec_create(s, d, &p, NULL, 0, err, errlen);
            if (x) {
                int32_t prompt[8];
                int np = bd_tokenize(t, "Once upon a time", 16, true, false, prompt, 8);
                bd_gen_params gp = {.n_predict = 20, .sampling = bd_sampler_default_params()};
                gp.sampling.temperature = 0;
                bd_gen_stats st;
                ok = bd_spec_generate(x, prompt, np, &gp, NULL, NULL, &st, err, errlen);
                bd_spec_free(x);
            }
            bd_session_free(s);
        }
        bd_model_free(d);
    }
    bd_model_free(t);
    return ok;
}

static void expect_refused(const variant *v, const char *name, const char *const *needles) {
    char path[512], err[1024];
    snprintf(path, sizeof path, "%s/%s.gguf", g_dir, name);
    write_variant(v, path);
    bool ok = try_pair(path, err, sizeof err);
    printf("%-16s -> %s\n", name, ok ? "(accepted)" : err);
    assert_false(ok);
    for (const char *const *n = needles; *n; n++)
        if (!strstr(err, *n)) fail_msg("message for %s lacks '%s': %s", name, *n, err);
    unlink(path);
}

static void original_works(void **st) {
    (void)st;
    char err[512];
    assert_true(try_pair(g_draft, err, sizeof err));
}

static void fork_schema(void **st) {
    (void)st;
    variant v = {.set_str_key = "general.architecture", .set_str = "dflash-draft", .bad_token = -1};
    expect_refused(&v, "fork", (const char *[]){"dflash-draft", "upstream", NULL});
}

static void pre_merge_key(void **st) {
    (void)st;
    variant v = {.arr_key = "dflash.target_layer_ids", .arr = {1, 3}, .n_arr = 2, .drop_key = "dflash.target_layers",
                 .bad_token = -1};
    expect_refused(&v, "layer-ids", (const char *[]){"dflash.target_layer_ids", NULL});
}

static void missing_taps(void **st) {
    (void)st;
    variant v = {.drop_key = "dflash.target_layers", .bad_token = -1};
    expect_refused(&v, "no-taps", (const char *[]){"target_layers", NULL});
}

static void tap_out_of_range(void **st) {
    (void)st;
    variant v = {.arr_key = "dflash.target_layers", .arr = {2, 5}, .n_arr = 2, .bad_token = -1};
    expect_refused(&v, "tap-range", (const char *[]){"5", "layer", NULL});
}

static void mask_outside_vocab(void **st) {
    (void)st;
    variant v = {.set_u32_key = "tokenizer.ggml.mask_token_id", .set_u32 = 600, .bad_token = -1};
    expect_refused(&v, "mask", (const char *[]){"mask", "600", NULL});
}

static void width_mismatch(void **st) {
    (void)st;
    variant v = {.set_u32_key = "dflash.embedding_length", .set_u32 = 96, .bad_token = -1};
    expect_refused(&v, "width", (const char *[]){"96", NULL});
}

static void other_tokenizer(void **st) {
    (void)st;
    variant v = {.bad_token = 300};
    expect_refused(&v, "tokenizer", (const char *[]){"token", "300", NULL});
}

static void sliding_window_without_pattern_refused(void **st) {
    (void)st;
    variant v = {.set_u32_key = "dflash.attention.sliding_window", .set_u32 = 2048, .bad_token = -1};
    expect_refused(&v, "swa", (const char *[]){"dflash.attention.sliding_window_pattern", NULL});
}

/* Sliding-window layers (the Qwen3.6-27B drafter's schema) load and run. */
static void sliding_window_runs(void **st) {
    (void)st;
    char path[512], err[512];
    variant v = {.set_u32_key = "dflash.attention.sliding_window", .set_u32 = 4,
                 .bool_arr_key = "dflash.attention.sliding_window_pattern", .bools = {true, false}, .n_bools = 2,
                 .bad_token = -1};
    snprintf(path, sizeof path, "%s/swa-ok.gguf", g_dir);
    write_variant(&v, path);
    assert_true(try_pair(path, err, sizeof err));
    unlink(path);
}

/* The header-only pairing check (what the gallery runs at install) and
 * the loader (what `run` does) must agree on every drafter: a drafter
 * marked installed must load. Before the one drafter schema they applied
 * different limits (block size 256 vs 64, first tap >= 1 vs >= 0). */
static void pairing_agrees_with_loader(void **st) {
    (void)st;
    static const struct {
        const char *name;
        variant v;
        bool loads;
    } cases[] = {
        {"block100", {.set_u32_key = "dflash.block_size", .set_u32 = 100, .bad_token = -1}, false},
        {"block64", {.set_u32_key = "dflash.block_size", .set_u32 = 64, .bad_token = -1}, true},
        {"block1", {.set_u32_key = "dflash.block_size", .set_u32 = 1, .bad_token = -1}, false},
        {"tap0", {.arr_key = "dflash.target_layers", .arr = {0, 4}, .n_arr = 2, .bad_token = -1}, true},
        {"tapdup", {.arr_key = "dflash.target_layers", .arr = {2, 2}, .n_arr = 2, .bad_token = -1}, false},
        {"layers300", {.set_u32_key = "dflash.block_count", .set_u32 = 300, .bad_token = -1}, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512], err[1024], perr[1024];
        snprintf(path, sizeof path, "%s/agree-%s.gguf", g_dir, cases[i].name);
        write_variant(&cases[i].v, path);
        bd_gguf_file *t = bd_gguf_open(g_target, perr, sizeof perr), *d = bd_gguf_open(path, perr, sizeof perr);
        assert_non_null(t);
        assert_non_null(d);
        bd_pairing_report r;
        bd_pairing_report_init(&r);
        bool paired = bd_pairing_run(t, d, &r, NULL, perr, sizeof perr);
        bd_gguf_close(t);
        bd_gguf_close(d);
        bool loaded = try_pair(path, err, sizeof err);
        printf("%-10s pairing %s, loader %s\n", cases[i].name, paired ? "accepts" : perr, loaded ? "runs" : err);
        if (paired != cases[i].loads || loaded != cases[i].loads)
            fail_msg("%s: pairing %d, loader %d, expected %d", cases[i].name, paired, loaded, cases[i].loads);
        /* a refusal reads the same from both */
        if (!paired && !strstr(err, perr)) fail_msg("%s: loader says '%s', pairing '%s'", cases[i].name, err, perr);
        unlink(path);
    }
}

static void variant_tensor_refused(void **st) {
    (void)st;
    variant v = {.extra_tensor = "blk.0.attn_post_norm.weight", .bad_token = -1};
    expect_refused(&v, "post-norm", (const char *[]){"blk.0.attn_post_norm.weight", NULL});
}

static void causal_flag_supported(void **st) {
    (void)st;
    char path[512], err[512];
    variant v = {.set_bool_key = "dflash.attention.causal", .set_bool = true, .drop_key = "dflash.attention.causal",
                 .bad_token = -1};
    snprintf(path, sizeof path, "%s/causal.gguf", g_dir);
    write_variant(&v, path);
    assert_true(try_pair(path, err, sizeof err));
    unlink(path);
}

static void drafter_alone_is_refused(void **st) {
    (void)st;
    char err[512];
    bd_model *d = bd_model_open(g_draft, err, sizeof err);
    assert_non_null(d);
    bd_session *s = bd_session_create(d, NULL, err, sizeof err);
    assert_null(s);
    assert_non_null(strstr(err, "drafter"));
    bd_model_free(d);
}

int main(void) {
    const char *sh = getenv("BD_SHARED");
    if (!sh) sh = "../shared";
    snprintf(g_target, sizeof g_target, "%s/fixtures/stories260K/stories260K.gguf", sh);
    snprintf(g_draft, sizeof g_draft, "%s/fixtures/stories260K/stories260K-dflash.gguf", sh);
    snprintf(g_dir, sizeof g_dir, "/tmp/bd-dflash-load-XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(original_works),     cmocka_unit_test(fork_schema),
        cmocka_unit_test(pre_merge_key),      cmocka_unit_test(missing_taps),
        cmocka_unit_test(tap_out_of_range),   cmocka_unit_test(mask_outside_vocab),
        cmocka_unit_test(width_mismatch),     cmocka_unit_test(other_tokenizer),
        cmocka_unit_test(sliding_window_without_pattern_refused), cmocka_unit_test(sliding_window_runs),
        cmocka_unit_test(pairing_agrees_with_loader), cmocka_unit_test(variant_tensor_refused),
        cmocka_unit_test(causal_flag_supported), cmocka_unit_test(drafter_alone_is_refused),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(g_dir);
    return rc;
}
