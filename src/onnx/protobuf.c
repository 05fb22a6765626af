/* protobuf: see protobuf.h. A nested message is written in place: its tag, then its body;
 * pb_end moves the body up by the length's own size and writes the length in the gap, so
 * a message is built once, whatever it holds, with its length in the shortest varint. */
#include "onnx/protobuf.h"

#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

enum { PB_VARINT = 0, PB_LEN = 2, PB_FIXED32 = 5 };

void pb_free(PbBuf *b) {
    if (!b) return;
    free(b->data);
    memset(b, 0, sizeof *b);
}

static uint8_t *room(PbBuf *b, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        b->data = xrealloc(b->data, cap);
        b->cap = cap;
    }
    return b->data + b->len;
}

static int varint_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

static void put_varint(uint8_t *at, uint64_t v) {
    while (v >= 0x80) *at++ = (uint8_t)(v | 0x80), v >>= 7;
    *at = (uint8_t)v;
}

static void varint(PbBuf *b, uint64_t v) {
    put_varint(room(b, 10), v);
    b->len += (size_t)varint_size(v);
}

static void tag(PbBuf *b, int field, int wire) { varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

void pb_varint_field(PbBuf *b, int field, uint64_t v) {
    tag(b, field, PB_VARINT);
    varint(b, v);
}

void pb_float_field(PbBuf *b, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    tag(b, field, PB_FIXED32);
    uint8_t *at = room(b, 4);
    for (int i = 0; i < 4; i++) at[i] = (uint8_t)(u >> (8 * i));
    b->len += 4;
}

void pb_bytes_field(PbBuf *b, int field, const void *data, size_t n) {
    tag(b, field, PB_LEN);
    varint(b, n);
    if (n) memcpy(room(b, n), data, n);
    b->len += n;
}

void pb_string_field(PbBuf *b, int field, const char *s) { pb_bytes_field(b, field, s, strlen(s)); }

size_t pb_begin(PbBuf *b, int field) {
    tag(b, field, PB_LEN);
    return b->len;
}

void pb_end(PbBuf *b, size_t mark) {
    size_t n = b->len - mark;
    int k = varint_size(n);
    room(b, (size_t)k);
    memmove(b->data + mark + k, b->data + mark, n);
    put_varint(b->data + mark, n);
    b->len += (size_t)k;
}
