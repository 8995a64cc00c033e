/*
 * test_gguf.c - GGUF reader/writer: round trips, hostile files, fixtures.
 *
 * Malformed files are built byte by byte by the small encoder below (not by
 * the writer under test), so reader tests do not depend on the writer.
 * Fixture facts come from the fixtures' READMEs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "gguf/bd_gguf.h"
#include "tensor/tensor.h"

/* ------------------------------------------------------------------------
 * Byte builder (independent little-endian encoder)
 * ---------------------------------------------------------------------- */

typedef struct bb {
    uint8_t *p;
    size_t n, cap;
} bb;

static void bb_bytes(bb *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void bb_le(bb *b, uint64_t v, int n) {
    uint8_t t[8];
    for (int i = 0; i < n; i++) t[i] = (uint8_t)(v >> (8 * i));
    bb_bytes(b, t, (size_t)n);
}
static void bb_u32(bb *b, uint32_t v) { bb_le(b, v, 4); }
static void bb_u64(bb *b, uint64_t v) { bb_le(b, v, 8); }
static void bb_str(bb *b, const char *s) {
    bb_u64(b, strlen(s));
    bb_bytes(b, s, strlen(s));
}
static void bb_pad(bb *b, size_t align) {
    while (b->n % align) bb_le(b, 0, 1);
}
static void bb_header(bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bb_bytes(b, "GGUF", 4);
    bb_u32(b, version);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}
static void bb_kv_u32(bb *b, const char *key, uint32_t v) {
    bb_str(b, key);
    bb_u32(b, 4);
    bb_u32(b, v);
}
static void bb_kv_str(bb *b, const char *key, const char *v) {
    bb_str(b, key);
    bb_u32(b, 8);
    bb_str(b, v);
}
static void bb_tensor(bb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                      uint64_t offset) {
    bb_str(b, name);
    bb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) bb_u64(b, ne[d]);
    bb_u32(b, type);
    bb_u64(b, offset);
}
static void bb_data(bb *b, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; i++) bb_le(b, (uint8_t)(seed + i * 7), 1);
}

/* A small valid file: 3 keys, 2 f32 tensors, data ends the file exactly.
 *   a: ne {8}   -> 32 bytes at offset 0
 *   b: ne {4,2} -> 32 bytes at offset 32 */
static void build_valid(bb *b) {
    bb_header(b, 3, 2, 3);
    bb_kv_str(b, "general.architecture", "llama");
    bb_kv_u32(b, "general.alignment", 32);
    bb_str(b, "test.words");
    bb_u32(b, 9);  /* ARRAY */
    bb_u32(b, 8);  /* of STRING */
    bb_u64(b, 3);
    bb_str(b, "one");
    bb_str(b, "");
    bb_str(b, "three");
    bb_tensor(b, "a", 1, (uint64_t[]){8}, 0, 0);
    bb_tensor(b, "b", 2, (uint64_t[]){4, 2}, 0, 32);
    bb_pad(b, 32);
    bb_data(b, 64, 1);
}

/* Expect failure with a message containing each non-NULL needle. */
static void expect_fail(bb *b, const char *n1, const char *n2, const char *n3) {
    char err[512];
    void *copy = malloc(b->n ? b->n : 1);
    memcpy(copy, b->p, b->n);
    err[0] = '\0';
    bd_gguf_file *f = bd_gguf_open_memory(copy, b->n, err, sizeof err);
    if (f) {
        bd_gguf_close(f);
        free(copy);
        fail_msg("file unexpectedly accepted (wanted '%s')", n1 ? n1 : "");
    }
    free(copy);
    assert_true(strncmp(err, "gguf: ", 6) == 0);
    const char *needles[3] = {n1, n2, n3};
    for (int i = 0; i < 3; i++)
        if (needles[i] && !strstr(err, needles[i])) fail_msg("error '%s' lacks '%s'", err, needles[i]);
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ------------------------------------------------------------------------
 * Hand-built files
 * ---------------------------------------------------------------------- */

static void test_handmade_valid(void **state) {
    (void)state;
    bb b = {0};
    build_valid(&b);
    char err[512];
    void *copy = malloc(b.n);
    memcpy(copy, b.p, b.n);
    bd_gguf_file *f = bd_gguf_open_memory(copy, b.n, err, sizeof err);
    if (!f) fail_msg("%s", err);
    assert_int_equal(bd_gguf_version(f), 3);
    assert_int_equal(bd_gguf_alignment(f), 32);
    assert_int_equal(bd_gguf_kv_count(f), 3);
    assert_int_equal(bd_gguf_tensor_count(f), 2);
    assert_int_equal(bd_gguf_file_size(f), b.n);
    assert_int_equal(bd_gguf_data_offset(f), b.n - 64);
    char s[16];
    assert_true(bd_gguf_get_strz(f, "general.architecture", s, sizeof s));
    assert_string_equal(s, "llama");
    /* truncating copy */
    assert_true(bd_gguf_get_strz(f, "general.architecture", s, 3));
    assert_string_equal(s, "ll");
    const bd_gguf_kv *kv = bd_gguf_find(f, "test.words");
    assert_non_null(kv);
    assert_int_equal(kv->arr_type, GGUF_VTYPE_STRING);
    assert_int_equal(kv->arr_count, 3);
    const char *w;
    uint64_t len;
    assert_true(bd_gguf_arr_str(kv, 2, &w, &len));
    assert_int_equal(len, 5);
    assert_memory_equal(w, "three", 5);
    assert_true(bd_gguf_arr_str(kv, 1, &w, &len));
    assert_int_equal(len, 0);
    assert_false(bd_gguf_arr_str(kv, 3, &w, &len));
    assert_false(bd_gguf_arr_i64(kv, 0, &(int64_t){0}));
    const bd_gguf_tensor *t = bd_gguf_find_tensor(f, "b");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 4);
    assert_int_equal(t->ne[1], 2);
    assert_int_equal(t->ne[2], 1);
    assert_int_equal(t->nbytes, 32);
    assert_ptr_equal(t->data, (uint8_t *)copy + b.n - 32);
    assert_null(bd_gguf_find_tensor(f, "c"));
    assert_null(bd_gguf_find(f, "general.name"));
    assert_null(bd_gguf_kv_at(f, 3));
    assert_null(bd_gguf_tensor_at(f, -1));
    bd_gguf_close(f);
    free(copy);
    free(b.p);
}

static void test_truncated_every_prefix(void **state) {
    (void)state;
    bb b = {0};
    build_valid(&b);
    char err[512];
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b.p, n);
        err[0] = '\0';
        bd_gguf_file *f = bd_gguf_open_memory(copy, n, err, sizeof err);
        if (f) fail_msg("prefix of %zu/%zu bytes accepted", n, b.n);
        assert_true(strncmp(err, "gguf: ", 6) == 0);
        free(copy);
    }
    free(b.p);
}

static void test_bad_magic_and_versions(void **state) {
    (void)state;
    bb b = {0};
    build_valid(&b);
    b.p[0] = 'X';
    expect_fail(&b, "magic", "byte 0", NULL);

    build_valid(&b);
    b.p[4] = 1;
    expect_fail(&b, "GGUF v1 is not supported", NULL, NULL);

    build_valid(&b);
    b.p[4] = 4;
    expect_fail(&b, "version", "4", NULL);

    build_valid(&b);
    b.p[4] = 0;
    expect_fail(&b, "version", NULL, NULL);

    build_valid(&b); /* version 3 written big-endian: 00 00 00 03 */
    b.p[4] = 0;
    b.p[7] = 3;
    expect_fail(&b, "big-endian", "version", NULL);

    /* Version 2 has the same layout and is accepted. */
    build_valid(&b);
    b.p[4] = 2;
    char err[512];
    bd_gguf_file *f = bd_gguf_open_memory(b.p, b.n, err, sizeof err);
    if (!f) fail_msg("%s", err);
    assert_int_equal(bd_gguf_version(f), 2);
    bd_gguf_close(f);
    free(b.p);
}

static void test_absurd_counts(void **state) {
    (void)state;
    const uint64_t huge = 1ull << 62;
    bb b = {0};
    bb_header(&b, 3, 0, huge);
    bb_kv_u32(&b, "x", 1);
    expect_fail(&b, "kv_count", "byte 16", NULL);

    bb_header(&b, 3, huge, 1);
    bb_kv_u32(&b, "x", 1);
    expect_fail(&b, "tensor_count", "byte 8", NULL);

    /* under the hard cap but still more than the bytes could hold */
    bb_header(&b, 3, 0, 1000);
    bb_kv_u32(&b, "x", 1);
    expect_fail(&b, "kv_count", "cannot fit", NULL);

    bb_header(&b, 3, 1000, 0);
    bb_data(&b, 100, 0);
    expect_fail(&b, "tensor_count", "cannot fit", NULL);

    bb_header(&b, 3, UINT64_MAX, UINT64_MAX);
    expect_fail(&b, "kv_count", NULL, NULL);

    /* key length */
    bb_header(&b, 3, 0, 1);
    bb_u64(&b, huge);
    bb_bytes(&b, "abcdefgh", 8);
    expect_fail(&b, "key #0", "byte 24", "name length");

    /* string value length */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "general.name");
    bb_u32(&b, 8);
    bb_u64(&b, huge);
    bb_bytes(&b, "abc", 3);
    expect_fail(&b, "general.name", "length", NULL);

    /* numeric array count */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "tokenizer.ggml.scores");
    bb_u32(&b, 9);
    bb_u32(&b, 6);
    bb_u64(&b, huge);
    bb_data(&b, 64, 0);
    expect_fail(&b, "tokenizer.ggml.scores", "do not fit", NULL);

    /* count * 8 overflows 64 bits */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "big");
    bb_u32(&b, 9);
    bb_u32(&b, 10);
    bb_u64(&b, (1ull << 61) + 1);
    bb_data(&b, 64, 0);
    expect_fail(&b, "'big'", NULL, NULL);

    /* string array count */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "tokenizer.ggml.tokens");
    bb_u32(&b, 9);
    bb_u32(&b, 8);
    bb_u64(&b, huge);
    bb_str(&b, "a");
    expect_fail(&b, "tokenizer.ggml.tokens", "array count", NULL);

    /* a string inside an array that is too long */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "tokenizer.ggml.tokens");
    bb_u32(&b, 9);
    bb_u32(&b, 8);
    bb_u64(&b, 2);
    bb_str(&b, "a");
    bb_u64(&b, huge);
    bb_data(&b, 16, 0);
    expect_fail(&b, "tokenizer.ggml.tokens", "element 1", "length");

    /* tensor name length */
    bb_header(&b, 3, 1, 0);
    bb_u64(&b, huge);
    bb_data(&b, 40, 0);
    expect_fail(&b, "tensor #0", "name length", NULL);
}

static void test_bad_values(void **state) {
    (void)state;
    bb b = {0};
    /* unknown value type */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "k.weird");
    bb_u32(&b, 13);
    bb_u32(&b, 0);
    expect_fail(&b, "k.weird", "unknown value type 13", NULL);

    /* unknown array element type */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "k.arr");
    bb_u32(&b, 9);
    bb_u32(&b, 77);
    bb_u64(&b, 0);
    expect_fail(&b, "k.arr", "element type 77", NULL);

    /* duplicate key */
    bb_header(&b, 3, 0, 2);
    bb_kv_u32(&b, "llama.block_count", 5);
    bb_kv_u32(&b, "llama.block_count", 6);
    expect_fail(&b, "llama.block_count", "duplicate", "byte 24");

    /* key with a NUL byte */
    bb_header(&b, 3, 0, 1);
    bb_u64(&b, 3);
    bb_bytes(&b, "a\0b", 3);
    bb_u32(&b, 4);
    bb_u32(&b, 1);
    expect_fail(&b, "NUL", NULL, NULL);

    /* nesting deeper than GGUF_MAX_ARRAY_DEPTH */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "k.deep");
    bb_u32(&b, 9);
    for (int d = 0; d < GGUF_MAX_ARRAY_DEPTH + 2; d++) {
        bb_u32(&b, 9);
        bb_u64(&b, 1);
    }
    bb_u32(&b, 4);
    bb_u64(&b, 0);
    expect_fail(&b, "k.deep", "nested deeper", NULL);

    /* alignment 3 */
    bb_header(&b, 3, 0, 1);
    bb_kv_u32(&b, "general.alignment", 3);
    expect_fail(&b, "general.alignment", "power of two", NULL);

    /* alignment 0 */
    bb_header(&b, 3, 0, 1);
    bb_kv_u32(&b, "general.alignment", 0);
    expect_fail(&b, "general.alignment", "power of two", NULL);

    /* alignment of the wrong type */
    bb_header(&b, 3, 0, 1);
    bb_str(&b, "general.alignment");
    bb_u32(&b, 10);
    bb_u64(&b, 32);
    expect_fail(&b, "general.alignment", "uint32", NULL);
}

/* One tensor entry, everything else valid: data of `data_bytes` after
 * padding to 32. */
static void one_tensor(bb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                       uint64_t offset, size_t data_bytes) {
    bb_header(b, 3, 1, 1);
    bb_kv_str(b, "general.architecture", "llama");
    bb_tensor(b, name, n_dims, ne, type, offset);
    bb_pad(b, 32);
    bb_data(b, data_bytes, 3);
}

static void test_bad_tensors(void **state) {
    (void)state;
    bb b = {0};
    char err[512];

    /* sanity: the one-tensor file is valid as built */
    one_tensor(&b, "blk.0.attn_q.weight", 2, (uint64_t[]){8, 4}, 0, 0, 128);
    bd_gguf_file *f = bd_gguf_open_memory(b.p, b.n, err, sizeof err);
    if (!f) fail_msg("%s", err);
    bd_gguf_close(f);
    free(b.p);
    b = (bb){0};

    /* data past the end: 128 bytes needed, 100 present */
    one_tensor(&b, "blk.0.attn_q.weight", 2, (uint64_t[]){8, 4}, 0, 0, 100);
    expect_fail(&b, "tensor 'blk.0.attn_q.weight'", "extends past end of file", "bytes)");

    /* offset past the end */
    one_tensor(&b, "t", 1, (uint64_t[]){8}, 0, 1ull << 40, 32);
    expect_fail(&b, "'t'", "past end", NULL);

    /* offset + size overflow */
    one_tensor(&b, "t", 1, (uint64_t[]){8}, 0, UINT64_MAX - 31, 32);
    expect_fail(&b, "'t'", NULL, NULL);

    /* misaligned */
    one_tensor(&b, "t.mis", 1, (uint64_t[]){8}, 0, 4, 64);
    expect_fail(&b, "'t.mis'", "alignment 32", NULL);

    /* unknown type id 99, retired id 4 */
    one_tensor(&b, "t.u", 1, (uint64_t[]){32}, 99, 0, 256);
    expect_fail(&b, "'t.u'", "type id 99", NULL);
    one_tensor(&b, "t.r", 1, (uint64_t[]){32}, 4, 0, 256);
    expect_fail(&b, "'t.r'", "type id 4", NULL);

    /* 5 dims and 0 dims */
    one_tensor(&b, "t5", 5, (uint64_t[]){1, 1, 1, 1, 8}, 0, 0, 64);
    expect_fail(&b, "'t5'", "n_dims 5", NULL);
    one_tensor(&b, "t0", 0, NULL, 0, 0, 64);
    expect_fail(&b, "'t0'", "n_dims 0", NULL);

    /* ne[0] not a multiple of the Q8_0 block (32) */
    one_tensor(&b, "t.q8", 1, (uint64_t[]){33}, 8, 0, 256);
    expect_fail(&b, "'t.q8'", "ne[0] = 33", "block size 32");

    /* shape product overflow */
    one_tensor(&b, "t.big", 2, (uint64_t[]){1ull << 32, 1ull << 32}, 0, 0, 64);
    expect_fail(&b, "'t.big'", "overflow", NULL);
    one_tensor(&b, "t.neg", 1, (uint64_t[]){UINT64_MAX}, 0, 0, 64);
    expect_fail(&b, "'t.neg'", NULL, NULL);

    /* byte size overflow: element count fits int64, bytes do not */
    one_tensor(&b, "t.bytes", 2, (uint64_t[]){1ull << 31, 1ull << 31}, 0, 0, 64);
    expect_fail(&b, "'t.bytes'", "overflow", NULL);

    /* overlapping tensors: x [0,64), y [32,64) */
    bb_header(&b, 3, 2, 0);
    bb_tensor(&b, "x", 1, (uint64_t[]){16}, 0, 0);
    bb_tensor(&b, "y", 1, (uint64_t[]){8}, 0, 32);
    bb_pad(&b, 32);
    bb_data(&b, 64, 0);
    expect_fail(&b, "overlaps", "'x'", "'y'");

    /* overlap hidden behind a shorter tensor: x [0,128) contains y, z */
    bb_header(&b, 3, 3, 0);
    bb_tensor(&b, "z", 1, (uint64_t[]){8}, 0, 96);
    bb_tensor(&b, "y", 1, (uint64_t[]){8}, 0, 32);
    bb_tensor(&b, "x", 1, (uint64_t[]){32}, 0, 0);
    bb_pad(&b, 32);
    bb_data(&b, 128, 0);
    expect_fail(&b, "overlaps", "'x'", NULL);

    /* duplicate tensor names */
    bb_header(&b, 3, 2, 0);
    bb_tensor(&b, "dup", 1, (uint64_t[]){8}, 0, 0);
    bb_tensor(&b, "dup", 1, (uint64_t[]){8}, 0, 32);
    bb_pad(&b, 32);
    bb_data(&b, 64, 0);
    expect_fail(&b, "'dup'", "duplicate tensor name", NULL);

    /* truncated inside a tensor entry */
    bb_header(&b, 3, 1, 0);
    bb_str(&b, "cut");
    bb_u32(&b, 2);
    bb_u64(&b, 8);
    bb_data(&b, 20, 0); /* ne[1] + type + offset need 20 bytes... minus nothing */
    b.n -= 1;
    expect_fail(&b, "'cut'", "truncated", NULL);

    /* empty tensors are legal (ne may be 0) and overlap nothing */
    bb_header(&b, 3, 2, 0);
    bb_tensor(&b, "e", 2, (uint64_t[]){0, 5}, 0, 0);
    bb_tensor(&b, "f", 1, (uint64_t[]){8}, 0, 0);
    bb_pad(&b, 32);
    bb_data(&b, 32, 0);
    void *copy = b.p;
    f = bd_gguf_open_memory(copy, b.n, err, sizeof err);
    if (!f) fail_msg("%s", err);
    assert_int_equal(bd_gguf_find_tensor(f, "e")->nbytes, 0);
    assert_int_equal(bd_gguf_find_tensor(f, "f")->nbytes, 32);
    bd_gguf_close(f);
    free(b.p);
}

/* ------------------------------------------------------------------------
 * Writer -> reader round trip
 * ---------------------------------------------------------------------- */

static char g_tmpdir[256];

static int setup_tmp(void **state) {
    (void)state;
    snprintf(g_tmpdir, sizeof g_tmpdir, "/tmp/bd-test-gguf-XXXXXX");
    return mkdtemp(g_tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_roundtrip(void **state) {
    (void)state;
    bd_gguf_writer *w = bd_gguf_writer_create();
    assert_non_null(w);
    assert_true(bd_gguf_writer_set_u8(w, "t.u8", 250));
    assert_true(bd_gguf_writer_set_i8(w, "t.i8", -120));
    assert_true(bd_gguf_writer_set_u16(w, "t.u16", 65000));
    assert_true(bd_gguf_writer_set_i16(w, "t.i16", -32000));
    assert_true(bd_gguf_writer_set_u32(w, "t.u32", 4000000000u));
    assert_true(bd_gguf_writer_set_i32(w, "t.i32", -2000000000));
    assert_true(bd_gguf_writer_set_u64(w, "t.u64", 18000000000000000000ull));
    assert_true(bd_gguf_writer_set_i64(w, "t.i64", -9000000000000000000ll));
    assert_true(bd_gguf_writer_set_f32(w, "t.f32", 1e-5f));
    assert_true(bd_gguf_writer_set_f64(w, "t.f64", -2.5e300));
    assert_true(bd_gguf_writer_set_bool(w, "t.bool", true));
    assert_true(bd_gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo \"w\"\n"));
    assert_true(bd_gguf_writer_set_str(w, "t.empty", ""));
    const char *words[] = {"<unk>", "", "\xe2\x96\x81the", "a b"};
    assert_true(bd_gguf_writer_set_arr_str(w, "t.words", words, 4));
    const int32_t i32s[] = {-1, 0, 7, 2147483647};
    assert_true(bd_gguf_writer_set_arr(w, "t.arr_i32", GGUF_VTYPE_INT32, i32s, 4));
    const float f32s[] = {0.5f, -3.0f};
    assert_true(bd_gguf_writer_set_arr(w, "t.arr_f32", GGUF_VTYPE_FLOAT32, f32s, 2));
    const uint8_t bools[] = {1, 0, 1};
    assert_true(bd_gguf_writer_set_arr(w, "t.arr_bool", GGUF_VTYPE_BOOL, bools, 3));
    const uint64_t u64s[] = {1ull << 63};
    assert_true(bd_gguf_writer_set_arr(w, "t.arr_u64", GGUF_VTYPE_UINT64, u64s, 1));
    assert_true(bd_gguf_writer_set_arr(w, "t.arr_empty", GGUF_VTYPE_UINT8, NULL, 0));
    assert_false(bd_gguf_writer_set_arr(w, "t.arr_bad", GGUF_VTYPE_STRING, words, 1));
    /* nested: [[1, 2], ["x", "yz"], []] encoded by hand */
    bb n = {0};
    bb_u32(&n, 9);
    bb_u64(&n, 3);
    bb_u32(&n, 2);
    bb_u64(&n, 2);
    bb_le(&n, 1, 2);
    bb_le(&n, 2, 2);
    bb_u32(&n, 8);
    bb_u64(&n, 2);
    bb_str(&n, "x");
    bb_str(&n, "yz");
    bb_u32(&n, 0);
    bb_u64(&n, 0);
    assert_true(bd_gguf_writer_set_raw(w, "t.nested", GGUF_VTYPE_ARRAY, n.p, n.n));
    assert_false(bd_gguf_writer_set_raw(w, "t.nested_short", GGUF_VTYPE_ARRAY, n.p, n.n - 1));
    bb_le(&n, 0, 1); /* one trailing byte too many */
    assert_false(bd_gguf_writer_set_raw(w, "t.nested_long", GGUF_VTYPE_ARRAY, n.p, n.n));
    n.n--;
    assert_false(bd_gguf_writer_set_u32(w, "t.u8", 1)); /* duplicate */
    assert_true(bd_gguf_writer_has_key(w, "t.u8"));
    assert_false(bd_gguf_writer_has_key(w, "t.nope"));
    assert_false(bd_gguf_writer_set_alignment(w, 48));
    assert_true(bd_gguf_writer_set_alignment(w, 16));
    assert_true(bd_gguf_writer_set_alignment(w, 64)); /* replaces */

    float ta[12];
    for (int i = 0; i < 12; i++) ta[i] = (float)i * 0.25f - 1.0f;
    assert_true(bd_gguf_writer_add_tensor(w, "a.weight", BD_TYPE_F32, 2, (uint64_t[]){4, 3}, ta, sizeof ta));
    uint8_t q8[2 * 34];
    for (size_t i = 0; i < sizeof q8; i++) q8[i] = (uint8_t)(i * 13 + 1);
    assert_true(bd_gguf_writer_add_tensor(w, "b.q8", BD_TYPE_Q8_0, 2, (uint64_t[]){32, 2}, q8, sizeof q8));
    uint16_t h[5] = {0x3c00, 0xc000, 0, 1, 0x7bff};
    assert_true(bd_gguf_writer_add_tensor_ref(w, "c.f16", BD_TYPE_F16, 1, (uint64_t[]){5}, h, sizeof h));
    assert_false(bd_gguf_writer_add_tensor(w, "a.weight", BD_TYPE_F32, 1, (uint64_t[]){1}, ta, 4)); /* dup */
    assert_false(bd_gguf_writer_add_tensor(w, "d", BD_TYPE_F32, 1, (uint64_t[]){3}, ta, 8));      /* size */
    assert_false(bd_gguf_writer_add_tensor(w, "d", BD_TYPE_Q8_0, 1, (uint64_t[]){33}, q8, 34));    /* block */
    assert_false(bd_gguf_writer_add_tensor(w, "d", 4, 1, (uint64_t[]){32}, q8, 34));               /* retired */
    assert_false(bd_gguf_writer_add_tensor(w, "d", BD_TYPE_F32, 5, (uint64_t[]){1, 1, 1, 1, 1}, ta, 4));

    char path[512], err[512];
    snprintf(path, sizeof path, "%s/rt.gguf", g_tmpdir);
    if (!bd_gguf_writer_write_file(w, path, err, sizeof err)) fail_msg("%s", err);

    bd_gguf_file *f = bd_gguf_open(path, err, sizeof err);
    if (!f) fail_msg("%s", err);
    assert_int_equal(bd_gguf_version(f), 3);
    assert_int_equal(bd_gguf_alignment(f), 64);
    assert_int_equal(bd_gguf_data_offset(f) % 64, 0);
    assert_int_equal(bd_gguf_kv_count(f), 21);
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
    double f64;
    bool bo;
    assert_true(bd_gguf_get_u32(f, "t.u8", &u32));
    assert_int_equal(u32, 250);
    assert_true(bd_gguf_get_i64(f, "t.i8", &i64));
    assert_int_equal(i64, -120);
    assert_false(bd_gguf_get_u32(f, "t.i8", &u32)); /* negative */
    assert_true(bd_gguf_get_u32(f, "t.u16", &u32));
    assert_int_equal(u32, 65000);
    assert_true(bd_gguf_get_i64(f, "t.i16", &i64));
    assert_int_equal(i64, -32000);
    assert_true(bd_gguf_get_u32(f, "t.u32", &u32));
    assert_int_equal(u32, 4000000000u);
    assert_true(bd_gguf_get_i64(f, "t.i32", &i64));
    assert_int_equal(i64, -2000000000);
    assert_false(bd_gguf_get_u32(f, "t.u64", &u32)); /* does not fit */
    assert_false(bd_gguf_get_i64(f, "t.u64", &i64));
    assert_true(bd_gguf_get_u64(f, "t.u64", &u64));
    assert_true(u64 == 18000000000000000000ull);
    assert_true(bd_gguf_get_i64(f, "t.i64", &i64));
    assert_true(i64 == -9000000000000000000ll);
    assert_true(bd_gguf_get_f32(f, "t.f32", &f32));
    assert_true(f32 == 1e-5f);
    assert_true(bd_gguf_get_f64(f, "t.f64", &f64));
    assert_true(f64 == -2.5e300);
    assert_false(bd_gguf_get_f32(f, "t.u32", &f32)); /* not a float */
    assert_false(bd_gguf_get_u32(f, "t.f32", &u32));
    assert_true(bd_gguf_get_bool(f, "t.bool", &bo));
    assert_true(bo);
    assert_false(bd_gguf_get_bool(f, "t.u8", &bo));
    const char *s;
    uint64_t len;
    assert_true(bd_gguf_get_str(f, "t.str", &s, &len));
    assert_int_equal(len, strlen("h\xc3\xa9llo \"w\"\n"));
    assert_memory_equal(s, "h\xc3\xa9llo \"w\"\n", len);
    assert_true(bd_gguf_get_str(f, "t.empty", &s, &len));
    assert_int_equal(len, 0);
    assert_false(bd_gguf_get_str(f, "t.u8", &s, &len));
    assert_false(bd_gguf_get_u32(f, "t.missing", &u32));

    const bd_gguf_kv *kv = bd_gguf_find(f, "t.words");
    assert_non_null(kv);
    assert_int_equal(kv->type, GGUF_VTYPE_ARRAY);
    assert_int_equal(kv->arr_count, 4);
    for (int i = 3; i >= 0; i--) {
        assert_true(bd_gguf_arr_str(kv, (uint64_t)i, &s, &len));
        assert_int_equal(len, strlen(words[i]));
        assert_memory_equal(s, words[i], len);
    }
    kv = bd_gguf_find(f, "t.arr_i32");
    for (int i = 0; i < 4; i++) {
        assert_true(bd_gguf_arr_i64(kv, (uint64_t)i, &i64));
        assert_int_equal(i64, i32s[i]);
        assert_true(bd_gguf_arr_f64(kv, (uint64_t)i, &f64));
        assert_true(f64 == i32s[i]);
    }
    assert_false(bd_gguf_arr_i64(kv, 4, &i64));
    assert_false(bd_gguf_arr_str(kv, 0, &s, &len));
    kv = bd_gguf_find(f, "t.arr_f32");
    assert_true(bd_gguf_arr_f64(kv, 1, &f64));
    assert_true(f64 == -3.0);
    assert_false(bd_gguf_arr_i64(kv, 1, &i64));
    kv = bd_gguf_find(f, "t.arr_bool");
    assert_int_equal(kv->arr_type, GGUF_VTYPE_BOOL);
    assert_true(bd_gguf_arr_i64(kv, 2, &i64));
    assert_int_equal(i64, 1);
    kv = bd_gguf_find(f, "t.arr_u64");
    assert_false(bd_gguf_arr_i64(kv, 0, &i64)); /* 2^63 does not fit */
    assert_true(bd_gguf_arr_f64(kv, 0, &f64));
    assert_true(f64 == 9223372036854775808.0);
    kv = bd_gguf_find(f, "t.arr_empty");
    assert_int_equal(kv->arr_count, 0);

    kv = bd_gguf_find(f, "t.nested");
    assert_non_null(kv);
    assert_int_equal(kv->arr_type, GGUF_VTYPE_ARRAY);
    assert_int_equal(kv->arr_count, 3);
    assert_int_equal(kv->data_size, n.n);
    bd_gguf_kv sub;
    assert_true(bd_gguf_arr_arr(kv, 1, &sub));
    assert_int_equal(sub.arr_type, GGUF_VTYPE_STRING);
    assert_int_equal(sub.arr_count, 2);
    assert_true(bd_gguf_arr_str(&sub, 1, &s, &len));
    assert_int_equal(len, 2);
    assert_memory_equal(s, "yz", 2);
    assert_true(bd_gguf_arr_arr(kv, 0, &sub));
    assert_int_equal(sub.arr_type, GGUF_VTYPE_UINT16);
    assert_true(bd_gguf_arr_i64(&sub, 1, &i64));
    assert_int_equal(i64, 2);
    assert_true(bd_gguf_arr_arr(kv, 2, &sub));
    assert_int_equal(sub.arr_count, 0);
    assert_false(bd_gguf_arr_arr(kv, 3, &sub));

    assert_int_equal(bd_gguf_tensor_count(f), 3);
    const bd_gguf_tensor *t = bd_gguf_tensor_at(f, 0);
    assert_string_equal(t->name, "a.weight");
    assert_int_equal(t->type, BD_TYPE_F32);
    assert_int_equal(t->ne[0], 4);
    assert_int_equal(t->ne[1], 3);
    assert_int_equal(t->nbytes, sizeof ta);
    assert_memory_equal(t->data, ta, sizeof ta);
    t = bd_gguf_find_tensor(f, "b.q8");
    assert_int_equal(t->offset % 64, 0);
    assert_int_equal(t->nbytes, 68);
    assert_memory_equal(t->data, q8, sizeof q8);
    t = bd_gguf_find_tensor(f, "c.f16");
    assert_int_equal(t->offset % 64, 0);
    assert_int_equal(t->n_dims, 1);
    assert_memory_equal(t->data, h, sizeof h);
    /* the file ends padded to the alignment */
    assert_int_equal(bd_gguf_file_size(f) % 64, 0);

    /* copy every key into a second writer, write, compare encodings */
    bd_gguf_writer *w2 = bd_gguf_writer_create();
    for (int64_t i = 0; i < bd_gguf_kv_count(f); i++) assert_true(bd_gguf_writer_copy_kv(w2, bd_gguf_kv_at(f, i)));
    assert_false(bd_gguf_writer_copy_kv(w2, bd_gguf_kv_at(f, 0)));
    char path2[512];
    snprintf(path2, sizeof path2, "%s/copy.gguf", g_tmpdir);
    if (!bd_gguf_writer_write_file(w2, path2, err, sizeof err)) fail_msg("%s", err);
    bd_gguf_file *g = bd_gguf_open(path2, err, sizeof err);
    if (!g) fail_msg("%s", err);
    assert_int_equal(bd_gguf_kv_count(g), bd_gguf_kv_count(f));
    assert_int_equal(bd_gguf_alignment(g), 64);
    for (int64_t i = 0; i < bd_gguf_kv_count(f); i++) {
        const bd_gguf_kv *a = bd_gguf_kv_at(f, i), *b = bd_gguf_find(g, a->key);
        assert_non_null(b);
        assert_int_equal(a->type, b->type);
        assert_int_equal(a->data_size, b->data_size);
        assert_memory_equal(a->data, b->data, a->data_size - (a->type == GGUF_VTYPE_ARRAY ? 12 : a->type == GGUF_VTYPE_STRING ? 8 : 0));
    }
    bd_gguf_close(g);
    bd_gguf_writer_free(w2);
    bd_gguf_close(f);

    /* rewriting over an existing file replaces it; a failed write leaves
     * it alone and no temporary behind */
    bd_gguf_writer *w3 = bd_gguf_writer_create();
    assert_true(bd_gguf_writer_set_u32(w3, "general.alignment", 3));
    assert_false(bd_gguf_writer_write_file(w3, path, err, sizeof err));
    assert_non_null(strstr(err, "power of two"));
    bd_gguf_writer_free(w3);
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.gguf", g_tmpdir);
    assert_false(bd_gguf_writer_write_file(w, bad, err, sizeof err));
    f = bd_gguf_open(path, err, sizeof err);
    if (!f) fail_msg("%s", err);
    assert_int_equal(bd_gguf_kv_count(f), 21);
    bd_gguf_close(f);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 2", g_tmpdir);
    assert_int_equal(system(cmd), 0);

    bd_gguf_writer_free(w);
    free(n.p);
}

static void test_writer_default_alignment_and_empty(void **state) {
    (void)state;
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/empty.gguf", g_tmpdir);
    bd_gguf_writer *w = bd_gguf_writer_create();
    assert_true(bd_gguf_writer_write_file(w, path, err, sizeof err));
    bd_gguf_writer_free(w);
    bd_gguf_file *f = bd_gguf_open(path, err, sizeof err);
    if (!f) fail_msg("%s", err);
    assert_int_equal(bd_gguf_alignment(f), 32);
    assert_int_equal(bd_gguf_kv_count(f), 0);
    assert_int_equal(bd_gguf_tensor_count(f), 0);
    assert_int_equal(bd_gguf_file_size(f), 32); /* 24-byte header padded */
    bd_gguf_close(f);

    /* Independent check of the byte layout of a one-tensor file. */
    w = bd_gguf_writer_create();
    assert_true(bd_gguf_writer_set_u32(w, "k", 7));
    float one = 1.0f;
    assert_true(bd_gguf_writer_add_tensor(w, "t", BD_TYPE_F32, 1, (uint64_t[]){1}, &one, 4));
    assert_true(bd_gguf_writer_write_file(w, path, err, sizeof err));
    bd_gguf_writer_free(w);
    bb b = {0};
    bb_header(&b, 3, 1, 1);
    bb_kv_u32(&b, "k", 7);
    bb_tensor(&b, "t", 1, (uint64_t[]){1}, 0, 0);
    bb_pad(&b, 32);
    bb_bytes(&b, &one, 4);
    bb_pad(&b, 32);
    bd_fmap m;
    assert_true(bd_fmap_open(&m, path, err, sizeof err));
    assert_int_equal(m.size, b.n);
    assert_memory_equal(m.data, b.p, b.n);
    bd_fmap_close(&m);
    free(b.p);
}

/* ------------------------------------------------------------------------
 * Real fixtures (facts from their READMEs)
 * ---------------------------------------------------------------------- */

static const char *shared_dir(void) {
    const char *s = getenv("BD_SHARED");
    return s && *s ? s : "../shared";
}

static bd_gguf_file *open_fixture(const char *rel) {
    char path[1024], err[1024];
    snprintf(path, sizeof path, "%s/fixtures/%s", shared_dir(), rel);
    bd_gguf_file *f = bd_gguf_open(path, err, sizeof err);
    if (!f) fail_msg("%s", err);
    return f;
}

static uint32_t get_u32(bd_gguf_file *f, const char *key) {
    uint32_t v = 0;
    if (!bd_gguf_get_u32(f, key, &v)) fail_msg("missing %s", key);
    return v;
}

static void expect_arr_str(const bd_gguf_kv *kv, uint64_t i, const char *want) {
    const char *s;
    uint64_t len;
    assert_true(bd_gguf_arr_str(kv, i, &s, &len));
    if (len != strlen(want) || memcmp(s, want, len))
        fail_msg("element %llu is '%.*s', want '%s'", (unsigned long long)i, (int)len, s, want);
}

static uint64_t param_count(bd_gguf_file *f, const char *skip) {
    uint64_t n = 0;
    for (int64_t i = 0; i < bd_gguf_tensor_count(f); i++) {
        const bd_gguf_tensor *t = bd_gguf_tensor_at(f, i);
        if (skip && !strcmp(t->name, skip)) continue;
        n += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    return n;
}

static void test_fixture_stories(void **state) {
    (void)state;
    bd_gguf_file *f = open_fixture("stories260K/stories260K.gguf");
    assert_int_equal(bd_gguf_file_size(f), 1185376);
    assert_int_equal(bd_gguf_version(f), 3);
    char arch[32];
    assert_true(bd_gguf_get_strz(f, "general.architecture", arch, sizeof arch));
    assert_string_equal(arch, "llama");
    assert_int_equal(get_u32(f, "llama.block_count"), 5);
    assert_int_equal(get_u32(f, "llama.embedding_length"), 64);
    assert_int_equal(get_u32(f, "llama.feed_forward_length"), 172);
    assert_int_equal(get_u32(f, "llama.attention.head_count"), 8);
    assert_int_equal(get_u32(f, "llama.attention.head_count_kv"), 4);
    assert_int_equal(get_u32(f, "llama.context_length"), 128);
    assert_int_equal(get_u32(f, "tokenizer.ggml.seperator_token_id"), 4294967295u);
    assert_int_equal(get_u32(f, "tokenizer.ggml.padding_token_id"), 4294967295u);
    assert_null(bd_gguf_find(f, "tokenizer.ggml.add_bos_token"));
    float eps;
    assert_true(bd_gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps));
    assert_true(fabsf(eps - 1e-5f) < 1e-10f);
    const bd_gguf_kv *tok = bd_gguf_find(f, "tokenizer.ggml.tokens");
    assert_non_null(tok);
    assert_int_equal(tok->arr_count, 512);
    expect_arr_str(tok, 0, "<unk>");
    expect_arr_str(tok, 1, "<s>");
    expect_arr_str(tok, 2, "</s>");
    expect_arr_str(tok, 3, "<0x00>");
    expect_arr_str(tok, 258, "<0xFF>");
    assert_int_equal(bd_gguf_tensor_count(f), 48);
    const bd_gguf_tensor *emb = bd_gguf_find_tensor(f, "token_embd.weight");
    const bd_gguf_tensor *out = bd_gguf_find_tensor(f, "output.weight");
    assert_non_null(emb);
    assert_non_null(out);
    assert_int_equal(emb->type, BD_TYPE_F32);
    assert_int_equal(emb->ne[0], 64);
    assert_int_equal(emb->ne[1], 512);
    /* README: output.weight is an exact copy of token_embd.weight */
    assert_int_equal(out->nbytes, emb->nbytes);
    assert_memory_equal(out->data, emb->data, emb->nbytes);
    /* README: 260,032 parameters (the tied classifier counted once) */
    assert_int_equal(param_count(f, "output.weight"), 260032);
    bd_gguf_close(f);
}

static void test_fixture_dflash(void **state) {
    (void)state;
    bd_gguf_file *f = open_fixture("stories260K/stories260K-dflash.gguf");
    assert_int_equal(bd_gguf_file_size(f), 539104);
    char arch[32];
    assert_true(bd_gguf_get_strz(f, "general.architecture", arch, sizeof arch));
    assert_string_equal(arch, "dflash");
    assert_int_equal(get_u32(f, "dflash.block_size"), 8);
    assert_int_equal(get_u32(f, "dflash.block_count"), 2);
    assert_int_equal(get_u32(f, "dflash.embedding_length"), 64);
    assert_int_equal(get_u32(f, "dflash.feed_forward_length"), 256);
    assert_int_equal(get_u32(f, "dflash.context_length"), 512);
    assert_int_equal(get_u32(f, "tokenizer.ggml.mask_token_id"), 0);
    assert_int_equal(get_u32(f, "general.file_type"), 0);
    bool causal = true;
    assert_true(bd_gguf_get_bool(f, "dflash.attention.causal", &causal));
    assert_false(causal);
    const bd_gguf_kv *tl = bd_gguf_find(f, "dflash.target_layers");
    assert_non_null(tl);
    assert_int_equal(tl->arr_count, 2);
    int64_t v;
    assert_true(bd_gguf_arr_i64(tl, 0, &v));
    assert_int_equal(v, 2);
    assert_true(bd_gguf_arr_i64(tl, 1, &v));
    assert_int_equal(v, 4);
    assert_int_equal(bd_gguf_find(f, "tokenizer.ggml.tokens")->arr_count, 512);
    assert_int_equal(bd_gguf_tensor_count(f), 25);
    assert_null(bd_gguf_find_tensor(f, "token_embd.weight"));
    const bd_gguf_tensor *fc = bd_gguf_find_tensor(f, "fc.weight");
    assert_non_null(fc);
    assert_int_equal(fc->ne[0], 128);
    assert_int_equal(fc->ne[1], 64);
    const bd_gguf_tensor *k = bd_gguf_find_tensor(f, "blk.1.attn_k.weight");
    assert_non_null(k);
    assert_int_equal(k->ne[0], 64);
    assert_int_equal(k->ne[1], 32);
    assert_int_equal(bd_gguf_find_tensor(f, "blk.0.attn_q_norm.weight")->ne[0], 8);
    assert_int_equal(param_count(f, NULL), 131488);
    bd_gguf_close(f);
}

static void test_fixture_qwen3_vocab(void **state) {
    (void)state;
    bd_gguf_file *f = open_fixture("qwen3-tokenizer/qwen3-vocab.gguf");
    assert_int_equal(bd_gguf_file_size(f), 5932640);
    assert_int_equal(bd_gguf_kv_count(f), 22);
    assert_int_equal(bd_gguf_tensor_count(f), 0);
    assert_int_equal(get_u32(f, "qwen3.block_count"), 36);
    assert_int_equal(get_u32(f, "qwen3.embedding_length"), 2560);
    assert_int_equal(get_u32(f, "tokenizer.ggml.eos_token_id"), 151645);
    assert_int_equal(get_u32(f, "tokenizer.ggml.bos_token_id"), 151643);
    float base;
    assert_true(bd_gguf_get_f32(f, "qwen3.rope.freq_base", &base));
    assert_true(base == 1e6f);
    bool add_bos = true;
    assert_true(bd_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos));
    assert_false(add_bos);
    char model[16];
    assert_true(bd_gguf_get_strz(f, "tokenizer.ggml.model", model, sizeof model));
    assert_string_equal(model, "gpt2");
    const bd_gguf_kv *tok = bd_gguf_find(f, "tokenizer.ggml.tokens");
    assert_int_equal(tok->arr_count, 151936);
    assert_non_null(tok->arr_offsets);
    expect_arr_str(tok, 151935, "[PAD151935]");
    expect_arr_str(tok, 151669, "[PAD151669]");
    expect_arr_str(tok, 151643, "<|endoftext|>");
    expect_arr_str(tok, 151667, "<think>");
    expect_arr_str(tok, 128247, "</s>");
    const bd_gguf_kv *merges = bd_gguf_find(f, "tokenizer.ggml.merges");
    assert_int_equal(merges->arr_count, 151387);
    const char *s;
    uint64_t len;
    assert_true(bd_gguf_arr_str(merges, 151386, &s, &len));
    assert_non_null(memchr(s, ' ', len)); /* "left right" */
    const bd_gguf_kv *tt = bd_gguf_find(f, "tokenizer.ggml.token_type");
    assert_int_equal(tt->arr_type, GGUF_VTYPE_INT32);
    assert_int_equal(tt->arr_count, 151936);
    int64_t v;
    const struct { uint64_t id; int64_t type; } types[] = {
        {0, 1}, {151642, 1}, {151643, 3}, {151656, 3}, {151657, 4}, {151659, 3}, {151668, 4}, {151669, 5}, {151935, 5},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        assert_true(bd_gguf_arr_i64(tt, types[i].id, &v));
        assert_int_equal(v, types[i].type);
    }
    /* README: the chat template is byte-identical to the fixture template */
    assert_true(bd_gguf_get_str(f, "tokenizer.chat_template", &s, &len));
    assert_int_equal(len, 4116);
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/fixtures/templates/Qwen-Qwen3-0.6B.jinja", shared_dir());
    bd_fmap m;
    if (!bd_fmap_open(&m, path, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(m.size, len);
    assert_memory_equal(m.data, s, len);
    bd_fmap_close(&m);
    bd_gguf_close(f);
}

/* Every prefix of the real dflash file's header region fails cleanly, and
 * single-byte corruptions never crash. */
static void test_fixture_prefixes_and_flips(void **state) {
    (void)state;
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/fixtures/stories260K/stories260K-dflash.gguf", shared_dir());
    bd_fmap m;
    if (!bd_fmap_open(&m, path, err, sizeof err)) fail_msg("%s", err);
    bd_gguf_file *f = bd_gguf_open_memory(m.data, m.size, err, sizeof err);
    if (!f) fail_msg("%s", err);
    uint64_t hdr = bd_gguf_data_offset(f);
    bd_gguf_close(f);
    uint8_t *buf = malloc(m.size);
    for (uint64_t n = 0; n < hdr + 64; n += (n < hdr ? 1 : 16)) {
        memcpy(buf, m.data, n);
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, m.data, n);
        f = bd_gguf_open_memory(copy, n, err, sizeof err);
        if (f) fail_msg("prefix %llu accepted", (unsigned long long)n);
        free(copy);
    }
    /* flips in the header region: either a clean error or a valid file */
    unsigned seed = 12345;
    for (int k = 0; k < 3000; k++) {
        memcpy(buf, m.data, m.size);
        seed = seed * 1103515245u + 12345u;
        uint64_t at = (seed >> 4) % hdr;
        seed = seed * 1103515245u + 12345u;
        buf[at] ^= (uint8_t)(1u << ((seed >> 8) % 8));
        f = bd_gguf_open_memory(buf, m.size, err, sizeof err);
        if (f) bd_gguf_close(f);
        else assert_true(strncmp(err, "gguf: ", 6) == 0);
    }
    free(buf);
    bd_fmap_close(&m);
}

static void test_open_errors(void **state) {
    (void)state;
    char err[512];
    assert_null(bd_gguf_open("/nonexistent/x.gguf", err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/x.gguf"));
    assert_null(bd_gguf_open_memory(NULL, 0, err, sizeof err));
    assert_non_null(strstr(err, "magic"));
    char path[512];
    snprintf(path, sizeof path, "%s/garbage.gguf", g_tmpdir);
    FILE *fp = fopen(path, "wb");
    fputs("GGUF\x03\0\0\0garbage", fp);
    fclose(fp);
    assert_null(bd_gguf_open(path, err, sizeof err));
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "truncated"));
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handmade_valid),
        cmocka_unit_test(test_truncated_every_prefix),
        cmocka_unit_test(test_bad_magic_and_versions),
        cmocka_unit_test(test_absurd_counts),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_bad_tensors),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_writer_default_alignment_and_empty),
        cmocka_unit_test(test_fixture_stories),
        cmocka_unit_test(test_fixture_dflash),
        cmocka_unit_test(test_fixture_qwen3_vocab),
        cmocka_unit_test(test_fixture_prefixes_and_flips),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
