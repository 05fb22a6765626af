/* mem: allocation that either succeeds or ends the process (exit 1). */
#ifndef QKV_UTIL_MEM_H
#define QKV_UTIL_MEM_H

#include <stddef.h>

/* Out of memory is a runtime failure (exit 1), not something any caller can repair. */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* p, from an allocator outside qkv (json_dumps), or the same out-of-memory exit when NULL. */
void *xcheck(void *p);
/* Ends the process, as the x* allocators do, for a library that ran out of memory and
 * said so (msg): exit 1 with "qkv: msg". */
void exit_out_of_memory(const char *msg);

#endif
