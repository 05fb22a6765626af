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
uint64_t rng_next(Rng *r);
double rng_uniform(Rng *r);             /* [0, 1) */
float rng_normal(Rng *r);               /* mean 0, std 1 */
uint64_t rng_below(Rng *r, uint64_t n); /* [0, n), n > 0 */

/* Counter-based hash: a pure function of its inputs, so a dropout mask depends only on
 * (seed, step, site, index) and is reproduced exactly after a resume. */
uint64_t hash64(uint64_t a, uint64_t b);

#endif
