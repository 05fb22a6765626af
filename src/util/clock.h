/* clock: wall-clock time for rates, ETAs and timings. */
#ifndef QKV_UTIL_CLOCK_H
#define QKV_UTIL_CLOCK_H

/* Seconds on a monotonic clock (never steps back when the date is set). */
double now_seconds(void);

#endif
