/*
 * grammar.h - GBNF grammars: parser, byte-level matcher, vocabulary mask.
 *
 * The dialect is llama.cpp's GBNF (grammars/README.md of v0.5.0):
 *
 *   name ::= alternatives          rules; names are [a-zA-Z0-9-]+; `root` is the start
 *   a b c      sequence             a | b   alternatives       ( ... ) grouping
 *   "text"     literal              [a-z0-9_] [^"\\] class (ranges, negation)
 *   .          any character        x* x+ x? x{m} x{m,} x{m,n} repetition
 *   \xHH \uHHHH \UHHHHHHHH \t \r \n \\ \" \[ \] \-   escapes (in literals and classes)
 *   # ...      comment to the end of the line
 *   <[id]> !<[id]>   one token by id / any token but that one
 *   <text> !<text>   the same, the token whose special text is `text`
 *
 * Newlines end a rule except inside parentheses and after `|` or `::=`,
 * as in llama.cpp. Terminals are Unicode code points; the matcher reads
 * UTF-8 bytes and keeps an incomplete character across tokens.
 *
 * Deliberate differences from llama.cpp (each gives an error where
 * llama.cpp would guess or fall over): a rule defined twice, a reversed
 * range [z-a], a repetition count above BD_GRAMMAR_MAX_REPEAT (llama.cpp
 * silently makes {0,5000} unbounded), a grammar whose root can never
 * finish (empty language), and every resource limit below. Left recursion
 * is refused as in llama.cpp (also through rules that can be empty, so
 * `("a"?)*` is refused there too). Control tokens (empty piece) are not
 * matched by literals, only by token elements; EOG tokens are governed by
 * completeness (see bd_grammar_mask).
 *
 * Matching: a state is a set of pushdown stacks plus a pending partial
 * UTF-8 character. Stacks are hash-consed nodes and stack sets are
 * interned, so a state is a small value (bd_grammar_state): copying it is
 * a checkpoint and assigning it back is a rollback. Transitions between
 * stack sets are cached (a dense row per set for ASCII, a hash table for
 * other code points), which makes the matcher a lazily built DFA over the
 * sets a generation visits; the vocabulary mask walks a trie of the token
 * byte strings through it, pruning a whole subtree at the first byte that
 * no stack can take.
 *
 * Memory: every table has a fixed capacity, allocated once at creation
 * with calloc (pages are touched only when used), so matching and masking
 * never allocate. A grammar that needs more stacks, states or nodes than
 * the limits fails with a message instead of growing.
 *
 * Threading: a bd_grammar is mutable (its caches); use it from one thread
 * at a time. A bd_grammar_vocab is immutable once created and may be
 * shared by any number of grammars and threads.
 */
#ifndef BD_GRAMMAR_H
#define BD_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockdraft.h"

/* Limits (hostile input gets an error naming the limit). */
#define BD_GRAMMAR_MAX_SOURCE (4 << 20)  /* bytes of grammar text */
#define BD_GRAMMAR_MAX_RULES (1 << 16)   /* rules, including synthesized ones */
#define BD_GRAMMAR_MAX_ELEMS (1 << 20)   /* compiled elements */
#define BD_GRAMMAR_MAX_REPEAT 10000      /* m and n of x{m,n} */
#define BD_GRAMMAR_MAX_NEST 256          /* parenthesis depth */
#define BD_GRAMMAR_MAX_STACKS 4096       /* stacks in one state (ambiguity) */
#define BD_GRAMMAR_MAX_NODES (1 << 20)   /* stack nodes over the grammar's life */
#define BD_GRAMMAR_MAX_STATES (1 << 18)  /* distinct stack sets over the grammar's life */
#define BD_GRAMMAR_MAX_POOL (1 << 22)    /* stack ids stored in all sets together */
#define BD_GRAMMAR_MAX_TOKEN_BYTES 1024  /* longest token piece in a vocabulary */

/* A matcher state: id >= 0 is a stack set; utf8 holds a pending partial
 * character (0 if none). id BD_GRAMMAR_DEAD: the input is not a prefix of
 * the language; BD_GRAMMAR_ERROR: a limit was hit (bd_grammar_error). */
typedef struct bd_grammar_state {
    int32_t id;
    uint32_t utf8;
} bd_grammar_state;
#define BD_GRAMMAR_DEAD (-1)
#define BD_GRAMMAR_ERROR (-2)

typedef struct bd_grammar_vocab bd_grammar_vocab;
/* struct bd_grammar is declared in blockdraft.h (bd_gen_params.grammar) */

/* ------------------------------------------------------------------------
 * Vocabulary: token byte strings and their trie, built once per model.
 * ---------------------------------------------------------------------- */

/* Pieces as bd_token_piece(render_special = false) gives them; tokens with
 * an empty piece (control tokens) are matched only by token elements; EOG
 * tokens (bd_token_is_eog) never by literals. */
bd_grammar_vocab *bd_grammar_vocab_create(const bd_model *m, char *err, size_t errlen);
/* The same from a tokenizer alone (a vocabulary-only GGUF). */
struct bd_tokenizer;
bd_grammar_vocab *bd_grammar_vocab_create_from_tokenizer(const struct bd_tokenizer *t, char *err, size_t errlen);
/* The same from plain arrays (tests, tools): pieces[i] of lens[i] bytes
 * (lens[i] == 0: a control token whose special text is specials[i], or
 * NULL), eog[0..n_eog) the end-of-generation ids. Everything is copied. */
bd_grammar_vocab *bd_grammar_vocab_create_from_pieces(int32_t n_vocab, const char *const *pieces,
                                                      const int32_t *lens, const char *const *specials,
                                                      const int32_t *eog, int32_t n_eog, char *err,
                                                      size_t errlen);
void bd_grammar_vocab_free(bd_grammar_vocab *v);
int32_t bd_grammar_vocab_n_vocab(const bd_grammar_vocab *v);
bool bd_grammar_vocab_is_eog(const bd_grammar_vocab *v, int32_t id);
/* Bytes of token id (NULL and *len 0 for an empty piece). */
const uint8_t *bd_grammar_vocab_piece(const bd_grammar_vocab *v, int32_t id, int32_t *len);

/* ------------------------------------------------------------------------
 * Grammar
 * ---------------------------------------------------------------------- */

/* Parse and check a GBNF grammar (text of len bytes, need not be
 * NUL-terminated). v may be NULL for byte-level matching only (no token
 * elements, no mask); it must outlive the grammar. NULL with a message
 * ("line L col C: ...") on any error. */
bd_grammar *bd_grammar_create(const char *text, size_t len, const bd_grammar_vocab *v, char *err, size_t errlen);
void bd_grammar_free(bd_grammar *g);
const bd_grammar_vocab *bd_grammar_vocab_of(const bd_grammar *g);
/* Counts after compilation (rules incl. synthesized ones, elements). */
int32_t bd_grammar_n_rules(const bd_grammar *g);
int32_t bd_grammar_n_elements(const bd_grammar *g);

/* The start state (nothing read yet). */
bd_grammar_state bd_grammar_start(const bd_grammar *g);
/* Advance over bytes (a UTF-8 character may be split across calls).
 * Returns the new state (id BD_GRAMMAR_DEAD if the bytes leave the
 * language, BD_GRAMMAR_ERROR on a limit). s must be live (id >= 0). */
bd_grammar_state bd_grammar_advance_bytes(bd_grammar *g, bd_grammar_state s, const void *bytes, size_t n);
/* Advance over one token: its piece, or a token element (<[id]>). An EOG
 * token is accepted, leaving s unchanged, iff s is complete. */
bd_grammar_state bd_grammar_advance_token(bd_grammar *g, bd_grammar_state s, int32_t token);
/* Can the text end here (root finished, no partial character)? */
bool bd_grammar_is_complete(const bd_grammar *g, bd_grammar_state s);
/* Does the whole text match root? (false also on a limit error) */
bool bd_grammar_matches(bd_grammar *g, const void *text, size_t n);

/* Allowed tokens at state s: bits[(n_vocab + 31) / 32], bit i set iff
 * token i may come next, EOG tokens excluded (they are allowed exactly
 * when bd_grammar_is_complete). Returns the number of allowed non-EOG
 * tokens (0: only EOG, if complete, or nothing), or -1 on a limit error.
 * Needs a vocabulary. */
int32_t bd_grammar_mask(bd_grammar *g, bd_grammar_state s, uint32_t *bits);

/* The message of the last BD_GRAMMAR_ERROR / -1 ("" if none). */
const char *bd_grammar_error(const bd_grammar *g);

/* Statistics of the matcher's tables (for tests and reports). */
typedef struct bd_grammar_stats {
    int32_t n_nodes, n_states, n_rows;
    int64_t n_pool, n_cache_flushes;
} bd_grammar_stats;
void bd_grammar_get_stats(const bd_grammar *g, bd_grammar_stats *st);

/* ------------------------------------------------------------------------
 * Generation hook (used by generate.c and spec.c)
 *
 * A run holds the grammar state of one generation and the scratch for a
 * masked copy of the logits. The samplers then draw from the target's
 * distribution with every token the grammar forbids at logit -inf, so the
 * sampled law is exactly the masked distribution (llama.cpp's
 * "grammar first" order: mask, then top-k / top-p / min-p / temperature).
 * EOG tokens keep their logits iff the grammar is complete (and ignore_eog
 * is off); when the grammar is complete and allows nothing else the run
 * ends generation without sampling (as a forced EOG would).
 * All functions accept r == NULL and then do nothing (no grammar).
 * ---------------------------------------------------------------------- */

typedef struct bd_grammar_run bd_grammar_run;

bd_grammar_run *bd_grammar_run_create(bd_grammar *g, int32_t n_vocab, bool ignore_eog, char *err, size_t errlen);
void bd_grammar_run_free(bd_grammar_run *r);
/* Logits to sample the next token from: r == NULL -> logits itself;
 * else a masked copy (valid until the next call). NULL when generation
 * must end here: see bd_grammar_run_end. */
const float *bd_grammar_run_logits(bd_grammar_run *r, const float *logits);
/* The next token was chosen: advance. False (and the run failed) if the
 * grammar does not allow it. */
bool bd_grammar_run_accept(bd_grammar_run *r, int32_t token);
/* After a NULL / false from the two above: true if the grammar ended the
 * text (st->stopped_eog is set), false with the error in err. */
bool bd_grammar_run_end(bd_grammar_run *r, bd_gen_stats *st, char *err, size_t errlen);
/* Has the run ended the text or failed (so bd_grammar_run_end applies)? */
bool bd_grammar_run_stopped(const bd_grammar_run *r);
bd_grammar_state bd_grammar_run_state(const bd_grammar_run *r);

/* Test hook: when set, the speculative verifier does not advance the
 * grammar over accepted drafts, so later verify rows (and steps) are
 * masked with a stale state. Deliberately wrong; exists so the
 * statistical test can show that it detects a wrong grammar hook. */
extern bool bd_grammar_test_stale_rows;

#endif
