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

/* Advice only: where it is refused (no THP, an old kernel) the pages stay small. The range
 * is cut to whole pages inside the buffer, as madvise wants. */
static void advise_huge(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)p + n) & ~(uintptr_t)4095;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

void *xcalloc_big(size_t count, size_t size) {
    void *p = xcalloc(count, size);
    /* calloc maps a large buffer fresh and leaves it untouched (zero pages), so the advice
     * comes before any page exists, and a buffer never written (an inference model's
     * gradients) costs no memory. Huge pages cover each 2 MiB-aligned stretch inside it. */
    if (size && count >= HUGE_PAGE / size) advise_huge(p, count * size);
    return p;
}

void *xrealloc_big(void *p, size_t old_bytes, size_t new_bytes) {
    char *q = xrealloc(p, new_bytes); /* a large buffer grows by mremap: no copy, no second peak */
    if (new_bytes >= HUGE_PAGE) advise_huge(q, new_bytes);
    if (new_bytes > old_bytes) memset(q + old_bytes, 0, new_bytes - old_bytes);
    return q;
}
