/* headprod: the small matrix products of one attention head over one sequence whose
 * result runs along the head's dh columns: P V, and of the backward dV = P^T dO,
 * dQ = dS K, dK = dS^T Q. A few dozen rows by dh columns each.
 *
 * sgemm costs more to set up than these shapes cost to compute: Haswell's kernels in
 * OpenBLAS 0.3.21 have no small-matrix path (one 12 x 32 x 12 product took 0.145 us on a
 * Zen 5 core, 64 GFLOP/s, where sgemm reaches 127 on large matrices). These are plain
 * loops the compiler vectorises, in blocks of four rows by sixteen columns (then 8, 4 and
 * what is left) whose sums stay in registers.
 *
 * Every element of a product is one chain of fused multiply-adds (fmaf) over the inner
 * index in order, from zero, then times alpha: its bits depend neither on the shape nor on
 * where it falls among the blocks, nor on the vector width (fmaf rounds once wherever it
 * runs; a CPU without FMA takes libm's slower fmaf, with the same bits). */
#ifndef QKV_HEADPROD_H
#define QKV_HEADPROD_H

/* How a product's result meets C. */
typedef enum {
    HEAD_SET, /* C = alpha * A . B */
    HEAD_ADD  /* C += alpha * A . B */
} HeadMode;

/* C (m, n) = alpha * A (m, k) . B (k, n), set or added (mode). A's element (i, j) is
 * a[i * a_row + j * a_col], so A^T is the same call with the strides swapped; B's rows are
 * ldb apart and C's ldc apart, each unit-stride along n. */
void head_prod(float *c, int ldc, const float *a, int a_row, int a_col, const float *b, int ldb, int m, int n, int k,
               float alpha, HeadMode mode);

/* The products whose inner index runs along both operands' rows: the scores S = Q K^T and
 * the backward's dP = dO V^T, one head over one sequence. C (m, n) = alpha * A (m, k) .
 * B (n, k)^T, set: A's rows lda apart, B's ldb apart, both unit-stride along k. B is
 * turned in blocks of keys into a small buffer of head_prod's layout, so every element is
 * the same chain as head_prod's. k at most HEAD_PROD_BT_MAX_K. */
enum { HEAD_PROD_BT_MAX_K = 256 };
void head_prod_bt(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m, int n, int k,
                  float alpha);

#endif
