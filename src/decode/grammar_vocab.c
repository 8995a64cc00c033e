/*
 * grammar_vocab.c - token byte strings of a vocabulary and their trie, for
 * the grammar mask. Built once per model (about 0.1 s for Qwen3's 151936
 * tokens) and shared read-only by every grammar.
 *
 * The trie is stored in preorder: node i has a byte, a depth (1 = first
 * byte of a piece) and the index just past its subtree, so the mask walk
 * is a linear scan that jumps over a subtree when a byte is rejected.
 * Tokens with equal pieces hang off the same node through tok_next.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar_int.h"
#include "../model/model.h"
#include "../tokenizer/tokenizer.h"

#define MAX_PIECE 65535 /* uint16 depth */

struct bd_grammar_vocab {
    int32_t n_vocab;
    uint8_t *bytes;    /* all pieces */
    int64_t *off;      /* [n_vocab] */
    int32_t *len;      /* [n_vocab] */
    char *sp_bytes;    /* special texts of tokens with an empty piece */
    int64_t *sp_off;   /* [n_vocab] */
    int32_t *sp_len;   /* [n_vocab], 0 if none */
    uint8_t *is_eog;   /* [n_vocab] */
    int32_t *eog;
    int32_t n_eog;
    gtrie trie;
};

typedef struct {
    uint8_t *b;
    int64_t n, cap;
} bbuf;

static bool bbuf_add(bbuf *x, const void *p, size_t n) {
    if (x->n + (int64_t)n > x->cap) {
        int64_t nc = x->cap ? 2 * x->cap : 1 << 16;
        while (nc < x->n + (int64_t)n) nc *= 2;
        uint8_t *nb = realloc(x->b, (size_t)nc);
        if (!nb) return false;
        x->b = nb;
        x->cap = nc;
    }
    if (n) memcpy(x->b + x->n, p, n);
    x->n += (int64_t)n;
    return true;
}

void bd_grammar_vocab_free(bd_grammar_vocab *v) {
    if (!v) return;
    free(v->bytes);
    free(v->off);
    free(v->len);
    free(v->sp_bytes);
    free(v->sp_off);
    free(v->sp_len);
    free(v->is_eog);
    free(v->eog);
    free(v->trie.byte);
    free(v->trie.depth);
    free(v->trie.end);
    free(v->trie.tok);
    free(v->trie.tok_next);
    free(v);
}

typedef struct {
    const uint8_t *p;
    int32_t len, id;
} sort_item;

static int cmp_piece(const void *a, const void *b) {
    const sort_item *x = a, *y = b;
    int c = memcmp(x->p, y->p, (size_t)(x->len < y->len ? x->len : y->len));
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static bool build_trie(bd_grammar_vocab *v, char *err, size_t errlen) {
    gtrie *T = &v->trie;
    int32_t V = v->n_vocab, n = 0;
    int64_t total = 0;
    sort_item *ids = malloc((size_t)V * sizeof *ids + 1);
    T->tok_next = malloc((size_t)V * sizeof *T->tok_next + 1);
    if (!ids || !T->tok_next) {
        free(ids);
        return bd_err(err, errlen, "grammar vocabulary: out of memory");
    }
    for (int32_t i = 0; i < V; i++) {
        T->tok_next[i] = -1;
        if (v->len[i] > 0 && !v->is_eog[i]) {
            ids[n++] = (sort_item){v->bytes + v->off[i], v->len[i], i};
            total += v->len[i];
        }
    }
    qsort(ids, (size_t)n, sizeof *ids, cmp_piece);
    T->byte = malloc((size_t)total + 1);
    T->depth = malloc(((size_t)total + 1) * sizeof *T->depth);
    T->end = malloc(((size_t)total + 1) * sizeof *T->end);
    T->tok = malloc(((size_t)total + 1) * sizeof *T->tok);
    int32_t *open = malloc(((size_t)MAX_PIECE + 1) * sizeof *open);
    int32_t *last_tok = malloc(((size_t)total + 1) * sizeof *last_tok);
    if (!T->byte || !T->depth || !T->end || !T->tok || !open || !last_tok) {
        free(ids);
        free(open);
        free(last_tok);
        return bd_err(err, errlen, "grammar vocabulary: out of memory");
    }
    int32_t nn = 0, cur = 0, prev = -1;
    for (int32_t k = 0; k < n; k++) {
        int32_t t = ids[k].id, L = v->len[t];
        const uint8_t *p = v->bytes + v->off[t];
        int32_t lcp = 0;
        if (prev >= 0) {
            const uint8_t *q = v->bytes + v->off[prev];
            int32_t m = v->len[prev] < L ? v->len[prev] : L;
            while (lcp < m && p[lcp] == q[lcp]) lcp++;
        }
        for (int32_t d = cur; d > lcp; d--) T->end[open[d]] = nn; /* close the old path */
        for (int32_t d = lcp + 1; d <= L; d++) {
            T->byte[nn] = p[d - 1];
            T->depth[nn] = (uint16_t)d;
            T->tok[nn] = -1;
            open[d] = nn++;
        }
        cur = L;
        int32_t node = open[L];
        if (T->tok[node] < 0) T->tok[node] = t;
        else T->tok_next[last_tok[node]] = t;
        last_tok[node] = t;
        if (L > T->max_depth) T->max_depth = L;
        prev = t;
    }
    for (int32_t d = cur; d > 0; d--) T->end[open[d]] = nn;
    T->n = nn;
    free(ids);
    free(open);
    free(last_tok);
    return true;
}

static bd_grammar_vocab *vocab_alloc(int32_t n_vocab) {
    bd_grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->n_vocab = n_vocab;
    v->off = calloc((size_t)n_vocab + 1, sizeof *v->off);
    v->len = calloc((size_t)n_vocab + 1, sizeof *v->len);
    v->sp_off = calloc((size_t)n_vocab + 1, sizeof *v->sp_off);
    v->sp_len = calloc((size_t)n_vocab + 1, sizeof *v->sp_len);
    v->is_eog = calloc((size_t)n_vocab + 1, 1);
    if (!v->off || !v->len || !v->sp_off || !v->sp_len || !v->is_eog) {
        bd_grammar_vocab_free(v);
        return NULL;
    }
    return v;
}

static bool vocab_finish(bd_grammar_vocab *v, bbuf *pieces, bbuf *specials, char *err, size_t errlen) {
    v->bytes = pieces->b;
    v->sp_bytes = (char *)specials->b;
    pieces->b = specials->b = NULL;
    v->eog = malloc(((size_t)v->n_eog + 1) * sizeof *v->eog);
    if (!v->eog) return bd_err(err, errlen, "grammar vocabulary: out of memory");
    int32_t k = 0;
    for (int32_t i = 0; i < v->n_vocab; i++)
        if (v->is_eog[i]) v->eog[k++] = i;
    return build_trie(v, err, errlen);
}

bd_grammar_vocab *bd_grammar_vocab_create(const bd_model *m, char *err, size_t errlen) {
    if (!m->tok) {
        bd_err(err, errlen, "grammar vocabulary: the model has no tokenizer");
        return NULL;
    }
    return bd_grammar_vocab_create_from_tokenizer(m->tok, err, errlen);
}

bd_grammar_vocab *bd_grammar_vocab_create_from_tokenizer(const bd_tokenizer *tk, char *err, size_t errlen) {
    int32_t V = bd_tokenizer_n_vocab(tk);
    if (V < 1) {
        bd_err(err, errlen, "grammar vocabulary: the model has no vocabulary");
        return NULL;
    }
    bd_grammar_vocab *v = vocab_alloc(V);
    bbuf pieces = {0}, specials = {0};
    char small[512];
    char *buf = small;
    int bufsize = (int)sizeof small;
    bool any = false;
    if (!v) goto oom;
    for (int32_t i = 0; i < V; i++) {
        for (int pass = 0; pass < 2; pass++) {
            bool special = pass == 1;
            int n = bd_tokenizer_piece(tk, i, buf, bufsize, special);
            if (n < 0) {
                if (-n > MAX_PIECE) {
                    bd_err(err, errlen, "grammar vocabulary: token %d has a piece of %d bytes (limit %d)", i, -n, MAX_PIECE);
                    goto fail;
                }
                char *nb = malloc((size_t)-n);
                if (!nb) goto oom;
                if (buf != small) free(buf);
                buf = nb;
                bufsize = -n;
                n = bd_tokenizer_piece(tk, i, buf, bufsize, special);
                if (n < 0) goto oom;
            }
            if (!special) {
                if (n > MAX_PIECE) {
                    bd_err(err, errlen, "grammar vocabulary: token %d has a piece of %d bytes (limit %d)", i, n, MAX_PIECE);
                    goto fail;
                }
                v->off[i] = pieces.n;
                v->len[i] = n;
                any |= n > 0;
                if (!bbuf_add(&pieces, buf, (size_t)n)) goto oom;
                if (n > 0) break; /* special text only for empty pieces */
            } else {
                v->sp_off[i] = specials.n;
                v->sp_len[i] = n;
                if (!bbuf_add(&specials, buf, (size_t)n)) goto oom;
            }
        }
        if (bd_tokenizer_is_eog(tk, i)) {
            v->is_eog[i] = 1;
            v->n_eog++;
        }
    }
    if (!any) {
        bd_err(err, errlen, "grammar vocabulary: the model has no tokenizer (no token has text)");
        goto fail;
    }
    if (buf != small) free(buf);
    buf = small;
    if (!vocab_finish(v, &pieces, &specials, err, errlen)) goto fail;
    return v;
oom:
    bd_err(err, errlen, "grammar vocabulary: out of memory");
fail:
    if (buf != small) free(buf);
    free(pieces.b);
    free(specials.b);
    bd_grammar_vocab_free(v);
    return NULL;
}

bd_grammar_vocab *bd_grammar_vocab_create_from_pieces(int32_t n_vocab, const char *const *pieces,
                                                      const int32_t *lens, const char *const *specials,
                                                      const int32_t *eog, int32_t n_eog, char *err,
                                                      size_t errlen) {
    if (n_vocab < 1) {
        bd_err(err, errlen, "grammar vocabulary: empty");
        return NULL;
    }
    bd_grammar_vocab *v = vocab_alloc(n_vocab);
    bbuf pb = {0}, sb = {0};
    if (!v) goto oom;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (lens[i] < 0 || lens[i] > MAX_PIECE) {
            bd_err(err, errlen, "grammar vocabulary: token %d has a bad length %d", i, lens[i]);
            goto fail;
        }
        v->off[i] = pb.n;
        v->len[i] = lens[i];
        if (!bbuf_add(&pb, pieces[i], (size_t)lens[i])) goto oom;
        if (lens[i] == 0 && specials && specials[i]) {
            size_t n = strlen(specials[i]);
            v->sp_off[i] = sb.n;
            v->sp_len[i] = (int32_t)n;
            if (!bbuf_add(&sb, specials[i], n)) goto oom;
        }
    }
    for (int32_t i = 0; i < n_eog; i++) {
        if (eog[i] < 0 || eog[i] >= n_vocab) {
            bd_err(err, errlen, "grammar vocabulary: EOG id %d out of range", eog[i]);
            goto fail;
        }
        if (!v->is_eog[eog[i]]) v->n_eog++;
        v->is_eog[eog[i]] = 1;
    }
    if (!vocab_finish(v, &pb, &sb, err, errlen)) goto fail;
    return v;
oom:
    bd_err(err, errlen, "grammar vocabulary: out of memory");
fail:
    free(pb.b);
    free(sb.b);
    bd_grammar_vocab_free(v);
    return NULL;
}

int32_t bd_grammar_vocab_n_vocab(const bd_grammar_vocab *v) { return v->n_vocab; }

bool bd_grammar_vocab_is_eog(const bd_grammar_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_vocab && v->is_eog[id];
}

const uint8_t *bd_grammar_vocab_piece(const bd_grammar_vocab *v, int32_t id, int32_t *len) {
    if (id < 0 || id >= v->n_vocab || v->len[id] == 0) {
        *len = 0;
        return NULL;
    }
    *len = v->len[id];
    return v->bytes + v->off[id];
}

const gtrie *bd_grammar_vocab_trie(const bd_grammar_vocab *v) { return &v->trie; }

const int32_t *bd_grammar_vocab_eog(const bd_grammar_vocab *v, int32_t *n) {
    *n = v->n_eog;
    return v->eog;
}

int64_t bd_grammar_vocab_find_special(const bd_grammar_vocab *v, const char *s, size_t n) {
    int64_t found = -1;
    /* control tokens (empty piece) by their special text first */
    for (int32_t i = 0; i < v->n_vocab; i++) {
        if (v->len[i] == 0 && (size_t)v->sp_len[i] == n && !memcmp(v->sp_bytes + v->sp_off[i], s, n)) {
            if (found >= 0) return -2;
            found = i;
        }
    }
    if (found >= 0) return found;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        if ((size_t)v->len[i] == n && !memcmp(v->bytes + v->off[i], s, n)) {
            if (found >= 0) return -2;
            found = i;
        }
    }
    return found;
}
