/* fixture: what the C tests build models from: a config of the sizes a test picks
 * (fixture.c), and the small models and sources the decoding tests and the model's
 * head-gate tests both search with (defined in test_decode.c). */
#ifndef QKV_TEST_FIXTURE_H
#define QKV_TEST_FIXTURE_H

#include "data/corpus.h"
#include "nn/model.h"

/* A config of these sizes with the rest as most tests want it: post-LN, tied embeddings,
 * no dropout, no label smoothing (a test sets any other field after). */
ModelConfig fixture_config(int src_vocab, int tgt_vocab, int d_model, int heads, int d_ff, int encoder_layers,
                           int decoder_layers, int max_positions);
/* n sources of 1..9 ids from 4..11, the same each call (each ids array the caller's). */
void fixture_sources(Seq *src, int n);
/* A 1+2-layer model of small vocabularies with unit noise added to its weights, so
 * that searches differ; pre: pre-LN. */
void fixture_model(Model *m, int pre);

#endif
