/* headcurve: see headcurve.h. */
#include "heads/headcurve.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "decode/fanout.h"
#include "decode/headmask.h"
#include "score/sacrebleu.h"
#include "util/mem.h"
#include "util/rng.h"

static const char *order_names[HEADS_ORDERS] = {"importance", "importance_raw", "delta_nll", "random"};

const char *heads_order_name(int order) { return order >= 0 && order < HEADS_ORDERS ? order_names[order] : "?"; }

int heads_order_of(const char *name) {
    for (int o = 0; name && o < HEADS_ORDERS; o++)
        if (strcmp(name, order_names[o]) == 0) return o;
    return -1;
}

const char *heads_scope_name(int scope) { return scope == HEADS_SCOPE_ALL ? "all" : attnmap_kind_name(scope); }

double heads_order_score(const HeadStats *h, int order) {
    return order == HEADS_ORDER_IMPORTANCE       ? h->importance
           : order == HEADS_ORDER_IMPORTANCE_RAW ? h->importance_raw
           : order == HEADS_ORDER_DELTA_NLL      ? h->delta_nll
                                                 : NAN;
}

/* qsort has no context argument in C11; single-threaded use */
static const HeadStats *order_stats;
static int order_by;
/* increasing score, ties by the raw score, then by number */
static int by_score(const void *a, const void *b) {
    const HeadStats *x = &order_stats[*(const int *)a], *y = &order_stats[*(const int *)b];
    double sx = heads_order_score(x, order_by), sy = heads_order_score(y, order_by);
    if (sx != sy) return sx < sy ? -1 : 1;
    if (x->importance_raw != y->importance_raw) return x->importance_raw < y->importance_raw ? -1 : 1;
    return x->index - y->index;
}
/* decreasing score, ties by the raw score decreasing, then by number */
static int by_score_down(const void *a, const void *b) {
    const HeadStats *x = &order_stats[*(const int *)a], *y = &order_stats[*(const int *)b];
    double sx = heads_order_score(x, order_by), sy = heads_order_score(y, order_by);
    if (sx != sy) return sx > sy ? -1 : 1;
    if (x->importance_raw != y->importance_raw) return x->importance_raw > y->importance_raw ? -1 : 1;
    return x->index - y->index;
}

int heads_removal_order(const Model *m, const HeadStats *stats, int order, int scope, uint64_t seed, int *out) {
    int n = 0, nh = model_head_count(m);
    for (int i = 0; i < nh; i++)
        if (scope == HEADS_SCOPE_ALL || stats[i].kind == scope) out[n++] = i;
    if (order != HEADS_ORDER_RANDOM) {
        order_stats = stats, order_by = order;
        qsort(out, (size_t)n, sizeof(int), by_score);
        return n;
    }
    Rng r;
    rng_seed(&r, hash64(seed, (uint64_t)(scope + 1)));
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(&r, (uint64_t)i + 1), t = out[i];
        out[i] = out[j], out[j] = t;
    }
    return n;
}

void heads_rank_order(const HeadStats *stats, int n, int order, int *out) {
    for (int i = 0; i < n; i++) out[i] = i;
    order_stats = stats, order_by = order;
    qsort(out, (size_t)n, sizeof(int), by_score_down);
}

double heads_curve_area(const HeadCurve *c) {
    double area = 0.0;
    for (int k = 0; k + 1 < HEADS_CURVE_POINTS; k++)
        area += (c->points[k + 1].pct - c->points[k].pct) * (c->points[k].bleu + c->points[k + 1].bleu) / 2.0;
    return area / 100.0;
}

int heads_default_order(const HeadCurves *c, double *areas) {
    for (int o = 0; o < HEADS_ORDERS; o++) areas[o] = NAN;
    for (int i = 0; c && i < c->n_curves; i++)
        if (c->curves[i].scope == HEADS_SCOPE_ALL)
            areas[c->curves[i].order] = round(heads_curve_area(&c->curves[i]) * 1e4) / 1e4;
    static const int ties[3] = {HEADS_ORDER_DELTA_NLL, HEADS_ORDER_IMPORTANCE_RAW, HEADS_ORDER_IMPORTANCE};
    int best = -1;
    for (int t = 0; t < 3; t++)
        if (!isnan(areas[ties[t]]) && (best < 0 || areas[ties[t]] > areas[best])) best = ties[t];
    return best < 0 ? HEADS_ORDER_FALLBACK : best;
}

void heads_mask_text(const Model *m, const unsigned char *removed, StrBuf *out) {
    int nh = model_head_count(m);
    float *gates = xmalloc(sizeof(float) * (size_t)(nh ? nh : 1));
    for (int i = 0; i < nh; i++) gates[i] = removed[i] ? 0.0f : 1.0f;
    head_mask_format(m, gates, out);
    free(gates);
}

/* The distinct masks, shared by fanout's workers: each takes the next undone one, so a slow
 * mask (a crippled model that decodes to the length cap) holds up one worker only. A mask's
 * figures do not depend on which worker decodes it. */
typedef struct {
    int tokenizer;
    const Vocab *sv, *tv;
    const HeadSet *set;
    char **src_text, **ref_text;
    const TranslateOptions *o;
    const unsigned char **masks; /* (count) */
    double *bleu, *nll;          /* (count) */
    int count;
    atomic_int next;
    pthread_mutex_t lock; /* over done and the progress callback */
    int done;
    void (*progress)(int done, int total, void *arg);
    void *arg;
} CurveJob;

/* BLEU and per-token NLL of the set with the heads of `removed` masked. */
static void evaluate(Model *m, const CurveJob *job, const unsigned char *removed, float *gates, double *bleu,
                     double *nll) {
    int nh = model_head_count(m), n = job->set->n;
    for (int i = 0; i < nh; i++) gates[i] = removed[i] ? 0.0f : 1.0f;
    model_set_head_gates(m, gates);
    TranslateStats st;
    char **hyp = translate_lines(m, job->tokenizer, job->sv, job->tv, job->src_text, n, job->o, &st, NULL);
    BleuStats bs = {0};
    for (int i = 0; i < n; i++) bleu_add(&bs, hyp[i], job->ref_text[i]);
    *bleu = bleu_compute(&bs, 0).score;
    for (int i = 0; i < n; i++) free(hyp[i]);
    free(hyp);
    long long tokens = 0;
    double sum = reference_nll(m, job->set->src, job->set->ref, n, &tokens);
    *nll = tokens ? sum / (double)tokens : 0.0;
    model_set_head_gates(m, NULL);
}

static void curve_worker(Model *m, int w, void *arg) {
    (void)w;
    CurveJob *job = arg;
    float *gates = xmalloc(sizeof(float) * (size_t)model_head_count(m));
    for (int k; (k = atomic_fetch_add(&job->next, 1)) < job->count;) {
        evaluate(m, job, job->masks[k], gates, &job->bleu[k], &job->nll[k]);
        pthread_mutex_lock(&job->lock);
        job->done++;
        if (job->progress) job->progress(job->done, job->count, job->arg);
        pthread_mutex_unlock(&job->lock);
    }
    free(gates);
}

void heads_curves(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const HeadSet *set, char **src_text,
                  char **ref_text, const TranslateOptions *o, const HeadStats *stats, uint64_t seed, int threads,
                  HeadCurves *out, void (*progress)(int done, int total, void *arg), void *arg) {
    int nh = model_head_count(m);
    memset(out, 0, sizeof *out);
    out->n_heads = nh, out->seed = seed;
    int *order = xmalloc(sizeof(int) * (size_t)nh);
    for (int scope = HEADS_SCOPE_ALL; scope < ATTN_KINDS; scope++)
        for (int ord = 0; ord < HEADS_ORDERS; ord++) {
            int n = heads_removal_order(m, stats, ord, scope, seed, order);
            if (n == 0) continue;
            HeadCurve *c = &out->curves[out->n_curves++];
            c->order = ord, c->scope = scope, c->heads = n;
            c->removed = xcalloc((size_t)HEADS_CURVE_POINTS * nh, 1);
            for (int k = 0; k < HEADS_CURVE_POINTS; k++) {
                HeadCurvePoint *p = &c->points[k];
                /* every tenth, and the quarters a reader compares with */
                static const int pcts[HEADS_CURVE_POINTS] = {0, 10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 90, 100};
                p->pct = pcts[k];
                p->removed = (p->pct * n + 50) / 100;
                for (int i = 0; i < p->removed; i++) c->removed[(size_t)k * nh + order[i]] = 1;
                snprintf(p->mask, sizeof p->mask, "masks/%s-%s-%d.txt", heads_order_name(ord), heads_scope_name(scope),
                         p->pct);
            }
        }
    /* the distinct masks, each decoded once */
    int total = out->n_curves * HEADS_CURVE_POINTS, distinct = 0;
    const unsigned char **seen = xmalloc(sizeof(char *) * (size_t)total);
    int *first = xmalloc(sizeof(int) * (size_t)total); /* each point's first point with its mask */
    for (int q = 0; q < total; q++) {
        const unsigned char *mask = out->curves[q / HEADS_CURVE_POINTS].removed + (size_t)(q % HEADS_CURVE_POINTS) * nh;
        first[q] = q;
        for (int r = 0; r < q; r++)
            if (memcmp(seen[r], mask, (size_t)nh) == 0) {
                first[q] = first[r];
                break;
            }
        seen[q] = mask;
        distinct += first[q] == q;
    }
    CurveJob job = {.tokenizer = tokenizer,
                    .sv = sv,
                    .tv = tv,
                    .set = set,
                    .src_text = src_text,
                    .ref_text = ref_text,
                    .o = o,
                    .masks = xmalloc(sizeof(char *) * (size_t)(distinct ? distinct : 1)),
                    .bleu = xmalloc(sizeof(double) * (size_t)(distinct ? distinct : 1)),
                    .nll = xmalloc(sizeof(double) * (size_t)(distinct ? distinct : 1)),
                    .count = distinct,
                    .progress = progress,
                    .arg = arg};
    int *slot = xmalloc(sizeof(int) * (size_t)total);
    for (int q = 0, k = 0; q < total; q++)
        if (first[q] == q) slot[q] = k, job.masks[k++] = seen[q];
    atomic_init(&job.next, 0);
    pthread_mutex_init(&job.lock, NULL);
    fanout(m, threads < distinct ? threads : distinct, curve_worker, &job);
    pthread_mutex_destroy(&job.lock);
    for (int q = 0; q < total; q++) {
        HeadCurvePoint *p = &out->curves[q / HEADS_CURVE_POINTS].points[q % HEADS_CURVE_POINTS];
        p->bleu = job.bleu[slot[first[q]]], p->nll = job.nll[slot[first[q]]];
    }
    out->evaluations = distinct;
    free(order), free(seen), free(first), free(slot), free(job.masks), free(job.bleu), free(job.nll);
}

void heads_curves_free(HeadCurves *c) {
    for (int i = 0; i < c->n_curves; i++) free(c->curves[i].removed);
    c->n_curves = 0;
}
