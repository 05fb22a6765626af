/* aligners: word alignments from any method's scores (pair.h's list), not only from the
 * cross-attention at the output step: shift-att, contributions, gradients, leave-one-out.
 * Each target word is linked to the source word of highest score, pieces pooled to words
 * as attention/align_map.h pools a map (rows of a word's pieces averaged, columns summed). */
#ifndef QKV_EXPLAIN_ALIGNERS_H
#define QKV_EXPLAIN_ALIGNERS_H

#include "attention/align_map.h"
#include "explain/pair.h"

/* The word of each piece of e (its vocabulary labels: e->maps as captured, not relabelled
 * for people): src_word (S), tgt_word (T); counts into *n_src, *n_tgt. */
void explain_words(const PairExplanation *e, int tokenizer, int *src_word, int *tgt_word, int *n_src, int *n_tgt);

/* links (n_tgt words) from one method's (T, S) scores. */
void explain_links(const PairExplanation *e, const float *scores, const int *src_word, int n_src, const int *tgt_word,
                   int n_tgt, int *links);

/* explain_links, then with null set the null decision on e's last cross-attention block's
 * contributions and the one-to-one matching on the same scores (align_map.h's align_links):
 * a word written from its prefix has its pairs discounted, and a word left over is
 * unaligned (links[w] = -1). qkv align and qkv explain's
 * AER both read links through it, so their tables agree. */
void explain_links_null(const PairExplanation *e, const float *scores, const int *src_word, int n_src,
                        const int *tgt_word, int n_tgt, int null, int *links);

/* The null decision in one line, as the AER tables state it under their rows */
extern const char explain_null_rule[];

/* The words of a side as explain_words counts them, from its ids alone (n, unframed: the
 * EOS explain_pair adds is counted as it counts it), before any pass over the model. */
int explain_side_words(const int *ids, int n, const Vocab *v, int tokenizer);

/* The sure links of a gold Pharaoh line (named file:line in messages) for a pair of n_src
 * source and n_tgt target words, sorted and de-duplicated into *pairs (malloc'd; the caller
 * frees it, on error too). Their count, or -1 with the error set: a line that is not
 * links, a link past the pair's words. */
int explain_gold_links(const char *gold, const char *gold_file, int line, int n_src, int n_tgt, AlignLink **pairs);

/* Scores each method's links (explain_links_null: with the null decision when null is
 * set) against the pair's gold Pharaoh line (named file:line in messages), adding into
 * counts[k] for method k. 0, or -1 with the error set (a line that
 * is not links, a link past the pair's words) and nothing added. */
int explain_align_score(const PairExplanation *e, const ExplainMethod *methods, int n, int tokenizer, int null,
                        const char *gold, const char *gold_file, int line, AlignCounts *counts);

#endif
