/* headscore: see headscore.h. */
#include "infer/headscore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "infer/translator.h"
#include "util/mem.h"

/* ---- roles ----------------------------------------------------------------------------- */

void heads_roles_add(HeadRoleCounts *c, int kind, const float *p, int rows, int cols, const unsigned char *rarest) {
    int self = kind != ATTN_CROSS;
    for (int i = 0; i < rows; i++) {
        const float *row = p + (size_t)i * cols;
        int top = 0;
        double entropy = 0.0;
        for (int j = 0; j < cols; j++) {
            if (row[j] > row[top]) top = j;
            if (row[j] > 0.0f) entropy -= (double)row[j] * log((double)row[j]);
        }
        c->queries++;
        c->top_sum += row[top];
        c->entropy_sum += entropy;
        if (self) {
            if (i >= 1) c->prev_n++, c->prev_hits += top == i - 1;
            c->cur_hits += top == i;
            if (i + 1 < cols) c->next_n++, c->next_hits += top == i + 1;
        }
        if (rarest) c->rare_n++, c->rare_hits += rarest[top] != 0;
    }
}

static double share(long long hits, long long n) { return n ? (double)hits / (double)n : NAN; }

void heads_roles_finish(const HeadRoleCounts *c, HeadStats *h) {
    h->confidence = c->queries ? c->top_sum / (double)c->queries : NAN;
    h->entropy = c->queries ? c->entropy_sum / (double)c->queries : NAN;
    int self = h->kind != ATTN_CROSS;
    h->previous = self ? share(c->prev_hits, c->prev_n) : NAN;
    h->current = self ? share(c->cur_hits, c->queries) : NAN;
    h->next = self ? share(c->next_hits, c->next_n) : NAN;
    h->rare = h->kind != ATTN_DEC_SELF ? share(c->rare_hits, c->rare_n) : NAN;
    heads_label(h);
}

/* NAN compares false: a share that could not be counted gives no role */
static int at_least(double v, double threshold) { return v >= threshold; }

void heads_label(HeadStats *h) {
    static const char *names[] = {"previous", "current", "next", "rare", "aligns"};
    h->roles = (at_least(h->previous, HEADS_POSITIONAL_SHARE) ? HEAD_ROLE_PREVIOUS : 0) |
               (at_least(h->current, HEADS_POSITIONAL_SHARE) ? HEAD_ROLE_CURRENT : 0) |
               (at_least(h->next, HEADS_POSITIONAL_SHARE) ? HEAD_ROLE_NEXT : 0) |
               (at_least(h->rare, HEADS_RARE_SHARE) ? HEAD_ROLE_RARE : 0) |
               (h->kind == ATTN_CROSS && h->aer <= HEADS_ALIGN_AER ? HEAD_ROLE_ALIGNS : 0);
    h->role[0] = '\0';
    size_t at = 0;
    for (int r = 0; r < 5; r++)
        if (h->roles & (1 << r))
            at += (size_t)snprintf(h->role + at, sizeof h->role - at, "%s%s", at ? "+" : "", names[r]);
}

/* ---- Spearman ----------------------------------------------------------------------------- */

static const double *rank_keys;
static int by_key(const void *a, const void *b) {
    double x = rank_keys[*(const int *)a], y = rank_keys[*(const int *)b];
    return x < y ? -1 : x > y;
}

/* The ranks (1..n) of v into r; tied values share the mean of the ranks they span. */
static void ranks(const double *v, int n, double *r) {
    int *order = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) order[i] = i;
    rank_keys = v; /* qsort has no context argument in C11; single-threaded use */
    qsort(order, (size_t)n, sizeof(int), by_key);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && v[order[j + 1]] == v[order[i]]) j++;
        double mean = (i + j) / 2.0 + 1.0;
        for (int k = i; k <= j; k++) r[order[k]] = mean;
        i = j + 1;
    }
    free(order);
}

double heads_spearman(const double *a, const double *b, int n) {
    if (n < 2) return NAN;
    double *ra = xmalloc(sizeof(double) * (size_t)n), *rb = xmalloc(sizeof(double) * (size_t)n);
    ranks(a, n, ra), ranks(b, n, rb);
    double ma = 0.0, mb = 0.0, sab = 0.0, saa = 0.0, sbb = 0.0;
    for (int i = 0; i < n; i++) ma += ra[i] / n, mb += rb[i] / n;
    for (int i = 0; i < n; i++) {
        sab += (ra[i] - ma) * (rb[i] - mb);
        saa += (ra[i] - ma) * (ra[i] - ma);
        sbb += (rb[i] - mb) * (rb[i] - mb);
    }
    free(ra), free(rb);
    return saa > 0.0 && sbb > 0.0 ? sab / sqrt(saa * sbb) : NAN;
}

/* ---- frequencies -------------------------------------------------------------------------- */

long long *heads_source_frequencies(char **lines, int n, int tokenizer, const Vocab *v) {
    long long *freq = xcalloc((size_t)v->size, sizeof(long long));
    int cap = 0, *ids = NULL;
    for (int i = 0; i < n; i++) {
        int need = (int)strlen(lines[i]) + 2; /* a token is at least one byte */
        if (need > cap) ids = xrealloc(ids, sizeof(int) * (size_t)(cap = need));
        int len = encode_line(lines[i], tokenizer, v, ids, cap);
        for (int t = 0; t < len; t++)
            if (ids[t] >= 0 && ids[t] < v->size) freq[ids[t]]++;
    }
    free(ids);
    return freq;
}

/* rarest[j] = 1 for the source positions (EOS excluded) holding the least frequent
 * token; an <unk> counts 0. */
static void rarest_keys(const long long *freq, const int *ids, int len, int cols, unsigned char *rarest) {
    long long least = -1;
    for (int j = 0; j < len; j++) {
        long long f = ids[j] == VOCAB_UNK ? 0 : freq[ids[j]];
        if (least < 0 || f < least) least = f;
    }
    for (int j = 0; j < cols; j++) rarest[j] = j < len && (ids[j] == VOCAB_UNK ? 0 : freq[ids[j]]) == least;
}

/* ---- the passes ------------------------------------------------------------------------------ */

static int layers_of(const Model *m, int kind) {
    return kind == ATTN_ENC_SELF ? m->cfg.encoder_layers : m->cfg.decoder_layers;
}

/* One sentence through the gated model: the roles of its maps into rc, |dL/dxi| into
 * sum_abs. s, tin, tout, rarest have room for the sentence. */
static void score_sentence(Model *m, const Seq *src, const Seq *ref, const long long *freq, int *s, int *tin, int *tout,
                           unsigned char *rarest, HeadRoleCounts *rc, double *sum_abs) {
    int S = batch_frame_source(src->ids, src->len, s, src->len + 1);
    int T = batch_frame_target(ref->ids, ref->len, tin, tout, ref->len + 1);
    ModelBatch b = {1, S, T, s, &S, tin, tout, &T, 0};
    model_zero_grad(m);
    model_forward(m, &b, 0, 0, 0);
    if (freq) rarest_keys(freq, src->ids, src->len, S, rarest);
    int H = m->cfg.heads;
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < layers_of(m, k); l++) {
            int rows = k == ATTN_ENC_SELF ? S : T, cols = k == ATTN_DEC_SELF ? T : S;
            const float *p = model_attention_acts(m, (AttnKind)k, l)->p; /* (1, H, rows, cols) */
            for (int h = 0; h < H; h++)
                heads_roles_add(&rc[model_head_index(m, (AttnKind)k, l, h)], k, p + (size_t)h * rows * cols, rows, cols,
                                freq && k != ATTN_DEC_SELF ? rarest : NULL);
        }
    m->loss_tokens = 1; /* the gradient of the sum over the sentence's tokens, not the mean */
    model_backward(m, &b);
    const float *g = model_head_gate_grads(m);
    for (int i = 0; i < model_head_count(m); i++) sum_abs[i] += fabs((double)g[i]);
}

void heads_score(Model *m, const HeadSet *set, const long long *freq, HeadStats *stats, double *base_nll) {
    int nh = model_head_count(m), H = m->cfg.heads, max_s = 1, max_t = 1;
    float smoothing = m->cfg.label_smoothing;
    m->cfg.label_smoothing = 0.0f;
    float *gates = xmalloc(sizeof(float) * (size_t)nh);
    for (int i = 0; i < nh; i++) gates[i] = 1.0f;
    model_set_head_gates(m, gates);
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < layers_of(m, k); l++)
            for (int h = 0; h < H; h++) {
                int at = model_head_index(m, (AttnKind)k, l, h);
                memset(&stats[at], 0, sizeof stats[at]);
                stats[at].kind = k, stats[at].layer = l, stats[at].head = h, stats[at].index = at;
                stats[at].aer = NAN;
            }
    for (int i = 0; i < set->n; i++) {
        if (set->src[i].len + 1 > max_s) max_s = set->src[i].len + 1;
        if (set->ref[i].len + 1 > max_t) max_t = set->ref[i].len + 1;
    }
    model_reserve(m, model_arena_floats(m, 1, max_s, max_t));
    int *s = xmalloc(sizeof(int) * (size_t)max_s), *tin = xmalloc(sizeof(int) * (size_t)max_t),
        *tout = xmalloc(sizeof(int) * (size_t)max_t);
    unsigned char *rarest = xmalloc((size_t)max_s);
    HeadRoleCounts *rc = xcalloc((size_t)nh, sizeof(HeadRoleCounts));
    double *sum_abs = xcalloc((size_t)nh, sizeof(double));
    for (int i = 0; i < set->n; i++)
        score_sentence(m, &set->src[i], &set->ref[i], freq, s, tin, tout, rarest, rc, sum_abs);
    model_zero_grad(m);
    for (int i = 0; i < nh; i++) {
        stats[i].importance_raw = set->n ? sum_abs[i] / set->n : 0.0;
        heads_roles_finish(&rc[i], &stats[i]);
    }
    /* Michel et al.: each layer's scores over their L2 norm */
    for (int first = 0; first < nh; first += H) {
        double norm = 0.0;
        for (int h = 0; h < H; h++) norm += stats[first + h].importance_raw * stats[first + h].importance_raw;
        norm = sqrt(norm);
        for (int h = 0; h < H; h++)
            stats[first + h].importance = norm > 0.0 ? stats[first + h].importance_raw / norm : 0.0;
    }
    /* dNLL: the same passes, in the same order, with one gate at 0 */
    long long tokens = 0;
    double base = reference_nll(m, set->src, set->ref, set->n, &tokens);
    for (int i = 0; i < nh; i++) {
        gates[i] = 0.0f;
        model_set_head_gates(m, gates);
        double nll = reference_nll(m, set->src, set->ref, set->n, &tokens);
        stats[i].delta_nll = tokens ? (nll - base) / (double)tokens : 0.0;
        gates[i] = 1.0f;
    }
    if (base_nll) *base_nll = tokens ? base / (double)tokens : 0.0;
    model_set_head_gates(m, NULL);
    m->cfg.label_smoothing = smoothing;
    free(gates), free(s), free(tin), free(tout), free(rarest), free(rc), free(sum_abs);
}

int heads_aer(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *pairs, int n,
              HeadStats *stats) {
    int L = m->cfg.decoder_layers, H = m->cfg.heads;
    AlignPick *picks = xmalloc(sizeof(AlignPick) * (size_t)(L * H > 0 ? L * H : 1));
    AlignCounts *counts = xcalloc((size_t)(L * H > 0 ? L * H : 1), sizeof(AlignCounts));
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) picks[l * H + h] = (AlignPick){l, h};
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = aligner_score(m, tokenizer, sv, tv, &pairs[i], picks, L * H, counts);
    for (int l = 0; l < L && rc == 0; l++)
        for (int h = 0; h < H; h++) {
            HeadStats *st = &stats[model_head_index(m, ATTN_CROSS, l, h)];
            st->aer = align_aer(&counts[l * H + h]);
            heads_label(st);
        }
    free(picks), free(counts);
    return rc;
}
