/*
 * toolcall.h - tool calls in a model's output: the Qwen formats, parsed
 * whole or while the text streams in.
 *
 * A call is a block "<tool_call>" ... "</tool_call>" whose inside is one of
 *   JSON (Qwen3, Qwen2.5, Hermes):
 *       {"name": "get_weather", "arguments": {"city": "Paris"}}
 *   XML (Qwen3-Coder, Qwen3.5/3.6):
 *       <function=get_weather>
 *       <parameter=city>
 *       Paris
 *       </parameter>
 *       </function>
 * whatever the template says (the inside tells them apart), or, for the
 * Llama 3.1-3.3 templates, which use no tags (LLAMA3), a reply that is one
 * JSON object {"name": "get_weather", "parameters": {"city": "Paris"}}
 * and nothing else but whitespace. An XML
 * parameter's value is text (the templates write strings as they are,
 * other values as JSON, booleans and null in Python's spelling): it stays
 * a string when the tool's schema says the parameter is a string, else it
 * is read as JSON (True/False/None as true/false/null) and kept as a
 * string when that fails.
 *
 * Nothing is dropped: the text outside parsed blocks is the content
 * (leading and trailing whitespace trimmed), and a block that does not
 * parse -- or is never closed -- stays in the content as it was written.
 * Parsing whole and streaming give the same calls and the same content.
 */
#ifndef BD_TOOLCALL_H
#define BD_TOOLCALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "chat.h"

/* The call format a chat template asks the model for (for forcing the
 * start of a call); NONE when the template shows neither. */
typedef enum chat_tool_format {
    CHAT_TOOL_FORMAT_NONE = 0,
    CHAT_TOOL_FORMAT_JSON = 1,
    CHAT_TOOL_FORMAT_XML = 2,
    CHAT_TOOL_FORMAT_LLAMA3 = 3, /* the whole reply is the call's JSON object */
} chat_tool_format;

chat_tool_format chat_tool_format_detect(const char *template_src);

/* The text that opens a call in format f ("<tool_call>\n"; with a
 * function name, the call's start up to its arguments). malloc'd; NULL on
 * OOM or f NONE. name may be NULL. */
char *chat_tool_call_prefix(chat_tool_format f, const char *name);

/* Streaming parser. tools (borrowed, may be NULL): the request's tools,
 * for the parameter types of XML calls. With the LLAMA3 format a reply
 * whose first non-blank byte is '{' is held back whole (it may be a call)
 * and given out at the end, as a call or as content. */
typedef struct chat_tool_stream {
    const json_t *tools;
    chat_tool_format format;
    int bare;          /* LLAMA3: 0 nothing but whitespace yet, 1 reading a possible call, 2 content */
    bool in_call;      /* inside "<tool_call>", waiting for "</tool_call>" */
    bool started;      /* content other than whitespace was emitted */
    chat_text pending; /* unclassified bytes (a possible tag prefix, or a call's inside) */
    chat_text ws;      /* content whitespace held back (dropped if nothing follows) */
    int n_calls;
} chat_tool_stream;

void chat_tool_stream_init(chat_tool_stream *s, const json_t *tools);
/* The same for a template's format (LLAMA3 changes the parsing; the
 * others parse as chat_tool_stream_init). */
void chat_tool_stream_init_format(chat_tool_stream *s, const json_t *tools, chat_tool_format format);
/* Feed content text. Appends content bytes to *content and each call
 * parsed to the array calls as {"name": s, "arguments": s (JSON text)}.
 * false on out-of-memory. */
bool chat_tool_stream_feed(chat_tool_stream *s, const char *p, size_t n, chat_text *content, json_t *calls);
/* End of the text: an unclosed call goes to the content. */
bool chat_tool_stream_finish(chat_tool_stream *s, chat_text *content, json_t *calls);
void chat_tool_stream_free(chat_tool_stream *s);

/* Whole text: *content malloc'd (possibly ""), calls appended to the
 * array. false on out-of-memory. */
bool chat_tool_parse(const char *text, size_t len, const json_t *tools, char **content, json_t *calls);
/* The same for a template's format. */
bool chat_tool_parse_format(const char *text, size_t len, const json_t *tools, chat_tool_format format,
                            char **content, json_t *calls);

/* Parse the inside of one block (between the tags). Returns the call
 * object {"name", "arguments"} or NULL when it does not parse. */
json_t *chat_tool_parse_block(const char *p, size_t n, const json_t *tools);

#endif
