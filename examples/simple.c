/*
 * simple.c - the smallest complete use of libblockdraft: load a model,
 * tokenize a prompt, generate greedily and stream the text; with a second
 * file, the same through speculative decoding (a DFlash drafter or a small
 * draft model of the same vocabulary).
 *
 *   simple MODEL.gguf [DRAFT.gguf] [PROMPT]
 *
 * Built by `make` into build/examples/simple against build/libbdcore.a
 * only; `make test` runs it (tests/e2e/example.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockdraft.h"

typedef struct {
    bd_textstream *ts;
    char *buf; /* [cap]: one push of ts */
    int cap;
} printer;

static bool on_token(int32_t token, void *user) {
    printer *p = user;
    int n = bd_textstream_push(p->ts, token, p->buf, p->cap);
    if (n > 0) fwrite(p->buf, 1, (size_t)n, stdout);
    fflush(stdout);
    return true; /* false would stop the generation */
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [DRAFT.gguf] [PROMPT]\n", argv[0]);
        return 2;
    }
    const char *prompt = argc > 3 ? argv[3] : "Once upon a time";
    char err[512];
    int rc = 1;
    bd_model *m = bd_model_open(argv[1], err, sizeof err);
    bd_model *dm = argc > 2 && argv[2][0] ? bd_model_open(argv[2], err, sizeof err) : NULL;
    bd_session *s = NULL;
    bd_spec *spec = NULL;
    printer pr = {0};
    int32_t ids[512];
    if (!m || (argc > 2 && argv[2][0] && !dm)) goto fail;

    int n = bd_tokenize(m, prompt, strlen(prompt), true, false, ids, 512);
    if (n <= 0) {
        snprintf(err, sizeof err, "the prompt gives %d tokens", n);
        goto fail;
    }
    bd_session_params sp = bd_session_default_params();
    sp.n_ctx = 512;
    if (dm) {
        /* one call: the target session (tapping what a DFlash drafter
         * reads) and the speculative driver, which owns the session */
        bd_spec_params spp = bd_spec_default_params();
        spp.type = bd_spec_type_for_draft(dm);
        spec = bd_spec_open(m, dm, &sp, &spp, NULL, 0, err, sizeof err);
        if (!spec) goto fail;
        s = bd_spec_session(spec);
    } else if (!(s = bd_session_create(m, &sp, err, sizeof err))) {
        goto fail;
    }

    pr.ts = bd_textstream_create(m, false);
    if (!pr.ts) goto fail;
    pr.cap = bd_textstream_max_bytes(pr.ts); /* always enough for one push */
    pr.buf = malloc((size_t)pr.cap);
    if (!pr.buf) goto fail;

    bd_gen_params gp = {.n_predict = 48, .sampling = bd_sampler_default_params()};
    gp.sampling.temperature = 0; /* greedy */
    bd_gen_stats st;
    printf("%s", prompt);
    bool ok = spec ? bd_spec_generate(spec, ids, n, &gp, on_token, &pr, &st, err, sizeof err)
                   : bd_generate(s, ids, n, &gp, on_token, &pr, &st, err, sizeof err);
    if (!ok) goto fail;
    int t = bd_textstream_flush(pr.ts, pr.buf, pr.cap);
    if (t > 0) fwrite(pr.buf, 1, (size_t)t, stdout);
    printf("\n");
    fprintf(stderr, "blockdraft %s: %d prompt + %d generated tokens, %.1f tok/s, %s, tau %.2f\n", bd_version(),
            st.n_prompt, st.n_gen, st.gen_tps, st.spec.type, st.spec.tau);
    rc = 0;
fail:
    if (rc) fprintf(stderr, "simple: %s\n", err);
    free(pr.buf);
    bd_textstream_free(pr.ts);
    if (spec) bd_spec_free(spec); /* and the session it owns */
    else bd_session_free(s);
    bd_model_free(dm);
    bd_model_free(m);
    return rc;
}
