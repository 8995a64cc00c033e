/*
 * jinja_eval.c - executes the AST: scopes, statements, expressions,
 * attribute/item access, operators, macros.
 *
 * Scoping follows Jinja2: a for loop body, a macro body and a with block get
 * their own scope (assignments there do not leak out); if blocks do not.
 * Variables assigned in a loop body persist across its iterations. Macros
 * see the scope they were defined in at call time.
 *
 * Every function that can fail returns NULL/false after recording the first
 * error in cx (jx_fail); callers just propagate.
 */
#include "jinja_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================================
 * Errors and limits
 * ====================================================================== */

void *jx_fail(jx_ctx *cx, jinja_err_kind kind, const jx_node *at, const char *fmt, ...) {
    if (cx->failed) return NULL;
    cx->failed = true;
    cx->err.kind = kind;
    cx->err.line = at ? at->line : 0;
    cx->err.col = at ? at->col : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cx->err.msg, sizeof cx->err.msg, fmt, ap);
    va_end(ap);
    return NULL;
}

void *jx_fail_undef(jx_ctx *cx, const jinja_value *u, const jx_node *at) {
    char msg[300];
    jv_undef_message(u, msg, sizeof msg);
    return jx_fail(cx, JINJA_ERR_UNDEFINED, at, "%s", msg);
}

void *jx_fail_oom(jx_ctx *cx, const jx_node *at) {
    if (cx->arena.cap && cx->arena.used_total + 65536 > cx->arena.cap)
        return jx_fail(cx, JINJA_ERR_LIMIT, at, "template used more than %zu bytes of memory", cx->arena.cap);
    return jx_fail(cx, JINJA_ERR_NOMEM, at, "out of memory");
}

bool jx_count_iter(jx_ctx *cx, uint64_t n, const jx_node *at) {
    cx->iterations += n;
    if (cx->iterations > cx->lim.max_iterations) {
        jx_fail(cx, JINJA_ERR_LIMIT, at, "template exceeded %llu loop iterations",
                (unsigned long long)cx->lim.max_iterations);
        return false;
    }
    return true;
}

static bool enter(jx_ctx *cx, const jx_node *at) {
    if (++cx->depth > cx->lim.max_depth) {
        jx_fail(cx, JINJA_ERR_LIMIT, at, "template recursion deeper than %d", cx->lim.max_depth);
        return false;
    }
    return true;
}

/* ========================================================================
 * Arguments
 * ====================================================================== */

jinja_value *jx_arg(jx_args *a, size_t idx, const char *name) {
    if (idx < a->npos) return a->pos[idx];
    if (name)
        for (size_t i = 0; i < a->nkw; i++)
            if (strcmp(a->kwn[i], name) == 0) return a->kwv[i];
    return NULL;
}

bool jx_args_check(jx_ctx *cx, jx_args *a, size_t npos, const char *const *kw, const char *fname,
                   const jx_node *at) {
    if (a->npos > npos) {
        jx_fail(cx, JINJA_ERR_TYPE, at, "%s() takes at most %zu positional argument(s) (%zu given)", fname, npos,
                a->npos);
        return false;
    }
    for (size_t i = 0; i < a->nkw; i++) {
        bool ok = false;
        for (size_t k = 0; kw && kw[k]; k++)
            if (strcmp(kw[k], a->kwn[i]) == 0) {
                /* also reject a keyword that duplicates a positional */
                if (k < a->npos) {
                    jx_fail(cx, JINJA_ERR_TYPE, at, "%s() got multiple values for argument '%s'", fname, kw[k]);
                    return false;
                }
                ok = true;
            }
        if (!ok) {
            jx_fail(cx, JINJA_ERR_TYPE, at, "%s() got an unexpected keyword argument '%s'", fname, a->kwn[i]);
            return false;
        }
    }
    return true;
}

/* ========================================================================
 * Scopes
 * ====================================================================== */

static jx_scope *scope_new(jx_ctx *cx, jx_scope *parent) {
    jx_scope *s = jx_arena_alloc(&cx->arena, sizeof *s);
    if (!s) return jx_fail_oom(cx, NULL);
    s->parent = parent;
    return s;
}

static jinja_value **scope_slot(jx_scope *s, const char *name, size_t len) {
    for (size_t i = 0; i < s->n; i++)
        if (s->nlen[i] == len && memcmp(s->names[i], name, len) == 0) return &s->vals[i];
    return NULL;
}

static bool scope_set(jx_ctx *cx, jx_scope *s, const char *name, size_t len, jinja_value *v) {
    jinja_value **slot = scope_slot(s, name, len);
    if (slot) {
        *slot = v;
        return true;
    }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 8;
        const char **nn = jx_arena_alloc(&cx->arena, nc * sizeof *nn);
        size_t *nl = jx_arena_alloc(&cx->arena, nc * sizeof *nl);
        jinja_value **nv = jx_arena_alloc(&cx->arena, nc * sizeof *nv);
        if (!nn || !nl || !nv) return jx_fail_oom(cx, NULL), false;
        if (s->n) {
            memcpy(nn, s->names, s->n * sizeof *nn);
            memcpy(nl, s->nlen, s->n * sizeof *nl);
            memcpy(nv, s->vals, s->n * sizeof *nv);
        }
        s->names = nn;
        s->nlen = nl;
        s->vals = nv;
        s->cap = nc;
    }
    s->names[s->n] = name;
    s->nlen[s->n] = len;
    s->vals[s->n] = v;
    s->n++;
    return true;
}

static jinja_value *scope_lookup(jx_scope *s, const char *name, size_t len) {
    for (; s; s = s->parent) {
        jinja_value **slot = scope_slot(s, name, len);
        if (slot) return *slot;
    }
    return NULL;
}

/* ========================================================================
 * Output capture
 * ====================================================================== */

static bool out_put_t(jx_ctx *cx, const char *s, size_t n, const uint8_t *taint, const jx_node *at) {
    if (!jx_buf_put_t(cx->out, s, n, taint)) {
        if (cx->out->over_limit)
            jx_fail(cx, JINJA_ERR_LIMIT, at, "template output exceeds %zu bytes", cx->lim.max_output);
        else jx_fail(cx, JINJA_ERR_NOMEM, at, "out of memory");
        return false;
    }
    return true;
}

static bool out_put(jx_ctx *cx, const char *s, size_t n, const jx_node *at) { return out_put_t(cx, s, n, NULL, at); }

static bool out_value(jx_ctx *cx, jinja_value *v, const jx_node *at) {
    if (v->kind == JV_STR) return out_put_t(cx, v->u.str.s, v->u.str.len, v->u.str.taint, at);
    if (v->kind == JV_UNDEF) return true;
    jv_write_str(cx->out, v);
    if (cx->out->failed) return out_put(cx, "", 1, at); /* report the failure */
    return true;
}

static bool exec_body(jx_ctx *cx, jx_scope *sc, jx_node **list, size_t n);

/* Run a body with output captured into a new string value. */
static jinja_value *capture(jx_ctx *cx, jx_scope *sc, jx_node **list, size_t n) {
    jx_buf buf = {.limit = cx->lim.max_output};
    jx_buf *saved = cx->out;
    cx->out = &buf;
    bool ok = exec_body(cx, sc, list, n);
    cx->out = saved;
    jinja_value *r = NULL;
    if (ok) r = jv_str_from_buf(cx, &buf);
    jx_buf_free(&buf);
    return r;
}

/* ========================================================================
 * Expressions
 * ====================================================================== */

static jinja_value *eval(jx_ctx *cx, jx_scope *sc, const jx_node *nd);

static bool eval_args(jx_ctx *cx, jx_scope *sc, const jx_node *nd, jx_args *a) {
    memset(a, 0, sizeof *a);
    if (nd->n) {
        a->pos = jx_arena_alloc(&cx->arena, nd->n * sizeof *a->pos);
        if (!a->pos) return jx_fail_oom(cx, nd), false;
        for (size_t i = 0; i < nd->n; i++)
            if (!(a->pos[i] = eval(cx, sc, nd->list[i]))) return false;
        a->npos = nd->n;
    }
    if (nd->n2) {
        a->kwv = jx_arena_alloc(&cx->arena, nd->n2 * sizeof *a->kwv);
        if (!a->kwv) return jx_fail_oom(cx, nd), false;
        for (size_t i = 0; i < nd->n2; i++)
            if (!(a->kwv[i] = eval(cx, sc, nd->list2[i]))) return false;
        a->kwn = nd->names;
        a->nkw = nd->n2;
    }
    return true;
}

static jinja_value *loop_attr(jx_ctx *cx, jinja_value *lv, const char *name, size_t len);

jinja_value *jx_getattr(jx_ctx *cx, jinja_value *obj, const char *name, size_t nlen, const jx_node *at) {
    switch (obj->kind) {
    case JV_UNDEF: return jx_fail_undef(cx, obj, at);
    case JV_DICT: {
        /* Python attribute first: dict methods shadow keys for obj.name */
        jinja_value *m = jx_method_lookup(cx, obj, name, nlen);
        if (m) return m;
        if (cx->failed) return NULL;
        jinja_value *v = jv_dict_get(obj, name, nlen);
        return v ? v : jv_undef_attr(cx, obj, name, nlen);
    }
    case JV_NS: {
        jinja_value *v = jv_dict_get(obj, name, nlen);
        return v ? v : jv_undef_attr(cx, obj, name, nlen);
    }
    case JV_LOOP: return loop_attr(cx, obj, name, nlen);
    default: {
        if (nlen > 0 && name[0] == '_') return jv_undef_attr(cx, obj, name, nlen); /* sandbox: unsafe */
        jinja_value *m = jx_method_lookup(cx, obj, name, nlen);
        if (m) return m;
        if (cx->failed) return NULL;
        return jv_undef_attr(cx, obj, name, nlen);
    }
    }
}

static jinja_value *undef_element(jx_ctx *cx, jinja_value *obj, jinja_value *key) {
    jx_buf b = {0};
    jx_buf_printf(&b, "%s has no element ", jv_owner_repr(obj));
    jv_write_repr(&b, key);
    char *h = b.p ? jx_arena_strdup(&cx->arena, b.p, b.n) : NULL;
    jx_buf_free(&b);
    if (!h) return jx_fail_oom(cx, NULL);
    return jv_undef_hint(cx, h);
}

jinja_value *jx_getitem(jx_ctx *cx, jinja_value *obj, jinja_value *key, const jx_node *at) {
    if (obj->kind == JV_UNDEF) return jx_fail_undef(cx, obj, at);
    if (key->kind == JV_STR) {
        if (obj->kind == JV_DICT || obj->kind == JV_NS) {
            jinja_value *v = jv_dict_get(obj, key->u.str.s, key->u.str.len);
            if (v) return v;
            if (obj->kind == JV_DICT) {
                jinja_value *m = jx_method_lookup(cx, obj, key->u.str.s, key->u.str.len);
                if (m || cx->failed) return m;
            }
            return jv_undef_attr(cx, obj, key->u.str.s, key->u.str.len);
        }
        /* obj['name'] falls back to getattr */
        return jx_getattr(cx, obj, key->u.str.s, key->u.str.len, at);
    }
    if (key->kind == JV_INT || key->kind == JV_BOOL) {
        int64_t i = key->kind == JV_INT ? key->u.i : key->u.b;
        if (obj->kind == JV_LIST) {
            int64_t n = (int64_t)obj->u.list->n;
            if (i < 0) i += n;
            if (i < 0 || i >= n) return undef_element(cx, obj, key);
            return obj->u.list->items[i];
        }
        if (obj->kind == JV_STR) {
            const char *s = obj->u.str.s;
            size_t len = obj->u.str.len;
            if (obj->is_ascii) {
                int64_t n = (int64_t)len;
                if (i < 0) i += n;
                if (i < 0 || i >= n) return undef_element(cx, obj, key);
                return jv_str_sub(cx, obj, (size_t)i, 1);
            }
            size_t nc;
            size_t *off = jx_utf8_offsets(cx, s, len, &nc);
            if (!off) return jx_fail_oom(cx, at);
            if (i < 0) i += (int64_t)nc;
            if (i < 0 || i >= (int64_t)nc) return undef_element(cx, obj, key);
            return jv_str_sub(cx, obj, off[i], off[i + 1] - off[i]);
        }
    }
    return undef_element(cx, obj, key);
}

jinja_value *jx_getattr_path(jx_ctx *cx, jinja_value *obj, jinja_value *path, const jx_node *at) {
    if (path->kind == JV_INT) return jx_getitem(cx, obj, path, at);
    if (path->kind != JV_STR) return jx_fail(cx, JINJA_ERR_TYPE, at, "attribute name must be a string");
    const char *s = path->u.str.s;
    size_t n = path->u.str.len, i = 0;
    while (i <= n) {
        size_t j = i;
        while (j < n && s[j] != '.') j++;
        const char *part = s + i;
        size_t pl = j - i;
        bool digits = pl > 0;
        int64_t iv = 0;
        for (size_t k = 0; k < pl; k++) {
            if (part[k] < '0' || part[k] > '9' || iv > 1000000000) digits = false;
            else iv = iv * 10 + (part[k] - '0');
        }
        /* jinja2 environment.getitem: obj[part] first, then getattr */
        if (obj->kind == JV_UNDEF) return obj;
        if (digits) {
            jinja_value *k = jv_int(cx, iv);
            if (!k) return NULL;
            obj = jx_getitem(cx, obj, k, at);
        } else {
            jinja_value *k = jv_str_ref(cx, part, pl);
            if (!k) return NULL;
            obj = jx_getitem(cx, obj, k, at);
        }
        if (!obj) return NULL;
        i = j + 1;
    }
    return obj;
}

/* Python slice on a list or string. */
static jinja_value *do_slice(jx_ctx *cx, jinja_value *obj, jinja_value *vs[3], const jx_node *at) {
    int64_t idx[3] = {0, 0, 1};
    bool has[3] = {false, false, false};
    for (int k = 0; k < 3; k++) {
        jinja_value *v = vs[k];
        if (!v || v->kind == JV_NONE) continue;
        if (v->kind == JV_UNDEF) return jx_fail_undef(cx, v, at);
        if (v->kind != JV_INT && v->kind != JV_BOOL)
            return jx_fail(cx, JINJA_ERR_TYPE, at,
                           "slice indices must be integers or None or have an __index__ method");
        idx[k] = v->kind == JV_INT ? v->u.i : v->u.b;
        has[k] = true;
    }
    int64_t step = has[2] ? idx[2] : 1;
    if (step == 0) return jx_fail(cx, JINJA_ERR_VALUE, at, "slice step cannot be zero");
    if (step == INT64_MIN) step = -INT64_MAX;
    size_t *off = NULL;
    int64_t len;
    if (obj->kind == JV_LIST) len = (int64_t)obj->u.list->n;
    else if (obj->kind == JV_STR) {
        if (obj->is_ascii) len = (int64_t)obj->u.str.len;
        else {
            size_t nc;
            off = jx_utf8_offsets(cx, obj->u.str.s, obj->u.str.len, &nc);
            if (!off) return jx_fail_oom(cx, at);
            len = (int64_t)nc;
        }
    } else if (obj->kind == JV_UNDEF) return jx_fail_undef(cx, obj, at);
    else return jx_fail(cx, JINJA_ERR_TYPE, at, "'%s' object is not subscriptable", jv_type_name(obj));
    /* CPython PySlice_AdjustIndices */
    int64_t start, stop;
    if (!has[0]) start = step < 0 ? len - 1 : 0;
    else {
        start = idx[0];
        if (start < 0) {
            start += len;
            if (start < 0) start = step < 0 ? -1 : 0;
        } else if (start >= len) start = step < 0 ? len - 1 : len;
    }
    if (!has[1]) stop = step < 0 ? -1 : len;
    else {
        stop = idx[1];
        if (stop < 0) {
            stop += len;
            if (stop < 0) stop = step < 0 ? -1 : 0;
        } else if (stop >= len) stop = step < 0 ? len - 1 : len;
    }
    int64_t count = 0;
    if (step < 0) {
        if (stop < start) count = (start - stop - 1) / (-step) + 1;
    } else if (start < stop) count = (stop - start - 1) / step + 1;

    if (obj->kind == JV_LIST) {
        jinja_value *r = jv_list_new(cx, (size_t)count);
        if (!r) return NULL;
        r->is_tuple = obj->is_tuple;
        /* i = start + k*step: only indices of the slice are ever formed
         * (an i += step after the last one could overflow for a huge step) */
        for (int64_t k = 0; k < count; k++) r->u.list->items[k] = obj->u.list->items[start + k * step];
        r->u.list->n = (size_t)count;
        return r;
    }
    const char *s = obj->u.str.s;
    if (step == 1) {
        if (count == 0) return &jx_empty_str;
        size_t b = off ? off[start] : (size_t)start, e = off ? off[start + count] : (size_t)(start + count);
        jinja_value *r = jv_str_sub(cx, obj, b, e - b);
        if (r && r != &jx_empty_str) r->is_ascii = obj->is_ascii;
        return r;
    }
    jx_buf b = {.limit = cx->lim.max_output};
    const uint8_t *t = obj->u.str.taint;
    for (int64_t k = 0; k < count; k++) {
        int64_t i = start + k * step; /* |k*step| <= |stop - start|: no overflow */
        size_t o = off ? off[i] : (size_t)i, l = off ? off[i + 1] - off[i] : 1;
        jx_buf_put_t(&b, s + o, l, t ? t + o : NULL);
    }
    jinja_value *r = b.failed ? jx_fail_oom(cx, at) : jv_str_from_buf(cx, &b);
    jx_buf_free(&b);
    return r;
}

/* ---- arithmetic ---- */

static bool as_int(const jinja_value *v, int64_t *o) {
    if (v->kind == JV_INT) *o = v->u.i;
    else if (v->kind == JV_BOOL) *o = v->u.b;
    else return false;
    return true;
}
static double as_f(const jinja_value *v) {
    return v->kind == JV_FLOAT ? v->u.f : v->kind == JV_INT ? (double)v->u.i : (double)v->u.b;
}

static const char *op_sym(jx_op op) {
    switch (op) {
    case OP_ADD: return "+";
    case OP_SUB: return "-";
    case OP_MUL: return "*";
    case OP_DIV: return "/";
    case OP_FLOORDIV: return "//";
    case OP_MOD: return "%";
    case OP_POW: return "** or pow()";
    default: return "?";
    }
}

static jinja_value *overflow(jx_ctx *cx, const jx_node *at) {
    return jx_fail(cx, JINJA_ERR_LIMIT, at, "integer result out of 64-bit range");
}

static jinja_value *repeat(jx_ctx *cx, jinja_value *seq, int64_t times, const jx_node *at) {
    if (times <= 0) return seq->kind == JV_STR ? &jx_empty_str : jv_list_new(cx, 0);
    if (seq->kind == JV_STR) {
        uint64_t total;
        if (__builtin_mul_overflow((uint64_t)seq->u.str.len, (uint64_t)times, &total) || total > cx->lim.max_output)
            return jx_fail(cx, JINJA_ERR_LIMIT, at, "string repetition result too large");
        char *p = jx_arena_alloc(&cx->arena, total + 1);
        if (!p) return jx_fail_oom(cx, at);
        for (int64_t k = 0; k < times; k++) memcpy(p + (size_t)k * seq->u.str.len, seq->u.str.s, seq->u.str.len);
        jinja_value *r = jv_str_ref(cx, p, total);
        if (r && r != &jx_empty_str) {
            r->is_ascii = seq->is_ascii;
            if (seq->u.str.taint) {
                uint8_t *t = jx_arena_alloc(&cx->arena, total);
                if (!t) return jx_fail_oom(cx, at);
                for (int64_t k = 0; k < times; k++)
                    memcpy(t + (size_t)k * seq->u.str.len, seq->u.str.taint, seq->u.str.len);
                r->u.str.taint = t;
            }
        }
        return r;
    }
    uint64_t total;
    if (__builtin_mul_overflow((uint64_t)seq->u.list->n, (uint64_t)times, &total) || total > (uint64_t)cx->lim.max_iterations)
        return jx_fail(cx, JINJA_ERR_LIMIT, at, "list repetition result too large");
    if (!jx_count_iter(cx, total, at)) return NULL;
    jinja_value *r = jv_list_new(cx, total);
    if (!r) return NULL;
    r->is_tuple = seq->is_tuple;
    for (uint64_t k = 0; k < total; k++) r->u.list->items[k] = seq->u.list->items[k % seq->u.list->n];
    r->u.list->n = total;
    return r;
}

static jinja_value *binop(jx_ctx *cx, jx_op op, jinja_value *a, jinja_value *b, const jx_node *at) {
    if (op == OP_TILDE) {
        jinja_value *sa = jv_to_str(cx, a), *sb = sa ? jv_to_str(cx, b) : NULL;
        if (!sb) return NULL;
        if (sa->u.str.len == 0) return sb;
        if (sb->u.str.len == 0) return sa;
        size_t n = sa->u.str.len + sb->u.str.len;
        if (n > cx->lim.max_output) return jx_fail(cx, JINJA_ERR_LIMIT, at, "string too large");
        char *p = jx_arena_alloc(&cx->arena, n + 1);
        if (!p) return jx_fail_oom(cx, at);
        memcpy(p, sa->u.str.s, sa->u.str.len);
        memcpy(p + sa->u.str.len, sb->u.str.s, sb->u.str.len);
        jinja_value *r = jv_str_ref(cx, p, n);
        if (r && r != &jx_empty_str) {
            r->is_ascii = sa->is_ascii && sb->is_ascii;
            if (sa->u.str.taint || sb->u.str.taint) { /* the flags follow the bytes */
                uint8_t *t = jx_arena_alloc(&cx->arena, n);
                if (!t) return jx_fail_oom(cx, at);
                if (sa->u.str.taint) memcpy(t, sa->u.str.taint, sa->u.str.len);
                if (sb->u.str.taint) memcpy(t + sa->u.str.len, sb->u.str.taint, sb->u.str.len);
                r->u.str.taint = t;
            }
        }
        return r;
    }
    if (a->kind == JV_UNDEF) return jx_fail_undef(cx, a, at);
    if (b->kind == JV_UNDEF) return jx_fail_undef(cx, b, at);
    bool na = jv_is_num(a), nb = jv_is_num(b);
    if (na && nb) {
        int64_t x, y, r;
        bool ints = as_int(a, &x) && as_int(b, &y);
        switch (op) {
        case OP_ADD:
            if (ints) return __builtin_add_overflow(x, y, &r) ? overflow(cx, at) : jv_int(cx, r);
            return jv_float(cx, as_f(a) + as_f(b));
        case OP_SUB:
            if (ints) return __builtin_sub_overflow(x, y, &r) ? overflow(cx, at) : jv_int(cx, r);
            return jv_float(cx, as_f(a) - as_f(b));
        case OP_MUL:
            if (ints) return __builtin_mul_overflow(x, y, &r) ? overflow(cx, at) : jv_int(cx, r);
            return jv_float(cx, as_f(a) * as_f(b));
        case OP_DIV:
            if (as_f(b) == 0.0) return jx_fail(cx, JINJA_ERR_ZERODIV, at, ints ? "division by zero" : "float division by zero");
            return jv_float(cx, as_f(a) / as_f(b));
        case OP_FLOORDIV:
            if (ints) {
                if (y == 0) return jx_fail(cx, JINJA_ERR_ZERODIV, at, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) return overflow(cx, at);
                int64_t q = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
                return jv_int(cx, q);
            }
            if (as_f(b) == 0.0) return jx_fail(cx, JINJA_ERR_ZERODIV, at, "float floor division by zero");
            return jv_float(cx, floor(as_f(a) / as_f(b)));
        case OP_MOD:
            if (ints) {
                if (y == 0) return jx_fail(cx, JINJA_ERR_ZERODIV, at, "integer modulo by zero");
                if (y == -1) return jv_int(cx, 0);
                int64_t m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                return jv_int(cx, m);
            } else {
                double fx = as_f(a), fy = as_f(b);
                if (fy == 0.0) return jx_fail(cx, JINJA_ERR_ZERODIV, at, "float modulo");
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
                return jv_float(cx, m);
            }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t res = 1, base = x;
                int64_t e = y;
                while (e > 0) {
                    if (e & 1)
                        if (__builtin_mul_overflow(res, base, &res)) return overflow(cx, at);
                    e >>= 1;
                    if (e && __builtin_mul_overflow(base, base, &base)) return overflow(cx, at);
                }
                return jv_int(cx, res);
            }
            if (as_f(a) == 0.0 && as_f(b) < 0)
                return jx_fail(cx, JINJA_ERR_ZERODIV, at, "0.0 cannot be raised to a negative power");
            return jv_float(cx, pow(as_f(a), as_f(b)));
        default: break;
        }
    }
    if (op == OP_ADD) {
        if (a->kind == JV_STR && b->kind == JV_STR) return binop(cx, OP_TILDE, a, b, at);
        if (a->kind == JV_LIST && b->kind == JV_LIST && a->is_tuple == b->is_tuple) {
            size_t n = a->u.list->n + b->u.list->n;
            if (!jx_count_iter(cx, n, at)) return NULL;
            jinja_value *r = jv_list_new(cx, n);
            if (!r) return NULL;
            r->is_tuple = a->is_tuple;
            if (a->u.list->n) memcpy(r->u.list->items, a->u.list->items, a->u.list->n * sizeof(jinja_value *));
            if (b->u.list->n)
                memcpy(r->u.list->items + a->u.list->n, b->u.list->items, b->u.list->n * sizeof(jinja_value *));
            r->u.list->n = n;
            return r;
        }
        if (a->kind == JV_STR || a->kind == JV_LIST)
            return jx_fail(cx, JINJA_ERR_TYPE, at, "can only concatenate %s (not \"%s\") to %s", jv_type_name(a),
                           jv_type_name(b), jv_type_name(a));
    }
    if (op == OP_MUL) {
        int64_t t;
        if ((a->kind == JV_STR || a->kind == JV_LIST) && as_int(b, &t)) return repeat(cx, a, t, at);
        if ((b->kind == JV_STR || b->kind == JV_LIST) && as_int(a, &t)) return repeat(cx, b, t, at);
        if (a->kind == JV_STR || a->kind == JV_LIST || b->kind == JV_STR || b->kind == JV_LIST)
            return jx_fail(cx, JINJA_ERR_TYPE, at, "can't multiply sequence by non-int of type '%s'",
                           jv_type_name(a->kind == JV_STR || a->kind == JV_LIST ? b : a));
    }
    if (op == OP_MOD && a->kind == JV_STR) return jx_percent_format(cx, a, b, at);
    return jx_fail(cx, JINJA_ERR_TYPE, at, "unsupported operand type(s) for %s: '%s' and '%s'", op_sym(op),
                   jv_type_name(a), jv_type_name(b));
}

/* `item in container` */
static int contains(jx_ctx *cx, jinja_value *container, jinja_value *item, const jx_node *at) {
    switch (container->kind) {
    case JV_STR:
        if (item->kind == JV_UNDEF) return jx_fail_undef(cx, item, at), -1;
        if (item->kind != JV_STR) {
            jx_fail(cx, JINJA_ERR_TYPE, at, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
            return -1;
        }
        if (item->u.str.len == 0) return 1;
        return memmem(container->u.str.s, container->u.str.len, item->u.str.s, item->u.str.len) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < container->u.list->n; i++)
            if (jv_equal(container->u.list->items[i], item)) return 1;
        return 0;
    case JV_DICT:
    case JV_NS:
        if (item->kind != JV_STR) return 0;
        return jv_dict_get(container, item->u.str.s, item->u.str.len) != NULL;
    case JV_UNDEF: return 0;
    default:
        jx_fail(cx, JINJA_ERR_TYPE, at, "argument of type '%s' is not iterable", jv_type_name(container));
        return -1;
    }
}

static jinja_value *eval_compare(jx_ctx *cx, jx_scope *sc, const jx_node *nd) {
    jinja_value *left = eval(cx, sc, nd->a);
    if (!left) return NULL;
    for (size_t i = 0; i < nd->n; i++) {
        jinja_value *right = eval(cx, sc, nd->list[i]);
        if (!right) return NULL;
        jx_op op = (jx_op)(unsigned char)nd->s[i];
        bool r;
        int c;
        switch (op) {
        case OP_EQ: r = jv_equal(left, right); break;
        case OP_NE: r = !jv_equal(left, right); break;
        case OP_IN:
        case OP_NOTIN:
            c = contains(cx, right, left, nd);
            if (c < 0) return NULL;
            r = op == OP_IN ? c : !c;
            break;
        default:
            if (!jv_compare(cx, left, right, &c, nd)) return NULL;
            r = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
        }
        if (!r) return &jx_false_v;
        left = right;
    }
    return &jx_true_v;
}

/* ---- loop variable ---- */

static jinja_value *loop_cycle(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    if (a->npos == 0) return jx_fail(cx, JINJA_ERR_TYPE, at, "no items for cycling given");
    return a->pos[self->u.loop->idx % a->npos];
}

static jinja_value *loop_attr(jx_ctx *cx, jinja_value *lv, const char *name, size_t len) {
    jv_loop *l = lv->u.loop;
    int64_t i = (int64_t)l->idx, n = (int64_t)l->n;
#define IS(s) (len == sizeof(s) - 1 && memcmp(name, s, len) == 0)
    if (IS("index")) return jv_int(cx, i + 1);
    if (IS("index0")) return jv_int(cx, i);
    if (IS("revindex")) return jv_int(cx, n - i);
    if (IS("revindex0")) return jv_int(cx, n - i - 1);
    if (IS("first")) return jv_bool(i == 0);
    if (IS("last")) return jv_bool(i == n - 1);
    if (IS("length")) return jv_int(cx, n);
    if (IS("depth")) return jv_int(cx, l->depth);
    if (IS("depth0")) return jv_int(cx, l->depth - 1);
    if (IS("previtem")) return i > 0 ? l->items[i - 1] : jv_undef_hint(cx, "there is no previous item");
    if (IS("nextitem")) return i + 1 < n ? l->items[i + 1] : jv_undef_hint(cx, "there is no next item");
    if (IS("cycle")) return jv_func(cx, loop_cycle, lv, "cycle");
#undef IS
    return jv_undef_attr(cx, lv, name, len);
}

/* ---- macros ---- */

static jinja_value *call_macro(jx_ctx *cx, jinja_value *mv, jx_args *a, jinja_value *caller, const jx_node *at) {
    const jv_macro *m = mv->u.macro;
    const jx_node *def = m->def;
    const char *mname = def->kind == N_MACRO ? def->s : "caller";
    if (a->npos > def->n2)
        return jx_fail(cx, JINJA_ERR_TYPE, at, "macro '%s' takes not more than %zu argument(s)", mname, def->n2);
    jx_scope *sc = scope_new(cx, m->closure);
    if (!sc) return NULL;
    for (size_t k = 0; k < a->nkw; k++) {
        bool known = false;
        for (size_t i = 0; i < def->n2; i++)
            if (strcmp(def->names[i], a->kwn[k]) == 0) {
                if (i < a->npos)
                    return jx_fail(cx, JINJA_ERR_TYPE, at, "macro '%s' got multiple values for argument '%s'", mname,
                                   a->kwn[k]);
                known = true;
            }
        if (!known && strcmp(a->kwn[k], "caller") != 0)
            return jx_fail(cx, JINJA_ERR_TYPE, at, "macro '%s' takes no keyword argument '%s'", mname, a->kwn[k]);
    }
    for (size_t i = 0; i < def->n2; i++) {
        const char *pn = def->names[i];
        jinja_value *v = i < a->npos ? a->pos[i] : NULL;
        for (size_t k = 0; !v && k < a->nkw; k++)
            if (strcmp(a->kwn[k], pn) == 0) v = a->kwv[k];
        if (!v && def->list2[i]) {
            v = eval(cx, sc, def->list2[i]);
            if (!v) return NULL;
        }
        if (!v) {
            char *h = jx_arena_alloc(&cx->arena, strlen(pn) + 32);
            if (!h) return jx_fail_oom(cx, at);
            sprintf(h, "parameter '%s' was not provided", pn);
            v = jv_undef_hint(cx, h);
            if (!v) return NULL;
        }
        if (!scope_set(cx, sc, pn, strlen(pn), v)) return NULL;
    }
    if (caller && !scope_set(cx, sc, "caller", 6, caller)) return NULL;
    if (!caller)
        for (size_t k = 0; k < a->nkw; k++)
            if (strcmp(a->kwn[k], "caller") == 0 && !scope_set(cx, sc, "caller", 6, a->kwv[k])) return NULL;
    if (!enter(cx, at)) return NULL;
    int saved_ctl = cx->ctl;
    cx->ctl = 0;
    jinja_value *r = capture(cx, sc, def->list, def->n);
    cx->ctl = saved_ctl;
    cx->depth--;
    return r;
}

jinja_value *jx_call_value(jx_ctx *cx, jinja_value *callee, jx_args *a, const jx_node *at) {
    switch (callee->kind) {
    case JV_FUNC: return callee->u.func.fn(cx, callee->u.func.self, a, at);
    case JV_MACRO: return call_macro(cx, callee, a, NULL, at);
    case JV_UNDEF: return jx_fail_undef(cx, callee, at);
    default: return jx_fail(cx, JINJA_ERR_TYPE, at, "'%s' object is not callable", jv_type_name(callee));
    }
}

static jinja_value *eval_inner(jx_ctx *cx, jx_scope *sc, const jx_node *nd) {
    switch (nd->kind) {
    case N_CONST: return nd->val;
    case N_NAME: {
        jinja_value *v = scope_lookup(sc, nd->s, nd->slen);
        if (v) return v;
        v = jx_builtin_global(nd->s, nd->slen);
        if (v) return v;
        return jv_undef_name(cx, nd->s, nd->slen);
    }
    case N_LIST:
    case N_TUPLE: {
        jinja_value *l = jv_list_new(cx, nd->n);
        if (!l) return NULL;
        l->is_tuple = nd->kind == N_TUPLE;
        for (size_t i = 0; i < nd->n; i++) {
            jinja_value *v = eval(cx, sc, nd->list[i]);
            if (!v) return NULL;
            l->u.list->items[i] = v;
        }
        l->u.list->n = nd->n;
        return l;
    }
    case N_DICT: {
        jinja_value *d = jv_dict_new(cx, nd->n);
        if (!d) return NULL;
        for (size_t i = 0; i < nd->n; i++) {
            jinja_value *k = eval(cx, sc, nd->list[i]);
            if (!k) return NULL;
            if (k->kind != JV_STR)
                return jx_fail(cx, JINJA_ERR_UNSUPPORTED, nd->list[i], "only string dict keys are supported");
            jinja_value *v = eval(cx, sc, nd->list2[i]);
            if (!v || !jv_dict_set_v(cx, d, k, v)) return NULL;
        }
        return d;
    }
    case N_GETATTR: {
        jinja_value *o = eval(cx, sc, nd->a);
        if (!o) return NULL;
        return jx_getattr(cx, o, nd->s, nd->slen, nd);
    }
    case N_GETITEM: {
        jinja_value *o = eval(cx, sc, nd->a);
        if (!o) return NULL;
        if (nd->b->kind == N_SLICE) {
            jinja_value *vs[3] = {NULL, NULL, NULL};
            const jx_node *parts[3] = {nd->b->a, nd->b->b, nd->b->c};
            for (int k = 0; k < 3; k++)
                if (parts[k] && !(vs[k] = eval(cx, sc, parts[k]))) return NULL;
            return do_slice(cx, o, vs, nd);
        }
        jinja_value *k = eval(cx, sc, nd->b);
        if (!k) return NULL;
        return jx_getitem(cx, o, k, nd);
    }
    case N_CALL: {
        jinja_value *f = eval(cx, sc, nd->a);
        if (!f) return NULL;
        jx_args a;
        if (!eval_args(cx, sc, nd, &a)) return NULL;
        return jx_call_value(cx, f, &a, nd);
    }
    case N_FILTER: {
        jinja_value *v = eval(cx, sc, nd->a);
        if (!v) return NULL;
        jx_args a;
        if (!eval_args(cx, sc, nd, &a)) return NULL;
        return nd->filter(cx, v, &a, nd);
    }
    case N_TEST: {
        jinja_value *v = eval(cx, sc, nd->a);
        if (!v) return NULL;
        jx_args a;
        if (!eval_args(cx, sc, nd, &a)) return NULL;
        int r = nd->test(cx, v, &a, nd);
        if (r < 0) return NULL;
        return jv_bool(r);
    }
    case N_BINOP: {
        jinja_value *x = eval(cx, sc, nd->a);
        if (!x) return NULL;
        jinja_value *y = eval(cx, sc, nd->b);
        if (!y) return NULL;
        return binop(cx, (jx_op)nd->op, x, y, nd);
    }
    case N_NEG:
    case N_POS: {
        jinja_value *x = eval(cx, sc, nd->a);
        if (!x) return NULL;
        if (x->kind == JV_UNDEF) return jx_fail_undef(cx, x, nd);
        if (nd->kind == N_POS && jv_is_num(x)) return x->kind == JV_BOOL ? jv_int(cx, x->u.b) : x;
        if (x->kind == JV_INT) return x->u.i == INT64_MIN ? overflow(cx, nd) : jv_int(cx, -x->u.i);
        if (x->kind == JV_BOOL) return jv_int(cx, -(int64_t)x->u.b);
        if (x->kind == JV_FLOAT) return jv_float(cx, -x->u.f);
        return jx_fail(cx, JINJA_ERR_TYPE, nd, "bad operand type for unary %s: '%s'", nd->kind == N_NEG ? "-" : "+",
                       jv_type_name(x));
    }
    case N_NOT: {
        jinja_value *x = eval(cx, sc, nd->a);
        if (!x) return NULL;
        return jv_bool(!jv_truthy(x));
    }
    case N_AND:
    case N_OR: {
        jinja_value *x = eval(cx, sc, nd->a);
        if (!x) return NULL;
        bool t = jv_truthy(x);
        if (nd->kind == N_AND ? !t : t) return x;
        return eval(cx, sc, nd->b);
    }
    case N_CMP: return eval_compare(cx, sc, nd);
    case N_COND: {
        jinja_value *t = eval(cx, sc, nd->b);
        if (!t) return NULL;
        if (jv_truthy(t)) return eval(cx, sc, nd->a);
        if (nd->c) return eval(cx, sc, nd->c);
        return jv_undef_hint(cx, "the inline if-expression evaluated to false and no else section was defined.");
    }
    default: return jx_fail(cx, JINJA_ERR_UNSUPPORTED, nd, "cannot evaluate node kind %d", nd->kind);
    }
}

static jinja_value *eval(jx_ctx *cx, jx_scope *sc, const jx_node *nd) {
    if (!enter(cx, nd)) return NULL;
    jinja_value *v = eval_inner(cx, sc, nd);
    cx->depth--;
    if (!v && !cx->failed) jx_fail_oom(cx, nd);
    return v;
}

/* ========================================================================
 * Statements
 * ====================================================================== */

static bool unpack_assign(jx_ctx *cx, jx_scope *sc, const jx_node *target, jinja_value *v, const jx_node *at) {
    if (target->kind == N_NAME) return scope_set(cx, sc, target->s, target->slen, v);
    /* tuple/list of names */
    jinja_value **items;
    size_t n;
    if (v->kind == JV_UNDEF) return jx_fail_undef(cx, v, at), false;
    if (!jv_iterate(cx, v, &items, &n, at)) return false;
    if (n != target->n) {
        if (n > target->n) jx_fail(cx, JINJA_ERR_VALUE, at, "too many values to unpack (expected %zu)", target->n);
        else jx_fail(cx, JINJA_ERR_VALUE, at, "not enough values to unpack (expected %zu, got %zu)", target->n, n);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (!scope_set(cx, sc, target->list[i]->s, target->list[i]->slen, items[i])) return false;
    return true;
}

static bool assign(jx_ctx *cx, jx_scope *sc, const jx_node *target, jinja_value *v, const jx_node *at) {
    if (target->kind == N_NSREF) {
        jinja_value *ns = scope_lookup(sc, target->s, target->slen);
        if (!ns || ns->kind != JV_NS) {
            jx_fail(cx, JINJA_ERR_TYPE, at, "cannot assign attribute on non-namespace object");
            return false;
        }
        return jv_dict_set(cx, ns, target->a->s, target->a->slen, v);
    }
    return unpack_assign(cx, sc, target, v, at);
}

/* Apply a filter chain parsed with a NULL innermost operand to v. */
static jinja_value *apply_filter_chain(jx_ctx *cx, jx_scope *sc, const jx_node *f, jinja_value *v) {
    if (!f) return v;
    if (f->a) {
        v = apply_filter_chain(cx, sc, f->a, v);
        if (!v) return NULL;
    }
    jx_args a;
    if (!eval_args(cx, sc, f, &a)) return NULL;
    return f->filter(cx, v, &a, f);
}

static bool exec_for(jx_ctx *cx, jx_scope *sc, const jx_node *nd) {
    jinja_value *seq = eval(cx, sc, nd->b);
    if (!seq) return false;
    jinja_value **items;
    size_t n;
    if (!jv_iterate(cx, seq, &items, &n, nd->b)) return false;
    jx_scope *ls = scope_new(cx, sc);
    if (!ls) return false;
    if (nd->c) { /* loop filter: evaluate with the target bound, before the loop */
        jinja_value **kept = jx_arena_alloc(&cx->arena, (n ? n : 1) * sizeof *kept);
        if (!kept) return jx_fail_oom(cx, nd), false;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (!jx_count_iter(cx, 1, nd)) return false;
            if (!assign(cx, ls, nd->a, items[i], nd)) return false;
            jinja_value *t = eval(cx, ls, nd->c);
            if (!t) return false;
            if (jv_truthy(t)) kept[k++] = items[i];
        }
        items = kept;
        n = k;
    }
    jinja_value *lv = jv_new(cx, JV_LOOP);
    jv_loop *l = jx_arena_alloc(&cx->arena, sizeof *l);
    if (!lv || !l) return jx_fail_oom(cx, nd), false;
    l->items = items;
    l->n = n;
    l->depth = 1;
    jinja_value *outer = scope_lookup(sc, "loop", 4);
    if (outer && outer->kind == JV_LOOP) l->depth = outer->u.loop->depth + 1;
    lv->u.loop = l;
    if (!scope_set(cx, ls, "loop", 4, lv)) return false;
    for (size_t i = 0; i < n; i++) {
        if (!jx_count_iter(cx, 1, nd)) return false;
        l->idx = i;
        if (!assign(cx, ls, nd->a, items[i], nd)) return false;
        if (!exec_body(cx, ls, nd->list, nd->n)) return false;
        if (cx->ctl == CTL_BREAK) {
            cx->ctl = 0;
            break;
        }
        cx->ctl = 0;
    }
    if (n == 0 && nd->n2) return exec_body(cx, ls, nd->list2, nd->n2);
    return true;
}

static bool exec_stmt(jx_ctx *cx, jx_scope *sc, const jx_node *nd) {
    switch (nd->kind) {
    case N_TEXT: return out_put(cx, nd->s, nd->slen, nd);
    case N_OUTPUT: {
        jinja_value *v = eval(cx, sc, nd->a);
        return v && out_value(cx, v, nd);
    }
    case N_IF: {
        /* an elif chain is an N_IF as the only statement of the else body */
        jinja_value *t = eval(cx, sc, nd->a);
        if (!t) return false;
        if (jv_truthy(t)) return exec_body(cx, sc, nd->list, nd->n);
        return exec_body(cx, sc, nd->list2, nd->n2);
    }
    case N_FOR: return exec_for(cx, sc, nd);
    case N_SET: {
        jinja_value *v = eval(cx, sc, nd->b);
        return v && assign(cx, sc, nd->a, v, nd);
    }
    case N_SETBLOCK: {
        jinja_value *v = capture(cx, sc, nd->list, nd->n);
        if (!v) return false;
        v = apply_filter_chain(cx, sc, nd->c, v);
        return v && assign(cx, sc, nd->a, v, nd);
    }
    case N_MACRO: {
        jinja_value *mv = jv_new(cx, JV_MACRO);
        jv_macro *m = jx_arena_alloc(&cx->arena, sizeof *m);
        if (!mv || !m) return jx_fail_oom(cx, nd), false;
        m->def = nd;
        m->closure = sc;
        mv->u.macro = m;
        return scope_set(cx, sc, nd->s, nd->slen, mv);
    }
    case N_CALLBLOCK: {
        jinja_value *cv = jv_new(cx, JV_MACRO);
        jv_macro *m = jx_arena_alloc(&cx->arena, sizeof *m);
        if (!cv || !m) return jx_fail_oom(cx, nd), false;
        m->def = nd;
        m->closure = sc;
        cv->u.macro = m;
        jinja_value *f = eval(cx, sc, nd->a->a);
        if (!f) return false;
        jx_args a;
        if (!eval_args(cx, sc, nd->a, &a)) return false;
        jinja_value *r;
        if (f->kind == JV_MACRO) r = call_macro(cx, f, &a, cv, nd);
        else r = jx_call_value(cx, f, &a, nd);
        return r && out_value(cx, r, nd);
    }
    case N_FILTERBLOCK: {
        jinja_value *v = capture(cx, sc, nd->list, nd->n);
        if (!v) return false;
        v = apply_filter_chain(cx, sc, nd->c, v);
        return v && out_value(cx, v, nd);
    }
    case N_WITH: {
        jx_scope *ws = scope_new(cx, sc);
        if (!ws) return false;
        for (size_t i = 0; i < nd->n2; i++) {
            jinja_value *v = eval(cx, sc, nd->list2[i]);
            if (!v || !scope_set(cx, ws, nd->names[i], strlen(nd->names[i]), v)) return false;
        }
        return exec_body(cx, ws, nd->list, nd->n);
    }
    case N_BREAK: cx->ctl = CTL_BREAK; return true;
    case N_CONTINUE: cx->ctl = CTL_CONTINUE; return true;
    case N_BODY: return exec_body(cx, sc, nd->list, nd->n);
    default: jx_fail(cx, JINJA_ERR_UNSUPPORTED, nd, "cannot execute node kind %d", nd->kind); return false;
    }
}

static bool exec_body(jx_ctx *cx, jx_scope *sc, jx_node **list, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!enter(cx, list[i])) return false;
        bool ok = exec_stmt(cx, sc, list[i]);
        cx->depth--;
        if (!ok) {
            if (!cx->failed) jx_fail_oom(cx, list[i]);
            return false;
        }
        if (cx->ctl) return true;
    }
    return true;
}

/* Render the template's root body into cx->out with a fresh top-level scope. */
bool jx_render_root(jx_ctx *cx, const jinja_template *t) {
    jx_scope *root = scope_new(cx, cx->globals);
    if (!root) return false;
    return exec_body(cx, root, t->root->list, t->root->n);
}

bool jx_scope_bind(jx_ctx *cx, jx_scope *s, const char *name, size_t len, jinja_value *v) {
    return scope_set(cx, s, name, len, v);
}

jx_scope *jx_scope_create(jx_ctx *cx, jx_scope *parent) { return scope_new(cx, parent); }
