/*
 * tok_internal.h - the bd_tokenizer structure and helpers shared by the
 * files of src/tokenizer. Not part of the public API.
 */
#ifndef BD_TOK_INTERNAL_H
#define BD_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

enum bd_tok_kind { BD_TOK_BPE = 1, BD_TOK_SPM = 2 };
/* Pre-tokenizer regexes (tok_bpe.c): qwen2, qwen35 (adds \p{M}), llama3
 * (qwen2's with digit runs of up to three), tekken (Mistral: case-split
 * letter runs, single digits). */
enum bd_tok_pre { BD_PRE_NONE = 0, BD_PRE_QWEN2 = 1, BD_PRE_QWEN35 = 2, BD_PRE_LLAMA3 = 3, BD_PRE_TEKKEN = 4 };

/* Token attribute bits (llama.cpp's llama_token_attr). Tokens can carry
 * several, e.g. NORMAL|CONTROL after a text-based promotion. */
enum {
    BD_ATTR_UNKNOWN = 1 << 0,
    BD_ATTR_UNUSED = 1 << 1,
    BD_ATTR_NORMAL = 1 << 2,
    BD_ATTR_CONTROL = 1 << 3,
    BD_ATTR_USER_DEFINED = 1 << 4,
    BD_ATTR_BYTE = 1 << 5,
};

/* One BPE merge in the pair table: (left id, right id) -> rank, result. */
typedef struct bd_merge {
    uint64_t key;   /* (uint64)left << 32 | right; UINT64_MAX = empty slot */
    int32_t rank;   /* index in tokenizer.ggml.merges (lower merges first) */
    int32_t result; /* id of left+right */
} bd_merge;

struct bd_tokenizer {
    int kind; /* enum bd_tok_kind */
    int pre;  /* enum bd_tok_pre */
    /* BPE: a pre-tokenized word that is itself a token is emitted whole,
     * without merging (llama.cpp's ignore_merges, set for the llama3 family) */
    bool ignore_merges;
    int32_t n_vocab;

    /* Token texts, one arena: token i is text[text_off[i] .. +text_len[i]). */
    char *text;
    uint32_t *text_off; /* [n_vocab] */
    uint32_t *text_len; /* [n_vocab] */
    float *scores;      /* [n_vocab] SPM merge scores */
    uint8_t *attr;      /* [n_vocab] BD_ATTR_* bits */

    /* Pieces (render_special form, like llama.cpp's piece cache). */
    char *piece;
    uint32_t *piece_off; /* [n_vocab] */
    uint32_t *piece_len; /* [n_vocab] */
    uint32_t piece_max[2]; /* longest piece: [0] visible without render_special, [1] with */

    /* Text -> id: open addressing; a slot holds the id (-1 = empty) and
     * the upper hash bits, so most probes never touch the texts. */
    struct bd_tok_slot {
        int32_t id;
        uint32_t tag;
    } *map; /* [map_mask + 1] */
    uint32_t map_mask;

    /* BPE merges: open addressing over bd_merge. */
    bd_merge *merges; /* [merge_mask + 1] */
    uint32_t merge_mask;
    int32_t byte_tok[256]; /* BPE: id of the mapped character of each byte, or -1 */
    int32_t spm_byte[256]; /* SPM: id of <0xXX>, or -1 */

    /* Tokens matched as whole units in the input, longest text first. */
    int32_t *special; /* [n_special] */
    int32_t n_special;

    int32_t *eog; /* [n_eog] sorted ids */
    int32_t n_eog;

    int32_t bos, eos, eot, eom, unk, sep, pad, mask;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_space_prefix;
};

/* Hash of a byte string (64-bit FNV-1a). */
uint64_t bd_tok_hash(const void *s, size_t n);
/* Id of the token whose text is s[0..n), or -1. */
int32_t bd_tok_find(const bd_tokenizer *t, const char *s, size_t n);

/* GPT-2 byte <-> code point mapping. */
uint32_t bd_gpt2_byte_to_cp(uint8_t b);
int bd_gpt2_cp_to_byte(uint32_t cp); /* -1 if cp is not a mapped byte */

/* A growable output vector of token ids. ok turns false on allocation
 * failure or overflow; later pushes are then ignored. */
typedef struct bd_ids {
    int32_t *v;
    size_t n, cap;
    bool ok;
} bd_ids;
/* Build the piece table (tok_detok.c); false on out-of-memory or a
 * vocabulary too large for 32-bit offsets. */
bool bd_tok_build_pieces(bd_tokenizer *t);
void bd_ids_push(bd_ids *o, int32_t id);

/* Tokenize one fragment of plain text (no special tokens in it) and
 * append the ids. BPE: pre-tokenize, byte-map, merge by rank. SPM: the
 * caller has already replaced spaces and added the prefix. */
void bd_tok_bpe_fragment(const bd_tokenizer *t, const uint8_t *s, size_t n, bd_ids *out);
void bd_tok_spm_fragment(const bd_tokenizer *t, const uint8_t *s, size_t n, bd_ids *out);

/* Pre-tokenizer (exposed for the unit test): split cps[0..n) (code points,
 * with cls[] from bd_unicode_class) into words; writes the end index of
 * each word to ends[] (room for n) and returns the number of words. */
size_t bd_pretok_split(int pre, const uint32_t *cps, const uint8_t *cls, size_t n, size_t *ends);

#endif
