/*
 * index.c - gallery index parsing and the catalog of indexes.
 */
#include "index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../base/base.h"
#include "store.h"

#define INDEX_MAX_BYTES (64u << 20)

/* Provided by builtin_index.c (the bytes of gallery/index.yaml). */
extern const char bd_builtin_index_start[];
extern const char bd_builtin_index_end[];

static const char *scalar_or_empty(const yaml_node_t *n) {
    const char *s = ydoc_str(n);
    return s ? s : "";
}

/* Strings of a sequence of scalars into a new array (non-strings skipped). */
static const char **string_seq(ydoc *d, const yaml_node_t *n, int *count) {
    *count = 0;
    int len = ydoc_seq_len(d, n);
    if (len <= 0) return NULL;
    const char **v = calloc((size_t)len, sizeof *v);
    if (!v) return NULL;
    for (int i = 0; i < len; i++) {
        const char *s = ydoc_str(ydoc_seq_at(d, n, i));
        if (s) v[(*count)++] = s;
    }
    return v;
}

static void entry_problem(gallery_entry *e, ydoc *d, const yaml_node_t *n, const char *fmt,
                          const char *arg) {
    if (e->problem[0]) return;
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    snprintf(e->problem, sizeof e->problem, "%s:%d: %s", d->what, ydoc_line(n), msg);
}

static bool base_url_is_empty(const char *url) {
    /* LocalAI's modern entries point at an empty base config. */
    return !*url || strstr(url, "gallery/virtual.yaml") != NULL;
}

static void parse_entry(gallery_index *ix, yaml_node_t *node, gallery_entry *e) {
    ydoc *d = &ix->doc;
    memset(e, 0, sizeof *e);
    e->index = ix;
    e->line = ydoc_line(node);
    e->name = e->description = e->license = e->url = "";
    ydoc_entry *kv;
    int n;
    char err[320];
    if (!ydoc_map_entries(d, node, &kv, &n, err, sizeof err)) {
        snprintf(e->problem, sizeof e->problem, "%s", err);
        return;
    }
    for (int i = 0; i < n; i++) {
        const char *k = kv[i].key;
        yaml_node_t *v = kv[i].value;
        if (!strcmp(k, "name")) {
            e->name = scalar_or_empty(v);
        } else if (!strcmp(k, "description")) {
            e->description = scalar_or_empty(v);
        } else if (!strcmp(k, "license")) {
            e->license = scalar_or_empty(v);
        } else if (!strcmp(k, "url")) {
            e->url = scalar_or_empty(v);
            if (!base_url_is_empty(e->url))
                entry_problem(e, d, v,
                              "base config url '%s' is not supported by blockdraft (only an "
                              "empty base such as gallery/virtual.yaml; put the config in "
                              "overrides)",
                              e->url);
        } else if (!strcmp(k, "config_file")) {
            if (!ydoc_is_null(v))
                entry_problem(e, d, v, "%sconfig_file is not supported by blockdraft (use overrides)", "");
        } else if (!strcmp(k, "tags")) {
            e->tags = string_seq(d, v, &e->n_tags);
        } else if (!strcmp(k, "urls")) {
            e->urls = string_seq(d, v, &e->n_urls);
        } else if (!strcmp(k, "overrides")) {
            if (ydoc_is_map(v)) e->overrides = v;
            else if (!ydoc_is_null(v)) entry_problem(e, d, v, "%soverrides must be a mapping", "");
        } else if (!strcmp(k, "files")) {
            int nf = ydoc_seq_len(d, v);
            if (!ydoc_is_seq(v)) {
                if (!ydoc_is_null(v)) entry_problem(e, d, v, "%sfiles must be a list", "");
                continue;
            }
            e->files = calloc((size_t)(nf ? nf : 1), sizeof *e->files);
            if (!e->files) {
                entry_problem(e, d, v, "%sout of memory", "");
                continue;
            }
            for (int j = 0; j < nf; j++) {
                yaml_node_t *f = ydoc_seq_at(d, v, j);
                gallery_file_ref *r = &e->files[e->n_files++];
                r->line = ydoc_line(f);
                r->filename = r->sha256 = r->uri = "";
                ydoc_entry *fk;
                int fn;
                if (!ydoc_map_entries(d, f, &fk, &fn, err, sizeof err)) {
                    if (!e->problem[0]) snprintf(e->problem, sizeof e->problem, "%s", err);
                    continue;
                }
                for (int m = 0; m < fn; m++) {
                    const char *s = ydoc_str(fk[m].value);
                    if (!s && !ydoc_is_null(fk[m].value)) {
                        entry_problem(e, d, fk[m].value, "files.%s must be a string", fk[m].key);
                        continue;
                    }
                    if (!s) s = "";
                    if (!strcmp(fk[m].key, "size")) {
                        long long sz;
                        /* a download never grows past it (fetch_file) */
                        if (!ydoc_parse_int(s, 1, INT64_MAX, &sz))
                            entry_problem(e, d, fk[m].value, "files.size must be a positive number of bytes (got '%s')",
                                          s);
                        else r->size = (uint64_t)sz;
                    } else if (!strcmp(fk[m].key, "filename")) r->filename = s;
                    else if (!strcmp(fk[m].key, "sha256")) r->sha256 = s;
                    else if (!strcmp(fk[m].key, "uri")) r->uri = s;
                    else entry_problem(e, d, fk[m].knode, "unknown key 'files.%s'", fk[m].key);
                }
                free(fk);
                if (!r->filename[0]) entry_problem(e, d, f, "%sa file has no filename", "");
                else if (!r->uri[0]) entry_problem(e, d, f, "file '%s' has no uri", r->filename);
            }
        }
        /* Other LocalAI keys (icon, size, variants, last_checked, ...) carry
         * nothing blockdraft acts on. */
    }
    free(kv);
    if (!e->name[0]) entry_problem(e, d, node, "%sentry without a name", "");
    else if (!e->overrides && e->n_files == 0)
        entry_problem(e, d, node, "entry '%s' installs nothing (no overrides, no files)", e->name);
}

gallery_index *gallery_index_parse(const char *text, size_t len, const char *source, char *err,
                                   size_t errlen) {
    gallery_index *ix = calloc(1, sizeof *ix);
    if (!ix) return bd_err(err, errlen, "out of memory"), NULL;
    snprintf(ix->source, sizeof ix->source, "%s", source);
    ix->text = malloc(len + 1);
    if (!ix->text) {
        free(ix);
        return bd_err(err, errlen, "out of memory"), NULL;
    }
    memcpy(ix->text, text, len);
    ix->text[len] = 0;
    if (!ydoc_load(&ix->doc, ix->text, len, source, err, errlen)) {
        free(ix->text);
        free(ix);
        return NULL;
    }
    yaml_node_t *root = ydoc_root(&ix->doc);
    if (root && !ydoc_is_seq(root)) {
        bd_err(err, errlen, "%s:%d: a gallery index must be a list of entries", source,
               ydoc_line(root));
        gallery_index_free(ix);
        return NULL;
    }
    int n = ydoc_seq_len(&ix->doc, root);
    ix->entries = calloc((size_t)(n ? n : 1), sizeof *ix->entries);
    if (!ix->entries) {
        gallery_index_free(ix);
        return bd_err(err, errlen, "out of memory"), NULL;
    }
    for (int i = 0; i < n; i++) {
        yaml_node_t *it = ydoc_seq_at(&ix->doc, root, i);
        gallery_entry *e = &ix->entries[ix->n_entries++];
        if (!ydoc_is_map(it)) {
            memset(e, 0, sizeof *e);
            e->index = ix;
            e->name = e->description = e->license = e->url = "";
            e->line = ydoc_line(it);
            snprintf(e->problem, sizeof e->problem, "%s:%d: entry is not a mapping", source,
                     e->line);
            continue;
        }
        parse_entry(ix, it, e);
    }
    return ix;
}

static bool is_uri(const char *s) {
    return strstr(s, "://") != NULL || !strncmp(s, "github:", 7);
}

gallery_index *gallery_index_load(const char *path_or_uri, const fetch_opts *o, char *err,
                                  size_t errlen) {
    char *buf = NULL;
    size_t len = 0;
    if (is_uri(path_or_uri)) {
        char url[2048];
        if (!fetch_uri_resolve(path_or_uri, o, url, sizeof url, err, errlen)) return NULL;
        if (!fetch_to_memory(url, o, INDEX_MAX_BYTES, &buf, &len, err, errlen)) return NULL;
    } else if (!gallery_read_file(path_or_uri, INDEX_MAX_BYTES, &buf, &len, err, errlen)) {
        return NULL;
    }
    gallery_index *ix = gallery_index_parse(buf, len, path_or_uri, err, errlen);
    free(buf);
    return ix;
}

gallery_index *gallery_index_builtin(char *err, size_t errlen) {
    size_t len = (size_t)(bd_builtin_index_end - bd_builtin_index_start);
    return gallery_index_parse(bd_builtin_index_start, len, "builtin:gallery/index.yaml", err,
                               errlen);
}

void gallery_index_free(gallery_index *ix) {
    if (!ix) return;
    for (int i = 0; i < ix->n_entries; i++) {
        free(ix->entries[i].tags);
        free(ix->entries[i].urls);
        free(ix->entries[i].files);
    }
    free(ix->entries);
    ydoc_free(&ix->doc);
    free(ix->text);
    free(ix);
}

/* ------------------------------------------------------------------------
 * Catalog
 * ---------------------------------------------------------------------- */

static bool cat_push(gallery_catalog *cat, gallery_index *ix) {
    size_t cap = (size_t)cat->n_idx; /* idx holds exactly n_idx: grow by one */
    if (!bd_grow(&cat->idx, &cap, cap + 1, sizeof *cat->idx)) return false;
    cat->idx[cat->n_idx++] = ix;
    return true;
}

bool gallery_catalog_load(gallery_catalog *cat, const char *const *extra, int n_extra,
                          bool use_env, const fetch_opts *o, char *err, size_t errlen) {
    memset(cat, 0, sizeof *cat);
    for (int i = 0; i < n_extra; i++) {
        gallery_index *ix = gallery_index_load(extra[i], o, err, errlen);
        if (!ix || !cat_push(cat, ix)) {
            gallery_index_free(ix);
            gallery_catalog_free(cat);
            return false;
        }
    }
    gallery_index *b = gallery_index_builtin(err, errlen);
    if (!b || !cat_push(cat, b)) {
        gallery_index_free(b);
        gallery_catalog_free(cat);
        return false;
    }
    const char *env = use_env ? getenv("BLOCKDRAFT_GALLERY") : NULL;
    if (env && *env) {
        char *copy = strdup(env), *save = NULL;
        for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok;
             tok = strtok_r(NULL, ",", &save)) {
            while (*tok == ' ') tok++;
            if (!*tok) continue;
            char e2[512];
            gallery_index *ix = gallery_index_load(tok, o, e2, sizeof e2);
            if (!ix || !cat_push(cat, ix)) {
                gallery_index_free(ix);
                if (cat->n_warnings < 4)
                    snprintf(cat->warnings[cat->n_warnings++], sizeof cat->warnings[0],
                             "BLOCKDRAFT_GALLERY: %s", ix ? "out of memory" : e2);
            }
        }
        free(copy);
    }
    return true;
}

void gallery_catalog_free(gallery_catalog *cat) {
    for (int i = 0; i < cat->n_idx; i++) gallery_index_free(cat->idx[i]);
    free(cat->idx);
    memset(cat, 0, sizeof *cat);
}

const gallery_entry *gallery_catalog_find(const gallery_catalog *cat, const char *name) {
    for (int i = 0; i < cat->n_idx; i++)
        for (int j = 0; j < cat->idx[i]->n_entries; j++)
            if (!strcasecmp(cat->idx[i]->entries[j].name, name)) return &cat->idx[i]->entries[j];
    return NULL;
}

bool gallery_entry_has_tag(const gallery_entry *e, const char *tag) {
    for (int i = 0; i < e->n_tags; i++)
        if (!strcasecmp(e->tags[i], tag)) return true;
    return false;
}
