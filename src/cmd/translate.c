/* translate: `qkv translate RUN [--beam K | --greedy] [options] < source > translation`,
 * one output line per input line (empty lines stay empty), detokenized text; with
 * --nbest N, N lines per input in the Moses n-best format "i ||| text ||| score". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/decode_options.h"
#include "cmdlib/options.h"
#include "cmdlib/sentence.h"
#include "decode/translator.h"
#include "run/run.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/text.h"

/* first: the number of the first line, for the n-best format */
static void print_hypotheses(char **text, const double *scores, int n, int nbest, int first) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < nbest; k++) {
            size_t at = (size_t)i * nbest + k;
            if (nbest == 1) printf("%s\n", text[at]);
            else if (k == 0 || isfinite(scores[at])) /* fewer may have finished than asked for */
                printf("%d ||| %s ||| %.6f\n", first + i, text[at], scores[at]);
        }
}

/* What the input held that the user is told of once, at the end. */
typedef struct {
    int truncated;        /* lines cut to the model's positions */
    int not_utf8;         /* lines that are not UTF-8: their bad bytes make unknown words */
    int first_not_utf8;   /* the first of them, from 1 */
    int unknown;          /* lines with words the source vocabulary reads as <unk> */
    int first_unknown;    /* the first of them, from 1 */
    StrBuf unknown_words; /* that line's unknown words, quoted */
} InputNotes;

/* Translates lines and prints them; adds to *notes. */
static void translate_and_print(Run *r, const TranslateOptions *o, char **lines, int n, int first, InputNotes *notes) {
    TranslateStats st;
    for (int i = 0; i < n; i++)
        if (!utf8_valid(lines[i], strlen(lines[i])) && notes->not_utf8++ == 0) notes->first_not_utf8 = first + i + 1;
    /* scores are printed with n-best lists only; without them greedy search skips a
     * softmax normaliser over the vocabulary at every step */
    double *scores = o->decode.nbest > 1 ? xmalloc(sizeof(double) * (size_t)(n ? n : 1) * o->decode.nbest) : NULL;
    char **text = translate_lines(&r->model, r->cfg.data.tokenizer, &r->src_vocab, &r->tgt_vocab, lines, n, o, &st,
                                  scores);
    print_hypotheses(text, scores, n, o->decode.nbest, first);
    notes->truncated += st.truncated;
    /* which lines hold the unknown words: read again word by word only where the
     * translation met any (st.src_unk), so input the vocabulary knows costs nothing more */
    for (int i = 0; st.src_unk > 0 && i < n; i++) {
        StrBuf words = {0};
        if (cmd_unknown_source_words(r, lines[i], &words) > 0 && notes->unknown++ == 0)
            notes->first_unknown = first + i + 1, notes->unknown_words = words, words = (StrBuf){0};
        sb_free(&words);
    }
    free_lines(text, n * o->decode.nbest), free(scores);
}

/* Standard input that is not a file (a terminal, a pipe, a socket): the lines of each read
 * are translated and written at once, so a person typing sees each translation as the line
 * is entered, and a fast producer's lines still go in batches. 0, or -1 with the error set. */
static int translate_as_lines_arrive(Run *r, const TranslateOptions *o, InputNotes *notes) {
    char *pending = NULL;
    size_t pending_len = 0;
    int done = 0, first = 0, rc = 0;
    while (!done) {
        int n;
        char **lines = read_lines_arriving(STDIN_FILENO, "standard input", first, &pending, &pending_len, &n, &done);
        if (!lines) {
            rc = -1;
            break;
        }
        if (n) translate_and_print(r, o, lines, n, first, notes);
        fflush(stdout);
        first += n;
        free_lines(lines, n);
    }
    free(pending);
    return rc;
}

/* Standard input is text to read: a file, a pipe, a terminal, a socket, /dev/null. A
 * directory or a disk is refused at once, before the model is loaded. */
static int check_stdin(void) {
    struct stat st;
    if (fstat(STDIN_FILENO, &st) != 0) return err_set("standard input: %s", strerror(errno));
    if (S_ISDIR(st.st_mode)) return err_set("standard input: a directory, not text to translate");
    if (S_ISBLK(st.st_mode)) return err_set("standard input: a block device, not text to translate");
    return 0;
}

static const CmdOption options[] = {{0}}; /* decode_options are all it takes */
const CmdSpec cmd_translate_spec = {
    .name = "translate",
    .operands = "RUN_DIR|WEIGHTS [options] < SOURCE.txt > TRANSLATION.txt",
    .summary = "translate standard input to standard output, a line for a line",
    .about = "A run directory translates with its average of the last checkpoints (train.average_last),\n"
             "else its best, else its latest, and says which on stderr; an exported file with itself.\n"
             "Empty lines stay empty. With --nbest N, N lines per input in the Moses\n"
             "n-best format \"i ||| text ||| score\".",
    .options = options,
    .shared = decode_options,
    .example = "qkv translate runs/toy --beam 5 < data/toy/test.src > hyp.txt",
};

int cmd_translate(int argc, char **argv) {
    TranslateOptions o = decode_options_defaults();
    const char *mask_heads = NULL, *unk = NULL;
    int c;
    while ((c = cmd_option_next(&cmd_translate_spec, argc, argv)) >= 0) {
        const char *named = decode_options_unk_name(c);
        if (named) unk = named;
        if (decode_options_apply(c, optarg, &o, &mask_heads) != 0) return cmd_fail(2);
    }
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1) return cmd_usage_of(&cmd_translate_spec);
    if (decode_options_check(&o) != 0) return cmd_fail(2);
    if (check_stdin() != 0) return cmd_fail(2);
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(err_status());
    if (decode_options_check_unk(unk, r.cfg.data.tokenizer) != 0) return run_close(&r), cmd_fail(2);
    o = translate_options_for_run(&o, &r.cfg);
    /* fixed weights: the decoding step's laid out once, for every worker and batch */
    model_keep_step_weights(&r.model);
    int masked = decode_options_mask_heads(&r.model, mask_heads, NULL); /* before reading: a bad one waits on nothing */
    if (masked < 0) return run_close(&r), cmd_fail(err_status());
    struct stat in;
    int streaming = fstat(STDIN_FILENO, &in) == 0 && !S_ISREG(in.st_mode), n = 0;
    InputNotes notes = {0};
    char **lines = NULL;
    if (!streaming) { /* the input before the note: a read error is then the one line on stderr */
        lines = read_lines_checked(stdin, "standard input", &n);
        if (!lines) return run_close(&r), cmd_fail(err_status());
    }
    fprintf(stderr, "qkv: translating with %s (%s, step %lld), %s", r.weights, r.which, (long long)r.meta.step,
            o.decode.beam == 1 ? "greedy search" : "beam search");
    if (masked) fprintf(stderr, ", %d head%s masked", masked, masked == 1 ? "" : "s");
    fputc('\n', stderr);
    if (streaming && translate_as_lines_arrive(&r, &o, &notes) != 0) return run_close(&r), cmd_fail(err_status());
    if (!streaming) translate_and_print(&r, &o, lines, n, 0, &notes), free_lines(lines, n);
    cmd_warn_truncated(notes.truncated, r.model.cfg.max_positions - 1);
    if (notes.not_utf8)
        fprintf(stderr, "qkv: warning: %d line%s not UTF-8 (the first: line %d); %s bad bytes made unknown words\n",
                notes.not_utf8, notes.not_utf8 == 1 ? " is" : "s are", notes.first_not_utf8,
                notes.not_utf8 == 1 ? "its" : "their");
    if (notes.unknown)
        fprintf(stderr, "qkv: warning: %d line%s words not in the source vocabulary, read as <unk> (line %d: %s)\n",
                notes.unknown, notes.unknown == 1 ? " holds" : "s hold", notes.first_unknown, notes.unknown_words.buf);
    sb_free(&notes.unknown_words);
    run_close(&r);
    return 0;
}
