/* gradcheck: central finite differences against an analytic gradient. */
#ifndef QKV_GRADCHECK_H
#define QKV_GRADCHECK_H

#include <math.h>
#include <stddef.h>

#include "util/rng.h"

typedef double (*LossFn)(void *ctx);

/* Worst error over x[0..n) of the analytic gradient g against (f(x+e) - f(x-e)) / 2e,
 * measured as |num - g| / max(floor, |num| + |g|). Points closer than `kink` to a
 * non-differentiable point (as judged by skip(), may be NULL) are left out. */
static inline double gradcheck(LossFn f, void *ctx, float *x, const float *g, size_t n, float eps, double floor,
                               int (*skip)(size_t i, void *ctx), size_t *worst_at) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (skip && skip(i, ctx)) continue;
        float saved = x[i];
        x[i] = saved + eps;
        double lp = f(ctx);
        x[i] = saved - eps;
        double lm = f(ctx);
        x[i] = saved;
        double num = (lp - lm) / (2.0 * (double)eps);
        double denom = fabs(num) + fabs((double)g[i]);
        if (denom < floor) denom = floor;
        double err = fabs(num - (double)g[i]) / denom;
        if (err > worst) {
            worst = err;
            if (worst_at) *worst_at = i;
        }
    }
    return worst;
}

static inline void fill_normal(float *x, size_t n, float std, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = std * rng_normal(r);
}

/* sum(w * out) in double: a random linear functional turns any op into a scalar loss. */
static inline double weighted_sum(const float *w, const float *out, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)w[i] * (double)out[i];
    return s;
}

#endif
