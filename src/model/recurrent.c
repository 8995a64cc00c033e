/*
 * recurrent.c - the Gated DeltaNet state of a hybrid session: the per-token
 * update (shared by the forward and the rollback replay), the two state
 * buffers and the rollback into the last forward. The design and why it
 * was chosen: the comment on bd_recurrent in model.h.
 */
#include <string.h>

#include "model.h"

/* ------------------------------------------------------------------------
 * The update of one value head for one token
 * ---------------------------------------------------------------------- */

/* The kernel table's step (kernels.h states its order): the same bits at
 * every level, so the forward and the rollback replay agree whichever runs. */
void bd_gdn_step(const float *src, float *dst, int32_t d_k, int32_t d_v, const float *k, const float *v, float g,
                 float beta, const float *q, float scale, float *out) {
    bd_kernels_get()->gdn_step(src, dst, d_k, d_v, k, v, g, beta, q, scale, out);
}

/* ------------------------------------------------------------------------
 * Buffers
 * ---------------------------------------------------------------------- */

static void sizes(const bd_model *m, int64_t *conv_f, int64_t *ssm_f, int64_t *row_f) {
    const bd_hparams *hp = &m->hp;
    const int64_t d = hp->ssm_d_state, key_dim = (int64_t)hp->ssm_n_k * d, value_dim = (int64_t)hp->ssm_n_v * d,
                  conv_dim = 2 * key_dim + value_dim;
    *conv_f = (int64_t)(hp->ssm_d_conv - 1) * conv_dim;
    *ssm_f = (int64_t)hp->ssm_n_v * d * d;
    *row_f = 2 * conv_dim + 2 * (int64_t)hp->ssm_n_v; /* raw + xc + g + beta */
}

uint64_t bd_recurrent_bytes(const bd_model *m, int32_t n_save) {
    if (m->hp.n_rec_layers == 0) return 0;
    int64_t conv_f, ssm_f, row_f;
    sizes(m, &conv_f, &ssm_f, &row_f);
    return (uint64_t)m->hp.n_rec_layers * (uint64_t)(2 * (conv_f + ssm_f) + (int64_t)n_save * row_f) * sizeof(float);
}

bool bd_recurrent_create(bd_recurrent *rs, const bd_model *m, int32_t n_save, int32_t n_batch, char *err,
                         size_t errlen) {
    memset(rs, 0, sizeof *rs);
    const bd_hparams *hp = &m->hp;
    if (hp->n_rec_layers == 0) return true;
    const int64_t n_rec = hp->n_rec_layers;
    int64_t conv_f, ssm_f, row_f;
    sizes(m, &conv_f, &ssm_f, &row_f);
    rs->n_rec = hp->n_rec_layers;
    rs->d_k = hp->ssm_d_state;
    rs->n_v = hp->ssm_n_v;
    rs->d_conv = hp->ssm_d_conv;
    rs->key_dim = hp->ssm_n_k * rs->d_k;
    rs->value_dim = hp->ssm_n_v * rs->d_k;
    rs->conv_dim = 2 * rs->key_dim + rs->value_dim;
    rs->conv_floats = conv_f;
    rs->ssm_floats = ssm_f;
    rs->n_save = n_save;
    const size_t cd = (size_t)rs->conv_dim, nv = (size_t)rs->n_v;
    /* Not zeroed here: reset zeroes the buffer a forward reads first, a
     * forward writes its other buffer whole before reading it, and save
     * rows are read only below n_saved. */
    for (int b = 0; b < 2; b++) {
        rs->conv[b] = bd_alloc_raw((size_t)(n_rec * conv_f) * sizeof(float));
        rs->ssm[b] = bd_alloc_raw((size_t)(n_rec * ssm_f) * sizeof(float));
    }
    rs->raw = bd_alloc_raw((size_t)n_rec * (size_t)n_save * cd * sizeof(float));
    rs->xc = bd_alloc_raw((size_t)n_rec * (size_t)n_save * cd * sizeof(float));
    rs->g = bd_alloc_raw((size_t)n_rec * (size_t)n_save * nv * sizeof(float));
    rs->beta = bd_alloc_raw((size_t)n_rec * (size_t)n_save * nv * sizeof(float));
    bool ok = rs->conv[0] && rs->conv[1] && rs->ssm[0] && rs->ssm[1] && rs->raw && rs->xc && rs->g && rs->beta;
    if (n_batch > n_save) {
        rs->raw_big = bd_alloc((size_t)n_batch * cd * sizeof(float));
        rs->xc_big = bd_alloc((size_t)n_batch * cd * sizeof(float));
        rs->g_big = bd_alloc((size_t)n_batch * nv * sizeof(float));
        rs->beta_big = bd_alloc((size_t)n_batch * nv * sizeof(float));
        ok = ok && rs->raw_big && rs->xc_big && rs->g_big && rs->beta_big;
    }
    if (!ok) {
        bd_recurrent_free(rs);
        return bd_err(err, errlen, "out of memory allocating the recurrent state (%.1f MiB)",
                      (double)bd_recurrent_bytes(m, n_save) / (1 << 20));
    }
    bd_recurrent_reset(rs);
    return true;
}

void bd_recurrent_free(bd_recurrent *rs) {
    for (int b = 0; b < 2; b++) {
        bd_free(rs->conv[b]);
        bd_free(rs->ssm[b]);
    }
    bd_free(rs->raw);
    bd_free(rs->xc);
    bd_free(rs->g);
    bd_free(rs->beta);
    bd_free(rs->raw_big);
    bd_free(rs->xc_big);
    bd_free(rs->g_big);
    bd_free(rs->beta_big);
    memset(rs, 0, sizeof *rs);
}

/* An empty sequence: zero state (the conv window of a sequence start is
 * zeros too), a checkpoint at 0. Only the current buffer needs it: a
 * forward reads it and writes the other one whole. */
void bd_recurrent_reset(bd_recurrent *rs) {
    if (!rs->conv[0]) return;
    rs->cur = rs->base = 0;
    rs->p0 = 0;
    rs->n_saved = 0;
    rs->saved = true;
    memset(rs->conv[0], 0, (size_t)(rs->n_rec * rs->conv_floats) * sizeof(float));
    memset(rs->ssm[0], 0, (size_t)(rs->n_rec * rs->ssm_floats) * sizeof(float));
}

void bd_recurrent_begin(bd_recurrent *rs, int32_t n_past, int32_t n, int32_t *save_row, int *src, int *dst) {
    if (!(rs->saved && rs->n_saved + n <= rs->n_save)) {
        /* a new checkpoint here: the current state becomes base */
        rs->base = rs->cur;
        rs->p0 = n_past;
        rs->n_saved = 0;
        rs->saved = n <= rs->n_save;
    }
    *save_row = rs->saved ? rs->n_saved : -1;
    *src = rs->cur;
    /* never write over base: the first forward after the checkpoint writes
     * the other buffer, the following ones update it in place */
    *dst = rs->cur == rs->base ? 1 - rs->base : rs->cur;
}

void bd_recurrent_commit(bd_recurrent *rs, int32_t n, int32_t save_row, int dst) {
    rs->cur = dst;
    if (save_row >= 0) rs->n_saved = save_row + n;
}

/* ------------------------------------------------------------------------
 * Rollback
 * ---------------------------------------------------------------------- */

typedef struct {
    const bd_session *s;
    int32_t a;  /* rows to replay */
    int32_t n_items;
} replay_ctx;

/* Work item = one (layer, value head): rows 0..a-1 through bd_gdn_step,
 * from base into the other buffer. */
static void replay_worker(void *arg, int ith, int nth) {
    const replay_ctx *c = arg;
    const bd_recurrent *rs = &c->s->rs;
    int64_t lo, hi;
    bd_split(c->n_items, ith, nth, &lo, &hi);
    for (int64_t w = lo; w < hi; w++) {
        const int64_t r = w / rs->n_v, h = w % rs->n_v;
        const int64_t kh = bd_gdn_key_head(&c->s->m->hp, h), hs = (int64_t)rs->d_k * rs->d_k;
        const float *src = rs->ssm[rs->base] + r * rs->ssm_floats + h * hs;
        float *dst = rs->ssm[1 - rs->base] + r * rs->ssm_floats + h * hs;
        for (int32_t t = 0; t < c->a; t++) {
            const float *xc = rs->xc + (r * rs->n_save + t) * rs->conv_dim;
            const int64_t gi = (r * rs->n_save + t) * rs->n_v + h;
            bd_gdn_step(t == 0 ? src : dst, dst, rs->d_k, rs->d_k, xc + rs->key_dim + kh * rs->d_k,
                        xc + 2 * rs->key_dim + h * rs->d_k, rs->g[gi], rs->beta[gi], NULL, 0.0f, NULL);
        }
    }
}

bool bd_recurrent_truncate(bd_session *s, int32_t n_keep) {
    bd_recurrent *rs = &s->rs;
    if (!rs->conv[0] || n_keep == s->n_past) return true;
    if (n_keep == 0) {
        bd_recurrent_reset(rs);
        return true;
    }
    const int32_t a = n_keep - rs->p0;
    if (!rs->saved || a < 0 || a > rs->n_saved) return false;
    if (a == 0) {
        rs->cur = rs->base;
        rs->n_saved = 0;
        return true;
    }
    replay_ctx c = {.s = s, .a = a, .n_items = rs->n_rec * rs->n_v};
    if ((int64_t)c.n_items * a * rs->d_k * rs->d_k < (1 << 16)) replay_worker(&c, 0, 1);
    else bd_pool_run(s->pool, replay_worker, &c);
    /* the conv window ending at row a-1: the last d_conv-1 of
     * [window at p0 ; raw rows 0..a-1] */
    const int32_t K1 = rs->d_conv - 1, other = 1 - rs->base;
    for (int32_t r = 0; r < rs->n_rec; r++) {
        const float *old = rs->conv[rs->base] + (int64_t)r * rs->conv_floats;
        float *win = rs->conv[other] + (int64_t)r * rs->conv_floats;
        for (int32_t j = 0; j < K1; j++) {
            const int32_t idx = a - K1 + j;
            const float *row = idx < 0 ? old + (int64_t)(K1 + idx) * rs->conv_dim
                                       : rs->raw + ((int64_t)r * rs->n_save + idx) * rs->conv_dim;
            memcpy(win + (int64_t)j * rs->conv_dim, row, (size_t)rs->conv_dim * sizeof(float));
        }
    }
    rs->cur = other;
    rs->n_saved = a;
    return true;
}
