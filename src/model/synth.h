/*
 * synth.h - synthetic models: random weights with the real tensor names,
 * shapes, metadata and quantization mixes of `qwen3` and `llama` GGUFs.
 *
 * Used by `blockdraft make-model` to produce test fixtures (compared with
 * llama.cpp in tests/e2e/oracle_*.sh) and benchmark-sized files (Qwen3-0.6B
 * and Qwen3-4B shapes) without downloading anything.
 *
 * Weights are a pure function of (seed, tensor name, row): every row has
 * its own PRNG stream, so the file is byte-identical whatever the thread
 * count. Values are bell-shaped (Irwin-Hall sum of four uniforms, integer
 * arithmetic only, so no libm rounding enters the bytes) and scaled so that
 * each matmul roughly preserves unit RMS, logits have a standard deviation
 * of about 4 (top-2 gaps are rarely tiny), the residual stream is dominated
 * by the layers rather than the token embedding (a random tied model would
 * otherwise keep predicting its input token) and greedy decoding gives
 * varied sequences, not one repeated token (see bd_synth_plan_make). Norm
 * weights are 1 + N(0, 0.1)-ish.
 */
#ifndef BD_SYNTH_H
#define BD_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bd_synth_shape {
    const char *name;
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_ctx;
    bool tied; /* default when neither --tied nor --untied is given */
} bd_synth_shape;

/* Shapes: "tiny", "small", "odd" (widths not multiples of 256, to exercise
 * the quantization fallbacks), "0.6b" (Qwen3-0.6B), "4b" (Qwen3-4B).
 * Returns NULL for an unknown name. */
const bd_synth_shape *bd_synth_shape_find(const char *name);
/* Names for usage messages: "tiny small odd 0.6b 4b". */
const char *bd_synth_shape_names(void);
/* Mix names: "f32 f16 bf16 q8_0 q4_k_m mix q4_0 ...". */
const char *bd_synth_mix_names(void);

typedef struct bd_synth_opts {
    const char *arch;       /* "qwen3" or "llama" */
    const char *shape;      /* see bd_synth_shape_find */
    const char *mix;        /* quantization mix, see bd_synth_plan */
    uint64_t seed;
    int tied;               /* -1: the shape's default; 0 untied; 1 tied */
    const char *vocab_path; /* GGUF whose tokenizer.* keys are copied (required) */
    int n_threads;          /* <= 0: all CPUs */
    bool constant_output;   /* output_norm = 0: every logit is 0 and greedy decoding emits token 0
                               forever (the target of constructed DFlash drafters, whose
                               acceptance is then known exactly; compute cost is unchanged) */
} bd_synth_opts;

/* Weight distribution of a tensor. */
/* Weight distribution of a tensor: NORM 1 + scale*z, NORM_QK 2 + scale*z
 * (sharper attention for qwen3's per-head q/k norms), MATRIX scale*z. */
enum bd_synth_init { BD_SYNTH_NORM = 0, BD_SYNTH_MATRIX = 1, BD_SYNTH_NORM_QK = 2, BD_SYNTH_ZERO = 3 };

typedef struct bd_synth_tensor {
    char name[48];
    uint32_t n_dims;
    uint64_t ne[2];   /* ne[0] contiguous */
    uint32_t type;    /* ggml type id */
    enum bd_synth_init init;
    float scale;      /* std of the matrix entries / of the norm offsets */
} bd_synth_tensor;

typedef struct bd_synth_plan {
    const bd_synth_shape *shape;
    bool qwen3;        /* else llama */
    bool tied;
    uint32_t n_vocab;
    uint32_t file_type; /* general.file_type (llama_ftype) */
    int n_tensors;
    bd_synth_tensor *tensors; /* [n_tensors], file order, owned */
} bd_synth_plan;

/* The tensor list of a model, each with the type its mix gives it.
 * Mixes:
 *   f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k,
 *   iq4_nl, iq4_xs  - every 2-D weight of that type, 1-D norms F32;
 *                     256-block types fall back by width as llama.cpp
 *                     does (Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0,
 *                     IQ4_XS->IQ4_NL, F16 if even that does not divide);
 *   q4_k_m          - llama.cpp's Q4_K_M recipe (llama-quant.cpp v0.5.0):
 *                     Q4_K base; output (or tied token_embd) Q6_K, Q8_0
 *                     when ne[0] % 256; attn_v and ffn_down Q6_K where
 *                     use_more_bits(i, n); width fallbacks as above;
 *   mix             - 2-D weights cycle through Q4_K, Q6_K, Q8_0, F16,
 *                     BF16 in file order (with width fallbacks).
 * Returns false with a message for an unknown arch/shape/mix. Free with
 * bd_synth_plan_free. */
bool bd_synth_plan_make(const bd_synth_opts *o, uint32_t n_vocab, bd_synth_plan *plan,
                        char *err, size_t errlen);
void bd_synth_plan_free(bd_synth_plan *plan);

/* llama.cpp's use_more_bits(i, n) for the Q4_K_M recipe. */
bool bd_synth_use_more_bits(int i, int n);

/* Generate and write the model to path (atomically: a failure leaves no
 * file behind and an existing file untouched). Big shapes are streamed:
 * memory stays at a few chunk buffers whatever the model size. */
bool bd_synth_write(const bd_synth_opts *o, const char *path, char *err, size_t errlen);

/* The values of row `row` of a tensor as written before quantization
 * ([n] floats into out): exposed so tests can check the distribution. */
void bd_synth_row_values(uint64_t seed, const bd_synth_tensor *t, uint64_t row, float *out);

#endif
