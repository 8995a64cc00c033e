/*
 * synth_dflash.h - synthetic DFlash drafters for a given target GGUF.
 *
 * Two kinds:
 *
 *   random       Qwen3-style drafter layers with random weights: drafts are
 *                essentially never right, so every verify step exercises
 *                rejection and rollback (losslessness tests).
 *
 *   constructed  Weights built so that, against a target whose greedy
 *                output is the constant token 0 (a target written with
 *                `make-model --constant-output`, i.e. output_norm = 0, all
 *                logits 0, greedy picks the lowest id), block row i drafts
 *                token 0 exactly for i <= k and another token for i > k.
 *                Acceptance per step is then exactly min(k, n): tau and
 *                rollback are predictable, and speculative speed can be
 *                measured at a known tau (k = -1: always right; k = 0:
 *                never right).
 *
 * How "right for the first k rows" is built (layer 0; all other layers and
 * both FFN halves of layer 0 have zero output projections, fc = 0 so context
 * rows carry zero K/V):
 *   - V and K of a row are rank-1 projections that read 1 on the anchor's
 *     embedding (token 0) and 0 on the mask embedding;
 *   - one RoPE lane pair of head 0 carries a query (mask rows) and key
 *     (anchor row) of fixed angle; with the drafter's rope base chosen so
 *     that pair turns by pi/B per position, row i scores the anchor with
 *     A cos(i pi/B + phi), phi = pi/2 - (k + 1/2) pi/B: strongly positive
 *     for i <= k (row i attends to the anchor), strongly negative after;
 *   - attn_output maps the anchor's value to a large multiple of the
 *     target's output row 0, so rows <= k produce logits ~ W_out W_out[0]
 *     (argmax 0) and rows > k keep the mask embedding (argmax != 0).
 * The generator evaluates both row kinds against the real output matrix
 * and fails if either argmax is not as intended.
 */
#ifndef BD_SYNTH_DFLASH_H
#define BD_SYNTH_DFLASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bd_synth_dflash_opts {
    const char *target_path;  /* target GGUF (tokenizer and shapes are taken from it) */
    bool constructed;         /* else random */
    int accept_k;             /* constructed: rows 1..k right; -1 = all rows */
    int n_layer;              /* drafter layers; 0 = 5 (as the published drafters) */
    int block_size;           /* 0 = 16 */
    int n_taps;               /* tapped target layers; 0 = min(5, target layers - 1) */
    uint32_t weight_type;     /* type of the plain matrices (F32, F16, Q8_0, ...) */
    int32_t mask_id;          /* -1: the first id >= 151669 that exists, else n_vocab - 1 */
    uint64_t seed;
} bd_synth_dflash_opts;

/* Write the drafter to path atomically. */
bool bd_synth_dflash_write(const bd_synth_dflash_opts *o, const char *path, char *err, size_t errlen);

#endif
