/*
 * model.h - internal model and session structures.
 *
 * A bd_model is the parsed GGUF: hyper-parameters, weights as bd_mat views
 * into the mapping (no copies; 1-D norm vectors stored as F16/BF16 are the
 * only tensors converted, into model-owned memory), and the tokenizer.
 * A bd_session owns everything that changes while generating: the KV cache
 * and the scratch buffers of one forward, all allocated at creation so the
 * token loop never allocates.
 *
 * Dimension names used in shape comments:
 *   n_embd  model width            n_ff    feed-forward width
 *   n_head  query heads            n_kv    key/value heads
 *   hd      head dim               n_vocab vocabulary
 *   n_ctx   KV cache length        n_b     rows of one forward (<= n_batch)
 */
#ifndef BD_MODEL_H
#define BD_MODEL_H

#include "blockdraft.h"
#include "../base/base.h"
#include "../gguf/bd_gguf.h"
#include "../tensor/kernels.h"
#include "../tokenizer/tokenizer.h"
#include "arch.h"

/* Rows of one feed-forward pass within a batch (forward.c): dense layers,
 * and mixture-of-experts layers, whose chunks are larger because each
 * expert sees only about rows * n_used / n_expert of them (~16 of 512 at
 * 8 of 256): a larger chunk reads every expert's weights fewer times and
 * gives its matmuls batches worth unpacking a weight block for. */
#define BD_FFN_ROWS 128
#define BD_MOE_ROWS 512
/* Mixture-of-experts passes of up to this many rows (decode, verify) run
 * all experts of a layer in two grouped matmuls (bd_matmul_grouped: one
 * pool run for every expert's gate and up, one for the downs) instead of
 * two pool runs per expert. */
#define BD_MOE_GROUP_ROWS 16

/* How positions become angles, as ggml's CPU rope computes them
 * (ggml_rope_cache_init, rope_yarn): theta_0 = pos, theta_{i+1} = theta_i *
 * base^(-2/n_rot) in float; pair i turns by t_i = theta_i / ff_i (ff =
 * freq_factors, all 1 when NULL), scaled to freq_scale * t_i. With YaRN
 * (ext_factor 1) the scaled and unscaled angles mix by a ramp over the pair
 * index (1 - clamp((i - corr_dims[0]) / max(0.001, corr_dims[1] -
 * corr_dims[0]), 0, 1) of the unscaled one), and cos / sin are multiplied
 * by attn_factor * (1 + 0.1 ln(1 / freq_scale)); without it by
 * attn_factor. An unscaled file has freq_scale 1, ext_factor 0,
 * attn_factor 1. */
typedef struct bd_rope_params {
    float base;                /* rope.freq_base */
    float freq_scale;          /* 1 / rope.scaling.factor */
    float ext_factor;          /* 1 for rope.scaling.type yarn, else 0 */
    float attn_factor;         /* magnitude of cos / sin before YaRN's own factor */
    float corr_dims[2];        /* YaRN ramp, pair indices (ggml_rope_yarn_corr_dims) */
    const float *freq_factors; /* [n_rot / 2] llama's rope_freqs.weight, or NULL */
} bd_rope_params;

/* A model's RoPE scaling as its file gives it (llama.cpp's hparams), which
 * a session's parameters may override (bd_rope_params_make). */
typedef struct bd_rope_scaling {
    int32_t type;     /* BD_ROPE_SCALING_NONE / LINEAR / YARN */
    float freq_scale; /* 1 / rope.scaling.factor (1 when the factor is 0 or absent), whatever the type */
    float attn;       /* rope.scaling.attn_factor */
    int32_t orig_ctx; /* rope.scaling.original_context_length, else context_length */
} bd_rope_scaling;

/* rp for a model of rotary width n_rot with RoPE base `base` and scaling
 * sc, as llama.cpp's context setup (llama-context.cpp) and ggml's
 * ggml_rope_yarn_corr_dims compute it; freq_factors as in bd_rope_params. */
void bd_rope_params_make(bd_rope_params *rp, float base, int32_t n_rot, const bd_rope_scaling *sc,
                         const float *freq_factors);

typedef struct bd_hparams {
    int32_t n_vocab;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_kv;
    int32_t hd;          /* head dim of q/k (key_length) */
    int32_t hd_v;        /* head dim of v (value_length); == hd here */
    int32_t n_ff;
    int32_t n_ctx_train;
    int32_t n_rot;       /* rotary dims per head */
    float rope_base;
    float rms_eps;
    enum bd_rope_type rope_type;
    bd_rope_scaling rope_scaling; /* the file's */
    bd_rope_params rope; /* rope_base, the file's RoPE scaling and frequency factors (sessions: bd_session.rope) */

    /* Hybrid targets (qwen35, qwen35moe): n_layer above is the trunk,
     * block_count minus the trailing MTP blocks, which are never run. */
    int32_t n_layer_all;     /* block_count */
    int32_t rope_sections[4];
    int32_t ssm_d_conv;      /* causal conv width (4) */
    int32_t ssm_d_state;     /* head dim of the GDN keys and values, d_k = d_v (128) */
    int32_t ssm_n_k;         /* GDN key heads (ssm.group_count) */
    int32_t ssm_n_v;         /* GDN value heads (ssm.time_step_rank); a multiple of ssm_n_k */
    bool ssm_v_grouped;      /* value head h reads key head h / (n_v / n_k) (qwen3next: each key
                                head's value heads side by side); else h % n_k (qwen35: tiled) */
    int32_t n_attn_layers;   /* trunk layers with attention (and so a KV cache) */
    int32_t n_rec_layers;    /* trunk layers with a Gated DeltaNet (and so a recurrent state) */

    /* Mixture of experts (qwen3moe, qwen35moe). */
    int32_t n_expert;
    int32_t n_expert_used;
    int32_t n_ff_exp;        /* width of one routed expert */
    int32_t n_ff_shexp;      /* width of the shared expert (0: none) */
    float expert_weights_scale; /* 0 or 1: none */
} bd_hparams;

/* The key head that GDN value head h reads (bd_hparams.ssm_v_grouped). */
static inline int64_t bd_gdn_key_head(const bd_hparams *hp, int64_t h) {
    return hp->ssm_v_grouped ? h / (hp->ssm_n_v / hp->ssm_n_k) : h % hp->ssm_n_k;
}

typedef struct bd_layer {
    bool recurrent;         /* Gated DeltaNet layer (hybrid targets), else attention */
    int32_t kv_slot;        /* attention layers: index of its KV cache; -1 for GDN layers */
    int32_t rs_slot;        /* GDN layers: index of its recurrent state; -1 otherwise */
    const float *attn_norm; /* [n_embd] */
    const float *q_norm;    /* [hd] or NULL (qwen3, dflash) */
    const float *k_norm;    /* [hd] or NULL */
    bd_mat wq;              /* [n_head*hd][n_embd]; gated attention (qwen35):
                               [n_head][2][hd] rows, each head's query then its output gate */
    bd_mat wk;              /* [n_kv*hd][n_embd] */
    bd_mat wv;              /* [n_kv*hd][n_embd] */
    bd_mat wo;              /* [n_embd][n_head*hd] */
    const float *bq;        /* [n_head*hd] attn_q.bias, or NULL (qwen2; optional in any dense target) */
    const float *bk;        /* [n_kv*hd] */
    const float *bv;        /* [n_kv*hd] */
    const float *bo;        /* [n_embd] attn_output.bias, or NULL (llama only) */
    const float *ffn_norm;  /* [n_embd] */
    bd_mat w_gate;          /* [n_ff][n_embd] */
    bd_mat w_up;            /* [n_ff][n_embd] */
    bd_mat w_down;          /* [n_embd][n_ff] */

    /* Gated DeltaNet (recurrent layers of qwen35/qwen35moe). conv_dim =
     * 2 key_dim + value_dim, key_dim = n_k d_k, value_dim = n_v d_v. */
    bd_mat w_qkv;           /* [conv_dim][n_embd]: rows q | k | v */
    bd_mat w_z;             /* [value_dim][n_embd] output gate (attn_gate) */
    bd_mat w_beta;          /* [n_v][n_embd] */
    bd_mat w_alpha;         /* [n_v][n_embd] */
    const float *dt_bias;   /* [n_v] */
    const float *ssm_a;     /* [n_v], -exp(A_log) < 0 */
    const float *conv1d;    /* [conv_dim][d_conv], tap d_conv-1 multiplies the current row */
    const float *ssm_norm;  /* [d_v] */
    bd_mat ssm_out;         /* [n_embd][value_dim] */

    /* Mixture of experts: expert e of a [n_expert * rows][cols] matrix is
     * its rows [e*rows, (e+1)*rows). */
    bd_mat router;          /* [n_expert][n_embd] (ffn_gate_inp) */
    bd_mat gate_exps;       /* [n_expert * n_ff_exp][n_embd] */
    bd_mat up_exps;         /* [n_expert * n_ff_exp][n_embd] */
    bd_mat gate_up_exps;    /* [n_expert * 2 n_ff_exp][n_embd] fused: per expert gate rows, then up */
    bd_mat down_exps;       /* [n_expert * n_embd][n_ff_exp] */
    bd_mat shexp_gate_inp;  /* [1][n_embd] shared expert's scalar gate */
    bd_mat gate_shexp;      /* [n_ff_shexp][n_embd] */
    bd_mat up_shexp;        /* [n_ff_shexp][n_embd] */
    bd_mat down_shexp;      /* [n_embd][n_ff_shexp] */
} bd_layer;

/* DFlash drafter extras (arch == BD_ARCH_DFLASH). */
typedef struct bd_dflash_hp {
    int32_t block_size;                 /* trained block length (anchor + masks) */
    int32_t n_target_layers;
    int32_t target_layers[BD_MAX_TAPS]; /* target layers whose input is tapped */
    int32_t mask_id;
    bd_mat fc;                          /* [n_embd][n_target_layers*n_embd] */
    const float *enc_norm;              /* [n_embd] */
    bool causal;                        /* dflash.attention.causal (default false) */
    int32_t swa_window;                 /* 0: every layer sees the whole context */
    bool swa_layer[BD_MAX_LAYERS];      /* [n_layer] true: layer attends within swa_window */
} bd_dflash_hp;

struct bd_model {
    char path[1024];
    char arch_name[32];
    enum bd_arch arch;
    const bd_arch_info *arch_info; /* its row of the architecture table */
    bd_gguf_file *gguf;
    bd_tokenizer *tok;          /* NULL only if the file has no vocabulary */
    bd_hparams hp;
    bd_mat tok_embd;            /* [n_vocab][n_embd]; absent (data NULL) in dflash */
    bd_mat output;              /* [n_vocab][n_embd]; == tok_embd when tied */
    bool tied;
    const float *output_norm;   /* [n_embd] */
    bd_layer *layers;           /* [n_layer] */
    bd_dflash_hp dflash;
    float *owned;               /* converted 1-D tensors */
    size_t owned_used, owned_cap;
    uint64_t weight_bytes;
    uint64_t interleaved_bytes; /* weights bd_model_open put in the IL16 layout (kernels.h) */
    char *chat_template;        /* NUL-terminated copy or NULL */
};

/* The recurrent state of one sequence over every GDN layer, and what a
 * rollback needs (qwen35-hybrid.md §9, "replay the recurrence"):
 *
 *   Two buffers per state. `base` holds the state at a checkpoint position
 *   p0, `cur` the state at n_past. The inputs of every state update since
 *   p0 -- per row: the raw q|k|v before the convolution, q|k|v after it
 *   (normalized), the decay g and beta -- are kept in per-layer save areas
 *   of n_save rows. A forward that still fits appends to them and updates
 *   the state in place (cur == base: it writes the other buffer first, so
 *   base survives); one that does not fit starts a new checkpoint at
 *   n_past. A truncation to p0 + a (0 <= a <= saved rows) replays rows
 *   0..a-1 from base -- the decay and delta-rule update only, through the
 *   very function the forward used (bd_gdn_step), so the state equals the
 *   one plain decoding of those tokens leaves, bit for bit -- and rebuilds
 *   the convolution window from the saved raw rows. a = 0 just returns to
 *   base. Truncations before p0 are refused (bd_session_truncate returns
 *   false), except to 0.
 *
 *   Why this design: per-row state snapshots (llama.cpp's n_rs_seq) write
 *   every row's whole state on every forward (GiBs at 27B for work thrown
 *   away at almost every step); a full re-forward of the accepted rows costs
 *   about one more verify. Replaying only the recurrence costs
 *   3 n_v d_k^2 multiply-adds per replayed row and layer, and the save
 *   areas hold inputs the forward computes anyway.
 *
 * Layout per GDN layer: conv [d_conv-1][conv_dim] raw rows, oldest first;
 * ssm [n_v][d_v][d_k] with the key lane contiguous (M[j][i] = S[i][j]). */
typedef struct bd_recurrent {
    int32_t n_rec;                /* GDN layers */
    int32_t conv_dim, key_dim, value_dim, n_v, d_k, d_conv;
    int32_t n_save;               /* rows of a forward that can be rolled back into */
    int64_t conv_floats, ssm_floats; /* per layer */
    float *conv[2];               /* [n_rec][d_conv-1][conv_dim] */
    float *ssm[2];                /* [n_rec][n_v][d_v][d_k] */
    int cur;                      /* buffer holding the state at n_past */
    int base;                     /* buffer holding the state at the checkpoint p0 */
    int32_t p0;                   /* checkpoint position */
    int32_t n_saved;              /* rows since p0 whose update inputs are saved (== n_past - p0) */
    bool saved;                   /* false: a forward since p0 did not fit the save areas */
    float *raw;                   /* [n_rec][n_save][conv_dim] q|k|v before the conv */
    float *xc;                    /* [n_rec][n_save][conv_dim] after conv, SiLU and the q/k L2 norm */
    float *g;                     /* [n_rec][n_save][n_v] log decay */
    float *beta;                  /* [n_rec][n_save][n_v] */
    /* forward scratch for chunks longer than n_save (not replayable) */
    float *raw_big, *xc_big, *g_big, *beta_big; /* [n_batch][...] */
} bd_recurrent;

struct bd_session {
    bd_model *m;
    bd_rope_params rope;          /* the model's, with the session's overrides */
    bd_pool *pool;
    bool owns_pool;
    int32_t n_ctx, n_batch, n_out_max;
    int32_t n_past;               /* tokens in the KV cache */
    int32_t *tokens;              /* [n_ctx] ids of the cached tokens, [0, n_past) valid */
    int32_t n_tap;
    int32_t tap_layers[BD_MAX_TAPS];
    int32_t tap_slot[BD_MAX_LAYERS + 1]; /* layer -> index into taps or -1; [n_layer+1] used */

    void *k_cache;                /* [n_attn_layers][n_kv][n_ctx] rows of hd elements of k_type,
                                     head-major (attention.c) */
    void *v_cache;                /* [n_attn_layers][n_kv][n_ctx] rows of hd elements of v_type */
    uint32_t k_type, v_type;      /* BD_TYPE_F32 or another cache type (bd_attn_cache_type) */
    size_t k_row_bytes, v_row_bytes; /* one row of hd elements */
    int32_t k_rot, v_rot;         /* bd_attn_rot of the caches: q, k (and v) rotated before the store */
    bd_recurrent rs;              /* hybrid targets only (hp.n_rec_layers > 0) */

    /* per-forward scratch, sized for n_batch rows */
    float *x;                     /* [n_b][n_embd] residual stream */
    float *h;                     /* [n_b][n_embd] normed input */
    float *q;                     /* [n_b][n_head*hd] queries, then (in place) attention output */
    float *kn, *vn;               /* [n_b][n_kv*hd] the batch's new K / V rows, before the cache */
    float *gate;                  /* [min(n_b, BD_FFN_ROWS)][n_ff] */
    float *up;                    /* [min(n_b, BD_FFN_ROWS)][n_ff] */
    float *scores;                /* [n_threads][BD_ATTN_QB][n_ctx + n_b] attention rows */
    float *kv_tmp;                /* [n_threads][BD_ATTN_KB][hd] widened f16 cache rows; NULL for f32 */
    void *mm_scratch;             /* quantized activations for bd_matmul */
    size_t mm_scratch_size;
    /* hybrid scratch */
    float *qg;                    /* [n_b][n_head][2][hd] gated attention: query and gate per head */
    float *agate;                 /* [n_b][n_head*hd] the attention's output gate */
    float *z;                     /* [n_b][value_dim] GDN output gate */
    float *o;                     /* [n_b][value_dim] GDN output */
    /* mixture-of-experts scratch, for FR = min(n_b, BD_MOE_ROWS) rows */
    float *moe_logits;            /* [FR][n_expert] router logits, then probabilities */
    int32_t *moe_sel;             /* [FR][n_used] chosen experts, best first */
    float *moe_w;                 /* [FR][n_used] their weights */
    float *moe_out;               /* [FR][n_used][n_embd] weighted expert outputs */
    int32_t *moe_rows;            /* [FR * n_used] (row, slot) pairs routed to one expert (grouped: to each, by expert) */
    float *moe_x;                 /* [FR][n_embd] gathered inputs of one expert */
    float *moe_gu;                /* [GU][2 n_ff_exp] gate | up of one expert (grouped: of every routed pair) */
    float *moe_y;                 /* [GU][n_embd] down projection of one expert (grouped: of every routed pair) */
    int32_t *moe_cnt;             /* [n_expert + 1] grouped: pairs per expert, then their offsets */
    int32_t *moe_tok;             /* [GR * n_used] grouped: each sorted pair's row */
    int32_t *moe_seq;             /* [GR * n_used] grouped: 0, 1, 2, ... (the downs' input rows) */
    bd_mat *moe_views;            /* [2 n_expert] grouped: one expert's rows of a stacked matrix */
    bd_matmul_grp *moe_grp;       /* [2 n_expert] grouped: the matmul groups */

    float *logits;                /* [n_out_max][n_vocab] */
    int32_t n_logits;             /* rows valid after the last forward */
    float *taps;                  /* [n_batch][n_tap][n_embd] */
    int32_t n_taps_rows;
};

/* ---- per-architecture entry points (the architecture table's rows) ---- */
bool bd_load_dense(bd_model *m, char *err, size_t errlen);        /* model_load.c: llama, qwen3, qwen3moe */
void bd_forward_dense(bd_session *s, const int32_t *tokens, int32_t n, enum bd_logits_mode mode); /* forward.c */
bool bd_dflash_load(bd_model *m, char *err, size_t errlen);       /* dflash_load.c */
bool bd_load_qwen35(bd_model *m, char *err, size_t errlen);       /* qwen35_load.c: qwen35, qwen35moe */
void bd_forward_qwen35(bd_session *s, const int32_t *tokens, int32_t n, enum bd_logits_mode mode); /* qwen35.c */

/* Recurrent models: later truncations may go back to the current length
 * (and no further): the rows before it are no longer kept. No-op for
 * attention-only models. */
void bd_session_checkpoint(bd_session *s);

/* ---- recurrent state (recurrent.c) ---- */
bool bd_recurrent_create(bd_recurrent *rs, const bd_model *m, int32_t n_save, int32_t n_batch, char *err,
                         size_t errlen);
void bd_recurrent_free(bd_recurrent *rs);
void bd_recurrent_reset(bd_recurrent *rs);
/* Roll the state back to n_keep tokens (see bd_recurrent); false when
 * n_keep lies before the last forward (or inside one that was not saved). */
bool bd_recurrent_truncate(bd_session *s, int32_t n_keep);
/* Before a forward of n rows: where its update inputs go (row offset in
 * the save areas, or -1 for the unsaved scratch) and which buffers it reads
 * and writes; after it: bd_recurrent_commit. */
void bd_recurrent_begin(bd_recurrent *rs, int32_t n_past, int32_t n, int32_t *save_row, int *src, int *dst);
void bd_recurrent_commit(bd_recurrent *rs, int32_t n, int32_t save_row, int dst);
/* One token's state update of one GDN value head: M = e^g M, then the
 * delta rule with key k, value v, strength beta; and, when q is not NULL,
 * out[j] = scale * (M^T q)[j]. src may equal dst (in place). The forward
 * and the replay both call this, so they agree bit for bit. */
void bd_gdn_step(const float *src, float *dst, int32_t d_k, int32_t d_v, const float *k, const float *v, float g,
                 float beta, const float *q, float scale, float *out);
/* Bytes of recurrent state a session of m keeps (both buffers and the
 * rollback save areas for n_save rows). */
uint64_t bd_recurrent_bytes(const bd_model *m, int32_t n_save);

/* ---- loading (model_load.c) ---- */
/* Read <prefix>.block_count, embedding_length, ... with llama.cpp's defaults. */
bool bd_model_load_hparams(bd_model *m, const char *prefix, char *err, size_t errlen);
/* One `<prefix>.<key>` of the header: u32 within [0, 2^30] or f32; absent
 * optional keys take def; a present key of another type is an error. */
bool bd_model_key_u32(bd_model *m, const char *prefix, const char *key, bool required, int32_t def, int32_t *out,
                      char *err, size_t errlen);
bool bd_model_key_f32(bd_model *m, const char *prefix, const char *key, bool required, float def, float *out,
                      char *err, size_t errlen);
/* A key llama.cpp reads as "scalar or one value per layer": the scalar, or
 * an array of block_count entries whose trunk values are all equal. */
bool bd_model_key_u32_uniform(bd_model *m, const char *prefix, const char *key, bool required, int32_t def,
                              int32_t *out, char *err, size_t errlen);
/* Mixture-of-experts keys (expert_count, expert_used_count,
 * expert_feed_forward_length, the shared expert's width where the
 * architecture has one), each checked against arch.h's limits. */
bool bd_model_load_moe_hparams(bd_model *m, const char *prefix, char *err, size_t errlen);
/* Layer il's router, expert stacks (split, or fused where the
 * architecture's row allows it) and shared expert (all four tensors or
 * none, where the row allows it). */
bool bd_model_bind_moe(bd_model *m, int il, char *err, size_t errlen);
/* Bind blk.N.* tensors of a llama/qwen3-style decoder stack. */
bool bd_model_load_layers(bd_model *m, const char *prefix, char *err, size_t errlen);
/* Find a tensor and check its type/shape: ne0 x ne1 (ne1 = 1 for vectors). */
bool bd_model_get_mat(bd_model *m, const char *name, int64_t ne0, int64_t ne1, bool required,
                      bd_mat *out, char *err, size_t errlen);
bool bd_model_get_vec(bd_model *m, const char *name, int64_t n, bool required, const float **out,
                      char *err, size_t errlen);
/* A 3-D tensor {ne0, ne1, ne2} (stacked experts) as one matrix of ne1*ne2 rows. */
bool bd_model_get_mat3(bd_model *m, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, bool required,
                       bd_mat *out, char *err, size_t errlen);
/* A tensor {ne0, ne1} as f32 ([ne1][ne0]): the mapping when it is F32, else
 * converted once into model-owned memory. */
bool bd_model_get_f32(bd_model *m, const char *name, int64_t ne0, int64_t ne1, bool required, const float **out,
                      char *err, size_t errlen);

/* ---- shared per-row ops (ops.c) ---- */
void bd_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);
/* bd_rmsnorm of rows rows of n floats, stride floats apart (out may be x);
 * every row bit-identical to a bd_rmsnorm call of its own. */
void bd_rmsnorm_rows(float *out, const float *x, const float *w, int64_t n, float eps, int64_t rows,
                     int64_t stride);
/* Rotate the first n_rot lanes of each of n_heads heads (hd floats each,
 * back to back) for position pos, as bd_rope_params says. hd <= 1024. */
void bd_rope(float *x, int32_t n_heads, int32_t hd, int32_t n_rot, int32_t pos, const bd_rope_params *rp,
             enum bd_rope_type type);
void bd_softmax(float *x, int64_t n);
/* 1 / (1 + e^-x) with libm's expf, as ggml's CPU sigmoid. */
float bd_sigmoid(float x);

#endif
