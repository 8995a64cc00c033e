/*
 * types.c - the ggml type table (block facts and the reference functions
 * per type) and scalar float conversions.
 */
#include <math.h>
#include <string.h>

#include "../base/base.h"
#include "tensor.h"
#include "type_ref.h"

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");

const int8_t bd_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

/* A known type without reference functions, and the three columns of
 * functions a supported weight type has (dequantize, quantize, dot). */
#define PLAIN(NAME, BLCK, BYTES, QUANT, VDT) \
    {.name = NAME, .blck = BLCK, .blck_bytes = BYTES, .is_quant = QUANT, .vec_dot_type = VDT}
#define CONVERT(T) .to_float = bd_ref_dequantize_##T, .from_float = bd_ref_quantize_##T
#define WEIGHT(T) CONVERT(T), .vec_dot = bd_ref_dot_##T, .supported = true

static const bd_type_traits g_types[BD_TYPE_COUNT] = {
    [BD_TYPE_F32] = {"f32", 1, 4, false, BD_TYPE_F32, WEIGHT(f32)},
    [BD_TYPE_F16] = {"f16", 1, 2, false, BD_TYPE_F16, WEIGHT(f16)},
    [BD_TYPE_Q4_0] = {"q4_0", QK4_0, sizeof(block_q4_0), true, BD_TYPE_Q8_0, WEIGHT(q4_0)},
    [BD_TYPE_Q4_1] = {"q4_1", QK4_1, sizeof(block_q4_1), true, BD_TYPE_Q8_1, WEIGHT(q4_1)},
    [BD_TYPE_Q5_0] = {"q5_0", QK5_0, sizeof(block_q5_0), true, BD_TYPE_Q8_0, WEIGHT(q5_0)},
    [BD_TYPE_Q5_1] = {"q5_1", QK5_1, sizeof(block_q5_1), true, BD_TYPE_Q8_1, WEIGHT(q5_1)},
    [BD_TYPE_Q8_0] = {"q8_0", QK8_0, sizeof(block_q8_0), true, BD_TYPE_Q8_0, WEIGHT(q8_0),
                      .vec_dot_tile = bd_ref_dot_tile_q8_0},
    [BD_TYPE_Q8_1] = {"q8_1", QK8_1, sizeof(block_q8_1), true, BD_TYPE_Q8_1, CONVERT(q8_1)},
    [BD_TYPE_Q2_K] = {"q2_K", QK_K, sizeof(block_q2_K), true, BD_TYPE_Q8_K, WEIGHT(q2_K)},
    [BD_TYPE_Q3_K] = {"q3_K", QK_K, sizeof(block_q3_K), true, BD_TYPE_Q8_K, WEIGHT(q3_K)},
    [BD_TYPE_Q4_K] = {"q4_K", QK_K, sizeof(block_q4_K), true, BD_TYPE_Q8_K, WEIGHT(q4_K),
                      .vec_dot_tile = bd_ref_dot_tile_q4_K},
    [BD_TYPE_Q5_K] = {"q5_K", QK_K, sizeof(block_q5_K), true, BD_TYPE_Q8_K, WEIGHT(q5_K)},
    [BD_TYPE_Q6_K] = {"q6_K", QK_K, sizeof(block_q6_K), true, BD_TYPE_Q8_K, WEIGHT(q6_K),
                      .vec_dot_tile = bd_ref_dot_tile_q6_K},
    [BD_TYPE_Q8_K] = {"q8_K", QK_K, sizeof(block_q8_K), true, BD_TYPE_Q8_K, CONVERT(q8_K)},
    [16] = PLAIN("iq2_xxs", QK_K, 66, true, BD_TYPE_Q8_K),
    [17] = PLAIN("iq2_xs", QK_K, 74, true, BD_TYPE_Q8_K),
    [18] = PLAIN("iq3_xxs", QK_K, 98, true, BD_TYPE_Q8_K),
    [19] = PLAIN("iq1_s", QK_K, 50, true, BD_TYPE_Q8_K),
    [BD_TYPE_IQ4_NL] = {"iq4_nl", QK4_NL, sizeof(block_iq4_nl), true, BD_TYPE_Q8_0, WEIGHT(iq4_nl)},
    [21] = PLAIN("iq3_s", QK_K, 110, true, BD_TYPE_Q8_K),
    [22] = PLAIN("iq2_s", QK_K, 82, true, BD_TYPE_Q8_K),
    [BD_TYPE_IQ4_XS] = {"iq4_xs", QK_K, sizeof(block_iq4_xs), true, BD_TYPE_Q8_K, WEIGHT(iq4_xs)},
    [BD_TYPE_I8] = PLAIN("i8", 1, 1, false, BD_TYPE_I8),
    [BD_TYPE_I16] = PLAIN("i16", 1, 2, false, BD_TYPE_I16),
    [BD_TYPE_I32] = PLAIN("i32", 1, 4, false, BD_TYPE_I32),
    [BD_TYPE_I64] = PLAIN("i64", 1, 8, false, BD_TYPE_I64),
    [BD_TYPE_F64] = PLAIN("f64", 1, 8, false, BD_TYPE_F64),
    [29] = PLAIN("iq1_m", QK_K, 56, true, BD_TYPE_Q8_K),
    [BD_TYPE_BF16] = {"bf16", 1, 2, false, BD_TYPE_BF16, WEIGHT(bf16)},
    [34] = PLAIN("tq1_0", QK_K, 54, true, BD_TYPE_Q8_K),
    [35] = PLAIN("tq2_0", QK_K, 66, true, BD_TYPE_Q8_K),
    [39] = PLAIN("mxfp4", 32, 17, true, BD_TYPE_Q8_0),
};

const bd_type_traits *bd_type_get(uint32_t type) {
    if (type >= BD_TYPE_COUNT || g_types[type].blck == 0) return NULL;
    return &g_types[type];
}

const char *bd_type_name(uint32_t type) {
    const bd_type_traits *t = bd_type_get(type);
    return t ? t->name : "unknown";
}

bool bd_row_size(uint32_t type, int64_t n, uint64_t *bytes) {
    const bd_type_traits *t = bd_type_get(type);
    if (!t || n < 0 || n % t->blck != 0) return false;
    return bd_mul_ok((uint64_t)(n / t->blck), (uint64_t)t->blck_bytes, bytes);
}

/* The type's traits if n is a whole number of its blocks, else NULL. */
static const bd_type_traits *whole_blocks(uint32_t type, int64_t n) {
    const bd_type_traits *t = bd_type_get(type);
    return t && n >= 0 && n % t->blck == 0 ? t : NULL;
}

bool bd_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const bd_type_traits *t = whole_blocks(type, n);
    if (!t || !t->to_float) return false;
    t->to_float(src, dst, n);
    return true;
}

bool bd_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    const bd_type_traits *t = whole_blocks(type, n);
    if (!t || !t->from_float) return false;
    t->from_float(src, dst, n);
    return true;
}

float bd_vec_dot_ref(uint32_t type, int64_t n, const void *w, const void *x) {
    const bd_type_traits *t = whole_blocks(type, n);
    if (!t || !t->vec_dot) return NAN;
    float r;
    t->vec_dot(n, w, x, 0, 1, &r);
    return r;
}

float bd_vec_dot_tile_ref(uint32_t type, int64_t n, const void *w, const void *x) {
    const bd_type_traits *t = whole_blocks(type, n);
    return t && t->vec_dot_tile ? t->vec_dot_tile(n, w, x) : NAN;
}

/* ------------------------------------------------------------------------
 * f16 / bf16
 * ---------------------------------------------------------------------- */

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float bd_f16_to_f32(bd_f16 h) { return bd_f16_to_f32_inline(h); }

bd_f16 bd_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffff;
    if (absx > 0x7f800000u) /* nan: quiet, the payload's top bits kept, as F16C's vcvtps2ph */
        return (bd_f16)(sign | 0x7e00 | ((absx >> 13) & 0x3ff));
    if (absx >= 0x477ff000u) return (bd_f16)(sign | 0x7c00); /* overflow -> inf */
    if (absx < 0x38800000u) {                                /* subnormal or zero */
        if (absx < 0x33000000u) return (bd_f16)sign;        /* < half of min subnormal */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* value = m * 2^(e-150); half subnormal unit 2^-24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (bd_f16)(sign | r);
    }
    uint32_t r = (absx - 0x38000000u) >> 13; /* rebias exponent 127 -> 15 */
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (bd_f16)(sign | r);
}

float bd_bf16_to_f32(bd_bf16 h) { return f32_from_bits((uint32_t)h << 16); }

bd_bf16 bd_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000u) return (bd_bf16)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7fff + ((x >> 16) & 1);
    return (bd_bf16)(x >> 16);
}
