/*
 * base.h - errors, file mapping, thread pool, CPU features, allocation guard.
 *
 * The bottom layer of blockdraft. Everything else may include it; it
 * includes nothing of ours. Library code reports errors through a
 * caller-provided (char *err, size_t errlen) buffer and a false/-1 return;
 * only main() exits.
 */
#ifndef BD_BASE_H
#define BD_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */

/* Format a message into err (if err != NULL and errlen > 0). Always returns
 * false so callers can write `return bd_err(err, errlen, "...")`. */
bool bd_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Overflow-safe size arithmetic: return false on overflow, else store. */
static inline bool bd_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool bd_add_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* ------------------------------------------------------------------------
 * Read-only file mapping
 * ---------------------------------------------------------------------- */

typedef struct bd_fmap {
    const uint8_t *data; /* [size] bytes, read-only, private mapping */
    uint64_t size;
} bd_fmap;

/* Map a whole file read-only. An empty file maps to data=NULL, size=0.
 * Returns false with a message naming the path on failure. */
bool bd_fmap_open(bd_fmap *m, const char *path, char *err, size_t errlen);
void bd_fmap_close(bd_fmap *m);

/* ------------------------------------------------------------------------
 * Thread pool
 *
 * A persistent pool of n_threads-1 workers plus the calling thread. Work
 * is handed out as one function called on every thread with its index:
 * fn(ctx, ith, nth). bd_pool_run returns when all threads have returned.
 * Idle workers spin briefly and then sleep on a condition variable, so an
 * idle pool costs no CPU.
 * ---------------------------------------------------------------------- */

typedef struct bd_pool bd_pool;
typedef void (*bd_pool_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0 means "all online CPUs". Returns NULL on failure. */
bd_pool *bd_pool_create(int n_threads);
void bd_pool_free(bd_pool *p);
int bd_pool_size(const bd_pool *p);
/* Run fn on all threads (the caller is thread 0). Not reentrant. */
void bd_pool_run(bd_pool *p, bd_pool_fn fn, void *ctx);

/* Split [0, n) into nth nearly equal parts; part ith is [*lo, *hi). */
static inline void bd_split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

/* ------------------------------------------------------------------------
 * CPU features (read once, cached)
 * ---------------------------------------------------------------------- */

/* The features the kernel files are compiled for, named as gcc's -m flags
 * name them. A feature counts as present only where the OS also saves the
 * register state it needs (XCR0: ymm state for the AVX family, zmm state
 * for AVX-512, tile state for AMX); AMX additionally needs Linux's per-
 * process permission, which kernels.c asks for (arch_prctl). */
typedef enum bd_cpu_feature {
    BD_CPU_AVX2,
    BD_CPU_FMA,
    BD_CPU_F16C,
    BD_CPU_AVXVNNI, /* VEX-encoded vpdpbusd / vpdpwssd on ymm */
    BD_CPU_AVX512F,
    BD_CPU_AVX512DQ,
    BD_CPU_AVX512BW,
    BD_CPU_AVX512VL,
    BD_CPU_AVX512VNNI,
    BD_CPU_AVX512BF16,
    BD_CPU_AMX_TILE,
    BD_CPU_AMX_INT8,
    BD_CPU_FEATURE_COUNT
} bd_cpu_feature;

#define BD_CPU_BIT(f) (1u << (f))

typedef struct bd_cpu {
    uint32_t bits; /* BD_CPU_BIT(f) set: the CPU (and OS) support feature f */
} bd_cpu;

/* This CPU's features (detected once; none on a non-x86 build). */
const bd_cpu *bd_cpu_get(void);
static inline bool bd_cpu_has(const bd_cpu *c, bd_cpu_feature f) { return (c->bits >> f) & 1u; }
/* "avx512vnni", "amx-int8", ...; "?" for an unknown value. */
const char *bd_cpu_feature_name(bd_cpu_feature f);
/* Names of the features in `need` that c lacks, space-separated, into buf
 * (empty if none); returns how many are missing. */
int bd_cpu_missing(const bd_cpu *c, uint32_t need, char *buf, size_t len);
/* Human-readable list such as "avx2 fma f16c avx512f ..." ("none" if the
 * CPU has none of them). */
const char *bd_cpu_describe(void);

/* ------------------------------------------------------------------------
 * Time and allocation
 * ---------------------------------------------------------------------- */

double bd_time_ms(void); /* monotonic clock in milliseconds */

/* Aligned allocation (64 bytes), zero-filled. NULL on failure or size 0.
 * Free with bd_free. */
void *bd_alloc(size_t size);
void bd_free(void *p);

#endif
