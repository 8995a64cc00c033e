/*
 * args.c - see args.h.
 */
#include "args.h"
#include "../base/base.h"
#include "blockdraft.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool arg_is(const char *a, const char *n1, const char *n2) {
    return (n1 && !strcmp(a, n1)) || (n2 && !strcmp(a, n2));
}

bool arg_take(int argc, char **argv, int *i, const char *const *names, const char **val) {
    for (const char *const *n = names; *n; n++) {
        if (strcmp(argv[*i], *n) != 0) continue;
        if (*i + 1 >= argc) {
            fprintf(stderr, "blockdraft: option %s needs a value\n", *n);
            exit(2);
        }
        *val = argv[++*i];
        return true;
    }
    return false;
}

int32_t arg_i32(const char *opt, const char *v, int32_t lo, int32_t hi) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "blockdraft: bad value for %s: '%s' (expected an integer in [%d, %d])\n", opt, v,
                lo, hi);
        exit(2);
    }
    return (int32_t)x;
}

int arg_dflash_block(const char *opt, const char *v) {
    static const char *const names[] = {"auto", "full", "short"}; /* bd_dflash_block order */
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, names[i])) return i;
    fprintf(stderr, "blockdraft: bad value for %s: '%s' (expected auto, full or short)\n", opt, v);
    exit(2);
}

bool arg_chat_template_ok(const char *cmd, const char *v) {
    if (!strcmp(v, "chatml") || strstr(v, "{%") || strstr(v, "{{")) return true;
    fprintf(stderr,
            "blockdraft %s: --chat-template '%s': of llama.cpp's built-in template names only 'chatml' is known "
            "here; give the Jinja text, or a file with --chat-template-file\n",
            cmd, v);
    return false;
}

bool arg_rope(int argc, char **argv, int *i, bd_session_params *sp) {
    const char *v, *a = argv[*i];
    if (arg_take(argc, argv, i, (const char *[]){"--rope-scaling", NULL}, &v)) {
        static const char *const names[] = {"none", "linear", "yarn"}; /* BD_ROPE_SCALING_NONE.. */
        for (int k = 0; k < 3; k++)
            if (!strcmp(v, names[k])) {
                sp->rope_scaling = BD_ROPE_SCALING_NONE + k;
                return true;
            }
        fprintf(stderr, "blockdraft: bad value for %s: '%s' (expected none, linear or yarn)\n", a, v);
        exit(2);
    }
    if (arg_take(argc, argv, i, (const char *[]){"--rope-scale", NULL}, &v)) {
        sp->rope_freq_scale = 1.0f / arg_f32(a, v, 1e-3f, 1e6f);
        return true;
    }
    if (arg_take(argc, argv, i, (const char *[]){"--rope-freq-scale", NULL}, &v)) {
        sp->rope_freq_scale = arg_f32(a, v, 1e-6f, 1e3f);
        return true;
    }
    if (arg_take(argc, argv, i, (const char *[]){"--rope-freq-base", NULL}, &v)) {
        sp->rope_freq_base = arg_f32(a, v, 1.0f, 1e12f);
        return true;
    }
    if (arg_take(argc, argv, i, (const char *[]){"--yarn-orig-ctx", NULL}, &v)) {
        sp->yarn_orig_ctx = arg_i32(a, v, 0, 1 << 30);
        return true;
    }
    return false;
}

bool arg_cache_type(int argc, char **argv, int *i, bd_session_params *sp) {
    const char *v, *a = argv[*i];
    int32_t *dst;
    if (arg_take(argc, argv, i, (const char *[]){"-fa", "--flash-attn", NULL}, &v)) {
        /* llama.cpp's values (common/arg.cpp); nothing to set here */
        static const char *const ok[] = {"on", "enabled", "true", "1", "off", "disabled", "false", "0", "auto", "-1"};
        for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++)
            if (!strcmp(v, ok[k])) return true;
        fprintf(stderr, "blockdraft: bad value for %s: '%s' (on, off or auto)\n", a, v);
        exit(2);
    }
    if (arg_take(argc, argv, i, (const char *[]){"-ctk", "--cache-type-k", NULL}, &v)) dst = &sp->type_k;
    else if (arg_take(argc, argv, i, (const char *[]){"-ctv", "--cache-type-v", NULL}, &v)) dst = &sp->type_v;
    else return false;
    if (!bd_kv_type_parse(v, dst)) {
        fprintf(stderr, "blockdraft: bad value for %s: '%s' (the KV cache types are " BD_KV_TYPE_NAMES ")\n", a, v);
        exit(2);
    }
    return true;
}

bool arg_cache_type_draft(int argc, char **argv, int *i, int32_t *type_k, int32_t *type_v) {
    const char *v, *a = argv[*i];
    int32_t *dst;
    if (arg_take(argc, argv, i, (const char *[]){"-ctkd", "--cache-type-k-draft", "--spec-draft-type-k", NULL}, &v))
        dst = type_k;
    else if (arg_take(argc, argv, i, (const char *[]){"-ctvd", "--cache-type-v-draft", "--spec-draft-type-v", NULL},
                      &v))
        dst = type_v;
    else return false;
    if (!bd_kv_type_parse(v, dst)) {
        fprintf(stderr, "blockdraft: bad value for %s: '%s' (the KV cache types are " BD_KV_TYPE_NAMES ")\n", a, v);
        exit(2);
    }
    return true;
}

uint64_t arg_u64(const char *opt, const char *v) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-') {
        fprintf(stderr, "blockdraft: bad value for %s: '%s' (expected a non-negative integer)\n", opt, v);
        exit(2);
    }
    return (uint64_t)x;
}

float arg_f32(const char *opt, const char *v, float lo, float hi) {
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, "blockdraft: bad value for %s: '%s' (expected a number in [%g, %g])\n", opt, v, lo,
                hi);
        exit(2);
    }
    return x;
}

int arg_ids(const char *s, int32_t *ids, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (errno || end == p || x < 0 || x > INT32_MAX || n >= max) return -1;
        ids[n++] = (int32_t)x;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    return n;
}

char *arg_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    bd_buf b = {0};
    char chunk[65536];
    size_t r;
    while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) bd_buf_put(&b, chunk, r);
    bool bad = ferror(f) || b.failed;
    fclose(f);
    if (bad) {
        bd_buf_free(&b);
        return NULL;
    }
    if (len) *len = b.n;
    return bd_buf_take(&b);
}

bool arg_optional_value(const char *v) {
    static const char *vals[] = {"on", "off", "auto", "true", "false", "1", "0", "enabled", "disabled"};
    for (size_t i = 0; v && i < sizeof vals / sizeof vals[0]; i++)
        if (!strcmp(v, vals[i])) return true;
    return false;
}

int arg_compat_take(const char *cmd, const char *tool, const arg_compat *table, size_t n, bool quiet, int argc,
                    char **argv, int *i) {
    const char *a = argv[*i];
    for (size_t f = 0; f < n; f++) {
        const arg_compat *cf = &table[f];
        bool hit = false;
        for (int k = 0; k < 7 && cf->names[k] && !hit; k++) hit = !strcmp(a, cf->names[k]);
        if (!hit) continue;
        const char *v = NULL;
        if (cf->arg == ARG_VALUE) {
            if (*i + 1 >= argc) {
                fprintf(stderr, "blockdraft %s: option %s needs a value\n", cmd, a);
                return -1;
            }
            v = argv[++*i];
        } else if (cf->arg == ARG_OPTIONAL && *i + 1 < argc && arg_optional_value(argv[*i + 1])) {
            v = argv[++*i];
        }
        if (cf->act == ARG_REFUSE) {
            fprintf(stderr, "blockdraft %s: %s's %s is not supported: %s\n", cmd, tool, a, cf->why);
            return -1;
        }
        if (!quiet) fprintf(stderr, "blockdraft %s: note: %s%s%s ignored: %s\n", cmd, a, v ? " " : "", v ? v : "", cf->why);
        return 1;
    }
    return 0;
}

size_t arg_unescape(char *s, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\' || i + 1 >= len) {
            s[o++] = s[i];
            continue;
        }
        const char c = s[++i];
        switch (c) {
        case 'n': s[o++] = '\n'; continue;
        case 'r': s[o++] = '\r'; continue;
        case 't': s[o++] = '\t'; continue;
        case '\'': case '"': case '\\': s[o++] = c; continue;
        case 'x':
            if (i + 2 < len) {
                const char x[3] = {s[i + 1], s[i + 2], 0};
                char *end = NULL;
                const long val = strtol(x, &end, 16);
                if (end == x + 2) {
                    i += 2;
                    s[o++] = (char)val;
                    continue;
                }
            }
            break;
        default: break;
        }
        s[o++] = '\\';
        s[o++] = c;
    }
    return o;
}

void cli_put_esc(FILE *f, const char *s, bool keep_nl) {
    size_t len = strlen(s);
    char *out = malloc(len * 6 + 1);
    if (!out) return;
    bd_escape_ctrl(out, len * 6 + 1, s, len, keep_nl);
    fputs(out, f);
    free(out);
}

const char *cli_esc(const char *s) {
    static char bufs[4][1024];
    static int next;
    char *b = bufs[next++ & 3];
    bd_escape_ctrl(b, sizeof bufs[0], s, strlen(s), false);
    return b;
}
