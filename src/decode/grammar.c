/*
 * grammar.c - GBNF parser, checks and compilation. See grammar.h.
 *
 * Compiled form: one array of elements; rule r occupies
 * elems[rule_start[r] ..] as alternatives separated by E_ALT and closed
 * by E_END. An element is a character class (E_CLASS, index into the
 * class table), a rule reference (E_REF), or a token element (E_TOKEN,
 * E_TOKEN_NOT). Repetitions are rewritten into synthesized rules (as
 * llama.cpp does), after wrapping a multi-element operand into its own
 * rule so that x{m,n} costs O(n) elements whatever x is:
 *   x*      R ::= x R |            x+   x R
 *   x?      O ::= x |              x{m,n}  x (m times) O(n-m)
 *   O(k) ::= x O(k-1) |  with O(1) ::= x |
 * Classes are normalized to sorted disjoint positive ranges (negation is
 * complemented over [0, 0x10FFFF]); a literal character is a one-range
 * class. The matcher lives in grammar_match.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_int.h"

/* ------------------------------------------------------------------------
 * Parser state
 * ---------------------------------------------------------------------- */

typedef struct {
    uint32_t *v;
    int32_t n, cap;
} evec;

typedef struct {
    const char *name; /* into the source copy, or NULL (synthesized) */
    int32_t name_len;
    int32_t parent;   /* synthesized: the rule it was written in */
    int32_t line;     /* where defined / first referenced */
    bool defined;
    evec body;        /* elements incl. E_ALT / E_END */
} prule;

typedef struct {
    const char *src; /* NUL-terminated copy */
    const char *p;
    size_t len;
    const bd_grammar_vocab *vocab;
    prule *rules;
    int32_t n_rules, cap_rules;
    int32_t *hash; /* name hash -> rule id + 1 */
    int32_t hash_cap;
    int64_t n_elems;
    /* classes under construction: ranges [lo, hi] pairs */
    uint32_t *cls_rng;
    int64_t n_cls_rng, cap_cls_rng;
    int32_t *cls_off, *cls_n; /* per class */
    int32_t n_cls, cap_cls;
    char *err;
    size_t errlen;
    bool failed;
} parser;

static bool perr(parser *ps, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool perr(parser *ps, const char *at, const char *fmt, ...) {
    if (ps->failed) return false;
    ps->failed = true;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!at) {
        bd_err(ps->err, ps->errlen, "grammar: %s", msg);
        return false;
    }
    int line = 1, col = 1;
    for (const char *q = ps->src; q < at && *q; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    bd_err(ps->err, ps->errlen, "grammar: line %d col %d: %s", line, col, msg);
    return false;
}

static int32_t line_of(const parser *ps, const char *at) {
    int32_t line = 1;
    for (const char *q = ps->src; q < at && *q; q++) line += *q == '\n';
    return line;
}

static bool evec_push(parser *ps, evec *e, uint32_t x) {
    if (ps->n_elems >= BD_GRAMMAR_MAX_ELEMS)
        return perr(ps, ps->p, "the grammar needs more than %d elements (limit)", BD_GRAMMAR_MAX_ELEMS);
    if (e->n == e->cap) {
        int32_t nc = e->cap ? 2 * e->cap : 16;
        uint32_t *nv = realloc(e->v, (size_t)nc * sizeof *nv);
        if (!nv) return perr(ps, NULL, "out of memory");
        e->v = nv;
        e->cap = nc;
    }
    e->v[e->n++] = x;
    ps->n_elems++;
    return true;
}

static void evec_truncate(parser *ps, evec *e, int32_t n) {
    ps->n_elems -= e->n - n;
    e->n = n;
}

static int32_t rule_new(parser *ps, const char *name, int32_t name_len, int32_t parent, int32_t line) {
    if (ps->n_rules >= BD_GRAMMAR_MAX_RULES) {
        perr(ps, ps->p, "the grammar needs more than %d rules (limit)", BD_GRAMMAR_MAX_RULES);
        return -1;
    }
    if (ps->n_rules == ps->cap_rules) {
        int32_t nc = ps->cap_rules ? 2 * ps->cap_rules : 64;
        prule *nr = realloc(ps->rules, (size_t)nc * sizeof *nr);
        if (!nr) {
            perr(ps, NULL, "out of memory");
            return -1;
        }
        ps->rules = nr;
        ps->cap_rules = nc;
    }
    prule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    r->name = name;
    r->name_len = name_len;
    r->parent = parent;
    r->line = line;
    return ps->n_rules++;
}

static uint32_t name_hash(const char *s, int32_t n) {
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* Rule id of a name, created (undefined) on first use. */
static int32_t rule_of_name(parser *ps, const char *name, int32_t n) {
    uint32_t mask = (uint32_t)ps->hash_cap - 1;
    for (uint32_t h = name_hash(name, n) & mask;; h = (h + 1) & mask) {
        int32_t id = ps->hash[h] - 1;
        if (id < 0) {
            id = rule_new(ps, name, n, -1, line_of(ps, name));
            if (id >= 0) ps->hash[h] = id + 1;
            return id;
        }
        if (ps->rules[id].name_len == n && !memcmp(ps->rules[id].name, name, (size_t)n)) return id;
    }
}

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* Skip blanks and comments; newlines too when newline_ok. */
static void skip_space(parser *ps, bool newline_ok) {
    const char *p = ps->p;
    for (;;) {
        if (*p == ' ' || *p == '\t' || (newline_ok && (*p == '\r' || *p == '\n'))) {
            p++;
        } else if (*p == '#') {
            while (*p && *p != '\r' && *p != '\n') p++;
        } else {
            break;
        }
    }
    ps->p = p;
}

/* ------------------------------------------------------------------------
 * Characters
 * ---------------------------------------------------------------------- */

static bool parse_hex(parser *ps, int n, uint32_t *out) {
    uint32_t v = 0;
    const char *start = ps->p - 2;
    for (int i = 0; i < n; i++) {
        char c = ps->p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return perr(ps, start, "expected %d hex digits after \\%c", n, start[1]);
        v = v << 4 | (uint32_t)d;
    }
    ps->p += n;
    if (v > 0x10FFFF) return perr(ps, start, "code point U+%X is beyond U+10FFFF", v);
    *out = v;
    return true;
}

/* One character of a literal or class (escape or UTF-8). */
static bool parse_char(parser *ps, uint32_t *out) {
    const unsigned char *p = (const unsigned char *)ps->p;
    if (*p == '\\') {
        ps->p += 2;
        switch (p[1]) {
        case 'x': return parse_hex(ps, 2, out);
        case 'u': return parse_hex(ps, 4, out);
        case 'U': return parse_hex(ps, 8, out);
        case 't': *out = '\t'; return true;
        case 'r': *out = '\r'; return true;
        case 'n': *out = '\n'; return true;
        case '\\': case '"': case '[': case ']': case '-': *out = p[1]; return true;
        case 0: return perr(ps, (const char *)p, "unexpected end of input after '\\'");
        default: return perr(ps, (const char *)p, "unknown escape \\%c", p[1]);
        }
    }
    if (!*p) return perr(ps, ps->p, "unexpected end of input");
    if (*p < 0x80) {
        *out = *p;
        ps->p++;
        return true;
    }
    int n = *p >= 0xF0 && *p <= 0xF4 ? 4 : *p >= 0xE0 && *p <= 0xEF ? 3 : *p >= 0xC2 && *p <= 0xDF ? 2 : 0;
    if (!n) return perr(ps, ps->p, "invalid UTF-8 in the grammar");
    uint32_t v = *p & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return perr(ps, ps->p, "invalid UTF-8 in the grammar");
        v = v << 6 | (p[i] & 0x3F);
    }
    static const uint32_t minv[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < minv[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return perr(ps, ps->p, "invalid UTF-8 in the grammar");
    ps->p += n;
    *out = v;
    return true;
}

/* ------------------------------------------------------------------------
 * Classes
 * ---------------------------------------------------------------------- */

static bool cls_add_range(parser *ps, uint32_t lo, uint32_t hi) {
    if (ps->n_cls_rng + 2 > (int64_t)BD_GRAMMAR_MAX_ELEMS * 2)
        return perr(ps, ps->p, "too many character ranges (limit %d)", BD_GRAMMAR_MAX_ELEMS);
    if (ps->n_cls_rng + 2 > ps->cap_cls_rng) {
        int64_t nc = ps->cap_cls_rng ? 2 * ps->cap_cls_rng : 256;
        uint32_t *nr = realloc(ps->cls_rng, (size_t)nc * sizeof *nr);
        if (!nr) return perr(ps, NULL, "out of memory");
        ps->cls_rng = nr;
        ps->cap_cls_rng = nc;
    }
    ps->cls_rng[ps->n_cls_rng++] = lo;
    ps->cls_rng[ps->n_cls_rng++] = hi;
    return true;
}

static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0;
}

/* Close the class whose ranges start at pair index `from`: sort, merge,
 * complement if negated. Returns the class index or -1. */
static int32_t cls_finish(parser *ps, int64_t from, bool negated) {
    int64_t n = (ps->n_cls_rng - 2 * from) / 2;
    /* an empty class ("[]", "[^]") before any range was ever added has no
     * array yet: no pointer arithmetic on NULL */
    uint32_t *r = n > 0 ? ps->cls_rng + 2 * from : NULL;
    if (n > 1) qsort(r, (size_t)n, 2 * sizeof *r, cmp_range);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (m > 0 && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (m - 1) + 1]) r[2 * (m - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * m] = r[2 * i];
            r[2 * m + 1] = r[2 * i + 1];
            m++;
        }
    }
    ps->n_cls_rng = 2 * (from + m);
    if (negated) {
        /* complement of m sorted disjoint ranges: at most m + 1 ranges */
        uint32_t tmp[2 * 64], *t = tmp;
        uint32_t *heap = NULL;
        if (m > 63) {
            heap = malloc((size_t)(2 * m + 2) * sizeof *heap);
            if (!heap) return perr(ps, NULL, "out of memory"), -1;
            t = heap;
        }
        if (m > 0) memcpy(t, ps->cls_rng + 2 * from, (size_t)(2 * m) * sizeof *t);
        ps->n_cls_rng = 2 * from;
        uint32_t next = 0;
        bool ok = true;
        for (int64_t i = 0; i < m && ok; i++) {
            if (t[2 * i] > next) ok = cls_add_range(ps, next, t[2 * i] - 1);
            next = t[2 * i + 1] + 1;
        }
        if (ok && next <= 0x10FFFF) ok = cls_add_range(ps, next, 0x10FFFF);
        free(heap);
        if (!ok) return -1;
    }
    if (ps->n_cls == ps->cap_cls) {
        int32_t nc = ps->cap_cls ? 2 * ps->cap_cls : 64;
        int32_t *no = realloc(ps->cls_off, (size_t)nc * sizeof *no);
        if (!no) return perr(ps, NULL, "out of memory"), -1;
        ps->cls_off = no;
        int32_t *nn = realloc(ps->cls_n, (size_t)nc * sizeof *nn);
        if (!nn) return perr(ps, NULL, "out of memory"), -1;
        ps->cls_n = nn;
        ps->cap_cls = nc;
    }
    ps->cls_off[ps->n_cls] = (int32_t)from;
    ps->cls_n[ps->n_cls] = (int32_t)((ps->n_cls_rng - 2 * from) / 2);
    return ps->n_cls++;
}

static bool push_char_class(parser *ps, evec *e, uint32_t lo, uint32_t hi) {
    int64_t from = ps->n_cls_rng / 2;
    if (!cls_add_range(ps, lo, hi)) return false;
    int32_t c = cls_finish(ps, from, false);
    return c >= 0 && evec_push(ps, e, EL(E_CLASS, (uint32_t)c));
}

/* ------------------------------------------------------------------------
 * Tokens
 * ---------------------------------------------------------------------- */

static bool parse_token(parser *ps, evec *e, bool negated) {
    const char *start = ps->p; /* at '<' */
    ps->p++;
    int64_t id = -1;
    if (*ps->p == '[') {
        ps->p++;
        const char *d = ps->p;
        id = 0;
        while (*ps->p >= '0' && *ps->p <= '9') {
            id = id * 10 + (*ps->p - '0');
            if (id > ELEM_VAL_MAX) return perr(ps, start, "token id out of range");
            ps->p++;
        }
        if (ps->p == d) return perr(ps, ps->p, "expected a token id after '<['");
        if (*ps->p != ']' || ps->p[1] != '>') return perr(ps, ps->p, "expected ']>' after the token id");
        ps->p += 2;
        if (ps->vocab && id >= bd_grammar_vocab_n_vocab(ps->vocab))
            return perr(ps, start, "token id %lld is beyond the vocabulary (%d tokens)", (long long)id,
                        bd_grammar_vocab_n_vocab(ps->vocab));
    } else {
        const char *t = ps->p;
        while (*ps->p && *ps->p != '>' && *ps->p != '\n') ps->p++;
        if (*ps->p != '>') return perr(ps, start, "expected '>' to close the token");
        size_t n = (size_t)(ps->p - start) + 1; /* the text includes < and > */
        ps->p++;
        (void)t;
        if (!ps->vocab) return perr(ps, start, "a token by text (%.*s) needs a vocabulary", (int)n, start);
        id = bd_grammar_vocab_find_special(ps->vocab, start, n);
        if (id == -1) return perr(ps, start, "no single token has the text %.*s", (int)n, start);
        if (id == -2) return perr(ps, start, "several tokens have the text %.*s", (int)n, start);
    }
    return evec_push(ps, e, EL(negated ? E_TOKEN_NOT : E_TOKEN, (uint32_t)id));
}

/* ------------------------------------------------------------------------
 * Rules
 * ---------------------------------------------------------------------- */

static bool parse_alternates(parser *ps, int32_t rule, bool nested, int depth);

/* Wrap e->v[from..] into a new rule; leave one E_REF in its place. */
static int32_t wrap_tail(parser *ps, evec *e, int32_t from, int32_t parent) {
    int32_t r = rule_new(ps, NULL, 0, parent, line_of(ps, ps->p));
    if (r < 0) return -1;
    prule *R = &ps->rules[r];
    for (int32_t i = from; i < e->n; i++)
        if (!evec_push(ps, &R->body, e->v[i])) return -1;
    if (!evec_push(ps, &R->body, EL(E_END, 0))) return -1;
    R->defined = true;
    evec_truncate(ps, e, from);
    if (!evec_push(ps, e, EL(E_REF, (uint32_t)r))) return -1;
    return r;
}

/* Rewrite the operand x = e->v[from..] (already one element) as x{m,n}
 * (n < 0: unbounded). */
static bool repeat(parser *ps, evec *e, int32_t from, int64_t m, int64_t n, int32_t parent) {
    uint32_t x = e->v[from];
    evec_truncate(ps, e, from);
    for (int64_t i = 0; i < m; i++)
        if (!evec_push(ps, e, x)) return false;
    if (n < 0) { /* R ::= x R | */
        int32_t r = rule_new(ps, NULL, 0, parent, line_of(ps, ps->p));
        if (r < 0) return false;
        evec *b = &ps->rules[r].body;
        ps->rules[r].defined = true;
        if (!evec_push(ps, b, x) || !evec_push(ps, b, EL(E_REF, (uint32_t)r)) || !evec_push(ps, b, EL(E_ALT, 0)) ||
            !evec_push(ps, b, EL(E_END, 0)))
            return false;
        return evec_push(ps, e, EL(E_REF, (uint32_t)r));
    }
    int32_t prev = -1;
    for (int64_t k = 1; k <= n - m; k++) { /* O(k) ::= x O(k-1) | */
        int32_t r = rule_new(ps, NULL, 0, parent, line_of(ps, ps->p));
        if (r < 0) return false;
        evec *b = &ps->rules[r].body;
        ps->rules[r].defined = true;
        if (!evec_push(ps, b, x)) return false;
        if (prev >= 0 && !evec_push(ps, b, EL(E_REF, (uint32_t)prev))) return false;
        if (!evec_push(ps, b, EL(E_ALT, 0)) || !evec_push(ps, b, EL(E_END, 0))) return false;
        prev = r;
    }
    if (prev >= 0) return evec_push(ps, e, EL(E_REF, (uint32_t)prev));
    return true;
}

static bool parse_count(parser *ps, int64_t *out) {
    const char *d = ps->p;
    int64_t v = 0;
    while (*ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (*ps->p - '0');
        if (v > BD_GRAMMAR_MAX_REPEAT)
            return perr(ps, d, "repetition count above %d (limit)", BD_GRAMMAR_MAX_REPEAT);
        ps->p++;
    }
    if (ps->p == d) return perr(ps, ps->p, "expected a number in {m,n}");
    *out = v;
    return true;
}

/* One sequence into e (the rule body being built). */
static bool parse_sequence(parser *ps, evec *e, int32_t rule, bool nested, int depth) {
    int32_t last = -1; /* start of the last item in e, -1 if none */
    for (;;) {
        char c = *ps->p;
        if (c == '"') {
            ps->p++;
            last = e->n;
            while (*ps->p != '"') {
                if (!*ps->p) return perr(ps, ps->p, "unterminated string literal");
                uint32_t ch;
                if (!parse_char(ps, &ch) || !push_char_class(ps, e, ch, ch)) return false;
            }
            ps->p++;
            if (e->n == last) last = -1; /* "" matches the empty string: nothing to repeat */
            skip_space(ps, nested);
        } else if (c == '[') {
            const char *start = ps->p;
            ps->p++;
            bool neg = false;
            if (*ps->p == '^') {
                neg = true;
                ps->p++;
            }
            int64_t from = ps->n_cls_rng / 2;
            while (*ps->p != ']') {
                if (!*ps->p) return perr(ps, start, "unterminated character class");
                uint32_t lo, hi;
                if (!parse_char(ps, &lo)) return false;
                hi = lo;
                if (ps->p[0] == '-' && ps->p[1] != ']') {
                    ps->p++;
                    if (!*ps->p) return perr(ps, start, "unterminated character class");
                    const char *at = ps->p;
                    if (!parse_char(ps, &hi)) return false;
                    if (hi < lo) return perr(ps, at, "reversed range U+%04X-U+%04X matches nothing", lo, hi);
                }
                if (!cls_add_range(ps, lo, hi)) return false;
            }
            ps->p++;
            int32_t k = cls_finish(ps, from, neg);
            if (k < 0) return false;
            last = e->n;
            if (!evec_push(ps, e, EL(E_CLASS, (uint32_t)k))) return false;
            skip_space(ps, nested);
        } else if (c == '<' || (c == '!' && ps->p[1] == '<')) {
            if (c == '!') ps->p++;
            last = e->n;
            if (!parse_token(ps, e, c == '!')) return false;
            skip_space(ps, nested);
        } else if (is_word(c)) {
            const char *n = ps->p;
            while (is_word(*ps->p)) ps->p++;
            int32_t r = rule_of_name(ps, n, (int32_t)(ps->p - n));
            if (r < 0) return false;
            last = e->n;
            if (!evec_push(ps, e, EL(E_REF, (uint32_t)r))) return false;
            skip_space(ps, nested);
        } else if (c == '(') {
            if (depth >= BD_GRAMMAR_MAX_NEST)
                return perr(ps, ps->p, "parentheses nested deeper than %d (limit)", BD_GRAMMAR_MAX_NEST);
            const char *open = ps->p;
            ps->p++;
            skip_space(ps, true);
            int32_t sub = rule_new(ps, NULL, 0, rule, line_of(ps, open));
            if (sub < 0 || !parse_alternates(ps, sub, true, depth + 1)) return false;
            if (*ps->p != ')') return perr(ps, open, "unclosed '('");
            ps->p++;
            last = e->n;
            if (!evec_push(ps, e, EL(E_REF, (uint32_t)sub))) return false;
            skip_space(ps, nested);
        } else if (c == '.') {
            ps->p++;
            last = e->n;
            if (!push_char_class(ps, e, 0, 0x10FFFF)) return false;
            skip_space(ps, nested);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            const char *at = ps->p;
            int64_t m, n;
            ps->p++;
            if (c == '*') m = 0, n = -1;
            else if (c == '+') m = 1, n = -1;
            else if (c == '?') m = 0, n = 1;
            else {
                skip_space(ps, nested);
                if (!parse_count(ps, &m)) return false;
                skip_space(ps, nested);
                if (*ps->p == '}') {
                    n = m;
                } else if (*ps->p == ',') {
                    ps->p++;
                    skip_space(ps, nested);
                    n = -1;
                    if (*ps->p >= '0' && *ps->p <= '9' && !parse_count(ps, &n)) return false;
                    skip_space(ps, nested);
                    if (*ps->p != '}') return perr(ps, ps->p, "expected '}'");
                    if (n >= 0 && n < m) return perr(ps, at, "repetition {%lld,%lld} has max below min", (long long)m, (long long)n);
                } else {
                    return perr(ps, ps->p, "expected ',' or '}'");
                }
                ps->p++;
            }
            if (last < 0) return perr(ps, at, "'%c' has nothing before it to repeat", c);
            if (e->n - last > 1 && wrap_tail(ps, e, last, rule) < 0) return false;
            if (!repeat(ps, e, last, m, n, rule)) return false;
            /* the result is the last item again (a{2}{3} repeats a{2}: it
             * is wrapped into a rule if another postfix follows) */
            if (e->n == last) last = -1;
            skip_space(ps, nested);
        } else {
            return true;
        }
    }
}

static bool parse_alternates(parser *ps, int32_t rule, bool nested, int depth) {
    evec body = {0};
    bool ok = parse_sequence(ps, &body, rule, nested, depth);
    while (ok && *ps->p == '|') {
        ps->p++;
        skip_space(ps, true);
        ok = evec_push(ps, &body, EL(E_ALT, 0)) && parse_sequence(ps, &body, rule, nested, depth);
    }
    ok = ok && evec_push(ps, &body, EL(E_END, 0));
    if (!ok) {
        free(body.v);
        return false;
    }
    prule *R = &ps->rules[rule];
    free(R->body.v);
    R->body = body;
    R->defined = true;
    return true;
}

static bool parse_rule(parser *ps) {
    const char *n = ps->p;
    if (!is_word(*n)) return perr(ps, n, "expected a rule name");
    while (is_word(*ps->p)) ps->p++;
    int32_t r = rule_of_name(ps, n, (int32_t)(ps->p - n));
    if (r < 0) return false;
    if (ps->rules[r].defined) return perr(ps, n, "rule '%.*s' is defined twice", (int)(ps->p - n), n);
    ps->rules[r].line = line_of(ps, n);
    skip_space(ps, false);
    if (strncmp(ps->p, "::=", 3) != 0) return perr(ps, ps->p, "expected '::=' after the rule name");
    ps->p += 3;
    skip_space(ps, true);
    if (!parse_alternates(ps, r, false, 0)) return false;
    if (*ps->p == '\r' && ps->p[1] == '\n') ps->p += 2;
    else if (*ps->p == '\n' || *ps->p == '\r') ps->p++;
    else if (*ps->p) {
        if (*ps->p == ')') return perr(ps, ps->p, "unmatched ')'");
        return perr(ps, ps->p, "unexpected '%c' (expected a newline or the end)", *ps->p);
    }
    skip_space(ps, true);
    return true;
}

/* ------------------------------------------------------------------------
 * Checks
 * ---------------------------------------------------------------------- */

/* Name of a rule for messages: its own, or "a group/repetition in X". */
static void rule_desc(const parser *ps, int32_t r, char *out, size_t n) {
    int32_t q = r;
    while (q >= 0 && !ps->rules[q].name) q = ps->rules[q].parent;
    if (q < 0) snprintf(out, n, "rule #%d", r);
    else if (q == r) snprintf(out, n, "rule '%.*s'", ps->rules[q].name_len, ps->rules[q].name);
    else snprintf(out, n, "a group or repetition in rule '%.*s'", ps->rules[q].name_len, ps->rules[q].name);
}

static bool class_is_empty(const parser *ps, uint32_t c) { return ps->cls_n[c] == 0; }

/* nullable[r]: r can match the empty string. productive[r]: r can match
 * some finite string. Both by fixpoint over the rules. */
static void fixpoints(const parser *ps, uint8_t *nullable, uint8_t *productive) {
    int32_t R = ps->n_rules;
    memset(nullable, 0, (size_t)R);
    memset(productive, 0, (size_t)R);
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < R; r++) {
            const evec *b = &ps->rules[r].body;
            bool alt_null = true, alt_prod = true, any_null = false, any_prod = false;
            for (int32_t i = 0; i < b->n; i++) {
                uint32_t t = EL_TYPE(b->v[i]), v = EL_VAL(b->v[i]);
                if (t == E_ALT || t == E_END) {
                    any_null |= alt_null;
                    any_prod |= alt_prod;
                    alt_null = alt_prod = true;
                    continue;
                }
                if (t == E_REF) {
                    alt_null &= nullable[v] != 0;
                    alt_prod &= productive[v] != 0;
                } else {
                    alt_null = false;
                    if (t == E_CLASS && class_is_empty(ps, v)) alt_prod = false;
                }
            }
            if (any_null && !nullable[r]) nullable[r] = 1, changed = true;
            if (any_prod && !productive[r]) productive[r] = 1, changed = true;
        }
    }
}

/* Left recursion: a cycle in "r may start with s" (s at a position whose
 * predecessors in the alternative are all nullable). Iterative DFS. */
static bool check_left_recursion(parser *ps, const uint8_t *nullable) {
    int32_t R = ps->n_rules;
    uint8_t *color = calloc((size_t)R, 1);          /* 0 new, 1 on stack, 2 done */
    int32_t *stk = malloc((size_t)R * sizeof *stk); /* rule */
    int32_t *pos = malloc((size_t)R * sizeof *pos); /* next element index to scan */
    uint8_t *lead = malloc((size_t)R);              /* still at a leading position */
    bool ok = color && stk && pos && lead;
    if (!ok) perr(ps, NULL, "out of memory");
    for (int32_t root = 0; ok && root < R; root++) {
        if (color[root]) continue;
        int32_t sp = 0;
        stk[0] = root, pos[0] = 0, lead[0] = 1, color[root] = 1;
        while (ok && sp >= 0) {
            int32_t r = stk[sp];
            const evec *b = &ps->rules[r].body;
            bool pushed = false;
            while (pos[sp] < b->n) {
                uint32_t el = b->v[pos[sp]++];
                uint32_t t = EL_TYPE(el), v = EL_VAL(el);
                if (t == E_ALT || t == E_END) {
                    lead[sp] = 1;
                    continue;
                }
                if (!lead[sp]) continue;
                if (t != E_REF) {
                    lead[sp] = 0;
                    continue;
                }
                if (!nullable[v]) lead[sp] = 0;
                if (color[v] == 1) {
                    char a[160];
                    rule_desc(ps, (int32_t)v, a, sizeof a);
                    perr(ps, NULL, "left recursion through %s (line %d): a rule may not start with itself, "
                                   "also not after parts that can be empty", a, ps->rules[v].line);
                    ok = false;
                    break;
                }
                if (color[v] == 0) {
                    color[v] = 1;
                    sp++;
                    stk[sp] = (int32_t)v, pos[sp] = 0, lead[sp] = 1;
                    pushed = true;
                    break;
                }
            }
            if (!ok || pushed) continue;
            color[r] = 2;
            sp--;
        }
    }
    free(color);
    free(stk);
    free(pos);
    free(lead);
    return ok;
}

/* ------------------------------------------------------------------------
 * Create / free
 * ---------------------------------------------------------------------- */

static void parser_free(parser *ps) {
    for (int32_t i = 0; i < ps->n_rules; i++) free(ps->rules[i].body.v);
    free(ps->rules);
    free(ps->hash);
    free(ps->cls_rng);
    free(ps->cls_off);
    free(ps->cls_n);
    free((char *)ps->src);
}

bd_grammar *bd_grammar_create(const char *text, size_t len, const bd_grammar_vocab *v, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!text) {
        bd_err(err, errlen, "grammar: no text");
        return NULL;
    }
    if (len > BD_GRAMMAR_MAX_SOURCE) {
        bd_err(err, errlen, "grammar: %zu bytes is above the limit (%d)", len, BD_GRAMMAR_MAX_SOURCE);
        return NULL;
    }
    if (memchr(text, 0, len)) {
        bd_err(err, errlen, "grammar: the text contains a NUL byte");
        return NULL;
    }
    parser ps = {.vocab = v, .err = err, .errlen = errlen, .len = len};
    bd_grammar *g = NULL;
    uint8_t *nullable = NULL, *productive = NULL;
    /* name table: at most one name per two source bytes, and at most
     * BD_GRAMMAR_MAX_RULES: kept at most half full */
    ps.hash_cap = 64;
    while (ps.hash_cap < (int32_t)(len + 16) && ps.hash_cap < 2 * BD_GRAMMAR_MAX_RULES) ps.hash_cap *= 2;
    char *src = malloc(len + 1);
    ps.hash = calloc((size_t)ps.hash_cap, sizeof *ps.hash);
    if (!src || !ps.hash) {
        free(src);
        free(ps.hash);
        bd_err(err, errlen, "grammar: out of memory");
        return NULL;
    }
    memcpy(src, text, len);
    src[len] = '\0';
    ps.src = ps.p = src;
    skip_space(&ps, true);
    while (*ps.p)
        if (!parse_rule(&ps)) goto done;
    int32_t root = -1;
    for (int32_t r = 0; r < ps.n_rules; r++) {
        prule *R = &ps.rules[r];
        if (R->name && R->name_len == 4 && !memcmp(R->name, "root", 4)) root = r;
        if (!R->defined) {
            perr(&ps, NULL, "rule '%.*s' is used (line %d) but never defined", R->name_len, R->name, R->line);
            goto done;
        }
    }
    if (root < 0) {
        perr(&ps, NULL, ps.n_rules ? "no 'root' rule" : "the grammar is empty (no 'root' rule)");
        goto done;
    }
    nullable = malloc((size_t)ps.n_rules);
    productive = malloc((size_t)ps.n_rules);
    if (!nullable || !productive) {
        perr(&ps, NULL, "out of memory");
        goto done;
    }
    fixpoints(&ps, nullable, productive);
    if (!check_left_recursion(&ps, nullable)) goto done;
    if (!productive[root]) {
        perr(&ps, NULL, "the grammar matches nothing: rule 'root' can never be completed (every alternative "
                        "needs an endless recursion or an empty character class)");
        goto done;
    }
    /* compile */
    g = bd_grammar_alloc(ps.n_rules, ps.n_elems, ps.n_cls, ps.n_cls_rng / 2, v, err, errlen);
    if (!g) {
        ps.failed = true;
        goto done;
    }
    int64_t k = 0;
    for (int32_t r = 0; r < ps.n_rules; r++) {
        g->rule_start[r] = (int32_t)k;
        if (ps.rules[r].body.n > 0) /* (an empty body may have no array: memcpy wants non-NULL) */
            memcpy(g->elems + k, ps.rules[r].body.v, (size_t)ps.rules[r].body.n * sizeof *g->elems);
        k += ps.rules[r].body.n;
    }
    g->root = root;
    for (int32_t c = 0; c < ps.n_cls; c++) {
        g->cls[c].off = ps.cls_off[c];
        g->cls[c].n = ps.cls_n[c];
    }
    if (ps.n_cls_rng > 0) memcpy(g->ranges, ps.cls_rng, (size_t)ps.n_cls_rng * sizeof *g->ranges);
    if (!bd_grammar_init_matcher(g, err, errlen)) {
        bd_grammar_free(g);
        g = NULL;
        ps.failed = true;
    }
done:
    free(nullable);
    free(productive);
    parser_free(&ps);
    return g;
}

int32_t bd_grammar_n_rules(const bd_grammar *g) { return g->n_rules; }
int32_t bd_grammar_n_elements(const bd_grammar *g) { return g->n_elems; }
const bd_grammar_vocab *bd_grammar_vocab_of(const bd_grammar *g) { return g->vocab; }
