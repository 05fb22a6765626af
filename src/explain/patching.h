/* patching: activation patching between two sentences (causal tracing, Meng et al. 2022),
 * and attribution patching, its one-backward-pass estimate.
 *
 * Two runs of the model over the same forced target: the clean source and the corrupted
 * one (the same number of source tokens: positions are patched one for one). For each
 * component, the clean run is repeated with that component's activation copied in from
 * the corrupted run, and the change of a metric is measured:
 *
 *   a head's output       its columns of the concatenated heads, before W_O (each kind,
 *                         layer and head; every query position at once);
 *   the residual stream   the encoder's stream after layer l at source position j.
 *
 * The metric is the log-probability of the whole forced target (the sum over its
 * positions), or, with a contrast, log p(A) - log p(B) at one target position (a logit
 * difference: the same number). effect = metric(clean, patched) - metric(clean).
 *
 * Attribution patching (Nanda 2023; Kramar et al. 2024, "AtP*") estimates every effect at
 * once: effect ~ (activation_corrupt - activation_clean) . dmetric/dactivation, with the
 * gradient of the clean run from the model's own backward pass. It is exact for a metric
 * linear in the activation and misses where the softmax saturates; the agreement is
 * reported (Spearman's rho over the components, and the largest misses). */
#ifndef QKV_EXPLAIN_PATCHING_H
#define QKV_EXPLAIN_PATCHING_H

#include "nn/model.h"

enum { PATCH_NAME_MAX = 32 };

typedef struct {
    int at;          /* -1: the whole target's log-probability; else the position of the contrast */
    int a, b;        /* with at >= 0: target ids, metric log p(a) - log p(b) at that position */
    double fraction; /* how far each patch moves its activation toward the corrupted run's:
                        clean + fraction * (corrupt - clean); 0 means 1 (the whole way) */
} PatchMetric;

typedef struct {
    char name[PATCH_NAME_MAX]; /* "cross.L1.H2", "enc.L0@3" */
    int kind;                  /* AttnKind, or -1 for the encoder's stream */
    int layer, head, pos;      /* head or pos: -1 where it does not apply */
    double effect, atp;        /* measured, and estimated by attribution patching */
} PatchComponent;

typedef struct {
    int n;
    PatchComponent *c;
    double clean, corrupt; /* the metric of each run */
    double everything;     /* the metric with the encoder's last layer patched at every position
                              (with fraction 1: the corrupted run's metric) */
    double rho;            /* Spearman's rho between effect and atp; NaN when either ranks none apart */
} PatchTable;
/* what a NaN rho is said as */
#define PATCH_RHO_UNDEFINED "undefined (the effects, or the estimates, all the same)"

/* The table for clean (ns ids) and corrupt (the same count) sources, tgt (nt ids) forced on
 * both. -1 with the error set when the sources differ in length. */
int patch_run(Model *m, const int *clean, const int *corrupt, int ns, const int *tgt, int nt, const PatchMetric *metric,
              PatchTable *out);
void patch_free(PatchTable *t);

/* Spearman's rank correlation of x and y (n each; ties share their mean rank); NAN when
 * either is constant. */
double spearman_rho(const double *x, const double *y, int n);

#endif
