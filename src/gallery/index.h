/*
 * index.h - gallery indexes in LocalAI's entry schema.
 *
 * An index is a YAML list of entries:
 *   - name: qwen3-4b-dflash
 *     url: github:mudler/LocalAI/gallery/virtual.yaml@master   (empty base only)
 *     description, license, icon, urls: [..], tags: [..]
 *     overrides: { parameters: {model: ...}, draft_model: ..., options: [...], ... }
 *     files: [{filename: ..., sha256: ..., uri: ..., size: BYTES}]   (size optional,
 *                                                       a blockdraft extension)
 * LocalAI keys blockdraft has no use for (icon, size, variants,
 * last_checked, ...) are read past; an entry that needs something
 * blockdraft cannot do (a non-empty base config `url`/`config_file`) is
 * kept but marked with a problem, reported when someone pulls it. One bad
 * entry never hides the others.
 *
 * A catalog is the ordered list of indexes searched for a name: the
 * --index sources first, then the built-in index (gallery/index.yaml,
 * compiled in), then BLOCKDRAFT_GALLERY (comma-separated paths or URLs).
 */
#ifndef BD_GALLERY_INDEX_H
#define BD_GALLERY_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fetch.h"
#include "ydoc.h"

typedef struct gallery_file_ref {
    const char *filename; /* relative to the models folder */
    const char *sha256;   /* "" when the entry gives none */
    const char *uri;
    uint64_t size;        /* bytes, 0 when the entry gives none (blockdraft's optional `size`) */
    int line;
} gallery_file_ref;

typedef struct gallery_index gallery_index;

typedef struct gallery_entry {
    const char *name;
    const char *description; /* "" when absent */
    const char *license;
    const char *url;         /* base config URI, "" when absent */
    const char **tags;
    int n_tags;
    const char **urls;
    int n_urls;
    gallery_file_ref *files;
    int n_files;
    yaml_node_t *overrides;  /* NULL when absent */
    int line;
    char problem[640];       /* non-empty: the entry cannot be installed, and why */
    gallery_index *index;
} gallery_entry;

struct gallery_index {
    char source[512];  /* path, URL or "builtin" */
    char *text;        /* owned YAML text */
    ydoc doc;
    gallery_entry *entries;
    int n_entries;
};

typedef struct gallery_catalog {
    gallery_index **idx;
    int n_idx;
    char warnings[4][600]; /* BLOCKDRAFT_GALLERY sources that failed to load */
    int n_warnings;
} gallery_catalog;

/* Parse index text (copied). Returns NULL with "SOURCE:LINE: ..." when the
 * document is not a list of mappings at all. */
gallery_index *gallery_index_parse(const char *text, size_t len, const char *source, char *err,
                                   size_t errlen);
/* Load from a local path or a URI (fetch_uri_resolve schemes). */
gallery_index *gallery_index_load(const char *path_or_uri, const fetch_opts *o, char *err,
                                  size_t errlen);
/* The compiled-in gallery/index.yaml. */
gallery_index *gallery_index_builtin(char *err, size_t errlen);
void gallery_index_free(gallery_index *ix);

/* Build a catalog: extra[] (must all load), then the built-in index, then
 * BLOCKDRAFT_GALLERY entries when use_env (failures become warnings). */
bool gallery_catalog_load(gallery_catalog *cat, const char *const *extra, int n_extra,
                          bool use_env, const fetch_opts *o, char *err, size_t errlen);
void gallery_catalog_free(gallery_catalog *cat);
/* First entry named `name` (case-insensitive), or NULL. */
const gallery_entry *gallery_catalog_find(const gallery_catalog *cat, const char *name);

/* Entry has tag (case-insensitive). */
bool gallery_entry_has_tag(const gallery_entry *e, const char *tag);

#endif
