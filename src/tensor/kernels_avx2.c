/*
 * kernels_avx2.c - AVX2 + FMA + F16C kernels (compiled with those flags).
 */
#include <immintrin.h>

#include "kernels.h"

void bd_kernels_fill_avx2(bd_kernels *k) {
    k->name = "avx2";
}
