/*
 * cmd_serve.c - `blockdraft serve`: the OpenAI-, llama-server- and
 * LocalAI-compatible server (src/server/server.h). Runs until SIGTERM or
 * SIGINT, then shuts down gracefully: running requests get
 * --shutdown-grace seconds to finish.
 *
 * The command line takes llama-server's flags (its tools/server/README.md,
 * llama.cpp v0.5.0), so a llama-server command line runs unchanged: each
 * flag a user is likely to pass is accepted with llama-server's meaning,
 * accepted with a one-line note when it has nothing to act on here (GPU
 * offload, CPU affinity, batch sizes: blockdraft runs on the CPU and picks
 * its own batches), or refused with a message naming what to use instead.
 * Never silently ignored.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "blockdraft.h"
#include "cli.h"
#include "../chat/json_schema.h"
#include "../server/server.h"

static void usage(void) {
    fprintf(stderr,
            "usage: blockdraft serve [-m MODEL.gguf [-md DRAFT.gguf] [-a NAME]] [options]\n"
            "Serves the -m model (loaded at start) and every model installed in the models folder\n"
            "(loaded on its first request), by name: OpenAI API (/v1/chat/completions, /v1/completions,\n"
            "/v1/responses, /v1/models), llama-server's own endpoints (/completion, /tokenize,\n"
            "/detokenize, /apply-template, /props, /slots, /health, /metrics) and LocalAI's gallery API\n"
            "(/models/apply, /models/jobs, /models/delete, /models/available, /models/galleries).\n"
            "Flags are llama-server's (grouped as its --help); those with nothing to act on here are\n"
            "accepted with a note, those blockdraft cannot honour are refused naming the alternative.\n"
            "\n"
            "----- common params -----\n"
            "  -h, --help, --usage        print usage and exit\n"
            "  --version                  print the version and exit\n"
            "  -t, --threads N            threads of the pool all slots share (default -1: all cores)\n"
            "  -c, --ctx-size N           context per slot (default min(4096, trained); 0 = trained)\n"
            "  -n, --predict, --n-predict N  default max tokens of a request (-1 = until EOG / context end)\n"
            "  -fa, --flash-attn [on|off|auto]  accepted: attention is always fused here\n"
            "  -m, --model FNAME          target model, loaded at start\n"
            "  -md, --model-draft, --spec-draft-model FNAME  its drafter (DFlash or a small draft model)\n"
            "  -ngl, --gpu-layers, --n-gpu-layers N  accepted and ignored (CPU only), with a note\n"
            "  -v, --verbose              log every request\n"
            "\n"
            "----- sampling params -----  (defaults of requests that leave the field out)\n"
            "  -s, --seed SEED            RNG seed (default -1: random per request)\n"
            "  --temp, --temperature N    temperature (default 0.8; <= 0: greedy)\n"
            "  --top-k N                  top-k (default 40, 0 = off)\n"
            "  --top-p N                  top-p (default 0.95, 1.0 = off)\n"
            "  --min-p N                  min-p (default 0.05, 0.0 = off)\n"
            "  --repeat-penalty N         repetition penalty (default 1.0 = off)\n"
            "  --repeat-last-n N          tokens it looks back (default 64, 0 = off, -1 = context)\n"
            "  --grammar GBNF             grammar of the requests that give none (no grammar, json_schema\n"
            "                             or JSON response_format of their own)\n"
            "  --grammar-file FNAME       the same, read from a file\n"
            "  -j, --json-schema SCHEMA   the same as a JSON Schema\n"
            "  -jf, --json-schema-file FNAME  a JSON Schema file\n"
            "\n"
            "----- server-specific params -----\n"
            "  --host HOST                bind address (default 127.0.0.1)\n"
            "  --port PORT                port (default 8080; 0 = any free port)\n"
            "  -a, --alias NAME[,NAME...] names of the -m model (repeatable); the first is its id\n"
            "  -np, --parallel N          slots per model (default -1: 1 with a drafter, else 2)\n"
            "  --api-key KEY[,KEY...]     require a key (repeatable); also BLOCKDRAFT_API_KEY\n"
            "  --api-key-file FNAME       keys, one per line ('#' starts a comment)\n"
            "  -to, --timeout N           wall time per request in seconds (default 600)\n"
            "  --jinja                    accepted: chat templates are always rendered with Jinja\n"
            "  --chat-template JINJA|chatml  chat template for the -m model instead of its own\n"
            "  --chat-template-file FNAME Jinja chat template file for the -m model\n"
            "  --reasoning-format FORMAT  deepseek|auto (default): thoughts in reasoning_content;\n"
            "                             none: thoughts stay in the content\n"
            "  --metrics                  accepted: GET /metrics is always on\n"
            "  --slots, --no-slots        GET /slots (default: on, as llama-server)\n"
            "  --spec-type TYPE           none | draft-dflash | draft-simple | ngram-simple (-m model)\n"
            "  --spec-draft-n-max N       max drafted tokens per step\n"
            "  --spec-draft-n-min N       drop drafts shorter than this\n"
            "  --spec-draft-p-min P       draft-simple: stop drafting below this probability\n"
            "  --spec-adaptive            pick the draft length each step (up to the n-max) from acceptance\n"
            "                             and measured cost (default with a DFlash drafter and no\n"
            "                             --spec-draft-n-max)\n"
            "  --no-spec-adaptive         draft the n-max every step, as llama-server does (the default\n"
            "                             when --spec-draft-n-max is given)\n"
            "  --models-dir DIR           models folder (default $BLOCKDRAFT_MODELS or\n"
            "                             ~/.local/share/blockdraft/models)\n"
            "  --cors-origins ORIGIN[,ORIGIN]  web origins allowed to call the server (CORS; * = any);\n"
            "                             requests from other origins are refused (default: none)\n"
            "\n"
            "----- blockdraft-specific params -----\n"
            "  --any-model-name           a request for an unknown model name goes to the -m model\n"
            "                             (as llama-server, which ignores the name; default: 404)\n"
            "  --cors ORIGIN[,ORIGIN]     same as --cors-origins\n"
            "  --queue N                  requests that may wait for a slot before 503 (default 16)\n"
            "  --max-body BYTES           request body limit (default 8388608)\n"
            "  --max-tokens N             largest max_tokens a request may ask for (default: context)\n"
            "  --conn-limit N             simultaneous connections (default 64)\n"            "  --mmap / --no-mmap         keep model files mapped / copy files of 64 MiB or more into\n"
            "                             anonymous 2 MiB pages at load (default)\n"
            "  --shutdown-grace SEC       on SIGTERM, time for running requests to finish (default 10)\n"
            ARG_ROPE_USAGE "                         (the -m model's)\n"
            ARG_CACHE_TYPE_USAGE "                         (every model's; a model config's cache_type_k /\n"
            "                         cache_type_v otherwise)\n"
            ARG_CACHE_TYPE_DRAFT_USAGE "                         (every drafter's; a config's options\n"
            "                         draft_cache_type_k / _v otherwise)\n"
            "\n"
            "Accepted with a one-line note (nothing to act on here): -ngl/-ngld, -dev, -sm, -ts, -mg,\n"
            "-fit, -b, -ub, -tb, -td, -C/-Cr/--prio/--poll..., --numa, --mlock, -cb/-nocb,\n"
            "--cache-reuse, --no-cache-prompt, -kvu, --threads-http, --no-webui, --log-*, --perf, --warmup,\n"
            "--tags, --keep, --no-context-shift, --offline, --check-tensors.\n"
            "Refused, naming what to use: -hf/-mu (blockdraft pull), --lora, --mmproj,\n"
            "--samplers and the samplers blockdraft lacks (typical, penalties,\n"
            "DRY, XTC, mirostat, dynatemp, logit bias), --yarn-ext-factor/-attn-factor/-beta-*,\n"
            "--embedding,\n"
            "--reranking, --props, --slot-save-path, --ssl-*, --path, --api-prefix, --no-jinja,\n"
            "--draft/--draft-max/--draft-min (removed in llama-server too), --spec-default, --tools.\n");
}

#define OWNED_MAX 64

/* Split a comma-separated key list into p->api_keys; list is kept in
 * owned[] (freed at exit) whether or not this succeeds. */
static int add_keys(server_params *p, char *list, const char *sep, char **owned, int *n_owned) {
    owned[(*n_owned)++] = list;
    int before = p->n_api_keys;
    for (char *save = NULL, *k = strtok_r(list, sep, &save); k; k = strtok_r(NULL, sep, &save)) {
        while (*k == ' ' || *k == '\t' || *k == '\r') k++;
        size_t n = strlen(k);
        while (n && (k[n - 1] == ' ' || k[n - 1] == '\t' || k[n - 1] == '\r')) k[--n] = '\0';
        if (!*k || *k == '#') continue;
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

/* ------------------------------------------------------------------------
 * llama-server flags that are noted or refused
 * ---------------------------------------------------------------------- */

static const arg_compat COMPAT_FLAGS[] = {
    /* accepted with a note: nothing to act on */
    ARG_COMPAT_CPU_ONLY,
    ARG_COMPAT_THREADS,
    {{"-b", "--batch-size", "-ub", "--ubatch-size", NULL}, ARG_VALUE, ARG_NOTE,
     "the engine picks its own batch sizes (results do not depend on them)"},
    {{"-lm", "--load-mode", NULL}, ARG_VALUE, ARG_NOTE, "--mmap / --no-mmap choose how models are held"},
    {{"-cb", "--cont-batching", "-nocb", "--no-cont-batching", NULL}, ARG_NONE, ARG_NOTE,
     "each slot runs its own request; slots share the thread pool"},
    {{"--cache-prompt", "--no-cache-prompt", NULL}, ARG_NONE, ARG_NOTE,
     "a slot always reuses its cached prefix (it cannot change the output here)"},
    {{"--cache-reuse", "-cram", "--cache-ram", "-ctxcp", "--ctx-checkpoints", "--swa-checkpoints", NULL}, ARG_VALUE,
     ARG_NOTE, "a slot reuses its cached prefix; no other cache is kept"},
    {{"-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified", "--swa-full", NULL}, ARG_NONE, ARG_NOTE,
     "each slot has its own cache"},
    {{"--threads-http", NULL}, ARG_VALUE, ARG_NOTE, "one thread per connection, up to --conn-limit"},
    {{"--no-webui", "--no-ui", "--webui", "--ui", NULL}, ARG_NONE, ARG_NOTE, "blockdraft serves no web UI"},
    {{"--log-disable", "--log-jsonl", "--no-log-jsonl", "--log-prefix", "--no-log-prefix", "--log-timestamps",
      "--no-log-timestamps"},
     ARG_NONE, ARG_NOTE, "logging is fixed (-v logs every request)"},
    {{"--log-colors", NULL}, ARG_OPTIONAL, ARG_NOTE, "logging is fixed"},
    {{"-lv", "--verbosity", "--log-verbosity", NULL}, ARG_VALUE, ARG_NOTE, "logging is fixed (-v logs every request)"},
    {{"--perf", "--no-perf", "--warmup", "--no-warmup", "--check-tensors", "--offline", "--no-context-shift"},
     ARG_NONE, ARG_NOTE, "nothing to change here"},
    {{"--no-mmproj", "--no-mmproj-auto", "--mmproj-auto", "-cl", "--cache-list", NULL}, ARG_NONE, ARG_NOTE,
     "nothing to change here"},
    {{"--tags", "--keep", "-sps", "--slot-prompt-similarity", "--sse-ping-interval", NULL}, ARG_VALUE, ARG_NOTE,
     "nothing to act on here"},
    /* refused: what to use instead */
    ARG_COMPAT_REFUSED,
    {{"-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hfd", "-hfrd"}, ARG_VALUE, ARG_REFUSE,
     "install with `blockdraft pull NAME` (or POST /models/apply) and request the model by name"},
    {{"--hf-repo-draft", "--spec-draft-hf", "-mu", "--model-url", "-dr", "--docker-repo", "-hft"}, ARG_VALUE,
     ARG_REFUSE, "install with `blockdraft pull NAME` (or POST /models/apply) and request the model by name"},
    {{"-mm", "--mmproj", "-mmu", "--mmproj-url", NULL}, ARG_VALUE, ARG_REFUSE, "blockdraft has no multimodal support"},
    {{"--samplers", "--sampler-seq", "--sampling-seq", NULL}, ARG_VALUE, ARG_REFUSE,
     "the sampler order is fixed (penalties, top-k, top-p, min-p, temperature); /completion takes \"samplers\" "
     "to switch some off"},
    {{"--ignore-eos", NULL}, ARG_NONE, ARG_REFUSE, "send \"ignore_eos\": true in a /completion request"},
    {{"--yarn-ext-factor", "--yarn-attn-factor", NULL}, ARG_VALUE, ARG_REFUSE,
     "of the RoPE settings --rope-scaling, --rope-scale, --rope-freq-scale, --rope-freq-base and --yarn-orig-ctx "
     "are supported"},
    {{"--yarn-beta-slow", "--yarn-beta-fast", "--override-kv", "-ot", "--override-tensor", NULL}, ARG_VALUE,
     ARG_REFUSE, "model settings come from the model file"},
    {{"--embedding", "--embeddings", "--reranking", "--rerank", NULL}, ARG_NONE, ARG_REFUSE,
     "blockdraft serves text generation only"},
    {{"--pooling", NULL}, ARG_VALUE, ARG_REFUSE, "blockdraft serves text generation only"},
    {{"--props", NULL}, ARG_NONE, ARG_REFUSE, "GET /props works; changing properties with POST /props is not supported"},
    {{"--slot-save-path", NULL}, ARG_VALUE, ARG_REFUSE, "saving and restoring slots is not supported"},
    {{"--ssl-key-file", "--ssl-cert-file", NULL}, ARG_VALUE, ARG_REFUSE,
     "put a TLS-terminating reverse proxy in front of the server"},
    {{"--path", "--api-prefix", "--media-path", NULL}, ARG_VALUE, ARG_REFUSE,
     "blockdraft serves its API at the root and no static files"},
    {{"--no-jinja", NULL}, ARG_NONE, ARG_REFUSE,
     "chat templates are always rendered with Jinja; give another with --chat-template-file"},
    {{"--chat-template-kwargs", NULL}, ARG_VALUE, ARG_REFUSE, "send \"chat_template_kwargs\" with each chat request"},
    {{"--draft", "--draft-n", "--draft-max", NULL}, ARG_VALUE, ARG_REFUSE,
     "removed in llama-server too: use --spec-draft-n-max"},
    {{"--draft-min", "--draft-n-min", NULL}, ARG_VALUE, ARG_REFUSE, "removed in llama-server too: use --spec-draft-n-min"},
    {{"--spec-default", NULL}, ARG_NONE, ARG_REFUSE,
     "give the drafter with -md (or install a gallery bundle and request it by name)"},
    {{"--tools", "--tools-runtime", "--mcp-servers-config", "--mcp-servers-json", NULL}, ARG_VALUE, ARG_REFUSE,
     "server-side tools are not supported"},
    {{"-ag", "--agent", "--context-shift", "-sp", "--special", "--spm-infill", "--reuse-port"}, ARG_NONE, ARG_REFUSE,
     "not supported by blockdraft serve"},
    {{"-r", "--reverse-prompt", NULL}, ARG_VALUE, ARG_REFUSE, "send \"stop\" with each request"},
    {{"--models-preset", "--models-max", "--sleep-idle-seconds", "--reasoning-budget-message", NULL}, ARG_VALUE,
     ARG_REFUSE, "not supported by blockdraft serve"},
    {{"--models-autoload", "--no-models-autoload", NULL}, ARG_NONE, ARG_REFUSE,
     "installed models always load on their first request"},
};

static bool parse_ll(const char *opt, const char *v, long long lo, long long hi, long long *out) {
    char *end;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "blockdraft: bad value for %s: '%s' (expected an integer in [%lld, %lld])\n", opt, v, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

/* --grammar / --grammar-file / -j / -jf: the GBNF text (malloc'd), a
 * schema converted; NULL after a message. The grammar itself is checked at
 * start, against the -m model's vocabulary. */
static char *grammar_arg(const char *opt, const char *v) {
    bool file = !strcmp(opt, "--grammar-file") || !strcmp(opt, "-jf") || !strcmp(opt, "--json-schema-file");
    bool schema = !strcmp(opt, "-j") || !strcmp(opt, "--json-schema") || !strcmp(opt, "-jf") ||
                  !strcmp(opt, "--json-schema-file");
    size_t len = strlen(v);
    char *text = file ? arg_read_file(v, &len) : strdup(v);
    if (!text) {
        fprintf(stderr, "blockdraft serve: %s: %s %s\n", opt, file ? "cannot read" : "out of memory", file ? v : "");
        return NULL;
    }
    if (!schema) return text;
    json_error_t je;
    json_t *js = json_loadb(text, len, JSON_DECODE_ANY, &je);
    free(text);
    if (!js) {
        fprintf(stderr, "blockdraft serve: %s: invalid JSON at line %d: %s\n", opt, je.line, je.text);
        return NULL;
    }
    char err[800];
    char *g = json_schema_to_gbnf(js, err, sizeof err);
    json_decref(js);
    if (!g) fprintf(stderr, "blockdraft serve: %s: %s\n", opt, err);
    return g;
}

int cmd_serve(int argc, char **argv) {
    server_params p;
    server_params_init(&p);
    double grace = 10;
    const char *v;
    char *owned[OWNED_MAX]; /* strings the params point into, freed at exit */
    int n_owned = 0, rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long long ll;
        if (arg_take(argc, argv, &i, (const char *[]){"-m", "--model", NULL}, &v)) p.model_path = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-md", "--model-draft", "--spec-draft-model", NULL}, &v))
            p.draft_path = v;
        else if (arg_is(a, "--mmap", NULL)) bd_use_mmap(true);
        else if (arg_is(a, "--no-mmap", NULL)) bd_use_mmap(false);
        else if (arg_take(argc, argv, &i, (const char *[]){"--alias", "-a", NULL}, &v)) {
            /* comma-separated, repeatable; the first name is the model's id */
            char *c = n_owned < OWNED_MAX ? strdup(v) : NULL;
            if (!c) {
                fprintf(stderr, "blockdraft serve: too many options\n");
                goto out;
            }
            owned[n_owned++] = c;
            for (char *save = NULL, *t = strtok_r(c, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                while (*t == ' ') t++;
                if (!*t) continue;
                if (!p.alias) p.alias = t;
                else if (p.n_aliases < SERVER_MAX_ALIASES) p.aliases[p.n_aliases++] = t;
                else {
                    fprintf(stderr, "blockdraft serve: at most %d aliases\n", SERVER_MAX_ALIASES + 1);
                    goto out;
                }
            }
        } else if (arg_take(argc, argv, &i, (const char *[]){"--models-dir", NULL}, &v)) p.models_dir = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--chat-template-file", NULL}, &v))
            p.chat_template_file = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--chat-template", NULL}, &v)) {
            if (!arg_chat_template_ok("serve", v)) goto out;
            p.chat_template = v;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--host", NULL}, &v)) p.host = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--port", NULL}, &v)) p.port = arg_i32(a, v, 0, 65535);
        else if (arg_take(argc, argv, &i, (const char *[]){"--api-key", NULL}, &v)) {
            char *c = n_owned < OWNED_MAX ? strdup(v) : NULL;
            if (!c || add_keys(&p, c, ",", owned, &n_owned) < 0) {
                if (!c) fprintf(stderr, "blockdraft serve: too many options\n");
                goto out;
            }
        } else if (arg_take(argc, argv, &i, (const char *[]){"--api-key-file", NULL}, &v)) {
            size_t len = 0;
            char *c = n_owned < OWNED_MAX ? arg_read_file(v, &len) : NULL;
            if (!c) {
                fprintf(stderr, "blockdraft serve: cannot read --api-key-file %s\n", v);
                goto out;
            }
            if (strlen(c) != len) {
                free(c);
                fprintf(stderr, "blockdraft serve: --api-key-file %s holds a NUL byte\n", v);
                goto out;
            }
            if (add_keys(&p, c, "\n", owned, &n_owned) < 0) goto out;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--cors", "--cors-origins", NULL}, &v)) {
            p.cors_origin = v; /* a comma-separated list of origins, or * */
        } else if (arg_take(argc, argv, &i, (const char *[]){"--parallel", "-np", NULL}, &v)) {
            p.parallel = arg_i32(a, v, -1, 64);
            if (p.parallel < 0) p.parallel = 0; /* -1: auto */
        } else if (arg_rope(argc, argv, &i, &p.rope)) {
            continue;
        } else if (arg_cache_type_draft(argc, argv, &i, &p.draft_type_k, &p.draft_type_v)) {
            continue;
        } else if (arg_is(a, "-ctk", "--cache-type-k") || arg_is(a, "-ctv", "--cache-type-v") ||
                   arg_is(a, "-fa", "--flash-attn")) {
            bd_session_params kv = {.type_k = p.type_k, .type_v = p.type_v};
            arg_cache_type(argc, argv, &i, &kv);
            p.type_k = kv.type_k, p.type_v = kv.type_v;
        } else if (arg_take(argc, argv, &i, (const char *[]){"-c", "--ctx-size", NULL}, &v)) {
            p.n_ctx = arg_i32(a, v, 0, 1 << 22);
            if (p.n_ctx == 0) p.n_ctx = -1; /* llama-server: 0 = the model's trained context */
            else if (p.n_ctx < 16) {
                fprintf(stderr, "blockdraft: bad value for %s: '%s' (at least 16, or 0 for the trained context)\n",
                        a, v);
                goto out;
            }
        } else if (arg_take(argc, argv, &i, (const char *[]){"-t", "--threads", NULL}, &v)) {
            p.n_threads = arg_i32(a, v, -1, 256);
            if (p.n_threads < 0) p.n_threads = 0; /* -1: all cores */
        } else if (arg_take(argc, argv, &i, (const char *[]){"-n", "--predict", "--n-predict", NULL}, &v))
            p.n_predict = arg_i32(a, v, -1, 1 << 24);
        else if (arg_take(argc, argv, &i, (const char *[]){"-s", "--seed", NULL}, &v)) {
            if (!parse_ll(a, v, -1, (1LL << 62), &ll)) goto out;
            p.has_seed = true;
            p.seed = ll == 4294967295LL ? -1 : ll; /* llama-server's "random" value */
        } else if (arg_take(argc, argv, &i, (const char *[]){"--temp", "--temperature", NULL}, &v)) {
            p.temp = arg_f32(a, v, -100, 100);
            p.has_temp = true;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--top-k", NULL}, &v)) {
            p.top_k = arg_i32(a, v, 0, 1 << 24);
            p.has_top_k = true;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--top-p", NULL}, &v)) {
            p.top_p = arg_f32(a, v, 0, 1);
            p.has_top_p = true;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--min-p", NULL}, &v)) {
            p.min_p = arg_f32(a, v, 0, 1);
            p.has_min_p = true;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--repeat-penalty", NULL}, &v)) {
            p.repeat_penalty = arg_f32(a, v, 0.0001f, 100);
            p.has_repeat_penalty = true;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--repeat-last-n", NULL}, &v)) {
            p.repeat_last_n = arg_i32(a, v, -1, 1 << 24);
            p.has_repeat_last_n = true;
        } else if (arg_take(argc, argv, &i,
                            (const char *[]){"--grammar", "--grammar-file", "-j", "--json-schema", "-jf",
                                             "--json-schema-file", NULL},
                            &v)) {
            if (p.grammar) {
                fprintf(stderr, "blockdraft serve: give one of --grammar, --grammar-file, -j, -jf (one grammar)\n");
                goto out;
            }
            char *g = n_owned < OWNED_MAX ? grammar_arg(a, v) : NULL;
            if (!g) goto out;
            owned[n_owned++] = g;
            p.grammar = g;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--spec-type", NULL}, &v)) {
            bd_spec_type t;
            if (!bd_spec_type_parse(v, &t)) {
                fprintf(stderr, "blockdraft serve: unknown --spec-type '%s' (none, draft-dflash, draft-simple, "
                                "ngram-simple)\n", v);
                goto out;
            }
            p.spec_type = (int)t;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-n-max", NULL}, &v))
            p.spec_n_max = arg_i32(a, v, 1, 63);
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-n-min", NULL}, &v))
            p.spec_n_min = arg_i32(a, v, 0, 63);
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-p-min", "--draft-p-min", NULL}, &v))
            p.spec_p_min = arg_f32(a, v, 0, 1);
        else if (arg_is(a, "--spec-adaptive", NULL)) p.spec_adaptive = 1;
        else if (arg_is(a, "--no-spec-adaptive", NULL)) p.spec_adaptive = 0;
        else if (arg_take(argc, argv, &i, (const char *[]){"--reasoning-format", NULL}, &v)) {
            if (!strcmp(v, "none")) p.reasoning_format = SERVER_REASONING_NONE;
            else if (!strcmp(v, "deepseek") || !strcmp(v, "auto")) p.reasoning_format = SERVER_REASONING_AUTO;
            else {
                fprintf(stderr, "blockdraft serve: --reasoning-format '%s' is not supported: use deepseek (or auto; "
                                "thoughts in reasoning_content) or none (thoughts stay in the content)\n", v);
                goto out;
            }
        } else if (arg_take(argc, argv, &i, (const char *[]){"--reasoning-budget", NULL}, &v)) {
            if (strcmp(v, "-1")) {
                fprintf(stderr, "blockdraft serve: --reasoning-budget %s is not supported (only -1, unrestricted); "
                                "limit a request with max_tokens\n", v);
                goto out;
            }
        } else if (arg_is(a, "-rea", "--reasoning")) {
            const char *val = i + 1 < argc && arg_optional_value(argv[i + 1]) ? argv[++i] : "auto";
            if (strcmp(val, "auto")) {
                fprintf(stderr, "blockdraft serve: %s %s is not supported: send chat_template_kwargs "
                                "{\"enable_thinking\": %s} with a request\n", a, val,
                        !strcmp(val, "off") || !strcmp(val, "false") || !strcmp(val, "0") ? "false" : "true");
                goto out;
            }
        } else if (arg_is(a, "-fa", "--flash-attn")) {
            if (i + 1 < argc && arg_optional_value(argv[i + 1])) i++; /* attention is always fused here */
        } else if (arg_is(a, "--jinja", NULL) || arg_is(a, "--metrics", NULL)) {
            /* always so here */
        } else if (arg_is(a, "--slots", NULL)) p.slots_endpoint = true;
        else if (arg_is(a, "--no-slots", NULL)) p.slots_endpoint = false;
        else if (arg_is(a, "--any-model-name", NULL)) p.any_model_name = true;
        else if (arg_take(argc, argv, &i, (const char *[]){"--queue", NULL}, &v)) p.queue_max = arg_i32(a, v, 0, 100000);
        else if (arg_take(argc, argv, &i, (const char *[]){"--max-body", NULL}, &v))
            p.max_body = (size_t)arg_i32(a, v, 1024, 1 << 30);
        else if (arg_take(argc, argv, &i, (const char *[]){"--max-tokens", NULL}, &v))
            p.max_tokens = arg_i32(a, v, 1, 1 << 22);
        else if (arg_take(argc, argv, &i, (const char *[]){"--timeout", "-to", NULL}, &v))
            p.timeout_s = arg_f32(a, v, 0.001f, 86400);
        else if (arg_take(argc, argv, &i, (const char *[]){"--conn-limit", NULL}, &v))
            p.conn_limit = arg_i32(a, v, 4, 100000);
        else if (arg_take(argc, argv, &i, (const char *[]){"--shutdown-grace", NULL}, &v))
            grace = arg_f32(a, v, 0, 3600);
        else if (arg_is(a, "-v", "--verbose") || arg_is(a, "--log-verbose", NULL)) p.verbose = true;
        else if (arg_is(a, "--version", NULL)) {
            printf("blockdraft %s\n", bd_version());
            rc = 0;
            goto out;
        } else if (arg_is(a, "-h", "--help") || arg_is(a, "--usage", NULL)) {
            usage();
            rc = 0;
            goto out;
        } else {
            int t = arg_compat_take("serve", "llama-server", COMPAT_FLAGS, sizeof COMPAT_FLAGS / sizeof COMPAT_FLAGS[0], false,
                                    argc, argv, &i);
            if (t < 0) goto out;
            if (t > 0) continue;
            fprintf(stderr, "blockdraft serve: unknown option '%s' (blockdraft serve --help lists the flags)\n", a);
            goto out;
        }
    }
    if (p.draft_path && !p.model_path) {
        fprintf(stderr, "blockdraft serve: -md needs -m\n");
        goto out;
    }
    if (p.chat_template && p.chat_template_file) {
        fprintf(stderr, "blockdraft serve: give either --chat-template or --chat-template-file\n");
        goto out;
    }
    if (p.any_model_name && !p.model_path) {
        fprintf(stderr, "blockdraft serve: --any-model-name needs -m (the model unknown names go to)\n");
        goto out;
    }
    const char *env = getenv("BLOCKDRAFT_API_KEY");
    if (env && *env) {
        char *c = n_owned < OWNED_MAX ? strdup(env) : NULL;
        if (!c || add_keys(&p, c, ",", owned, &n_owned) < 0) goto out;
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
