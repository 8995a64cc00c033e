/*
 * test_gallery.c - gallery config/index parsing, path safety, URI mapping,
 * drafter/target pairing checks, and the shipped gallery/index.yaml
 * against the values in shared/reference/gallery-facts.md.
 *
 * `test_gallery --make-fixtures DIR` writes the bad GGUFs used by the
 * end-to-end gallery tests (a fork-schema drafter, a drafter with the
 * pre-merge key, a drafter of the wrong width, a target with an
 * architecture this build does not run) and exits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gallery/config.h"
#include "gallery/fetch.h"
#include "gallery/gallery.h"
#include "gallery/index.h"
#include "gallery/store.h"
#include "base/base.h"
#include "gguf/bd_gguf.h"
#include "model/pairing.h"

static char g_shared[PATH_MAX];
static char g_tmp[PATH_MAX];

static void shared_path(char *out, size_t n, const char *rel) {
    if (!gallery_join(out, n, g_shared, rel, "")) out[0] = 0;
}

/* ------------------------------------------------------------------------
 * Fixture GGUFs (also used by tests/e2e/gallery_*.sh)
 * ---------------------------------------------------------------------- */

enum variant { V_FORK, V_LAYER_IDS, V_WIDTH, V_TARGET_OTHER };

/* Rename `old_prefix` at the start of key into buf. */
static const char *renamed(const char *key, const char *old_prefix, const char *new_prefix,
                           char *buf, size_t n) {
    size_t l = strlen(old_prefix);
    if (strncmp(key, old_prefix, l) != 0) return key;
    snprintf(buf, n, "%s%s", new_prefix, key + l);
    return buf;
}

static uint64_t scale_dim(uint64_t d) { return d == 64 ? 96 : d == 128 ? 192 : d; }

/* Write a variant of src to dst. Returns false with a message. */
static bool make_variant(const char *src, const char *dst, enum variant v, char *err,
                         size_t errlen) {
    bd_gguf_file *f = bd_gguf_open(src, err, errlen);
    if (!f) return false;
    bd_gguf_writer *w = bd_gguf_writer_create();
    bool ok = w != NULL;
    void *zeros[64] = {0};
    int nz = 0;
    for (int64_t i = 0; ok && i < bd_gguf_kv_count(f); i++) {
        const bd_gguf_kv *kv = bd_gguf_kv_at(f, i);
        const char *k = kv->key;
        char buf[256];
        if (!strcmp(k, "general.alignment")) continue;
        if (!strcmp(k, "general.architecture")) {
            const char *arch = v == V_FORK ? "dflash-draft" : v == V_TARGET_OTHER ? "gemma3" : NULL;
            if (arch) {
                ok = bd_gguf_writer_set_str(w, k, arch);
                continue;
            }
        }
        if (!strcmp(k, "dflash.target_layers") && (v == V_FORK || v == V_LAYER_IDS)) {
            /* Pre-merge / fork files stored the HF ids: one less. */
            int32_t ids[16];
            uint64_t n = kv->arr_count < 16 ? kv->arr_count : 16;
            for (uint64_t j = 0; j < n; j++) {
                int64_t x = 0;
                bd_gguf_arr_i64(kv, j, &x);
                ids[j] = (int32_t)x - 1;
            }
            ok = bd_gguf_writer_set_arr(w,
                                     v == V_FORK ? "dflash-draft.dflash.target_layer_ids"
                                                 : "dflash.target_layer_ids",
                                     GGUF_VTYPE_INT32, ids, n);
            continue;
        }
        if (v == V_WIDTH && !strcmp(k, "dflash.embedding_length")) {
            ok = bd_gguf_writer_set_u32(w, k, 96);
            continue;
        }
        const char *nk = k;
        if (v == V_FORK) {
            if (!strcmp(k, "dflash.block_size")) nk = "dflash-draft.dflash.block_size";
            else nk = renamed(k, "dflash.", "dflash-draft.", buf, sizeof buf);
            if (!strcmp(k, "tokenizer.ggml.mask_token_id")) {
                uint32_t m = 0;
                bd_gguf_get_u32(f, k, &m);
                ok = bd_gguf_writer_set_u32(w, "dflash-draft.dflash.mask_token_id", m);
                continue;
            }
        } else if (v == V_TARGET_OTHER) {
            nk = renamed(k, "llama.", "gemma3.", buf, sizeof buf);
        }
        if (nk == k) {
            ok = bd_gguf_writer_copy_kv(w, kv);
        } else {
            /* Same encoding under a new key; strings and arrays start with
             * their length / element type before `data` (as in
             * bd_gguf_writer_copy_kv). */
            size_t head = kv->type == GGUF_VTYPE_STRING ? 8 : kv->type == GGUF_VTYPE_ARRAY ? 12 : 0;
            ok = bd_gguf_writer_set_raw(w, nk, kv->type, kv->data - head, kv->data_size);
        }
    }
    for (int64_t i = 0; ok && i < bd_gguf_tensor_count(f); i++) {
        const bd_gguf_tensor *t = bd_gguf_tensor_at(f, i);
        const char *name = t->name;
        if (v == V_FORK && !strcmp(name, "fc.weight")) name = "dflash_fc.weight";
        if (v == V_FORK && !strcmp(name, "enc.output_norm.weight"))
            name = "dflash_hidden_norm.weight";
        if (v == V_WIDTH) {
            uint64_t ne[GGUF_MAX_DIMS], count = 1;
            for (uint32_t d = 0; d < t->n_dims; d++) count *= (ne[d] = scale_dim(t->ne[d]));
            void *z = calloc(count, 4); /* the fixtures are all F32 */
            if (!z || nz == 64) {
                free(z);
                ok = false;
                break;
            }
            zeros[nz++] = z;
            ok = bd_gguf_writer_add_tensor_ref(w, name, t->type, t->n_dims, ne, z, count * 4);
        } else {
            ok = bd_gguf_writer_add_tensor_ref(w, name, t->type, t->n_dims, t->ne, t->data,
                                            t->nbytes);
        }
    }
    if (!ok) snprintf(err, errlen, "building a fixture variant failed");
    else ok = bd_gguf_writer_write_file(w, dst, err, errlen);
    bd_gguf_writer_free(w);
    for (int i = 0; i < nz; i++) free(zeros[i]);
    bd_gguf_close(f);
    return ok;
}

static bool make_fixtures(const char *dir, char *err, size_t errlen) {
    char tgt[PATH_MAX], drf[PATH_MAX], out[PATH_MAX + 64];
    shared_path(tgt, sizeof tgt, "fixtures/stories260K/stories260K.gguf");
    shared_path(drf, sizeof drf, "fixtures/stories260K/stories260K-dflash.gguf");
    static const struct {
        enum variant v;
        const char *name;
        int from_target;
    } list[] = {{V_FORK, "drafter-fork.gguf", 0},
                {V_LAYER_IDS, "drafter-layer-ids.gguf", 0},
                {V_WIDTH, "drafter-width96.gguf", 0},
                {V_TARGET_OTHER, "target-gemma3.gguf", 1}};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        snprintf(out, sizeof out, "%s/%s", dir, list[i].name);
        if (!make_variant(list[i].from_target ? tgt : drf, out, list[i].v, err, errlen))
            return false;
    }
    return true;
}

/* ------------------------------------------------------------------------
 * Config parsing
 * ---------------------------------------------------------------------- */

static const char good_config[] =
    "name: demo\n"
    "backend: llama-cpp\n"
    "parameters:\n"
    "  model: llama-cpp/models/T/t.gguf\n"
    "draft_model: llama-cpp/models/D/d.gguf\n"
    "flash_attention: \"on\"\n"
    "options:\n"
    "  - use_jinja:true\n"
    "  - spec_type:draft-dflash\n"
    "  - spec_n_max:15\n"
    "template:\n"
    "  use_tokenizer_template: true\n"
    "function:\n"
    "  automatic_tool_parsing_fallback: true\n"
    "  grammar:\n"
    "    disable: true\n"
    "known_usecases:\n"
    "  - chat\n"
    "cache_type_k: f16\n";

static void test_config_good(void **state) {
    (void)state;
    gallery_config c;
    char err[512] = "";
    assert_true(gallery_config_parse(good_config, strlen(good_config), "demo.yaml", &c, err,
                                     sizeof err));
    assert_string_equal(c.name, "demo");
    assert_string_equal(c.model, "llama-cpp/models/T/t.gguf");
    assert_string_equal(c.draft_model, "llama-cpp/models/D/d.gguf");
    assert_int_equal(c.flash_attention, 1);
    assert_int_equal(c.cache_type_k, BD_KV_F16);
    assert_int_equal(c.cache_type_v, 0); /* not given: the default */
    assert_true(c.use_jinja);
    assert_int_equal(c.spec_type, GALLERY_SPEC_DFLASH);
    assert_int_equal(c.spec_n_max, 15);
    assert_true(c.use_tokenizer_template);
    assert_true(c.grammar_disable);
    assert_true(gallery_config_uses_dflash(&c));
    /* no spec_adaptive option: the type's default, unless a flag says */
    assert_false(c.has_spec_adaptive);
    assert_true(gallery_spec_adaptive(&c, -1, BD_SPEC_DRAFT_DFLASH));
    assert_false(gallery_spec_adaptive(&c, -1, BD_SPEC_DRAFT_SIMPLE));
    assert_false(gallery_spec_adaptive(&c, 0, BD_SPEC_DRAFT_DFLASH));
    assert_true(gallery_spec_adaptive(NULL, 1, BD_SPEC_NGRAM_SIMPLE));
}

/* options spec_adaptive: true / false, over the type's default; a flag over both */
static void test_config_spec_adaptive(void **state) {
    (void)state;
    static const char *vals[] = {"spec_adaptive:false", "spec_adaptive:off", "spec_adaptive:true", "spec_adaptive"};
    for (int i = 0; i < 4; i++) {
        char text[2048];
        const char *at = strstr(good_config, "spec_n_max:15");
        assert_non_null(at);
        snprintf(text, sizeof text, "%.*s%s\n  - spec_n_max:15%s", (int)(at - good_config), good_config, vals[i],
                 at + strlen("spec_n_max:15"));
        gallery_config c;
        char err[512] = "";
        assert_true(gallery_config_parse(text, strlen(text), "demo.yaml", &c, err, sizeof err));
        bool want = i >= 2;
        assert_true(c.has_spec_adaptive);
        assert_int_equal(gallery_spec_adaptive(&c, -1, BD_SPEC_DRAFT_DFLASH), want);
        assert_int_equal(gallery_spec_adaptive(&c, -1, BD_SPEC_NGRAM_SIMPLE), want);
        assert_int_equal(gallery_spec_adaptive(&c, !want, BD_SPEC_DRAFT_DFLASH), !want);
    }
}

/* options draft_cache_type_k / _v: the drafter's cache types, through
 * gallery_config_apply into the spec parameters */
static void test_config_draft_cache(void **state) {
    (void)state;
    char text[2048];
    const char *at = strstr(good_config, "spec_n_max:15");
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*sdraft_cache_type_k:q8_0\n  - draft_cache_type_v:f16\n  - spec_n_max:15%s",
             (int)(at - good_config), good_config, at + strlen("spec_n_max:15"));
    gallery_config c;
    char err[512] = "";
    assert_true(gallery_config_parse(text, strlen(text), "demo.yaml", &c, err, sizeof err));
    bd_spec_params spp = bd_spec_default_params();
    bd_session_params sp = bd_session_default_params();
    gallery_config_apply(&c, &sp, NULL, NULL, &spp);
    assert_int_equal(spp.draft_type_k, BD_KV_Q8_0);
    assert_int_equal(spp.draft_type_v, BD_KV_F16);
    assert_int_equal(sp.type_k, BD_KV_F16); /* good_config's cache_type_k */
    assert_int_equal(sp.type_v, BD_KV_DEFAULT);
}

/* LocalAI's RoPE keys: rope_scaling (top level), parameters.rope_freq_base
 * / rope_freq_scale, into the session parameters */
static void test_config_rope(void **state) {
    (void)state;
    char text[2048];
    const char *at = strstr(good_config, "  model: ");
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*s  rope_freq_scale: 0.25\n  rope_freq_base: 500000\n%srope_scaling: yarn\n",
             (int)(at - good_config), good_config, at);
    gallery_config c;
    char err[512] = "";
    assert_true(gallery_config_parse(text, strlen(text), "demo.yaml", &c, err, sizeof err));
    bd_session_params sp = bd_session_default_params();
    gallery_config_apply(&c, &sp, NULL, NULL, NULL);
    assert_int_equal(sp.rope_scaling, BD_ROPE_SCALING_YARN);
    assert_true(sp.rope_freq_scale == 0.25f && sp.rope_freq_base == 500000.0f);
    /* not given: the file's */
    assert_true(gallery_config_parse(good_config, strlen(good_config), "demo.yaml", &c, err, sizeof err));
    sp = bd_session_default_params();
    gallery_config_apply(&c, &sp, NULL, NULL, NULL);
    assert_int_equal(sp.rope_scaling, BD_ROPE_SCALING_FILE);
    assert_true(sp.rope_freq_scale == 0.0f && sp.rope_freq_base == 0.0f);
}

/* Replace the first occurrence of `from` in good_config by `to` and expect
 * a parse error containing `want` (which includes the line number). */
static void expect_bad(const char *from, const char *to, const char *want) {
    char text[2048];
    const char *at = strstr(good_config, from);
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good_config), good_config, to,
             at + strlen(from));
    gallery_config c;
    char err[512] = "";
    bool ok = gallery_config_parse(text, strlen(text), "demo.yaml", &c, err, sizeof err);
    if (ok || !strstr(err, want)) {
        fprintf(stderr, "config:\n%s\nerror: '%s'\nwanted: '%s'\n", text, err, want);
        fail();
    }
}

static void test_config_strict(void **state) {
    (void)state;
    /* typo in an options key: LocalAI ignores it silently */
    expect_bad("spec_type:draft-dflash", "spec_typ:draft-dflash",
               "demo.yaml:9: unknown options key 'spec_typ'");
    expect_bad("backend: llama-cpp\n", "backend: llama-cpp\ncontext_sise: 4096\n",
               "demo.yaml:3: unknown key 'context_sise'");
    expect_bad("  model: llama-cpp", "  context_size: 8192\n  model: llama-cpp",
               "demo.yaml:4: 'context_size' belongs at the top level");
    expect_bad("spec_n_max:15", "spec_n_max:lots", "demo.yaml:10: option 'spec_n_max:lots'");
    expect_bad("spec_n_max:15", "spec_n_max:1:5", "value must not contain ':'");
    expect_bad("spec_n_max:15", "spec_adaptive:sometimes", "demo.yaml:10: option 'spec_adaptive:sometimes': expected true or false");
    expect_bad("spec_type:draft-dflash", "spec_type:draft-eagle3", "supports spec_type");
    expect_bad("flash_attention: \"on\"", "flash_attention: sometimes", "flash_attention must be");
    /* a cache type llama.cpp does not have either: said, not ignored */
    expect_bad("cache_type_k: f16", "cache_type_k: q3_k", "demo.yaml:19: cache_type_k 'q3_k': the KV cache types are f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1");
    expect_bad("cache_type_k: f16", "cache_type_k: f16\ncache_type_v: [f16]", "'cache_type_v' must be a string");
    expect_bad("cache_type_k: f16", "rope_scaling: longrope", "demo.yaml:19: rope_scaling must be none, linear or yarn");
    expect_bad("cache_type_k: f16", "yarn_ext_factor: 1.0", "demo.yaml:19: 'yarn_ext_factor': of the RoPE settings");
    expect_bad("  model: ", "  rope_freq_base: 0.5\n  model: ", "demo.yaml:4: 'rope_freq_base' must be 0");
    expect_bad("spec_n_max:15", "draft_cache_type_k:q4_2", "demo.yaml:10: option 'draft_cache_type_k:q4_2': the KV cache types are f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1");
    expect_bad("  use_tokenizer_template: true", "  chat: \"{{.Input}}\"",
               "Go prompt templates are not supported");
    expect_bad("    disable: true", "    disabel: true", "unknown key 'function.grammar.disabel'");
    expect_bad("known_usecases:", "backend: llama-cpp\nknown_usecases:", "duplicate key 'backend'");
    expect_bad("draft_model: llama-cpp/models/D/d.gguf", "draft_model: [a, b]",
               "'draft_model' must be a string");
}

static void test_config_paths(void **state) {
    (void)state;
    expect_bad("draft_model: llama-cpp/models/D/d.gguf", "draft_model: ../../etc/d.gguf",
               "demo.yaml:5: draft_model: '../../etc/d.gguf' contains '..'");
    expect_bad("  model: llama-cpp/models/T/t.gguf", "  model: /etc/passwd",
               "demo.yaml:4: parameters.model: '/etc/passwd' is an absolute path");
    expect_bad("draft_model: llama-cpp/models/D/d.gguf", "draft_model: a/./d.gguf",
               "contains a '.' component");
    expect_bad("draft_model: llama-cpp/models/D/d.gguf", "draft_model: llama-cpp/models/D/",
               "ends with '/'");
    char why[256];
    assert_true(gallery_relpath_check("a/b..c/d.gguf", why, sizeof why)); /* '..' inside a name is fine */
    assert_false(gallery_relpath_check("a//b", why, sizeof why));
    assert_false(gallery_name_check("../x", why, sizeof why));
    assert_false(gallery_name_check(".hidden", why, sizeof why));
    assert_true(gallery_name_check("qwen3.6-35b-a3b-dflash", why, sizeof why));
}

/* Symlinks inside the models folder must not lead outside it. */
static void test_symlink_escape(void **state) {
    (void)state;
    char models[PATH_MAX + 32], outside[PATH_MAX + 32], link[PATH_MAX + 64], p[PATH_MAX], err[512];
    snprintf(models, sizeof models, "%s/models", g_tmp);
    snprintf(outside, sizeof outside, "%s/outside", g_tmp);
    assert_true(gallery_mkdirs(models, err, sizeof err));
    assert_true(gallery_mkdirs(outside, err, sizeof err));
    assert_true(gallery_mkdirs(strcat(strcpy(link, models), "/real"), err, sizeof err));
    snprintf(link, sizeof link, "%s/evil", models);
    unlink(link);
    assert_int_equal(symlink(outside, link), 0);
    snprintf(link, sizeof link, "%s/fine", models);
    unlink(link);
    assert_int_equal(symlink("real", link), 0);
    assert_false(gallery_path_inside(models, "evil/x.gguf", p, sizeof p, err, sizeof err));
    assert_non_null(strstr(err, "outside the models folder"));
    assert_false(gallery_path_inside(models, "evil", p, sizeof p, err, sizeof err));
    assert_true(gallery_path_inside(models, "fine/x.gguf", p, sizeof p, err, sizeof err));
    assert_true(gallery_path_inside(models, "new/dir/x.gguf", p, sizeof p, err, sizeof err));
    assert_false(gallery_path_inside(models, "../outside/x.gguf", p, sizeof p, err, sizeof err));
}

/* ------------------------------------------------------------------------
 * Index parsing
 * ---------------------------------------------------------------------- */

static const char localai_index[] =
    "- &base\n"
    "  name: base-model\n"
    "  url: github:mudler/LocalAI/gallery/virtual.yaml@master\n"
    "  icon: https://example.invalid/i.png\n"
    "  last_checked: yesterday\n"
    "  tags: [llm, gguf]\n"
    "  overrides:\n"
    "    parameters:\n"
    "      model: m/q4.gguf\n"
    "  files:\n"
    "    - filename: m/q4.gguf\n"
    "      sha256: 0000000000000000000000000000000000000000000000000000000000000000\n"
    "      uri: huggingface://o/r/q4.gguf\n"
    "- !!merge <<: *base\n"
    "  name: Variant-Q8\n"
    "  overrides:\n"
    "    parameters:\n"
    "      model: m/q8.gguf\n"
    "- name: needs-base\n"
    "  url: github:mudler/LocalAI/gallery/qwen3.yaml@master\n"
    "  overrides: {parameters: {model: x.gguf}}\n"
    "- name: nothing\n";

static void test_index_localai(void **state) {
    (void)state;
    char err[512] = "";
    gallery_index *ix = gallery_index_parse(localai_index, strlen(localai_index), "idx.yaml", err,
                                            sizeof err);
    assert_non_null(ix);
    assert_int_equal(ix->n_entries, 4);
    gallery_catalog cat = {.idx = &ix, .n_idx = 1};
    const gallery_entry *v = gallery_catalog_find(&cat, "variant-q8");
    assert_non_null(v);
    assert_string_equal(v->problem, "");
    assert_true(gallery_entry_has_tag(v, "GGUF")); /* merged from the anchor */
    assert_int_equal(v->n_files, 1);
    gallery_config c;
    assert_true(gallery_config_parse_node(&ix->doc, v->overrides, true, &c, err, sizeof err));
    assert_string_equal(c.model, "m/q8.gguf"); /* the explicit key wins over the merge */
    const gallery_entry *nb = gallery_catalog_find(&cat, "needs-base");
    assert_non_null(strstr(nb->problem, "idx.yaml:20: base config url"));
    assert_non_null(strstr(gallery_catalog_find(&cat, "nothing")->problem, "installs nothing"));
    gallery_index_free(ix);

    assert_null(gallery_index_parse("name: x\n", 8, "bad.yaml", err, sizeof err));
    assert_non_null(strstr(err, "bad.yaml:1: a gallery index must be a list"));
    assert_null(gallery_index_parse("- name: [\n", 10, "syn.yaml", err, sizeof err));
    assert_non_null(strstr(err, "syn.yaml:"));
}

static void test_uri(void **state) {
    (void)state;
    fetch_opts o;
    fetch_opts_init(&o);
    snprintf(o.hf_endpoint, sizeof o.hf_endpoint, "https://huggingface.co");
    char url[1024], err[256];
    assert_true(fetch_uri_resolve("huggingface://unsloth/Qwen3-4B-GGUF/Qwen3-4B-Q4_K_M.gguf", &o,
                                  url, sizeof url, err, sizeof err));
    assert_string_equal(url, "https://huggingface.co/unsloth/Qwen3-4B-GGUF/resolve/main/Qwen3-4B-Q4_K_M.gguf");
    assert_true(fetch_uri_resolve("hf://o/r/sub/f.gguf@dev", &o, url, sizeof url, err, sizeof err));
    assert_string_equal(url, "https://huggingface.co/o/r/resolve/dev/sub/f.gguf");
    assert_true(fetch_uri_resolve("github:mudler/LocalAI/gallery/index.yaml@master", &o, url,
                                  sizeof url, err, sizeof err));
    assert_string_equal(url, "https://raw.githubusercontent.com/mudler/LocalAI/master/gallery/index.yaml");
    snprintf(o.hf_endpoint, sizeof o.hf_endpoint, "http://127.0.0.1:9");
    assert_true(fetch_uri_resolve("https://huggingface.co/o/r/resolve/main/f.gguf", &o, url,
                                  sizeof url, err, sizeof err));
    assert_string_equal(url, "http://127.0.0.1:9/o/r/resolve/main/f.gguf");
    assert_false(fetch_uri_resolve("ollama://qwen3", &o, url, sizeof url, err, sizeof err));
    assert_false(fetch_uri_resolve("huggingface://onlyowner", &o, url, sizeof url, err, sizeof err));
    assert_true(fetch_sha256_valid("F6f851777709861056efcdad3af01da38b31223a3ba26e61a4f8bf3a2195813a"));
    assert_false(fetch_sha256_valid("f6f85177770986"));
}

/* SHA-256 of the fixture against the value published in its README. */
static void test_sha256_file(void **state) {
    (void)state;
    char p[PATH_MAX], hex[65], err[256];
    uint64_t size = 0;
    shared_path(p, sizeof p, "fixtures/stories260K/stories260K-dflash.gguf");
    assert_true(fetch_sha256_file(p, hex, &size, NULL, "x", err, sizeof err));
    assert_string_equal(hex, "8b9928ced709a29bdec5720ceb72a14b25e003a92c2005c5ab9afe056ace2025");
    assert_int_equal(size, 539104);
}

/* ------------------------------------------------------------------------
 * Pairing
 * ---------------------------------------------------------------------- */

static bool pair(const char *target, const char *drafter, bd_pairing_report *r, char *err,
                 size_t errlen) {
    bd_gguf_file *t = bd_gguf_open(target, err, errlen), *d = NULL;
    assert_non_null(t);
    if (drafter) {
        d = bd_gguf_open(drafter, err, errlen);
        assert_non_null(d);
    }
    bd_pairing_report_init(r);
    bool ok = bd_pairing_run(t, d, r, NULL, err, errlen);
    bd_gguf_close(t);
    if (d) bd_gguf_close(d);
    return ok;
}

static void test_pairing(void **state) {
    (void)state;
    char tgt[PATH_MAX], drf[PATH_MAX], bad[PATH_MAX + 64], err[512];
    shared_path(tgt, sizeof tgt, "fixtures/stories260K/stories260K.gguf");
    shared_path(drf, sizeof drf, "fixtures/stories260K/stories260K-dflash.gguf");
    bd_pairing_report r;
    assert_true(pair(tgt, drf, &r, err, sizeof err));
    assert_int_equal(r.worst, BD_PAIRING_OK);
    /* values from the fixture README: taps [2,4], mask 0, width 64 */
    bd_gguf_file *d = bd_gguf_open(drf, err, sizeof err);
    bd_dflash_schema di;
    bd_pairing_report_init(&r);
    assert_true(bd_pairing_drafter_check(d, &di, &r));
    bd_gguf_close(d);
    assert_int_equal(di.n_taps, 2);
    assert_int_equal(di.target_layers[0], 2);
    assert_int_equal(di.target_layers[1], 4);
    assert_int_equal(di.block_size, 8);
    assert_int_equal(di.mask_token_id, 0);
    assert_int_equal(di.n_embd, 64);

    assert_true(make_fixtures(g_tmp, err, sizeof err));
    snprintf(bad, sizeof bad, "%s/drafter-fork.gguf", g_tmp);
    assert_false(pair(tgt, bad, &r, err, sizeof err));
    assert_non_null(strstr(err, "fork schema 'dflash-draft'"));
    snprintf(bad, sizeof bad, "%s/drafter-layer-ids.gguf", g_tmp);
    assert_false(pair(tgt, bad, &r, err, sizeof err));
    assert_non_null(strstr(err, "pre-merge key 'dflash.target_layer_ids'"));
    snprintf(bad, sizeof bad, "%s/drafter-width96.gguf", g_tmp);
    assert_false(pair(tgt, bad, &r, err, sizeof err));
    assert_non_null(strstr(err, "drafter width 96"));
    assert_non_null(strstr(err, "target's width 64"));
    snprintf(bad, sizeof bad, "%s/target-gemma3.gguf", g_tmp);
    assert_true(pair(bad, drf, &r, err, sizeof err));
    assert_int_equal(r.worst, BD_PAIRING_UNSUPPORTED);
    assert_non_null(strstr(bd_pairing_report_first(&r, BD_PAIRING_UNSUPPORTED)->detail,
                           "architecture 'gemma3' is not supported by blockdraft (supported targets: "));
    /* a drafter given as the target */
    assert_false(pair(drf, NULL, &r, err, sizeof err));
    assert_non_null(strstr(err, "is a DFlash drafter, not a target"));
}

/* ------------------------------------------------------------------------
 * The shipped gallery/index.yaml against gallery-facts.md
 * ---------------------------------------------------------------------- */

typedef struct fact_bundle {
    char name[64];
    char target[256], target_sha[80], target_uri[256];
    char drafter[256], drafter_sha[80], drafter_uri[256];
    char license[32], tags[160], urls[600];
} fact_bundle;

/* Split a markdown table row into trimmed cells (without the outer bars). */
static int md_cells(char *line, char cells[][600], int max) {
    int n = 0;
    char *p = strchr(line, '|');
    if (!p) return 0;
    p++;
    while (n < max) {
        char *q = strchr(p, '|');
        if (!q) break;
        *q = 0;
        while (*p == ' ') p++;
        size_t l = strlen(p);
        while (l && (p[l - 1] == ' ')) p[--l] = 0;
        snprintf(cells[n++], 600, "%s", p);
        p = q + 1;
    }
    return n;
}

/* Strip markdown `code` and **bold** marks. */
static void unmark(const char *in, char *out, size_t n) {
    size_t j = 0;
    for (size_t i = 0; in[i] && j + 1 < n; i++)
        if (in[i] != '`' && in[i] != '*') out[j++] = in[i];
    out[j] = 0;
}

static int parse_facts(fact_bundle *b, int max, char options[3][64], int *n_opts) {
    char path[PATH_MAX];
    shared_path(path, sizeof path, "reference/gallery-facts.md");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096], cells[8][600], tmp[600];
    int nb = 0, section = 0;
    *n_opts = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "## ", 3)) section = atoi(line + 3);
        if (line[0] != '|') continue;
        int nc = md_cells(line, cells, 8);
        if (section == 1 && nc >= 5 && cells[0][0] == '`' && strstr(cells[0], "dflash")) {
            char name[64];
            unmark(cells[0], name, sizeof name);
            int at = -1;
            for (int i = 0; i < nb; i++)
                if (!strcmp(b[i].name, name)) at = i;
            if (at < 0) {
                assert_true(nb < max);
                at = nb++;
                memset(&b[at], 0, sizeof b[at]);
                gallery_strcpy(b[at].name, sizeof b[at].name, name);
            }
            bool drafter = strstr(cells[1], "drafter") != NULL;
            unmark(cells[2], tmp, sizeof tmp);
            gallery_strcpy(drafter ? b[at].drafter : b[at].target, 256, tmp);
            unmark(cells[3], tmp, sizeof tmp);
            gallery_strcpy(drafter ? b[at].drafter_sha : b[at].target_sha, 80, tmp);
            gallery_strcpy(drafter ? b[at].drafter_uri : b[at].target_uri, 256, cells[4]);
        } else if (section == 2 && nc >= 2 && !strcmp(cells[0], "`options`")) {
            /* `use_jinja:true`, `spec_type:draft-dflash`, `spec_n_max:15` */
            char *p = cells[1];
            while ((p = strchr(p, '`')) && *n_opts < 3) {
                char *q = strchr(p + 1, '`');
                if (!q) break;
                snprintf(options[(*n_opts)++], 64, "%.*s", (int)(q - p - 1), p + 1);
                p = q + 1;
            }
        } else if (section == 3 && nc >= 6 && cells[0][0] == '`') {
            char name[64];
            unmark(cells[0], name, sizeof name);
            for (int i = 0; i < nb; i++)
                if (!strcmp(b[i].name, name)) {
                    unmark(cells[2], b[i].license, sizeof b[i].license);
                    unmark(cells[4], b[i].tags, sizeof b[i].tags);
                    gallery_strcpy(b[i].urls, sizeof b[i].urls, cells[5]);
                }
        }
    }
    fclose(f);
    return nb;
}

static const char *file_sha(const gallery_entry *e, const char *filename) {
    for (int i = 0; i < e->n_files; i++)
        if (!strcmp(e->files[i].filename, filename)) return e->files[i].sha256;
    return NULL;
}

static const char *file_uri(const gallery_entry *e, const char *filename) {
    for (int i = 0; i < e->n_files; i++)
        if (!strcmp(e->files[i].filename, filename)) return e->files[i].uri;
    return NULL;
}

/* "a, b, c" vs the entry's list, in order. */
static void same_list(const char *csv, const char *const *items, int n, const char *prefix) {
    char buf[600];
    snprintf(buf, sizeof buf, "%s", csv);
    int i = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save), i++) {
        while (*tok == ' ') tok++;
        char want[300];
        snprintf(want, sizeof want, "%s%s", prefix, tok);
        assert_true(i < n);
        assert_string_equal(items[i], want);
    }
    assert_int_equal(i, n);
}

static void check_shipped(gallery_index *ix) {
    fact_bundle facts[8];
    char options[3][64];
    int n_opts;
    int nb = parse_facts(facts, 8, options, &n_opts);
    assert_int_equal(nb, 5);
    assert_int_equal(n_opts, 3);
    assert_int_equal(ix->n_entries, 5);
    gallery_catalog cat = {.idx = &ix, .n_idx = 1};
    for (int i = 0; i < nb; i++) {
        const fact_bundle *fb = &facts[i];
        const gallery_entry *e = gallery_catalog_find(&cat, fb->name);
        assert_non_null(e);
        assert_string_equal(e->name, fb->name);
        assert_string_equal(e->problem, "");
        assert_int_equal(e->n_files, 2);
        for (int k = 0; k < e->n_files; k++) assert_true(fetch_sha256_valid(e->files[k].sha256));
        assert_string_equal(file_sha(e, fb->target), fb->target_sha);
        assert_string_equal(file_sha(e, fb->drafter), fb->drafter_sha);
        assert_string_equal(file_uri(e, fb->target), fb->target_uri);
        assert_string_equal(file_uri(e, fb->drafter), fb->drafter_uri);
        assert_string_equal(e->license, fb->license);
        same_list(fb->tags, e->tags, e->n_tags, "");
        same_list(fb->urls, e->urls, e->n_urls, "https://huggingface.co/");
        /* overrides: strict parse, the target and drafter referenced */
        gallery_config c;
        char err[512];
        if (!gallery_config_parse_node(&ix->doc, e->overrides, true, &c, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            fail();
        }
        assert_string_equal(c.model, fb->target);
        assert_string_equal(c.draft_model, fb->drafter);
        assert_int_equal(c.flash_attention, 1);
        assert_true(c.use_tokenizer_template);
        assert_true(c.tool_parsing_fallback);
        assert_true(c.grammar_disable);
        assert_int_equal(c.context_size, 0); /* "not set by any of the five" */
        assert_true(gallery_entry_has_tag(e, "dflash") && gallery_config_uses_dflash(&c));
        yaml_node_t *opts = ydoc_map_get(&ix->doc, e->overrides, "options");
        assert_int_equal(ydoc_seq_len(&ix->doc, opts), 3);
        for (int k = 0; k < 3; k++)
            assert_string_equal(ydoc_str(ydoc_seq_at(&ix->doc, opts, k)), options[k]);
        assert_string_equal(ydoc_str(ydoc_map_get(&ix->doc, e->overrides, "backend")), "llama-cpp");
    }
}

static void test_shipped_index(void **state) {
    (void)state;
    char err[512] = "";
    fetch_opts o;
    fetch_opts_init(&o);
    gallery_index *ix = gallery_index_load("gallery/index.yaml", &o, err, sizeof err);
    if (!ix) fprintf(stderr, "%s\n", err);
    assert_non_null(ix);
    check_shipped(ix);
    gallery_index_free(ix);
    /* the copy compiled into the binary is the same file */
    ix = gallery_index_builtin(err, sizeof err);
    assert_non_null(ix);
    check_shipped(ix);
    /* far below ydoc's bound on a document's mapping work (64 Mi) */
    fprintf(stderr, "gallery/index.yaml: %llu units of mapping work\n", ix->doc.work);
    assert_true(ix->doc.work < 100000);
    gallery_index_free(ix);
}

/* Merge keys: a source listed twice (or reached twice through nesting) is
 * read once -- the result is the same, the cost linear; and a document's
 * total mapping work is bounded (issue 16 item 11). */
static void test_merge_bomb(void **state) {
    (void)state;
    char err[512] = "";
    const char *twice = "- d: &a {k: 1, j: 2}\n  e: &b {<<: [*a, *a], j: 3}\n"
                        "- <<: [*b, *a, *b]\n  name: m\n  k: 0\n";
    gallery_index *ix = gallery_index_parse(twice, strlen(twice), "twice.yaml", err, sizeof err);
    assert_non_null(ix);
    yaml_node_t *e1 = ydoc_seq_at(&ix->doc, ydoc_root(&ix->doc), 1);
    ydoc_entry *kv;
    int n;
    assert_true(ydoc_map_entries(&ix->doc, e1, &kv, &n, err, sizeof err));
    assert_int_equal(n, 3); /* name, k (explicit), j (from b, which wins over a) */
    assert_string_equal(ydoc_str(ydoc_map_get(&ix->doc, e1, "k")), "0");
    assert_string_equal(ydoc_str(ydoc_map_get(&ix->doc, e1, "j")), "3");
    free(kv);
    gallery_index_free(ix);

    /* 7 levels of 20 references each: 20^7 merges without the once rule */
    bd_buf b = {0};
    bd_buf_printf(&b, "- d0: &a0 {k: v}\n");
    for (int i = 1; i <= 7; i++) {
        bd_buf_printf(&b, "  d%d: &a%d {<<: [", i, i);
        for (int r = 0; r < 20; r++) bd_buf_printf(&b, "%s*a%d", r ? ", " : "", i - 1);
        bd_buf_printf(&b, "]}\n");
    }
    bd_buf_printf(&b, "- <<: [*a7, *a7]\n  name: bomb\n");
    double t0 = bd_time_ms();
    ix = gallery_index_parse(b.p, b.n, "bomb.yaml", err, sizeof err);
    assert_non_null(ix);
    assert_string_equal(ix->entries[1].name, "bomb");
    assert_true(bd_time_ms() - t0 < 2000);
    gallery_index_free(ix);
    bd_buf_free(&b);

    /* one mapping of 20000 keys: 2e8 comparisons, past the bound: an error */
    bd_buf_printf(&b, "- name: wide\n");
    for (int i = 0; i < 20000; i++) bd_buf_printf(&b, "  k%d: %d\n", i, i);
    ix = gallery_index_parse(b.p, b.n, "wide.yaml", err, sizeof err);
    assert_non_null(ix);
    assert_non_null(strstr(ix->entries[0].problem, "too large or merge too much"));
    gallery_index_free(ix);
    bd_buf_free(&b);
}

/* ------------------------------------------------------------------------
 * Install records and removal bookkeeping (no network)
 * ---------------------------------------------------------------------- */

static void write_text(const char *path, const char *text) {
    char err[256];
    assert_true(gallery_mkdirs_parent(path, err, sizeof err));
    assert_true(gallery_write_atomic(path, text, strlen(text), err, sizeof err));
}

static void test_rm_keeps_shared(void **state) {
    (void)state;
    char models[PATH_MAX + 32], p[PATH_MAX + 128], err[512];
    snprintf(models, sizeof models, "%s/rm-models", g_tmp);
    snprintf(p, sizeof p, "%s/a.yaml", models);
    write_text(p, "name: a\nparameters:\n  model: t/shared.gguf\ndraft_model: d/a.gguf\n");
    snprintf(p, sizeof p, "%s/b.yaml", models);
    write_text(p, "name: b\nparameters:\n  model: t/shared.gguf\n");
    snprintf(p, sizeof p, "%s/t/shared.gguf", models);
    write_text(p, "T");
    snprintf(p, sizeof p, "%s/d/a.gguf", models);
    write_text(p, "D");
    gallery_installed *v;
    int n;
    assert_true(gallery_list_installed(models, &v, &n, err, sizeof err));
    assert_int_equal(n, 2);
    assert_string_equal(v[0].name, "a");
    assert_string_equal(v[0].status, "manual");
    assert_int_equal(v[0].bytes, 2);
    free(v);
    gallery_rm_result r;
    assert_true(gallery_remove(models, "a", &r, err, sizeof err));
    assert_int_equal(r.n_removed, 1);
    assert_string_equal(r.removed[0], "d/a.gguf");
    assert_int_equal(r.n_kept, 1);
    assert_string_equal(r.kept_for[0], "b");
    struct stat st;
    snprintf(p, sizeof p, "%s/t/shared.gguf", models);
    assert_int_equal(stat(p, &st), 0);
    snprintf(p, sizeof p, "%s/d", models);
    assert_int_not_equal(stat(p, &st), 0); /* emptied directory pruned */
    assert_false(gallery_remove(models, "a", &r, err, sizeof err));
    assert_non_null(strstr(err, "not installed"));
}

/* gallery_resolve_model: what `run NAME` and the server load. */
static void test_resolve(void **state) {
    (void)state;
    char models[PATH_MAX + 32], p[PATH_MAX + 128], err[1024];
    snprintf(models, sizeof models, "%s/res-models", g_tmp);
    snprintf(p, sizeof p, "%s/ok.yaml", models);
    write_text(p, "name: ok\nparameters:\n  model: t/t.gguf\ndraft_model: d/d.gguf\n");
    snprintf(p, sizeof p, "%s/t/t.gguf", models);
    write_text(p, "T");
    snprintf(p, sizeof p, "%s/d/d.gguf", models);
    write_text(p, "D");
    gallery_model m;
    /* no pull options: the models folder comes from the environment */
    setenv("BLOCKDRAFT_MODELS", models, 1);
    assert_true(gallery_resolve_model("ok", NULL, &m, err, sizeof err));
    snprintf(p, sizeof p, "%s/t/t.gguf", models);
    assert_string_equal(m.target_path, p);
    snprintf(p, sizeof p, "%s/d/d.gguf", models);
    assert_string_equal(m.draft_path, p);
    assert_true(m.has_config);

    /* spec_type none: no drafter handed to the engine */
    snprintf(p, sizeof p, "%s/nospec.yaml", models);
    write_text(p, "parameters:\n  model: t/t.gguf\ndraft_model: d/d.gguf\noptions: [spec_type:none]\n");
    assert_true(gallery_resolve_model("nospec", NULL, &m, err, sizeof err));
    assert_string_equal(m.draft_path, "");

    /* a draft_model that escapes through a symlink */
    char link[PATH_MAX + 64];
    snprintf(link, sizeof link, "%s/esc", models);
    unlink(link);
    assert_int_equal(symlink("/tmp", link), 0);
    snprintf(p, sizeof p, "%s/esc.yaml", models);
    write_text(p, "parameters:\n  model: t/t.gguf\ndraft_model: esc/d.gguf\n");
    assert_false(gallery_resolve_model("esc", NULL, &m, err, sizeof err));
    assert_non_null(strstr(err, "symlink escape"));

    /* recorded as unsupported: refused with the reason */
    gallery_state st;
    memset(&st, 0, sizeof st);
    snprintf(st.name, sizeof st.name, "ok");
    snprintf(st.status, sizeof st.status, "unsupported");
    snprintf(st.reason, sizeof st.reason, "architecture 'qwen35' (...) is not supported");
    assert_true(gallery_state_write(models, &st, err, sizeof err));
    assert_false(gallery_resolve_model("ok", NULL, &m, err, sizeof err));
    assert_non_null(strstr(err, "model 'ok' is unsupported: architecture 'qwen35'"));

    /* not installed, no pulling */
    assert_false(gallery_resolve_model("absent", NULL, &m, err, sizeof err));
    assert_non_null(strstr(err, "blockdraft pull absent"));
    /* a missing file path */
    assert_false(gallery_resolve_model("/nonexistent/x.gguf", NULL, &m, err, sizeof err));
    unsetenv("BLOCKDRAFT_MODELS");
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    const char *sh = getenv("BD_SHARED");
    snprintf(g_shared, sizeof g_shared, "%s", sh && *sh ? sh : "../shared");
    if (argc == 3 && !strcmp(argv[1], "--make-fixtures")) {
        char err[512];
        if (!make_fixtures(argv[2], err, sizeof err)) {
            fprintf(stderr, "make-fixtures: %s\n", err);
            return 1;
        }
        return 0;
    }
    snprintf(g_tmp, sizeof g_tmp, "/tmp/bd-test-gallery-XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_good),   cmocka_unit_test(test_config_strict),
        cmocka_unit_test(test_config_spec_adaptive),
        cmocka_unit_test(test_config_draft_cache),
        cmocka_unit_test(test_config_rope),
        cmocka_unit_test(test_config_paths),  cmocka_unit_test(test_symlink_escape),
        cmocka_unit_test(test_index_localai), cmocka_unit_test(test_uri),
        cmocka_unit_test(test_sha256_file),   cmocka_unit_test(test_pairing),
        cmocka_unit_test(test_shipped_index), cmocka_unit_test(test_rm_keeps_shared),
        cmocka_unit_test(test_resolve),       cmocka_unit_test(test_merge_bomb),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) rc = rc ? rc : 1;
    return rc;
}
