/*
 * rng.c - the PRNG and argmax (base.h).
 *
 * xoshiro256** (Blackman & Vigna), its state filled by splitmix64 from a
 * 64-bit seed as its authors recommend: fast, 256 bits of state, no
 * dependence on libc's rand(). Not llama.cpp's mt19937, so sampled texts
 * differ from llama.cpp's for the same seed; the distributions do not.
 */
#include "base.h"

uint64_t bd_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void bd_rng_seed(bd_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = bd_splitmix64(&seed);
}

uint64_t bd_rng_next(bd_rng *r) {
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

double bd_rng_uniform(bd_rng *r) { return (double)(bd_rng_next(r) >> 11) * 0x1.0p-53; }

uint64_t bd_rng_below(bd_rng *r, uint64_t n) { return n ? bd_rng_next(r) % n : 0; }

int32_t bd_argmax(const float *x, int32_t n) {
    /* The best value is carried in a register: compared as x[best], each
     * step's load waited on the previous step's pick (about 4 ns an
     * element, 3 ms for five 151936-entry rows of a drafter's head, Zen 5;
     * now 0.5 ms). bv is always x[best], so the result is the same. */
    int32_t best = 0;
    float bv = n > 0 ? x[0] : 0.0f;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > bv) bv = x[i], best = i;
    return best;
}
