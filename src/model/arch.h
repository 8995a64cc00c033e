/*
 * arch.h - the architecture table and the engine's named limits.
 *
 * One row per GGUF `general.architecture` value blockdraft knows, run or
 * not. Model loading, the pairing checks (and through them the gallery's
 * install checks), `blockdraft archs`, `--help` and the README's model table
 * all read this table, so a new architecture is one row here plus its
 * loader and forward.
 *
 * The limits below are the one schema both the drafter loader and the
 * header-only pairing check apply: a file the gallery accepts is a file the
 * engine loads.
 */
#ifndef BD_ARCH_H
#define BD_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockdraft.h"

/* ---- named limits ---------------------------------------------------- */

/* Trunk layers of a target, layers of a drafter (and so tap indices). */
#define BD_MAX_LAYERS 256
/* Target layers a DFlash drafter may tap. */
#define BD_MAX_TAPS 16
/* DFlash block length (anchor + masks): published drafters use 16. A
 * longer block still runs, with the draft length clamped to what one
 * bit-exact verify batch holds (BD_MATMUL_EXACT_ROWS - 1). */
#define BD_DFLASH_MIN_BLOCK 2
#define BD_DFLASH_MAX_BLOCK 64
/* Head dim of any attention layer (RoPE tables, attention scratch). */
#define BD_MAX_HEAD_DIM 1024
/* Mixture-of-experts: experts per layer and experts per token. */
#define BD_MAX_EXPERTS 1024
#define BD_MAX_EXPERTS_USED 64

/* ---- the table --------------------------------------------------------- */

enum bd_arch {
    BD_ARCH_LLAMA = 0,
    BD_ARCH_QWEN3,
    BD_ARCH_QWEN35,
    BD_ARCH_QWEN35MOE,
    BD_ARCH_QWEN3MOE,
    BD_ARCH_QWEN3NEXT,
    BD_ARCH_QWEN2,
    BD_ARCH_DFLASH,
    BD_ARCH_DFLASH_FORK,
};

enum bd_arch_role { BD_ROLE_TARGET = 0, BD_ROLE_DRAFTER = 1 };

/* NORM: adjacent lane pairs (llama). NEOX: lane i with i + n_rot/2.
 * IMROPE: Qwen3.5's interleaved multi-section RoPE; with the same position
 * in every stream (text) it is NEOX on the first n_rot lanes. */
enum bd_rope_type { BD_ROPE_NORM = 0, BD_ROPE_NEOX = 1, BD_ROPE_IMROPE = 2 };

typedef struct bd_arch_info {
    const char *name;          /* general.architecture */
    enum bd_arch id;
    enum bd_arch_role role;
    const char *family;        /* what it is, for people */
    const char *unsupported;   /* NULL when this build runs it, else why not */
    enum bd_rope_type rope;
    bool qk_norm;              /* per-head RMSNorm of q and k */
    bool recurrent;            /* has recurrent (Gated DeltaNet) layers */
    bool moe;                  /* mixture-of-experts feed-forward */
    bool moe_shared_expert;    /* ... with a gated shared expert (ffn_*_shexp) */
    bool moe_fused_gate_up;    /* ... whose gate/up stacks may come fused (ffn_gate_up_exps) */
    bool gdn_v_grouped;        /* GDN value heads grouped by key head, beta / alpha fused into one
                                  ssm_ba, q/k/v/z maybe fused into one ssm_in (qwen3next) */
    /* Read hyper-parameters and bind weights (model_load.c, dflash_load.c,
     * qwen35_load.c). NULL for rows that are not run. */
    bool (*load)(bd_model *m, char *err, size_t errlen);
    /* Forward one chunk of a target session (forward.c, qwen35.c). */
    void (*forward)(bd_session *s, const int32_t *tokens, int32_t n, enum bd_logits_mode mode);
} bd_arch_info;

/* The row of an architecture name, or NULL if blockdraft has never heard
 * of it. */
const bd_arch_info *bd_arch_find(const char *name);
int bd_arch_count(void);
const bd_arch_info *bd_arch_at(int i);
/* Comma-separated names of the rows of `role` that this build runs, e.g.
 * "llama, qwen3". Truncated to fit buf. */
const char *bd_arch_list(enum bd_arch_role role, char *buf, size_t n);
/* NULL if `name` is a target this build runs; else a sentence saying why
 * not (unknown, a drafter, or not supported and why), written into buf. */
const char *bd_arch_target_problem(const char *name, char *buf, size_t n);

#endif
