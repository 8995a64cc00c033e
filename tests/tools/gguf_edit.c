/*
 * gguf_edit.c - `bd-gguf-edit IN OUT EDIT...`: copy a GGUF with edits, for
 * tests that need malformed or specially shaped files (hybrid loader
 * refusals, MoE routing ties). Built by `make tests`; not installed.
 *
 *   --drop-key KEY            --set-u32 KEY V        --set-f32 KEY V
 *   --set-str KEY V
 *   --set-i32s KEY a,b,c      --set-bools KEY 1,0,1  (arrays)
 *   --drop-tensor NAME        --rename-tensor OLD NEW
 *   --copy-row NAME SRC DST   row DST of an F32 tensor := row SRC
 *                             (a 1-D tensor's elements count as rows)
 *   --set-f32s NAME a,b,c     an F32 tensor's values (must fit exactly)
 *   --add-f32s NAME a,b,c     a new 1-D F32 tensor with these values
 *   --add-tokens A,B,...      append NORMAL tokens (score 0) to the vocabulary
 *   --add-merges "A B,C D"    append BPE merges (lowest priority)
 *
 * Exit status 0 on success, 1 with a message otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/bd_gguf.h"
#include "tensor/tensor.h"

#define MAX_EDITS 512

typedef struct {
    const char *op, *a, *b, *c;
} edit;

static int parse_list(const char *s, double *out, int max) {
    int n = 0;
    char *end;
    while (*s && n < max) {
        out[n++] = strtod(s, &end);
        if (end == s) return -1;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int die(const char *msg, const char *arg) {
    fprintf(stderr, "bd-gguf-edit: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 1;
}

/* Copy the string array kv with the comma-separated items of extra
 * appended (extra may be NULL). */
static bool append_strs(bd_gguf_writer *w, const bd_gguf_kv *kv, const char *extra) {
    uint64_t n = kv->arr_count, cap = n + 1;
    for (const char *c = extra; c && *c; c++) cap += *c == ',';
    char **v = calloc(cap, sizeof *v);
    bool ok = v != NULL;
    uint64_t k = 0;
    for (; ok && k < n; k++) {
        const char *str;
        uint64_t len;
        ok = bd_gguf_arr_str(kv, k, &str, &len) && (v[k] = malloc(len + 1)) != NULL;
        if (ok) memcpy(v[k], str, len), v[k][len] = 0;
    }
    for (const char *c = extra; ok && c && *c;) {
        const char *e = strchr(c, ',');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        ok = (v[k] = malloc(len + 1)) != NULL;
        if (ok) memcpy(v[k], c, len), v[k++][len] = 0;
        c = e ? e + 1 : c + len;
    }
    ok = ok && bd_gguf_writer_set_arr_str(w, kv->key, (const char *const *)v, k);
    for (uint64_t i = 0; v && i < cap; i++) free(v[i]);
    free(v);
    return ok;
}

/* Copy the numeric array kv (INT32 or FLOAT32) with add more elements of
 * value x. */
static bool append_nums(bd_gguf_writer *w, const bd_gguf_kv *kv, uint64_t add, double x) {
    if (kv->arr_type != GGUF_VTYPE_INT32 && kv->arr_type != GGUF_VTYPE_FLOAT32) return false;
    const uint64_t n = kv->arr_count;
    uint8_t *d = malloc((n + add) * 4);
    if (!d) return false;
    memcpy(d, kv->data, n * 4);
    for (uint64_t i = n; i < n + add; i++) {
        int32_t iv = (int32_t)x;
        float fv = (float)x;
        memcpy(d + 4 * i, kv->arr_type == GGUF_VTYPE_INT32 ? (const void *)&iv : (const void *)&fv, 4);
    }
    bool ok = bd_gguf_writer_set_arr(w, kv->key, kv->arr_type, d, n + add);
    free(d);
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 3) return die("usage: bd-gguf-edit IN OUT EDIT...", NULL);
    edit ed[MAX_EDITS];
    int ne = 0;
    for (int i = 3; i < argc; i++) {
        const char *op = argv[i];
        int nargs = !strcmp(op, "--drop-key") || !strcmp(op, "--drop-tensor") || !strcmp(op, "--add-tokens") ||
                            !strcmp(op, "--add-merges")
                        ? 1
                    : !strcmp(op, "--copy-row")                              ? 3
                                                                             : 2;
        if (i + nargs >= argc) return die("missing arguments for", op);
        if (ne == MAX_EDITS) return die("too many edits", NULL);
        ed[ne].op = op;
        ed[ne].a = argv[i + 1];
        ed[ne].b = nargs > 1 ? argv[i + 2] : NULL;
        ed[ne].c = nargs > 2 ? argv[i + 3] : NULL;
        ne++;
        i += nargs;
    }
    char err[512];
    bd_gguf_file *f = bd_gguf_open(argv[1], err, sizeof err);
    if (!f) return die(err, NULL);
    bd_gguf_writer *w = bd_gguf_writer_create();
    if (!w) return die("out of memory", NULL);
    /* vocabulary additions */
    const char *add_tokens = NULL, *add_merges = NULL;
    uint64_t n_added = 0;
    for (int e = 0; e < ne; e++) {
        if (!strcmp(ed[e].op, "--add-tokens")) add_tokens = ed[e].a;
        if (!strcmp(ed[e].op, "--add-merges")) add_merges = ed[e].a;
    }
    for (const char *c = add_tokens; c && *c; c++) n_added += *c == ',';
    n_added += add_tokens && *add_tokens;
    /* keys: edited ones are written after the copies */
    for (int64_t i = 0; i < bd_gguf_kv_count(f); i++) {
        const bd_gguf_kv *kv = bd_gguf_kv_at(f, i);
        if (add_tokens && !strcmp(kv->key, "tokenizer.ggml.tokens")) {
            if (!append_strs(w, kv, add_tokens)) return die("cannot append tokens", NULL);
            continue;
        }
        if (add_tokens && (!strcmp(kv->key, "tokenizer.ggml.token_type") || !strcmp(kv->key, "tokenizer.ggml.scores"))) {
            if (!append_nums(w, kv, n_added, kv->arr_type == GGUF_VTYPE_INT32 ? 1 : 0))
                return die("cannot append to", kv->key);
            continue;
        }
        if (add_merges && !strcmp(kv->key, "tokenizer.ggml.merges")) {
            if (!append_strs(w, kv, add_merges)) return die("cannot append merges", NULL);
            continue;
        }
        bool skip = false;
        for (int e = 0; e < ne; e++)
            if (!strncmp(ed[e].op, "--drop-key", 10) || !strncmp(ed[e].op, "--set-", 6))
                if (!strcmp(ed[e].a, kv->key) && strcmp(ed[e].op, "--set-f32s") != 0) skip = true;
        if (!skip && !bd_gguf_writer_copy_kv(w, kv)) return die("cannot copy key", kv->key);
    }
    for (int e = 0; e < ne; e++) {
        double v[4096];
        int n;
        bool ok = true;
        if (!strcmp(ed[e].op, "--set-u32")) {
            ok = bd_gguf_writer_set_u32(w, ed[e].a, (uint32_t)strtoul(ed[e].b, NULL, 10));
        } else if (!strcmp(ed[e].op, "--set-str")) {
            ok = bd_gguf_writer_set_str(w, ed[e].a, ed[e].b);
        } else if (!strcmp(ed[e].op, "--set-f32")) {
            ok = bd_gguf_writer_set_f32(w, ed[e].a, strtof(ed[e].b, NULL));
        } else if (!strcmp(ed[e].op, "--set-i32s") || !strcmp(ed[e].op, "--set-bools")) {
            if ((n = parse_list(ed[e].b, v, 4096)) < 0) return die("bad list", ed[e].b);
            bool bools = !strcmp(ed[e].op, "--set-bools");
            int32_t iv[4096];
            uint8_t bv[4096];
            for (int k = 0; k < n; k++) {
                iv[k] = (int32_t)v[k];
                bv[k] = v[k] != 0;
            }
            ok = bools ? bd_gguf_writer_set_arr(w, ed[e].a, GGUF_VTYPE_BOOL, bv, (uint64_t)n)
                       : bd_gguf_writer_set_arr(w, ed[e].a, GGUF_VTYPE_INT32, iv, (uint64_t)n);
        }
        if (!ok) return die("cannot set key", ed[e].a);
    }
    /* tensors */
    for (int64_t i = 0; i < bd_gguf_tensor_count(f); i++) {
        const bd_gguf_tensor *t = bd_gguf_tensor_at(f, i);
        const char *name = t->name;
        bool drop = false;
        const edit *data_edit = NULL;
        for (int e = 0; e < ne; e++) {
            if (!strcmp(ed[e].op, "--drop-tensor") && !strcmp(ed[e].a, name)) drop = true;
            if (!strcmp(ed[e].op, "--rename-tensor") && !strcmp(ed[e].a, name)) name = ed[e].b;
            if ((!strcmp(ed[e].op, "--copy-row") || !strcmp(ed[e].op, "--set-f32s")) && !strcmp(ed[e].a, t->name))
                data_edit = &ed[e];
        }
        if (drop) continue;
        if (!data_edit) {
            if (!bd_gguf_writer_add_tensor_ref(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes))
                return die("cannot add tensor", name);
            continue;
        }
        if (t->type != BD_TYPE_F32) return die("data edits need an F32 tensor", t->name);
        float *d = malloc(t->nbytes);
        if (!d) return die("out of memory", NULL);
        memcpy(d, t->data, t->nbytes);
        const uint64_t row = t->n_dims == 1 ? 1 : t->ne[0], rows = t->nbytes / sizeof(float) / row;
        if (!strcmp(data_edit->op, "--copy-row")) {
            uint64_t src = strtoull(data_edit->b, NULL, 10), dst = strtoull(data_edit->c, NULL, 10);
            if (src >= rows || dst >= rows) return die("row out of range in", t->name);
            memcpy(d + dst * row, d + src * row, row * sizeof(float));
        } else {
            double v[4096];
            int n = parse_list(data_edit->b, v, 4096);
            if (n < 0 || (uint64_t)n != t->nbytes / sizeof(float)) return die("value count differs for", t->name);
            for (int k = 0; k < n; k++) d[k] = (float)v[k];
        }
        bool ok = bd_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, d, t->nbytes);
        free(d);
        if (!ok) return die("cannot add tensor", name);
    }
    for (int e = 0; e < ne; e++) {
        if (strcmp(ed[e].op, "--add-f32s")) continue;
        double v[4096];
        float d[4096];
        int n = parse_list(ed[e].b, v, 4096);
        if (n <= 0) return die("bad list", ed[e].b);
        for (int k = 0; k < n; k++) d[k] = (float)v[k];
        const uint64_t ne0[1] = {(uint64_t)n};
        if (!bd_gguf_writer_add_tensor(w, ed[e].a, BD_TYPE_F32, 1, ne0, d, (uint64_t)n * sizeof(float)))
            return die("cannot add tensor", ed[e].a);
    }
    if (!bd_gguf_writer_write_file(w, argv[2], err, sizeof err)) return die(err, NULL);
    bd_gguf_writer_free(w);
    bd_gguf_close(f);
    return 0;
}
