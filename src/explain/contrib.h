/* contrib: where each position's vector came from, through whole attention layers, rolled
 * out over the encoder and the decoder (ALTI, Ferrando et al. 2022, "Measuring the Mixing
 * of Contextual Information in the Transformer"; ALTI+ for encoder-decoders, Ferrando et
 * al. 2022, "Towards Opening the Black Box of Neural Machine Translation").
 *
 * One attention sub-layer's block (attention, residual, and for post-LN the layer norm
 * after them) writes each query row i as a sum of per-input vectors:
 *
 *   key j:     T_ij = L_i( sum_h g_h a^h_ij v^h_j W_O^h )   (v_j with its bias b_V)
 *   residual:  R_i  = L_i( x_i )
 *   the rest:  B_i  = L_i( b_O ) + beta                      (post-LN; b_O for pre-LN)
 *
 * where L_i is the layer norm's linear part at row i, L_i(z) = gamma * (z - mean(z)) *
 * rstd_i, with rstd_i the norm's own 1/sigma of the whole sum (post-LN; the one term left
 * non-linear: sigma is taken from the pass, not split), and the identity for pre-LN,
 * whose norm sits inside the sub-layer: it is applied to x_j before the values (part of
 * what key j sends) and to x_i before the query (it changes the weights only). The
 * vectors sum to the block's output row, out_i = sum_j T_ij + R_i + B_i.
 *
 * The contribution of input j to output i is its L1 proximity to the output, clipped at
 * zero and normalised over the row:
 *
 *   c_ij = max(0, |out_i|_1 - |out_i - T_ij|_1) / sum_k max(0, |out_i|_1 - |out_i - T_ik|_1)
 *
 * For self-attention the residual is position i's own (T_ii + R_i is one input); for
 * cross-attention it is the decoder's prefix, an input of its own beside the source. A
 * row whose every proximity clips to zero gives all of itself to its own position. The
 * feed-forward block mixes no positions and is left out, as in the papers.
 *
 * Rollout: the encoder's R_enc = C_L ... C_1 (S x S, each row a distribution over the
 * source tokens). Each decoder row starts as all of its own input token; a self-attention
 * layer mixes rows, R <- C_self R; a cross-attention layer gives row t's residual share to
 * R_t and each source position's share to that position's R_enc row:
 * R_t <- c_t,res R_t + sum_j c_tj [R_enc,j | 0]. Each row stays a distribution over S
 * source tokens then T target inputs that sums to 1; its source columns' sum is the
 * position's source share. */
#ifndef QKV_EXPLAIN_CONTRIB_H
#define QKV_EXPLAIN_CONTRIB_H

#include "nn/model.h"

/* What each key of sentence b sends through each head per unit of weight, v_j^h W_O^h (v_j
 * with its bias), for every key of the block in the last full pass over padded rows:
 * keys (Tk, heads, d). Every query row of the block reads the same ones. */
void contrib_key_vectors(const Model *m, AttnKind kind, int layer, int b, float *keys);

/* The per-input vectors of query row i of sentence b in one attention block, as the last
 * full pass over padded rows left it (model_forward with train = 0), from the block's
 * contrib_key_vectors: vec (nk + 1, d) gets T_ij for the first nk keys (the rest get
 * nothing: masked keys have weight 0), then R_i; bias (d) gets B_i. Their sum is the
 * block's output row. */
void contrib_vectors(const Model *m, AttnKind kind, int layer, int b, int i, int nk, const float *keys, float *vec,
                     float *bias);

/* c (nk + 1) from nk + 1 vectors (d each) such as contrib_vectors writes: the L1
 * proximities to out (the block's output row), clipped, normalised (the formula above).
 * When every proximity clips to zero, c[own] = 1 and the rest 0. */
void contrib_from_vectors(const float *vec, const float *out, int nk, int d, int own, float *c);

typedef struct {
    int S, T, enc_layers, dec_layers;
    float *enc;      /* (enc_layers, S, S) layer contributions (residual merged into the diagonal) */
    float *dec_self; /* (dec_layers, T, T) the same */
    float *cross;    /* (dec_layers, T, S + 1): source positions, then the residual */
    float *enc_roll; /* (S, S) */
    float *dec_roll; /* (T, S + T): source tokens, then target inputs */
    float *share;    /* (dec_layers, T): each decoder row's source share after each layer */
} Contributions;

/* Every block's contributions and the rollout for sentence 0 of the last full pass over
 * padded rows (model_forward with train = 0), whose source is S positions wide and all
 * valid, target T positions; the arrays are allocated here, freed by contrib_free. */
void contrib_compute(const Model *m, int S, int T, Contributions *c);
/* The arrays of c for these sizes, zeroed. */
void contrib_alloc(Contributions *c, int S, int T, int enc_layers, int dec_layers);
/* enc_roll, dec_roll and share from the layer contributions enc, dec_self and cross. */
void contrib_rollout(Contributions *c);
void contrib_free(Contributions *c);
/* The last decoder layer's cross block in c->cross, (T, S + 1): what align's null decision
 * reads (attention/align_map.h). */
const float *contrib_last_cross(const Contributions *c);

#endif
