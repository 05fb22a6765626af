/* axis: see axis.h. */
#include "util/axis.h"

#include <math.h>

double axis_tick_step(double lo, double hi, int n) {
    double raw = (hi - lo) / n, mag = pow(10, floor(log10(raw > 0 ? raw : 1)));
    double f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

int axis_tick_count(double lo, double hi, double step) {
    if (!(step > 0) || !isfinite(lo) || !isfinite(hi) || !isfinite(step)) return 0;
    double n = floor((hi - lo) / step * (1 + 1e-9)) + 1;
    return n < 1 || !isfinite(n) ? 0 : n > 50 ? 50 : (int)n;
}

double axis_top(double hi, double step) {
    double top = ceil(hi / step) * step;
    return isfinite(top) ? top : hi;
}
