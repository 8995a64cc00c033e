/*
 * responses.c - OpenAI's POST /v1/responses (the API new OpenAI SDKs use
 * first), text in and text out, through the model's chat template:
 * `instructions` becomes a system message and `input` (a string, or
 * message items with input_text / output_text parts) the conversation.
 *
 * Not supported, refused with a 400 naming the field: tools and function
 * call items, images and files, previous_response_id (nothing is stored:
 * the answer says store: false), background mode, logprobs in `include`.
 * text.format json_object / json_schema constrain the output as chat's
 * response_format does (constrain.h).
 *
 * The response carries `usage` in the Responses API's names, plus
 * blockdraft's `timings` (llama-server's) and `speculative` objects, as
 * the chat endpoint does. A stream is the event sequence of the API
 * reference: response.created, response.in_progress, for a reasoning part
 * response.output_item.added / response.reasoning_text.delta ... /
 * response.reasoning_text.done / response.output_item.done, then for the
 * message response.output_item.added, response.content_part.added,
 * response.output_text.delta ..., response.output_text.done,
 * response.content_part.done, response.output_item.done, and last
 * response.completed (or response.incomplete at the token limit, or
 * response.failed). Every event has its `sequence_number`.
 */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "compat.h"
#include "constrain.h"
#include "stats_json.h"

#define ERR_INVALID "invalid_request_error"

/* 400 naming the parameter, in OpenAI's error shape. */
static int bad(srv_req *r, const char *param, const char *fmt, const char *arg) {
    char msg[600];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    json_t *e = json_object();
    json_object_set_new(e, "message", srv_jstr(msg, strlen(msg)));
    json_object_set_new(e, "type", json_string(ERR_INVALID));
    json_object_set_new(e, "param", json_string(param));
    json_object_set_new(e, "code", json_string("invalid_value"));
    return srv_send_json(r, 400, json_pack("{s:o}", "error", e));
}

/* ------------------------------------------------------------------------
 * Request
 * ---------------------------------------------------------------------- */

typedef struct resp_req {
    srv_model *m;
    char model_name[GALLERY_NAME_MAX];
    bd_gen_params gp;
    int max_output_tokens; /* -1: none asked */
    bool stream;
    json_t *messages;      /* owned: the chat conversation */
    json_t *kwargs;        /* owned: chat template kwargs (reasoning.effort) */
    json_t *echo;          /* owned: fields echoed into the response object */
    char *gbnf;            /* owned: the grammar of text.format (constrain.h), or NULL */
} resp_req;

/* text.format (the Responses API's shape of response_format: {"type":
 * "text" | "json_object" | "json_schema", "name", "schema", "strict",
 * "description"}) as a grammar (constrain.h); none: the server's default
 * grammar, if any. false with a 400 queued. */
static bool text_format(srv_req *r, json_t *f, resp_req *q, int *rc) {
    json_t *wrap = json_object(), *rf = NULL;
    if (f && !json_is_null(f)) {
        const char *t = json_is_object(f) ? json_string_value(json_object_get(f, "type")) : NULL;
        if (t && !strcmp(t, "json_schema")) {
            json_t *inner = json_deep_copy(f);
            json_object_del(inner, "type");
            rf = json_pack("{s:s,s:o}", "type", "json_schema", "json_schema", inner);
        } else {
            rf = json_deep_copy(f);
        }
        json_object_set_new(wrap, "response_format", rf);
    }
    int status = 400;
    char err[800];
    const char *field;
    bool ok = srv_constraint_parse(r->srv, wrap, true, &q->gbnf, &field, &status, err, sizeof err);
    json_decref(wrap);
    /* the converter's message names chat's field; here it is text.format */
    const char *pre = "'response_format.json_schema.schema': ", *msg = err;
    if (!strncmp(msg, pre, strlen(pre))) msg += strlen(pre);
    if (!ok) *rc = status == 400 ? bad(r, "text.format", "text.format: %s", msg)
                                 : srv_send_error(r, status, "server_error", NULL, "%s", err);
    if (ok && f && !json_is_null(f)) json_object_set_new(q->echo, "text", json_pack("{s:O}", "format", f));
    return ok;
}

/* Text of a content value: a string, or parts of type input_text /
 * output_text / text joined. NULL with *why. */
static char *content_text(json_t *c, const char **why) {
    if (json_is_string(c)) return strdup(json_string_value(c));
    if (!json_is_array(c)) {
        *why = "must be a string or an array of input_text parts";
        return NULL;
    }
    bd_buf b = {0};
    for (size_t i = 0; i < json_array_size(c); i++) {
        json_t *p = json_array_get(c, i);
        json_t *t = json_is_object(p) ? json_object_get(p, "type") : NULL;
        const char *ty = json_is_string(t) ? json_string_value(t) : "";
        json_t *tx = json_is_object(p) ? json_object_get(p, "text") : NULL;
        if ((strcmp(ty, "input_text") && strcmp(ty, "output_text") && strcmp(ty, "text")) || !json_is_string(tx)) {
            bd_buf_free(&b);
            *why = !strcmp(ty, "input_image") || !strcmp(ty, "input_file") || !strcmp(ty, "input_audio")
                       ? "holds an image, file or audio part; this server takes text only"
                       : "parts must be {\"type\": \"input_text\", \"text\": \"...\"}";
            return NULL;
        }
        if (i) bd_buf_putc(&b, '\n');
        bd_buf_put(&b, json_string_value(tx), json_string_length(tx));
    }
    char *s = b.failed ? NULL : (b.p ? bd_buf_take(&b) : strdup(""));
    bd_buf_free(&b);
    if (!s) *why = "out of memory";
    return s;
}

static bool add_message(json_t *msgs, const char *role, const char *text) {
    json_t *m = json_pack("{s:s,s:s}", "role", role, "content", text);
    return m && json_array_append_new(msgs, m) == 0;
}

/* Turn instructions + input into chat messages. Returns false with a 400
 * queued. */
static bool build_messages(srv_req *r, json_t *root, resp_req *q, int *rc) {
    q->messages = json_array();
    json_t *ins = json_object_get(root, "instructions");
    if (ins && !json_is_null(ins)) {
        if (!json_is_string(ins)) return *rc = bad(r, "instructions", "'instructions' must be a string%s", NULL), false;
        add_message(q->messages, "system", json_string_value(ins));
    }
    json_t *in = json_object_get(root, "input");
    if (json_is_string(in)) {
        add_message(q->messages, "user", json_string_value(in));
        return true;
    }
    if (!json_is_array(in) || json_array_size(in) == 0)
        return *rc = bad(r, "input", "'input' must be a string or a non-empty array of message items%s", NULL), false;
    for (size_t i = 0; i < json_array_size(in); i++) {
        json_t *it = json_array_get(in, i);
        char where[40];
        snprintf(where, sizeof where, "input[%zu]", i);
        if (!json_is_object(it)) return *rc = bad(r, where, "'%s' must be a message item", where), false;
        json_t *ty = json_object_get(it, "type");
        if (ty && !json_is_null(ty) && !(json_is_string(ty) && !strcmp(json_string_value(ty), "message")))
            return *rc = bad(r, where, "items of this type are not supported (function calls, reasoning, ...); "
                                       "only message items: '%s'",
                             json_is_string(ty) ? json_string_value(ty) : "?"),
                   false;
        json_t *role = json_object_get(it, "role");
        const char *rs = json_is_string(role) ? json_string_value(role) : "";
        if (strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "system") && strcmp(rs, "developer"))
            return *rc = bad(r, where, "%s.role must be user, assistant, system or developer", where), false;
        const char *why = NULL;
        char *text = content_text(json_object_get(it, "content"), &why);
        if (!text) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s.content %s", where, why);
            return *rc = bad(r, where, "%s", msg), false;
        }
        /* chat templates know "system"; the Responses API's "developer" is that role */
        bool ok = add_message(q->messages, !strcmp(rs, "developer") ? "system" : rs, text);
        free(text);
        if (!ok) return *rc = srv_send_error(r, 500, "server_error", NULL, "out of memory"), false;
    }
    return true;
}

static bool parse_request(srv_req *r, json_t *root, resp_req *q, int *rc) {
    server *s = r->srv;
    memset(q, 0, sizeof *q);
    q->max_output_tokens = -1;
    q->echo = json_object();
    /* refused: what this server cannot do, never silently dropped */
    json_t *v = json_object_get(root, "tools");
    if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
        return *rc = bad(r, "tools", "'tools' are not supported on /v1/responses by this server%s", NULL), false;
    v = json_object_get(root, "previous_response_id");
    if (v && !json_is_null(v))
        return *rc = bad(r, "previous_response_id",
                         "'previous_response_id' cannot be used: this server stores no responses (send the whole "
                         "conversation in 'input')%s",
                         NULL),
               false;
    v = json_object_get(root, "background");
    if (v && json_is_true(v)) return *rc = bad(r, "background", "'background' mode is not supported%s", NULL), false;
    v = json_object_get(root, "text");
    if (v && !json_is_null(v) && !json_is_object(v))
        return *rc = bad(r, "text", "'text' must be an object like {\"format\": {\"type\": \"text\"}}%s", NULL), false;
    if (!text_format(r, v ? json_object_get(v, "format") : NULL, q, rc)) return false;
    v = json_object_get(root, "include");
    if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
        return *rc = bad(r, "include", "'include' is not supported (no logprobs or extra data)%s", NULL), false;
    v = json_object_get(root, "tool_choice");
    if (v && !json_is_null(v) && !(json_is_string(v) && (!strcmp(json_string_value(v), "auto") ||
                                                         !strcmp(json_string_value(v), "none"))))
        return *rc = bad(r, "tool_choice", "'tool_choice' must be \"auto\" or \"none\" (no tools here)%s", NULL), false;

    /* model */
    json_t *jm = json_object_get(root, "model");
    const char *name = NULL;
    if (jm && !json_is_null(jm)) {
        if (!json_is_string(jm)) return *rc = bad(r, "model", "'model' must be a string%s", NULL), false;
        name = json_string_value(jm);
    } else if (s->default_model[0]) {
        name = s->default_model;
    } else {
        return *rc = srv_send_error(r, 400, ERR_INVALID, "missing_model", "'model' is required"), false;
    }
    snprintf(q->model_name, sizeof q->model_name, "%s", name);
    int status = 500;
    char err[700];
    q->m = srv_model_find(s, name, &status, err, sizeof err);
    if (!q->m) {
        *rc = srv_send_error(r, status, status == 500 ? "server_error" : ERR_INVALID,
                             status == 404 ? "model_not_found" : NULL, "%s", err);
        return false;
    }

    /* sampling: request > command line > model config > engine defaults */
    bd_sampler_params sp = bd_sampler_default_params();
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (uint64_t)(bd_time_ms() * 1e3);
    sp.seed = seed;
    int32_t np = -1;
    if (q->m->has_cfg) gallery_config_apply(&q->m->cfg, NULL, &sp, &np, NULL);
    srv_cli_defaults_apply(s, &sp, &np);
    v = json_object_get(root, "temperature");
    if (v && !json_is_null(v)) {
        if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 2))
            return *rc = bad(r, "temperature", "'temperature' must be a number between 0 and 2%s", NULL), false;
        sp.temperature = (float)json_number_value(v);
    }
    v = json_object_get(root, "top_p");
    if (v && !json_is_null(v)) {
        if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 1))
            return *rc = bad(r, "top_p", "'top_p' must be a number between 0 and 1%s", NULL), false;
        sp.top_p = (float)json_number_value(v);
    }
    v = json_object_get(root, "seed");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) return *rc = bad(r, "seed", "'seed' must be an integer%s", NULL), false;
        sp.seed = (uint64_t)json_integer_value(v);
    }
    int limit = s->p.max_tokens > 0 ? s->p.max_tokens : q->m->n_ctx;
    v = json_object_get(root, "max_output_tokens");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > limit) {
            char msg[200];
            snprintf(msg, sizeof msg, "'max_output_tokens' must be an integer from 1 to %d", limit);
            return *rc = bad(r, "max_output_tokens", "%s", msg), false;
        }
        q->max_output_tokens = (int)json_integer_value(v);
    } else if (np > 0) {
        q->max_output_tokens = np;
    }
    v = json_object_get(root, "stream");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) return *rc = bad(r, "stream", "'stream' must be a boolean%s", NULL), false;
        q->stream = json_is_true(v);
    }
    v = json_object_get(root, "metadata");
    if (v && !json_is_null(v) && !json_is_object(v))
        return *rc = bad(r, "metadata", "'metadata' must be an object%s", NULL), false;
    v = json_object_get(root, "user");
    if (v && !json_is_null(v) && !json_is_string(v))
        return *rc = bad(r, "user", "'user' must be a string%s", NULL), false;
    q->gp.sampling = sp;
    q->gp.ignore_eog = false;

    /* echoed back as the API does */
    json_t *e = q->echo;
    json_t *ins = json_object_get(root, "instructions");
    json_object_set(e, "instructions", json_is_string(ins) ? ins : json_null());
    json_object_set_new(e, "max_output_tokens",
                        q->max_output_tokens > 0 ? json_integer(q->max_output_tokens) : json_null());
    json_object_set_new(e, "temperature", json_real(sp.temperature));
    json_object_set_new(e, "top_p", json_real(sp.top_p));
    json_t *md = json_object_get(root, "metadata");
    json_object_set_new(e, "metadata", json_is_object(md) ? json_deep_copy(md) : json_object());
    json_t *us = json_object_get(root, "user");
    json_object_set(e, "user", json_is_string(us) ? us : json_null());
    json_t *rs = json_object_get(root, "reasoning");
    json_object_set_new(e, "reasoning",
                        json_is_object(rs) ? json_deep_copy(rs) : json_pack("{s:n,s:n}", "effort", "summary"));
    /* reasoning.effort as llama-server reads reasoning_effort: "none" turns
     * thinking off (enable_thinking false), any other value goes to the
     * template as reasoning_effort */
    q->kwargs = json_object();
    json_t *eff = json_is_object(rs) ? json_object_get(rs, "effort") : NULL;
    if (eff && !json_is_null(eff)) {
        if (!json_is_string(eff))
            return *rc = bad(r, "reasoning.effort", "'reasoning.effort' must be a string%s", NULL), false;
        if (!strcmp(json_string_value(eff), "none")) json_object_set_new(q->kwargs, "enable_thinking", json_false());
        else json_object_set(q->kwargs, "reasoning_effort", eff);
    }
    return build_messages(r, root, q, rc);
}

/* ------------------------------------------------------------------------
 * Response pieces
 * ---------------------------------------------------------------------- */

static json_t *usage_json(const srv_job *j) {
    json_t *u = json_object();
    json_object_set_new(u, "input_tokens", json_integer(j->st.n_prompt));
    json_object_set_new(u, "input_tokens_details", json_pack("{s:i}", "cached_tokens", (json_int_t)j->st.n_prompt_cached));
    json_object_set_new(u, "output_tokens", json_integer(j->st.n_gen));
    json_object_set_new(u, "output_tokens_details", json_pack("{s:i}", "reasoning_tokens", (json_int_t)0));
    json_object_set_new(u, "total_tokens", json_integer(j->st.n_prompt + j->st.n_gen));
    return u;
}

static json_t *text_part(const char *t, size_t n) {
    json_t *p = json_object();
    json_object_set_new(p, "type", json_string("output_text"));
    json_object_set_new(p, "text", srv_jstr(t, n));
    json_object_set_new(p, "annotations", json_array());
    return p;
}

static json_t *message_item(const char *id, const char *status, json_t *content /* stolen */) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "type", json_string("message"));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "role", json_string("assistant"));
    json_object_set_new(o, "content", content);
    return o;
}

static json_t *reasoning_item(const char *id, const char *status, const char *t, size_t n) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "type", json_string("reasoning"));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "summary", json_array());
    json_t *c = json_array();
    if (t) json_array_append_new(c, json_pack("{s:s,s:o}", "type", "reasoning_text", "text", srv_jstr(t, n)));
    json_object_set_new(o, "content", c);
    return o;
}

/* The Response object. status: in_progress, completed, incomplete, failed. */
static json_t *response_obj(const char *id, long created, const char *model, const char *status, json_t *echo,
                            json_t *output /* stolen */) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "object", json_string("response"));
    json_object_set_new(o, "created_at", json_integer(created));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "error", json_null());
    json_object_set_new(o, "incomplete_details",
                        !strcmp(status, "incomplete") ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null());
    json_object_set_new(o, "model", srv_jstr(model, strlen(model)));
    json_object_set_new(o, "output", output);
    json_object_set_new(o, "parallel_tool_calls", json_true());
    json_object_set_new(o, "previous_response_id", json_null());
    json_object_set_new(o, "store", json_false()); /* nothing is stored here */
    json_object_set_new(o, "text", json_pack("{s:{s:s}}", "format", "type", "text"));
    json_object_set_new(o, "tool_choice", json_string("auto"));
    json_object_set_new(o, "tools", json_array());
    json_object_set_new(o, "truncation", json_string("disabled"));
    json_object_update(o, echo);
    return o;
}

/* Finished: the job ended at its token limit (not at an end token or a
 * stop string). */
static bool job_incomplete(const srv_job *j) { return !strcmp(j->finish ? j->finish : "stop", "length"); }

static void add_stats(json_t *resp, const srv_job *j) {
    json_object_set_new(resp, "usage", usage_json(j));
    json_object_set_new(resp, "timings", srv_json_timings(&j->st, -1));
    json_object_set_new(resp, "speculative", srv_job_spec_json(j));
}

/* ------------------------------------------------------------------------
 * Streaming
 * ---------------------------------------------------------------------- */

typedef struct resp_stream {
    srv_stream base; /* first: http.c sees this */
    srv_job *j;
    srv_model *m;    /* held (srv_model_get) until the stream ends */
    json_t *echo;
    char id[64], msg_id[64], rs_id[64];
    char model[GALLERY_NAME_MAX];
    long created;
    bool reasoning;
    chat_think_stream think;
    chat_text all_reason, all_text; /* everything sent so far, for the .done events */
    size_t sent;
    long seq;
    int phase;         /* 0 start, 1 generating, 2 finished */
    int out_index;     /* output items opened so far */
    bool rs_open, msg_open;
    int rs_index, msg_index;
} resp_stream;

static void emit(resp_stream *rs, bd_buf *b, const char *type, json_t *o /* stolen */) {
    json_object_set_new(o, "type", json_string(type));
    json_object_set_new(o, "sequence_number", json_integer(rs->seq++));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return;
    bd_buf_printf(b, "event: %s\ndata: ", type);
    bd_buf_put(b, s, strlen(s));
    bd_buf_put(b, "\n\n", 2);
    free(s);
}

static bool text_append(chat_text *t, const char *p, size_t n) {
    if (!n) return true;
    if (!bd_grow(&t->p, &t->cap, t->n + n + 1, 1)) return false;
    memcpy(t->p + t->n, p, n);
    t->n += n;
    t->p[t->n] = '\0';
    return true;
}

static void close_reasoning(resp_stream *rs, bd_buf *b) {
    if (!rs->rs_open) return;
    rs->rs_open = false;
    json_t *d = json_object();
    json_object_set_new(d, "item_id", json_string(rs->rs_id));
    json_object_set_new(d, "output_index", json_integer(rs->rs_index));
    json_object_set_new(d, "content_index", json_integer(0));
    json_object_set_new(d, "text", srv_jstr(rs->all_reason.p, rs->all_reason.n));
    emit(rs, b, "response.reasoning_text.done", d);
    emit(rs, b, "response.output_item.done",
         json_pack("{s:i,s:o}", "output_index", (json_int_t)rs->rs_index, "item",
                   reasoning_item(rs->rs_id, "completed", rs->all_reason.p, rs->all_reason.n)));
}

static void open_message(resp_stream *rs, bd_buf *b) {
    if (rs->msg_open) return;
    close_reasoning(rs, b);
    rs->msg_open = true;
    rs->msg_index = rs->out_index++;
    emit(rs, b, "response.output_item.added",
         json_pack("{s:i,s:o}", "output_index", (json_int_t)rs->msg_index, "item",
                   message_item(rs->msg_id, "in_progress", json_array())));
    json_t *d = json_object();
    json_object_set_new(d, "item_id", json_string(rs->msg_id));
    json_object_set_new(d, "output_index", json_integer(rs->msg_index));
    json_object_set_new(d, "content_index", json_integer(0));
    json_object_set_new(d, "part", text_part("", 0));
    emit(rs, b, "response.content_part.added", d);
}

static void emit_pieces(resp_stream *rs, bd_buf *b, const char *p, size_t n, bool last) {
    chat_text reason = {0}, content = {0};
    if (rs->reasoning) {
        if (n) chat_think_feed(&rs->think, p, n, &reason, &content);
        if (last) chat_think_finish(&rs->think, &reason, &content);
    } else {
        text_append(&content, p, n);
    }
    if (reason.n) {
        if (!rs->rs_open && !rs->msg_open) {
            rs->rs_open = true;
            rs->rs_index = rs->out_index++;
            emit(rs, b, "response.output_item.added",
                 json_pack("{s:i,s:o}", "output_index", (json_int_t)rs->rs_index, "item",
                           reasoning_item(rs->rs_id, "in_progress", NULL, 0)));
        }
        if (rs->rs_open) {
            text_append(&rs->all_reason, reason.p, reason.n);
            json_t *d = json_object();
            json_object_set_new(d, "item_id", json_string(rs->rs_id));
            json_object_set_new(d, "output_index", json_integer(rs->rs_index));
            json_object_set_new(d, "content_index", json_integer(0));
            json_object_set_new(d, "delta", srv_jstr(reason.p, reason.n));
            emit(rs, b, "response.reasoning_text.delta", d);
        }
    }
    if (content.n) {
        open_message(rs, b);
        text_append(&rs->all_text, content.p, content.n);
        json_t *d = json_object();
        json_object_set_new(d, "item_id", json_string(rs->msg_id));
        json_object_set_new(d, "output_index", json_integer(rs->msg_index));
        json_object_set_new(d, "content_index", json_integer(0));
        json_object_set_new(d, "delta", srv_jstr(content.p, content.n));
        json_object_set_new(d, "logprobs", json_array());
        emit(rs, b, "response.output_text.delta", d);
    }
    chat_text_free(&reason);
    chat_text_free(&content);
}

static void emit_final(resp_stream *rs, bd_buf *b) {
    srv_job *j = rs->j;
    if (!j->ok) {
        json_t *resp = response_obj(rs->id, rs->created, rs->model, "failed", rs->echo, json_array());
        json_object_set_new(resp, "error", json_pack("{s:s,s:s}", "code", "server_error", "message", j->err));
        emit(rs, b, "response.failed", json_pack("{s:o}", "response", resp));
        return;
    }
    bool incomplete = job_incomplete(j);
    const char *item_status = incomplete ? "incomplete" : "completed";
    open_message(rs, b); /* an empty answer still has its message item */
    json_t *d = json_object();
    json_object_set_new(d, "item_id", json_string(rs->msg_id));
    json_object_set_new(d, "output_index", json_integer(rs->msg_index));
    json_object_set_new(d, "content_index", json_integer(0));
    json_object_set_new(d, "text", srv_jstr(rs->all_text.p, rs->all_text.n));
    json_object_set_new(d, "logprobs", json_array());
    emit(rs, b, "response.output_text.done", d);
    d = json_object();
    json_object_set_new(d, "item_id", json_string(rs->msg_id));
    json_object_set_new(d, "output_index", json_integer(rs->msg_index));
    json_object_set_new(d, "content_index", json_integer(0));
    json_object_set_new(d, "part", text_part(rs->all_text.p, rs->all_text.n));
    emit(rs, b, "response.content_part.done", d);
    json_t *content = json_array();
    json_array_append_new(content, text_part(rs->all_text.p, rs->all_text.n));
    emit(rs, b, "response.output_item.done",
         json_pack("{s:i,s:o}", "output_index", (json_int_t)rs->msg_index, "item",
                   message_item(rs->msg_id, item_status, json_deep_copy(content))));
    json_t *output = json_array();
    if (rs->all_reason.n)
        json_array_append_new(output, reasoning_item(rs->rs_id, "completed", rs->all_reason.p, rs->all_reason.n));
    json_array_append_new(output, message_item(rs->msg_id, item_status, content));
    json_t *resp = response_obj(rs->id, rs->created, rs->model, incomplete ? "incomplete" : "completed", rs->echo,
                                output);
    add_stats(resp, j);
    emit(rs, b, incomplete ? "response.incomplete" : "response.completed", json_pack("{s:o}", "response", resp));
}

static char *resp_stream_next(srv_stream *base, size_t *n, bool *done) {
    resp_stream *rs = (resp_stream *)base;
    srv_job *j = rs->j;
    bd_buf b = {0};
    if (rs->phase == 0) {
        rs->phase = 1;
        json_t *r1 = response_obj(rs->id, rs->created, rs->model, "in_progress", rs->echo, json_array());
        json_t *r2 = json_deep_copy(r1);
        emit(rs, &b, "response.created", json_pack("{s:o}", "response", r1));
        emit(rs, &b, "response.in_progress", json_pack("{s:o}", "response", r2));
        *n = b.n;
        return b.p;
    }
    pthread_mutex_lock(&j->mu);
    if (j->safe <= rs->sent && j->state != JOB_DONE) {
        struct timespec ts;
        bd_deadline_after_ms(&ts, 200);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    size_t from = rs->sent, to = j->safe;
    char *piece = NULL;
    if (to > from && (piece = malloc(to - from)) != NULL) memcpy(piece, j->text + from, to - from);
    if (!piece) to = from;
    rs->sent = to;
    bool fin = j->state == JOB_DONE && rs->sent >= j->safe;
    pthread_mutex_unlock(&j->mu);
    if (to > from || fin) emit_pieces(rs, &b, piece, to - from, fin);
    free(piece);
    if (fin) {
        emit_final(rs, &b);
        rs->phase = 2;
        *done = true;
    }
    *n = b.n;
    return b.p;
}

static void resp_stream_release(srv_stream *base) {
    resp_stream *rs = (resp_stream *)base;
    atomic_store(&rs->j->cancel, true); /* no effect once the job is done */
    srv_job_withdraw(rs->base.srv, rs->j);
    srv_job_unref(rs->j);
    srv_model_put(rs->base.srv, rs->m); /* after the job that uses it */
    chat_think_free(&rs->think);
    chat_text_free(&rs->all_reason);
    chat_text_free(&rs->all_text);
    json_decref(rs->echo);
    free(rs);
}

/* ------------------------------------------------------------------------
 * POST /v1/responses
 * ---------------------------------------------------------------------- */

int responses_api_create(srv_req *r) {
    int rc = 0;
    json_t *root = srv_parse_object(r, false, &rc);
    if (!root) return rc;
    resp_req q;
    char *prompt = NULL;
    int32_t *ids = NULL;
    srv_job *j = NULL;
    if (!parse_request(r, root, &q, &rc)) goto done;
    char buf[300];
    const char *why = srv_check_messages(q.messages, buf, sizeof buf);
    if (why) {
        rc = bad(r, "input", "%s", why);
        goto done;
    }
    srv_model *m = q.m;
    size_t plen = 0;
    int n = 0, status = 500;
    bool think = false;
    char err[800];
    if (!srv_chat_prompt(m, q.messages, NULL, q.kwargs, &prompt, &plen, &ids, &n, &think, &status, err, sizeof err)) {
        rc = srv_send_error(r, status, status == 400 ? ERR_INVALID : "server_error", "template_error", "%s", err);
        goto done;
    }
    if (n <= 0) {
        rc = srv_send_error(r, 400, ERR_INVALID, "empty_prompt", "the input produced no tokens");
        goto done;
    }
    if (n >= m->n_ctx) {
        rc = srv_send_error(r, 400, ERR_INVALID, "context_length_exceeded",
                            "the input has %d tokens; the context of model '%s' holds %d", n, m->name, m->n_ctx);
        goto done;
    }
    j = srv_job_create(m, ids, n);
    if (!j) {
        rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
        goto done;
    }
    int room = m->n_ctx - n;
    j->gp = q.gp;
    j->gp.n_predict = q.max_output_tokens < 0 || q.max_output_tokens > room ? room : q.max_output_tokens;
    j->deadline_ms = bd_time_ms() + r->srv->p.timeout_s * 1e3;
    if (m->has_cfg)
        for (int i = 0; i < m->cfg.n_stopwords; i++) srv_job_add_stop(j, m->cfg.stopwords[i], strlen(m->cfg.stopwords[i]));
    if (q.gbnf) {
        char gerr[800];
        if (!(j->grammar = srv_grammar_compile(m, q.gbnf, gerr, sizeof gerr))) {
            rc = bad(r, "text.format", "text.format: %s", gerr);
            goto done;
        }
        j->gp.grammar = j->grammar;
    }
    int st = 503;
    char serr[300];
    if (!srv_job_submit(r->srv, j, &st, serr, sizeof serr)) {
        r->retry_after = "2";
        rc = srv_send_error(r, st, "server_error", "server_busy", "%s", serr);
        goto done;
    }
    char id[64], msg_id[64], rs_id[64];
    srv_make_id(id, sizeof id, "resp_");
    srv_make_id(msg_id, sizeof msg_id, "msg_");
    srv_make_id(rs_id, sizeof rs_id, "rs_");
    long created = (long)time(NULL);
    if (q.stream) {
        resp_stream *rs = calloc(1, sizeof *rs);
        if (!rs) {
            rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
            goto done;
        }
        rs->base.next = resp_stream_next;
        rs->base.release = resp_stream_release;
        rs->j = j;
        rs->echo = q.echo;
        q.echo = NULL;
        snprintf(rs->id, sizeof rs->id, "%s", id);
        snprintf(rs->msg_id, sizeof rs->msg_id, "%s", msg_id);
        snprintf(rs->rs_id, sizeof rs->rs_id, "%s", rs_id);
        snprintf(rs->model, sizeof rs->model, "%s", q.model_name);
        rs->created = created;
        rs->reasoning = m->reasoning;
        rs->m = m; /* the stream holds the model until it ends */
        q.m = NULL;
        chat_think_init(&rs->think, think);
        j = NULL; /* the stream owns it */
        rc = srv_send_stream(r, &rs->base);
        goto done;
    }
    if (!srv_wait_job(r, j)) {
        rc = MHD_NO;
        goto done;
    }
    if (!j->ok) {
        int es = j->err_status ? j->err_status : 500;
        rc = srv_send_error(r, es == 499 ? 503 : es, "server_error", NULL, "%s", j->err);
        goto done;
    }
    json_t *output = json_array();
    char *reason = NULL, *content = NULL;
    bool split = m->reasoning && chat_split_reasoning(j->text ? j->text : "", j->len, think, &reason, &content);
    bool incomplete = job_incomplete(j);
    if (split && reason) json_array_append_new(output, reasoning_item(rs_id, "completed", reason, strlen(reason)));
    json_t *parts = json_array();
    json_array_append_new(parts, split ? text_part(content, strlen(content)) : text_part(j->text, j->len));
    json_array_append_new(output, message_item(msg_id, incomplete ? "incomplete" : "completed", parts));
    free(reason);
    free(content);
    json_t *resp = response_obj(id, created, q.model_name, incomplete ? "incomplete" : "completed", q.echo, output);
    add_stats(resp, j);
    rc = srv_send_json(r, 200, resp);
done:
    if (j) {
        atomic_store(&j->cancel, true); /* no effect once done */
        srv_job_withdraw(r->srv, j);
        srv_job_unref(j);
    }
    srv_model_put(r->srv, q.m);
    free(ids);
    free(prompt);
    json_decref(q.kwargs);
    json_decref(q.messages);
    json_decref(q.echo);
    free(q.gbnf);
    json_decref(root);
    return rc;
}
