/*
 * json_schema.c - JSON Schema -> GBNF. See json_schema.h for what is
 * supported. Every schema node becomes a named rule (equal rule bodies are
 * shared); $refs become rules named once, before their target is visited,
 * so recursive schemas turn into recursive rules instead of recursing here.
 */
#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema.h"
#include "../base/base.h"

/* ------------------------------------------------------------------------
 * Strings
 * ---------------------------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_addn(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? 2 * b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_add(sbuf *b, const char *s) { sb_addn(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_addn(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_addn(b, big, (size_t)n);
    free(big);
}

/* A GBNF string literal for raw bytes s (valid UTF-8 passes through). */
static void sb_literal(sbuf *b, const char *s, size_t n) {
    sb_add(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') sb_add(b, "\\\"");
        else if (c == '\\') sb_add(b, "\\\\");
        else if (c == '\n') sb_add(b, "\\n");
        else if (c == '\r') sb_add(b, "\\r");
        else if (c == '\t') sb_add(b, "\\t");
        else if (c < 0x20 || c == 0x7F) sb_printf(b, "\\x%02X", c);
        else sb_addn(b, (const char *)&c, 1);
    }
    sb_add(b, "\"");
}

/* One code point as a GBNF escape (safe inside literals and classes). */
static void sb_cp(sbuf *b, uint32_t cp) {
    if (cp < 0x10000) sb_printf(b, "\\u%04X", cp);
    else sb_printf(b, "\\U%08X", cp);
}

/* ------------------------------------------------------------------------
 * Converter state
 * ---------------------------------------------------------------------- */

typedef struct {
    char *name;
    char *body; /* NULL while a $ref target is being built */
} crule;

typedef struct {
    char *ref;
    int rule;
} cref;

typedef struct {
    const json_t *root;
    crule *rules;
    int n_rules, cap_rules;
    int *ht_name, *ht_body; /* rule index + 1 */
    int ht_cap;
    cref *refs;
    int n_refs, cap_refs;
    size_t total; /* bytes of rule text so far */
    /* visited schema nodes -> their rule: every node is converted once, so
     * a schema that reaches the same node many ways (type lists at every
     * level, ...) costs its size, not the number of paths */
    const json_t **memo_key;
    const char **memo_val;
    int memo_cap, memo_n;
    int depth;
    char path[512]; /* JSON pointer of the node being visited */
    size_t path_len;
    sbuf errs;
    int n_errs;
    bool failed, oom;
} conv;

static void path_push(conv *c, const char *seg, size_t *saved) {
    *saved = c->path_len;
    size_t room = sizeof c->path - c->path_len - 1;
    if (room < 2) return;
    c->path[c->path_len++] = '/';
    for (const char *p = seg; *p && c->path_len + 3 < sizeof c->path; p++) {
        if (*p == '~') c->path[c->path_len++] = '~', c->path[c->path_len++] = '0';
        else if (*p == '/') c->path[c->path_len++] = '~', c->path[c->path_len++] = '1';
        else c->path[c->path_len++] = *p;
    }
    c->path[c->path_len] = '\0';
}

static void path_push_index(conv *c, size_t i, size_t *saved) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%zu", i);
    path_push(c, tmp, saved);
}

static void path_pop(conv *c, size_t saved) {
    c->path_len = saved;
    c->path[saved] = '\0';
}

/* Record an error about the current node; conversion fails at the end. */
static void cerr(conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cerr(conv *c, const char *fmt, ...) {
    c->failed = true;
    if (c->n_errs >= 6) {
        if (c->n_errs++ == 6) sb_add(&c->errs, "; ...");
        return;
    }
    if (c->n_errs++) sb_add(&c->errs, "; ");
    char tmp[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_printf(&c->errs, "%s at %s", tmp, c->path_len ? c->path : "#");
}

static uint32_t str_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static bool ht_grow(conv *c) {
    int nc = c->ht_cap ? 2 * c->ht_cap : 256;
    int *nn = calloc((size_t)nc, sizeof *nn), *nb = calloc((size_t)nc, sizeof *nb);
    if (!nn || !nb) {
        free(nn);
        free(nb);
        return false;
    }
    for (int i = 0; i < c->n_rules; i++) {
        uint32_t h = str_hash(c->rules[i].name) & (uint32_t)(nc - 1);
        while (nn[h]) h = (h + 1) & (uint32_t)(nc - 1);
        nn[h] = i + 1;
        if (c->rules[i].body) {
            h = str_hash(c->rules[i].body) & (uint32_t)(nc - 1);
            while (nb[h]) h = (h + 1) & (uint32_t)(nc - 1);
            nb[h] = i + 1;
        }
    }
    free(c->ht_name);
    free(c->ht_body);
    c->ht_name = nn;
    c->ht_body = nb;
    c->ht_cap = nc;
    return true;
}

static int find_name(const conv *c, const char *name) {
    if (!c->ht_cap) return -1;
    for (uint32_t h = str_hash(name) & (uint32_t)(c->ht_cap - 1);; h = (h + 1) & (uint32_t)(c->ht_cap - 1)) {
        int i = c->ht_name[h] - 1;
        if (i < 0) return -1;
        if (!strcmp(c->rules[i].name, name)) return i;
    }
}

static int find_body(const conv *c, const char *body) {
    if (!c->ht_cap) return -1;
    for (uint32_t h = str_hash(body) & (uint32_t)(c->ht_cap - 1);; h = (h + 1) & (uint32_t)(c->ht_cap - 1)) {
        int i = c->ht_body[h] - 1;
        if (i < 0) return -1;
        if (c->rules[i].body && !strcmp(c->rules[i].body, body)) return i;
    }
}

static void index_body(conv *c, int i) {
    uint32_t h = str_hash(c->rules[i].body) & (uint32_t)(c->ht_cap - 1);
    while (c->ht_body[h]) h = (h + 1) & (uint32_t)(c->ht_cap - 1);
    c->ht_body[h] = i + 1;
}

static const char *const RESERVED[] = {"root", "space", "char", "string", "integral-part", "decimal-part", "number",
                                       "integer", "boolean", "null", "value", "object", "array", "uuid", "date",
                                       "time", "date-time", "day-28", "leap-year", "key-char", NULL};

/* New rule named after hint (made unique); body may be NULL (set later). */
static int rule_new(conv *c, const char *hint, bool exact, const char *body) {
    if (c->oom) return -1;
    if (c->n_rules >= 4 * BD_GRAMMAR_MAX_REPEAT) {
        if (!c->failed) cerr(c, "the schema needs more than %d grammar rules", 4 * BD_GRAMMAR_MAX_REPEAT);
        return -1;
    }
    if ((c->n_rules + 1) * 2 > c->ht_cap && !ht_grow(c)) goto oom;
    if (c->n_rules == c->cap_rules) {
        int nc = c->cap_rules ? 2 * c->cap_rules : 64;
        crule *nr = realloc(c->rules, (size_t)nc * sizeof *nr);
        if (!nr) goto oom;
        c->rules = nr;
        c->cap_rules = nc;
    }
    char base[64];
    size_t n = 0;
    if (exact) {
        snprintf(base, sizeof base, "%s", hint);
        n = strlen(base);
    } else {
        bool dash = false;
        for (const char *p = hint; *p && n < 40; p++) {
            char ch = *p;
            bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
            if (ok) {
                base[n++] = ch;
                dash = false;
            } else if (!dash && n > 0) {
                base[n++] = '-';
                dash = true;
            }
        }
        while (n > 0 && base[n - 1] == '-') n--;
        if (n == 0) base[n++] = 'r';
        base[n] = '\0';
        bool reserved = false;
        for (int i = 0; RESERVED[i]; i++) reserved |= !strcmp(base, RESERVED[i]);
        if (reserved) {
            base[n++] = '-';
            base[n++] = 'x';
            base[n] = '\0';
        }
    }
    char name[96];
    snprintf(name, sizeof name, "%s", base);
    for (int k = 1; find_name(c, name) >= 0; k++) snprintf(name, sizeof name, "%s-%d", base, k);
    crule *r = &c->rules[c->n_rules];
    r->name = strdup(name);
    r->body = body ? strdup(body) : NULL;
    if (!r->name || (body && !r->body)) {
        free(r->name);
        free(r->body);
        goto oom;
    }
    int i = c->n_rules++;
    uint32_t h = str_hash(r->name) & (uint32_t)(c->ht_cap - 1);
    while (c->ht_name[h]) h = (h + 1) & (uint32_t)(c->ht_cap - 1);
    c->ht_name[h] = i + 1;
    if (body) index_body(c, i);
    c->total += strlen(name) + (body ? strlen(body) : 0) + 6;
    if (c->total > JSON_SCHEMA_MAX_GBNF && !c->failed) cerr(c, "the grammar for the schema exceeds %d bytes", JSON_SCHEMA_MAX_GBNF);
    return i;
oom:
    c->oom = c->failed = true;
    return -1;
}

/* A rule with this body (shared if one exists); its name, or NULL. */
static const char *add_rule(conv *c, const char *hint, sbuf *body) {
    if (body->oom) {
        c->oom = c->failed = true;
        return NULL;
    }
    int i = find_body(c, body->s);
    if (i < 0) i = rule_new(c, hint, false, body->s);
    return i < 0 ? NULL : c->rules[i].name;
}

static void set_body(conv *c, int i, const char *body) {
    c->rules[i].body = strdup(body);
    if (!c->rules[i].body) {
        c->oom = c->failed = true;
        return;
    }
    index_body(c, i);
    c->total += strlen(body);
}

/* ------------------------------------------------------------------------
 * Fixed rules
 * ---------------------------------------------------------------------- */

static const struct {
    const char *name, *body, *deps;
} PRIMS[] = {
    {"space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}", ""},
    /* one code point per char: \u escapes of surrogates are excluded */
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )", ""},
    {"key-char", "[^\"\\\\\\x7F\\x00-\\x1F]", ""},
    {"string", "\"\\\"\" char* \"\\\"\"", "char"},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", ""},
    {"decimal-part", "[0-9]{1,16}", ""},
    {"number", "\"-\"? integral-part ( \".\" decimal-part )? ( [eE] [-+]? [0-9]{1,2} )?", "integral-part decimal-part"},
    {"integer", "\"-\"? integral-part", "integral-part"},
    {"boolean", "\"true\" | \"false\"", ""},
    {"null", "\"null\"", ""},
    {"value", "object | array | string | number | boolean | null", "object array string number boolean null"},
    {"object", "\"{\" space ( string space \":\" space value ( \",\" space string space \":\" space value )* )? space \"}\"", "space string value"},
    {"array", "\"[\" space ( value ( \",\" space value )* )? space \"]\"", "space value"},
    {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\"", ""},
    {"day-28", "\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]", ""},
    /* year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) */
    {"leap-year", "[0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) \"00\"", ""},
    {"date", "[0-9]{4} \"-\" ( ( \"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" ( day-28 | \"29\" | \"30\" | \"31\" ) | ( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" ( day-28 | \"29\" | \"30\" ) | \"02-\" day-28 ) | leap-year \"-02-29\"", "day-28 leap-year"},
    {"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? ( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", ""},
    {"date-time", "date \"T\" time", "date time"},
    {NULL, NULL, NULL},
};

static const char *prim(conv *c, const char *name) {
    if (find_name(c, name) >= 0) return name;
    for (int i = 0; PRIMS[i].name; i++) {
        if (strcmp(PRIMS[i].name, name)) continue;
        if (rule_new(c, name, true, PRIMS[i].body) < 0) return NULL;
        char deps[128];
        snprintf(deps, sizeof deps, "%s", PRIMS[i].deps);
        char *save = NULL;
        for (char *d = strtok_r(deps, " ", &save); d; d = strtok_r(NULL, " ", &save))
            if (!prim(c, d)) return NULL;
        return name;
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Keywords
 * ---------------------------------------------------------------------- */

static const char *const ANNOTATIONS[] = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
                                          "contentEncoding", "contentMediaType", "$vocabulary", NULL};

static const char *const REFUSED[] = {"pattern", "patternProperties", "not", "if", "then", "else", "uniqueItems",
                                      "contains", "minContains", "maxContains", "multipleOf", "minProperties",
                                      "maxProperties", "propertyNames", "dependentRequired", "dependentSchemas",
                                      "dependencies", "unevaluatedProperties", "unevaluatedItems", "additionalItems",
                                      "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef",
                                      "$recursiveAnchor", "contentSchema", NULL};

static bool in_list(const char *const *list, const char *k) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], k)) return true;
    return false;
}

/* Keywords JSON Schema defines (the rest are ignored as unknown). */
static const char *const KNOWN[] = {"type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf", "properties",
                                    "required", "additionalProperties", "items", "prefixItems", "minItems",
                                    "maxItems", "minLength", "maxLength", "format", "minimum", "maximum",
                                    "exclusiveMinimum", "exclusiveMaximum", NULL};

/* Refuse keywords we cannot enforce; with `only` set (for $ref, anyOf,
 * ...) every other defined validation keyword is refused too. */
static void check_keywords(conv *c, const json_t *s, const char *only) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        if (in_list(REFUSED, k)) cerr(c, "unsupported keyword '%s'", k);
        else if (only && strcmp(k, only) && in_list(KNOWN, k) && !in_list(ANNOTATIONS, k))
            cerr(c, "unsupported keyword '%s' next to '%s'", k, only);
    }
}

static bool get_count(conv *c, const json_t *s, const char *key, int64_t def, int64_t *out) {
    const json_t *v = json_object_get(s, key);
    *out = def;
    if (!v) return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) == floor(json_real_value(v))) {
            *out = (int64_t)json_real_value(v);
        } else {
            cerr(c, "'%s' must be a non-negative integer", key);
            return false;
        }
    } else {
        *out = json_integer_value(v);
    }
    if (*out > BD_GRAMMAR_MAX_REPEAT) {
        cerr(c, "unsupported '%s' %lld (above %d)", key, (long long)*out, BD_GRAMMAR_MAX_REPEAT);
        return false;
    }
    return true;
}

/* x{a,b} (b < 0: unbounded) as GBNF. */
static void sb_repeat(sbuf *b, const char *x, int64_t lo, int64_t hi) {
    if (hi == 0) return;
    if (lo == 0 && hi == 1) sb_printf(b, "%s?", x);
    else if (lo == 0 && hi < 0) sb_printf(b, "%s*", x);
    else if (lo == 1 && hi < 0) sb_printf(b, "%s+", x);
    else if (hi < 0) sb_printf(b, "%s{%lld,}", x, (long long)lo);
    else if (lo == hi) sb_printf(b, "%s{%lld}", x, (long long)lo);
    else sb_printf(b, "%s{%lld,%lld}", x, (long long)lo, (long long)hi);
}

/* ------------------------------------------------------------------------
 * Integer ranges
 * ---------------------------------------------------------------------- */

#define INT_DIGITS 16
static const int64_t INT_LIMIT = 9999999999999999LL; /* 16 digits, as integral-part */

/* Decimal strings of equal length, a <= b: all numbers in [a, b]. */
static void range_same_len(sbuf *o, const char *a, const char *b, size_t n) {
    size_t p = 0;
    while (p < n && a[p] == b[p]) p++;
    if (p > 0) sb_addn(o, "\"", 1), sb_addn(o, a, p), sb_addn(o, "\"", 1);
    if (p == n) return;
    if (p > 0) sb_add(o, " ");
    size_t m = n - p - 1; /* digits after the first differing one */
    char lo = a[p], hi = b[p];
    bool a_zeros = true, b_nines = true;
    for (size_t i = p + 1; i < n; i++) {
        a_zeros &= a[i] == '0';
        b_nines &= b[i] == '9';
    }
    char first = a_zeros ? lo : (char)(lo + 1), last = b_nines ? hi : (char)(hi - 1);
    sb_add(o, "( ");
    int alts = 0;
    if (!a_zeros) {
        char nines[INT_DIGITS + 1];
        memset(nines, '9', m);
        sb_printf(o, "[%c] ", lo);
        range_same_len(o, a + p + 1, nines, m);
        alts++;
    }
    if (first <= last) {
        if (alts++) sb_add(o, " | ");
        if (first == last) sb_printf(o, "[%c]", first);
        else sb_printf(o, "[%c-%c]", first, last);
        if (m == 1) sb_add(o, " [0-9]");
        else if (m > 1) sb_printf(o, " [0-9]{%zu}", m);
    }
    if (!b_nines) {
        char zeros[INT_DIGITS + 1];
        memset(zeros, '0', m);
        if (alts++) sb_add(o, " | ");
        sb_printf(o, "[%c] ", hi);
        range_same_len(o, zeros, b + p + 1, m);
    }
    sb_add(o, " )");
}

/* Non-negative [a, b] as alternatives by digit count. */
static void range_nonneg(sbuf *o, int64_t a, int64_t b) {
    int alts = 0;
    int64_t pow = 1;
    for (int k = 1; k <= INT_DIGITS; k++, pow *= 10) {
        int64_t lo = k == 1 ? 0 : pow, hi = pow * 10 - 1;
        if (lo < a) lo = a;
        if (hi > b) hi = b;
        if (lo > hi) continue;
        char x[24], y[24];
        snprintf(x, sizeof x, "%lld", (long long)lo);
        snprintf(y, sizeof y, "%lld", (long long)hi);
        if (alts++) sb_add(o, " | ");
        sb_add(o, "( ");
        range_same_len(o, x, y, (size_t)k);
        sb_add(o, " )");
    }
}

static void int_range(sbuf *o, int64_t lo, int64_t hi) {
    int alts = 0;
    if (lo < 0) { /* negatives: "-" then [max(1, -hi), -lo] */
        int64_t a = hi < 0 ? -hi : 1;
        sb_add(o, "\"-\" ( ");
        range_nonneg(o, a, -lo);
        sb_add(o, " )");
        alts++;
    }
    if (hi >= 0) {
        if (alts) sb_add(o, " | ");
        range_nonneg(o, lo > 0 ? lo : 0, hi);
    }
}

/* A bound (integer, or real rounded inwards); false if not a number. */
static bool get_bound(const json_t *v, bool is_min, bool exclusive, int64_t *out) {
    double d;
    if (json_is_integer(v)) {
        int64_t x = json_integer_value(v);
        if (exclusive) x += is_min ? 1 : -1;
        *out = x;
        return true;
    }
    if (!json_is_real(v)) return false;
    d = json_real_value(v);
    if (!isfinite(d)) return false;
    if (d > 1e17) d = 1e17;
    if (d < -1e17) d = -1e17;
    double r = is_min ? ceil(d) : floor(d);
    if (exclusive && r == d) r += is_min ? 1 : -1;
    *out = (int64_t)r;
    return true;
}

/* ------------------------------------------------------------------------
 * Schemas
 * ---------------------------------------------------------------------- */

static const char *visit(conv *c, const json_t *s, const char *hint);

static const json_t *resolve_pointer(conv *c, const char *ref) {
    if (ref[0] != '#') {
        cerr(c, "unsupported remote $ref '%s' (only references into the same document)", ref);
        return NULL;
    }
    const char *p = ref + 1;
    const json_t *cur = c->root;
    if (*p && *p != '/') {
        cerr(c, "unsupported $ref '%s' (anchors are not supported)", ref);
        return NULL;
    }
    char tok[256];
    while (*p == '/') {
        p++;
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            char ch = *p++;
            if (ch == '~' && (*p == '0' || *p == '1')) ch = *p++ == '0' ? '~' : '/';
            else if (ch == '%' && p[0] && p[1]) {
                char hx[3] = {p[0], p[1], 0};
                char *end;
                long v = strtol(hx, &end, 16);
                if (*end == '\0') {
                    ch = (char)v;
                    p += 2;
                }
            }
            tok[n++] = ch;
        }
        tok[n] = '\0';
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            char *end;
            unsigned long i = strtoul(tok, &end, 10);
            cur = *end == '\0' && n > 0 ? json_array_get(cur, i) : NULL;
        } else {
            cur = NULL;
        }
        if (!cur) {
            cerr(c, "$ref '%s' does not resolve", ref);
            return NULL;
        }
    }
    return cur;
}

static const char *visit_ref(conv *c, const json_t *s) {
    const json_t *r = json_object_get(s, "$ref");
    if (!json_is_string(r)) {
        cerr(c, "'$ref' must be a string");
        return NULL;
    }
    const char *ref = json_string_value(r);
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) return c->rules[c->refs[i].rule].name;
    const json_t *target = resolve_pointer(c, ref);
    if (!target) return NULL;
    if (c->n_refs == c->cap_refs) {
        int nc = c->cap_refs ? 2 * c->cap_refs : 16;
        cref *nr = realloc(c->refs, (size_t)nc * sizeof *nr);
        if (!nr) {
            c->oom = c->failed = true;
            return NULL;
        }
        c->refs = nr;
        c->cap_refs = nc;
    }
    const char *slash = strrchr(ref, '/');
    char hint[80];
    snprintf(hint, sizeof hint, "ref-%s", slash ? slash + 1 : "root");
    int ri = rule_new(c, hint, false, NULL);
    if (ri < 0) return NULL;
    c->refs[c->n_refs].ref = strdup(ref);
    if (!c->refs[c->n_refs].ref) {
        c->oom = c->failed = true;
        return NULL;
    }
    c->refs[c->n_refs++].rule = ri;
    /* errors inside the target are reported at its own location */
    char saved_path[sizeof c->path];
    size_t saved_len = c->path_len;
    memcpy(saved_path, c->path, sizeof saved_path);
    snprintf(c->path, sizeof c->path, "%s", ref);
    c->path_len = strlen(c->path);
    const char *t = visit(c, target, hint);
    memcpy(c->path, saved_path, sizeof saved_path);
    c->path_len = saved_len;
    if (!t) return NULL;
    set_body(c, ri, t);
    return c->rules[ri].name;
}

/* Alternatives of a schema array (anyOf / oneOf / type lists). */
static const char *visit_alternatives(conv *c, const json_t *arr, const char *key, const char *hint) {
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        cerr(c, "'%s' must be a non-empty array of schemas", key);
        return NULL;
    }
    sbuf b = {0};
    size_t i;
    const json_t *alt;
    bool ok = true;
    json_array_foreach(arr, i, alt) {
        size_t sv, sv2;
        path_push(c, key, &sv);
        path_push_index(c, i, &sv2);
        char h[80];
        snprintf(h, sizeof h, "%s-%zu", hint, i);
        const char *r = visit(c, alt, h);
        path_pop(c, sv);
        if (!r) {
            ok = false;
            continue;
        }
        if (i) sb_add(&b, " | ");
        sb_add(&b, r);
    }
    const char *res = ok ? add_rule(c, hint, &b) : NULL;
    free(b.s);
    return res;
}

/* Literal JSON text of a value (enum / const). */
static bool sb_json_literal(conv *c, sbuf *b, const json_t *v) {
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) {
        cerr(c, "cannot encode an enum/const value");
        return false;
    }
    sb_literal(b, t, strlen(t));
    free(t);
    return true;
}

static bool type_matches(const char *type, const json_t *v) {
    if (!type) return true;
    if (!strcmp(type, "string")) return json_is_string(v);
    if (!strcmp(type, "integer")) return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(type, "number")) return json_is_number(v);
    if (!strcmp(type, "boolean")) return json_is_boolean(v);
    if (!strcmp(type, "null")) return json_is_null(v);
    if (!strcmp(type, "object")) return json_is_object(v);
    if (!strcmp(type, "array")) return json_is_array(v);
    return false;
}

/* Rule for strings that are none of names (additional property keys):
 * unescaped characters only, so a key can never spell a declared name
 * with escapes. A trie over the names' code points. */
typedef struct knode {
    uint32_t cp;
    bool terminal;
    struct knode *kids, *next;
} knode;

static void knode_free(knode *n) {
    while (n) {
        knode *nx = n->next;
        knode_free(n->kids);
        free(n);
        n = nx;
    }
}

static bool utf8_next(const char **p, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)*p;
    int n = s[0] < 0x80 ? 1 : s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : 2;
    uint32_t v = n == 1 ? s[0] : s[0] & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return false;
        v = v << 6 | (s[i] & 0x3F);
    }
    *cp = v;
    *p += n;
    return true;
}

static const char *key_rule_node(conv *c, const knode *kn, const char *hint) {
    sbuf b = {0};
    int alts = 0;
    if (!kn->terminal) sb_add(&b, "\"\\\"\""), alts++;
    for (const knode *k = kn->kids; k; k = k->next) {
        const char *sub = key_rule_node(c, k, hint);
        if (!sub) {
            free(b.s);
            return NULL;
        }
        if (alts++) sb_add(&b, " | ");
        sb_add(&b, "\"");
        sb_cp(&b, k->cp);
        sb_printf(&b, "\" %s", sub);
    }
    if (alts) sb_add(&b, " | ");
    sb_add(&b, "[^\"\\\\\\x7F\\x00-\\x1F");
    for (const knode *k = kn->kids; k; k = k->next) sb_cp(&b, k->cp);
    sb_add(&b, "] key-char* \"\\\"\"");
    const char *r = add_rule(c, hint, &b);
    free(b.s);
    return r;
}

static const char *not_keys_rule(conv *c, const char *const *names, int n, const char *hint) {
    knode root = {0};
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        const char *p = names[i];
        if (strpbrk(p, "\"\\")) continue; /* not writable without escapes anyway */
        knode *cur = &root;
        bool skip = false;
        while (*p && ok) {
            uint32_t cp;
            if (!utf8_next(&p, &cp)) {
                skip = true;
                break;
            }
            if (cp < 0x20 || cp == 0x7F) {
                skip = true;
                break;
            }
            knode **pp = &cur->kids;
            while (*pp && (*pp)->cp != cp) pp = &(*pp)->next;
            if (!*pp) {
                *pp = calloc(1, sizeof **pp);
                if (!*pp) {
                    ok = false;
                    break;
                }
                (*pp)->cp = cp;
            }
            cur = *pp;
        }
        if (ok && !skip) cur->terminal = true;
    }
    const char *r = NULL;
    if (!ok) c->oom = c->failed = true;
    else if (prim(c, "key-char")) {
        const char *body = key_rule_node(c, &root, hint);
        if (body) {
            sbuf b = {0};
            sb_printf(&b, "\"\\\"\" %s", body);
            r = add_rule(c, hint, &b);
            free(b.s);
        }
    }
    knode_free(root.kids);
    return r;
}

static const char *visit_object(conv *c, const json_t *s, const char *hint) {
    const json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    const json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) {
        cerr(c, "'properties' must be an object");
        return NULL;
    }
    if (req && !json_is_array(req)) {
        cerr(c, "'required' must be an array of strings");
        return NULL;
    }
    if (addl && !json_is_boolean(addl) && !json_is_object(addl)) {
        cerr(c, "'additionalProperties' must be a boolean or a schema");
        return NULL;
    }
    bool addl_any = addl ? json_is_true(addl) : !props; /* llama.cpp: absent with properties = false */
    const json_t *addl_schema = json_is_object(addl) ? addl : NULL;
    size_t n_props = props ? json_object_size(props) : 0, n_req = req ? json_array_size(req) : 0;
    if (n_props == 0 && n_req == 0 && addl_any && !addl_schema) return prim(c, "object");
    /* every key, in order: properties, then required names without one */
    size_t n_keys = 0, cap = n_props + n_req + 1;
    const char **keys = calloc(cap, sizeof *keys);
    const char **kv = calloc(cap, sizeof *kv);
    bool *isreq = calloc(cap, sizeof *isreq);
    sbuf b = {0};
    const char *res = NULL;
    if (!keys || !kv || !isreq) {
        c->oom = c->failed = true;
        goto done;
    }
    for (size_t i = 0; i < n_req; i++)
        if (!json_is_string(json_array_get(req, i))) {
            cerr(c, "'required' must be an array of strings");
            goto done;
        }
    const char *k;
    const json_t *v;
    bool ok = true;
    if (props) {
        json_object_foreach((json_t *)props, k, v) {
            keys[n_keys] = k;
            for (size_t i = 0; i < n_req; i++) isreq[n_keys] |= !strcmp(json_string_value(json_array_get(req, i)), k);
            size_t sv, sv2;
            path_push(c, "properties", &sv);
            path_push(c, k, &sv2);
            char h[96];
            snprintf(h, sizeof h, "%s-%s", hint, k);
            const char *r = visit(c, v, h);
            path_pop(c, sv);
            if (!r) {
                ok = false;
                n_keys++;
                continue;
            }
            sbuf kb = {0};
            json_t *ks = json_string(k);
            char *kt = ks ? json_dumps(ks, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
            json_decref(ks);
            if (!kt) {
                c->oom = c->failed = true;
                goto done;
            }
            sb_literal(&kb, kt, strlen(kt));
            free(kt);
            sb_printf(&kb, " space \":\" space %s", r);
            snprintf(h, sizeof h, "%s-%s-kv", hint, k);
            kv[n_keys++] = add_rule(c, h, &kb);
            free(kb.s);
            if (!kv[n_keys - 1]) ok = false;
        }
    }
    for (size_t i = 0; i < n_req; i++) {
        const char *rn = json_string_value(json_array_get(req, i));
        bool seen = false;
        for (size_t j = 0; j < n_keys; j++) seen |= !strcmp(keys[j], rn);
        if (seen) continue;
        if (json_is_false(addl)) {
            cerr(c, "required '%s' has no property schema and additionalProperties is false: no object fits", rn);
            ok = false;
            continue;
        }
        const char *val = prim(c, "value") ? "value" : NULL;
        if (!val) {
            ok = false;
            continue;
        }
        sbuf kb = {0};
        json_t *ks = json_string(rn);
        char *kt = ks ? json_dumps(ks, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        json_decref(ks);
        if (!kt) {
            c->oom = c->failed = true;
            goto done;
        }
        sb_literal(&kb, kt, strlen(kt));
        free(kt);
        sb_add(&kb, " space \":\" space value");
        char h[96];
        snprintf(h, sizeof h, "%s-%s-kv", hint, rn);
        keys[n_keys] = rn;
        isreq[n_keys] = true;
        kv[n_keys++] = add_rule(c, h, &kb);
        free(kb.s);
        if (!kv[n_keys - 1]) ok = false;
    }
    if (!ok || !prim(c, "space")) goto done;
    /* additional properties: key rule + value */
    const char *add_kv = NULL;
    if (addl_any || addl_schema) {
        const char *val;
        if (addl_schema) {
            size_t sv;
            path_push(c, "additionalProperties", &sv);
            char h[96];
            snprintf(h, sizeof h, "%s-additional-value", hint);
            val = visit(c, addl_schema, h);
            path_pop(c, sv);
        } else {
            val = prim(c, "value");
        }
        char h[96];
        snprintf(h, sizeof h, "%s-additional-key", hint);
        const char *key = not_keys_rule(c, keys, (int)n_keys, h);
        if (!val || !key) goto done;
        sbuf kb = {0};
        sb_printf(&kb, "%s space \":\" space %s", key, val);
        snprintf(h, sizeof h, "%s-additional-kv", hint);
        add_kv = add_rule(c, h, &kb);
        free(kb.s);
        if (!add_kv) goto done;
    }
    /* optional entries O_1..O_n then the additional kv (repeated); the
     * tail after O_i is T(i+1) = ( "," space O_{i+1} )? T(i+2) ... */
    size_t n_opt = 0;
    const char **opt = calloc(n_keys + 2, sizeof *opt);
    const char **tail = calloc(n_keys + 3, sizeof *tail); /* tail[i]: rule for entries i.. (NULL = nothing) */
    if (!opt || !tail) {
        free(opt);
        free(tail);
        c->oom = c->failed = true;
        goto done;
    }
    for (size_t i = 0; i < n_keys; i++)
        if (!isreq[i]) opt[n_opt++] = kv[i];
    size_t n_ent = n_opt + (add_kv ? 1 : 0);
    tail[n_ent] = NULL;
    for (size_t i = n_ent; i-- > 0;) {
        sbuf tb = {0};
        if (i == n_opt) sb_printf(&tb, "( \",\" space %s )*", add_kv);
        else sb_printf(&tb, "( \",\" space %s )?", opt[i]);
        if (tail[i + 1]) sb_printf(&tb, " %s", tail[i + 1]);
        char h[96];
        snprintf(h, sizeof h, "%s-rest", hint);
        tail[i] = add_rule(c, h, &tb);
        free(tb.s);
        if (!tail[i]) break;
    }
    bool tails_ok = true;
    for (size_t i = 0; i < n_ent; i++) tails_ok &= tail[i] != NULL;
    if (tails_ok) {
        sb_add(&b, "\"{\" space");
        size_t r = 0;
        for (size_t i = 0; i < n_keys; i++) {
            if (!isreq[i]) continue;
            sb_printf(&b, r++ ? " \",\" space %s" : " %s", kv[i]);
        }
        if (r > 0) {
            if (n_ent > 0) sb_printf(&b, " %s", tail[0]);
        } else if (n_ent > 0) {
            sb_add(&b, " (");
            for (size_t i = 0; i < n_ent; i++) {
                if (i) sb_add(&b, " |");
                if (i == n_opt) sb_printf(&b, " %s ( \",\" space %s )*", add_kv, add_kv);
                else sb_printf(&b, " %s", opt[i]);
                if (i != n_opt && tail[i + 1]) sb_printf(&b, " %s", tail[i + 1]);
            }
            sb_add(&b, " )?");
        }
        sb_add(&b, " space \"}\"");
        res = add_rule(c, hint, &b);
    }
    free(opt);
    free(tail);
done:
    free(b.s);
    free(keys);
    free(kv);
    free(isreq);
    return res;
}

static const char *visit_array(conv *c, const json_t *s, const char *hint) {
    const json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    int64_t lo, hi;
    if (!get_count(c, s, "minItems", 0, &lo) || !get_count(c, s, "maxItems", -1, &hi)) return NULL;
    if (hi >= 0 && lo > hi) {
        cerr(c, "minItems %lld > maxItems %lld: no array fits", (long long)lo, (long long)hi);
        return NULL;
    }
    if (!prim(c, "space")) return NULL;
    sbuf b = {0};
    const char *res = NULL;
    const json_t *tuple = json_is_array(prefix) ? prefix : json_is_array(items) ? items : NULL;
    const char *tkey = tuple == prefix ? "prefixItems" : "items";
    if (prefix && !json_is_array(prefix)) {
        cerr(c, "'prefixItems' must be an array of schemas");
        return NULL;
    }
    if (tuple) {
        size_t n = json_array_size(tuple);
        if ((int64_t)n < lo || (hi >= 0 && (int64_t)n > hi)) {
            cerr(c, "unsupported: a tuple of %zu items with minItems/maxItems other than that", n);
            return NULL;
        }
        sb_add(&b, "\"[\" space");
        size_t i;
        const json_t *it;
        json_array_foreach(tuple, i, it) {
            size_t sv, sv2;
            path_push(c, tkey, &sv);
            path_push_index(c, i, &sv2);
            char h[96];
            snprintf(h, sizeof h, "%s-%zu", hint, i);
            const char *r = visit(c, it, h);
            path_pop(c, sv);
            if (!r) goto done;
            sb_printf(&b, i ? " \",\" space %s" : " %s", r);
        }
        sb_add(&b, " space \"]\"");
        res = add_rule(c, hint, &b);
        goto done;
    }
    const char *item;
    if (!items || json_is_true(items)) {
        if (lo == 0 && hi < 0) return prim(c, "array");
        item = prim(c, "value");
    } else {
        if (json_is_false(items)) {
            if (lo > 0) {
                cerr(c, "'items': false with minItems > 0: no array fits");
                return NULL;
            }
            hi = 0;
            item = "value";
        } else {
            size_t sv;
            path_push(c, "items", &sv);
            char h[96];
            snprintf(h, sizeof h, "%s-item", hint);
            item = visit(c, items, h);
            path_pop(c, sv);
        }
    }
    if (!item) return NULL;
    sb_add(&b, "\"[\" space ");
    if (hi != 0) {
        sbuf rep = {0};
        sb_printf(&rep, "( \",\" space %s )", item);
        if (lo == 0) sb_add(&b, "( ");
        sb_printf(&b, "%s ", item);
        sb_repeat(&b, rep.s ? rep.s : "", lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
        if (lo == 0) sb_add(&b, " )?");
        sb_add(&b, " ");
        free(rep.s);
    }
    sb_add(&b, "space \"]\"");
    res = add_rule(c, hint, &b);
done:
    free(b.s);
    return res;
}

static const char *visit_string(conv *c, const json_t *s, const char *hint) {
    const json_t *fmt = json_object_get(s, "format");
    int64_t lo, hi;
    if (!get_count(c, s, "minLength", 0, &lo) || !get_count(c, s, "maxLength", -1, &hi)) return NULL;
    if (fmt) {
        if (!json_is_string(fmt)) {
            cerr(c, "'format' must be a string");
            return NULL;
        }
        const char *f = json_string_value(fmt), *p = NULL;
        if (!strcmp(f, "date") || !strcmp(f, "time") || !strcmp(f, "date-time")) p = f;
        else if (!strcmp(f, "uuid")) return prim(c, "uuid");
        if (!p) {
            cerr(c, "unsupported format '%s' (supported: date, time, date-time, uuid)", f);
            return NULL;
        }
        if (lo > 0 || hi >= 0) {
            cerr(c, "unsupported: minLength/maxLength together with format");
            return NULL;
        }
        if (!prim(c, p)) return NULL;
        sbuf b = {0};
        sb_printf(&b, "\"\\\"\" %s \"\\\"\"", p);
        char h[64];
        snprintf(h, sizeof h, "%s-string", p);
        const char *r = add_rule(c, h, &b);
        free(b.s);
        return r;
    }
    if (hi >= 0 && lo > hi) {
        cerr(c, "minLength %lld > maxLength %lld: no string fits", (long long)lo, (long long)hi);
        return NULL;
    }
    if (lo == 0 && hi < 0) return prim(c, "string");
    if (!prim(c, "char")) return NULL;
    sbuf b = {0};
    sb_add(&b, "\"\\\"\" ");
    sb_repeat(&b, "char", lo, hi);
    sb_add(&b, " \"\\\"\"");
    const char *r = add_rule(c, hint, &b);
    free(b.s);
    return r;
}

static const char *visit_integer(conv *c, const json_t *s, const char *hint) {
    int64_t lo = -INT_LIMIT, hi = INT_LIMIT;
    bool any = false;
    static const struct {
        const char *key;
        bool is_min, exclusive;
    } B[] = {{"minimum", true, false}, {"exclusiveMinimum", true, true}, {"maximum", false, false},
             {"exclusiveMaximum", false, true}};
    for (int i = 0; i < 4; i++) {
        const json_t *v = json_object_get(s, B[i].key);
        if (!v) continue;
        if (json_is_boolean(v)) { /* draft-04: exclusiveMinimum: true modifies minimum */
            if (json_is_true(v)) {
                if (B[i].is_min) lo = lo == -INT_LIMIT ? lo : lo + 1;
                else hi = hi == INT_LIMIT ? hi : hi - 1;
            }
            continue;
        }
        int64_t x;
        if (!get_bound(v, B[i].is_min, B[i].exclusive, &x)) {
            cerr(c, "'%s' must be a number", B[i].key);
            return NULL;
        }
        any = true;
        if (B[i].is_min && x > lo) lo = x;
        if (!B[i].is_min && x < hi) hi = x;
    }
    if (!any) return prim(c, "integer");
    if (lo < -INT_LIMIT) lo = -INT_LIMIT;
    if (hi > INT_LIMIT) hi = INT_LIMIT;
    if (lo > hi) {
        cerr(c, "no integer within minimum/maximum (of at most 16 digits)");
        return NULL;
    }
    sbuf b = {0};
    int_range(&b, lo, hi);
    const char *r = add_rule(c, hint, &b);
    free(b.s);
    return r;
}

static const char *visit_typed(conv *c, const json_t *s, const char *type, const char *hint) {
    if (!strcmp(type, "object")) return visit_object(c, s, hint);
    if (!strcmp(type, "array")) return visit_array(c, s, hint);
    if (!strcmp(type, "string")) return visit_string(c, s, hint);
    if (!strcmp(type, "integer")) return visit_integer(c, s, hint);
    if (!strcmp(type, "number")) {
        static const char *const NB[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
        for (int i = 0; NB[i]; i++)
            if (json_object_get(s, NB[i])) {
                cerr(c, "unsupported keyword '%s' on type number (supported on integer)", NB[i]);
                return NULL;
            }
        return prim(c, "number");
    }
    if (!strcmp(type, "boolean")) return prim(c, "boolean");
    if (!strcmp(type, "null")) return prim(c, "null");
    cerr(c, "unknown type '%s'", type);
    return NULL;
}

static uint32_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

static const char **memo_slot(conv *c, const json_t *s) {
    if ((c->memo_n + 1) * 2 > c->memo_cap) {
        int nc = c->memo_cap ? 2 * c->memo_cap : 256;
        const json_t **nk = calloc((size_t)nc, sizeof *nk);
        const char **nv = calloc((size_t)nc, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return NULL;
        }
        for (int i = 0; i < c->memo_cap; i++) {
            if (!c->memo_key[i]) continue;
            uint32_t h = ptr_hash(c->memo_key[i]) & (uint32_t)(nc - 1);
            while (nk[h]) h = (h + 1) & (uint32_t)(nc - 1);
            nk[h] = c->memo_key[i];
            nv[h] = c->memo_val[i];
        }
        free(c->memo_key);
        free(c->memo_val);
        c->memo_key = nk;
        c->memo_val = nv;
        c->memo_cap = nc;
    }
    uint32_t h = ptr_hash(s) & (uint32_t)(c->memo_cap - 1);
    while (c->memo_key[h] && c->memo_key[h] != s) h = (h + 1) & (uint32_t)(c->memo_cap - 1);
    if (!c->memo_key[h]) {
        c->memo_key[h] = s;
        c->memo_val[h] = NULL;
        c->memo_n++;
    }
    return &c->memo_val[h];
}

static const char *visit_node(conv *c, const json_t *s, const char *hint);

static const char *visit(conv *c, const json_t *s, const char *hint) {
    if (c->oom) return NULL;
    if (!json_is_object(s)) return visit_node(c, s, hint);
    const char **slot = memo_slot(c, s);
    if (!slot) {
        c->oom = c->failed = true;
        return NULL;
    }
    if (*slot) return *slot;
    const char *r = visit_node(c, s, hint);
    slot = memo_slot(c, s); /* the table may have grown */
    if (slot) *slot = r;
    return r;
}

static const char *visit_node(conv *c, const json_t *s, const char *hint) {
    if (json_is_true(s)) return prim(c, "value");
    if (json_is_false(s)) {
        cerr(c, "schema false matches nothing");
        return NULL;
    }
    if (!json_is_object(s)) {
        cerr(c, "a schema must be an object or a boolean");
        return NULL;
    }
    if (c->depth >= JSON_SCHEMA_MAX_DEPTH) {
        cerr(c, "schema nested deeper than %d levels", JSON_SCHEMA_MAX_DEPTH);
        return NULL;
    }
    c->depth++;
    const char *res = NULL;
    const json_t *type = json_object_get(s, "type");
    if (json_object_get(s, "$ref")) {
        check_keywords(c, s, "$ref");
        res = visit_ref(c, s);
    } else if (json_object_get(s, "anyOf") || json_object_get(s, "oneOf")) {
        const char *key = json_object_get(s, "anyOf") ? "anyOf" : "oneOf";
        check_keywords(c, s, key);
        res = visit_alternatives(c, json_object_get(s, key), key, hint);
    } else if (json_object_get(s, "allOf")) {
        const json_t *all = json_object_get(s, "allOf");
        check_keywords(c, s, "allOf");
        if (!json_is_array(all) || json_array_size(all) != 1) {
            cerr(c, "unsupported 'allOf' with other than one member");
        } else {
            size_t sv, sv2;
            path_push(c, "allOf", &sv);
            path_push_index(c, 0, &sv2);
            res = visit(c, json_array_get(all, 0), hint);
            path_pop(c, sv);
        }
    } else if (json_object_get(s, "const") || json_object_get(s, "enum")) {
        check_keywords(c, s, NULL);
        const char *tname = json_is_string(type) ? json_string_value(type) : NULL;
        const json_t *cv = json_object_get(s, "const"), *ev = json_object_get(s, "enum");
        sbuf b = {0};
        int n = 0;
        if (cv) {
            if (type_matches(tname, cv) && sb_json_literal(c, &b, cv)) n++;
        } else if (!json_is_array(ev)) {
            cerr(c, "'enum' must be an array");
        } else {
            size_t i;
            const json_t *v;
            json_array_foreach(ev, i, v) {
                if (!type_matches(tname, v)) continue;
                if (n++) sb_add(&b, " | ");
                if (!sb_json_literal(c, &b, v)) break;
            }
        }
        if (!c->failed && n == 0) cerr(c, "'%s' allows no value (empty, or none of the right type)", cv ? "const" : "enum");
        if (!c->failed) res = add_rule(c, hint, &b);
        free(b.s);
    } else {
        check_keywords(c, s, NULL);
        { /* errors are collected: siblings are visited even after one */
            if (json_is_array(type)) {
                /* {"type": [a, b], ...} = anyOf of the same schema with each type */
                sbuf b = {0};
                size_t i;
                const json_t *t;
                bool ok = json_array_size(type) > 0;
                if (!ok) cerr(c, "'type' must not be an empty array");
                json_array_foreach(type, i, t) {
                    if (!json_is_string(t)) {
                        cerr(c, "'type' must hold strings");
                        ok = false;
                        break;
                    }
                    char h[96];
                    snprintf(h, sizeof h, "%s-%s", hint, json_string_value(t));
                    const char *r = visit_typed(c, s, json_string_value(t), h);
                    if (!r) {
                        ok = false;
                        break;
                    }
                    if (i) sb_add(&b, " | ");
                    sb_add(&b, r);
                }
                if (ok) res = add_rule(c, hint, &b);
                free(b.s);
            } else if (type && !json_is_string(type)) {
                cerr(c, "'type' must be a string or an array of strings");
            } else if (type) {
                res = visit_typed(c, s, json_string_value(type), hint);
            } else if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ||
                       json_object_get(s, "required")) {
                res = visit_object(c, s, hint);
            } else if (json_object_get(s, "items") || json_object_get(s, "prefixItems") ||
                       json_object_get(s, "minItems") || json_object_get(s, "maxItems")) {
                res = visit_array(c, s, hint);
            } else if (json_object_get(s, "minLength") || json_object_get(s, "maxLength") ||
                       json_object_get(s, "format")) {
                res = visit_string(c, s, hint);
            } else if (json_object_get(s, "minimum") || json_object_get(s, "maximum") ||
                       json_object_get(s, "exclusiveMinimum") || json_object_get(s, "exclusiveMaximum")) {
                cerr(c, "unsupported: minimum/maximum without \"type\": \"integer\"");
            } else {
                res = prim(c, "value"); /* {} accepts any JSON value */
            }
        }
    }
    c->depth--;
    return res;
}

static void conv_free(conv *c) {
    for (int i = 0; i < c->n_rules; i++) {
        free(c->rules[i].name);
        free(c->rules[i].body);
    }
    free(c->rules);
    free(c->ht_name);
    free(c->ht_body);
    for (int i = 0; i < c->n_refs; i++) free(c->refs[i].ref);
    free(c->refs);
    free(c->memo_key);
    free(c->memo_val);
    free(c->errs.s);
}

char *json_schema_to_gbnf(const json_t *schema, char *err, size_t errlen) {
    conv c = {.root = schema, .path = "#", .path_len = 1};
    char *out = NULL;
    if (!schema) {
        bd_err(err, errlen, "json schema: no schema");
        return NULL;
    }
    const char *top = visit(&c, schema, "root");
    if (c.oom) {
        bd_err(err, errlen, "json schema: out of memory");
    } else if (c.failed || !top) {
        bd_err(err, errlen, "json schema: %s", c.errs.s ? c.errs.s : "conversion failed");
    } else {
        sbuf b = {0};
        sb_printf(&b, "root ::= %s\n", top);
        for (int i = 0; i < c.n_rules; i++) sb_printf(&b, "%s ::= %s\n", c.rules[i].name, c.rules[i].body);
        if (b.oom) {
            free(b.s);
            bd_err(err, errlen, "json schema: out of memory");
        } else {
            out = b.s;
        }
    }
    conv_free(&c);
    return out;
}

const char *json_object_gbnf(void) {
    static const char G[] =
        "root ::= object\n"
        "object ::= \"{\" space ( string space \":\" space value ( \",\" space string space \":\" space value )* )? space \"}\"\n"
        "value ::= object | array | string | number | boolean | null\n"
        "array ::= \"[\" space ( value ( \",\" space value )* )? space \"]\"\n"
        "string ::= \"\\\"\" char* \"\\\"\"\n"
        "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )\n"
        "number ::= \"-\"? integral-part ( \".\" decimal-part )? ( [eE] [-+]? [0-9]{1,2} )?\n"
        "integral-part ::= [0] | [1-9] [0-9]{0,15}\n"
        "decimal-part ::= [0-9]{1,16}\n"
        "boolean ::= \"true\" | \"false\"\n"
        "null ::= \"null\"\n"
        "space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n";
    return G;
}

bd_grammar *json_schema_grammar(const json_t *schema, const bd_grammar_vocab *v, char *err, size_t errlen) {
    if (!schema) {
        const char *g = json_object_gbnf();
        return bd_grammar_create(g, strlen(g), v, err, errlen);
    }
    char *g = json_schema_to_gbnf(schema, err, errlen);
    if (!g) return NULL;
    bd_grammar *gr = bd_grammar_create(g, strlen(g), v, err, errlen);
    free(g);
    return gr;
}
