/*
 * kernels.c - the kernel dispatch tables: scalar reference, AVX2, AVX-512.
 *
 * Each SIMD translation unit fills only the entries it implements; the
 * table handed out is the reference table with the SIMD entries laid over
 * it. A vec_dot_n entry a SIMD table lacks falls back to a loop over that
 * table's own vec_dot (not the reference one), so a partially written SIMD
 * table is still as fast as its single-row kernel.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* ------------------------------------------------------------------------
 * Reference entries
 * ---------------------------------------------------------------------- */

/* The weight types every table covers. */
#define BD_FOR_EACH_WTYPE(X) \
    X(F32) X(F16) X(BF16) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q4_K) X(Q5_K) X(Q6_K) \
    X(IQ4_NL) X(IQ4_XS)

#define REF_DOT(T)                                                          \
    static float ref_dot_##T(int64_t n, const void *w, const void *x) {     \
        return bd_vec_dot_ref(BD_TYPE_##T, n, w, x);                        \
    }
BD_FOR_EACH_WTYPE(REF_DOT)

#define REF_FROM(T)                                                         \
    static void ref_from_##T(const float *x, void *y, int64_t n) {          \
        bd_quantize_row(BD_TYPE_##T, x, y, n);                              \
    }
REF_FROM(F32)
REF_FROM(F16)
REF_FROM(BF16)
REF_FROM(Q8_0)
REF_FROM(Q8_1)
REF_FROM(Q8_K)

void bd_kernels_fill_ref(bd_kernels *k) {
    k->name = "ref";
#define SET_DOT(T) k->vec_dot[BD_TYPE_##T] = ref_dot_##T;
    BD_FOR_EACH_WTYPE(SET_DOT)
#undef SET_DOT
    k->from_float[BD_TYPE_F32] = ref_from_F32;
    k->from_float[BD_TYPE_F16] = ref_from_F16;
    k->from_float[BD_TYPE_BF16] = ref_from_BF16;
    k->from_float[BD_TYPE_Q8_0] = ref_from_Q8_0;
    k->from_float[BD_TYPE_Q8_1] = ref_from_Q8_1;
    k->from_float[BD_TYPE_Q8_K] = ref_from_Q8_K;
    bd_attn_kernels_fill_ref(k);
    /* vec_dot_n: filled by the generic loops in tables_build() */
}

/* ------------------------------------------------------------------------
 * Generic multi-row loops, one per (table, weight type)
 * ---------------------------------------------------------------------- */

static bd_kernels g_tab[4];  /* indexed by bd_isa */
static bool g_have[4];       /* this CPU can run table i */
static const bd_kernels *g_chosen;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#define GEN_N(ISA, T)                                                                      \
    static void gen_n_##ISA##_##T(int64_t n, const void *w, const void *x, size_t stride,  \
                                  int nx, float *out) {                                    \
        bd_vec_dot_fn f = g_tab[ISA].vec_dot[BD_TYPE_##T];                                 \
        for (int j = 0; j < nx; j++) out[j] = f(n, w, (const char *)x + (size_t)j * stride); \
    }
#define GEN_N_REF(T) GEN_N(0, T)
#define GEN_N_AVX2(T) GEN_N(1, T)
#define GEN_N_AVX512(T) GEN_N(2, T)
BD_FOR_EACH_WTYPE(GEN_N_REF)
BD_FOR_EACH_WTYPE(GEN_N_AVX2)
BD_FOR_EACH_WTYPE(GEN_N_AVX512)

static void set_generic_n(bd_kernels *k, int isa) {
#define SET_N(ISA, T) \
    if (!k->vec_dot_n[BD_TYPE_##T]) k->vec_dot_n[BD_TYPE_##T] = gen_n_##ISA##_##T;
#define SET_N0(T) SET_N(0, T)
#define SET_N1(T) SET_N(1, T)
#define SET_N2(T) SET_N(2, T)
    switch (isa) {
    case 0: BD_FOR_EACH_WTYPE(SET_N0) break;
    case 1: BD_FOR_EACH_WTYPE(SET_N1) break;
    default: BD_FOR_EACH_WTYPE(SET_N2) break;
    }
}

/* Overlay non-NULL entries of `top` onto `k`. */
static void merge(bd_kernels *k, const bd_kernels *top) {
    k->name = top->name;
    for (int t = 0; t < BD_TYPE_COUNT; t++) {
        if (top->vec_dot[t]) k->vec_dot[t] = top->vec_dot[t];
        if (top->vec_dot_n[t]) k->vec_dot_n[t] = top->vec_dot_n[t];
        if (top->from_float[t]) k->from_float[t] = top->from_float[t];
    }
    if (top->attn_scores) k->attn_scores = top->attn_scores;
    if (top->attn_softmax) k->attn_softmax = top->attn_softmax;
    if (top->attn_accum) k->attn_accum = top->attn_accum;
    if (top->silu_mul) k->silu_mul = top->silu_mul;
}

static void tables_build(void) {
    const bd_cpu *c = bd_cpu_get();
    bd_kernels ref;
    memset(&ref, 0, sizeof ref);
    bd_kernels_fill_ref(&ref);

    g_have[BD_ISA_REF] = true;
    g_have[BD_ISA_AVX2] = c->avx2 && c->fma && c->f16c;
    g_have[BD_ISA_AVX512] = g_have[BD_ISA_AVX2] && c->avx512f && c->avx512bw && c->avx512vl &&
                            c->avx512vnni;

    g_tab[BD_ISA_REF] = ref;
    set_generic_n(&g_tab[BD_ISA_REF], BD_ISA_REF);

    bd_kernels top;
    if (g_have[BD_ISA_AVX2]) {
        memset(&top, 0, sizeof top);
        top.name = "avx2";
        bd_kernels_fill_avx2(&top);
        g_tab[BD_ISA_AVX2] = ref;
        merge(&g_tab[BD_ISA_AVX2], &top);
        set_generic_n(&g_tab[BD_ISA_AVX2], BD_ISA_AVX2);
    }
    if (g_have[BD_ISA_AVX512]) {
        memset(&top, 0, sizeof top);
        top.name = "avx512";
        bd_kernels_fill_avx512(&top);
        g_tab[BD_ISA_AVX512] = ref;
        merge(&g_tab[BD_ISA_AVX512], &top);
        set_generic_n(&g_tab[BD_ISA_AVX512], BD_ISA_AVX512);
    }

    /* AMX: the AVX-512 table with the tile matmul on top, if the CPU has
     * the tiles and Linux grants this process their state. */
    if (g_have[BD_ISA_AVX512] && c->amx_int8 && bd_tile_enable()) {
        g_have[BD_ISA_AMX] = true;
        g_tab[BD_ISA_AMX] = g_tab[BD_ISA_AVX512];
        g_tab[BD_ISA_AMX].name = "amx";
        g_tab[BD_ISA_AMX].tile = true;
    }

    int pick = g_have[BD_ISA_AMX]      ? BD_ISA_AMX
               : g_have[BD_ISA_AVX512] ? BD_ISA_AVX512
               : g_have[BD_ISA_AVX2]   ? BD_ISA_AVX2
                                       : 0;
    const char *env = getenv("BLOCKDRAFT_ISA");
    if (env) {
        /* A forced ISA this CPU lacks is ignored (it could not run). */
        if (!strcmp(env, "ref")) pick = BD_ISA_REF;
        else if (!strcmp(env, "avx2") && g_have[BD_ISA_AVX2]) pick = BD_ISA_AVX2;
        else if (!strcmp(env, "avx512") && g_have[BD_ISA_AVX512]) pick = BD_ISA_AVX512;
        else if (!strcmp(env, "amx") && g_have[BD_ISA_AMX]) pick = BD_ISA_AMX;
    }
    g_chosen = &g_tab[pick];
}

const bd_kernels *bd_kernels_for(bd_isa isa) {
    pthread_once(&g_once, tables_build);
    if ((int)isa < 0 || (int)isa > 3 || !g_have[isa]) return NULL;
    return &g_tab[isa];
}

const bd_kernels *bd_kernels_get(void) {
    pthread_once(&g_once, tables_build);
    return g_chosen;
}
