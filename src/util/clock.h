/* clock: wall-clock time for rates, ETAs and timings. */
#ifndef QKV_UTIL_CLOCK_H
#define QKV_UTIL_CLOCK_H

#include <stddef.h>

/* Seconds on a monotonic clock (never steps back when the date is set). */
double now_seconds(void);
/* A duration as a progress line shows it: "42s", "3m05s", "2h10m"; "?" when unknown
 * (negative or not finite). */
void format_duration(char *buf, size_t n, double seconds);

#endif
