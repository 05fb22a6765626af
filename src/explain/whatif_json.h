/* whatif_json: what `qkv whatif` found as whatif.json ("qkv-whatif-1"), the object both the
 * command's --out and `qkv serve`'s POST /v1/whatif answer with:
 *
 *   format, source, target     the sentence and the target as forced (or greedy) text
 *   tokens                     (T) the target's pieces position by position, <eos> last
 *   model, changed             per position, the model as trained and (when a head is off
 *                              or a query pinned) as changed: {logp (T), entropy (T), top
 *                              (T, k) [{token, logp}], lens (L, T) [{top, top_logp,
 *                              word_logp}] (when asked)}
 *   change                     (T) changed.logp - model.logp, with "changed"
 *   translation_changed        with heads off: the changed model's greedy translation
 *   beam_tree, beam_best       with the tree: [{step, parent, token, fate ("kept",
 *                              "finished", "dropped"), logp}] and the best hypothesis
 *   beam_length_penalty        with the tree: A, finished paths ranked by log P / length^A
 *
 * Numbers are written with five significant digits. */
#ifndef QKV_EXPLAIN_WHATIF_JSON_H
#define QKV_EXPLAIN_WHATIF_JSON_H

#include <jansson.h>

#include "data/vocab.h"
#include "decode/search.h"
#include "explain/intervene.h"

typedef struct {
    const char *source, *target; /* the texts (any bytes: shown as UTF-8) */
    const int *tgt;              /* (nt) the target's ids */
    int nt;
    const WhatifSteps *model;        /* as trained */
    const WhatifSteps *changed;      /* NULL when nothing changed */
    int lens;                        /* 1: each layer's lens in "model" and "changed" */
    const char *translation_changed; /* NULL, or the changed model's greedy translation */
    const BeamTrace *tree;           /* NULL, or the beam tree */
    const char *beam_best;           /* with tree: the best hypothesis's text */
    double beam_length_penalty;      /* with tree: the A its finished hypotheses were ranked by */
} WhatifView;

/* The object (a new reference); tv: the target vocabulary the ids are of. */
json_t *whatif_json(const WhatifView *v, const Vocab *tv);

#endif
