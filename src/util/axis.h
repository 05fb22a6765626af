/* axis: the tick rule every chart of qkv draws its axes with (the training curves, the
 * report's charts, the heads' pruning curve), so that their scales read alike. */
#ifndef QKV_UTIL_AXIS_H
#define QKV_UTIL_AXIS_H

/* A round step (1, 2 or 5 times a power of ten) for about n ticks over [lo, hi]. */
double axis_tick_step(double lo, double hi, int n);
/* The ticks from lo to hi at that step: at most 50, none when the numbers cannot make any. */
int axis_tick_count(double lo, double hi, double step);
/* hi rounded up to a whole step from 0 (the top of an axis starting at 0); hi itself when
 * the step cannot round it. */
double axis_top(double hi, double step);

#endif
