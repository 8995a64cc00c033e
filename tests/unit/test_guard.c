/*
 * test_guard.c - the SIGBUS guard for mapped model files (issue 16 item 4):
 * a file truncated while mapped, read from several pool threads at once,
 * reads zeros and marks the mapping faulted instead of killing the
 * process; a model forward on such a file fails with a message; a fault
 * outside blockdraft's mappings still kills (the guard hides nothing else).
 * And the copy of big mapped files into anonymous huge pages
 * (bd_fmap_prefetch): same addresses, same bytes, no longer reached by a
 * truncation; small files and bd_fmap_set_copy(false) keep the mapping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blockdraft.h"
#include "base/base.h"

static char g_dir[64];

static void write_pages(const char *path, int n_pages, long pg) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int p = 0; p < n_pages; p++)
        for (long i = 0; i < pg; i++) fputc(p + 1, f);
    fclose(f);
}

typedef struct {
    const uint8_t *data;
    uint64_t size;
    _Atomic uint64_t sum;
} sum_ctx;

static void sum_part(void *ctx, int ith, int nth) {
    sum_ctx *c = ctx;
    int64_t lo, hi;
    bd_split((int64_t)c->size, ith, nth, &lo, &hi);
    uint64_t s = 0;
    for (int64_t i = hi - 1; i >= lo; i--) s += c->data[i]; /* from the end: the lost pages first */
    atomic_fetch_add(&c->sum, s);
}

/* Truncated under a mapping, read by 4 threads: zeros, not SIGBUS. */
static void test_truncated_mapping(void **state) {
    (void)state;
    long pg = sysconf(_SC_PAGESIZE);
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/pages.bin", g_dir);
    write_pages(path, 4, pg);
    bd_fmap m;
    assert_true(bd_fmap_open(&m, path, err, sizeof err));
    bd_fmap other;
    char path2[128];
    snprintf(path2, sizeof path2, "%s/other.bin", g_dir);
    write_pages(path2, 2, pg);
    assert_true(bd_fmap_open(&other, path2, err, sizeof err));
    assert_true(bd_fmap_guard_install(err, sizeof err));
    assert_true(bd_fmap_intact(&m));
    bd_pool *pool = bd_pool_create(4);
    assert_non_null(pool);
    sum_ctx c = {.data = m.data, .size = m.size};
    bd_pool_run(pool, sum_part, &c);
    assert_int_equal(atomic_load(&c.sum), (uint64_t)pg * (1 + 2 + 3 + 4));
    assert_int_equal(truncate(path, pg), 0); /* keep the first page */
    atomic_store(&c.sum, 0);
    bd_pool_run(pool, sum_part, &c);
    assert_int_equal(atomic_load(&c.sum), (uint64_t)pg * 1); /* pages 2-4 read as zeros */
    assert_false(bd_fmap_intact(&m));
    /* another mapping is untouched by it */
    assert_true(bd_fmap_intact(&other));
    assert_int_equal(other.data[pg], 2);
    bd_pool_free(pool);
    bd_fmap_close(&m);
    bd_fmap_close(&other);
    /* a slot reused by a new mapping starts intact */
    write_pages(path, 1, pg);
    assert_true(bd_fmap_open(&m, path, err, sizeof err));
    assert_true(bd_fmap_intact(&m));
    bd_fmap_close(&m);
}

/* A model whose file is truncated while open: the forward fails with a
 * message; nothing crashes. */
static void test_model_truncated(void **state) {
    (void)state;
    const char *sh = getenv("BD_SHARED");
    if (!sh) sh = "../shared";
    char src[512], path[128], err[512], cmd[800];
    snprintf(src, sizeof src, "%s/fixtures/stories260K/stories260K.gguf", sh);
    snprintf(path, sizeof path, "%s/model.gguf", g_dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, path);
    assert_int_equal(system(cmd), 0);
    assert_true(bd_mmap_guard_install(err, sizeof err));
    bd_model *m = bd_model_open(path, err, sizeof err);
    assert_non_null(m);
    bd_session_params sp = bd_session_default_params();
    sp.n_ctx = 64;
    sp.n_threads = 2;
    bd_session *s = bd_session_create(m, &sp, err, sizeof err);
    assert_non_null(s);
    int32_t tok[4] = {1, 2, 3, 4};
    assert_true(bd_session_forward(s, tok, 4, BD_LOGITS_LAST, err, sizeof err));
    assert_true(bd_model_intact(m));
    assert_int_equal(truncate(path, 4096), 0);
    assert_false(bd_session_forward(s, tok, 4, BD_LOGITS_LAST, err, sizeof err));
    assert_non_null(strstr(err, "changed on disk while in use"));
    assert_false(bd_model_intact(m));
    bd_session_free(s);
    bd_model_free(m);
}

/* Byte i of the test pattern: not periodic in pages or huge pages. */
static uint8_t pat(uint64_t i) { return (uint8_t)((i * 2654435761u) >> 13 ^ (i >> 21)); }

static void write_pattern(const char *path, uint64_t size) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    static uint8_t buf[1 << 16];
    for (uint64_t o = 0; o < size; o += sizeof buf) {
        size_t n = size - o < sizeof buf ? (size_t)(size - o) : sizeof buf;
        for (size_t i = 0; i < n; i++) buf[i] = pat(o + i);
        assert_int_equal(fwrite(buf, 1, n, f), n);
    }
    fclose(f);
}

static bool equals_pattern(const uint8_t *p, uint64_t size) {
    for (uint64_t i = 0; i < size; i++)
        if (p[i] != pat(i)) return false;
    return true;
}

/* The mapping p..p+len is anonymous now: its /proc/self/maps line names no
 * file. */
static bool maps_anonymous(const void *p) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[512];
    bool anon = false, found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || (uintptr_t)p < lo || (uintptr_t)p >= hi) continue;
        found = true;
        anon = !strchr(line, '/');
    }
    fclose(f);
    return found && anon;
}

/* A 72 MiB file (odd size) is copied into anonymous memory at the same
 * address, byte for byte; truncating the file then changes nothing. */
static void test_huge_copy(void **state) {
    (void)state;
    if (!bd_fmap_thp_available()) {
        printf("skip: %s: transparent huge pages are off on this machine (nothing is copied)\n", __func__);
        skip();
    }
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/big.bin", g_dir);
    const uint64_t size = (72ull << 20) + 12345;
    write_pattern(path, size);
    bd_fmap m;
    assert_true(bd_fmap_open(&m, path, err, sizeof err));
    const uint8_t *p0 = m.data;
    assert_false(maps_anonymous(p0));
    bd_fmap_set_copy(true);
    bd_fmap_prefetch(&m);
    assert_true(m.copied);
    assert_ptr_equal(m.data, p0);
    assert_int_equal(m.size, size);
    assert_true(maps_anonymous(p0));
    assert_true(equals_pattern(m.data, m.size));
    assert_int_equal(truncate(path, 4096), 0);
    assert_true(equals_pattern(m.data, m.size));
    assert_true(bd_fmap_intact(&m));
    bd_fmap_close(&m);
}

/* Files below 64 MiB, and any file after bd_fmap_set_copy(false), stay
 * mapped. */
static void test_huge_copy_not_taken(void **state) {
    (void)state;
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/small.bin", g_dir);
    write_pattern(path, (63ull << 20));
    bd_fmap m;
    assert_true(bd_fmap_open(&m, path, err, sizeof err));
    bd_fmap_set_copy(true);
    bd_fmap_prefetch(&m);
    assert_false(m.copied);
    assert_false(maps_anonymous(m.data));
    assert_true(equals_pattern(m.data, m.size));
    bd_fmap_close(&m);
    snprintf(path, sizeof path, "%s/big2.bin", g_dir);
    write_pattern(path, (65ull << 20));
    assert_true(bd_fmap_open(&m, path, err, sizeof err));
    bd_fmap_set_copy(false);
    bd_fmap_prefetch(&m);
    bd_fmap_set_copy(true);
    assert_false(m.copied);
    assert_false(maps_anonymous(m.data));
    assert_true(equals_pattern(m.data, m.size));
    bd_fmap_close(&m);
}

/* A SIGBUS outside any mapping of ours is not swallowed: the process dies
 * of it as it would without the guard. */
static void test_foreign_fault_kills(void **state) {
    (void)state;
    long pg = sysconf(_SC_PAGESIZE);
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/foreign.bin", g_dir);
    write_pages(path, 2, pg);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGBUS, SIG_DFL); /* cmocka's handler would report instead of dying */
        if (!bd_fmap_guard_install(err, sizeof err)) _exit(2);
        int fd = open(path, O_RDONLY);
        const volatile uint8_t *p = mmap(NULL, (size_t)(2 * pg), PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED || ftruncate(open(path, O_WRONLY), 0) != 0) _exit(3);
        _exit(p[pg] == 0 ? 4 : 5); /* must not get here */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGBUS);
}

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/bd-guard.XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_mapping),
        cmocka_unit_test(test_model_truncated),
        cmocka_unit_test(test_foreign_fault_kills),
        cmocka_unit_test(test_huge_copy),
        cmocka_unit_test(test_huge_copy_not_taken),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
