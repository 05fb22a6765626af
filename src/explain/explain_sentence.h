/* explain_sentence: qkv explain's one sentence as one call, which the command and the
 * server's /v1/explain both make, so that they read the sentence, choose the defaults and
 * answer the same way: the same explain.json for the same sentence.
 *
 * Three steps, so that a caller can weigh the work before the last (the server refuses an
 * explanation past its budget once it knows the lengths): prepare reads the sentence (the
 * source, the forced target, the contrast word) as ids and is the only one that can fail,
 * decode makes the model's greedy translation the target when none is forced, run explains
 * it (explain_pair, the methods, explain.json's text). */
#ifndef QKV_EXPLAIN_EXPLAIN_SENTENCE_H
#define QKV_EXPLAIN_EXPLAIN_SENTENCE_H

#include "data/sentence_ids.h"
#include "explain/pair.h"
#include "nn/model.h"
#include "util/text.h"

/* Integrated gradients' steps when none are asked for: qkv explain's, the server's and qkv
 * align --method grad's. 32 keep the completeness error of the toy and Multi30k models'
 * words small (docs/explain.md); the server's budget says when fewer must do. */
#define EXPLAIN_IG_STEPS 32

typedef struct {
    const char *text;     /* the source sentence */
    const char *target;   /* the target, forced; NULL: the model's greedy translation */
    const char *contrast; /* NULL, or one word of the target vocabulary: the foil */
    int ig_steps;         /* integrated gradients' steps; 0: none */
    /* how the caller names text, target and contrast in its messages ("--text", "\"src\"") */
    const char *text_name, *target_name, *contrast_name;
    const SentenceTokens *given[2]; /* text and target read already (each NULL: read here) */
} ExplainAsk;

/* An ask with the defaults, named as the command names its options. */
ExplainAsk explain_ask(const char *text, const char *target, const char *contrast);

typedef struct {
    int *src, *tgt; /* the ids (room for max_positions - 1) */
    int ns, nt;
    int foil;               /* the contrast word's id, or -1 */
    StrBuf unknown;         /* the source's words read as <unk>, quoted, for a warning */
    PairExplanation e;      /* after run */
    ExplainMethod *methods; /* after run */
    int n_methods;
    char *json; /* explain.json's text, after run */
} ExplainSentence;

/* The sentence of a as ids in x (zeroed first; free it with explain_sentence_free either
 * way). 0, or -1 with the error set, naming the part at fault; *too_long (may be NULL) says
 * whether the fault is a side longer than the model's positions. Reads m's sizes only. */
int explain_sentence_prepare(const Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const ExplainAsk *a,
                             ExplainSentence *x, int *too_long);
/* With no forced target: the greedy translation on m (its head gates as set) as the target. */
void explain_sentence_decode(Model *m, const ExplainAsk *a, ExplainSentence *x);
/* Explains the prepared sentence on m: x->e, x->methods and x->json. */
void explain_sentence_run(Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const ExplainAsk *a,
                          ExplainSentence *x);
void explain_sentence_free(ExplainSentence *x);

#endif
