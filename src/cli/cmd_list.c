/*
 * cmd_list.c - `blockdraft list`: installed models, sizes, status.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../gallery/gallery.h"
#include "args.h"
#include "cli.h"

void cli_human_bytes(double b, char *out, size_t n) {
    const char *u[] = {"B", "KB", "MB", "GB", "TB"};
    int i = 0;
    while (b >= 1000 && i < 4) {
        b /= 1000;
        i++;
    }
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

int cmd_list(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (arg_is(argv[i], "-h", "--help")) {
            printf("usage: blockdraft list\n"
                   "Models in $BLOCKDRAFT_MODELS (else ~/.local/share/blockdraft/models) with\n"
                   "their size on disk and status: installed, unsupported (verified but this\n"
                   "build cannot run it yet), manual (config written by hand), incomplete\n"
                   "(files missing) or invalid (the config does not parse).\n");
            return 0;
        }
        fprintf(stderr, "blockdraft list: unknown argument '%s'\n", argv[i]);
        return 2;
    }
    char models[PATH_MAX], err[1024];
    if (!gallery_models_dir(models, sizeof models, err, sizeof err)) {
        fprintf(stderr, "blockdraft list: %s\n", err);
        return 1;
    }
    gallery_installed *v;
    int n;
    if (!gallery_list_installed(models, &v, &n, err, sizeof err)) {
        fprintf(stderr, "blockdraft list: %s\n", err);
        return 1;
    }
    if (n == 0) {
        printf("no models in %s (`blockdraft gallery` lists what can be pulled)\n", models);
        free(v);
        return 0;
    }
    printf("%-32s %-12s %10s\n", "NAME", "STATUS", "SIZE");
    for (int i = 0; i < n; i++) {
        char sz[32];
        cli_human_bytes((double)v[i].bytes, sz, sizeof sz);
        printf("%-32s %-12s %10s\n", v[i].name, v[i].status, sz);
        if (v[i].reason[0]) printf("    %s\n", v[i].reason);
    }
    free(v);
    return 0;
}
