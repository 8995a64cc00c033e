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
 * and fails if either argmax is not as intended. The crafted matrices are
 * written in the file's weight type when it has 8 bits or more (Q8_0, F16,
 * BF16: a constructed drafter then costs what a published Q8_0 one does),
 * else in F32.
 *
 * Targets: qwen3 and llama, and the hybrid qwen35 / qwen35moe (read straight
 * from the GGUF, so drafters can be made before the engine runs a target).
 * For hybrid targets the drafter is what the published converter writes for
 * Qwen3.5/3.6 drafters: dflash.rope.dimension_sections = [head_dim/2, 0, 0,
 * 0] (the target uses M-RoPE; numerically plain NEOX over the full head),
 * rope base 1e7 (random drafters; constructed ones need their own base, see
 * above), mask id 248070 when the vocabulary has it, taps below the trunk's
 * layer count (block_count - nextn_predict_layers), and the published
 * drafter sizes where the target's width matches a published drafter
 * (synth_dflash.c lists them). Optional sliding-window layers are written
 * under llama.cpp's keys dflash.attention.sliding_window (u32) and
 * dflash.attention.sliding_window_pattern (bool per layer, true = SWA).
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
    int n_layer;              /* drafter layers; 0 = the published count (5; 8 for a
                                 35B-A3B-wide MoE target) */
    int block_size;           /* 0 = 16 */
    int n_taps;               /* tapped target layers; 0 = min(5, target layers - 1) */
    uint32_t weight_type;     /* type of the plain matrices (F32, F16, Q8_0, ...) */
    int32_t mask_id;          /* -1: 248070 for hybrid targets whose vocabulary has it, else
                                 151669 when it exists, else n_vocab - 1 */
    uint64_t seed;
    uint32_t swa_window;      /* 0: no sliding-window layers */
    const char *swa_pattern;  /* with swa_window: "1,1,1,1,0", one flag per drafter layer
                                 (1 = sliding window); NULL = every layer */
} bd_synth_dflash_opts;

/* Write the drafter to path atomically. */
bool bd_synth_dflash_write(const bd_synth_dflash_opts *o, const char *path, char *err, size_t errlen);

#endif
