/* patch_pair: qkv patch's one pair of sentences as one call, which the command and the
 * server's /v1/patch both make: the clean and the corrupted sentence and the target read,
 * the metric chosen, the table measured (patching.h) and patch.json's text.
 *
 * In steps, each that can fail a quick one, so that the server can weigh the work first:
 * prepare reads the sentences and the compared words; decode makes the clean sentence's
 * greedy translation the target when none is forced; check_at checks the metric's position
 * against the target; run measures the table (it fails only where patching.h's run does). */
#ifndef QKV_EXPLAIN_PATCH_PAIR_H
#define QKV_EXPLAIN_PATCH_PAIR_H

#include "data/sentence_ids.h"
#include "data/vocab.h"
#include "explain/patching.h"
#include "nn/model.h"
#include "util/text.h"

typedef struct {
    const char *clean, *corrupt; /* the sentences, the same number of source tokens */
    const char *target;          /* forced; NULL: the clean sentence's greedy translation */
    const char *compare[2];      /* NULL, or the words A and B of the metric log p(A) - log p(B) */
    int at;                      /* with compare: the target position */
    /* how the caller names the parts in its messages */
    const char *clean_name, *corrupt_name, *target_name, *compare_names[2], *at_name;
    const SentenceTokens *given[3]; /* clean, corrupt and target read already (each NULL: read here) */
} PatchAsk;

/* An ask with the defaults, named as the command names its options. */
PatchAsk patch_ask(const char *clean, const char *corrupt, const char *target);

typedef struct {
    int *clean, *corrupt, *tgt; /* the ids (room for max_positions - 1) */
    int ns, nt;
    StrBuf unknown[2];  /* the clean and the corrupted sentence's words read as <unk>, for a warning */
    PatchMetric metric; /* the whole target's log p, or A against B at one position */
    char *metric_name;  /* the metric for people ("log p(target)", "log p(A) - log p(B) at ...") */
    PatchTable table;   /* after run */
    char **labels;      /* after run: (ns + 1) the clean source's tokens, <eos> last, UTF-8 */
    char *json;         /* after run: patch.json's text */
} PatchPair;

/* x zeroed first (free it with patch_pair_free either way). 0, or -1 with the error set;
 * *too_long (may be NULL): a sentence longer than the model's positions. */
int patch_prepare(const Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const PatchAsk *a, PatchPair *x,
                  int *too_long);
void patch_decode(Model *m, const PatchAsk *a, PatchPair *x);
int patch_check_at(const PatchAsk *a, const PatchPair *x);
/* 0, or -1 with the error set (patch_run's). */
int patch_pair_run(Model *m, const Vocab *sv, PatchPair *x);
void patch_pair_free(PatchPair *x);

#endif
