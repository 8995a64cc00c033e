/*
 * cli.h - one function per subcommand; main.c dispatches on argv[1].
 * Each returns the process exit status (0 ok, 1 runtime error, 2 usage).
 * Only code under src/cli may print to stdout/stderr for the user or exit.
 */
#ifndef BD_CLI_H
#define BD_CLI_H

int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_inspect(int argc, char **argv);

#endif
