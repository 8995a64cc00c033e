/*
 * tok_detok.c - token pieces, whole-sequence decode and streaming decode.
 *
 * Every token's piece is computed once at load in its render_special form
 * (as llama.cpp's piece cache); hiding CONTROL/UNKNOWN tokens is a check
 * at lookup time.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "unicode.h"

/* ------------------------------------------------------------------------
 * Piece table (built at load)
 * ---------------------------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t n, cap;
    bool ok;
} buf;

static void buf_put(buf *b, const void *s, size_t n) {
    if (!b->ok || n == 0) return;
    if (n > UINT32_MAX - b->n) { // offsets are 32-bit; a hostile vocabulary can blow this up
        b->ok = false;
        return;
    }
    if (!bd_grow(&b->p, &b->cap, b->n + n, 1)) {
        b->ok = false;
        return;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* <0xXX> -> the byte; llama.cpp parses the two characters at offset 3 as
 * hex (strtol), so a malformed text gives whatever hex prefix it has. */
static uint8_t byte_token_value(const char *s, size_t n) {
    unsigned v = 0;
    for (size_t i = 3; i < n && i < 5; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else break;
        v = v * 16 + d;
    }
    return (uint8_t)v;
}

/* GPT-2 byte-level text -> bytes. A code point outside the byte mapping
 * becomes llama.cpp's marker "[UNK_BYTE_0x<its utf-8 hex><token text>]". */
static void piece_bpe_normal(buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int used;
        uint32_t cp = bd_utf8_decode((const uint8_t *)s + i, n - i, &used);
        i += (size_t)used;
        int byte = bd_gpt2_cp_to_byte(cp);
        if (byte >= 0) {
            uint8_t c = (uint8_t)byte;
            buf_put(b, &c, 1);
            continue;
        }
        uint8_t u[4];
        int ul = bd_utf8_encode(cp, u);
        char hex[16];
        buf_put(b, "[UNK_BYTE_0x", 12);
        for (int k = 0; k < ul; k++) {
            snprintf(hex, sizeof hex, "%02x", u[k]);
            buf_put(b, hex, 2);
        }
        buf_put(b, s, n);
        buf_put(b, "]", 1);
    }
}

/* SentencePiece text: U+2581 -> space. */
static void piece_spm_normal(buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && (uint8_t)s[i] == 0xE2 && (uint8_t)s[i + 1] == 0x96 && (uint8_t)s[i + 2] == 0x81) {
            buf_put(b, " ", 1);
            i += 3;
        } else {
            buf_put(b, s + i, 1);
            i++;
        }
    }
}

bool bd_tok_build_pieces(bd_tokenizer *t) {
    buf b = {.ok = true};
    t->piece_off = malloc((size_t)t->n_vocab * sizeof *t->piece_off);
    t->piece_len = malloc((size_t)t->n_vocab * sizeof *t->piece_len);
    if (!t->piece_off || !t->piece_len) return false;
    for (int32_t id = 0; id < t->n_vocab && b.ok; id++) {
        const char *s = t->text + t->text_off[id];
        size_t n = t->text_len[id];
        uint8_t a = t->attr[id];
        size_t start = b.n;
        if (a & (BD_ATTR_UNKNOWN | BD_ATTR_CONTROL | BD_ATTR_USER_DEFINED)) {
            buf_put(&b, s, n);
        } else if (a & BD_ATTR_NORMAL) {
            if (t->kind == BD_TOK_BPE) piece_bpe_normal(&b, s, n);
            else piece_spm_normal(&b, s, n);
        } else if (a & BD_ATTR_BYTE) {
            uint8_t c = byte_token_value(s, n);
            buf_put(&b, &c, 1);
        } // UNUSED / UNDEFINED: empty
        if (b.n - start > (size_t)INT_MAX / 2) b.ok = false;
        t->piece_off[id] = (uint32_t)start;
        t->piece_len[id] = (uint32_t)(b.n - start);
        if (t->piece_len[id] > t->piece_max[1]) t->piece_max[1] = t->piece_len[id];
        if (!(a & (BD_ATTR_UNKNOWN | BD_ATTR_CONTROL)) && t->piece_len[id] > t->piece_max[0])
            t->piece_max[0] = t->piece_len[id];
    }
    if (!b.ok) {
        free(b.p);
        return false;
    }
    t->piece = b.p ? b.p : malloc(1);
    return t->piece != NULL;
}

/* ------------------------------------------------------------------------
 * Lookup
 * ---------------------------------------------------------------------- */

/* The visible bytes of a token (empty for hidden or out-of-range ids). */
static const char *visible_piece(const bd_tokenizer *t, int32_t id, bool render_special, size_t *len) {
    *len = 0;
    if (id < 0 || id >= t->n_vocab) return "";
    if (!render_special && (t->attr[id] & (BD_ATTR_UNKNOWN | BD_ATTR_CONTROL))) return "";
    *len = t->piece_len[id];
    return t->piece + t->piece_off[id];
}

/* SentencePiece prefix space: dropped from the first piece of a sequence
 * (ignoring BOS). */
static bool strip_space(const bd_tokenizer *t, bool at_start, const char *p, size_t n) {
    return t->kind == BD_TOK_SPM && t->add_space_prefix && at_start && n > 0 && p[0] == ' ';
}

int bd_tokenizer_piece(const bd_tokenizer *t, int32_t id, char *out, int bufsize, bool render_special) {
    size_t n;
    const char *p = visible_piece(t, id, render_special, &n);
    if (bufsize < 0 || n > (size_t)bufsize) return -(int)n;
    if (n) memcpy(out, p, n);
    return (int)n;
}

int bd_tokenizer_piece_max(const bd_tokenizer *t, bool render_special) {
    return (int)t->piece_max[render_special ? 1 : 0];
}

int bd_tokenizer_decode(const bd_tokenizer *t, const int32_t *ids, int n, bool render_special, char *out,
                        int outsize) {
    size_t total = 0, cap = outsize > 0 ? (size_t)outsize : 0;
    bool at_start = true;
    for (int i = 0; i < n; i++) {
        size_t pl;
        const char *p = visible_piece(t, ids[i], render_special, &pl);
        if (strip_space(t, at_start, p, pl)) p++, pl--;
        if (ids[i] != t->bos) at_start = false;
        if (pl && total + pl <= cap) memcpy(out + total, p, pl);
        total += pl;
        if (total > (size_t)INT_MAX) return INT32_MIN;
    }
    return total <= cap ? (int)total : -(int)total;
}

/* ------------------------------------------------------------------------
 * Streaming
 * ---------------------------------------------------------------------- */

void bd_detok_init(bd_detok *d, const bd_tokenizer *t, bool render_special) {
    memset(d, 0, sizeof *d);
    d->t = t;
    d->render_special = render_special;
    d->at_start = true;
}

/* How many trailing bytes of held[0..nh) ++ p[0..pl) form an incomplete
 * UTF-8 sequence that a later byte could complete (0..3). */
static size_t incomplete_tail(const uint8_t *held, size_t nh, const char *p, size_t pl) {
    size_t total = nh + pl;
    for (size_t back = 1; back <= 3 && back <= total; back++) {
        size_t k = total - back;
        uint8_t c = k < nh ? held[k] : (uint8_t)p[k - nh];
        if ((c & 0xC0) == 0x80) continue; // continuation: keep looking for the lead
        size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return back < need ? back : 0;
    }
    return 0;
}

int bd_detok_push(bd_detok *d, int32_t id, char *out, int outsize) {
    const bd_tokenizer *t = d->t;
    size_t pl;
    const char *p = visible_piece(t, id, d->render_special, &pl);
    if (strip_space(t, d->at_start, p, pl)) p++, pl--;
    if (pl > (size_t)INT_MAX - 8) return INT32_MIN;

    size_t nh = d->n_held, total = nh + pl;
    size_t keep = incomplete_tail(d->held, nh, p, pl);
    size_t emit = total - keep;
    if (outsize < 0 || emit > (size_t)outsize) return -(int)emit;

    uint8_t tail[4];
    for (size_t k = emit; k < total; k++) tail[k - emit] = k < nh ? d->held[k] : (uint8_t)p[k - nh];
    size_t from_held = emit < nh ? emit : nh;
    if (from_held) memcpy(out, d->held, from_held);
    if (emit > nh) memcpy(out + nh, p, emit - nh);
    if (keep) memcpy(d->held, tail, keep);
    d->n_held = (uint8_t)keep;
    if (id != t->bos) d->at_start = false;
    return (int)emit;
}

int bd_detok_flush(bd_detok *d, char *out, int outsize) {
    if (outsize < 0 || d->n_held > outsize) return -(int)d->n_held;
    int n = d->n_held;
    if (n) memcpy(out, d->held, (size_t)n);
    d->n_held = 0;
    return n;
}
