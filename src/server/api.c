/*
 * api.c - the OpenAI surface: POST /v1/chat/completions and
 * POST /v1/completions (GET /v1/models is in compat.c).
 *
 * A request is checked completely before any work is queued: every field
 * of the body (api_req.c), the model name, the chat template rendering
 * and the prompt length. Anything wrong is a 4xx with an OpenAI error
 * object naming the parameter. Then one job per choice is queued (n
 * choices -- or best_of candidates -- per prompt; /v1/completions takes
 * several prompts) and the request thread either waits for them
 * (watching the client's socket) or streams them as server-sent events
 * (api_resp.c).
 *
 * Tools (chat): the request's tools go to the model's template; the output
 * is parsed for calls (toolcall.h) unless tool_choice is "none".
 * tool_choice "required" or a named function starts the assistant's turn
 * with the opening of a call in the template's format ("<tool_call>\n",
 * with the name filled in for a named one), so the model continues a
 * call; a reasoning block the prompt opened is closed first. Nothing
 * constrains the rest of the call: output that does not parse is
 * returned as content. parallel_tool_calls false ends the generation
 * after the first call.
 *
 * Prompt cache: each slot keeps its cache; a job goes to the idle slot
 * holding the longest prefix of its prompt, counting what it would throw
 * away (sched.c), and only the rest is forwarded ("cache_prompt": false
 * starts from an empty cache);
 * usage.prompt_tokens_details.cached_tokens says how many were kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "api.h"
#include "constrain.h"

/* ------------------------------------------------------------------------
 * Prompts and jobs
 * ---------------------------------------------------------------------- */

/* Tokenize into a malloc'd array; returns the count (0: none, -1: OOM).
 * Control tokens are matched in the text, except inside the n_plain
 * ranges plain[2k] .. plain[2k+1] (a chat prompt's user text). */
static int tokenize(const bd_model *m, const char *text, size_t len, bool add_special, const size_t *plain,
                    int n_plain, int32_t **out) {
    *out = NULL;
    int n = bd_tokenize_guarded(m, text, len, add_special, plain, n_plain, NULL, 0);
    if (n < 0) n = -n;
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) return -1;
    n = bd_tokenize_guarded(m, text, len, add_special, plain, n_plain, ids, n + 1);
    if (n < 0) {
        free(ids);
        return -1;
    }
    *out = ids;
    return n;
}

/* A prompt of more bytes than n_ctx tokens of the vocabulary's longest
 * piece can hold is refused before the tokenizer spends time on it (a
 * body may carry megabytes). false with a 400 queued (*rc). */
static bool prompt_fits(srv_req *r, const srv_model *m, size_t len, int *rc) {
    int piece = bd_token_piece_max(m->m, true);
    size_t most = (size_t)m->n_ctx * (size_t)(piece > 0 ? piece : 1);
    if (len <= most) return true;
    *rc = srv_send_error(r, 400, ERR_INVALID, "context_length_exceeded",
                         "the prompt has %zu bytes, more than the %d tokens of model '%s''s context can hold "
                         "(a token is at most %d bytes)", len, m->n_ctx, m->name, piece);
    return false;
}

static bool check_prompt_len(srv_req *r, const srv_model *m, int n, int *rc) {
    if (n <= 0) {
        *rc = srv_send_error(r, 400, ERR_INVALID, "empty_prompt", "the prompt produced no tokens");
        return false;
    }
    if (n >= m->n_ctx) {
        *rc = srv_send_error(r, 400, ERR_INVALID, "context_length_exceeded",
                             "the prompt has %d tokens; the context of model '%s' holds %d", n, m->name, m->n_ctx);
        return false;
    }
    return true;
}

/* One job (not queued): choice k of a prompt. */
static srv_job *job_new(srv_req *r, const gen_req *g, const int32_t *ids, int n, int k, bool want_lp,
                        bool stop_after_call, int *rc) {
    srv_model *m = g->m;
    srv_job *j = srv_job_create(m, ids, n);
    if (!j) goto oom;
    int room = m->n_ctx - n;
    j->gp = g->gp;
    if (!srv_job_own_bias(j)) goto oom;
    j->gp.n_predict = g->max_tokens < 0 || g->max_tokens > room ? room : g->max_tokens;
    /* choices differ: a given seed + k, else a random seed each */
    if (g->seed_given) j->gp.sampling.seed = g->gp.sampling.seed + (uint64_t)k;
    else if (k > 0 && getrandom(&j->gp.sampling.seed, sizeof j->gp.sampling.seed, 0) != sizeof j->gp.sampling.seed)
        j->gp.sampling.seed ^= (uint64_t)(bd_time_ms() * 1e3) + (uint64_t)k;
    j->deadline_ms = bd_time_ms() + r->srv->p.timeout_s * 1e3;
    j->cache_prompt = g->cache_prompt;
    j->top_logprobs = g->top_logprobs >= 0 ? g->top_logprobs : want_lp ? 0 : -1;
    j->spec_set = g->spec_set;
    j->spec_n_max = g->spec_n_max;
    j->spec_n_min = g->spec_n_min;
    j->spec_p_min = g->spec_p_min;
    if (g->stop && json_is_string(g->stop)) srv_job_add_stop(j, json_string_value(g->stop), json_string_length(g->stop));
    for (size_t i = 0; g->stop && json_is_array(g->stop) && i < json_array_size(g->stop); i++) {
        json_t *e = json_array_get(g->stop, i);
        srv_job_add_stop(j, json_string_value(e), json_string_length(e));
    }
    if (m->has_cfg)
        for (int i = 0; i < m->cfg.n_stopwords; i++)
            srv_job_add_stop(j, m->cfg.stopwords[i], strlen(m->cfg.stopwords[i]));
    if (stop_after_call) srv_job_add_stop_keep(j, "</tool_call>", 12);
    if (g->gbnf) {
        /* one grammar per job: a grammar is used by one generation at a time */
        char err[800];
        j->grammar = srv_grammar_compile(m, g->gbnf, err, sizeof err);
        if (!j->grammar) {
            srv_job_unref(j);
            *rc = srv_send_error(r, 400, ERR_INVALID, "invalid_value", "'%s': %s", g->gbnf_field, err);
            return NULL;
        }
        j->gp.grammar = j->grammar;
    }
    if (g->test_output) {
        /* the test hook: this output instead of a generation */
        const char *t = json_string_value(g->test_output);
        size_t tl = json_string_length(g->test_output);
        int nf = bd_tokenize(m->m, t, tl, false, true, NULL, 0);
        if (nf < 0) nf = -nf;
        j->forced = malloc(((size_t)nf + 1) * sizeof *j->forced);
        if (!j->forced) goto oom;
        j->n_forced = bd_tokenize(m->m, t, tl, false, true, j->forced, nf + 1);
        if (j->n_forced < 0) goto oom;
    }
    return j;
oom:
    srv_job_unref(j);
    *rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
    return NULL;
}

/* Queue every job of o; on failure the queued ones are withdrawn and a
 * 503 is queued. */
static bool submit_all(srv_req *r, api_out *o, int *rc) {
    for (int i = 0; i < o->n_choices; i++) {
        int status = 503;
        char err[300];
        if (!srv_job_submit(r->srv, o->ch[i].j, &status, err, sizeof err)) {
            for (int k = 0; k < i; k++) {
                atomic_store(&o->ch[k].j->cancel, true);
                srv_job_withdraw(r->srv, o->ch[k].j);
            }
            r->retry_after = "2";
            *rc = srv_send_error(r, status, "server_error", "server_busy", "%s", err);
            return false;
        }
    }
    return true;
}

/* Wait for all jobs; the first failed one is answered. */
static bool wait_all(srv_req *r, api_out *o, int *rc) {
    for (int i = 0; i < o->n_choices; i++)
        if (!srv_wait_job(r, o->ch[i].j)) {
            for (int k = i + 1; k < o->n_choices; k++) {
                atomic_store(&o->ch[k].j->cancel, true);
                srv_job_withdraw(r->srv, o->ch[k].j);
            }
            *rc = MHD_NO_RESULT;
            return false;
        }
    for (int i = 0; i < o->n_choices; i++)
        if (!o->ch[i].j->ok) {
            *rc = api_send_job_error(r, o->ch[i].j);
            return false;
        }
    return true;
}

/* best_of: per prompt, keep the n candidates with the highest mean
 * log-probability per token (OpenAI's rule), in that order, renumbered. */
static void keep_best(api_out *o, const gen_req *g) {
    if (g->best_of <= g->n) return;
    api_choice kept[API_MAX_JOBS];
    int nk = 0;
    for (int p = 0; p < o->n_prompts; p++) {
        api_choice *c = &o->ch[p * g->best_of];
        double score[API_MAX_JOBS];
        bool used[API_MAX_JOBS] = {0};
        for (int i = 0; i < g->best_of; i++) {
            const srv_job *j = c[i].j;
            double s = 0;
            for (size_t t = 0; t < j->n_lp; t++) s += j->lp[t].logprob;
            score[i] = j->n_lp ? s / (double)j->n_lp : -1e30;
        }
        for (int k = 0; k < g->n; k++) {
            int best = -1;
            for (int i = 0; i < g->best_of; i++)
                if (!used[i] && (best < 0 || score[i] > score[best])) best = i;
            used[best] = true;
            kept[nk] = c[best];
            kept[nk].index = nk;
            nk++;
        }
        for (int i = 0; i < g->best_of; i++)
            if (!used[i]) {
                srv_job_unref(c[i].j);
                c[i].j = NULL;
                json_decref(c[i].calls);
            }
    }
    memcpy(o->ch, kept, (size_t)nk * sizeof kept[0]);
    o->n_choices = nk;
}

/* Set up the choices of one prompt (k = 0 .. per-1) from its tokens. */
static bool add_choices(srv_req *r, api_out *o, const gen_req *g, const int32_t *ids, int n, int prompt_index,
                        int per, bool starts_in_think, bool stop_after_call, int *rc) {
    for (int k = 0; k < per; k++) {
        if (o->n_choices == API_MAX_JOBS) {
            *rc = api_bad(r, "n", "times the number of prompts (and best_of) must be at most 16");
            return false;
        }
        api_choice *c = &o->ch[o->n_choices];
        c->j = job_new(r, g, ids, n, k, per > g->n, stop_after_call, rc);
        if (!c->j) return false;
        o->n_choices++;
        c->index = o->n_choices - 1;
        c->prompt_index = prompt_index;
        c->starts_in_think = starts_in_think;
        c->parse_tools = o->chat && g->tools && g->tool_choice != TOOL_CHOICE_NONE;
        c->pre = o->pre;
        chat_think_init(&c->think, starts_in_think);
        chat_tool_stream_init_format(&c->tools, o->tools, o->m->tool_format);
        c->calls = json_array();
        if (!c->calls) {
            *rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
            return false;
        }
    }
    return true;
}

/* Queue the jobs of o, then stream them or wait and answer. Takes o. */
static int run_request(srv_req *r, api_out *o, const gen_req *g) {
    int rc = 0;
    if (!submit_all(r, o, &rc)) goto done;
    if (g->stream) return api_out_stream(r, o);
    if (!wait_all(r, o, &rc)) goto done;
    api_out_sum_stats(o);
    keep_best(o, g);
    rc = srv_send_json(r, 200, api_out_body(o, g));
done:
    api_out_free(o);
    free(o);
    return rc;
}

/* ------------------------------------------------------------------------
 * POST /v1/chat/completions
 * ---------------------------------------------------------------------- */

/* Render the chat prompt (with the forced start of a call when asked) and
 * tokenize it. Returns the token count, or -1 with a response queued. */
static int chat_prompt(srv_req *r, json_t *root, gen_req *g, api_out *o, int32_t **ids, bool *starts_in_think,
                       int *rc) {
    srv_model *m = g->m;
    json_t *ctk = json_object_get(root, "chat_template_kwargs");
    json_t *kw = ctk && json_is_object(ctk) ? json_deep_copy(ctk) : json_object();
    chat_params cp = {.messages = json_object_get(root, "messages"),
                      .tools = g->tools,
                      .add_generation_prompt = true,
                      .extra_kwargs = kw,
                      .llamacpp_compat = true};
    bool user_err = false;
    char terr[700];
    size_t plen = 0;
    chat_span *spans = NULL;
    size_t n_spans = 0;
    cp.user_spans = &spans;
    cp.n_user_spans = &n_spans;
    char *prompt = chat_template_apply(m->tmpl, &cp, &plen, &user_err, terr, sizeof terr);
    json_decref(kw);
    if (!prompt) {
        *rc = srv_send_error(r, user_err ? 400 : 500, user_err ? ERR_INVALID : "server_error", "template_error",
                             "chat template error%s: %s",
                             user_err ? " (caused by the request)" : " (in the model's template)", terr);
        return -1;
    }
    if (!prompt_fits(r, m, plen, rc)) {
        free(prompt);
        free(spans);
        return -1;
    }
    /* tool_choice required / named: the turn starts with a call */
    if (g->tools && (g->tool_choice == TOOL_CHOICE_REQUIRED || g->tool_choice == TOOL_CHOICE_NAMED)) {
        if (m->tool_format == CHAT_TOOL_FORMAT_NONE) {
            free(prompt);
            free(spans);
            *rc = api_bad(r, "tool_choice",
                          "\"required\" or a named function needs a chat template with a known tool-call format "
                          "(<tool_call>, as the Qwen templates, or Llama 3.1-3.3's JSON object)");
            return -1;
        }
        o->pre = chat_tool_call_prefix(m->tool_format, g->tool_choice == TOOL_CHOICE_NAMED ? g->tool_name : NULL);
        const char *close = m->reasoning && chat_prompt_opens_think(prompt, plen) ? "</think>\n\n" : "";
        size_t cl = strlen(close), pl = o->pre ? strlen(o->pre) : 0;
        char *p2 = o->pre ? realloc(prompt, plen + cl + pl + 1) : NULL;
        if (!p2) {
            free(prompt);
            free(spans);
            *rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
            return -1;
        }
        prompt = p2;
        memcpy(prompt + plen, close, cl);
        memcpy(prompt + plen + cl, o->pre, pl + 1);
        /* the name is the request's text: a plain span (it can hold no
         * control token anyway: letters, digits, '_' and '-') */
        if (g->tool_choice == TOOL_CHOICE_NAMED) {
            chat_span *s2 = realloc(spans, (n_spans + 1) * sizeof *s2);
            const char *at = strstr(prompt + plen + cl, g->tool_name);
            if (s2) {
                spans = s2;
                spans[n_spans].start = (size_t)(at - prompt);
                spans[n_spans].end = spans[n_spans].start + strlen(g->tool_name);
                n_spans++;
            }
        }
        plen += cl + pl;
    }
    /* a template that writes the BOS text itself must not get a second BOS */
    bool add_special = !(m->bos_str && m->bos_str[0] && !strncmp(prompt, m->bos_str, strlen(m->bos_str)));
    /* the messages' text never becomes a control token (prompt injection):
     * control tokens are matched only in what the template wrote */
    size_t *plain = n_spans ? malloc(2 * n_spans * sizeof *plain) : NULL;
    int n = -1;
    if (!n_spans || plain) {
        for (size_t i = 0; i < n_spans; i++) {
            plain[2 * i] = spans[i].start;
            plain[2 * i + 1] = spans[i].end;
        }
        n = n_spans > (size_t)INT32_MAX ? -1 : tokenize(m->m, prompt, plen, add_special, plain, (int)n_spans, ids);
    }
    free(plain);
    free(spans);
    *starts_in_think = m->reasoning && chat_prompt_opens_think(prompt, plen);
    free(prompt);
    if (n < 0) {
        *rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
        return -1;
    }
    return n;
}

int api_chat(srv_req *r) {
    int rc = 0;
    json_t *root = api_parse_body(r, &rc);
    if (!root) return rc;
    gen_req g;
    memset(&g, 0, sizeof g);
    int32_t *ids = NULL;
    api_out *o = NULL;
    char buf[300];
    const char *why = srv_check_messages(json_object_get(root, "messages"), buf, sizeof buf);
    if (why) {
        rc = srv_send_error(r, 400, ERR_INVALID, "invalid_messages", "%s", why);
        goto done;
    }
    json_t *ctk = json_object_get(root, "chat_template_kwargs");
    if (ctk && !json_is_null(ctk) && !json_is_object(ctk)) {
        rc = api_bad(r, "chat_template_kwargs", "must be an object");
        goto done;
    }
    json_t *et = ctk && json_is_object(ctk) ? json_object_get(ctk, "enable_thinking") : NULL;
    if (et && !json_is_boolean(et)) {
        rc = api_bad(r, "chat_template_kwargs.enable_thinking", "must be a boolean");
        goto done;
    }
    if (!api_parse_request(r, root, API_CHAT, &g, &rc)) goto done;
    if (!g.m->tmpl) {
        rc = srv_send_error(r, 500, "server_error", "template_error", "%s", g.m->tmpl_err);
        goto done;
    }
    o = malloc(sizeof *o);
    if (!o) {
        rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
        goto done;
    }
    api_out_init(o, &g, true);
    bool starts_in_think = false;
    int n = chat_prompt(r, root, &g, o, &ids, &starts_in_think, &rc);
    if (n < 0 || !check_prompt_len(r, g.m, n, &rc)) goto done;
    o->n_prompts = 1;
    bool stop_after_call = g.tools && g.tool_choice != TOOL_CHOICE_NONE && !g.parallel_tool_calls;
    if (!add_choices(r, o, &g, ids, n, 0, g.n, starts_in_think, stop_after_call, &rc)) goto done;
    rc = run_request(r, o, &g);
    o = NULL;
done:
    if (o) {
        api_out_free(o);
        free(o);
    }
    free(ids);
    api_gen_req_free(r, &g);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------------------
 * POST /v1/completions
 * ---------------------------------------------------------------------- */

/* prompt: a string, an array of token ids, or an array of strings or of
 * token-id arrays (one prompt each). */
static bool prompt_list(srv_req *r, json_t *p, json_t **items, int *n_items, int *rc) {
    const char *shape = "must be a string, an array of token ids, or an array of strings or of token-id arrays";
    if (json_is_string(p)) {
        items[0] = p;
        *n_items = 1;
        return true;
    }
    if (!json_is_array(p) || json_array_size(p) == 0) {
        *rc = api_bad(r, "prompt", shape);
        return false;
    }
    if (json_is_integer(json_array_get(p, 0))) { /* one prompt of token ids */
        items[0] = p;
        *n_items = 1;
        return true;
    }
    if (json_array_size(p) > API_MAX_JOBS) {
        *rc = api_bad(r, "prompt", "may hold at most 16 prompts");
        return false;
    }
    *n_items = 0;
    for (size_t i = 0; i < json_array_size(p); i++) {
        json_t *e = json_array_get(p, i);
        if (!json_is_string(e) && !(json_is_array(e) && json_array_size(e) && json_is_integer(json_array_get(e, 0)))) {
            *rc = api_bad(r, "prompt", shape);
            return false;
        }
        items[(*n_items)++] = e;
    }
    return true;
}

/* The tokens of one prompt item; -1 with a response queued. */
static int prompt_tokens(srv_req *r, const srv_model *m, json_t *item, int32_t **ids, int *rc) {
    if (json_is_string(item)) {
        if (!prompt_fits(r, m, json_string_length(item), rc)) return -1;
        /* exactly what `blockdraft run -p` does with a prompt */
        int n = tokenize(m->m, json_string_value(item), json_string_length(item), true, NULL, 0, ids);
        if (n < 0) *rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
        return n;
    }
    size_t n = json_array_size(item);
    int32_t nv = bd_model_n_vocab(m->m);
    if (n >= (size_t)m->n_ctx) return (int)n; /* check_prompt_len answers */
    *ids = malloc((n + 1) * sizeof **ids);
    if (!*ids) {
        *rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(item, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= nv) {
            *rc = srv_send_error(r, 400, ERR_INVALID, "invalid_value",
                                 "'prompt' token %zu is not a token id of this model (0..%d)", i, nv - 1);
            return -1;
        }
        (*ids)[i] = (int32_t)json_integer_value(e);
    }
    return (int)n;
}

/* The text of a prompt, for echo. */
static char *prompt_text(const srv_model *m, json_t *item, const int32_t *ids, int n, size_t *len) {
    if (json_is_string(item)) {
        *len = json_string_length(item);
        return strndup(json_string_value(item), *len);
    }
    bd_buf b = {0};
    char piece[512];
    for (int i = 0; i < n; i++) {
        int k = bd_token_piece(m->m, ids[i], piece, sizeof piece, true);
        if (k > 0) bd_buf_put(&b, piece, (size_t)k);
    }
    bd_buf_putc(&b, 0);
    if (b.failed) {
        bd_buf_free(&b);
        return NULL;
    }
    *len = b.n - 1;
    return bd_buf_take(&b);
}

int api_completions(srv_req *r) {
    int rc = 0;
    json_t *root = api_parse_body(r, &rc);
    if (!root) return rc;
    gen_req g;
    memset(&g, 0, sizeof g);
    api_out *o = NULL;
    int32_t *ids[API_MAX_JOBS] = {0};
    json_t *items[API_MAX_JOBS];
    int n_items = 0;
    json_t *p = json_object_get(root, "prompt");
    if (!p || json_is_null(p)) {
        rc = api_bad(r, "prompt", "is required");
        goto done;
    }
    if (!prompt_list(r, p, items, &n_items, &rc)) goto done;
    if (!api_parse_request(r, root, API_COMPLETIONS, &g, &rc)) goto done;
    if (n_items * g.best_of > API_MAX_JOBS) {
        rc = api_bad(r, "n", "(or best_of) times the number of prompts must be at most 16");
        goto done;
    }
    o = malloc(sizeof *o);
    if (!o) {
        rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
        goto done;
    }
    api_out_init(o, &g, false);
    for (int i = 0; i < n_items; i++) {
        int n = prompt_tokens(r, g.m, items[i], &ids[i], &rc);
        if (n < 0 || !check_prompt_len(r, g.m, n, &rc)) goto done;
        if (g.echo && !(o->echo_text[i] = prompt_text(g.m, items[i], ids[i], n, &o->echo_len[i]))) {
            rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
            goto done;
        }
        o->n_prompts = i + 1;
        if (!add_choices(r, o, &g, ids[i], n, i, g.best_of, false, false, &rc)) goto done;
    }
    rc = run_request(r, o, &g);
    o = NULL;
done:
    if (o) {
        api_out_free(o);
        free(o);
    }
    for (int i = 0; i < API_MAX_JOBS; i++) free(ids[i]);
    api_gen_req_free(r, &g);
    json_decref(root);
    return rc;
}
