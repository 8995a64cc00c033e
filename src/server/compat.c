/*
 * compat.c - see compat.h: routing of the llama-server / LocalAI / OpenAI
 * Responses endpoints, model names, GET /v1/models[/{id}], GET /health,
 * command-line request defaults, and helpers shared by those handlers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "compat.h"
#include "stats_json.h"

/* ------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------- */

json_t *srv_jstr(const char *p, size_t n) {
    json_t *j = json_stringn(p ? p : "", p ? n : 0);
    if (j) return j;
    /* not valid UTF-8 (a model may emit stray byte tokens): replace each
     * byte that starts no valid sequence by U+FFFD */
    bd_buf b = {0};
    for (size_t i = 0; i < n;) {
        size_t l = bd_utf8_seq(p + i, n - i, NULL);
        if (l && !(l == 1 && p[i] == 0)) {
            bd_buf_put(&b, p + i, l);
            i += l;
        } else {
            bd_buf_put(&b, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    j = b.failed ? NULL : json_stringn(b.p ? b.p : "", b.n);
    bd_buf_free(&b);
    return j ? j : json_string("");
}

void srv_make_id(char *out, size_t n, const char *prefix) {
    unsigned char b[12];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        uint64_t t = (uint64_t)(bd_time_ms() * 1e3);
        memcpy(b, &t, 8);
        memset(b + 8, 0x3c, 4);
    }
    int k = snprintf(out, n, "%s", prefix);
    for (size_t i = 0; i < sizeof b && k >= 0 && (size_t)k + 2 < n; i++)
        k += snprintf(out + k, n - (size_t)k, "%02x", b[i]);
}

static const char *llama_error_type(int status) {
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return "server_error";
    }
}

int srv_send_llama_error(srv_req *r, int status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_object();
    json_object_set_new(e, "code", json_integer(status));
    json_object_set_new(e, "message", srv_jstr(msg, strlen(msg)));
    json_object_set_new(e, "type", json_string(llama_error_type(status)));
    json_t *root = json_object();
    json_object_set_new(root, "error", e);
    return srv_send_json(r, status, root);
}

json_t *srv_parse_object(srv_req *r, bool llama_shape, int *rc) {
    const char *why = NULL;
    char buf[300];
    json_t *root = NULL;
    if (r->body_len == 0) {
        why = "the request body is empty (expected a JSON object)";
    } else {
        json_error_t je;
        root = json_loadb(r->body, r->body_len, 0, &je);
        if (!root) {
            snprintf(buf, sizeof buf, "invalid JSON at line %d, column %d: %s", je.line, je.column, je.text);
            why = buf;
        } else if (!json_is_object(root)) {
            json_decref(root);
            root = NULL;
            why = "the request body must be a JSON object";
        }
    }
    if (!root)
        *rc = llama_shape ? srv_send_llama_error(r, 400, "%s", why)
                          : srv_send_error(r, 400, "invalid_request_error", "invalid_json", "%s", why);
    return root;
}

bool srv_wait_job(srv_req *r, srv_job *j) {
    pthread_mutex_lock(&j->mu);
    while (j->state != JOB_DONE) {
        struct timespec ts;
        bd_deadline_after_ms(&ts, 200);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->state != JOB_DONE && !srv_client_alive(r->conn)) {
            atomic_store(&j->cancel, true);
            pthread_mutex_unlock(&j->mu);
            srv_job_withdraw(r->srv, j);
            return false;
        }
    }
    pthread_mutex_unlock(&j->mu);
    return true;
}

json_t *srv_job_spec_json(const srv_job *j) {
    const srv_model *m = j->model;
    return srv_json_spec_stats(&j->st.spec, m->slots && m->slots[0].spec ? bd_spec_n_max(m->slots[0].spec) : 0);
}

/* ------------------------------------------------------------------------
 * Request defaults from the command line
 * ---------------------------------------------------------------------- */

void srv_cli_defaults_apply(const server *s, bd_sampler_params *sp, int32_t *n_predict) {
    const server_params *p = &s->p;
    if (sp) {
        if (p->has_temp) sp->temperature = p->temp;
        if (p->has_top_k) sp->top_k = p->top_k;
        if (p->has_top_p) sp->top_p = p->top_p;
        if (p->has_min_p) sp->min_p = p->min_p;
        if (p->has_repeat_penalty) sp->repeat_penalty = p->repeat_penalty;
        if (p->has_repeat_last_n) sp->repeat_last_n = p->repeat_last_n;
        if (p->has_seed && p->seed >= 0) sp->seed = (uint64_t)p->seed;
    }
    if (n_predict && p->n_predict >= 0) *n_predict = p->n_predict;
}

/* ------------------------------------------------------------------------
 * Model names
 * ---------------------------------------------------------------------- */

/* The -m model's name when `name` is one of its --alias names, else NULL. */
static const char *alias_target(const server *s, const char *name) {
    if (!s->default_model[0]) return NULL;
    for (int i = 0; i < s->p.n_aliases; i++)
        if (!strcmp(s->p.aliases[i], name)) return s->default_model;
    return NULL;
}

srv_model *srv_model_find(server *s, const char *name, int *status, char *err, size_t errlen) {
    const char *t = alias_target(s, name);
    srv_model *m = srv_model_get(s, t ? t : name, status, err, errlen);
    if (!m && *status == 404 && s->p.any_model_name && s->default_model[0])
        m = srv_model_get(s, s->default_model, status, err, errlen);
    return m;
}

/* ------------------------------------------------------------------------
 * Chat prompts (shared by /apply-template and /v1/responses)
 * ---------------------------------------------------------------------- */

const char *srv_check_messages(json_t *msgs, char *buf, size_t n) {
    if (!json_is_array(msgs)) return "'messages' must be an array of message objects";
    if (json_array_size(msgs) == 0) return "'messages' must not be empty";
    static const char *roles[] = {"system", "user", "assistant", "tool", "developer"};
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *msg = json_array_get(msgs, i);
        if (!json_is_object(msg)) return snprintf(buf, n, "messages[%zu] must be an object", i), buf;
        json_t *role = json_object_get(msg, "role");
        if (!json_is_string(role)) return snprintf(buf, n, "messages[%zu].role must be a string", i), buf;
        bool known = false;
        for (size_t k = 0; k < sizeof roles / sizeof roles[0]; k++) known |= !strcmp(json_string_value(role), roles[k]);
        if (!known)
            return snprintf(buf, n, "messages[%zu].role must be one of system, user, assistant, tool, developer", i),
                   buf;
        json_t *c = json_object_get(msg, "content");
        json_t *tc = json_object_get(msg, "tool_calls");
        json_t *tid = json_object_get(msg, "tool_call_id");
        if (tc && !json_is_null(tc)) {
            if (!json_is_array(tc) || strcmp(json_string_value(role), "assistant"))
                return snprintf(buf, n, "messages[%zu].tool_calls must be an array (on an assistant message)", i), buf;
            for (size_t k = 0; k < json_array_size(tc); k++) {
                json_t *call = json_array_get(tc, k), *fn = json_object_get(call, "function");
                json_t *args = json_object_get(fn, "arguments"), *id = json_object_get(call, "id");
                if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name")) ||
                    !(json_is_string(args) || json_is_object(args)) || (id && !json_is_null(id) && !json_is_string(id)))
                    return snprintf(buf, n,
                                    "messages[%zu].tool_calls[%zu] must be {\"id\": \"...\", \"type\": \"function\", "
                                    "\"function\": {\"name\": \"...\", \"arguments\": \"{...}\"}}",
                                    i, k),
                           buf;
            }
        }
        if (tid && !json_is_null(tid) && !json_is_string(tid))
            return snprintf(buf, n, "messages[%zu].tool_call_id must be a string", i), buf;
        if (!c || json_is_null(c)) {
            if (!(tc && json_is_array(tc)))
                return snprintf(buf, n, "messages[%zu] needs 'content' (or 'tool_calls' for an assistant)", i), buf;
            continue;
        }
        if (json_is_string(c)) continue;
        if (!json_is_array(c))
            return snprintf(buf, n, "messages[%zu].content must be a string or an array of text parts", i), buf;
        for (size_t k = 0; k < json_array_size(c); k++) {
            json_t *part = json_array_get(c, k);
            json_t *type = json_is_object(part) ? json_object_get(part, "type") : NULL;
            if (!json_is_string(type) || strcmp(json_string_value(type), "text") ||
                !json_is_string(json_object_get(part, "text")))
                return snprintf(buf, n,
                                "messages[%zu].content[%zu] must be {\"type\": \"text\", \"text\": \"...\"} "
                                "(other content types are not supported)",
                                i, k),
                       buf;
        }
    }
    return NULL;
}

bool srv_chat_prompt(srv_model *m, json_t *messages, json_t *tools, json_t *kwargs, char **prompt, size_t *plen,
                     int32_t **ids, int *n_ids, bool *starts_in_think, int *status, char *err, size_t errlen) {
    *prompt = NULL;
    *ids = NULL;
    *n_ids = 0;
    if (!m->tmpl) {
        *status = 500;
        return bd_err(err, errlen, "%s", m->tmpl_err);
    }
    chat_span *spans = NULL;
    size_t n_spans = 0;
    chat_params cp = {.messages = messages,
                      .tools = tools,
                      .add_generation_prompt = true,
                      .extra_kwargs = kwargs,
                      .llamacpp_compat = true,
                      .user_spans = &spans,
                      .n_user_spans = &n_spans};
    bool user_err = false;
    char terr[700];
    *prompt = chat_template_apply(m->tmpl, &cp, plen, &user_err, terr, sizeof terr);
    if (!*prompt) {
        *status = user_err ? 400 : 500;
        return bd_err(err, errlen, "chat template error%s: %s",
                      user_err ? " (caused by the request)" : " (in the model's template)", terr);
    }
    /* a template that writes the BOS text itself must not get a second BOS */
    bool add_special = !(m->bos_str && m->bos_str[0] && !strncmp(*prompt, m->bos_str, strlen(m->bos_str)));
    /* control tokens are matched only in what the template wrote */
    size_t *plain = n_spans ? malloc(2 * n_spans * sizeof *plain) : NULL;
    bool ok = !n_spans || plain;
    for (size_t i = 0; ok && i < n_spans; i++) {
        plain[2 * i] = spans[i].start;
        plain[2 * i + 1] = spans[i].end;
    }
    free(spans);
    int n = ok && n_spans <= (size_t)INT32_MAX
                ? bd_tokenize_guarded(m->m, *prompt, *plen, add_special, plain, (int)n_spans, NULL, 0)
                : 0;
    if (n < 0) n = -n;
    int32_t *v = ok ? malloc(((size_t)n + 1) * sizeof *v) : NULL;
    if (v) n = bd_tokenize_guarded(m->m, *prompt, *plen, add_special, plain, (int)n_spans, v, n + 1);
    free(plain);
    if (!v || n < 0) {
        free(v);
        free(*prompt);
        *prompt = NULL;
        *status = 500;
        return bd_err(err, errlen, "out of memory");
    }
    *ids = v;
    *n_ids = n;
    *starts_in_think = m->reasoning && chat_prompt_opens_think(*prompt, *plen);
    return true;
}

/* ------------------------------------------------------------------------
 * GET /health (llama-server: 503 while the model loads, then 200)
 * ---------------------------------------------------------------------- */

static int health(srv_req *r) {
    if (!atomic_load(&r->srv->ready)) return srv_send_llama_error(r, 503, "Loading model");
    return srv_send_text(r, 200, "application/json", "{\"status\":\"ok\"}");
}

/* ------------------------------------------------------------------------
 * GET /v1/models, GET /v1/models/{id}
 * ---------------------------------------------------------------------- */

/* status: {"value": ..., ["failed": true,] ["reason": ...]}; value is one
 * of loaded, loading, unloaded (installed, loads on first use), failed
 * (load failed), and the gallery's unsupported, invalid, incomplete. */
static json_t *status_obj(const char *value, const char *reason) {
    json_t *o = json_object();
    json_object_set_new(o, "value", json_string(value));
    if (!strcmp(value, "failed")) json_object_set_new(o, "failed", json_true());
    if (reason && reason[0]) json_object_set_new(o, "reason", srv_jstr(reason, strlen(reason)));
    return o;
}

static json_t *model_obj(server *s, srv_model *m, const char *id) {
    json_t *o = json_object();
    json_object_set_new(o, "id", srv_jstr(id, strlen(id)));
    json_object_set_new(o, "object", json_string("model"));
    json_object_set_new(o, "created", json_integer(0));
    json_object_set_new(o, "owned_by", json_string("blockdraft"));
    if (m->from_cli) {
        json_t *a = json_array();
        json_array_append_new(a, srv_jstr(m->name, strlen(m->name)));
        for (int i = 0; i < s->p.n_aliases; i++)
            json_array_append_new(a, srv_jstr(s->p.aliases[i], strlen(s->p.aliases[i])));
        json_object_set_new(o, "aliases", a);
    }
    /* state is written under load_mu; a racy read here only affects the label */
    int state = atomic_load(&m->state);
    json_object_set_new(o, "loaded", json_boolean(state == MODEL_LOADED));
    if (state == MODEL_LOADED) {
        json_object_set_new(o, "status", status_obj("loaded", NULL));
        json_object_set_new(o, "speculative", json_string(bd_spec_type_name(m->spp.type)));
        json_object_set_new(o, "context_size", json_integer(m->n_ctx));
        json_object_set_new(o, "slots", json_integer(m->n_slots));
        json_t *meta = json_object();
        json_object_set_new(meta, "n_vocab", json_integer(bd_model_n_vocab(m->m)));
        json_object_set_new(meta, "n_ctx", json_integer(m->n_ctx));
        json_object_set_new(meta, "n_ctx_train", json_integer(bd_model_n_ctx_train(m->m)));
        json_object_set_new(meta, "n_embd", json_integer(bd_model_n_embd(m->m)));
        json_object_set_new(meta, "size", json_integer((json_int_t)bd_model_weight_bytes(m->m)));
        json_object_set_new(o, "meta", meta);
    } else if (state == MODEL_FAILED) {
        json_object_set_new(o, "status", status_obj("failed", m->load_err));
    } else {
        json_object_set_new(o, "status", status_obj("loading", NULL));
    }
    return o;
}

static json_t *installed_obj(const gallery_installed *g, const char *id) {
    bool usable = !strcmp(g->status, "installed") || !strcmp(g->status, "manual");
    json_t *o = json_object();
    json_object_set_new(o, "id", srv_jstr(id, strlen(id)));
    json_object_set_new(o, "object", json_string("model"));
    json_object_set_new(o, "created", json_integer(0));
    json_object_set_new(o, "owned_by", json_string("blockdraft"));
    json_object_set_new(o, "loaded", json_false());
    json_object_set_new(o, "status", status_obj(usable ? "unloaded" : g->status, usable ? NULL : g->reason));
    return o;
}

static bool list_has(json_t *arr, const char *id) {
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const char *v = json_string_value(json_object_get(json_array_get(arr, i), "id"));
        if (v && !strcmp(v, id)) return true;
    }
    return false;
}

static int models_list(srv_req *r) {
    server *s = r->srv;
    json_t *data = json_array();
    pthread_mutex_lock(&s->models_mu);
    for (srv_model *m = s->models; m; m = m->next)
        if (!atomic_load(&m->removed)) json_array_append_new(data, model_obj(s, m, m->name));
    pthread_mutex_unlock(&s->models_mu);
    gallery_installed *inst = NULL;
    int n = 0;
    char err[300];
    if (s->models_dir[0] && gallery_list_installed(s->models_dir, &inst, &n, err, sizeof err)) {
        for (int i = 0; i < n; i++)
            if (!list_has(data, inst[i].name)) json_array_append_new(data, installed_obj(&inst[i], inst[i].name));
        free(inst);
    }
    json_t *root = json_object();
    json_object_set_new(root, "object", json_string("list"));
    json_object_set_new(root, "data", data);
    return srv_send_json(r, 200, root);
}

static int model_get(srv_req *r, const char *id) {
    server *s = r->srv;
    const char *name = alias_target(s, id);
    if (!name) name = id;
    json_t *o = NULL;
    pthread_mutex_lock(&s->models_mu);
    for (srv_model *m = s->models; m && !o; m = m->next)
        if (!atomic_load(&m->removed) && !strcmp(m->name, name)) o = model_obj(s, m, id);
    pthread_mutex_unlock(&s->models_mu);
    if (!o && s->models_dir[0]) {
        gallery_installed *inst = NULL;
        int n = 0;
        char err[300];
        if (gallery_list_installed(s->models_dir, &inst, &n, err, sizeof err)) {
            for (int i = 0; i < n && !o; i++)
                if (!strcmp(inst[i].name, id)) o = installed_obj(&inst[i], id);
            free(inst);
        }
    }
    if (!o && s->p.any_model_name && s->default_model[0]) {
        /* every name reaches the -m model: describe it under the name asked for */
        pthread_mutex_lock(&s->models_mu);
        for (srv_model *m = s->models; m && !o; m = m->next)
            if (m->from_cli) o = model_obj(s, m, id);
        pthread_mutex_unlock(&s->models_mu);
    }
    if (!o) {
        json_t *e = json_object();
        char msg[400];
        snprintf(msg, sizeof msg, "The model '%s' does not exist", id);
        json_object_set_new(e, "message", srv_jstr(msg, strlen(msg)));
        json_object_set_new(e, "type", json_string("invalid_request_error"));
        json_object_set_new(e, "param", json_string("model"));
        json_object_set_new(e, "code", json_string("model_not_found"));
        json_t *root = json_object();
        json_object_set_new(root, "error", e);
        return srv_send_json(r, 404, root);
    }
    return srv_send_json(r, 200, o);
}

/* ------------------------------------------------------------------------
 * Routing
 * ---------------------------------------------------------------------- */

static bool starts(const char *u, const char *prefix, const char **rest) {
    size_t n = strlen(prefix);
    if (strncmp(u, prefix, n)) return false;
    *rest = u + n;
    return true;
}

bool compat_route(srv_req *r, int *rc) {
    const char *m = r->method, *u = r->url, *rest = NULL;
    bool get = !strcmp(m, "GET"), post = !strcmp(m, "POST");
    const char *allow = NULL; /* the method the path takes, when it is ours */
    int (*post_work)(srv_req *) = NULL;

    if (!strcmp(u, "/health") || !strcmp(u, "/v1/health")) {
        if (get) return *rc = health(r), true;
        allow = "GET";
    } else if (!strcmp(u, "/v1/models") || !strcmp(u, "/models")) {
        if (get) return *rc = models_list(r), true;
        allow = "GET";
    } else if (starts(u, "/v1/models/", &rest) && *rest) {
        if (get) return *rc = model_get(r, rest), true;
        allow = "GET";
    } else if (!strcmp(u, "/completion") || !strcmp(u, "/completions")) {
        /* llama-server: /completions is its own endpoint too (not OpenAI's) */
        post_work = llama_api_completion;
    } else if (!strcmp(u, "/tokenize")) {
        if (post) return *rc = llama_api_tokenize(r), true;
        allow = "POST";
    } else if (!strcmp(u, "/detokenize")) {
        if (post) return *rc = llama_api_detokenize(r), true;
        allow = "POST";
    } else if (!strcmp(u, "/apply-template")) {
        if (post) return *rc = llama_api_apply_template(r), true;
        allow = "POST";
    } else if (!strcmp(u, "/props")) {
        if (get) return *rc = llama_api_props(r), true;
        if (post)
            return *rc = srv_send_llama_error(r, 501, "blockdraft does not support changing global properties "
                                                      "(POST /props)"),
                   true;
        allow = "GET";
    } else if (!strcmp(u, "/slots")) {
        if (get) return *rc = llama_api_slots(r), true;
        allow = "GET";
    } else if (starts(u, "/slots/", &rest)) {
        if (post)
            return *rc = srv_send_llama_error(r, 501, "saving, restoring and erasing slots is not supported "
                                                      "(llama-server's --slot-save-path has no blockdraft equivalent)"),
                   true;
        allow = "POST";
    } else if (!strcmp(u, "/v1/responses") || !strcmp(u, "/responses")) {
        post_work = responses_api_create;
    } else if (!strcmp(u, "/models/available")) {
        if (get) return *rc = gallery_api_available(r), true;
        allow = "GET";
    } else if (!strcmp(u, "/models/galleries")) {
        if (get) return *rc = gallery_api_galleries(r), true;
        allow = "GET";
    } else if (!strcmp(u, "/models/jobs") || !strcmp(u, "/models/jobs/")) {
        if (get) return *rc = gallery_api_jobs(r), true;
        allow = "GET";
    } else if (starts(u, "/models/jobs/", &rest)) {
        if (get) return *rc = gallery_api_job(r, rest), true;
        allow = "GET";
    } else if (!strcmp(u, "/models/apply")) {
        post_work = gallery_api_apply;
    } else if (starts(u, "/models/delete/", &rest)) {
        if (post) {
            if (atomic_load(&r->srv->stopping))
                return *rc = srv_send_error(r, 503, "server_error", "shutting_down", "the server is shutting down"),
                       true;
            return *rc = gallery_api_delete(r, rest), true;
        }
        allow = "POST";
    } else {
        return false;
    }
    if (post_work) {
        if (!post) {
            allow = "POST";
        } else if (atomic_load(&r->srv->stopping)) {
            *rc = srv_send_error(r, 503, "server_error", "shutting_down", "the server is shutting down");
            return true;
        } else {
            *rc = post_work(r);
            return true;
        }
    }
    *rc = srv_send_error(r, 405, "invalid_request_error", "method_not_allowed", "%s is not allowed on %s (use %s)", m, u,
                         allow);
    return true;
}
