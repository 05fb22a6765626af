/* mem: see mem.h. */
#define _DEFAULT_SOURCE /* MADV_HUGEPAGE */
#include "util/mem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { HUGE_PAGE = 2 << 20 }; /* x86-64's and most arm64 kernels' transparent huge page */

void exit_out_of_memory(const char *msg) {
    fprintf(stderr, "qkv: %s\n", msg);
    exit(1);
}

static void out_of_memory(size_t n) {
    char msg[64];
    snprintf(msg, sizeof msg, "out of memory (asked for %zu bytes)", n);
    exit_out_of_memory(msg);
}

void *xcheck(void *p) {
    if (!p) out_of_memory(0);
    return p;
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n);
    return p;
}

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) out_of_memory(count * size);
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory(n);
    return q;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = xmalloc(n);
    memcpy(d, s, n);
    return d;
}

void *xcalloc_big(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) out_of_memory(SIZE_MAX);
    size_t n = count * size;
    if (n < HUGE_PAGE) return xcalloc(count, size);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, n) != 0) out_of_memory(n);
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n, MADV_HUGEPAGE); /* advice: refused, the pages stay small */
#endif
    memset(p, 0, n); /* after the advice: the first touch is what maps the pages */
    return p;
}

void *xrealloc_big(void *p, size_t old_bytes, size_t new_bytes) {
    char *q = xcalloc_big(new_bytes, 1);
    if (p) memcpy(q, p, old_bytes < new_bytes ? old_bytes : new_bytes);
    free(p);
    return q;
}
