/* heads tests: the analysis behind `qkv heads` (heads/headscore.h, headcurve.h): a head
 * that adds nothing scores exactly nothing; the gradient score is the derivative it claims
 * to be; a head built to attend to the previous position is found and labelled so; the
 * Spearman correlation and the role counts on hand-made numbers; the removal orders and
 * the mask text. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data/corpus.h"
#include "decode/headmask.h"
#include "decode/translator.h"
#include "fixture.h"
#include "heads/headcurve.h"
#include "heads/headscore.h"
#include "nn/model.h"
#include "util/axis.h"
#include "util/mem.h"
#include "util/rng.h"
#include "util/text.h"

enum { VOCAB = 20, D = 32, HEADS = 4, DH = D / HEADS, MAXPOS = 24, N_SET = 6 };

static void heads_model(Model *m, uint64_t seed) {
    ModelConfig cfg = fixture_config(VOCAB, VOCAB, D, HEADS, 48, 2, 2, MAXPOS);
    cfg.tie_embeddings = 0, cfg.dropout = 0.1f, cfg.label_smoothing = 0.1f;
    model_init(m, &cfg);
    model_init_weights(m, seed);
    Rng r = {seed + 5}; /* off the special point of unit norms and zero biases */
    for (size_t i = 0; i < m->n_params; i++) m->params[i] += 0.05f * rng_normal(&r);
}

/* n pairs of 3..10 random ids (4..VOCAB-1) each side; free_set frees them. */
static void make_set(Seq *src, Seq *ref, int n, uint64_t seed) {
    Rng r = {seed};
    for (int i = 0; i < n; i++) {
        Seq *side[2] = {&src[i], &ref[i]};
        for (int s = 0; s < 2; s++) {
            side[s]->len = 3 + (int)rng_below(&r, 8);
            side[s]->ids = xmalloc(sizeof(int) * (size_t)side[s]->len);
            for (int t = 0; t < side[s]->len; t++) side[s]->ids[t] = 4 + (int)rng_below(&r, VOCAB - 4);
        }
    }
}

static void free_set(Seq *src, Seq *ref, int n) {
    for (int i = 0; i < n; i++) free(src[i].ids), free(ref[i].ids);
}

/* (a) A head whose rows of W_O are zero adds nothing to its sub-layer's output: its
 * gradient score and its dNLL are exactly 0, whatever its weights; the other heads' are
 * not (so the check can fail). Label smoothing is restored and the gates left off. */
static void test_heads_zero_w_o_head_scores_exactly_zero(void) {
    Model m;
    heads_model(&m, 3);
    const int kinds[2] = {ATTN_CROSS, ATTN_ENC_SELF}, layers[2] = {1, 0}, hs[2] = {2, 1};
    for (int z = 0; z < 2; z++) {
        float *w_o = model_attention_params(&m, (AttnKind)kinds[z], layers[z])->w_o; /* (d, d): rows are ctx's */
        memset(w_o + (size_t)hs[z] * DH * D, 0, sizeof(float) * DH * D);
    }
    Seq src[N_SET], ref[N_SET];
    make_set(src, ref, N_SET, 11);
    HeadSet set = {N_SET, src, ref};
    int nh = model_head_count(&m);
    HeadStats *st = xcalloc((size_t)nh, sizeof(HeadStats));
    double base = 0.0;
    heads_score(&m, &set, NULL, 2, st, &base);
    int others = 0;
    for (int i = 0; i < nh; i++) others += st[i].importance_raw > 0.0 && st[i].delta_nll != 0.0;
    float smoothing = m.cfg.label_smoothing;
    int gated = model_head_gate_grads(&m) != NULL;
    double raw[2], imp[2], dnll[2];
    for (int z = 0; z < 2; z++) {
        const HeadStats *h = &st[model_head_index(&m, (AttnKind)kinds[z], layers[z], hs[z])];
        raw[z] = h->importance_raw, imp[z] = h->importance, dnll[z] = h->delta_nll;
    }
    free(st), free_set(src, ref, N_SET), model_free(&m);
    for (int z = 0; z < 2; z++)
        CHECK(raw[z] == 0.0 && imp[z] == 0.0 && dnll[z] == 0.0,
              "kind %d: the zero-W_O head scores raw %g, importance %g, dNLL %g", kinds[z], raw[z], imp[z], dnll[z]);
    CHECK(others == nh - 2, "%d of the %d other heads have a score and a dNLL", others, nh - 2);
    CHECK(base > 0.0 && smoothing == 0.1f && !gated, "base NLL %g, smoothing %g after, gates %s", base, smoothing,
          gated ? "left on" : "off");
}

/* The gradient score is |dL/dgate| with L the sentence's NLL summed over its tokens:
 * against central differences of reference_nll (a sum) with the gate moved, one sentence. */
static void test_heads_importance_is_the_summed_nll_gradient(void) {
    Model m;
    heads_model(&m, 7);
    Seq src[1], ref[1];
    make_set(src, ref, 1, 23);
    HeadSet set = {1, src, ref};
    int nh = model_head_count(&m);
    HeadStats *st = xcalloc((size_t)nh, sizeof(HeadStats));
    heads_score(&m, &set, NULL, 1, st, NULL);
    float *gates = xmalloc(sizeof(float) * (size_t)nh);
    double worst = 0.0, largest = 0.0;
    for (int i = 0; i < nh; i++) {
        double best = INFINITY;
        for (int s = 0; s < 2; s++) { /* two steps, the better kept (a ReLU kink spoils one) */
            float eps = s ? 2.5e-4f : 1e-3f;
            long long tokens;
            for (int j = 0; j < nh; j++) gates[j] = 1.0f;
            gates[i] = 1.0f + eps, model_set_head_gates(&m, gates);
            double lp = reference_nll(&m, src, ref, 1, &tokens);
            gates[i] = 1.0f - eps, model_set_head_gates(&m, gates);
            double lm = reference_nll(&m, src, ref, 1, &tokens);
            double num = fabs((lp - lm) / (2.0 * eps)), err = fabs(num - st[i].importance_raw) / fmax(num, 1e-2);
            if (err < best) best = err;
        }
        if (best > worst) worst = best;
        if (st[i].importance_raw > largest) largest = st[i].importance_raw;
    }
    model_set_head_gates(&m, NULL);
    free(st), free(gates), free_set(src, ref, 1), model_free(&m);
    CHECK(largest > 1e-2, "every score is ~0 (%g): the check would pass on nothing", largest);
    CHECK(worst < 1e-2, "gradient score off the summed NLL's derivative by %.3g (relative)", worst);
}

/* The set runs in batches sorted by length, shared among threads; each row's gate
 * gradient is its own sentence's. So the scores of a set of several batches, on 1 and on
 * 3 threads, equal those of its sentences scored one at a time: importance the mean of
 * theirs (a batch's summed gradient, abs taken after, would differ), dNLL their
 * token-weighted mean, confidence their query-weighted mean. */
static void test_heads_batched_scores_equal_one_sentence_at_a_time(void) {
    enum { N = 240 }; /* padded source + target <= 22 tokens: 93 rows a batch at most, so 3+ batches */
    Model m;
    heads_model(&m, 13);
    Seq src[N], ref[N];
    make_set(src, ref, N, 41);
    int nh = model_head_count(&m);
    HeadStats *one = xcalloc((size_t)nh, sizeof(HeadStats)), *all[2];
    double *raw = xcalloc((size_t)nh, sizeof(double)), *dnll = xcalloc((size_t)nh, sizeof(double));
    double *conf = xcalloc((size_t)nh, sizeof(double));
    long long tokens = 0, queries = 0;
    for (int i = 0; i < N; i++) {
        heads_score(&m, &(HeadSet){1, &src[i], &ref[i]}, NULL, 1, one, NULL);
        for (int h = 0; h < nh; h++) {
            int q = one[h].kind == ATTN_ENC_SELF ? src[i].len + 1 : ref[i].len + 1;
            raw[h] += one[h].importance_raw / N, dnll[h] += one[h].delta_nll * (ref[i].len + 1);
            conf[h] += one[h].confidence * q;
        }
        tokens += ref[i].len + 1, queries += src[i].len + 1;
    }
    double worst[2][3] = {{0}};
    for (int t = 0; t < 2; t++) {
        all[t] = xcalloc((size_t)nh, sizeof(HeadStats));
        heads_score(&m, &(HeadSet){N, src, ref}, NULL, t ? 3 : 1, all[t], NULL);
        for (int h = 0; h < nh; h++) {
            double q = all[t][h].kind == ATTN_ENC_SELF ? (double)queries : (double)tokens;
            double e[3] = {fabs(all[t][h].importance_raw - raw[h]) / fmax(raw[h], 1e-3),
                           fabs(all[t][h].delta_nll - dnll[h] / tokens) / fmax(fabs(dnll[h] / tokens), 1e-4),
                           fabs(all[t][h].confidence - conf[h] / q)};
            for (int k = 0; k < 3; k++)
                if (e[k] > worst[t][k]) worst[t][k] = e[k];
        }
    }
    double spread = 0.0; /* the check can fail: the scores differ from head to head */
    for (int h = 1; h < nh; h++) spread = fmax(spread, fabs(all[0][h].importance_raw - all[0][0].importance_raw));
    free(one), free(all[0]), free(all[1]), free(raw), free(dnll), free(conf), free_set(src, ref, N), model_free(&m);
    for (int t = 0; t < 2; t++)
        CHECK(worst[t][0] < 1e-3 && worst[t][1] < 1e-3 && worst[t][2] < 1e-5,
              "%d thread(s): importance off by %.3g, dNLL by %.3g, confidence by %.3g", t ? 3 : 1, worst[t][0],
              worst[t][1], worst[t][2]);
    CHECK(spread > 1e-2, "every head scores alike (spread %g)", spread);
}

/* (b) With zero token embeddings the encoder's input is the sinusoidal table alone:
 * x_i = PE(i) (post-LN: layer 0 attends to x itself; no dropout in the analysis). Head 0
 * of encoder layer 0 owns columns 0..7, the table's first four (sin, cos) pairs, of
 * frequencies w_k = 10000^(-2k/d). W_Q rotates each pair back by one position, so
 * q_i = PE(i-1) there; W_K is alpha times the identity on those columns, so k_j = alpha
 * PE(j). Then q_i . k_j = alpha sum_k cos((i-1-j) w_k), largest at j = i-1, by at least
 * alpha (4 - 3.32) over any other j (d = 32: the next best is |i-1-j| = 1). */
static void previous_position_head(Model *m) {
    heads_model(m, 5);
    memset(m->p.src_embed, 0, sizeof(float) * VOCAB * D);
    const AttnParams *w = model_attention_params(m, ATTN_ENC_SELF, 0);
    const float alpha = 40.0f;
    for (int r = 0; r < D; r++)
        for (int c = 0; c < DH; c++) w->w_q[(size_t)r * D + c] = w->w_k[(size_t)r * D + c] = 0.0f;
    for (int c = 0; c < DH; c++) w->b_q[c] = w->b_k[c] = 0.0f, w->w_k[(size_t)c * D + c] = alpha;
    for (int k = 0; k < DH / 2; k++) {
        double f = exp(-log(10000.0) * (2.0 * k) / D);
        /* (sin iw, cos iw) -> (sin (i-1)w, cos (i-1)w) as a row vector times the block */
        w->w_q[(size_t)(2 * k) * D + 2 * k] = (float)cos(f);
        w->w_q[(size_t)(2 * k + 1) * D + 2 * k] = (float)-sin(f);
        w->w_q[(size_t)(2 * k) * D + 2 * k + 1] = (float)sin(f);
        w->w_q[(size_t)(2 * k + 1) * D + 2 * k + 1] = (float)cos(f);
    }
}

static void test_heads_previous_position_head_is_labelled_previous(void) {
    Model m;
    previous_position_head(&m);
    Seq src[N_SET], ref[N_SET];
    make_set(src, ref, N_SET, 31);
    src[0].len = 3; /* and the longest source the table allows */
    free(src[1].ids);
    src[1].len = MAXPOS - 2;
    src[1].ids = xmalloc(sizeof(int) * (size_t)src[1].len);
    for (int t = 0; t < src[1].len; t++) src[1].ids[t] = 4 + t % (VOCAB - 4);
    /* the construction itself: every query i >= 1 of the longest source puts its largest
     * weight on i-1, with almost all of the weight */
    int S = src[1].len + 1, *framed = xmalloc(sizeof(int) * (size_t)S), tin[2] = {1, 5}, tout[2] = {5, 2}, T = 2;
    memcpy(framed, src[1].ids, sizeof(int) * (size_t)src[1].len);
    framed[S - 1] = 2;
    ModelBatch b = {1, S, T, framed, &S, tin, tout, &T, 0};
    model_reserve(&m, model_arena_floats(&m, 1, S, T));
    model_forward(&m, &b, 0, 0, 0);
    const float *p = model_attention_acts(&m, ATTN_ENC_SELF, 0)->p; /* head 0 first: (S, S) */
    int wrong = -1;
    float least = 1.0f;
    for (int i = 1; i < S && wrong < 0; i++) {
        for (int j = 0; j < S; j++)
            if (p[(size_t)i * S + j] > p[(size_t)i * S + i - 1]) wrong = i;
        if (p[(size_t)i * S + i - 1] < least) least = p[(size_t)i * S + i - 1];
    }
    free(framed);
    int nh = model_head_count(&m);
    HeadStats *st = xcalloc((size_t)nh, sizeof(HeadStats));
    heads_score(&m, &(HeadSet){N_SET, src, ref}, NULL, 2, st, NULL);
    HeadStats h = st[model_head_index(&m, ATTN_ENC_SELF, 0, 0)];
    int others = 0; /* heads of random weights called previous */
    for (int i = 1; i < nh; i++) others += (st[i].roles & HEAD_ROLE_PREVIOUS) != 0;
    int queries = 0;
    for (int i = 0; i < N_SET; i++) queries += src[i].len + 1;
    free(st), free_set(src, ref, N_SET), model_free(&m);
    CHECK(wrong < 0, "query %d of the constructed head does not peak at i-1", wrong);
    CHECK(least > 0.99f, "the constructed head puts only %.3f on i-1", least);
    /* query 0 has no i-1: its nearest, PE(0), is itself, once a sentence */
    CHECK(h.previous == 1.0 && h.current == (double)N_SET / queries, "previous share %.3f, current %.3f", h.previous,
          h.current);
    /* Voita's previous, and relative to the seven heads of random weights beside it */
    CHECK((h.roles & HEAD_ROLE_PREVIOUS) && (h.roles & HEAD_ROLE_REL_PREVIOUS) && (h.roles & HEAD_ROLE_TOP_PREVIOUS) &&
              strcmp(h.role, "previous+rel:previous+top:previous") == 0,
          "role '%s'", h.role);
    CHECK(h.confidence > 0.95, "confidence %.3f", h.confidence);
    CHECK(others == 0, "%d heads of random weights labelled previous", others);
}

/* (c) Spearman: Pearson's correlation of the ranks, ties sharing their mean rank. */
static void test_heads_spearman_known_values(void) {
    const double a[5] = {1, 2, 3, 4, 5}, b[5] = {5, 6, 7, 8, 7}, rev[5] = {9, 7, 5, 3, 1}, flat[5] = {2, 2, 2, 2, 2};
    const double c[4] = {10, 20, 20, 30}, e[4] = {1, 3, 2, 4};
    /* b's ranks: 1, 2, 3.5, 5, 3.5; rank deviations (-2,-1,0,1,2) and (-2,-1,.5,2,.5):
     * 8 / sqrt(10 * 9.5) */
    double r = heads_spearman(a, b, 5);
    CHECK(fabs(r - 8.0 / sqrt(95.0)) < 1e-12, "ties: %.15f, want %.15f", r, 8.0 / sqrt(95.0));
    CHECK(fabs(heads_spearman(a, a, 5) - 1.0) < 1e-12 && fabs(heads_spearman(a, rev, 5) + 1.0) < 1e-12,
          "identical %.6f, reversed %.6f", heads_spearman(a, a, 5), heads_spearman(a, rev, 5));
    /* c's ranks 1, 2.5, 2.5, 4 against 1, 3, 2, 4: deviations (-1.5,0,0,1.5) and
     * (-1.5,.5,-.5,1.5): 4.5 / sqrt(4.5 * 5) */
    r = heads_spearman(c, e, 4);
    CHECK(fabs(r - 4.5 / sqrt(22.5)) < 1e-12, "ties in the other: %.15f", r);
    CHECK(isnan(heads_spearman(a, flat, 5)) && isnan(heads_spearman(a, b, 1)), "a constant side or n < 2 is not NAN");
}

/* (d) The role counts on hand-made maps. */
static void test_heads_roles_on_hand_made_maps(void) {
    /* encoder self-attention, 4 queries: query 0 on itself, 1..3 on their previous key;
     * the rarest source token at key 2 */
    const float enc[16] = {0.7f, 0.1f, 0.1f, 0.1f, /* top 0 = i */
                           0.6f, 0.2f, 0.1f, 0.1f, /* top 0 = i-1 */
                           0.1f, 0.8f, 0.1f, 0.0f, /* top 1 = i-1 */
                           0.0f, 0.0f, 0.5f, 0.5f /* a tie: the first, 2 = i-1 */};
    const unsigned char rarest[4] = {0, 0, 1, 0};
    HeadRoleCounts c = {0};
    heads_roles_add(&c, ATTN_ENC_SELF, enc, 4, 4, 4, rarest);
    HeadStats h = {.kind = ATTN_ENC_SELF, .aer = NAN};
    heads_roles_finish(&c, &h);
    double ent = 0.0;
    for (int i = 0; i < 16; i++) ent -= enc[i] > 0.0f ? (double)enc[i] * log((double)enc[i]) : 0.0;
    CHECK(h.previous == 1.0 && h.current == 0.25 && h.next == 0.0, "positional %.3f %.3f %.3f", h.previous, h.current,
          h.next);
    CHECK(h.rare == 0.25, "rare %.3f (one top of four on key 2)", h.rare);
    CHECK(fabs(h.confidence - (0.7 + 0.6 + 0.8 + 0.5) / 4) < 1e-6, "confidence %.6f", h.confidence);
    CHECK(fabs(h.entropy - ent / 4) < 1e-6, "entropy %.6f, want %.6f (nats)", h.entropy, ent / 4);
    CHECK(strcmp(h.role, "previous") == 0 && h.roles == HEAD_ROLE_PREVIOUS, "role '%s'", h.role);
    /* the sink share: queries 0 and 1 top on key 0, none on the EOS (key 3) */
    CHECK(h.sink == 0.5, "sink %.3f, want 2 of 4", h.sink);
    /* a second sentence adds to the same counts: 2 queries on themselves, query 1 on the
     * last key (its EOS) */
    const float two[4] = {1.0f, 0.0f, 0.0f, 1.0f};
    heads_roles_add(&c, ATTN_ENC_SELF, two, 2, 2, 2, NULL);
    heads_roles_finish(&c, &h);
    CHECK(h.previous == 0.75 && h.current == 0.5 && h.next == 0.0 && h.rare == 0.25,
          "after a second sentence: %.3f %.3f %.3f rare %.3f", h.previous, h.current, h.next, h.rare);
    CHECK(fabs(h.sink - 4.0 / 6.0) < 1e-12 && strcmp(h.role, "sink") == 0 && h.roles == HEAD_ROLE_SINK,
          "sink %.3f (4 of 6), role '%s': below every positional threshold, at the sink's", h.sink, h.role);
    /* cross-attention, 3 target queries over 3 source keys: no positions; 2 of 3 tops on
     * the rarest (key 1) */
    const float cross[9] = {0.2f, 0.7f, 0.1f, 0.1f, 0.3f, 0.6f, 0.3f, 0.4f, 0.3f};
    const unsigned char r1[3] = {0, 1, 0};
    HeadRoleCounts cc = {0};
    heads_roles_add(&cc, ATTN_CROSS, cross, 3, 3, 3, r1);
    HeadStats x = {.kind = ATTN_CROSS, .aer = 0.5};
    heads_roles_finish(&cc, &x);
    CHECK(isnan(x.previous) && isnan(x.current) && isnan(x.next), "cross-attention has positional shares");
    CHECK(fabs(x.sink - 1.0 / 3.0) < 1e-12, "cross sink %.3f: one top of three on the last source key", x.sink);
    CHECK(fabs(x.rare - 2.0 / 3.0) < 1e-12 && strcmp(x.role, "rare+aligns") == 0, "rare %.3f, role '%s'", x.rare,
          x.role);
    /* decoder self-attention: causal maps, no rare share; a current head */
    const float dec[9] = {1.0f, 0.0f, 0.0f, 0.1f, 0.9f, 0.0f, 0.1f, 0.1f, 0.8f};
    HeadRoleCounts dc = {0};
    heads_roles_add(&dc, ATTN_DEC_SELF, dec, 3, 3, 3, NULL);
    HeadStats y = {.kind = ATTN_DEC_SELF, .aer = NAN};
    heads_roles_finish(&dc, &y);
    CHECK(y.current == 1.0 && y.next == 0.0 && y.previous == 0.0 && isnan(y.rare) && strcmp(y.role, "current") == 0,
          "decoder: %.3f %.3f %.3f rare %.3f role '%s'", y.previous, y.current, y.next, y.rare, y.role);
    /* its first query has BOS only: no choice, not counted; the others top on themselves */
    CHECK(y.sink == 0.0, "decoder sink %.3f: query 0 counted, or the last key taken for an EOS", y.sink);
    /* the thresholds, at and just under */
    HeadStats t = {.kind = ATTN_ENC_SELF,
                   .previous = HEADS_POSITIONAL_SHARE,
                   .current = 0.79,
                   .next = NAN,
                   .rare = HEADS_RARE_SHARE,
                   .aer = 0.1};
    heads_label(&t);
    CHECK(strcmp(t.role, "previous+rare") == 0, "at the thresholds: '%s' (AER counts for cross only)", t.role);
    t.kind = ATTN_CROSS, t.previous = NAN, t.rare = 0.49, t.aer = HEADS_ALIGN_AER + 1e-9, t.sink = 0.59;
    heads_label(&t);
    CHECK(t.role[0] == '\0', "just past the thresholds: '%s'", t.role);
    t.sink = HEADS_SINK_SHARE;
    heads_label(&t);
    CHECK(strcmp(t.role, "sink") == 0, "at the sink threshold: '%s'", t.role);
}

/* A square map of n queries (stride n) of kind counted into *c, then finished: the head's
 * stats (no AER). */
static HeadStats roles_of(HeadRoleCounts *c, int kind, const float *p, int n) {
    *c = (HeadRoleCounts){0};
    heads_roles_add(c, kind, p, n, n, n, NULL);
    HeadStats h = {.kind = kind, .aer = NAN};
    heads_roles_finish(c, &h);
    return h;
}

/* The sink share on maps built for it: a decoder head on BOS, an encoder head on EOS, a
 * cross head on the first source token; and one that looks like a sink only by chance of
 * the first query. */
static void test_heads_sink_share_on_hand_made_maps(void) {
    /* decoder self, 4 queries (causal): query 0 sees BOS only (not counted); 1 and 3 top on
     * BOS, 2 on itself: 2 of 3 */
    const float dec[16] = {1.0f, 0.0f, 0.0f, 0.0f, 0.7f, 0.3f, 0.0f, 0.0f,
                           0.2f, 0.2f, 0.6f, 0.0f, 0.4f, 0.2f, 0.2f, 0.2f};
    HeadRoleCounts c;
    HeadStats d = roles_of(&c, ATTN_DEC_SELF, dec, 4);
    CHECK(c.sink_n == 3 && c.sink_hits == 2 && fabs(d.sink - 2.0 / 3.0) < 1e-12 && (d.roles & HEAD_ROLE_SINK),
          "decoder: %lld of %lld, sink %.4f, role '%s'", c.sink_hits, c.sink_n, d.sink, d.role);
    /* the decoder's last key is a target word, not an EOS: a head on its own position at
     * the last query is no sink */
    const float dec_last[4] = {1.0f, 0.0f, 0.1f, 0.9f};
    HeadRoleCounts c2;
    roles_of(&c2, ATTN_DEC_SELF, dec_last, 2);
    CHECK(c2.sink_n == 1 && c2.sink_hits == 0, "decoder's last key counted as a sink (%lld)", c2.sink_hits);
    /* encoder self, 3 tokens + EOS: queries 0..2 top on EOS (key 3), query 3 on key 1 */
    const float enc[16] = {0.1f, 0.1f, 0.1f, 0.7f, 0.1f, 0.2f, 0.1f, 0.6f,
                           0.2f, 0.1f, 0.1f, 0.6f, 0.1f, 0.5f, 0.2f, 0.2f};
    HeadRoleCounts e;
    HeadStats h = roles_of(&e, ATTN_ENC_SELF, enc, 4);
    CHECK(h.sink == 0.75 && strcmp(h.role, "sink") == 0, "encoder on EOS: sink %.3f, role '%s'", h.sink, h.role);
    /* cross, 3 target queries over 2 source tokens + EOS: all on the first source token */
    const float cross[9] = {0.8f, 0.1f, 0.1f, 0.5f, 0.3f, 0.2f, 0.9f, 0.0f, 0.1f};
    HeadRoleCounts x;
    HeadStats xs = roles_of(&x, ATTN_CROSS, cross, 3);
    CHECK(xs.sink == 1.0 && (xs.roles & HEAD_ROLE_SINK), "cross on the first token: sink %.3f", xs.sink);
    /* the middle key is neither: 0 of 3 */
    const float mid[9] = {0.1f, 0.8f, 0.1f, 0.2f, 0.6f, 0.2f, 0.3f, 0.4f, 0.3f};
    HeadRoleCounts z;
    roles_of(&z, ATTN_CROSS, mid, 3);
    CHECK(z.sink_n == 3 && z.sink_hits == 0, "the middle key counted as a sink (%lld of %lld)", z.sink_hits, z.sink_n);
}

/* The relative rule on hand-made shares: eight encoder heads, one far out on previous;
 * the kind's top head named; the floor; a kind's heads compared among themselves only;
 * Voita's roles and the sink kept. */
static void test_heads_relative_roles(void) {
    HeadStats st[12];
    memset(st, 0, sizeof st);
    /* encoder: previous shares 0.1 x 7 and 0.5: mean 0.15, sd sqrt(7 * 0.05^2 + 0.35^2) / sqrt 8
     * = 0.1323, bar 0.4146: 0.5 passes (below Voita's 0.8) */
    for (int i = 0; i < 8; i++) {
        st[i] = (HeadStats){.kind = ATTN_ENC_SELF,
                            .index = i,
                            .previous = 0.1,
                            .current = 0.05 + 0.01 * i,
                            .next = 0.02,
                            .rare = 0.0,
                            .aer = NAN};
    }
    st[3].previous = 0.5;
    st[5].rare = 0.2; /* far out, but under the 0.3 floor: top only */
    /* decoder: current 0.9 (Voita's) in one of four; the rest 0.85: not far out relative to them */
    for (int i = 8; i < 12; i++)
        st[i] = (HeadStats){.kind = ATTN_DEC_SELF,
                            .index = i,
                            .previous = 0.05,
                            .current = 0.85,
                            .next = 0.0,
                            .rare = NAN,
                            .aer = NAN,
                            .sink = 0.7};
    st[9].current = 0.9;
    for (int i = 0; i < 12; i++) heads_label(&st[i]);
    heads_label_relative(st, 12);
    CHECK(st[3].roles == (HEAD_ROLE_REL_PREVIOUS | HEAD_ROLE_TOP_PREVIOUS) &&
              strcmp(st[3].role, "rel:previous+top:previous") == 0,
          "the outlier: '%s'", st[3].role);
    int others = 0;
    for (int i = 0; i < 8; i++) others += i != 3 && (st[i].roles & (HEAD_ROLE_REL_PREVIOUS | HEAD_ROLE_TOP_PREVIOUS));
    CHECK(others == 0, "%d other encoder heads called previous", others);
    CHECK((st[5].roles & HEAD_ROLE_TOP_RARE) && !(st[5].roles & HEAD_ROLE_REL_RARE), "under the floor: '%s'",
          st[5].role);
    /* current rises with the index: the top is head 7, and 0.12 is under the floor */
    CHECK((st[7].roles & HEAD_ROLE_TOP_CURRENT) && !(st[7].roles & HEAD_ROLE_REL_CURRENT), "encoder current: '%s'",
          st[7].role);
    /* next is 0.02 everywhere: no spread, no top, no outlier */
    int next = 0;
    for (int i = 0; i < 12; i++) next += (st[i].roles & (HEAD_ROLE_TOP_NEXT | HEAD_ROLE_REL_NEXT)) != 0;
    CHECK(next == 0, "%d heads named for a share every head of the kind has alike", next);
    /* decoder: mean 0.8625, sd 0.0217, bar 0.9058: 0.9 is the top but no outlier; it keeps
     * Voita's current and the sink */
    CHECK(st[9].roles == (HEAD_ROLE_CURRENT | HEAD_ROLE_TOP_CURRENT | HEAD_ROLE_SINK) &&
              strcmp(st[9].role, "current+top:current+sink") == 0,
          "decoder top: '%s'", st[9].role);
    /* relabelling keeps the relative roles, and they are recomputed, not added to */
    heads_label(&st[3]);
    heads_label_relative(st, 12);
    CHECK(strcmp(st[3].role, "rel:previous+top:previous") == 0, "after relabelling: '%s'", st[3].role);
    /* under the floor, however far out: top only */
    st[3].previous = 0.29;
    heads_label_relative(st, 12);
    CHECK(!(st[3].roles & HEAD_ROLE_REL_PREVIOUS) && (st[3].roles & HEAD_ROLE_TOP_PREVIOUS), "0.29 passes: '%s'",
          st[3].role);
    /* two heads alike at 0.5 among six at 0.1: mean 0.2, sd 0.1732, bar 0.546: neither is
     * far out; the top is the first by number */
    st[2].previous = st[3].previous = 0.5;
    heads_label_relative(st, 12);
    CHECK(!((st[2].roles | st[3].roles) & HEAD_ROLE_REL_PREVIOUS) && (st[2].roles & HEAD_ROLE_TOP_PREVIOUS) &&
              !(st[3].roles & HEAD_ROLE_TOP_PREVIOUS),
          "two alike: '%s', '%s'", st[2].role, st[3].role);
}

/* The default order, on hand-made curves: the area is the trapezoids' mean BLEU; the raw
 * score's curve, largest over all heads, wins though importance's wins in a kind's scope
 * and random's is larger still; ties go to delta_nll, then importance_raw; no curve is
 * delta_nll. */
static void test_heads_default_order_by_area(void) {
    static const int pcts[HEADS_CURVE_POINTS] = {0, 10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 90, 100};
    HeadCurves c;
    memset(&c, 0, sizeof c);
    /* over all heads: BLEU = top - drop * pct / 100 in each order, random flat at 60 */
    const double drop[HEADS_ORDERS] = {40.0, 20.0, 30.0, 0.0};
    for (int o = 0; o < HEADS_ORDERS; o++) {
        HeadCurve *cv = &c.curves[c.n_curves++];
        cv->order = o, cv->scope = HEADS_SCOPE_ALL, cv->heads = 24;
        for (int k = 0; k < HEADS_CURVE_POINTS; k++)
            cv->points[k].pct = pcts[k],
            cv->points[k].bleu = o == HEADS_ORDER_RANDOM ? 60.0 : 50.0 - drop[o] * pcts[k] / 100;
    }
    /* a kind's scope where importance is best: not counted */
    HeadCurve *cv = &c.curves[c.n_curves++];
    cv->order = HEADS_ORDER_IMPORTANCE, cv->scope = ATTN_CROSS, cv->heads = 8;
    for (int k = 0; k < HEADS_CURVE_POINTS; k++) cv->points[k].pct = pcts[k], cv->points[k].bleu = 99.0;
    double areas[HEADS_ORDERS];
    int won = heads_default_order(&c, areas);
    /* a straight line's trapezoids are exact: 50 - drop / 2 */
    CHECK(fabs(areas[HEADS_ORDER_IMPORTANCE] - 30.0) < 1e-9 && fabs(areas[HEADS_ORDER_IMPORTANCE_RAW] - 40.0) < 1e-9 &&
              fabs(areas[HEADS_ORDER_DELTA_NLL] - 35.0) < 1e-9 && fabs(areas[HEADS_ORDER_RANDOM] - 60.0) < 1e-9,
          "areas %.4f %.4f %.4f %.4f", areas[0], areas[1], areas[2], areas[3]);
    CHECK(won == HEADS_ORDER_IMPORTANCE_RAW, "%s won, not importance_raw (random is no candidate)",
          heads_order_name(won));
    /* not a plain mean of the points: a dip at 25% alone (between 20 and 30) weighs 5 of 100 */
    c.curves[HEADS_ORDER_IMPORTANCE_RAW].points[3].bleu -= 10.0;
    double mean = 0.0;
    for (int k = 0; k < HEADS_CURVE_POINTS; k++) mean += c.curves[HEADS_ORDER_IMPORTANCE_RAW].points[k].bleu;
    won = heads_default_order(&c, areas);
    CHECK(fabs(areas[HEADS_ORDER_IMPORTANCE_RAW] - 39.5) < 1e-9 && fabs(mean / HEADS_CURVE_POINTS - 39.5) > 0.1,
          "trapezoids: %.4f, want 39.5", areas[HEADS_ORDER_IMPORTANCE_RAW]);
    CHECK(won == HEADS_ORDER_IMPORTANCE_RAW, "%s won after the dip", heads_order_name(won));
    /* a tie after rounding to 4 decimals goes to delta_nll */
    for (int k = 0; k < HEADS_CURVE_POINTS; k++)
        c.curves[HEADS_ORDER_DELTA_NLL].points[k].bleu = c.curves[HEADS_ORDER_IMPORTANCE_RAW].points[k].bleu + 1e-7;
    won = heads_default_order(&c, areas);
    CHECK(won == HEADS_ORDER_DELTA_NLL, "tie: %s won, not delta_nll", heads_order_name(won));
    /* importance_raw and importance tied above delta_nll: importance_raw */
    c.curves[HEADS_ORDER_IMPORTANCE] = c.curves[HEADS_ORDER_IMPORTANCE_RAW];
    c.curves[HEADS_ORDER_IMPORTANCE].order = HEADS_ORDER_IMPORTANCE;
    c.curves[HEADS_ORDER_DELTA_NLL].points[5].bleu -= 5.0;
    won = heads_default_order(&c, areas);
    CHECK(won == HEADS_ORDER_IMPORTANCE_RAW, "tie of the gradient scores: %s won", heads_order_name(won));
    /* no curve: delta_nll, the areas unknown */
    won = heads_default_order(NULL, areas);
    CHECK(won == HEADS_ORDER_DELTA_NLL && isnan(areas[0]) && isnan(areas[HEADS_ORDER_RANDOM]), "no curve: %s",
          heads_order_name(won));
    CHECK(heads_order_of("importance_raw") == HEADS_ORDER_IMPORTANCE_RAW && heads_order_of("default") < 0 &&
              heads_order_of(NULL) < 0,
          "order names do not read back");
}

/* The removal orders: importance increasing (ties by the raw score), a kind's own heads
 * only; random a permutation that only the seed moves. The mask text reads back. */
static void test_heads_removal_order_and_mask_text(void) {
    Model m;
    heads_model(&m, 9);
    int nh = model_head_count(&m);
    HeadStats *st = xcalloc((size_t)nh, sizeof(HeadStats));
    for (int i = 0; i < nh; i++) {
        st[i].index = i, st[i].kind = i < 8 ? ATTN_ENC_SELF : i < 16 ? ATTN_DEC_SELF : ATTN_CROSS;
        st[i].importance = (double)((i * 7) % nh) / nh, st[i].importance_raw = i;
        st[i].delta_nll = (double)((i * 5) % nh) / nh - 0.25; /* a head whose masking helps goes first */
    }
    st[5].importance = st[6].importance; /* a tie: the raw score decides */
    int order[64], again[64], other[64];
    int n = heads_removal_order(&m, st, HEADS_ORDER_IMPORTANCE, HEADS_SCOPE_ALL, 1, order);
    int sorted = n == nh;
    for (int i = 1; i < n; i++) sorted &= st[order[i - 1]].importance <= st[order[i]].importance;
    int five_first = 0;
    for (int i = 0; i < n; i++)
        if (order[i] == 5 || order[i] == 6) {
            five_first = order[i] == 5;
            break;
        }
    int by_raw[64], by_dnll[64], ranked[64];
    heads_removal_order(&m, st, HEADS_ORDER_IMPORTANCE_RAW, HEADS_SCOPE_ALL, 1, by_raw);
    heads_removal_order(&m, st, HEADS_ORDER_DELTA_NLL, HEADS_SCOPE_ALL, 1, by_dnll);
    heads_rank_order(st, nh, HEADS_ORDER_DELTA_NLL, ranked);
    int raw_ok = 1, dnll_ok = by_dnll[0] == 0, rank_ok = 1;
    for (int i = 0; i < nh; i++) raw_ok &= by_raw[i] == i, rank_ok &= ranked[i] == by_dnll[nh - 1 - i];
    for (int i = 1; i < nh; i++) dnll_ok &= st[by_dnll[i - 1]].delta_nll < st[by_dnll[i]].delta_nll;
    int k = heads_removal_order(&m, st, HEADS_ORDER_IMPORTANCE, ATTN_CROSS, 1, order);
    int cross_only = k == 8;
    for (int i = 0; i < k; i++) cross_only &= st[order[i]].kind == ATTN_CROSS;
    n = heads_removal_order(&m, st, HEADS_ORDER_RANDOM, HEADS_SCOPE_ALL, 42, order);
    heads_removal_order(&m, st, HEADS_ORDER_RANDOM, HEADS_SCOPE_ALL, 42, again);
    heads_removal_order(&m, st, HEADS_ORDER_RANDOM, HEADS_SCOPE_ALL, 43, other);
    int seen[64] = {0}, perm = n == nh, same = 1, moved = 0;
    for (int i = 0; i < n; i++) perm &= !seen[order[i]]++, same &= order[i] == again[i], moved |= order[i] != other[i];
    unsigned char removed[64] = {0};
    removed[model_head_index(&m, ATTN_CROSS, 1, 3)] = removed[model_head_index(&m, ATTN_ENC_SELF, 0, 0)] = 1;
    StrBuf sb = {0};
    sb_append(&sb, "", 0);
    heads_mask_text(&m, removed, &sb);
    float gates[64];
    int parsed = head_mask_parse(&m, sb.buf, gates), back = 1;
    for (int i = 0; i < nh; i++) back &= gates[i] == (removed[i] ? 0.0f : 1.0f);
    int text_ok = strcmp(sb.buf, "enc.0.0\ncross.1.3\n") == 0;
    sb_free(&sb);
    free(st), model_free(&m);
    CHECK(sorted && five_first, "importance order not increasing, or the tie not broken by the raw score");
    CHECK(cross_only, "a kind's order holds %d heads, not only its 8", k);
    CHECK(raw_ok && dnll_ok && rank_ok,
          "the raw order %d, dNLL increasing from the most negative %d, the ranking its reverse %d", raw_ok, dnll_ok,
          rank_ok);
    CHECK(perm && same && moved, "random order: permutation %d, same seed same %d, other seed moves %d", perm, same,
          moved);
    CHECK(text_ok && parsed == 2 && back, "mask text does not read back (%d heads parsed)", parsed);
}

/* The one tick rule of every chart (util/axis.h), which the pruning curve now shares with
 * the training curves and the report: round steps of 1, 2 or 5 times a power of ten, an
 * axis from 0 whose top is the first whole step at or above the highest value. */
static void test_axis_ticks(void) {
    struct {
        double top, step, axis_top;
        int ticks;
    } cases[] = {{37, 5, 40, 9},     {41.66, 10, 50, 6}, {1, 0.2, 1, 6},
                 {0.7, 0.1, 0.7, 8}, {100, 20, 100, 6},  {3, 0.5, 3, 7}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        double step = axis_tick_step(0, cases[i].top, 5), top = axis_top(cases[i].top, step);
        int n = axis_tick_count(0, top, step);
        CHECK(fabs(step - cases[i].step) < 1e-12 && fabs(top - cases[i].axis_top) < 1e-9 && n == cases[i].ticks &&
                  top >= cases[i].top,
              "top %g: step %g, axis to %g, %d ticks", cases[i].top, step, top, n);
    }
    CHECK(axis_tick_count(0, NAN, 1) == 0 && axis_tick_count(0, 1, 0) == 0 && axis_tick_count(0, 1e9, 1) == 50,
          "a count the numbers cannot make is none, and at most 50");
}

const TestCase heads_tests[] = {
    {"axis_ticks_round_and_cover", test_axis_ticks},
    {"heads_zero_w_o_head_scores_exactly_zero", test_heads_zero_w_o_head_scores_exactly_zero},
    {"heads_importance_is_the_summed_nll_gradient", test_heads_importance_is_the_summed_nll_gradient},
    {"heads_batched_scores_equal_one_sentence_at_a_time", test_heads_batched_scores_equal_one_sentence_at_a_time},
    {"heads_previous_position_head_is_labelled_previous", test_heads_previous_position_head_is_labelled_previous},
    {"heads_spearman_known_values", test_heads_spearman_known_values},
    {"heads_roles_on_hand_made_maps", test_heads_roles_on_hand_made_maps},
    {"heads_removal_order_and_mask_text", test_heads_removal_order_and_mask_text},
    {"heads_sink_share_on_hand_made_maps", test_heads_sink_share_on_hand_made_maps},
    {"heads_relative_roles", test_heads_relative_roles},
    {"heads_default_order_by_area", test_heads_default_order_by_area},
    {NULL, NULL},
};
