/*
 * tokenizer.h - GGUF vocabularies: byte-level BPE (`gpt2`, pre-tokenizers
 * qwen2 / qwen35) and SentencePiece BPE (`llama`), encode and decode.
 *
 * Reference behaviour is llama.cpp's tokenizer (llama_tokenize /
 * llama_token_to_piece / llama_detokenize); deliberate differences are
 * listed at the functions. No Unicode normalization is applied (llama.cpp
 * applies none either).
 *
 * A loaded tokenizer is immutable: every function below that takes a const
 * bd_tokenizer may be called from several threads at once. Nothing keeps a
 * pointer into the bd_gguf_file; it may be closed right after loading.
 *
 * Token ids are int32_t; -1 means "none" wherever an id is returned.
 */
#ifndef BD_TOKENIZER_H
#define BD_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../gguf/bd_gguf.h"

typedef struct bd_tokenizer bd_tokenizer;

/* Token types as stored in tokenizer.ggml.token_type. */
enum bd_token_type {
    BD_TOKEN_UNDEFINED = 0,
    BD_TOKEN_NORMAL = 1,
    BD_TOKEN_UNKNOWN = 2,
    BD_TOKEN_CONTROL = 3,
    BD_TOKEN_USER_DEFINED = 4,
    BD_TOKEN_UNUSED = 5,
    BD_TOKEN_BYTE = 6,
};

/* ------------------------------------------------------------------------
 * Loading
 * ---------------------------------------------------------------------- */

/* Load the vocabulary from a GGUF file's tokenizer.* keys. Copies what it
 * needs. Returns NULL with a message on a missing/ill-typed key, an
 * unsupported model or pre-tokenizer (the message names it), a duplicate
 * token text, or allocation failure. */
bd_tokenizer *bd_tokenizer_load(const bd_gguf_file *f, char *err, size_t errlen);

/* The same from plain arrays (tests, other containers). Optional fields:
 * NULL pointers / -1 ids / -1 flags mean "key absent" and get llama.cpp's
 * defaults. Every string is (pointer, length), need not be NUL-terminated,
 * and is copied. */
typedef struct bd_tokenizer_vocab {
    const char *model;             /* "gpt2" or "llama" (NUL-terminated) */
    const char *pre;               /* gpt2: "qwen2", "qwen35" (NULL = absent) */
    int32_t n_tokens;
    const char *const *tokens;     /* [n_tokens] token texts */
    const uint32_t *token_lens;    /* [n_tokens] */
    const int32_t *types;          /* [n_tokens] enum bd_token_type, or NULL (all NORMAL) */
    const float *scores;           /* [n_tokens] or NULL (all 0) */
    int64_t n_merges;              /* gpt2: required (may be 0) */
    const char *const *merges;     /* [n_merges] "left right" */
    const uint32_t *merge_lens;    /* [n_merges] */
    /* Special ids as stored (-1 = absent; out-of-range values are ignored
     * like llama.cpp does, keeping the default). */
    int64_t bos, eos, eot, eom, unk, sep, pad, mask;
    int64_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    int add_bos, add_eos, add_space_prefix; /* -1 absent, 0 false, 1 true */
} bd_tokenizer_vocab;

/* Fill v with "everything absent" (all ids and flags -1, pointers NULL). */
void bd_tokenizer_vocab_init(bd_tokenizer_vocab *v);
bd_tokenizer *bd_tokenizer_create(const bd_tokenizer_vocab *v, char *err, size_t errlen);

void bd_tokenizer_free(bd_tokenizer *t);

/* ------------------------------------------------------------------------
 * Vocabulary facts
 * ---------------------------------------------------------------------- */

int32_t bd_tokenizer_n_vocab(const bd_tokenizer *t);
int32_t bd_tokenizer_bos(const bd_tokenizer *t); /* -1 if none */
int32_t bd_tokenizer_eos(const bd_tokenizer *t);
int32_t bd_tokenizer_eot(const bd_tokenizer *t);
int32_t bd_tokenizer_pad(const bd_tokenizer *t);
bool bd_tokenizer_add_bos(const bd_tokenizer *t);
bool bd_tokenizer_add_eos(const bd_tokenizer *t);

/* End-of-generation set, built like llama.cpp: eos, eot, eom, the FIM
 * pad/repo/file-separator tokens, and every token whose text is one of
 * llama.cpp's end markers (<|im_end|>, <|endoftext|>, <|eot_id|>, </s>,
 * <end_of_turn>, ...). For Qwen3: 128247 (</s>), 151643, 151645, 151662,
 * 151663, 151664. False for ids out of range. */
bool bd_tokenizer_is_eog(const bd_tokenizer *t, int32_t id);

/* Effective type of a token (enum bd_token_type): the stored type, except
 * that tokens llama.cpp promotes by their text (end markers, FIM markers)
 * report BD_TOKEN_CONTROL. -1 for ids out of range. */
int bd_tokenizer_token_type(const bd_tokenizer *t, int32_t id);

/* Raw vocabulary string of a token (as stored: GPT-2 byte-mapped / with
 * U+2581), not NUL-terminated, *len set. NULL for ids out of range. Empty
 * stored texts read back as "[EMPTY_<id>]" (llama.cpp's substitute). */
const char *bd_tokenizer_token_text(const bd_tokenizer *t, int32_t id, size_t *len);

/* ------------------------------------------------------------------------
 * Encoding
 * ---------------------------------------------------------------------- */

/* Tokenize text[0..len) (any bytes; invalid UTF-8 never fails: each byte
 * that cannot start a valid sequence becomes U+FFFD first, as llama.cpp
 * does). add_special: prepend BOS if the vocabulary says add_bos, append
 * EOS if add_eos. parse_special: CONTROL (and UNKNOWN) token texts in the
 * input become their single tokens; USER_DEFINED token texts always do.
 * Special texts are matched longest first, every occurrence of one text
 * before the next (llama.cpp's partition order).
 * Returns the number of tokens written to out; if max_out is too small,
 * writes nothing and returns -(tokens needed); INT32_MIN on allocation
 * failure or a text too long for an int count. */
int bd_tokenizer_encode(const bd_tokenizer *t, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t *out, int max_out);
/* parse_special, except that a CONTROL/UNKNOWN text is not matched where it
 * would cover a byte of one of the n_guard ranges guard[2k] .. guard[2k+1]
 * (end exclusive; any order): that text stays ordinary text, merged with
 * its neighbours as parse_special false would leave it. USER_DEFINED texts
 * match everywhere, as always. */
int bd_tokenizer_encode_guarded(const bd_tokenizer *t, const char *text, size_t len, bool add_special,
                                const size_t *guard, size_t n_guard, int32_t *out, int max_out);

/* ------------------------------------------------------------------------
 * Decoding
 * ---------------------------------------------------------------------- */

/* Bytes of one token: GPT-2 byte mapping undone (gpt2), U+2581 -> space
 * and <0xXX> -> the byte (llama). CONTROL and UNKNOWN tokens produce
 * nothing unless render_special, then their raw text; USER_DEFINED tokens
 * always produce their raw text; UNUSED tokens produce nothing. Ids out of
 * range produce nothing. No leading-space handling here (see decode).
 * Returns bytes written (no NUL), or -(bytes needed) if bufsize is too
 * small (nothing written). */
int bd_tokenizer_piece(const bd_tokenizer *t, int32_t id, char *buf, int bufsize, bool render_special);
/* The longest piece bd_tokenizer_piece can return with this render_special
 * (bytes; computed at load). */
int bd_tokenizer_piece_max(const bd_tokenizer *t, bool render_special);

/* Whole-sequence decode: the pieces concatenated. For SentencePiece
 * vocabularies with add_space_prefix, the leading space of the first piece
 * is removed when that piece comes first or right after BOS; the
 * reference text of stories260K starts "Once upon", not " Once upon".
 * (llama.cpp's llama_detokenize keeps the space when the ids start with
 * BOS; llama2.c and SentencePiece drop it; we follow the latter.) Output
 * is raw bytes and may end in an incomplete UTF-8 sequence. Returns bytes
 * written (no NUL) or -(bytes needed) if outsize is too small. */
int bd_tokenizer_decode(const bd_tokenizer *t, const int32_t *ids, int n, bool render_special,
                        char *out, int outsize);

/* Streaming decode, one token at a time, without allocation. push writes
 * only bytes that end on a UTF-8 sequence boundary and holds back a
 * trailing incomplete sequence (at most 3 bytes) until a later token
 * completes it. Bytes are never altered: invalid sequences are passed
 * through as they are, and the concatenation of every push's output and
 * the final flush equals bd_tokenizer_decode of the same ids, byte for
 * byte (a server that needs valid UTF-8 must sanitize what it sends).
 * The SentencePiece leading-space rule of decode applies. */
typedef struct bd_detok {
    const bd_tokenizer *t;
    bool render_special;
    bool at_start;   /* no token other than BOS pushed yet */
    uint8_t n_held;  /* bytes in held[] */
    uint8_t held[4]; /* incomplete UTF-8 tail */
} bd_detok;

void bd_detok_init(bd_detok *d, const bd_tokenizer *t, bool render_special);
/* Returns bytes written to out; if outsize is too small, returns
 * -(bytes needed) and leaves the state as it was (push again with more
 * room). bd_tokenizer_piece_max + 3 bytes (a held tail) always suffice. */
int bd_detok_push(bd_detok *d, int32_t id, char *out, int outsize);
/* Emits the held bytes as they are (an incomplete sequence at the end of
 * generation) and resets the hold. Returns bytes written or -(needed). */
int bd_detok_flush(bd_detok *d, char *out, int outsize);

#endif
