/*
 * forward.h - the blocks of a forward chunk (forward.c), shared by the
 * dense decoder and the hybrid qwen35 one (qwen35.c). Each works on the
 * session's scratch for the n rows at positions n_past..n_past+n-1 and
 * does not allocate.
 */
#ifndef BD_FORWARD_H
#define BD_FORWARD_H

#include "model.h"

/* s->x = token embeddings; the ids join s->tokens. */
void bd_fwd_embed(bd_session *s, const int32_t *tokens, int32_t n);
/* Copy s->x (the input of layer il) into the taps when il is tapped. */
void bd_fwd_tap(bd_session *s, int32_t il, int32_t n);
/* x += attention(RMSNorm(x) * attn_norm), gated when L->wq holds gates. */
void bd_fwd_attention(bd_session *s, const bd_layer *L, int32_t n);
/* x += FFN(RMSNorm(x) * ffn_norm), dense or mixture of experts. */
void bd_fwd_ffn(bd_session *s, const bd_layer *L, int32_t n);
/* Taps of the last layer's output and the logits of the rows asked for. */
void bd_fwd_head(bd_session *s, int32_t n, enum bd_logits_mode mode);

/* Row ops on the session's pool (the calling thread alone when small). */
void bd_fwd_rmsnorm(bd_session *s, float *out, const float *x, const float *w, int32_t n, int64_t width);
void bd_fwd_add(bd_session *s, float *x, const float *h, int64_t count);
void bd_fwd_silu_mul(bd_session *s, float *g, const float *u, int64_t count);

/* moe.c: h ([n][n_embd], n <= BD_MOE_ROWS) := the routed experts' weighted
 * sum plus the gated shared expert. */
void bd_moe_ffn(bd_session *s, const bd_layer *L, float *h, int32_t n);
/* The routing of one row: probs = softmax(logits) (may be logits itself),
 * sel = the n_used best (ties to the lower id), w = their normalized
 * weights. Exposed for tests. */
void bd_moe_route(const float *logits, int32_t n_expert, int32_t n_used, float scale, float *probs, int32_t *sel,
                  float *w);
void bd_moe_topk(const float *p, int32_t n, int32_t k, int32_t *sel);

/* qwen35.c: x += GatedDeltaNet(RMSNorm(x) * attn_norm) for a recurrent
 * layer, reading state buffer src and leaving the new state in dst (may be
 * src); the rows' update inputs go to save row save_row on (-1: scratch). */
void bd_gdn_layer(bd_session *s, const bd_layer *L, int32_t n, int src, int dst, int32_t save_row);

#endif
