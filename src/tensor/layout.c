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
    if (type != BD_TYPE_Q4_K && type != BD_TYPE_Q6_K) return false;
    uint64_t rb = 0;
    return ncols > 0 && bd_row_size(type, ncols, &rb) && rb <= BD_IL16_MAX_ROW_BYTES;
}

/* Block bytes of an interleavable type (bd_il16_supports checked it). */
static size_t il_bb(uint32_t type) { return (size_t)bd_type_get(type)->blck_bytes; }

void bd_il16_pack_group(uint32_t type, int64_t ncols, const void *src, size_t ws, void *dst) {
    const size_t bb = il_bb(type), nd = bb / 4, t = bb % 4;
    const int64_t nb = ncols / bd_type_get(type)->blck;
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
