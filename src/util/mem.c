/* mem: see mem.h. */
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
