/*
 * tok_bpe.c - byte-level BPE (tokenizer.ggml.model = gpt2): the qwen2,
 * qwen35, llama3 and tekken pre-tokenizers, the GPT-2 byte mapping and merging by
 * rank.
 *
 * Pipeline for one fragment of text (special tokens already cut out):
 *   1. decode UTF-8 to code points, broken bytes -> U+FFFD (llama.cpp);
 *   2. split into words with the pre-tokenizer regex, implemented below
 *      as a hand-written matcher over code point classes;
 *   3. re-encode each word to UTF-8 (so U+FFFD becomes EF BF BD and an
 *      overlong "C0 AF" becomes "/"), one symbol per byte;
 *   4. merge adjacent symbols, lowest merge rank first (ties: leftmost),
 *      until no adjacent pair is in the merge table; with ignore_merges
 *      (llama3) a word that is a token as a whole is that token.
 * Symbols carry token ids, so merging never hashes strings.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "unicode.h"

/* ------------------------------------------------------------------------
 * GPT-2 byte mapping
 *
 * Bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF stand for themselves; the other 68
 * bytes (0x00-0x20, 0x7F-0xA0, 0xAD) map in increasing order to U+0100...
 * ---------------------------------------------------------------------- */

uint32_t bd_gpt2_byte_to_cp(uint8_t b) {
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    if (b == 0xAD) return 0x100 + 67;
    return b;
}

int bd_gpt2_cp_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142) return (int)(cp - 0x121 + 0x7F);
    if (cp == 0x143) return 0xAD;
    return -1;
}

/* ------------------------------------------------------------------------
 * Pre-tokenizer
 *
 * qwen2:  (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
 *         |[^\r\n\p{L}\p{N}]?\p{L}+ |\p{N} | ?[^\s\p{L}\p{N}]+[\r\n]*
 *         |\s*[\r\n]+ |\s+(?!\S) |\s+
 * qwen35: the same with \p{M} added to the letter run and to the
 *         exclusions of the punctuation run.
 * llama3: qwen2's with \p{N}{1,3}: digits in runs of up to three.
 * tekken (Mistral), as llama.cpp v0.5.0 rewrites and runs it (std::regex
 * over the text collapsed to a byte per code point, where every non-ASCII
 * letter is one byte that is neither a-z nor A-Z):
 *         [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+
 *         |[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*
 *         |\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *         so a word is upper-case letters then lower-case ones
 *         ("HelloWorld" -> "Hello" "World", "helloWORLD" -> "hello"
 *         "WORLD", "HTTPServer" one word), every digit is a word, and marks
 *         count as punctuation (the tokenizer.json's \p{M} in the letter
 *         runs is lost in that rewrite).
 * At each position the alternatives are tried in order with the usual
 * backtracking semantics; every code point is matched by some alternative,
 * so there are never unmatched gaps between words.
 * ---------------------------------------------------------------------- */

static uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* Returns the end of the word that starts at i (> i). */
static size_t pretok_match(bool marks, size_t max_digits, const uint32_t *cp, const uint8_t *cls, size_t n,
                           size_t i) {
#define IS_W(k) (cls[k] == BD_UCLASS_LETTER || (marks && cls[k] == BD_UCLASS_MARK))
#define IS_P(k) (cls[k] != BD_UCLASS_WS && cls[k] != BD_UCLASS_LETTER && cls[k] != BD_UCLASS_NUMBER && \
                 !(marks && cls[k] == BD_UCLASS_MARK))
#define IS_CRLF(k) (cp[k] == '\r' || cp[k] == '\n')
    const uint32_t c = cp[i];

    // 1. English contractions, ASCII case-insensitive.
    if (c == '\'' && i + 1 < n) {
        uint32_t a = ascii_lower(cp[i + 1]);
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if (i + 2 < n) {
            uint32_t b = ascii_lower(cp[i + 2]);
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
        }
    }

    // 2. [^\r\n\p{L}\p{N}]?W+ : one optional lead (not CR/LF/letter/number;
    //    a mark qualifies in both variants), then a run of W.
    if (!IS_CRLF(i) && cls[i] != BD_UCLASS_LETTER && cls[i] != BD_UCLASS_NUMBER && i + 1 < n &&
        IS_W(i + 1)) {
        size_t j = i + 1;
        while (j < n && IS_W(j)) j++;
        return j;
    }
    if (IS_W(i)) {
        size_t j = i;
        while (j < n && IS_W(j)) j++;
        return j;
    }

    // 3. \p{N} (llama3: \p{N}{1,3}): number characters, max_digits at
    //    most (greedy, so a run of seven splits 3 + 3 + 1).
    if (cls[i] == BD_UCLASS_NUMBER) {
        size_t j = i + 1;
        while (j < n && j - i < max_digits && cls[j] == BD_UCLASS_NUMBER) j++;
        return j;
    }

    // 4. ' ?P+[\r\n]*' where P excludes white space, letters, numbers
    //    (and marks for qwen35).
    {
        size_t j = i;
        if (c == ' ' && i + 1 < n && IS_P(i + 1)) j = i + 1;
        if (IS_P(j)) {
            while (j < n && IS_P(j)) j++;
            while (j < n && IS_CRLF(j)) j++;
            return j;
        }
    }

    // What is left starts with white space.
    size_t j = i;
    while (j < n && cls[j] == BD_UCLASS_WS) j++;
    if (j == i) return i + 1; // not reachable: every class is handled above

    // 5. \s*[\r\n]+ : \s* backs off to the last CR/LF of the run.
    for (size_t k = j; k > i; k--)
        if (IS_CRLF(k - 1)) return k;

    // 6. \s+(?!\S) : the whole run at the end of the text, else all but
    //    the last white space character (which then leads the next word).
    if (j == n) return j;
    if (j - i >= 2) return j - 1;

    // 7. \s+
    return j;
#undef IS_W
#undef IS_P
#undef IS_CRLF
}

/* tekken's word at i (> i): the letter alternatives here, the rest as
 * pretok_match's (no contractions there, no marks in letter runs). Up: a
 * letter other than a-z; lo: a letter other than A-Z (a non-ASCII letter
 * is both). */
static size_t tekken_match(const uint32_t *cp, const uint8_t *cls, size_t n, size_t i) {
#define IS_L(k) (cls[k] == BD_UCLASS_LETTER)
#define IS_UP(k) (IS_L(k) && !(cp[k] >= 'a' && cp[k] <= 'z'))
#define IS_LO(k) (IS_L(k) && !(cp[k] >= 'A' && cp[k] <= 'Z'))
    /* the optional lead: not CR/LF/letter/number (greedy; without it the
     * letter alternatives cannot match at a non-letter) */
    const size_t p = !IS_L(i) && cls[i] != BD_UCLASS_NUMBER && cp[i] != '\r' && cp[i] != '\n' ? i + 1 : i;
    size_t u = p;
    while (u < n && IS_UP(u)) u++;
    /* 1. up* lo+: up* backs off to the last position where lo+ can start
     *    (the first after the run if it is a-z, else a non-ASCII letter in
     *    the run), then lo+ runs as far as it goes */
    for (size_t k = u + 1; k-- > p;)
        if (k < n && IS_LO(k)) {
            size_t e = k;
            while (e < n && IS_LO(e)) e++;
            return e;
        }
    /* 2. up+ lo*: the run (lo* is empty here, or 1 would have matched) */
    if (u > p) return u;
#undef IS_L
#undef IS_UP
#undef IS_LO
    /* 3. \p{N}, 4. ' ?[^\s\p{L}\p{N}]+[\r\n/]*' (marks are not letters
     *    here; '/' is punctuation, so the tail adds CR/LF only), 5-7 the
     *    white space alternatives: pretok_match's with single digits, its
     *    contractions unreachable (an apostrophe then a letter is a lead
     *    and a word above) */
    return pretok_match(false, 1, cp, cls, n, i);
}

size_t bd_pretok_split(int pre, const uint32_t *cps, const uint8_t *cls, size_t n, size_t *ends) {
    const bool marks = pre == BD_PRE_QWEN35;
    const size_t max_digits = pre == BD_PRE_LLAMA3 ? 3 : 1;
    size_t nw = 0;
    for (size_t i = 0; i < n;) {
        size_t j = pre == BD_PRE_TEKKEN ? tekken_match(cps, cls, n, i) : pretok_match(marks, max_digits, cps, cls, n, i);
        ends[nw++] = j;
        i = j;
    }
    return nw;
}

/* ------------------------------------------------------------------------
 * Merging
 * ---------------------------------------------------------------------- */

typedef struct sym {
    int32_t id;    /* token id of the symbol's bytes, -1 if none */
    int32_t start; /* byte offset in the word */
    int32_t n;     /* bytes; 0 once merged into its left neighbour */
    int32_t prev, next;
} sym;

typedef struct bigram {
    int32_t rank;
    int32_t left, right;
    int32_t size;   /* left.n + right.n when queued; a mismatch later means stale */
    int32_t result;
} bigram;

/* Min-heap order: lower rank first, then the leftmost pair. */
static bool bigram_before(const bigram *a, const bigram *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
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

static const bd_merge *merge_find(const bd_tokenizer *t, int32_t l, int32_t r) {
    if (!t->merges || l < 0 || r < 0) return NULL;
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & t->merge_mask;
    for (;;) {
        const bd_merge *m = &t->merges[h];
        if (m->key == key) return m;
        if (m->key == UINT64_MAX) return NULL;
        h = (h + 1) & t->merge_mask;
    }
}

static void try_bigram(const bd_tokenizer *t, sym *s, int32_t l, int32_t r, bigram *h, size_t *nh) {
    if (l < 0 || r < 0) return;
    const bd_merge *m = merge_find(t, s[l].id, s[r].id);
    if (!m) return;
    bigram b = {m->rank, l, r, s[l].n + s[r].n, m->result};
    heap_push(h, nh, b);
}

/* Symbols whose bytes are no token (a byte whose mapped character is not
 * in the vocabulary): llama.cpp then looks up each byte of the mapped
 * text as a one-byte token and emits those it finds. */
static void emit_fallback(const bd_tokenizer *t, const uint8_t *w, const sym *s, bd_ids *out) {
    for (int32_t k = 0; k < s->n; k++) {
        uint8_t mapped[4];
        int ml = bd_utf8_encode(bd_gpt2_byte_to_cp(w[s->start + k]), mapped);
        for (int q = 0; q < ml; q++) {
            int32_t id = bd_tok_find(t, (const char *)&mapped[q], 1);
            if (id >= 0) bd_ids_push(out, id);
        }
    }
}

/* The token whose text is word w[0..n) in the GPT-2 byte mapping, or -1.
 * m is scratch of 2n bytes (a mapped byte is one or two UTF-8 bytes). */
static int32_t whole_word_token(const bd_tokenizer *t, const uint8_t *w, int32_t n, uint8_t *m) {
    size_t ml = 0;
    for (int32_t i = 0; i < n; i++) ml += (size_t)bd_utf8_encode(bd_gpt2_byte_to_cp(w[i]), m + ml);
    return bd_tok_find(t, (const char *)m, ml);
}

/* Merge one word (raw bytes w[0..n)) and append its tokens. s, h and m are
 * scratch with room for n symbols, 3n bigrams and 2n bytes. */
static void bpe_word(const bd_tokenizer *t, const uint8_t *w, int32_t n, sym *s, bigram *h, uint8_t *m,
                     bd_ids *out) {
    if (t->ignore_merges) {
        int32_t id = whole_word_token(t, w, n, m);
        if (id >= 0) {
            bd_ids_push(out, id);
            return;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        s[i].id = t->byte_tok[w[i]];
        s[i].start = i;
        s[i].n = 1;
        s[i].prev = i - 1;
        s[i].next = i + 1 < n ? i + 1 : -1;
    }
    size_t nh = 0;
    for (int32_t i = 1; i < n; i++) try_bigram(t, s, i - 1, i, h, &nh);

    while (nh > 0) {
        bigram b = heap_pop(h, &nh);
        sym *l = &s[b.left], *r = &s[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; // outdated
        l->n += r->n;
        l->id = b.result;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = b.left;
        try_bigram(t, s, l->prev, b.left, h, &nh);
        try_bigram(t, s, b.left, l->next, h, &nh);
    }

    for (int32_t i = 0; i >= 0 && i < n; i = s[i].next) {
        if (s[i].id >= 0) bd_ids_push(out, s[i].id);
        else emit_fallback(t, w, &s[i], out);
    }
}

void bd_tok_bpe_fragment(const bd_tokenizer *t, const uint8_t *s, size_t n, bd_ids *out) {
    if (n == 0 || !out->ok) return;
    // Each input byte yields at most one code point and 3 re-encoded bytes.
    if (n > (size_t)INT32_MAX / 4) {
        out->ok = false;
        return;
    }
    uint32_t *cps = malloc(n * sizeof *cps);
    uint8_t *cls = malloc(n);
    size_t *cp_off = malloc((n + 1) * sizeof *cp_off); // byte offset of code point i in norm
    size_t *ends = malloc(n * sizeof *ends);
    uint8_t *norm = malloc(3 * n);
    sym *syms = NULL;
    bigram *heap = NULL;
    uint8_t *mapped = NULL;
    if (!cps || !cls || !cp_off || !ends || !norm) {
        out->ok = false;
        goto done;
    }

    size_t ncp = 0, nb = 0;
    for (size_t i = 0; i < n;) {
        int used;
        uint32_t c = bd_utf8_decode(s + i, n - i, &used);
        i += (size_t)used;
        cps[ncp] = c;
        cls[ncp] = (uint8_t)bd_unicode_class(c);
        cp_off[ncp++] = nb;
        nb += (size_t)bd_utf8_encode(c, norm + nb);
    }
    cp_off[ncp] = nb;

    size_t nw = bd_pretok_split(t->pre, cps, cls, ncp, ends);

    // Scratch for the longest word: its symbols, and the bigram heap (the
    // initial pairs plus at most two per merge).
    size_t longest = 0;
    for (size_t w = 0, a = 0; w < nw; a = ends[w++])
        if (cp_off[ends[w]] - cp_off[a] > longest) longest = cp_off[ends[w]] - cp_off[a];
    syms = malloc(longest * sizeof *syms);
    heap = malloc(3 * longest * sizeof *heap);
    mapped = malloc(2 * longest);
    if (!syms || !heap || !mapped) {
        out->ok = false;
        goto done;
    }

    size_t a = 0;
    for (size_t w = 0; w < nw; w++) {
        size_t b = ends[w];
        bpe_word(t, norm + cp_off[a], (int32_t)(cp_off[b] - cp_off[a]), syms, heap, mapped, out);
        a = b;
    }
done:
    free(cps);
    free(cls);
    free(cp_off);
    free(ends);
    free(norm);
    free(syms);
    free(heap);
    free(mapped);
}
