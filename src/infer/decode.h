/* decode: search over the model's incremental step (model_step): greedy and beam search.
 *
 * Sentences are decoded in groups of similar length; each step feeds one token per
 * hypothesis through the decoder with cached keys and values. The network is the model's;
 * this layer only chooses tokens. */
#ifndef QKV_DECODE_H
#define QKV_DECODE_H

#include "data/corpus.h"
#include "nn/model.h"

typedef struct {
    int beam;              /* hypotheses kept per sentence; 1 is greedy search */
    int nbest;             /* hypotheses returned per sentence, 1..beam */
    double length_penalty; /* alpha: a finished hypothesis scores log P / length^alpha, length
                              counting its EOS (fairseq's form); 0 ranks by log P alone */
    double max_len_a;      /* at most a * |source| + b target tokens (and the position table) */
    int max_len_b;
    int no_repeat_ngram;   /* > 0: no n-gram of this many tokens twice in one hypothesis */
} DecodeOptions;

/* beam 5, nbest 1, length penalty 1.0, max length 2|src| + 10, repeats allowed. */
DecodeOptions decode_defaults(void);
/* The options' rules for users: 0, or -1 with the error set naming the option. */
int decode_check(const DecodeOptions *o);

/* Longest output for a source of n tokens. */
int decode_max_len(const Model *m, const DecodeOptions *o, int src_len);

/* Translates n source sequences (ids without EOS, each at most cfg.max_positions - 1 long).
 * out has n * o->nbest entries: sentence i's k-th best at out[i * nbest + k], ids
 * allocated, without BOS/EOS. scores (NULL, or n * nbest) gets each one's ranking score
 * (log P / length^alpha). Beam 1 is greedy search and gives greedy_decode's tokens. */
void decode(Model *m, const Seq *src, int n, const DecodeOptions *o, Seq *out, double *scores);

/* Greedy search with the default length limit: decode() with beam 1. */
void greedy_decode(Model *m, const Seq *src, int n, Seq *out);
/* One sentence's greedy translation into tgt, at most max ids (the rest cut, so that it
 * fits the model's positions when forced again); returns the count. */
int greedy_ids(Model *m, int *src, int n_src, int *tgt, int max);

/* Beam search for one group of sentences (beam.c), on st (zeroed, or used by an earlier
 * group; the caller frees it with model_step_end); decode() calls it for beam > 1. */
void beam_search_group(Model *m, DecodeState *st, const Seq *const *src, int n, const DecodeOptions *o,
                       Seq *const *out, double *const *scores);

/* Shared by the searches. The framed sources of a group (ids, EOS, padding; both arrays
 * the caller's to free) and log sum exp of one row of logits. */
void decode_source_batch(const Seq *const *src, int n, int **ids_out, int **len_out, int *width);
double decode_log_normaliser(const float *logits, int V);

#endif
