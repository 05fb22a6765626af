/* journal: a run's account of itself, kept for `qkv report`.
 *
 *   RUN/journal.jsonl   a line when a train or resume starts ("event": "start" or
 *                       "resume": the step, the machine, the data) and when it ends
 *                       ("end": the step, how, the seconds it ran)
 *   RUN/samples.jsonl   at each validation with BLEU, the sample sentences' greedy
 *                       translations beside their source and reference
 *
 * Each line carries "time" (UTC, ISO 8601). Lines are appended whole and nothing in
 * training reads them back, so a failure to write one costs the report a detail, never
 * the run: callers warn and go on. */
#ifndef QKV_TRAIN_JOURNAL_H
#define QKV_TRAIN_JOURNAL_H

#include <jansson.h>

#include "data/corpus.h"

#define JOURNAL_FILE "journal.jsonl"
#define SAMPLES_FILE "samples.jsonl"

/* {"cpu": the model name, "cores": online CPUs, "host", "openblas": its kernels,
 * "openblas_coretype": OPENBLAS_CORETYPE when the user set it, "openblas_chose": what OpenBLAS
 * picked where qkv chose the kernels instead (util/cpu.h), "threads", "ranks"} */
json_t *journal_machine(int threads, int ranks);
/* One side of the data: {"lines", "pairs", "dropped_empty", "dropped_long", "max_len",
 * "src_tokens", "tgt_tokens", "src_unk", "tgt_unk", "src_lengths": [pairs of each token
 * length 0..max_len], "tgt_lengths": [...]} */
json_t *journal_split(const Corpus *c, int max_len, int unk_id);
/* Appends line (its reference taken) to dir/file with "time" added: -1 with the error set. */
int journal_append(const char *dir, const char *file, json_t *line);

#endif
