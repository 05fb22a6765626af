/* fixture: the small models and sources the decoding tests and the model's head-gate
 * tests both search with (defined in test_decode.c). */
#ifndef QKV_TEST_FIXTURE_H
#define QKV_TEST_FIXTURE_H

#include "data/corpus.h"
#include "nn/model.h"

/* n sources of 1..9 ids from 4..11, the same each call (each ids array the caller's). */
void fixture_sources(Seq *src, int n);
/* A 1+2-layer model of small vocabularies with unit noise added to its weights, so
 * that searches differ; pre: pre-LN. */
void fixture_model(Model *m, int pre);

#endif
