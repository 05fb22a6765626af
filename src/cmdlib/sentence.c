/* sentence: see sentence.h. */
#include "cmdlib/sentence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "data/corpus.h"
#include "decode/decode.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/text.h"

/* A word of the user's text quoted for a one-line message: control bytes and bytes that
 * are not UTF-8 spelled \n, \t, \xNN, as every message spells them. */
static void quote_word(StrBuf *sb, const char *w) {
    sb_append(sb, "'", 1);
    while (*w) {
        size_t n = attnmap_utf8_char(w);
        unsigned char c = (unsigned char)*w;
        if (n && c >= 0x20 && c != 0x7f) sb_append(sb, w, n), w += n;
        else if (c == '\n' || c == '\t') sb_append(sb, c == '\n' ? "\\n" : "\\t", 2), w++;
        else sb_printf(sb, "\\x%02x", c), w++;
    }
    sb_append(sb, "'", 1);
}

/* Encodes text; lists unknown words into `unknown` (may be NULL), each once, and counts
 * them into *n_unknown (may be NULL). Returns the count of ids. */
static int encode_listing(const char *text, int tokenizer, const Vocab *v, int *ids, int max, StrBuf *unknown,
                          int *n_unknown) {
    int n = encode_line(text, tokenizer, v, ids, max);
    if (unknown) {
        /* which words mapped to <unk>: re-encode word by word, split where the tokenizer
         * splits; with characters, the space token between words is no word's */
        char *copy = xstrdup(text);
        int *sub = xmalloc(sizeof(int) * (size_t)(max + 1)), k = 0, first = 1, listed = 0;
        /* the words listed so far (in copy): a word unknown five times is named once */
        const char **seen = xmalloc(sizeof(char *) * (strlen(text) / 2 + 1));
        for (char *tok = strtok(copy, " \t\r\v\f"); tok && k < n; tok = strtok(NULL, " \t\r\v\f"), first = 0) {
            if (tokenizer == TOKENIZER_CHAR && !first) k++;
            int m = encode_line(tok, tokenizer, v, sub, max + 1), unk = 0;
            for (int i = 0; i < m && k < n; i++, k++) unk |= ids[k] == VOCAB_UNK;
            for (int i = 0; unk && i < listed; i++) unk = strcmp(seen[i], tok) != 0;
            if (unk) {
                if (unknown->len) sb_append(unknown, ", ", 2);
                quote_word(unknown, tok);
                seen[listed++] = tok;
            }
        }
        free(copy), free(sub), free(seen);
        if (n_unknown) *n_unknown = listed;
    }
    return n;
}

static int encode_checked(const char *text, int tokenizer, const Vocab *v, int *ids, int max, StrBuf *unknown) {
    return encode_listing(text, tokenizer, v, ids, max, unknown, NULL);
}

int cmd_unknown_source_words(const Run *r, const char *line, StrBuf *unknown) {
    int max = r->model.cfg.max_positions, *ids = xmalloc(sizeof(int) * (size_t)(max + 1)), listed = 0;
    encode_listing(line, r->cfg.data.tokenizer, &r->src_vocab, ids, max, unknown, &listed);
    free(ids);
    return listed;
}

/* The warning of source words read as <unk>; option names the sentence's option, or is NULL. */
static void warn_unknown(const char *option, const StrBuf *unknown) {
    if (unknown->len)
        fprintf(stderr, "qkv: warning: %s%snot in the source vocabulary, read as <unk>: %s\n", option ? option : "",
                option ? ": " : "", unknown->buf);
}

int cmd_source_ids(Run *r, const char *option, const char *text, int *ids, int max) {
    StrBuf unknown = {0};
    int n = encode_checked(text, r->cfg.data.tokenizer, &r->src_vocab, ids, max, &unknown);
    warn_unknown(option, &unknown);
    sb_free(&unknown);
    return n;
}

int cmd_sentence_ids(Run *r, const char *text_option, const char *text, const char *target, int *src, int *n_src,
                     int *tgt, int *n_tgt) {
    int tok = r->cfg.data.tokenizer, max = r->model.cfg.max_positions - 2;
    StrBuf unknown = {0};
    *n_src = encode_checked(text, tok, &r->src_vocab, src, max + 1, &unknown);
    if (*n_src == 0) return sb_free(&unknown), err_set("%s: nothing to attend to: the text is empty", text_option);
    if (*n_src > max)
        return sb_free(&unknown), err_set("%s: more than the %d tokens this model has positions for", text_option,
                                          max); /* read up to max + 1 only */
    warn_unknown(NULL, &unknown);
    sb_free(&unknown);
    if (target) {
        StrBuf bad = {0};
        *n_tgt = encode_checked(target, tok, &r->tgt_vocab, tgt, max + 1, &bad);
        if (bad.len) {
            err_set("--target: not in the target vocabulary: %s", bad.buf);
            sb_free(&bad);
            return -1;
        }
        if (*n_tgt > max) return err_set("--target: more than the %d tokens this model has positions for", max);
        return 0;
    }
    *n_tgt = greedy_ids(&r->model, src, *n_src, tgt, max);
    return 0;
}

int cmd_target_token(const Run *r, const char *option, const char *word) {
    char why[128];
    int id = encode_target_word(word, r->cfg.data.tokenizer, &r->tgt_vocab, why, sizeof why);
    if (id < 0) return err_set("%s: '%s' %s", option, word, why), -1;
    return id;
}
