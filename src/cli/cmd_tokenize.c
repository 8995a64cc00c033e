/*
 * cmd_tokenize.c - `blockdraft tokenize`: the token ids of a text.
 *
 *   blockdraft tokenize -m MODEL.gguf [--json] [--pieces] [--no-bos]
 *                       [--no-parse-special] (TEXT | -f FILE)
 *
 * Opens only the file's metadata and builds the tokenizer; no weights are
 * read. Special-token texts (<|im_start|>, </s>, ...) are parsed as their
 * tokens unless --no-parse-special. BOS/EOS are added when the vocabulary
 * asks for them unless --no-bos.
 *
 * Output: the ids on one line, space-separated; with --pieces one line
 * per token, "ID<TAB>PIECE" with the piece C-escaped; with --json
 * {"ids": [...]} (and "pieces": [...] with --pieces; bytes that are not
 * valid UTF-8 appear as U+FFFD there).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base.h"
#include "../gguf/bd_gguf.h"
#include "../tokenizer/tokenizer.h"
#include "args.h"
#include "cli.h"

static void usage(FILE *out) {
    fprintf(out, "usage: blockdraft tokenize -m MODEL.gguf [--json] [--pieces] [--no-bos]\n"
                 "                           [--no-parse-special] (TEXT | -f FILE)\n");
}

/* Piece bytes as a C-escaped string (for the plain listing). */
static void print_c_escaped(const char *s, int n) {
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\') fputs("\\\\", stdout);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
}

static void print_json_string(const char *s, int n) {
    putchar('"');
    for (int i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        int l = (int)bd_utf8_seq(s + i, (size_t)(n - i), NULL);
        if (l == 0) {
            fputs("\\ufffd", stdout);
            i++;
        } else if (c == '"' || c == '\\') {
            printf("\\%c", c);
            i++;
        } else if (c < 0x20) {
            printf("\\u%04x", c);
            i++;
        } else {
            fwrite(s + i, 1, (size_t)l, stdout);
            i += l;
        }
    }
    putchar('"');
}

int cmd_tokenize(int argc, char **argv) {
    const char *model_path = NULL, *text = NULL, *file = NULL, *v;
    bool json = false, pieces = false, add_special = true, parse_special = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (arg_take(argc, argv, &i, (const char *[]){"-m", "--model", NULL}, &v)) model_path = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-f", "--file", NULL}, &v)) file = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-p", "--prompt", NULL}, &v)) text = v;
        else if (arg_is(a, "--json", NULL)) json = true;
        else if (arg_is(a, "--pieces", NULL)) pieces = true;
        else if (arg_is(a, "--no-bos", NULL)) add_special = false;
        else if (arg_is(a, "--no-parse-special", NULL)) parse_special = false;
        else if (arg_is(a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1] != 0) {
            fprintf(stderr, "blockdraft tokenize: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!text) {
            text = a;
        } else {
            fprintf(stderr, "blockdraft tokenize: more than one TEXT (quote the text)\n");
            return 2;
        }
    }
    if (!model_path || (!text == !file)) {
        usage(stderr);
        return 2;
    }

    size_t len;
    char *owned = NULL;
    if (file) {
        owned = arg_read_file(file, &len);
        if (!owned) {
            fprintf(stderr, "blockdraft tokenize: cannot read %s\n", file);
            return 1;
        }
        text = owned;
    } else {
        len = strlen(text);
    }

    char err[512];
    bd_gguf_file *g = bd_gguf_open(model_path, err, sizeof err);
    if (!g) {
        fprintf(stderr, "blockdraft tokenize: %s\n", err);
        free(owned);
        return 1;
    }
    bd_tokenizer *t = bd_tokenizer_load(g, err, sizeof err);
    bd_gguf_close(g);
    if (!t) {
        fprintf(stderr, "blockdraft tokenize: %s: %s\n", model_path, err);
        free(owned);
        return 1;
    }

    int rc = 1;
    int32_t *ids = NULL;
    int n = bd_tokenizer_encode(t, text, len, add_special, parse_special, NULL, 0);
    if (n < 0 && n != INT32_MIN) {
        ids = malloc((size_t)-n * sizeof *ids);
        if (ids) n = bd_tokenizer_encode(t, text, len, add_special, parse_special, ids, -n);
    }
    if (n < 0 || (n > 0 && !ids)) {
        fprintf(stderr, "blockdraft tokenize: out of memory\n");
        goto done;
    }

    char small[256];
    if (json) {
        fputs("{\"ids\": [", stdout);
        for (int i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        putchar(']');
        if (pieces) {
            fputs(", \"pieces\": [", stdout);
            for (int i = 0; i < n; i++) {
                int k = bd_tokenizer_piece(t, ids[i], small, sizeof small, true);
                if (i) fputs(", ", stdout);
                if (k >= 0) {
                    print_json_string(small, k);
                } else {
                    char *big = malloc((size_t)-k);
                    int k2 = big ? bd_tokenizer_piece(t, ids[i], big, -k, true) : 0;
                    print_json_string(big ? big : "", k2 > 0 ? k2 : 0);
                    free(big);
                }
            }
            putchar(']');
        }
        fputs("}\n", stdout);
    } else if (pieces) {
        for (int i = 0; i < n; i++) {
            int k = bd_tokenizer_piece(t, ids[i], small, sizeof small, true);
            printf("%d\t", ids[i]);
            if (k >= 0) print_c_escaped(small, k);
            else printf("(%d bytes)", -k);
            putchar('\n');
        }
    } else {
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    }
    rc = 0;
done:
    free(ids);
    free(owned);
    bd_tokenizer_free(t);
    return rc;
}
