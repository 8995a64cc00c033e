/*
 * test_quant.c - ggml block formats: dequantization of hand-built blocks,
 * f16/bf16 conversion, quantizer error bounds, reference dot products.
 *
 * Independent references used here:
 *   - block values worked out by hand from the layouts in
 *     shared/reference/gguf-and-architectures.md section 3 (in comments);
 *   - IEEE binary16 / bfloat16 bit patterns known by hand, and the F16C
 *     hardware converter where the CPU has it (exhaustive f16 -> f32);
 *   - dot products checked against a double-precision dot of the
 *     dequantized operands (dequantization itself pinned by the hand-built
 *     blocks);
 *   - Q4_K / Q5_K and Q2_K / Q3_K dot results, bit for bit, from
 *     llama.cpp's vec_dot.
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
#include "tensor/kernels.h"
#include "tensor/tensor.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
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

static float f32_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void *xalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    assert_non_null(p);
    return p;
}

static size_t row_bytes(uint32_t type, int64_t n) {
    uint64_t b = 0;
    assert_true(bd_row_size(type, n, &b));
    return (size_t)b;
}

static const uint32_t k_wtypes[] = {BD_TYPE_F32,  BD_TYPE_F16,    BD_TYPE_BF16,  BD_TYPE_Q4_0,
                                    BD_TYPE_Q4_1, BD_TYPE_Q5_0,   BD_TYPE_Q5_1,  BD_TYPE_Q8_0,
                                    BD_TYPE_Q2_K, BD_TYPE_Q3_K,   BD_TYPE_Q4_K,  BD_TYPE_Q5_K,
                                    BD_TYPE_Q6_K, BD_TYPE_IQ4_NL, BD_TYPE_IQ4_XS};
#define N_WTYPES (sizeof k_wtypes / sizeof k_wtypes[0])

static void expect_row(const float *got, const float *want_idx_val, int n_pairs) {
    /* want_idx_val: pairs (index, value) */
    for (int i = 0; i < n_pairs; i++) {
        int idx = (int)want_idx_val[2 * i];
        float want = want_idx_val[2 * i + 1];
        if (got[idx] != want) {
            print_error("element %d: got %.9g want %.9g\n", idx, got[idx], want);
            fail();
        }
    }
}

/* ------------------------------------------------------------------------
 * f16 / bf16
 * ---------------------------------------------------------------------- */

static void test_f16_known(void **state) {
    (void)state;
    /* f16 -> f32, bit patterns by hand */
    assert_true(bd_f16_to_f32(0x3C00) == 1.0f);
    assert_true(bd_f16_to_f32(0xC000) == -2.0f);
    assert_true(bd_f16_to_f32(0x7BFF) == 65504.0f);         /* largest finite */
    assert_true(bd_f16_to_f32(0x0400) == ldexpf(1, -14));   /* smallest normal */
    assert_true(bd_f16_to_f32(0x0001) == ldexpf(1, -24));   /* smallest subnormal */
    assert_true(bd_f16_to_f32(0x03FF) == ldexpf(1023, -24)); /* largest subnormal */
    assert_true(bd_f16_to_f32(0x8001) == -ldexpf(1, -24));
    assert_true(bd_f16_to_f32(0x3555) == ldexpf(0x555 | 0x400, -12)); /* 0.333251953125 */
    assert_true(bits_of(bd_f16_to_f32(0x8000)) == 0x80000000u);      /* -0 */
    assert_true(bits_of(bd_f16_to_f32(0x7C00)) == 0x7F800000u);      /* +inf */
    assert_true(bits_of(bd_f16_to_f32(0xFC00)) == 0xFF800000u);      /* -inf */
    assert_true(isnan(bd_f16_to_f32(0x7E00)));
    assert_true(isnan(bd_f16_to_f32(0x7C01)));
    assert_true(isnan(bd_f16_to_f32(0xFFFF)));

    /* f32 -> f16, round to nearest even */
    assert_int_equal(bd_f32_to_f16(1.0f), 0x3C00);
    assert_int_equal(bd_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(bd_f32_to_f16(65504.0f), 0x7BFF);
    assert_int_equal(bd_f32_to_f16(65519.996f), 0x7BFF); /* just below the tie */
    assert_int_equal(bd_f32_to_f16(65520.0f), 0x7C00);   /* tie, odd -> rounds up to inf */
    assert_int_equal(bd_f32_to_f16(1e9f), 0x7C00);
    assert_int_equal(bd_f32_to_f16(-INFINITY), 0xFC00);
    assert_int_equal(bd_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3C00);     /* tie -> even */
    assert_int_equal(bd_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3C02); /* tie -> even */
    assert_int_equal(bd_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)), 0x3C01);
    assert_int_equal(bd_f32_to_f16(ldexpf(1, -24)), 0x0001);
    assert_int_equal(bd_f32_to_f16(ldexpf(1, -25)), 0x0000);         /* tie -> even (0) */
    assert_int_equal(bd_f32_to_f16(ldexpf(1.0000001f, -25)), 0x0001); /* above the tie */
    assert_int_equal(bd_f32_to_f16(ldexpf(3, -25)), 0x0002);         /* 1.5 units -> 2 */
    assert_int_equal(bd_f32_to_f16(ldexpf(5, -25)), 0x0002);         /* 2.5 units -> 2 */
    assert_int_equal(bd_f32_to_f16(ldexpf(2047, -25)), 0x0400); /* 1023.5 units -> normal */
    assert_int_equal(bd_f32_to_f16(ldexpf(1, -14)), 0x0400);
    assert_int_equal(bd_f32_to_f16(ldexpf(1, -30)), 0x0000);
    assert_int_equal(bd_f32_to_f16(-ldexpf(1, -24)), 0x8001);
    uint16_t h = bd_f32_to_f16(NAN);
    assert_true((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0);
    h = bd_f32_to_f16(f32_of(0x7F800001u)); /* NaN with only a low mantissa bit */
    assert_true((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0);
}

static void test_bf16_known(void **state) {
    (void)state;
    assert_true(bd_bf16_to_f32(0x3F80) == 1.0f);
    assert_true(bd_bf16_to_f32(0xC040) == -3.0f);
    assert_true(bits_of(bd_bf16_to_f32(0x0001)) == 0x00010000u); /* subnormal kept */
    assert_true(isinf(bd_bf16_to_f32(0x7F80)));
    assert_int_equal(bd_f32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(bd_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3F80);     /* tie -> even */
    assert_int_equal(bd_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3F82); /* tie -> even */
    assert_int_equal(bd_f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -16)), 0x3F81);
    assert_int_equal(bd_f32_to_bf16(f32_of(0x7F7FFFFFu)), 0x7F80); /* FLT_MAX rounds to inf */
    assert_int_equal(bd_f32_to_bf16(INFINITY), 0x7F80);
    assert_int_equal(bd_f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(bd_f32_to_bf16(f32_of(0x00018000u)), 0x0002); /* subnormal tie -> even */
    uint16_t h = bd_f32_to_bf16(f32_of(0x7F800001u)); /* sNaN must not become inf */
    assert_true((h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0);
    h = bd_f32_to_bf16(f32_of(0xFFFFFFFFu));
    assert_true((h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0);
}

/* The hardware's f16 conversions: x86 F16C, or AArch64's FCVT (through
 * __fp16; round to nearest even, the default FPCR mode). */
#if defined(__x86_64__)
__attribute__((target("f16c"))) static float hw_h2f(uint16_t h) {
    return _cvtsh_ss(h);
}
__attribute__((target("f16c"))) static uint16_t hw_f2h(float f) {
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
static bool hw_f16_missing(void) { return !bd_cpu_has(bd_cpu_get(), BD_CPU_F16C); }
#define HW_F16_WHY "CPU lacks f16c"
#elif defined(__aarch64__)
static float hw_h2f(uint16_t h) {
    __fp16 v;
    memcpy(&v, &h, 2);
    return (float)v;
}
static uint16_t hw_f2h(float f) {
    const __fp16 v = (__fp16)f;
    uint16_t h;
    memcpy(&h, &v, 2);
    return h;
}
static bool hw_f16_missing(void) { return false; }
#define HW_F16_WHY ""
#else
static float hw_h2f(uint16_t h) { return (float)h; }
static uint16_t hw_f2h(float f) { return (uint16_t)f; }
static bool hw_f16_missing(void) { return true; }
#define HW_F16_WHY "no hardware f16 conversion known for this architecture"
#endif

/* Exhaustive f16 -> f32 and 2M f32 -> f16 against the hardware's
 * conversions (F16C on x86, FCVT on AArch64). */
static void test_f16_vs_f16c(void **state) {
    (void)state;
    if (hw_f16_missing()) {
        printf("skip: %s: %s\n", __func__, HW_F16_WHY);
        skip();
    }
    for (uint32_t i = 0; i < 65536; i++) {
        float a = bd_f16_to_f32((uint16_t)i), b = hw_h2f((uint16_t)i);
        if (isnan(b)) assert_true(isnan(a));
        else assert_int_equal(bits_of(a), bits_of(b));
    }
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rng_u64();
        if (i & 1) /* half of them near the f16 range, where rounding matters */
            u = (u & 0x807FFFFFu) | ((uint32_t)(100 + (u >> 23) % 45) << 23);
        float f = f32_of(u);
        uint16_t a = bd_f32_to_f16(f), b = hw_f2h(f);
        if (isnan(f)) assert_true((a & 0x7C00) == 0x7C00 && (a & 0x3FF) != 0);
        else if (a != b) {
            print_error("f32 0x%08x: got 0x%04x want 0x%04x\n", u, a, b);
            fail();
        }
    }
}

/* ------------------------------------------------------------------------
 * Hand-built blocks
 * ---------------------------------------------------------------------- */

static void test_deq_q4_0(void **state) {
    (void)state;
    block_q4_0 b;
    memset(&b, 0, sizeof b);
    b.d = 0x3800; /* 0.5 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    assert_true(bd_dequantize_row(BD_TYPE_Q4_0, &b, y, 32));
    /* elem j (j<16) = 0.5*(j-8); elem j+16 = 0.5*((15-j)-8) */
    const float want[] = {0, -4.0f, 1, -3.5f, 8, 0.0f, 15, 3.5f, 16, 3.5f, 23, 0.0f, 31, -4.0f};
    expect_row(y, want, 7);
}

static void test_deq_q4_1(void **state) {
    (void)state;
    block_q4_1 b;
    memset(&b, 0, sizeof b);
    b.d = 0x3800; /* 0.5 */
    b.m = 0x4000; /* 2.0 */
    b.qs[0] = 0xF0;
    b.qs[7] = 0x3C;
    float y[32];
    assert_true(bd_dequantize_row(BD_TYPE_Q4_1, &b, y, 32));
    /* 0: 0.5*0+2; 16: 0.5*15+2 = 9.5; 7: 0.5*12+2 = 8; 23: 0.5*3+2 = 3.5 */
    const float want[] = {0, 2.0f, 16, 9.5f, 7, 8.0f, 23, 3.5f, 1, 2.0f};
    expect_row(y, want, 5);
}

static void test_deq_q5_0(void **state) {
    (void)state;
    block_q5_0 b;
    memset(&b, 0, sizeof b);
    b.d = 0x3C00; /* 1.0 */
    b.qh[0] = 0x01; /* bit 0 */
    b.qh[3] = 0x80; /* bit 31 */
    b.qs[15] = 0xF0;
    b.qs[3] = 0x5A;
    float y[32];
    assert_true(bd_dequantize_row(BD_TYPE_Q5_0, &b, y, 32));
    /* 0: (0|16)-16 = 0; 16: 0-16; 31: (15|16)-16 = 15; 15: 0-16;
     * 3: 10-16 = -6; 19: 5-16 = -11 */
    const float want[] = {0, 0.0f, 16, -16.0f, 31, 15.0f, 15, -16.0f, 3, -6.0f, 19, -11.0f};
    expect_row(y, want, 6);
}

static void test_deq_q5_1(void **state) {
    (void)state;
    block_q5_1 b;
    memset(&b, 0, sizeof b);
    b.d = 0x3800;   /* 0.5 */
    b.m = 0xBC00;   /* -1.0 */
    b.qh[3] = 0x80; /* bit 31 */
    b.qh[1] = 0x04; /* bit 10 */
    b.qs[15] = 0xF0;
    b.qs[10] = 0x01;
    float y[32];
    assert_true(bd_dequantize_row(BD_TYPE_Q5_1, &b, y, 32));
    /* 31: 0.5*31-1 = 14.5; 10: 0.5*(1|16)-1 = 7.5; 26: 0.5*0-1 = -1 */
    const float want[] = {31, 14.5f, 10, 7.5f, 26, -1.0f, 15, -1.0f};
    expect_row(y, want, 4);
}

static void test_deq_q8_0(void **state) {
    (void)state;
    block_q8_0 b;
    b.d = 0x3800; /* 0.5 */
    for (int j = 0; j < 32; j++) b.qs[j] = (int8_t)(j - 16);
    b.qs[5] = -128;
    b.qs[6] = 127;
    float y[32];
    assert_true(bd_dequantize_row(BD_TYPE_Q8_0, &b, y, 32));
    const float want[] = {0, -8.0f, 5, -64.0f, 6, 63.5f, 31, 7.5f};
    expect_row(y, want, 4);
}

/* Scale bytes shared by the Q4_K and Q5_K blocks below. Decoded by hand:
 *   s<4:  sc = b[s]&63, m = b[s+4]&63  -> sc0..3 = 1,2,3,4; m0..3 = 5,6,7,8
 *   s>=4: sc = (b[s+4]&15) | (b[s-4]>>6)<<4, m = (b[s+4]>>4) | (b[s]>>6)<<4
 *     sc4 = 1 | 1<<4 = 17   m4 = 2 | 2<<4 = 34   (b[0]=0x41, b[4]=0x85, b[8]=0x21)
 *     sc5 = 3               m5 = 4               (b[9]=0x43)
 *     sc6 = 5               m6 = 6               (b[10]=0x65)
 *     sc7 = 7               m7 = 8               (b[11]=0x87) */
static const uint8_t k_kscales[12] = {0x41, 2, 3, 4, 0x85, 6, 7, 8, 0x21, 0x43, 0x65, 0x87};

static void test_deq_q4_K(void **state) {
    (void)state;
    block_q4_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x3C00;    /* 1.0 */
    b.dmin = 0x3800; /* 0.5 */
    memcpy(b.scales, k_kscales, 12);
    b.qs[0] = 0xF3;   /* elem 0 (sub 0) low 3; elem 32 (sub 1) high 15 */
    b.qs[64] = 0x7C;  /* elem 128 (sub 4) low 12; elem 160 (sub 5) high 7 */
    b.qs[127] = 0xE1; /* elem 223 (sub 6) low 1; elem 255 (sub 7) high 14 */
    float y[256];
    assert_true(bd_dequantize_row(BD_TYPE_Q4_K, &b, y, 256));
    /* w = d*sc*q - dmin*m:
     *   0: 1*3 - 2.5 = 0.5      32: 2*15 - 3 = 27     1: -2.5     33: -3
     *   128: 17*12 - 17 = 187   160: 3*7 - 2 = 19     129: -17
     *   223: 5*1 - 3 = 2        255: 7*14 - 4 = 94    96: 4*0 - 4 = -4 */
    const float want[] = {0,   0.5f,   32,  27.0f, 1,   -2.5f, 33,  -3.0f, 128, 187.0f,
                          160, 19.0f,  129, -17.0f, 223, 2.0f, 255, 94.0f, 96,  -4.0f};
    expect_row(y, want, 10);
}

static void test_deq_q5_K(void **state) {
    (void)state;
    block_q5_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x4000;    /* 2.0 */
    b.dmin = 0x3C00; /* 1.0 */
    memcpy(b.scales, k_kscales, 12);
    b.qh[0] = 0x81;  /* 5th bit for elem 0 of sub 0 and elem 0 of sub 7 */
    b.qh[31] = 0x02; /* 5th bit for elem 31 of sub 1 (elem 63) */
    b.qs[96] = 0x50; /* elem 192 (sub 6) low 0; elem 224 (sub 7) high 5 */
    b.qs[31] = 0x3F; /* elem 31 (sub 0) low 15; elem 63 (sub 1) high 3 */
    float y[256];
    assert_true(bd_dequantize_row(BD_TYPE_Q5_K, &b, y, 256));
    /*   0: 2*1*16 - 5 = 27      224: 2*7*(5+16) - 8 = 286    192: 2*5*0 - 6 = -6
     *  31: 2*1*15 - 5 = 25       63: 2*2*(3+16) - 6 = 70      1: -5 */
    const float want[] = {0, 27.0f, 224, 286.0f, 192, -6.0f, 31, 25.0f, 63, 70.0f, 1, -5.0f};
    expect_row(y, want, 6);
}

static void test_deq_q6_K(void **state) {
    (void)state;
    block_q6_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x3400; /* 0.25 */
    for (int k = 0; k < 16; k++) b.scales[k] = (int8_t)(k + 1);
    b.scales[0] = -3;
    b.ql[0] = 0x21;  /* elem 0 low 1; elem 64 low 2 */
    b.qh[0] = 0xE4;  /* bits 0-1: 0 (elem 0), 2-3: 1 (elem 32), 4-5: 2 (elem 64), 6-7: 3 (elem 96) */
    b.ql[64] = 0x0F; /* half 1: elem 128 low 15 */
    b.qh[32] = 0x03; /* half 1: elem 128 high 3 */
    float y[256];
    assert_true(bd_dequantize_row(BD_TYPE_Q6_K, &b, y, 256));
    /* w = d * scales[e/16] * (q6 - 32):
     *   0: q=1 -> 0.25*-3*-31 = 23.25     32: q=16 -> 0.25*3*-16 = -12
     *  64: q=34 -> 0.25*5*2 = 2.5         96: q=48 -> 0.25*7*16 = 28
     * 128: q=63 -> 0.25*9*31 = 69.75       1: q=0 -> 0.25*-3*-32 = 24
     * 255: q=0, scales[15]=16 -> 0.25*16*-32 = -128 */
    const float want[] = {0,   23.25f, 32, -12.0f, 64, 2.5f,  96,
                          28.0f, 128, 69.75f, 1, 24.0f, 255, -128.0f};
    expect_row(y, want, 7);
}

/* Q2_K: element e = 128h + 32j + 16k + l has its 2-bit code at bits 2j of
 * qs[32h + 16k + l] and belongs to sub-block e / 16, whose byte scales[s]
 * holds the scale (low nibble) and the min (high nibble):
 * w = d * sc * q - dmin * m. */
static void test_deq_q2_K(void **state) {
    (void)state;
    block_q2_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x3C00;    /* 1.0 */
    b.dmin = 0x3800; /* 0.5 */
    b.scales[0] = 0x21;  /* sub 0: sc 1, m 2 */
    b.scales[2] = 0x53;  /* sub 2: sc 3, m 5 */
    b.scales[4] = 0x12;  /* sub 4: sc 2, m 1 */
    b.scales[9] = 0xF7;  /* sub 9: sc 7, m 15 */
    b.scales[13] = 0x10; /* sub 13: sc 0, m 1 */
    b.scales[15] = 0x04; /* sub 15: sc 4, m 0 */
    b.qs[0] = 0x9B;  /* elem 0: 3, elem 32: 2, elem 64: 1, elem 96: 2 */
    b.qs[63] = 0xB1; /* elem 159: 1, elem 191: 0, elem 223: 3, elem 255: 2 */
    float y[256];
    assert_true(bd_dequantize_row(BD_TYPE_Q2_K, &b, y, 256));
    /*   0: 1*3 - 0.5*2 = 2      1: 0 - 1 = -1        32: 3*2 - 2.5 = 3.5
     *  64: 2*1 - 0.5 = 1.5     96: sub 6 all zero   159: 7*1 - 7.5 = -0.5
     * 223: 0*3 - 0.5 = -0.5   255: 4*2 - 0 = 8      16: sub 1 all zero */
    const float want[] = {0, 2.0f, 1, -1.0f, 32, 3.5f, 64, 1.5f, 96, 0.0f,
                          159, -0.5f, 223, -0.5f, 255, 8.0f, 16, 0.0f};
    expect_row(y, want, 9);
}

/* Q3_K: codes placed as Q2_K's, the third bit of element e is bit e / 32 of
 * hmask[e % 32] (set: q = code, clear: q = code - 4); sub-block s has the
 * 6-bit scale v_s (low 4 bits: s < 8 scales[s] low nibble, else scales[s-8]
 * high nibble; high 2 bits: scales[8 + s % 4] >> 2 (s / 4));
 * w = d * (v_s - 32) * q. */
static void test_deq_q3_K(void **state) {
    (void)state;
    block_q3_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x3800; /* 0.5 */
    b.scales[0] = 0x01;  /* v0 low 1 */
    b.scales[8] = 0x02;  /* v0 high 2: v0 = 33 -> 1 */
    b.scales[5] = 0x08;  /* v5 low 8 */
    b.scales[9] = 0x08;  /* v5 high (bits 2-3) 2: v5 = 40 -> 8 */
    b.scales[7] = 0xF0;  /* v15 low 15 */
    b.scales[11] = 0xC0; /* v15 high (bits 6-7) 3: v15 = 63 -> 31; every other v_s = 0 -> -32 */
    b.qs[0] = 0x03;     /* elem 0: code 3 */
    b.hmask[0] = 0x01;  /* elem 0: bit set -> q 3 */
    b.qs[16] = 0x10;    /* elem 80 (bits 4-5): code 1 */
    b.hmask[16] = 0x10; /* elem 144 (bit 4) set; elem 80 (bit 2) clear -> q -3 */
    b.qs[48] = 0x02;    /* elem 144: code 2 -> q 2 */
    b.qs[63] = 0xC0;    /* elem 255: code 3 */
    b.hmask[31] = 0x80; /* elem 255: bit set -> q 3 */
    float y[256];
    assert_true(bd_dequantize_row(BD_TYPE_Q3_K, &b, y, 256));
    /*   0: 0.5*1*3 = 1.5       1: 0.5*1*-4 = -2       16: 0.5*-32*-4 = 64
     *  80: 0.5*8*-3 = -12    144: 0.5*-32*2 = -32    255: 0.5*31*3 = 46.5
     * 254: 0.5*31*-4 = -62 */
    const float want[] = {0, 1.5f, 1, -2.0f, 16, 64.0f, 80, -12.0f, 144, -32.0f, 255, 46.5f, 254, -62.0f};
    expect_row(y, want, 7);
}

static void test_deq_iq4_nl(void **state) {
    (void)state;
    block_iq4_nl b;
    b.d = 0x4000; /* 2.0 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    assert_true(bd_dequantize_row(BD_TYPE_IQ4_NL, &b, y, 32));
    /* table: -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113 */
    const float want[] = {0, -254.0f, 16, 226.0f, 15, 226.0f, 31, -254.0f,
                          7, -20.0f,  8,  2.0f,   24, -20.0f};
    expect_row(y, want, 7);
}

static void test_deq_iq4_xs(void **state) {
    (void)state;
    block_iq4_xs b;
    memset(&b, 0, sizeof b);
    b.d = 0x3800; /* 0.5 */
    /* ls: ib0 = 0, ib1 = 63, ib2 = 33, ib3..7 = 32 (low nibble 0, high bits 2)
     * scales_l[0] = ib0 low 0 | ib1 low 15 << 4; scales_l[1] = ib2 low 1 | ib3 low 0
     * scales_h = ib0:0 | ib1:3<<2 | ib2:2<<4 | ib3..7: 2<<6 .. 2<<14 = 0xAAAC */
    b.scales_l[0] = 0xF0;
    b.scales_l[1] = 0x01;
    b.scales_h = 0xAAAC;
    b.qs[0] = 0x0F;  /* ib0: elem 0 -> 113, elem 16 -> -127 */
    b.qs[16] = 0x80; /* ib1: elem 32 -> -127, elem 48 -> 1 */
    float y[256];
    assert_true(bd_dequantize_row(BD_TYPE_IQ4_XS, &b, y, 256));
    /* w = d*(ls-32)*kv: 0: 0.5*-32*113 = -1808; 16: 0.5*-32*-127 = 2032;
     * 32: 0.5*31*-127 = -1968.5; 48: 0.5*31*1 = 15.5; 64: 0.5*1*-127 = -63.5;
     * 96: 0.5*0*-127 = 0 */
    const float want[] = {0, -1808.0f, 16, 2032.0f, 32, -1968.5f, 48, 15.5f, 64, -63.5f, 96, 0.0f};
    expect_row(y, want, 6);
}

static void test_deq_bad_args(void **state) {
    (void)state;
    float y[64];
    uint8_t buf[512] = {0};
    assert_false(bd_dequantize_row(BD_TYPE_Q4_K, buf, y, 100)); /* not a block multiple */
    assert_false(bd_dequantize_row(4, buf, y, 32));             /* retired id */
    assert_false(bd_dequantize_row(16, buf, y, 256));           /* IQ2_XXS: not supported */
    assert_false(bd_quantize_row(BD_TYPE_Q8_0, y, buf, 33));
    assert_true(isnan(bd_vec_dot_ref(16, 256, buf, buf)));
}

/* ------------------------------------------------------------------------
 * Quantizers
 * ---------------------------------------------------------------------- */

/* Relative RMSE of quantize->dequantize on n gaussian values. */
static double quant_rel_rmse(uint32_t type, const float *x, int64_t n) {
    void *q = xalloc(row_bytes(type, n));
    float *y = xalloc((size_t)n * sizeof(float));
    assert_true(bd_quantize_row(type, x, q, n));
    assert_true(bd_dequantize_row(type, q, y, n));
    double se = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        se += (double)(x[i] - y[i]) * (x[i] - y[i]);
        s2 += (double)x[i] * x[i];
    }
    free(q);
    free(y);
    return sqrt(se / s2);
}

static void test_quant_rmse(void **state) {
    (void)state;
    /* Bounds: a uniform quantizer with step D has RMS error D/sqrt(12).
     * For unit gaussians the block |max| is ~2.3 sigma (32 values) or ~2.9
     * (256), so Q8_0 ~ 2.3/127/3.46 = 0.0053, Q8_K ~ 0.0066, Q4_0 (16 levels
     * over 2*max) ~ 0.083. Fitted types (K-quants, IQ4) come in under their
     * plain-uniform estimate. ggml's own quantizers measure about 0.072
     * (Q4_K), 0.036 (Q5_K), 0.018 (Q6_K) on such data. Bounds are the
     * measured values of this implementation plus ~12 % headroom, so a
     * regression in a scale search fails here. */
    static const struct { uint32_t type; double bound; } cases[] = {
        {BD_TYPE_F16, 0.00025},  {BD_TYPE_BF16, 0.0019},  {BD_TYPE_Q8_0, 0.0060},
        {BD_TYPE_Q8_1, 0.0060},  {BD_TYPE_Q8_K, 0.0078},  {BD_TYPE_Q4_0, 0.097},
        {BD_TYPE_Q4_1, 0.089},   {BD_TYPE_Q5_0, 0.048},   {BD_TYPE_Q5_1, 0.043},
        {BD_TYPE_Q2_K, 0.31},    {BD_TYPE_Q3_K, 0.173},
        {BD_TYPE_Q4_K, 0.081},   {BD_TYPE_Q5_K, 0.041},   {BD_TYPE_Q6_K, 0.020},
        {BD_TYPE_IQ4_NL, 0.084}, {BD_TYPE_IQ4_XS, 0.085},
    };
    const int64_t n = 256 * 64;
    float *x = xalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = rng_gauss();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double e = quant_rel_rmse(cases[c].type, x, n);
        print_message("  %-7s rel rmse %.5f (bound %.4f)\n", bd_type_name(cases[c].type), e,
                      cases[c].bound);
        if (!getenv("BD_CALIBRATE")) assert_true(e < cases[c].bound);
        assert_true(e > 0); /* would be suspicious: these are lossy */
    }
    /* Same on data scaled far from 1 with 8x outliers every 97 values:
     * an outlier stretches its block's scale (for Q8_K's 256-blocks up to
     * ~3x the error), so the bound is 3x the plain one. */
    for (int64_t i = 0; i < n; i++) x[i] = 1e-3f * rng_gauss() * ((i % 97) == 0 ? 8.0f : 1.0f);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (cases[c].type == BD_TYPE_F16) continue; /* 1e-3 sits near f16's low end */
        double e = quant_rel_rmse(cases[c].type, x, n);
        print_message("  %-7s rel rmse %.5f with outliers, x1e-3\n", bd_type_name(cases[c].type), e);
        if (!getenv("BD_CALIBRATE")) assert_true(e < 3.0 * cases[c].bound);
    }
    free(x);
}

/* Zero, constant and single-spike inputs must round-trip sensibly. */
static void test_quant_special(void **state) {
    (void)state;
    const int64_t n = 512;
    float x[512], y[512];
    uint8_t q[2048];
    const uint32_t types[] = {BD_TYPE_Q4_0, BD_TYPE_Q4_1, BD_TYPE_Q5_0, BD_TYPE_Q5_1,   BD_TYPE_Q8_0,
                              BD_TYPE_Q8_1, BD_TYPE_Q8_K, BD_TYPE_Q2_K, BD_TYPE_Q3_K,   BD_TYPE_Q4_K,
                              BD_TYPE_Q5_K, BD_TYPE_Q6_K, BD_TYPE_IQ4_NL, BD_TYPE_IQ4_XS};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        memset(x, 0, sizeof x);
        assert_true(bd_quantize_row(types[t], x, q, n));
        assert_true(bd_dequantize_row(types[t], q, y, n));
        for (int i = 0; i < n; i++) assert_true(y[i] == 0.0f);
        /* one spike per block: the spike must come back within 1 % */
        for (int i = 0; i < n; i++) x[i] = (i % 32 == 5) ? -3.0f : 0.0f;
        assert_true(bd_quantize_row(types[t], x, q, n));
        assert_true(bd_dequantize_row(types[t], q, y, n));
        for (int i = 0; i < n; i++) {
            if (fabsf(x[i] - y[i]) > 0.03f) {
                print_error("%s: elem %d: %g -> %g\n", bd_type_name(types[t]), i, x[i], y[i]);
                fail();
            }
        }
    }
}

static void test_quant_q8_structure(void **state) {
    (void)state;
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = rng_gauss();
    x[77] = -6.0f; /* the largest magnitude (gaussian draws stay below 6) */
    block_q8_K k;
    assert_true(bd_quantize_row(BD_TYPE_Q8_K, x, &k, 256));
    /* ggml's Q8_K: iscale = -127/max, so max itself maps to -127 and
     * d = 1/iscale = -max/127 = 6/127 */
    assert_int_equal(k.qs[77], -127);
    assert_true(fabsf(k.d - 6.0f / 127.0f) < 1e-8f);
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += k.qs[16 * g + j];
        assert_int_equal(k.bsums[g], s);
    }
    block_q8_1 b1[8];
    assert_true(bd_quantize_row(BD_TYPE_Q8_1, x, b1, 256));
    for (int i = 0; i < 8; i++) {
        int s = 0;
        float amax = 0;
        /* two loops: one mixing both reductions crashes gcc 12.2's aarch64
         * vectorizer (internal compiler error in vect_transform_reduction) */
        for (int j = 0; j < 32; j++) s += b1[i].qs[j];
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * i + j]));
        float d = bd_f16_to_f32(b1[i].d);
        assert_true(fabsf(d - amax / 127.0f) <= amax / 127.0f * 1e-3f);
        /* s = d*sum(qs), rounded to f16 */
        float want = d * (float)s;
        assert_true(fabsf(bd_f16_to_f32(b1[i].s) - want) <= fabsf(want) * 1e-3f + 1e-6f);
    }
}

/* ------------------------------------------------------------------------
 * Dot products
 * ---------------------------------------------------------------------- */

/* Random raw block bytes (every nibble/bit pattern occurs) with the f16
 * scale fields overwritten by values drawn from `scale_mode`:
 * 0 moderate, 1 huge (up to 65504), 2 tiny (subnormal f16). */
static bd_f16 rand_scale_f16(int scale_mode) {
    switch (scale_mode) {
    case 1: return (bd_f16)((rng_u64() & 1 ? 0x8000 : 0) | (0x7BFF - rng_u64() % 64));
    case 2: return (bd_f16)((rng_u64() & 1 ? 0x8000 : 0) | (1 + rng_u64() % 1023));
    default: return bd_f32_to_f16((rng_unit() - 0.5f) * 0.1f);
    }
}

static void fill_random_weight(uint32_t type, void *buf, int64_t n, int scale_mode) {
    size_t bytes = row_bytes(type, n);
    uint8_t *p = buf;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rng_u64();
    const bd_type_traits *t = bd_type_get(type);
    int64_t nb = n / t->blck;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *blk = p + i * t->blck_bytes;
        switch (type) {
        case BD_TYPE_F32:
            ((float *)buf)[i] = rng_gauss();
            break;
        case BD_TYPE_F16:
            ((bd_f16 *)buf)[i] = bd_f32_to_f16(rng_gauss());
            break;
        case BD_TYPE_BF16:
            ((bd_bf16 *)buf)[i] = bd_f32_to_bf16(rng_gauss());
            break;
        case BD_TYPE_Q4_1:
        case BD_TYPE_Q5_1:
        case BD_TYPE_Q4_K:
        case BD_TYPE_Q5_K: {
            bd_f16 s[2] = {rand_scale_f16(scale_mode), rand_scale_f16(scale_mode)};
            memcpy(blk, s, 4);
            break;
        }
        case BD_TYPE_Q6_K: {
            bd_f16 s = rand_scale_f16(scale_mode);
            memcpy(blk + offsetof(block_q6_K, d), &s, 2);
            break;
        }
        case BD_TYPE_Q2_K: {
            bd_f16 s[2] = {rand_scale_f16(scale_mode), rand_scale_f16(scale_mode)};
            memcpy(blk + offsetof(block_q2_K, d), s, 4);
            break;
        }
        case BD_TYPE_Q3_K: {
            bd_f16 s = rand_scale_f16(scale_mode);
            memcpy(blk + offsetof(block_q3_K, d), &s, 2);
            break;
        }
        default: { /* d first */
            bd_f16 s = rand_scale_f16(scale_mode);
            memcpy(blk, &s, 2);
            break;
        }
        }
    }
}

/* Activation row in `atype` from gaussian floats via the quantizer (the
 * quantizer's output format is what a matmul feeds the dot). With
 * `raw` set, Q8 blocks instead get random quants including -128 and
 * consistent bsums / s fields. */
static void make_activation(uint32_t atype, void *buf, int64_t n, bool raw) {
    float *x = xalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = rng_gauss();
    assert_true(bd_quantize_row(atype, x, buf, n));
    free(x);
    if (!raw) return;
    if (atype == BD_TYPE_Q8_0) {
        block_q8_0 *b = buf;
        for (int64_t i = 0; i < n / 32; i++)
            for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)rng_u64();
    } else if (atype == BD_TYPE_Q8_1) {
        block_q8_1 *b = buf;
        for (int64_t i = 0; i < n / 32; i++) {
            int s = 0;
            for (int j = 0; j < 32; j++) s += b[i].qs[j] = (int8_t)rng_u64();
            b[i].s = bd_f32_to_f16(bd_f16_to_f32(b[i].d) * (float)s);
        }
    } else if (atype == BD_TYPE_Q8_K) {
        block_q8_K *b = buf;
        for (int64_t i = 0; i < n / 256; i++)
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int j = 0; j < 16; j++) s += b[i].qs[16 * g + j] = (int8_t)rng_u64();
                b[i].bsums[g] = (int16_t)s;
            }
    }
}

/* Double-precision dot of dequantized operands; *mag gets sum |w_i x_i|.
 * For Q8_1 activations the dot uses d*qs, while the Q4_1/Q5_1 kernels use
 * the block's stored s for the min term: callers widen the tolerance for
 * that (s is rounded to f16). */
static double dot_dequant(uint32_t type, const void *w, const void *x, int64_t n, double *mag) {
    uint32_t atype = bd_type_get(type)->vec_dot_type;
    float *a = xalloc((size_t)n * sizeof(float)), *b = xalloc((size_t)n * sizeof(float));
    assert_true(bd_dequantize_row(type, w, a, n));
    assert_true(bd_dequantize_row(atype, x, b, n));
    double s = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        s += (double)a[i] * b[i];
        m += fabs((double)a[i] * b[i]);
    }
    free(a);
    free(b);
    *mag = m;
    return s;
}

static void test_dot_ref_vs_dequant(void **state) {
    (void)state;
    const int64_t sizes[] = {256, 512, 2048};
    for (size_t t = 0; t < N_WTYPES; t++) {
        uint32_t type = k_wtypes[t];
        uint32_t atype = bd_type_get(type)->vec_dot_type;
        for (size_t si = 0; si < 3; si++) {
            int64_t n = sizes[si];
            void *w = xalloc(row_bytes(type, n));
            void *x = xalloc(row_bytes(atype, n));
            for (int rep = 0; rep < 12; rep++) {
                fill_random_weight(type, w, n, rep % 3);
                make_activation(atype, x, n, rep & 1);
                double mag;
                double want = dot_dequant(type, w, x, n, &mag);
                double got = bd_vec_dot_ref(type, n, w, x);
                /* integer block sums are exact; what remains is f32 rounding
                 * of scale products and the f32 accumulation over blocks
                 * (and n-long f32 sums for the float types). */
                double tol = 2e-6 * mag + 1e-35;
                if (type == BD_TYPE_F32 || type == BD_TYPE_F16 || type == BD_TYPE_BF16)
                    tol = 1e-6 * (double)n * mag / 64 + 1e-35;
                if (atype == BD_TYPE_Q8_1) {
                    /* min term uses s = f16(d*sum): add its f16 rounding */
                    const block_q8_1 *xb = x;
                    const uint8_t *wb = w;
                    for (int64_t i = 0; i < n / 32; i++) {
                        bd_f16 m;
                        memcpy(&m, wb + i * bd_type_get(type)->blck_bytes + 2, 2);
                        tol += fabs(bd_f16_to_f32(m)) * fabs(bd_f16_to_f32(xb[i].s)) * 1e-3;
                    }
                }
                if (!(fabs(got - want) <= tol)) {
                    print_error("%s n=%ld rep=%d: got %.9g want %.9g (tol %.3g)\n",
                                bd_type_name(type), (long)n, rep, got, want, tol);
                    fail();
                }
            }
            free(w);
            free(x);
        }
    }
}

/* A hand-computed dot: Q8_0 weights (d = 0.5) with a Q8_0 activation
 * (d = 0.25); qs chosen so the integer sum is known. */
static void test_dot_known(void **state) {
    (void)state;
    block_q8_0 w[2], x[2];
    w[0].d = 0x3800; /* 0.5 */
    w[1].d = 0x4000; /* 2 */
    x[0].d = 0x3400; /* 0.25 */
    x[1].d = 0x3C00; /* 1 */
    for (int j = 0; j < 32; j++) {
        w[0].qs[j] = 1;
        x[0].qs[j] = (int8_t)j; /* sum 0..31 = 496 */
        w[1].qs[j] = -128;
        x[1].qs[j] = j == 0 ? -128 : 0; /* 16384 */
    }
    /* 0.5*0.25*496 + 2*1*16384 = 62 + 32768 */
    assert_true(bd_vec_dot_ref(BD_TYPE_Q8_0, 64, w, x) == 32830.0f);

    /* Q4_K with the hand-decoded scales above, all nibbles 1, against Q8_K
     * with d = 1, all qs = 1 (so bsums = 16):
     *   sum_s d*sc_s*32 - dmin*m_s*32 with d = 1, dmin = 0.5
     *   = 32*(1+2+3+4+17+3+5+7) - 16*(5+6+7+8+34+4+6+8) = 1344 - 1248 = 96 */
    block_q4_K k4;
    block_q8_K a;
    memset(&k4, 0, sizeof k4);
    k4.d = 0x3C00;
    k4.dmin = 0x3800;
    memcpy(k4.scales, k_kscales, 12);
    memset(k4.qs, 0x11, sizeof k4.qs);
    a.d = 1.0f;
    memset(a.qs, 1, sizeof a.qs);
    for (int g = 0; g < 16; g++) a.bsums[g] = 16;
    assert_true(bd_vec_dot_ref(BD_TYPE_Q4_K, 256, &k4, &a) == 96.0f);
}

/* Deterministic Q4_K / Q5_K weight rows and Q8_K activation rows for the
 * llama.cpp bit-pinning test (the values in k_kq_llama_bits come from
 * llama.cpp's vec_dot on exactly these bytes). */
#define KQ_NB 3      /* blocks per row: the f32 accumulation order matters */
#define KQ_ROWS 6    /* weight rows per type */
static uint32_t kq_lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}
/* Q8_K row: d per block, qs in -127..127, bsums as the sums of 16 qs */
static void kq_make_act(block_q8_K *y, uint32_t seed) {
    for (int i = 0; i < KQ_NB; i++) {
        y[i].d = 0.0075f * (float)(i + 1) * ((kq_lcg(&seed) & 1) ? 1.0f : -1.0f);
        for (int j = 0; j < QK_K; j++) y[i].qs[j] = (int8_t)((int)(kq_lcg(&seed) % 255) - 127);
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += y[i].qs[16 * g + j];
            y[i].bsums[g] = (int16_t)s;
        }
    }
}
/* K-quant row: random bytes, then each block's d (at doff) and, with
 * has_min, dmin (at doff + 2) from a few typical f16 values (dmin large: the
 * mins term cancels most of the main term) */
static void kq_make_weight(uint8_t *w, size_t bbytes, size_t doff, bool has_min, uint32_t seed) {
    static const bd_f16 k_d[4] = {0x1C00, 0x2266, 0x1A3D, 0x2400};    /* 0.0039 .. 0.0156 */
    static const bd_f16 k_dmin[4] = {0x2000, 0x2A00, 0x1E66, 0x2533}; /* 0.0078 .. 0.047 */
    for (size_t i = 0; i < KQ_NB * bbytes; i++) w[i] = (uint8_t)kq_lcg(&seed);
    for (int i = 0; i < KQ_NB; i++) {
        bd_f16 d = k_d[kq_lcg(&seed) & 3], dm = k_dmin[kq_lcg(&seed) & 3];
        memcpy(w + i * bbytes + doff, &d, 2);
        if (has_min) memcpy(w + i * bbytes + doff + 2, &dm, 2);
    }
}

/* llama.cpp v0.5.0's ggml_vec_dot_q4_K_q8_K / ggml_vec_dot_q5_K_q8_K on the
 * rows above (activation seed 12345, weight seeds 1000 * (type + 1) + row),
 * as f32 bit patterns: its x86 build (AVX2 code, the same bits from its
 * haswell, zen4 and sapphirerapids CPU libraries) run on these bytes. */
static const uint32_t k_kq_llama_bits[2][KQ_ROWS] = {
    {0x41EC7E3Bu, 0xC1BD3EAEu, 0x41C35ABAu, 0xC32E1445u, 0x42B61744u, 0xC3237D3Cu},
    {0x42B63B6Bu, 0xC2DC18DDu, 0x43220D42u, 0xC2947AEEu, 0xC06F53E0u, 0xC313086Eu},
};

/* Sum over the elements of (|d sc q| + |dmin m|) * |dx y|: the size of the
 * two terms a Q4_K / Q5_K dot subtracts, from bd_dequantize_row run on
 * copies of the row with dmin and then d set to zero. */
static double kq_magnitude(uint32_t type, const uint8_t *w, size_t bbytes, const block_q8_K *y) {
    uint8_t a[KQ_NB * sizeof(block_q5_K)], b[KQ_NB * sizeof(block_q5_K)];
    float fa[KQ_NB * QK_K], fb[KQ_NB * QK_K];
    memcpy(a, w, KQ_NB * bbytes);
    memcpy(b, w, KQ_NB * bbytes);
    for (int i = 0; i < KQ_NB; i++) {
        memset(a + i * bbytes + 2, 0, 2); /* dmin */
        memset(b + i * bbytes, 0, 2);     /* d */
    }
    assert_true(bd_dequantize_row(type, a, fa, KQ_NB * QK_K));
    assert_true(bd_dequantize_row(type, b, fb, KQ_NB * QK_K));
    double mag = 0;
    for (int e = 0; e < KQ_NB * QK_K; e++)
        mag += (fabs((double)fa[e]) + fabs((double)fb[e])) * fabs((double)y[e / QK_K].d * y[e / QK_K].qs[e % QK_K]);
    return mag;
}

/* Q5_K dots are bit-identical to llama.cpp's, in the reference code and in
 * every kernel table this CPU runs (see q5k_dot in dot_ref.c for why bits
 * and not a tolerance). Q4_K dots use the tile order instead (q4k_dot):
 * they must agree with llama.cpp's within 1e-6 of the magnitude of the
 * two terms they subtract (measured: at most 4.7e-9 of it on these rows),
 * and every kernel table must give the reference code's bits. */
static void test_dot_kq_llama_bits(void **state) {
    (void)state;
    static block_q8_K y[KQ_NB];
    kq_make_act(y, 12345u);
    const uint32_t types[2] = {BD_TYPE_Q4_K, BD_TYPE_Q5_K};
    const size_t bbytes[2] = {sizeof(block_q4_K), sizeof(block_q5_K)};
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < KQ_ROWS; r++) {
            uint8_t w[KQ_NB * sizeof(block_q5_K)];
            kq_make_weight(w, bbytes[t], 0, true, 1000u * (uint32_t)(t + 1) + (uint32_t)r);
            float want;
            memcpy(&want, &k_kq_llama_bits[t][r], 4);
            const float ref = bd_vec_dot_ref(types[t], KQ_NB * QK_K, w, y);
            if (types[t] == BD_TYPE_Q5_K) {
                if (memcmp(&ref, &want, 4) != 0) {
                    print_error("%s row %d: %.9g, llama.cpp %.9g\n", bd_type_name(types[t]), r, ref, want);
                    fail();
                }
            } else {
                const double mag = kq_magnitude(types[t], w, bbytes[t], y), diff = fabs((double)ref - want);
                if (!(diff <= 1e-6 * mag)) {
                    print_error("%s row %d: %.9g, llama.cpp %.9g (diff %.3g of magnitude %.3g)\n",
                                bd_type_name(types[t]), r, ref, want, diff / mag, mag);
                    fail();
                }
            }
            for (int isa = 0; isa < BD_ISA_COUNT; isa++) {
                const bd_kernels *k = bd_kernels_for((bd_isa)isa);
                if (!k) continue;
                float got;
                k->vec_dot_n[types[t]](KQ_NB * QK_K, w, y, sizeof y, 1, &got);
                if (memcmp(&got, &ref, 4) != 0) {
                    print_error("%s row %d (kernel table %d): %.9g, reference %.9g\n", bd_type_name(types[t]), r,
                                isa, got, ref);
                    fail();
                }
            }
        }
}

/* llama.cpp v0.5.0's ggml_vec_dot_q2_K_q8_K / ggml_vec_dot_q3_K_q8_K on
 * kq_make_weight rows (activation seed 12345, weight seeds 3000 + 1000 * type
 * + row, type 0 = Q2_K), as f32 bit patterns: obtained by calling those
 * functions of its prebuilt libggml-cpu-haswell.so and -zen4.so (through
 * ggml_get_type_traits_cpu) on these bytes; both give these bits, and the
 * same held for 1000 such rows of each type. */
static const uint32_t k_k23_llama_bits[2][KQ_ROWS] = {
    {0xC0A5DB3Fu, 0xC021BAAAu, 0x3F4E30C8u, 0x3F2CD424u, 0x3EA5FD00u, 0x3FDB425Fu},
    {0x40136354u, 0xC1D53D08u, 0xC0015BA0u, 0x41C0CE06u, 0xC01A4304u, 0xC15C2003u},
};

/* Q2_K / Q3_K dots are bit-identical to llama.cpp's (its eight f32 lanes
 * per block, dot_ref.c's q2k_dot), in the reference code and in every
 * kernel table this CPU runs. */
static void test_dot_k23_llama_bits(void **state) {
    (void)state;
    static block_q8_K y[KQ_NB];
    kq_make_act(y, 12345u);
    const uint32_t types[2] = {BD_TYPE_Q2_K, BD_TYPE_Q3_K};
    const size_t bbytes[2] = {sizeof(block_q2_K), sizeof(block_q3_K)};
    const size_t doff[2] = {offsetof(block_q2_K, d), offsetof(block_q3_K, d)};
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < KQ_ROWS; r++) {
            uint8_t w[KQ_NB * sizeof(block_q3_K)];
            kq_make_weight(w, bbytes[t], doff[t], t == 0, 3000u + 1000u * (uint32_t)t + (uint32_t)r);
            float want;
            memcpy(&want, &k_k23_llama_bits[t][r], 4);
            float got[1 + BD_ISA_COUNT];
            int ng = 0;
            got[ng++] = bd_vec_dot_ref(types[t], KQ_NB * QK_K, w, y);
            for (int isa = 0; isa < BD_ISA_COUNT; isa++) {
                const bd_kernels *k = bd_kernels_for((bd_isa)isa);
                if (!k) continue;
                k->vec_dot_n[types[t]](KQ_NB * QK_K, w, y, sizeof y, 1, &got[ng++]);
            }
            for (int g = 0; g < ng; g++)
                if (memcmp(&got[g], &want, 4) != 0) {
                    print_error("%s row %d (%s): %.9g, llama.cpp %.9g\n", bd_type_name(types[t]), r,
                                g == 0 ? "bd_vec_dot_ref" : "kernel table", got[g], want);
                    fail();
                }
        }
}

/* Deterministic Q4_1 / Q5_0 weight rows and Q8_1 / Q8_0 activation rows for
 * the llama.cpp bit-pinning test below (same generator as kq_make_*). */
#define Q32_NB 5   /* blocks per row: the f32 accumulation order matters */
#define Q32_ROWS 6 /* weight rows per type */
/* Q8_0 or Q8_1 row (same layout up to s): qs in -127..127, d per block,
 * s = d * sum(qs) rounded to f16 as the activation quantizer stores it */
static void q32_make_act(void *vy, bool q8_1, uint32_t seed) {
    for (int i = 0; i < Q32_NB; i++) {
        int8_t *qs;
        bd_f16 *d, *s = NULL;
        if (q8_1) {
            block_q8_1 *y = (block_q8_1 *)vy + i;
            qs = y->qs, d = &y->d, s = &y->s;
        } else {
            block_q8_0 *y = (block_q8_0 *)vy + i;
            qs = y->qs, d = &y->d;
        }
        float df = 0.004f * (float)(i + 1) * ((kq_lcg(&seed) & 1) ? 1.0f : -1.0f);
        *d = bd_f32_to_f16(df);
        int sum = 0;
        for (int j = 0; j < 32; j++) sum += qs[j] = (int8_t)((int)(kq_lcg(&seed) % 255) - 127);
        if (s) *s = bd_f32_to_f16(bd_f16_to_f32(*d) * (float)sum);
    }
}
/* Q4_1 (d, m, qs) or Q5_0 (d, qh, qs) row: random bytes, then d (and m)
 * from a few typical f16 values (m negative and large, as in real rows) */
static void q32_make_weight(uint8_t *w, size_t bbytes, bool q4_1, uint32_t seed) {
    static const bd_f16 k_d[4] = {0x1C00, 0x2266, 0x1A3D, 0x2400}; /* 0.0039 .. 0.0156 */
    static const bd_f16 k_m[4] = {0xA400, 0xAA00, 0xA666, 0xAD33}; /* -0.0156 .. -0.075 */
    for (size_t i = 0; i < Q32_NB * bbytes; i++) w[i] = (uint8_t)kq_lcg(&seed);
    for (int i = 0; i < Q32_NB; i++) {
        bd_f16 d = k_d[kq_lcg(&seed) & 3], m = k_m[kq_lcg(&seed) & 3];
        memcpy(w + i * bbytes, &d, 2);
        if (q4_1) memcpy(w + i * bbytes + 2, &m, 2);
    }
}

/* llama.cpp v0.5.0's ggml_vec_dot_q4_1_q8_1 / ggml_vec_dot_q5_0_q8_0 on the
 * rows above (activation seed 777, weight seeds 2000 * (type + 1) + row), as
 * f32 bit patterns: obtained by loading its prebuilt CPU libraries
 * (libggml-cpu-{haswell,zen4,sapphirerapids,skylakex}.so, all four give the
 * same bits) with dlopen and calling those functions on these bytes. */
static const uint32_t k_q32_llama_bits[2][Q32_ROWS] = {
    {0x3EBFBA73u, 0xBEB88270u, 0x3DC9D190u, 0x3FF380F0u, 0x3FD80D50u, 0x3E0CED48u},
    {0xBF9F205Cu, 0x3ECFC34Au, 0xBEBE850Eu, 0x3D9D6358u, 0x3EE586F3u, 0xBE8D6F72u},
};

/* Q4_1 / Q5_0 dots are bit-identical to llama.cpp's, in the reference code
 * and in every kernel table this CPU runs (order: see q32_accum in dot_ref.c) */
static void test_dot_q32_llama_bits(void **state) {
    (void)state;
    static block_q8_1 y1[Q32_NB];
    static block_q8_0 y0[Q32_NB];
    q32_make_act(y1, true, 777u);
    q32_make_act(y0, false, 777u);
    const uint32_t types[2] = {BD_TYPE_Q4_1, BD_TYPE_Q5_0};
    const size_t bbytes[2] = {sizeof(block_q4_1), sizeof(block_q5_0)};
    const void *acts[2] = {y1, y0};
    const size_t astride[2] = {sizeof y1, sizeof y0};
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < Q32_ROWS; r++) {
            uint8_t w[Q32_NB * sizeof(block_q5_0)];
            q32_make_weight(w, bbytes[t], t == 0, 2000u * (uint32_t)(t + 1) + (uint32_t)r);
            float want;
            memcpy(&want, &k_q32_llama_bits[t][r], 4);
            float got[1 + BD_ISA_COUNT];
            int ng = 0;
            got[ng++] = bd_vec_dot_ref(types[t], Q32_NB * 32, w, acts[t]);
            for (int isa = 0; isa < BD_ISA_COUNT; isa++) {
                const bd_kernels *k = bd_kernels_for((bd_isa)isa);
                if (!k) continue;
                k->vec_dot_n[types[t]](Q32_NB * 32, w, acts[t], astride[t], 1, &got[ng++]);
            }
            for (int g = 0; g < ng; g++)
                if (memcmp(&got[g], &want, 4) != 0) {
                    print_error("%s row %d (%s): %.9g, llama.cpp %.9g\n", bd_type_name(types[t]), r,
                                g == 0 ? "bd_vec_dot_ref" : "kernel table", got[g], want);
                    fail();
                }
        }
}

/* ------------------------------------------------------------------------
 * Dispatch table
 * ---------------------------------------------------------------------- */

static void test_kernels_table(void **state) {
    (void)state;
    const bd_kernels *k = bd_kernels_get();
    assert_non_null(k);
    assert_non_null(bd_kernels_for(BD_ISA_REF));
    for (size_t t = 0; t < N_WTYPES; t++) {
        uint32_t type = k_wtypes[t];
        uint32_t atype = bd_type_get(type)->vec_dot_type;
        assert_non_null(k->vec_dot_n[type]);
        assert_non_null(k->from_float[atype]);
    }
    assert_non_null(k->from_float[BD_TYPE_Q8_1]);
    /* The ref table's entries are the functions tested above. */
    const bd_kernels *r = bd_kernels_for(BD_ISA_REF);
    const int64_t n = 512;
    for (size_t t = 0; t < N_WTYPES; t++) {
        uint32_t type = k_wtypes[t];
        uint32_t atype = bd_type_get(type)->vec_dot_type;
        size_t xs = row_bytes(atype, n);
        void *w = xalloc(row_bytes(type, n));
        uint8_t *x = xalloc(3 * xs);
        float *f = xalloc(3 * (size_t)n * sizeof(float));
        fill_random_weight(type, w, n, 0);
        for (int64_t i = 0; i < 3 * n; i++) f[i] = rng_gauss();
        for (int j = 0; j < 3; j++) {
            r->from_float[atype](f + j * n, x + j * xs, n);
            uint8_t *chk = xalloc(xs);
            assert_true(bd_quantize_row(atype, f + j * n, chk, n));
            assert_memory_equal(chk, x + j * xs, xs);
            free(chk);
        }
        float out[3];
        r->vec_dot_n[type](n, w, x, xs, 3, out);
        for (int j = 0; j < 3; j++)
            assert_true(out[j] == bd_vec_dot_ref(type, n, w, x + j * xs));
        free(w);
        free(x);
        free(f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_known),
        cmocka_unit_test(test_bf16_known),
        cmocka_unit_test(test_f16_vs_f16c),
        cmocka_unit_test(test_deq_q4_0),
        cmocka_unit_test(test_deq_q4_1),
        cmocka_unit_test(test_deq_q5_0),
        cmocka_unit_test(test_deq_q5_1),
        cmocka_unit_test(test_deq_q8_0),
        cmocka_unit_test(test_deq_q4_K),
        cmocka_unit_test(test_deq_q5_K),
        cmocka_unit_test(test_deq_q6_K),
        cmocka_unit_test(test_deq_q2_K),
        cmocka_unit_test(test_deq_q3_K),
        cmocka_unit_test(test_deq_iq4_nl),
        cmocka_unit_test(test_deq_iq4_xs),
        cmocka_unit_test(test_deq_bad_args),
        cmocka_unit_test(test_quant_rmse),
        cmocka_unit_test(test_quant_special),
        cmocka_unit_test(test_quant_q8_structure),
        cmocka_unit_test(test_dot_known),
        cmocka_unit_test(test_dot_ref_vs_dequant),
        cmocka_unit_test(test_dot_kq_llama_bits),
        cmocka_unit_test(test_dot_q32_llama_bits),
        cmocka_unit_test(test_dot_k23_llama_bits),
        cmocka_unit_test(test_kernels_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
