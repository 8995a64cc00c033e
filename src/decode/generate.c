/*
 * generate.c - the plain generation loop: prefill, then sample one token,
 * forward it, repeat. Everything it needs is allocated before the loop
 * (the sampler's scratch, the session's buffers); the loop itself does not
 * allocate (tests/unit/test_noalloc.c checks this).
 *
 * Prefill reuses the session: the longest common prefix of its cached
 * tokens and the new prompt stays in the KV cache (decode.h).
 */
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "grammar.h"
#include "sampler.h"
#include "../model/model.h"

int32_t bd_decode_common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

int32_t bd_decode_reuse_prefix(bd_session *s, const int32_t *prompt, int32_t n_prompt, int32_t cap) {
    int32_t keep = bd_decode_common_prefix(bd_session_tokens(s), bd_session_length(s), prompt, n_prompt);
    if (keep > n_prompt - 1) keep = n_prompt - 1;
    if (keep > cap) keep = cap;
    if (keep < 0) keep = 0;
    if (!bd_session_truncate(s, keep)) {
        keep = 0;
        bd_session_truncate(s, 0);
    }
    BD_ASSERT(bd_session_length(s) == keep && bd_decode_common_prefix(bd_session_tokens(s), keep, prompt, keep) == keep);
    return keep;
}

void bd_decode_finish_stats(bd_gen_stats *st) {
    int32_t fwd = st->n_prompt - st->n_prompt_cached;
    st->prompt_tps = st->prompt_ms > 0 ? 1e3 * fwd / st->prompt_ms : 0;
    st->gen_tps = st->gen_ms > 0 ? 1e3 * st->n_gen / st->gen_ms : 0;
    st->spec.tau = st->spec.target_forwards ? (double)st->n_gen / (double)st->spec.target_forwards : 0;
}

bool bd_generate(bd_session *s, const int32_t *prompt, int32_t n_prompt, const bd_gen_params *gp,
                 bd_token_cb cb, void *user, bd_gen_stats *st, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    snprintf(st->spec.type, sizeof st->spec.type, "none");
    if (n_prompt < 1) return bd_err(err, errlen, "generate: the prompt is empty");
    if (n_prompt >= s->n_ctx)
        return bd_err(err, errlen, "generate: prompt of %d tokens does not fit the context (%d)", n_prompt,
                      s->n_ctx);
    bd_sampler *smp = bd_sampler_create(&gp->sampling, s->m->hp.n_vocab);
    if (!smp) return bd_err(err, errlen, "generate: out of memory");
    /* grammar hook (grammar.h): NULL without a grammar, then a no-op */
    bd_grammar_run *gr = NULL;
    if (gp->grammar && !(gr = bd_grammar_run_create(gp->grammar, s->m->hp.n_vocab, gp->ignore_eog, err, errlen))) {
        bd_sampler_free(smp);
        return false;
    }
    int32_t keep = bd_decode_reuse_prefix(s, prompt, n_prompt, n_prompt);

    double t0 = bd_time_ms();
    bool ok = bd_session_forward(s, prompt + keep, n_prompt - keep, BD_LOGITS_LAST, err, errlen);
    double t1 = bd_time_ms();
    st->n_prompt = n_prompt;
    st->n_prompt_cached = keep;
    st->prompt_ms = t1 - t0;
    int32_t n_gen = 0;
    while (ok) {
        /* the cache holds exactly the history: prompt + every emitted token */
        BD_ASSERT(bd_session_length(s) == n_prompt + n_gen);
        const float *lg = bd_grammar_run_logits(gr, bd_session_logits(s, 0)); /* grammar hook */
        if (!lg) {
            ok = bd_grammar_run_end(gr, st, err, errlen);
            break;
        }
        int32_t tok = bd_sampler_sample(smp, lg, bd_session_tokens(s), bd_session_length(s));
        if (!bd_grammar_run_accept(gr, tok)) { /* grammar hook */
            ok = bd_grammar_run_end(gr, st, err, errlen);
            break;
        }
        if (!gp->ignore_eog && bd_token_is_eog(s->m, tok)) {
            st->stopped_eog = true;
            break;
        }
        n_gen++;
        if (gp->on_logits) gp->on_logits(tok, bd_session_logits(s, 0), s->m->hp.n_vocab, user);
        bool go_on = cb ? cb(tok, user) : true;
        if (!go_on || (gp->n_predict >= 0 && n_gen >= gp->n_predict)) break;
        if (bd_session_length(s) >= s->n_ctx) break;
        ok = bd_session_forward(s, &tok, 1, BD_LOGITS_LAST, err, errlen);
        st->spec.target_forwards++;
    }
    st->gen_ms = bd_time_ms() - t1;
    st->n_gen = n_gen;
    st->spec.target_forwards += 1; /* the prompt forward produced the first token */
    bd_decode_finish_stats(st);
    bd_sampler_free(smp);
    bd_grammar_run_free(gr);
    return ok;
}
