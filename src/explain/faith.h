/* faith: is a method's ranking of the source tokens faithful to the model? Measured, not
 * argued, over a set of sentence pairs:
 *
 *   AOPC (comprehensiveness, DeYoung et al. 2020): for each target token y_t, remove the
 *   k source tokens a method ranks highest (pair.h: replaced by <unk>) and measure the
 *   drop log p(y_t) - log p(y_t | removed), for k = 1, 2, 3 and 20% of the source tokens
 *   (at least 1, at most all); a method's AOPC is the drop averaged over the four k and
 *   every target token. Random orders (a fresh permutation per target token) are the
 *   baseline: their AOPC's mean and standard deviation over the orders.
 *
 *   Kendall tau_b (Jain & Wallace 2019) between each head's weights and leave-one-out or
 *   the gradients' saliency, per target token, averaged: cross-attention heads over the
 *   source tokens, decoder self-attention heads over the target prefix (against
 *   saliency; leave-one-out there would remove target words).
 *
 * And what the contributions say: the mean source share by decoder layer and by target
 * position. */
#ifndef QKV_EXPLAIN_FAITH_H
#define QKV_EXPLAIN_FAITH_H

#include <stdint.h>

#include "explain/pair.h"

enum { FAITH_KS = 4, FAITH_POSITIONS = 48 };

typedef struct {
    int n_methods;
    ExplainMethod *methods; /* names and families (scores NULL) */
    double *drop;           /* (n_methods, FAITH_KS) summed drops */
    long tokens;            /* target tokens counted */
    int n_random;
    double *random_drop; /* (n_random, FAITH_KS) */
    int layers, heads;
    double *tau_loo, *tau_grad,
        *tau_self; /* (layers * heads) sums: cross vs LOO, cross vs saliency, self vs saliency */
    long *n_loo, *n_grad, *n_self;
    double *share_layer; /* (layers) summed source share of every target token after each decoder layer */
    double share_pos[FAITH_POSITIONS];
    long n_pos[FAITH_POSITIONS]; /* by target position; the last bucket holds every later one */
    long sentences, removal_rows;
} FaithTotals;

/* Ready to add sentences explained with these methods (explain_methods' order), for a
 * model of `layers` decoder layers of `heads` heads, with n_random random orders. */
void faith_init(FaithTotals *f, const ExplainMethod *methods, int n, int layers, int heads, int n_random);
/* Adds one pair: the removals its methods' rankings ask for (each distinct set run once),
 * the random orders from seed, tau and the shares. */
void faith_add(FaithTotals *f, Model *m, const PairExplanation *e, const ExplainMethod *methods, uint64_t seed);
void faith_free(FaithTotals *f);
/* Adds from's sums into into (the same methods, layers, heads and random orders). */
void faith_merge(FaithTotals *into, const FaithTotals *from);

/* A method's AOPC, and at one k (0..FAITH_KS-1); the random orders' mean and standard
 * deviation of AOPC. */
double faith_aopc(const FaithTotals *f, int method);
double faith_drop_at(const FaithTotals *f, int method, int k);
void faith_random(const FaithTotals *f, double *mean, double *sd);

/* Kendall's tau_b of a and b (n values); NAN when either is constant. */
double kendall_tau_b(const float *a, const float *b, int n);

/* The k of each of FAITH_KS for a source of n tokens: 1, 2, 3, 20% (rounded up); each at
 * most n. */
void faith_ks(int n, int *ks);

#endif
