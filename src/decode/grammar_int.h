/*
 * grammar_int.h - internals shared by grammar.c (parser), grammar_match.c
 * (matcher, mask) and grammar_vocab.c (token trie). Not a public API.
 */
#ifndef BD_GRAMMAR_INT_H
#define BD_GRAMMAR_INT_H

#include <stdarg.h>

#include "grammar.h"
#include "../base/base.h"

/* Element: type in the top 4 bits, value in the low 28. */
enum { E_END = 0, E_ALT = 1, E_REF = 2, E_CLASS = 3, E_TOKEN = 4, E_TOKEN_NOT = 5 };
#define EL(t, v) ((uint32_t)(t) << 28 | (uint32_t)(v))
#define EL_TYPE(e) ((e) >> 28)
#define EL_VAL(e) ((e) & 0x0FFFFFFFu)
#define ELEM_VAL_MAX 0x0FFFFFFF
#define EL_IS_END(e) (EL_TYPE(e) <= E_ALT) /* end of an alternative */

typedef struct {
    int32_t off, n;     /* sorted disjoint ranges: ranges[2*off ..] lo, hi */
    uint32_t ascii[4];  /* membership of code points 0..127 */
} gclass;

typedef struct {
    int32_t pos;    /* element to match next (never an END/ALT) */
    int32_t parent; /* the rest of the stack; node 0 is the empty stack */
} gnode;

#define G_IVAL 4 /* cached non-ASCII intervals per set */

typedef struct {
    int32_t off, n;    /* stack ids in pool[off ..], sorted ascending */
    uint8_t complete;  /* holds the empty stack */
    uint8_t has_tok;   /* some top is a token element */
    uint8_t has_cls;   /* some top is a class */
    uint8_t all_high;  /* one class on top holds every code point >= 0x80 */
    uint8_t iv_next_slot;
    /* non-ASCII transitions: over [lo, hi] every class on top answers the
     * same, so the next set is the same for every code point in it */
    uint32_t iv_lo[G_IVAL], iv_hi[G_IVAL];
    int32_t iv_next[G_IVAL]; /* next set + 2, 0 = empty slot */
} gset;

#define G_ROW_CAP 8192           /* cached ASCII rows ([128] next sets each) */
#define G_WORK_CAP (1 << 16)     /* expansion worklist */

struct bd_grammar {
    const bd_grammar_vocab *vocab;
    int32_t n_rules, n_elems, n_cls, root;
    uint32_t *elems;       /* [n_elems] */
    int32_t *rule_start;   /* [n_rules] */
    int32_t *alt_off;      /* [n_rules + 1] into alts */
    int32_t *alts;         /* start element of every alternative */
    gclass *cls;           /* [n_cls] */
    uint32_t *ranges;      /* [2 * n_ranges] */
    /* stack nodes, hash-consed */
    gnode *nodes;
    int32_t n_nodes;
    int32_t *node_hash;    /* id + 1, 0 = empty slot */
    uint32_t node_mask;
    /* stack sets, interned */
    gset *sets;
    int32_t n_sets;
    int32_t *set_hash;
    uint32_t set_mask;
    int32_t *pool;
    int64_t n_pool;
    /* transition caches */
    int32_t *row_of;       /* [MAX_STATES] row + 1, 0 = none */
    int32_t *rows;         /* [G_ROW_CAP][128]: next set + 2, 0 = unknown */
    int32_t *row_owner;    /* [G_ROW_CAP] */
    int32_t n_rows;
    int64_t n_flushes;
    /* expansion scratch */
    uint32_t *mark;        /* [MAX_NODES] epoch of the last visit */
    uint32_t epoch;
    int32_t *work;         /* [G_WORK_CAP] */
    int32_t *out;          /* [MAX_STACKS] */
    int32_t n_out;
    /* mask scratch */
    int32_t *dfs_set;      /* [MAX_TOKEN_BYTES + 1] */
    uint32_t *dfs_utf8;
    int32_t start;
    char err[256];
};

/* grammar_match.c */
bd_grammar *bd_grammar_alloc(int32_t n_rules, int64_t n_elems, int32_t n_cls, int64_t n_ranges,
                          const bd_grammar_vocab *v, char *err, size_t errlen);
bool bd_grammar_init_matcher(bd_grammar *g, char *err, size_t errlen);

/* grammar_vocab.c: preorder trie of the pieces of non-EOG tokens */
typedef struct {
    int32_t n;            /* nodes */
    uint8_t *byte;        /* [n] */
    uint16_t *depth;      /* [n] 1.. */
    int32_t *end;         /* [n] index after the subtree */
    int32_t *tok;         /* [n] first token ending here, -1 */
    int32_t *tok_next;    /* [n_vocab] next token with the same piece, -1 */
    int32_t max_depth;
} gtrie;

const gtrie *bd_grammar_vocab_trie(const bd_grammar_vocab *v);
const int32_t *bd_grammar_vocab_eog(const bd_grammar_vocab *v, int32_t *n);
/* The token whose special text (e.g. "<think>") is s: its id, -1 if none,
 * -2 if several. */
int64_t bd_grammar_vocab_find_special(const bd_grammar_vocab *v, const char *s, size_t n);

#endif
