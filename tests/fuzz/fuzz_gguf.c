/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader (`make fuzz`).
 *
 * Opens the input with bd_gguf_open_memory and, when it is accepted, walks
 * every accessor: each key through bd_gguf_find and the typed getters, every
 * array element (strings, numbers, nested arrays), every tensor's first and
 * last data byte, and a copy of every value into a writer (which re-validates
 * the encoding). The input buffer is exactly `size` bytes, so any read
 * outside it is caught by ASan. Broken invariants abort.
 *
 * An accepted file then goes through the layers above the reader: the
 * header checks of the gallery (target and drafter pairing checks) and the
 * model loader of its architecture (llama, qwen3, the qwen35 / qwen35moe
 * hybrids, dflash drafters), from a memfd. Their errors are fine; crashes,
 * sanitizer reports and leaks are not. make_seeds writes micro hybrid and
 * drafter files so the mutations start inside those loaders.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "blockdraft.h"
#include "gguf/bd_gguf.h"
#include "model/pairing.h"
#include "tensor/tensor.h"

#define CHECK(c) \
    do { \
        if (!(c)) __builtin_trap(); \
    } while (0)

static volatile uint64_t g_sink;

static void walk_array(const bd_gguf_kv *kv, int depth) {
    CHECK(depth <= GGUF_MAX_ARRAY_DEPTH);
    for (uint64_t i = 0; i < kv->arr_count; i++) {
        const char *s;
        uint64_t len;
        double d;
        int64_t v;
        bd_gguf_kv sub;
        switch (kv->arr_type) {
        case GGUF_VTYPE_STRING:
            CHECK(bd_gguf_arr_str(kv, i, &s, &len));
            if (len) g_sink += (uint8_t)s[0] + (uint8_t)s[len - 1];
            break;
        case GGUF_VTYPE_ARRAY:
            CHECK(bd_gguf_arr_arr(kv, i, &sub));
            walk_array(&sub, depth + 1);
            break;
        default:
            CHECK(bd_gguf_arr_f64(kv, i, &d));
            if (bd_gguf_arr_i64(kv, i, &v)) g_sink += (uint64_t)v;
            break;
        }
    }
    const char *s;
    uint64_t len;
    CHECK(!bd_gguf_arr_str(kv, kv->arr_count, &s, &len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    bd_gguf_file *f = bd_gguf_open_memory(data, size, err, sizeof err);
    if (!f) {
        CHECK(strncmp(err, "gguf: ", 6) == 0);
        return 0;
    }
    uint32_t a = bd_gguf_alignment(f);
    CHECK(a && (a & (a - 1)) == 0);
    CHECK(bd_gguf_version(f) == 2 || bd_gguf_version(f) == 3);
    CHECK(bd_gguf_file_size(f) == size);
    bd_gguf_writer *w = bd_gguf_writer_create();
    for (int64_t i = 0; i < bd_gguf_kv_count(f); i++) {
        const bd_gguf_kv *kv = bd_gguf_kv_at(f, i);
        CHECK(kv && bd_gguf_find(f, kv->key) == kv);
        CHECK(kv->offset + kv->data_size <= size);
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f32;
        double f64;
        bool b;
        const char *s;
        uint64_t len;
        char buf[16];
        g_sink += bd_gguf_get_u32(f, kv->key, &u32) + bd_gguf_get_i64(f, kv->key, &i64) +
                  bd_gguf_get_u64(f, kv->key, &u64) + bd_gguf_get_f32(f, kv->key, &f32) +
                  bd_gguf_get_f64(f, kv->key, &f64) + bd_gguf_get_bool(f, kv->key, &b) +
                  bd_gguf_get_strz(f, kv->key, buf, sizeof buf);
        if (bd_gguf_get_str(f, kv->key, &s, &len) && len) g_sink += (uint8_t)s[len - 1];
        if (kv->type == GGUF_VTYPE_ARRAY) walk_array(kv, 1);
        CHECK(bd_gguf_writer_copy_kv(w, kv));
    }
    for (int64_t i = 0; i < bd_gguf_tensor_count(f); i++) {
        const bd_gguf_tensor *t = bd_gguf_tensor_at(f, i);
        CHECK(t && bd_gguf_find_tensor(f, t->name) == t);
        CHECK(t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS);
        CHECK(bd_type_get(t->type) != NULL);
        CHECK(t->offset % a == 0);
        CHECK((const uint8_t *)t->data >= data && (const uint8_t *)t->data + t->nbytes <= data + size);
        if (t->nbytes) g_sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        CHECK(bd_gguf_writer_add_tensor_ref(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes));
    }
    bd_gguf_writer_free(w);

    bd_pairing_report r;
    bd_pairing_report_init(&r);
    bd_pairing_target ti;
    bd_dflash_schema ds;
    g_sink += bd_pairing_target_check(f, &ti, &r) + bd_pairing_drafter_check(f, &ds, &r);
    bd_gguf_close(f);

    int fd = memfd_create("bd-fuzz", 0);
    if (fd >= 0) {
        if (write(fd, data, size) == (ssize_t)size) {
            char path[64];
            snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
            bd_model *m = bd_model_open(path, err, sizeof err);
            if (m) g_sink += (uint64_t)bd_model_n_layer(m) + bd_model_weight_bytes(m);
            bd_model_free(m);
        }
        close(fd);
    }
    return 0;
}
