/* pair: one sentence pair explained (pair.h). The weights come from attnmap_capture's
 * pass, the contributions from that same pass, the gradients and removals from their own
 * batched passes; nothing here computes a layer. */
#include "explain/pair.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/align_map.h"
#include "data/batch.h"
#include "data/vocab.h"
#include "util/mem.h"

/* Rows a removal pass runs at most */
enum { REMOVAL_ROWS = 64 };

void explain_removal_logp(Model *m, const PairExplanation *e, const unsigned char *sets, const unsigned char *want,
                          int n, float *out) {
    int S = e->S, T = e->T, R = REMOVAL_ROWS;
    int *bsrc = xmalloc(sizeof(int) * (size_t)R * S), *btin = xmalloc(sizeof(int) * (size_t)R * T);
    int *btout = xmalloc(sizeof(int) * (size_t)R * T), *sl = xmalloc(sizeof(int) * R), *tl = xmalloc(sizeof(int) * R);
    float *lp = xmalloc(sizeof(float) * (size_t)m->cfg.tgt_vocab);
    model_reserve(m, model_arena_floats(m, R, S, T));
    for (int first = 0; first < n; first += R) {
        int B = n - first < R ? n - first : R;
        for (int r = 0; r < B; r++) {
            const unsigned char *set = sets + (size_t)(first + r) * S;
            for (int j = 0; j < S; j++) bsrc[(size_t)r * S + j] = set[j] ? VOCAB_UNK : e->src[j];
            memcpy(btin + (size_t)r * T, e->tin, sizeof(int) * (size_t)T);
            /* only the wanted positions are scored: the rest cost no output projection */
            for (int t = 0; t < T; t++)
                btout[(size_t)r * T + t] = want[(size_t)(first + r) * T + t] ? e->tout[t] : VOCAB_PAD;
            sl[r] = S, tl[r] = T;
        }
        ModelBatch b = {B, S, T, bsrc, sl, btin, btout, tl, 0};
        model_forward(m, &b, 0, 0, 0);
        for (int r = 0; r < B; r++)
            for (int t = 0; t < T; t++) {
                if (!want[(size_t)(first + r) * T + t]) continue;
                model_row_log_probs(m, r * T + t, lp);
                out[(size_t)(first + r) * T + t] = lp[e->tout[t]];
            }
    }
    free(bsrc), free(btin), free(btout), free(sl), free(tl), free(lp);
}

void explain_pair(Model *m, const Vocab *sv, const Vocab *tv, const int *src, int ns, const int *tgt, int nt,
                  const ExplainOptions *o, PairExplanation *e) {
    memset(e, 0, sizeof *e);
    int S = ns + 1, T = nt + 1;
    e->S = S, e->T = T;
    e->src = xmalloc(sizeof(int) * (size_t)S);
    e->tin = xmalloc(sizeof(int) * (size_t)T);
    e->tout = xmalloc(sizeof(int) * (size_t)T);
    batch_frame_source(src, ns, e->src, S);
    batch_frame_target(tgt, nt, e->tin, e->tout, T);
    /* the weights, and the contributions from the same pass while it is in the arena */
    attnmap_capture(m, sv, tv, src, ns, tgt, nt, &e->maps);
    contrib_compute(m, S, T, &e->contrib);
    gradattr_compute(m, e->src, S, e->tin, e->tout, T, o->foil, o->ig_steps, &e->grad);
    /* leave-one-out: each source token alone as <unk>; the first set removes nothing */
    unsigned char *sets = xcalloc((size_t)S * S, 1), *want = xmalloc((size_t)S * T);
    float *lp = xmalloc(sizeof(float) * (size_t)S * T);
    for (int j = 0; j + 1 < S; j++) sets[(size_t)(j + 1) * S + j] = 1;
    memset(want, 1, (size_t)S * T);
    explain_removal_logp(m, e, sets, want, o->loo ? S : 1, lp);
    e->logp = xmalloc(sizeof(float) * (size_t)T);
    e->loo = xcalloc((size_t)T * S, sizeof(float));
    for (int t = 0; t < T; t++) {
        e->logp[t] = lp[t];
        for (int j = 0; o->loo && j + 1 < S; j++) e->loo[(size_t)t * S + j] = lp[t] - lp[(size_t)(j + 1) * T + t];
    }
    free(sets), free(want), free(lp);
}

void explain_pair_free(PairExplanation *e) {
    attnmap_free(&e->maps);
    contrib_free(&e->contrib);
    gradattr_free(&e->grad);
    free(e->src), free(e->tin), free(e->tout), free(e->loo), free(e->logp);
    memset(e, 0, sizeof *e);
}

const ExplainGradient explain_gradients[EXPLAIN_GRADIENTS] = {
    {"saliency", "|df/dx|: the gradient's length at the token's embedding"},
    {"x-gradient", "e . df/dx: signed, a token that speaks against the word ranks last"},
    {"x-gradient-l2", "|e * df/dx|_2: the magnitude (Inseq's L2 over the embedding), either way"},
    {"integrated-gradients", "e . df/dx averaged from a blank embedding: signed"},
};

const float *explain_gradient_scores(const GradAttr *g, int k) {
    const float *from[EXPLAIN_GRADIENTS] = {g->saliency, g->input_x_grad, g->input_x_grad_l2, g->ig};
    return from[k];
}

const char *explain_gradient_said(const char *name) {
    for (int k = 0; k < EXPLAIN_GRADIENTS; k++)
        if (strcmp(explain_gradients[k].name, name) == 0) return explain_gradients[k].score;
    return NULL;
}

static ExplainMethod *add(ExplainMethod *ms, int *n, int family, int T, int S, const char *fmt, int a, int b) {
    ExplainMethod *x = &ms[(*n)++];
    snprintf(x->name, sizeof x->name, fmt, a, b);
    x->family = family;
    x->scores = xcalloc((size_t)T * S, sizeof(float));
    return x;
}

int explain_methods(const PairExplanation *e, ExplainMethod **methods) {
    int S = e->S, T = e->T, W = S + T, L = e->maps.layers[ATTN_CROSS], H = e->maps.heads, n = 0;
    ExplainMethod *ms = xcalloc((size_t)(L * (H + 2) + 8), sizeof(ExplainMethod));
    float *avg = xmalloc(sizeof(float) * (size_t)T * S);
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < H; h++)
            memcpy(add(ms, &n, EXPLAIN_ATTENTION, T, S, "L%d.H%d", l, h)->scores,
                   attnmap_at(&e->maps, ATTN_CROSS, l, h), sizeof(float) * (size_t)T * S);
        attnmap_head_average(&e->maps, ATTN_CROSS, l, add(ms, &n, EXPLAIN_ATTENTION, T, S, "L%d.avg", l, 0)->scores);
    }
    for (int l = 0; l < L; l++) {
        /* shift-att: y_t is read at row t + 1 (the last row, EOS's, reads nothing after) */
        ExplainMethod *x = add(ms, &n, EXPLAIN_ATTENTION, T, S, "shift.L%d", l, 0);
        attnmap_head_average(&e->maps, ATTN_CROSS, l, avg);
        for (int t = 0; t < T; t++)
            memcpy(x->scores + (size_t)t * S, avg + (size_t)(t + 1 < T ? t + 1 : t) * S, sizeof(float) * (size_t)S);
    }
    ExplainMethod *x = add(ms, &n, EXPLAIN_CONTRIB, T, S, "contrib.layer", 0, 0);
    align_source_columns(contrib_last_cross(&e->contrib), T, S, x->scores);
    x = add(ms, &n, EXPLAIN_CONTRIB, T, S, "contrib.rollout", 0, 0);
    for (int t = 0; t < T; t++)
        memcpy(x->scores + (size_t)t * S, e->contrib.dec_roll + (size_t)t * W, sizeof(float) * S);
    for (int k = 0; k < EXPLAIN_GRADIENTS; k++) {
        x = add(ms, &n, EXPLAIN_GRADIENT, T, S, explain_gradients[k].name, 0, 0);
        const float *from = explain_gradient_scores(&e->grad, k);
        for (int t = 0; t < T; t++) memcpy(x->scores + (size_t)t * S, from + (size_t)t * W, sizeof(float) * S);
    }
    memcpy(add(ms, &n, EXPLAIN_LOO, T, S, "leave-one-out", 0, 0)->scores, e->loo, sizeof(float) * (size_t)T * S);
    free(avg);
    *methods = ms;
    return n;
}

void explain_methods_free(ExplainMethod *methods, int n) {
    for (int i = 0; i < n; i++) free(methods[i].scores);
    free(methods);
}
