/* decode: translation by search over the model's incremental step (model_step): greedy
 * search here, beam search (beam.h) for beam > 1.
 *
 * Sentences are decoded in groups of similar length; each step feeds one token per
 * hypothesis through the decoder with cached keys and values. The network is the model's;
 * this layer only chooses tokens. */
#ifndef QKV_DECODE_H
#define QKV_DECODE_H

#include "data/corpus.h"
#include "decode/search.h"
#include "nn/model.h"

/* Translates n source sequences (ids without EOS, each at most cfg.max_positions - 1 long).
 * out has n * o->nbest entries: sentence i's k-th best at out[i * nbest + k], ids
 * allocated, without BOS/EOS. scores (NULL, or n * nbest) gets each one's ranking score
 * (log P / length^alpha). Beam 1 is greedy search and gives greedy_decode's tokens. */
void decode(Model *m, const Seq *src, int n, const DecodeOptions *o, Seq *out, double *scores);
/* decode(), also setting *flops to the FLOPs of every matrix product it ran (nn/model.h's
 * DecodeState.flops summed over the workers): what `qkv bench` divides by the time. */
void decode_counting(Model *m, const Seq *src, int n, const DecodeOptions *o, Seq *out, double *scores, double *flops);

/* Greedy search with the default length limit: decode() with beam 1. */
void greedy_decode(Model *m, const Seq *src, int n, Seq *out);
/* One sentence's greedy translation into tgt, at most max ids (the rest cut, so that it
 * fits the model's positions when forced again); returns the count. */
int greedy_ids(Model *m, int *src, int n_src, int *tgt, int max);

#endif
