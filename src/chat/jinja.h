/*
 * jinja.h - a Jinja2 template interpreter for chat templates.
 *
 * Implements the subset of Jinja2 3.1 that Hugging Face chat templates use,
 * with Python semantics where they show through in the output (str() of
 * True/None/lists, json.dumps spacing, float repr, Unicode string lengths
 * and slices). The reference configuration is the one transformers'
 * apply_chat_template uses: ImmutableSandboxedEnvironment(trim_blocks=True,
 * lstrip_blocks=True, extensions=[loopcontrols]), tojson = json.dumps with
 * ensure_ascii=False (see jinja_options_hf()).
 *
 * Lifecycle:
 *   t  = jinja_template_parse(src, len, &opt, &e);   // once, reusable, read-only
 *   cx = jinja_ctx_create(NULL);                     // one per render
 *   jinja_ctx_set(cx, "messages", jinja_from_json(cx, msgs));
 *   out = jinja_render(t, cx, &n, &e);               // malloc'd, NUL-terminated
 *   jinja_ctx_free(cx); free(out);
 *
 * All values are owned by the context's arena and live until
 * jinja_ctx_free(). A parsed template may be rendered concurrently from
 * several threads, each with its own context.
 *
 * Files: jinja_lex.c (tokens), jinja_parse.c (AST), jinja_eval.c
 * (statements/expressions), jinja_value.c (values, Python str/repr/json),
 * jinja_filters.c (filters, tests), jinja_methods.c (str/dict methods,
 * globals), jinja_json.c (jansson bridge).
 */
#ifndef BD_JINJA_H
#define BD_JINJA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct jinja_template jinja_template;
typedef struct jinja_value jinja_value;
typedef struct jinja_ctx jinja_ctx;

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */

typedef enum jinja_err_kind {
    JINJA_OK = 0,
    JINJA_ERR_SYNTAX,      /* TemplateSyntaxError/AssertionError: found at parse time */
    JINJA_ERR_RAISE,       /* raise_exception(msg) called by the template (TemplateError) */
    JINJA_ERR_TYPE,        /* TypeError, e.g. str + list */
    JINJA_ERR_VALUE,       /* ValueError, e.g. slice step 0 */
    JINJA_ERR_UNDEFINED,   /* UndefinedError: an undefined value was used */
    JINJA_ERR_ZERODIV,     /* ZeroDivisionError */
    JINJA_ERR_SECURITY,    /* SecurityError: mutation in the immutable sandbox */
    JINJA_ERR_LIMIT,       /* a resource limit (output, memory, iterations, depth) */
    JINJA_ERR_UNSUPPORTED, /* valid Jinja this engine does not implement */
    JINJA_ERR_NOMEM,       /* malloc failed */
} jinja_err_kind;

typedef struct jinja_error {
    jinja_err_kind kind;
    int line, col; /* 1-based position in the template; 0 when unknown */
    char msg[512]; /* message only, as Python would print it after "Kind: " */
} jinja_error;

/* Python exception class name for a kind ("TemplateError", "TypeError", ...). */
const char *jinja_err_kind_name(jinja_err_kind k);
/* "Kind: msg (template line L, column C)" into buf (always NUL-terminated). */
void jinja_error_format(const jinja_error *e, char *buf, size_t len);

/* ------------------------------------------------------------------------
 * Templates
 * ---------------------------------------------------------------------- */

typedef struct jinja_options {
    bool trim_blocks;           /* drop the first newline after a block/comment tag */
    bool lstrip_blocks;         /* strip spaces/tabs before a block/comment tag on its line */
    bool keep_trailing_newline; /* false: one trailing newline of the source is dropped */
} jinja_options;

/* The transformers configuration: trim_blocks, lstrip_blocks, no trailing newline. */
jinja_options jinja_options_hf(void);

/* Parse src[0..len). opt NULL means jinja_options_hf(). Returns NULL with
 * err filled (kind JINJA_ERR_SYNTAX, or NOMEM/LIMIT) on failure. */
jinja_template *jinja_template_parse(const char *src, size_t len, const jinja_options *opt,
                                     jinja_error *err);
void jinja_template_free(jinja_template *t);

/* ------------------------------------------------------------------------
 * Render contexts and values
 * ---------------------------------------------------------------------- */

typedef struct jinja_limits {
    size_t max_output;       /* bytes of output (also of any captured macro output) */
    size_t max_memory;       /* bytes of arena memory per render */
    uint64_t max_iterations; /* loop iterations + generated elements, summed over the render */
    int max_depth;           /* nesting of macro calls / evaluation recursion */
} jinja_limits;

/* 16 MiB output, 256 MiB memory, 10M iterations, depth 200. */
jinja_limits jinja_limits_default(void);

/* lim NULL means defaults. NULL on out-of-memory. */
jinja_ctx *jinja_ctx_create(const jinja_limits *lim);
void jinja_ctx_free(jinja_ctx *cx);

/* Bind a global name (copied). Returns false on out-of-memory. */
bool jinja_ctx_set(jinja_ctx *cx, const char *name, jinja_value *v);

/* Define the two callables transformers passes: raise_exception(msg) (raises
 * JINJA_ERR_RAISE with msg) and strftime_now(fmt), which formats fixed_now
 * when it is not NULL, else the current local time at each call. */
bool jinja_ctx_define_hf_globals(jinja_ctx *cx, const struct tm *fixed_now);

/* Value constructors. Results are owned by cx; NULL only on out-of-memory
 * (the context then also remembers the error). Strings are copied. */
jinja_value *jinja_none(jinja_ctx *cx);
jinja_value *jinja_bool(jinja_ctx *cx, bool b);
jinja_value *jinja_int(jinja_ctx *cx, int64_t i);
jinja_value *jinja_float(jinja_ctx *cx, double f);
jinja_value *jinja_str(jinja_ctx *cx, const char *s, size_t len);

/* Convert a jansson value to Python-like values (deep copy, strings
 * included, so the json may be freed before rendering). Objects keep key
 * order. NULL json -> None. Returns NULL (error recorded in cx) on
 * out-of-memory or nesting deeper than 256. UTF-8 validity is jansson's. */
jinja_value *jinja_from_json(jinja_ctx *cx, const json_t *j);

/* The same for untrusted input (a request's messages and tools): every
 * string, and every object key, is tainted -- the render output tells
 * which of its bytes came from them (jinja_render_taint), whatever the
 * template does with the strings (slices, splits, strips and joins keep
 * the flags byte for byte; rewriting operations such as upper, escape,
 * tojson or %-formatting taint their whole output). A string that is the
 * value of object member `key` stays clean when trusted(key, value, len,
 * user) returns true (e.g. a role the caller has validated); trusted may
 * be NULL. */
typedef bool (*jinja_trust_fn)(const char *key, const char *value, size_t len, void *user);
jinja_value *jinja_from_json_untrusted(jinja_ctx *cx, const json_t *j, jinja_trust_fn trusted, void *user);

/* Render. Returns a malloc'd NUL-terminated string (length in *out_len when
 * out_len != NULL), or NULL with err filled. */
char *jinja_render(const jinja_template *t, jinja_ctx *cx, size_t *out_len, jinja_error *err);

/* jinja_render, and in *taint (malloc'd, [*out_len] flags, free()) which
 * output bytes came from untrusted input; *taint is NULL when none did. */
char *jinja_render_taint(const jinja_template *t, jinja_ctx *cx, size_t *out_len, uint8_t **taint,
                         jinja_error *err);

/* Convenience: parse + render with the given globals object (a jansson
 * object whose members become globals), HF options and default limits.
 * No raise_exception/strftime_now (see jinja_ctx_define_hf_globals). */
char *jinja_render_string(const char *src, const json_t *globals, size_t *out_len, jinja_error *err);

#endif
