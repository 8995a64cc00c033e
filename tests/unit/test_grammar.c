/*
 * test_grammar.c - the GBNF engine (src/decode/grammar*.c).
 *
 * Expected answers are written by hand from the GBNF rules in
 * llama.cpp's grammars/README.md (which strings a grammar accepts, which
 * errors a broken grammar gets); the vocabulary mask is checked against a
 * brute-force walk of every token of the Qwen3 and stories260K
 * vocabularies, and against hand-computed masks on a small vocabulary.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "blockdraft.h"
#include "decode/grammar.h"
#include "gguf/bd_gguf.h"
#include "tokenizer/tokenizer.h"

static bd_grammar *mk(const char *text, const bd_grammar_vocab *v) {
    char err[512];
    bd_grammar *g = bd_grammar_create(text, strlen(text), v, err, sizeof err);
    if (!g) fail_msg("grammar failed: %s\n%s", err, text);
    return g;
}

/* NULL-terminated lists of texts that must / must not match. */
static void check(const char *text, const char *const *yes, const char *const *no) {
    bd_grammar *g = mk(text, NULL);
    for (int i = 0; yes && yes[i]; i++)
        if (!bd_grammar_matches(g, yes[i], strlen(yes[i]))) fail_msg("%s\nshould match '%s'", text, yes[i]);
    for (int i = 0; no && no[i]; i++)
        if (bd_grammar_matches(g, no[i], strlen(no[i]))) fail_msg("%s\nshould not match '%s'", text, no[i]);
    bd_grammar_free(g);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static void expect_error(const char *text, size_t len, const char *needle) {
    char err[512] = "";
    bd_grammar *g = bd_grammar_create(text, len, NULL, err, sizeof err);
    if (g) fail_msg("grammar should fail (%s): %.80s", needle, text);
    if (!strstr(err, needle)) fail_msg("error '%s' does not mention '%s'", err, needle);
}

/* ------------------------------------------------------------------------
 * Parser: every construct
 * ---------------------------------------------------------------------- */

static void constructs(void **st) {
    (void)st;
    check("root ::= \"abc\"", L("abc"), L("", "ab", "abcd", "abd"));
    check("root ::= \"a\" | \"bc\" | \"\"", L("", "a", "bc"), L("b", "abc", "aa"));
    check("root ::= (\"a\" | \"b\") (\"c\" | \"d\")", L("ac", "ad", "bc", "bd"), L("a", "cd", "abc"));
    check("root ::= \"x\" \"ab\"*", L("x", "xab", "xabab"), L("xa", "xaba", "ab", ""));
    check("root ::= [0-9]+", L("0", "123", "9999999"), L("", "a", "1a"));
    check("root ::= \"-\"? [0-9]", L("5", "-5"), L("-", "--5", "55"));
    check("root ::= [a-c]{3}", L("abc", "aaa", "cba"), L("ab", "abcd", "abd"));
    check("root ::= \"ab\"{1,3}", L("ab", "abab", "ababab"), L("", "abababab", "aba"));
    check("root ::= \"z\"{2,}", L("zz", "zzz", "zzzzzzzz"), L("", "z"));
    check("root ::= \"q\"{0,2}", L("", "q", "qq"), L("qqq"));
    check("root ::= \"q\"{ 1 , 2 }", L("q", "qq"), L("", "qqq"));
    check("root ::= [a-zA-Z_] [a-zA-Z0-9_]*", L("_x1", "Abc", "z"), L("1a", "", "a-b"));
    check("root ::= [^abc]+", L("xyz", "\xc3\xa9", "\xf0\x9f\x98\x80"), L("xa", "", "c"));
    check("root ::= \"\\x41\\u00e9\\U0001F600\\t\\n\\r\\\\\\\"\\[\\]\\-\"", L("A\xc3\xa9\xf0\x9f\x98\x80\t\n\r\\\"[]-"),
          L("A"));
    check("root ::= [\\x00-\\x1F\\]\\-\\\\]+", L("\x01]-\\", "\t"), L("a", "^"));
    check("root ::= [a-]", L("a", "-"), L("b"));
    check("root ::= [a^]", L("a", "^"), L("b"));
    check("root ::= [^]", L("x", "\xe6\x97\xa5"), L("", "xy"));
    /* an empty class matches nothing (llama.cpp's reading); the first class
     * of a grammar once did arithmetic on the NULL range array (fuzz_text) */
    check("root ::= [] | \"a\"", L("a"), L("", "b", "[]"));
    check("root ::= \"a\" []*", L("a"), L("", "ab"));
    check("root ::= # nothing but a comment: the empty rule\n", L(""), L("a"));
    check("root ::= \"<\" . \">\"", L("<a>", "<\xc3\xa9>", "<\xf0\x9f\x98\x80>", "<\n>"), L("<>", "<ab>"));
    check("# a comment\n"
          "root ::= a |  # a newline after | continues the rule\n"
          "   b\n"
          "a ::= ( \"x\"\n"
          "  \"y\" )   # newlines inside parentheses\n"
          "b ::= \"z\"\n",
          L("xy", "z"), L("x", "y", "xyz"));
    check("root ::= \"(\" root \")\" | \"\"", L("", "()", "(())", "((()))"), L("(", "())", ")("));
    check("root ::= [\xe3\x81\x81-\xe3\x82\x9f]+ [^\xe3\x81\x81-\xe3\x82\x9f]",
          L("\xe3\x81\xb2\xe3\x82\x89x", "\xe3\x81\xb2\xe3\x82\x89\xe3\x82\xab"), L("x", "\xe3\x81\xb2"));
    check("root ::= a\r\na ::= \"x\"\r\n", L("x"), L("", "xx"));
    check("root ::= ((\"a\" | \"b\"){2} \"c\")+", L("abc", "bbcaac"), L("ac", "abcb", ""));
    check("root ::= \"\" \"a\" \"\"", L("a"), L("", "aa"));
    check("root ::= \"a\"{3}{2}", L("aaaaaa"), L("aaaaa", "aaa"));
    check("root ::= ident (\",\" ident)*\nident ::= [a-z]+", L("a", "ab,c,def"), L("a,", ",a", "a,,b"));
    check("root ::= <[3]> | \"x\"", L("x"), L("", "<[3]>"));
}

static void json_grammar(void **st) {
    (void)st;
    const char *g = "root   ::= object\n"
                    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
                    "object ::=\n"
                    "  \"{\" ws (\n"
                    "            string \":\" ws value\n"
                    "    (\",\" ws string \":\" ws value)*\n"
                    "  )? \"}\" ws\n"
                    "array  ::=\n"
                    "  \"[\" ws (\n"
                    "            value\n"
                    "    (\",\" ws value)*\n"
                    "  )? \"]\" ws\n"
                    "string ::=\n"
                    "  \"\\\"\" (\n"
                    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
                    "    \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
                    "  )* \"\\\"\" ws\n"
                    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
                    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
    check(g,
          L("{}", "{\"a\":1}", "{\"a\": [1, 2.5, -3e4, true, null, \"x\\n\\u00e9\"], \"b\": {\"c\": {}}}",
            "{\n  \"k\": \"\xe6\x97\xa5\xe6\x9c\xac\"}"),
          L("", "{", "{\"a\"}", "{\"a\":01x}", "[1]", "{\"a\":\"\x01\"}", "{\"a\":tru}", "{} {}"));
}

/* ------------------------------------------------------------------------
 * Parser: errors and hostile grammars
 * ---------------------------------------------------------------------- */

static void errors(void **st) {
    (void)st;
#define E(text, needle) expect_error(text, strlen(text), needle)
    E("root ::= \"a\"{10001}", "repetition count above 10000");
    E("root ::= \"a\"{0,99999999999999999999}", "repetition count above 10000");
    E("root ::= \"a\"{3,2}", "max below min");
    E("root ::= a\na ::= b\nb ::= a \"x\"", "left recursion");
    E("root ::= root \"x\" | \"y\"", "left recursion");
    E("root ::= a\na ::= \"\" a | \"x\"", "left recursion");
    E("root ::= e a\ne ::= \"\" | \"q\"\na ::= e root", "left recursion");
    E("root ::= (\"a\"?)*", "left recursion");
    E("root ::= \"a\" root", "matches nothing");
    E("root ::= [^\\x00-\\U0010FFFF]", "matches nothing");
    E("root ::= a \"x\"\na ::= \"y\" a", "matches nothing");
    E("root ::= x", "'x' is used (line 1) but never defined");
    E("a ::= \"x\"", "no 'root' rule");
    E("", "empty");
    E("   # only a comment\n", "empty");
    E("root ::= \"a\"\nroot ::= \"b\"", "defined twice");
    E("root ::= \"\\q\"", "unknown escape");
    E("root ::= \"\\x4\"", "hex digits");
    E("root ::= \"abc", "unterminated string");
    E("root ::= [abc", "unterminated character class");
    E("root ::= (\"a\"", "unclosed '('");
    E("root ::= \"a\")", "unmatched ')'");
    E("root ::= *\"a\"", "nothing before it to repeat");
    E("root ::= \"\\U00110000\"", "beyond U+10FFFF");
    E("root ::= \"\xff\"", "invalid UTF-8");
    E("root ::= \"\xc0\x80\"", "invalid UTF-8");
    E("root ::= [z-a]", "reversed range");
    E("root ::= <think>", "needs a vocabulary");
    E("root ::= <[12", "expected ']>'");
    E("root ::= \"a\" \"b\"\n  \"c\"", "expected a rule name"); /* newline ends a rule outside ( ) */
    E("root ::= \"a\"\n  | \"b\"", "expected a rule name");          /* ... also before a | */
    E("root = \"a\"", "expected '::='");
    E("root ::= \"a\" @", "unexpected '@'");
    expect_error("root ::= \"a\"\0", 13, "NUL byte");
#undef E
}

static void hostile(void **st) {
    (void)st;
    char err[512];
    /* deep nesting */
    char *deep = malloc(4096);
    int n = sprintf(deep, "root ::= ");
    for (int i = 0; i < 300; i++) deep[n++] = '(';
    n += sprintf(deep + n, "\"a\"");
    for (int i = 0; i < 300; i++) deep[n++] = ')';
    deep[n] = '\0';
    expect_error(deep, (size_t)n, "nested deeper than 256");
    /* 250 levels are fine */
    n = sprintf(deep, "root ::= ");
    for (int i = 0; i < 250; i++) deep[n++] = '(';
    n += sprintf(deep + n, "\"a\"");
    for (int i = 0; i < 250; i++) deep[n++] = ')';
    deep[n] = '\0';
    check(deep, L("a"), L("aa"));
    free(deep);
    /* nested repetitions cost O(sum of counts), not the product: this
     * language has 10^12 as in a row and compiles to a few thousand
     * elements */
    bd_grammar *g = mk("root ::= (((\"a\"{1000}){1000}){1000}){1000} \"b\"", NULL);
    assert_true(bd_grammar_n_elements(g) < 10000);
    bd_grammar_state s = bd_grammar_advance_bytes(g, bd_grammar_start(g), "aaaaaaaaaaaaaaaaaaaaaaaa", 24);
    assert_true(s.id >= 0);
    assert_int_equal(bd_grammar_advance_bytes(g, s, "b", 1).id, BD_GRAMMAR_DEAD);
    bd_grammar_free(g);
    /* rule and element limits */
    size_t cap = 1 << 20;
    char *big = malloc(cap);
    size_t m = (size_t)sprintf(big, "root ::= \"x\"\n");
    for (int i = 0; i < 8; i++) m += (size_t)sprintf(big + m, "r%d ::= \"a\"{0,10000}\n", i);
    expect_error(big, m, "rules (limit)");
    m = (size_t)sprintf(big, "root ::= \"x\"\n");
    for (int i = 0; i < 110; i++) m += (size_t)sprintf(big + m, "r%d ::= [a]{10000}\n", i);
    expect_error(big, m, "elements (limit)");
    free(big);
    /* too long */
    size_t huge = BD_GRAMMAR_MAX_SOURCE + 1;
    char *h = malloc(huge);
    memset(h, ' ', huge);
    assert_null(bd_grammar_create(h, huge, NULL, err, sizeof err));
    assert_non_null(strstr(err, "above the limit"));
    free(h);
    /* ambiguity grows with the input: the parallel-parse limit stops it */
    g = mk("root ::= \"x\" root \"y\" | \"x\" root | \"\"", NULL);
    char *xs = malloc(6000);
    memset(xs, 'x', 6000);
    s = bd_grammar_advance_bytes(g, bd_grammar_start(g), xs, 100);
    assert_true(s.id >= 0);
    s = bd_grammar_advance_bytes(g, bd_grammar_start(g), xs, 6000);
    assert_int_equal(s.id, BD_GRAMMAR_ERROR);
    assert_non_null(strstr(bd_grammar_error(g), "limit"));
    free(xs);
    bd_grammar_free(g);
    /* unbounded nesting: a fixed state / node budget, then an error */
    g = mk("root ::= \"(\" root \")\" | \"\"", NULL);
    size_t np = 1200000;
    char *par = malloc(np);
    memset(par, '(', np);
    s = bd_grammar_advance_bytes(g, bd_grammar_start(g), par, np);
    assert_int_equal(s.id, BD_GRAMMAR_ERROR);
    assert_non_null(strstr(bd_grammar_error(g), "limit"));
    free(par);
    bd_grammar_free(g);
}

/* ------------------------------------------------------------------------
 * Matcher: UTF-8
 * ---------------------------------------------------------------------- */

static void utf8(void **st) {
    (void)st;
    bd_grammar *g = mk("root ::= \"\\u00e9\"+", NULL); /* é = C3 A9 */
    bd_grammar_state s0 = bd_grammar_start(g);
    bd_grammar_state s = bd_grammar_advance_bytes(g, s0, "\xc3", 1);
    assert_true(s.id >= 0);
    assert_false(bd_grammar_is_complete(g, s));
    s = bd_grammar_advance_bytes(g, s, "\xa9", 1); /* a character split across calls */
    assert_true(bd_grammar_is_complete(g, s));
    assert_int_equal(bd_grammar_advance_bytes(g, s0, "\xc2", 1).id, BD_GRAMMAR_DEAD); /* U+0080..U+00BF */
    assert_int_equal(bd_grammar_advance_bytes(g, s0, "\xe0", 1).id, BD_GRAMMAR_DEAD);
    assert_int_equal(bd_grammar_advance_bytes(g, s0, "\xc3" "A", 2).id, BD_GRAMMAR_DEAD);
    assert_int_equal(bd_grammar_advance_bytes(g, s0, "\xa9", 1).id, BD_GRAMMAR_DEAD);
    bd_grammar_free(g);
    /* invalid sequences never match, even for "any character" */
    g = mk("root ::= .*", NULL);
    assert_true(bd_grammar_matches(g, "ok \xe6\x97\xa5 \xf0\x9f\x98\x80", 12));
    const char *bad[] = {"\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf", "\xed\xa0\x80", "\xed\xbf\xbf",
                         "\xf0\x80\x80\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\x80", NULL};
    for (int i = 0; bad[i]; i++) {
        bd_grammar_state x = bd_grammar_advance_bytes(g, bd_grammar_start(g), bad[i], strlen(bad[i]));
        if (x.id != BD_GRAMMAR_DEAD) fail_msg("invalid UTF-8 #%d accepted", i);
    }
    /* a partial character that no class on top can complete dies at once */
    assert_int_equal(bd_grammar_advance_bytes(g, bd_grammar_start(g), "\xed\xa0", 2).id, BD_GRAMMAR_DEAD);
    bd_grammar_free(g);
    g = mk("root ::= [\\U0001F600-\\U0001F64F]", NULL);
    s0 = bd_grammar_start(g);
    assert_true(bd_grammar_matches(g, "\xf0\x9f\x98\x80", 4));
    assert_true(bd_grammar_advance_bytes(g, s0, "\xf0\x9f", 2).id >= 0);
    assert_true(bd_grammar_advance_bytes(g, s0, "\xf0\x9f\x99", 3).id >= 0);
    assert_int_equal(bd_grammar_advance_bytes(g, s0, "\xf0\x9f\x9a", 3).id, BD_GRAMMAR_DEAD);
    assert_int_equal(bd_grammar_advance_bytes(g, s0, "\xf0\x9e", 2).id, BD_GRAMMAR_DEAD);
    bd_grammar_free(g);
    /* negated classes with multibyte members */
    check("root ::= [^\\u00e9\\u4e00-\\u9fff]+", L("abc", "\xc3\xa8", "\xe3\x81\x82"), L("\xc3\xa9", "a\xe4\xb8\x80"));
}

/* ------------------------------------------------------------------------
 * Tokens and the mask on a small vocabulary
 * ---------------------------------------------------------------------- */

enum { T_A, T_B, T_AB, T_ABC, T_C3, T_A9, T_E_ACUTE, T_C2, T_THINK, T_EOS, T_C, T_A2, T_SP, NV };

static bd_grammar_vocab *small_vocab(void) {
    static const char *pieces[NV] = {"a", "b", "ab", "abc", "\xc3", "\xa9", "\xc3\xa9", "\xc2", "", "", "c", "a", " "};
    static const char *specials[NV] = {[T_THINK] = "<think>", [T_EOS] = "</s>"};
    int32_t lens[NV];
    for (int i = 0; i < NV; i++) lens[i] = (int32_t)strlen(pieces[i]);
    int32_t eog[] = {T_EOS};
    char err[256];
    bd_grammar_vocab *v = bd_grammar_vocab_create_from_pieces(NV, pieces, lens, specials, eog, 1, err, sizeof err);
    if (!v) fail_msg("%s", err);
    return v;
}

static uint32_t g_bits[(NV + 31) / 32];

static void expect_mask(bd_grammar *g, bd_grammar_state s, const int *ids, int n) {
    int32_t c = bd_grammar_mask(g, s, g_bits);
    uint32_t want = 0;
    for (int i = 0; i < n; i++) want |= 1u << ids[i];
    if (g_bits[0] != want) fail_msg("mask %#x, expected %#x", g_bits[0], want);
    assert_int_equal(c, n);
}

#define MASK(g, s, ...)                                                                                                \
    do {                                                                                                               \
        const int ids_[] = {__VA_ARGS__};                                                                              \
        expect_mask(g, s, ids_, (int)(sizeof ids_ / sizeof ids_[0]));                                                  \
    } while (0)

static void mask_small(void **st) {
    (void)st;
    bd_grammar_vocab *v = small_vocab();
    bd_grammar *g = mk("root ::= \"a\" \"b\"? \"c\"?", v);
    bd_grammar_state s = bd_grammar_start(g);
    MASK(g, s, T_A, T_AB, T_ABC, T_A2);
    assert_false(bd_grammar_is_complete(g, s));
    s = bd_grammar_advance_token(g, s, T_A2);
    MASK(g, s, T_B, T_C);
    assert_true(bd_grammar_is_complete(g, s));
    assert_int_equal(bd_grammar_advance_token(g, s, T_EOS).id, s.id); /* EOG: accepted, state kept */
    s = bd_grammar_advance_token(g, s, T_C);
    expect_mask(g, s, NULL, 0); /* nothing but EOG */
    assert_true(bd_grammar_is_complete(g, s));
    assert_int_equal(bd_grammar_advance_token(g, bd_grammar_start(g), T_EOS).id, BD_GRAMMAR_DEAD);
    bd_grammar_free(g);

    /* partial characters: a token may end inside a character the grammar can finish */
    g = mk("root ::= \"\\u00e9\"+", v);
    s = bd_grammar_start(g);
    MASK(g, s, T_C3, T_E_ACUTE);
    s = bd_grammar_advance_token(g, s, T_C3);
    MASK(g, s, T_A9);
    assert_false(bd_grammar_is_complete(g, s));
    s = bd_grammar_advance_token(g, s, T_A9);
    MASK(g, s, T_C3, T_E_ACUTE);
    assert_true(bd_grammar_is_complete(g, s));
    bd_grammar_free(g);

    /* token elements: by id, by text, negated */
    g = mk("root ::= <think> \"a\" !<[1]>", v);
    s = bd_grammar_start(g);
    MASK(g, s, T_THINK);
    s = bd_grammar_advance_token(g, s, T_THINK);
    MASK(g, s, T_A, T_A2);
    s = bd_grammar_advance_token(g, s, T_A);
    /* every token but b and the EOG token (governed by completeness) */
    MASK(g, s, T_A, T_AB, T_ABC, T_C3, T_A9, T_E_ACUTE, T_C2, T_THINK, T_C, T_A2, T_SP);
    assert_int_equal(bd_grammar_advance_token(g, s, T_B).id, BD_GRAMMAR_DEAD);
    assert_true(bd_grammar_is_complete(g, bd_grammar_advance_token(g, s, T_THINK)));
    bd_grammar_free(g);
    g = mk("root ::= <[8]> \"b\" | \"ab\"", v);
    s = bd_grammar_start(g);
    MASK(g, s, T_A, T_AB, T_THINK, T_A2);
    bd_grammar_free(g);
    char err[256];
    assert_null(bd_grammar_create("root ::= <nope>", 15, v, err, sizeof err));
    assert_non_null(strstr(err, "no single token has the text <nope>"));
    assert_null(bd_grammar_create("root ::= <[13]>", 15, v, err, sizeof err));
    assert_non_null(strstr(err, "beyond the vocabulary"));
    /* literals never match control tokens */
    g = mk("root ::= \"<think>\"", v);
    expect_mask(g, bd_grammar_start(g), NULL, 0);
    bd_grammar_free(g);
    bd_grammar_vocab_free(v);
}

/* The generation hook: masked logits, forced end, ignore_eog. */
static void run_hook(void **st) {
    (void)st;
    bd_grammar_vocab *v = small_vocab();
    bd_grammar *g = mk("root ::= \"a\"+", v);
    float logits[NV];
    for (int i = 0; i < NV; i++) logits[i] = (float)i;
    char err[256];
    for (int ign = 0; ign < 2; ign++) {
        bd_grammar_run *r = bd_grammar_run_create(g, NV, ign, err, sizeof err);
        assert_non_null(r);
        const float *lg = bd_grammar_run_logits(r, logits);
        assert_non_null(lg);
        for (int i = 0; i < NV; i++) {
            bool allowed = i == T_A || i == T_A2;
            if (allowed) assert_true(lg[i] == logits[i]);
            else assert_true(isinf(lg[i]) && lg[i] < 0);
        }
        assert_true(bd_grammar_run_accept(r, T_A));
        lg = bd_grammar_run_logits(r, logits);
        assert_true(lg[T_A] == logits[T_A]);
        if (ign) assert_true(isinf(lg[T_EOS])); /* complete, but EOG is ignored */
        else assert_true(lg[T_EOS] == logits[T_EOS]);
        assert_false(bd_grammar_run_accept(r, T_B));
        bd_gen_stats gs = {0};
        assert_false(bd_grammar_run_end(r, &gs, err, sizeof err));
        assert_non_null(strstr(err, "not allowed"));
        bd_grammar_run_free(r);
    }
    bd_grammar_free(g);
    /* complete and nothing else allowed: the run ends the text */
    g = mk("root ::= \"ab\"", v);
    bd_grammar_run *r = bd_grammar_run_create(g, NV, true, err, sizeof err);
    assert_true(bd_grammar_run_accept(r, T_AB));
    assert_null(bd_grammar_run_logits(r, logits));
    bd_gen_stats gs = {0};
    assert_true(bd_grammar_run_end(r, &gs, err, sizeof err));
    assert_true(gs.stopped_eog);
    bd_grammar_run_free(r);
    bd_grammar_free(g);
    /* not complete and no token can continue: an error, not a hang */
    g = mk("root ::= \"z\"", v);
    r = bd_grammar_run_create(g, NV, false, err, sizeof err);
    assert_null(bd_grammar_run_logits(r, logits));
    assert_false(bd_grammar_run_end(r, &gs, err, sizeof err));
    assert_non_null(strstr(err, "no token of the vocabulary"));
    bd_grammar_run_free(r);
    /* vocabulary size must match the model */
    assert_null(bd_grammar_run_create(g, NV + 1, false, err, sizeof err));
    bd_grammar_free(g);
    g = mk("root ::= \"z\"", NULL);
    assert_null(bd_grammar_run_create(g, NV, false, err, sizeof err));
    bd_grammar_free(g);
    bd_grammar_vocab_free(v);
}

/* ------------------------------------------------------------------------
 * The mask against brute force on real vocabularies
 * ---------------------------------------------------------------------- */

static const char *JSONISH =
    "root ::= \"{\" ws (kv (\",\" ws kv)*)? \"}\" ws\n"
    "kv ::= str \":\" ws val\n"
    "val ::= str | num | jp | \"[\" ws (val (\",\" ws val)*)? \"]\" ws\n"
    "str ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\nt])* \"\\\"\" ws\n"
    "num ::= \"-\"? [0-9]{1,6} ws\n"
    "jp ::= [\\u3040-\\u30FF\\u4E00-\\u9FFF]{1,3} ws\n"
    "ws ::= [ \\n]?\n";

static void brute_force(const char *vocab_path, const char *const *texts) {
    char err[512];
    bd_gguf_file *f = bd_gguf_open(vocab_path, err, sizeof err);
    if (!f) fail_msg("%s", err);
    bd_tokenizer *tk = bd_tokenizer_load(f, err, sizeof err);
    assert_non_null(tk);
    bd_grammar_vocab *v = bd_grammar_vocab_create_from_tokenizer(tk, err, sizeof err);
    assert_non_null(v);
    int32_t V = bd_grammar_vocab_n_vocab(v);
    uint32_t *bits = malloc((size_t)(V + 31) / 32 * sizeof *bits);
    bd_grammar *g = mk(JSONISH, v);
    long checked = 0, allowed = 0;
    for (int k = 0; texts[k]; k++) {
        /* the state after each prefix of the text, byte by byte (so
         * partial characters are covered too) */
        size_t n = strlen(texts[k]);
        bd_grammar_state s = bd_grammar_start(g);
        for (size_t i = 0; i <= n; i++) {
            if (i > 0) s = bd_grammar_advance_bytes(g, s, texts[k] + i - 1, 1);
            if (s.id < 0) fail_msg("text %d dies at byte %zu", k, i);
            if (i % 3 != 0 && i != n) continue; /* every third prefix: enough, and quicker */
            int32_t c = bd_grammar_mask(g, s, bits);
            assert_true(c >= 0);
            int32_t cnt = 0;
            for (int32_t t = 0; t < V; t++) {
                bool bit = bits[t >> 5] >> (t & 31) & 1;
                bool ok = !bd_grammar_vocab_is_eog(v, t) && bd_grammar_advance_token(g, s, t).id >= 0;
                if (bit != ok) fail_msg("text %d prefix %zu: token %d mask %d, walk %d", k, i, t, bit, ok);
                cnt += ok;
            }
            assert_int_equal(c, cnt);
            checked++;
            allowed += cnt;
        }
    }
    printf("%s: %ld states checked against %d tokens each (%ld allowed in all)\n", vocab_path, checked, V, allowed);
    bd_grammar_free(g);
    free(bits);
    bd_grammar_vocab_free(v);
    bd_tokenizer_free(tk);
    bd_gguf_close(f);
}

static char g_qwen[1024], g_stories[1024];

static void mask_brute_qwen3(void **st) {
    (void)st;
    brute_force(g_qwen, L("{\"name\": \"Zo\xc3\xab \\\"x\\\"\", \"jp\": \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e, \"n\": [-12, 345678]}",
                          "{}", "{\"\xf0\x9f\x98\x80\xe2\x82\xac\": \"\\n\"}"));
}

static void mask_brute_stories(void **st) {
    (void)st;
    brute_force(g_stories, L("{\"story\": \"Once upon a time\", \"n\": 7}", "{\"\xe3\x81\x82\": \xe3\x81\x82}"));
}

int main(void) {
    const char *sh = getenv("BD_SHARED");
    if (!sh) sh = "../shared";
    snprintf(g_qwen, sizeof g_qwen, "%s/fixtures/qwen3-tokenizer/qwen3-vocab.gguf", sh);
    snprintf(g_stories, sizeof g_stories, "%s/fixtures/stories260K/stories260K.gguf", sh);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(constructs),     cmocka_unit_test(json_grammar),     cmocka_unit_test(errors),
        cmocka_unit_test(hostile),        cmocka_unit_test(utf8),             cmocka_unit_test(mask_small),
        cmocka_unit_test(run_hook),       cmocka_unit_test(mask_brute_qwen3), cmocka_unit_test(mask_brute_stories),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
