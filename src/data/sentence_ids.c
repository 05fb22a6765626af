/* sentence_ids: see sentence_ids.h. */
#include "data/sentence_ids.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "data/corpus.h"
#include "util/err.h"
#include "util/mem.h"

void sentence_quote(StrBuf *sb, const char *w) {
    sb_append(sb, "'", 1);
    while (*w) {
        size_t n = utf8_char(w);
        unsigned char c = (unsigned char)*w;
        if (n && c >= 0x20 && c != 0x7f) sb_append(sb, w, n), w += n;
        else if (c == '\n' || c == '\t') sb_append(sb, c == '\n' ? "\\n" : "\\t", 2), w++;
        else sb_printf(sb, "\\x%02x", c), w++;
    }
    sb_append(sb, "'", 1);
}

/* Which words of text (its n ids) v read as <unk>: each word encoded again alone, split
 * where the tokenizer splits; with characters, the space token between words is no word's.
 * Listed into unknown, each once; how many. */
static int list_unknown(const char *text, const int *ids, int n, int tokenizer, const Vocab *v, StrBuf *unknown) {
    int any = 0;
    for (int i = 0; i < n && !any; i++) any = ids[i] == VOCAB_UNK;
    if (!any) return 0; /* nothing to name: the words are not read again */
    char *copy = xstrdup(text);
    size_t cap = strlen(text) + 2;
    int *sub = xmalloc(sizeof(int) * cap), k = 0, first = 1, listed = 0;
    /* the words listed so far (in copy): a word unknown five times is named once */
    const char **seen = xmalloc(sizeof(char *) * (strlen(text) / 2 + 1));
    char *save = NULL;
    for (char *tok = strtok_r(copy, " \t\r\v\f", &save); tok && k < n;
         tok = strtok_r(NULL, " \t\r\v\f", &save), first = 0) {
        if (tokenizer == TOKENIZER_CHAR && !first) k++;
        int m = encode_line(tok, tokenizer, v, sub, (int)cap), unk = 0;
        for (int i = 0; i < m && k < n; i++, k++) unk |= ids[k] == VOCAB_UNK;
        for (int i = 0; unk && i < listed; i++) unk = strcmp(seen[i], tok) != 0;
        if (unk) {
            if (unknown->len) sb_append(unknown, ", ", 2);
            sentence_quote(unknown, tok);
            seen[listed++] = tok;
        }
    }
    free(copy), free(sub), free(seen);
    return listed;
}

int sentence_unknown_words(const char *text, const SentenceTokens *given, int tokenizer, const Vocab *v,
                           StrBuf *unknown) {
    if (given) return list_unknown(text, given->ids, given->n, tokenizer, v, unknown);
    int cap = (int)strlen(text) + 2, *ids = xmalloc(sizeof(int) * (size_t)cap);
    int n = encode_line(text, tokenizer, v, ids, cap), listed = list_unknown(text, ids, n, tokenizer, v, unknown);
    free(ids);
    return listed;
}

SentenceFault sentence_ids(const char *text, const SentenceTokens *given, int tokenizer, const Vocab *v, int max,
                           int target, int *ids, int *n, StrBuf *unknown) {
    if (given) {
        if ((*n = given->n) > max) return SENTENCE_TOO_LONG;
        memcpy(ids, given->ids, sizeof(int) * (size_t)given->n);
    } else if ((*n = encode_line(text, tokenizer, v, ids, max + 1)) > max) { /* one past max: too long */
        return SENTENCE_TOO_LONG;
    }
    if (*n == 0 && !target) return SENTENCE_EMPTY;
    StrBuf words = {0};
    int listed = list_unknown(text, ids, *n, tokenizer, v, &words);
    if (unknown && words.len) sb_append(unknown, words.buf, words.len);
    sb_free(&words);
    return target && listed ? SENTENCE_UNKNOWN : SENTENCE_OK;
}

int sentence_fault_error(SentenceFault f, const char *name, const char *verb, int max, const StrBuf *unknown) {
    switch (f) {
    case SENTENCE_EMPTY: return err_set("%s: nothing to %s: the text is empty", name, verb);
    case SENTENCE_TOO_LONG: return err_set("%s: more than the %d tokens this model has positions for", name, max);
    case SENTENCE_UNKNOWN: {
        const char *w = unknown && unknown->buf ? unknown->buf : "";
        size_t len = strlen(w), keep = len;
        if (len > SENTENCE_UNKNOWN_MAX) /* cut at a character's start */
            for (keep = SENTENCE_UNKNOWN_MAX; keep > 0 && ((unsigned char)w[keep] & 0xC0) == 0x80; keep--) {}
        return err_set("%s: not in the target vocabulary: %.*s%s", name, (int)keep, w, keep < len ? "..." : "");
    }
    case SENTENCE_OK: break;
    }
    return 0;
}

int sentence_pair_ids(const char *text, const char *target, const SentenceTokens *const *given, int tokenizer,
                      const Vocab *sv, const Vocab *tv, int max, int *src, int *ns, int *tgt, int *nt, StrBuf *unknown,
                      const char *text_name, const char *target_name, const char *verb, int *too_long) {
    StrBuf bad = {0};
    SentenceFault f = sentence_ids(text, given ? given[0] : NULL, tokenizer, sv, max, 0, src, ns, unknown);
    if (f != SENTENCE_OK) sentence_fault_error(f, text_name, verb, max, NULL);
    else if (target &&
             (f = sentence_ids(target, given ? given[1] : NULL, tokenizer, tv, max, 1, tgt, nt, &bad)) != SENTENCE_OK)
        sentence_fault_error(f, target_name, verb, max, &bad);
    sb_free(&bad);
    if (too_long) *too_long = f == SENTENCE_TOO_LONG;
    return f == SENTENCE_OK ? 0 : -1;
}
