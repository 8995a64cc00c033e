/*
 * test_toolcall.c - tool calls parsed from model output (src/chat/toolcall.c).
 *
 * 1. Round trip through the reference renderings: the tool-call cases of
 *    the template fixtures (cases.json), rendered by Python Jinja2 into
 *    expected/<template>/<case>.txt, hold each assistant turn's calls in
 *    the template's own format (Qwen3: JSON; Qwen3-Coder and Qwen3.5: XML
 *    with Python's True/None). Parsing the text between the last
 *    "<|im_start|>assistant" of a turn and its "<|im_end|>" must give back
 *    the case's calls: the names and the arguments as JSON values (the
 *    expected values come from cases.json, not from the parser).
 * 2. Hand-written outputs: text around calls, several calls, malformed
 *    and unclosed calls (returned as content, byte for byte), schema types.
 * 3. Streaming: every split of the text into two and into single bytes
 *    gives the calls and content of the whole-text parse.
 * 4. The Llama 3.1-3.3 format (a reply that is one bare JSON object): the
 *    Llama-3.2 fixture's Jinja2 renderings of the tool-call cases parse back
 *    to the cases' calls; hand-written replies that are not exactly one
 *    call object stay content; streaming splits as in 3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "chat/toolcall.h"

static const char *shared_dir(void) {
    const char *s = getenv("BD_SHARED");
    return s ? s : "../shared";
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* Parse whole; returns content (malloc'd) and fills calls. */
static char *parse(const char *text, const json_t *tools, json_t *calls) {
    char *content = NULL;
    assert_true(chat_tool_parse(text, strlen(text), tools, &content, calls));
    return content;
}

/* The arguments of a parsed call as a JSON value. */
static json_t *args_of(json_t *call) {
    json_t *a = json_loads(json_string_value(json_object_get(call, "arguments")), 0, NULL);
    assert_non_null(a);
    return a;
}

/* ------------------------------------------------------------------------
 * 1. fixtures
 * ---------------------------------------------------------------------- */

static void test_fixture_roundtrip(void **state) {
    (void)state;
    static const char *templates[] = {"Qwen-Qwen3-0.6B", "Qwen3-Coder", "Qwen3.5-4B", "Qwen-Qwen2.5-7B-Instruct"};
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/templates/cases.json", shared_dir());
    json_t *root = json_load_file(path, 0, NULL);
    assert_non_null(root);
    json_t *cases = json_object_get(root, "cases");
    int checked = 0;
    for (size_t ti = 0; ti < sizeof templates / sizeof templates[0]; ti++) {
        size_t ci;
        json_t *c;
        json_array_foreach(cases, ci, c) {
            const char *name = json_string_value(json_object_get(c, "name"));
            snprintf(path, sizeof path, "%s/fixtures/templates/expected/%s/%s.txt", shared_dir(), templates[ti], name);
            char *txt = slurp(path);
            if (!txt) continue; /* the template raised on this case */
            /* the assistant turns with calls, in order */
            const char *at = txt;
            size_t mi;
            json_t *m;
            json_array_foreach(json_object_get(c, "messages"), mi, m) {
                json_t *tcs = json_object_get(m, "tool_calls");
                if (strcmp(json_string_value(json_object_get(m, "role")), "assistant") || !json_is_array(tcs)) continue;
                /* string arguments (tool-call-string-arguments) are
                 * written as they are: only object arguments compare */
                json_t *a0 = json_object_get(json_object_get(json_array_get(tcs, 0), "function"), "arguments");
                const char *start = strstr(at, "<|im_start|>assistant\n");
                assert_non_null(start);
                start += strlen("<|im_start|>assistant\n");
                const char *end = strstr(start, "<|im_end|>");
                assert_non_null(end);
                at = end;
                if (!json_is_object(a0)) continue;
                /* the reasoning block, if any, is not the parser's part */
                const char *th = strstr(start, "</think>");
                if (th && th < end) start = th + 8;
                size_t n = (size_t)(end - start);
                char *turn = strndup(start, n);
                json_t *calls = json_array();
                char *content = parse(turn, json_object_get(c, "tools"), calls);
                if (json_array_size(calls) != json_array_size(tcs))
                    fail_msg("%s/%s: %zu calls parsed, %zu in the case\n%s", templates[ti], name,
                             json_array_size(calls), json_array_size(tcs), turn);
                size_t k;
                json_t *tc;
                json_array_foreach(tcs, k, tc) {
                    json_t *fn = json_object_get(tc, "function");
                    json_t *got = json_array_get(calls, k);
                    assert_string_equal(json_string_value(json_object_get(got, "name")),
                                        json_string_value(json_object_get(fn, "name")));
                    json_t *ga = args_of(got);
                    if (!json_equal(ga, json_object_get(fn, "arguments"))) {
                        char *g = json_dumps(ga, 0), *w = json_dumps(json_object_get(fn, "arguments"), 0);
                        fail_msg("%s/%s call %zu: arguments %s, want %s", templates[ti], name, k, g, w);
                    }
                    json_decref(ga);
                    checked++;
                }
                /* the text before the calls ("tool-call-with-content") is the content */
                const char *want = json_string_value(json_object_get(m, "content"));
                if (want && *want) assert_string_equal(content, want);
                else assert_string_equal(content, "");
                free(content);
                free(turn);
                json_decref(calls);
            }
            free(txt);
        }
    }
    fprintf(stderr, "%d calls parsed back from the Jinja2 renderings\n", checked);
    assert_true(checked >= 20);
    json_decref(root);
}

/* ------------------------------------------------------------------------
 * 2. hand-written outputs
 * ---------------------------------------------------------------------- */

static void test_outputs(void **state) {
    (void)state;
    json_t *calls = json_array();
    /* text, two JSON calls, whitespace between */
    char *c = parse("Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                    "</tool_call>\n<tool_call>\n{\"name\":\"web_search\",\"arguments\":{\"query\":\"x\",\"n\":[1,2.5]}}"
                    "\n</tool_call>\n",
                    NULL, calls);
    assert_string_equal(c, "Let me check.");
    assert_int_equal(json_array_size(calls), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "arguments")),
                        "{\"city\":\"Paris\"}");
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 1), "arguments")),
                        "{\"query\":\"x\",\"n\":[1,2.5]}");
    free(c);
    json_array_clear(calls);

    /* not JSON inside: content, as written */
    const char *bad = "Sure <tool_call>\n{\"name\": \"f\", \"arguments\": {oops}\n</tool_call> done";
    c = parse(bad, NULL, calls);
    assert_string_equal(c, bad);
    assert_int_equal(json_array_size(calls), 0);
    free(c);
    /* no name / a name with a space / arguments not an object */
    const char *bad2[] = {"<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"a b\"}</tool_call>",
                          "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
                          "<tool_call><function=f>\n<parameter=x>\n1\n</function></tool_call>",
                          "<tool_call><function=f>\n</function>\ntrailing</tool_call>"};
    for (size_t i = 0; i < sizeof bad2 / sizeof bad2[0]; i++) {
        c = parse(bad2[i], NULL, calls);
        assert_string_equal(c, bad2[i]);
        assert_int_equal(json_array_size(calls), 0);
        free(c);
    }
    /* unclosed at the end: content, nothing lost */
    const char *open = "Hi\n<tool_call>\n{\"name\": \"f\", \"argu";
    c = parse(open, NULL, calls);
    assert_string_equal(c, open);
    free(c);
    /* a good call after a bad one still parses; the bad one stays content */
    c = parse("<tool_call>nope</tool_call>\n<tool_call>{\"name\": \"g\"}</tool_call>", NULL, calls);
    assert_string_equal(c, "<tool_call>nope</tool_call>");
    assert_int_equal(json_array_size(calls), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "arguments")), "{}");
    free(c);
    json_array_clear(calls);

    /* XML with schema types: a string that looks like a number stays a
     * string; integers, booleans (Python spelling), null and JSON values */
    json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                               "\"properties\":{\"code\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"},"
                               "\"ok\":{\"type\":\"boolean\"},\"z\":{\"type\":[\"string\",\"null\"]}}}}}]",
                               0, NULL);
    assert_non_null(tools);
    c = parse("<tool_call>\n<function=f>\n<parameter=code>\n007\n</parameter>\n<parameter=n>\n7\n</parameter>\n"
              "<parameter=ok>\nTrue\n</parameter>\n<parameter=z>\nNone\n</parameter>\n<parameter=other>\n"
              "{\"a\": [1, \"b\"]}\n</parameter>\n<parameter=text>\nline 1\nline 2\n</parameter>\n</function>\n"
              "</tool_call>",
              tools, calls);
    assert_string_equal(c, "");
    assert_int_equal(json_array_size(calls), 1);
    json_t *a = args_of(json_array_get(calls, 0));
    json_t *want = json_loads("{\"code\":\"007\",\"n\":7,\"ok\":true,\"z\":\"None\",\"other\":{\"a\":[1,\"b\"]},"
                              "\"text\":\"line 1\\nline 2\"}",
                              0, NULL);
    assert_true(json_equal(a, want));
    json_decref(a);
    json_decref(want);
    free(c);
    json_decref(tools);
    json_decref(calls);
}

/* ------------------------------------------------------------------------
 * 3. streaming = whole
 * ---------------------------------------------------------------------- */

static void stream_in(const char *text, const size_t *cuts, int n_cuts, const json_t *tools, char **content,
                      json_t *calls) {
    chat_tool_stream s;
    chat_tool_stream_init(&s, tools);
    chat_text out = {0};
    size_t at = 0, len = strlen(text);
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        assert_true(chat_tool_stream_feed(&s, text + at, to - at, &out, calls));
        at = to;
    }
    assert_true(chat_tool_stream_finish(&s, &out, calls));
    chat_tool_stream_free(&s);
    *content = out.p ? out.p : strdup("");
}

static void test_streaming(void **state) {
    (void)state;
    const char *texts[] = {
        "  Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
        "\n<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>\n",
        "a <tool_call> b </tool_call> c <tool_call>{\"name\":\"g\"}</tool_call>  d  ",
        "text with < and <tool and <tool_call but no call",
        "<tool_call>{\"name\":\"g\"}",
    };
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        json_t *want_calls = json_array();
        char *want = parse(texts[t], NULL, want_calls);
        size_t len = strlen(texts[t]);
        for (size_t cut = 0; cut <= len; cut++) {
            json_t *calls = json_array();
            char *got;
            stream_in(texts[t], &cut, 1, NULL, &got, calls);
            if (strcmp(got, want) || !json_equal(calls, want_calls))
                fail_msg("text %zu split at %zu: content [%s], want [%s]", t, cut, got, want);
            free(got);
            json_decref(calls);
        }
        size_t *cuts = malloc(len * sizeof *cuts);
        for (size_t i = 0; i < len; i++) cuts[i] = i;
        json_t *calls = json_array();
        char *got;
        stream_in(texts[t], cuts, (int)len, NULL, &got, calls);
        assert_string_equal(got, want);
        assert_true(json_equal(calls, want_calls));
        free(got);
        free(cuts);
        json_decref(calls);
        free(want);
        json_decref(want_calls);
    }
}

/* ------------------------------------------------------------------------
 * 4. Llama 3.1-3.3: bare JSON calls
 * ---------------------------------------------------------------------- */

static char *parse_fmt(const char *text, chat_tool_format f, json_t *calls) {
    char *content = NULL;
    assert_true(chat_tool_parse_format(text, strlen(text), NULL, f, &content, calls));
    return content;
}

static void test_llama3_fixtures(void **state) {
    (void)state;
    static const char head[] = "<|start_header_id|>assistant<|end_header_id|>\n\n";
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/templates/cases.json", shared_dir());
    json_t *root = json_load_file(path, 0, NULL);
    assert_non_null(root);
    int checked = 0;
    size_t ci;
    json_t *c;
    json_array_foreach(json_object_get(root, "cases"), ci, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        snprintf(path, sizeof path, "%s/fixtures/templates/expected/meta-llama-Llama-3.2-3B-Instruct/%s.txt",
                 shared_dir(), name);
        char *txt = slurp(path);
        if (!txt) continue; /* the template raised (parallel calls) */
        const char *at = txt;
        size_t mi;
        json_t *m;
        json_array_foreach(json_object_get(c, "messages"), mi, m) {
            if (strcmp(json_string_value(json_object_get(m, "role")), "assistant")) continue;
            const char *start = strstr(at, head);
            assert_non_null(start);
            start += strlen(head);
            const char *end = strstr(start, "<|eot_id|>");
            assert_non_null(end);
            at = end;
            json_t *tcs = json_object_get(m, "tool_calls");
            json_t *fn = json_object_get(json_array_get(tcs, 0), "function");
            /* string arguments are written as a JSON string: not a call */
            if (!json_is_array(tcs) || !json_is_object(json_object_get(fn, "arguments"))) continue;
            char *turn = strndup(start, (size_t)(end - start));
            json_t *calls = json_array();
            char *content = parse_fmt(turn, CHAT_TOOL_FORMAT_LLAMA3, calls);
            if (json_array_size(calls) != 1) fail_msg("%s: %zu calls parsed from %s", name, json_array_size(calls), turn);
            assert_string_equal(content, "");
            json_t *got = json_array_get(calls, 0);
            assert_string_equal(json_string_value(json_object_get(got, "name")),
                                json_string_value(json_object_get(fn, "name")));
            json_t *ga = args_of(got);
            assert_true(json_equal(ga, json_object_get(fn, "arguments")));
            json_decref(ga);
            /* the same text in the tag formats is no call */
            json_t *none = json_array();
            char *as_text = parse_fmt(turn, CHAT_TOOL_FORMAT_JSON, none);
            assert_int_equal(json_array_size(none), 0);
            free(as_text);
            json_decref(none);
            checked++;
            free(content);
            free(turn);
            json_decref(calls);
        }
        free(txt);
    }
    json_decref(root);
    fprintf(stderr, "%d Llama 3 calls parsed back from the Jinja2 renderings\n", checked);
    assert_true(checked >= 5);
}

static void test_llama3_outputs(void **state) {
    (void)state;
    static const struct {
        const char *text, *content; /* content NULL: one call to get_weather {"city": "Paris"} */
    } t[] = {
        {"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", NULL},
        {"\n  {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}  \n", NULL},
        {"It is {\"name\": \"get_weather\", \"parameters\": {}}", "It is {\"name\": \"get_weather\", \"parameters\": {}}"},
        {"{\"name\": \"get_weather\", \"parameters\": {}} and more", "{\"name\": \"get_weather\", \"parameters\": {}} and more"},
        {"{\"answer\": 42}", "{\"answer\": 42}"},
        {"{\"name\": \"get_weather\", \"parameters\": {\"city\": ", "{\"name\": \"get_weather\", \"parameters\": {\"city\":"},
        {"  plain text  ", "plain text"},
        {"   ", ""},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        json_t *calls = json_array();
        char *content = parse_fmt(t[i].text, CHAT_TOOL_FORMAT_LLAMA3, calls);
        if (t[i].content) {
            assert_string_equal(content, t[i].content);
            assert_int_equal(json_array_size(calls), 0);
        } else {
            assert_string_equal(content, "");
            assert_int_equal(json_array_size(calls), 1);
            assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "arguments")),
                                "{\"city\":\"Paris\"}");
        }
        /* streamed in single bytes: the same */
        chat_tool_stream s;
        chat_tool_stream_init_format(&s, NULL, CHAT_TOOL_FORMAT_LLAMA3);
        chat_text out = {0};
        json_t *sc = json_array();
        for (size_t k = 0; t[i].text[k]; k++) assert_true(chat_tool_stream_feed(&s, t[i].text + k, 1, &out, sc));
        assert_true(chat_tool_stream_finish(&s, &out, sc));
        chat_tool_stream_free(&s);
        assert_string_equal(out.p ? out.p : "", content);
        assert_true(json_equal(sc, calls));
        chat_text_free(&out);
        json_decref(sc);
        free(content);
        json_decref(calls);
    }
    /* a forced start (tool_choice), completed by the model */
    char *p = chat_tool_call_prefix(CHAT_TOOL_FORMAT_LLAMA3, "get_weather"), buf[256];
    snprintf(buf, sizeof buf, "%s{\"city\": \"Paris\"}}", p);
    json_t *calls = json_array();
    char *content = parse_fmt(buf, CHAT_TOOL_FORMAT_LLAMA3, calls);
    assert_string_equal(content, "");
    assert_int_equal(json_array_size(calls), 1);
    free(content);
    free(p);
    json_decref(calls);
}

static void test_format(void **state) {
    (void)state;
    char path[1024];
    struct {
        const char *file;
        chat_tool_format f;
    } t[] = {{"Qwen-Qwen3-0.6B", CHAT_TOOL_FORMAT_JSON},
             {"Qwen-Qwen2.5-7B-Instruct", CHAT_TOOL_FORMAT_JSON},
             {"Qwen3-Coder", CHAT_TOOL_FORMAT_XML},
             {"Qwen3.5-4B", CHAT_TOOL_FORMAT_XML},
             {"meta-llama-Llama-3.2-3B-Instruct", CHAT_TOOL_FORMAT_LLAMA3},
             {"mistralai-Mistral-Nemo-Instruct-2407", CHAT_TOOL_FORMAT_NONE},
             {"google-gemma-2-2b-it", CHAT_TOOL_FORMAT_NONE}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        snprintf(path, sizeof path, "%s/fixtures/templates/%s.jinja", shared_dir(), t[i].file);
        char *src = slurp(path);
        assert_non_null(src);
        assert_int_equal(chat_tool_format_detect(src), t[i].f);
        free(src);
    }
    /* a forced prefix with a name, completed by arguments, parses */
    char *p = chat_tool_call_prefix(CHAT_TOOL_FORMAT_JSON, "get_weather");
    char buf[256];
    snprintf(buf, sizeof buf, "%s{\"city\": \"Oslo\"}}\n</tool_call>", p);
    json_t *calls = json_array();
    char *c = parse(buf, NULL, calls);
    assert_string_equal(c, "");
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "name")), "get_weather");
    free(c);
    free(p);
    json_array_clear(calls);
    p = chat_tool_call_prefix(CHAT_TOOL_FORMAT_XML, "get_weather");
    snprintf(buf, sizeof buf, "%s<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>", p);
    c = parse(buf, NULL, calls);
    assert_string_equal(c, "");
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "arguments")), "{\"city\":\"Oslo\"}");
    free(c);
    free(p);
    json_decref(calls);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_roundtrip),
        cmocka_unit_test(test_outputs),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_llama3_fixtures),
        cmocka_unit_test(test_llama3_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
