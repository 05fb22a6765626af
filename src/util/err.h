/* err: one error message per failure, and whose fault it is. */
#ifndef QKV_UTIL_ERR_H
#define QKV_UTIL_ERR_H

#include <stddef.h>

/* Library code never prints or exits on a user error: it records one message with
 * err_set() and returns -1. The command layer prints "qkv: <message>" and exits. */
int err_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *err_msg(void);
/* After err_set for a failed system call: records whether errnum is a fault of the
 * machine (full disk, I/O error: exit 1) or of where the user pointed (exit 2). -1. */
int err_io(int errnum);
/* The exit status the last error calls for: 1 after err_io judged it a runtime fault,
 * else 2 (bad input, which is what err_set alone means). */
int err_status(void);

#endif
