/*
 * cli.h - one function per subcommand; main.c dispatches on argv[1].
 * Each returns the process exit status (0 ok, 1 runtime error, 2 usage).
 * Only code under src/cli may print to stdout/stderr for the user or exit.
 */
#ifndef BD_CLI_H
#define BD_CLI_H

int cmd_run(int argc, char **argv);
int cmd_make_drafter(int argc, char **argv); /* make-model --arch dflash */
int cmd_tokenize(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_make_model(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* cmd_serve.c: OpenAI-compatible server */
int cmd_bench(int argc, char **argv);
int cmd_archs(int argc, char **argv); /* the architecture table */

/* Gallery and model management (cmd_pull.c, cmd_list.c, cmd_show.c,
 * cmd_rm.c, cmd_gallery.c). */
int cmd_pull(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_gallery(int argc, char **argv);

/* For `run NAME`: pull options with the terminal progress display (bar on
 * a tty, one line per file otherwise), and the summary after a pull. */
#include <stdbool.h>
#include <stddef.h>
struct gallery_pull_opts;
struct gallery_pull_result;
void cli_pull_opts_init(struct gallery_pull_opts *o, bool quiet);
void cli_print_pull_result(const struct gallery_pull_result *r);
void cli_human_bytes(double bytes, char *out, size_t n);

#endif
