/* headcurve: the pruning curve of Michel et al. 2019 (their Fig. 2): heads removed (gate
 * 0) a tenth at a time, in increasing order of importance (headscore.h's normalised
 * gradient score) and, as the baseline, in a seeded random order; at each point the
 * corpus BLEU of the set's translations (translate_lines with the caller's decoding
 * options) and the reference's per-token NLL. Over all heads together, and over each
 * attention kind alone (the other kinds untouched). Each point's mask is kept, for the
 * mask files (heads_mask_text: the --mask-heads @FILE format).
 *
 * A mask met twice (0% is the same everywhere, 100% of a scope is the same in both
 * orders) is decoded once. */
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
enum { HEADS_ORDER_IMPORTANCE, HEADS_ORDER_RANDOM, HEADS_ORDERS };
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

/* "importance", "random"; "all", or the kind's attnmap name ("encoder_self", ...). */
const char *heads_order_name(int order);
const char *heads_scope_name(int scope);

/* The scope's heads (model_head_index numbers) in the order they are removed, into out
 * (room for model_head_count); returns their count. Importance: increasing normalised
 * score, ties by the raw score, then by number. Random: a permutation that depends only
 * on (seed, scope). */
int heads_removal_order(const Model *m, const HeadStats *stats, int order, int scope, uint64_t seed, int *out);

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
