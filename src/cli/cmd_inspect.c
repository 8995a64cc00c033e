/*
 * cmd_inspect.c - `blockdraft inspect FILE.gguf [--json]`: print a GGUF
 * file's header, metadata and tensor table.
 *
 * The text form is for people: long strings and arrays are abbreviated.
 * The JSON form is one object:
 *   {"file", "version", "alignment", "data_offset", "file_size",
 *    "metadata": {key: value, ...},
 *    "tensors": [{"name", "type", "type_id", "ne": [...], "offset", "nbytes"}]}
 * where a scalar value is a JSON number/bool/string (non-finite floats are
 * null) and an array is {"type": elem type, "count": n, "values": [the
 * first INSPECT_JSON_MAX_ELEMS], "truncated": true when cut}. Nested arrays
 * nest that object.
 *
 * The JSON is emitted by hand rather than through jansson so that floats
 * print in their shortest round-trip form (1e-05, not the f32's exact
 * 9.9999997473787516e-06) and so that invalid UTF-8 in a hostile file is
 * replaced (U+FFFD) instead of failing the dump.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base.h"
#include "../gguf/bd_gguf.h"
#include "../tensor/tensor.h"
#include "cli.h"

#define INSPECT_TEXT_MAX_ELEMS 6
#define INSPECT_TEXT_MAX_STR 120
#define INSPECT_JSON_MAX_ELEMS 64

/* ------------------------------------------------------------------------
 * Escaping
 * ---------------------------------------------------------------------- */

/* Write s[0, n) as a quoted JSON string (also used for the text form):
 * ", \ and control characters escaped, invalid UTF-8 bytes as \ufffd. */
static void put_json_str(FILE *out, const char *str, uint64_t n) {
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', out);
    uint64_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc((int)c, out);
            i++;
        } else if (c == '\n') {
            fputs("\\n", out), i++;
        } else if (c == '\t') {
            fputs("\\t", out), i++;
        } else if (c == '\r') {
            fputs("\\r", out), i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c), i++;
        } else {
            size_t k = bd_utf8_seq(s + i, (size_t)(n - i > 4 ? 4 : n - i), NULL);
            if (k == 0) {
                fputs("\\ufffd", out);
                i++;
            } else {
                fwrite(s + i, 1, k, out);
                i += k;
            }
        }
    }
    fputc('"', out);
}

/* Shortest decimal that reads back as the same float / double. */
static void put_real(FILE *out, double v, bool is_f32, bool json) {
    if (!isfinite(v)) {
        if (json) fputs("null", out);
        else fputs(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf", out);
        return;
    }
    char buf[64];
    for (int prec = is_f32 ? 6 : 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (is_f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v) break;
    }
    /* Keep it a JSON number that reads as a real: "1" -> "1.0". */
    if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", sizeof buf - strlen(buf) - 1);
    fputs(buf, out);
}

/* ------------------------------------------------------------------------
 * Values
 * ---------------------------------------------------------------------- */

/* Print one fixed-size scalar of type t at p. */
static void put_scalar(FILE *out, enum bd_gguf_vtype t, const uint8_t *p, bool json) {
    uint64_t u = 0;
    for (size_t i = 0; i < bd_gguf_vtype_size(t); i++) u |= (uint64_t)p[i] << (8 * i);
    switch (t) {
    case GGUF_VTYPE_UINT8:
    case GGUF_VTYPE_UINT16:
    case GGUF_VTYPE_UINT32:
    case GGUF_VTYPE_UINT64: fprintf(out, "%" PRIu64, u); break;
    case GGUF_VTYPE_INT8: fprintf(out, "%d", (int)(int8_t)u); break;
    case GGUF_VTYPE_INT16: fprintf(out, "%d", (int)(int16_t)u); break;
    case GGUF_VTYPE_INT32: fprintf(out, "%" PRId32, (int32_t)(uint32_t)u); break;
    case GGUF_VTYPE_INT64: fprintf(out, "%" PRId64, (int64_t)u); break;
    case GGUF_VTYPE_BOOL: fputs(u ? "true" : "false", out); break;
    case GGUF_VTYPE_FLOAT32: {
        uint32_t b = (uint32_t)u;
        float f;
        memcpy(&f, &b, 4);
        put_real(out, f, true, json);
        break;
    }
    case GGUF_VTYPE_FLOAT64: {
        double d;
        memcpy(&d, &u, 8);
        put_real(out, d, false, json);
        break;
    }
    default: fputs(json ? "null" : "?", out); break;
    }
}

/* A string value; in text mode cut to INSPECT_TEXT_MAX_STR bytes on a
 * UTF-8 boundary with its full length noted. */
static void put_str_value(FILE *out, const char *s, uint64_t len, bool json) {
    if (json || len <= INSPECT_TEXT_MAX_STR) {
        put_json_str(out, s, len);
        return;
    }
    uint64_t cut = INSPECT_TEXT_MAX_STR;
    while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80) cut--;
    put_json_str(out, s, cut);
    fprintf(out, "... (%" PRIu64 " bytes)", len);
}

static void put_array(FILE *out, const bd_gguf_kv *kv, bool json, int indent);

/* Element i of array kv. */
static void put_elem(FILE *out, const bd_gguf_kv *kv, uint64_t i, bool json, int indent) {
    if (kv->arr_type == GGUF_VTYPE_STRING) {
        const char *s;
        uint64_t len;
        if (bd_gguf_arr_str(kv, i, &s, &len)) put_str_value(out, s, len, json);
        else fputs("null", out);
    } else if (kv->arr_type == GGUF_VTYPE_ARRAY) {
        bd_gguf_kv sub;
        if (bd_gguf_arr_arr(kv, i, &sub)) put_array(out, &sub, json, indent);
        else fputs("null", out);
    } else {
        size_t es = bd_gguf_vtype_size(kv->arr_type);
        put_scalar(out, kv->arr_type, kv->data + i * es, json);
    }
}

static const char *plural_name(enum bd_gguf_vtype t) {
    return t == GGUF_VTYPE_STRING ? "strings" : t == GGUF_VTYPE_ARRAY ? "arrays" : bd_gguf_vtype_name(t);
}

static void put_array(FILE *out, const bd_gguf_kv *kv, bool json, int indent) {
    uint64_t max = json ? INSPECT_JSON_MAX_ELEMS : INSPECT_TEXT_MAX_ELEMS;
    uint64_t shown = kv->arr_count < max ? kv->arr_count : max;
    if (json) {
        fprintf(out, "{\"type\": \"%s\", \"count\": %" PRIu64 ", \"values\": [", bd_gguf_vtype_name(kv->arr_type),
                kv->arr_count);
        for (uint64_t i = 0; i < shown; i++) {
            if (i) fputs(", ", out);
            put_elem(out, kv, i, json, indent + 1);
        }
        fputs("]", out);
        if (shown < kv->arr_count) fputs(", \"truncated\": true", out);
        fputs("}", out);
        return;
    }
    fprintf(out, "[%" PRIu64 " %s", kv->arr_count, plural_name(kv->arr_type));
    for (uint64_t i = 0; i < shown; i++) {
        fputs(i ? ", " : ": ", out);
        put_elem(out, kv, i, json, indent + 1);
    }
    if (shown < kv->arr_count) fputs(", ...", out);
    fputs("]", out);
}

static void put_value(FILE *out, const bd_gguf_kv *kv, bool json) {
    if (kv->type == GGUF_VTYPE_STRING) put_str_value(out, kv->str, kv->str_len, json);
    else if (kv->type == GGUF_VTYPE_ARRAY) put_array(out, kv, json, 1);
    else put_scalar(out, kv->type, kv->data, json);
}

/* ------------------------------------------------------------------------
 * Output forms
 * ---------------------------------------------------------------------- */

static void put_ne(FILE *out, const bd_gguf_tensor *t, const char *open, const char *close) {
    fputs(open, out);
    for (uint32_t d = 0; d < t->n_dims; d++) fprintf(out, "%s%" PRIu64, d ? ", " : "", t->ne[d]);
    fputs(close, out);
}

static void print_text(FILE *out, const char *path, const bd_gguf_file *f) {
    fprintf(out, "file:        %s\n", path);
    fprintf(out, "version:     %" PRIu32 "\n", bd_gguf_version(f));
    fprintf(out, "alignment:   %" PRIu32 "\n", bd_gguf_alignment(f));
    fprintf(out, "data offset: %" PRIu64 "\n", bd_gguf_data_offset(f));
    fprintf(out, "file size:   %" PRIu64 "\n", bd_gguf_file_size(f));
    fprintf(out, "\nmetadata (%" PRId64 " keys):\n", bd_gguf_kv_count(f));
    for (int64_t i = 0; i < bd_gguf_kv_count(f); i++) {
        const bd_gguf_kv *kv = bd_gguf_kv_at(f, i);
        fputs("  ", out);
        /* keys are untrusted bytes too; print them quoted only if odd */
        bool plain = true;
        for (const char *k = kv->key; *k; k++)
            if ((unsigned char)*k <= 0x20 || (unsigned char)*k >= 0x7f || *k == '"') plain = false;
        if (plain && kv->key[0]) fputs(kv->key, out);
        else put_json_str(out, kv->key, strlen(kv->key));
        fprintf(out, " (%s) = ", bd_gguf_vtype_name(kv->type));
        put_value(out, kv, false);
        fputc('\n', out);
    }
    fprintf(out, "\ntensors (%" PRId64 "):\n", bd_gguf_tensor_count(f));
    if (bd_gguf_tensor_count(f) > 0)
        fprintf(out, "  %-36s %-8s %-24s %12s %12s\n", "name", "type", "ne", "offset", "bytes");
    uint64_t total = 0;
    for (int64_t i = 0; i < bd_gguf_tensor_count(f); i++) {
        const bd_gguf_tensor *t = bd_gguf_tensor_at(f, i);
        char ne[128];
        int o = snprintf(ne, sizeof ne, "{");
        for (uint32_t d = 0; d < t->n_dims && o < (int)sizeof ne; d++)
            o += snprintf(ne + o, sizeof ne - (size_t)o, "%s%" PRIu64, d ? ", " : "", t->ne[d]);
        if (o < (int)sizeof ne) snprintf(ne + o, sizeof ne - (size_t)o, "}");
        fputs("  ", out);
        bool plain = t->name[0] != '\0';
        for (const char *k = t->name; *k; k++)
            if ((unsigned char)*k <= 0x20 || (unsigned char)*k >= 0x7f || *k == '"') plain = false;
        if (plain) fprintf(out, "%-36s", t->name);
        else put_json_str(out, t->name, strlen(t->name));
        fprintf(out, " %-8s %-24s %12" PRIu64 " %12" PRIu64 "\n", bd_type_name(t->type), ne, t->offset,
                t->nbytes);
        total += t->nbytes;
    }
    if (bd_gguf_tensor_count(f) > 0) fprintf(out, "  total tensor bytes: %" PRIu64 "\n", total);
}

static void print_json(FILE *out, const char *path, const bd_gguf_file *f) {
    fputs("{\n  \"file\": ", out);
    put_json_str(out, path, strlen(path));
    fprintf(out, ",\n  \"version\": %" PRIu32 ",\n  \"alignment\": %" PRIu32 ",\n", bd_gguf_version(f),
            bd_gguf_alignment(f));
    fprintf(out, "  \"data_offset\": %" PRIu64 ",\n  \"file_size\": %" PRIu64 ",\n", bd_gguf_data_offset(f),
            bd_gguf_file_size(f));
    fputs("  \"metadata\": {", out);
    for (int64_t i = 0; i < bd_gguf_kv_count(f); i++) {
        const bd_gguf_kv *kv = bd_gguf_kv_at(f, i);
        fputs(i ? ",\n    " : "\n    ", out);
        put_json_str(out, kv->key, strlen(kv->key));
        fputs(": ", out);
        put_value(out, kv, true);
    }
    fputs(bd_gguf_kv_count(f) ? "\n  },\n" : "},\n", out);
    fputs("  \"tensors\": [", out);
    for (int64_t i = 0; i < bd_gguf_tensor_count(f); i++) {
        const bd_gguf_tensor *t = bd_gguf_tensor_at(f, i);
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", out);
        put_json_str(out, t->name, strlen(t->name));
        fprintf(out, ", \"type\": \"%s\", \"type_id\": %" PRIu32 ", \"ne\": ", bd_type_name(t->type), t->type);
        put_ne(out, t, "[", "]");
        fprintf(out, ", \"offset\": %" PRIu64 ", \"nbytes\": %" PRIu64 "}", t->offset, t->nbytes);
    }
    fputs(bd_gguf_tensor_count(f) ? "\n  ]\n}\n" : "]\n}\n", out);
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: blockdraft inspect FILE.gguf [--json]\n"
            "\n"
            "Validate a GGUF file and print its header, metadata and tensor table.\n"
            "  --json   print one JSON object instead of text\n");
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "blockdraft inspect: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "blockdraft inspect: only one file may be given\n");
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    char err[1024];
    bd_gguf_file *f = bd_gguf_open(path, err, sizeof err);
    if (!f) {
        fprintf(stderr, "blockdraft inspect: %s\n", err);
        return 1;
    }
    if (json) print_json(stdout, path, f);
    else print_text(stdout, path, f);
    bd_gguf_close(f);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "blockdraft inspect: error writing output\n");
        return 1;
    }
    return 0;
}
