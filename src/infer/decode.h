/* decode: greedy search with the trained model.
 *
 * Sentences are decoded in groups of similar length; each step feeds one token through
 * the decoder with cached keys and values (see decode.c). Beam search comes later. */
#ifndef QKV_DECODE_H
#define QKV_DECODE_H

#include "data/corpus.h"
#include "nn/model.h"

/* Longest output for a source of n tokens within the model's position table. */
int decode_max_len(const Model *m, int src_len);

/* Greedy translation of n source sequences (ids without EOS, each at most
 * model max_positions - 1 long). out[i].ids is allocated (without BOS/EOS). */
void greedy_decode(Model *m, const Seq *src, int n, Seq *out);

#endif
