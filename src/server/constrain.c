/*
 * constrain.c - structured output in the server: the request fields that
 * constrain generation, turned into one GBNF grammar, compiled per job
 * over the model's vocabulary (decode/grammar.h, chat/json_schema.h).
 *
 *   response_format  (chat) OpenAI's {"type": "text"},
 *                    {"type": "json_object"} (any JSON object; with
 *                    llama-server's "schema" member: that schema) and
 *                    {"type": "json_schema", "json_schema": {"schema": ...,
 *                    "name", "description", "strict"}}
 *   json_schema      llama-server's field: a JSON Schema
 *   grammar          llama-server's field: GBNF text ("" = none)
 *   the default      serve --grammar / --grammar-file / -j / -jf, for
 *                    requests that give none of the above
 *
 * At most one of the three fields may be given. A schema that uses an
 * unsupported keyword or matches nothing, or GBNF that does not parse or
 * accepts nothing, is a 400 naming the field and the reason.
 *
 * The grammar applies to the whole output, from its first token (a
 * reasoning block would have to obey it too); generation ends when the
 * grammar is complete and allows nothing more, or at an EOG token the
 * grammar allows. The engine applies the same mask to every verify row of
 * speculative decoding, so the output stays what plain decoding gives.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constrain.h"
#include "../chat/json_schema.h"

static bool fail(int *status, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A 400 with the message fmt (the request's fault). */
static bool fail(int *status, char *err, size_t errlen, const char *fmt, ...) {
    *status = 400;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return false;
}

/* GBNF of a schema (NULL: any JSON object), as a malloc'd string. */
static char *schema_gbnf(const json_t *schema, const char *field, int *status, char *err, size_t errlen) {
    char e[700];
    char *g = schema ? json_schema_to_gbnf(schema, e, sizeof e) : strdup(json_object_gbnf());
    if (!g) {
        if (!schema) {
            *status = 500;
            snprintf(err, errlen, "out of memory");
        } else {
            fail(status, err, errlen, "'%s': %s", field, e);
        }
    }
    return g;
}

bool srv_constraint_parse(const server *s, json_t *root, bool chat, char **gbnf, const char **field, int *status,
                          char *err, size_t errlen) {
    *gbnf = NULL;
    *field = NULL;
    json_t *gr = json_object_get(root, "grammar");
    json_t *js = json_object_get(root, "json_schema");
    json_t *rf = chat ? json_object_get(root, "response_format") : NULL;
    if (gr && json_is_null(gr)) gr = NULL;
    if (js && json_is_null(js)) js = NULL;
    if (rf && json_is_null(rf)) rf = NULL;
    if (gr && !json_is_string(gr)) return fail(status, err, errlen, "'%s' must be a string (GBNF)", "grammar");
    if (gr && json_string_length(gr) == 0) gr = NULL; /* llama-server: "" is no grammar */
    if (js && !json_is_object(js) && !json_is_boolean(js))
        return fail(status, err, errlen, "'%s' must be a JSON Schema (an object)", "json_schema");
    /* response_format: what it asks for, in schema terms */
    bool rf_constrains = false;
    json_t *rf_schema = NULL;
    if (rf) {
        const char *t = json_is_object(rf) ? json_string_value(json_object_get(rf, "type")) : NULL;
        if (!t)
            return fail(status, err, errlen,
                        "'%s' must be an object like {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                        "{\"type\": \"json_schema\", \"json_schema\": {\"schema\": {...}}}",
                        "response_format");
        const char *key;
        json_t *v;
        if (!strcmp(t, "text")) {
            json_object_foreach(rf, key, v) if (strcmp(key, "type")) return fail(
                status, err, errlen, "'response_format.%.60s' is not a member of {\"type\": \"text\"}", key);
        } else if (!strcmp(t, "json_object")) {
            rf_constrains = true;
            json_object_foreach(rf, key, v) {
                if (!strcmp(key, "schema") && !json_is_null(v)) {
                    if (!json_is_object(v) && !json_is_boolean(v))
                        return fail(status, err, errlen, "'%s' must be a JSON Schema (an object)",
                                    "response_format.schema");
                    rf_schema = v; /* llama-server's extension */
                } else if (strcmp(key, "type") && strcmp(key, "schema")) {
                    return fail(status, err, errlen,
                                "'response_format.%.60s' is not a member of {\"type\": \"json_object\"}", key);
                }
            }
        } else if (!strcmp(t, "json_schema")) {
            rf_constrains = true;
            json_t *w = json_object_get(rf, "json_schema");
            if (!json_is_object(w))
                return fail(status, err, errlen,
                            "'%s' must be an object like {\"name\": \"...\", \"schema\": {...}, \"strict\": true}",
                            "response_format.json_schema");
            json_object_foreach(rf, key, v) if (strcmp(key, "type") && strcmp(key, "json_schema")) return fail(
                status, err, errlen, "'response_format.%.60s' is not a member of {\"type\": \"json_schema\"}",
                key);
            json_object_foreach(w, key, v) {
                bool ok = !strcmp(key, "schema")        ? json_is_object(v) || json_is_boolean(v)
                          : !strcmp(key, "name")        ? json_is_string(v)
                          : !strcmp(key, "description") ? json_is_string(v) || json_is_null(v)
                          : !strcmp(key, "strict")      ? json_is_boolean(v) || json_is_null(v)
                                                        : false;
                if (!ok)
                    return fail(status, err, errlen,
                                !strcmp(key, "schema") || !strcmp(key, "name") || !strcmp(key, "description") ||
                                        !strcmp(key, "strict")
                                    ? "'response_format.json_schema.%.60s' has the wrong type"
                                    : "'response_format.json_schema.%.60s' is not a member (name, description, "
                                      "schema, strict)",
                                key);
            }
            rf_schema = json_object_get(w, "schema");
            if (!rf_schema)
                return fail(status, err, errlen, "'%s' is required", "response_format.json_schema.schema");
        } else {
            return fail(status, err, errlen,
                        "'response_format' type '%.40s' is not supported (text, json_object, json_schema)", t);
        }
    }
    int given = (gr != NULL) + (js != NULL) + rf_constrains;
    if (given > 1)
        return fail(status, err, errlen, "give only one of %s",
                    chat ? "'grammar', 'json_schema' and a 'response_format' of a JSON type"
                         : "'grammar' and 'json_schema'");
    if (gr) {
        *field = "grammar";
        *gbnf = strndup(json_string_value(gr), json_string_length(gr));
    } else if (js) {
        *field = "json_schema";
        return (*gbnf = schema_gbnf(js, *field, status, err, errlen)) != NULL;
    } else if (rf_constrains) {
        *field = rf_schema && json_object_get(rf, "json_schema") ? "response_format.json_schema.schema"
                 : rf_schema                                     ? "response_format.schema"
                                                                 : "response_format";
        return (*gbnf = schema_gbnf(rf_schema, *field, status, err, errlen)) != NULL;
    } else if (s->p.grammar) {
        *field = "the server's --grammar";
        *gbnf = strdup(s->p.grammar);
    } else {
        return true;
    }
    if (!*gbnf) {
        *status = 500;
        snprintf(err, errlen, "out of memory");
        return false;
    }
    return true;
}

const bd_grammar_vocab *srv_model_gvocab(srv_model *m, char *err, size_t errlen) {
    pthread_mutex_lock(&m->gv_mu);
    if (!m->gvocab) m->gvocab = bd_grammar_vocab_create(m->m, err, errlen);
    const bd_grammar_vocab *v = m->gvocab;
    pthread_mutex_unlock(&m->gv_mu);
    return v;
}

bd_grammar *srv_grammar_compile(srv_model *m, const char *gbnf, char *err, size_t errlen) {
    char e[700];
    const bd_grammar_vocab *v = srv_model_gvocab(m, e, sizeof e);
    if (!v) {
        snprintf(err, errlen, "the vocabulary of model '%s' cannot be prepared for a grammar: %s", m->name, e);
        return NULL;
    }
    bd_grammar *g = bd_grammar_create(gbnf, strlen(gbnf), v, e, sizeof e);
    if (!g) snprintf(err, errlen, "%s", e);
    return g;
}
