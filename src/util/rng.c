/* rng: see rng.h. */
#include "util/rng.h"

#include <math.h>

void rng_seed(Rng *r, uint64_t seed) { r->state = seed; }

double rng_uniform(Rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

float rng_normal(Rng *r) {
    /* Box-Muller; the second value is thrown away so the state advances by a fixed amount. */
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t rng_below(Rng *r, uint64_t n) { return rng_next(r) % n; }
