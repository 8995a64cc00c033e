/*
 * ydoc.h - a loaded YAML document (libyaml) with strict accessors.
 *
 * Used for gallery indexes and model configs. Every node keeps its line so
 * errors can say "FILE:LINE: ...". Mappings are read through
 * ydoc_map_entries(), which resolves YAML merge keys (`<<: *anchor`, used
 * by LocalAI's gallery for quant variants; explicit keys win over merged
 * ones) and rejects duplicate keys. Aliases are shared nodes, never copied,
 * so an alias bomb cannot blow up memory; merge nesting is bounded, each
 * merge source is read once per mapping (a merge-key bomb costs linear
 * time), and the total work of all mappings read from one document is
 * capped (an error past it, never a hang).
 */
#ifndef BD_GALLERY_YDOC_H
#define BD_GALLERY_YDOC_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

typedef struct ydoc {
    yaml_document_t doc;
    bool loaded;
    char what[256]; /* file name or URL, for messages */
    unsigned long long work; /* mapping work so far (ydoc_map_entries), bounded */
} ydoc;

typedef struct ydoc_entry {
    const char *key;    /* NUL-terminated scalar of the key */
    yaml_node_t *knode; /* the key node (for its line) */
    yaml_node_t *value;
} ydoc_entry;

/* Parse the first document of buf[0, len). An empty input gives a document
 * without a root. Returns false with "WHAT:LINE: message" on a syntax
 * error. */
bool ydoc_load(ydoc *d, const char *buf, size_t len, const char *what, char *err, size_t errlen);
void ydoc_free(ydoc *d);

yaml_node_t *ydoc_root(ydoc *d); /* NULL for an empty document */
static inline int ydoc_line(const yaml_node_t *n) { return n ? (int)n->start_mark.line + 1 : 0; }

bool ydoc_is_map(const yaml_node_t *n);
bool ydoc_is_seq(const yaml_node_t *n);
bool ydoc_is_scalar(const yaml_node_t *n);
/* Scalar text (NUL-terminated) or NULL if n is not a scalar or contains an
 * embedded NUL. A plain `~`/`null`/empty scalar is reported by ydoc_is_null. */
const char *ydoc_str(const yaml_node_t *n);
bool ydoc_is_null(const yaml_node_t *n);

/* Sequence items: number and i-th node. */
int ydoc_seq_len(ydoc *d, const yaml_node_t *n);
yaml_node_t *ydoc_seq_at(ydoc *d, const yaml_node_t *n, int i);

/* Flatten a mapping (merge keys resolved, duplicates rejected, non-scalar
 * keys rejected) into a newly allocated array; free() it. */
bool ydoc_map_entries(ydoc *d, const yaml_node_t *map, ydoc_entry **out, int *n, char *err,
                      size_t errlen);
/* Value of `key` in a mapping (merge keys honoured), NULL if absent. */
yaml_node_t *ydoc_map_get(ydoc *d, const yaml_node_t *map, const char *key);

/* Scalar conversions; they fail on anything but a clean literal. */
bool ydoc_parse_bool(const char *s, bool *out);  /* true/false/yes/no/on/off/1/0 */
bool ydoc_parse_int(const char *s, long long min, long long max, long long *out);
bool ydoc_parse_double(const char *s, double *out);

/* Emit node (merge keys resolved) as a block YAML document into a new
 * NUL-terminated buffer (free()), optionally preceded by `name: NAME`.
 * Used to write a gallery entry's overrides as a model config. */
bool ydoc_emit(ydoc *d, const yaml_node_t *map, const char *name, char **out, char *err,
               size_t errlen);

#endif
