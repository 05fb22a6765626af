/* cmdutil: see cmdutil.h. */
#include "cmd/cmdutil.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

int cmd_fail(int code) {
    fprintf(stderr, "qkv: %s\n", err_msg());
    return code;
}

int cmd_usage(const char *usage) {
    fprintf(stderr, "usage: %s\n", usage);
    return 2;
}

int cmd_long(const char *where, const char *what, const char *arg, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || errno || v < lo || v > hi) return err_set("%s: '%s' is not %s", where, arg, what);
    *out = v;
    return 0;
}

int cmd_int(const char *where, const char *what, const char *arg, int lo, int hi, int *out) {
    long v = 0;
    if (cmd_long(where, what, arg, lo, hi, &v) != 0) return -1;
    *out = (int)v;
    return 0;
}

int cmd_double(const char *where, const char *what, const char *arg, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end || errno || !isfinite(v) || v < lo || v > hi)
        return err_set("%s: '%s' is not %s", where, arg, what);
    *out = v;
    return 0;
}
