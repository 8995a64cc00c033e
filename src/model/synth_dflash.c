/*
 * synth_dflash.c - see synth_dflash.h for what is built and why it works.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "synth_dflash.h"

#define PI_F 3.14159265358979f

typedef struct {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r) { return bd_splitmix64(&r->s); }

static float rng_normal(rng *r) {
    double u1 = ((rng_next(r) >> 11) + 1) * 0x1.0p-53, u2 = (rng_next(r) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Add one tensor of floats, converted to `type` row by row. */
static bool add_tensor(bd_gguf_writer *w, const char *name, uint32_t type, int64_t ne0, int64_t ne1,
                       const float *vals, char *err, size_t errlen) {
    uint64_t row = 0;
    if (!bd_row_size(type, ne0, &row)) return bd_err(err, errlen, "%s: width %lld does not fit type %s", name,
                                                     (long long)ne0, bd_type_name(type));
    uint8_t *buf = malloc(row * (uint64_t)ne1);
    if (!buf) return bd_err(err, errlen, "out of memory");
    for (int64_t r = 0; r < ne1; r++)
        if (!bd_quantize_row(type, vals + r * ne0, buf + (uint64_t)r * row, ne0)) {
            free(buf);
            return bd_err(err, errlen, "%s: cannot quantize to %s", name, bd_type_name(type));
        }
    uint64_t ne[2] = {(uint64_t)ne0, (uint64_t)ne1};
    bool ok = bd_gguf_writer_add_tensor(w, name, type, ne1 == 1 ? 1 : 2, ne, buf, row * (uint64_t)ne1);
    free(buf);
    return ok ? true : bd_err(err, errlen, "%s: cannot add tensor", name);
}

static float *alloc_f(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static void fill_random(rng *r, float *v, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) v[i] = scale * rng_normal(r);
}

static void fill_const(float *v, size_t n, float c) {
    for (size_t i = 0; i < n; i++) v[i] = c;
}

static float dotf(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return (float)s;
}

/* ------------------------------------------------------------------------
 * The target, read straight from its GGUF: the drafter needs its widths, its
 * layer count, its tokenizer and (constructed drafters) rows of its
 * embedding and output matrices. Reading the file instead of loading the
 * model lets drafters be made for archs the engine does not run (yet).
 * ---------------------------------------------------------------------- */

typedef struct target_info {
    bd_gguf_file *f;
    char arch[32];
    bool hybrid;                 /* qwen35 / qwen35moe / qwen3next */
    bool mrope;                  /* qwen35 / qwen35moe: IMROPE sections */
    bool moe;
    int64_t n_embd, n_layer;     /* n_layer: trunk layers (block_count - nextn_predict_layers) */
    int64_t n_head, n_kv, hd, n_ff, n_vocab, n_ctx;
    const bd_gguf_tensor *emb;   /* token_embd [n_vocab][n_embd] */
    const bd_gguf_tensor *out;   /* output, or token_embd when tied */
    uint64_t emb_row, out_row;   /* row bytes */
} target_info;

static bool key_u32(const target_info *ti, const char *key, uint32_t *v) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", ti->arch, key);
    return bd_gguf_get_u32(ti->f, k, v);
}

static bool check_matrix(const bd_gguf_tensor *t, int64_t ne0, uint64_t *row_bytes, char *err, size_t errlen) {
    if (t->n_dims != 2 || (int64_t)t->ne[0] != ne0 || t->ne[1] < 2 || t->ne[1] > INT32_MAX)
        return bd_err(err, errlen, "target tensor %s has shape {%llu, %llu}, want {%lld, n_vocab}", t->name,
                      (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (long long)ne0);
    if (!bd_row_size(t->type, ne0, row_bytes) || *row_bytes * t->ne[1] > t->nbytes)
        return bd_err(err, errlen, "target tensor %s: type %s does not fit its shape", t->name,
                      bd_type_name(t->type));
    return true;
}

static bool target_open(const char *path, target_info *ti, char *err, size_t errlen) {
    memset(ti, 0, sizeof *ti);
    ti->f = bd_gguf_open(path, err, errlen);
    if (!ti->f) return false;
    if (!bd_gguf_get_strz(ti->f, "general.architecture", ti->arch, sizeof ti->arch))
        return bd_err(err, errlen, "%s: no general.architecture", path);
    if (!strcmp(ti->arch, "dflash") || !strcmp(ti->arch, "dflash-draft"))
        return bd_err(err, errlen, "%s is a drafter, not a target", path);
    if (strcmp(ti->arch, "qwen3") && strcmp(ti->arch, "llama") && strcmp(ti->arch, "qwen2") &&
        strcmp(ti->arch, "qwen3moe") && strcmp(ti->arch, "qwen35") && strcmp(ti->arch, "qwen35moe") &&
        strcmp(ti->arch, "qwen3next"))
        return bd_err(err, errlen,
                      "%s: target arch '%s' not supported (qwen3, llama, qwen2, qwen3moe, qwen35, qwen35moe, "
                      "qwen3next)", path, ti->arch);
    ti->mrope = !strncmp(ti->arch, "qwen35", 6);
    ti->hybrid = ti->mrope || !strcmp(ti->arch, "qwen3next");
    ti->moe = !strcmp(ti->arch, "qwen35moe") || !strcmp(ti->arch, "qwen3moe") || !strcmp(ti->arch, "qwen3next");
    uint32_t e = 0, bc = 0, nh = 0, nkv = 0, hd = 0, ff = 0, nextn = 0, ctx = 40960;
    if (!key_u32(ti, "embedding_length", &e) || !key_u32(ti, "block_count", &bc) ||
        !key_u32(ti, "attention.head_count", &nh) || e == 0 || bc == 0 || nh == 0)
        return bd_err(err, errlen, "%s: missing or zero %s.embedding_length/block_count/attention.head_count",
                      path, ti->arch);
    nkv = nh;
    key_u32(ti, "attention.head_count_kv", &nkv);
    hd = e / nh;
    key_u32(ti, "attention.key_length", &hd);
    key_u32(ti, "nextn_predict_layers", &nextn);
    key_u32(ti, "context_length", &ctx);
    if (!ti->moe && !key_u32(ti, "feed_forward_length", &ff))
        return bd_err(err, errlen, "%s: no %s.feed_forward_length", path, ti->arch);
    if (nextn >= bc)
        return bd_err(err, errlen, "%s: nextn_predict_layers %u leaves no trunk layer of %u", path, nextn, bc);
    if (nkv == 0 || nh % nkv || hd == 0)
        return bd_err(err, errlen, "%s: bad attention heads (%u / %u of %u)", path, nh, nkv, hd);
    ti->n_embd = e;
    ti->n_layer = bc - nextn;
    ti->n_head = nh;
    ti->n_kv = nkv;
    ti->hd = hd;
    ti->n_ff = ff;
    ti->n_ctx = ctx;
    ti->emb = bd_gguf_find_tensor(ti->f, "token_embd.weight");
    if (!ti->emb) return bd_err(err, errlen, "%s: no token_embd.weight", path);
    if (!check_matrix(ti->emb, e, &ti->emb_row, err, errlen)) return false;
    ti->n_vocab = (int64_t)ti->emb->ne[1];
    ti->out = bd_gguf_find_tensor(ti->f, "output.weight");
    if (ti->out) {
        if (!check_matrix(ti->out, e, &ti->out_row, err, errlen)) return false;
        if ((int64_t)ti->out->ne[1] != ti->n_vocab)
            return bd_err(err, errlen, "%s: output.weight has %llu rows, token_embd %lld", path,
                          (unsigned long long)ti->out->ne[1], (long long)ti->n_vocab);
    } else {
        ti->out = ti->emb;
        ti->out_row = ti->emb_row;
    }
    return true;
}

static void target_close(target_info *ti) {
    bd_gguf_close(ti->f);
    memset(ti, 0, sizeof *ti);
}

static bool target_row(const target_info *ti, bool output, int64_t row, float *dst) {
    const bd_gguf_tensor *t = output ? ti->out : ti->emb;
    uint64_t rb = output ? ti->out_row : ti->emb_row;
    if (row < 0 || row >= ti->n_vocab) return false;
    return bd_dequantize_row(t->type, (const uint8_t *)t->data + (uint64_t)row * rb, dst, ti->n_embd);
}

static int32_t argmax_logits(const target_info *ti, const float *x, float *row_buf) {
    int32_t best = -1;
    float bv = -INFINITY;
    for (int64_t u = 0; u < ti->n_vocab; u++) {
        target_row(ti, true, u, row_buf);
        float v = dotf(row_buf, x, ti->n_embd);
        if (v > bv) {
            bv = v;
            best = (int32_t)u;
        }
    }
    return best;
}

/* Drafter sizes of the published DFlash drafters for hybrid targets
 * (dflash.md section 1.2, from the drafters' config.json / SpecForge):
 * matched by the target's width and MoE-ness. */
typedef struct drafter_size {
    int64_t target_embd;
    bool moe;
    int layers, n_head, n_kv, hd, n_ff;
    const char *source;
} drafter_size;

static const drafter_size published[] = {
    {2560, false, 5, 32, 8, 128, 9728, "z-lab/Qwen3.5-4B-DFlash"},
    /* no published 9B drafter config in the reference: Qwen3-8B-DFlash's
     * attention and the target's FFN width, an assumption */
    {4096, false, 5, 32, 8, 128, 12288, "assumed (Qwen3-8B-DFlash-like)"},
    {5120, false, 5, 32, 8, 128, 17408, "z-lab/Qwen3.6-27B-DFlash"},
    {2048, true, 8, 32, 4, 128, 6144, "z-lab/Qwen3.5-35B-A3B-DFlash"},
};

/* Parse the SWA pattern: n comma-separated 0/1 flags. */
static bool parse_flags(const char *spec, int n, uint8_t *out, char *err, size_t errlen) {
    int k = 0;
    for (const char *c = spec;;) {
        if ((*c != '0' && *c != '1') || (c[1] != ',' && c[1] != '\0'))
            return bd_err(err, errlen, "--swa-pattern: expected comma-separated 0/1 flags, got '%.64s'", spec);
        if (k == n) return bd_err(err, errlen, "--swa-pattern: more than %d flags (one per drafter layer)", n);
        out[k++] = *c == '1';
        if (c[1] == '\0') break;
        c += 2;
    }
    if (k != n) return bd_err(err, errlen, "--swa-pattern: %d flags for %d drafter layers", k, n);
    return true;
}

bool bd_synth_dflash_write(const bd_synth_dflash_opts *o, const char *path, char *err, size_t errlen) {
    target_info ti;
    bool ok = false;
    bd_gguf_writer *w = NULL;
    float *buf = NULL, *x0 = NULL, *xm = NULL, *w0 = NULL, *v = NULL, *tmp = NULL;
    uint8_t swa[64] = {0};
    if (!target_open(o->target_path, &ti, err, errlen)) goto done;
    /* Drafter sizes: qwen3/llama/qwen3moe targets get the target's own
     * attention and FFN widths (feed_forward_length; 3 x width for a MoE
     * file without one); hybrid targets the published drafter of their
     * width, else (test shapes) heads of 64 lanes (128 from width 1024),
     * half as many KV heads, and the target's FFN width (3 x width for MoE). */
    int64_t NH = ti.n_head, NKV = ti.n_kv, HD = ti.hd, FF = ti.n_ff ? ti.n_ff : 3 * ti.n_embd, L_def = 5;
    if (ti.hybrid) {
        const drafter_size *ds = NULL;
        for (size_t i = 0; i < sizeof published / sizeof published[0]; i++)
            if (published[i].target_embd == ti.n_embd && published[i].moe == ti.moe) ds = &published[i];
        if (ds) {
            NH = ds->n_head, NKV = ds->n_kv, HD = ds->hd, FF = ds->n_ff, L_def = ds->layers;
        } else {
            HD = ti.n_embd >= 1024 ? 128 : 64;
            NH = ti.n_embd / HD > 2 ? ti.n_embd / HD : 2;
            NKV = NH / 2;
            FF = ti.moe ? 3 * ti.n_embd : ti.n_ff;
        }
    }
    const int64_t E = ti.n_embd, L = o->n_layer > 0 ? o->n_layer : L_def;
    const int64_t Q = NH * HD, KV = NKV * HD;
    const int B = o->block_size > 0 ? o->block_size : 16;
    /* taps must be trunk layers: MTP blocks are not run by the trunk */
    const int64_t Lt = ti.n_layer;
    int K = o->n_taps > 0 ? o->n_taps : (int)(Lt - 1 < 5 ? Lt - 1 : 5);
    if (K < 1 || K > Lt - 1 || K > BD_MAX_TAPS) {
        bd_err(err, errlen, "target has %lld trunk layers: cannot tap %d of them", (long long)Lt, K);
        goto done;
    }
    if (o->constructed && HD < 16) {
        bd_err(err, errlen, "constructed drafters need a head dim >= 16 (target has %lld)", (long long)HD);
        goto done;
    }
    if (L > (int64_t)sizeof swa) {
        bd_err(err, errlen, "at most %d drafter layers", (int)sizeof swa);
        goto done;
    }
    if (o->swa_window) {
        if (o->swa_pattern) {
            if (!parse_flags(o->swa_pattern, (int)L, swa, err, errlen)) goto done;
        } else {
            memset(swa, 1, (size_t)L);
        }
    } else if (o->swa_pattern) {
        bd_err(err, errlen, "--swa-pattern needs --swa W");
        goto done;
    }
    int32_t taps[BD_MAX_TAPS];
    for (int i = 0; i < K; i++) {
        if (Lt >= 8 && K > 1) /* the reference's spread: HF id round(1 + i(L-4)/(K-1)), +1 for GGUF */
            taps[i] = (int32_t)lround(1.0 + (double)i * (double)(Lt - 4) / (double)(K - 1)) + 1;
        else
            taps[i] = i + 1;
    }
    int64_t mask_def = ti.n_vocab > 151669 ? 151669 : ti.n_vocab - 1;
    if (ti.hybrid && ti.n_vocab > 248070) mask_def = 248070; /* Qwen3.5/3.6 drafters' mask token */
    int32_t mask = o->mask_id >= 0 ? o->mask_id : (int32_t)mask_def;
    if (mask <= 0 || mask >= ti.n_vocab) {
        bd_err(err, errlen, "mask id %d outside the vocabulary (1..%lld)", mask, (long long)ti.n_vocab - 1);
        goto done;
    }
    /* rope: pair j = n_rot/16 turns by pi/B per position when base = (B/pi)^(n_rot/(2j)) = (B/pi)^8 */
    const int64_t pair = HD / 16;
    float base = o->constructed ? powf((float)B / PI_F, 8.0f) : ti.hybrid ? 1e7f : 1e6f;

    w = bd_gguf_writer_create();
    if (!w) {
        bd_err(err, errlen, "out of memory");
        goto done;
    }
    bool kv_ok = bd_gguf_writer_set_str(w, "general.architecture", "dflash") &&
                 bd_gguf_writer_set_str(w, "general.name", o->constructed ? "blockdraft constructed dflash drafter"
                                                                       : "blockdraft random dflash drafter") &&
                 bd_gguf_writer_set_u32(w, "dflash.block_count", (uint32_t)L) &&
                 bd_gguf_writer_set_u32(w, "dflash.context_length", ti.hybrid ? (uint32_t)ti.n_ctx : 40960) &&
                 bd_gguf_writer_set_u32(w, "dflash.embedding_length", (uint32_t)E) &&
                 bd_gguf_writer_set_u32(w, "dflash.feed_forward_length", (uint32_t)FF) &&
                 bd_gguf_writer_set_u32(w, "dflash.attention.head_count", (uint32_t)NH) &&
                 bd_gguf_writer_set_u32(w, "dflash.attention.head_count_kv", (uint32_t)NKV) &&
                 bd_gguf_writer_set_u32(w, "dflash.attention.key_length", (uint32_t)HD) &&
                 bd_gguf_writer_set_u32(w, "dflash.attention.value_length", (uint32_t)HD) &&
                 bd_gguf_writer_set_f32(w, "dflash.attention.layer_norm_rms_epsilon", 1e-6f) &&
                 bd_gguf_writer_set_f32(w, "dflash.rope.freq_base", base) &&
                 bd_gguf_writer_set_u32(w, "dflash.rope.dimension_count", (uint32_t)HD) &&
                 bd_gguf_writer_set_u32(w, "dflash.block_size", (uint32_t)B) &&
                 bd_gguf_writer_set_arr(w, "dflash.target_layers", GGUF_VTYPE_INT32, taps, (uint64_t)K) &&
                 bd_gguf_writer_set_u32(w, "general.file_type", 0);
    if (kv_ok && ti.mrope) {
        /* the converter's degenerate M-RoPE sections for drafters of M-RoPE
         * targets: every pair in section 0, numerically NEOX */
        int32_t sec[4] = {(int32_t)(HD / 2), 0, 0, 0};
        kv_ok = bd_gguf_writer_set_arr(w, "dflash.rope.dimension_sections", GGUF_VTYPE_INT32, sec, 4);
    }
    if (kv_ok && o->swa_window)
        kv_ok = bd_gguf_writer_set_u32(w, "dflash.attention.sliding_window", o->swa_window) &&
                bd_gguf_writer_set_arr(w, "dflash.attention.sliding_window_pattern", GGUF_VTYPE_BOOL, swa,
                                       (uint64_t)L);
    for (int64_t i = 0; kv_ok && i < bd_gguf_kv_count(ti.f); i++) {
        const bd_gguf_kv *kv = bd_gguf_kv_at(ti.f, i);
        if (!strncmp(kv->key, "tokenizer.", 10) && strcmp(kv->key, "tokenizer.ggml.mask_token_id"))
            kv_ok = bd_gguf_writer_copy_kv(w, kv);
    }
    kv_ok = kv_ok && bd_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", (uint32_t)mask);
    if (!kv_ok) {
        bd_err(err, errlen, "cannot build drafter metadata");
        goto done;
    }

    size_t big = (size_t)(FF * E > Q * E ? FF * E : Q * E);
    if ((size_t)(K * E * E) > big) big = (size_t)(K * E * E);
    buf = alloc_f(big);
    x0 = alloc_f((size_t)E);
    xm = alloc_f((size_t)E);
    w0 = alloc_f((size_t)E);
    v = alloc_f((size_t)E);
    tmp = alloc_f((size_t)E);
    if (!buf || !x0 || !xm || !w0 || !v || !tmp) {
        bd_err(err, errlen, "out of memory");
        goto done;
    }
    rng r = {o->seed * 0x2545f4914f6cdd1dull + 17};
    uint32_t wt = o->weight_type;
    /* The crafted layer-0 matrices take the file's type too, so that a
     * constructed drafter costs what a published one does (those are Q8_0
     * throughout; F32 here made layer 0's attention four times the bytes and
     * charged that to every draft). 8-bit quantization keeps the construction:
     * zero rows stay exactly zero, and the crafted rows' relative error
     * (~1/254 per element) is far inside the margins built below (scores at
     * least 25 from the boundary, the output row scaled by 1000). Types
     * narrower than 8 bits would not be, so those keep F32 for it. */
    const uint32_t wt_craft = (wt == BD_TYPE_Q8_0 || wt == BD_TYPE_F16 || wt == BD_TYPE_BF16) ? wt : BD_TYPE_F32;
    char name[64];

    /* anchor (token 0) and mask rows as the drafter's layer 0 sees them:
     * RMSNorm(E[t]) * attn_norm, attn_norm = 1 */
    if (o->constructed) {
        target_row(&ti, false, 0, tmp);
        bd_rmsnorm(x0, tmp, NULL, E, 1e-6f);
        target_row(&ti, false, mask, tmp);
        bd_rmsnorm(xm, tmp, NULL, E, 1e-6f);
        target_row(&ti, true, 0, w0);
        /* v = x0 with its component along xm removed: v.xm = 0, v.x0 > 0 */
        float mm = dotf(xm, xm, E), c = dotf(x0, xm, E) / mm;
        for (int64_t i = 0; i < E; i++) v[i] = x0[i] - c * xm[i];
        float vx0 = dotf(v, x0, E);
        for (int64_t i = 0; i < E; i++) v[i] /= vx0; /* now v.x0 = 1 */
        /* self-check with the real output matrix */
        float nw = sqrtf(dotf(w0, w0, E)), ne = sqrtf(dotf(tmp, tmp, E));
        float lam = 1000.0f * ne;
        for (int64_t i = 0; i < E; i++) buf[i] = tmp[i] + lam * w0[i] / nw; /* row <= k residual */
        int32_t a1 = argmax_logits(&ti, buf, buf + E);
        int32_t a2 = argmax_logits(&ti, tmp, buf + E); /* row > k residual = E[mask] */
        if (a1 != 0 || a2 == 0) {
            bd_err(err, errlen, "construction check failed (right rows draft %d, wrong rows draft %d); try another --mask-id",
                   a1, a2);
            goto done;
        }
    }

    /* fc and the two global norms */
    if (o->constructed) fill_const(buf, (size_t)(K * E * E), 0.0f);
    else fill_random(&r, buf, (size_t)(K * E * E), 1.0f / sqrtf((float)(K * E)));
    if (!add_tensor(w, "fc.weight", wt, K * E, E, buf, err, errlen)) goto done;
    fill_const(buf, (size_t)E, 1.0f);
    if (!add_tensor(w, "enc.output_norm.weight", BD_TYPE_F32, E, 1, buf, err, errlen) ||
        !add_tensor(w, "output_norm.weight", BD_TYPE_F32, E, 1, buf, err, errlen))
        goto done;

    const int ka = o->accept_k < 0 ? B : o->accept_k;
    const float theta = PI_F / (float)B;
    const float phi = 0.5f * PI_F - ((float)ka + 0.5f) * theta;
    const float A = 25.0f / sinf(0.5f * theta);               /* |score| >= 25 away from the boundary */
    const float s_qk = sqrtf(A / sqrtf((float)HD));           /* q_norm = k_norm weight on the pair */
    for (int64_t il = 0; il < L; il++) {
        bool craft = o->constructed && il == 0;
        float nscale = o->constructed ? 0.0f : 1.0f;
#define MAT(suffix, ne0, ne1, scl, ...)                                                         \
    do {                                                                                        \
        snprintf(name, sizeof name, "blk.%lld." suffix, (long long)il);                         \
        if (craft) {                                                                            \
            fill_const(buf, (size_t)((ne0) * (ne1)), 0.0f);                                     \
            __VA_ARGS__;                                                                        \
            if (!add_tensor(w, name, wt_craft, ne0, ne1, buf, err, errlen)) goto done;          \
        } else {                                                                                \
            fill_random(&r, buf, (size_t)((ne0) * (ne1)), nscale * (scl));                      \
            if (!add_tensor(w, name, wt, ne0, ne1, buf, err, errlen)) goto done;                \
        }                                                                                       \
    } while (0)
#define NORM(suffix, n, craft_vals)                                                             \
    do {                                                                                        \
        snprintf(name, sizeof name, "blk.%lld." suffix, (long long)il);                         \
        if (o->constructed) fill_const(buf, (size_t)(n), 1.0f);                                 \
        else for (int64_t i_ = 0; i_ < (n); i_++) buf[i_] = 1.0f + 0.1f * rng_normal(&r);       \
        craft_vals;                                                                             \
        if (!add_tensor(w, name, BD_TYPE_F32, n, 1, buf, err, errlen)) goto done;               \
    } while (0)
        NORM("attn_norm.weight", E, (void)0);
        /* q: mask rows -> (cos a, sin a) on lanes (pair, pair + HD/2) of head 0, with a = phi */
        MAT("attn_q.weight", E, Q, 1.0f / sqrtf((float)E), {
            float mm = dotf(xm, xm, E);
            for (int64_t i = 0; i < E; i++) {
                buf[pair * E + i] = cosf(phi) * xm[i] / mm;
                buf[(pair + HD / 2) * E + i] = sinf(phi) * xm[i] / mm;
            }
        });
        /* k: anchor -> (1, 0) on the same lanes of kv head 0; mask -> 0 */
        MAT("attn_k.weight", E, KV, 1.0f / sqrtf((float)E), {
            for (int64_t i = 0; i < E; i++) buf[pair * E + i] = v[i];
        });
        /* v: anchor -> 1 on lane 0 of kv head 0; mask -> 0 */
        MAT("attn_v.weight", E, KV, 1.0f / sqrtf((float)E), {
            for (int64_t i = 0; i < E; i++) buf[i] = v[i];
        });
        /* o: head 0 lane 0 -> lam * W_out[0] / |W_out[0]| */
        MAT("attn_output.weight", Q, E, 1.0f / sqrtf((float)Q), {
            target_row(&ti, false, mask, tmp);
            float lam = 1000.0f * sqrtf(dotf(tmp, tmp, E)), nw = sqrtf(dotf(w0, w0, E));
            for (int64_t e = 0; e < E; e++) buf[e * Q + 0] = lam * w0[e] / nw;
        });
        NORM("attn_q_norm.weight", HD, if (craft) { buf[pair] = s_qk; buf[pair + HD / 2] = s_qk; });
        NORM("attn_k_norm.weight", HD, if (craft) { buf[pair] = s_qk; buf[pair + HD / 2] = s_qk; });
        NORM("ffn_norm.weight", E, (void)0);
        craft = false; /* the FFN of a constructed drafter is all zeros, in the plain type */
        MAT("ffn_gate.weight", E, FF, 1.0f / sqrtf((float)E), (void)0);
        MAT("ffn_up.weight", E, FF, 1.0f / sqrtf((float)E), (void)0);
        MAT("ffn_down.weight", FF, E, 1.0f / sqrtf((float)FF), (void)0);
#undef MAT
#undef NORM
    }
    ok = bd_gguf_writer_write_file(w, path, err, errlen);
done:
    bd_gguf_writer_free(w);
    free(buf);
    free(x0);
    free(xm);
    free(w0);
    free(v);
    free(tmp);
    target_close(&ti);
    return ok;
}
