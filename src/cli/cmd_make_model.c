/*
 * cmd_make_model.c - `blockdraft make-model`: write a synthetic qwen3, llama,
 * qwen3moe, qwen35 or qwen35moe GGUF with random weights (test fixtures,
 * benchmark-sized models), or a DFlash drafter (cmd_make_drafter.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/base.h"
#include "../model/synth.h"
#include "../tensor/tensor.h"
#include "cli.h"

static void make_model_usage(FILE *out) {
    fprintf(out,
            "usage: blockdraft make-model --arch qwen3|llama|qwen2|qwen3moe|qwen35|qwen35moe|qwen3next --shape NAME --quant MIX\n"
            "                             --vocab FILE.gguf [options] [-t THREADS] [--plan] -o FILE\n"
            "  --shape   qwen3/llama: %s (qwen2: those with head_count x head_dim = width); qwen3moe: %s\n"
            "            qwen35: %s; qwen35moe: %s; qwen3next: %s\n"
            "  --quant   %s\n"
            "  --vocab   GGUF whose tokenizer.* keys are copied\n"
            "  --n-vocab N  vocabulary size (default: the --vocab file's; the real qwen35 shapes\n"
            "            248320); a larger N pads the tokenizer with UNUSED [PAD<id>] tokens\n"
            "  --seed    PRNG seed (default 1); the file is a pure function of the options\n"
            "  --tied|--untied  share token_embd with the output (default: the shape's)\n"
            "  --plan    print the tensor table (name, shape, type) instead of writing\n"
            "  --constant-output  output_norm = 0: greedy emits token 0 forever (target for\n"
            "            constructed drafters: `make-model --arch dflash --drafter constructed`)\n"
            "  --layers N   N (trunk) layers of the shape's per-layer size (hybrids: schedule by\n"
            "            interval)\n"
            "  qwen35/qwen35moe/qwen3next only:\n"
            "  --recurrent-layers auto|1,1,0,1,...  write attention.recurrent_layers (one flag\n"
            "            per trunk layer, 1 = Gated DeltaNet), overriding the interval rule\n"
            "  --mtp N      append N MTP (nextn) blocks, counted in block_count\n"
            "  --fused-gate-up  qwen35moe/qwen3next: ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps\n"
            "  --gdn-split  qwen3next: GDN attn_qkv + attn_gate (newer converters) instead of ssm_in\n"
            "  --arch dflash --target FILE ...  write a DFlash drafter (see --arch dflash --help)\n",
            bd_synth_shape_names("qwen3"), bd_synth_shape_names("qwen3moe"), bd_synth_hybrid_shape_names("qwen35"),
            bd_synth_hybrid_shape_names("qwen35moe"), bd_synth_hybrid_shape_names("qwen3next"), bd_synth_mix_names());
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || s[0] == '-') return false;
    *out = v;
    return true;
}

int cmd_make_model(int argc, char **argv) {
    /* drafters have their own generator and options (cmd_make_drafter.c) */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--arch") && !strcmp(argv[i + 1], "dflash")) return cmd_make_drafter(argc, argv);
    bd_synth_opts o = {.arch = NULL, .shape = NULL, .mix = NULL, .seed = 1, .tied = -1,
                       .vocab_path = NULL, .n_threads = 0};
    const char *outpath = NULL;
    bool plan_only = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            make_model_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--tied")) {
            o.tied = 1;
        } else if (!strcmp(a, "--untied")) {
            o.tied = 0;
        } else if (!strcmp(a, "--constant-output")) {
            o.constant_output = true;
        } else if (!strcmp(a, "--plan")) {
            plan_only = true;
        } else if (!strcmp(a, "--fused-gate-up")) {
            o.fused_gate_up = true;
        } else if (!strcmp(a, "--gdn-split")) {
            o.gdn_split = true;
        } else if (v && !strcmp(a, "--recurrent-layers")) {
            o.recurrent = v, i++;
        } else if (v && (!strcmp(a, "--layers") || !strcmp(a, "--mtp") || !strcmp(a, "--n-vocab"))) {
            uint64_t n;
            uint64_t lo = !strcmp(a, "--mtp") ? 0 : 1, hi = !strcmp(a, "--n-vocab") ? INT32_MAX : 256;
            if (!parse_u64(v, &n) || n < lo || n > hi) {
                fprintf(stderr, "make-model: bad %s '%s' (%llu..%llu)\n", a, v, (unsigned long long)lo,
                        (unsigned long long)hi);
                return 2;
            }
            if (!strcmp(a, "--layers")) o.n_layers = (uint32_t)n;
            else if (!strcmp(a, "--mtp")) o.n_mtp = (uint32_t)n;
            else o.n_vocab = (uint32_t)n;
            i++;
        } else if (v && !strcmp(a, "--arch")) {
            o.arch = v, i++;
        } else if (v && !strcmp(a, "--shape")) {
            o.shape = v, i++;
        } else if (v && !strcmp(a, "--quant")) {
            o.mix = v, i++;
        } else if (v && !strcmp(a, "--vocab")) {
            o.vocab_path = v, i++;
        } else if (v && !strcmp(a, "-o")) {
            outpath = v, i++;
        } else if (v && !strcmp(a, "--seed")) {
            if (!parse_u64(v, &o.seed)) {
                fprintf(stderr, "make-model: bad --seed '%s'\n", v);
                return 2;
            }
            i++;
        } else if (v && !strcmp(a, "-t")) {
            uint64_t t;
            if (!parse_u64(v, &t) || t > 1024) {
                fprintf(stderr, "make-model: bad -t '%s'\n", v);
                return 2;
            }
            o.n_threads = (int)t;
            i++;
        } else {
            fprintf(stderr, "make-model: unknown or incomplete option '%s'\n", a);
            make_model_usage(stderr);
            return 2;
        }
    }
    if (!o.arch || !o.shape || !o.mix || (!outpath && !plan_only) || (!o.vocab_path && !plan_only)) {
        fprintf(stderr, "make-model: --arch, --shape, --quant, --vocab and -o are required\n");
        make_model_usage(stderr);
        return 2;
    }
    char err[512];
    if (plan_only) {
        /* The table without a vocabulary file uses the Qwen3 vocabulary size
         * (or --n-vocab, or the real hybrid shapes' 248320). */
        bd_synth_plan plan;
        if (!bd_synth_plan_make(&o, bd_synth_n_vocab(&o, 151936), &plan, err, sizeof err)) {
            fprintf(stderr, "make-model: %s\n", err);
            return 2;
        }
        for (int i = 0; i < plan.n_tensors; i++) {
            const bd_synth_tensor *t = &plan.tensors[i];
            if (t->n_dims == 3)
                printf("%-34s %8llu %8llu %5llu  %s\n", t->name, (unsigned long long)t->ne[0],
                       (unsigned long long)t->ne[1], (unsigned long long)t->ne[2], bd_type_name(t->type));
            else
                printf("%-34s %8llu %8llu        %s\n", t->name, (unsigned long long)t->ne[0],
                       (unsigned long long)t->ne[1], bd_type_name(t->type));
        }
        bd_synth_plan_free(&plan);
        return 0;
    }
    if (o.recurrent && strcmp(o.recurrent, "auto") && !strchr(o.recurrent, '0'))
        fprintf(stderr, "make-model: note: no attention layer; llama.cpp v0.5.0 aborts on such files "
                        "(GGML_ASSERT(buffer) for the empty KV cache)\n");
    double t0 = bd_time_ms();
    if (!bd_synth_write(&o, outpath, err, sizeof err)) {
        fprintf(stderr, "make-model: %s\n", err);
        return 1;
    }
    struct stat st;
    long long size = stat(outpath, &st) == 0 ? (long long)st.st_size : -1;
    fprintf(stderr, "make-model: wrote %s (%lld bytes) in %.1f s\n", outpath, size,
            (bd_time_ms() - t0) / 1000.0);
    return 0;
}
