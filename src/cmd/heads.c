/* heads: `qkv heads RUN --src F --ref F [--gold F] [--out DIR]`, what each attention head
 * is worth and what it does on a held-out set: Michel et al. 2019's gradient importance
 * and the exact dNLL of masking it alone, their Spearman correlation, Voita et al.'s roles
 * (confidence, positional and rare-token heads) with AER per cross head, roles relative to
 * this model's own heads and sinks, and the pruning curve (BLEU as heads are removed by
 * each score and at random). The score whose curve keeps the most BLEU is the default
 * ranking (delta_nll without a curve). Prints the table in that order and writes DIR/heads.json, DIR/heads.svg,
 * DIR/index.html and the masks of the curve's points (DIR/masks/ORDER-SCOPE-PCT.txt, --mask-heads @FILE's format), all
 * moved into place together (util/staged_dir.h). The work is heads/analysis.c's (over
 * headscore.c, headcurve.c and headreport.c); this file reads the files and prints. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention/attnmap.h"
#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/decode_options.h"
#include "cmdlib/options.h"
#include "data/corpus.h"
#include "heads/analysis.h"
#include "heads/headcurve.h"
#include "heads/headreport.h"
#include "heads/headscore.h"
#include "run/files.h"
#include "run/run.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/staged_dir.h"
#include "util/text.h"

typedef struct {
    const char *src, *ref, *gold, *out, *freq;
    long seed;
    int curve, max_sentences;
} Options;

/* ---- printing ------------------------------------------------------------------------------------ */

/* One column of the table, three decimals; "-" where the measure does not apply. */
static void put(double v, int width) {
    if (isnan(v)) printf(" %*s", width, "-");
    else printf(" %*.3f", width, v);
}

static void print_table(const HeadStats *stats, int n, int default_order) {
    int *order = xmalloc(sizeof(int) * (size_t)n);
    heads_rank_order(stats, n, default_order, order);
    printf("heads ranked by %s, the most important first\n", heads_order_name(default_order));
    printf("%4s %-12s %5s %4s %10s %10s %9s %6s %7s %6s %6s %6s %6s %6s %6s  %s\n", "rank", "kind", "layer", "head",
           "importance", "raw", "dNLL", "conf", "entropy", "prev", "cur", "next", "rare", "sink", "AER", "role");
    for (int r = 0; r < n; r++) {
        const HeadStats *h = &stats[order[r]];
        printf("%4d %-12s %5d %4d %10.4f %10.4g %+9.4f", r + 1, attnmap_kind_name(h->kind), h->layer, h->head,
               h->importance, h->importance_raw, h->delta_nll);
        put(h->confidence, 6), put(h->entropy, 7), put(h->previous, 6), put(h->current, 6);
        put(h->next, 6), put(h->rare, 6), put(h->sink, 6), put(h->aer, 6);
        printf("  %s\n", h->role[0] ? h->role : "-");
    }
    free(order);
}

static void print_curves(const HeadCurves *c, const TranslateOptions *o) {
    printf("\npruning curve: BLEU (%s) with a share of the scope's heads removed\n%-29s",
           o->decode.beam == 1 ? "greedy" : "beam search", "");
    for (int k = 0; c->n_curves > 0 && k < HEADS_CURVE_POINTS; k++) printf(" %5d%%", c->curves[0].points[k].pct);
    printf("    area\n");
    for (int i = 0; i < c->n_curves; i++) {
        const HeadCurve *cv = &c->curves[i];
        printf("%-13s %-15s", cv->order == 0 ? heads_scope_name(cv->scope) : "", heads_order_name(cv->order));
        for (int k = 0; k < HEADS_CURVE_POINTS; k++) printf(" %6.2f", cv->points[k].bleu);
        printf(" %7.2f\n", heads_curve_area(cv));
    }
}

/* The default ranking and how it was chosen; the line tests/heads.sh reads. */
static void print_default(const HeadsAnalysis *an, int curve) {
    if (!curve) {
        printf("default ranking: %s (no curve measured, --no-curve: the exact score)\n",
               heads_order_name(an->default_order));
        return;
    }
    printf("default ranking: %s (the largest area under the BLEU curve over all heads); areas (mean BLEU over "
           "0..100%% removed):",
           heads_order_name(an->default_order));
    for (int o = 0; o < HEADS_ORDERS; o++) printf(" %s %.4f", heads_order_name(o), an->areas[o]);
    double margin = an->areas[an->default_order] - an->areas[HEADS_ORDER_RANDOM];
    printf("\n  %s %s random by %.4f\n", heads_order_name(an->default_order), margin > 0 ? "beats" : "does not beat",
           margin > 0 ? margin : -margin);
}

static void spearman_print(double rho) {
    if (isnan(rho)) printf("undefined (a side is constant)");
    else printf("%.4f", rho);
}

static void progress(int done, int total, void *arg) {
    (void)arg;
    if (done < total) cmd_progress("heads", "curve: %d of %d masks decoded", done, total);
    else cmd_progress("heads", NULL);
}

/* ---- the command ------------------------------------------------------------------------------------ */

static const CmdOption options[] = {
    {'s', "src", "FILE", "the source side of a held-out set (required)", NULL},
    {'R', "ref", "FILE", "its reference translations, line-aligned (required)", NULL},
    {'G', "gold", "FILE", "gold Pharaoh alignments of src and ref: AER for each cross-attention head", NULL},
    {'o', "out", "DIR", "where heads.json, heads.svg, index.html and masks/ go", "RUN/heads"},
    {'S', "seed", "S", "the seed of the random pruning order", "1"},
    {'C', "no-curve", NULL, "skip the pruning curve (its BLEU decodes are the slow part); delta_nll then ranks", NULL},
    {'f', "freq", "FILE", "the corpus whose source-token counts define rare tokens", "the run's data.train.src"},
    {'N', "sentences", "N", "score only the first N usable pairs of the set", "all"},
    {0},
};
const CmdSpec cmd_heads_spec = {
    .name = "heads",
    .operands = "RUN_DIR|WEIGHTS --src SOURCE.txt --ref REFERENCE.txt [--gold ALIGN] [--out DIR] [options]",
    .summary = "what each attention head is worth (importance, pruning curve) and what it does (roles)",
    .about = "On a held-out set: each head's gradient importance (Michel et al. 2019) and the exact\n"
             "change in reference NLL when it alone is masked, their Spearman correlation, its role\n"
             "(Voita et al. 2019: confidence, positional and rare-token heads; AER with --gold; and\n"
             "relative to this model's heads, and sinks), and BLEU as heads are removed by each score\n"
             "(importance, importance_raw, delta_nll) and at random; the score whose curve keeps the\n"
             "most BLEU ranks the table (delta_nll with --no-curve). Writes DIR/heads.json, heads.svg,\n"
             "index.html (a viewer) and masks/ORDER-SCOPE-PCT.txt (for --mask-heads @FILE). The\n"
             "decoding options, translate's, set the curve's search: --no-curve takes none of them.",
    .options = options,
    .shared = decode_options,
    .unlisted = (const char *const[]){"nbest", "mask-heads", NULL},
    .example = "qkv heads runs/toy --src data/toy/test.src --ref data/toy/test.tgt --gold data/toy/test.align",
};

static int analyse(Run *r, const Options *o, const TranslateOptions *to, char **src, char **ref, char **gold, int n) {
    int rc = 2, nh = model_head_count(&r->model), n_freq = 0, tok = r->cfg.data.tokenizer, masks = 0;
    HeadsInput st = {0};
    HeadsAnalysis an = {0};
    long long *freq = NULL;
    char **freq_lines = NULL;
    heads_input_build(r, src, ref, gold, n, o->max_sentences, o->src, o->ref, o->gold, &st);
    if (st.set.n == 0) {
        err_set("%s: no pair to score: every line has an empty side or more tokens than the model's %d positions",
                o->src, r->model.cfg.max_positions - 2);
        goto done;
    }
    const char *freq_path = o->freq ? o->freq : r->cfg.data.train.src;
    if (!(freq_lines = freq_path[0] ? read_file_lines(freq_path, &n_freq) : NULL)) {
        if (o->freq) goto done;
        fprintf(stderr, "qkv: warning: no rare-token shares: %s (--freq FILE names the training source)\n",
                freq_path[0] ? err_msg() : "the config names no data.train.src");
        freq_path = NULL;
    } else {
        freq = heads_source_frequencies(freq_lines, n_freq, tok, &r->src_vocab);
        long long counted = 0;
        for (int i = 0; i < r->src_vocab.size; i++) counted += freq[i];
        /* no counts would make every token the rarest: heads would be called rare for nothing */
        if (counted == 0 && o->freq) {
            err_set("%s: --freq: no source token in it to count (rare tokens are rare in this corpus)", o->freq);
            goto done;
        }
        if (counted == 0) {
            fprintf(stderr, "qkv: warning: no rare-token shares: %s holds no source token to count\n", freq_path);
            free(freq), freq = NULL, freq_path = NULL;
        }
    }
    printf("heads of %s (%s, step %lld) on %s: %d pairs%s; %d heads\n", r->weights, r->which, (long long)r->meta.step,
           o->src, st.set.n, st.skipped ? " (some skipped, below)" : "", nh);
    if (st.skipped)
        printf("skipped %d pairs: an empty side, or more tokens than the model's %d positions\n", st.skipped,
               r->model.cfg.max_positions - 2);
    if (heads_analyse(r, &st, freq, to, o->curve, (uint64_t)o->seed, isatty(2) ? progress : NULL, &an) != 0) goto done;
    const HeadStats *stats = an.stats;
    HeadReport rep = {.weights = r->weights,
                      .step = (long long)r->meta.step,
                      .src_path = o->src,
                      .ref_path = o->ref,
                      .gold_path = o->gold,
                      .freq_path = freq_path,
                      .sentences = st.set.n,
                      .skipped = st.skipped,
                      .ref_tokens = an.ref_tokens,
                      .stats = stats,
                      .n_heads = nh,
                      .spearman = an.spearman,
                      .spearman_raw = an.spearman_raw,
                      .base_nll = an.base_nll,
                      .curves = o->curve ? &an.curves : NULL,
                      .default_order = an.default_order,
                      .areas = o->curve ? an.areas : NULL,
                      .decoding = &to->decode,
                      .score_seconds = an.score_seconds,
                      .curve_seconds = an.curve_seconds};

    print_table(stats, nh, an.default_order);
    printf("\nreference NLL %.4f per token with no head masked (%lld tokens); entropy in nats\n", an.base_nll,
           an.ref_tokens);
    printf("importance: mean |dL/dgate| per sentence, normalised by the L2 norm of its layer's (Michel et al. 2019)\n");
    printf("roles (voita): previous/current/next at a positional share >= %.2f, rare at a rare-token share >= %.2f%s\n",
           HEADS_POSITIONAL_SHARE, HEADS_RARE_SHARE, gold ? "" : " (aligns needs --gold)");
    if (gold) printf("       aligns: a cross head with AER <= %.2f\n", HEADS_ALIGN_AER);
    printf("roles (relative): rel:SHARE at >= the kind's mean + %.0f sd and >= %.2f, top:SHARE the kind's largest\n",
           HEADS_RELATIVE_SDS, HEADS_RELATIVE_MIN_SHARE);
    printf("roles (clark): sink when >= %.2f of the queries put their top weight on the first key or the source's "
           "EOS\n",
           HEADS_SINK_SHARE);
    printf("Spearman rank correlation with dNLL over the %d heads: importance ", nh);
    spearman_print(an.spearman);
    printf(", raw score ");
    spearman_print(an.spearman_raw);
    printf("\n");
    if (o->curve) print_curves(&an.curves, to);
    print_default(&an, o->curve);
    printf("\ntiming: scores %.2f s (importance, dNLL, roles%s); curve %s", an.score_seconds, gold ? ", AER" : "",
           o->curve ? "" : "skipped (--no-curve)\n");
    if (o->curve) printf("%.2f s (%d distinct masks decoded and scored)\n", an.curve_seconds, an.curves.evaluations);

    rc = 1;
    if (heads_export(o->out, &rep, r, &st, &masks) != 0) goto done;
    if (o->curve)
        printf("wrote %s/heads.json, %s/heads.svg, %s/index.html (open it in a browser) and %d masks in %s/masks/ "
               "(for --mask-heads @FILE; default-SCOPE-PCT.txt are %s's)\n",
               o->out, o->out, o->out, masks, o->out, heads_order_name(an.default_order));
    else printf("wrote %s/heads.json and %s/index.html (open it in a browser)\n", o->out, o->out);
    rc = 0;
done:
    if (rc == 1) rc = err_status();
    heads_analysis_free(&an);
    if (freq_lines) free_lines(freq_lines, n_freq);
    free(freq);
    heads_input_free(&st);
    return rc;
}

int cmd_heads(int argc, char **argv) {
    Options o = {.seed = 1, .curve = 1};
    TranslateOptions to = decode_options_defaults();
    const char *mask_heads = NULL, *unk = NULL;
    int c, bad = 0;
    const char *for_curve = NULL; /* the last option given that only the curve reads */
    while (!bad && (c = cmd_option_next(&cmd_heads_spec, argc, argv)) >= 0) {
        switch (c) {
        case 's': o.src = optarg; break;
        case 'R': o.ref = optarg; break;
        case 'G': o.gold = optarg; break;
        case 'o': o.out = optarg; break;
        case 'f': o.freq = optarg; break;
        case 'C': o.curve = 0; break;
        case 'S':
            bad = cmd_long("--seed", "a seed from 0 to 2^62", optarg, 0, 1L << 62, &o.seed) != 0;
            for_curve = "seed";
            break;
        case 'N': bad = cmd_int("--sentences", "a count from 1", optarg, 1, 1 << 30, &o.max_sentences) != 0; break;
        default:
            if (decode_options_unk_name(c)) unk = decode_options_unk_name(c); /* the last of the two given */
            bad = decode_options_apply(c, optarg, &to, &mask_heads) != 0;
            if (c != 'm') for_curve = cmd_option_name(decode_options, c);
            break;
        }
    }
    if (bad) return cmd_fail(2);
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    /* every measure here is of the whole model, each mask of the curve its own */
    if (mask_heads)
        return err_set("--mask-heads: qkv heads masks heads itself (the curve's masks go to DIR/masks/)"), cmd_fail(2);
    if (to.decode.nbest != 1)
        return err_set("--nbest %d: qkv heads scores each sentence's best hypothesis alone", to.decode.nbest),
               cmd_fail(2);
    /* taken and then ignored would let a user believe the figures came from that search */
    if (!o.curve && for_curve)
        return err_set("--%s: qkv heads --no-curve draws no curve (--seed and the decoding options set the curve's "
                       "order and search)",
                       for_curve),
               cmd_fail(2);
    if (optind != argc - 1) return cmd_usage_of(&cmd_heads_spec);
    if (!o.src || !o.ref) return err_set("--%s is required (the held-out set)", o.src ? "ref" : "src"), cmd_fail(2);
    if (o.out && o.out[0] == '\0') return err_set("--out: an empty directory name"), cmd_fail(2);
    if (decode_options_check(&to) != 0) return cmd_fail(2);
    int n = 0, n_gold = 0;
    char **src, **ref, **gold = NULL;
    if (cmd_read_aligned(o.src, o.ref, "a source", &src, &ref, &n) != 0) return cmd_fail(2);
    if (o.gold) {
        if (!(gold = read_file_lines(o.gold, &n_gold))) return free_lines(src, n), free_lines(ref, n), cmd_fail(2);
        if (n_gold != n) {
            err_set("%s has %d lines, %s %d: gold alignments must be line-aligned with the set", o.gold, n_gold, o.src,
                    n);
            return free_lines(src, n), free_lines(ref, n), free_lines(gold, n_gold), cmd_fail(2);
        }
    }
    Run r;
    int rc = 0;
    if (run_open(&r, argv[optind]) != 0) {
        rc = cmd_fail(err_status());
    } else {
        /* fixed weights: the decoding step's laid out once, for every worker and batch */
        model_keep_step_weights(&r.model);
        to = translate_options_for_run(&to, &r.cfg);
        /* beside the run by default, where qkv serve and qkv report look for it */
        char out[sizeof r.dir + 8];
        if (!o.out) o.out = run_path(out, sizeof out, r.dir, RUN_HEADS_DIR);
        if (decode_options_check_unk(unk, r.cfg.data.tokenizer) != 0) rc = 2;
        else if (staged_dir_usable(o.out, "--out") != 0) rc = 2; /* before the analysis, not after it */
        else rc = analyse(&r, &o, &to, src, ref, gold, n);
        if (rc) cmd_fail(rc);
        run_close(&r);
    }
    free_lines(src, n), free_lines(ref, n);
    if (gold) free_lines(gold, n_gold);
    return rc;
}
