/*
 * server_int.h - internals shared by the files of src/server/.
 *
 *   http.c     libmicrohttpd glue: routing, body limits, auth, CORS,
 *              responses, SSE streaming, disconnect detection
 *   auth.c     API keys, compared in constant time
 *   models.c   model registry: -m model, gallery models by name, loading,
 *              slots, chat templates
 *   sched.c    job queue, slot workers, generation, stop strings
 *   api.c, api_req.c, api_resp.c (api.h): /v1/chat/completions,
 *              /v1/completions: request fields, jobs, response bodies
 *   constrain.c  structured output: response_format / grammar /
 *              json_schema as a grammar per job (constrain.h)
 *   compat.c, llama_api.c, responses.c, gallery_api.c (compat.h):
 *              /v1/models, /health, llama-server's own endpoints,
 *              /v1/responses, LocalAI's gallery API
 *   metrics.c  counters and the Prometheus text
 *   server.c   start, shutdown, free
 */
#ifndef BD_SERVER_INT_H
#define BD_SERVER_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockdraft.h"
#include "../base/base.h"
#include "../chat/chat.h"
#include "../gallery/gallery.h"
#include "server.h"

struct MHD_Daemon;
struct MHD_Connection;

/* Errors (bd_err) and the clock (bd_time_ms) are base.h's. */

/* http.c: daemon lifecycle */
bool srv_http_start(server *s, char *err, size_t errlen);
void srv_http_quiesce(server *s); /* stop accepting connections */
void srv_http_stop(server *s);    /* close everything, join connection threads */

/* ------------------------------------------------------------------------
 * Models and slots (models.c)
 * ---------------------------------------------------------------------- */

typedef struct srv_model srv_model;
typedef struct srv_job srv_job;

typedef struct srv_slot {
    srv_model *model;
    int id;
    bd_session *sess;
    bd_spec *spec; /* NULL without a drafter */
    pthread_t thread;
    bool started;
    bool busy;     /* under server qmu */
    srv_job *cur;  /* the job being run, under server qmu (for shutdown) */
} srv_slot;

enum { MODEL_UNLOADED = 0, MODEL_LOADED = 1, MODEL_FAILED = 2 };

/* What a file was when a model was loaded from it: a change means the
 * model is reloaded (models.c). */
typedef struct srv_file_id {
    bool present;
    unsigned long long dev, ino, size;
    long long mtime_s, mtime_ns;
} srv_file_id;

struct srv_model {
    server *srv;
    char name[GALLERY_NAME_MAX];
    char target_path[GALLERY_PATH_MAX + 256];
    char draft_path[GALLERY_PATH_MAX + 256];
    char cfg_path[GALLERY_PATH_MAX + 256]; /* its gallery config, "" for the -m model */
    srv_file_id id_target, id_draft, id_cfg; /* taken before loading */
    bool has_cfg;
    gallery_config cfg;
    bool from_cli; /* the -m model */
    atomic_bool removed; /* deleted through /models/delete: no longer served (freed at exit) */
    /* lifetime: requests hold a model from srv_model_get to srv_model_put
     * (users, under models_mu). A model whose files changed, whose mapping
     * faulted or whose failed load may now succeed is retired -- taken off
     * the list, a fresh one loaded in its place -- and freed once no
     * request holds it (its workers finish their jobs first). */
    int users;
    bool retired;
    atomic_bool quit; /* its slot workers exit */
    /* loading */
    pthread_mutex_t load_mu;
    atomic_int state;    /* MODEL_* (written under load_mu; /v1/models reads it without) */
    char load_err[768];
    bd_model *m, *dm;
    bd_spec_params spp;
    int n_ctx;
    /* chat */
    chat_template *tmpl;  /* NULL when the template failed to parse (tmpl_err) */
    char tmpl_err[600];
    bool tmpl_fallback;   /* ChatML: the model has no template */
    bool reasoning;       /* the template knows <think> blocks */
    pthread_mutex_t gv_mu;
    struct bd_grammar_vocab *gvocab; /* for grammars, built on first use (constrain.c) */
    int tool_format;      /* chat_tool_format the template asks for (toolcall.h) */
    char *bos_str, *eos_str;
    /* slots */
    int n_slots;
    srv_slot *slots;
    srv_model *next;
};

/* Find a model by name -- the -m model's alias or an installed model of
 * the models folder, never a file path -- loading it on first use and
 * reloading it when its files changed since. Returns it held for the
 * request (srv_model_put when done with it, and with every job made from
 * it), or NULL with *status (404 unknown, 400 refused, 500 load failure)
 * and err. */
srv_model *srv_model_get(server *s, const char *name, int *status, char *err, size_t errlen);
/* Release what srv_model_get returned (NULL: nothing). */
void srv_model_put(server *s, srv_model *m);
/* One more reference to a model already held (for what outlives the
 * holder, as a stream); returns m. */
srv_model *srv_model_hold(server *s, srv_model *m);
/* Register the -m model as the default (before the socket opens, so no
 * request finds the server without it), then load it (a request for it
 * sent meanwhile waits for the load). */
bool srv_model_register_cli(server *s, char *err, size_t errlen);
bool srv_model_load_cli(server *s, char *err, size_t errlen);
/* Set the quit flag and join every slot worker (each finishes its job). */
void srv_models_stop_workers(server *s);
/* Stop workers (if not done) and free every model, then the thread pools. */
void srv_models_free(server *s);

/* ------------------------------------------------------------------------
 * Jobs (sched.c)
 * ---------------------------------------------------------------------- */

enum { JOB_QUEUED = 0, JOB_RUNNING = 1, JOB_DONE = 2 };

#define SRV_TOP_LOGPROBS_MAX 20

/* The log-probability of one generated token under the target's
 * distribution (log-softmax of its raw logits row), and the most likely
 * alternatives. start: the token's first byte in the job's text. */
typedef struct srv_logprob {
    int32_t id;
    float logprob;
    size_t start;
    int n_top;
    int32_t top_id[SRV_TOP_LOGPROBS_MAX];
    float top_lp[SRV_TOP_LOGPROBS_MAX];
} srv_logprob;

struct srv_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;                 /* under mu */
    srv_model *model;
    int32_t *prompt;          /* [n_prompt] owned */
    int n_prompt;
    bd_gen_params gp;
    char *stops[16];          /* owned */
    bool stop_keep[16];       /* the stop text stays in the output (a tool call's end tag) */
    int n_stops;
    double deadline_ms;       /* bd_time_ms() limit */
    bool cache_prompt;        /* reuse the slot's cache (else start from an empty one) */
    int top_logprobs;         /* -1: no log-probabilities; else alternatives per token (<= 20) */
    bool spec_set;            /* per-request draft limits (else the model's) */
    int32_t spec_n_max, spec_n_min; /* requested, then (after the run) in effect */
    float spec_p_min;
    bd_grammar *grammar;      /* owned; gp.grammar (NULL: unconstrained) */
    bd_logit_bias *bias;      /* owned; gp.sampling.logit_bias (the request's copy may be gone
                                 before the job runs: a stream returns at once) */
    int32_t *forced;          /* test hook (BLOCKDRAFT_TEST_HOOKS): emit these ids instead of generating */
    int n_forced;
    atomic_bool cancel;       /* client gone or shutdown */
    /* output, under mu */
    int state;                /* JOB_* */
    char *text;               /* generated text, stop strings cut off */
    size_t len, cap;
    size_t safe;              /* bytes of text that can be sent (no stop prefix pending) */
    size_t *marks;            /* [n_marks] end offset of each token's text, increasing */
    size_t n_marks, cap_marks;
    bool ok;
    int err_status;           /* HTTP status when !ok */
    char err[512];
    const char *finish;       /* "stop" / "length" */
    bool stop_hit;            /* a stop string cut the text */
    const char *stop_word;    /* the stop string that ended it (one of stops[]), or NULL */
    int32_t *ids;             /* [n_ids] generated tokens, in order */
    int n_ids;
    size_t cap_ids;
    int64_t id;               /* server-wide sequence number (llama-server's id_task) */
    int slot_id;              /* the slot that ran it (set under qmu when taken) */
    bool timed_out;
    bd_gen_stats st;
    srv_logprob *lp;          /* [n_lp] one per generated token (top_logprobs >= 0) */
    size_t n_lp, cap_lp;
    /* worker private */
    bd_textstream *ts;
    char *piece;              /* [piece_cap] one push of ts */
    int piece_cap;
    srv_logprob lp_next;      /* the token being emitted (on_logits -> on_token) */
    bool lp_pending;
    size_t max_stop;
    struct srv_job *next;     /* queue link, under qmu */
};

/* New job holding one reference for the caller. prompt is copied. */
srv_job *srv_job_create(srv_model *m, const int32_t *prompt, int n_prompt);
bool srv_job_add_stop(srv_job *j, const char *s, size_t n);
/* Copy gp.sampling.logit_bias into the job (j->bias); false on OOM. */
bool srv_job_own_bias(srv_job *j);
/* A stop string that stays in the output (generation ends after it). */
bool srv_job_add_stop_keep(srv_job *j, const char *s, size_t n);
void srv_job_unref(srv_job *j);
/* Queue; false (and *status 503) when the queue is full or the server is
 * stopping. The queue takes its own reference. */
bool srv_job_submit(server *s, srv_job *j, int *status, char *err, size_t errlen);
/* Cancel j; if it is still queued, take it out of the queue (so a client
 * that left does not hold a queue place). */
void srv_job_withdraw(server *s, srv_job *j);
/* Worker thread body for one slot. */
void *srv_slot_main(void *arg);
/* Wake all workers (quit flag or a new job). */
void srv_sched_wake(server *s);
/* Fail every job still queued with 503 (shutdown). */
void srv_sched_drop_queued(server *s);
/* Fail the queued jobs of model m (it is being freed). */
void srv_sched_drop_model(server *s, srv_model *m);
/* Cancel the jobs being generated (shutdown after the grace period). */
void srv_sched_cancel_running(server *s);

/* ------------------------------------------------------------------------
 * Metrics (metrics.c)
 * ---------------------------------------------------------------------- */

typedef struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t requests, requests_ok, requests_client_err, requests_server_err, rejected_busy;
    uint64_t completions, prompt_tokens, prompt_tokens_cached, gen_tokens;
    double prompt_ms, gen_ms;
    uint64_t spec_requests, spec_drafted, spec_accepted, spec_forwards, spec_gen_tokens;
} srv_metrics;

void srv_metrics_request(server *s, int status);
void srv_metrics_job(server *s, const bd_gen_stats *st);
char *srv_metrics_text(server *s); /* malloc'd */

/* ------------------------------------------------------------------------
 * Gallery jobs (gallery_api.c)
 * ---------------------------------------------------------------------- */

#define SRV_MAX_PULLS 64
typedef struct srv_pull srv_pull;

/* ------------------------------------------------------------------------
 * The server
 * ---------------------------------------------------------------------- */

struct server {
    server_params p;
    char host[64];
    bool loopback;          /* bound to 127.0.0.0/8 or ::1: Host names are checked */
    struct srv_conns *conns; /* connection tracking (http.c) */
    char models_dir[GALLERY_PATH_MAX];
    char *template_override; /* contents of --chat-template-file, or NULL */
    unsigned char key_hash[SERVER_MAX_KEYS][32]; /* SHA-256 of each API key */
    int n_keys;
    struct MHD_Daemon *mhd;
    int port;
    atomic_bool ready;
    atomic_bool stopping;   /* no new work accepted */
    atomic_bool shut_done;
    atomic_int active_requests; /* requests not yet completed (http.c) */
    /* models */
    pthread_mutex_t models_mu;
    srv_model *models;
    srv_model *retired;     /* replaced, freed once no request holds them */
    char cli_name[GALLERY_NAME_MAX]; /* the -m model's name, "" without -m */
    /* thread pools shared by every slot of every model, one per thread
     * count asked for (--threads, else a model config's threads): N slots
     * use one pool's threads, not N pools' (models.c) */
    pthread_mutex_t pools_mu;
    struct srv_pool {
        int n_threads; /* as asked; 0 = all CPUs */
        bd_threadpool *tp;
    } pools[8];
    int n_pools;
    char default_model[GALLERY_NAME_MAX]; /* "" when none */
    /* queue */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    srv_job *qhead, *qtail;
    int n_queued, n_running;
    bool quit;              /* workers exit */
    bool test_hooks;        /* BLOCKDRAFT_TEST_HOOKS=1 at start: the "test_output" request field */
    srv_metrics met;
    /* gallery pulls */
    atomic_bool pull_cancel; /* set at shutdown: downloads stop, partials stay */
    pthread_mutex_t pulls_mu;
    srv_pull *pulls[SRV_MAX_PULLS];
    int n_pulls;
};

/* ------------------------------------------------------------------------
 * HTTP requests as the handlers see them (http.c)
 * ---------------------------------------------------------------------- */

typedef struct srv_req {
    server *srv;
    struct MHD_Connection *conn;
    const char *method, *url;
    char *body;       /* NUL-terminated */
    size_t body_len;
    int status;       /* set by the send helpers, for the log and metrics */
    const char *retry_after; /* when set: a Retry-After header on the response */
} srv_req;

/* Response helpers: each queues a response and returns the MHD result. */
int srv_send_json(srv_req *r, int status, json_t *body /* stolen */);
int srv_send_error(srv_req *r, int status, const char *type, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int srv_send_text(srv_req *r, int status, const char *ctype, const char *text);
/* A streamed (SSE) body. http.c calls next() until *done; next() waits a
 * bounded time (<= ~250 ms) and returns a malloc'd chunk, or NULL when
 * nothing is ready yet (http.c then checks the client is still there and
 * asks again). release() is called exactly once when the response ends,
 * completed or not (client gone: the job must be cancelled). */
typedef struct srv_stream srv_stream;
struct srv_stream {
    char *(*next)(srv_stream *st, size_t *n, bool *done);
    void (*release)(srv_stream *st);
    struct MHD_Connection *conn;
    server *srv;
    char *buf; /* pending bytes [off, len) */
    size_t len, off;
    bool done;
};
/* Takes ownership of st (release() is called even if queuing fails). */
int srv_send_stream(srv_req *r, srv_stream *st);
/* Whether the client's socket is still open. */
bool srv_client_alive(struct MHD_Connection *c);

/* Handlers (api.c, gallery_api.c) */
int api_chat(srv_req *r);
int api_completions(srv_req *r);
int gallery_api_available(srv_req *r);
int gallery_api_apply(srv_req *r);
int gallery_api_job(srv_req *r, const char *id);
void gallery_api_free(server *s); /* join pull threads, free jobs */

/* auth.c */
bool srv_auth_init(server *s, char *err, size_t errlen);
bool srv_auth_check(const server *s, const char *key);

#endif
