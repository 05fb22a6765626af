/* beam: beam search over the model's incremental step, for one group of sentences. */
#ifndef QKV_BEAM_H
#define QKV_BEAM_H

#include "data/corpus.h"
#include "decode/search.h"
#include "nn/model.h"

/* Beam search for one group of sentences (beam.c), on st (zeroed, or used by an earlier
 * group; the caller frees it with model_step_end); decode() calls it for beam > 1. */
void beam_search_group(Model *m, DecodeState *st, const Seq *const *src, int n, const DecodeOptions *o, Seq *const *out,
                       double *const *scores);

#endif
