/*
 * test_noalloc.c - the decode loop does not allocate.
 *
 * This program interposes malloc/calloc/realloc/aligned_alloc/
 * posix_memalign (forwarding to glibc's __libc_* entry points) and counts
 * calls while a flag is set. The flag is raised by the token callback at
 * the first generated token, i.e. after all set-up, and lowered when
 * generation returns; every call in between comes from the token loop.
 * Runs the plain loop (greedy and sampling) and the speculative loops
 * (draft-dflash with the trained stories260K drafter, ngram-simple), and
 * both under a grammar (its masks and state tables live in memory set up
 * before the loop).
 * Not built for sanitizer builds (ASan owns malloc there).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "blockdraft.h"
#include "decode/grammar.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static volatile int g_counting;
static volatile long g_allocs;

void *malloc(size_t n) {
    if (g_counting) __atomic_fetch_add(&g_allocs, 1, __ATOMIC_RELAXED);
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    if (g_counting) __atomic_fetch_add(&g_allocs, 1, __ATOMIC_RELAXED);
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    if (g_counting) __atomic_fetch_add(&g_allocs, 1, __ATOMIC_RELAXED);
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t al, size_t n) {
    if (g_counting) __atomic_fetch_add(&g_allocs, 1, __ATOMIC_RELAXED);
    return __libc_memalign(al, n);
}
int posix_memalign(void **out, size_t al, size_t n) {
    if (g_counting) __atomic_fetch_add(&g_allocs, 1, __ATOMIC_RELAXED);
    *out = __libc_memalign(al, n);
    return *out ? 0 : 12;
}

static char g_target[1024], g_draft[1024];

static bool on_token(int32_t tok, void *user) {
    (void)tok;
    int *n = user;
    if ((*n)++ == 0) g_counting = 1;
    return true;
}

/* A grammar the stories model can follow for 150 tokens (ignore_eog:
 * it ends only at n_predict): words, punctuation, nested brackets. */
static const char *GRAMMAR = "root ::= item+\nitem ::= [a-zA-Z ,.!?'\\n\"]+ | \"(\" item* \")\"";

static void run_case_g(bool spec, bd_spec_type type, float temp, bool grammar) {
    char err[512];
    bd_model *m = bd_model_open(g_target, err, sizeof err);
    assert_non_null(m);
    bd_model *dm = NULL;
    int32_t taps[16];
    bd_session_params sp = bd_session_default_params();
    sp.n_ctx = 512;
    sp.n_threads = 2;
    if (spec && type == BD_SPEC_DRAFT_DFLASH) {
        dm = bd_model_open(g_draft, err, sizeof err);
        assert_non_null(dm);
        sp.n_tap = bd_dflash_tap_layers(dm, taps, 16);
        sp.tap_layers = taps;
    }
    bd_session *s = bd_session_create(m, &sp, err, sizeof err);
    assert_non_null(s);
    int32_t prompt[8];
    int np = bd_tokenize(m, "Once upon a time", 16, true, false, prompt, 8);
    assert_true(np > 1);
    bd_gen_params gp = {.n_predict = 150, .sampling = bd_sampler_default_params(), .ignore_eog = true};
    gp.sampling.temperature = temp;
    bd_grammar_vocab *gv = NULL;
    if (grammar) {
        gv = bd_grammar_vocab_create(m, err, sizeof err);
        assert_non_null(gv);
        gp.grammar = bd_grammar_create(GRAMMAR, strlen(GRAMMAR), gv, err, sizeof err);
        if (!gp.grammar) fail_msg("%s", err);
    }
    gp.sampling.seed = 7;
    bd_gen_stats st;
    int n = 0;
    g_allocs = 0;
    bool ok;
    if (spec) {
        bd_spec_params p = bd_spec_default_params();
        p.type = type;
        p.adaptive = true;
        bd_spec *x = bd_spec_create(s, dm, &p, NULL, 0, err, sizeof err);
        assert_non_null(x);
        ok = bd_spec_generate(x, prompt, np, &gp, on_token, &n, &st, err, sizeof err);
        g_counting = 0;
        bd_spec_free(x);
    } else {
        ok = bd_generate(s, prompt, np, &gp, on_token, &n, &st, err, sizeof err);
        g_counting = 0;
    }
    if (!ok) fail_msg("%s", err);
    assert_int_equal(n, 150);
    if (g_allocs != 0) fprintf(stderr, "%ld allocations inside the token loop\n", (long)g_allocs);
    assert_int_equal(g_allocs, 0);
    bd_session_free(s);
    bd_grammar_free(gp.grammar);
    bd_grammar_vocab_free(gv);
    bd_model_free(dm);
    bd_model_free(m);
}

static void run_case(bool spec, bd_spec_type type, float temp) { run_case_g(spec, type, temp, false); }

static void plain_greedy(void **st) { (void)st; run_case(false, BD_SPEC_NONE, 0.0f); }
static void plain_sampling(void **st) { (void)st; run_case(false, BD_SPEC_NONE, 1.0f); }
static void dflash_greedy(void **st) { (void)st; run_case(true, BD_SPEC_DRAFT_DFLASH, 0.0f); }
static void dflash_sampling(void **st) { (void)st; run_case(true, BD_SPEC_DRAFT_DFLASH, 0.9f); }
static void ngram_greedy(void **st) { (void)st; run_case(true, BD_SPEC_NGRAM_SIMPLE, 0.0f); }
static void grammar_plain(void **st) { (void)st; run_case_g(false, BD_SPEC_NONE, 1.0f, true); }
static void grammar_dflash(void **st) { (void)st; run_case_g(true, BD_SPEC_DRAFT_DFLASH, 0.9f, true); }

int main(void) {
    const char *sh = getenv("BD_SHARED");
    if (!sh) sh = "../shared";
    snprintf(g_target, sizeof g_target, "%s/fixtures/stories260K/stories260K.gguf", sh);
    snprintf(g_draft, sizeof g_draft, "%s/fixtures/stories260K/stories260K-dflash.gguf", sh);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_greedy),  cmocka_unit_test(plain_sampling), cmocka_unit_test(dflash_greedy),
        cmocka_unit_test(dflash_sampling), cmocka_unit_test(ngram_greedy),  cmocka_unit_test(grammar_plain),
        cmocka_unit_test(grammar_dflash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
