/* decode: see decode.h.
 *
 * Search only: the network is the model's incremental step (model_step), the same code
 * that training runs, one query row per hypothesis with cached keys and values. This file
 * holds greedy search and the grouping both searches run in; beam.c holds beam search,
 * search.c what the two share. */
#include "decode/decode.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "decode/beam.h"
#include "decode/fanout.h"
#include "decode/search.h"
#include "nn/vecmath.h"
#include "util/mem.h"

#define GROUP 64 /* sentences decoded together (after sorting by length) */

/* EOS first, then the ordinary tokens, UNK only when strictly better: the order in which
 * ties are broken (beam.c ranks candidates the same way). */
static int argmax_token(const float *logits, int V) {
    int best = VOCAB_EOS;
    /* the first ordinary token at the maximum, if that beats EOS: what a scan keeping the
     * strictly greater would find, in two vector passes over the row (a NaN never wins) */
    const float *ordinary = logits + VOCAB_N_SPECIAL;
    float top = vec_max(ordinary, V - VOCAB_N_SPECIAL);
    if (top > logits[best]) best = VOCAB_N_SPECIAL + vec_first_equal(ordinary, V - VOCAB_N_SPECIAL, top);
    if (logits[VOCAB_UNK] > logits[best]) best = VOCAB_UNK;
    return best;
}

static void greedy_group(Model *m, DecodeState *st, const Seq *const *src, int B, const DecodeOptions *o,
                         Seq *const *out, double *const *scores) {
    int Tmax = 1;
    for (int i = 0; i < B; i++) {
        int t = decode_max_len(m, o, src[i]->len) + 1;
        if (t > Tmax) Tmax = t;
    }
    int *src_ids, *src_len, S, one = 1;
    search_source_batch(src, B, &src_ids, &src_len, &S);
    int *tok = xmalloc(sizeof(int) * (size_t)B), *done = xcalloc((size_t)B, sizeof(int));
    double *logp = xcalloc((size_t)B, sizeof(double));
    for (int i = 0; i < B; i++) {
        out[i]->ids = xmalloc(sizeof(int) * (size_t)Tmax);
        out[i]->len = 0;
        tok[i] = VOCAB_BOS;
    }
    ModelBatch b = {B, S, 1, src_ids, src_len, tok, NULL, &one, 0};
    model_step_begin(m, st, &b, 1);
    /* row r of the step is sentence sent[r]; finished sentences leave the step once an
     * eighth of its rows are done (each leaving costs a copy of the rows after it) */
    int remaining = B, V = m->cfg.tgt_vocab, rows = B, idle = 0;
    int *sent = xmalloc(sizeof(int) * (size_t)B), *keep = xmalloc(sizeof(int) * (size_t)B);
    for (int r = 0; r < B; r++) sent[r] = r;
    for (int t = 0; t < Tmax - 1 && remaining > 0; t++) {
        const float *logits = model_step(m, st, tok);
        for (int r = 0; r < rows; r++) {
            int i = sent[r];
            if (done[i]) continue;
            const float *z = logits + (size_t)r * V;
            int best = argmax_token(z, V);
            if (scores) logp[i] += z[best] - search_log_normaliser(z, V);
            if (best != VOCAB_EOS) out[i]->ids[out[i]->len++] = tok[r] = best;
            if (best == VOCAB_EOS || out[i]->len >= decode_max_len(m, o, src[i]->len)) {
                done[i] = 1, remaining--, idle++;
                if (scores) *scores[i] = logp[i] / pow(out[i]->len + (best == VOCAB_EOS), o->length_penalty);
            }
        }
        if (remaining > 0 && idle > 0 && idle * 8 >= rows) {
            int n = 0;
            for (int r = 0; r < rows; r++)
                if (!done[sent[r]]) keep[n++] = r;
            model_step_keep(st, m, keep, n);
            for (int k = 0; k < n; k++) sent[k] = sent[keep[k]], tok[k] = tok[keep[k]];
            rows = n, idle = 0;
        }
    }
    free(src_ids), free(src_len), free(tok), free(done), free(logp), free(sent), free(keep);
}

static int by_src_len(const void *a, const void *b) {
    const Seq *x = *(const Seq *const *)a, *y = *(const Seq *const *)b;
    return (x->len > y->len) - (x->len < y->len);
}

/* The sorted sentences' groups, handed out one at a time to whichever worker is free. */
typedef struct {
    const DecodeOptions *o;
    const Seq **order;
    Seq **outs;
    double **score_at; /* NULL: no scores */
    int n, group, greedy, K;
    atomic_int next;    /* how many groups the workers have taken */
    atomic_llong flops; /* every worker's matrix-product FLOPs, summed as each ends */
} Groups;

/* The state and arena sized once for all of the groups, instead of growing group after
 * group: for the most sentences of any group (the first's) and the widest source of any
 * (the last sentence's: they are sorted by length). Both sizes grow with each, and the
 * group with the most rows need not be the widest (the last, a partial group, is). */
static void reserve_for_groups(Model *m, DecodeState *st, const Groups *g) {
    if (g->n == 0) return;
    int G = g->n < g->group ? g->n : g->group, S = g->order[g->n - 1]->len + 1;
    model_step_reserve(m, st, G, S, g->greedy ? 1 : g->o->beam);
}

static void decode_groups(Model *m, int w, void *arg) {
    Groups *g = arg;
    (void)w;
    DecodeState st = {0}; /* one for all of this worker's groups: its memory is reused */
    reserve_for_groups(m, &st, g);
    /* Longest group first: the workers take the groups as they come free, so what is left
     * when the first runs out of groups is the last ones, the shortest (taken shortest
     * first, a worker that drew the longest group was still at work while the others
     * waited). The groups themselves are the same either way. */
    int groups = (g->n + g->group - 1) / g->group;
    for (int k; (k = atomic_fetch_add(&g->next, 1)) < groups;) {
        int i = (groups - 1 - k) * g->group, b = g->n - i < g->group ? g->n - i : g->group;
        if (g->greedy) greedy_group(m, &st, g->order + i, b, g->o, g->outs + i, g->score_at ? g->score_at + i : NULL);
        else
            beam_search_group(m, &st, g->order + i, b, g->o, g->outs + (size_t)i * g->K,
                              g->score_at ? g->score_at + (size_t)i * g->K : NULL);
    }
    atomic_fetch_add(&g->flops, llround(st.flops));
    model_step_end(&st);
}

void decode(Model *m, const Seq *src, int n, const DecodeOptions *o, Seq *out, double *scores) {
    decode_counting(m, src, n, o, out, scores, NULL);
}

void decode_counting(Model *m, const Seq *src, int n, const DecodeOptions *o, Seq *out, double *scores, double *flops) {
    /* similar lengths together: less padding in the encoder and fewer idle rows */
    int K = o->nbest, greedy = o->beam == 1 && o->no_repeat_ngram == 0;
    size_t slots = (size_t)(n ? n : 1);
    const Seq **order = xmalloc(sizeof(Seq *) * slots);
    for (int i = 0; i < n; i++) order[i] = &src[i];
    qsort(order, (size_t)n, sizeof(Seq *), by_src_len);
    Seq **outs = xmalloc(sizeof(Seq *) * slots * K);
    double **score_at = xmalloc(sizeof(double *) * slots * K);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < K; k++) {
            size_t at = (size_t)(order[i] - src) * K + k;
            outs[(size_t)i * K + k] = &out[at];
            score_at[(size_t)i * K + k] = scores ? &scores[at] : NULL;
        }
    /* a group holds GROUP hypotheses' rows in all */
    int group = greedy ? GROUP : (GROUP / o->beam > 1 ? GROUP / o->beam : 1);
    Groups g = {o, order, outs, scores ? score_at : NULL, n, group, greedy, K, 0, 0};
    /* One group's products are too small to split well over cores (two OpenBLAS threads
     * decode 1.2 times faster than one): whole groups side by side, a core each, do better.
     * Each group is decoded as it would be alone, so the translations do not depend on how
     * many workers there are. Under a fanout already (qkv heads' curve, qkv serve's
     * workers) OpenBLAS runs at one thread, and so does this. */
    int workers = fanout_threads(), groups = (n + group - 1) / group;
    if (workers > groups) workers = groups;
    if (workers > 1) fanout(m, workers, decode_groups, &g);
    else decode_groups(m, 0, &g);
    if (flops) *flops = (double)atomic_load(&g.flops);
    free(order), free(outs), free(score_at);
}

void greedy_decode(Model *m, const Seq *src, int n, Seq *out) {
    DecodeOptions o = decode_defaults();
    o.beam = 1;
    decode(m, src, n, &o, out, NULL);
}

int greedy_ids(Model *m, int *src, int n_src, int *tgt, int max) {
    Seq s = {src, n_src}, out;
    greedy_decode(m, &s, 1, &out);
    int n = out.len < max ? out.len : max;
    memcpy(tgt, out.ids, sizeof(int) * (size_t)n);
    free(out.ids);
    return n;
}
