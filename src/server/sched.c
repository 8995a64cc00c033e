/*
 * sched.c - the job queue in front of the slots, and the generation a slot
 * worker runs for one job.
 *
 * One FIFO queue for the whole server (under server.qmu); each slot worker
 * takes the oldest job for its own model. A job is shared by the request
 * thread (which streams or waits for it) and the worker: it is
 * reference-counted and its output fields live under job.mu. The worker
 * stops generating (the token callback returns false) when a stop string
 * appears, when the job is cancelled (client gone, shutdown) or when its
 * wall-time deadline passes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server_int.h"
#include "../decode/grammar.h"

/* ------------------------------------------------------------------------
 * Jobs
 * ---------------------------------------------------------------------- */

srv_job *srv_job_create(srv_model *m, const int32_t *prompt, int n_prompt) {
    static atomic_llong next_id;
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->id = atomic_fetch_add(&next_id, 1);
    j->slot_id = -1;
    j->prompt = malloc((size_t)(n_prompt > 0 ? n_prompt : 1) * sizeof *prompt);
    if (!j->prompt) {
        free(j);
        return NULL;
    }
    if (n_prompt > 0) memcpy(j->prompt, prompt, (size_t)n_prompt * sizeof *prompt);
    j->n_prompt = n_prompt;
    j->model = m;
    j->refs = 1;
    j->state = JOB_QUEUED;
    j->cache_prompt = true;
    j->top_logprobs = -1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    atomic_init(&j->cancel, false);
    return j;
}

static bool add_stop(srv_job *j, const char *s, size_t n, bool keep) {
    if (j->n_stops >= 16 || n == 0) return false;
    char *c = malloc(n + 1);
    if (!c) return false;
    memcpy(c, s, n);
    c[n] = '\0';
    j->stop_keep[j->n_stops] = keep;
    j->stops[j->n_stops++] = c;
    if (n > j->max_stop) j->max_stop = n;
    return true;
}

bool srv_job_own_bias(srv_job *j) {
    bd_sampler_params *sp = &j->gp.sampling;
    if (!sp->logit_bias || sp->n_logit_bias <= 0) {
        sp->logit_bias = NULL;
        sp->n_logit_bias = 0;
        return true;
    }
    j->bias = malloc((size_t)sp->n_logit_bias * sizeof *j->bias);
    if (!j->bias) return false;
    memcpy(j->bias, sp->logit_bias, (size_t)sp->n_logit_bias * sizeof *j->bias);
    sp->logit_bias = j->bias;
    return true;
}

bool srv_job_add_stop(srv_job *j, const char *s, size_t n) { return add_stop(j, s, n, false); }

bool srv_job_add_stop_keep(srv_job *j, const char *s, size_t n) { return add_stop(j, s, n, true); }

void srv_job_unref(srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) return;
    for (int i = 0; i < j->n_stops; i++) free(j->stops[i]);
    free(j->prompt);
    free(j->forced);
    free(j->bias);
    bd_grammar_free(j->grammar);
    free(j->lp);
    free(j->text);
    free(j->marks);
    free(j->ids);
    bd_textstream_free(j->ts);
    free(j->piece);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static void job_ref(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

/* Mark done with an error (no generation happened). */
static void job_fail(srv_job *j, int status, const char *msg) {
    pthread_mutex_lock(&j->mu);
    j->ok = false;
    j->err_status = status;
    snprintf(j->err, sizeof j->err, "%s", msg);
    j->state = JOB_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

bool srv_job_submit(server *s, srv_job *j, int *status, char *err, size_t errlen) {
    pthread_mutex_lock(&s->qmu);
    if (s->quit || atomic_load(&s->stopping)) {
        pthread_mutex_unlock(&s->qmu);
        *status = 503;
        return bd_err(err, errlen, "the server is shutting down");
    }
    /* a slot whose job is done counts as idle: its worker is about to come
     * back for more (a client's next request must not see a 503 because of
     * its own previous one) */
    int idle = 0;
    for (int i = 0; i < j->model->n_slots; i++) {
        srv_slot *sl = &j->model->slots[i];
        bool free_now = !sl->busy;
        if (!free_now && sl->cur) {
            pthread_mutex_lock(&sl->cur->mu);
            free_now = sl->cur->state == JOB_DONE;
            pthread_mutex_unlock(&sl->cur->mu);
        }
        idle += free_now;
    }
    int waiting = 0;
    for (srv_job *q = s->qhead; q; q = q->next) waiting += q->model == j->model;
    /* a job that finds no idle slot waits; at most queue_max jobs wait
     * server-wide (queued jobs an idle slot is about to take do not count) */
    int truly_waiting = s->n_queued - (waiting < idle ? waiting : idle);
    if (waiting >= idle && truly_waiting >= s->p.queue_max) {
        pthread_mutex_unlock(&s->qmu);
        *status = 503;
        return bd_err(err, errlen, "server busy: %d requests are queued (limit %d); retry later", s->n_queued,
                       s->p.queue_max);
    }
    job_ref(j);
    j->next = NULL;
    if (s->qtail) s->qtail->next = j;
    else s->qhead = j;
    s->qtail = j;
    s->n_queued++;
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    return true;
}

void srv_job_withdraw(server *s, srv_job *j) {
    pthread_mutex_lock(&s->qmu);
    srv_job *prev = NULL, *q = s->qhead;
    while (q && q != j) {
        prev = q;
        q = q->next;
    }
    bool found = q != NULL;
    if (found) {
        if (prev) prev->next = j->next;
        else s->qhead = j->next;
        if (s->qtail == j) s->qtail = prev;
        j->next = NULL;
        s->n_queued--;
    }
    pthread_mutex_unlock(&s->qmu);
    if (found) {
        job_fail(j, 499, "cancelled while queued");
        srv_job_unref(j); /* the queue's reference */
    }
}

void srv_sched_wake(server *s) {
    pthread_mutex_lock(&s->qmu);
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
}

/* Fail every queued job (shutdown). */

void srv_sched_drop_queued(server *s) {
    pthread_mutex_lock(&s->qmu);
    srv_job *j = s->qhead;
    s->qhead = s->qtail = NULL;
    s->n_queued = 0;
    pthread_mutex_unlock(&s->qmu);
    while (j) {
        srv_job *nx = j->next;
        job_fail(j, 503, "the server is shutting down");
        srv_job_unref(j);
        j = nx;
    }
}

void srv_sched_drop_model(server *s, srv_model *m) {
    srv_job *dropped = NULL;
    pthread_mutex_lock(&s->qmu);
    srv_job *prev = NULL, *j = s->qhead;
    while (j) {
        srv_job *nx = j->next;
        if (j->model == m) {
            if (prev) prev->next = nx;
            else s->qhead = nx;
            if (s->qtail == j) s->qtail = prev;
            s->n_queued--;
            j->next = dropped;
            dropped = j;
        } else {
            prev = j;
        }
        j = nx;
    }
    pthread_mutex_unlock(&s->qmu);
    while (dropped) {
        srv_job *nx = dropped->next;
        job_fail(dropped, 503, "the model is being reloaded");
        srv_job_unref(dropped);
        dropped = nx;
    }
}

void srv_sched_cancel_running(server *s) {
    pthread_mutex_lock(&s->qmu);
    pthread_mutex_lock(&s->models_mu);
    for (int list = 0; list < 2; list++)
        for (srv_model *m = list ? s->retired : s->models; m; m = m->next)
            for (int i = 0; m->slots && i < m->n_slots; i++)
                if (m->slots[i].cur) atomic_store(&m->slots[i].cur->cancel, true);
    pthread_mutex_unlock(&s->models_mu);
    pthread_mutex_unlock(&s->qmu);
}

/* ------------------------------------------------------------------------
 * Generation
 * ---------------------------------------------------------------------- */

/* Append bytes to the job's text, cut at the first stop string, and move
 * `safe` up to the end minus the longest tail that could still become a
 * stop string. Returns true when a stop string was found. Under j->mu. */
static bool job_append(srv_job *j, const char *p, size_t n) {
    if (n == 0) return false;
    if (!bd_grow(&j->text, &j->cap, j->len + n + 1, 1)) return false; /* drops this piece; the job still ends normally */
    size_t old = j->len;
    memcpy(j->text + j->len, p, n);
    j->len += n;
    j->text[j->len] = '\0';
    bool hit = false;
    size_t cut = j->len, at = j->len;
    for (int i = 0; i < j->n_stops; i++) {
        size_t sl = strlen(j->stops[i]);
        size_t from = old >= sl - 1 ? old - (sl - 1) : 0;
        if (j->len - from < sl) continue;
        char *f = memmem(j->text + from, j->len - from, j->stops[i], sl);
        /* the earliest stop wins; a kept one ends after its text */
        if (f && (size_t)(f - j->text) < at) {
            at = (size_t)(f - j->text);
            cut = at + (j->stop_keep[i] ? sl : 0);
            hit = true;
            j->stop_word = j->stops[i];
        }
    }
    if (hit) {
        j->len = cut;
        j->text[cut] = '\0';
        j->finish = "stop";
        j->stop_hit = true;
        j->safe = j->len;
        return true;
    }
    size_t hold = 0;
    for (size_t k = j->max_stop ? j->max_stop - 1 : 0; k > 0 && !hold; k--) {
        if (k > j->len) continue;
        for (int i = 0; i < j->n_stops; i++) {
            size_t sl = strlen(j->stops[i]);
            if (sl > k && !memcmp(j->text + j->len - k, j->stops[i], k)) {
                hold = k;
                break;
            }
        }
    }
    if (j->len - hold > j->safe) j->safe = j->len - hold;
    BD_ASSERT(j->safe <= j->len && j->len < j->cap);
    /* token boundary: streams send one event per token, as OpenAI's and
     * llama.cpp's servers do (a failed allocation only merges events) */
    bd_grow(&j->marks, &j->cap_marks, j->n_marks + 1, sizeof *j->marks);
    if (j->n_marks < j->cap_marks) j->marks[j->n_marks++] = j->len;
    return false;
}

/* One push (tok >= 0) or the final flush (tok < 0) of the job's text
 * stream into j->piece, sized by bd_textstream_max_bytes and grown if a
 * push asks for more: no text is dropped. Worker thread only. */
static int stream_piece(srv_job *j, int32_t tok) {
    for (;;) {
        int n = tok >= 0 ? bd_textstream_push(j->ts, tok, j->piece, j->piece_cap)
                         : bd_textstream_flush(j->ts, j->piece, j->piece_cap);
        if (n >= 0) return n;
        char *p = realloc(j->piece, (size_t)-n);
        if (!p) return 0;
        j->piece = p;
        j->piece_cap = -n;
    }
}

/* The log-softmax of the target's raw logits at tok, and the top
 * alternatives (gp.on_logits; worker thread). */
static void on_logits(int32_t tok, const float *lg, int32_t n_vocab, void *user) {
    srv_job *j = user;
    if (j->top_logprobs < 0 || !lg) return;
    srv_logprob *e = &j->lp_next;
    float mx = lg[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (lg[i] > mx) mx = lg[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)lg[i] - mx);
    double lse = mx + log(sum);
    e->id = tok;
    e->logprob = (float)(lg[tok] - lse);
    /* the k largest logits, descending (ties: lower id first) */
    int k = j->top_logprobs, have = 0;
    for (int32_t t = 0; t < n_vocab && k > 0; t++) {
        float v = lg[t];
        if (have == k && v <= lg[e->top_id[k - 1]]) continue;
        int p = have < k ? have++ : k - 1;
        while (p > 0 && lg[e->top_id[p - 1]] < v) {
            e->top_id[p] = e->top_id[p - 1];
            p--;
        }
        e->top_id[p] = t;
    }
    e->n_top = have;
    for (int i = 0; i < have; i++) e->top_lp[i] = (float)(lg[e->top_id[i]] - lse);
    j->lp_pending = true;
}

static bool on_token(int32_t tok, void *user) {
    srv_job *j = user;
    /* n_predict 0 (llama-server's /completion): evaluate the prompt only */
    if (j->gp.n_predict == 0) return false;
    int n = stream_piece(j, tok);
    pthread_mutex_lock(&j->mu);
    /* the token and its log-probability (a failed allocation loses the
     * entry, not the text) */
    if (bd_grow(&j->ids, &j->cap_ids, (size_t)j->n_ids + 1, sizeof *j->ids)) j->ids[j->n_ids++] = tok;
    if (j->lp_pending && bd_grow(&j->lp, &j->cap_lp, j->n_lp + 1, sizeof *j->lp)) {
        j->lp_next.start = j->len;
        j->lp[j->n_lp++] = j->lp_next;
    }
    j->lp_pending = false;
    bool stop = n > 0 && job_append(j, j->piece, (size_t)n);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (stop || atomic_load(&j->cancel)) return false;
    if (bd_time_ms() > j->deadline_ms) {
        j->timed_out = true; /* read by the request thread after JOB_DONE */
        return false;
    }
    return true;
}

static void run_job(srv_slot *sl, srv_job *j) {
    srv_model *m = sl->model;
    pthread_mutex_lock(&j->mu);
    bool cancelled = atomic_load(&j->cancel);
    if (!cancelled) j->state = JOB_RUNNING;
    pthread_mutex_unlock(&j->mu);
    if (cancelled) {
        job_fail(j, 499, "cancelled before it started");
        return;
    }
    char err[480] = ""; /* fits j->err with its prefix */
    bd_gen_stats st;
    memset(&st, 0, sizeof st);
    j->ts = bd_textstream_create(m->m, false);
    if (j->ts) {
        j->piece_cap = bd_textstream_max_bytes(j->ts);
        j->piece = malloc((size_t)j->piece_cap);
    }
    bool ok = false;
    /* cache_prompt false: start from an empty cache (and drafter context) */
    if (!j->cache_prompt) bd_session_truncate(sl->sess, 0);
    if (sl->spec) {
        /* the request's draft limits, else the model's (a previous
         * request's must not stay) */
        int32_t nmax = j->spec_set ? j->spec_n_max : m->spp.n_max, nmin = j->spec_set ? j->spec_n_min : m->spp.n_min;
        float pmin = j->spec_set ? j->spec_p_min : m->spp.p_min;
        bd_spec_set_draft_limits(sl->spec, &nmax, &nmin, &pmin);
        j->spec_n_max = nmax;
        j->spec_n_min = nmin;
        j->spec_p_min = pmin;
    }
    j->gp.on_logits = j->top_logprobs >= 0 ? on_logits : NULL;
    if (!j->ts || !j->piece) {
        snprintf(err, sizeof err, "out of memory");
    } else if (j->forced) {
        /* test hook: the output is the given tokens, nothing is generated */
        st.n_prompt = j->n_prompt;
        snprintf(st.spec.type, sizeof st.spec.type, "none");
        int k = 0;
        bool go = true;
        while (go && k < j->n_forced && (j->gp.n_predict < 0 || k < j->gp.n_predict)) go = on_token(j->forced[k++], j);
        st.n_gen = k;
        st.stopped_eog = go && k == j->n_forced;
        ok = true;
    } else if (sl->spec) {
        ok = bd_spec_generate(sl->spec, j->prompt, j->n_prompt, &j->gp, on_token, j, &st, err, sizeof err);
    } else {
        ok = bd_generate(sl->sess, j->prompt, j->n_prompt, &j->gp, on_token, j, &st, err, sizeof err);
    }
    int n = j->ts && j->piece ? stream_piece(j, -1) : 0;
    pthread_mutex_lock(&j->mu);
    if (n > 0 && !j->finish) job_append(j, j->piece, (size_t)n);
    j->st = st;
    j->ok = ok;
    if (!ok) {
        j->err_status = 500;
        snprintf(j->err, sizeof j->err, "generation failed: %s", err);
    }
    if (!j->finish) j->finish = st.stopped_eog ? "stop" : "length";
    if (ok) srv_metrics_job(m->srv, &st); /* before DONE: a client that got its answer sees it counted */
    j->safe = j->len;
    j->state = JOB_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* Prefix routing: tokens of j's prompt the slot's cache already holds. An
 * idle slot's session is not touched by its worker (it is waiting for a
 * job under qmu), so reading it under qmu is safe. */
static int32_t slot_match(const srv_slot *sl, const srv_job *j) {
    const int32_t *t = bd_session_tokens(sl->sess);
    int32_t n = bd_session_length(sl->sess), k = 0;
    while (k < n && k < j->n_prompt && t[k] == j->prompt[k]) k++;
    return k;
}

/* How well slot sl suits job j: the prompt tokens its cache already holds
 * (the longest common prefix), minus the cached tokens the job would throw
 * away. Between slots that would discard as much, the longer prefix wins;
 * a new conversation goes to an empty (or the shortest) cache instead of
 * evicting another conversation for the sake of a shared chat header. */
static int64_t slot_score(const srv_slot *sl, const srv_job *j) {
    int32_t match = slot_match(sl, j);
    return 2 * (int64_t)match - bd_session_length(sl->sess);
}

/* Whether another idle slot of the model suits j better than sl (above):
 * then sl leaves j to it (that slot's worker wakes on the same broadcast).
 * Under qmu. */
static bool better_slot_idle(const srv_slot *sl, const srv_job *j) {
    if (!j->cache_prompt) return false;
    const srv_model *m = sl->model;
    bool have = false;
    int64_t mine = 0;
    for (int i = 0; i < m->n_slots; i++) {
        const srv_slot *o = &m->slots[i];
        if (o == sl || o->busy) continue; /* (an idle slot whose worker is still starting counts too) */
        if (!have) {
            mine = slot_score(sl, j);
            have = true;
        }
        if (slot_score(o, j) > mine) return true;
    }
    return false;
}

void *srv_slot_main(void *arg) {
    srv_slot *sl = arg;
    server *s = sl->model->srv;
    pthread_mutex_lock(&s->qmu);
    for (;;) {
        srv_job *j = NULL, *prev = NULL;
        while (!s->quit && !atomic_load(&sl->model->quit)) {
            prev = NULL;
            for (j = s->qhead; j && (j->model != sl->model || better_slot_idle(sl, j)); j = j->next) prev = j;
            if (j) break;
            pthread_cond_wait(&s->qcv, &s->qmu);
        }
        if (!j) break; /* quit */
        if (prev) prev->next = j->next;
        else s->qhead = j->next;
        if (s->qtail == j) s->qtail = prev;
        j->next = NULL;
        s->n_queued--;
        s->n_running++;
        sl->busy = true;
        sl->cur = j;
        j->slot_id = sl->id; /* read by the request thread after JOB_DONE, or under qmu */
        pthread_mutex_unlock(&s->qmu);

        run_job(sl, j);

        pthread_mutex_lock(&s->qmu);
        srv_job_unref(j); /* under qmu: cur must not dangle for srv_sched_cancel_running */
        s->n_running--;
        sl->busy = false;
        sl->cur = NULL;
        pthread_cond_broadcast(&s->qcv);
    }
    pthread_mutex_unlock(&s->qmu);
    return NULL;
}
