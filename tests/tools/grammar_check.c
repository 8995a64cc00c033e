/*
 * grammar_check.c - helper of the grammar tests (not a test itself).
 *
 *   bd-grammar-check gbnf  SRC              print the GBNF (schemas converted)
 *   bd-grammar-check match SRC < LINES      each stdin line is a JSON string
 *                                           (the text to test); prints 1 if
 *                                           the grammar matches it, else 0
 *   bd-grammar-check bench SRC VOCAB.gguf TEXT [REPS]
 *                                           tokenize TEXT with the vocabulary
 *                                           and time the allowed-token mask at
 *                                           every token boundary: cold (new
 *                                           grammar) and warm (caches filled)
 * SRC: --grammar FILE | --schema FILE | --json-object
 * Exit status 0, or 1 with a message (e.g. the conversion error) on stderr.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "chat/json_schema.h"
#include "decode/grammar.h"
#include "gguf/bd_gguf.h"
#include "tokenizer/tokenizer.h"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
            } else {
                b = nb;
            }
        }
    }
    fclose(f);
    if (b) b[n] = '\0';
    *len = n;
    return b;
}

/* The grammar text for SRC (malloc'd). */
static char *source_text(int *argi, int argc, char **argv) {
    char err[1024];
    if (*argi >= argc) return NULL;
    const char *opt = argv[(*argi)++];
    if (!strcmp(opt, "--json-object")) return strdup(json_object_gbnf());
    if (*argi >= argc) return NULL;
    const char *path = argv[(*argi)++];
    size_t len;
    char *text = read_file(path, &len);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    if (!strcmp(opt, "--grammar")) return text;
    if (strcmp(opt, "--schema")) return NULL;
    json_error_t je;
    json_t *s = json_loadb(text, len, JSON_DECODE_ANY, &je);
    free(text);
    if (!s) {
        fprintf(stderr, "invalid JSON in %s: %s\n", path, je.text);
        exit(1);
    }
    char *g = json_schema_to_gbnf(s, err, sizeof err);
    json_decref(s);
    if (!g) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    return g;
}

int main(int argc, char **argv) {
    char err[1024];
    if (argc < 3) {
        fprintf(stderr, "usage: bd-grammar-check gbnf|match|bench SRC [...]\n");
        return 2;
    }
    const char *mode = argv[1];
    int argi = 2;
    char *text = source_text(&argi, argc, argv);
    if (!text) {
        fprintf(stderr, "bad SRC (--grammar FILE | --schema FILE | --json-object)\n");
        return 2;
    }
    if (!strcmp(mode, "gbnf")) {
        fputs(text, stdout);
        free(text);
        return 0;
    }
    if (!strcmp(mode, "match")) {
        bd_grammar *g = bd_grammar_create(text, strlen(text), NULL, err, sizeof err);
        free(text);
        if (!g) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, stdin)) > 0) {
            json_error_t je;
            json_t *s = json_loadb(line, (size_t)n, JSON_DECODE_ANY, &je);
            if (!json_is_string(s)) {
                fprintf(stderr, "input line is not a JSON string: %s", line);
                return 1;
            }
            printf("%d\n", bd_grammar_matches(g, json_string_value(s), json_string_length(s)) ? 1 : 0);
            json_decref(s);
        }
        free(line);
        bd_grammar_free(g);
        return 0;
    }
    if (!strcmp(mode, "bench") && argi + 1 < argc) {
        const char *vpath = argv[argi], *sample = argv[argi + 1];
        int reps = argi + 2 < argc ? atoi(argv[argi + 2]) : 3;
        bd_gguf_file *f = bd_gguf_open(vpath, err, sizeof err);
        bd_tokenizer *tk = f ? bd_tokenizer_load(f, err, sizeof err) : NULL;
        if (!tk) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        double t0 = bd_time_ms();
        bd_grammar_vocab *v = bd_grammar_vocab_create_from_tokenizer(tk, err, sizeof err);
        if (!v) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        int32_t V = bd_grammar_vocab_n_vocab(v);
        printf("vocabulary: %d tokens, built in %.1f ms\n", V, bd_time_ms() - t0);
        int32_t ids[8192];
        int n = bd_tokenizer_encode(tk, sample, strlen(sample), false, false, ids, 8192);
        if (n <= 0) {
            fprintf(stderr, "cannot tokenize the sample\n");
            return 1;
        }
        uint32_t *bits = malloc((size_t)(V + 31) / 32 * sizeof *bits);
        for (int rep = 0; rep < reps; rep++) {
            bd_grammar *g = bd_grammar_create(text, strlen(text), v, err, sizeof err);
            if (!g) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            for (int pass = 0; pass < 2; pass++) {
                bd_grammar_state s = bd_grammar_start(g);
                double sum = 0, mx = 0, sum_full = 0;
                int n_full = 0;
                long allowed = 0;
                for (int i = 0; i <= n; i++) {
                    double a = bd_time_ms();
                    int32_t c = bd_grammar_mask(g, s, bits);
                    double dt = bd_time_ms() - a;
                    if (c < 0) {
                        fprintf(stderr, "%s\n", bd_grammar_error(g));
                        return 1;
                    }
                    sum += dt;
                    mx = dt > mx ? dt : mx;
                    allowed += c;
                    if (c > V / 2) sum_full += dt, n_full++;
                    if (i == n) break;
                    if (!(bits[ids[i] >> 5] >> (ids[i] & 31) & 1)) {
                        fprintf(stderr, "the sample's token %d (position %d) is not allowed\n", ids[i], i);
                        return 1;
                    }
                    s = bd_grammar_advance_token(g, s, ids[i]);
                }
                printf("rep %d %s: %d masks, mean %.3f ms, max %.3f ms; %d masks with > half the vocabulary "
                       "allowed: mean %.3f ms; mean allowed %.0f; complete %d\n",
                       rep, pass ? "warm" : "cold", n + 1, sum / (n + 1), mx, n_full, n_full ? sum_full / n_full : 0,
                       (double)allowed / (n + 1), bd_grammar_is_complete(g, s));
            }
            bd_grammar_free(g);
        }
        free(bits);
        free(text);
        bd_grammar_vocab_free(v);
        bd_tokenizer_free(tk);
        bd_gguf_close(f);
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
