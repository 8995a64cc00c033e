/*
 * tok_spm.c - SentencePiece-style BPE (tokenizer.ggml.model = llama).
 *
 * The caller has replaced spaces with U+2581 and added the prefix. Start
 * from single UTF-8 characters; repeatedly merge the adjacent pair whose
 * concatenation is a vocabulary token with the highest score (ties: the
 * leftmost pair); a final symbol that is no token becomes its <0xXX> byte
 * tokens. Same algorithm and tie-breaking as llama.cpp's SPM session.
 */
#include <stdlib.h>

#include "tok_internal.h"
#include "unicode.h"

typedef struct sym {
    int32_t start, n; /* bytes of the fragment; n = 0 once merged away */
    int32_t prev, next;
} sym;

typedef struct bigram {
    float score;
    int32_t left, right;
    int32_t size; /* left.n + right.n when queued */
} bigram;

/* Max-heap order: higher score first, then the leftmost pair. */
static bool bigram_before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(bigram *h, size_t *n, bigram b) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_before(&b, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = b;
}

static bigram heap_pop(bigram *h, size_t *n) {
    bigram top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && bigram_before(&h[c + 1], &h[c])) c++;
        if (!bigram_before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static void try_bigram(const bd_tokenizer *t, const uint8_t *s, const sym *y, int32_t l, int32_t r,
                       bigram *h, size_t *nh) {
    if (l < 0 || r < 0) return;
    int32_t size = y[l].n + y[r].n;
    int32_t id = bd_tok_find(t, (const char *)s + y[l].start, (size_t)size);
    if (id < 0) return;
    bigram b = {t->scores[id], l, r, size};
    heap_push(h, nh, b);
}

static void emit_bytes(const bd_tokenizer *t, const uint8_t *s, int32_t n, bd_ids *out) {
    for (int32_t k = 0; k < n; k++) {
        int32_t id = t->spm_byte[s[k]];
        if (id < 0) id = bd_tok_find(t, (const char *)&s[k], 1);
        if (id < 0) id = t->unk; // llama.cpp would throw here
        if (id >= 0) bd_ids_push(out, id);
    }
}

void bd_tok_spm_fragment(const bd_tokenizer *t, const uint8_t *s, size_t n, bd_ids *out) {
    if (n == 0 || !out->ok) return;
    if (n > (size_t)INT32_MAX / 4) {
        out->ok = false;
        return;
    }
    sym *y = malloc(n * sizeof *y);
    bigram *h = malloc(3 * n * sizeof *h);
    if (!y || !h) {
        out->ok = false;
        goto done;
    }

    int32_t ns = 0;
    for (size_t off = 0; off < n;) {
        size_t len = (size_t)bd_utf8_len(s[off]);
        if (len > n - off) len = n - off;
        y[ns].start = (int32_t)off;
        y[ns].n = (int32_t)len;
        y[ns].prev = ns - 1;
        off += len;
        y[ns].next = off < n ? ns + 1 : -1;
        ns++;
    }

    size_t nh = 0;
    for (int32_t i = 1; i < ns; i++) try_bigram(t, s, y, i - 1, i, h, &nh);
    while (nh > 0) {
        bigram b = heap_pop(h, &nh);
        sym *l = &y[b.left], *r = &y[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; // outdated
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) y[r->next].prev = b.left;
        try_bigram(t, s, y, l->prev, b.left, h, &nh);
        try_bigram(t, s, y, b.left, l->next, h, &nh);
    }

    for (int32_t i = 0; i >= 0 && i < ns; i = y[i].next) {
        int32_t id = bd_tok_find(t, (const char *)s + y[i].start, (size_t)y[i].n);
        if (id >= 0) bd_ids_push(out, id);
        else emit_bytes(t, s + y[i].start, y[i].n, out);
    }
done:
    free(y);
    free(h);
}
