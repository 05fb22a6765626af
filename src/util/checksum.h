/* checksum: a fast 64-bit checksum of bytes, whole or in parts (checkpoint data). */
#ifndef QKV_UTIL_CHECKSUM_H
#define QKV_UTIL_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* A 64-bit checksum of a byte range (word-at-a-time multiply-rotate mixing); fast
 * enough for checkpoint data, sensitive to every bit. Not cryptographic. */
uint64_t checksum64(const void *data, size_t n);
/* The same checksum over bytes that come in parts (total bytes known first): start, add
 * each part in order, end. Equals checksum64 of the parts laid end to end. */
typedef struct {
    uint64_t h;
    unsigned char carry[8];
    int carried;
} Checksum;
void checksum_start(Checksum *c, size_t total);
void checksum_add(Checksum *c, const void *data, size_t n);
uint64_t checksum_end(Checksum *c);

#endif
