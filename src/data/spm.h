/* spm: SentencePiece subword models through a C API (the one C++ file is spm.cc).
 *
 * qkv's special ids are SentencePiece's too: PAD 0, BOS 1, EOS 2, UNK 3 (see vocab.h), so
 * a model's piece ids are the token ids the network sees. Models are trained with byte
 * fallback (a character never seen in training becomes its UTF-8 bytes, never UNK) and
 * the nmt_nfkc normalisation (NFKC, whitespace collapsed); decoding gives the normalised
 * text back. A model is kept as its serialized bytes, the same bytes as the .model file,
 * which are what a run's vocabulary hash covers.
 *
 * No C++ exception leaves these functions: the library running out of memory is an error
 * like any other ("... out of memory", err_status() 1), set where the function says. */
#ifndef QKV_SPM_H
#define QKV_SPM_H

#include <stddef.h>

typedef struct Spm Spm;

/* Trains a "bpe" or "unigram" model of vocab_size pieces on n lines, one thread (the same
 * lines give the same model). *model_out (malloc'd, *len_out bytes) is the serialized
 * model. -1 with the error set (e.g. a vocabulary too large for the text). */
int spm_train(const char *const *lines, size_t n, const char *kind, int vocab_size, char **model_out, size_t *len_out);

/* A model from its serialized bytes; `what` names it in errors. NULL with the error set
 * when the bytes are not a SentencePiece model, when its normalizer's character map (a
 * trie the library trusts blindly) could lead the library outside the model ("<what>: not
 * a valid SentencePiece model: ..."), or when its special ids are not qkv's. */
Spm *spm_load(const char *bytes, size_t len, const char *what);
void spm_free(Spm *s);

int spm_size(const Spm *s);
const char *spm_piece(const Spm *s, int id); /* "<unk>" for an id out of range (or no memory) */

/* Encodes text into at most max ids; returns how many the whole text needs (which may be
 * more than max: the caller truncates), or -1 with the error set. */
int spm_encode(const Spm *s, const char *text, int *ids, int max);
/* Visits each piece of text's encoding (for counting lengths), -1 with the error set. */
int spm_encode_pieces(const Spm *s, const char *text, void (*fn)(const char *piece, size_t len, void *ctx), void *ctx);
/* The detokenized text of ids (malloc'd); special ids are skipped. Byte pieces that make
 * no whole character read as U+FFFD, one for each longest start of a character (the
 * Unicode standard's practice, and a browser's TextDecoder's: E4 B8 then a space is one
 * U+FFFD and the space), where SentencePiece alone writes one a byte; a NUL byte writes
 * nothing (a line cannot hold it). NULL with the error
 * set when the library runs out of memory. */
char *spm_decode(const Spm *s, const int *ids, int n);

#endif
