/*
 * jinja_filters.c - the builtin filters and tests of Jinja2 3.1 that chat
 * templates use, with tojson replaced the way transformers does it
 * (json.dumps(x, ensure_ascii=False, indent, separators, sort_keys)).
 *
 * Filters that return generators in Jinja (map, select, reverse, unique, ...)
 * return lists here; they behave the same in loops, |list, |join, |length.
 * Undefined inputs behave as Jinja's default Undefined: string filters see
 * "", sequence filters see an empty sequence, tojson raises.
 */
#include "jinja_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F(name) static jinja_value *f_##name(jx_ctx *cx, jinja_value *v, jx_args *a, const jx_node *at)
#define T(name) static int t_##name(jx_ctx *cx, jinja_value *v, jx_args *a, const jx_node *at)

static jinja_value *soft_str(jx_ctx *cx, jinja_value *v) { return jv_to_str(cx, v); }

/* ========================================================================
 * Tests
 * ====================================================================== */

#define NOARGS(name)                                                                                             \
    do {                                                                                                         \
        if (!jx_args_check(cx, a, 0, NULL, name, at)) return -1;                                                 \
    } while (0)

T(defined) { NOARGS("defined"); return v->kind != JV_UNDEF; }
T(undefined) { NOARGS("undefined"); return v->kind == JV_UNDEF; }
T(none) { NOARGS("none"); return v->kind == JV_NONE; }
T(boolean) { NOARGS("boolean"); return v->kind == JV_BOOL; }
T(true) { NOARGS("true"); return v->kind == JV_BOOL && v->u.b; }
T(false) { NOARGS("false"); return v->kind == JV_BOOL && !v->u.b; }
T(integer) { NOARGS("integer"); return v->kind == JV_INT; }
T(float) { NOARGS("float"); return v->kind == JV_FLOAT; }
T(number) { NOARGS("number"); return jv_is_num(v); }
T(string) { NOARGS("string"); return v->kind == JV_STR; }
T(mapping) { NOARGS("mapping"); return v->kind == JV_DICT; }
/* iter() succeeds; Undefined is iterable (empty) */
T(iterable) { NOARGS("iterable"); return v->kind == JV_STR || v->kind == JV_LIST || v->kind == JV_DICT || v->kind == JV_UNDEF; }
/* len() and __getitem__ exist: str, list, tuple, dict and Undefined */
T(sequence) { NOARGS("sequence"); return v->kind == JV_STR || v->kind == JV_LIST || v->kind == JV_DICT || v->kind == JV_UNDEF; }
T(callable) { NOARGS("callable"); return v->kind == JV_FUNC || v->kind == JV_MACRO; }
T(escaped) { NOARGS("escaped"); (void)v; return 0; }

static int int_of(jx_ctx *cx, jinja_value *v, int64_t *o, const jx_node *at) {
    if (v->kind == JV_INT) *o = v->u.i;
    else if (v->kind == JV_BOOL) *o = v->u.b;
    else if (v->kind == JV_UNDEF) return jx_fail_undef(cx, v, at), -1;
    else {
        jx_fail(cx, JINJA_ERR_TYPE, at, "unsupported operand type(s) for %%: '%s' and 'int'", jv_type_name(v));
        return -1;
    }
    return 0;
}
T(odd) {
    NOARGS("odd");
    int64_t i;
    if (int_of(cx, v, &i, at) < 0) return -1;
    return (i % 2) != 0;
}
T(even) {
    NOARGS("even");
    int64_t i;
    if (int_of(cx, v, &i, at) < 0) return -1;
    return (i % 2) == 0;
}
T(divisibleby) {
    if (!jx_args_check(cx, a, 1, NULL, "divisibleby", at)) return -1;
    jinja_value *n = jx_arg(a, 0, "num");
    int64_t x, y;
    if (!n) return jx_fail(cx, JINJA_ERR_TYPE, at, "divisibleby() missing argument 'num'"), -1;
    if (int_of(cx, v, &x, at) < 0 || int_of(cx, n, &y, at) < 0) return -1;
    if (y == 0) return jx_fail(cx, JINJA_ERR_ZERODIV, at, "integer division or modulo by zero"), -1;
    return x % y == 0;
}

static jinja_value *one_arg(jx_ctx *cx, jx_args *a, const char *name, const jx_node *at) {
    if (!jx_args_check(cx, a, 1, NULL, name, at)) return NULL;
    jinja_value *o = jx_arg(a, 0, NULL);
    if (!o) jx_fail(cx, JINJA_ERR_TYPE, at, "test '%s' needs one argument", name);
    return o;
}
T(eq) { jinja_value *o = one_arg(cx, a, "eq", at); return o ? jv_equal(v, o) : -1; }
T(ne) { jinja_value *o = one_arg(cx, a, "ne", at); return o ? !jv_equal(v, o) : -1; }
static int cmp_test(jx_ctx *cx, jinja_value *v, jx_args *a, const jx_node *at, const char *name) {
    jinja_value *o = one_arg(cx, a, name, at);
    int c;
    if (!o || !jv_compare(cx, v, o, &c, at)) return -2;
    return c;
}
T(lt) { int c = cmp_test(cx, v, a, at, "lt"); return c == -2 ? -1 : c < 0; }
T(le) { int c = cmp_test(cx, v, a, at, "le"); return c == -2 ? -1 : c <= 0; }
T(gt) { int c = cmp_test(cx, v, a, at, "gt"); return c == -2 ? -1 : c > 0; }
T(ge) { int c = cmp_test(cx, v, a, at, "ge"); return c == -2 ? -1 : c >= 0; }
T(sameas) {
    jinja_value *o = one_arg(cx, a, "sameas", at);
    if (!o) return -1;
    if (v == o) return 1;
    if (v->kind != o->kind) return 0;
    /* `is` on singletons and small values */
    if (v->kind == JV_NONE || v->kind == JV_UNDEF) return 1;
    if (v->kind == JV_BOOL) return v->u.b == o->u.b;
    return 0;
}
T(in) {
    jinja_value *seq = one_arg(cx, a, "in", at);
    if (!seq) return -1;
    switch (seq->kind) {
    case JV_STR:
        if (v->kind != JV_STR) return jx_fail(cx, JINJA_ERR_TYPE, at, "'in <string>' requires string as left operand, not %s", jv_type_name(v)), -1;
        return v->u.str.len == 0 || memmem(seq->u.str.s, seq->u.str.len, v->u.str.s, v->u.str.len) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < seq->u.list->n; i++)
            if (jv_equal(seq->u.list->items[i], v)) return 1;
        return 0;
    case JV_DICT: return v->kind == JV_STR && jv_dict_get(seq, v->u.str.s, v->u.str.len) != NULL;
    case JV_UNDEF: return 0;
    default: return jx_fail(cx, JINJA_ERR_TYPE, at, "argument of type '%s' is not iterable", jv_type_name(seq)), -1;
    }
}
static int case_test(jx_ctx *cx, jinja_value *v, int upper) {
    jinja_value *s = soft_str(cx, v);
    if (!s) return -1;
    jinja_value *c = jx_str_case(cx, s, upper);
    if (!c) return -1;
    return jv_equal(s, c);
}
T(lower) { NOARGS("lower"); return case_test(cx, v, 0); }
T(upper) { NOARGS("upper"); return case_test(cx, v, 1); }
T(filter) {
    jinja_value *o = one_arg(cx, a, "filter", at);
    if (!o) return -1;
    (void)v;
    return o->kind == JV_STR && jx_filter_lookup(o->u.str.s, o->u.str.len) != NULL;
}
T(test) {
    jinja_value *o = one_arg(cx, a, "test", at);
    if (!o) return -1;
    (void)v;
    return o->kind == JV_STR && jx_test_lookup(o->u.str.s, o->u.str.len) != NULL;
}

static const struct {
    const char *name;
    jx_test_fn fn;
} tests[] = {
    {"defined", t_defined},   {"undefined", t_undefined},     {"none", t_none},         {"boolean", t_boolean},
    {"true", t_true},         {"false", t_false},             {"integer", t_integer},   {"float", t_float},
    {"number", t_number},     {"string", t_string},           {"mapping", t_mapping},   {"iterable", t_iterable},
    {"sequence", t_sequence}, {"callable", t_callable},       {"escaped", t_escaped},   {"odd", t_odd},
    {"even", t_even},         {"divisibleby", t_divisibleby}, {"eq", t_eq},             {"equalto", t_eq},
    {"==", t_eq},             {"ne", t_ne},                   {"!=", t_ne},             {"lt", t_lt},
    {"lessthan", t_lt},       {"<", t_lt},                    {"le", t_le},             {"<=", t_le},
    {"gt", t_gt},             {"greaterthan", t_gt},          {">", t_gt},              {"ge", t_ge},
    {">=", t_ge},             {"sameas", t_sameas},           {"in", t_in},             {"lower", t_lower},
    {"upper", t_upper},       {"filter", t_filter},           {"test", t_test},
};

jx_test_fn jx_test_lookup(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (strlen(tests[i].name) == len && memcmp(tests[i].name, name, len) == 0) return tests[i].fn;
    return NULL;
}

/* ========================================================================
 * Filters: strings
 * ====================================================================== */

#define CHECK(npos, kw, name)                                                                                    \
    do {                                                                                                         \
        if (!jx_args_check(cx, a, npos, kw, name, at)) return NULL;                                              \
    } while (0)

F(string) {
    CHECK(0, NULL, "string");
    return soft_str(cx, v);
}
F(safe) {
    CHECK(0, NULL, "safe");
    return soft_str(cx, v);
}
F(upper) {
    CHECK(0, NULL, "upper");
    jinja_value *s = soft_str(cx, v);
    return s ? jx_str_case(cx, s, 1) : NULL;
}
F(lower) {
    CHECK(0, NULL, "lower");
    jinja_value *s = soft_str(cx, v);
    return s ? jx_str_case(cx, s, 0) : NULL;
}
F(capitalize) {
    CHECK(0, NULL, "capitalize");
    jinja_value *s = soft_str(cx, v);
    return s ? jx_str_case(cx, s, 2) : NULL;
}
F(title) {
    CHECK(0, NULL, "title");
    jinja_value *s = soft_str(cx, v);
    return s ? jx_str_case(cx, s, 4) : NULL;
}
F(trim) {
    static const char *const kw[] = {"chars", NULL};
    CHECK(1, kw, "trim");
    jinja_value *s = soft_str(cx, v);
    if (!s) return NULL;
    jinja_value *ch = jx_arg(a, 0, "chars");
    jinja_value *r = jx_str_strip(cx, s, ch, true, true);
    if (!r && cx->err.line == 0) {
        cx->err.line = at->line;
        cx->err.col = at->col;
    }
    return r;
}
F(replace) {
    static const char *const kw[] = {"old", "new", "count", NULL};
    CHECK(3, kw, "replace");
    jinja_value *s = soft_str(cx, v);
    jinja_value *o = jx_arg(a, 0, "old"), *n = jx_arg(a, 1, "new"), *c = jx_arg(a, 2, "count");
    if (!s) return NULL;
    if (!o || !n) return jx_fail(cx, JINJA_ERR_TYPE, at, "replace() needs old and new");
    o = soft_str(cx, o);
    n = o ? soft_str(cx, n) : NULL;
    if (!n) return NULL;
    int64_t count = -1;
    if (c && c->kind == JV_INT) count = c->u.i;
    return jx_str_replace(cx, s, o, n, count);
}
F(escape) {
    CHECK(0, NULL, "escape");
    jinja_value *s = soft_str(cx, v);
    if (!s) return NULL;
    jx_buf b = {.limit = cx->lim.max_output};
    for (size_t i = 0; i < s->u.str.len; i++) {
        char c = s->u.str.s[i];
        switch (c) {
        case '&': jx_buf_put(&b, "&amp;", 5); break;
        case '<': jx_buf_put(&b, "&lt;", 4); break;
        case '>': jx_buf_put(&b, "&gt;", 4); break;
        case '"': jx_buf_put(&b, "&#34;", 5); break;
        case '\'': jx_buf_put(&b, "&#39;", 5); break;
        default: jx_buf_putc(&b, c);
        }
    }
    if (jv_str_tainted(s)) jx_buf_taint_from(&b, 0);
    jinja_value *r = b.failed ? jx_fail(cx, JINJA_ERR_LIMIT, at, "string too large") : jv_str_from_buf(cx, &b);
    jx_buf_free(&b);
    return r;
}
F(center) {
    static const char *const kw[] = {"width", NULL};
    CHECK(1, kw, "center");
    jinja_value *s = soft_str(cx, v);
    if (!s) return NULL;
    jinja_value *w = jx_arg(a, 0, "width");
    int64_t width = w && w->kind == JV_INT ? w->u.i : 80;
    int64_t len = jv_length(cx, s, at);
    if (width <= len) return s;
    if (width > (int64_t)cx->lim.max_output) return jx_fail(cx, JINJA_ERR_LIMIT, at, "center width too large");
    int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
    jx_buf b = {0};
    for (int64_t i = 0; i < left; i++) jx_buf_putc(&b, ' ');
    jx_buf_put_t(&b, s->u.str.s, s->u.str.len, s->u.str.taint);
    for (int64_t i = 0; i < pad - left; i++) jx_buf_putc(&b, ' ');
    jinja_value *r = b.failed ? jx_fail_oom(cx, at) : jv_str_from_buf(cx, &b);
    jx_buf_free(&b);
    return r;
}
F(indent) {
    static const char *const kw[] = {"width", "first", "blank", NULL};
    CHECK(3, kw, "indent");
    jinja_value *s = soft_str(cx, v);
    if (!s) return NULL;
    jinja_value *w = jx_arg(a, 0, "width"), *first = jx_arg(a, 1, "first"), *blank = jx_arg(a, 2, "blank");
    const char *ind = "    ";
    const uint8_t *ind_t = NULL;
    size_t il = 4;
    char spaces[256];
    if (w && w->kind == JV_STR) {
        ind = w->u.str.s;
        ind_t = w->u.str.taint;
        il = w->u.str.len;
    } else if (w && w->kind == JV_INT) {
        int64_t k = w->u.i < 0 ? 0 : w->u.i > 255 ? 255 : w->u.i;
        memset(spaces, ' ', (size_t)k);
        ind = spaces;
        il = (size_t)k;
    }
    /* s += "\n"; lines = s.splitlines() (newline-only approximation) */
    const char *p = s->u.str.s;
    const uint8_t *pt = s->u.str.taint;
    size_t n = s->u.str.len;
    jx_buf b = {.limit = cx->lim.max_output};
    if (first && jv_truthy(first)) jx_buf_put_t(&b, ind, il, ind_t);
    size_t i = 0;
    bool firstline = true;
    while (i <= n) {
        size_t e = i;
        while (e < n && p[e] != '\n') e++;
        if (e == n && i == n && !firstline) break; /* the appended "\n" ends the last line */
        if (!firstline) {
            jx_buf_putc(&b, '\n');
            bool empty = e == i;
            if (!empty || (blank && jv_truthy(blank))) jx_buf_put_t(&b, ind, il, ind_t);
        }
        jx_buf_put_t(&b, p + i, e - i, pt ? pt + i : NULL);
        firstline = false;
        if (e >= n) break;
        i = e + 1;
    }
    jinja_value *r = b.failed ? jx_fail(cx, JINJA_ERR_LIMIT, at, "string too large") : jv_str_from_buf(cx, &b);
    jx_buf_free(&b);
    return r;
}
F(wordcount) {
    CHECK(0, NULL, "wordcount");
    jinja_value *s = soft_str(cx, v);
    if (!s) return NULL;
    int64_t c = 0;
    bool in = false;
    size_t i = 0;
    while (i < s->u.str.len) {
        uint32_t cp = jx_utf8_next(s->u.str.s, s->u.str.len, &i);
        bool w = cp == '_' || (cp >= '0' && cp <= '9') || ((cp | 32) >= 'a' && (cp | 32) <= 'z') || cp >= 0x80;
        if (cp >= 0x80 && (jx_is_space_cp(cp) || cp == 0xa0)) w = false;
        if (w && !in) c++;
        in = w;
    }
    return jv_int(cx, c);
}

/* ========================================================================
 * Filters: numbers
 * ====================================================================== */

/* Python int(str, 10) / float(str) parsing: surrounding whitespace, sign, underscores. */
static bool parse_py_int(const char *s, size_t n, int64_t base, int64_t *out) {
    size_t i = 0;
    while (i < n && (s[i] == ' ' || (s[i] >= 9 && s[i] <= 13))) i++;
    while (n > i && (s[n - 1] == ' ' || (s[n - 1] >= 9 && s[n - 1] <= 13))) n--;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i >= n) return false;
    uint64_t v = 0;
    bool prev_us = true;
    for (; i < n; i++) {
        char c = s[i];
        if (c == '_') {
            if (prev_us) return false;
            prev_us = true;
            continue;
        }
        int d = (c >= '0' && c <= '9') ? c - '0' : ((c | 32) >= 'a' && (c | 32) <= 'z') ? (c | 32) - 'a' + 10 : 99;
        if (d >= base) return false;
        if (v > ((uint64_t)INT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
        v = v * (uint64_t)base + (uint64_t)d;
        prev_us = false;
    }
    if (prev_us) return false;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

static bool parse_py_float(const char *s, size_t n, double *out) {
    char buf[128];
    size_t i = 0, o = 0;
    while (i < n && (s[i] == ' ' || (s[i] >= 9 && s[i] <= 13))) i++;
    while (n > i && (s[n - 1] == ' ' || (s[n - 1] >= 9 && s[n - 1] <= 13))) n--;
    if (i >= n || n - i >= sizeof buf) return false;
    for (; i < n; i++)
        if (s[i] != '_') buf[o++] = s[i];
    buf[o] = 0;
    char *end;
    double d = strtod(buf, &end);
    if (end == buf || *end) return false;
    /* strtod accepts hex floats and "infinity"/"nan" like Python except hex: reject hex */
    for (size_t k = 0; k < o; k++)
        if (buf[k] == 'x' || buf[k] == 'X') return false;
    *out = d;
    return true;
}

F(int) {
    static const char *const kw[] = {"default", "base", NULL};
    CHECK(2, kw, "int");
    jinja_value *def = jx_arg(a, 0, "default"), *bv = jx_arg(a, 1, "base");
    int64_t base = bv && bv->kind == JV_INT ? bv->u.i : 10;
    int64_t r;
    switch (v->kind) {
    case JV_INT: return v;
    case JV_BOOL: return jv_int(cx, v->u.b);
    case JV_FLOAT:
        if (isfinite(v->u.f) && fabs(v->u.f) < 9.2e18) return jv_int(cx, (int64_t)v->u.f);
        break;
    case JV_STR: {
        if (base >= 2 && base <= 36 && parse_py_int(v->u.str.s, v->u.str.len, base, &r)) return jv_int(cx, r);
        double d;
        if (parse_py_float(v->u.str.s, v->u.str.len, &d) && isfinite(d) && fabs(d) < 9.2e18) return jv_int(cx, (int64_t)d);
        break;
    }
    default: break;
    }
    return def ? def : jv_int(cx, 0);
}

F(float) {
    static const char *const kw[] = {"default", NULL};
    CHECK(1, kw, "float");
    jinja_value *def = jx_arg(a, 0, "default");
    double d;
    switch (v->kind) {
    case JV_FLOAT: return v;
    case JV_INT: return jv_float(cx, (double)v->u.i);
    case JV_BOOL: return jv_float(cx, v->u.b);
    case JV_STR:
        if (parse_py_float(v->u.str.s, v->u.str.len, &d)) return jv_float(cx, d);
        break;
    default: break;
    }
    return def ? def : jv_float(cx, 0.0);
}

F(abs) {
    CHECK(0, NULL, "abs");
    if (v->kind == JV_INT) return v->u.i == INT64_MIN ? jx_fail(cx, JINJA_ERR_LIMIT, at, "integer overflow") : jv_int(cx, v->u.i < 0 ? -v->u.i : v->u.i);
    if (v->kind == JV_BOOL) return jv_int(cx, v->u.b);
    if (v->kind == JV_FLOAT) return jv_float(cx, fabs(v->u.f));
    if (v->kind == JV_UNDEF) return jx_fail_undef(cx, v, at);
    return jx_fail(cx, JINJA_ERR_TYPE, at, "bad operand type for abs(): '%s'", jv_type_name(v));
}

F(round) {
    static const char *const kw[] = {"precision", "method", NULL};
    CHECK(2, kw, "round");
    jinja_value *pv = jx_arg(a, 0, "precision"), *mv = jx_arg(a, 1, "method");
    int64_t prec = pv && pv->kind == JV_INT ? pv->u.i : 0;
    if (prec < -20) prec = -20;
    if (prec > 20) prec = 20;
    if (!jv_is_num(v)) {
        if (v->kind == JV_UNDEF) return jx_fail_undef(cx, v, at);
        return jx_fail(cx, JINJA_ERR_TYPE, at, "type %s doesn't define __round__ method", jv_type_name(v));
    }
    double x = v->kind == JV_FLOAT ? v->u.f : v->kind == JV_INT ? (double)v->u.i : v->u.b;
    double m = pow(10.0, (double)prec);
    const char *method = mv && mv->kind == JV_STR ? mv->u.str.s : "common";
    size_t ml = mv && mv->kind == JV_STR ? mv->u.str.len : 6;
    double r;
    if (ml == 6 && memcmp(method, "common", 6) == 0) r = nearbyint(x * m) / m; /* Python round: half to even */
    else if (ml == 4 && memcmp(method, "ceil", 4) == 0) r = ceil(x * m) / m;
    else if (ml == 5 && memcmp(method, "floor", 5) == 0) r = floor(x * m) / m;
    else return jx_fail(cx, JINJA_ERR_TYPE, at, "method must be common, ceil or floor");
    if (v->kind != JV_FLOAT && ml == 6) return jv_int(cx, (int64_t)r); /* round(int, n) stays int */
    return jv_float(cx, r);
}

/* ========================================================================
 * Filters: sequences
 * ====================================================================== */

static bool seq_items(jx_ctx *cx, jinja_value *v, jinja_value ***items, size_t *n, const jx_node *at) {
    return jv_iterate(cx, v, items, n, at);
}

static jinja_value *list_from(jx_ctx *cx, jinja_value **items, size_t n) {
    jinja_value *l = jv_list_new(cx, n);
    if (!l) return NULL;
    if (n) memcpy(l->u.list->items, items, n * sizeof *items);
    l->u.list->n = n;
    return l;
}

F(length) {
    CHECK(0, NULL, "length");
    if (v->kind == JV_NS) return jx_fail(cx, JINJA_ERR_TYPE, at, "object of type 'Namespace' has no len()");
    int64_t n = jv_length(cx, v, at);
    return n < 0 ? NULL : jv_int(cx, n);
}

F(list) {
    CHECK(0, NULL, "list");
    jinja_value **items;
    size_t n;
    if (v->kind == JV_LIST && !v->is_tuple) return v;
    if (!seq_items(cx, v, &items, &n, at)) return NULL;
    return list_from(cx, items, n);
}

F(first) {
    CHECK(0, NULL, "first");
    jinja_value **items;
    size_t n;
    if (!seq_items(cx, v, &items, &n, at)) return NULL;
    return n ? items[0] : jv_undef_hint(cx, "No first item, sequence was empty.");
}

F(last) {
    CHECK(0, NULL, "last");
    jinja_value **items;
    size_t n;
    if (!seq_items(cx, v, &items, &n, at)) return NULL;
    return n ? items[n - 1] : jv_undef_hint(cx, "No last item, sequence was empty.");
}

F(reverse) {
    CHECK(0, NULL, "reverse");
    if (v->kind == JV_STR) {
        size_t nc;
        size_t *off = jx_utf8_offsets(cx, v->u.str.s, v->u.str.len, &nc);
        if (!off) return jx_fail_oom(cx, at);
        jx_buf b = {0};
        const uint8_t *t = v->u.str.taint;
        for (size_t k = nc; k-- > 0;) jx_buf_put_t(&b, v->u.str.s + off[k], off[k + 1] - off[k], t ? t + off[k] : NULL);
        jinja_value *r = b.failed ? jx_fail_oom(cx, at) : jv_str_from_buf(cx, &b);
        jx_buf_free(&b);
        return r;
    }
    jinja_value **items;
    size_t n;
    if (!seq_items(cx, v, &items, &n, at)) return NULL;
    jinja_value *l = jv_list_new(cx, n);
    if (!l) return NULL;
    for (size_t i = 0; i < n; i++) l->u.list->items[i] = items[n - 1 - i];
    l->u.list->n = n;
    return l;
}

F(items) {
    CHECK(0, NULL, "items");
    if (v->kind == JV_UNDEF) return jv_list_new(cx, 0);
    if (v->kind != JV_DICT) return jx_fail(cx, JINJA_ERR_TYPE, at, "Can only get item pairs from a mapping.");
    jinja_value *m = jx_method_lookup(cx, v, "items", 5);
    jx_args none = {0};
    return m ? m->u.func.fn(cx, v, &none, at) : NULL;
}

F(join) {
    static const char *const kw[] = {"d", "attribute", NULL};
    CHECK(2, kw, "join");
    jinja_value *d = jx_arg(a, 0, "d"), *attr = jx_arg(a, 1, "attribute");
    jinja_value **items;
    size_t n;
    if (!seq_items(cx, v, &items, &n, at)) return NULL;
    jinja_value *sep = d ? soft_str(cx, d) : &jx_empty_str;
    if (!sep) return NULL;
    jx_buf b = {.limit = cx->lim.max_output};
    for (size_t i = 0; i < n; i++) {
        jinja_value *x = items[i];
        if (attr) {
            x = jx_getattr_path(cx, x, attr, at);
            if (!x) {
                jx_buf_free(&b);
                return NULL;
            }
        }
        if (i) jx_buf_put_t(&b, sep->u.str.s, sep->u.str.len, sep->u.str.taint);
        jv_write_str(&b, x);
    }
    jinja_value *r = b.failed ? jx_fail(cx, JINJA_ERR_LIMIT, at, "string too large") : jv_str_from_buf(cx, &b);
    jx_buf_free(&b);
    return r;
}

F(default) {
    static const char *const kw[] = {"default_value", "boolean", NULL};
    CHECK(2, kw, "default");
    jinja_value *dv = jx_arg(a, 0, "default_value"), *boolean = jx_arg(a, 1, "boolean");
    if (v->kind == JV_UNDEF || (boolean && jv_truthy(boolean) && !jv_truthy(v))) return dv ? dv : &jx_empty_str;
    return v;
}

/* Python-style key for case-insensitive comparisons: lowercased strings. */
static jinja_value *sort_key(jx_ctx *cx, jinja_value *x, jinja_value *attr, bool case_sensitive, const jx_node *at) {
    if (attr) {
        x = jx_getattr_path(cx, x, attr, at);
        if (!x) return NULL;
    }
    if (!case_sensitive && x->kind == JV_STR) return jx_str_case(cx, x, 0);
    return x;
}

/* Stable merge sort of items by keys; false on comparison error. */
static bool msort(jx_ctx *cx, jinja_value **items, jinja_value **keys, size_t n, bool reverse, const jx_node *at) {
    if (n < 2) return true;
    jinja_value **ti = jx_arena_alloc(&cx->arena, n * sizeof *ti), **tk = jx_arena_alloc(&cx->arena, n * sizeof *tk);
    if (!ti || !tk) return jx_fail_oom(cx, at), false;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                int c;
                if (!jv_compare(cx, keys[j], keys[i], &c, at)) return false;
                bool take_right = reverse ? c > 0 : c < 0;
                if (take_right) {
                    ti[o] = items[j];
                    tk[o++] = keys[j++];
                } else {
                    ti[o] = items[i];
                    tk[o++] = keys[i++];
                }
            }
            while (i < mid) {
                ti[o] = items[i];
                tk[o++] = keys[i++];
            }
            while (j < hi) {
                ti[o] = items[j];
                tk[o++] = keys[j++];
            }
        }
        memcpy(items, ti, n * sizeof *ti);
        memcpy(keys, tk, n * sizeof *tk);
    }
    return true;
}

F(sort) {
    static const char *const kw[] = {"reverse", "case_sensitive", "attribute", NULL};
    CHECK(3, kw, "sort");
    jinja_value *rv = jx_arg(a, 0, "reverse"), *cs = jx_arg(a, 1, "case_sensitive"), *attr = jx_arg(a, 2, "attribute");
    jinja_value **src;
    size_t n;
    if (!seq_items(cx, v, &src, &n, at)) return NULL;
    if (!jx_count_iter(cx, n, at)) return NULL;
    jinja_value *out = list_from(cx, src, n);
    jinja_value **keys = jx_arena_alloc(&cx->arena, (n ? n : 1) * sizeof *keys);
    if (!out || !keys) return jx_fail_oom(cx, at);
    for (size_t i = 0; i < n; i++)
        if (!(keys[i] = sort_key(cx, src[i], attr, cs && jv_truthy(cs), at))) return NULL;
    if (!msort(cx, out->u.list->items, keys, n, rv && jv_truthy(rv), at)) return NULL;
    return out;
}

F(dictsort) {
    static const char *const kw[] = {"case_sensitive", "by", "reverse", NULL};
    CHECK(3, kw, "dictsort");
    jinja_value *cs = jx_arg(a, 0, "case_sensitive"), *by = jx_arg(a, 1, "by"), *rv = jx_arg(a, 2, "reverse");
    if (v->kind == JV_UNDEF) return jx_fail_undef(cx, v, at);
    if (v->kind != JV_DICT) return jx_fail(cx, JINJA_ERR_TYPE, at, "'%s' object has no attribute 'items'", jv_type_name(v));
    int pos = 0;
    if (by && by->kind == JV_STR) {
        if (by->u.str.len == 5 && memcmp(by->u.str.s, "value", 5) == 0) pos = 1;
        else if (!(by->u.str.len == 3 && memcmp(by->u.str.s, "key", 3) == 0))
            return jx_fail(cx, JINJA_ERR_VALUE, at, "You can only sort by either \"key\" or \"value\"");
    }
    jinja_value *m = jx_method_lookup(cx, v, "items", 5);
    jx_args none = {0};
    jinja_value *items = m ? m->u.func.fn(cx, v, &none, at) : NULL;
    if (!items) return NULL;
    size_t n = items->u.list->n;
    jinja_value **keys = jx_arena_alloc(&cx->arena, (n ? n : 1) * sizeof *keys);
    if (!keys) return jx_fail_oom(cx, at);
    for (size_t i = 0; i < n; i++)
        if (!(keys[i] = sort_key(cx, items->u.list->items[i]->u.list->items[pos], NULL, cs && jv_truthy(cs), at)))
            return NULL;
    if (!msort(cx, items->u.list->items, keys, n, rv && jv_truthy(rv), at)) return NULL;
    return items;
}

F(unique) {
    static const char *const kw[] = {"case_sensitive", "attribute", NULL};
    CHECK(2, kw, "unique");
    jinja_value *cs = jx_arg(a, 0, "case_sensitive"), *attr = jx_arg(a, 1, "attribute");
    jinja_value **src;
    size_t n;
    if (!seq_items(cx, v, &src, &n, at)) return NULL;
    if (!jx_count_iter(cx, n, at)) return NULL;
    jinja_value *out = jv_list_new(cx, n);
    jinja_value **seen = jx_arena_alloc(&cx->arena, (n ? n : 1) * sizeof *seen);
    if (!out || !seen) return jx_fail_oom(cx, at);
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        jinja_value *k = sort_key(cx, src[i], attr, cs && jv_truthy(cs), at);
        if (!k) return NULL;
        bool dup = false;
        for (size_t j = 0; j < ns && !dup; j++) dup = jv_equal(seen[j], k);
        if (dup) continue;
        if (!jx_count_iter(cx, ns, at)) return NULL;
        seen[ns++] = k;
        out->u.list->items[out->u.list->n++] = src[i];
    }
    return out;
}

static jinja_value *minmax(jx_ctx *cx, jinja_value *v, jx_args *a, const jx_node *at, bool want_max) {
    static const char *const kw[] = {"case_sensitive", "attribute", NULL};
    CHECK(2, kw, want_max ? "max" : "min");
    jinja_value *cs = jx_arg(a, 0, "case_sensitive"), *attr = jx_arg(a, 1, "attribute");
    jinja_value **src;
    size_t n;
    if (!seq_items(cx, v, &src, &n, at)) return NULL;
    if (n == 0) return jv_undef_hint(cx, want_max ? "No aggregated item, sequence was empty." : "No aggregated item, sequence was empty.");
    jinja_value *best = src[0], *bk = sort_key(cx, src[0], attr, cs && jv_truthy(cs), at);
    if (!bk) return NULL;
    for (size_t i = 1; i < n; i++) {
        jinja_value *k = sort_key(cx, src[i], attr, cs && jv_truthy(cs), at);
        int c;
        if (!k || !jv_compare(cx, k, bk, &c, at)) return NULL;
        if (want_max ? c > 0 : c < 0) {
            best = src[i];
            bk = k;
        }
    }
    return best;
}
F(max) { return minmax(cx, v, a, at, true); }
F(min) { return minmax(cx, v, a, at, false); }

F(sum) {
    static const char *const kw[] = {"attribute", "start", NULL};
    CHECK(2, kw, "sum");
    jinja_value *attr = jx_arg(a, 0, "attribute"), *start = jx_arg(a, 1, "start");
    jinja_value **src;
    size_t n;
    if (!seq_items(cx, v, &src, &n, at)) return NULL;
    jinja_value *acc = start ? start : jv_int(cx, 0);
    for (size_t i = 0; acc && i < n; i++) {
        jinja_value *x = attr ? jx_getattr_path(cx, src[i], attr, at) : src[i];
        if (!x) return NULL;
        if (!jv_is_num(acc) || !jv_is_num(x))
            return jx_fail(cx, JINJA_ERR_TYPE, at, "unsupported operand type(s) for +: '%s' and '%s'", jv_type_name(acc),
                           jv_type_name(x));
        if (acc->kind == JV_FLOAT || x->kind == JV_FLOAT) {
            double s = (acc->kind == JV_FLOAT ? acc->u.f : acc->kind == JV_INT ? (double)acc->u.i : acc->u.b) +
                       (x->kind == JV_FLOAT ? x->u.f : x->kind == JV_INT ? (double)x->u.i : x->u.b);
            acc = jv_float(cx, s);
        } else {
            int64_t p = acc->kind == JV_INT ? acc->u.i : acc->u.b, q = x->kind == JV_INT ? x->u.i : x->u.b, r;
            if (__builtin_add_overflow(p, q, &r)) return jx_fail(cx, JINJA_ERR_LIMIT, at, "integer overflow");
            acc = jv_int(cx, r);
        }
    }
    return acc;
}

F(batch) {
    static const char *const kw[] = {"linecount", "fill_with", NULL};
    CHECK(2, kw, "batch");
    jinja_value *lc = jx_arg(a, 0, "linecount"), *fill = jx_arg(a, 1, "fill_with");
    if (!lc || lc->kind != JV_INT || lc->u.i <= 0) return jx_fail(cx, JINJA_ERR_VALUE, at, "batch() needs a positive linecount");
    jinja_value **src;
    size_t n;
    if (!seq_items(cx, v, &src, &n, at)) return NULL;
    size_t per = (size_t)lc->u.i;
    jinja_value *out = jv_list_new(cx, 4), *cur = NULL;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!cur) {
            cur = jv_list_new(cx, per < 64 ? per : 64);
            if (!cur || !jv_list_push(cx, out, cur)) return NULL;
        }
        if (!jv_list_push(cx, cur, src[i])) return NULL;
        if (cur->u.list->n == per) cur = NULL;
    }
    if (cur && fill)
        while (cur->u.list->n < per) {
            if (!jx_count_iter(cx, 1, at) || !jv_list_push(cx, cur, fill)) return NULL;
        }
    return out;
}

F(attr) {
    CHECK(1, NULL, "attr");
    jinja_value *name = jx_arg(a, 0, NULL);
    if (!name || name->kind != JV_STR) return jx_fail(cx, JINJA_ERR_TYPE, at, "attr() needs an attribute name");
    return jx_getattr(cx, v, name->u.str.s, name->u.str.len, at);
}

F(pprint) {
    CHECK(0, NULL, "pprint");
    jx_buf b = {.limit = cx->lim.max_output};
    jv_write_repr(&b, v);
    jinja_value *r = b.failed ? jx_fail(cx, JINJA_ERR_LIMIT, at, "string too large") : jv_str_from_buf(cx, &b);
    jx_buf_free(&b);
    return r;
}

/* ------------------------------------------------------------------------
 * map / select / reject / selectattr / rejectattr
 * ---------------------------------------------------------------------- */

/* Apply test args[first..] named by args[first-1] (or truthiness when absent). */
static int run_test_args(jx_ctx *cx, jinja_value *x, jx_args *a, size_t first, const jx_node *at) {
    if (a->npos < first) return jv_truthy(x);
    jinja_value *name = a->pos[first - 1];
    if (name->kind != JV_STR) return jx_fail(cx, JINJA_ERR_TYPE, at, "test name must be a string"), -1;
    jx_test_fn fn = jx_test_lookup(name->u.str.s, name->u.str.len);
    if (!fn) return jx_fail(cx, JINJA_ERR_SYNTAX, at, "No test named '%.*s'.", (int)name->u.str.len, name->u.str.s), -1;
    jx_args sub = {.pos = a->pos + first, .npos = a->npos - first, .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
    return fn(cx, x, &sub, at);
}

static jinja_value *select_impl(jx_ctx *cx, jinja_value *v, jx_args *a, const jx_node *at, bool want, bool by_attr) {
    jinja_value **src;
    size_t n;
    if (!seq_items(cx, v, &src, &n, at)) return NULL;
    if (by_attr && a->npos < 1) return jx_fail(cx, JINJA_ERR_TYPE, at, "selectattr/rejectattr need an attribute name");
    jinja_value *out = jv_list_new(cx, n);
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!jx_count_iter(cx, 1, at)) return NULL;
        jinja_value *x = src[i];
        if (by_attr) {
            x = jx_getattr_path(cx, x, a->pos[0], at);
            if (!x) return NULL;
        }
        int r = run_test_args(cx, x, a, by_attr ? 2 : 1, at);
        if (r < 0) return NULL;
        if ((r != 0) == want) out->u.list->items[out->u.list->n++] = src[i];
    }
    return out;
}
F(select) { return select_impl(cx, v, a, at, true, false); }
F(reject) { return select_impl(cx, v, a, at, false, false); }
F(selectattr) { return select_impl(cx, v, a, at, true, true); }
F(rejectattr) { return select_impl(cx, v, a, at, false, true); }

F(map) {
    jinja_value **src;
    size_t n;
    if (!seq_items(cx, v, &src, &n, at)) return NULL;
    jinja_value *attr = NULL, *def = NULL;
    for (size_t k = 0; k < a->nkw; k++) {
        if (strcmp(a->kwn[k], "attribute") == 0) attr = a->kwv[k];
        else if (strcmp(a->kwn[k], "default") == 0) def = a->kwv[k];
    }
    jx_filter_fn fn = NULL;
    jx_args sub = {0};
    if (!attr) {
        if (a->npos < 1 || a->pos[0]->kind != JV_STR) return jx_fail(cx, JINJA_ERR_TYPE, at, "map() needs a filter name or attribute=");
        fn = jx_filter_lookup(a->pos[0]->u.str.s, a->pos[0]->u.str.len);
        if (!fn)
            return jx_fail(cx, JINJA_ERR_SYNTAX, at, "No filter named '%.*s'.", (int)a->pos[0]->u.str.len, a->pos[0]->u.str.s);
        sub = (jx_args){.pos = a->pos + 1, .npos = a->npos - 1, .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
    } else if (a->npos) return jx_fail(cx, JINJA_ERR_TYPE, at, "map() with attribute= takes no positional arguments");
    jinja_value *out = jv_list_new(cx, n);
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!jx_count_iter(cx, 1, at)) return NULL;
        jinja_value *x;
        if (attr) {
            x = jx_getattr_path(cx, src[i], attr, at);
            if (x && x->kind == JV_UNDEF && def) x = def;
        } else x = fn(cx, src[i], &sub, at);
        if (!x) return NULL;
        out->u.list->items[out->u.list->n++] = x;
    }
    return out;
}

/* ------------------------------------------------------------------------
 * tojson (transformers' replacement of Jinja's htmlsafe version)
 * ---------------------------------------------------------------------- */

F(tojson) {
    static const char *const kw[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    CHECK(4, kw, "tojson");
    jinja_value *ea = jx_arg(a, 0, "ensure_ascii"), *ind = jx_arg(a, 1, "indent"), *sep = jx_arg(a, 2, "separators"),
                *sk = jx_arg(a, 3, "sort_keys");
    jx_json_opts o = {.item_sep = ", ", .key_sep = ": ", .sort_keys = sk && jv_truthy(sk),
                      .ensure_ascii = ea && jv_truthy(ea)};
    char spaces[64];
    if (ind && ind->kind != JV_NONE) {
        if (ind->kind == JV_INT) {
            int64_t k = ind->u.i < 0 ? 0 : ind->u.i > 63 ? 63 : ind->u.i;
            memset(spaces, ' ', (size_t)k);
            spaces[k] = 0;
            o.indent = spaces;
        } else if (ind->kind == JV_STR) {
            o.indent = jx_arena_strdup(&cx->arena, ind->u.str.s, ind->u.str.len);
            if (!o.indent) return jx_fail_oom(cx, at);
        } else return jx_fail(cx, JINJA_ERR_TYPE, at, "indent must be an int or str");
        o.item_sep = ",";
    }
    if (sep && sep->kind != JV_NONE) {
        if (sep->kind != JV_LIST || sep->u.list->n != 2 || sep->u.list->items[0]->kind != JV_STR ||
            sep->u.list->items[1]->kind != JV_STR)
            return jx_fail(cx, JINJA_ERR_VALUE, at, "separators must be a pair of strings");
        o.item_sep = jx_arena_strdup(&cx->arena, sep->u.list->items[0]->u.str.s, sep->u.list->items[0]->u.str.len);
        o.key_sep = jx_arena_strdup(&cx->arena, sep->u.list->items[1]->u.str.s, sep->u.list->items[1]->u.str.len);
        if (!o.item_sep || !o.key_sep) return jx_fail_oom(cx, at);
    }
    jx_buf b = {.limit = cx->lim.max_output};
    if (!jv_write_json(cx, &b, v, &o, 0, at)) {
        jx_buf_free(&b);
        return NULL;
    }
    /* separators or an indent string from untrusted input: all of it is */
    if ((ind && jv_str_tainted(ind)) ||
        (sep && sep->kind == JV_LIST && sep->u.list->n == 2 &&
         (jv_str_tainted(sep->u.list->items[0]) || jv_str_tainted(sep->u.list->items[1]))))
        jx_buf_taint_from(&b, 0);
    jinja_value *r = b.failed ? jx_fail(cx, JINJA_ERR_LIMIT, at, "string too large") : jv_str_from_buf(cx, &b);
    jx_buf_free(&b);
    return r;
}

/* "fmt"|format(a, b) == "fmt" % (a, b); keyword arguments format %(name)s */
F(format) {
    jinja_value *s = soft_str(cx, v);
    if (!s) return NULL;
    jinja_value *args;
    if (a->nkw) {
        if (a->npos) return jx_fail(cx, JINJA_ERR_TYPE, at, "can't handle positional and keyword arguments at the same time");
        args = jv_dict_new(cx, a->nkw);
        for (size_t i = 0; args && i < a->nkw; i++)
            if (!jv_dict_set(cx, args, a->kwn[i], strlen(a->kwn[i]), a->kwv[i])) return NULL;
    } else {
        args = jv_list_new(cx, a->npos);
        if (args) {
            args->is_tuple = 1;
            if (a->npos) memcpy(args->u.list->items, a->pos, a->npos * sizeof *a->pos);
            args->u.list->n = a->npos;
        }
    }
    return args ? jx_percent_format(cx, s, args, at) : NULL;
}

static const struct {
    const char *name;
    jx_filter_fn fn;
} filters[] = {
    {"abs", f_abs},         {"attr", f_attr},           {"batch", f_batch},         {"capitalize", f_capitalize},
    {"center", f_center},   {"count", f_length},        {"d", f_default},           {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},          {"escape", f_escape},       {"first", f_first},
    {"float", f_float},     {"forceescape", f_escape},  {"format", f_format},       {"indent", f_indent},
    {"int", f_int},         {"items", f_items},         {"join", f_join},           {"last", f_last},
    {"length", f_length},   {"list", f_list},           {"lower", f_lower},         {"map", f_map},
    {"max", f_max},         {"min", f_min},             {"pprint", f_pprint},       {"reject", f_reject},
    {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},   {"round", f_round},
    {"safe", f_safe},       {"select", f_select},       {"selectattr", f_selectattr}, {"sort", f_sort},
    {"string", f_string},   {"sum", f_sum},             {"title", f_title},         {"tojson", f_tojson},
    {"trim", f_trim},       {"unique", f_unique},       {"upper", f_upper},         {"wordcount", f_wordcount},
};

jx_filter_fn jx_filter_lookup(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (strlen(filters[i].name) == len && memcmp(filters[i].name, name, len) == 0) return filters[i].fn;
    return NULL;
}
