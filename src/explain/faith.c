/* faith: AOPC against random orders, Kendall tau per head, source shares (faith.h). */
#include "explain/faith.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"
#include "util/rng.h"

void faith_ks(int n, int *ks) {
    int k20 = (n + 4) / 5; /* 20%, rounded up */
    const int want[FAITH_KS] = {1, 2, 3, k20 < 1 ? 1 : k20};
    for (int i = 0; i < FAITH_KS; i++) ks[i] = want[i] < n ? want[i] : n;
}

double kendall_tau_b(const float *a, const float *b, int n) {
    long long conc = 0, disc = 0, tie_a = 0, tie_b = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            float da = a[i] - a[j], db = b[i] - b[j];
            if (da == 0 && db == 0) tie_a++, tie_b++;
            else if (da == 0) tie_a++;
            else if (db == 0) tie_b++;
            else if ((da > 0) == (db > 0)) conc++;
            else disc++;
        }
    long long pairs = (long long)n * (n - 1) / 2;
    double den = sqrt((double)(pairs - tie_a) * (double)(pairs - tie_b));
    return den > 0 ? (double)(conc - disc) / den : NAN;
}

void faith_init(FaithTotals *f, const ExplainMethod *methods, int n, int layers, int heads, int n_random) {
    memset(f, 0, sizeof *f);
    f->n_methods = n;
    f->methods = xcalloc((size_t)n, sizeof(ExplainMethod));
    for (int i = 0; i < n; i++)
        memcpy(f->methods[i].name, methods[i].name, EXPLAIN_NAME_MAX), f->methods[i].family = methods[i].family;
    f->drop = xcalloc((size_t)n * FAITH_KS, sizeof(double));
    f->n_random = n_random;
    f->random_drop = xcalloc((size_t)(n_random ? n_random : 1) * FAITH_KS, sizeof(double));
    f->layers = layers, f->heads = heads;
    size_t lh = (size_t)layers * heads;
    f->tau_loo = xcalloc(lh, sizeof(double)), f->tau_grad = xcalloc(lh, sizeof(double));
    f->tau_self = xcalloc(lh, sizeof(double));
    f->n_loo = xcalloc(lh, sizeof(long)), f->n_grad = xcalloc(lh, sizeof(long)), f->n_self = xcalloc(lh, sizeof(long));
    f->share_layer = xcalloc((size_t)layers, sizeof(double));
}

void faith_free(FaithTotals *f) {
    free(f->methods), free(f->drop), free(f->random_drop);
    free(f->tau_loo), free(f->tau_grad), free(f->tau_self), free(f->n_loo), free(f->n_grad), free(f->n_self);
    free(f->share_layer);
    memset(f, 0, sizeof *f);
}

void faith_merge(FaithTotals *into, const FaithTotals *from) {
    for (int i = 0; i < into->n_methods * FAITH_KS; i++) into->drop[i] += from->drop[i];
    for (int i = 0; i < into->n_random * FAITH_KS; i++) into->random_drop[i] += from->random_drop[i];
    for (int i = 0; i < into->layers * into->heads; i++) {
        into->tau_loo[i] += from->tau_loo[i], into->tau_grad[i] += from->tau_grad[i];
        into->tau_self[i] += from->tau_self[i];
        into->n_loo[i] += from->n_loo[i], into->n_grad[i] += from->n_grad[i], into->n_self[i] += from->n_self[i];
    }
    for (int l = 0; l < into->layers; l++) into->share_layer[l] += from->share_layer[l];
    for (int p = 0; p < FAITH_POSITIONS; p++)
        into->share_pos[p] += from->share_pos[p], into->n_pos[p] += from->n_pos[p];
    into->tokens += from->tokens, into->sentences += from->sentences, into->removal_rows += from->removal_rows;
}

/* One removal a ranking asks for: the set (S bytes at `set`) and where its drop goes */
typedef struct {
    int set;    /* index into the sets */
    int t;      /* target position */
    double *to; /* the sum it adds into */
} Ask;

typedef struct {
    const unsigned char *base;
    int S;
} SetCmp;
static SetCmp set_cmp_ctx;

static int cmp_sets(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    int c = memcmp(set_cmp_ctx.base + (size_t)a * set_cmp_ctx.S, set_cmp_ctx.base + (size_t)b * set_cmp_ctx.S,
                   (size_t)set_cmp_ctx.S);
    return c ? c : (a > b) - (a < b);
}

/* order (n) = indices 0..n-1 by score, highest first; ties by position */
static void rank_desc(const float *score, int n, int *order) {
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) { /* insertion sort: n is a sentence's length */
        int x = order[i], j = i;
        while (j > 0 && (score[order[j - 1]] < score[x] || (score[order[j - 1]] == score[x] && order[j - 1] > x)))
            order[j] = order[j - 1], j--;
        order[j] = x;
    }
}

void faith_add(FaithTotals *f, Model *m, const PairExplanation *e, const ExplainMethod *methods, uint64_t seed) {
    int S = e->S, T = e->T, n = S - 1, M = f->n_methods, R = f->n_random;
    f->sentences++;
    int L = f->layers, H = f->heads;
    for (int t = 0; t < T; t++) {
        for (int l = 0; l < L; l++) f->share_layer[l] += e->contrib.share[(size_t)l * T + t];
        int b = t < FAITH_POSITIONS - 1 ? t : FAITH_POSITIONS - 1;
        f->share_pos[b] += e->contrib.share[(size_t)(L - 1) * T + t], f->n_pos[b]++;
    }
    /* tau: cross heads against leave-one-out and saliency over the source tokens, decoder
     * self heads against saliency over the prefix */
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            const float *cross = attnmap_at(&e->maps, ATTN_CROSS, l, h),
                        *self = attnmap_at(&e->maps, ATTN_DEC_SELF, l, h);
            size_t at = (size_t)l * H + h;
            for (int t = 0; t < T; t++) {
                double tau = kendall_tau_b(cross + (size_t)t * S, e->loo + (size_t)t * S, n);
                if (!isnan(tau)) f->tau_loo[at] += tau, f->n_loo[at]++;
                tau = kendall_tau_b(cross + (size_t)t * S, e->grad.saliency + (size_t)t * (S + T), n);
                if (!isnan(tau)) f->tau_grad[at] += tau, f->n_grad[at]++;
                tau = kendall_tau_b(self + (size_t)t * T, e->grad.saliency + (size_t)t * (S + T) + S, t + 1);
                if (!isnan(tau)) f->tau_self[at] += tau, f->n_self[at]++;
            }
        }
    if (n < 1) return;
    f->tokens += T;

    /* every removal the rankings ask for */
    int ks[FAITH_KS];
    faith_ks(n, ks);
    int n_asks = (M + R) * T * FAITH_KS;
    unsigned char *sets = xcalloc((size_t)n_asks, (size_t)S);
    Ask *asks = xmalloc(sizeof(Ask) * (size_t)n_asks);
    int *order = xmalloc(sizeof(int) * (size_t)n), a = 0;
    float *noise = xmalloc(sizeof(float) * (size_t)n);
    Rng rng = {seed ? seed : 1};
    for (int mi = 0; mi < M + R; mi++)
        for (int t = 0; t < T; t++) {
            if (mi < M) rank_desc(methods[mi].scores + (size_t)t * S, n, order);
            else {
                for (int j = 0; j < n; j++) noise[j] = (float)rng_uniform(&rng);
                rank_desc(noise, n, order);
            }
            for (int k = 0; k < FAITH_KS; k++, a++) {
                for (int j = 0; j < ks[k]; j++) sets[(size_t)a * S + order[j]] = 1;
                double *to = mi < M ? &f->drop[(size_t)mi * FAITH_KS + k]
                                    : &f->random_drop[(size_t)(mi - M) * FAITH_KS + k];
                asks[a] = (Ask){a, t, to};
            }
        }
    /* each distinct set once, with every position any ask of it needs */
    int *idx = xmalloc(sizeof(int) * (size_t)n_asks), *uniq_of = xmalloc(sizeof(int) * (size_t)n_asks), nu = 0;
    for (int i = 0; i < n_asks; i++) idx[i] = i;
    set_cmp_ctx = (SetCmp){sets, S};
    qsort(idx, (size_t)n_asks, sizeof(int), cmp_sets);
    unsigned char *usets = xmalloc((size_t)n_asks * S), *want = xcalloc((size_t)n_asks, (size_t)T);
    for (int i = 0; i < n_asks; i++) {
        if (i == 0 || memcmp(sets + (size_t)idx[i] * S, sets + (size_t)idx[i - 1] * S, (size_t)S) != 0)
            memcpy(usets + (size_t)nu++ * S, sets + (size_t)idx[i] * S, (size_t)S);
        uniq_of[idx[i]] = nu - 1;
        want[(size_t)(nu - 1) * T + asks[idx[i]].t] = 1;
    }
    float *lp = xmalloc(sizeof(float) * (size_t)nu * T);
    explain_removal_logp(m, e, usets, want, nu, lp);
    f->removal_rows += nu;
    for (int i = 0; i < n_asks; i++) *asks[i].to += e->logp[asks[i].t] - lp[(size_t)uniq_of[i] * T + asks[i].t];
    free(sets), free(asks), free(order), free(noise), free(idx), free(uniq_of), free(usets), free(want), free(lp);
}

double faith_drop_at(const FaithTotals *f, int method, int k) {
    return f->tokens ? f->drop[(size_t)method * FAITH_KS + k] / (double)f->tokens : NAN;
}

double faith_aopc(const FaithTotals *f, int method) {
    double s = 0;
    for (int k = 0; k < FAITH_KS; k++) s += faith_drop_at(f, method, k);
    return s / FAITH_KS;
}

void faith_random(const FaithTotals *f, double *mean, double *sd) {
    double s = 0, s2 = 0;
    for (int r = 0; r < f->n_random; r++) {
        double a = 0;
        for (int k = 0; k < FAITH_KS; k++) a += f->random_drop[(size_t)r * FAITH_KS + k];
        a = f->tokens ? a / FAITH_KS / (double)f->tokens : NAN;
        s += a, s2 += a * a;
    }
    int R = f->n_random;
    *mean = R ? s / R : NAN;
    *sd = R > 1 ? sqrt(fmax(0, (s2 - s * s / R) / (R - 1))) : 0;
}
