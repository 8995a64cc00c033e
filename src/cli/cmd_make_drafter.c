/*
 * cmd_make_drafter.c - `blockdraft make-model --arch dflash ...`: write a
 * synthetic DFlash drafter for a target GGUF (see model/synth_dflash.h).
 *
 *   blockdraft make-model --arch dflash --target TARGET.gguf
 *        [--drafter random|constructed] [--accept K|all] [--layers N]
 *        [--block-size B] [--taps N] [--quant f32|f16|bf16|q8_0]
 *        [--mask-id ID] [--swa W [--swa-pattern 1,1,1,1,0]] [--seed S] -o FILE
 */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "../model/synth_dflash.h"
#include "../tensor/tensor.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: blockdraft make-model --arch dflash --target TARGET.gguf [options] -o FILE\n"
            "  --drafter random|constructed  random weights (drafts almost never right), or weights\n"
            "                         built so that against a --constant-output target rows 1..K\n"
            "                         of every block are right and later rows wrong (default random)\n"
            "  --accept K|all         constructed: right for the first K block positions (default all)\n"
            "  --layers N             drafter layers (default 5; 8 for a 35B-A3B-wide qwen35moe target)\n"
            "  --block-size B         trained block length (default 16)\n"
            "  --taps N               tapped target layers (default min(5, trunk layers - 1))\n"
            "  --quant T              type of the plain matrices: f32, f16, bf16, q8_0 (default q8_0)\n"
            "  --mask-id ID           mask token (default 248070 for qwen35/qwen35moe targets whose\n"
            "                         vocabulary has it, else 151669 when it exists, else the last id)\n"
            "  --swa W                sliding-window attention layers of window W\n"
            "                         (dflash.attention.sliding_window)\n"
            "  --swa-pattern FLAGS    one 0/1 flag per drafter layer, 1 = sliding window (default: all);\n"
            "                         e.g. 1,1,1,1,0 as the Qwen3.6-27B drafter\n"
            "  --seed S               PRNG seed (default 1)\n"
            "Targets: qwen3, llama, qwen3moe, qwen35, qwen35moe (read from the GGUF; hybrid targets get the\n"
            "published drafter sizes of their width and dflash.rope.dimension_sections)\n");
}

int cmd_make_drafter(int argc, char **argv) {
    bd_synth_dflash_opts o = {.accept_k = -1, .weight_type = BD_TYPE_Q8_0, .mask_id = -1, .seed = 1};
    const char *out = NULL, *v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (arg_take(argc, argv, &i, (const char *[]){"--arch", NULL}, &v)) {
            if (strcmp(v, "dflash")) {
                fprintf(stderr, "blockdraft make-model: internal: not a dflash request\n");
                return 2;
            }
        } else if (arg_take(argc, argv, &i, (const char *[]){"--target", NULL}, &v)) o.target_path = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--drafter", NULL}, &v)) {
            if (!strcmp(v, "constructed")) o.constructed = true;
            else if (strcmp(v, "random")) {
                fprintf(stderr, "blockdraft make-model: --drafter must be random or constructed\n");
                return 2;
            }
        } else if (arg_take(argc, argv, &i, (const char *[]){"--accept", NULL}, &v))
            o.accept_k = !strcmp(v, "all") ? -1 : arg_i32(a, v, 0, 63);
        else if (arg_take(argc, argv, &i, (const char *[]){"--layers", NULL}, &v)) o.n_layer = arg_i32(a, v, 1, 64);
        else if (arg_take(argc, argv, &i, (const char *[]){"--block-size", NULL}, &v))
            o.block_size = arg_i32(a, v, 2, 64);
        else if (arg_take(argc, argv, &i, (const char *[]){"--taps", NULL}, &v)) o.n_taps = arg_i32(a, v, 1, 16);
        else if (arg_take(argc, argv, &i, (const char *[]){"--mask-id", NULL}, &v))
            o.mask_id = arg_i32(a, v, 1, 1 << 24);
        else if (arg_take(argc, argv, &i, (const char *[]){"--seed", NULL}, &v)) o.seed = arg_u64(a, v);
        else if (arg_take(argc, argv, &i, (const char *[]){"--swa", NULL}, &v))
            o.swa_window = (uint32_t)arg_i32(a, v, 1, 1 << 24);
        else if (arg_take(argc, argv, &i, (const char *[]){"--swa-pattern", NULL}, &v)) o.swa_pattern = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--quant", NULL}, &v)) {
            if (!strcmp(v, "f32")) o.weight_type = BD_TYPE_F32;
            else if (!strcmp(v, "f16")) o.weight_type = BD_TYPE_F16;
            else if (!strcmp(v, "bf16")) o.weight_type = BD_TYPE_BF16;
            else if (!strcmp(v, "q8_0")) o.weight_type = BD_TYPE_Q8_0;
            else {
                fprintf(stderr, "blockdraft make-model: drafter --quant must be f32, f16, bf16 or q8_0\n");
                return 2;
            }
        } else if (arg_take(argc, argv, &i, (const char *[]){"-o", "--output", NULL}, &v)) out = v;
        else {
            usage(arg_is(a, "-h", "--help") ? stdout : stderr);
            return arg_is(a, "-h", "--help") ? 0 : 2;
        }
    }
    if (!o.target_path || !out) {
        usage(stderr);
        return 2;
    }
    if (o.accept_k >= 0 && !o.constructed) {
        fprintf(stderr, "blockdraft make-model: --accept needs --drafter constructed\n");
        return 2;
    }
    char err[512];
    if (!bd_synth_dflash_write(&o, out, err, sizeof err)) {
        fprintf(stderr, "blockdraft make-model: %s\n", err);
        return 1;
    }
    return 0;
}
