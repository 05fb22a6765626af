/* Data path: tokenizers, vocabularies, corpora, batches, weights files. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "data/batch.h"
#include "data/corpus.h"
#include "data/tokenize.h"
#include "data/vocab.h"
#include "gradcheck.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/text.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/qkv-test-XXXXXX");
        if (!mkdtemp(tmpdir)) abort();
    }
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

typedef struct {
    char toks[32][16];
    int n;
} TokList;
static void collect(const char *tok, size_t len, void *ctx) {
    TokList *l = ctx;
    if (l->n < 32) snprintf(l->toks[l->n++], 16, "%.*s", (int)len, tok);
}

static void test_tokenize_word_and_char(void) {
    TokList l = {0};
    int n = tokenize_line(TOKENIZER_WORD, "  the  red\tcat ", collect, &l);
    CHECK(n == 3 && strcmp(l.toks[0], "the") == 0 && strcmp(l.toks[2], "cat") == 0, "word split: %d tokens", n);
    memset(&l, 0, sizeof l);
    n = tokenize_line(TOKENIZER_CHAR, "né a", collect, &l);
    CHECK(n == 4, "char split gave %d tokens", n);
    CHECK(strcmp(l.toks[1], "é") == 0 && strcmp(l.toks[2], TOKENIZE_SPACE) == 0, "code points and the space marker");
    StrBuf out = {0};
    for (int i = 0; i < n; i++) detokenize_append(&out, TOKENIZER_CHAR, l.toks[i], i == 0);
    int same = strcmp(out.buf, "né a") == 0;
    sb_free(&out);
    CHECK(same, "char round trip differs");
}

static void test_utf8_validation(void) {
    CHECK(utf8_valid("plain", 5), "ascii");
    CHECK(utf8_valid("\xC3\xA9", 2), "é");
    CHECK(!utf8_valid("\xC3", 1), "truncated sequence accepted");
    CHECK(!utf8_valid("\xC0\xAF", 2), "overlong accepted");
    CHECK(!utf8_valid("\xED\xA0\x80", 3), "surrogate accepted");
    CHECK(!utf8_valid("\xFF", 1), "0xFF accepted");
}

/* RFC 4648's test vectors, each padding case, and a byte above 127 */
static void test_base64(void) {
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar", "\xff\xfe<"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy", "//48"};
    for (int i = 0; i < 8; i++) {
        StrBuf sb = {0};
        sb_append_base64(&sb, in[i], strlen(in[i]));
        CHECK(strcmp(sb.buf ? sb.buf : "", want[i]) == 0, "base64 of '%s': '%s', not '%s'", in[i], sb.buf, want[i]);
        sb_free(&sb);
    }
}

static void test_vocab_build_prune_save_load(void) {
    Vocab v;
    vocab_init(&v);
    vocab_count(&v, "b", 1, 3);
    vocab_count(&v, "a", 1, 3);
    vocab_count(&v, "c", 1, 5);
    vocab_count(&v, "rare", 4, 1);
    vocab_prune(&v, 7, 2);
    CHECK(v.size == 7, "size %d", v.size);
    CHECK(strcmp(vocab_token(&v, 4), "c") == 0 && strcmp(vocab_token(&v, 5), "a") == 0, "order by count, then bytes");
    CHECK(vocab_lookup(&v, "rare", 4) == VOCAB_UNK, "min_freq not applied");
    const char *p = tmp_path("v.vocab");
    CHECK(vocab_save(&v, p) == 0, "save: %s", err_msg());
    Vocab w;
    CHECK(vocab_load(&w, p) == 0, "load: %s", err_msg());
    CHECK(w.size == v.size && vocab_hash(&w) == vocab_hash(&v), "round trip differs");
    CHECK(vocab_lookup(&w, "b", 1) == 6, "lookup after load");
    vocab_free(&w);
    write_text(p, "hello\nworld\n");
    CHECK(vocab_load(&w, p) != 0 && strstr(err_msg(), "not a qkv vocabulary"), "foreign file accepted: %s", err_msg());
    vocab_free(&v);
}

static void test_corpus_ragged_and_filters(void) {
    const char *s = tmp_path("c.src"), *t = tmp_path("c.tgt");
    write_text(s, "a b\nc\n\nd e f g h\nx\n");
    write_text(t, "A B\nC\nD\n\nY\n");
    Corpus c;
    CHECK(corpus_read(&c, s, t, TOKENIZER_WORD, 3) == 0, "%s", err_msg());
    CHECK(c.n == 3 && c.dropped_empty == 2 && c.dropped_long == 0, "n %d empty %d long %d", c.n, c.dropped_empty,
          c.dropped_long);
    corpus_free(&c);
    write_text(s, "a b\nc d e f\n");
    write_text(t, "A\nB\n");
    CHECK(corpus_read(&c, s, t, TOKENIZER_WORD, 3) == 0 && c.n == 1 && c.dropped_long == 1, "long pair not skipped");
    corpus_free(&c);
    write_text(t, "A\nB\nC\n");
    CHECK(corpus_read(&c, s, t, TOKENIZER_WORD, 3) != 0, "ragged files accepted");
    CHECK(strstr(err_msg(), s) && strstr(err_msg(), t) && strstr(err_msg(), "2 lines") && strstr(err_msg(), "has 3"),
          "ragged error must name both files and counts: %s", err_msg());
    write_text(s, "ok\n\xFF\xFE\n");
    write_text(t, "ok\nok\n");
    CHECK(corpus_read(&c, s, t, TOKENIZER_WORD, 3) != 0 && strstr(err_msg(), ":2: invalid UTF-8"), "bad UTF-8: %s",
          err_msg());
}

/* The one line reader: "\r\n" and a missing final '\n' read like plain lines; a binary
 * or missing file is refused with its name. */
static void test_read_file_lines(void) {
    const char *p = tmp_path("lines.txt");
    FILE *f = fopen(p, "wb");
    fputs("one\r\n\ntwo \r\nthree", f);
    fclose(f);
    int n = -1;
    char **lines = read_file_lines(p, &n);
    CHECK(lines && n == 4, "%d lines: %s", n, lines ? "" : err_msg());
    CHECK(strcmp(lines[0], "one") == 0 && lines[1][0] == '\0' && strcmp(lines[2], "two ") == 0 &&
              strcmp(lines[3], "three") == 0,
          "lines '%s' '%s' '%s' '%s'", lines[0], lines[1], lines[2], lines[3]);
    free_lines(lines, n);
    write_text(p, "a\nb\n");
    lines = read_file_lines(p, &n);
    CHECK(lines && n == 2, "a final newline starts no line: %d", n);
    free_lines(lines, n);
    f = fopen(p, "wb");
    fwrite("a\0b\n", 1, 4, f);
    fclose(f);
    CHECK(!read_file_lines(p, &n) && strstr(err_msg(), p) && strstr(err_msg(), "NUL"), "NUL byte: %s", err_msg());
    CHECK(!read_file_lines("/nonexistent/x.txt", &n) && strstr(err_msg(), "/nonexistent/x.txt: "), "missing: %s",
          err_msg());
}

/* Framing: source = ids EOS PAD..., decoder in = BOS ids PAD..., out = ids EOS PAD... */
static void test_batch_frame(void) {
    int ids[3] = {7, 8, 9}, src[6], tin[5], tout[5];
    CHECK(batch_frame_source(ids, 3, src, 6) == 4, "source length");
    int want_src[6] = {7, 8, 9, VOCAB_EOS, VOCAB_PAD, VOCAB_PAD};
    CHECK(memcmp(src, want_src, sizeof src) == 0, "source %d %d %d %d %d %d", src[0], src[1], src[2], src[3], src[4],
          src[5]);
    CHECK(batch_frame_target(ids, 3, tin, tout, 5) == 4, "target length");
    int want_in[5] = {VOCAB_BOS, 7, 8, 9, VOCAB_PAD}, want_out[5] = {7, 8, 9, VOCAB_EOS, VOCAB_PAD};
    CHECK(memcmp(tin, want_in, sizeof tin) == 0 && memcmp(tout, want_out, sizeof tout) == 0, "decoder in/out");
    CHECK(batch_frame_source(ids, 0, src, 1) == 1 && src[0] == VOCAB_EOS, "empty source is EOS alone");
}

/* Corpus of n pairs with lengths varying, already encoded (ids 4..23). */
void make_corpus(Corpus *c, int n) {
    memset(c, 0, sizeof *c);
    c->n = n;
    c->src = xmalloc(sizeof(Seq) * n), c->tgt = xmalloc(sizeof(Seq) * n);
    for (int i = 0; i < n; i++) {
        int ls = 1 + (i * 7) % 13, lt = 1 + (i * 5) % 11;
        c->src[i] = (Seq){xmalloc(sizeof(int) * ls), ls};
        c->tgt[i] = (Seq){xmalloc(sizeof(int) * lt), lt};
        for (int k = 0; k < ls; k++) c->src[i].ids[k] = 4 + (i + k) % 20;
        for (int k = 0; k < lt; k++) c->tgt[i].ids[k] = 4 + (i * 3 + k) % 20;
        c->src[i].ids[0] = 4 + i % 20; /* marks the pair */
    }
}

static void test_batcher_budget_cover_and_padding(void) {
    Corpus c;
    make_corpus(&c, 300);
    Batcher b;
    batcher_init(&b, &c, 120, 7, 1);
    int *seen = xcalloc(300, sizeof(int));
    long padded = 0, real = 0;
    for (int k = 0; k < b.n_batches; k++) {
        ModelBatch mb;
        batcher_get(&b, k, &mb);
        int tokens = 0;
        for (int i = 0; i < mb.B; i++) {
            int idx = b.order[b.batches[k].first + i];
            seen[idx]++;
            tokens += mb.src_len[i] + mb.tgt_len[i];
            CHECK(mb.src[i * mb.S + mb.src_len[i] - 1] == VOCAB_EOS, "source must end in EOS");
            CHECK(mb.tgt_in[i * mb.T] == VOCAB_BOS, "decoder input must start with BOS");
            CHECK(mb.tgt_out[i * mb.T + mb.tgt_len[i] - 1] == VOCAB_EOS, "target must end in EOS");
            for (int t = mb.src_len[i]; t < mb.S; t++) CHECK(mb.src[i * mb.S + t] == VOCAB_PAD, "source padding");
            for (int t = 0; t + 1 < mb.tgt_len[i]; t++)
                CHECK(mb.tgt_in[i * mb.T + t + 1] == mb.tgt_out[i * mb.T + t], "decoder input is target shifted");
        }
        CHECK(mb.B == 1 || tokens <= 120, "batch %d holds %d tokens over the budget", k, tokens);
        real += tokens, padded += (long)mb.B * (mb.S + mb.T);
    }
    for (int i = 0; i < 300; i++) CHECK(seen[i] == 1, "pair %d appears %d times", i, seen[i]);
    CHECK(real * 10 > padded * 7, "length bucketing leaves %.0f%% padding", 100.0 * (padded - real) / padded);
    /* the epoch order depends on (seed, epoch) only */
    int first[64];
    int nb = b.n_batches < 64 ? b.n_batches : 64;
    memcpy(first, b.perm, sizeof(int) * nb);
    batcher_seek(&b, 1, 0);
    CHECK(memcmp(first, b.perm, sizeof(int) * nb) != 0, "epochs 0 and 1 in the same order");
    batcher_seek(&b, 0, 0);
    CHECK(memcmp(first, b.perm, sizeof(int) * nb) == 0, "seek back to epoch 0 differs");
    free(seen);
    batcher_free(&b);
    corpus_free(&c);
}

const TestCase data_tests[] = {
    {"tokenize_word_and_char", test_tokenize_word_and_char},
    {"tokenize_utf8_validation", test_utf8_validation},
    {"text_base64", test_base64},
    {"vocab_build_prune_save_load", test_vocab_build_prune_save_load},
    {"read_file_lines_crlf_last_line_nul", test_read_file_lines},
    {"corpus_ragged_empty_long", test_corpus_ragged_and_filters},
    {"batch_frame_source_and_target", test_batch_frame},
    {"batch_budget_cover_padding_order", test_batcher_budget_cover_and_padding},
    {NULL, NULL},
};
