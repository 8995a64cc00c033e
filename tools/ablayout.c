/*
 * ablayout.c - in-process A/B of the weight layouts: the same model opened
 * twice, once in the file's layout (BLOCKDRAFT_INTERLEAVE=0) and once
 * interleaved (=1, kernels.h's BD_LAYOUT_IL16), one thread pool, and the
 * two sessions fed the same tokens alternately, so that the machine's
 * slow and fast phases hit both alike (whole-process A/Bs on a shared VM
 * swing more than the difference). Per round: one decode token and one
 * n-token verify forward (then truncated away) on each side. Prints the
 * median milliseconds of each, and fails if any logit differs between
 * the two (the layouts must give the same bits). Built by `make ablayout`;
 * not part of the tests. Needs memory for two copies of the model.
 *
 *   ablayout MODEL.gguf [THREADS=2] [ROUNDS=12] [DEPTH=512] [N=16]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "blockdraft.h"

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ablayout MODEL.gguf [THREADS] [ROUNDS] [DEPTH] [N]\n");
        return 2;
    }
    const int threads = argc > 2 ? atoi(argv[2]) : 2, rounds = argc > 3 ? atoi(argv[3]) : 12;
    const int depth = argc > 4 ? atoi(argv[4]) : 512, nv = argc > 5 ? atoi(argv[5]) : 16;
    if (threads < 1 || rounds < 1 || depth < 1 || nv < 1 || nv > 32) return 2;
    char err[512];
    bd_model *m[2];
    for (int s = 0; s < 2; s++) {
        setenv("BLOCKDRAFT_INTERLEAVE", s ? "1" : "0", 1);
        m[s] = bd_model_open(argv[1], err, sizeof err);
        if (!m[s]) {
            fprintf(stderr, "ablayout: %s\n", err);
            return 1;
        }
    }
    printf("model %s: interleaved %.3f GB (A: file layout) / %.3f GB (B)\n", argv[1],
           bd_model_interleaved_bytes(m[0]) / 1e9, bd_model_interleaved_bytes(m[1]) / 1e9);
    bd_threadpool *tp = bd_threadpool_create(threads, err, sizeof err);
    if (!tp) return 1;
    bd_session_params sp = bd_session_default_params();
    sp.n_ctx = depth + rounds + 64;
    sp.threadpool = tp;
    bd_session *ss[2];
    for (int s = 0; s < 2; s++)
        if (!(ss[s] = bd_session_create(m[s], &sp, err, sizeof err))) {
            fprintf(stderr, "ablayout: %s\n", err);
            return 1;
        }
    const int32_t nvocab = bd_model_n_vocab(m[0]);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(depth + nv));
    uint64_t r = 12345;
    for (int i = 0; i < depth + nv; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((r >> 33) % (uint64_t)nvocab);
    }
    for (int s = 0; s < 2; s++)
        if (!bd_session_forward(ss[s], tok, depth, BD_LOGITS_NONE, err, sizeof err)) return 1;
    double *dt[2][2];
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 2; k++) dt[s][k] = calloc((size_t)rounds, sizeof(double));
    bool same = true;
    for (int i = 0; i < rounds; i++) {
        for (int k = 0; k < 2; k++)
            for (int s0 = 0; s0 < 2; s0++) {
                const int s = (s0 + i) % 2; /* who goes first alternates */
                const int n = k ? nv : 1, len = bd_session_length(ss[s]);
                const double t0 = bd_time_ms();
                if (!bd_session_forward(ss[s], tok + (k ? depth : i % depth), n, k ? BD_LOGITS_ALL : BD_LOGITS_LAST, err,
                                        sizeof err)) {
                    fprintf(stderr, "ablayout: %s\n", err);
                    return 1;
                }
                dt[s][k][i] = bd_time_ms() - t0;
                if (k && !bd_session_truncate(ss[s], len)) return 1;
            }
        /* the verify forwards' logits, side against side */
        for (int j = 0; j < nv; j++)
            if (memcmp(bd_session_logits(ss[0], j), bd_session_logits(ss[1], j), sizeof(float) * (size_t)nvocab))
                same = false;
    }
    printf("rounds %d, depth %d, %d threads: decode A %.2f ms, B %.2f ms | verify t(%d) A %.2f ms, B %.2f ms | "
           "logits %s\n",
           rounds, depth, threads, median(dt[0][0], rounds), median(dt[1][0], rounds), nv, median(dt[0][1], rounds),
           median(dt[1][1], rounds), same ? "identical" : "DIFFER");
    for (int s = 0; s < 2; s++) {
        bd_session_free(ss[s]);
        bd_model_free(m[s]);
    }
    bd_threadpool_free(tp);
    return same ? 0 : 1;
}
