/*
 * synth.c - synthetic qwen3/llama models (see synth.h for the contract).
 *
 * Layout of this file: PRNG and value generation, shapes and mixes, the
 * tensor plan (which type each tensor gets), then the streaming writer
 * that generates and quantizes rows chunk by chunk on the thread pool.
 */
#include "synth.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base.h"
#include "../gguf/bd_gguf.h"
#include "../tensor/tensor.h"

/* ========================================================================
 * PRNG: splitmix64 seeds a xoshiro256** stream per (seed, tensor, row)
 * ====================================================================== */

typedef bd_rng rng;
#define rng_next bd_rng_next

/* FNV-1a of a tensor name: separates the streams of different tensors. */
static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

static void rng_seed(rng *r, uint64_t seed, const char *name, uint64_t row) {
    uint64_t x = seed ^ name_hash(name);
    bd_rng_seed(r, bd_splitmix64(&x) ^ (row * 0xd1342543de82ef95ULL));
}

/* Irwin-Hall(4): sum of four 16-bit uniforms, centred and scaled to unit
 * variance. Bell-shaped, bounded at +-3.46, integer arithmetic until the
 * final scaling, so identical bytes on every machine. */
static inline float rng_gauss(rng *r) {
    uint64_t v = rng_next(r);
    int32_t sum = (int32_t)(v & 0xffff) + (int32_t)((v >> 16) & 0xffff) +
                  (int32_t)((v >> 32) & 0xffff) + (int32_t)(v >> 48);
    /* mean 4 * 65535/2, variance 4 * (65536^2 - 1)/12 */
    const float inv_std = 1.0f / 37837.23f;
    return (float)(2 * sum - 4 * 65535) * 0.5f * inv_std;
}

void bd_synth_row_values(uint64_t seed, const bd_synth_tensor *t, uint64_t row, float *out) {
    rng r;
    rng_seed(&r, seed, t->name, row);
    uint64_t n = t->ne[0];
    if (t->init == BD_SYNTH_ZERO)
        for (uint64_t i = 0; i < n; i++) out[i] = 0.0f;
    else if (t->init == BD_SYNTH_NORM)
        for (uint64_t i = 0; i < n; i++) out[i] = 1.0f + t->scale * rng_gauss(&r);
    else if (t->init == BD_SYNTH_NORM_QK)
        for (uint64_t i = 0; i < n; i++) out[i] = 2.0f + t->scale * rng_gauss(&r);
    else if (t->init == BD_SYNTH_OFFSET)
        for (uint64_t i = 0; i < n; i++) out[i] = t->offset + t->scale * rng_gauss(&r);
    else
        for (uint64_t i = 0; i < n; i++) out[i] = t->scale * rng_gauss(&r);
}

/* ========================================================================
 * Shapes and mixes
 * ====================================================================== */

static const bd_synth_shape shapes[] = {
    /* name    layers embd   ff   head kv  hd   ctx    tied */
    {"tiny", 4, 256, 512, 4, 2, 64, 4096, true, 0, 0, 0},
    {"small", 8, 512, 1536, 8, 4, 64, 8192, true, 0, 0, 0},
    {"odd", 3, 384, 640, 6, 2, 64, 4096, false, 0, 0, 0},
    {"0.6b", 28, 1024, 3072, 16, 8, 128, 40960, true, 0, 0, 0},
    {"4b", 36, 2560, 9728, 32, 8, 128, 40960, true, 0, 0, 0},
};

/* qwen3moe shapes. Test shapes (ours): "tiny" 16 experts top-4, "small" 8
 * experts top-2 (switches on llama.cpp's 8-expert Q4_K_M rules, as the
 * qwen35moe "small"); expert widths that are multiples of 256, so K-quant
 * mixes keep their K types. n_ff is the feed_forward_length key, which the
 * converter writes from the dense intermediate_size; only n_ff_exp is
 * used.
 *   30b-a3b Qwen/Qwen3-30B-A3B: 48 layers, hidden 2048, intermediate 6144,
 *           32 / 4 heads of 128, 128 experts, 8 per token, moe_intermediate
 *           768, no shared expert, context 40960, untied, rope base 1e6, eps
 *           1e-6, vocab 151936 (config.json as mirrored in derived configs,
 *           e.g. a "Qwen3-30B-A3B-tiny" profiling config that keeps every
 *           value but layers / experts; apxml.com spec sheet for 48 layers,
 *           128 experts top-8, no shared experts; llama.cpp's qwen3moe.cpp
 *           names 48 layers LLM_TYPE_30B_A3B). The vocabulary is the --vocab
 *           file's (pass --n-vocab 151936 for the padded size). */
static const bd_synth_shape moe_shapes[] = {
    {"tiny", 4, 256, 1024, 4, 2, 64, 4096, true, 16, 4, 256},
    {"small", 8, 512, 1024, 8, 4, 64, 8192, false, 8, 2, 512},
    {"30b-a3b", 48, 2048, 6144, 32, 4, 128, 40960, false, 128, 8, 768},
};

const bd_synth_shape *bd_synth_shape_find(const char *arch, const char *name) {
    const bool moe = arch && !strcmp(arch, "qwen3moe");
    if (!name || !arch || (!moe && strcmp(arch, "qwen3") && strcmp(arch, "llama") && strcmp(arch, "qwen2")))
        return NULL;
    const bd_synth_shape *t = moe ? moe_shapes : shapes;
    const size_t n = moe ? sizeof moe_shapes / sizeof moe_shapes[0] : sizeof shapes / sizeof shapes[0];
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, t[i].name)) return &t[i];
    return NULL;
}

const char *bd_synth_shape_names(const char *arch) {
    return arch && !strcmp(arch, "qwen3moe") ? "tiny small 30b-a3b" : "tiny small odd 0.6b 4b";
}

/* Hybrid (qwen35 / qwen35moe) shapes.
 *
 * Test shapes (ours): "tiny" has n_v/n_k = 2, "small" n_v/n_k = 3 (as
 * Qwen3.6-27B; a V->K head mapping error is invisible when n_v == n_k)
 * and a V width of 384, which is not a multiple of 256 (ssm_out exercises
 * the quantizers' width fallbacks). All have partial rotary (n_rot =
 * head_dim / 4) with IMROPE sections adding up to n_rot / 2. The MoE "tiny"
 * has 16 experts top-4, "small" 8 experts top-2, which switches on
 * llama.cpp's 8-expert Q4_K_M rules (attn_v/attn_qkv/attn_k Q8_0,
 * attn_output Q5_K).
 *
 * Real shapes, from the published Hugging Face configs and GGUF headers:
 *   0.8b    Qwen/Qwen3.5-0.8B: 24 layers, hidden 1024, intermediate 3584,
 *           8 / 2 heads of 256, vocab 248320 (model card; THUDM/slime
 *           scripts/models/qwen3.5-0.8B.sh; apxml.com spec sheet). Tied: the
 *           slime script has no --untie-embeddings-and-output-weights.
 *           GDN 16 K / 16 V heads: NOT confirmed from the official config
 *           (taken from configs derived from it, e.g. oopere/Qwen3.5-0.65B-
 *           Base-Rearchitected, and from Qwen3.5-2B's GGUF, 16/16).
 *   4b      Qwen/Qwen3.5-4B: 32 layers, 2560, 9216, 16 / 4 heads of 256, GDN
 *           16 K / 32 V (model card; GGUF header qwen35.ssm.time_step_rank =
 *           32, inner_size 4096). Tied: unsloth's Qwen3.5-4B Q6_K GGUF holds
 *           426 tensors = 24 GDN x 14 + 8 attention x 11 + token_embd +
 *           output_norm, no output.weight (lemonade-sdk/llamacpp-rocm#75).
 *   9b      Qwen/Qwen3.5-9B: 32 layers, 4096, 12288, 16 / 4 heads of 256, GDN
 *           16 K / 32 V of 128, rotary 64 (model card "8 x (3 x GDN + 1 x
 *           attention)", mirrored e.g. at 2048ai.net). Untied: llama.cpp
 *           reports 8.95 B parameters for a Qwen3.5-9B Q4_K_M GGUF
 *           (lzwjava.github.io qwen3-5-9b-hybrid-review), which needs a
 *           separate output matrix (tied would be 7.9 B); config.json's
 *           tie_word_embeddings itself was not found.
 *   27b     Qwen/Qwen3.6-27B (= Qwen3.5-27B architecture): 64 layers, 5120,
 *           17408, 24 / 4 heads of 256, GDN 16 K / 48 V of 128 (THUDM/slime
 *           scripts/models/qwen3.5-27B.sh with --untie-embeddings-...;
 *           unsloth GGUF header in llama.cpp PR #23792; reference qwen35-
 *           hybrid.md section 8).
 *   35b-a3b Qwen/Qwen3.6-35B-A3B (= Qwen3.5-35B-A3B topology): 40 layers,
 *           2048, 16 / 2 heads of 256, GDN 16 K / 32 V, 256 experts top-8
 *           of 512, shared expert 512 with its sigmoid gate (THUDM/slime
 *           scripts/models/qwen3.5-35B-A3B.sh, qwen36-35B-A3B.sh; GGUF
 *           header in ollama PR #16031: expert_count 256,
 *           expert_(shared_)feed_forward_length 512). Untied, split gate/up
 *           experts: unsloth's UD-Q6_K_XL file holds 733 tensors = 30 x 19
 *           + 10 x 16 + 3 (ik_llama.cpp#1420). No feed_forward_length key
 *           (upstream's converter writes none for this model).
 * All real shapes: rotary 64 of 256 lanes, sections [11, 11, 10, 0], rope
 * base 1e7, eps 1e-6, conv kernel 4, interval 4, context 262144, vocab
 * 248320 (the mask id 248070 of the DFlash drafters exists). */
static const bd_synth_hybrid_shape hybrid_shapes[] = {
    {.name = "tiny", .n_layer = 4, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2,
     .head_dim = 64, .n_rot = 16, .sections = {3, 3, 2, 0}, .n_ctx = 4096, .ssm_d_state = 64,
     .ssm_n_k = 2, .ssm_n_v = 4, .ssm_conv = 4, .interval = 4, .tied = true},
    {.name = "small", .n_layer = 8, .n_embd = 512, .n_ff = 1536, .n_head = 8, .n_head_kv = 2,
     .head_dim = 128, .n_rot = 32, .sections = {6, 5, 5, 0}, .n_ctx = 8192, .ssm_d_state = 64,
     .ssm_n_k = 2, .ssm_n_v = 6, .ssm_conv = 4, .interval = 4, .tied = false},
    {.name = "0.8b", .n_layer = 24, .n_embd = 1024, .n_ff = 3584, .n_head = 8, .n_head_kv = 2,
     .head_dim = 256, .n_rot = 64, .sections = {11, 11, 10, 0}, .n_ctx = 262144,
     .ssm_d_state = 128, .ssm_n_k = 16, .ssm_n_v = 16, .ssm_conv = 4, .interval = 4,
     .n_vocab = 248320, .tied = true},
    {.name = "4b", .n_layer = 32, .n_embd = 2560, .n_ff = 9216, .n_head = 16, .n_head_kv = 4,
     .head_dim = 256, .n_rot = 64, .sections = {11, 11, 10, 0}, .n_ctx = 262144,
     .ssm_d_state = 128, .ssm_n_k = 16, .ssm_n_v = 32, .ssm_conv = 4, .interval = 4,
     .n_vocab = 248320, .tied = true},
    {.name = "9b", .n_layer = 32, .n_embd = 4096, .n_ff = 12288, .n_head = 16, .n_head_kv = 4,
     .head_dim = 256, .n_rot = 64, .sections = {11, 11, 10, 0}, .n_ctx = 262144,
     .ssm_d_state = 128, .ssm_n_k = 16, .ssm_n_v = 32, .ssm_conv = 4, .interval = 4,
     .n_vocab = 248320, .tied = false},
    {.name = "27b", .n_layer = 64, .n_embd = 5120, .n_ff = 17408, .n_head = 24, .n_head_kv = 4,
     .head_dim = 256, .n_rot = 64, .sections = {11, 11, 10, 0}, .n_ctx = 262144,
     .ssm_d_state = 128, .ssm_n_k = 16, .ssm_n_v = 48, .ssm_conv = 4, .interval = 4,
     .n_vocab = 248320, .tied = false},
    /* qwen35moe */
    {.name = "tiny", .moe = true, .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
     .head_dim = 64, .n_rot = 16, .sections = {3, 3, 2, 0}, .n_ctx = 4096, .ssm_d_state = 64,
     .ssm_n_k = 2, .ssm_n_v = 4, .ssm_conv = 4, .interval = 4, .n_expert = 16,
     .n_expert_used = 4, .n_ff_exp = 256, .n_ff_shexp = 256, .tied = true},
    {.name = "small", .moe = true, .n_layer = 8, .n_embd = 512, .n_head = 8, .n_head_kv = 2,
     .head_dim = 128, .n_rot = 32, .sections = {6, 5, 5, 0}, .n_ctx = 8192, .ssm_d_state = 64,
     .ssm_n_k = 2, .ssm_n_v = 6, .ssm_conv = 4, .interval = 4, .n_expert = 8,
     .n_expert_used = 2, .n_ff_exp = 512, .n_ff_shexp = 512, .tied = false},
    {.name = "35b-a3b", .moe = true, .n_layer = 40, .n_embd = 2048, .n_head = 16, .n_head_kv = 2,
     .head_dim = 256, .n_rot = 64, .sections = {11, 11, 10, 0}, .n_ctx = 262144,
     .ssm_d_state = 128, .ssm_n_k = 16, .ssm_n_v = 32, .ssm_conv = 4, .interval = 4,
     .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 512, .n_ff_shexp = 512,
     .n_vocab = 248320, .tied = false},
    /* qwen3next: the qwen35moe test shapes without IMROPE (n_rot lanes of
     * NEOX), and Qwen/Qwen3-Next-80B-A3B: 48 layers, hidden 2048, 16 / 2
     * heads of 256, GDN 16 K / 32 V heads of 128, conv 4, interval 4, MoE
     * width 512, context 262144 (its config.json), 512 experts, 10 routed
     * plus one shared (Qwen's announcement), rotary 25 % of the head (64;
     * configs derived from it), vocabulary 151936 (the Qwen3 tokenizer),
     * untied. Not confirmed from the official config here: the shared
     * expert's width 512 and rope base 1e7 (synthetic files use 1e7). */
    {.name = "tiny", .moe = true, .next = true, .n_layer = 4, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
     .head_dim = 64, .n_rot = 16, .n_ctx = 4096, .ssm_d_state = 64, .ssm_n_k = 2, .ssm_n_v = 4, .ssm_conv = 4,
     .interval = 4, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .n_ff_shexp = 256, .tied = true},
    {.name = "small", .moe = true, .next = true, .n_layer = 8, .n_embd = 512, .n_head = 8, .n_head_kv = 2,
     .head_dim = 128, .n_rot = 32, .n_ctx = 8192, .ssm_d_state = 64, .ssm_n_k = 2, .ssm_n_v = 6, .ssm_conv = 4,
     .interval = 4, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 512, .n_ff_shexp = 512, .tied = false},
    {.name = "80b-a3b", .moe = true, .next = true, .n_layer = 48, .n_embd = 2048, .n_head = 16, .n_head_kv = 2,
     .head_dim = 256, .n_rot = 64, .n_ctx = 262144, .ssm_d_state = 128, .ssm_n_k = 16, .ssm_n_v = 32,
     .ssm_conv = 4, .interval = 4, .n_expert = 512, .n_expert_used = 10, .n_ff_exp = 512, .n_ff_shexp = 512,
     .n_vocab = 151936, .tied = false},
};

bool bd_synth_arch_is_hybrid(const char *arch) {
    return arch && (!strcmp(arch, "qwen35") || !strcmp(arch, "qwen35moe") || !strcmp(arch, "qwen3next"));
}

const bd_synth_hybrid_shape *bd_synth_hybrid_shape_find(const char *arch, const char *name) {
    if (!bd_synth_arch_is_hybrid(arch) || !name) return NULL;
    const bool next = !strcmp(arch, "qwen3next"), moe = next || !strcmp(arch, "qwen35moe");
    for (size_t i = 0; i < sizeof hybrid_shapes / sizeof hybrid_shapes[0]; i++)
        if (hybrid_shapes[i].moe == moe && hybrid_shapes[i].next == next && !strcmp(name, hybrid_shapes[i].name))
            return &hybrid_shapes[i];
    return NULL;
}

const char *bd_synth_hybrid_shape_names(const char *arch) {
    if (arch && !strcmp(arch, "qwen3next")) return "tiny small 80b-a3b";
    return arch && !strcmp(arch, "qwen35moe") ? "tiny small 35b-a3b" : "tiny small 0.8b 4b 9b 27b";
}

enum mix_kind { MIX_UNIFORM, MIX_Q4_K_M, MIX_CYCLE, MIX_UD };

typedef struct mix_def {
    const char *name;
    enum mix_kind kind;
    uint32_t type;      /* the type of every 2-D weight (MIX_UNIFORM), base type (Q4_K_M) */
    uint32_t file_type; /* llama_ftype */
} mix_def;

static const mix_def mixes[] = {
    {"f32", MIX_UNIFORM, BD_TYPE_F32, 0},
    {"f16", MIX_UNIFORM, BD_TYPE_F16, 1},
    {"bf16", MIX_UNIFORM, BD_TYPE_BF16, 32},
    {"q8_0", MIX_UNIFORM, BD_TYPE_Q8_0, 7},
    {"q4_k_m", MIX_Q4_K_M, BD_TYPE_Q4_K, 15},
    {"mix", MIX_CYCLE, BD_TYPE_Q4_K, 15},
    {"q4_0", MIX_UNIFORM, BD_TYPE_Q4_0, 2},
    {"q4_1", MIX_UNIFORM, BD_TYPE_Q4_1, 3},
    {"q5_0", MIX_UNIFORM, BD_TYPE_Q5_0, 8},
    {"q5_1", MIX_UNIFORM, BD_TYPE_Q5_1, 9},
    {"q2_k", MIX_UNIFORM, BD_TYPE_Q2_K, 10},
    {"q3_k", MIX_UNIFORM, BD_TYPE_Q3_K, 11},
    {"q4_k", MIX_UNIFORM, BD_TYPE_Q4_K, 14},
    {"q5_k", MIX_UNIFORM, BD_TYPE_Q5_K, 16},
    {"q6_k", MIX_UNIFORM, BD_TYPE_Q6_K, 18},
    {"iq4_nl", MIX_UNIFORM, BD_TYPE_IQ4_NL, 25},
    {"iq4_xs", MIX_UNIFORM, BD_TYPE_IQ4_XS, 30},
    {"ud-q4_k_m", MIX_UD, BD_TYPE_Q4_K, 15},
};

const char *bd_synth_mix_names(void) {
    return "f32 f16 bf16 q8_0 q4_k_m mix q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs "
           "ud-q4_k_m (hybrid archs, qwen3moe)";
}

static const mix_def *mix_find(const char *name) {
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++)
        if (name && !strcmp(name, mixes[i].name)) return &mixes[i];
    return NULL;
}

bool bd_synth_use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* llama.cpp's tensor_type_fallback: a 256-block type on a width that is not
 * a multiple of 256 becomes a 32-block type; F16 if that does not fit. */
static uint32_t width_fallback(uint32_t type, uint64_t ne0) {
    const bd_type_traits *t = bd_type_get(type);
    if (!t || ne0 % (uint64_t)t->blck == 0) return type;
    uint32_t fb;
    switch (type) {
    case BD_TYPE_Q4_K: fb = BD_TYPE_Q5_0; break;
    case BD_TYPE_Q5_K: fb = BD_TYPE_Q5_1; break;
    case BD_TYPE_Q6_K: fb = BD_TYPE_Q8_0; break;
    case BD_TYPE_IQ4_XS: fb = BD_TYPE_IQ4_NL; break;
    case BD_TYPE_Q2_K:
    case BD_TYPE_Q3_K: fb = BD_TYPE_Q4_0; break;
    default: fb = type; break;
    }
    const bd_type_traits *f = bd_type_get(fb);
    if (!f || ne0 % (uint64_t)f->blck != 0) fb = BD_TYPE_F16;
    return fb;
}

/* ========================================================================
 * Plan
 * ====================================================================== */

static bd_synth_tensor *plan_add(bd_synth_plan *p, const char *name, uint32_t n_dims, uint64_t ne0,
                                 uint64_t ne1, enum bd_synth_init init, float scale) {
    bd_synth_tensor *t = &p->tensors[p->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims > 1 ? ne1 : 1;
    t->ne[2] = 1;
    t->type = BD_TYPE_F32;
    t->init = init;
    t->scale = scale;
    return t;
}

/* sqrt is correctly rounded (IEEE), so this is the same everywhere. */
static float inv_sqrt(uint64_t n) { return (float)(1.0 / sqrt((double)n)); }

static bool hybrid_plan_make(const bd_synth_opts *o, const mix_def *m, uint32_t n_vocab,
                             bd_synth_plan *p, char *err, size_t errlen);
static int cmp_llama_order(const void *a, const void *b);
static void assign_types_llama_order(bd_synth_plan *p, const mix_def *m, int n_expert);

uint32_t bd_synth_n_vocab(const bd_synth_opts *o, uint32_t file_n) {
    if (o->n_vocab) return o->n_vocab;
    const bd_synth_hybrid_shape *h = bd_synth_hybrid_shape_find(o->arch, o->shape);
    if (h && h->n_vocab) return h->n_vocab;
    return file_n;
}

bool bd_synth_plan_make(const bd_synth_opts *o, uint32_t n_vocab, bd_synth_plan *p, char *err,
                        size_t errlen) {
    memset(p, 0, sizeof *p);
    if (bd_synth_arch_is_hybrid(o->arch)) {
        const mix_def *m = mix_find(o->mix);
        if (!m) return bd_err(err, errlen, "unknown quantization mix '%s' (one of: %s)",
                              o->mix ? o->mix : "", bd_synth_mix_names());
        if (!hybrid_plan_make(o, m, n_vocab, p, err, errlen)) {
            bd_synth_plan_free(p);
            return false;
        }
        return true;
    }
    if (!o->arch || (strcmp(o->arch, "qwen3") && strcmp(o->arch, "llama") && strcmp(o->arch, "qwen3moe") &&
                     strcmp(o->arch, "qwen2")))
        return bd_err(err, errlen, "unknown arch '%s' (qwen3, llama, qwen2, qwen3moe, qwen35, qwen35moe or qwen3next)",
                      o->arch ? o->arch : "");
    const bd_synth_shape *s = bd_synth_shape_find(o->arch, o->shape);
    if (!s) return bd_err(err, errlen, "unknown %s shape '%s' (one of: %s)", o->arch, o->shape ? o->shape : "",
                          bd_synth_shape_names(o->arch));
    const mix_def *m = mix_find(o->mix);
    if (!m) return bd_err(err, errlen, "unknown quantization mix '%s' (one of: %s)",
                          o->mix ? o->mix : "", bd_synth_mix_names());
    const bool moe = s->n_expert > 0;
    if (m->kind == MIX_UD && !moe)
        return bd_err(err, errlen, "mix %s is defined for the hybrid archs and qwen3moe only", m->name);
    if (o->n_mtp || o->recurrent || o->fused_gate_up || o->gdn_split)
        return bd_err(err, errlen, "--mtp, --recurrent-layers, --fused-gate-up and --gdn-split apply to the "
                                   "hybrid archs only");
    if (o->n_layers > 256) return bd_err(err, errlen, "--layers %u: at most 256", o->n_layers);
    if (n_vocab < 2) return bd_err(err, errlen, "vocabulary too small (%u tokens)", n_vocab);
    p->shape = s;
    p->arch = moe ? "qwen3moe" : !strcmp(o->arch, "qwen3") ? "qwen3" : !strcmp(o->arch, "qwen2") ? "qwen2" : "llama";
    p->qwen3 = !strcmp(p->arch, "qwen3") || moe;
    p->qwen2 = !strcmp(p->arch, "qwen2");
    /* llama.cpp's qwen2 takes attn_q as {n_embd, n_embd} */
    if (p->qwen2 && (uint64_t)s->n_head * s->head_dim != s->n_embd)
        return bd_err(err, errlen, "qwen2 needs head_count x head_dim = embedding_length; shape %s has %u x %u != %u",
                      s->name, s->n_head, s->head_dim, s->n_embd);
    p->tied = o->tied < 0 ? s->tied : o->tied != 0;
    p->n_vocab = n_vocab;
    p->n_layer = o->n_layers ? o->n_layers : s->n_layer;
    p->file_type = m->file_type;
    int per_layer = moe ? 12 : p->qwen3 || p->qwen2 ? 12 : 9;
    p->tensors = calloc((size_t)(3 + per_layer * p->n_layer), sizeof *p->tensors);
    if (!p->tensors) return bd_err(err, errlen, "out of memory");

    const uint64_t E = s->n_embd, F = s->n_ff, Q = (uint64_t)s->n_head * s->head_dim,
                   KV = (uint64_t)s->n_head_kv * s->head_dim, V = n_vocab;
    /* Logit std ~ 4: |row| * rms(normed x) = 4/sqrt(E) * sqrt(E). */
    /* Scales (std of the entries), found by checking greedy decoding of the
     * tiny/small/odd/0.6b shapes with llama.cpp: with every matmul at
     * 1/sqrt(fan_in) the residual stream is dominated by slowly changing
     * attention averages and greedy decoding repeats one token. A damped
     * attention output, a stronger FFN (3x) and sharper attention scores (2x
     * q/k, or q/k norm weights near 2 for qwen3) give varied sequences.
     * Experts use the dense FFN's scales with their own width. */
    const float s_vocab = 4.0f * inv_sqrt(E), s_in = inv_sqrt(E), s_o = 0.5f * inv_sqrt(Q),
                s_down = 3.0f * inv_sqrt(moe ? s->n_ff_exp : F), s_norm = 0.1f, s_qk = 2.0f * inv_sqrt(E);
    char nm[48];

    plan_add(p, "token_embd.weight", 2, E, V, BD_SYNTH_MATRIX, s_vocab);
    plan_add(p, "output_norm.weight", 1, E, 1, o->constant_output ? BD_SYNTH_ZERO : BD_SYNTH_NORM, s_norm);
    if (!p->tied) plan_add(p, "output.weight", 2, E, V, BD_SYNTH_MATRIX, s_vocab);
    for (uint32_t l = 0; l < p->n_layer; l++) {
#define ADD(suffix, nd, a, b, init, sc)                                   \
    do {                                                                  \
        snprintf(nm, sizeof nm, "blk.%u.%s.weight", l, suffix);           \
        plan_add(p, nm, nd, a, b, init, sc);                              \
    } while (0)
#define ADD3(suffix, a, b, c, init, sc)                                   \
    do {                                                                  \
        snprintf(nm, sizeof nm, "blk.%u.%s.weight", l, suffix);           \
        plan_add(p, nm, 3, a, b, init, sc)->ne[2] = c;                    \
    } while (0)
        ADD("attn_norm", 1, E, 1, BD_SYNTH_NORM, s_norm);
        ADD("attn_q", 2, E, Q, BD_SYNTH_MATRIX, s_qk);
        ADD("attn_k", 2, E, KV, BD_SYNTH_MATRIX, s_qk);
        ADD("attn_v", 2, E, KV, BD_SYNTH_MATRIX, s_in);
        if (p->qwen2) {
            /* q/k/v biases (Qwen2's k bias is known to be large: 1.0) */
            static const char *const bn[3] = {"attn_q", "attn_k", "attn_v"};
            const uint64_t bw[3] = {Q, KV, KV};
            const float bs[3] = {0.5f, 1.0f, 0.1f};
            for (int b = 0; b < 3; b++) {
                snprintf(nm, sizeof nm, "blk.%u.%s.bias", l, bn[b]);
                plan_add(p, nm, 1, bw[b], 1, BD_SYNTH_MATRIX, bs[b]);
            }
        }
        if (p->qwen3) {
            ADD("attn_q_norm", 1, s->head_dim, 1, BD_SYNTH_NORM_QK, s_norm);
            ADD("attn_k_norm", 1, s->head_dim, 1, BD_SYNTH_NORM_QK, s_norm);
        }
        ADD("attn_output", 2, Q, E, BD_SYNTH_MATRIX, s_o);
        ADD("ffn_norm", 1, E, 1, BD_SYNTH_NORM, s_norm);
        if (moe) {
            const uint64_t FE = s->n_ff_exp, NE = s->n_expert;
            /* router logits with a standard deviation of ~4, as for the
             * vocabulary: the k-th and (k+1)-th experts are rarely near a
             * tie, so a last-bit difference upstream seldom swaps an expert */
            ADD("ffn_gate_inp", 2, E, NE, BD_SYNTH_MATRIX, 4.0f * s_in);
            ADD3("ffn_gate_exps", E, FE, NE, BD_SYNTH_MATRIX, s_in);
            ADD3("ffn_up_exps", E, FE, NE, BD_SYNTH_MATRIX, s_in);
            ADD3("ffn_down_exps", FE, E, NE, BD_SYNTH_MATRIX, s_down);
            continue;
        }
        ADD("ffn_gate", 2, E, F, BD_SYNTH_MATRIX, s_in);
        ADD("ffn_up", 2, E, F, BD_SYNTH_MATRIX, s_in);
        ADD("ffn_down", 2, F, E, BD_SYNTH_MATRIX, s_down);
#undef ADD
#undef ADD3
    }
    if (moe) {
        /* as llama.cpp's quantizer writes and types them (see
         * assign_types_llama_order) */
        qsort(p->tensors, (size_t)p->n_tensors, sizeof *p->tensors, cmp_llama_order);
        assign_types_llama_order(p, m, (int)s->n_expert);
        return true;
    }

    /* Types. Counters follow llama-quant.cpp: attn_v tensors are counted in
     * file order, ffn_down per layer. */
    static const uint32_t cycle[] = {BD_TYPE_Q4_K, BD_TYPE_Q6_K, BD_TYPE_Q8_0, BD_TYPE_F16,
                                     BD_TYPE_BF16};
    int n_attn_v = (int)p->n_layer, i_attn_v = 0, n_ffn_down = (int)p->n_layer, i_ffn_down = 0;
    int k_2d = 0;
    for (int i = 0; i < p->n_tensors; i++) {
        bd_synth_tensor *t = &p->tensors[i];
        if (t->n_dims < 2) continue; /* norms stay F32 */
        uint32_t type = m->type;
        bool is_out = !strcmp(t->name, "output.weight") ||
                      (p->tied && !strcmp(t->name, "token_embd.weight"));
        if (m->kind == MIX_CYCLE) {
            type = cycle[k_2d % (int)(sizeof cycle / sizeof cycle[0])];
        } else if (m->kind == MIX_Q4_K_M) {
            if (is_out) type = t->ne[0] % QK_K ? BD_TYPE_Q8_0 : BD_TYPE_Q6_K;
            else if (strstr(t->name, "attn_v.weight")) {
                if (bd_synth_use_more_bits(i_attn_v, n_attn_v)) type = BD_TYPE_Q6_K;
                i_attn_v++;
            } else if (strstr(t->name, "ffn_down")) {
                if (bd_synth_use_more_bits(i_ffn_down, n_ffn_down)) type = BD_TYPE_Q6_K;
                i_ffn_down++;
            }
        }
        k_2d++;
        t->type = width_fallback(type, t->ne[0]);
    }
    return true;
}

void bd_synth_plan_free(bd_synth_plan *p) {
    free(p->tensors);
    free(p->recurrent);
    memset(p, 0, sizeof *p);
}

/* ========================================================================
 * Hybrid plans (qwen35 / qwen35moe)
 * ====================================================================== */

/* Layer of a tensor name "blk.N.*", -1 for global tensors: the key of
 * llama.cpp's tensor order (llama_model_loader::weight_name_comparer: by
 * layer, then by name), which its quantizer walks and writes. */
static int name_layer(const char *name) {
    if (strncmp(name, "blk.", 4)) return -1;
    int l = 0;
    const char *c = name + 4;
    if (*c < '0' || *c > '9') return -1;
    for (; *c >= '0' && *c <= '9'; c++) l = l * 10 + (*c - '0');
    return *c == '.' ? l : -1;
}

static int cmp_llama_order(const void *a, const void *b) {
    const bd_synth_tensor *x = a, *y = b;
    int lx = name_layer(x->name), ly = name_layer(y->name);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* llama.cpp's tensor_allows_quantization (and the converter's keep-F32
 * list) for the tensors these archs have: 2-D/3-D weights except norms,
 * the router and the GDN conv kernel. */
static bool hybrid_quantizable(const bd_synth_tensor *t) {
    return t->n_dims >= 2 && ends_with(t->name, "weight") && !strstr(t->name, "_norm.weight") &&
           !strstr(t->name, "ffn_gate_inp.weight") && !strstr(t->name, "ssm_conv1d");
}

/* llama-quant.cpp tensor_get_category, same tests in the same order. */
enum tcat { CAT_OUTPUT, CAT_TOKEN_EMBD, CAT_ATTN_QKV, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_Q,
            CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OTHER };

static enum tcat tensor_category(const char *n) {
    if (!strcmp(n, "output.weight")) return CAT_OUTPUT;
    if (!strcmp(n, "token_embd.weight")) return CAT_TOKEN_EMBD;
    if (strstr(n, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (strstr(n, "attn_v.weight")) return CAT_ATTN_V;
    if (strstr(n, "attn_k.weight")) return CAT_ATTN_K;
    if (strstr(n, "attn_q.weight")) return CAT_ATTN_Q;
    if (strstr(n, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (strstr(n, "ffn_up")) return CAT_FFN_UP;
    if (strstr(n, "ffn_gate")) return CAT_FFN_GATE;
    if (strstr(n, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

/* The Unsloth-Dynamic-style mix "ud-q4_k_m". Unsloth chooses its per-tensor
 * types with its own tooling and an importance matrix; this is not their
 * recipe, only a fixed mix with the same ingredients as their published
 * Qwen3.5/3.6 UD-Q4_K_M listings (gguf-and-architectures.md section 4), so
 * that one small file holds IQ4_XS, Q4_K, Q5_K, Q6_K, Q8_0, BF16 and F32:
 *   output (or the tied token_embd) Q8_0, untied token_embd Q6_K;
 *   GDN: attn_qkv Q5_K (Q6_K where use_more_bits over the attn_v-like
 *        counter, as Q4_K_M), attn_gate Q4_K, ssm_alpha/ssm_beta/ssm_out Q8_0;
 *   attention: attn_q/attn_k Q4_K, attn_v Q6_K, attn_output BF16;
 *   dense FFN: ffn_gate/ffn_up IQ4_XS, ffn_down Q5_K (Q6_K where
 *        use_more_bits(layer, block_count));
 *   MoE: gate/up experts (split or fused) Q4_K, ffn_down_exps Q5_K, shared
 *        expert gate/up IQ4_XS and down Q6_K;
 *   MTP: nextn.eh_proj Q8_0, the block's other tensors as above;
 * then the width fallbacks of llama.cpp. */
static uint32_t ud_type(const bd_synth_tensor *t, enum tcat cat, bool tied, int *i_v, int n_v,
                        int layer, int n_all) {
    const char *n = t->name;
    if (cat == CAT_OUTPUT || (tied && cat == CAT_TOKEN_EMBD)) return BD_TYPE_Q8_0;
    if (cat == CAT_TOKEN_EMBD) return BD_TYPE_Q6_K;
    if (cat == CAT_ATTN_QKV) return bd_synth_use_more_bits((*i_v)++, n_v) ? BD_TYPE_Q6_K : BD_TYPE_Q5_K;
    if (cat == CAT_ATTN_V) { (*i_v)++; return BD_TYPE_Q6_K; }
    if (strstr(n, "ssm_alpha") || strstr(n, "ssm_beta") || strstr(n, "ssm_out") || strstr(n, "nextn.eh_proj"))
        return BD_TYPE_Q8_0;
    if (cat == CAT_ATTN_OUTPUT) return BD_TYPE_BF16;
    if (strstr(n, "_shexp")) return cat == CAT_FFN_DOWN ? BD_TYPE_Q6_K : BD_TYPE_IQ4_XS;
    if (strstr(n, "_exps")) return cat == CAT_FFN_DOWN ? BD_TYPE_Q5_K : BD_TYPE_Q4_K;
    if (cat == CAT_FFN_DOWN) return bd_synth_use_more_bits(layer, n_all) ? BD_TYPE_Q6_K : BD_TYPE_Q5_K;
    if (cat == CAT_FFN_UP || cat == CAT_FFN_GATE) return BD_TYPE_IQ4_XS;
    return BD_TYPE_Q4_K;
}

/* Types of a hybrid or qwen3moe plan (n_expert 0: no experts), tensors
 * already in llama.cpp's order. */
static void assign_types_llama_order(bd_synth_plan *p, const mix_def *m, int n_expert) {
    static const uint32_t cycle[] = {BD_TYPE_Q4_K, BD_TYPE_Q6_K, BD_TYPE_Q8_0, BD_TYPE_F16,
                                     BD_TYPE_BF16};
    const int n_all = (int)(p->n_layer + p->n_mtp);
    /* llama-quant.cpp: n_expert = max(1, hparams.n_expert); the 8-expert
     * rules test hparams.n_expert == 8 */
    int n_v = 0, i_v = 0, i_down = 0, k = 0;
    for (int i = 0; i < p->n_tensors; i++) {
        enum tcat c = tensor_category(p->tensors[i].name);
        if (c == CAT_ATTN_QKV || c == CAT_ATTN_V) n_v++;
    }
    for (int i = 0; i < p->n_tensors; i++) {
        bd_synth_tensor *t = &p->tensors[i];
        if (!hybrid_quantizable(t)) {
            t->type = BD_TYPE_F32;
            continue;
        }
        enum tcat cat = tensor_category(t->name);
        int layer = name_layer(t->name);
        uint32_t type = m->type;
        if (m->kind == MIX_CYCLE) {
            type = cycle[k++ % (int)(sizeof cycle / sizeof cycle[0])];
        } else if (m->kind == MIX_UD) {
            type = ud_type(t, cat, p->tied, &i_v, n_v, layer, n_all);
        } else if (m->kind == MIX_Q4_K_M) {
            /* llama_tensor_get_type_impl, LLAMA_FTYPE_MOSTLY_Q4_K_M branches */
            if (cat == CAT_OUTPUT || (p->tied && cat == CAT_TOKEN_EMBD)) {
                type = t->ne[0] % QK_K ? BD_TYPE_Q8_0 : BD_TYPE_Q6_K;
            } else if (cat == CAT_TOKEN_EMBD) {
                /* stays at the base type */
            } else if (cat == CAT_ATTN_QKV || cat == CAT_ATTN_V) {
                if (bd_synth_use_more_bits(i_v, n_v)) type = BD_TYPE_Q6_K;
                if (n_expert == 8) type = BD_TYPE_Q8_0;
                i_v++;
            } else if (cat == CAT_ATTN_K) {
                if (n_expert == 8) type = BD_TYPE_Q8_0;
            } else if (cat == CAT_FFN_DOWN) {
                /* layer_info: the layer parsed from the name when n_expert > 1,
                 * else the count of ffn_down tensors so far; n = block_count */
                int il = n_expert > 1 ? layer : i_down;
                if (bd_synth_use_more_bits(il, n_all)) type = BD_TYPE_Q6_K;
                i_down++;
            } else if (cat == CAT_ATTN_OUTPUT) {
                if (n_expert == 8) type = BD_TYPE_Q5_K;
            }
        }
        t->type = width_fallback(type, t->ne[0]);
    }
}

/* Parse --recurrent-layers: "auto" (the interval rule, written as a key)
 * or n comma-separated 0/1 flags. */
static bool parse_recurrent(const char *spec, uint32_t n, uint32_t interval, uint8_t *out,
                            char *err, size_t errlen) {
    if (!strcmp(spec, "auto")) {
        for (uint32_t i = 0; i < n; i++) out[i] = (i + 1) % interval != 0;
        return true;
    }
    uint32_t k = 0;
    for (const char *c = spec;;) {
        if ((*c != '0' && *c != '1') || (c[1] != ',' && c[1] != '\0'))
            return bd_err(err, errlen, "--recurrent-layers: expected 'auto' or comma-separated 0/1 "
                                       "flags, got '%.64s'", spec);
        if (k == n)
            return bd_err(err, errlen, "--recurrent-layers: more than %u flags (one per trunk layer)", n);
        out[k++] = *c == '1';
        if (c[1] == '\0') break;
        c += 2;
    }
    if (k != n)
        return bd_err(err, errlen, "--recurrent-layers: %u flags for %u trunk layers", k, n);
    return true;
}

/* Weight scales (std of the entries) of the hybrid archs. As for qwen3
 * (see bd_synth_plan_make) they were chosen by running the files through
 * llama.cpp (tests/e2e/synth_hybrid.sh): logits with a standard deviation
 * of a few units, varied greedy continuations, a residual stream not
 * dominated by the token embedding, and GDN layers whose state carries
 * information over 64+ tokens:
 *   decay g = softplus(alpha + dt_bias) * ssm_a with ssm_a = -0.9 +- 0.2 z
 *   (always in [-1.6, -0.2]: ssm_a is -exp(A_log) < 0 in real files),
 *   dt_bias = -4 +- 0.5 z and alpha = W_alpha h with std 0.5, so
 *   softplus(.) is ~0.003..0.1 and g ~ -0.02 on average: a head forgets
 *   with an e-folding time of ~50 tokens, the slowest ones of several
 *   hundred; beta = sigmoid(W_beta h) around 0.5. */
static bool hybrid_plan_make(const bd_synth_opts *o, const mix_def *m, uint32_t n_vocab,
                             bd_synth_plan *p, char *err, size_t errlen) {
    const bd_synth_hybrid_shape *s = bd_synth_hybrid_shape_find(o->arch, o->shape);
    if (!s) return bd_err(err, errlen, "unknown %s shape '%s' (one of: %s)", o->arch,
                          o->shape ? o->shape : "", bd_synth_hybrid_shape_names(o->arch));
    if (n_vocab < 2) return bd_err(err, errlen, "vocabulary too small (%u tokens)", n_vocab);
    if (o->fused_gate_up && !s->moe) return bd_err(err, errlen, "--fused-gate-up needs qwen35moe or qwen3next");
    if (o->gdn_split && !s->next) return bd_err(err, errlen, "--gdn-split needs qwen3next");
    const uint32_t n_layer = o->n_layers ? o->n_layers : s->n_layer;
    if (n_layer > 256) return bd_err(err, errlen, "--layers %u: at most 256", n_layer);
    if (o->n_mtp > 4) return bd_err(err, errlen, "--mtp %u: at most 4", o->n_mtp);
    p->hshape = s;
    p->tied = o->tied < 0 ? s->tied : o->tied != 0;
    p->n_vocab = n_vocab;
    p->file_type = m->file_type;
    p->n_layer = n_layer;
    p->n_mtp = o->n_mtp;
    const uint32_t n_all = n_layer + o->n_mtp;
    p->recurrent = calloc(n_all, 1);
    p->tensors = calloc((size_t)3 + 24 * (size_t)n_all, sizeof *p->tensors);
    if (!p->recurrent || !p->tensors) return bd_err(err, errlen, "out of memory");
    if (o->recurrent) {
        if (!parse_recurrent(o->recurrent, n_layer, s->interval, p->recurrent, err, errlen)) return false;
        p->recurrent_key = true;
    } else {
        for (uint32_t i = 0; i < n_layer; i++) p->recurrent[i] = (i + 1) % s->interval != 0;
    }
    /* MTP blocks are never recurrent (p->recurrent[n_layer..] stay 0) */

    const uint64_t E = s->n_embd, V = n_vocab, HD = s->head_dim;
    const uint64_t Q = HD * s->n_head, KV = HD * s->n_head_kv;
    const uint64_t DK = s->ssm_d_state, KEY = DK * s->ssm_n_k, VAL = DK * s->ssm_n_v;
    const uint64_t CONV = 2 * KEY + VAL;
    const float s_vocab = 4.0f * inv_sqrt(E), s_in = inv_sqrt(E), s_norm = 0.1f;
    const float s_attn_out = 1.0f * inv_sqrt(Q), s_ssm_out = 1.0f * inv_sqrt(VAL);
    const float s_alpha = 0.5f * inv_sqrt(E), s_conv = 0.5f;
    char nm[48];

    plan_add(p, "token_embd.weight", 2, E, V, BD_SYNTH_MATRIX, s_vocab);
    plan_add(p, "output_norm.weight", 1, E, 1, o->constant_output ? BD_SYNTH_ZERO : BD_SYNTH_NORM, s_norm);
    if (!p->tied) plan_add(p, "output.weight", 2, E, V, BD_SYNTH_MATRIX, s_vocab);
    for (uint32_t l = 0; l < n_all; l++) {
#define HADD(suffix, nd, a, b, init, sc)                                  \
    do {                                                                  \
        snprintf(nm, sizeof nm, "blk.%u.%s", l, suffix);                  \
        plan_add(p, nm, nd, a, b, init, sc);                              \
    } while (0)
#define HADD3(suffix, a, b, c, init, sc)                                  \
    do {                                                                  \
        snprintf(nm, sizeof nm, "blk.%u.%s", l, suffix);                  \
        bd_synth_tensor *t3 = plan_add(p, nm, 3, a, b, init, sc);         \
        t3->ne[2] = c;                                                    \
    } while (0)
        const bool mtp = l >= n_layer;
        HADD("attn_norm.weight", 1, E, 1, BD_SYNTH_NORM, s_norm);
        HADD("post_attention_norm.weight", 1, E, 1, BD_SYNTH_NORM, s_norm);
        if (p->recurrent[l]) {
            if (!s->next || o->gdn_split) {
                HADD("attn_qkv.weight", 2, E, CONV, BD_SYNTH_MATRIX, s_in);
                HADD("attn_gate.weight", 2, E, VAL, BD_SYNTH_MATRIX, s_in);
            } else {
                /* qwen3next's fused q/k/v/z: one group of rows per key head */
                HADD("ssm_in.weight", 2, E, CONV + VAL, BD_SYNTH_MATRIX, s_in);
            }
            HADD("ssm_conv1d.weight", 2, s->ssm_conv, CONV, BD_SYNTH_MATRIX, s_conv);
            HADD("ssm_dt.bias", 1, s->ssm_n_v, 1, BD_SYNTH_OFFSET, 0.5f);
            p->tensors[p->n_tensors - 1].offset = -4.0f;
            HADD("ssm_a", 1, s->ssm_n_v, 1, BD_SYNTH_OFFSET, 0.2f);
            p->tensors[p->n_tensors - 1].offset = -0.9f;
            if (s->next) {
                /* fused beta / alpha rows per key head, one scale: alpha's */
                HADD("ssm_ba.weight", 2, E, 2 * s->ssm_n_v, BD_SYNTH_MATRIX, s_alpha);
            } else {
                HADD("ssm_alpha.weight", 2, E, s->ssm_n_v, BD_SYNTH_MATRIX, s_alpha);
                HADD("ssm_beta.weight", 2, E, s->ssm_n_v, BD_SYNTH_MATRIX, s_in);
            }
            HADD("ssm_norm.weight", 1, DK, 1, BD_SYNTH_NORM, s_norm);
            HADD("ssm_out.weight", 2, VAL, E, BD_SYNTH_MATRIX, s_ssm_out);
        } else {
            /* attn_q rows: per head [q (HD) | gate (HD)]; q is RMS-normed per
             * head, so one scale serves both halves */
            HADD("attn_q.weight", 2, E, 2 * Q, BD_SYNTH_MATRIX, s_in);
            HADD("attn_k.weight", 2, E, KV, BD_SYNTH_MATRIX, s_in);
            HADD("attn_v.weight", 2, E, KV, BD_SYNTH_MATRIX, s_in);
            HADD("attn_output.weight", 2, Q, E, BD_SYNTH_MATRIX, s_attn_out);
            HADD("attn_q_norm.weight", 1, HD, 1, BD_SYNTH_NORM_QK, s_norm);
            HADD("attn_k_norm.weight", 1, HD, 1, BD_SYNTH_NORM_QK, s_norm);
        }
        if (!s->moe) {
            const uint64_t F = s->n_ff;
            HADD("ffn_gate.weight", 2, E, F, BD_SYNTH_MATRIX, s_in);
            HADD("ffn_up.weight", 2, E, F, BD_SYNTH_MATRIX, s_in);
            HADD("ffn_down.weight", 2, F, E, BD_SYNTH_MATRIX, 3.0f * inv_sqrt(F));
        } else {
            const uint64_t FE = s->n_ff_exp, FS = s->n_ff_shexp, NE = s->n_expert;
            HADD("ffn_gate_inp.weight", 2, E, NE, BD_SYNTH_MATRIX, s_in);
            if (o->fused_gate_up) {
                /* per expert: rows [gate (FE) | up (FE)] (llama.cpp splits the
                 * product into these two views) */
                HADD3("ffn_gate_up_exps.weight", E, 2 * FE, NE, BD_SYNTH_MATRIX, s_in);
            } else {
                HADD3("ffn_gate_exps.weight", E, FE, NE, BD_SYNTH_MATRIX, s_in);
                HADD3("ffn_up_exps.weight", E, FE, NE, BD_SYNTH_MATRIX, s_in);
            }
            HADD3("ffn_down_exps.weight", FE, E, NE, BD_SYNTH_MATRIX, 3.0f * inv_sqrt(FE));
            HADD("ffn_gate_inp_shexp.weight", 1, E, 1, BD_SYNTH_MATRIX, s_in);
            HADD("ffn_gate_shexp.weight", 2, E, FS, BD_SYNTH_MATRIX, s_in);
            HADD("ffn_up_shexp.weight", 2, E, FS, BD_SYNTH_MATRIX, s_in);
            HADD("ffn_down_shexp.weight", 2, FS, E, BD_SYNTH_MATRIX, 3.0f * inv_sqrt(FS));
        }
        if (mtp) {
            /* as llama.cpp's converter writes Qwen3.5 MTP blocks (mtp.fc ->
             * eh_proj, pre_fc_norm_embedding -> enorm, pre_fc_norm_hidden ->
             * hnorm, mtp.norm -> shared_head_norm; embed_tokens and
             * shared_head_head absent: shared with the trunk) */
            HADD("nextn.eh_proj.weight", 2, 2 * E, E, BD_SYNTH_MATRIX, inv_sqrt(2 * E));
            HADD("nextn.enorm.weight", 1, E, 1, BD_SYNTH_NORM, s_norm);
            HADD("nextn.hnorm.weight", 1, E, 1, BD_SYNTH_NORM, s_norm);
            HADD("nextn.shared_head_norm.weight", 1, E, 1, BD_SYNTH_NORM, s_norm);
        }
#undef HADD
#undef HADD3
    }
    qsort(p->tensors, (size_t)p->n_tensors, sizeof *p->tensors, cmp_llama_order);
    assign_types_llama_order(p, m, s->moe ? (int)s->n_expert : 0);
    return true;
}

/* ========================================================================
 * Streaming generation
 * ====================================================================== */

#define CHUNK_BYTES (16u << 20) /* output bytes generated per pool run */

/* Block pools. ggml-style K-quant and IQ4 quantizers search for scales and
 * cost 100-1500 ns per weight, which would make a Qwen3-4B Q4_K_M take
 * many minutes. Big tensors of those types are therefore assembled from a
 * pool of POOL_BLOCKS blocks quantized from fresh values of the same
 * distribution: each row picks its blocks with its own PRNG stream. Blocks
 * are self-contained (own scales), so the result is valid data of the type
 * with the intended value distribution; a block recurs at the same column
 * in two rows with probability 1/POOL_BLOCKS (and is then rescaled
 * differently). Rows need many blocks for this to look random, so only
 * wide rows use pools; the tiny/small test shapes are quantized exactly. */
#define POOL_BLOCKS 4096
#define POOL_ROW_BLOCKS 64      /* blocks per generated pool row */
#define POOL_MIN_ELEMS (1u << 22) /* tensors at least this big use a pool */
#define POOL_MIN_ROW_BLOCKS 8     /* ... if their rows have this many blocks */

typedef struct block_pool {
    uint32_t type;
    enum bd_synth_init init;
    float scale;
    uint64_t blck, blck_bytes;
    uint8_t *data; /* [POOL_BLOCKS][blck_bytes] */
} block_pool;

static bool type_is_slow(uint32_t type) {
    switch (type) {
    case BD_TYPE_Q2_K:
    case BD_TYPE_Q3_K:
    case BD_TYPE_Q4_K:
    case BD_TYPE_Q5_K:
    case BD_TYPE_Q6_K:
    case BD_TYPE_IQ4_NL:
    case BD_TYPE_IQ4_XS: return true;
    default: return false;
    }
}

static void f16_scale(uint8_t *p, float f) {
    bd_f16 h;
    memcpy(&h, p, 2);
    h = bd_f32_to_f16(bd_f16_to_f32(h) * f);
    memcpy(p, &h, 2);
}

/* Multiply every value of one block by f (through its f16 scales). */
static void pool_block_scale(uint32_t type, uint8_t *blk, float f) {
    switch (type) {
    case BD_TYPE_Q4_K:
    case BD_TYPE_Q5_K:
        f16_scale(blk + offsetof(block_q4_K, d), f);
        f16_scale(blk + offsetof(block_q4_K, dmin), f);
        break;
    case BD_TYPE_Q6_K: f16_scale(blk + offsetof(block_q6_K, d), f); break;
    case BD_TYPE_Q2_K:
        f16_scale(blk + offsetof(block_q2_K, d), f);
        f16_scale(blk + offsetof(block_q2_K, dmin), f);
        break;
    case BD_TYPE_Q3_K: f16_scale(blk + offsetof(block_q3_K, d), f); break;
    case BD_TYPE_IQ4_NL: f16_scale(blk + offsetof(block_iq4_nl, d), f); break;
    case BD_TYPE_IQ4_XS: f16_scale(blk + offsetof(block_iq4_xs, d), f); break;
    default: break;
    }
}

typedef struct gen_ctx {
    uint64_t seed;
    const bd_synth_tensor *t;
    bd_pool *pool;
    float *scratch;     /* [nth][max_ne0] f32 rows */
    uint64_t max_ne0;
    uint8_t *chunk;     /* CHUNK_BYTES or one row, whichever is larger */
    uint64_t row_bytes;
    uint64_t r0, r1;    /* rows of the current chunk */
    const block_pool *bp; /* non-NULL: rows are assembled from this pool */
    bool failed;
} gen_ctx;

static void gen_rows(void *vctx, int ith, int nth) {
    gen_ctx *g = vctx;
    int64_t lo, hi;
    bd_split((int64_t)(g->r1 - g->r0), ith, nth, &lo, &hi);
    float *row = g->scratch + (uint64_t)ith * g->max_ne0;
    for (int64_t r = lo; r < hi; r++) {
        uint8_t *dst = g->chunk + (uint64_t)r * g->row_bytes;
        if (g->bp) {
            rng st;
            rng_seed(&st, g->seed, g->t->name, g->r0 + (uint64_t)r);
            uint64_t nb = g->t->ne[0] / g->bp->blck, bb = g->bp->blck_bytes;
            for (uint64_t b = 0; b < nb; b++) {
                uint64_t v = rng_next(&st);
                uint8_t *blk = dst + b * bb;
                memcpy(blk, g->bp->data + (v >> 52) * bb, bb);
                /* Scale the block by 0.75..1.25 (its f16 super-scale, and
                 * the min scale where there is one) so that recurring
                 * blocks differ. */
                float f = 0.75f + 0.5f * (float)(v & 0xfffff) / (float)0xfffff;
                pool_block_scale(g->t->type, blk, f);
            }
            continue;
        }
        bd_synth_row_values(g->seed, g->t, g->r0 + (uint64_t)r, row);
        if (!bd_quantize_row(g->t->type, row, dst, (int64_t)g->t->ne[0]))
            g->failed = true; /* benign race: only ever set to true */
    }
}

/* Fill a block pool: POOL_BLOCKS/POOL_ROW_BLOCKS rows of a pseudo-tensor
 * whose name encodes (type, init, scale), quantized with the real
 * quantizer on the thread pool. */
static bool pool_fill(block_pool *bp, gen_ctx proto, char *err, size_t errlen) {
    const bd_type_traits *tt = bd_type_get(bp->type);
    bp->blck = (uint64_t)tt->blck;
    bp->blck_bytes = (uint64_t)tt->blck_bytes;
    bp->data = bd_alloc(POOL_BLOCKS * bp->blck_bytes);
    if (!bp->data) return bd_err(err, errlen, "out of memory");
    bd_synth_tensor pt = {0};
    snprintf(pt.name, sizeof pt.name, "synth-pool.%u.%d.%08x", bp->type, (int)bp->init,
             (unsigned)(bp->scale * 1e6f));
    pt.n_dims = 2;
    pt.ne[0] = bp->blck * POOL_ROW_BLOCKS;
    pt.ne[1] = POOL_BLOCKS / POOL_ROW_BLOCKS;
    pt.ne[2] = 1;
    pt.type = bp->type;
    pt.init = bp->init;
    pt.scale = bp->scale;
    gen_ctx g = proto;
    g.t = &pt;
    g.bp = NULL;
    g.chunk = bp->data;
    g.row_bytes = POOL_ROW_BLOCKS * bp->blck_bytes;
    g.r0 = 0;
    g.r1 = pt.ne[1];
    g.failed = false;
    bd_pool_run(g.pool, gen_rows, &g);
    if (g.failed) return bd_err(err, errlen, "cannot quantize to %s", bd_type_name(bp->type));
    return true;
}

/* bd_gguf_tensor_producer: emits the tensor's bytes chunk by chunk. */
static bool gen_produce(void *vctx, bd_gguf_emit_fn emit, void *sink, char *err, size_t errlen) {
    gen_ctx *g = vctx;
    uint64_t rows = g->t->ne[1] * g->t->ne[2];
    uint64_t per = CHUNK_BYTES / g->row_bytes;
    if (per == 0) per = 1;
    for (uint64_t r = 0; r < rows; r += per) {
        g->r0 = r;
        g->r1 = r + per < rows ? r + per : rows;
        bd_pool_run(g->pool, gen_rows, g);
        if (g->failed)
            return bd_err(err, errlen, "cannot quantize %s to %s", g->t->name,
                          bd_type_name(g->t->type));
        if (!emit(sink, g->chunk, (g->r1 - g->r0) * g->row_bytes))
            return bd_err(err, errlen, "writing %s failed", g->t->name);
    }
    return true;
}

static bool set_arch_u32(bd_gguf_writer *w, const char *arch, const char *key, uint32_t v) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return bd_gguf_writer_set_u32(w, k, v);
}

static bool set_arch_f32(bd_gguf_writer *w, const char *arch, const char *key, float v) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return bd_gguf_writer_set_f32(w, k, v);
}

/* Metadata of a qwen3/llama/qwen3moe model (the keys llama.cpp's
 * converter writes for them). */
static bool dense_set_keys(bd_gguf_writer *w, const bd_synth_opts *o, const bd_synth_plan *plan) {
    const bd_synth_shape *s = plan->shape;
    const char *arch = plan->arch;
    char name[200];
    snprintf(name, sizeof name, "blockdraft synthetic %s %s%s %s seed %llu", arch, s->name,
             plan->n_layer != s->n_layer ? " (fewer layers)" : "", o->mix, (unsigned long long)o->seed);
    bool ok = bd_gguf_writer_set_str(w, "general.architecture", arch) &&
              bd_gguf_writer_set_str(w, "general.name", name) &&
              bd_gguf_writer_set_u32(w, "general.file_type", plan->file_type) &&
              bd_gguf_writer_set_u32(w, "general.quantization_version", 2) &&
              set_arch_u32(w, arch, "block_count", plan->n_layer) &&
              set_arch_u32(w, arch, "context_length", s->n_ctx) &&
              set_arch_u32(w, arch, "embedding_length", s->n_embd) &&
              set_arch_u32(w, arch, "feed_forward_length", s->n_ff) &&
              set_arch_u32(w, arch, "attention.head_count", s->n_head) &&
              set_arch_u32(w, arch, "attention.head_count_kv", s->n_head_kv) &&
              set_arch_u32(w, arch, "attention.key_length", s->head_dim) &&
              set_arch_u32(w, arch, "attention.value_length", s->head_dim) &&
              set_arch_u32(w, arch, "rope.dimension_count", s->head_dim) &&
              set_arch_f32(w, arch, "rope.freq_base", plan->qwen3 || plan->qwen2 ? 1000000.0f : 10000.0f) &&
              set_arch_f32(w, arch, "attention.layer_norm_rms_epsilon", plan->qwen3 || plan->qwen2 ? 1e-6f : 1e-5f) &&
              set_arch_u32(w, arch, "vocab_size", plan->n_vocab);
    if (ok && s->n_expert)
        ok = set_arch_u32(w, arch, "expert_count", s->n_expert) &&
             set_arch_u32(w, arch, "expert_used_count", s->n_expert_used) &&
             set_arch_u32(w, arch, "expert_feed_forward_length", s->n_ff_exp);
    return ok;
}

/* Metadata of a qwen35/qwen35moe model: the keys llama.cpp v0.5.0 reads
 * (llama_model_qwen35{,moe}::load_arch_hparams and the generic loader),
 * with the value types its converter writes (u32 scalars, f32 floats,
 * i32[4] sections, bool[block_count] recurrent_layers). */
static bool hybrid_set_keys(bd_gguf_writer *w, const bd_synth_opts *o, const bd_synth_plan *plan) {
    const bd_synth_hybrid_shape *s = plan->hshape;
    const char *arch = s->next ? "qwen3next" : s->moe ? "qwen35moe" : "qwen35";
    const uint32_t n_all = plan->n_layer + plan->n_mtp;
    char name[200];
    snprintf(name, sizeof name, "blockdraft synthetic %s %s%s %s seed %llu", arch, s->name,
             plan->n_layer != s->n_layer ? " (fewer layers)" : "", o->mix, (unsigned long long)o->seed);
    char k[128];
    bool ok = bd_gguf_writer_set_str(w, "general.architecture", arch) &&
              bd_gguf_writer_set_str(w, "general.name", name) &&
              bd_gguf_writer_set_u32(w, "general.file_type", plan->file_type) &&
              bd_gguf_writer_set_u32(w, "general.quantization_version", 2) &&
              set_arch_u32(w, arch, "block_count", n_all) &&
              set_arch_u32(w, arch, "context_length", s->n_ctx) &&
              set_arch_u32(w, arch, "embedding_length", s->n_embd) &&
              (s->moe || set_arch_u32(w, arch, "feed_forward_length", s->n_ff)) &&
              set_arch_u32(w, arch, "attention.head_count", s->n_head) &&
              set_arch_u32(w, arch, "attention.head_count_kv", s->n_head_kv) &&
              set_arch_u32(w, arch, "attention.key_length", s->head_dim) &&
              set_arch_u32(w, arch, "attention.value_length", s->head_dim) &&
              set_arch_f32(w, arch, "attention.layer_norm_rms_epsilon", 1e-6f) &&
              set_arch_u32(w, arch, "rope.dimension_count", s->n_rot) &&
              set_arch_f32(w, arch, "rope.freq_base", 10000000.0f) &&
              set_arch_u32(w, arch, "ssm.conv_kernel", s->ssm_conv) &&
              set_arch_u32(w, arch, "ssm.state_size", s->ssm_d_state) &&
              set_arch_u32(w, arch, "ssm.group_count", s->ssm_n_k) &&
              set_arch_u32(w, arch, "ssm.time_step_rank", s->ssm_n_v) &&
              set_arch_u32(w, arch, "ssm.inner_size", s->ssm_d_state * s->ssm_n_v) &&
              set_arch_u32(w, arch, "full_attention_interval", s->interval) &&
              set_arch_u32(w, arch, "vocab_size", plan->n_vocab);
    snprintf(k, sizeof k, "%s.rope.dimension_sections", arch);
    ok = ok && (s->next || bd_gguf_writer_set_arr(w, k, GGUF_VTYPE_INT32, s->sections, 4));
    if (ok && plan->recurrent_key) {
        snprintf(k, sizeof k, "%s.attention.recurrent_layers", arch);
        ok = bd_gguf_writer_set_arr(w, k, GGUF_VTYPE_BOOL, plan->recurrent, n_all);
    }
    if (ok && plan->n_mtp) ok = set_arch_u32(w, arch, "nextn_predict_layers", plan->n_mtp);
    if (ok && s->moe)
        ok = set_arch_u32(w, arch, "expert_count", s->n_expert) &&
             set_arch_u32(w, arch, "expert_used_count", s->n_expert_used) &&
             set_arch_u32(w, arch, "expert_feed_forward_length", s->n_ff_exp) &&
             set_arch_u32(w, arch, "expert_shared_feed_forward_length", s->n_ff_shexp);
    return ok;
}

/* Append one little-endian value to a growing buffer. */
static void put_u(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Copy the tokenizer.* keys of the vocabulary file. A larger n_vocab pads
 * tokens and token_type with "[PAD<id>]" / UNUSED (5) entries (and the
 * SentencePiece scores, when there are any, with 0), as the HF
 * converter pads Qwen vocabularies to the embedding's row count (Qwen3's
 * own 151669..151935 are such tokens; llama.cpp accepts them). The hybrid
 * archs get the Qwen3.5 pre-tokenizer id "qwen35". */
static bool copy_tokenizer(bd_gguf_writer *w, const bd_gguf_file *voc, uint32_t n_vocab, bool hybrid) {
    const bd_gguf_kv *tok = bd_gguf_find(voc, "tokenizer.ggml.tokens");
    const bd_gguf_kv *typ = bd_gguf_find(voc, "tokenizer.ggml.token_type");
    const bd_gguf_kv *sco = bd_gguf_find(voc, "tokenizer.ggml.scores");
    const bool pad = n_vocab > tok->arr_count;
    if (pad && sco && (sco->type != GGUF_VTYPE_ARRAY || sco->arr_type != GGUF_VTYPE_FLOAT32 ||
                       sco->arr_count != tok->arr_count))
        return false;
    if (pad && (!typ || typ->type != GGUF_VTYPE_ARRAY || typ->arr_type != GGUF_VTYPE_INT32 ||
                typ->arr_count != tok->arr_count))
        return false;
    for (int64_t i = 0; i < bd_gguf_kv_count(voc); i++) {
        const bd_gguf_kv *kv = bd_gguf_kv_at(voc, i);
        if (strncmp(kv->key, "tokenizer.", 10)) continue;
        if (hybrid && !strcmp(kv->key, "tokenizer.ggml.pre")) {
            if (!bd_gguf_writer_set_str(w, kv->key, "qwen35")) return false;
        } else if (pad && kv == tok) {
            /* the array's encoding: u32 element type, u64 count, elements */
            uint64_t old = kv->data_size - 12, extra = 0;
            for (uint64_t id = kv->arr_count; id < n_vocab; id++)
                extra += 8 + (uint64_t)snprintf(NULL, 0, "[PAD%llu]", (unsigned long long)id);
            uint8_t *e = malloc(12 + old + extra);
            if (!e) return false;
            put_u(e, GGUF_VTYPE_STRING, 4);
            put_u(e + 4, n_vocab, 8);
            memcpy(e + 12, kv->data, old);
            uint64_t pos = 12 + old;
            for (uint64_t id = kv->arr_count; id < n_vocab; id++) {
                char b[32];
                int n = snprintf(b, sizeof b, "[PAD%llu]", (unsigned long long)id);
                put_u(e + pos, (uint64_t)n, 8);
                memcpy(e + pos + 8, b, (size_t)n);
                pos += 8 + (uint64_t)n;
            }
            bool ok = bd_gguf_writer_set_raw(w, kv->key, GGUF_VTYPE_ARRAY, e, pos);
            free(e);
            if (!ok) return false;
        } else if (pad && (kv == typ || kv == sco)) {
            /* 4-byte elements: token types padded with UNUSED (5), scores with 0.0f */
            uint64_t old = kv->data_size - 12;
            uint8_t *e = malloc(12 + old + 4 * (uint64_t)(n_vocab - kv->arr_count));
            if (!e) return false;
            put_u(e, kv == typ ? GGUF_VTYPE_INT32 : GGUF_VTYPE_FLOAT32, 4);
            put_u(e + 4, n_vocab, 8);
            memcpy(e + 12, kv->data, old);
            for (uint64_t id = kv->arr_count; id < n_vocab; id++) put_u(e + 12 + 4 * id, kv == typ ? 5 : 0, 4);
            bool ok = bd_gguf_writer_set_raw(w, kv->key, GGUF_VTYPE_ARRAY, e, 12 + 4 * (uint64_t)n_vocab);
            free(e);
            if (!ok) return false;
        } else if (!bd_gguf_writer_copy_kv(w, kv)) {
            return false;
        }
    }
    return true;
}

bool bd_synth_write(const bd_synth_opts *o, const char *path, char *err, size_t errlen) {
    if (!o->vocab_path) return bd_err(err, errlen, "a vocabulary GGUF (--vocab) is required");
    bd_gguf_file *voc = bd_gguf_open(o->vocab_path, err, errlen);
    if (!voc) return false;
    bool ok = false;
    bd_synth_plan plan = {0};
    bd_gguf_writer *w = NULL;
    bd_pool *pool = NULL;
    gen_ctx *gens = NULL;
    block_pool *pools = NULL;
    int n_pools = 0;
    float *scratch = NULL;
    uint8_t *chunk = NULL;

    const bd_gguf_kv *tokens = bd_gguf_find(voc, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != GGUF_VTYPE_ARRAY || tokens->arr_type != GGUF_VTYPE_STRING) {
        bd_err(err, errlen, "%s: no tokenizer.ggml.tokens string array", o->vocab_path);
        goto out;
    }
    if (tokens->arr_count > INT32_MAX) {
        bd_err(err, errlen, "%s: vocabulary too large", o->vocab_path);
        goto out;
    }
    const uint32_t file_n = (uint32_t)tokens->arr_count;
    const uint32_t n_vocab = bd_synth_n_vocab(o, file_n);
    if (n_vocab < file_n) {
        bd_err(err, errlen, "--n-vocab %u is smaller than the vocabulary of %s (%u tokens)", n_vocab,
               o->vocab_path, file_n);
        goto out;
    }
    if (!bd_synth_plan_make(o, n_vocab, &plan, err, errlen)) goto out;

    w = bd_gguf_writer_create();
    if (!w) { bd_err(err, errlen, "out of memory"); goto out; }
    bool kv_ok = plan.hshape ? hybrid_set_keys(w, o, &plan) : dense_set_keys(w, o, &plan);
    kv_ok = kv_ok && copy_tokenizer(w, voc, n_vocab, plan.hshape != NULL && !plan.hshape->next);
    if (!kv_ok) { bd_err(err, errlen, "cannot set metadata (out of memory?)"); goto out; }

    pool = bd_pool_create(o->n_threads);
    if (!pool) { bd_err(err, errlen, "cannot create the thread pool"); goto out; }
    int nth = bd_pool_size(pool);
    uint64_t max_ne0 = 0, max_row = 0;
    for (int i = 0; i < plan.n_tensors; i++) {
        uint64_t rb;
        if (!bd_row_size(plan.tensors[i].type, (int64_t)plan.tensors[i].ne[0], &rb)) {
            bd_err(err, errlen, "%s: width %llu does not fit type %s", plan.tensors[i].name,
                   (unsigned long long)plan.tensors[i].ne[0], bd_type_name(plan.tensors[i].type));
            goto out;
        }
        if (plan.tensors[i].ne[0] > max_ne0) max_ne0 = plan.tensors[i].ne[0];
        if (rb > max_row) max_row = rb;
    }
    if (max_ne0 < (uint64_t)QK_K * POOL_ROW_BLOCKS) max_ne0 = (uint64_t)QK_K * POOL_ROW_BLOCKS;
    scratch = bd_alloc((size_t)nth * max_ne0 * sizeof(float));
    chunk = bd_alloc(max_row > CHUNK_BYTES ? max_row : CHUNK_BYTES);
    gens = plan.n_tensors > 0 ? calloc((size_t)plan.n_tensors, sizeof *gens) : NULL;
    pools = plan.n_tensors > 0 ? calloc((size_t)plan.n_tensors, sizeof *pools) : NULL;
    if (!scratch || !chunk || !gens || !pools) { bd_err(err, errlen, "out of memory"); goto out; }
    for (int i = 0; i < plan.n_tensors; i++) {
        const bd_synth_tensor *t = &plan.tensors[i];
        gen_ctx *g = &gens[i];
        g->seed = o->seed;
        g->t = t;
        g->pool = pool;
        g->scratch = scratch;
        g->max_ne0 = max_ne0;
        g->chunk = chunk;
        bd_row_size(t->type, (int64_t)t->ne[0], &g->row_bytes);
        /* Expert stacks: narrow rows too (35B-A3B's ffn_down_exps rows are
         * 512 wide, 2 Q4_K blocks, and 10^10 weights would take hours to
         * quantize exactly). Never for 2-D tensors: rows of one or two
         * blocks drawn from 4096 would make near-duplicate rows, i.e. tied
         * logits when the matrix is the output. */
        uint64_t min_row = t->n_dims == 3 ? 1 : POOL_MIN_ROW_BLOCKS;
        if (type_is_slow(t->type) && t->ne[0] * t->ne[1] * t->ne[2] >= POOL_MIN_ELEMS &&
            t->ne[0] >= min_row * (uint64_t)bd_type_get(t->type)->blck) {
            /* One pool per (type, init, scale): layers share them. */
            int k = 0;
            while (k < n_pools && !(pools[k].type == t->type && pools[k].init == t->init &&
                                    pools[k].scale == t->scale))
                k++;
            if (k == n_pools) {
                pools[k].type = t->type;
                pools[k].init = t->init;
                pools[k].scale = t->scale;
                n_pools++;
                if (!pool_fill(&pools[k], *g, err, errlen)) goto out;
            }
            g->bp = &pools[k];
        }
        uint64_t nbytes = g->row_bytes * t->ne[1] * t->ne[2];
        if (!bd_gguf_writer_add_tensor_stream(w, t->name, t->type, t->n_dims, t->ne, nbytes,
                                           gen_produce, g)) {
            bd_err(err, errlen, "cannot add tensor %s", t->name);
            goto out;
        }
    }
    ok = bd_gguf_writer_write_file(w, path, err, errlen);
out:
    if (w) bd_gguf_writer_free(w);
    if (pool) bd_pool_free(pool);
    free(gens);
    for (int i = 0; i < n_pools; i++) bd_free(pools[i].data);
    free(pools);
    bd_free(scratch);
    bd_free(chunk);
    bd_synth_plan_free(&plan);
    bd_gguf_close(voc);
    return ok;
}
