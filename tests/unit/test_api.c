/*
 * test_api.c - the public header's promises, checked through the public API.
 *
 *  - textstream: a push into a buffer that is too small returns -(needed),
 *    writes nothing and consumes nothing (the same id pushed again with
 *    room gives the whole text); bd_textstream_max_bytes always suffices.
 *    Model: a synthetic llama over a vocabulary whose token 0 is 300
 *    bytes ("Ü" x 150), with a constant output (greedy emits token 0).
 *  - bd_dflash_tap_layers never writes more than the caller's array holds.
 *  - prefix reuse: a second generation whose prompt shares a prefix with
 *    what the session holds forwards only the new tokens (counted from the
 *    rows the session tapped in its last forward, not from the stats) and
 *    gives the output and the logits (bit for bit) of a fresh session;
 *    for bd_generate and for bd_spec_generate with the DFlash drafter and
 *    with draft-simple.
 *  - the adaptive draft length's state carries over between generations
 *    on one bd_spec (after one drafted) until bd_spec_forget.
 *  - version: the macros and bd_version() agree.
 *  - bd_spec_open: one call gives a session tapping the drafter's layers
 *    and the bd_spec that owns it; its output equals plain greedy.
 *  - bd_threadpool: sessions on a shared pool start no threads of their own
 *    (counted in /proc/self/task), and three threads generating at once on
 *    one pool give the tokens of sequential runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>

#include "blockdraft.h"
#include "gguf/bd_gguf.h"
#include "model/synth.h"
#include "decode/spec_internal.h"

static char g_target[1024], g_draft[1024], g_long[256], g_vocab[256];
static bd_model *g_m, *g_dm;

/* ------------------------------------------------------------------------
 * A model whose every generated token is 300 bytes
 * ---------------------------------------------------------------------- */

static void write_long_vocab(const char *path) {
    static char long_tok[301];
    for (int i = 0; i < 150; i++) memcpy(long_tok + 2 * i, "\xc3\x9c", 2); /* U+00DC */
    const char *toks[] = {long_tok, "<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "c"};
    int32_t types[] = {1, 2, 3, 3, 1, 1, 1, 1};
    float scores[] = {0, -1, -2, -3, -4, -5, -6, -7};
    char err[256];
    bd_gguf_writer *w = bd_gguf_writer_create();
    assert_non_null(w);
    assert_true(bd_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    assert_true(bd_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 8));
    assert_true(bd_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_VTYPE_INT32, types, 8));
    assert_true(bd_gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_VTYPE_FLOAT32, scores, 8));
    assert_true(bd_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 1));
    assert_true(bd_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 2));
    assert_true(bd_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 3));
    assert_true(bd_gguf_writer_write_file(w, path, err, sizeof err));
    bd_gguf_writer_free(w);
}

static void textstream_needed(void **st) {
    (void)st;
    char err[512];
    bd_model *m = bd_model_open(g_long, err, sizeof err);
    assert_non_null(m);
    assert_int_equal(bd_token_piece_max(m, false), 300);
    bd_textstream *ts = bd_textstream_create(m, false);
    assert_non_null(ts);
    assert_true(bd_textstream_max_bytes(ts) >= 300);
    char small[256], big[512];
    memset(small, 'x', sizeof small);
    /* too small: -(needed), nothing written, nothing consumed */
    assert_int_equal(bd_textstream_push(ts, 0, small, (int)sizeof small), -300);
    for (size_t i = 0; i < sizeof small; i++) assert_int_equal(small[i], 'x');
    assert_int_equal(bd_textstream_push(ts, 0, big, bd_textstream_max_bytes(ts)), 300);
    for (int i = 0; i < 150; i++) assert_memory_equal(big + 2 * i, "\xc3\x9c", 2);
    assert_int_equal(bd_textstream_flush(ts, big, 0), 0);
    bd_textstream_free(ts);

    /* the generation loop with a constant output emits token 0 */
    bd_session_params sp = bd_session_default_params();
    sp.n_ctx = 64;
    sp.n_threads = 1;
    bd_session *s = bd_session_create(m, &sp, err, sizeof err);
    assert_non_null(s);
    int32_t prompt[2] = {2, 5};
    bd_gen_params gp = {.n_predict = 2, .sampling = bd_sampler_default_params()};
    gp.sampling.temperature = 0;
    bd_gen_stats gs;
    assert_true(bd_generate(s, prompt, 2, &gp, NULL, NULL, &gs, err, sizeof err));
    assert_int_equal(gs.n_gen, 2);
    assert_int_equal(bd_session_tokens(s)[2], 0);
    bd_session_free(s);
    bd_model_free(m);
}

/* ------------------------------------------------------------------------
 * Tap layers
 * ---------------------------------------------------------------------- */

static void tap_layers_bounded(void **st) {
    (void)st;
    int32_t taps[4] = {-7, -7, -7, -7};
    /* the stories260K drafter taps target layers 2 and 4 (fixture README) */
    assert_int_equal(bd_dflash_tap_layers(g_dm, taps, 4), 2);
    assert_int_equal(taps[0], 2);
    assert_int_equal(taps[1], 4);
    assert_int_equal(taps[2], -7);
    int32_t one[2] = {-7, -7};
    assert_int_equal(bd_dflash_tap_layers(g_dm, one, 1), -2);
    assert_int_equal(one[0], -7); /* nothing written */
    assert_int_equal(one[1], -7);
    assert_int_equal(bd_dflash_tap_layers(g_dm, NULL, 0), -2);
    assert_int_equal(bd_dflash_tap_layers(g_m, taps, 4), 0); /* not a drafter */
}

/* ------------------------------------------------------------------------
 * Prefix reuse
 * ---------------------------------------------------------------------- */

typedef struct {
    int32_t ids[256];
    int n;
} ids_rec;

static bool rec_tok(int32_t t, void *u) {
    ids_rec *r = u;
    if (r->n < 256) r->ids[r->n++] = t;
    return true;
}

/* ADAPTIVE: DFlash with the adaptive draft length, whose plain steps hold
 * their features back from the drafter: a generation ends with some not
 * yet appended, and the next prompt's reuse must still cover them. Greedy
 * only: at T > 0 its timing-driven draft lengths change how much of the
 * random stream a generation draws, so equal seeds need not give equal
 * tokens (the distribution is test_spec_sampling's) */
enum { PLAIN = 0, DFLASH = 1, SIMPLE = 2, ADAPTIVE = 3 };

typedef struct {
    bd_session *s;
    bd_spec *x;
} gen_ctx;

static gen_ctx ctx_new(int mode) {
    char err[512];
    gen_ctx c = {0};
    bd_session_params sp = bd_session_default_params();
    int32_t taps[16];
    sp.n_ctx = 256;
    sp.n_threads = 1;
    if (mode == DFLASH || mode == ADAPTIVE) {
        sp.n_tap = bd_dflash_tap_layers(g_dm, taps, 16);
        sp.tap_layers = taps;
    } else {
        /* plain sessions tap one layer too: the tapped rows of the last
         * forward tell how many prompt tokens were forwarded */
        taps[0] = 1;
        sp.n_tap = 1;
        sp.tap_layers = taps;
    }
    c.s = bd_session_create(g_m, &sp, err, sizeof err);
    assert_non_null(c.s);
    if (mode != PLAIN) {
        bd_spec_params p = bd_spec_default_params();
        p.type = mode == SIMPLE ? BD_SPEC_DRAFT_SIMPLE : BD_SPEC_DRAFT_DFLASH;
        p.n_max = 4;
        p.adaptive = mode == ADAPTIVE;
        c.x = bd_spec_create(c.s, mode == SIMPLE ? g_m : g_dm, &p, NULL, 0, err, sizeof err);
        assert_non_null(c.x);
    }
    return c;
}

/* the first drafting step's drafts */
typedef struct {
    int32_t pos, drafts[16], n;
} first_draft;

static void trace_first(void *user, int32_t pos, int32_t anchor, const int32_t *drafts, int32_t nd, int32_t a) {
    (void)anchor, (void)a;
    first_draft *f = user;
    if (f->n > 0 || nd == 0) return;
    f->pos = pos;
    f->n = nd < 16 ? nd : 16;
    memcpy(f->drafts, drafts, (size_t)f->n * sizeof *drafts);
}

static void ctx_free(gen_ctx *c) {
    bd_spec_free(c->x);
    bd_session_free(c->s);
}

static void gen(gen_ctx *c, const int32_t *prompt, int n, int n_predict, float temp, ids_rec *out,
                bd_gen_stats *gs) {
    char err[512];
    bd_gen_params gp = {.n_predict = n_predict, .sampling = bd_sampler_default_params(), .ignore_eog = true};
    gp.sampling.temperature = temp;
    gp.sampling.seed = 77;
    out->n = 0;
    bool ok = c->x ? bd_spec_generate(c->x, prompt, n, &gp, rec_tok, out, gs, err, sizeof err)
                   : bd_generate(c->s, prompt, n, &gp, rec_tok, out, gs, err, sizeof err);
    if (!ok) fail_msg("generate: %s", err);
}

static void reuse_case(int mode, float temp) {
    int32_t p1[64];
    int n1 = bd_tokenize(g_m, "Once upon a time", 16, true, false, p1, 64);
    assert_true(n1 > 1);
    gen_ctx c = ctx_new(mode);
    ids_rec a, b, f;
    bd_gen_stats gs;
    /* adaptive: two tokens, so that the one step after the prompt's is a
     * plain one (no draft fits before n_predict) and the generation ends
     * with its row held back */
    gen(&c, p1, n1, mode == ADAPTIVE ? 2 : 12, temp, &a, &gs);
    assert_int_equal(gs.n_prompt_cached, 0);
    if (mode == ADAPTIVE) assert_int_equal(gs.spec.n_drafted, 0);
    /* the next prompt: what the session holds (prompt + all but the last
     * emitted token), the last emitted token and a few more words */
    int32_t p2[128];
    int held = bd_session_length(c.s);
    assert_int_equal(held, n1 + a.n - 1);
    memcpy(p2, bd_session_tokens(c.s), (size_t)held * sizeof *p2);
    p2[held] = a.ids[a.n - 1];
    int extra = bd_tokenize(g_m, " and the cat", 12, false, false, p2 + held + 1, 32);
    assert_true(extra > 0);
    int n2 = held + 1 + extra;

    /* one new token: the prompt forward is the last one; its tapped rows
     * are the prompt tokens forwarded */
    gen(&c, p2, n2, 1, temp, &b, &gs);
    int32_t rows = -1;
    assert_non_null(bd_session_taps(c.s, &rows));
    assert_int_equal(rows, n2 - held);
    assert_int_equal(gs.n_prompt_cached, held);
    float *lg_reused = malloc((size_t)bd_model_n_vocab(g_m) * sizeof(float));
    assert_non_null(lg_reused);
    memcpy(lg_reused, bd_session_logits(c.s, 0), (size_t)bd_model_n_vocab(g_m) * sizeof(float));

    gen_ctx fresh = ctx_new(mode);
    gen(&fresh, p2, n2, 1, temp, &f, &gs);
    assert_int_equal(gs.n_prompt_cached, 0);
    assert_non_null(bd_session_taps(fresh.s, &rows));
    assert_int_equal(rows, n2);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.ids[0], f.ids[0]);
    assert_memory_equal(lg_reused, bd_session_logits(fresh.s, 0), (size_t)bd_model_n_vocab(g_m) * sizeof(float));
    free(lg_reused);

    /* longer generations: the same tokens as a fresh session; a DFlash
     * drafter's first drafts the same too (its context rows are the same) */
    first_draft d1 = {0}, d2 = {0};
    if (c.x) bd_spec_set_trace(c.x, trace_first, &d1);
    gen(&c, p2, n2, 40, temp, &b, &gs);
    assert_int_equal(gs.n_prompt_cached, n2 - 1); /* everything but the last prompt token */
    gen_ctx fresh2 = ctx_new(mode);
    if (fresh2.x) bd_spec_set_trace(fresh2.x, trace_first, &d2);
    gen(&fresh2, p2, n2, 40, temp, &f, &gs);
    assert_int_equal(b.n, f.n);
    if (mode == DFLASH || mode == ADAPTIVE) {
        assert_true(d1.n > 0);
        assert_int_equal(d1.pos, d2.pos);
        assert_int_equal(d1.n, d2.n);
        assert_memory_equal(d1.drafts, d2.drafts, (size_t)d1.n * sizeof d1.drafts[0]);
    }
    assert_memory_equal(b.ids, f.ids, (size_t)b.n * sizeof b.ids[0]);
    if (mode != PLAIN) assert_true(gs.spec.n_drafted > 0);

    /* a prompt that diverges early keeps only the common part */
    p2[1] = p2[1] == 5 ? 6 : 5;
    gen(&c, p2, n2, 1, temp, &b, &gs);
    assert_int_equal(gs.n_prompt_cached, 1);
    assert_non_null(bd_session_taps(c.s, &rows));
    assert_int_equal(rows, n2 - 1);
    ctx_free(&fresh2);
    ctx_free(&fresh);
    ctx_free(&c);
}

static void reuse_plain_greedy(void **st) { (void)st; reuse_case(PLAIN, 0.0f); }
static void reuse_plain_sampled(void **st) { (void)st; reuse_case(PLAIN, 0.9f); }
static void reuse_dflash_greedy(void **st) { (void)st; reuse_case(DFLASH, 0.0f); }
static void reuse_dflash_sampled(void **st) { (void)st; reuse_case(DFLASH, 0.9f); }
static void reuse_simple_greedy(void **st) { (void)st; reuse_case(SIMPLE, 0.0f); }
static void reuse_adaptive_greedy(void **st) { (void)st; reuse_case(ADAPTIVE, 0.0f); }

/* every step's draft count */
typedef struct {
    int32_t nd[256];
    int n;
} step_rec;

static void trace_steps(void *user, int32_t pos, int32_t anchor, const int32_t *drafts, int32_t nd, int32_t a) {
    (void)pos, (void)anchor, (void)drafts, (void)a;
    step_rec *r = user;
    if (r->n < 256) r->nd[r->n++] = nd;
}

/* The adaptive state carries over between generations on one bd_spec once
 * one of them drafted; bd_spec_forget starts afresh. A fresh start is the
 * warm-up (two drafts, then a plain step); the steps learned from count
 * on across carried generations and restart after a forget. Every
 * generation gives plain greedy's tokens whatever the state. */
static void adaptive_state_carries_over(void **st) {
    (void)st;
    int32_t p[64];
    int np = bd_tokenize(g_m, "Once upon a time", 16, true, false, p, 64);
    assert_true(np > 1);
    gen_ctx plain = ctx_new(PLAIN), c = ctx_new(ADAPTIVE);
    ids_rec want, got;
    bd_gen_stats gs;
    gen(&plain, p, np, 40, 0.0f, &want, &gs);
    step_rec s;
    bd_spec_set_trace(c.x, trace_steps, &s);
    int32_t learned = 0;
    for (int g = 0; g < 4; g++) {
        if (g == 2) bd_spec_forget(c.x);
        s.n = 0;
        gen(&c, p, np, 40, 0.0f, &got, &gs);
        assert_int_equal(got.n, want.n);
        assert_memory_equal(got.ids, want.ids, (size_t)want.n * sizeof want.ids[0]);
        assert_true(s.n >= 2);
        if (g == 0 || g == 2) {
            assert_int_equal(s.nd[0], 2);
            assert_int_equal(s.nd[1], 0);
            learned = 0;
        }
        learned += s.n;
        assert_int_equal(bd_spec_test_steps_learned(c.x), learned);
    }
    ctx_free(&c);
    ctx_free(&plain);
}

/* An adaptive pick below n_min drafts n_min: with n_min 3 (n_max 4) the
 * warm-up drafts 3, not 2 dropped after a drafter pass, and no step drafts
 * 1 or 2. Output stays plain greedy's. */
static void adaptive_respects_n_min(void **st) {
    (void)st;
    int32_t p[64];
    int np = bd_tokenize(g_m, "Once upon a time", 16, true, false, p, 64);
    gen_ctx plain = ctx_new(PLAIN), c = ctx_new(ADAPTIVE);
    int32_t n_max = 4, n_min = 3;
    float p_min = 0.0f;
    bd_spec_set_draft_limits(c.x, &n_max, &n_min, &p_min);
    assert_int_equal(n_min, 3);
    ids_rec want, got;
    bd_gen_stats gs;
    gen(&plain, p, np, 40, 0.0f, &want, &gs);
    step_rec s = {0};
    bd_spec_set_trace(c.x, trace_steps, &s);
    gen(&c, p, np, 40, 0.0f, &got, &gs);
    assert_int_equal(got.n, want.n);
    assert_memory_equal(got.ids, want.ids, (size_t)want.n * sizeof want.ids[0]);
    assert_true(s.n >= 2);
    assert_int_equal(s.nd[0], 3);
    for (int i = 0; i < s.n; i++) assert_true(s.nd[i] == 0 || s.nd[i] >= 3);
    ctx_free(&c);
    ctx_free(&plain);
}

/* ------------------------------------------------------------------------
 * Version, bd_spec_open, thread pools
 * ---------------------------------------------------------------------- */

static void version_agrees(void **st) {
    (void)st;
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", BD_VERSION_MAJOR, BD_VERSION_MINOR, BD_VERSION_PATCH);
    assert_string_equal(BD_VERSION_STRING, want);
    assert_string_equal(bd_version(), want);
}

static void spec_open_one_call(void **st) {
    (void)st;
    char err[512];
    int32_t prompt[64];
    int np = bd_tokenize(g_m, "Once upon a time", 16, true, false, prompt, 64);
    bd_spec_params spp = bd_spec_default_params();
    /* type none: no bd_spec; draft-dflash with a non-DFlash draft: refused */
    assert_null(bd_spec_open(g_m, g_dm, NULL, &spp, NULL, 0, err, sizeof err));
    spp.type = BD_SPEC_DRAFT_DFLASH;
    assert_null(bd_spec_open(g_m, g_m, NULL, &spp, NULL, 0, err, sizeof err));
    assert_non_null(strstr(err, "DFlash"));
    /* sp->n_tap is overridden by the drafter's */
    bd_session_params sp = bd_session_default_params();
    int32_t wrong = 1;
    sp.n_ctx = 256;
    sp.n_threads = 1;
    sp.n_tap = 1;
    sp.tap_layers = &wrong;
    bd_spec *x = bd_spec_open(g_m, g_dm, &sp, &spp, NULL, 0, err, sizeof err);
    assert_non_null(x);
    bd_session *s = bd_spec_session(x);
    assert_non_null(s);
    ids_rec a, b;
    bd_gen_stats gs;
    gen_ctx c = {.s = s, .x = x};
    gen(&c, prompt, np, 30, 0.0f, &a, &gs);
    assert_true(gs.spec.n_accepted > 0);
    int32_t rows = 0;
    const float *taps = bd_session_taps(s, &rows);
    assert_non_null(taps); /* the session taps (two layers: the drafter's) */
    gen_ctx p = ctx_new(PLAIN);
    gen(&p, prompt, np, 30, 0.0f, &b, &gs);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.ids, b.ids, (size_t)a.n * sizeof a.ids[0]);
    ctx_free(&p);
    bd_spec_free(x); /* frees the session too (ASan: no leak) */
}

static int thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

typedef struct {
    bd_session *s;
    const int32_t *prompt;
    int np;
    ids_rec out[4];
    bool ok;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    char err[256];
    w->ok = true;
    for (int r = 0; r < 4 && w->ok; r++) {
        bd_gen_params gp = {.n_predict = 40, .sampling = bd_sampler_default_params(), .ignore_eog = true};
        gp.sampling.temperature = 0;
        bd_gen_stats gs;
        bd_session_truncate(w->s, 0); /* every run from scratch */
        w->out[r].n = 0;
        w->ok = bd_generate(w->s, w->prompt, w->np, &gp, rec_tok, &w->out[r], &gs, err, sizeof err);
    }
    return NULL;
}

static void threadpool_shared(void **st) {
    (void)st;
    char err[512];
    int t0 = thread_count();
    bd_threadpool *tp = bd_threadpool_create(3, err, sizeof err);
    assert_non_null(tp);
    assert_int_equal(bd_threadpool_n_threads(tp), 3);
    assert_int_equal(thread_count(), t0 + 2); /* the caller is thread 0 */
    bd_session_params sp = bd_session_default_params();
    sp.n_ctx = 128;
    sp.n_threads = 3;
    sp.threadpool = tp;
    bd_session *s[3];
    for (int i = 0; i < 3; i++) assert_non_null(s[i] = bd_session_create(g_m, &sp, err, sizeof err));
    assert_int_equal(thread_count(), t0 + 2); /* no pool of their own */
    sp.threadpool = NULL;
    bd_session *own = bd_session_create(g_m, &sp, err, sizeof err);
    assert_non_null(own);
    assert_int_equal(thread_count(), t0 + 4); /* a session without: its own 2 workers */
    bd_session_free(own);

    const char *prompts[3] = {"Once upon a time", "Tom had a red ball", "Lily and her mom went to the park"};
    int32_t pids[3][64];
    int np[3];
    worker w[3];
    for (int i = 0; i < 3; i++) {
        np[i] = bd_tokenize(g_m, prompts[i], strlen(prompts[i]), true, false, pids[i], 64);
        w[i] = (worker){.s = s[i], .prompt = pids[i], .np = np[i]};
    }
    /* sequential references, then all three at once */
    ids_rec ref[3];
    for (int i = 0; i < 3; i++) {
        worker_main(&w[i]);
        assert_true(w[i].ok);
        ref[i] = w[i].out[0];
    }
    pthread_t th[3];
    for (int i = 0; i < 3; i++) assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) {
        assert_true(w[i].ok);
        for (int r = 0; r < 4; r++) {
            assert_int_equal(w[i].out[r].n, ref[i].n);
            assert_memory_equal(w[i].out[r].ids, ref[i].ids, (size_t)ref[i].n * sizeof ref[i].ids[0]);
        }
    }
    for (int i = 0; i < 3; i++) bd_session_free(s[i]);
    bd_threadpool_free(tp);
    assert_int_equal(thread_count(), t0);
}

/* ------------------------------------------------------------------------ */

static int setup(void **st) {
    (void)st;
    char err[512];
    const char *sh = getenv("BD_SHARED");
    if (!sh) sh = "../shared";
    snprintf(g_target, sizeof g_target, "%s/fixtures/stories260K/stories260K.gguf", sh);
    snprintf(g_draft, sizeof g_draft, "%s/fixtures/stories260K/stories260K-dflash.gguf", sh);
    g_m = bd_model_open(g_target, err, sizeof err);
    g_dm = bd_model_open(g_draft, err, sizeof err);
    if (!g_m || !g_dm) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    snprintf(g_vocab, sizeof g_vocab, "/tmp/bd-test-api-%d-vocab.gguf", (int)getpid());
    snprintf(g_long, sizeof g_long, "/tmp/bd-test-api-%d-long.gguf", (int)getpid());
    write_long_vocab(g_vocab);
    bd_synth_opts o = {.arch = "llama", .shape = "tiny", .mix = "f32", .seed = 1, .tied = -1,
                       .vocab_path = g_vocab, .n_threads = 1, .constant_output = true};
    if (!bd_synth_write(&o, g_long, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **st) {
    (void)st;
    unlink(g_vocab);
    unlink(g_long);
    bd_model_free(g_dm);
    bd_model_free(g_m);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(textstream_needed),
        cmocka_unit_test(tap_layers_bounded),
        cmocka_unit_test(reuse_plain_greedy),
        cmocka_unit_test(reuse_plain_sampled),
        cmocka_unit_test(reuse_dflash_greedy),
        cmocka_unit_test(reuse_dflash_sampled),
        cmocka_unit_test(reuse_simple_greedy),
        cmocka_unit_test(reuse_adaptive_greedy),
        cmocka_unit_test(adaptive_state_carries_over),
        cmocka_unit_test(adaptive_respects_n_min),
        cmocka_unit_test(version_agrees),
        cmocka_unit_test(spec_open_one_call),
        cmocka_unit_test(threadpool_shared),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
