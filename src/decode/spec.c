/*
 * spec.c - speculative decoding: draft -> verify -> accept -> roll back.
 *
 * One verify/accept/rollback path serves three drafters:
 *   draft-dflash  DFlash block drafter fed with the target's tapped layer
 *                 inputs (model/dflash.c)
 *   draft-simple  a small autoregressive model sharing the vocabulary
 *   ngram-simple  prompt lookup over the token history
 *
 * Invariants (dflash.md §4): the target KV holds every committed token
 * except the anchor (the last emitted token); a verify forward runs
 * [anchor, d1..dn] at positions P..P+n; with a drafts accepted the KV is
 * truncated to P+a+1 and the DFlash context gains the features of verify
 * rows 0..a.
 *
 * Acceptance (dflash.md §5): greedy accepts d_j iff it is the argmax of
 * verify row j-1. With sampling, d_j is accepted with probability p_j(d_j)
 * under the exact distribution plain sampling would use; on rejection the
 * token is drawn from p_j with d_j removed. Either way every emitted token
 * is distributed exactly as in plain decoding; with sampling the tokens
 * are even the ones plain decoding draws from the same seed (accept_row).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "grammar.h"
#include "sampler.h"
#include "spec_internal.h"
#include "../model/dflash.h"
#include "../model/pairing.h"
#include "../model/model.h"
#include "../tensor/kernels.h"

#define SPEC_MAX_DRAFT 63
#define ADAPT_BETA 0.15      /* EMA weight of one observation */
#define ADAPT_PROBE_EVERY 16 /* plain steps between re-probing the drafter */
#define ADAPT_PROBE_MAX 256  /* ... doubling after each failed probe, up to this */
/* a probe's loss against plain steps: at most this share of their time (at
 * 2 % the 8-layer MoE pair, a drafter pass worth ~1.5 plain tokens, paid
 * two probes in a never-right run of 128 tokens on top of its warm-up) */
#define ADAPT_PROBE_SHARE 0.01
#define ADAPT_WARMUP 2       /* draft length of the first step */
#define ADAPT_WARMUP_LOSS 0.5 /* share of the warm-up's time counted as a probe's (adapt_observe) */
#define ADAPT_REACH 4        /* a draft at most this times the furthest observed position */
#define ADAPT_MARGIN 0.05    /* a draft's estimated rate must beat plain's by this share */
#define ADAPT_FIT_WEIGHT 8   /* most weight of one draft length in the DFlash cost line */
#define ADAPT_CARRY_N 1      /* observations an estimate carried to the next generation counts as */
#define SPEC_PEND 256        /* plain-step features held back from the drafter, at most */

struct bd_spec {
    bd_spec_params p;
    bd_session *t;          /* target session (borrowed, or owned: owns_t) */
    bool owns_t;            /* created by bd_spec_open */
    bd_model *dm;           /* draft model (borrowed; NULL for ngram) */
    bd_dflash *df;          /* draft-dflash state */
    bd_session *ds;         /* draft-simple session */
    int32_t d_valid;        /* draft-simple: leading cache rows equal to the history */
    int32_t n_max;          /* effective max draft length */
    int32_t n_max_created;  /* ... as bd_spec_create set it */
    int32_t n_max_limit;    /* the most n_max can be (drafter, session, exact verify rows) */
    int32_t *hist;          /* [n_ctx] committed tokens */
    int32_t n_hist;
    int32_t batch[SPEC_MAX_DRAFT + 1];
    int32_t drafts[SPEC_MAX_DRAFT];
    /* adaptive draft length */
    double alpha[SPEC_MAX_DRAFT + 1];  /* P(accept pos i | accepted pos i-1) */
    int32_t alpha_n[SPEC_MAX_DRAFT + 1]; /* observations behind alpha[i] */
    double cost[SPEC_MAX_DRAFT + 1];   /* EMA ms of one step drafting n (0 = plain) */
    double vcost[SPEC_MAX_DRAFT + 1];  /* ... of its verify forward alone */
    int32_t cost_n[SPEC_MAX_DRAFT + 1];
    int32_t plain_run;
    int32_t probe_every;    /* plain steps before the next probe (backs off) */
    double probe_ms;        /* the last drafting step's time ... */
    int32_t probe_tokens;   /* ... and the tokens it emitted (0: none yet) */
    int32_t step_no;
    /* draft-dflash with an adaptive block (BD_DFLASH_BLOCK_AUTO): the
     * same estimates for steps run with a short block [anchor, MASK x n]
     * (s_cost: whole steps; index 0 unused, plain steps live in cost[0]) */
    double s_alpha[SPEC_MAX_DRAFT + 1];
    int32_t s_alpha_n[SPEC_MAX_DRAFT + 1];
    double s_cost[SPEC_MAX_DRAFT + 1];
    int32_t s_cost_n[SPEC_MAX_DRAFT + 1];
    int32_t s_provisional;  /* short length whose next time replaces its cost (a warm-up's), or -1 */
    bool pick_short;        /* adapt_pick chose a short block for this step */
    bool step_short;        /* this step's draft ran a short block */
    /* draft-dflash: target features of plain steps not yet given to the
     * drafter ([pend_cap][n_taps * n_embd]), rows hist[n_rows ..]. They
     * are appended in one batch before the next draft (or when pend_cap
     * are held): a run of plain steps reads the drafter's context weights
     * once per batch instead of once per token, and a generation that
     * ends before its next draft never appends them (the next one does,
     * where its prompt repeats them: spec_reset) */
    float *pend;
    int32_t n_pend;
    int32_t pend_cap;       /* min(SPEC_PEND, the session's n_batch) */
    int64_t pend_row;       /* floats per row */
    double flush_ms;        /* time spent appending held-back rows (spec_flush_pending) */
    int32_t cost_provisional; /* n whose next time replaces its cost (the warm-up's length; 0 after a stale plain time), or -1 */
    bool forget;            /* bd_spec_forget: the next generation starts fresh */
    int32_t n_learned;      /* steps observed since the state was last fresh */
    bool carry_probe;       /* a carried generation's first plain pick probes instead */
    bd_spec_trace_fn trace;
    void *trace_user;
};

void bd_spec_set_trace(bd_spec *sp, bd_spec_trace_fn fn, void *user) {
    sp->trace = fn;
    sp->trace_user = user;
}

bd_spec_params bd_spec_default_params(void) {
    bd_spec_params p = {.type = BD_SPEC_NONE, .n_max = 0, .n_min = 0, .p_min = 0.0f, .adaptive = false,
                        .ngram_n = 3};
    return p;
}

bool bd_spec_adaptive_default(bd_spec_type t) { return t == BD_SPEC_DRAFT_DFLASH; }

const char *bd_spec_type_name(bd_spec_type t) {
    switch (t) {
    case BD_SPEC_DRAFT_DFLASH: return "draft-dflash";
    case BD_SPEC_DRAFT_SIMPLE: return "draft-simple";
    case BD_SPEC_NGRAM_SIMPLE: return "ngram-simple";
    default: return "none";
    }
}

bool bd_spec_type_parse(const char *s, bd_spec_type *out) {
    static const bd_spec_type all[] = {BD_SPEC_NONE, BD_SPEC_DRAFT_DFLASH, BD_SPEC_DRAFT_SIMPLE,
                                       BD_SPEC_NGRAM_SIMPLE};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(s, bd_spec_type_name(all[i]))) {
            *out = all[i];
            return true;
        }
    return false;
}

bd_spec_type bd_spec_type_for_draft(const bd_model *draft) {
    return draft->arch == BD_ARCH_DFLASH ? BD_SPEC_DRAFT_DFLASH : BD_SPEC_DRAFT_SIMPLE;
}

bool bd_dflash_check_pair(const bd_model *target, const bd_model *draft, char *err, size_t errlen) {
    bd_pairing_report rep;
    bd_pairing_report_init(&rep);
    return bd_pairing_run(target->gguf, draft->gguf, &rep, NULL, err, errlen);
}

int32_t bd_dflash_tap_layers(const bd_model *draft, int32_t *layers, int32_t max) {
    if (draft->arch != BD_ARCH_DFLASH) return 0;
    int32_t n = draft->dflash.n_target_layers;
    if (n > max) return -n; /* nothing written */
    for (int32_t i = 0; i < n; i++) layers[i] = draft->dflash.target_layers[i];
    return n;
}

int32_t bd_spec_n_max(const bd_spec *sp) { return sp->n_max; }

void bd_spec_set_draft_limits(bd_spec *sp, int32_t *n_max, int32_t *n_min, float *p_min) {
    int32_t nm = *n_max <= 0 ? sp->n_max_created : *n_max;
    if (nm > sp->n_max_limit) nm = sp->n_max_limit;
    if (nm < 1) nm = 1;
    sp->n_max = nm;
    int32_t mn = *n_min < 0 ? 0 : *n_min > nm ? nm : *n_min;
    sp->p.n_min = mn;
    float pm = *p_min;
    sp->p.p_min = pm >= 0.0f && pm <= 1.0f ? pm : pm > 1.0f ? 1.0f : 0.0f; /* NaN -> 0 */
    *n_max = sp->n_max;
    *n_min = sp->p.n_min;
    *p_min = sp->p.p_min;
}

bd_spec *bd_spec_create(bd_session *t, bd_model *dm, const bd_spec_params *p, char *warn, size_t warnlen,
                        char *err, size_t errlen) {
    if (warn && warnlen) warn[0] = '\0';
    bd_spec *sp = calloc(1, sizeof *sp);
    if (!sp) {
        bd_err(err, errlen, "out of memory");
        return NULL;
    }
    sp->p = *p;
    sp->t = t;
    sp->dm = dm;
    sp->hist = malloc((size_t)t->n_ctx * sizeof *sp->hist);
    if (!sp->hist) {
        bd_err(err, errlen, "out of memory");
        goto fail;
    }
    int32_t limit = SPEC_MAX_DRAFT;
    int32_t def = 3; /* llama.cpp's --spec-draft-n-max default */
    switch (p->type) {
    case BD_SPEC_DRAFT_DFLASH: {
        if (!dm) {
            bd_err(err, errlen, "draft-dflash needs a drafter model (-md)");
            goto fail;
        }
        sp->df = bd_dflash_create(dm, t->m, t->pool, t->n_ctx, t->n_batch, p->draft_type_k, p->draft_type_v, err,
                                  errlen);
        if (!sp->df) goto fail;
        int32_t K = bd_dflash_n_taps(sp->df);
        const int32_t *taps = bd_dflash_taps(sp->df);
        bool same = t->n_tap == K;
        for (int32_t i = 0; same && i < K; i++) same = t->tap_layers[i] == taps[i];
        if (!same) {
            bd_err(err, errlen, "the target session does not tap the layers the drafter reads");
            goto fail;
        }
        limit = bd_dflash_block_size(sp->df) - 1;
        sp->pend_row = (int64_t)bd_dflash_n_taps(sp->df) * t->m->hp.n_embd;
        sp->pend_cap = t->n_batch < SPEC_PEND ? t->n_batch : SPEC_PEND;
        sp->pend = malloc((size_t)sp->pend_cap * (size_t)sp->pend_row * sizeof(float));
        if (!sp->pend) {
            bd_err(err, errlen, "out of memory");
            goto fail;
        }
        def = limit; /* the reference always runs full blocks */
        break;
    }
    case BD_SPEC_DRAFT_SIMPLE: {
        if (!dm || dm->arch == BD_ARCH_DFLASH) {
            bd_err(err, errlen, "draft-simple needs an autoregressive draft model (-md)");
            goto fail;
        }
        if (dm->hp.n_vocab != t->m->hp.n_vocab || !dm->tok || !t->m->tok) {
            bd_err(err, errlen, "draft model vocabulary (%d) differs from the target's (%d)", dm->hp.n_vocab,
                   t->m->hp.n_vocab);
            goto fail;
        }
        for (int32_t i = 0; i < dm->hp.n_vocab; i++) {
            size_t la, lb;
            const char *a = bd_tokenizer_token_text(dm->tok, i, &la);
            const char *b = bd_tokenizer_token_text(t->m->tok, i, &lb);
            if (la != lb || (la && memcmp(a, b, la))) {
                bd_err(err, errlen, "draft model token %d differs from the target's: not the same tokenizer", i);
                goto fail;
            }
        }
        /* the draft session runs on the target's threads */
        bd_threadpool target_pool = {.pool = t->pool};
        bd_session_params dp = bd_session_default_params();
        dp.n_ctx = t->n_ctx;
        dp.n_batch = t->n_batch;
        dp.n_outputs = 1;
        /* a recurrent draft model rolls back over one step's forwards: the
         * catch-up (<= n_max + 1 rows) and n_max - 1 single drafts */
        dp.n_rollback = 2 * BD_MATMUL_EXACT_ROWS;
        dp.threadpool = &target_pool;
        dp.type_k = p->draft_type_k;
        dp.type_v = p->draft_type_v;
        sp->ds = bd_session_create(dm, &dp, err, errlen);
        if (!sp->ds) goto fail;
        break;
    }
    case BD_SPEC_NGRAM_SIMPLE:
        if (p->ngram_n < 1 || p->ngram_n > 64) {
            bd_err(err, errlen, "ngram size %d out of range [1, 64]", p->ngram_n);
            goto fail;
        }
        def = 8;
        break;
    default:
        bd_err(err, errlen, "speculation type 'none' needs no bd_spec");
        goto fail;
    }
    if (limit > t->n_out_max - 1) limit = t->n_out_max - 1;
    /* a verify batch must get bit-for-bit the logits of one-token decoding */
    if (limit > BD_MATMUL_EXACT_ROWS - 1) limit = BD_MATMUL_EXACT_ROWS - 1;
    sp->n_max = p->n_max > 0 ? p->n_max : def;
    if (sp->n_max > limit) {
        if (warn && p->n_max > 0)
            snprintf(warn, warnlen, "--spec-draft-n-max %d clamped to %d (%s)", p->n_max, limit,
                     p->type == BD_SPEC_DRAFT_DFLASH ? "block_size - 1" : "session limit");
        sp->n_max = limit;
    }
    if (sp->n_max < 1) {
        bd_err(err, errlen, "draft length limit is %d", sp->n_max);
        goto fail;
    }
    sp->n_max_created = sp->n_max;
    sp->n_max_limit = limit;
    return sp;
fail:
    bd_spec_free(sp);
    return NULL;
}

void bd_spec_free(bd_spec *sp) {
    if (!sp) return;
    bd_dflash_free(sp->df);
    bd_session_free(sp->ds);
    free(sp->pend);
    free(sp->hist);
    if (sp->owns_t) bd_session_free(sp->t);
    free(sp);
}

bd_session *bd_spec_session(bd_spec *sp) { return sp->t; }

bd_spec *bd_spec_open(bd_model *target, bd_model *draft, const bd_session_params *sp, const bd_spec_params *spp,
                      char *warn, size_t warnlen, char *err, size_t errlen) {
    if (warn && warnlen) warn[0] = '\0';
    if (!spp || spp->type == BD_SPEC_NONE) {
        bd_err(err, errlen, "speculation type 'none' needs no bd_spec");
        return NULL;
    }
    bd_session_params p = sp ? *sp : bd_session_default_params();
    int32_t taps[BD_MAX_TAPS];
    if (spp->type == BD_SPEC_DRAFT_DFLASH) {
        if (!draft || draft->arch != BD_ARCH_DFLASH) {
            bd_err(err, errlen, "draft-dflash needs a DFlash drafter model (-md)");
            return NULL;
        }
        /* the pair's fit first: a drafter tapping layers the target lacks
         * gets the gallery's message, not a session-level one */
        if (!bd_dflash_check_pair(target, draft, err, errlen)) return NULL;
        int32_t n = bd_dflash_tap_layers(draft, taps, BD_MAX_TAPS);
        if (n < 0) {
            bd_err(err, errlen, "the drafter taps %d layers (at most %d)", -n, BD_MAX_TAPS);
            return NULL;
        }
        p.n_tap = n;
        p.tap_layers = taps;
    }
    bd_session *t = bd_session_create(target, &p, err, errlen);
    if (!t) return NULL;
    bd_spec *x = bd_spec_create(t, draft, spp, warn, warnlen, err, errlen);
    if (!x) {
        bd_session_free(t);
        return NULL;
    }
    x->owns_t = true;
    return x;
}

/* ------------------------------------------------------------------------
 * Adaptive draft length
 *
 * Expected tokens per step when drafting n: E(n) = 1 + sum_{i<=n} prod_{j<=i}
 * alpha_j, where alpha_j estimates P(draft j accepted | drafts < j
 * accepted). Estimates start optimistic (1.0) and move as a running mean
 * for the first observations, then as an EMA, so a drafter that is never
 * right is detected within a few steps and one that always is gets long
 * drafts. Cost(n) is the measured wall time of a step drafting n (0 =
 * plain step); unmeasured n are interpolated linearly between measured
 * neighbours, and beyond the longest measured draft extrapolated with the
 * slope between the two longest measured drafts or, with one measured
 * draft, with the slope of the verify forwards alone for a DFlash drafter
 * (its pass is paid once per draft whatever its length; charged to every
 * drafted token it would make a slow drafter on a cheap verify look unable
 * to pay at any length) and of whole steps for the others. A DFlash
 * drafter with two or more measured lengths takes a line fitted to all of
 * them instead (adapt_fit_line), and below its shortest measured draft
 * with only one measured, that draft's pass plus the verify forwards
 * interpolated towards a plain step's. Pick the n with the best
 * E(n)/Cost(n), on estimates bounded for the step (bd_spec_adapt_bound):
 * past ADAPT_REACH times the furthest position observed every position
 * counts as never accepted, so a draft grows from the warm-up's 2 to 8 and
 * then to the full block rather than jumping there on untested optimism
 * (for a drafter right for 5, a full block of 15 is a 16-row verify and 15
 * head rows for 6 tokens), and a full block's untried positions are no
 * better than what a short block observed there. (The price of the last:
 * a full block that would be right where short blocks are wrong is not
 * tried there; a wasted full block is the larger risk on a CPU, where its
 * step costs many plain steps.)
 *
 * While plain steps win, a draft probes the drafter now and then, so a
 * drafter that starts agreeing is noticed. A probe drafts the length rated
 * best among drafts (one token for a drafter that has been wrong, a long
 * draft for one that has been right). The plain steps before the next
 * probe: ADAPT_PROBE_EVERY, doubling after each probe with nothing accepted
 * (up to ADAPT_PROBE_MAX), and always enough that the last probe's loss
 * against plain steps (its time minus its tokens' time at the plain rate)
 * is at most ADAPT_PROBE_SHARE of the plain steps' time (again up to
 * ADAPT_PROBE_MAX; the warm-up's loss counts with half its time, which
 * cold caches inflate): a drafter whose pass costs three target tokens
 * (MoE targets) is probed rarely, a cheap one often.
 *
 * The first step drafts min(n_max, ADAPT_WARMUP) as a warm-up (first
 * acceptance estimate, page faults of the drafter's weights: its time counts
 * only until a real measurement of that length replaces it). The second is a
 * plain step (the cost of not drafting). A later generation on the same
 * bd_spec skips both once an earlier one drafted: it starts from the
 * estimates and costs learned so far (adapt_carry). Plain steps hold their
 * features back from a DFlash drafter (SPEC_PEND rows at most) and hand them
 * over in one batch before the next draft; that batch's time is no step's
 * cost.
 *
 * A DFlash drafter's block (BD_DFLASH_BLOCK_AUTO) is picked the same way:
 * the trained block [anchor, MASK x (B - 1)] whatever n is, or a short one
 * [anchor, MASK x n], whose pass costs less (n + 1 rows through every
 * layer: at 16 rows the 4B drafter's pass is compute-bound, 60 ms against
 * 38 ms for 6 rows at avx2 on Zen 5) but whose drafts may be accepted less
 * often (its rows attend to fewer mask rows than in training). Each keeps
 * its own acceptance estimates and costs; what the short block has not
 * observed it takes from the full block (no better than its own last
 * observed position), what it has not measured it prices from the full
 * block's verify and a drafter pass scaled to its rows (optimistic, so
 * that it gets tried), and the better E(n)/Cost(n) wins, ties going to the
 * short block. The warm-up runs the full block, the reference.
 * ---------------------------------------------------------------------- */

/* A DFlash drafting step's cost as a line over its draft length, fitted
 * to every measured draft: the drafter's pass (step minus verify, the same
 * for every length) plus a + b n for the verify forward, by least squares
 * over the measured lengths weighted by their observation counts (at most
 * ADAPT_FIT_WEIGHT each). Per-length averages are noisy, and a noisy
 * figure for one more verify row can make a drafted token look free (the
 * 4B right-for-5 pair drafted 6 on 13 of 22 steps); one slope from all
 * drafts rises with n by construction. False (no fit) with fewer than two
 * measured lengths or a falling verify time (the warm-up's cold figure):
 * the per-length rule then. */
static bool adapt_fit_line(const double *cost, const double *vcost, const int32_t *cost_n, int32_t n_max,
                           int32_t *n_lengths, double *pass, double *va, double *vb) {
    double sw = 0, sn = 0, snn = 0, sv = 0, snv = 0, sp = 0;
    int32_t lengths = 0;
    for (int32_t i = 1; i <= n_max; i++) {
        if (!cost_n[i]) continue;
        const double w = cost_n[i] < ADAPT_FIT_WEIGHT ? cost_n[i] : ADAPT_FIT_WEIGHT;
        sw += w;
        sn += w * i;
        snn += w * i * i;
        sv += w * vcost[i];
        snv += w * i * vcost[i];
        sp += w * (cost[i] - vcost[i]);
        lengths++;
    }
    /* the pass's mean is there from one measured length on */
    *n_lengths = lengths;
    if (lengths > 0) *pass = sp / sw;
    if (lengths < 2) return false;
    const double b = (sw * snv - sn * sv) / (sw * snn - sn * sn);
    if (!(b >= 0)) return false;
    *va = (sv - b * sn) / sw;
    *vb = b;
    return true;
}

static bool adapt_split(const double *cost, const double *vcost, const int32_t *cost_n, int32_t n_max, int32_t n,
                        double *pass, double *verify);

/* Cost(n) (0 = a plain step). With vcost (a DFlash drafter): the drafter's
 * pass plus the verify of n + 1 rows (adapt_split), never an interpolation
 * of whole steps towards the plain step, which has no pass: with only the
 * warm-up's length (2) measured, that priced a full-block draft of 1 at
 * about half a pass, and the 9B never-right pair probed full blocks of 1
 * costing 2.2x a plain step each (seen at avx512 on Zen 5). */
static double adapt_cost(const double *cost, const double *vcost, const int32_t *cost_n, int32_t n_max, int32_t n) {
    double pass, verify;
    if (n > 0 && vcost && adapt_split(cost, vcost, cost_n, n_max, n, &pass, &verify)) return pass + verify;
    if (cost_n[n]) return cost[n];
    int32_t lo = -1, hi = -1;
    for (int32_t i = n - 1; i >= 0; i--)
        if (cost_n[i]) { lo = i; break; }
    for (int32_t i = n + 1; i <= n_max; i++)
        if (cost_n[i]) { hi = i; break; }
    if (lo >= 0 && hi >= 0) return cost[lo] + (cost[hi] - cost[lo]) * (n - lo) / (double)(hi - lo);
    if (lo >= 1) {
        /* beyond the longest measured draft: its cost plus the marginal cost
         * of a drafted token, taken between two measured draft lengths when
         * there are two, else between the plain step and the one (for a
         * DFlash drafter adapt_split runs this on the verify times alone) */
        int32_t lo2 = -1;
        for (int32_t i = lo - 1; i >= 1; i--)
            if (cost_n[i]) { lo2 = i; break; }
        double slope = -1;
        if (lo2 >= 1) slope = (cost[lo] - cost[lo2]) / (lo - lo2);
        else if (cost_n[0]) slope = (cost[lo] - cost[0]) / lo;
        if (slope >= 0) return cost[lo] + slope * (n - lo);
    }
    if (lo >= 0) return cost[lo];
    if (hi >= 0) return cost[hi];
    return 0;
}

/* The full block's drafter pass (step time less its verify forward) and
 * its verify forward of n + 1 rows, estimated apart: from the fitted line
 * (adapt_fit_line) when there is one, else the pass as the weighted mean
 * over measured lengths and the verify by adapt_cost's per-length rule on
 * the verify times alone (a step's total mixes the pass into an
 * interpolation towards the plain step, which has none). False when no
 * draft length is measured. */
static bool adapt_split(const double *cost, const double *vcost, const int32_t *cost_n, int32_t n_max, int32_t n,
                        double *pass, double *verify) {
    double va, vb;
    int32_t lengths;
    if (adapt_fit_line(cost, vcost, cost_n, n_max, &lengths, pass, &va, &vb)) {
        *verify = va + vb * n;
        return true;
    }
    if (lengths == 0) return false;
    if (*pass < 0) *pass = 0;
    *verify = adapt_cost(vcost, NULL, cost_n, n_max, n);
    return true;
}

/* A short-block step's cost as a line a + b n over its draft length: its
 * drafter pass grows with n too (n + 1 rows), so whole steps go on one
 * line, fitted by least squares to the measured lengths (weights as in
 * adapt_fit_line). A short step is a plain step's forward and more, so
 * the line starts at the plain step's time c0 or above: a fit below it
 * (noise between two close lengths), or a single measured length, gives
 * the line through c0 instead; b is never negative. */
static void adapt_short_line(const double *s_cost, const int32_t *s_cost_n, double c0, int32_t n_max, double *a,
                             double *b) {
    double sw = 0, sn = 0, snn = 0, sc = 0, snc = 0, d = 0;
    int32_t lengths = 0;
    for (int32_t i = 1; i <= n_max; i++) {
        if (!s_cost_n[i]) continue;
        const double w = s_cost_n[i] < ADAPT_FIT_WEIGHT ? s_cost_n[i] : ADAPT_FIT_WEIGHT;
        sw += w;
        sn += w * i;
        snn += w * i * i;
        sc += w * s_cost[i];
        snc += w * i * s_cost[i];
        d += w * i * (s_cost[i] - c0);
        lengths++;
    }
    if (lengths >= 2) {
        *b = (sw * snc - sn * sc) / (sw * snn - sn * sn);
        *a = (sc - *b * sn) / sw;
        if (*a >= c0 && *b >= 0) return;
    }
    *a = c0;
    *b = snn > 0 && d > 0 ? d / snn : 0;
}

/* Every draft length's estimated step cost, est[1..n_max] (adapt_cost). */
static void adapt_costs(const double *cost, const double *vcost, const int32_t *cost_n, int32_t n_max, double *est) {
    for (int32_t n = 1; n <= n_max; n++) est[n] = adapt_cost(cost, vcost, cost_n, n_max, n);
}

/* The best drafting rate E(n) / est[n] over n = 1..n_max (0 where the cost
 * is unknown), its length in *bdn (1 if none rates above 0). */
static double adapt_best_draft(const double *alpha, const double *est, int32_t n_max, int32_t *bdn) {
    double best = -1, e = 1.0, prod = 1.0;
    *bdn = 1;
    for (int32_t n = 1; n <= n_max; n++) {
        prod *= alpha[n];
        e += prod;
        double rate = est[n] > 0 ? e / est[n] : 0;
        if (rate > best) {
            best = rate;
            *bdn = n;
        }
    }
    return best;
}

/* The rate a draft must beat: a plain step's, ADAPT_MARGIN higher. The
 * estimates are noisy and were measured at other times (a VM's speed
 * drifts by 20 % between phases: the 4B never-right pair at avxvnni
 * drafted a full block of 3 at an estimated 1.01x plain's rate, priced
 * from a warm-up measured in a faster phase, and paid 263 ms against a
 * 70 ms plain step), and a losing draft costs more than a plain step
 * chosen at break-even does. */
static double adapt_plain_rate(const double *cost, const int32_t *cost_n) {
    return cost_n[0] ? (1.0 + ADAPT_MARGIN) / cost[0] : 0.0;
}

int32_t bd_spec_adapt_choose(const double *alpha, const double *cost, const double *vcost, const int32_t *cost_n,
                             int32_t n_max, int32_t *best_draft_n) {
    BD_ASSERT(n_max >= 1 && n_max <= SPEC_MAX_DRAFT);
    double est[SPEC_MAX_DRAFT + 1];
    int32_t bdn;
    adapt_costs(cost, vcost, cost_n, n_max, est);
    double rate = adapt_best_draft(alpha, est, n_max, &bdn);
    if (best_draft_n) *best_draft_n = bdn;
    return rate > adapt_plain_rate(cost, cost_n) ? bdn : 0;
}

int32_t bd_spec_adapt_choose_block(const double *alpha, const double *cost, const double *vcost,
                                   const int32_t *cost_n, const double *s_alpha, const int32_t *s_alpha_n,
                                   const double *s_cost, const int32_t *s_cost_n, int32_t n_max, int32_t block,
                                   int force, int32_t *best_draft_n, bool *short_block, double *est_cost) {
    BD_ASSERT(n_max >= 1 && n_max <= SPEC_MAX_DRAFT);
    double est_f[SPEC_MAX_DRAFT + 1], est_s[SPEC_MAX_DRAFT + 1], a_s[SPEC_MAX_DRAFT + 1];
    adapt_costs(cost, vcost, cost_n, n_max, est_f);
    bool measured = false, full_measured = false;
    for (int32_t n = 1; n <= n_max; n++) {
        measured |= s_cost_n[n] > 0;
        full_measured |= cost_n[n] > 0;
    }
    if (measured) {
        /* never above the full block's estimate, whose work a short
         * block's is a part of -- once a full block has been measured:
         * before that adapt_cost prices every length at a plain step, and
         * a forced-short run whose warm-up was rejected at its first
         * token drafted 15 next (seen on the MoE pair) */
        double a, b;
        adapt_short_line(s_cost, s_cost_n, cost_n[0] ? cost[0] : 0, n_max, &a, &b);
        for (int32_t n = 1; n <= n_max; n++) {
            est_s[n] = a + b * n;
            if (full_measured && est_f[n] > 0 && est_f[n] < est_s[n]) est_s[n] = est_f[n];
        }
    } else {
        /* nothing measured on a short block yet: the full block's verify
         * of n + 1 rows and its drafter pass scaled to n + 1 of the block's
         * rows. Optimistic (a pass over few rows is partly memory-bound),
         * so a short block that could pay gets tried and measured; priced
         * as a full block it was not: the MoE right-for-5 pair at avx2
         * (full block n = 5 just under plain's rate, short n = 5 at 1.35x
         * it) decoded plain for 48 steps until a probe, 0.94x plain. Never
         * above the full block's estimate, never below a plain step. */
        double pass, verify;
        for (int32_t n = 1; n <= n_max; n++) {
            est_s[n] = est_f[n];
            if (block > 0 && n + 1 < block && adapt_split(cost, vcost, cost_n, n_max, n, &pass, &verify)) {
                double e = verify + pass * (double)(n + 1) / block;
                if (cost_n[0] && e < cost[0]) e = cost[0];
                if (e < est_s[n] || est_s[n] <= 0) est_s[n] = e;
            }
        }
    }
    /* a position the short block has not reached takes the full block's
     * estimate, capped by the short block's own estimate before it */
    bool seen = false;
    a_s[0] = 1.0;
    for (int32_t i = 1; i <= n_max; i++) {
        a_s[i] = s_alpha_n[i] ? s_alpha[i] : alpha[i];
        if (!s_alpha_n[i] && seen && a_s[i] > a_s[i - 1]) a_s[i] = a_s[i - 1];
        seen |= s_alpha_n[i] > 0;
    }
    int32_t bdn_f = 1, bdn_s = 1;
    double rate_f = force == 1 ? -1 : adapt_best_draft(alpha, est_f, n_max, &bdn_f);
    double rate_s = force == 0 ? -1 : adapt_best_draft(a_s, est_s, n_max, &bdn_s);
    /* ties go to the short block: it is the one still to be measured */
    bool s = rate_s >= rate_f;
    int32_t bdn = s ? bdn_s : bdn_f;
    *short_block = s;
    if (best_draft_n) *best_draft_n = bdn;
    if (est_cost) *est_cost = s ? est_s[bdn] : est_f[bdn];
    return (s ? rate_s : rate_f) > adapt_plain_rate(cost, cost_n) ? bdn : 0;
}

bool bd_spec_plain_stale(const double *cost, const double *vcost, const int32_t *cost_n, int32_t n_max, int32_t n) {
    return n > 0 && cost_n[0] > 0 && adapt_cost(cost, vcost, cost_n, n_max, n) < cost[0];
}

int32_t bd_spec_probe_gap(int32_t backoff, double probe_ms, int32_t probe_tokens, double plain_ms) {
    int32_t gap = backoff;
    if (plain_ms <= 0 || probe_tokens <= 0) return gap;
    double loss = probe_ms - probe_tokens * plain_ms;
    if (loss <= 0) return gap;
    double g = ceil(loss / (ADAPT_PROBE_SHARE * plain_ms));
    if (g > ADAPT_PROBE_MAX) g = ADAPT_PROBE_MAX;
    return g > gap ? (int32_t)g : gap;
}

int32_t bd_spec_adapt_bound(double *alpha, const int32_t *alpha_n, double *s_alpha, const int32_t *s_alpha_n,
                            int32_t n_max) {
    int32_t far = 0;
    for (int32_t i = 1; i <= n_max; i++) {
        bool s_seen = s_alpha && s_alpha_n[i] > 0;
        if (alpha_n[i] > 0 || s_seen) far = i;
        if (alpha_n[i] == 0 && s_seen && s_alpha[i] < alpha[i]) alpha[i] = s_alpha[i];
        if (i > 1 && alpha_n[i] == 0 && alpha[i] > alpha[i - 1]) alpha[i] = alpha[i - 1];
    }
    int32_t reach = far == 0 || far > n_max / ADAPT_REACH ? n_max : ADAPT_REACH * far;
    for (int32_t i = reach + 1; i <= n_max; i++) {
        alpha[i] = 0;
        if (s_alpha) s_alpha[i] = 0;
    }
    return reach;
}

void bd_spec_adapt_learn(double *alpha, int32_t *alpha_n, const double *other, int32_t n_max, bool cap_unreached,
                         int32_t n_drafted, int32_t n_acc) {
    for (int32_t i = 1; i <= n_drafted && i <= n_acc + 1; i++) {
        double obs = i <= n_acc ? 1.0 : 0.0;
        /* a first observation starts from the other block's estimate when
         * that is lower: both blocks draft for the same target, and with a
         * prior of 1.0 the 4B never-right pair at avx512 drafted one-token
         * short blocks after a rejected warm-up and a rejected short block
         * (alpha(1) = 0.5 on the short block's one observation) */
        if (alpha_n[i] == 0 && other && other[i] < alpha[i]) alpha[i] = other[i];
        double beta = 1.0 / (alpha_n[i] + 2);
        if (beta < ADAPT_BETA) beta = ADAPT_BETA;
        alpha[i] += beta * (obs - alpha[i]);
        alpha_n[i]++;
    }
    /* positions never reached yet are assumed no better than the last one
     * observed before them: optimism only where nothing says otherwise
     * (the short block's unreached positions: bd_spec_adapt_choose_block) */
    for (int32_t j = 2; j <= n_max && cap_unreached; j++)
        if (alpha_n[j] == 0 && alpha[j] > alpha[j - 1]) alpha[j] = alpha[j - 1];
}

static int32_t adapt_pick(bd_spec *sp) {
    sp->step_no++;
    /* a short warm-up draft, then one plain step. Short: a drafter that is
     * never right should cost a small verify, not a full block. Not one
     * token: a 2-row verify costs ~1.8x one row on CPUs (4B, Zen 5), 5 rows
     * ~2.2x, 16 rows ~4.6x, so the slope from a one-token draft charges each
     * drafted token three times its share and a right drafter stays plain
     * until the next probe (4B always-right 2.29x -> 1.97x: tried). Two
     * tokens, not four: past the first drafted row a verify grows about
     * linearly (4B at avxvnni: t(3) 1.57x, t(5) 2.12x one row), so two give
     * the slope as well, and the MoE pair's never-right warm-up fell from
     * ~120 to ~88 ms (verify t(3) against t(5)), ~1 % of 128 tokens. (Skipping
     * the plain step after an accepted warm-up raises tau on an always-right
     * drafter, but then a drafter that is right yet too slow to pay --
     * stories260K -- is never found out: tried and measured.) */
    sp->pick_short = sp->df && sp->p.dflash_block == BD_DFLASH_BLOCK_SHORT;
    if (sp->step_no == 1) return sp->n_max < ADAPT_WARMUP ? sp->n_max : ADAPT_WARMUP;
    if (sp->step_no == 2) return 0;
    int32_t best_draft_n, n;
    bool stale;
    /* this step's estimates, bounded where nothing was observed */
    double alpha[SPEC_MAX_DRAFT + 1], s_alpha[SPEC_MAX_DRAFT + 1];
    memcpy(alpha, sp->alpha, sizeof alpha);
    memcpy(s_alpha, sp->s_alpha, sizeof s_alpha);
    bd_spec_adapt_bound(alpha, sp->alpha_n, sp->df ? s_alpha : NULL, sp->s_alpha_n, sp->n_max);
    if (sp->df && sp->p.dflash_block != BD_DFLASH_BLOCK_FULL) {
        /* the block's length is picked too (auto), or always short */
        double est;
        int force = sp->p.dflash_block == BD_DFLASH_BLOCK_SHORT ? 1 : -1;
        n = bd_spec_adapt_choose_block(alpha, sp->cost, sp->vcost, sp->cost_n, s_alpha, sp->s_alpha_n,
                                       sp->s_cost, sp->s_cost_n, sp->n_max, bd_dflash_block_size(sp->df), force,
                                       &best_draft_n,
                                       &sp->pick_short, &est);
        stale = n > 0 && sp->cost_n[0] > 0 && est < sp->cost[0];
    } else {
        /* a DFlash pass costs the same for every draft length; a draft
         * model's autoregressive drafting grows with it: whole steps'
         * slope there */
        const double *vcost = sp->df ? sp->vcost : NULL;
        n = bd_spec_adapt_choose(alpha, sp->cost, vcost, sp->cost_n, sp->n_max, &best_draft_n);
        stale = bd_spec_plain_stale(sp->cost, vcost, sp->cost_n, sp->n_max, n);
    }
    if (stale) {
        /* re-measure plain: the next plain step's time replaces cost[0]
         * (seen on a 39 MB target: one 10x plain step, then 45 one-token
         * drafts in a row against a drafter that was never right) */
        if (sp->cost_provisional < 0) sp->cost_provisional = 0;
        sp->plain_run = 0;
        return 0;
    }
    if (n == 0 && sp->carry_probe) {
        sp->carry_probe = false;
        sp->plain_run = 0;
        return best_draft_n;
    }
    sp->carry_probe = false;
    if (n == 0) {
        if (++sp->plain_run >= bd_spec_probe_gap(sp->probe_every, sp->probe_ms, sp->probe_tokens,
                                                 sp->cost_n[0] ? sp->cost[0] : 0)) {
            sp->plain_run = 0;
            return best_draft_n;
        }
        return 0;
    }
    sp->plain_run = 0;
    return n;
}

/* One step's observation: n_drafted drafts, n_acc accepted, ms for the whole
 * step, vms of it in the verify forward. */
static void adapt_observe(bd_spec *sp, int32_t n_drafted, int32_t n_acc, double ms, double vms) {
    sp->n_learned++;
    if (n_drafted > 0) {
        sp->probe_every = n_acc > 0                              ? ADAPT_PROBE_EVERY
                          : 2 * sp->probe_every > ADAPT_PROBE_MAX ? ADAPT_PROBE_MAX
                                                                  : 2 * sp->probe_every;
        /* the warm-up is a probe too, but its time overstates one (in the
         * first run of a process: cold caches, first touch of scratch
         * buffers, twice a later draft's time): its loss counts at
         * ADAPT_WARMUP_LOSS of its time. Not counted at all, a pair whose
         * drafter pass is worth several plain tokens (the 8-layer MoE pair
         * at avx2: a ~100 ms warm-up against 20 ms plain steps) probed
         * again after 32 plain steps, ~1.4 % of a never-right run */
        sp->probe_ms = sp->step_no == 1 ? ADAPT_WARMUP_LOSS * ms : ms;
        sp->probe_tokens = n_acc + 1;
    }
    /* a short block's acceptance and cost are its own: a shorter block
     * changes what the drafter's rows attend to */
    if (sp->step_short)
        bd_spec_adapt_learn(sp->s_alpha, sp->s_alpha_n, sp->alpha, sp->n_max, false, n_drafted, n_acc);
    else
        bd_spec_adapt_learn(sp->alpha, sp->alpha_n, sp->s_alpha, sp->n_max, true, n_drafted, n_acc);
    if (sp->step_short) {
        /* (a warm-up's time, cold, only until the next of its length) */
        bool replace = sp->s_provisional == n_drafted;
        if (sp->s_cost_n[n_drafted] && !replace)
            sp->s_cost[n_drafted] += ADAPT_BETA * (ms - sp->s_cost[n_drafted]);
        else
            sp->s_cost[n_drafted] = ms;
        sp->s_cost_n[n_drafted]++;
        if (replace) sp->s_provisional = -1;
        if (sp->step_no == 1) sp->s_provisional = n_drafted;
        return;
    }
    /* The warm-up step's time (page faults, cold caches) is kept only as a
     * provisional figure until the first real measurement replaces it. */
    if (sp->step_no == 1) {
        sp->cost[n_drafted] = ms;
        sp->vcost[n_drafted] = vms;
        sp->cost_n[n_drafted] = 1;
        sp->cost_provisional = n_drafted;
        return;
    }
    if (sp->cost_provisional == n_drafted) {
        sp->cost_provisional = -1;
        sp->cost[n_drafted] = ms;
        sp->vcost[n_drafted] = vms;
        return;
    }
    if (sp->cost_n[n_drafted]) {
        sp->cost[n_drafted] += ADAPT_BETA * (ms - sp->cost[n_drafted]);
        sp->vcost[n_drafted] += ADAPT_BETA * (vms - sp->vcost[n_drafted]);
    } else {
        sp->cost[n_drafted] = ms;
        sp->vcost[n_drafted] = vms;
    }
    sp->cost_n[n_drafted]++;
}

/* ------------------------------------------------------------------------
 * Drafters
 * ---------------------------------------------------------------------- */

static int32_t draft_ngram(bd_spec *sp, int32_t n, int32_t *out) {
    int32_t N = sp->p.ngram_n, H = sp->n_hist;
    if (H <= N) return 0;
    const int32_t *key = sp->hist + H - N;
    for (int32_t s = H - N - 1; s >= 0; s--) {
        if (memcmp(sp->hist + s, key, (size_t)N * sizeof *key) != 0) continue;
        int32_t k = 0;
        while (k < n && s + N + k < H) {
            out[k] = sp->hist[s + N + k];
            k++;
        }
        return k;
    }
    return 0;
}

static bool draft_simple(bd_spec *sp, int32_t n, int32_t *out, int32_t *n_out, char *err, size_t errlen) {
    bd_session *ds = sp->ds;
    int32_t keep = sp->d_valid < bd_session_length(ds) ? sp->d_valid : bd_session_length(ds);
    if (keep >= sp->n_hist) keep = sp->n_hist - 1; /* always re-run the anchor for its logits */
    if (!bd_session_truncate(ds, keep)) {
        /* a recurrent draft model keeps only the rows since its last
         * checkpoint (set below, every step); should that ever not reach,
         * start over: slow, never wrong */
        bd_session_truncate(ds, 0);
        keep = 0;
    }
    bd_session_checkpoint(ds);
    /* catch up on committed tokens, anchor included, in one batch */
    if (!bd_session_forward(ds, sp->hist + keep, sp->n_hist - keep, BD_LOGITS_LAST, err, errlen)) return false;
    sp->d_valid = sp->n_hist;
    int32_t k = 0;
    while (k < n) {
        const float *lg = bd_session_logits(ds, 0);
        int32_t V = ds->m->hp.n_vocab;
        int32_t best = bd_kernels_get()->argmax(lg, V);
        if (sp->p.p_min > 0.0f) {
            double sum = 0.0;
            for (int32_t i = 0; i < V; i++) sum += exp((double)lg[i] - lg[best]);
            if (1.0 / sum < sp->p.p_min) break;
        }
        out[k++] = best;
        if (k == n || bd_session_length(ds) >= ds->n_ctx) break;
        if (!bd_session_forward(ds, &best, 1, BD_LOGITS_LAST, err, errlen)) return false;
    }
    *n_out = k;
    return true;
}

/* ------------------------------------------------------------------------
 * Acceptance
 * ---------------------------------------------------------------------- */

bool bd_spec_test_wrong_rule = false;
bool bd_spec_test_wrong_history = false;

/* Target's token for verify row `row` given draft d (or -1 for the bonus).
 * hist[0..n_hist) is the history plain decoding would have before this
 * row (the repetition penalty reads it). Returns true if d is accepted;
 * else *tok gets the replacement.
 *
 * With sampling, the row's token is drawn exactly as plain sampling draws
 * it (bd_sampler_pick: one uniform, none for a single candidate) and the
 * draft is accepted iff it is that token. Every draft here is one token
 * (DFlash and draft-simple take the drafter's argmax, ngram-simple a
 * copy), so this is the acceptance rule of dflash.md section 5 in another
 * form: d is accepted with probability p(d), and a rejected row emits a
 * token drawn from p with d removed. It also keeps the generator in step
 * with plain decoding, one draw per emitted token (rows after a rejection
 * draw nothing), so a seed gives the same tokens with and without a
 * drafter, whatever draft lengths the steps took: an adaptive draft
 * length, which depends on measured time, does not make seeded output
 * vary from run to run. (The usual form draws a second uniform on
 * rejection, and its tokens then depend on where the drafts fell.) */
static bool accept_row(bd_sampler *smp, const float *logits, const int32_t *hist, int32_t n_hist, int32_t d,
                       int32_t *tok) {
    const int32_t *ids;
    const float *probs;
    int32_t n = bd_sampler_dist(smp, logits, hist, n_hist, &ids, &probs);
    if (bd_sampler_is_greedy(smp)) {
        *tok = ids[0];
        return d >= 0 && *tok == d;
    }
    if (bd_spec_test_wrong_rule && d >= 0) {
        /* deliberately wrong (test hook): any draft with p > 0.1 accepted */
        for (int32_t i = 0; i < n; i++)
            if (ids[i] == d && probs[i] > 0.1f) {
                *tok = d;
                return true;
            }
    }
    *tok = bd_sampler_pick(smp, ids, probs, n);
    return d >= 0 && *tok == d;
}

/* ------------------------------------------------------------------------
 * Grammar hook (grammar.h). Row j of a verify batch is masked with the
 * grammar state after the tokens emitted before it (the drafts accepted
 * so far), so a draft the grammar forbids has probability 0 and is
 * rejected, and every emitted token is drawn from the masked
 * distribution plain decoding uses at that position. Each call emits one
 * token (the accepted draft, or the replacement / bonus token), and the
 * grammar advances over exactly that token, so no rollback is needed.
 * *tok = -1 (and false) when the grammar ends the text here or fails
 * (bd_grammar_run_end tells which).
 * ---------------------------------------------------------------------- */

static bool accept_row_grammar(bd_grammar_run *gr, bd_sampler *smp, const float *logits, const int32_t *hist,
                               int32_t n_hist, int32_t d, int32_t *tok) {
    if (!gr) return accept_row(smp, logits, hist, n_hist, d, tok);
    const float *lg = bd_grammar_run_logits(gr, logits);
    if (!lg) {
        *tok = -1;
        return false;
    }
    bool acc = accept_row(smp, lg, hist, n_hist, d, tok);
    if (acc && bd_grammar_test_stale_rows) return true; /* deliberately wrong (test hook) */
    if (!bd_grammar_run_accept(gr, acc ? d : *tok)) {
        *tok = -1;
        return false;
    }
    return acc;
}

/* ------------------------------------------------------------------------
 * The loop
 * ---------------------------------------------------------------------- */

typedef struct {
    bd_spec *sp;
    const bd_gen_params *gp;
    bd_token_cb cb;
    void *user;
    bd_gen_stats *st;
    bool done;
} emit_ctx;

/* Commit one token to the history and report it; row: the target's
 * logits row it was drawn from (for gp->on_logits). Returns false when
 * generation must stop (EOG, callback, n_predict). */
static bool emit(emit_ctx *e, int32_t tok, int32_t row) {
    bd_spec *sp = e->sp;
    if (tok < 0) { /* the grammar ended the text (or failed): accept_row_grammar */
        e->done = true;
        return false;
    }
    if (!e->gp->ignore_eog && bd_token_is_eog(sp->t->m, tok)) {
        e->st->stopped_eog = true;
        e->done = true;
        return false;
    }
    sp->hist[sp->n_hist++] = tok;
    e->st->n_gen++;
    if (e->gp->on_logits) e->gp->on_logits(tok, bd_session_logits(sp->t, row), sp->t->m->hp.n_vocab, e->user);
    bool go_on = e->cb ? e->cb(tok, e->user) : true;
    if (!go_on || (e->gp->n_predict >= 0 && e->st->n_gen >= e->gp->n_predict) || sp->n_hist >= sp->t->n_ctx) {
        e->done = true;
        return false;
    }
    return true;
}

/* One generation: what the phases below share. */
typedef struct {
    bd_spec *sp;
    bd_session *t;
    bd_sampler *smp;
    bd_grammar_run *gr;     /* NULL without a grammar */
    const bd_gen_params *gp;
    bd_gen_stats *st;
    emit_ctx e;
    char *err;
    size_t errlen;
} gen_run;

/* Everything the adaptive rule learned, forgotten: the next step is a
 * warm-up, as on a new bd_spec. */
static void adapt_forget(bd_spec *sp) {
    for (int32_t i = 0; i <= SPEC_MAX_DRAFT; i++) {
        sp->alpha[i] = 1.0;
        sp->alpha_n[i] = 0;
        sp->cost[i] = sp->vcost[i] = 0;
        sp->cost_n[i] = 0;
        sp->s_alpha[i] = 1.0;
        sp->s_alpha_n[i] = 0;
        sp->s_cost[i] = 0;
        sp->s_cost_n[i] = 0;
    }
    sp->s_provisional = -1;
    sp->cost_provisional = -1;
    sp->step_no = 0;
    sp->probe_ms = 0;
    sp->probe_tokens = 0;
    sp->forget = false;
    sp->n_learned = 0;
    sp->carry_probe = false;
}

/* A new generation on this bd_spec. The step costs (this machine) carry
 * over from the generations before it once one of them drafted, and the
 * acceptance estimates (this drafter on this target) as a prior: the first
 * step is then an adaptive pick, not the warm-up and its plain step, and a
 * draft starts at the length the last generation settled on instead of
 * growing 2 -> 8 -> 15 again. That ramp cost ~10 % of a 64-token generation
 * on the 4B always-right pair at avx2 (Zen 4: 29.4-29.7 tok/s against
 * 32.3-32.8 at a fixed n_max 15), and a server slot paid it on every
 * request. A new prompt may suit the drafter differently, so:
 * - each position's estimate counts as ADAPT_CARRY_N observations at most
 *   (the running mean's weights, bd_spec_adapt_learn): a drafter right
 *   everywhere before and wrong now drafts two full blocks before its
 *   rate falls below plain's (4B at avx2: alpha(1) 1 -> 0.67 -> 0.5), not
 *   five at the EMA's 0.15;
 * - a first pick of plain is a probe instead (the best drafting length):
 *   a drafter that was wrong before is tried once per generation, as the
 *   warm-up did, not after the up to ADAPT_PROBE_MAX plain steps its last
 *   probe's loss would space;
 * - the probe back-off starts again.
 * Without an earlier draft (or after bd_spec_forget) everything starts
 * fresh. */
static void adapt_carry(bd_spec *sp) {
    bool learned = false;
    for (int32_t i = 1; i <= SPEC_MAX_DRAFT; i++) learned |= sp->cost_n[i] > 0 || sp->s_cost_n[i] > 0;
    if (sp->forget || !learned) {
        adapt_forget(sp);
    } else {
        sp->step_no = 2; /* past the warm-up and its plain step */
        for (int32_t i = 0; i <= SPEC_MAX_DRAFT; i++) {
            if (sp->alpha_n[i] > ADAPT_CARRY_N) sp->alpha_n[i] = ADAPT_CARRY_N;
            if (sp->s_alpha_n[i] > ADAPT_CARRY_N) sp->s_alpha_n[i] = ADAPT_CARRY_N;
        }
        sp->carry_probe = true;
    }
    sp->pick_short = sp->step_short = false;
    sp->plain_run = 0;
    sp->probe_every = ADAPT_PROBE_EVERY;
}

void bd_spec_forget(bd_spec *sp) { sp->forget = true; }

int32_t bd_spec_test_steps_learned(const bd_spec *sp) { return sp->n_learned; }

/* Reset: carry the adaptive state over (adapt_carry) and load the prompt
 * into the history, keeping the longest usable prefix of the caches.
 * The target keeps the longest common prefix of its cache and the prompt.
 * The DFlash context holds the target's features of the last generation's
 * history (row i <-> hist[i], n_rows of them, then the n_pend held back in
 * sp->pend), so it keeps the same prefix, which cannot exceed its own
 * common prefix with the prompt (the target session may have been used
 * without this bd_spec in between). Held-back rows the prompt repeats,
 * below what the target keeps, are appended first (cheaper than a target
 * forward that would make them again); the rest are dropped. The
 * draft-simple cache is revalidated against the prompt. Returns the target
 * tokens kept. */
static int32_t spec_reset(bd_spec *sp, const int32_t *prompt, int32_t n_prompt) {
    int32_t cap = n_prompt;
    if (sp->df) {
        int32_t rows = bd_dflash_n_rows(sp->df), held = rows + sp->n_pend;
        cap = bd_decode_common_prefix(sp->hist, held < sp->n_hist ? held : sp->n_hist, prompt, n_prompt);
        int32_t t_keep = bd_decode_common_prefix(bd_session_tokens(sp->t), bd_session_length(sp->t), prompt,
                                                 n_prompt - 1);
        int32_t use = (cap < t_keep ? cap : t_keep) - rows;
        char e[8];
        /* (an append cannot fail here: use <= pend_cap <= n_batch rows, and
         * rows + use <= n_hist <= n_ctx; if it did, the rows are dropped) */
        if (use <= 0 || !bd_dflash_append(sp->df, sp->pend, use, e, sizeof e)) use = 0;
        sp->n_pend = 0;
        if (cap > rows + use) cap = rows + use;
    }
    int32_t keep = bd_decode_reuse_prefix(sp->t, prompt, n_prompt, cap);
    BD_ASSERT(keep >= 0 && keep < n_prompt && keep <= cap);
    if (sp->df) bd_dflash_truncate(sp->df, keep);
    BD_ASSERT(!sp->df || bd_dflash_n_rows(sp->df) == keep);
    if (sp->ds)
        sp->d_valid = bd_decode_common_prefix(bd_session_tokens(sp->ds), bd_session_length(sp->ds), prompt, n_prompt);
    adapt_carry(sp);
    sp->n_pend = 0;
    memcpy(sp->hist, prompt, (size_t)n_prompt * sizeof *prompt);
    sp->n_hist = n_prompt;
    return keep;
}

/* Prefill: forward prompt[keep..] in chunks of n_batch (the last with
 * logits); each chunk's features go to the DFlash drafter. */
static bool spec_prefill(gen_run *r, const int32_t *prompt, int32_t n_prompt, int32_t keep) {
    bd_session *t = r->t;
    bool ok = true;
    for (int32_t off = keep; ok && off < n_prompt; off += t->n_batch) {
        int32_t nb = n_prompt - off < t->n_batch ? n_prompt - off : t->n_batch;
        bool last = off + nb == n_prompt;
        ok = bd_session_forward(t, prompt + off, nb, last ? BD_LOGITS_LAST : BD_LOGITS_NONE, r->err, r->errlen);
        if (ok && r->sp->df) ok = bd_dflash_append(r->sp->df, bd_session_taps(t, NULL), nb, r->err, r->errlen);
    }
    return ok;
}

/* Give the DFlash drafter the features held back from plain steps. */
static bool spec_flush_pending(gen_run *r) {
    bd_spec *sp = r->sp;
    if (sp->n_pend == 0) return true;
    double td = bd_time_ms();
    bool ok = bd_dflash_append(sp->df, sp->pend, sp->n_pend, r->err, r->errlen);
    sp->n_pend = 0;
    double ms = bd_time_ms() - td;
    r->st->spec.draft_ms += ms;
    sp->flush_ms += ms;
    return ok;
}

/* Draft: the step's draft length (adaptive pick or n_max, bounded by the
 * context left and by the tokens still to emit: a step emits at most n + 1),
 * then the drafts themselves into sp->drafts; *nd of them (0: a plain
 * step; drafts shorter than n_min are dropped). An adaptive pick below
 * n_min drafts n_min (the rule decides whether to draft, the floor how
 * much); a length still below n_min once bounded is not drafted at all,
 * so no drafter pass is paid for a draft that would be dropped (and a
 * plain step's measured time stays a plain step's). */
static bool spec_draft(gen_run *r, int32_t *nd) {
    bd_spec *sp = r->sp;
    int32_t P = bd_session_length(r->t); /* == n_hist - 1 */
    int32_t room = r->t->n_ctx - P - 1;   /* drafts that still fit the context */
    int32_t n = sp->p.adaptive ? adapt_pick(sp) : sp->n_max;
    if (sp->p.adaptive && n > 0 && n < sp->p.n_min) n = sp->p.n_min < sp->n_max ? sp->p.n_min : sp->n_max;
    if (n > room) n = room;
    int32_t n_block = n; /* llama.cpp-style short blocks keep their length */
    if (r->gp->n_predict >= 0 && n > r->gp->n_predict - r->st->n_gen - 1) n = r->gp->n_predict - r->st->n_gen - 1;
    *nd = 0;
    sp->step_short = false;
    if (n <= 0 || n < sp->p.n_min) return true;
    if (!spec_flush_pending(r)) return false;
    double td = bd_time_ms();
    bool ok = true;
    if (sp->df) {
        /* a short block: [anchor, MASK x n_block] (forced, or the adaptive
         * pick); at n_block = B - 1 it is the full block */
        bool short_block = sp->p.adaptive ? sp->pick_short : sp->p.dflash_block == BD_DFLASH_BLOCK_SHORT;
        int32_t rows = short_block && n_block + 1 < bd_dflash_block_size(sp->df) ? n_block + 1 : 0;
        sp->step_short = rows > 0;
        ok = bd_dflash_draft(sp->df, sp->hist[sp->n_hist - 1], n, rows, sp->drafts, r->err, r->errlen);
        if (ok && sp->step_short) r->st->spec.n_short_blocks++;
        *nd = n;
    } else if (sp->ds) {
        ok = draft_simple(sp, n, sp->drafts, nd, r->err, r->errlen);
    } else {
        *nd = draft_ngram(sp, n, sp->drafts);
    }
    r->st->spec.draft_ms += bd_time_ms() - td;
    if (*nd < sp->p.n_min) *nd = 0;
    return ok;
}

/* Verify and accept: one target forward of [anchor, d1..dnd]; drafts are
 * accepted row by row (accept_row) until the first rejection. *a gets the
 * accepted count, *tok the target's own token (the replacement, or the
 * bonus token after a fully accepted block). */
static bool spec_verify(gen_run *r, int32_t nd, int32_t *a, int32_t *tok) {
    bd_spec *sp = r->sp;
    bd_spec_stats *ss = &r->st->spec;
    sp->batch[0] = sp->hist[sp->n_hist - 1];
    memcpy(sp->batch + 1, sp->drafts, (size_t)nd * sizeof *sp->drafts);
    BD_ASSERT(nd >= 0 && nd <= sp->n_max && sp->n_hist + nd <= r->t->n_ctx);
    double tv = bd_time_ms();
    bool ok = bd_session_forward(r->t, sp->batch, nd + 1, nd > 0 ? BD_LOGITS_ALL : BD_LOGITS_LAST, r->err, r->errlen);
    ss->verify_ms += bd_time_ms() - tv;
    if (!ok) return false;
    ss->target_forwards++;
    if (nd > 0) ss->n_steps++;
    ss->n_drafted += nd;
    /* verify row j samples after the committed history plus drafts
     * 1..j: lay the drafts after the history (room: n_hist + nd <=
     * n_ctx), so row j's history is hist[0 .. n_hist + j). emit()
     * writes the same ids there for accepted drafts. */
    memcpy(sp->hist + sp->n_hist, sp->drafts, (size_t)nd * sizeof *sp->drafts);
    *a = 0;
    *tok = -1;
    while (*a < nd) {
        if (*a < 32) ss->drafted_at[*a]++;
        int32_t nh = bd_spec_test_wrong_history ? sp->n_hist : sp->n_hist + *a;
        if (!accept_row_grammar(r->gr, r->smp, bd_session_logits(r->t, *a), sp->hist, nh, sp->drafts[*a], tok)) break;
        if (*a < 32) ss->accepted_at[*a]++;
        (*a)++;
    }
    if (*a == nd)
        accept_row_grammar(r->gr, r->smp, bd_session_logits(r->t, nd), sp->hist,
                           bd_spec_test_wrong_history ? sp->n_hist : sp->n_hist + nd, -1, tok);
    for (int32_t i = *a + 1; i < nd && i < 32; i++) ss->drafted_at[i]++;
    ss->n_accepted += *a;
    return true;
}

/* Commit: roll the target back to anchor + the a accepted drafts (P: the
 * anchor's position), give those rows' features to the DFlash drafter (a
 * plain step's are held back, pend_cap at most, in adaptive mode), emit
 * the accepted drafts and the target's token, and revalidate the
 * draft-simple cache (its rows P+1.. hold the drafts). */
static bool spec_commit(gen_run *r, int32_t P, int32_t nd, int32_t a, int32_t tok) {
    bd_spec *sp = r->sp;
    bd_session *t = r->t;
    if (sp->trace) sp->trace(sp->trace_user, P, sp->hist[sp->n_hist - 1], sp->drafts, nd, a);
    bd_session_truncate(t, P + a + 1);
    BD_ASSERT(a <= nd && bd_session_length(t) == P + a + 1);
    if (sp->df && nd == 0 && sp->p.adaptive) {
        /* a plain step: hold its features back (a == 0, one row) */
        memcpy(sp->pend + sp->n_pend * sp->pend_row, bd_session_taps(t, NULL), (size_t)sp->pend_row * sizeof(float));
        if (++sp->n_pend == sp->pend_cap && !spec_flush_pending(r)) return false;
    } else if (sp->df) {
        double td = bd_time_ms();
        bool ok = bd_dflash_append(sp->df, bd_session_taps(t, NULL), a + 1, r->err, r->errlen);
        r->st->spec.draft_ms += bd_time_ms() - td;
        if (!ok) return false;
    }
    if (sp->ds && sp->d_valid > P + 1) sp->d_valid = P + 1;
    /* verify row i drew draft i (accepted) and row a the target's token;
     * truncating the session keeps the last forward's logits */
    for (int32_t i = 0; i < a && !r->e.done; i++) emit(&r->e, sp->drafts[i], i);
    if (!r->e.done) emit(&r->e, tok, a);
    if (sp->ds) {
        int32_t dl = bd_session_length(sp->ds), v = P + 1;
        while (v < dl && v < sp->n_hist && v - P - 1 < nd && sp->hist[v] == sp->drafts[v - P - 1]) v++;
        sp->d_valid = v;
    }
    return true;
}

bool bd_spec_generate(bd_spec *sp, const int32_t *prompt, int32_t n_prompt, const bd_gen_params *gp,
                      bd_token_cb cb, void *user, bd_gen_stats *st, char *err, size_t errlen) {
    bd_session *t = sp->t;
    memset(st, 0, sizeof *st);
    snprintf(st->spec.type, sizeof st->spec.type, "%s", bd_spec_type_name(sp->p.type));
    st->spec.adaptive = sp->p.adaptive;
    if (n_prompt < 1) return bd_err(err, errlen, "generate: the prompt is empty");
    if (n_prompt >= t->n_ctx)
        return bd_err(err, errlen, "generate: prompt of %d tokens does not fit the context (%d)", n_prompt, t->n_ctx);
    gen_run r = {.sp = sp, .t = t, .gp = gp, .st = st, .err = err, .errlen = errlen,
                 .e = {.sp = sp, .gp = gp, .cb = cb, .user = user, .st = st}};
    r.smp = bd_sampler_create(&gp->sampling, t->m->hp.n_vocab);
    if (!r.smp) return bd_err(err, errlen, "generate: out of memory");
    if (gp->grammar && !(r.gr = bd_grammar_run_create(gp->grammar, t->m->hp.n_vocab, gp->ignore_eog, err, errlen))) {
        bd_sampler_free(r.smp);
        return false;
    }

    double t0 = bd_time_ms(); /* (the reset's appends of held-back rows are prompt work) */
    int32_t keep = spec_reset(sp, prompt, n_prompt);
    bool ok = spec_prefill(&r, prompt, n_prompt, keep);
    double t1 = bd_time_ms();
    st->n_prompt = n_prompt;
    st->n_prompt_cached = keep;
    st->prompt_ms = t1 - t0;
    st->spec.target_forwards = 1;
    if (ok) { /* the prompt's last row gives the first token */
        int32_t tok;
        accept_row_grammar(r.gr, r.smp, bd_session_logits(t, 0), sp->hist, sp->n_hist, -1, &tok);
        emit(&r.e, tok, 0);
    }
    while (ok && !r.e.done) {
        double ts = bd_time_ms(), vms0 = st->spec.verify_ms;
        sp->flush_ms = 0;
        int32_t P = bd_session_length(t), nd, a, tok;
        /* the target cache holds every committed token but the anchor; the
         * DFlash context (plus the held-back rows) the same tokens */
        BD_ASSERT(P == sp->n_hist - 1);
        BD_ASSERT(!sp->df || bd_dflash_n_rows(sp->df) + sp->n_pend == P);
        ok = spec_draft(&r, &nd) && spec_verify(&r, nd, &a, &tok) && spec_commit(&r, P, nd, a, tok);
        /* held-back rows are every token's cost, paid before whichever
         * draft comes next: not this step's (a plain step that fills the
         * buffer would price plain higher for a while, a probe after many
         * plain steps would look worse than it is) */
        if (ok && sp->p.adaptive)
            adapt_observe(sp, nd, a, bd_time_ms() - ts - sp->flush_ms, st->spec.verify_ms - vms0);
    }
    st->gen_ms = bd_time_ms() - t1;
    st->spec.other_ms = st->gen_ms - st->spec.draft_ms - st->spec.verify_ms;
    if (st->spec.other_ms < 0) st->spec.other_ms = 0;
    bd_decode_finish_stats(st);
    if (ok && bd_grammar_run_stopped(r.gr)) ok = bd_grammar_run_end(r.gr, st, err, errlen); /* grammar hook */
    bd_sampler_free(r.smp);
    bd_grammar_run_free(r.gr);
    return ok;
}
