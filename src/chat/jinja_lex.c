/*
 * jinja_lex.c - template source -> token array.
 *
 * Follows jinja2.lexer (3.1): newlines are normalized to "\n" first and one
 * trailing newline is dropped (keep_trailing_newline=False). Text runs end at
 * the earliest "{{", "{%" or "{#". Whitespace control:
 *   - "{%-" / "{{-" / "{#-": strip all whitespace (Python str.rstrip) before the tag;
 *   - "-%}" / "-}}" / "-#}": strip all whitespace after the tag;
 *   - lstrip_blocks: for block and comment tags without "+", remove the spaces
 *     before the tag when only whitespace separates it from the start of its
 *     line (or from the start of a text run that begins a line);
 *   - trim_blocks: after "%}" / "#}" (not "+%}"), drop one "\n".
 * Inside tags, "}}" / "%}" only end the tag outside (), [], {} (Jinja's
 * balancing stack).
 */
#include "jinja_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    jx_arena *a;
    const char *s;
    size_t n, pos;
    int line;
    size_t col;        /* code points since the start of the line, at `counted` */
    size_t counted;    /* positions before this have been scanned for newlines */
    const jinja_options *opt;
    jx_tok *toks;
    size_t ntoks, cap;
    jinja_error *err;
    size_t max_tokens;
} lexer;

/* Line/column (1-based, column in code points) of offset p. Positions are
 * asked for in increasing order, so the scan is incremental: O(source). */
static void lx_linecol(lexer *L, size_t p, int *line, int *col) {
    if (p < L->counted) { /* rare: recount from the start */
        L->counted = 0;
        L->line = 1;
        L->col = 0;
    }
    for (size_t i = L->counted; i < p && i < L->n; i++) {
        unsigned char c = (unsigned char)L->s[i];
        if (c == '\n') {
            L->line++;
            L->col = 0;
        } else if ((c & 0xC0) != 0x80) L->col++;
    }
    if (p > L->counted) L->counted = p;
    *line = L->line;
    *col = L->col + 1;
}

static bool lx_fail(lexer *L, size_t p, const char *msg) {
    int line, col;
    lx_linecol(L, p, &line, &col);
    L->err->kind = JINJA_ERR_SYNTAX;
    L->err->line = line;
    L->err->col = col;
    snprintf(L->err->msg, sizeof L->err->msg, "%s", msg);
    return false;
}

static jx_tok *lx_push(lexer *L, jx_tok_kind k, size_t at) {
    if (L->ntoks == L->cap) {
        if (L->ntoks >= L->max_tokens) {
            lx_fail(L, at, "template too large (token limit)");
            L->err->kind = JINJA_ERR_LIMIT;
            return NULL;
        }
        size_t nc = L->cap ? L->cap * 2 : 256;
        jx_tok *t = jx_arena_alloc(L->a, nc * sizeof *t);
        if (!t) {
            L->err->kind = JINJA_ERR_NOMEM;
            snprintf(L->err->msg, sizeof L->err->msg, "out of memory");
            return NULL;
        }
        if (L->ntoks) memcpy(t, L->toks, L->ntoks * sizeof *t);
        L->toks = t;
        L->cap = nc;
    }
    jx_tok *t = &L->toks[L->ntoks++];
    memset(t, 0, sizeof *t);
    t->kind = (uint8_t)k;
    lx_linecol(L, at, &t->line, &t->col);
    return t;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* End of s[0..n) after Python str.rstrip(). */
static size_t rstrip_len(const char *s, size_t n) {
    size_t i = 0, end = 0;
    while (i < n) {
        uint32_t c = jx_utf8_next(s, n, &i);
        if (!jx_is_space_cp(c)) end = i;
    }
    return end;
}

/* Skip Python-\s whitespace starting at p. */
static size_t skip_uspace(const char *s, size_t n, size_t p) {
    while (p < n) {
        size_t q = p;
        uint32_t c = jx_utf8_next(s, n, &q);
        if (!jx_is_space_cp(c)) break;
        p = q;
    }
    return p;
}

static bool emit_text(lexer *L, size_t from, size_t len) {
    if (len == 0) return true;
    jx_tok *t = lx_push(L, T_TEXT, from);
    if (!t) return false;
    t->s = L->s + from;
    t->len = len;
    return true;
}

/* ------------------------------------------------------------------------
 * String literals: Python "unicode-escape" decoding of the body.
 * ---------------------------------------------------------------------- */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool lex_string(lexer *L, size_t start) {
    char q = L->s[start];
    size_t p = start + 1;
    while (p < L->n && L->s[p] != q) {
        if (L->s[p] == '\\' && p + 1 < L->n) p++;
        p++;
    }
    if (p >= L->n) return lx_fail(L, start, "unexpected char '\"' or '\\'' (unterminated string)");
    const char *body = L->s + start + 1;
    size_t blen = p - start - 1;
    char *out = jx_arena_alloc(L->a, blen + 1);
    if (!out) return lx_fail(L, start, "out of memory");
    size_t o = 0;
    for (size_t i = 0; i < blen; i++) {
        char c = body[i];
        if (c != '\\' || i + 1 >= blen) {
            out[o++] = c;
            continue;
        }
        char e = body[++i];
        uint32_t cp = 0;
        int nd = 0;
        switch (e) {
        case '\n': break; /* line continuation */
        case '\\': out[o++] = '\\'; break;
        case '\'': out[o++] = '\''; break;
        case '"': out[o++] = '"'; break;
        case 'a': out[o++] = '\a'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'v': out[o++] = '\v'; break;
        case 'x': nd = 2; goto hex;
        case 'u': nd = 4; goto hex;
        case 'U':
            nd = 8;
        hex:
            if (i + (size_t)nd >= blen)
                return lx_fail(L, start, "truncated \\x/\\u escape in string literal");
            for (int k = 1; k <= nd; k++) {
                int h = hexval(body[i + (size_t)k]);
                if (h < 0) return lx_fail(L, start, "truncated \\x/\\u escape in string literal");
                cp = cp * 16 + (uint32_t)h;
            }
            i += (size_t)nd;
            /* combine a UTF-16 surrogate pair written as two \u escapes */
            if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 < blen && body[i + 1] == '\\' && body[i + 2] == 'u') {
                uint32_t lo = 0;
                bool ok = true;
                for (int k = 3; k <= 6; k++) {
                    int h = hexval(body[i + (size_t)k]);
                    if (h < 0) ok = false;
                    else lo = lo * 16 + (uint32_t)h;
                }
                if (ok && lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                return lx_fail(L, start, "invalid code point escape in string literal");
            o += (size_t)jx_utf8_encode(cp, out + o);
            break;
        default:
            if (e >= '0' && e <= '7') {
                int k = 0;
                while (k < 3 && i < blen && body[i] >= '0' && body[i] <= '7') {
                    cp = cp * 8 + (uint32_t)(body[i] - '0');
                    i++;
                    k++;
                }
                i--;
                o += (size_t)jx_utf8_encode(cp, out + o);
            } else {
                out[o++] = '\\';
                out[o++] = e;
            }
        }
    }
    out[o] = 0;
    jx_tok *t = lx_push(L, T_STRING, start);
    if (!t) return false;
    t->s = out;
    t->len = o;
    L->pos = p + 1;
    return true;
}

/* ------------------------------------------------------------------------
 * Numbers, names, operators
 * ---------------------------------------------------------------------- */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

static size_t scan_digits(const char *s, size_t n, size_t p) {
    /* \d+(_\d+)* */
    while (p < n && (is_digit(s[p]) || (s[p] == '_' && p + 1 < n && is_digit(s[p + 1]) && p > 0 && is_digit(s[p - 1]))))
        p++;
    return p;
}

static bool lex_number(lexer *L, size_t start) {
    const char *s = L->s;
    size_t n = L->n, p = start;
    if (s[p] == '0' && p + 1 < n && (s[p + 1] == 'x' || s[p + 1] == 'o' || s[p + 1] == 'b' ||
                                     s[p + 1] == 'X' || s[p + 1] == 'O' || s[p + 1] == 'B')) {
        int base = (s[p + 1] | 32) == 'x' ? 16 : (s[p + 1] | 32) == 'o' ? 8 : 2;
        p += 2;
        uint64_t v = 0;
        size_t d0 = p;
        while (p < n) {
            int h = s[p] == '_' ? -2 : hexval(s[p]);
            if (h == -2) {
                p++;
                continue;
            }
            if (h < 0 || h >= base) break;
            if (v > (UINT64_MAX - (uint64_t)h) / (uint64_t)base || v * (uint64_t)base + (uint64_t)h > INT64_MAX)
                return lx_fail(L, start, "integer literal too large");
            v = v * (uint64_t)base + (uint64_t)h;
            p++;
        }
        if (p == d0) return lx_fail(L, start, "invalid integer literal");
        jx_tok *t = lx_push(L, T_INT, start);
        if (!t) return false;
        t->i = (int64_t)v;
        L->pos = p;
        return true;
    }
    p = scan_digits(s, n, p);
    bool is_float = false;
    bool after_dot = start > 0 && s[start - 1] == '.'; /* Jinja's (?<!\.) */
    size_t q = p;
    if (!after_dot && q + 1 < n && s[q] == '.' && is_digit(s[q + 1])) {
        q = scan_digits(s, n, q + 1);
        is_float = true;
    }
    if (!after_dot && q < n && (s[q] == 'e' || s[q] == 'E')) {
        size_t r = q + 1;
        if (r < n && (s[r] == '+' || s[r] == '-')) r++;
        if (r < n && is_digit(s[r])) {
            q = scan_digits(s, n, r);
            is_float = true;
        }
    }
    char buf[128];
    size_t bl = 0;
    size_t end = is_float ? q : p;
    for (size_t i = start; i < end && bl < sizeof buf - 1; i++)
        if (s[i] != '_') buf[bl++] = s[i];
    buf[bl] = 0;
    if (end - start >= sizeof buf - 1) return lx_fail(L, start, "number literal too long");
    if (is_float) {
        jx_tok *t = lx_push(L, T_FLOAT, start);
        if (!t) return false;
        t->f = strtod(buf, NULL);
    } else {
        uint64_t v = 0;
        for (size_t i = 0; i < bl; i++) {
            if (v > (INT64_MAX - (uint64_t)(buf[i] - '0')) / 10) return lx_fail(L, start, "integer literal too large");
            v = v * 10 + (uint64_t)(buf[i] - '0');
        }
        jx_tok *t = lx_push(L, T_INT, start);
        if (!t) return false;
        t->i = (int64_t)v;
    }
    L->pos = end;
    return true;
}

static const struct {
    const char *s;
    jx_op op;
} ops[] = {
    {"//", OP_FLOORDIV}, {"**", OP_POW}, {"==", OP_EQ}, {"!=", OP_NE}, {"<=", OP_LE}, {">=", OP_GE},
    {"+", OP_ADD}, {"-", OP_SUB}, {"/", OP_DIV}, {"*", OP_MUL}, {"%", OP_MOD}, {"~", OP_TILDE},
    {"[", OP_LBRACKET}, {"]", OP_RBRACKET}, {"(", OP_LPAREN}, {")", OP_RPAREN}, {"{", OP_LBRACE},
    {"}", OP_RBRACE}, {"<", OP_LT}, {">", OP_GT}, {"=", OP_ASSIGN}, {".", OP_DOT}, {":", OP_COLON},
    {"|", OP_PIPE}, {",", OP_COMMA}, {";", OP_SEMICOLON},
};

/* Lex the inside of a {{ }} or {% %} tag up to and including its end. */
static bool lex_tag(lexer *L, bool is_block, size_t tag_start) {
    const char *s = L->s;
    size_t n = L->n;
    int depth = 0;
    for (;;) {
        while (L->pos < n && is_ws(s[L->pos])) L->pos++;
        size_t p = L->pos;
        if (p >= n)
            return lx_fail(L, tag_start, is_block ? "unexpected end of template, expected 'end of statement block'"
                                                  : "unexpected end of template, expected 'end of print statement'");
        char endc = is_block ? '%' : '}';
        if (depth == 0) {
            size_t q = p;
            char sign = 0;
            if ((s[q] == '-' || s[q] == '+') && q + 2 < n && s[q + 1] == endc && s[q + 2] == '}') {
                sign = s[q];
                q++;
            }
            if (q + 1 < n && s[q] == endc && s[q + 1] == '}') {
                jx_tok *t = lx_push(L, is_block ? T_BLOCK_END : T_VAR_END, p);
                if (!t) return false;
                L->pos = q + 2;
                if (sign == '-') L->pos = skip_uspace(s, n, L->pos);
                else if (sign != '+' && is_block && L->opt->trim_blocks && L->pos < n && s[L->pos] == '\n')
                    L->pos++;
                return true;
            }
        }
        char c = s[p];
        if (c == '\'' || c == '"') {
            if (!lex_string(L, p)) return false;
            continue;
        }
        if (is_digit(c)) {
            if (!lex_number(L, p)) return false;
            continue;
        }
        if (is_name_start(c)) {
            size_t q = p;
            while (q < n && is_name_char(s[q])) q++;
            jx_tok *t = lx_push(L, T_NAME, p);
            if (!t) return false;
            t->s = s + p;
            t->len = q - p;
            L->pos = q;
            continue;
        }
        bool found = false;
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            size_t ol = strlen(ops[k].s);
            if (p + ol <= n && memcmp(s + p, ops[k].s, ol) == 0) {
                jx_tok *t = lx_push(L, T_OP, p);
                if (!t) return false;
                t->op = (uint8_t)ops[k].op;
                L->pos = p + ol;
                if (ops[k].op == OP_LPAREN || ops[k].op == OP_LBRACKET || ops[k].op == OP_LBRACE) depth++;
                if ((ops[k].op == OP_RPAREN || ops[k].op == OP_RBRACKET || ops[k].op == OP_RBRACE) && depth > 0)
                    depth--;
                found = true;
                break;
            }
        }
        if (!found) {
            char msg[64];
            if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f) snprintf(msg, sizeof msg, "unexpected char '%c'", c);
            else snprintf(msg, sizeof msg, "unexpected byte 0x%02x", (unsigned char)c);
            return lx_fail(L, p, msg);
        }
    }
}

/* Match an opening brace-percent, optional sign, NAME, optional sign, percent-brace (any spacing)
 * at p; returns the end offset or 0; *lsign / *rsign get the signs. */
static size_t match_simple_tag(const char *s, size_t n, size_t p, const char *name, char *lsign, char *rsign) {
    if (p + 2 > n || s[p] != '{' || s[p + 1] != '%') return 0;
    size_t q = p + 2;
    *lsign = 0;
    if (q < n && (s[q] == '-' || s[q] == '+')) *lsign = s[q++];
    while (q < n && is_ws(s[q])) q++;
    size_t nl = strlen(name);
    if (q + nl > n || memcmp(s + q, name, nl) != 0) return 0;
    q += nl;
    if (q < n && is_name_char(s[q])) return 0;
    while (q < n && is_ws(s[q])) q++;
    *rsign = 0;
    if (q < n && (s[q] == '-' || s[q] == '+')) *rsign = s[q++];
    if (q + 2 > n || s[q] != '%' || s[q + 1] != '}') return 0;
    return q + 2;
}

bool jx_lex(jx_arena *a, const char *src, size_t len, const jinja_options *opt, jx_tok **toks,
            size_t *ntoks, jinja_error *err) {
    /* Normalize \r\n and \r to \n; drop one trailing newline. */
    char *s = jx_arena_alloc(a, len + 1);
    if (!s) {
        err->kind = JINJA_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return false;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[n++] = src[i];
    }
    if (!opt->keep_trailing_newline && n > 0 && s[n - 1] == '\n') n--;
    s[n] = 0;

    lexer L = {.a = a, .s = s, .n = n, .line = 1, .opt = opt, .err = err, .max_tokens = 4u << 20};
    bool line_starting = true;
    while (L.pos < n) {
        /* find the next tag opener */
        size_t p = L.pos, tag = n;
        const char *hit = NULL;
        while (p + 1 < n) {
            hit = memchr(s + p, '{', n - 1 - p);
            if (!hit) break;
            size_t h = (size_t)(hit - s);
            char c = s[h + 1];
            if (c == '{' || c == '%' || c == '#') {
                tag = h;
                break;
            }
            p = h + 1;
        }
        if (tag == n) {
            if (!emit_text(&L, L.pos, n - L.pos)) return false;
            break;
        }
        char kind = s[tag + 1];
        char sign = (tag + 2 < n && (s[tag + 2] == '-' || s[tag + 2] == '+')) ? s[tag + 2] : 0;
        size_t text_from = L.pos, text_len = tag - L.pos;
        if (sign == '-') {
            text_len = rstrip_len(s + text_from, text_len);
        } else if (sign != '+' && opt->lstrip_blocks && kind != '{') {
            size_t l_pos = 0;
            for (size_t i = text_len; i > 0; i--)
                if (s[text_from + i - 1] == '\n') {
                    l_pos = i;
                    break;
                }
            if ((l_pos > 0 || line_starting) && l_pos < text_len) {
                size_t e = skip_uspace(s + text_from, text_len, l_pos);
                if (e == text_len) text_len = l_pos;
            }
        }
        if (!emit_text(&L, text_from, text_len)) return false;
        size_t body = tag + 2 + (sign ? 1 : 0);

        if (kind == '#') {
            size_t q = body;
            const char *e = NULL;
            while (q + 1 < n) {
                e = memchr(s + q, '#', n - 1 - q);
                if (!e) break;
                if (e[1] == '}') break;
                q = (size_t)(e - s) + 1;
                e = NULL;
            }
            if (!e) return lx_fail(&L, tag, "Missing end of comment tag");
            size_t end = (size_t)(e - s);
            char rs = (end > body && (s[end - 1] == '-' || s[end - 1] == '+')) ? s[end - 1] : 0;
            L.pos = end + 2;
            if (rs == '-') L.pos = skip_uspace(s, n, L.pos);
            else if (rs != '+' && opt->trim_blocks && L.pos < n && s[L.pos] == '\n') L.pos++;
            line_starting = s[L.pos - 1] == '\n';
            continue;
        }

        char ls, rs;
        size_t raw_end = kind == '%' ? match_simple_tag(s, n, tag, "raw", &ls, &rs) : 0;
        if (raw_end) {
            size_t cstart = raw_end;
            if (rs == '-') cstart = skip_uspace(s, n, cstart);
            /* find {% endraw %} */
            size_t q = cstart, end_tag = 0, after = 0;
            char els = 0, ers = 0;
            while (q < n) {
                const char *h = memchr(s + q, '{', n - q);
                if (!h) break;
                size_t hp = (size_t)(h - s);
                after = match_simple_tag(s, n, hp, "endraw", &els, &ers);
                if (after) {
                    end_tag = hp;
                    break;
                }
                q = hp + 1;
            }
            if (!after) return lx_fail(&L, tag, "Missing end of raw directive");
            size_t clen = end_tag - cstart;
            if (els == '-') clen = rstrip_len(s + cstart, clen);
            else if (els != '+' && opt->lstrip_blocks) {
                size_t l_pos = 0;
                for (size_t i = clen; i > 0; i--)
                    if (s[cstart + i - 1] == '\n') {
                        l_pos = i;
                        break;
                    }
                if (l_pos > 0 && l_pos < clen && skip_uspace(s + cstart, clen, l_pos) == clen) clen = l_pos;
            }
            if (!emit_text(&L, cstart, clen)) return false;
            L.pos = after;
            if (ers == '-') L.pos = skip_uspace(s, n, L.pos);
            else if (ers != '+' && opt->trim_blocks && L.pos < n && s[L.pos] == '\n') L.pos++;
            line_starting = s[L.pos - 1] == '\n';
            continue;
        }

        bool is_block = kind == '%';
        if (!lx_push(&L, is_block ? T_BLOCK_BEGIN : T_VAR_BEGIN, tag)) return false;
        L.pos = body;
        if (!lex_tag(&L, is_block, tag)) return false;
        line_starting = s[L.pos - 1] == '\n';
    }
    jx_tok *t = lx_push(&L, T_EOF, n);
    if (!t) return false;
    *toks = L.toks;
    *ntoks = L.ntoks;
    return true;
}
