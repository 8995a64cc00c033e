/*
 * tensor.h - ggml tensor types: ids, block layouts, (de)quantization and
 * dot products. Values follow ggml (llama.cpp v0.5.0), so files written by
 * llama.cpp load here and vice versa.
 *
 * Dot products follow ggml's scheme: each weight type has an activation
 * ("vec_dot") type. A matmul first converts the activation row x (f32) to
 * that type once, then every weight row is dotted against it:
 *
 *   weight type                         activation type
 *   F32                                 F32
 *   F16                                 F16
 *   BF16                                BF16
 *   Q4_0 Q5_0 Q8_0 IQ4_NL               Q8_0
 *   Q4_1 Q5_1                           Q8_1
 *   Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS     Q8_K
 *
 * Matching ggml here keeps our logits within rounding of llama.cpp's.
 * The functions in this header are the scalar reference ("_ref") versions.
 * SIMD twins live in kernels_*.c behind the one dispatch table in
 * kernels.h.
 */
#ifndef BD_TENSOR_H
#define BD_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint16_t bd_f16;  /* IEEE binary16 bits */
typedef uint16_t bd_bf16; /* upper half of an f32 */

enum bd_type {
    BD_TYPE_F32 = 0,
    BD_TYPE_F16 = 1,
    BD_TYPE_Q4_0 = 2,
    BD_TYPE_Q4_1 = 3,
    BD_TYPE_Q5_0 = 6,
    BD_TYPE_Q5_1 = 7,
    BD_TYPE_Q8_0 = 8,
    BD_TYPE_Q8_1 = 9,
    BD_TYPE_Q2_K = 10,
    BD_TYPE_Q3_K = 11,
    BD_TYPE_Q4_K = 12,
    BD_TYPE_Q5_K = 13,
    BD_TYPE_Q6_K = 14,
    BD_TYPE_Q8_K = 15,
    BD_TYPE_IQ4_NL = 20,
    BD_TYPE_IQ4_XS = 23,
    BD_TYPE_I8 = 24,
    BD_TYPE_I16 = 25,
    BD_TYPE_I32 = 26,
    BD_TYPE_I64 = 27,
    BD_TYPE_F64 = 28,
    BD_TYPE_BF16 = 30,
    BD_TYPE_COUNT = 42 /* one past the largest id we know the name of */
};

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define QK4_NL 32
#define K_SCALE_SIZE 12

/* ---- block layouts (byte-exact; see static asserts in quant_ref.c) ---- */

typedef struct { bd_f16 d; uint8_t qs[QK4_0 / 2]; } block_q4_0;             /* 18 B */
typedef struct { bd_f16 d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;          /* 20 B */
typedef struct { bd_f16 d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0; /* 22 B */
typedef struct { bd_f16 d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1; /* 24 B */
typedef struct { bd_f16 d; int8_t qs[QK8_0]; } block_q8_0;                  /* 34 B */
/* Q8_1: s = d * sum(qs), lets Q4_1/Q5_1 dots apply their min in one step */
typedef struct { bd_f16 d, s; int8_t qs[QK8_1]; } block_q8_1;               /* 36 B */
/* Q2_K: 16 sub-blocks of 16; w = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4),
 * q the 2-bit code of element e = 128h + 32j + 16k + l (h, j, k, l < 2, 4, 2, 16)
 * at bits 2j of qs[32h + 16k + l] (quant_ref.c's deq_q2_K). */
typedef struct {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    bd_f16 d, dmin;
} block_q2_K;                                                              /* 84 B */
/* Q3_K: 16 sub-blocks of 16; w = d * (sc_s - 32) * (q - 4 * !hbit), sc_s a
 * 6-bit code (low 4 bits in scales[0..7], high 2 in scales[8..11]), q the
 * 2-bit code placed as Q2_K's and hbit bit 4h + j of hmask[16k + l]. */
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    bd_f16 d;
} block_q3_K;                                                              /* 110 B */

/* The 2-bit code of element e (0..255) of a Q2_K / Q3_K block's qs. */
static inline int bd_k23_code(const uint8_t qs[64], int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
}
/* The 6-bit scale code (0..63) of Q3_K sub-block s (0..15). */
static inline int bd_q3k_scale(const uint8_t scales[12], int s) {
    const int lo = s < 8 ? scales[s] & 0xF : scales[s - 8] >> 4;
    return lo | (((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4);
}
typedef struct {
    bd_f16 d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
} block_q4_K;                                                              /* 144 B */
typedef struct {
    bd_f16 d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;                                                              /* 176 B */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    bd_f16 d;
} block_q6_K;                                                              /* 210 B */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;                                                              /* 292 B */
typedef struct { bd_f16 d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl;         /* 18 B */
typedef struct {
    bd_f16 d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;                                                            /* 136 B */

extern const int8_t bd_kvalues_iq4nl[16];

/* ---- type table ---- */

/* Dequantize n elements (a multiple of the block size) to f32. */
typedef void (*bd_to_float_fn)(const void *x, float *y, int64_t n);
/* Convert n floats to a type (weight or activation format). */
typedef void (*bd_from_float_fn)(const float *x, void *y, int64_t n);
/* Multi-row dot: out[j] = dot(w, x + j*x_stride) for j < nx, one weight row
 * of n elements against nx activation rows already in the weight type's
 * vec_dot_type. The kernel tables (kernels.h) have one per type; their
 * contract is there. */
typedef void (*bd_vec_dot_n_fn)(int64_t n, const void *w, const void *x, size_t x_stride,
                                int nx, float *out);
/* Dot of one weight row with one activation row. */
typedef float (*bd_vec_dot_fn)(int64_t n, const void *w, const void *x);

/* One row per ggml type id, as ggml's type traits: the block facts and the
 * scalar reference functions (the twins every SIMD kernel is tested
 * against). A NULL function: blockdraft does not do that for the type. */
typedef struct bd_type_traits {
    const char *name;          /* "q4_K", as ggml prints it */
    int64_t blck;              /* elements per block; 0 = unknown/retired id */
    int64_t blck_bytes;        /* bytes per block */
    bool is_quant;
    enum bd_type vec_dot_type; /* activation type for dot products */
    bool supported;            /* a weight type blockdraft can dequantize and dot */
    bd_to_float_fn to_float;   /* dequantize (quant_ref.c) */
    bd_from_float_fn from_float; /* quantize (quant_ref.c; round-to-nearest searches) */
    bd_vec_dot_n_fn vec_dot;   /* dot with vec_dot_type rows (dot_ref.c) */
    bd_vec_dot_fn vec_dot_tile; /* the AMX tiles' f32 order (dot_ref.c); NULL: no tiles */
} bd_type_traits;

/* Traits for a type id, or NULL for an unknown/retired id. */
const bd_type_traits *bd_type_get(uint32_t type);
const char *bd_type_name(uint32_t type); /* "unknown" for bad ids */

/* Bytes of a row of n elements; false if n is not a multiple of the block
 * size, the type is unknown, or on overflow. */
bool bd_row_size(uint32_t type, int64_t n, uint64_t *bytes);

/* ---- scalar conversions ---- */
float bd_f16_to_f32(bd_f16 h);      /* exact; a NaN comes out quiet, as F16C's */
/* The same, inline and without branches on the value (a loop over a row of
 * them vectorizes): the 15 exponent and mantissa bits move to f32's place
 * and the exponent is rebiased (+112); Inf / NaN get +112 again (to 255)
 * and a NaN its quiet bit; zeros and subnormals are m 2^-24 (m the 10
 * mantissa bits), exact as an int-to-float conversion and a power-of-two
 * scale. bd_f16_to_f32 is this; test_kernels checks it against F16C's
 * vcvtph2ps for all 65536 values. */
static inline float bd_f16_to_f32_inline(bd_f16 h) {
    union { uint32_t u; float f; } n, z;
    const uint32_t em = (uint32_t)(h & 0x7fff) << 13; /* [30:13] exponent, mantissa */
    const uint32_t e = em & 0x0f800000u;
    const uint32_t top = 0u - (uint32_t)(e == 0x0f800000u); /* all ones for Inf, NaN */
    const uint32_t low = 0u - (uint32_t)(e == 0);           /* all ones for zero, subnormal */
    z.f = (float)(int32_t)(em >> 13) * 0x1p-24f;
    n.u = (em + 0x38000000u + (top & 0x38000000u)) | (top & ((uint32_t)((em & 0x007fe000u) != 0) << 22));
    n.u = (n.u & ~low) | (z.u & low) | (uint32_t)(h & 0x8000) << 16;
    return n.f;
}
bd_f16 bd_f32_to_f16(float f);      /* round to nearest even, NaNs quiet: as F16C does */
float bd_bf16_to_f32(bd_bf16 h);
bd_bf16 bd_f32_to_bf16(float f);    /* round to nearest even, NaN kept quiet */

/* ---- reference (de)quantization ----
 * n must be a multiple of the type's block size (callers check with
 * bd_row_size). Dequantize works for every supported weight type and for
 * Q8_0/Q8_1/Q8_K. Quantize works for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, Q8_1, Q8_K, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS (returns false for the
 * rest). Quantizers are round-to-nearest searches in the spirit of ggml's
 * reference quantizers, not bit-identical to them. */
bool bd_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
bool bd_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
/* A KV cache row (n a multiple of the block size), as llama.cpp's CPU
 * backend stores one: Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL by ggml's row
 * quantizers' rules (quant_ref.c's last section), any other type as
 * bd_quantize_row. False as bd_quantize_row. */
bool bd_quantize_row_kv(uint32_t type, const float *src, void *dst, int64_t n);

/* ---- reference dot products ----
 * w: one weight row of `type` (n elements); x: n elements already in
 * bd_type_get(type)->vec_dot_type. Returns the dot product in f32. */
float bd_vec_dot_ref(uint32_t type, int64_t n, const void *w, const void *x);
/* Q4_K / Q6_K only: the same dot in the f32 order of the AMX matmul
 * (dot_ref.c explains it); NAN for other types. */
float bd_vec_dot_tile_ref(uint32_t type, int64_t n, const void *w, const void *x);

#endif
