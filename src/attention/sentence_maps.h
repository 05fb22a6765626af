/* sentence_maps: one sentence's attention maps as one call, which `qkv attention --text`
 * and the server's /v1/attention both make: the sentence read (data/sentence_ids.h), the
 * target forced or searched, every map captured and labelled for people.
 *
 * The command shows the greedy translation's maps; the server its search's n-best list and
 * the best one's maps: the search is the ask's (NULL: greedy). prepare reads the sentence
 * and is the step that can fail; run does the rest. */
#ifndef QKV_ATTENTION_SENTENCE_MAPS_H
#define QKV_ATTENTION_SENTENCE_MAPS_H

#include "attention/attnmap.h"
#include "decode/translator.h"
#include "util/text.h"

typedef struct {
    const char *text;                    /* the source sentence */
    const char *target;                  /* forced; NULL: the translation the search finds */
    const TranslateOptions *search;      /* NULL: greedy, no list; else the n-best search (its best's maps) */
    const char *text_name, *target_name; /* how the caller names them in its messages */
    const SentenceTokens *given[2];      /* text and target read already (each NULL: read here) */
} MapsAsk;

typedef struct {
    int *src, *tgt; /* the ids (room for max_positions - 1) */
    int ns, nt;
    StrBuf unknown; /* the source's words read as <unk>, for a warning */
    AttnMaps maps;  /* after run */
    /* with a search, after run: its K hypotheses' texts, scores and ids */
    int K;
    char **hyp;
    double *scores;
    Seq *ids;
} SentenceMaps;

/* x zeroed first (free it with sentence_maps_free either way). 0, or -1 with the error set;
 * *too_long (may be NULL): a side longer than the model's positions. */
int sentence_maps_prepare(const Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const MapsAsk *a,
                          SentenceMaps *x, int *too_long);
/* The search (or greedy decoding) on m as its gates are, then the maps of the target. */
void sentence_maps_run(Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const MapsAsk *a, SentenceMaps *x);
void sentence_maps_free(SentenceMaps *x);

#endif
