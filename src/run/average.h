/* average: the mean of a run's newest step checkpoints, weight by weight (as fairseq's
 * average_checkpoints.py computes it): `qkv export --average N`, and train.average_last,
 * which keeps RUN/ckpt/average.safetensors as the run trains. */
#ifndef QKV_RUN_AVERAGE_H
#define QKV_RUN_AVERAGE_H

#include "run/run.h"

/* out (a model of r's shape) gets the mean of the newest n step checkpoints of r's run,
 * each checked as the run's own; *meta (if given) the newest one's metadata (the caller
 * frees it); *paths (if given) the files averaged, oldest first (free_lines(.., *got)).
 * until >= 0: the mean ends at the run's step checkpoint of that step (the one r->weights
 * holds), not at its newest; -1 with the error set when the run keeps none of that step.
 * Each file is opened before any is read, so a train rotating checkpoints meanwhile cannot
 * take one away half-way. Fewer than n there: with partial, the mean of those there are;
 * without, -1 with the error set. *got: how many were averaged. */
int average_newest(const Run *r, int n, int partial, long long until, Model *out, CkptMeta *meta, char ***paths,
                   int *got);

/* RUN/ckpt/average.safetensors from the newest n step checkpoints (fewer while fewer
 * exist), written atomically, weights only. -1 with the error set. */
int average_write(const Run *r, int n);

#endif
