/*
 * cmd_eval.c - `blockdraft eval`: next-token logits at every prompt
 * position, for checking numerics against a reference.
 *
 *   blockdraft eval -m MODEL.gguf (-p PROMPT | --ids I,J,K) [--top K] [--json]
 *
 * --json prints {"positions": [{"pos": i, "top": [[id, logit], ...]}, ...]}
 * where top lists the K largest logits after position i, descending.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "blockdraft.h"
#include "cli.h"

#define EVAL_CHUNK 32

static void top_k(const float *logits, int32_t n_vocab, int k, int32_t *ids) {
    /* k is small: keep a sorted insertion list */
    int have = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        float v = logits[t];
        if (have == k && v <= logits[ids[k - 1]]) continue;
        int j = have < k ? have++ : k - 1;
        while (j > 0 && logits[ids[j - 1]] < v) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = t;
    }
}

int cmd_eval(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *ids_arg = NULL, *v;
    int topk = 5;
    bool json = false;
    bd_session_params sp = bd_session_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (arg_take(argc, argv, &i, (const char *[]){"-m", "--model", NULL}, &v)) model_path = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"-p", "--prompt", NULL}, &v)) prompt = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--ids", NULL}, &v)) ids_arg = v;
        else if (arg_take(argc, argv, &i, (const char *[]){"--top", NULL}, &v)) topk = arg_i32(a, v, 1, 1000);
        else if (arg_take(argc, argv, &i, (const char *[]){"-t", "--threads", NULL}, &v))
            sp.n_threads = arg_i32(a, v, 1, 256);
        else if (arg_is(a, "--json", NULL)) json = true;
        else if (arg_rope(argc, argv, &i, &sp)) continue;
        else if (arg_cache_type(argc, argv, &i, &sp)) continue;
        else {
            fprintf(stderr,
                    "usage: blockdraft eval -m MODEL.gguf (-p PROMPT | --ids I,J,K) [--top K] [--json] [-t N]\n"
                    ARG_ROPE_USAGE ARG_CACHE_TYPE_USAGE);
            return arg_is(a, "-h", "--help") ? 0 : 2;
        }
    }
    if (!model_path || (!prompt == !ids_arg)) {
        fprintf(stderr, "usage: blockdraft eval -m MODEL.gguf (-p PROMPT | --ids I,J,K) [--top K] [--json]\n");
        return 2;
    }
    char err[512];
    bd_model *m = bd_model_open(model_path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "blockdraft eval: %s\n", err);
        return 1;
    }
    int rc = 1, n = 0;
    int32_t *ids = NULL, *best = NULL;
    bd_session *s = NULL;
    json_t *root = NULL;
    if (ids_arg) {
        int max = (int)strlen(ids_arg) / 2 + 2;
        ids = malloc((size_t)max * sizeof *ids);
        n = ids ? arg_ids(ids_arg, ids, max) : -1;
        if (n <= 0) {
            fprintf(stderr, "blockdraft eval: bad --ids list\n");
            goto done;
        }
    } else {
        n = bd_tokenize(m, prompt, strlen(prompt), true, true, NULL, 0);
        if (n < 0) n = -n;
        ids = malloc(((size_t)n + 1) * sizeof *ids);
        if (!ids) goto done;
        n = bd_tokenize(m, prompt, strlen(prompt), true, true, ids, n + 1);
        if (n <= 0) {
            fprintf(stderr, "blockdraft eval: the prompt produced no tokens\n");
            goto done;
        }
    }
    int32_t n_vocab = bd_model_n_vocab(m);
    if (topk > n_vocab) topk = n_vocab;
    sp.n_ctx = n + 1;
    sp.n_batch = EVAL_CHUNK;
    sp.n_outputs = EVAL_CHUNK;
    s = bd_session_create(m, &sp, err, sizeof err);
    best = malloc((size_t)topk * sizeof *best);
    if (!s || !best) {
        fprintf(stderr, "blockdraft eval: %s\n", s ? "out of memory" : err);
        goto done;
    }
    root = json_object();
    json_t *positions = json_array();
    json_object_set_new(root, "positions", positions);
    for (int off = 0; off < n; off += EVAL_CHUNK) {
        int nb = n - off < EVAL_CHUNK ? n - off : EVAL_CHUNK;
        if (!bd_session_forward(s, ids + off, nb, BD_LOGITS_ALL, err, sizeof err)) {
            fprintf(stderr, "blockdraft eval: %s\n", err);
            goto done;
        }
        for (int r = 0; r < nb; r++) {
            const float *lg = bd_session_logits(s, r);
            top_k(lg, n_vocab, topk, best);
            if (json) {
                json_t *pos = json_object(), *top = json_array();
                json_object_set_new(pos, "pos", json_integer(off + r));
                for (int j = 0; j < topk; j++)
                    json_array_append_new(top, json_pack("[if]", best[j], (double)lg[best[j]]));
                json_object_set_new(pos, "top", top);
                json_array_append_new(positions, pos);
            } else {
                printf("pos %d (token %d):", off + r, ids[off + r]);
                for (int j = 0; j < topk; j++) printf(" %d:%.5f", best[j], lg[best[j]]);
                printf("\n");
            }
        }
    }
    if (json) {
        char *dump = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9));
        if (dump) printf("%s\n", dump);
        free(dump);
    }
    rc = 0;
done:
    json_decref(root);
    free(best);
    free(ids);
    bd_session_free(s);
    bd_model_free(m);
    return rc;
}
