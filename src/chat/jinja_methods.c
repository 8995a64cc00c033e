/*
 * jinja_methods.c - Python methods reachable from templates (str, dict,
 * list), the builtin globals (range, dict, namespace) and string helpers
 * shared with the filters.
 *
 * The environment is Jinja's ImmutableSandboxedEnvironment: methods that
 * would mutate a list or dict raise SecurityError when called.
 *
 * Case mapping covers ASCII, Latin-1, Greek and Cyrillic basic letters;
 * other scripts are left unchanged (Python would map e.g. U+0101).
 */
#include "jinja_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_IS(n, l, s) ((l) == sizeof(s) - 1 && memcmp((n), (s), (l)) == 0)

/* ========================================================================
 * String helpers
 * ====================================================================== */

static uint32_t cp_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if (c == 0xb5) return 0x39c;
    if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
    if (c == 0xff) return 0x178;
    if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
    if (c == 0x3c2) return 0x3a3;
    if (c >= 0x430 && c <= 0x44f) return c - 32;
    if (c >= 0x450 && c <= 0x45f) return c - 80;
    return c;
}

static uint32_t cp_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
    if (c >= 0x410 && c <= 0x42f) return c + 32;
    if (c >= 0x400 && c <= 0x40f) return c + 80;
    return c;
}

static bool cp_cased(uint32_t c) { return cp_upper(c) != c || cp_lower(c) != c; }

static bool cp_alpha(uint32_t c) {
    if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
    return cp_cased(c) || (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3040 && c <= 0x30ff) || (c >= 0xac00 && c <= 0xd7a3);
}

static bool cp_digit(uint32_t c) { return c >= '0' && c <= '9'; }

/* mode: 0 lower, 1 upper, 2 capitalize, 3 Python str.title, 4 Jinja title filter, 5 swapcase */
jinja_value *jx_str_case(jx_ctx *cx, jinja_value *sv, int mode) {
    const char *s = sv->u.str.s;
    size_t n = sv->u.str.len;
    if (n == 0) return sv;
    char *out = jx_arena_alloc(&cx->arena, n * 2 + 4); /* case mapping here never grows beyond 2x */
    if (!out) return jx_fail_oom(cx, NULL);
    size_t i = 0, o = 0;
    bool prev_cased = false;
    bool word_start = true; /* for mode 4 */
    size_t idx = 0;
    while (i < n) {
        uint32_t c = jx_utf8_next(s, n, &i);
        uint32_t r = c;
        switch (mode) {
        case 0: r = cp_lower(c); break;
        case 1: r = cp_upper(c); break;
        case 2: r = idx == 0 ? cp_upper(c) : cp_lower(c); break;
        case 3:
            r = prev_cased ? cp_lower(c) : cp_upper(c);
            prev_cased = cp_cased(c);
            break;
        case 4: {
            bool sep = jx_is_space_cp(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
            if (sep) {
                word_start = true;
                r = c;
            } else {
                r = word_start ? cp_upper(c) : cp_lower(c);
                word_start = false;
            }
            break;
        }
        case 5: r = cp_upper(c) != c ? cp_upper(c) : cp_lower(c); break;
        }
        o += (size_t)jx_utf8_encode(r, out + o);
        idx++;
    }
    jinja_value *v = jv_str_ref(cx, out, o);
    if (v && v != &jx_empty_str) {
        v->is_ascii = sv->is_ascii;
        if (jv_str_tainted(sv)) { /* bytes rewritten: all of the output is tainted */
            uint8_t *t = jx_arena_alloc(&cx->arena, o);
            if (!t) return jx_fail_oom(cx, NULL);
            memset(t, 1, o);
            v->u.str.taint = t;
        }
    }
    return v;
}

static bool in_chars(uint32_t c, const jinja_value *chars) {
    if (!chars) return jx_is_space_cp(c);
    const char *s = chars->u.str.s;
    size_t n = chars->u.str.len, i = 0;
    while (i < n)
        if (jx_utf8_next(s, n, &i) == c) return true;
    return false;
}

jinja_value *jx_str_strip(jx_ctx *cx, jinja_value *sv, jinja_value *chars, bool left, bool right) {
    if (chars && chars->kind == JV_NONE) chars = NULL;
    if (chars && chars->kind != JV_STR)
        return jx_fail(cx, JINJA_ERR_TYPE, NULL, "strip arg must be None or str");
    const char *s = sv->u.str.s;
    size_t n = sv->u.str.len, b = 0, e = n;
    if (left) {
        while (b < n) {
            size_t q = b;
            uint32_t c = jx_utf8_next(s, n, &q);
            if (!in_chars(c, chars)) break;
            b = q;
        }
    }
    if (right) {
        size_t i = b, last = b;
        while (i < n) {
            uint32_t c = jx_utf8_next(s, n, &i);
            if (!in_chars(c, chars)) last = i;
        }
        e = last;
        if (e < b) e = b;
    }
    if (b == 0 && e == n) return sv;
    jinja_value *v = jv_str_sub(cx, sv, b, e - b);
    if (v && v != &jx_empty_str) v->is_ascii = sv->is_ascii;
    return v;
}

jinja_value *jx_str_replace(jx_ctx *cx, jinja_value *sv, jinja_value *old, jinja_value *new_, int64_t count) {
    const char *s = sv->u.str.s;
    const uint8_t *t = sv->u.str.taint, *nt = new_->u.str.taint;
    size_t n = sv->u.str.len, ol = old->u.str.len;
    jx_buf b = {.limit = cx->lim.max_output};
    int64_t done = 0;
    /* kept pieces keep their flags, inserted copies of new_ carry new_'s */
#define PUT_S(from, len) jx_buf_put_t(&b, s + (from), (len), t ? t + (from) : NULL)
    if (ol == 0) {
        /* Python inserts `new` between every character and at both ends */
        size_t i = 0;
        while (count < 0 || done < count) {
            jx_buf_put_t(&b, new_->u.str.s, new_->u.str.len, nt);
            done++;
            if (i >= n) break;
            size_t st = i;
            jx_utf8_next(s, n, &i);
            PUT_S(st, i - st);
        }
        if (i < n) PUT_S(i, n - i);
    } else {
        size_t i = 0;
        while (i < n) {
            const char *hit = (count < 0 || done < count) ? memmem(s + i, n - i, old->u.str.s, ol) : NULL;
            if (!hit) {
                PUT_S(i, n - i);
                break;
            }
            size_t h = (size_t)(hit - s);
            PUT_S(i, h - i);
            jx_buf_put_t(&b, new_->u.str.s, new_->u.str.len, nt);
            i = h + ol;
            done++;
        }
    }
#undef PUT_S
    if (b.failed) {
        bool lim = b.over_limit;
        jx_buf_free(&b);
        return lim ? jx_fail(cx, JINJA_ERR_LIMIT, NULL, "string too large") : jx_fail_oom(cx, NULL);
    }
    jinja_value *r = jv_str_from_buf(cx, &b);
    jx_buf_free(&b);
    return r;
}

/* ========================================================================
 * str methods
 * ====================================================================== */

static jinja_value *need_str(jx_ctx *cx, jinja_value *v, const char *fname, const jx_node *at) {
    if (v && v->kind == JV_STR) return v;
    if (v && v->kind == JV_UNDEF) return jx_fail_undef(cx, v, at);
    return jx_fail(cx, JINJA_ERR_TYPE, at, "%s() argument must be str, not %s", fname, v ? jv_type_name(v) : "nothing");
}

static jinja_value *m_affix(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at, bool prefix) {
    const char *fname = prefix ? "startswith" : "endswith";
    if (!jx_args_check(cx, a, 3, NULL, fname, at)) return NULL;
    jinja_value *p = jx_arg(a, 0, NULL);
    if (!p) return jx_fail(cx, JINJA_ERR_TYPE, at, "%s() takes at least 1 argument (0 given)", fname);
    if (a->npos > 1) return jx_fail(cx, JINJA_ERR_UNSUPPORTED, at, "%s() with start/end is not supported", fname);
    jinja_value **cands = &p;
    size_t nc = 1;
    if (p->kind == JV_LIST && p->is_tuple) {
        cands = p->u.list->items;
        nc = p->u.list->n;
    }
    for (size_t k = 0; k < nc; k++) {
        jinja_value *c = cands[k];
        if (c->kind != JV_STR)
            return jx_fail(cx, JINJA_ERR_TYPE, at, "%s first arg must be str or a tuple of str, not %s", fname,
                           jv_type_name(c));
        size_t l = c->u.str.len, n = self->u.str.len;
        if (l > n) continue;
        const char *s = prefix ? self->u.str.s : self->u.str.s + n - l;
        if (memcmp(s, c->u.str.s, l) == 0) return &jx_true_v;
    }
    return &jx_false_v;
}
static jinja_value *m_startswith(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return m_affix(cx, self, a, at, true);
}
static jinja_value *m_endswith(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return m_affix(cx, self, a, at, false);
}

static jinja_value *m_strip_common(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at, bool l, bool r) {
    if (!jx_args_check(cx, a, 1, NULL, "strip", at)) return NULL;
    jinja_value *ch = jx_arg(a, 0, NULL);
    if (ch && ch->kind == JV_UNDEF) return jx_fail_undef(cx, ch, at);
    jinja_value *v = jx_str_strip(cx, self, ch, l, r);
    if (!v && cx->failed && cx->err.line == 0) {
        cx->err.line = at->line;
        cx->err.col = at->col;
    }
    return v;
}
static jinja_value *m_strip(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return m_strip_common(cx, self, a, at, true, true);
}
static jinja_value *m_lstrip(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return m_strip_common(cx, self, a, at, true, false);
}
static jinja_value *m_rstrip(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return m_strip_common(cx, self, a, at, false, true);
}

static bool get_int_arg(jx_ctx *cx, jinja_value *v, int64_t *out, const jx_node *at) {
    if (!v || v->kind == JV_NONE) return true;
    if (v->kind == JV_INT) *out = v->u.i;
    else if (v->kind == JV_BOOL) *out = v->u.b;
    else {
        jx_fail(cx, JINJA_ERR_TYPE, at, "'%s' object cannot be interpreted as an integer", jv_type_name(v));
        return false;
    }
    return true;
}

static jinja_value *split_impl(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at, bool from_right) {
    static const char *const kw[] = {"sep", "maxsplit", NULL};
    if (!jx_args_check(cx, a, 2, kw, from_right ? "rsplit" : "split", at)) return NULL;
    jinja_value *sep = jx_arg(a, 0, "sep");
    int64_t maxsplit = -1;
    if (!get_int_arg(cx, jx_arg(a, 1, "maxsplit"), &maxsplit, at)) return NULL;
    if (sep && sep->kind == JV_NONE) sep = NULL;
    if (sep && sep->kind != JV_STR) return jx_fail(cx, JINJA_ERR_TYPE, at, "must be str or None, not %s", jv_type_name(sep));
    if (sep && sep->u.str.len == 0) return jx_fail(cx, JINJA_ERR_VALUE, at, "empty separator");
    const char *s = self->u.str.s;
    size_t n = self->u.str.len;
    jinja_value *out = jv_list_new(cx, 4);
    if (!out) return NULL;
    /* collect [b,e) pieces in order (for rsplit collected reversed, then flipped) */
    if (sep) {
        const char *p = sep->u.str.s;
        size_t pl = sep->u.str.len;
        if (!from_right) {
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(s + i, n - i, p, pl) : NULL;
                if (!hit) {
                    if (!jv_list_push(cx, out, jv_str_sub(cx, self, i, n - i))) return NULL;
                    break;
                }
                size_t h = (size_t)(hit - s);
                if (!jv_list_push(cx, out, jv_str_sub(cx, self, i, h - i))) return NULL;
                i = h + pl;
                done++;
                if (!jx_count_iter(cx, 1, at)) return NULL;
            }
        } else {
            size_t e = n;
            int64_t done = 0;
            for (;;) {
                /* find last occurrence of p ending at or before e */
                ptrdiff_t h = -1;
                if ((maxsplit < 0 || done < maxsplit) && e >= pl)
                    for (size_t k = e - pl + 1; k-- > 0;)
                        if (memcmp(s + k, p, pl) == 0) {
                            h = (ptrdiff_t)k;
                            break;
                        }
                if (h < 0) {
                    if (!jv_list_push(cx, out, jv_str_sub(cx, self, 0, e))) return NULL;
                    break;
                }
                if (!jv_list_push(cx, out, jv_str_sub(cx, self, h + pl, e - (size_t)h - pl))) return NULL;
                e = (size_t)h;
                done++;
                if (!jx_count_iter(cx, 1, at)) return NULL;
            }
        }
    } else {
        /* runs of whitespace; leading/trailing ignored */
        if (!from_right) {
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                while (i < n) {
                    size_t q = i;
                    if (!jx_is_space_cp(jx_utf8_next(s, n, &q))) break;
                    i = q;
                }
                if (i >= n) break;
                if (maxsplit >= 0 && done >= maxsplit) {
                    /* rest, with trailing whitespace stripped? Python keeps it for split(None, k) */
                    size_t e = n;
                    if (!jv_list_push(cx, out, jv_str_sub(cx, self, i, e - i))) return NULL;
                    break;
                }
                size_t b = i;
                while (i < n) {
                    size_t q = i;
                    if (jx_is_space_cp(jx_utf8_next(s, n, &q))) break;
                    i = q;
                }
                if (!jv_list_push(cx, out, jv_str_sub(cx, self, b, i - b))) return NULL;
                done++;
                if (!jx_count_iter(cx, 1, at)) return NULL;
            }
        } else {
            /* rsplit(None): operate on code point offsets from the right */
            size_t nc;
            size_t *off = jx_utf8_offsets(cx, s, n, &nc);
            if (!off) return jx_fail_oom(cx, at);
            int64_t k = (int64_t)nc;
            int64_t done = 0;
            for (;;) {
                while (k > 0) {
                    size_t q = off[k - 1];
                    if (!jx_is_space_cp(jx_utf8_next(s, n, &q))) break;
                    k--;
                }
                if (k <= 0) break;
                if (maxsplit >= 0 && done >= maxsplit) {
                    if (!jv_list_push(cx, out, jv_str_sub(cx, self, 0, off[k]))) return NULL;
                    break;
                }
                int64_t e = k;
                while (k > 0) {
                    size_t q = off[k - 1];
                    if (jx_is_space_cp(jx_utf8_next(s, n, &q))) break;
                    k--;
                }
                if (!jv_list_push(cx, out, jv_str_sub(cx, self, off[k], off[e] - off[k]))) return NULL;
                done++;
                if (!jx_count_iter(cx, 1, at)) return NULL;
            }
        }
    }
    if (from_right) {
        jv_list *l = out->u.list;
        for (size_t i = 0; i < l->n / 2; i++) {
            jinja_value *t = l->items[i];
            l->items[i] = l->items[l->n - 1 - i];
            l->items[l->n - 1 - i] = t;
        }
    }
    for (size_t i = 0; i < out->u.list->n; i++)
        if (!out->u.list->items[i]) return jx_fail_oom(cx, at);
    return out;
}
static jinja_value *m_split(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return split_impl(cx, self, a, at, false);
}
static jinja_value *m_rsplit(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return split_impl(cx, self, a, at, true);
}

static jinja_value *m_splitlines(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    static const char *const kw[] = {"keepends", NULL};
    if (!jx_args_check(cx, a, 1, kw, "splitlines", at)) return NULL;
    jinja_value *ke = jx_arg(a, 0, "keepends");
    bool keep = ke && jv_truthy(ke);
    const char *s = self->u.str.s;
    size_t n = self->u.str.len, i = 0;
    jinja_value *out = jv_list_new(cx, 4);
    if (!out) return NULL;
    while (i < n) {
        size_t b = i, e;
        for (;;) {
            if (i >= n) {
                e = i;
                break;
            }
            if (s[i] == '\n' || s[i] == '\r' || s[i] == '\v' || s[i] == '\f' || (s[i] >= 0x1c && s[i] <= 0x1e)) {
                e = i;
                if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') i++;
                i++;
                break;
            }
            i++;
        }
        if (!jv_list_push(cx, out, jv_str_sub(cx, self, b, (keep ? i : e) - b))) return NULL;
        if (!jx_count_iter(cx, 1, at)) return NULL;
    }
    return out;
}

static jinja_value *m_replace(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    static const char *const kw[] = {"old", "new", "count", NULL};
    if (!jx_args_check(cx, a, 3, kw, "replace", at)) return NULL;
    jinja_value *o = need_str(cx, jx_arg(a, 0, "old"), "replace", at);
    if (!o) return NULL;
    jinja_value *nw = need_str(cx, jx_arg(a, 1, "new"), "replace", at);
    if (!nw) return NULL;
    int64_t count = -1;
    if (!get_int_arg(cx, jx_arg(a, 2, "count"), &count, at)) return NULL;
    return jx_str_replace(cx, self, o, nw, count);
}

static jinja_value *m_upper(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return jx_args_check(cx, a, 0, NULL, "upper", at) ? jx_str_case(cx, self, 1) : NULL;
}
static jinja_value *m_lower(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return jx_args_check(cx, a, 0, NULL, "lower", at) ? jx_str_case(cx, self, 0) : NULL;
}
static jinja_value *m_capitalize(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return jx_args_check(cx, a, 0, NULL, "capitalize", at) ? jx_str_case(cx, self, 2) : NULL;
}
static jinja_value *m_title(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return jx_args_check(cx, a, 0, NULL, "title", at) ? jx_str_case(cx, self, 3) : NULL;
}
static jinja_value *m_swapcase(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return jx_args_check(cx, a, 0, NULL, "swapcase", at) ? jx_str_case(cx, self, 5) : NULL;
}

/* Byte offset -> code point index. */
static int64_t cp_index(const jinja_value *s, size_t byte_off) {
    return s->is_ascii ? (int64_t)byte_off : (int64_t)jx_utf8_len(s->u.str.s, byte_off);
}

static jinja_value *find_impl(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at, bool rev, bool raise) {
    const char *fname = raise ? (rev ? "rindex" : "index") : (rev ? "rfind" : "find");
    if (!jx_args_check(cx, a, 1, NULL, fname, at)) return NULL;
    jinja_value *sub = need_str(cx, jx_arg(a, 0, NULL), fname, at);
    if (!sub) return NULL;
    const char *s = self->u.str.s;
    size_t n = self->u.str.len, l = sub->u.str.len;
    ptrdiff_t h = -1;
    if (!rev) {
        const char *p = l == 0 ? s : memmem(s, n, sub->u.str.s, l);
        if (p) h = p - s;
    } else if (l <= n) {
        for (size_t k = n - l + 1; k-- > 0;)
            if (memcmp(s + k, sub->u.str.s, l) == 0) {
                h = (ptrdiff_t)k;
                break;
            }
    }
    if (h < 0) {
        if (raise) return jx_fail(cx, JINJA_ERR_VALUE, at, "substring not found");
        return jv_int(cx, -1);
    }
    return jv_int(cx, cp_index(self, (size_t)h));
}
static jinja_value *m_find(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return find_impl(cx, self, a, at, false, false);
}
static jinja_value *m_rfind(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return find_impl(cx, self, a, at, true, false);
}
static jinja_value *m_sindex(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    return find_impl(cx, self, a, at, false, true);
}

static jinja_value *m_scount(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    if (!jx_args_check(cx, a, 1, NULL, "count", at)) return NULL;
    jinja_value *sub = need_str(cx, jx_arg(a, 0, NULL), "count", at);
    if (!sub) return NULL;
    const char *s = self->u.str.s;
    size_t n = self->u.str.len, l = sub->u.str.len;
    if (l == 0) return jv_int(cx, cp_index(self, n) + 1);
    int64_t c = 0;
    size_t i = 0;
    const char *p;
    while (i <= n && (p = memmem(s + i, n - i, sub->u.str.s, l)) != NULL) {
        c++;
        i = (size_t)(p - s) + l;
    }
    return jv_int(cx, c);
}

static jinja_value *m_sjoin(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    if (!jx_args_check(cx, a, 1, NULL, "join", at)) return NULL;
    jinja_value *seq = jx_arg(a, 0, NULL);
    if (!seq) return jx_fail(cx, JINJA_ERR_TYPE, at, "join() takes exactly one argument (0 given)");
    jinja_value **items;
    size_t n;
    if (!jv_iterate(cx, seq, &items, &n, at)) return NULL;
    jx_buf b = {.limit = cx->lim.max_output};
    for (size_t i = 0; i < n; i++) {
        if (items[i]->kind != JV_STR) {
            jx_buf_free(&b);
            return jx_fail(cx, JINJA_ERR_TYPE, at, "sequence item %zu: expected str instance, %s found", i,
                           jv_type_name(items[i]));
        }
        if (i) jx_buf_put_t(&b, self->u.str.s, self->u.str.len, self->u.str.taint);
        jx_buf_put_t(&b, items[i]->u.str.s, items[i]->u.str.len, items[i]->u.str.taint);
    }
    jinja_value *r = b.failed ? jx_fail(cx, JINJA_ERR_LIMIT, at, "string too large") : jv_str_from_buf(cx, &b);
    jx_buf_free(&b);
    return r;
}

static jinja_value *str_pred(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at, int kind) {
    if (!jx_args_check(cx, a, 0, NULL, "is...", at)) return NULL;
    const char *s = self->u.str.s;
    size_t n = self->u.str.len, i = 0;
    if (n == 0) return &jx_false_v;
    bool any_cased = false;
    while (i < n) {
        uint32_t c = jx_utf8_next(s, n, &i);
        switch (kind) {
        case 0: if (!cp_digit(c)) return &jx_false_v; break;
        case 1: if (!cp_alpha(c)) return &jx_false_v; break;
        case 2: if (!cp_alpha(c) && !cp_digit(c)) return &jx_false_v; break;
        case 3: if (!jx_is_space_cp(c)) return &jx_false_v; break;
        case 4: if (cp_lower(c) != c) return &jx_false_v; if (cp_cased(c)) any_cased = true; break;
        case 5: if (cp_upper(c) != c) return &jx_false_v; if (cp_cased(c)) any_cased = true; break;
        }
    }
    return (kind >= 4 && !any_cased) ? &jx_false_v : &jx_true_v;
}
static jinja_value *m_isdigit(jx_ctx *cx, jinja_value *s, jx_args *a, const jx_node *at) { return str_pred(cx, s, a, at, 0); }
static jinja_value *m_isalpha(jx_ctx *cx, jinja_value *s, jx_args *a, const jx_node *at) { return str_pred(cx, s, a, at, 1); }
static jinja_value *m_isalnum(jx_ctx *cx, jinja_value *s, jx_args *a, const jx_node *at) { return str_pred(cx, s, a, at, 2); }
static jinja_value *m_isspace(jx_ctx *cx, jinja_value *s, jx_args *a, const jx_node *at) { return str_pred(cx, s, a, at, 3); }
static jinja_value *m_islower(jx_ctx *cx, jinja_value *s, jx_args *a, const jx_node *at) { return str_pred(cx, s, a, at, 4); }
static jinja_value *m_isupper(jx_ctx *cx, jinja_value *s, jx_args *a, const jx_node *at) { return str_pred(cx, s, a, at, 5); }

/* str.format with {} / {0} / {name} fields and {{ }} escapes; no format specs. */
static jinja_value *m_format(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    const char *s = self->u.str.s;
    const uint8_t *t = self->u.str.taint; /* literal text keeps its flags */
    size_t n = self->u.str.len;
    jx_buf b = {.limit = cx->lim.max_output};
    size_t auto_idx = 0;
    jinja_value *r = NULL;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '{' && i + 1 < n && s[i + 1] == '{') {
            jx_buf_put_t(&b, s + i, 1, t ? t + i : NULL);
            i++;
        } else if (c == '}' && i + 1 < n && s[i + 1] == '}') {
            jx_buf_put_t(&b, s + i, 1, t ? t + i : NULL);
            i++;
        } else if (c == '{') {
            size_t j = i + 1;
            while (j < n && s[j] != '}') j++;
            if (j >= n) {
                jx_fail(cx, JINJA_ERR_VALUE, at, "Single '{' encountered in format string");
                goto out;
            }
            const char *f = s + i + 1;
            size_t fl = j - i - 1;
            if (memchr(f, ':', fl) || memchr(f, '!', fl) || memchr(f, '.', fl) || memchr(f, '[', fl)) {
                jx_fail(cx, JINJA_ERR_UNSUPPORTED, at, "format specs/conversions in str.format are not supported");
                goto out;
            }
            jinja_value *v = NULL;
            if (fl == 0) v = auto_idx < a->npos ? a->pos[auto_idx++] : NULL;
            else if (f[0] >= '0' && f[0] <= '9') {
                size_t k = (size_t)atoi(f);
                v = k < a->npos ? a->pos[k] : NULL;
            } else {
                for (size_t k = 0; k < a->nkw; k++)
                    if (strlen(a->kwn[k]) == fl && memcmp(a->kwn[k], f, fl) == 0) v = a->kwv[k];
                if (!v) {
                    jx_fail(cx, JINJA_ERR_TYPE, at, "KeyError: '%.*s'", (int)fl, f);
                    goto out;
                }
            }
            if (!v) {
                jx_fail(cx, JINJA_ERR_TYPE, at, "Replacement index out of range for positional args tuple");
                goto out;
            }
            jv_write_str(&b, v);
            i = j;
        } else if (c == '}') {
            jx_fail(cx, JINJA_ERR_VALUE, at, "Single '}' encountered in format string");
            goto out;
        } else jx_buf_put_t(&b, s + i, 1, t ? t + i : NULL);
    }
    r = b.failed ? jx_fail(cx, JINJA_ERR_LIMIT, at, "string too large") : jv_str_from_buf(cx, &b);
out:
    jx_buf_free(&b);
    return r;
}

/* ========================================================================
 * dict / list methods
 * ====================================================================== */

static jinja_value *m_items(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    if (!jx_args_check(cx, a, 0, NULL, "items", at)) return NULL;
    const jv_dict *d = self->u.dict;
    jinja_value *out = jv_list_new(cx, d->n);
    if (!out) return NULL;
    for (size_t i = 0; i < d->n; i++) {
        jinja_value *t = jv_list_new(cx, 2);
        jinja_value *k = jv_dict_key(cx, self, i);
        if (!t || !k) return NULL;
        t->is_tuple = 1;
        t->u.list->items[0] = k;
        t->u.list->items[1] = d->vals[i];
        t->u.list->n = 2;
        out->u.list->items[i] = t;
    }
    out->u.list->n = d->n;
    return out;
}

static jinja_value *m_keys(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    if (!jx_args_check(cx, a, 0, NULL, "keys", at)) return NULL;
    const jv_dict *d = self->u.dict;
    jinja_value *out = jv_list_new(cx, d->n);
    if (!out) return NULL;
    for (size_t i = 0; i < d->n; i++)
        if (!(out->u.list->items[i] = jv_dict_key(cx, self, i))) return NULL;
    out->u.list->n = d->n;
    return out;
}

static jinja_value *m_values(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    if (!jx_args_check(cx, a, 0, NULL, "values", at)) return NULL;
    const jv_dict *d = self->u.dict;
    jinja_value *out = jv_list_new(cx, d->n);
    if (!out) return NULL;
    if (d->n) memcpy(out->u.list->items, d->vals, d->n * sizeof(jinja_value *));
    out->u.list->n = d->n;
    return out;
}

static jinja_value *m_get(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    if (!jx_args_check(cx, a, 2, NULL, "get", at)) return NULL;
    jinja_value *k = jx_arg(a, 0, NULL);
    if (!k) return jx_fail(cx, JINJA_ERR_TYPE, at, "get expected at least 1 argument, got 0");
    jinja_value *def = jx_arg(a, 1, NULL);
    jinja_value *v = k->kind == JV_STR ? jv_dict_get(self, k->u.str.s, k->u.str.len) : NULL;
    return v ? v : def ? def : &jx_none_v;
}

static jinja_value *m_copy(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    (void)cx;
    (void)a;
    (void)at;
    return self; /* values are immutable in the sandbox */
}

static jinja_value *m_unsafe(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    (void)a;
    return jx_fail(cx, JINJA_ERR_SECURITY, at, "access to attribute of '%s' object is unsafe (immutable sandbox)",
                   jv_type_name(self));
}

static jinja_value *m_lindex(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    if (!jx_args_check(cx, a, 1, NULL, "index", at)) return NULL;
    jinja_value *x = jx_arg(a, 0, NULL);
    if (!x) return jx_fail(cx, JINJA_ERR_TYPE, at, "index expected at least 1 argument, got 0");
    for (size_t i = 0; i < self->u.list->n; i++)
        if (jv_equal(self->u.list->items[i], x)) return jv_int(cx, (int64_t)i);
    return jx_fail(cx, JINJA_ERR_VALUE, at, "value is not in list");
}

static jinja_value *m_lcount(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    if (!jx_args_check(cx, a, 1, NULL, "count", at)) return NULL;
    jinja_value *x = jx_arg(a, 0, NULL);
    if (!x) return jx_fail(cx, JINJA_ERR_TYPE, at, "count() takes exactly one argument (0 given)");
    int64_t c = 0;
    for (size_t i = 0; i < self->u.list->n; i++) c += jv_equal(self->u.list->items[i], x);
    return jv_int(cx, c);
}

typedef struct method_entry {
    const char *name;
    jx_fn fn;
} method_entry;

static const method_entry str_methods[] = {
    {"startswith", m_startswith}, {"endswith", m_endswith}, {"strip", m_strip},     {"lstrip", m_lstrip},
    {"rstrip", m_rstrip},         {"split", m_split},       {"rsplit", m_rsplit},   {"splitlines", m_splitlines},
    {"replace", m_replace},       {"upper", m_upper},       {"lower", m_lower},     {"capitalize", m_capitalize},
    {"title", m_title},           {"swapcase", m_swapcase}, {"find", m_find},       {"rfind", m_rfind},
    {"index", m_sindex},          {"count", m_scount},      {"join", m_sjoin},      {"isdigit", m_isdigit},
    {"isalpha", m_isalpha},       {"isalnum", m_isalnum},   {"isspace", m_isspace}, {"islower", m_islower},
    {"isupper", m_isupper},       {"format", m_format},     {NULL, NULL},
};

static const method_entry dict_methods[] = {
    {"items", m_items},    {"keys", m_keys},       {"values", m_values},   {"get", m_get},
    {"copy", m_copy},      {"pop", m_unsafe},      {"popitem", m_unsafe},  {"setdefault", m_unsafe},
    {"update", m_unsafe},  {"clear", m_unsafe},    {NULL, NULL},
};

static const method_entry list_methods[] = {
    {"index", m_lindex},    {"count", m_lcount},  {"copy", m_copy},       {"append", m_unsafe},
    {"extend", m_unsafe},   {"insert", m_unsafe}, {"pop", m_unsafe},      {"remove", m_unsafe},
    {"sort", m_unsafe},     {"reverse", m_unsafe}, {"clear", m_unsafe},   {NULL, NULL},
};

jinja_value *jx_method_lookup(jx_ctx *cx, jinja_value *obj, const char *name, size_t nlen) {
    const method_entry *tab = NULL;
    if (obj->kind == JV_STR) tab = str_methods;
    else if (obj->kind == JV_DICT) tab = dict_methods;
    else if (obj->kind == JV_LIST) tab = list_methods;
    if (!tab) return NULL;
    for (const method_entry *e = tab; e->name; e++)
        if (strlen(e->name) == nlen && memcmp(e->name, name, nlen) == 0) return jv_func(cx, e->fn, obj, e->name);
    return NULL;
}

/* ========================================================================
 * printf-style formatting: 'fmt' % args and the format filter
 * ====================================================================== */

/* Supports %s %r %d %i %f %x %X %% with optional flags "-0+ ", width, .precision
 * and %(name)s keys when args is a dict; enough for chat templates. */
jinja_value *jx_percent_format(jx_ctx *cx, jinja_value *fmt, jinja_value *args, const jx_node *at) {
    jinja_value *single[1];
    jinja_value **av = single;
    size_t na = 1, ai = 0;
    bool dict = args->kind == JV_DICT;
    if (args->kind == JV_LIST && args->is_tuple) {
        av = args->u.list->items;
        na = args->u.list->n;
    } else single[0] = args;
    const char *s = fmt->u.str.s;
    const uint8_t *t = fmt->u.str.taint; /* literal text keeps its flags */
    size_t n = fmt->u.str.len;
    jx_buf b = {.limit = cx->lim.max_output};
    jinja_value *r = NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            jx_buf_put_t(&b, s + i, 1, t ? t + i : NULL);
            continue;
        }
        if (++i >= n) {
            jx_fail(cx, JINJA_ERR_VALUE, at, "incomplete format");
            goto out;
        }
        if (s[i] == '%') {
            jx_buf_putc(&b, '%');
            continue;
        }
        jinja_value *v = NULL;
        if (s[i] == '(') {
            size_t j = i + 1;
            while (j < n && s[j] != ')') j++;
            if (j >= n || !dict) {
                jx_fail(cx, JINJA_ERR_TYPE, at, "format requires a mapping");
                goto out;
            }
            v = jv_dict_get(args, s + i + 1, j - i - 1);
            if (!v) {
                jx_fail(cx, JINJA_ERR_TYPE, at, "KeyError: '%.*s'", (int)(j - i - 1), s + i + 1);
                goto out;
            }
            i = j + 1;
        }
        /* flags, width, precision: the numbers are parsed (saturating) and
         * checked against the output budget before anything is formatted,
         * so '%999999999d' costs an error, not a gigabyte (the template is
         * untrusted input) */
        char flags[8];
        size_t nf = 0;
        while (i < n && strchr("-0+ ", s[i]) && nf < sizeof flags - 1) flags[nf++] = s[i++];
        flags[nf] = 0;
        size_t width = 0, prec = 0;
        bool has_prec = false;
        while (i < n && s[i] >= '0' && s[i] <= '9') width = width > SIZE_MAX / 20 ? SIZE_MAX / 2 : width * 10 + (size_t)(s[i++] - '0');
        if (i < n && s[i] == '.') {
            has_prec = true;
            i++;
            while (i < n && s[i] >= '0' && s[i] <= '9') prec = prec > SIZE_MAX / 20 ? SIZE_MAX / 2 : prec * 10 + (size_t)(s[i++] - '0');
        }
        if (i >= n) {
            jx_fail(cx, JINJA_ERR_VALUE, at, "incomplete format");
            goto out;
        }
        size_t budget = b.limit ? b.limit : cx->lim.max_memory ? cx->lim.max_memory : SIZE_MAX / 2;
        size_t room = budget > b.n ? budget - b.n : 0;
        if (width > room || (has_prec && prec > room && s[i] != 's' && s[i] != 'r')) {
            jx_fail(cx, JINJA_ERR_LIMIT, at, "format width or precision larger than the output limit of %zu bytes",
                    budget);
            goto out;
        }
        char spec[64] = "%", num[24] = ""; /* "%" flags(7) width(20) "." prec(20) "ll" conv NUL */
        if (width) snprintf(num, sizeof num, "%zu", width);
        if (has_prec) snprintf(spec, sizeof spec, "%%%s%s.%zu", flags, num, prec);
        else snprintf(spec, sizeof spec, "%%%s%s", flags, num);
        size_t sl = strlen(spec);
        char conv = s[i];
        if (!v) {
            if (ai >= na || dict) {
                jx_fail(cx, JINJA_ERR_TYPE, at, "not enough arguments for format string");
                goto out;
            }
            v = av[ai++];
        }
        if (conv == 's' || conv == 'r') {
            /* Python's semantics: the precision cuts and the width pads in
             * characters (code points), not bytes */
            jx_buf tmp = {.limit = cx->lim.max_output};
            if (conv == 's') jv_write_str(&tmp, v);
            else jv_write_repr(&tmp, v);
            const char *tp = tmp.p ? tmp.p : "";
            size_t keep = tmp.n, chars = 0;
            for (size_t k = 0; k < tmp.n; chars++) {
                if (has_prec && chars == prec) {
                    keep = k;
                    break;
                }
                jx_utf8_next(tp, tmp.n, &k);
            }
            size_t pad = width > chars ? width - chars : 0;
            bool left = strchr(flags, '-') != NULL;
            size_t from = b.n;
            for (size_t k = 0; !left && k < pad; k++) jx_buf_putc(&b, ' ');
            jx_buf_put(&b, tp, keep);
            for (size_t k = 0; left && k < pad; k++) jx_buf_putc(&b, ' ');
            if (tmp.t) jx_buf_taint_from(&b, from); /* padded: the whole field */
            jx_buf_free(&tmp);
        } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X') {
            int64_t x;
            if (v->kind == JV_INT) x = v->u.i;
            else if (v->kind == JV_BOOL) x = v->u.b;
            else if (v->kind == JV_FLOAT && v->u.f > -9.2e18 && v->u.f < 9.2e18) x = (int64_t)v->u.f;
            else {
                jx_fail(cx, JINJA_ERR_TYPE, at, "%%%c format: a real number is required, not %s", conv, jv_type_name(v));
                goto out;
            }
            spec[sl++] = 'l';
            spec[sl++] = 'l';
            spec[sl++] = conv == 'i' ? 'd' : conv;
            spec[sl] = 0;
            jx_buf_printf(&b, spec, (long long)x);
        } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'g') {
            double x;
            if (v->kind == JV_FLOAT) x = v->u.f;
            else if (v->kind == JV_INT) x = (double)v->u.i;
            else if (v->kind == JV_BOOL) x = v->u.b;
            else {
                jx_fail(cx, JINJA_ERR_TYPE, at, "must be real number, not %s", jv_type_name(v));
                goto out;
            }
            spec[sl++] = conv;
            spec[sl] = 0;
            jx_buf_printf(&b, spec, x);
        } else {
            jx_fail(cx, JINJA_ERR_VALUE, at, "unsupported format character '%c'", conv);
            goto out;
        }
    }
    if (!dict && ai < na) {
        jx_fail(cx, JINJA_ERR_TYPE, at, "not all arguments converted during string formatting");
        goto out;
    }
    r = b.failed ? jx_fail(cx, JINJA_ERR_LIMIT, at, "string too large") : jv_str_from_buf(cx, &b);
out:
    jx_buf_free(&b);
    return r;
}

/* ========================================================================
 * Builtin globals
 * ====================================================================== */

static jinja_value *g_range(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    (void)self;
    if (!jx_args_check(cx, a, 3, NULL, "range", at)) return NULL;
    int64_t start = 0, stop = 0, step = 1;
    for (size_t i = 0; i < a->npos; i++)
        if (a->pos[i]->kind != JV_INT && a->pos[i]->kind != JV_BOOL)
            return jx_fail(cx, JINJA_ERR_TYPE, at, "'%s' object cannot be interpreted as an integer",
                           jv_type_name(a->pos[i]));
    if (a->npos == 0) return jx_fail(cx, JINJA_ERR_TYPE, at, "range expected at least 1 argument, got 0");
    if (a->npos == 1) get_int_arg(cx, a->pos[0], &stop, at);
    else {
        get_int_arg(cx, a->pos[0], &start, at);
        get_int_arg(cx, a->pos[1], &stop, at);
        if (a->npos == 3) get_int_arg(cx, a->pos[2], &step, at);
    }
    if (step == 0) return jx_fail(cx, JINJA_ERR_VALUE, at, "range() arg 3 must not be zero");
    uint64_t count = 0;
    if (step > 0 && start < stop) count = ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
    if (step < 0 && start > stop) count = ((uint64_t)start - (uint64_t)stop - 1) / ((uint64_t)0 - (uint64_t)step) + 1;
    /* Jinja's sandbox caps range() at MAX_RANGE = 100000 items */
    if (count > 100000)
        return jx_fail(cx, JINJA_ERR_SECURITY, at, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    if (!jx_count_iter(cx, count, at)) return NULL;
    jinja_value *out = jv_list_new(cx, (size_t)count);
    if (!out) return NULL;
    int64_t v = start;
    for (uint64_t k = 0; k < count; k++) {
        if (!(out->u.list->items[k] = jv_int(cx, v))) return NULL;
        /* step to the next element only when there is one: it lies in the
         * range, so this never overflows (range(1, 2, 2**63-1) would) */
        if (k + 1 < count) v += step;
    }
    out->u.list->n = (size_t)count;
    return out;
}

static bool merge_kwargs(jx_ctx *cx, jinja_value *d, jx_args *a, const jx_node *at, const char *fname) {
    if (a->npos > 1) {
        jx_fail(cx, JINJA_ERR_TYPE, at, "%s expected at most 1 positional argument, got %zu", fname, a->npos);
        return false;
    }
    if (a->npos == 1) {
        jinja_value *src = a->pos[0];
        if (src->kind == JV_DICT || src->kind == JV_NS) {
            if (src->u.dict->keys_tainted) d->u.dict->keys_tainted = true;
            for (size_t i = 0; i < src->u.dict->n; i++)
                if (!jv_dict_set(cx, d, src->u.dict->keys[i], src->u.dict->klen[i], src->u.dict->vals[i])) return false;
        } else if (src->kind == JV_LIST) {
            for (size_t i = 0; i < src->u.list->n; i++) {
                jinja_value *p = src->u.list->items[i];
                if (p->kind != JV_LIST || p->u.list->n != 2 || p->u.list->items[0]->kind != JV_STR) {
                    jx_fail(cx, JINJA_ERR_TYPE, at, "%s: sequence elements must be (str, value) pairs", fname);
                    return false;
                }
                jinja_value *k = p->u.list->items[0];
                if (!jv_dict_set_v(cx, d, k, p->u.list->items[1])) return false;
            }
        } else if (src->kind != JV_UNDEF) {
            jx_fail(cx, JINJA_ERR_TYPE, at, "'%s' object is not iterable", jv_type_name(src));
            return false;
        }
    }
    for (size_t i = 0; i < a->nkw; i++)
        if (!jv_dict_set(cx, d, a->kwn[i], strlen(a->kwn[i]), a->kwv[i])) return false;
    return true;
}

static jinja_value *g_dict(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    (void)self;
    jinja_value *d = jv_dict_new(cx, a->nkw);
    if (!d || !merge_kwargs(cx, d, a, at, "dict")) return NULL;
    return d;
}

static jinja_value *g_namespace(jx_ctx *cx, jinja_value *self, jx_args *a, const jx_node *at) {
    (void)self;
    jinja_value *d = jv_dict_new(cx, a->nkw);
    if (!d || !merge_kwargs(cx, d, a, at, "namespace")) return NULL;
    d->kind = JV_NS;
    return d;
}

static jinja_value g_range_v = {.kind = JV_FUNC, .u.func = {g_range, NULL, "range"}};
static jinja_value g_dict_v = {.kind = JV_FUNC, .u.func = {g_dict, NULL, "dict"}};
static jinja_value g_namespace_v = {.kind = JV_FUNC, .u.func = {g_namespace, NULL, "namespace"}};

jinja_value *jx_builtin_global(const char *name, size_t nlen) {
    if (NAME_IS(name, nlen, "range")) return &g_range_v;
    if (NAME_IS(name, nlen, "dict")) return &g_dict_v;
    if (NAME_IS(name, nlen, "namespace")) return &g_namespace_v;
    return NULL;
}
