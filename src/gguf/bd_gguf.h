/*
 * bd_gguf.h - GGUF v2/v3 reader (hostile input) and writer.
 *
 * Reader contract: bd_gguf_open() maps the file read-only and validates the
 * whole header, metadata and tensor table before returning: every length,
 * count and offset is checked against the file size with overflow-safe
 * arithmetic, tensor extents must lie inside the data section and must not
 * overlap. On failure it returns NULL and writes a message naming the field
 * and its byte offset. Nothing returned points outside the mapping.
 *
 * All strings and tensor data handed out are *borrowed from the mapping*
 * (not NUL-terminated where a length is given) and live until bd_gguf_close().
 * Keys and tensor names are also available NUL-terminated (copied at open).
 */
#ifndef BD_GGUF_H
#define BD_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum bd_gguf_vtype {
    GGUF_VTYPE_UINT8 = 0,
    GGUF_VTYPE_INT8 = 1,
    GGUF_VTYPE_UINT16 = 2,
    GGUF_VTYPE_INT16 = 3,
    GGUF_VTYPE_UINT32 = 4,
    GGUF_VTYPE_INT32 = 5,
    GGUF_VTYPE_FLOAT32 = 6,
    GGUF_VTYPE_BOOL = 7,
    GGUF_VTYPE_STRING = 8,
    GGUF_VTYPE_ARRAY = 9,
    GGUF_VTYPE_UINT64 = 10,
    GGUF_VTYPE_INT64 = 11,
    GGUF_VTYPE_FLOAT64 = 12,
    GGUF_VTYPE_COUNT
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
/* Arrays nested deeper than this (an array is depth 1) are refused. */
#define GGUF_MAX_ARRAY_DEPTH 8

typedef struct bd_gguf_file bd_gguf_file;

/* One metadata value as found in the file. For scalars, `data` points at
 * the little-endian bytes. For STRING, str/str_len. For ARRAY, arr_type,
 * arr_count and `data` at the first element; arrays of strings and nested
 * arrays are walked with bd_gguf_arr_* below.
 * Encoding: the value's bytes in the file start at `offset` (the u64 length
 * of a STRING, the u32 element type of an ARRAY) and take `data_size` bytes
 * in all, so for STRING data == str == start + 8, for ARRAY data == start +
 * 12, for scalars data == start. */
typedef struct bd_gguf_kv {
    const char *key;       /* NUL-terminated copy */
    enum bd_gguf_vtype type;
    const uint8_t *data;   /* into the mapping */
    uint64_t offset;       /* byte offset of the value in the file */
    const char *str;       /* STRING only: bytes, not NUL-terminated */
    uint64_t str_len;
    enum bd_gguf_vtype arr_type; /* ARRAY only */
    uint64_t arr_count;       /* ARRAY only */
    uint64_t data_size;       /* bytes the value occupies in the file */
    uint64_t key_offset;      /* byte offset of the key (its length field) in the file */
    /* ARRAY of STRING or of ARRAY read from a file: offset of element i
     * from `data`, [arr_count] entries, owned by the bd_gguf_file. NULL for
     * other values and for arrays nested in arrays (walked linearly). */
    const uint64_t *arr_offsets;
} bd_gguf_kv;

typedef struct bd_gguf_tensor {
    const char *name;      /* NUL-terminated copy */
    uint32_t n_dims;       /* 1..4 */
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] contiguous; unused dims are 1 */
    uint32_t type;         /* ggml type id (see tensor/tensor.h) */
    uint64_t offset;       /* relative to the data section */
    uint64_t nbytes;
    const void *data;      /* into the mapping */
    uint64_t info_offset;  /* byte offset of this tensor's entry in the tensor table */
} bd_gguf_tensor;

/* Open and validate. Returns NULL with a message on any problem. */
bd_gguf_file *bd_gguf_open(const char *path, char *err, size_t errlen);
/* Same, over a caller-owned buffer that must outlive the handle (used by
 * the fuzzer and tests). */
bd_gguf_file *bd_gguf_open_memory(const void *buf, uint64_t size, char *err, size_t errlen);
void bd_gguf_close(bd_gguf_file *f);
/* Read the whole file in now, mapped or copied into 2 MiB pages (base.h's
 * bd_fmap_prefetch); nothing for a file opened from memory. */
void bd_gguf_prefetch(bd_gguf_file *f);
/* The tensor data made writable (on) or read-only again, where the prefetch
 * copied the file into private memory; false otherwise (base.h's
 * bd_fmap_set_writable). */
bool bd_gguf_set_writable(bd_gguf_file *f, bool on);
/* Bytes [p, p + n) of the file's tensor data made writable (on) or
 * read-only again, copied or mapped (private pages; base.h's
 * bd_fmap_set_range_writable); false for a file opened from memory. */
bool bd_gguf_set_range_writable(bd_gguf_file *f, const void *p, size_t n, bool on);
/* false once a read of the file's mapping found it truncated (base.h's
 * SIGBUS guard); true for a file opened from memory. */
bool bd_gguf_intact(const bd_gguf_file *f);

uint32_t bd_gguf_version(const bd_gguf_file *f);
uint32_t bd_gguf_alignment(const bd_gguf_file *f);
uint64_t bd_gguf_data_offset(const bd_gguf_file *f); /* start of the data section */
uint64_t bd_gguf_file_size(const bd_gguf_file *f);

int64_t bd_gguf_kv_count(const bd_gguf_file *f);
const bd_gguf_kv *bd_gguf_kv_at(const bd_gguf_file *f, int64_t i);
const bd_gguf_kv *bd_gguf_find(const bd_gguf_file *f, const char *key); /* NULL if absent */

int64_t bd_gguf_tensor_count(const bd_gguf_file *f);
const bd_gguf_tensor *bd_gguf_tensor_at(const bd_gguf_file *f, int64_t i);
const bd_gguf_tensor *bd_gguf_find_tensor(const bd_gguf_file *f, const char *name);

/* Typed getters. They return false (and leave *out alone) when the key is
 * missing or has an incompatible type. Integer getters accept any integer
 * vtype whose value fits; bd_gguf_get_f32 accepts FLOAT32/FLOAT64. */
bool bd_gguf_get_u32(const bd_gguf_file *f, const char *key, uint32_t *out);
bool bd_gguf_get_i64(const bd_gguf_file *f, const char *key, int64_t *out);
bool bd_gguf_get_f32(const bd_gguf_file *f, const char *key, float *out);
bool bd_gguf_get_bool(const bd_gguf_file *f, const char *key, bool *out);
/* Any integer vtype whose value is >= 0. */
bool bd_gguf_get_u64(const bd_gguf_file *f, const char *key, uint64_t *out);
/* FLOAT32 or FLOAT64. */
bool bd_gguf_get_f64(const bd_gguf_file *f, const char *key, double *out);
/* String: borrowed bytes + length. */
bool bd_gguf_get_str(const bd_gguf_file *f, const char *key, const char **s, uint64_t *len);
/* Copy a string value NUL-terminated into buf (truncated to bufsize-1). */
bool bd_gguf_get_strz(const bd_gguf_file *f, const char *key, char *buf, size_t bufsize);

/* Array access. For arrays of strings the reader precomputes an offset
 * table at open time, so element access is O(1). */
bool bd_gguf_arr_str(const bd_gguf_kv *kv, uint64_t i, const char **s, uint64_t *len);
/* Numeric element i converted to double / int64 (false if not numeric or
 * out of range). */
bool bd_gguf_arr_f64(const bd_gguf_kv *kv, uint64_t i, double *out);
bool bd_gguf_arr_i64(const bd_gguf_kv *kv, uint64_t i, int64_t *out);
/* Nested arrays: element i of an ARRAY of ARRAY, described in *out (its key
 * is kv's; its arr_offsets is NULL, so string access inside it is linear). */
bool bd_gguf_arr_arr(const bd_gguf_kv *kv, uint64_t i, bd_gguf_kv *out);

/* Names for messages and `inspect`. */
const char *bd_gguf_vtype_name(enum bd_gguf_vtype t);
/* Bytes of one fixed-size value (1, 2, 4 or 8); 0 for STRING, ARRAY and
 * invalid ids. */
size_t bd_gguf_vtype_size(enum bd_gguf_vtype t);

/* ------------------------------------------------------------------------
 * Writer
 *
 * Collects metadata and tensors in memory (tensor data is copied), then
 * writes a GGUF v3 file. bd_gguf_writer_write_file writes to PATH.tmp.XXXXXX
 * and renames over PATH only after a successful fsync, so a failed write
 * never leaves a half-written file in place of a good one.
 * Setters return false only on allocation failure or a duplicate key/name.
 * ---------------------------------------------------------------------- */

typedef struct bd_gguf_writer bd_gguf_writer;

bd_gguf_writer *bd_gguf_writer_create(void);
void bd_gguf_writer_free(bd_gguf_writer *w);

bool bd_gguf_writer_set_u8(bd_gguf_writer *w, const char *key, uint8_t v);
bool bd_gguf_writer_set_i8(bd_gguf_writer *w, const char *key, int8_t v);
bool bd_gguf_writer_set_u16(bd_gguf_writer *w, const char *key, uint16_t v);
bool bd_gguf_writer_set_i16(bd_gguf_writer *w, const char *key, int16_t v);
bool bd_gguf_writer_set_u32(bd_gguf_writer *w, const char *key, uint32_t v);
bool bd_gguf_writer_set_i32(bd_gguf_writer *w, const char *key, int32_t v);
bool bd_gguf_writer_set_u64(bd_gguf_writer *w, const char *key, uint64_t v);
bool bd_gguf_writer_set_i64(bd_gguf_writer *w, const char *key, int64_t v);
bool bd_gguf_writer_set_f32(bd_gguf_writer *w, const char *key, float v);
bool bd_gguf_writer_set_f64(bd_gguf_writer *w, const char *key, double v);
bool bd_gguf_writer_set_bool(bd_gguf_writer *w, const char *key, bool v);
bool bd_gguf_writer_set_str(bd_gguf_writer *w, const char *key, const char *v);
/* Array of fixed-size scalars: elem_type must not be STRING/ARRAY; data
 * holds count elements of that type, little-endian. */
bool bd_gguf_writer_set_arr(bd_gguf_writer *w, const char *key, enum bd_gguf_vtype elem_type,
                         const void *data, uint64_t count);
bool bd_gguf_writer_set_arr_str(bd_gguf_writer *w, const char *key, const char *const *strs,
                             uint64_t count);
/* Copy one key/value read by bd_gguf_open (used to copy tokenizer metadata;
 * loop over bd_gguf_kv_at). A key already present in w is an error: check
 * with bd_gguf_writer_has_key first to skip it. */
bool bd_gguf_writer_copy_kv(bd_gguf_writer *w, const bd_gguf_kv *kv);
/* True if the writer already holds key. */
bool bd_gguf_writer_has_key(const bd_gguf_writer *w, const char *key);
/* A value given as its GGUF encoding (as described at bd_gguf_kv: the bytes
 * from `offset`, data_size long). The encoding is validated; false when it
 * is malformed or does not take exactly size bytes. */
bool bd_gguf_writer_set_raw(bd_gguf_writer *w, const char *key, enum bd_gguf_vtype type,
                         const void *enc, uint64_t size);
/* Set general.alignment (must be a power of two); default 32. Replaces an
 * earlier general.alignment instead of failing as a duplicate. */
bool bd_gguf_writer_set_alignment(bd_gguf_writer *w, uint32_t alignment);
/* Add a tensor; data holds nbytes (must equal the size its type/shape
 * implies). The data is copied. */
bool bd_gguf_writer_add_tensor(bd_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                            const uint64_t *ne, const void *data, uint64_t nbytes);
/* As bd_gguf_writer_add_tensor, but the data is borrowed, not copied: it must
 * stay valid until the writer is freed (for copying tensors out of a
 * mapped bd_gguf_file without holding a second copy in memory). */
bool bd_gguf_writer_add_tensor_ref(bd_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                const uint64_t *ne, const void *data, uint64_t nbytes);
/* Streaming tensors (synthetic models far larger than memory): the data
 * is produced at write time. The producer is called once, from
 * bd_gguf_writer_write_file, and must pass exactly nbytes in total to emit
 * (any number of calls, in order); it returns false with a message on
 * failure, which fails the write. ctx must stay valid until then. */
typedef bool (*bd_gguf_emit_fn)(void *sink, const void *buf, uint64_t len);
typedef bool (*bd_gguf_tensor_producer)(void *ctx, bd_gguf_emit_fn emit, void *sink, char *err,
                                     size_t errlen);
bool bd_gguf_writer_add_tensor_stream(bd_gguf_writer *w, const char *name, uint32_t type,
                                   uint32_t n_dims, const uint64_t *ne, uint64_t nbytes,
                                   bd_gguf_tensor_producer produce, void *ctx);
/* Write the file atomically. */
bool bd_gguf_writer_write_file(bd_gguf_writer *w, const char *path, char *err, size_t errlen);

#endif
