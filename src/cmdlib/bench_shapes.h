/* bench_shapes: what sgemm alone does on a training step's own matrix products.
 *
 * The ceiling `qkv bench` divides by is one large square product; a step's products are
 * as many rows as a shard has tokens (a few hundred) by d_model or d_ff. This runs those
 * very shapes, forward and both backward products, on every training thread at once with
 * single-threaded OpenBLAS, as the step runs them, and nothing else: the time the step's
 * products would take if they ran at the rate the library gets on them in isolation
 * (caches warm with their own operands; each shape's fastest of a few runs, the threads
 * starting each shape together). The gap between that and the profiled "matrix
 * products" is what the rest of the step costs the products; the gap between it and the
 * ceiling is the library's rate on these shapes. */
#ifndef QKV_BENCH_SHAPES_H
#define QKV_BENCH_SHAPES_H

#include "nn/model.h" /* ModelConfig */

typedef struct {
    double seconds; /* one pass's matrix products on a thread, the slowest thread's */
    double flops;   /* their FLOPs over all threads (2mnk each) */
} ShapesAlone;

/* One forward-backward pass on each of `threads` threads, over src_rows source and
 * tgt_rows target positions (a pass's mean: train/parallel.c cuts a step into shards and
 * a shard into passes of at most train.pass_tokens). Returns {0, 0} when a thread could
 * not be started (nothing measured). */
ShapesAlone products_alone(const ModelConfig *c, int src_rows, int tgt_rows, int threads);

#endif
