/* heads: `qkv heads RUN --src F --ref F [--gold F] [--out DIR]`, what each attention head
 * is worth and what it does on a held-out set: Michel et al. 2019's gradient importance
 * and the exact dNLL of masking it alone, their Spearman correlation, Voita et al.'s roles
 * (confidence, positional and rare-token heads) with AER per cross head, and the pruning
 * curve (BLEU as heads are removed by importance and at random). Prints the table sorted
 * by importance and writes DIR/heads.json, DIR/heads.svg, DIR/index.html and the masks
 * of the curve's points (DIR/masks/ORDER-SCOPE-PCT.txt, --mask-heads @FILE's format), all
 * moved into place together (util/staged_dir.h). The work is infer/headscore.c,
 * headcurve.c and headreport.c's; this file reads the files, prints and writes. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmdutil.h"
#include "cmd/commands.h"
#include "cmd/decode_options.h"
#include "cmd/options.h"
#include "data/corpus.h"
#include "infer/aligner.h"
#include "infer/attnmap.h"
#include "infer/fanout.h"
#include "infer/headcurve.h"
#include "infer/headreport.h"
#include "infer/headscore.h"
#include "run/files.h"
#include "run/run.h"
#include "util/atomic_file.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/staged_dir.h"
#include "util/text.h"

typedef struct {
    const char *src, *ref, *gold, *out, *freq;
    long seed;
    int curve, max_sentences;
} Options;

/* ---- the set -------------------------------------------------------------------------------- */

/* The pairs the model can read whole (both sides 1..max tokens), up to --sentences; the
 * texts and gold lines borrowed from the files' lines, each gold pair naming its line. */
typedef struct {
    HeadSet set;
    Seq *src, *ref;
    char **src_text, **ref_text;
    AlignPair *pairs; /* with --gold */
    int skipped;
} Set;

static int encode_side(const char *line, int tokenizer, const Vocab *v, int max, Seq *s) {
    s->ids = xmalloc(sizeof(int) * (size_t)(max + 1));
    s->len = encode_line(line, tokenizer, v, s->ids, max + 1);
    return s->len >= 1 && s->len <= max;
}

static void build_set(const Run *r, const Options *o, char **src, char **ref, char **gold, int n, Set *st) {
    int tok = r->cfg.data.tokenizer, max = r->model.cfg.max_positions - 2;
    size_t slots = (size_t)(n ? n : 1);
    st->src = xmalloc(sizeof(Seq) * slots), st->ref = xmalloc(sizeof(Seq) * slots);
    st->src_text = xmalloc(sizeof(char *) * slots), st->ref_text = xmalloc(sizeof(char *) * slots);
    st->pairs = gold ? xmalloc(sizeof(AlignPair) * slots) : NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (o->max_sentences > 0 && k == o->max_sentences) break;
        int ok = encode_side(src[i], tok, &r->src_vocab, max, &st->src[k]);
        ok = encode_side(ref[i], tok, &r->tgt_vocab, max, &st->ref[k]) && ok;
        if (!ok) {
            free(st->src[k].ids), free(st->ref[k].ids);
            st->skipped++;
            continue;
        }
        st->src_text[k] = src[i], st->ref_text[k] = ref[i];
        if (gold) st->pairs[k] = (AlignPair){src[i], ref[i], gold[i], o->src, o->ref, o->gold, i + 1};
        k++;
    }
    st->set = (HeadSet){k, st->src, st->ref};
}

static void free_set(Set *st) {
    for (int i = 0; i < st->set.n; i++) free(st->src[i].ids), free(st->ref[i].ids);
    free(st->src), free(st->ref), free(st->src_text), free(st->ref_text), free(st->pairs);
}

/* ---- the files ---------------------------------------------------------------------------------- */

typedef struct {
    const char *out;
    char *json, *view, *svg; /* svg NULL without a curve */
    const HeadCurves *curves;
    const Model *m;
    int masks; /* files written */
} Files;

/* Files an export writes: what a new export replaces and clears out of an old one. */
static int export_file(const char *name) {
    return strcmp(name, "heads.json") == 0 || strcmp(name, "heads.svg") == 0 || strcmp(name, "index.html") == 0;
}

/* A mask file's name as the curve names them: importance-... or random-..., .txt */
static int mask_file(const char *name) {
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".txt") == 0 &&
           (strncmp(name, "importance-", 11) == 0 || strncmp(name, "random-", 7) == 0);
}

/* Removes dir/masks/ (check_only: only looks). A file there that is not a mask's (or a
 * masks that is no directory) is an error, and nothing is removed; no masks/ is none. */
static int clear_masks(const char *dir, int check_only) {
    char path[STAGED_DIR_MAX + 256];
    snprintf(path, sizeof path, "%s/masks", dir);
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? 0 : err_set("%s: %s", path, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) && rc == 0) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char file[STAGED_DIR_MAX + 512];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        if (!mask_file(e->d_name))
            rc = err_set("%s: not a mask file of qkv heads: left alone, so --out is not written", file);
        else if (!check_only) unlink(file);
    }
    closedir(d);
    if (rc == 0 && !check_only && rmdir(path) != 0 && errno != ENOENT)
        rc = err_set("%s: cannot remove the old masks: %s", path, strerror(errno));
    return rc;
}

static int write_files(const char *dir, void *arg) {
    Files *f = arg;
    char path[STAGED_DIR_MAX + 256];
    snprintf(path, sizeof path, "%s/heads.json", dir);
    if (write_file_atomic(path, f->json, strlen(f->json)) != 0) return -1;
    snprintf(path, sizeof path, "%s/index.html", dir);
    if (attnview_write(f->view, path) != 0) return -1;
    if (f->svg) {
        snprintf(path, sizeof path, "%s/heads.svg", dir);
        if (write_file_atomic(path, f->svg, strlen(f->svg)) != 0) return -1;
    }
    if (clear_masks(f->out, 1) != 0) return -1;
    int nh = f->curves ? f->curves->n_heads : 0, rc = 0;
    if (f->curves) {
        snprintf(path, sizeof path, "%s/masks", dir);
        if (mkdir(path, 0777) != 0) {
            int e = errno;
            return err_set("%s: cannot create: %s", path, strerror(e)), err_io(e);
        }
        for (int i = 0; i < f->curves->n_curves && rc == 0; i++)
            for (int k = 0; k < HEADS_CURVE_POINTS && rc == 0; k++) {
                const HeadCurve *c = &f->curves->curves[i];
                StrBuf sb = {0};
                sb_append(&sb, "", 0);
                heads_mask_text(f->m, c->removed + (size_t)k * nh, &sb);
                snprintf(path, sizeof path, "%s/%s", dir, c->points[k].mask);
                rc = write_file_atomic(path, sb.buf, sb.len);
                sb_free(&sb);
                f->masks += rc == 0;
            }
        if (rc != 0) { /* the staging directory is removed file by file: its masks/ first */
            clear_masks(dir, 0);
            return -1;
        }
    }
    /* the old masks go as the new set moves in (a directory cannot be renamed over one
     * that holds files), as staged_dir removes the old files the new set lacks */
    if (clear_masks(f->out, 0) == 0) return 0;
    clear_masks(dir, 0);
    return -1;
}

/* ---- printing ------------------------------------------------------------------------------------ */

/* One column of the table, three decimals; "-" where the measure does not apply. */
static void put(double v, int width) {
    if (isnan(v)) printf(" %*s", width, "-");
    else printf(" %*.3f", width, v);
}

static void print_table(const HeadStats *stats, int n) {
    int *order = xmalloc(sizeof(int) * (size_t)n);
    heads_by_importance(stats, n, order);
    printf("%4s %-12s %5s %4s %10s %10s %9s %6s %7s %6s %6s %6s %6s %6s  %s\n", "rank", "kind", "layer", "head",
           "importance", "raw", "dNLL", "conf", "entropy", "prev", "cur", "next", "rare", "AER", "role");
    for (int r = 0; r < n; r++) {
        const HeadStats *h = &stats[order[r]];
        printf("%4d %-12s %5d %4d %10.4f %10.4g %+9.4f", r + 1, attnmap_kind_name(h->kind), h->layer, h->head,
               h->importance, h->importance_raw, h->delta_nll);
        put(h->confidence, 6), put(h->entropy, 7), put(h->previous, 6), put(h->current, 6);
        put(h->next, 6), put(h->rare, 6), put(h->aer, 6);
        printf("  %s\n", h->role[0] ? h->role : "-");
    }
    free(order);
}

static void print_curves(const HeadCurves *c, const TranslateOptions *o) {
    printf("\npruning curve: BLEU (%s) with a share of the scope's heads removed\n%-24s",
           o->decode.beam == 1 ? "greedy" : "beam search", "");
    for (int k = 0; c->n_curves > 0 && k < HEADS_CURVE_POINTS; k++) printf(" %5d%%", c->curves[0].points[k].pct);
    printf("\n");
    for (int i = 0; i < c->n_curves; i++) {
        const HeadCurve *cv = &c->curves[i];
        printf("%-13s %-10s", cv->order == HEADS_ORDER_IMPORTANCE ? heads_scope_name(cv->scope) : "",
               heads_order_name(cv->order));
        for (int k = 0; k < HEADS_CURVE_POINTS; k++) printf(" %6.2f", cv->points[k].bleu);
        printf("\n");
    }
}

static void spearman_print(double rho) {
    if (isnan(rho)) printf("undefined (a side is constant)");
    else printf("%.4f", rho);
}

static void progress(int done, int total, void *arg) {
    (void)arg;
    fprintf(stderr, "\rcurve: %d of %d masks decoded", done, total);
    if (done == total) fprintf(stderr, "\n");
}

/* ---- the command ------------------------------------------------------------------------------------ */

static const CmdOption options[] = {
    {'s', "src", "FILE", "the source side of a held-out set (required)", NULL},
    {'R', "ref", "FILE", "its reference translations, line-aligned (required)", NULL},
    {'G', "gold", "FILE", "gold Pharaoh alignments of src and ref: AER for each cross-attention head", NULL},
    {'o', "out", "DIR", "where heads.json, heads.svg, index.html and masks/ go", "RUN/heads"},
    {'S', "seed", "S", "the seed of the random pruning order", "1"},
    {'C', "no-curve", NULL, "skip the pruning curve (its BLEU decodes are the slow part)", NULL},
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
             "(Voita et al. 2019: confidence, positional and rare-token heads; AER with --gold), and\n"
             "BLEU as heads are removed by importance and at random. Writes DIR/heads.json, heads.svg,\n"
             "index.html (a viewer) and masks/ORDER-SCOPE-PCT.txt (for --mask-heads @FILE). The\n"
             "decoding options are translate's; --nbest is 1 here, and --mask-heads is refused (the\n"
             "curve masks heads itself).",
    .options = options,
    .shared = decode_options,
    .example = "qkv heads runs/toy --src data/toy/test.src --ref data/toy/test.tgt --gold data/toy/test.align",
};

static int analyse(Run *r, const Options *o, const TranslateOptions *to, char **src, char **ref, char **gold, int n) {
    int rc = 2, nh = model_head_count(&r->model), n_freq = 0, tok = r->cfg.data.tokenizer;
    Set st = {0};
    HeadCurves curves = {0};
    long long *freq = NULL;
    char **freq_lines = NULL;
    HeadStats *stats = xcalloc((size_t)nh, sizeof(HeadStats));
    Files files = {0};
    build_set(r, o, src, ref, gold, n, &st);
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
    }
    printf("heads of %s (%s, step %lld) on %s: %d pairs%s; %d heads\n", r->weights, r->which, (long long)r->meta.step,
           o->src, st.set.n, st.skipped ? " (some skipped, below)" : "", nh);
    if (st.skipped)
        printf("skipped %d pairs: an empty side, or more tokens than the model's %d positions\n", st.skipped,
               r->model.cfg.max_positions - 2);

    double t0 = now_seconds(), base_nll = 0.0;
    heads_score(&r->model, &st.set, freq, fanout_threads(), stats, &base_nll);
    if (gold && heads_aer(&r->model, tok, &r->src_vocab, &r->tgt_vocab, st.pairs, st.set.n, stats) != 0) goto done;
    double *imp = xmalloc(sizeof(double) * (size_t)nh), *raw = xmalloc(sizeof(double) * (size_t)nh),
           *dnll = xmalloc(sizeof(double) * (size_t)nh);
    for (int i = 0; i < nh; i++)
        imp[i] = stats[i].importance, raw[i] = stats[i].importance_raw, dnll[i] = stats[i].delta_nll;
    double rho = heads_spearman(imp, dnll, nh), rho_raw = heads_spearman(raw, dnll, nh);
    free(imp), free(raw), free(dnll);
    double score_s = now_seconds() - t0, curve_s = 0.0;

    if (o->curve) {
        t0 = now_seconds();
        heads_curves(&r->model, tok, &r->src_vocab, &r->tgt_vocab, &st.set, st.src_text, st.ref_text, to, stats,
                     (uint64_t)o->seed, fanout_threads(), &curves, isatty(2) ? progress : NULL, NULL);
        curve_s = now_seconds() - t0;
    }
    long long tokens = 0;
    for (int i = 0; i < st.set.n; i++) tokens += st.ref[i].len + 1;
    HeadReport rep = {.weights = r->weights,
                      .step = (long long)r->meta.step,
                      .src_path = o->src,
                      .ref_path = o->ref,
                      .gold_path = o->gold,
                      .freq_path = freq_path,
                      .sentences = st.set.n,
                      .skipped = st.skipped,
                      .ref_tokens = tokens,
                      .stats = stats,
                      .n_heads = nh,
                      .spearman = rho,
                      .spearman_raw = rho_raw,
                      .base_nll = base_nll,
                      .curves = o->curve ? &curves : NULL,
                      .decoding = &to->decode,
                      .score_seconds = score_s,
                      .curve_seconds = curve_s};

    print_table(stats, nh);
    printf("\nreference NLL %.4f per token with no head masked (%lld tokens); entropy in nats\n", base_nll, tokens);
    printf("importance: mean |dL/dgate| per sentence, normalised by the L2 norm of its layer's (Michel et al. 2019)\n");
    printf("roles: previous/current/next at a positional share >= %.2f, rare at a rare-token share >= %.2f%s\n",
           HEADS_POSITIONAL_SHARE, HEADS_RARE_SHARE, gold ? "" : " (aligns needs --gold)");
    if (gold) printf("       aligns: a cross head with AER <= %.2f\n", HEADS_ALIGN_AER);
    printf("Spearman rank correlation with dNLL over the %d heads: importance ", nh);
    spearman_print(rho);
    printf(", raw score ");
    spearman_print(rho_raw);
    printf("\n");
    if (o->curve) print_curves(&curves, to);
    printf("\ntiming: scores %.2f s (importance, dNLL, roles%s); curve %s", score_s, gold ? ", AER" : "",
           o->curve ? "" : "skipped (--no-curve)\n");
    if (o->curve) printf("%.2f s (%d distinct masks decoded and scored)\n", curve_s, curves.evaluations);

    rc = 1;
    json_t *root = heads_report_json(&rep);
    files = (Files){o->out,
                    xcheck(json_dumps(root, JSON_WRITE_FLAGS | JSON_INDENT(1))),
                    NULL,
                    NULL,
                    o->curve ? &curves : NULL,
                    &r->model,
                    0};
    json_decref(root);
    files.view = heads_view_json(&rep, &r->model, tok, &r->src_vocab, &r->tgt_vocab, &st.set, st.src_text, st.ref_text);
    if (o->curve) files.svg = heads_svg(&curves);
    if (staged_dir_write(o->out, "--out", write_files, &files, export_file) != 0) goto done;
    if (o->curve)
        printf("wrote %s/heads.json, %s/heads.svg, %s/index.html (open it in a browser) and %d masks in %s/masks/ "
               "(for --mask-heads @FILE)\n",
               o->out, o->out, o->out, files.masks, o->out);
    else printf("wrote %s/heads.json and %s/index.html (open it in a browser)\n", o->out, o->out);
    rc = 0;
done:
    if (rc == 1) rc = err_status();
    free(files.json), free(files.view), free(files.svg);
    heads_curves_free(&curves);
    if (freq_lines) free_lines(freq_lines, n_freq);
    free(freq), free(stats);
    free_set(&st);
    return rc;
}

int cmd_heads(int argc, char **argv) {
    Options o = {.seed = 1, .curve = 1};
    TranslateOptions to = decode_options_defaults();
    const char *mask_heads = NULL;
    int c, bad = 0;
    while (!bad && (c = cmd_option_next(&cmd_heads_spec, argc, argv)) >= 0) {
        switch (c) {
        case 's': o.src = optarg; break;
        case 'R': o.ref = optarg; break;
        case 'G': o.gold = optarg; break;
        case 'o': o.out = optarg; break;
        case 'f': o.freq = optarg; break;
        case 'C': o.curve = 0; break;
        case 'S': bad = cmd_long("--seed", "a seed from 0 to 2^62", optarg, 0, 1L << 62, &o.seed) != 0; break;
        case 'N': bad = cmd_int("--sentences", "a count from 1", optarg, 1, 1 << 30, &o.max_sentences) != 0; break;
        default: bad = decode_options_apply(c, optarg, &to, &mask_heads) != 0; break;
        }
    }
    if (bad) return cmd_fail(2);
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    /* every measure here is of the whole model, each mask of the curve its own */
    if (mask_heads)
        return err_set("--mask-heads: qkv heads masks heads itself (the curve's masks go to DIR/masks/)"), cmd_fail(2);
    if (optind != argc - 1) return cmd_usage_of(&cmd_heads_spec);
    if (!o.src || !o.ref) return err_set("--%s is required (the held-out set)", o.src ? "ref" : "src"), cmd_fail(2);
    if (o.out && o.out[0] == '\0') return err_set("--out: an empty directory name"), cmd_fail(2);
    to.decode.nbest = 1;
    if (decode_check(&to.decode) != 0) return cmd_fail(2);
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
        /* beside the run by default, where qkv serve and qkv report look for it */
        char out[sizeof r.dir + 8];
        if (!o.out) o.out = run_path(out, sizeof out, r.dir, RUN_HEADS_DIR);
        rc = analyse(&r, &o, &to, src, ref, gold, n);
        if (rc) cmd_fail(rc);
        run_close(&r);
    }
    free_lines(src, n), free_lines(ref, n);
    if (gold) free_lines(gold, n_gold);
    return rc;
}
