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

typedef struct rng { uint64_t s[4]; } rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(rng *r) {
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

/* FNV-1a of a tensor name: separates the streams of different tensors. */
static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

static void rng_seed(rng *r, uint64_t seed, const char *name, uint64_t row) {
    uint64_t x = seed ^ name_hash(name);
    x = splitmix64(&x) ^ (row * 0xd1342543de82ef95ULL);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
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
    else
        for (uint64_t i = 0; i < n; i++) out[i] = t->scale * rng_gauss(&r);
}

/* ========================================================================
 * Shapes and mixes
 * ====================================================================== */

static const bd_synth_shape shapes[] = {
    /* name    layers embd   ff   head kv  hd   ctx    tied */
    {"tiny", 4, 256, 512, 4, 2, 64, 4096, true},
    {"small", 8, 512, 1536, 8, 4, 64, 8192, true},
    {"odd", 3, 384, 640, 6, 2, 64, 4096, false},
    {"0.6b", 28, 1024, 3072, 16, 8, 128, 40960, true},
    {"4b", 36, 2560, 9728, 32, 8, 128, 40960, true},
};

const bd_synth_shape *bd_synth_shape_find(const char *name) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (name && !strcmp(name, shapes[i].name)) return &shapes[i];
    return NULL;
}

const char *bd_synth_shape_names(void) { return "tiny small odd 0.6b 4b"; }

enum mix_kind { MIX_UNIFORM, MIX_Q4_K_M, MIX_CYCLE };

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
    {"q4_k", MIX_UNIFORM, BD_TYPE_Q4_K, 14},
    {"q5_k", MIX_UNIFORM, BD_TYPE_Q5_K, 16},
    {"q6_k", MIX_UNIFORM, BD_TYPE_Q6_K, 18},
    {"iq4_nl", MIX_UNIFORM, BD_TYPE_IQ4_NL, 25},
    {"iq4_xs", MIX_UNIFORM, BD_TYPE_IQ4_XS, 30},
};

const char *bd_synth_mix_names(void) {
    return "f32 f16 bf16 q8_0 q4_k_m mix q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k iq4_nl iq4_xs";
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
    t->type = BD_TYPE_F32;
    t->init = init;
    t->scale = scale;
    return t;
}

/* sqrt is correctly rounded (IEEE), so this is the same everywhere. */
static float inv_sqrt(uint64_t n) { return (float)(1.0 / sqrt((double)n)); }

bool bd_synth_plan_make(const bd_synth_opts *o, uint32_t n_vocab, bd_synth_plan *p, char *err,
                        size_t errlen) {
    memset(p, 0, sizeof *p);
    const bd_synth_shape *s = bd_synth_shape_find(o->shape);
    if (!s) return bd_err(err, errlen, "unknown shape '%s' (one of: %s)", o->shape ? o->shape : "",
                          bd_synth_shape_names());
    const mix_def *m = mix_find(o->mix);
    if (!m) return bd_err(err, errlen, "unknown quantization mix '%s' (one of: %s)",
                          o->mix ? o->mix : "", bd_synth_mix_names());
    if (!o->arch || (strcmp(o->arch, "qwen3") && strcmp(o->arch, "llama")))
        return bd_err(err, errlen, "unknown arch '%s' (qwen3 or llama)", o->arch ? o->arch : "");
    if (n_vocab < 2) return bd_err(err, errlen, "vocabulary too small (%u tokens)", n_vocab);
    p->shape = s;
    p->qwen3 = !strcmp(o->arch, "qwen3");
    p->tied = o->tied < 0 ? s->tied : o->tied != 0;
    p->n_vocab = n_vocab;
    p->file_type = m->file_type;
    int per_layer = p->qwen3 ? 11 : 9;
    p->tensors = calloc((size_t)(3 + per_layer * s->n_layer), sizeof *p->tensors);
    if (!p->tensors) return bd_err(err, errlen, "out of memory");

    const uint64_t E = s->n_embd, F = s->n_ff, Q = (uint64_t)s->n_head * s->head_dim,
                   KV = (uint64_t)s->n_head_kv * s->head_dim, V = n_vocab;
    /* Logit std ~ 4: |row| * rms(normed x) = 4/sqrt(E) * sqrt(E). */
    /* Scales (std of the entries), found by checking greedy decoding of the
     * tiny/small/odd/0.6b shapes with llama.cpp: with every matmul at
     * 1/sqrt(fan_in) the residual stream is dominated by slowly changing
     * attention averages and greedy decoding repeats one token. A damped
     * attention output, a stronger FFN (3x) and sharper attention scores (2x
     * q/k, or q/k norm weights near 2 for qwen3) give varied sequences. */
    const float s_vocab = 4.0f * inv_sqrt(E), s_in = inv_sqrt(E), s_o = 0.5f * inv_sqrt(Q),
                s_down = 3.0f * inv_sqrt(F), s_norm = 0.1f, s_qk = 2.0f * inv_sqrt(E);
    char nm[48];

    plan_add(p, "token_embd.weight", 2, E, V, BD_SYNTH_MATRIX, s_vocab);
    plan_add(p, "output_norm.weight", 1, E, 1, o->constant_output ? BD_SYNTH_ZERO : BD_SYNTH_NORM, s_norm);
    if (!p->tied) plan_add(p, "output.weight", 2, E, V, BD_SYNTH_MATRIX, s_vocab);
    for (uint32_t l = 0; l < s->n_layer; l++) {
#define ADD(suffix, nd, a, b, init, sc)                                   \
    do {                                                                  \
        snprintf(nm, sizeof nm, "blk.%u.%s.weight", l, suffix);           \
        plan_add(p, nm, nd, a, b, init, sc);                              \
    } while (0)
        ADD("attn_norm", 1, E, 1, BD_SYNTH_NORM, s_norm);
        ADD("attn_q", 2, E, Q, BD_SYNTH_MATRIX, s_qk);
        ADD("attn_k", 2, E, KV, BD_SYNTH_MATRIX, s_qk);
        ADD("attn_v", 2, E, KV, BD_SYNTH_MATRIX, s_in);
        if (p->qwen3) {
            ADD("attn_q_norm", 1, s->head_dim, 1, BD_SYNTH_NORM_QK, s_norm);
            ADD("attn_k_norm", 1, s->head_dim, 1, BD_SYNTH_NORM_QK, s_norm);
        }
        ADD("attn_output", 2, Q, E, BD_SYNTH_MATRIX, s_o);
        ADD("ffn_norm", 1, E, 1, BD_SYNTH_NORM, s_norm);
        ADD("ffn_gate", 2, E, F, BD_SYNTH_MATRIX, s_in);
        ADD("ffn_up", 2, E, F, BD_SYNTH_MATRIX, s_in);
        ADD("ffn_down", 2, F, E, BD_SYNTH_MATRIX, s_down);
#undef ADD
    }

    /* Types. Counters follow llama-quant.cpp: attn_v tensors are counted in
     * file order, ffn_down per layer. */
    static const uint32_t cycle[] = {BD_TYPE_Q4_K, BD_TYPE_Q6_K, BD_TYPE_Q8_0, BD_TYPE_F16,
                                     BD_TYPE_BF16};
    int n_attn_v = (int)s->n_layer, i_attn_v = 0, n_ffn_down = (int)s->n_layer, i_ffn_down = 0;
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
    memset(p, 0, sizeof *p);
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
    uint64_t rows = g->t->ne[1];
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
    if (!bd_synth_plan_make(o, (uint32_t)tokens->arr_count, &plan, err, errlen)) goto out;
    const bd_synth_shape *s = plan.shape;
    const char *arch = plan.qwen3 ? "qwen3" : "llama";

    w = bd_gguf_writer_create();
    if (!w) { bd_err(err, errlen, "out of memory"); goto out; }
    char name[160];
    snprintf(name, sizeof name, "blockdraft synthetic %s %s %s seed %llu", arch, s->name, o->mix,
             (unsigned long long)o->seed);
    bool kv_ok = bd_gguf_writer_set_str(w, "general.architecture", arch) &&
                 bd_gguf_writer_set_str(w, "general.name", name) &&
                 bd_gguf_writer_set_u32(w, "general.file_type", plan.file_type) &&
                 bd_gguf_writer_set_u32(w, "general.quantization_version", 2) &&
                 set_arch_u32(w, arch, "block_count", s->n_layer) &&
                 set_arch_u32(w, arch, "context_length", s->n_ctx) &&
                 set_arch_u32(w, arch, "embedding_length", s->n_embd) &&
                 set_arch_u32(w, arch, "feed_forward_length", s->n_ff) &&
                 set_arch_u32(w, arch, "attention.head_count", s->n_head) &&
                 set_arch_u32(w, arch, "attention.head_count_kv", s->n_head_kv) &&
                 set_arch_u32(w, arch, "attention.key_length", s->head_dim) &&
                 set_arch_u32(w, arch, "attention.value_length", s->head_dim) &&
                 set_arch_u32(w, arch, "rope.dimension_count", s->head_dim) &&
                 set_arch_f32(w, arch, "rope.freq_base", plan.qwen3 ? 1000000.0f : 10000.0f) &&
                 set_arch_f32(w, arch, "attention.layer_norm_rms_epsilon",
                              plan.qwen3 ? 1e-6f : 1e-5f) &&
                 set_arch_u32(w, arch, "vocab_size", plan.n_vocab);
    for (int64_t i = 0; kv_ok && i < bd_gguf_kv_count(voc); i++) {
        const bd_gguf_kv *kv = bd_gguf_kv_at(voc, i);
        if (!strncmp(kv->key, "tokenizer.", 10)) kv_ok = bd_gguf_writer_copy_kv(w, kv);
    }
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
        if (type_is_slow(t->type) && t->ne[0] * t->ne[1] >= POOL_MIN_ELEMS &&
            t->ne[0] >= POOL_MIN_ROW_BLOCKS * (uint64_t)bd_type_get(t->type)->blck) {
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
        uint64_t nbytes = g->row_bytes * t->ne[1];
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
