/*
 * test_kernels.c - every SIMD kernel against its scalar twin.
 *
 * For each ISA table this CPU can run (avx2, avx512):
 *   - activation quantizers (from_float Q8_0/Q8_1/Q8_K) must be bit-identical
 *     to the reference quantizer (same products, same round-half-even);
 *   - vec_dot and vec_dot_n (nx = 1..16, padded row stride) must equal the
 *     reference dot to f32 summation-order rounding: |simd - ref| <=
 *     1e-5 * sum|w_i x_i| (the integer block sums are exact in both; the
 *     f32 block additions are reordered), and bit for bit for Q4_K / Q6_K
 *     (same f32 steps everywhere: dot_ref.c's tile order, which the AMX
 *     matmul shares) and Q5_K, Q2_K, Q3_K (llama.cpp's);
 *   - batch invariance (also for the reference table): the result for one
 *     activation row is bit-identical whatever nx is and wherever the row
 *     sits in the batch, and equals vec_dot (quantized types). Decode
 *     (1 row) and speculative verify (n rows) rely on it for lossless
 *     output (matmul.c).
 *   - attention kernels (attn_scores / attn_softmax / attn_accum) are
 *     bit-identical to their scalar twins, and the softmax exp is within
 *     2 ulp of libm's double exp; so is the Gated DeltaNet step of the
 *     hybrid models (check_gdn), and its twin agrees with the delta rule
 *     computed in double.
 * Inputs: random raw block bytes (so every nibble / bit pattern occurs)
 * with f16 scales from moderate, huge (near 65504) and tiny (subnormal)
 * ranges, and activations from the reference quantizer (which never emits
 * the byte -128; the SIMD sign tricks rely on that, see kernels_avx2.c).
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

#include "base/base.h"
#include "model/attention.h"
#include "tensor/kernels.h"
#include "tensor/tensor.h"

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint64_t rng_u64(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}
static float rng_unit(void) { return (float)((rng_u64() >> 40) + 1) / (float)(1u << 24); }
static float rng_gauss(void) {
    float u = rng_unit(), v = rng_unit();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static size_t row_bytes(uint32_t type, int64_t n) {
    uint64_t b = 0;
    assert_true(bd_row_size(type, n, &b));
    return (size_t)b;
}

static void *xalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    assert_non_null(p);
    return p;
}

/* One row's dot through a table (vec_dot_n with one row: decode's call). */
static float one_dot(const bd_kernels *k, uint32_t type, int64_t n, const void *w, const void *x) {
    float r;
    k->vec_dot_n[type](n, w, x, 0, 1, &r);
    return r;
}

/* A check this machine cannot run: say why on a line tests/run.sh reports
 * ("skip: TEST: REASON"), then let cmocka count it as skipped, never as
 * passed. */
#define SKIP_BECAUSE(...)                                      \
    do {                                                       \
        char why_[240];                                        \
        snprintf(why_, sizeof why_, __VA_ARGS__);              \
        printf("skip: %s: %s\n", __func__, why_);              \
        fflush(stdout);                                        \
        skip();                                                \
    } while (0)

static const uint32_t k_wtypes[] = {BD_TYPE_Q4_K, BD_TYPE_Q6_K, BD_TYPE_Q8_0,   BD_TYPE_F32,
                                    BD_TYPE_F16,  BD_TYPE_BF16, BD_TYPE_Q5_K,   BD_TYPE_Q4_0,
                                    BD_TYPE_Q4_1, BD_TYPE_Q5_0, BD_TYPE_Q5_1,   BD_TYPE_IQ4_NL,
                                    BD_TYPE_IQ4_XS, BD_TYPE_Q2_K, BD_TYPE_Q3_K};
#define N_WTYPES (sizeof k_wtypes / sizeof k_wtypes[0])

static bd_f16 rand_scale_f16(int mode) {
    uint16_t sign = (rng_u64() & 1) ? 0x8000 : 0;
    switch (mode) {
    case 1: return (bd_f16)(sign | (0x7BFF - rng_u64() % 64)); /* near 65504 */
    case 2: return (bd_f16)(sign | (1 + rng_u64() % 1023));    /* subnormal */
    default: return bd_f32_to_f16((rng_unit() - 0.5f) * 0.1f);
    }
}

static void fill_random_weight(uint32_t type, void *buf, int64_t n, int mode) {
    size_t bytes = row_bytes(type, n);
    uint8_t *p = buf;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rng_u64();
    const bd_type_traits *t = bd_type_get(type);
    for (int64_t i = 0; i < n / t->blck; i++) {
        uint8_t *blk = p + i * t->blck_bytes;
        bd_f16 s[2] = {rand_scale_f16(mode), rand_scale_f16(mode)};
        switch (type) {
        case BD_TYPE_F32: ((float *)buf)[i] = rng_gauss(); break;
        case BD_TYPE_F16: ((bd_f16 *)buf)[i] = bd_f32_to_f16(rng_gauss()); break;
        case BD_TYPE_BF16: ((bd_bf16 *)buf)[i] = bd_f32_to_bf16(rng_gauss()); break;
        case BD_TYPE_Q4_1:
        case BD_TYPE_Q5_1:
        case BD_TYPE_Q4_K:
        case BD_TYPE_Q5_K: memcpy(blk, s, 4); break;
        case BD_TYPE_Q6_K: memcpy(blk + offsetof(block_q6_K, d), s, 2); break;
        case BD_TYPE_Q2_K: memcpy(blk + offsetof(block_q2_K, d), s, 4); break;
        case BD_TYPE_Q3_K: memcpy(blk + offsetof(block_q3_K, d), s, 2); break;
        default: memcpy(blk, s, 2); break;
        }
    }
}

/* Q4_K / Q6_K codes and scales near their largest values (a few low bits
 * flipped at random), so that against large positive activations a block's
 * integer sum passes 2^24: a kernel that converts partial sums to f32
 * before adding them all then rounds differently from the twin. */
static void saturate_weight(uint32_t type, void *buf, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (type == BD_TYPE_Q4_K) {
            block_q4_K *b = (block_q4_K *)buf + i;
            for (int j = 0; j < 12; j++) b->scales[j] = (uint8_t)(0xFF ^ (rng_u64() & 0x01));
            for (int j = 0; j < QK_K / 2; j++) b->qs[j] = (uint8_t)(0xFF ^ (rng_u64() & 0x11));
        } else if (type == BD_TYPE_Q6_K) {
            block_q6_K *b = (block_q6_K *)buf + i;
            for (int j = 0; j < QK_K / 16; j++) b->scales[j] = (int8_t)(127 - (int)(rng_u64() % 3));
            for (int j = 0; j < QK_K / 2; j++) b->ql[j] = (uint8_t)(0xFF ^ (rng_u64() & 0x11));
            for (int j = 0; j < QK_K / 4; j++) b->qh[j] = 0xFF;
        }
    }
}

/* sum |w_i x_i| over the dequantized operands: the tolerance scale. */
static double dot_magnitude(uint32_t type, const void *w, const void *x, int64_t n) {
    uint32_t atype = bd_type_get(type)->vec_dot_type;
    float *a = xalloc((size_t)n * sizeof(float)), *b = xalloc((size_t)n * sizeof(float));
    assert_true(bd_dequantize_row(type, w, a, n));
    assert_true(bd_dequantize_row(atype, x, b, n));
    double m = 0;
    for (int64_t i = 0; i < n; i++) m += fabs((double)a[i] * b[i]);
    free(a);
    free(b);
    return m;
}

static void check_from_float(const bd_kernels *k) {
    const uint32_t atypes[] = {BD_TYPE_Q8_0, BD_TYPE_Q8_1, BD_TYPE_Q8_K};
    const int64_t n = 1024;
    float *x = xalloc(n * sizeof(float));
    for (size_t a = 0; a < 3; a++) {
        size_t rb = row_bytes(atypes[a], n);
        uint8_t *want = xalloc(rb), *got = xalloc(rb);
        for (int rep = 0; rep < 8; rep++) {
            for (int64_t i = 0; i < n; i++) x[i] = rng_gauss() * (rep == 3 ? 1e-30f : 1.0f);
            if (rep == 1) /* zero block, +/- tie for the largest magnitude */
                for (int i = 0; i < 256; i++) {
                    x[i] = 0;
                    x[256 + i] = (i == 40) ? -7.0f : (i == 90) ? 7.0f : rng_gauss();
                    x[512 + i] = (i == 40) ? 7.0f : (i == 90) ? -7.0f : rng_gauss();
                }
            if (rep == 2) /* exact .5 products: rounding ties */
                for (int64_t i = 0; i < n; i++) x[i] = (float)((int)(rng_u64() % 255) - 127) * 0.5f;
            bd_quantize_row(atypes[a], x, want, n);
            memset(got, 0xA5, rb);
            k->from_float[atypes[a]](x, got, n);
            if (memcmp(want, got, rb) != 0) {
                print_error("%s from_float %s differs (rep %d)\n", k->name,
                            bd_type_name(atypes[a]), rep);
                fail();
            }
        }
        free(want);
        free(got);
    }
    free(x);
}

static void check_dots(const bd_kernels *k) {
    const int64_t sizes[] = {256, 768, 2560};
    for (size_t t = 0; t < N_WTYPES; t++) {
        uint32_t type = k_wtypes[t];
        uint32_t atype = bd_type_get(type)->vec_dot_type;
        /* Q4_K / Q6_K (tile order), Q5_K, Q2_K and Q3_K (llama.cpp's order):
         * every table does dot_ref.c's f32 steps, so the results are
         * bit-identical */
        const bool exact = type == BD_TYPE_Q4_K || type == BD_TYPE_Q5_K || type == BD_TYPE_Q6_K ||
                           type == BD_TYPE_Q2_K || type == BD_TYPE_Q3_K;
        for (size_t si = 0; si < 3; si++) {
            int64_t n = sizes[si];
            /* odd element counts for the float types: masked tails */
            if (type == BD_TYPE_F32 || type == BD_TYPE_F16 || type == BD_TYPE_BF16) n += 13 * si;
            if (bd_type_get(type)->blck == 32 && si == 1) n = 32 * 7; /* odd block count */
            size_t wb = row_bytes(type, n);
            /* padded rows (kept 4-byte aligned: block_q8_K holds a float) */
            size_t stride = row_bytes(atype, n) + 64 + 4 * si;
            void *w = xalloc(wb);
            uint8_t *x = xalloc(16 * stride);
            float *f = xalloc((size_t)n * sizeof(float));
            /* rep 3: Q4_K / Q6_K block sums above 2^24 (saturate_weight) */
            const int reps = type == BD_TYPE_Q4_K || type == BD_TYPE_Q6_K ? 4 : 3;
            for (int rep = 0; rep < reps; rep++) {
                fill_random_weight(type, w, n, rep == 3 ? 0 : rep);
                if (rep == 3) saturate_weight(type, w, n);
                for (int r = 0; r < 16; r++) {
                    for (int64_t i = 0; i < n; i++)
                        f[i] = rep == 3 ? 1.0f + 0.01f * rng_gauss() : rng_gauss() * (r == 5 ? 1e-3f : 1.0f);
                    if (r == 7) memset(f, 0, (size_t)n * sizeof(float));
                    assert_true(bd_quantize_row(atype, f, x + r * stride, n));
                }
                float want[16];
                double mag[16];
                for (int r = 0; r < 16; r++) {
                    want[r] = bd_vec_dot_ref(type, n, w, x + r * stride);
                    mag[r] = dot_magnitude(type, w, x + r * stride, n);
                }
                for (int r = 0; r < 16; r++) {
                    float got = one_dot(k, type, n, w, x + r * stride);
                    double tol = 1e-5 * mag[r] + 1e-30;
                    if (exact ? memcmp(&got, &want[r], sizeof got) != 0
                              : !(fabs((double)got - want[r]) <= tol)) {
                        print_error("%s one-row vec_dot_n %s n=%ld rep=%d row=%d: got %.9g want %.9g\n",
                                    k->name, bd_type_name(type), (long)n, rep, r, got, want[r]);
                        fail();
                    }
                }
                for (int nx = 1; nx <= 16; nx++) {
                    float got[16];
                    for (int r = 0; r < 16; r++) got[r] = NAN;
                    k->vec_dot_n[type](n, w, x, stride, nx, got);
                    for (int r = 0; r < 16; r++) {
                        if (r >= nx) { /* must not write past nx */
                            assert_true(isnan(got[r]));
                            continue;
                        }
                        double tol = 1e-5 * mag[r] + 1e-30;
                        if (exact ? memcmp(&got[r], &want[r], sizeof got[r]) != 0
                                  : !(fabs((double)got[r] - want[r]) <= tol)) {
                            print_error("%s vec_dot_n %s n=%ld rep=%d nx=%d row=%d: got %.9g "
                                        "want %.9g\n",
                                        k->name, bd_type_name(type), (long)n, rep, nx, r, got[r],
                                        want[r]);
                            fail();
                        }
                    }
                }
            }
            free(w);
            free(x);
            free(f);
        }
    }
}

/*
 * Batch invariance, bitwise. Rows are laid out as bd_matmul lays them out
 * (stride = activation row bytes rounded up to 64). For each starting row
 * o and batch size nx (o + nx <= 16), vec_dot_n(x + o*stride, nx)[j] must
 * have the same bits as vec_dot_n(x + (o+j)*stride, 1)[0]. Block counts
 * cover one block, several, odd counts, and (block-32 types) counts that
 * cross the 16-block groups of the AVX-512 Q8_0-family kernels.
 */
static void check_batch_invariance(const bd_kernels *k) {
    static const int64_t blocks[] = {1, 3, 5, 16, 17, 35};
    for (size_t t = 0; t < N_WTYPES; t++) {
        uint32_t type = k_wtypes[t];
        const bd_type_traits *tr = bd_type_get(type);
        uint32_t atype = tr->vec_dot_type;
        const bool is_float = !tr->is_quant;
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
            /* float types: element counts that leave masked tails */
            int64_t n = is_float ? blocks[bi] * 16 + 5 : blocks[bi] * tr->blck;
            if (tr->blck == QK_K && blocks[bi] > 5) continue; /* keep it quick */
            size_t wb = row_bytes(type, n);
            size_t stride = (row_bytes(atype, n) + 63) & ~(size_t)63;
            void *w = xalloc(wb);
            uint8_t *x = xalloc(16 * stride);
            float *f = xalloc((size_t)n * sizeof(float));
            fill_random_weight(type, w, n, 0);
            for (int r = 0; r < 16; r++) {
                /* a few rows share one block pattern up to a sign: many
                 * equal-magnitude block sums, where order matters most */
                for (int64_t i = 0; i < n; i++) f[i] = rng_gauss() * (1.0f + (float)(r % 3));
                assert_true(bd_quantize_row(atype, f, x + r * stride, n));
            }
            float one[16];
            for (int r = 0; r < 16; r++) k->vec_dot_n[type](n, w, x + r * stride, stride, 1, &one[r]);
            for (int nx = 1; nx <= 16; nx++)
                for (int o = 0; o + nx <= 16; o++) {
                    float got[16];
                    k->vec_dot_n[type](n, w, x + o * stride, stride, nx, got);
                    for (int j = 0; j < nx; j++)
                        if (memcmp(&got[j], &one[o + j], sizeof got[j]) != 0) {
                            print_error("%s vec_dot_n %s n=%ld: row %d batched at %d of nx=%d "
                                        "gives %.9g, alone %.9g\n",
                                        k->name, bd_type_name(type), (long)n, o + j, j, nx,
                                        got[j], one[o + j]);
                            fail();
                        }
                }
            free(w);
            free(x);
            free(f);
        }
    }
}

/*
 * Attention kernels: bit-identical to the scalar twins (same f32 steps,
 * attn_ref.c), including masked tails (head sizes that are not multiples of
 * 8 or 16) and accum called in pieces (the blocked attention relies on a
 * split j range giving the same bits as one call).
 */
/*
 * argmax: every table gives bd_argmax's index (the scalar twin, whose rule
 * test_argmax pins), on rows around the vector widths with coarse values
 * (many ties), planted NaN (at index 0 too), -inf, +0 / -0, and the
 * maximum in the tail.
 */
static void check_argmax(const bd_kernels *k) {
    static const int32_t ns[] = {1, 7, 31, 32, 33, 63, 64, 65, 100, 1000, 4099, 151936};
    enum { NMAX = 151936 };
    float *x = malloc(NMAX * sizeof *x);
    assert_non_null(x);
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (int pass = 0; pass < 8; pass++) {
            const int32_t n = ns[ni];
            for (int32_t i = 0; i < n; i++) x[i] = (float)(int)(rng_gauss() * 4.0f) * 0.5f;
            switch (pass) {
            case 1: x[0] = NAN; break;
            case 2: for (int32_t i = 0; i < n; i += 3) x[i] = NAN; break;
            case 3: for (int32_t i = 0; i < n; i++) x[i] = -INFINITY; break;
            case 4: for (int32_t i = 0; i < n; i++) x[i] = (i % 2) ? 0.0f : -0.0f; break;
            case 5: x[n - 1] = 1e30f; break;
            case 6: for (int32_t i = 0; i < n; i++) x[i] = i % 5 ? NAN : -INFINITY; break;
            case 7: x[n / 2] = INFINITY; x[n - 1] = INFINITY; break;
            }
            const int32_t want = bd_argmax(x, n), got = k->argmax(x, n);
            if (got != want) {
                print_error("argmax %s n=%d pass %d: %d, bd_argmax %d\n", k->name, n, pass, got, want);
                fail();
            }
        }
    free(x);
}

/*
 * SiLU-gated product: every table bit-identical to the scalar twin, for
 * lengths around the vector widths, and the twin within 4 ulp-ish relative
 * error (1e-6) of the same formula in double precision with libm's exp.
 */
static void check_silu(const bd_kernels *k) {
    const bd_kernels *ref = bd_kernels_for(BD_ISA_REF);
    static const int64_t ns[] = {1, 7, 8, 15, 16, 17, 33, 100};
    float g0[100], u[100], a[100], b[100];
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int64_t n = ns[ni];
        for (int64_t i = 0; i < n; i++) {
            g0[i] = rng_gauss() * 6.0f;
            u[i] = rng_gauss();
        }
        /* edges: zero, large of both signs, beyond the exp range */
        g0[0] = 0.0f;
        if (n > 3) g0[3] = 95.0f;
        if (n > 5) g0[5] = -95.0f;
        if (n > 6) g0[6] = -30.0f;
        memcpy(a, g0, sizeof(float) * (size_t)n);
        memcpy(b, g0, sizeof(float) * (size_t)n);
        ref->silu_mul(n, a, u);
        k->silu_mul(n, b, u);
        for (int64_t i = 0; i < n; i++) {
            if (memcmp(&a[i], &b[i], sizeof a[i]) != 0) {
                print_error("silu_mul %s n=%ld [%ld]: %.9g vs ref %.9g\n", k->name, (long)n, (long)i, b[i], a[i]);
                fail();
            }
            double x = g0[i], want = x / (1.0 + exp(-x)) * u[i];
            assert_true(fabs(a[i] - want) <= 1e-6 * fabs(want) + 1e-30);
        }
    }
}

/*
 * Gated DeltaNet step: every table bit-identical to the scalar twin (new
 * state, in place and into another buffer, and the output), for key widths
 * the SIMD loops take (multiples of 16) and one they hand back (20); the
 * twin within 1e-5 (relative to the row's magnitudes) of the delta rule
 * computed in double precision straight from its definition.
 */
static void check_gdn(const bd_kernels *k) {
    const bd_kernels *ref = bd_kernels_for(BD_ISA_REF);
    static const int32_t dks[] = {16, 20, 48, 128};
    static const int32_t dvs[] = {1, 5, 128};
    const size_t cap = 128 * 128;
    float *m0 = xalloc(cap * sizeof(float)), *ma = xalloc(cap * sizeof(float)), *mb = xalloc(cap * sizeof(float));
    float kk[128], vv[128], qq[128], oa[128], ob[128];
    for (size_t di = 0; di < sizeof dks / sizeof dks[0]; di++)
        for (size_t vi = 0; vi < sizeof dvs / sizeof dvs[0]; vi++)
            for (int with_q = 0; with_q < 2; with_q++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    const int32_t dk = dks[di], dv = dvs[vi];
                    for (int32_t i = 0; i < dk * dv; i++) m0[i] = rng_gauss() * 0.5f;
                    for (int32_t i = 0; i < dk; i++) {
                        kk[i] = rng_gauss() / sqrtf((float)dk);
                        qq[i] = rng_gauss() / sqrtf((float)dk);
                    }
                    for (int32_t j = 0; j < dv; j++) vv[j] = rng_gauss();
                    const float g = -3.0f * rng_unit(), beta = rng_unit(), scale = 1.0f / sqrtf((float)dk);
                    memcpy(ma, m0, sizeof(float) * (size_t)(dk * dv));
                    memcpy(mb, m0, sizeof(float) * (size_t)(dk * dv));
                    ref->gdn_step(inplace ? ma : m0, ma, dk, dv, kk, vv, g, beta, with_q ? qq : NULL, scale, oa);
                    k->gdn_step(inplace ? mb : m0, mb, dk, dv, kk, vv, g, beta, with_q ? qq : NULL, scale, ob);
                    if (memcmp(ma, mb, sizeof(float) * (size_t)(dk * dv)) != 0 ||
                        (with_q && memcmp(oa, ob, sizeof(float) * (size_t)dv) != 0)) {
                        print_error("gdn_step %s d_k=%d d_v=%d q=%d in place=%d differs from the twin\n", k->name, dk,
                                    dv, with_q, inplace);
                        fail();
                    }
                    /* the twin against the definition, in double */
                    for (int32_t j = 0; j < dv; j++) {
                        /* error bounds: f32 rounding (~6e-8 per step, a few dozen steps) of
                         * each term's magnitude, with a wide margin */
                        double row[128], dot = 0.0, mag = 0.0, o = 0.0, omag = 0.0;
                        const double e = exp((double)g);
                        for (int32_t i = 0; i < dk; i++) {
                            row[i] = (double)m0[j * dk + i] * e;
                            dot += row[i] * kk[i];
                            mag += fabs(row[i] * kk[i]);
                        }
                        const double d = ((double)vv[j] - dot) * beta;
                        for (int32_t i = 0; i < dk; i++) {
                            row[i] += kk[i] * d;
                            const double term = fabs(row[i]) + fabs(kk[i]) * (fabs(vv[j]) + mag);
                            assert_true(fabs((double)ma[j * dk + i] - row[i]) <= 1e-5 * term);
                            o += row[i] * qq[i];
                            omag += term * fabs(qq[i]);
                        }
                        if (with_q) assert_true(fabs((double)oa[j] - o * scale) <= 1e-5 * omag * scale);
                    }
                }
    free(m0);
    free(ma);
    free(mb);
}

/* f16 -> f32 widening against the bit-level decoding (bd_f16_to_f32):
 * every one of the 65536 halves (NaNs keep their payload in both), at
 * lengths 1..40 and odd offsets for the tails. */
static void check_f16_to_f32(const bd_kernels *k) {
    bd_f16 *x = xalloc(65536 * sizeof(bd_f16));
    float *a = xalloc(65536 * sizeof(float)), *b = xalloc(65536 * sizeof(float));
    for (int i = 0; i < 65536; i++) x[i] = (bd_f16)i;
    k->f16_to_f32(65536, x, b);
    for (int i = 0; i < 65536; i++) a[i] = bd_f16_to_f32(x[i]);
    if (memcmp(a, b, 65536 * sizeof(float)) != 0) {
        print_error("%s f16_to_f32 differs from bd_f16_to_f32\n", k->name);
        fail();
    }
    for (int n = 1; n <= 40; n++) {
        for (int i = 0; i < 48; i++) b[i] = -7.0f;
        k->f16_to_f32(n, x + 1000 * n + 3, b + 1);
        assert_memory_equal(b + 1, a + 1000 * n + 3, (size_t)n * sizeof(float));
        assert_true(b[0] == -7.0f && b[n + 1] == -7.0f); /* nothing written outside */
    }
    free(x);
    free(a);
    free(b);
}

/* f32 -> f16 rounding against bd_f32_to_f16: every f16 value and the
 * midpoints beside it (ties to even), 2^20 random bit patterns (NaN
 * payloads, subnormals, overflow), and tails at lengths 1..40. On the SIMD
 * tables this pins the scalar rounding to the hardware's (F16C). */
static void check_f32_to_f16(const bd_kernels *k) {
    enum { N = 3 * 65536 + (1 << 20) };
    float *x = xalloc(N * sizeof(float));
    bd_f16 *a = xalloc(N * sizeof(bd_f16)), *b = xalloc(N * sizeof(bd_f16));
    int64_t n = 0;
    for (int i = 0; i < 65536; i++) {
        float f = bd_f16_to_f32((bd_f16)i);
        uint32_t u;
        memcpy(&u, &f, 4);
        x[n++] = f;
        uint32_t up = u + 0x1000, dn = u - 0x1000; /* half an f16 ulp of a normal either side */
        memcpy(&x[n++], &up, 4);
        memcpy(&x[n++], &dn, 4);
    }
    for (int i = 0; i < (1 << 20); i++) {
        uint32_t u = (uint32_t)(rng_u64() >> 32);
        memcpy(&x[n++], &u, 4);
    }
    k->f32_to_f16(n, x, b);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        a[i] = bd_f32_to_f16(x[i]);
        if (a[i] != b[i] && bad++ < 5) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            print_error("%s f32_to_f16(0x%08x) = 0x%04x, bd_f32_to_f16 0x%04x\n", k->name, u, b[i], a[i]);
        }
    }
    if (bad) fail();
    for (int len = 1; len <= 40; len++) {
        for (int i = 0; i < 48; i++) b[i] = 0x5555;
        k->f32_to_f16(len, x + 1000 * len + 3, b + 1);
        assert_memory_equal(b + 1, a + 1000 * len + 3, (size_t)len * sizeof(bd_f16));
        assert_true(b[0] == 0x5555 && b[len + 1] == 0x5555); /* nothing written outside */
    }
    free(x);
    free(a);
    free(b);
}

/* The KV cache types' widening (kv_to_f32) against the reference
 * dequantizer, bit for bit: blocks of random code bytes whose f16 scale
 * (and min) take every class (normal, subnormal, zero, negative, the f16
 * maximum), bf16 rows of random 16-bit patterns (NaNs and infinities
 * among them), 1 to 9 blocks at a time at shifting offsets, nothing
 * written past n. */
static void check_kv_to_f32(const bd_kernels *k) {
    static const uint32_t types[] = {BD_TYPE_BF16, BD_TYPE_Q8_0,   BD_TYPE_Q4_0, BD_TYPE_Q4_1,
                                     BD_TYPE_Q5_0, BD_TYPE_Q5_1, BD_TYPE_IQ4_NL};
    static const float scales[] = {1.0f, 3.1e-3f, 7.5e-6f, 0.0f, -0.25f, 65504.0f, 6.0e-8f, 1.5e2f};
    enum { NB = 64, QK = 32 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t type = types[ti];
        const bd_type_traits *tt = bd_type_get(type);
        const int64_t per = type == BD_TYPE_BF16 ? QK : tt->blck; /* elements a "block" here */
        const size_t bb = (size_t)(per / tt->blck) * (size_t)tt->blck_bytes;
        uint8_t *b = xalloc(NB * bb);
        float *a = xalloc(NB * QK * sizeof(float)), *c = xalloc((NB * QK + 1) * sizeof(float));
        for (size_t j = 0; j < NB * bb; j++) b[j] = (uint8_t)(rng_u64() >> 56);
        if (type != BD_TYPE_BF16)
            for (int i = 0; i < NB; i++) { /* d first in every block type, then q4_1 / q5_1's m */
                const bd_f16 d = bd_f32_to_f16(scales[i % 8] * (1.0f + 0.01f * (float)i));
                const bd_f16 m = bd_f32_to_f16(scales[(i + 3) % 8] * -0.5f);
                memcpy(b + (size_t)i * bb, &d, 2);
                if (type == BD_TYPE_Q4_1 || type == BD_TYPE_Q5_1) memcpy(b + (size_t)i * bb + 2, &m, 2);
            }
        if (!k->kv_to_f32[type]) {
            print_error("%s has no kv_to_f32 for %s\n", k->name, tt->name);
            fail();
        }
        for (int nb = 1; nb <= 9; nb++)
            for (int at = 0; at + nb <= NB; at += 7) {
                assert_true(bd_dequantize_row(type, b + (size_t)at * bb, a, (int64_t)nb * per));
                c[nb * per] = -7.0f;
                k->kv_to_f32[type]((int64_t)nb * per, b + (size_t)at * bb, c);
                if (memcmp(a, c, (size_t)(nb * per) * sizeof(float)) != 0) {
                    print_error("%s kv_to_f32 %s (%d blocks at %d) differs\n", k->name, tt->name, nb, at);
                    fail();
                }
                assert_true(c[nb * per] == -7.0f); /* nothing written past n */
            }
        free(b);
        free(a);
        free(c);
    }
}

static void check_attention(const bd_kernels *k) {
    const bd_kernels *ref = bd_kernels_for(BD_ISA_REF);
    static const int32_t hds[] = {8, 24, 64, 100, 128, 256};
    static const int32_t lens[] = {1, 3, 4, 5, 16, 17, 33, 70};
    float *q = xalloc(256 * sizeof(float)), *kv = xalloc(70 * 300 * sizeof(float));
    float *a = xalloc(70 * sizeof(float)), *b = xalloc(70 * sizeof(float));
    float *oa = xalloc(256 * sizeof(float)), *ob = xalloc(256 * sizeof(float));
    for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            int32_t hd = hds[hi], len = lens[li];
            int64_t stride = hd + 3 + (int64_t)li; /* rows not packed, odd alignment */
            for (int32_t i = 0; i < hd; i++) q[i] = rng_gauss();
            for (int64_t i = 0; i < len * stride; i++) kv[i] = rng_gauss();
            float ma = ref->attn_scores(hd, q, kv, stride, len, 0.125f, a);
            float mb = k->attn_scores(hd, q, kv, stride, len, 0.125f, b);
            float mw = -INFINITY; /* the max, computed here */
            for (int32_t j = 0; j < len; j++) mw = a[j] > mw ? a[j] : mw;
            assert_true(ma == mw && mb == mw);
            assert_memory_equal(a, b, (size_t)len * sizeof(float));
            float mx = a[0];
            for (int32_t j = 0; j < len; j++) mx = a[j] > mx ? a[j] : mx;
            memcpy(b, a, (size_t)len * sizeof(float));
            if (len > 2) a[1] = b[1] = mx - 100.0f; /* exp underflows to 0 */
            float sa = ref->attn_softmax(len, a, mx), sb = k->attn_softmax(len, b, mx);
            assert_memory_equal(&sa, &sb, sizeof sa);
            assert_memory_equal(a, b, (size_t)len * sizeof(float));
            for (int32_t i = 0; i < hd; i++) oa[i] = ob[i] = rng_gauss();
            ref->attn_accum(hd, a, kv, stride, len, oa);
            int32_t cut = len / 3;
            k->attn_accum(hd, a, kv, stride, cut, ob);
            k->attn_accum(hd, a + cut, kv + cut * stride, stride, len - cut, ob);
            if (memcmp(oa, ob, (size_t)hd * sizeof(float)) != 0) {
                print_error("%s attn_accum hd=%d len=%d differs\n", k->name, hd, len);
                fail();
            }
        }
    free(q);
    free(kv);
    free(a);
    free(b);
    free(oa);
    free(ob);
}

/* The softmax exp against libm's double exp: relative error below 2^-22
 * (2 ulp of f32) over the range attention uses (x <= 0), exactly 1 at 0,
 * 0 below the cut-off. */
/* bd_argmax's contract (base.h) on hand-made rows whose answers are read
 * off by eye: ties to the lowest index, +0 and -0 equal, NaN never chosen
 * after index 0 and always at index 0, infinities, one element. */
static void test_argmax(void **state) {
    (void)state;
    const float nan = NAN, inf = INFINITY;
    const struct {
        float x[8];
        int n, want;
    } c[] = {
        {{1, 3, 2, 3, 0}, 5, 1},           /* tie: first of the two 3s */
        {{-5, -2, -7, -2}, 4, 1},          /* negatives */
        {{-0.0f, 0.0f, -0.0f}, 3, 0},      /* +0 is not > -0 */
        {{0.0f, -1, -0.0f}, 3, 0},
        {{nan, 5, 9}, 3, 0},               /* NaN at 0: nothing is > NaN */
        {{1, nan, 2, nan, 2}, 5, 2},       /* NaN elsewhere is skipped */
        {{-inf, -inf, -inf}, 3, 0},
        {{-inf, 4, inf, inf, 1}, 5, 2},
        {{7}, 1, 0},
        {{2, 2, 2, 2, 2, 2, 2, 8}, 8, 7},  /* maximum last */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) assert_int_equal(bd_argmax(c[i].x, c[i].n), c[i].want);
    /* a long row: the largest value planted late, a tie of it later still */
    enum { N = 151936 };
    float *row = malloc(N * sizeof *row);
    assert_non_null(row);
    for (int i = 0; i < N; i++) row[i] = (float)((i * 7919) % 1000) * 0.001f;
    row[120001] = 2.5f;
    row[150000] = 2.5f;
    assert_int_equal(bd_argmax(row, N), 120001);
    free(row);
}

static void test_expf_poly(void **state) {
    (void)state;
    double worst = 0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f * (float)i / 200000.0f;
        double want = exp((double)x), got = bd_expf_poly(x);
        double rel = fabs(got - want) / want;
        if (rel > worst) worst = rel;
    }
    for (float x = 0.001f; x < 80.0f; x *= 1.37f) {
        double rel = fabs(bd_expf_poly(x) - exp((double)x)) / exp((double)x);
        if (rel > worst) worst = rel;
    }
    print_message("  bd_expf_poly: worst relative error %.3g (2^-22 = %.3g)\n", worst,
                  ldexp(1.0, -22));
    assert_true(worst < ldexp(1.0, -22));
    assert_true(bd_expf_poly(0.0f) == 1.0f);
    assert_true(bd_expf_poly(-90.0f) == 0.0f);
    assert_true(bd_expf_poly(-INFINITY) == 0.0f);
}

/*
 * bd_expf_dd: the float nearest to e^x (double exp as the reference,
 * rounded once) on 400001 points over the whole float range and beyond,
 * with at most a handful of misses, each within one ulp; 0 and inf at the
 * ends. The SIMD lanes are pinned to it bit for bit by check_silu.
 */
static void test_expf_dd(void **state) {
    (void)state;
    int miss = 0;
    for (int i = 0; i <= 400000; i++) {
        float x = -110.0f + 200.0f * (float)i / 400000.0f;
        float want = (float)exp((double)x), got = bd_expf_dd(x);
        if (got != want) {
            miss++;
            assert_true(fabsf(got - want) <= fabsf(nextafterf(want, INFINITY) - want));
        }
    }
    print_message("  bd_expf_dd: %d of 400001 not the nearest float\n", miss);
    assert_true(miss <= 4);
    assert_true(bd_expf_dd(0.0f) == 1.0f);
    assert_true(bd_expf_dd(-200.0f) == 0.0f);
    assert_true(isinf(bd_expf_dd(100.0f)));
    assert_true(isnan(bd_expf_dd(NAN)));
}

/*
 * Row-group matmul (the tables' tile entry: AMX tiles, AVX-512 row
 * groups): every output element bit-identical to bd_vec_dot_tile_ref (the
 * scalar twin of the tile order), for 1..16, 17, 40, 70 and 150 tokens and
 * 16, 5 and 33 weight rows (partial row groups) -- which is also batch
 * invariance, since the twin sees one row at a time. For Q4_K / Q6_K the
 * twin is the reference dot itself (so the tiles give the bits of one-row
 * decoding); the Q8_0 twin has its own f32 order and must agree with the
 * reference dot within f32 rounding. Every table with row groups takes
 * Q4_K and Q6_K.
 */
static void check_tiles(const bd_kernels *k) {
    static const uint32_t types[] = {BD_TYPE_Q4_K, BD_TYPE_Q6_K, BD_TYPE_Q8_0};
    static const int toks[] = {1, 2, 3, 7, 15, 16, 17, 40, 70, 150};
    static const int rows_n[] = {16, 5, 33};
    const int64_t n = 768;
    const bd_tile_ops *tile = k->tile;
    if (k->isa == BD_ISA_AMX) assert_false(tile->supports(BD_TYPE_Q8_0, 96)); /* Q8_0 takes blocks by 4 */
    assert_true(tile->supports(BD_TYPE_Q4_K, n) && tile->supports(BD_TYPE_Q6_K, n));
    for (size_t ti = 0; ti < 3; ti++) {
        uint32_t type = types[ti], xt = bd_type_get(type)->vec_dot_type;
        if (!tile->supports(type, n)) continue;
        size_t wb = row_bytes(type, n), xs = (row_bytes(xt, n) + 63) & ~(size_t)63;
        uint8_t *w = xalloc(33 * wb), *x = xalloc(150 * xs);
        float *f = xalloc((size_t)n * sizeof(float)), *y = xalloc(150 * 40 * sizeof(float));
        for (int r = 0; r < 33; r++) fill_random_weight(type, w + r * wb, n, r % 3);
        for (int t = 0; t < 150; t++) {
            for (int64_t i = 0; i < n; i++) f[i] = rng_gauss() * (t == 9 ? 1e-3f : 1.0f);
            if (t == 4) memset(f, 0, (size_t)n * sizeof(float));
            assert_true(bd_quantize_row(xt, f, x + t * xs, n));
        }
        for (int r = 0; r < 33; r++)
            for (int t = 0; t < 150; t += 7) {
                float a = bd_vec_dot_tile_ref(type, n, w + r * wb, x + t * xs);
                float b = bd_vec_dot_ref(type, n, w + r * wb, x + t * xs);
                double tol = type == BD_TYPE_Q8_0 ? 1e-5 * dot_magnitude(type, w + r * wb, x + t * xs, n) + 1e-30 : 0;
                if (!(fabs((double)a - b) <= tol)) {
                    print_error("tile ref %s row %d tok %d: %.9g vs ref %.9g\n", bd_type_name(type), r, t, a, b);
                    fail();
                }
            }
        void *pack = tile->pack ? xalloc(tile->pack_bytes(type, n, 150)) : NULL;
        for (size_t ki = 0; ki < sizeof toks / sizeof toks[0]; ki++)
            for (size_t ri = 0; ri < 3; ri++) {
                int nt = toks[ki], nr = rows_n[ri];
                /* packed where the kernel packs this batch size, as matmul.c does */
                const bool packed = tile->pack && tile->pack_bytes(type, n, nt) > 0;
                for (int64_t g = 0; packed && g < (nt + 15) / 16; g++) tile->pack(type, n, x, xs, nt, g, pack);
                for (int i = 0; i < 150 * 40; i++) y[i] = NAN;
                /* 16 rows per call, or all rows in one call (the groups
                 * after the first then come prefetched: same bits) */
                const bool one_call = (ki + ri) % 2 == 1;
                for (int r0 = 0; r0 < nr; r0 += one_call ? nr : 16)
                    tile->rows(type, n, w + r0 * wb, wb, one_call ? nr : nr - r0 < 16 ? nr - r0 : 16, x, xs,
                               packed ? pack : NULL, nt, y + r0, 40);
                for (int t = 0; t < nt; t++)
                    for (int r = 0; r < 40; r++) {
                        float got = y[t * 40 + r];
                        if (r >= nr) {
                            assert_true(isnan(got));
                            continue;
                        }
                        float want = bd_vec_dot_tile_ref(type, n, w + r * wb, x + t * xs);
                        if (memcmp(&got, &want, sizeof got) != 0) {
                            print_error("%s tiles %s tokens=%d rows=%d%s: [t %d][r %d] %.9g, twin %.9g\n",
                                        k->name, bd_type_name(type), nt, nr, one_call ? " (one call)" : "", t, r, got,
                                        want);
                            fail();
                        }
                    }
            }
        free(pack);
        free(w);
        free(x);
        free(f);
        free(y);
    }
}

/*
 * Interleaved weights (kernels.h's BD_LAYOUT_IL16) through the table's
 * il_rows: every element bit-identical to the scalar tile-order dot of the
 * row in the file's layout (dot_ref.c), for decode, verify and prompt
 * batch sizes, one or several groups per call. The interleaved copy is
 * built here from the layout's definition, byte by byte, not by the
 * library's packer, so a packer and kernel wrong the same way still fail.
 */
static void il16_by_definition(uint32_t type, int64_t n, const uint8_t *w, size_t wb, int nr, uint8_t *out) {
    const size_t bb = (size_t)bd_type_get(type)->blck_bytes, nd = bb / 4, tl = bb % 4;
    const int64_t nb = n / bd_type_get(type)->blck;
    if (type == BD_TYPE_Q8_0) { /* pairs of blocks: 16 code words, then 32 scales */
        for (int g = 0; g < nr / 16; g++)
            for (int64_t i = 0; i < nb; i++)
                for (int r = 0; r < 16; r++) {
                    const uint8_t *blk = w + (size_t)(16 * g + r) * wb + (size_t)i * bb;
                    uint8_t *o = out + (size_t)g * 16 * wb + (size_t)(i / 2) * 1088;
                    for (int D = 0; D < 8; D++)
                        for (int b = 0; b < 4; b++) o[512 * (i % 2) + 64 * D + 4 * r + b] = blk[2 + 4 * D + b];
                    for (int b = 0; b < 2; b++) o[1024 + 32 * (i % 2) + 2 * r + b] = blk[b];
                }
        return;
    }
    for (int g = 0; g < nr / 16; g++)
        for (int64_t i = 0; i < nb; i++)
            for (int r = 0; r < 16; r++) {
                const uint8_t *blk = w + (size_t)(16 * g + r) * wb + (size_t)i * bb;
                uint8_t *o = out + (size_t)g * 16 * wb + (size_t)i * 16 * bb;
                for (size_t D = 0; D < nd; D++)
                    for (int b = 0; b < 4; b++) o[64 * D + 4 * (size_t)r + b] = blk[4 * D + b];
                for (size_t b = 0; b < tl; b++) o[64 * nd + tl * (size_t)r + b] = blk[4 * nd + b];
            }
}

static void check_interleaved(const bd_kernels *k) {
    static const uint32_t types[] = {BD_TYPE_Q4_K, BD_TYPE_Q6_K, BD_TYPE_Q8_0};
    static const int toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 40, 64, 65, 70};
    static const int64_t widths[] = {768, 256 * 17};
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t wi = 0; wi < 2; wi++) {
            const uint32_t type = types[ti], xt = bd_type_get(type)->vec_dot_type;
            const int64_t n = widths[wi];
            const int nr = 48;
            const size_t wb = row_bytes(type, n), xs = row_bytes(xt, n) + 4; /* rows not 64-byte aligned */
            uint8_t *w = xalloc(nr * wb), *il = xalloc(nr * wb), *lib = xalloc(nr * wb), *x = xalloc(70 * xs);
            float *f = xalloc((size_t)n * sizeof(float)), *y = xalloc(70 * 50 * sizeof(float));
            for (int r = 0; r < nr; r++) fill_random_weight(type, w + r * wb, n, r % 3);
            for (int t = 0; t < 70; t++) {
                for (int64_t i = 0; i < n; i++) f[i] = rng_gauss() * (t == 9 ? 1e-3f : 1.0f);
                if (t == 4) memset(f, 0, (size_t)n * sizeof(float));
                assert_true(bd_quantize_row(xt, f, x + t * xs, n));
            }
            il16_by_definition(type, n, w, wb, nr, il);
            for (int g = 0; g < nr / 16; g++) bd_il16_pack_group(type, n, w + g * 16 * wb, wb, lib + g * 16 * wb);
            assert_memory_equal(il, lib, nr * wb);
            for (int r = 0; r < nr; r++) /* and back, block by block */
                for (int64_t i = 0; i < n / bd_type_get(type)->blck; i++) {
                    uint8_t blk[256];
                    const size_t bb = (size_t)bd_type_get(type)->blck_bytes;
                    bd_il16_get_block(type, lib + (size_t)(r / 16) * 16 * wb, r % 16, i, blk);
                    assert_memory_equal(blk, w + (size_t)r * wb + (size_t)i * bb, bb);
                }
            /* Q8_0's il_rows reads the packed activations (all 70 rows) */
            void *pack = NULL;
            if (type == BD_TYPE_Q8_0) {
                pack = xalloc(k->tile->pack_bytes(type, n, 70));
                for (int g = 0; g < 5; g++) k->tile->pack(type, n, x, xs, 70, g, pack);
            }
            for (size_t ki = 0; ki < sizeof toks / sizeof toks[0]; ki++)
                for (int calls = 1; calls <= 3; calls += 2) { /* all 48 rows in one call, or 16 per call */
                    const int nt = toks[ki];
                    for (int i = 0; i < 70 * 50; i++) y[i] = NAN;
                    for (int c = 0; c < calls; c++) {
                        const int r0 = c * nr / calls;
                        k->tile->il_rows(type, n, il + r0 * wb, wb, nr / calls, x, xs, pack, nt, y + r0, 50);
                    }
                    for (int t = 0; t < nt; t++)
                        for (int r = 0; r < 50; r++) {
                            const float got = y[t * 50 + r];
                            if (r >= nr) {
                                assert_true(isnan(got));
                                continue;
                            }
                            const float want = bd_vec_dot_tile_ref(type, n, w + r * wb, x + t * xs);
                            if (memcmp(&got, &want, sizeof got) != 0) {
                                print_error("%s il_rows %s n=%lld tokens=%d calls=%d: [t %d][r %d] %.9g, twin %.9g\n",
                                            k->name, bd_type_name(type), (long long)n, nt, calls, t, r, got, want);
                                fail();
                            }
                        }
                }
            free(pack);
            free(w);
            free(il);
            free(lib);
            free(x);
            free(f);
            free(y);
        }
}

static void run_isa(bd_isa isa);

static void test_amx(void **state) {
    (void)state;
    char why[200];
    if (!bd_isa_available(BD_ISA_AMX, why, sizeof why)) SKIP_BECAUSE("amx: %s", why);
    assert_non_null(bd_kernels_for(BD_ISA_AMX)->tile);
    run_isa(BD_ISA_AMX); /* the rest of the table is the AVX-512 one */
}

static void run_isa(bd_isa isa) {
    char why[200];
    if (!bd_isa_available(isa, why, sizeof why)) SKIP_BECAUSE("%s: %s", bd_isa_name(isa), why);
    const bd_kernels *k = bd_kernels_for(isa);
    assert_non_null(k);
    assert_string_equal(k->name, bd_isa_name(isa));
    check_from_float(k);
    check_dots(k);
    check_batch_invariance(k);
    check_attention(k);
    check_f16_to_f32(k);
    check_f32_to_f16(k);
    check_kv_to_f32(k);
    check_silu(k);
    check_argmax(k);
    check_gdn(k);
    if (k->tile) check_tiles(k);
    if (k->tile && k->tile->il_rows) {
        check_interleaved(k);
        /* the avx512 level's one-row products go to the avx2 level's
         * il_rows on Zen 4 and to its own elsewhere (kernels.h's
         * bd_il_one_row): both ways on every host that runs both */
        /* the avx2 level's pair-kernel calls take 4 rows on Zen 4 and 3
         * elsewhere (kernels.h's bd_il_pair_rows_avx2): both everywhere */
        /* and its Q6_K batches up to 10 rows go to il_few_q6k on Zen 4, up
         * to 2 elsewhere (kernels.h's bd_il_few_rows_q6k_avx2): both
         * everywhere */
        if (isa == BD_ISA_AVX2) {
            const int saved = bd_il_pair_rows_avx2;
            bd_il_pair_rows_avx2 = saved == 4 ? 3 : 4;
            check_interleaved(k);
            bd_il_pair_rows_avx2 = saved;
            const int saved6 = bd_il_few_rows_q6k_avx2;
            bd_il_few_rows_q6k_avx2 = saved6 == 10 ? 2 : 10;
            check_interleaved(k);
            bd_il_few_rows_q6k_avx2 = saved6;
        }
        const bd_kernels *k2 = bd_kernels_for(BD_ISA_AVX2);
        if (isa == BD_ISA_AVX512 && k2 && k2->tile && k2->tile->il_rows) {
            const bd_il_rows_fn saved = bd_il_one_row;
            bd_il_one_row = saved ? NULL : k2->tile->il_rows;
            check_interleaved(k);
            bd_il_one_row = saved;
        }
    }
}

static void test_ref_table(void **state) {
    (void)state;
    run_isa(BD_ISA_REF); /* the generic loops around the scalar code */
}
static void test_avx2(void **state) {
    (void)state;
    run_isa(BD_ISA_AVX2);
}
static void test_avxvnni(void **state) {
    (void)state;
    run_isa(BD_ISA_AVXVNNI);
}
static void test_avx512(void **state) {
    (void)state;
    run_isa(BD_ISA_AVX512);
}

/*
 * bd_matmul and bd_matmul_fast through the chosen table: exact batches of
 * any size give each row the bits of a one-row call (Q4_K / Q6_K: the
 * prompt-sized ones through the tiles too; Q8_0 never takes its tiles
 * there, whose order differs);
 * the fast entry agrees with it to f32 rounding, and where the table has
 * AMX its Q8_0 batches of BD_MATMUL_TILE_Q8_ROWS rows or more give the tile
 * twin's bits (so the test sees that they took the tile path). The batch
 * sizes straddle BD_MATMUL_TILE_Q4K_ROWS and BD_MATMUL_TILE_Q6K_ROWS; the
 * 200 weight rows make tile work items of several 16-row groups and a
 * partial one at the end.
 */
static void test_matmul_paths(void **state) {
    (void)state;
    static const uint32_t types[] = {BD_TYPE_Q8_0, BD_TYPE_Q4_K, BD_TYPE_Q6_K};
    static const int toks[] = {1, 3, 4, 5, 6, 7, 9, 10, 16, 17, 32, 40};
    const int64_t n = 512, nr = 200;
    const bd_kernels *k = bd_kernels_get();
    for (size_t ti = 0; ti < 3; ti++) {
        const uint32_t type = types[ti], xt = bd_type_get(type)->vec_dot_type;
        const size_t wb = row_bytes(type, n), xs = row_bytes(xt, n);
        uint8_t *w = xalloc(nr * wb), *xq = xalloc(40 * xs);
        float *x = xalloc(40 * n * sizeof(float)), *one = xalloc(40 * nr * sizeof(float));
        float *ya = xalloc(40 * nr * sizeof(float)), *yb = xalloc(40 * nr * sizeof(float));
        for (int r = 0; r < nr; r++) fill_random_weight(type, w + r * wb, n, 0);
        for (int64_t i = 0; i < 40 * n; i++) x[i] = rng_gauss();
        for (int t = 0; t < 40; t++) assert_true(bd_quantize_row(xt, x + t * n, xq + t * xs, n));
        bd_mat W = {.type = type, .ncols = n, .nrows = nr, .row_bytes = wb, .data = w};
        void *scratch = xalloc(bd_matmul_fast_scratch_size(&W, 40) + bd_matmul_scratch_size(&W, 40));
        for (int t = 0; t < 40; t++) bd_matmul(NULL, &W, x + t * n, n, 1, one + t * nr, nr, scratch);
        for (size_t ki = 0; ki < sizeof toks / sizeof toks[0]; ki++) {
            const int nt = toks[ki];
            bd_matmul(NULL, &W, x, n, nt, ya, nr, scratch);
            bd_matmul_fast(NULL, &W, x, n, nt, yb, nr, scratch);
            /* Q8_0 batches the fast entry sends to the tiles (AMX) */
            const bool tiles = k->tile && type == BD_TYPE_Q8_0 && k->tile->fast_rows[type] &&
                               nt >= k->tile->fast_rows[type] && k->tile->supports(type, n);
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < nr; r++) {
                    const float e = ya[t * nr + r], f = yb[t * nr + r];
                    /* every batch size, prompts too: a prompt forwarded whole
                     * and after a cached prefix must agree bit for bit */
                    assert_true(memcmp(&e, &one[t * nr + r], sizeof e) == 0);
                    const double mag = dot_magnitude(type, w + r * wb, xq + t * xs, n);
                    assert_true(fabs((double)e - f) <= 1e-5 * mag + 1e-30);
                    if (tiles) {
                        const float tw = bd_vec_dot_tile_ref(type, n, w + r * wb, xq + t * xs);
                        assert_true(memcmp(&tw, &f, sizeof f) == 0);
                    }
                }
        }
        free(scratch);
        free(w);
        free(xq);
        free(x);
        free(one);
        free(ya);
        free(yb);
    }
}

/*
 * bd_mat_interleave in place, then bd_matmul / bd_matmul_fast /
 * bd_matmul_multi and bd_mat_get_row on the interleaved matrix: the same
 * bits as on the file's layout, at every batch size. On a table with
 * il_rows this runs its kernels; on the others matmul.c's row-by-row
 * fallback. Matrices it must refuse (rows not whole groups, types without
 * the layout) are left as they were.
 */
static void test_matmul_interleaved(void **state) {
    (void)state;
    static const uint32_t types[] = {BD_TYPE_Q4_K, BD_TYPE_Q6_K};
    static const int toks[] = {1, 2, 5, 9, 16, 17, 40};
    const int64_t n = 512, nr = 96;
    for (size_t ti = 0; ti < 2; ti++) {
        const uint32_t type = types[ti];
        const size_t wb = row_bytes(type, n);
        uint8_t *w = xalloc(nr * wb), *wi = xalloc(nr * wb), *tmp = xalloc(16 * wb);
        float *x = xalloc(40 * n * sizeof(float)), *ya = xalloc(40 * nr * sizeof(float));
        float *yb = xalloc(40 * nr * sizeof(float)), *ra = xalloc(n * sizeof(float)), *rb = xalloc(n * sizeof(float));
        for (int r = 0; r < nr; r++) fill_random_weight(type, w + r * wb, n, r % 3);
        memcpy(wi, w, nr * wb);
        for (int64_t i = 0; i < 40 * n; i++) x[i] = rng_gauss();
        bd_mat W = {.type = type, .ncols = n, .nrows = nr, .row_bytes = wb, .data = w};
        bd_mat V = W;
        V.data = wi;
        bd_mat odd = V;
        odd.nrows = nr - 8;
        assert_false(bd_mat_interleave(&odd, tmp)); /* not whole groups */
        assert_int_equal(odd.layout, BD_LAYOUT_ROWS);
        assert_memory_equal(w, wi, nr * wb);
        assert_true(bd_mat_interleave(&V, tmp));
        assert_int_equal(V.layout, BD_LAYOUT_IL16);
        assert_true(memcmp(w, wi, nr * wb) != 0);
        for (int r = 0; r < nr; r++) {
            assert_true(bd_mat_get_row(&W, r, ra) && bd_mat_get_row(&V, r, rb));
            assert_memory_equal(ra, rb, n * sizeof(float));
        }
        void *scratch = xalloc(bd_matmul_fast_scratch_size(&W, 40) + bd_matmul_scratch_size(&W, 40) +
                               bd_matmul_fast_scratch_size(&V, 40));
        for (size_t ki = 0; ki < sizeof toks / sizeof toks[0]; ki++) {
            const int nt = toks[ki];
            for (int fast = 0; fast < 3; fast++) {
                if (fast == 1) {
                    bd_matmul_fast(NULL, &W, x, n, nt, ya, nr, scratch);
                    bd_matmul_fast(NULL, &V, x, n, nt, yb, nr, scratch);
                } else if (fast == 0) {
                    bd_matmul(NULL, &W, x, n, nt, ya, nr, scratch);
                    bd_matmul(NULL, &V, x, n, nt, yb, nr, scratch);
                } else { /* the interleaved matrix beside one in the file's layout, one pool run */
                    bd_matmul(NULL, &W, x, n, nt, ya, nr, scratch);
                    float *yc = xalloc(40 * nr * sizeof(float));
                    const bd_matmul_out o[2] = {{&V, yb, nr}, {&W, yc, nr}};
                    bd_matmul_multi(NULL, o, 2, x, n, nt, scratch);
                    assert_memory_equal(yc, ya, (size_t)nt * nr * sizeof(float));
                    free(yc);
                }
                assert_memory_equal(ya, yb, (size_t)nt * nr * sizeof(float));
            }
        }
        free(scratch);
        free(w);
        free(wi);
        free(tmp);
        free(x);
        free(ya);
        free(yb);
        free(ra);
        free(rb);
    }
    /* Q8_0: rows of whole pairs of blocks only; interleaved, every batch
     * size gives the scalar tile-order dot of each row (its row groups'
     * order: bd_model_open interleaves Q8_0 only in drafters) against the
     * activations quantized by the reference */
    const size_t wb8 = row_bytes(BD_TYPE_Q8_0, 544);
    uint8_t *w8 = xalloc(16 * wb8), *tmp8 = xalloc(16 * wb8);
    bd_mat Q = {.type = BD_TYPE_Q8_0, .ncols = 544, .nrows = 16, .row_bytes = wb8, .data = w8};
    assert_false(bd_il16_supports(BD_TYPE_Q8_0, 544)); /* 17 blocks */
    assert_false(bd_mat_interleave(&Q, tmp8));
    assert_int_equal(Q.layout, BD_LAYOUT_ROWS);
    free(w8);
    free(tmp8);
    const size_t wb = row_bytes(BD_TYPE_Q8_0, n), xb = row_bytes(BD_TYPE_Q8_0, n);
    uint8_t *w = xalloc(nr * wb), *wi = xalloc(nr * wb), *tmp = xalloc(16 * wb), *xq = xalloc(40 * xb);
    float *x = xalloc(40 * n * sizeof(float)), *y = xalloc(40 * nr * sizeof(float));
    float *ra = xalloc(n * sizeof(float)), *rb = xalloc(n * sizeof(float));
    for (int r = 0; r < nr; r++) fill_random_weight(BD_TYPE_Q8_0, w + r * wb, n, r % 3);
    memcpy(wi, w, nr * wb);
    for (int64_t i = 0; i < 40 * n; i++) x[i] = rng_gauss();
    for (int t = 0; t < 40; t++) assert_true(bd_quantize_row(BD_TYPE_Q8_0, x + t * n, xq + t * xb, n));
    bd_mat W = {.type = BD_TYPE_Q8_0, .ncols = n, .nrows = nr, .row_bytes = wb, .data = w}, V = W;
    V.data = wi;
    assert_true(bd_il16_supports(BD_TYPE_Q8_0, n));
    assert_true(bd_mat_interleave(&V, tmp));
    assert_int_equal(V.layout, BD_LAYOUT_IL16);
    for (int r = 0; r < nr; r++) {
        assert_true(bd_mat_get_row(&W, r, ra) && bd_mat_get_row(&V, r, rb));
        assert_memory_equal(ra, rb, n * sizeof(float));
    }
    void *scratch = xalloc(bd_matmul_fast_scratch_size(&V, 40) + bd_matmul_scratch_size(&V, 40));
    for (size_t ki = 0; ki < sizeof toks / sizeof toks[0]; ki++) {
        const int nt = toks[ki];
        for (int fast = 0; fast < 2; fast++) {
            if (fast) bd_matmul_fast(NULL, &V, x, n, nt, y, nr, scratch);
            else bd_matmul(NULL, &V, x, n, nt, y, nr, scratch);
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < nr; r++) {
                    const float want = bd_vec_dot_tile_ref(BD_TYPE_Q8_0, n, w + r * wb, xq + t * xb);
                    if (memcmp(&y[t * nr + r], &want, sizeof want) != 0) {
                        print_error("Q8_0 interleaved %s n_tok=%d [t %d][r %d]: %.9g, tile twin %.9g\n",
                                    fast ? "bd_matmul_fast" : "bd_matmul", nt, t, r, y[t * nr + r], want);
                        fail();
                    }
                }
        }
    }
    free(scratch);
    free(w);
    free(wi);
    free(tmp);
    free(xq);
    free(x);
    free(y);
    free(ra);
    free(rb);
}

/*
 * bd_matmul_multi: every output bit-identical to its own bd_matmul call,
 * for a Q4_K + Q6_K + Q4_K set sharing one input (one conversion, one
 * pool run: decode, verify and tile-path sizes) and for a Q8_0 + Q4_K pair
 * (different activation types: the fallback).
 */
static void test_matmul_multi(void **state) {
    (void)state;
    static const uint32_t sets[2][3] = {{BD_TYPE_Q4_K, BD_TYPE_Q6_K, BD_TYPE_Q4_K},
                                        {BD_TYPE_Q8_0, BD_TYPE_Q4_K, 0}};
    static const int n_in_set[2] = {3, 2};
    static const int toks[] = {1, 16, 40};
    static const int64_t nrows[3] = {48, 16, 33};
    const int64_t n = 512;
    bd_pool *pool = bd_pool_create(2);
    assert_non_null(pool);
    for (int si = 0; si < 2; si++) {
        bd_mat W[3];
        uint8_t *w[3];
        float *ya[3], *yb[3];
        size_t scr = 0;
        for (int j = 0; j < n_in_set[si]; j++) {
            const uint32_t type = sets[si][j];
            const size_t wb = row_bytes(type, n);
            w[j] = xalloc(nrows[j] * wb);
            for (int r = 0; r < nrows[j]; r++) fill_random_weight(type, w[j] + r * wb, n, r % 3);
            W[j] = (bd_mat){.type = type, .ncols = n, .nrows = nrows[j], .row_bytes = wb, .data = w[j]};
            ya[j] = xalloc(40 * 64 * sizeof(float));
            yb[j] = xalloc(40 * 64 * sizeof(float));
            size_t z = bd_matmul_scratch_size(&W[j], 40);
            if (z > scr) scr = z;
        }
        float *x = xalloc(40 * n * sizeof(float));
        for (int64_t i = 0; i < 40 * n; i++) x[i] = rng_gauss();
        void *scratch = aligned_alloc(64, (scr + 63) & ~(size_t)63);
        assert_non_null(scratch);
        for (size_t ki = 0; ki < sizeof toks / sizeof toks[0]; ki++) {
            const int nt = toks[ki];
            bd_matmul_out outs[3];
            for (int j = 0; j < n_in_set[si]; j++) {
                bd_matmul(pool, &W[j], x, n, nt, ya[j], 64, scratch);
                outs[j] = (bd_matmul_out){&W[j], yb[j], 64};
            }
            bd_matmul_multi(pool, outs, n_in_set[si], x, n, nt, scratch);
            for (int j = 0; j < n_in_set[si]; j++)
                for (int t = 0; t < nt; t++)
                    for (int r = 0; r < nrows[j]; r++)
                        if (memcmp(&ya[j][t * 64 + r], &yb[j][t * 64 + r], sizeof(float)) != 0) {
                            print_error("matmul_multi set %d mat %d tokens %d [%d][%d]: %.9g vs %.9g\n", si, j,
                                        nt, t, r, yb[j][t * 64 + r], ya[j][t * 64 + r]);
                            fail();
                        }
        }
        free(scratch);
        free(x);
        for (int j = 0; j < n_in_set[si]; j++) {
            free(w[j]);
            free(ya[j]);
            free(yb[j]);
        }
    }
    bd_pool_free(pool);
}

/*
 * bd_matmul_grouped (the MoE experts of a short pass): every group's
 * output bit-identical to bd_matmul on its rows gathered, for interleaved
 * and file-layout Q4_K / Q6_K matrices side by side, groups of 1 to 16
 * rows in any order (one row twice), an empty group, with and without the
 * pool. On AMX bd_matmul takes the 16-row file-layout Q4_K group to the
 * tiles, which pack their activations, and grouped gives it vec_dot_n:
 * the same bits still. Matrices of another width, or interleaved Q8_0
 * (packed activations) on a table that packs, are refused with nothing
 * written.
 */
static void test_matmul_grouped(void **state) {
    (void)state;
    static const uint32_t types[4] = {BD_TYPE_Q4_K, BD_TYPE_Q6_K, BD_TYPE_Q4_K, BD_TYPE_Q6_K};
    static const bool il[4] = {true, true, false, false};
    static const int64_t nrows[4] = {48, 32, 33, 16};
    static const int32_t rows_a[] = {3, 0, 15, 7, 7, 9, 1, 2, 4, 5, 6, 8, 10, 11, 12, 13}, rows_b[] = {14},
                         rows_c[] = {2, 5, 11}, rows_d[] = {15, 14, 13, 12, 11, 10};
    const int64_t n = 512, nx = 16;
    bd_pool *pool = bd_pool_create(2);
    assert_non_null(pool);
    bd_mat W[4];
    uint8_t *w[4];
    size_t scr = 0;
    for (int j = 0; j < 4; j++) {
        const size_t wb = row_bytes(types[j], n);
        w[j] = xalloc(nrows[j] * wb);
        for (int r = 0; r < nrows[j]; r++) fill_random_weight(types[j], w[j] + r * wb, n, r % 3);
        W[j] = (bd_mat){.type = types[j], .ncols = n, .nrows = nrows[j], .row_bytes = wb, .data = w[j]};
        if (il[j]) {
            uint8_t *tmp = xalloc(16 * wb);
            assert_true(bd_mat_interleave(&W[j], tmp));
            free(tmp);
        }
        size_t z = bd_matmul_scratch_size(&W[j], nx);
        if (z > scr) scr = z;
    }
    const size_t gs = bd_matmul_grouped_scratch_size(&W[0], nx, 16 + 1 + 3 + 6 + 0 + 16, 6);
    if (gs > scr) scr = gs;
    float *x = xalloc(nx * n * sizeof(float)), *xg = xalloc(16 * n * sizeof(float));
    for (int64_t i = 0; i < nx * n; i++) x[i] = rng_gauss();
    void *scratch = aligned_alloc(64, (scr + 63) & ~(size_t)63);
    assert_non_null(scratch);
    /* groups: matrix, rows */
    const struct {
        int mat;
        const int32_t *rows;
        int n;
    } G[6] = {{0, rows_a, 16}, {1, rows_b, 1}, {2, rows_c, 3}, {3, rows_d, 6}, {1, rows_b, 0}, {2, rows_a, 16}};
    float *ya[6], *yb[6];
    for (int g = 0; g < 6; g++) {
        ya[g] = xalloc(16 * 64 * sizeof(float));
        yb[g] = xalloc(16 * 64 * sizeof(float));
    }
    for (int use_pool = 0; use_pool < 2; use_pool++) {
        bd_matmul_grp grp[6];
        for (int g = 0; g < 6; g++) {
            for (int t = 0; t < G[g].n; t++) memcpy(xg + t * n, x + G[g].rows[t] * n, n * sizeof(float));
            if (G[g].n) bd_matmul(use_pool ? pool : NULL, &W[G[g].mat], xg, n, G[g].n, ya[g], 64, scratch);
            memset(yb[g], 0, 16 * 64 * sizeof(float));
            grp[g] = (bd_matmul_grp){&W[G[g].mat], G[g].rows, G[g].n, yb[g], 64};
        }
        assert_true(bd_matmul_grouped(use_pool ? pool : NULL, grp, 6, x, n, nx, scratch));
        for (int g = 0; g < 6; g++)
            for (int t = 0; t < G[g].n; t++)
                for (int r = 0; r < nrows[G[g].mat]; r++)
                    if (memcmp(&ya[g][t * 64 + r], &yb[g][t * 64 + r], sizeof(float)) != 0) {
                        print_error("matmul_grouped pool %d group %d [%d][%d]: %.9g vs %.9g\n", use_pool, g, t, r,
                                    yb[g][t * 64 + r], ya[g][t * 64 + r]);
                        fail();
                    }
    }
    /* refused: another width; nothing written */
    bd_mat narrow = W[2];
    narrow.ncols = 256;
    bd_matmul_grp bad[2] = {{&W[0], rows_c, 3, yb[0], 64}, {&narrow, rows_c, 3, yb[1], 64}};
    memset(yb[0], 0x7f, 16 * 64 * sizeof(float));
    assert_false(bd_matmul_grouped(pool, bad, 2, x, n, nx, scratch));
    for (int i = 0; i < 16 * 64; i++) assert_true(memcmp(&yb[0][i], "\x7f\x7f\x7f\x7f", 4) == 0);
    /* interleaved Q8_0 wants packed activations where the table packs */
    const bd_kernels *k = bd_kernels_get();
    const size_t wb8 = row_bytes(BD_TYPE_Q8_0, n);
    uint8_t *w8 = xalloc(16 * wb8), *tmp8 = xalloc(16 * wb8);
    for (int r = 0; r < 16; r++) fill_random_weight(BD_TYPE_Q8_0, w8 + r * wb8, n, r % 3);
    bd_mat Q = {.type = BD_TYPE_Q8_0, .ncols = n, .nrows = 16, .row_bytes = wb8, .data = w8};
    assert_true(bd_mat_interleave(&Q, tmp8));
    bd_matmul_grp q8[1] = {{&Q, rows_c, 3, yb[0], 64}};
    const bool packs = k->tile && k->tile->il_rows && k->tile->pack;
    if (packs) assert_false(bd_matmul_grouped(pool, q8, 1, x, n, nx, scratch));
    free(w8);
    free(tmp8);
    for (int g = 0; g < 6; g++) {
        free(ya[g]);
        free(yb[g]);
    }
    for (int j = 0; j < 4; j++) free(w[j]);
    free(scratch);
    free(x);
    free(xg);
    bd_pool_free(pool);
}

/*
 * The chosen table: the level BLOCKDRAFT_ISA forces if set (the tests run
 * under every level, tests/e2e/isa_levels.sh), else the last (best) level
 * this machine runs.
 */
static void test_chosen(void **state) {
    (void)state;
    const bd_kernels *k = bd_kernels_get();
    assert_non_null(k);
    const char *env = getenv("BLOCKDRAFT_ISA");
    bd_isa want = BD_ISA_REF;
    if (env) {
        assert_true(bd_isa_parse(env, &want));
        assert_non_null(bd_kernels_for(want));
    } else {
        for (int i = 0; i < BD_ISA_COUNT; i++)
            if (bd_kernels_for((bd_isa)i)) want = (bd_isa)i;
    }
    assert_string_equal(k->name, bd_isa_name(want));
    assert_int_equal(k->isa, want);
}

/* Feature detection against Linux's own (the flags line of /proc/cpuinfo,
 * where the kernel also clears what the OS does not save the state of). */
static void test_cpu_features(void **state) {
    (void)state;
    const bd_cpu *c = bd_cpu_get();
#if defined(__x86_64__)
    static const struct {
        bd_cpu_feature f;
        const char *linux_name;
    } k_map[] = {
        {BD_CPU_AVX2, "avx2"},           {BD_CPU_FMA, "fma"},           {BD_CPU_F16C, "f16c"},
        {BD_CPU_AVXVNNI, "avx_vnni"},    {BD_CPU_AVX512F, "avx512f"},   {BD_CPU_AVX512DQ, "avx512dq"},
        {BD_CPU_AVX512BW, "avx512bw"},   {BD_CPU_AVX512VL, "avx512vl"}, {BD_CPU_AVX512VNNI, "avx512_vnni"},
        {BD_CPU_AVX512BF16, "avx512_bf16"}, {BD_CPU_AVX512VBMI, "avx512vbmi"}, {BD_CPU_AMX_TILE, "amx_tile"},
        {BD_CPU_AMX_INT8, "amx_int8"},
    };
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) SKIP_BECAUSE("no /proc/cpuinfo to compare with");
    static char line[8192];
    bool found = false;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            found = true;
            break;
        }
    fclose(f);
    assert_true(found);
    for (size_t i = 0; i < sizeof k_map / sizeof k_map[0]; i++) {
        char pat[40];
        snprintf(pat, sizeof pat, " %s", k_map[i].linux_name);
        const char *p = strstr(line, pat);
        const size_t l = strlen(pat);
        const bool linux_has = p && (p[l] == ' ' || p[l] == '\n' || p[l] == '\0');
        if (linux_has != bd_cpu_has(c, k_map[i].f)) {
            print_error("%s: /proc/cpuinfo %s, bd_cpu %s\n", bd_cpu_feature_name(k_map[i].f),
                        linux_has ? "has it" : "lacks it", bd_cpu_has(c, k_map[i].f) ? "has it" : "lacks it");
            fail();
        }
    }
#else
    assert_int_equal(c->bits, 0);
#endif
    print_message("  cpu: %s\n", bd_cpu_describe());
}

/*
 * Levels and their feature checks, on made-up CPUs (so the checks are the
 * same on every host): each level needs every feature its file is
 * compiled for (the Makefile's -m flags), the refusal names the missing
 * ones, unknown names are refused, and BLOCKDRAFT_ISA set to a level this
 * machine cannot run (or to no level) makes bd_kernels_check fail.
 */
static void test_isa_levels(void **state) {
    (void)state;
    char why[200];
    bd_isa isa;
    static const char *const names[BD_ISA_COUNT] = {"ref", "avx2", "avxvnni", "avx512", "amx"};
    for (int i = 0; i < BD_ISA_COUNT; i++) {
        assert_true(bd_isa_parse(names[i], &isa));
        assert_int_equal(isa, i);
        assert_string_equal(bd_isa_name(isa), names[i]);
    }
    assert_false(bd_isa_parse("AVX2", &isa));
    assert_false(bd_isa_parse("", &isa));
    assert_false(bd_isa_parse("avx512vnni", &isa));

    const uint32_t avx2 = BD_CPU_BIT(BD_CPU_AVX2) | BD_CPU_BIT(BD_CPU_FMA) | BD_CPU_BIT(BD_CPU_F16C);
    const uint32_t avx512 = avx2 | BD_CPU_BIT(BD_CPU_AVX512F) | BD_CPU_BIT(BD_CPU_AVX512DQ) |
                            BD_CPU_BIT(BD_CPU_AVX512BW) | BD_CPU_BIT(BD_CPU_AVX512VL) |
                            BD_CPU_BIT(BD_CPU_AVX512VNNI);
    const bd_cpu none = {.bits = 0},
                 zen4 = {.bits = avx512 | BD_CPU_BIT(BD_CPU_AVX512BF16) | BD_CPU_BIT(BD_CPU_AVX512VBMI)};
    const bd_cpu no_dq = {.bits = avx512 & ~BD_CPU_BIT(BD_CPU_AVX512DQ)};
    const bd_cpu no_f16c = {.bits = avx2 & ~BD_CPU_BIT(BD_CPU_F16C)};
    const bd_cpu spr = {.bits = avx512 | BD_CPU_BIT(BD_CPU_AVX512VBMI) | BD_CPU_BIT(BD_CPU_AMX_TILE) |
                                BD_CPU_BIT(BD_CPU_AMX_INT8)};
    /* AMX without VBMI does not exist, but the level checks for it (its file's -mavx512vbmi) */
    const bd_cpu amx_no_vbmi = {.bits = avx512 | BD_CPU_BIT(BD_CPU_AMX_TILE) | BD_CPU_BIT(BD_CPU_AMX_INT8)};
    assert_true(bd_isa_runs_on(BD_ISA_REF, &none, why, sizeof why));
#if defined(__x86_64__)
    assert_false(bd_isa_runs_on(BD_ISA_AVX2, &none, why, sizeof why));
    assert_string_equal(why, "CPU lacks avx2 fma f16c");
    assert_false(bd_isa_runs_on(BD_ISA_AVX2, &no_f16c, why, sizeof why));
    assert_string_equal(why, "CPU lacks f16c");
    assert_true(bd_isa_runs_on(BD_ISA_AVX2, &no_dq, why, sizeof why));
    assert_false(bd_isa_runs_on(BD_ISA_AVX512, &no_dq, why, sizeof why));
    assert_string_equal(why, "CPU lacks avx512dq");
    assert_true(bd_isa_runs_on(BD_ISA_AVX512, &zen4, why, sizeof why));
    assert_false(bd_isa_runs_on(BD_ISA_AVXVNNI, &zen4, why, sizeof why));
    assert_string_equal(why, "CPU lacks avxvnni");
    const bd_cpu adl = {.bits = avx2 | BD_CPU_BIT(BD_CPU_AVXVNNI)};
    assert_true(bd_isa_runs_on(BD_ISA_AVXVNNI, &adl, why, sizeof why));
    assert_false(bd_isa_runs_on(BD_ISA_AVX512, &adl, why, sizeof why));
    assert_string_equal(why, "CPU lacks avx512f avx512dq avx512bw avx512vl avx512vnni");
    assert_false(bd_isa_runs_on(BD_ISA_AMX, &zen4, why, sizeof why));
    assert_string_equal(why, "CPU lacks amx-tile amx-int8");
    assert_true(bd_isa_runs_on(BD_ISA_AMX, &spr, why, sizeof why));
    assert_false(bd_isa_runs_on(BD_ISA_AMX, &amx_no_vbmi, why, sizeof why));
    assert_string_equal(why, "CPU lacks avx512vbmi");
    assert_false(bd_isa_runs_on(BD_ISA_AMX, &none, why, sizeof why));
    assert_non_null(strstr(why, "avx512vnni avx512vbmi amx-tile amx-int8"));
#else
    for (int i = BD_ISA_AVX2; i < BD_ISA_COUNT; i++) {
        assert_false(bd_isa_runs_on((bd_isa)i, &spr, why, sizeof why));
        assert_string_equal(why, "not built for this architecture");
    }
    (void)zen4, (void)no_dq, (void)no_f16c, (void)amx_no_vbmi;
#endif

    /* bd_kernels_check reads BLOCKDRAFT_ISA on every call */
    char *saved = getenv("BLOCKDRAFT_ISA") ? strdup(getenv("BLOCKDRAFT_ISA")) : NULL;
    char err[300];
    setenv("BLOCKDRAFT_ISA", "avx9000", 1);
    assert_false(bd_kernels_check(err, sizeof err));
    assert_string_equal(err, "BLOCKDRAFT_ISA=avx9000: unknown kernel level (known: ref avx2 avxvnni avx512 amx)");
    for (int i = 0; i < BD_ISA_COUNT; i++) {
        setenv("BLOCKDRAFT_ISA", names[i], 1);
        const bool ok = bd_kernels_check(err, sizeof err);
        assert_int_equal(ok, bd_kernels_for((bd_isa)i) != NULL);
        if (!ok) {
            assert_true(bd_isa_available((bd_isa)i, why, sizeof why) == false);
            assert_non_null(strstr(err, "this machine cannot run that kernel level"));
            assert_non_null(strstr(err, why));
            print_message("  refused: %s\n", err);
        }
    }
    if (saved) setenv("BLOCKDRAFT_ISA", saved, 1);
    else unsetenv("BLOCKDRAFT_ISA");
    free(saved);
    assert_true(bd_kernels_check(err, sizeof err));
}

/* The interleaved kernels' prefetch target: BLOCKDRAFT_PREFETCH=l1|l2 as
 * given when the tables were built, else L1 on AMD family 0x1A only, and
 * its distance by vendor; any
 * other value is refused by bd_kernels_check, which reads it every call. */
static void test_prefetch_choice(void **state) {
    (void)state;
    const char *pf = getenv("BLOCKDRAFT_PREFETCH");
    const bd_cpu *cpu = bd_cpu_get();
    const char *want = pf && (!strcmp(pf, "l1") || !strcmp(pf, "l2")) ? pf
                       : cpu->amd && cpu->family == 0x1A             ? "l1"
                                                                     : "l2";
    assert_string_equal(bd_kernels_prefetch_name(), want);
    assert_int_equal(bd_il_prefetch_l1, !strcmp(want, "l1"));
    /* the distance: 8 KiB on AMD, 1 KiB elsewhere (kernels.h) */
    assert_int_equal(bd_il_prefetch_bytes, cpu->amd ? 8192 : 1024);
    print_message("  prefetch into %s, %u bytes ahead (cpu %s family 0x%x)\n", want, (unsigned)bd_il_prefetch_bytes,
                  cpu->amd ? "AMD" : "other", cpu->family);
    char *saved = pf ? strdup(pf) : NULL;
    char err[300];
    setenv("BLOCKDRAFT_PREFETCH", "l3", 1);
    assert_false(bd_kernels_check(err, sizeof err));
    assert_string_equal(err, "BLOCKDRAFT_PREFETCH=l3: unknown prefetch target (known: l1 l2)");
    setenv("BLOCKDRAFT_PREFETCH", "", 1);
    assert_false(bd_kernels_check(err, sizeof err));
    setenv("BLOCKDRAFT_PREFETCH", "l1", 1);
    assert_true(bd_kernels_check(err, sizeof err));
    setenv("BLOCKDRAFT_PREFETCH", "l2", 1);
    assert_true(bd_kernels_check(err, sizeof err));
    if (saved) setenv("BLOCKDRAFT_PREFETCH", saved, 1);
    else unsetenv("BLOCKDRAFT_PREFETCH");
    free(saved);
}

/* The rotated basis of quantized caches (attention.h): which caches
 * rotate and in chunks of what length, as llama.cpp v0.5.0 decides it
 * (llama-kv-cache.cpp: a quantized type and a head size that is a multiple
 * of 64; K in chunks of the largest power of two dividing the head size,
 * V in chunks of 64); and bd_attn_rotate against H x with H built here by
 * Sylvester's doubling ([[H, H], [H, -H]] / sqrt 2 per step) in double:
 * within 1e-6 of the row's largest value, and twice is the identity. */
static void test_attn_rotation(void **state) {
    (void)state;
    static const struct {
        uint32_t type;
        int32_t hd, k, v;
    } cases[] = {
        {BD_TYPE_Q4_0, 64, 64, 64},   {BD_TYPE_Q4_0, 128, 128, 64}, {BD_TYPE_Q8_0, 256, 256, 64},
        {BD_TYPE_IQ4_NL, 192, 64, 64}, {BD_TYPE_Q5_1, 96, 0, 0},     {BD_TYPE_Q4_1, 32, 0, 0},
        {BD_TYPE_F16, 128, 0, 0},     {BD_TYPE_BF16, 128, 0, 0},    {BD_TYPE_F32, 128, 0, 0},
        {BD_TYPE_Q5_0, 512, 512, 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(bd_attn_rot(cases[i].type, cases[i].hd, false), cases[i].k);
        assert_int_equal(bd_attn_rot(cases[i].type, cases[i].hd, true), cases[i].v);
    }
    enum { NMAX = 256 };
    static double H[NMAX][NMAX];
    float x[2 * NMAX], y[2 * NMAX];
    for (int n = 64; n <= NMAX; n *= 2) {
        H[0][0] = 1.0;
        for (int s = 1; s < n; s *= 2)
            for (int r = 0; r < s; r++)
                for (int c = 0; c < s; c++) {
                    const double h = H[r][c] / sqrt(2.0);
                    H[r][c] = H[r][c + s] = H[r + s][c] = h;
                    H[r + s][c + s] = -h;
                }
        for (int j = 0; j < 2 * n; j++) x[j] = y[j] = (float)((double)(rng_u64() >> 11) * 0x1p-53 * 8.0 - 4.0);
        bd_attn_rotate(y, 2 * n, n); /* two chunks */
        for (int c = 0; c < 2; c++)
            for (int r = 0; r < n; r++) {
                double want = 0;
                for (int j = 0; j < n; j++) want += H[r][j] * x[c * n + j];
                if (fabs(want - y[c * n + r]) > 4e-6) {
                    print_error("rotate n=%d chunk %d row %d: %.9g, H x %.9g\n", n, c, r, y[c * n + r], want);
                    fail();
                }
            }
        bd_attn_rotate(y, 2 * n, n);
        for (int j = 0; j < 2 * n; j++) assert_true(fabsf(y[j] - x[j]) <= 4e-6f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefetch_choice),
        cmocka_unit_test(test_attn_rotation),
        cmocka_unit_test(test_ref_table),
        cmocka_unit_test(test_avx2),
        cmocka_unit_test(test_avxvnni),
        cmocka_unit_test(test_avx512),
        cmocka_unit_test(test_amx),
        cmocka_unit_test(test_chosen),
        cmocka_unit_test(test_cpu_features),
        cmocka_unit_test(test_isa_levels),
        cmocka_unit_test(test_matmul_paths),
        cmocka_unit_test(test_matmul_multi),
        cmocka_unit_test(test_matmul_grouped),
        cmocka_unit_test(test_matmul_interleaved),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_expf_poly),
        cmocka_unit_test(test_expf_dd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
