/*
 * cmd_bench.c - `blockdraft bench`: llama-bench style speed measurements.
 *
 *   blockdraft bench -m MODEL.gguf [-md DRAFT.gguf] [-p 512] [-n 128] [-t THREADS]
 *                    [-r 5] [--verify-depth 512] [--verify-max 16] [--json] ...
 *
 * What is measured (each test preceded by a warm-up run that is not timed):
 *   pp<P>   prompt processing: P random tokens forwarded from an empty
 *           context in chunks of -b (logits of the last row only), as
 *           llama-bench's pp test. tokens/s, mean ± sd over -r runs.
 *   tg<N>   generation: N forwards of one token each from an empty context
 *           (logits every step; the next token is random, not sampled, as in
 *           llama-bench's tg test). tokens/s mean ± sd, and the achieved
 *           read bandwidth: bytes streamed per token (see bench_info) times
 *           tokens/s, against the machine's read bandwidth (--peak-gbps or
 *           --bw-probe).
 *   verify  the context is filled to --verify-depth D once; then for
 *           n = 1..--verify-max one forward of n tokens with logits on every
 *           row (the shape of a speculative verify step) is timed and the
 *           cache truncated back to D. Median over max(-r, 3) runs; the ratio
 *           t(n)/t(1) and achieved GOPS against --peak-gops.
 *   spec    with -md: plain and speculative generation of N tokens from a
 *           fixed prompt at temperature 0 (adaptive draft length unless
 *           --spec-adaptive 0 or a fixed --spec-draft-n-max), alternating,
 *           -r times each: tokens/s of both, the speed-up, tau (tokens per
 *           target forward) and whether the two outputs are token-identical
 *           (they must be). The runs share one bd_spec, as a server slot's
 *           requests do, so the adaptive rule starts each from what the
 *           runs before it learned; before them one more speculative run
 *           starts from nothing (bd_spec_forget), as a one-shot
 *           `blockdraft run` does: its tokens/s are the "first generation".
 *   memory  peak resident set size (getrusage) against the budget
 *           "mapped files + KV cache + 10 %".
 *
 * Operation counts (GOPS): 2 x (matmul parameters, including the output
 * head) per row, plus attention 4 x n_layer x n_head x head_dim x (keys
 * visible to the row). Norms, RoPE and softmax are not counted.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include "args.h"
#include "blockdraft.h"
#include "cli.h"
#include "../server/stats_json.h"
#include "../base/base.h"
#include "../model/attention.h"
#include "../model/model.h"

#define BENCH_VERIFY_MAX 32

/* ========================================================================
 * Options
 * ====================================================================== */

typedef struct bench_opts {
    const char *model, *draft, *spec_prompt;
    int32_t n_prompt, n_gen, threads, reps, n_batch;
    int32_t verify_depth, verify_max;
    int32_t spec_n_max, spec_reps;
    int spec_adaptive;      /* 1 on, 0 off, -1 (default): on unless --spec-draft-n-max is given */
    int spec_block;         /* bd_dflash_block */
    bool json, bw_probe, no_verify;
    double peak_gops, peak_gbps;
    uint64_t seed;
    bd_session_params kv;   /* type_k / type_v (-ctk / -ctv); the rest unused */
    bd_session_params kv_draft; /* type_k / type_v of the drafter's caches (-ctkd / -ctvd) */
} bench_opts;

static void bench_usage(FILE *out) {
    fprintf(out,
            "usage: blockdraft bench -m MODEL.gguf [-md DRAFT.gguf] [options]\n"
            "  -p, --n-prompt N        prompt-processing test of N tokens (default 512; 0 = skip)\n"
            "  -n, --n-gen N           generation test of N tokens (default 128; 0 = skip)\n"
            "  -t, --threads N         threads (default: all online CPUs)\n"
            "  -r, --repetitions N     runs per test (default 5), after one warm-up run\n"
            "  -b, --batch-size N      prompt chunk (default 512)\n"
            "  --verify-depth D        context depth of the verify curve (default 512)\n"
            "  --verify-max N          verify curve for n = 1..N tokens (default 16; max %d)\n"
            "  --no-verify             skip the verify curve\n"
            "  -ctk, --cache-type-k T, -ctv, --cache-type-v T  KV cache types: f32 (default), f16, bf16,\n"
            "                          q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1\n"
            "  -ctkd, -ctvd T          the drafter's, likewise\n"
            "  -md, --model-draft FILE speculative end-to-end test with this draft model\n"
            "  --spec-adaptive 0|1     adaptive draft length (default 1 unless --spec-draft-n-max is given)\n"
            "  --spec-draft-n-max N    drafted tokens per step; the upper bound when adaptive\n"
            "                          (default: the drafter's limit)\n"
            "  --spec-dflash-block auto|full|short  DFlash block rows: the trained block (full), [anchor,\n"
            "                          MASK x n] as llama.cpp (short), or picked by measurement when\n"
            "                          adaptive (auto, the default; full when not adaptive)\n"
            "  --spec-dflash-short-block  the same as --spec-dflash-block short\n"
            "  --spec-prompt TEXT      prompt of the speculative test\n"
            "  --spec-reps N           runs of the speculative test (default: -r)\n"
            "  --seed S                seed of the random token ids (default 1)\n"
            "  --peak-gbps X           read bandwidth for the tg share (default 48.7, the reference\n"
            "                          machine of shared/reference/performance.md)\n"
            "  --bw-probe              measure the read bandwidth here instead (1 GiB, -t threads)\n"
            "  --peak-gops X           int8 peak for the GOPS share (default 925)\n"
            "  --mmap / --no-mmap      keep model files mapped / copy them into 2 MiB pages (default)\n"
            "  --json, -o json         one JSON object on stdout (-o md: the default table)\n"
            "llama-bench flags with nothing to act on here (-ngl, -dev, -sm, -ts, -mg, -fit, -kvo, -ub,\n"
            "--progress, --no-warmup, --numa, ...) are accepted with a note; -d and -pg are refused\n"
            "naming the alternative\n",
            BENCH_VERIFY_MAX);
}

/* ========================================================================
 * Small statistics
 * ====================================================================== */

typedef struct bench_stat {
    double mean, sd, min, median;
    int n;
} bench_stat;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Statistics of v[0..n) (sorts v). sd is the sample standard deviation. */
static bench_stat stat_of(double *v, int n) {
    bench_stat s = {0};
    if (n <= 0) return s;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    s.mean = sum / n;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (v[i] - s.mean) * (v[i] - s.mean);
    s.sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s.min = v[0];
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    s.n = n;
    return s;
}

/* Reproducible token ids (base.h's bd_rng, independent of libc's rand()). */
static void random_tokens(int32_t *out, int32_t n, int32_t n_vocab, bd_rng *st) {
    for (int32_t i = 0; i < n; i++) out[i] = (int32_t)bd_rng_below(st, (uint64_t)n_vocab);
}

/* ========================================================================
 * Model accounting: bytes streamed per decoded token, operations per row
 * ====================================================================== */

typedef struct bench_info {
    uint64_t file_bytes;      /* size of the GGUF file */
    uint64_t weight_bytes;    /* all tensors (bd_model_weight_bytes) */
    uint64_t stream_bytes;    /* read per decoded token: every weight except the
                                 token-embedding table, of which one row is read
                                 (when tied, the table is read whole as the head) */
    double matmul_params;     /* multiply-adds per row in the matmuls, head included
                                 (mixture of experts: the experts one token uses) */
    uint64_t kv_pos_bytes;    /* KV cache bytes per position, attention layers, K and V */
    int32_t n_layer, n_attn_layers, n_head, hd;
} bench_info;

static double mat_params(const bd_mat *w) { return w->data ? (double)w->nrows * (double)w->ncols : 0; }

static uint64_t mat_bytes(const bd_mat *w) { return w->data ? w->row_bytes * (uint64_t)w->nrows : 0; }

static bench_info bench_info_of(const bd_model *m, const char *path, const bd_session_params *kv) {
    bench_info in = {0};
    struct stat sb;
    if (!stat(path, &sb)) in.file_bytes = (uint64_t)sb.st_size;
    in.weight_bytes = m->weight_bytes;
    in.stream_bytes = m->weight_bytes;
    if (!m->tied && m->tok_embd.data) in.stream_bytes -= mat_bytes(&m->tok_embd) - m->tok_embd.row_bytes;
    /* a token reads n_used of the n_expert experts of each layer */
    const double used = m->hp.n_expert ? (double)m->hp.n_expert_used / m->hp.n_expert : 1.0;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const bd_layer *ly = &m->layers[l];
        in.matmul_params += mat_params(&ly->wq) + mat_params(&ly->wk) + mat_params(&ly->wv) +
                            mat_params(&ly->wo) + mat_params(&ly->w_gate) + mat_params(&ly->w_up) +
                            mat_params(&ly->w_down) + mat_params(&ly->w_qkv) + mat_params(&ly->w_z) +
                            mat_params(&ly->w_beta) + mat_params(&ly->w_alpha) + mat_params(&ly->ssm_out) +
                            mat_params(&ly->router) + mat_params(&ly->shexp_gate_inp) +
                            mat_params(&ly->gate_shexp) + mat_params(&ly->up_shexp) + mat_params(&ly->down_shexp);
        const bd_mat *ex[4] = {&ly->gate_exps, &ly->up_exps, &ly->gate_up_exps, &ly->down_exps};
        for (int k = 0; k < 4; k++) {
            in.matmul_params += used * mat_params(ex[k]);
            in.stream_bytes -= (uint64_t)((1.0 - used) * (double)mat_bytes(ex[k]));
        }
    }
    in.matmul_params += mat_params(&m->output);
    /* the session's K and V caches, [n_attn_layers][n_kv][n_ctx][hd] each */
    bd_session_params one = *kv;
    one.n_ctx = 1;
    in.kv_pos_bytes = bd_session_kv_bytes(m, &one);
    in.n_layer = m->hp.n_layer;
    in.n_attn_layers = m->hp.n_attn_layers;
    in.n_head = m->hp.n_head;
    in.hd = m->hp.hd;
    return in;
}

/* Operations of one forward of n rows on top of `depth` cached positions. */
static double forward_ops(const bench_info *in, int32_t depth, int32_t n) {
    double keys = (double)n * depth + (double)n * (n + 1) / 2; /* causal: row i sees depth+i+1 keys */
    return 2.0 * in->matmul_params * n + 4.0 * in->n_attn_layers * in->n_head * (double)in->hd * keys;
}

/* 1-minute load average (/proc/loadavg), or -1 where there is none: other
 * work on the machine skews every figure, so it is reported with them. */
static double load_avg(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double v = -1;
    if (f) {
        if (fscanf(f, "%lf", &v) != 1) v = -1;
        fclose(f);
    }
    return v;
}

/* ========================================================================
 * Read-bandwidth probe (forked, so its 1 GiB does not count in our RSS)
 * ====================================================================== */

typedef struct probe_arg {
    const uint64_t *p;
    size_t n;
    int form;
    uint64_t sum;
} probe_arg;

/* Two loop forms over p[0..n) (n a multiple of 8), because how a loop
 * issues its loads changes what one core streams by more than 10 %: on
 * the Intel Xeon VM (2026-12-07, 2 threads, huge pages) a running sum
 * read 33.0-34.1 GB/s and an xor of each 64-byte line's two halves, folded
 * into the running value, 36.6-39.0. The probe reports the better form,
 * so that "share of the probe" is measured against the most this machine
 * was seen to read. Vectorized (O3, and an AVX2 clone where the CPU has
 * it) so that the loops are bound by memory, not by the adds. */
typedef uint64_t probe_v4 __attribute__((vector_size(32)));
__attribute__((target_clones("avx2", "default"), optimize("O3"))) static uint64_t probe_sum(const uint64_t *p,
                                                                                             size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += p[i];
    return s;
}
__attribute__((target_clones("avx2", "default"), optimize("O3"))) static uint64_t probe_xor(const uint64_t *p,
                                                                                             size_t n) {
    probe_v4 acc = {0, 0, 0, 0};
    for (size_t i = 0; i + 8 <= n; i += 8) {
        probe_v4 a, b;
        memcpy(&a, p + i, sizeof a);
        memcpy(&b, p + i + 4, sizeof b);
        acc ^= a ^ b;
    }
    return acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
}

static void *probe_read(void *a_) {
    probe_arg *a = a_;
    a->sum = a->form ? probe_xor(a->p, a->n) : probe_sum(a->p, a->n);
    return NULL;
}

/* Best of 10 passes (5 of each loop form) over 1 GiB with n_threads threads, in GB/s; 0 on failure.
 * The buffer sits on transparent huge pages where the kernel has them, as a
 * loaded model's weights do (bd_fmap_prefetch): on small pages every 4 KiB
 * costs a TLB miss, which under a hypervisor is a walk of two page tables,
 * and the probe then reads far less than decoding can (Intel Xeon VM, 2
 * threads: 26.5 against 34.5 GB/s), so the decode's share of it overstated
 * how close to the memory limit decoding runs. *huge says which it was. */
static double bw_probe(int n_threads, bool *huge) {
    struct {
        double gbps;
        bool huge;
    } res = {0, false};
    *huge = false;
    int fds[2];
    if (pipe(fds)) return 0;
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        close(fds[0]);
        const size_t bytes = (size_t)1 << 30, n = bytes / sizeof(uint64_t);
        uint64_t *buf = bd_alloc_huge(bytes, &res.huge);
        double best = 0;
        if (buf) {
            for (size_t i = 0; i < n; i++) buf[i] = i;
            if (n_threads < 1) n_threads = 1;
            if (n_threads > 64) n_threads = 64;
            pthread_t th[64];
            probe_arg arg[64];
            for (int rep = 0; rep < 10; rep++) {
                double t0 = bd_time_ms();
                for (int t = 0; t < n_threads; t++) {
                    /* each thread's part a whole number of 64-byte lines */
                    size_t lo = n * (size_t)t / (size_t)n_threads / 8 * 8,
                           hi = t + 1 == n_threads ? n : n * (size_t)(t + 1) / (size_t)n_threads / 8 * 8;
                    arg[t] = (probe_arg){buf + lo, hi - lo, rep % 2, 0};
                    pthread_create(&th[t], NULL, probe_read, &arg[t]);
                }
                uint64_t sink = 0;
                for (int t = 0; t < n_threads; t++) {
                    pthread_join(th[t], NULL);
                    sink += arg[t].sum;
                }
                double ms = bd_time_ms() - t0;
                if (sink == 42) ms += 1e-9; /* keep the sums alive */
                double gbps = (double)bytes / (ms * 1e6);
                if (gbps > best) best = gbps;
            }
        }
        res.gbps = best;
        ssize_t w = write(fds[1], &res, sizeof res);
        _exit(w == sizeof res ? 0 : 1);
    }
    close(fds[1]);
    if (read(fds[0], &res, sizeof res) != sizeof res) res.gbps = 0;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    *huge = res.huge;
    return res.gbps;
}

/* ========================================================================
 * Results
 * ====================================================================== */

typedef struct bench_result {
    bench_stat pp, tg;              /* tokens/s */
    double tg_gbps, tg_gbps_sd;
    double peak_gbps;
    bool peak_probed;
    bool peak_huge; /* the probe's buffer was on huge pages */
    int32_t n_verify;
    double verify_ms[BENCH_VERIFY_MAX];  /* median, index n-1 */
    double verify_min_ms[BENCH_VERIFY_MAX];
    double verify_gops[BENCH_VERIFY_MAX];
    bool spec_done;
    bench_stat spec_tps, plain_tps;
    double spec_first_tps;          /* the run on a fresh adaptive state (0: not adaptive) */
    /* over the speculative runs: counts summed, tau and times per run */
    bd_spec_stats spec;
    int32_t spec_n_max, spec_n_gen, spec_n_prompt;
    bool identical;
    uint64_t rss_bytes, rss_budget, kv_bytes, draft_file_bytes;
    uint64_t draft_interleaved_bytes; /* the drafter's weights in the IL16 layout (kernels.h) */
    uint64_t recurrent_bytes; /* hybrid targets: state buffers and rollback inputs of the largest session */
    double load_before, load_after;
} bench_result;

static const char *k_default_spec_prompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
    "friends. One day, she saw a big red ball under a tree.";

/* ========================================================================
 * pp / tg / verify
 * ====================================================================== */

/* One timed forward; false (message printed) on error. */
static bool fwd(bd_session *s, const int32_t *tok, int32_t n, enum bd_logits_mode mode, double *ms) {
    char err[256];
    double t0 = bd_time_ms();
    bool ok = bd_session_forward(s, tok, n, mode, err, sizeof err);
    if (ms) *ms = bd_time_ms() - t0;
    if (!ok) fprintf(stderr, "blockdraft bench: %s\n", err);
    return ok;
}

static bool run_pp(bd_session *s, const bench_opts *o, int32_t n_vocab, bd_rng *rng, bench_stat *out) {
    int32_t *tok = malloc((size_t)o->n_prompt * sizeof *tok);
    double *v = malloc((size_t)o->reps * sizeof *v);
    bool ok = tok && v;
    for (int r = -1; ok && r < o->reps; r++) { /* r = -1: warm-up */
        random_tokens(tok, o->n_prompt, n_vocab, rng);
        bd_session_truncate(s, 0);
        double ms;
        ok = fwd(s, tok, o->n_prompt, BD_LOGITS_LAST, &ms);
        if (r >= 0) v[r] = 1e3 * o->n_prompt / ms;
    }
    if (ok) *out = stat_of(v, o->reps);
    free(tok);
    free(v);
    return ok;
}

static bool run_tg(bd_session *s, const bench_opts *o, int32_t n_vocab, bd_rng *rng, bench_stat *out) {
    double *v = malloc((size_t)o->reps * sizeof *v);
    bool ok = v != NULL;
    for (int r = -1; ok && r < o->reps; r++) {
        int32_t n = r < 0 ? 1 : o->n_gen; /* warm-up: one token, as llama-bench */
        bd_session_truncate(s, 0);
        double t0 = bd_time_ms();
        for (int32_t i = 0; ok && i < n; i++) {
            int32_t t;
            random_tokens(&t, 1, n_vocab, rng);
            ok = fwd(s, &t, 1, BD_LOGITS_LAST, NULL);
        }
        double ms = bd_time_ms() - t0;
        if (r >= 0) v[r] = 1e3 * n / ms;
    }
    if (ok) *out = stat_of(v, o->reps);
    free(v);
    return ok;
}

static bool run_verify(bd_session *s, const bench_opts *o, const bench_info *in, int32_t n_vocab, bd_rng *rng,
                       bench_result *res) {
    int reps = o->reps < 3 ? 3 : o->reps;
    int32_t depth = o->verify_depth;
    int32_t *tok = malloc(((size_t)depth + BENCH_VERIFY_MAX) * sizeof *tok);
    double *v = malloc((size_t)reps * sizeof *v);
    bool ok = tok && v;
    if (ok) {
        bd_session_truncate(s, 0);
        random_tokens(tok, depth, n_vocab, rng);
        if (depth > 0) ok = fwd(s, tok, depth, BD_LOGITS_NONE, NULL);
    }
    /* warm-up at the widest shape */
    if (ok) {
        random_tokens(tok, o->verify_max, n_vocab, rng);
        ok = fwd(s, tok, o->verify_max, BD_LOGITS_ALL, NULL) && bd_session_truncate(s, depth);
    }
    for (int32_t n = 1; ok && n <= o->verify_max; n++) {
        for (int r = 0; ok && r < reps; r++) {
            random_tokens(tok, n, n_vocab, rng);
            ok = fwd(s, tok, n, BD_LOGITS_ALL, &v[r]) && bd_session_truncate(s, depth);
        }
        if (!ok) break;
        bench_stat st = stat_of(v, reps);
        res->verify_ms[n - 1] = st.median;
        res->verify_min_ms[n - 1] = st.min;
        res->verify_gops[n - 1] = forward_ops(in, depth, n) / (st.median * 1e6);
    }
    if (ok) res->n_verify = o->verify_max;
    free(tok);
    free(v);
    return ok;
}

/* ========================================================================
 * Speculative end to end
 * ====================================================================== */

typedef struct id_buf {
    int32_t *ids;
    int32_t n, cap;
} id_buf;

static bool collect(int32_t tok, void *user) {
    id_buf *b = user;
    if (b->n < b->cap) b->ids[b->n++] = tok;
    return true;
}

static bool run_spec(bd_model *m, bd_model *dm, const bench_opts *o, bench_result *res, uint64_t *kv_bytes,
                     const bench_info *in) {
    char err[512], warn[256] = "";
    bool ok = false;
    const char *prompt = o->spec_prompt ? o->spec_prompt : k_default_spec_prompt;
    int32_t np = bd_tokenize(m, prompt, strlen(prompt), true, true, NULL, 0);
    if (np < 0) np = -np;
    int32_t *pids = malloc(((size_t)np + 1) * sizeof *pids);
    id_buf plain = {malloc(((size_t)o->n_gen + 1) * sizeof(int32_t)), 0, o->n_gen};
    id_buf spec = {malloc(((size_t)o->n_gen + 1) * sizeof(int32_t)), 0, o->n_gen};
    id_buf first = {malloc(((size_t)o->n_gen + 1) * sizeof(int32_t)), 0, o->n_gen};
    int reps = o->spec_reps > 0 ? o->spec_reps : o->reps;
    double *vp = malloc((size_t)reps * sizeof *vp), *vs = malloc((size_t)reps * sizeof *vs);
    bd_session *s = NULL;
    bd_spec *sp = NULL;
    if (!pids || !plain.ids || !spec.ids || !first.ids || !vp || !vs) goto done;
    np = bd_tokenize(m, prompt, strlen(prompt), true, true, pids, np + 1);
    if (np <= 0) {
        fprintf(stderr, "blockdraft bench: the speculative prompt produced no tokens\n");
        goto done;
    }
    bd_spec_params spp = bd_spec_default_params();
    spp.type = bd_spec_type_for_draft(dm);
    spp.adaptive = o->spec_adaptive != 0;
    spp.n_max = o->spec_n_max;
    spp.dflash_block = (bd_dflash_block)o->spec_block;
    spp.draft_type_k = o->kv_draft.type_k;
    spp.draft_type_v = o->kv_draft.type_v;
    bd_session_params sprm = bd_session_default_params();
    sprm.n_threads = o->threads;
    sprm.n_ctx = np + o->n_gen + 64;
    sprm.type_k = o->kv.type_k;
    sprm.type_v = o->kv.type_v;
    /* target cache + the drafter's (DFlash: n_ctx + one block of rows) */
    uint32_t dtk = BD_TYPE_F32, dtv = BD_TYPE_F32;
    bd_attn_cache_type(spp.draft_type_k, &dtk);
    bd_attn_cache_type(spp.draft_type_v, &dtv);
    *kv_bytes = (uint64_t)sprm.n_ctx * in->kv_pos_bytes +
                (uint64_t)(sprm.n_ctx + (spp.type == BD_SPEC_DRAFT_DFLASH ? dm->dflash.block_size : 0)) *
                    (uint64_t)dm->hp.n_layer * (uint64_t)dm->hp.n_kv *
                    (uint64_t)(bd_attn_row_bytes(dtk, dm->hp.hd) + bd_attn_row_bytes(dtv, dm->hp.hd));
    /* the target session (plain runs use it too) and the bd_spec */
    sp = bd_spec_open(m, dm, &sprm, &spp, warn, sizeof warn, err, sizeof err);
    if (!sp) {
        fprintf(stderr, "blockdraft bench: %s\n", err);
        goto done;
    }
    s = bd_spec_session(sp);
    if (bd_session_recurrent_bytes(s) > res->recurrent_bytes) res->recurrent_bytes = bd_session_recurrent_bytes(s);
    if (warn[0]) fprintf(stderr, "blockdraft bench: warning: %s\n", warn);
    res->spec_n_max = bd_spec_n_max(sp);
    bd_gen_params gp = {.n_predict = o->n_gen, .sampling = bd_sampler_default_params(), .ignore_eog = true};
    gp.sampling.temperature = 0;
    bd_gen_stats st;
    /* warm-up: page in the drafter */
    bd_gen_params gw = gp;
    gw.n_predict = o->n_gen < 16 ? o->n_gen : 16;
    spec.n = 0;
    if (!bd_spec_generate(sp, pids, np, &gw, collect, &spec, &st, err, sizeof err)) {
        fprintf(stderr, "blockdraft bench: %s\n", err);
        goto done;
    }
    res->identical = true;
    if (spp.adaptive) {
        /* the one-shot figure: the warm-up's pages, not its adaptive state */
        bd_spec_forget(sp);
        first.n = 0;
        if (!bd_spec_generate(sp, pids, np, &gp, collect, &first, &st, err, sizeof err)) {
            fprintf(stderr, "blockdraft bench: %s\n", err);
            goto done;
        }
        res->spec_first_tps = st.gen_tps;
    }
    bd_spec_stats acc = {0};
    for (int r = 0; r < reps; r++) {
        plain.n = 0;
        if (!bd_generate(s, pids, np, &gp, collect, &plain, &st, err, sizeof err)) {
            fprintf(stderr, "blockdraft bench: %s\n", err);
            goto done;
        }
        vp[r] = st.gen_tps;
        spec.n = 0;
        if (!bd_spec_generate(sp, pids, np, &gp, collect, &spec, &st, err, sizeof err)) {
            fprintf(stderr, "blockdraft bench: %s\n", err);
            goto done;
        }
        vs[r] = st.gen_tps;
        res->spec_n_gen = st.n_gen;
        if (plain.n != spec.n || memcmp(plain.ids, spec.ids, (size_t)plain.n * sizeof(int32_t)))
            res->identical = false;
        if (spp.adaptive && (plain.n != first.n || memcmp(plain.ids, first.ids, (size_t)plain.n * sizeof(int32_t))))
            res->identical = false;
        acc.n_drafted += st.spec.n_drafted;
        acc.n_accepted += st.spec.n_accepted;
        acc.target_forwards += st.spec.target_forwards;
        acc.n_steps += st.spec.n_steps;
        acc.draft_ms += st.spec.draft_ms;
        acc.verify_ms += st.spec.verify_ms;
        acc.other_ms += st.spec.other_ms;
        acc.n_short_blocks += st.spec.n_short_blocks;
        for (int i = 0; i < 32; i++) {
            acc.accepted_at[i] += st.spec.accepted_at[i];
            acc.drafted_at[i] += st.spec.drafted_at[i];
        }
        acc.tau += st.spec.tau;
    }
    res->spec_tps = stat_of(vs, reps);
    res->plain_tps = stat_of(vp, reps);
    acc.tau /= reps;
    acc.draft_ms /= reps;
    acc.verify_ms /= reps;
    acc.other_ms /= reps;
    snprintf(acc.type, sizeof acc.type, "%s", bd_spec_type_name(spp.type));
    res->spec = acc;
    res->spec_n_prompt = np;
    res->spec_done = true;
    ok = true;
done:
    bd_spec_free(sp); /* and its session s */
    free(pids);
    free(plain.ids);
    free(spec.ids);
    free(first.ids);
    free(vp);
    free(vs);
    return ok;
}

/* ========================================================================
 * Output
 * ====================================================================== */

static void print_text(const bench_opts *o, const bd_model *m, const bench_info *in, const bench_result *r) {
    printf("model: %s (%s, %d layers, file %.3f GB, weights %.3f GB of which %.3f GB interleaved, %.3f G matmul "
           "params)\n",
           o->model, bd_model_arch(m), in->n_layer, in->file_bytes / 1e9, in->weight_bytes / 1e9,
           bd_model_interleaved_bytes(m) / 1e9, in->matmul_params / 1e9);
    const bool is512 = bd_kernels_get()->isa == BD_ISA_AVX512;
    printf("threads: %d | kernels %s%s%s%s, weight prefetch into %s | KV cache K %s V %s, %.1f KB per position | "
           "read bandwidth %.1f GB/s (%s) | int8 peak %.0f GOPS\n\n",
           o->threads, bd_kernels_get()->name, is512 ? ", one-row decode loops " : "",
           is512 ? bd_kernels_one_row_name() : "", is512 ? "-bit" : "", bd_kernels_prefetch_name(), bd_kv_type_name(o->kv.type_k),
           bd_kv_type_name(o->kv.type_v), in->kv_pos_bytes / 1e3, r->peak_gbps,
           !r->peak_probed ? "--peak-gbps" : r->peak_huge ? "probed here, huge pages" : "probed here, small pages",
           o->peak_gops);
    if (o->n_prompt > 0 || o->n_gen > 0) {
        printf("| test   |              t/s | notes\n|--------|------------------|------\n");
        if (o->n_prompt > 0) {
            double gops = forward_ops(in, 0, o->n_prompt) / (o->n_prompt / r->pp.mean) / 1e9;
            printf("| pp%-4d | %7.2f ± %6.2f | %.0f GOPS (%.0f %% of int8 peak)\n", o->n_prompt, r->pp.mean, r->pp.sd,
                   gops, 100 * gops / o->peak_gops);
        }
        if (o->n_gen > 0)
            printf("| tg%-4d | %7.2f ± %6.2f | %.2f ± %.2f GB/s read (%.0f %% of %.1f GB/s)\n", o->n_gen, r->tg.mean,
                   r->tg.sd, r->tg_gbps, r->tg_gbps_sd, 100 * r->tg_gbps / r->peak_gbps, r->peak_gbps);
        printf("\n");
    }
    if (r->n_verify) {
        printf("verify curve at depth %d (one forward of n tokens, logits on every row; median of %d):\n",
               o->verify_depth, o->reps < 3 ? 3 : o->reps);
        printf("|  n |   t (ms) | min (ms) | t(n)/t(1) |   GOPS | %% int8 peak |\n");
        printf("|----|----------|----------|-----------|--------|-------------|\n");
        for (int i = 0; i < r->n_verify; i++)
            printf("| %2d | %8.2f | %8.2f | %9.2f | %6.1f | %10.1f%% |\n", i + 1, r->verify_ms[i],
                   r->verify_min_ms[i], r->verify_ms[i] / r->verify_ms[0], r->verify_gops[i],
                   100 * r->verify_gops[i] / o->peak_gops);
        printf("\n");
    }
    if (r->spec_done) {
        printf("speculative: %s, n_max %d, adaptive %s, temperature 0, %d prompt tokens, %d generated\n", o->draft,
               r->spec_n_max, o->spec_adaptive ? "on" : "off", r->spec_n_prompt, r->spec_n_gen);
        printf("  speculative %.2f ± %.2f tok/s | plain %.2f ± %.2f tok/s | speed-up %.2fx\n", r->spec_tps.mean,
               r->spec_tps.sd, r->plain_tps.mean, r->plain_tps.sd,
               r->plain_tps.mean > 0 ? r->spec_tps.mean / r->plain_tps.mean : 0);
        if (r->spec_first_tps > 0)
            printf("  first generation (fresh adaptive state, as a one-shot run) %.2f tok/s | speed-up %.2fx\n",
                   r->spec_first_tps, r->plain_tps.mean > 0 ? r->spec_first_tps / r->plain_tps.mean : 0);
        const bd_spec_stats *ss = &r->spec;
        printf("  tau %.3f | drafted %lld, accepted %lld (%.1f %%) | draft %.1f ms, verify %.1f ms per run\n",
               ss->tau, (long long)ss->n_drafted, (long long)ss->n_accepted,
               ss->n_drafted ? 100.0 * (double)ss->n_accepted / (double)ss->n_drafted : 0.0, ss->draft_ms,
               ss->verify_ms);
        printf("  acceptance by position:");
        for (int i = 0; i < 32 && ss->drafted_at[i]; i++)
            printf(" %.2f", (double)ss->accepted_at[i] / (double)ss->drafted_at[i]);
        printf("\n  output identical to plain decoding: %s\n\n", r->identical ? "yes" : "NO");
    }
    printf("load average (1 min): %.2f before, %.2f after%s\n", r->load_before, r->load_after,
           r->load_before > 0.5 || r->load_after > 0.5 ? " -- the machine was busy; figures are skewed" : "");
    printf("memory: peak RSS %.3f GB; budget %.3f GB = (files %.3f GB + KV %.3f GB + recurrent state %.3f GB) x 1.1: "
           "%s\n",
           r->rss_bytes / 1e9, r->rss_budget / 1e9, (in->file_bytes + r->draft_file_bytes) / 1e9, r->kv_bytes / 1e9,
           r->recurrent_bytes / 1e9, r->rss_bytes <= r->rss_budget ? "within" : "OVER");
}

static void print_json(const bench_opts *o, const bd_model *m, const bench_info *in, const bench_result *r) {
    json_t *j = json_object();
    json_object_set_new(j, "engine", json_string("blockdraft"));
    json_object_set_new(j, "model", json_string(o->model));
    json_object_set_new(j, "arch", json_string(bd_model_arch(m)));
    json_object_set_new(j, "isa", json_string(bd_kernels_get()->name));
    json_object_set_new(j, "prefetch", json_string(bd_kernels_prefetch_name()));
    if (bd_kernels_get()->isa == BD_ISA_AVX512)
        json_object_set_new(j, "one_row_bits", json_string(bd_kernels_one_row_name()));
    json_object_set_new(j, "file_bytes", json_integer((json_int_t)in->file_bytes));
    json_object_set_new(j, "weight_bytes", json_integer((json_int_t)in->weight_bytes));
    json_object_set_new(j, "interleaved_bytes", json_integer((json_int_t)bd_model_interleaved_bytes(m)));
    json_object_set_new(j, "stream_bytes", json_integer((json_int_t)in->stream_bytes));
    json_object_set_new(j, "matmul_params", json_real(in->matmul_params));
    json_object_set_new(j, "threads", json_integer(o->threads));
    json_object_set_new(j, "reps", json_integer(o->reps));
    json_object_set_new(j, "n_prompt", json_integer(o->n_prompt));
    json_object_set_new(j, "n_gen", json_integer(o->n_gen));
    json_object_set_new(j, "pp_tps", o->n_prompt > 0 ? json_real(r->pp.mean) : json_null());
    json_object_set_new(j, "pp_tps_sd", o->n_prompt > 0 ? json_real(r->pp.sd) : json_null());
    json_object_set_new(j, "tg_tps", o->n_gen > 0 ? json_real(r->tg.mean) : json_null());
    json_object_set_new(j, "tg_tps_sd", o->n_gen > 0 ? json_real(r->tg.sd) : json_null());
    json_object_set_new(j, "tg_gbps", o->n_gen > 0 ? json_real(r->tg_gbps) : json_null());
    json_object_set_new(j, "peak_gbps", json_real(r->peak_gbps));
    json_object_set_new(j, "peak_gbps_probed", json_boolean(r->peak_probed));
    json_object_set_new(j, "peak_gbps_huge_pages", json_boolean(r->peak_probed && r->peak_huge));
    json_object_set_new(j, "peak_gops", json_real(o->peak_gops));
    json_object_set_new(j, "verify_depth", json_integer(o->verify_depth));
    json_t *vm = json_array(), *vmin = json_array(), *vr = json_array(), *vg = json_array();
    for (int i = 0; i < r->n_verify; i++) {
        json_array_append_new(vm, json_real(r->verify_ms[i]));
        json_array_append_new(vmin, json_real(r->verify_min_ms[i]));
        json_array_append_new(vr, json_real(r->verify_ms[i] / r->verify_ms[0]));
        json_array_append_new(vg, json_real(r->verify_gops[i]));
    }
    json_object_set_new(j, "verify_ms", vm);
    json_object_set_new(j, "verify_min_ms", vmin);
    json_object_set_new(j, "verify_ratio", vr);
    json_object_set_new(j, "verify_gops", vg);
    if (r->spec_done) {
        /* the statistics as run --json and the server show them, plus the bench's own */
        json_t *sp = srv_json_spec_stats(&r->spec, r->spec_n_max);
        json_object_set_new(sp, "draft", json_string(o->draft));
        json_object_set_new(sp, "draft_interleaved_bytes", json_integer((json_int_t)r->draft_interleaved_bytes));
        json_object_set_new(sp, "tps", json_real(r->spec_tps.mean));
        json_object_set_new(sp, "tps_sd", json_real(r->spec_tps.sd));
        json_object_set_new(sp, "plain_tps", json_real(r->plain_tps.mean));
        json_object_set_new(sp, "plain_tps_sd", json_real(r->plain_tps.sd));
        json_object_set_new(sp, "speedup", json_real(r->plain_tps.mean > 0 ? r->spec_tps.mean / r->plain_tps.mean : 0));
        json_object_set_new(sp, "adaptive", json_boolean(o->spec_adaptive != 0));
        if (r->spec_first_tps > 0) json_object_set_new(sp, "first_tps", json_real(r->spec_first_tps));
        json_object_set_new(sp, "identical", json_boolean(r->identical));
        json_object_set_new(sp, "n_gen", json_integer(r->spec_n_gen));
        json_object_set_new(j, "spec", sp);
    } else {
        json_object_set_new(j, "spec", json_null());
    }
    json_object_set_new(j, "rss_bytes", json_integer((json_int_t)r->rss_bytes));
    json_object_set_new(j, "rss_budget_bytes", json_integer((json_int_t)r->rss_budget));
    json_object_set_new(j, "kv_bytes", json_integer((json_int_t)r->kv_bytes));
    json_object_set_new(j, "cache_type_k", json_string(bd_kv_type_name(o->kv.type_k)));
    json_object_set_new(j, "cache_type_v", json_string(bd_kv_type_name(o->kv.type_v)));
    json_object_set_new(j, "recurrent_bytes", json_integer((json_int_t)r->recurrent_bytes));
    json_object_set_new(j, "load_before", json_real(r->load_before));
    json_object_set_new(j, "load_after", json_real(r->load_after));
    char *dump = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(6));
    if (dump) printf("%s\n", dump);
    free(dump);
    json_decref(j);
}

/* ========================================================================
 * Command
 * ====================================================================== */

/* llama-bench flags with nothing to act on here (noted) or that blockdraft
 * bench cannot honour (refused, naming the alternative). */
static const arg_compat BENCH_COMPAT[] = {
    ARG_COMPAT_CPU_ONLY,
    {{"-ub", "--ubatch-size", NULL}, ARG_VALUE, ARG_NOTE, "the prompt goes through in batches of -b rows"},
    {{"--progress", "--no-warmup", "--mlock", NULL}, ARG_NONE, ARG_NOTE, "nothing to change here"},
    {{"--numa", "--prio", "--poll", "--cpu-mask", "--cpu-strict", "--delay", NULL}, ARG_VALUE, ARG_NOTE,
     "thread placement, priority and pacing are left to the system"},
    {{"-oe", "--output-err", NULL}, ARG_VALUE, ARG_NOTE, "progress and errors go to stderr as text"},
    {{"-d", "--n-depth", NULL}, ARG_VALUE, ARG_REFUSE,
     "pp and tg run from an empty context; --verify-depth D times one forward of 1..16 tokens at depth D"},
    {{"-pg", NULL}, ARG_VALUE, ARG_REFUSE, "run -p and -n (their tests are separate)"},
    {{"-nr", "--no-repack", NULL}, ARG_VALUE, ARG_NOTE, "weights are used as the file stores them"},
    {{"-embd", "--embeddings", NULL}, ARG_VALUE, ARG_REFUSE, "blockdraft bench measures text generation only"},
};

/* The options; returns -1 to go on, else the exit status. */
static int bench_parse(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){.n_prompt = 512, .n_gen = 128, .threads = 0, .reps = 5, .n_batch = 512, .verify_depth = 512,
                      .verify_max = 16, .spec_adaptive = -1, .peak_gops = 925, .peak_gbps = 48.7, .seed = 1};
    const char *v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (arg_take(argc, argv, &i, (const char *[]){"-m", "--model", NULL}, &v)) o->model = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-md", "--model-draft", NULL}, &v)) o->draft = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-p", "--n-prompt", NULL}, &v))
            o->n_prompt = arg_i32(a, v, 0, 1 << 20);
        else if (arg_take(argc, argv, &i, (const char *[]){"-n", "--n-gen", NULL}, &v))
            o->n_gen = arg_i32(a, v, 0, 1 << 20);
        else if (arg_take(argc, argv, &i, (const char *[]){"-t", "--threads", NULL}, &v))
            o->threads = arg_i32(a, v, 1, 256);
        else if (arg_take(argc, argv, &i, (const char *[]){"-r", "--repetitions", NULL}, &v))
            o->reps = arg_i32(a, v, 1, 1000);
        else if (arg_take(argc, argv, &i, (const char *[]){"-b", "--batch-size", NULL}, &v))
            o->n_batch = arg_i32(a, v, BENCH_VERIFY_MAX, 1 << 16);
        else if (arg_take(argc, argv, &i, (const char *[]){"--verify-depth", NULL}, &v))
            o->verify_depth = arg_i32(a, v, 0, 1 << 20);
        else if (arg_take(argc, argv, &i, (const char *[]){"--verify-max", NULL}, &v))
            o->verify_max = arg_i32(a, v, 1, BENCH_VERIFY_MAX);
        else if (arg_is(a, "--no-verify", NULL)) o->no_verify = true;
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-adaptive", NULL}, &v))
            o->spec_adaptive = arg_i32(a, v, 0, 1);
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-n-max", NULL}, &v))
            o->spec_n_max = arg_i32(a, v, 1, 63);
        else if (arg_is(a, "--spec-dflash-short-block", NULL)) o->spec_block = BD_DFLASH_BLOCK_SHORT;
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-dflash-block", NULL}, &v))
            o->spec_block = arg_dflash_block(a, v);
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-prompt", NULL}, &v)) o->spec_prompt = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-reps", NULL}, &v))
            o->spec_reps = arg_i32(a, v, 1, 1000);
        else if (arg_take(argc, argv, &i, (const char *[]){"--seed", NULL}, &v)) o->seed = arg_u64(a, v);
        else if (arg_take(argc, argv, &i, (const char *[]){"--peak-gbps", NULL}, &v))
            o->peak_gbps = arg_f32(a, v, 0.001f, 1e6f);
        else if (arg_take(argc, argv, &i, (const char *[]){"--peak-gops", NULL}, &v))
            o->peak_gops = arg_f32(a, v, 0.001f, 1e9f);
        else if (arg_is(a, "--bw-probe", NULL)) o->bw_probe = true;
        else if (arg_cache_type(argc, argv, &i, &o->kv)) continue;
        else if (arg_cache_type_draft(argc, argv, &i, &o->kv_draft.type_k, &o->kv_draft.type_v)) continue;
        else if (arg_is(a, "--json", NULL)) o->json = true;
        else if (arg_take(argc, argv, &i, (const char *[]){"-o", "--output", NULL}, &v)) {
            /* llama-bench's output formats: its md table is the default here */
            if (!strcmp(v, "json")) o->json = true;
            else if (strcmp(v, "md")) {
                fprintf(stderr, "blockdraft bench: -o %s is not supported: md (the default) or json\n", v);
                return 2;
            }
        } else if (arg_is(a, "--mmap", NULL)) bd_use_mmap(true);
        else if (arg_is(a, "--no-mmap", NULL)) bd_use_mmap(false);
        else if (arg_is(a, "-h", "--help")) {
            bench_usage(stdout);
            return 0;
        } else {
            const int t = arg_compat_take("bench", "llama-bench", BENCH_COMPAT, sizeof BENCH_COMPAT / sizeof BENCH_COMPAT[0],
                                          false, argc, argv, &i);
            if (t > 0) continue;
            if (t < 0) return 2;
            fprintf(stderr, "blockdraft bench: unknown option '%s'\n", a);
            bench_usage(stderr);
            return 2;
        }
    }
    if (!o->model) {
        bench_usage(stderr);
        return 2;
    }
    if (o->threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = n > 0 ? (int32_t)n : 1;
    }
    if (o->no_verify) o->verify_max = 0;
    if (o->spec_adaptive < 0) o->spec_adaptive = o->spec_n_max == 0;
    return -1;
}

/* pp, tg and the verify curve on one session sized for the largest test. */
static bool bench_target(bd_model *m, const bench_opts *o, const bench_info *in, bd_rng *rng, bench_result *res) {
    int32_t n_vocab = bd_model_n_vocab(m);
    int32_t n_ctx = o->n_prompt;
    if (o->n_gen > n_ctx) n_ctx = o->n_gen;
    if (o->verify_max > 0 && o->verify_depth + o->verify_max > n_ctx) n_ctx = o->verify_depth + o->verify_max;
    if (n_ctx < 1) n_ctx = 1;
    if (!(o->n_prompt > 0 || o->n_gen > 0 || o->verify_max > 0)) return true;
    char err[512];
    bd_session_params sp = bd_session_default_params();
    sp.n_ctx = n_ctx;
    sp.n_batch = o->n_batch;
    sp.n_outputs = o->verify_max > 0 ? o->verify_max : 1;
    sp.n_threads = o->threads;
    sp.type_k = o->kv.type_k;
    sp.type_v = o->kv.type_v;
    bd_session *s = bd_session_create(m, &sp, err, sizeof err);
    if (!s) {
        fprintf(stderr, "blockdraft bench: %s\n", err);
        return false;
    }
    res->kv_bytes = (uint64_t)n_ctx * in->kv_pos_bytes;
    res->recurrent_bytes = bd_session_recurrent_bytes(s);
    if (!o->json) fprintf(stderr, "blockdraft bench: running (threads %d, reps %d)...\n", o->threads, o->reps);
    bool ok = o->n_prompt <= 0 || run_pp(s, o, n_vocab, rng, &res->pp);
    if (ok && o->n_gen > 0) {
        ok = run_tg(s, o, n_vocab, rng, &res->tg);
        /* Bytes read for N tokens from an empty cache: N x streamed
         * weights + the KV prefix each step attends to (1 + ... + N). */
        double bytes = (double)o->n_gen * in->stream_bytes + (double)in->kv_pos_bytes * o->n_gen * (o->n_gen + 1) / 2.0;
        res->tg_gbps = bytes / o->n_gen * res->tg.mean / 1e9;
        res->tg_gbps_sd = bytes / o->n_gen * res->tg.sd / 1e9;
    }
    if (ok && o->verify_max > 0) ok = run_verify(s, o, in, n_vocab, rng, res);
    bd_session_free(s);
    return ok;
}

/* Speculative end to end with the draft model (-md). */
static bool bench_draft(bd_model *m, const bench_opts *o, const bench_info *in, bench_result *res) {
    char err[512];
    bd_model *dm = bd_model_open(o->draft, err, sizeof err);
    if (!dm) {
        fprintf(stderr, "blockdraft bench: draft model: %s\n", err);
        return false;
    }
    bool ok = false;
    struct stat sb;
    if (!stat(o->draft, &sb)) res->draft_file_bytes = (uint64_t)sb.st_size;
    res->draft_interleaved_bytes = bd_model_interleaved_bytes(dm);
    uint64_t kv = 0;
    if (o->n_gen <= 0) fprintf(stderr, "blockdraft bench: the speculative test needs -n > 0\n");
    else if ((ok = run_spec(m, dm, o, res, &kv, in)) && kv > res->kv_bytes)
        res->kv_bytes = kv; /* the sessions live one after the other */
    bd_model_free(dm);
    return ok;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    int rc = bench_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    rc = 1;
    char err[512];
    bench_result res = {0};
    res.peak_gbps = o.peak_gbps;
    res.load_before = load_avg();
    if (o.bw_probe) {
        double g = bw_probe(o.threads, &res.peak_huge);
        if (g > 0) {
            res.peak_gbps = g;
            res.peak_probed = true;
        } else {
            fprintf(stderr, "blockdraft bench: warning: the bandwidth probe failed; using %.1f GB/s\n", o.peak_gbps);
        }
    }
    bd_model *m = bd_model_open(o.model, err, sizeof err);
    if (!m) {
        fprintf(stderr, "blockdraft bench: %s\n", err);
        return 1;
    }
    if (!strcmp(bd_model_arch(m), "dflash")) {
        fprintf(stderr, "blockdraft bench: %s is a DFlash drafter; pass it with -md next to its target (-m)\n", o.model);
        goto done;
    }
    bench_info in = bench_info_of(m, o.model, &o.kv);
    bd_rng rng;
    bd_rng_seed(&rng, o.seed);
    if (!bench_target(m, &o, &in, &rng, &res)) goto done;
    if (o.draft && !bench_draft(m, &o, &in, &res)) goto done;

    res.load_after = load_avg();
    struct rusage ru;
    if (!getrusage(RUSAGE_SELF, &ru)) res.rss_bytes = (uint64_t)ru.ru_maxrss * 1024u;
    res.rss_budget =
        (uint64_t)((double)(in.file_bytes + res.draft_file_bytes + res.kv_bytes + res.recurrent_bytes) * 1.1);
    if (o.json) print_json(&o, m, &in, &res);
    else print_text(&o, m, &in, &res);
    rc = 0;
done:
    bd_model_free(m);
    return rc;
}
