/* eval: `qkv eval RUN --src F --ref F [decoding options]`: translates a test set and
 * reports what a translation toolkit reports: BLEU and chrF (sacrebleu's defaults and
 * signatures), exact matches, the reference's per-token NLL and perplexity under the
 * model, the source's unknown-token rate, and speed; one JSON line goes to RUN/eval.jsonl. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/decode_options.h"
#include "cmdlib/options.h"
#include "data/corpus.h"
#include "decode/translator.h"
#include "run/files.h"
#include "run/run.h"
#include "score/sacrebleu.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/text.h"

typedef struct {
    Bleu bleu;
    BleuStats bs;
    double chrf, exact, nll, ppl, unk_rate, seconds;
    long long ref_tokens;
    int n, truncated; /* sentences; sources cut to the position table */
    json_t *samples;  /* the first EVAL_SAMPLES pairs with their translations, for the report */
} EvalResult;

/* A run that does not decode its validation set while it trains (train.valid_bleu off, as
 * the demo's) has no translations of its own to show: the report shows these instead. */
enum { EVAL_SAMPLES = 3 };

/* The reference's NLL under the model, over the pairs whose source is not empty. */
static double score_references(Run *r, char **src, char **ref, int n, long long *tokens) {
    int max = r->model.cfg.max_positions - 1, k = 0;
    Seq *s = xmalloc(sizeof(Seq) * (size_t)(n ? n : 1)), *t = xmalloc(sizeof(Seq) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        int cs = (int)strlen(src[i]) + 2 > max + 1 ? (int)strlen(src[i]) + 2 : max + 1;
        int ct = (int)strlen(ref[i]) + 2 > max + 1 ? (int)strlen(ref[i]) + 2 : max + 1;
        s[k].ids = xmalloc(sizeof(int) * (size_t)cs), t[k].ids = xmalloc(sizeof(int) * (size_t)ct);
        s[k].len = encode_line(src[i], r->cfg.data.tokenizer, &r->src_vocab, s[k].ids, cs);
        t[k].len = encode_line(ref[i], r->cfg.data.tokenizer, &r->tgt_vocab, t[k].ids, ct);
        if (s[k].len > max) s[k].len = max;
        if (t[k].len > max - 1) t[k].len = max - 1; /* room for the EOS */
        if (s[k].len == 0) free(s[k].ids), free(t[k].ids);
        else k++;
    }
    double nll = reference_nll(&r->model, s, t, k, tokens);
    for (int i = 0; i < k; i++) free(s[i].ids), free(t[i].ids);
    free(s), free(t);
    return nll;
}

static void evaluate(Run *r, char **src, char **ref, int n, const TranslateOptions *o, EvalResult *e) {
    double t0 = now_seconds();
    TranslateStats st;
    char **hyp = translate_lines(&r->model, r->cfg.data.tokenizer, &r->src_vocab, &r->tgt_vocab, src, n, o, &st, NULL);
    e->seconds = now_seconds() - t0;
    ChrfStats cs = {0};
    int exact = 0;
    for (int i = 0; i < n; i++) {
        bleu_add(&e->bs, hyp[i], ref[i]);
        chrf_add(&cs, hyp[i], ref[i]);
        exact += strcmp(hyp[i], ref[i]) == 0;
    }
    e->samples = json_array();
    for (int i = 0; i < n && i < EVAL_SAMPLES; i++) {
        json_t *one = json_object();
        json_put(one, "line", json_integer(i + 1));
        json_put(one, "src", json_utf8(src[i]));
        json_put(one, "ref", json_utf8(ref[i]));
        json_put(one, "hyp", json_utf8(hyp[i]));
        json_array_append_new(e->samples, one);
    }
    e->n = n, e->truncated = st.truncated;
    e->bleu = bleu_compute(&e->bs, 0);
    e->chrf = chrf_compute(&cs);
    e->exact = n ? 100.0 * exact / n : 0.0;
    e->unk_rate = st.src_tokens ? 100.0 * (double)st.src_unk / (double)st.src_tokens : 0.0;
    e->nll = score_references(r, src, ref, n, &e->ref_tokens);
    e->nll = e->ref_tokens ? e->nll / (double)e->ref_tokens : 0.0;
    e->ppl = exp(e->nll);
    free_lines(hyp, n);
}

/* The heads --mask-heads masked, for the record: the SPEC as given and the heads it named
 * (canonical, one a line); spec NULL when none were. */
typedef struct {
    const char *spec;
    const StrBuf *heads;
} MaskRecord;

static int append_json(const Run *r, const char *src, const char *ref, const TranslateOptions *o,
                       const MaskRecord *mask, const EvalResult *e) {
    char path[CONFIG_PATH_MAX + 32];
    run_path(path, sizeof path, r->dir, RUN_EVAL);
    json_t *j = json_object();
    json_put(j, "weights", json_utf8(r->weights));
    json_put(j, "step", json_integer(r->meta.step));
    json_put(j, "src", json_utf8(src));
    json_put(j, "ref", json_utf8(ref));
    json_put(j, "sentences", json_integer(e->n));
    json_put(j, "beam", json_integer(o->decode.beam));
    json_put(j, "length_penalty", json_real(o->decode.length_penalty));
    /* every option that moves the score: two records that differ only in them must say so */
    json_put(j, "max_len_a", json_real(o->decode.max_len_a));
    json_put(j, "max_len_b", json_integer(o->decode.max_len_b));
    json_put(j, "no_repeat_ngram", json_integer(o->decode.no_repeat_ngram));
    if (!r->src_vocab.spm) /* a subword vocabulary has no <unk> to replace: the option does nothing there */
        json_put(j, "replace_unk", json_boolean(o->replace_unk));
    if (mask->spec) { /* only when masking: the records of plain runs stay as they were */
        json_put(j, "mask_heads", json_string(mask->spec));
        json_t *heads = json_array();
        for (const char *p = mask->heads->buf, *nl; p && (nl = strchr(p, '\n')); p = nl + 1)
            json_array_append_new(heads, json_stringn(p, (size_t)(nl - p)));
        json_put(j, "masked_heads", heads);
    }
    json_put(j, "bleu", json_fmt("%.4f", e->bleu.score));
    json_put(j, "chrf", json_fmt("%.4f", e->chrf));
    json_put(j, "exact_match", json_fmt("%.2f", e->exact));
    json_put(j, "nll", json_fmt("%.5f", e->nll));
    json_put(j, "ppl", json_fmt("%.4f", e->ppl));
    json_put(j, "unk_rate", json_fmt("%.4f", e->unk_rate));
    json_put(j, "sentences_per_s", json_fmt("%.1f", e->seconds > 0 ? e->n / e->seconds : 0.0));
    json_put(j, "bleu_signature", json_string(BLEU_SIGNATURE));
    json_put(j, "chrf_signature", json_string(CHRF_SIGNATURE));
    json_put(j, "samples", json_incref(e->samples));
    char *line = xcheck(json_dumps(j, JSON_WRITE_FLAGS));
    json_decref(j);
    int rc = append_line(path, line, "cannot append the result");
    free(line);
    return rc;
}

static const CmdOption options[] = {
    {'s', "src", "FILE", "the source side of the test set (required)", NULL},
    {'R', "ref", "FILE", "its reference translations, line-aligned (required)", NULL},
    {0},
};
const CmdSpec cmd_eval_spec = {
    .name = "eval",
    .operands = "RUN_DIR|WEIGHTS --src SOURCE.txt --ref REFERENCE.txt [options]",
    .summary = "translate a test set and score it: BLEU, chrF, reference NLL",
    .about = "Scores as sacrebleu does with its defaults, and appends the result, with the search\n"
             "options and any heads --mask-heads masked, to RUN_DIR/eval.jsonl.",
    .options = options,
    .shared = decode_options,
    .unlisted = (const char *const[]){"nbest", NULL},
    .example = "qkv eval runs/toy --src data/toy/test.src --ref data/toy/test.tgt --greedy",
};

int cmd_eval(int argc, char **argv) {
    TranslateOptions o = decode_options_defaults();
    const char *src_path = NULL, *ref_path = NULL, *mask_heads = NULL, *unk = NULL;
    int c;
    while ((c = cmd_option_next(&cmd_eval_spec, argc, argv)) >= 0) {
        const char *named = decode_options_unk_name(c);
        if (named) unk = named;
        if (c == 's') src_path = optarg;
        else if (c == 'R') ref_path = optarg;
        else if (decode_options_apply(c, optarg, &o, &mask_heads) != 0) return cmd_fail(2);
    }
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1 || !src_path || !ref_path) return cmd_usage_of(&cmd_eval_spec);
    if (o.decode.nbest != 1)
        return err_set("--nbest %d: qkv eval scores each sentence's best hypothesis alone (qkv translate --nbest "
                       "prints more)",
                       o.decode.nbest),
               cmd_fail(2);
    if (decode_options_check(&o) != 0) return cmd_fail(2);
    int n;
    char **src, **ref;
    if (cmd_read_aligned(src_path, ref_path, "a source", &src, &ref, &n) != 0) return cmd_fail(2);
    if (n == 0) { /* scores of no sentences are no scores (BLEU 0, perplexity 1): refused, as qkv heads does */
        err_set("%s: no pair to score: the file is empty", src_path);
        return free_lines(src, n), free_lines(ref, n), cmd_fail(2);
    }
    Run r;
    if (run_open(&r, argv[optind]) != 0) return free_lines(src, n), free_lines(ref, n), cmd_fail(err_status());
    if (decode_options_check_unk(unk, r.cfg.data.tokenizer) != 0)
        return free_lines(src, n), free_lines(ref, n), run_close(&r), cmd_fail(2);
    o = translate_options_for_run(&o, &r.cfg);
    /* fixed weights: the decoding step's laid out once, for every worker and batch */
    model_keep_step_weights(&r.model);
    StrBuf heads = {0};
    int masked = decode_options_mask_heads(&r.model, mask_heads, &heads);
    if (masked < 0) return free_lines(src, n), free_lines(ref, n), run_close(&r), cmd_fail(err_status());
    MaskRecord mask = {masked ? mask_heads : NULL, &heads};
    printf("evaluating %s (%s, step %lld) on %s, %s", r.weights, r.which, (long long)r.meta.step, src_path,
           o.decode.beam == 1 ? "greedy search" : "beam search");
    if (masked) printf(", %d head%s masked", masked, masked == 1 ? "" : "s");
    putchar('\n');
    EvalResult e = {0};
    evaluate(&r, src, ref, n, &o, &e);
    double ratio = e.bs.ref_len ? (double)e.bs.sys_len / (double)e.bs.ref_len : 0.0;
    printf("BLEU|%s = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)\n",
           BLEU_SIGNATURE, e.bleu.score, e.bleu.precisions[0], e.bleu.precisions[1], e.bleu.precisions[2],
           e.bleu.precisions[3], e.bleu.bp, ratio, e.bs.sys_len, e.bs.ref_len);
    printf("chrF2|%s = %.2f\n", CHRF_SIGNATURE, e.chrf);
    printf("exact match %.1f%% of %d; reference NLL %.4f per token (perplexity %.2f, %lld tokens); unknown source "
           "tokens %.2f%%; %.1f sentences/s\n",
           e.exact, e.n, e.nll, e.ppl, e.ref_tokens, e.unk_rate, e.seconds > 0 ? e.n / e.seconds : 0.0);
    cmd_warn_truncated(e.truncated, r.model.cfg.max_positions - 1);
    int rc = append_json(&r, src_path, ref_path, &o, &mask, &e);
    if (rc == 0) printf("appended to %s/eval.jsonl\n", r.dir);
    free_lines(src, n), free_lines(ref, n), sb_free(&heads), json_decref(e.samples);
    run_close(&r);
    return rc == 0 ? 0 : cmd_fail(err_status());
}
