/* watch: how attention formed over training. With train.watch, the loop records the maps
 * of each watched sentence at step 0 and at every validation (one forward pass each,
 * with the weights of the moment; the training arithmetic is not touched) into
 *
 *   RUN/watch/step-NNNNNNNN.json   {"format": "qkv-watch-1", "step": N,
 *                                   "sentences": [<maps.json object>, ...]}
 *
 * and `qkv attention RUN --watch` reads them back, in step order. A watched sentence
 * with no target force-decodes the model's greedy translation at that step. */
#ifndef QKV_WATCH_H
#define QKV_WATCH_H

#include <stdint.h>

#include "config.h"
#include "data/vocab.h"
#include "infer/attnmap.h"
#include "nn/model.h"

#define WATCH_MAX_SNAPSHOTS 10000

/* Checks every watched sentence can be read by this model: not empty, within its
 * positions, and a given target in the target vocabulary. Words the source vocabulary
 * lacks are listed in *unknown (caller frees; NULL when there are none). -1 with the
 * error set. */
int watch_check(const Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w, int n,
                char **unknown);

/* Captures every watched sentence with m's weights now and writes the snapshot of
 * `step` atomically. -1 with the error set. */
int watch_record(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w, int n, int64_t step,
                 const char *run_dir);

typedef struct {
    int64_t step;
    AttnMaps *sentences; /* (n_sentences) */
} WatchSnapshot;

typedef struct {
    int n_snapshots, n_sentences;
    WatchSnapshot *snap; /* by step */
} WatchLog;

/* Every snapshot in RUN/watch, sorted by step; all must watch the same number of
 * sentences. -1 with the error set (no snapshots is an error that says how to get them). */
int watch_load(const char *run_dir, WatchLog *out);
void watch_free(WatchLog *w);

/* AER of snapshot k against gold, one Pharaoh line per watched sentence (source word
 * i - target word j), read off the last decoder layer's head-averaged cross-attention as
 * `qkv align` does by default. chars: the char tokenizer. -1 with the error set when a
 * line is not Pharaoh. */
int watch_aer(const WatchLog *w, int k, int chars, char **gold, double *aer);

/* The viewer's data (caller frees): {"format": "qkv-watch-view-1", "snapshots": [...],
 * "entropy": [sentence][snapshot][kind][layer][head], "aer": [snapshot] or null}. */
char *watch_view_json(const WatchLog *w, const double *aer);

#endif
