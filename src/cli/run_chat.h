/*
 * run_chat.h - `blockdraft run -cnv`: a conversation held as OpenAI-style
 * messages and rendered through a chat template each turn (run_chat.c).
 *
 * Each turn renders every message so far with the generation prompt, as
 * llama.cpp's conversation mode and llama-server do, and tokenizes the
 * result with control tokens matched only in the template's own text (the
 * messages' text never becomes a control token: bd_tokenize_guarded). The
 * session's prefix reuse (bd_generate) then forwards only what the last
 * turn added.
 */
#ifndef BD_CLI_RUN_CHAT_H
#define BD_CLI_RUN_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockdraft.h"

typedef struct run_chat run_chat;

/* template_src: Jinja source, "chatml", or NULL for the model's own
 * tokenizer.chat_template (ChatML when it has none: *fallback set).
 * kwargs_json: NULL or a JSON object whose members become template globals
 * (llama.cpp's --chat-template-kwargs, e.g. {"enable_thinking": false}).
 * system: NULL or the system message. Borrows m. NULL with err on a
 * template that cannot be parsed or kwargs that are not a JSON object. */
run_chat *run_chat_create(const bd_model *m, const char *template_src, const char *kwargs_json, const char *system,
                          bool *fallback, char *err, size_t errlen);
void run_chat_free(run_chat *c);

/* Append a message (role "user" or "assistant"; text need not be
 * NUL-terminated; each byte of broken UTF-8 in it becomes U+FFFD, as
 * messages are JSON strings). False only when out of memory. */
bool run_chat_add(run_chat *c, const char *role, const char *text, size_t len, char *err, size_t errlen);

/* The prompt of the next turn: every message rendered with the generation
 * prompt, tokenized (BOS unless the template wrote its text). Returns a
 * malloc'd array of *n ids, or NULL with err (a template error names what
 * the template raised). */
int32_t *run_chat_prompt(run_chat *c, int *n, char *err, size_t errlen);

#endif
