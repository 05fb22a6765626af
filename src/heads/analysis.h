/* analysis: `qkv heads`' work from the lines read to the files written: the set of pairs
 * the model can read, the scores (importance, dNLL, roles, AER), their Spearman
 * correlations, the pruning curve, and the export directory (heads.json, heads.svg,
 * index.html and masks/, moved into place together). Reading the user's files and
 * printing are the command's (cmd/heads.c). */
#ifndef QKV_HEADS_ANALYSIS_H
#define QKV_HEADS_ANALYSIS_H

#include "attention/align_model.h"
#include "heads/headcurve.h"
#include "heads/headreport.h"
#include "heads/headscore.h"
#include "run/run.h"

/* The pairs the model can read whole (both sides 1..max_positions - 2 tokens), up to
 * max_sentences (0: all); the texts and gold lines borrowed from the lines given, each
 * gold pair naming its line. */
typedef struct {
    HeadSet set;
    Seq *src, *ref;
    char **src_text, **ref_text;
    AlignPair *pairs; /* with gold lines */
    int skipped;      /* pairs left out */
} HeadsInput;

/* src, ref, gold (NULL: none): n lines each, named by their paths in the gold pairs. */
void heads_input_build(const Run *r, char **src, char **ref, char **gold, int n, int max_sentences,
                       const char *src_path, const char *ref_path, const char *gold_path, HeadsInput *in);
void heads_input_free(HeadsInput *in);

/* What heads_analyse measures. */
typedef struct {
    HeadStats *stats; /* n_heads, in model_head_index order */
    int n_heads;
    double base_nll;               /* per reference token, no head masked */
    double spearman, spearman_raw; /* importance and importance_raw against dNLL */
    HeadCurves curves;             /* with a curve */
    int default_order;             /* heads_default_order: the curve's best score order, or its fallback */
    double areas[HEADS_ORDERS];    /* each order's area over all heads; NAN without a curve */
    double score_seconds, curve_seconds;
    long long ref_tokens; /* reference tokens scored, EOS included */
} HeadsAnalysis;

/* Scores every head of r's model on in (freq: NULL, or heads_source_frequencies' counts;
 * with in->pairs, AER), and with curve the pruning curves (seed: the random order's;
 * progress as heads_curves'). 0, or -1 with the error set (heads_aer's errors); a is
 * freed by heads_analysis_free either way. */
int heads_analyse(Run *r, const HeadsInput *in, const long long *freq, const TranslateOptions *to, int curve,
                  uint64_t seed, void (*progress)(int done, int total, void *arg), HeadsAnalysis *a);
void heads_analysis_free(HeadsAnalysis *a);

/* Writes out/heads.json, out/index.html, out/heads.svg and out/masks/ (the curve's masks,
 * with rep->curves: every order's, and the default order's again as default-SCOPE-PCT.txt)
 * as one set through util/staged_dir.h, refusing an out whose masks/
 * holds files that are not masks. *masks: the mask files written. 0, or -1 with the error
 * set. */
int heads_export(const char *out, const HeadReport *rep, Run *r, const HeadsInput *in, int *masks);

#endif
