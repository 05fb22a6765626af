/* protobuf: see protobuf.h. A nested message is written in place: its tag, then its body;
 * pb_end moves the body up by the length's own size and writes the length in the gap, so
 * a message is built once, whatever it holds, with its length in the shortest varint. */
#include "onnx/protobuf.h"

#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2, PB_FIXED32 = 5 };

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

static int read_varint(PbReader *r, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return -1;
        uint8_t byte = *r->p++;
        *v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) return 0;
    }
    return -1;
}

int pb_next(PbReader *r, PbField *f) {
    if (r->p >= r->end) return 0;
    uint64_t key;
    if (read_varint(r, &key) != 0 || key >> 3 == 0 || key >> 3 > 0x1fffffff) return -1;
    memset(f, 0, sizeof *f);
    f->field = (int)(key >> 3), f->wire = (int)(key & 7);
    size_t left = (size_t)(r->end - r->p);
    switch (f->wire) {
    case PB_VARINT: return read_varint(r, &f->v) == 0 ? 1 : -1;
    case PB_FIXED64:
        if (left < 8) return -1;
        r->p += 8;
        return 1;
    case PB_FIXED32:
        if (left < 4) return -1;
        f->v = (uint64_t)r->p[0] | (uint64_t)r->p[1] << 8 | (uint64_t)r->p[2] << 16 | (uint64_t)r->p[3] << 24;
        r->p += 4;
        return 1;
    case PB_LEN:
        if (read_varint(r, &f->v) != 0 || f->v > (uint64_t)(r->end - r->p)) return -1;
        f->data = r->p, f->len = (size_t)f->v;
        r->p += f->len;
        return 1;
    default: return -1;
    }
}
