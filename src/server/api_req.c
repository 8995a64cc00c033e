/*
 * api_req.c - the fields of a /v1/chat/completions or /v1/completions
 * body. Every field is in the table below: implemented (checked here for
 * type and range), accepted as a no-op where the field has no effect on
 * what this server returns (identifiers, store false, a disabled llama.cpp
 * sampler's own settings), or refused with a 400 naming it. A field that
 * is in no row gets a 400 too, as OpenAI answers an unrecognized argument:
 * nothing a client sends is silently ignored.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api.h"
#include "constrain.h"

int api_bad(srv_req *r, const char *param, const char *what) {
    return srv_send_error(r, 400, ERR_INVALID, "invalid_value", "'%s' %s", param, what);
}

json_t *api_parse_body(srv_req *r, int *rc) {
    if (r->body_len == 0) {
        *rc = srv_send_error(r, 400, ERR_INVALID, "invalid_json", "the request body is empty (expected a JSON object)");
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(r->body, r->body_len, 0, &je);
    if (!root) {
        *rc = srv_send_error(r, 400, ERR_INVALID, "invalid_json", "invalid JSON at line %d, column %d: %s", je.line,
                             je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        *rc = srv_send_error(r, 400, ERR_INVALID, "invalid_json", "the request body must be a JSON object");
        return NULL;
    }
    return root;
}

/* ------------------------------------------------------------------------
 * The table
 * ---------------------------------------------------------------------- */

enum {
    F_IMPL,    /* implemented: parsed below */
    F_NOOP,    /* accepted, no effect here (checked for type) */
    F_NEUTRAL, /* a llama.cpp sampler: only its "off" value (neutral) is accepted */
    F_REFUSE,  /* 400 unless null */
};

typedef struct field_rule {
    const char *name;
    int where; /* API_CHAT | API_COMPLETIONS */
    int kind;
    double neutral;
    const char *why; /* F_REFUSE / F_NEUTRAL: the end of the 400 message */
} field_rule;

#define BOTH (API_CHAT | API_COMPLETIONS)
#define SAMPLER_OFF "selects a llama.cpp sampler this server does not implement (only its off value is accepted)"

static const field_rule FIELDS[] = {
    /* OpenAI, both endpoints */
    {"model", BOTH, F_IMPL, 0, NULL},
    {"stream", BOTH, F_IMPL, 0, NULL},
    {"stream_options", BOTH, F_IMPL, 0, NULL},
    {"max_tokens", BOTH, F_IMPL, 0, NULL},
    {"temperature", BOTH, F_IMPL, 0, NULL},
    {"top_p", BOTH, F_IMPL, 0, NULL},
    {"seed", BOTH, F_IMPL, 0, NULL},
    {"stop", BOTH, F_IMPL, 0, NULL},
    {"n", BOTH, F_IMPL, 0, NULL},
    {"frequency_penalty", BOTH, F_IMPL, 0, NULL},
    {"presence_penalty", BOTH, F_IMPL, 0, NULL},
    {"logit_bias", BOTH, F_IMPL, 0, NULL},
    {"logprobs", BOTH, F_IMPL, 0, NULL},
    {"user", BOTH, F_NOOP, 0, NULL},
    /* chat */
    {"messages", API_CHAT, F_IMPL, 0, NULL},
    {"max_completion_tokens", API_CHAT, F_IMPL, 0, NULL},
    {"top_logprobs", API_CHAT, F_IMPL, 0, NULL},
    {"tools", API_CHAT, F_IMPL, 0, NULL},
    {"tool_choice", API_CHAT, F_IMPL, 0, NULL},
    {"parallel_tool_calls", API_CHAT, F_IMPL, 0, NULL},
    {"response_format", API_CHAT, F_IMPL, 0, NULL},
    {"modalities", API_CHAT, F_IMPL, 0, NULL},
    {"store", API_CHAT, F_IMPL, 0, NULL},
    {"service_tier", API_CHAT, F_IMPL, 0, NULL},
    {"metadata", API_CHAT, F_NOOP, 0, NULL},
    {"prompt_cache_key", API_CHAT, F_NOOP, 0, NULL},
    {"safety_identifier", API_CHAT, F_NOOP, 0, NULL},
    {"chat_template_kwargs", API_CHAT, F_IMPL, 0, NULL},
    {"audio", API_CHAT, F_REFUSE, 0, "is not supported: this server generates text only"},
    {"prediction", API_CHAT, F_REFUSE, 0, "(predicted outputs) is not supported"},
    {"reasoning_effort", API_CHAT, F_REFUSE, 0,
     "is not supported; use chat_template_kwargs.enable_thinking with a template that has it"},
    {"verbosity", API_CHAT, F_REFUSE, 0, "is not supported"},
    {"web_search_options", API_CHAT, F_REFUSE, 0, "is not supported: this server has no web search"},
    {"functions", API_CHAT, F_REFUSE, 0, "(deprecated by OpenAI) is not supported; use 'tools'"},
    {"function_call", API_CHAT, F_REFUSE, 0, "(deprecated by OpenAI) is not supported; use 'tool_choice'"},
    {"prompt_cache_retention", API_CHAT, F_REFUSE, 0,
     "is not supported (prompts stay cached in a slot until another request replaces them)"},
    /* completions */
    {"prompt", API_COMPLETIONS, F_IMPL, 0, NULL},
    {"echo", API_COMPLETIONS, F_IMPL, 0, NULL},
    {"best_of", API_COMPLETIONS, F_IMPL, 0, NULL},
    {"suffix", API_COMPLETIONS, F_IMPL, 0, NULL},
    /* llama.cpp's fields */
    {"n_predict", BOTH, F_IMPL, 0, NULL},
    {"top_k", BOTH, F_IMPL, 0, NULL},
    {"min_p", BOTH, F_IMPL, 0, NULL},
    {"repeat_penalty", BOTH, F_IMPL, 0, NULL},
    {"repeat_last_n", BOTH, F_IMPL, 0, NULL},
    {"cache_prompt", BOTH, F_IMPL, 0, NULL},
    {"ignore_eos", BOTH, F_IMPL, 0, NULL},
    {"speculative", BOTH, F_IMPL, 0, NULL},
    {"speculative.n_max", BOTH, F_IMPL, 0, NULL},
    {"speculative.n_min", BOTH, F_IMPL, 0, NULL},
    {"speculative.p_min", BOTH, F_IMPL, 0, NULL},
    {"grammar", BOTH, F_IMPL, 0, NULL},
    {"json_schema", BOTH, F_IMPL, 0, NULL},
    {"typical_p", BOTH, F_NEUTRAL, 1, SAMPLER_OFF " (1)"},
    {"mirostat", BOTH, F_NEUTRAL, 0, SAMPLER_OFF " (0)"},
    {"top_n_sigma", BOTH, F_NEUTRAL, -1, SAMPLER_OFF " (-1)"},
    {"xtc_probability", BOTH, F_NEUTRAL, 0, SAMPLER_OFF " (0)"},
    {"dry_multiplier", BOTH, F_NEUTRAL, 0, SAMPLER_OFF " (0)"},
    {"dynatemp_range", BOTH, F_NEUTRAL, 0, SAMPLER_OFF " (0)"},
    {"min_keep", BOTH, F_NEUTRAL, 0, SAMPLER_OFF " (0)"},
    /* settings of those samplers: no effect while the sampler is off, the
     * only state accepted above */
    {"mirostat_tau", BOTH, F_NOOP, 0, NULL},
    {"mirostat_eta", BOTH, F_NOOP, 0, NULL},
    {"xtc_threshold", BOTH, F_NOOP, 0, NULL},
    {"dry_base", BOTH, F_NOOP, 0, NULL},
    {"dry_allowed_length", BOTH, F_NOOP, 0, NULL},
    {"dry_penalty_last_n", BOTH, F_NOOP, 0, NULL},
    {"dry_sequence_breakers", BOTH, F_NOOP, 0, NULL},
    {"dynatemp_exponent", BOTH, F_NOOP, 0, NULL},
    {"samplers", BOTH, F_REFUSE, 0, "is not supported: the sampler order is fixed (llama.cpp's default)"},
    {"n_probs", BOTH, F_REFUSE, 0, "is not supported; use 'logprobs' (and 'top_logprobs' for chat)"},
    {"post_sampling_probs", BOTH, F_REFUSE, 0,
     "is not supported: log-probabilities are those of the model (before sampling)"},
    {"id_slot", BOTH, F_REFUSE, 0, "is not supported: requests go to the slot holding the longest prefix"},
    {"n_keep", BOTH, F_REFUSE, 0, "is not supported (no context shift)"},
    {"lora", BOTH, F_REFUSE, 0, "is not supported"},
    /* blockdraft */
    {"return_prompt_ids", BOTH, F_IMPL, 0, NULL},
    {"test_output", BOTH, F_IMPL, 0, NULL}, /* only with BLOCKDRAFT_TEST_HOOKS=1 */
};

/* Check every key of root against the table. */
static bool check_fields(srv_req *r, json_t *root, int endpoint, int *rc) {
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        const field_rule *f = NULL;
        for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0] && !f; i++)
            if (!strcmp(FIELDS[i].name, key)) f = &FIELDS[i];
        if (f && !strcmp(key, "test_output") && !r->srv->test_hooks) f = NULL;
        if (!f || !(f->where & endpoint)) {
            *rc = srv_send_error(r, 400, ERR_INVALID, "unknown_parameter", "'%.100s' is not a parameter of %s", key,
                                 endpoint == API_CHAT ? "/v1/chat/completions" : "/v1/completions");
            return false;
        }
        if (json_is_null(v)) continue;
        if (f->kind == F_REFUSE) {
            *rc = api_bad(r, key, f->why);
            return false;
        }
        if (f->kind == F_NEUTRAL && !(json_is_number(v) && json_number_value(v) == f->neutral)) {
            *rc = api_bad(r, key, f->why);
            return false;
        }
        if (f->kind == F_NOOP) {
            bool ok = true;
            if (!strcmp(key, "user") || !strcmp(key, "prompt_cache_key") || !strcmp(key, "safety_identifier"))
                ok = json_is_string(v);
            else if (!strcmp(key, "metadata")) ok = json_is_object(v) && json_object_size(v) <= 16;
            else if (!strcmp(key, "dry_sequence_breakers")) ok = json_is_array(v);
            else ok = json_is_number(v);
            if (!ok) {
                *rc = api_bad(r, key, !strcmp(key, "metadata") ? "must be an object of at most 16 entries"
                                      : !strcmp(key, "dry_sequence_breakers") ? "must be an array"
                                      : json_is_number(v) ? "has the wrong type" : "must be a string or a number");
                return false;
            }
        }
    }
    return true;
}

/* ------------------------------------------------------------------------
 * Typed getters: absent or null -> *present false
 * ---------------------------------------------------------------------- */

static bool get_number(json_t *o, const char *key, double *out, bool *present) {
    json_t *v = json_object_get(o, key);
    *present = v && !json_is_null(v);
    if (!*present) return true;
    if (!json_is_number(v)) return false;
    *out = json_number_value(v);
    return isfinite(*out);
}

static json_t *get(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* A number field in [lo, hi]; 400 otherwise. */
static bool num_field(srv_req *r, json_t *root, const char *key, double lo, double hi, const char *what, float *dst,
                      int *rc) {
    double v;
    bool has;
    if (!get_number(root, key, &v, &has) || (has && !(v >= lo && v <= hi))) {
        *rc = api_bad(r, key, what);
        return false;
    }
    if (has) *dst = (float)v;
    return true;
}

static bool bool_field(srv_req *r, json_t *root, const char *key, bool *dst, int *rc) {
    json_t *v = get(root, key);
    if (!v) return true;
    if (!json_is_boolean(v)) {
        *rc = api_bad(r, key, "must be a boolean");
        return false;
    }
    *dst = json_is_true(v);
    return true;
}

/* An integer field in [lo, hi]; 400 otherwise. */
static bool int_field(srv_req *r, json_t *root, const char *key, long long lo, long long hi, const char *what,
                      bool *present, long long *dst, int *rc) {
    json_t *v = get(root, key);
    if (present) *present = v != NULL;
    if (!v) return true;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        *rc = api_bad(r, key, what);
        return false;
    }
    *dst = json_integer_value(v);
    return true;
}

/* ------------------------------------------------------------------------
 * Groups of fields
 * ---------------------------------------------------------------------- */

static bool parse_model(srv_req *r, json_t *root, gen_req *g, int *rc) {
    server *s = r->srv;
    json_t *jm = get(root, "model");
    const char *name;
    if (!jm) {
        if (!s->default_model[0]) {
            *rc = srv_send_error(r, 400, ERR_INVALID, "missing_model", "'model' is required");
            return false;
        }
        name = s->default_model;
    } else if (!json_is_string(jm)) {
        *rc = api_bad(r, "model", "must be a string");
        return false;
    } else {
        name = json_string_value(jm);
    }
    snprintf(g->model_name, sizeof g->model_name, "%s", name);
    int status = 500;
    char err[700];
    g->m = srv_model_find(s, name, &status, err, sizeof err); /* held: api_gen_req_free puts it */
    if (!g->m) {
        *rc = srv_send_error(r, status, status < 500 ? ERR_INVALID : "server_error",
                             status == 404 ? "model_not_found" : NULL, "%s", err);
        return false;
    }
    return true;
}

/* OpenAI's logit_bias: {"token id": bias in [-100, 100]}. */
static bool parse_logit_bias(srv_req *r, json_t *root, gen_req *g, int *rc) {
    json_t *lb = get(root, "logit_bias");
    if (!lb) return true;
    if (!json_is_object(lb) || json_object_size(lb) > API_MAX_LOGIT_BIAS) {
        *rc = api_bad(r, "logit_bias", "must be an object mapping token ids to biases (at most 1024 entries)");
        return false;
    }
    int32_t n_vocab = bd_model_n_vocab(g->m->m);
    g->bias = malloc((json_object_size(lb) + 1) * sizeof *g->bias);
    if (!g->bias) {
        *rc = srv_send_error(r, 500, "server_error", NULL, "out of memory");
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(lb, k, v) {
        char *end;
        long id = strtol(k, &end, 10);
        if (!*k || *end || id < 0 || id >= n_vocab) {
            *rc = srv_send_error(r, 400, ERR_INVALID, "invalid_value",
                                 "'logit_bias' key '%.40s' is not a token id of this model (0..%d)", k, n_vocab - 1);
            return false;
        }
        if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100)) {
            *rc = srv_send_error(r, 400, ERR_INVALID, "invalid_value",
                                 "'logit_bias' value for token %ld must be a number between -100 and 100", id);
            return false;
        }
        g->bias[g->n_bias++] = (bd_logit_bias){(int32_t)id, (float)json_number_value(v)};
    }
    g->gp.sampling.logit_bias = g->bias;
    g->gp.sampling.n_logit_bias = g->n_bias;
    return true;
}

/* Sampling: request > model config > engine defaults. */
static bool parse_sampling(srv_req *r, json_t *root, gen_req *g, int32_t *cfg_max_tokens, int *rc) {
    srv_model *m = g->m;
    bd_sampler_params *sp = &g->gp.sampling;
    *sp = bd_sampler_default_params();
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (uint64_t)(bd_time_ms() * 1e3);
    sp->seed = seed;
    if (m->has_cfg) gallery_config_apply(&m->cfg, NULL, sp, cfg_max_tokens, NULL);
    srv_cli_defaults_apply(r->srv, sp, cfg_max_tokens); /* -n, --temp, ... */
    if (!num_field(r, root, "temperature", 0, 2, "must be a number between 0 and 2", &sp->temperature, rc) ||
        !num_field(r, root, "top_p", 0, 1, "must be a number between 0 and 1", &sp->top_p, rc) ||
        !num_field(r, root, "min_p", 0, 1, "must be a number between 0 and 1", &sp->min_p, rc) ||
        !num_field(r, root, "repeat_penalty", 1e-6, 100,
                   "must be a number greater than 0 and at most 100 (1 = off)", &sp->repeat_penalty, rc) ||
        !num_field(r, root, "frequency_penalty", -2, 2, "must be a number between -2 and 2", &sp->frequency_penalty,
                   rc) ||
        !num_field(r, root, "presence_penalty", -2, 2, "must be a number between -2 and 2", &sp->presence_penalty, rc))
        return false;
    long long v;
    bool has;
    if (!int_field(r, root, "repeat_last_n", -1, 1 << 24, "must be an integer, -1 (all) or more", &has, &v, rc))
        return false;
    if (has) sp->repeat_last_n = (int32_t)v;
    if (!int_field(r, root, "top_k", 0, 1 << 24, "must be a non-negative integer", &has, &v, rc)) return false;
    if (has) sp->top_k = (int32_t)v;
    json_t *js = get(root, "seed");
    if (js) {
        if (!json_is_integer(js)) {
            *rc = api_bad(r, "seed", "must be an integer");
            return false;
        }
        sp->seed = (uint64_t)json_integer_value(js);
        g->seed_given = true;
    }
    return parse_logit_bias(r, root, g, rc);
}

/* max_tokens / max_completion_tokens / n_predict and stop. */
static bool parse_limits(srv_req *r, json_t *root, gen_req *g, int32_t cfg_max_tokens, int *rc) {
    srv_model *m = g->m;
    int limit = r->srv->p.max_tokens > 0 ? r->srv->p.max_tokens : m->n_ctx;
    g->max_tokens = cfg_max_tokens > 0 ? (int)cfg_max_tokens : -1;
    /* max_completion_tokens is the newer name; n_predict llama.cpp's (-1: no limit) */
    const char *names[3] = {"max_completion_tokens", "max_tokens", "n_predict"};
    int given = -1;
    for (int i = 0; i < 3; i++) {
        json_t *jt = get(root, names[i]);
        if (!jt) continue;
        if (given >= 0 && !json_equal(jt, get(root, names[given]))) {
            *rc = srv_send_error(r, 400, ERR_INVALID, "invalid_value", "'%s' and '%s' disagree; give one of them",
                                 names[given], names[i]);
            return false;
        }
        given = i;
        bool np = i == 2;
        if (!json_is_integer(jt) || json_integer_value(jt) < (np ? -1 : 1) || (np && json_integer_value(jt) == 0)) {
            *rc = api_bad(r, names[i], np ? "must be a positive integer or -1 (no limit)" : "must be a positive integer");
            return false;
        }
        if (json_integer_value(jt) > limit) {
            *rc = srv_send_error(r, 400, ERR_INVALID, "invalid_value", "'%s' is %lld; this server allows at most %d",
                                 names[i], (long long)json_integer_value(jt), limit);
            return false;
        }
        g->max_tokens = json_integer_value(jt) < 0 ? -1 : (int)json_integer_value(jt);
    }
    json_t *st = get(root, "stop");
    if (st) {
        bool okst = json_is_string(st) || json_is_array(st);
        if (json_is_array(st)) {
            okst = json_array_size(st) <= 16;
            for (size_t i = 0; okst && i < json_array_size(st); i++) {
                json_t *e = json_array_get(st, i);
                okst = json_is_string(e) && json_string_length(e) > 0 && json_string_length(e) <= 256;
            }
        } else if (okst) {
            okst = json_string_length(st) > 0 && json_string_length(st) <= 256;
        }
        if (!okst) {
            *rc = api_bad(r, "stop", "must be a non-empty string or an array of at most 16 of them (each up to 256 bytes)");
            return false;
        }
        g->stop = st;
    }
    return true;
}

/* speculative.n_max / n_min / p_min: flat (llama-server's names) or as an
 * object; clamped to what the model's drafter allows when the job runs. */
static bool parse_spec(srv_req *r, json_t *root, gen_req *g, int *rc) {
    json_t *obj = get(root, "speculative");
    if (obj && !json_is_object(obj)) {
        *rc = api_bad(r, "speculative", "must be an object like {\"n_max\": 8, \"n_min\": 0, \"p_min\": 0.0}");
        return false;
    }
    const char *sub[3] = {"n_max", "n_min", "p_min"};
    const char *flat[3] = {"speculative.n_max", "speculative.n_min", "speculative.p_min"};
    g->spec_n_max = g->m->spp.n_max;
    g->spec_n_min = g->m->spp.n_min;
    g->spec_p_min = g->m->spp.p_min;
    const char *key;
    json_t *v;
    if (obj) json_object_foreach(obj, key, v) {
            bool known = false;
            for (int i = 0; i < 3; i++) known |= !strcmp(key, sub[i]);
            if (!known) {
                *rc = srv_send_error(r, 400, ERR_INVALID, "unknown_parameter",
                                     "'speculative.%.60s' is not a parameter (n_max, n_min, p_min)", key);
                return false;
            }
        }
    for (int i = 0; i < 3; i++) {
        json_t *a = obj ? get(obj, sub[i]) : NULL, *b = get(root, flat[i]);
        if (a && b) {
            *rc = api_bad(r, flat[i], "is given twice (flat and inside 'speculative')");
            return false;
        }
        v = a ? a : b;
        if (!v) continue;
        g->spec_set = true;
        if (i < 2) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1024) {
                *rc = api_bad(r, flat[i], "must be an integer between 0 and 1024 (clamped to the drafter's limit)");
                return false;
            }
            if (i == 0) g->spec_n_max = (int32_t)json_integer_value(v);
            else g->spec_n_min = (int32_t)json_integer_value(v);
        } else {
            if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 1)) {
                *rc = api_bad(r, flat[i], "must be a number between 0 and 1");
                return false;
            }
            g->spec_p_min = (float)json_number_value(v);
        }
    }
    return true;
}

/* A tool name as OpenAI allows them: [A-Za-z0-9_-], 1..64. */
static bool tool_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

static bool parse_tools(srv_req *r, json_t *root, gen_req *g, int *rc) {
    char buf[160];
    json_t *tools = get(root, "tools");
    if (tools) {
        if (!json_is_array(tools) || json_array_size(tools) > API_MAX_TOOLS) {
            *rc = api_bad(r, "tools", "must be an array of at most 128 tools");
            return false;
        }
        for (size_t i = 0; i < json_array_size(tools); i++) {
            json_t *t = json_array_get(tools, i), *fn = json_object_get(t, "function");
            json_t *ty = json_object_get(t, "type"), *nm = json_object_get(fn, "name");
            json_t *pa = json_object_get(fn, "parameters"), *de = json_object_get(fn, "description");
            json_t *strict = json_object_get(fn, "strict");
            const char *why = NULL;
            if (!json_is_object(t) || !json_is_string(ty) || strcmp(json_string_value(ty), "function"))
                why = "must be {\"type\": \"function\", \"function\": {...}}";
            else if (!json_is_object(fn)) why = ".function must be an object";
            else if (!json_is_string(nm) || !tool_name_ok(json_string_value(nm)))
                why = ".function.name must be 1 to 64 letters, digits, '_' or '-'";
            else if (pa && !json_is_null(pa) && !json_is_object(pa)) why = ".function.parameters must be an object";
            else if (de && !json_is_null(de) && !json_is_string(de)) why = ".function.description must be a string";
            else if (strict && !json_is_null(strict) && !json_is_boolean(strict)) why = ".function.strict must be a boolean";
            for (size_t k = 0; !why && k < i; k++)
                if (!strcmp(json_string_value(json_object_get(json_object_get(json_array_get(tools, k), "function"), "name")),
                            json_string_value(nm)))
                    why = ".function.name is used by another tool";
            if (why) {
                snprintf(buf, sizeof buf, "tools[%zu]", i);
                *rc = api_bad(r, buf, why);
                return false;
            }
        }
        g->tools = tools;
    }
    json_t *tc = get(root, "tool_choice");
    if (tc) {
        if (!tools) {
            *rc = api_bad(r, "tool_choice", "is only allowed with 'tools'");
            return false;
        }
        if (json_is_string(tc) && !strcmp(json_string_value(tc), "auto")) g->tool_choice = TOOL_CHOICE_AUTO;
        else if (json_is_string(tc) && !strcmp(json_string_value(tc), "none")) g->tool_choice = TOOL_CHOICE_NONE;
        else if (json_is_string(tc) && !strcmp(json_string_value(tc), "required")) g->tool_choice = TOOL_CHOICE_REQUIRED;
        else {
            json_t *fn = json_object_get(tc, "function"), *ty = json_object_get(tc, "type");
            const char *nm = json_string_value(json_object_get(fn, "name"));
            bool found = false;
            for (size_t i = 0; nm && i < json_array_size(tools); i++)
                found |= !strcmp(nm, json_string_value(json_object_get(json_object_get(json_array_get(tools, i), "function"),
                                                                       "name")));
            if (!json_is_object(tc) || !json_is_string(ty) || strcmp(json_string_value(ty), "function") || !found) {
                *rc = api_bad(r, "tool_choice",
                              "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
                              "{\"name\": NAME}} naming one of the tools");
                return false;
            }
            g->tool_choice = TOOL_CHOICE_NAMED;
            g->tool_name = nm;
        }
    }
    g->parallel_tool_calls = true;
    json_t *ptc = get(root, "parallel_tool_calls");
    if (ptc && !tools) {
        *rc = api_bad(r, "parallel_tool_calls", "is only allowed with 'tools'");
        return false;
    }
    return bool_field(r, root, "parallel_tool_calls", &g->parallel_tool_calls, rc);
}

/* Chat-only fields that select behaviours (refused unless the default). */
static bool parse_chat_misc(srv_req *r, json_t *root, gen_req *g, int *rc) {
    json_t *mo = get(root, "modalities");
    if (mo) {
        bool ok = json_is_array(mo);
        for (size_t i = 0; ok && i < json_array_size(mo); i++)
            ok = json_is_string(json_array_get(mo, i)) && !strcmp(json_string_value(json_array_get(mo, i)), "text");
        if (!ok) {
            *rc = api_bad(r, "modalities", "may only be [\"text\"]: this server generates text only");
            return false;
        }
    }
    bool store = false;
    if (!bool_field(r, root, "store", &store, rc)) return false;
    if (store) {
        *rc = api_bad(r, "store", "true is not supported: this server does not store completions");
        return false;
    }
    json_t *tier = get(root, "service_tier");
    if (tier && !(json_is_string(tier) &&
                  (!strcmp(json_string_value(tier), "auto") || !strcmp(json_string_value(tier), "default")))) {
        *rc = api_bad(r, "service_tier", "may only be \"auto\" or \"default\" (one tier here)");
        return false;
    }
    /* logprobs: boolean; top_logprobs 0..20 with it */
    json_t *lp = get(root, "logprobs");
    if (lp && !json_is_boolean(lp)) {
        *rc = api_bad(r, "logprobs", "must be a boolean");
        return false;
    }
    long long k = 0;
    bool has_top;
    if (!int_field(r, root, "top_logprobs", 0, SRV_TOP_LOGPROBS_MAX, "must be an integer between 0 and 20", &has_top, &k,
                   rc))
        return false;
    if (has_top && !(lp && json_is_true(lp))) {
        *rc = api_bad(r, "top_logprobs", "needs 'logprobs': true");
        return false;
    }
    g->top_logprobs = lp && json_is_true(lp) ? (int)k : -1;
    return parse_tools(r, root, g, rc);
}

static bool parse_completions_misc(srv_req *r, json_t *root, gen_req *g, int *rc) {
    long long v = 0;
    bool has;
    if (!int_field(r, root, "logprobs", 0, SRV_TOP_LOGPROBS_MAX,
                   "must be an integer between 0 and 20 (the alternatives listed per token)", &has, &v, rc))
        return false;
    g->top_logprobs = has ? (int)v : -1;
    if (!bool_field(r, root, "echo", &g->echo, rc)) return false;
    if (g->echo && has) {
        *rc = api_bad(r, "echo", "is not supported together with 'logprobs' (no log-probabilities of prompt tokens)");
        return false;
    }
    json_t *sfx = get(root, "suffix");
    if (sfx && !(json_is_string(sfx) && json_string_length(sfx) == 0)) {
        *rc = api_bad(r, "suffix", "is not supported (no fill-in-the-middle)");
        return false;
    }
    if (!int_field(r, root, "best_of", 1, API_MAX_JOBS, "must be an integer between 1 and 16", &has, &v, rc))
        return false;
    g->best_of = has ? (int)v : g->n;
    if (g->best_of < g->n) {
        *rc = api_bad(r, "best_of", "must be at least 'n'");
        return false;
    }
    if (g->best_of > g->n && g->stream) {
        *rc = api_bad(r, "best_of", "greater than 'n' cannot be streamed");
        return false;
    }
    return true;
}

/* response_format / grammar / json_schema (constrain.c): GBNF text, or
 * none. A call the turn is forced to start cannot also obey a grammar
 * that starts the output elsewhere. */
static bool parse_constraint(srv_req *r, json_t *root, gen_req *g, int *rc) {
    int status = 400;
    char err[800];
    if (!srv_constraint_parse(r->srv, root, g->endpoint == API_CHAT, &g->gbnf, &g->gbnf_field, &status, err,
                              sizeof err)) {
        *rc = srv_send_error(r, status, status == 400 ? ERR_INVALID : "server_error",
                             status == 400 ? "invalid_value" : NULL, "%s", err);
        return false;
    }
    if (g->gbnf && g->tools && (g->tool_choice == TOOL_CHOICE_REQUIRED || g->tool_choice == TOOL_CHOICE_NAMED)) {
        *rc = api_bad(r, "tool_choice",
                      "\"required\" or a named function cannot be combined with a grammar, json_schema or a JSON "
                      "response_format (the call would have to obey it)");
        return false;
    }
    return true;
}

bool api_parse_request(srv_req *r, json_t *root, int endpoint, gen_req *g, int *rc) {
    memset(g, 0, sizeof *g);
    g->endpoint = endpoint;
    g->cache_prompt = true;
    g->top_logprobs = -1;
    g->n = 1;
    if (!check_fields(r, root, endpoint, rc)) return false;
    /* fields that need no model first: a bad request is told so even when
     * the model is not there */
    long long n = 1;
    if (!int_field(r, root, "n", 1, API_MAX_JOBS, "must be an integer between 1 and 16", NULL, &n, rc)) return false;
    g->n = (int)n;
    if (!bool_field(r, root, "stream", &g->stream, rc) ||
        !bool_field(r, root, "return_prompt_ids", &g->return_prompt_ids, rc) ||
        !bool_field(r, root, "cache_prompt", &g->cache_prompt, rc) ||
        !bool_field(r, root, "ignore_eos", &g->gp.ignore_eog, rc))
        return false;
    json_t *so = get(root, "stream_options");
    if (so) {
        json_t *iu = json_is_object(so) ? json_object_get(so, "include_usage") : NULL;
        bool known = json_is_object(so);
        const char *k;
        json_t *x;
        if (known) json_object_foreach(so, k, x) known &= !strcmp(k, "include_usage");
        if (!known || (iu && !json_is_null(iu) && !json_is_boolean(iu))) {
            *rc = api_bad(r, "stream_options", "must be an object like {\"include_usage\": true}");
            return false;
        }
        g->include_usage = iu && json_is_true(iu);
    }
    json_t *to = get(root, "test_output");
    if (to && !json_is_string(to)) {
        *rc = api_bad(r, "test_output", "must be a string");
        return false;
    }
    g->test_output = to;
    if (endpoint == API_CHAT ? !parse_chat_misc(r, root, g, rc) : !parse_completions_misc(r, root, g, rc)) return false;
    if (!parse_constraint(r, root, g, rc)) return false;
    int32_t cfg_max_tokens = -1;
    return parse_model(r, root, g, rc) && parse_sampling(r, root, g, &cfg_max_tokens, rc) &&
           parse_limits(r, root, g, cfg_max_tokens, rc) && parse_spec(r, root, g, rc);
}

void api_gen_req_free(srv_req *r, gen_req *g) {
    free(g->bias);
    g->bias = NULL;
    free(g->gbnf);
    g->gbnf = NULL;
    srv_model_put(r->srv, g->m);
    g->m = NULL;
}
