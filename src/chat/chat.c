/*
 * chat.c - chat prompt rendering on top of the Jinja engine, llama.cpp input
 * normalizations, and the reasoning/content splitter.
 */
#include "chat.h"
#include "../base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *chat_token_text(const bd_model *m, int32_t id) {
    if (id < 0) return NULL;
    int n = bd_token_piece(m, id, NULL, 0, true);
    if (n >= 0) return NULL; /* empty */
    char *s = malloc((size_t)-n + 1);
    if (s && (n = bd_token_piece(m, id, s, -n, true)) > 0) {
        s[n] = '\0';
        return s;
    }
    free(s);
    return NULL;
}

const char *chat_template_chatml =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}\n"
    "{%- if message['content'] is string -%}\n"
    "{{- message['content'] -}}\n"
    "{%- elif message['content'] is iterable and message['content'] is not mapping -%}\n"
    "{%- set ns = namespace(any=false) -%}\n"
    "{%- for part in message['content'] -%}\n"
    "{%- if part is mapping and part['type'] == 'text' -%}\n"
    "{%- if ns.any -%}{{- '\\n' -}}{%- endif -%}{{- part['text'] -}}\n"
    "{%- if part['text'] -%}{%- set ns.any = true -%}{%- endif -%}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{{- '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";

struct chat_template {
    jinja_template *tpl;
    char *bos, *eos;
    bool supports_system;        /* a system message's text reaches the output */
    bool supports_typed_content; /* [{"type":"text",...}] content renders as its text */
};


/* ========================================================================
 * Rendering
 * ====================================================================== */

static bool is_user_kind(jinja_err_kind k) {
    switch (k) {
    case JINJA_ERR_RAISE:
    case JINJA_ERR_TYPE:
    case JINJA_ERR_VALUE:
    case JINJA_ERR_UNDEFINED:
    case JINJA_ERR_ZERODIV:
    case JINJA_ERR_LIMIT: return true;
    default: return false;
    }
}

static bool set_str(jinja_ctx *cx, const char *name, const char *s) {
    jinja_value *v = jinja_str(cx, s, strlen(s));
    return v && jinja_ctx_set(cx, name, v);
}

/* Reject shapes no template can handle; everything else is the template's business. */
static bool validate_messages(const json_t *msgs, char *err, size_t errlen) {
    if (!json_is_array(msgs)) {
        bd_err(err, errlen, "messages must be an array");
        return false;
    }
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) {
            bd_err(err, errlen, "messages[%zu] must be an object", i);
            return false;
        }
        if (!json_is_string(json_object_get(m, "role"))) {
            bd_err(err, errlen, "messages[%zu].role must be a string", i);
            return false;
        }
    }
    return true;
}

/* llama.cpp's edits (common/chat.cpp + minja polyfills), on a deep copy. */
static json_t *llamacpp_normalize(const json_t *msgs, bool supports_system, bool typed_content) {
    json_t *out = json_array();
    if (!out) return NULL;
    char *pending = NULL; /* system text waiting for the next user message */
    size_t i;
    json_t *m0;
    json_array_foreach(msgs, i, m0) {
        json_t *m = json_deep_copy(m0);
        if (!m) goto fail;
        /* no content (an assistant turn with only tool calls) -> "": llama.cpp
         * rebuilds every message with a string content, so templates that
         * test `'</think>' in content` (Qwen3) work on OpenAI's null */
        json_t *content = json_object_get(m, "content");
        if (!content || json_is_null(content)) {
            json_object_set_new(m, "content", json_string(""));
            content = json_object_get(m, "content");
        }
        /* typed text parts -> one string joined with "\n" */
        if (json_is_array(content) && !typed_content) {
            bool all_text = true;
            size_t k;
            json_t *part;
            json_array_foreach(content, k, part) {
                json_t *ty = json_object_get(part, "type");
                if (!json_is_string(ty) || strcmp(json_string_value(ty), "text") != 0 ||
                    !json_is_string(json_object_get(part, "text")))
                    all_text = false;
            }
            if (all_text) {
                size_t total = 1;
                json_array_foreach(content, k, part) total += strlen(json_string_value(json_object_get(part, "text"))) + 1;
                char *joined = malloc(total);
                if (!joined) {
                    json_decref(m);
                    goto fail;
                }
                joined[0] = 0;
                size_t o = 0;
                json_array_foreach(content, k, part) {
                    const char *t = json_string_value(json_object_get(part, "text"));
                    if (o) joined[o++] = '\n'; /* llama.cpp: a newline between non-empty text */
                    size_t tl = strlen(t);
                    memcpy(joined + o, t, tl);
                    o += tl;
                    joined[o] = 0;
                }
                json_object_set_new(m, "content", json_string(joined));
                free(joined);
            }
        }
        /* string tool-call arguments -> parsed JSON */
        json_t *tcs = json_object_get(m, "tool_calls");
        if (json_is_array(tcs)) {
            size_t k;
            json_t *tc;
            json_array_foreach(tcs, k, tc) {
                json_t *fn = json_object_get(tc, "function");
                json_t *args = json_object_get(fn, "arguments");
                if (json_is_string(args)) {
                    json_t *parsed = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
                    if (parsed) json_object_set_new(fn, "arguments", parsed);
                }
            }
        }
        /* A leading system message is folded into the first user message
         * ("system\nuser"); later system messages are left alone (llama.cpp
         * raises on them for such templates, and so does the template). */
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!supports_system && role && i == 0 && strcmp(role, "system") == 0) {
            const char *c = json_string_value(json_object_get(m, "content"));
            pending = strdup(c ? c : "");
            json_decref(m);
            if (!pending) goto fail;
            continue;
        }
        if (pending && i == 1) {
            if (role && strcmp(role, "user") == 0) {
                const char *c = json_string_value(json_object_get(m, "content"));
                c = c ? c : "";
                size_t n = strlen(pending) + strlen(c) + 2;
                char *merged = malloc(n);
                if (!merged) {
                    json_decref(m);
                    goto fail;
                }
                snprintf(merged, n, "%s%s%s", pending, *c ? "\n" : "", c);
                json_object_set_new(m, "content", json_string(merged));
                free(merged);
            } else {
                json_t *u = json_pack("{s:s, s:s}", "role", "user", "content", pending);
                if (!u || json_array_append_new(out, u) != 0) {
                    json_decref(m);
                    goto fail;
                }
            }
            free(pending);
            pending = NULL;
        }
        if (json_array_append_new(out, m) != 0) goto fail;
    }
    free(pending); /* a system-only conversation: the system text is dropped */
    return out;
fail:
    free(pending);
    json_decref(out);
    return NULL;
}

/* Roles are request text too, but templates build control tokens from
 * them ('<|' + role + '|>' in Phi-3's): the known ones stay trusted. */
static bool trusted_role(const char *key, const char *value, size_t len, void *user) {
    (void)user;
    static const char *const roles[] = {"system", "user", "assistant", "tool", "developer"};
    if (strcmp(key, "role") != 0) return false;
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (strlen(roles[i]) == len && memcmp(roles[i], value, len) == 0) return true;
    return false;
}

/* Runs of set flags as spans. */
static bool taint_spans(const uint8_t *t, size_t n, chat_span **out, size_t *nout) {
    *out = NULL;
    *nout = 0;
    if (!t) return true;
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] && (i == 0 || !t[i - 1])) cnt++;
    if (!cnt) return true;
    chat_span *s = malloc(cnt * sizeof *s);
    if (!s) return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] && (i == 0 || !t[i - 1])) s[k].start = i;
        if (t[i] && (i + 1 == n || !t[i + 1])) s[k++].end = i + 1;
    }
    *out = s;
    *nout = cnt;
    return true;
}

static char *apply_inner(const chat_template *t, const chat_params *p, size_t *out_len, bool *is_user_error,
                         char *err, size_t errlen) {
    bool user_dummy;
    if (!is_user_error) is_user_error = &user_dummy;
    *is_user_error = false;
    jinja_error jerr_local, *jerr = p->error_out ? p->error_out : &jerr_local;
    memset(jerr, 0, sizeof *jerr);
    if (!validate_messages(p->messages, err, errlen)) {
        *is_user_error = true;
        jerr->kind = JINJA_ERR_TYPE;
        snprintf(jerr->msg, sizeof jerr->msg, "%s", err ? err : "invalid messages");
        return NULL;
    }
    if (p->tools && !json_is_array(p->tools) && !json_is_null(p->tools)) {
        *is_user_error = true;
        bd_err(err, errlen, "tools must be an array");
        return NULL;
    }
    if (p->extra_kwargs && !json_is_object(p->extra_kwargs)) {
        bd_err(err, errlen, "chat template kwargs must be an object");
        *is_user_error = true;
        return NULL;
    }
    const json_t *msgs = p->messages, *tools = p->tools;
    json_t *norm = NULL;
    if (p->llamacpp_compat) {
        norm = llamacpp_normalize(p->messages, t->supports_system, t->supports_typed_content);
        if (!norm) {
            bd_err(err, errlen, "out of memory");
            return NULL;
        }
        msgs = norm;
        if (tools && json_is_array(tools) && json_array_size(tools) == 0) tools = NULL;
    }
    char *out = NULL;
    jinja_ctx *cx = jinja_ctx_create(p->limits);
    if (!cx) {
        bd_err(err, errlen, "out of memory");
        goto done;
    }
    bool ok = jinja_ctx_define_hf_globals(cx, p->fixed_now);
    /* the request's strings are untrusted: the output says where they went */
    jinja_value *mv = ok ? jinja_from_json_untrusted(cx, msgs, trusted_role, NULL) : NULL;
    jinja_value *tv = mv ? jinja_from_json_untrusted(cx, tools, NULL, NULL) : NULL; /* NULL json -> None */
    ok = mv && tv && jinja_ctx_set(cx, "messages", mv) && jinja_ctx_set(cx, "tools", tv) &&
         jinja_ctx_set(cx, "add_generation_prompt", jinja_bool(cx, p->add_generation_prompt));
    if (ok && t->bos) ok = set_str(cx, "bos_token", t->bos);
    if (ok && t->eos) ok = set_str(cx, "eos_token", t->eos);
    if (ok && p->extra_kwargs) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)p->extra_kwargs, k, v) {
            jinja_value *jv = jinja_from_json_untrusted(cx, v, NULL, NULL);
            if (!jv || !jinja_ctx_set(cx, k, jv)) {
                ok = false;
                break;
            }
        }
    }
    if (!ok) {
        /* conversion fails only on limits (nesting) or memory */
        bd_err(err, errlen, "could not convert the request for the chat template (too deeply nested or out of memory)");
        *is_user_error = true;
        goto done;
    }
    size_t n_out = 0;
    uint8_t *taint = NULL;
    out = jinja_render_taint(t->tpl, cx, &n_out, &taint, jerr);
    if (out_len) *out_len = n_out;
    if (out && p->user_spans && p->n_user_spans && !taint_spans(taint, n_out, p->user_spans, p->n_user_spans)) {
        free(out);
        out = NULL;
        bd_err(err, errlen, "out of memory");
    }
    free(taint);
    if (!out && jerr->kind != JINJA_OK) {
        *is_user_error = is_user_kind(jerr->kind);
        if (jerr->kind == JINJA_ERR_RAISE) bd_err(err, errlen, "%s", jerr->msg);
        else {
            char buf[700];
            jinja_error_format(jerr, buf, sizeof buf);
            bd_err(err, errlen, "chat template: %s", buf);
        }
    }
done:
    jinja_ctx_free(cx);
    json_decref(norm);
    return out;
}

char *chat_template_apply(const chat_template *t, const chat_params *p, size_t *out_len, bool *is_user_error,
                          char *err, size_t errlen) {
    if (!t || !p) {
        if (is_user_error) *is_user_error = false;
        bd_err(err, errlen, "no template");
        return NULL;
    }
    return apply_inner(t, p, out_len, is_user_error, err, errlen);
}

/* Render one probe conversation; true when the output contains needle and
 * none of the avoid strings. A template error means "no"; running out of
 * memory sets *oom (the answer would be a guess). */
static bool probe(chat_template *t, json_t *msgs, const char *needle, const char *avoid1, const char *avoid2,
                  bool *oom) {
    if (!msgs) {
        *oom = true;
        return false;
    }
    jinja_error je;
    chat_params p = {.messages = msgs, .add_generation_prompt = false, .error_out = &je};
    char err[256] = "";
    bool ue;
    char *out = apply_inner(t, &p, NULL, &ue, err, sizeof err);
    if (!out && (je.kind == JINJA_ERR_NOMEM || !strcmp(err, "out of memory"))) *oom = true;
    bool r = out && strstr(out, needle) && !(avoid1 && strstr(out, avoid1)) && !(avoid2 && strstr(out, avoid2));
    free(out);
    json_decref(msgs);
    return r;
}

/* Capability probes in the spirit of llama.cpp's template caps detection.
 * false when memory ran out. */
static bool probe_caps(chat_template *t) {
    bool oom = false;
    t->supports_system = probe(t,
                               json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", "<System Needle>",
                                         "role", "user", "content", "Hey"),
                               "<System Needle>", NULL, NULL, &oom);
    /* typed parts must come out as their text, not as a Python repr of the list */
    t->supports_typed_content =
        probe(t, json_pack("[{s:s, s:[{s:s, s:s}]}]", "role", "user", "content", "type", "text", "text", "<Typed Needle>"),
              "<Typed Needle>", "'text'", "\"text\"", &oom);
    return !oom;
}

chat_template *chat_template_create(const char *src, const char *bos, const char *eos, char *err, size_t errlen) {
    if (!src) {
        bd_err(err, errlen, "no chat template");
        return NULL;
    }
    chat_template *t = calloc(1, sizeof *t);
    if (!t) {
        bd_err(err, errlen, "out of memory");
        return NULL;
    }
    jinja_error je;
    jinja_options o = jinja_options_hf();
    t->tpl = jinja_template_parse(src, strlen(src), &o, &je);
    if (!t->tpl) {
        char buf[700];
        jinja_error_format(&je, buf, sizeof buf);
        bd_err(err, errlen, "chat template: %s", buf);
        free(t);
        return NULL;
    }
    if ((bos && !(t->bos = strdup(bos))) || (eos && !(t->eos = strdup(eos)))) {
        bd_err(err, errlen, "out of memory");
        chat_template_free(t);
        return NULL;
    }
    if (!probe_caps(t)) {
        bd_err(err, errlen, "out of memory");
        chat_template_free(t);
        return NULL;
    }
    return t;
}

void chat_template_free(chat_template *t) {
    if (!t) return;
    jinja_template_free(t->tpl);
    free(t->bos);
    free(t->eos);
    free(t);
}

bool chat_template_supports_system(const chat_template *t) { return t && t->supports_system; }

char *chat_render(const char *template_src, const json_t *messages, const json_t *tools, bool add_generation_prompt,
                  const json_t *extra_kwargs, const char *bos_token, const char *eos_token, bool *is_user_error,
                  char *err, size_t errlen) {
    if (is_user_error) *is_user_error = false;
    /* parse without the system probe: one render is all that is needed here */
    chat_template t = {0};
    jinja_error je;
    jinja_options o = jinja_options_hf();
    if (!template_src) {
        bd_err(err, errlen, "no chat template");
        return NULL;
    }
    t.tpl = jinja_template_parse(template_src, strlen(template_src), &o, &je);
    if (!t.tpl) {
        char buf[700];
        jinja_error_format(&je, buf, sizeof buf);
        bd_err(err, errlen, "chat template: %s", buf);
        return NULL;
    }
    t.bos = (char *)bos_token;
    t.eos = (char *)eos_token;
    t.supports_system = true;
    chat_params p = {.messages = messages,
                     .tools = tools,
                     .add_generation_prompt = add_generation_prompt,
                     .extra_kwargs = extra_kwargs};
    char *out = apply_inner(&t, &p, NULL, is_user_error, err, errlen);
    jinja_template_free(t.tpl);
    return out;
}

/* ========================================================================
 * Reasoning split
 * ====================================================================== */

static const char OPEN_TAG[] = "<think>", CLOSE_TAG[] = "</think>";

bool chat_text_put(chat_text *t, const char *s, size_t n) {
    if (n == 0) return true;
    if (!bd_grow(&t->p, &t->cap, t->n + n + 1, 1)) return false;
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
    return true;
}

void chat_text_consume(chat_text *t, size_t n) {
    if (n >= t->n) {
        t->n = 0;
        if (t->p) t->p[0] = 0;
        return;
    }
    memmove(t->p, t->p + n, t->n - n);
    t->n -= n;
    t->p[t->n] = 0;
}

void chat_text_free(chat_text *t) {
    free(t->p);
    memset(t, 0, sizeof *t);
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool chat_prompt_opens_think(const char *prompt, size_t len) {
    const char *last = NULL;
    for (size_t i = 0; i + 7 <= len; i++)
        if (memcmp(prompt + i, OPEN_TAG, 7) == 0) last = prompt + i;
    if (!last) return false;
    for (const char *p = last + 7; p < prompt + len; p++)
        if (!is_ws(*p)) return false;
    return true;
}

void chat_think_init(chat_think_stream *s, bool starts_in_think) {
    memset(s, 0, sizeof *s);
    s->state = starts_in_think ? 1 : 0;
    s->skip_ws = starts_in_think;
    s->opened = starts_in_think;
}

void chat_think_free(chat_think_stream *s) {
    chat_text_free(&s->pending);
    chat_text_free(&s->ws);
}

/* Reasoning bytes: drop leading whitespace, hold trailing whitespace back. */
static bool emit_reasoning(chat_think_stream *s, const char *p, size_t n, chat_text *out) {
    size_t i = 0;
    if (s->skip_ws) {
        while (i < n && is_ws(p[i])) i++;
        if (i == n) return true;
        s->skip_ws = false;
    }
    size_t e = n;
    while (e > i && is_ws(p[e - 1])) e--;
    if (e > i) {
        if (!chat_text_put(out, s->ws.p, s->ws.n)) return false;
        chat_text_consume(&s->ws, s->ws.n);
        if (!chat_text_put(out, p + i, e - i)) return false;
    }
    return chat_text_put(&s->ws, p + e, n - e);
}

static bool emit_content(chat_think_stream *s, const char *p, size_t n, chat_text *out) {
    size_t i = 0;
    if (s->skip_ws) {
        while (i < n && is_ws(p[i])) i++;
        if (i == n) return true;
        s->skip_ws = false;
    }
    return chat_text_put(out, p + i, n - i);
}

/* Length of the longest suffix of p[0..n) that is a proper prefix of tag. */
static size_t partial_suffix(const char *p, size_t n, const char *tag) {
    size_t tl = strlen(tag);
    for (size_t k = tl - 1; k > 0; k--)
        if (k <= n && memcmp(p + n - k, tag, k) == 0) return k;
    return 0;
}

static bool process(chat_think_stream *s, chat_text *reasoning, chat_text *content, bool final) {
    for (;;) {
        chat_text *pd = &s->pending;
        if (pd->n == 0) return true;
        if (s->state == 0) {
            size_t i = 0;
            while (i < pd->n && is_ws(pd->p[i])) i++;
            size_t rest = pd->n - i;
            if (rest >= 7 && memcmp(pd->p + i, OPEN_TAG, 7) == 0) {
                chat_text_consume(pd, i + 7);
                s->state = 1;
                s->skip_ws = true;
                s->opened = true;
                continue;
            }
            if (!final && rest < 7 && memcmp(pd->p + i, OPEN_TAG, rest) == 0) return true; /* wait */
            s->state = 2;
            s->skip_ws = false;
            continue;
        }
        if (s->state == 1) {
            char *hit = memmem(pd->p, pd->n, CLOSE_TAG, 8);
            if (hit) {
                size_t k = (size_t)(hit - pd->p);
                if (!emit_reasoning(s, pd->p, k, reasoning)) return false;
                chat_text_consume(&s->ws, s->ws.n); /* whitespace before </think> is dropped */
                chat_text_consume(pd, k + 8);
                s->state = 2;
                s->skip_ws = true;
                continue;
            }
            size_t keep = final ? 0 : partial_suffix(pd->p, pd->n, CLOSE_TAG);
            if (!emit_reasoning(s, pd->p, pd->n - keep, reasoning)) return false;
            chat_text_consume(pd, pd->n - keep);
            return true;
        }
        if (!emit_content(s, pd->p, pd->n, content)) return false;
        chat_text_consume(pd, pd->n);
        return true;
    }
}

bool chat_think_feed(chat_think_stream *s, const char *chunk, size_t n, chat_text *reasoning, chat_text *content) {
    if (!chat_text_put(&s->pending, chunk, n)) return false;
    return process(s, reasoning, content, false);
}

bool chat_think_finish(chat_think_stream *s, chat_text *reasoning, chat_text *content) {
    bool ok = process(s, reasoning, content, true);
    chat_text_consume(&s->ws, s->ws.n); /* trailing whitespace of an unterminated think block */
    return ok;
}

bool chat_split_reasoning(const char *text, size_t len, bool starts_in_think, char **reasoning, char **content) {
    chat_think_stream s;
    chat_think_init(&s, starts_in_think);
    chat_text r = {0}, c = {0};
    bool ok = chat_think_feed(&s, text, len, &r, &c) && chat_think_finish(&s, &r, &c);
    bool opened = s.opened;
    chat_think_free(&s);
    if (!ok) {
        chat_text_free(&r);
        chat_text_free(&c);
        return false;
    }
    if (!c.p) c.p = calloc(1, 1);
    if (opened && !r.p) r.p = calloc(1, 1);
    if (!c.p || (opened && !r.p)) {
        chat_text_free(&r);
        chat_text_free(&c);
        return false;
    }
    *reasoning = opened ? r.p : (free(r.p), NULL);
    *content = c.p;
    return true;
}
