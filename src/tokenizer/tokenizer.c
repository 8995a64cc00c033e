/*
 * tokenizer.c - loading a vocabulary (GGUF or plain arrays), the lookup
 * tables, llama.cpp's special-token rules, and the encode driver.
 *
 * Decoding lives in tok_detok.c, the two merge algorithms in tok_bpe.c
 * and tok_spm.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base.h"
#include "tok_internal.h"
#include "unicode.h"


/* ------------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------- */

uint64_t bd_tok_hash(const void *s, size_t n) {
    const uint8_t *p = s;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static const char *tok_text(const bd_tokenizer *t, int32_t id, size_t *len) {
    *len = t->text_len[id];
    return t->text + t->text_off[id];
}

int32_t bd_tok_find(const bd_tokenizer *t, const char *s, size_t n) {
    uint64_t hash = bd_tok_hash(s, n);
    uint32_t h = (uint32_t)hash & t->map_mask, tag = (uint32_t)(hash >> 32);
    for (;;) {
        int32_t id = t->map[h].id;
        if (id < 0) return -1;
        if (t->map[h].tag == tag && t->text_len[id] == n && memcmp(t->text + t->text_off[id], s, n) == 0)
            return id;
        h = (h + 1) & t->map_mask;
    }
}

static int32_t find_z(const bd_tokenizer *t, const char *s) { return bd_tok_find(t, s, strlen(s)); }

void bd_ids_push(bd_ids *o, int32_t id) {
    if (!o->ok) return;
    if (o->n >= (size_t)INT_MAX || !bd_grow(&o->v, &o->cap, o->n + 1, sizeof *o->v)) {
        o->ok = false;
        return;
    }
    o->v[o->n++] = id;
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t p = 16;
    while (p < n && p < (1u << 31)) p <<= 1;
    return p;
}

/* ------------------------------------------------------------------------
 * Construction from plain arrays
 * ---------------------------------------------------------------------- */

void bd_tokenizer_vocab_init(bd_tokenizer_vocab *v) {
    memset(v, 0, sizeof *v);
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->mask = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
    v->add_bos = v->add_eos = v->add_space_prefix = -1;
}

void bd_tokenizer_free(bd_tokenizer *t) {
    if (!t) return;
    free(t->text);
    free(t->text_off);
    free(t->text_len);
    free(t->scores);
    free(t->attr);
    free(t->piece);
    free(t->piece_off);
    free(t->piece_len);
    free(t->map);
    free(t->merges);
    free(t->special);
    free(t->eog);
    free(t);
}

/* Copy the token texts into one arena and build the text -> id map.
 * Empty texts become "[EMPTY_<id>]" like in llama.cpp; a duplicate text is
 * an error (llama.cpp rejects it too). */
static bool build_vocab(bd_tokenizer *t, const bd_tokenizer_vocab *v, char *err, size_t errlen) {
    const int32_t n = v->n_tokens;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!v->tokens[i] && v->token_lens[i]) return bd_err(err, errlen, "token %d has no text", i);
        total += v->token_lens[i] ? v->token_lens[i] : 24;
    }
    if (total >= UINT32_MAX) return bd_err(err, errlen, "vocabulary text too large (%llu bytes)",
                                           (unsigned long long)total);
    t->text = malloc(total + 1);
    t->text_off = malloc((size_t)n * sizeof *t->text_off);
    t->text_len = malloc((size_t)n * sizeof *t->text_len);
    t->map_mask = pow2_at_least((uint64_t)n + n / 2) - 1; // load factor <= 2/3
    t->map = malloc(((size_t)t->map_mask + 1) * sizeof *t->map);
    if (!t->text || !t->text_off || !t->text_len || !t->map) return bd_err(err, errlen, "out of memory");
    for (size_t i = 0; i <= t->map_mask; i++) t->map[i].id = -1;

    uint32_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        uint32_t l = v->token_lens[i];
        if (l) memcpy(t->text + off, v->tokens[i], l);
        else l = (uint32_t)snprintf(t->text + off, 24, "[EMPTY_%d]", i);
        t->text_off[i] = off;
        t->text_len[i] = l;
        off += l;

        uint64_t hash = bd_tok_hash(t->text + t->text_off[i], l);
        uint32_t h = (uint32_t)hash & t->map_mask, tag = (uint32_t)(hash >> 32);
        for (;;) {
            int32_t id = t->map[h].id;
            if (id < 0) {
                t->map[h].id = i;
                t->map[h].tag = tag;
                break;
            }
            if (t->map[h].tag == tag && t->text_len[id] == l &&
                memcmp(t->text + t->text_off[id], t->text + t->text_off[i], l) == 0)
                return bd_err(err, errlen, "duplicate token in vocabulary: '%.*s' has ids %d and %d",
                              (int)(l > 64 ? 64 : l), t->text + t->text_off[i], id, i);
            h = (h + 1) & t->map_mask;
        }
    }
    t->text[off] = 0;
    return true;
}

/* Pair table for the merges "left right" (rank = index). The split is at
 * the first space after the first byte, as in llama.cpp. A merge whose
 * parts or result are not tokens cannot apply in id space and is skipped
 * (llama.cpp would keep it in string space; no well-formed vocabulary has
 * such merges). A repeated pair keeps its first (lowest) rank. */
static bool build_merges(bd_tokenizer *t, const bd_tokenizer_vocab *v, char *err, size_t errlen) {
    if (v->n_merges <= 0) return true;
    if (v->n_merges > INT32_MAX / 4) return bd_err(err, errlen, "too many merges (%lld)", (long long)v->n_merges);
    t->merge_mask = pow2_at_least((uint64_t)v->n_merges + v->n_merges / 2) - 1;
    t->merges = malloc(((size_t)t->merge_mask + 1) * sizeof *t->merges);
    if (!t->merges) return bd_err(err, errlen, "out of memory");
    for (size_t i = 0; i <= t->merge_mask; i++) t->merges[i].key = UINT64_MAX;

    char *cat = NULL;
    size_t cat_cap = 0;
    for (int64_t i = 0; i < v->n_merges; i++) {
        const char *s = v->merges[i];
        size_t len = v->merge_lens[i];
        if (!s || len < 3) continue;
        const char *sp = memchr(s + 1, ' ', len - 1);
        if (!sp) continue;
        size_t ll = (size_t)(sp - s), rl = len - ll - 1;
        int32_t l = bd_tok_find(t, s, ll), r = bd_tok_find(t, sp + 1, rl);
        if (l < 0 || r < 0) continue;
        if (!bd_grow(&cat, &cat_cap, ll + rl, 1)) {
            free(cat);
            return bd_err(err, errlen, "out of memory");
        }
        memcpy(cat, s, ll);
        memcpy(cat + ll, sp + 1, rl);
        int32_t res = bd_tok_find(t, cat, ll + rl);
        if (res < 0) continue;

        uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
        uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & t->merge_mask;
        while (t->merges[h].key != UINT64_MAX && t->merges[h].key != key) h = (h + 1) & t->merge_mask;
        if (t->merges[h].key == UINT64_MAX) {
            t->merges[h].key = key;
            t->merges[h].rank = (int32_t)i;
            t->merges[h].result = res;
        }
    }
    free(cat);
    return true;
}

/* ------------------------------------------------------------------------
 * llama.cpp's special-token rules
 *
 * Besides the ids stored in the file, llama.cpp recognises end-of-turn,
 * end-of-message and FIM tokens by their text when the id key is absent,
 * promotes every token whose text is an end marker to CONTROL and puts it
 * in the end-of-generation set. Qwen's ordinary token 128247 "</s>" is
 * caught by this. llama.cpp walks a hash map (unspecified order) and keeps
 * the first match per role; we take the first text of each list that
 * exists, which gives the same ids for every vocabulary we know of.
 * ---------------------------------------------------------------------- */

static const char *const k_eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
    "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL};
static const char *const k_eom_texts[] = {"<|eom_id|>", NULL};
static const char *const k_fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const k_fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const k_fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const k_fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const k_fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                              "<reponame>", NULL};
static const char *const k_fim_sep_texts[] = {"<|file_sep|>", NULL};
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[", NULL};

static void detect_by_text(bd_tokenizer *t, int32_t *id, const char *const *texts) {
    if (*id >= 0) return;
    for (int k = 0; texts[k]; k++) {
        int32_t f = find_z(t, texts[k]);
        if (f >= 0) {
            *id = f;
            t->attr[f] |= BD_ATTR_CONTROL;
            return;
        }
    }
}

static void eog_add(bd_tokenizer *t, int32_t id) {
    if (id < 0) return;
    for (int32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return;
    t->eog[t->n_eog++] = id; // room reserved by the caller
}

static void eog_remove(bd_tokenizer *t, int32_t id) {
    for (int32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) {
            t->eog[i] = t->eog[--t->n_eog];
            return;
        }
}

static bool eog_has_text(const bd_tokenizer *t, const char *s, int32_t *id) {
    for (int32_t i = 0; i < t->n_eog; i++) {
        size_t l;
        const char *p = tok_text(t, t->eog[i], &l);
        if (l == strlen(s) && memcmp(p, s, l) == 0) {
            if (id) *id = t->eog[i];
            return true;
        }
    }
    return false;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static bool build_special_rules(bd_tokenizer *t, char *err, size_t errlen) {
    detect_by_text(t, &t->eot, k_eot_texts);
    detect_by_text(t, &t->eom, k_eom_texts);
    detect_by_text(t, &t->fim_pre, k_fim_pre_texts);
    detect_by_text(t, &t->fim_suf, k_fim_suf_texts);
    detect_by_text(t, &t->fim_mid, k_fim_mid_texts);
    detect_by_text(t, &t->fim_pad, k_fim_pad_texts);
    detect_by_text(t, &t->fim_rep, k_fim_rep_texts);
    detect_by_text(t, &t->fim_sep, k_fim_sep_texts);

    size_t n_texts = sizeof k_eog_texts / sizeof k_eog_texts[0];
    t->eog = malloc((n_texts + 8) * sizeof *t->eog);
    if (!t->eog) return bd_err(err, errlen, "out of memory");
    eog_add(t, t->fim_pad);
    eog_add(t, t->fim_rep);
    eog_add(t, t->fim_sep);
    for (int k = 0; k_eog_texts[k]; k++) {
        int32_t f = find_z(t, k_eog_texts[k]);
        if (f < 0) continue;
        eog_add(t, f);
        t->attr[f] |= BD_ATTR_CONTROL;
    }
    // gpt-oss: these always render.
    static const char *const always_render[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (int k = 0; always_render[k]; k++) {
        int32_t f = find_z(t, always_render[k]);
        if (f >= 0) t->attr[f] = BD_ATTR_USER_DEFINED;
    }
    eog_add(t, t->eos);
    eog_add(t, t->eot);
    eog_add(t, t->eom);

    // o200k_harmony / solar-open: "<|end|>" is not an end of generation there.
    int32_t end_id = -1;
    bool has_end = eog_has_text(t, "<|end|>", &end_id);
    bool has_return = eog_has_text(t, "<|return|>", NULL);
    bool has_call = eog_has_text(t, "<|call|>", NULL) || eog_has_text(t, "<|calls|>", NULL);
    bool has_flush = eog_has_text(t, "<|flush|>", NULL);
    if ((has_return && has_call && has_end) || (has_call && has_flush && has_end)) {
        eog_remove(t, end_id);
        t->attr[end_id] = BD_ATTR_USER_DEFINED;
    }
    // gemma4 / paddleocr: "</s>" is an ordinary token there.
    int32_t s_id = -1;
    if (eog_has_text(t, "<|tool_response>", NULL) && eog_has_text(t, "</s>", &s_id)) {
        eog_remove(t, s_id);
        t->attr[s_id] = BD_ATTR_NORMAL;
    }
    qsort(t->eog, (size_t)t->n_eog, sizeof *t->eog, cmp_i32);
    return true;
}

/* Tokens matched as whole units in the input: CONTROL, USER_DEFINED and
 * UNKNOWN, longest text first (ties by id, for a deterministic order). */
static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static bool build_special_list(bd_tokenizer *t, char *err, size_t errlen) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->attr[i] & (BD_ATTR_CONTROL | BD_ATTR_USER_DEFINED | BD_ATTR_UNKNOWN)) n++;
    // Sort keys: (UINT32_MAX - length) << 32 | id, ascending.
    uint64_t *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    t->special = malloc((size_t)(n ? n : 1) * sizeof *t->special);
    if (!keys || !t->special) {
        free(keys);
        return bd_err(err, errlen, "out of memory");
    }
    n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->attr[i] & (BD_ATTR_CONTROL | BD_ATTR_USER_DEFINED | BD_ATTR_UNKNOWN))
            keys[n++] = (uint64_t)(UINT32_MAX - t->text_len[i]) << 32 | (uint32_t)i;
    qsort(keys, (size_t)n, sizeof *keys, cmp_u64);
    for (int32_t i = 0; i < n; i++) t->special[i] = (int32_t)(keys[i] & 0xFFFFFFFFu);
    t->n_special = n;
    free(keys);
    return true;
}

static int32_t pick_id(int64_t stored, int32_t dflt, int32_t n_vocab) {
    if (dflt >= n_vocab) dflt = -1;
    if (stored >= 0 && stored < n_vocab) return (int32_t)stored;
    return dflt;
}

static const char k_pre_names[] =
    "qwen2, deepseek-r1-qwen, qwen35, llama3, llama-v3, llama-bpe, falcon3, pixtral, smaug-bpe, dbrx, tekken";

bd_tokenizer *bd_tokenizer_create(const bd_tokenizer_vocab *v, char *err, size_t errlen) {
    if (!v->model) {
        bd_err(err, errlen, "tokenizer.ggml.model is missing");
        return NULL;
    }
    int kind = 0, pre = BD_PRE_NONE;
    bool ignore_merges = false, llama3 = false;
    if (!strcmp(v->model, "gpt2")) {
        kind = BD_TOK_BPE;
        if (!v->pre) {
            bd_err(err, errlen, "gpt2 vocabulary without tokenizer.ggml.pre; supported: %s", k_pre_names);
            return NULL;
        }
        /* the names llama.cpp v0.5.0 maps to these regexes (llama-vocab.cpp);
         * its llama3 family also emits whole-token words unmerged and adds
         * BOS unless the file says otherwise */
        if (!strcmp(v->pre, "qwen2") || !strcmp(v->pre, "deepseek-r1-qwen")) pre = BD_PRE_QWEN2;
        else if (!strcmp(v->pre, "qwen35")) pre = BD_PRE_QWEN35;
        else if (!strcmp(v->pre, "llama3") || !strcmp(v->pre, "llama-v3") || !strcmp(v->pre, "llama-bpe") ||
                 !strcmp(v->pre, "falcon3") || !strcmp(v->pre, "pixtral"))
            pre = BD_PRE_LLAMA3, ignore_merges = llama3 = true;
        else if (!strcmp(v->pre, "smaug-bpe") || !strcmp(v->pre, "dbrx")) pre = BD_PRE_LLAMA3;
        else if (!strcmp(v->pre, "tekken")) /* Mistral Nemo and later: as llama3, whole words, BOS */
            pre = BD_PRE_TEKKEN, ignore_merges = llama3 = true;
        else {
            bd_err(err, errlen, "unknown pre-tokenizer '%.64s' (tokenizer.ggml.pre); supported: %s", v->pre,
                   k_pre_names);
            return NULL;
        }
        if (v->n_merges > 0 && (!v->merges || !v->merge_lens)) {
            bd_err(err, errlen, "gpt2 vocabulary without tokenizer.ggml.merges");
            return NULL;
        }
    } else if (!strcmp(v->model, "llama")) {
        kind = BD_TOK_SPM;
    } else {
        bd_err(err, errlen, "unsupported tokenizer model '%.64s' (tokenizer.ggml.model); supported: gpt2, llama",
               v->model);
        return NULL;
    }
    if (v->n_tokens <= 0 || !v->tokens || !v->token_lens) {
        bd_err(err, errlen, "empty vocabulary (tokenizer.ggml.tokens)");
        return NULL;
    }

    bd_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        bd_err(err, errlen, "out of memory");
        return NULL;
    }
    t->kind = kind;
    t->pre = pre;
    t->ignore_merges = ignore_merges;
    t->n_vocab = v->n_tokens;
    const int32_t n = t->n_vocab;

    if (!build_vocab(t, v, err, errlen)) goto fail;

    t->scores = calloc((size_t)n, sizeof *t->scores);
    t->attr = malloc((size_t)n);
    if (!t->scores || !t->attr) {
        bd_err(err, errlen, "out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < n; i++) {
        if (v->scores) t->scores[i] = v->scores[i];
        int ty = v->types ? v->types[i] : BD_TOKEN_NORMAL;
        switch (ty) {
        case BD_TOKEN_NORMAL: t->attr[i] = BD_ATTR_NORMAL; break;
        case BD_TOKEN_UNKNOWN: t->attr[i] = BD_ATTR_UNKNOWN; break;
        case BD_TOKEN_CONTROL: t->attr[i] = BD_ATTR_CONTROL; break;
        case BD_TOKEN_USER_DEFINED: t->attr[i] = BD_ATTR_USER_DEFINED; break;
        case BD_TOKEN_UNUSED: t->attr[i] = BD_ATTR_UNUSED; break;
        case BD_TOKEN_BYTE: t->attr[i] = BD_ATTR_BYTE; break;
        default: t->attr[i] = 0; break; // UNDEFINED: renders as nothing
        }
    }

    if (kind == BD_TOK_BPE && !build_merges(t, v, err, errlen)) goto fail;

    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        int ul = bd_utf8_encode(bd_gpt2_byte_to_cp((uint8_t)b), u);
        t->byte_tok[b] = bd_tok_find(t, (const char *)u, (size_t)ul);
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->spm_byte[b] = bd_tok_find(t, hex, 6);
    }

    // Defaults when keys are absent (llama.cpp): SPM bos 1 eos 2 unk 0,
    // add_bos, add_space_prefix; gpt2 bos = eos = 11, no add_bos but for
    // the llama3 family.
    const bool spm = kind == BD_TOK_SPM;
    t->bos = pick_id(v->bos, spm ? 1 : 11, n);
    t->eos = pick_id(v->eos, spm ? 2 : 11, n);
    t->unk = pick_id(v->unk, spm ? 0 : -1, n);
    t->eot = pick_id(v->eot, -1, n);
    t->eom = pick_id(v->eom, -1, n);
    t->sep = pick_id(v->sep, -1, n);
    t->pad = pick_id(v->pad, -1, n);
    t->mask = pick_id(v->mask, -1, n);
    t->fim_pre = pick_id(v->fim_pre, -1, n);
    t->fim_suf = pick_id(v->fim_suf, -1, n);
    t->fim_mid = pick_id(v->fim_mid, -1, n);
    t->fim_pad = pick_id(v->fim_pad, -1, n);
    t->fim_rep = pick_id(v->fim_rep, -1, n);
    t->fim_sep = pick_id(v->fim_sep, -1, n);
    t->add_bos = v->add_bos >= 0 ? v->add_bos != 0 : spm || llama3;
    t->add_eos = v->add_eos >= 0 ? v->add_eos != 0 : false;
    t->add_space_prefix = v->add_space_prefix >= 0 ? v->add_space_prefix != 0 : spm;
    if (t->add_bos && t->bos < 0) {
        bd_err(err, errlen, "tokenizer.ggml.add_bos_token is true, but there is no valid bos_token_id");
        goto fail;
    }
    if (t->add_eos && t->eos < 0) {
        bd_err(err, errlen, "tokenizer.ggml.add_eos_token is true, but there is no valid eos_token_id");
        goto fail;
    }

    if (!build_special_rules(t, err, errlen)) goto fail;
    if (!build_special_list(t, err, errlen)) goto fail;
    if (!bd_tok_build_pieces(t)) {
        bd_err(err, errlen, "out of memory");
        goto fail;
    }
    return t;
fail:
    bd_tokenizer_free(t);
    return NULL;
}

/* ------------------------------------------------------------------------
 * Loading from GGUF
 * ---------------------------------------------------------------------- */

/* Stored special ids: absent keys leave *out alone (-1 = absent). */
static void get_id(const bd_gguf_file *f, const char *key, int64_t *out) {
    int64_t v;
    if (bd_gguf_get_i64(f, key, &v)) *out = v;
}

static int get_flag(const bd_gguf_file *f, const char *key) {
    bool b;
    return bd_gguf_get_bool(f, key, &b) ? (int)b : -1;
}

bd_tokenizer *bd_tokenizer_load(const bd_gguf_file *f, char *err, size_t errlen) {
    bd_tokenizer_vocab v;
    bd_tokenizer_vocab_init(&v);
    bd_tokenizer *t = NULL;
    const char **toks = NULL, **merges = NULL;
    uint32_t *tok_lens = NULL, *merge_lens = NULL;
    int32_t *types = NULL;
    float *scores = NULL;

    char model[32], pre[64];
    const char *s;
    uint64_t sl;
    if (!bd_gguf_get_str(f, "tokenizer.ggml.model", &s, &sl)) {
        bd_err(err, errlen, "no tokenizer.ggml.model string in the file");
        return NULL;
    }
    if (sl >= sizeof model) {
        bd_err(err, errlen, "unsupported tokenizer model '%.*s...'", 24, s);
        return NULL;
    }
    memcpy(model, s, sl);
    model[sl] = 0;
    v.model = model;
    if (bd_gguf_get_str(f, "tokenizer.ggml.pre", &s, &sl)) {
        if (sl >= sizeof pre) {
            bd_err(err, errlen, "unknown pre-tokenizer '%.*s...' (tokenizer.ggml.pre)", 48, s);
            return NULL;
        }
        memcpy(pre, s, sl);
        pre[sl] = 0;
        v.pre = pre;
    }

    const bd_gguf_kv *kt = bd_gguf_find(f, "tokenizer.ggml.tokens");
    if (!kt || kt->type != GGUF_VTYPE_ARRAY || kt->arr_type != GGUF_VTYPE_STRING) {
        bd_err(err, errlen, "tokenizer.ggml.tokens is missing or not a string array");
        return NULL;
    }
    if (kt->arr_count == 0 || kt->arr_count > (uint64_t)INT32_MAX / 2) {
        bd_err(err, errlen, "tokenizer.ggml.tokens has %llu entries", (unsigned long long)kt->arr_count);
        return NULL;
    }
    const uint64_t n = kt->arr_count;
    toks = malloc(n * sizeof *toks);
    tok_lens = malloc(n * sizeof *tok_lens);
    if (!toks || !tok_lens) {
        bd_err(err, errlen, "out of memory");
        goto done;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t l;
        if (!bd_gguf_arr_str(kt, i, &toks[i], &l) || l > (1u << 30)) {
            bd_err(err, errlen, "tokenizer.ggml.tokens[%llu] is unreadable or too long", (unsigned long long)i);
            goto done;
        }
        tok_lens[i] = (uint32_t)l;
    }
    v.n_tokens = (int32_t)n;
    v.tokens = toks;
    v.token_lens = tok_lens;

    const bd_gguf_kv *ky = bd_gguf_find(f, "tokenizer.ggml.token_type");
    if (ky) {
        if (ky->type != GGUF_VTYPE_ARRAY || ky->arr_count < n) {
            bd_err(err, errlen, "tokenizer.ggml.token_type is not an array of %llu integers", (unsigned long long)n);
            goto done;
        }
        types = malloc(n * sizeof *types);
        if (!types) {
            bd_err(err, errlen, "out of memory");
            goto done;
        }
        for (uint64_t i = 0; i < n; i++) {
            int64_t x;
            if (!bd_gguf_arr_i64(ky, i, &x)) {
                bd_err(err, errlen, "tokenizer.ggml.token_type[%llu] is not an integer", (unsigned long long)i);
                goto done;
            }
            types[i] = (x >= 0 && x <= 6) ? (int32_t)x : 0;
        }
        v.types = types;
    }

    const bd_gguf_kv *ks = bd_gguf_find(f, "tokenizer.ggml.scores");
    if (ks) {
        if (ks->type != GGUF_VTYPE_ARRAY || ks->arr_count < n ||
            (ks->arr_type != GGUF_VTYPE_FLOAT32 && ks->arr_type != GGUF_VTYPE_INT32)) {
            bd_err(err, errlen, "tokenizer.ggml.scores is not an f32/i32 array of %llu entries",
                   (unsigned long long)n);
            goto done;
        }
        scores = malloc(n * sizeof *scores);
        if (!scores) {
            bd_err(err, errlen, "out of memory");
            goto done;
        }
        for (uint64_t i = 0; i < n; i++) {
            double x;
            if (!bd_gguf_arr_f64(ks, i, &x)) x = 0;
            scores[i] = (float)x;
        }
        v.scores = scores;
    }

    const bd_gguf_kv *km = bd_gguf_find(f, "tokenizer.ggml.merges");
    if (km) {
        if (km->type != GGUF_VTYPE_ARRAY || km->arr_type != GGUF_VTYPE_STRING ||
            km->arr_count > (uint64_t)INT32_MAX / 4) {
            bd_err(err, errlen, "tokenizer.ggml.merges is not a string array");
            goto done;
        }
        uint64_t nm = km->arr_count;
        merges = malloc((nm ? nm : 1) * sizeof *merges);
        merge_lens = malloc((nm ? nm : 1) * sizeof *merge_lens);
        if (!merges || !merge_lens) {
            bd_err(err, errlen, "out of memory");
            goto done;
        }
        for (uint64_t i = 0; i < nm; i++) {
            uint64_t l;
            if (!bd_gguf_arr_str(km, i, &merges[i], &l) || l > (1u << 30)) {
                bd_err(err, errlen, "tokenizer.ggml.merges[%llu] is unreadable", (unsigned long long)i);
                goto done;
            }
            merge_lens[i] = (uint32_t)l;
        }
        v.n_merges = (int64_t)nm;
        v.merges = merges;
        v.merge_lens = merge_lens;
    } else if (!strcmp(model, "gpt2")) {
        bd_err(err, errlen, "gpt2 vocabulary without tokenizer.ggml.merges");
        goto done;
    }

    get_id(f, "tokenizer.ggml.bos_token_id", &v.bos);
    get_id(f, "tokenizer.ggml.eos_token_id", &v.eos);
    get_id(f, "tokenizer.ggml.eot_token_id", &v.eot);
    get_id(f, "tokenizer.ggml.eom_token_id", &v.eom);
    get_id(f, "tokenizer.ggml.unknown_token_id", &v.unk);
    get_id(f, "tokenizer.ggml.seperator_token_id", &v.sep);
    get_id(f, "tokenizer.ggml.padding_token_id", &v.pad);
    get_id(f, "tokenizer.ggml.mask_token_id", &v.mask);
    get_id(f, "tokenizer.ggml.prefix_token_id", &v.fim_pre); // deprecated names first,
    get_id(f, "tokenizer.ggml.suffix_token_id", &v.fim_suf); // the new ones override
    get_id(f, "tokenizer.ggml.middle_token_id", &v.fim_mid);
    get_id(f, "tokenizer.ggml.fim_pre_token_id", &v.fim_pre);
    get_id(f, "tokenizer.ggml.fim_suf_token_id", &v.fim_suf);
    get_id(f, "tokenizer.ggml.fim_mid_token_id", &v.fim_mid);
    get_id(f, "tokenizer.ggml.fim_pad_token_id", &v.fim_pad);
    get_id(f, "tokenizer.ggml.fim_rep_token_id", &v.fim_rep);
    get_id(f, "tokenizer.ggml.fim_sep_token_id", &v.fim_sep);
    v.add_bos = get_flag(f, "tokenizer.ggml.add_bos_token");
    v.add_eos = get_flag(f, "tokenizer.ggml.add_eos_token");
    v.add_space_prefix = get_flag(f, "tokenizer.ggml.add_space_prefix");

    t = bd_tokenizer_create(&v, err, errlen);
done:
    free(toks);
    free(tok_lens);
    free(types);
    free(scores);
    free(merges);
    free(merge_lens);
    return t;
}

/* ------------------------------------------------------------------------
 * Accessors
 * ---------------------------------------------------------------------- */

int32_t bd_tokenizer_n_vocab(const bd_tokenizer *t) { return t->n_vocab; }
int32_t bd_tokenizer_bos(const bd_tokenizer *t) { return t->bos; }
int32_t bd_tokenizer_eos(const bd_tokenizer *t) { return t->eos; }
int32_t bd_tokenizer_eot(const bd_tokenizer *t) { return t->eot; }
int32_t bd_tokenizer_pad(const bd_tokenizer *t) { return t->pad; }
bool bd_tokenizer_add_bos(const bd_tokenizer *t) { return t->add_bos; }
bool bd_tokenizer_add_eos(const bd_tokenizer *t) { return t->add_eos; }

bool bd_tokenizer_is_eog(const bd_tokenizer *t, int32_t id) {
    if (id < 0) return false;
    return bsearch(&id, t->eog, (size_t)t->n_eog, sizeof *t->eog, cmp_i32) != NULL;
}

int bd_tokenizer_token_type(const bd_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return -1;
    uint8_t a = t->attr[id];
    if (a & BD_ATTR_CONTROL) return BD_TOKEN_CONTROL;
    if (a & BD_ATTR_USER_DEFINED) return BD_TOKEN_USER_DEFINED;
    if (a & BD_ATTR_UNKNOWN) return BD_TOKEN_UNKNOWN;
    if (a & BD_ATTR_BYTE) return BD_TOKEN_BYTE;
    if (a & BD_ATTR_UNUSED) return BD_TOKEN_UNUSED;
    if (a & BD_ATTR_NORMAL) return BD_TOKEN_NORMAL;
    return BD_TOKEN_UNDEFINED;
}

const char *bd_tokenizer_token_text(const bd_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    return tok_text(t, id, len);
}

/* ------------------------------------------------------------------------
 * Encoding
 * ---------------------------------------------------------------------- */

/* A piece of the input: raw text (id < 0) or an already matched token. */
typedef struct frag {
    int32_t id;
    size_t off, len;
} frag;

typedef struct frags {
    frag *v;
    size_t n, cap;
} frags;

static bool frags_push(frags *f, int32_t id, size_t off, size_t len) {
    if (!bd_grow(&f->v, &f->cap, f->n + 1, sizeof *f->v)) return false;
    f->v[f->n++] = (frag){id, off, len};
    return true;
}

/* Sorted, merged guard ranges ([lo, hi) pairs) for encode_guarded. */
typedef struct guards {
    size_t *r; /* [2 * n] */
    size_t n;
} guards;

static int range_cmp(const void *a, const void *b) {
    const size_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static bool guards_make(guards *g, const size_t *in, size_t n, size_t len) {
    g->n = 0;
    g->r = NULL;
    if (n == 0) return true;
    if (n > SIZE_MAX / (2 * sizeof(size_t))) return false;
    g->r = malloc(2 * n * sizeof(size_t));
    if (!g->r) return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t lo = in[2 * i], hi = in[2 * i + 1];
        if (hi > len) hi = len;
        if (lo >= hi) continue;
        g->r[2 * k] = lo;
        g->r[2 * k + 1] = hi;
        k++;
    }
    qsort(g->r, k, 2 * sizeof(size_t), range_cmp);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && g->r[2 * i] <= g->r[2 * m - 1]) {
            if (g->r[2 * i + 1] > g->r[2 * m - 1]) g->r[2 * m - 1] = g->r[2 * i + 1];
        } else {
            g->r[2 * m] = g->r[2 * i];
            g->r[2 * m + 1] = g->r[2 * i + 1];
            m++;
        }
    }
    g->n = m;
    return true;
}

/* Whether [at, at + n) intersects a guard range. */
static bool guarded(const guards *g, size_t at, size_t n) {
    size_t lo = 0, hi = g->n; /* first range with end > at */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g->r[2 * mid + 1] <= at) lo = mid + 1;
        else hi = mid;
    }
    return lo < g->n && g->r[2 * lo] < at + n;
}

/* Cut every occurrence of each special text out of the raw fragments,
 * one special token at a time, longest first (llama.cpp's
 * tokenizer_st_partition). With g, CONTROL/UNKNOWN occurrences that touch
 * a guard range are skipped (left as text). */
static bool partition_specials(const bd_tokenizer *t, const char *text, bool parse_special, const guards *g,
                               frags *cur) {
    frags next = {0};
    bool ok = true;
    for (int32_t k = 0; k < t->n_special && ok; k++) {
        int32_t id = t->special[k];
        bool ctl = (t->attr[id] & (BD_ATTR_CONTROL | BD_ATTR_UNKNOWN)) != 0;
        if (!parse_special && ctl) continue;
        const guards *gk = ctl && g && g->n ? g : NULL;
        size_t sl;
        const char *st = tok_text(t, id, &sl);
        // Cheap check first: most special texts do not occur at all.
        bool any = false;
        for (size_t i = 0; i < cur->n && !any; i++)
            if (cur->v[i].id < 0 && cur->v[i].len >= sl && memmem(text + cur->v[i].off, cur->v[i].len, st, sl))
                any = true;
        if (!any) continue;
        next.n = 0;
        for (size_t i = 0; i < cur->n && ok; i++) {
            frag f = cur->v[i];
            if (f.id >= 0) {
                ok = frags_push(&next, f.id, 0, 0);
                continue;
            }
            size_t pos = f.off, end = f.off + f.len;
            size_t from = pos; /* search start; pos: start of the pending text */
            while (ok && from < end) {
                const char *m = memmem(text + from, end - from, st, sl);
                if (!m) break;
                size_t at = (size_t)(m - text);
                if (gk && guarded(gk, at, sl)) { /* user text: not a token */
                    from = at + 1;
                    continue;
                }
                if (at > pos) ok = frags_push(&next, -1, pos, at - pos);
                if (ok) ok = frags_push(&next, id, 0, 0);
                pos = from = at + sl;
            }
            if (ok && pos < end) ok = frags_push(&next, -1, pos, end - pos);
        }
        frags tmp = *cur;
        *cur = next;
        next = tmp;
    }
    free(next.v);
    return ok;
}

/* SPM fragment: optional leading space, spaces -> U+2581. */
static void spm_fragment(const bd_tokenizer *t, const char *s, size_t n, bool prefix, bd_ids *out) {
    size_t spaces = prefix ? 1 : 0;
    for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
    if (n > SIZE_MAX / 4) {
        out->ok = false;
        return;
    }
    uint8_t *buf = malloc(n + 2 * spaces + 1);
    if (!buf) {
        out->ok = false;
        return;
    }
    size_t m = 0;
    static const uint8_t lower_one_eighth_block[3] = {0xE2, 0x96, 0x81}; // U+2581
    if (prefix) {
        memcpy(buf, lower_one_eighth_block, 3);
        m = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(buf + m, lower_one_eighth_block, 3);
            m += 3;
        } else {
            buf[m++] = (uint8_t)s[i];
        }
    }
    bd_tok_spm_fragment(t, buf, m, out);
    free(buf);
}

static int encode(const bd_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                  const guards *g, int32_t *out, int max_out) {
    frags fr = {0};
    bd_ids ids = {.ok = true};
    int ret = INT32_MIN;
    if (len > 0 && (!frags_push(&fr, -1, 0, len) || !partition_specials(t, text, parse_special, g, &fr)))
        goto done;

    if (add_special && t->add_bos) bd_ids_push(&ids, t->bos);
    bool prev_special = true; // SPM: the first text fragment gets the space prefix
    for (size_t i = 0; i < fr.n && ids.ok; i++) {
        const frag *f = &fr.v[i];
        if (f->id >= 0) {
            bd_ids_push(&ids, f->id);
            prev_special = true;
        } else if (t->kind == BD_TOK_BPE) {
            bd_tok_bpe_fragment(t, (const uint8_t *)text + f->off, f->len, &ids);
        } else {
            spm_fragment(t, text + f->off, f->len, t->add_space_prefix && prev_special, &ids);
            prev_special = false;
        }
    }
    if (add_special && t->add_eos) bd_ids_push(&ids, t->eos);

    if (!ids.ok || ids.n > (size_t)INT_MAX) goto done;
    if (max_out < 0 || ids.n > (size_t)max_out) {
        ret = -(int)ids.n;
        goto done;
    }
    if (ids.n) memcpy(out, ids.v, ids.n * sizeof *out);
    ret = (int)ids.n;
done:
    free(fr.v);
    free(ids.v);
    return ret;
}

int bd_tokenizer_encode(const bd_tokenizer *t, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t *out, int max_out) {
    return encode(t, text, len, add_special, parse_special, NULL, out, max_out);
}

int bd_tokenizer_encode_guarded(const bd_tokenizer *t, const char *text, size_t len, bool add_special,
                                const size_t *guard, size_t n_guard, int32_t *out, int max_out) {
    guards g;
    if (!guards_make(&g, guard, n_guard, len)) return INT32_MIN;
    int r = encode(t, text, len, add_special, true, &g, out, max_out);
    free(g.r);
    return r;
}
