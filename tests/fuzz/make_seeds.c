/*
 * make_seeds.c - write small valid GGUF files into DIR as a fuzz seed
 * corpus (`make fuzz` adds prefixes of the real fixtures next to them).
 * usage: make_seeds DIR
 */
#include <stdio.h>
#include <string.h>

#include "gguf/bd_gguf.h"
#include "tensor/tensor.h"

static int write_seed(bd_gguf_writer *w, const char *dir, const char *name) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int ok = bd_gguf_writer_write_file(w, path, err, sizeof err);
    if (!ok) fprintf(stderr, "make_seeds: %s\n", err);
    bd_gguf_writer_free(w);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    int rc = 0;

    /* every value type */
    bd_gguf_writer *w = bd_gguf_writer_create();
    bd_gguf_writer_set_str(w, "general.architecture", "llama");
    bd_gguf_writer_set_u8(w, "a.u8", 1);
    bd_gguf_writer_set_i8(w, "a.i8", -1);
    bd_gguf_writer_set_u16(w, "a.u16", 2);
    bd_gguf_writer_set_i16(w, "a.i16", -2);
    bd_gguf_writer_set_u32(w, "a.u32", 3);
    bd_gguf_writer_set_i32(w, "a.i32", -3);
    bd_gguf_writer_set_u64(w, "a.u64", 4);
    bd_gguf_writer_set_i64(w, "a.i64", -4);
    bd_gguf_writer_set_f32(w, "a.f32", 0.5f);
    bd_gguf_writer_set_f64(w, "a.f64", 0.25);
    bd_gguf_writer_set_bool(w, "a.bool", true);
    const char *words[] = {"<unk>", "<s>", "", "hello"};
    bd_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", words, 4);
    const float sc[] = {0, -1, -2, -3};
    bd_gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_VTYPE_FLOAT32, sc, 4);
    /* nested [[1,2],["x"]] */
    const unsigned char nested[] = {2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,   /* u16 x2 */
                                    1, 0, 2, 0,
                                    8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,   /* string x1 */
                                    1, 0, 0, 0, 0, 0, 0, 0, 'x'};
    unsigned char enc[12 + sizeof nested] = {9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    memcpy(enc + 12, nested, sizeof nested);
    bd_gguf_writer_set_raw(w, "a.nested", GGUF_VTYPE_ARRAY, enc, sizeof enc);
    rc |= write_seed(w, dir, "seed-kv.gguf");

    /* tensors of several types, alignment 64 */
    w = bd_gguf_writer_create();
    bd_gguf_writer_set_alignment(w, 64);
    bd_gguf_writer_set_str(w, "general.architecture", "llama");
    static unsigned char zero[4096];
    bd_gguf_writer_add_tensor(w, "f32", BD_TYPE_F32, 2, (const uint64_t[]){4, 2}, zero, 32);
    bd_gguf_writer_add_tensor(w, "q8", BD_TYPE_Q8_0, 1, (const uint64_t[]){64}, zero, 68);
    bd_gguf_writer_add_tensor(w, "q4k", BD_TYPE_Q4_K, 1, (const uint64_t[]){256}, zero, 144);
    bd_gguf_writer_add_tensor(w, "f16", BD_TYPE_F16, 3, (const uint64_t[]){2, 2, 2}, zero, 16);
    bd_gguf_writer_add_tensor(w, "empty", BD_TYPE_F32, 2, (const uint64_t[]){0, 3}, zero, 0);
    rc |= write_seed(w, dir, "seed-tensors.gguf");

    /* empty file */
    rc |= write_seed(bd_gguf_writer_create(), dir, "seed-empty.gguf");
    return rc;
}
