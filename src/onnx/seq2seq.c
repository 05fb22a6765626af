/* seq2seq: see seq2seq.h. The math, as nn/ computes it:
 *   embedding   x = table[id] * sqrt(d_model) + pe[position], pe the sinusoid table of
 *               nn/kernels.c (sin on even features, cos on odd, as the model's own rows)
 *   attention   S = (x W_Q + b_Q)(k)^T / sqrt(d_head) per head, masked keys out of the
 *               softmax, O = P V, then W_O, b_O; keys past a source's length are masked,
 *               and the decoder's self-attention sees positions up to its own
 *   sub-layer   post-LN: LN(x + f(x)); pre-LN: x + f(LN(x)), and a final LN per stack
 *   feed-forward relu(x W_1 + b_1) W_2 + b_2; layer norm's epsilon 1e-5
 *   output      logits = h generator^T (the target embedding when tied)
 * Dropout is off, as in every pass qkv decodes with.
 * The graphs take and give the export's ids (onnx/joint_vocab.h): the encoder first maps
 * them to source ids, the decoder to target ids (an id past the target vocabulary, which
 * it never emits, to <unk>), and the logits of those ids are a constant far below any
 * logit a model gives, so that no search picks one and their probability is 0 in float. */
#include "onnx/seq2seq.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "onnx/onnxgraph.h"
#include "util/err.h"
#include "util/mem.h"

/* The logit of an id the model never emits: far below any logit (a model's are tens at
 * most), far above -FLT_MAX, so that a runtime's log-softmax stays finite. */
#define ONNX_NEVER (-1e9f)

/* protobuf's own limit on one message: larger weights need ONNX's external data files */
#define ONNX_MAX_BYTES (2047ull << 20)

/* What every layer of a graph shares: the model, and constants made once. */
typedef struct {
    OnnxGraph g;
    const Model *m;
    const JointVocab *jv;
    const char *split_shape; /* [0, 0, heads, d_head]: (B, T, d) as heads */
    const char *merge_shape; /* [0, 0, d]: back */
    const char *scale;       /* 1 / sqrt(d_head) */
    const char *masked;      /* the score a masked key gets: the lowest float, which exp takes to 0 */
} Build;

static const char *op1(Build *b, const char *op, const char *x) { return onnx_node(&b->g, op, NULL, 1, &x, 0, NULL); }
static const char *op2(Build *b, const char *op, const char *x, const char *y) {
    const char *in[] = {x, y};
    return onnx_node(&b->g, op, NULL, 2, in, 0, NULL);
}
static const char *op3(Build *b, const char *op, const char *x, const char *y, const char *z) {
    const char *in[] = {x, y, z};
    return onnx_node(&b->g, op, NULL, 3, in, 0, NULL);
}
static const char *transpose(Build *b, const char *x, int n, const int64_t *perm) {
    OnnxAttr a = {.name = "perm", .ints = perm, .n_ints = n};
    return onnx_node(&b->g, "Transpose", NULL, 1, &x, 1, &a);
}
/* x[..., i] along axis 0 of a 1-D tensor, or a scalar from a shape */
static const char *element(Build *b, const char *x, int64_t i) {
    return op2(b, "Gather", x, onnx_int_scalar(&b->g, i));
}

/* The model's tensor of that table name as an initializer of the same name. */
static const char *weight(Build *b, const char *name) {
    const TensorInfo *t = model_find_tensor(b->m, name);
    int64_t dims[2] = {t->shape[0], t->shape[1]};
    return onnx_floats(&b->g, name, b->m->params + t->offset, t->ndim, dims);
}

static const char *linear(Build *b, const char *x, const char *prefix, const char *w, const char *bias) {
    char n[128];
    snprintf(n, sizeof n, "%s.%s", prefix, w);
    const char *y = op2(b, "MatMul", x, weight(b, n));
    snprintf(n, sizeof n, "%s.%s", prefix, bias);
    return op2(b, "Add", y, weight(b, n));
}

static const char *layer_norm(Build *b, const char *x, const char *prefix) {
    char w[128], bias[128];
    snprintf(w, sizeof w, "%s.weight", prefix), snprintf(bias, sizeof bias, "%s.bias", prefix);
    const char *in[] = {x, weight(b, w), weight(b, bias)};
    OnnxAttr a[] = {{.name = "axis", .i = -1}, {.name = "epsilon", .f = 1e-5f, .is_float = 1}};
    return onnx_node(&b->g, "LayerNormalization", NULL, 3, in, 2, a);
}

/* (B, T, d) -> (B, heads, T, d_head) */
static const char *split_heads(Build *b, const char *x) {
    static const int64_t perm[] = {0, 2, 1, 3};
    return transpose(b, op2(b, "Reshape", x, b->split_shape), 4, perm);
}

/* One attention sub-layer's output: queries from xq, keys and values k, v already split
 * (B, heads, Tk, d_head); allowed (bool, broadcast to (B, heads, Tq, Tk)) says which keys
 * each query may see; probs (NULL: a name of the graph's choosing) names its weights
 * after the softmax, (B, heads, Tq, Tk), for a graph output. */
static const char *attention(Build *b, const char *prefix, const char *xq, const char *k, const char *v,
                             const char *allowed, const char *probs) {
    static const int64_t keys_t[] = {0, 1, 3, 2}, heads_back[] = {0, 2, 1, 3};
    const char *q = split_heads(b, linear(b, xq, prefix, "w_q", "b_q"));
    const char *s = op2(b, "Mul", op2(b, "MatMul", q, transpose(b, k, 4, keys_t)), b->scale);
    s = op3(b, "Where", allowed, s, b->masked);
    OnnxAttr axis = {.name = "axis", .i = -1};
    const char *p = onnx_node(&b->g, "Softmax", probs, 1, &s, 1, &axis);
    const char *o = transpose(b, op2(b, "MatMul", p, v), 4, heads_back);
    return linear(b, op2(b, "Reshape", o, b->merge_shape), prefix, "w_o", "b_o");
}

static const char *ffn(Build *b, const char *x, const char *prefix) {
    return linear(b, op1(b, "Relu", linear(b, x, prefix, "w_1", "b_1")), prefix, "w_2", "b_2");
}

/* What a sub-layer reads: LN(x) for pre-LN, x for post-LN. */
static const char *sub_in(Build *b, const char *x, const char *norm) {
    return b->m->cfg.pre_norm ? layer_norm(b, x, norm) : x;
}
/* The block's output from its input x and the sub-layer's output y. */
static const char *sub_out(Build *b, const char *x, const char *y, const char *norm) {
    const char *sum = op2(b, "Add", x, y);
    return b->m->cfg.pre_norm ? sum : layer_norm(b, sum, norm);
}

/* token ids (B, T) at positions first (a scalar; NULL: 0) .. first + T - 1, embedded */
static const char *embed(Build *b, const char *table, const char *ids, const char *first) {
    onnx_scope(&b->g, "%s", table);
    const char *e = op2(b, "Mul", op2(b, "Gather", weight(b, table), ids),
                        onnx_float_scalar(&b->g, sqrtf((float)b->m->cfg.d_model)));
    const char *T = element(b, op1(b, "Shape", ids), 1);
    if (!first) first = onnx_int_scalar(&b->g, 0);
    const char *pos = op3(b, "Range", first, op2(b, "Add", first, T), onnx_int_scalar(&b->g, 1));
    const TensorInfo *t = model_find_tensor(b->m, table);
    int64_t dims[] = {b->m->cfg.max_positions, t->shape[1]};
    const char *pe = onnx_floats(&b->g, "positions", b->m->pos_table, 2, dims);
    return op2(b, "Add", e, op2(b, "Gather", pe, pos));
}

/* The export's ids as the encoder's source ids: a Gather through the joint vocabulary's
 * map, unless it is the identity. */
static const char *source_ids(Build *b) {
    const JointVocab *jv = b->jv;
    int identity = jv->size == jv->n_source;
    for (int i = 0; identity && i < jv->size; i++) identity = jv->source_of[i] == i;
    if (identity) return "input_ids";
    onnx_scope(&b->g, "export_ids");
    int64_t *map = xmalloc(sizeof(int64_t) * (size_t)jv->size), n = jv->size;
    for (int i = 0; i < jv->size; i++) map[i] = jv->source_of[i];
    const char *table = onnx_ints(&b->g, "source_id_of_export_id", map, 1, &n);
    free(map);
    return op2(b, "Gather", table, "input_ids");
}

/* The export's ids as target ids: those past the target vocabulary (source-only tokens,
 * never emitted, so never fed back by a search) read as <unk> rather than out of range. */
static const char *target_ids(Build *b) {
    const JointVocab *jv = b->jv;
    if (jv->size == jv->n_target) return "input_ids";
    onnx_scope(&b->g, "export_ids");
    int64_t *map = xmalloc(sizeof(int64_t) * (size_t)jv->size), n = jv->size;
    for (int i = 0; i < jv->size; i++) map[i] = i < jv->n_target ? i : VOCAB_UNK;
    const char *table = onnx_ints(&b->g, "target_id_of_export_id", map, 1, &n);
    free(map);
    return op2(b, "Gather", table, "input_ids");
}

/* logits (B, T, n_target) padded to the export's vocabulary as "logits": the ids past the
 * target vocabulary get ONNX_NEVER, which exp takes to 0 next to any real logit, so their
 * probability is 0 and the target ids' log-probabilities are the model's own. */
static void never_emitted(Build *b, const char *logits) {
    int64_t pads[] = {0, 0, 0, 0, 0, b->jv->size - b->jv->n_target};
    const char *in[] = {logits, onnx_int_list(&b->g, 6, pads), onnx_float_scalar(&b->g, ONNX_NEVER)};
    onnx_node(&b->g, "Pad", "logits", 3, in, 0, NULL);
}

/* an int64 mask (B, S) of 1s and 0s as the keys a query may see: bool (B, 1, 1, S) */
static const char *key_mask(Build *b, const char *mask) {
    static const int64_t axes[] = {1, 2};
    OnnxAttr to = {.name = "to", .i = ONNX_BOOL};
    const char *m = onnx_node(&b->g, "Cast", NULL, 1, &mask, 1, &to);
    return op2(b, "Unsqueeze", m, onnx_int_list(&b->g, 2, axes));
}

static void begin(Build *b, const Model *m, const JointVocab *jv, const char *name, const char *doc) {
    memset(b, 0, sizeof *b);
    b->m = m, b->jv = jv;
    onnx_begin(&b->g, name, doc);
    const ModelConfig *c = &m->cfg;
    int64_t split[] = {0, 0, c->heads, c->d_model / c->heads}, merge[] = {0, 0, c->d_model};
    b->split_shape = onnx_int_list(&b->g, 4, split);
    b->merge_shape = onnx_int_list(&b->g, 3, merge);
    b->scale = onnx_float_scalar(&b->g, 1.0f / sqrtf((float)(c->d_model / c->heads)));
    b->masked = onnx_float_scalar(&b->g, -FLT_MAX);
}

static int finish(Build *b, const char *what, uint8_t **data, size_t *len) {
    onnx_finish(&b->g, data, len);
    if (*len <= ONNX_MAX_BYTES) return 0;
    free(*data), *data = NULL;
    return err_set("the %s graph would be %.2f GiB, over protobuf's 2 GiB for one file; ONNX's external data "
                   "files, which larger models need, are not written yet",
                   what, (double)*len / (1 << 30));
}

static const OnnxDim BATCH = {"batch_size", 0}, SRC_LEN = {"encoder_sequence_length", 0};

int onnx_encoder_model(const Model *m, const JointVocab *jv, uint8_t **data, size_t *len) {
    const ModelConfig *c = &m->cfg;
    Build b;
    begin(&b, m, jv, "qkv encoder", "qkv's Transformer encoder: token ids to the last layer's states");
    OnnxDim ids_dims[] = {BATCH, SRC_LEN}, out_dims[] = {BATCH, SRC_LEN, {NULL, c->d_model}};
    onnx_input(&b.g, "input_ids", ONNX_INT64, 2, ids_dims);
    onnx_input(&b.g, "attention_mask", ONNX_INT64, 2, ids_dims);
    onnx_output(&b.g, "last_hidden_state", ONNX_FLOAT, 3, out_dims);
    const char *x = embed(&b, "encoder.embed_tokens", source_ids(&b), NULL);
    const char *allowed = key_mask(&b, "attention_mask");
    for (int l = 0; l < c->encoder_layers; l++) {
        char p[96], n1[96], n2[96], f[96];
        snprintf(p, sizeof p, "encoder.layers.%d.self_attn", l), snprintf(f, sizeof f, "encoder.layers.%d.ffn", l);
        snprintf(n1, sizeof n1, "encoder.layers.%d.norm1", l), snprintf(n2, sizeof n2, "encoder.layers.%d.norm2", l);
        onnx_scope(&b.g, "%s", p);
        const char *in = sub_in(&b, x, n1);
        const char *k = split_heads(&b, linear(&b, in, p, "w_k", "b_k"));
        const char *v = split_heads(&b, linear(&b, in, p, "w_v", "b_v"));
        x = sub_out(&b, x, attention(&b, p, in, k, v, allowed, NULL), n1);
        onnx_scope(&b.g, "%s", f);
        x = sub_out(&b, x, ffn(&b, sub_in(&b, x, n2), f), n2);
    }
    onnx_scope(&b.g, "encoder");
    if (c->pre_norm) x = layer_norm(&b, x, "encoder.norm");
    onnx_node(&b.g, "Identity", "last_hidden_state", 1, &x, 0, NULL);
    return finish(&b, "encoder", data, len);
}

int onnx_decoder_model(const Model *m, const JointVocab *jv, uint8_t **data, size_t *len) {
    const ModelConfig *c = &m->cfg;
    int H = c->heads;
    Build b;
    begin(&b, m, jv, "qkv decoder",
          "qkv's Transformer decoder, one step or many: new token ids, the encoder's states and the cached keys "
          "and values to the logits and the caches grown");
    OnnxDim tgt_len = {"decoder_sequence_length", 0}, past = {"past_decoder_sequence_length", 0},
            present = {"present_decoder_sequence_length", 0}, dh = {NULL, c->d_model / H};
    OnnxDim ids_dims[] = {BATCH, tgt_len}, enc_dims[] = {BATCH, SRC_LEN, {NULL, c->d_model}},
            mask_dims[] = {BATCH, SRC_LEN}, logits_dims[] = {BATCH, tgt_len, {NULL, jv->size}},
            past_dims[] = {BATCH, {NULL, H}, past, dh}, present_dims[] = {BATCH, {NULL, H}, present, dh};
    onnx_input(&b.g, "input_ids", ONNX_INT64, 2, ids_dims);
    onnx_input(&b.g, "encoder_hidden_states", ONNX_FLOAT, 3, enc_dims);
    onnx_input(&b.g, "encoder_attention_mask", ONNX_INT64, 2, mask_dims);
    for (int l = 0; l < c->decoder_layers; l++)
        for (int kv = 0; kv < 2; kv++)
            onnx_input(&b.g, onnx_name(&b.g, "past_key_values.%d.decoder.%s", l, kv ? "value" : "key"), ONNX_FLOAT, 4,
                       past_dims);
    onnx_output(&b.g, "logits", ONNX_FLOAT, 3, logits_dims);
    for (int l = 0; l < c->decoder_layers; l++)
        for (int kv = 0; kv < 2; kv++)
            onnx_output(&b.g, onnx_name(&b.g, "present.%d.decoder.%s", l, kv ? "value" : "key"), ONNX_FLOAT, 4,
                        present_dims);
    OnnxDim cross_dims[] = {BATCH, {NULL, H}, tgt_len, SRC_LEN};
    for (int l = 0; l < c->decoder_layers; l++)
        onnx_output(&b.g, onnx_name(&b.g, "cross_attentions.%d", l), ONNX_FLOAT, 4, cross_dims);
    /* the first new position is the pasts' length; query i (position first + i) sees the
     * keys at positions up to its own */
    onnx_scope(&b.g, "positions");
    const char *first = element(&b, op1(&b, "Shape", "past_key_values.0.decoder.key"), 2);
    const char *x = embed(&b, "decoder.embed_tokens", target_ids(&b), first);
    onnx_scope(&b.g, "positions");
    const char *T = element(&b, op1(&b, "Shape", "input_ids"), 1), *one = onnx_int_scalar(&b.g, 1);
    const char *end = op2(&b, "Add", first, T);
    static const int64_t col[] = {1};
    const char *q_pos = op2(&b, "Unsqueeze", op3(&b, "Range", first, end, one), onnx_int_list(&b.g, 1, col));
    const char *k_pos = op3(&b, "Range", onnx_int_scalar(&b.g, 0), end, one);
    const char *causal = op2(&b, "LessOrEqual", k_pos, q_pos); /* (T, past + T) */
    const char *src_allowed = key_mask(&b, "encoder_attention_mask");
    for (int l = 0; l < c->decoder_layers; l++) {
        char p[96], x_p[96], f[96], n1[96], n2[96], n3[96];
        snprintf(p, sizeof p, "decoder.layers.%d.self_attn", l),
            snprintf(x_p, sizeof x_p, "decoder.layers.%d.cross_attn", l);
        snprintf(f, sizeof f, "decoder.layers.%d.ffn", l), snprintf(n1, sizeof n1, "decoder.layers.%d.norm1", l);
        snprintf(n2, sizeof n2, "decoder.layers.%d.norm2", l), snprintf(n3, sizeof n3, "decoder.layers.%d.norm3", l);
        onnx_scope(&b.g, "%s", p);
        const char *in = sub_in(&b, x, n1);
        OnnxAttr axis2 = {.name = "axis", .i = 2};
        const char *kin[] = {onnx_name(&b.g, "past_key_values.%d.decoder.key", l),
                             split_heads(&b, linear(&b, in, p, "w_k", "b_k"))};
        const char *vin[] = {onnx_name(&b.g, "past_key_values.%d.decoder.value", l),
                             split_heads(&b, linear(&b, in, p, "w_v", "b_v"))};
        const char *k = onnx_node(&b.g, "Concat", onnx_name(&b.g, "present.%d.decoder.key", l), 2, kin, 1, &axis2);
        const char *v = onnx_node(&b.g, "Concat", onnx_name(&b.g, "present.%d.decoder.value", l), 2, vin, 1, &axis2);
        x = sub_out(&b, x, attention(&b, p, in, k, v, causal, NULL), n1);
        onnx_scope(&b.g, "%s", x_p);
        in = sub_in(&b, x, n2);
        k = split_heads(&b, linear(&b, "encoder_hidden_states", x_p, "w_k", "b_k"));
        v = split_heads(&b, linear(&b, "encoder_hidden_states", x_p, "w_v", "b_v"));
        /* its weights are outputs too: what transformers.js' generate() collects with
         * output_attentions (every output named cross_attentions.*), a step's worth each */
        x = sub_out(&b, x, attention(&b, x_p, in, k, v, src_allowed, onnx_name(&b.g, "cross_attentions.%d", l)), n2);
        onnx_scope(&b.g, "%s", f);
        x = sub_out(&b, x, ffn(&b, sub_in(&b, x, n3), f), n3);
    }
    onnx_scope(&b.g, "generator");
    if (c->pre_norm) x = layer_norm(&b, x, "decoder.norm");
    static const int64_t turn[] = {1, 0};
    /* tied: the embedding's own initializer, turned by a node (onnxruntime folds it once) */
    const char *table = c->tie_embeddings ? "decoder.embed_tokens" : weight(&b, "generator");
    const char *in[] = {x, transpose(&b, table, 2, turn)};
    if (jv->size == c->tgt_vocab) onnx_node(&b.g, "MatMul", "logits", 2, in, 0, NULL);
    else never_emitted(&b, onnx_node(&b.g, "MatMul", NULL, 2, in, 0, NULL));
    return finish(&b, "decoder", data, len);
}
