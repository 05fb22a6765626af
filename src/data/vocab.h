/* vocab: token string <-> id, built from counts, saved as one token per line; or the
 * pieces of a SentencePiece model, which then does the encoding and decoding.
 *
 * Ids 0..3 are the special tokens in this order; every vocabulary starts with them. */
#ifndef QKV_VOCAB_H
#define QKV_VOCAB_H

#include <stddef.h>
#include <stdint.h>

enum { VOCAB_PAD = 0, VOCAB_BOS = 1, VOCAB_EOS = 2, VOCAB_UNK = 3, VOCAB_N_SPECIAL = 4 };

typedef struct {
    char **tokens;   /* (size) owned strings */
    int64_t *counts; /* (size) frequency while counting; 0 for specials */
    int size, cap;
    int *slots; /* open-addressing hash table of ids, -1 empty */
    size_t n_slots;
    struct Spm *spm; /* a subword vocabulary's model (ids = piece ids), else NULL */
    char *spm_model; /* its serialized bytes, as in the run's .model file */
    size_t spm_len;
} Vocab;

void vocab_init(Vocab *v); /* just the specials */
void vocab_free(Vocab *v);
/* Adds `count` occurrences of a token (inserting it if new). */
void vocab_count(Vocab *v, const char *tok, size_t len, int64_t count);
/* Keeps the specials plus the most frequent tokens with count >= min_freq, at most
 * max_size in all; ties broken by byte order so the result is deterministic. */
void vocab_prune(Vocab *v, int max_size, int min_freq);
int vocab_lookup(const Vocab *v, const char *tok, size_t len); /* VOCAB_UNK if absent */
const char *vocab_token(const Vocab *v, int id);
/* Over the tokens, and for a subword vocabulary over its model's bytes too. */
uint64_t vocab_hash(const Vocab *v);

/* A subword vocabulary from a serialized SentencePiece model (copied); `what` names it
 * in errors. -1 with the error set (not a model, or special ids that are not qkv's). */
int vocab_from_spm(Vocab *v, const char *bytes, size_t len, const char *what);

/* The token-per-line text of the vocabulary file (malloc'd), and back: vocab_parse
 * writes into text; what names it in errors. */
char *vocab_text(const Vocab *v);
int vocab_parse(Vocab *v, char *text, size_t len, const char *what);
int vocab_save(const Vocab *v, const char *path);
int vocab_load(Vocab *v, const char *path); /* -1 with the error set (names the file) */

#endif
