/*
 * cmd_run.c - `blockdraft run`: generate text from a model.
 *
 *   blockdraft run (-m MODEL.gguf | NAME) -p PROMPT  (NAME first) [-n N] [--temp T] [--top-k K]
 *                  [--top-p P] [--min-p P] [--repeat-penalty P] [--repeat-last-n N]
 *                  [--seed S] [-t THREADS] [-c CTX]
 *                  [--json] [--ignore-eos] [-f FILE] [--no-display-prompt]
 *                  [-md DRAFT.gguf] [--spec-type TYPE] [--spec-draft-n-max N]
 *                  [--spec-draft-n-min N] [--spec-draft-p-min P] [--spec-adaptive | --no-spec-adaptive]
 *                  [--grammar GBNF | --grammar-file FILE | -j JSON | -jf FILE]
 *                  [-cnv [-st] [-sys TEXT] [--chat-template JINJA | --chat-template-file FILE]
 *                   [--chat-template-kwargs JSON]]
 *
 * Text streams to stdout as it is generated (the prompt first, as
 * llama.cpp's CLI does); a stats line goes to stderr. --json prints one
 * JSON object instead: prompt_ids, generated_ids, text, stats.
 *
 * -cnv (conversation, as llama-completion's): the prompt is the first user
 * message of a chat rendered through the model's chat template (run_chat.h),
 * the reply streams, and further user messages are read from stdin, one a
 * line, until end of input (-st: one turn). --json then prints one object a
 * turn. Unlike llama-completion, conversation mode is never turned on by
 * itself: `run` without -cnv completes the raw prompt.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "blockdraft.h"
#include "cli.h"
#include "../chat/json_schema.h"
#include "../decode/grammar.h"
#include "../base/base.h"
#include "../gallery/gallery.h"
#include "../server/stats_json.h"
#include "run_chat.h"

typedef struct {
    bool json;
    bool keep;    /* -cnv: keep the text as well as printing it (the reply goes into the history) */
    void *trace;  /* json_t array of speculative steps (--spec-trace) */
    bd_textstream *ts;
    char *piece;  /* [piece_cap] one push of ts */
    int piece_cap;
    int32_t *ids;
    int32_t n, cap;
    bd_buf text;  /* --json: the generated text */
} run_out;

static void out_append(run_out *o, const char *s, int n) {
    if (n <= 0) return;
    if (!o->json) {
        fwrite(s, 1, (size_t)n, stdout);
        fflush(stdout);
    }
    if (o->json || o->keep) bd_buf_put(&o->text, s, (size_t)n);
}

/* One push (or, with tok < 0, the final flush) of the text stream into
 * o->piece; the buffer is sized by bd_textstream_max_bytes and grows if a
 * push still asks for more, so no text is ever dropped. */
static int stream_piece(run_out *o, int32_t tok) {
    for (;;) {
        int n = tok >= 0 ? bd_textstream_push(o->ts, tok, o->piece, o->piece_cap)
                         : bd_textstream_flush(o->ts, o->piece, o->piece_cap);
        if (n >= 0) return n;
        char *p = realloc(o->piece, (size_t)-n);
        if (!p) return 0;
        o->piece = p;
        o->piece_cap = -n;
    }
}

static bool on_token(int32_t tok, void *user) {
    run_out *o = user;
    if (o->n < o->cap) o->ids[o->n++] = tok;
    out_append(o, o->piece, stream_piece(o, tok));
    return true;
}

static void on_step(void *user, int32_t pos, int32_t anchor, const int32_t *drafts, int32_t n, int32_t acc) {
    run_out *o = user;
    json_t *d = json_array();
    for (int32_t i = 0; i < n; i++) json_array_append_new(d, json_integer(drafts[i]));
    json_array_append_new(o->trace, json_pack("{s:i, s:i, s:o, s:i}", "pos", pos, "anchor", anchor, "drafts", d,
                                              "accepted", acc));
}

static void usage(void) {
    fprintf(stderr,
            "usage: blockdraft run -m MODEL.gguf -p PROMPT [options]\n"
            "       blockdraft run NAME -p PROMPT [options]\n"
            "  NAME                   a gallery model (pulled first when missing); its config\n"
            "                         supplies the drafter and defaults, flags override them\n"
            "  -m, --model FILE       target model (GGUF)\n"
            "  -p, --prompt TEXT      prompt text;  -f, --file FILE  read the prompt from a file (one\n"
            "                         trailing newline dropped, as llama.cpp does)\n"
            "  -e, --escape / --no-escape  turn \\n \\r \\t \\' \\\" \\\\ and \\xHH in the prompt (-p or\n"
            "                         -f) into the bytes they name, as llama.cpp does (default: on)\n"
            "  -n, --n-predict N      tokens to generate (default 128; -1 or -2 = until end of text or\n"
            "                         of the context)\n"
            "  --temp T               temperature (default 0.8; 0 = greedy)\n"
            "  --top-k K  --top-p P  --min-p P   sampling filters (defaults 40, 0.95, 0.05)\n"
            "  --repeat-penalty P     penalize tokens of the last N (default 1.0 = off)\n"
            "  --repeat-last-n N      tokens the penalty looks back over (default 64; 0 = off, -1 = all)\n"
            "  -s, --seed S           RNG seed (default random)\n"
            "  -t, --threads N        threads (default: all cores)\n"
            "  -c, --ctx-size N       context length (default 4096; 0 = the model's trained length)\n"
            "  -b, --batch-size N     prompt batch (default 512)\n"
            "  --ignore-eos           keep generating past end-of-text tokens\n"
            "  --no-display-prompt    do not echo the prompt\n"
            "  --mmap / --no-mmap     keep model files mapped / copy files of 64 MiB or more into\n"
            "                         anonymous 2 MiB pages at load (default; see bd_use_mmap)\n"
            "  --json                 print one JSON object with ids, text and stats\n"
            "speculative decoding (llama.cpp's flag names):\n"
            "  -md, --model-draft FILE  draft model: a DFlash drafter or a small model of the same vocabulary\n"
            "  --spec-type T          none | draft-dflash | draft-simple | ngram-simple\n"
            "                         (default: from the draft file's architecture when -md is given)\n"
            "  --spec-draft-n-max N   max drafted tokens per step (DFlash: default and limit block_size-1;\n"
            "                         draft-simple: default 3)\n"
            "  --spec-draft-n-min N   drop drafts shorter than N (default 0)\n"
            "  --spec-draft-p-min P   draft-simple: stop drafting below this draft probability\n"
            "  --spec-adaptive        choose the draft length each step (up to the n-max) from acceptance\n"
            "                         and measured cost (default with a DFlash drafter and no\n"
            "                         --spec-draft-n-max)\n"
            "  --no-spec-adaptive     draft the n-max every step, as llama.cpp does (the default when\n"
            "                         --spec-draft-n-max is given)\n"
            "  --spec-ngram-size-n N  ngram-simple: match length (default 3)\n"
            "  --spec-trace           with --json: every step's anchor, drafts and accepted count\n"
            "  --spec-dflash-block auto|full|short  DFlash block rows: the trained block (full), [anchor,\n"
            "                         MASK x n] as llama.cpp (short), or, when adaptive, whichever\n"
            "                         measures faster, each with its own acceptance (auto, the default;\n"
            "                         full with --no-spec-adaptive)\n"
            "  --spec-dflash-short-block  the same as --spec-dflash-block short\n"
            "constrained output (llama.cpp's flag names; one of them):\n"
            "  --grammar GBNF         every token obeys this GBNF grammar (root rule `root`); generation\n"
            "                         ends when the grammar is complete and allows nothing else\n"
            "  --grammar-file FILE    the same, read from FILE\n"
            "  -j, --json-schema JSON   output a JSON value valid for this JSON Schema (common subset;\n"
            "                         unsupported keywords are refused by name)\n"
            "  -jf, --json-schema-file FILE  the same, read from FILE\n"
            "conversation (llama.cpp's flag names; off unless asked for):\n"
            "  -cnv, --conversation   the prompt (-p / -f, else a line of stdin) is a user message of a\n"
            "                         chat rendered with the model's chat template (ChatML if it has\n"
            "                         none); after each reply the next user message is read from stdin,\n"
            "                         one a line, until end of input. --json: one object a turn\n"
            "  -no-cnv, --no-conversation  complete the raw prompt (the default)\n"
            "  -st, --single-turn     one turn, then exit (implies -cnv)\n"
            "  -sys, --system-prompt TEXT  a system message first (implies -cnv)\n"
            "  -sysf, --system-prompt-file FILE  the same, read from FILE (one trailing newline dropped)\n"
            "  --chat-template JINJA|chatml  this template instead of the model's (implies -cnv)\n"
            "  --chat-template-file FILE     the same, read from FILE\n"
            "  --chat-template-kwargs JSON   extra template variables, e.g. '{\"enable_thinking\":false}'\n"
            "  --jinja                accepted: chat templates are always rendered with Jinja\n"
            ARG_ROPE_USAGE "                         (the target's; a drafter keeps its own)\n"
            "KV cache (llama.cpp's flag names):\n"
            ARG_CACHE_TYPE_USAGE ARG_CACHE_TYPE_DRAFT_USAGE
            "llama-cli / llama-completion flags with nothing to act on here are accepted with a\n"
            "one-line note (-ngl, -ngld, -dev, -sm, -ts, -mg, -fit, -ub, -tb, -td, -C, --prio, --poll,\n"
            "--numa, --mlock, --repack, -kvo, --warmup, --perf, --log-*, -co, --simple-io, -ptc, --keep);\n"
            "those blockdraft cannot honour are refused naming the alternative (-hf, --lora, -mm,\n"
            "samplers other than the ones above, -i, -r, --in-prefix, --context-shift, ...).\n");
}

/* llama-cli / llama-completion flags that change nothing here (noted) or
 * that blockdraft cannot honour (refused, naming the alternative). */
static const arg_compat RUN_COMPAT[] = {
    /* accepted with a note: nothing to act on */
    ARG_COMPAT_CPU_ONLY,
    ARG_COMPAT_THREADS,
    {{"-ub", "--ubatch-size", NULL}, ARG_VALUE, ARG_NOTE, "the prompt goes through in batches of -b rows"},
    {{"--perf", "--no-perf", "--warmup", "--no-warmup", "--check-tensors", "--offline", NULL}, ARG_NONE, ARG_NOTE,
     "nothing to change here"},
    {{"--log-disable", "--log-jsonl", "--no-log-jsonl", "--log-prefix", "--no-log-prefix", "--log-timestamps",
      "--no-log-timestamps"},
     ARG_NONE, ARG_NOTE, "the output is fixed (--json for a machine-readable run)"},
    {{"--log-colors", "-co", "--color", NULL}, ARG_OPTIONAL, ARG_NOTE, "the output is plain text"},
    {{"--simple-io", NULL}, ARG_NONE, ARG_NOTE, "the output is plain text"},
    {{"-v", "--verbose", "--log-verbose", NULL}, ARG_NONE, ARG_NOTE, "the output is fixed (--json for a machine-readable run)"},
    {{"-lv", "--verbosity", "--log-verbosity", "-ptc", "--print-token-count", NULL}, ARG_VALUE, ARG_NOTE,
     "the output is fixed (--json for a machine-readable run)"},
    {{"--keep", NULL}, ARG_VALUE, ARG_NOTE, "the context is never shifted, so there is nothing to keep"},
    /* refused: what to use instead */
    ARG_COMPAT_REFUSED,
    {{"-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hfd", "-hfrd"}, ARG_VALUE, ARG_REFUSE,
     "install a gallery model with `blockdraft pull NAME` and run it as `blockdraft run NAME`"},
    {{"--hf-repo-draft", "--spec-draft-hf", "-mu", "--model-url", "-dr", "--docker-repo", "-hft"}, ARG_VALUE,
     ARG_REFUSE, "install a gallery model with `blockdraft pull NAME` and run it as `blockdraft run NAME`"},
    {{"-mm", "--mmproj", "-mmu", "--mmproj-url", "--image", NULL}, ARG_VALUE, ARG_REFUSE,
     "blockdraft has no multimodal support"},
    {{"--samplers", "--sampler-seq", "--sampling-seq", NULL}, ARG_VALUE, ARG_REFUSE,
     "the sampler order is fixed (penalties, top-k, top-p, min-p, temperature)"},
    {{"--yarn-ext-factor", "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast", NULL}, ARG_VALUE,
     ARG_REFUSE,
     "of the RoPE settings --rope-scaling, --rope-scale, --rope-freq-scale, --rope-freq-base and --yarn-orig-ctx "
     "are supported"},
    {{"--override-kv", "-ot", "--override-tensor", NULL}, ARG_VALUE, ARG_REFUSE, "model settings come from the model file"},
    {{"-i", "--interactive", "-if", "--interactive-first", "-mli", "--multiline-input", NULL}, ARG_NONE, ARG_REFUSE,
     "use -cnv (a conversation: each line of stdin is the next user message)"},
    {{"-r", "--reverse-prompt", "--in-prefix", "--in-suffix", NULL}, ARG_VALUE, ARG_REFUSE,
     "use -cnv (a conversation: each line of stdin is the next user message)"},
    {{"--in-prefix-bos", NULL}, ARG_NONE, ARG_REFUSE, "use -cnv (a conversation: each line of stdin is the next user message)"},
    {{"--context-shift", NULL}, ARG_NONE, ARG_REFUSE, "generation stops at the end of the context (-c)"},
    {{"-bf", "--binary-file", NULL}, ARG_VALUE, ARG_REFUSE, "give the prompt with -f (read as it is)"},
};

/* Everything the command line (and a gallery model's config) asks for. */
typedef struct run_opts {
    const char *name;        /* `run NAME`: a gallery model, or NULL */
    const char *model_path, *draft_path, *prompt, *prompt_file;
    bd_gen_params gp;
    bd_session_params sp;
    bd_spec_params spp;
    bool json, echo, spec_type_set, spec_trace;
    int spec_adaptive;              /* 1 --spec-adaptive, 0 --no-spec-adaptive, -1 neither */
    bool n_max_flag;                /* --spec-draft-n-max given (a config's n_max does not count) */
    const gallery_config *cfg;      /* `run NAME`: the model's config, or NULL */
    const char *gram_src, *gram_opt; /* --grammar / --grammar-file / -j / -jf and its value */
    bool gram_file, gram_schema;
    int cnv;                        /* 1 -cnv, 0 -no-cnv, -1 neither */
    const char *cnv_flag;           /* a flag that implies -cnv (for the -no-cnv conflict) */
    bool single_turn;
    const char *system, *system_file, *tmpl, *tmpl_file, *tmpl_kwargs;
    bool ctx_trained;               /* -c 0 */
    bool ctx_flag, threads_flag;    /* -c / -t given: the operator's own, never capped */
    bool no_escape;                 /* --no-escape: the prompt as given */
    bool reparse;                   /* the flags' second pass (over a gallery config): notes said once */
} run_opts;

static void run_opts_init(run_opts *o) {
    memset(o, 0, sizeof *o);
    o->gp = (bd_gen_params){.n_predict = 128, .sampling = bd_sampler_default_params()};
    o->sp = bd_session_default_params();
    o->spp = bd_spec_default_params();
    o->spec_adaptive = -1;
    o->echo = true;
    o->cnv = -1;
}

/* Apply the command-line flags to o. Returns -1 to go on, else the exit
 * status (0 after --help, 2 for a bad option). Pure: it reads and writes
 * nothing but o and stderr/stdout, so it can run before the gallery is
 * touched (a mistyped option never downloads a model) and again over the
 * config's values (flags win over the config). */
static int run_parse_flags(int argc, char **argv, run_opts *o) {
    const char *v;
    bd_gen_params *gp = &o->gp;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a == o->name) continue;
        if (arg_take(argc, argv, &i, (const char *[]){"-m", "--model", NULL}, &v)) o->model_path = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-p", "--prompt", NULL}, &v))
            o->prompt = v, o->prompt_file = NULL; /* the last of -p / -f wins, as in llama.cpp */
        else if (arg_take(argc, argv, &i, (const char *[]){"-f", "--file", NULL}, &v)) o->prompt_file = v, o->prompt = NULL;
        else if (arg_take(argc, argv, &i, (const char *[]){"-n", "--n-predict", "--predict", NULL}, &v)) {
            gp->n_predict = arg_i32(a, v, -2, 1 << 24);
            if (gp->n_predict == -2) gp->n_predict = -1; /* llama.cpp: until the context is full; -1 stops there too */
        }
        else if (arg_take(argc, argv, &i, (const char *[]){"--temp", NULL}, &v))
            gp->sampling.temperature = arg_f32(a, v, 0, 100);
        else if (arg_take(argc, argv, &i, (const char *[]){"--top-k", NULL}, &v))
            gp->sampling.top_k = arg_i32(a, v, 0, 1 << 24);
        else if (arg_take(argc, argv, &i, (const char *[]){"--top-p", NULL}, &v))
            gp->sampling.top_p = arg_f32(a, v, 0, 1);
        else if (arg_take(argc, argv, &i, (const char *[]){"--min-p", NULL}, &v))
            gp->sampling.min_p = arg_f32(a, v, 0, 1);
        else if (arg_take(argc, argv, &i, (const char *[]){"--repeat-penalty", NULL}, &v)) {
            gp->sampling.repeat_penalty = arg_f32(a, v, 0, 100);
            if (!(gp->sampling.repeat_penalty > 0)) {
                fprintf(stderr, "blockdraft run: --repeat-penalty must be greater than 0 (1 = off)\n");
                return 2;
            }
        } else if (arg_take(argc, argv, &i, (const char *[]){"--repeat-last-n", NULL}, &v))
            gp->sampling.repeat_last_n = arg_i32(a, v, -1, 1 << 24);
        else if (arg_take(argc, argv, &i, (const char *[]){"-s", "--seed", NULL}, &v))
            gp->sampling.seed = arg_u64(a, v);
        else if (arg_take(argc, argv, &i, (const char *[]){"-t", "--threads", NULL}, &v))
        {
            o->sp.n_threads = arg_i32(a, v, 1, 256);
            o->threads_flag = true;
        } else if (arg_take(argc, argv, &i, (const char *[]){"-c", "--ctx-size", NULL}, &v)) {
            o->sp.n_ctx = arg_i32(a, v, 0, 1 << 22);
            o->ctx_flag = true;
            o->ctx_trained = o->sp.n_ctx == 0; /* llama.cpp: 0 = the model's trained context */
        }
        else if (arg_take(argc, argv, &i, (const char *[]){"-b", "--batch-size", NULL}, &v))
            o->sp.n_batch = arg_i32(a, v, 1, 1 << 16);
        else if (arg_take(argc, argv, &i, (const char *[]){"-md", "--model-draft", "--spec-draft-model", NULL}, &v))
            o->draft_path = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-type", NULL}, &v)) {
            if (!bd_spec_type_parse(v, &o->spp.type)) {
                fprintf(stderr, "blockdraft run: unknown --spec-type '%s' (none, draft-dflash, draft-simple, ngram-simple)\n", v);
                return 2;
            }
            o->spec_type_set = true;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-n-max", NULL}, &v))
            o->spp.n_max = arg_i32(a, v, 1, 63), o->n_max_flag = true;
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-n-min", NULL}, &v))
            o->spp.n_min = arg_i32(a, v, 0, 63);
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-p-min", NULL}, &v))
            o->spp.p_min = arg_f32(a, v, 0, 1);
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-ngram-size-n", NULL}, &v))
            o->spp.ngram_n = arg_i32(a, v, 1, 64);
        else if (arg_take(argc, argv, &i, (const char *[]){"--grammar", "--grammar-file", "-j", "--json-schema", "-jf",
                                                           "--json-schema-file", NULL}, &v)) {
            if (o->gram_opt && strcmp(o->gram_opt, a)) {
                fprintf(stderr, "blockdraft run: %s and %s cannot be combined (one grammar)\n", o->gram_opt, a);
                return 2;
            }
            o->gram_opt = a;
            o->gram_src = v;
            o->gram_file = strstr(a, "-file") || !strcmp(a, "-jf");
            o->gram_schema = strstr(a, "json") || !strcmp(a, "-j") || !strcmp(a, "-jf");
        } else if (arg_is(a, "--spec-adaptive", NULL)) o->spec_adaptive = 1;
        else if (arg_is(a, "--no-spec-adaptive", NULL)) o->spec_adaptive = 0;
        else if (arg_is(a, "--spec-dflash-short-block", NULL)) o->spp.dflash_block = BD_DFLASH_BLOCK_SHORT;
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-dflash-block", NULL}, &v))
            o->spp.dflash_block = (bd_dflash_block)arg_dflash_block(a, v);
        else if (arg_is(a, "--spec-trace", NULL)) o->spec_trace = true;
        else if (arg_is(a, "--draft", "--draft-max") || arg_is(a, "--draft-n", "--draft-min")) {
            fprintf(stderr, "blockdraft run: %s was removed (as in llama.cpp); use --spec-draft-n-max / --spec-draft-n-min\n", a);
            return 2;
        } else if (arg_is(a, "-cnv", "--conversation")) o->cnv = 1;
        else if (arg_is(a, "-no-cnv", "--no-conversation")) o->cnv = 0;
        else if (arg_is(a, "-st", "--single-turn")) o->single_turn = true, o->cnv_flag = a;
        else if (arg_take(argc, argv, &i, (const char *[]){"-sys", "--system-prompt", NULL}, &v))
            o->system = v, o->system_file = NULL, o->cnv_flag = a;
        else if (arg_take(argc, argv, &i, (const char *[]){"-sysf", "--system-prompt-file", NULL}, &v))
            o->system_file = v, o->system = NULL, o->cnv_flag = a;
        else if (arg_take(argc, argv, &i, (const char *[]){"--chat-template", NULL}, &v)) {
            if (!arg_chat_template_ok("run", v)) return 2;
            o->tmpl = v, o->cnv_flag = a;
        }
        else if (arg_take(argc, argv, &i, (const char *[]){"--chat-template-file", NULL}, &v))
            o->tmpl_file = v, o->cnv_flag = a;
        else if (arg_take(argc, argv, &i, (const char *[]){"--chat-template-kwargs", NULL}, &v))
            o->tmpl_kwargs = v, o->cnv_flag = a;
        else if (arg_is(a, "--jinja", NULL)) continue;
        else if (arg_rope(argc, argv, &i, &o->sp)) continue;
        else if (arg_cache_type(argc, argv, &i, &o->sp)) continue;
        else if (arg_cache_type_draft(argc, argv, &i, &o->spp.draft_type_k, &o->spp.draft_type_v)) continue;
        else if (arg_is(a, "--ignore-eos", NULL)) gp->ignore_eog = true;
        else if (arg_is(a, "--no-display-prompt", NULL)) o->echo = false;
        else if (arg_is(a, "--json", NULL)) o->json = true;
        else if (arg_is(a, "-e", "--escape")) o->no_escape = false;
        else if (arg_is(a, "--no-escape", NULL)) o->no_escape = true;
        else if (arg_is(a, "--mmap", NULL)) bd_use_mmap(true);
        else if (arg_is(a, "--no-mmap", NULL)) bd_use_mmap(false);
        else if (arg_is(a, "-h", "--help")) {
            usage();
            return 0;
        } else {
            const int t = arg_compat_take("run", "llama.cpp", RUN_COMPAT, sizeof RUN_COMPAT / sizeof RUN_COMPAT[0],
                                          o->reparse, argc, argv, &i);
            if (t > 0) continue;
            if (t < 0) return 2;
            fprintf(stderr, "blockdraft run: unknown option '%s'\n", a);
            usage();
            return 2;
        }
    }
    return -1;
}

/* `run NAME`: the gallery model (pulled first when missing) supplies the
 * files and, through its config, the defaults (gallery_config_apply, as in
 * `serve`); the flags are then applied again over them. */
static int run_resolve_name(int argc, char **argv, run_opts *o) {
    static gallery_model gm;
    gallery_pull_opts po;
    cli_pull_opts_init(&po, false);
    char gerr[512];
    if (!gallery_resolve_model(o->name, &po, &gm, gerr, sizeof gerr)) {
        fprintf(stderr, "blockdraft run: %s\n", gerr);
        return 1;
    }
    const char *name = o->name;
    run_opts_init(o);
    o->name = name;
    o->reparse = true;
    o->model_path = gm.target_path;
    if (gm.draft_path[0]) o->draft_path = gm.draft_path;
    if (gm.has_config) {
        gallery_config_apply(&gm.cfg, &o->sp, &o->gp.sampling, &o->gp.n_predict, &o->spp);
        o->cfg = &gm.cfg;
    }
    return run_parse_flags(argc, argv, o);
}

/* The models and what speculation they allow. *m and *dm are NULL on entry. */
static bool run_open_models(run_opts *o, bd_model **m, bd_model **dm) {
    char err[512];
    *m = bd_model_open(o->model_path, err, sizeof err);
    if (!*m) {
        fprintf(stderr, "blockdraft run: %s\n", err);
        return false;
    }
    int32_t train = bd_model_n_ctx_train(*m);
    if (o->ctx_trained && train > 0) o->sp.n_ctx = train;
    /* a config (from an index: untrusted) is bounded as `serve` bounds it:
     * its context_size at the trained context, its threads at the CPUs */
    if (o->cfg && o->cfg->context_size > 0 && !o->ctx_flag && train > 0 && o->sp.n_ctx > train) {
        fprintf(stderr, "blockdraft run: %s: context_size %d capped at the model's trained context %d\n", o->name,
                o->sp.n_ctx, train);
        o->sp.n_ctx = train;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (o->cfg && o->cfg->threads > 0 && !o->threads_flag && cpus > 0 && o->sp.n_threads > cpus) {
        fprintf(stderr, "blockdraft run: %s: threads %d capped at the %ld CPUs\n", o->name, o->sp.n_threads, cpus);
        o->sp.n_threads = (int32_t)cpus;
    }
    if (!strcmp(bd_model_arch(*m), "dflash")) {
        fprintf(stderr, "blockdraft run: %s is a DFlash drafter; pass it with -md next to its target (-m)\n",
                o->model_path);
        return false;
    }
    if (o->draft_path) {
        *dm = bd_model_open(o->draft_path, err, sizeof err);
        if (!*dm) {
            fprintf(stderr, "blockdraft run: draft model: %s\n", err);
            return false;
        }
        if (!o->spec_type_set) o->spp.type = bd_spec_type_for_draft(*dm);
    }
    if ((o->spp.type == BD_SPEC_DRAFT_DFLASH || o->spp.type == BD_SPEC_DRAFT_SIMPLE) && !*dm) {
        fprintf(stderr, "blockdraft run: --spec-type %s needs a draft model (-md)\n", bd_spec_type_name(o->spp.type));
        return false;
    }
    if (*dm && o->spp.type == BD_SPEC_NONE)
        fprintf(stderr, "blockdraft run: warning: -md given with --spec-type none; the draft model is not used\n");
    /* --spec-draft-n-max N alone drafts N every step, as the same llama.cpp
     * command line does; with --spec-adaptive N is the bound */
    o->spp.adaptive = gallery_spec_adaptive(o->cfg, o->spec_adaptive >= 0 ? o->spec_adaptive : o->n_max_flag ? 0 : -1,
                                            o->spp.type);
    return true;
}

/* The prompt's ids (malloc'd), with BOS and special-token parsing as
 * llama.cpp's CLI does. NULL with a message when there are none. */
static int32_t *run_tokenize(const bd_model *m, const char *text, size_t len, int *np) {
    int n = bd_tokenize(m, text, len, true, true, NULL, 0);
    if (n < 0) n = -n;
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (ids) n = bd_tokenize(m, text, len, true, true, ids, n + 1);
    if (!ids || n <= 0) {
        fprintf(stderr, "blockdraft run: the prompt produced no tokens\n");
        free(ids);
        return NULL;
    }
    *np = n;
    return ids;
}

/* The session, and with speculation the bd_spec that owns it. */
static bool run_setup(run_opts *o, bd_model *m, bd_model *dm, run_out *out, bd_session **s, bd_spec **spec) {
    char err[512];
    if (o->spp.type == BD_SPEC_NONE) {
        *s = bd_session_create(m, &o->sp, err, sizeof err);
        if (!*s) fprintf(stderr, "blockdraft run: %s\n", err);
        return *s != NULL;
    }
    char warn[256];
    *spec = bd_spec_open(m, dm, &o->sp, &o->spp, warn, sizeof warn, err, sizeof err);
    if (!*spec) {
        fprintf(stderr, "blockdraft run: %s\n", err);
        return false;
    }
    *s = bd_spec_session(*spec);
    if (warn[0]) fprintf(stderr, "blockdraft run: warning: %s\n", warn);
    if (o->spec_trace && o->json) {
        out->trace = json_array();
        bd_spec_set_trace(*spec, on_step, out);
    }
    return true;
}

/* --json: one object with the ids, the text and the statistics. */
static void run_print_json(run_out *o, const int32_t *pids, int np, const bd_gen_stats *st, const bd_session *s,
                           const bd_spec *spec) {
    json_t *root = json_object(), *jp = json_array(), *jg = json_array();
    for (int i = 0; i < np; i++) json_array_append_new(jp, json_integer(pids[i]));
    for (int i = 0; i < o->n; i++) json_array_append_new(jg, json_integer(o->ids[i]));
    json_object_set_new(root, "prompt_ids", jp);
    json_object_set_new(root, "generated_ids", jg);
    json_object_set_new(root, "text", json_stringn(o->text.p ? o->text.p : "", o->text.n));
    json_t *js = srv_json_gen_stats(st);
    json_object_set_new(js, "kv_len", json_integer(bd_session_length(s)));
    json_object_set_new(js, "kv_bytes", json_integer((json_int_t)bd_session_cache_bytes(s)));
    json_t *jsp = srv_json_spec_stats(&st->spec, spec ? bd_spec_n_max(spec) : 0);
    if (o->trace) {
        json_object_set_new(jsp, "trace", o->trace);
        o->trace = NULL;
    }
    json_object_set_new(js, "spec", jsp);
    json_object_set_new(root, "stats", js);
    char *dump = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (dump) printf("%s\n", dump);
    free(dump);
    json_decref(root);
}

/* Plain output: the text is out already; statistics to stderr. */
static void run_print_text_stats(const bd_gen_stats *st, bool spec) {
    printf("\n");
    fprintf(stderr, "\nprompt: %d tokens, %.1f ms, %.2f tok/s | generation: %d tokens, %.1f ms, %.2f tok/s\n",
            st->n_prompt, st->prompt_ms, st->prompt_tps, st->n_gen, st->gen_ms, st->gen_tps);
    if (!spec) return;
    const bd_spec_stats *ss = &st->spec;
    fprintf(stderr, "speculative (%s%s): drafted %lld, accepted %lld (%.1f%%), target forwards %lld, tau %.3f\n",
            ss->type, ss->adaptive ? ", adaptive" : "", (long long)ss->n_drafted, (long long)ss->n_accepted,
            ss->n_drafted ? 100.0 * ss->n_accepted / ss->n_drafted : 0.0, (long long)ss->target_forwards, ss->tau);
    fprintf(stderr, "acceptance by position:");
    for (int i = 0; i < 32 && ss->drafted_at[i]; i++)
        fprintf(stderr, " %.2f", (double)ss->accepted_at[i] / ss->drafted_at[i]);
    fprintf(stderr, "\ntime: draft %.1f ms, verify %.1f ms, other %.1f ms\n", ss->draft_ms, ss->verify_ms,
            ss->other_ms);
}

/* Constrained output: the vocabulary trie and the grammar (GBNF, or
 * converted from a JSON Schema), into o->gp.grammar. */
static bool run_grammar(run_opts *o, const bd_model *m, bd_grammar_vocab **gvocab, bd_grammar **grammar) {
    if (!o->gram_opt) return true;
    char err[1024];
    size_t glen = strlen(o->gram_src);
    char *gtext = o->gram_file ? arg_read_file(o->gram_src, &glen) : NULL;
    if (o->gram_file && !gtext) {
        fprintf(stderr, "blockdraft run: cannot read %s\n", o->gram_src);
        return false;
    }
    const char *gt = o->gram_file ? gtext : o->gram_src;
    *gvocab = bd_grammar_vocab_create(m, err, sizeof err);
    if (*gvocab && o->gram_schema) {
        json_error_t je;
        json_t *schema = json_loadb(gt, glen, JSON_DECODE_ANY, &je);
        if (!schema) snprintf(err, sizeof err, "%s: invalid JSON at line %d: %s", o->gram_opt, je.line, je.text);
        else *grammar = json_schema_grammar(schema, *gvocab, err, sizeof err);
        json_decref(schema);
    } else if (*gvocab) {
        *grammar = bd_grammar_create(gt, glen, *gvocab, err, sizeof err);
    }
    free(gtext);
    if (!*grammar) {
        fprintf(stderr, "blockdraft run: %s\n", err);
        return false;
    }
    o->gp.grammar = *grammar;
    return true;
}

/* -cnv: the turns (see the top of the file), on the session and bd_spec
 * run_setup made. prompt (may be NULL: read from stdin) is the first user
 * message. Returns the exit status. */
static int run_conversation(const run_opts *opt, bd_model *m, bd_session *s, bd_spec *spec, run_out *o,
                            const char *prompt, size_t prompt_len) {
    char err[1024];
    size_t tlen;
    char *tmpl_buf = NULL;
    const char *tmpl = opt->tmpl;
    if (opt->tmpl_file && !(tmpl = tmpl_buf = arg_read_file(opt->tmpl_file, &tlen))) {
        fprintf(stderr, "blockdraft run: cannot read %s\n", opt->tmpl_file);
        return 1;
    }
    bool fallback = false;
    run_chat *c = run_chat_create(m, tmpl, opt->tmpl_kwargs, opt->system, &fallback, err, sizeof err);
    free(tmpl_buf);
    if (!c) {
        fprintf(stderr, "blockdraft run: %s\n", err);
        return 1;
    }
    if (fallback) fprintf(stderr, "blockdraft run: the model has no chat template; using ChatML\n");
    o->keep = true;
    int rc = 1;
    char *line = NULL;
    size_t line_cap = 0;
    for (;;) {
        const char *user = prompt;
        size_t ulen = prompt_len;
        prompt = NULL;
        while (!user) { /* the next non-empty line of stdin */
            if (!opt->json) {
                fputs("> ", stdout);
                fflush(stdout);
            }
            ssize_t r = getline(&line, &line_cap, stdin);
            if (r < 0) { /* end of input ends the conversation */
                if (!opt->json) fputs("\n", stdout);
                rc = 0;
                goto done;
            }
            while (r > 0 && (line[r - 1] == '\n' || line[r - 1] == '\r')) r--;
            if (r > 0) user = line, ulen = (size_t)r;
        }
        int np = 0;
        int32_t *ids = NULL;
        if (!run_chat_add(c, "user", user, ulen, err, sizeof err) || !(ids = run_chat_prompt(c, &np, err, sizeof err))) {
            fprintf(stderr, "blockdraft run: %s\n", err);
            goto done;
        }
        o->n = 0;
        o->text.n = 0;
        bd_gen_stats st;
        bool ok = spec ? bd_spec_generate(spec, ids, np, &opt->gp, on_token, o, &st, err, sizeof err)
                       : bd_generate(s, ids, np, &opt->gp, on_token, o, &st, err, sizeof err);
        if (!ok) {
            fprintf(stderr, "\nblockdraft run: %s\n", err);
            free(ids);
            goto done;
        }
        out_append(o, o->piece, stream_piece(o, -1));
        if (opt->json) run_print_json(o, ids, np, &st, s, spec);
        else run_print_text_stats(&st, spec != NULL);
        fflush(stdout);
        free(ids);
        if (o->text.failed || !run_chat_add(c, "assistant", o->text.p ? o->text.p : "", o->text.n, err, sizeof err)) {
            fprintf(stderr, "blockdraft run: out of memory\n");
            goto done;
        }
        if (opt->single_turn) {
            rc = 0;
            goto done;
        }
    }
done:
    free(line);
    run_chat_free(c);
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_opts opt;
    run_opts_init(&opt);
    if (argc > 1 && argv[1][0] != '-') opt.name = argv[1];
    int st_rc = run_parse_flags(argc, argv, &opt); /* before the gallery: --help never downloads */
    if (st_rc >= 0) return st_rc;
    if (opt.name && (st_rc = run_resolve_name(argc, argv, &opt)) >= 0) return st_rc;
    if (opt.cnv_flag) { /* -st, -sys and the template flags are conversation flags */
        if (opt.cnv == 0) {
            fprintf(stderr, "blockdraft run: %s needs conversation mode, which -no-cnv turns off\n", opt.cnv_flag);
            return 2;
        }
        opt.cnv = 1;
    }
    const bool cnv = opt.cnv == 1;
    if (opt.tmpl && opt.tmpl_file) {
        fprintf(stderr, "blockdraft run: give either --chat-template or --chat-template-file\n");
        return 2;
    }
    if (!opt.model_path || (!cnv && !opt.prompt && !opt.prompt_file)) {
        usage();
        return 2;
    }
    char *prompt_buf = NULL;
    const char *prompt = opt.prompt;
    size_t prompt_len = prompt ? strlen(prompt) : 0;
    if (opt.prompt_file) {
        prompt = prompt_buf = arg_read_file(opt.prompt_file, &prompt_len);
        if (!prompt_buf) {
            fprintf(stderr, "blockdraft run: cannot read %s\n", opt.prompt_file);
            return 1;
        }
        /* llama.cpp's -f drops one trailing newline (a text file's last) */
        if (prompt_len > 0 && prompt_buf[prompt_len - 1] == '\n') prompt_buf[--prompt_len] = '\0';
    }
    char *system_buf = NULL;
    if (opt.system_file) {
        size_t sl = 0;
        opt.system = system_buf = arg_read_file(opt.system_file, &sl);
        if (!system_buf) {
            fprintf(stderr, "blockdraft run: cannot read %s\n", opt.system_file);
            free(prompt_buf);
            return 1;
        }
        if (sl > 0 && system_buf[sl - 1] == '\n') system_buf[sl - 1] = '\0';
    }
    if (prompt && !opt.no_escape && memchr(prompt, '\\', prompt_len)) {
        /* llama.cpp's default -e: the escapes in -p or -f text become bytes */
        if (!prompt_buf) {
            prompt_buf = malloc(prompt_len + 1);
            if (!prompt_buf) {
                fprintf(stderr, "blockdraft run: out of memory\n");
                free(system_buf);
                return 1;
            }
            memcpy(prompt_buf, prompt, prompt_len + 1);
            prompt = prompt_buf;
        }
        prompt_len = arg_unescape(prompt_buf, prompt_len);
        prompt_buf[prompt_len] = '\0';
    }

    char err[1024];
    int rc = 1, np = 0;
    bd_grammar_vocab *gvocab = NULL;
    bd_grammar *grammar = NULL;
    /* a model file truncated under us is an error message, not SIGBUS */
    if (!bd_mmap_guard_install(err, sizeof err)) fprintf(stderr, "blockdraft run: warning: %s\n", err);
    bd_model *m = NULL, *dm = NULL;
    bd_session *s = NULL;
    bd_spec *spec = NULL;
    run_out o = {.json = opt.json};
    int32_t *pids = NULL;
    if (!run_open_models(&opt, &m, &dm) || (!cnv && !(pids = run_tokenize(m, prompt, prompt_len, &np))) ||
        !run_grammar(&opt, m, &gvocab, &grammar) || !run_setup(&opt, m, dm, &o, &s, &spec))
        goto done;
    o.cap = opt.gp.n_predict >= 0 ? opt.gp.n_predict : bd_session_n_ctx(s);
    o.ids = malloc(((size_t)o.cap + 1) * sizeof *o.ids);
    o.ts = bd_textstream_create(m, false);
    if (o.ts) {
        o.piece_cap = bd_textstream_max_bytes(o.ts);
        o.piece = malloc((size_t)o.piece_cap);
    }
    if (!o.ids || !o.ts || !o.piece) goto done;
    if (cnv) {
        rc = run_conversation(&opt, m, s, spec, &o, prompt, prompt_len);
        goto done;
    }
    if (opt.echo && !opt.json) {
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
    }
    bd_gen_stats st;
    bool ok = spec ? bd_spec_generate(spec, pids, np, &opt.gp, on_token, &o, &st, err, sizeof err)
                   : bd_generate(s, pids, np, &opt.gp, on_token, &o, &st, err, sizeof err);
    if (!ok) {
        fprintf(stderr, "\nblockdraft run: %s\n", err);
        goto done;
    }
    out_append(&o, o.piece, stream_piece(&o, -1));
    if (opt.json) run_print_json(&o, pids, np, &st, s, spec);
    else run_print_text_stats(&st, spec != NULL);
    rc = 0;
done:
    if (o.trace) json_decref(o.trace);
    bd_textstream_free(o.ts);
    free(o.piece);
    free(o.ids);
    bd_buf_free(&o.text);
    free(pids);
    if (spec) bd_spec_free(spec); /* and its session */
    else bd_session_free(s);
    bd_grammar_free(grammar);
    bd_grammar_vocab_free(gvocab);
    bd_model_free(dm);
    bd_model_free(m);
    free(prompt_buf);
    free(system_buf);
    return rc;
}
