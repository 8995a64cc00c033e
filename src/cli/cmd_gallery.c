/*
 * cmd_gallery.c - `blockdraft gallery [--tag T] [--index PATH|URL]...`:
 * the entries that can be pulled.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../gallery/gallery.h"
#include "args.h"
#include "cli.h"

int cmd_gallery(int argc, char **argv) {
    const char *indexes[16], *tag = NULL, *v;
    int n_idx = 0;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        if (arg_take(argc, argv, &i, (const char *[]){"--index", NULL}, &v)) {
            if (n_idx < 16) indexes[n_idx++] = v;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--tag", "-t", NULL}, &v)) {
            tag = v;
        } else if (arg_is(argv[i], "-v", "--verbose")) {
            verbose = true;
        } else if (arg_is(argv[i], "-h", "--help")) {
            printf("usage: blockdraft gallery [--tag T] [--index PATH|URL]... [-v]\n"
                   "Lists gallery entries (built-in index, --index sources, BLOCKDRAFT_GALLERY).\n"
                   "-v adds descriptions and files.\n");
            return 0;
        } else {
            fprintf(stderr, "blockdraft gallery: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    fetch_opts fo;
    fetch_opts_init(&fo);
    gallery_catalog cat;
    char err[1024];
    if (!gallery_catalog_load(&cat, indexes, n_idx, true, &fo, err, sizeof err)) {
        fprintf(stderr, "blockdraft gallery: %s\n", err);
        return 1;
    }
    for (int i = 0; i < cat.n_warnings; i++) fprintf(stderr, "warning: %s\n", cat.warnings[i]);
    char models[PATH_MAX];
    if (!gallery_models_dir(models, sizeof models, err, sizeof err)) models[0] = 0;
    int shown = 0;
    printf("%-32s %-10s %s\n", "NAME", "INSTALLED", "TAGS");
    for (int i = 0; i < cat.n_idx; i++) {
        const gallery_index *ix = cat.idx[i];
        for (int j = 0; j < ix->n_entries; j++) {
            const gallery_entry *e = &ix->entries[j];
            if (!e->name[0]) continue;
            if (tag && !gallery_entry_has_tag(e, tag)) continue;
            if (gallery_catalog_find(&cat, e->name) != e) continue; /* shadowed */
            char cfg[PATH_MAX + 200], tags[512] = "";
            struct stat st;
            bool inst = models[0] && gallery_join(cfg, sizeof cfg, models, e->name, ".yaml") &&
                        stat(cfg, &st) == 0;
            size_t used = 0;
            for (int t = 0; t < e->n_tags && used < sizeof tags - 2; t++)
                used += (size_t)snprintf(tags + used, sizeof tags - used, "%s%s", t ? "," : "",
                                         e->tags[t]);
            /* everything here comes from an index: control bytes escaped */
            printf("%-32s %-10s %s\n", cli_esc(e->name), inst ? "yes" : "-", cli_esc(tags));
            if (e->problem[0]) printf("    cannot be installed: %s\n", cli_esc(e->problem));
            if (verbose) {
                printf("    from %s\n", cli_esc(ix->source));
                if (e->description[0]) {
                    fputs("    ", stdout);
                    cli_put_esc(stdout, e->description, true);
                }
                if (e->description[0] && e->description[strlen(e->description) - 1] != '\n')
                    printf("\n");
                for (int f = 0; f < e->n_files; f++)
                    printf("    file %s\n         sha256 %s\n", cli_esc(e->files[f].filename),
                           e->files[f].sha256[0] ? cli_esc(e->files[f].sha256) : "(none)");
            }
            shown++;
        }
    }
    if (!shown) printf("(no entries%s%s)\n", tag ? " with tag " : "", tag ? tag : "");
    gallery_catalog_free(&cat);
    return 0;
}
