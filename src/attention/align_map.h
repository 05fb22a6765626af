/* align_map: word alignments read off a cross-attention map, and their scores against gold.
 *
 * A cross-attention map (target pieces x source pieces) is first pooled to words: rows
 * of the pieces of one target word are averaged, columns of the pieces of one source
 * word summed (pieces are words with the word tokenizer, characters with char; the
 * space marker and EOS belong to no word; subword pieces join the word their first,
 * marked piece starts). Each target word is then linked to the
 * source word it gives the most weight. Output is Pharaoh "i-j" (source i, target j). */
#ifndef QKV_ALIGN_MAP_H
#define QKV_ALIGN_MAP_H

typedef struct {
    long hits, predicted, gold; /* |A ∩ S|, |A|, |S| */
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
