/* SentencePiece through qkv's C API, on the Multi30k text: training, the round trip,
 * byte fallback, and the refusals. */
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "data/spm.h"
#include "data/tokenize.h"
#include "data/vocab.h"
#include "check.h"

#define M30K "../shared/corpora/multi30k/"

/* nmt_nfkc's rules as they touch this text: NFKC turns a no-break space (U+00A0, in 44
 * lines of train) into a space, and runs of whitespace become one space, none at either
 * end. Any other character NFKC changed would show up here as a difference. */
static char *collapse_spaces(const char *s) {
    StrBuf b = {0};
    sb_append(&b, "", 0);
    for (const char *p = s; *p;) {
        if (*p == ' ' || *p == '\t' || (p[0] == '\xC2' && p[1] == '\xA0')) {
            while (*p == ' ' || *p == '\t' || (p[0] == '\xC2' && p[1] == '\xA0')) p += *p == '\xC2' ? 2 : 1;
            if (*p && b.len) sb_append(&b, " ", 1);
            continue;
        }
        sb_append(&b, p++, 1);
    }
    return b.buf;
}

static void test_round_trip_multi30k(void) {
    int nd, ne;
    char **de = read_file_lines(M30K "train.de", &nd), **en = de ? read_file_lines(M30K "train.en", &ne) : NULL;
    CHECK(en, "cannot read %s (the shared corpora must sit beside the project)", M30K "train.*");
    /* a small joint model trained on a tenth of the text, used on all of it */
    int n_train = nd / 10;
    const char **lines = malloc(sizeof(char *) * (size_t)(2 * n_train));
    for (int i = 0; i < n_train; i++) lines[i] = de[i], lines[n_train + i] = en[i];
    char *model;
    size_t len;
    int rc = spm_train(lines, (size_t)(2 * n_train), "unigram", 2000, &model, &len);
    free(lines);
    CHECK(rc == 0, "training: %s", err_msg());
    Vocab v;
    CHECK(vocab_from_spm(&v, model, len, "model") == 0, "loading: %s", err_msg());
    free(model);
    int differ = 0, unk = 0, first_bad = -1;
    int *ids = malloc(sizeof(int) * 4096);
    for (int side = 0; side < 2; side++) {
        char **text = side ? en : de;
        for (int i = 0; i < nd; i++) {
            int n = encode_line(text[i], TOKENIZER_UNIGRAM, &v, ids, 4096);
            for (int k = 0; k < n; k++) unk += ids[k] == VOCAB_UNK;
            char *back = decode_ids(ids, n, TOKENIZER_UNIGRAM, &v), *want = collapse_spaces(text[i]);
            if (strcmp(back, want) != 0 && differ++ == 0) first_bad = i + side * nd;
            free(back), free(want);
        }
    }
    free(ids);
    vocab_free(&v);
    free_lines(de, nd), free_lines(en, ne);
    CHECK(differ == 0, "%d of %d lines do not survive detokenize(tokenize(x)), the first line %d", differ, 2 * nd, first_bad);
    CHECK(unk == 0, "%d <unk> ids: byte fallback should leave none", unk);
}

/* Text the model never saw (other scripts, emoji) comes back whole through byte pieces. */
static void test_byte_fallback(void) {
    const char *lines[] = {"a small red dog runs", "ein kleiner roter hund rennt", "the dog and the cat", "der hund und die katze"};
    char *model;
    size_t len;
    CHECK(spm_train(lines, 4, "bpe", 300, &model, &len) == 0, "training: %s", err_msg());
    Vocab v;
    CHECK(vocab_from_spm(&v, model, len, "model") == 0, "loading: %s", err_msg());
    const char *odd = "Ζώο 🐕 dog ℃";
    int ids[256], n = encode_line(odd, TOKENIZER_BPE, &v, ids, 256), unk = 0;
    for (int k = 0; k < n; k++) unk += ids[k] == VOCAB_UNK;
    char *back = decode_ids(ids, n, TOKENIZER_BPE, &v);
    /* a line can need more pieces than it has bytes (NFKC expands U+FDFA, byte fallback
     * spells it out): encoding a corpus keeps all of them */
    Corpus c = {.n = 1, .lines = 1};
    c.src_text = malloc(sizeof(char *)), c.tgt_text = malloc(sizeof(char *));
    c.src_text[0] = strdup("the \xEF\xB7\xBA cat"), c.tgt_text[0] = strdup("dog");
    corpus_encode(&c, TOKENIZER_BPE, &v, &v, 1000);
    int whole = c.n == 1 ? c.src[0].len : -1, want = spm_encode(v.spm, "the \xEF\xB7\xBA cat", NULL, 0);
    corpus_free(&c);
    /* NFKC turns ℃ into °C */
    int same = strcmp(back, "Ζώο 🐕 dog °C") == 0;
    free(back), free(model);
    vocab_free(&v);
    CHECK(unk == 0 && same, "unseen characters: %d <unk>, round trip %s", unk, same ? "ok" : "broken");
    CHECK(want > 10 && whole == want, "a line of %d pieces was encoded as %d", want, whole);
}

static void test_refusals(void) {
    Vocab v;
    CHECK(vocab_from_spm(&v, "not a model at all", 18, "x.model") != 0, "garbage accepted as a model");
    CHECK(strstr(err_msg(), "x.model: not a SentencePiece model"), "message: %s", err_msg());
    const char *lines[] = {"one two three", "four five six"};
    char *model;
    size_t len;
    CHECK(spm_train(lines, 2, "bpe", 5000, &model, &len) != 0, "a vocabulary larger than the text can fill was trained");
}

const TestCase spm_tests[] = {
    {"spm_round_trip_on_multi30k", test_round_trip_multi30k},
    {"spm_byte_fallback_no_unk", test_byte_fallback},
    {"spm_refusals", test_refusals},
    {NULL, NULL},
};
