/* checksum: see checksum.h. */
#include "util/checksum.h"

#include <string.h>

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static void mix_word(uint64_t *h, const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    *h = rotl64(*h ^ (w * 0x9E3779B185EBCA87ull), 31) * 0xC2B2AE3D27D4EB4Full;
}

void checksum_start(Checksum *c, size_t total) { *c = (Checksum){.h = 0x27D4EB2F165667C5ull ^ (uint64_t)total}; }

/* The data's words, 8 bytes at a time, whatever parts they come in: bytes short of a
 * word wait in the carry for the next part. */
void checksum_add(Checksum *c, const void *data, size_t n) {
    const unsigned char *p = data;
    if (c->carried > 0) { /* complete the word the last part began */
        size_t take = 8 - (size_t)c->carried < n ? 8 - (size_t)c->carried : n;
        memcpy(c->carry + c->carried, p, take);
        c->carried += (int)take, p += take, n -= take;
        if (c->carried < 8) return;
        mix_word(&c->h, c->carry), c->carried = 0;
    }
    for (; n >= 8; p += 8, n -= 8) mix_word(&c->h, p);
    if (n > 0) memcpy(c->carry, p, n), c->carried = (int)n; /* the carry is empty here */
}

uint64_t checksum_end(Checksum *c) {
    uint64_t h = c->h;
    for (int i = 0; i < c->carried; i++)
        h = rotl64(h ^ (c->carry[i] * 0x165667B19E3779F9ull), 23) * 0x9E3779B185EBCA87ull;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
}

uint64_t checksum64(const void *data, size_t n) {
    Checksum c;
    checksum_start(&c, n);
    checksum_add(&c, data, n);
    return checksum_end(&c);
}
