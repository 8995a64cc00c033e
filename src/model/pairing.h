/*
 * pairing.h - does this GGUF run here, is that GGUF a DFlash drafter we can
 * load, and do the two fit each other?
 *
 * Header-only checks (metadata and tensor table, never tensor data), used by
 * the installer after download (before a model is marked installed) and by
 * the engine's DFlash loader. A correct SHA-256 proves the bytes, not that a
 * drafter loads: published drafters have shipped in the fork schema
 * `dflash-draft` and with the pre-merge key `dflash.target_layer_ids`, so
 * each of those gets its own refusal message.
 *
 * Every check appends one line to a pairing_report (name, verdict, detail),
 * so `blockdraft show` can print what was checked, and the first failure
 * is also available as a plain message.
 */
#ifndef BD_PAIRING_H
#define BD_PAIRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../gguf/bd_gguf.h"

#define PAIRING_MAX_TAPS 16
#define PAIRING_MAX_CHECKS 24

enum pairing_verdict {
    PAIRING_OK = 0,
    PAIRING_WARN = 1,        /* could not be checked, or worth knowing */
    PAIRING_FAIL = 2,        /* the pair must not be installed / loaded */
    PAIRING_UNSUPPORTED = 3, /* valid file, but this build cannot run it yet */
};

typedef struct pairing_check {
    char name[32];            /* short id, e.g. "drafter.schema" */
    enum pairing_verdict verdict;
    char detail[320];
} pairing_check;

typedef struct pairing_report {
    int n_checks;
    pairing_check checks[PAIRING_MAX_CHECKS];
    /* Worst verdict over all checks (OK < WARN < UNSUPPORTED < FAIL). */
    enum pairing_verdict worst;
} pairing_report;

/* What the drafter's header says (filled by pairing_drafter_check). */
typedef struct pairing_drafter_info {
    uint32_t n_embd;          /* dflash.embedding_length */
    uint32_t n_layer;         /* dflash.block_count */
    uint32_t block_size;      /* dflash.block_size (16 if absent) */
    uint32_t mask_token_id;   /* tokenizer.ggml.mask_token_id */
    uint32_t n_taps;
    int32_t target_layers[PAIRING_MAX_TAPS]; /* GGUF convention: input of layer g */
} pairing_drafter_info;

/* What the target's header says (filled by pairing_target_check). */
typedef struct pairing_target_info {
    char arch[32];
    uint32_t n_embd;          /* <arch>.embedding_length */
    uint32_t n_layer;         /* <arch>.block_count */
    uint64_t n_vocab;         /* token_embd rows (padding rows included), else token count */
} pairing_target_info;

void pairing_report_init(pairing_report *r);
/* Append one check (silently dropped when the report is full). */
void pairing_report_add(pairing_report *r, const char *name, enum pairing_verdict v,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* First check with verdict >= min, or NULL. */
const pairing_check *pairing_report_first(const pairing_report *r, enum pairing_verdict min);

/* Is `arch` (general.architecture of a target) run by this build? Returns
 * true if so; else false with a message saying what is missing, e.g.
 * "architecture 'qwen35' (Qwen3.5/3.6 hybrid Gated DeltaNet) is not
 * supported by this build yet". */
bool pairing_arch_supported(const char *arch, char *why, size_t whylen);

/* Target checks: architecture known and supported, width/depth present.
 * Appends checks to r; returns false when the file cannot serve as a target
 * at all (an unsupported-but-valid architecture returns true with an
 * UNSUPPORTED check). info may be NULL. */
bool pairing_target_check(const bd_gguf_file *t, pairing_target_info *info, pairing_report *r);

/* Drafter schema checks: arch `dflash` (the fork `dflash-draft` refused),
 * `dflash.target_layers` present (the pre-merge `dflash.target_layer_ids`
 * refused), block size, mask id, tensor set and fc shape. Returns false on
 * any FAIL. info may be NULL. */
bool pairing_drafter_check(const bd_gguf_file *d, pairing_drafter_info *info, pairing_report *r);

/* Fit checks between a checked target and drafter: embedding width, every
 * tap < target layer count, mask id < target vocabulary, same tokenizer
 * (tokenizer.ggml.model, .pre and the tokens array compared string by
 * string). Returns false on any FAIL. */
bool pairing_fit_check(const bd_gguf_file *t, const pairing_target_info *ti, const bd_gguf_file *d,
                       const pairing_drafter_info *di, pairing_report *r);

/* All of the above. Returns false if anything FAILed (message of the first
 * failure in err); an unsupported target architecture does not fail here
 * (check r->worst). Either file may be NULL to check only the other. */
bool pairing_run(const bd_gguf_file *target, const bd_gguf_file *drafter, pairing_report *r,
                 pairing_drafter_info *dinfo, char *err, size_t errlen);

const char *pairing_verdict_name(enum pairing_verdict v);

#endif
