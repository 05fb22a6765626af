/* onnxgraph: see onnxgraph.h. The ModelProto's own fields come first, then its graph (field
 * 7), which stays open while nodes, initializers, inputs and outputs are appended in the
 * order they are made: protobuf keeps the order of a repeated field's elements, and ONNX
 * asks no more than that a node follow the nodes whose outputs it reads. */
#include "onnx/onnxgraph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

/* onnx.proto's field numbers */
enum { MODEL_IR_VERSION = 1, MODEL_PRODUCER_NAME = 2, MODEL_DOC = 6, MODEL_GRAPH = 7, MODEL_OPSET = 8 };
enum { OPSET_VERSION = 2 };
enum { GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12 };
enum { NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5 };
enum { ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20 };
enum { ATTR_TYPE_FLOAT = 1, ATTR_TYPE_INT = 2, ATTR_TYPE_INTS = 7 };
enum { TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW_DATA = 9 };
enum { VALUE_NAME = 1, VALUE_TYPE = 2 };
enum { TYPE_TENSOR = 1, TENSOR_TYPE_ELEM = 1, TENSOR_TYPE_SHAPE = 2 };
enum { SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2 };

void onnx_begin(OnnxGraph *g, const char *name, const char *doc) {
    memset(g, 0, sizeof *g);
    PbBuf *b = &g->pb;
    pb_varint_field(b, MODEL_IR_VERSION, ONNX_IR_VERSION);
    pb_string_field(b, MODEL_PRODUCER_NAME, "qkv");
    if (doc) pb_string_field(b, MODEL_DOC, doc);
    size_t opset = pb_begin(b, MODEL_OPSET); /* the default domain: no domain field */
    pb_varint_field(b, OPSET_VERSION, ONNX_OPSET);
    pb_end(b, opset);
    g->graph_mark = pb_begin(b, MODEL_GRAPH);
    pb_string_field(b, GRAPH_NAME, name);
}

static void free_names(OnnxGraph *g) {
    for (int i = 0; i < g->n_names; i++) free(g->names[i]);
    free(g->names);
    g->names = NULL, g->n_names = g->cap_names = 0;
}

void onnx_finish(OnnxGraph *g, uint8_t **data, size_t *len) {
    pb_end(&g->pb, g->graph_mark);
    *data = g->pb.data, *len = g->pb.len;
    free_names(g);
    memset(g, 0, sizeof *g);
}

void onnx_free(OnnxGraph *g) {
    if (!g) return;
    pb_free(&g->pb);
    free_names(g);
    memset(g, 0, sizeof *g);
}

static const char *keep_name(OnnxGraph *g, char *s) {
    if (g->n_names == g->cap_names) {
        g->cap_names = g->cap_names ? 2 * g->cap_names : 64;
        g->names = xrealloc(g->names, sizeof(char *) * (size_t)g->cap_names);
    }
    return g->names[g->n_names++] = s;
}

static const char *vname(OnnxGraph *g, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = xmalloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
    return keep_name(g, s);
}

const char *onnx_name(OnnxGraph *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *s = vname(g, fmt, ap);
    va_end(ap);
    return s;
}

void onnx_scope(OnnxGraph *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->scope, sizeof g->scope, fmt, ap);
    va_end(ap);
}

/* ValueInfoProto: name and a tensor type of n dims */
static void value_info(OnnxGraph *g, int field, const char *name, int elem_type, int n, const OnnxDim *dims) {
    PbBuf *b = &g->pb;
    size_t vi = pb_begin(b, field);
    pb_string_field(b, VALUE_NAME, name);
    size_t type = pb_begin(b, VALUE_TYPE), tensor = pb_begin(b, TYPE_TENSOR);
    pb_varint_field(b, TENSOR_TYPE_ELEM, (uint64_t)elem_type);
    size_t shape = pb_begin(b, TENSOR_TYPE_SHAPE);
    for (int i = 0; i < n; i++) {
        size_t dim = pb_begin(b, SHAPE_DIM);
        if (dims[i].param) pb_string_field(b, DIM_PARAM, dims[i].param);
        else pb_varint_field(b, DIM_VALUE, (uint64_t)dims[i].value);
        pb_end(b, dim);
    }
    pb_end(b, shape), pb_end(b, tensor), pb_end(b, type), pb_end(b, vi);
}

void onnx_input(OnnxGraph *g, const char *name, int elem_type, int n, const OnnxDim *dims) {
    value_info(g, GRAPH_INPUT, name, elem_type, n, dims);
}

void onnx_output(OnnxGraph *g, const char *name, int elem_type, int n, const OnnxDim *dims) {
    value_info(g, GRAPH_OUTPUT, name, elem_type, n, dims);
}

/* data: count elements of `size` bytes, already little-endian (qkv runs on little-endian
 * machines only, as its checkpoints' raw data assumes) */
static const char *initializer(OnnxGraph *g, const char *name, int type, const void *data, size_t size, int ndim,
                               const int64_t *dims) {
    PbBuf *b = &g->pb;
    size_t count = 1;
    for (int i = 0; i < ndim; i++) count *= (size_t)dims[i];
    size_t t = pb_begin(b, GRAPH_INITIALIZER);
    for (int i = 0; i < ndim; i++) pb_varint_field(b, TENSOR_DIMS, (uint64_t)dims[i]);
    pb_varint_field(b, TENSOR_DATA_TYPE, (uint64_t)type);
    pb_string_field(b, TENSOR_NAME, name);
    pb_bytes_field(b, TENSOR_RAW_DATA, data, count * size);
    pb_end(b, t);
    return name;
}

const char *onnx_floats(OnnxGraph *g, const char *name, const float *data, int ndim, const int64_t *dims) {
    return initializer(g, onnx_name(g, "%s", name), ONNX_FLOAT, data, sizeof(float), ndim, dims);
}

const char *onnx_ints(OnnxGraph *g, const char *name, const int64_t *data, int ndim, const int64_t *dims) {
    return initializer(g, onnx_name(g, "%s", name), ONNX_INT64, data, sizeof(int64_t), ndim, dims);
}

const char *onnx_float_scalar(OnnxGraph *g, float v) {
    return onnx_floats(g, onnx_name(g, "%s/const_%d", g->scope, g->counter++), &v, 0, NULL);
}

const char *onnx_int_scalar(OnnxGraph *g, int64_t v) {
    return onnx_ints(g, onnx_name(g, "%s/const_%d", g->scope, g->counter++), &v, 0, NULL);
}

const char *onnx_int_list(OnnxGraph *g, int n, const int64_t *v) {
    int64_t dim = n;
    return onnx_ints(g, onnx_name(g, "%s/const_%d", g->scope, g->counter++), v, 1, &dim);
}

const char *onnx_node(OnnxGraph *g, const char *op, const char *out, int n_in, const char *const *in, int n_attr,
                      const OnnxAttr *attr) {
    PbBuf *b = &g->pb;
    if (!out) out = onnx_name(g, "%s/%s_%d", g->scope, op, g->counter++);
    size_t node = pb_begin(b, GRAPH_NODE);
    for (int i = 0; i < n_in; i++) pb_string_field(b, NODE_INPUT, in[i]);
    pb_string_field(b, NODE_OUTPUT, out);
    pb_string_field(b, NODE_NAME, out);
    pb_string_field(b, NODE_OP_TYPE, op);
    for (int i = 0; i < n_attr; i++) {
        const OnnxAttr *a = &attr[i];
        size_t at = pb_begin(b, NODE_ATTRIBUTE);
        pb_string_field(b, ATTR_NAME, a->name);
        if (a->ints) {
            for (int k = 0; k < a->n_ints; k++) pb_varint_field(b, ATTR_INTS, (uint64_t)a->ints[k]);
            pb_varint_field(b, ATTR_TYPE, ATTR_TYPE_INTS);
        } else if (a->is_float) {
            pb_float_field(b, ATTR_F, a->f);
            pb_varint_field(b, ATTR_TYPE, ATTR_TYPE_FLOAT);
        } else {
            pb_varint_field(b, ATTR_I, (uint64_t)a->i);
            pb_varint_field(b, ATTR_TYPE, ATTR_TYPE_INT);
        }
        pb_end(b, at);
    }
    pb_end(b, node);
    return out;
}
