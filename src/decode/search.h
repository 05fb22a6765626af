/* search: what greedy and beam search share: their options, the length limit, the framed
 * sources of a group, and the log-normaliser of one row of logits. Below both searches
 * (decode.c, beam.c), so neither includes the other's header for them. */
#ifndef QKV_SEARCH_H
#define QKV_SEARCH_H

#include "data/corpus.h"
#include "nn/model.h"

/* The beam tree of one sentence: every extension beam search considered at each step (the
 * best 2K of its live hypotheses'), with the hypothesis it extends and what became of it. */
/* kept live, finished by its EOS, dropped, or finished as it was at the length limit */
enum { BEAM_KEPT, BEAM_FINISHED, BEAM_DROPPED, BEAM_AT_LIMIT };
typedef struct {
    int step, parent; /* parent: the node this extends, -1 for the start */
    int token, fate;  /* BEAM_* */
    double logp;      /* log P of the hypothesis with this token */
} BeamNode;
typedef struct {
    BeamNode *nodes; /* malloc'd (beam_trace_free) */
    int n, cap;
} BeamTrace;
void beam_trace_free(BeamTrace *t);

typedef struct {
    int beam;              /* hypotheses kept per sentence; 1 is greedy search */
    int nbest;             /* hypotheses returned per sentence, 1..beam */
    double length_penalty; /* alpha: a finished hypothesis scores log P / length^alpha, length
                              counting its EOS (fairseq's form); 0 ranks by log P alone */
    double max_len_a;      /* at most a * |source| + b target tokens (and the position table) */
    int max_len_b;
    int no_repeat_ngram; /* > 0: no n-gram of this many tokens twice in one hypothesis */
    BeamTrace *trace;    /* NULL, or (beam > 1, one sentence) where beam search records its tree */
} DecodeOptions;

/* beam 5, nbest 1, length penalty 1.0, max length 2|src| + 10, repeats allowed. */
DecodeOptions decode_defaults(void);
/* The options' rules for users: 0, or -1 with the error set naming the option. */
int decode_check(const DecodeOptions *o);

/* Longest output for a source of n tokens. */
int decode_max_len(const Model *m, const DecodeOptions *o, int src_len);

/* The framed sources of a group (ids, EOS, padding; both arrays
 * the caller's to free) and log sum exp of one row of logits. */
void search_source_batch(const Seq *const *src, int n, int **ids_out, int **len_out, int *width);
double search_log_normaliser(const float *logits, int V);

#endif
