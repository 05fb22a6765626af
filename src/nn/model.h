/* model: the Transformer encoder-decoder of "Attention Is All You Need".
 *
 * Owns the parameter table (one float buffer, named tensors), the activation arena, and
 * the forward and backward passes of the whole model with its loss. Knows nothing of
 * files, vocabularies or configs: it is handed sizes and token ids.
 *
 * Memory: params, grads and the two Adam moments are four buffers of model.n_params
 * floats over the same table. Activations live in one arena reserved up front for the
 * largest batch shape (model_reserve); a training step only carves pointers into it. */
#ifndef QKV_MODEL_H
#define QKV_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "nn/kernels.h"
#include "nn/multihead.h"

#define QKV_MAX_LAYERS 16
/* Rows the classifier gathers and holds logits for at once (kernels.h,
 * classifier_forward_backward). Each chunk packs the output table for its two products and
 * adds into the whole table gradient once, so fewer, larger chunks move less memory: 512
 * rows measured 2.6% faster a Multi30k step than 128 (an 8,000-word table), for 12 MiB more
 * activations a thread. */
#define MODEL_CLASSIFIER_ROWS 512

typedef struct {
    int src_vocab, tgt_vocab;
    int d_model, heads, d_ff;
    int encoder_layers, decoder_layers;
    float dropout;
    int pre_norm;       /* 0: post-LN (the paper), 1: pre-LN */
    int tie_embeddings; /* output projection = target embedding */
    float label_smoothing;
    int max_positions; /* rows of the positional table: longest sequence + BOS/EOS */
    int pad_id;        /* the padding token: targets equal to it carry no loss */
} ModelConfig;

typedef struct {
    float *w, *b;
} NormParams; /* (d), (d) */
typedef struct {
    float *w_1, *b_1, *w_2, *b_2;
} FfnParams; /* (d, ff), (ff), (ff, d), (d) */

typedef struct {
    AttnParams self_attn;
    NormParams norm1;
    FfnParams ffn;
    NormParams norm2;
} EncoderLayerParams;

typedef struct {
    AttnParams self_attn;
    NormParams norm1;
    AttnParams cross_attn;
    NormParams norm2;
    FfnParams ffn;
    NormParams norm3;
} DecoderLayerParams;

typedef struct {
    float *src_embed; /* (src_vocab, d) */
    float *tgt_embed; /* (tgt_vocab, d) */
    float *generator; /* (tgt_vocab, d): logits = h . generator^T; == tgt_embed when tied */
    EncoderLayerParams enc[QKV_MAX_LAYERS];
    DecoderLayerParams dec[QKV_MAX_LAYERS];
    NormParams enc_norm, dec_norm; /* final norms, pre-LN only */
} Params;

typedef struct {
    char name[96];
    int ndim;
    int shape[2];
    size_t offset, size; /* in floats */
} TensorInfo;

/* One residual sub-layer: pre-LN computes x + drop(f(LN(x))), post-LN LN(x + drop(f(x))). */
typedef struct {
    float *ln;          /* (N, d) layer-norm output: the sub-layer input (pre) or the block output (post) */
    float *mean, *rstd; /* (N) */
    uint8_t *mask;      /* (N, d) dropout mask on f's output, one byte each */
    float *sum;         /* (N, d) x + drop(f(.)) */
    float *out;         /* block output: sum (pre) or ln (post) */
} Residual;

typedef struct {
    float *hidden;          /* (N, ff) after ReLU */
    float *out;             /* (N, d) */
    const float *panels[2]; /* NULL, or a decoding step's W_1 and W_2 in panels (AttnActs.panels) */
} FfnActs;

typedef struct {
    Residual r1, r2;
    AttnActs attn;
    FfnActs ffn;
} EncoderLayerActs;

typedef struct {
    Residual r1, r2, r3;
    AttnActs self_attn, cross_attn;
    FfnActs ffn;
} DecoderLayerActs;

typedef struct {
    float *emb, *x;    /* (N, d): scaled embedding + position; after dropout */
    uint8_t *emb_mask; /* (N, d) */
    float *out;        /* (N, d) the stack's output (after the final norm for pre-LN) */
    float *norm_mean, *norm_rstd;
} StackActs;

typedef struct {
    StackActs src, tgt;
    EncoderLayerActs enc[QKV_MAX_LAYERS];
    DecoderLayerActs dec[QKV_MAX_LAYERS];
    ClassifierScratch cls; /* chunks of MODEL_CLASSIFIER_ROWS target rows (kernels.h) */
    /* backward scratch, shared */
    float *d_src, *d_tgt, *d_enc_out; /* stream gradients (N, d) */
    float *d_sub, *d_in;              /* (max N, d) */
    float *d_hidden;                  /* (max N, ff) */
    AttnScratch attn;
    /* A training pass packs each stream: only the real positions are rows (N = the
     * sequences' lengths summed), so no projection, feed-forward, norm or dropout computes
     * padding; attention stays per sequence. src_pk/tgt_pk point at src_rows/tgt_rows,
     * which say where each sequence starts (their len is the batch's src_len/tgt_len), and
     * labels holds tgt_out packed alike. They are NULL for evaluation and decoding, whose
     * rows are the padded (B*T, d) the attention maps and the decoding steps index. */
    const PackedRows *src_pk, *tgt_pk;
    PackedRows src_rows, tgt_rows;
    int *src_first, *tgt_first; /* (B) the rows' first-row arrays */
    int *labels;                /* (B*T) */
} Acts;

/* What the model is fed: token ids (B, S) and (B, T), padded with cfg.pad_id. */
typedef struct {
    int B, S, T;
    const int *src;     /* (B, S) source tokens ending in EOS */
    const int *src_len; /* (B) */
    const int *tgt_in;  /* (B, T) BOS y1 .. yn */
    const int *tgt_out; /* (B, T) y1 .. yn EOS; may be NULL when only decoding */
    const int *tgt_len; /* (B) */
    int row0;           /* the first row's place in the step's whole batch when this is a
                           part of it (a shard, a chunk): dropout masks follow the batch's
                           rows, so a batch drops the same elements however it is cut */
} ModelBatch;

typedef struct {
    ModelConfig cfg;
    TensorInfo *tensors;
    int n_tensors;
    size_t n_params;
    float *params, *grads;
    Params p, g;
    float *pos_table; /* (max_positions, d) */
    float *arena;
    size_t arena_floats;
    Acts a;
    int B, S, T;                      /* the shape the arena is carved for now */
    int lean;                         /* and whether for the encoder alone (model_encode_lean) */
    struct StepWeights *step_weights; /* NULL, or the decoding step's weights laid out, kept by
                                         model_keep_step_weights (shared with replicas) */
    /* results of the last model_forward */
    double loss_sum, nll_sum;
    int n_tokens;
    int loss_tokens;      /* the backward pass divides by this: n_tokens, or a whole batch's when
                             the batch is split across replicas (parallel.c: set it before
                             model_forward_backward) */
    float *decode_logits; /* (B*T, tgt_vocab) of the last model_decode, allocated there */
    size_t decode_logits_floats;
    int is_replica;        /* shares params, table and positions with another Model */
    float dropout_p;       /* the rate the last forward used (0 when not training) */
    int arena_regrowths;   /* shapes that outgrew the reserved arena (0 when reserved right) */
    int classifier_rows;   /* MODEL_CLASSIFIER_ROWS; a test may set fewer before carving */
    float *head_gate;      /* NULL (gating off), or (model_head_count) see model_set_head_gates */
    float *head_gate_grad; /* with head_gate: (model_head_count) dL/dgate */
    float *head_gate_rows; /* NULL, or the caller's (head_gate_nrows, model_head_count): per batch row */
    int head_gate_nrows;
    int keep_padding; /* 1: training passes run over the padded rows too, as evaluation does
                         (a reference for the packed passes' tests) */
    /* Attribution hooks (model_set_embedding_hooks), [0] the source stream, [1] the target's */
    const float *embed_alpha[2]; /* NULL, or (B*S) / (B*T): each row's token embedding factor */
    float *embed_grad[2];        /* NULL, or (B*S, d) / (B*T, d): dL/d(embedded row) */
    /* what-if hooks (model_stream_patch, model_stream_keep_grad) */
    int patch_stream, patch_layer;
    const float *patch_rows;
    const unsigned char *patch_which;
    float *grad_keep[QKV_MAX_LAYERS];
} Model;

/* One kind of matrix product a pass runs over a stream's positions, `count` times: a
 * linear layer of k inputs and m outputs per position (kernels.h matmul_*), or, with
 * classifier set, the output projection of k = d_model against m words (logits_*). */
typedef struct {
    int target; /* over the target positions (else the source's) */
    int classifier;
    int k, m, count;
} ProductShape;
enum { MODEL_PRODUCT_SHAPES = 7 };
/* The matrix products of a pass, per position: the encoder layers' projections and
 * feed-forward and the cross-attention keys and values every decoder layer takes from a
 * source position; the decoder layers' and the output projection over a target position.
 * Attention's own products (length squared) are not in them. Fills out (room for
 * MODEL_PRODUCT_SHAPES) and returns how many. */
int model_product_shapes(const ModelConfig *c, ProductShape *out);
/* Forward FLOPs (2 per multiply-add) of those products for one source and one target
 * position. */
void model_position_flops(const ModelConfig *c, double *src, double *tgt);

/* Builds the table and allocates params and grads (not initialised). -1 on a bad config. */
int model_init(Model *m, const ModelConfig *cfg);
void model_free(Model *m);
/* A second Model over the same parameters with its own gradients and activations, for
 * working on part of a batch on another thread. Freed with model_free. */
void model_init_replica(Model *r, const Model *m);
/* Xavier-uniform matrices, N(0, d^-1/2) embeddings, zero biases, unit norms. */
void model_init_weights(Model *m, uint64_t seed);

/* Grows the arena to at least `floats` (see model_arena_floats); done before training,
 * with the largest need over all batch shapes, so that steps never allocate. */
void model_reserve(Model *m, size_t floats);
/* Floats the arena needs for one shape. */
size_t model_arena_floats(const Model *m, int B, int S, int T);

/* Full forward with loss; returns the mean label-smoothed loss over non-pad targets.
 * train=1 enables dropout with masks keyed by (seed, step) and packs the rows (Acts says
 * how; the result is the padded pass's up to rounding, and each element's dropout mask is
 * the one it has in the padded layout); train=0 keeps the padded rows, as the attention
 * maps read them. */
double model_forward(Model *m, const ModelBatch *b, int train, uint64_t seed, uint64_t step);
/* Backward of the last model_forward; adds into m->grads. The classifier's logits are
 * not kept (they would be (B*T, vocabulary) floats): they are computed again, chunk by
 * chunk. */
void model_backward(Model *m, const ModelBatch *b);
/* A training step's passes: model_forward(train = 1) and model_backward with the
 * classifier's backward fused into its forward (one product fewer), dividing by
 * m->loss_tokens, which must be set before (0: this batch's own count). The same loss and
 * the same gradients, bit for bit, as the two calls. Returns the mean loss. */
double model_forward_backward(Model *m, const ModelBatch *b, uint64_t seed, uint64_t step);
void model_zero_grad(Model *m);

/* For decoding: run the encoder on b->src, then the decoder on b->tgt_in (T columns);
 * afterwards model_logits_at gives the logits of position t of sequence i. */
void model_encode(Model *m, const ModelBatch *b);
void model_decode(Model *m, const ModelBatch *b);
/* The encoder's output alone (acts.src.out), for incremental decoding: every encoder layer
 * runs through one layer's buffers, and nothing for the decoder or a backward pass is
 * carved, so the arena it needs (model_encode_lean_floats) is a fraction of a full
 * pass's. The same output, bit for bit; the layers' own acts are not kept. */
void model_encode_lean(Model *m, const ModelBatch *b);
size_t model_encode_lean_floats(const Model *m, int B, int S);
/* As model_forward(m, b, 0, ...) without the encoder: the decoder and the loss over the
 * encoder output a model_forward(train = 0, padded rows) or model_encode of this same
 * batch left in the arena (head gates may have changed since: only the decoder's apply).
 * The same code as a full forward's second half, bit for bit. */
double model_decode_loss(Model *m, const ModelBatch *b);
const float *model_logits_at(Model *m, int i, int t);
/* out (tgt_vocab): the log-probabilities the last full pass over padded rows (model_forward
 * with train = 0, model_decode) gives at decoder row `row` (sequence i's position t is row
 * i * T + t). */
void model_row_log_probs(const Model *m, int row, float *out);

const TensorInfo *model_find_tensor(const Model *m, const char *name);

/* ---- one attention sub-layer, from outside nn ------------------------------------------------
 * The attention maps and <unk> replacement read what a full forward pass left in one
 * attention sub-layer; they name it by (kind, layer) through these, never by walking the
 * arena or the parameter struct. Layers count from 0 within a kind: ATTN_ENC_SELF has
 * cfg.encoder_layers, the other two cfg.decoder_layers. Rows are queries, columns keys:
 * (Tq, Tk) is (S, S), (T, T) and (T, S) in kind order. */
typedef enum { ATTN_ENC_SELF, ATTN_DEC_SELF, ATTN_CROSS, ATTN_KINDS } AttnKind;

/* The acts (q, k, v, p (B, H, Tq, Tk), ctx) of the last model_forward, or of model_encode
 * (ATTN_ENC_SELF) and model_decode (the decoder kinds); owned by m, the arrays valid until
 * the next pass, model_reserve or model_free. NULL for a kind or layer the model lacks.
 * model_step's incremental decoding keeps its own (DecodeState), but its encoder is a
 * pass (model_encode_lean): after it, none of these hold a full pass's acts. */
const AttnActs *model_attention_acts(const Model *m, AttnKind kind, int layer);
/* The sub-layer's weights: views into m->params, owned by m. NULL as above. */
const AttnParams *model_attention_params(const Model *m, AttnKind kind, int layer);
/* From now until set again (NULL: no more), every full forward pass (model_forward,
 * model_encode, model_decode) also writes the sub-layer's scaled scores, (B, H, Tq, Tk)
 * of the batch it runs, -INFINITY where a key is masked, into `scores`: the caller's
 * buffer, which it keeps owning and must size for each shape it runs. -1 for a kind or
 * layer the model lacks. */
int model_attention_keep_scores(Model *m, AttnKind kind, int layer, float *scores);

/* One attention sub-layer's residual block, as the last full pass over padded rows left it:
 * what the contributions through a whole layer (explain/) decompose. Pre-LN: out = sum =
 * x + attn.out, the sub-layer read LN(x) (mean, rstd, norm). Post-LN: sum = x + attn.out,
 * out = LN(sum) (mean, rstd and norm are that LN's). kv is the stream the keys and values
 * were projected from: the sub-layer's own input (LN(x) for pre-LN, x for post-LN) for
 * self-attention, the encoder output for cross-attention. Views into m, valid until the
 * next pass; rows (B*Tq, d) and (B*Tk, d). */
typedef struct {
    const float *x, *sum, *out, *kv;
    const float *mean, *rstd;
    const float *norm_w, *norm_b;
    int pre_norm;
} AttnBlockView;
/* 0, or -1 for a kind or layer the model lacks. */
int model_attention_block(const Model *m, AttnKind kind, int layer, AttnBlockView *v);

/* Points one sub-layer at its interventions (multihead.h; NULL: none) for every later full
 * pass; iv is the caller's and must outlive them. -1 for a kind or layer the model lacks. */
int model_attention_intervene(Model *m, AttnKind kind, int layer, const AttnIntervene *iv);

/* ---- the residual stream, read, replaced and differentiated (explain/'s what-if) -------------
 * A stream is the encoder's (0) or the decoder's (1); its layer l's output is the stream
 * after that layer's blocks (rows (B*S, d) or (B*T, d) of the last full pass over padded
 * rows). */
const float *model_stream_output(const Model *m, int stream, int layer);
/* From the next full pass on (until called with rows NULL): after layer `layer` of the
 * stream, each row r with which[r] set is replaced by rows[r] (both the caller's, sized
 * for the shapes it runs): the residual stream patched in from another run. One patch at a
 * time. */
void model_stream_patch(Model *m, int stream, int layer, const float *rows, const unsigned char *which);
/* From the next backward pass on (until called with NULL): the gradient of the loss with
 * respect to the encoder's stream after layer `layer` is copied into grad (the caller's,
 * (B*S, d)); each layer's its own buffer. */
void model_stream_keep_grad(Model *m, int layer, float *grad);
/* out (tgt_vocab): the log-probabilities the output projection gives a decoder stream row
 * h (d), through the final norm for pre-LN (the logit lens: what a layer's output would
 * predict); for the last layer's output row, the model's own distribution. */
void model_lens_log_probs(const Model *m, const float *h, float *out);

/* ---- attribution hooks ------------------------------------------------------------------------
 * For full passes over padded rows (model_forward with train = 0, model_backward after it):
 * with alpha set, row r of a stream is embedded as alpha[r] * sqrt(d) * table[token] +
 * position (integrated gradients walks alpha from 0 to 1); with grad set, each backward pass
 * writes dL/d(embedded row r) (the token's scaled embedding plus its position, the stream's
 * input) into grad. Buffers are the caller's, sized for each shape it runs; NULLs turn a
 * hook off. [0] is the source stream, [1] the target's. */
void model_set_embedding_hooks(Model *m, const float *src_alpha, const float *tgt_alpha, float *src_grad,
                               float *tgt_grad);

/* ---- head gates -------------------------------------------------------------------------------
 * A multiplier on each head's output, before W_O, in every attention kind (Michel et al.
 * 2019): what `qkv heads` scores heads with, and --mask-heads masks them with. Not a
 * parameter: never trained, never saved. Off unless set, and off is the plain code path,
 * bit for bit. Heads are numbered kind by kind (ATTN_ENC_SELF, ATTN_DEC_SELF, ATTN_CROSS),
 * then layer, then head: (kind's first layer + layer) * heads + head. */
int model_head_count(const Model *m);
/* The number of (kind, layer, head), or -1 when the model has no such head. */
int model_head_index(const Model *m, AttnKind kind, int layer, int head);
/* Copies gates (model_head_count values) into the model; every later pass (full forward,
 * backward, incremental decoding) applies them. NULL turns gating off. Allocates on the
 * first call only, never in a step. A replica's gates are its own. */
void model_set_head_gates(Model *m, const float *gates);
/* dL/dgate for every head, added to by each backward pass since the last
 * model_zero_grad; NULL while gating is off. */
const float *model_head_gate_grads(const Model *m);
/* Also adds batch row b's own dL/dgate into rows[b * model_head_count + head], for
 * b < nrows, in every later backward pass, until called with NULL (which model_set_head_gates
 * with NULL implies). Sentences in a batch never meet, so row b's is exactly the gradient of
 * sentence b's loss: one batched pass gives per-sentence gradients. The buffer is the
 * caller's (never cleared by model_zero_grad) and must outlive the passes. Needs gates set. */
void model_head_gate_grads_by_row(Model *m, float *rows, int nrows);

/* ---- incremental decoding ----------------------------------------------------------------
 * The decoder run one position at a time over B sequences, for search. Each new position
 * goes through the same attention, residual and feed-forward code as training (one query
 * row per sequence); its self-attention keys and values join a per-layer cache, and the
 * cross-attention keys and values are computed once from the encoder output. */
/* A decoding step's weights as its products read them, laid out once from weights that
 * must not change while it lives. Where panels_enabled() (nn/panels.h): every decoder
 * layer's self-attention W_Q, W_K, W_V, W_O, cross-attention W_Q and W_O (its keys and
 * values are projected once a group), W_1, W_2 and the output table in panels. Elsewhere
 * the output table by column (kernels.h: logits_forward_by_column), and the layers'
 * weights multiplied by sgemm as they lie. */
typedef struct StepWeights {
    float *buf; /* the one allocation behind the pointers below */
    int panels;
    const float *self[QKV_MAX_LAYERS][4], *cross[QKV_MAX_LAYERS][4], *ffn[QKV_MAX_LAYERS][2];
    const float *generator; /* (d_model, tgt_vocab) in panels, or by column */
} StepWeights;

typedef struct {
    int B, S, max_len;                      /* sequences, source width, positions the cache holds (cfg.max_positions) */
    int copies;                             /* decoder rows per source */
    int widen;                              /* rows per source model_step_widen will make (1: done) */
    int t;                                  /* positions fed so far */
    int *src_len, *self_len;                /* (B) keys each query may see */
    DecoderLayerActs layer[QKV_MAX_LAYERS]; /* B rows; self_attn.k/v are the cache (B, max_len, d),
                                               cross_attn.k/v the encoder's (B / copies, S, d):
                                               one block a source, read by its copies rows */
    StackActs tgt;                          /* (B, d) embedding in, decoder output out */
    float *kv_new;                          /* (2, B, d) the new position's keys and values */
    float *logits;                          /* (B, tgt_vocab) of the last step */
    float *scratch;                         /* (2, B, max(max_len, S), d) for copying rows */
    float *buf;                             /* the one allocation behind all of the above */
    size_t buf_floats;
    StepWeights weights;                   /* laid out at the state's first reserve or begin, or the model's
                                              kept ones: the weights must not change while the state lives */
    int weights_kept;                      /* weights are the model's (model_keep_step_weights): not freed */
    AttnIntervene pins[QKV_MAX_LAYERS][2]; /* the model's pins on each decoder layer's self- and
                                              cross-attention when the state began, by position */
    double flops;                          /* matrix-product FLOPs run since the state was zeroed (2mnk each, at the
                                              shapes computed: padded sources, every row of the step): kept across
                                              begins, for decoding's GFLOP/s */
} DecodeState;

/* st must be zeroed before its first begin; it may be begun again for the next group of
 * sentences (its memory is reused) over the same weights, and model_step_end frees it.
 * Runs the encoder on b->src and b->src_len (b->B sources, S wide) and caches every layer's
 * cross-attention keys and values, one decoder row per source, with room for `copies` rows
 * per source (beam search keeps several hypotheses of one sentence) once model_step_widen
 * makes them. Up to cfg.max_positions positions may follow. */
void model_step_begin(Model *m, DecodeState *st, const ModelBatch *b, int copies);
/* Sizes st (zeroed, or used before) and m's arena for groups of up to G sources at most S
 * wide with `copies` rows each, so that no later begin grows them: grown group by group,
 * each growth faulted in fresh pages (the arena's tail zeroed, the state's buffer mapped
 * anew). */
void model_step_reserve(Model *m, DecodeState *st, int G, int S, int copies);
/* Row i becomes rows i*copies .. i*copies+copies-1 (copies as begun), each with row i's
 * caches and last logits, which it returns ((B, tgt_vocab), B now sources * copies): beam
 * search feeds its first position (the same BOS for every hypothesis) once per sentence.
 * The copies share their source's cross-attention keys and values. */
const float *model_step_widen(DecodeState *st, const Model *m);
/* Feeds tokens[i] (B) at the next position of every sequence; returns the logits (B, tgt_vocab). */
const float *model_step(Model *m, DecodeState *st, const int *tokens);
/* Sequence i's cached state becomes a copy of sequence from[i]'s (beam search reorders its
 * hypotheses this way); from is a permutation with repeats allowed. Once widened, every row
 * keeps its source (from[i] / copies == i / copies, as beam search's hypotheses do): the
 * copies of a source share its keys and values. */
void model_step_reorder(DecodeState *st, const Model *m, const int *from);
/* Only rows keep[0..n) (ascending; whole blocks of `copies` rows, a source's rows staying
 * together, as beam search keeps them) go on, as rows 0..n-1: finished sequences leave
 * the batch, and later steps compute n rows, each exactly as it would have been computed
 * beside the others. */
void model_step_keep(DecodeState *st, const Model *m, const int *keep, int n);
void model_step_end(DecodeState *st);
/* Lays out the decoding step's weights (StepWeights) once for every later decoding state
 * of m and its replicas, which would otherwise each lay out their own (12 MiB and a few ms
 * on the Multi30k recipe's model, at every decode call): for a model whose weights no
 * longer change, as a server's. */
void model_keep_step_weights(Model *m); /* on the model itself: a replica's is its parent's */

/* ---- inside nn/ only: the pieces of model.c that the decoding step (incremental.c) runs too,
 * so the step goes through the same layer code as training. model.c and incremental.c define
 * QKV_NN_INTERNAL before including this header; nothing else does. */
#ifdef QKV_NN_INTERNAL
/* The activation arena is carved by a Carver: with base NULL it only counts. */
typedef struct {
    float *base; /* NULL: only count */
    size_t used;
} Carver;
float *carver_take(Carver *cv, size_t n);
void carve_residual(Carver *cv, Residual *r, size_t N, int d, int pre);
void carve_stack(Carver *cv, StackActs *s, size_t N, int d);

/* Dropout of a site: its key, and where this pass's rows start in the whole batch's
 * (N, d) buffer. */
typedef struct {
    uint64_t key;
    size_t offset;
} DropSite;

/* Dropout sites: every mask gets its own key from (seed, step, site); a part of a batch
 * starting at row row0 of width T starts at element row0 * T * d of the batch's buffer. */
typedef struct {
    uint64_t step_key; /* hash64(seed, step) */
    size_t offset;
} DropKeys;
DropSite drop_site(const DropKeys *k, int site);

/* Whether the model has this (kind, layer), and that sub-layer's acts in the arena (NULL
 * when it has not): the one place (kind, layer) is mapped onto the arena. */
int attn_layer_exists(const Model *m, AttnKind kind, int layer);
AttnActs *attn_acts(Model *m, AttnKind kind, int layer);

/* An attention's gate pointers: the model's gates of (kind, layer), or none. */
void point_gates(const Model *m, AttnActs *a, AttnKind kind, int layer);
/* Rows are positions first..first+T-1 of B sequences; with pk, only each sequence's
 * pk->len[b] first positions, packed (and first is 0). */
void stack_embed(const Model *m, StackActs *s, const float *table, const int *tokens, int B, int T, int first, float p,
                 DropSite site, const PackedRows *pk);
/* One decoder layer over the rows of x; with st, incremental (model.c says how). */
const float *decoder_layer_forward(const Model *m, int l, DecoderLayerActs *e, const float *x, const float *mem,
                                   const AttnShape *self, const AttnShape *cross, DecodeState *st, float p,
                                   const DropKeys *keys);
/* The stack's output and all N rows of logits, against the decoding step's output table
 * (StepWeights.generator). */
void decoder_head(const Model *m, StackActs *s, const float *x, int N, const StepWeights *w, float *logits);

#endif /* QKV_NN_INTERNAL */

#endif
