/*
 * kv_row.c - `bd-kv-row TYPE HD IN.f32 OUT`: the bytes blockdraft's KV
 * cache stores for rows of HD floats (IN: little-endian f32, a whole number
 * of rows), through bd_attn_kv_store, the function the forward passes use,
 * for TYPE one of llama.cpp's cache type names (BD_KV_TYPE_NAMES). The rows
 * are stored as given (no rotation: attention.h's basis is the callers').
 * For tests/e2e/oracle_logits.sh, which compares the bytes with those of
 * llama.cpp's row quantizers (`bd-oracle kvrow`). Built by `make tests`.
 *
 * Exit status 0 on success, 1 with a message otherwise.
 */
#include <stdio.h>
#include <stdlib.h>

#include "blockdraft.h"
#include "model/attention.h"

int main(int argc, char **argv) {
    int32_t kv;
    uint32_t type;
    if (argc != 5 || !bd_kv_type_parse(argv[1], &kv) || !bd_attn_cache_type(kv, &type)) {
        fprintf(stderr, "usage: bd-kv-row TYPE HD IN.f32 OUT (TYPE: " BD_KV_TYPE_NAMES ")\n");
        return 1;
    }
    const long hd = strtol(argv[2], NULL, 10);
    const size_t rb = hd > 0 && hd <= 65536 ? bd_attn_row_bytes(type, (int32_t)hd) : 0;
    if (!rb) {
        fprintf(stderr, "bd-kv-row: %s rows of %s elements are not whole blocks\n", argv[1], argv[2]);
        return 1;
    }
    FILE *in = fopen(argv[3], "rb"), *out = fopen(argv[4], "wb");
    float *row = malloc((size_t)hd * sizeof *row);
    unsigned char *dst = malloc(rb);
    int rc = in && out && row && dst ? 0 : 1;
    while (!rc) {
        const size_t got = fread(row, sizeof *row, (size_t)hd, in);
        if (got == 0) break;
        if (got != (size_t)hd) {
            fprintf(stderr, "bd-kv-row: %s is not a whole number of rows of %ld floats\n", argv[3], hd);
            rc = 1;
            break;
        }
        bd_attn_kv_store(dst, type, row, (int32_t)hd);
        if (fwrite(dst, 1, rb, out) != rb) rc = 1;
    }
    if (!in || !out) perror("bd-kv-row");
    if (in) fclose(in);
    if (out && fclose(out) != 0) rc = 1;
    free(row);
    free(dst);
    return rc;
}
