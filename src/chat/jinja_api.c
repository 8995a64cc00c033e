/*
 * jinja_api.c - the public surface of jinja.h: parsing, render contexts,
 * globals, value constructors, rendering, error formatting.
 */
#include "jinja_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================================
 * Errors and options
 * ====================================================================== */

const char *jinja_err_kind_name(jinja_err_kind k) {
    switch (k) {
    case JINJA_OK: return "OK";
    case JINJA_ERR_SYNTAX: return "TemplateSyntaxError";
    case JINJA_ERR_RAISE: return "TemplateError";
    case JINJA_ERR_TYPE: return "TypeError";
    case JINJA_ERR_VALUE: return "ValueError";
    case JINJA_ERR_UNDEFINED: return "UndefinedError";
    case JINJA_ERR_ZERODIV: return "ZeroDivisionError";
    case JINJA_ERR_SECURITY: return "SecurityError";
    case JINJA_ERR_LIMIT: return "LimitError";
    case JINJA_ERR_UNSUPPORTED: return "UnsupportedError";
    case JINJA_ERR_NOMEM: return "MemoryError";
    }
    return "Error";
}

void jinja_error_format(const jinja_error *e, char *buf, size_t len) {
    if (!buf || !len) return;
    if (e->line > 0)
        snprintf(buf, len, "%s: %s (template line %d, column %d)", jinja_err_kind_name(e->kind), e->msg, e->line, e->col);
    else snprintf(buf, len, "%s: %s", jinja_err_kind_name(e->kind), e->msg);
}

jinja_options jinja_options_hf(void) {
    return (jinja_options){.trim_blocks = true, .lstrip_blocks = true, .keep_trailing_newline = false};
}

jinja_limits jinja_limits_default(void) {
    return (jinja_limits){
        .max_output = 16u << 20, .max_memory = 256u << 20, .max_iterations = 10000000, .max_depth = 200};
}

static void set_err(jinja_error *e, jinja_err_kind k, const char *msg) {
    if (!e) return;
    e->kind = k;
    e->line = e->col = 0;
    snprintf(e->msg, sizeof e->msg, "%s", msg);
}

/* ========================================================================
 * Templates
 * ====================================================================== */

jinja_template *jinja_template_parse(const char *src, size_t len, const jinja_options *opt, jinja_error *err) {
    jinja_error local;
    if (!err) err = &local;
    memset(err, 0, sizeof *err);
    jinja_options o = opt ? *opt : jinja_options_hf();
    if (!src) {
        set_err(err, JINJA_ERR_SYNTAX, "no template source");
        return NULL;
    }
    if (len > (64u << 20)) {
        set_err(err, JINJA_ERR_LIMIT, "template source larger than 64 MiB");
        return NULL;
    }
    jinja_template *t = calloc(1, sizeof *t);
    if (!t) {
        set_err(err, JINJA_ERR_NOMEM, "out of memory");
        return NULL;
    }
    t->arena.cap = 1u << 30;
    jx_tok *toks;
    size_t ntoks;
    if (!jx_lex(&t->arena, src, len, &o, &toks, &ntoks, err) || !jx_parse(t, toks, ntoks, err)) {
        if (err->kind == JINJA_OK) set_err(err, JINJA_ERR_NOMEM, "out of memory");
        jinja_template_free(t);
        return NULL;
    }
    return t;
}

void jinja_template_free(jinja_template *t) {
    if (!t) return;
    jx_arena_free(&t->arena);
    free(t);
}

/* ========================================================================
 * Contexts and values
 * ====================================================================== */

jinja_ctx *jinja_ctx_create(const jinja_limits *lim) {
    jinja_ctx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    jx_ctx *cx = &c->cx;
    cx->lim = lim ? *lim : jinja_limits_default();
    if (cx->lim.max_depth <= 0) cx->lim.max_depth = 200;
    cx->arena.cap = cx->lim.max_memory;
    cx->globals = jx_scope_create(cx, NULL);
    if (!cx->globals) {
        jinja_ctx_free(c);
        return NULL;
    }
    return c;
}

void jinja_ctx_free(jinja_ctx *c) {
    if (!c) return;
    jx_arena_free(&c->cx.arena);
    free(c);
}

bool jinja_ctx_set(jinja_ctx *c, const char *name, jinja_value *v) {
    if (!c || !name || !v) return false;
    size_t l = strlen(name);
    char *n = jx_arena_strdup(&c->cx.arena, name, l);
    if (!n) return false;
    return jx_scope_bind(&c->cx, c->cx.globals, n, l, v);
}

jinja_value *jinja_none(jinja_ctx *c) { (void)c; return &jx_none_v; }
jinja_value *jinja_bool(jinja_ctx *c, bool b) { (void)c; return jv_bool(b); }
jinja_value *jinja_int(jinja_ctx *c, int64_t i) { return jv_int(&c->cx, i); }
jinja_value *jinja_float(jinja_ctx *c, double f) { return jv_float(&c->cx, f); }

jinja_value *jinja_str(jinja_ctx *c, const char *s, size_t len) {
    jinja_value *v = jv_str_copy(&c->cx, s ? s : "", s ? len : 0);
    if (v && v != &jx_empty_str) {
        bool ascii = true;
        for (size_t i = 0; i < len && ascii; i++) ascii = (unsigned char)s[i] < 0x80;
        v->is_ascii = ascii;
    }
    return v;
}

/* ---- HF globals ---- */

static jinja_value *g_raise_exception(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    (void)self;
    jinja_value *m = jx_arg(a, 0, "message");
    jinja_value *s = m ? jv_to_str(cx, m) : &jx_empty_str;
    if (!s) return NULL;
    return jx_fail(cx, JINJA_ERR_RAISE, at, "%.*s", (int)(s->u.str.len > 480 ? 480 : s->u.str.len), s->u.str.s);
}

static jinja_value *g_strftime_now(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    (void)self;
    if (!jx_args_check(cx, a, 1, NULL, "strftime_now", at)) return NULL;
    jinja_value *f = jx_arg(a, 0, NULL);
    if (!f || f->kind != JV_STR) return jx_fail(cx, JINJA_ERR_TYPE, at, "strftime_now() needs a format string");
    struct tm tm;
    if (cx->has_fixed_now) tm = cx->fixed_now;
    else {
        time_t now = time(NULL);
        localtime_r(&now, &tm);
    }
    char fmt[256], out[512];
    if (f->u.str.len >= sizeof fmt) return jx_fail(cx, JINJA_ERR_VALUE, at, "strftime format too long");
    memcpy(fmt, f->u.str.s, f->u.str.len);
    fmt[f->u.str.len] = 0;
    size_t n = strftime(out, sizeof out, fmt, &tm);
    return jv_str_copy(cx, out, n);
}

bool jinja_ctx_define_hf_globals(jinja_ctx *c, const struct tm *fixed_now) {
    jx_ctx *cx = &c->cx;
    if (fixed_now) {
        cx->fixed_now = *fixed_now;
        cx->has_fixed_now = true;
    }
    jinja_value *r = jv_func(cx, g_raise_exception, NULL, "raise_exception");
    jinja_value *s = jv_func(cx, g_strftime_now, NULL, "strftime_now");
    return r && s && jinja_ctx_set(c, "raise_exception", r) && jinja_ctx_set(c, "strftime_now", s);
}

/* ========================================================================
 * Rendering
 * ====================================================================== */

char *jinja_render(const jinja_template *t, jinja_ctx *c, size_t *out_len, jinja_error *err) {
    return jinja_render_taint(t, c, out_len, NULL, err);
}

char *jinja_render_taint(const jinja_template *t, jinja_ctx *c, size_t *out_len, uint8_t **taint,
                         jinja_error *err) {
    if (taint) *taint = NULL;
    jinja_error local;
    if (!err) err = &local;
    memset(err, 0, sizeof *err);
    if (!t || !c) {
        set_err(err, JINJA_ERR_SYNTAX, "no template or context");
        return NULL;
    }
    jx_ctx *cx = &c->cx;
    if (cx->failed) { /* e.g. an allocation failed while building globals */
        *err = cx->err;
        return NULL;
    }
    jx_buf out = {.limit = cx->lim.max_output};
    jx_buf *saved = cx->out;
    cx->out = &out;
    cx->tpl = t;
    cx->depth = 0;
    cx->ctl = 0;
    bool ok = jx_render_root(cx, t);
    cx->out = saved;
    if (!ok || out.failed) {
        if (!cx->failed) jx_fail(cx, out.over_limit ? JINJA_ERR_LIMIT : JINJA_ERR_NOMEM, NULL, "render failed");
        *err = cx->err;
        jx_buf_free(&out);
        return NULL;
    }
    if (!out.p) {
        out.p = malloc(1);
        if (!out.p) {
            set_err(err, JINJA_ERR_NOMEM, "out of memory");
            return NULL;
        }
        out.p[0] = 0;
    }
    if (out_len) *out_len = out.n;
    if (taint) *taint = out.t; /* NULL when no byte is tainted */
    else free(out.t);
    return out.p;
}

char *jinja_render_string(const char *src, const json_t *globals, size_t *out_len, jinja_error *err) {
    jinja_error local;
    if (!err) err = &local;
    jinja_template *t = jinja_template_parse(src, src ? strlen(src) : 0, NULL, err);
    if (!t) return NULL;
    jinja_ctx *c = jinja_ctx_create(NULL);
    char *out = NULL;
    if (!c) {
        set_err(err, JINJA_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (globals && json_is_object(globals)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)globals, k, v) {
            jinja_value *jv = jinja_from_json(c, v);
            if (!jv || !jinja_ctx_set(c, k, jv)) {
                set_err(err, JINJA_ERR_NOMEM, "out of memory converting globals");
                goto done;
            }
        }
    }
    out = jinja_render(t, c, out_len, err);
done:
    jinja_ctx_free(c);
    jinja_template_free(t);
    return out;
}
