/*
 * test_json_schema.c - JSON Schema -> GBNF (src/chat/json_schema.c).
 *
 * Integer ranges are checked exhaustively around their bounds (expected:
 * plain integer comparison). Refused keywords must be named with their
 * location; recursive and hostile schemas must give a grammar or a clear
 * error, quickly. Instance-level agreement with a real validator (ajv) is
 * the end-to-end test tests/e2e/grammar_schema.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chat/json_schema.h"

static bd_grammar *schema_grammar(const char *json) {
    json_error_t je;
    json_t *s = json_loads(json, JSON_DECODE_ANY, &je);
    if (!s) fail_msg("bad test JSON: %s", je.text);
    char err[1024];
    bd_grammar *g = json_schema_grammar(s, NULL, err, sizeof err);
    json_decref(s);
    if (!g) fail_msg("schema failed: %s\n%s", err, json);
    return g;
}

static void expect_refusal(const char *json, const char *const *needles) {
    json_error_t je;
    json_t *s = json_loads(json, JSON_DECODE_ANY, &je);
    if (!s) fail_msg("bad test JSON: %s", je.text);
    char err[1024] = "";
    bd_grammar *g = json_schema_grammar(s, NULL, err, sizeof err);
    json_decref(s);
    if (g) fail_msg("schema should be refused: %s", json);
    for (int i = 0; needles[i]; i++)
        if (!strstr(err, needles[i])) fail_msg("error '%s' does not mention '%s'", err, needles[i]);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static bool matches(bd_grammar *g, const char *s) { return bd_grammar_matches(g, s, strlen(s)); }

/* ------------------------------------------------------------------------
 * Integer ranges
 * ---------------------------------------------------------------------- */

static void check_range(const char *schema, int64_t lo, int64_t hi, int64_t from, int64_t to) {
    bd_grammar *g = schema_grammar(schema);
    char buf[32];
    for (int64_t x = from; x <= to; x++) {
        snprintf(buf, sizeof buf, "%lld", (long long)x);
        bool want = x >= lo && x <= hi;
        if (matches(g, buf) != want) fail_msg("%s: %lld %s", schema, (long long)x, want ? "rejected" : "accepted");
    }
    /* never leading zeros, "-0", "+1" or fractions */
    if (matches(g, "-0") || matches(g, "+1") || matches(g, "007") || matches(g, "1.0")) fail_msg("%s: bad form", schema);
    bd_grammar_free(g);
}

static void integer_ranges(void **st) {
    (void)st;
    static const int64_t R[][2] = {{0, 150},     {1, 9},      {7, 7},       {0, 0},        {-5, 5},   {-150, -3},
                                   {-1000, -1000}, {10, 99},  {9, 10},      {99, 1001},    {123, 4567}, {-4567, -123},
                                   {-99, 1234},  {1999, 2001}, {100, 100000}, {-12, 0},   {0, 1}};
    char schema[160];
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", (long long)R[i][0],
                 (long long)R[i][1]);
        int64_t span = R[i][1] - R[i][0];
        int64_t pad = span > 2000 ? 300 : span + 300;
        if (span > 20000) { /* check both ends */
            check_range(schema, R[i][0], R[i][1], R[i][0] - pad, R[i][0] + pad);
            check_range(schema, R[i][0], R[i][1], R[i][1] - pad, R[i][1] + pad);
        } else {
            check_range(schema, R[i][0], R[i][1], R[i][0] - pad, R[i][1] + pad);
        }
    }
    /* exclusive and fractional bounds are rounded inwards */
    check_range("{\"type\":\"integer\",\"exclusiveMinimum\":3,\"exclusiveMaximum\":17}", 4, 16, -30, 60);
    check_range("{\"type\":\"integer\",\"minimum\":2.5,\"maximum\":19.99}", 3, 19, -30, 60);
    check_range("{\"type\":\"integer\",\"exclusiveMinimum\":2.5,\"exclusiveMaximum\":20.0}", 3, 19, -30, 60);
    check_range("{\"type\":\"integer\",\"minimum\":-2.5,\"maximum\":-0.5}", -2, -1, -30, 30);
    check_range("{\"type\":\"integer\",\"minimum\":3,\"exclusiveMinimum\":true,\"maximum\":9}", 4, 9, -30, 30); /* draft-04 */
    /* one bound only: the other is the 16-digit limit of the integer rule */
    check_range("{\"type\":\"integer\",\"minimum\":37}", 37, 9999999999999999LL, -100, 3000);
    check_range("{\"type\":\"integer\",\"maximum\":-37}", -9999999999999999LL, -37, -3000, 100);
    check_range("{\"type\":\"integer\",\"minimum\":0}", 0, 9999999999999999LL, -100, 1000);
    bd_grammar *g = schema_grammar("{\"type\":\"integer\",\"minimum\":37}");
    assert_true(matches(g, "9999999999999999"));
    assert_false(matches(g, "10000000000000000"));
    assert_true(matches(g, "1000000000000000"));
    bd_grammar_free(g);
    g = schema_grammar("{\"type\":\"integer\",\"minimum\":-9007199254740991,\"maximum\":9007199254740991}");
    assert_true(matches(g, "9007199254740991"));
    assert_false(matches(g, "9007199254740992"));
    assert_true(matches(g, "-9007199254740991"));
    assert_false(matches(g, "-9007199254740992"));
    assert_true(matches(g, "0"));
    bd_grammar_free(g);
    expect_refusal("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", L("no integer within"));
    expect_refusal("{\"type\":\"integer\",\"minimum\":\"x\"}", L("'minimum' must be a number"));
}

/* ------------------------------------------------------------------------
 * Structures (hand-checked instances in the canonical compact form)
 * ---------------------------------------------------------------------- */

static void structures(void **st) {
    (void)st;
    bd_grammar *g = schema_grammar(
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":\"integer\"},"
        "\"c\":{\"type\":\"boolean\"}},\"required\":[\"b\"]}");
    assert_true(matches(g, "{\"b\":1}"));
    assert_true(matches(g, "{\"b\":1,\"a\":\"x\"}"));
    assert_true(matches(g, "{\"b\":1,\"a\":\"x\",\"c\":true}"));
    assert_true(matches(g, "{\"b\":1,\"c\":false}"));
    assert_true(matches(g, "{ \"b\" : 1,\n  \"c\": false }"));
    assert_false(matches(g, "{\"b\":1 ,\"c\":false}")); /* no space before a comma (as llama.cpp) */
    assert_false(matches(g, "{}"));                    /* b required */
    assert_false(matches(g, "{\"b\":1,\"d\":2}"));     /* no additional properties (llama.cpp's default) */
    assert_false(matches(g, "{\"b\":1,\"c\":true,\"a\":\"x\"}")); /* schema order */
    assert_false(matches(g, "{\"b\":1,\"a\":\"x\",\"a\":\"y\"}"));
    bd_grammar_free(g);
    /* optional only, additional properties of a schema, keys never equal to a declared one */
    g = schema_grammar("{\"properties\":{\"ab\":{\"type\":\"null\"},\"abc\":{\"type\":\"null\"}},"
                       "\"additionalProperties\":{\"type\":\"integer\"}}");
    assert_true(matches(g, "{}"));
    assert_true(matches(g, "{\"abc\":null}"));
    assert_true(matches(g, "{\"ab\":null,\"abc\":null,\"x\":1,\"a\":2,\"abcd\":3,\"\":4}"));
    assert_true(matches(g, "{\"z\":5}"));
    assert_false(matches(g, "{\"ab\":1}"));
    assert_false(matches(g, "{\"x\":1,\"ab\":null}"));
    assert_false(matches(g, "{\"x\":1,\"abc\":2}"));
    assert_false(matches(g, "{\"x\":\"s\"}"));
    assert_false(matches(g, "{\"\\u0061b\":1}")); /* an escaped spelling of a declared key */
    bd_grammar_free(g);
    /* required names without a property schema take any value */
    g = schema_grammar("{\"type\":\"object\",\"required\":[\"k\"],\"properties\":{}}");
    assert_true(matches(g, "{\"k\":[1,{\"x\":null}]}"));
    assert_false(matches(g, "{}"));
    bd_grammar_free(g);
    /* arrays, tuples, strings, enums, const, type lists */
    g = schema_grammar("{\"type\":\"array\",\"items\":{\"enum\":[\"x\",1,null,{\"k\":[true]}]},\"minItems\":1,\"maxItems\":3}");
    assert_true(matches(g, "[\"x\"]"));
    assert_true(matches(g, "[1, null, {\"k\":[true]}]"));
    assert_false(matches(g, "[]"));
    assert_false(matches(g, "[1,1,1,1]"));
    assert_false(matches(g, "[2]"));
    bd_grammar_free(g);
    g = schema_grammar("{\"prefixItems\":[{\"type\":\"integer\"},{\"const\":\"a\\\"b\"}]}");
    assert_true(matches(g, "[5,\"a\\\"b\"]"));
    assert_false(matches(g, "[5]"));
    bd_grammar_free(g);
    g = schema_grammar("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}");
    assert_true(matches(g, "\"ab\""));
    assert_true(matches(g, "\"\xc3\xa9\\n\\u00e9\""));
    assert_false(matches(g, "\"a\""));
    assert_false(matches(g, "\"abcd\""));
    assert_false(matches(g, "\"\\ud83d\\ude00\"")); /* surrogate escapes are never produced */
    bd_grammar_free(g);
    g = schema_grammar("{\"type\":[\"string\",\"null\"],\"maxLength\":1}");
    assert_true(matches(g, "null"));
    assert_true(matches(g, "\"z\""));
    assert_false(matches(g, "\"zz\""));
    bd_grammar_free(g);
    g = schema_grammar("{\"type\":\"number\"}");
    assert_true(matches(g, "-0.5e-12"));
    assert_true(matches(g, "12"));
    assert_false(matches(g, "1e100")); /* two-digit exponents: always a finite double */
    assert_false(matches(g, ".5"));
    bd_grammar_free(g);
    g = schema_grammar("{\"type\":\"string\",\"format\":\"date\"}");
    assert_true(matches(g, "\"2024-02-29\""));
    assert_true(matches(g, "\"2000-02-29\""));
    assert_false(matches(g, "\"1900-02-29\""));
    assert_false(matches(g, "\"2023-02-29\""));
    assert_false(matches(g, "\"2023-04-31\""));
    assert_true(matches(g, "\"2023-12-31\""));
    assert_false(matches(g, "\"2023-13-01\""));
    bd_grammar_free(g);
    g = schema_grammar("{\"type\":\"string\",\"format\":\"date-time\"}");
    assert_true(matches(g, "\"2023-01-05T23:59:59.123+05:30\""));
    assert_true(matches(g, "\"2023-01-05T00:00:00Z\""));
    assert_false(matches(g, "\"2023-01-05T24:00:00Z\""));
    assert_false(matches(g, "\"2023-01-05T10:00:00\"")); /* a zone is required */
    bd_grammar_free(g);
    g = schema_grammar("{\"anyOf\":[{\"type\":\"boolean\"},{\"$ref\":\"#/$defs/p\"}],\"$defs\":{\"p\":{\"const\":7}}}");
    assert_true(matches(g, "7"));
    assert_true(matches(g, "false"));
    assert_false(matches(g, "8"));
    bd_grammar_free(g);
    g = schema_grammar("{\"type\":\"object\"}");
    assert_true(matches(g, "{\"any\":[1,\"x\",{}]}"));
    bd_grammar_free(g);
    g = schema_grammar("{}");
    assert_true(matches(g, "[1,\"x\",{}]"));
    assert_true(matches(g, "\"s\""));
    bd_grammar_free(g);
}

static void json_object_mode(void **st) {
    (void)st;
    char err[256];
    bd_grammar *g = json_schema_grammar(NULL, NULL, err, sizeof err);
    assert_non_null(g);
    assert_true(matches(g, "{}"));
    assert_true(matches(g, "{\"a\": [1, 2.5, {\"b\": null}], \"c\": \"\\u00e9\"}"));
    assert_false(matches(g, "[1]"));
    assert_false(matches(g, "\"x\""));
    assert_false(matches(g, "{\"a\":}"));
    bd_grammar_free(g);
}

/* ------------------------------------------------------------------------
 * Recursion, refusals, hostile schemas
 * ---------------------------------------------------------------------- */

static void recursion(void **st) {
    (void)st;
    bd_grammar *g = schema_grammar(
        "{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
        "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}}}");
    assert_true(matches(g, "{\"v\":1}"));
    assert_true(matches(g, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[{\"v\":4,\"kids\":[]}]}]}"));
    assert_false(matches(g, "{\"v\":1,\"kids\":[{}]}"));
    bd_grammar_free(g);
    g = schema_grammar("{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}"); /* root recursion */
    assert_true(matches(g, "[[],[[[]]]]"));
    assert_false(matches(g, "[1]"));
    bd_grammar_free(g);
    /* a schema that is only itself has no finite instance */
    expect_refusal("{\"$ref\":\"#\"}", L("left recursion"));
    expect_refusal("{\"anyOf\":[{\"$ref\":\"#\"},{\"$ref\":\"#/anyOf/0\"}]}", L("left recursion"));
    expect_refusal("{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/a\"},\"minItems\":1}}}",
                   L("matches nothing"));
}

static void refusals(void **st) {
    (void)st;
    expect_refusal("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"^x$\"}}}",
                   L("unsupported keyword 'pattern'", "#/properties/a"));
    expect_refusal("{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"not\":{\"type\":\"null\"}}}",
                   L("'uniqueItems' at #", "'not' at #/items"));
    const char *kws[] = {"patternProperties", "if", "then", "else", "contains", "multipleOf", "minProperties",
                         "maxProperties", "propertyNames", "dependentRequired", "dependentSchemas",
                         "unevaluatedProperties", "unevaluatedItems", "additionalItems", "$anchor", NULL};
    for (int i = 0; kws[i]; i++) {
        char s[128], want[64];
        snprintf(s, sizeof s, "{\"type\":\"object\",\"%s\":{}}", kws[i]);
        snprintf(want, sizeof want, "'%s'", kws[i]);
        expect_refusal(s, L(want));
    }
    expect_refusal("{\"type\":\"number\",\"minimum\":0}", L("'minimum' on type number"));
    expect_refusal("{\"type\":\"string\",\"format\":\"email\"}", L("unsupported format 'email'"));
    expect_refusal("{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}", L("'allOf'"));
    expect_refusal("{\"$ref\":\"#/$defs/a\",\"type\":\"string\",\"$defs\":{\"a\":{}}}", L("'type' next to '$ref'"));
    expect_refusal("{\"$ref\":\"https://example.com/s.json\"}", L("remote $ref"));
    expect_refusal("{\"$ref\":\"#/$defs/missing\"}", L("does not resolve"));
    expect_refusal("{\"type\":\"string\",\"maxLength\":20000}", L("'maxLength' 20000"));
    expect_refusal("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", L("minItems 3 > maxItems 2"));
    expect_refusal("{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", L("minLength 3 > maxLength 2"));
    expect_refusal("{\"enum\":[]}", L("'enum' allows no value"));
    expect_refusal("{\"type\":\"string\",\"enum\":[1,2]}", L("'enum' allows no value"));
    expect_refusal("false", L("schema false matches nothing"));
    expect_refusal("{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"]}", L("#/properties/a"));
    expect_refusal("{\"type\":\"float\"}", L("unknown type 'float'"));
    expect_refusal("[1]", L("must be an object or a boolean"));
    expect_refusal("{\"type\":\"array\",\"prefixItems\":[{},{}],\"minItems\":3}", L("tuple of 2 items"));
    expect_refusal("{\"properties\":{},\"required\":[\"b\"],\"additionalProperties\":false}", L("required 'b'"));
    /* annotations and unknown keywords are fine */
    bd_grammar *g = schema_grammar("{\"title\":\"T\",\"description\":\"d\",\"x-extension\":1,\"examples\":[1],"
                                   "\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"integer\"}");
    assert_true(matches(g, "12"));
    bd_grammar_free(g);
}

static void hostile(void **st) {
    (void)st;
    bd_grammar *g;
    /* deep nesting */
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    for (int i = 0; i < 100; i++) n += (size_t)sprintf(s + n, "{\"type\":\"array\",\"items\":");
    n += (size_t)sprintf(s + n, "{\"type\":\"null\"}");
    for (int i = 0; i < 100; i++) s[n++] = '}';
    s[n] = '\0';
    expect_refusal(s, L("nested deeper than 64"));
    /* a long chain of $refs is nesting too */
    n = (size_t)sprintf(s, "{\"$ref\":\"#/$defs/d0\",\"$defs\":{");
    for (int i = 0; i < 200; i++) n += (size_t)sprintf(s + n, "%s\"d%d\":{\"$ref\":\"#/$defs/d%d\"}", i ? "," : "", i, i + 1);
    n += (size_t)sprintf(s + n, ",\"d200\":{\"type\":\"null\"}}}");
    expect_refusal(s, L("nested deeper than 64"));
    /* type lists at every level reach each node several ways: each is
     * still converted once (this would be 2^60 visits otherwise) */
    n = 0;
    for (int i = 0; i < 60; i++) n += (size_t)sprintf(s + n, "{\"type\":[\"array\",\"object\"],\"items\":");
    n += (size_t)sprintf(s + n, "{\"type\":\"null\"}");
    for (int i = 0; i < 60; i++) s[n++] = '}';
    s[n] = '\0';
    g = schema_grammar(s);
    assert_true(matches(g, "[[[]],{}]"));
    bd_grammar_free(g);
    /* many properties: fine */
    n = (size_t)sprintf(s, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 500; i++) n += (size_t)sprintf(s + n, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    n += (size_t)sprintf(s + n, "}}");
    g = schema_grammar(s);
    assert_true(matches(g, "{\"p0\":1,\"p499\":2}"));
    assert_false(matches(g, "{\"p499\":2,\"p0\":1}"));
    bd_grammar_free(g);
    free(s);
    /* a cycle of references through arrays: finite grammar, any depth of instance */
    g = schema_grammar("{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/b\"}},"
                       "\"b\":{\"anyOf\":[{\"$ref\":\"#/$defs/a\"},{\"type\":\"null\"}]}}}");
    assert_true(matches(g, "[[null,[]],null]"));
    bd_grammar_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(integer_ranges), cmocka_unit_test(structures), cmocka_unit_test(json_object_mode),
        cmocka_unit_test(recursion),      cmocka_unit_test(refusals),   cmocka_unit_test(hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
