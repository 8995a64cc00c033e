/*
 * server.h - `blockdraft serve`: an OpenAI-compatible HTTP server.
 *
 * Endpoints (all JSON; errors are OpenAI error objects, except on
 * llama-server's own endpoints, which answer in its shape):
 *   POST /v1/chat/completions   chat through the model's Jinja template
 *   POST /v1/completions        raw prompt completion
 *   POST /v1/responses          OpenAI's Responses API (responses.c)
 *   GET  /v1/models[/{id}]      models that can be served, with their status
 *   GET  /health                503 while the -m model loads, then 200 (no key needed)
 *   GET  /ready                 200 once start-up loading is done, else 503
 *   GET  /metrics               Prometheus text
 *   llama-server's own (llama_api.c): POST /completion (/completions),
 *   /tokenize, /detokenize, /apply-template; GET /props, /slots
 *   LocalAI's gallery API (gallery_api.c): POST /models/apply,
 *   /models/delete/{name}; GET /models/jobs[/{uuid}], /models/available,
 *   /models/galleries
 * Every completion carries `usage`, `timings` and `speculative`; with the
 * request field "return_prompt_ids": true (a blockdraft extension) a
 * non-streamed response also carries "prompt_ids" and "generated_ids", the
 * tokens the model was given and those it generated (first choice). Chat
 * prompts are tokenized so that the messages' text never becomes a control
 * token (chat_params.user_spans, bd_tokenize_guarded); a /v1/completions
 * prompt is the caller's own and keeps them. Request fields: api_req.c
 * (each implemented or refused by name); structured output (response_format,
 * grammar, json_schema, text.format, serve --grammar/-j): constrain.h.
 *
 * Test hook: with BLOCKDRAFT_TEST_HOOKS=1 in the environment at start, the
 * request field "test_output" (a string) replaces the generation: its
 * tokens are emitted as if generated (no forward pass) and take the normal
 * output path. For tests whose models are random (tool calls); without the
 * variable the field is refused like any unknown field.
 *
 * Models: the -m/-md pair given on the command line is loaded at start
 * (named by the first --alias, else after the file; the other aliases and,
 * with --any-model-name, any unknown name reach it too); models installed in the models
 * folder are resolved by name through their gallery config and loaded on
 * their first request (and stay loaded). A model whose files change on
 * disk (or whose load failed and whose files then change) is loaded again
 * for the next request (models.c).
 *
 * Who may call it (http.c, SECURITY.md): a foreign Origin is refused
 * unless --cors lists it, a POST must be JSON, and on a loopback address
 * only localhost Host names are answered. Each loaded model has N slots,
 * each with its own session (and drafter state) and worker thread; a
 * bounded queue sits in front of them.
 *
 * Threading: libmicrohttpd runs one thread per connection; a request's
 * thread renders and tokenizes the prompt, queues a job and waits for (or
 * streams) its tokens, watching its socket so a client that goes away
 * cancels its job.
 */
#ifndef BD_SERVER_H
#define BD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockdraft.h"

#define SERVER_MAX_KEYS 16
#define SERVER_MAX_ALIASES 16

enum { SERVER_REASONING_AUTO = 0, SERVER_REASONING_NONE = 1 };

typedef struct server_params {
    const char *host;          /* bind address; default 127.0.0.1 */
    int port;                  /* 0 = any free port (see server_port) */
    const char *api_keys[SERVER_MAX_KEYS]; /* none = open server */
    int n_api_keys;
    const char *cors_origin;   /* --cors: comma-separated web origins (or *) allowed to call
                                  the server; NULL = none but its own (http.c) */
    /* models */
    const char *model_path;    /* -m (may be NULL when serving the models folder) */
    const char *draft_path;    /* -md */
    const char *alias;         /* name of the -m model; default: file name without .gguf */
    const char *aliases[SERVER_MAX_ALIASES]; /* further names of the -m model (--alias a,b,c) */
    int n_aliases;
    bool any_model_name;       /* a request for an unknown model name goes to the -m model */
    const char *chat_template; /* --chat-template: Jinja source or "chatml" (instead of the model's) */
    int reasoning_format;      /* SERVER_REASONING_* */
    const char *chat_template_file; /* Jinja template for the -m model instead of its own */
    const char *models_dir;    /* NULL = gallery_models_dir() */
    int spec_n_max;            /* 0 = model default */
    int spec_n_min;            /* 0 = model default */
    float spec_p_min;          /* < 0 = model default */
    int spec_type;             /* -1 = from the draft file; else a bd_spec_type */
    int spec_adaptive;         /* -1 = the model's config, else the type's default; 0 / 1 */
    int n_ctx;                 /* 0 = min(4096, trained context); < 0 = trained context */
    int n_threads;             /* of the thread pool all slots share; 0 = all cores */
    bd_session_params rope;    /* the -m model's RoPE overrides (rope_* and yarn_orig_ctx; the rest unused) */
    int32_t type_k, type_v;    /* -ctk / -ctv: every model's KV cache types (enum bd_kv_type; 0 = the
                                  model config's cache_type_k / _v, else f32) */
    int32_t draft_type_k, draft_type_v; /* -ctkd / -ctvd: every drafter's (0 = the config's
                                  options draft_cache_type_k / _v, else f32) */
    int parallel;              /* slots per model; 0 = 1 with a drafter, else 2 */
    /* request defaults from the command line (llama-server's -n, --temp,
     * ...): a request field wins, these win over a model config */
    bool has_temp, has_top_k, has_top_p, has_min_p, has_seed, has_repeat_penalty, has_repeat_last_n;
    float temp, top_p, min_p, repeat_penalty;
    int top_k, repeat_last_n;
    long long seed;            /* -1 = random per request */
    int n_predict;             /* default max tokens; -1 = until EOG / context end */
    const char *grammar;       /* --grammar / -j (as GBNF): the grammar of requests that give none
                                  (no grammar, json_schema or JSON response_format); NULL = none.
                                  Checked against the -m model's vocabulary at start */
    bool slots_endpoint;       /* GET /slots (llama-server: on unless --no-slots) */
    /* limits */
    int queue_max;             /* queued (not running) requests before 503; default 16 */
    size_t max_body;           /* request body bytes; default 8 MiB */
    int max_tokens;            /* largest max_tokens accepted; default n_ctx */
    double timeout_s;          /* wall time per request; default 600 */
    int conn_limit;            /* simultaneous connections; default 64 (beyond it, idle and
                                  incomplete ones are evicted: http.c) */
    bool verbose;              /* log one line per request to stderr */
} server_params;

void server_params_init(server_params *p);

typedef struct server server;

/* Load the -m model (if any), open the socket and start serving. NULL with
 * err on failure. */
server *server_start(const server_params *p, char *err, size_t errlen);
/* The port actually bound. */
int server_port(const server *s);
/* Stop accepting, let running requests finish for up to grace_s seconds,
 * then cancel what is left (queued requests get 503), stop all threads. */
void server_shutdown(server *s, double grace_s);
/* Shut down (if not done) and free everything. */
void server_free(server *s);

#endif
