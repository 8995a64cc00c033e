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
/* Run fn on all threads (the caller is thread 0). Callers on several
 * threads take turns (a run holds the pool until it returns); fn must not
 * call bd_pool_run on the same pool (not reentrant). */
void bd_pool_run(bd_pool *p, bd_pool_fn fn, void *ctx);

/* The public bd_threadpool (blockdraft.h): a pool sessions borrow. */
struct bd_threadpool {
    bd_pool *pool;
};

/* Split [0, n) into nth nearly equal parts; part ith is [*lo, *hi). */
static inline void bd_split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

/* ------------------------------------------------------------------------
 * CPU features (read once, cached)
 * ---------------------------------------------------------------------- */

typedef struct bd_cpu {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16;
    bool avxvnni;
    bool amx_int8; /* AMX-TILE + AMX-INT8 and the OS saves tile state (XCR0) */
} bd_cpu;

const bd_cpu *bd_cpu_get(void);
/* Human-readable list such as "avx2 fma f16c avx512f ...". */
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
