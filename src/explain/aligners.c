/* aligners: links from any method's scores, the null decision on them, and their AER
 * (aligners.h). */
#include "explain/aligners.h"

#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "util/err.h"
#include "util/mem.h"

void explain_words(const PairExplanation *e, int tokenizer, int *src_word, int *tgt_word, int *n_src, int *n_tgt) {
    *n_src = align_words(e->maps.src, e->S, tokenizer, src_word);
    *n_tgt = align_words(e->maps.tgt_out, e->T, tokenizer, tgt_word);
}

void explain_links(const PairExplanation *e, const float *scores, const int *src_word, int n_src, const int *tgt_word,
                   int n_tgt, int *links) {
    align_from_map(scores, e->S, tgt_word, e->T, n_tgt, src_word, e->S, n_src, links);
}

const char explain_null_rule[] =
    "null: words are linked one to one, as many as can be, the scores' product the largest, a word's links "
    "discounted where its prefix sent it more than any source word (the last "
    "cross-attention block's contributions); a word left over is unaligned; "
    "--null off links every word to its strongest source word";

void explain_links_null(const PairExplanation *e, const float *scores, const int *src_word, int n_src,
                        const int *tgt_word, int n_tgt, int null, int *links) {
    /* the null decision reads the last cross-attention block's contributions */
    const float *from = null ? contrib_last_cross(&e->contrib) : NULL;
    align_links(scores, from, tgt_word, e->T, n_tgt, src_word, e->S, n_src, links);
}

int explain_side_words(const int *ids, int n, const Vocab *v, int tokenizer) {
    char **labels = xmalloc(sizeof(char *) * (size_t)(n + 1));
    int *word = xmalloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) labels[i] = attnmap_utf8(vocab_token(v, ids[i])); /* as attnmap_capture labels */
    labels[n] = attnmap_utf8(vocab_token(v, VOCAB_EOS));
    int words = align_words(labels, n + 1, tokenizer, word);
    for (int i = 0; i <= n; i++) free(labels[i]);
    free(labels), free(word);
    return words;
}

int explain_gold_links(const char *gold, const char *gold_file, int line, int n_src, int n_tgt, AlignLink **pairs) {
    int cap = (int)(strlen(gold) / 3 + 1); /* each link takes at least 3 bytes ("i-j") */
    *pairs = xmalloc(sizeof(AlignLink) * (size_t)cap);
    int ng = align_parse(gold, *pairs, cap);
    if (ng < 0) return err_set("%s:%d: not Pharaoh alignments (i-j pairs)", gold_file, line), -1;
    int bad = align_out_of_range(*pairs, ng, n_src, n_tgt);
    if (bad >= 0)
        return err_set("%s:%d: link %d-%d is out of range: the pair has %d source and %d target words", gold_file, line,
                       (*pairs)[bad][0], (*pairs)[bad][1], n_src, n_tgt),
               -1;
    return align_unique(*pairs, ng);
}

int explain_align_score(const PairExplanation *e, const ExplainMethod *methods, int n, int tokenizer, int null,
                        const char *gold, const char *gold_file, int line, AlignCounts *counts) {
    int n_src, n_tgt;
    AlignLink *pairs = NULL;
    int *src_word = xmalloc(sizeof(int) * (size_t)e->S), *tgt_word = xmalloc(sizeof(int) * (size_t)e->T);
    int *links = xmalloc(sizeof(int) * (size_t)e->T);
    explain_words(e, tokenizer, src_word, tgt_word, &n_src, &n_tgt);
    int ng = explain_gold_links(gold, gold_file, line, n_src, n_tgt, &pairs);
    for (int k = 0; ng >= 0 && k < n; k++) {
        explain_links_null(e, methods[k].scores, src_word, n_src, tgt_word, n_tgt, null, links);
        align_score(links, n_tgt, pairs, ng, &counts[k]);
    }
    free(pairs), free(src_word), free(tgt_word), free(links);
    return ng < 0 ? -1 : 0;
}
