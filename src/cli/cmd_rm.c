/*
 * cmd_rm.c - `blockdraft rm NAME...`: remove installed models, keeping
 * files another installed model still uses.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../gallery/gallery.h"
#include "args.h"
#include "cli.h"

int cmd_rm(int argc, char **argv) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (arg_is(argv[i], "-h", "--help")) {
            printf("usage: blockdraft rm NAME [NAME...]\n"
                   "Removes the model's config, install record and the files no other model uses.\n");
            return 0;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "blockdraft rm: unknown option '%s'\n", argv[i]);
            return 2;
        }
        n++;
    }
    if (!n) {
        fprintf(stderr, "usage: blockdraft rm NAME [NAME...]\n");
        return 2;
    }
    char models[PATH_MAX], err[1024];
    if (!gallery_models_dir(models, sizeof models, err, sizeof err)) {
        fprintf(stderr, "blockdraft rm: %s\n", err);
        return 1;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        gallery_rm_result r;
        if (!gallery_remove(models, argv[i], &r, err, sizeof err)) {
            fprintf(stderr, "blockdraft rm: %s\n", err);
            rc = 1;
            continue;
        }
        for (int k = 0; k < r.n_removed; k++) printf("removed %s\n", r.removed[k]);
        for (int k = 0; k < r.n_kept; k++)
            printf("kept    %s (used by %s)\n", r.kept[k], r.kept_for[k]);
        printf("%s: removed\n", argv[i]);
    }
    return rc;
}
