/*
 * jinja_int.h - internal definitions shared by the jinja_*.c files:
 * arena, values, tokens, AST nodes, render context.
 *
 * Not a public interface; see jinja.h.
 */
#ifndef BD_JINJA_INT_H
#define BD_JINJA_INT_H

#include "../base/base.h"
#include "jinja.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------
 * Arena: bump allocator with a byte cap. Everything a render creates lives
 * here and is freed at once; values are immutable (the sandbox is), except
 * namespace attributes, so sharing pointers is safe.
 * ---------------------------------------------------------------------- */

typedef struct jx_chunk jx_chunk;
typedef struct jx_arena {
    jx_chunk *head;
    size_t used_total, cap; /* bytes handed out by malloc; cap 0 = unlimited */
    bool over;              /* set when an allocation failed or the cap was hit */
} jx_arena;

void *jx_arena_alloc(jx_arena *a, size_t n); /* zeroed, 16-aligned; NULL on failure */
void jx_arena_free(jx_arena *a);
char *jx_arena_strdup(jx_arena *a, const char *s, size_t n); /* NUL-terminated copy */

/* Growable byte buffer (malloc'd) with a size cap, and the taint of its
 * bytes (see "Taint" below): t[i] != 0 when byte i came from untrusted
 * input; t is NULL while no tainted byte was put. */
typedef struct jx_buf {
    char *p;
    uint8_t *t;           /* [cap] or NULL */
    size_t n, cap, limit; /* limit 0 = unlimited */
    bool failed;          /* over limit or out of memory; further appends are ignored */
    bool over_limit;
} jx_buf;
/* Clean bytes (template text, numbers, punctuation the engine writes). */
bool jx_buf_put(jx_buf *b, const char *s, size_t n);
bool jx_buf_putc(jx_buf *b, char c);
bool jx_buf_printf(jx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Bytes with their taint (taint NULL: clean). */
bool jx_buf_put_t(jx_buf *b, const char *s, size_t n, const uint8_t *taint);
/* Mark bytes [from, b->n) tainted: the output of a transformation (escape,
 * repr, json, case mapping, printf) of a string that had a tainted byte. */
bool jx_buf_taint_from(jx_buf *b, size_t from);
void jx_buf_free(jx_buf *b);

/* ------------------------------------------------------------------------
 * Values
 *
 * Taint: a string may carry a per-byte flag array saying which of its
 * bytes came from untrusted input (jinja_from_json_untrusted: the request's
 * messages and tools). Every operation that derives a string from strings
 * carries the flags along: slices, splits, strips and concatenations byte
 * for byte; transformations that rewrite bytes (case mapping, escaping,
 * repr, json, %-formatting) taint their whole output when any input byte
 * was tainted. The render's output keeps the flags (jinja_render_taint),
 * so a caller can tell template text from user text, whatever the
 * template did with the text (chat.c: control tokens are only matched in
 * template text).
 * ---------------------------------------------------------------------- */

typedef enum jv_kind {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,  /* also tuples (is_tuple) */
    JV_DICT,  /* string keys, insertion order */
    JV_NS,    /* namespace(): a dict with mutable attributes */
    JV_FUNC,  /* builtin callable, maybe bound to a self value */
    JV_MACRO, /* template macro (or caller) */
    JV_LOOP,  /* the `loop` variable of a for loop */
} jv_kind;

typedef struct jx_ctx jx_ctx;
typedef struct jx_node jx_node;
typedef struct jx_scope jx_scope;

/* Call arguments: positional then keyword. */
typedef struct jx_args {
    jinja_value **pos;
    size_t npos;
    const char **kwn;
    jinja_value **kwv;
    size_t nkw;
} jx_args;

typedef jinja_value *(*jx_fn)(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at);

typedef struct jv_list {
    jinja_value **items; /* [n] */
    size_t n, cap;
} jv_list;

typedef struct jv_dict {
    const char **keys; /* [n] */
    size_t *klen;      /* [n] */
    jinja_value **vals; /* [n] */
    size_t n, cap;
    bool keys_tainted; /* some key came from untrusted input: every key reads as tainted */
} jv_dict;

typedef struct jv_macro {
    const jx_node *def; /* N_MACRO node (or the caller body of N_CALLBLOCK) */
    jx_scope *closure;  /* scope for free variables */
    jinja_value *caller; /* for {% call %}: the caller macro passed in; else NULL */
} jv_macro;

typedef struct jv_loop {
    jinja_value **items; /* [n] the (filtered) sequence */
    size_t n, idx;
    int depth;
} jv_loop;

struct jinja_value {
    uint8_t kind;     /* jv_kind */
    uint8_t is_tuple; /* JV_LIST shown as (a, b) */
    uint8_t is_ascii; /* JV_STR: known to be pure ASCII (1) or unknown (0) */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *s;
            size_t len;
            const uint8_t *taint; /* [len] flags, or NULL (all clean) */
        } str;
        jv_list *list;
        jv_dict *dict; /* JV_DICT and JV_NS */
        struct {
            jx_fn fn;
            jinja_value *self;
            const char *name;
        } func;
        jv_macro *macro;
        jv_loop *loop;
        struct {
            const char *name; /* the missing name or attribute */
            size_t nlen;
            const char *owner; /* NULL: a missing variable; else e.g. "dict object" */
            const char *hint;  /* explicit message, overrides the above */
        } undef;
    } u;
};

/* Shared constants (never written). */
extern jinja_value jx_undefined, jx_none_v, jx_true_v, jx_false_v, jx_empty_str;

jinja_value *jv_new(jx_ctx *cx, jv_kind k);
jinja_value *jv_int(jx_ctx *cx, int64_t i);
jinja_value *jv_float(jx_ctx *cx, double f);
jinja_value *jv_bool(bool b);
jinja_value *jv_str_ref(jx_ctx *cx, const char *s, size_t n); /* no copy; clean */
jinja_value *jv_str_copy(jx_ctx *cx, const char *s, size_t n); /* clean */
jinja_value *jv_str_cstr(jx_ctx *cx, const char *s);
/* Substring [off, off + n) of string v, sharing its bytes and taint. */
jinja_value *jv_str_sub(jx_ctx *cx, const jinja_value *v, size_t off, size_t n);
/* A string from a buffer's bytes and taint (copied into the arena). */
jinja_value *jv_str_from_buf(jx_ctx *cx, const jx_buf *b);
/* A string from bytes with the given taint flags (copied; taint NULL: clean). */
jinja_value *jv_str_copy_t(jx_ctx *cx, const char *s, size_t n, const uint8_t *taint);
/* Whether any byte of string v is tainted. */
bool jv_str_tainted(const jinja_value *v);
/* Key i of a dict as a string value (tainted when the dict's keys are). */
jinja_value *jv_dict_key(jx_ctx *cx, const jinja_value *d, size_t i);
/* Insert with a key given as a string value (its taint marks the dict's keys). */
bool jv_dict_set_v(jx_ctx *cx, jinja_value *d, const jinja_value *key, jinja_value *v);
jinja_value *jv_list_new(jx_ctx *cx, size_t cap);
bool jv_list_push(jx_ctx *cx, jinja_value *l, jinja_value *v);
jinja_value *jv_dict_new(jx_ctx *cx, size_t cap);
bool jv_dict_set(jx_ctx *cx, jinja_value *d, const char *k, size_t klen, jinja_value *v);
jinja_value *jv_dict_get(const jinja_value *d, const char *k, size_t klen); /* NULL if absent */
jinja_value *jv_undef_attr(jx_ctx *cx, jinja_value *owner, const char *name, size_t nlen);
jinja_value *jv_undef_name(jx_ctx *cx, const char *name, size_t nlen);
jinja_value *jv_undef_hint(jx_ctx *cx, const char *hint);
jinja_value *jv_func(jx_ctx *cx, jx_fn fn, jinja_value *self, const char *name);

bool jv_truthy(const jinja_value *v);
bool jv_is_str(const jinja_value *v);
bool jv_is_num(const jinja_value *v); /* int, float or bool (Python Number) */
const char *jv_type_name(const jinja_value *v); /* Python type name: "str", "list", ... */
const char *jv_owner_repr(const jinja_value *v); /* "dict object", "None", ... */
void jv_undef_message(const jinja_value *u, char *buf, size_t len);

/* Python str(v) appended to b. Returns false on buffer failure. */
bool jv_write_str(jx_buf *b, const jinja_value *v);
/* Python repr(v) appended to b. */
bool jv_write_repr(jx_buf *b, const jinja_value *v);
/* json.dumps options. indent NULL: single line; else the per-level indent string. */
typedef struct jx_json_opts {
    const char *indent;
    const char *item_sep, *key_sep; /* ", " / ": " by default; "," with indent */
    bool sort_keys, ensure_ascii;
} jx_json_opts;
/* json.dumps(v, ...) appended to b. Returns false with a TypeError set in cx
 * for unserializable values (Undefined, callables). */
bool jv_write_json(jx_ctx *cx, jx_buf *b, const jinja_value *v, const jx_json_opts *o, int depth,
                   const jx_node *at);
/* str(v) as an arena string (strings themselves are returned as-is). */
jinja_value *jv_to_str(jx_ctx *cx, jinja_value *v);
/* Python float repr into buf (>= 32 bytes). */
void jv_float_repr(double f, char *buf, size_t len);

bool jv_equal(const jinja_value *a, const jinja_value *b);
/* Python ordering; returns false with a TypeError set in cx when unorderable. */
bool jv_compare(jx_ctx *cx, const jinja_value *a, const jinja_value *b, int *res, const jx_node *at);

/* Sequence view: list items, string characters (as new strings), dict keys.
 * Undefined -> empty. Returns false with a TypeError for non-iterables. */
bool jv_iterate(jx_ctx *cx, jinja_value *v, jinja_value ***items, size_t *n, const jx_node *at);
/* len(); -1 with a TypeError set when v has no length. Undefined -> 0. */
int64_t jv_length(jx_ctx *cx, const jinja_value *v, const jx_node *at);

/* UTF-8 helpers (strings are valid UTF-8; invalid bytes count as one char each). */
size_t jx_utf8_len(const char *s, size_t n);
/* Decode one code point at s[*i], advancing *i. */
uint32_t jx_utf8_next(const char *s, size_t n, size_t *i);
int jx_utf8_encode(uint32_t cp, char *out); /* returns bytes written (1..4) */
bool jx_is_space_cp(uint32_t cp);             /* Python str.isspace() */
/* Byte offsets of the code point boundaries: offs[k] = start of char k, offs[n] = len. */
size_t *jx_utf8_offsets(jx_ctx *cx, const char *s, size_t n, size_t *nchars);

/* ------------------------------------------------------------------------
 * Tokens
 * ---------------------------------------------------------------------- */

typedef enum jx_tok_kind {
    T_EOF,
    T_TEXT,
    T_VAR_BEGIN,
    T_VAR_END,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP,
} jx_tok_kind;

typedef enum jx_op {
    OP_NONE,
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_TILDE,
    OP_LBRACKET, OP_RBRACKET, OP_LPAREN, OP_RPAREN, OP_LBRACE, OP_RBRACE,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_ASSIGN, OP_DOT, OP_COLON,
    OP_PIPE, OP_COMMA, OP_SEMICOLON,
    /* only in AST nodes: */
    OP_IN, OP_NOTIN,
} jx_op;

typedef struct jx_tok {
    uint8_t kind; /* jx_tok_kind */
    uint8_t op;   /* jx_op for T_OP */
    int line, col;
    const char *s; /* T_TEXT/T_NAME/T_STRING: bytes (arena); T_INT/T_FLOAT: value below */
    size_t len;
    int64_t i;
    double f;
} jx_tok;

/* Tokenize the whole (normalized) source into the arena. */
bool jx_lex(jx_arena *a, const char *src, size_t len, const jinja_options *opt, jx_tok **toks,
            size_t *ntoks, jinja_error *err);

/* ------------------------------------------------------------------------
 * AST
 * ---------------------------------------------------------------------- */

typedef enum jx_node_kind {
    /* statements */
    N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK,
    N_BREAK, N_CONTINUE, N_WITH, N_BODY,
    /* expressions */
    N_CONST, N_NAME, N_LIST, N_TUPLE, N_DICT, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_FILTER,
    N_TEST, N_BINOP, N_NEG, N_POS, N_NOT, N_AND, N_OR, N_CMP, N_COND, N_NSREF,
} jx_node_kind;

typedef jinja_value *(*jx_filter_fn)(jx_ctx *cx, jinja_value *v, jx_args *a, const jx_node *at);
/* Returns 1 true, 0 false, -1 error (set in cx). */
typedef int (*jx_test_fn)(jx_ctx *cx, jinja_value *v, jx_args *a, const jx_node *at);

struct jx_node {
    uint8_t kind;  /* jx_node_kind */
    uint8_t op;    /* jx_op for N_BINOP/N_CMP */
    uint8_t flag;  /* N_TEST: negated; N_SETBLOCK/N_FOR: misc */
    int line, col;
    jx_node *a, *b, *c, *d; /* children (meaning per kind, see jinja_parse.c) */
    jx_node **list;         /* [n] body statements / items / positional args */
    size_t n;
    jx_node **list2; /* [n2] else body / dict values / keyword arg values / defaults */
    size_t n2;
    const char **names; /* [n2] keyword names / macro parameter names */
    const char *s;      /* name, attribute, filter/test name, text */
    size_t slen;
    jinja_value *val;       /* N_CONST */
    jx_filter_fn filter;    /* N_FILTER */
    jx_test_fn test;        /* N_TEST */
};

jx_filter_fn jx_filter_lookup(const char *name, size_t len);
jx_test_fn jx_test_lookup(const char *name, size_t len);

struct jinja_template {
    jx_arena arena;
    jx_node *root; /* N_BODY */
};

bool jx_parse(jinja_template *t, jx_tok *toks, size_t ntoks, jinja_error *err);

/* ------------------------------------------------------------------------
 * Render context
 * ---------------------------------------------------------------------- */

struct jx_scope {
    jx_scope *parent;
    const char **names; /* [n] */
    size_t *nlen;
    jinja_value **vals;
    size_t n, cap;
};

struct jx_ctx {
    jx_arena arena;
    jinja_limits lim;
    jx_scope *globals;
    jx_buf *out; /* current output target */
    jinja_error err;
    bool failed;
    int ctl; /* 0, CTL_BREAK, CTL_CONTINUE */
    int depth;
    uint64_t iterations;
    struct tm fixed_now;
    bool has_fixed_now;
    const jinja_template *tpl;
};
struct jinja_ctx {
    jx_ctx cx;
};

enum { CTL_BREAK = 1, CTL_CONTINUE = 2 };

/* Record the first error (later ones are ignored). Returns NULL for convenience. */
void *jx_fail(jx_ctx *cx, jinja_err_kind kind, const jx_node *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void *jx_fail_undef(jx_ctx *cx, const jinja_value *u, const jx_node *at);
void *jx_fail_oom(jx_ctx *cx, const jx_node *at);
bool jx_count_iter(jx_ctx *cx, uint64_t n, const jx_node *at);

/* Argument helpers: positional idx or keyword name; NULL when absent. */
jinja_value *jx_arg(jx_args *a, size_t idx, const char *name);
/* Check no argument beyond npos positionals and the listed keywords. */
bool jx_args_check(jx_ctx *cx, jx_args *a, size_t npos, const char *const *kw, const char *fname,
                   const jx_node *at);

/* Evaluation entry points used by filters (select/map call tests/filters). */
jinja_value *jx_call_value(jx_ctx *cx, jinja_value *callee, jx_args *a, const jx_node *at);
jinja_value *jx_getattr(jx_ctx *cx, jinja_value *obj, const char *name, size_t nlen, const jx_node *at);
jinja_value *jx_getitem(jx_ctx *cx, jinja_value *obj, jinja_value *key, const jx_node *at);
/* Attribute path "a.b.1" as used by map/selectattr/sort(attribute=...). */
jinja_value *jx_getattr_path(jx_ctx *cx, jinja_value *obj, jinja_value *path, const jx_node *at);

/* Evaluator entry points for jinja_api.c. */
bool jx_render_root(jx_ctx *cx, const jinja_template *t);
jx_scope *jx_scope_create(jx_ctx *cx, jx_scope *parent);
bool jx_scope_bind(jx_ctx *cx, jx_scope *s, const char *name, size_t len, jinja_value *v);

/* Methods (jinja_methods.c): bound method for obj.name, or NULL if none. */
jinja_value *jx_method_lookup(jx_ctx *cx, jinja_value *obj, const char *name, size_t nlen);
/* Global callables (range, dict, namespace, ...): NULL if not a builtin global. */
jinja_value *jx_builtin_global(const char *name, size_t nlen);

/* String helpers shared by filters and methods. */
jinja_value *jx_str_strip(jx_ctx *cx, jinja_value *s, jinja_value *chars, bool left, bool right);
jinja_value *jx_str_replace(jx_ctx *cx, jinja_value *s, jinja_value *old, jinja_value *new_,
                            int64_t count);
jinja_value *jx_str_case(jx_ctx *cx, jinja_value *s, int mode); /* 0 lower 1 upper 2 capitalize 3 title */
/* Python 'fmt' % args (args: a tuple of values, a dict, or one value). */
jinja_value *jx_percent_format(jx_ctx *cx, jinja_value *fmt, jinja_value *args, const jx_node *at);

#endif
