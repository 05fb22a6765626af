/* attention: `qkv attention RUN --text "..."`, the anatomy of every attention of one
 * sentence pair (weights, scores, contributions, queries and keys) as JSON, SVG heatmaps,
 * an HTML viewer and terminal views; `--watch`, the same over training from the
 * snapshots train.watch recorded.
 *
 * Files are written into a fresh directory beside --out and moved into place only when
 * all are written (util/staged_dir.h): a full disk leaves the old export whole, and a
 * new export never shows beside the files of an old one. A place that cannot hold the
 * files exits 2, a write that fails partway (full disk) 1, as for every command that
 * writes. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attention/attnmap.h"
#include "attention/sentence_maps.h"
#include "attention/watch.h"
#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/decode_options.h"
#include "cmdlib/options.h"
#include "cmdlib/sentence.h"
#include "config.h"
#include "data/corpus.h"
#include "decode/decode.h"
#include "run/run.h"
#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/staged_dir.h"
#include "util/text.h"

typedef struct {
    const char *text, *target, *out, *gold, *mask_heads;
    int watch;
    int query, kind, layer, head; /* --query: -1 none; layer/head -1: the default */
} Options;

/* ---- the export directory ------------------------------------------------------------- */

/* Files an export writes: what a new export replaces and clears out of an old one. */
static int export_file(const char *name) {
    if (strcmp(name, "maps.json") == 0 || strcmp(name, "index.html") == 0 || strcmp(name, "watch.json") == 0) return 1;
    size_t n = strlen(name);
    if (n < 4 || strcmp(name + n - 4, ".svg") != 0) return 0;
    for (int k = 0; k < ATTN_KINDS; k++) {
        size_t m = strlen(attnmap_kind_name(k));
        if (strncmp(name, attnmap_kind_name(k), m) == 0 && strncmp(name + m, "-layer", 6) == 0) return 1;
    }
    return 0;
}

/* What one sentence's export writes into the directory staged_dir_write hands it. */
typedef struct {
    const AttnMaps *maps;
    int svgs; /* how many SVG heatmaps were written */
} SentenceFiles;

static int write_sentence_files(const char *dir, void *arg) {
    SentenceFiles *f = arg;
    char path[STAGED_DIR_MAX + 256];
    snprintf(path, sizeof path, "%s/maps.json", dir);
    if (attnmap_write_json(f->maps, path) != 0 || attnmap_write_svgs(f->maps, dir, &f->svgs) != 0) return -1;
    snprintf(path, sizeof path, "%s/index.html", dir);
    return attnmap_write_html(f->maps, path);
}

/* ---- one sentence ------------------------------------------------------------------------ */

/* --kind/--layer/--head/--query against the maps' counts; -1 with the error set. */
static int check_query(const AttnMaps *a, Options *o) {
    if (o->layer < 0) o->layer = a->layers[o->kind] - 1;
    if (o->head < 0) o->head = 0;
    if (o->layer >= a->layers[o->kind] || o->head >= a->heads)
        return err_set("--layer/--head: this model's %s has layers 0..%d and heads 0..%d", attnmap_kind_name(o->kind),
                       a->layers[o->kind] - 1, a->heads - 1);
    if (o->query >= attnmap_rows(a, o->kind))
        return err_set("--query: %s has queries 0..%d for this sentence", attnmap_kind_name(o->kind),
                       attnmap_rows(a, o->kind) - 1);
    return 0;
}

static int one_sentence(Run *r, Options *o, int masked) {
    int tok = r->cfg.data.tokenizer, rc = 2;
    /* greedy, as the server's maps with beam 1; the text read here */
    MapsAsk ask = {o->text, o->target, NULL, "--text", "--target", {NULL, NULL}};
    SentenceMaps x;
    AttnMaps *maps = &x.maps;
    SentenceFiles files = {maps, 0};
    if (sentence_maps_prepare(&r->model, &r->src_vocab, &r->tgt_vocab, tok, &ask, &x, NULL) != 0) goto done;
    cmd_warn_unknown(NULL, &x.unknown);
    sentence_maps_run(&r->model, &r->src_vocab, &r->tgt_vocab, tok, &ask, &x);
    int n_tgt = x.nt, *tgt = x.tgt;
    if (o->query >= 0 && check_query(maps, o) != 0) goto done;
    rc = 1;
    if (staged_dir_write(o->out, "--out", write_sentence_files, &files, export_file) != 0) goto done;
    printf("model: %s (%s, step %lld)", r->weights, r->which, (long long)r->meta.step);
    if (masked) printf(", %d head%s masked", masked, masked == 1 ? "" : "s");
    putchar('\n');
    /* what the terminal shows is UTF-8 too, as the files are: a bad byte is U+FFFD */
    char *text = attnmap_utf8(o->text), *words = decode_ids(tgt, n_tgt, tok, &r->tgt_vocab),
         *shown = attnmap_utf8(words);
    cmd_print_text("source: ", text);
    cmd_print_text(o->target ? "target (forced): " : "translation (greedy): ", shown);
    putchar('\n');
    free(text), free(words), free(shown);
    if (o->query >= 0) attnmap_print_query(maps, o->kind, o->layer, o->head, o->query, stdout);
    else attnmap_print_terminal(maps, stdout);
    printf("\nwrote %s/maps.json, %d SVG heatmaps and %s/index.html (open it in a browser)\n", o->out, files.svgs,
           o->out);
    rc = 0;
done:
    if (rc == 1) rc = err_status(); /* where the files could not go: 2; a full disk: 1 */
    sentence_maps_free(&x);
    return rc;
}

/* ---- over training ------------------------------------------------------------------------ */

/* One mode's export never replaces the other's: a --text export (maps.json, its SVGs) and
 * a --watch one (watch.json) share index.html, and the second would take the first's page
 * and heatmaps away without a word. Refused, naming the file, before any work. */
static int other_mode_there(const Options *o) {
    char path[STAGED_DIR_MAX + 32];
    const char *theirs = o->watch ? "maps.json" : "watch.json";
    snprintf(path, sizeof path, "%s/%s", o->out, theirs);
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    return err_set("--out: %s holds qkv attention %s's export (%s): give %s an --out of its own", o->out,
                   o->watch ? "--text" : "--watch", theirs, o->watch ? "--watch" : "--text");
}

static int watched(Run *r, const Options *o) {
    WatchLog w;
    if (watch_load(r->dir, &w) != 0) return 2;
    int rc = 2, n_gold = 0, null = watch_null_recorded(&w);
    char **gold = NULL;
    double *aer = NULL;
    if (o->gold) {
        if (!(gold = read_file_lines(o->gold, &n_gold))) goto done;
        if (n_gold != w.n_sentences) {
            err_set("%s: %d lines, but %d sentences are watched: one Pharaoh line each", o->gold, n_gold,
                    w.n_sentences);
            goto done;
        }
        /* a snapshot's labels are the text subword pieces stand for: where a word starts
         * is gone, and pieces counted as words would give an AER of something else */
        int tok = r->cfg.data.tokenizer;
        if (tokenizer_is_subword(tok)) {
            err_set("--gold: the snapshots of a %s run do not keep where words start; "
                    "score alignments with 'qkv align --gold'",
                    tok == TOKENIZER_BPE ? "bpe" : "unigram");
            goto done;
        }
        /* which sentences have a given target (their target words are fixed): the run's
         * own train.watch, when it lists the sentences the snapshots hold */
        int forced[CONFIG_WATCH_MAX] = {0};
        for (int i = 0; i < w.n_sentences && r->cfg.train.n_watch == w.n_sentences; i++)
            forced[i] = r->cfg.train.watch[i].tgt[0] != 0;
        if (watch_gold_check(&w, tok, gold, o->gold, forced, r->model.cfg.max_positions - 2) != 0) goto done;
        aer = xmalloc(sizeof(double) * (size_t)w.n_snapshots);
        for (int k = 0; k < w.n_snapshots; k++)
            if (watch_aer(&w, k, tok, gold, null, &aer[k]) != 0) goto done;
    }
    rc = 1;
    char *json = watch_view_json(&w, aer, null);
    /* what --watch writes: the view's JSON and the page around it */
    StrBuf page = {0};
    int written = attnview_page(json, &page) == 0;
    const StagedPart parts[] = {{"watch.json", json, strlen(json)}, {"index.html", page.buf, page.len}};
    written = written && staged_dir_write_parts(o->out, "--out", parts, 2, export_file) == 0;
    free(json), sb_free(&page);
    if (!written) goto done;
    const AttnMaps *first = &w.snap[0].sentences[0];
    int L = first->layers[ATTN_CROSS];
    printf("%d watched sentence%s, %d snapshots (steps %lld..%lld)\n", w.n_sentences, w.n_sentences == 1 ? "" : "s",
           w.n_snapshots, (long long)w.snap[0].step, (long long)w.snap[w.n_snapshots - 1].step);
    printf("entropy of cross-attention, decoder layer %d, heads averaged: mean over target words (nats)\n", L - 1);
    printf("%10s", "step");
    for (int i = 0; i < w.n_sentences; i++) printf("  sentence %d", i + 1);
    printf("%s\n", aer ? "    AER" : "");
    for (int k = 0; k < w.n_snapshots; k++) {
        printf("%10lld", (long long)w.snap[k].step);
        for (int i = 0; i < w.n_sentences; i++)
            printf("  %10.4f", attnmap_entropy(&w.snap[k].sentences[i], ATTN_CROSS, L - 1, -1));
        if (aer) printf("  %6.3f", aer[k]);
        printf("\n");
    }
    for (int i = 0; i < w.n_sentences; i++) {
        const AttnMaps *a = &w.snap[w.n_snapshots - 1].sentences[i];
        printf("sentence %d: %d source tokens; uniform attention over them has entropy %.4f\n", i + 1, a->S,
               log((double)a->S));
    }
    if (aer)
        printf("AER: %s\n", null ? "the last cross-attention block's contributions, links read as qkv align reads them "
                                   "(the null decision on)"
                                 : "the last decoder layer's heads averaged, every word linked to its strongest source "
                                   "word (snapshots recorded without the contributions: qkv align --method output "
                                   "--null off)");
    int shares = 1;
    for (int k = 0; k < w.n_snapshots; k++)
        for (int i = 0; i < w.n_sentences; i++) shares &= w.snap[k].sentences[i].share != NULL;
    if (shares) {
        printf("\nsource share: how much of each target word came from the source (contributions rolled out\n"
               "through every layer), after the last decoder layer, mean over target words\n%10s",
               "step");
        for (int i = 0; i < w.n_sentences; i++) printf("  sentence %d", i + 1);
        printf("\n");
        for (int k = 0; k < w.n_snapshots; k++) {
            printf("%10lld", (long long)w.snap[k].step);
            for (int i = 0; i < w.n_sentences; i++) {
                const AttnMaps *a = &w.snap[k].sentences[i];
                double sum = 0;
                for (int t = 0; t < a->T; t++) sum += a->share[(size_t)(L - 1) * a->T + t];
                printf("  %10.4f", sum / a->T);
            }
            printf("\n");
        }
    }
    printf("\nwrote %s/watch.json and %s/index.html (open it in a browser: the step slider replays training)\n", o->out,
           o->out);
    rc = 0;
done:
    if (rc == 1) rc = err_status();
    if (gold) free_lines(gold, n_gold);
    free(aer);
    watch_free(&w);
    return rc;
}

static const CmdOption options[] = {
    {'t', "text", "SOURCE", "the sentence whose maps to draw (or --watch)", NULL},
    {'g', "target", "TRANSLATION", "force this translation instead of the model's greedy one", NULL},
    {'o', "out", "DIR", "where maps.json, the SVGs and index.html go", "attn"},
    {'q', "query", "N", "the anatomy of one query (target row N): scores, weights, values, contributions", NULL},
    {'k', "kind", "KIND", "with --query: encoder_self, decoder_self or cross", "cross"},
    {'l', "layer", "L", "with --query: the layer", "the last"},
    {'h', "head", "H", "with --query: the head", "0"},
    {'w', "watch", NULL, "the run's watched sentences over training (train.watch), with a step slider", NULL},
    {'a', "gold", "FILE", "with --watch: gold alignments, for AER at each step", NULL},
    {'m', "mask-heads", "SPEC", MASK_HEADS_HELP, NULL},
    {0},
};
const CmdSpec cmd_attention_spec = {
    .name = "attention",
    .operands =
        "RUN (--text \"SOURCE\" [--target \"TRANSLATION\"] [--query N ...] | --watch [--gold FILE]) [--out DIR]",
    .summary = "the attention maps of one sentence, or of the watched ones over training",
    .about = "Every kind (encoder self, decoder masked self, cross), layer and head: weights as a\n"
             "terminal table, SVG pictures and one HTML viewer (open DIR/index.html). A head\n"
             "--mask-heads masks keeps its weights; what it adds is gone from the layers above.",
    .options = options,
    .example = "qkv attention runs/toy --text \"the old farmer sees a red bird\" --out attn/",
};

int cmd_attention(int argc, char **argv) {
    Options o = {.out = "attn", .query = -1, .kind = ATTN_CROSS, .layer = -1, .head = -1};
    int c, bad = 0, picked = 0; /* --kind, --layer or --head given */
    while (!bad && (c = cmd_option_next(&cmd_attention_spec, argc, argv)) >= 0) {
        switch (c) {
        case 't': o.text = optarg; break;
        case 'g': o.target = optarg; break;
        case 'o': o.out = optarg; break;
        case 'w': o.watch = 1; break;
        case 'a': o.gold = optarg; break;
        case 'm': o.mask_heads = optarg; break;
        case 'q': bad = cmd_int("--query", "a query (row) number", optarg, 0, 100000, &o.query) != 0; break;
        case 'l': bad = cmd_int("--layer", "a layer number", optarg, 0, 1000, &o.layer) != 0, picked = 1; break;
        case 'h': bad = cmd_int("--head", "a head number", optarg, 0, 1000, &o.head) != 0, picked = 1; break;
        case 'k':
            o.kind = -1, picked = 1;
            for (int k = 0; k < ATTN_KINDS; k++)
                if (strcmp(optarg, attnmap_kind_name(k)) == 0) o.kind = k;
            if (o.kind < 0) bad = err_set("--kind: '%s' is not one of encoder_self, decoder_self, cross", optarg) != 0;
            break;
        }
    }
    if (bad) return cmd_fail(2);
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1 || (!o.text) == !o.watch) return cmd_usage_of(&cmd_attention_spec);
    if (o.out[0] == '\0') return err_set("--out: an empty directory name"), cmd_fail(2);
    if (o.gold && !o.watch) return err_set("--gold goes with --watch (for a corpus: qkv align --gold)"), cmd_fail(2);
    /* an option that would change nothing is refused, not ignored */
    if (o.watch && (o.target || o.query >= 0 || picked || o.mask_heads))
        return err_set("--%s goes with --text, not --watch", o.target       ? "target"
                                                             : o.query >= 0 ? "query"
                                                             : picked       ? "kind/--layer/--head"
                                                                            : "mask-heads"),
               cmd_fail(2);
    if (picked && o.query < 0)
        return err_set("--kind/--layer/--head pick the map of --query N: give a query"), cmd_fail(2);
    if (other_mode_there(&o) != 0) return cmd_fail(2);
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(2);
    /* fixed weights: the decoding step's laid out once, for every worker and batch */
    model_keep_step_weights(&r.model);
    int masked = decode_options_mask_heads(&r.model, o.mask_heads, NULL);
    if (masked < 0) return run_close(&r), cmd_fail(err_status());
    int rc = o.watch ? watched(&r, &o) : one_sentence(&r, &o, masked);
    if (rc) cmd_fail(rc);
    run_close(&r);
    return rc;
}
