/* parallel: one training step split across threads, and across MPI ranks, by batch rows.
 *
 * With n threads the model gets n-1 replicas (same parameters, own gradients and
 * activations). Under R ranks (dist.h) the batch is cut into N = R * n shards: thread t
 * of rank r runs shard r * n + t. Each thread runs forward and backward on its shard's
 * rows with single-threaded OpenBLAS; the parameters are cut into N slices too, and the
 * thread of shard s sums slice s of the gradients over all N shards, in shard order
 * (other ranks' shards arrive by point-to-point transfers: each rank receives every
 * shard's gradients over its own part only), the global norm is clipped, Adam updates
 * the slice, and the ranks then share their updated parts. Dropout masks depend on the
 * batch's rows and the (seed, step) key only, whoever runs them. So results depend only
 * on N: R ranks of n threads give the bits of one process with R * n threads, and a
 * resume with the same N is bit-exact.
 *
 * A shard wider than train.pass_tokens (padded source + target tokens) runs in several
 * passes of fewer rows, each adding to the thread's gradients: activation memory follows
 * the pass, not the batch, and the step's maths is the same (the sums differ only in
 * rounding). On 2 cores splitting rows beats threading inside each matrix
 * product: the products here are small, and the element-wise work runs in parallel too. */
#ifndef QKV_PARALLEL_H
#define QKV_PARALLEL_H

#include <pthread.h>
#include <stdint.h>

#include "config.h"
#include "nn/model.h"
#include "nn/optim.h"

#define PARALLEL_MAX CONFIG_THREADS_MAX

typedef struct Workers Workers;

/* Starts n-1 threads and replicas of m (n = 1: no threads). NULL with the error set
 * when the threads cannot be started (a runtime failure). */
Workers *workers_start(Model *m, Adam *adam, int n, int pass_tokens);
void workers_stop(Workers *w);
int workers_count(const Workers *w);  /* threads of this process */
int workers_shards(const Workers *w); /* threads of every rank: what results depend on */

/* Rows of a B x (S + T) batch that one pass of at most pass_tokens padded tokens runs:
 * at most B, and at least 1 when B > 0 (pass_tokens 0: all B). */
int pass_rows(int pass_tokens, int B, int S, int T);
/* The first row of shard k of n (k = n: B). Shards are contiguous runs of rows about equal
 * in work: the row boundary whose matrix-product FLOPs before it (a source position's and a
 * target position's, from c) are nearest k/n of the batch's, kept at least one row after
 * shard k-1's and leaving one for each shard after; with fewer rows than shards, one row per
 * shard from the first. A training pass computes only each row's real tokens (packed), so
 * equal row counts would leave the shard with the longer sequences last at every barrier.
 * The cut depends on the batch and n alone: every rank and thread computes the same one. */
int shard_first_row(const ModelBatch *b, const ModelConfig *c, int n, int k);
/* The first parameter of each of N slices (begin[N] = n_params): equal to a cache line,
 * whatever the tensors' sizes, so each thread sums and updates as many parameters as the
 * next (Adam's pass takes any range) and no line is written by two threads. */
void param_slices(size_t n_params, int N, size_t *begin);
/* Shard k of n's rows of b (shard_first_row's cut), as a batch of their own. */
ModelBatch shard_batch(const ModelBatch *b, const ModelConfig *c, int n, int k);
/* Rows first .. first+count-1 of b, as a batch of their own (row0 follows them). */
ModelBatch batch_rows(const ModelBatch *b, int first, int count);

/* Arena floats each thread needs for a batch of this shape (the most rows a shard can get). */
size_t workers_arena_floats(const Workers *w, int B, int S, int T);
/* Reserves every replica's arena (the main model's is reserved by the caller). */
void workers_reserve(Workers *w, size_t floats);

/* forward + backward of batch b over all shards, gradients summed into the model,
 * clipped to clip_norm, Adam applied with lr; every rank passes the same batch. *stop
 * carries this process' stop request (a signal number, or 0) in and any rank's out, so
 * all ranks stop after the same step. Returns the mean loss over the batch's target
 * tokens, the same on every rank; NAN with workers_failed set (and the error set) when
 * a transfer between ranks failed. Allocates nothing. */
double workers_step(Workers *w, const ModelBatch *b, uint64_t seed, uint64_t step, double clip_norm, double lr,
                    int *stop);
int workers_failed(const Workers *w);

/* A timeline of the steps (qkv bench): each thread's clock (now_seconds) at its marks.
 * ARRIVE..BEGIN is the wait at the step's start (for the main thread, until every
 * thread is there; for the others, also the main thread's work between steps),
 * SHARD_END..FOLD_BEGIN and FOLD_END..ADAM_BEGIN the waits between phases, ADAM_END..LEAVE
 * the wait at the step's end. */
enum {
    MARK_ARRIVE,
    MARK_BEGIN,
    MARK_SHARD_END,
    MARK_FOLD_BEGIN,
    MARK_FOLD_END,
    MARK_ADAM_BEGIN,
    MARK_ADAM_END,
    MARK_LEAVE,
    N_MARKS
};
/* Records the marks of the next `steps` steps (0: records none, and frees the record).
 * Allocates here, never in a step. */
void workers_record(Workers *w, int steps);
int workers_recorded(const Workers *w); /* steps recorded so far */
/* The N_MARKS times of thread i in recorded step k; for i > 0 LEAVE is 0: it is the
 * thread's ARRIVE of step k + 1 (the main thread's LEAVE where k is the last). */
const double *workers_marks(const Workers *w, int k, int i);
/* Under ranks: seconds per step this rank spent in transfers (waiting for the slowest
 * rank included), and the bytes it sends per step (it receives about as many). */
double workers_comm(const Workers *w, double *bytes_per_step);
/* Under ranks, each rank's Adam moments are current over its own part of the
 * parameters only: this gathers them into rank 0's (which writes checkpoints). Every
 * rank calls it at the same step. -1 with the error set. */
int workers_gather_moments(Workers *w);

#endif
