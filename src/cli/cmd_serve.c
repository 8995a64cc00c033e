/*
 * cmd_serve.c - `blockdraft serve`: the OpenAI-compatible server
 * (src/server/server.h). Runs until SIGTERM or SIGINT, then shuts down
 * gracefully: running requests get --shutdown-grace seconds to finish.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "blockdraft.h"
#include "cli.h"
#include "../server/server.h"

static void usage(void) {
    fprintf(stderr,
            "usage: blockdraft serve [-m MODEL.gguf [-md DRAFT.gguf] [--alias NAME]] [options]\n"
            "Serves the -m model (loaded at start) and every model installed in the models folder\n"
            "(loaded on its first request), by name, with the OpenAI API.\n"
            "  -m, --model FILE          target model; -md, --model-draft FILE  its drafter\n"
            "  --alias NAME              name of the -m model (default: file name without .gguf)\n"
            "  --chat-template-file F    Jinja chat template for the -m model instead of its own\n"
            "  --models-dir DIR          models folder (default $BLOCKDRAFT_MODELS or ~/.local/share/blockdraft/models)\n"
            "  --host ADDR               bind address (default 127.0.0.1; on a loopback address only\n"
            "                            localhost Host names are answered)\n"
            "  --port N                  port (default 8080; 0 = any free port)\n"
            "  --api-key KEY             require this key (repeatable, or comma-separated);\n"
            "                            also read from BLOCKDRAFT_API_KEY (comma-separated)\n"
            "  --cors ORIGIN[,ORIGIN]    web origins allowed to call the server (CORS; * = any); requests\n"
            "                            from other origins are refused (default: none but its own)\n"
            "  --parallel N              slots per model (default 1 with a drafter, else 2)\n"
            "  -c, --ctx-size N          context per slot (default min(4096, trained context))\n"
            "  -t, --threads N           threads of the pool all slots share (default: all cores)\n"
            "  --spec-type T             none | draft-dflash | draft-simple | ngram-simple (-m model)\n"
            "  --spec-draft-n-max N      max drafted tokens per step\n"
            "  --queue N                 requests that may wait for a slot before 503 (default 16)\n"
            "  --max-body BYTES          request body limit (default 8388608)\n"
            "  --max-tokens N            largest max_tokens a request may ask for (default: context)\n"
            "  --timeout SEC             wall time per request (default 600)\n"
            "  --conn-limit N            simultaneous connections (default 64)\n"
            "  --shutdown-grace SEC      on SIGTERM, time for running requests to finish (default 10)\n"
            "  -v, --verbose             log every request\n");
}

/* Split a comma-separated key list into p->api_keys; list is kept in
 * owned[] (freed at exit) whether or not this succeeds. */
static int add_keys(server_params *p, char *list, char **owned, int *n_owned) {
    owned[(*n_owned)++] = list;
    int before = p->n_api_keys;
    for (char *save = NULL, *k = strtok_r(list, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        while (*k == ' ') k++;
        if (!*k) continue;
        if (p->n_api_keys >= SERVER_MAX_KEYS) {
            fprintf(stderr, "blockdraft serve: at most %d API keys\n", SERVER_MAX_KEYS);
            return -1;
        }
        p->api_keys[p->n_api_keys++] = k;
    }
    if (p->n_api_keys == before) {
        /* an empty key must not silently leave the server open */
        fprintf(stderr, "blockdraft serve: an API key list is empty\n");
        return -1;
    }
    return 0;
}

int cmd_serve(int argc, char **argv) {
    server_params p;
    server_params_init(&p);
    double grace = 10;
    const char *v;
    char *owned[SERVER_MAX_KEYS + 2];
    int n_owned = 0, rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (arg_take(argc, argv, &i, (const char *[]){"-m", "--model", NULL}, &v)) p.model_path = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-md", "--model-draft", "--spec-draft-model", NULL}, &v))
            p.draft_path = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--alias", "-a", NULL}, &v)) p.alias = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--models-dir", NULL}, &v)) p.models_dir = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--chat-template-file", NULL}, &v))
            p.chat_template_file = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--host", NULL}, &v)) p.host = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--port", NULL}, &v)) p.port = arg_i32(a, v, 0, 65535);
        else if (arg_take(argc, argv, &i, (const char *[]){"--api-key", NULL}, &v)) {
            char *c = n_owned < SERVER_MAX_KEYS ? strdup(v) : NULL;
            if (!c || add_keys(&p, c, owned, &n_owned) < 0) {
                if (!c) fprintf(stderr, "blockdraft serve: too many --api-key options\n");
                goto out;
            }
        } else if (arg_take(argc, argv, &i, (const char *[]){"--cors", NULL}, &v)) p.cors_origin = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--parallel", "-np", NULL}, &v))
            p.parallel = arg_i32(a, v, 1, 64);
        else if (arg_take(argc, argv, &i, (const char *[]){"-c", "--ctx-size", NULL}, &v))
            p.n_ctx = arg_i32(a, v, 16, 1 << 22);
        else if (arg_take(argc, argv, &i, (const char *[]){"-t", "--threads", NULL}, &v))
            p.n_threads = arg_i32(a, v, 1, 256);
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-type", NULL}, &v)) {
            bd_spec_type t;
            if (!bd_spec_type_parse(v, &t)) {
                fprintf(stderr, "blockdraft serve: unknown --spec-type '%s'\n", v);
                goto out;
            }
            p.spec_type = (int)t;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-n-max", NULL}, &v))
            p.spec_n_max = arg_i32(a, v, 1, 63);
        else if (arg_take(argc, argv, &i, (const char *[]){"--queue", NULL}, &v)) p.queue_max = arg_i32(a, v, 0, 100000);
        else if (arg_take(argc, argv, &i, (const char *[]){"--max-body", NULL}, &v))
            p.max_body = (size_t)arg_i32(a, v, 1024, 1 << 30);
        else if (arg_take(argc, argv, &i, (const char *[]){"--max-tokens", NULL}, &v))
            p.max_tokens = arg_i32(a, v, 1, 1 << 22);
        else if (arg_take(argc, argv, &i, (const char *[]){"--timeout", NULL}, &v))
            p.timeout_s = arg_f32(a, v, 0.001f, 86400);
        else if (arg_take(argc, argv, &i, (const char *[]){"--conn-limit", NULL}, &v))
            p.conn_limit = arg_i32(a, v, 4, 100000);
        else if (arg_take(argc, argv, &i, (const char *[]){"--shutdown-grace", NULL}, &v))
            grace = arg_f32(a, v, 0, 3600);
        else if (arg_is(a, "-v", "--verbose")) p.verbose = true;
        else if (arg_is(a, "-h", "--help")) {
            usage();
            rc = 0;
            goto out;
        } else {
            fprintf(stderr, "blockdraft serve: unknown option '%s'\n", a);
            usage();
            goto out;
        }
    }
    if (p.draft_path && !p.model_path) {
        fprintf(stderr, "blockdraft serve: -md needs -m\n");
        goto out;
    }
    const char *env = getenv("BLOCKDRAFT_API_KEY");
    if (env && *env) {
        char *c = strdup(env);
        if (!c || add_keys(&p, c, owned, &n_owned) < 0) goto out;
    }
    /* gallery_resolve_model reads the models folder from the environment */
    if (p.models_dir) setenv("BLOCKDRAFT_MODELS", p.models_dir, 1);

    /* signals: handled by sigwait in this thread only; every thread the
     * server starts inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[1024];
    /* a model file truncated while served fails its requests instead of
     * killing the server (models.c reloads it once it changes again) */
    if (!bd_mmap_guard_install(err, sizeof err)) fprintf(stderr, "blockdraft serve: warning: %s\n", err);
    server *s = server_start(&p, err, sizeof err);
    if (!s) {
        fprintf(stderr, "blockdraft serve: %s\n", err);
        rc = 1;
        goto out;
    }
    fprintf(stderr, "blockdraft serve: listening on http://%s:%d%s\n", p.host, server_port(s),
            p.n_api_keys ? " (API key required)" : "");
    if (!p.n_api_keys && strcmp(p.host, "127.0.0.1") && strcmp(p.host, "::1") && strncmp(p.host, "127.", 4))
        fprintf(stderr, "blockdraft serve: warning: listening on %s without an API key: anyone who can reach this "
                        "address can use the server and install models (--api-key)\n", p.host);
    fflush(stderr);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "blockdraft serve: %s received, shutting down (grace %.0f s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            grace);
    server_shutdown(s, grace);
    server_free(s);
    fprintf(stderr, "blockdraft serve: stopped\n");
    rc = 0;
out:
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    return rc;
}
