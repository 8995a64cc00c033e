/*
 * test_allocfail.c - allocation failure injection.
 *
 * Linked with -Wl,--wrap for malloc, calloc, realloc, aligned_alloc,
 * posix_memalign, strdup and free (Makefile): every allocation blockdraft's
 * own code makes goes through the wrappers below (allocations inside libc,
 * jansson and libcurl do not). For each constructor -- model open (target
 * and DFlash drafter), session create, spec create (draft-dflash,
 * draft-simple, ngram), bd_spec_open, thread pool create, chat template
 * create -- the test first counts its N allocations, then for k = 1..N
 * runs it again with the k-th allocation failing. Each run must either
 * fail with an error message, or succeed and then work (a short
 * generation, a render); afterwards everything it allocated must have
 * been freed (the wrappers keep the set of live blocks, so this test
 * finds leaks without a sanitizer; the ASan build, build-debug, runs it
 * too, e2e allocfail_asan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include <cmocka.h>

#include "blockdraft.h"
#include "chat/chat.h"

/* ------------------------------------------------------------------------
 * The wrappers
 * ---------------------------------------------------------------------- */

void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
void *__real_aligned_alloc(size_t, size_t);
int __real_posix_memalign(void **, size_t, size_t);
void __real_free(void *);
char *__real_strdup(const char *);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t al, size_t n);
int __wrap_posix_memalign(void **out, size_t al, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);

#define LIVE_SLOTS (1u << 20)
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_live[LIVE_SLOTS]; /* open addressing; (void *)1 = deleted */
static long g_n_live;
static int g_armed;              /* count and fail while set */
static long g_count, g_fail_at;  /* g_fail_at: the allocation (1-based) to fail; 0 none */

static size_t slot_of(void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 44) & (LIVE_SLOTS - 1); }

static void live_add(void *p) {
    size_t i = slot_of(p);
    while (g_live[i] && g_live[i] != (void *)1) i = (i + 1) & (LIVE_SLOTS - 1);
    g_live[i] = p;
    g_n_live++;
}

static void live_del(void *p) {
    for (size_t i = slot_of(p); g_live[i]; i = (i + 1) & (LIVE_SLOTS - 1))
        if (g_live[i] == p) {
            g_live[i] = (void *)1;
            g_n_live--;
            return;
        }
}

/* Whether this allocation fails (and count it). Under g_mu. */
static int should_fail(void) {
    if (!g_armed) return 0;
    return ++g_count == g_fail_at;
}

void *__wrap_malloc(size_t n) {
    pthread_mutex_lock(&g_mu);
    void *p = should_fail() ? NULL : __real_malloc(n);
    if (p && g_armed) live_add(p);
    pthread_mutex_unlock(&g_mu);
    return p;
}

void *__wrap_calloc(size_t a, size_t b) {
    pthread_mutex_lock(&g_mu);
    void *p = should_fail() ? NULL : __real_calloc(a, b);
    if (p && g_armed) live_add(p);
    pthread_mutex_unlock(&g_mu);
    return p;
}

void *__wrap_realloc(void *old, size_t n) {
    pthread_mutex_lock(&g_mu);
    void *p = should_fail() ? NULL : __real_realloc(old, n);
    if (p) {
        size_t before = (size_t)g_n_live;
        if (old) live_del(old);
        /* a block allocated before arming stays untracked */
        if (g_armed || (old && (size_t)g_n_live < before)) live_add(p);
    }
    pthread_mutex_unlock(&g_mu);
    return p;
}

void *__wrap_aligned_alloc(size_t al, size_t n) {
    pthread_mutex_lock(&g_mu);
    void *p = should_fail() ? NULL : __real_aligned_alloc(al, n);
    if (p && g_armed) live_add(p);
    pthread_mutex_unlock(&g_mu);
    return p;
}

int __wrap_posix_memalign(void **out, size_t al, size_t n) {
    pthread_mutex_lock(&g_mu);
    int r = should_fail() ? 12 : __real_posix_memalign(out, al, n);
    if (r == 0 && g_armed) live_add(*out);
    pthread_mutex_unlock(&g_mu);
    return r;
}

char *__wrap_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = __wrap_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

void __wrap_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_mu);
    live_del(p);
    pthread_mutex_unlock(&g_mu);
    __real_free(p);
}

static void arm(long fail_at) {
    pthread_mutex_lock(&g_mu);
    g_count = 0;
    g_fail_at = fail_at;
    g_armed = 1;
    pthread_mutex_unlock(&g_mu);
}

/* Stop failing (cleanup allocations must succeed) but keep tracking frees. */
static long disarm(void) {
    pthread_mutex_lock(&g_mu);
    g_armed = 0;
    long n = g_count;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* ------------------------------------------------------------------------
 * Scenarios: build, use on success, free. Return 1 built, 0 failed with a
 * message; anything else fails the test.
 * ---------------------------------------------------------------------- */

static char g_target[1024], g_draft[1024], g_tmpl_path[1024];
static char *g_tmpl;
static bd_model *g_m, *g_dm;

typedef int (*scenario)(char *err, size_t errlen);

static bool gen_ok(bd_session *s, bd_spec *x) {
    char err[256];
    int32_t prompt[3] = {1, 400, 300};
    bd_gen_params gp = {.n_predict = 4, .sampling = bd_sampler_default_params(), .ignore_eog = true};
    gp.sampling.temperature = 0;
    bd_gen_stats st;
    /* the generation itself may fail for want of memory (its sampler):
     * with an error, never a crash */
    bool ok = x ? bd_spec_generate(x, prompt, 3, &gp, NULL, NULL, &st, err, sizeof err)
                : bd_generate(s, prompt, 3, &gp, NULL, NULL, &st, err, sizeof err);
    return ok || err[0];
}

static int sc_model_target(char *err, size_t errlen) {
    bd_model *m = bd_model_open(g_target, err, errlen);
    if (!m) return 0;
    int32_t ids[16];
    int n = bd_tokenize(m, "Once upon", 9, true, false, ids, 16);
    bd_model_free(m);
    return n > 0 || n == INT32_MIN ? 1 : -1; /* INT32_MIN: tokenize's out-of-memory */
}

static int sc_model_drafter(char *err, size_t errlen) {
    bd_model *m = bd_model_open(g_draft, err, errlen);
    if (!m) return 0;
    bd_model_free(m);
    return 1;
}

static bd_session_params small_params(void) {
    bd_session_params p = bd_session_default_params();
    p.n_ctx = 64;
    p.n_threads = 1;
    return p;
}

static int sc_session(char *err, size_t errlen) {
    bd_session_params p = small_params();
    int32_t taps[2] = {2, 4};
    p.n_tap = 2;
    p.tap_layers = taps;
    bd_session *s = bd_session_create(g_m, &p, err, errlen);
    if (!s) return 0;
    bool ok = gen_ok(s, NULL);
    bd_session_free(s);
    return ok ? 1 : -1;
}

static int spec_case(bd_spec_type type, bd_model *draft, char *err, size_t errlen) {
    bd_session_params p = small_params();
    int32_t taps[2] = {2, 4};
    p.n_tap = type == BD_SPEC_DRAFT_DFLASH ? 2 : 0;
    p.tap_layers = taps;
    disarm(); /* the target session is not under test here */
    pthread_mutex_lock(&g_mu);
    long count = g_count, fail_at = g_fail_at;
    pthread_mutex_unlock(&g_mu);
    bd_session *s = bd_session_create(g_m, &p, err, errlen);
    if (!s) return -1;
    pthread_mutex_lock(&g_mu);
    g_count = count;
    g_fail_at = fail_at;
    g_armed = 1;
    pthread_mutex_unlock(&g_mu);
    bd_spec_params spp = bd_spec_default_params();
    spp.type = type;
    spp.n_max = 3;
    bd_spec *x = bd_spec_create(s, draft, &spp, NULL, 0, err, errlen);
    int r = 0;
    if (x) r = gen_ok(s, x) ? 1 : -1;
    bd_spec_free(x);
    bd_session_free(s);
    return r;
}

static int sc_spec_dflash(char *err, size_t errlen) { return spec_case(BD_SPEC_DRAFT_DFLASH, g_dm, err, errlen); }
static int sc_spec_simple(char *err, size_t errlen) { return spec_case(BD_SPEC_DRAFT_SIMPLE, g_m, err, errlen); }
static int sc_spec_ngram(char *err, size_t errlen) { return spec_case(BD_SPEC_NGRAM_SIMPLE, NULL, err, errlen); }

static int sc_spec_open(char *err, size_t errlen) {
    bd_session_params p = small_params();
    bd_spec_params spp = bd_spec_default_params();
    spp.type = BD_SPEC_DRAFT_DFLASH;
    bd_spec *x = bd_spec_open(g_m, g_dm, &p, &spp, NULL, 0, err, errlen);
    if (!x) return 0;
    bool ok = gen_ok(bd_spec_session(x), x);
    bd_spec_free(x);
    return ok ? 1 : -1;
}

static int sc_threadpool(char *err, size_t errlen) {
    bd_threadpool *tp = bd_threadpool_create(3, err, errlen);
    if (!tp) return 0;
    bd_session_params p = small_params();
    p.threadpool = tp;
    bd_session *s = bd_session_create(g_m, &p, err, errlen);
    bool ok = !s || gen_ok(s, NULL);
    int r = s ? (ok ? 1 : -1) : 0;
    bd_session_free(s);
    bd_threadpool_free(tp);
    return r;
}

static int sc_template(char *err, size_t errlen) {
    chat_template *t = chat_template_create(g_tmpl, "<|endoftext|>", "<|im_end|>", err, errlen);
    if (!t) return 0;
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", "Hi <|im_start|>");
    chat_span *sp = NULL;
    size_t nsp = 0, len;
    chat_params cp = {.messages = msgs, .add_generation_prompt = true, .user_spans = &sp, .n_user_spans = &nsp};
    bool ue;
    char e2[256] = "";
    char *o = chat_template_apply(t, &cp, &len, &ue, e2, sizeof e2);
    int r = o || e2[0] ? 1 : -1; /* a render may fail for want of memory, with a message */
    free(o);
    free(sp);
    json_decref(msgs);
    chat_template_free(t);
    return r;
}

/* ------------------------------------------------------------------------ */

static void run_scenario(const char *name, scenario fn) {
    char err[512];
    long live0 = g_n_live;
    arm(0);
    err[0] = 0;
    int r = fn(err, sizeof err);
    long n = disarm();
    if (r != 1) fail_msg("%s: fails without injected failures: %s", name, err);
    if (g_n_live != live0) fail_msg("%s: %ld blocks leaked without injected failures", name, g_n_live - live0);
    int failed = 0, survived = 0;
    for (long k = 1; k <= n; k++) {
        err[0] = 0;
        arm(k);
        r = fn(err, sizeof err);
        disarm();
        if (r == 0) {
            if (!err[0]) fail_msg("%s: allocation %ld of %ld failed and it returned no message", name, k, n);
            failed++;
        } else if (r == 1) {
            survived++;
        } else {
            fail_msg("%s: allocation %ld of %ld failed and the object it built did not work", name, k, n);
        }
        if (g_n_live != live0)
            fail_msg("%s: allocation %ld of %ld failed and %ld blocks leaked", name, k, n, g_n_live - live0);
    }
    printf("%-16s %5ld allocations: %4d failed the constructor with a message, %3d came later, in the use "
           "(failed with a message or absorbed); no leak\n",
           name, n, failed, survived);
}

static void alloc_model_target(void **st) { (void)st; run_scenario("model (target)", sc_model_target); }
static void alloc_model_drafter(void **st) { (void)st; run_scenario("model (dflash)", sc_model_drafter); }
static void alloc_session(void **st) { (void)st; run_scenario("session", sc_session); }
static void alloc_spec_dflash(void **st) { (void)st; run_scenario("spec dflash", sc_spec_dflash); }
static void alloc_spec_simple(void **st) { (void)st; run_scenario("spec simple", sc_spec_simple); }
static void alloc_spec_ngram(void **st) { (void)st; run_scenario("spec ngram", sc_spec_ngram); }
static void alloc_spec_open(void **st) { (void)st; run_scenario("bd_spec_open", sc_spec_open); }
static void alloc_threadpool(void **st) { (void)st; run_scenario("threadpool", sc_threadpool); }
static void alloc_template(void **st) { (void)st; run_scenario("chat template", sc_template); }

static int setup(void **st) {
    (void)st;
    char err[512];
    const char *sh = getenv("BD_SHARED");
    if (!sh) sh = "../shared";
    snprintf(g_target, sizeof g_target, "%s/fixtures/stories260K/stories260K.gguf", sh);
    snprintf(g_draft, sizeof g_draft, "%s/fixtures/stories260K/stories260K-dflash.gguf", sh);
    snprintf(g_tmpl_path, sizeof g_tmpl_path, "%s/fixtures/templates/Qwen-Qwen3-0.6B.jinja", sh);
    g_m = bd_model_open(g_target, err, sizeof err);
    g_dm = bd_model_open(g_draft, err, sizeof err);
    FILE *f = fopen(g_tmpl_path, "rb");
    if (!g_m || !g_dm || !f) return -1;
    g_tmpl = calloc(1, 1 << 16);
    size_t n = fread(g_tmpl, 1, (1 << 16) - 1, f);
    fclose(f);
    return n > 0 ? 0 : -1;
}

static int teardown(void **st) {
    (void)st;
    free(g_tmpl);
    bd_model_free(g_dm);
    bd_model_free(g_m);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alloc_model_target), cmocka_unit_test(alloc_model_drafter),
        cmocka_unit_test(alloc_session),      cmocka_unit_test(alloc_spec_dflash),
        cmocka_unit_test(alloc_spec_simple),  cmocka_unit_test(alloc_spec_ngram),
        cmocka_unit_test(alloc_spec_open),    cmocka_unit_test(alloc_threadpool),
        cmocka_unit_test(alloc_template),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
