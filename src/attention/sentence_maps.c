/* sentence_maps: see sentence_maps.h. */
#include "attention/sentence_maps.h"

#include <stdlib.h>
#include <string.h>

#include "data/sentence_ids.h"
#include "decode/decode.h"
#include "util/mem.h"

int sentence_maps_prepare(const Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const MapsAsk *a,
                          SentenceMaps *x, int *too_long) {
    int max = m->cfg.max_positions - 2;
    memset(x, 0, sizeof *x);
    x->src = xmalloc(sizeof(int) * (size_t)(max + 1)), x->tgt = xmalloc(sizeof(int) * (size_t)(max + 1));
    return sentence_pair_ids(a->text, a->target, a->given, tokenizer, sv, tv, max, x->src, &x->ns, x->tgt, &x->nt,
                             &x->unknown, a->text_name, a->target_name, "attend to", too_long);
}

void sentence_maps_run(Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const MapsAsk *a, SentenceMaps *x) {
    const int *shown = x->tgt;
    int n_shown = x->nt;
    if (a->search) { /* the list, and the maps of its best unless a target is forced */
        x->K = a->search->decode.nbest;
        x->scores = xmalloc(sizeof(double) * (size_t)x->K), x->ids = xmalloc(sizeof(Seq) * (size_t)x->K);
        TranslateStats st;
        char *line = (char *)a->text;
        SentenceTokens read = {x->src, x->ns}; /* prepare read it: the search reads the same ids */
        x->hyp = translate_lines_ids(m, tokenizer, sv, tv, &line, &read, 1, a->search, &st, x->scores, x->ids);
        if (!a->target) shown = x->ids[0].ids, n_shown = x->ids[0].len;
    } else if (!a->target) {
        x->nt = greedy_ids(m, x->src, x->ns, x->tgt, m->cfg.max_positions - 2), n_shown = x->nt;
    }
    attnmap_capture(m, sv, tv, x->src, x->ns, shown, n_shown, &x->maps);
    attnmap_surface_labels(&x->maps, tokenizer, sv, tv, x->src, a->text, shown, a->target);
}

void sentence_maps_free(SentenceMaps *x) {
    for (int k = 0; x->hyp && k < x->K; k++) free(x->hyp[k]), free(x->ids[k].ids);
    attnmap_free(&x->maps);
    sb_free(&x->unknown);
    free(x->hyp), free(x->ids), free(x->scores), free(x->src), free(x->tgt);
    memset(x, 0, sizeof *x);
}
