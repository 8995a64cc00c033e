/*
 * gguf_read.c - GGUF v2/v3 reader. The file is hostile input.
 *
 * Strategy: one pass over header, metadata and tensor table with a bounds-
 * checked cursor (a read past the end sets a sticky flag and yields 0, the
 * caller checks the flag before using what it read). Every count is checked
 * against the bytes left in the file *before* anything is allocated for it,
 * so a 2^62 count in a 100-byte file fails fast instead of asking malloc for
 * exabytes. Sizes and offsets go through bd_mul_ok/bd_add_ok. Only after the
 * whole table is valid is the data section located and every tensor extent
 * checked against the file and against its neighbours.
 *
 * Messages: "gguf: <what> at byte <offset>: <problem>", where <what> names
 * the key or tensor (escaped, truncated) or the header field.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base.h"
#include "../tensor/tensor.h"
#include "bd_gguf.h"
#include "gguf_internal.h"

/* Smallest encodings, used to bound counts before allocating:
 * a kv is key length (8) + type (4) + at least a 1-byte value;
 * a tensor entry is name length (8) + n_dims (4) + ne[0] (8) + type (4)
 * + offset (8). */
#define MIN_KV_BYTES 13u
#define MIN_TENSOR_BYTES 32u
/* Hard caps on the counts. Real files have tens of keys and at most tens of
 * thousands of tensors; the caps keep the per-entry bookkeeping (about 100
 * bytes each, more than an entry's smallest encoding) bounded even for a
 * huge hostile file. */
#define MAX_KV_COUNT (1u << 20)
#define MAX_TENSOR_COUNT (1u << 20)

struct bd_gguf_file {
    bd_fmap map;         /* set when opened from a path; else data == NULL */
    const uint8_t *base; /* [size] bytes: the mapping or the caller's buffer */
    uint64_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    bd_gguf_kv *kv; /* [n_kv] */
    int64_t n_tensors;
    bd_gguf_tensor *tensors; /* [n_tensors] */
    /* Open-addressing hash tables of indices (-1 = empty slot), power-of-
     * two capacity >= 2x the entries: duplicate detection at open and O(1)
     * bd_gguf_find / bd_gguf_find_tensor. */
    int64_t *kv_hash;
    uint64_t kv_mask;
    int64_t *t_hash;
    uint64_t t_mask;
};

/* ------------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------- */

typedef struct cursor {
    const uint8_t *p; /* [size] */
    uint64_t size;
    uint64_t pos;
    bool bad; /* sticky: set by any read past the end */
} cursor;

static inline uint64_t cur_left(const cursor *c) { return c->size - c->pos; }

static uint32_t cur_u32(cursor *c) {
    if (c->bad || cur_left(c) < 4) {
        c->bad = true;
        return 0;
    }
    uint32_t v = bd_gguf_le32(c->p + c->pos);
    c->pos += 4;
    return v;
}

static uint64_t cur_u64(cursor *c) {
    if (c->bad || cur_left(c) < 8) {
        c->bad = true;
        return 0;
    }
    uint64_t v = bd_gguf_le64(c->p + c->pos);
    c->pos += 8;
    return v;
}

/* Printable, bounded rendering of untrusted name bytes for messages. */
typedef struct namebuf {
    char s[64 * 4 + 8]; /* 64 source bytes, each at most "\\xNN", + "..." */
} namebuf;

static const char *esc(const char *src, uint64_t n, namebuf *b) {
    size_t o = 0;
    const uint64_t max_src = 64;
    for (uint64_t i = 0; i < n && i < max_src; i++) {
        unsigned char ch = (unsigned char)src[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\'' && ch != '\\') {
            b->s[o++] = (char)ch;
        } else {
            snprintf(b->s + o, sizeof b->s - o, "\\x%02x", ch);
            o += 4;
        }
    }
    if (n > max_src) {
        memcpy(b->s + o, "...", 3);
        o += 3;
    }
    b->s[o] = '\0';
    return b->s;
}

size_t bd_gguf_vtype_size(enum bd_gguf_vtype t) {
    switch (t) {
    case GGUF_VTYPE_UINT8:
    case GGUF_VTYPE_INT8:
    case GGUF_VTYPE_BOOL: return 1;
    case GGUF_VTYPE_UINT16:
    case GGUF_VTYPE_INT16: return 2;
    case GGUF_VTYPE_UINT32:
    case GGUF_VTYPE_INT32:
    case GGUF_VTYPE_FLOAT32: return 4;
    case GGUF_VTYPE_UINT64:
    case GGUF_VTYPE_INT64:
    case GGUF_VTYPE_FLOAT64: return 8;
    default: return 0;
    }
}

const char *bd_gguf_vtype_name(enum bd_gguf_vtype t) {
    static const char *const names[GGUF_VTYPE_COUNT] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32",  "float32",
        "bool",  "string", "array", "uint64", "int64", "float64",
    };
    if ((unsigned)t >= GGUF_VTYPE_COUNT) return "invalid";
    return names[t];
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool hash_create(int64_t **tab, uint64_t *mask, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    *tab = malloc(cap * sizeof **tab);
    if (!*tab) return false;
    memset(*tab, 0xff, cap * sizeof **tab); /* all -1 */
    *mask = cap - 1;
    return true;
}

/* Look name up; `name_at(f, j)` gives entry j's name. Returns the index
 * found, or -1 after inserting idx (when idx >= 0). */
static int64_t hash_probe(const bd_gguf_file *f, int64_t *tab, uint64_t mask, const char *name,
                          int64_t idx, const char *(*name_at)(const bd_gguf_file *, int64_t)) {
    uint64_t h = fnv1a(name) & mask;
    for (;;) {
        int64_t j = tab[h];
        if (j < 0) {
            if (idx >= 0) tab[h] = idx;
            return -1;
        }
        if (!strcmp(name_at(f, j), name)) return j;
        h = (h + 1) & mask;
    }
}

static const char *kv_name_at(const bd_gguf_file *f, int64_t j) { return f->kv[j].key; }
static const char *t_name_at(const bd_gguf_file *f, int64_t j) { return f->tensors[j].name; }

/* ------------------------------------------------------------------------
 * Value validation (shared with the writer through gguf_internal.h)
 * ---------------------------------------------------------------------- */

bool bd_gguf_value_walk(const uint8_t *p, uint64_t avail, uint32_t type, int depth,
                     uint64_t base_off, uint64_t *size, char *why, size_t whylen) {
    if (type >= GGUF_VTYPE_COUNT)
        return bd_err(why, whylen, "unknown value type %" PRIu32, type);
    size_t fixed = bd_gguf_vtype_size((enum bd_gguf_vtype)type);
    if (fixed) {
        if (avail < fixed)
            return bd_err(why, whylen,
                          "%s value at byte %" PRIu64 " needs %zu bytes, %" PRIu64 " left",
                          bd_gguf_vtype_name((enum bd_gguf_vtype)type), base_off, fixed, avail);
        *size = fixed;
        return true;
    }
    if (type == GGUF_VTYPE_STRING) {
        if (avail < 8)
            return bd_err(why, whylen, "string length at byte %" PRIu64 " is truncated",
                          base_off);
        uint64_t len = bd_gguf_le64(p);
        if (len > avail - 8)
            return bd_err(why, whylen,
                          "string at byte %" PRIu64 ": length %" PRIu64
                          " exceeds the %" PRIu64 " bytes left in the file",
                          base_off, len, avail - 8);
        *size = 8 + len;
        return true;
    }
    /* ARRAY */
    if (depth + 1 > GGUF_MAX_ARRAY_DEPTH)
        return bd_err(why, whylen, "array at byte %" PRIu64 " is nested deeper than %d levels",
                      base_off, GGUF_MAX_ARRAY_DEPTH);
    if (avail < 12)
        return bd_err(why, whylen, "array header at byte %" PRIu64 " is truncated", base_off);
    uint32_t et = bd_gguf_le32(p);
    uint64_t count = bd_gguf_le64(p + 4);
    uint64_t rest = avail - 12;
    if (et >= GGUF_VTYPE_COUNT)
        return bd_err(why, whylen, "array at byte %" PRIu64 ": unknown element type %" PRIu32,
                      base_off, et);
    size_t es = bd_gguf_vtype_size((enum bd_gguf_vtype)et);
    if (es) {
        uint64_t bytes;
        if (!bd_mul_ok(count, es, &bytes) || bytes > rest)
            return bd_err(why, whylen,
                          "array at byte %" PRIu64 ": %" PRIu64 " %s elements do not fit in the %" PRIu64
                          " bytes left in the file",
                          base_off, count, bd_gguf_vtype_name((enum bd_gguf_vtype)et), rest);
        *size = 12 + bytes;
        return true;
    }
    uint64_t min = et == GGUF_VTYPE_STRING ? 8 : 12;
    if (count > rest / min)
        return bd_err(why, whylen,
                      "array at byte %" PRIu64 ": %" PRIu64 " %s elements do not fit in the %" PRIu64
                      " bytes left in the file",
                      base_off, count, bd_gguf_vtype_name((enum bd_gguf_vtype)et), rest);
    uint64_t pos = 12;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t sz;
        if (!bd_gguf_value_walk(p + pos, avail - pos, et, depth + 1, base_off + pos, &sz, why, whylen))
            return false;
        pos += sz; /* sz <= avail - pos, so no overflow */
    }
    *size = pos;
    return true;
}

/* ------------------------------------------------------------------------
 * Parsing
 * ---------------------------------------------------------------------- */

/* Read a length-prefixed name (key or tensor name) at c and return a NUL-
 * terminated heap copy; names with NUL bytes are refused because the copy
 * would silently differ from the file. `what` is e.g. "key #3". */
static char *read_name(cursor *c, const char *what, int64_t index, char *err, size_t errlen) {
    uint64_t at = c->pos;
    uint64_t len = cur_u64(c);
    if (c->bad) {
        bd_err(err, errlen, "gguf: %s #%" PRId64 " at byte %" PRIu64 ": file truncated in the name length",
               what, index, at);
        return NULL;
    }
    if (len > cur_left(c)) {
        bd_err(err, errlen,
               "gguf: %s #%" PRId64 " at byte %" PRIu64 ": name length %" PRIu64
               " exceeds the %" PRIu64 " bytes left in the file",
               what, index, at, len, cur_left(c));
        return NULL;
    }
    const char *s = (const char *)c->p + c->pos;
    if (memchr(s, 0, len)) {
        namebuf nb;
        bd_err(err, errlen, "gguf: %s '%s' at byte %" PRIu64 ": name contains a NUL byte", what,
               esc(s, len, &nb), at);
        return NULL;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        bd_err(err, errlen, "gguf: %s #%" PRId64 " at byte %" PRIu64 ": out of memory", what, index, at);
        return NULL;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    c->pos += len;
    return copy;
}

/* A top-level ARRAY value at c: validate it and, for arrays of strings or
 * arrays, build the element offset table. */
static bool parse_array(cursor *c, bd_gguf_kv *kv, namebuf *nb, char *err, size_t errlen) {
    uint64_t at = c->pos;
    uint64_t left = cur_left(c);
    char why[200];
    if (left < 12)
        return bd_err(err, errlen, "gguf: key '%s' at byte %" PRIu64 ": file truncated in the array header",
                      nb->s, at);
    const uint8_t *p = c->p + at;
    uint32_t et = bd_gguf_le32(p);
    uint64_t count = bd_gguf_le64(p + 4);
    if (et >= GGUF_VTYPE_COUNT)
        return bd_err(err, errlen, "gguf: key '%s' at byte %" PRIu64 ": unknown array element type %" PRIu32,
                      nb->s, at, et);
    kv->arr_type = (enum bd_gguf_vtype)et;
    kv->arr_count = count;
    kv->data = p + 12;
    if (bd_gguf_vtype_size((enum bd_gguf_vtype)et)) {
        uint64_t sz;
        if (!bd_gguf_value_walk(p, left, GGUF_VTYPE_ARRAY, 0, at, &sz, why, sizeof why))
            return bd_err(err, errlen, "gguf: key '%s' at byte %" PRIu64 ": %s", nb->s, at, why);
        kv->data_size = sz;
        c->pos += sz;
        return true;
    }
    uint64_t rest = left - 12;
    uint64_t min = et == GGUF_VTYPE_STRING ? 8 : 12;
    if (count > rest / min)
        return bd_err(err, errlen,
                      "gguf: key '%s' at byte %" PRIu64 ": array count %" PRIu64
                      " of %s does not fit in the %" PRIu64 " bytes left in the file",
                      nb->s, at, count, bd_gguf_vtype_name((enum bd_gguf_vtype)et), rest);
    /* count <= rest/8, so the table is at most the file's size. */
    uint64_t *offs = malloc(count ? count * sizeof *offs : 1);
    if (!offs)
        return bd_err(err, errlen, "gguf: key '%s' at byte %" PRIu64 ": out of memory for %" PRIu64 " elements",
                      nb->s, at, count);
    kv->arr_offsets = offs;
    uint64_t pos = 12;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t sz;
        offs[i] = pos - 12;
        if (!bd_gguf_value_walk(p + pos, left - pos, et, 1, at + pos, &sz, why, sizeof why))
            return bd_err(err, errlen, "gguf: key '%s' at byte %" PRIu64 ": element %" PRIu64 ": %s",
                          nb->s, at, i, why);
        pos += sz;
    }
    kv->data_size = pos;
    c->pos += pos;
    return true;
}

static bool parse_kv(bd_gguf_file *f, cursor *c, int64_t i, char *err, size_t errlen) {
    bd_gguf_kv *kv = &f->kv[i];
    uint64_t at = c->pos;
    char *key = read_name(c, "key", i, err, errlen);
    if (!key) return false;
    kv->key = key;
    kv->key_offset = at;
    namebuf nb;
    esc(key, strlen(key), &nb);
    int64_t prev = hash_probe(f, f->kv_hash, f->kv_mask, key, i, kv_name_at);
    if (prev >= 0)
        return bd_err(err, errlen, "gguf: key '%s' at byte %" PRIu64 ": duplicate key (first at byte %" PRIu64 ")",
                      nb.s, at, f->kv[prev].key_offset);
    uint64_t tpos = c->pos;
    uint32_t type = cur_u32(c);
    if (c->bad)
        return bd_err(err, errlen, "gguf: key '%s' at byte %" PRIu64 ": file truncated in the value type",
                      nb.s, tpos);
    if (type >= GGUF_VTYPE_COUNT)
        return bd_err(err, errlen, "gguf: key '%s' at byte %" PRIu64 ": unknown value type %" PRIu32,
                      nb.s, tpos, type);
    kv->type = (enum bd_gguf_vtype)type;
    kv->offset = c->pos;
    if (type == GGUF_VTYPE_ARRAY) return parse_array(c, kv, &nb, err, errlen);
    char why[200];
    uint64_t sz;
    if (!bd_gguf_value_walk(c->p + c->pos, cur_left(c), type, 0, c->pos, &sz, why, sizeof why))
        return bd_err(err, errlen, "gguf: key '%s' at byte %" PRIu64 ": %s", nb.s, kv->offset, why);
    const uint8_t *v = c->p + c->pos;
    kv->data_size = sz;
    if (type == GGUF_VTYPE_STRING) {
        kv->str = (const char *)v + 8;
        kv->str_len = sz - 8;
        kv->data = v + 8;
    } else {
        kv->data = v;
    }
    c->pos += sz;
    return true;
}

static bool parse_tensor_info(bd_gguf_file *f, cursor *c, int64_t i, char *err, size_t errlen) {
    bd_gguf_tensor *t = &f->tensors[i];
    uint64_t at = c->pos;
    char *name = read_name(c, "tensor", i, err, errlen);
    if (!name) return false;
    t->name = name;
    t->info_offset = at;
    namebuf nb;
    esc(name, strlen(name), &nb);
    int64_t prev = hash_probe(f, f->t_hash, f->t_mask, name, i, t_name_at);
    if (prev >= 0)
        return bd_err(err, errlen,
                      "gguf: tensor '%s' at byte %" PRIu64 ": duplicate tensor name (first at byte %" PRIu64 ")",
                      nb.s, at, f->tensors[prev].info_offset);
    uint32_t n_dims = cur_u32(c);
    if (c->bad)
        return bd_err(err, errlen, "gguf: tensor '%s' at byte %" PRIu64 ": file truncated in n_dims", nb.s, at);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return bd_err(err, errlen, "gguf: tensor '%s' at byte %" PRIu64 ": n_dims %" PRIu32 " is not in 1..%d",
                      nb.s, at, n_dims, GGUF_MAX_DIMS);
    t->n_dims = n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) t->ne[d] = cur_u64(c);
    t->type = cur_u32(c);
    t->offset = cur_u64(c);
    if (c->bad)
        return bd_err(err, errlen, "gguf: tensor '%s' at byte %" PRIu64 ": file truncated in the tensor entry",
                      nb.s, at);
    /* Element count must fit in int64 (as ggml requires). */
    uint64_t nel = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (t->ne[d] > (uint64_t)INT64_MAX || !bd_mul_ok(nel, t->ne[d], &nel) || nel > (uint64_t)INT64_MAX)
            return bd_err(err, errlen,
                          "gguf: tensor '%s' at byte %" PRIu64 ": shape overflows (ne[%" PRIu32 "] = %" PRIu64 ")",
                          nb.s, at, d, t->ne[d]);
    }
    const bd_type_traits *tt = bd_type_get(t->type);
    if (!tt)
        return bd_err(err, errlen, "gguf: tensor '%s' at byte %" PRIu64 ": unknown or retired type id %" PRIu32,
                      nb.s, at, t->type);
    uint64_t bytes;
    if (!bd_row_size(t->type, (int64_t)t->ne[0], &bytes))
        return bd_err(err, errlen,
                      "gguf: tensor '%s' at byte %" PRIu64 ": ne[0] = %" PRIu64
                      " is not a multiple of the %s block size %" PRId64,
                      nb.s, at, t->ne[0], tt->name, tt->blck);
    for (int d = 1; d < GGUF_MAX_DIMS; d++)
        if (!bd_mul_ok(bytes, t->ne[d], &bytes))
            return bd_err(err, errlen, "gguf: tensor '%s' at byte %" PRIu64 ": byte size overflows", nb.s, at);
    t->nbytes = bytes;
    if (t->offset % f->alignment != 0)
        return bd_err(err, errlen,
                      "gguf: tensor '%s' at byte %" PRIu64 ": data offset %" PRIu64
                      " is not a multiple of the alignment %" PRIu32,
                      nb.s, at, t->offset, f->alignment);
    return true;
}

static bool parse_alignment(bd_gguf_file *f, char *err, size_t errlen) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const bd_gguf_kv *kv = bd_gguf_find(f, "general.alignment");
    if (!kv) return true;
    if (kv->type != GGUF_VTYPE_UINT32)
        return bd_err(err, errlen, "gguf: key 'general.alignment' at byte %" PRIu64 ": must be uint32, not %s",
                      kv->offset, bd_gguf_vtype_name(kv->type));
    uint32_t a = bd_gguf_le32(kv->data);
    if (a == 0 || (a & (a - 1)) != 0)
        return bd_err(err, errlen,
                      "gguf: key 'general.alignment' at byte %" PRIu64 ": %" PRIu32 " is not a power of two",
                      kv->offset, a);
    f->alignment = a;
    return true;
}

typedef struct extent {
    uint64_t start, end; /* absolute file offsets, [start, end) */
    int64_t idx;
} extent;

static int extent_cmp(const void *a, const void *b) {
    const extent *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Locate the data section and check every tensor's bytes lie inside the
 * file and overlap no other tensor. */
static bool place_tensors(bd_gguf_file *f, uint64_t table_end, char *err, size_t errlen) {
    uint64_t a = f->alignment, padded;
    if (!bd_add_ok(table_end, a - 1, &padded))
        return bd_err(err, errlen, "gguf: data section start overflows");
    f->data_offset = padded & ~(a - 1);
    if (f->n_tensors == 0) return true;
    extent *ex = malloc((size_t)f->n_tensors * sizeof *ex);
    if (!ex) return bd_err(err, errlen, "gguf: out of memory for %" PRId64 " tensors", f->n_tensors);
    bool ok = true;
    int64_t n_ex = 0;
    for (int64_t i = 0; i < f->n_tensors && ok; i++) {
        bd_gguf_tensor *t = &f->tensors[i];
        namebuf nb;
        uint64_t start = 0, end = 0;
        if (!bd_add_ok(f->data_offset, t->offset, &start) || !bd_add_ok(start, t->nbytes, &end)) {
            ok = bd_err(err, errlen,
                        "gguf: tensor '%s' at byte %" PRIu64 ": data offset %" PRIu64 " + size %" PRIu64
                        " overflows",
                        esc(t->name, strlen(t->name), &nb), t->info_offset, t->offset, t->nbytes);
            break;
        }
        if (end > f->size) {
            ok = bd_err(err, errlen,
                        "gguf: tensor '%s' at byte %" PRIu64 ": data [%" PRIu64 ", %" PRIu64
                        ") extends past end of file (%" PRIu64 " bytes)",
                        esc(t->name, strlen(t->name), &nb), t->info_offset, start, end, f->size);
            break;
        }
        t->data = f->base + start;
        if (t->nbytes > 0) ex[n_ex++] = (extent){start, end, i};
    }
    if (ok && n_ex > 1) {
        qsort(ex, (size_t)n_ex, sizeof *ex, extent_cmp);
        int64_t far = 0; /* extent reaching furthest so far */
        for (int64_t k = 1; k < n_ex; k++) {
            if (ex[k].start < ex[far].end) {
                const bd_gguf_tensor *t = &f->tensors[ex[k].idx], *u = &f->tensors[ex[far].idx];
                namebuf n1, n2;
                ok = bd_err(err, errlen,
                            "gguf: tensor '%s' at byte %" PRIu64 ": data [%" PRIu64 ", %" PRIu64
                            ") overlaps tensor '%s' [%" PRIu64 ", %" PRIu64 ")",
                            esc(t->name, strlen(t->name), &n1), t->info_offset, ex[k].start, ex[k].end,
                            esc(u->name, strlen(u->name), &n2), ex[far].start, ex[far].end);
                break;
            }
            if (ex[k].end > ex[far].end) far = k;
        }
    }
    free(ex);
    return ok;
}

static bool parse_file(bd_gguf_file *f, char *err, size_t errlen) {
    cursor c = {f->base, f->size, 0, false};
    if (f->size < 4 || memcmp(f->base, "GGUF", 4) != 0) {
        if (f->size < 4)
            return bd_err(err, errlen, "gguf: magic at byte 0: file is only %" PRIu64 " bytes, not a GGUF file",
                          f->size);
        return bd_err(err, errlen,
                      "gguf: magic at byte 0: expected \"GGUF\", found %02x %02x %02x %02x (not a GGUF file)",
                      f->base[0], f->base[1], f->base[2], f->base[3]);
    }
    c.pos = 4;
    uint32_t version = cur_u32(&c);
    if (c.bad) return bd_err(err, errlen, "gguf: version at byte 4: file truncated");
    if (version == 1) return bd_err(err, errlen, "gguf: version at byte 4: GGUF v1 is not supported");
    if (version != 0 && (version & 0xffff) == 0)
        return bd_err(err, errlen,
                      "gguf: version at byte 4: 0x%08" PRIx32
                      " is byte-swapped: big-endian GGUF files are not supported",
                      version);
    if (version == 0 || version > 3)
        return bd_err(err, errlen, "gguf: version at byte 4: unsupported GGUF version %" PRIu32
                      " (only 2 and 3 are read)", version);
    f->version = version;
    uint64_t n_tensors = cur_u64(&c);
    uint64_t n_kv = cur_u64(&c);
    if (c.bad) return bd_err(err, errlen, "gguf: header at byte 8: file truncated in tensor_count/kv_count");
    uint64_t left = cur_left(&c);
    if (n_kv > MAX_KV_COUNT)
        return bd_err(err, errlen, "gguf: kv_count at byte 16: %" PRIu64 " keys is more than the limit of %u",
                      n_kv, MAX_KV_COUNT);
    if (n_tensors > MAX_TENSOR_COUNT)
        return bd_err(err, errlen,
                      "gguf: tensor_count at byte 8: %" PRIu64 " tensors is more than the limit of %u",
                      n_tensors, MAX_TENSOR_COUNT);
    if (n_kv > left / MIN_KV_BYTES)
        return bd_err(err, errlen,
                      "gguf: kv_count at byte 16: %" PRIu64 " keys cannot fit in the %" PRIu64 " bytes left",
                      n_kv, left);
    if (n_tensors > left / MIN_TENSOR_BYTES || n_kv * MIN_KV_BYTES + n_tensors * MIN_TENSOR_BYTES > left)
        return bd_err(err, errlen,
                      "gguf: tensor_count at byte 8: %" PRIu64 " tensors (with %" PRIu64
                      " keys) cannot fit in the %" PRIu64 " bytes left",
                      n_tensors, n_kv, left);
    f->n_kv = (int64_t)n_kv;
    f->n_tensors = (int64_t)n_tensors;
    f->kv = calloc(n_kv ? n_kv : 1, sizeof *f->kv);
    f->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors || !hash_create(&f->kv_hash, &f->kv_mask, f->n_kv) ||
        !hash_create(&f->t_hash, &f->t_mask, f->n_tensors))
        return bd_err(err, errlen, "gguf: out of memory for %" PRIu64 " keys and %" PRIu64 " tensors", n_kv,
                      n_tensors);
    for (int64_t i = 0; i < f->n_kv; i++)
        if (!parse_kv(f, &c, i, err, errlen)) return false;
    if (!parse_alignment(f, err, errlen)) return false;
    for (int64_t i = 0; i < f->n_tensors; i++)
        if (!parse_tensor_info(f, &c, i, err, errlen)) return false;
    return place_tensors(f, c.pos, err, errlen);
}

/* ------------------------------------------------------------------------
 * Open / close
 * ---------------------------------------------------------------------- */

bd_gguf_file *bd_gguf_open_memory(const void *buf, uint64_t size, char *err, size_t errlen) {
    if (!buf && size) {
        bd_err(err, errlen, "gguf: NULL buffer");
        return NULL;
    }
    bd_gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        bd_err(err, errlen, "gguf: out of memory");
        return NULL;
    }
    static const uint8_t empty[1];
    f->base = buf ? buf : empty;
    f->size = size;
    if (!parse_file(f, err, errlen)) {
        bd_gguf_close(f);
        return NULL;
    }
    return f;
}

bd_gguf_file *bd_gguf_open(const char *path, char *err, size_t errlen) {
    bd_fmap m;
    if (!bd_fmap_open(&m, path, err, errlen)) return NULL;
    char msg[512];
    bd_gguf_file *f = bd_gguf_open_memory(m.data, m.size, msg, sizeof msg);
    if (!f) {
        bd_err(err, errlen, "%s: %s", path, msg);
        bd_fmap_close(&m);
        return NULL;
    }
    f->map = m;
    return f;
}

void bd_gguf_prefetch(bd_gguf_file *f) { bd_fmap_prefetch(&f->map); }
bool bd_gguf_set_writable(bd_gguf_file *f, bool on) { return bd_fmap_set_writable(&f->map, on); }

bool bd_gguf_set_range_writable(bd_gguf_file *f, const void *p, size_t n, bool on) {
    return bd_fmap_set_range_writable(&f->map, p, n, on);
}

bool bd_gguf_intact(const bd_gguf_file *f) { return bd_fmap_intact(&f->map); }

void bd_gguf_close(bd_gguf_file *f) {
    if (!f) return;
    if (f->kv)
        for (int64_t i = 0; i < f->n_kv; i++) {
            free((void *)f->kv[i].key);
            free((void *)f->kv[i].arr_offsets);
        }
    if (f->tensors)
        for (int64_t i = 0; i < f->n_tensors; i++) free((void *)f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    free(f->kv_hash);
    free(f->t_hash);
    if (f->map.data) bd_fmap_close(&f->map);
    free(f);
}

/* ------------------------------------------------------------------------
 * Accessors
 * ---------------------------------------------------------------------- */

uint32_t bd_gguf_version(const bd_gguf_file *f) { return f->version; }
uint32_t bd_gguf_alignment(const bd_gguf_file *f) { return f->alignment; }
uint64_t bd_gguf_data_offset(const bd_gguf_file *f) { return f->data_offset; }
uint64_t bd_gguf_file_size(const bd_gguf_file *f) { return f->size; }
int64_t bd_gguf_kv_count(const bd_gguf_file *f) { return f->n_kv; }
int64_t bd_gguf_tensor_count(const bd_gguf_file *f) { return f->n_tensors; }

const bd_gguf_kv *bd_gguf_kv_at(const bd_gguf_file *f, int64_t i) {
    return i >= 0 && i < f->n_kv ? &f->kv[i] : NULL;
}

const bd_gguf_tensor *bd_gguf_tensor_at(const bd_gguf_file *f, int64_t i) {
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const bd_gguf_kv *bd_gguf_find(const bd_gguf_file *f, const char *key) {
    if (!key || !f->kv_hash) return NULL;
    int64_t j = hash_probe(f, f->kv_hash, f->kv_mask, key, -1, kv_name_at);
    return j >= 0 ? &f->kv[j] : NULL;
}

const bd_gguf_tensor *bd_gguf_find_tensor(const bd_gguf_file *f, const char *name) {
    if (!name || !f->t_hash) return NULL;
    int64_t j = hash_probe(f, f->t_hash, f->t_mask, name, -1, t_name_at);
    return j >= 0 ? &f->tensors[j] : NULL;
}

/* Integer value of a scalar at p. *is_neg for negative signed values;
 * magnitude in *u. False for non-integer types. */
static bool load_int(enum bd_gguf_vtype t, const uint8_t *p, uint64_t *u, int64_t *s, bool *is_signed) {
    *is_signed = false;
    switch (t) {
    case GGUF_VTYPE_UINT8: *u = p[0]; break;
    case GGUF_VTYPE_UINT16: *u = bd_gguf_le16(p); break;
    case GGUF_VTYPE_UINT32: *u = bd_gguf_le32(p); break;
    case GGUF_VTYPE_UINT64: *u = bd_gguf_le64(p); break;
    case GGUF_VTYPE_INT8: *s = (int8_t)p[0]; *is_signed = true; break;
    case GGUF_VTYPE_INT16: *s = (int16_t)bd_gguf_le16(p); *is_signed = true; break;
    case GGUF_VTYPE_INT32: *s = (int32_t)bd_gguf_le32(p); *is_signed = true; break;
    case GGUF_VTYPE_INT64: *s = (int64_t)bd_gguf_le64(p); *is_signed = true; break;
    default: return false;
    }
    return true;
}

static bool load_i64(enum bd_gguf_vtype t, const uint8_t *p, int64_t *out) {
    uint64_t u = 0;
    int64_t s = 0;
    bool sg;
    if (!load_int(t, p, &u, &s, &sg)) return false;
    if (sg) {
        *out = s;
        return true;
    }
    if (u > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)u;
    return true;
}

static bool load_u64(enum bd_gguf_vtype t, const uint8_t *p, uint64_t *out) {
    uint64_t u = 0;
    int64_t s = 0;
    bool sg;
    if (!load_int(t, p, &u, &s, &sg)) return false;
    if (sg) {
        if (s < 0) return false;
        u = (uint64_t)s;
    }
    *out = u;
    return true;
}

static bool load_f64(enum bd_gguf_vtype t, const uint8_t *p, double *out) {
    if (t == GGUF_VTYPE_FLOAT32) {
        uint32_t b = bd_gguf_le32(p);
        float v;
        memcpy(&v, &b, 4);
        *out = v;
        return true;
    }
    if (t == GGUF_VTYPE_FLOAT64) {
        uint64_t b = bd_gguf_le64(p);
        memcpy(out, &b, 8);
        return true;
    }
    return false;
}

bool bd_gguf_get_u64(const bd_gguf_file *f, const char *key, uint64_t *out) {
    const bd_gguf_kv *kv = bd_gguf_find(f, key);
    uint64_t v;
    if (!kv || !load_u64(kv->type, kv->data, &v)) return false;
    *out = v;
    return true;
}

bool bd_gguf_get_u32(const bd_gguf_file *f, const char *key, uint32_t *out) {
    uint64_t v;
    if (!bd_gguf_get_u64(f, key, &v) || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

bool bd_gguf_get_i64(const bd_gguf_file *f, const char *key, int64_t *out) {
    const bd_gguf_kv *kv = bd_gguf_find(f, key);
    int64_t v;
    if (!kv || !load_i64(kv->type, kv->data, &v)) return false;
    *out = v;
    return true;
}

bool bd_gguf_get_f64(const bd_gguf_file *f, const char *key, double *out) {
    const bd_gguf_kv *kv = bd_gguf_find(f, key);
    double v;
    if (!kv || !load_f64(kv->type, kv->data, &v)) return false;
    *out = v;
    return true;
}

bool bd_gguf_get_f32(const bd_gguf_file *f, const char *key, float *out) {
    double v;
    if (!bd_gguf_get_f64(f, key, &v)) return false;
    *out = (float)v;
    return true;
}

bool bd_gguf_get_bool(const bd_gguf_file *f, const char *key, bool *out) {
    const bd_gguf_kv *kv = bd_gguf_find(f, key);
    if (!kv || kv->type != GGUF_VTYPE_BOOL) return false;
    *out = kv->data[0] != 0;
    return true;
}

bool bd_gguf_get_str(const bd_gguf_file *f, const char *key, const char **s, uint64_t *len) {
    const bd_gguf_kv *kv = bd_gguf_find(f, key);
    if (!kv || kv->type != GGUF_VTYPE_STRING) return false;
    *s = kv->str;
    *len = kv->str_len;
    return true;
}

bool bd_gguf_get_strz(const bd_gguf_file *f, const char *key, char *buf, size_t bufsize) {
    const char *s;
    uint64_t len;
    if (!buf || bufsize == 0 || !bd_gguf_get_str(f, key, &s, &len)) return false;
    size_t n = len < bufsize - 1 ? (size_t)len : bufsize - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return true;
}

/* Byte offset (from kv->data) of element i of an array of STRING/ARRAY, and
 * the element's encoded size. Uses the open-time table when there is one,
 * else walks (bounded by data_size: safe even for a hand-made bd_gguf_kv). */
static bool arr_elem(const bd_gguf_kv *kv, uint64_t i, uint64_t *off, uint64_t *size) {
    if (kv->type != GGUF_VTYPE_ARRAY || i >= kv->arr_count || kv->data_size < 12) return false;
    if (kv->arr_type != GGUF_VTYPE_STRING && kv->arr_type != GGUF_VTYPE_ARRAY) return false;
    uint64_t avail = kv->data_size - 12; /* element bytes */
    uint64_t pos = 0, sz;
    char why[8];
    if (kv->arr_offsets) {
        pos = kv->arr_offsets[i];
        if (pos > avail) return false;
    } else {
        for (uint64_t k = 0; k < i; k++) {
            if (!bd_gguf_value_walk(kv->data + pos, avail - pos, kv->arr_type, 1, 0, &sz, why, sizeof why))
                return false;
            pos += sz;
        }
    }
    if (!bd_gguf_value_walk(kv->data + pos, avail - pos, kv->arr_type, 1, 0, &sz, why, sizeof why)) return false;
    *off = pos;
    *size = sz;
    return true;
}

bool bd_gguf_arr_str(const bd_gguf_kv *kv, uint64_t i, const char **s, uint64_t *len) {
    uint64_t off, sz;
    if (!kv || kv->arr_type != GGUF_VTYPE_STRING || !arr_elem(kv, i, &off, &sz)) return false;
    *s = (const char *)kv->data + off + 8;
    *len = sz - 8;
    return true;
}

bool bd_gguf_arr_arr(const bd_gguf_kv *kv, uint64_t i, bd_gguf_kv *out) {
    uint64_t off, sz;
    if (!kv || kv->arr_type != GGUF_VTYPE_ARRAY || !arr_elem(kv, i, &off, &sz)) return false;
    const uint8_t *p = kv->data + off;
    memset(out, 0, sizeof *out);
    out->key = kv->key;
    out->key_offset = kv->key_offset;
    out->type = GGUF_VTYPE_ARRAY;
    out->offset = kv->offset + 12 + off;
    out->arr_type = (enum bd_gguf_vtype)bd_gguf_le32(p);
    out->arr_count = bd_gguf_le64(p + 4);
    out->data = p + 12;
    out->data_size = sz;
    return true;
}

/* Element i of a fixed-size numeric array, or NULL. */
static const uint8_t *arr_scalar(const bd_gguf_kv *kv, uint64_t i) {
    if (!kv || kv->type != GGUF_VTYPE_ARRAY || i >= kv->arr_count) return NULL;
    size_t es = bd_gguf_vtype_size(kv->arr_type);
    if (!es) return NULL;
    /* i < arr_count and the array was validated, so i*es fits. Still
     * guard against hand-made descriptors. */
    uint64_t off;
    if (!bd_mul_ok(i, es, &off) || kv->data_size < 12 || off + es > kv->data_size - 12) return NULL;
    return kv->data + off;
}

bool bd_gguf_arr_f64(const bd_gguf_kv *kv, uint64_t i, double *out) {
    const uint8_t *p = arr_scalar(kv, i);
    if (!p) return false;
    if (load_f64(kv->arr_type, p, out)) return true;
    if (kv->arr_type == GGUF_VTYPE_BOOL) {
        *out = p[0] != 0;
        return true;
    }
    uint64_t u = 0;
    int64_t s = 0;
    bool sg;
    if (!load_int(kv->arr_type, p, &u, &s, &sg)) return false;
    *out = sg ? (double)s : (double)u;
    return true;
}

bool bd_gguf_arr_i64(const bd_gguf_kv *kv, uint64_t i, int64_t *out) {
    const uint8_t *p = arr_scalar(kv, i);
    if (!p) return false;
    if (kv->arr_type == GGUF_VTYPE_BOOL) {
        *out = p[0] != 0;
        return true;
    }
    return load_i64(kv->arr_type, p, out);
}
