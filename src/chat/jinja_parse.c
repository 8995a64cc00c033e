/*
 * jinja_parse.c - tokens -> AST, a recursive-descent port of the grammar in
 * jinja2.parser (3.1), including its operator precedence:
 *
 *   cond:  or ("if" or ("else" cond)?)*
 *   or/and/not, then compare (== != < <= > >= in, not in; chainable)
 *   + -,  ~,  * / // %,  **,  unary - +,  primary + postfix (. [] ()),
 *   then filters (|f), tests (is [not] t) and calls, binding tightest.
 *
 * Node fields per kind (see jx_node in jinja_int.h):
 *   N_TEXT s          N_OUTPUT a          N_IF a=test list=body list2=else
 *   N_FOR a=target b=iter c=filter list=body list2=else
 *   N_SET a=target b=value                N_SETBLOCK a=target c=filter list=body
 *   N_MACRO s=name names/list2=params/defaults(n2) list=body
 *   N_CALLBLOCK a=call names/list2=caller params list=body
 *   N_FILTERBLOCK c=filter chain (innermost operand NULL) list=body
 *   N_WITH names/list2=targets/values list=body
 *   N_CONST val  N_NAME s  N_LIST/N_TUPLE list  N_DICT list=keys list2=values
 *   N_GETATTR a s  N_GETITEM a b  N_SLICE a b c (start stop step, NULL = absent)
 *   N_CALL/N_FILTER/N_TEST a=operand list=args list2/names=kwargs (filter/test: s, fn)
 *   N_BINOP op a b  N_NEG/N_POS/N_NOT a  N_AND/N_OR a b
 *   N_CMP a=left list=operands s=ops (one jx_op byte per operand)
 *   N_COND a=then b=test c=else(NULL)  N_NSREF s=namespace name, a->s = attribute
 */
#include "jinja_int.h"

#include <stdio.h>
#include <string.h>

#define MAX_PARSE_DEPTH 200

typedef struct parser {
    jx_arena *a;
    jx_tok *t;
    size_t n, i;
    jinja_error *err;
    bool failed;
    int depth;
    int loop_depth;
} parser;

typedef struct nodevec {
    jx_node **p;
    size_t n, cap;
} nodevec;

static jx_tok *cur(parser *P) { return &P->t[P->i]; }
static jx_tok *peek(parser *P, size_t k) { return &P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }
static void adv(parser *P) {
    if (P->i + 1 < P->n) P->i++;
}

static const char *tok_desc(const jx_tok *t, char *buf, size_t len) {
    static const char *opn[] = {"", "+", "-", "*", "/", "//", "%", "**", "~", "[", "]", "(", ")", "{", "}",
                                "==", "!=", "<", "<=", ">", ">=", "=", ".", ":", "|", ",", ";"};
    switch (t->kind) {
    case T_EOF: return "end of template";
    case T_TEXT: return "template data";
    case T_VAR_BEGIN: return "begin of print statement";
    case T_VAR_END: return "end of print statement";
    case T_BLOCK_BEGIN: return "begin of statement block";
    case T_BLOCK_END: return "end of statement block";
    case T_NAME: snprintf(buf, len, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->s); return buf;
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    case T_OP: snprintf(buf, len, "'%s'", t->op < sizeof opn / sizeof opn[0] ? opn[t->op] : "?"); return buf;
    }
    return "token";
}

static void *fail_at(parser *P, const jx_tok *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void *fail_at(parser *P, const jx_tok *t, const char *fmt, ...) {
    if (P->failed) return NULL;
    P->failed = true;
    P->err->kind = JINJA_ERR_SYNTAX;
    P->err->line = t->line;
    P->err->col = t->col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(P->err->msg, sizeof P->err->msg, fmt, ap);
    va_end(ap);
    return NULL;
}

static void *fail_oom(parser *P) {
    if (P->failed) return NULL;
    P->failed = true;
    P->err->kind = JINJA_ERR_NOMEM;
    snprintf(P->err->msg, sizeof P->err->msg, "out of memory");
    return NULL;
}

static jx_node *mk(parser *P, jx_node_kind k, const jx_tok *at) {
    jx_node *nd = jx_arena_alloc(P->a, sizeof *nd);
    if (!nd) return fail_oom(P);
    nd->kind = (uint8_t)k;
    nd->line = at->line;
    nd->col = at->col;
    return nd;
}

static bool vec_push(parser *P, nodevec *v, jx_node *x) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 8;
        jx_node **p = jx_arena_alloc(P->a, nc * sizeof *p);
        if (!p) return fail_oom(P), false;
        if (v->n) memcpy(p, v->p, v->n * sizeof *p);
        v->p = p;
        v->cap = nc;
    }
    v->p[v->n++] = x;
    return true;
}

static bool is_name(const jx_tok *t, const char *s) {
    size_t l = strlen(s);
    return t->kind == T_NAME && t->len == l && memcmp(t->s, s, l) == 0;
}
static bool is_op(const jx_tok *t, jx_op op) { return t->kind == T_OP && t->op == op; }

static bool expect_op(parser *P, jx_op op, const char *what) {
    if (!is_op(cur(P), op)) {
        char b[64];
        fail_at(P, cur(P), "expected token '%s', got %s", what, tok_desc(cur(P), b, sizeof b));
        return false;
    }
    adv(P);
    return true;
}

static bool expect_kind(parser *P, jx_tok_kind k, const char *what) {
    if (cur(P)->kind != k) {
        char b[64];
        fail_at(P, cur(P), "expected token '%s', got %s", what, tok_desc(cur(P), b, sizeof b));
        return false;
    }
    adv(P);
    return true;
}

static const char *tok_str(parser *P, const jx_tok *t) {
    char *s = jx_arena_strdup(P->a, t->s, t->len);
    if (!s) fail_oom(P);
    return s;
}

static jx_node *parse_expression(parser *P, bool with_condexpr);
static jx_node *parse_tuple(parser *P, bool simplified, bool with_condexpr, bool explicit_paren,
                            const char *extra_end1, const char *extra_end2);
static jx_node *parse_unary(parser *P, bool with_filter);
static jx_node *parse_primary(parser *P);
static jx_node *parse_postfix(parser *P, jx_node *node);
static jx_node *parse_filter_expr(parser *P, jx_node *node);
static jx_node *parse_filter(parser *P, jx_node *node, bool start_inline);

static bool enter(parser *P) {
    if (++P->depth > MAX_PARSE_DEPTH) {
        fail_at(P, cur(P), "template nesting too deep (limit %d)", MAX_PARSE_DEPTH);
        P->err->kind = JINJA_ERR_LIMIT;
        return false;
    }
    return true;
}
static void leave(parser *P) { P->depth--; }

/* ------------------------------------------------------------------------
 * Expressions
 * ---------------------------------------------------------------------- */

static jx_node *parse_condexpr(parser *P);
static jx_node *parse_or(parser *P);

static jx_node *parse_expression(parser *P, bool with_condexpr) {
    if (!enter(P)) return NULL;
    jx_node *r;
    if (with_condexpr) r = parse_condexpr(P);
    else r = parse_or(P);
    leave(P);
    return r;
}

static jx_node *parse_and(parser *P);
static jx_node *parse_not(parser *P);
static jx_node *parse_compare(parser *P);

static jx_node *parse_or(parser *P) {
    jx_node *left = parse_and(P);
    while (left && is_name(cur(P), "or")) {
        jx_tok *at = cur(P);
        adv(P);
        jx_node *right = parse_and(P);
        if (!right) return NULL;
        jx_node *nd = mk(P, N_OR, at);
        if (!nd) return NULL;
        nd->a = left;
        nd->b = right;
        left = nd;
    }
    return left;
}

static jx_node *parse_condexpr(parser *P) {
    jx_node *e1 = parse_or(P);
    while (e1 && is_name(cur(P), "if")) {
        jx_tok *at = cur(P);
        adv(P);
        jx_node *e2 = parse_or(P);
        if (!e2) return NULL;
        jx_node *e3 = NULL;
        if (is_name(cur(P), "else")) {
            adv(P);
            if (!enter(P)) return NULL;
            e3 = parse_condexpr(P);
            leave(P);
            if (!e3) return NULL;
        }
        jx_node *nd = mk(P, N_COND, at);
        if (!nd) return NULL;
        nd->a = e1;
        nd->b = e2;
        nd->c = e3;
        e1 = nd;
    }
    return e1;
}

static jx_node *parse_and(parser *P) {
    jx_node *left = parse_not(P);
    while (left && is_name(cur(P), "and")) {
        jx_tok *at = cur(P);
        adv(P);
        jx_node *right = parse_not(P);
        if (!right) return NULL;
        jx_node *nd = mk(P, N_AND, at);
        if (!nd) return NULL;
        nd->a = left;
        nd->b = right;
        left = nd;
    }
    return left;
}

static jx_node *parse_not(parser *P) {
    if (is_name(cur(P), "not")) {
        jx_tok *at = cur(P);
        adv(P);
        if (!enter(P)) return NULL;
        jx_node *x = parse_not(P);
        leave(P);
        if (!x) return NULL;
        jx_node *nd = mk(P, N_NOT, at);
        if (!nd) return NULL;
        nd->a = x;
        return nd;
    }
    return parse_compare(P);
}

static jx_node *parse_math1(parser *P);

static jx_node *parse_compare(parser *P) {
    jx_tok *at = cur(P);
    jx_node *expr = parse_math1(P);
    if (!expr) return NULL;
    nodevec opnds = {0};
    char opsbuf[64];
    size_t nops = 0;
    for (;;) {
        jx_tok *t = cur(P);
        jx_op op = OP_NONE;
        if (t->kind == T_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LT || t->op == OP_LE ||
                                t->op == OP_GT || t->op == OP_GE)) {
            op = (jx_op)t->op;
            adv(P);
        } else if (is_name(t, "in")) {
            op = OP_IN;
            adv(P);
        } else if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
            op = OP_NOTIN;
            adv(P);
            adv(P);
        } else break;
        if (nops >= sizeof opsbuf) return fail_at(P, t, "comparison chain too long");
        jx_node *r = parse_math1(P);
        if (!r || !vec_push(P, &opnds, r)) return NULL;
        opsbuf[nops++] = (char)op;
    }
    if (nops == 0) return expr;
    jx_node *nd = mk(P, N_CMP, at);
    if (!nd) return NULL;
    nd->a = expr;
    nd->list = opnds.p;
    nd->n = opnds.n;
    char *ops = jx_arena_alloc(P->a, nops);
    if (!ops) return fail_oom(P);
    memcpy(ops, opsbuf, nops);
    nd->s = ops;
    nd->slen = nops;
    return nd;
}

static jx_node *binop(parser *P, jx_op op, jx_node *l, jx_node *r, const jx_tok *at) {
    jx_node *nd = mk(P, N_BINOP, at);
    if (!nd) return NULL;
    nd->op = (uint8_t)op;
    nd->a = l;
    nd->b = r;
    return nd;
}

static jx_node *parse_pow(parser *P) {
    jx_node *left = parse_unary(P, true);
    while (left && is_op(cur(P), OP_POW)) {
        jx_tok *at = cur(P);
        adv(P);
        jx_node *r = parse_unary(P, true);
        if (!r) return NULL;
        left = binop(P, OP_POW, left, r, at);
    }
    return left;
}

static jx_node *parse_math2(parser *P) {
    jx_node *left = parse_pow(P);
    while (left && cur(P)->kind == T_OP &&
           (cur(P)->op == OP_MUL || cur(P)->op == OP_DIV || cur(P)->op == OP_FLOORDIV || cur(P)->op == OP_MOD)) {
        jx_tok *at = cur(P);
        jx_op op = (jx_op)at->op;
        adv(P);
        jx_node *r = parse_pow(P);
        if (!r) return NULL;
        left = binop(P, op, left, r, at);
    }
    return left;
}

static jx_node *parse_concat(parser *P) {
    jx_node *left = parse_math2(P);
    while (left && is_op(cur(P), OP_TILDE)) {
        jx_tok *at = cur(P);
        adv(P);
        jx_node *r = parse_math2(P);
        if (!r) return NULL;
        left = binop(P, OP_TILDE, left, r, at);
    }
    return left;
}

static jx_node *parse_math1(parser *P) {
    jx_node *left = parse_concat(P);
    while (left && cur(P)->kind == T_OP && (cur(P)->op == OP_ADD || cur(P)->op == OP_SUB)) {
        jx_tok *at = cur(P);
        jx_op op = (jx_op)at->op;
        adv(P);
        jx_node *r = parse_concat(P);
        if (!r) return NULL;
        left = binop(P, op, left, r, at);
    }
    return left;
}

static jx_node *parse_unary(parser *P, bool with_filter) {
    if (!enter(P)) return NULL;
    jx_tok *at = cur(P);
    jx_node *node;
    if (is_op(at, OP_SUB) || is_op(at, OP_ADD)) {
        adv(P);
        jx_node *x = parse_unary(P, false);
        if (!x) return leave(P), NULL;
        node = mk(P, at->op == OP_SUB ? N_NEG : N_POS, at);
        if (node) node->a = x;
    } else {
        node = parse_primary(P);
    }
    if (node) node = parse_postfix(P, node);
    if (node && with_filter) node = parse_filter_expr(P, node);
    leave(P);
    return node;
}

static jx_node *mk_const(parser *P, const jx_tok *at, jinja_value *v) {
    jx_node *nd = mk(P, N_CONST, at);
    if (nd) nd->val = v;
    return nd;
}

static jinja_value *const_value(parser *P, jv_kind k) {
    jinja_value *v = jx_arena_alloc(P->a, sizeof *v);
    if (!v) return fail_oom(P);
    v->kind = (uint8_t)k;
    return v;
}

static jx_node *parse_primary(parser *P) {
    jx_tok *t = cur(P);
    char b[64];
    switch (t->kind) {
    case T_NAME: {
        static const struct {
            const char *s;
            int v;
        } kw[] = {{"true", 1}, {"True", 1}, {"false", 0}, {"False", 0}, {"none", 2}, {"None", 2}};
        for (size_t k = 0; k < 6; k++)
            if (is_name(t, kw[k].s)) {
                adv(P);
                jinja_value *v = kw[k].v == 2 ? &jx_none_v : kw[k].v ? &jx_true_v : &jx_false_v;
                return mk_const(P, t, v);
            }
        adv(P);
        jx_node *nd = mk(P, N_NAME, t);
        if (!nd) return NULL;
        nd->s = tok_str(P, t);
        nd->slen = t->len;
        return nd;
    }
    case T_STRING: {
        /* adjacent string literals concatenate */
        size_t total = 0, k = P->i;
        while (k < P->n && P->t[k].kind == T_STRING) total += P->t[k++].len;
        char *s = jx_arena_alloc(P->a, total + 1);
        if (!s) return fail_oom(P);
        size_t o = 0;
        while (cur(P)->kind == T_STRING) {
            memcpy(s + o, cur(P)->s, cur(P)->len);
            o += cur(P)->len;
            adv(P);
        }
        jinja_value *v = const_value(P, JV_STR);
        if (!v) return NULL;
        v->u.str.s = s;
        v->u.str.len = o;
        bool ascii = true;
        for (size_t i = 0; i < o; i++)
            if ((unsigned char)s[i] >= 0x80) ascii = false;
        v->is_ascii = ascii;
        return mk_const(P, t, v);
    }
    case T_INT: {
        adv(P);
        jinja_value *v = const_value(P, JV_INT);
        if (!v) return NULL;
        v->u.i = t->i;
        return mk_const(P, t, v);
    }
    case T_FLOAT: {
        adv(P);
        jinja_value *v = const_value(P, JV_FLOAT);
        if (!v) return NULL;
        v->u.f = t->f;
        return mk_const(P, t, v);
    }
    case T_OP:
        if (t->op == OP_LPAREN) {
            adv(P);
            jx_node *x = parse_tuple(P, false, true, true, NULL, NULL);
            if (!x || !expect_op(P, OP_RPAREN, ")")) return NULL;
            return x;
        }
        if (t->op == OP_LBRACKET) {
            adv(P);
            nodevec items = {0};
            while (!is_op(cur(P), OP_RBRACKET)) {
                if (items.n && !expect_op(P, OP_COMMA, ",")) return NULL;
                if (is_op(cur(P), OP_RBRACKET)) break;
                jx_node *x = parse_expression(P, true);
                if (!x || !vec_push(P, &items, x)) return NULL;
            }
            adv(P);
            jx_node *nd = mk(P, N_LIST, t);
            if (!nd) return NULL;
            nd->list = items.p;
            nd->n = items.n;
            return nd;
        }
        if (t->op == OP_LBRACE) {
            adv(P);
            nodevec keys = {0}, vals = {0};
            while (!is_op(cur(P), OP_RBRACE)) {
                if (keys.n && !expect_op(P, OP_COMMA, ",")) return NULL;
                if (is_op(cur(P), OP_RBRACE)) break;
                jx_node *k = parse_expression(P, true);
                if (!k || !expect_op(P, OP_COLON, ":")) return NULL;
                jx_node *v = parse_expression(P, true);
                if (!v || !vec_push(P, &keys, k) || !vec_push(P, &vals, v)) return NULL;
            }
            adv(P);
            jx_node *nd = mk(P, N_DICT, t);
            if (!nd) return NULL;
            nd->list = keys.p;
            nd->n = keys.n;
            nd->list2 = vals.p;
            nd->n2 = vals.n;
            return nd;
        }
        break;
    default: break;
    }
    return fail_at(P, t, "unexpected %s", tok_desc(t, b, sizeof b));
}

static bool is_tuple_end(parser *P, const char *e1, const char *e2) {
    jx_tok *t = cur(P);
    if (t->kind == T_VAR_END || t->kind == T_BLOCK_END || is_op(t, OP_RPAREN) || t->kind == T_EOF) return true;
    if (e1 && is_name(t, e1)) return true;
    if (e2 && is_name(t, e2)) return true;
    return false;
}

static jx_node *parse_tuple(parser *P, bool simplified, bool with_condexpr, bool explicit_paren,
                            const char *e1, const char *e2) {
    jx_tok *at = cur(P);
    nodevec args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n && !expect_op(P, OP_COMMA, ",")) return NULL;
        if (is_tuple_end(P, e1, e2)) break;
        jx_node *x;
        if (simplified) {
            x = parse_primary(P);
        } else x = parse_expression(P, with_condexpr);
        if (!x || !vec_push(P, &args, x)) return NULL;
        if (is_op(cur(P), OP_COMMA)) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (args.n) return args.p[0];
        if (!explicit_paren) {
            char b[64];
            return fail_at(P, cur(P), "Expected an expression, got %s", tok_desc(cur(P), b, sizeof b));
        }
    }
    jx_node *nd = mk(P, N_TUPLE, at);
    if (!nd) return NULL;
    nd->list = args.p;
    nd->n = args.n;
    return nd;
}

/* Call arguments after '(' (consumed by caller? no: we consume '(' here). */
static bool parse_call_args(parser *P, jx_node *nd) {
    if (!expect_op(P, OP_LPAREN, "(")) return false;
    nodevec args = {0}, kwv = {0};
    const char *kwn_buf[64];
    size_t nkw = 0;
    bool first = true;
    while (!is_op(cur(P), OP_RPAREN)) {
        if (!first && !expect_op(P, OP_COMMA, ",")) return false;
        first = false;
        if (is_op(cur(P), OP_RPAREN)) break;
        if (is_op(cur(P), OP_MUL) || is_op(cur(P), OP_POW)) {
            fail_at(P, cur(P), "*args / **kwargs in calls are not supported");
            P->err->kind = JINJA_ERR_UNSUPPORTED;
            return false;
        }
        if (cur(P)->kind == T_NAME && is_op(peek(P, 1), OP_ASSIGN)) {
            if (nkw >= 64) return fail_at(P, cur(P), "too many keyword arguments"), false;
            kwn_buf[nkw++] = tok_str(P, cur(P));
            adv(P);
            adv(P);
            jx_node *v = parse_expression(P, true);
            if (!v || !vec_push(P, &kwv, v)) return false;
        } else {
            if (nkw) return fail_at(P, cur(P), "positional argument follows keyword argument"), false;
            jx_node *v = parse_expression(P, true);
            if (!v || !vec_push(P, &args, v)) return false;
        }
    }
    adv(P);
    nd->list = args.p;
    nd->n = args.n;
    nd->list2 = kwv.p;
    nd->n2 = kwv.n;
    if (nkw) {
        nd->names = jx_arena_alloc(P->a, nkw * sizeof *nd->names);
        if (!nd->names) return fail_oom(P), false;
        memcpy(nd->names, kwn_buf, nkw * sizeof *nd->names);
    }
    return !P->failed;
}

static jx_node *parse_subscribed(parser *P) {
    jx_tok *at = cur(P);
    jx_node *parts[3] = {NULL, NULL, NULL};
    if (is_op(cur(P), OP_COLON)) {
        adv(P);
    } else {
        jx_node *x = parse_expression(P, true);
        if (!x) return NULL;
        if (!is_op(cur(P), OP_COLON)) return x;
        adv(P);
        parts[0] = x;
    }
    if (!is_op(cur(P), OP_COLON) && !is_op(cur(P), OP_RBRACKET) && !is_op(cur(P), OP_COMMA)) {
        parts[1] = parse_expression(P, true);
        if (!parts[1]) return NULL;
    }
    if (is_op(cur(P), OP_COLON)) {
        adv(P);
        if (!is_op(cur(P), OP_RBRACKET) && !is_op(cur(P), OP_COMMA)) {
            parts[2] = parse_expression(P, true);
            if (!parts[2]) return NULL;
        }
    }
    jx_node *nd = mk(P, N_SLICE, at);
    if (!nd) return NULL;
    nd->a = parts[0];
    nd->b = parts[1];
    nd->c = parts[2];
    return nd;
}

static jx_node *parse_postfix(parser *P, jx_node *node) {
    for (;;) {
        jx_tok *t = cur(P);
        if (is_op(t, OP_DOT)) {
            adv(P);
            jx_tok *a = cur(P);
            if (a->kind == T_NAME) {
                adv(P);
                jx_node *nd = mk(P, N_GETATTR, t);
                if (!nd) return NULL;
                nd->a = node;
                nd->s = tok_str(P, a);
                nd->slen = a->len;
                node = nd;
            } else if (a->kind == T_INT) {
                adv(P);
                jinja_value *v = const_value(P, JV_INT);
                if (!v) return NULL;
                v->u.i = a->i;
                jx_node *k = mk_const(P, a, v);
                jx_node *nd = mk(P, N_GETITEM, t);
                if (!nd || !k) return NULL;
                nd->a = node;
                nd->b = k;
                node = nd;
            } else {
                return fail_at(P, a, "expected name or number");
            }
        } else if (is_op(t, OP_LBRACKET)) {
            adv(P);
            nodevec args = {0};
            while (!is_op(cur(P), OP_RBRACKET)) {
                if (args.n && !expect_op(P, OP_COMMA, ",")) return NULL;
                jx_node *x = parse_subscribed(P);
                if (!x || !vec_push(P, &args, x)) return NULL;
                if (cur(P)->kind == T_EOF) return fail_at(P, cur(P), "unexpected end of template, expected ']'");
            }
            adv(P);
            if (args.n == 0) return fail_at(P, t, "expected subscript expression");
            jx_node *key = args.p[0];
            if (args.n > 1) {
                key = mk(P, N_TUPLE, t);
                if (!key) return NULL;
                key->list = args.p;
                key->n = args.n;
            }
            jx_node *nd = mk(P, N_GETITEM, t);
            if (!nd) return NULL;
            nd->a = node;
            nd->b = key;
            node = nd;
        } else if (is_op(t, OP_LPAREN)) {
            jx_node *nd = mk(P, N_CALL, t);
            if (!nd) return NULL;
            nd->a = node;
            if (!parse_call_args(P, nd)) return NULL;
            node = nd;
        } else break;
    }
    return node;
}

/* Dotted filter/test name: name(.name)* */
static bool parse_dotted_name(parser *P, const char **out, size_t *len) {
    jx_tok *t = cur(P);
    if (t->kind != T_NAME) {
        char b[64];
        fail_at(P, t, "expected token 'name', got %s", tok_desc(t, b, sizeof b));
        return false;
    }
    const char *s = t->s;
    size_t l = t->len;
    adv(P);
    while (is_op(cur(P), OP_DOT) && peek(P, 1)->kind == T_NAME) {
        adv(P);
        l = (size_t)(cur(P)->s + cur(P)->len - s);
        adv(P);
    }
    *out = jx_arena_strdup(P->a, s, l);
    *len = l;
    if (!*out) return fail_oom(P), false;
    return true;
}

static jx_node *parse_filter(parser *P, jx_node *node, bool start_inline) {
    while (is_op(cur(P), OP_PIPE) || start_inline) {
        if (!start_inline) adv(P);
        start_inline = false;
        jx_tok *at = cur(P);
        jx_node *nd = mk(P, N_FILTER, at);
        if (!nd) return NULL;
        if (!parse_dotted_name(P, &nd->s, &nd->slen)) return NULL;
        nd->filter = jx_filter_lookup(nd->s, nd->slen);
        if (!nd->filter) return fail_at(P, at, "No filter named '%s'.", nd->s);
        if (is_op(cur(P), OP_LPAREN) && !parse_call_args(P, nd)) return NULL;
        nd->a = node;
        node = nd;
    }
    return node;
}

static jx_node *parse_test(parser *P, jx_node *node) {
    jx_tok *at = cur(P);
    adv(P); /* 'is' */
    bool negated = false;
    if (is_name(cur(P), "not")) {
        negated = true;
        adv(P);
    }
    jx_node *nd = mk(P, N_TEST, at);
    if (!nd) return NULL;
    jx_tok *nt = cur(P);
    if (!parse_dotted_name(P, &nd->s, &nd->slen)) return NULL;
    nd->test = jx_test_lookup(nd->s, nd->slen);
    if (!nd->test) return fail_at(P, nt, "No test named '%s'.", nd->s);
    jx_tok *t = cur(P);
    if (is_op(t, OP_LPAREN)) {
        if (!parse_call_args(P, nd)) return NULL;
    } else if ((t->kind == T_NAME || t->kind == T_STRING || t->kind == T_INT || t->kind == T_FLOAT ||
                is_op(t, OP_LPAREN) || is_op(t, OP_LBRACKET) || is_op(t, OP_LBRACE)) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        if (is_name(t, "is")) return fail_at(P, t, "You cannot chain multiple tests with is");
        jx_node *arg = parse_primary(P);
        if (!arg) return NULL;
        arg = parse_postfix(P, arg);
        if (!arg) return NULL;
        nd->list = jx_arena_alloc(P->a, sizeof *nd->list);
        if (!nd->list) return fail_oom(P);
        nd->list[0] = arg;
        nd->n = 1;
    }
    nd->a = node;
    if (negated) {
        jx_node *n2 = mk(P, N_NOT, at);
        if (!n2) return NULL;
        n2->a = nd;
        return n2;
    }
    return nd;
}

static jx_node *parse_filter_expr(parser *P, jx_node *node) {
    for (;;) {
        if (!node) return NULL;
        jx_tok *t = cur(P);
        if (is_op(t, OP_PIPE)) node = parse_filter(P, node, false);
        else if (is_name(t, "is")) node = parse_test(P, node);
        else if (is_op(t, OP_LPAREN)) {
            jx_node *nd = mk(P, N_CALL, t);
            if (!nd) return NULL;
            nd->a = node;
            if (!parse_call_args(P, nd)) return NULL;
            node = nd;
        } else break;
    }
    return node;
}

/* ------------------------------------------------------------------------
 * Statements
 * ---------------------------------------------------------------------- */

static bool assignable(const jx_node *t) {
    if (t->kind == N_NAME || t->kind == N_NSREF) return true;
    if (t->kind == N_TUPLE || t->kind == N_LIST) {
        for (size_t i = 0; i < t->n; i++)
            if (t->list[i]->kind != N_NAME) return false;
        return true;
    }
    return false;
}

static jx_node *parse_assign_target(parser *P, bool with_namespace, const char *e1) {
    jx_tok *at = cur(P);
    jx_node *target;
    if (with_namespace && at->kind == T_NAME && is_op(peek(P, 1), OP_DOT) && peek(P, 2)->kind == T_NAME) {
        target = mk(P, N_NSREF, at);
        if (!target) return NULL;
        target->s = tok_str(P, at);
        target->slen = at->len;
        adv(P);
        adv(P);
        jx_node *attr = mk(P, N_NAME, cur(P));
        if (!attr) return NULL;
        attr->s = tok_str(P, cur(P));
        attr->slen = cur(P)->len;
        target->a = attr;
        adv(P);
        return target;
    }
    target = parse_tuple(P, true, true, false, e1, NULL);
    if (!target) return NULL;
    if (!assignable(target)) {
        char b[64];
        return fail_at(P, at, "can't assign to %s", target->kind == N_CONST ? "a constant" : tok_desc(at, b, sizeof b));
    }
    return target;
}

typedef struct end_set {
    const char *names[3];
} end_set;

static jx_node *subparse(parser *P, const end_set *ends, const char *block_name, const jx_tok *block_at);

static bool expect_block_end(parser *P) { return expect_kind(P, T_BLOCK_END, "end of statement block"); }

/* After subparse stopped at an end tag: the tag name is current. */
static bool at_name(parser *P, const char *s) { return is_name(cur(P), s); }

static jx_node *parse_if(parser *P, jx_tok *at) {
    jx_node *nd = mk(P, N_IF, at);
    if (!nd) return NULL;
    jx_node *top = nd;
    for (;;) {
        nd->a = parse_tuple(P, false, false, false, NULL, NULL);
        if (!nd->a || !expect_block_end(P)) return NULL;
        end_set e = {{"elif", "else", "endif"}};
        jx_node *body = subparse(P, &e, "if", at);
        if (!body) return NULL;
        nd->list = body->list;
        nd->n = body->n;
        if (at_name(P, "elif")) {
            jx_tok *et = cur(P);
            adv(P);
            jx_node *el = mk(P, N_IF, et);
            if (!el) return NULL;
            nd->list2 = jx_arena_alloc(P->a, sizeof *nd->list2);
            if (!nd->list2) return fail_oom(P);
            nd->list2[0] = el;
            nd->n2 = 1;
            nd = el;
            continue;
        }
        if (at_name(P, "else")) {
            adv(P);
            if (!expect_block_end(P)) return NULL;
            end_set e2 = {{"endif", NULL, NULL}};
            jx_node *eb = subparse(P, &e2, "if", at);
            if (!eb) return NULL;
            nd->list2 = eb->list;
            nd->n2 = eb->n;
        }
        adv(P); /* endif */
        if (!expect_block_end(P)) return NULL;
        return top;
    }
}

static jx_node *parse_for(parser *P, jx_tok *at) {
    jx_node *nd = mk(P, N_FOR, at);
    if (!nd) return NULL;
    nd->a = parse_assign_target(P, false, "in");
    if (!nd->a) return NULL;
    if (!is_name(cur(P), "in")) {
        char b[64];
        return fail_at(P, cur(P), "expected token 'in', got %s", tok_desc(cur(P), b, sizeof b));
    }
    adv(P);
    nd->b = parse_tuple(P, false, false, false, "recursive", NULL);
    if (!nd->b) return NULL;
    if (is_name(cur(P), "if")) {
        adv(P);
        nd->c = parse_expression(P, true);
        if (!nd->c) return NULL;
    }
    if (is_name(cur(P), "recursive")) {
        fail_at(P, cur(P), "recursive for loops are not supported");
        P->err->kind = JINJA_ERR_UNSUPPORTED;
        return NULL;
    }
    if (!expect_block_end(P)) return NULL;
    P->loop_depth++;
    end_set e = {{"endfor", "else", NULL}};
    jx_node *body = subparse(P, &e, "for", at);
    P->loop_depth--;
    if (!body) return NULL;
    nd->list = body->list;
    nd->n = body->n;
    if (at_name(P, "else")) {
        adv(P);
        if (!expect_block_end(P)) return NULL;
        end_set e2 = {{"endfor", NULL, NULL}};
        jx_node *eb = subparse(P, &e2, "for", at);
        if (!eb) return NULL;
        nd->list2 = eb->list;
        nd->n2 = eb->n;
    }
    adv(P);
    if (!expect_block_end(P)) return NULL;
    return nd;
}

static jx_node *parse_set(parser *P, jx_tok *at) {
    jx_node *target = parse_assign_target(P, true, NULL);
    if (!target) return NULL;
    if (is_op(cur(P), OP_ASSIGN)) {
        adv(P);
        jx_node *nd = mk(P, N_SET, at);
        if (!nd) return NULL;
        nd->a = target;
        nd->b = parse_tuple(P, false, true, false, NULL, NULL);
        if (!nd->b || !expect_block_end(P)) return NULL;
        return nd;
    }
    jx_node *nd = mk(P, N_SETBLOCK, at);
    if (!nd) return NULL;
    nd->a = target;
    if (is_op(cur(P), OP_PIPE)) {
        nd->c = parse_filter(P, NULL, false);
        if (!nd->c) return NULL;
    }
    if (!expect_block_end(P)) return NULL;
    end_set e = {{"endset", NULL, NULL}};
    jx_node *body = subparse(P, &e, "set", at);
    if (!body) return NULL;
    nd->list = body->list;
    nd->n = body->n;
    adv(P);
    if (!expect_block_end(P)) return NULL;
    return nd;
}

/* "(a, b=1, ...)" parameter list for macro / call. */
static bool parse_signature(parser *P, jx_node *nd) {
    if (!expect_op(P, OP_LPAREN, "(")) return false;
    const char *names[64];
    jx_node *defs[64];
    size_t n = 0;
    while (!is_op(cur(P), OP_RPAREN)) {
        if (n && !expect_op(P, OP_COMMA, ",")) return false;
        if (is_op(cur(P), OP_RPAREN)) break;
        if (cur(P)->kind != T_NAME) {
            char b[64];
            return fail_at(P, cur(P), "expected token 'name', got %s", tok_desc(cur(P), b, sizeof b)), false;
        }
        if (n >= 64) return fail_at(P, cur(P), "too many parameters"), false;
        names[n] = tok_str(P, cur(P));
        defs[n] = NULL;
        adv(P);
        if (is_op(cur(P), OP_ASSIGN)) {
            adv(P);
            defs[n] = parse_expression(P, true);
            if (!defs[n]) return false;
        } else if (n > 0 && defs[n - 1]) {
            return fail_at(P, cur(P), "parameter without a default follows parameter with a default"), false;
        }
        n++;
    }
    adv(P);
    nd->n2 = n;
    if (n) {
        nd->names = jx_arena_alloc(P->a, n * sizeof *nd->names);
        nd->list2 = jx_arena_alloc(P->a, n * sizeof *nd->list2);
        if (!nd->names || !nd->list2) return fail_oom(P), false;
        memcpy(nd->names, names, n * sizeof *names);
        memcpy(nd->list2, defs, n * sizeof *defs);
    }
    return !P->failed;
}

static jx_node *parse_macro(parser *P, jx_tok *at) {
    jx_node *nd = mk(P, N_MACRO, at);
    if (!nd) return NULL;
    if (cur(P)->kind != T_NAME) return fail_at(P, cur(P), "expected macro name");
    nd->s = tok_str(P, cur(P));
    nd->slen = cur(P)->len;
    adv(P);
    if (!parse_signature(P, nd) || !expect_block_end(P)) return NULL;
    int saved = P->loop_depth;
    P->loop_depth = 0;
    end_set e = {{"endmacro", NULL, NULL}};
    jx_node *body = subparse(P, &e, "macro", at);
    P->loop_depth = saved;
    if (!body) return NULL;
    nd->list = body->list;
    nd->n = body->n;
    adv(P);
    if (cur(P)->kind == T_NAME) adv(P); /* optional "endmacro name" */
    if (!expect_block_end(P)) return NULL;
    return nd;
}

static jx_node *parse_call_block(parser *P, jx_tok *at) {
    jx_node *nd = mk(P, N_CALLBLOCK, at);
    if (!nd) return NULL;
    if (is_op(cur(P), OP_LPAREN) && !parse_signature(P, nd)) return NULL;
    jx_node *call = parse_expression(P, true);
    if (!call) return NULL;
    if (call->kind != N_CALL) return fail_at(P, at, "expected call");
    nd->a = call;
    if (!expect_block_end(P)) return NULL;
    int saved = P->loop_depth;
    P->loop_depth = 0;
    end_set e = {{"endcall", NULL, NULL}};
    jx_node *body = subparse(P, &e, "call", at);
    P->loop_depth = saved;
    if (!body) return NULL;
    nd->list = body->list;
    nd->n = body->n;
    adv(P);
    if (!expect_block_end(P)) return NULL;
    return nd;
}

static jx_node *parse_filter_block(parser *P, jx_tok *at) {
    jx_node *nd = mk(P, N_FILTERBLOCK, at);
    if (!nd) return NULL;
    nd->c = parse_filter(P, NULL, true);
    if (!nd->c || !expect_block_end(P)) return NULL;
    end_set e = {{"endfilter", NULL, NULL}};
    jx_node *body = subparse(P, &e, "filter", at);
    if (!body) return NULL;
    nd->list = body->list;
    nd->n = body->n;
    adv(P);
    if (!expect_block_end(P)) return NULL;
    return nd;
}

static jx_node *parse_with(parser *P, jx_tok *at) {
    jx_node *nd = mk(P, N_WITH, at);
    if (!nd) return NULL;
    const char *names[64];
    jx_node *vals[64];
    size_t n = 0;
    while (cur(P)->kind != T_BLOCK_END) {
        if (n && !expect_op(P, OP_COMMA, ",")) return NULL;
        if (cur(P)->kind != T_NAME) return fail_at(P, cur(P), "expected name in with statement");
        if (n >= 64) return fail_at(P, cur(P), "too many with targets");
        names[n] = tok_str(P, cur(P));
        adv(P);
        if (!expect_op(P, OP_ASSIGN, "=")) return NULL;
        vals[n] = parse_expression(P, true);
        if (!vals[n]) return NULL;
        n++;
    }
    adv(P);
    nd->n2 = n;
    if (n) {
        nd->names = jx_arena_alloc(P->a, n * sizeof *nd->names);
        nd->list2 = jx_arena_alloc(P->a, n * sizeof *nd->list2);
        if (!nd->names || !nd->list2) return fail_oom(P);
        memcpy(nd->names, names, n * sizeof *names);
        memcpy(nd->list2, vals, n * sizeof *vals);
    }
    end_set e = {{"endwith", NULL, NULL}};
    jx_node *body = subparse(P, &e, "with", at);
    if (!body) return NULL;
    nd->list = body->list;
    nd->n = body->n;
    adv(P);
    if (!expect_block_end(P)) return NULL;
    return nd;
}

static jx_node *parse_statement(parser *P) {
    jx_tok *at = cur(P);
    if (at->kind != T_NAME) return fail_at(P, at, "tag name expected");
    if (!enter(P)) return NULL;
    jx_node *r = NULL;
    adv(P);
    if (is_name(at, "if")) r = parse_if(P, at);
    else if (is_name(at, "for")) r = parse_for(P, at);
    else if (is_name(at, "set")) r = parse_set(P, at);
    else if (is_name(at, "macro")) r = parse_macro(P, at);
    else if (is_name(at, "call")) r = parse_call_block(P, at);
    else if (is_name(at, "filter")) r = parse_filter_block(P, at);
    else if (is_name(at, "with")) r = parse_with(P, at);
    else if (is_name(at, "break") || is_name(at, "continue")) {
        if (P->loop_depth == 0) {
            leave(P);
            return fail_at(P, at, "'%.*s' outside of a loop", (int)at->len, at->s);
        }
        r = mk(P, is_name(at, "break") ? N_BREAK : N_CONTINUE, at);
        if (r && !expect_block_end(P)) r = NULL;
    } else if (is_name(at, "generation")) {
        /* transformers' AssistantTracker extension: marks assistant text; renders its body */
        if (expect_block_end(P)) {
            end_set e = {{"endgeneration", NULL, NULL}};
            r = subparse(P, &e, "generation", at);
            if (r) {
                adv(P);
                if (!expect_block_end(P)) r = NULL;
            }
        }
    } else if (is_name(at, "include") || is_name(at, "import") || is_name(at, "from") ||
               is_name(at, "extends") || is_name(at, "block")) {
        fail_at(P, at, "tag '%.*s' is not supported in chat templates", (int)at->len, at->s);
        P->err->kind = JINJA_ERR_UNSUPPORTED;
    } else {
        fail_at(P, at, "Encountered unknown tag '%.*s'.", (int)(at->len > 40 ? 40 : at->len), at->s);
    }
    leave(P);
    return r;
}

static jx_node *subparse(parser *P, const end_set *ends, const char *block_name, const jx_tok *block_at) {
    jx_node *body = mk(P, N_BODY, cur(P));
    if (!body) return NULL;
    nodevec v = {0};
    for (;;) {
        jx_tok *t = cur(P);
        if (P->failed) return NULL;
        if (t->kind == T_EOF) {
            if (ends) {
                char names[160] = "";
                for (int k = 0; k < 3 && ends->names[k]; k++) {
                    if (k) strncat(names, " or ", sizeof names - strlen(names) - 1);
                    strncat(names, "'", sizeof names - strlen(names) - 1);
                    strncat(names, ends->names[k], sizeof names - strlen(names) - 1);
                    strncat(names, "'", sizeof names - strlen(names) - 1);
                }
                (void)block_at;
                return fail_at(P, t,
                               "Unexpected end of template. Jinja was looking for the following tags: %s. "
                               "The innermost block that needs to be closed is '%s'.",
                               names, block_name);
            }
            break;
        }
        if (t->kind == T_TEXT) {
            jx_node *nd = mk(P, N_TEXT, t);
            if (!nd) return NULL;
            nd->s = t->s;
            nd->slen = t->len;
            if (!vec_push(P, &v, nd)) return NULL;
            adv(P);
        } else if (t->kind == T_VAR_BEGIN) {
            adv(P);
            jx_node *nd = mk(P, N_OUTPUT, t);
            if (!nd) return NULL;
            nd->a = parse_tuple(P, false, true, false, NULL, NULL);
            if (!nd->a || !expect_kind(P, T_VAR_END, "end of print statement")) return NULL;
            if (!vec_push(P, &v, nd)) return NULL;
        } else if (t->kind == T_BLOCK_BEGIN) {
            adv(P);
            jx_tok *nt = cur(P);
            if (ends && nt->kind == T_NAME)
                for (int k = 0; k < 3 && ends->names[k]; k++)
                    if (is_name(nt, ends->names[k])) goto done;
            if (nt->kind == T_NAME && nt->len > 3 && memcmp(nt->s, "end", 3) == 0 &&
                !is_name(nt, "endgeneration")) {
                if (ends)
                    return fail_at(P, nt, "Encountered unknown tag '%.*s'. Jinja was looking for the following tags: '%s'. The innermost block that needs to be closed is '%s'.",
                                   (int)nt->len, nt->s, ends->names[0], block_name);
                return fail_at(P, nt, "Encountered unknown tag '%.*s'.", (int)nt->len, nt->s);
            }
            if ((is_name(nt, "elif") || is_name(nt, "else")) && !ends)
                return fail_at(P, nt, "Encountered unknown tag '%.*s'.", (int)nt->len, nt->s);
            jx_node *st = parse_statement(P);
            if (!st || !vec_push(P, &v, st)) return NULL;
        } else {
            char b[64];
            return fail_at(P, t, "unexpected %s", tok_desc(t, b, sizeof b));
        }
    }
done:
    body->list = v.p;
    body->n = v.n;
    return body;
}

bool jx_parse(jinja_template *t, jx_tok *toks, size_t ntoks, jinja_error *err) {
    parser P = {.a = &t->arena, .t = toks, .n = ntoks, .err = err};
    t->root = subparse(&P, NULL, NULL, NULL);
    return t->root && !P.failed;
}
