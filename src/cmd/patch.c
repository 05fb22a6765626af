/* patch: `qkv patch RUN --clean "..." --corrupt "..."`, activation patching between two
 * sentences (explain/patching.h): each head's output and each encoder position copied from
 * the corrupted run into the clean one, the change of the metric measured, attribution
 * patching's estimate beside it; a table, patch.json and patch.svg. */
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
#include "data/batch.h"
#include "data/corpus.h"
#include "explain/patch_pair.h"
#include "explain/patch_view.h"
#include "explain/patching.h"
#include "run/run.h"
#include "util/atomic_file.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/staged_dir.h"
#include "util/text.h"

typedef struct {
    const char *clean, *corrupt, *target, *compare, *out, *mask_heads;
    int at, top;
} Options;

static int export_file(const char *name) { return strcmp(name, "patch.json") == 0 || strcmp(name, "patch.svg") == 0; }

typedef struct {
    char *json, *svg;
} Files;

static int by_size(const void *a, const void *b) {
    double x = fabs(((const PatchComponent *)a)->effect), y = fabs(((const PatchComponent *)b)->effect);
    return (x < y) - (x > y);
}

static int run_patch(Run *r, const Options *o) {
    int tok = r->cfg.data.tokenizer, rc = 2;
    PatchAsk ask = patch_ask(o->clean, o->corrupt, o->target);
    PatchPair x = {0};
    Files files = {0};
    char a[64], b[64];
    char *c_text = NULL, *x_text = NULL, *words = NULL, *t_text = NULL;
    if (o->compare) {
        const char *comma = strchr(o->compare, ',');
        if (!comma || comma == o->compare || !comma[1] || (size_t)(comma - o->compare) >= sizeof a ||
            strlen(comma + 1) >= sizeof b) {
            err_set("--compare: 'A,B', two target words (log p(A) - log p(B) at --at)");
            goto done;
        }
        memcpy(a, o->compare, (size_t)(comma - o->compare)), a[comma - o->compare] = '\0';
        strcpy(b, comma + 1);
        ask.compare[0] = a, ask.compare[1] = b, ask.at = o->at;
    }
    if (patch_prepare(&r->model, &r->src_vocab, &r->tgt_vocab, tok, &ask, &x, NULL) != 0) goto done;
    cmd_warn_unknown(NULL, &x.unknown[0]);
    cmd_warn_unknown("--corrupt", &x.unknown[1]);
    patch_decode(&r->model, &ask, &x);
    if (patch_check_at(&ask, &x) != 0 || patch_pair_run(&r->model, &r->src_vocab, &x) != 0) goto done;
    const PatchTable *t = &x.table;
    int S = x.ns + 1;
    c_text = attnmap_utf8(o->clean), x_text = attnmap_utf8(o->corrupt),
    words = decode_ids(x.tgt, x.nt, tok, &r->tgt_vocab);
    t_text = attnmap_utf8(words);
    char title[1024];
    snprintf(title, sizeof title, "patching \"%.300s\" with \"%.300s\" (metric: %s)", c_text, x_text, x.metric_name);
    files.json = x.json, x.json = NULL;
    files.svg = patch_svg(t, title, x.labels, S, r->model.cfg.heads);
    rc = 1;
    const StagedPart parts[] = {{"patch.json", files.json, strlen(files.json)},
                                {"patch.svg", files.svg, strlen(files.svg)}};
    if (staged_dir_write_parts(o->out, "--out", parts, 2, export_file) != 0) goto done;
    cmd_print_text("clean:   ", c_text);
    cmd_print_text("corrupt: ", x_text);
    cmd_print_text(o->target ? "target (forced): " : "target (greedy): ", t_text);
    cmd_print_text("metric:  ", x.metric_name);
    printf("         clean %.4f, corrupt %.4f, the encoder's output patched everywhere %.4f\n\n", t->clean, t->corrupt,
           t->everything);
    PatchComponent *sorted = xmalloc(sizeof(PatchComponent) * (size_t)t->n);
    memcpy(sorted, t->c, sizeof(PatchComponent) * (size_t)t->n);
    qsort(sorted, (size_t)t->n, sizeof *sorted, by_size);
    printf("%-16s %10s %10s   (effect: metric patched - clean; estimate: attribution patching)\n", "component",
           "effect", "estimate");
    for (int i = 0; i < t->n && i < o->top; i++) {
        const PatchComponent *c = &sorted[i];
        printf("%-16s %+10.4f %+10.4f", c->name, c->effect, c->atp);
        if (c->kind < 0) printf("   (%s)", x.labels[c->pos]);
        putchar('\n');
    }
    /* where the estimate misses most */
    int worst = 0;
    for (int i = 1; i < t->n; i++)
        if (fabs(t->c[i].effect - t->c[i].atp) > fabs(t->c[worst].effect - t->c[worst].atp)) worst = i;
    char rho[80]; /* undefined when either ranks none apart (clean equal to corrupt): patch.json's null */
    if (isnan(t->rho)) snprintf(rho, sizeof rho, PATCH_RHO_UNDEFINED);
    else snprintf(rho, sizeof rho, "%.3f", t->rho);
    printf("\nattribution patching against patching: Spearman rho %s over %d components; the largest miss %s "
           "(effect %+.4f, estimate %+.4f)\n",
           rho, t->n, t->c[worst].name, t->c[worst].effect, t->c[worst].atp);
    printf("wrote %s/patch.json and %s/patch.svg\n", o->out, o->out);
    free(sorted);
    rc = 0;
done:
    if (rc == 1) rc = err_status();
    patch_pair_free(&x);
    free(files.json), free(files.svg), free(c_text), free(x_text), free(words), free(t_text);
    return rc;
}

static const CmdOption options[] = {
    {'c', "clean", "SOURCE", "the sentence patched into (required)", NULL},
    {'x', "corrupt", "SOURCE", "the sentence patched from: as many tokens (required)", NULL},
    {'g', "target", "TRANSLATION", "forced on both runs (default: the clean sentence's greedy translation)", NULL},
    {'k', "compare", "A,B", "metric log p(A) - log p(B) at --at, instead of log p(target)", NULL},
    {'a', "at", "N", "with --compare: the target position (0: the first word)", "0"},
    {'n', "top", "N", "components listed, largest effect first", "15"},
    {'o', "out", "DIR", "where patch.json and patch.svg go", "patch"},
    {'m', "mask-heads", "SPEC", MASK_HEADS_HELP, NULL},
    {0},
};
const CmdSpec cmd_patch_spec = {
    .name = "patch",
    .operands =
        "RUN --clean \"SOURCE\" --corrupt \"SOURCE\" [--target \"TRANSLATION\"] [--compare A,B --at N] [--out DIR]",
    .summary = "which heads and positions carry the difference between two sentences (activation patching)",
    .about = "Runs both sentences over the same target, then the clean one again with one component\n"
             "copied in from the corrupted run: each head's output, and the encoder's stream at each\n"
             "layer and source position; prints how far each moves the metric, beside attribution\n"
             "patching's one-pass estimate, and writes DIR/patch.json and DIR/patch.svg (heatmaps).",
    .options = options,
    .example =
        "qkv patch runs/toy --clean \"the old farmer sees a red bird\" --corrupt \"the old farmers see a red bird\"",
};

int cmd_patch(int argc, char **argv) {
    Options o = {.out = "patch", .top = 15};
    int c, bad = 0, at_given = 0;
    while (!bad && (c = cmd_option_next(&cmd_patch_spec, argc, argv)) >= 0) {
        switch (c) {
        case 'c': o.clean = optarg; break;
        case 'x': o.corrupt = optarg; break;
        case 'g': o.target = optarg; break;
        case 'k': o.compare = optarg; break;
        case 'o': o.out = optarg; break;
        case 'm': o.mask_heads = optarg; break;
        case 'a': bad = cmd_int("--at", "a target position", optarg, 0, 100000, &o.at) != 0, at_given = 1; break;
        case 'n': bad = cmd_int("--top", "a count", optarg, 0, 100000, &o.top) != 0; break;
        }
    }
    if (bad) return cmd_fail(2);
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1 || !o.clean || !o.corrupt) return cmd_usage_of(&cmd_patch_spec);
    if (o.out[0] == '\0') return err_set("--out: an empty directory name"), cmd_fail(2);
    /* alone, --at would be taken and change nothing (the API refuses it too) */
    if (at_given && !o.compare) return err_set("--at is the position of --compare: give both"), cmd_fail(2);
    Run r;
    if (run_open(&r, argv[optind]) != 0) return cmd_fail(err_status());
    int masked = decode_options_mask_heads(&r.model, o.mask_heads, NULL);
    if (masked < 0) return run_close(&r), cmd_fail(err_status());
    openblas_set_num_threads(1); /* one sentence's products: threads would only wait */
    int rc = run_patch(&r, &o);
    if (rc) cmd_fail(rc);
    run_close(&r);
    return rc;
}
