/*
 * type_ref.h - the scalar reference functions the type table points at
 * (types.c): dequantize (quant_ref.c), quantize (quant_ref.c), the dot
 * against the type's activation type (dot_ref.c) and, for the AMX types,
 * the dot in the tiles' f32 order (dot_ref.c). Internal to src/tensor;
 * everyone else reaches them through bd_type_get() or the bd_*_row /
 * bd_vec_dot_*ref wrappers in tensor.h. Each takes n elements, a multiple
 * of the type's block size (the wrappers check).
 */
#ifndef BD_TYPE_REF_H
#define BD_TYPE_REF_H

#include "tensor.h"

/* Every type with a reference dequantizer and quantizer. */
#define BD_REF_CONVERT_TYPES(X) \
    X(f32) X(f16) X(bf16) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(q8_1) X(q8_K) X(q2_K) X(q3_K) \
    X(q4_K) X(q5_K) X(q6_K) X(iq4_nl) X(iq4_xs)
/* Every weight type with a reference dot (the "supported" weight types). */
#define BD_REF_DOT_TYPES(X) \
    X(f32) X(f16) X(bf16) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(q2_K) X(q3_K) X(q4_K) X(q5_K) \
    X(q6_K) X(iq4_nl) X(iq4_xs)
/* Every weight type the AMX tiles multiply. */
#define BD_REF_TILE_TYPES(X) X(q8_0) X(q4_K) X(q6_K)

#define BD_REF_DECLARE_CONVERT(T)                                         \
    void bd_ref_dequantize_##T(const void *src, float *dst, int64_t n); \
    void bd_ref_quantize_##T(const float *src, void *dst, int64_t n);
#define BD_REF_DECLARE_DOT(T) \
    void bd_ref_dot_##T(int64_t n, const void *w, const void *x, size_t x_stride, int nx, float *out);
#define BD_REF_DECLARE_TILE(T) float bd_ref_dot_tile_##T(int64_t n, const void *w, const void *x);
BD_REF_CONVERT_TYPES(BD_REF_DECLARE_CONVERT)
BD_REF_DOT_TYPES(BD_REF_DECLARE_DOT)
BD_REF_TILE_TYPES(BD_REF_DECLARE_TILE)
#undef BD_REF_DECLARE_CONVERT
#undef BD_REF_DECLARE_DOT
#undef BD_REF_DECLARE_TILE

#endif
