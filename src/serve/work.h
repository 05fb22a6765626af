/* work: what a request to qkv serve asks of the machine, in GFLOP, estimated from its
 * sizes before it runs: a worker refuses one past --max-gflop with a 413 rather than
 * start a search or a table it cannot stop. Estimates, not counts: each is at least the
 * work it names (a search at its longest), so a bound on them bounds the time. */
#ifndef QKV_SERVE_WORK_H
#define QKV_SERVE_WORK_H

#include "decode/search.h"
#include "nn/model.h"
#include "run/run.h"
#include "serve/api.h"

/* The GFLOP a search of one sentence of len source tokens may take, at most: the encoder
 * once, and the decoder once per hypothesis over the longest target the options allow (the
 * incremental steps together cost about a forced pass over the whole). A request's
 * sentences add up. An upper bound: most sentences end well before their longest. */
double work_translate_gflop(const Model *m, const DecodeOptions *o, int len);
/* The GFLOP explain_pair runs for S source and T decoder positions (EOS and BOS in): a
 * forward and a backward (twice the forward) for each gradient row, T per integration
 * point, the input and the baseline, for y_t and the foil; one forward per leave-one-out
 * row and for the maps. */
double work_explain_gflop(const ModelConfig *c, int S, int T, int ig_steps, int foil);
/* The work of a whatif (whatif.h) over S source and T forced positions: a forced pass as
 * trained and one as changed, each with the lens (an output projection per decoder layer
 * and position); a greedy decoding for an unforced target and for heads off, and a beam
 * search of beam for the tree (each at most the decoding's length, one pass per
 * hypothesis, as the incremental step costs about a forced pass over the whole). */
double work_whatif_gflop(const ModelConfig *c, int S, int T, int forced, int changed, int masked, int beam,
                         int longest);
/* The work of a patch table: a forced pass per component (every head, every encoder
 * layer's stream at every source position), the clean, corrupted and fully patched runs,
 * and a forward and a backward of each run for attribution patching's gradient. */
double work_patch_gflop(const ModelConfig *c, int S, int T);
/* A request's text as its model reads it, read once: when it is queued on a model already
 * loaded (its lane), else by the worker that runs it. The cost, the worker's bounds and
 * warnings read the counts, and the call each kind shares with its command takes the ids
 * (work_given), so that no text is tokenized twice. */
typedef struct {
    int counted; /* 0 until work_size filled it */
    int n;
    SentenceTokens *src;    /* (n) each source sentence's ids, uncapped */
    int *unknown;           /* (n) how many of them read as <unk> */
    SentenceTokens tgt;     /* the forced target's, n -1 for none */
    SentenceTokens corrupt; /* patch's corrupted sentence's (source vocabulary), n -1 for none */
} WorkSize;

/* Counts q's sentences on r's vocabularies into z (freed by work_size_free). */
void work_size(const Run *r, const ApiRequest *q, WorkSize *z);
void work_size_free(WorkSize *z);
/* One sentence's ids as a call's given (sentence_ids.h): &z->src[0], &z->tgt or
 * &z->corrupt, NULL where the request has none. */
const SentenceTokens *work_given(const SentenceTokens *s);

/* The most a request q, counted in z, may cost on r's model before anything runs, one
 * estimate a kind (routes.h's rows name them): the estimates above at their longest (a
 * sentence at most the model's positions; an unforced target as long as a search may go; a
 * mask as if it switched heads off). What decides its lane (jobs.h); the worker's bound is
 * checked on the estimates with the lengths found. */
double work_translate_request(const Run *r, const ApiRequest *q, const WorkSize *z);
double work_attention_request(const Run *r, const ApiRequest *q, const WorkSize *z);
double work_explain_request(const Run *r, const ApiRequest *q, const WorkSize *z);
double work_whatif_request(const Run *r, const ApiRequest *q, const WorkSize *z);
double work_patch_request(const Run *r, const ApiRequest *q, const WorkSize *z);

#endif
