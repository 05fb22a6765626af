/* explain: `qkv explain RUN --text "..."`, where each target word came from: its source
 * share (contributions rolled out through the whole model), and the source tokens each
 * method ranks first: attention, contributions, gradients, leave-one-out; explain.json
 * and the viewer's explain mode. `qkv explain RUN --src F [--ref F] [--gold F]`, the
 * corpus tables: AOPC per method against random orders, Kendall tau per head, the source
 * share by decoder layer and target position, AER per method. The library work is
 * explain/'s; this file reads the user's files, prints and writes. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/decode_options.h"
#include "cmdlib/options.h"
#include "cmdlib/sentence.h"
#include "data/corpus.h"
#include "decode/decode.h"
#include "decode/fanout.h"
#include "explain/aligners.h"
#include "explain/corpus_run.h"
#include "explain/explain_json.h"
#include "explain/explain_sentence.h"
#include "explain/faith.h"
#include "explain/pair.h"
#include "run/run.h"
#include "util/atomic_file.h"
#include "util/axis.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/staged_dir.h"
#include "util/text.h"

typedef struct {
    const char *text, *target, *contrast, *out, *src, *ref, *gold, *mask_heads;
    int ig_steps, max_sentences, random_orders, threads;
    int null; /* --null on: with --gold, the null decision on every method's links */
} Options;

/* The files each mode writes: what a new export replaces in an old one. The two modes
 * share a default folder, so each replaces only its own and leaves the other's. */
static int sentence_file(const char *name) {
    return strcmp(name, "explain.json") == 0 || strcmp(name, "index.html") == 0;
}
static int corpus_file(const char *name) {
    return strcmp(name, "explain-corpus.json") == 0 || strcmp(name, "aopc.svg") == 0;
}

/* ---- one sentence ------------------------------------------------------------------------- */

/* The source position a method's row t ranks first (EOS left out), or -1 where the row
 * ranks nothing: every score the same (a gradient not computed, or of an f that is 0). */
static int top_source(const float *row, int S) {
    int best = -1, flat = 1;
    for (int j = 0; j + 1 < S; j++) {
        if (best < 0 || row[j] > row[best]) best = j;
        flat &= row[j] == row[0];
    }
    return flat ? -1 : best;
}

static const ExplainMethod *method_named(const ExplainMethod *ms, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(ms[i].name, name) == 0) return &ms[i];
    return NULL;
}

static int one_sentence(Run *r, const Options *o, int masked) {
    int tok = r->cfg.data.tokenizer, rc = 2;
    ExplainAsk ask = explain_ask(o->text, o->target, o->contrast);
    ask.ig_steps = o->ig_steps;
    ExplainSentence x;
    if (explain_sentence_prepare(&r->model, &r->src_vocab, &r->tgt_vocab, tok, &ask, &x, NULL) != 0) goto done;
    cmd_warn_unknown(NULL, &x.unknown);
    explain_sentence_decode(&r->model, &ask, &x);
    double t0 = now_seconds();
    explain_sentence_run(&r->model, &r->src_vocab, &r->tgt_vocab, tok, &ask, &x);
    double secs = now_seconds() - t0;
    const PairExplanation *ep = &x.e;
    const ExplainMethod *ms = x.methods;
    int n_ms = x.n_methods, nt = x.nt, *tgt = x.tgt;
    rc = 1;
    StrBuf page = {0};
    if (attnview_page(x.json, &page) != 0) goto done;
    const StagedPart parts[] = {{"explain.json", x.json, strlen(x.json)}, {"index.html", page.buf, page.len}};
    int written = staged_dir_write_parts(o->out, "--out", parts, 2, sentence_file) == 0;
    sb_free(&page);
    if (!written) goto done;

    printf("model: %s (%s, step %lld)", r->weights, r->which, (long long)r->meta.step);
    if (masked) printf(", %d head%s masked", masked, masked == 1 ? "" : "s");
    putchar('\n');
    char *text = attnmap_utf8(o->text), *words = decode_ids(tgt, nt, tok, &r->tgt_vocab), *shown = attnmap_utf8(words);
    cmd_print_text("source: ", text);
    cmd_print_text(o->target ? "target (forced): " : "translation (greedy): ", shown);
    free(text), free(words), free(shown);
    int L = ep->contrib.dec_layers, S = ep->S, T = ep->T;
    char last_avg[EXPLAIN_NAME_MAX];
    snprintf(last_avg, sizeof last_avg, "L%d.avg", L - 1);
    const char *cols[] = {last_avg, "contrib.rollout", "integrated-gradients", "leave-one-out"};
    if (o->contrast) printf("the gradients explain log p(word) - log p(%s)\n", o->contrast);
    printf("\nsource share: how much of the prediction came from the source (contributions rolled out)\n");
    printf("%-14s %8s %7s", "target", "log p", "share");
    for (int c = 0; c < 4; c++) printf("  %-17s", cols[c]);
    putchar('\n');
    for (int t = 0; t < T; t++) {
        cmd_print_column(ep->maps.tgt_out[t], 14);
        printf(" %8.3f %7.2f", ep->logp[t], ep->contrib.share[(size_t)(L - 1) * T + t]);
        for (int c = 0; c < 4; c++) {
            const ExplainMethod *m = method_named(ms, n_ms, cols[c]);
            int j = m ? top_source(m->scores + (size_t)t * S, S) : -1;
            if (m && m->family == EXPLAIN_GRADIENT && ep->grad.foil_is_word[t]) printf("  %-17s", "- (the foil)");
            else if (j < 0) printf("  %-17s", "-");
            else {
                printf("  ");
                cmd_print_column(ep->maps.src[j], 11);
                printf(" %5.2f", m->scores[(size_t)t * S + j]);
            }
        }
        putchar('\n');
    }
    for (int t = 0; t < T; t++)
        if (ep->grad.foil_is_word[t]) {
            StrBuf said = {0};
            sb_printf(&said,
                      "'%s' (position %d) is the foil itself: log p(%s) - log p(%s) is 0 whatever the input, so "
                      "the gradients rank nothing for it",
                      o->contrast, t, o->contrast, o->contrast);
            cmd_print_text("", said.buf);
            sb_free(&said);
        }
    double worst = 0, gap = 0;
    for (int t = 0; t < T; t++)
        worst = fmax(worst, fabs(ep->grad.ig_error[t])), gap = fmax(gap, fabs(ep->grad.f[t] - ep->grad.f_base[t]));
    if (o->ig_steps)
        printf("\nintegrated gradients: %d steps; completeness error at most %.4f (|f(x) - f(baseline)| up to %.3f)\n",
               o->ig_steps, worst, gap);
    printf("explained in %.2f s\nwrote %s/explain.json and %s/index.html (open it in a browser)\n", secs, o->out,
           o->out);
    rc = 0;
done:
    if (rc == 1) rc = err_status();
    explain_sentence_free(&x);
    return rc;
}

/* ---- a corpus ------------------------------------------------------------------------------- */

typedef struct {
    const Options *o;
    FaithTotals *f;
    AlignCounts *aer; /* NULL without --gold */
    double seconds;
    int skipped;
} CorpusRun;

static json_t *corpus_json(const CorpusRun *c) {
    const FaithTotals *f = c->f;
    json_t *root = json_object();
    json_put(root, "format", json_string("qkv-explain-corpus-1"));
    json_put(root, "sentences", json_integer(f->sentences));
    json_put(root, "target_tokens", json_integer(f->tokens));
    json_put(root, "seconds", json_fmt("%.1f", c->seconds));
    json_put(root, "removal", json_string("unk"));
    if (c->aer) json_put(root, "null", json_string(c->o->null ? "on" : "off"));
    if (c->aer && c->o->null) json_put(root, "null_rule", json_string(explain_null_rule));
    json_t *ms = json_array();
    for (int i = 0; i < f->n_methods; i++) {
        json_t *m = json_object();
        json_put(m, "name", json_string(f->methods[i].name));
        const char *said = explain_gradient_said(f->methods[i].name);
        if (said) json_put(m, "score", json_string(said));
        json_put(m, "aopc", json_fmt("%.4f", faith_aopc(f, i)));
        json_t *ks = json_array();
        for (int k = 0; k < FAITH_KS; k++) json_array_append_new(ks, json_fmt("%.4f", faith_drop_at(f, i, k)));
        json_put(m, "drop_at_k", ks);
        if (c->aer) json_put(m, "aer", json_fmt("%.4f", align_aer(&c->aer[i])));
        if (c->aer) json_put(m, "unaligned", json_integer(c->aer[i].words - c->aer[i].predicted));
        json_array_append_new(ms, m);
    }
    json_put(root, "methods", ms);
    double mean, sd;
    faith_random(f, &mean, &sd);
    json_t *rnd = json_object();
    json_put(rnd, "orders", json_integer(f->n_random));
    json_put(rnd, "aopc_mean", json_fmt("%.4f", mean));
    json_put(rnd, "aopc_sd", json_fmt("%.4f", sd));
    json_put(root, "random", rnd);
    const char *tau_names[3] = {"cross_vs_loo", "cross_vs_saliency", "self_vs_saliency"};
    const double *sums[3] = {f->tau_loo, f->tau_grad, f->tau_self};
    const long *counts[3] = {f->n_loo, f->n_grad, f->n_self};
    json_t *tau = json_object();
    for (int k = 0; k < 3; k++) {
        json_t *g = json_array();
        for (int l = 0; l < f->layers; l++) {
            json_t *row = json_array();
            for (int h = 0; h < f->heads; h++) {
                size_t at = (size_t)l * f->heads + h;
                json_array_append_new(row, json_fmt("%.4f", counts[k][at] ? sums[k][at] / counts[k][at] : NAN));
            }
            json_array_append_new(g, row);
        }
        json_put(tau, tau_names[k], g);
    }
    json_put(root, "tau", tau);
    json_t *by_layer = json_array(), *by_pos = json_array();
    for (int l = 0; l < f->layers; l++)
        json_array_append_new(by_layer, json_fmt("%.4f", f->tokens ? f->share_layer[l] / (double)f->tokens : NAN));
    for (int p = 0; p < FAITH_POSITIONS && f->n_pos[p]; p++)
        json_array_append_new(by_pos, json_fmt("%.4f", f->share_pos[p] / (double)f->n_pos[p]));
    json_t *share = json_object();
    json_put(share, "by_layer", by_layer);
    json_put(share, "by_position", by_pos);
    json_put(root, "source_share", share);
    return root;
}

/* aopc.svg: each method's AOPC as a bar, coloured by family, on an axis with ticks; the
 * random orders' mean (dashed) and spread (shaded) drawn over the bars, so that a bar
 * that passes them is seen to */
static char *aopc_svg(const FaithTotals *f) {
    static const char *family_colour[] = {"#4c78a8", "#f58518", "#54a24b", "#b279a2"};
    static const char *family_name[] = {"attention", "contributions", "gradients", "leave one out"};
    StrBuf sb = {0};
    int n = f->n_methods, row = 18, left = 170, width = 420, bars_end = 24 + n * row, H = bars_end + 80;
    double top = 0, mean, sd;
    faith_random(f, &mean, &sd);
    for (int i = 0; i < n; i++) top = fmax(top, faith_aopc(f, i));
    top = fmax(top, mean + sd);
    if (!(top > 0)) top = 1;
    double step = axis_tick_step(0, top, 5);
    top = axis_top(top, step);
    char random_note[200];
    snprintf(random_note, sizeof random_note,
             "dashed: random orders (%d), mean %.3f; shaded: one standard deviation (%.3f) either side", f->n_random,
             mean, sd);
    /* which x-gradient is which: the signed one and its magnitude rank differently */
    const char *signs = "x-gradient: e . df/dx, signed (a token against the word ranks last); x-gradient-l2: "
                        "|e * df/dx|_2, its magnitude";
    int svg_width = left + width + 70;
    if (svg_width < left + text_px(random_note, 11) + 8) svg_width = left + text_px(random_note, 11) + 8;
    if (svg_width < left + text_px(signs, 11) + 8) svg_width = left + text_px(signs, 11) + 8;
    sb_printf(&sb,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
              "font-size=\"11\">\n<text x=\"4\" y=\"14\" font-size=\"13\">AOPC: drop in log p(y) with the top-k source "
              "tokens removed (higher: more faithful)</text>\n",
              svg_width, H);
    double xm = left + mean / top * width; /* the dashed line of the random mean */
    for (int i = 0; i < n; i++) {
        double a = faith_aopc(f, i), w = fmax(0, a) / top * width;
        int y = 26 + i * row, fam = f->methods[i].family;
        sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", left - 6, y + 11, f->methods[i].name);
        sb_printf(&sb, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", left, y, w, row - 5,
                  family_colour[fam >= 0 && fam < 4 ? fam : 3]);
        /* the figure after its bar, or after the dashed line where the line would run through it */
        char figure[32];
        snprintf(figure, sizeof figure, "%.3f", a);
        double lx = left + w + 4;
        if (lx < xm + 3 && lx + text_px(figure, 11) > xm - 3) lx = xm + 4;
        sb_printf(&sb, "<text x=\"%.1f\" y=\"%d\">%s</text>\n", lx, y + 11, figure);
    }
    double x0 = left + fmax(0, mean - sd) / top * width, x1 = left + (mean + sd) / top * width;
    sb_printf(&sb,
              "<rect class=\"random\" x=\"%.1f\" y=\"24\" width=\"%.1f\" height=\"%d\" fill=\"#000\" "
              "fill-opacity=\"0.12\"/>\n",
              x0, fmax(1, x1 - x0), n * row);
    sb_printf(&sb, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"24\" y2=\"%d\" stroke=\"#222\" stroke-dasharray=\"4 3\"/>\n", xm,
              xm, bars_end);
    /* the axis: AOPC in nats */
    sb_printf(&sb, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n", left, left + width,
              bars_end + 2, bars_end + 2);
    for (int k = 0, nk = axis_tick_count(0, top, step); k < nk; k++) {
        double v = k * step, x = left + v / top * width;
        sb_printf(&sb, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#888\"/>", x, x, bars_end + 2,
                  bars_end + 6);
        sb_printf(&sb, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%g</text>\n", x, bars_end + 17,
                  v);
    }
    sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#555\">nats</text>\n", left - 6, bars_end + 17);
    /* the key: families, then the random orders with their figures */
    int kx = left;
    for (int fam = 0; fam < 4; fam++) {
        sb_printf(&sb,
                  "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                  kx, bars_end + 27, family_colour[fam], kx + 14, bars_end + 36, family_name[fam]);
        kx += 14 + text_px(family_name[fam], 11) + 14;
    }
    sb_printf(&sb, "<text x=\"%d\" y=\"%d\" fill=\"#444\">%s</text>\n", left, H - 20, random_note);
    sb_printf(&sb, "<text x=\"%d\" y=\"%d\" fill=\"#444\">%s</text>\n", left, H - 6, signs);
    sb_printf(&sb, "</svg>\n");
    return sb.buf;
}

typedef struct {
    char *json, *svg;
} CorpusFiles;

static void print_corpus(const CorpusRun *c) {
    const FaithTotals *f = c->f;
    double mean, sd;
    faith_random(f, &mean, &sd);
    printf("%ld sentence pairs, %ld target tokens, %.1f s on %d thread%s (%ld removal passes); a token is removed as "
           "<unk>\n",
           f->sentences, f->tokens, c->seconds, c->o->threads, c->o->threads == 1 ? "" : "s", f->removal_rows);
    if (c->skipped) printf("%d pairs left out: a side empty or longer than the model's positions\n", c->skipped);
    printf(
        "\nfaithfulness: drop in log p(y_t) with the method's top-k source tokens removed (higher: more faithful)\n");
    printf("%-22s %7s %7s %7s %7s %7s%s\n", "method", "k=1", "k=2", "k=3", "k=20%", "AOPC", c->aer ? "     AER" : "");
    for (int i = 0; i < f->n_methods; i++) {
        printf("%-22s", f->methods[i].name);
        for (int k = 0; k < FAITH_KS; k++) printf(" %7.3f", faith_drop_at(f, i, k));
        printf(" %7.3f", faith_aopc(f, i));
        if (c->aer) printf("  %6.3f", align_aer(&c->aer[i]));
        putchar('\n');
    }
    printf("%-22s %39.3f  (sd %.3f over %d orders)\n", "random", mean, sd, f->n_random);
    if (c->aer && c->o->null) printf("%s\n", explain_null_rule); /* the AER column's rule, as qkv align says it */
    printf("the gradient rows rank the source tokens by (f = log p(y_t), x = e + position):\n");
    for (int k = 0; k < EXPLAIN_GRADIENTS; k++)
        printf("  %-20s %s\n", explain_gradients[k].name, explain_gradients[k].score);
    const char *titles[3] = {"cross-attention vs leave-one-out", "cross-attention vs saliency",
                             "decoder self-attention vs saliency (prefix)"};
    const double *sums[3] = {f->tau_loo, f->tau_grad, f->tau_self};
    const long *counts[3] = {f->n_loo, f->n_grad, f->n_self};
    for (int k = 0; k < 3; k++) {
        printf("\nKendall tau, %s, per head (rows: layers)\n", titles[k]);
        double all = 0;
        long nall = 0;
        for (int l = 0; l < f->layers; l++) {
            printf("  layer %d", l);
            for (int h = 0; h < f->heads; h++) {
                size_t at = (size_t)l * f->heads + h;
                printf(" %6.3f", counts[k][at] ? sums[k][at] / counts[k][at] : NAN);
                all += sums[k][at], nall += counts[k][at];
            }
            putchar('\n');
        }
        printf("  mean %.3f\n", nall ? all / nall : NAN);
    }
    printf("\nsource share (contributions rolled out), mean over target tokens, after each decoder layer:");
    for (int l = 0; l < f->layers; l++) printf(" %.3f", f->tokens ? f->share_layer[l] / (double)f->tokens : NAN);
    printf("\nby target position (after the last layer):");
    for (int p = 0; p < FAITH_POSITIONS && f->n_pos[p]; p++)
        printf("%s%d:%.2f", p % 10 ? " " : "\n  ", p, f->share_pos[p] / (double)f->n_pos[p]);
    printf("\n");
}

static void on_progress(int done, int total, void *arg) {
    double t0 = *(const double *)arg, el = now_seconds() - t0;
    if (done < total)
        cmd_progress("explain", "explained %d of %d pairs, %.0f s, ETA %.0f s", done, total, el,
                     el / done * (total - done));
    else cmd_progress("explain", NULL);
}

static int corpus(Run *r, const Options *o) {
    int n_src = 0, n_ref = 0, n_gold = 0, rc = 2, tok = r->cfg.data.tokenizer, max = r->model.cfg.max_positions - 2;
    char **src = read_file_lines(o->src, &n_src), **ref = NULL, **gold = NULL;
    ExplainCorpusResult res = {0};
    CorpusRun c = {o, &res.f, NULL, 0, 0};
    Seq *ss = NULL, *ts = NULL;
    char **golds = NULL;
    int *lines = NULL, n = 0;
    if (!src) goto done;
    if (o->ref && !(ref = read_file_lines(o->ref, &n_ref))) goto done;
    if (o->gold && !(gold = read_file_lines(o->gold, &n_gold))) goto done;
    if ((ref && n_ref != n_src) || (gold && n_gold != n_src)) {
        err_set("%s has %d lines, %s %d: they must be line-aligned", o->src, n_src,
                ref && n_ref != n_src ? o->ref : o->gold, ref && n_ref != n_src ? n_ref : n_gold);
        goto done;
    }
    /* the pairs the model can read whole, up to --max-sentences */
    int want = o->max_sentences && o->max_sentences < n_src ? o->max_sentences : n_src;
    ss = xcalloc((size_t)want, sizeof(Seq)), ts = ref ? xcalloc((size_t)want, sizeof(Seq)) : NULL;
    golds = gold ? xcalloc((size_t)want, sizeof(char *)) : NULL, lines = xcalloc((size_t)want, sizeof(int));
    for (int i = 0; i < want; i++) {
        int *sid = xmalloc(sizeof(int) * (size_t)(max + 2)),
            *tid = ref ? xmalloc(sizeof(int) * (size_t)(max + 2)) : NULL;
        int ns = encode_line(src[i], tok, &r->src_vocab, sid, max + 1);
        int nt = ref ? encode_line(ref[i], tok, &r->tgt_vocab, tid, max + 1) : 1;
        if (ns < 1 || ns > max || nt < 1 || nt > max) {
            c.skipped++;
            free(sid), free(tid);
            continue;
        }
        ss[n] = (Seq){sid, ns};
        if (ts) ts[n] = (Seq){tid, nt};
        if (golds) golds[n] = gold[i];
        lines[n++] = i + 1;
    }
    if (n == 0) {
        err_set("%s: no pair the model can read (each side 1..%d tokens)", o->src, max);
        goto done;
    }
    ExplainCorpus in = {.n = n,
                        .src = ss,
                        .tgt = ts,
                        .gold = golds,
                        .gold_file = o->gold,
                        .null = o->null,
                        .line = lines,
                        .tokenizer = tok,
                        .sv = &r->src_vocab,
                        .tv = &r->tgt_vocab,
                        .eo = {.foil = -1, .ig_steps = o->ig_steps, .loo = 1},
                        .random_orders = o->random_orders};
    double t0 = now_seconds();
    if (explain_corpus(&r->model, &in, o->threads, on_progress, &t0, &res) != 0) goto done;
    c.seconds = res.seconds, c.aer = res.aer;
    rc = 1;
    json_t *root = corpus_json(&c);
    CorpusFiles files = {xcheck(json_dumps(root, JSON_WRITE_FLAGS | JSON_INDENT(1))), aopc_svg(&res.f)};
    json_decref(root);
    const StagedPart parts[] = {{"explain-corpus.json", files.json, strlen(files.json)},
                                {"aopc.svg", files.svg, strlen(files.svg)}};
    int ok = staged_dir_write_parts(o->out, "--out", parts, 2, corpus_file) == 0;
    free(files.json), free(files.svg);
    if (!ok) goto done;
    print_corpus(&c);
    printf("\nwrote %s/explain-corpus.json and %s/aopc.svg\n", o->out, o->out);
    rc = 0;
done:
    if (rc == 1) rc = err_status();
    explain_corpus_free(&res);
    for (int i = 0; i < n; i++) free(ss[i].ids), free(ts ? ts[i].ids : NULL);
    free(ss), free(ts), free(golds), free(lines);
    if (src) free_lines(src, n_src);
    if (ref) free_lines(ref, n_ref);
    if (gold) free_lines(gold, n_gold);
    return rc;
}

static const CmdOption options[] = {
    {'t', "text", "SOURCE", "the sentence to explain", NULL},
    {'g', "target", "TRANSLATION", "force this translation instead of the model's greedy one", NULL},
    {'c', "contrast", "WORD", "explain log p(word) - log p(WORD): why the word and not WORD", NULL},
    {'s', "src", "FILE", "a corpus: source sentences (instead of --text)", NULL},
    {'r', "ref", "FILE", "with --src: their translations, forced (default: the model's greedy ones)", NULL},
    {'a', "gold", "FILE", "with --src and --ref: gold Pharaoh alignments, for AER per method", NULL},
    {'n', "max-sentences", "N", "with --src: the first N pairs (0: all)", "500"},
    {'i', "ig-steps", "N", "integrated gradients' steps (0: none)", "32"},
    {'R', "random-orders", "N", "with --src: random orders AOPC is compared with", "10"},
    {'o', "out", "DIR",
     "where explain.json and index.html go, or with --src the corpus tables; neither replaces the other's", "explain"},
    {'m', "mask-heads", "SPEC", MASK_HEADS_HELP, NULL},
    {'u', "null", "on|off",
     "with --gold, on: a target word its own prefix outweighs every source word for (the last cross-attention "
     "block's contributions) claims with a discount, the words are linked one to one and a word left over is "
     "unaligned, as qkv align links them; off: every target word linked to its strongest source word",
     "on"},
    {0},
};
const CmdSpec cmd_explain_spec = {
    .name = "explain",
    .operands = "RUN (--text \"SOURCE\" [--target \"TRANSLATION\"] [--contrast WORD] | --src FILE [--ref FILE] "
                "[--gold FILE [--null on|off]]) [--out DIR]",
    .summary = "where each target word came from: source share, attributions, and how faithful each is",
    .about = "For each target word: its source share (contributions through every layer, rolled out),\n"
             "and the source tokens attention, contributions, gradients (saliency, x-gradient signed\n"
             "and by its magnitude x-gradient-l2, integrated gradients) and leave-one-out rank first;\n"
             "DIR/index.html shows them side by side. With --src, over a corpus: each method's AOPC\n"
             "(drop in log p when its top tokens are removed) against random orders, Kendall tau per\n"
             "head, source share per layer and position, and with --gold AER per method (the gold\n"
             "file read and checked first; the words linked one to one, a word its prefix wrote\n"
             "discounted and a word left over unaligned, as qkv align links them, unless --null off).",
    .options = options,
    .example = "qkv explain runs/toy --text \"the old farmer sees a red bird\" --out explain/",
};

int cmd_explain(int argc, char **argv) {
    Options o = {.out = "explain", .ig_steps = EXPLAIN_IG_STEPS, .max_sentences = 500, .random_orders = 10, .null = 1};
    const char *null_s = NULL;
    int c, bad = 0;
    const char *corpus_sizes = NULL; /* a corpus-only option given: with --text it would change nothing */
    while (!bad && (c = cmd_option_next(&cmd_explain_spec, argc, argv)) >= 0) {
        switch (c) {
        case 't': o.text = optarg; break;
        case 'g': o.target = optarg; break;
        case 'c': o.contrast = optarg; break;
        case 's': o.src = optarg; break;
        case 'r': o.ref = optarg; break;
        case 'a': o.gold = optarg; break;
        case 'o': o.out = optarg; break;
        case 'm': o.mask_heads = optarg; break;
        case 'u': null_s = optarg; break;
        case 'n':
            bad = cmd_int("--max-sentences", "a sentence count", optarg, 0, 100000000, &o.max_sentences);
            corpus_sizes = "max-sentences";
            break;
        case 'i': bad = cmd_int("--ig-steps", "a step count (0..1024)", optarg, 0, 1024, &o.ig_steps); break;
        case 'R':
            bad = cmd_int("--random-orders", "a count (1..1000)", optarg, 1, 1000, &o.random_orders);
            corpus_sizes = "random-orders";
            break;
        }
    }
    if (bad) return cmd_fail(2);
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1 || (!o.text) == !o.src) return cmd_usage_of(&cmd_explain_spec);
    if (o.out[0] == '\0') return err_set("--out: an empty directory name"), cmd_fail(2);
    if (null_s && strcmp(null_s, "on") != 0 && strcmp(null_s, "off") != 0)
        return err_set("--null: '%s' is not on or off", null_s), cmd_fail(2);
    if (null_s && !o.gold) return err_set("--null goes with --gold"), cmd_fail(2);
    o.null = !null_s || strcmp(null_s, "on") == 0;
    const char *src_only = o.ref ? "ref" : o.gold ? "gold" : corpus_sizes;
    if (o.text && src_only) return err_set("--%s goes with --src", src_only), cmd_fail(2);
    if (o.src && (o.target || o.contrast))
        return err_set("--%s goes with --text", o.target ? "target" : "contrast"), cmd_fail(2);
    if (o.gold && !o.ref) return err_set("--gold aligns the source with --ref: give both"), cmd_fail(2);
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(err_status());
    /* fixed weights: the decoding step's laid out once, for every worker and batch */
    model_keep_step_weights(&r.model);
    int masked = decode_options_mask_heads(&r.model, o.mask_heads, NULL);
    if (masked < 0) return run_close(&r), cmd_fail(err_status());
    /* --out before the work: a corpus's can take minutes */
    if (staged_dir_usable(o.out, "--out") != 0) return run_close(&r), cmd_fail(2);
    /* a sentence's products are small: OpenBLAS's threads would only wait on each other
     * (measured on 2 cores: one sentence of the toy model 0.19 s on one thread, 2.2 s on two
     * beside a training run) */
    o.threads = fanout_threads(); /* the corpus's workers: every core, each on its own replica */
    openblas_set_num_threads(1);
    int rc = o.text ? one_sentence(&r, &o, masked) : corpus(&r, &o);
    if (rc) cmd_fail(rc);
    run_close(&r);
    return rc;
}
