/* align: `qkv align RUN --src F --tgt F [--gold F]`, word alignments read from the
 * cross-attention, one Pharaoh line per pair, or precision/recall/AER per head against
 * gold links, that table also appended to RUN/align.jsonl (the report's alignments). The
 * command reads the files and prints; reading a pair's links off the model is
 * attention/align_model.c's. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/align_map.h"
#include "attention/align_model.h"
#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/options.h"
#include "data/corpus.h"
#include "explain/aligners.h"
#include "explain/contrib.h"
#include "explain/explain_sentence.h"
#include "explain/pair.h"
#include "run/files.h"
#include "run/run.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"

static void pick_name(AlignPick p, char *buf, size_t n) {
    if (p.layer < 0) snprintf(buf, n, "all layers, all heads");
    else if (p.head < 0) snprintf(buf, n, "layer %d, average", p.layer);
    else snprintf(buf, n, "layer %d, head %d", p.layer, p.head);
}

/* --layer/--head: a number, or the word that means "averaged" */
static int parse_index(const char *s, const char *what, int *out) {
    char where[16], which[32];
    snprintf(where, sizeof where, "--%s", what);
    snprintf(which, sizeof which, "a %s number", what);
    return cmd_int(where, which, s, 0, 1000, out);
}

static const CmdOption options[] = {
    {'s', "src", "FILE", "source sentences (required)", NULL},
    {'t', "tgt", "FILE", "their translations, line-aligned (required)", NULL},
    {'g', "gold", "FILE", "gold Pharaoh alignments: score every head instead of printing links", NULL},
    {'l', "layer", "L|all", "the decoder layer whose cross-attention aligns; all: every layer averaged", "the last"},
    {'h', "head", "H|avg", "one head of that layer; avg: its heads averaged", "avg"},
    {'m', "method", "M",
     "what links are read from: contrib (what each source word sent the word, where it is chosen, through the last "
     "cross-attention block), output (the cross-attention weights there), shift (where it is read, one step "
     "later), grad (gradients)",
     "contrib; output with --layer/--head"},
    {'n', "null", "on|off",
     "on: target words linked one to one, a word its own prefix outweighs every source word for (the last "
     "cross-attention block's contributions) claiming with a discount, a word left over unaligned; off: every "
     "target word linked to its strongest source word",
     "on"},
    {0},
};
const CmdSpec cmd_align_spec = {
    .name = "align",
    .operands =
        "RUN --src FILE --tgt FILE [--gold FILE] [--method contrib|output|shift|grad] [--layer L|all] [--head H|avg] "
        "[--null on|off]",
    .summary = "word alignments from cross-attention, or their AER against gold links",
    .about = "Each target word is linked to the source word that sent it most in the last\n"
             "cross-attention block (its contributions), read where the word is chosen: at its first\n"
             "piece, source pieces pooled to words; one Pharaoh line \"i-j ...\" per pair. With --gold,\n"
             "precision, recall and AER of the method's readings (contrib: the last layer's and the\n"
             "rollout through every layer). --method output reads the cross-attention weights instead\n"
             "(with --gold: every head, each layer's average and all layers'), shift each layer's\n"
             "heads averaged one step later (shift-att), grad gradients (saliency, x-gradient signed\n"
             "and by magnitude, integrated gradients). The --gold table is also appended to\n"
             "RUN_DIR/align.jsonl, where qkv report shows it.\n"
             "With --null on, target words are linked one to one (a matching): as many words as can\n"
             "be, and of those linkings the one whose scores multiply to the most, so a determiner\n"
             "that reads its noun for the noun's gender more than the noun's word does still keeps\n"
             "its own determiner. The prefix competes as a null word: where the last decoder\n"
             "layer's cross-attention block got more from the prefix (the residual) than from any one\n"
             "source word, the word's pairs are discounted by that ratio. A word left over stays\n"
             "unaligned. No threshold: one rule for every run and reading.\n"
             "--null off links every target word to its strongest source word.",
    .options = options,
    .example = "qkv align runs/toy --src data/toy/test.src --tgt data/toy/test.tgt --gold data/toy/test.align",
};

/* The null decision's input (align_model.h): the last cross-attention block's
 * contributions, from the capture's pass */
static void last_cross_contributions(Model *m, const AttnMaps *a, float *from) {
    Contributions c;
    contrib_compute(m, a->S, a->T, &c);
    size_t per = (size_t)a->T * (a->S + 1);
    memcpy(from, contrib_last_cross(&c), sizeof(float) * per);
    contrib_free(&c);
}

/* The rule (aligners.h), said under the scores with how many target words it left
 * unaligned in the row marked default (links go out as Pharaoh lines alone; the help
 * says the rule there) */
static void print_null(const AlignCounts *c) {
    printf("%s\nnull: %ld of %ld target words left unaligned (%.1f%%) by the default reading\n", explain_null_rule,
           c->words - c->predicted, c->words,
           c->words ? 100.0 * (double)(c->words - c->predicted) / (double)c->words : 0.0);
}

/* One row of the --gold table: a reading's name and its counts. */
typedef struct {
    const char *name;
    const AlignCounts *c;
} Reading;

/* The files a --gold score read, for its record. */
typedef struct {
    const char *src, *tgt, *gold;
    int pairs;
} GoldFiles;

/* The --gold table (title, then each reading's precision, recall and AER, the default
 * marked), printed and appended as one line to RUN/align.jsonl, where the report reads it;
 * the default's words left unaligned under the null decision. 0, or -1 with the error set
 * when the line could not be appended (the table is printed either way). */
static int gold_table(const Run *r, const char *title, const char *method, int null, const GoldFiles *f,
                      const Reading *rd, int n, int def) {
    printf("%-24s %9s %9s %9s\n", title, "precision", "recall", "AER");
    json_t *rows = json_array();
    for (int k = 0; k < n; k++) {
        printf("%-24s %9.3f %9.3f %9.3f%s\n", rd[k].name, align_precision(rd[k].c), align_recall(rd[k].c),
               align_aer(rd[k].c), k == def ? "  (default)" : "");
        json_t *row = json_object();
        json_put(row, "name", json_utf8(rd[k].name));
        json_put(row, "precision", json_fmt("%.4f", align_precision(rd[k].c)));
        json_put(row, "recall", json_fmt("%.4f", align_recall(rd[k].c)));
        json_put(row, "aer", json_fmt("%.4f", align_aer(rd[k].c)));
        json_array_append_new(rows, row);
    }
    json_t *j = json_object();
    json_put(j, "weights", json_utf8(r->weights));
    json_put(j, "step", json_integer(r->meta.step));
    json_put(j, "src", json_utf8(f->src));
    json_put(j, "tgt", json_utf8(f->tgt));
    json_put(j, "gold", json_utf8(f->gold));
    json_put(j, "pairs", json_integer(f->pairs));
    json_put(j, "gold_links", json_integer(rd[def].c->gold));
    json_put(j, "method", json_string(method));
    json_put(j, "null", json_boolean(null));
    json_put(j, "default", json_utf8(rd[def].name));
    json_put(j, "precision", json_fmt("%.4f", align_precision(rd[def].c)));
    json_put(j, "recall", json_fmt("%.4f", align_recall(rd[def].c)));
    json_put(j, "aer", json_fmt("%.4f", align_aer(rd[def].c)));
    if (null) {
        json_put(j, "target_words", json_integer(rd[def].c->words));
        json_put(j, "unaligned", json_integer(rd[def].c->words - rd[def].c->predicted));
    }
    json_put(j, "readings", rows);
    char *line = xcheck(json_dumps(j, JSON_WRITE_FLAGS)), path[CONFIG_PATH_MAX + 32];
    json_decref(j);
    int rc = append_line(run_path(path, sizeof path, r->dir, RUN_ALIGN), line, "cannot append the scores");
    free(line);
    return rc;
}

/* The readings of an --method other than output: explain/pair.h's methods of that name */
static int method_reads(const char *method, const char *name) {
    if (strcmp(method, "shift") == 0) return strncmp(name, "shift.", 6) == 0;
    if (strcmp(method, "contrib") == 0) return strncmp(name, "contrib.", 8) == 0;
    return strcmp(name, "saliency") == 0 || strcmp(name, "x-gradient") == 0 || strcmp(name, "x-gradient-l2") == 0 ||
           strcmp(name, "integrated-gradients") == 0;
}

/* The default reading of each method: measured on the toy pair's test set (docs/attention.md,
 * "Alignments"): the last layer's contributions, shift-att's last layer, saliency */
static const char *method_default(const char *method, int layers, char *buf, size_t n) {
    if (strcmp(method, "shift") == 0) return snprintf(buf, n, "shift.L%d", layers - 1), buf;
    return strcmp(method, "contrib") == 0 ? "contrib.layer" : "saliency";
}

/* --method shift|contrib|grad: links, or their AER against gold, from explain's readings */
static int explained(Run *r, const char *method, int null, char **src, char **tgt, char **gold, int n,
                     const char *src_path, const char *tgt_path, const char *gold_path) {
    int tok = r->cfg.data.tokenizer, max = r->model.cfg.max_positions - 2, rc = 2, n_ms = 0, n_reads = 0;
    int *sid = xmalloc(sizeof(int) * (size_t)(max + 2)), *tid = xmalloc(sizeof(int) * (size_t)(max + 2));
    ExplainOptions eo = {.foil = -1, .ig_steps = strcmp(method, "grad") == 0 ? EXPLAIN_IG_STEPS : 0, .loo = 0};
    ExplainMethod *ms = NULL, *reads = NULL;
    AlignCounts *counts = NULL;
    char dbuf[EXPLAIN_NAME_MAX];
    const char *def = method_default(method, r->model.cfg.decoder_layers, dbuf, sizeof dbuf);
    for (int i = 0; i < n; i++) {
        int ns = encode_line(src[i], tok, &r->src_vocab, sid, max + 1);
        int nt = encode_line(tgt[i], tok, &r->tgt_vocab, tid, max + 1);
        if (ns > max || nt > max) {
            err_set("%s:%d: more than the %d tokens this model has positions for", ns > max ? src_path : tgt_path,
                    i + 1, max);
            goto done;
        }
        if (ns == 0 || nt == 0) {
            if (gold && gold[i][strspn(gold[i], " \t\r")]) {
                err_set("%s:%d: links for a pair with an empty side", gold_path, i + 1);
                goto done;
            }
            if (!gold) printf("\n");
            continue;
        }
        PairExplanation e;
        explain_pair(&r->model, &r->src_vocab, &r->tgt_vocab, sid, ns, tid, nt, &eo, &e);
        if (ms) explain_methods_free(ms, n_ms), free(reads);
        n_ms = explain_methods(&e, &ms);
        reads = xmalloc(sizeof(ExplainMethod) * (size_t)n_ms), n_reads = 0;
        for (int k = 0; k < n_ms; k++)
            if (method_reads(method, ms[k].name)) reads[n_reads++] = ms[k];
        if (!counts) counts = xcalloc((size_t)n_reads, sizeof(AlignCounts));
        int bad = 0;
        if (gold) bad = explain_align_score(&e, reads, n_reads, tok, null, gold[i], gold_path, i + 1, counts) != 0;
        else {
            int *sw = xmalloc(sizeof(int) * (size_t)e.S), *tw = xmalloc(sizeof(int) * (size_t)e.T), nsw, ntw;
            int *links = xmalloc(sizeof(int) * (size_t)e.T);
            explain_words(&e, tok, sw, tw, &nsw, &ntw);
            for (int k = 0; k < n_reads; k++)
                if (strcmp(reads[k].name, def) == 0)
                    explain_links_null(&e, reads[k].scores, sw, nsw, tw, ntw, null, links);
            for (int j = 0, first = 1; j < ntw; j++)
                if (links[j] >= 0) printf("%s%d-%d", first ? "" : " ", links[j], j), first = 0;
            printf("\n");
            free(sw), free(tw), free(links);
        }
        explain_pair_free(&e);
        if (bad) goto done;
    }
    if (gold && counts) {
        Reading *rd = xmalloc(sizeof(Reading) * (size_t)n_reads);
        int shown = 0;
        for (int k = 0; k < n_reads; k++) {
            rd[k] = (Reading){reads[k].name, &counts[k]};
            if (strcmp(reads[k].name, def) == 0) shown = k;
        }
        GoldFiles f = {src_path, tgt_path, gold_path, n};
        int bad = gold_table(r, method, method, null, &f, rd, n_reads, shown) != 0;
        free(rd);
        if (null) print_null(&counts[shown]);
        if (bad) goto done;
        printf("appended to %s/" RUN_ALIGN "\n", r->dir);
    }
    rc = 0;
done:
    if (ms) explain_methods_free(ms, n_ms);
    free(reads), free(counts), free(sid), free(tid);
    return rc;
}

int cmd_align(int argc, char **argv) {
    const char *src_path = NULL, *tgt_path = NULL, *gold_path = NULL, *layer_s = NULL, *head_s = NULL;
    const char *method = NULL, *null_s = "on";
    int c;
    while ((c = cmd_option_next(&cmd_align_spec, argc, argv)) >= 0) {
        switch (c) {
        case 's': src_path = optarg; break;
        case 't': tgt_path = optarg; break;
        case 'g': gold_path = optarg; break;
        case 'l': layer_s = optarg; break;
        case 'h': head_s = optarg; break;
        case 'm': method = optarg; break;
        case 'n': null_s = optarg; break;
        }
    }
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1 || !src_path || !tgt_path) return cmd_usage_of(&cmd_align_spec);
    /* a head asked for is an attention reading; otherwise the contributions, which align
     * better (docs/attention.md, "On real text") */
    if (!method) method = layer_s || head_s ? "output" : "contrib";
    if (strcmp(method, "output") != 0 && strcmp(method, "shift") != 0 && strcmp(method, "contrib") != 0 &&
        strcmp(method, "grad") != 0)
        return err_set("--method: '%s' is not one of output, shift, contrib, grad", method), cmd_fail(2);
    if (strcmp(null_s, "on") != 0 && strcmp(null_s, "off") != 0)
        return err_set("--null: '%s' is not on or off", null_s), cmd_fail(2);
    int null = strcmp(null_s, "on") == 0;
    if (strcmp(method, "output") != 0 && (layer_s || head_s))
        return err_set("--layer/--head pick a head for --method output"), cmd_fail(2);
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(2);
    int L = r.model.cfg.decoder_layers, H = r.model.cfg.heads;
    /* --method output's default: the last decoder layer's heads averaged; on the toy pair it
     * aligns better than any single head and than all layers together (docs/attention.md,
     * "Alignments") */
    AlignPick chosen = {L - 1, -1};
    if ((layer_s && strcmp(layer_s, "all") != 0 && parse_index(layer_s, "layer", &chosen.layer) != 0) ||
        (head_s && strcmp(head_s, "avg") != 0 && parse_index(head_s, "head", &chosen.head) != 0)) {
        run_close(&r);
        return cmd_fail(2);
    }
    if (layer_s && strcmp(layer_s, "all") == 0) {
        chosen.layer = -1;
        if (chosen.head >= 0) {
            err_set("--layer all averages every head; leave out --head or give a layer");
            run_close(&r);
            return cmd_fail(2);
        }
    }
    if (chosen.layer >= L || chosen.head >= H) {
        err_set("--layer/--head: this model has layers 0..%d and heads 0..%d", L - 1, H - 1);
        run_close(&r);
        return cmd_fail(2);
    }
    int n_src = 0, n_tgt = 0, n_gold = 0, rc = 2;
    char **src = read_file_lines(src_path, &n_src), **tgt = src ? read_file_lines(tgt_path, &n_tgt) : NULL;
    char **gold = tgt && gold_path ? read_file_lines(gold_path, &n_gold) : NULL;
    int n_picks = L * (H + 1) + 1;
    AlignPick *picks = xmalloc(sizeof(AlignPick) * (size_t)n_picks);
    AlignCounts *counts = xcalloc((size_t)n_picks, sizeof(AlignCounts));
    aligner_picks(L, H, picks);
    if (!src || !tgt || (gold_path && !gold)) goto done;
    if (n_src != n_tgt || (gold && n_gold != n_src)) {
        if (gold)
            err_set("%s has %d lines, %s %d, %s %d: they must be line-aligned", src_path, n_src, tgt_path, n_tgt,
                    gold_path, n_gold);
        else err_set("%s has %d lines, %s %d: they must be line-aligned", src_path, n_src, tgt_path, n_tgt);
        goto done;
    }
    int tok = r.cfg.data.tokenizer;
    /* contrib's links are the null measure's own numbers: read them as output reads a head,
     * without the gradients and rollout explain_pair computes for the other readings */
    int fast_contrib = strcmp(method, "contrib") == 0 && !gold;
    if (fast_contrib) chosen = (AlignPick){ALIGN_CONTRIB, -1};
    if (strcmp(method, "output") != 0 && !fast_contrib) {
        openblas_set_num_threads(1); /* small products: OpenBLAS's threads would wait on each other */
        rc = explained(&r, method, null, src, tgt, gold, n_src, src_path, tgt_path, gold_path);
        goto done;
    }
    for (int i = 0; i < n_src; i++) {
        AlignPair pair = {src[i], tgt[i], gold ? gold[i] : NULL, src_path, tgt_path, gold_path, i + 1};
        AlignNullMeasure measure = null || fast_contrib ? last_cross_contributions : NULL;
        if (gold) {
            if (aligner_score_null(&r.model, tok, &r.src_vocab, &r.tgt_vocab, &pair, picks, n_picks, measure, null,
                                   counts) != 0)
                goto done;
            continue;
        }
        int *links,
            n = aligner_links_null(&r.model, tok, &r.src_vocab, &r.tgt_vocab, &pair, chosen, measure, null, &links);
        if (n < 0) goto done;
        for (int j = 0, first = 1; j < n; j++)
            if (links[j] >= 0) printf("%s%d-%d", first ? "" : " ", links[j], j), first = 0;
        printf("\n");
        free(links);
    }
    if (gold) {
        char(*names)[64] = xmalloc(sizeof *names * (size_t)n_picks);
        Reading *rd = xmalloc(sizeof(Reading) * (size_t)n_picks);
        int best = -1, shown = 0;
        for (int p = 0; p < n_picks; p++) {
            pick_name(picks[p], names[p], sizeof names[p]);
            rd[p] = (Reading){names[p], &counts[p]};
            if (picks[p].layer == chosen.layer && picks[p].head == chosen.head) shown = p;
            if (picks[p].head >= 0 && (best < 0 || align_aer(&counts[p]) < align_aer(&counts[best]))) best = p;
        }
        GoldFiles f = {src_path, tgt_path, gold_path, n_src};
        int bad = gold_table(&r, "cross-attention", method, null, &f, rd, n_picks, shown) != 0;
        printf("best head: %s, AER %.3f (%ld sentence pairs, %ld gold links)\n", names[best], align_aer(&counts[best]),
               (long)n_src, counts[best].gold);
        free(names), free(rd);
        if (null) print_null(&counts[shown]); /* the row marked default */
        if (bad) goto done;
        printf("appended to %s/" RUN_ALIGN "\n", r.dir);
    }
    rc = 0;
done:
    if (rc) cmd_fail(rc);
    free_lines(src, n_src), free_lines(tgt, n_tgt), free_lines(gold, n_gold);
    free(picks), free(counts);
    run_close(&r);
    return rc;
}
