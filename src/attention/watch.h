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

#include "attention/attnmap.h"
#include "config.h"
#include "data/vocab.h"
#include "nn/model.h"

#define WATCH_MAX_SNAPSHOTS 10000

/* Checks every watched sentence can be read by this model: not empty, within its
 * positions, a given target in the target vocabulary, and all of them together within
 * what `qkv attention --watch` reads back (READ_FILE_SMALL): a snapshot's size at most,
 * from the model's shape, the sentences' lengths and, with no target given, a greedy
 * translation as long as the positions allow. Words the source vocabulary lacks are
 * listed in *unknown (caller frees; NULL when there are none). -1 with the error set. */
int watch_check(const Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w, int n,
                char **unknown);

/* The most bytes a snapshot of these sentences can take (what watch_check holds to
 * READ_FILE_SMALL): every number at its longest, every label escaped at its longest. */
double watch_snapshot_bound(const Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w,
                            int n);

/* Measures more of a sentence right after its capture, while the capture's pass is the
 * model's last (the caller's: the source share comes from explain/, above this room). */
typedef void (*WatchMeasure)(Model *m, AttnMaps *a);

/* Captures every watched sentence with m's weights now (and measure, when not NULL) and
 * writes the snapshot of `step` atomically; step 0 first removes every snapshot already
 * there (an earlier run's, train --force). -1 with the error set, and no file larger than
 * the reader takes. */
int watch_record(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w, int n, int64_t step,
                 const char *run_dir, WatchMeasure measure);

typedef struct {
    int64_t step;
    AttnMaps *sentences; /* (n_sentences) */
} WatchSnapshot;

typedef struct {
    int n_snapshots, n_sentences;
    WatchSnapshot *snap; /* by step */
} WatchLog;

/* Every snapshot in RUN/watch, sorted by step; all must watch the same number of
 * sentences, with maps of one model shape (layers, heads, d_head), and hold the step
 * their names say. -1 with the error set, naming the file (no snapshots is an error that
 * says how to get them). */
int watch_load(const char *run_dir, WatchLog *out);
void watch_free(WatchLog *w);

/* Checks gold, one Pharaoh line per watched sentence read from path, before any AER is
 * read off it: every link names a source word of its sentence (in every snapshot) and a
 * target word of the sentence's given target (forced[i]), or, for a sentence translated
 * greedily, whose words change from step to step, one below max_target. -1 with the
 * error set, "path:line: ..." naming the link. tokenizer: the run's, word or char (a
 * snapshot's labels are decoded: subword pieces no longer show where words start). */
int watch_gold_check(const WatchLog *w, int tokenizer, char **gold, const char *path, const int *forced,
                     int max_target);

/* Whether every snapshot of w holds its sentences' last cross-attention block's
 * contributions (AttnMaps.null_from, which training records): what the null decision reads. */
int watch_null_recorded(const WatchLog *w);

/* AER of snapshot k against gold (checked by watch_gold_check; source word i - target
 * word j, a link written twice counted once). With null set (every snapshot holds the
 * contributions: watch_null_recorded), as `qkv align` reads them by default: the last
 * cross-attention block's contributions, with the null decision; without (snapshots
 * recorded before training kept them), the last decoder layer's head-averaged
 * cross-attention, every word linked to its strongest source word (align's --method
 * output --null off). tokenizer: as for
 * watch_gold_check. -1 with the error set when a line is not Pharaoh. */
int watch_aer(const WatchLog *w, int k, int tokenizer, char **gold, int null, double *aer);

/* The viewer's data (caller frees): {"format": "qkv-watch-view-1", "snapshots": [...],
 * "entropy": [sentence][snapshot][kind][layer][head], "aer": [snapshot] or null,
 * "aer_null": true where every snapshot's AER was read with the null decision}. */
char *watch_view_json(const WatchLog *w, const double *aer, int aer_null);

#endif
