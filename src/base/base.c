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
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */

/* Messages quote names and strings from files (GGUF metadata, indexes)
 * and requests, and end up on terminals and in logs: control bytes in
 * them are escaped here, once for every error (bd_escape_ctrl). */
bool bd_verr(char *err, size_t errlen, const char *fmt, va_list ap) {
    if (!err || errlen == 0) return false;
    char raw[4096];
    if (errlen > sizeof raw) {
        vsnprintf(err, errlen, fmt, ap); /* too long to escape here: blank what would act */
        for (char *p = err; *p; p++)
            if ((unsigned char)*p < 0x20 && *p != '\n' && *p != '\t') *p = '?';
        return false;
    }
    vsnprintf(raw, errlen, fmt, ap);
    bd_escape_ctrl(err, errlen, raw, strlen(raw), true);
    return false;
}

_Noreturn void bd_assert_fail(const char *cond, const char *file, int line, const char *func) {
    fprintf(stderr, "%s:%d: %s: invariant violated: %s\n", file, line, func, cond);
    fflush(stderr);
    abort();
}

bool bd_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    bd_verr(err, errlen, fmt, ap);
    va_end(ap);
    return false;
}

/* ------------------------------------------------------------------------
 * File mapping
 * ---------------------------------------------------------------------- */

/* The guard's table: one slot per live mapping ([lo, hi) page-rounded,
 * 0 when free). Written under guard_mu; read by the signal handler with
 * atomic loads only. A mapping that finds the table full is not guarded
 * (it still works; a truncation then kills the process as before). */
#define GUARD_SLOTS 256
static struct {
    _Atomic uintptr_t lo, hi;
    atomic_int faulted;
} guard_tab[GUARD_SLOTS];
static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction guard_prev; /* the SIGBUS disposition before ours */
static uintptr_t guard_page;

static void guard_on_sigbus(int sig, siginfo_t *si, void *uc) {
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < GUARD_SLOTS; i++) {
        uintptr_t lo = atomic_load(&guard_tab[i].lo), hi = atomic_load(&guard_tab[i].hi);
        if (!lo || a < lo || a >= hi) continue;
        /* the lost pages, from the faulting one to the end, read as zeros */
        uintptr_t from = a & ~(guard_page - 1);
        long r = syscall(SYS_mmap, (void *)from, (size_t)(hi - from), PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0L);
        if (r == (long)from) {
            atomic_store(&guard_tab[i].faulted, 1);
            return; /* the load is retried on the zero pages */
        }
        break;
    }
    /* not a mapping of ours (or the remap failed): what was there before */
    if ((guard_prev.sa_flags & SA_SIGINFO) && guard_prev.sa_sigaction) {
        guard_prev.sa_sigaction(sig, si, uc);
        return;
    }
    if (!(guard_prev.sa_flags & SA_SIGINFO) && guard_prev.sa_handler != SIG_DFL &&
        guard_prev.sa_handler != SIG_IGN) {
        guard_prev.sa_handler(sig);
        return;
    }
    /* default action: reset and return, the fault repeats and kills */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGBUS, &dfl, NULL);
}

/* Installs the handler unless it is the one in place already (so calling
 * it again after someone else replaced the handler installs it again). */
bool bd_fmap_guard_install(char *err, size_t errlen) {
    pthread_mutex_lock(&guard_mu);
    bool ok = true;
    struct sigaction cur;
    if (sigaction(SIGBUS, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != guard_on_sigbus) {
        guard_page = (uintptr_t)sysconf(_SC_PAGESIZE);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = guard_on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, &guard_prev) != 0)
            ok = bd_err(err, errlen, "cannot install a SIGBUS handler: %s", strerror(errno));
    }
    pthread_mutex_unlock(&guard_mu);
    return ok;
}

static int guard_add(const void *p, uint64_t size) {
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p, hi = lo + (uintptr_t)((size + (uint64_t)pg - 1) & ~((uint64_t)pg - 1));
    int slot = -1;
    pthread_mutex_lock(&guard_mu);
    for (int i = 0; i < GUARD_SLOTS && slot < 0; i++)
        if (!atomic_load(&guard_tab[i].lo)) slot = i;
    if (slot >= 0) {
        atomic_store(&guard_tab[slot].faulted, 0);
        atomic_store(&guard_tab[slot].hi, hi);
        atomic_store(&guard_tab[slot].lo, lo);
    }
    pthread_mutex_unlock(&guard_mu);
    return slot;
}

bool bd_fmap_intact(const bd_fmap *m) {
    return !m->data || m->guard < 0 || !atomic_load(&guard_tab[m->guard].faulted);
}

bool bd_fmap_open(bd_fmap *m, const char *path, char *err, size_t errlen) {
    m->data = NULL;
    m->size = 0;
    m->guard = -1;
    m->copied = false;
    /* O_NONBLOCK: opening a FIFO (or a device) must not wait for a
     * writer; anything but a regular file is refused below */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
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
    m->guard = guard_add(p, m->size);
    return true;
}

/* Copying mapped files into anonymous huge pages (bd_fmap_prefetch). */
#define FMAP_HUGE (2u << 20)          /* a transparent huge page on x86-64 */
#define FMAP_COPY_MIN (64u << 20)     /* smaller files stay mapped: few huge pages to gain */
/* file pages held at once while copying: the load's RSS peak is the file
 * plus one chunk. 64 MiB put the 0.6B's load peak at 452 MiB and the 4B's
 * at 2447; 8 MiB: 399 / 2402, the 4B's load 0.78-1.16 s either way (warm
 * page cache, Zen 4) */
#define FMAP_COPY_CHUNK (8u << 20)
static atomic_bool g_fmap_copy = true;

void bd_fmap_set_copy(bool on) { atomic_store(&g_fmap_copy, on); }

bool bd_fmap_thp_available(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    char buf[128];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n > 0 && !strstr(buf, "[never]");
}

/* Replace m's mapping by an anonymous copy backed by huge pages, at the same
 * addresses (so every pointer into the file stays valid): an anonymous
 * region placed at the same offset modulo 2 MiB, MADV_HUGEPAGE, the file
 * copied in chunks whose file pages are dropped from this process as soon as
 * they are copied (peak RSS: the file plus one chunk), then mremap over the
 * file's range. False, with the mapping left in place, if anything fails or
 * the file turns out truncated while being copied (the SIGBUS guard's
 * verdict then stands). */
static bool fmap_copy_huge(bd_fmap *m, long pg) {
    const size_t len = (size_t)((m->size + (uint64_t)pg - 1) & ~(uint64_t)(pg - 1)), span = len + FMAP_HUGE;
    uint8_t *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return false;
    const size_t off = ((uintptr_t)m->data - (uintptr_t)raw) & (FMAP_HUGE - 1);
    uint8_t *a = raw + off;
    if (off) munmap(raw, off);
    if (span - off > len) munmap(a + len, span - off - len);
    bool ok = madvise(a, len, MADV_HUGEPAGE) == 0;
    for (uint64_t o = 0; ok && o < m->size; o += FMAP_COPY_CHUNK) {
        const size_t n = (size_t)(m->size - o < FMAP_COPY_CHUNK ? m->size - o : FMAP_COPY_CHUNK);
        void *src = (void *)(m->data + o);
#ifdef MADV_POPULATE_READ
        (void)madvise(src, n, MADV_POPULATE_READ); /* one read-ahead instead of a fault per few pages */
#endif
        memcpy(a + o, src, n);
        ok = bd_fmap_intact(m);
        (void)madvise(src, n, MADV_DONTNEED); /* this chunk's file pages leave our RSS */
    }
    ok = ok && mprotect(a, len, PROT_READ) == 0 &&
         mremap(a, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)m->data) != MAP_FAILED;
    if (!ok) munmap(a, len);
    return ok;
}

uint64_t bd_fmap_copy_min(void) {
    const char *e = getenv("BLOCKDRAFT_COPY_MIN");
    if (e && *e) {
        char *end;
        errno = 0;
        const unsigned long long v = strtoull(e, &end, 10);
        if (!*end && errno == 0) return (uint64_t)v;
    }
    return FMAP_COPY_MIN;
}

bool bd_fmap_set_writable(bd_fmap *m, bool on) {
    if (!m->copied || !m->data || m->size == 0) return false;
    const long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return false;
    const size_t len = (size_t)((m->size + (uint64_t)pg - 1) & ~(uint64_t)(pg - 1));
    return mprotect((void *)m->data, len, on ? PROT_READ | PROT_WRITE : PROT_READ) == 0;
}

bool bd_fmap_set_range_writable(bd_fmap *m, const void *p, size_t n, bool on) {
    const uintptr_t lo = (uintptr_t)m->data, a = (uintptr_t)p;
    if (!m->data || n == 0 || a < lo || a - lo > m->size || n > m->size - (a - lo)) return false;
    const long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return false;
    const uintptr_t first = a & ~(uintptr_t)(pg - 1), end = (a + n + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
    return mprotect((void *)first, end - first, on ? PROT_READ | PROT_WRITE : PROT_READ) == 0;
}

void bd_fmap_prefetch(bd_fmap *m) {
    if (!m->data || m->size == 0 || m->copied) return;
    long pg = sysconf(_SC_PAGESIZE), np = sysconf(_SC_PHYS_PAGES);
    if (pg <= 0 || np <= 0 || m->size > (uint64_t)pg * (uint64_t)np / 2) return;
    if (atomic_load(&g_fmap_copy) && m->size >= bd_fmap_copy_min() && bd_fmap_thp_available() && fmap_copy_huge(m, pg)) {
        m->copied = true;
        return;
    }
    void *p = (void *)m->data;
#ifdef MADV_POPULATE_READ
    /* EFAULT: the file is shorter than the mapping now (truncated since it
     * was opened); leave the pages alone, the forward's intact check says so */
    if (madvise(p, (size_t)m->size, MADV_POPULATE_READ) == 0 || errno != EINVAL) return;
#endif
    /* kernels before 5.14: read-ahead, then one read per page maps them */
    if (madvise(p, (size_t)m->size, MADV_WILLNEED) != 0) return;
    volatile uint8_t sink = 0;
    for (uint64_t o = 0; o < m->size; o += (uint64_t)pg) sink ^= m->data[o];
    (void)sink;
}

void bd_fmap_close(bd_fmap *m) {
    if (m->guard >= 0) {
        pthread_mutex_lock(&guard_mu);
        atomic_store(&guard_tab[m->guard].lo, 0);
        atomic_store(&guard_tab[m->guard].hi, 0);
        pthread_mutex_unlock(&guard_mu);
    }
    if (m->data) munmap((void *)m->data, (size_t)m->size);
    m->data = NULL;
    m->size = 0;
    m->guard = -1;
    m->copied = false;
}

/* ------------------------------------------------------------------------
 * Time and allocation
 * ---------------------------------------------------------------------- */

double bd_time_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void bd_deadline_after_ms(struct timespec *ts, long ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void *bd_alloc_raw(size_t size) {
    if (size == 0) return NULL;
    size_t rounded = (size + 63) & ~(size_t)63;
    if (rounded < size) return NULL;
    return aligned_alloc(64, rounded);
}

void *bd_alloc(size_t size) {
    void *p = bd_alloc_raw(size);
    if (p) memset(p, 0, (size + 63) & ~(size_t)63);
    return p;
}

void bd_free(void *p) { free(p); }

void *bd_alloc_huge(size_t size, bool *huge) {
    *huge = false;
    const size_t len = (size + FMAP_HUGE - 1) & ~(size_t)(FMAP_HUGE - 1);
    if (size == 0 || len < size || len > SIZE_MAX - FMAP_HUGE) return NULL;
    uint8_t *raw = mmap(NULL, len + FMAP_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    /* keep the 2 MiB-aligned len bytes inside the span, unmap the rest */
    const size_t lead = (FMAP_HUGE - ((uintptr_t)raw & (FMAP_HUGE - 1))) & (FMAP_HUGE - 1);
    uint8_t *a = raw + lead;
    if (lead) munmap(raw, lead);
    if (FMAP_HUGE - lead) munmap(a + len, FMAP_HUGE - lead);
    *huge = bd_fmap_thp_available() && madvise(a, len, MADV_HUGEPAGE) == 0;
    return a;
}

void bd_free_huge(void *p, size_t size) {
    if (!p || size == 0) return;
    munmap(p, (size + FMAP_HUGE - 1) & ~(size_t)(FMAP_HUGE - 1));
}

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
    [BD_CPU_AVX512VBMI] = "avx512vbmi",
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
    if (__get_cpuid(0, &a, &b, &c, &d)) /* vendor string: ebx edx ecx */
        g_cpu.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    g_cpu.family = (a >> 8) & 0xF;
    if (g_cpu.family == 0xF) g_cpu.family += (a >> 20) & 0xFF;
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
        cpu_set(zmm_ok && ((c >> 1) & 1), BD_CPU_AVX512VBMI);
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
