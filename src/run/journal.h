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
#ifndef QKV_RUN_JOURNAL_H
#define QKV_RUN_JOURNAL_H

#include <jansson.h>

#include "data/corpus.h"
#include "run/files.h" /* RUN_JOURNAL, RUN_SAMPLES */
#include "run/run.h"

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

/* The line a train (step 0: "event": "start") or a resume ("resume") writes as it begins:
 * "step", "steps" (the goal), "machine" (journal_machine), "data" ({"tokenizer",
 * "src_vocab", "tgt_vocab", "shared_vocab", "train": journal_split, "valid" when valid is
 * not NULL}) and "parameters", appended to r's journal. -1 with the error set. */
int journal_begin(const Run *r, long long step, int ranks, const Corpus *train, const Corpus *valid, size_t parameters);
/* ... and the line it writes as it ends: how ("done", "stopped", "diverged" or "failed"),
 * signal (written when how is "stopped"), error (written when given), the seconds it ran.
 * -1 with the error set. */
int journal_end(const char *dir, long long step, const char *how, int signal, const char *error, double seconds);

#endif
