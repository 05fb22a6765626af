/* corpus_run: qkv explain over a set of sentence pairs, on every core. Each pair is explained
 * (pair.h) and measured (faith.h, and against gold links aligners.h) by one of fanout's
 * workers on its own replica of the model; the per-pair sums are added up in the pairs'
 * order afterwards, so the tables are the same bits whatever the thread count. */
#ifndef QKV_EXPLAIN_CORPUS_RUN_H
#define QKV_EXPLAIN_CORPUS_RUN_H

#include "attention/align_map.h"
#include "data/corpus.h"
#include "explain/faith.h"

typedef struct {
    int n;
    const Seq *src; /* (n) source ids, 1..max_positions - 2 each */
    const Seq *tgt; /* (n) forced targets, or NULL: each source's greedy translation */
    char **gold;    /* NULL, or (n) Pharaoh lines */
    const char *gold_file;
    int null;        /* with gold: the null decision on every method's links (aligners.h) */
    const int *line; /* (n) each pair's line in the files, for messages */
    int tokenizer;
    const Vocab *sv, *tv;
    ExplainOptions eo;
    int random_orders;
} ExplainCorpus;

typedef struct {
    FaithTotals f;
    AlignCounts *aer; /* (f.n_methods) with gold, else NULL */
    double seconds;
} ExplainCorpusResult;

/* 0, or -1 with the error set: the first bad gold line, in order, found before any pair is
 * explained (its links checked against the pair's words; a greedy target's once decoded).
 * progress (may be NULL) after each pair, from any worker, one call at a time. threads:
 * fanout's workers. */
int explain_corpus(Model *m, const ExplainCorpus *in, int threads, void (*progress)(int done, int total, void *arg),
                   void *arg, ExplainCorpusResult *out);
void explain_corpus_free(ExplainCorpusResult *r);

#endif
