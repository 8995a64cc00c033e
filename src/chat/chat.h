/*
 * chat.h - chat prompts from OpenAI-style messages through the model's
 * Jinja chat template, and splitting generated text into reasoning and
 * content.
 *
 * Rendering matches Hugging Face transformers' apply_chat_template byte for
 * byte (see jinja.h): globals are exactly messages, tools (None when absent),
 * add_generation_prompt, bos_token, eos_token, raise_exception,
 * strftime_now, plus the members of extra_kwargs (e.g. enable_thinking).
 *
 * Error classes: *is_user_error is set when rendering failed because of the
 * request - the template called raise_exception (e.g. "roles must
 * alternate"), the messages are malformed, or the template hit a runtime
 * error (TypeError/UndefinedError/...) or resource limit on this input
 * (HTTP 400). It is cleared when the template itself is broken or uses
 * something unsupported: syntax errors, unsupported features, sandbox
 * violations, out of memory (HTTP 500).
 */
#ifndef BD_CHAT_H
#define BD_CHAT_H

#include "blockdraft.h"
#include "jinja.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* The text of token id with control tokens rendered (what a template gets
 * as bos_token / eos_token), malloc'd; NULL for a negative id, an empty
 * piece or no memory. */
char *chat_token_text(const bd_model *m, int32_t id);

/* ChatML fallback template for models without tokenizer.chat_template.
 * Typed text parts are joined with "\n" after non-empty text, as
 * llama.cpp joins them for its ChatML fallback; a generation prompt opens
 * the assistant turn. */
extern const char *chat_template_chatml;

/* Render a chat prompt in one call (parses the template each time; use
 * chat_template_create for repeated use). messages: jansson array of message
 * objects; tools: array or NULL (-> None); extra_kwargs: object or NULL.
 * bos_token/eos_token may be NULL (-> undefined in the template, as HF does
 * for a null token). Returns a malloc'd NUL-terminated string, or NULL with
 * err filled and *is_user_error set as described above. */
char *chat_render(const char *template_src, const json_t *messages, const json_t *tools, bool add_generation_prompt,
                  const json_t *extra_kwargs, const char *bos_token, const char *eos_token, bool *is_user_error,
                  char *err, size_t errlen);

/* ------------------------------------------------------------------------
 * Parsed templates (thread-safe to apply concurrently)
 * ---------------------------------------------------------------------- */

typedef struct chat_template chat_template;

/* Parse once. NULL with err on a syntax error or unsupported construct. */
chat_template *chat_template_create(const char *template_src, const char *bos_token, const char *eos_token,
                                    char *err, size_t errlen);
void chat_template_free(chat_template *t);

/* Whether the template renders a system message at all (llama.cpp's
 * "supports_system_role" probe: a needle in a system message must appear in
 * the output). Computed at create time. */
bool chat_template_supports_system(const chat_template *t);

/* A byte range [start, end) of a rendered prompt. */
typedef struct chat_span {
    size_t start, end;
} chat_span;

typedef struct chat_params {
    const json_t *messages;      /* array (required) */
    const json_t *tools;         /* array or NULL (-> None) */
    bool add_generation_prompt;
    const json_t *extra_kwargs;  /* object or NULL; members become template globals */
    const struct tm *fixed_now;  /* time for strftime_now; NULL = current local time */
    const jinja_limits *limits;  /* NULL = jinja_limits_default() */
    /* Apply llama.cpp's input edits first (parity with llama-server --jinja):
     * string tool-call arguments parsed to objects, an empty tools list
     * treated as none, a null or missing content as "" (OpenAI's assistant
     * message with tool_calls only), typed text parts joined with "\n"
     * (after non-empty text), and for templates
     * without system-role support the system text prepended to the first
     * user message (joined with "\n"). */
    bool llamacpp_compat;
    jinja_error *error_out;      /* optional: the structured error on failure */
    /* Optional: where the request's text landed. On success *user_spans
     * (malloc'd, free(); NULL when *n_user_spans is 0) gets the increasing,
     * disjoint byte ranges of the output that came from the messages,
     * tools and extra_kwargs (every string and key in them, except roles
     * that are one of system, user, assistant, tool, developer) rather than
     * from the template -- through whatever the template did to them
     * (jinja_from_json_untrusted). A caller tokenizes the prompt with
     * control tokens matched only outside these ranges
     * (bd_tokenize_guarded), so message text never becomes a control
     * token (prompt injection). */
    chat_span **user_spans;
    size_t *n_user_spans;
} chat_params;

/* Render with a parsed template. *out_len (optional) gets the length. */
char *chat_template_apply(const chat_template *t, const chat_params *p, size_t *out_len, bool *is_user_error,
                          char *err, size_t errlen);

/* ------------------------------------------------------------------------
 * Reasoning ("<think> ... </think>") separation
 * ---------------------------------------------------------------------- */

/* True when a rendered prompt ends inside an open think block (the last
 * "<think>" is followed only by whitespace), i.e. generation starts in the
 * reasoning part (Qwen3.5, DeepSeek-R1 templates). */
bool chat_prompt_opens_think(const char *prompt, size_t len);

/* Incremental splitter for streamed generations. Feed text chunks as they
 * are produced; each call appends the reasoning and content parts of the
 * chunk to the two buffers (bytes that might be the start of a tag are held
 * back until the next call or chat_think_finish). Leading whitespace of the
 * reasoning and of the content after "</think>", and whitespace just before
 * "</think>", are dropped. Text that never opens a think block is all
 * content; an unterminated think block is all reasoning. */
typedef struct chat_text {
    char *p; /* malloc'd, NUL-terminated (NULL while n == 0) */
    size_t n, cap;
} chat_text;

typedef struct chat_think_stream {
    int state;         /* 0 start (a "<think>" may follow), 1 in think, 2 content */
    bool skip_ws;      /* dropping leading whitespace of the current part */
    bool opened;       /* a think block was entered */
    chat_text pending; /* unprocessed bytes (a possible tag prefix) */
    chat_text ws;      /* whitespace inside think held back (dropped before "</think>") */
} chat_think_stream;

void chat_think_init(chat_think_stream *s, bool starts_in_think);
/* Returns false on out-of-memory. */
bool chat_think_feed(chat_think_stream *s, const char *chunk, size_t n, chat_text *reasoning, chat_text *content);
bool chat_think_finish(chat_think_stream *s, chat_text *reasoning, chat_text *content);
void chat_think_free(chat_think_stream *s);
void chat_text_free(chat_text *t);
/* Append n bytes (kept NUL-terminated); false on out-of-memory. */
bool chat_text_put(chat_text *t, const char *s, size_t n);
/* Drop the first n bytes (all of them when n >= t->n). */
void chat_text_consume(chat_text *t, size_t n);

/* Whole-text convenience: *reasoning and *content are malloc'd strings
 * (reasoning NULL when there was no think block). Returns false on OOM. */
bool chat_split_reasoning(const char *text, size_t len, bool starts_in_think, char **reasoning, char **content);

#endif
