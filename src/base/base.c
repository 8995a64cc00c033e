/*
 * base.c - errors, file mapping, time, aligned allocation, CPU features.
 * The thread pool lives in pool.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */

bool bd_err(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* ------------------------------------------------------------------------
 * File mapping
 * ---------------------------------------------------------------------- */

bool bd_fmap_open(bd_fmap *m, const char *path, char *err, size_t errlen) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bd_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return bd_err(err, errlen, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return bd_err(err, errlen, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return true;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return bd_err(err, errlen, "%s: cannot mmap: %s", path, strerror(e));
    m->data = p;
    m->size = (uint64_t)st.st_size;
    return true;
}

void bd_fmap_close(bd_fmap *m) {
    if (m->data) munmap((void *)m->data, (size_t)m->size);
    m->data = NULL;
    m->size = 0;
}

/* ------------------------------------------------------------------------
 * Time and allocation
 * ---------------------------------------------------------------------- */

double bd_time_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void *bd_alloc(size_t size) {
    if (size == 0) return NULL;
    size_t rounded = (size + 63) & ~(size_t)63;
    if (rounded < size) return NULL;
    void *p = aligned_alloc(64, rounded);
    if (p) memset(p, 0, rounded);
    return p;
}

void bd_free(void *p) { free(p); }

/* ------------------------------------------------------------------------
 * CPU features
 * ---------------------------------------------------------------------- */

static bd_cpu g_cpu;
static char g_cpu_desc[200];
static int g_cpu_ready;

static const char *const k_feature_names[BD_CPU_FEATURE_COUNT] = {
    [BD_CPU_AVX2] = "avx2",         [BD_CPU_FMA] = "fma",
    [BD_CPU_F16C] = "f16c",         [BD_CPU_AVXVNNI] = "avxvnni",
    [BD_CPU_AVX512F] = "avx512f",   [BD_CPU_AVX512DQ] = "avx512dq",
    [BD_CPU_AVX512BW] = "avx512bw", [BD_CPU_AVX512VL] = "avx512vl",
    [BD_CPU_AVX512VNNI] = "avx512vnni", [BD_CPU_AVX512BF16] = "avx512bf16",
    [BD_CPU_AMX_TILE] = "amx-tile", [BD_CPU_AMX_INT8] = "amx-int8",
};

#if defined(__x86_64__) || defined(__i386__)
static void cpu_set(bool on, bd_cpu_feature f) {
    if (on) g_cpu.bits |= BD_CPU_BIT(f);
}
#endif

static void cpu_detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    uint64_t xcr0 = 0;
    if (osxsave) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((uint64_t)hi << 32) | lo;
    }
    /* XCR0: bits 1-2 SSE/AVX (ymm) state, 5-7 opmask and zmm state,
     * 17-18 tile configuration and data */
    const bool ymm_ok = avx && (xcr0 & 0x6) == 0x6;
    const bool zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0;
    const bool tile_ok = ((xcr0 >> 17) & 3) == 3;
    if (!ymm_ok) return;
    cpu_set((c >> 12) & 1, BD_CPU_FMA);
    cpu_set((c >> 29) & 1, BD_CPU_F16C);
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        cpu_set((b >> 5) & 1, BD_CPU_AVX2);
        cpu_set(zmm_ok && ((b >> 16) & 1), BD_CPU_AVX512F);
        cpu_set(zmm_ok && ((b >> 17) & 1), BD_CPU_AVX512DQ);
        cpu_set(zmm_ok && ((b >> 30) & 1), BD_CPU_AVX512BW);
        cpu_set(zmm_ok && ((b >> 31) & 1), BD_CPU_AVX512VL);
        cpu_set(zmm_ok && ((c >> 11) & 1), BD_CPU_AVX512VNNI);
        cpu_set(tile_ok && ((d >> 24) & 1), BD_CPU_AMX_TILE);
        cpu_set(tile_ok && ((d >> 25) & 1), BD_CPU_AMX_INT8);
        if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
            cpu_set((a >> 4) & 1, BD_CPU_AVXVNNI);
            cpu_set(zmm_ok && ((a >> 5) & 1), BD_CPU_AVX512BF16);
        }
    }
#endif
}

const bd_cpu *bd_cpu_get(void) {
    if (!__atomic_load_n(&g_cpu_ready, __ATOMIC_ACQUIRE)) {
        cpu_detect();
        __atomic_store_n(&g_cpu_ready, 1, __ATOMIC_RELEASE);
    }
    return &g_cpu;
}

const char *bd_cpu_feature_name(bd_cpu_feature f) {
    return (unsigned)f < BD_CPU_FEATURE_COUNT ? k_feature_names[f] : "?";
}

int bd_cpu_missing(const bd_cpu *c, uint32_t need, char *buf, size_t len) {
    int n = 0;
    size_t at = 0;
    if (buf && len) buf[0] = '\0';
    for (int f = 0; f < BD_CPU_FEATURE_COUNT; f++) {
        if (!((need >> f) & 1) || bd_cpu_has(c, (bd_cpu_feature)f)) continue;
        if (buf && at < len) {
            int w = snprintf(buf + at, len - at, "%s%s", n ? " " : "", k_feature_names[f]);
            at += w > 0 ? (size_t)w : 0;
        }
        n++;
    }
    return n;
}

const char *bd_cpu_describe(void) {
    const bd_cpu *c = bd_cpu_get();
    size_t at = 0;
    g_cpu_desc[0] = '\0';
    for (int f = 0; f < BD_CPU_FEATURE_COUNT; f++) {
        if (!bd_cpu_has(c, (bd_cpu_feature)f) || at >= sizeof g_cpu_desc) continue;
        int w = snprintf(g_cpu_desc + at, sizeof g_cpu_desc - at, "%s%s", at ? " " : "", k_feature_names[f]);
        at += w > 0 ? (size_t)w : 0;
    }
    if (!at) snprintf(g_cpu_desc, sizeof g_cpu_desc, "none");
    return g_cpu_desc;
}
