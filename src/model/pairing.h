/*
 * pairing.h - does this GGUF run here, is that GGUF a DFlash drafter we can
 * load, and do the two fit each other?
 *
 * Header-only checks (metadata and tensor table, never tensor data). They
 * are the one drafter schema of blockdraft: the installer runs them after a
 * download (before a model is marked installed), the drafter loader runs
 * the drafter check before binding a single tensor, and bd_dflash_create
 * runs the fit check on the pair; all apply the limits of arch.h. So a
 * drafter the gallery accepts is a drafter `run` loads, and one the loader
 * refuses is refused at install with the same words.
 *
 * A correct SHA-256 proves the bytes, not that a drafter loads: published
 * drafters have shipped in the fork schema `dflash-draft` and with the
 * pre-merge key `dflash.target_layer_ids`, so each of those gets its own
 * refusal message.
 *
 * Every check appends one line to a bd_pairing_report (name, verdict,
 * detail), so `blockdraft show` can print what was checked, and the first
 * failure is also available as a plain message.
 */
#ifndef BD_PAIRING_H
#define BD_PAIRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../gguf/bd_gguf.h"
#include "arch.h"

#define BD_PAIRING_MAX_CHECKS 24

enum bd_pairing_verdict {
    BD_PAIRING_OK = 0,
    BD_PAIRING_WARN = 1,        /* could not be checked, or worth knowing */
    BD_PAIRING_FAIL = 2,        /* the pair must not be installed / loaded */
    BD_PAIRING_UNSUPPORTED = 3, /* valid file, but this build cannot run it yet */
};

typedef struct bd_pairing_check {
    char name[32];            /* short id, e.g. "drafter.schema" */
    enum bd_pairing_verdict verdict;
    char detail[320];
} bd_pairing_check;

typedef struct bd_pairing_report {
    int n_checks;
    bd_pairing_check checks[BD_PAIRING_MAX_CHECKS];
    /* Worst verdict over all checks (OK < WARN < UNSUPPORTED < FAIL). */
    enum bd_pairing_verdict worst;
} bd_pairing_report;

/* The DFlash drafter schema: what a drafter's header says, once checked
 * (filled by bd_pairing_drafter_check). */
typedef struct bd_dflash_schema {
    uint32_t n_embd;          /* dflash.embedding_length */
    uint32_t n_layer;         /* dflash.block_count, <= BD_MAX_LAYERS */
    uint32_t block_size;      /* dflash.block_size (16 if absent), BD_DFLASH_MIN_BLOCK..MAX */
    uint32_t mask_token_id;   /* tokenizer.ggml.mask_token_id */
    uint32_t n_taps;          /* 1..BD_MAX_TAPS */
    int32_t target_layers[BD_MAX_TAPS]; /* GGUF convention: the input of target layer g */
    bool causal;              /* dflash.attention.causal (default false: non-causal block) */
    uint32_t swa_window;      /* dflash.attention.sliding_window; 0 = every layer full */
    bool swa_layer[BD_MAX_LAYERS]; /* dflash.attention.sliding_window_pattern: true = windowed */
    bool has_embeddings;      /* ships token_embd (else borrows the target's) */
    uint64_t n_vocab;         /* token_embd rows when it ships them */
} bd_dflash_schema;

/* What the target's header says (filled by bd_pairing_target_check). */
typedef struct bd_pairing_target {
    char arch[32];
    uint32_t n_embd;          /* <arch>.embedding_length */
    uint32_t n_layer;         /* trunk layers: block_count - nextn_predict_layers */
    uint64_t n_vocab;         /* token_embd rows (padding rows included), else token count */
} bd_pairing_target;

void bd_pairing_report_init(bd_pairing_report *r);
/* Append one check (silently dropped when the report is full). */
void bd_pairing_report_add(bd_pairing_report *r, const char *name, enum bd_pairing_verdict v, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));
/* First check with verdict >= min, or NULL. */
const bd_pairing_check *bd_pairing_report_first(const bd_pairing_report *r, enum bd_pairing_verdict min);
const char *bd_pairing_verdict_name(enum bd_pairing_verdict v);

/* Is `arch` (general.architecture of a target) run by this build? Reads
 * the architecture table; false with the table's reason otherwise. */
bool bd_pairing_arch_supported(const char *arch, char *why, size_t whylen);

/* Target checks: architecture known and supported, width and trunk depth
 * present. Appends checks to r; returns false when the file cannot serve
 * as a target at all (an unsupported-but-valid architecture returns true
 * with an UNSUPPORTED check). info may be NULL. */
bool bd_pairing_target_check(const bd_gguf_file *t, bd_pairing_target *info, bd_pairing_report *r);

/* The drafter schema: arch `dflash` (the fork `dflash-draft` refused),
 * `dflash.target_layers` present (the pre-merge `dflash.target_layer_ids`
 * refused), every limit of arch.h, no key or tensor of a variant the
 * engine does not run (named in the message), the tensor set complete and
 * fc's shape right. Returns false on any FAIL. s may be NULL. */
bool bd_pairing_drafter_check(const bd_gguf_file *d, bd_dflash_schema *s, bd_pairing_report *r);

/* Fit checks between a checked target and drafter: embedding width, every
 * tap < the target's trunk layers, mask id < target vocabulary, shipped
 * embeddings of the target's vocabulary size, same tokenizer
 * (tokenizer.ggml.model, .pre and the tokens array compared string by
 * string). Returns false on any FAIL. */
bool bd_pairing_fit_check(const bd_gguf_file *t, const bd_pairing_target *ti, const bd_gguf_file *d,
                          const bd_dflash_schema *s, bd_pairing_report *r);

/* All of the above. Returns false if anything FAILed (message of the first
 * failure in err); an unsupported target architecture does not fail here
 * (check r->worst). Either file may be NULL to check only the other. */
bool bd_pairing_run(const bd_gguf_file *target, const bd_gguf_file *drafter, bd_pairing_report *r,
                    bd_dflash_schema *schema, char *err, size_t errlen);

#endif
