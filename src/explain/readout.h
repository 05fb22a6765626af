/* readout: `qkv whatif`'s library (named apart from cmd/whatif.c, as the house keeps every
 * basename once): the model read out and changed while the user watches, one sentence
 * pair at a time, with the target forced (the user's prefix or translation, or the
 * model's own):
 *
 *   steps   at every target position, the top-k next tokens with their log-probabilities,
 *           the entropy of the distribution, and the log-probability of the forced word;
 *   lens    the same top-k through each decoder layer's output (the logit lens: the final
 *           norm and the output projection applied to a layer's residual stream);
 *   pin     one cross-attention query of one head pinned onto a chosen source token
 *           (nn/multihead.h's AttnIntervene), read out through steps;
 *   masks   heads switched off (the gates of --mask-heads) apply to all of it.
 *
 * Every number is the model's own pass under the interventions set when it runs. */
#ifndef QKV_EXPLAIN_READOUT_H
#define QKV_EXPLAIN_READOUT_H

#include "nn/model.h"

typedef struct {
    int T, k, L;      /* target positions, tokens listed per position, decoder layers */
    float *logp;      /* (T) log p of the forced word at each position */
    float *entropy;   /* (T) nats */
    int *top;         /* (T, k) the most likely next tokens, best first */
    float *top_lp;    /* (T, k) */
    int *lens_top;    /* (L, T, k) the same through each decoder layer's lens */
    float *lens_lp;   /* (L, T, k) */
    float *lens_word; /* (L, T) log p of the forced word through each layer's lens */
} WhatifSteps;

/* One forced pass of src (ns ids) -> tgt (nt ids) under the interventions set now. */
void whatif_steps(Model *m, const int *src, int ns, const int *tgt, int nt, int k, WhatifSteps *out);
void whatif_steps_free(WhatifSteps *w);

/* Pins query `query` of cross-attention (layer, head) onto source position key of an S
 * position source (one-hot weights into weights, S floats): iv and weights are the
 * caller's and must outlive the passes. -1 with the error set when out of range. */
int whatif_pin(Model *m, int layer, int head, int query, int key, int S, float *weights, AttnIntervene *iv);
/* Takes every pin and patch of every sub-layer away. */
void whatif_clear(Model *m);

#endif
