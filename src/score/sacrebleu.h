/* sacrebleu: corpus and sentence BLEU and chrF, computed as sacrebleu 2.x computes them with
 * its defaults, so that a figure qkv prints is the figure a paper would print.
 *
 *   BLEU: 13a tokenization (mteval-v13a's rules), mixed case, one reference, n-grams up to
 *         4, "exp" smoothing of zero counts, brevity penalty over the corpus; sentence BLEU
 *         uses the effective order (orders the hypothesis is too short for are left out).
 *   chrF: character n-grams up to 6 (code points, whitespace removed), no word n-grams,
 *         beta 2; precision and recall averaged over the orders both sides have, then F.
 *
 * Statistics are sums over sentences, so a corpus is scored by adding its sentences one
 * at a time and computing the score once. Lines are UTF-8 without their newline. */
#ifndef QKV_SACREBLEU_H
#define QKV_SACREBLEU_H

#include "util/text.h"

#define BLEU_ORDER 4
#define CHRF_ORDER 6
#define CHRF_BETA 2

typedef struct {
    long long counts[BLEU_ORDER]; /* clipped n-gram matches */
    long long totals[BLEU_ORDER]; /* hypothesis n-grams */
    long long sys_len, ref_len;   /* tokens */
} BleuStats;

typedef struct {
    double score;                  /* 0..100 */
    double precisions[BLEU_ORDER]; /* 0..100, after smoothing */
    double bp;                     /* brevity penalty */
} Bleu;

typedef struct {
    long long hyp[CHRF_ORDER], ref[CHRF_ORDER], match[CHRF_ORDER];
} ChrfStats;

/* The 13a tokenization of one line: tokens separated by single spaces, appended to out. */
void bleu_tokenize_13a(const char *line, StrBuf *out);
void bleu_add(BleuStats *s, const char *hyp, const char *ref);
/* effective_order: 0 for corpus BLEU (sacrebleu's default), 1 for sentence BLEU. */
Bleu bleu_compute(const BleuStats *s, int effective_order);

void chrf_add(ChrfStats *s, const char *hyp, const char *ref);
double chrf_compute(const ChrfStats *s); /* 0..100 */

/* sacrebleu's signature strings for the figures above. */
#define BLEU_SIGNATURE "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
#define BLEU_SENTENCE_SIGNATURE "nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:2.6.0"
#define CHRF_SIGNATURE "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"

#endif
