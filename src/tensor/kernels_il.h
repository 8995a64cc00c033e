/*
 * kernels_il.h - the row-group driver on interleaved weights (kernels.h's
 * BD_LAYOUT_IL16), written once for the AVX2 and AVX-512 files (included
 * after kernels_rows.h, whose block kernels it calls).
 *
 * A 16-row group of the layout holds 16 / RG_R of the file's row groups
 * ("subs": the AVX2 file's vectors have 8 lanes, so rows 0-7 are the low
 * 32 bytes of every 64-byte word and rows 8-15 the high ones). The
 * including file defines, besides what kernels_rows.h asks for:
 *   il_unpack_q4k(p, sub, u), il_unpack_q6k(p, sub, u)
 *       block p of a group (16 bb bytes) to the unpacked form of its rows
 *       RG_R sub .. RG_R sub + RG_R - 1, as rg_unpack_* would give it;
 *   IL_FEW(type, nb, wg, xq, xs, nt, y, ldy)  optional: nt (<=
 *       IL_FEW_MAX_FOR(type)) activation rows against a whole group,
 *       unpacking each code vector once for all of them (decode and short
 *       verifies), with IL_FEW_ROWS the largest batch that goes there
 *       (IL_FEW_ROWS_FOR(type), optional: per type);
 *   IL_PAIR_Q4, IL_PAIR_NT  optional (files with two subs): two tables
 *       of il_pair_fn by row count 1..IL_PAIR_NT taking both subs' Q4_K
 *       blocks at once, used by il_groups in place of the per-sub block
 *       kernel (same bits). [0][n - 1] reads unpacked blocks; [1][n - 1]
 *       is given the interleaved block's address and reads the codes from
 *       there, the unpacked blocks holding only their scales
 *       (il_scales_q4k); il_groups uses [1] for batches of up to
 *       IL_FUSED_ROWS rows;
 *   IL_PAIR_Q6, IL_PAIR_NT6  optional (files with two subs): the same for
 *       Q6_K, one table of il_pair6_fn by row count 1..IL_PAIR_NT6 on
 *       unpacked blocks;
 *   il8_rows(nb, wg, x, nt, y, ldy)  Q8_0: nt (<= IL8_MAX, which divides
 *       16) packed activation rows (RG_X8, row j's block i at x[16 i + j])
 *       against a whole group of nb blocks, in the tile order.
 */
#ifndef BD_KERNELS_IL_H
#define BD_KERNELS_IL_H

#define IL_SUBS (16 / RG_R)
#if defined(IL_FEW) && !defined(IL_FEW_ROWS_FOR)
#define IL_FEW_ROWS_FOR(type) IL_FEW_ROWS
#endif
#define IL_GROUPS 4 /* 16-row groups per block step for prompts (activations read once per 64 weight rows) */
#ifdef IL_PAIR_Q6
#define IL_PAIRS_Q6 true
#else
#define IL_PAIRS_Q6 false
#define IL_PAIR_NT6 1 /* (unused: Q6_K takes the per-sub block kernels) */
#endif

/* Groups g0 .. g0 + ng - 1 of the interleaved rows at w (gs bytes per
 * group) against activation rows t0 .. t0 + nt - 1 (nt <= RG_PASS), read
 * in place. */
static void il_groups(uint32_t type, int64_t nb, const uint8_t *w, size_t gs, int g0, int ng, const uint8_t *xq,
                      size_t xs, int64_t t0, int nt, float *y, int64_t ldy) {
    union {
        rg_q4k q4;
        rg_q6k q6;
    } ub[IL_GROUPS * IL_SUBS] __attribute__((aligned(64)));
    RG_V acc[IL_GROUPS * IL_SUBS][RG_PASS];
    const int nu = ng * IL_SUBS;
    for (int g = 0; g < nu; g++)
        for (int t = 0; t < nt; t++) acc[g][t] = RG_VZERO();
    const bool q4 = type == BD_TYPE_Q4_K;
#ifdef IL_PAIR_Q4
    /* few rows: the pair kernel reads the codes from the block itself
     * (each call unpacks them again, in registers) */
    const bool fused = q4 && nt <= IL_FUSED_ROWS;
#endif
    const rg_block_fn *fn = q4 ? k_rg_q4k : k_rg_q6k;
    const int step = q4 ? RG_NT_Q4 : RG_NT_Q6;
    const size_t ib = 16 * (q4 ? sizeof(block_q4_K) : sizeof(block_q6_K)); /* bytes of a block of 16 rows */
    for (int64_t i = 0; i < nb; i++) {
        for (int g = 0; g < ng; g++) {
            const uint8_t *p = w + (size_t)(g0 + g) * gs + (size_t)i * ib;
            il_prefetch(p, ib);
            for (int sub = 0; sub < IL_SUBS; sub++) {
#ifdef IL_PAIR_Q4
                if (fused) il_scales_q4k(p, sub, &ub[IL_SUBS * g + sub].q4);
                else
#endif
                if (q4) il_unpack_q4k(p, sub, &ub[IL_SUBS * g + sub].q4);
                else il_unpack_q6k(p, sub, &ub[IL_SUBS * g + sub].q6);
            }
        }
#ifdef IL_PAIR_Q4
        if (q4 || IL_PAIRS_Q6) {
            /* calls of at most IL_PAIR_NT (Q6_K: IL_PAIR_NT6) rows,
             * balanced (16 rows at 3 as 3 3 3 3 2 2, not 3 3 3 3 3 1) */
            const int mx = q4 ? IL_PAIR_NT : IL_PAIR_NT6;
            for (int t = 0, left = (nt + mx - 1) / mx; t < nt; left--) {
                const block_q8_K *x[8];
                const int n = (nt - t + left - 1) / left;
                for (int j = 0; j < n; j++) x[j] = (const block_q8_K *)(xq + (size_t)(t0 + t + j) * xs) + i;
                for (int g = 0; g < nu; g += 2) {
                    if (q4)
                        IL_PAIR_Q4[fused][n - 1](fused ? w + (size_t)(g0 + g / 2) * gs + (size_t)i * ib : NULL,
                                                 &ub[g], &ub[g + 1], x, &acc[g][t], &acc[g + 1][t]);
#ifdef IL_PAIR_Q6
                    else IL_PAIR_Q6[n - 1](&ub[g], &ub[g + 1], x, &acc[g][t], &acc[g + 1][t]);
#endif
                }
                t += n;
            }
            continue;
        }
#endif
        for (int t = 0; t < nt; t += step) {
            const block_q8_K *x[8];
            const int n = nt - t < step ? nt - t : step;
            for (int j = 0; j < n; j++) x[j] = (const block_q8_K *)(xq + (size_t)(t0 + t + j) * xs) + i;
            for (int g = 0; g < nu; g++) fn[n - 1](&ub[g], x, &acc[g][t]);
        }
    }
    for (int g = 0; g < nu; g++)
        for (int t = 0; t < nt; t++) RG_VSTORE(y + (t0 + t) * ldy + 16 * g0 + RG_R * g, RG_R, acc[g][t]);
}

/* bd_tile_ops.il_rows. Batches up to IL_FEW_ROWS go group by group
 * through IL_FEW where the file has it (IL_FEW_MAX rows a call; a group
 * met again for the next rows is in L2). Larger batches up to 16 rows take
 * one group at a time in il_groups (il_prefetch on its block stream;
 * four groups side by side measured no better), larger ones four, so that
 * each pass of activations meets 64 weight rows as in rg_rows. */
static void il_rows(uint32_t type, int64_t ncols, const void *w, size_t ws, int nw, const void *xq, size_t xs,
                    const void *pack, int64_t n_tok, float *y, int64_t ldy) {
    const int ngr = nw / 16, per = n_tok <= 16 ? 1 : IL_GROUPS;
    if (type == BD_TYPE_Q8_0) {
        /* group by group, all activation rows against each: a group is
         * read from memory once and then from L1 / L2, while the packed
         * rows (16 x 40 bytes a block) stream past it */
        const int64_t nb = ncols / QK8_0;
        for (int g = 0; g < ngr; g++)
            for (int64_t t0 = 0; t0 < n_tok; t0 += IL8_MAX)
                il8_rows(nb, (const uint8_t *)w + (size_t)g * 16 * ws, (const RG_X8 *)pack + (t0 / 16) * 16 * nb + t0 % 16,
                         (int)(n_tok - t0 < IL8_MAX ? n_tok - t0 : IL8_MAX), y + t0 * ldy + 16 * g, ldy);
        return;
    }
#ifdef IL_FEW
    if (n_tok <= IL_FEW_ROWS_FOR(type)) {
        /* as few calls as the type's widest allows, their rows balanced
         * (9 rows as 5 + 4, not 8 + 1: a call's unpacking is shared by
         * its rows, and its products are spread evenly) */
        const int64_t mx = IL_FEW_MAX_FOR(type), calls = (n_tok + mx - 1) / mx, per = (n_tok + calls - 1) / calls;
        for (int g = 0; g < ngr; g++)
            for (int64_t t0 = 0; t0 < n_tok; t0 += per)
                IL_FEW(type, ncols / QK_K, (const uint8_t *)w + (size_t)g * 16 * ws, (const uint8_t *)xq + t0 * xs, xs,
                       (int)(n_tok - t0 < per ? n_tok - t0 : per), y + t0 * ldy + 16 * g, ldy);
        return;
    }
#endif
    for (int64_t t0 = 0; t0 < n_tok; t0 += RG_PASS) {
        const int nt = (int)(n_tok - t0 < RG_PASS ? n_tok - t0 : RG_PASS);
        for (int g0 = 0; g0 < ngr; g0 += per)
            il_groups(type, ncols / QK_K, w, 16 * ws, g0, ngr - g0 < per ? ngr - g0 : per, xq, xs, t0, nt, y, ldy);
    }
}

#endif
