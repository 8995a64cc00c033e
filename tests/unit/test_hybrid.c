/*
 * test_hybrid.c - the hybrid (qwen35 / qwen35moe / qwen3next) session, bit
 * for bit.
 *
 * Models: tiny synthetic qwen35 (Q4_K_M, tied), qwen35moe (Q4_K_M, fused
 * gate/up, one MTP block) and qwen3next (Q4_K_M, value heads grouped by key
 * head, the fused ssm_in / ssm_ba regrouped at load) with the stories260K
 * vocabulary, written by the synth generator.
 *
 * 1. A verify batch gives every row exactly the logits that decoding the
 *    same tokens one at a time gives (memcmp): the premise of lossless
 *    speculation.
 * 2. After "forward a batch, truncate to keep a of its rows" the recurrent
 *    state -- every GDN layer's SSM state and convolution window -- equals
 *    the state after plain decoding of those tokens, bit for bit (compared
 *    directly, not through tokens), for every a, over several steps,
 *    including rollbacks to the checkpoint (a = 0), rollback after several
 *    forwards since the checkpoint, and the state continuing correctly
 *    afterwards.
 * 3. A truncation before the checkpoint is refused and leaves the session
 *    unchanged; truncation to 0 always works.
 * 4. MoE routing: top-k ties go to the lower expert id, weights renormalize
 *    over the chosen experts, the 2^-14 clamp and the weights scale.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "blockdraft.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/synth.h"

static char g_dir[64], g_dense[128], g_moe[128], g_next[128];

static void write_model(const char *arch, const char *path, uint64_t seed, bool fused, uint32_t mtp) {
    char vocab[1024], err[512];
    const char *sh = getenv("BD_SHARED");
    snprintf(vocab, sizeof vocab, "%s/fixtures/stories260K/stories260K.gguf", sh ? sh : "../shared");
    bd_synth_opts o = {.arch = arch, .shape = "tiny", .mix = "q4_k_m", .seed = seed, .tied = -1,
                       .vocab_path = vocab, .n_threads = 2, .fused_gate_up = fused, .n_mtp = mtp};
    if (!bd_synth_write(&o, path, err, sizeof err)) fail_msg("synth %s: %s", arch, err);
}

/* The whole recurrent state at n_past: SSM states and conv windows of all
 * GDN layers. */
static size_t state_floats(const bd_session *s) {
    return (size_t)s->rs.n_rec * (size_t)(s->rs.ssm_floats + s->rs.conv_floats);
}
static void state_copy(const bd_session *s, float *out) {
    const bd_recurrent *rs = &s->rs;
    size_t ns = (size_t)rs->n_rec * (size_t)rs->ssm_floats;
    memcpy(out, rs->ssm[rs->cur], ns * sizeof(float));
    memcpy(out + ns, rs->conv[rs->cur], (size_t)rs->n_rec * (size_t)rs->conv_floats * sizeof(float));
}

static bd_session *session(bd_model *m) {
    char err[256];
    bd_session_params p = bd_session_default_params();
    p.n_ctx = 256;
    p.n_threads = 2;
    p.n_outputs = 16;
    bd_session *s = bd_session_create(m, &p, err, sizeof err);
    if (!s) fail_msg("session: %s", err);
    assert_true(s->rs.n_rec > 0);
    return s;
}

#define N_TOK 60

static void check_model(const char *path) {
    char err[256];
    bd_model *m = bd_model_open(path, err, sizeof err);
    if (!m) fail_msg("%s", err);
    const int32_t V = bd_model_n_vocab(m);
    /* the token sequence: a prompt, then the model's own greedy choices */
    int32_t toks[N_TOK];
    for (int i = 0; i < 8; i++) toks[i] = 3 + (i * 37) % (V - 3);

    /* reference: plain decoding, one token per forward; logits and state
     * after every token */
    bd_session *a = session(m);
    const size_t SF = state_floats(a);
    float *ref_state = malloc((size_t)N_TOK * SF * sizeof(float));
    float *ref_logits = malloc((size_t)N_TOK * (size_t)V * sizeof(float));
    float *st = malloc(SF * sizeof(float));
    assert_non_null(ref_state);
    assert_non_null(ref_logits);
    assert_non_null(st);
    for (int i = 0; i < N_TOK; i++) {
        assert_true(bd_session_forward(a, &toks[i], 1, BD_LOGITS_LAST, err, sizeof err));
        memcpy(ref_logits + (size_t)i * V, bd_session_logits(a, 0), (size_t)V * sizeof(float));
        state_copy(a, ref_state + (size_t)i * SF);
        if (i >= 7 && i + 1 < N_TOK) {
            const float *lg = bd_session_logits(a, 0);
            int32_t best = 0;
            for (int32_t t = 1; t < V; t++)
                if (lg[t] > lg[best]) best = t;
            toks[i + 1] = best;
        }
    }
    /* the state really changes token to token (a test of nothing otherwise) */
    assert_true(memcmp(ref_state, ref_state + 10 * SF, SF * sizeof(float)) != 0);

    /* speculative-style: verify batches of b rows from position p, keep a
     * of them, check logits of the kept rows and the state after the
     * truncation; a pattern of (b, a) pairs that covers full rejection,
     * partial and full acceptance and several forwards between rollbacks */
    bd_session *b = session(m);
    static const int pat[][2] = {{8, 8}, {5, 0}, {5, 1}, {7, 3}, {3, 3}, {1, 1}, {6, 6}, {4, 2}, {9, 5},
                                 {2, 0}, {2, 1}, {12, 7}, {1, 1}, {1, 1}, {16, 4}};
    int pos = 0;
    for (size_t k = 0; k < sizeof pat / sizeof pat[0] && pos < N_TOK; k++) {
        int nb = pat[k][0], keep = pat[k][1];
        if (pos + nb > N_TOK) nb = N_TOK - pos;
        if (keep > nb) keep = nb;
        assert_true(bd_session_forward(b, toks + pos, nb, BD_LOGITS_ALL, err, sizeof err));
        for (int r = 0; r < nb; r++)
            if (memcmp(bd_session_logits(b, r), ref_logits + (size_t)(pos + r) * V, (size_t)V * sizeof(float)))
                fail_msg("%s: logits of row %d of a %d-row batch at %d differ from one-token decoding", path, r, nb,
                         pos);
        assert_true(bd_session_truncate(b, pos + keep));
        assert_int_equal(bd_session_length(b), pos + keep);
        if (pos + keep > 0) {
            state_copy(b, st);
            if (memcmp(st, ref_state + (size_t)(pos + keep - 1) * SF, SF * sizeof(float)))
                fail_msg("%s: state after keeping %d of %d rows at %d differs from plain decoding", path, keep, nb,
                         pos);
        }
        pos += keep;
    }
    assert_true(pos > 30);

    /* rollback over several forwards since the checkpoint: three single
     * tokens, then back two */
    int base = bd_session_length(b);
    for (int i = 0; i < 3; i++) assert_true(bd_session_forward(b, toks + base + i, 1, BD_LOGITS_LAST, err, sizeof err));
    assert_true(bd_session_truncate(b, base + 1));
    state_copy(b, st);
    assert_memory_equal(st, ref_state + (size_t)base * SF, SF * sizeof(float));

    /* before the checkpoint: refused, nothing changes */
    bd_session_checkpoint(b);
    state_copy(b, st);
    assert_false(bd_session_truncate(b, base - 3));
    assert_int_equal(bd_session_length(b), base + 1);
    float *st2 = malloc(SF * sizeof(float));
    assert_non_null(st2);
    state_copy(b, st2);
    assert_memory_equal(st, st2, SF * sizeof(float));
    /* to 0 always, and decoding again from there reproduces the start */
    assert_true(bd_session_truncate(b, 0));
    assert_true(bd_session_forward(b, toks, 4, BD_LOGITS_LAST, err, sizeof err));
    state_copy(b, st);
    assert_memory_equal(st, ref_state + 3 * SF, SF * sizeof(float));
    assert_memory_equal(bd_session_logits(b, 0), ref_logits + 3 * (size_t)V, (size_t)V * sizeof(float));

    free(st2);
    free(st);
    free(ref_state);
    free(ref_logits);
    bd_session_free(a);
    bd_session_free(b);
    bd_model_free(m);
}

static void dense_bit_exact(void **st) {
    (void)st;
    check_model(g_dense);
}

static void moe_bit_exact(void **st) {
    (void)st;
    check_model(g_moe);
}

static void next_bit_exact(void **st) {
    (void)st;
    check_model(g_next);
}

static void moe_routing(void **st) {
    (void)st;
    int32_t sel[4];
    float w[4], p[6];
    /* equal logits for experts 1, 3, 4: the k-th place goes to the lower ids */
    const float lg[6] = {0.0f, 2.0f, -1.0f, 2.0f, 2.0f, 1.0f};
    bd_moe_route(lg, 6, 2, 0.0f, p, sel, w);
    assert_int_equal(sel[0], 1);
    assert_int_equal(sel[1], 3);
    assert_float_equal(w[0], 0.5f, 1e-7f);
    assert_float_equal(w[1], 0.5f, 1e-7f);
    bd_moe_route(lg, 6, 4, 0.0f, p, sel, w);
    assert_int_equal(sel[2], 4);
    assert_int_equal(sel[3], 5);
    /* weights renormalized over the chosen experts, then scaled */
    float sum = w[0] + w[1] + w[2] + w[3];
    assert_float_equal(sum, 1.0f, 1e-6f);
    float w2[4];
    bd_moe_route(lg, 6, 4, 2.5f, p, sel, w2);
    for (int k = 0; k < 4; k++) assert_float_equal(w2[k], 2.5f * w[k], 1e-6f);
    /* probabilities that underflow: the sum is clamped at 2^-14 */
    const float lg2[3] = {0.0f, -200.0f, -200.0f};
    bd_moe_route(lg2, 3, 2, 0.0f, p, sel, w);
    assert_int_equal(sel[0], 0);
    assert_float_equal(w[0], 1.0f, 1e-6f);
    assert_true(w[1] == 0.0f);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/bd-hybrid-XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    snprintf(g_dense, sizeof g_dense, "%s/q35.gguf", g_dir);
    snprintf(g_moe, sizeof g_moe, "%s/q35moe.gguf", g_dir);
    write_model("qwen35", g_dense, 31, false, 0);
    write_model("qwen35moe", g_moe, 32, true, 1);
    snprintf(g_next, sizeof g_next, "%s/q3next.gguf", g_dir);
    write_model("qwen3next", g_next, 33, false, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dense_bit_exact),
        cmocka_unit_test(moe_bit_exact),
        cmocka_unit_test(next_bit_exact),
        cmocka_unit_test(moe_routing),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(g_dense);
    unlink(g_moe);
    unlink(g_next);
    rmdir(g_dir);
    return rc;
}
