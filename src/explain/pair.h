/* pair: everything qkv explain says about one sentence pair, from one set of passes over
 * the model: every head's weights (attention/attnmap.h), the contributions through whole
 * layers and their rollout (contrib.h), the gradient attributions (gradattr.h) and
 * leave-one-out, and each of them read as a ranking of the source tokens for each target
 * token (the methods the faithfulness tables compare).
 *
 * A source token is removed by replacing it with <unk> (its embedding becomes <unk>'s, its
 * position stays): leave-one-out and the faithfulness tables remove tokens this one way
 * for every method. The source's EOS is never removed or ranked. */
#ifndef QKV_EXPLAIN_PAIR_H
#define QKV_EXPLAIN_PAIR_H

#include "attention/attnmap.h"
#include "explain/contrib.h"
#include "explain/gradattr.h"
#include "nn/model.h"

typedef struct {
    int S, T;              /* framed: S source positions (EOS last), T decoder positions */
    int *src, *tin, *tout; /* the framed ids */
    AttnMaps maps;         /* every head's weights, scores and ||a v W_O|| */
    Contributions contrib; /* layer contributions and rollout */
    GradAttr grad;         /* saliency, input x gradient, integrated gradients */
    float *loo;            /* (T, S): log p(y_t) - log p(y_t | token j as <unk>); EOS column 0 */
    float *logp;           /* (T) log p(y_t) */
} PairExplanation;

typedef struct {
    int foil;     /* -1, or a target id: the gradients explain log p(y_t) - log p(foil) */
    int ig_steps; /* integrated gradients' steps; 0: none (their scores 0) */
    int loo;      /* 1: leave-one-out (S removal passes); 0: its scores 0 */
} ExplainOptions;

/* Explains src (ns ids) -> tgt (nt ids, forced). Labels as attnmap_capture makes them (the
 * caller may relabel e->maps for people). */
void explain_pair(Model *m, const Vocab *sv, const Vocab *tv, const int *src, int ns, const int *tgt, int nt,
                  const ExplainOptions *o, PairExplanation *e);
void explain_pair_free(PairExplanation *e);

/* log p(y_t) at each requested position of each removal set: sets (n, S) bytes, 1 where a
 * source token is replaced by <unk>; want (n, T) bytes, 1 where out[s * T + t] is needed
 * (the rest left alone). Batched forward passes over the pair's target. */
void explain_removal_logp(Model *m, const PairExplanation *e, const unsigned char *sets, const unsigned char *want,
                          int n, float *out);

/* ---- the methods: each a (T, S) score per target token over the source tokens ---- */
enum { EXPLAIN_NAME_MAX = 32 };
typedef struct {
    char name[EXPLAIN_NAME_MAX]; /* "L1.H3", "L1.avg", "shift", "contrib.layer", ... */
    int family;                  /* EXPLAIN_ATTENTION, ...: what the tables group by */
    float *scores;               /* (T, S): higher = more important; the EOS column is ignored */
} ExplainMethod;
enum { EXPLAIN_ATTENTION, EXPLAIN_CONTRIB, EXPLAIN_GRADIENT, EXPLAIN_LOO };

/* The gradient attributions as methods, in explain_methods' order: each name and what its
 * score is (gradattr.h: the signed input x gradient and its magnitude are two methods, and
 * the tables say which is which). */
enum { EXPLAIN_GRADIENTS = 4 };
typedef struct {
    const char *name, *score;
} ExplainGradient;
extern const ExplainGradient explain_gradients[EXPLAIN_GRADIENTS];
/* The (T, S + T) scores of g that gradient k reads. */
const float *explain_gradient_scores(const GradAttr *g, int k);
/* What a gradient method's score is (explain_gradients' line), or NULL for any other name. */
const char *explain_gradient_said(const char *name);

/* Every method's scores for e, in a fixed order: each cross-attention head by layer, each
 * layer's head average, shift-att (the last layer's average at the step that reads y_t:
 * row t + 1, the last row its own), the last layer's cross-attention contributions, the
 * rollout's source columns, the gradients (saliency, x-gradient, x-gradient-l2, integrated
 * gradients) and leave-one-out. *methods is malloc'd (explain_methods_free); returns the
 * count. */
int explain_methods(const PairExplanation *e, ExplainMethod **methods);
void explain_methods_free(ExplainMethod *methods, int n);

#endif
