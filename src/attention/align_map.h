/* align_map: word alignments read off a cross-attention map, and their scores against gold.
 *
 * A cross-attention map (target pieces x source pieces) is first pooled to words: a
 * target word is read at its first piece's row, where the word is chosen (its other
 * pieces spell it out from the prefix), and the columns of one source word's pieces are
 * summed (pieces are words with the word tokenizer, characters with char; the
 * space marker and EOS belong to no word; subword pieces join the word their first,
 * marked piece starts). Each target word is then linked to the
 * source word it gives the most weight. Output is Pharaoh "i-j" (source i, target j).
 *
 * The null decision (`qkv align --null on`, the default) weighs the prefix against the
 * source: in the last decoder layer's cross-attention block, what the prefix (the
 * residual) sent a target word against what each source word sent it (contributions,
 * explain/contrib.h). The words are then linked one to one where they can be (align_match,
 * a matching: as many links as there can be, and of those linkings the one whose scores
 * multiply to the most), a word's pairs discounted by strongest source word / prefix where
 * its prefix sent more, so that a word written from its prefix weighs less than the words
 * that came from the source. A word left over is unaligned. No threshold to pick: one rule
 * for every run and every reading. The matching is also what a determiner needs: it reads
 * its noun for the gender, often more than the noun's word does, and the noun's word still
 * takes the noun. --null off: every word to its argmax. */
#ifndef QKV_ALIGN_MAP_H
#define QKV_ALIGN_MAP_H

typedef struct {
    long hits, predicted, gold; /* |A ∩ S|, |A|, |S| */
    long words;                 /* target words scored: those left unaligned are words - predicted */
} AlignCounts;

/* One link, Pharaoh's "i-j": {source word i, target word j}. */
typedef int AlignLink[2];

/* Word index of each token (-1 for the space marker and the EOS that ends the tokens);
 * returns the word count. tokenizer: TOKENIZER_WORD (every other token a word, whatever
 * it spells), TOKENIZER_CHAR (a word runs to the next space marker) or a subword kind,
 * whose tokens are the vocabulary's pieces (a piece that starts with the space marker
 * starts a word; labels decoded for people have lost it). */
int align_words(char **tokens, int n, int tokenizer, int *word_of);

/* links[j] = source word linked to target word j; map is rows x cols pieces. */
void align_from_map(const float *map, int cols, const int *tgt_word, int n_tgt_pieces, int n_tgt_words,
                    const int *src_word, int n_src_pieces, int n_src_words, int *links);

/* The null decision's discount of each target word: weight[w] = strongest / prefix where
 * the prefix column outweighs every source word (pooled as align_from_map pools: a word's
 * first row, a source word's pieces summed), 1 otherwise (a tie, a prefix that sent nothing,
 * a sentence without source words). from is (n_tgt_pieces, n_src_pieces + 1): what each
 * source piece sent each target piece, then what came from no source word. */
void align_null_weights(const float *from, int n_src_pieces, const int *tgt_word, int n_tgt_pieces, int n_tgt_words,
                        const int *src_word, int n_src_words, double *weight);

/* The source columns of a block of contributions as the null decision reads them (from:
 * rows x (cols + 1), what each source piece sent, then what came from no source word)
 * into out (rows x cols): the map the contributions' reading links from. */
void align_source_columns(const float *from, int rows, int cols, float *out);

/* One to one, a matching (SimAlign's "match", Jalili Sabet et al. 2020, on log scores):
 * of every (target word, source word) pair of map, pooled (a word's first row, a source
 * word's pieces summed) and times the word's weight (NULL: 1), as many are linked as can be
 * with each source word and each target word taken once, and of those linkings the one whose
 * scores multiply to the most (util/assignment.h solves it exactly). The product, not the
 * sum, since the scores are shares: a link a word gives almost nothing spoils the linking.
 * Taking the strongest pair first (competitive linking, as qkv did before) gave a Multi30k
 * determiner its noun, which it reads more than the noun's word does, and the noun the
 * determiner. Words with links[w] = -1 stay unaligned and take no source word. A word left
 * over (the source words ran out, or it gives the free ones nothing) is left unaligned under
 * weights, and keeps its argmax without (NULL). */
void align_match(const float *map, int cols, const int *tgt_word, int n_tgt_pieces, int n_tgt_words,
                 const int *src_word, int n_src_pieces, int n_src_words, const double *weight, int *links);

/* The links of one reading, map (n_tgt_pieces x n_src_pieces): align_from_map's, then, when
 * from (as align_null_weights takes it) is given, align_match under its weights: what
 * `qkv align` and `qkv explain --gold` link with --null on (from NULL: --null off). */
void align_links(const float *map, const float *from, const int *tgt_word, int n_tgt_pieces, int n_tgt_words,
                 const int *src_word, int n_src_pieces, int n_src_words, int *links);

/* Parses a Pharaoh line into pairs (src, tgt); returns the count or -1 if malformed.
 * Links are "i-j" of decimal digits, separated by blanks; a line holds at most
 * strlen(line) / 3 + 1 of them, room enough for max. */
int align_parse(const char *line, AlignLink *pairs, int max);
/* Sorts the pairs and drops repeated links (gold links are a set: a link written twice
 * is still one sure link); returns the new count. */
int align_unique(AlignLink *pairs, int n);
/* Index of the first pair naming a word past n_src_words source or n_tgt_words target
 * words, or -1 when all are within the sentence. */
int align_out_of_range(AlignLink *pairs, int n, int n_src_words, int n_tgt_words);
/* Adds one sentence's predicted links against its gold pairs. */
void align_score(const int *links, int n_tgt_words, AlignLink *gold, int n_gold, AlignCounts *c);

double align_precision(const AlignCounts *c);
double align_recall(const AlignCounts *c);
/* AER with sure links only: 1 - 2|A ∩ S| / (|A| + |S|). */
double align_aer(const AlignCounts *c);

#endif
