/*
 * kbench.c - kernel microbenchmark: one weight matrix times nx activation
 * rows through each kernel level's vec_dot_n, levels alternating within
 * one process (so a busy machine slows all of them alike), the fastest of
 * the repetitions reported. Built by `make kbench`; not part of the tests.
 *
 *   kbench [-t TYPE] [-r ROWS] [-c COLS] [-n NX] [-j THREADS] [-k REPS]
 *          [-m MiB] [-l LEVELS] [-o OFFSET] [-H 0|1] [-P BYTES,...]
 *
 * -m: bytes of weights streamed per repetition (copies of the matrix, so
 *     that from a few hundred MiB on they come from memory as in decode;
 *     -m 0 reuses one copy, which then sits in cache: the kernel's compute
 *     rate). -l: comma-separated levels (default: every level that runs).
 * -P: the interleaved runs once per weight-prefetch distance in the list
 *     (bd_il_prefetch_bytes, "LEVEL/il@BYTES"), alternating in the process
 *     as the levels do: the memory state of a VM that swings between
 *     processes is then shared by every distance compared.
 * -F: the same for the avx2 level's Q6_K few-row routing
 *     (bd_il_few_rows_q6k_avx2, "LEVEL/il%rN": batches up to N rows through
 *     il_few_q6k), and -A for its Q4_K pair-kernel rows per call
 *     (bd_il_pair_rows_avx2, "LEVEL/il&aN"), to measure where each pays on
 *     a new CPU (-P, -F and -A combine: every combination is an entry).
 * -H 1 (the default): the weights on transparent huge pages where the
 *     kernel has them, as a loaded model's are (bd_fmap_prefetch); -H 0:
 *     small pages. From memory the two differ by much (a TLB miss per 4 KiB
 *     under a hypervisor), so figures are comparable only at the same -H.
 * Prints per level: best and median ms per repetition, weight GB/s (best),
 * and integer GOPS (2 x weights x nx / time); a level with row-group
 * kernels for the type (the table's tile entry) is measured a second time
 * through them ("LEVEL/rows"), and a third on an interleaved copy of the
 * weights through its il_rows ("LEVEL/il": kernels.h's BD_LAYOUT_IL16,
 * what bd_model_open builds; rows a multiple of 16).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tensor/kernels.h"
#include "tensor/tensor.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}

typedef struct {
    const bd_kernels *k;
    uint32_t type;
    const uint8_t *w; /* [rows][row_bytes] */
    size_t row_bytes;
    int64_t rows, cols;
    const uint8_t *x; /* [nx][xs] */
    size_t xs;
    int nx;
    float *y; /* [nx][rows] */
    bool tiles;         /* through k->tile->rows, 64 rows per call */
    bool il;            /* w interleaved, through k->tile->il_rows, 64 rows per call */
    const void *pack;
} job;

#define CHUNK 64

/* Each thread takes a contiguous share of the chunks, in order, as
 * matmul.c deals them out (its stealing from a slow thread's share left
 * out: a thread's next chunk then follows the one its prefetch ran into). */
static void run(void *arg, int ith, int nth) {
    job *j = arg;
    float out[16];
    const long long nc = (j->rows + CHUNK - 1) / CHUNK;
    for (long long c = nc * ith / nth; c < nc * (ith + 1) / nth; c++) {
        const int64_t r0 = c * CHUNK, r1 = r0 + CHUNK < j->rows ? r0 + CHUNK : j->rows;
        if (j->il) {
            j->k->tile->il_rows(j->type, j->cols, j->w + (size_t)r0 * j->row_bytes, j->row_bytes, (int)(r1 - r0), j->x,
                                j->xs, j->pack, j->nx, j->y + r0, j->rows);
            continue;
        }
        if (j->tiles) {
            j->k->tile->rows(j->type, j->cols, j->w + (size_t)r0 * j->row_bytes, j->row_bytes, (int)(r1 - r0), j->x,
                             j->xs, j->pack, j->nx, j->y + r0, j->rows);
            continue;
        }
        for (int t0 = 0; t0 < j->nx; t0 += 16) {
            const int n = j->nx - t0 < 16 ? j->nx - t0 : 16;
            for (int64_t r = r0; r < r1; r++) {
                j->k->vec_dot_n[j->type](j->cols, j->w + (size_t)r * j->row_bytes, j->x + (size_t)t0 * j->xs, j->xs, n,
                                         out);
                for (int t = 0; t < n; t++) j->y[(t0 + t) * j->rows + r] = out[t];
            }
        }
    }
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *tname = "q4_K", *levels = NULL;
    int64_t rows = 9728, cols = 2560;
    int nx = 1, threads = 1, reps = 20, offset = 0, want_huge = 1;
    double mib = 512;
    uint32_t pfs[8];
    int npf = 0, fews[8], nfew = 0, pairs[8], npair = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "-t")) tname = v;
        else if (!strcmp(a, "-r")) rows = atoll(v);
        else if (!strcmp(a, "-c")) cols = atoll(v);
        else if (!strcmp(a, "-n")) nx = atoi(v);
        else if (!strcmp(a, "-j")) threads = atoi(v);
        else if (!strcmp(a, "-k")) reps = atoi(v);
        else if (!strcmp(a, "-m")) mib = atof(v);
        else if (!strcmp(a, "-l")) levels = v;
        else if (!strcmp(a, "-o")) offset = atoi(v) & 63;
        else if (!strcmp(a, "-H")) want_huge = atoi(v) != 0;
        else if (!strcmp(a, "-P")) {
            for (const char *p = v; *p && npf < 8; p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p))
                pfs[npf++] = (uint32_t)atol(p);
        } else if (!strcmp(a, "-F")) {
            for (const char *p = v; *p && nfew < 8; p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p))
                fews[nfew++] = atoi(p);
        } else if (!strcmp(a, "-A")) {
            for (const char *p = v; *p && npair < 8; p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p))
                pairs[npair++] = atoi(p);
        }
        else {
            fprintf(stderr, "kbench: unknown option %s\n", a);
            return 2;
        }
    }
    /* each level gets at most 2 + 64 entries (NK); the pair kernels' table
     * holds 1..4 rows a call */
    if ((npf ? npf : 1) * (nfew ? nfew : 1) * (npair ? npair : 1) > 64) {
        fprintf(stderr, "kbench: -P x -F x -A give more than 64 combinations\n");
        return 2;
    }
    for (int i = 0; i < nfew; i++)
        if (fews[i] < 1 || fews[i] > 512) {
            fprintf(stderr, "kbench: -F %d: want 1..512 rows\n", fews[i]);
            return 2;
        }
    for (int i = 0; i < npair; i++)
        if (pairs[i] < 1 || pairs[i] > 4) {
            fprintf(stderr, "kbench: -A %d: want 1..4 rows a call\n", pairs[i]);
            return 2;
        }
    uint32_t type = BD_TYPE_COUNT;
    for (uint32_t t = 0; t < BD_TYPE_COUNT; t++)
        if (bd_type_get(t) && !strcmp(bd_type_name(t), tname)) type = t;
    const bd_type_traits *tr = bd_type_get(type);
    if (!tr || !tr->supported || nx < 1 || nx > 512) {
        fprintf(stderr, "kbench: bad type %s or nx %d\n", tname, nx);
        return 2;
    }
    uint64_t rb = 0, xb = 0;
    if (!bd_row_size(type, cols, &rb) || !bd_row_size(tr->vec_dot_type, cols, &xb)) return 2;
    const size_t mat = (size_t)rb * (size_t)rows;
    const int copies = mib > 0 ? (int)((mib * 1048576.0 + (double)mat - 1) / (double)mat) : 1;
    bool huge = false, huge_il = false;
    const size_t wbytes = mat * (size_t)copies + 64;
    uint8_t *w = want_huge ? bd_alloc_huge(wbytes, &huge) : bd_alloc(wbytes);
    const size_t xs = ((size_t)xb + 63) & ~(size_t)63;
    uint8_t *x = bd_alloc(xs * 512);
    float *y = bd_alloc(sizeof(float) * 512 * (size_t)rows), *f = bd_alloc(sizeof(float) * (size_t)cols);
    if (!w || !x || !y || !f) return 1;
    /* weights: quantized gaussian rows (real scales and codes), copied */
    float *row = bd_alloc(sizeof(float) * (size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) row[c] = (float)((int64_t)(rng() % 2001) - 1000) * 1e-3f;
        bd_quantize_row(type, row, w + (size_t)r * rb, cols);
    }
    for (int c = 1; c < copies; c++) memcpy(w + (size_t)c * mat, w, mat);
    /* the interleaved copies (same bytes per copy, the layout's order) */
    uint8_t *wi = NULL, *wi_base = NULL;
    if (bd_il16_supports(type, cols) && rows % BD_IL16_ROWS == 0) {
        wi = wi_base = want_huge ? bd_alloc_huge(wbytes, &huge_il) : bd_alloc(wbytes);
        if (!wi) return 1;
        wi += offset;
        for (int64_t g = 0; g < rows / BD_IL16_ROWS; g++)
            bd_il16_pack_group(type, cols, w + (size_t)g * BD_IL16_ROWS * rb, rb, wi + (size_t)g * BD_IL16_ROWS * rb);
        for (int c = 1; c < copies; c++) memcpy(wi + (size_t)c * mat, wi, mat);
    }
    for (int t = 0; t < nx; t++) {
        for (int64_t c = 0; c < cols; c++) f[c] = (float)((int64_t)(rng() % 2001) - 1000) * 1e-3f;
        bd_quantize_row(tr->vec_dot_type, f, x + (size_t)t * xs, cols);
    }
    enum { NK = 72 * BD_ISA_COUNT };
    const bd_kernels *ks[NK];
    bool kt[NK], kil[NK];
    uint32_t kpf[NK] = {0}; /* the il entries' prefetch distance (0: the table's) */
    int kfew[NK] = {0};     /* ... their Q6_K few-row routing (0: the table's) */
    int kpair[NK] = {0};    /* ... and their Q4_K pair-kernel rows (0: the table's) */
    char kname[NK][32];
    int nk = 0;
    for (int i = 0; i < BD_ISA_COUNT; i++) {
        const bd_kernels *k = bd_kernels_for((bd_isa)i);
        if (!k) continue;
        if (levels) {
            char buf[128];
            snprintf(buf, sizeof buf, ",%s,", levels);
            char pat[32];
            snprintf(pat, sizeof pat, ",%s,", k->name);
            if (!strstr(buf, pat)) continue;
        }
        ks[nk] = k;
        kt[nk] = kil[nk] = false;
        snprintf(kname[nk++], sizeof kname[0], "%s", k->name);
        if (k->tile && k->tile->supports(type, cols)) {
            ks[nk] = k;
            kt[nk] = true;
            kil[nk] = false;
            snprintf(kname[nk++], sizeof kname[0], "%s/rows", k->name);
        }
        if (wi && k->tile && k->tile->il_rows)
            for (int p = 0; p < (npf ? npf : 1); p++)
                for (int q = 0; q < (nfew ? nfew : 1); q++)
                    for (int a = 0; a < (npair ? npair : 1); a++) {
                        ks[nk] = k;
                        kt[nk] = false;
                        kil[nk] = true;
                        kpf[nk] = npf ? pfs[p] : 0;
                        kfew[nk] = nfew ? fews[q] : 0;
                        kpair[nk] = npair ? pairs[a] : 0;
                        char at[16] = "", fw[16] = "", pa[16] = "";
                        if (npf) snprintf(at, sizeof at, "@%u", (unsigned)pfs[p]);
                        if (nfew) snprintf(fw, sizeof fw, "%%r%d", fews[q]);
                        if (npair) snprintf(pa, sizeof pa, "&a%d", pairs[a]);
                        snprintf(kname[nk++], sizeof kname[0], "%s/il%s%s%s", k->name, at, fw, pa);
                    }
    }
    /* packed activations for the row groups that want them (and Q8_0's il_rows) */
    void *pack[NK] = {0};
    for (int i = 0; i < nk; i++)
        if ((kt[i] || (kil[i] && type == BD_TYPE_Q8_0)) && ks[i]->tile->pack && ks[i]->tile->pack_bytes(type, cols, nx) > 0) {
            pack[i] = bd_alloc(ks[i]->tile->pack_bytes(type, cols, nx));
            for (int64_t g = 0; g < (nx + 15) / 16; g++) ks[i]->tile->pack(type, cols, x, xs, nx, g, pack[i]);
        }
    bd_pool *pool = threads > 1 ? bd_pool_create(threads) : NULL;
    double *ms = calloc((size_t)nk * (size_t)reps, sizeof(double));
    printf("kbench: %s %lld x %lld, nx %d, %d thread(s), %d copies (%.0f MiB streamed per rep, %s pages), %d reps; "
           "cpu: %s\n",
           tname, (long long)rows, (long long)cols, nx, threads, copies, (double)mat * copies / 1048576.0,
           huge && (!wi || huge_il) ? "huge" : "small", reps, bd_cpu_describe());
    const uint32_t pf0 = bd_il_prefetch_bytes;
    const int few0 = bd_il_few_rows_q6k_avx2, pair0 = bd_il_pair_rows_avx2;
    for (int rep = -1; rep < reps; rep++) /* rep -1: warm-up */
        for (int i = 0; i < nk; i++) {
            bd_il_prefetch_bytes = kpf[i] ? kpf[i] : pf0;
            bd_il_few_rows_q6k_avx2 = kfew[i] ? kfew[i] : few0;
            bd_il_pair_rows_avx2 = kpair[i] ? kpair[i] : pair0;
            const double t0 = bd_time_ms();
            for (int c = 0; c < copies; c++) {
                job j = {.k = ks[i], .type = type, .w = (kil[i] ? wi : w) + (size_t)c * mat, .row_bytes = rb,
                         .rows = rows, .cols = cols, .x = x, .xs = xs, .nx = nx, .y = y, .tiles = kt[i],
                         .il = kil[i], .pack = pack[i]};
                if (pool) bd_pool_run(pool, run, &j);
                else run(&j, 0, 1);
            }
            if (rep >= 0) ms[i * reps + rep] = bd_time_ms() - t0;
        }
    for (int i = 0; i < nk; i++) {
        double *m = ms + i * reps;
        qsort(m, (size_t)reps, sizeof *m, cmp_d);
        const double bytes = (double)mat * copies, ops = 2.0 * (double)rows * (double)cols * nx * copies;
        printf("  %-14s best %8.3f ms  median %8.3f ms  %6.2f GB/s  %7.1f GOPS\n", kname[i], m[0], m[reps / 2],
               bytes / m[0] / 1e6, ops / m[0] / 1e6);
    }
    if (pool) bd_pool_free(pool);
    if (want_huge) {
        bd_free_huge(w, wbytes);
        bd_free_huge(wi_base, wbytes);
    } else {
        bd_free(w);
        bd_free(wi_base);
    }
    return 0;
}
