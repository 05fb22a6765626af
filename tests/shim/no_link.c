/* no_link: an LD_PRELOAD shim for the tests that makes hard links fail, as on a file system
 * without them (vfat, exFAT, many network and FUSE mounts).
 *
 * link and linkat fail with EPERM, as vfat answers, when QKV_NO_LINK is set (to anything
 * but empty); otherwise they are the library's. Nothing here is linked into qkv. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static int refused(void) {
    const char *on = getenv("QKV_NO_LINK");
    return on && on[0];
}

int link(const char *from, const char *to) {
    if (refused()) return errno = EPERM, -1;
    int (*real)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "link");
    return real(from, to);
}

int linkat(int from_dir, const char *from, int to_dir, const char *to, int flags) {
    if (refused()) return errno = EPERM, -1;
    int (*real)(int, const char *, int, const char *,
                int) = (int (*)(int, const char *, int, const char *, int))dlsym(RTLD_NEXT, "linkat");
    return real(from_dir, from, to_dir, to, flags);
}
