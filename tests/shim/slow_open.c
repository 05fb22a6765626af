/* slow_open: an LD_PRELOAD shim for the tests that makes opening some files slow.
 *
 * open, open64, openat, openat64, fopen and fopen64 are wrapped: when the path holds
 * QKV_SLOW_OPEN (a substring; unset: none), the call first sleeps QKV_SLOW_OPEN_MS
 * milliseconds (default 2000). A server's load of a large checkpoint then takes seconds
 * without one being made, and whatever waits on that load shows. Nothing here is linked
 * into qkv. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void maybe_wait(const char *path) {
    const char *match = getenv("QKV_SLOW_OPEN");
    if (!path || !match || !match[0] || !strstr(path, match)) return;
    const char *ms = getenv("QKV_SLOW_OPEN_MS");
    long n = ms ? atol(ms) : 2000;
    struct timespec ts = {n / 1000, (n % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* the mode argument, present when the flags create a file */
#define MODE_OF(flags, last)               \
    mode_t mode = 0;                       \
    if ((flags) & (O_CREAT | O_TMPFILE)) { \
        va_list ap;                        \
        va_start(ap, last);                \
        mode = va_arg(ap, mode_t);         \
        va_end(ap);                        \
    }

#define WRAP_OPEN(name)                                                                                 \
    int name(const char *path, int flags, ...) {                                                        \
        MODE_OF(flags, flags)                                                                           \
        maybe_wait(path);                                                                               \
        int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #name); \
        return real(path, flags, mode);                                                                 \
    }
#define WRAP_OPENAT(name)                                                                                         \
    int name(int dir, const char *path, int flags, ...) {                                                         \
        MODE_OF(flags, flags)                                                                                     \
        maybe_wait(path);                                                                                         \
        int (*real)(int, const char *, int, ...) = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, #name); \
        return real(dir, path, flags, mode);                                                                      \
    }
#define WRAP_FOPEN(name)                                                                                              \
    FILE *name(const char *path, const char *how) {                                                                   \
        maybe_wait(path);                                                                                             \
        FILE *(*real)(const char *, const char *) = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, #name); \
        return real(path, how);                                                                                       \
    }

WRAP_OPEN(open)
WRAP_OPEN(open64)
WRAP_OPENAT(openat)
WRAP_OPENAT(openat64)
WRAP_FOPEN(fopen)
WRAP_FOPEN(fopen64)
