/*
 * synth.h - synthetic models: random weights with the real tensor names,
 * shapes, metadata and quantization mixes of `qwen3`, `llama`, `qwen3moe`, `qwen35`
 * (Qwen3.5/3.6 dense hybrid: Gated DeltaNet + gated attention) and
 * `qwen35moe` GGUFs, as llama.cpp v0.5.0 loads them.
 *
 * Used by `blockdraft make-model` to produce test fixtures (compared with
 * llama.cpp in tests/e2e/oracle_*.sh and synth_hybrid.sh) and
 * benchmark-sized files (Qwen3-0.6B/4B, Qwen3.5-0.8B/4B/9B, Qwen3.6-27B and
 * 35B-A3B shapes) without downloading anything.
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
    uint32_t n_expert, n_expert_used, n_ff_exp; /* qwen3moe shapes only (0: dense) */
} bd_synth_shape;

/* Shapes of the attention-only archs. qwen3 / llama: "tiny", "small",
 * "odd" (widths not multiples of 256, to exercise the quantization
 * fallbacks), "0.6b" (Qwen3-0.6B), "4b" (Qwen3-4B); qwen3moe: "tiny",
 * "small", "30b-a3b" (Qwen3-30B-A3B). NULL for an unknown name or arch. */
const bd_synth_shape *bd_synth_shape_find(const char *arch, const char *name);
/* Names for usage messages, per arch ("tiny small odd 0.6b 4b"). */
const char *bd_synth_shape_names(const char *arch);
/* Mix names: "f32 f16 bf16 q8_0 q4_k_m mix q4_0 ...". */
const char *bd_synth_mix_names(void);

/* Shape of a `qwen35` (dense) or `qwen35moe` hybrid model: Gated DeltaNet
 * (GDN) layers and gated full-attention layers (schedule: layer i is GDN
 * iff (i + 1) % interval != 0, unless --recurrent-layers says otherwise).
 * The real shapes carry the published values; synth.c names the source of
 * every one next to the table. */
typedef struct bd_synth_hybrid_shape {
    const char *name;
    bool moe;                   /* qwen35moe (and qwen3next) */
    bool next;                  /* qwen3next: no IMROPE sections (sections unused), fused GDN
                                   projections ssm_in / ssm_ba (bd_synth_opts.gdn_split) */
    uint32_t n_layer;           /* trunk layers (without MTP blocks) */
    uint32_t n_embd;
    uint32_t n_ff;              /* dense FFN width; 0 for MoE (key not written, as upstream) */
    uint32_t n_head, n_head_kv, head_dim; /* gated attention layers */
    uint32_t n_rot;             /* rotary lanes (partial rotary) */
    int32_t sections[4];        /* IMROPE sections, sum = n_rot / 2 */
    uint32_t n_ctx;
    uint32_t ssm_d_state;       /* GDN head dim (K and V) */
    uint32_t ssm_n_k, ssm_n_v;  /* GDN K heads (group_count), V heads (time_step_rank) */
    uint32_t ssm_conv;          /* causal conv width */
    uint32_t interval;          /* full_attention_interval */
    uint32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp; /* MoE only */
    uint32_t n_vocab;           /* default vocabulary size: 0 = the --vocab file's */
    bool tied;
} bd_synth_hybrid_shape;

/* Hybrid shapes of an arch ("qwen35", "qwen35moe" or "qwen3next"); NULL if unknown. */
const bd_synth_hybrid_shape *bd_synth_hybrid_shape_find(const char *arch, const char *name);
/* Names for usage messages, per arch. */
const char *bd_synth_hybrid_shape_names(const char *arch);
/* True for "qwen35", "qwen35moe" and "qwen3next". */
bool bd_synth_arch_is_hybrid(const char *arch);

typedef struct bd_synth_opts {
    const char *arch;       /* "qwen3", "llama", "qwen3moe", "qwen35", "qwen35moe" or "qwen3next" */
    const char *shape;      /* see bd_synth_shape_find / bd_synth_hybrid_shape_find */
    const char *mix;        /* quantization mix, see bd_synth_plan */
    uint64_t seed;
    int tied;               /* -1: the shape's default; 0 untied; 1 tied */
    const char *vocab_path; /* GGUF whose tokenizer.* keys are copied (required) */
    int n_threads;          /* <= 0: all CPUs */
    bool constant_output;   /* output_norm = 0: every logit is 0 and greedy decoding emits token 0
                               forever (the target of constructed DFlash drafters, whose
                               acceptance is then known exactly; compute cost is unchanged) */
    uint32_t n_vocab;       /* 0: the shape's default (hybrid real shapes: 248320), else the
                               vocabulary file's size; larger than the file's: the tokenizer
                               is padded with UNUSED "[PAD<id>]" tokens (as the HF converter
                               pads Qwen vocabularies); smaller is refused */
    uint32_t n_layers;      /* 0: the shape's; else this many trunk layers of the real
                               per-layer shape (hybrids: schedule still by interval) */
    /* hybrid archs only */
    uint32_t n_mtp;         /* trailing MTP (nextn) blocks, counted in block_count */
    const char *recurrent;  /* NULL: interval rule, no key; "auto": write
                               attention.recurrent_layers equal to the interval rule (as
                               the current converter does); else "1,1,0,1,...": one flag
                               per trunk layer (MTP blocks are appended as 0) */
    bool fused_gate_up;     /* qwen35moe: ffn_gate_up_exps instead of ffn_gate/up_exps */
    bool gdn_split;         /* qwen3next: attn_qkv + attn_gate (newer converters) instead of the
                               fused ssm_in */
} bd_synth_opts;

/* Weight distribution of a tensor: NORM 1 + scale*z, NORM_QK 2 + scale*z
 * (sharper attention for per-head q/k norms), MATRIX scale*z, ZERO 0,
 * OFFSET offset + scale*z (GDN decay parameters), z bell-shaped in
 * [-3.47, 3.47] with unit variance. */
enum bd_synth_init {
    BD_SYNTH_NORM = 0,
    BD_SYNTH_MATRIX = 1,
    BD_SYNTH_NORM_QK = 2,
    BD_SYNTH_ZERO = 3,
    BD_SYNTH_OFFSET = 4
};

typedef struct bd_synth_tensor {
    char name[48];
    uint32_t n_dims;  /* 1..3 (3: MoE expert stacks {.., .., n_expert}) */
    uint64_t ne[3];   /* ne[0] contiguous; unused dims are 1 */
    uint32_t type;    /* ggml type id */
    enum bd_synth_init init;
    float scale;      /* std of the matrix entries / of the norm offsets */
    float offset;     /* BD_SYNTH_OFFSET only */
} bd_synth_tensor;

typedef struct bd_synth_plan {
    const bd_synth_shape *shape;        /* qwen3/llama/qwen3moe; NULL for hybrid archs */
    const bd_synth_hybrid_shape *hshape; /* qwen35/qwen35moe; NULL otherwise */
    const char *arch;  /* general.architecture */
    bool qwen3;        /* qwen3 or qwen3moe: q/k norms, Qwen3 RoPE base and epsilon */
    bool qwen2;        /* qwen2: q/k/v biases, Qwen's RoPE base and epsilon, no q/k norms */
    bool tied;
    uint32_t n_layer;  /* (trunk) layers */
    /* hybrid plans: */
    uint32_t n_mtp;    /* MTP blocks after the trunk (block_count = n_layer + n_mtp) */
    bool recurrent_key; /* write attention.recurrent_layers */
    uint8_t *recurrent; /* [n_layer + n_mtp] 1 = GDN layer, owned */
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
 *                     BF16 in file order (with width fallbacks);
 *   ud-q4_k_m       - (hybrid archs only) an Unsloth-Dynamic-style mix, see
 *                     synth.c: IQ4_XS, Q4_K, Q5_K, Q6_K, Q8_0, BF16 and F32
 *                     side by side in one file.
 * Hybrid archs: the tensors llama.cpp never quantizes stay F32 in every
 * mix (1-D tensors, *_norm.weight, the router ffn_gate_inp, ssm_conv1d),
 * and the plan lists the tensors in llama.cpp's quantizer order (by layer,
 * then by name), which is also the file order; q4_k_m follows llama.cpp
 * v0.5.0's Q4_K_M recipe for these archs (llama_tensor_get_type_impl),
 * including its 8-expert rules.
 * Returns false with a message for an unknown arch/shape/mix. Free with
 * bd_synth_plan_free. */
bool bd_synth_plan_make(const bd_synth_opts *o, uint32_t n_vocab, bd_synth_plan *plan,
                        char *err, size_t errlen);
/* The vocabulary size a plan uses when the vocabulary file has file_n
 * tokens (o->n_vocab, else the hybrid shape's default, else file_n). */
uint32_t bd_synth_n_vocab(const bd_synth_opts *o, uint32_t file_n);
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
