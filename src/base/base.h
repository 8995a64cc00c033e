/*
 * base.h - errors, file mapping, thread pool, CPU features, allocation,
 * and the small toolkit every layer shares: growable buffers, UTF-8, a
 * PRNG, argmax, the clock. (One copy of each: write nothing of the kind
 * elsewhere.)
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
bool bd_verr(char *err, size_t errlen, const char *fmt, va_list ap);

/* Invariants: BD_ASSERT(cond) states a fact the code itself guarantees
 * (never one about input: bad input is an error, not an abort). Checked
 * in debug builds (make debug / debug-bin define BD_DEBUG), where a false
 * condition prints file:line, function and the condition and aborts;
 * compiled out otherwise (cond is not evaluated). */
#ifdef BD_DEBUG
#define BD_ASSERT(cond) ((cond) ? (void)0 : bd_assert_fail(#cond, __FILE__, __LINE__, __func__))
#else
#define BD_ASSERT(cond) ((void)0)
#endif
_Noreturn void bd_assert_fail(const char *cond, const char *file, int line, const char *func);

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
    int guard;           /* its slot in the SIGBUS guard's table, -1 none */
    bool copied;         /* bd_fmap_prefetch replaced the mapping by an anonymous copy */
} bd_fmap;

/* Map a whole file read-only. An empty file maps to data=NULL, size=0.
 * Returns false with a message naming the path on failure. A FIFO or
 * device is refused without blocking. */
bool bd_fmap_open(bd_fmap *m, const char *path, char *err, size_t errlen);
void bd_fmap_close(bd_fmap *m);
/* Read the mapped file in and map its pages now, so that the first
 * forward pass does not pay one page fault per few pages of weights (a
 * drafter's first draft, a mixture's first use of an expert). llama.cpp
 * prefetches its model files the same way (MAP_POPULATE). Best effort:
 * nothing for a file larger than half the physical memory, where reading
 * it all ahead would only push its own first pages out again.
 *
 * Files of 64 MiB or more are copied instead, at the same addresses, into
 * anonymous memory the kernel backs with 2 MiB pages (unless
 * bd_fmap_set_copy(false), or transparent huge pages are off): whether the
 * page cache holds a file in 2 MiB folios or in 4 KiB pages depends on how
 * it got there (a file just written or downloaded: 4 KiB pages; read back
 * after eviction: mostly 2 MiB), and on 4 KiB pages the row-group matmuls,
 * which read 16-64 weight rows side by side, ran up to twice as slow (a
 * TLB miss per page, costlier under a hypervisor). The copy's file pages
 * are dropped from the process as it goes: RSS stays the file's size. It
 * is private memory: two processes running the same file no longer share
 * its pages, and a later truncation of the file no longer reaches it. */
void bd_fmap_prefetch(bd_fmap *m);
/* Process-wide: false keeps files mapped (llama.cpp's --mmap), true (the
 * default) lets bd_fmap_prefetch copy them as above (--no-mmap). */
void bd_fmap_set_copy(bool on);
/* Transparent huge pages are on, for madvise'd memory at least (the copy
 * above is attempted only then). */
bool bd_fmap_thp_available(void);
/* The smallest file bd_fmap_prefetch copies: 64 MiB, or the environment's
 * BLOCKDRAFT_COPY_MIN (bytes; tests set 0 to take small fixture files
 * through the copy and what is built on it). */
uint64_t bd_fmap_copy_min(void);
/* A copied mapping (m->copied) made writable (on) or read-only again
 * (off): the model loader rearranges weights in its private copy. False
 * for a mapping of the file itself, or if mprotect refuses. */
bool bd_fmap_set_writable(bd_fmap *m, bool on);
/* The pages holding bytes [p, p + n) of a mapping, copied or not, made
 * writable (on) or read-only again (off). The file is mapped private, so a
 * write lands in a private copy of its page, never in the file. False when
 * the range is outside the mapping or mprotect refuses. */
bool bd_fmap_set_range_writable(bd_fmap *m, const void *p, size_t n, bool on);

/* The SIGBUS guard (bd_mmap_guard_install in blockdraft.h).
 *
 * A mapped file that is truncated while mapped (a `cp` over a served
 * model) turns reads of the lost pages into SIGBUS, on whichever thread
 * touches them -- usually a thread-pool worker inside a matmul. Unwinding
 * such a thread (siglongjmp) would leave the pool's barrier and the
 * session half-updated, so the guard does not unwind: its handler, for a
 * fault inside a mapping bd_fmap_open made, maps anonymous zero pages over
 * the rest of that mapping (one mmap(MAP_FIXED) system call, which is
 * async-signal-safe in practice on Linux), marks the mapping faulted and
 * returns; the faulting load is retried and reads 0. The computation
 * finishes with wrong numbers, and its caller, which checks
 * bd_fmap_intact after the work (bd_session_forward does), reports the
 * change instead of returning them. A fault anywhere else goes to the
 * disposition that was there before (by default: the process dies, as it
 * would without the guard). */
bool bd_fmap_guard_install(char *err, size_t errlen);
/* false once a read of m found its file truncated (see above). */
bool bd_fmap_intact(const bd_fmap *m);

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
    BD_CPU_AVX512VBMI, /* vpermb / vpermi2b: byte permutes across a zmm */
    BD_CPU_AMX_TILE,
    BD_CPU_AMX_INT8,
    BD_CPU_FEATURE_COUNT
} bd_cpu_feature;

#define BD_CPU_BIT(f) (1u << (f))

typedef struct bd_cpu {
    uint32_t bits;   /* BD_CPU_BIT(f) set: the CPU (and OS) support feature f */
    bool amd;        /* vendor "AuthenticAMD" */
    uint32_t family; /* CPUID display family (base + extended): 0x19 Zen 3/4, 0x1A Zen 5; 0 unknown */
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

struct timespec;
/* The CLOCK_REALTIME time ms from now (deadlines for pthread_cond_timedwait). */
void bd_deadline_after_ms(struct timespec *ts, long ms);

/* Aligned allocation (64 bytes), zero-filled. NULL on failure or size 0.
 * Free with bd_free. */
void *bd_alloc(size_t size);
/* The same without zeroing, for large buffers every reader reads only
 * after a writer wrote (KV caches, logits): their pages are then touched
 * (faulted in) only as far as they are used, not all at creation. */
void *bd_alloc_raw(size_t size);
void bd_free(void *p);
/* size bytes (not zeroed) at a 2 MiB boundary, asked for transparent huge
 * pages (MADV_HUGEPAGE) where the kernel has them: the pages a copied model
 * file sits on (bd_fmap_prefetch), for measurements that must stream memory
 * as decoding does (bench's read-bandwidth probe, kbench). *huge says
 * whether the advice was taken (it is a request; the kernel may still
 * back some of the range with small pages). NULL on failure or size 0.
 * Free with bd_free_huge(p, size). */
void *bd_alloc_huge(size_t size, bool *huge);
void bd_free_huge(void *p, size_t size);

/* ------------------------------------------------------------------------
 * Growable storage
 * ---------------------------------------------------------------------- */

/* Make the array *pp (elements of elem bytes, *cap of them allocated)
 * hold at least need elements: capacity doubles from 16; the contents are
 * kept. false on overflow or out-of-memory (then *pp and *cap unchanged). */
bool bd_grow(void *pp, size_t *cap, size_t need, size_t elem);

/* A growable byte string, NUL-terminated after n whenever p is set. Zero
 * it to start ({0}, or set limit). After a failed append (out of memory,
 * or past limit: over_limit) every later append is refused, so a writer
 * may append unchecked and test failed once at the end. */
typedef struct bd_buf {
    char *p;
    size_t n, cap;
    size_t limit;    /* 0 = unlimited; else appends beyond limit bytes fail */
    bool failed, over_limit;
} bd_buf;

bool bd_buf_reserve(bd_buf *b, size_t extra); /* room for extra more bytes (+ NUL) */
bool bd_buf_put(bd_buf *b, const void *s, size_t n);
bool bd_buf_putc(bd_buf *b, char c);
bool bd_buf_printf(bd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool bd_buf_vprintf(bd_buf *b, const char *fmt, va_list ap);
/* The bytes (malloc'd, NUL-terminated, never NULL unless out of memory);
 * b is emptied. */
char *bd_buf_take(bd_buf *b);
void bd_buf_free(bd_buf *b);

/* ------------------------------------------------------------------------
 * UTF-8
 * ---------------------------------------------------------------------- */

/* Strict: the length (1..4) of the valid sequence s[0..n) starts with,
 * *cp (may be NULL) its code point; 0 when it does not start one
 * (overlong forms, surrogates, code points above U+10FFFF, truncated or
 * broken sequences are invalid). */
size_t bd_utf8_seq(const void *s, size_t n, uint32_t *cp);

/* Lenient, as llama.cpp decodes: a lead byte with the right number of
 * continuation bytes decodes without an overlong or surrogate check;
 * anything else (a stray continuation byte, 0xF8..0xFF, a truncated or
 * broken sequence) yields U+FFFD and consumes exactly one byte. Sequences
 * that would decode above U+10FFFF are treated as broken too. n >= 1;
 * *used gets the bytes consumed. */
uint32_t bd_utf8_decode(const uint8_t *s, size_t n, int *used);

/* Encode cp (<= 0x10FFFF) as UTF-8 into out[4]; returns the length. */
int bd_utf8_encode(uint32_t cp, uint8_t out[4]);

/* src[0..len) made safe for a terminal, into out[n] (NUL-terminated,
 * truncated at a whole character): C0 controls and DEL become \xNN (\n
 * and \t stay when keep_nl), C1 controls (U+0080..U+009F: CSI and the
 * like) \u00NN, bytes that are not UTF-8 \xNN; everything else is kept.
 * For strings from files and the network (GGUF metadata, gallery
 * indexes) on their way to a terminal or log. Returns the length. */
size_t bd_escape_ctrl(char *out, size_t n, const char *src, size_t len, bool keep_nl);

/* Length of the UTF-8 sequence a lead byte announces (1 for ASCII and for
 * bytes that cannot lead a sequence), as llama.cpp's unicode_len_utf8. */
int bd_utf8_len(uint8_t lead);

/* ------------------------------------------------------------------------
 * PRNG and argmax
 * ---------------------------------------------------------------------- */

/* xoshiro256** seeded through splitmix64: the same seed gives the same
 * stream on every machine. */
typedef struct bd_rng {
    uint64_t s[4];
} bd_rng;

void bd_rng_seed(bd_rng *r, uint64_t seed);
/* One step of splitmix64: advances *x, returns the mixed value (seeding,
 * and a stateless stream where one 64-bit state is enough). */
uint64_t bd_splitmix64(uint64_t *x);
uint64_t bd_rng_next(bd_rng *r);
double bd_rng_uniform(bd_rng *r);              /* [0, 1), 53 bits */
uint64_t bd_rng_below(bd_rng *r, uint64_t n);  /* [0, n) (modulo: a bias below 2^-40 for n < 2^24) */

/* Index of the largest of x[0..n) (n >= 1), compared with '>': ties go to
 * the lowest index (a NaN is chosen only at index 0). */
int32_t bd_argmax(const float *x, int32_t n);

#endif
