/*
 * layout.c - the interleaved weight layout (kernels.h's BD_LAYOUT_IL16):
 * building it in place at load, reading a row back out of it.
 *
 * Portable C and byte copies only: the layout is a permutation of the
 * file's bytes, so dequantizing or dotting a row read back gives exactly
 * what the row in the file gives. The SIMD tables read the layout directly
 * (their il_rows); this file is their reference for where every byte went.
 */
#include <string.h>

#include "kernels.h"

bool bd_il16_supports(uint32_t type, int64_t ncols) {
    if (type != BD_TYPE_Q4_K && type != BD_TYPE_Q6_K && type != BD_TYPE_Q8_0) return false;
    if (type == BD_TYPE_Q8_0 && ncols % (2 * QK8_0) != 0) return false; /* whole pairs of blocks */
    uint64_t rb = 0;
    return ncols > 0 && bd_row_size(type, ncols, &rb) && rb <= BD_IL16_MAX_ROW_BYTES;
}

/* Q8_0 (kernels.h): where block i's code word D and its 16 scales start
 * in a group. A pair of blocks takes 2 x 16 x 34 = 1088 bytes: 16 code
 * words, then the 32 scales. */
#define Q80_PAIR (2 * BD_IL16_ROWS * sizeof(block_q8_0))
static size_t q80_word(int64_t i, size_t D) { return (size_t)(i / 2) * Q80_PAIR + (size_t)(i % 2) * 512 + 64 * D; }
static size_t q80_scales(int64_t i) { return (size_t)(i / 2) * Q80_PAIR + 1024 + (size_t)(i % 2) * 32; }

static void q80_put(const block_q8_0 *b, int r, int64_t i, uint8_t *group) {
    for (size_t D = 0; D < QK8_0 / 4; D++) memcpy(group + q80_word(i, D) + 4 * (size_t)r, b->qs + 4 * D, 4);
    memcpy(group + q80_scales(i) + 2 * (size_t)r, &b->d, 2);
}

static void q80_get(const uint8_t *group, int r, int64_t i, block_q8_0 *b) {
    for (size_t D = 0; D < QK8_0 / 4; D++) memcpy(b->qs + 4 * D, group + q80_word(i, D) + 4 * (size_t)r, 4);
    memcpy(&b->d, group + q80_scales(i) + 2 * (size_t)r, 2);
}

/* Block bytes of an interleavable type (bd_il16_supports checked it). */
static size_t il_bb(uint32_t type) { return (size_t)bd_type_get(type)->blck_bytes; }

void bd_il16_pack_group(uint32_t type, int64_t ncols, const void *src, size_t ws, void *dst) {
    const size_t bb = il_bb(type), nd = bb / 4, t = bb % 4;
    const int64_t nb = ncols / bd_type_get(type)->blck;
    if (type == BD_TYPE_Q8_0) {
        for (int64_t i = 0; i < nb; i++)
            for (int r = 0; r < BD_IL16_ROWS; r++)
                q80_put((const block_q8_0 *)((const uint8_t *)src + (size_t)r * ws) + i, r, i, dst);
        return;
    }
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *o = (uint8_t *)dst + (size_t)i * BD_IL16_ROWS * bb;
        for (int r = 0; r < BD_IL16_ROWS; r++) {
            const uint8_t *b = (const uint8_t *)src + (size_t)r * ws + (size_t)i * bb;
            for (size_t D = 0; D < nd; D++) memcpy(o + 64 * D + 4 * (size_t)r, b + 4 * D, 4);
            memcpy(o + 64 * nd + t * (size_t)r, b + 4 * nd, t);
        }
    }
}

void bd_il16_get_block(uint32_t type, const void *group, int r, int64_t i, void *blk) {
    if (type == BD_TYPE_Q8_0) {
        q80_get(group, r, i, blk);
        return;
    }
    const size_t bb = il_bb(type), nd = bb / 4, t = bb % 4;
    const uint8_t *o = (const uint8_t *)group + (size_t)i * BD_IL16_ROWS * bb;
    uint8_t *b = blk;
    for (size_t D = 0; D < nd; D++) memcpy(b + 4 * D, o + 64 * D + 4 * (size_t)r, 4);
    memcpy(b + 4 * nd, o + 64 * nd + t * (size_t)r, t);
}

bool bd_mat_interleave(bd_mat *W, void *tmp) {
    if (W->layout != BD_LAYOUT_ROWS || !W->data || !bd_il16_supports(W->type, W->ncols) ||
        W->nrows % BD_IL16_ROWS != 0)
        return false;
    const size_t gb = BD_IL16_ROWS * (size_t)W->row_bytes;
    for (int64_t g = 0; g < W->nrows / BD_IL16_ROWS; g++) {
        uint8_t *p = (uint8_t *)(uintptr_t)W->data + (size_t)g * gb;
        memcpy(tmp, p, gb);
        bd_il16_pack_group(W->type, W->ncols, tmp, (size_t)W->row_bytes, p);
    }
    W->layout = BD_LAYOUT_IL16;
    return true;
}
