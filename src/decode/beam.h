/* beam: beam search over the model's incremental step, for one group of sentences. */
#ifndef QKV_BEAM_H
#define QKV_BEAM_H

#include "data/corpus.h"
#include "decode/search.h"
#include "nn/model.h"

/* An extension of a live hypothesis, ranked by score, then beam, then token rank (EOS,
 * ordinary tokens by id, UNK). */
typedef struct {
    double score; /* log P of the hypothesis extended by token */
    int beam, token, rank;
} BeamCand;

/* The best 2K extensions (at most; fewer where fewer are allowed) of block j's live rows
 * (rows j*K .. j*K+K-1 of logits, each V wide; a row whose score is -inf is not live),
 * best first, into top (2K slots); hist holds each row's t tokens so far (rows of t + 1),
 * for the no-repeat rule (no_repeat 0: none). Returns how many. */
int beam_best_extensions(const float *logits, const double *score, const int *hist, int t, int j, int K, int V,
                         int no_repeat, BeamCand *top);

/* Beam search for one group of sentences (beam.c), on st (zeroed, or used by an earlier
 * group; the caller frees it with model_step_end); decode() calls it for beam > 1. */
void beam_search_group(Model *m, DecodeState *st, const Seq *const *src, int n, const DecodeOptions *o, Seq *const *out,
                       double *const *scores);

#endif
