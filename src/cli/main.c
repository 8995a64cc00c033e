/*
 * main.c - `blockdraft COMMAND [options]`: dispatch to src/cli/cmd_*.c.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "../model/arch.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"run", cmd_run, "generate text from a model (-m FILE | NAME)"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server with speculative statistics"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"eval", cmd_eval, "print top-k next-token logits at every prompt position"},
    {"pull", cmd_pull, "download and verify a gallery model (target + DFlash drafter)"},
    {"list", cmd_list, "list installed models with sizes and status"},
    {"show", cmd_show, "show an installed model's config, files and checks"},
    {"rm", cmd_rm, "remove an installed model (keeps files other models use)"},
    {"gallery", cmd_gallery, "list gallery entries that can be pulled [--tag T]"},
    {"inspect", cmd_inspect, "print a GGUF file's metadata and tensor table"},
    {"make-model", cmd_make_model, "write a synthetic qwen3/llama GGUF with random weights"},
    {"bench", cmd_bench, "llama-bench style speed test: pp, tg, verify curve, speculative (-md)"},
    {"archs", cmd_archs, "list the GGUF architectures blockdraft runs (and those it does not yet)"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: blockdraft COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].help);
    char t[256], d[256];
    fprintf(out, "\nmodels: targets %s; drafters %s (blockdraft archs)\n", bd_arch_list(BD_ROLE_TARGET, t, sizeof t),
            bd_arch_list(BD_ROLE_DRAFTER, d, sizeof d));
    fprintf(out, "\n`blockdraft COMMAND --help` shows a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "blockdraft: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
