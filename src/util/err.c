/* err: see err.h. */
#include "util/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/text.h"

static char err_buf[1024];
static int err_runtime; /* the last error is the machine's fault, not the input's */

int err_set(const char *fmt, ...) {
    /* formatted apart first: a message may wrap the previous one (err_msg() as an argument) */
    char tmp[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    /* one line, whatever a key, value or file name held: control bytes are spelled out */
    size_t o = 0;
    for (const char *s = tmp; *s && o + 5 < sizeof err_buf; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x20 && ch != 0x7f) err_buf[o++] = (char)ch;
        else {
            char spelled[8]; /* at most 4 bytes: o + 5 < size leaves room for them and the NUL */
            int k = spell_control(spelled, ch);
            memcpy(err_buf + o, spelled, (size_t)k), o += (size_t)k;
        }
    }
    err_buf[o] = '\0';
    err_runtime = 0;
    return -1;
}

int err_io(int errnum) {
    /* out of space or quota, a file past its size limit, a failing device: the machine's;
     * a directory a concurrent writer keeps filling (ENOTEMPTY) is the machine's too;
     * anything else (no such directory, not a directory, permission, a read-only file
     * system) says the place the user named cannot hold the file */
    err_runtime = errnum == ENOSPC || errnum == EDQUOT || errnum == EFBIG || errnum == EIO || errnum == ENOMEM ||
                  errnum == ENOTEMPTY;
    return -1;
}

int err_status(void) { return err_runtime ? 1 : 2; }

const char *err_msg(void) { return err_buf[0] ? err_buf : "unknown error"; }
