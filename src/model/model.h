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

/* Rows of one feed-forward pass within a batch (forward.c). */
#define BD_FFN_ROWS 128

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
} bd_hparams;

typedef struct bd_layer {
    const float *attn_norm; /* [n_embd] */
    const float *q_norm;    /* [hd] or NULL (qwen3, dflash) */
    const float *k_norm;    /* [hd] or NULL */
    bd_mat wq;              /* [n_head*hd][n_embd] */
    bd_mat wk;              /* [n_kv*hd][n_embd] */
    bd_mat wv;              /* [n_kv*hd][n_embd] */
    bd_mat wo;              /* [n_embd][n_head*hd] */
    const float *ffn_norm;  /* [n_embd] */
    bd_mat w_gate;          /* [n_ff][n_embd] */
    bd_mat w_up;            /* [n_ff][n_embd] */
    bd_mat w_down;          /* [n_embd][n_ff] */
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
    char *chat_template;        /* NUL-terminated copy or NULL */
};

struct bd_session {
    bd_model *m;
    bd_pool *pool;
    bool owns_pool;
    int32_t n_ctx, n_batch, n_out_max;
    int32_t n_past;               /* tokens in the KV cache */
    int32_t *tokens;              /* [n_ctx] ids of the cached tokens, [0, n_past) valid */
    int32_t n_tap;
    int32_t tap_layers[BD_MAX_TAPS];
    int32_t tap_slot[BD_MAX_LAYERS + 1]; /* layer -> index into taps or -1; [n_layer+1] used */

    float *k_cache;               /* [n_layer][n_ctx][n_kv*hd] */
    float *v_cache;               /* [n_layer][n_ctx][n_kv*hd] */

    /* per-forward scratch, sized for n_batch rows */
    float *x;                     /* [n_b][n_embd] residual stream */
    float *h;                     /* [n_b][n_embd] normed input */
    float *q;                     /* [n_b][n_head*hd] queries, then (in place) attention output */
    float *gate;                  /* [min(n_b, BD_FFN_ROWS)][n_ff] */
    float *up;                    /* [min(n_b, BD_FFN_ROWS)][n_ff] */
    float *scores;                /* [n_threads][BD_ATTN_QB][n_ctx + n_b] attention rows */
    void *mm_scratch;             /* quantized activations for bd_matmul */
    size_t mm_scratch_size;

    float *logits;                /* [n_out_max][n_vocab] */
    int32_t n_logits;             /* rows valid after the last forward */
    float *taps;                  /* [n_batch][n_tap][n_embd] */
    int32_t n_taps_rows;
};

/* ---- per-architecture entry points (the architecture table's rows) ---- */
bool bd_load_dense(bd_model *m, char *err, size_t errlen);        /* model_load.c: llama, qwen3 */
void bd_forward_dense(bd_session *s, const int32_t *tokens, int32_t n, enum bd_logits_mode mode); /* forward.c */
bool bd_dflash_load(bd_model *m, char *err, size_t errlen);       /* dflash_load.c */

/* ---- loading (model_load.c) ---- */
/* Read <prefix>.block_count, embedding_length, ... with llama.cpp's defaults. */
bool bd_model_load_hparams(bd_model *m, const char *prefix, char *err, size_t errlen);
/* Bind blk.N.* tensors of a llama/qwen3-style decoder stack. */
bool bd_model_load_layers(bd_model *m, const char *prefix, char *err, size_t errlen);
/* Find a tensor and check its type/shape: ne0 x ne1 (ne1 = 1 for vectors). */
bool bd_model_get_mat(bd_model *m, const char *name, int64_t ne0, int64_t ne1, bool required,
                      bd_mat *out, char *err, size_t errlen);
bool bd_model_get_vec(bd_model *m, const char *name, int64_t n, bool required, const float **out,
                      char *err, size_t errlen);

/* ---- shared per-row ops (ops.c) ---- */
void bd_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);
/* bd_rmsnorm of rows rows of n floats, stride floats apart (out may be x);
 * every row bit-identical to a bd_rmsnorm call of its own. */
void bd_rmsnorm_rows(float *out, const float *x, const float *w, int64_t n, float eps, int64_t rows,
                     int64_t stride);
/* Rotate the first n_rot lanes of each of n_heads heads (hd floats each,
 * back to back) for position pos. Angles follow ggml's rope cache: theta_0 =
 * pos, theta_{i+1} = theta_i * base^(-2/n_rot), in float. hd <= 1024. */
void bd_rope(float *x, int32_t n_heads, int32_t hd, int32_t n_rot, int32_t pos, float base,
             enum bd_rope_type type);
void bd_softmax(float *x, int64_t n);

#endif
