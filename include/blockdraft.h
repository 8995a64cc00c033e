/*
 * blockdraft.h - public API of the blockdraft inference engine.
 *
 * Two opaque handles:
 *   bd_model   - weights of one GGUF file (mmapped, read-only, shareable by
 *                many sessions) plus its tokenizer.
 *   bd_session - one mutable timeline over a model: the KV cache, scratch
 *                buffers, logits of the last forward and the captured
 *                ("tapped") layer inputs. A session can be truncated to any
 *                earlier length, which speculative decoding relies on.
 *
 * Errors: functions that can fail take (char *err, size_t errlen) and
 * return NULL / false / negative; nothing in the library exits.
 * Threading: one session is used by one thread at a time; it runs its
 * kernels on its own thread pool.
 */
#ifndef BLOCKDRAFT_H
#define BLOCKDRAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bd_model bd_model;
typedef struct bd_session bd_session;

/* ------------------------------------------------------------------------
 * Model
 * ---------------------------------------------------------------------- */

/* Open a GGUF model (architectures: llama, qwen3; and dflash drafters,
 * which need a target to run). */
bd_model *bd_model_open(const char *path, char *err, size_t errlen);
void bd_model_free(bd_model *m);

const char *bd_model_arch(const bd_model *m);   /* "llama", "qwen3", "dflash" */
int32_t bd_model_n_vocab(const bd_model *m);
int32_t bd_model_n_embd(const bd_model *m);
int32_t bd_model_n_layer(const bd_model *m);
int32_t bd_model_n_ctx_train(const bd_model *m);
uint64_t bd_model_weight_bytes(const bd_model *m); /* bytes of all tensors */
/* Borrowed; NUL-terminated; NULL if the file has none. */
const char *bd_model_chat_template(const bd_model *m);

/* ------------------------------------------------------------------------
 * Tokens
 * ---------------------------------------------------------------------- */

/* Tokenize text. add_special adds BOS/EOS as the vocabulary asks;
 * parse_special matches control tokens (<|im_start|> ...) in the text.
 * Returns the token count, or -(needed) if max_out is too small. */
int bd_tokenize(const bd_model *m, const char *text, size_t len, bool add_special,
                bool parse_special, int32_t *out, int max_out);
/* Bytes of one token (control tokens only when render_special).
 * Returns bytes written or -(needed). */
int bd_token_piece(const bd_model *m, int32_t id, char *buf, int bufsize, bool render_special);
bool bd_token_is_eog(const bd_model *m, int32_t id);

/* Streaming detokenizer: feed ids one by one, get back only complete UTF-8
 * sequences (a character split across tokens is held until complete). */
typedef struct bd_textstream bd_textstream;
bd_textstream *bd_textstream_create(const bd_model *m, bool render_special);
/* Returns bytes written to out (outsize >= 64 is always enough for one
 * token plus a held tail), or -1 if out is too small. */
int bd_textstream_push(bd_textstream *ts, int32_t id, char *out, int outsize);
int bd_textstream_flush(bd_textstream *ts, char *out, int outsize);
void bd_textstream_free(bd_textstream *ts);
int32_t bd_token_bos(const bd_model *m);
int32_t bd_token_eos(const bd_model *m);

/* ------------------------------------------------------------------------
 * Session
 * ---------------------------------------------------------------------- */

typedef struct bd_session_params {
    int32_t n_ctx;      /* KV cache length in tokens; 0 = 4096 */
    int32_t n_batch;    /* max tokens per forward chunk; 0 = 512 */
    int32_t n_outputs;  /* max rows with logits in one BD_LOGITS_ALL forward; 0 = 32 */
    int32_t n_threads;  /* 0 = all online CPUs */
    int32_t n_rollback; /* recurrent (hybrid) models: rows a truncation can undo, counted
                           from the last checkpoint; 0 = n_outputs. See bd_session_truncate. */
    int32_t n_tap;      /* number of layers whose input is captured */
    const int32_t *tap_layers; /* [n_tap] layer indices (0..n_layer) */
} bd_session_params;

bd_session_params bd_session_default_params(void);

bd_session *bd_session_create(bd_model *m, const bd_session_params *p, char *err, size_t errlen);
void bd_session_free(bd_session *s);

int32_t bd_session_length(const bd_session *s); /* tokens in the KV cache */
int32_t bd_session_n_ctx(const bd_session *s);
/* Bytes of recurrent state the session holds (0 for attention-only
 * models): both state buffers and the rollback inputs. */
uint64_t bd_session_recurrent_bytes(const bd_session *s);
/* Ids of the tokens in the cache, [bd_session_length] of them. Borrowed:
 * valid until the next forward or truncate of s. */
const int32_t *bd_session_tokens(const bd_session *s);
/* Drop everything after the first n_keep tokens (n_keep <= length).
 * Attention-only models truncate anywhere. Models with recurrent layers
 * (qwen35, qwen35moe) keep the inputs of the last rows (n_rollback, from
 * the last checkpoint: a forward that does not fit starts a new one) and
 * truncate exactly -- to the state plain decoding would have -- within
 * them, or to 0; a deeper truncation returns false and leaves the session
 * unchanged. */
bool bd_session_truncate(bd_session *s, int32_t n_keep);

enum bd_logits_mode {
    BD_LOGITS_LAST = 0, /* logits of the last row only */
    BD_LOGITS_ALL = 1,  /* logits of every row */
    BD_LOGITS_NONE = 2, /* no logits (prefill chunks) */
};

/* Run n tokens at positions length..length+n-1 and append them to the KV
 * cache. With BD_LOGITS_ALL, n <= n_outputs and n <= n_batch. With LAST or
 * NONE, n may exceed n_batch: it is processed in chunks, and logits (LAST)
 * and taps describe the last chunk only. Tapped layer inputs are captured
 * for every row of the (last) chunk. Does not allocate. On error the
 * session is unchanged. */
bool bd_session_forward(bd_session *s, const int32_t *tokens, int32_t n, enum bd_logits_mode mode,
                        char *err, size_t errlen);
/* Logits row i of the last forward ([n_vocab] floats); i < number of rows
 * with logits (all rows for ALL, 1 for LAST). NULL when out of range. */
const float *bd_session_logits(const bd_session *s, int32_t i);
/* Tapped inputs of the last forward (last chunk): [rows][n_tap][n_embd]
 * floats; *rows receives the row count. NULL when no layers are tapped. */
const float *bd_session_taps(const bd_session *s, int32_t *rows);

/* ------------------------------------------------------------------------
 * Sampling and generation
 * ---------------------------------------------------------------------- */

typedef struct bd_sampler_params {
    float temperature; /* <= 0: greedy */
    int32_t top_k;     /* <= 0: off */
    float top_p;       /* >= 1: off */
    float min_p;       /* <= 0: off */
    uint64_t seed;
} bd_sampler_params;

bd_sampler_params bd_sampler_default_params(void); /* llama.cpp defaults: T 0.8, k 40, p 0.95, min_p 0.05 */

typedef struct bd_spec_stats {
    char type[24];          /* "none", "draft-dflash", ... */
    int64_t n_drafted;
    int64_t n_accepted;
    int64_t target_forwards;
    int64_t n_steps;
    double tau;             /* tokens emitted per target forward */
    int64_t accepted_at[32];/* accepted drafts by block position */
    int64_t drafted_at[32];
    double draft_ms, verify_ms, other_ms;
} bd_spec_stats;

typedef struct bd_gen_stats {
    int32_t n_prompt;
    int32_t n_gen;
    double prompt_ms;
    double gen_ms;
    double prompt_tps;
    double gen_tps;
    bool stopped_eog;
    bd_spec_stats spec;
} bd_gen_stats;

/* Called once per emitted token. Return false to stop generation. */
typedef bool (*bd_token_cb)(int32_t token, void *user);

/* Grammar-constrained generation (GBNF; src/decode/grammar.h). */
typedef struct bd_grammar bd_grammar;

typedef struct bd_gen_params {
    int32_t n_predict;          /* max new tokens; < 0: until EOG or context end */
    bd_sampler_params sampling;
    bool ignore_eog;            /* do not stop at end-of-generation tokens */
    bd_grammar *grammar;        /* optional: every sampled token obeys it, generation ends when it is
                                   complete and allows nothing else; NULL = unconstrained. Borrowed;
                                   one generation at a time per grammar. */
} bd_gen_params;

/* Prefill prompt (the session must be empty or hold a prefix of it) and
 * generate. Tokens are reported through cb. */
bool bd_generate(bd_session *s, const int32_t *prompt, int32_t n_prompt, const bd_gen_params *gp,
                 bd_token_cb cb, void *user, bd_gen_stats *stats, char *err, size_t errlen);

/* ------------------------------------------------------------------------
 * Speculative decoding
 *
 * A bd_spec drives a target session with a drafter. Output is lossless:
 * token-identical to bd_generate at temperature 0, and distributed exactly
 * as plain sampling at temperature > 0.
 * ---------------------------------------------------------------------- */

typedef enum bd_spec_type {
    BD_SPEC_NONE = 0,
    BD_SPEC_DRAFT_DFLASH = 1, /* DFlash block drafter (-md, arch dflash) */
    BD_SPEC_DRAFT_SIMPLE = 2, /* small autoregressive draft model */
    BD_SPEC_NGRAM_SIMPLE = 3, /* prompt lookup, no draft model */
} bd_spec_type;

typedef struct bd_spec_params {
    bd_spec_type type;
    int32_t n_max;    /* max drafted tokens per step (DFlash: <= block_size - 1); 0 = default */
    int32_t n_min;    /* drop drafts shorter than this */
    float p_min;      /* draft-simple: stop drafting below this draft probability */
    bool adaptive;    /* pick the draft length each step from acceptance and measured cost */
    int32_t ngram_n;  /* ngram-simple: match length (default 3) */
    bool dflash_short_block; /* DFlash: run [anchor, MASK x n] like llama.cpp instead of the
                                trained block length (lower acceptance for small n) */
} bd_spec_params;

bd_spec_params bd_spec_default_params(void);
const char *bd_spec_type_name(bd_spec_type t);
/* "none", "draft-dflash", "draft-simple", "ngram-simple" -> type; false if unknown. */
bool bd_spec_type_parse(const char *s, bd_spec_type *out);
/* The spec type a draft file implies (arch dflash -> DFLASH, else SIMPLE). */
bd_spec_type bd_spec_type_for_draft(const bd_model *draft);

/* Does the DFlash drafter fit the target (width, taps within the target's
 * trunk, mask id and vocabulary, same tokenizer)? The checks the gallery
 * runs at install; false with the first failure in err. Run it before
 * creating the target session with the drafter's tap layers. */
bool bd_dflash_check_pair(const bd_model *target, const bd_model *draft, char *err, size_t errlen);

/* Target layers a DFlash drafter taps; the target session must be created
 * with exactly these as tap_layers. Returns the count (0 if not dflash). */
int32_t bd_dflash_tap_layers(const bd_model *draft, int32_t *layers, int32_t max);

typedef struct bd_spec bd_spec;

/* target: a session of the target model (for DFlash created with the
 * drafter's tap layers); draft: the draft model (NULL for ngram-simple).
 * Checks that the pair fits. n_max above the drafter's limit is clamped,
 * with a warning in warn (may be NULL). */
bd_spec *bd_spec_create(bd_session *target, bd_model *draft, const bd_spec_params *p, char *warn,
                        size_t warnlen, char *err, size_t errlen);
void bd_spec_free(bd_spec *sp);
int32_t bd_spec_n_max(const bd_spec *sp);

/* Observe every speculative step: the anchor's position and id, the
 * drafted tokens and how many of them the target accepted. For tests that
 * compare drafts step by step with another engine. fn NULL turns it off. */
typedef void (*bd_spec_trace_fn)(void *user, int32_t pos, int32_t anchor, const int32_t *drafts,
                                 int32_t n_drafts, int32_t n_accepted);
void bd_spec_set_trace(bd_spec *sp, bd_spec_trace_fn fn, void *user);

/* Like bd_generate, speculatively. stats->spec is filled in. */
bool bd_spec_generate(bd_spec *sp, const int32_t *prompt, int32_t n_prompt, const bd_gen_params *gp,
                      bd_token_cb cb, void *user, bd_gen_stats *stats, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
