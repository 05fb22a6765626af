/* headprod: see headprod.h. */
#include "nn/headprod.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* A block is BR rows of C by BC columns: 64 sums, eight AVX2 registers (four AVX-512);
 * the columns a head has past its blocks of BC go in blocks of 8, then 4, then what is
 * left. Measured on a Zen 5 host, P V for a head of 32 columns over 12 and 24 rows, one
 * call: 4 x 16 blocks 0.070 and 0.25 us, 4 x 32 0.12 and 0.43, 8 x 16 0.096 and 0.22; a
 * head of 24 over 12 rows took 0.141 us with its last 8 columns in a loop of variable
 * width (the sums then live in memory), 0.066 in a block of 8. */
enum { BR = 4, BC = 16 };

/* Rows i.. of A, up to BR of them, as BR row pointers: a short block repeats its last row
 * (computed, never stored), so every block runs the same unrolled loop and reads no row
 * past the end. */
static void block_rows(const float *rows_at[BR], const float *a, int a_row, int i, int rows) {
    for (int r = 0; r < BR; r++) rows_at[r] = a + (size_t)(i + (r < rows ? r : rows - 1)) * a_row;
}

/* C's row = alpha * sums, or += (mode), its first `cols` columns. */
static inline void store_row(float *c, const float *sums, float alpha, HeadMode mode, int cols) {
    if (mode == HEAD_SET)
        for (int e = 0; e < cols; e++) c[e] = alpha * sums[e];
    else
        for (int e = 0; e < cols; e++) c[e] += alpha * sums[e];
}

/* One block: C's `rows` rows by `width` columns, width columns of B read from b (rows ldb
 * apart). Inlined into head_prod with width a constant, each copy keeps its sums in
 * registers (a width known only at run time keeps them in memory). */
static inline __attribute__((always_inline)) void block(float *c, int ldc, const float *const rows_at[BR], int a_col,
                                                        const float *b, int ldb, int k, float alpha, HeadMode mode,
                                                        int rows, int width) {
    /* a named array a row, one loop over the columns: the form the vectoriser takes whole */
    float acc0[BC] = {0.0f}, acc1[BC] = {0.0f}, acc2[BC] = {0.0f}, acc3[BC] = {0.0f};
    const float *a0 = rows_at[0], *a1 = rows_at[1], *a2 = rows_at[2], *a3 = rows_at[3];
    for (int j = 0; j < k; j++) {
        const float *bj = b + (size_t)j * ldb;
        size_t at = (size_t)j * a_col;
        float x0 = a0[at], x1 = a1[at], x2 = a2[at], x3 = a3[at];
        for (int e = 0; e < width; e++) {
            acc0[e] = fmaf(x0, bj[e], acc0[e]);
            acc1[e] = fmaf(x1, bj[e], acc1[e]);
            acc2[e] = fmaf(x2, bj[e], acc2[e]);
            acc3[e] = fmaf(x3, bj[e], acc3[e]);
        }
    }
    /* row by row by name: an array of pointers to the sums would keep them in memory */
    store_row(c, acc0, alpha, mode, width);
    if (rows > 1) store_row(c + ldc, acc1, alpha, mode, width);
    if (rows > 2) store_row(c + 2 * (size_t)ldc, acc2, alpha, mode, width);
    if (rows > 3) store_row(c + 3 * (size_t)ldc, acc3, alpha, mode, width);
}

void head_prod_bt(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m, int n, int k,
                  float alpha) {
    float bt[HEAD_PROD_BT_MAX_K * BC]; /* (k, BC): a block of B's rows as columns */
    for (int j0 = 0; j0 < n; j0 += BC) {
        int w = n - j0 < BC ? n - j0 : BC, padded = w % 4 != 0;
        /* a padded block (below) has zeros in its missing columns: bt's rows are zeroed
         * first, a vector store or two each (the few zeros column by column cost more than
         * the products) */
        for (int e = 0; padded && e < k; e++) memset(bt + e * BC, 0, sizeof(float) * BC);
        for (int j = 0; j < w; j++)
            for (int e = 0; e < k; e++) bt[e * BC + j] = b[(size_t)(j0 + j) * ldb + e];
        if (!padded) {
            head_prod(c + j0, ldc, a, lda, 1, bt, BC, m, w, k, alpha, HEAD_SET);
            continue;
        }
        /* A last block of keys not a multiple of 4 wide (most sequences' last): the whole
         * width of 16 is computed, a tile of rows at a time, and its w columns kept, instead
         * of blocks of 8 and 4 and one of a width known only at run time, which keeps its
         * sums in memory. 10 keys of a head of 32 took 0.60 us that way, 0.45 like this; 14
         * keys 1.55 and 0.50. Each kept element is the same chain as before: the zero
         * columns are sums of their own. */
        enum { TILE = 32 };
        float tile[TILE * BC];
        for (int i0 = 0; i0 < m; i0 += TILE) {
            int rows = m - i0 < TILE ? m - i0 : TILE;
            head_prod(tile, BC, a + (size_t)i0 * lda, lda, 1, bt, BC, rows, BC, k, alpha, HEAD_SET);
            for (int i = 0; i < rows; i++) {
                float *ci = c + (size_t)(i0 + i) * ldc + j0;
                for (int j = 0; j < BC; j++) /* the full width, masked: no string copy */
                    if (j < w) ci[j] = tile[i * BC + j];
            }
        }
    }
}

void head_prod(float *c, int ldc, const float *a, int a_row, int a_col, const float *b, int ldb, int m, int n, int k,
               float alpha, HeadMode mode) {
    for (int i = 0; i < m; i += BR) {
        int rows = m - i < BR ? m - i : BR;
        const float *rows_at[BR];
        block_rows(rows_at, a, a_row, i, rows);
        float *ci = c + (size_t)i * ldc;
        /* blocks of BC columns, then 8 and 4 (a head of 8, 12 or 24 ends in them), then the
         * fewer than 4 left */
        int e = 0;
        for (; e + BC <= n; e += BC) block(ci + e, ldc, rows_at, a_col, b + e, ldb, k, alpha, mode, rows, BC);
        if (e + 8 <= n) block(ci + e, ldc, rows_at, a_col, b + e, ldb, k, alpha, mode, rows, 8), e += 8;
        if (e + 4 <= n) block(ci + e, ldc, rows_at, a_col, b + e, ldb, k, alpha, mode, rows, 4), e += 4;
        if (e < n) block(ci + e, ldc, rows_at, a_col, b + e, ldb, k, alpha, mode, rows, n - e);
    }
}
