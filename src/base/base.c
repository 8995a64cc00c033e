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

/* ------------------------------------------------------------------------
 * CPU features
 * ---------------------------------------------------------------------- */

static bd_cpu g_cpu;
static char g_cpu_desc[160];
static int g_cpu_ready;

static void cpu_detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = (c >> 27) & 1;
    g_cpu.fma = (c >> 12) & 1;
    g_cpu.f16c = (c >> 29) & 1;
    bool avx = (c >> 28) & 1;
    uint64_t xcr0 = 0;
    if (osxsave) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((uint64_t)hi << 32) | lo;
    }
    bool ymm_ok = (xcr0 & 0x6) == 0x6;
    bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
    if (!avx || !ymm_ok) {
        g_cpu.fma = g_cpu.f16c = false;
        return;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        g_cpu.avx2 = (b >> 5) & 1;
        if (zmm_ok) {
            g_cpu.avx512f = (b >> 16) & 1;
            g_cpu.avx512bw = (b >> 30) & 1;
            g_cpu.avx512vl = (b >> 31) & 1;
            g_cpu.avx512vnni = (c >> 11) & 1;
            g_cpu.amx_int8 = ((d >> 24) & 1) && ((d >> 25) & 1) && ((xcr0 >> 17) & 3) == 3;
        }
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
        g_cpu.avxvnni = (a >> 4) & 1;
        if (zmm_ok) g_cpu.avx512bf16 = (a >> 5) & 1;
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

const char *bd_cpu_describe(void) {
    const bd_cpu *c = bd_cpu_get();
    snprintf(g_cpu_desc, sizeof g_cpu_desc, "%s%s%s%s%s%s%s%s%s",
             c->avx2 ? "avx2 " : "", c->fma ? "fma " : "", c->f16c ? "f16c " : "",
             c->avx512f ? "avx512f " : "", c->avx512bw ? "avx512bw " : "",
             c->avx512vl ? "avx512vl " : "", c->avx512vnni ? "avx512vnni " : "",
             c->avx512bf16 ? "avx512bf16 " : "", c->avxvnni ? "avxvnni " : "");
    size_t n = strlen(g_cpu_desc);
    if (n > 0) g_cpu_desc[n - 1] = '\0';
    else snprintf(g_cpu_desc, sizeof g_cpu_desc, "scalar");
    return g_cpu_desc;
}
