/* headreport: what `qkv heads` writes, built in memory: heads.json (format qkv-heads-1,
 * described in docs/heads.md), the view's JSON for index.html (qkv-heads-view-1: the
 * same heads and curve, and the attention maps of the set's first sentences), and
 * heads.svg, the pruning curves drawn as Michel et al. 2019's Fig. 2. Writing the files
 * is the command's. */
#ifndef QKV_HEADREPORT_H
#define QKV_HEADREPORT_H

#include <jansson.h>

#include "data/vocab.h"
#include "decode/search.h"
#include "heads/headcurve.h"
#include "heads/headscore.h"
#include "nn/model.h"

/* Sentences whose maps the view carries. */
#define HEADS_VIEW_SENTENCES 8

typedef struct {
    const char *weights; /* the checkpoint */
    long long step;
    const char *src_path, *ref_path;
    const char *gold_path; /* NULL: no AER */
    const char *freq_path; /* the corpus rare tokens were counted in; NULL: none */
    int sentences, skipped;
    long long ref_tokens;
    const HeadStats *stats; /* n_heads, in model_head_index order */
    int n_heads;
    double spearman;          /* of importance and delta_nll over the heads; NAN: undefined */
    double spearman_raw;      /* of importance_raw and delta_nll */
    double base_nll;          /* per token, no head masked */
    const HeadCurves *curves; /* NULL: not computed */
    int default_order;        /* the ranking the table, "rank" and the page use (heads_default_order) */
    const double *areas;      /* (HEADS_ORDERS) heads_default_order's areas; NULL without a curve */
    const DecodeOptions *decoding;
    double score_seconds, curve_seconds;
} HeadReport;

/* The heads.json tree (a new reference), and its parts: the heads array (one object per
 * head, model_head_index order, with its rank by r->default_order) and the curve object (null
 * when r->curves is NULL). */
json_t *heads_report_json(const HeadReport *r);
json_t *heads_json_array(const HeadReport *r);
json_t *heads_curve_json(const HeadReport *r);

/* The view: {"format": "qkv-heads-view-1", "heads": .., "curve": .., "sentences": [the
 * maps.json objects of the set's first HEADS_VIEW_SENTENCES pairs, the reference
 * forced]} as text (caller frees). src_text and ref_text: the set's lines. */
char *heads_view_json(const HeadReport *r, Model *m, int tokenizer, const Vocab *sv, const Vocab *tv,
                      const HeadSet *set, char **src_text, char **ref_text);

/* A heads.json that qkv heads wrote, read back (for qkv serve's grid and qkv report): the
 * object, its "format" qkv-heads-1 and its "heads" a non-empty list whose every entry has
 * a kind of the three, a layer and a head. NULL with the error set (naming path). */
json_t *heads_read(const char *path);

/* heads.svg: BLEU against % of heads removed, one panel per scope, each score order solid
 * in its colour (default_order's thicker), random dashed (caller frees). */
char *heads_svg(const HeadCurves *c, int default_order);

#endif
