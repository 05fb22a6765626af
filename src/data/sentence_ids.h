/* sentence_ids: one sentence a person typed, as the ids of a vocabulary, checked the one way
 * every command and the server check it: not empty (a source), within the model's
 * positions, and (a target, which is forced) every word in the vocabulary. The words a
 * vocabulary reads as <unk> are listed, quoted and each once, for a warning (a source) or
 * the refusal (a target). The caller names the sentence in the message ("--text",
 * "\"src\""); what the fault is worth (exit 2, a 400 or a 413) is the caller's. */
#ifndef QKV_DATA_SENTENCE_IDS_H
#define QKV_DATA_SENTENCE_IDS_H

#include "data/vocab.h"
#include "util/text.h"

typedef enum {
    SENTENCE_OK,
    SENTENCE_EMPTY,    /* a source with no token */
    SENTENCE_TOO_LONG, /* more tokens than the positions allow */
    SENTENCE_UNKNOWN,  /* a target with a word the vocabulary lacks */
} SentenceFault;

/* A sentence already read as ids of its vocabulary by encode_line, n of them, uncapped (n
 * may pass any limit): what a caller that counted the text first (the server, to cost a
 * request) hands on, so that the text is read once. The ids are the caller's. */
typedef struct {
    const int *ids;
    int n;
} SentenceTokens;

/* The most bytes a list of unknown words takes in a message; a longer one ends in "...". */
#define SENTENCE_UNKNOWN_MAX 300

/* text as ids of v (tokenizer a config.h TOKENIZER_*): at most max of them, into ids (room
 * for max + 1), their count into *n; given is text already read (NULL: read it here). A target's words must all be
 * known; a source's unknown words (may be none) are listed into unknown (the caller's, may be NULL; sb_free'd) either
 * way. SENTENCE_OK, or the fault. */
SentenceFault sentence_ids(const char *text, const SentenceTokens *given, int tokenizer, const Vocab *v, int max,
                           int target, int *ids, int *n, StrBuf *unknown);
/* A source and, when target is not NULL, a forced target, read as ids of sv and tv (src and
 * tgt with room for max + 1), the source's unknown words into unknown: the pair every
 * analysis of one sentence reads; given (NULL, or the two, each NULL to read here) the sides
 * already read. 0, or -1 with the fault said (text_name and target_name
 * naming the two, verb the empty source's "nothing to VERB"); *too_long (may be NULL) says
 * whether a side was longer than max. */
int sentence_pair_ids(const char *text, const char *target, const SentenceTokens *const *given, int tokenizer,
                      const Vocab *sv, const Vocab *tv, int max, int *src, int *ns, int *tgt, int *nt, StrBuf *unknown,
                      const char *text_name, const char *target_name, const char *verb, int *too_long);
/* The fault's one line, err_set (-1): "<name>: nothing to <verb>: the text is empty",
 * "<name>: more than the <max> tokens this model has positions for", "<name>: not in the
 * target vocabulary: 'w', ...". */
int sentence_fault_error(SentenceFault f, const char *name, const char *verb, int max, const StrBuf *unknown);
/* A word of the user's text quoted for a one-line message ('w'): control bytes and bytes
 * that are not UTF-8 spelled \n, \t, \xNN, as every message spells them. */
void sentence_quote(StrBuf *sb, const char *word);
/* The words of text that v reads as <unk>, quoted and each once, into unknown; how many.
 * given: text's ids already read (NULL: read them here). */
int sentence_unknown_words(const char *text, const SentenceTokens *given, int tokenizer, const Vocab *v,
                           StrBuf *unknown);

#endif
