/* align: word alignments read off cross-attention, and their scores against gold.
 *
 * A cross-attention map (target pieces x source pieces) is first pooled to words: rows
 * of the pieces of one target word are averaged, columns of the pieces of one source
 * word summed (pieces are words with the word tokenizer, characters with char; the
 * space marker and EOS belong to no word). Each target word is then linked to the
 * source word it gives the most weight. Output is Pharaoh "i-j" (source i, target j). */
#ifndef QKV_ALIGN_H
#define QKV_ALIGN_H

typedef struct {
    long hits, predicted, gold; /* |A ∩ S|, |A|, |S| */
} AlignCounts;

/* Word index of each token (-1 for the space marker and EOS); returns the word count.
 * pieces_are_chars: 1 for the char tokenizer (a word runs to the next space marker). */
int align_words(char **tokens, int n, int pieces_are_chars, int *word_of);

/* links[j] = source word linked to target word j; map is rows x cols pieces. */
void align_from_map(const float *map, int cols, const int *tgt_word, int n_tgt_pieces, int n_tgt_words,
                    const int *src_word, int n_src_pieces, int n_src_words, int *links);

/* Parses a Pharaoh line into pairs (src, tgt); returns the count or -1 if malformed. */
int align_parse(const char *line, int (*pairs)[2], int max);
/* Adds one sentence's predicted links against its gold pairs. */
void align_score(const int *links, int n_tgt_words, int (*gold)[2], int n_gold, AlignCounts *c);

double align_precision(const AlignCounts *c);
double align_recall(const AlignCounts *c);
/* AER with sure links only: 1 - 2|A ∩ S| / (|A| + |S|). */
double align_aer(const AlignCounts *c);

#endif
