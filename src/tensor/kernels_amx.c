/*
 * kernels_amx.c - Q4_K / Q6_K / Q8_0 matmul on Intel AMX int8 tiles
 * (compiled with the AVX-512 flags plus -mavx512vbmi -mamx-tile -mamx-int8;
 * used only where CPUID and the kernel say the tiles work, see kernels.c).
 *
 * One call computes a run of weight rows, 16 at a time, against any number
 * of activation rows. bd_matmul uses it for prompt batches and for
 * speculative verify batches from BD_MATMUL_TILE_Q4K_ROWS (Q4_K) and
 * BD_MATMUL_TILE_Q6K_ROWS (Q6_K) rows;
 * bd_matmul_fast (the DFlash drafter) also for small Q8_0 batches. The
 * activations are first packed per group of 16 tokens into the layout a B
 * tile wants (bd_tile_pack). Then:
 *   - Q4_K (per 256-element block): the 6-bit sub-block scale is split as
 *     sc = 8 hi + lo (both 0..7) and the 16 weight rows are unpacked twice,
 *     as q * lo and q * hi (<= 105: still unsigned bytes, one vpmullw per
 *     64 of them), so that two int32 tiles accumulate the whole block in
 *     4 x 2 TDPBUSD (K = 64) with the scales already applied:
 *     sum sc q y = C_lo + 8 C_hi, exactly;
 *   - Q6_K: each weight is folded with its signed scale and offset into
 *     v = sc (q - 32) = 128 vh + vl (signed bytes, looked up in a table by
 *     scale and code with vpermi2b), two TDPBSSD tiles the same way:
 *     sum v y = C_lo + 128 C_hi;
 *   - Q8_0 (per 32-element block): the weight bytes load as they are, one
 *     TDPBSSD per block;
 *   - the f32 steps are then one or two fmas per block and output element,
 *     the order of bd_vec_dot_tile_ref (dot_ref.c), vectorized over the 16
 *     tokens.
 * Each output element's arithmetic is fixed whatever the batch size
 * (tests/unit/test_kernels.c checks it against the scalar twin for 1..150
 * tokens). For Q4_K and Q6_K that order is also the AVX2 / AVX-512
 * kernels' (dot_ref.c's tile order), so a verify batch here gives the bits
 * of one-token decoding; Q8_0's differs from theirs, which is why only
 * prompts and the drafter take the Q8_0 tiles.
 *
 * Tile registers, K-quant configuration (Q8_0: see its section):
 *   0, 1  C    16 x 16 int32 (low and high parts of the sums)
 *   2, 3  A    16 rows x 64 bytes (the two unpacked parts of a 64-element chunk)
 *   4     B    16 x 64 bytes (64 elements x 16 tokens)
 */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels_simd.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

bool bd_amx_enable(char *err, size_t errlen) {
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0) return true;
    return bd_err(err, errlen, "Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: %s)",
                  strerror(errno));
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* Which configuration this thread's tiles hold (0: none). The K-quant and
 * Q8_0 kernels use different tile shapes; switching costs one LDTILECFG per
 * bd_tile_rows call at most. */
enum { CFG_NONE = 0, CFG_KQ = 1, CFG_Q8 = 2 };
static __thread int t_config;

static void tile_configure(int which) {
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    /* K-quants: see the file comment (5-7 unused). Q8_0: 0-3 C 16 x 16
     * int32 (four blocks in flight), 4-5 A 16 rows x 32 bytes (one block of
     * 16 weight rows), 6-7 B 8 x 64 bytes (32 elements x 16 tokens). */
    static const uint8_t rows[2][8] = {{16, 16, 16, 16, 16, 0, 0, 0}, {16, 16, 16, 16, 16, 16, 8, 8}};
    static const uint16_t colsb[2][8] = {{64, 64, 64, 64, 64, 0, 0, 0}, {64, 64, 64, 64, 32, 32, 64, 64}};
    const int k = which == CFG_Q8;
    for (int i = 0; i < 8; i++) {
        c.rows[i] = rows[k][i];
        c.colsb[i] = colsb[k][i];
    }
    /* GCC does not treat LDTILECFG as reading c: without this barrier it
     * dropped the stores above as dead */
    __asm__ volatile("" : : "m"(c) : "memory");
    _tile_loadconfig(&c);
    t_config = which;
}

/* ------------------------------------------------------------------------
 * Activation packing
 * ---------------------------------------------------------------------- */

/* Order of the 32-element sub-blocks in the packed B data: slot j holds
 * sub-block k_slot[j], so that the 64-element chunk c (slots 2c, 2c+1) is
 * what one load of Q4_K nibbles gives: low nibbles of qs[0..63] are
 * sub-blocks 0 and 2, high nibbles 1 and 3, and so on. It is its own
 * inverse. */
static const int k_slot[8] = {0, 2, 1, 3, 4, 6, 5, 7};

/* One 256-element block of 16 tokens (token t in column t; absent tokens
 * are zero). 4416 bytes, a multiple of 64. */
typedef struct {
    uint8_t b[8][8][64];   /* [slot][k4][4 t + byte]: y[t][32 k_slot[slot] + 4 k4 + byte] */
    float dy[16];          /* the tokens' Q8_K scales */
    int32_t bsp[4][16];    /* Q4_K mins: int16 pair (P_2p, P_2p+1), P_s = bsums 2s + 2s+1 */
} tile_xblock;

static size_t kq_pack_bytes(int64_t ncols, int64_t n_tok) {
    return (size_t)((n_tok + 15) / 16) * (size_t)(ncols / QK_K) * sizeof(tile_xblock);
}

/* two int16 in one int32 lane, a in the low half (the vpdpwssd operand) */
BD_INLINE int32_t pair16(int a, int b) {
    return (int32_t)((uint32_t)(uint16_t)(int16_t)a | ((uint32_t)(uint16_t)(int16_t)b << 16));
}

static void kq_pack(int64_t ncols, const void *xq, size_t xs, int64_t n_tok, int64_t g, void *pack) {
    const int64_t nb = ncols / QK_K;
    tile_xblock *xb = (tile_xblock *)pack + g * nb;
    const int nt = (int)(n_tok - 16 * g < 16 ? n_tok - 16 * g : 16);
    if (nt < 16) memset(xb, 0, (size_t)nb * sizeof *xb);
    for (int t = 0; t < nt; t++) {
        const block_q8_K *y = (const block_q8_K *)((const uint8_t *)xq + (size_t)(16 * g + t) * xs);
        for (int64_t i = 0; i < nb; i++) {
            /* 4-byte group k of the row (sub-block k / 8, row k % 8 of its
             * tile) becomes column t */
            const uint32_t *src = (const uint32_t *)y[i].qs;
            uint32_t *dst = (uint32_t *)xb[i].b;
            for (int k = 0; k < 64; k++) dst[128 * k_slot[k / 8] + 16 * (k % 8) + t] = src[k];
            xb[i].dy[t] = y[i].d;
            const int16_t *bs = y[i].bsums;
            for (int p = 0; p < 4; p++)
                xb[i].bsp[p][t] = pair16(bs[4 * p] + bs[4 * p + 1], bs[4 * p + 2] + bs[4 * p + 3]);
        }
    }
}

/* ------------------------------------------------------------------------
 * Weight unpacking (16 rows of one block)
 *
 * The unpacking reads 16 weight rows block by block: 16 short streams,
 * interleaved, visited out of address order (a 4 KiB page holds two or
 * three rows of a 2560-column matrix), which the hardware prefetcher
 * follows poorly. So each row is prefetched KQ_AHEAD blocks ahead of its
 * unpacking; kq_warm covers the first KQ_AHEAD blocks of a call's first
 * group, which those prefetches never reach, and while a group's first
 * pass unpacks block i, kq_warm_block fetches block i of the group the same
 * call does next, a whole group's work ahead. (The 16-token verify forward
 * of the 4B benchmark file, 2 threads, measured ~20 % faster with the
 * warming than without; one block ahead measured as fast as two and faster
 * than four, whose prefetches queue up behind each other. Fetching the
 * next group block by block, instead of its first block at the end of the
 * group: 16-token Q4_K 9728 x 2560 from memory 39.6 -> 31.9 ms, Q6_K
 * 248320 x 2048 72 -> 66 ms, kbench -j 2, Xeon with AMX.)
 * ---------------------------------------------------------------------- */

#define KQ_AHEAD 1 /* blocks */

/* Prefetch the first min(ws, KQ_AHEAD blocks) bytes of nw rows. */
static void kq_warm(const uint8_t *w, size_t ws, int nw, size_t block_bytes) {
    const size_t n = KQ_AHEAD * block_bytes < ws ? KQ_AHEAD * block_bytes : ws;
    for (int r = 0; r < nw; r++)
        for (size_t o = 0; o < n; o += 64) _mm_prefetch((const char *)w + (size_t)r * ws + o, _MM_HINT_T0);
}

/* Prefetch block i of nw rows (every line it touches). */
static void kq_warm_block(const uint8_t *w, size_t ws, int nw, size_t block_bytes, int64_t i) {
    for (int r = 0; r < nw; r++) {
        const char *p = (const char *)w + (size_t)r * ws + (size_t)i * block_bytes;
        for (size_t o = 0; o < block_bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
        _mm_prefetch(p + block_bytes - 1, _MM_HINT_T0);
    }
}

typedef struct {
    uint8_t q[2][16][256]; /* [low, high part][row][64 c + byte], chunk c in slot order:
                              Q4_K code * scale part (lo, hi), Q6_K vl, vh */
    int32_t mp[16][4];     /* Q4_K: per row, int16 pairs (m_2p, m_2p+1), p = 0..3 */
    float d[16], dmin[16];
} tile_wblock;

/* Q4_K: the 6-bit scales are split as sc = 8 hi + lo (both 0..7) and each
 * code (0..15) multiplied by both parts with vpmullw: a 16-bit lane holds
 * two codes c0 + 256 c1 of the same sub-block, and (c0 + 256 c1) k =
 * c0 k + 256 c1 k with c0 k <= 105, so both byte products come out in
 * place. k_q4_mul[c] picks the scale word of each lane of chunk c (lanes
 * 0-15: sub-block k_slot[2c], 16-31: k_slot[2c + 1]). */
static const int16_t k_q4_mul[4][32] __attribute__((aligned(64))) = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6},
    {5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7},
};

BD_INLINE void unpack_q4k(const uint8_t *w, size_t ws, int nw, int64_t i, tile_wblock *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i sel[4];
    UNROLL for (int c = 0; c < 4; c++) sel[c] = _mm512_load_si512(k_q4_mul[c]);
    for (int r = 0; r < nw; r++) {
        const block_q4_K *b = (const block_q4_K *)(w + (size_t)r * ws) + i;
        /* see kq_warm (prefetches never fault) */
        UNROLL for (int l = 0; l < 3; l++) _mm_prefetch((const char *)(b + KQ_AHEAD) + 64 * l, _MM_HINT_T0);
        /* byte j of sc8 / m8: scale / min of sub-block j */
        uint64_t sc8, m8;
        kq_unpack_scales(b->scales, &sc8, &m8);
        const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc8)));
        const __m512i klo = _mm512_and_si512(sc16, _mm512_set1_epi16(7)), khi = _mm512_srli_epi16(sc16, 3);
        UNROLL for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_loadu_si512(b->qs + 64 * h);
            /* chunk 2h: low nibbles (sub-blocks 4h, 4h + 2); 2h + 1: high */
            const __m512i codes[2] = {_mm512_and_si512(q, m4), _mm512_and_si512(_mm512_srli_epi16(q, 4), m4)};
            UNROLL for (int k = 0; k < 2; k++) {
                const int c = 2 * h + k;
                _mm512_store_si512(u->q[0][r] + 64 * c,
                                   _mm512_mullo_epi16(codes[k], _mm512_permutexvar_epi16(sel[c], klo)));
                _mm512_store_si512(u->q[1][r] + 64 * c,
                                   _mm512_mullo_epi16(codes[k], _mm512_permutexvar_epi16(sel[c], khi)));
            }
        }
        /* int32 lane p: m_2p in the low half, m_2p+1 in the high one */
        _mm_store_si128((__m128i *)u->mp[r], _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m8)));
        u->d[r] = _cvtsh_ss(b->d);
        u->dmin[r] = _cvtsh_ss(b->dmin);
    }
}

/* Q6_K: each weight is folded with its sub-block scale into
 * v = sc * (q - 32) (|v| <= 4096, exact in int16) and split as
 * v = 128 vh + vl with vl in [-64, 63] and vh in [-32, 32], both signed
 * bytes: two TDPBSSD tiles then hold sum v y = C_lo + 128 C_hi exactly, the
 * -32 offset and the scales included (the same integer as the twin's
 * sum_s sc_s (sum q y - 32 bsums_s)). Bytes go in the slot order of the
 * packed activations (k_slot): chunk c holds the 32-element sub-blocks
 * k_slot[2c] and k_slot[2c + 1].
 *
 * k_q6_split[part][s][q]: the parts of v = (int8_t)s * (q - 32) for every
 * scale byte s and 6-bit code q (part 0: vl, 1: vh; vh = floor((v + 64) / 128)),
 * so that unpacking is a byte lookup: one vpermi2b serves two 16-element
 * sub-blocks (their two tables side by side, the sub-block picked by bit 6
 * of the index). 32 KiB, filled once by bd_kernels_fill_amx. */
static int8_t k_q6_split[2][256][64] __attribute__((aligned(64)));

static void q6_split_fill(void) {
    for (int s = 0; s < 256; s++)
        for (int q = 0; q < 64; q++) {
            const int v = (int8_t)s * (q - 32);
            const int vh = (v + 64) >> 7; /* floor, as srai */
            k_q6_split[1][s][q] = (int8_t)vh;
            k_q6_split[0][s][q] = (int8_t)(v - 128 * vh);
        }
}

BD_INLINE void unpack_q6k(const uint8_t *w, size_t ws, int nw, int64_t i, tile_wblock *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    /* bit 6 of the index: lanes 16-31 and 48-63 take the second table */
    const __m512i odd = _mm512_set_epi64(0x4040404040404040LL, 0x4040404040404040LL, 0, 0,
                                         0x4040404040404040LL, 0x4040404040404040LL, 0, 0);
    const __mmask64 top = 0xFFFFFFFF00000000ULL;
    for (int r = 0; r < nw; r++) {
        const block_q6_K *b = (const block_q6_K *)(w + (size_t)r * ws) + i;
        UNROLL for (int l = 0; l < 4; l++) _mm_prefetch((const char *)(b + KQ_AHEAD) + 64 * l, _MM_HINT_T0);
        const uint8_t *sc = (const uint8_t *)b->scales;
        UNROLL for (int h = 0; h < 2; h++) {
            /* elements 128h + 0..63 and 128h + 64..127, in order */
            __m512i ql = _mm512_loadu_si512(b->ql + 64 * h);
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
            __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            __m512i w0 = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                         _mm512_and_si512(_mm512_slli_epi16(qh2, 4), m30));
            __m512i w1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                         _mm512_and_si512(qh2, m30));
            /* chunk 2h: elements 128h + 0..31, 128h + 64..95 (16-element
             * sub-blocks 8h, 8h + 1, 8h + 4, 8h + 5 by lanes of 16); chunk
             * 2h + 1: 128h + 32..63, 128h + 96..127 (8h + 2, 3, 6, 7) */
            const __m512i ch[2] = {_mm512_shuffle_i64x2(w0, w1, 0x44), _mm512_shuffle_i64x2(w0, w1, 0xEE)};
            UNROLL for (int c = 0; c < 2; c++) {
                const __m512i idx = _mm512_or_si512(ch[c], odd);
                const int s0 = 8 * h + 2 * c;
                UNROLL for (int part = 0; part < 2; part++) {
                    const int8_t (*t)[64] = k_q6_split[part];
                    const __m512i a = _mm512_permutex2var_epi8(_mm512_load_si512(t[sc[s0]]), idx,
                                                              _mm512_load_si512(t[sc[s0 + 1]]));
                    const __m512i z = _mm512_permutex2var_epi8(_mm512_load_si512(t[sc[s0 + 4]]), idx,
                                                              _mm512_load_si512(t[sc[s0 + 5]]));
                    _mm512_store_si512(u->q[part][r] + 64 * (2 * h + c), _mm512_mask_blend_epi8(top, a, z));
                }
            }
        }
        u->d[r] = _cvtsh_ss(b->d);
    }
}

/* ------------------------------------------------------------------------
 * Block products: 16 rows x 16 tokens of one block into acc[r] (lanes =
 * tokens)
 * ---------------------------------------------------------------------- */

/* The int32 sums of one block, 16 rows x 16 tokens: cb[0] the low part
 * (Q4_K code * lo, Q6_K vl), cb[1] the high part. Q4_K's parts are
 * unsigned bytes (TDPBUSD), Q6_K's signed (TDPBSSD). */
BD_INLINE void block_tiles(const tile_wblock *u, const tile_xblock *x, const int q4, int32_t cb[2][16][16]) {
    _tile_zero(0);
    _tile_zero(1);
    UNROLL for (int c = 0; c < 4; c++) {
        _tile_loadd(4, x->b[2 * c], 64);
        _tile_loadd(2, u->q[0][0] + 64 * c, 256);
        _tile_loadd(3, u->q[1][0] + 64 * c, 256);
        if (q4) {
            _tile_dpbusd(0, 2, 4);
            _tile_dpbusd(1, 3, 4);
        } else {
            _tile_dpbssd(0, 2, 4);
            _tile_dpbssd(1, 3, 4);
        }
    }
    _tile_stored(0, cb[0], 64);
    _tile_stored(1, cb[1], 64);
}

BD_INLINE void block_q4k(const tile_wblock *u, const tile_xblock *x, int nw, __m512 *acc) {
    int32_t cb[2][16][16] __attribute__((aligned(64)));
    block_tiles(u, x, 1, cb);
    const __m512 dy = _mm512_loadu_ps(x->dy);
    __m512i bsp[4];
    UNROLL for (int p = 0; p < 4; p++) bsp[p] = _mm512_loadu_si512(x->bsp[p]);
    for (int r = 0; r < nw; r++) {
        __m512i sumi = _mm512_add_epi32(_mm512_load_si512(cb[0][r]),
                                        _mm512_slli_epi32(_mm512_load_si512(cb[1][r]), 3));
        __m512i summ = _mm512_setzero_si512();
        UNROLL for (int p = 0; p < 4; p++)
            summ = _mm512_dpwssd_epi32(summ, bsp[p], _mm512_set1_epi32(u->mp[r][p]));
        __m512 a = _mm512_mul_ps(_mm512_set1_ps(u->d[r]), dy);
        __m512 b = _mm512_mul_ps(_mm512_set1_ps(u->dmin[r]), dy);
        acc[r] = _mm512_fmadd_ps(a, _mm512_cvtepi32_ps(sumi), acc[r]);
        acc[r] = _mm512_fnmadd_ps(b, _mm512_cvtepi32_ps(summ), acc[r]);
    }
}

BD_INLINE void block_q6k(const tile_wblock *u, const tile_xblock *x, int nw, __m512 *acc) {
    int32_t cb[2][16][16] __attribute__((aligned(64)));
    block_tiles(u, x, 0, cb);
    const __m512 dy = _mm512_loadu_ps(x->dy);
    for (int r = 0; r < nw; r++) {
        __m512i sumi = _mm512_add_epi32(_mm512_load_si512(cb[0][r]),
                                        _mm512_slli_epi32(_mm512_load_si512(cb[1][r]), 7));
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(u->d[r]), dy), _mm512_cvtepi32_ps(sumi), acc[r]);
    }
}

/* acc[r] holds weight row r for 16 tokens (lanes); y[t * ldy + r] for
 * t < nt, r < nw. A 16 x 16 transpose in registers, then one masked store
 * per token. */
BD_INLINE void store_rows(const __m512 acc[16], float *y, int64_t ldy, int nt, int nw) {
    __m512 S[16];
    UNROLL for (int m = 0; m < 4; m++) {
        /* S[4m + k] quarter q = acc[4m..4m+3][4q + k] */
        const __m512 T0 = _mm512_unpacklo_ps(acc[4 * m], acc[4 * m + 1]);
        const __m512 T1 = _mm512_unpackhi_ps(acc[4 * m], acc[4 * m + 1]);
        const __m512 T2 = _mm512_unpacklo_ps(acc[4 * m + 2], acc[4 * m + 3]);
        const __m512 T3 = _mm512_unpackhi_ps(acc[4 * m + 2], acc[4 * m + 3]);
        S[4 * m + 0] = _mm512_shuffle_ps(T0, T2, 0x44);
        S[4 * m + 1] = _mm512_shuffle_ps(T0, T2, 0xEE);
        S[4 * m + 2] = _mm512_shuffle_ps(T1, T3, 0x44);
        S[4 * m + 3] = _mm512_shuffle_ps(T1, T3, 0xEE);
    }
    const __mmask16 mw = (__mmask16)(nw >= 16 ? 0xFFFFu : (1u << nw) - 1);
    UNROLL for (int k = 0; k < 4; k++) {
        const __m512 V1 = _mm512_shuffle_f32x4(S[k], S[4 + k], 0x88), V2 = _mm512_shuffle_f32x4(S[k], S[4 + k], 0xDD);
        const __m512 W1 = _mm512_shuffle_f32x4(S[8 + k], S[12 + k], 0x88),
                     W2 = _mm512_shuffle_f32x4(S[8 + k], S[12 + k], 0xDD);
        /* token 4q + k */
        const __m512 col[4] = {_mm512_shuffle_f32x4(V1, W1, 0x88), _mm512_shuffle_f32x4(V2, W2, 0x88),
                               _mm512_shuffle_f32x4(V1, W1, 0xDD), _mm512_shuffle_f32x4(V2, W2, 0xDD)};
        UNROLL for (int q = 0; q < 4; q++)
            if (4 * q + k < nt) _mm512_mask_storeu_ps(y + (4 * q + k) * ldy, mw, col[q]);
    }
}

/* ------------------------------------------------------------------------
 * Rows
 * ---------------------------------------------------------------------- */


/* Token groups per pass over a row group. Each pass unpacks the weights
 * once, so more groups per pass means less unpacking; but a pass streams
 * its groups' packed activations once per block, and those should stay in
 * L2 (2 MiB per core here): at most TILE_PASS_BYTES of them, between 8 and
 * TILE_GROUPS groups (128..512 tokens). */
#define TILE_GROUPS 32
#define TILE_PASS_BYTES (1536 << 10)

/* nw (<= 16) rows at w; then n_next rows at w + 16 ws are the caller's
 * next group (warmed block by block during the first pass; 0: none). */
static void kq_rows(uint32_t type, int64_t ncols, const uint8_t *w, size_t ws, int nw, int n_next,
                    const void *pack, int64_t n_tok, float *y, int64_t ldy) {
    if (t_config != CFG_KQ) tile_configure(CFG_KQ);
    const int64_t nb = ncols / QK_K;
    const tile_xblock *xp = pack;
    const bool q4 = type == BD_TYPE_Q4_K;
    const size_t bb = q4 ? sizeof(block_q4_K) : sizeof(block_q6_K);
    kq_warm(w, ws, nw, bb);
    /* two buffers, alternating by block (see the loop) */
    tile_wblock ub[2] __attribute__((aligned(64)));
    if (nw < 16) memset(ub, 0, sizeof ub); /* rows >= nw stay zero */
    const int64_t n_groups = (n_tok + 15) / 16;
    int64_t per_pass = TILE_PASS_BYTES / ((int64_t)sizeof(tile_xblock) * nb);
    per_pass = per_pass < 8 ? 8 : per_pass > TILE_GROUPS ? TILE_GROUPS : per_pass;
    for (int64_t g0 = 0; g0 < n_groups; g0 += per_pass) {
        const int ng = (int)(n_groups - g0 < per_pass ? n_groups - g0 : per_pass);
        __m512 acc[TILE_GROUPS][16];
        for (int g = 0; g < ng; g++)
            for (int r = 0; r < 16; r++) acc[g][r] = _mm512_setzero_ps();
        if (q4) unpack_q4k(w, ws, nw, 0, &ub[0]);
        else unpack_q6k(w, ws, nw, 0, &ub[0]);
        for (int64_t i = 0; i < nb; i++) {
            /* unpack one block ahead: by the time the tiles load a block,
             * its stores have long left the store buffer (a tile load of
             * freshly stored lines stalls) */
            if (i + 1 < nb) {
                if (q4) unpack_q4k(w, ws, nw, i + 1, &ub[(i + 1) & 1]);
                else unpack_q6k(w, ws, nw, i + 1, &ub[(i + 1) & 1]);
            }
            if (n_next && g0 == 0) kq_warm_block(w + 16 * ws, ws, n_next, bb, i);
            const tile_wblock *u = &ub[i & 1];
            for (int g = 0; g < ng; g++) {
                const tile_xblock *x = xp + (g0 + g) * nb + i;
                if (q4) block_q4k(u, x, nw, acc[g]);
                else block_q6k(u, x, nw, acc[g]);
            }
        }
        for (int g = 0; g < ng; g++) {
            const int64_t t0 = (g0 + g) * 16;
            store_rows(acc[g], y + t0 * ldy, ldy, (int)(n_tok - t0 < 16 ? n_tok - t0 : 16), nw);
        }
    }
}

/* ------------------------------------------------------------------------
 * Q8_0 x Q8_0
 *
 * A block is 32 signed weight bytes after a f16 scale, so the A tile (16
 * weight rows x 32 bytes) loads straight from the weight rows with the row
 * stride: nothing to unpack. One TDPBSSD per block and token group gives
 * the block's exact int32 sums for 16 rows x 16 tokens; the f32 step per
 * block and output element is acc = fma((float)sum, dy * dw, acc) (the twin:
 * bd_vec_dot_tile_ref). Blocks cycle through four C tiles and two A / B
 * pairs, issued two blocks ahead of the f32 step that reads them, so the
 * tile unit's latency hides behind the vector work.
 * ---------------------------------------------------------------------- */

/* One 32-element block of 16 tokens: 576 bytes, a multiple of 64. */
typedef struct {
    uint8_t b[8][64]; /* [k4][4 t + byte]: y[t].qs[4 k4 + byte] */
    float dy[16];
} tile_xblock8;

static size_t q8_pack_bytes(int64_t ncols, int64_t n_tok) {
    return (size_t)((n_tok + 15) / 16) * (size_t)(ncols / QK8_0) * sizeof(tile_xblock8);
}

static void q8_pack(int64_t ncols, const void *xq, size_t xs, int64_t n_tok, int64_t g, void *pack) {
    const int64_t nb = ncols / QK8_0;
    tile_xblock8 *xb = (tile_xblock8 *)pack + g * nb;
    const int nt = (int)(n_tok - 16 * g < 16 ? n_tok - 16 * g : 16);
    if (nt < 16) memset(xb, 0, (size_t)nb * sizeof *xb);
    for (int t = 0; t < nt; t++) {
        const block_q8_0 *y = (const block_q8_0 *)((const uint8_t *)xq + (size_t)(16 * g + t) * xs);
        for (int64_t i = 0; i < nb; i++) {
            uint32_t *dst = (uint32_t *)xb[i].b;
            for (int k = 0; k < 8; k++) memcpy(&dst[16 * k + t], y[i].qs + 4 * k, 4);
            xb[i].dy[t] = _cvtsh_ss(y[i].d);
        }
    }
}

typedef struct {
    const uint8_t *w; /* weight rows (block i of row r at w + r ws + 34 i) */
    size_t ws;
    int nw;
    const tile_xblock8 *x; /* this token group's blocks */
    int32_t cb[4][16][16] __attribute__((aligned(64))); /* C of the blocks in flight */
    float dw[4][16];                                    /* their weight scales */
    uint8_t a[2][16][32];                               /* partial row groups: A copied */
} q8_state;

/* Start block i0 + S in C tile CT (= S & 3) with A tile AT and B tile BT
 * (4 / 6 for even S, 5 / 7 for odd); the tile numbers must be literals. */
#define Q8_ISSUE(S, CT, AT, BT)                                                                  \
    do {                                                                                         \
        const int64_t i_ = i0 + (S);                                                             \
        const uint8_t *a_;                                                                       \
        size_t as_;                                                                              \
        if (st->nw == 16) {                                                                      \
            a_ = st->w + 34 * i_ + 2;                                                            \
            as_ = st->ws;                                                                        \
            __m512i h_ = _mm512_i32gather_epi32(rowoff, (const void *)(st->w + 34 * i_), 1);      \
            _mm512_store_ps(st->dw[(S) & 3], _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h_)));          \
        } else {                                                                                 \
            for (int r_ = 0; r_ < st->nw; r_++) {                                                \
                const block_q8_0 *b_ = (const block_q8_0 *)(st->w + (size_t)r_ * st->ws) + i_;   \
                memcpy(st->a[(S) & 1][r_], b_->qs, 32);                                          \
                st->dw[(S) & 3][r_] = _cvtsh_ss(b_->d);                                          \
            }                                                                                    \
            a_ = st->a[(S) & 1][0];                                                              \
            as_ = 32;                                                                            \
        }                                                                                        \
        _tile_loadd(AT, a_, as_);                                                                \
        _tile_loadd(BT, st->x[i_].b, 64);                                                        \
        _tile_zero(CT);                                                                          \
        _tile_dpbssd(CT, AT, BT);                                                                \
        _tile_stored(CT, st->cb[(S) & 3], 64);                                                   \
    } while (0)

/* The f32 step of block i (slot S & 3). */
#define Q8_FINISH(S)                                                                             \
    do {                                                                                         \
        const __m512 dy_ = _mm512_loadu_ps(st->x[i0 + (S)].dy);                                   \
        UNROLL for (int r_ = 0; r_ < 16; r_++)                                                   \
            acc[r_] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(st->cb[(S) & 3][r_])), \
                                      _mm512_mul_ps(dy_, _mm512_set1_ps(st->dw[(S) & 3][r_])),   \
                                      acc[r_]);                                                  \
    } while (0)

/* One token group: acc[r] lanes = tokens. nb is a multiple of 4. */
static void q8_group(q8_state *st, int64_t nb, __m512 acc[16]) {
    const __m512i rowoff = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              _mm512_set1_epi32((int)st->ws));
    if (st->nw < 16) memset(st->a, 0, sizeof st->a); /* rows >= nw stay zero */
    int64_t i0 = 0;
    Q8_ISSUE(0, 0, 4, 6);
    Q8_ISSUE(1, 1, 5, 7);
    for (i0 = 0; i0 < nb; i0 += 4) {
        /* blocks i0 + 2, i0 + 3 start while i0, i0 + 1 finish, and so on */
        Q8_ISSUE(2, 2, 4, 6);
        Q8_ISSUE(3, 3, 5, 7);
        Q8_FINISH(0);
        Q8_FINISH(1);
        if (i0 + 4 < nb) {
            Q8_ISSUE(4, 0, 4, 6);
            Q8_ISSUE(5, 1, 5, 7);
        }
        Q8_FINISH(2);
        Q8_FINISH(3);
    }
}

static void q8_rows(int64_t ncols, const void *w, size_t ws, int nw, const void *pack, int64_t n_tok,
                    float *y, int64_t ldy) {
    const int64_t nb = ncols / QK8_0;
    q8_state st __attribute__((aligned(64)));
    st.w = w;
    st.ws = ws;
    st.nw = nw;
    for (int64_t g = 0; g < (n_tok + 15) / 16; g++) {
        __m512 acc[16];
        for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
        st.x = (const tile_xblock8 *)pack + g * nb;
        q8_group(&st, nb, acc);
        const int64_t t0 = 16 * g;
        store_rows(acc, y + t0 * ldy, ldy, (int)(n_tok - t0 < 16 ? n_tok - t0 : 16), nw);
    }
}

/* ------------------------------------------------------------------------
 * Entry points
 * ---------------------------------------------------------------------- */

static bool tile_supports(uint32_t type, int64_t ncols) {
    if (ncols <= 0) return false;
    if (type == BD_TYPE_Q8_0) return ncols % (4 * QK8_0) == 0; /* q8_group takes blocks by 4 */
    return (type == BD_TYPE_Q4_K || type == BD_TYPE_Q6_K) && ncols % QK_K == 0;
}

static size_t tile_pack_bytes(uint32_t type, int64_t ncols, int64_t n_tok) {
    return type == BD_TYPE_Q8_0 ? q8_pack_bytes(ncols, n_tok) : kq_pack_bytes(ncols, n_tok);
}

static void tile_pack(uint32_t type, int64_t ncols, const void *xq, size_t xs, int64_t n_tok, int64_t g,
                      void *pack) {
    if (type == BD_TYPE_Q8_0) q8_pack(ncols, xq, xs, n_tok, g, pack);
    else kq_pack(ncols, xq, xs, n_tok, g, pack);
}

static void tile_rows(uint32_t type, int64_t ncols, const void *w, size_t ws, int nw, const void *xq, size_t xs,
                      const void *pack, int64_t n_tok, float *y, int64_t ldy) {
    (void)xq, (void)xs; /* the tiles read the packed copy */
    for (int r0 = 0; r0 < nw; r0 += 16) {
        const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * ws;
        const int n = nw - r0 < 16 ? nw - r0 : 16;
        if (type == BD_TYPE_Q8_0) {
            if (t_config != CFG_Q8) tile_configure(CFG_Q8);
            q8_rows(ncols, wr, ws, n, pack, n_tok, y + r0, ldy);
        } else {
            const int n_next = nw - r0 - n < 16 ? nw - r0 - n : 16;
            kq_rows(type, ncols, wr, ws, n, n_next, pack, n_tok, y + r0, ldy);
        }
    }
}

/* Which batches take the tiles (bd_tile_ops): Q4_K and Q6_K tiles give the
 * bits of vec_dot_n (the tile order), so exact callers may send them any
 * batch; Q8_0's order differs, so only bd_matmul_fast (the drafter) takes
 * its tiles. The row counts are where the tiles measured faster
 * (matmul.c). */
static const bd_tile_ops k_amx_tiles = {
    .supports = tile_supports,
    .pack_bytes = tile_pack_bytes,
    .pack = tile_pack,
    .rows = tile_rows,
    /* no exact Q8_0: the tiles' order differs from the one-row dot (see matmul.c) */
    .exact_rows = {[BD_TYPE_Q4_K] = BD_MATMUL_TILE_Q4K_ROWS, [BD_TYPE_Q6_K] = BD_MATMUL_TILE_Q6K_ROWS},
    .fast_rows = {[BD_TYPE_Q4_K] = BD_MATMUL_TILE_Q4K_ROWS, [BD_TYPE_Q6_K] = BD_MATMUL_TILE_Q6K_ROWS,
                  [BD_TYPE_Q8_0] = BD_MATMUL_TILE_Q8_ROWS},
};

void bd_kernels_fill_amx(bd_kernels *k) {
    q6_split_fill();
    k->tile = &k_amx_tiles;
}
