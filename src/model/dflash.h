/*
 * dflash.h - the DFlash block drafter (llama.cpp's upstream `dflash`
 * schema) bound to its target model.
 *
 * A bd_dflash holds the drafter's context K/V cache — one row per committed
 * target token, built from the target's tapped layer inputs — and the
 * scratch of one block forward. Contract of the cache (dflash.md §4): it
 * holds the features of every committed token except the current anchor,
 * rows 0..n_rows-1 at positions 0..n_rows-1; block K/V written during a
 * draft are scratch above n_rows and never committed.
 */
#ifndef BD_DFLASH_H
#define BD_DFLASH_H

#include "model.h"

typedef struct bd_dflash bd_dflash;

/* Check the pair (pairing.h + the engine's own limits) and allocate the
 * drafter state for contexts of up to n_ctx committed tokens and feature
 * batches of up to n_batch rows, its K and V caches of type_k / type_v
 * (enum bd_kv_type). pool is borrowed (the target session's). */
bd_dflash *bd_dflash_create(bd_model *draft, bd_model *target, bd_pool *pool, int32_t n_ctx,
                            int32_t n_batch, int32_t type_k, int32_t type_v, char *err, size_t errlen);
void bd_dflash_free(bd_dflash *d);

int32_t bd_dflash_block_size(const bd_dflash *d);
int32_t bd_dflash_n_taps(const bd_dflash *d);
const int32_t *bd_dflash_taps(const bd_dflash *d);
int32_t bd_dflash_n_rows(const bd_dflash *d);

/* Drop every context row. */
void bd_dflash_reset(bd_dflash *d);
/* Keep the first n rows (n <= n_rows). */
void bd_dflash_truncate(bd_dflash *d, int32_t n);

/* Append n committed rows of target features ([n][n_taps][n_embd], the
 * layout of bd_session_taps) at positions n_rows..n_rows+n-1. n <= n_batch.
 * Does not allocate. */
bool bd_dflash_append(bd_dflash *d, const float *feats, int32_t n, char *err, size_t errlen);

/* One block forward: [anchor, MASK x (b-1)] at positions n_rows.. with
 * b = block_rows, or block_size when block_rows is 0 (the reference: the
 * drafter sees the block length it was trained with; llama.cpp runs
 * b = n_max + 1). Writes the greedy drafts of rows 1..n_draft to out (the
 * LM head runs on those rows only). n_draft < b <= block_size.
 * Does not allocate. */
bool bd_dflash_draft(bd_dflash *d, int32_t anchor, int32_t n_draft, int32_t block_rows, int32_t *out, char *err,
                     size_t errlen);

#endif
