/* rng: seeded random numbers and the counter-based hash behind dropout masks. */
#ifndef QKV_UTIL_RNG_H
#define QKV_UTIL_RNG_H

#include <stdint.h>

/* splitmix64: one 64-bit state, good enough for shuffling and initialisation, and its
 * state is a single number a checkpoint can store. */
typedef struct {
    uint64_t state;
} Rng;
void rng_seed(Rng *r, uint64_t seed);
static inline uint64_t rng_next(Rng *r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
double rng_uniform(Rng *r);             /* [0, 1) */
float rng_normal(Rng *r);               /* mean 0, std 1 */
uint64_t rng_below(Rng *r, uint64_t n); /* [0, n), n > 0 */

/* Counter-based hash: a pure function of its inputs, so a dropout mask depends only on
 * (seed, step, site, index) and is reproduced exactly after a resume. Inline (as rng_next)
 * because dropout calls it once per four elements of every activation, in loops that
 * vectorise only when they can see it. */
static inline uint64_t hash64(uint64_t a, uint64_t b) {
    Rng r = {a * 0xD1B54A32D192ED03ull ^ b};
    rng_next(&r);
    return rng_next(&r);
}

#endif
