/* explain/: contributions through whole layers and their rollout, and the gradient
 * attributions, against the model's own pass, hand-computed cases and finite differences. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "data/vocab.h"
#include "explain/aligners.h"
#include "explain/contrib.h"
#include "explain/corpus_run.h"
#include "explain/faith.h"
#include "explain/gradattr.h"
#include "explain/intervene.h"
#include "explain/pair.h"
#include "explain/patching.h"
#include "fixture.h"
#include "nn/model.h"
#include "nn/multihead.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/rng.h"

enum { S = 5, T = 4 };
/* every token once on each side, so a table row is one position's embedding */
static const int src[S] = {4, 5, 6, 7, VOCAB_EOS};
static const int tin[T] = {VOCAB_BOS, 4, 7, 8};
static const int tout[T] = {4, 7, 8, VOCAB_EOS};

static void setup(Model *m, int pre, int tie, int layers) {
    ModelConfig cfg = fixture_config(9, 10, 8, 2, 12, layers, layers, 16);
    cfg.pre_norm = pre, cfg.tie_embeddings = tie, cfg.label_smoothing = 0.1f;
    memset(m, 0, sizeof *m);
    model_init(m, &cfg);
    model_init_weights(m, 7);
    Rng r = {42}; /* off the special point of unit norms and zero biases */
    for (size_t i = 0; i < m->n_params; i++) m->params[i] += 0.2f * rng_normal(&r);
    model_reserve(m, model_arena_floats(m, 1, S, T));
}

static double forward_one(Model *m) {
    int sl = S, tl = T;
    ModelBatch b = {1, S, T, src, &sl, tin, tout, &tl, 0};
    return model_forward(m, &b, 0, 0, 0);
}

/* How far the per-input vectors of every row of every block (and the bias) miss the
 * block's output, over the last pass of a two-layer model. */
static double vectors_miss(const Model *m) {
    int d = m->cfg.d_model;
    float *vec = xmalloc(sizeof(float) * (S + 2) * d), bias[8], keys[S * 2 * 8];
    double worst = 0;
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < 2; l++) {
            AttnBlockView blk;
            if (model_attention_block(m, (AttnKind)k, l, &blk) != 0) {
                free(vec);
                return INFINITY;
            }
            int rows = k == ATTN_ENC_SELF ? S : T, n_keys = k == ATTN_DEC_SELF ? T : S;
            contrib_key_vectors(m, (AttnKind)k, l, 0, keys);
            for (int i = 0; i < rows; i++) {
                int nk = k == ATTN_DEC_SELF ? i + 1 : n_keys;
                contrib_vectors(m, (AttnKind)k, l, 0, i, nk, keys, vec, bias);
                for (int c = 0; c < d; c++) {
                    double sum = bias[c];
                    for (int j = 0; j <= nk; j++) sum += vec[j * d + c];
                    double err = fabs(sum - blk.out[i * d + c]);
                    worst = err > worst ? err : worst;
                }
            }
        }
    free(vec);
    return worst;
}

/* The per-input vectors of every row of every block sum to the block's output. */
static void test_vectors_sum_to_the_block_output(void) {
    for (int pre = 0; pre < 2; pre++) {
        Model m;
        setup(&m, pre, 0, 2);
        forward_one(&m);
        double worst = vectors_miss(&m);
        model_free(&m);
        CHECK(worst < 1e-5, "%s: the vectors miss the block output by %.3g", pre ? "pre-LN" : "post-LN", worst);
    }
}

/* The same with head gates as --mask-heads and `qkv heads` set them: a head at 0 sends
 * nothing and one at 0.5 half, so a key's vector must carry its head's gate. */
static void test_vectors_sum_with_head_gates(void) {
    for (int pre = 0; pre < 2; pre++) {
        Model m;
        setup(&m, pre, 0, 2);
        int n = model_head_count(&m);
        float *gates = xmalloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++) gates[i] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? 0.5f : 1.0f;
        model_set_head_gates(&m, gates);
        free(gates);
        forward_one(&m);
        double worst = vectors_miss(&m);
        model_free(&m);
        CHECK(worst < 1e-5, "%s, gates 0 and 0.5: the vectors miss the block output by %.3g",
              pre ? "pre-LN" : "post-LN", worst);
    }
}

/* Each block's rows are contrib_from_vectors of its vectors as contrib.h defines the
 * inputs: for self-attention key i's vector and the residual are one input (T_ii + R_i),
 * and a row with nothing near falls back to position i; for cross-attention the residual
 * is an input of its own, the last column. */
static void test_block_rows_from_their_vectors(void) {
    for (int pre = 0; pre < 2; pre++) {
        Model m;
        setup(&m, pre, 1, 2);
        forward_one(&m);
        Contributions c;
        contrib_compute(&m, S, T, &c);
        int d = m.cfg.d_model;
        float vec[(S + 1) * 8], bias[8], keys[S * 2 * 8], want[S + 1];
        double worst = 0, residual = 0;
        for (int k = 0; k < ATTN_KINDS; k++)
            for (int l = 0; l < 2; l++) {
                AttnBlockView blk;
                CHECK(model_attention_block(&m, (AttnKind)k, l, &blk) == 0, "pre %d: no block %d.%d", pre, k, l);
                int rows = k == ATTN_ENC_SELF ? S : T, n_keys = k == ATTN_DEC_SELF ? T : S;
                contrib_key_vectors(&m, (AttnKind)k, l, 0, keys);
                for (int i = 0; i < rows; i++) {
                    int nk = k == ATTN_DEC_SELF ? i + 1 : n_keys;
                    contrib_vectors(&m, (AttnKind)k, l, 0, i, nk, keys, vec, bias);
                    const float *got;
                    if (k == ATTN_CROSS) {
                        contrib_from_vectors(vec, blk.out + (size_t)i * d, nk, d, nk, want);
                        got = c.cross + ((size_t)l * T + i) * (S + 1);
                        residual = fmax(residual, want[nk]);
                    } else {
                        for (int e = 0; e < d; e++) vec[i * d + e] += vec[nk * d + e];
                        contrib_from_vectors(vec, blk.out + (size_t)i * d, nk - 1, d, i, want);
                        got = (k == ATTN_ENC_SELF ? c.enc + (size_t)l * S * S : c.dec_self + (size_t)l * T * T) +
                              (size_t)i * n_keys;
                    }
                    for (int j = 0; j < nk + (k == ATTN_CROSS); j++) worst = fmax(worst, fabs(got[j] - want[j]));
                }
            }
        contrib_free(&c);
        model_free(&m);
        CHECK(worst < 1e-6, "%s: a block's row is %.3g off its vectors' proximities", pre ? "pre-LN" : "post-LN",
              worst);
        CHECK(residual > 0.05, "the cross residual takes %.3g at most: the test is blind", residual);
    }
}

/* A post-LN cross block whose norm's gamma is 0 outputs beta alone: every vector is 0, so
 * every proximity is 0 and each row falls back to its own input, which for cross-attention
 * is the residual (the decoder's prefix), the last column. */
static void test_cross_nothing_near_is_the_residual(void) {
    Model m;
    setup(&m, 0, 1, 2);
    memset(m.p.dec[1].norm2.w, 0, sizeof(float) * (size_t)m.cfg.d_model);
    forward_one(&m);
    Contributions c;
    contrib_compute(&m, S, T, &c);
    int bad = 0;
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= S; j++) bad += c.cross[((size_t)T + t) * (S + 1) + j] != (j == S ? 1.0f : 0.0f);
    contrib_free(&c);
    model_free(&m);
    CHECK(bad == 0, "%d of the %d entries of the fallen-back cross rows are not (0 .. 0, 1)", bad, T * (S + 1));
}

/* c = (0.5, 0.25, 0.25) by hand: |out|_1 = 3, distances 1, 2, 2, proximities 2, 1, 1 */
static void test_l1_proximity_by_hand(void) {
    const float out[2] = {1, -2}, vec[6] = {0, -2, 1, 0, 0.5f, -0.5f};
    float c[3];
    contrib_from_vectors(vec, out, 2, 2, 2, c);
    CHECK(fabsf(c[0] - 0.5f) < 1e-6f && fabsf(c[1] - 0.25f) < 1e-6f && fabsf(c[2] - 0.25f) < 1e-6f,
          "c = %g %g %g, not 0.5 0.25 0.25", c[0], c[1], c[2]);
    /* a vector farther than the output's own length contributes nothing */
    const float far[6] = {9, 9, 1, 0, 0, 0};
    contrib_from_vectors(far, out, 2, 2, 2, c);
    CHECK(c[0] == 0.0f && fabsf(c[1] - 1.0f) < 1e-6f && c[2] == 0.0f, "c = %g %g %g, not 0 1 0", c[0], c[1], c[2]);
    const float none[6] = {9, 9, 9, 9, 9, 9};
    contrib_from_vectors(none, out, 2, 2, 1, c);
    CHECK(c[0] == 0.0f && c[1] == 1.0f && c[2] == 0.0f, "nothing near: c = %g %g %g, not all its own", c[0], c[1],
          c[2]);
}

/* A rollout worked out by hand: one encoder layer, one decoder layer, S = 2, T = 2. */
static void test_rollout_by_hand(void) {
    Contributions c;
    contrib_alloc(&c, 2, 2, 1, 1);
    const float enc[4] = {0.5f, 0.5f, 0.25f, 0.75f};
    const float self[4] = {1, 0, 0.4f, 0.6f};
    const float cross[6] = {0.2f, 0.3f, 0.5f, 0, 0.6f, 0.4f};
    memcpy(c.enc, enc, sizeof enc), memcpy(c.dec_self, self, sizeof self), memcpy(c.cross, cross, sizeof cross);
    contrib_rollout(&c);
    /* decoder row 1 after self: (0, 0 | 0.4, 0.6); after cross: 0.4 * that + 0.6 * enc row 1
     * = (0.15, 0.45 | 0.16, 0.24); row 0: 0.5 * (0,0|1,0) + 0.2 * (0.5,0.5) + 0.3 * (0.25,0.75)
     * = (0.175, 0.325 | 0.5, 0) */
    const float want[8] = {0.175f, 0.325f, 0.5f, 0, 0.15f, 0.45f, 0.16f, 0.24f};
    for (int k = 0; k < 8; k++)
        CHECK(fabsf(c.dec_roll[k] - want[k]) < 1e-6f, "dec_roll[%d] = %g, not %g", k, c.dec_roll[k], want[k]);
    CHECK(fabsf(c.share[0] - 0.5f) < 1e-6f && fabsf(c.share[1] - 0.6f) < 1e-6f, "shares %g %g, not 0.5 0.6", c.share[0],
          c.share[1]);
    contrib_free(&c);
}

/* Two layers of each stack, by hand, with layers that do not commute: the encoder's
 * rollout is C_2 C_1 (layer 1 mixes what layer 0 made), and in each decoder layer the
 * self-attention mixes before the cross-attention reads. S = 2, T = 2.
 *   R_enc = C_2 C_1 = (0.5 0.5; 0 1)(1 0; 0.5 0.5) = (0.75 0.25; 0.5 0.5); C_1 C_2 would be
 *   (0.5 0.5; 0.25 0.75).
 *   layer 0: self: row 1 = (0 0 | 0.5 0.5); cross: row 0 = 0.6 (0 0 | 1 0) + 0.2 R_enc,0 +
 *   0.2 R_enc,1 = (0.25 0.15 | 0.6 0); row 1 = 0.5 (0 0 | 0.5 0.5) + 0.5 R_enc,1
 *   = (0.25 0.25 | 0.25 0.25).
 *   layer 1: self: row 1 = 0.25 row 0 + 0.75 row 1 = (0.25 0.225 | 0.3375 0.1875); cross:
 *   row 0 = 0.5 row 0 + 0.5 R_enc,0 = (0.5 0.2 | 0.3 0); row 1 = 0.8 row 1 + 0.1 R_enc,0 +
 *   0.1 R_enc,1 = (0.325 0.255 | 0.27 0.15). */
static void test_rollout_two_layers_by_hand(void) {
    Contributions c;
    contrib_alloc(&c, 2, 2, 2, 2);
    const float enc[8] = {1, 0, 0.5f, 0.5f, 0.5f, 0.5f, 0, 1};
    const float self[8] = {1, 0, 0.5f, 0.5f, 1, 0, 0.25f, 0.75f};
    const float cross[12] = {0.2f, 0.2f, 0.6f, 0, 0.5f, 0.5f, 0.5f, 0, 0.5f, 0.1f, 0.1f, 0.8f};
    memcpy(c.enc, enc, sizeof enc), memcpy(c.dec_self, self, sizeof self), memcpy(c.cross, cross, sizeof cross);
    contrib_rollout(&c);
    const float want_enc[4] = {0.75f, 0.25f, 0.5f, 0.5f};
    for (int k = 0; k < 4; k++)
        CHECK(fabsf(c.enc_roll[k] - want_enc[k]) < 1e-6f, "enc_roll[%d] = %g, not %g", k, c.enc_roll[k], want_enc[k]);
    const float want[8] = {0.5f, 0.2f, 0.3f, 0, 0.325f, 0.255f, 0.27f, 0.15f};
    for (int k = 0; k < 8; k++)
        CHECK(fabsf(c.dec_roll[k] - want[k]) < 1e-6f, "dec_roll[%d] = %g, not %g", k, c.dec_roll[k], want[k]);
    const float share[4] = {0.4f, 0.5f, 0.7f, 0.58f};
    for (int k = 0; k < 4; k++)
        CHECK(fabsf(c.share[k] - share[k]) < 1e-6f, "share[%d] = %g, not %g", k, c.share[k], share[k]);
    contrib_free(&c);
}

/* Rows of every layer and of the rollout are distributions; shares lie in [0, 1]. */
static void test_rows_sum_to_one(void) {
    for (int pre = 0; pre < 2; pre++) {
        Model m;
        setup(&m, pre, 1, 2);
        forward_one(&m);
        Contributions c;
        contrib_compute(&m, S, T, &c);
        double worst = 0;
        int negative = 0;
#define ROWS(arr, n, w)                                                                                            \
    for (int r = 0; r < (n); r++) {                                                                                \
        double s = 0;                                                                                              \
        for (int k = 0; k < (w); k++) s += (arr)[(size_t)r * (w) + k], negative |= (arr)[(size_t)r * (w) + k] < 0; \
        worst = fabs(s - 1) > worst ? fabs(s - 1) : worst;                                                         \
    }
        ROWS(c.enc, 2 * S, S);
        ROWS(c.dec_self, 2 * T, T);
        ROWS(c.cross, 2 * T, S + 1);
        ROWS(c.enc_roll, S, S);
        ROWS(c.dec_roll, T, S + T);
#undef ROWS
        int causal = 1;
        for (int l = 0; l < 2; l++)
            for (int i = 0; i < T; i++)
                for (int j = i + 1; j < T; j++) causal &= c.dec_self[(l * T + i) * T + j] == 0.0f;
        for (int t = 0; t < T; t++)
            for (int j = S + t + 1; j < S + T; j++) causal &= c.dec_roll[t * (S + T) + j] == 0.0f;
        int in_range = 1, some_source = 0;
        for (int t = 0; t < 2 * T; t++) in_range &= c.share[t] >= 0 && c.share[t] <= 1 + 1e-5f;
        for (int t = 0; t < T; t++) some_source |= c.share[T + t] > 0.01f;
        contrib_free(&c);
        model_free(&m);
        CHECK(worst < 1e-5, "a row sums to 1 %+.3g", worst);
        CHECK(!negative, "a negative contribution");
        CHECK(causal, "a decoder row took from a later target input");
        CHECK(in_range && some_source, "source shares out of [0, 1], or none at all");
    }
}

/* With W_O of every cross-attention zero, nothing of the source reaches the decoder. */
static void test_no_cross_output_no_source_share(void) {
    Model m;
    setup(&m, 0, 1, 2);
    for (int l = 0; l < 2; l++) {
        const AttnParams *w = model_attention_params(&m, ATTN_CROSS, l);
        memset(w->w_o, 0, sizeof(float) * 64);
    }
    forward_one(&m);
    Contributions c;
    contrib_compute(&m, S, T, &c);
    float most = 0;
    for (int t = 0; t < 2 * T; t++) most = c.share[t] > most ? c.share[t] : most;
    contrib_free(&c);
    model_free(&m);
    CHECK(most == 0.0f, "source share %g with no cross-attention output", most);
}

/* f_t for the pair with one table row scaled by (1 + eps): the source row of position j
 * (j < S) or the target row of decoder input j - S. */
static double f_scaled(Model *m, int j, int t, int foil, double eps) {
    int d = m->cfg.d_model;
    float *row = j < S ? m->p.src_embed + (size_t)src[j] * d : m->p.tgt_embed + (size_t)tin[j - S] * d;
    float keep[8];
    memcpy(keep, row, sizeof keep);
    for (int c = 0; c < d; c++) row[c] = (float)(keep[c] * (1 + eps));
    float smoothing = m->cfg.label_smoothing;
    m->cfg.label_smoothing = 0;
    forward_one(m);
    float lp[16];
    model_row_log_probs(m, t, lp);
    m->cfg.label_smoothing = smoothing;
    memcpy(row, keep, sizeof keep);
    return lp[tout[t]] - (foil >= 0 ? lp[foil] : 0);
}

/* input x gradient is the derivative of f along each token's own embedding: finite
 * differences of scaling that embedding, for every (t, j), plain and contrastive */
static void test_input_x_gradient_against_finite_differences(void) {
    for (int foil = -1; foil <= 5; foil += 6) {
        Model m;
        setup(&m, 1, 0, 2); /* untied: a target row is the input's alone */
        GradAttr g;
        gradattr_compute(&m, src, S, tin, tout, T, foil, 4, &g);
        double worst = 0, biggest = 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < S + T; j++) {
                double h = 1e-3, fd = (f_scaled(&m, j, t, foil, h) - f_scaled(&m, j, t, foil, -h)) / (2 * h);
                double err = fabs(fd - g.input_x_grad[t * (S + T) + j]);
                worst = err > worst ? err : worst;
                biggest = fabs(fd) > biggest ? fabs(fd) : biggest;
                if (j >= S + t + 1)
                    CHECK(g.input_x_grad[t * (S + T) + j] == 0 && g.saliency[t * (S + T) + j] == 0,
                          "t %d reads later input %d", t, j - S);
            }
        double f0 = f_scaled(&m, 0, 1, foil, 0);
        CHECK(fabs(f0 - g.f[1]) < 1e-5, "f_1 %.7g, the plain pass says %.7g", g.f[1], f0);
        gradattr_free(&g);
        CHECK(m.cfg.label_smoothing == 0.1f, "label smoothing not put back");
        model_free(&m);
        CHECK(biggest > 1e-2, "every derivative is ~0: the test is blind");
        CHECK(worst < 2e-3 * (1 + biggest), "%s: x-gradient off finite differences by %.3g (largest %.3g)",
              foil < 0 ? "plain" : "contrastive", worst, biggest);
    }
}

/* saliency is the gradient's length: finite differences of every coordinate of one
 * source position's embedding (through the table row, scaled by sqrt(d)) */
static void test_saliency_against_finite_differences(void) {
    Model m;
    setup(&m, 0, 1, 1);
    GradAttr g;
    gradattr_compute(&m, src, S, tin, tout, T, -1, 2, &g);
    int d = m.cfg.d_model, t = 2;
    for (int j = 0; j < S; j++) {
        float *row = m.p.src_embed + (size_t)src[j] * d;
        double sq = 0;
        for (int c = 0; c < d; c++) {
            float keep = row[c];
            double h = 1e-3, f[2];
            for (int s = 0; s < 2; s++) {
                row[c] = keep + (float)(s ? -h : h);
                m.cfg.label_smoothing = 0;
                forward_one(&m);
                float lp[16];
                model_row_log_probs(&m, t, lp);
                f[s] = lp[tout[t]];
            }
            row[c] = keep, m.cfg.label_smoothing = 0.1f;
            double dx = (f[0] - f[1]) / (2 * h) / sqrt((double)d); /* x = sqrt(d) * row + pos */
            sq += dx * dx;
        }
        double want = sqrt(sq), got = g.saliency[t * (S + T) + j];
        CHECK(fabs(want - got) < 2e-3 * (1 + want), "saliency of source %d: %.6g, finite differences %.6g", j, got,
              want);
    }
    gradattr_free(&g);
    model_free(&m);
}

/* input x gradient's magnitude is the L2 norm over the embedding of e * df/dx: finite
 * differences of every coordinate of each input's table row (x = sqrt(d) * row + pos, so
 * e_c * df/dx_c = row_c * df/drow_c), for every (t, j). Neither the signed sum nor its
 * absolute value passes: the test checks that both differ from it here. */
static void test_input_x_gradient_l2_against_finite_differences(void) {
    Model m;
    setup(&m, 1, 0, 2); /* untied: a target row is the input's alone */
    GradAttr g;
    gradattr_compute(&m, src, S, tin, tout, T, -1, 0, &g);
    int d = m.cfg.d_model, W = S + T;
    double worst = 0, biggest = 0, from_signed = 0, from_abs = 0;
    m.cfg.label_smoothing = 0;
    for (int j = 0; j < W; j++) {
        float *row = j < S ? m.p.src_embed + (size_t)src[j] * d : m.p.tgt_embed + (size_t)tin[j - S] * d;
        double sq[T] = {0};
        for (int c = 0; c < d; c++) {
            float keep = row[c], lp[16];
            double h = 1e-3, f[2][T];
            for (int s = 0; s < 2; s++) {
                row[c] = keep + (float)(s ? -h : h);
                forward_one(&m);
                for (int t = 0; t < T; t++) model_row_log_probs(&m, t, lp), f[s][t] = lp[tout[t]];
            }
            row[c] = keep;
            for (int t = 0; t < T; t++) {
                double p = keep * (f[0][t] - f[1][t]) / (2 * h);
                sq[t] += p * p;
            }
        }
        for (int t = 0; t < T; t++) {
            double want = sqrt(sq[t]), got = g.input_x_grad_l2[t * W + j], x = g.input_x_grad[t * W + j];
            worst = fmax(worst, fabs(want - got));
            biggest = fmax(biggest, want);
            from_signed = fmax(from_signed, fabs(want - x)), from_abs = fmax(from_abs, fabs(want - fabs(x)));
        }
    }
    m.cfg.label_smoothing = 0.1f;
    gradattr_free(&g);
    model_free(&m);
    double tol = 2e-3 * (1 + biggest);
    CHECK(biggest > 1e-2, "every derivative is ~0: the test is blind");
    CHECK(from_signed > 10 * tol && from_abs > 10 * tol,
          "the L2 norm is within %.3g of the signed x-gradient and %.3g of its absolute value: the test is blind",
          from_signed, from_abs);
    CHECK(worst < tol, "x-gradient-l2 off finite differences by %.3g (largest %.3g)", worst, biggest);
}

/* integrated gradients add up to f(x) - f(baseline), better with more steps; foil -1, or
 * the contrastive f = log p(y_t) - log p(foil), whose baseline is scored the same way: f_base
 * is f of a pass with every token embedding at 0 (alpha 0 in the hooks). */
static void check_integrated_gradients_complete(int foil) {
    Model m;
    setup(&m, 0, 1, 2);
    GradAttr few, many;
    gradattr_compute(&m, src, S, tin, tout, T, foil, 2, &few);
    gradattr_compute(&m, src, S, tin, tout, T, foil, 512, &many);
    double worst_many = 0, worst_few = 0, gap = 0, base_off = 0;
    float a_src[S] = {0}, a_tgt[T] = {0}, lp[16];
    model_set_embedding_hooks(&m, a_src, a_tgt, NULL, NULL);
    float smoothing = m.cfg.label_smoothing;
    m.cfg.label_smoothing = 0;
    forward_one(&m);
    m.cfg.label_smoothing = smoothing;
    model_set_embedding_hooks(&m, NULL, NULL, NULL, NULL);
    for (int t = 0; t < T; t++) {
        worst_many = fmax(worst_many, fabs(many.ig_error[t]));
        worst_few = fmax(worst_few, fabs(few.ig_error[t]));
        gap = fmax(gap, fabs(many.f[t] - many.f_base[t]));
        model_row_log_probs(&m, t, lp);
        base_off = fmax(base_off, fabs(many.f_base[t] - (lp[tout[t]] - (foil >= 0 ? lp[foil] : 0))));
    }
    gradattr_free(&few), gradattr_free(&many);
    model_free(&m);
    const char *what = foil < 0 ? "plain" : "contrastive";
    CHECK(base_off < 1e-5, "%s: f at the baseline %.3g off a pass with the embeddings at 0", what, base_off);
    CHECK(gap > 0.05, "%s: f(x) - f(baseline) is ~0 (%.3g): the test is blind", what, gap);
    /* this small random model bends sharply along the path (ReLU kinks, near-saturated
     * softmaxes): the midpoint rule needs many steps here */
    CHECK(worst_many < 0.005 * gap, "%s, 512 steps: completeness off by %.3g of a %.3g gap", what, worst_many, gap);
    CHECK(worst_many < 0.1 * worst_few, "%s: 512 steps (%.3g) not much closer than 2 (%.3g)", what, worst_many,
          worst_few);
}
static void test_integrated_gradients_complete(void) { check_integrated_gradients_complete(-1); }
static void test_integrated_gradients_complete_with_a_foil(void) { check_integrated_gradients_complete(5); }

/* One step of the midpoint rule is the x-gradient at half the token embeddings: with
 * every table row of the pair halved, finite differences along row j give 1/2 of it; plain
 * and contrastive (the path's gradients of log p(foil) enter with the opposite sign). */
static void check_integrated_gradients_one_step_is_the_midpoint(int foil) {
    Model m;
    setup(&m, 1, 0, 2);
    GradAttr g;
    gradattr_compute(&m, src, S, tin, tout, T, foil, 1, &g);
    int d = m.cfg.d_model;
    for (int j = 0; j < S + T; j++) {
        float *row = j < S ? m.p.src_embed + (size_t)src[j] * d : m.p.tgt_embed + (size_t)tin[j - S] * d;
        for (int c = 0; c < d; c++) row[c] *= 0.5f;
    }
    double worst = 0, biggest = 0;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < S + T; j++) {
            double h = 1e-3, fd = 2 * (f_scaled(&m, j, t, foil, h) - f_scaled(&m, j, t, foil, -h)) / (2 * h);
            worst = fmax(worst, fabs(fd - g.ig[t * (S + T) + j]));
            biggest = fmax(biggest, fabs(fd));
        }
    gradattr_free(&g);
    model_free(&m);
    CHECK(biggest > 1e-2, "every derivative is ~0: the test is blind");
    CHECK(worst < 2e-3 * (1 + biggest), "%s: one-step IG off the midpoint's x-gradient by %.3g (largest %.3g)",
          foil < 0 ? "plain" : "contrastive", worst, biggest);
}
static void test_integrated_gradients_one_step_is_the_midpoint(void) {
    check_integrated_gradients_one_step_is_the_midpoint(-1);
}
static void test_integrated_gradients_one_step_with_a_foil(void) {
    check_integrated_gradients_one_step_is_the_midpoint(5);
}

/* The hooks at alpha 1 change nothing: the same loss, bit for bit. */
static void test_embedding_hook_at_one_is_the_plain_pass(void) {
    Model m;
    setup(&m, 0, 1, 1);
    double plain = forward_one(&m);
    float a_src[S], a_tgt[T];
    for (int i = 0; i < S; i++) a_src[i] = 1;
    for (int i = 0; i < T; i++) a_tgt[i] = 1;
    model_set_embedding_hooks(&m, a_src, a_tgt, NULL, NULL);
    double hooked = forward_one(&m);
    a_src[1] = 0;
    double moved = forward_one(&m);
    model_set_embedding_hooks(&m, NULL, NULL, NULL, NULL);
    model_free(&m);
    CHECK(plain == hooked, "loss %.17g hooked at 1, %.17g plain", hooked, plain);
    CHECK(moved != plain, "alpha 0 on a source token changed nothing");
}

/* tau_b by hand: (1,2,3) vs (1,3,2) has 2 concordant pairs and 1 discordant: 1/3; with a
 * tie in b, (1,2,3) vs (1,1,2): 2 concordant of 3 pairs, 1 tied in b: 2 / sqrt(3 * 2) */
static void test_kendall_tau_by_hand(void) {
    const float a[3] = {1, 2, 3}, b[3] = {1, 3, 2}, c[3] = {1, 1, 2}, flat[3] = {5, 5, 5}, rev[3] = {3, 2, 1};
    double t1 = kendall_tau_b(a, b, 3), t2 = kendall_tau_b(a, c, 3), t3 = kendall_tau_b(a, rev, 3);
    CHECK(fabs(t1 - 1.0 / 3) < 1e-12, "tau %g, not 1/3", t1);
    CHECK(fabs(t2 - 2 / sqrt(6.0)) < 1e-12, "tau with a tie %g, not 2/sqrt(6)", t2);
    CHECK(t3 == -1.0, "reversed order: tau %g, not -1", t3);
    CHECK(isnan(kendall_tau_b(a, flat, 3)), "a constant ranking has no tau");
    int ks[FAITH_KS];
    faith_ks(12, ks);
    CHECK(ks[0] == 1 && ks[1] == 2 && ks[2] == 3 && ks[3] == 3, "k for 12 tokens: %d %d %d %d", ks[0], ks[1], ks[2],
          ks[3]);
    faith_ks(2, ks);
    CHECK(ks[2] == 2 && ks[3] == 1, "k for 2 tokens: %d %d %d %d", ks[0], ks[1], ks[2], ks[3]);
}

/* Source and target vocabularies of the words w0..w7 (w0 the most frequent), for the
 * tests that label an explanation's tokens. */
static void eight_word_vocabs(Vocab *sv, Vocab *tv) {
    vocab_init(sv), vocab_init(tv);
    char w[8];
    for (int i = 0; i < 8; i++)
        snprintf(w, sizeof w, "w%d", i), vocab_count(sv, w, strlen(w), 100 - i), vocab_count(tv, w, strlen(w), 100 - i);
    vocab_prune(sv, 1000, 1), vocab_prune(tv, 1000, 1);
}

/* Frees what a test of one explained pair made: its methods, the pair, the model and the
 * vocabularies. */
static void explained_free(ExplainMethod *ms, int n, PairExplanation *e, Model *m, Vocab *sv, Vocab *tv) {
    explain_methods_free(ms, n);
    explain_pair_free(e);
    model_free(m);
    vocab_free(sv), vocab_free(tv);
}

/* Leave-one-out's own top-1 removal is the largest leave-one-out drop: the AOPC machinery
 * (rankings, distinct sets, batched removals) must give exactly that at k = 1, and the
 * removal of nothing must give log p itself. */
static void test_faithfulness_k1_of_leave_one_out(void) {
    Model m;
    setup(&m, 0, 1, 2);
    Vocab sv, tv;
    eight_word_vocabs(&sv, &tv);
    ExplainOptions eo = {.foil = -1, .ig_steps = 2, .loo = 1};
    PairExplanation e;
    int ns = S - 1, nt = T - 1;
    explain_pair(&m, &sv, &tv, src, ns, tout, nt, &eo, &e);
    ExplainMethod *ms;
    int n = explain_methods(&e, &ms), loo = -1;
    for (int i = 0; i < n; i++)
        if (strcmp(ms[i].name, "leave-one-out") == 0) loo = i;
    FaithTotals f;
    faith_init(&f, ms, n, 2, 2, 3);
    faith_add(&f, &m, &e, ms, 7);
    double want = 0;
    for (int t = 0; t < T; t++) {
        float best = -INFINITY;
        for (int j = 0; j + 1 < S; j++) best = fmaxf(best, e.loo[t * S + j]);
        want += best;
    }
    want /= T;
    float lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < T * S; k++)
        if ((k % S) + 1 < S) lo = fminf(lo, e.loo[k]), hi = fmaxf(hi, e.loo[k]);
    CHECK(hi - lo > 1e-3f, "leave-one-out is flat (%g..%g): the test is blind", lo, hi);
    double got = faith_drop_at(&f, loo, 0);
    unsigned char none[S] = {0}, all_t[T];
    memset(all_t, 1, sizeof all_t);
    float lp[T];
    explain_removal_logp(&m, &e, none, all_t, 1, lp);
    int same = 1;
    for (int t = 0; t < T; t++) same &= fabsf(lp[t] - e.logp[t]) < 1e-6f;
    /* leave-one-out means <unk> in the token's place: a plain pass so, for source token 1 */
    int unk_src[S], sl = S, tl = T;
    memcpy(unk_src, src, sizeof unk_src);
    unk_src[1] = VOCAB_UNK;
    ModelBatch ub = {1, S, T, unk_src, &sl, tin, tout, &tl, 0};
    model_forward(&m, &ub, 0, 0, 0);
    float ulp[16];
    model_row_log_probs(&m, 2, ulp);
    double loo_direct = e.logp[2] - ulp[tout[2]], loo_kept = e.loo[2 * S + 1];
    double rnd, sd;
    faith_random(&f, &rnd, &sd);
    faith_free(&f);
    explained_free(ms, n, &e, &m, &sv, &tv);
    CHECK(loo >= 0, "no leave-one-out method");
    CHECK(fabs(got - want) < 1e-5, "leave-one-out's k=1 drop %.6g, its largest drop %.6g", got, want);
    CHECK(same, "removing nothing changed log p");
    CHECK(fabs(loo_direct - loo_kept) < 1e-5, "leave-one-out %.6g, a pass with <unk> there %.6g", loo_kept, loo_direct);
    CHECK(rnd < got, "random orders (%.4g) as faithful as leave-one-out at k=1 (%.4g)", rnd, got);
}

/* A one-hot pin on key j makes the head's output at that query exactly v_j's columns. */
static void test_pinned_one_hot_is_the_keys_value(void) {
    Model m;
    setup(&m, 0, 1, 2);
    float w[S] = {0};
    w[3] = 1;
    AttnIntervene iv = {.pin_head = 1, .pin_query = 2, .pin_weights = w};
    model_attention_intervene(&m, ATTN_CROSS, 1, &iv);
    forward_one(&m);
    const AttnActs *a = model_attention_acts(&m, ATTN_CROSS, 1);
    int d = m.cfg.d_model, dh = d / m.cfg.heads, same = 1, other = 0;
    for (int e = 0; e < dh; e++) {
        same &= a->ctx[2 * d + dh + e] == a->v[3 * d + dh + e];
        other |= a->ctx[1 * d + dh + e] != a->v[3 * d + dh + e];
    }
    int pinned = a->p[((size_t)1 * T + 2) * S + 3] == 1.0f;
    model_attention_intervene(&m, ATTN_CROSS, 1, NULL);
    model_free(&m);
    CHECK(pinned, "the pinned row is not one-hot");
    CHECK(same, "the pinned head's output is not the key's value");
    CHECK(other, "an unpinned query got the key's value too: the test is blind");
}

/* Switching off every cross head through the gates is the plain pass with those heads'
 * rows of W_O at zero (what --mask-heads cross.*.* does). */
static void test_all_heads_of_a_kind_off(void) {
    Model a, b;
    setup(&a, 0, 1, 2), setup(&b, 0, 1, 2);
    int n = model_head_count(&a);
    float *gates = xmalloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) gates[i] = 1;
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 2; h++) gates[model_head_index(&a, ATTN_CROSS, l, h)] = 0;
    model_set_head_gates(&a, gates);
    for (int l = 0; l < 2; l++) memset(model_attention_params(&b, ATTN_CROSS, l)->w_o, 0, sizeof(float) * 64);
    double la = forward_one(&a), lb = forward_one(&b);
    free(gates);
    model_free(&a), model_free(&b);
    CHECK(la == lb, "gates off %.17g, zero W_O %.17g", la, lb);
}

/* Patching a small step (1e-3 of the way) toward the corrupted run under metric: the
 * largest miss of the measured effect by attribution patching's estimate, as a fraction of
 * the largest estimate (into *biggest). */
static double small_step_miss(Model *m, PatchMetric metric, double *biggest) {
    const int clean[S - 1] = {4, 5, 6, 7}, corrupt[S - 1] = {4, 8, 6, 7}, tgt[T - 1] = {4, 7, 8};
    metric.fraction = 1e-3;
    PatchTable small;
    *biggest = 0;
    if (patch_run(m, clean, corrupt, S - 1, tgt, T - 1, &metric, &small) != 0) return INFINITY;
    double worst_rel = 0;
    for (int i = 0; i < small.n; i++) *biggest = fmax(*biggest, fabs(small.c[i].atp));
    for (int i = 0; i < small.n; i++)
        worst_rel = fmax(worst_rel, fabs(small.c[i].effect - small.c[i].atp) / (*biggest + 1e-12));
    patch_free(&small);
    return worst_rel;
}

/* Patching a run into itself changes nothing; patching the encoder's output everywhere
 * gives the corrupted run; attribution patching is the gradient: one head's and one
 * position's estimate against the metric moved a small step toward the corrupted run. */
static void test_patching(void) {
    Model m;
    setup(&m, 1, 1, 2);
    const int clean[S - 1] = {4, 5, 6, 7}, corrupt[S - 1] = {4, 8, 6, 7}, tgt[T - 1] = {4, 7, 8};
    PatchMetric whole = {.at = -1};
    PatchTable self, t;
    CHECK(patch_run(&m, clean, clean, S - 1, tgt, T - 1, &whole, &self) == 0, "%s", "refused");
    double worst = 0;
    for (int i = 0; i < self.n; i++) worst = fmax(worst, fabs(self.c[i].effect) + fabs(self.c[i].atp));
    CHECK(worst == 0, "patching a run into itself moved the metric by %g", worst);
    patch_free(&self);
    PatchMetric contrast = {.at = 1, .a = 7, .b = 5};
    CHECK(patch_run(&m, clean, corrupt, S - 1, tgt, T - 1, &contrast, &t) == 0, "%s", "refused");
    CHECK(t.everything == t.corrupt, "everything patched: %.9g, the corrupted run %.9g", t.everything, t.corrupt);
    CHECK(t.clean != t.corrupt, "the two runs agree: the test is blind");
    int moved = 0;
    for (int i = 0; i < t.n; i++) moved += t.c[i].effect != 0;
    CHECK(moved > 4, "only %d components matter", moved);
    patch_free(&t);
    /* a small step toward the corrupted run: the effect over the step is the estimate's */
    double biggest, worst_rel = small_step_miss(&m, contrast, &biggest);
    CHECK(biggest > 1e-6, "every estimate is 0: the test is blind");
    CHECK(worst_rel < 0.02, "attribution patching off a 1e-3 step's effect by %.3g of the largest", worst_rel);
    model_free(&m);
}

/* The same small step with the whole target's log-probability as the metric (at = -1,
 * what `qkv patch` measures without a contrast): the estimate's sign and size follow the
 * metric's, not the loss's. */
static void test_patching_small_step_whole_target(void) {
    Model m;
    setup(&m, 1, 1, 2);
    double biggest, worst_rel = small_step_miss(&m, (PatchMetric){.at = -1}, &biggest);
    model_free(&m);
    CHECK(biggest > 1e-6, "every estimate is 0: the test is blind");
    CHECK(worst_rel < 0.02, "whole target: attribution patching off a 1e-3 step's effect by %.3g of the largest",
          worst_rel);
}

/* Spearman's rho with ties, by hand (ties take their mean rank, and rho is Pearson's r of
 * the ranks). x = (1, 2, 2, 3) ranks (1, 2.5, 2.5, 4) against y = (1, 2, 3, 4): deviations
 * (-1.5, 0, 0, 1.5) and (-1.5, -0.5, 0.5, 1.5), sxy = 4.5, sxx = 4.5, syy = 5: rho =
 * 4.5 / sqrt(22.5) = 3 / sqrt(10). Out of order with ties in both, x = (3, 1, 3, 2, 5)
 * ranks (3.5, 1, 3.5, 2, 5), y = (2, 2, 1, 4, 4) ranks (2.5, 2.5, 1, 4.5, 4.5): deviations
 * (0.5, -2, 0.5, -1, 2) and (-0.5, -0.5, -2, 1.5, 1.5), sxy = -0.25 + 1 - 1 - 1.5 + 3 =
 * 1.25, sxx = 9.5, syy = 9: rho = 1.25 / sqrt(85.5). */
static void test_spearman_with_ties_by_hand(void) {
    const double x1[4] = {1, 2, 2, 3}, y1[4] = {1, 2, 3, 4};
    const double x2[5] = {3, 1, 3, 2, 5}, y2[5] = {2, 2, 1, 4, 4}, flat[5] = {7, 7, 7, 7, 7};
    double r1 = spearman_rho(x1, y1, 4), r2 = spearman_rho(x2, y2, 5), r3 = spearman_rho(y1, x1, 4);
    CHECK(fabs(r1 - 3 / sqrt(10.0)) < 1e-12, "rho %.15g, not 3/sqrt(10)", r1);
    CHECK(fabs(r3 - r1) < 1e-12, "rho is not symmetric: %.15g and %.15g", r1, r3);
    CHECK(fabs(r2 - 1.25 / sqrt(85.5)) < 1e-12, "rho %.15g, not 1.25/sqrt(85.5)", r2);
    CHECK(isnan(spearman_rho(x2, flat, 5)), "a constant ranking has no rho");
}

/* whatif_pin through whatif_steps: the pin lands on the head asked for (layer 0, head 1,
 * query 2, key 3: none of the numbers equal), its row of weights is one-hot on the key, so
 * that head's output at the query is the key's value; the other head and the other
 * queries keep their softmax; and whatif_clear gives back the plain pass. */
static void test_whatif_pin_lands_on_its_head(void) {
    Model m;
    setup(&m, 0, 1, 2);
    const int s4[S - 1] = {4, 5, 6, 7}, t3[T - 1] = {4, 7, 8};
    WhatifSteps plain, pinned, cleared;
    whatif_steps(&m, s4, S - 1, t3, T - 1, 3, &plain);
    float w[S];
    AttnIntervene iv;
    CHECK(whatif_pin(&m, 0, 1, 2, 3, S, w, &iv) == 0, "pin refused: %s", err_msg());
    whatif_steps(&m, s4, S - 1, t3, T - 1, 3, &pinned);
    const AttnActs *a = model_attention_acts(&m, ATTN_CROSS, 0);
    int d = m.cfg.d_model, dh = d / m.cfg.heads, same = 1, head0_free = 0, one_hot = 1;
    for (int e = 0; e < dh; e++) {
        same &= a->ctx[2 * d + dh + e] == a->v[3 * d + dh + e];
        head0_free |= a->ctx[2 * d + e] != a->v[3 * d + e];
    }
    for (int j = 0; j < S; j++) one_hot &= a->p[((size_t)1 * T + 2) * S + j] == (j == 3 ? 1.0f : 0.0f);
    int head0_softmax = a->p[((size_t)0 * T + 2) * S + 3] < 0.999f,
        other_query = a->p[((size_t)1 * T + 1) * S + 3] < 0.999f;
    whatif_clear(&m);
    whatif_steps(&m, s4, S - 1, t3, T - 1, 3, &cleared);
    int moved = 0, back = 1;
    for (int t = 0; t < T; t++) moved |= pinned.logp[t] != plain.logp[t], back &= cleared.logp[t] == plain.logp[t];
    whatif_steps_free(&plain), whatif_steps_free(&pinned), whatif_steps_free(&cleared);
    model_free(&m);
    CHECK(one_hot, "the pinned row of head 1 is not one-hot on key 3");
    CHECK(same, "head 1's output at query 2 is not key 3's value");
    CHECK(head0_free && head0_softmax, "head 0 was pinned too");
    CHECK(other_query, "query 1 was pinned too");
    CHECK(moved, "the pin changed no log-probability: the test is blind");
    CHECK(back, "whatif_clear did not give back the plain pass");
}

/* whatif_steps against the model's own distributions of the same pass: the forced word's
 * log p, the entropy -sum p log p of each position (nats), the top k by log p (best first),
 * and through each decoder layer's lens (layer l's own stream through the final norm and
 * the output projection) the forced word's log p and the top k. */
static void test_whatif_steps_are_the_models_distributions(void) {
    for (int pre = 0; pre < 2; pre++) {
        Model m;
        setup(&m, pre, 1, 2);
        const int s4[S - 1] = {4, 5, 6, 7}, t3[T - 1] = {4, 7, 8};
        enum { K = 3 };
        WhatifSteps w;
        whatif_steps(&m, s4, S - 1, t3, T - 1, K, &w);
        int V = m.cfg.tgt_vocab, d = m.cfg.d_model;
        float lp[16];
        double worst = 0, worst_h = 0, lens_gap = 0, h_spread = 0, h_first = -1;
        int bad_top = 0;
        for (int t = 0; t < T; t++) {
            model_row_log_probs(&m, t, lp);
            double h = 0;
            for (int v = 0; v < V; v++) h -= exp((double)lp[v]) * lp[v];
            worst_h = fmax(worst_h, fabs(w.entropy[t] - h));
            h_first = h_first < 0 ? h : h_first, h_spread = fmax(h_spread, fabs(h - h_first));
            worst = fmax(worst, fabs(w.logp[t] - lp[tout[t]]));
            for (int i = 0; i < K; i++) {
                int id = w.top[t * K + i], above = 0;
                for (int v = 0; v < V; v++) above += lp[v] > lp[id];
                bad_top += above != i || w.top_lp[t * K + i] != lp[id];
            }
        }
        for (int l = 0; l < 2; l++)
            for (int t = 0; t < T; t++) {
                model_lens_log_probs(&m, model_stream_output(&m, 1, l) + (size_t)t * d, lp);
                worst = fmax(worst, fabs(w.lens_word[l * T + t] - lp[tout[t]]));
                if (l == 0) lens_gap = fmax(lens_gap, fabs(w.lens_word[t] - w.lens_word[T + t]));
                for (int i = 0; i < K; i++) {
                    int id = w.lens_top[(l * T + t) * K + i], above = 0;
                    for (int v = 0; v < V; v++) above += lp[v] > lp[id];
                    bad_top += above != i || w.lens_lp[(l * T + t) * K + i] != lp[id];
                }
            }
        whatif_steps_free(&w);
        model_free(&m);
        const char *what = pre ? "pre-LN" : "post-LN";
        CHECK(worst < 1e-6, "%s: a forced word's log p (output or lens) is %.3g off the model's", what, worst);
        CHECK(worst_h < 1e-5, "%s: an entropy is %.3g off -sum p log p", what, worst_h);
        CHECK(h_spread > 1e-3, "%s: every position has the same entropy: the test is blind", what);
        CHECK(lens_gap > 1e-3, "%s: the two layers' lenses agree: the test is blind", what);
        CHECK(bad_top == 0, "%s: %d top-k entries are not the k best in order", what, bad_top);
    }
}

/* Head gates scale what a head sends through its values: attention_value_norms is
 * |gate| * |v_j^h W_O^h|_2, by hand from the pass's values and W_O, so a masked head's
 * norms (and its value-weighted map, weights times norms) are 0 and a head at 0.5 sends
 * half. */
static void test_value_norms_carry_the_gate(void) {
    Model m;
    setup(&m, 0, 1, 2);
    int n = model_head_count(&m);
    float *gates = xmalloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) gates[i] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? 0.5f : 1.0f;
    model_set_head_gates(&m, gates);
    forward_one(&m);
    int d = m.cfg.d_model, H = m.cfg.heads, dh = d / H;
    double worst = 0, smallest_open = INFINITY;
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < 2; l++) {
            const AttnActs *a = model_attention_acts(&m, (AttnKind)k, l);
            const AttnParams *p = model_attention_params(&m, (AttnKind)k, l);
            int rows = k == ATTN_ENC_SELF ? S : T, cols = k == ATTN_DEC_SELF ? T : S, kv_len = cols;
            AttnShape shape =
                {.B = 1, .Tq = rows, .Tk = cols, .d = d, .heads = H, .kv_len = &kv_len, .causal = k == ATTN_DEC_SELF};
            float norms[2 * S];
            attention_value_norms(norms, a, p, &shape);
            for (int h = 0; h < H; h++) {
                float g = gates[model_head_index(&m, (AttnKind)k, l, h)];
                for (int j = 0; j < cols; j++) {
                    double sq = 0;
                    for (int c = 0; c < d; c++) {
                        double u = 0;
                        for (int e = 0; e < dh; e++)
                            u += (double)a->v[j * d + h * dh + e] * p->w_o[(h * dh + e) * d + c];
                        sq += u * u;
                    }
                    double want = fabs(g) * sqrt(sq);
                    worst = fmax(worst, fabs(norms[h * cols + j] - want) / (1 + want));
                    if (g > 0) smallest_open = fmin(smallest_open, want);
                }
            }
        }
    free(gates);
    model_free(&m);
    CHECK(smallest_open > 1e-3, "an open head sends nothing: the test is blind");
    CHECK(worst < 1e-5, "value norms %.3g off |gate| |v W_O|", worst);
}

/* AOPC and the random orders' spread from sums set by hand: 2 target tokens, one method
 * with summed drops (1, 2, 3, 6) (per token 0.5, 1, 1.5, 3: AOPC 1.5), three random orders
 * whose drops sum to 4, 8 and 12 (AOPC 0.5, 1 and 1.5): mean 1, sample standard deviation
 * sqrt((0.25 + 0 + 0.25) / (3 - 1)) = 0.5. */
static void test_faith_aopc_and_random_spread_by_hand(void) {
    ExplainMethod ms[1] = {{.name = "m", .family = EXPLAIN_LOO}};
    FaithTotals f;
    faith_init(&f, ms, 1, 1, 1, 3);
    const double drop[4] = {1, 2, 3, 6}, rnd[12] = {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
    memcpy(f.drop, drop, sizeof drop), memcpy(f.random_drop, rnd, sizeof rnd);
    f.tokens = 2;
    double at3 = faith_drop_at(&f, 0, 3), aopc = faith_aopc(&f, 0), mean, sd;
    faith_random(&f, &mean, &sd);
    faith_free(&f);
    CHECK(fabs(at3 - 3) < 1e-12, "drop at k #4: %g, not 3", at3);
    CHECK(fabs(aopc - 1.5) < 1e-12, "AOPC %g, not 1.5", aopc);
    CHECK(fabs(mean - 1) < 1e-12 && fabs(sd - 0.5) < 1e-12, "random orders: mean %g sd %g, not 1 and 0.5", mean, sd);
}

/* Every method's scores are the array pair.h says they are read from: each cross head's
 * weights, each layer's head average, shift-att (the average's row t + 1, the last row its
 * own), the last layer's cross contributions and the rollout's source columns, the four
 * gradient attributions' source columns (x-gradient signed, x-gradient-l2 its magnitude),
 * and leave-one-out. */
static void test_methods_read_their_sources(void) {
    Model m;
    setup(&m, 0, 1, 2);
    Vocab sv, tv;
    eight_word_vocabs(&sv, &tv);
    ExplainOptions eo = {.foil = -1, .ig_steps = 2, .loo = 1};
    PairExplanation e;
    explain_pair(&m, &sv, &tv, src, S - 1, tout, T - 1, &eo, &e);
    ExplainMethod *ms;
    int n = explain_methods(&e, &ms), L = 2, H = 2, W = S + T, i = 0, bad = 0;
    CHECK(n == L * (H + 1) + L + 2 + EXPLAIN_GRADIENTS + 1, "%d methods", n);
    float avg[2][T * S];
    for (int l = 0; l < L; l++) {
        for (int k = 0; k < T * S; k++) avg[l][k] = 0;
        for (int h = 0; h < H; h++) {
            const float *p = attnmap_at(&e.maps, ATTN_CROSS, l, h);
            for (int k = 0; k < T * S; k++) avg[l][k] += p[k] / H;
            bad += memcmp(ms[i++].scores, p, sizeof(float) * T * S) != 0;
        }
        for (int k = 0; k < T * S; k++) bad += fabsf(ms[i].scores[k] - avg[l][k]) > 1e-6f;
        i++;
    }
    for (int l = 0; l < L; l++, i++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < S; j++)
                bad += fabsf(ms[i].scores[t * S + j] - avg[l][(t + 1 < T ? t + 1 : t) * S + j]) > 1e-6f;
    const float *from[7] = {e.contrib.cross + (size_t)(L - 1) * T * (S + 1),
                            e.contrib.dec_roll,
                            e.grad.saliency,
                            e.grad.input_x_grad,
                            e.grad.input_x_grad_l2,
                            e.grad.ig,
                            e.loo};
    const int stride[7] = {S + 1, W, W, W, W, W, S};
    const char *names[7] = {"contrib.layer", "contrib.rollout",      "saliency",     "x-gradient",
                            "x-gradient-l2", "integrated-gradients", "leave-one-out"};
    for (int k = 0; k < 7; k++, i++) {
        bad += strcmp(ms[i].name, names[k]) != 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < S; j++) bad += ms[i].scores[t * S + j] != from[k][t * stride[k] + j];
    }
    int distinct = memcmp(e.contrib.cross, from[0], sizeof(float) * T * (S + 1)) != 0;
    explained_free(ms, n, &e, &m, &sv, &tv);
    CHECK(bad == 0, "%d scores are not read from where they belong", bad);
    CHECK(distinct, "the two layers' cross contributions agree: the test is blind");
}

/* A foil that is the word itself: f_t = log p(y_t) - log p(y_t) is 0 for any input, so
 * every gradient score of that row is exactly 0 (two batch rows' rounding would rank
 * noise), f_t, f at the baseline and the completeness error are 0, and the row is flagged;
 * the other rows are the contrast with a word they are not, and every other method still
 * ranks that row. */
static void test_foil_that_is_the_word_ranks_nothing(void) {
    Model m;
    setup(&m, 0, 1, 2);
    Vocab sv, tv;
    eight_word_vocabs(&sv, &tv);
    int at = 1;
    ExplainOptions eo = {.foil = tout[at], .ig_steps = 4, .loo = 1};
    PairExplanation e;
    explain_pair(&m, &sv, &tv, src, S - 1, tout, T - 1, &eo, &e);
    ExplainMethod *ms;
    int n = explain_methods(&e, &ms), W = S + T, flags = 0, zero = 1, others = 0, methods_zero = 1, ranked = 0;
    for (int t = 0; t < T; t++) flags += e.grad.foil_is_word[t] != (t == at);
    for (int k = 0; k < EXPLAIN_GRADIENTS; k++) {
        const float *g = explain_gradient_scores(&e.grad, k);
        for (int j = 0; j < W; j++) zero &= g[at * W + j] == 0;
        for (int j = 0; j < S - 1; j++) others += g[0 * W + j] != 0;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j + 1 < S; j++) {
            float v = ms[i].scores[at * S + j];
            if (ms[i].family == EXPLAIN_GRADIENT) methods_zero &= v == 0;
            else ranked += v != ms[i].scores[at * S];
        }
    double f = e.grad.f[at], fb = e.grad.f_base[at], err = e.grad.ig_error[at];
    explained_free(ms, n, &e, &m, &sv, &tv);
    CHECK(flags == 0, "foil_is_word is not set at position %d alone", at);
    CHECK(zero, "a gradient of f = log p(y) - log p(y) is not exactly 0");
    CHECK(f == 0 && fb == 0 && err == 0, "f %.3g, f at the baseline %.3g, completeness error %.3g: not 0", f, fb, err);
    CHECK(methods_zero, "a gradient method ranks the foil's own word");
    CHECK(others > 0, "row 0, contrasted with another word, is 0 too: the test is blind");
    CHECK(ranked > 0, "the attention, contributions and leave-one-out no longer rank the foil's word");
}

static int progress_calls;
static void count_progress(int done, int total, void *arg) {
    (void)done, (void)total, (void)arg;
    progress_calls++;
}

/* A corpus's gold lines are read, and their links checked against each pair's words, before
 * any pair is explained: a bad line is said with its file and line and no pair is worked on
 * (no progress); the words counted from the ids alone are the ones the pairs' maps give. */
static void test_corpus_gold_read_before_any_pair(void) {
    Model m;
    setup(&m, 0, 1, 2);
    Vocab sv, tv;
    eight_word_vocabs(&sv, &tv);
    Seq ss[2] = {{(int *)src, S - 1}, {(int *)src, S - 1}}, ts[2] = {{(int *)tout, T - 1}, {(int *)tout, T - 1}};
    int lines[2] = {1, 2};
    char *golds[3][2] = {{"0-0 not-a-link", "0-0"}, {"0-0 1-1", "4-0"}, {"0-0 1-1 2-2", "3-2"}};
    const char *want[3] = {"gold.txt:1: not Pharaoh alignments (i-j pairs)",
                           "gold.txt:2: link 4-0 is out of range: the pair has 4 source and 3 target words", NULL};
    int calls[3], rcs[3];
    char said[3][160];
    for (int k = 0; k < 3; k++) {
        ExplainCorpus in = {.n = 2,
                            .src = ss,
                            .tgt = ts,
                            .gold = golds[k],
                            .gold_file = "gold.txt",
                            .line = lines,
                            .tokenizer = TOKENIZER_WORD,
                            .sv = &sv,
                            .tv = &tv,
                            .eo = {.foil = -1, .ig_steps = 0, .loo = 0},
                            .random_orders = 1};
        ExplainCorpusResult res;
        progress_calls = 0;
        rcs[k] = explain_corpus(&m, &in, 1, count_progress, NULL, &res);
        calls[k] = progress_calls;
        snprintf(said[k], sizeof said[k], "%s", rcs[k] ? err_msg() : "");
        explain_corpus_free(&res);
    }
    /* the words of each side, from ids alone and from an explained pair's labels */
    PairExplanation e;
    ExplainOptions eo = {.foil = -1, .ig_steps = 0, .loo = 0};
    explain_pair(&m, &sv, &tv, src, S - 1, tout, T - 1, &eo, &e);
    int agree = 1;
    for (int tok = TOKENIZER_WORD; tok <= TOKENIZER_UNIGRAM; tok++) {
        int sw[S], tw[T], n_src, n_tgt;
        explain_words(&e, tok, sw, tw, &n_src, &n_tgt);
        agree &= explain_side_words(src, S - 1, &sv, tok) == n_src &&
                 explain_side_words(tout, T - 1, &tv, tok) == n_tgt;
    }
    explain_pair_free(&e);
    model_free(&m);
    vocab_free(&sv), vocab_free(&tv);
    for (int k = 0; k < 2; k++) {
        CHECK(rcs[k] == -1 && strcmp(said[k], want[k]) == 0, "bad gold set %d: rc %d, '%s'", k, rcs[k], said[k]);
        CHECK(calls[k] == 0, "bad gold set %d: %d pairs explained before it was refused", k, calls[k]);
    }
    CHECK(rcs[2] == 0 && calls[2] == 2, "good gold lines: rc %d ('%s'), %d pairs explained", rcs[2], said[2], calls[2]);
    CHECK(agree, "the words counted from ids are not the explained pair's");
}

/* The logit lens of the last decoder layer is the model's own distribution. */
static void test_logit_lens_last_layer(void) {
    for (int pre = 0; pre < 2; pre++) {
        Model m;
        setup(&m, pre, 1, 2);
        forward_one(&m);
        float lens[16], own[16];
        double worst = 0, spread = 0;
        for (int t = 0; t < T; t++) {
            model_lens_log_probs(&m, model_stream_output(&m, 1, 1) + (size_t)t * m.cfg.d_model, lens);
            model_row_log_probs(&m, t, own);
            for (int v = 0; v < m.cfg.tgt_vocab; v++) worst = fmax(worst, fabs(lens[v] - own[v]));
            model_lens_log_probs(&m, model_stream_output(&m, 1, 0) + (size_t)t * m.cfg.d_model, lens);
            for (int v = 0; v < m.cfg.tgt_vocab; v++) spread = fmax(spread, fabs(lens[v] - own[v]));
        }
        model_free(&m);
        CHECK(worst < 1e-5, "%s: the last layer's lens is %.3g off the output", pre ? "pre-LN" : "post-LN", worst);
        CHECK(spread > 1e-3, "the first layer's lens is the output too: the test is blind");
    }
}

const TestCase explain_tests[] = {
    {"whatif_pinned_one_hot_is_the_keys_value", test_pinned_one_hot_is_the_keys_value},
    {"whatif_all_heads_of_a_kind_off_is_zero_w_o", test_all_heads_of_a_kind_off},
    {"whatif_patching_self_nothing_everything_corrupt", test_patching},
    {"whatif_patching_small_step_whole_target", test_patching_small_step_whole_target},
    {"whatif_spearman_with_ties_by_hand", test_spearman_with_ties_by_hand},
    {"whatif_logit_lens_last_layer_is_the_output", test_logit_lens_last_layer},
    {"whatif_pin_lands_on_its_head", test_whatif_pin_lands_on_its_head},
    {"whatif_steps_are_the_models_distributions", test_whatif_steps_are_the_models_distributions},
    {"whatif_value_norms_carry_the_gate", test_value_norms_carry_the_gate},
    {"explain_kendall_tau_by_hand", test_kendall_tau_by_hand},
    {"explain_faithfulness_k1_of_leave_one_out", test_faithfulness_k1_of_leave_one_out},
    {"explain_faith_aopc_and_random_spread_by_hand", test_faith_aopc_and_random_spread_by_hand},
    {"explain_methods_read_their_sources", test_methods_read_their_sources},
    {"explain_contrib_vectors_sum_to_the_block_output", test_vectors_sum_to_the_block_output},
    {"explain_contrib_vectors_sum_with_head_gates", test_vectors_sum_with_head_gates},
    {"explain_contrib_block_rows_from_their_vectors", test_block_rows_from_their_vectors},
    {"explain_contrib_cross_nothing_near_is_the_residual", test_cross_nothing_near_is_the_residual},
    {"explain_contrib_l1_proximity_by_hand", test_l1_proximity_by_hand},
    {"explain_contrib_rollout_by_hand", test_rollout_by_hand},
    {"explain_contrib_rollout_two_layers_by_hand", test_rollout_two_layers_by_hand},
    {"explain_contrib_rows_sum_to_one", test_rows_sum_to_one},
    {"explain_contrib_no_cross_output_no_source_share", test_no_cross_output_no_source_share},
    {"explain_grad_input_x_gradient_finite_differences", test_input_x_gradient_against_finite_differences},
    {"explain_grad_saliency_finite_differences", test_saliency_against_finite_differences},
    {"explain_grad_integrated_gradients_complete", test_integrated_gradients_complete},
    {"explain_grad_integrated_gradients_complete_with_a_foil", test_integrated_gradients_complete_with_a_foil},
    {"explain_grad_integrated_gradients_one_step_is_the_midpoint", test_integrated_gradients_one_step_is_the_midpoint},
    {"explain_grad_integrated_gradients_one_step_with_a_foil", test_integrated_gradients_one_step_with_a_foil},
    {"explain_embedding_hook_at_one_is_the_plain_pass", test_embedding_hook_at_one_is_the_plain_pass},
    {"explain_grad_x_gradient_l2_finite_differences", test_input_x_gradient_l2_against_finite_differences},
    {"explain_grad_foil_that_is_the_word_ranks_nothing", test_foil_that_is_the_word_ranks_nothing},
    {"explain_corpus_gold_read_before_any_pair", test_corpus_gold_read_before_any_pair},
    {NULL, NULL},
};
