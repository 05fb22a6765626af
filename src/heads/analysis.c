/* analysis: qkv heads' work between reading the set and printing (heads/analysis.h). */
#define _POSIX_C_SOURCE 200809L
#include "heads/analysis.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attention/attnmap.h"
#include "data/tokenize.h"
#include "decode/fanout.h"
#include "util/atomic_file.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/staged_dir.h"
#include "util/text.h"

/* ---- the set -------------------------------------------------------------------------------- */

static int encode_side(const char *line, int tokenizer, const Vocab *v, int max, Seq *s) {
    s->ids = xmalloc(sizeof(int) * (size_t)(max + 1));
    s->len = encode_line(line, tokenizer, v, s->ids, max + 1);
    return s->len >= 1 && s->len <= max;
}

void heads_input_build(const Run *r, char **src, char **ref, char **gold, int n, int max_sentences,
                       const char *src_path, const char *ref_path, const char *gold_path, HeadsInput *st) {
    int tok = r->cfg.data.tokenizer, max = r->model.cfg.max_positions - 2;
    size_t slots = (size_t)(n ? n : 1);
    st->src = xmalloc(sizeof(Seq) * slots), st->ref = xmalloc(sizeof(Seq) * slots);
    st->src_text = xmalloc(sizeof(char *) * slots), st->ref_text = xmalloc(sizeof(char *) * slots);
    st->pairs = gold ? xmalloc(sizeof(AlignPair) * slots) : NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (max_sentences > 0 && k == max_sentences) break;
        int ok = encode_side(src[i], tok, &r->src_vocab, max, &st->src[k]);
        ok = encode_side(ref[i], tok, &r->tgt_vocab, max, &st->ref[k]) && ok;
        if (!ok) {
            free(st->src[k].ids), free(st->ref[k].ids);
            st->skipped++;
            continue;
        }
        st->src_text[k] = src[i], st->ref_text[k] = ref[i];
        if (gold) st->pairs[k] = (AlignPair){src[i], ref[i], gold[i], src_path, ref_path, gold_path, i + 1};
        k++;
    }
    st->set = (HeadSet){k, st->src, st->ref};
}

void heads_input_free(HeadsInput *st) {
    for (int i = 0; i < st->set.n; i++) free(st->src[i].ids), free(st->ref[i].ids);
    free(st->src), free(st->ref), free(st->src_text), free(st->ref_text), free(st->pairs);
}

/* ---- the measures ------------------------------------------------------------------------------ */

int heads_analyse(Run *r, const HeadsInput *in, const long long *freq, const TranslateOptions *to, int curve,
                  uint64_t seed, void (*progress)(int done, int total, void *arg), HeadsAnalysis *a) {
    int nh = model_head_count(&r->model), tok = r->cfg.data.tokenizer;
    *a = (HeadsAnalysis){.stats = xcalloc((size_t)nh, sizeof(HeadStats)), .n_heads = nh};
    double t0 = now_seconds();
    heads_score(&r->model, &in->set, freq, fanout_threads(), a->stats, &a->base_nll);
    if (in->pairs && heads_aer(&r->model, tok, &r->src_vocab, &r->tgt_vocab, in->pairs, in->set.n, a->stats) != 0)
        return -1;
    double *imp = xmalloc(sizeof(double) * (size_t)nh), *raw = xmalloc(sizeof(double) * (size_t)nh),
           *dnll = xmalloc(sizeof(double) * (size_t)nh);
    for (int i = 0; i < nh; i++)
        imp[i] = a->stats[i].importance, raw[i] = a->stats[i].importance_raw, dnll[i] = a->stats[i].delta_nll;
    a->spearman = heads_spearman(imp, dnll, nh), a->spearman_raw = heads_spearman(raw, dnll, nh);
    free(imp), free(raw), free(dnll);
    a->score_seconds = now_seconds() - t0;

    if (curve) {
        t0 = now_seconds();
        heads_curves(&r->model, tok, &r->src_vocab, &r->tgt_vocab, &in->set, in->src_text, in->ref_text, to, a->stats,
                     seed, fanout_threads(), &a->curves, progress, NULL);
        a->curve_seconds = now_seconds() - t0;
    }
    a->default_order = heads_default_order(curve ? &a->curves : NULL, a->areas);
    for (int i = 0; i < in->set.n; i++) a->ref_tokens += in->ref[i].len + 1;
    return 0;
}

void heads_analysis_free(HeadsAnalysis *a) {
    heads_curves_free(&a->curves);
    free(a->stats);
    a->stats = NULL;
}

/* ---- the files ---------------------------------------------------------------------------------- */

typedef struct {
    const char *out;
    char *json, *view, *svg; /* svg NULL without a curve */
    const HeadCurves *curves;
    int default_order;
    const Model *m;
} Files;
/* Files an export writes: what a new export replaces and clears out of an old one. */
static int mask_file(const char *name);

static int export_file(const char *name) {
    return strcmp(name, "heads.json") == 0 || strcmp(name, "heads.svg") == 0 || strcmp(name, "index.html") == 0 ||
           strcmp(name, "masks") == 0 || (strncmp(name, "masks/", 6) == 0 && mask_file(name + 6));
}

/* A mask file's name as the curve names them: ORDER-... or default-..., .txt */
static int mask_file(const char *name) {
    size_t n = strlen(name);
    const char *dash = strchr(name, '-');
    if (n <= 4 || strcmp(name + n - 4, ".txt") != 0 || !dash) return 0;
    char order[32];
    snprintf(order, sizeof order, "%.*s", (int)(dash - name < 31 ? dash - name : 31), name);
    return strcmp(order, "default") == 0 || heads_order_of(order) >= 0;
}

/* Whether dir/masks/ holds only masks: a file there that is not a mask's (or a masks that
 * is no directory) is an error; no masks/ is none. The masks go as the new set moves in. */
static int check_masks(const char *dir) {
    char path[STAGED_DIR_MAX + 256];
    snprintf(path, sizeof path, "%s/masks", dir);
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? 0 : err_set("%s: %s", path, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) && rc == 0) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (!mask_file(e->d_name))
            rc = err_set("%s/%s: not a mask file of qkv heads: left alone, so --out is not written", path, e->d_name);
    }
    closedir(d);
    return rc;
}

/* The curve's masks as parts of the set (masks/ORDER-..., and the default order's again
 * under a name that does not change with the winner), their texts and names into
 * texts/names (freed by the caller), after the n parts already there; the new count. */
static int mask_parts(const Files *f, StagedPart *parts, int n, StrBuf *texts, char (*names)[128]) {
    int nh = f->curves->n_heads;
    for (int i = 0; i < f->curves->n_curves; i++)
        for (int k = 0; k < HEADS_CURVE_POINTS; k++) {
            const HeadCurve *c = &f->curves->curves[i];
            StrBuf *sb = &texts[i * HEADS_CURVE_POINTS + k];
            sb_append(sb, "", 0);
            heads_mask_text(f->m, c->removed + (size_t)k * nh, sb);
            parts[n++] = (StagedPart){c->points[k].mask, sb->buf, sb->len};
            if (c->order != f->default_order) continue;
            char *name = names[i * HEADS_CURVE_POINTS + k];
            snprintf(name, 128, "masks/default-%s-%d.txt", heads_scope_name(c->scope), c->points[k].pct);
            parts[n++] = (StagedPart){name, sb->buf, sb->len};
        }
    return n;
}

int heads_export(const char *out, const HeadReport *rep, Run *r, const HeadsInput *in, int *masks) {
    json_t *root = heads_report_json(rep);
    Files files = {out,         xcheck(json_dumps(root, JSON_WRITE_FLAGS | JSON_INDENT(1))),
                   NULL,        NULL,
                   rep->curves, rep->default_order,
                   &r->model};
    json_decref(root);
    files.view = heads_view_json(rep, &r->model, r->cfg.data.tokenizer, &r->src_vocab, &r->tgt_vocab, &in->set,
                                 in->src_text, in->ref_text);
    if (rep->curves) files.svg = heads_svg(rep->curves, rep->default_order);
    StrBuf page = {0};
    int n_masks = rep->curves ? rep->curves->n_curves * HEADS_CURVE_POINTS : 0, n = 0, rc = -1;
    StagedPart *parts = xmalloc(sizeof(StagedPart) * (size_t)(3 + 2 * n_masks));
    StrBuf *texts = xcalloc((size_t)(n_masks ? n_masks : 1), sizeof(StrBuf));
    char(*names)[128] = xcalloc((size_t)(n_masks ? n_masks : 1), sizeof *names);
    /* the old masks/ goes as the new set moves in, or with it when it has none */
    if (check_masks(out) != 0 || attnview_page(files.view, &page) != 0) goto done;
    parts[n++] = (StagedPart){"heads.json", files.json, strlen(files.json)};
    parts[n++] = (StagedPart){"index.html", page.buf, page.len};
    if (files.svg) parts[n++] = (StagedPart){"heads.svg", files.svg, strlen(files.svg)};
    int first_mask = n;
    if (rep->curves) n = mask_parts(&files, parts, n, texts, names);
    rc = staged_dir_write_parts(out, "--out", parts, n, export_file);
    *masks = rc == 0 ? n - first_mask : 0;
done:
    for (int i = 0; i < n_masks; i++) sb_free(&texts[i]);
    free(parts), free(texts), free(names), sb_free(&page);
    free(files.json), free(files.view), free(files.svg);
    return rc;
}
