/*
 * cmd_archs.c - `blockdraft archs [--markdown]`: the architecture table
 * (src/model/arch.c), the one list of what this build runs. --markdown
 * prints the README's model table (tests/e2e/docs.sh checks that README
 * holds exactly this output).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "../model/arch.h"

static const char *role_name(enum bd_arch_role r) { return r == BD_ROLE_TARGET ? "target" : "drafter"; }

int cmd_archs(int argc, char **argv) {
    bool md = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--markdown")) md = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: blockdraft archs [--markdown]\n"
                   "  the GGUF architectures blockdraft knows, with what runs and what does not\n");
            return 0;
        } else {
            fprintf(stderr, "blockdraft archs: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (md) printf("| `general.architecture` | role | what it is | status |\n|---|---|---|---|\n");
    for (int i = 0; i < bd_arch_count(); i++) {
        const bd_arch_info *a = bd_arch_at(i);
        if (md)
            printf("| `%s` | %s | %s | %s%s |\n", a->name, role_name(a->role), a->family,
                   a->unsupported ? "not run: " : "runs", a->unsupported ? a->unsupported : "");
        else
            printf("%-14s %-8s %-12s %s%s%s\n", a->name, role_name(a->role), a->unsupported ? "unsupported" : "runs",
                   a->family, a->unsupported ? " -- " : "", a->unsupported ? a->unsupported : "");
    }
    return 0;
}
