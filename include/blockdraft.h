/*
 * blockdraft.h - public API of the blockdraft inference engine.
 *
 * Handles (all opaque; each has a create/open and a free):
 *   bd_model      - weights of one GGUF file (mapped, or copied into 2 MiB
 *                   pages: bd_use_mmap; read-only, shareable by many
 *                   sessions and threads) plus its tokenizer.
 *   bd_session    - one mutable timeline over a model: the KV cache, scratch
 *                   buffers, logits of the last forward and the captured
 *                   ("tapped") layer inputs. A session can be truncated to
 *                   any earlier length, which speculative decoding and
 *                   prefix reuse rely on.
 *   bd_threadpool - worker threads that sessions can share.
 *   bd_spec       - speculative decoding over a target session.
 *   bd_textstream - streaming detokenizer.
 *
 * Errors: functions that can fail take (char *err, size_t errlen) and
 * return NULL / false / negative; err (may be NULL) gets a NUL-terminated
 * message. Nothing in the library exits or prints.
 *
 * Lifetimes: an object borrows the objects it is created from and must be
 * freed before them: a session before its model and thread pool, a bd_spec
 * before its target session (unless the bd_spec owns it, bd_spec_open) and
 * its draft model, a textstream before its model. Pointers returned by
 * accessors are borrowed from the object and stay valid as documented at
 * each function (until the object is freed, unless said otherwise).
 *
 * Threading: a model may be used by any number of threads. A session (and
 * a bd_spec, and a textstream) is used by one thread at a time. Sessions
 * that share a bd_threadpool may run on different threads at once (their
 * parallel sections take turns on the pool's threads).
 *
 * Minimal use (examples/simple.c is a complete program):
 *   bd_model *m = bd_model_open("model.gguf", err, sizeof err);
 *   bd_session *s = bd_session_create(m, NULL, err, sizeof err);
 *   int n = bd_tokenize(m, text, strlen(text), true, false, ids, 512);
 *   bd_gen_params gp = {.n_predict = 64, .sampling = bd_sampler_default_params()};
 *   bd_generate(s, ids, n, &gp, on_token, user, &stats, err, sizeof err);
 *   bd_session_free(s);
 *   bd_model_free(m);
 */
#ifndef BLOCKDRAFT_H
#define BLOCKDRAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; bd_version() gives the library's. */
#define BD_VERSION_MAJOR 0
#define BD_VERSION_MINOR 1
#define BD_VERSION_PATCH 0
#define BD_VERSION_STRING "0.1.0"

/* The library's version string ("MAJOR.MINOR.PATCH"; static). A program
 * built against another header than the library it runs with can compare
 * it with BD_VERSION_STRING. */
const char *bd_version(void);

typedef struct bd_model bd_model;
typedef struct bd_session bd_session;
typedef struct bd_threadpool bd_threadpool;

/* ------------------------------------------------------------------------
 * Model
 * ---------------------------------------------------------------------- */

/* Open a GGUF model (architectures: llama, qwen3; and dflash drafters,
 * which need a target to run). path is not kept. */
bd_model *bd_model_open(const char *path, char *err, size_t errlen);
/* After every session, bd_spec and textstream that uses m. NULL is a no-op. */
void bd_model_free(bd_model *m);

/* "llama", "qwen3", "dflash"; borrowed, valid until bd_model_free. */
const char *bd_model_arch(const bd_model *m);
int32_t bd_model_n_vocab(const bd_model *m);
int32_t bd_model_n_embd(const bd_model *m);
int32_t bd_model_n_layer(const bd_model *m);
int32_t bd_model_n_ctx_train(const bd_model *m);
uint64_t bd_model_weight_bytes(const bd_model *m); /* bytes of all tensors */
/* Bytes of weights bd_model_open rearranged for its row-group kernels (0
 * with --mmap, without transparent huge pages, or on a level that keeps
 * the file's layout; BLOCKDRAFT_INTERLEAVE=0 / 1 turns it off / on). */
uint64_t bd_model_interleaved_bytes(const bd_model *m);
/* Borrowed (valid until bd_model_free); NUL-terminated; NULL if the file
 * has none. */
const char *bd_model_chat_template(const bd_model *m);

/* Model files are memory-mapped (those bd_use_mmap does not have copied
 * at open, below): a file truncated or rewritten in place
 * while a model uses it (a `cp` over it) makes reads of the lost pages
 * raise SIGBUS, which kills the process. bd_mmap_guard_install (once, at
 * start; process-wide: it installs a SIGBUS handler) makes such a fault
 * recoverable for every file blockdraft maps: the lost pages then read as
 * zeros, the model stops being intact, and every bd_session_forward (and
 * DFlash draft) with it fails with "model file ... changed on disk while
 * in use": reopen the model. Faults anywhere else go to the SIGBUS
 * disposition that was there before. A file rewritten in place without
 * being shortened is not noticed here (its pages may change under the
 * model): compare its size and mtime before use, as `serve` does. */
bool bd_mmap_guard_install(char *err, size_t errlen);
/* false once the model's file has been found truncated (see above). */
bool bd_model_intact(const bd_model *m);
/* How model files are held, process-wide, for models opened after the call.
 * false (the default, llama.cpp's --no-mmap): a file of 64 MiB or more that
 * fits in half the physical memory is copied at open into anonymous memory
 * backed by 2 MiB pages (when the kernel's transparent huge pages are not
 * off); the matmuls then read their weights through a few hundred TLB
 * entries instead of one per 4 KiB page, which the page cache may or may
 * not have given the mapping. RSS is the same; the copy is private (not
 * shared with other processes) and no longer sees the file change. true
 * (llama.cpp's default, --mmap): files stay mapped, read in at open. */
void bd_use_mmap(bool on);

/* ------------------------------------------------------------------------
 * Tokens
 * ---------------------------------------------------------------------- */

/* Tokenize text. add_special adds BOS/EOS as the vocabulary asks;
 * parse_special matches control tokens (<|im_start|> ...) in the text.
 * Returns the token count, or -(needed) if max_out is too small. */
int bd_tokenize(const bd_model *m, const char *text, size_t len, bool add_special,
                bool parse_special, int32_t *out, int max_out);
/* Tokenize text of which some byte ranges are untrusted -- a chat prompt
 * rendered from a template (trusted) around users' messages (untrusted):
 * control tokens (<|im_start|> ...) are matched as with parse_special,
 * except that no match may cover a byte inside one of the n_plain ranges
 * plain[2k] .. plain[2k+1] (byte offsets, end exclusive; any order, may
 * overlap); such text is tokenized as ordinary text, as with parse_special
 * false. So text a user wrote never becomes a control token, and text
 * without control-token texts tokenizes exactly as bd_tokenize would.
 * Returns as bd_tokenize. */
int bd_tokenize_guarded(const bd_model *m, const char *text, size_t len, bool add_special, const size_t *plain,
                        int n_plain, int32_t *out, int max_out);
/* Bytes of one token (control tokens only when render_special).
 * Returns bytes written or -(needed) (nothing written). */
int bd_token_piece(const bd_model *m, int32_t id, char *buf, int bufsize, bool render_special);
/* The longest piece of the vocabulary in bytes (with this render_special):
 * a buffer of this size fits any bd_token_piece. Qwen3's is 128 bytes;
 * vocabularies with longer tokens exist. 0 without a vocabulary. */
int bd_token_piece_max(const bd_model *m, bool render_special);
bool bd_token_is_eog(const bd_model *m, int32_t id);

/* Streaming detokenizer: feed ids one by one, get back only complete UTF-8
 * sequences (a character split across tokens is held until complete).
 * The concatenated output equals the decoded ids byte for byte. Borrows m:
 * free the stream before the model. NULL without a vocabulary or memory. */
typedef struct bd_textstream bd_textstream;
bd_textstream *bd_textstream_create(const bd_model *m, bool render_special);
/* The most bytes one push or flush can write: the longest piece plus a
 * held tail of up to 3 bytes. A buffer of this size never gets -(needed). */
int bd_textstream_max_bytes(const bd_textstream *ts);
/* Returns the bytes written to out, or -(bytes needed) when outsize is too
 * small: then nothing is written and the token is not consumed (push the
 * same id again with a buffer of at least that size). */
int bd_textstream_push(bd_textstream *ts, int32_t id, char *out, int outsize);
/* Emits a held incomplete tail (end of generation). Bytes written, or
 * -(needed) with nothing consumed. */
int bd_textstream_flush(bd_textstream *ts, char *out, int outsize);
void bd_textstream_free(bd_textstream *ts);
int32_t bd_token_bos(const bd_model *m);
int32_t bd_token_eos(const bd_model *m);

/* ------------------------------------------------------------------------
 * Session
 * ---------------------------------------------------------------------- */

/* Worker threads shared by sessions (bd_session_params.threadpool): N
 * sessions -- a server's slots -- on one pool of the machine's cores run
 * at most that many threads, instead of N pools of all cores each. Runs
 * from sessions on different threads take turns on the pool: each
 * parallel section (one matmul, one attention pass) gets all of its
 * threads, and the sections of concurrent forwards interleave, so the CPU
 * is never oversubscribed; two concurrent generations then each progress
 * at about half speed. n_threads <= 0: all online CPUs. Free it after
 * every session that uses it. */
bd_threadpool *bd_threadpool_create(int32_t n_threads, char *err, size_t errlen);
void bd_threadpool_free(bd_threadpool *tp);
int32_t bd_threadpool_n_threads(const bd_threadpool *tp);

/* RoPE scaling of a session (llama.cpp's --rope-scaling): FILE keeps the
 * model's own (its rope.scaling.type, linear when it has none). */
enum bd_rope_scaling_type {
    BD_ROPE_SCALING_FILE = 0,
    BD_ROPE_SCALING_NONE = 1,
    BD_ROPE_SCALING_LINEAR = 2,
    BD_ROPE_SCALING_YARN = 3,
};

/* KV cache element type of a session (llama.cpp's --cache-type-k /
 * --cache-type-v, the same nine names): f16 and bf16 hold half the bytes of
 * f32; q8_0 (blocks of 32 int8 with an f16 scale, 34 bytes) 53 % of f16's;
 * q5_0 / q5_1 (22 / 24 bytes a block of 32), q4_0 / iq4_nl (18) and q4_1
 * (20) less still. Attention reads the rounded or quantized values, as
 * llama.cpp's caches of those types do. The block types need a head size
 * that is a multiple of 32. */
enum bd_kv_type {
    BD_KV_DEFAULT = 0, /* f32 */
    BD_KV_F32 = 1,
    BD_KV_F16 = 2,
    BD_KV_Q8_0 = 3,
    BD_KV_BF16 = 4,
    BD_KV_Q4_0 = 5,
    BD_KV_Q4_1 = 6,
    BD_KV_IQ4_NL = 7,
    BD_KV_Q5_0 = 8,
    BD_KV_Q5_1 = 9,
    BD_KV_COUNT
};
/* The names bd_kv_type_parse takes, for messages. */
#define BD_KV_TYPE_NAMES "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1"

/* llama.cpp's name of a KV type ("f32", "q4_0", ...: BD_KV_TYPE_NAMES) to
 * the enum: true and *t set, or false for any other name. bd_kv_type_name:
 * the name, "f32" for BD_KV_DEFAULT, "?" outside the enum. */
bool bd_kv_type_parse(const char *name, int32_t *t);
const char *bd_kv_type_name(int32_t t);

typedef struct bd_session_params {
    int32_t n_ctx;      /* KV cache length in tokens; 0 = 4096 */
    int32_t n_batch;    /* max tokens per forward chunk; 0 = 512 */
    int32_t n_outputs;  /* max rows with logits in one BD_LOGITS_ALL forward; 0 = 32 */
    int32_t n_threads;  /* threads of the session's own pool; 0 = all online CPUs */
    int32_t n_rollback; /* recurrent (hybrid) models: rows a truncation can undo, counted
                           from the last checkpoint; 0 = n_outputs. See bd_session_truncate. */
    int32_t n_tap;      /* number of layers whose input is captured */
    const int32_t *tap_layers; /* [n_tap] layer indices (0..n_layer); copied */
    bd_threadpool *threadpool; /* borrowed, or NULL: the session creates its own pool of
                                  n_threads (n_threads is ignored when set) */
    /* RoPE overrides, as llama.cpp's context parameters of the same names
     * (--rope-scaling, --rope-freq-base, --rope-freq-scale or 1 / --rope-scale,
     * --yarn-orig-ctx); 0 keeps the model file's value. A scaling type of
     * none turns any factor off. */
    int32_t rope_scaling; /* enum bd_rope_scaling_type */
    float rope_freq_base;
    float rope_freq_scale;
    int32_t yarn_orig_ctx;
    int32_t type_k, type_v; /* enum bd_kv_type of the K and V caches */
} bd_session_params;

/* All zero: the defaults above, a pool of its own. */
bd_session_params bd_session_default_params(void);

/* p may be NULL (defaults). Borrows m (and p->threadpool). */
bd_session *bd_session_create(bd_model *m, const bd_session_params *p, char *err, size_t errlen);
/* Bytes of the K and V caches a session of m created with p (its n_ctx,
 * type_k and type_v; NULL: the defaults) allocates -- the bulk of a
 * session's memory, and zero-filled at creation, so all of it resident.
 * 0 for a dflash drafter. For checking a configuration against the
 * machine before creating sessions. */
uint64_t bd_session_kv_bytes(const bd_model *m, const bd_session_params *p);
/* Before its model and thread pool. NULL is a no-op. */
void bd_session_free(bd_session *s);

int32_t bd_session_length(const bd_session *s); /* tokens in the KV cache */
uint64_t bd_session_cache_bytes(const bd_session *s); /* bytes of its K and V caches */
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
 * with logits (all rows for ALL, 1 for LAST). NULL when out of range.
 * Borrowed: valid until the next forward of s. */
const float *bd_session_logits(const bd_session *s, int32_t i);
/* Tapped inputs of the last forward (last chunk): [rows][n_tap][n_embd]
 * floats; *rows receives the row count. NULL when no layers are tapped.
 * Borrowed: valid until the next forward of s. */
const float *bd_session_taps(const bd_session *s, int32_t *rows);

/* ------------------------------------------------------------------------
 * Sampling and generation
 * ---------------------------------------------------------------------- */

/* One entry of a logit bias: bias is added to the token's logit (-INFINITY
 * bans it). */
typedef struct bd_logit_bias {
    int32_t token;
    float bias;
} bd_logit_bias;

typedef struct bd_sampler_params {
    float temperature; /* <= 0: greedy */
    int32_t top_k;     /* <= 0: off */
    float top_p;       /* >= 1: off */
    float min_p;       /* <= 0: off */
    uint64_t seed;
    /* Repetition penalty (llama.cpp's penalty_repeat / penalty_last_n), applied
     * first, to the raw logits, at every temperature (greedy included): each
     * distinct token among the last repeat_last_n tokens of the history
     * (prompt + generated) has its logit divided by repeat_penalty when
     * positive, multiplied when <= 0. */
    float repeat_penalty;   /* 1.0 = off (0, as in a zeroed struct, reads as 1.0) */
    int32_t repeat_last_n;  /* history length penalized: 0 = off, -1 = all of it */
    /* OpenAI's frequency and presence penalties, as llama.cpp applies them
     * (same window as the repetition penalty, right after it): a token seen
     * c > 0 times in the window loses c * frequency_penalty +
     * presence_penalty from its logit. 0 = off. */
    float frequency_penalty;
    float presence_penalty;
    /* Logit bias, applied before everything else (llama.cpp's order: bias,
     * penalties, top-k, ...), at every temperature. Borrowed: read by
     * bd_generate / bd_spec_generate when they start (copied then). An
     * entry whose token is out of the vocabulary is ignored. */
    const bd_logit_bias *logit_bias;
    int32_t n_logit_bias;
} bd_sampler_params;

/* llama.cpp defaults: T 0.8, k 40, p 0.95, min_p 0.05, repeat_penalty 1.0
 * (off), repeat_last_n 64, frequency/presence penalties 0, no logit bias,
 * a random seed. */
bd_sampler_params bd_sampler_default_params(void);

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
    int64_t n_short_blocks; /* DFlash drafting passes run on a short block */
    bool adaptive;          /* the draft length was picked each step (bd_spec_params.adaptive) */
} bd_spec_stats;

typedef struct bd_gen_stats {
    int32_t n_prompt;        /* prompt tokens */
    int32_t n_prompt_cached; /* of which kept from the session's cache (not forwarded) */
    int32_t n_gen;
    double prompt_ms;
    double gen_ms;
    double prompt_tps;       /* forwarded prompt tokens (n_prompt - n_prompt_cached) per second */
    double gen_tps;
    bool stopped_eog;
    bd_spec_stats spec;
} bd_gen_stats;

/* Called once per emitted token, on the generating thread, before the
 * next forward. Return false to stop generation. */
typedef bool (*bd_token_cb)(int32_t token, void *user);

/* Called once per emitted token just before the bd_token_cb (same user
 * pointer), with the target's logits row the token was drawn from: the
 * raw model output [n_vocab], before bias, penalties and temperature --
 * for a token accepted from a draft, the verify row that accepted it, the
 * same row plain decoding would have produced. Borrowed for the call. For
 * log-probabilities (log-softmax of this row). */
typedef void (*bd_logits_cb)(int32_t token, const float *logits, int32_t n_vocab, void *user);
/* Grammar-constrained generation (GBNF; src/decode/grammar.h). */
typedef struct bd_grammar bd_grammar;

typedef struct bd_gen_params {
    int32_t n_predict;          /* max new tokens; < 0: until EOG or context end */
    bd_sampler_params sampling;
    bool ignore_eog;            /* do not stop at end-of-generation tokens */
    bd_logits_cb on_logits;     /* NULL: off */
    bd_grammar *grammar;        /* optional: every sampled token obeys it, generation ends when it is
                                   complete and allows nothing else; NULL = unconstrained. Borrowed;
                                   one generation at a time per grammar. */
} bd_gen_params;

/* Prefill prompt and generate; tokens are reported through cb.
 * Prefix reuse: whatever s holds, the longest common prefix of
 * bd_session_tokens(s) and prompt stays in the cache (at most n_prompt - 1
 * tokens: the last prompt token is always forwarded, for its logits) and
 * only the rest is forwarded; the output is the same as from an empty
 * session. stats->n_prompt_cached says how many were kept. */
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

/* The rows of a DFlash drafting pass. The drafter was trained on blocks
 * of block_size rows: [anchor, MASK x (block_size - 1)]. A short block
 * [anchor, MASK x n] for n drafts costs less (its rows scale the pass's
 * work) but changes what every row attends to, so its drafts -- and how
 * often they are accepted -- can differ. Output is exact either way. */
typedef enum bd_dflash_block {
    BD_DFLASH_BLOCK_AUTO = 0, /* the trained block; with adaptive drafting the trained block or
                                 a short one, whichever measures the better tokens per second
                                 (each with its own acceptance estimates) */
    BD_DFLASH_BLOCK_FULL,     /* always the trained block (the reference) */
    BD_DFLASH_BLOCK_SHORT,    /* always [anchor, MASK x n], as llama.cpp does */
} bd_dflash_block;

typedef struct bd_spec_params {
    bd_spec_type type;
    int32_t n_max;    /* max drafted tokens per step (DFlash: <= block_size - 1); 0 = default */
    int32_t n_min;    /* drop drafts shorter than this */
    float p_min;      /* draft-simple: stop drafting below this draft probability */
    bool adaptive;    /* pick the draft length each step from acceptance and measured cost
                         (n_max its bound); false: draft n_max every step, as llama.cpp.
                         Front ends default it per type (bd_spec_adaptive_default) */
    int32_t ngram_n;  /* ngram-simple: match length (default 3) */
    bd_dflash_block dflash_block; /* DFlash block length (below) */
    /* enum bd_kv_type of the drafter's K and V caches (llama.cpp's -ctkd /
     * -ctvd): a DFlash drafter's context cache, a draft-simple model's
     * session; 0 = f32 */
    int32_t draft_type_k, draft_type_v;
} bd_spec_params;

bd_spec_params bd_spec_default_params(void);
/* The adaptive default a front end (run, serve, a gallery model) applies
 * when neither a flag nor the model's config says: on for draft-dflash,
 * off for the others. (A --spec-draft-n-max flag alone says "fixed": the
 * same command line as llama.cpp's drafts the same lengths.) A DFlash step costs a drafter pass plus a verify of
 * n_max + 1 rows whatever is accepted; on a CPU, where both are
 * compute-bound, a fixed full block loses to plain decoding whenever the
 * drafter is right for fewer than a few positions (never right: 0.13-0.21x
 * plain speed at 4B, avx2, Zen 4). bd_spec_default_params keeps it off (the
 * reference behaviour; its callers set the type later). */
bool bd_spec_adaptive_default(bd_spec_type t);
const char *bd_spec_type_name(bd_spec_type t); /* static string */
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
 * with exactly these as tap_layers. Writes them to layers[0..count) and
 * returns the count; 0 if draft is not a DFlash drafter; -(count) when max
 * is smaller than the count, and then nothing is written. (At most 16;
 * bd_spec_session_create does all of this in one call.) */
int32_t bd_dflash_tap_layers(const bd_model *draft, int32_t *layers, int32_t max);

typedef struct bd_spec bd_spec;

/* target: a session of the target model (for DFlash created with the
 * drafter's tap layers); draft: the draft model (NULL for ngram-simple).
 * Borrows both: free the bd_spec first. Checks that the pair fits. n_max
 * above the drafter's limit is clamped, with a warning in warn (may be
 * NULL). The drafter's state (DFlash context, draft-simple session) runs
 * on the target session's threads. */
bd_spec *bd_spec_create(bd_session *target, bd_model *draft, const bd_spec_params *p, char *warn,
                        size_t warnlen, char *err, size_t errlen);

/* Speculative decoding set up in one call: creates the target session
 * from sp (sp may be NULL; for draft-dflash with the drafter's tap layers,
 * whatever sp->n_tap says) and the bd_spec that drives it. The bd_spec
 * owns that session: bd_spec_session returns it and bd_spec_free frees it.
 * spp->type must not be BD_SPEC_NONE (bd_spec_type_for_draft picks the
 * type a draft file implies). Borrows target, draft, sp->threadpool. */
bd_spec *bd_spec_open(bd_model *target, bd_model *draft, const bd_session_params *sp, const bd_spec_params *spp,
                      char *warn, size_t warnlen, char *err, size_t errlen);
/* The target session a bd_spec drives (borrowed; valid until bd_spec_free,
 * or until the caller frees it when it created the session itself). */
bd_session *bd_spec_session(bd_spec *sp);

/* Frees the drafter state (and the session bd_spec_open created). */
void bd_spec_free(bd_spec *sp);
int32_t bd_spec_n_max(const bd_spec *sp);

/* Draft limits for the next generations (a server's per-request
 * "speculative.n_max" / "n_min" / "p_min"): n_max is clamped to [1, the
 * limit bd_spec_create computed] (<= 0: the n_max the bd_spec was created
 * with), n_min to [0, n_max], p_min to [0, 1] (draft-simple only). The
 * values in effect are written back through the pointers. Output stays
 * lossless whatever they are; they change only speed. */
void bd_spec_set_draft_limits(bd_spec *sp, int32_t *n_max, int32_t *n_min, float *p_min);

/* With the adaptive draft length (bd_spec_params.adaptive), a generation
 * starts from what the earlier ones on this bd_spec learned (acceptance by
 * position, step costs) once one of them drafted. This makes the next
 * generation start fresh instead, with the warm-up draft of a new bd_spec
 * (benchmarks of a one-shot run; a different kind of prompt). Output is
 * the same either way. */
void bd_spec_forget(bd_spec *sp);

/* Observe every speculative step: the anchor's position and id, the
 * drafted tokens and how many of them the target accepted. For tests that
 * compare drafts step by step with another engine. fn NULL turns it off.
 * drafts is borrowed for the duration of the call. */
typedef void (*bd_spec_trace_fn)(void *user, int32_t pos, int32_t anchor, const int32_t *drafts,
                                 int32_t n_drafts, int32_t n_accepted);
void bd_spec_set_trace(bd_spec *sp, bd_spec_trace_fn fn, void *user);

/* Like bd_generate (prefix reuse included), speculatively, on the bd_spec's
 * target session. The drafter's state is reused with the target's: the
 * DFlash context keeps its rows for the common prefix (capped by what it
 * holds), the draft-simple session its matching tokens. stats->spec is
 * filled in. */
bool bd_spec_generate(bd_spec *sp, const int32_t *prompt, int32_t n_prompt, const bd_gen_params *gp,
                      bd_token_cb cb, void *user, bd_gen_stats *stats, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
