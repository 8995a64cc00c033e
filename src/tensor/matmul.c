/*
 * matmul.c - Y = X · Wᵀ for a quantized weight matrix and f32 activations.
 *
 * Two phases, each one pool run:
 *   1. convert the n_tok activation rows to the weight's vec_dot_type
 *      (Q8_0 / Q8_1 / Q8_K / F16 / BF16 / F32) into the caller's scratch;
 *   2. split the weight rows across threads; every thread walks its rows
 *      and dots each row against up to 16 activation rows at once through
 *      vec_dot_n. For decode and verify batches (<= 16 rows) each weight
 *      row is streamed from memory exactly once. For prefill the rows are
 *      taken in L2-sized tiles and each tile meets every 16-row group of
 *      activations before the next tile is loaded.
 * bd_matmul_multi runs several matrices of the same input through one
 * conversion and one pool run (work items are numbered across them);
 * bd_matmul_grouped does the same for matrices that each take their own
 * rows of one input (mixture-of-experts layers).
 *
 * Decode (1 row) and verify (n rows) both go through vec_dot_n, whose result
 * for one activation row does not depend on how many rows are batched with
 * it (tests/unit/test_kernels.c): speculative verification therefore sees
 * bit-for-bit the logits plain decoding would, which keeps greedy output
 * identical even at near-ties.
 *
 * Batches can instead take the table's row-group kernels, its tile entry
 * (kernels.h's bd_tile_ops): 16 weight rows per call (AMX tiles,
 * kernels_amx.c; AVX-512 and AVX2 / AVX-VNNI row groups, kernels_avx512.c
 * and kernels_avx2.c), each weight block unpacked once for the whole batch,
 * activations packed after the quantized rows where the kernel asks. For
 * Q4_K and Q6_K they compute the same bits as vec_dot_n (both follow
 * dot_ref.c's tile order), so any batch may go there, from the table's
 * exact_rows on (where unpacking a block once beats vec_dot_n's products).
 * Q8_0 row groups have their own f32 order (bd_vec_dot_tile_ref), so only
 * bd_matmul_fast (the drafter) sends batches there (fast_rows): an exact
 * caller's prompt must give the bits of one-row calls too, or a prompt
 * prefilled whole and the same prompt forwarded after a reused cached
 * prefix would differ (the server's prompt cache promises the same output
 * with the cache on and off). An unpacked weight block lives on the
 * stack. Matrices bd_model_open interleaved (kernels.h's BD_LAYOUT_IL16)
 * take the table's il_rows for every batch size, work items of whole
 * 16-row groups: the same bits again (tile order; Q8_0, interleaved in
 * DFlash drafters only, in its row groups' order, packed activations).
 */
#include <stdatomic.h>
#include <string.h>

#include "kernels.h"

#define MM_NX 16                  /* activation rows per weight-row pass */
#define MM_TILE_BYTES (256 << 10) /* weight rows per prefill tile: a quarter of L2 */
#define MM_SMALL_BYTES (64 << 10) /* below this (weight bytes x rows) one thread does it all */

/* Tile path (row groups): packed activations, if any, follow the quantized
 * rows in the scratch. See the file comment for which batches go there;
 * the table's row counts are where its kernels measured faster. */
static bool use_tiles(const bd_kernels *k, const bd_mat *W, int64_t n_tok, bool exact) {
    if (!k->tile || W->layout != BD_LAYOUT_ROWS) return false;
    const int64_t min = exact ? k->tile->exact_rows[W->type] : k->tile->fast_rows[W->type];
    return min > 0 && n_tok >= min && k->tile->supports(W->type, W->ncols);
}

/* Interleaved Q8_0 (a DFlash drafter's, kernels.h) through il_rows: its
 * activations are always packed, as for its row groups. */
static bool il_packs(const bd_kernels *k, const bd_mat *W) {
    return W->layout == BD_LAYOUT_IL16 && W->type == BD_TYPE_Q8_0 && k->tile && k->tile->il_rows && k->tile->pack;
}

static size_t scratch_size(const bd_mat *W, int64_t n_tok, bool exact) {
    const bd_type_traits *t = bd_type_get(W->type);
    if (!t) return 0;
    uint64_t row = 0;
    if (!bd_row_size(t->vec_dot_type, W->ncols, &row)) return 0;
    row = (row + 63) & ~(uint64_t)63;
    size_t bytes = (size_t)(row * (uint64_t)n_tok);
    const bd_kernels *k = bd_kernels_get();
    if ((use_tiles(k, W, n_tok, exact) && k->tile->pack) || il_packs(k, W))
        bytes += k->tile->pack_bytes(W->type, W->ncols, n_tok);
    return bytes;
}

size_t bd_matmul_scratch_size(const bd_mat *W, int64_t n_tok) { return scratch_size(W, n_tok, true); }

size_t bd_matmul_fast_scratch_size(const bd_mat *W, int64_t n_tok) {
    /* a fast caller may also pass fewer rows than it sized for: take the
     * larger of both paths' needs */
    size_t a = scratch_size(W, n_tok, false), b = scratch_size(W, n_tok, true);
    return a > b ? a : b;
}

/* One weight matrix of a run and its output. */
typedef struct {
    const bd_mat *W;
    float *Y;
    int64_t ldy;
    const uint8_t *xq; /* its converted activation rows (xq_stride apart) */
    int64_t n_tok;     /* and how many */
    int64_t n_chunks; /* work items of this matrix on the chosen path */
    int64_t rows;     /* weight rows per work item */
    bool tiles;       /* tile path (else vec_dot_n) */
    bool il;          /* interleaved weights through the table's il_rows (IL16 without one: il_row_dots) */
    bool packs;       /* takes the packed activations (tile path, or il_packs) */
} mm_target;

/* Work items [next, end) of one segment; a cache line each (threads take
 * from their own segment's counter, not a shared one). */
#define MM_SEGS 64
typedef struct {
    _Alignas(64) atomic_llong next;
    long long end;
} mm_seg;

typedef struct {
    const bd_kernels *k;
    mm_target *t; /* n_t targets (tm, or bd_matmul_grouped's array in the scratch) */
    mm_target tm[BD_MATMUL_MULTI];
    int n_t;
    int64_t n_chunks; /* all targets' */
    const float *X;
    int64_t ldx, n_tok, ncols;
    uint8_t *xq;
    size_t xq_stride;
    uint32_t vdt;
    uint8_t *pack;     /* packed activations (after xq), if any target takes them */
    int n_seg;         /* work-item segments of the run (one per thread, at most MM_SEGS) */
    mm_seg seg[MM_SEGS];
} mm_ctx;

/*
 * Work items (chunks of rows of one of the targets, numbered across them)
 * are cut into one contiguous segment per thread. A thread takes the items
 * of its own segment in order, then helps with the others' (from their
 * fronts), so on a shared or virtual machine a descheduled or slowed thread
 * does not hold the run up: the others take over its remaining items. A
 * thread's own items are consecutive in memory, so the kernels' prefetch
 * ahead of the block in use runs on into the next item instead of into an
 * item another thread takes (a shared counter dealt the items out
 * alternately: every item then began with demand misses, which cost most
 * on small matrices such as a mixture-of-experts layer's down projections,
 * two Q4_K blocks a row). Which thread computes a row never changes its
 * result.
 */
static bool mm_take(mm_ctx *c, int *seg, int *m, int64_t *i) {
    for (int tried = 0; tried < c->n_seg; tried++) {
        mm_seg *sg = &c->seg[*seg];
        long long v = atomic_fetch_add_explicit(&sg->next, 1, memory_order_relaxed);
        if (v >= sg->end) {
            *seg = *seg + 1 == c->n_seg ? 0 : *seg + 1;
            continue;
        }
        int j = 0;
        while (v >= c->t[j].n_chunks) v -= c->t[j++].n_chunks;
        *m = j;
        *i = (int64_t)v;
        return true;
    }
    return false;
}

static void mm_run(bd_pool *pool, bool alone, bd_pool_fn fn, mm_ctx *c) {
    const int nth = alone ? 1 : bd_pool_size(pool);
    c->n_seg = nth < MM_SEGS ? nth : MM_SEGS;
    for (int s = 0; s < c->n_seg; s++) {
        atomic_store_explicit(&c->seg[s].next, c->n_chunks * s / c->n_seg, memory_order_relaxed);
        c->seg[s].end = c->n_chunks * (s + 1) / c->n_seg;
    }
    if (alone) fn(c, 0, 1);
    else bd_pool_run(pool, fn, c);
}

static void mm_quantize(void *arg, int ith, int nth) {
    mm_ctx *c = arg;
    int64_t lo, hi;
    bd_split(c->n_tok, ith, nth, &lo, &hi);
    bd_from_float_fn ff = c->k->from_float[c->vdt];
    for (int64_t t = lo; t < hi; t++) ff(c->X + t * c->ldx, c->xq + t * c->xq_stride, c->ncols);
}

#define MM_CHUNK_ROWS 64 /* decode/verify rows per chunk */

/* Rows per work item on the vec_dot_n paths, for n_tok activation rows. */
static int64_t mm_chunk_rows(int64_t n_tok, const bd_mat *W) {
    if (n_tok <= MM_NX) return MM_CHUNK_ROWS;
    /* prefill: tiles of rows small enough to stay in L2 while every
     * 16-token group of activations streams past them, so weights come
     * from memory once and activations once per row tile */
    int64_t tile = (int64_t)(MM_TILE_BYTES / (W->row_bytes ? W->row_bytes : 1));
    return tile < 1 ? 1 : tile;
}

#define MM_TILE_GROUPS 4 /* at most this many 16-row groups per tile work item */

/* Rows per work item on the tile path. The tiles' rows() prefetches each
 * 16-row group while it works on the one before (kq_warm_block in
 * kernels_amx.c), which works only inside one call: so an item holds up to
 * MM_TILE_GROUPS groups, fewer where that would leave under four items per
 * thread to balance the load with. */
static int64_t mm_tile_rows(const bd_mat *W, int nth) {
    int64_t g = (W->nrows + 15) / 16 / (4 * (int64_t)nth);
    g = g < 1 ? 1 : g > MM_TILE_GROUPS ? MM_TILE_GROUPS : g;
    return 16 * g;
}

/* One work item on the tile path: weight rows t->rows g .. t->rows (g + 1)
 * - 1 against every token. */
static void mm_tile_item(const mm_ctx *c, const mm_target *t, int64_t g) {
    const bd_mat *W = t->W;
    const int64_t r0 = t->rows * g;
    const int nw = (int)(W->nrows - r0 < t->rows ? W->nrows - r0 : t->rows);
    c->k->tile->rows(W->type, W->ncols, (const uint8_t *)W->data + (uint64_t)r0 * W->row_bytes, (size_t)W->row_bytes,
                     nw, t->xq, c->xq_stride, c->pack, t->n_tok, t->Y + r0, t->ldy);
}

/* Interleaved weights (kernels.h's BD_LAYOUT_IL16) under a table without
 * il_rows: each row read back into the file's layout, then vec_dot_n as
 * on any row (the same bits; Q8_0: its tile order, the scalar twin's,
 * which is what il_rows gives). Only a table switched after load meets
 * this; it is the slow, simple way. */
static void il_row_dots(const mm_ctx *c, const mm_target *tg, int64_t r0, int64_t r1) {
    const bd_mat *W = tg->W;
    float *Y = tg->Y;
    const int64_t ldy = tg->ldy;
    uint8_t row[BD_IL16_MAX_ROW_BYTES] __attribute__((aligned(64)));
    float out[MM_NX];
    const int64_t nb = W->ncols / bd_type_get(W->type)->blck, bb = bd_type_get(W->type)->blck_bytes;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *group = (const uint8_t *)W->data + (uint64_t)(r / BD_IL16_ROWS * BD_IL16_ROWS) * W->row_bytes;
        for (int64_t i = 0; i < nb; i++) bd_il16_get_block(W->type, group, (int)(r % BD_IL16_ROWS), i, row + i * bb);
        if (W->type == BD_TYPE_Q8_0) {
            for (int64_t t = 0; t < tg->n_tok; t++)
                Y[t * ldy + r] = bd_vec_dot_tile_ref(W->type, W->ncols, row, tg->xq + t * c->xq_stride);
            continue;
        }
        for (int64_t t0 = 0; t0 < tg->n_tok; t0 += MM_NX) {
            const int nx = (int)(tg->n_tok - t0 < MM_NX ? tg->n_tok - t0 : MM_NX);
            c->k->vec_dot_n[W->type](W->ncols, row, tg->xq + t0 * c->xq_stride, c->xq_stride, nx, out);
            for (int j = 0; j < nx; j++) Y[(t0 + j) * ldy + r] = out[j];
        }
    }
}

static void mm_dot(void *arg, int ith, int nth) {
    (void)nth;
    mm_ctx *c = arg;
    float out[MM_NX];
    int m, seg = ith % c->n_seg;
    int64_t ci;
    while (mm_take(c, &seg, &m, &ci)) {
        if (c->t[m].tiles) {
            mm_tile_item(c, &c->t[m], ci);
            continue;
        }
        if (c->t[m].W->layout == BD_LAYOUT_IL16) {
            const mm_target *t = &c->t[m];
            const int64_t r0 = t->rows * ci, r1 = r0 + t->rows < t->W->nrows ? r0 + t->rows : t->W->nrows;
            if (t->il)
                c->k->tile->il_rows(t->W->type, t->W->ncols, (const uint8_t *)t->W->data + (uint64_t)r0 * t->W->row_bytes,
                                    (size_t)t->W->row_bytes, (int)(r1 - r0), t->xq, c->xq_stride, c->pack,
                                    t->n_tok, t->Y + r0, t->ldy);
            else il_row_dots(c, t, r0, r1);
            continue;
        }
        const bd_mat *W = c->t[m].W;
        float *Y = c->t[m].Y;
        const int64_t ldy = c->t[m].ldy, rows = c->t[m].rows, n_tok = c->t[m].n_tok;
        const uint8_t *xq0 = c->t[m].xq;
        bd_vec_dot_n_fn dotn = c->k->vec_dot_n[W->type];
        const int64_t r0 = ci * rows, r1 = r0 + rows < W->nrows ? r0 + rows : W->nrows;
        if (n_tok <= MM_NX) {
            /* decode and verify: every weight row is read exactly once */
            for (int64_t r = r0; r < r1; r++) {
                const uint8_t *w = (const uint8_t *)W->data + (uint64_t)r * W->row_bytes;
                dotn(W->ncols, w, xq0, c->xq_stride, (int)n_tok, out);
                for (int j = 0; j < n_tok; j++) Y[j * ldy + r] = out[j];
            }
            continue;
        }
        for (int64_t t0 = 0; t0 < n_tok; t0 += MM_NX) {
            int nx = (int)(n_tok - t0 < MM_NX ? n_tok - t0 : MM_NX);
            const uint8_t *xq = xq0 + t0 * c->xq_stride;
            for (int64_t r = r0; r < r1; r++) {
                const uint8_t *w = (const uint8_t *)W->data + (uint64_t)r * W->row_bytes;
                dotn(W->ncols, w, xq, c->xq_stride, nx, out);
                for (int j = 0; j < nx; j++) Y[(t0 + j) * ldy + r] = out[j];
            }
        }
    }
}

/* The packing is the same for every type with this activation type (Q8_K:
 * Q4_K / Q6_K; Q8_0), so any packing target's type names it. */
static void mm_pack(void *arg, int ith, int nth) {
    mm_ctx *c = arg;
    int j = 0;
    while (!c->t[j].packs) j++;
    int64_t lo, hi;
    bd_split((c->n_tok + 15) / 16, ith, nth, &lo, &hi);
    for (int64_t g = lo; g < hi; g++)
        c->k->tile->pack(c->t[j].W->type, c->ncols, c->xq, c->xq_stride, c->n_tok, g, c->pack);
}

/* Targets share ncols and the activation type; the caller checked. Each
 * target takes its own path (tiles: work items of mm_tile_rows rows). */
static void matmul(bd_pool *pool, const bd_matmul_out *outs, int n_outs, const float *X, int64_t ldx,
                   int64_t n_tok, void *scratch, bool exact) {
    const bd_mat *W0 = outs[0].W;
    mm_ctx c = {
        .k = bd_kernels_get(), .n_t = n_outs, .X = X, .ldx = ldx, .n_tok = n_tok, .ncols = W0->ncols,
        .xq = scratch, .vdt = bd_type_get(W0->type)->vec_dot_type,
    };
    c.t = c.tm;
    uint64_t row = 0, work = 0;
    bd_row_size(c.vdt, W0->ncols, &row);
    c.xq_stride = (size_t)((row + 63) & ~(uint64_t)63);
    bool any_pack = false;
    for (int j = 0; j < n_outs; j++) {
        const bd_mat *W = outs[j].W;
        const bool tiles = use_tiles(c.k, W, n_tok, exact);
        const bool il = W->layout == BD_LAYOUT_IL16 && c.k->tile && c.k->tile->il_rows;
        const bool packs = (tiles && c.k->tile->pack) || il_packs(c.k, W);
        any_pack |= packs;
        /* interleaved rows: work items of whole groups, whatever the path */
        const int64_t rows = tiles || W->layout == BD_LAYOUT_IL16 ? mm_tile_rows(W, pool ? bd_pool_size(pool) : 1)
                                                                  : mm_chunk_rows(n_tok, W);
        c.t[j] = (mm_target){.W = W, .Y = outs[j].Y, .ldy = outs[j].ldy, .xq = c.xq, .n_tok = n_tok, .rows = rows,
                             .tiles = tiles, .il = il, .packs = packs};
        c.t[j].n_chunks = (W->nrows + rows - 1) / rows;
        c.n_chunks += c.t[j].n_chunks;
        work += (uint64_t)W->nrows * W->row_bytes * (uint64_t)n_tok;
    }
    /* Tiny products (toy models, small drafter matrices) run on the calling
     * thread: waking the pool costs more than the work. */
    const bool small = work < MM_SMALL_BYTES;
    if (n_tok >= 8 && pool && !small) bd_pool_run(pool, mm_quantize, &c);
    else mm_quantize(&c, 0, 1);
    uint32_t pack_type = 0;
    for (int j = n_outs - 1; j >= 0; j--)
        if (c.t[j].packs) pack_type = c.t[j].W->type;
    /* packing is the kernel's choice (none for some batch sizes) */
    if (any_pack && c.k->tile->pack_bytes(pack_type, c.ncols, n_tok) > 0) {
        c.pack = c.xq + c.xq_stride * (size_t)n_tok;
        if (n_tok >= 32 && pool && !small) bd_pool_run(pool, mm_pack, &c);
        else mm_pack(&c, 0, 1);
    }
    mm_run(pool, !pool || small, mm_dot, &c);
}

void bd_matmul(bd_pool *pool, const bd_mat *W, const float *X, int64_t ldx, int64_t n_tok, float *Y,
               int64_t ldy, void *scratch) {
    const bd_matmul_out o = {W, Y, ldy};
    matmul(pool, &o, 1, X, ldx, n_tok, scratch, true);
}

void bd_matmul_fast(bd_pool *pool, const bd_mat *W, const float *X, int64_t ldx, int64_t n_tok, float *Y,
                    int64_t ldy, void *scratch) {
    const bd_matmul_out o = {W, Y, ldy};
    matmul(pool, &o, 1, X, ldx, n_tok, scratch, false);
}

void bd_matmul_multi(bd_pool *pool, const bd_matmul_out *outs, int n_outs, const float *X, int64_t ldx,
                     int64_t n_tok, void *scratch) {
    bool shared = n_outs >= 1 && n_outs <= BD_MATMUL_MULTI;
    for (int j = 1; shared && j < n_outs; j++) {
        const bd_mat *a = outs[0].W, *b = outs[j].W;
        /* one quantization (and tile packing, which depends only on the
         * activation type) must serve every matrix */
        shared = a->ncols == b->ncols &&
                 bd_type_get(a->type)->vec_dot_type == bd_type_get(b->type)->vec_dot_type;
    }
    if (shared) {
        matmul(pool, outs, n_outs, X, ldx, n_tok, scratch, true);
        return;
    }
    for (int j = 0; j < n_outs; j++) bd_matmul(pool, outs[j].W, X, ldx, n_tok, outs[j].Y, outs[j].ldy, scratch);
}

/* bd_matmul_grouped's scratch: its work targets, then the n_x converted
 * rows of X, then each group's rows gathered from them. */
static size_t grp_row_bytes(const bd_mat *W) {
    const bd_type_traits *t = bd_type_get(W->type);
    uint64_t row = 0;
    if (!t || !bd_row_size(t->vec_dot_type, W->ncols, &row)) return 0;
    return (size_t)((row + 63) & ~(uint64_t)63);
}

static size_t grp_targets_bytes(int n_groups) {
    return ((size_t)(n_groups > 0 ? n_groups : 0) * sizeof(mm_target) + 63) & ~(size_t)63;
}

size_t bd_matmul_grouped_scratch_size(const bd_mat *W, int64_t n_x, int64_t n_rows, int n_groups) {
    const size_t xs = grp_row_bytes(W);
    if (!xs) return 0;
    return grp_targets_bytes(n_groups) + xs * (size_t)(n_x + n_rows);
}

bool bd_matmul_grouped(bd_pool *pool, const bd_matmul_grp *g, int n_groups, const float *X, int64_t ldx,
                       int64_t n_x, void *scratch) {
    if (n_groups <= 0) return true;
    const bd_kernels *k = bd_kernels_get();
    const bd_mat *W0 = g[0].W;
    const uint32_t vdt = bd_type_get(W0->type)->vec_dot_type;
    for (int j = 0; j < n_groups; j++) {
        const bd_mat *W = g[j].W;
        /* one conversion serves all; packed activations would need a
         * packing per group: interleaved Q8_0 on a packing table is
         * refused, and a tile group that would pack takes vec_dot_n below */
        if (W->ncols != W0->ncols || bd_type_get(W->type)->vec_dot_type != vdt) return false;
        if (il_packs(k, W) && k->tile->pack_bytes(W->type, W->ncols, g[j].n_tok) > 0) return false;
    }
    mm_ctx c = {.k = k, .X = X, .ldx = ldx, .n_tok = n_x, .ncols = W0->ncols, .vdt = vdt};
    c.xq_stride = grp_row_bytes(W0);
    c.t = scratch;
    c.xq = (uint8_t *)scratch + grp_targets_bytes(n_groups);
    uint8_t *gat = c.xq + c.xq_stride * (size_t)n_x;
    const int nth = pool ? bd_pool_size(pool) : 1;
    uint64_t work = 0;
    for (int j = 0; j < n_groups; j++) work += (uint64_t)g[j].W->nrows * g[j].W->row_bytes * (uint64_t)g[j].n_tok;
    const bool small = work < MM_SMALL_BYTES;
    if (n_x >= 8 && pool && !small) bd_pool_run(pool, mm_quantize, &c);
    else mm_quantize(&c, 0, 1);
    int nt = 0;
    for (int j = 0; j < n_groups; j++) {
        const bd_mat *W = g[j].W;
        if (g[j].n_tok <= 0) continue;
        for (int64_t t = 0; t < g[j].n_tok; t++) {
            BD_ASSERT(g[j].rows[t] >= 0 && g[j].rows[t] < n_x);
            memcpy(gat + (size_t)t * c.xq_stride, c.xq + (size_t)g[j].rows[t] * c.xq_stride, c.xq_stride);
        }
        /* a tile group that packs its activations (AMX) takes vec_dot_n
         * instead: exact tiles give vec_dot_n's bits (file comment) */
        const bool tiles = use_tiles(k, W, g[j].n_tok, true) &&
                           !(k->tile->pack && k->tile->pack_bytes(W->type, W->ncols, g[j].n_tok) > 0);
        const bool il = W->layout == BD_LAYOUT_IL16 && k->tile && k->tile->il_rows;
        const int64_t rows = tiles || W->layout == BD_LAYOUT_IL16 ? mm_tile_rows(W, nth) : mm_chunk_rows(g[j].n_tok, W);
        c.t[nt] = (mm_target){.W = W, .Y = g[j].Y, .ldy = g[j].ldy, .xq = gat, .n_tok = g[j].n_tok, .rows = rows,
                              .tiles = tiles, .il = il};
        c.t[nt].n_chunks = (W->nrows + rows - 1) / rows;
        c.n_chunks += c.t[nt].n_chunks;
        gat += c.xq_stride * (size_t)g[j].n_tok;
        nt++;
    }
    c.n_t = nt;
    if (nt > 0) mm_run(pool, !pool || small, mm_dot, &c);
    return true;
}

bool bd_mat_get_row(const bd_mat *W, int64_t row, float *dst) {
    if (row < 0 || row >= W->nrows) return false;
    if (W->layout == BD_LAYOUT_IL16) {
        const bd_type_traits *t = bd_type_get(W->type);
        uint8_t blk[256];
        if (!t || t->blck_bytes > (int64_t)sizeof blk) return false;
        const uint8_t *group = (const uint8_t *)W->data + (uint64_t)(row / BD_IL16_ROWS * BD_IL16_ROWS) * W->row_bytes;
        for (int64_t i = 0; i < W->ncols / t->blck; i++) {
            bd_il16_get_block(W->type, group, (int)(row % BD_IL16_ROWS), i, blk);
            if (!bd_dequantize_row(W->type, blk, dst + i * t->blck, t->blck)) return false;
        }
        return true;
    }
    return bd_dequantize_row(W->type, (const uint8_t *)W->data + (uint64_t)row * W->row_bytes, dst,
                             W->ncols);
}
