/* train: the training loop of `qkv train`.
 *
 * Prepares the data (corpora, vocabularies) and the run directory, then runs the steps:
 * batch -> forward -> backward -> clip -> Adam, with logging, validation, progress and
 * metrics.jsonl. Stops cleanly on SIGINT/SIGTERM after the current step. */
#ifndef QKV_TRAIN_H
#define QKV_TRAIN_H

#include <stdint.h>

#include "batch.h"
#include "config.h"
#include "model.h"
#include "optim.h"

/* What one optimisation step needs. */
typedef struct {
    Model *model;
    Adam *adam;
    Batcher *batches;
    LrSchedule sched;
    double clip_norm;
    uint64_t seed; /* dropout masks are keyed by (seed, step) */
} TrainStep;

/* One step: next batch, forward, backward, clip, Adam. Allocates nothing. Returns the
 * batch's mean loss; *tokens gets its real token count and *lr the rate used. */
double train_step(TrainStep *t, int64_t step, int *tokens, double *lr);

/* Returns the process exit status: 0 done, 1 runtime failure, 2 bad input. */
int train_main(Config *cfg, int force);

#endif
