/* bench_ceiling: the sgemm rate qkv bench divides by (its MFU's denominator), measured
 * the way training multiplies: each training thread runs its own single-threaded product,
 * all at once, meeting at a barrier after each, as the step's threads meet. */
#ifndef QKV_CMD_BENCH_CEILING_H
#define QKV_CMD_BENCH_CEILING_H

#include <stddef.h>

#define CEILING_WARM_S 0.5
#define CEILING_ROUNDS 8

/* What the ceiling's rounds gave: the best rate (GFLOP/s, all threads together), and the
 * median and lowest of the rounds at the size that gave it, so that a reader sees how
 * much the measure moves. */
typedef struct {
    double best, median, low;
} Ceiling;

/* Rounds in which each of threads threads runs one n x n x n sgemm on matrices of its
 * own, for n 1024 and 1536 (the same shapes every time): the FLOPs of a round over its
 * wall time, from the first thread's start to the last one's end. Untimed rounds run
 * first for at least CEILING_WARM_S, so that the clock a core settles at under vector
 * work (AVX-512's lower one, where it has one) is the clock measured, then
 * CEILING_ROUNDS timed ones. OpenBLAS runs one thread a product meanwhile (its count is
 * put back after). All zero when a thread cannot start. */
void bench_ceiling_measure(int threads, Ceiling *c);
/* bench_ceiling_measure's best. */
double bench_ceiling(int threads);
/* "167.3 GFLOP/s (the best of 8 rounds after 0.5 s of warm-up; median 165.0, lowest
 * 160.2: 4.2% below the best)" into buf. */
void ceiling_describe(const Ceiling *c, char *buf, size_t n);

#endif
