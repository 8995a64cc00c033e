/*
 * cmd_run.c - `blockdraft run`: generate text from a model.
 *
 *   blockdraft run (-m MODEL.gguf | NAME) -p PROMPT  (NAME first) [-n N] [--temp T] [--top-k K]
 *                  [--top-p P] [--min-p P] [--seed S] [-t THREADS] [-c CTX]
 *                  [--json] [--ignore-eos] [-f FILE] [--no-display-prompt]
 *                  [-md DRAFT.gguf] [--spec-type TYPE] [--spec-draft-n-max N]
 *                  [--spec-draft-n-min N] [--spec-draft-p-min P] [--spec-adaptive]
 *                  [--grammar GBNF | --grammar-file FILE | -j JSON | -jf FILE]
 *
 * Text streams to stdout as it is generated (the prompt first, as
 * llama.cpp's CLI does); a stats line goes to stderr. --json prints one
 * JSON object instead: prompt_ids, generated_ids, text, stats.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "blockdraft.h"
#include "cli.h"
#include "../chat/json_schema.h"
#include "../decode/grammar.h"
#include "../gallery/gallery.h"

typedef struct {
    bool json;
    void *trace;  /* json_t array of speculative steps (--spec-trace) */
    bd_textstream *ts;
    int32_t *ids;
    int32_t n, cap;
    char *text;
    size_t text_len, text_cap;
} run_out;

static void out_append(run_out *o, const char *s, int n) {
    if (n <= 0) return;
    if (!o->json) {
        fwrite(s, 1, (size_t)n, stdout);
        fflush(stdout);
        return;
    }
    if (o->text_len + (size_t)n + 1 > o->text_cap) {
        size_t nc = (o->text_cap ? o->text_cap * 2 : 4096) + (size_t)n;
        char *t = realloc(o->text, nc);
        if (!t) return;
        o->text = t;
        o->text_cap = nc;
    }
    memcpy(o->text + o->text_len, s, (size_t)n);
    o->text_len += (size_t)n;
    o->text[o->text_len] = '\0';
}

static bool on_token(int32_t tok, void *user) {
    run_out *o = user;
    if (o->n < o->cap) o->ids[o->n++] = tok;
    char buf[256];
    int n = bd_textstream_push(o->ts, tok, buf, sizeof buf);
    out_append(o, buf, n);
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
            "  -p, --prompt TEXT      prompt text;  -f, --file FILE  read the prompt from a file\n"
            "  -n, --n-predict N      tokens to generate (default 128; -1 = until end of text)\n"
            "  --temp T               temperature (default 0.8; 0 = greedy)\n"
            "  --top-k K  --top-p P  --min-p P   sampling filters (defaults 40, 0.95, 0.05)\n"
            "  -s, --seed S           RNG seed (default random)\n"
            "  -t, --threads N        threads (default: all cores)\n"
            "  -c, --ctx-size N       context length (default 4096)\n"
            "  -b, --batch-size N     prompt batch (default 512)\n"
            "  --ignore-eos           keep generating past end-of-text tokens\n"
            "  --no-display-prompt    do not echo the prompt\n"
            "  --json                 print one JSON object with ids, text and stats\n"
            "speculative decoding (llama.cpp's flag names):\n"
            "  -md, --model-draft FILE  draft model: a DFlash drafter or a small model of the same vocabulary\n"
            "  --spec-type T          none | draft-dflash | draft-simple | ngram-simple\n"
            "                         (default: from the draft file's architecture when -md is given)\n"
            "  --spec-draft-n-max N   max drafted tokens per step (DFlash: default and limit block_size-1;\n"
            "                         draft-simple: default 3)\n"
            "  --spec-draft-n-min N   drop drafts shorter than N (default 0)\n"
            "  --spec-draft-p-min P   draft-simple: stop drafting below this draft probability\n"
            "  --spec-adaptive        choose the draft length each step from acceptance and measured cost\n"
            "  --spec-ngram-size-n N  ngram-simple: match length (default 3)\n"
            "  --spec-trace           with --json: every step's anchor, drafts and accepted count\n"
            "  --spec-dflash-short-block  DFlash: draft with [anchor, MASK x n] as llama.cpp does, instead\n"
            "                         of the trained block length (default)\n"
            "constrained output (llama.cpp's flag names; one of them):\n"
            "  --grammar GBNF         every token obeys this GBNF grammar (root rule `root`); generation\n"
            "                         ends when the grammar is complete and allows nothing else\n"
            "  --grammar-file FILE    the same, read from FILE\n"
            "  -j, --json-schema JSON   output a JSON value valid for this JSON Schema (common subset;\n"
            "                         unsupported keywords are refused by name)\n"
            "  -jf, --json-schema-file FILE  the same, read from FILE\n");
}

/* A gallery model's config supplies defaults; command-line flags win. */
static void apply_config(const gallery_config *c, bd_gen_params *gp, bd_session_params *sp, bd_spec_params *spp) {
    if (c->context_size > 0) sp->n_ctx = c->context_size;
    if (c->threads > 0) sp->n_threads = c->threads;
    if (c->has_temperature) gp->sampling.temperature = (float)c->temperature;
    if (c->has_top_p) gp->sampling.top_p = (float)c->top_p;
    if (c->has_top_k) gp->sampling.top_k = (int32_t)c->top_k;
    if (c->has_min_p) gp->sampling.min_p = (float)c->min_p;
    if (c->has_seed && c->seed >= 0) gp->sampling.seed = (uint64_t)c->seed;
    if (c->has_max_tokens) gp->n_predict = (int32_t)c->max_tokens;
    if (c->spec_n_max > 0) spp->n_max = c->spec_n_max;
    if (c->spec_n_min > 0) spp->n_min = c->spec_n_min;
    if (c->has_spec_p_min) spp->p_min = (float)c->spec_p_min;
}

int cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL, *v, *name = NULL;
    bd_gen_params gp = {.n_predict = 128, .sampling = bd_sampler_default_params()};
    bd_session_params sp = bd_session_default_params();
    bool json = false, echo = true, spec_type_set = false, spec_trace = false;
    const char *draft_path = NULL;
    const char *gram_src = NULL, *gram_opt = NULL; /* --grammar / -j ... */
    bool gram_file = false, gram_schema = false;
    bd_spec_params spp = bd_spec_default_params();
    static gallery_model gm;
    /* `run NAME [options]`: a gallery model (pulled first when missing) */
    if (argc > 1 && argv[1][0] != '-') name = argv[1];
    if (name) {
        gallery_pull_opts po;
        cli_pull_opts_init(&po, false);
        char gerr[512];
        if (!gallery_resolve_model(name, &po, &gm, gerr, sizeof gerr)) {
            fprintf(stderr, "blockdraft run: %s\n", gerr);
            return 1;
        }
        model_path = gm.target_path;
        if (gm.draft_path[0]) draft_path = gm.draft_path;
        if (gm.has_config) apply_config(&gm.cfg, &gp, &sp, &spp);
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a == name) continue;
        if (arg_take(argc, argv, &i, (const char *[]){"-m", "--model", NULL}, &v)) model_path = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-p", "--prompt", NULL}, &v)) prompt = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-f", "--file", NULL}, &v)) prompt_file = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-n", "--n-predict", NULL}, &v))
            gp.n_predict = arg_i32(a, v, -1, 1 << 24);
        else if (arg_take(argc, argv, &i, (const char *[]){"--temp", NULL}, &v))
            gp.sampling.temperature = arg_f32(a, v, 0, 100);
        else if (arg_take(argc, argv, &i, (const char *[]){"--top-k", NULL}, &v))
            gp.sampling.top_k = arg_i32(a, v, 0, 1 << 24);
        else if (arg_take(argc, argv, &i, (const char *[]){"--top-p", NULL}, &v))
            gp.sampling.top_p = arg_f32(a, v, 0, 1);
        else if (arg_take(argc, argv, &i, (const char *[]){"--min-p", NULL}, &v))
            gp.sampling.min_p = arg_f32(a, v, 0, 1);
        else if (arg_take(argc, argv, &i, (const char *[]){"-s", "--seed", NULL}, &v))
            gp.sampling.seed = arg_u64(a, v);
        else if (arg_take(argc, argv, &i, (const char *[]){"-t", "--threads", NULL}, &v))
            sp.n_threads = arg_i32(a, v, 1, 256);
        else if (arg_take(argc, argv, &i, (const char *[]){"-c", "--ctx-size", NULL}, &v))
            sp.n_ctx = arg_i32(a, v, 0, 1 << 22);
        else if (arg_take(argc, argv, &i, (const char *[]){"-b", "--batch-size", NULL}, &v))
            sp.n_batch = arg_i32(a, v, 1, 1 << 16);
        else if (arg_take(argc, argv, &i, (const char *[]){"-md", "--model-draft", "--spec-draft-model", NULL}, &v))
            draft_path = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-type", NULL}, &v)) {
            if (!bd_spec_type_parse(v, &spp.type)) {
                fprintf(stderr, "blockdraft run: unknown --spec-type '%s' (none, draft-dflash, draft-simple, ngram-simple)\n", v);
                return 2;
            }
            spec_type_set = true;
        } else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-n-max", NULL}, &v))
            spp.n_max = arg_i32(a, v, 1, 63);
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-n-min", NULL}, &v))
            spp.n_min = arg_i32(a, v, 0, 63);
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-draft-p-min", NULL}, &v))
            spp.p_min = arg_f32(a, v, 0, 1);
        else if (arg_take(argc, argv, &i, (const char *[]){"--spec-ngram-size-n", NULL}, &v))
            spp.ngram_n = arg_i32(a, v, 1, 64);
        else if (arg_take(argc, argv, &i, (const char *[]){"--grammar", "--grammar-file", "-j", "--json-schema", "-jf",
                                                           "--json-schema-file", NULL}, &v)) {
            if (gram_opt) {
                fprintf(stderr, "blockdraft run: %s and %s cannot be combined (one grammar)\n", gram_opt, a);
                return 2;
            }
            gram_opt = a;
            gram_src = v;
            gram_file = strstr(a, "-file") || !strcmp(a, "-jf");
            gram_schema = strstr(a, "json") || !strcmp(a, "-j") || !strcmp(a, "-jf");
        } else if (arg_is(a, "--spec-adaptive", NULL)) spp.adaptive = true;
        else if (arg_is(a, "--spec-dflash-short-block", NULL)) spp.dflash_short_block = true;
        else if (arg_is(a, "--spec-trace", NULL)) spec_trace = true;
        else if (arg_is(a, "--draft", "--draft-max") || arg_is(a, "--draft-n", "--draft-min")) {
            fprintf(stderr, "blockdraft run: %s was removed (as in llama.cpp); use --spec-draft-n-max / --spec-draft-n-min\n", a);
            return 2;
        } else if (arg_is(a, "--ignore-eos", NULL)) gp.ignore_eog = true;
        else if (arg_is(a, "--no-display-prompt", NULL)) echo = false;
        else if (arg_is(a, "--json", NULL)) json = true;
        else if (arg_is(a, "-h", "--help")) {
            usage();
            return 0;
        } else {
            fprintf(stderr, "blockdraft run: unknown option '%s'\n", a);
            usage();
            return 2;
        }
    }
    if (!model_path || (!prompt && !prompt_file)) {
        usage();
        return 2;
    }
    char *prompt_buf = NULL;
    size_t prompt_len;
    if (prompt_file) {
        prompt_buf = arg_read_file(prompt_file, &prompt_len);
        if (!prompt_buf) {
            fprintf(stderr, "blockdraft run: cannot read %s\n", prompt_file);
            return 1;
        }
        prompt = prompt_buf;
    } else {
        prompt_len = strlen(prompt);
    }

    char err[1024];
    int rc = 1;
    bd_grammar_vocab *gvocab = NULL;
    bd_grammar *grammar = NULL;
    bd_session *s = NULL;
    bd_model *dm = NULL;
    bd_spec *spec = NULL;
    int32_t taps[16];
    run_out o = {.json = json};
    int32_t *pids = NULL;
    bd_model *m = bd_model_open(model_path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "blockdraft run: %s\n", err);
        free(prompt_buf);
        return 1;
    }
    if (!strcmp(bd_model_arch(m), "dflash")) {
        fprintf(stderr, "blockdraft run: %s is a DFlash drafter; pass it with -md next to its target (-m)\n", model_path);
        bd_model_free(m);
        free(prompt_buf);
        return 1;
    }
    if (draft_path) {
        dm = bd_model_open(draft_path, err, sizeof err);
        if (!dm) {
            fprintf(stderr, "blockdraft run: draft model: %s\n", err);
            goto done;
        }
        if (!spec_type_set) spp.type = bd_spec_type_for_draft(dm);
    }
    if ((spp.type == BD_SPEC_DRAFT_DFLASH || spp.type == BD_SPEC_DRAFT_SIMPLE) && !dm) {
        fprintf(stderr, "blockdraft run: --spec-type %s needs a draft model (-md)\n", bd_spec_type_name(spp.type));
        goto done;
    }
    if (dm && spp.type == BD_SPEC_NONE)
        fprintf(stderr, "blockdraft run: warning: -md given with --spec-type none; the draft model is not used\n");
    if (spp.type == BD_SPEC_DRAFT_DFLASH) {
        if (!bd_dflash_check_pair(m, dm, err, sizeof err)) {
            fprintf(stderr, "blockdraft run: drafter %s does not fit target %s: %s\n", draft_path, model_path, err);
            goto done;
        }
        sp.n_tap = bd_dflash_tap_layers(dm, taps, 16);
        sp.tap_layers = taps;
    }
    if (gram_opt) { /* constrained output: vocabulary trie + grammar */
        size_t glen = strlen(gram_src);
        char *gtext = gram_file ? arg_read_file(gram_src, &glen) : NULL;
        if (gram_file && !gtext) {
            fprintf(stderr, "blockdraft run: cannot read %s\n", gram_src);
            goto done;
        }
        const char *gt = gram_file ? gtext : gram_src;
        gvocab = bd_grammar_vocab_create(m, err, sizeof err);
        if (gvocab && gram_schema) {
            json_error_t je;
            json_t *schema = json_loadb(gt, glen, JSON_DECODE_ANY, &je);
            if (!schema) snprintf(err, sizeof err, "%s: invalid JSON at line %d: %s", gram_opt, je.line, je.text);
            else grammar = json_schema_grammar(schema, gvocab, err, sizeof err);
            json_decref(schema);
        } else if (gvocab) {
            grammar = bd_grammar_create(gt, glen, gvocab, err, sizeof err);
        }
        free(gtext);
        if (!grammar) {
            fprintf(stderr, "blockdraft run: %s\n", err);
            goto done;
        }
        gp.grammar = grammar;
    }
    int np = bd_tokenize(m, prompt, prompt_len, true, true, NULL, 0);
    if (np < 0) np = -np;
    pids = malloc(((size_t)np + 1) * sizeof *pids);
    if (!pids) goto done;
    np = bd_tokenize(m, prompt, prompt_len, true, true, pids, np + 1);
    if (np <= 0) {
        fprintf(stderr, "blockdraft run: the prompt produced no tokens\n");
        goto done;
    }
    s = bd_session_create(m, &sp, err, sizeof err);
    if (!s) {
        fprintf(stderr, "blockdraft run: %s\n", err);
        goto done;
    }
    if (spp.type != BD_SPEC_NONE) {
        char warn[256];
        spec = bd_spec_create(s, dm, &spp, warn, sizeof warn, err, sizeof err);
        if (!spec) {
            fprintf(stderr, "blockdraft run: %s\n", err);
            goto done;
        }
        if (warn[0]) fprintf(stderr, "blockdraft run: warning: %s\n", warn);
        if (spec_trace && json) {
            o.trace = json_array();
            bd_spec_set_trace(spec, on_step, &o);
        }
    }
    o.cap = gp.n_predict >= 0 ? gp.n_predict : bd_session_n_ctx(s);
    o.ids = malloc(((size_t)o.cap + 1) * sizeof *o.ids);
    o.ts = bd_textstream_create(m, false);
    if (!o.ids || !o.ts) goto done;
    if (echo && !json) {
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
    }
    bd_gen_stats st;
    bool ok = spec ? bd_spec_generate(spec, pids, np, &gp, on_token, &o, &st, err, sizeof err)
                   : bd_generate(s, pids, np, &gp, on_token, &o, &st, err, sizeof err);
    if (!ok) {
        fprintf(stderr, "\nblockdraft run: %s\n", err);
        goto done;
    }
    char tail[64];
    out_append(&o, tail, bd_textstream_flush(o.ts, tail, sizeof tail));
    if (json) {
        json_t *root = json_object(), *jp = json_array(), *jg = json_array(), *js = json_object();
        for (int i = 0; i < np; i++) json_array_append_new(jp, json_integer(pids[i]));
        for (int i = 0; i < o.n; i++) json_array_append_new(jg, json_integer(o.ids[i]));
        json_object_set_new(root, "prompt_ids", jp);
        json_object_set_new(root, "generated_ids", jg);
        json_object_set_new(root, "text", json_stringn(o.text ? o.text : "", o.text_len));
        json_object_set_new(js, "n_prompt", json_integer(st.n_prompt));
        json_object_set_new(js, "n_gen", json_integer(st.n_gen));
        json_object_set_new(js, "prompt_ms", json_real(st.prompt_ms));
        json_object_set_new(js, "gen_ms", json_real(st.gen_ms));
        json_object_set_new(js, "prompt_tps", json_real(st.prompt_tps));
        json_object_set_new(js, "gen_tps", json_real(st.gen_tps));
        json_object_set_new(js, "stopped_eog", json_boolean(st.stopped_eog));
        json_object_set_new(js, "kv_len", json_integer(bd_session_length(s)));
        const bd_spec_stats *ss = &st.spec;
        json_t *jsp = json_object(), *acc = json_array();
        json_object_set_new(jsp, "type", json_string(ss->type));
        json_object_set_new(jsp, "n_drafted", json_integer(ss->n_drafted));
        json_object_set_new(jsp, "n_accepted", json_integer(ss->n_accepted));
        json_object_set_new(jsp, "tau", json_real(ss->tau));
        json_object_set_new(jsp, "target_forwards", json_integer(ss->target_forwards));
        json_object_set_new(jsp, "draft_steps", json_integer(ss->n_steps));
        json_object_set_new(jsp, "acceptance_rate", json_real(ss->n_drafted ? (double)ss->n_accepted / ss->n_drafted : 0));
        for (int i = 0; i < 32 && ss->drafted_at[i]; i++)
            json_array_append_new(acc, json_real((double)ss->accepted_at[i] / ss->drafted_at[i]));
        json_object_set_new(jsp, "acceptance_by_position", acc);
        json_object_set_new(jsp, "draft_ms", json_real(ss->draft_ms));
        json_object_set_new(jsp, "verify_ms", json_real(ss->verify_ms));
        json_object_set_new(jsp, "other_ms", json_real(ss->other_ms));
        if (spec) json_object_set_new(jsp, "n_max", json_integer(bd_spec_n_max(spec)));
        if (o.trace) {
            json_object_set_new(jsp, "trace", o.trace);
            o.trace = NULL;
        }
        json_object_set_new(js, "spec", jsp);
        json_object_set_new(root, "stats", js);
        char *dump = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII);
        if (dump) printf("%s\n", dump);
        free(dump);
        json_decref(root);
    } else {
        printf("\n");
        fprintf(stderr, "\nprompt: %d tokens, %.1f ms, %.2f tok/s | generation: %d tokens, %.1f ms, %.2f tok/s\n",
                st.n_prompt, st.prompt_ms, st.prompt_tps, st.n_gen, st.gen_ms, st.gen_tps);
        const bd_spec_stats *ss = &st.spec;
        if (spec) {
            fprintf(stderr, "speculative (%s): drafted %lld, accepted %lld (%.1f%%), target forwards %lld, tau %.3f\n",
                    ss->type, (long long)ss->n_drafted, (long long)ss->n_accepted,
                    ss->n_drafted ? 100.0 * ss->n_accepted / ss->n_drafted : 0.0, (long long)ss->target_forwards,
                    ss->tau);
            fprintf(stderr, "acceptance by position:");
            for (int i = 0; i < 32 && ss->drafted_at[i]; i++)
                fprintf(stderr, " %.2f", (double)ss->accepted_at[i] / ss->drafted_at[i]);
            fprintf(stderr, "\ntime: draft %.1f ms, verify %.1f ms, other %.1f ms\n", ss->draft_ms, ss->verify_ms,
                    ss->other_ms);
        }
    }
    rc = 0;
done:
    if (o.trace) json_decref(o.trace);
    bd_textstream_free(o.ts);
    free(o.ids);
    free(o.text);
    free(pids);
    bd_spec_free(spec);
    bd_grammar_free(grammar);
    bd_grammar_vocab_free(gvocab);
    bd_session_free(s);
    bd_model_free(dm);
    bd_model_free(m);
    free(prompt_buf);
    return rc;
}
