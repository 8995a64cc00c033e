/*
 * kernels_rows.h - the row-group drivers, written once for the AVX2 and
 * AVX-512 files (included at the end of their row-group sections; the
 * AVX-VNNI build gets them through kernels_avx2.c).
 *
 * A row group is RG_R weight rows (one vector of lanes) unpacked block by
 * block; the drivers below walk the blocks, unpack RG_GROUPS groups per
 * block step and hand chunks of activation rows to the file's block
 * kernels, so each chunk meets RG_R x RG_GROUPS weight rows while it is in
 * L1. The including file defines:
 *   RG_R, RG_GROUPS, RG_PASS     rows per group, groups per step, tokens per pass
 *   RG_V, RG_VZERO(), RG_VSTORE(p, n, v)   its f32 vector, zero, store of n lanes
 *   RG_NT_Q4, RG_NT_Q6, RG_NT_Q8  activation rows per block-kernel call
 *   rg_q4k, rg_q6k, rg_q80 and their rg_unpack_* / rg_block_* functions
 *   (Q8_0 unpacks two blocks at a time: rg_block_q80 takes which one);
 *   RG_X8 (optional, default kernels_simd.h's rg_x8): the type of one
 *   packed Q8_0 activation block, as the file's pack() writes it.
 */
#ifndef BD_KERNELS_ROWS_H
#define BD_KERNELS_ROWS_H

#ifndef RG_X8
#define RG_X8 rg_x8
#endif

/* One block kernel per type and row count, called through a table: inlined
 * into the drivers they would crowd the drivers' register allocation. */
typedef void (*rg_block_fn)(const void *u, const block_q8_K *const *x, RG_V *acc);
typedef void (*rg8_block_fn)(const rg_q80 *u, int b, const RG_X8 *const *x, RG_V *acc);
#define RG_FN(T, N) \
    static void rg_##T##_##N(const void *u, const block_q8_K *const *x, RG_V *acc) { rg_block_##T(u, x, acc, N); }
#define RG8_FN(N) \
    static void rg_q80_##N(const rg_q80 *u, int b, const RG_X8 *const *x, RG_V *acc) { rg_block_q80(u, b, x, acc, N); }
#define RG_FNS4(M, ...) M(__VA_ARGS__ 1) M(__VA_ARGS__ 2) M(__VA_ARGS__ 3) M(__VA_ARGS__ 4)
#define RG_FNS8(M, ...) RG_FNS4(M, __VA_ARGS__) M(__VA_ARGS__ 5) M(__VA_ARGS__ 6) M(__VA_ARGS__ 7) M(__VA_ARGS__ 8)
#define RG_FNS_(NT, M, ...) RG_FNS##NT(M, __VA_ARGS__)
#define RG_FNS(NT, M, ...) RG_FNS_(NT, M, __VA_ARGS__)
#define RG_TAB4(P) P##1, P##2, P##3, P##4
#define RG_TAB8(P) RG_TAB4(P), P##5, P##6, P##7, P##8
#define RG_TAB_(NT, P) RG_TAB##NT(P)
#define RG_TAB(NT, P) RG_TAB_(NT, P)
RG_FNS(RG_NT_Q4, RG_FN, q4k, )
RG_FNS(RG_NT_Q6, RG_FN, q6k, )
RG_FNS(RG_NT_Q8, RG8_FN, )
static const rg_block_fn k_rg_q4k[RG_NT_Q4] = {RG_TAB(RG_NT_Q4, rg_q4k_)};
static const rg_block_fn k_rg_q6k[RG_NT_Q6] = {RG_TAB(RG_NT_Q6, rg_q6k_)};
static const rg8_block_fn k_rg_q80[RG_NT_Q8] = {RG_TAB(RG_NT_Q8, rg_q80_)};

/* Prefetch block i of the RG_R x 2 rows after the call's last group (the
 * caller's next work item, often; a prefetch past the matrix is harmless),
 * so that it starts warm. */
static inline void rg_warm_next(const uint8_t *w, size_t ws, int ng, size_t bb, int64_t i) {
    for (int r = RG_R * ng; r < RG_R * ng + 2 * RG_R; r++)
        for (size_t o = 0; o < bb; o += 64) _mm_prefetch((const char *)w + (size_t)r * ws + (size_t)i * bb + o, _MM_HINT_T1);
}

/* Q4_K / Q6_K: nw (<= RG_R RG_GROUPS) rows at w against activation rows
 * t0 .. t0 + nt - 1 (packed or in place, rg_xblock). */
static void rg_groups(uint32_t type, int64_t nb, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs,
                      const void *pack, int64_t t0, int nt, float *y, int64_t ldy) {
    union rg_u {
        rg_q4k q4;
        rg_q6k q6;
    } ub[RG_GROUPS] __attribute__((aligned(64)));
    RG_V acc[RG_GROUPS][RG_PASS];
    const int ng = (nw + RG_R - 1) / RG_R;
    for (int g = 0; g < ng; g++)
        for (int t = 0; t < nt; t++) acc[g][t] = RG_VZERO();
    const bool q4 = type == BD_TYPE_Q4_K;
    const rg_block_fn *fn = q4 ? k_rg_q4k : k_rg_q6k;
    const int step = q4 ? RG_NT_Q4 : RG_NT_Q6;
    const size_t bb = q4 ? sizeof(block_q4_K) : sizeof(block_q6_K);
    for (int64_t i = 0; i < nb; i++) {
        rg_warm_next(w, ws, ng, bb, i);
        for (int g = 0; g < ng; g++) {
            const uint8_t *wg = w + (size_t)(RG_R * g) * ws;
            const int n = nw - RG_R * g < RG_R ? nw - RG_R * g : RG_R;
            if (q4) rg_unpack_q4k(wg, ws, n, i, &ub[g].q4);
            else rg_unpack_q6k(wg, ws, n, i, &ub[g].q6);
        }
        for (int t = 0; t < nt; t += step) {
            const block_q8_K *x[8];
            const int n = nt - t < step ? nt - t : step;
            for (int j = 0; j < n; j++) x[j] = rg_xblock(xq, xs, pack, nb, t0 + t + j, i);
            for (int g = 0; g < ng; g++) fn[n - 1](&ub[g], x, &acc[g][t]);
        }
    }
    for (int g = 0; g < ng; g++) {
        const int n = nw - RG_R * g < RG_R ? nw - RG_R * g : RG_R;
        for (int t = 0; t < nt; t++) RG_VSTORE(y + (t0 + t) * ldy + RG_R * g, n, acc[g][t]);
    }
}

/* Q8_0 (tile order): the same against packed activation rows, two blocks
 * per unpacking. */
static void rg8_groups(int64_t nb, const uint8_t *w, size_t ws, int nw, const void *pack, int64_t t0, int nt, float *y,
                       int64_t ldy) {
    rg_q80 ub[RG_GROUPS] __attribute__((aligned(64)));
    RG_V acc[RG_GROUPS][RG_PASS];
    const int ng = (nw + RG_R - 1) / RG_R;
    for (int g = 0; g < ng; g++)
        for (int t = 0; t < nt; t++) acc[g][t] = RG_VZERO();
    const RG_X8 *xp = pack;
    for (int64_t i = 0; i < nb; i += 2) {
        const int two = i + 1 < nb;
        rg_warm_next(w, ws, ng, 2 * sizeof(block_q8_0), i / 2);
        for (int g = 0; g < ng; g++) {
            const int n = nw - RG_R * g < RG_R ? nw - RG_R * g : RG_R;
            rg_unpack_q80(w + (size_t)(RG_R * g) * ws, ws, n, i, two, &ub[g]);
        }
        for (int b = 0; b <= two; b++)
            for (int t = 0; t < nt; t += RG_NT_Q8) {
                const RG_X8 *x[8];
                const int n = nt - t < RG_NT_Q8 ? nt - t : RG_NT_Q8;
                for (int j = 0; j < n; j++) {
                    const int64_t T = t0 + t + j;
                    x[j] = xp + ((T / 16) * nb + i + b) * 16 + T % 16;
                }
                for (int g = 0; g < ng; g++) k_rg_q80[n - 1](&ub[g], b, x, &acc[g][t]);
            }
    }
    for (int g = 0; g < ng; g++) {
        const int n = nw - RG_R * g < RG_R ? nw - RG_R * g : RG_R;
        for (int t = 0; t < nt; t++) RG_VSTORE(y + (t0 + t) * ldy + RG_R * g, n, acc[g][t]);
    }
}

static bool rg_supports(uint32_t type, int64_t ncols) {
    if (ncols <= 0) return false;
    if (type == BD_TYPE_Q8_0) return ncols % QK8_0 == 0;
    return (type == BD_TYPE_Q4_K || type == BD_TYPE_Q6_K) && ncols % QK_K == 0;
}

/* bd_tile_ops.rows: passes of up to RG_PASS activation rows, each over all
 * rows of the call, RG_GROUPS groups at a time: a pass's activations stay
 * in cache while the weights come by (from L2 after the first pass). */
static void rg_rows(uint32_t type, int64_t ncols, const void *w, size_t ws, int nw, const void *xq, size_t xs,
                    const void *pack, int64_t n_tok, float *y, int64_t ldy) {
    const int step = RG_R * RG_GROUPS;
    for (int64_t t0 = 0; t0 < n_tok; t0 += RG_PASS) {
        const int nt = (int)(n_tok - t0 < RG_PASS ? n_tok - t0 : RG_PASS);
        for (int r0 = 0; r0 < nw; r0 += step) {
            const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * ws;
            const int n = nw - r0 < step ? nw - r0 : step;
            if (type == BD_TYPE_Q8_0) rg8_groups(ncols / QK8_0, wr, ws, n, pack, t0, nt, y + r0, ldy);
            else rg_groups(type, ncols / QK_K, wr, ws, n, xq, xs, pack, t0, nt, y + r0, ldy);
        }
    }
}

#endif
