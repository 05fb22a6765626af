/* onnxgraph: an ONNX model written as it is built, one graph of nodes, initializers, inputs
 * and outputs, straight into the protobuf bytes of a ModelProto (onnx.proto's field
 * numbers, IR version 8, the default domain at opset 17: the pair Debian's onnx 1.12 and
 * onnxruntime both read).
 *
 * Values are named by strings the builder owns: a node's output is named from the current
 * scope (onnx_scope) and a counter, or as the caller says. Knows nothing of Transformers
 * (onnx/seq2seq.h builds qkv's model with it) nor of files. */
#ifndef QKV_ONNX_ONNXGRAPH_H
#define QKV_ONNX_ONNXGRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/protobuf.h"

#define ONNX_IR_VERSION 8
#define ONNX_OPSET 17

/* TensorProto.DataType values qkv uses */
enum { ONNX_FLOAT = 1, ONNX_INT64 = 7, ONNX_BOOL = 9 };

typedef struct {
    PbBuf pb;
    size_t graph_mark; /* where the open graph's body starts */
    char scope[128];
    int counter;
    char **names; /* every name handed out, owned */
    int n_names, cap_names;
} OnnxGraph;

/* One dimension of an input or output: a symbolic name (param), else the size value. */
typedef struct {
    const char *param;
    int64_t value;
} OnnxDim;

/* One node attribute: ints (n_ints of them) when set, else a float when is_float, else i. */
typedef struct {
    const char *name;
    int64_t i;
    float f;
    int is_float;
    const int64_t *ints;
    int n_ints;
} OnnxAttr;

/* Starts a model whose one graph is called name; doc (NULL: none) is the model's doc_string. */
void onnx_begin(OnnxGraph *g, const char *name, const char *doc);
/* Closes the graph and the model and hands over the bytes (*data malloc'd, the caller's);
 * g is freed. */
void onnx_finish(OnnxGraph *g, uint8_t **data, size_t *len);
void onnx_free(OnnxGraph *g); /* a graph abandoned before onnx_finish; NULL or finished: no-op */

/* Names the nodes' outputs from now on "<scope>/<op>_<n>" (Netron shows the scopes). */
void onnx_scope(OnnxGraph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A name of the builder's own, formatted: valid until onnx_finish. */
const char *onnx_name(OnnxGraph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The graph's inputs and outputs, in the order declared: a tensor of elem_type and n dims. */
void onnx_input(OnnxGraph *g, const char *name, int elem_type, int n, const OnnxDim *dims);
void onnx_output(OnnxGraph *g, const char *name, int elem_type, int n, const OnnxDim *dims);

/* Initializers (constants held by the graph, as raw little-endian data); each returns the
 * name. A float tensor of ndim dims (ndim 0: a scalar); int64 tensors alike. */
const char *onnx_floats(OnnxGraph *g, const char *name, const float *data, int ndim, const int64_t *dims);
const char *onnx_ints(OnnxGraph *g, const char *name, const int64_t *data, int ndim, const int64_t *dims);
/* An unnamed scalar (a fresh name), and a 1-D int64 list of n. */
const char *onnx_float_scalar(OnnxGraph *g, float v);
const char *onnx_int_scalar(OnnxGraph *g, int64_t v);
const char *onnx_int_list(OnnxGraph *g, int n, const int64_t *v);

/* A node of op_type op over n_in inputs with n_attr attributes; its one output is named out
 * (NULL: a fresh name in the scope), which it returns. */
const char *onnx_node(OnnxGraph *g, const char *op, const char *out, int n_in, const char *const *in, int n_attr,
                      const OnnxAttr *attr);

#endif
