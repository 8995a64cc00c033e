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

void pairing_report_init(pairing_report *r) {
    memset(r, 0, sizeof *r);
    r->worst = PAIRING_OK;
}

static int verdict_rank(enum pairing_verdict v) {
    switch (v) {
    case PAIRING_OK: return 0;
    case PAIRING_WARN: return 1;
    case PAIRING_UNSUPPORTED: return 2;
    case PAIRING_FAIL: return 3;
    }
    return 3;
}

void pairing_report_add(pairing_report *r, const char *name, enum pairing_verdict v,
                        const char *fmt, ...) {
    if (verdict_rank(v) > verdict_rank(r->worst)) r->worst = v;
    if (r->n_checks >= PAIRING_MAX_CHECKS) return;
    pairing_check *c = &r->checks[r->n_checks++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->verdict = v;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof c->detail, fmt, ap);
    va_end(ap);
}

const pairing_check *pairing_report_first(const pairing_report *r, enum pairing_verdict min) {
    for (int i = 0; i < r->n_checks; i++)
        if (verdict_rank(r->checks[i].verdict) >= verdict_rank(min)) return &r->checks[i];
    return NULL;
}

const char *pairing_verdict_name(enum pairing_verdict v) {
    switch (v) {
    case PAIRING_OK: return "ok";
    case PAIRING_WARN: return "warn";
    case PAIRING_FAIL: return "fail";
    case PAIRING_UNSUPPORTED: return "unsupported";
    }
    return "?";
}

/* ------------------------------------------------------------------------
 * Target
 * ---------------------------------------------------------------------- */

bool pairing_arch_supported(const char *arch, char *why, size_t whylen) {
    if (!strcmp(arch, "llama") || !strcmp(arch, "qwen3")) return true;
    const char *what = NULL;
    if (!strcmp(arch, "qwen35"))
        what = "Qwen3.5/3.6 hybrid Gated DeltaNet";
    else if (!strcmp(arch, "qwen35moe"))
        what = "Qwen3.5/3.6 hybrid Gated DeltaNet mixture-of-experts";
    else if (!strcmp(arch, "qwen3moe"))
        what = "Qwen3 mixture-of-experts";
    if (what)
        return bd_err(why, whylen,
                      "architecture '%s' (%s) is not supported by this build yet; "
                      "blockdraft runs llama and qwen3 targets",
                      arch, what);
    if (!strcmp(arch, "dflash") || !strcmp(arch, "dflash-draft"))
        return bd_err(why, whylen, "architecture '%s' is a DFlash drafter, not a target model", arch);
    return bd_err(why, whylen,
                  "architecture '%s' is not supported by blockdraft (supported: llama, qwen3)", arch);
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

bool pairing_target_check(const bd_gguf_file *t, pairing_target_info *info, pairing_report *r) {
    pairing_target_info ti;
    memset(&ti, 0, sizeof ti);
    bool ok = true;
    if (!get_name(t, "general.architecture", ti.arch, sizeof ti.arch)) {
        pairing_report_add(r, "target.arch", PAIRING_FAIL,
                           "target has no usable general.architecture string");
        if (info) *info = ti;
        return false;
    }
    char why[256];
    if (!strcmp(ti.arch, "dflash") || !strcmp(ti.arch, "dflash-draft")) {
        pairing_arch_supported(ti.arch, why, sizeof why);
        pairing_report_add(r, "target.arch", PAIRING_FAIL, "%s", why);
        ok = false;
    } else if (pairing_arch_supported(ti.arch, why, sizeof why)) {
        pairing_report_add(r, "target.arch", PAIRING_OK, "architecture '%s' is supported", ti.arch);
    } else {
        pairing_report_add(r, "target.arch", PAIRING_UNSUPPORTED, "%s", why);
    }

    char key[96];
    snprintf(key, sizeof key, "%s.embedding_length", ti.arch);
    if (!bd_gguf_get_u32(t, key, &ti.n_embd) || ti.n_embd == 0) {
        pairing_report_add(r, "target.shape", PAIRING_FAIL, "target has no valid %s", key);
        ok = false;
    }
    snprintf(key, sizeof key, "%s.block_count", ti.arch);
    if (!bd_gguf_get_u32(t, key, &ti.n_layer) || ti.n_layer == 0) {
        pairing_report_add(r, "target.shape", PAIRING_FAIL, "target has no valid %s", key);
        ok = false;
    }
    /* Vocabulary rows: the embedding matrix keeps padding rows (the Qwen3
     * mask id 151669 lives there), so prefer its row count. */
    const bd_gguf_tensor *emb = bd_gguf_find_tensor(t, "token_embd.weight");
    if (emb && emb->n_dims >= 2) ti.n_vocab = emb->ne[1];
    const bd_gguf_kv *toks = bd_gguf_find(t, "tokenizer.ggml.tokens");
    if (toks && toks->type == GGUF_VTYPE_ARRAY && toks->arr_count > ti.n_vocab)
        ti.n_vocab = toks->arr_count;
    if (ok)
        pairing_report_add(r, "target.shape", PAIRING_OK,
                           "width %u, %u layers, vocabulary %llu rows", ti.n_embd, ti.n_layer,
                           (unsigned long long)ti.n_vocab);
    if (info) *info = ti;
    return ok;
}

/* ------------------------------------------------------------------------
 * Drafter
 * ---------------------------------------------------------------------- */

static bool has_tensor(const bd_gguf_file *d, const char *name) {
    return bd_gguf_find_tensor(d, name) != NULL;
}

bool pairing_drafter_check(const bd_gguf_file *d, pairing_drafter_info *info, pairing_report *r) {
    pairing_drafter_info di;
    memset(&di, 0, sizeof di);
    char arch[64];
    if (!get_name(d, "general.architecture", arch, sizeof arch)) {
        pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                           "drafter has no usable general.architecture string");
        if (info) *info = di;
        return false;
    }
    if (!strcmp(arch, "dflash-draft") || strstr(arch, "dflash-draft")) {
        pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                           "drafter uses the fork schema '%s' (keys %s.dflash.*, tensors "
                           "dflash_fc/dflash_hidden_norm), which blockdraft and upstream "
                           "llama.cpp do not load; use a drafter converted by upstream "
                           "convert_hf_to_gguf.py (general.architecture 'dflash')",
                           arch, arch);
        if (info) *info = di;
        return false;
    }
    if (strcmp(arch, "dflash") != 0) {
        pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                           "drafter general.architecture is '%s', expected 'dflash'", arch);
        if (info) *info = di;
        return false;
    }
    /* Pre-merge conversions stored the HF ids (no +1) under another key;
     * renaming the key would tap the wrong layers, so refuse outright. */
    if (bd_gguf_find(d, "dflash.target_layer_ids")) {
        pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                           "drafter carries the pre-merge key 'dflash.target_layer_ids' instead "
                           "of 'dflash.target_layers'; its values are offset by one, so the file "
                           "cannot be repaired by renaming the key: replace the drafter");
        if (info) *info = di;
        return false;
    }
    const bd_gguf_kv *tl = bd_gguf_find(d, "dflash.target_layers");
    if (!tl) {
        pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                           "drafter lacks the required key 'dflash.target_layers'");
        if (info) *info = di;
        return false;
    }
    bool ok = true;
    if (tl->type != GGUF_VTYPE_ARRAY || tl->arr_count == 0 || tl->arr_count > PAIRING_MAX_TAPS) {
        pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                           "dflash.target_layers must be an integer array of 1..%d entries",
                           PAIRING_MAX_TAPS);
        if (info) *info = di;
        return false;
    }
    di.n_taps = (uint32_t)tl->arr_count;
    for (uint64_t i = 0; i < tl->arr_count; i++) {
        int64_t v;
        if (!bd_gguf_arr_i64(tl, i, &v) || v < 1 || v > 100000) {
            pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                               "dflash.target_layers[%llu] is not a layer index >= 1",
                               (unsigned long long)i);
            if (info) *info = di;
            return false;
        }
        di.target_layers[i] = (int32_t)v;
    }
    if (!bd_gguf_get_u32(d, "dflash.embedding_length", &di.n_embd) || di.n_embd == 0) {
        pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                           "drafter lacks a valid dflash.embedding_length");
        ok = false;
    }
    if (!bd_gguf_get_u32(d, "dflash.block_count", &di.n_layer) || di.n_layer == 0 ||
        di.n_layer > 1024) {
        pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                           "drafter lacks a valid dflash.block_count");
        ok = false;
    }
    di.block_size = 16;
    if (bd_gguf_find(d, "dflash.block_size") &&
        (!bd_gguf_get_u32(d, "dflash.block_size", &di.block_size) || di.block_size < 2 ||
         di.block_size > 256)) {
        pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                           "dflash.block_size must be an integer in 2..256");
        ok = false;
    }
    if (!bd_gguf_get_u32(d, "tokenizer.ggml.mask_token_id", &di.mask_token_id) &&
        !bd_gguf_get_u32(d, "dflash.mask_token_id", &di.mask_token_id)) {
        pairing_report_add(r, "drafter.schema", PAIRING_FAIL,
                           "drafter lacks tokenizer.ggml.mask_token_id");
        ok = false;
    }
    if (ok)
        pairing_report_add(r, "drafter.schema", PAIRING_OK,
                           "arch dflash, %u layers, block size %u, %u taps, mask id %u",
                           di.n_layer, di.block_size, di.n_taps, di.mask_token_id);

    /* Tensor set. Variants with extra machinery the engine does not have
     * are named explicitly instead of failing later with a shape error. */
    if (ok) {
        const char *variant = NULL;
        for (int64_t i = 0; i < bd_gguf_tensor_count(d) && !variant; i++) {
            const char *n = bd_gguf_tensor_at(d, i)->name;
            if (strstr(n, "attn_conv") || strstr(n, "ffn_conv") || !strncmp(n, "selector", 8))
                variant = "DFlash2 (conv/selector tensors)";
            else if (!strncmp(n, "markov_", 7) || !strncmp(n, "conf_proj", 9))
                variant = "DSpark (markov/confidence tensors)";
        }
        char missing[96] = "";
        static const char *const per_layer[] = {"attn_norm", "attn_q", "attn_k", "attn_output",
                                                "attn_q_norm", "attn_k_norm", "ffn_norm",
                                                "ffn_gate", "ffn_up", "ffn_down"};
        if (!has_tensor(d, "fc.weight")) snprintf(missing, sizeof missing, "fc.weight");
        else if (!has_tensor(d, "enc.output_norm.weight"))
            snprintf(missing, sizeof missing, "enc.output_norm.weight");
        else if (!has_tensor(d, "output_norm.weight"))
            snprintf(missing, sizeof missing, "output_norm.weight");
        for (uint32_t l = 0; l < di.n_layer && !missing[0]; l++)
            for (size_t k = 0; k < sizeof per_layer / sizeof per_layer[0]; k++) {
                char nm[96];
                snprintf(nm, sizeof nm, "blk.%u.%s.weight", l, per_layer[k]);
                if (!has_tensor(d, nm)) {
                    snprintf(missing, sizeof missing, "%s", nm);
                    break;
                }
            }
        const bd_gguf_tensor *fc = bd_gguf_find_tensor(d, "fc.weight");
        if (variant) {
            pairing_report_add(r, "drafter.tensors", PAIRING_FAIL,
                               "drafter is a %s variant, which this build cannot run", variant);
            ok = false;
        } else if (missing[0]) {
            pairing_report_add(r, "drafter.tensors", PAIRING_FAIL, "drafter lacks tensor %s",
                               missing);
            ok = false;
        } else if (fc->n_dims != 2 || fc->ne[0] != (uint64_t)di.n_taps * di.n_embd ||
                   fc->ne[1] != di.n_embd) {
            pairing_report_add(r, "drafter.tensors", PAIRING_FAIL,
                               "fc.weight has shape {%llu, %llu}, expected {%llu, %u} "
                               "(%u taps x width %u)",
                               (unsigned long long)fc->ne[0], (unsigned long long)fc->ne[1],
                               (unsigned long long)di.n_taps * di.n_embd, di.n_embd, di.n_taps,
                               di.n_embd);
            ok = false;
        } else {
            pairing_report_add(r, "drafter.tensors", PAIRING_OK,
                               "%lld tensors, fc {%llu, %u}", (long long)bd_gguf_tensor_count(d),
                               (unsigned long long)fc->ne[0], di.n_embd);
        }
    }
    if (info) *info = di;
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

static bool check_tokenizer(const bd_gguf_file *t, const bd_gguf_file *d, pairing_report *r) {
    const bd_gguf_kv *tt = bd_gguf_find(t, "tokenizer.ggml.tokens");
    const bd_gguf_kv *dt = bd_gguf_find(d, "tokenizer.ggml.tokens");
    if (!dt) {
        pairing_report_add(r, "fit.tokenizer", PAIRING_WARN,
                           "drafter carries no tokenizer; assumed to be the target's");
        return true;
    }
    if (!tt) {
        pairing_report_add(r, "fit.tokenizer", PAIRING_FAIL,
                           "drafter has a tokenizer but the target has none");
        return false;
    }
    static const char *const keys[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre"};
    for (size_t k = 0; k < 2; k++) {
        if (same_str(t, d, keys[k]) == 0) {
            char a[64] = "(absent)", b[64] = "(absent)";
            get_name(t, keys[k], a, sizeof a);
            get_name(d, keys[k], b, sizeof b);
            pairing_report_add(r, "fit.tokenizer", PAIRING_FAIL,
                               "%s differs: target '%s', drafter '%s'", keys[k], a, b);
            return false;
        }
    }
    if (tt->type != GGUF_VTYPE_ARRAY || dt->type != GGUF_VTYPE_ARRAY ||
        tt->arr_type != GGUF_VTYPE_STRING || dt->arr_type != GGUF_VTYPE_STRING) {
        pairing_report_add(r, "fit.tokenizer", PAIRING_FAIL,
                           "tokenizer.ggml.tokens is not a string array in both files");
        return false;
    }
    if (tt->arr_count != dt->arr_count) {
        pairing_report_add(r, "fit.tokenizer", PAIRING_FAIL,
                           "vocabularies differ in size: target %llu tokens, drafter %llu",
                           (unsigned long long)tt->arr_count, (unsigned long long)dt->arr_count);
        return false;
    }
    for (uint64_t i = 0; i < tt->arr_count; i++) {
        const char *a, *b;
        uint64_t la, lb;
        if (!bd_gguf_arr_str(tt, i, &a, &la) || !bd_gguf_arr_str(dt, i, &b, &lb) || la != lb ||
            memcmp(a, b, (size_t)la) != 0) {
            pairing_report_add(r, "fit.tokenizer", PAIRING_FAIL,
                               "vocabularies differ at token %llu", (unsigned long long)i);
            return false;
        }
    }
    pairing_report_add(r, "fit.tokenizer", PAIRING_OK, "same tokenizer (%llu tokens)",
                       (unsigned long long)tt->arr_count);
    return true;
}

bool pairing_fit_check(const bd_gguf_file *t, const pairing_target_info *ti, const bd_gguf_file *d,
                       const pairing_drafter_info *di, pairing_report *r) {
    bool ok = true;
    if (di->n_embd != ti->n_embd) {
        pairing_report_add(r, "fit.width", PAIRING_FAIL,
                           "drafter width %u (dflash.embedding_length) does not match the "
                           "target's width %u (%s.embedding_length)",
                           di->n_embd, ti->n_embd, ti->arch);
        ok = false;
    } else {
        pairing_report_add(r, "fit.width", PAIRING_OK, "width %u on both sides", di->n_embd);
    }
    /* GGUF tap g means "input of target layer g"; there is no input of
     * layer n_layer. */
    bool taps_ok = true;
    for (uint32_t i = 0; i < di->n_taps; i++)
        if (di->target_layers[i] < 1 || (uint32_t)di->target_layers[i] >= ti->n_layer) {
            pairing_report_add(r, "fit.layers", PAIRING_FAIL,
                               "dflash.target_layers[%u] = %d is outside the target's layers "
                               "1..%u",
                               i, di->target_layers[i], ti->n_layer - 1);
            taps_ok = ok = false;
            break;
        }
    if (taps_ok) {
        char list[128] = "";
        size_t used = 0;
        for (uint32_t i = 0; i < di->n_taps && used < sizeof list - 12; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? "," : "",
                                     di->target_layers[i]);
        pairing_report_add(r, "fit.layers", PAIRING_OK, "taps [%s] within %u target layers",
                           list, ti->n_layer);
    }
    if (ti->n_vocab == 0) {
        pairing_report_add(r, "fit.mask", PAIRING_WARN,
                           "target vocabulary size unknown; mask id %u not checked",
                           di->mask_token_id);
    } else if (di->mask_token_id >= ti->n_vocab) {
        pairing_report_add(r, "fit.mask", PAIRING_FAIL,
                           "mask id %u is outside the target vocabulary (%llu rows)",
                           di->mask_token_id, (unsigned long long)ti->n_vocab);
        ok = false;
    } else {
        pairing_report_add(r, "fit.mask", PAIRING_OK, "mask id %u < %llu", di->mask_token_id,
                           (unsigned long long)ti->n_vocab);
    }
    if (!check_tokenizer(t, d, r)) ok = false;
    return ok;
}

bool pairing_run(const bd_gguf_file *target, const bd_gguf_file *drafter, pairing_report *r,
                 pairing_drafter_info *dinfo, char *err, size_t errlen) {
    pairing_target_info ti;
    pairing_drafter_info di;
    bool t_ok = true, d_ok = true;
    if (target) t_ok = pairing_target_check(target, &ti, r);
    if (drafter) d_ok = pairing_drafter_check(drafter, &di, r);
    if (target && drafter && t_ok && d_ok) pairing_fit_check(target, &ti, drafter, &di, r);
    if (dinfo && drafter) *dinfo = di;
    const pairing_check *c = pairing_report_first(r, PAIRING_FAIL);
    if (c && c->verdict == PAIRING_FAIL) return bd_err(err, errlen, "%s", c->detail);
    /* pairing_report_first(FAIL) can only return a FAIL check. */
    return true;
}
