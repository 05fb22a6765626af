/* SentencePiece through qkv's C API: training, the round trip,
 * byte fallback, and the refusals: crafted character maps (the normalizer's trie, which
 * the library walks unchecked) and running out of memory inside the library. Whatever
 * could crash runs in a child process, so the old crash is a failed test, not a dead
 * test program. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "data/corpus.h"
#include "data/spm.h"
#include "data/tokenize.h"
#include "data/vocab.h"
#include "util/err.h"
#include "util/file.h"
#include "util/text.h"

/* The round trip's text: the scoring fixture's references and its Unicode variant, held by
 * the repository; and Multi30k's training text too where it has been fetched (make
 * multi30k-data), which nothing requires. */
#define SCORING "tests/scoring/"
#define M30K "data/multi30k/"

/* nmt_nfkc's rules as they touch this text: NFKC turns a no-break space (U+00A0, in 44
 * lines of Multi30k's train) into a space and an ellipsis (U+2026, in the fixture) into
 * three full stops, and runs of whitespace become one space, none at either end. Any
 * other character NFKC changed would show up here as a difference. */
static char *nfkc_of_text(const char *s) {
    StrBuf b = {0};
    sb_append(&b, "", 0);
    for (const char *p = s; *p;) {
        if (*p == ' ' || *p == '\t' || (p[0] == '\xC2' && p[1] == '\xA0')) {
            while (*p == ' ' || *p == '\t' || (p[0] == '\xC2' && p[1] == '\xA0')) p += *p == '\xC2' ? 2 : 1;
            if (*p && b.len) sb_append(&b, " ", 1);
            continue;
        }
        if (strncmp(p, "\xE2\x80\xA6", 3) == 0) {
            sb_append(&b, "...", 3), p += 3;
            continue;
        }
        sb_append(&b, p++, 1);
    }
    return b.buf;
}

/* A joint unigram model of vocab_size pieces trained on the first n_train lines of each
 * side, used on every line of both: 0 when each comes back as NFKC left it, with no
 * <unk>; else a description of the first fault in why. */
static int round_trip(char **a, int na, char **b, int nb, int n_train, int vocab_size, char *why, size_t why_n) {
    const char **lines = malloc(sizeof(char *) * (size_t)(2 * n_train));
    for (int i = 0; i < n_train; i++) lines[i] = a[i], lines[n_train + i] = b[i];
    char *model;
    size_t len;
    int rc = spm_train(lines, (size_t)(2 * n_train), "unigram", vocab_size, &model, &len);
    free(lines);
    if (rc != 0) return snprintf(why, why_n, "training: %s", err_msg()), -1;
    Vocab v;
    rc = vocab_from_spm(&v, model, len, "model");
    free(model);
    if (rc != 0) return snprintf(why, why_n, "loading: %s", err_msg()), -1;
    int differ = 0, unk = 0, first_bad = -1;
    int *ids = malloc(sizeof(int) * 4096);
    for (int side = 0; side < 2; side++) {
        char **text = side ? b : a;
        for (int i = 0; i < (side ? nb : na); i++) {
            int n = encode_line(text[i], TOKENIZER_UNIGRAM, &v, ids, 4096);
            for (int k = 0; k < n; k++) unk += ids[k] == VOCAB_UNK;
            char *back = decode_ids(ids, n, TOKENIZER_UNIGRAM, &v), *want = nfkc_of_text(text[i]);
            if (strcmp(back, want) != 0 && differ++ == 0) first_bad = i + side * na;
            free(back), free(want);
        }
    }
    free(ids);
    vocab_free(&v);
    if (differ)
        return snprintf(why, why_n, "%d of %d lines do not survive detokenize(tokenize(x)), the first line %d", differ,
                        na + nb, first_bad),
               -1;
    if (unk) return snprintf(why, why_n, "%d <unk> ids: byte fallback should leave none", unk), -1;
    return 0;
}

static void test_round_trip(void) {
    int na, nb;
    char **a = read_file_lines(SCORING "reference.txt", &na),
         **b = a ? read_file_lines(SCORING "unicode.txt", &nb) : NULL;
    CHECK(b, "cannot read %s: %s", SCORING "{reference,unicode}.txt", err_msg());
    char why[256];
    int rc = round_trip(a, na, b, nb, na / 4, 400, why, sizeof why);
    free_lines(a, na), free_lines(b, nb);
    CHECK(rc == 0, "%s: %s", SCORING, why);
    a = read_file_lines(M30K "train.de", &na);
    if (!a) return; /* not fetched: the fixture's text was enough */
    b = read_file_lines(M30K "train.en", &nb);
    CHECK(b && nb == na, "%s: cannot read it, or not as many lines as train.de", M30K "train.en");
    rc = round_trip(a, na, b, nb, na / 10, 2000, why, sizeof why);
    free_lines(a, na), free_lines(b, nb);
    CHECK(rc == 0, "%s: %s", M30K, why);
}

/* Text the model never saw (other scripts, emoji) comes back whole through byte pieces. */
static void test_byte_fallback(void) {
    const char *lines[] = {"a small red dog runs", "ein kleiner roter hund rennt", "the dog and the cat",
                           "der hund und die katze"};
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

/* Byte pieces read as UTF-8 the way a browser's TextDecoder reads them: one U+FFFD for each
 * longest start of a character (SentencePiece alone writes one a byte), a NUL byte nothing
 * and the text after it kept, and "▁" pieces opening the text dropped as SentencePiece
 * drops them (the exported decoder restates both: docs/export.md). */
static void test_decode_bytes(void) {
    const char *lines[] = {"a small red dog runs", "the dog and the cat"};
    char *model;
    size_t len;
    CHECK(spm_train(lines, 2, "bpe", 300, &model, &len) == 0, "training: %s", err_msg());
    Vocab v;
    CHECK(vocab_from_spm(&v, model, len, "model") == 0, "loading: %s", err_msg());
    int e4 = vocab_lookup(&v, "<0xE4>", 6), b8 = vocab_lookup(&v, "<0xB8>", 6), ad = vocab_lookup(&v, "<0xAD>", 6),
        nul = vocab_lookup(&v, "<0x00>", 6), sp = vocab_lookup(&v, "\xE2\x96\x81", 3),
        dog = vocab_lookup(&v,
                           "\xE2\x96\x81"
                           "dog",
                           6),
        c0 = vocab_lookup(&v, "<0xC0>", 6);
    struct {
        int ids[6], n;
        const char *want;
    } cases[] = {
        {{e4, b8}, 2, "\xEF\xBF\xBD"},          /* cut short: one */
        {{e4, b8, dog}, 3, "\xEF\xBF\xBD dog"}, /* then a piece */
        {{e4, b8, ad, e4},
         4,
         "\xE4\xB8\xAD"
         "\xEF\xBF\xBD"},                           /* whole, then cut */
        {{b8, e4}, 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},  /* two starts */
        {{c0, b8}, 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},  /* no start at all */
        {{nul, dog, nul, sp, dog}, 5, " dog  dog"}, /* NUL writes nothing */
        {{sp, sp, sp, dog}, 4, "dog"},              /* SentencePiece's */
    };
    int ok = e4 > 3 && b8 > 3 && ad > 3 && nul > 3 && sp > 3 && dog > 3 && c0 > 3;
    for (size_t c = 0; ok && c < sizeof cases / sizeof *cases; c++) {
        char *got = decode_ids(cases[c].ids, cases[c].n, TOKENIZER_BPE, &v);
        CHECK(strcmp(got, cases[c].want) == 0, "case %zu: '%s', want '%s'", c, got, cases[c].want);
        free(got);
    }
    CHECK(ok, "the model lacks a piece the cases need: %d %d %d %d %d %d %d", e4, b8, ad, nul, sp, dog, c0);
    free(model);
    vocab_free(&v);
}

static void test_refusals(void) {
    Vocab v;
    CHECK(vocab_from_spm(&v, "not a model at all", 18, "x.model") != 0, "garbage accepted as a model");
    CHECK(strstr(err_msg(), "x.model: not a SentencePiece model"), "message: %s", err_msg());
    const char *lines[] = {"one two three", "four five six"};
    char *model;
    size_t len;
    CHECK(spm_train(lines, 2, "bpe", 5000, &model, &len) != 0,
          "a vocabulary larger than the text can fill was trained");
}

/* ---- a child process for what might crash ---- */

/* What a child reports: 0 for as expected, else a code, with a message. */
typedef int (*ChildFn)(void *arg, char *msg, size_t n);

/* Runs fn in a child: its exit code (its message in msg), or -signal when it died. */
static int in_child(ChildFn fn, void *arg, char *msg, size_t n) {
    int fds[2];
    msg[0] = '\0';
    if (pipe(fds) != 0) return snprintf(msg, n, "pipe failed"), 99;
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        char buf[1024] = "";
        int rc = fn(arg, buf, sizeof buf);
        ssize_t w = write(fds[1], buf, strlen(buf));
        (void)w;
        _exit(rc);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < n && (r = read(fds[0], msg + got, n - 1 - got)) > 0) got += (size_t)r;
    msg[got] = '\0';
    close(fds[0]);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return snprintf(msg, n, "fork failed"), 99;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/* ---- crafted character maps ---- */

static const char *const sample_lines[] = {"a small red dog runs", "ein kleiner roter hund rennt",
                                           "the dog and the cat", "der hund und die katze"};

static size_t get_varint(const unsigned char *p, size_t len, size_t *at) {
    size_t v = 0;
    for (int shift = 0; *at < len; shift += 7) {
        unsigned char b = p[(*at)++];
        v |= (size_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
    }
    return v;
}

/* Where the bytes of field `number` (length-delimited) of the message [from, to) start,
 * and their length; 0 if absent. Only what a model trained here holds is understood. */
static int find_field(const unsigned char *p, size_t from, size_t to, unsigned number, size_t *at, size_t *len) {
    for (size_t i = from; i < to;) {
        size_t tag = get_varint(p, to, &i), n = 0;
        if ((tag & 7) == 0) get_varint(p, to, &i);
        else if ((tag & 7) == 5) i += 4;
        else if ((tag & 7) == 1) i += 8;
        else if ((tag & 7) == 2) {
            n = get_varint(p, to, &i);
            if (tag >> 3 == number) return *at = i, *len = n, 1;
            i += n;
        } else return 0;
    }
    return 0;
}

/* The normalizer's precompiled_charsmap inside a serialized model. */
static int find_charsmap(const char *model, size_t len, size_t *at, size_t *size) {
    const unsigned char *p = (const unsigned char *)model;
    size_t spec, spec_len;
    return find_field(p, 0, len, 3, &spec, &spec_len) && find_field(p, spec, spec + spec_len, 2, at, size);
}

static size_t put_varint(unsigned char *p, size_t v) {
    size_t n = 0;
    do p[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)), v >>= 7;
    while (v);
    return n;
}

/* The model with a second normalizer_spec holding only this character map: protobuf
 * merges the two, and the later map is the one the library uses (malloc'd). */
static char *with_charsmap(const char *model, size_t len, const void *map, size_t map_len, size_t *len_out) {
    unsigned char spec[12], inner[12]; /* the two fields' tags and lengths */
    size_t ni = 1 + put_varint(inner + 1, map_len), ns = 1 + put_varint(spec + 1, ni + map_len);
    spec[0] = 0x1A, inner[0] = 0x12; /* field 3 of the model, field 2 of the spec: length-delimited */
    char *out = malloc(len + ns + ni + map_len);
    memcpy(out, model, len);
    memcpy(out + len, spec, ns);
    memcpy(out + len + ns, inner, ni);
    memcpy(out + len + ns + ni, map, map_len);
    *len_out = len + ns + ni + map_len;
    return out;
}

/* A character map built by hand: a trie of n_units units, then the replacement text. */
typedef struct {
    uint32_t units[40 * 256];
    size_t n_units;
    char text[16];
    size_t text_len;
} Charsmap;

/* A node at pos with its children at base ^ byte (and, with a leaf, its leaf at base). */
static void trie_node(Charsmap *m, uint32_t pos, unsigned label, int has_leaf, uint32_t base) {
    m->units[pos] = label | (uint32_t)has_leaf << 8 | (pos ^ base) << 10;
}

static void trie_leaf(Charsmap *m, uint32_t pos, uint32_t text_at) { m->units[pos] = 1u << 31 | text_at; }

/* Rules for "a", "aa", ... (depth of them), each replaced by "b": node i at block i's
 * 'a' slot, its leaf at the start of block i + 1. */
static void chain_map(Charsmap *m, int depth) {
    memset(m, 0, sizeof *m);
    m->n_units = 256 * (size_t)(depth + 2);
    /* as darts-clone fills them: a free unit's label never matches its slot's byte */
    for (size_t i = 0; i < m->n_units; i++) m->units[i] = (uint32_t)(i & 0xFF) ^ 0xFF;
    trie_node(m, 0, 0, 0, 256);
    for (int i = 1; i <= depth; i++) {
        trie_node(m, 256 * (uint32_t)i ^ 'a', 'a', 1, 256 * (uint32_t)(i + 1));
        trie_leaf(m, 256 * (uint32_t)(i + 1), 0);
    }
    memcpy(m->text, "b", 2), m->text_len = 2;
}

static unsigned char *map_bytes(const Charsmap *m, size_t *len) {
    size_t trie = 4 * m->n_units;
    unsigned char *b = malloc(4 + trie + m->text_len);
    for (int k = 0; k < 4; k++) b[k] = (unsigned char)(trie >> (8 * k));
    for (size_t i = 0; i < m->n_units; i++)
        for (int k = 0; k < 4; k++) b[4 + 4 * i + (size_t)k] = (unsigned char)(m->units[i] >> (8 * k));
    memcpy(b + 4 + trie, m->text, m->text_len);
    *len = 4 + trie + m->text_len;
    return b;
}

typedef struct {
    const char *model;
    size_t len;
    const char *text; /* encoded and decoded when the model loads */
} LoadJob;

/* In the child: 0 and the error when the model is refused; 1 when it loads (and its
 * text survives an encode and a decode); a crash is the parent's to see. */
static int load_child(void *arg, char *msg, size_t n) {
    LoadJob *j = arg;
    Spm *s = spm_load(j->model, j->len, "x.model");
    if (!s) return snprintf(msg, n, "%s", err_msg()), 0;
    int ids[4096], k = spm_encode(s, j->text, ids, 4096);
    char *back = k >= 0 ? spm_decode(s, ids, k < 4096 ? k : 4096) : NULL;
    snprintf(msg, n, "loaded; encoded as %d ids", k);
    free(back);
    spm_free(s);
    return 1;
}

/* Every byte value after every other (the trie is tried at each position of a text). */
static char *all_bytes_text(void) {
    char *t = malloc(255 * 2 + 1);
    size_t k = 0;
    for (int c = 1; c < 256; c++) t[k++] = (char)c, t[k++] = (char)(256 - c);
    t[k] = '\0';
    return t;
}

/* Refused with a message holding want, not loaded, not crashed on. */
static int refused(const char *model, size_t len, const char *text, const char *want, char *msg, size_t n) {
    LoadJob j = {model, len, text};
    int rc = in_child(load_child, &j, msg, n);
    if (rc < 0) snprintf(msg, n, "crashed with signal %d", -rc);
    return rc == 0 && strstr(msg, want) != NULL;
}

static void test_crafted_charsmap_refused(void) {
    char *model, *text = all_bytes_text(), msg[1024];
    size_t len, at, size;
    CHECK(spm_train(sample_lines, 4, "bpe", 300, &model, &len) == 0, "training: %s", err_msg());
    CHECK(find_charsmap(model, len, &at, &size) && size > 4 + 256 * 4, "no character map in the trained model");
    /* the root unit sent a gigabyte past the trie (what crashed SentencePiece itself) */
    char *bad = malloc(len);
    memcpy(bad, model, len);
    uint32_t root = 0x1FFFFFu << 10 | 1u << 9;
    for (int k = 0; k < 4; k++) bad[at + 4 + (size_t)k] = (char)(root >> (8 * k));
    int ok = refused(bad, len, "a small red dog",
                     "x.model: not a valid SentencePiece model: "
                     "normalizer_spec.precompiled_charsmap: trie unit 0 leads to units",
                     msg, sizeof msg);
    CHECK(ok, "a model whose trie root points past the trie: %s", msg);
    /* one unit further in: the first of the root's children (a byte some rule starts
     * with), sent past the trie the same way */
    memcpy(bad, model, len);
    const unsigned char *units = (const unsigned char *)model + at + 4;
    size_t n_units = (size - 4) / 4;
#define UNIT(i)                                                                                          \
    ((uint32_t)units[4 * (i)] | (uint32_t)units[4 * (i) + 1] << 8 | (uint32_t)units[4 * (i) + 2] << 16 | \
     (uint32_t)units[4 * (i) + 3] << 24)
    uint32_t base = (UNIT(0) >> 10) << ((UNIT(0) & (1u << 9)) >> 6), node = 0, c;
    for (c = 1; c < 256 && !node; c++)
        if ((base ^ c) < n_units && (UNIT(base ^ c) & (1u << 31 | 0xFF)) == c) node = base ^ c;
#undef UNIT
    CHECK(node, "the trained model's trie has no rules");
    uint32_t u = (c - 1) | 0x1FFFFFu << 10 | 1u << 9; /* bit 31 clear: a leaf has no label */
    for (int k = 0; k < 4; k++) bad[at + 4 + 4 * (size_t)node + (size_t)k] = (char)(u >> (8 * k));
    char want[64];
    snprintf(want, sizeof want, "trie unit %u leads to units", node);
    ok = refused(bad, len, text, want, msg, sizeof msg);
    CHECK(ok, "a model whose node for byte 0x%02x points past the trie: %s", c - 1, msg);
    free(bad);

    /* the real model loads, its map at work (NFKC), and a second copy of the map, which
     * the checks see as a second spec, changes nothing */
    size_t len2;
    char *twice = with_charsmap(model, len, model + at, size, &len2);
    Spm *a = spm_load(model, len, "model"), *b = spm_load(twice, len2, "model twice");
    CHECK(a && b, "a real model refused: %s", err_msg());
    int wide[64], plain[64], nw = spm_encode(a, "ＡＢＣ ﬁ ℃", wide, 64), np = spm_encode(a, "ABC fi °C", plain, 64);
    CHECK(nw > 0 && nw == np && memcmp(wide, plain, sizeof(int) * (size_t)nw) == 0, "NFKC was not applied");
    const char *probe[] = {"a small red dog runs", "Ζώο 🐕 dog ℃ ＡＢＣ ﬁ", text};
    for (int i = 0; i < 3; i++) {
        int ia[2048], ib[2048], na = spm_encode(a, probe[i], ia, 2048), nb = spm_encode(b, probe[i], ib, 2048);
        CHECK(na > 0 && na == nb && memcmp(ia, ib, sizeof(int) * (size_t)(na < 2048 ? na : 2048)) == 0,
              "text %d encodes differently: %d and %d ids", i, na, nb);
    }
    spm_free(a), spm_free(b);
    free(twice), free(model), free(text);
}

/* Hand-made maps on a real model: the layout as the library reads it (a rule "a" -> "b"
 * is applied), then one fault at a time. */
static void test_charsmap_faults(void) {
    char *model, msg[1024];
    size_t len, map_len, len2;
    CHECK(spm_train(sample_lines, 4, "bpe", 300, &model, &len) == 0, "training: %s", err_msg());
    Charsmap *m = malloc(sizeof *m);
    chain_map(m, 1);
    unsigned char *map = map_bytes(m, &map_len);
    char *crafted = with_charsmap(model, len, map, map_len, &len2);
    free(map);
    Spm *s = spm_load(crafted, len2, "crafted");
    free(crafted);
    CHECK(s, "a sound hand-made map refused: %s", err_msg());
    int x[64], y[64], z[64];
    int nx = spm_encode(s, "a", x, 64), ny = spm_encode(s, "b", y, 64), nz = spm_encode(s, "d", z, 64);
    spm_free(s);
    CHECK(nx > 0 && nx == ny && memcmp(x, y, sizeof(int) * (size_t)nx) == 0, "the rule a -> b was not applied");
    CHECK(nz != ny || memcmp(z, y, sizeof(int) * (size_t)ny) != 0, "d was replaced too");

    enum { PAST_TEXT, NO_NUL, LOOP, TRIE_TOO_LONG, NESTED_33, NESTED_32 };
    static const struct {
        int fault;
        const char *what, *want; /* want NULL: loads */
    } faults[] = {
        {PAST_TEXT, "replacement past the text", "trie unit 353 points at byte 7 of the 2 bytes of replacements"},
        {NO_NUL, "replacement without a NUL", "after the last NUL"},
        {LOOP, "a loop", "the trie loops back to unit 353"},
        {TRIE_TOO_LONG, "a trie longer than the map", "a trie of"},
        {NESTED_33, "33 nested rules", "trie unit 353 starts 33 nested rules; SentencePiece keeps at most 32 matches"},
        {NESTED_32, "32 nested rules", NULL},
    };
    char aaa[41];
    memset(aaa, 'a', 40), aaa[40] = '\0';
    for (size_t f = 0; f < sizeof faults / sizeof *faults; f++) {
        chain_map(m, faults[f].fault == NESTED_33 ? 33 : faults[f].fault == NESTED_32 ? 32 : 1);
        switch (faults[f].fault) {
        case PAST_TEXT: trie_leaf(m, 512, 7); break;
        case NO_NUL: m->text_len = 1; break; /* "b" without its NUL */
        case LOOP:                           /* the 'a' node's children are the root's: itself again */
            trie_node(m, 353, 'a', 1, 256);
            trie_leaf(m, 256, 0);
            break;
        }
        map = map_bytes(m, &map_len);
        if (faults[f].fault == TRIE_TOO_LONG) /* the trie's size: 1 byte more than the map holds after it */
            map[0] = (unsigned char)(map_len - 3), map[1] = (unsigned char)((map_len - 3) >> 8);
        crafted = with_charsmap(model, len, map, map_len, &len2);
        LoadJob j = {crafted, len2, aaa};
        int rc = in_child(load_child, &j, msg, sizeof msg);
        free(map), free(crafted);
        if (faults[f].want) CHECK(rc == 0 && strstr(msg, faults[f].want), "%s: exit %d: %s", faults[f].what, rc, msg);
        else CHECK(rc == 1, "%s: exit %d: %s", faults[f].what, rc, msg);
    }
    free(m), free(model);
}

/* ---- out of memory inside the library ---- */

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

typedef struct {
    const char *model;
    size_t len;
    int what; /* 0 load, 1 encode, 2 decode */
} OomJob;

/* In the child: address space capped a little above what it uses now, then a call whose
 * work needs far more. 0 when it returned qkv's out-of-memory error. */
static int oom_child(void *arg, char *msg, size_t n) {
    OomJob *j = arg;
    const size_t big = (size_t)64 << 20;
    Spm *s = j->what ? spm_load(j->model, j->len, "model") : NULL;
    if (j->what && !s) return snprintf(msg, n, "loading: %s", err_msg()), 2;
    /* the inputs are made before the cap: a text of `big` bytes, as many ids, or the
     * model padded with an unknown field of `big` bytes */
    char *text = malloc(big + 1), *padded = malloc(j->len + 16 + big);
    int *ids = malloc(sizeof(int) * (big / 4));
    if (!text || !padded || !ids) return snprintf(msg, n, "no memory for the inputs"), 2;
    for (size_t i = 0; i < big; i++) text[i] = "abcd "[i % 5];
    text[big] = '\0';
    for (size_t i = 0; i < big / 4; i++) ids[i] = 4 + (int)(i % 200);
    memcpy(padded, j->model, j->len);
    unsigned char head[16];
    head[0] = 0xC2, head[1] = 0x3E; /* field 1000, length-delimited */
    size_t k = 2 + put_varint(head + 2, big);
    memcpy(padded + j->len, head, k);
    memset(padded + j->len + k, 'x', big);
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || fscanf(f, "%lu", &pages) != 1) return snprintf(msg, n, "cannot read /proc/self/statm"), 2;
    fclose(f);
    struct rlimit rl;
    getrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)16 << 20);
    if (setrlimit(RLIMIT_AS, &rl) != 0) return snprintf(msg, n, "setrlimit failed"), 2;
    int failed;
    if (j->what == 0) {
        Spm *p = spm_load(padded, j->len + k + big, "padded.model");
        failed = p == NULL;
        spm_free(p);
    } else if (j->what == 1) failed = spm_encode(s, text, NULL, 0) < 0;
    else {
        char *t = spm_decode(s, ids, (int)(big / 4));
        failed = t == NULL;
        free(t);
    }
    if (!failed) return snprintf(msg, n, "succeeded under a %lu MiB cap", (unsigned long)(rl.rlim_cur >> 20)), 3;
    snprintf(msg, n, "%s", err_msg());
    return strstr(err_msg(), "out of memory") && err_status() == 1 ? 0 : 4;
}

/* std::bad_alloc thrown inside SentencePiece is qkv's one-line error (exit status 1),
 * never an exception loose in C code (which aborts). */
static void test_out_of_memory_is_an_error(void) {
#ifdef UNDER_ASAN
    return; /* ASan's allocator reports and dies rather than return NULL under a cap */
#endif
    char *model, msg[1024];
    size_t len;
    CHECK(spm_train(sample_lines, 4, "bpe", 300, &model, &len) == 0, "training: %s", err_msg());
    static const char *const what[] = {"spm_load", "spm_encode", "spm_decode"};
    static const char *const want[] = {"padded.model: out of memory", "encoding with SentencePiece: out of memory",
                                       "decoding with SentencePiece: out of memory"};
    for (int w = 0; w < 3; w++) {
        OomJob j = {model, len, w};
        int rc = in_child(oom_child, &j, msg, sizeof msg);
        if (rc < 0) {
            free(model);
            CHECK(0, "%s out of memory: killed by signal %d (an exception escaped into C?)", what[w], -rc);
        }
        if (rc != 0 || strcmp(msg, want[w]) != 0) free(model);
        CHECK(rc == 0, "%s out of memory: exit %d: %s", what[w], rc, msg);
        CHECK(strcmp(msg, want[w]) == 0, "%s out of memory: '%s', expected '%s'", what[w], msg, want[w]);
    }
    free(model);
}

const TestCase spm_tests[] = {
    {"spm_round_trip", test_round_trip},
    {"spm_byte_fallback_no_unk", test_byte_fallback},
    {"spm_decode_bytes_as_a_browser_reads_them", test_decode_bytes},
    {"spm_refusals", test_refusals},
    {"spm_crafted_charsmap_refused", test_crafted_charsmap_refused},
    {"spm_charsmap_faults", test_charsmap_faults},
    {"spm_out_of_memory_is_an_error", test_out_of_memory_is_an_error},
    {NULL, NULL},
};
