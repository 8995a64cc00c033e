/*
 * metrics.c - server counters and their Prometheus text exposition
 * (GET /metrics). Names follow llama-server's where one exists, under the
 * prefix blockdraft_.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_int.h"

void srv_metrics_request(server *s, int status) {
    srv_metrics *m = &s->met;
    pthread_mutex_lock(&m->mu);
    m->requests++;
    if (status < 400) m->requests_ok++;
    else if (status < 500) m->requests_client_err++;
    else m->requests_server_err++;
    if (status == 503) m->rejected_busy++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_job(server *s, const bd_gen_stats *st) {
    srv_metrics *m = &s->met;
    pthread_mutex_lock(&m->mu);
    m->completions++;
    m->prompt_tokens += (uint64_t)st->n_prompt;
    m->prompt_tokens_cached += (uint64_t)st->n_prompt_cached;
    m->gen_tokens += (uint64_t)st->n_gen;
    m->prompt_ms += st->prompt_ms;
    m->gen_ms += st->gen_ms;
    if (strcmp(st->spec.type, "none") && st->spec.type[0]) {
        m->spec_requests++;
        m->spec_drafted += (uint64_t)st->spec.n_drafted;
        m->spec_accepted += (uint64_t)st->spec.n_accepted;
        m->spec_forwards += (uint64_t)st->spec.target_forwards;
        m->spec_gen_tokens += (uint64_t)st->n_gen;
    }
    pthread_mutex_unlock(&m->mu);
}

static void put(bd_buf *b, const char *name, const char *type, const char *help, double v) {
    bd_buf_printf(b, "# HELP blockdraft_%s %s\n# TYPE blockdraft_%s %s\nblockdraft_%s %.17g\n", name, help, name, type,
                  name, v);
}

char *srv_metrics_text(server *s) {
    srv_metrics m;
    pthread_mutex_lock(&s->met.mu);
    m = s->met;
    pthread_mutex_unlock(&s->met.mu);
    pthread_mutex_lock(&s->qmu);
    int queued = s->n_queued, running = s->n_running;
    pthread_mutex_unlock(&s->qmu);
    bd_buf b = {0};
    put(&b, "requests_total", "counter", "HTTP requests answered.", (double)m.requests);
    put(&b, "requests_success_total", "counter", "Requests answered with a 2xx/3xx status.", (double)m.requests_ok);
    put(&b, "requests_client_errors_total", "counter", "Requests answered with a 4xx status.",
        (double)m.requests_client_err);
    put(&b, "requests_server_errors_total", "counter", "Requests answered with a 5xx status.",
        (double)m.requests_server_err);
    put(&b, "requests_rejected_busy_total", "counter", "Requests refused with 503 (queue full or shutting down).",
        (double)m.rejected_busy);
    put(&b, "completions_total", "counter", "Generations run to completion.", (double)m.completions);
    put(&b, "prompt_tokens_total", "counter", "Prompt tokens processed.", (double)m.prompt_tokens);
    put(&b, "prompt_tokens_cached_total", "counter",
        "Prompt tokens reused from a slot's cache (prefix reuse; not forwarded again).",
        (double)m.prompt_tokens_cached);
    put(&b, "prompt_seconds_total", "counter", "Time spent on prompts.", m.prompt_ms / 1e3);
    put(&b, "tokens_predicted_total", "counter", "Tokens generated.", (double)m.gen_tokens);
    put(&b, "tokens_predicted_seconds_total", "counter", "Time spent generating.", m.gen_ms / 1e3);
    put(&b, "prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
        m.prompt_ms > 0 ? 1e3 * (double)m.prompt_tokens / m.prompt_ms : 0);
    put(&b, "predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
        m.gen_ms > 0 ? 1e3 * (double)m.gen_tokens / m.gen_ms : 0);
    put(&b, "spec_decode_requests_total", "counter", "Generations that used speculative decoding.",
        (double)m.spec_requests);
    put(&b, "spec_decode_num_draft_tokens_total", "counter", "Tokens drafted.", (double)m.spec_drafted);
    put(&b, "spec_decode_num_accepted_tokens_total", "counter", "Drafted tokens the target accepted.",
        (double)m.spec_accepted);
    put(&b, "spec_decode_target_forwards_total", "counter", "Target forward passes in speculative generations.",
        (double)m.spec_forwards);
    put(&b, "spec_decode_tau", "gauge", "Tokens emitted per target forward over all speculative generations.",
        m.spec_forwards ? (double)m.spec_gen_tokens / (double)m.spec_forwards : 0);
    put(&b, "spec_decode_acceptance_rate", "gauge", "Accepted / drafted tokens.",
        m.spec_drafted ? (double)m.spec_accepted / (double)m.spec_drafted : 0);
    put(&b, "requests_processing", "gauge", "Requests being generated now.", running);
    put(&b, "requests_deferred", "gauge", "Requests waiting in the queue.", queued);
    if (b.failed) {
        bd_buf_free(&b);
        return NULL;
    }
    return bd_buf_take(&b);
}
