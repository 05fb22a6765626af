/* corpus: line-aligned parallel files -> pairs of token id sequences.
 *
 * Reads both sides, checks they have the same number of lines and are UTF-8, drops
 * empty pairs and pairs over max_len tokens (counting each reason), builds vocabularies
 * from the training side when asked, and encodes. Knows nothing of batches or models. */
#ifndef QKV_CORPUS_H
#define QKV_CORPUS_H

#include "data/vocab.h"

typedef struct {
    int *ids; /* tokens without BOS/EOS */
    int len;
} Seq;

typedef struct Corpus {
    int n; /* kept pairs */
    Seq *src, *tgt;
    char **src_text, **tgt_text; /* the kept lines, for vocabulary building */
    int lines, dropped_empty, dropped_long;
} Corpus;

/* Reads and filters; -1 with the error set (ragged files name both files and counts). */
int corpus_read(Corpus *c, const char *src_path, const char *tgt_path, int tokenizer, int max_len);
/* Counts the tokens of one side into a vocabulary (before vocab_prune). */
void corpus_count(const Corpus *c, int side, int tokenizer, Vocab *v);
/* Both vocabularies from the corpus (one shared list, copied into both, when shared),
 * as `qkv train` makes them. */
void corpus_build_vocabs(const Corpus *c, int tokenizer, int max_size, int min_freq, int shared, Vocab *src,
                         Vocab *tgt);
/* Encodes both sides with the given vocabularies (a subword vocabulary encodes with its
 * model) and drops pairs whose either side is then empty or over max_len tokens (counted
 * in dropped_long); the lines are freed afterwards. */
void corpus_encode(Corpus *c, int tokenizer, const Vocab *src_vocab, const Vocab *tgt_vocab, int max_len);
void corpus_free(Corpus *c);

/* Encodes one line (unknown tokens -> UNK), at most max ids; returns the count. */
int encode_line(const char *line, int tokenizer, const Vocab *v, int *ids, int max);
/* The id of word when it encodes to exactly one token that the target vocabulary v knows
 * and the model can write (a contrast or a compare word: <eos> is one, <pad> and <bos> are
 * not); otherwise -1, with why (n bytes) saying what the word is instead, to follow it in a
 * message: "is 2 tokens of the target vocabulary, not one", ... */
int encode_target_word(const char *word, int tokenizer, const Vocab *v, char *why, size_t n);
/* The text of ids (malloc'd): detokenized by the subword model, else tokens joined by
 * spaces (word) or concatenated with the space token restored (char). */
char *decode_ids(const int *ids, int n, int tokenizer, const Vocab *v);

#endif
