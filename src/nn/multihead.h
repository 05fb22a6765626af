/* multihead: multi-head attention forward/backward for all three uses.
 *
 *   encoder self-attention:   xq = xkv = encoder stream, keys masked past each source length
 *   decoder masked self:      xq = xkv = decoder stream, causal, keys masked past target length
 *   cross-attention:          xq = decoder stream, xkv = encoder output (Q from the decoder,
 *                             K and V from the encoder), keys masked past source length
 *
 * S = Q K^T / sqrt(d_head), masked keys get probability exactly 0, P = softmax(S),
 * O = P V, out = concat_heads(O) W_O + b_O. The probabilities P are kept: the backward
 * pass needs them and the attention maps are read from them.
 *
 * Head gates (Michel et al. 2019, "Are Sixteen Heads Really Better than One?"): with
 * a->gate set, head h's O is multiplied by gate[h] before W_O, out = sum_h gate[h] O_h
 * W_O^h + b_O, and the backward pass adds dL/dgate[h] = sum P_h . (G_h V_h^T) (G: the
 * gradient at the gated O) into a->dgate. With a->gate NULL the code is the plain one. */
#ifndef QKV_MULTIHEAD_H
#define QKV_MULTIHEAD_H

#include <stddef.h>

typedef struct {
    float *w_q, *b_q; /* (d, d), (d) */
    float *w_k, *b_k; /* (d, d), (d) */
    float *w_v, *b_v; /* (d, d), (d) */
    float *w_o, *b_o; /* (d, d), (d) */
} AttnParams;

/* A packed stream (training): sequence b's positions are rows row[b] .. row[b]+len[b]-1,
 * one sequence after the next, with no padding rows at all; N rows in all. */
typedef struct {
    const int *row, *len; /* (B) */
    int B, N;
} PackedRows;

typedef struct {
    int B, Tq, Tk, d, heads;
    const int *kv_len; /* (B) number of valid keys of each sequence */
    int causal;        /* query i may see keys 0..i only */
    int kv_stride;     /* rows from one sequence's keys to the next's: Tk, or (0) Tk; an
                          incremental decoder's cache holds more rows than it has filled */
    /* NULL: padded streams, sequence b's queries at rows b*Tq.. and keys at b*kv_stride..,
     * every one of the Tq x Tk scores computed (masked keys get probability 0). Set (both
     * or neither): packed streams, and only the q->len[b] x kv_len[b] scores are computed;
     * the rest of P's padded (B, heads, Tq, Tk) block is left as it was. Training only. */
    const PackedRows *q, *kv;
    int kv_share; /* 0 or 1: each sequence reads its own keys. Else (one query row per
                     sequence only) sequences b .. b + kv_share - 1 read the keys of block
                     b / kv_share: beam search's hypotheses of one source */
    int q_pos;    /* the target position of query row 0: 0 in a full pass, t in an
                     incremental step (an intervention names its query by position) */
} AttnShape;

/* Sequence b's first query row and key row, and how many of each a pass computes. */
typedef struct {
    size_t q_row, kv_row;
    int nq, nk;
} AttnSeq;

static inline AttnSeq attention_seq(const AttnShape *s, int b) {
    if (s->q) return (AttnSeq){(size_t)s->q->row[b], (size_t)s->kv->row[b], s->q->len[b], s->kv_len[b]};
    return (AttnSeq){(size_t)b * s->Tq, (size_t)b * (s->kv_stride ? s->kv_stride : s->Tk), s->Tq, s->Tk};
}

/* What-if interventions on one attention sub-layer (explain/), for passes over padded
 * rows, one query row or many; off unless the AttnActs points at one, and then only what
 * is set acts:
 *   pin        the query at position pin_query (AttnShape's q_pos) of head pin_head (every
 *              sequence's) takes the weights pin_weights (Tk) instead of its softmax:
 *              attention pinned; the one intervention an incremental step honours
 *              (model_step_begin copies it), so search follows it;
 *   ctx_from   the heads flagged in ctx_heads (H) take their output before W_O (their
 *              columns of ctx, gated as they were) from ctx_from (B*Tq, d): a head's output
 *              patched in from another run;
 *   ctx_keep   gets ctx as the pass used it (B*Tq, d): what patching copies;
 *   dctx_keep  gets the gradient at ctx in each backward pass (B*Tq, d): with ctx, what
 *              attribution patching multiplies.
 * A pin or a patch changes the forward pass only: a backward pass through a pinned or
 * patched head is not the gradient of the pass it followed. */
typedef struct {
    int pin_head, pin_query;
    const float *pin_weights;
    const float *ctx_from;
    const unsigned char *ctx_heads;
    float *ctx_keep, *dctx_keep;
} AttnIntervene;

typedef struct {
    float *q;          /* (B*Tq, d) */
    float *k;          /* (B*Tk, d); with k_tile, each sequence's keys by column (attn_key_at) */
    float *v;          /* (B*Tk, d) */
    float *p;          /* (B, heads, Tq, Tk) the attention probabilities */
    float *ctx;        /* (B*Tq, d) heads side by side, before W_O */
    float *out;        /* (B*Tq, d) */
    float *scores;     /* NULL, or (B, heads, Tq, Tk): the scaled scores the softmax received,
                          -INFINITY where the key is masked. Only the attention maps ask for
                          them; training leaves it NULL and copies nothing. */
    const float *gate; /* NULL, or (heads) each head's gate: ctx holds the gated O */
    float *dgate;      /* with gate: (heads) dL/dgate, added to by attention_backward */
    float *dgate_rows; /* NULL, or with gate: batch row b's own dL/dgate[h] is added to
                          dgate_rows[b * dgate_stride + h], for b < dgate_nrows */
    int dgate_stride, dgate_nrows;
    const AttnIntervene *iv; /* NULL, or the interventions of this sub-layer (above) */
    int k_tile;              /* 0: keys by row. Else (one query row per sequence only) each sequence's keys
                                are stored by column in tiles of k_tile keys (kv_stride a multiple of it):
                                tile i holds keys i*k_tile.. as (d, k_tile), a column's values side by
                                side, so the scores are summed along the keys in vector code. Decoding's
                                cached keys: cross-attention's in one tile of all S (written once a
                                sentence), self-attention's in tiles of 16, so a prefix of positions is
                                whole tiles, one copy when beams reorder. attn_key_at places key i. */
    const float *panels[4];  /* NULL, or a decoding step's W_Q, W_K, W_V, W_O in panels (nn/panels.h), which
                                its projections then multiply by instead of sgemm; NULL ones use sgemm */
} AttnActs;

/* Where column c of key i sits in a sequence's keys of width d stored with tile (k_tile). */
static inline size_t attn_key_at(int tile, int i, int c, int d) {
    return tile ? (size_t)(i / tile) * tile * d + (size_t)c * tile + (size_t)(i % tile) : (size_t)i * d + c;
}

/* Scratch for the backward pass, shared by all layers (used one layer at a time). */
typedef struct {
    float *dq, *dk, *dv, *dctx; /* (B*Tq, d), (B*Tk, d), (B*Tk, d), (B*Tq, d) */
    float *dp;                  /* (B, heads, Tq, Tk) */
} AttnScratch;

/* xkv NULL: the keys and values are already in a->k and a->v (an incremental decoder's
 * cache, kv_stride rows per sequence); otherwise they are projected from xkv. */
void attention_forward(AttnActs *a, const AttnParams *w, const float *xq, const float *xkv, const AttnShape *s);
/* k = xkv W_K + b_K, v = xkv W_V + b_V over `rows` rows. */
void attention_project_kv(float *k, float *v, const AttnParams *w, const float *xkv, int rows, int d);

/* out (B, heads, Tk): ||v_j W_O^h||, the length of what key j sends to the output
 * through head h per unit of weight (W_O^h: head h's rows of W_O), from the values a
 * forward pass over padded streams left in a. Query i's share of the output from key j
 * through head h is p_ij v_j W_O^h, so its length is p_ij times this. A gated head's is
 * the gate times it. */
void attention_value_norms(float *out, const AttnActs *a, const AttnParams *w, const AttnShape *s);

/* Adds the parameter gradients into g and the input gradients into dxq and dxkv (which
 * may be the same buffer for self-attention). Training shapes only: kv_stride is Tk. */
void attention_backward(AttnParams *g, float *dxq, float *dxkv, const float *dout, const AttnActs *a,
                        const AttnParams *w, const float *xq, const float *xkv, const AttnShape *s,
                        const AttnScratch *scratch);

/* Number of valid keys for query row i of sequence b. */
static inline int attention_valid_keys(const AttnShape *s, int b, int i) {
    int n = s->kv_len[b];
    if (s->causal && i + 1 < n) n = i + 1;
    return n;
}

#endif
