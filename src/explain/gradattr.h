/* gradattr: exact gradient attributions of each target token over the source and the
 * target prefix, from the model's own backward pass (no second implementation of any
 * layer; the gradients are the ones training uses, checked against finite differences).
 *
 * For decoder position t (which predicts y_t = tgt_out[t]) the explained quantity is
 * f_t = log p(y_t | source, prefix), or with a foil word f_t = log p(y_t) - log p(foil)
 * (contrastive: "why y_t and not the foil"). The inputs are each stream's embedded rows
 * x_j = e_j + pos_j, where e_j = sqrt(d) * table[token_j] is the token's part; positions
 * are not the token's and stay out of every attribution:
 *
 *   saliency          |df_t/dx_j|_2
 *   input x gradient  e_j . df_t/dx_j: signed, the first-order change of f_t when the token
 *                     is blanked; a token that speaks against y_t scores below 0 and ranks
 *                     last
 *   its magnitude     |e_j * df_t/dx_j|_2, the L2 norm over the embedding of the
 *                     elementwise product (Inseq's aggregation): a token ranks by how much
 *                     it moves f_t, either way
 *   integrated grads  e_j . (1/m) sum_k df_t/dx_j at x = (k + 1/2)/m * e + pos, k < m
 *                     (the midpoint rule from the baseline of every token embedding 0,
 *                     positions kept; Sundararajan et al. 2017)
 *
 * A foil that is y_t itself makes f_t = 0 for any input: that row's attributions are set to
 * exactly 0 (its gradient; two passes' rounding would otherwise rank noise) and foil_is_word
 * says so.
 *
 * Completeness: the integrated gradients of a row sum to f_t(x) - f_t(baseline) up to the
 * rule's error, which is reported (ig_error). Columns are the S source positions, then
 * the T decoder inputs (BOS, y_1, ...); row t's columns past S + t are 0 (the causal mask
 * hides those inputs). */
#ifndef QKV_EXPLAIN_GRADATTR_H
#define QKV_EXPLAIN_GRADATTR_H

#include "nn/model.h"

typedef struct {
    int S, T, ig_steps, foil;
    float *saliency, *input_x_grad, *input_x_grad_l2, *ig; /* (T, S + T) each */
    double *f, *f_base, *ig_error; /* (T): f_t, f_t at the baseline, sum(ig row) - (f - f_base) */
    unsigned char *foil_is_word;   /* (T): 1 where the foil is y_t (f_t, f_base, the row and with steps ig_error 0) */
} GradAttr;

/* One sentence pair framed for the model (batch_frame_source/target): src (S), tin and
 * tout (T). foil: -1, or a target-vocabulary id. ig_steps: 0 leaves ig 0 and ig_error NAN. The model's label
 * smoothing is set aside while this runs (f is the plain log-probability) and put back;
 * its parameter gradients are left zeroed. Fills g (gradattr_free frees it). */
void gradattr_compute(Model *m, const int *src, int S, const int *tin, const int *tout, int T, int foil, int ig_steps,
                      GradAttr *g);
void gradattr_free(GradAttr *g);

#endif
