/*
 * args.h - small helpers shared by the subcommands' option parsers.
 */
#ifndef BD_CLI_ARGS_H
#define BD_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* If argv[*i] equals one of the names (NULL-terminated list), consume it
 * and its value; *val gets the value. Exits with a usage message (status
 * 2) when the value is missing: only CLI code does this. */
bool arg_take(int argc, char **argv, int *i, const char *const *names, const char **val);
bool arg_is(const char *a, const char *n1, const char *n2);

/* Strict number parsing; print "blockdraft: bad value for OPT: VAL" and
 * exit 2 on failure. */
int32_t arg_i32(const char *opt, const char *v, int32_t lo, int32_t hi);
uint64_t arg_u64(const char *opt, const char *v);
float arg_f32(const char *opt, const char *v, float lo, float hi);

/* "auto" | "full" | "short" -> the DFlash block enum (bd_dflash_block, as
 * an int so this header needs no engine header); exits 2 otherwise. */
int arg_dflash_block(const char *opt, const char *v);

/* Parse "1,2,3" into ids (at most max). Returns the count or -1. */
int arg_ids(const char *s, int32_t *ids, int max);

/* Read a whole file into a malloc'd NUL-terminated buffer (NULL on error). */
char *arg_read_file(const char *path, size_t *len);

/* Text from files and the network (index entries, GGUF strings) for the
 * terminal, control bytes escaped (bd_escape_ctrl). cli_put_esc writes s
 * whole; cli_esc returns an escaped copy of at most 1023 bytes in one of
 * four rotating static buffers (several may be used in one printf). */
void cli_put_esc(FILE *f, const char *s, bool keep_nl);
const char *cli_esc(const char *s);

#endif
