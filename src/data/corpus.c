/* corpus: see corpus.h. */
#include "data/corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/spm.h"
#include "data/tokenize.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/text.h"

static void count_token(const char *tok, size_t len, void *ctx) {
    (void)tok, (void)len;
    (*(int *)ctx)++;
}

static int blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r') return 0;
    return 1;
}

int corpus_read(Corpus *c, const char *src_path, const char *tgt_path, int tokenizer, int max_len) {
    memset(c, 0, sizeof *c);
    int ns_lines, nt_lines;
    char **s = read_file_lines(src_path, &ns_lines), **t;
    if (!s) return -1;
    t = read_file_lines(tgt_path, &nt_lines);
    if (!t) {
        free_lines(s, ns_lines);
        return -1;
    }
    int rc = 0;
    if (ns_lines != nt_lines) {
        rc = err_set("%s has %d lines but %s has %d: parallel files must be line-aligned", src_path, ns_lines, tgt_path,
                     nt_lines);
        goto done;
    }
    c->lines = ns_lines;
    c->src_text = xmalloc(sizeof(char *) * (size_t)(ns_lines ? ns_lines : 1));
    c->tgt_text = xmalloc(sizeof(char *) * (size_t)(ns_lines ? ns_lines : 1));
    for (int i = 0; i < ns_lines; i++) {
        if (!utf8_valid(s[i], strlen(s[i]))) {
            rc = err_set("%s:%d: invalid UTF-8", src_path, i + 1);
            goto done;
        }
        if (!utf8_valid(t[i], strlen(t[i]))) {
            rc = err_set("%s:%d: invalid UTF-8", tgt_path, i + 1);
            goto done;
        }
        if (blank(s[i]) || blank(t[i])) {
            c->dropped_empty++;
            continue;
        }
        int ns = 0, nt = 0;
        tokenize_line(tokenizer, s[i], count_token, &ns);
        tokenize_line(tokenizer, t[i], count_token, &nt);
        if (ns > max_len || nt > max_len) {
            c->dropped_long++;
            continue;
        }
        /* the kept lines change owner; free_lines skips the NULLs left behind */
        c->src_text[c->n] = s[i], s[i] = NULL;
        c->tgt_text[c->n] = t[i], t[i] = NULL;
        c->n++;
    }
    if (c->n == 0)
        rc = err_set("%s: no usable sentence pairs (%d lines, %d empty, %d over max_len %d)", src_path, c->lines,
                     c->dropped_empty, c->dropped_long, max_len);
done:
    free_lines(s, ns_lines), free_lines(t, nt_lines);
    if (rc != 0) corpus_free(c);
    return rc;
}

typedef struct {
    Vocab *v;
} CountCtx;

static void vocab_add(const char *tok, size_t len, void *ctx) { vocab_count(((CountCtx *)ctx)->v, tok, len, 1); }

void corpus_count(const Corpus *c, int side, int tokenizer, Vocab *v) {
    CountCtx ctx = {v};
    for (int i = 0; i < c->n; i++)
        tokenize_line(tokenizer, side == 0 ? c->src_text[i] : c->tgt_text[i], vocab_add, &ctx);
}

void corpus_build_vocabs(const Corpus *c, int tokenizer, int max_size, int min_freq, int shared, Vocab *src,
                         Vocab *tgt) {
    vocab_init(src);
    vocab_init(tgt);
    corpus_count(c, 0, tokenizer, src);
    corpus_count(c, 1, tokenizer, shared ? src : tgt);
    vocab_prune(src, max_size, min_freq);
    if (shared) {
        vocab_free(tgt);
        vocab_init(tgt);
        for (int i = VOCAB_N_SPECIAL; i < src->size; i++) vocab_count(tgt, src->tokens[i], strlen(src->tokens[i]), 1);
    } else {
        vocab_prune(tgt, max_size, min_freq);
    }
}

typedef struct {
    const Vocab *v;
    int *ids;
    int n, max;
} EncodeCtx;

static void encode_token(const char *tok, size_t len, void *ctx) {
    EncodeCtx *e = ctx;
    if (e->n < e->max) e->ids[e->n++] = vocab_lookup(e->v, tok, len);
}

/* Once its model is loaded (spm_load checks it), SentencePiece fails only for want of
 * memory: that ends the process as xmalloc does, rather than dropping the line unseen. */
static int spm_encode_checked(const Spm *spm, const char *line, int *ids, int max) {
    int n = spm_encode(spm, line, ids, max);
    if (n < 0) exit_out_of_memory(err_msg());
    return n;
}

int encode_line(const char *line, int tokenizer, const Vocab *v, int *ids, int max) {
    if (v->spm) {
        int n = spm_encode_checked(v->spm, line, ids, max);
        return n < max ? n : max;
    }
    EncodeCtx e = {v, ids, 0, max};
    tokenize_line(tokenizer, line, encode_token, &e);
    return e.n;
}

static Seq encode_seq(const char *line, int tokenizer, const Vocab *v) {
    int n = 0;
    /* the whole encoding, however long (normalisation and byte fallback can make more
     * pieces than bytes): a long line is dropped by max_len, never cut short */
    if (v->spm) n = spm_encode_checked(v->spm, line, NULL, 0);
    else tokenize_line(tokenizer, line, count_token, &n);
    Seq s = {xmalloc(sizeof(int) * (size_t)(n ? n : 1)), 0};
    s.len = encode_line(line, tokenizer, v, s.ids, n);
    return s;
}

int encode_target_word(const char *word, int tokenizer, const Vocab *v, char *why, size_t n) {
    Seq s = encode_seq(word, tokenizer, v);
    int len = s.len, id = len == 1 ? s.ids[0] : -1;
    free(s.ids);
    if (len != 1) snprintf(why, n, "is %d tokens of the target vocabulary, not one", len);
    else if (id == VOCAB_UNK) snprintf(why, n, "is not in the target vocabulary");
    /* <pad> and <bos> are tokens no step predicts: written out, they are no word to compare */
    else if (id == VOCAB_PAD || id == VOCAB_BOS)
        snprintf(why, n, "is a token the model never writes (of the special ones, only <eos> is a word)");
    else return id;
    return -1;
}

void corpus_encode(Corpus *c, int tokenizer, const Vocab *src_vocab, const Vocab *tgt_vocab, int max_len) {
    c->src = xmalloc(sizeof(Seq) * (size_t)(c->n ? c->n : 1));
    c->tgt = xmalloc(sizeof(Seq) * (size_t)(c->n ? c->n : 1));
    int kept = 0;
    for (int i = 0; i < c->n; i++) {
        Seq x = encode_seq(c->src_text[i], tokenizer, src_vocab), y = encode_seq(c->tgt_text[i], tokenizer, tgt_vocab);
        free(c->src_text[i]), free(c->tgt_text[i]);
        /* subword lengths are only known now (corpus_read counted words) */
        if (x.len > max_len || y.len > max_len || x.len == 0 || y.len == 0) {
            free(x.ids), free(y.ids);
            if (x.len == 0 || y.len == 0) c->dropped_empty++;
            else c->dropped_long++;
            continue;
        }
        c->src[kept] = x, c->tgt[kept] = y, kept++;
    }
    c->n = kept;
    free(c->src_text), free(c->tgt_text);
    c->src_text = c->tgt_text = NULL;
}

char *decode_ids(const int *ids, int n, int tokenizer, const Vocab *v) {
    if (v->spm) {
        char *text = spm_decode(v->spm, ids, n);
        if (!text) exit_out_of_memory(err_msg()); /* as for encoding, the one cause left */
        return text;
    }
    StrBuf sb = {0};
    sb_append(&sb, "", 0);
    for (int t = 0; t < n; t++) detokenize_append(&sb, tokenizer, vocab_token(v, ids[t]), t == 0);
    return sb.buf;
}

void corpus_free(Corpus *c) {
    if (!c) return;
    if (c->src_text)
        for (int i = 0; i < c->n; i++) free(c->src_text[i]), free(c->tgt_text[i]);
    free(c->src_text), free(c->tgt_text);
    if (c->src)
        for (int i = 0; i < c->n; i++) free(c->src[i].ids), free(c->tgt[i].ids);
    free(c->src), free(c->tgt);
    memset(c, 0, sizeof *c);
}
