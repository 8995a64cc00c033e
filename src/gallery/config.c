/*
 * config.c - strict model config parsing. See config.h for the key list.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/base.h"
#include "store.h"

typedef struct pctx {
    ydoc *d;
    const char *what;
    gallery_config *c;
    char *err;
    size_t errlen;
} pctx;

#define FAIL_AT(px, node, ...) fail_at(px, node, __VA_ARGS__)

__attribute__((format(printf, 3, 4))) static bool fail_at(pctx *px, const yaml_node_t *n,
                                                          const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bd_err(px->err, px->errlen, "%s:%d: %s", px->what, ydoc_line(n), msg);
}

static const char *want_str(pctx *px, const yaml_node_t *v, const char *key) {
    const char *s = ydoc_str(v);
    if (!s) fail_at(px, v, "'%s' must be a string", key);
    return s;
}

static bool want_bool(pctx *px, const yaml_node_t *v, const char *key, bool *out) {
    const char *s = ydoc_str(v);
    if (!s || !ydoc_parse_bool(s, out)) return fail_at(px, v, "'%s' must be true or false", key);
    return true;
}

static bool want_int(pctx *px, const yaml_node_t *v, const char *key, long long min, long long max,
                     long long *out) {
    const char *s = ydoc_str(v);
    if (!s || !ydoc_parse_int(s, min, max, out))
        return fail_at(px, v, "'%s' must be an integer in %lld..%lld", key, min, max);
    return true;
}

static bool want_num(pctx *px, const yaml_node_t *v, const char *key, double min, double max,
                     double *out) {
    const char *s = ydoc_str(v);
    if (!s || !ydoc_parse_double(s, out) || *out < min || *out > max)
        return fail_at(px, v, "'%s' must be a number in %g..%g", key, min, max);
    return true;
}

static bool want_path(pctx *px, const yaml_node_t *v, const char *key, char *out, size_t n) {
    const char *s = want_str(px, v, key);
    if (!s) return false;
    char why[256];
    if (!gallery_relpath_check(s, why, sizeof why)) return fail_at(px, v, "%s: %s", key, why);
    if (strlen(s) >= n) return fail_at(px, v, "%s: path too long", key);
    snprintf(out, n, "%s", s);
    return true;
}

/* Walk a mapping with a handler per key; unknown keys are errors. */
typedef bool (*key_fn)(pctx *px, const ydoc_entry *e);

static bool walk_map(pctx *px, const yaml_node_t *map, const char *section, key_fn fn) {
    if (!ydoc_is_map(map))
        return fail_at(px, map, "'%s' must be a mapping", section ? section : "config");
    ydoc_entry *e;
    int n;
    if (!ydoc_map_entries(px->d, map, &e, &n, px->err, px->errlen)) return false;
    bool ok = true;
    for (int i = 0; ok && i < n; i++) ok = fn(px, &e[i]);
    free(e);
    return ok;
}

static bool unknown_key(pctx *px, const ydoc_entry *e, const char *section) {
    if (section)
        return fail_at(px, e->knode, "unknown key '%s.%s'", section, e->key);
    return fail_at(px, e->knode, "unknown key '%s'", e->key);
}

/* ------------------------------------------------------------------------
 * Sections
 * ---------------------------------------------------------------------- */

static bool parameters_key(pctx *px, const ydoc_entry *e) {
    gallery_config *c = px->c;
    const char *k = e->key;
    if (!strcmp(k, "model")) return want_path(px, e->value, "parameters.model", c->model, sizeof c->model);
    if (!strcmp(k, "temperature"))
        return c->has_temperature = true, want_num(px, e->value, k, 0, 100, &c->temperature);
    if (!strcmp(k, "top_p")) return c->has_top_p = true, want_num(px, e->value, k, 0, 1, &c->top_p);
    if (!strcmp(k, "min_p")) return c->has_min_p = true, want_num(px, e->value, k, 0, 1, &c->min_p);
    if (!strcmp(k, "repeat_penalty")) {
        c->has_repeat_penalty = true;
        if (!want_num(px, e->value, k, 0, 100, &c->repeat_penalty)) return false;
        if (!(c->repeat_penalty > 0)) return fail_at(px, e->value, "'repeat_penalty' must be greater than 0 (1 = off)");
        return true;
    }
    if (!strcmp(k, "repeat_last_n"))
        return c->has_repeat_last_n = true, want_int(px, e->value, k, -1, 1 << 24, &c->repeat_last_n);
    if (!strcmp(k, "top_k"))
        return c->has_top_k = true, want_int(px, e->value, k, 0, 1 << 30, &c->top_k);
    if (!strcmp(k, "seed"))
        return c->has_seed = true, want_int(px, e->value, k, -1, 0xffffffffLL, &c->seed);
    if (!strcmp(k, "max_tokens"))
        return c->has_max_tokens = true, want_int(px, e->value, k, 1, 1 << 30, &c->max_tokens);
    /* llama.cpp's --rope-freq-base / --rope-freq-scale; 0 keeps the file's */
    if (!strcmp(k, "rope_freq_base")) {
        if (!want_num(px, e->value, k, 0, 1e12, &c->rope_freq_base)) return false;
        if (c->rope_freq_base != 0 && c->rope_freq_base < 1)
            return fail_at(px, e->value, "'rope_freq_base' must be 0 (the model's) or at least 1");
        return true;
    }
    if (!strcmp(k, "rope_freq_scale")) {
        if (!want_num(px, e->value, k, 0, 1e3, &c->rope_freq_scale)) return false;
        if (c->rope_freq_scale != 0 && c->rope_freq_scale < 1e-6)
            return fail_at(px, e->value, "'rope_freq_scale' must be 0 (the model's) or at least 1e-6");
        return true;
    }
    /* LocalAI base configs put these under parameters:, where LocalAI
     * ignores them; say where they belong instead of ignoring them too. */
    if (!strcmp(k, "context_size") || !strcmp(k, "f16") || !strcmp(k, "mmap") ||
        !strcmp(k, "draft_model") || !strcmp(k, "threads"))
        return fail_at(px, e->knode, "'%s' belongs at the top level, not under 'parameters'", k);
    return unknown_key(px, e, "parameters");
}

static bool template_key(pctx *px, const ydoc_entry *e) {
    if (!strcmp(e->key, "use_tokenizer_template"))
        return want_bool(px, e->value, "template.use_tokenizer_template",
                         &px->c->use_tokenizer_template);
    if (!strcmp(e->key, "chat") || !strcmp(e->key, "chat_message") ||
        !strcmp(e->key, "completion") || !strcmp(e->key, "function") ||
        !strcmp(e->key, "edit") || !strcmp(e->key, "multimodal"))
        return fail_at(px, e->knode,
                       "template.%s: Go prompt templates are not supported by blockdraft; use "
                       "'use_tokenizer_template: true' (the GGUF's chat template)",
                       e->key);
    return unknown_key(px, e, "template");
}

static bool grammar_key(pctx *px, const ydoc_entry *e) {
    if (!strcmp(e->key, "disable"))
        return want_bool(px, e->value, "function.grammar.disable", &px->c->grammar_disable);
    return unknown_key(px, e, "function.grammar");
}

static bool function_key(pctx *px, const ydoc_entry *e) {
    if (!strcmp(e->key, "automatic_tool_parsing_fallback"))
        return want_bool(px, e->value, "function.automatic_tool_parsing_fallback",
                         &px->c->tool_parsing_fallback);
    if (!strcmp(e->key, "grammar")) return walk_map(px, e->value, "function.grammar", grammar_key);
    return unknown_key(px, e, "function");
}

/* One "key:value" option string. A value containing ':' is an error (the
 * llama.cpp backend would silently cut it at the second colon). */
static bool option_item(pctx *px, const yaml_node_t *item) {
    gallery_config *c = px->c;
    const char *s = ydoc_str(item);
    if (!s) return fail_at(px, item, "options entries must be \"key:value\" strings");
    char key[64], val[128];
    const char *colon = strchr(s, ':');
    size_t kl = colon ? (size_t)(colon - s) : strlen(s);
    if (kl == 0 || kl >= sizeof key) return fail_at(px, item, "bad option '%s'", s);
    memcpy(key, s, kl);
    key[kl] = 0;
    bool bare = !colon;
    snprintf(val, sizeof val, "%s", colon ? colon + 1 : "");
    if (colon && strchr(colon + 1, ':'))
        return fail_at(px, item, "option '%s': value must not contain ':'", s);
    if (colon && !val[0]) return fail_at(px, item, "option '%s': empty value", s);
    long long iv;
    double dv;
    if (!strcmp(key, "use_jinja") || !strcmp(key, "jinja")) {
        if (bare) return c->use_jinja = true, true;
        if (!ydoc_parse_bool(val, &c->use_jinja))
            return fail_at(px, item, "option '%s': expected true or false", s);
        return true;
    }
    if (!strcmp(key, "spec_type") || !strcmp(key, "speculative_type")) {
        for (char *p = val; *p; p++)
            if (*p == '_') *p = '-';
        if (!strcmp(val, "draft-dflash") || !strcmp(val, "dflash"))
            c->spec_type = GALLERY_SPEC_DFLASH;
        else if (!strcmp(val, "none"))
            c->spec_type = GALLERY_SPEC_NONE;
        else
            return fail_at(px, item,
                           "option '%s': blockdraft supports spec_type draft-dflash or none", s);
        return true;
    }
    if (!strcmp(key, "spec_n_max") || !strcmp(key, "draft_max")) {
        if (bare || !ydoc_parse_int(val, 1, 256, &iv))
            return fail_at(px, item, "option '%s': expected an integer in 1..256", s);
        c->spec_n_max = (int)iv;
        return true;
    }
    if (!strcmp(key, "spec_n_min") || !strcmp(key, "draft_min")) {
        if (bare || !ydoc_parse_int(val, 0, 256, &iv))
            return fail_at(px, item, "option '%s': expected an integer in 0..256", s);
        c->spec_n_min = (int)iv;
        return true;
    }
    if (!strcmp(key, "spec_p_min") || !strcmp(key, "draft_p_min")) {
        if (bare || !ydoc_parse_double(val, &dv) || dv < 0 || dv > 1)
            return fail_at(px, item, "option '%s': expected a number in 0..1", s);
        c->has_spec_p_min = true;
        c->spec_p_min = dv;
        return true;
    }
    if (!strcmp(key, "spec_adaptive")) {
        if (bare) return c->has_spec_adaptive = c->spec_adaptive = true, true;
        if (!ydoc_parse_bool(val, &c->spec_adaptive))
            return fail_at(px, item, "option '%s': expected true or false", s);
        c->has_spec_adaptive = true;
        return true;
    }
    if (!strcmp(key, "draft_cache_type_k") || !strcmp(key, "draft_cache_type_v")) {
        if (bare || !bd_kv_type_parse(val, key[17] == 'k' ? &c->draft_cache_type_k : &c->draft_cache_type_v))
            return fail_at(px, item, "option '%s': the KV cache types are " BD_KV_TYPE_NAMES, s);
        return true;
    }
    if (!strcmp(key, "parallel") || !strcmp(key, "n_parallel")) {
        if (bare || !ydoc_parse_int(val, 1, 1024, &iv))
            return fail_at(px, item, "option '%s': expected an integer in 1..1024", s);
        c->parallel = (int)iv;
        return true;
    }
    return fail_at(px, item, "unknown options key '%s' (in '%s')", key, s);
}

static bool string_list(pctx *px, const yaml_node_t *v, const char *key, bool store) {
    if (!ydoc_is_seq(v)) return fail_at(px, v, "'%s' must be a list", key);
    gallery_config *c = px->c;
    for (int i = 0; i < ydoc_seq_len(px->d, v); i++) {
        yaml_node_t *it = ydoc_seq_at(px->d, v, i);
        const char *s = want_str(px, it, key);
        if (!s) return false;
        if (store) {
            if (c->n_stopwords >= GALLERY_MAX_STOPWORDS || strlen(s) >= sizeof c->stopwords[0])
                return fail_at(px, it, "too many or too long stopwords");
            snprintf(c->stopwords[c->n_stopwords++], sizeof c->stopwords[0], "%s", s);
        }
    }
    return true;
}

static bool top_key(pctx *px, const ydoc_entry *e) {
    gallery_config *c = px->c;
    const char *k = e->key;
    const yaml_node_t *v = e->value;
    long long iv;
    if (!strcmp(k, "name")) {
        const char *s = want_str(px, v, k);
        if (!s) return false;
        char why[200];
        if (!gallery_name_check(s, why, sizeof why)) return fail_at(px, v, "name: %s", why);
        snprintf(c->name, sizeof c->name, "%s", s);
        return true;
    }
    if (!strcmp(k, "description")) return want_str(px, v, k) != NULL;
    if (!strcmp(k, "backend")) {
        const char *s = want_str(px, v, k);
        if (!s) return false;
        if (strcmp(s, "llama-cpp") && strcmp(s, "llama.cpp") && strcmp(s, "blockdraft"))
            return fail_at(px, v, "backend '%s' is not served by blockdraft (llama-cpp or blockdraft)", s);
        snprintf(c->backend, sizeof c->backend, "%s", s);
        return true;
    }
    if (!strcmp(k, "parameters")) return walk_map(px, v, "parameters", parameters_key);
    if (!strcmp(k, "draft_model")) return want_path(px, v, k, c->draft_model, sizeof c->draft_model);
    if (!strcmp(k, "flash_attention")) {
        const char *s = want_str(px, v, k);
        if (!s) return false;
        if (!strcmp(s, "on") || !strcmp(s, "enabled") || !strcmp(s, "true")) c->flash_attention = 1;
        else if (!strcmp(s, "off") || !strcmp(s, "disabled") || !strcmp(s, "false")) c->flash_attention = 0;
        else if (!strcmp(s, "auto")) c->flash_attention = -1;
        else return fail_at(px, v, "flash_attention must be on, off or auto (got '%s')", s);
        return true;
    }
    if (!strcmp(k, "context_size")) {
        if (!want_int(px, v, k, 1, 1 << 24, &iv)) return false;
        c->context_size = (int)iv;
        return true;
    }
    if (!strcmp(k, "rope_scaling")) {
        const char *s = want_str(px, v, k);
        if (!s) return false;
        static const char *const names[] = {"none", "linear", "yarn"}; /* BD_ROPE_SCALING_NONE.. */
        for (int i = 0; i < 3; i++)
            if (!strcmp(s, names[i])) return c->rope_scaling = BD_ROPE_SCALING_NONE + i, true;
        return fail_at(px, v, "rope_scaling must be none, linear or yarn (got '%s')", s);
    }
    if (!strcmp(k, "yarn_ext_factor") || !strcmp(k, "yarn_attn_factor") || !strcmp(k, "yarn_beta_fast") ||
        !strcmp(k, "yarn_beta_slow"))
        return fail_at(px, e->knode,
                       "'%s': of the RoPE settings rope_scaling and parameters.rope_freq_base / "
                       "rope_freq_scale are supported (the rest come from the model file)",
                       k);
    if (!strcmp(k, "cache_type_k") || !strcmp(k, "cache_type_v")) {
        const char *s = want_str(px, v, k);
        if (!s) return false;
        if (!bd_kv_type_parse(s, k[11] == 'k' ? &c->cache_type_k : &c->cache_type_v))
            return fail_at(px, v, "%s '%s': the KV cache types are " BD_KV_TYPE_NAMES, k, s);
        return true;
    }
    if (!strcmp(k, "threads")) {
        if (!want_int(px, v, k, 1, 4096, &iv)) return false;
        c->threads = (int)iv;
        return true;
    }
    if (!strcmp(k, "n_draft")) {
        if (!want_int(px, v, k, 0, 256, &iv)) return false;
        c->n_draft = (int)iv;
        return true;
    }
    if (!strcmp(k, "mmap")) return c->has_mmap = true, want_bool(px, v, k, &c->mmap);
    if (!strcmp(k, "options")) {
        if (!ydoc_is_seq(v)) return fail_at(px, v, "'options' must be a list of \"key:value\" strings");
        for (int i = 0; i < ydoc_seq_len(px->d, v); i++)
            if (!option_item(px, ydoc_seq_at(px->d, v, i))) return false;
        return true;
    }
    if (!strcmp(k, "template")) return walk_map(px, v, "template", template_key);
    if (!strcmp(k, "function")) return walk_map(px, v, "function", function_key);
    if (!strcmp(k, "stopwords")) return string_list(px, v, k, true);
    if (!strcmp(k, "known_usecases")) return string_list(px, v, k, false);
    return unknown_key(px, e, NULL);
}

/* ------------------------------------------------------------------------
 * Entry points
 * ---------------------------------------------------------------------- */

bool gallery_config_parse_node(ydoc *d, const yaml_node_t *map, bool require_model,
                               gallery_config *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->flash_attention = -1;
    pctx px = {.d = d, .what = d->what, .c = out, .err = err, .errlen = errlen};
    if (!map) return bd_err(err, errlen, "%s: empty config", d->what);
    if (!walk_map(&px, map, NULL, top_key)) return false;
    if (require_model && !out->model[0])
        return bd_err(err, errlen, "%s:%d: parameters.model is required", d->what, ydoc_line(map));
    if (out->spec_type == GALLERY_SPEC_DFLASH && !out->draft_model[0])
        return bd_err(err, errlen, "%s:%d: spec_type draft-dflash needs draft_model", d->what,
                      ydoc_line(map));
    if (out->spec_n_min && out->spec_n_max && out->spec_n_min > out->spec_n_max)
        return bd_err(err, errlen, "%s:%d: spec_n_min (%d) exceeds spec_n_max (%d)", d->what,
                      ydoc_line(map), out->spec_n_min, out->spec_n_max);
    return true;
}

bool gallery_config_parse(const char *text, size_t len, const char *what, gallery_config *out,
                          char *err, size_t errlen) {
    ydoc d;
    if (!ydoc_load(&d, text, len, what, err, errlen)) return false;
    bool ok = gallery_config_parse_node(&d, ydoc_root(&d), true, out, err, errlen);
    ydoc_free(&d);
    return ok;
}

bool gallery_config_load(const char *path, gallery_config *out, char *err, size_t errlen) {
    char *buf;
    size_t len;
    if (!gallery_read_file(path, 1 << 20, &buf, &len, err, errlen)) return false;
    bool ok = gallery_config_parse(buf, len, path, out, err, errlen);
    free(buf);
    return ok;
}

bool gallery_config_uses_dflash(const gallery_config *c) {
    return c->draft_model[0] && c->spec_type != GALLERY_SPEC_NONE;
}

void gallery_config_apply(const gallery_config *c, bd_session_params *sp, bd_sampler_params *smp,
                          int32_t *n_predict, bd_spec_params *spp) {
    if (sp) {
        if (c->context_size > 0) sp->n_ctx = c->context_size;
        if (c->threads > 0) sp->n_threads = c->threads;
        if (c->cache_type_k) sp->type_k = c->cache_type_k;
        if (c->cache_type_v) sp->type_v = c->cache_type_v;
        if (c->rope_scaling) sp->rope_scaling = c->rope_scaling;
        if (c->rope_freq_base > 0) sp->rope_freq_base = (float)c->rope_freq_base;
        if (c->rope_freq_scale > 0) sp->rope_freq_scale = (float)c->rope_freq_scale;
    }
    if (smp) {
        if (c->has_temperature) smp->temperature = (float)c->temperature;
        if (c->has_top_p) smp->top_p = (float)c->top_p;
        if (c->has_top_k) smp->top_k = (int32_t)c->top_k;
        if (c->has_min_p) smp->min_p = (float)c->min_p;
        if (c->has_seed && c->seed >= 0) smp->seed = (uint64_t)c->seed;
        if (c->has_repeat_penalty) smp->repeat_penalty = (float)c->repeat_penalty;
        if (c->has_repeat_last_n) smp->repeat_last_n = (int32_t)c->repeat_last_n;
    }
    if (n_predict && c->has_max_tokens) *n_predict = (int32_t)c->max_tokens;
    if (spp) {
        /* n_draft is LocalAI's older name for the draft length */
        if (c->spec_n_max > 0) spp->n_max = c->spec_n_max;
        else if (c->n_draft > 0) spp->n_max = c->n_draft;
        if (c->spec_n_min > 0) spp->n_min = c->spec_n_min;
        if (c->has_spec_p_min) spp->p_min = (float)c->spec_p_min;
        if (c->draft_cache_type_k) spp->draft_type_k = c->draft_cache_type_k;
        if (c->draft_cache_type_v) spp->draft_type_v = c->draft_cache_type_v;
    }
}

bool gallery_spec_adaptive(const gallery_config *c, int flag, bd_spec_type type) {
    if (flag >= 0) return flag != 0;
    if (c && c->has_spec_adaptive) return c->spec_adaptive;
    return bd_spec_adaptive_default(type);
}
