/*
 * textstream.c - public streaming detokenizer over the tokenizer's bd_detok
 * (the stream always continues a prompt, so the SentencePiece rule that
 * drops the leading space of a sequence's first piece is turned off), and
 * the token functions added to the public API after model_load.c's:
 * bd_token_piece_max, bd_tokenize_guarded.
 */
#include <stdlib.h>

#include "model.h"

int bd_token_piece_max(const bd_model *m, bool render_special) {
    return m->tok ? bd_tokenizer_piece_max(m->tok, render_special) : 0;
}

int bd_tokenize_guarded(const bd_model *m, const char *text, size_t len, bool add_special, const size_t *plain,
                        int n_plain, int32_t *out, int max_out) {
    if (!m->tok) return 0;
    return bd_tokenizer_encode_guarded(m->tok, text, len, add_special, plain, n_plain < 0 ? 0 : (size_t)n_plain,
                                       out, max_out);
}

struct bd_textstream {
    bd_detok d;
    int max_bytes; /* longest piece + a held incomplete UTF-8 tail (3 bytes) */
};

bd_textstream *bd_textstream_create(const bd_model *m, bool render_special) {
    if (!m->tok) return NULL;
    bd_textstream *ts = calloc(1, sizeof *ts);
    if (!ts) return NULL;
    bd_detok_init(&ts->d, m->tok, render_special);
    ts->d.at_start = false;
    ts->max_bytes = bd_tokenizer_piece_max(m->tok, render_special) + 3;
    return ts;
}

int bd_textstream_max_bytes(const bd_textstream *ts) { return ts->max_bytes; }

/* bd_detok_* return -(needed) and keep their state when out is too small. */
int bd_textstream_push(bd_textstream *ts, int32_t id, char *out, int outsize) {
    int n = bd_detok_push(&ts->d, id, out, outsize);
    BD_ASSERT(n <= ts->max_bytes && -n <= ts->max_bytes); /* the promise of bd_textstream_max_bytes */
    return n;
}

int bd_textstream_flush(bd_textstream *ts, char *out, int outsize) {
    return bd_detok_flush(&ts->d, out, outsize);
}

void bd_textstream_free(bd_textstream *ts) { free(ts); }
