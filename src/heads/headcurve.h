/* headcurve: the pruning curve of Michel et al. 2019 (their Fig. 2): heads removed (gate
 * 0) a tenth at a time, the least important first by each of headscore.h's three scores
 * (the per-layer normalised gradient score "importance", the raw one "importance_raw",
 * the exact "delta_nll") and, as the baseline, in a seeded random order; at each point the
 * corpus BLEU of the set's translations (translate_lines with the caller's decoding
 * options) and the reference's per-token NLL. Over all heads together, and over each
 * attention kind alone (the other kinds untouched). Each point's mask is kept, for the
 * mask files (heads_mask_text: the --mask-heads @FILE format).
 *
 * A mask met twice (0% is the same everywhere, 100% of a scope is the same in every
 * order, two scores that agree on a prefix give the same mask) is decoded once.
 *
 * The default ranking is measured, not assumed (heads_default_order): the score whose
 * curve over all heads keeps the most BLEU, by the area under it. */
#ifndef QKV_HEADCURVE_H
#define QKV_HEADCURVE_H

#include <stdint.h>

#include "data/corpus.h"
#include "data/vocab.h"
#include "decode/translator.h"
#include "heads/headscore.h"
#include "nn/model.h"
#include "util/text.h"

#define HEADS_CURVE_POINTS 13 /* 0, 10, 20, 25, 30, ..., 70, 75, 80, 90, 100 % of the scope's heads removed */
/* The removal orders; the scores first (heads_order_score), random last. */
enum { HEADS_ORDER_IMPORTANCE, HEADS_ORDER_IMPORTANCE_RAW, HEADS_ORDER_DELTA_NLL, HEADS_ORDER_RANDOM, HEADS_ORDERS };
/* The default ranking without a curve to choose it by: dNLL is exact, where the gradient
 * scores are first-order views (docs/heads.md). */
#define HEADS_ORDER_FALLBACK HEADS_ORDER_DELTA_NLL
#define HEADS_SCOPES (ATTN_KINDS + 1) /* all heads, then each kind */
#define HEADS_SCOPE_ALL (-1)

typedef struct {
    int pct;          /* of the scope's heads removed */
    int removed;      /* how many: round(pct * heads / 100) */
    double bleu, nll; /* corpus BLEU (sacrebleu's defaults), per-token reference NLL */
    char mask[64];    /* the mask file, relative to the output directory: "masks/importance-all-10.txt" */
} HeadCurvePoint;

typedef struct {
    int order; /* HEADS_ORDER_* */
    int scope; /* HEADS_SCOPE_ALL, or an AttnKind */
    int heads; /* in the scope */
    HeadCurvePoint points[HEADS_CURVE_POINTS];
    unsigned char *removed; /* (HEADS_CURVE_POINTS, model_head_count): 1 where point k's mask removes the head */
} HeadCurve;

typedef struct {
    int n_heads;
    uint64_t seed;   /* of the random order */
    int n_curves;    /* orders x scopes that have heads */
    int evaluations; /* distinct masks decoded */
    HeadCurve curves[HEADS_ORDERS * HEADS_SCOPES];
} HeadCurves;

/* "importance", "importance_raw", "delta_nll", "random"; "all", or the kind's attnmap
 * name ("encoder_self", ...). heads_order_of: the order a name names, or -1. */
const char *heads_order_name(int order);
const char *heads_scope_name(int scope);
int heads_order_of(const char *name);

/* h's score under a score order (higher: more important); NAN for random. */
double heads_order_score(const HeadStats *h, int order);

/* The scope's heads (model_head_index numbers) in the order they are removed, into out
 * (room for model_head_count); returns their count. A score order: increasing score (the
 * least important first), ties by the raw score, then by number. Random: a permutation
 * that depends only on (seed, scope). */
int heads_removal_order(const Model *m, const HeadStats *stats, int order, int scope, uint64_t seed, int *out);

/* Indices 0..n-1 of stats, the most important first by a score order: decreasing score,
 * ties by the raw score, then by number. */
void heads_rank_order(const HeadStats *stats, int n, int order, int *out);

/* The area under a curve's BLEU over the share removed, by trapezoids between its points:
 * the mean BLEU over 0..100% removed, each stretch weighted by its width (the points are
 * denser at 20-30% and 70-80%, which a plain mean of the points would count twice). */
double heads_curve_area(const HeadCurve *c);

/* The default ranking: of the score orders, the one whose curve over all heads has the
 * largest area (heads_curve_area, rounded to 4 decimals as heads.json stores it, so a tie
 * there is a tie); ties go to delta_nll, then importance_raw, then importance (the exact
 * score first). areas (HEADS_ORDERS): each order's area over all heads, random's
 * included; NAN where c (may be NULL) has no such curve. Without any score order's curve
 * over all heads, HEADS_ORDER_FALLBACK. */
int heads_default_order(const HeadCurves *c, double *areas);

/* Every curve on the set (src_text and ref_text: its n lines, the texts of set's ids),
 * with translate options o; the distinct masks are shared by `threads` workers (fanout.h);
 * progress (may be NULL) is told after each decoded mask, one call at a time, from any of
 * the workers' threads. Gates are left off. heads_curves_free frees what it allocates. */
void heads_curves(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const HeadSet *set, char **src_text,
                  char **ref_text, const TranslateOptions *o, const HeadStats *stats, uint64_t seed, int threads,
                  HeadCurves *out, void (*progress)(int done, int total, void *arg), void *arg);
void heads_curves_free(HeadCurves *c);

/* A mask as --mask-heads @FILE reads it (head_mask_format, decode/headmask.h): one line
 * "kind.layer.head" per removed head (kinds enc, dec, cross; 0-based), in
 * model_head_index order; nothing for no head. */
void heads_mask_text(const Model *m, const unsigned char *removed, StrBuf *out);

#endif
