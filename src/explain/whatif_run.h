/* whatif_run: qkv whatif's one sentence as one call, which the command and the server's
 * /v1/whatif both make: the sentence read, the model changed (heads off, one cross-
 * attention query pinned) and read out as trained and as changed, the changed model's
 * translation, the beam tree, and whatif.json's object.
 *
 * In steps, so that the server can weigh the work before it is done, and so that every
 * step that can fail is quick: prepare reads the sentence as ids and checks the pin against
 * the model and the source; decode makes the greedy translation the target when none is
 * forced; check_query checks the pin's target position; run does the rest. The
 * interventions are cleared from the model before run returns. */
#ifndef QKV_EXPLAIN_WHATIF_RUN_H
#define QKV_EXPLAIN_WHATIF_RUN_H

#include <jansson.h>

#include "config.h"
#include "data/sentence_ids.h"
#include "decode/search.h"
#include "explain/intervene.h"
#include "nn/model.h"
#include "util/text.h"

#define WHATIF_TOP 5  /* next tokens listed per position */
#define WHATIF_BEAM 5 /* the beam tree's beam */

/* One cross-attention query pinned: layer, head, the target position (query) and the
 * source position (key) it is pinned onto, or the caller's own weights over the source. */
typedef struct {
    int layer, head, query, key;
    const float *weights; /* NULL: all on key; else n_weights of them, one a source position */
    int n_weights;
} WhatifPin;

typedef struct {
    const char *text;      /* the source sentence */
    const char *target;    /* the target, forced; NULL: the model's greedy translation */
    int top;               /* next tokens per position */
    int lens;              /* 1: the logit lens in the JSON */
    int beam;              /* 0: no beam tree; else its beam */
    double length_penalty; /* the tree's ranking of finished hypotheses: the run's decode.length_penalty */
    const float *gates;    /* NULL, or the head gates of the changed model (model_head_count): its
                            * translation is then decoded too */
    int mask_given;        /* a mask was asked for, even one naming no head: the changed model is read out */
    const WhatifPin *pin;  /* NULL, or the pin */
    /* how the caller names the parts in its messages: the text, the target, and the pin's
     * layer, head, key, weights and query ("--pin 1.0.2=3" for each, or "\"pin.layer\"", ...) */
    const char *text_name, *target_name, *pin_names[5];
    const SentenceTokens *given[2]; /* text and target read already (each NULL: read here) */
} WhatifAsk;

/* An ask with the defaults (the beam tree ranked as run's translations are), named as the
 * command names its options. */
WhatifAsk whatif_ask(const char *text, const char *target, const Config *run);

typedef struct {
    int *src, *tgt; /* the ids (room for max_positions - 1) */
    int ns, nt;
    StrBuf unknown;            /* the source's words read as <unk>, for a warning */
    WhatifSteps base, after;   /* the model as trained; as changed (when changed) */
    int changed;               /* heads off, a mask asked for, or a pin */
    char *target_text;         /* the target as text (forced or greedy), UTF-8 */
    char *translation_changed; /* with heads off: the changed model's greedy translation */
    BeamTrace tree;            /* with a beam */
    char *beam_best;           /* with a beam: the best hypothesis, UTF-8 */
    double beam_score;
    json_t *json; /* whatif.json's object, after run */
} WhatifResult;

/* The sentence of a as ids in x (zeroed first; free it with whatif_result_free either way),
 * and the pin's layer, head, source position and weights checked against m and the source.
 * 0, or -1 with the error set; *too_long (may be NULL): a side longer than the positions. */
int whatif_prepare(const Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const WhatifAsk *a, WhatifResult *x,
                   int *too_long);
/* With no forced target: the greedy translation on m (as trained) as the target. */
void whatif_decode(Model *m, const WhatifAsk *a, WhatifResult *x);
/* The pin's target position against the target: 0, or -1 with the error set. */
int whatif_check_query(const WhatifAsk *a, const WhatifResult *x);
/* The read-outs on m (its gates restored, its interventions cleared afterwards), after
 * decode and the check. */
void whatif_run(Model *m, const Vocab *tv, int tokenizer, const WhatifAsk *a, WhatifResult *x);
void whatif_result_free(WhatifResult *x);

#endif
