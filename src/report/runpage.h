/* runpage: RUN/report.html, one page that tells the story of a run, built from what the
 * run directory holds and nothing else: no network resource of any kind, so it opens
 * offline, mailed, years later.
 *
 *   header       name, status (running, stopped at step N, finished), step and epoch,
 *                wall time, the machine (journal.jsonl)
 *   setup        config.yaml with every key that differs from its default marked; the data:
 *                pairs kept and dropped and why, length histograms, vocabularies, the
 *                tokenizer, the unknown-token rate on validation (journal.jsonl)
 *   curves       loss, validation loss and perplexity, BLEU, learning rate, tokens/s against
 *                the step (metrics.jsonl); epochs and resumes marked; values on hover
 *   evaluations  eval.jsonl as a table
 *   samples      the validation samples' translations at each validation (samples.jsonl)
 *   attention    the watched sentences over training: the viewer page (attnview.html)
 *                with the watch view, in a frame
 *   heads        qkv heads' output in RUN/heads: its viewer page and its pruning curve
 *
 * A part the run lacks, or holds cut short (a line cut by a kill), is said in its section;
 * only a report that cannot be written at all is an error. */
#ifndef QKV_REPORT_RUNPAGE_H
#define QKV_REPORT_RUNPAGE_H

typedef struct {
    int running; /* the caller is the run's own training process */
} RunPageOptions;

/* Writes the report of the run in dir to out (NULL: dir/report.html) atomically; *bytes
 * (if given) its size. -1 with the error set. */
int runpage_write(const char *dir, const char *out, const RunPageOptions *o, long *bytes);

#endif
