/* train: the training loop of `qkv train` and `qkv resume`.
 *
 * Prepares the data (corpora, vocabularies) and the run directory, then runs the steps:
 * batch -> forward -> backward -> clip -> Adam, with logging, validation, progress,
 * metrics.jsonl and checkpoints. SIGINT/SIGTERM finish the current step, write a
 * checkpoint and stop; `qkv resume` continues bit-exactly from the latest checkpoint. */
#ifndef QKV_TRAIN_H
#define QKV_TRAIN_H

#include <stdint.h>

#include "data/batch.h"
#include "config.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "train/parallel.h"

/* What one optimisation step needs. */
typedef struct {
    Workers *workers; /* the model and Adam, over train.threads threads (parallel.h) */
    Batcher *batches;
    LrSchedule sched;
    double clip_norm;
    uint64_t seed; /* dropout masks are keyed by (seed, step) */
} TrainStep;

/* Starts the threads for m and adam and reserves every arena for the largest share of
 * any batch (and for extra_floats on the main model, e.g. validation). */
Workers *train_workers(Model *m, Adam *adam, int threads, const Batcher *b, size_t extra_floats);

/* One step: next batch, forward, backward, clip, Adam. Allocates nothing. Returns the
 * batch's mean loss; *tokens gets its real token count and *lr the rate used. */
double train_step(TrainStep *t, int64_t step, int *tokens, double *lr);

/* `qkv train`: a new run. Returns the exit status: 0 done, 1 runtime failure, 2 bad input. */
int train_main(Config *cfg, int force);
/* `qkv resume`: continue a run from its latest checkpoint; steps > 0 moves the goal. */
int resume_main(const char *run_dir, int steps);

#endif
