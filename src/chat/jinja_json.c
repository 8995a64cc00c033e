/*
 * jinja_json.c - jansson json_t -> jinja_value.
 *
 * JSON null/true/false/integer/real/string/array/object map to Python
 * None/True/False/int/float/str/list/dict, as json.loads would produce
 * them; object key order is kept (jansson preserves insertion order).
 */
#include "jinja_int.h"

#include <string.h>

#define MAX_JSON_DEPTH 256

/* Untrusted conversion: which strings stay clean. */
typedef struct trust {
    bool untrusted;
    jinja_trust_fn fn;
    void *user;
} trust;

static jinja_value *taint_all(jx_ctx *cx, jinja_value *v) {
    if (!v || v == &jx_empty_str) return v;
    uint8_t *t = jx_arena_alloc(&cx->arena, v->u.str.len);
    if (!t) return jx_fail_oom(cx, NULL);
    memset(t, 1, v->u.str.len);
    v->u.str.taint = t;
    return v;
}

static jinja_value *conv(jx_ctx *cx, const json_t *j, int depth, const trust *tr, const char *key) {
    if (depth > MAX_JSON_DEPTH) return jx_fail(cx, JINJA_ERR_LIMIT, NULL, "JSON input nested deeper than %d", MAX_JSON_DEPTH);
    if (!j) return &jx_none_v;
    switch (json_typeof(j)) {
    case JSON_NULL: return &jx_none_v;
    case JSON_TRUE: return &jx_true_v;
    case JSON_FALSE: return &jx_false_v;
    case JSON_INTEGER: return jv_int(cx, (int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(cx, json_real_value(j));
    case JSON_STRING: {
        const char *s = json_string_value(j);
        size_t n = json_string_length(j);
        jinja_value *v = jv_str_copy(cx, s, n);
        if (v && v != &jx_empty_str) {
            bool ascii = true;
            for (size_t i = 0; i < n && ascii; i++) ascii = (unsigned char)s[i] < 0x80;
            v->is_ascii = ascii;
        }
        if (tr->untrusted && !(tr->fn && key && tr->fn(key, s, n, tr->user))) v = taint_all(cx, v);
        return v;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jinja_value *l = jv_list_new(cx, n);
        if (!l) return NULL;
        for (size_t i = 0; i < n; i++) {
            jinja_value *x = conv(cx, json_array_get(j, i), depth + 1, tr, NULL);
            if (!x) return NULL;
            l->u.list->items[i] = x;
        }
        l->u.list->n = n;
        return l;
    }
    case JSON_OBJECT: {
        jinja_value *d = jv_dict_new(cx, json_object_size(j));
        if (!d) return NULL;
        d->u.dict->keys_tainted = tr->untrusted;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            size_t kl = strlen(k);
            char *kc = jx_arena_strdup(&cx->arena, k, kl);
            if (!kc) return jx_fail_oom(cx, NULL);
            jinja_value *x = conv(cx, v, depth + 1, tr, kc);
            if (!x || !jv_dict_set(cx, d, kc, kl, x)) return NULL;
        }
        return d;
    }
    }
    return &jx_none_v;
}

jinja_value *jinja_from_json(jinja_ctx *c, const json_t *j) {
    trust tr = {0};
    return conv(&c->cx, j, 0, &tr, NULL);
}

jinja_value *jinja_from_json_untrusted(jinja_ctx *c, const json_t *j, jinja_trust_fn trusted, void *user) {
    trust tr = {.untrusted = true, .fn = trusted, .user = user};
    return conv(&c->cx, j, 0, &tr, NULL);
}
