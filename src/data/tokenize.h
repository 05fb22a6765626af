/* tokenize: text -> token strings and back, for the word and char tokenizers.
 *
 * word: tokens are runs of non-blank characters; detokenize joins them with one space.
 * char: tokens are UTF-8 code points; each run of blanks becomes one "▁" token, so the
 *       spaces survive the round trip. */
#ifndef QKV_TOKENIZE_H
#define QKV_TOKENIZE_H

#include <stddef.h>

#include "config.h" /* TOKENIZER_*: the kinds */
#include "util/text.h"

/* kind is one of config.h's TOKENIZER_*. For bpe and unigram (SentencePiece models),
 * tokenize_line cuts the text into words, which only serves to pre-filter over-long lines. */
#define TOKENIZE_SPACE "\xE2\x96\x81" /* U+2581, stands for a space in char mode */

typedef void (*TokenFn)(const char *tok, size_t len, void *ctx);

/* Calls fn for each token of line (NUL-terminated, valid UTF-8); returns the count. */
int tokenize_line(int kind, const char *line, TokenFn fn, void *ctx);
/* Appends the text for one token to out (with a separating space in word mode, the
 * space itself for char mode's space token). */
void detokenize_append(StrBuf *out, int kind, const char *tok, int first);

#endif
