/* The commands' option tables: every option a parser takes is in its help with what it
 * does, the shown defaults are the real ones, and the parser reads what the table says. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cmd/commands.h"
#include "cmdlib/decode_options.h"
#include "cmdlib/options.h"
#include "cmdlib/sentence.h"
#include "data/sentence_ids.h"
#include "run/run.h"
#include "util/err.h"

/* The help as cmd_help_print writes it (through a tmpfile: a stream that grows a buffer
 * of ours makes gcc see a pointer to a local where there is none). */
static char *help_text(const CmdSpec *spec) {
    FILE *f = tmpfile();
    if (!f) return calloc(1, 1);
    cmd_help_print(spec, f);
    long len = ftell(f);
    char *text = calloc((size_t)(len > 0 ? len : 0) + 1, 1);
    rewind(f);
    if (len > 0 && fread(text, 1, (size_t)len, f) != (size_t)len) text[0] = '\0';
    fclose(f);
    return text;
}

/* "--name" as a whole option in text: followed by a space, a newline or the end */
static int names_option(const char *text, const char *name) {
    char want[80];
    snprintf(want, sizeof want, "--%s", name);
    for (const char *p = strstr(text, want); p; p = strstr(p + 1, want)) {
        char after = p[strlen(want)];
        if (after == ' ' || after == '\n' || after == '\0') return 1;
    }
    return 0;
}

/* Whether the help has a row for --name (a line that starts with it). */
static int option_row(const char *text, const char *name) {
    char want[80];
    snprintf(want, sizeof want, "\n  --%s ", name);
    return strstr(text, want) != NULL;
}

/* Whether the command parses --name only to refuse it (no row in its help). */
static int unlisted(const CmdSpec *s, const char *name) {
    for (int i = 0; s->unlisted && s->unlisted[i]; i++)
        if (strcmp(s->unlisted[i], name) == 0) return 1;
    return 0;
}

/* Every row is in the help, but those the command refuses with a reason of its own, which
 * are not. */
static void test_every_command_helps_with_every_option(void) {
    CHECK(n_commands >= 14, "%d commands", n_commands);
    for (int i = 0; i < n_commands; i++) {
        const CmdSpec *s = commands[i].spec;
        char *text = help_text(s), head[64], example[64];
        snprintf(head, sizeof head, "usage: qkv %s ", s->name);
        snprintf(example, sizeof example, "\nexample:\n  qkv %s", s->name);
        int ok = strncmp(text, head, strlen(head)) == 0 && strstr(text, example) && names_option(text, "help");
        for (int t = 0; t < 2 && ok; t++)
            for (const CmdOption *o = t ? s->shared : s->options; o && o->key && ok; o++)
                ok = unlisted(s, o->name) ? !option_row(text, o->name)
                                          : names_option(text, o->name) && o->help && strstr(text, o->help);
        if (!ok) free(text);
        CHECK(ok, "qkv %s --help leaves out its usage, an option or the example (or lists one it refuses)", s->name);
        for (int u = 0; s->unlisted && s->unlisted[u]; u++) {
            int found = 0;
            for (const CmdOption *o = s->shared; o && o->key; o++) found |= strcmp(o->name, s->unlisted[u]) == 0;
            CHECK(found, "%s: unlisted --%s is no row of its shared table", s->name, s->unlisted[u]);
        }
        free(text);
        CHECK(command_find(s->name) == &commands[i], "%s: found as another command", s->name);
    }
    CHECK(!command_find("bogus"), "a command that does not exist was found");
}

/* Keys are what the parser returns: two rows with one key could not be told apart. */
static void test_option_keys_are_distinct(void) {
    for (int i = 0; i < n_commands; i++) {
        const CmdSpec *s = commands[i].spec;
        int seen[128] = {0};
        for (int t = 0; t < 2; t++)
            for (const CmdOption *o = t ? s->shared : s->options; o && o->key; o++) {
                CHECK(o->key > 0 && o->key < 128 && !seen[o->key], "%s: key '%c' twice", s->name, o->key);
                seen[o->key] = 1;
            }
    }
}

/* The row of decode_options named name, or NULL. */
static const CmdOption *decode_row(const char *name) {
    for (const CmdOption *r = decode_options; r->key; r++)
        if (strcmp(r->name, name) == 0) return r;
    return NULL;
}

static void test_decode_defaults_shown_are_the_real_ones(void) {
    TranslateOptions o = decode_options_defaults();
    struct {
        const char *name;
        double value;
    } want[] = {{"beam", o.decode.beam},
                {"nbest", o.decode.nbest},
                {"max-len-a", o.decode.max_len_a},
                {"max-len-b", o.decode.max_len_b},
                {"no-repeat-ngram", o.decode.no_repeat_ngram}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const CmdOption *row = decode_row(want[i].name);
        CHECK(row && row->def && strtod(row->def, NULL) == want[i].value, "--%s: help says %s, the default is %g",
              want[i].name, row && row->def ? row->def : "nothing", want[i].value);
    }
    CHECK(o.replace_unk == 1, "replace-unk is shown as on by default");
    /* the length penalty is the run's: the help names the key and its default */
    Config c;
    config_defaults(&c);
    const CmdOption *lp = decode_row("length-penalty");
    CHECK(lp && lp->def && strstr(lp->def, "decode.length_penalty") && strstr(lp->def, ", 1 unless") &&
              c.decode.length_penalty == 1.0 && o.decode.length_penalty == 1.0,
          "--length-penalty: help says %s; decode.length_penalty's default %g, decode_defaults' %g",
          lp && lp->def ? lp->def : "nothing", c.decode.length_penalty, o.decode.length_penalty);
}

/* The parser over a table: values, flags, --help and -h, and a row keyed 'h' (--head)
 * that must not be taken for -h. */
static void test_parser_reads_the_table(void) {
    static const CmdOption rows[] = {{'h', "head", "H", "a head", NULL}, {'f', "flag", NULL, "a flag", NULL}, {0}};
    static const CmdSpec spec = {.name = "t", .operands = "X", .summary = "s", .options = rows, .example = "qkv t"};
    char a0[] = "qkv: t", a1[] = "--head", a2[] = "3", a3[] = "--flag", a4[] = "x";
    char *argv[] = {a0, a1, a2, a3, a4, NULL};
    optind = 1;
    int c1 = cmd_option_next(&spec, 5, argv);
    CHECK(c1 == 'h' && optarg && strcmp(optarg, "3") == 0, "--head 3 read as %d", c1);
    int c2 = cmd_option_next(&spec, 5, argv), c3 = cmd_option_next(&spec, 5, argv);
    CHECK(c2 == 'f' && c3 == CMD_OPTIONS_END && optind == 4, "--flag then the operand: %d %d at %d", c2, c3, optind);
    FILE *keep = stdout;
    stdout = fopen("/dev/null", "w");
    char h0[] = "qkv: t", h1[] = "-h";
    char *hv[] = {h0, h1, NULL};
    optind = 1;
    int c4 = cmd_option_next(&spec, 2, hv);
    char l1[] = "--help";
    char *lv[] = {h0, l1, NULL};
    optind = 1;
    int c5 = cmd_option_next(&spec, 2, lv);
    fclose(stdout);
    stdout = keep;
    CHECK(c4 == CMD_OPTIONS_HELP && c5 == CMD_OPTIONS_HELP, "-h gave %d, --help %d", c4, c5);
    CHECK(cmd_option_status(c4) == 0 && cmd_option_status(CMD_OPTIONS_BAD) == 2, "exit statuses");
    optind = 1;
}

/* A word the vocabulary lacks is named once in the message however often it comes, in
 * the order it first comes. */
static void test_unknown_words_named_once(void) {
    Run r;
    memset(&r, 0, sizeof r);
    r.cfg.data.tokenizer = TOKENIZER_WORD;
    r.model.cfg.max_positions = 64;
    vocab_init(&r.src_vocab), vocab_init(&r.tgt_vocab);
    vocab_count(&r.src_vocab, "a", 1, 5), vocab_count(&r.tgt_vocab, "a", 1, 5);
    vocab_prune(&r.src_vocab, 100, 1), vocab_prune(&r.tgt_vocab, 100, 1);
    int src[64], tgt[64], ns, nt;
    int rc = sentence_pair_ids("a", "xx yy a xx xx yy zz", NULL, TOKENIZER_WORD, &r.src_vocab, &r.tgt_vocab, 62, src,
                               &ns, tgt, &nt, NULL, "--text", "--target", "attend to", NULL);
    vocab_free(&r.src_vocab), vocab_free(&r.tgt_vocab);
    CHECK(rc != 0, "a target of unknown words was taken");
    CHECK(strcmp(err_msg(), "--target: not in the target vocabulary: 'xx', 'yy', 'zz'") == 0, "said: %s", err_msg());
}

/* A sentence read already (the server reads each request once, to cost it) is not read
 * again: its given ids are the ones used, its given count the one checked against the
 * positions, whatever the text says. */
static void test_sentence_read_once_is_not_read_again(void) {
    Vocab v;
    vocab_init(&v);
    vocab_count(&v, "a", 1, 5), vocab_count(&v, "b", 1, 5);
    vocab_prune(&v, 100, 1);
    int a = vocab_lookup(&v, "a", 1), b = vocab_lookup(&v, "b", 1), ids[8], n = -1;
    int read[3] = {b, b, a}, many[9] = {0};
    SentenceTokens given = {read, 3}, long_one = {many, 9};
    SentenceFault f = sentence_ids("a", &given, TOKENIZER_WORD, &v, 6, 0, ids, &n, NULL);
    CHECK(f == SENTENCE_OK && n == 3 && ids[0] == b && ids[1] == b && ids[2] == a, "fault %d, %d ids: %d %d", f, n,
          ids[0], ids[1]);
    f = sentence_ids("a", &long_one, TOKENIZER_WORD, &v, 6, 0, ids, &n, NULL);
    CHECK(f == SENTENCE_TOO_LONG, "9 given ids against 6 positions: fault %d", f);
    f = sentence_ids("a b", NULL, TOKENIZER_WORD, &v, 6, 0, ids, &n, NULL);
    CHECK(f == SENTENCE_OK && n == 2 && ids[0] == a && ids[1] == b, "read here: fault %d, %d ids", f, n);
    vocab_free(&v);
}

/* A folder given with trailing slashes is the folder: attn// is attn, / stays /. */
static void test_folder_options_lose_trailing_slashes(void) {
    const char *given[] = {"attn//", "/", "a/b/"}, *meant[] = {"attn", "/", "a/b"};
    for (int i = 0; i < 3; i++) {
        char name[] = "attention", opt[] = "--out", value[16];
        snprintf(value, sizeof value, "%s", given[i]);
        char *argv[] = {name, opt, value, NULL};
        optind = 0;
        int c = cmd_option_next(&cmd_attention_spec, 3, argv);
        CHECK(c == 'o', "--out read as %d", c);
        CHECK(strcmp(optarg, meant[i]) == 0, "--out %s read as '%s'", given[i], optarg);
    }
    optind = 0;
}

const TestCase options_tests[] = {
    {"folder_options_lose_trailing_slashes", test_folder_options_lose_trailing_slashes},
    {"unknown_words_named_once", test_unknown_words_named_once},
    {"sentence_read_once_is_not_read_again", test_sentence_read_once_is_not_read_again},
    {"every_command_helps_with_every_option", test_every_command_helps_with_every_option},
    {"option_keys_are_distinct", test_option_keys_are_distinct},
    {"decode_defaults_shown_are_the_real_ones", test_decode_defaults_shown_are_the_real_ones},
    {"option_parser_reads_the_table", test_parser_reads_the_table},
    {NULL, NULL},
};
