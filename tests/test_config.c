/* Config: defaults, every error path with its file:line:col, --set, the resolved config. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "util/clock.h"
#include "util/err.h"

static const char *cfg_path(void) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/qkv-config-test-%d.yaml", (int)getpid());
    return path;
}

/* Loads text as a config (data files: this test's own source, which exists). */
static int load(Config *c, const char *text) {
    FILE *f = fopen(cfg_path(), "w");
    fputs(text, f);
    fclose(f);
    config_defaults(c);
    if (config_load(c, cfg_path()) != 0) return -1;
    return config_validate(c, 1);
}

#define DATA "data:\n  train: {src: tests/test_config.c, tgt: tests/test_config.c}\n"

/* Expects failure with a message containing both fragments. */
#define EXPECT_ERROR(text, frag1, frag2)                                                                         \
    do {                                                                                                         \
        Config c_;                                                                                               \
        CHECK(load(&c_, text) != 0, "accepted: %s", text);                                                       \
        CHECK(strstr(err_msg(), frag1) && strstr(err_msg(), frag2), "message '%s' lacks '%s' / '%s'", err_msg(), \
              frag1, frag2);                                                                                     \
        CHECK(!strchr(err_msg(), '\n'), "message is not one line");                                              \
    } while (0)

static void test_defaults_and_minimal(void) {
    Config c;
    CHECK(load(&c, DATA) == 0, "%s", err_msg());
    CHECK(c.model.d_model == 128 && c.model.heads == 4 && c.train.steps == 4000 && c.train.lr.warmup == 400,
          "defaults");
    CHECK(strncmp(c.name, "qkv-config-test-", 16) == 0, "name defaults to the file's base name, got '%s'", c.name);
    CHECK(strncmp(c.run_dir, "runs/qkv-config-test-", 21) == 0, "run_dir default '%s'", c.run_dir);
}

/* The resolved config of the defaults, byte for byte as config_defaults gave it while it
 * was a hand-written list, before the key table carried the defaults. Each number is the
 * shortest spelling that reads back as the same double, which pins it to the bit, so a
 * default moved by a table edit fails here (test_resolved_floats_read_back_exactly). */
static const char defaults_text[] = "# resolved config: every key, defaults included\n"
                                    "name: \"\"\n"
                                    "run_dir: \"\"\n"
                                    "seed: 1\n"
                                    "data:\n"
                                    "  train:\n"
                                    "    src: \"\"\n"
                                    "    tgt: \"\"\n"
                                    "  valid:\n"
                                    "    src: \"\"\n"
                                    "    tgt: \"\"\n"
                                    "  tokenizer: word\n"
                                    "  spm_model:\n"
                                    "    src: \"\"\n"
                                    "    tgt: \"\"\n"
                                    "  vocab_size: 8000\n"
                                    "  min_freq: 1\n"
                                    "  shared_vocab: false\n"
                                    "  max_len: 100\n"
                                    "model:\n"
                                    "  d_model: 128\n"
                                    "  heads: 4\n"
                                    "  d_ff: 512\n"
                                    "  encoder_layers: 3\n"
                                    "  decoder_layers: 3\n"
                                    "  dropout: 0.1\n"
                                    "  norm: post\n"
                                    "  tie_embeddings: true\n"
                                    "train:\n"
                                    "  steps: 4000\n"
                                    "  minutes: 0\n"
                                    "  batch_tokens: 2048\n"
                                    "  pass_tokens: 2048\n"
                                    "  lr:\n"
                                    "    schedule: noam\n"
                                    "    factor: 1\n"
                                    "    warmup: 400\n"
                                    "    value: 0.0003\n"
                                    "    cooldown: 0\n"
                                    "  adam:\n"
                                    "    beta1: 0.9\n"
                                    "    beta2: 0.98\n"
                                    "    eps: 1e-09\n"
                                    "    weight_decay: 0\n"
                                    "  clip_norm: 1\n"
                                    "  label_smoothing: 0.1\n"
                                    "  log_every: 50\n"
                                    "  valid_every: 500\n"
                                    "  checkpoint_every: 500\n"
                                    "  keep_checkpoints: 3\n"
                                    "  average_last: 0\n"
                                    "  threads: 2\n"
                                    "  valid_bleu: false\n"
                                    "  best_by: loss\n"
                                    "  watch: []\n"
                                    "decode:\n"
                                    "  length_penalty: 1\n";

static void test_defaults_text_pinned(void) {
    Config c;
    config_defaults(&c);
    char *text = config_text(&c, "defaults");
    CHECK(text, "%s", err_msg());
    size_t at = 0; /* the start of the first line that differs */
    while (text[at] && text[at] == defaults_text[at]) at++;
    while (at > 0 && text[at - 1] != '\n') at--;
    char got[80];
    snprintf(got, sizeof got, "%.*s", (int)strcspn(text + at, "\n"), text + at);
    int same = strcmp(text, defaults_text) == 0;
    free(text);
    CHECK(same, "resolved defaults differ: '%s', pinned '%.*s'", got, (int)strcspn(defaults_text + at, "\n"),
          defaults_text + at);
}

/* A row whose default lies outside its own range, or names no choice, is caught here
 * rather than by the first user who leaves the key out. */
static void test_key_table_defaults_in_range(void) { CHECK(config_check_keys() == 0, "%s", err_msg()); }

static void test_errors_name_line_and_column(void) {
    char where[80];
    snprintf(where, sizeof where, "%s:4:3:", cfg_path());
    EXPECT_ERROR(DATA "model:\n  d_modle: 64\n", where, "unknown key 'model.d_modle' (did you mean 'model.d_model'?)");
    EXPECT_ERROR(DATA "train:\n  steps: many\n", "train.steps: expected an integer, got 'many'", ":4:10:");
    EXPECT_ERROR(DATA "model:\n  dropout: 1.0\n", "model.dropout: 1 is out of range [0, 1)", ":4:12:");
    EXPECT_ERROR(DATA "model:\n  dropout: -0.1\n", "out of range", "model.dropout");
    EXPECT_ERROR(DATA "model:\n  d_ff: 0\n", "model.d_ff: 0 is out of range", ":4:9:");
    EXPECT_ERROR(DATA "model:\n  heads: -2\n", "model.heads", "out of range");
    EXPECT_ERROR(DATA "model:\n  d_model: 100\n  heads: 3\n",
                 "model.d_model (100) must be divisible by model.heads (3)", ":4:12:");
    EXPECT_ERROR(DATA "model:\n  norm: sideways\n", "'sideways' is not one of: post, pre", ":4:9:");
    EXPECT_ERROR(DATA "model:\n  tie_embeddings: maybe\n", "expected true or false", "tie_embeddings");
    EXPECT_ERROR("model:\n  d_model: 64\n", "data.train.src is required", cfg_path());
    EXPECT_ERROR("data:\n  train: {src: /nonexistent/x.src, tgt: tests/test_config.c}\n", "'/nonexistent/x.src'",
                 "data.train.src");
    EXPECT_ERROR(DATA "model: [1, 2]\n", "model must be a mapping", ":3:8:");
    EXPECT_ERROR(DATA "model:\n  d_model: 64\n  d_model: 32\n", "duplicate key 'model.d_model'", ":5:3:");
    /* the same key dotted and nested: last-one-wins would hide one of them */
    EXPECT_ERROR(DATA "train.steps: 7\ntrain:\n  steps: 3\n", "duplicate key 'train.steps' (set at line 3 too)",
                 ":5:3:");
    EXPECT_ERROR(DATA "model:\n  d_model: [64\n", "YAML syntax error", cfg_path());
    /* bytes that are not UTF-8 have no mark of libyaml's: their place is counted from the
     * text, in characters (the two bytes of the e-acute are one column) */
    EXPECT_ERROR(DATA "model:\n  d_model: 64\nname: \"h\xc3\xa9h\xff\"\n",
                 "YAML syntax error: invalid leading UTF-8 octet", ":5:11: ");
    EXPECT_ERROR(DATA "train:\n  lr: {schedule: noam, warmup: 0}\n", "train.lr.warmup: 0 is out of range", ":4:32:");
}

char *deep_yaml(size_t depth) {
    char *text = malloc(2 * depth + 8);
    strcpy(text, "seed: ");
    memset(text + 6, '[', depth);
    memset(text + 6 + depth, ']', depth);
    text[6 + 2 * depth] = '\0';
    return text;
}

/* What libyaml would take but a config must not: each refused in one line, quickly. */
static void test_yaml_limits(void) {
    char *text = deep_yaml(400000);
    Config c;
    config_defaults(&c);
    double t0 = now_seconds();
    CHECK(config_parse(&c, text, strlen(text), "deep.yaml") != 0 && strstr(err_msg(), "nested more than"), "%s",
          err_msg());
    CHECK(now_seconds() - t0 < 2, "deep nesting took %.1fs to refuse", now_seconds() - t0);
    free(text);
    EXPECT_ERROR(DATA "---\nseed: 2\n", "a second YAML document", ":3:1:");
    EXPECT_ERROR(DATA "...\nseed: 2\n", "YAML syntax error", ":4:1:");
    EXPECT_ERROR(DATA "name: \"ab\\0cd\"\n", "a string holding a NUL character", ":3:7:");
    EXPECT_ERROR(DATA "name: \"ab\\u0000cd\"\n", "NUL", "");
    EXPECT_ERROR(DATA "\"tr\\nain\": {steps: 1}\n", "unknown key 'tr\\nain'", ":3:1:");
    EXPECT_ERROR(DATA "train:\n  adam: {eps: 0}\n", "train.adam.eps: 0 is out of range", ":4:15:");
    /* a document end with nothing after it is fine */
    config_defaults(&c);
    CHECK(config_parse(&c, DATA "...\n", strlen(DATA "...\n"), "end.yaml") == 0, "%s", err_msg());
    char *big = calloc(CONFIG_TEXT_MAX + 2, 1);
    memset(big, '#', CONFIG_TEXT_MAX + 1);
    CHECK(config_parse(&c, big, CONFIG_TEXT_MAX + 1, "big.yaml") != 0 && strstr(err_msg(), "more than the"), "%s",
          err_msg());
    free(big);
}

static void test_set_overrides(void) {
    Config c;
    CHECK(load(&c, DATA) == 0, "%s", err_msg());
    CHECK(config_set(&c, "train.steps=77") == 0 && c.train.steps == 77, "set steps");
    CHECK(config_set(&c, "train.lr.schedule=constant") == 0 && c.train.lr.schedule == LR_CONSTANT, "set enum");
    /* "-0" is zero, not a negative zero that prints as a learning rate of -0.00e+00 */
    CHECK(config_set(&c, "train.lr.value=-0") == 0 && c.train.lr.value == 0 && !signbit(c.train.lr.value),
          "-0 kept its sign");
    CHECK(config_set(&c, "train.stepz=5") != 0 && strstr(err_msg(), "--set train.stepz=5: unknown key"), "%s",
          err_msg());
    CHECK(config_set(&c, "model.dropout=2") != 0 && strstr(err_msg(), "out of range"), "%s", err_msg());
    CHECK(config_set(&c, "steps") != 0 && strstr(err_msg(), "expected key=value"), "%s", err_msg());
    /* a number past 64 bits is out of range, as one just inside is; a section is no key */
    CHECK(config_set(&c, "train.steps=9223372036854775808") != 0 &&
              strstr(err_msg(), "train.steps: 9223372036854775808 is out of range [1, "),
          "%s", err_msg());
    CHECK(config_set(&c, "train.lr=3") != 0 &&
              strstr(err_msg(), "--set train.lr=3: 'train.lr' is a section, not a key: set one of its keys, such as "
                                "'train.lr."),
          "%s", err_msg());
    CHECK(config_set(&c, "train.l=3") != 0 && strstr(err_msg(), "unknown key 'train.l'"), "a prefix of a section: %s",
          err_msg());
    CHECK(config_set(&c, "model.heads=7") == 0, "set heads");
    CHECK(config_validate(&c, 1) != 0 && strstr(err_msg(), "--set model.d_model") == NULL &&
              strstr(err_msg(), "divisible"),
          "cross-key check after --set: %s", err_msg());
}

/* A schedule's key given on the command line to the other schedule is refused; the same
 * keys in the file are not (a file may hold both schedules' keys, to switch by --set). */
static void test_schedule_keys_set_for_the_other_schedule(void) {
    Config c;
    CHECK(load(&c, DATA "train:\n  lr: {schedule: noam, factor: 2.0, warmup: 100, value: 0.001}\n") == 0, "%s",
          err_msg());
    CHECK(config_validate(&c, 0) == 0, "both schedules' keys in the file: %s", err_msg());
    CHECK(config_set(&c, "train.lr.schedule=constant") == 0 && config_set(&c, "train.lr.value=0.002") == 0 &&
              config_validate(&c, 0) == 0,
          "--set schedule=constant and its value over a noam file: %s", err_msg());
    CHECK(config_set(&c, "train.lr.factor=3") == 0 && config_validate(&c, 0) != 0 &&
              strstr(err_msg(), "--set train.lr.factor: read by train.lr.schedule: noam alone"),
          "--set factor under constant: %s", err_msg());
    CHECK(load(&c, DATA) == 0 && config_set(&c, "train.lr.value=0.1") == 0 && config_validate(&c, 0) != 0 &&
              strstr(err_msg(), "--set train.lr.value: read by train.lr.schedule: constant alone"),
          "--set value under noam: %s", err_msg());
}

/* min_freq the same way: under a SentencePiece tokenizer nothing reads it. */
static void test_min_freq_set_where_nothing_reads_it(void) {
    Config c;
    CHECK(load(&c, DATA "  tokenizer: bpe\n  min_freq: 3\n") == 0 && config_validate(&c, 0) == 0,
          "min_freq in a bpe file: %s", err_msg());
    CHECK(config_set(&c, "data.min_freq=1000000") == 0 && config_validate(&c, 0) != 0 &&
              strstr(err_msg(), "--set data.min_freq: read by data.tokenizer word and char alone"),
          "--set min_freq under bpe: %s", err_msg());
    CHECK(load(&c, DATA) == 0 && config_set(&c, "data.min_freq=2") == 0 && config_validate(&c, 0) == 0,
          "--set min_freq under word: %s", err_msg());
}

static void test_resolved_config_round_trip(void) {
    Config a, b;
    CHECK(load(&a, DATA "model:\n  dropout: 0.3\n  norm: pre\ntrain:\n  lr: {schedule: constant, value: 0.00025}\n") ==
              0,
          "%s", err_msg());
    char out[80];
    snprintf(out, sizeof out, "/tmp/qkv-config-resolved-%d.yaml", (int)getpid());
    CHECK(config_write(&a, out) == 0, "write: %s", err_msg());
    config_defaults(&b);
    CHECK(config_load(&b, out) == 0 && config_validate(&b, 1) == 0, "reload: %s", err_msg());
    CHECK(b.model.dropout == 0.3 && b.model.norm == NORM_PRE && b.train.lr.schedule == LR_CONSTANT &&
              b.train.lr.value == 0.00025 && strcmp(a.name, b.name) == 0 && strcmp(a.run_dir, b.run_dir) == 0,
          "values changed in the round trip");
    unlink(out);
}

/* A float key written and read again is the same double, bit for bit, however many digits
 * it needs: random doubles over [0, 1) at every scale from 1 to 1e-12, and the neighbours
 * of 0.1 (0.1 itself is written as 0.1, one ulp off needs all 17 digits) */
static void test_resolved_floats_read_back_exactly(void) {
    uint64_t state = 42;
    for (int i = 0; i < 2000; i++) {
        Config a, b;
        config_defaults(&a);
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(state >> 11) / 9007199254740992.0; /* 53 random bits */
        a.model.dropout = i == 0 ? 0.1 : i == 1 ? nextafter(0.1, 1) : i == 2 ? nextafter(0.1, 0) : u;
        a.train.lr.value = u * pow(10, -(i % 13));
        char *text = config_text(&a, "floats");
        config_defaults(&b);
        int read = text && config_parse(&b, text, strlen(text), "floats") == 0;
        CHECK(read && b.model.dropout == a.model.dropout && b.train.lr.value == a.train.lr.value,
              "%.17g and %.17g came back as %.17g and %.17g: %s", a.model.dropout, a.train.lr.value, b.model.dropout,
              b.train.lr.value, read ? "" : err_msg());
        CHECK(i != 0 || strstr(text, "\n  dropout: 0.1\n"), "0.1 not written as 0.1");
        free(text);
    }
}

/* Every byte a path may hold comes back from the resolved config as it was: quote,
 * backslash, tab, control bytes, DEL, line breaks YAML would fold, non-ASCII (a name is a
 * directory name, so it keeps to printable characters: quote, backslash, non-ASCII). */
static void test_resolved_config_odd_strings(void) {
    Config a, b;
    CHECK(load(&a, DATA) == 0, "%s", err_msg());
    const char *name = "q\"uote\\back \xc3\xa9 ";
    const char *dir = "/tmp/a \"b\"\\c\td\x01e\n\r\xc2\x85\xc2\x9f\xe2\x80\xa8\xef\xbb\xbf\xf0\x9f\x99\x82 #: x";
    snprintf(a.name, sizeof a.name, "%s", name);
    snprintf(a.run_dir, sizeof a.run_dir, "%s", dir);
    char out[80];
    snprintf(out, sizeof out, "/tmp/qkv-config-odd-%d.yaml", (int)getpid());
    CHECK(config_write(&a, out) == 0, "write: %s", err_msg());
    config_defaults(&b);
    CHECK(config_load(&b, out) == 0 && config_validate(&b, 1) == 0, "reload: %s", err_msg());
    CHECK(strcmp(b.name, name) == 0, "name came back as '%s'", b.name);
    CHECK(strcmp(b.run_dir, dir) == 0, "run_dir came back as '%s'", b.run_dir);
    /* bytes that are not UTF-8 have no YAML spelling: refused, not written wrong */
    CHECK(config_set(&a, "run_dir=/tmp/\xff") == 0 && config_validate(&a, 0) != 0 &&
              strstr(err_msg(), "--set run_dir") && strstr(err_msg(), "UTF-8"),
          "invalid UTF-8 accepted: %s", err_msg());
    CHECK(config_write(&a, out) != 0 && strstr(err_msg(), "run_dir"), "invalid UTF-8 written: %s", err_msg());
    unlink(out);
}

/* train.watch: a list of sentences or {src, tgt} pairs, written back as read; bad items
 * and too many refused with the place named; --set gives one sentence. */
static void test_watch_list(void) {
    Config a, b;
    CHECK(load(&a, DATA "train:\n  watch:\n    - the red cat sleeps\n    - {src: \"a \\\"dog\\\"\", tgt: lo cano}\n") ==
              0,
          "%s", err_msg());
    CHECK(a.train.n_watch == 2 && strcmp(a.train.watch[0].src, "the red cat sleeps") == 0 &&
              a.train.watch[0].tgt[0] == 0 && strcmp(a.train.watch[1].src, "a \"dog\"") == 0 &&
              strcmp(a.train.watch[1].tgt, "lo cano") == 0,
          "parsed %d: '%s' '%s'", a.train.n_watch, a.train.watch[1].src, a.train.watch[1].tgt);
    char out[80];
    snprintf(out, sizeof out, "/tmp/qkv-config-watch-%d.yaml", (int)getpid());
    CHECK(config_write(&a, out) == 0, "write: %s", err_msg());
    config_defaults(&b);
    CHECK(config_load(&b, out) == 0, "reload: %s", err_msg());
    CHECK(b.train.n_watch == 2 && memcmp(a.train.watch, b.train.watch, sizeof a.train.watch) == 0,
          "watch list changed");
    CHECK(config_set(&b, "train.watch=the cat") == 0 && b.train.n_watch == 1 &&
              strcmp(b.train.watch[0].src, "the cat") == 0,
          "--set: %s", err_msg());
    CHECK(config_set(&b, "train.watch=") == 0 && b.train.n_watch == 0, "--set empty");
    CHECK(config_write(&b, out) == 0 && config_load(&a, out) == 0 && a.train.n_watch == 0, "empty list round trip");
    /* --set with the file's own list syntax reads a list, not one sentence with brackets */
    CHECK(config_set(&b, "train.watch=[\"the cat\", {src: a dog, tgt: un cano}]") == 0 && b.train.n_watch == 2 &&
              strcmp(b.train.watch[0].src, "the cat") == 0 && strcmp(b.train.watch[1].src, "a dog") == 0 &&
              strcmp(b.train.watch[1].tgt, "un cano") == 0,
          "--set a flow list: %d, '%s'", b.train.n_watch, b.train.watch[0].src);
    CHECK(config_set(&b, "train.watch=[]") == 0 && b.train.n_watch == 0, "--set []: %d sentences", b.train.n_watch);
    CHECK(config_set(&b, "train.watch=[\"a\"") != 0 && strstr(err_msg(), "--set train.watch=") &&
              strstr(err_msg(), "YAML syntax error"),
          "an unclosed list: %s", err_msg());
    CHECK(config_set(&b, "train.watch=[[1]]") != 0 && strstr(err_msg(), "a sentence or {src: ..., tgt: ...}"),
          "a list in the list: %s", err_msg());
    CHECK(config_set(&b, "train.watch=[a, b, c, d, e, f, g, h, i]") != 0 && strstr(err_msg(), "more than 8"),
          "nine: %s", err_msg());
    CHECK(config_set(&b, "train.watch=[a]\n--- [b]") != 0 && strstr(err_msg(), "a second YAML document"),
          "two documents: %s", err_msg());
    unlink(out);
    EXPECT_ERROR(DATA "train:\n  watch:\n    - {src: a, lang: b}\n", ":5:7:", "a sentence or {src: ..., tgt: ...}");
    EXPECT_ERROR(DATA "train:\n  watch:\n    - \"  \"\n", ":5:7:", "a sentence is empty");
    EXPECT_ERROR(DATA "train:\n  watch: [a, b, c, d, e, f, g, h, i]\n", "train.watch", "more than 8 sentences");
}

const TestCase config_tests[] = {
    /* the table first: a bad default can crash the tests that use it (model.heads 0 divides by 0) */
    {"config_key_table_defaults_in_range", test_key_table_defaults_in_range},
    {"config_defaults_text_pinned", test_defaults_text_pinned},
    {"config_defaults_and_name", test_defaults_and_minimal},
    {"config_errors_name_line_and_column", test_errors_name_line_and_column},
    {"config_yaml_limits", test_yaml_limits},
    {"config_set_overrides", test_set_overrides},
    {"config_min_freq_set_where_nothing_reads_it", test_min_freq_set_where_nothing_reads_it},
    {"config_schedule_keys_set_for_the_other_schedule", test_schedule_keys_set_for_the_other_schedule},
    {"config_resolved_round_trip", test_resolved_config_round_trip},
    {"config_resolved_floats_read_back_exactly", test_resolved_floats_read_back_exactly},
    {"config_resolved_odd_strings_round_trip", test_resolved_config_odd_strings},
    {"config_watch_list", test_watch_list},
    {NULL, NULL},
};
