/* Fuzz target: the corpus reader and the tokenizers. Byte 0 picks the tokenizer (word,
 * char, or a small BPE or unigram SentencePiece model trained once at start-up), byte 1
 * max_len; the rest is the parallel text, source and target parted by the first 0xFE
 * byte (which UTF-8 never holds; without one both sides are the same text). The files
 * are read through corpus_read as `qkv train` reads them; a corpus that reads is
 * counted into vocabularies, encoded and decoded. Every raw line is also encoded and
 * decoded as `qkv translate` does with its standard input, which is not checked for
 * UTF-8. */
#define _GNU_SOURCE /* memfd_create */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/corpus.h"
#include "data/spm.h"
#include "data/tokenize.h"
#include "data/vocab.h"
#include "fuzz.h"
#include "util/err.h"
#include "util/file.h"

static Vocab subword[2]; /* bpe, unigram */
static int fds[2];
static char paths[2][64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *lines[] = {"a small red dog runs",   "ein kleiner roter hund rennt", "the dog and the cat",
                           "der hund und die katze", "zwei männer spielen fußball",  "two men play football"};
    const char *kinds[2] = {"bpe", "unigram"};
    for (int k = 0; k < 2; k++) {
        char *model;
        size_t len;
        if (spm_train(lines, 6, kinds[k], 300, &model, &len) != 0 ||
            vocab_from_spm(&subword[k], model, len, "model") != 0) {
            fprintf(stderr, "fuzz corpus: %s\n", err_msg());
            exit(1);
        }
        free(model);
    }
    /* in-memory regular files: corpus_read opens paths */
    for (int s = 0; s < 2; s++) {
        fds[s] = memfd_create("fuzz-corpus", 0);
        if (fds[s] < 0) {
            perror("memfd_create");
            exit(1);
        }
        snprintf(paths[s], sizeof paths[s], "/proc/self/fd/%d", fds[s]);
    }
    return 0;
}

static void put(int s, const char *p, size_t n) {
    if (ftruncate(fds[s], 0) != 0 || pwrite(fds[s], p, n, 0) != (ssize_t)n) abort();
}

static void encode_raw(const char *text, size_t n, int tokenizer, const Vocab *v) {
    FILE *f = fmemopen((void *)text, n ? n : 1, "r");
    if (!f) return;
    int count;
    char **lines = read_lines(f, &count);
    fclose(f);
    int ids[64];
    for (int i = 0; i < count; i++) {
        int k = encode_line(lines[i], tokenizer, v, ids, 64);
        free(decode_ids(ids, k, tokenizer, v));
    }
    free_lines(lines, count);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int tokenizer = data[0] & 3, max_len = 1 + data[1] % 64, shared = (data[0] >> 2) & 1;
    const char *text = (const char *)data + 2;
    size_t n = size - 2;
    const char *cut = memchr(text, 0xFE, n);
    put(0, text, cut ? (size_t)(cut - text) : n);
    put(1, cut ? cut + 1 : text, cut ? n - (size_t)(cut - text) - 1 : n);
    Vocab words[2];
    const Vocab *src = &subword[tokenizer & 1], *tgt = src;
    Corpus c;
    if (corpus_read(&c, paths[0], paths[1], tokenizer, max_len) == 0) {
        if (!tokenizer_is_subword(tokenizer)) {
            corpus_build_vocabs(&c, tokenizer, 40, 1, shared, &words[0], &words[1]);
            src = &words[0], tgt = &words[1];
        }
        corpus_encode(&c, tokenizer, src, tgt, max_len);
        for (int i = 0; i < c.n; i++) {
            if (c.src[i].len > max_len || c.tgt[i].len > max_len || c.src[i].len < 1) abort();
            free(decode_ids(c.src[i].ids, c.src[i].len, tokenizer, src));
            free(decode_ids(c.tgt[i].ids, c.tgt[i].len, tokenizer, tgt));
        }
        corpus_free(&c);
        if (!tokenizer_is_subword(tokenizer)) {
            encode_raw(text, n, tokenizer, &words[0]);
            vocab_free(&words[0]), vocab_free(&words[1]);
        }
    }
    encode_raw(text, n, TOKENIZER_BPE, &subword[data[0] >> 3 & 1]);
    return 0;
}
