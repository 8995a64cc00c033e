/*
 * gguf_write.c - GGUF v3 writer.
 *
 * Every key/value is kept as (key, type, encoded value bytes), the same
 * encoding the file uses, so copying a value out of a bd_gguf_file (strings,
 * string arrays, nested arrays) is one memcpy of its bytes. Tensors keep
 * their data (copied or borrowed) until bd_gguf_writer_write_file lays them
 * out in insertion order, each at a multiple of the alignment.
 *
 * The output goes to PATH.tmp.XXXXXX in the same directory, is fsync'ed,
 * then renamed over PATH; on any failure the temporary file is removed,
 * so PATH is either the old file or the complete new one.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/base.h"
#include "../tensor/tensor.h"
#include "bd_gguf.h"
#include "gguf_internal.h"

typedef struct wkv {
    char *key;
    enum bd_gguf_vtype type;
    uint8_t *enc; /* [len] encoded value */
    uint64_t len;
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    const void *data; /* [nbytes]; == owned when copied */
    void *owned;
    uint64_t nbytes;
    bd_gguf_tensor_producer produce; /* streaming tensor: data produced at write time */
    void *produce_ctx;
} wtensor;

struct bd_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

bd_gguf_writer *bd_gguf_writer_create(void) { return calloc(1, sizeof(bd_gguf_writer)); }

void bd_gguf_writer_free(bd_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].enc);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].owned);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

static wkv *find_kv(const bd_gguf_writer *w, const char *key) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) return &w->kv[i];
    return NULL;
}

bool bd_gguf_writer_has_key(const bd_gguf_writer *w, const char *key) {
    return w && key && find_kv(w, key) != NULL;
}

/* Append key with an encoded value (copied). False on duplicate/OOM. */
static bool add_kv(bd_gguf_writer *w, const char *key, enum bd_gguf_vtype type, const void *enc,
                   uint64_t len) {
    if (!w || !key || find_kv(w, key)) return false;
    if (len > SIZE_MAX) return false;
    if (!bd_grow(&w->kv, &w->cap_kv, w->n_kv + 1, sizeof *w->kv)) return false;
    char *k = strdup(key);
    uint8_t *e = malloc(len ? (size_t)len : 1);
    if (!k || !e) {
        free(k);
        free(e);
        return false;
    }
    if (len) memcpy(e, enc, (size_t)len);
    w->kv[w->n_kv++] = (wkv){k, type, e, len};
    return true;
}

static void put_le(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static bool set_scalar(bd_gguf_writer *w, const char *key, enum bd_gguf_vtype t, uint64_t bits) {
    uint8_t b[8];
    int n = (int)bd_gguf_vtype_size(t);
    put_le(b, bits, n);
    return add_kv(w, key, t, b, (uint64_t)n);
}

bool bd_gguf_writer_set_u8(bd_gguf_writer *w, const char *key, uint8_t v) {
    return set_scalar(w, key, GGUF_VTYPE_UINT8, v);
}
bool bd_gguf_writer_set_i8(bd_gguf_writer *w, const char *key, int8_t v) {
    return set_scalar(w, key, GGUF_VTYPE_INT8, (uint8_t)v);
}
bool bd_gguf_writer_set_u16(bd_gguf_writer *w, const char *key, uint16_t v) {
    return set_scalar(w, key, GGUF_VTYPE_UINT16, v);
}
bool bd_gguf_writer_set_i16(bd_gguf_writer *w, const char *key, int16_t v) {
    return set_scalar(w, key, GGUF_VTYPE_INT16, (uint16_t)v);
}
bool bd_gguf_writer_set_u32(bd_gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, GGUF_VTYPE_UINT32, v);
}
bool bd_gguf_writer_set_i32(bd_gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, GGUF_VTYPE_INT32, (uint32_t)v);
}
bool bd_gguf_writer_set_u64(bd_gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, GGUF_VTYPE_UINT64, v);
}
bool bd_gguf_writer_set_i64(bd_gguf_writer *w, const char *key, int64_t v) {
    return set_scalar(w, key, GGUF_VTYPE_INT64, (uint64_t)v);
}
bool bd_gguf_writer_set_f32(bd_gguf_writer *w, const char *key, float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    return set_scalar(w, key, GGUF_VTYPE_FLOAT32, b);
}
bool bd_gguf_writer_set_f64(bd_gguf_writer *w, const char *key, double v) {
    uint64_t b;
    memcpy(&b, &v, 8);
    return set_scalar(w, key, GGUF_VTYPE_FLOAT64, b);
}
bool bd_gguf_writer_set_bool(bd_gguf_writer *w, const char *key, bool v) {
    return set_scalar(w, key, GGUF_VTYPE_BOOL, v ? 1 : 0);
}

bool bd_gguf_writer_set_str(bd_gguf_writer *w, const char *key, const char *v) {
    if (!v) return false;
    size_t n = strlen(v);
    uint8_t *e = malloc(8 + n);
    if (!e) return false;
    put_le(e, n, 8);
    memcpy(e + 8, v, n);
    bool ok = add_kv(w, key, GGUF_VTYPE_STRING, e, 8 + n);
    free(e);
    return ok;
}

bool bd_gguf_writer_set_arr(bd_gguf_writer *w, const char *key, enum bd_gguf_vtype elem_type,
                         const void *data, uint64_t count) {
    size_t es = bd_gguf_vtype_size(elem_type);
    uint64_t bytes, total;
    if (!es || !bd_mul_ok(count, es, &bytes) || !bd_add_ok(bytes, 12, &total) || total > SIZE_MAX ||
        (count && !data))
        return false;
    uint8_t *e = malloc((size_t)total);
    if (!e) return false;
    put_le(e, (uint64_t)elem_type, 4);
    put_le(e + 4, count, 8);
    if (bytes) memcpy(e + 12, data, (size_t)bytes);
    bool ok = add_kv(w, key, GGUF_VTYPE_ARRAY, e, total);
    free(e);
    return ok;
}

bool bd_gguf_writer_set_arr_str(bd_gguf_writer *w, const char *key, const char *const *strs,
                             uint64_t count) {
    if (count && !strs) return false;
    uint64_t total = 12;
    for (uint64_t i = 0; i < count; i++) {
        if (!strs[i] || !bd_add_ok(total, 8 + (uint64_t)strlen(strs[i]), &total)) return false;
    }
    if (total > SIZE_MAX) return false;
    uint8_t *e = malloc((size_t)total);
    if (!e) return false;
    put_le(e, GGUF_VTYPE_STRING, 4);
    put_le(e + 4, count, 8);
    size_t pos = 12;
    for (uint64_t i = 0; i < count; i++) {
        size_t n = strlen(strs[i]);
        put_le(e + pos, n, 8);
        memcpy(e + pos + 8, strs[i], n);
        pos += 8 + n;
    }
    bool ok = add_kv(w, key, GGUF_VTYPE_ARRAY, e, total);
    free(e);
    return ok;
}

bool bd_gguf_writer_set_raw(bd_gguf_writer *w, const char *key, enum bd_gguf_vtype type, const void *enc,
                         uint64_t size) {
    uint64_t used;
    char why[200];
    if ((unsigned)type >= GGUF_VTYPE_COUNT || (size && !enc)) return false;
    if (!bd_gguf_value_walk(enc, size, type, 0, 0, &used, why, sizeof why) || used != size) return false;
    return add_kv(w, key, type, enc, size);
}

bool bd_gguf_writer_copy_kv(bd_gguf_writer *w, const bd_gguf_kv *kv) {
    if (!kv || !kv->key || !kv->data) return false;
    /* The encoding starts before `data` for strings and arrays. */
    size_t head = kv->type == GGUF_VTYPE_STRING ? 8 : kv->type == GGUF_VTYPE_ARRAY ? 12 : 0;
    return bd_gguf_writer_set_raw(w, kv->key, kv->type, kv->data - head, kv->data_size);
}

bool bd_gguf_writer_set_alignment(bd_gguf_writer *w, uint32_t alignment) {
    if (!w || alignment == 0 || (alignment & (alignment - 1)) != 0) return false;
    wkv *kv = find_kv(w, "general.alignment");
    if (kv) {
        uint8_t *e = malloc(4);
        if (!e) return false;
        put_le(e, alignment, 4);
        free(kv->enc);
        kv->enc = e;
        kv->len = 4;
        kv->type = GGUF_VTYPE_UINT32;
        return true;
    }
    return bd_gguf_writer_set_u32(w, "general.alignment", alignment);
}

static bool add_tensor(bd_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                       const uint64_t *ne, const void *data, uint64_t nbytes, bool copy) {
    if (!w || !name || !ne || n_dims < 1 || n_dims > GGUF_MAX_DIMS || (nbytes && !data)) return false;
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return false;
    uint64_t bytes, nel = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] > (uint64_t)INT64_MAX || !bd_mul_ok(nel, ne[d], &nel) || nel > (uint64_t)INT64_MAX)
            return false;
    if (!bd_row_size(type, (int64_t)ne[0], &bytes)) return false;
    for (uint32_t d = 1; d < n_dims; d++)
        if (!bd_mul_ok(bytes, ne[d], &bytes)) return false;
    if (bytes != nbytes || nbytes > SIZE_MAX) return false;
    if (!bd_grow(&w->t, &w->cap_t, w->n_t + 1, sizeof *w->t)) return false;
    wtensor t = {0};
    t.name = strdup(name);
    if (!t.name) return false;
    t.type = type;
    t.n_dims = n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t.ne[d] = (uint32_t)d < n_dims ? ne[d] : 1;
    t.nbytes = nbytes;
    if (copy && nbytes) {
        t.owned = malloc((size_t)nbytes);
        if (!t.owned) {
            free(t.name);
            return false;
        }
        memcpy(t.owned, data, (size_t)nbytes);
        t.data = t.owned;
    } else {
        t.data = data;
    }
    w->t[w->n_t++] = t;
    return true;
}

bool bd_gguf_writer_add_tensor(bd_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                            const uint64_t *ne, const void *data, uint64_t nbytes) {
    return add_tensor(w, name, type, n_dims, ne, data, nbytes, true);
}

bool bd_gguf_writer_add_tensor_ref(bd_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                const uint64_t *ne, const void *data, uint64_t nbytes) {
    return add_tensor(w, name, type, n_dims, ne, data, nbytes, false);
}

bool bd_gguf_writer_add_tensor_stream(bd_gguf_writer *w, const char *name, uint32_t type,
                                   uint32_t n_dims, const uint64_t *ne, uint64_t nbytes,
                                   bd_gguf_tensor_producer produce, void *ctx) {
    /* Checked as a borrowed tensor with a dummy non-NULL data pointer. */
    static const uint8_t none;
    if (!produce || !add_tensor(w, name, type, n_dims, ne, &none, nbytes, false)) return false;
    w->t[w->n_t - 1].data = NULL;
    w->t[w->n_t - 1].produce = produce;
    w->t[w->n_t - 1].produce_ctx = ctx;
    return true;
}

/* ------------------------------------------------------------------------
 * Output
 * ---------------------------------------------------------------------- */

typedef struct out {
    FILE *fp;
    uint64_t pos;
    bool bad;
    char why[256]; /* a streaming producer's message, "" otherwise */
} out;

static void out_bytes(out *o, const void *p, uint64_t n) {
    if (o->bad || n == 0) return;
    if (fwrite(p, 1, (size_t)n, o->fp) != (size_t)n) o->bad = true;
    o->pos += n;
}

static void out_le(out *o, uint64_t v, int n) {
    uint8_t b[8];
    put_le(b, v, n);
    out_bytes(o, b, (uint64_t)n);
}

static void out_pad(out *o, uint64_t align) {
    static const uint8_t zeros[256];
    uint64_t rem = o->pos % align;
    if (rem == 0) return;
    uint64_t n = align - rem;
    while (n > 0) {
        uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        out_bytes(o, zeros, k);
        n -= k;
    }
}

/* bd_gguf_emit_fn for streaming tensors. */
static bool out_emit(void *sink, const void *buf, uint64_t len) {
    out *o = sink;
    out_bytes(o, buf, len);
    return !o->bad;
}

static bool write_all(const bd_gguf_writer *w, out *o, uint32_t align) {
    out_bytes(o, "GGUF", 4);
    out_le(o, 3, 4);
    out_le(o, w->n_t, 8);
    out_le(o, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        size_t n = strlen(w->kv[i].key);
        out_le(o, n, 8);
        out_bytes(o, w->kv[i].key, n);
        out_le(o, (uint64_t)w->kv[i].type, 4);
        out_bytes(o, w->kv[i].enc, w->kv[i].len);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        size_t n = strlen(t->name);
        out_le(o, n, 8);
        out_bytes(o, t->name, n);
        out_le(o, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) out_le(o, t->ne[d], 8);
        out_le(o, t->type, 4);
        out_le(o, off, 8);
        uint64_t padded = (t->nbytes + align - 1) / align * align;
        off += padded;
    }
    out_pad(o, align);
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if (t->produce) {
            uint64_t start = o->pos;
            if (!t->produce(t->produce_ctx, out_emit, o, o->why, sizeof o->why)) {
                if (!o->why[0]) snprintf(o->why, sizeof o->why, "producing tensor %s failed", t->name);
                return false;
            }
            if (!o->bad && o->pos - start != t->nbytes) {
                snprintf(o->why, sizeof o->why, "tensor %s: producer wrote %" PRIu64 " of %" PRIu64 " bytes",
                         t->name, o->pos - start, t->nbytes);
                return false;
            }
        } else {
            out_bytes(o, t->data, t->nbytes);
        }
        out_pad(o, align);
    }
    return !o->bad;
}

bool bd_gguf_writer_write_file(bd_gguf_writer *w, const char *path, char *err, size_t errlen) {
    if (!w || !path) return bd_err(err, errlen, "gguf: write: no writer or path");
    uint32_t align = GGUF_DEFAULT_ALIGNMENT;
    const wkv *a = find_kv(w, "general.alignment");
    if (a) {
        if (a->type != GGUF_VTYPE_UINT32 || a->len != 4)
            return bd_err(err, errlen, "gguf: write %s: general.alignment must be uint32", path);
        align = bd_gguf_le32(a->enc);
        if (align == 0 || (align & (align - 1)) != 0)
            return bd_err(err, errlen, "gguf: write %s: general.alignment %" PRIu32 " is not a power of two",
                          path, align);
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) return bd_err(err, errlen, "gguf: write %s: out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return bd_err(err, errlen, "gguf: write %s: cannot create temporary file: %s", path, strerror(e));
    }
    /* mkstemp makes the file 0600; a model file is ordinary data. */
    (void)fchmod(fd, 0644);
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return bd_err(err, errlen, "gguf: write %s: %s", path, strerror(e));
    }
    out o = {fp, 0, false, ""};
    bool ok = write_all(w, &o, align);
    int e = errno;
    if (ok && fflush(fp) != 0) ok = false, e = errno;
    if (ok && fsync(fileno(fp)) != 0) ok = false, e = errno;
    if (fclose(fp) != 0 && ok) ok = false, e = errno;
    if (ok && rename(tmp, path) != 0) ok = false, e = errno;
    if (!ok) {
        unlink(tmp);
        free(tmp);
        if (o.why[0]) return bd_err(err, errlen, "gguf: write %s: %s", path, o.why);
        return bd_err(err, errlen, "gguf: write %s: %s", path, strerror(e ? e : EIO));
    }
    free(tmp);
    /* Make the rename itself durable: fsync the directory (best effort). */
    char *dir = strdup(path);
    if (dir) {
        char *slash = strrchr(dir, '/');
        const char *d = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
        int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    return true;
}
