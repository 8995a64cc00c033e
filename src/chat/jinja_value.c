/*
 * jinja_value.c - arena, byte buffer, values and their Python semantics:
 * str(), repr(), json.dumps(), ==, ordering, len(), iteration, UTF-8.
 */
#include "jinja_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================================
 * Arena
 * ====================================================================== */

struct jx_chunk {
    jx_chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

void *jx_arena_alloc(jx_arena *a, size_t n) {
    if (a->over) return NULL;
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    jx_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > 32768 ? n : 32768;
        if (a->cap && a->used_total + sz > a->cap) {
            a->over = true;
            return NULL;
        }
        c = malloc(sizeof(jx_chunk) + sz);
        if (!c) {
            a->over = true;
            return NULL;
        }
        c->used = 0;
        c->size = sz;
        /* Keep a partially used head in front when the new chunk is a one-off big one. */
        if (a->head && sz > 32768 && a->head->size - a->head->used > 1024) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
        a->used_total += sz;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void jx_arena_free(jx_arena *a) {
    jx_chunk *c = a->head;
    while (c) {
        jx_chunk *nx = c->next;
        free(c);
        c = nx;
    }
    a->head = NULL;
    a->used_total = 0;
    a->over = false;
}

char *jx_arena_strdup(jx_arena *a, const char *s, size_t n) {
    char *p = jx_arena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ========================================================================
 * Buffer
 * ====================================================================== */

static bool any_flag(const uint8_t *t, size_t n) {
    if (!t) return false;
    for (size_t i = 0; i < n; i++)
        if (t[i]) return true;
    return false;
}

/* Allocate the taint array (all clean so far). */
static bool buf_taint_init(jx_buf *b) {
    if (b->t) return true;
    b->t = calloc(b->cap ? b->cap : 1, 1);
    if (!b->t) b->failed = true;
    return b->t != NULL;
}

bool jx_buf_put_t(jx_buf *b, const char *s, size_t n, const uint8_t *taint) {
    if (b->failed) return false;
    if (n == 0) return true;
    if (b->limit && (b->n + n > b->limit || b->n + n < b->n)) {
        b->failed = b->over_limit = true;
        return false;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap, tcap = b->cap; /* t, when present, has p's capacity */
        if (!bd_grow(&b->p, &cap, b->n + n + 1, 1) || (b->t && !bd_grow(&b->t, &tcap, cap, 1))) {
            b->failed = true;
            return false;
        }
        b->cap = cap;
    }
    if (taint && any_flag(taint, n) && !buf_taint_init(b)) return false;
    memcpy(b->p + b->n, s, n);
    if (b->t) {
        if (taint) memcpy(b->t + b->n, taint, n);
        else memset(b->t + b->n, 0, n);
    }
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

bool jx_buf_put(jx_buf *b, const char *s, size_t n) { return jx_buf_put_t(b, s, n, NULL); }

bool jx_buf_putc(jx_buf *b, char c) { return jx_buf_put(b, &c, 1); }

bool jx_buf_taint_from(jx_buf *b, size_t from) {
    if (b->failed) return false;
    if (from >= b->n) return true;
    if (!buf_taint_init(b)) return false;
    memset(b->t + from, 1, b->n - from);
    return true;
}

bool jx_buf_printf(jx_buf *b, const char *fmt, ...) {
    bd_buf tmp = {0};
    va_list ap;
    va_start(ap, fmt);
    bool ok = bd_buf_vprintf(&tmp, fmt, ap);
    va_end(ap);
    if (ok) ok = jx_buf_put(b, tmp.p ? tmp.p : "", tmp.n);
    else b->failed = true;
    bd_buf_free(&tmp);
    return ok;
}

void jx_buf_free(jx_buf *b) {
    free(b->p);
    free(b->t);
    memset(b, 0, sizeof *b);
}

/* ========================================================================
 * UTF-8
 * ====================================================================== */

/* base.h's decoder; an invalid byte reads as one character whose code is
 * the byte itself (not U+FFFD), as this engine has always counted it. */
uint32_t jx_utf8_next(const char *s, size_t n, size_t *i) {
    size_t k = *i;
    int used;
    uint32_t cp = bd_utf8_decode((const uint8_t *)s + k, n - k, &used);
    if (used == 1 && (unsigned char)s[k] >= 0x80) cp = (unsigned char)s[k];
    *i = k + (size_t)used;
    return cp;
}

int jx_utf8_encode(uint32_t cp, char *o) { return bd_utf8_encode(cp, (uint8_t *)o); }

size_t jx_utf8_len(const char *s, size_t n) {
    size_t i = 0, c = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) i++;
        else jx_utf8_next(s, n, &i);
        c++;
    }
    return c;
}

size_t *jx_utf8_offsets(jx_ctx *cx, const char *s, size_t n, size_t *nchars) {
    size_t cnt = jx_utf8_len(s, n);
    size_t *o = jx_arena_alloc(&cx->arena, (cnt + 1) * sizeof(size_t));
    if (!o) return NULL;
    size_t i = 0, k = 0;
    while (i < n) {
        o[k++] = i;
        jx_utf8_next(s, n, &i);
    }
    o[k] = n;
    *nchars = cnt;
    return o;
}

/* Python str.isspace(): Unicode White_Space plus the ASCII separators 0x1c-0x1f. */
bool jx_is_space_cp(uint32_t c) {
    if (c <= 0x20) return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
    return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
           c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* ========================================================================
 * Constructors
 * ====================================================================== */

jinja_value jx_undefined = {.kind = JV_UNDEF};
jinja_value jx_none_v = {.kind = JV_NONE};
jinja_value jx_true_v = {.kind = JV_BOOL, .u.b = true};
jinja_value jx_false_v = {.kind = JV_BOOL, .u.b = false};
jinja_value jx_empty_str = {.kind = JV_STR, .is_ascii = 1, .u.str = {"", 0}};

jinja_value *jv_new(jx_ctx *cx, jv_kind k) {
    jinja_value *v = jx_arena_alloc(&cx->arena, sizeof *v);
    if (!v) return jx_fail_oom(cx, NULL);
    v->kind = (uint8_t)k;
    return v;
}

jinja_value *jv_int(jx_ctx *cx, int64_t i) {
    jinja_value *v = jv_new(cx, JV_INT);
    if (v) v->u.i = i;
    return v;
}

jinja_value *jv_float(jx_ctx *cx, double f) {
    jinja_value *v = jv_new(cx, JV_FLOAT);
    if (v) v->u.f = f;
    return v;
}

jinja_value *jv_bool(bool b) { return b ? &jx_true_v : &jx_false_v; }

jinja_value *jv_str_ref(jx_ctx *cx, const char *s, size_t n) {
    if (n == 0) return &jx_empty_str;
    jinja_value *v = jv_new(cx, JV_STR);
    if (!v) return NULL;
    v->u.str.s = s;
    v->u.str.len = n;
    return v;
}

jinja_value *jv_str_copy(jx_ctx *cx, const char *s, size_t n) {
    if (n == 0) return &jx_empty_str;
    char *p = jx_arena_strdup(&cx->arena, s, n);
    if (!p) return jx_fail_oom(cx, NULL);
    return jv_str_ref(cx, p, n);
}

jinja_value *jv_str_cstr(jx_ctx *cx, const char *s) { return jv_str_copy(cx, s, strlen(s)); }

jinja_value *jv_str_copy_t(jx_ctx *cx, const char *s, size_t n, const uint8_t *taint) {
    jinja_value *r = jv_str_copy(cx, s, n);
    if (!r || r == &jx_empty_str || !any_flag(taint, n)) return r;
    uint8_t *t = jx_arena_alloc(&cx->arena, n);
    if (!t) return jx_fail_oom(cx, NULL);
    memcpy(t, taint, n);
    r->u.str.taint = t;
    return r;
}

jinja_value *jv_str_from_buf(jx_ctx *cx, const jx_buf *b) {
    return jv_str_copy_t(cx, b->p ? b->p : "", b->n, b->t);
}

jinja_value *jv_str_sub(jx_ctx *cx, const jinja_value *v, size_t off, size_t n) {
    BD_ASSERT(v->kind == JV_STR && off <= v->u.str.len && n <= v->u.str.len - off);
    jinja_value *r = jv_str_ref(cx, v->u.str.s + off, n);
    if (r && r != &jx_empty_str && v->u.str.taint) r->u.str.taint = v->u.str.taint + off;
    return r;
}

bool jv_str_tainted(const jinja_value *v) {
    return v->kind == JV_STR && any_flag(v->u.str.taint, v->u.str.len);
}

/* A run of n tainted flags in the arena (shared by all keys of a tainted dict). */
static const uint8_t *all_tainted(jx_ctx *cx, size_t n) {
    uint8_t *t = jx_arena_alloc(&cx->arena, n ? n : 1);
    if (t) memset(t, 1, n);
    return t;
}

jinja_value *jv_dict_key(jx_ctx *cx, const jinja_value *dv, size_t i) {
    const jv_dict *d = dv->u.dict;
    jinja_value *k = jv_str_ref(cx, d->keys[i], d->klen[i]);
    if (k && k != &jx_empty_str && d->keys_tainted) {
        k->u.str.taint = all_tainted(cx, d->klen[i]);
        if (!k->u.str.taint) return jx_fail_oom(cx, NULL);
    }
    return k;
}

bool jv_dict_set_v(jx_ctx *cx, jinja_value *dv, const jinja_value *key, jinja_value *v) {
    if (jv_str_tainted(key)) dv->u.dict->keys_tainted = true;
    return jv_dict_set(cx, dv, key->u.str.s, key->u.str.len, v);
}

jinja_value *jv_list_new(jx_ctx *cx, size_t cap) {
    jinja_value *v = jv_new(cx, JV_LIST);
    if (!v) return NULL;
    jv_list *l = jx_arena_alloc(&cx->arena, sizeof *l);
    if (!l) return jx_fail_oom(cx, NULL);
    if (cap) {
        l->items = jx_arena_alloc(&cx->arena, cap * sizeof(jinja_value *));
        if (!l->items) return jx_fail_oom(cx, NULL);
        l->cap = cap;
    }
    v->u.list = l;
    return v;
}

bool jv_list_push(jx_ctx *cx, jinja_value *lv, jinja_value *x) {
    jv_list *l = lv->u.list;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        jinja_value **p = jx_arena_alloc(&cx->arena, nc * sizeof *p);
        if (!p) {
            jx_fail_oom(cx, NULL);
            return false;
        }
        if (l->n) memcpy(p, l->items, l->n * sizeof *p);
        l->items = p;
        l->cap = nc;
    }
    l->items[l->n++] = x;
    return true;
}

jinja_value *jv_dict_new(jx_ctx *cx, size_t cap) {
    jinja_value *v = jv_new(cx, JV_DICT);
    if (!v) return NULL;
    jv_dict *d = jx_arena_alloc(&cx->arena, sizeof *d);
    if (!d) return jx_fail_oom(cx, NULL);
    v->u.dict = d;
    if (cap) {
        d->keys = jx_arena_alloc(&cx->arena, cap * sizeof *d->keys);
        d->klen = jx_arena_alloc(&cx->arena, cap * sizeof *d->klen);
        d->vals = jx_arena_alloc(&cx->arena, cap * sizeof *d->vals);
        if (!d->keys || !d->klen || !d->vals) return jx_fail_oom(cx, NULL);
        d->cap = cap;
    }
    return v;
}

static ptrdiff_t dict_find(const jv_dict *d, const char *k, size_t klen) {
    for (size_t i = 0; i < d->n; i++)
        if (d->klen[i] == klen && memcmp(d->keys[i], k, klen) == 0) return (ptrdiff_t)i;
    return -1;
}

jinja_value *jv_dict_get(const jinja_value *dv, const char *k, size_t klen) {
    ptrdiff_t i = dict_find(dv->u.dict, k, klen);
    return i < 0 ? NULL : dv->u.dict->vals[i];
}

/* Insert or replace (replacement keeps the original position, as Python does). */
bool jv_dict_set(jx_ctx *cx, jinja_value *dv, const char *k, size_t klen, jinja_value *v) {
    jv_dict *d = dv->u.dict;
    ptrdiff_t i = dict_find(d, k, klen);
    if (i >= 0) {
        d->vals[i] = v;
        return true;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 4;
        const char **nk = jx_arena_alloc(&cx->arena, nc * sizeof *nk);
        size_t *nl = jx_arena_alloc(&cx->arena, nc * sizeof *nl);
        jinja_value **nv = jx_arena_alloc(&cx->arena, nc * sizeof *nv);
        if (!nk || !nl || !nv) {
            jx_fail_oom(cx, NULL);
            return false;
        }
        if (d->n) {
            memcpy(nk, d->keys, d->n * sizeof *nk);
            memcpy(nl, d->klen, d->n * sizeof *nl);
            memcpy(nv, d->vals, d->n * sizeof *nv);
        }
        d->keys = nk;
        d->klen = nl;
        d->vals = nv;
        d->cap = nc;
    }
    d->keys[d->n] = k;
    d->klen[d->n] = klen;
    d->vals[d->n] = v;
    d->n++;
    return true;
}

jinja_value *jv_undef_attr(jx_ctx *cx, jinja_value *owner, const char *name, size_t nlen) {
    jinja_value *v = jv_new(cx, JV_UNDEF);
    if (!v) return NULL;
    v->u.undef.name = name;
    v->u.undef.nlen = nlen;
    v->u.undef.owner = jv_owner_repr(owner);
    return v;
}

jinja_value *jv_undef_name(jx_ctx *cx, const char *name, size_t nlen) {
    jinja_value *v = jv_new(cx, JV_UNDEF);
    if (!v) return NULL;
    v->u.undef.name = name;
    v->u.undef.nlen = nlen;
    return v;
}

jinja_value *jv_undef_hint(jx_ctx *cx, const char *hint) {
    jinja_value *v = jv_new(cx, JV_UNDEF);
    if (!v) return NULL;
    v->u.undef.hint = hint;
    return v;
}

jinja_value *jv_func(jx_ctx *cx, jx_fn fn, jinja_value *self, const char *name) {
    jinja_value *v = jv_new(cx, JV_FUNC);
    if (!v) return NULL;
    v->u.func.fn = fn;
    v->u.func.self = self;
    v->u.func.name = name;
    return v;
}

/* ========================================================================
 * Type predicates and names
 * ====================================================================== */

bool jv_truthy(const jinja_value *v) {
    switch (v->kind) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0.0;
    case JV_STR: return v->u.str.len != 0;
    case JV_LIST: return v->u.list->n != 0;
    case JV_DICT: return v->u.dict->n != 0;
    default: return true;
    }
}

bool jv_is_str(const jinja_value *v) { return v->kind == JV_STR; }
bool jv_is_num(const jinja_value *v) {
    return v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL;
}

const char *jv_type_name(const jinja_value *v) {
    switch (v->kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v->is_tuple ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_FUNC: return "builtin_function_or_method";
    case JV_MACRO: return "Macro";
    case JV_LOOP: return "LoopContext";
    }
    return "object";
}

/* jinja2.utils.object_type_repr: "None", "dict object", ... */
const char *jv_owner_repr(const jinja_value *v) {
    switch (v->kind) {
    case JV_NONE: return "None";
    case JV_BOOL: return "bool object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_STR: return "str object";
    case JV_LIST: return v->is_tuple ? "tuple object" : "list object";
    case JV_DICT: return "dict object";
    case JV_NS: return "jinja2.utils.Namespace object";
    case JV_LOOP: return "jinja2.runtime.LoopContext object";
    case JV_MACRO: return "jinja2.runtime.Macro object";
    default: return "object";
    }
}

/* jinja2.runtime.Undefined._undefined_message */
void jv_undef_message(const jinja_value *u, char *buf, size_t len) {
    if (u->kind != JV_UNDEF) {
        snprintf(buf, len, "value is undefined");
    } else if (u->u.undef.hint) {
        snprintf(buf, len, "%s", u->u.undef.hint);
    } else if (!u->u.undef.name) {
        snprintf(buf, len, "value is undefined");
    } else if (!u->u.undef.owner) {
        snprintf(buf, len, "'%.*s' is undefined", (int)u->u.undef.nlen, u->u.undef.name);
    } else {
        snprintf(buf, len, "'%s' has no attribute '%.*s'", u->u.undef.owner, (int)u->u.undef.nlen,
                 u->u.undef.name);
    }
}

/* ========================================================================
 * str() / repr()
 * ====================================================================== */

/* Python float.__repr__: the shortest digits that round-trip, fixed notation
 * for exponents in [-4, 16), else d.ddde+XX. */
void jv_float_repr(double f, char *buf, size_t len) {
    if (isnan(f)) {
        snprintf(buf, len, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, len, f < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d.ddde[+-]XX ; split digits and exponent */
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    digits[nd] = 0;
    int ex = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0;
    char out[64];
    int o = 0;
    if (neg) out[o++] = '-';
    if (ex >= -4 && ex < 16) {
        if (ex < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int k = 0; k < -ex - 1; k++) out[o++] = '0';
            for (int k = 0; k < nd; k++) out[o++] = digits[k];
        } else {
            for (int k = 0; k <= ex; k++) out[o++] = k < nd ? digits[k] : '0';
            out[o++] = '.';
            if (nd > ex + 1)
                for (int k = ex + 1; k < nd; k++) out[o++] = digits[k];
            else
                out[o++] = '0';
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int k = 1; k < nd; k++) out[o++] = digits[k];
        }
        out[o] = 0;
        char e[16];
        snprintf(e, sizeof e, "e%c%02d", ex < 0 ? '-' : '+', (ex < 0 ? -ex : ex) % 1000);
        strcat(out, e);
    }
    snprintf(buf, len, "%s", out);
}

/* Characters str.isprintable() rejects beyond ASCII controls (approximation:
 * Zs/Zl/Zp except space, common Cf, C1 controls, private use). */
static bool cp_nonprintable(uint32_t c) {
    if (c < 0x20 || c == 0x7f) return true;
    if (c < 0x80) return false;
    if (c <= 0xa0 || c == 0xad) return true;
    if (c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
        (c >= 0x205f && c <= 0x2064) || (c >= 0x2066 && c <= 0x206f) || c == 0x3000 ||
        c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb))
        return true;
    if (c >= 0x600 && c <= 0x605) return true;
    if (c == 0x61c || c == 0x6dd || c == 0x70f || c == 0x180e) return true;
    if ((c >= 0xe000 && c <= 0xf8ff) || c >= 0xf0000) return true;
    if (c == 0xe0001 || (c >= 0xe0020 && c <= 0xe007f)) return true;
    return false;
}

static bool write_str_repr_clean(jx_buf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    jx_buf_putc(b, q);
    size_t i = 0;
    while (i < n) {
        size_t st = i;
        uint32_t c = jx_utf8_next(s, n, &i);
        if (c == (uint32_t)q || c == '\\') {
            jx_buf_putc(b, '\\');
            jx_buf_putc(b, (char)c);
        } else if (c == '\n') jx_buf_put(b, "\\n", 2);
        else if (c == '\r') jx_buf_put(b, "\\r", 2);
        else if (c == '\t') jx_buf_put(b, "\\t", 2);
        else if (cp_nonprintable(c)) {
            if (c < 0x100) jx_buf_printf(b, "\\x%02x", c);
            else if (c < 0x10000) jx_buf_printf(b, "\\u%04x", c);
            else jx_buf_printf(b, "\\U%08x", c);
        } else jx_buf_put(b, s + st, i - st);
    }
    return jx_buf_putc(b, q);
}

/* repr() of a string; its output is tainted when any input byte was. */
static bool write_str_repr(jx_buf *b, const char *s, size_t n, bool tainted) {
    size_t from = b->n;
    bool ok = write_str_repr_clean(b, s, n);
    return tainted ? jx_buf_taint_from(b, from) && ok : ok;
}

static bool write_repr_depth(jx_buf *b, const jinja_value *v, int depth);

static bool write_str_depth(jx_buf *b, const jinja_value *v, int depth) {
    char tmp[64];
    switch (v->kind) {
    case JV_UNDEF: return true;
    case JV_NONE: return jx_buf_put(b, "None", 4);
    case JV_BOOL: return v->u.b ? jx_buf_put(b, "True", 4) : jx_buf_put(b, "False", 5);
    case JV_INT: return jx_buf_printf(b, "%lld", (long long)v->u.i);
    case JV_FLOAT: jv_float_repr(v->u.f, tmp, sizeof tmp); return jx_buf_put(b, tmp, strlen(tmp));
    case JV_STR: return jx_buf_put_t(b, v->u.str.s, v->u.str.len, v->u.str.taint);
    default: return write_repr_depth(b, v, depth);
    }
}

static bool write_repr_depth(jx_buf *b, const jinja_value *v, int depth) {
    if (depth > 200) return jx_buf_put(b, "...", 3);
    switch (v->kind) {
    case JV_UNDEF: return jx_buf_put(b, "Undefined", 9);
    case JV_STR: return write_str_repr(b, v->u.str.s, v->u.str.len, jv_str_tainted(v));
    case JV_LIST: {
        jx_buf_putc(b, v->is_tuple ? '(' : '[');
        for (size_t i = 0; i < v->u.list->n; i++) {
            if (i) jx_buf_put(b, ", ", 2);
            write_repr_depth(b, v->u.list->items[i], depth + 1);
        }
        if (v->is_tuple && v->u.list->n == 1) jx_buf_putc(b, ',');
        return jx_buf_putc(b, v->is_tuple ? ')' : ']');
    }
    case JV_DICT: {
        jx_buf_putc(b, '{');
        const jv_dict *d = v->u.dict;
        for (size_t i = 0; i < d->n; i++) {
            if (i) jx_buf_put(b, ", ", 2);
            write_str_repr(b, d->keys[i], d->klen[i], d->keys_tainted);
            jx_buf_put(b, ": ", 2);
            write_repr_depth(b, d->vals[i], depth + 1);
        }
        return jx_buf_putc(b, '}');
    }
    case JV_NS: {
        jx_buf_put(b, "<Namespace {", 12);
        const jv_dict *d = v->u.dict;
        for (size_t i = 0; i < d->n; i++) {
            if (i) jx_buf_put(b, ", ", 2);
            write_str_repr(b, d->keys[i], d->klen[i], d->keys_tainted);
            jx_buf_put(b, ": ", 2);
            write_repr_depth(b, d->vals[i], depth + 1);
        }
        return jx_buf_put(b, "}>", 2);
    }
    case JV_FUNC: return jx_buf_printf(b, "<built-in function %s>", v->u.func.name ? v->u.func.name : "?");
    case JV_MACRO: return jx_buf_printf(b, "<Macro '%s'>", v->u.macro->def->s ? v->u.macro->def->s : "caller");
    case JV_LOOP: return jx_buf_printf(b, "<LoopContext %zu/%zu>", v->u.loop->idx + 1, v->u.loop->n);
    default: return write_str_depth(b, v, depth);
    }
}

bool jv_write_str(jx_buf *b, const jinja_value *v) { return write_str_depth(b, v, 0); }
bool jv_write_repr(jx_buf *b, const jinja_value *v) { return write_repr_depth(b, v, 0); }

jinja_value *jv_to_str(jx_ctx *cx, jinja_value *v) {
    if (v->kind == JV_STR) return v;
    if (v->kind == JV_UNDEF) return &jx_empty_str;
    if (v->kind == JV_BOOL) return jv_str_ref(cx, v->u.b ? "True" : "False", v->u.b ? 4 : 5);
    if (v->kind == JV_NONE) return jv_str_ref(cx, "None", 4);
    jx_buf b = {.limit = cx->lim.max_output};
    jv_write_str(&b, v);
    if (b.failed) {
        bool lim = b.over_limit;
        jx_buf_free(&b);
        return lim ? jx_fail(cx, JINJA_ERR_LIMIT, NULL, "string too large") : jx_fail_oom(cx, NULL);
    }
    jinja_value *r = jv_str_from_buf(cx, &b);
    if (r && r != &jx_empty_str) r->is_ascii = 0;
    jx_buf_free(&b);
    return r;
}

/* ========================================================================
 * json.dumps
 * ====================================================================== */

static void write_json_str_clean(jx_buf *b, const char *s, size_t n, bool ensure_ascii);

/* json.dumps of a string; its output is tainted when any input byte was. */
static void write_json_str(jx_buf *b, const char *s, size_t n, bool ensure_ascii, bool tainted) {
    size_t from = b->n;
    write_json_str_clean(b, s, n, ensure_ascii);
    if (tainted) jx_buf_taint_from(b, from);
}

static void write_json_str_clean(jx_buf *b, const char *s, size_t n, bool ensure_ascii) {
    jx_buf_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        if (c >= 0x80 && ensure_ascii) {
            size_t q = i;
            uint32_t cp = jx_utf8_next(s, n, &q);
            jx_buf_put(b, s + run, i - run);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                jx_buf_printf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else jx_buf_printf(b, "\\u%04x", cp);
            run = q;
            i = q - 1;
            continue;
        }
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            esc = tmp;
        }
        if (esc) {
            jx_buf_put(b, s + run, i - run);
            jx_buf_put(b, esc, strlen(esc));
            run = i + 1;
        }
    }
    jx_buf_put(b, s + run, n - run);
    jx_buf_putc(b, '"');
}

static void json_newline(jx_buf *b, const char *indent, int level) {
    jx_buf_putc(b, '\n');
    size_t il = strlen(indent);
    for (int i = 0; i < level; i++) jx_buf_put(b, indent, il);
}

static int key_cmp_idx(const jv_dict *d, size_t a, size_t b) {
    size_t la = d->klen[a], lb = d->klen[b];
    int c = memcmp(d->keys[a], d->keys[b], la < lb ? la : lb);
    if (c) return c;
    return la < lb ? -1 : la > lb;
}

bool jv_write_json(jx_ctx *cx, jx_buf *b, const jinja_value *v, const jx_json_opts *o, int depth,
                   const jx_node *at) {
    const char *indent = o->indent, *item_sep = o->item_sep, *key_sep = o->key_sep;
    char tmp[64];
    if (depth > 200) {
        jx_fail(cx, JINJA_ERR_VALUE, at, "Circular reference detected");
        return false;
    }
    switch (v->kind) {
    case JV_NONE: return jx_buf_put(b, "null", 4);
    case JV_BOOL: return v->u.b ? jx_buf_put(b, "true", 4) : jx_buf_put(b, "false", 5);
    case JV_INT: return jx_buf_printf(b, "%lld", (long long)v->u.i);
    case JV_FLOAT:
        if (isnan(v->u.f)) return jx_buf_put(b, "NaN", 3);
        if (isinf(v->u.f)) return v->u.f < 0 ? jx_buf_put(b, "-Infinity", 9) : jx_buf_put(b, "Infinity", 8);
        jv_float_repr(v->u.f, tmp, sizeof tmp);
        return jx_buf_put(b, tmp, strlen(tmp));
    case JV_STR: write_json_str(b, v->u.str.s, v->u.str.len, o->ensure_ascii, jv_str_tainted(v)); return true;
    case JV_LIST: {
        const jv_list *l = v->u.list;
        if (l->n == 0) return jx_buf_put(b, "[]", 2);
        jx_buf_putc(b, '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) jx_buf_put(b, item_sep, strlen(item_sep));
            if (indent) json_newline(b, indent, depth + 1);
            if (!jv_write_json(cx, b, l->items[i], o, depth + 1, at))
                return false;
        }
        if (indent) json_newline(b, indent, depth);
        return jx_buf_putc(b, ']');
    }
    case JV_DICT: {
        const jv_dict *d = v->u.dict;
        if (d->n == 0) return jx_buf_put(b, "{}", 2);
        size_t stack_ord[64], *ord = stack_ord;
        if (d->n > 64) {
            ord = jx_arena_alloc(&cx->arena, d->n * sizeof *ord);
            if (!ord) {
                jx_fail_oom(cx, at);
                return false;
            }
        }
        for (size_t i = 0; i < d->n; i++) ord[i] = i;
        if (o->sort_keys) /* insertion sort: dicts here are small */
            for (size_t i = 1; i < d->n; i++) {
                size_t x = ord[i], j = i;
                while (j > 0 && key_cmp_idx(d, ord[j - 1], x) > 0) {
                    ord[j] = ord[j - 1];
                    j--;
                }
                ord[j] = x;
            }
        jx_buf_putc(b, '{');
        for (size_t k = 0; k < d->n; k++) {
            size_t i = ord[k];
            if (k) jx_buf_put(b, item_sep, strlen(item_sep));
            if (indent) json_newline(b, indent, depth + 1);
            write_json_str(b, d->keys[i], d->klen[i], o->ensure_ascii, d->keys_tainted);
            jx_buf_put(b, key_sep, strlen(key_sep));
            if (!jv_write_json(cx, b, d->vals[i], o, depth + 1, at))
                return false;
        }
        if (indent) json_newline(b, indent, depth);
        return jx_buf_putc(b, '}');
    }
    default: {
        const char *tn = v->kind == JV_UNDEF ? "Undefined" : jv_type_name(v);
        jx_fail(cx, JINJA_ERR_TYPE, at, "Object of type %s is not JSON serializable", tn);
        return false;
    }
    }
}

/* ========================================================================
 * Equality and ordering
 * ====================================================================== */

static double num_val(const jinja_value *v) {
    return v->kind == JV_FLOAT ? v->u.f : v->kind == JV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t int_val(const jinja_value *v) { return v->kind == JV_INT ? v->u.i : (int64_t)v->u.b; }

bool jv_equal(const jinja_value *a, const jinja_value *b) {
    if (a == b) return true;
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a->kind == JV_FLOAT || b->kind == JV_FLOAT) return num_val(a) == num_val(b);
        return int_val(a) == int_val(b);
    }
    if (a->kind != b->kind) {
        return false;
    }
    switch (a->kind) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
    case JV_LIST: {
        /* list == tuple is False in Python */
        if (a->is_tuple != b->is_tuple || a->u.list->n != b->u.list->n) return false;
        for (size_t i = 0; i < a->u.list->n; i++)
            if (!jv_equal(a->u.list->items[i], b->u.list->items[i])) return false;
        return true;
    }
    case JV_DICT: {
        const jv_dict *x = a->u.dict, *y = b->u.dict;
        if (x->n != y->n) return false;
        for (size_t i = 0; i < x->n; i++) {
            const jinja_value *o = jv_dict_get(b, x->keys[i], x->klen[i]);
            if (!o || !jv_equal(x->vals[i], o)) return false;
        }
        return true;
    }
    case JV_FUNC: return a->u.func.fn == b->u.func.fn && a->u.func.self == b->u.func.self;
    default: return false; /* identity only */
    }
}

bool jv_compare(jx_ctx *cx, const jinja_value *a, const jinja_value *b, int *res, const jx_node *at) {
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a->kind == JV_FLOAT || b->kind == JV_FLOAT) {
            double x = num_val(a), y = num_val(b);
            *res = x < y ? -1 : x > y ? 1 : 0;
        } else {
            int64_t x = int_val(a), y = int_val(b);
            *res = x < y ? -1 : x > y ? 1 : 0;
        }
        return true;
    }
    if (a->kind == JV_STR && b->kind == JV_STR) {
        size_t la = a->u.str.len, lb = b->u.str.len;
        int c = memcmp(a->u.str.s, b->u.str.s, la < lb ? la : lb); /* UTF-8 order = code point order */
        *res = c ? (c < 0 ? -1 : 1) : (la < lb ? -1 : la > lb);
        return true;
    }
    if (a->kind == JV_LIST && b->kind == JV_LIST && a->is_tuple == b->is_tuple) {
        size_t n = a->u.list->n < b->u.list->n ? a->u.list->n : b->u.list->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_equal(a->u.list->items[i], b->u.list->items[i])) continue;
            return jv_compare(cx, a->u.list->items[i], b->u.list->items[i], res, at);
        }
        *res = a->u.list->n < b->u.list->n ? -1 : a->u.list->n > b->u.list->n;
        return true;
    }
    if (a->kind == JV_UNDEF) {
        jx_fail_undef(cx, a, at);
        return false;
    }
    if (b->kind == JV_UNDEF) {
        jx_fail_undef(cx, b, at);
        return false;
    }
    jx_fail(cx, JINJA_ERR_TYPE, at, "'<' not supported between instances of '%s' and '%s'",
            jv_type_name(a), jv_type_name(b));
    return false;
}

/* ========================================================================
 * len() and iteration
 * ====================================================================== */

int64_t jv_length(jx_ctx *cx, const jinja_value *v, const jx_node *at) {
    switch (v->kind) {
    case JV_UNDEF: return 0;
    case JV_STR: return v->is_ascii ? (int64_t)v->u.str.len : (int64_t)jx_utf8_len(v->u.str.s, v->u.str.len);
    case JV_LIST: return (int64_t)v->u.list->n;
    case JV_DICT: return (int64_t)v->u.dict->n;
    case JV_LOOP: return (int64_t)v->u.loop->n;
    default:
        jx_fail(cx, JINJA_ERR_TYPE, at, "object of type '%s' has no len()", jv_type_name(v));
        return -1;
    }
}

bool jv_iterate(jx_ctx *cx, jinja_value *v, jinja_value ***items, size_t *n, const jx_node *at) {
    switch (v->kind) {
    case JV_UNDEF:
        *items = NULL;
        *n = 0;
        return true;
    case JV_LIST:
        *items = v->u.list->items;
        *n = v->u.list->n;
        return true;
    case JV_DICT: {
        const jv_dict *d = v->u.dict;
        jinja_value **arr = jx_arena_alloc(&cx->arena, (d->n ? d->n : 1) * sizeof *arr);
        if (!arr) return jx_fail_oom(cx, at), false;
        for (size_t i = 0; i < d->n; i++) {
            arr[i] = jv_dict_key(cx, v, i);
            if (!arr[i]) return false;
        }
        *items = arr;
        *n = d->n;
        return true;
    }
    case JV_STR: {
        size_t nc;
        size_t *off = jx_utf8_offsets(cx, v->u.str.s, v->u.str.len, &nc);
        if (!off) return jx_fail_oom(cx, at), false;
        jinja_value **arr = jx_arena_alloc(&cx->arena, (nc ? nc : 1) * sizeof *arr);
        if (!arr) return jx_fail_oom(cx, at), false;
        for (size_t i = 0; i < nc; i++) {
            arr[i] = jv_str_sub(cx, v, off[i], off[i + 1] - off[i]);
            if (!arr[i]) return false;
        }
        *items = arr;
        *n = nc;
        return true;
    }
    default:
        jx_fail(cx, JINJA_ERR_TYPE, at, "'%s' object is not iterable", jv_type_name(v));
        return false;
    }
}
