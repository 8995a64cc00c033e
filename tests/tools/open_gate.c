/*
 * open_gate.c - an LD_PRELOAD shim for the server tests: open() of one
 * path waits until a gate file exists.
 *
 * The llama-server compatibility test needs a server that stays in the
 * "loading" state for as long as the test wants (GET /health must answer
 * 503 then). A model file cannot be made slow to open without help: a FIFO
 * is refused at once as not a regular file (as it must be), and load time
 * of a real file depends on the machine. With
 *   LD_PRELOAD=bd-open-gate.so BD_GATE_PATH=/x/model.gguf BD_GATE_FILE=/x/go
 * an open() of exactly BD_GATE_PATH blocks until BD_GATE_FILE exists (at
 * most 120 s), then opens normally. Every other open() is untouched. Not
 * for the ASan binary (the sanitizer runtime must come first).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int open(const char *path, int flags, ...);
int open64(const char *path, int flags, ...);

static void gate_wait(const char *path) {
    const char *gp = getenv("BD_GATE_PATH"), *gf = getenv("BD_GATE_FILE");
    if (!gp || !gf || !path || strcmp(path, gp)) return;
    struct stat st;
    for (int i = 0; i < 120 * 50 && stat(gf, &st) != 0; i++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int gate_open(const char *sym, const char *path, int flags, mode_t mode) {
    gate_wait(path);
    int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, sym);
    if (!real) return -1;
    return real(path, flags, mode);
}

int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return gate_open("open", path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return gate_open("open64", path, flags, mode);
}
