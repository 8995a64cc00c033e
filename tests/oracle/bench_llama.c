/*
 * bench_llama.c - bd-bench-llama: the measurements of `blockdraft bench`,
 * taken through llama.cpp (v0.5.0, the prebuilt CPU libraries of
 * node-llama-cpp), for `make bench-compare`. Never linked into blockdraft.
 *
 *   bd-bench-llama -m FILE [-p 512] [-n 128] [-t THREADS] [-r 5]
 *                  [--verify-depth 512] [--verify-max 16] [--no-verify]
 *                  [--gen-prompt TEXT] [--seed S] [--backend-dir DIR] [--kv TYPE]
 *   bd-bench-llama --which-backend [--backend-dir DIR]
 *
 * --kv TYPE: the K and V caches' type, one of llama.cpp's cache type names
 * (f16, the default as llama-bench's; f32, bf16, q8_0, q4_0, q4_1, iq4_nl,
 * q5_0, q5_1); flash attention stays auto, which turns it on where a
 * quantized V cache needs it.
 *
 * --backend-dir DIR: the only folder ggml searches for its CPU backend
 * (default: the npm package's folder, where ggml scores every
 * libggml-cpu-<variant>.so and loads the best one this CPU runs).
 * bench-compare.sh points it at a folder holding one variant, so that a
 * run uses exactly the instruction set of that variant. --which-backend
 * loads the backends, prints {"cpu_backend": the file ggml's log says it
 * loaded, "cpu_backend_file": that path with links resolved,
 * "cpu_features": ..., "cpu_backends_mapped": ...} and exits (1 when no CPU backend loaded: the folder
 * holds no variant this CPU can run).
 *
 * Prints one JSON object with the keys of `blockdraft bench --json`:
 *   pp_tps, pp_tps_sd   -p random tokens from an empty context through
 *                       llama_decode in batches of 512 (llama-bench's pp);
 *   tg_tps, tg_tps_sd   -n single-token decodes from an empty context
 *                       (llama-bench's tg);
 *   tg_gbps             (llama_model_size + KV bytes read) x tg tokens/s;
 *   verify_depth, verify_ms[n-1], verify_min_ms, verify_ratio, verify_gops:
 *                       the context is filled to depth D once, then one
 *                       llama_decode of n tokens with logits on every row is
 *                       timed for n = 1..N and llama_memory_seq_rm cuts the
 *                       cache back to D; median over max(r, 3) runs;
 *   plain               with --gen-prompt: greedy generation of -n tokens
 *                       after the prompt, tokens/s (the denominator of a
 *                       speculative speed-up measured with speculative-simple);
 *   rss_bytes           peak resident set size;
 *   cpu_backend, cpu_backend_file, cpu_features: the CPU backend loaded
 *                       (from ggml's own "loaded CPU backend from" log line);
 *   cpu_backends_mapped every libggml-cpu-*.so mapped into the process at the
 *                       end (/proc/self/maps): one name when isolation works;
 *   kv_bytes, recurrent_bytes: the KV cache and the recurrent state
 *                       (Gated DeltaNet conv + ssm; 0 for attention-only
 *                       models) as llama.cpp's log reports their sizes;
 *   recurrent_verify_bytes  recurrent/hybrid models: the state of the verify
 *                       curve's context, which keeps n_rs_seq = --verify-max
 *                       per-token snapshots so that llama_memory_seq_rm can
 *                       drop a verify batch (llama.cpp's speculative setting).
 * Context settings are llama-bench's defaults (KV cache F16 unless --kv), flash attention
 * auto, n_ubatch 512, weight repacking on, mmap on, a warm-up run first.
 * Operation counts for GOPS use llama_model_n_params (every tensor's
 * elements, the token-embedding table once) and the attention terms of
 * blockdraft bench; see BENCHMARKS.md.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/resource.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

#ifndef BD_ORACLE_LIBDIR
#error "BD_ORACLE_LIBDIR (the folder of the prebuilt ggml backends) must be defined"
#endif

#define VMAX 32

typedef struct opts {
    const char *model, *gen_prompt, *backend_dir;
    int n_prompt, n_gen, threads, reps, depth, vmax;
    bool no_verify, which_backend;
    unsigned long long seed;
    enum ggml_type kv;
} opts;

/* llama.cpp's cache type names (common/arg.cpp); false for another */
static bool kv_type_parse(const char *v, enum ggml_type *t) {
    static const struct { const char *name; enum ggml_type type; } kv[] = {
        {"f32", GGML_TYPE_F32},   {"f16", GGML_TYPE_F16},   {"bf16", GGML_TYPE_BF16},
        {"q8_0", GGML_TYPE_Q8_0}, {"q4_0", GGML_TYPE_Q4_0}, {"q4_1", GGML_TYPE_Q4_1},
        {"iq4_nl", GGML_TYPE_IQ4_NL}, {"q5_0", GGML_TYPE_Q5_0}, {"q5_1", GGML_TYPE_Q5_1}};
    for (size_t j = 0; j < sizeof kv / sizeof kv[0]; j++)
        if (!strcmp(v, kv[j].name)) {
            *t = kv[j].type;
            return true;
        }
    return false;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* What llama.cpp's log told us (read by log_quiet). */
static char g_cpu_backend[PATH_MAX];    /* "loaded CPU backend from PATH" */
static double g_kv_mib, g_recurrent_mib; /* "llama_kv_cache: size = X MiB", "llama_memory_recurrent: size = X MiB" */
static unsigned g_kv_cells;             /* "(N cells, L layers" of the KV line: L counts only */
static int g_kv_layers;                 /* the attention layers of a hybrid model */

/* Prints errors; keeps the three facts above from the info lines (one
 * message per call: ggml and llama format a line before calling back). */
static void log_quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
    const char *k = "loaded CPU backend from ", *p = strstr(text, k);
    if (p) {
        snprintf(g_cpu_backend, sizeof g_cpu_backend, "%s", p + strlen(k));
        g_cpu_backend[strcspn(g_cpu_backend, "\r\n")] = '\0';
    }
    double mib;
    unsigned cells;
    int layers;
    if ((p = strstr(text, "llama_kv_cache: size = ")) && sscanf(p + 23, "%lf MiB (%u cells, %d layers", &mib, &cells,
                                                                   &layers) == 3) {
        g_kv_mib += mib;
        g_kv_cells = cells;
        g_kv_layers += layers;
    }
    if ((p = strstr(text, "llama_memory_recurrent: size = ")) && sscanf(p + 31, "%lf", &mib) == 1)
        g_recurrent_mib += mib;
}

/* The libggml-cpu-*.so files mapped into this process now (from
 * /proc/self/maps, links resolved), space-separated: the evidence that one
 * variant and no other is in use. */
static void mapped_cpu_backends(char *buf, size_t n) {
    buf[0] = '\0';
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[PATH_MAX + 128];
    size_t used = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = strchr(line, '/');
        if (!p || !strstr(p, "/libggml-cpu-")) continue;
        p[strcspn(p, "\n")] = '\0';
        const char *base = strrchr(p, '/') + 1;
        bool seen = false; /* the same file is mapped several times (segments) */
        for (const char *q = buf; (q = strstr(q, base)); q += strlen(base))
            if ((q == buf || q[-1] == ' ') && (q[strlen(base)] == ' ' || q[strlen(base)] == '\0')) seen = true;
        if (seen) continue;
        int w = snprintf(buf + used, n - used, "%s%s", used ? " " : "", base);
        if (w < 0 || (size_t)w >= n - used) break;
        used += (size_t)w;
    }
    fclose(f);
}

/* s as a JSON string body (paths and feature names: escapes " and \). */
static void put_json_str(const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        if ((unsigned char)*s >= 0x20) putchar(*s);
    }
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* mean, sample sd, median, min of v[0..n) (sorts v) */
static void stats(double *v, int n, double *mean, double *sd, double *med, double *mn) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *mn = v[0];
}

static unsigned long long g_rng;
static llama_token rand_tok(int n_vocab) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (llama_token)((g_rng * 0x2545F4914F6CDD1DULL) % (unsigned long long)n_vocab);
}

/* Decode n tokens at positions pos.. of sequence 0; logits on every row when
 * all, else on the last. Waits for the result. */
static bool decode(struct llama_context *c, struct llama_batch *b, const llama_token *tok, int n, int pos, bool all) {
    b->n_tokens = n;
    for (int i = 0; i < n; i++) {
        b->token[i] = tok[i];
        b->pos[i] = pos + i;
        b->n_seq_id[i] = 1;
        b->seq_id[i][0] = 0;
        b->logits[i] = all || i == n - 1;
    }
    int rc = llama_decode(c, *b);
    llama_synchronize(c);
    if (rc) fprintf(stderr, "bd-bench-llama: llama_decode failed (%d)\n", rc);
    return rc == 0;
}

static int meta_int(const struct llama_model *m, const char *arch, const char *key, int dflt) {
    char name[128], buf[64];
    snprintf(name, sizeof name, "%s.%s", arch, key);
    if (llama_model_meta_val_str(m, name, buf, sizeof buf) < 0) return dflt;
    return atoi(buf);
}

/* The CPU backend's feature list ("AVX512 = 1, AMX_INT8 = 1, ...") into
 * buf: which of the prebuilt CPU variants ggml picked on this machine. */
static void cpu_features(char *buf, size_t n) {
    buf[0] = '\0';
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!dev) return;
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_get_features_t get =
        (ggml_backend_get_features_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features");
    if (!get) return;
    size_t used = 0;
    for (struct ggml_backend_feature *f = get(reg); f && f->name && used + 1 < n; f++) {
        int w = snprintf(buf + used, n - used, "%s%s", used ? " " : "", f->name);
        if (w < 0) break;
        used += (size_t)w;
    }
    if (used >= n) buf[n - 1] = '\0';
}

int main(int argc, char **argv) {
    opts o = {.n_prompt = 512, .n_gen = 128, .threads = 2, .reps = 5, .depth = 512, .vmax = 16, .seed = 1,
              .backend_dir = BD_ORACLE_LIBDIR, .kv = GGML_TYPE_F16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-verify")) { o.no_verify = true; continue; }
        if (!strcmp(a, "--which-backend")) { o.which_backend = true; continue; }
        if (!v) { fprintf(stderr, "bd-bench-llama: %s needs a value\n", a); return 2; }
        i++;
        if (!strcmp(a, "-m")) o.model = v;
        else if (!strcmp(a, "-p")) o.n_prompt = atoi(v);
        else if (!strcmp(a, "-n")) o.n_gen = atoi(v);
        else if (!strcmp(a, "-t")) o.threads = atoi(v);
        else if (!strcmp(a, "-r")) o.reps = atoi(v);
        else if (!strcmp(a, "--verify-depth")) o.depth = atoi(v);
        else if (!strcmp(a, "--verify-max")) o.vmax = atoi(v);
        else if (!strcmp(a, "--gen-prompt")) o.gen_prompt = v;
        else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--backend-dir")) o.backend_dir = v;
        else if (!strcmp(a, "--kv")) {
            if (!kv_type_parse(v, &o.kv)) { fprintf(stderr, "bd-bench-llama: unknown cache type %s\n", v); return 2; }
        }
        else { fprintf(stderr, "bd-bench-llama: unknown option %s\n", a); return 2; }
    }
    if (o.which_backend) {
        llama_log_set(log_quiet, NULL);
        ggml_backend_load_all_from_path(o.backend_dir);
        char feats[512], real[PATH_MAX];
        cpu_features(feats, sizeof feats);
        if (!g_cpu_backend[0] || !realpath(g_cpu_backend, real)) real[0] = '\0';
        printf("{\"cpu_backend\":\"");
        put_json_str(g_cpu_backend);
        printf("\",\"cpu_backend_file\":\"");
        put_json_str(real);
        printf("\",\"cpu_features\":\"");
        put_json_str(feats);
        char mapped[1024];
        mapped_cpu_backends(mapped, sizeof mapped);
        printf("\",\"cpu_backends_mapped\":\"");
        put_json_str(mapped);
        printf("\"}\n");
        if (!g_cpu_backend[0]) fprintf(stderr, "bd-bench-llama: no CPU backend loaded from %s\n", o.backend_dir);
        return g_cpu_backend[0] ? 0 : 1;
    }
    if (!o.model || o.reps < 1 || o.threads < 1 || o.n_prompt < 0 || o.n_gen < 0 || o.depth < 0 || o.vmax < 1 ||
        o.vmax > VMAX) {
        fprintf(stderr, "usage: bd-bench-llama -m FILE [-p N] [-n N] [-t N] [-r N] [--verify-depth D] "
                        "[--verify-max N<=%d] [--no-verify] [--gen-prompt TEXT] [--backend-dir DIR] [--kv TYPE]\n"
                        "       bd-bench-llama --which-backend [--backend-dir DIR]\n", VMAX);
        return 2;
    }
    if (o.no_verify) o.vmax = 0;
    g_rng = o.seed * 0x9E3779B97F4A7C15ULL + 1;

    llama_log_set(log_quiet, NULL);
    ggml_backend_load_all_from_path(o.backend_dir);
    if (!g_cpu_backend[0]) {
        fprintf(stderr, "bd-bench-llama: no CPU backend loaded from %s (no variant there runs on this CPU)\n",
                o.backend_dir);
        return 1;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *m = llama_model_load_from_file(o.model, mp);
    if (!m) { fprintf(stderr, "bd-bench-llama: cannot load %s\n", o.model); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(m);
    int n_vocab = llama_vocab_n_tokens(vocab);

    char arch[64] = "llama";
    llama_model_meta_val_str(m, "general.architecture", arch, sizeof arch);
    int n_layer = llama_model_n_layer(m), n_head = llama_model_n_head(m), n_head_kv = llama_model_n_head_kv(m);
    int hd = meta_int(m, arch, "attention.key_length", llama_model_n_embd(m) / n_head);
    int hd_v = meta_int(m, arch, "attention.value_length", hd);
    double kv_pos_bytes = (double)n_layer * n_head_kv * (hd + hd_v) * 2.0; /* F16 */
    double model_bytes = (double)llama_model_size(m), n_params = (double)llama_model_n_params(m);

    int n_ctx = o.n_prompt;
    if (o.n_gen > n_ctx) n_ctx = o.n_gen;
    if (o.vmax && o.depth + o.vmax > n_ctx) n_ctx = o.depth + o.vmax;
    int gen_ctx = 0;
    llama_token *gen_ids = NULL;
    int n_gen_prompt = 0;
    if (o.gen_prompt) {
        int len = (int)strlen(o.gen_prompt);
        gen_ids = malloc(sizeof *gen_ids * (size_t)(len + 8));
        n_gen_prompt = llama_tokenize(vocab, o.gen_prompt, len, gen_ids, len + 8, true, true);
        if (n_gen_prompt <= 0) { fprintf(stderr, "bd-bench-llama: cannot tokenize the prompt\n"); return 1; }
        gen_ctx = n_gen_prompt + o.n_gen + 1;
        if (gen_ctx > n_ctx) n_ctx = gen_ctx;
    }
    n_ctx = (n_ctx + 255) / 256 * 256;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = 2048 < n_ctx ? 2048 : (uint32_t)n_ctx;
    cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_threads = o.threads;
    cp.n_threads_batch = o.threads;
    cp.type_k = o.kv;
    cp.type_v = o.kv;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    cp.no_perf = true;
    struct llama_context *c = llama_init_from_model(m, cp);
    if (!c) { fprintf(stderr, "bd-bench-llama: cannot create a context\n"); return 1; }
    /* Hybrid models keep a KV cache only in their attention layers: take the
     * bytes per position and the layer count from llama.cpp's own report. */
    int n_attn_layer = n_layer;
    if (g_kv_mib > 0 && g_kv_cells > 0) {
        kv_pos_bytes = g_kv_mib * 1048576.0 / g_kv_cells;
        if (g_kv_layers > 0) n_attn_layer = g_kv_layers;
    }
    double recurrent_bytes = g_recurrent_mib * 1048576.0;
    llama_memory_t mem = llama_get_memory(c);
    int bmax = (int)cp.n_batch;
    struct llama_batch b = llama_batch_init(bmax, 0, 1);
    llama_token *tok = malloc(sizeof *tok * (size_t)(n_ctx + 1));
    double *v = malloc(sizeof *v * (size_t)(o.reps > 3 ? o.reps : 3));
    if (!tok || !v) return 1;
    double pp_mean = 0, pp_sd = 0, tg_mean = 0, tg_sd = 0, med, mn;

    /* ---- pp ---- */
    for (int r = -1; o.n_prompt > 0 && r < o.reps; r++) {
        for (int i = 0; i < o.n_prompt; i++) tok[i] = rand_tok(n_vocab);
        llama_memory_clear(mem, true);
        double t0 = now_ms();
        for (int done = 0; done < o.n_prompt;) {
            int n = o.n_prompt - done < bmax ? o.n_prompt - done : bmax;
            if (!decode(c, &b, tok + done, n, done, false)) return 1;
            done += n;
        }
        double ms = now_ms() - t0;
        if (r >= 0) v[r] = 1e3 * o.n_prompt / ms;
    }
    if (o.n_prompt > 0) stats(v, o.reps, &pp_mean, &pp_sd, &med, &mn);

    /* ---- tg ---- */
    for (int r = -1; o.n_gen > 0 && r < o.reps; r++) {
        int n = r < 0 ? 1 : o.n_gen;
        llama_memory_clear(mem, true);
        double t0 = now_ms();
        for (int i = 0; i < n; i++) {
            llama_token t = rand_tok(n_vocab);
            if (!decode(c, &b, &t, 1, i, false)) return 1;
        }
        double ms = now_ms() - t0;
        if (r >= 0) v[r] = 1e3 * n / ms;
    }
    if (o.n_gen > 0) stats(v, o.reps, &tg_mean, &tg_sd, &med, &mn);
    /* bytes per token: every weight, the KV rows read on average, and the
     * recurrent state (read once per token; written too, not counted) */
    double tg_gbps = (model_bytes + kv_pos_bytes * (o.n_gen + 1) / 2.0 + recurrent_bytes) * tg_mean / 1e9;

    /* ---- plain greedy generation after a prompt ---- */
    double plain_tps = 0;
    if (o.gen_prompt && o.n_gen > 0) {
        llama_memory_clear(mem, true);
        if (!decode(c, &b, gen_ids, n_gen_prompt, 0, false)) return 1;
        double t0 = now_ms();
        int pos = n_gen_prompt;
        for (int i = 0; i < o.n_gen; i++) {
            const float *lg = llama_get_logits_ith(c, -1);
            llama_token best = 0;
            for (int k = 1; k < n_vocab; k++)
                if (lg[k] > lg[best]) best = k;
            if (i + 1 == o.n_gen) break; /* the last token needs no forward */
            if (!decode(c, &b, &best, 1, pos++, false)) return 1;
        }
        plain_tps = 1e3 * o.n_gen / (now_ms() - t0);
    }

    /* ---- verify curve ---- */
    double vms[VMAX], vmin[VMAX], vg[VMAX];
    int vreps = o.reps < 3 ? 3 : o.reps;
    double recurrent_verify_bytes = 0;
    if (o.vmax > 0 && (llama_model_is_recurrent(m) || llama_model_is_hybrid(m))) {
        /* A recurrent state cannot drop its last rows unless the context
         * keeps per-token snapshots: a new context with n_rs_seq = the
         * largest batch, as llama.cpp's speculative decoding sets it
         * (n_rs_seq = draft n_max). pp, tg and plain generation above ran
         * without snapshots, as plain decoding does. */
        llama_free(c);
        g_kv_mib = g_recurrent_mib = 0;
        g_kv_cells = 0;
        g_kv_layers = 0;
        cp.n_rs_seq = (uint32_t)o.vmax;
        c = llama_init_from_model(m, cp);
        if (!c) { fprintf(stderr, "bd-bench-llama: cannot create a context with n_rs_seq %d\n", o.vmax); return 1; }
        mem = llama_get_memory(c);
        recurrent_verify_bytes = g_recurrent_mib * 1048576.0;
    }
    if (o.vmax > 0) {
        llama_memory_clear(mem, true);
        for (int i = 0; i < o.depth; i++) tok[i] = rand_tok(n_vocab);
        for (int done = 0; done < o.depth;) {
            int n = o.depth - done < bmax ? o.depth - done : bmax;
            if (!decode(c, &b, tok + done, n, done, false)) return 1;
            done += n;
        }
        for (int i = 0; i < o.vmax; i++) tok[i] = rand_tok(n_vocab);
        if (!decode(c, &b, tok, o.vmax, o.depth, true)) return 1; /* warm-up */
        if (!llama_memory_seq_rm(mem, 0, o.depth, -1)) {
            fprintf(stderr, "bd-bench-llama: llama_memory_seq_rm cannot cut the context back to %d\n", o.depth);
            return 1;
        }
        for (int n = 1; n <= o.vmax; n++) {
            for (int r = 0; r < vreps; r++) {
                for (int i = 0; i < n; i++) tok[i] = rand_tok(n_vocab);
                double t0 = now_ms();
                if (!decode(c, &b, tok, n, o.depth, true)) return 1;
                v[r] = now_ms() - t0;
                if (!llama_memory_seq_rm(mem, 0, o.depth, -1)) {
                    fprintf(stderr, "bd-bench-llama: llama_memory_seq_rm cannot cut the context back to %d\n", o.depth);
                    return 1;
                }
            }
            double mean, sd;
            stats(v, vreps, &mean, &sd, &vms[n - 1], &vmin[n - 1]);
            double keys = (double)n * o.depth + (double)n * (n + 1) / 2;
            double ops = 2.0 * n_params * n + 4.0 * n_attn_layer * n_head * (double)hd * keys;
            vg[n - 1] = ops / (vms[n - 1] * 1e6);
        }
    }

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char feats[512];
    cpu_features(feats, sizeof feats);
    char real[PATH_MAX];
    if (!realpath(g_cpu_backend, real)) real[0] = '\0';
    printf("{\"engine\":\"llama.cpp v0.5.0 (node-llama-cpp 3.22.1 prebuilt CPU)\",\"model\":\"");
    put_json_str(o.model);
    printf("\",\"arch\":\"");
    put_json_str(arch);
    printf("\",\"threads\":%d,\"reps\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"model_bytes\":%.0f,\"n_params\":%.0f,"
           "\"kv_bytes\":%.0f,\"recurrent_bytes\":%.0f,\"recurrent_verify_bytes\":%.0f,\"cpu_features\":\"",
           o.threads, o.reps, o.n_prompt, o.n_gen, model_bytes, n_params, kv_pos_bytes * n_ctx, recurrent_bytes,
           recurrent_verify_bytes);
    put_json_str(feats);
    printf("\",\"cpu_backend\":\"");
    put_json_str(g_cpu_backend);
    printf("\",\"cpu_backend_file\":\"");
    put_json_str(real);
    char mapped[1024];
    mapped_cpu_backends(mapped, sizeof mapped);
    printf("\",\"cpu_backends_mapped\":\"");
    put_json_str(mapped);
    printf("\",");
    if (o.n_prompt > 0) printf("\"pp_tps\":%.4f,\"pp_tps_sd\":%.4f,", pp_mean, pp_sd);
    else printf("\"pp_tps\":null,\"pp_tps_sd\":null,");
    if (o.n_gen > 0) printf("\"tg_tps\":%.4f,\"tg_tps_sd\":%.4f,\"tg_gbps\":%.4f,", tg_mean, tg_sd, tg_gbps);
    else printf("\"tg_tps\":null,\"tg_tps_sd\":null,\"tg_gbps\":null,");
    printf("\"verify_depth\":%d,", o.depth);
    const char *keys[4] = {"verify_ms", "verify_min_ms", "verify_ratio", "verify_gops"};
    for (int k = 0; k < 4; k++) {
        printf("\"%s\":[", keys[k]);
        for (int i = 0; i < o.vmax; i++) {
            double x = k == 0 ? vms[i] : k == 1 ? vmin[i] : k == 2 ? vms[i] / vms[0] : vg[i];
            printf("%s%.4f", i ? "," : "", x);
        }
        printf("],");
    }
    if (o.gen_prompt) printf("\"plain_tps\":%.4f,\"gen_prompt_tokens\":%d,", plain_tps, n_gen_prompt);
    printf("\"rss_bytes\":%lld}\n", (long long)ru.ru_maxrss * 1024);

    free(tok);
    free(v);
    free(gen_ids);
    llama_batch_free(b);
    llama_free(c);
    llama_model_free(m);
    llama_backend_free();
    return 0;
}
