/*
 * pairing.c - header checks for targets, DFlash drafters and their fit.
 * See pairing.h for the contract. Facts: gguf-and-architectures.md §10,
 * dflash.md §2.2 and §7.
 */
#include "pairing.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../base/base.h"

/* ------------------------------------------------------------------------
 * Report
 * ---------------------------------------------------------------------- */

void bd_pairing_report_init(bd_pairing_report *r) {
    memset(r, 0, sizeof *r);
    r->worst = BD_PAIRING_OK;
}

static int verdict_rank(enum bd_pairing_verdict v) {
    switch (v) {
    case BD_PAIRING_OK: return 0;
    case BD_PAIRING_WARN: return 1;
    case BD_PAIRING_UNSUPPORTED: return 2;
    case BD_PAIRING_FAIL: return 3;
    }
    return 3;
}

void bd_pairing_report_add(bd_pairing_report *r, const char *name, enum bd_pairing_verdict v,
                        const char *fmt, ...) {
    if (verdict_rank(v) > verdict_rank(r->worst)) r->worst = v;
    if (r->n_checks >= BD_PAIRING_MAX_CHECKS) return;
    bd_pairing_check *c = &r->checks[r->n_checks++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->verdict = v;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof c->detail, fmt, ap);
    va_end(ap);
}

const bd_pairing_check *bd_pairing_report_first(const bd_pairing_report *r, enum bd_pairing_verdict min) {
    for (int i = 0; i < r->n_checks; i++)
        if (verdict_rank(r->checks[i].verdict) >= verdict_rank(min)) return &r->checks[i];
    return NULL;
}

const char *bd_pairing_verdict_name(enum bd_pairing_verdict v) {
    switch (v) {
    case BD_PAIRING_OK: return "ok";
    case BD_PAIRING_WARN: return "warn";
    case BD_PAIRING_FAIL: return "fail";
    case BD_PAIRING_UNSUPPORTED: return "unsupported";
    }
    return "?";
}

/* ------------------------------------------------------------------------
 * Target
 * ---------------------------------------------------------------------- */

bool bd_pairing_arch_supported(const char *arch, char *why, size_t whylen) {
    char buf[400];
    const char *problem = bd_arch_target_problem(arch, buf, sizeof buf);
    if (!problem) return true;
    return bd_err(why, whylen, "%s", problem);
}

/* Copy a string key NUL-terminated; false if missing, not a string, or it
 * does not fit / contains a NUL. */
static bool get_name(const bd_gguf_file *f, const char *key, char *buf, size_t n) {
    const char *s;
    uint64_t len;
    if (!bd_gguf_get_str(f, key, &s, &len)) return false;
    if (len >= n || memchr(s, 0, (size_t)len)) return false;
    memcpy(buf, s, (size_t)len);
    buf[len] = 0;
    return true;
}

bool bd_pairing_target_check(const bd_gguf_file *t, bd_pairing_target *info, bd_pairing_report *r) {
    bd_pairing_target ti;
    memset(&ti, 0, sizeof ti);
    bool ok = true;
    if (!get_name(t, "general.architecture", ti.arch, sizeof ti.arch)) {
        bd_pairing_report_add(r, "target.arch", BD_PAIRING_FAIL, "target has no usable general.architecture string");
        if (info) *info = ti;
        return false;
    }
    char why[400];
    const bd_arch_info *a = bd_arch_find(ti.arch);
    if (a && a->role == BD_ROLE_DRAFTER) {
        bd_pairing_arch_supported(ti.arch, why, sizeof why);
        bd_pairing_report_add(r, "target.arch", BD_PAIRING_FAIL, "%s", why);
        ok = false;
    } else if (bd_pairing_arch_supported(ti.arch, why, sizeof why)) {
        bd_pairing_report_add(r, "target.arch", BD_PAIRING_OK, "architecture '%s' is supported", ti.arch);
    } else {
        bd_pairing_report_add(r, "target.arch", BD_PAIRING_UNSUPPORTED, "%s", why);
    }

    char key[96];
    snprintf(key, sizeof key, "%s.embedding_length", ti.arch);
    if (!bd_gguf_get_u32(t, key, &ti.n_embd) || ti.n_embd == 0) {
        bd_pairing_report_add(r, "target.shape", BD_PAIRING_FAIL, "target has no valid %s", key);
        ok = false;
    }
    uint32_t blocks = 0, nextn = 0;
    snprintf(key, sizeof key, "%s.block_count", ti.arch);
    if (!bd_gguf_get_u32(t, key, &blocks) || blocks == 0) {
        bd_pairing_report_add(r, "target.shape", BD_PAIRING_FAIL, "target has no valid %s", key);
        ok = false;
    }
    /* Trailing multi-token-prediction blocks are counted in block_count but
     * are not trunk layers: nothing taps them. */
    snprintf(key, sizeof key, "%s.nextn_predict_layers", ti.arch);
    if (bd_gguf_find(t, key) && (!bd_gguf_get_u32(t, key, &nextn) || nextn >= blocks)) {
        bd_pairing_report_add(r, "target.shape", BD_PAIRING_FAIL, "%s must be an integer below block_count %u", key,
                              blocks);
        ok = false;
    }
    ti.n_layer = blocks - (nextn < blocks ? nextn : 0);
    /* Vocabulary rows: the embedding matrix keeps padding rows (the Qwen3
     * mask id 151669 lives there), so prefer its row count. */
    const bd_gguf_tensor *emb = bd_gguf_find_tensor(t, "token_embd.weight");
    if (emb && emb->n_dims >= 2) ti.n_vocab = emb->ne[1];
    const bd_gguf_kv *toks = bd_gguf_find(t, "tokenizer.ggml.tokens");
    if (toks && toks->type == GGUF_VTYPE_ARRAY && toks->arr_count > ti.n_vocab) ti.n_vocab = toks->arr_count;
    if (ok)
        bd_pairing_report_add(r, "target.shape", BD_PAIRING_OK, "width %u, %u trunk layers, vocabulary %llu rows",
                              ti.n_embd, ti.n_layer, (unsigned long long)ti.n_vocab);
    if (info) *info = ti;
    return ok;
}

/* ------------------------------------------------------------------------
 * Drafter schema
 * ---------------------------------------------------------------------- */

/* Optional `dflash.*` keys of drafter variants this engine does not run.
 * Refused by name rather than ignored: each changes the math. */
static const char *const refused_keys[] = {
    "dflash.embedding_scale",   "dflash.attention.scale",     "dflash.logit_scale",
    "dflash.final_logit_softcapping", "dflash.conv_kernel_size", "dflash.conv_group_size",
    "dflash.selector_rank",     "dflash.selector_top_k",      "dflash.sample_from_anchor",
    "dflash.has_confidence_head", "dflash.rope.scaling.factor", "dflash.hyper_connection_count",
    NULL,
};

/* Tensors a plain DFlash drafter may hold. */
static bool tensor_expected(const char *name, uint32_t n_layer) {
    static const char *const globals[] = {"fc.weight", "enc.output_norm.weight", "output_norm.weight",
                                          "token_embd.weight", "output.weight", NULL};
    static const char *const per_layer[] = {
        "attn_norm.weight",   "attn_q.weight",      "attn_k.weight",      "attn_v.weight",
        "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight", "ffn_norm.weight",
        "ffn_gate.weight",    "ffn_up.weight",      "ffn_down.weight",    NULL};
    for (const char *const *g = globals; *g; g++)
        if (!strcmp(name, *g)) return true;
    int il, off = 0;
    if (sscanf(name, "blk.%d.%n", &il, &off) != 1 || off == 0 || il < 0 || (uint32_t)il >= n_layer) return false;
    for (const char *const *p = per_layer; *p; p++)
        if (!strcmp(name + off, *p)) return true;
    return false;
}

#define SCHEMA_FAIL(...)                                                      \
    do {                                                                      \
        bd_pairing_report_add(r, "drafter.schema", BD_PAIRING_FAIL, __VA_ARGS__); \
        goto out;                                                             \
    } while (0)

/* Keys: everything the engine reads, within the limits of arch.h. */
static bool drafter_keys(const bd_gguf_file *d, bd_dflash_schema *di, bd_pairing_report *r) {
    char arch[64];
    if (!get_name(d, "general.architecture", arch, sizeof arch))
        SCHEMA_FAIL("drafter has no usable general.architecture string");
    if (!strcmp(arch, "dflash-draft") || strstr(arch, "dflash-draft"))
        SCHEMA_FAIL("drafter uses the fork schema '%s' (keys %s.dflash.*, tensors dflash_fc/dflash_hidden_norm), "
                    "which blockdraft and upstream llama.cpp do not load; use a drafter converted by upstream "
                    "convert_hf_to_gguf.py (general.architecture 'dflash')",
                    arch, arch);
    if (strcmp(arch, "dflash") != 0) SCHEMA_FAIL("drafter general.architecture is '%s', expected 'dflash'", arch);
    /* Pre-merge conversions stored the HF ids (no +1) under another key;
     * renaming the key would tap the wrong layers, so refuse outright. */
    if (bd_gguf_find(d, "dflash.target_layer_ids"))
        SCHEMA_FAIL("drafter carries the pre-merge key 'dflash.target_layer_ids' instead of "
                    "'dflash.target_layers'; its values are offset by one, so the file cannot be repaired by "
                    "renaming the key: replace the drafter");
    for (const char *const *k = refused_keys; *k; k++)
        if (bd_gguf_find(d, *k))
            SCHEMA_FAIL("drafter key '%s' belongs to a DFlash variant blockdraft does not run", *k);
    const char *sv;
    uint64_t sl;
    if (bd_gguf_find(d, "dflash.hidden_activation") &&
        !(bd_gguf_get_str(d, "dflash.hidden_activation", &sv, &sl) && sl == 4 && !memcmp(sv, "silu", 4)))
        SCHEMA_FAIL("drafter key 'dflash.hidden_activation' is not 'silu'; blockdraft runs SiLU drafters only");
    if (bd_gguf_get_str(d, "dflash.rope.scaling.type", &sv, &sl) && !(sl == 4 && !memcmp(sv, "none", 4)))
        SCHEMA_FAIL("drafter key 'dflash.rope.scaling.type' (scaled RoPE) is not supported");

    const bd_gguf_kv *tl = bd_gguf_find(d, "dflash.target_layers");
    if (!tl) SCHEMA_FAIL("drafter lacks the required key 'dflash.target_layers'");
    if (tl->type != GGUF_VTYPE_ARRAY || tl->arr_count == 0 || tl->arr_count > BD_MAX_TAPS)
        SCHEMA_FAIL("dflash.target_layers must be an integer array of 1..%d entries", BD_MAX_TAPS);
    di->n_taps = (uint32_t)tl->arr_count;
    for (uint64_t i = 0; i < tl->arr_count; i++) {
        int64_t v;
        /* 0 is the input of layer 0 (the token embeddings): valid, if unusual. */
        if (!bd_gguf_arr_i64(tl, i, &v) || v < 0 || v >= BD_MAX_LAYERS)
            SCHEMA_FAIL("dflash.target_layers[%llu] is not a layer index in 0..%d", (unsigned long long)i,
                        BD_MAX_LAYERS - 1);
        for (uint64_t j = 0; j < i; j++)
            if (di->target_layers[j] == v) SCHEMA_FAIL("dflash.target_layers lists layer %lld twice", (long long)v);
        di->target_layers[i] = (int32_t)v;
    }
    if (!bd_gguf_get_u32(d, "dflash.embedding_length", &di->n_embd) || di->n_embd == 0 || di->n_embd > (1u << 20))
        SCHEMA_FAIL("drafter lacks a valid dflash.embedding_length");
    if (!bd_gguf_get_u32(d, "dflash.block_count", &di->n_layer) || di->n_layer == 0 || di->n_layer > BD_MAX_LAYERS)
        SCHEMA_FAIL("dflash.block_count must be an integer in 1..%d", BD_MAX_LAYERS);
    di->block_size = 16;
    if (bd_gguf_find(d, "dflash.block_size") &&
        (!bd_gguf_get_u32(d, "dflash.block_size", &di->block_size) || di->block_size < BD_DFLASH_MIN_BLOCK ||
         di->block_size > BD_DFLASH_MAX_BLOCK))
        SCHEMA_FAIL("dflash.block_size must be an integer in %d..%d", BD_DFLASH_MIN_BLOCK, BD_DFLASH_MAX_BLOCK);
    if (!bd_gguf_get_u32(d, "tokenizer.ggml.mask_token_id", &di->mask_token_id) &&
        !bd_gguf_get_u32(d, "dflash.mask_token_id", &di->mask_token_id))
        SCHEMA_FAIL("drafter lacks tokenizer.ggml.mask_token_id");
    if (bd_gguf_find(d, "dflash.attention.causal") && !bd_gguf_get_bool(d, "dflash.attention.causal", &di->causal))
        SCHEMA_FAIL("'dflash.attention.causal' must be a bool");
    /* Sliding-window layers (Qwen3.6-27B's drafter): a window and a bool
     * per layer saying which layers use it, as llama.cpp reads them. */
    if (bd_gguf_find(d, "dflash.attention.sliding_window")) {
        if (!bd_gguf_get_u32(d, "dflash.attention.sliding_window", &di->swa_window))
            SCHEMA_FAIL("'dflash.attention.sliding_window' must be an unsigned integer");
        if (di->swa_window > 0) {
            const bd_gguf_kv *pat = bd_gguf_find(d, "dflash.attention.sliding_window_pattern");
            if (!pat || pat->type != GGUF_VTYPE_ARRAY || pat->arr_count != di->n_layer)
                SCHEMA_FAIL("a sliding window of %u needs 'dflash.attention.sliding_window_pattern', a bool per "
                            "drafter layer (%u)",
                            di->swa_window, di->n_layer);
            for (uint64_t i = 0; i < pat->arr_count; i++) {
                int64_t v;
                if (!bd_gguf_arr_i64(pat, i, &v) || v < 0 || v > 1)
                    SCHEMA_FAIL("'dflash.attention.sliding_window_pattern'[%llu] is not a bool",
                                (unsigned long long)i);
                di->swa_layer[i] = v != 0;
            }
        }
    } else if (bd_gguf_find(d, "dflash.attention.sliding_window_pattern")) {
        SCHEMA_FAIL("'dflash.attention.sliding_window_pattern' without 'dflash.attention.sliding_window'");
    }
    /* rope.dimension_sections = [n_rot/2, 0, 0, 0] is plain NEOX (drafters of
     * M-RoPE targets carry it); anything else would be M-RoPE. */
    const bd_gguf_kv *ds = bd_gguf_find(d, "dflash.rope.dimension_sections");
    if (ds) {
        uint32_t hd = 0, n_head = 0, n_rot = 0;
        if (!bd_gguf_get_u32(d, "dflash.attention.key_length", &hd)) {
            if (bd_gguf_get_u32(d, "dflash.attention.head_count", &n_head) && n_head) hd = di->n_embd / n_head;
        }
        if (!bd_gguf_get_u32(d, "dflash.rope.dimension_count", &n_rot)) n_rot = hd;
        bool plain = ds->type == GGUF_VTYPE_ARRAY && ds->arr_count >= 1 && ds->arr_count <= 4;
        for (uint64_t i = 0; plain && i < ds->arr_count; i++) {
            int64_t v;
            plain = bd_gguf_arr_i64(ds, i, &v) && v == (i == 0 ? (int64_t)n_rot / 2 : 0);
        }
        if (!plain)
            SCHEMA_FAIL("'dflash.rope.dimension_sections' other than [%u, 0, 0, 0] (M-RoPE) is not supported",
                        n_rot / 2);
    }
    return true;
out:
    return false;
}

/* Tensors: no variant machinery, nothing missing, fc of the right shape. */
static bool drafter_tensors(const bd_gguf_file *d, bd_dflash_schema *di, bd_pairing_report *r) {
    const char *variant = NULL, *unknown = NULL;
    for (int64_t i = 0; i < bd_gguf_tensor_count(d) && !variant && !unknown; i++) {
        const char *n = bd_gguf_tensor_at(d, i)->name;
        if (strstr(n, "attn_conv") || strstr(n, "ffn_conv") || !strncmp(n, "selector", 8))
            variant = "DFlash2 (conv/selector tensors)";
        else if (!strncmp(n, "markov_", 7) || !strncmp(n, "conf_proj", 9))
            variant = "DSpark (markov/confidence tensors)";
        else if (!strcmp(n, "d2t"))
            variant = "reduced-vocabulary (d2t)";
        else if (!tensor_expected(n, di->n_layer))
            unknown = n;
    }
    if (variant) {
        bd_pairing_report_add(r, "drafter.tensors", BD_PAIRING_FAIL,
                              "drafter is a %s variant, which this build cannot run", variant);
        return false;
    }
    if (unknown) {
        bd_pairing_report_add(r, "drafter.tensors", BD_PAIRING_FAIL,
                              "drafter tensor '%s' belongs to a DFlash variant blockdraft does not run", unknown);
        return false;
    }
    char missing[96] = "";
    static const char *const per_layer[] = {"attn_norm", "attn_q",   "attn_k", "attn_v",  "attn_output", "attn_q_norm",
                                            "attn_k_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    static const char *const globals[] = {"fc.weight", "enc.output_norm.weight", "output_norm.weight"};
    for (size_t k = 0; k < 3 && !missing[0]; k++)
        if (!bd_gguf_find_tensor(d, globals[k])) snprintf(missing, sizeof missing, "%s", globals[k]);
    for (uint32_t l = 0; l < di->n_layer && !missing[0]; l++)
        for (size_t k = 0; k < sizeof per_layer / sizeof per_layer[0]; k++) {
            char nm[96];
            snprintf(nm, sizeof nm, "blk.%u.%s.weight", l, per_layer[k]);
            if (!bd_gguf_find_tensor(d, nm)) {
                snprintf(missing, sizeof missing, "%s", nm);
                break;
            }
        }
    if (missing[0]) {
        bd_pairing_report_add(r, "drafter.tensors", BD_PAIRING_FAIL, "drafter lacks tensor %s", missing);
        return false;
    }
    const bd_gguf_tensor *fc = bd_gguf_find_tensor(d, "fc.weight");
    if (fc->n_dims != 2 || fc->ne[0] != (uint64_t)di->n_taps * di->n_embd || fc->ne[1] != di->n_embd) {
        bd_pairing_report_add(r, "drafter.tensors", BD_PAIRING_FAIL,
                              "fc.weight has shape {%llu, %llu}, expected {%llu, %u} (%u taps x width %u)",
                              (unsigned long long)fc->ne[0], (unsigned long long)fc->ne[1],
                              (unsigned long long)di->n_taps * di->n_embd, di->n_embd, di->n_taps, di->n_embd);
        return false;
    }
    const bd_gguf_tensor *te = bd_gguf_find_tensor(d, "token_embd.weight");
    if (te) {
        if (te->n_dims != 2 || te->ne[0] != di->n_embd || te->ne[1] < 1 || te->ne[1] > (1u << 24)) {
            bd_pairing_report_add(r, "drafter.tensors", BD_PAIRING_FAIL,
                                  "token_embd.weight has an implausible shape {%llu, %llu}",
                                  (unsigned long long)te->ne[0], (unsigned long long)te->ne[1]);
            return false;
        }
        di->has_embeddings = true;
        di->n_vocab = te->ne[1];
    } else if (bd_gguf_find_tensor(d, "output.weight")) {
        bd_pairing_report_add(r, "drafter.tensors", BD_PAIRING_FAIL,
                              "drafter has 'output.weight' but no 'token_embd.weight'");
        return false;
    }
    bd_pairing_report_add(r, "drafter.tensors", BD_PAIRING_OK, "%lld tensors, fc {%llu, %u}",
                          (long long)bd_gguf_tensor_count(d), (unsigned long long)fc->ne[0], di->n_embd);
    return true;
}

bool bd_pairing_drafter_check(const bd_gguf_file *d, bd_dflash_schema *out, bd_pairing_report *r) {
    bd_dflash_schema di;
    memset(&di, 0, sizeof di);
    bool ok = drafter_keys(d, &di, r);
    if (ok) {
        char swa[64] = "";
        if (di.swa_window) {
            int n = 0;
            for (uint32_t i = 0; i < di.n_layer; i++) n += di.swa_layer[i];
            snprintf(swa, sizeof swa, ", %d sliding-window layers (window %u)", n, di.swa_window);
        }
        bd_pairing_report_add(r, "drafter.schema", BD_PAIRING_OK,
                              "arch dflash, %u layers, block size %u, %u taps, mask id %u%s", di.n_layer,
                              di.block_size, di.n_taps, di.mask_token_id, swa);
        ok = drafter_tensors(d, &di, r);
    }
    if (out) *out = di;
    return ok;
}

/* ------------------------------------------------------------------------
 * Fit
 * ---------------------------------------------------------------------- */

/* Compare one optional string key in both files. Returns 1 equal, 0
 * different, -1 absent in one or both. */
static int same_str(const bd_gguf_file *a, const bd_gguf_file *b, const char *key) {
    const char *sa, *sb;
    uint64_t la, lb;
    bool ha = bd_gguf_get_str(a, key, &sa, &la), hb = bd_gguf_get_str(b, key, &sb, &lb);
    if (!ha && !hb) return -1;
    if (ha != hb) return 0;
    return la == lb && memcmp(sa, sb, (size_t)la) == 0;
}

static bool check_tokenizer(const bd_gguf_file *t, const bd_gguf_file *d, bd_pairing_report *r) {
    const bd_gguf_kv *tt = bd_gguf_find(t, "tokenizer.ggml.tokens");
    const bd_gguf_kv *dt = bd_gguf_find(d, "tokenizer.ggml.tokens");
    if (!dt) {
        bd_pairing_report_add(r, "fit.tokenizer", BD_PAIRING_WARN,
                           "drafter carries no tokenizer; assumed to be the target's");
        return true;
    }
    if (!tt) {
        bd_pairing_report_add(r, "fit.tokenizer", BD_PAIRING_FAIL,
                           "drafter has a tokenizer but the target has none");
        return false;
    }
    static const char *const keys[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre"};
    for (size_t k = 0; k < 2; k++) {
        if (same_str(t, d, keys[k]) == 0) {
            char a[64] = "(absent)", b[64] = "(absent)";
            get_name(t, keys[k], a, sizeof a);
            get_name(d, keys[k], b, sizeof b);
            bd_pairing_report_add(r, "fit.tokenizer", BD_PAIRING_FAIL,
                               "%s differs: target '%s', drafter '%s'", keys[k], a, b);
            return false;
        }
    }
    if (tt->type != GGUF_VTYPE_ARRAY || dt->type != GGUF_VTYPE_ARRAY ||
        tt->arr_type != GGUF_VTYPE_STRING || dt->arr_type != GGUF_VTYPE_STRING) {
        bd_pairing_report_add(r, "fit.tokenizer", BD_PAIRING_FAIL,
                           "tokenizer.ggml.tokens is not a string array in both files");
        return false;
    }
    if (tt->arr_count != dt->arr_count) {
        bd_pairing_report_add(r, "fit.tokenizer", BD_PAIRING_FAIL,
                           "vocabularies differ in size: target %llu tokens, drafter %llu",
                           (unsigned long long)tt->arr_count, (unsigned long long)dt->arr_count);
        return false;
    }
    for (uint64_t i = 0; i < tt->arr_count; i++) {
        const char *a, *b;
        uint64_t la, lb;
        if (!bd_gguf_arr_str(tt, i, &a, &la) || !bd_gguf_arr_str(dt, i, &b, &lb) || la != lb ||
            memcmp(a, b, (size_t)la) != 0) {
            bd_pairing_report_add(r, "fit.tokenizer", BD_PAIRING_FAIL,
                               "vocabularies differ at token %llu", (unsigned long long)i);
            return false;
        }
    }
    bd_pairing_report_add(r, "fit.tokenizer", BD_PAIRING_OK, "same tokenizer (%llu tokens)",
                       (unsigned long long)tt->arr_count);
    return true;
}

bool bd_pairing_fit_check(const bd_gguf_file *t, const bd_pairing_target *ti, const bd_gguf_file *d,
                       const bd_dflash_schema *di, bd_pairing_report *r) {
    bool ok = true;
    if (di->n_embd != ti->n_embd) {
        bd_pairing_report_add(r, "fit.width", BD_PAIRING_FAIL,
                           "drafter width %u (dflash.embedding_length) does not match the "
                           "target's width %u (%s.embedding_length)",
                           di->n_embd, ti->n_embd, ti->arch);
        ok = false;
    } else {
        bd_pairing_report_add(r, "fit.width", BD_PAIRING_OK, "width %u on both sides", di->n_embd);
    }
    /* GGUF tap g means "input of target layer g"; there is no input of
     * layer n_layer, and MTP blocks past the trunk are never run. */
    bool taps_ok = true;
    for (uint32_t i = 0; i < di->n_taps; i++)
        if (di->target_layers[i] < 0 || (uint32_t)di->target_layers[i] >= ti->n_layer) {
            bd_pairing_report_add(r, "fit.layers", BD_PAIRING_FAIL,
                                  "dflash.target_layers[%u] = %d is outside the target's trunk layers 0..%u", i,
                                  di->target_layers[i], ti->n_layer - 1);
            taps_ok = ok = false;
            break;
        }
    if (taps_ok) {
        char list[128] = "";
        size_t used = 0;
        for (uint32_t i = 0; i < di->n_taps && used < sizeof list - 12; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? "," : "", di->target_layers[i]);
        bd_pairing_report_add(r, "fit.layers", BD_PAIRING_OK, "taps [%s] within %u target layers", list,
                              ti->n_layer);
    }
    if (di->has_embeddings && ti->n_vocab && di->n_vocab != ti->n_vocab) {
        bd_pairing_report_add(r, "fit.vocab", BD_PAIRING_FAIL,
                              "drafter embeddings have %llu rows, the target vocabulary %llu",
                              (unsigned long long)di->n_vocab, (unsigned long long)ti->n_vocab);
        ok = false;
    }
    if (ti->n_vocab == 0) {
        bd_pairing_report_add(r, "fit.mask", BD_PAIRING_WARN,
                           "target vocabulary size unknown; mask id %u not checked",
                           di->mask_token_id);
    } else if (di->mask_token_id >= ti->n_vocab) {
        bd_pairing_report_add(r, "fit.mask", BD_PAIRING_FAIL,
                           "mask id %u is outside the target vocabulary (%llu rows)",
                           di->mask_token_id, (unsigned long long)ti->n_vocab);
        ok = false;
    } else {
        bd_pairing_report_add(r, "fit.mask", BD_PAIRING_OK, "mask id %u < %llu", di->mask_token_id,
                           (unsigned long long)ti->n_vocab);
    }
    if (!check_tokenizer(t, d, r)) ok = false;
    return ok;
}

bool bd_pairing_run(const bd_gguf_file *target, const bd_gguf_file *drafter, bd_pairing_report *r,
                 bd_dflash_schema *dinfo, char *err, size_t errlen) {
    bd_pairing_target ti;
    bd_dflash_schema di;
    bool t_ok = true, d_ok = true;
    if (target) t_ok = bd_pairing_target_check(target, &ti, r);
    if (drafter) d_ok = bd_pairing_drafter_check(drafter, &di, r);
    if (target && drafter && t_ok && d_ok) bd_pairing_fit_check(target, &ti, drafter, &di, r);
    if (dinfo && drafter) *dinfo = di;
    const bd_pairing_check *c = bd_pairing_report_first(r, BD_PAIRING_FAIL);
    if (c && c->verdict == BD_PAIRING_FAIL) return bd_err(err, errlen, "%s", c->detail);
    /* bd_pairing_report_first(FAIL) can only return a FAIL check. */
    return true;
}
