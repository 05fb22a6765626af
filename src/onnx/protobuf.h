/* protobuf: the protocol buffers wire format, written, for the ONNX files qkv exports, and
 * read, for the SentencePiece models whose pieces the export's tokenizer lists.
 *
 * Owns a growing byte buffer and the four things a message is made of: varints, 32-bit
 * floats, length-delimited fields (strings, bytes, packed arrays) and nested messages.
 * Knows nothing of ONNX's messages (onnx/onnxgraph.h names their fields) nor of
 * SentencePiece's (onnx/spm_proto.h).
 * Encodings are the canonical ones (shortest varints, fields in the order written), so the
 * same calls give the same bytes. */
#ifndef QKV_ONNX_PROTOBUF_H
#define QKV_ONNX_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *data;
    size_t len, cap;
} PbBuf;

void pb_free(PbBuf *b); /* pb_free on a zeroed or freed buffer is a no-op */

/* A varint field (wire type 0): int64 values go as their two's complement, as protobuf does. */
void pb_varint_field(PbBuf *b, int field, uint64_t v);
/* A float field (wire type 5), little-endian. */
void pb_float_field(PbBuf *b, int field, float v);
/* A length-delimited field (wire type 2) holding data[0..n). */
void pb_bytes_field(PbBuf *b, int field, const void *data, size_t n);
/* The same with a NUL-terminated string. */
void pb_string_field(PbBuf *b, int field, const char *s);

/* A nested message: pb_begin starts field `field` and returns a mark; what is written until
 * pb_end(b, mark) is its body, whose length pb_end puts in front of it. Marks nest. */
size_t pb_begin(PbBuf *b, int field);
void pb_end(PbBuf *b, size_t mark);

/* Reading: a message's bytes, field by field. */
typedef struct {
    const uint8_t *p, *end;
} PbReader;

typedef struct {
    int field, wire;     /* the field number and wire type (0 varint, 1 fixed64, 2 bytes, 5 fixed32) */
    uint64_t v;          /* a varint's value, or a fixed32's bits */
    const uint8_t *data; /* wire type 2: the bytes, inside the message */
    size_t len;
} PbField;

/* The next field of r into *f: 1, or 0 at the message's end, or -1 when the bytes are
 * not a well-formed message (a field running past the end, a wire type protobuf lacks). */
int pb_next(PbReader *r, PbField *f);

#endif
