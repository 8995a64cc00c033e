/*
 * toolcall.c - see toolcall.h.
 */
#include "toolcall.h"
#include "../base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char OPEN_CALL[] = "<tool_call>", CLOSE_CALL[] = "</tool_call>";
#define OPEN_LEN (sizeof OPEN_CALL - 1)
#define CLOSE_LEN (sizeof CLOSE_CALL - 1)

chat_tool_format chat_tool_format_detect(const char *src) {
    if (!src) return CHAT_TOOL_FORMAT_NONE;
    if (!strstr(src, "<tool_call>")) /* Llama 3.1-3.3: the template writes calls as {"name": ..., "parameters": ...} */
        return strstr(src, "{\"name\": ") && strstr(src, "\"parameters\": ") ? CHAT_TOOL_FORMAT_LLAMA3
                                                                          : CHAT_TOOL_FORMAT_NONE;
    return strstr(src, "<function=") ? CHAT_TOOL_FORMAT_XML : CHAT_TOOL_FORMAT_JSON;
}

char *chat_tool_call_prefix(chat_tool_format f, const char *name) {
    bd_buf b = {0};
    if (f == CHAT_TOOL_FORMAT_JSON) {
        bd_buf_printf(&b, "<tool_call>\n");
        /* the name as the template writes it: {"name": "NAME", "arguments": */
        if (name) bd_buf_printf(&b, "{\"name\": \"%s\", \"arguments\": ", name);
    } else if (f == CHAT_TOOL_FORMAT_XML) {
        bd_buf_printf(&b, "<tool_call>\n");
        if (name) bd_buf_printf(&b, "<function=%s>\n", name);
    } else if (f == CHAT_TOOL_FORMAT_LLAMA3) {
        /* as the template writes a call: {"name": "NAME", "parameters": */
        if (name) bd_buf_printf(&b, "{\"name\": \"%s\", \"parameters\": ", name);
        else bd_buf_printf(&b, "{\"name\": \"");
    } else {
        return NULL;
    }
    if (b.failed) {
        bd_buf_free(&b);
        return NULL;
    }
    return bd_buf_take(&b);
}

/* ------------------------------------------------------------------------
 * Small text helpers
 * ---------------------------------------------------------------------- */

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }


/* Length of the longest suffix of p[0..n) that is a proper prefix of tag. */
static size_t partial_suffix(const char *p, size_t n, const char *tag, size_t tl) {
    for (size_t k = tl - 1; k > 0; k--)
        if (k <= n && memcmp(p + n - k, tag, k) == 0) return k;
    return 0;
}

/* ------------------------------------------------------------------------
 * One block
 * ---------------------------------------------------------------------- */

/* The JSON "type" of parameter pname of tool name (NULL if unknown). A
 * list of types counts as "string" when it has "string" in it (the text is
 * then kept as written). */
static const char *param_type(const json_t *tools, const char *name, const char *pname) {
    size_t i;
    json_t *t;
    json_array_foreach((json_t *)tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        const char *n = json_string_value(json_object_get(fn, "name"));
        if (!n || strcmp(n, name) != 0) continue;
        json_t *ty = json_object_get(json_object_get(json_object_get(json_object_get(fn, "parameters"), "properties"),
                                                     pname),
                                     "type");
        if (json_is_string(ty)) return json_string_value(ty);
        if (json_is_array(ty)) {
            size_t k;
            json_t *e;
            json_array_foreach(ty, k, e) if (json_is_string(e) && !strcmp(json_string_value(e), "string")) return "string";
            return "any";
        }
        return NULL;
    }
    return NULL;
}

/* An XML parameter's text as a JSON value (see toolcall.h). */
static json_t *param_value(const char *v, size_t n, const char *type) {
    if (type && !strcmp(type, "string")) return json_stringn(v, n);
    json_t *j = json_loadb(v, n, JSON_DECODE_ANY, NULL);
    if (j) return j;
    if (n == 4 && !memcmp(v, "True", 4)) return json_true();
    if (n == 5 && !memcmp(v, "False", 5)) return json_false();
    if (n == 4 && !memcmp(v, "None", 4)) return json_null();
    return json_stringn(v, n);
}

static json_t *make_call(const char *name, size_t name_len, json_t *args /* stolen */) {
    char *a = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(args);
    if (!a) return NULL;
    json_t *c = json_object();
    json_t *jn = json_stringn(name, name_len);
    if (!c || !jn || json_object_set_new(c, "name", jn) || json_object_set_new(c, "arguments", json_string(a))) {
        json_decref(c);
        free(a);
        return NULL;
    }
    free(a);
    return c;
}

/* A function name: non-empty, no whitespace, quotes or angle brackets. */
static bool name_ok(const char *p, size_t n) {
    if (n == 0 || n > 256) return false;
    for (size_t i = 0; i < n; i++)
        if (is_ws(p[i]) || p[i] == '<' || p[i] == '>' || p[i] == '"' || (unsigned char)p[i] < 0x20) return false;
    return true;
}

static json_t *parse_json_block(const char *p, size_t n) {
    json_t *o = json_loadb(p, n, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    json_t *name = json_object_get(o, "name");
    json_t *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    json_t *call = NULL;
    if (json_is_string(name) && name_ok(json_string_value(name), json_string_length(name))) {
        json_t *a = NULL;
        if (!args || json_is_null(args)) a = json_object();
        else if (json_is_object(args)) a = json_incref(args);
        else if (json_is_string(args)) { /* arguments already as JSON text */
            a = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
            if (a && !json_is_object(a)) {
                json_decref(a);
                a = NULL;
            }
        }
        if (a) call = make_call(json_string_value(name), json_string_length(name), a);
    }
    json_decref(o);
    return call;
}

static bool starts(const char *p, size_t n, const char *lit) {
    size_t l = strlen(lit);
    return n >= l && memcmp(p, lit, l) == 0;
}

static json_t *parse_xml_block(const char *p, size_t n, const json_t *tools) {
    const char *e = p + n;
    if (!starts(p, n, "<function=")) return NULL;
    p += 10;
    const char *gt = memchr(p, '>', (size_t)(e - p));
    if (!gt || !name_ok(p, (size_t)(gt - p))) return NULL;
    char name[257];
    memcpy(name, p, (size_t)(gt - p));
    name[gt - p] = 0;
    p = gt + 1;
    json_t *args = json_object();
    if (!args) return NULL;
    for (;;) {
        while (p < e && is_ws(*p)) p++;
        if (starts(p, (size_t)(e - p), "</function>")) {
            p += 11;
            break;
        }
        if (!starts(p, (size_t)(e - p), "<parameter=")) goto bad;
        p += 11;
        gt = memchr(p, '>', (size_t)(e - p));
        if (!gt || !name_ok(p, (size_t)(gt - p))) goto bad;
        char pname[257];
        memcpy(pname, p, (size_t)(gt - p));
        pname[gt - p] = 0;
        p = gt + 1;
        const char *end = memmem(p, (size_t)(e - p), "</parameter>", 12);
        if (!end) goto bad;
        /* the template writes "\n" + value + "\n" between the tags */
        const char *vs = p, *ve = end;
        if (vs < ve && *vs == '\n') vs++;
        if (ve > vs && ve[-1] == '\n') ve--;
        json_t *v = param_value(vs, (size_t)(ve - vs), param_type(tools, name, pname));
        if (!v || json_object_set_new(args, pname, v)) goto bad;
        p = end + 12;
    }
    while (p < e && is_ws(*p)) p++;
    if (p != e) goto bad;
    return make_call(name, strlen(name), args);
bad:
    json_decref(args);
    return NULL;
}

json_t *chat_tool_parse_block(const char *p, size_t n, const json_t *tools) {
    while (n && is_ws(*p)) p++, n--;
    while (n && is_ws(p[n - 1])) n--;
    if (starts(p, n, "<function=")) return parse_xml_block(p, n, tools);
    return parse_json_block(p, n);
}

/* ------------------------------------------------------------------------
 * Streaming
 * ---------------------------------------------------------------------- */

void chat_tool_stream_init(chat_tool_stream *s, const json_t *tools) {
    chat_tool_stream_init_format(s, tools, CHAT_TOOL_FORMAT_JSON);
}

void chat_tool_stream_init_format(chat_tool_stream *s, const json_t *tools, chat_tool_format format) {
    memset(s, 0, sizeof *s);
    s->tools = tools && json_is_array(tools) ? tools : NULL;
    s->format = format;
    s->bare = format == CHAT_TOOL_FORMAT_LLAMA3 ? 0 : 2;
}

/* LLAMA3: decide from the first non-blank byte whether the reply may be a
 * bare call (held until the end), and at the end whether it is one.
 * Returns false on out-of-memory; *done when the pending text was taken
 * (held, or parsed as a call). */
static bool process_bare(chat_tool_stream *s, json_t *calls, bool final, bool *done) {
    chat_text *pd = &s->pending;
    *done = false;
    if (s->bare == 0) {
        size_t i = 0;
        while (i < pd->n && is_ws(pd->p[i])) i++;
        if (i == pd->n) {
            *done = !final; /* only whitespace so far: wait */
            if (final) s->bare = 2;
            return true;
        }
        s->bare = pd->p[i] == '{' ? 1 : 2;
    }
    if (s->bare != 1) return true;
    if (!final) {
        *done = true; /* held until the end */
        return true;
    }
    json_t *call = parse_json_block(pd->p, pd->n);
    s->bare = 2;
    if (!call) return true; /* not a call: the text is content */
    if (json_array_append_new(calls, call)) return false;
    s->n_calls++;
    chat_text_consume(pd, pd->n);
    *done = true;
    return true;
}

void chat_tool_stream_free(chat_tool_stream *s) {
    chat_text_free(&s->pending);
    chat_text_free(&s->ws);
}

/* Content bytes: leading whitespace dropped, trailing whitespace held. */
static bool emit_content(chat_tool_stream *s, const char *p, size_t n, chat_text *out) {
    size_t i = 0;
    if (!s->started) {
        while (i < n && is_ws(p[i])) i++;
        if (i == n) return true;
    }
    size_t e = n;
    while (e > i && is_ws(p[e - 1])) e--;
    if (e > i) {
        s->started = true;
        if (!chat_text_put(out, s->ws.p, s->ws.n)) return false;
        chat_text_consume(&s->ws, s->ws.n);
        if (!chat_text_put(out, p + i, e - i)) return false;
    }
    return chat_text_put(&s->ws, p + e, n - e);
}

static bool process(chat_tool_stream *s, chat_text *content, json_t *calls, bool final) {
    if (s->bare != 2) {
        bool done;
        if (!process_bare(s, calls, final, &done)) return false;
        if (done) return true;
    }
    for (;;) {
        chat_text *pd = &s->pending;
        if (pd->n == 0) return true;
        if (!s->in_call) {
            char *hit = memmem(pd->p, pd->n, OPEN_CALL, OPEN_LEN);
            if (hit) {
                size_t k = (size_t)(hit - pd->p);
                if (!emit_content(s, pd->p, k, content)) return false;
                chat_text_consume(pd, k + OPEN_LEN);
                s->in_call = true;
                continue;
            }
            size_t keep = final ? 0 : partial_suffix(pd->p, pd->n, OPEN_CALL, OPEN_LEN);
            if (!emit_content(s, pd->p, pd->n - keep, content)) return false;
            chat_text_consume(pd, pd->n - keep);
            return true;
        }
        char *hit = memmem(pd->p, pd->n, CLOSE_CALL, CLOSE_LEN);
        if (!hit) {
            if (!final) return true; /* wait for the rest of the call */
            /* never closed: the text as written */
            if (!emit_content(s, OPEN_CALL, OPEN_LEN, content) || !emit_content(s, pd->p, pd->n, content))
                return false;
            chat_text_consume(pd, pd->n);
            s->in_call = false;
            return true;
        }
        size_t k = (size_t)(hit - pd->p);
        json_t *call = chat_tool_parse_block(pd->p, k, s->tools);
        if (call) {
            if (json_array_append_new(calls, call)) return false;
            s->n_calls++;
        } else if (!emit_content(s, OPEN_CALL, OPEN_LEN, content) || !emit_content(s, pd->p, k + CLOSE_LEN, content)) {
            return false;
        }
        chat_text_consume(pd, k + CLOSE_LEN);
        s->in_call = false;
    }
}

bool chat_tool_stream_feed(chat_tool_stream *s, const char *p, size_t n, chat_text *content, json_t *calls) {
    if (!chat_text_put(&s->pending, p, n)) return false;
    return process(s, content, calls, false);
}

bool chat_tool_stream_finish(chat_tool_stream *s, chat_text *content, json_t *calls) {
    bool ok = process(s, content, calls, true);
    chat_text_consume(&s->ws, s->ws.n); /* trailing whitespace of the content */
    return ok;
}

bool chat_tool_parse(const char *text, size_t len, const json_t *tools, char **content, json_t *calls) {
    return chat_tool_parse_format(text, len, tools, CHAT_TOOL_FORMAT_JSON, content, calls);
}

bool chat_tool_parse_format(const char *text, size_t len, const json_t *tools, chat_tool_format format,
                            char **content, json_t *calls) {
    chat_tool_stream s;
    chat_tool_stream_init_format(&s, tools, format);
    chat_text c = {0};
    bool ok = chat_tool_stream_feed(&s, text, len, &c, calls) && chat_tool_stream_finish(&s, &c, calls);
    chat_tool_stream_free(&s);
    if (ok && !c.p) ok = (c.p = calloc(1, 1)) != NULL;
    if (!ok) {
        chat_text_free(&c);
        return false;
    }
    *content = c.p;
    return true;
}
