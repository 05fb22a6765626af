/* mem: allocation that either succeeds or ends the process (exit 1). */
#ifndef QKV_UTIL_MEM_H
#define QKV_UTIL_MEM_H

#include <stddef.h>

/* Out of memory is a runtime failure (exit 1), not something any caller can repair. */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* Zeroed memory for a large buffer that is swept end to end every step (weights, their
 * gradients, Adam's moments, the activation arena): from 2 MiB up, advised to Linux as
 * wanting transparent huge pages (MADV_HUGEPAGE, a no-op where they are off or absent),
 * so sgemm's packing and the optimizer's sweeps miss the TLB less. Freed with free(); the
 * same out-of-memory exit as xcalloc. */
void *xcalloc_big(size_t count, size_t size);
/* p (from xcalloc_big, or NULL) grown from old_bytes to new_bytes: the first old_bytes
 * kept, the rest zero, and advised as xcalloc_big's. */
void *xrealloc_big(void *p, size_t old_bytes, size_t new_bytes);
/* p, from an allocator outside qkv (json_dumps), or the same out-of-memory exit when NULL. */
void *xcheck(void *p);
/* Ends the process, as the x* allocators do, for a library that ran out of memory and
 * said so (msg): exit 1 with "qkv: msg". */
void exit_out_of_memory(const char *msg);

#endif
