/*
 * pool.c - persistent thread pool.
 *
 * Contract (see base.h): bd_pool_run(p, fn, ctx) calls fn(ctx, i, n) once on
 * each of the n threads, the caller being thread 0, and returns after all
 * calls returned. Workers wait for a new generation number: they spin for a
 * short while (a decode step issues hundreds of runs per token, so waking
 * through the kernel each time would cost more than the work), then yield
 * the core for a while (on an oversubscribed machine the thread being
 * waited for needs it), then block on a condition variable so an idle pool
 * sleeps.
 *
 * Sharing: several sessions may run on one pool (the public bd_threadpool)
 * from different threads at once. Runs are serialized by run_mu: each
 * parallel section gets all of the pool's threads in turn, so N sessions
 * never use more than the pool's threads (no oversubscription), and their
 * forwards interleave section by section. The calling thread is thread 0
 * of its own runs only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base.h"
#include "blockdraft.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

/* Spin budget before yielding the core: ~0.1 ms of pause instructions.
 * Past it a waiting thread calls sched_yield (so an oversubscribed machine
 * runs the thread we wait for), and a worker idle for POOL_YIELD_ITERS
 * yields more goes to sleep on the condition variable. */
#define POOL_SPIN_ITERS 4000
#define POOL_YIELD_ITERS 2000

struct bd_pool {
    int n;                 /* threads including the caller */
    pthread_t *threads;    /* [n-1] */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t run_mu; /* one run at a time (callers on several threads) */
#ifdef BD_DEBUG
    pthread_t owner;        /* the thread running, while running */
    int running;            /* atomic */
#endif
    bd_pool_fn fn;
    void *ctx;
    int generation;        /* bumped by each run; atomic */
    int pending;           /* workers still busy with the current run; atomic */
    int sleeping;          /* workers blocked on cv; guarded by mu */
    int stop;
};

typedef struct {
    bd_pool *p;
    int ith;
} worker_arg;

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    bd_pool *p = wa.p;
    int seen = 0;
    for (;;) {
        int gen;
        int spins = 0;
        while ((gen = __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE)) == seen &&
               !__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
            if (++spins < POOL_SPIN_ITERS) {
#if defined(__x86_64__)
                __builtin_ia32_pause();
#endif
                continue;
            }
            if (spins < POOL_SPIN_ITERS + POOL_YIELD_ITERS) {
                sched_yield();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            p->sleeping++;
            while (__atomic_load_n(&p->generation, __ATOMIC_ACQUIRE) == seen && !p->stop)
                pthread_cond_wait(&p->cv, &p->mu);
            p->sleeping--;
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) break;
        seen = gen;
        p->fn(p->ctx, wa.ith, p->n);
        __atomic_fetch_sub(&p->pending, 1, __ATOMIC_ACQ_REL);
    }
    return NULL;
}

bd_pool *bd_pool_create(int n_threads) {
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 256) n_threads = 256;
    bd_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_mutex_init(&p->run_mu, NULL);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->threads) {
            free(p);
            return NULL;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            p->n = i;
            bd_pool_free(p);
            return NULL;
        }
        wa->p = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i - 1], NULL, worker_main, wa) != 0) {
            free(wa);
            p->n = i;
            bd_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void bd_pool_free(bd_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->run_mu);
    free(p->threads);
    free(p);
}

int bd_pool_size(const bd_pool *p) { return p ? p->n : 1; }

void bd_pool_run(bd_pool *p, bd_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    /* not reentrant: fn calling bd_pool_run on its own pool would deadlock */
    BD_ASSERT(!(__atomic_load_n(&p->running, __ATOMIC_ACQUIRE) && pthread_equal(p->owner, pthread_self())));
    pthread_mutex_lock(&p->run_mu);
#ifdef BD_DEBUG
    p->owner = pthread_self();
    __atomic_store_n(&p->running, 1, __ATOMIC_RELEASE);
#endif
    p->fn = fn;
    p->ctx = ctx;
    __atomic_store_n(&p->pending, p->n - 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&p->mu);
    __atomic_add_fetch(&p->generation, 1, __ATOMIC_ACQ_REL);
    if (p->sleeping > 0) pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    int spins = 0;
    while (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) > 0) {
        if (++spins < POOL_SPIN_ITERS) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();
        }
    }
#ifdef BD_DEBUG
    __atomic_store_n(&p->running, 0, __ATOMIC_RELEASE);
#endif
    pthread_mutex_unlock(&p->run_mu);
}

/* ------------------------------------------------------------------------
 * The public bd_threadpool: a bd_pool that sessions borrow.
 * ---------------------------------------------------------------------- */

bd_threadpool *bd_threadpool_create(int32_t n_threads, char *err, size_t errlen) {
    bd_threadpool *tp = calloc(1, sizeof *tp);
    if (tp) tp->pool = bd_pool_create(n_threads);
    if (!tp || !tp->pool) {
        free(tp);
        bd_err(err, errlen, "cannot create a thread pool of %d threads", (int)n_threads);
        return NULL;
    }
    return tp;
}

void bd_threadpool_free(bd_threadpool *tp) {
    if (!tp) return;
    bd_pool_free(tp->pool);
    free(tp);
}

int32_t bd_threadpool_n_threads(const bd_threadpool *tp) { return bd_pool_size(tp->pool); }
