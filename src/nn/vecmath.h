/* vecmath: exp, max and sums over float rows, written as plain loops that the compiler
 * turns into vector code (-O3 -march=native), for the kernels' softmaxes and norms.
 *
 * Why not expf and `s += x[i]`: without -ffast-math (which qkv never uses: it breaks the
 * NaN guards) the compiler may not reorder a float sum, so a plain sum is one chain of
 * dependent adds, and glibc's expf is a call per element. Here a sum keeps LANES partial
 * sums (element i goes to lane i % LANES, the lanes are added in order at the end), and exp
 * is a polynomial evaluated in lanes. Every result is the same bit for bit whatever the
 * vector width: the order of every operation is fixed by the source (C11 mode contracts no
 * multiply-add), so scalar, AVX2 and AVX-512 code agree. Nothing here allocates. */
#ifndef QKV_VECMATH_H
#define QKV_VECMATH_H

#include <stddef.h>

#define VEC_LANES 16

/* out[i] = exp(in[i] - shift) for i < n; out may alias in. Relative error below 1e-7
 * (about 1.5 ulp) for arguments in [-87.3, 88]; arguments below -87.3 (-inf included)
 * give 0, above 88 the value at 88. Callers pass shift = the row's maximum, so the
 * arguments are <= 0. */
void vec_exp(float *out, const float *in, float shift, int n);

/* The largest of x[0..n), -inf for n == 0. Exact (a maximum does not depend on order). */
float vec_max(const float *x, int n);

/* vec_max(x, n) and, into *sum, vec_sum_double(x, n): the same bits in one pass over x
 * (a vocabulary's row of logits read once, not twice). */
float vec_max_sum_double(const float *x, int n, double *sum);

/* The first i < n with x[i] == v (-0 and +0 equal), or n if there is none: a row's
 * argmax as vec_max's value found again, a block of VEC_LANES compared at a time. */
int vec_first_equal(const float *x, int n, float v);

/* The sum of x[0..n): in float lanes, and in double lanes (for long rows whose sum must
 * not lose the small terms, a softmax normaliser over a vocabulary). 0 for n == 0. */
float vec_sum(const float *x, int n);
double vec_sum_double(const float *x, int n);

/* The sum of exp(x[i] - shift) (vec_exp's values), in double lanes: a log-softmax's
 * normaliser without storing the exps. */
double vec_sum_exp_double(const float *x, float shift, int n);

/* The sum of x[i]^2 (each square taken in double), in double lanes: a gradient's norm over
 * millions of parameters. Element i goes to lane i % VEC_LANES as everywhere here. */
double vec_sum_squares_double(const float *x, size_t n);

/* Adds x[i]^2 to lane[i % VEC_LANES] (i counted from x): vec_sum_squares_double in pieces.
 * Pieces that are whole multiples of VEC_LANES, taken in order and then summed over the
 * lanes in order, give vec_sum_squares_double's bits for their concatenation. */
void vec_sum_squares_lanes(double lane[VEC_LANES], const float *x, size_t n);

/* The sum of a[i] * b[i], in float lanes. */
float vec_dot(const float *a, const float *b, int n);

/* The sum of (x[i] - m)^2, in float lanes: a variance's numerator, centred first. */
float vec_sum_sq_dev(const float *x, float m, int n);

/* The sum of (a[i] * b[i]) * ((x[i] - m) * r), in float lanes: layer norm's backward
 * projection of the gradient on the normalised input. */
float vec_dot_normed(const float *a, const float *b, const float *x, float m, float r, int n);

#endif
