/*
 * grammar_match.c - the GBNF matcher: stacks, stack sets, transitions and
 * the vocabulary mask. See grammar.h for the model and grammar.c for the
 * compiled form.
 *
 * A stack is a chain of nodes (element to match next, rest of the stack);
 * nodes are hash-consed, so equal stacks are equal ids and a set of stacks
 * is a sorted id array, interned too. Every stack in a set has a terminal
 * on top (a class or a token element) or is empty (the root is done):
 * expansion replaces a rule reference on top by each alternative of the
 * rule, with the element after the reference (if any) pushed below it. An
 * alternative that ends pops back to the rest, so right recursion and
 * repetitions (R ::= x R | ) keep the stack depth constant. Without left
 * recursion (refused at parse time) expansion terminates; its size is
 * bounded by BD_GRAMMAR_MAX_STACKS and G_WORK_CAP anyway.
 *
 * Bytes: a state carries a pending partial UTF-8 character; a lead or
 * continuation byte is taken only if some class on top can still match a
 * character starting with those bytes (exactly: overlong forms, surrogates
 * and values above U+10FFFF are never completed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "grammar_int.h"

#define U8_VAL(u) ((u) & 0x1FFFFFu)
#define U8_REM(u) (((u) >> 24) & 3u)
#define U8_TOT(u) (((u) >> 28) & 7u)
#define U8_MAKE(v, r, t) ((uint32_t)(v) | (uint32_t)(r) << 24 | (uint32_t)(t) << 28)

static const uint32_t u8_lo[5] = {0, 0, 0x80, 0x800, 0x10000};
static const uint32_t u8_hi[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

static bool gerr(bd_grammar *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool gerr(bd_grammar *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(g->err, sizeof g->err, "grammar: ");
    vsnprintf(g->err + n, sizeof g->err - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

const char *bd_grammar_error(const bd_grammar *g) { return g->err; }

/* ------------------------------------------------------------------------
 * Allocation
 *
 * The fixed-capacity tables are anonymous mappings: zero pages that the
 * kernel commits only when touched, so a small grammar costs little
 * memory whatever the limits are. (calloc would do the same only while
 * glibc serves the size by mmap; after large frees its dynamic threshold
 * moves such sizes to the heap, where calloc must clear every page.)
 * ---------------------------------------------------------------------- */

static void *big_zalloc(size_t n) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void big_free(void *p, size_t n) {
    if (p) munmap(p, n);
}

#define NODES_BYTES ((size_t)BD_GRAMMAR_MAX_NODES * sizeof(gnode))
#define NODE_HASH_BYTES (2 * (size_t)BD_GRAMMAR_MAX_NODES * sizeof(int32_t))
#define SETS_BYTES ((size_t)BD_GRAMMAR_MAX_STATES * sizeof(gset))
#define SET_HASH_BYTES (2 * (size_t)BD_GRAMMAR_MAX_STATES * sizeof(int32_t))
#define POOL_BYTES ((size_t)BD_GRAMMAR_MAX_POOL * sizeof(int32_t))
#define ROW_OF_BYTES ((size_t)BD_GRAMMAR_MAX_STATES * sizeof(int32_t))
#define ROWS_BYTES ((size_t)G_ROW_CAP * 128 * sizeof(int32_t))
#define MARK_BYTES ((size_t)BD_GRAMMAR_MAX_NODES * sizeof(uint32_t))

bd_grammar *bd_grammar_alloc(int32_t n_rules, int64_t n_elems, int32_t n_cls, int64_t n_ranges,
                          const bd_grammar_vocab *v, char *err, size_t errlen) {
    bd_grammar *g = calloc(1, sizeof *g);
    if (!g) {
        bd_err(err, errlen, "grammar: out of memory");
        return NULL;
    }
    g->vocab = v;
    g->n_rules = n_rules;
    g->n_elems = (int32_t)n_elems;
    g->n_cls = n_cls;
    int32_t max_depth = v ? bd_grammar_vocab_trie(v)->max_depth : 0;
    g->elems = malloc((size_t)(n_elems + 1) * sizeof *g->elems);
    g->rule_start = malloc((size_t)(n_rules + 1) * sizeof *g->rule_start);
    g->alt_off = malloc((size_t)(n_rules + 1) * sizeof *g->alt_off);
    g->alts = malloc((size_t)(n_elems + 1) * sizeof *g->alts);
    g->cls = calloc((size_t)n_cls + 1, sizeof *g->cls);
    g->ranges = malloc((size_t)(2 * n_ranges + 2) * sizeof *g->ranges);
    g->nodes = big_zalloc(NODES_BYTES);
    g->node_hash = big_zalloc(NODE_HASH_BYTES);
    g->node_mask = 2 * BD_GRAMMAR_MAX_NODES - 1;
    g->sets = big_zalloc(SETS_BYTES);
    g->set_hash = big_zalloc(SET_HASH_BYTES);
    g->set_mask = 2 * BD_GRAMMAR_MAX_STATES - 1;
    g->pool = big_zalloc(POOL_BYTES);
    g->row_of = big_zalloc(ROW_OF_BYTES);
    g->rows = big_zalloc(ROWS_BYTES);
    g->row_owner = calloc(G_ROW_CAP, sizeof *g->row_owner);
    g->mark = big_zalloc(MARK_BYTES);
    g->work = malloc(G_WORK_CAP * sizeof *g->work);
    g->out = malloc(BD_GRAMMAR_MAX_STACKS * sizeof *g->out);
    g->dfs_set = malloc((size_t)(max_depth + 1) * sizeof *g->dfs_set);
    g->dfs_utf8 = malloc((size_t)(max_depth + 1) * sizeof *g->dfs_utf8);
    if (!g->elems || !g->rule_start || !g->alt_off || !g->alts || !g->cls || !g->ranges || !g->nodes ||
        !g->node_hash || !g->sets || !g->set_hash || !g->pool || !g->row_of || !g->rows || !g->row_owner ||
        !g->mark || !g->work || !g->out || !g->dfs_set || !g->dfs_utf8) {
        bd_grammar_free(g);
        bd_err(err, errlen, "grammar: out of memory");
        return NULL;
    }
    return g;
}

void bd_grammar_free(bd_grammar *g) {
    if (!g) return;
    free(g->elems);
    free(g->rule_start);
    free(g->alt_off);
    free(g->alts);
    free(g->cls);
    free(g->ranges);
    big_free(g->nodes, NODES_BYTES);
    big_free(g->node_hash, NODE_HASH_BYTES);
    big_free(g->sets, SETS_BYTES);
    big_free(g->set_hash, SET_HASH_BYTES);
    big_free(g->pool, POOL_BYTES);
    big_free(g->row_of, ROW_OF_BYTES);
    big_free(g->rows, ROWS_BYTES);
    free(g->row_owner);
    big_free(g->mark, MARK_BYTES);
    free(g->work);
    free(g->out);
    free(g->dfs_set);
    free(g->dfs_utf8);
    free(g);
}

/* ------------------------------------------------------------------------
 * Classes
 * ---------------------------------------------------------------------- */

static inline bool class_match(const bd_grammar *g, const gclass *c, uint32_t cp) {
    if (cp < 128) return c->ascii[cp >> 5] >> (cp & 31) & 1;
    const uint32_t *r = g->ranges + 2 * c->off;
    int32_t lo = 0, hi = c->n - 1;
    while (lo <= hi) { /* binary search over sorted disjoint ranges */
        int32_t mid = (lo + hi) / 2;
        if (cp < r[2 * mid]) hi = mid - 1;
        else if (cp > r[2 * mid + 1]) lo = mid + 1;
        else return true;
    }
    return false;
}

/* Narrow [*lo, *hi] (which holds cp) to where membership in c is the
 * same as for cp. */
static void class_interval(const bd_grammar *g, const gclass *c, uint32_t cp, uint32_t *lo, uint32_t *hi) {
    const uint32_t *r = g->ranges + 2 * c->off;
    int32_t a = 0, b = c->n - 1;
    while (a <= b) {
        int32_t mid = (a + b) / 2;
        if (cp < r[2 * mid]) b = mid - 1;
        else if (cp > r[2 * mid + 1]) a = mid + 1;
        else { /* inside range mid */
            if (r[2 * mid] > *lo) *lo = r[2 * mid];
            if (r[2 * mid + 1] < *hi) *hi = r[2 * mid + 1];
            return;
        }
    }
    /* in the gap between range b (or nothing) and range a (or nothing) */
    if (b >= 0 && r[2 * b + 1] + 1 > *lo) *lo = r[2 * b + 1] + 1;
    if (a < c->n && r[2 * a] - 1 < *hi) *hi = r[2 * a] - 1;
}

/* Does the class hold a valid scalar value (not a surrogate) in [lo, hi]? */
static bool class_meets(const bd_grammar *g, const gclass *c, uint32_t lo, uint32_t hi) {
    const uint32_t *r = g->ranges + 2 * c->off;
    for (int32_t i = 0; i < c->n; i++) {
        uint32_t a = r[2 * i] > lo ? r[2 * i] : lo, b = r[2 * i + 1] < hi ? r[2 * i + 1] : hi;
        if (a > b) continue;
        if (!(a >= 0xD800 && b <= 0xDFFF)) return true;
    }
    return false;
}

/* ------------------------------------------------------------------------
 * Nodes and sets
 * ---------------------------------------------------------------------- */

static void new_epoch(bd_grammar *g) {
    if (++g->epoch == 0) {
        memset(g->mark, 0, (size_t)g->n_nodes * sizeof *g->mark);
        g->epoch = 1;
    }
}

static int32_t node_get(bd_grammar *g, int32_t pos, int32_t parent) {
    uint32_t h = ((uint32_t)pos * 0x9E3779B1u ^ (uint32_t)parent * 0x85EBCA77u) & g->node_mask;
    for (;; h = (h + 1) & g->node_mask) {
        int32_t id = g->node_hash[h] - 1;
        if (id < 0) break;
        if (g->nodes[id].pos == pos && g->nodes[id].parent == parent) return id;
    }
    if (g->n_nodes >= BD_GRAMMAR_MAX_NODES) {
        gerr(g, "more than %d stack nodes (limit): the grammar nests or branches too much", BD_GRAMMAR_MAX_NODES);
        return -1;
    }
    int32_t id = g->n_nodes++;
    g->nodes[id].pos = pos;
    g->nodes[id].parent = parent;
    g->node_hash[h] = id + 1;
    return id;
}

static bool out_add(bd_grammar *g, int32_t y) {
    if (g->n_out >= BD_GRAMMAR_MAX_STACKS)
        return gerr(g, "more than %d parallel parses (limit): the grammar is too ambiguous", BD_GRAMMAR_MAX_STACKS);
    g->out[g->n_out++] = y;
    return true;
}

/* Add the terminal-topped stacks reachable from stack x to g->out (nodes
 * already visited in this epoch are skipped). */
static bool expand(bd_grammar *g, int32_t x) {
    int32_t nw = 0;
    g->work[nw++] = x;
    while (nw > 0) {
        int32_t y = g->work[--nw];
        if (g->mark[y] == g->epoch) continue;
        g->mark[y] = g->epoch;
        if (y == 0) {
            if (!out_add(g, 0)) return false;
            continue;
        }
        int32_t pos = g->nodes[y].pos;
        uint32_t el = g->elems[pos];
        if (EL_TYPE(el) != E_REF) {
            if (!out_add(g, y)) return false;
            continue;
        }
        int32_t rest = g->nodes[y].parent;
        if (!EL_IS_END(g->elems[pos + 1])) {
            rest = node_get(g, pos + 1, rest);
            if (rest < 0) return false;
        }
        uint32_t r = EL_VAL(el);
        for (int32_t a = g->alt_off[r]; a < g->alt_off[r + 1]; a++) {
            int32_t st = g->alts[a], z = rest;
            if (!EL_IS_END(g->elems[st])) {
                z = node_get(g, st, rest);
                if (z < 0) return false;
            }
            if (nw >= G_WORK_CAP)
                return gerr(g, "expansion needs more than %d steps (limit): the grammar is too ambiguous", G_WORK_CAP);
            g->work[nw++] = z;
        }
    }
    return true;
}

/* In-place sort without allocation (glibc's qsort may malloc): insertion
 * sort for short arrays, heapsort otherwise. */
static void sort_i32(int32_t *o, int32_t n) {
    if (n < 24) {
        for (int32_t i = 1; i < n; i++) {
            int32_t v = o[i], j = i;
            while (j > 0 && o[j - 1] > v) o[j] = o[j - 1], j--;
            o[j] = v;
        }
        return;
    }
    for (int32_t end = n;;) {
        if (end == n) { /* first pass: build the heap */
            for (int32_t start = n / 2 - 1; start >= 0; start--) {
                int32_t r = start, v = o[r];
                for (int32_t c; (c = 2 * r + 1) < n; r = c) {
                    if (c + 1 < n && o[c + 1] > o[c]) c++;
                    if (o[c] <= v) break;
                    o[r] = o[c];
                }
                o[r] = v;
            }
        }
        if (--end <= 0) break; /* then move the max to the end, sift down */
        int32_t v = o[end];
        o[end] = o[0];
        int32_t r = 0;
        for (int32_t c; (c = 2 * r + 1) < end; r = c) {
            if (c + 1 < end && o[c + 1] > o[c]) c++;
            if (o[c] <= v) break;
            o[r] = o[c];
        }
        o[r] = v;
    }
}

/* Intern g->out as a set; returns its id, BD_GRAMMAR_DEAD if empty. */
static int32_t intern(bd_grammar *g) {
    int32_t n = g->n_out;
    int32_t *o = g->out;
    if (n == 0) return BD_GRAMMAR_DEAD;
    sort_i32(o, n);
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < n; i++) h = (h ^ (uint32_t)o[i]) * 16777619u;
    h &= g->set_mask;
    for (;; h = (h + 1) & g->set_mask) {
        int32_t id = g->set_hash[h] - 1;
        if (id < 0) break;
        const gset *s = &g->sets[id];
        if (s->n == n && !memcmp(g->pool + s->off, o, (size_t)n * sizeof *o)) return id;
    }
    if (g->n_sets >= BD_GRAMMAR_MAX_STATES) {
        gerr(g, "more than %d distinct states (limit)", BD_GRAMMAR_MAX_STATES);
        return BD_GRAMMAR_ERROR;
    }
    if (g->n_pool + n > BD_GRAMMAR_MAX_POOL) {
        gerr(g, "the states hold more than %d stacks together (limit)", BD_GRAMMAR_MAX_POOL);
        return BD_GRAMMAR_ERROR;
    }
    int32_t id = g->n_sets++;
    gset *s = &g->sets[id];
    s->off = (int32_t)g->n_pool;
    s->n = n;
    memcpy(g->pool + g->n_pool, o, (size_t)n * sizeof *o);
    g->n_pool += n;
    s->complete = o[0] == 0;
    for (int32_t i = 0; i < n; i++) {
        if (o[i] == 0) continue;
        uint32_t el = g->elems[g->nodes[o[i]].pos];
        if (EL_TYPE(el) == E_CLASS) {
            s->has_cls = 1;
            const gclass *c = &g->cls[EL_VAL(el)];
            uint32_t lo = 0x80, hi = 0x10FFFF;
            class_interval(g, c, 0x80, &lo, &hi);
            if (lo == 0x80 && hi == 0x10FFFF && class_match(g, c, 0x80)) s->all_high = 1;
        } else {
            s->has_tok = 1;
        }
    }
    g->set_hash[h] = id + 1;
    return id;
}

/* Pop the terminal on top of stack y and expand what follows. */
static bool pop_expand(bd_grammar *g, int32_t y) {
    int32_t pos = g->nodes[y].pos, next = g->nodes[y].parent;
    if (!EL_IS_END(g->elems[pos + 1])) {
        next = node_get(g, pos + 1, next);
        if (next < 0) return false;
    }
    return expand(g, next);
}

/* The set after reading code point cp. */
static int32_t advance_cp(bd_grammar *g, int32_t set, uint32_t cp) {
    new_epoch(g);
    g->n_out = 0;
    const gset *s = &g->sets[set];
    const int32_t *st = g->pool + s->off;
    for (int32_t i = 0; i < s->n; i++) {
        int32_t y = st[i];
        if (y == 0) continue;
        uint32_t el = g->elems[g->nodes[y].pos];
        if (EL_TYPE(el) != E_CLASS || !class_match(g, &g->cls[EL_VAL(el)], cp)) continue;
        if (!pop_expand(g, y)) return BD_GRAMMAR_ERROR;
    }
    return intern(g);
}

/* ------------------------------------------------------------------------
 * Transitions (cached)
 * ---------------------------------------------------------------------- */

static void rows_flush(bd_grammar *g) {
    for (int32_t r = 0; r < g->n_rows; r++) g->row_of[g->row_owner[r]] = 0;
    g->n_rows = 0;
    g->n_flushes++;
}

static int32_t trans_cp_slow(bd_grammar *g, int32_t set, uint32_t cp) {
    if (cp < 128) {
        int32_t next = advance_cp(g, set, cp);
        if (next == BD_GRAMMAR_ERROR) return next;
        int32_t row = g->row_of[set] - 1;
        if (row < 0) {
            if (g->n_rows == G_ROW_CAP) rows_flush(g);
            row = g->n_rows++;
            g->row_owner[row] = set;
            g->row_of[set] = row + 1;
            memset(g->rows + (size_t)row * 128, 0, 128 * sizeof *g->rows);
        }
        g->rows[(size_t)row * 128 + cp] = next + 2;
        return next;
    }
    gset *S = &g->sets[set];
    for (int i = 0; i < G_IVAL; i++)
        if (S->iv_next[i] && cp >= S->iv_lo[i] && cp <= S->iv_hi[i]) return S->iv_next[i] - 2;
    uint32_t lo = 0x80, hi = 0x10FFFF;
    const int32_t *st = g->pool + S->off;
    for (int32_t i = 0; i < S->n; i++) {
        if (st[i] == 0) continue;
        uint32_t el = g->elems[g->nodes[st[i]].pos];
        if (EL_TYPE(el) == E_CLASS) class_interval(g, &g->cls[EL_VAL(el)], cp, &lo, &hi);
    }
    int32_t next = advance_cp(g, set, cp);
    if (next == BD_GRAMMAR_ERROR) return next;
    int k = S->iv_next_slot;
    S->iv_next_slot = (uint8_t)((k + 1) % G_IVAL);
    S->iv_lo[k] = lo;
    S->iv_hi[k] = hi;
    S->iv_next[k] = next + 2;
    return next;
}

static inline int32_t trans_cp(bd_grammar *g, int32_t set, uint32_t cp) {
    if (cp < 128) {
        int32_t row = g->row_of[set] - 1;
        if (row >= 0) {
            int32_t v = g->rows[(size_t)row * 128 + cp];
            if (v) return v - 2;
        }
    }
    return trans_cp_slow(g, set, cp);
}

/* Could some class on top of the set match a character that starts with
 * the partial sequence u? */
static bool partial_viable(const bd_grammar *g, int32_t set, uint32_t u) {
    uint32_t rem = U8_REM(u), tot = U8_TOT(u);
    uint32_t lo = U8_VAL(u) << (6 * rem), hi = lo | ((1u << (6 * rem)) - 1);
    if (lo < u8_lo[tot]) lo = u8_lo[tot];
    if (hi > u8_hi[tot]) hi = u8_hi[tot];
    if (lo > hi) return false;
    if (lo >= 0xD800 && hi <= 0xDFFF) return false;
    const gset *s = &g->sets[set];
    if (s->all_high) return true;
    const int32_t *st = g->pool + s->off;
    for (int32_t i = 0; i < s->n; i++) {
        if (st[i] == 0) continue;
        uint32_t el = g->elems[g->nodes[st[i]].pos];
        if (EL_TYPE(el) == E_CLASS && class_meets(g, &g->cls[EL_VAL(el)], lo, hi)) return true;
    }
    return false;
}

static inline bd_grammar_state gstate(int32_t id, uint32_t u) {
    bd_grammar_state s = {id, u};
    return s;
}

/* One byte. */
static inline bd_grammar_state step(bd_grammar *g, bd_grammar_state s, uint8_t b) {
    uint32_t u = s.utf8;
    if (U8_REM(u) == 0) {
        if (b < 0x80) return gstate(trans_cp(g, s.id, b), 0);
        uint32_t tot = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xC2 && b <= 0xDF ? 2 : 0;
        if (!tot) return gstate(BD_GRAMMAR_DEAD, 0);
        u = U8_MAKE(b & (0x7Fu >> tot), tot - 1, tot);
    } else {
        if ((b & 0xC0) != 0x80) return gstate(BD_GRAMMAR_DEAD, 0);
        uint32_t val = U8_VAL(u) << 6 | (b & 0x3Fu), rem = U8_REM(u) - 1, tot = U8_TOT(u);
        if (rem == 0) {
            if (val < u8_lo[tot] || val > u8_hi[tot] || (val >= 0xD800 && val <= 0xDFFF))
                return gstate(BD_GRAMMAR_DEAD, 0);
            return gstate(trans_cp(g, s.id, val), 0);
        }
        u = U8_MAKE(val, rem, tot);
    }
    if (!partial_viable(g, s.id, u)) return gstate(BD_GRAMMAR_DEAD, 0);
    return gstate(s.id, u);
}

/* ------------------------------------------------------------------------
 * Public matcher
 * ---------------------------------------------------------------------- */

bool bd_grammar_init_matcher(bd_grammar *g, char *err, size_t errlen) {
    /* alternatives of every rule */
    int32_t na = 0;
    for (int32_t r = 0; r < g->n_rules; r++) {
        g->alt_off[r] = na;
        int32_t p = g->rule_start[r];
        g->alts[na++] = p;
        for (; EL_TYPE(g->elems[p]) != E_END; p++)
            if (EL_TYPE(g->elems[p]) == E_ALT) g->alts[na++] = p + 1;
    }
    g->alt_off[g->n_rules] = na;
    for (int32_t c = 0; c < g->n_cls; c++) {
        gclass *k = &g->cls[c];
        memset(k->ascii, 0, sizeof k->ascii);
        const uint32_t *r = g->ranges + 2 * k->off;
        for (int32_t i = 0; i < k->n && r[2 * i] < 128; i++)
            for (uint32_t x = r[2 * i]; x <= r[2 * i + 1] && x < 128; x++) k->ascii[x >> 5] |= 1u << (x & 31);
    }
    g->nodes[0].pos = -1;
    g->nodes[0].parent = -1;
    g->n_nodes = 1;
    new_epoch(g);
    g->n_out = 0;
    uint32_t root = (uint32_t)g->root;
    for (int32_t a = g->alt_off[root]; a < g->alt_off[root + 1]; a++) {
        int32_t st = g->alts[a], x = 0;
        if (!EL_IS_END(g->elems[st])) {
            x = node_get(g, st, 0);
            if (x < 0) return bd_err(err, errlen, "%s", g->err);
        }
        if (!expand(g, x)) return bd_err(err, errlen, "%s", g->err);
    }
    g->start = intern(g);
    if (g->start == BD_GRAMMAR_ERROR) return bd_err(err, errlen, "%s", g->err);
    if (g->start < 0) return bd_err(err, errlen, "grammar: the root rule matches nothing");
    return true;
}

bd_grammar_state bd_grammar_start(const bd_grammar *g) { return gstate(g->start, 0); }

bool bd_grammar_is_complete(const bd_grammar *g, bd_grammar_state s) {
    return s.id >= 0 && U8_REM(s.utf8) == 0 && g->sets[s.id].complete;
}

bd_grammar_state bd_grammar_advance_bytes(bd_grammar *g, bd_grammar_state s, const void *bytes, size_t n) {
    const uint8_t *b = bytes;
    for (size_t i = 0; i < n && s.id >= 0; i++) s = step(g, s, b[i]);
    return s;
}

bool bd_grammar_matches(bd_grammar *g, const void *text, size_t n) {
    return bd_grammar_is_complete(g, bd_grammar_advance_bytes(g, bd_grammar_start(g), text, n));
}

static bool token_el_match(uint32_t el, int32_t tok) {
    uint32_t t = EL_TYPE(el);
    return (t == E_TOKEN && EL_VAL(el) == (uint32_t)tok) || (t == E_TOKEN_NOT && EL_VAL(el) != (uint32_t)tok);
}

bd_grammar_state bd_grammar_advance_token(bd_grammar *g, bd_grammar_state s, int32_t tok) {
    if (s.id < 0) return s;
    if (!g->vocab) {
        gerr(g, "token input needs a vocabulary");
        return gstate(BD_GRAMMAR_ERROR, 0);
    }
    if (tok < 0 || tok >= bd_grammar_vocab_n_vocab(g->vocab)) return gstate(BD_GRAMMAR_DEAD, 0);
    if (bd_grammar_vocab_is_eog(g->vocab, tok))
        return bd_grammar_is_complete(g, s) ? s : gstate(BD_GRAMMAR_DEAD, 0);
    int32_t len;
    const uint8_t *p = bd_grammar_vocab_piece(g->vocab, tok, &len);
    bd_grammar_state r = gstate(BD_GRAMMAR_DEAD, 0);
    if (len > 0) r = bd_grammar_advance_bytes(g, s, p, (size_t)len);
    if (r.id == BD_GRAMMAR_ERROR) return r;
    const gset *S = &g->sets[s.id];
    if (!S->has_tok || U8_REM(s.utf8) != 0) return r;
    /* token elements on top: their continuations join the byte path's
     * (when the piece ends inside a character, the token element wins:
     * a state cannot hold both a partial character and none) */
    new_epoch(g);
    g->n_out = 0;
    bool any = false;
    for (int32_t i = 0; i < S->n; i++) {
        int32_t y = g->pool[S->off + i];
        if (y == 0 || !token_el_match(g->elems[g->nodes[y].pos], tok)) continue;
        any = true;
        if (!pop_expand(g, y)) return gstate(BD_GRAMMAR_ERROR, 0);
    }
    if (!any) return r;
    if (r.id >= 0 && r.utf8 == 0) {
        const gset *R = &g->sets[r.id];
        for (int32_t i = 0; i < R->n; i++) {
            int32_t y = g->pool[R->off + i];
            if (g->mark[y] == g->epoch) continue;
            g->mark[y] = g->epoch;
            if (!out_add(g, y)) return gstate(BD_GRAMMAR_ERROR, 0);
        }
    }
    return gstate(intern(g), 0);
}

/* ------------------------------------------------------------------------
 * Mask
 * ---------------------------------------------------------------------- */

int32_t bd_grammar_mask(bd_grammar *g, bd_grammar_state s, uint32_t *bits) {
    if (!g->vocab) return gerr(g, "the mask needs a vocabulary"), -1;
    int32_t V = bd_grammar_vocab_n_vocab(g->vocab);
    memset(bits, 0, (size_t)((V + 31) / 32) * sizeof *bits);
    if (s.id < 0) return s.id == BD_GRAMMAR_ERROR ? -1 : 0;
    const gtrie *T = bd_grammar_vocab_trie(g->vocab);
    int32_t count = 0;
    if (g->sets[s.id].has_cls) {
        /* preorder walk of the token trie; a rejected byte skips its subtree */
        g->dfs_set[0] = s.id;
        g->dfs_utf8[0] = s.utf8;
        const uint8_t *tb = T->byte;
        const uint16_t *td = T->depth;
        int32_t *ds = g->dfs_set;
        uint32_t *du = g->dfs_utf8;
        for (int32_t i = 0; i < T->n;) {
            int32_t d = td[i];
            uint8_t b = tb[i];
            bd_grammar_state q;
            int32_t row;
            if (b < 0x80 && du[d - 1] == 0 && (row = g->row_of[ds[d - 1]] - 1) >= 0 && g->rows[(size_t)row * 128 + b])
                q = gstate(g->rows[(size_t)row * 128 + b] - 2, 0); /* cached ASCII step */
            else
                q = step(g, gstate(ds[d - 1], du[d - 1]), b);
            if (q.id < 0) {
                if (q.id == BD_GRAMMAR_ERROR) return -1;
                i = T->end[i];
                continue;
            }
            ds[d] = q.id;
            du[d] = q.utf8;
            for (int32_t t = T->tok[i]; t >= 0; t = T->tok_next[t]) {
                bits[t >> 5] |= 1u << (t & 31);
                count++;
            }
            i++;
        }
    }
    const gset *S = &g->sets[s.id];
    if (S->has_tok && U8_REM(s.utf8) == 0) {
        int32_t not_id = -1;
        bool not_all = false;
        for (int32_t i = 0; i < S->n; i++) {
            int32_t y = g->pool[S->off + i];
            if (y == 0) continue;
            uint32_t el = g->elems[g->nodes[y].pos];
            int32_t id = (int32_t)EL_VAL(el);
            if (EL_TYPE(el) == E_TOKEN) {
                if (id < V && !bd_grammar_vocab_is_eog(g->vocab, id)) bits[id >> 5] |= 1u << (id & 31);
            } else if (EL_TYPE(el) == E_TOKEN_NOT) {
                if (not_id >= 0 && not_id != id) not_all = true;
                not_id = id;
            }
        }
        if (not_id >= 0) { /* every token but one (or all, if two differ) */
            bool keep = not_id < V && (bits[not_id >> 5] >> (not_id & 31) & 1);
            for (int32_t w = 0; w < V / 32; w++) bits[w] = 0xFFFFFFFFu;
            for (int32_t t = V / 32 * 32; t < V; t++) bits[t >> 5] |= 1u << (t & 31);
            if (!not_all && !keep && not_id < V) bits[not_id >> 5] &= ~(1u << (not_id & 31));
            int32_t ne;
            const int32_t *eog = bd_grammar_vocab_eog(g->vocab, &ne);
            for (int32_t i = 0; i < ne; i++) bits[eog[i] >> 5] &= ~(1u << (eog[i] & 31));
        }
        count = 0;
        for (int32_t w = 0; w < (V + 31) / 32; w++) count += __builtin_popcount(bits[w]);
    }
    return count;
}

void bd_grammar_get_stats(const bd_grammar *g, bd_grammar_stats *st) {
    st->n_nodes = g->n_nodes;
    st->n_states = g->n_sets;
    st->n_rows = g->n_rows;
    st->n_pool = g->n_pool;
    st->n_cache_flushes = g->n_flushes;
}
