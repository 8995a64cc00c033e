/*
 * kernels.c - the ISA levels and their kernel tables.
 *
 * Each level is described once in k_levels: its name, the CPU features its
 * translation unit is compiled for (they must match the -m flags the
 * Makefile gives that file: a table is built only where every one of them
 * is present, since the compiler may use any of them anywhere in the
 * file), the OS permission it needs, its fill function and the level it is
 * laid over. Tables are built once, at first use: a level's table is a
 * copy of the one below it with the entries its fill function sets laid
 * over it, so a level may implement only some kernels.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* ------------------------------------------------------------------------
 * The reference level: the type table's scalar functions
 * ---------------------------------------------------------------------- */

static void fill_ref(bd_kernels *k) {
    for (uint32_t t = 0; t < BD_TYPE_COUNT; t++) {
        const bd_type_traits *tr = bd_type_get(t);
        if (!tr) continue;
        k->vec_dot_n[t] = tr->vec_dot;
        k->from_float[t] = tr->from_float;
    }
    bd_attn_kernels_fill_ref(k);
}

/* ------------------------------------------------------------------------
 * Levels
 * ---------------------------------------------------------------------- */

#define F(x) BD_CPU_BIT(BD_CPU_##x)
/* AVX2_FLAGS, AVXVNNI_FLAGS, AVX512_FLAGS and AMX_FLAGS in the Makefile, feature for
 * feature. (AVX-512 BF16 is not among them: kernels_avx512.c compiles its
 * one BF16 kernel with a target pragma and installs it only where the CPU
 * has the feature.) */
#define NEED_AVX2 (F(AVX2) | F(FMA) | F(F16C))
#define NEED_AVXVNNI (NEED_AVX2 | F(AVXVNNI))
#define NEED_AVX512 (NEED_AVX2 | F(AVX512F) | F(AVX512DQ) | F(AVX512BW) | F(AVX512VL) | F(AVX512VNNI))
#define NEED_AMX (NEED_AVX512 | F(AVX512VBMI) | F(AMX_TILE) | F(AMX_INT8))

typedef struct {
    const char *name;
    bd_isa below;                             /* the table this one is laid over */
    uint32_t needs;                           /* BD_CPU_BIT set */
    void (*fill)(bd_kernels *k);              /* NULL: not built for this architecture */
    bool (*enable)(char *err, size_t errlen); /* OS permission, if any */
} level_desc;

#if defined(__x86_64__)
#define X86(fn) fn
#else
#define X86(fn) NULL
#endif

static const level_desc k_levels[BD_ISA_COUNT] = {
    [BD_ISA_REF] = {"ref", BD_ISA_REF, 0, fill_ref, NULL},
    [BD_ISA_AVX2] = {"avx2", BD_ISA_REF, NEED_AVX2, X86(bd_kernels_fill_avx2), NULL},
    [BD_ISA_AVXVNNI] = {"avxvnni", BD_ISA_AVX2, NEED_AVXVNNI, X86(bd_kernels_fill_avxvnni), NULL},
    [BD_ISA_AVX512] = {"avx512", BD_ISA_AVX2, NEED_AVX512, X86(bd_kernels_fill_avx512), NULL},
    [BD_ISA_AMX] = {"amx", BD_ISA_AVX512, NEED_AMX, X86(bd_kernels_fill_amx), X86(bd_amx_enable)},
};

static bd_kernels g_tab[BD_ISA_COUNT];
static bool g_have[BD_ISA_COUNT];
static char g_why[BD_ISA_COUNT][160]; /* why a level is not available */
static const bd_kernels *g_chosen;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

const char *bd_isa_name(bd_isa isa) { return (unsigned)isa < BD_ISA_COUNT ? k_levels[isa].name : "?"; }

bool bd_isa_parse(const char *name, bd_isa *isa) {
    for (int i = 0; i < BD_ISA_COUNT; i++)
        if (!strcmp(name, k_levels[i].name)) {
            *isa = (bd_isa)i;
            return true;
        }
    return false;
}

bool bd_isa_runs_on(bd_isa isa, const bd_cpu *cpu, char *why, size_t whylen) {
    if ((unsigned)isa >= BD_ISA_COUNT) return bd_err(why, whylen, "no such level");
    const level_desc *d = &k_levels[isa];
    if (!d->fill) return bd_err(why, whylen, "not built for this architecture");
    char miss[120];
    if (bd_cpu_missing(cpu, d->needs, miss, sizeof miss) > 0) return bd_err(why, whylen, "CPU lacks %s", miss);
    return true;
}

/* Overlay the non-NULL entries of top onto k. */
static void overlay(bd_kernels *k, const bd_kernels *top) {
    for (int t = 0; t < BD_TYPE_COUNT; t++) {
        if (top->vec_dot_n[t]) k->vec_dot_n[t] = top->vec_dot_n[t];
        if (top->from_float[t]) k->from_float[t] = top->from_float[t];
        if (top->kv_to_f32[t]) k->kv_to_f32[t] = top->kv_to_f32[t];
    }
    if (top->attn_scores) k->attn_scores = top->attn_scores;
    if (top->attn_softmax) k->attn_softmax = top->attn_softmax;
    if (top->attn_accum) k->attn_accum = top->attn_accum;
    if (top->f16_to_f32) k->f16_to_f32 = top->f16_to_f32;
    if (top->f32_to_f16) k->f32_to_f16 = top->f32_to_f16;
    if (top->silu_mul) k->silu_mul = top->silu_mul;
    if (top->gdn_step) k->gdn_step = top->gdn_step;
    if (top->argmax) k->argmax = top->argmax;
    if (top->tile) k->tile = top->tile;
}

bool bd_il_prefetch_l1;
uint32_t bd_il_prefetch_bytes = 8192;
int bd_il_fused_rows_avx2 = 6;
int bd_il_pair_rows_avx2 = 3;
int bd_il_few_rows_q6k_avx2 = 2;
bd_il_rows_fn bd_il_one_row;

/* BLOCKDRAFT_ONE_ROW: "256" / "512" into *w256; false for another value */
static bool one_row_parse(const char *s, bool *w256) {
    if (!strcmp(s, "256") || !strcmp(s, "512")) {
        *w256 = s[0] == '2';
        return true;
    }
    return false;
}

/* BLOCKDRAFT_PREFETCH: "l1" / "l2" into *l1; false for another value */
static bool prefetch_parse(const char *s, bool *l1) {
    if (!strcmp(s, "l1") || !strcmp(s, "l2")) {
        *l1 = s[1] == '1';
        return true;
    }
    return false;
}

static void tables_build(void) {
    const bd_cpu *cpu = bd_cpu_get();
    /* Zen 5 (family 26), 2 threads, 4B Q4_K_M decode, L2 -> L1, three
     * alternating rounds of bench -r 3 -n 64: avx2 18.1-18.6 -> 19.4-20.3
     * tok/s, avxvnni 16.4-18.6 -> 18.6-20.5, avx512 17.1-18.4 -> 20.8-22.4;
     * 6- and 16-row verifies unchanged. Zen 4 had measured L2 8 KiB ahead
     * the best of the distances tried (kernels_simd.h); an L1 target at
     * that distance is unmeasured there and on Intel, so they keep L2. */
    const char *pf = getenv("BLOCKDRAFT_PREFETCH");
    if (!pf || !prefetch_parse(pf, &bd_il_prefetch_l1)) bd_il_prefetch_l1 = cpu->amd && cpu->family == 0x1A;
    /* the distance: kernels_simd.h's measurements (AMD 8 KiB, Intel 1 KiB) */
    bd_il_prefetch_bytes = cpu->amd ? 8192 : 1024;
    /* Zen 4 (family 25), avx2, kbench 9728 x 2560 Q4_K from memory, 2
     * threads, best of 10, three alternating rounds, ms, unpacked / read in
     * the kernel: 7 rows 50.5-51.5 / 35.7-36.4, 8 rows 53.0-53.7 /
     * 38.1-38.5, 9 rows 55.4-55.8 / 40.9-41.7, 12 rows 68.2-68.7 /
     * 52.1-53.6, 16 rows 86.8-87.3 / 72.2-73.3; on Zen 5 7 rows read slower
     * in the kernel and 8 even (kernels_avx2.c), hence 6 there and on AMD
     * CPUs not measured: Zen 3 shares family 0x19 but has no AVX-512. Intel
     * (the Xeon with AMX, family 6, at the avx2 level; same kbench, 16
     * rows, three rounds, unpacked / read in the kernel): 49.5-55.0 /
     * 42.4-46.1 ms, so 16 on every non-AMD CPU (only that Xeon measured). */
    const bool zen4 = cpu->amd && cpu->family == 0x19 && bd_cpu_has(cpu, BD_CPU_AVX512F);
    bd_il_fused_rows_avx2 = zen4 || !cpu->amd ? 16 : 6;
    /* Zen 4, avx2, kbench 9728 x 2560 Q4_K from memory (256 MiB a rep), 2
     * threads, best of 10, alternating builds, ms, 3 / 4 rows a pair-kernel
     * call: 16 rows 34.7-35.3 / 32.1-33.3 (five rounds), 12 rows 25.2-25.9 /
     * 24.6-25.0, 8 rows 18.2-18.5 / 17.3-17.5, 6 rows even (3 + 3 either
     * way). Zen 5 had read 4 slower (kernels_avx2.c), an Intel Xeon at the
     * avx2 level 16 rows 42.4-46.1 / 41.8-42.7 (one session; not taken). */
    bd_il_pair_rows_avx2 = zen4 ? 4 : 3;
    /* Zen 4, avx2, kbench Q6_K from memory, 2 threads, best of 20 (10 for
     * the head), ms, il_groups (2) / il_few_q6k (10), the runs alternating:
     * 2560 x 9728 (ffn_down) 3 rows 27.1 / 19.8, 4 rows 29.7 / 21.8, 5 rows
     * 34.3-34.9 / 26.5-26.8, 6 rows 36.8-37.5 / 30.9-31.6, 7 rows 40.9 /
     * 36.7, 8 rows 43.5 / 40.6, 10 rows 50.9 / 47.7, 12 and 16 rows even;
     * 151936 x 2560 (a Qwen3 output head) 5 rows 41.9 / 31.0, 6 rows 43.8
     * / 37.4, 9 rows 57.6 / 55.7, one row the same. Zen 5 (family 26),
     * the same kbench with the two routings alternating in one process
     * (-F 2,N), best of 20-30: 2560 x 9728 3 rows 19.2-20.2 / 19.7-20.1
     * (N 3 / 10), 4 rows 22.0 / 24.5, 5 rows 28.1 / 31.3, 6 rows 30.1 /
     * 35.8, 8 rows 34.6 / 41.6, 10 rows 44.9 / 53.6; the head 3 rows 29.2 /
     * 26.9, 5 rows 40.9 / 41.5: 2 there. Intel is unmeasured and keeps 2. */
    bd_il_few_rows_q6k_avx2 = zen4 ? 10 : 2;
    int best = BD_ISA_REF;
    /* levels come after the one they are laid over */
    for (int i = 0; i < BD_ISA_COUNT; i++) {
        const level_desc *d = &k_levels[i];
        if (!bd_isa_runs_on((bd_isa)i, cpu, g_why[i], sizeof g_why[i])) continue;
        if (i != BD_ISA_REF && !g_have[d->below]) {
            /* a copy (the compiler cannot see that below != i), cut to
             * what fits after the prefix */
            char below[120];
            snprintf(below, sizeof below, "%s", g_why[d->below]);
            snprintf(g_why[i], sizeof g_why[i], "needs level %s: %s", k_levels[d->below].name, below);
            continue;
        }
        if (d->enable && !d->enable(g_why[i], sizeof g_why[i])) continue;
        bd_kernels top;
        memset(&top, 0, sizeof top);
        d->fill(&top);
        if (i == BD_ISA_REF) memset(&g_tab[i], 0, sizeof g_tab[i]);
        else g_tab[i] = g_tab[d->below];
        overlay(&g_tab[i], &top);
        g_tab[i].name = d->name;
        g_tab[i].isa = (bd_isa)i;
        g_have[i] = true;
        best = i;
    }
    /* Zen 4, 2 threads, kbench 9728 x 2560 from memory (521 MiB a rep),
     * one activation row, both in one process, best of 20, two rounds, ms,
     * avx512 level's il_rows / avx2 level's: Q4_K 12.0-12.2 / 9.7-9.8, Q6_K
     * 14.4 / 13.0-13.5; one thread Q4_K 23.8-24.6 / 20.0-20.6. In cache
     * (one thread) the 512-bit loop is the faster (0.29 / 0.37 ms): what
     * holds it back is how its loads meet the memory stream, not its work.
     * A 256-bit copy of the avx512 loop with vpdpbusd (no vpmaddubsw)
     * streamed in between (10.6 ms, Q4_K), splitting its chains changed
     * nothing. Zen 5 (full-width 512-bit units) read the avx512 decode
     * faster than the avx2 one and keeps its own, as do Intel CPUs (not
     * measured). */
    bool w256 = zen4;
    const char *one = getenv("BLOCKDRAFT_ONE_ROW");
    if (one) one_row_parse(one, &w256);
    bd_il_one_row = w256 && g_have[BD_ISA_AVX2] && g_tab[BD_ISA_AVX2].tile ? g_tab[BD_ISA_AVX2].tile->il_rows : NULL;
    bd_isa forced;
    const char *env = getenv("BLOCKDRAFT_ISA");
    /* a forced level this machine cannot run is refused by
     * bd_kernels_check; meanwhile the best one serves */
    g_chosen = &g_tab[env && bd_isa_parse(env, &forced) && g_have[forced] ? (int)forced : best];
}

bool bd_isa_available(bd_isa isa, char *why, size_t whylen) {
    pthread_once(&g_once, tables_build);
    if ((unsigned)isa >= BD_ISA_COUNT) return bd_err(why, whylen, "no such level");
    if (g_have[isa]) return true;
    return bd_err(why, whylen, "%s", g_why[isa]);
}

const bd_kernels *bd_kernels_for(bd_isa isa) {
    pthread_once(&g_once, tables_build);
    return (unsigned)isa < BD_ISA_COUNT && g_have[isa] ? &g_tab[isa] : NULL;
}

const bd_kernels *bd_kernels_get(void) {
    pthread_once(&g_once, tables_build);
    return g_chosen;
}

const char *bd_kernels_one_row_name(void) {
    pthread_once(&g_once, tables_build);
    return bd_il_one_row ? "256" : "512";
}

const char *bd_kernels_prefetch_name(void) {
    pthread_once(&g_once, tables_build);
    return bd_il_prefetch_l1 ? "l1" : "l2";
}

bool bd_kernels_check(char *err, size_t errlen) {
    const char *pf = getenv("BLOCKDRAFT_PREFETCH");
    bool l1;
    if (pf && !prefetch_parse(pf, &l1))
        return bd_err(err, errlen, "BLOCKDRAFT_PREFETCH=%s: unknown prefetch target (known: l1 l2)", pf);
    const char *one = getenv("BLOCKDRAFT_ONE_ROW");
    bool w256;
    if (one && !one_row_parse(one, &w256))
        return bd_err(err, errlen, "BLOCKDRAFT_ONE_ROW=%s: unknown vector width (known: 256 512)", one);
    const char *env = getenv("BLOCKDRAFT_ISA");
    if (!env) return true;
    bd_isa isa;
    if (!bd_isa_parse(env, &isa)) {
        char known[80] = "";
        for (int i = 0; i < BD_ISA_COUNT; i++) {
            strncat(known, i ? " " : "", sizeof known - strlen(known) - 1);
            strncat(known, k_levels[i].name, sizeof known - strlen(known) - 1);
        }
        return bd_err(err, errlen, "BLOCKDRAFT_ISA=%s: unknown kernel level (known: %s)", env, known);
    }
    char why[200];
    if (!bd_isa_available(isa, why, sizeof why))
        return bd_err(err, errlen, "BLOCKDRAFT_ISA=%s: this machine cannot run that kernel level: %s", env, why);
    return true;
}
