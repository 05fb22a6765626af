/* train: the training loop of `qkv train`.
 *
 * Prepares the data (corpora, vocabularies) and the run directory, then runs the steps:
 * batch -> forward -> backward -> clip -> Adam, with logging, validation, progress and
 * metrics.jsonl. Stops cleanly on SIGINT/SIGTERM after the current step. */
#ifndef QKV_TRAIN_H
#define QKV_TRAIN_H

#include "config.h"

/* Returns the process exit status: 0 done, 1 runtime failure, 2 bad input. */
int train_main(Config *cfg, int force);

#endif
