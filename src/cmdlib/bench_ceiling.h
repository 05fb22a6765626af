/* bench_ceiling: the sgemm rate qkv bench divides by (its MFU's denominator), measured
 * the way training multiplies: each training thread runs its own single-threaded product,
 * all at once, meeting at a barrier after each, as the step's threads meet. */
#ifndef QKV_CMD_BENCH_CEILING_H
#define QKV_CMD_BENCH_CEILING_H

/* The best rate (GFLOP/s, all threads together) of rounds in which each of threads
 * threads runs one n x n x n sgemm on matrices of its own, for n 1024 and 1536: the
 * FLOPs of a round over its wall time, from the first thread's start to the last one's
 * end. OpenBLAS runs one thread a product meanwhile (its count is put back after). 0 when
 * a thread cannot start. */
double bench_ceiling(int threads);

#endif
