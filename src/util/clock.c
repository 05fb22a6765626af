/* clock: see clock.h. */
#include "util/clock.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void format_duration(char *buf, size_t n, double s) {
    if (s < 0 || !isfinite(s)) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}
