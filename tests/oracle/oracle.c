/*
 * oracle.c - bd-oracle: llama.cpp (v0.5.0, the prebuilt CPU libraries of
 * node-llama-cpp) as an independent reference for blockdraft's tests.
 *
 * Built by tests/oracle/setup.sh against headers taken from the llama.cpp
 * source shipped with node-llama-cpp; never linked into blockdraft.
 *
 *   bd-oracle logits   -m FILE (--ids 1,2,3 | -p TEXT) [--top K] [-t N]
 *       {"ids":[...],"positions":[{"pos":i,"top":[[id,logit],...]},...]}
 *       next-token logits after every prompt position (one batch, outputs
 *       on every row), top K sorted by descending logit.
 *   bd-oracle greedy   -m FILE (--ids ... | -p TEXT) -n N [-t N]
 *       {"ids":[generated...],"gaps":[top1-top2 logit gap per step]}
 *   bd-oracle tokenize -m FILE [--no-special] [--no-add] (TEXT | --hex HEX)
 *       {"ids":[...]}
 *   bd-oracle tokenize -m FILE --batch   < lines "PARSE_SPECIAL<TAB>HEX"
 *       one {"ids":[...]} line per input line (add_special=false), so a
 *       whole case table costs one vocabulary load.
 *   bd-oracle quantize -m IN.gguf -o OUT.gguf --ftype N [--pure]
 *       llama.cpp's own quantizer (llama_model_quantize, llama_ftype N,
 *       e.g. 2 Q4_0, 3 Q4_1, 7 Q8_0, 15 Q4_K_M, 32 BF16): fixtures with
 *       trained weights quantized by the reference. Prints {"ok":true}.
 *   bd-oracle kvrow --kv TYPE --hd N -i IN.f32 -o OUT
 *       the bytes llama.cpp's KV cache of TYPE stores for each row of N
 *       floats of IN (ggml's row quantizer, the type traits'
 *       from_float_ref: what the CPU backend's from_float calls for the
 *       4- and 5-bit types, iq4_nl and bf16; its q8_0 is a SIMD twin of
 *       it that rounds ties to even where the reference rounds them away
 *       from zero). Prints {"ok":true}.
 *
 * Common options: -t THREADS (default 1), --kv f32|f16|bf16|q8_0|q4_0|q4_1|iq4_nl|q5_0|q5_1 (KV cache type,
 * default f32 so that the reference is not rounded through F16), --fa
 * (flash attention on; default off), --ctx N, --ubatch N (physical batch;
 * default: the whole prompt in one), --repack (enable ggml's CPU weight
 * repacking, off by default: the repacked AVX-512 kernels for Q4_0/Q4_1/
 * Q4_K/IQ4_NL are not numerically equivalent to ggml's plain vec_dot path,
 * which is the reference blockdraft mirrors), -v (llama.cpp logs).
 * -p TEXT is tokenized with add_special=true (BOS when the vocabulary asks
 * for it) and parse_special=true, as llama.cpp's tools do.
 * Exit status: 0 ok, 1 runtime error, 2 usage.
 */
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

#ifndef BD_ORACLE_LIBDIR
#error "BD_ORACLE_LIBDIR (the folder of the prebuilt ggml backends) must be defined"
#endif

/* ========================================================================
 * Options
 * ====================================================================== */

typedef struct opts {
    const char *mode;
    const char *model;
    const char *ids_csv;
    const char *prompt;
    const char *hex;
    const char *text;
    const char *out;
    const char *in;
    int hd;
    int ftype;
    bool pure;
    int top;
    int n_gen;
    int threads;
    int n_ctx;
    int n_ubatch;
    enum ggml_type kv_type; /* GGML_TYPE_F32 (0) unless --kv */
    bool fa;
    bool repack;
    bool verbose;
    bool parse_special;
    bool add_special;
    bool batch;
    /* llama_context_params' RoPE overrides (0 / -1: the model's) */
    int rope_scaling; /* LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED when not given */
    float rope_freq_base, rope_freq_scale;
    int yarn_orig_ctx;
} opts;

static bool g_verbose;

static void log_cb(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (g_verbose || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int usage(void) {
    fprintf(stderr,
            "usage: bd-oracle logits   -m FILE (--ids 1,2,3 | -p TEXT) [--top K] [-t N]\n"
            "       bd-oracle greedy   -m FILE (--ids ... | -p TEXT) -n N [-t N]\n"
            "       bd-oracle tokenize -m FILE [--no-special] [--no-add] (TEXT | --hex HEX | --batch)\n"
            "       bd-oracle quantize -m IN -o OUT --ftype N [--pure]\n"
            "       bd-oracle kvrow    --kv TYPE --hd N -i IN.f32 -o OUT\n"
            "options: --kv f32|f16|bf16|q8_0|q4_0|q4_1|iq4_nl|q5_0|q5_1  --fa  --ctx N  --ubatch N  --repack  -v\n"
            "         --rope-scaling none|linear|yarn  --rope-freq-scale F  --rope-freq-base F  --yarn-orig-ctx N\n");
    return 2;
}

static bool parse_opts(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->top = 10;
    o->threads = 1;
    o->parse_special = true;
    o->add_special = true;
    o->rope_scaling = LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED;
    if (argc < 2) return false;
    o->mode = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VAL() do { if (!v) return false; i++; } while (0)
        if (!strcmp(a, "-m")) { NEED_VAL(); o->model = v; }
        else if (!strcmp(a, "--ids")) { NEED_VAL(); o->ids_csv = v; }
        else if (!strcmp(a, "-p")) { NEED_VAL(); o->prompt = v; }
        else if (!strcmp(a, "--hex")) { NEED_VAL(); o->hex = v; }
        else if (!strcmp(a, "-o")) { NEED_VAL(); o->out = v; }
        else if (!strcmp(a, "-i")) { NEED_VAL(); o->in = v; }
        else if (!strcmp(a, "--hd")) { NEED_VAL(); o->hd = atoi(v); }
        else if (!strcmp(a, "--ftype")) { NEED_VAL(); o->ftype = atoi(v); }
        else if (!strcmp(a, "--pure")) o->pure = true;
        else if (!strcmp(a, "--top")) { NEED_VAL(); o->top = atoi(v); }
        else if (!strcmp(a, "-n")) { NEED_VAL(); o->n_gen = atoi(v); }
        else if (!strcmp(a, "-t")) { NEED_VAL(); o->threads = atoi(v); }
        else if (!strcmp(a, "--ctx")) { NEED_VAL(); o->n_ctx = atoi(v); }
        else if (!strcmp(a, "--ubatch")) { NEED_VAL(); o->n_ubatch = atoi(v); }
        else if (!strcmp(a, "--kv")) {
            NEED_VAL();
            /* llama.cpp's cache types (common/arg.cpp); a quantized V needs --fa */
            static const struct { const char *name; enum ggml_type type; } kv[] = {
                {"f32", GGML_TYPE_F32},   {"f16", GGML_TYPE_F16},   {"bf16", GGML_TYPE_BF16},
                {"q8_0", GGML_TYPE_Q8_0}, {"q4_0", GGML_TYPE_Q4_0}, {"q4_1", GGML_TYPE_Q4_1},
                {"iq4_nl", GGML_TYPE_IQ4_NL}, {"q5_0", GGML_TYPE_Q5_0}, {"q5_1", GGML_TYPE_Q5_1}};
            size_t j = 0;
            while (j < sizeof kv / sizeof kv[0] && strcmp(v, kv[j].name)) j++;
            if (j == sizeof kv / sizeof kv[0]) return false;
            o->kv_type = kv[j].type;
        }
        else if (!strcmp(a, "--rope-scaling")) {
            NEED_VAL();
            if (!strcmp(v, "none")) o->rope_scaling = LLAMA_ROPE_SCALING_TYPE_NONE;
            else if (!strcmp(v, "linear")) o->rope_scaling = LLAMA_ROPE_SCALING_TYPE_LINEAR;
            else if (!strcmp(v, "yarn")) o->rope_scaling = LLAMA_ROPE_SCALING_TYPE_YARN;
            else return false;
        }
        else if (!strcmp(a, "--rope-freq-scale")) { NEED_VAL(); o->rope_freq_scale = strtof(v, NULL); }
        else if (!strcmp(a, "--rope-freq-base")) { NEED_VAL(); o->rope_freq_base = strtof(v, NULL); }
        else if (!strcmp(a, "--yarn-orig-ctx")) { NEED_VAL(); o->yarn_orig_ctx = atoi(v); }
        else if (!strcmp(a, "--fa")) o->fa = true;
        else if (!strcmp(a, "--repack")) o->repack = true;
        else if (!strcmp(a, "--no-special")) o->parse_special = false;
        else if (!strcmp(a, "--no-add")) o->add_special = false;
        else if (!strcmp(a, "--batch")) o->batch = true;
        else if (!strcmp(a, "-v")) o->verbose = true;
        else if (a[0] == '-' && a[1] != '\0') return false;
        else if (!o->text) o->text = a;
        else return false;
#undef NEED_VAL
    }
    if ((!o->model && strcmp(o->mode, "kvrow")) || o->top < 1 || o->threads < 1 || o->n_gen < 0) return false;
    return true;
}

/* ========================================================================
 * Small helpers
 * ====================================================================== */

/* Parse "1,2,3" into a malloc'd array; returns count or -1. */
static int ids_parse(const char *csv, llama_token **out) {
    int cap = 16, n = 0;
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) return -1;
    const char *p = csv;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX) { free(ids); return -1; }
        if (n == cap) {
            cap *= 2;
            llama_token *t = realloc(ids, sizeof *ids * (size_t)cap);
            if (!t) { free(ids); return -1; }
            ids = t;
        }
        ids[n++] = (llama_token)v;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    *out = ids;
    return n;
}

/* Decode lowercase/uppercase hex into a malloc'd buffer; -1 on bad input. */
static long hex_decode(const char *hex, char **out) {
    size_t len = strlen(hex);
    while (len && (hex[len - 1] == '\n' || hex[len - 1] == '\r')) len--;
    if (len % 2) return -1;
    char *buf = malloc(len / 2 + 1);
    if (!buf) return -1;
    for (size_t i = 0; i < len / 2; i++) {
        unsigned v;
        if (!isxdigit((unsigned char)hex[2 * i]) || !isxdigit((unsigned char)hex[2 * i + 1]) ||
            sscanf(hex + 2 * i, "%2x", &v) != 1) {
            free(buf);
            return -1;
        }
        buf[i] = (char)v;
    }
    buf[len / 2] = '\0';
    *out = buf;
    return (long)(len / 2);
}

/* Tokenize text[0..len) into a malloc'd array; returns count or -1. */
static int tokenize(const struct llama_vocab *vocab, const char *text, int len, bool add_special,
                    bool parse_special, llama_token **out) {
    int cap = len + 8;
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) return -1;
    int n = llama_tokenize(vocab, text, len, ids, cap, add_special, parse_special);
    if (n < 0) {
        cap = -n;
        llama_token *t = realloc(ids, sizeof *ids * (size_t)cap);
        if (!t) { free(ids); return -1; }
        ids = t;
        n = llama_tokenize(vocab, text, len, ids, cap, add_special, parse_special);
        if (n < 0) { free(ids); return -1; }
    }
    *out = ids;
    return n;
}

static void print_ids(const llama_token *ids, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    putchar(']');
}

/* Index of the largest logit (lowest index on ties) and gap to the runner-up. */
static int argmax_gap(const float *logits, int n_vocab, float *gap) {
    int best = 0;
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > logits[best]) best = i;
    float second = -INFINITY;
    for (int i = 0; i < n_vocab; i++)
        if (i != best && logits[i] > second) second = logits[i];
    *gap = logits[best] - second;
    return best;
}

/* Top-k by partial selection: keeps a sorted list of k entries. */
static void print_top(const float *logits, int n_vocab, int k) {
    if (k > n_vocab) k = n_vocab;
    int *idx = malloc(sizeof *idx * (size_t)k);
    int n = 0;
    for (int i = 0; i < n_vocab; i++) {
        float v = logits[i];
        if (n == k && !(v > logits[idx[k - 1]])) continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && v > logits[idx[j - 1]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    putchar('[');
    for (int j = 0; j < n; j++) printf("%s[%d,%.9g]", j ? "," : "", idx[j], logits[idx[j]]);
    putchar(']');
    free(idx);
}

/* ========================================================================
 * Model and context
 * ====================================================================== */

static struct llama_model *model_load(const opts *o, bool vocab_only) {
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.vocab_only = vocab_only;
    mp.use_extra_bufts = o->repack;
    struct llama_model *m = llama_model_load_from_file(o->model, mp);
    if (!m) fprintf(stderr, "bd-oracle: cannot load model %s\n", o->model);
    return m;
}

static struct llama_context *context_create(const opts *o, struct llama_model *m, int n_tokens) {
    struct llama_context_params cp = llama_context_default_params();
    int n_ctx = o->n_ctx > 0 ? o->n_ctx : n_tokens;
    if (n_ctx < 256) n_ctx = 256;
    n_ctx = (n_ctx + 255) / 256 * 256;
    cp.n_ctx = (uint32_t)n_ctx;
    /* By default one ubatch holds the whole prompt; --ubatch 1 runs every
     * row as its own graph (matrix-vector products only). */
    cp.n_batch = (uint32_t)n_ctx;
    cp.n_ubatch = o->n_ubatch > 0 && o->n_ubatch < n_ctx ? (uint32_t)o->n_ubatch : (uint32_t)n_ctx;
    cp.n_seq_max = 1;
    cp.n_threads = o->threads;
    cp.n_threads_batch = o->threads;
    cp.flash_attn_type = o->fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = o->kv_type;
    cp.type_v = o->kv_type;
    cp.no_perf = true;
    cp.rope_scaling_type = o->rope_scaling;
    cp.rope_freq_base = o->rope_freq_base;
    cp.rope_freq_scale = o->rope_freq_scale;
    cp.yarn_orig_ctx = (uint32_t)o->yarn_orig_ctx;
    struct llama_context *c = llama_init_from_model(m, cp);
    if (!c) fprintf(stderr, "bd-oracle: cannot create a context (n_ctx %d)\n", n_ctx);
    return c;
}

/* The prompt from --ids or -p; returns count or -1 (message printed). */
static int prompt_ids(const opts *o, const struct llama_vocab *vocab, llama_token **ids) {
    int n;
    if (o->ids_csv) n = ids_parse(o->ids_csv, ids);
    else if (o->prompt) n = tokenize(vocab, o->prompt, (int)strlen(o->prompt), true, true, ids);
    else { fprintf(stderr, "bd-oracle: need --ids or -p\n"); return -1; }
    if (n <= 0) { fprintf(stderr, "bd-oracle: empty or invalid prompt\n"); return -1; }
    int n_vocab = llama_vocab_n_tokens(vocab);
    for (int i = 0; i < n; i++)
        if ((*ids)[i] >= n_vocab) {
            fprintf(stderr, "bd-oracle: token id %d out of range (vocab %d)\n", (*ids)[i], n_vocab);
            free(*ids);
            return -1;
        }
    return n;
}

/* Decode ids[0..n) at positions pos0.. in one batch; outputs on every row
 * when all_logits, else on the last row only. */
static bool decode_rows(struct llama_context *c, const llama_token *ids, int n, int pos0,
                        bool all_logits) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = (int8_t)(all_logits || i == n - 1);
    }
    b.n_tokens = n;
    int rc = llama_decode(c, b);
    llama_batch_free(b);
    if (rc != 0) fprintf(stderr, "bd-oracle: llama_decode failed (%d)\n", rc);
    return rc == 0;
}

/* ========================================================================
 * Modes
 * ====================================================================== */

static int mode_logits(const opts *o) {
    struct llama_model *m = model_load(o, false);
    if (!m) return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(m);
    llama_token *ids = NULL;
    int n = prompt_ids(o, vocab, &ids);
    if (n < 0) { llama_model_free(m); return 1; }
    struct llama_context *c = context_create(o, m, n);
    int rc = 1;
    if (c && decode_rows(c, ids, n, 0, true)) {
        int n_vocab = llama_vocab_n_tokens(vocab);
        printf("{\"ids\":");
        print_ids(ids, n);
        printf(",\"positions\":[");
        for (int i = 0; i < n; i++) {
            const float *lg = llama_get_logits_ith(c, i);
            if (!lg) { fprintf(stderr, "bd-oracle: no logits for row %d\n", i); goto out; }
            printf("%s{\"pos\":%d,\"top\":", i ? "," : "", i);
            print_top(lg, n_vocab, o->top);
            putchar('}');
        }
        printf("]}\n");
        rc = 0;
    }
out:
    if (c) llama_free(c);
    free(ids);
    llama_model_free(m);
    return rc;
}

static int mode_greedy(const opts *o) {
    struct llama_model *m = model_load(o, false);
    if (!m) return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(m);
    llama_token *ids = NULL;
    int n = prompt_ids(o, vocab, &ids);
    if (n < 0) { llama_model_free(m); return 1; }
    struct llama_context *c = context_create(o, m, n + o->n_gen);
    llama_token *gen = malloc(sizeof *gen * (size_t)(o->n_gen + 1));
    float *gaps = malloc(sizeof *gaps * (size_t)(o->n_gen + 1));
    int rc = 1, n_vocab = llama_vocab_n_tokens(vocab);
    if (!c || !gen || !gaps) goto out;
    /* Plain greedy: prompt in one batch, then one token per decode. */
    if (!decode_rows(c, ids, n, 0, false)) goto out;
    for (int k = 0; k < o->n_gen; k++) {
        const float *lg = llama_get_logits_ith(c, -1);
        if (!lg) goto out;
        gen[k] = argmax_gap(lg, n_vocab, &gaps[k]);
        if (k + 1 < o->n_gen && !decode_rows(c, &gen[k], 1, n + k, false)) goto out;
    }
    printf("{\"ids\":");
    print_ids(gen, o->n_gen);
    printf(",\"gaps\":[");
    for (int k = 0; k < o->n_gen; k++) printf("%s%.6g", k ? "," : "", gaps[k]);
    printf("]}\n");
    rc = 0;
out:
    if (c) llama_free(c);
    free(gen);
    free(gaps);
    free(ids);
    llama_model_free(m);
    return rc;
}

static int mode_tokenize(const opts *o) {
    struct llama_model *m = model_load(o, true);
    if (!m) return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(m);
    int rc = 0;
    if (o->batch) {
        /* stdin: "PARSE_SPECIAL\tHEX" per line; add_special=false. */
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, stdin) > 0) {
            char *tab = strchr(line, '\t');
            char *text = NULL;
            long len = tab ? hex_decode(tab + 1, &text) : -1;
            llama_token *ids = NULL;
            int n = len < 0 ? -1 : tokenize(vocab, text, (int)len, false, line[0] == '1', &ids);
            if (n < 0) {
                printf("{\"error\":\"bad input line\"}\n");
                rc = 1;
            } else {
                printf("{\"ids\":");
                print_ids(ids, n);
                printf("}\n");
            }
            free(ids);
            free(text);
        }
        free(line);
    } else {
        char *buf = NULL;
        long len;
        if (o->hex) len = hex_decode(o->hex, &buf);
        else if (o->text) { buf = strdup(o->text); len = buf ? (long)strlen(buf) : -1; }
        else { fprintf(stderr, "bd-oracle: tokenize needs TEXT or --hex\n"); llama_model_free(m); return 2; }
        llama_token *ids = NULL;
        int n = len < 0 ? -1 : tokenize(vocab, buf, (int)len, o->add_special, o->parse_special, &ids);
        if (n < 0) { fprintf(stderr, "bd-oracle: tokenize failed\n"); rc = 1; }
        else { printf("{\"ids\":"); print_ids(ids, n); printf("}\n"); }
        free(ids);
        free(buf);
    }
    llama_model_free(m);
    return rc;
}

static int mode_quantize(const opts *o) {
    if (!o->out || o->ftype <= 0) return usage();
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = o->threads;
    qp.ftype = (enum llama_ftype)o->ftype;
    qp.pure = o->pure;
    if (llama_model_quantize(o->model, o->out, &qp) != 0) {
        fprintf(stderr, "bd-oracle: quantizing %s failed\n", o->model);
        return 1;
    }
    printf("{\"ok\":true}\n");
    return 0;
}

static int mode_kvrow(const opts *o) {
    if (!o->in || !o->out || o->hd <= 0 || o->hd > 65536) return usage();
    const struct ggml_type_traits *tt = ggml_get_type_traits(o->kv_type);
    if (o->hd % tt->blck_size) {
        fprintf(stderr, "bd-oracle: rows of %d are not whole %s blocks\n", o->hd, tt->type_name);
        return 1;
    }
    const size_t rb = ggml_row_size(o->kv_type, o->hd);
    FILE *in = fopen(o->in, "rb"), *out = fopen(o->out, "wb");
    float *row = malloc((size_t)o->hd * sizeof *row);
    unsigned char *dst = malloc(rb);
    int rc = in && out && row && dst ? 0 : 1;
    size_t got;
    while (!rc && (got = fread(row, sizeof *row, (size_t)o->hd, in)) > 0) {
        if (got != (size_t)o->hd) { fprintf(stderr, "bd-oracle: %s ends inside a row\n", o->in); rc = 1; break; }
        if (o->kv_type == GGML_TYPE_F32) memcpy(dst, row, rb);
        else tt->from_float_ref(row, dst, o->hd);
        if (fwrite(dst, 1, rb, out) != rb) rc = 1;
    }
    if (in) fclose(in);
    if (out && fclose(out) != 0) rc = 1;
    free(row);
    free(dst);
    if (!rc) printf("{\"ok\":true}\n");
    else fprintf(stderr, "bd-oracle: kvrow failed\n");
    return rc;
}

int main(int argc, char **argv) {
    opts o;
    if (!parse_opts(argc, argv, &o)) return usage();
    g_verbose = o.verbose;
    llama_log_set(log_cb, NULL);
    /* BD_ORACLE_BACKENDS: a folder holding one libggml-cpu-<variant>.so
     * (build/oracle/isa-*), to run llama.cpp's kernels of one ISA level */
    const char *bdir = getenv("BD_ORACLE_BACKENDS");
    ggml_backend_load_all_from_path(bdir && *bdir ? bdir : BD_ORACLE_LIBDIR);
    llama_backend_init();
    int rc;
    if (!strcmp(o.mode, "logits")) rc = mode_logits(&o);
    else if (!strcmp(o.mode, "greedy")) rc = mode_greedy(&o);
    else if (!strcmp(o.mode, "tokenize")) rc = mode_tokenize(&o);
    else if (!strcmp(o.mode, "quantize")) rc = mode_quantize(&o);
    else if (!strcmp(o.mode, "kvrow")) rc = mode_kvrow(&o);
    else rc = usage();
    llama_backend_free();
    return rc;
}
