/* parallel: one training step split across threads by batch rows.
 *
 * With n threads the model gets n-1 replicas (same parameters, own gradients and
 * activations). Each thread runs forward and backward on its share of the batch's rows
 * with single-threaded OpenBLAS; then each sums its slice of the gradients across
 * replicas, the global norm is clipped, and each applies Adam to its slice. On 2 cores
 * this beats threading inside each matrix product: the products here are small, and
 * all the element-wise work runs in parallel too. Results depend only on n (the order
 * of every sum is fixed), so a resume with the same thread count is bit-exact. */
#ifndef QKV_PARALLEL_H
#define QKV_PARALLEL_H

#include <pthread.h>
#include <stdint.h>

#include "nn/model.h"
#include "nn/optim.h"

#define PARALLEL_MAX 16

typedef struct Workers Workers;

/* Starts n-1 threads and replicas of m (n = 1: no threads). NULL with the error set
 * when the threads cannot be started (a runtime failure). */
Workers *workers_start(Model *m, Adam *adam, int n);
void workers_stop(Workers *w);
int workers_count(const Workers *w);

/* Arena floats each thread needs for a batch of this shape (the largest share). */
size_t workers_arena_floats(const Workers *w, int B, int S, int T);
/* Reserves every replica's arena (the main model's is reserved by the caller). */
void workers_reserve(Workers *w, size_t floats);

/* forward + backward of batch b over all threads, gradients summed into the model,
 * clipped to clip_norm, Adam applied with lr. Returns the mean loss over the batch's
 * target tokens. Allocates nothing. */
double workers_step(Workers *w, const ModelBatch *b, uint64_t seed, uint64_t step, double clip_norm, double lr);

#endif
