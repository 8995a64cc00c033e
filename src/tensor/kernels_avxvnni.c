/*
 * kernels_avxvnni.c - the AVX2 kernels compiled again with AVX-VNNI (the
 * VEX-encoded vpdpbusd of Alder Lake and later Intel cores, and of Zen 5):
 * kernels_simd.h's dot4_u8s8 then is one vpdpbusd instead of vpmaddubsw +
 * vpmaddwd, in every kernel that takes its int8 products from it. Same
 * integers, so the same bits as the avx2 level. Its own level ("avxvnni",
 * kernels.c) so that a CPU with AVX-VNNI but without AVX-512 (most Intel
 * desktops and laptops since 2021) gets it.
 */
#define BD_AVX2_FILL bd_kernels_fill_avxvnni
#include "kernels_avx2.c"
