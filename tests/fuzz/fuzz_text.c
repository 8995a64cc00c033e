/*
 * fuzz_text.c - libFuzzer target for the text formats a request or a model
 * file hands us (`make fuzz-text`): the input's first byte
 * picks one, the rest is the text.
 *
 *   0  a chat template (a GGUF's tokenizer.chat_template): parsed and
 *      rendered against a fixed conversation with tools, as the server
 *      renders it, under tight render limits so that a looping template
 *      ends in a limit error instead of a libFuzzer timeout;
 *   1  a GBNF grammar (a request's "grammar"): compiled over a small
 *      vocabulary, then a few texts matched and the token mask taken at
 *      the start state;
 *   2  a JSON schema (a request's response_format): parsed with jansson,
 *      converted to GBNF and compiled over the same vocabulary;
 *   3  a prompt (any bytes, invalid UTF-8 included) through the Qwen3 BPE
 *      vocabulary with its own pre-tokenizer and with llama3's (digit runs,
 *      whole-word tokens: the file re-written with tokenizer.ggml.pre
 *      llama-bpe at start-up) and the stories260K SentencePiece tokenizer,
 *      with and without
 *      special-token parsing, then decoded whole and streamed: the stream's
 *      bytes must equal the whole decode. The vocabularies come from
 *      $BD_FUZZ_SHARED/fixtures (make passes BD_SHARED); without it this
 *      mode does nothing, and a set but unreadable path stops the fuzzer.
 *
 * Errors are fine (each must say what it is); crashes, sanitizer
 * reports, leaks and hangs are not.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/jinja.h"
#include "chat/json_schema.h"
#include "decode/grammar.h"
#include "gguf/bd_gguf.h"
#include "tokenizer/tokenizer.h"

#define CHECK(c) \
    do { \
        if (!(c)) __builtin_trap(); \
    } while (0)

static json_t *g_globals;
static bd_grammar_vocab *g_vocab;
static bd_tokenizer *g_tok[3]; /* Qwen3 BPE, stories260K SentencePiece, Qwen3 with llama3's pre-tokenizer
                                 (NULL: mode 3 off) */

/* the conversation a template is rendered with: every message shape the
 * server passes (system, user, assistant with a tool call, tool result) */
static const char k_globals[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are terse.\"},"
    "{\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"id\": \"c1\","
    " \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"18 C\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Thanks\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"
    " \"required\": [\"city\"]}}}],"
    " \"add_generation_prompt\": true, \"enable_thinking\": false,"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static bd_grammar_vocab *make_vocab(void) {
    /* bytes, a few words, multi-byte UTF-8, and one control token (EOG) */
    static const char *const pieces[] = {"{", "}", "\"", ":", ",", "[", "]", " ", "a", "b",
                                         "0", "1", "-", ".", "e", "true", "false", "null", "\\", "\xc3\xa9",
                                         "\xe2\x82\xac", "ab", "\n", "\"a\":", NULL};
    const char *p[25], *specials[25] = {0};
    int32_t lens[25];
    for (int i = 0; i < 24; i++) {
        p[i] = pieces[i];
        lens[i] = (int32_t)strlen(pieces[i]);
    }
    p[24] = "";
    lens[24] = 0;
    specials[24] = "<eos>";
    const int32_t eog = 24;
    char err[256];
    return bd_grammar_vocab_create_from_pieces(25, p, lens, specials, &eog, 1, err, sizeof err);
}

static bd_tokenizer *load_tokenizer(const char *shared, const char *rel) {
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/fixtures/%s", shared, rel);
    bd_gguf_file *f = bd_gguf_open(path, err, sizeof err);
    if (!f) {
        fprintf(stderr, "fuzz_text: %s\n", err);
        return NULL;
    }
    bd_tokenizer *t = bd_tokenizer_load(f, err, sizeof err);
    if (!t) fprintf(stderr, "fuzz_text: %s: %s\n", path, err);
    bd_gguf_close(f);
    return t;
}

/* The Qwen3 vocabulary with tokenizer.ggml.pre = llama-bpe, through a
 * temporary copy of the file. */
static bd_tokenizer *load_llama3_variant(const char *shared) {
    char path[1024], tmp[] = "/tmp/bd-fuzz-l3vocab-XXXXXX", err[256];
    snprintf(path, sizeof path, "%s/fixtures/qwen3-tokenizer/qwen3-vocab.gguf", shared);
    bd_gguf_file *f = bd_gguf_open(path, err, sizeof err);
    bd_gguf_writer *w = bd_gguf_writer_create();
    int fd = mkstemp(tmp);
    bool ok = f && w && fd >= 0;
    for (int64_t i = 0; ok && i < bd_gguf_kv_count(f); i++) {
        const bd_gguf_kv *kv = bd_gguf_kv_at(f, i);
        ok = !strcmp(kv->key, "tokenizer.ggml.pre") ? bd_gguf_writer_set_str(w, kv->key, "llama-bpe")
                                                    : bd_gguf_writer_copy_kv(w, kv);
    }
    ok = ok && bd_gguf_writer_write_file(w, tmp, err, sizeof err);
    bd_gguf_writer_free(w);
    bd_gguf_close(f);
    if (fd >= 0) close(fd);
    bd_tokenizer *t = NULL;
    if (ok && (f = bd_gguf_open(tmp, err, sizeof err))) {
        t = bd_tokenizer_load(f, err, sizeof err);
        bd_gguf_close(f);
    }
    if (fd >= 0) unlink(tmp);
    if (!t) fprintf(stderr, "fuzz_text: the llama-bpe copy of %s: %s\n", path, err);
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    json_error_t je;
    g_globals = json_loads(k_globals, 0, &je);
    g_vocab = make_vocab();
    CHECK(g_globals && g_vocab);
    const char *shared = getenv("BD_FUZZ_SHARED");
    if (shared && *shared) {
        g_tok[0] = load_tokenizer(shared, "qwen3-tokenizer/qwen3-vocab.gguf");
        g_tok[1] = load_tokenizer(shared, "stories260K/stories260K.gguf");
        g_tok[2] = load_llama3_variant(shared);
        CHECK(g_tok[0] && g_tok[1] && g_tok[2]);
    }
    return 0;
}

static void run_tokenizer(const bd_tokenizer *t, const char *text, size_t len, bool special) {
    enum { MAX_IDS = 1 << 16 };
    static int32_t ids[MAX_IDS];
    static char whole[1 << 20], stream[1 << 20];
    int n = bd_tokenizer_encode(t, text, len, special, special, ids, MAX_IDS);
    if (n < 0) return; /* longer than MAX_IDS (the fuzzer's inputs are not) */
    for (int i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < bd_tokenizer_n_vocab(t));
    int nw = bd_tokenizer_decode(t, ids, n, true, whole, (int)sizeof whole);
    if (nw < 0) return;
    /* the streaming decoder: every push plus the flush, byte for byte the
     * whole decode (tokenizer.h's contract) */
    bd_detok d;
    bd_detok_init(&d, t, true);
    int ns = 0;
    for (int i = 0; i < n; i++) {
        int m = bd_detok_push(&d, ids[i], stream + ns, (int)sizeof stream - ns);
        CHECK(m >= 0);
        ns += m;
    }
    int m = bd_detok_flush(&d, stream + ns, (int)sizeof stream - ns);
    CHECK(m >= 0);
    ns += m;
    CHECK(ns == nw && memcmp(stream, whole, (size_t)nw) == 0);
}

static void run_template(const char *src, size_t len) {
    jinja_error e;
    memset(&e, 0, sizeof e);
    jinja_template *t = jinja_template_parse(src, len, NULL, &e);
    if (!t) {
        CHECK(e.kind != JINJA_OK);
        return;
    }
    jinja_limits lim = jinja_limits_default();
    lim.max_output = 1 << 20;
    lim.max_memory = 32u << 20;
    lim.max_iterations = 100000;
    lim.max_depth = 64;
    jinja_ctx *c = jinja_ctx_create(&lim);
    CHECK(c);
    const struct tm fixed = {.tm_year = 126, .tm_mon = 11, .tm_mday = 5};
    CHECK(jinja_ctx_define_hf_globals(c, &fixed));
    const char *k;
    json_t *v;
    json_object_foreach(g_globals, k, v) {
        jinja_value *jv = jinja_from_json(c, v);
        CHECK(jv && jinja_ctx_set(c, k, jv));
    }
    size_t n = 0;
    char *out = jinja_render(t, c, &n, &e);
    if (out) {
        CHECK(n <= lim.max_output && out[n] == '\0');
        free(out);
    } else {
        CHECK(e.kind != JINJA_OK);
    }
    jinja_ctx_free(c);
    jinja_template_free(t);
}

static void run_grammar(bd_grammar *g) {
    static const char *const texts[] = {"", "{}", "{\"a\": [1, -0.5e1, true, null]}", "ab", "\xc3\xa9\xe2\x82\xac"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) (void)bd_grammar_matches(g, texts[i], strlen(texts[i]));
    uint32_t bits[1];
    bd_grammar_state s = bd_grammar_start(g);
    (void)bd_grammar_mask(g, s, bits);
    s = bd_grammar_advance_token(g, s, 0);
    (void)bd_grammar_is_complete(g, s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    char err[512];
    err[0] = '\0';
    switch (data[0] % 4) {
    case 3:
        for (int k = 0; k < 3 && g_tok[0]; k++)
            for (int sp = 0; sp < 2; sp++) run_tokenizer(g_tok[k], text, len, sp);
        break;
    case 0: run_template(text, len); break;
    case 1: {
        bd_grammar *g = bd_grammar_create(text, len, g_vocab, err, sizeof err);
        if (!g) {
            CHECK(err[0] != '\0');
            break;
        }
        run_grammar(g);
        bd_grammar_free(g);
        break;
    }
    default: {
        json_error_t je;
        json_t *schema = json_loadb(text, len, JSON_DECODE_ANY, &je);
        if (!schema) break;
        bd_grammar *g = json_schema_grammar(schema, g_vocab, err, sizeof err);
        if (g) {
            run_grammar(g);
            bd_grammar_free(g);
        } else {
            CHECK(err[0] != '\0');
        }
        json_decref(schema);
        break;
    }
    }
    return 0;
}
