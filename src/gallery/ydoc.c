/*
 * ydoc.c - libyaml document loading, strict accessors and emitting.
 */
#include "ydoc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base.h"

#define YDOC_MAX_MERGE_DEPTH 8
/* Key comparisons and merged pairs, summed over every mapping read from
 * one document: a bound on the whole document's cost, whatever its shape
 * (gallery/index.yaml takes 810 to parse; test_gallery prints it). */
#define YDOC_MAX_WORK (64ull << 20)
#define YDOC_MAX_EMIT_DEPTH 32
#define YDOC_MAX_EMIT_NODES 100000

bool ydoc_load(ydoc *d, const char *buf, size_t len, const char *what, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    snprintf(d->what, sizeof d->what, "%s", what ? what : "(yaml)");
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return bd_err(err, errlen, "%s: out of memory", d->what);
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&p, &d->doc)) {
        bd_err(err, errlen, "%s:%zu: YAML error: %s%s%s", d->what, p.problem_mark.line + 1,
               p.problem ? p.problem : "syntax error", p.context ? " " : "",
               p.context ? p.context : "");
        yaml_parser_delete(&p);
        return false;
    }
    yaml_parser_delete(&p);
    d->loaded = true;
    return true;
}

void ydoc_free(ydoc *d) {
    if (d->loaded) yaml_document_delete(&d->doc);
    d->loaded = false;
}

yaml_node_t *ydoc_root(ydoc *d) { return d->loaded ? yaml_document_get_root_node(&d->doc) : NULL; }

bool ydoc_is_map(const yaml_node_t *n) { return n && n->type == YAML_MAPPING_NODE; }
bool ydoc_is_seq(const yaml_node_t *n) { return n && n->type == YAML_SEQUENCE_NODE; }
bool ydoc_is_scalar(const yaml_node_t *n) { return n && n->type == YAML_SCALAR_NODE; }

const char *ydoc_str(const yaml_node_t *n) {
    if (!ydoc_is_scalar(n)) return NULL;
    const char *s = (const char *)n->data.scalar.value;
    if (strlen(s) != n->data.scalar.length) return NULL; /* embedded NUL */
    return s;
}

bool ydoc_is_null(const yaml_node_t *n) {
    if (!n) return true;
    if (!ydoc_is_scalar(n) || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
    const char *s = ydoc_str(n);
    return s && (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
                 !strcmp(s, "NULL"));
}

int ydoc_seq_len(ydoc *d, const yaml_node_t *n) {
    (void)d;
    if (!ydoc_is_seq(n)) return 0;
    return (int)(n->data.sequence.items.top - n->data.sequence.items.start);
}

yaml_node_t *ydoc_seq_at(ydoc *d, const yaml_node_t *n, int i) {
    if (i < 0 || i >= ydoc_seq_len(d, n)) return NULL;
    return yaml_document_get_node(&d->doc, n->data.sequence.items.start[i]);
}

/* ------------------------------------------------------------------------
 * Mappings with merge keys
 * ---------------------------------------------------------------------- */

typedef struct entry_vec {
    ydoc_entry *v;
    int n;
    size_t cap;
    /* merge sources already merged into this mapping ([n_nodes] bits,
     * allocated at the first merge): merging one source twice adds
     * nothing, so each is read once -- `<<: [*a, *a, ...]` nested k deep
     * costs k reads, not n^k */
    unsigned char *seen;
} entry_vec;

static bool work(ydoc *d, uint64_t n, const yaml_node_t *at, char *err, size_t errlen) {
    d->work += n;
    if (d->work <= YDOC_MAX_WORK) return true;
    return bd_err(err, errlen, "%s:%d: the document's mappings are too large or merge too much (more than %llu "
                  "key comparisons)", d->what, ydoc_line(at), (unsigned long long)YDOC_MAX_WORK);
}

static int vec_find(const entry_vec *ev, const char *key) {
    for (int i = 0; i < ev->n; i++)
        if (!strcmp(ev->v[i].key, key)) return i;
    return -1;
}

/* true when src was merged already; marks it otherwise. */
static bool vec_seen(ydoc *d, entry_vec *ev, const yaml_node_t *src, bool *oom) {
    size_t n = (size_t)(d->doc.nodes.top - d->doc.nodes.start);
    size_t i = (size_t)(src - d->doc.nodes.start);
    if (i >= n) return false;
    if (!ev->seen && !(ev->seen = calloc((n + 7) / 8, 1))) {
        *oom = true;
        return false;
    }
    bool was = ev->seen[i / 8] & (1u << (i % 8));
    ev->seen[i / 8] |= (unsigned char)(1u << (i % 8));
    return was;
}

static bool vec_push(entry_vec *ev, const char *key, yaml_node_t *k, yaml_node_t *v) {
    if (!bd_grow(&ev->v, &ev->cap, (size_t)ev->n + 1, sizeof *ev->v)) return false;
    ev->v[ev->n++] = (ydoc_entry){key, k, v};
    return true;
}

static bool collect(ydoc *d, const yaml_node_t *map, entry_vec *ev, bool explicit_level, int depth,
                    char *err, size_t errlen);

/* Add the entries of a merge source (a map or a sequence of maps) that are
 * not yet present. */
static bool merge_one(ydoc *d, yaml_node_t *src, entry_vec *ev, int depth, char *err, size_t errlen) {
    bool oom = false;
    if (vec_seen(d, ev, src, &oom)) return true;
    if (oom) return bd_err(err, errlen, "out of memory");
    return collect(d, src, ev, false, depth + 1, err, errlen);
}

static bool merge_from(ydoc *d, yaml_node_t *src, entry_vec *ev, int depth, char *err,
                       size_t errlen) {
    if (depth > YDOC_MAX_MERGE_DEPTH)
        return bd_err(err, errlen, "%s:%d: merge keys nested too deeply", d->what, ydoc_line(src));
    if (ydoc_is_map(src)) return merge_one(d, src, ev, depth, err, errlen);
    if (ydoc_is_seq(src)) {
        for (int i = 0; i < ydoc_seq_len(d, src); i++) {
            yaml_node_t *it = ydoc_seq_at(d, src, i);
            if (!ydoc_is_map(it))
                return bd_err(err, errlen, "%s:%d: merge key value must be a mapping", d->what,
                              ydoc_line(it));
            if (!work(d, 1, it, err, errlen) || !merge_one(d, it, ev, depth, err, errlen)) return false;
        }
        return true;
    }
    return bd_err(err, errlen, "%s:%d: merge key value must be a mapping", d->what,
                  ydoc_line(src));
}

static bool collect(ydoc *d, const yaml_node_t *map, entry_vec *ev, bool explicit_level, int depth,
                    char *err, size_t errlen) {
    int first = ev->n;
    yaml_node_pair_t *p;
    /* Explicit keys of this level first, so that they win over merges. */
    for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&d->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(&d->doc, p->value);
        const char *ks = ydoc_str(k);
        if (!ks) return bd_err(err, errlen, "%s:%d: mapping key must be a plain string", d->what,
                               ydoc_line(k));
        if (!strcmp(ks, "<<") && k->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) continue;
        if (!work(d, (uint64_t)ev->n + 1, k, err, errlen)) return false;
        int at = vec_find(ev, ks);
        if (at >= first)
            return bd_err(err, errlen, "%s:%d: duplicate key '%s' (first on line %d)", d->what,
                          ydoc_line(k), ks, ydoc_line(ev->v[at].knode));
        if (at >= 0) continue; /* a merged level: the outer explicit key wins */
        if (!vec_push(ev, ks, k, v)) return bd_err(err, errlen, "out of memory");
    }
    (void)explicit_level;
    for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&d->doc, p->key);
        const char *ks = ydoc_str(k);
        if (strcmp(ks, "<<") != 0 || k->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) continue;
        if (!merge_from(d, yaml_document_get_node(&d->doc, p->value), ev, depth, err, errlen))
            return false;
    }
    return true;
}

bool ydoc_map_entries(ydoc *d, const yaml_node_t *map, ydoc_entry **out, int *n, char *err,
                      size_t errlen) {
    *out = NULL;
    *n = 0;
    if (!ydoc_is_map(map))
        return bd_err(err, errlen, "%s:%d: expected a mapping", d->what, ydoc_line(map));
    entry_vec ev = {0};
    bool ok = collect(d, map, &ev, true, 0, err, errlen);
    free(ev.seen);
    if (!ok) {
        free(ev.v);
        return false;
    }
    *out = ev.v;
    *n = ev.n;
    return true;
}

yaml_node_t *ydoc_map_get(ydoc *d, const yaml_node_t *map, const char *key) {
    ydoc_entry *e;
    int n;
    if (!ydoc_map_entries(d, map, &e, &n, NULL, 0)) return NULL;
    yaml_node_t *v = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].key, key)) {
            v = e[i].value;
            break;
        }
    free(e);
    return v;
}

/* ------------------------------------------------------------------------
 * Scalars
 * ---------------------------------------------------------------------- */

bool ydoc_parse_bool(const char *s, bool *out) {
    static const char *const t[] = {"true", "True", "TRUE", "yes", "Yes", "on", "On", "1"};
    static const char *const f[] = {"false", "False", "FALSE", "no", "No", "off", "Off", "0"};
    if (!s) return false;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i])) return *out = true, true;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!strcmp(s, f[i])) return *out = false, true;
    return false;
}

bool ydoc_parse_int(const char *s, long long min, long long max, long long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max) return false;
    *out = v;
    return true;
}

bool ydoc_parse_double(const char *s, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* ------------------------------------------------------------------------
 * Emitting
 * ---------------------------------------------------------------------- */

typedef struct outbuf {
    char *p;
    size_t n, cap;
    bool oom;
} outbuf;

static int out_write(void *ctx, unsigned char *buf, size_t size) {
    outbuf *o = ctx;
    if (!bd_grow(&o->p, &o->cap, o->n + size + 1, 1)) {
        o->oom = true;
        return 0;
    }
    memcpy(o->p + o->n, buf, size);
    o->n += size;
    o->p[o->n] = 0;
    return 1;
}

typedef struct emit_ctx {
    ydoc *d;
    yaml_emitter_t em;
    int nodes;
    char *err;
    size_t errlen;
} emit_ctx;

static bool emit_ev(emit_ctx *c, yaml_event_t *ev) {
    if (!yaml_emitter_emit(&c->em, ev))
        return bd_err(c->err, c->errlen, "%s: cannot write YAML: %s", c->d->what,
                      c->em.problem ? c->em.problem : "emitter error");
    return true;
}

static bool emit_scalar(emit_ctx *c, const char *s, yaml_scalar_style_t style) {
    yaml_event_t ev;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1,
                                      style))
        return bd_err(c->err, c->errlen, "out of memory");
    return emit_ev(c, &ev);
}

static bool emit_node(emit_ctx *c, yaml_node_t *n, int depth) {
    yaml_event_t ev;
    if (depth > YDOC_MAX_EMIT_DEPTH || ++c->nodes > YDOC_MAX_EMIT_NODES)
        return bd_err(c->err, c->errlen, "%s:%d: structure too deep or too large", c->d->what,
                      ydoc_line(n));
    switch (n->type) {
    case YAML_SCALAR_NODE: {
        const char *s = ydoc_str(n);
        if (!s) return bd_err(c->err, c->errlen, "%s:%d: bad scalar", c->d->what, ydoc_line(n));
        return emit_scalar(c, s, n->data.scalar.style);
    }
    case YAML_SEQUENCE_NODE:
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_ANY_SEQUENCE_STYLE);
        if (!emit_ev(c, &ev)) return false;
        for (int i = 0; i < ydoc_seq_len(c->d, n); i++)
            if (!emit_node(c, ydoc_seq_at(c->d, n, i), depth + 1)) return false;
        yaml_sequence_end_event_initialize(&ev);
        return emit_ev(c, &ev);
    case YAML_MAPPING_NODE: {
        ydoc_entry *e;
        int ne;
        if (!ydoc_map_entries(c->d, n, &e, &ne, c->err, c->errlen)) return false;
        yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
        bool ok = emit_ev(c, &ev);
        for (int i = 0; ok && i < ne; i++)
            ok = emit_scalar(c, e[i].key, YAML_PLAIN_SCALAR_STYLE) &&
                 emit_node(c, e[i].value, depth + 1);
        free(e);
        if (!ok) return false;
        yaml_mapping_end_event_initialize(&ev);
        return emit_ev(c, &ev);
    }
    default:
        return bd_err(c->err, c->errlen, "%s: empty node", c->d->what);
    }
}

bool ydoc_emit(ydoc *d, const yaml_node_t *map, const char *name, char **out, char *err,
               size_t errlen) {
    *out = NULL;
    outbuf o = {0};
    emit_ctx c = {.d = d, .err = err, .errlen = errlen};
    if (!yaml_emitter_initialize(&c.em)) return bd_err(err, errlen, "out of memory");
    yaml_emitter_set_output(&c.em, out_write, &o);
    yaml_emitter_set_unicode(&c.em, 1);
    yaml_emitter_set_width(&c.em, 4096);
    yaml_event_t ev;
    bool ok = true;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    ok = emit_ev(&c, &ev);
    if (ok) {
        yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
        ok = emit_ev(&c, &ev);
    }
    if (ok) {
        yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
        ok = emit_ev(&c, &ev);
    }
    if (ok && name) ok = emit_scalar(&c, "name", YAML_PLAIN_SCALAR_STYLE) &&
                         emit_scalar(&c, name, YAML_ANY_SCALAR_STYLE);
    if (ok && map) {
        ydoc_entry *e = NULL;
        int ne = 0;
        ok = ydoc_map_entries(d, map, &e, &ne, err, errlen);
        for (int i = 0; ok && i < ne; i++) {
            if (name && !strcmp(e[i].key, "name")) continue; /* the install name wins */
            ok = emit_scalar(&c, e[i].key, YAML_PLAIN_SCALAR_STYLE) &&
                 emit_node(&c, e[i].value, 1);
        }
        free(e);
    }
    if (ok) {
        yaml_mapping_end_event_initialize(&ev);
        ok = emit_ev(&c, &ev);
    }
    if (ok) {
        yaml_document_end_event_initialize(&ev, 1);
        ok = emit_ev(&c, &ev);
    }
    if (ok) {
        yaml_stream_end_event_initialize(&ev);
        ok = emit_ev(&c, &ev);
    }
    yaml_emitter_delete(&c.em);
    if (ok && o.oom) ok = bd_err(err, errlen, "out of memory");
    if (!ok) {
        free(o.p);
        return false;
    }
    *out = o.p;
    return true;
}
