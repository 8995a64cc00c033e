/*
 * grammar_run.c - the grammar hook of the generation loops (grammar.h).
 *
 * One run per generation: the current grammar state, a masked copy of the
 * logits, and a small cache of masks by state (a long string or a
 * repeated structure revisits the same state every token, and states are
 * canonical, so a cached mask is exact). Everything is allocated at
 * create; the hooks do not allocate (the grammar's own tables are fixed
 * capacity, see grammar.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_int.h"

#define RUN_CACHE 8

bool bd_grammar_test_stale_rows = false;

struct bd_grammar_run {
    bd_grammar *g;
    bd_grammar_state state;
    int32_t n_vocab;
    bool ignore_eog;
    float *logits;          /* [n_vocab] masked copy */
    uint32_t *bits[RUN_CACHE];
    bd_grammar_state key[RUN_CACHE];
    int32_t count[RUN_CACHE];
    uint64_t used[RUN_CACHE];
    uint64_t tick;
    bool ended;             /* complete, nothing else allowed */
    bool failed;
    char err[320];
};

bd_grammar_run *bd_grammar_run_create(bd_grammar *g, int32_t n_vocab, bool ignore_eog, char *err, size_t errlen) {
    if (!g) return NULL;
    const bd_grammar_vocab *v = bd_grammar_vocab_of(g);
    if (!v) {
        bd_err(err, errlen, "grammar: created without a vocabulary, cannot constrain generation");
        return NULL;
    }
    if (bd_grammar_vocab_n_vocab(v) != n_vocab) {
        bd_err(err, errlen, "grammar: built for a vocabulary of %d tokens, the model has %d",
               bd_grammar_vocab_n_vocab(v), n_vocab);
        return NULL;
    }
    bd_grammar_run *r = calloc(1, sizeof *r);
    if (!r) goto oom;
    r->g = g;
    r->state = bd_grammar_start(g);
    r->n_vocab = n_vocab;
    r->ignore_eog = ignore_eog;
    r->logits = malloc((size_t)n_vocab * sizeof *r->logits);
    if (!r->logits) goto oom;
    for (int i = 0; i < RUN_CACHE; i++) {
        r->bits[i] = malloc((size_t)((n_vocab + 31) / 32) * sizeof *r->bits[i]);
        if (!r->bits[i]) goto oom;
        r->key[i].id = BD_GRAMMAR_DEAD;
    }
    return r;
oom:
    bd_grammar_run_free(r);
    bd_err(err, errlen, "grammar: out of memory");
    return NULL;
}

void bd_grammar_run_free(bd_grammar_run *r) {
    if (!r) return;
    free(r->logits);
    for (int i = 0; i < RUN_CACHE; i++) free(r->bits[i]);
    free(r);
}

static bool run_fail(bd_grammar_run *r, const char *msg) {
    r->failed = true;
    snprintf(r->err, sizeof r->err, "%s", msg);
    return false;
}

/* Mask of the current state, cached; -1 on error. */
static int32_t run_mask(bd_grammar_run *r, const uint32_t **bits) {
    r->tick++;
    int victim = 0;
    for (int i = 0; i < RUN_CACHE; i++) {
        if (r->key[i].id == r->state.id && r->key[i].utf8 == r->state.utf8) {
            r->used[i] = r->tick;
            *bits = r->bits[i];
            return r->count[i];
        }
        if (r->used[i] < r->used[victim]) victim = i;
    }
    int32_t n = bd_grammar_mask(r->g, r->state, r->bits[victim]);
    if (n < 0) {
        r->key[victim].id = BD_GRAMMAR_DEAD;
        return -1;
    }
    r->key[victim] = r->state;
    r->count[victim] = n;
    r->used[victim] = r->tick;
    *bits = r->bits[victim];
    return n;
}

const float *bd_grammar_run_logits(bd_grammar_run *r, const float *logits) {
    if (!r) return logits;
    if (r->failed || r->ended) return NULL;
    const uint32_t *bits;
    int32_t n = run_mask(r, &bits);
    if (n < 0) return run_fail(r, bd_grammar_error(r->g)), NULL;
    bool complete = bd_grammar_is_complete(r->g, r->state);
    if (n == 0) {
        if (complete) {
            r->ended = true;
            return NULL;
        }
        return run_fail(r, "grammar: no token of the vocabulary can continue the text here"), NULL;
    }
    float *out = r->logits;
    int32_t V = r->n_vocab;
    for (int32_t w = 0; w < V / 32; w++) {
        uint32_t b = bits[w];
        const float *in = logits + 32 * w;
        float *o = out + 32 * w;
        if (b == 0xFFFFFFFFu) {
            memcpy(o, in, 32 * sizeof *o);
        } else if (b == 0) {
            for (int k = 0; k < 32; k++) o[k] = -INFINITY;
        } else {
            for (int k = 0; k < 32; k++) o[k] = b >> k & 1 ? in[k] : -INFINITY;
        }
    }
    for (int32_t t = V / 32 * 32; t < V; t++) out[t] = bits[t >> 5] >> (t & 31) & 1 ? logits[t] : -INFINITY;
    if (complete && !r->ignore_eog) {
        int32_t ne;
        const int32_t *eog = bd_grammar_vocab_eog(bd_grammar_vocab_of(r->g), &ne);
        for (int32_t i = 0; i < ne; i++) out[eog[i]] = logits[eog[i]];
    }
    return out;
}

bool bd_grammar_run_accept(bd_grammar_run *r, int32_t token) {
    if (!r) return true;
    if (r->failed) return false;
    bd_grammar_state s = bd_grammar_advance_token(r->g, r->state, token);
    if (s.id == BD_GRAMMAR_ERROR) return run_fail(r, bd_grammar_error(r->g));
    if (s.id < 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "grammar: token %d is not allowed here (internal error)", token);
        return run_fail(r, msg);
    }
    r->state = s;
    return true;
}

bool bd_grammar_run_end(bd_grammar_run *r, bd_gen_stats *st, char *err, size_t errlen) {
    if (!r) return bd_err(err, errlen, "grammar: no run");
    if (r->failed) return bd_err(err, errlen, "%s", r->err);
    if (st) st->stopped_eog = true;
    return true;
}

bool bd_grammar_run_stopped(const bd_grammar_run *r) { return r && (r->ended || r->failed); }

bd_grammar_state bd_grammar_run_state(const bd_grammar_run *r) {
    bd_grammar_state s = {BD_GRAMMAR_DEAD, 0};
    return r ? r->state : s;
}
