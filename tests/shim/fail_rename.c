/* fail_rename: an LD_PRELOAD shim for the tests that makes one rename fail, as an I/O error
 * in the middle of moving a set of files into place would.
 *
 * The first rename (or renameat) whose destination ends with QKV_FAIL_RENAME (unset or
 * empty: none) fails with EIO; every other call, that one's undo included, is the
 * library's. Nothing here is linked into qkv. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed;

static int refused(const char *to) {
    const char *end = getenv("QKV_FAIL_RENAME");
    if (failed || !end || !end[0] || !to) return 0;
    size_t n = strlen(to), m = strlen(end);
    if (n < m || strcmp(to + n - m, end) != 0) return 0;
    failed = 1;
    return 1;
}

int rename(const char *from, const char *to) {
    if (refused(to)) return errno = EIO, -1;
    int (*real)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    return real(from, to);
}

int renameat(int from_dir, const char *from, int to_dir, const char *to) {
    if (refused(to)) return errno = EIO, -1;
    int (*real)(int, const char *, int,
                const char *) = (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
    return real(from_dir, from, to_dir, to);
}
