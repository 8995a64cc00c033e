/*
 * cmd_show.c - `blockdraft show NAME`: config, files and install checks.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../gallery/gallery.h"
#include "args.h"
#include "cli.h"

int cmd_show(int argc, char **argv) {
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (arg_is(argv[i], "-h", "--help")) {
            printf("usage: blockdraft show NAME\n"
                   "Prints the model's config, its files (size, SHA-256, present or missing)\n"
                   "and the checks run when it was installed.\n");
            return 0;
        }
        if (argv[i][0] == '-' || name) {
            fprintf(stderr, "blockdraft show: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
        name = argv[i];
    }
    if (!name) {
        fprintf(stderr, "usage: blockdraft show NAME\n");
        return 2;
    }
    char models[PATH_MAX], err[1024], why[256];
    if (!gallery_models_dir(models, sizeof models, err, sizeof err)) {
        fprintf(stderr, "blockdraft show: %s\n", err);
        return 1;
    }
    if (!gallery_name_check(name, why, sizeof why)) {
        fprintf(stderr, "blockdraft show: %s\n", why);
        return 1;
    }
    char cfg_path[PATH_MAX + 200];
    gallery_join(cfg_path, sizeof cfg_path, models, name, ".yaml");
    char *text = NULL;
    size_t len;
    bool have_cfg = gallery_read_file(cfg_path, 1 << 20, &text, &len, err, sizeof err);
    gallery_state st;
    bool absent;
    char serr[1024];
    bool have_state = gallery_state_read(models, name, &st, &absent, serr, sizeof serr);
    if (!have_cfg && !have_state) {
        fprintf(stderr, "blockdraft show: model '%s' is not installed in %s\n", name, models);
        return 1;
    }
    printf("name:    %s\n", name);
    if (have_state) {
        /* the record quotes the index and the GGUF files: escaped */
        printf("status:  %s%s%s\n", cli_esc(st.status), st.reason[0] ? ": " : "", cli_esc(st.reason));
        printf("from:    %s\n", cli_esc(st.gallery));
        printf("pulled:  %s\n", st.installed_at);
    } else {
        printf("status:  %s\n", absent ? "manual (no install record)" : serr);
    }
    printf("config:  %s\n", cfg_path);
    if (have_cfg) {
        gallery_config cfg;
        char cerr[1024];
        if (!gallery_config_parse(text, len, cfg_path, &cfg, cerr, sizeof cerr))
            printf("  INVALID: %s\n", cerr);
        fputs("---\n", stdout);
        cli_put_esc(stdout, text, true);
        printf("%s---\n", (len && text[len - 1] == '\n') ? "" : "\n");
    } else {
        printf("  (missing: %s)\n", err);
    }
    free(text);
    if (have_state) {
        printf("files:\n");
        for (int i = 0; i < st.n_files; i++) {
            const gallery_state_file *f = &st.files[i];
            char path[PATH_MAX + 16], pe[512], sz[32];
            struct stat sb;
            const char *where = "missing";
            if (!gallery_path_inside(models, f->filename, path, sizeof path, pe, sizeof pe))
                where = "outside the models folder";
            else if (stat(path, &sb) == 0)
                where = ((uint64_t)sb.st_size == f->size) ? "present" : "present, size differs";
            cli_human_bytes((double)f->size, sz, sizeof sz);
            printf("  %-8s %s\n           %s, sha256 %s, %s\n", cli_esc(f->role), cli_esc(f->filename), sz,
                   f->sha256[0] ? cli_esc(f->sha256) : "(none: --insecure)", where);
        }
        printf("checks:\n");
        for (int i = 0; i < st.n_checks; i++)
            printf("  %-12s %-16s %s\n", cli_esc(st.checks[i].verdict), cli_esc(st.checks[i].name),
                   cli_esc(st.checks[i].detail));
    }
    return 0;
}
