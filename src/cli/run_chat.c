/*
 * run_chat.c - the conversation of `blockdraft run -cnv` (see run_chat.h).
 */
#include "run_chat.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/base.h"
#include "../chat/chat.h"

struct run_chat {
    const bd_model *m;
    chat_template *tmpl;
    json_t *messages; /* array of {"role", "content"} */
    json_t *kwargs;   /* object or NULL */
    char *bos_str;    /* the BOS token's text, or NULL */
};

run_chat *run_chat_create(const bd_model *m, const char *template_src, const char *kwargs_json, const char *system,
                          bool *fallback, char *err, size_t errlen) {
    run_chat *c = calloc(1, sizeof *c);
    char *eos_str = NULL;
    if (!c) goto oom;
    c->m = m;
    const char *src = template_src && !strcmp(template_src, "chatml") ? chat_template_chatml
                      : template_src                                 ? template_src
                                                                     : bd_model_chat_template(m);
    *fallback = src == NULL;
    if (!src) src = chat_template_chatml;
    c->bos_str = chat_token_text(m, bd_token_bos(m));
    eos_str = chat_token_text(m, bd_token_eos(m));
    char terr[512];
    c->tmpl = chat_template_create(src, c->bos_str, eos_str, terr, sizeof terr);
    free(eos_str);
    if (!c->tmpl) {
        snprintf(err, errlen, "the chat template cannot be used: %s", terr);
        goto fail;
    }
    if (kwargs_json) {
        json_error_t je;
        c->kwargs = json_loads(kwargs_json, 0, &je);
        if (!json_is_object(c->kwargs)) {
            snprintf(err, errlen, "--chat-template-kwargs: %s", c->kwargs ? "not a JSON object" : je.text);
            goto fail;
        }
    }
    if (!(c->messages = json_array())) goto oom;
    if (system && !run_chat_add(c, "system", system, strlen(system), err, errlen)) goto fail;
    return c;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    run_chat_free(c);
    return NULL;
}

void run_chat_free(run_chat *c) {
    if (!c) return;
    chat_template_free(c->tmpl);
    json_decref(c->messages);
    json_decref(c->kwargs);
    free(c->bos_str);
    free(c);
}

bool run_chat_add(run_chat *c, const char *role, const char *text, size_t len, char *err, size_t errlen) {
    /* messages are JSON strings: broken UTF-8 (a reply cut inside a
     * character, Latin-1 on stdin) becomes U+FFFD, one per bad byte */
    bd_buf b = {0};
    for (size_t i = 0; i < len;) {
        int used;
        uint8_t u[4];
        const uint32_t cp = bd_utf8_decode((const uint8_t *)text + i, len - i, &used);
        bd_buf_put(&b, (const char *)u, (size_t)bd_utf8_encode(cp, u));
        i += (size_t)used;
    }
    json_t *content = b.failed ? NULL : json_stringn(b.p ? b.p : "", b.n);
    bd_buf_free(&b);
    json_t *msg = content ? json_pack("{s:s, s:o}", "role", role, "content", content) : NULL;
    if (!msg || json_array_append_new(c->messages, msg) != 0) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    return true;
}

int32_t *run_chat_prompt(run_chat *c, int *n, char *err, size_t errlen) {
    chat_span *spans = NULL;
    size_t n_spans = 0, plen = 0;
    bool user_error = false;
    chat_params p = {.messages = c->messages,
                     .add_generation_prompt = true,
                     .extra_kwargs = c->kwargs,
                     .llamacpp_compat = true,
                     .user_spans = &spans,
                     .n_user_spans = &n_spans};
    char terr[512];
    char *prompt = chat_template_apply(c->tmpl, &p, &plen, &user_error, terr, sizeof terr);
    if (!prompt) {
        snprintf(err, errlen, "chat template: %s", terr);
        return NULL;
    }
    /* the messages' text is plain text: control tokens only where the
     * template wrote them */
    size_t *plain = n_spans ? malloc(2 * n_spans * sizeof *plain) : NULL;
    int32_t *ids = NULL;
    int k = -1;
    if ((!n_spans || plain) && n_spans <= (size_t)INT32_MAX / 2 && plen <= (size_t)INT32_MAX) {
        for (size_t i = 0; i < n_spans; i++) {
            plain[2 * i] = spans[i].start;
            plain[2 * i + 1] = spans[i].end;
        }
        /* a template that writes the BOS text itself gets no second BOS */
        const bool add_bos = !(c->bos_str && !strncmp(prompt, c->bos_str, strlen(c->bos_str)));
        k = bd_tokenize_guarded(c->m, prompt, plen, add_bos, plain, (int)n_spans, NULL, 0);
        if (k < 0) k = -k;
        ids = malloc(((size_t)k + 1) * sizeof *ids);
        if (ids) k = bd_tokenize_guarded(c->m, prompt, plen, add_bos, plain, (int)n_spans, ids, k + 1);
    }
    free(plain);
    free(spans);
    free(prompt);
    if (!ids || k <= 0) {
        snprintf(err, errlen, ids ? "the chat prompt produced no tokens" : "out of memory");
        free(ids);
        return NULL;
    }
    *n = k;
    return ids;
}
