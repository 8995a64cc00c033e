/*
 * server.c - start, graceful shutdown and teardown of a server.
 *
 * Shutdown order (each step makes the next one safe):
 *   1. stop accepting connections; new work on open connections gets 503;
 *   2. wait up to the grace period for queued and running jobs to finish;
 *   3. fail the jobs still queued (503) and cancel the running ones, which
 *      stop at their next token and answer with what they have;
 *   4. join the slot workers, then libmicrohttpd's connection threads
 *      (every job is done, so no request thread is left waiting), then the
 *      gallery pull threads (pulls write only `.partial` files until their
 *      atomic rename, so nothing half-written is ever in place).
 * Gallery downloads are cancelled at step 1 (fetch_opts.cancel): they end
 * within a fraction of a second, keeping their partials for a resume.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "constrain.h"

void server_params_init(server_params *p) {
    memset(p, 0, sizeof *p);
    p->host = "127.0.0.1";
    p->port = 8080;
    p->spec_type = -1;
    p->spec_adaptive = -1;
    p->queue_max = 16;
    p->max_body = 8u << 20;
    p->timeout_s = 600;
    p->conn_limit = 64;
    p->spec_p_min = -1;
    p->seed = -1;
    p->n_predict = -1;
    p->slots_endpoint = true;
}

/* The default grammar compiles: over the -m model's vocabulary (token
 * elements by text need one), else as text. */
static bool default_grammar_check(server *s, char *err, size_t errlen) {
    char e[800];
    bd_grammar *g = NULL;
    int status;
    srv_model *m = s->cli_name[0] ? srv_model_get(s, s->cli_name, &status, e, sizeof e) : NULL;
    if (m) g = srv_grammar_compile(m, s->p.grammar, e, sizeof e);
    else if (!s->cli_name[0]) g = bd_grammar_create(s->p.grammar, strlen(s->p.grammar), NULL, e, sizeof e);
    srv_model_put(s, m);
    bd_grammar_free(g);
    if (!g) return bd_err(err, errlen, "--grammar: %s", e);
    return true;
}

server *server_start(const server_params *p, char *err, size_t errlen) {
    server *s = calloc(1, sizeof *s);
    if (!s) return bd_err(err, errlen, "out of memory"), NULL;
    s->p = *p;
    snprintf(s->host, sizeof s->host, "%s", p->host ? p->host : "127.0.0.1");
    if (s->p.conn_limit < 4) s->p.conn_limit = 4;
    if (s->p.queue_max < 0) s->p.queue_max = 0;
    if (s->p.timeout_s <= 0) s->p.timeout_s = 600;
    if (s->p.max_body < 1024) s->p.max_body = 1024;
    pthread_mutex_init(&s->models_mu, NULL);
    pthread_mutex_init(&s->pools_mu, NULL);
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    pthread_mutex_init(&s->met.mu, NULL);
    pthread_mutex_init(&s->pulls_mu, NULL);
    atomic_init(&s->ready, false);
    atomic_init(&s->stopping, false);
    atomic_init(&s->shut_done, false);
    atomic_init(&s->active_requests, 0);
    atomic_init(&s->pull_cancel, false);
    char e[600];
    if (p->models_dir) snprintf(s->models_dir, sizeof s->models_dir, "%s", p->models_dir);
    else if (!gallery_models_dir(s->models_dir, sizeof s->models_dir, e, sizeof e)) s->models_dir[0] = '\0';
    if (p->chat_template_file) {
        size_t len;
        if (!gallery_read_file(p->chat_template_file, 1u << 20, &s->template_override, &len, e, sizeof e)) {
            bd_err(err, errlen, "--chat-template-file: %s", e);
            server_free(s);
            return NULL;
        }
    }
    if (p->chat_template && !s->template_override) {
        /* --chat-template: a Jinja source, or the name "chatml" */
        s->template_override = strdup(!strcmp(p->chat_template, "chatml") ? chat_template_chatml : p->chat_template);
        if (!s->template_override) {
            bd_err(err, errlen, "out of memory");
            server_free(s);
            return NULL;
        }
    }
    const char *th = getenv("BLOCKDRAFT_TEST_HOOKS");
    s->test_hooks = th && !strcmp(th, "1");
    /* the -m model is the default before any request can arrive: one sent
     * while it loads waits for the load instead of being told that
     * 'model' is required */
    if (p->model_path && !srv_model_register_cli(s, err, errlen)) {
        server_free(s);
        return NULL;
    }
    if (!srv_auth_init(s, err, errlen) || !srv_http_start(s, err, errlen)) {
        server_free(s);
        return NULL;
    }
    /* the socket is open (so /health and /ready answer) while the model loads */
    if (p->model_path && !srv_model_load_cli(s, err, errlen)) {
        server_free(s);
        return NULL;
    }
    if (p->grammar && !default_grammar_check(s, err, errlen)) {
        server_free(s);
        return NULL;
    }
    atomic_store(&s->ready, true);
    return s;
}

int server_port(const server *s) { return s->port; }

static bool idle(server *s) {
    pthread_mutex_lock(&s->qmu);
    bool r = s->n_queued == 0 && s->n_running == 0;
    pthread_mutex_unlock(&s->qmu);
    return r;
}

void server_shutdown(server *s, double grace_s) {
    if (atomic_load(&s->shut_done)) return;
    atomic_store(&s->stopping, true);
    /* gallery downloads stop now, whatever the grace period: a model can
     * take hours; their partials stay for the next pull to resume */
    atomic_store(&s->pull_cancel, true);
    srv_http_quiesce(s);
    double until = bd_time_ms() + grace_s * 1e3;
    while (!idle(s) && bd_time_ms() < until) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    srv_sched_drop_queued(s);
    srv_sched_cancel_running(s);
    srv_models_stop_workers(s);
    /* every job is done: let responses (final stream chunks) go out before
     * the daemon closes the sockets */
    until = bd_time_ms() + 5e3;
    while (atomic_load(&s->active_requests) > 0 && bd_time_ms() < until) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    srv_http_stop(s);
    gallery_api_free(s);
    atomic_store(&s->shut_done, true);
}

void server_free(server *s) {
    if (!s) return;
    server_shutdown(s, 0);
    srv_models_free(s);
    pthread_mutex_destroy(&s->models_mu);
    pthread_mutex_destroy(&s->pools_mu);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    pthread_mutex_destroy(&s->met.mu);
    pthread_mutex_destroy(&s->pulls_mu);
    free(s->template_override);
    free(s);
}
