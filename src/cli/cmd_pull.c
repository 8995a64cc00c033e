/*
 * cmd_pull.c - `blockdraft pull NAME...`: install gallery bundles.
 *
 *   blockdraft pull NAME [NAME...] [--index PATH|URL]... [--insecure] [-q]
 *
 * Also provides cli_pull_opts_init(), the progress display shared with
 * `blockdraft run NAME` (which pulls a missing model first).
 * Exit status: 0 installed (also "unsupported": downloaded and verified,
 * but this build cannot run it yet; a warning says why), 1 failed, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../gallery/gallery.h"
#include "args.h"
#include "cli.h"

/* ------------------------------------------------------------------------
 * Progress display
 * ---------------------------------------------------------------------- */

typedef struct progress_state {
    bool tty;
    bool quiet;
    bool bar_open; /* a \r-line is on screen */
} progress_state;

static progress_state g_progress;

static void close_bar(progress_state *ps) {
    if (ps->bar_open) {
        fputc('\n', stderr);
        ps->bar_open = false;
    }
}

static void on_progress(void *ctx, const fetch_event *ev) {
    progress_state *ps = ctx;
    char a[32], b[32], r[32];
    switch (ev->phase) {
    case FETCH_PHASE_START:
        if (ev->attempt == 1 && !ps->quiet) {
            close_bar(ps);
            if (ev->done) {
                cli_human_bytes((double)ev->done, a, sizeof a);
                fprintf(stderr, "downloading %s (resuming after %s)\n", ev->label, a);
            } else {
                fprintf(stderr, "downloading %s\n", ev->label);
            }
        }
        break;
    case FETCH_PHASE_HASHING:
    case FETCH_PHASE_PROGRESS:
        if (!ps->tty || ps->quiet) break;
        cli_human_bytes((double)ev->done, a, sizeof a);
        if (ev->phase == FETCH_PHASE_HASHING) {
            fprintf(stderr, "\r  verifying %s %s%s", ev->label, a, "          ");
        } else if (ev->total > 0) {
            double frac = (double)ev->done / (double)ev->total;
            if (frac > 1) frac = 1;
            char bar[31];
            int fill = (int)(frac * 30);
            for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
            bar[30] = 0;
            cli_human_bytes((double)ev->total, b, sizeof b);
            cli_human_bytes(ev->rate, r, sizeof r);
            char eta[32] = "--";
            if (ev->rate > 1) {
                double s = (double)(ev->total - ev->done) / ev->rate;
                if (s < 3600) snprintf(eta, sizeof eta, "%dm%02ds", (int)s / 60, (int)s % 60);
                else snprintf(eta, sizeof eta, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
            }
            fprintf(stderr, "\r  [%s] %3.0f%%  %s / %s  %s/s  ETA %s   ", bar, frac * 100, a, b, r,
                    eta);
        } else {
            cli_human_bytes(ev->rate, r, sizeof r);
            fprintf(stderr, "\r  %s  %s/s   ", a, r);
        }
        ps->bar_open = true;
        break;
    case FETCH_PHASE_RETRY:
        close_bar(ps);
        fprintf(stderr, "  %s: %s\n", ev->label, ev->message);
        break;
    case FETCH_PHASE_DONE:
        close_bar(ps);
        if (!ps->quiet) {
            cli_human_bytes((double)ev->done, a, sizeof a);
            fprintf(stderr, "  %s: %s, SHA-256 verified\n", ev->label, a);
        }
        break;
    }
    fflush(stderr);
}

static void on_note(void *ctx, const char *msg) {
    progress_state *ps = ctx;
    close_bar(ps);
    if (!ps->quiet || !strncmp(msg, "warning", 7) || strstr(msg, "waiting"))
        fprintf(stderr, "%s\n", msg);
}

void cli_pull_opts_init(struct gallery_pull_opts *o, bool quiet) {
    gallery_pull_opts_init(o);
    g_progress.tty = isatty(STDERR_FILENO);
    g_progress.quiet = quiet;
    o->fetch.progress = on_progress;
    o->fetch.progress_ctx = &g_progress;
    o->note = on_note;
    o->note_ctx = &g_progress;
}

void cli_print_pull_result(const struct gallery_pull_result *r) {
    close_bar(&g_progress);
    for (int i = 0; i < r->report.n_checks; i++) {
        const bd_pairing_check *c = &r->report.checks[i];
        if (c->verdict == BD_PAIRING_WARN)
            fprintf(stderr, "  warning: %s: %s\n", c->name, c->detail);
    }
    if (!strcmp(r->status, "unsupported"))
        fprintf(stderr,
                "warning: %s was downloaded and verified but is marked unsupported: %s\n"
                "         `blockdraft run %s` will refuse it until this build supports it.\n",
                r->name, r->reason, r->name);
    else
        fprintf(stderr, "%s: installed (%s)\n", r->name, r->config_path);
}

/* ------------------------------------------------------------------------
 * Command
 * ---------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: blockdraft pull NAME [NAME...] [options]\n"
            "  --index PATH|URL   also search this gallery index (repeatable; searched first)\n"
            "  --insecure         allow gallery files that have no sha256\n"
            "  -q, --quiet        no progress display\n"
            "Downloads every file of the gallery entry (resuming .partial files), checks each\n"
            "SHA-256 and that the drafter fits its target, then writes the model config.\n"
            "Models folder: $BLOCKDRAFT_MODELS, else ~/.local/share/blockdraft/models.\n"
            "Other indexes: BLOCKDRAFT_GALLERY=a.yaml,https://... (after the built-in one).\n"
            "Mirror: BLOCKDRAFT_HF_ENDPOINT; gated repos: HF_TOKEN.\n");
}

int cmd_pull(int argc, char **argv) {
    const char *indexes[16];
    int n_idx = 0;
    int n_names = 0; /* the names stay in argv: any number of them */
    bool insecure = false, quiet = false;
    const char *v;
    for (int i = 1; i < argc; i++) {
        if (arg_take(argc, argv, &i, (const char *[]){"--index", NULL}, &v)) {
            if (n_idx == 16) {
                fprintf(stderr, "blockdraft pull: too many --index options\n");
                return 2;
            }
            indexes[n_idx++] = v;
        } else if (!strcmp(argv[i], "--insecure")) {
            insecure = true;
        } else if (arg_is(argv[i], "-q", "--quiet")) {
            quiet = true;
        } else if (arg_is(argv[i], "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "blockdraft pull: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            n_names++;
        }
    }
    if (n_names == 0) {
        usage(stderr);
        return 2;
    }
    gallery_pull_opts o;
    cli_pull_opts_init(&o, quiet);
    o.indexes = indexes;
    o.n_indexes = n_idx;
    o.insecure = insecure;
    int rc = 0;
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--index")) {
            k++; /* its value */
            continue;
        }
        if (argv[k][0] == '-') continue;
        gallery_pull_result r;
        char err[2048];
        if (!gallery_pull(argv[k], &o, &r, err, sizeof err)) {
            close_bar(&g_progress);
            fprintf(stderr, "blockdraft pull: %s\n", err);
            rc = 1;
            continue;
        }
        cli_print_pull_result(&r);
    }
    return rc;
}
