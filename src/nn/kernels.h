/* kernels: the math on plain float arrays, one forward/backward pair per op.
 *
 * Layout is row-major [rows, features]. Backward functions ADD into the gradients they
 * produce (callers zero gradients once per step), except where stated. What a backward
 * needs from its forward (means, inverse stds, probabilities, masks) is passed in
 * explicitly. Nothing here allocates, and nothing here knows about models or files. */
#ifndef QKV_KERNELS_H
#define QKV_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Whether the address-space limit (ulimit -v) leaves room for `callers` threads to
 * multiply matrices at once: OpenBLAS maps a buffer for each (128 MiB in Debian's 0.3.21)
 * and, when it cannot, retries for ever instead of failing. 0, or -1 with a one-line
 * error (a runtime fault, err_status 1) naming the limit and what is needed. */
int blas_room_check(int callers);

/* out (N, Cout) = inp (N, Cin) . w (Cin, Cout) + bias (Cout); bias may be NULL. */
void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int Cin, int Cout);
/* The same against w_panels, w laid out in panels (nn/panels.h), when it is not NULL (w is
 * then not read); else matmul_forward. A decoding step's projections. */
void matmul_forward_with(float *out, const float *inp, const float *w, const float *w_panels, const float *bias, int N,
                         int Cin, int Cout);
/* dinp += dout . w^T; dw += inp^T . dout; dbias += colsum(dout). dinp/dbias may be NULL. */
void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w, int N,
                     int Cin, int Cout);
/* As matmul_backward, but dinp = dout . w^T (overwritten, not added to): the first
 * gradient a buffer gets needs no zeroing pass before it. dinp may not be NULL. */
void matmul_backward_set(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                         int N, int Cin, int Cout);

/* One row: p[0..valid) = softmax(s[0..valid)), p[valid..cols) = 0 exactly (masked keys). */
void softmax_forward(float *p, const float *s, int cols, int valid);
/* One row: ds = p * (dp - sum(dp * p)). Overwrites ds; ds may alias dp. */
void softmax_backward(float *ds, const float *dp, const float *p, int cols);

/* Per row of C features: out = (x - mean) * rstd * gamma + beta; mean/rstd (N) kept. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *gamma, const float *beta,
                       int N, int C);
void layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                        const float *gamma, const float *mean, const float *rstd, int N, int C);
/* The same with d holding dout on entry and dinp on exit (overwritten, not added to): a
 * post-LN residual's norm, whose input gradient has no other contributor. */
void layernorm_backward_inplace(float *d, float *dgamma, float *dbeta, const float *inp, const float *gamma,
                                const float *mean, const float *rstd, int N, int C);

/* out (N, V) = inp (N, C) . table (V, C)^T: the output projection against a table stored
 * one row per class (the target embedding when tied). */
void logits_forward(float *out, const float *inp, const float *table, int N, int C, int V);
/* The same product against the table by column, table_t (C, V) (table_turn makes it):
 * sgemm then packs the table as it lies instead of transposing it, which for a decoding
 * step's few rows against a whole vocabulary is 1.2-1.5 times faster, with the same sums
 * in the same order (the same bits on the Zen, Haswell, SkylakeX and Cooperlake kernels). */
void logits_forward_by_column(float *out, const float *inp, const float *table_t, int N, int C, int V);
/* table_t (C, V) = table (V, C)^T, in blocks that stay in cache. */
void table_turn(float *table_t, const float *table, int V, int C);
/* dinp += dout . table; dtable += dout^T . inp. */
void logits_backward(float *dinp, float *dtable, const float *dout, const float *inp, const float *table, int N, int C,
                     int V);

/* out = max(x, 0); out may alias inp. Backward uses the output: d/dx is 1 where out > 0.
 * It overwrites dinp (which may alias dout): the ReLU is its input's only consumer. */
void relu_forward(float *out, const float *inp, size_t n);
void relu_backward(float *dinp, const float *dout, const float *out, size_t n);

/* Inverted dropout with a counter-based mask: mask[i] is 1 (kept, scaled by 1/(1-p)) or
 * 0 (dropped), a pure function of (key, offset + i), where offset is where out[0] sits in
 * the whole batch's buffer: a part of a batch (a thread's shard, a chunk of it) gets the
 * masks the whole batch would give those rows. One byte each, a quarter of a float mask's
 * memory. p == 0 makes out a copy and the mask all ones. out may alias inp. */
void dropout_forward(float *out, uint8_t *mask, const float *inp, size_t n, float p, uint64_t key, size_t offset);
/* out = dropout(inp) + res, the mask as dropout_forward's: a residual connection's sum in
 * one pass. out may alias inp or res. */
void dropout_residual_forward(float *out, uint8_t *mask, const float *inp, const float *res, size_t n, float p,
                              uint64_t key, size_t offset);
/* dinp = dout * mask / (1-p). Overwrites dinp (which may alias dout): a dropout's input
 * feeds nothing else. */
void dropout_backward(float *dinp, const float *dout, const uint8_t *mask, size_t n, float p);
/* The scale a kept element gets: 1/(1-p), or 1 for p == 0. */
static inline float dropout_scale(float p) { return p > 0.0f ? 1.0f / (1.0f - p) : 1.0f; }

/* out[t] = table[tokens[t]] * scale + pos[t % T]; rows = B*T, C features each. */
void embedding_forward(float *out, const int *tokens, const float *table, const float *pos, float scale, int B, int T,
                       int C);
void embedding_backward(float *dtable, const float *dout, const int *tokens, float scale, int N, int C);

/* Label-smoothed cross-entropy: the target distribution is (1-eps) on the label plus eps/V
 * on every class (PyTorch's definition). Rows whose target is `pad` are skipped.
 * Writes probabilities into probs (may alias logits); returns the summed loss and the
 * number of counted rows in *count. nll_out (may be NULL) gets the summed plain -log p. */
double crossentropy_forward(float *probs, const float *logits, const int *targets, int N, int V, float eps, int pad,
                            int *count, double *nll_out);
/* dlogits = (probs - target distribution) * scale; pad rows get 0. Overwrites dlogits
 * (it may alias probs) because the logits gradient has no other contributor. */
void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int N, int V, float eps, int pad,
                           float scale);
/* Both at once, row by row: the loss as crossentropy_forward returns it, and dlogits as
 * crossentropy_backward writes it after that forward, bit for bit (may alias logits);
 * no probabilities are kept. */
double crossentropy_forward_backward(float *dlogits, const float *logits, const int *targets, int N, int V, float eps,
                                     int pad, float scale, int *count, double *nll_out);

/* Where the fused classifier works: chunk rows at a time, never an (N, V) matrix. */
typedef struct {
    int chunk;
    float *logits;      /* (chunk, V): a chunk's logits, then probabilities, then their gradient */
    float *x, *dx;      /* (chunk, C): the chunk's rows gathered, and their input gradient */
    int *rows, *labels; /* (chunk): where each gathered row came from, and its target */
} ClassifierScratch;

/* The classifier fused: logits = inp . table^T, softmax and label-smoothed cross-entropy
 * (as above), over the rows whose target is not `pad` only: they are gathered chunk rows
 * at a time (padding costs no product and no softmax). Returns the summed loss; *count
 * and *nll_out as crossentropy_forward. With dinp and dtable, also adds the gradients of
 * scale x loss into them (dinp (N, C): nothing into a pad row; dtable (V, C)), each
 * chunk's right after its loss while its probabilities are at hand. */
double classifier_forward_backward(const ClassifierScratch *s, const float *inp, const float *table, const int *targets,
                                   int N, int C, int V, float eps, int pad, int *count, double *nll_out, float *dinp,
                                   float *dtable, float scale);

/* Sinusoidal positions of the paper: pe (T, C). */
void positional_table(float *pe, int T, int C);

#endif
