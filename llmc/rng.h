// The project's one random number generator: xorshift64* seeded through splitmix64.
// Used for init, data order and the position schedule, on CPU and GPU hosts alike,
// so a seed means the same numbers everywhere.
#pragma once
#include <math.h>
#include <stdint.h>

typedef struct { uint64_t s; } Rng;

static inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// A stream for (seed, purpose): different purposes never share numbers.
static inline Rng rng_make(uint64_t seed, uint64_t stream) {
    Rng r;
    r.s = splitmix64(seed ^ splitmix64(stream + 0x1234567ULL));
    if (r.s == 0) r.s = 1;
    return r;
}

static inline uint64_t rng_u64(Rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}

// uniform in [0,1) with 24 random bits (exact in fp32)
static inline float rng_f32(Rng *r) { return (float)(rng_u64(r) >> 40) / 16777216.0f; }

// uniform integer in [0, n)
static inline uint32_t rng_below(Rng *r, uint32_t n) { return (uint32_t)(((rng_u64(r) >> 32) * (uint64_t)n) >> 32); }

// standard normal (Box-Muller), used for init
static inline float rng_normal(Rng *r) {
    double u1 = ((rng_u64(r) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (rng_u64(r) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static inline void rng_permute(Rng *r, int *a, int n) {
    for (int i = 0; i < n; i++) a[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)(i + 1));
        int t = a[i]; a[i] = a[j]; a[j] = t;
    }
}

// RNG streams (purposes)
enum { RNG_INIT = 1, RNG_DATA = 2, RNG_POS = 3, RNG_SAMPLE = 4 };
