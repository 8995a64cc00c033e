/*
 * config.h - the model config `<models>/<name>.yaml` (LocalAI-compatible
 * keys), parsed strictly.
 *
 * LocalAI silently ignores unknown keys, unknown `options` names and
 * unparsable option values; a typo such as `spec_typ:draft-dflash` then
 * quietly turns speculation off. Here every key and every option must be
 * known and well-formed, or parsing fails with "FILE:LINE: ...". Keys that
 * LocalAI defines but that have no meaning for blockdraft's engine are
 * accepted only where ignoring them cannot change what the user gets
 * (UI hints such as known_usecases); Go prompt templates are refused.
 *
 * Accepted keys:
 *   name, description, backend (llama-cpp | blockdraft), draft_model,
 *   flash_attention (on|off|auto|enabled|disabled), context_size, threads,
 *   cache_type_k, cache_type_v (f32 | f16 | q8_0), rope_scaling (none |
 *   linear | yarn; LocalAI's yarn_* keys are refused, as the CLI's flags),
 *   mmap, n_draft, stopwords [..], known_usecases [..],
 *   parameters: {model, temperature, top_p, top_k, min_p, seed, max_tokens,
 *                rope_freq_base, rope_freq_scale (0 = the model file's),
 *                repeat_penalty (> 0, 1 = off), repeat_last_n (-1 = all, 0 = off)}
 *   template: {use_tokenizer_template}
 *   function: {automatic_tool_parsing_fallback, grammar: {disable}}
 *   options: ["key:value", ...] with keys use_jinja|jinja, spec_type|
 *            speculative_type (draft-dflash | none), spec_n_max|draft_max,
 *            spec_n_min|draft_min, spec_p_min|draft_p_min, spec_adaptive
 *            (true | false: blockdraft's own), parallel|n_parallel,
 *            draft_cache_type_k|draft_cache_type_v (f32 | f16 | q8_0)
 */
#ifndef BD_GALLERY_CONFIG_H
#define BD_GALLERY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "blockdraft.h"
#include "ydoc.h"

#define GALLERY_NAME_MAX 128
#define GALLERY_PATH_MAX 1024
#define GALLERY_MAX_STOPWORDS 16

enum gallery_spec_type {
    GALLERY_SPEC_UNSET = 0, /* no spec_type option: dflash if draft_model is set */
    GALLERY_SPEC_NONE = 1,
    GALLERY_SPEC_DFLASH = 2,
};

typedef struct gallery_config {
    char name[GALLERY_NAME_MAX];
    char backend[32];
    char model[GALLERY_PATH_MAX];       /* parameters.model, relative to the models dir */
    char draft_model[GALLERY_PATH_MAX]; /* "" when none */
    int flash_attention;                /* -1 auto, 0 off, 1 on */
    int context_size;                   /* 0 = from the GGUF */
    int32_t cache_type_k, cache_type_v; /* enum bd_kv_type; 0 = unset */
    int32_t draft_cache_type_k, draft_cache_type_v; /* options draft_cache_type_k / _v; 0 = unset */
    int32_t rope_scaling;               /* enum bd_rope_scaling_type; 0 = the file's */
    double rope_freq_base, rope_freq_scale; /* parameters.rope_freq_base / _scale; 0 = the file's */
    int threads;                        /* 0 = default */
    int n_draft;                        /* 0 = unset */
    bool has_mmap, mmap;
    /* sampling defaults (has_* false = engine default) */
    bool has_temperature, has_top_p, has_top_k, has_min_p, has_seed, has_max_tokens,
        has_repeat_penalty, has_repeat_last_n;
    double temperature, top_p, min_p, repeat_penalty;
    long long top_k, seed, max_tokens, repeat_last_n;
    /* options */
    bool use_jinja;
    enum gallery_spec_type spec_type;
    int spec_n_max, spec_n_min; /* 0 = unset */
    bool has_spec_p_min;
    double spec_p_min;
    bool has_spec_adaptive, spec_adaptive;
    int parallel; /* 0 = unset */
    /* template / function (tool-calling hints for the server) */
    bool use_tokenizer_template;
    bool tool_parsing_fallback;
    bool grammar_disable;
    int n_stopwords;
    char stopwords[GALLERY_MAX_STOPWORDS][128];
} gallery_config;

/* Parse a config mapping node. `what` names the source for messages (the
 * ydoc's own name is used when NULL). require_model: parameters.model must
 * be present (true for a model config; an index entry's overrides are
 * checked with the same rules). */
bool gallery_config_parse_node(ydoc *d, const yaml_node_t *map, bool require_model,
                               gallery_config *out, char *err, size_t errlen);
/* Parse YAML text. */
bool gallery_config_parse(const char *text, size_t len, const char *what, gallery_config *out,
                          char *err, size_t errlen);
/* Read and parse a config file (at most 1 MiB). */
bool gallery_config_load(const char *path, gallery_config *out, char *err, size_t errlen);

/* The effective speculative mode: dflash when draft_model is set and
 * spec_type is unset or draft-dflash. */
bool gallery_config_uses_dflash(const gallery_config *c);

/* What a config sets in the engine's parameters: the one place that maps
 * config keys to engine settings, used by `run NAME` and by `serve`, so a
 * config means the same in both. Each present key overwrites its field;
 * absent keys leave the field as the caller set it. Callers apply their
 * own overrides afterwards (command-line flags, request fields).
 *   sp:  context_size -> n_ctx, threads -> n_threads, cache_type_k / _v -> type_k / _v,
 *        rope_scaling, rope_freq_base, rope_freq_scale -> the same fields
 *   smp: temperature, top_p, top_k, min_p, seed (>= 0), repeat_penalty,
 *        repeat_last_n
 *   n_predict: max_tokens
 *   spp: spec_n_max (else n_draft) -> n_max, spec_n_min -> n_min,
 *        spec_p_min -> p_min, draft_cache_type_k / _v -> draft_type_k / _v
 * Any pointer may be NULL (that group is skipped). The speculative type
 * follows from the draft model the config names (gallery_config_uses_dflash);
 * `parallel` and the stopwords are the server's own. */
void gallery_config_apply(const gallery_config *c, bd_session_params *sp, bd_sampler_params *smp,
                          int32_t *n_predict, bd_spec_params *spp);

/* Whether a model runs with the adaptive draft length: flag (1 / 0 from
 * --spec-adaptive / --no-spec-adaptive, 0 too for a --spec-draft-n-max
 * given alone; -1 none given), else the config's
 * spec_adaptive option (c may be NULL), else bd_spec_adaptive_default of
 * the speculative type in effect. Call it once the type is final. */
bool gallery_spec_adaptive(const gallery_config *c, int flag, bd_spec_type type);

#endif
