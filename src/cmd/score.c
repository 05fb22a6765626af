/* score: `qkv score HYP REF [--sentence] [--json]`, corpus BLEU and chrF of a translation
 * against its reference as sacrebleu computes them by default, with sacrebleu's
 * signatures; --sentence adds one line per sentence (sentence BLEU, effective order). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/options.h"
#include "score/sacrebleu.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"

static void print_text(const Bleu *b, const BleuStats *s, double chrf) {
    double ratio = s->ref_len ? (double)s->sys_len / (double)s->ref_len : 0.0;
    printf("BLEU|%s = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)\n",
           BLEU_SIGNATURE, b->score, b->precisions[0], b->precisions[1], b->precisions[2], b->precisions[3], b->bp,
           ratio, s->sys_len, s->ref_len);
    printf("chrF2|%s = %.2f\n", CHRF_SIGNATURE, chrf);
}

/* With --sentence, per holds each line's sentence BLEU and chrF, n_lines of them: a list of
 * {"bleu", "chrf"} in line order, with the sentence BLEU's signature. */
static void print_json(const Bleu *b, const BleuStats *s, double chrf, const double (*per)[2], int n_lines) {
    json_t *root = json_object(), *bleu = json_object(), *ch = json_object();
    json_t *counts = json_array(), *totals = json_array(), *prec = json_array();
    for (int n = 0; n < BLEU_ORDER; n++) {
        json_array_append_new(counts, json_integer(s->counts[n]));
        json_array_append_new(totals, json_integer(s->totals[n]));
        json_array_append_new(prec, json_real(b->precisions[n]));
    }
    json_put(bleu, "score", json_real(b->score));
    json_put(bleu, "counts", counts);
    json_put(bleu, "totals", totals);
    json_put(bleu, "precisions", prec);
    json_put(bleu, "bp", json_real(b->bp));
    json_put(bleu, "sys_len", json_integer(s->sys_len));
    json_put(bleu, "ref_len", json_integer(s->ref_len));
    json_put(bleu, "signature", json_string(BLEU_SIGNATURE));
    json_put(ch, "score", json_real(chrf));
    json_put(ch, "signature", json_string(CHRF_SIGNATURE));
    json_put(root, "bleu", bleu);
    json_put(root, "chrf", ch);
    if (per) {
        json_t *lines = json_array();
        for (int i = 0; i < n_lines; i++) {
            json_t *one = json_object();
            json_put(one, "bleu", json_real(per[i][0]));
            json_put(one, "chrf", json_real(per[i][1]));
            json_array_append_new(lines, one);
        }
        json_put(root, "sentences", lines);
        json_put(root, "sentence_bleu_signature", json_string(BLEU_SENTENCE_SIGNATURE));
    }
    char *text = xcheck(json_dumps(root, JSON_WRITE_FLAGS));
    printf("%s\n", text);
    free(text);
    json_decref(root);
}

static const CmdOption options[] = {
    {'s', "sentence", NULL, "also each line's sentence BLEU and chrF", NULL},
    {'j', "json", NULL, "the scores as one JSON object, with sacrebleu's signatures (with --sentence, each line's too)",
     NULL},
    {0},
};
const CmdSpec cmd_score_spec = {
    .name = "score",
    .operands = "HYPOTHESES.txt REFERENCE.txt [--sentence] [--json]",
    .summary = "BLEU and chrF of a translation, as sacrebleu computes them with its defaults",
    .about = "Detokenized text, one line per sentence, line-aligned; 13a tokenization, mixed case.",
    .options = options,
    .example = "qkv score translation.txt data/toy/test.tgt",
};

int cmd_score(int argc, char **argv) {
    int sentence = 0, as_json = 0, c;
    while ((c = cmd_option_next(&cmd_score_spec, argc, argv)) >= 0) {
        if (c == 's') sentence = 1;
        else as_json = 1;
    }
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 2) return cmd_usage_of(&cmd_score_spec);
    char **hyp, **ref;
    int n;
    if (cmd_read_aligned(argv[optind], argv[optind + 1], "a translation", &hyp, &ref, &n) != 0) return cmd_fail(2);
    BleuStats s = {0};
    ChrfStats ch = {0};
    if (sentence && !as_json) printf("line\tBLEU\tchrF2\t(sentence BLEU: %s)\n", BLEU_SENTENCE_SIGNATURE);
    double(*per)[2] = sentence && as_json ? xmalloc(sizeof *per * (size_t)(n ? n : 1)) : NULL;
    for (int i = 0; i < n; i++) {
        bleu_add(&s, hyp[i], ref[i]);
        chrf_add(&ch, hyp[i], ref[i]);
        if (!sentence) continue;
        BleuStats one = {0};
        ChrfStats one_ch = {0};
        bleu_add(&one, hyp[i], ref[i]);
        chrf_add(&one_ch, hyp[i], ref[i]);
        double sb = bleu_compute(&one, 1).score, sc = chrf_compute(&one_ch);
        if (per) per[i][0] = sb, per[i][1] = sc;
        else printf("%d\t%.2f\t%.2f\n", i + 1, sb, sc);
    }
    Bleu b = bleu_compute(&s, 0);
    if (as_json) print_json(&b, &s, chrf_compute(&ch), per, n);
    else print_text(&b, &s, chrf_compute(&ch));
    free(per);
    free_lines(hyp, n), free_lines(ref, n);
    return 0;
}
