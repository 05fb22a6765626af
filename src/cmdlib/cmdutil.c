/* cmdutil: see cmdutil.h. */
#include "cmdlib/cmdutil.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/tokenize.h"
#include "util/err.h"
#include "util/file.h"
#include "util/text.h"

int cmd_fail(int code) {
    fprintf(stderr, "qkv: %s\n", err_msg());
    cmd_failure_said = 1;
    return code;
}

volatile sig_atomic_t cmd_progress_shown, cmd_failure_said;

void cmd_progress(const char *command, const char *fmt, ...) {
    static int tty = -1;
    if (tty < 0) tty = isatty(STDERR_FILENO);
    if (!tty) return;
    fputs("\r\033[K", stderr);
    cmd_progress_shown = fmt != NULL;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "qkv %s: ", command);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fflush(stderr);
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

int cmd_read_aligned(const char *hyp_path, const char *ref_path, const char *what, char ***hyp, char ***ref, int *n) {
    int nh = 0, nr = 0;
    *hyp = read_file_lines(hyp_path, &nh);
    *ref = *hyp ? read_file_lines(ref_path, &nr) : NULL;
    if (!*ref) {
        if (*hyp) free_lines(*hyp, nh);
        return -1;
    }
    int bad = -1;
    const char *which = NULL;
    for (int i = 0; i < nh && i < nr && bad < 0; i++) {
        if (!utf8_valid((*hyp)[i], strlen((*hyp)[i]))) bad = i, which = hyp_path;
        else if (!utf8_valid((*ref)[i], strlen((*ref)[i]))) bad = i, which = ref_path;
    }
    if (nh != nr || bad >= 0) {
        if (nh != nr)
            err_set("%s has %d lines, %s %d: %s and its reference must be line-aligned", hyp_path, nh, ref_path, nr,
                    what);
        else err_set("%s:%d: not UTF-8 text", which, bad + 1);
        free_lines(*hyp, nh), free_lines(*ref, nr);
        return -1;
    }
    *n = nh;
    return 0;
}

void cmd_print_text(const char *prefix, const char *s) {
    fputs(prefix, stdout);
    fput_spelled(stdout, s, strlen(s));
    putchar('\n');
}

void cmd_print_column(const char *s, int width) {
    int n = 0;
    for (const char *p = s; *p && n < width;) {
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20 || ch == 0x7f) { /* spelled, as cmd_print_text does: cut whole */
            char spelled[8];
            int k = spell_control(spelled, ch);
            if (n + k > width) break;
            fputs(spelled, stdout), n += k, p++;
            continue;
        }
        const char *start = p++;
        while ((*p & 0xC0) == 0x80) p++; /* the rest of one character */
        fwrite(start, 1, (size_t)(p - start), stdout), n++;
    }
    for (; n < width; n++) putchar(' ');
}

void cmd_warn_truncated(int n, int max) {
    if (n) fprintf(stderr, "qkv: warning: %d lines longer than %d tokens were truncated\n", n, max);
}
