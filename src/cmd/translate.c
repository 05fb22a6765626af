/* translate: `qkv translate RUN [--beam K | --greedy] [options] < source > translation`,
 * one output line per input line (empty lines stay empty), detokenized text; with
 * --nbest N, N lines per input in the Moses n-best format "i ||| text ||| score". */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmdutil.h"
#include "cmd/commands.h"
#include "infer/translator.h"
#include "train/run.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"

int translate_parse_option(int c, const char *arg, TranslateOptions *o) {
    DecodeOptions *d = &o->decode;
    switch (c) {
    case 'g': d->beam = 1; return 0;
    case 'b': return cmd_int("--beam", "a beam size from 1 to 64", arg, 1, 64, &d->beam);
    case 'n': return cmd_int("--nbest", "a count from 1 to 64", arg, 1, 64, &d->nbest);
    case 'l': return cmd_double("--length-penalty", "a number from 0 to 10", arg, 0, 10, &d->length_penalty);
    case 'a': return cmd_double("--max-len-a", "a number from 0 to 100", arg, 0, 100, &d->max_len_a);
    case 'B': return cmd_int("--max-len-b", "a count from 0 to 100000", arg, 0, 100000, &d->max_len_b);
    case 'r': return cmd_int("--no-repeat-ngram", "an n-gram size from 0 to 100", arg, 0, 100, &d->no_repeat_ngram);
    case 'u': o->replace_unk = 1; return 0;
    case 'U': o->replace_unk = 0; return 0;
    default: return 1;
    }
}

const struct option translate_long_options[] = {
    {"greedy", no_argument, 0, 'g'},       {"beam", required_argument, 0, 'b'},
    {"nbest", required_argument, 0, 'n'},  {"length-penalty", required_argument, 0, 'l'},
    {"max-len-a", required_argument, 0, 'a'}, {"max-len-b", required_argument, 0, 'B'},
    {"no-repeat-ngram", required_argument, 0, 'r'}, {"replace-unk", no_argument, 0, 'u'},
    {"no-replace-unk", no_argument, 0, 'U'},
};

TranslateOptions translate_defaults(void) { return (TranslateOptions){.decode = decode_defaults(), .replace_unk = 1}; }

static void print_hypotheses(char **text, const double *scores, int n, int nbest) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < nbest; k++) {
            size_t at = (size_t)i * nbest + k;
            if (nbest == 1) printf("%s\n", text[at]);
            else if (k == 0 || isfinite(scores[at])) /* fewer may have finished than asked for */
                printf("%d ||| %s ||| %.6f\n", i, text[at], scores[at]);
        }
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

int cmd_translate(int argc, char **argv) {
    static struct option opts[16];
    size_t n_opts = sizeof translate_long_options / sizeof translate_long_options[0];
    for (size_t i = 0; i < n_opts; i++) opts[i] = translate_long_options[i];
    TranslateOptions o = translate_defaults();
    int c;
    while ((c = getopt_long(argc, argv, "gb:", opts, NULL)) != -1) {
        int rc = translate_parse_option(c, optarg, &o);
        if (rc < 0) return cmd_fail(2);
        if (rc > 0) return 2;
    }
    if (optind != argc - 1)
        return cmd_usage("qkv translate RUN_DIR|WEIGHTS [--beam K | --greedy] [--nbest N] [--length-penalty A] "
                         "[--max-len-a A --max-len-b B] [--no-repeat-ngram N] [--no-replace-unk] < source.txt > translation.txt");
    if (decode_check(&o.decode) != 0) return cmd_fail(2);
    if (check_stdin() != 0) return cmd_fail(2);
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(err_status());
    int n; /* the input before the note: a read error is then the one line on stderr */
    char **lines = read_lines_checked(stdin, "standard input", &n);
    if (!lines) return run_close(&r), cmd_fail(err_status());
    fprintf(stderr, "qkv: translating with %s (%s, step %lld), %s\n", r.weights, r.which, (long long)r.meta.step,
            o.decode.beam == 1 ? "greedy search" : "beam search");
    TranslateStats st;
    double *scores = xmalloc(sizeof(double) * (size_t)(n ? n : 1) * o.decode.nbest);
    char **text = translate_lines(&r.model, r.cfg.data.tokenizer, &r.src_vocab, &r.tgt_vocab, lines, n, &o, &st, scores);
    print_hypotheses(text, scores, n, o.decode.nbest);
    if (st.truncated)
        fprintf(stderr, "qkv: warning: %d lines longer than %d tokens were truncated\n", st.truncated, r.model.cfg.max_positions - 1);
    free_lines(text, n * o.decode.nbest), free_lines(lines, n), free(scores);
    run_close(&r);
    return 0;
}
