/* The whole model's gradient against finite differences, for every parameter tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/beam.h"
#include "decode/decode.h"
#include "fixture.h"
#include "gradcheck.h"
#include "nn/model.h"
#include "util/mem.h"
#include "util/rng.h"

enum { B = 2, S = 5, T = 4 };
/* sequence 0 is full, sequence 1 is padded: padding must neither leak nor get gradient */
static const int src[B * S] = {4, 5, 6, 3, 2, 5, 3, 2, 0, 0};
static const int src_len[B] = {5, 3};
static const int tgt_in[B * T] = {1, 4, 7, 8, 1, 6, 0, 0};
static const int tgt_out[B * T] = {4, 7, 8, 2, 6, 2, 0, 0};
static const int tgt_len[B] = {4, 2};

typedef struct {
    Model m;
    ModelBatch b;
    int train;
} ModelCtx;

static double model_loss(void *p) {
    ModelCtx *c = p;
    return model_forward(&c->m, &c->b, c->train, 11, 3);
}

static void setup(ModelCtx *c, int pre, int tie, float dropout, int layers) {
    ModelConfig cfg = fixture_config(7, 9, 8, 2, 12, layers, layers, 16);
    cfg.dropout = dropout, cfg.pre_norm = pre, cfg.tie_embeddings = tie, cfg.label_smoothing = 0.1f;
    memset(c, 0, sizeof *c);
    model_init(&c->m, &cfg);
    model_init_weights(&c->m, 5);
    /* unit norms and zero biases make a special point; move off it so their gradients show */
    Rng r = {99};
    for (size_t i = 0; i < c->m.n_params; i++) c->m.params[i] += 0.1f * rng_normal(&r);
    c->b = (ModelBatch){B, S, T, src, src_len, tgt_in, tgt_out, tgt_len, 0};
    c->train = dropout > 0;
    model_reserve(&c->m, model_arena_floats(&c->m, B, S, T));
}

/* Checks every tensor two ways: the derivative along a random direction over the whole
 * tensor (every element takes part), and single elements drawn at random. */
static int check_all_tensors(ModelCtx *c, const char *what) {
    model_zero_grad(&c->m);
    model_loss(c);
    model_backward(&c->m, &c->b);
    Rng r = {123};
    int bad = 0;
    float *dir = xmalloc(sizeof(float) * c->m.n_params);
    for (int i = 0; i < c->m.n_tensors; i++) {
        const TensorInfo *t = &c->m.tensors[i];
        float *w = c->m.params + t->offset, *g = c->m.grads + t->offset;
        /* directional derivative: (L(w + e d) - L(w - e d)) / 2e against g . d */
        double gd = 0.0, gnorm = 0.0;
        for (size_t j = 0; j < t->size; j++) {
            dir[j] = rng_normal(&r);
            gd += (double)g[j] * dir[j];
            gnorm += (double)g[j] * g[j];
        }
        /* float32 forward: 1e-3 balances rounding noise against ReLU kinks being crossed */
        const float eps = 1e-3f;
        for (size_t j = 0; j < t->size; j++) w[j] += eps * dir[j];
        double lp = model_loss(c);
        for (size_t j = 0; j < t->size; j++) w[j] -= 2 * eps * dir[j];
        double lm = model_loss(c);
        for (size_t j = 0; j < t->size; j++) w[j] += eps * dir[j];
        double num = (lp - lm) / (2 * eps);
        /* |g| sqrt(n) is the size of g . d; the floor is the finite differences' own noise, and
         * matters for b_k, whose true gradient is 0 (softmax ignores a shift shared by a row) */
        double scale = fmax(sqrt(gnorm * (double)t->size), 5e-2);
        double err = fabs(num - gd) / scale;
        /* single elements */
        size_t at = 0;
        double elem = 0.0;
        for (int k = 0; k < 6; k++) {
            size_t j = (size_t)rng_below(&r, t->size);
            double e = gradcheck(model_loss, c, w + j, g + j, 1, eps, 1e-2, NULL, NULL);
            if (e > elem) elem = e, at = j;
        }
        if (err > 3e-2 || elem > 3e-2) {
            fprintf(stderr, "  %s: %-40s |g|=%.3e directional err %.2e, element %zu err %.2e\n", what, t->name,
                    sqrt(gnorm), err, at, elem);
            bad++;
        }
    }
    free(dir);
    return bad;
}

static void test_grad_post_ln_tied(void) {
    ModelCtx c;
    setup(&c, 0, 1, 0.0f, 2);
    int bad = check_all_tensors(&c, "post-LN tied");
    model_free(&c.m);
    CHECK(bad == 0, "%d tensors with wrong gradients", bad);
}

static void test_grad_pre_ln_untied_dropout(void) {
    ModelCtx c;
    setup(&c, 1, 0, 0.2f, 2);
    int bad = check_all_tensors(&c, "pre-LN untied dropout");
    model_free(&c.m);
    CHECK(bad == 0, "%d tensors with wrong gradients", bad);
}

/* The encoder output feeds the cross-attention of every decoder layer: with three
 * decoder layers, each one's K/V path must reach the encoder's weights. */
static void test_grad_reaches_encoder_through_every_cross_attention(void) {
    ModelCtx c;
    setup(&c, 0, 1, 0.0f, 3);
    model_zero_grad(&c.m);
    model_loss(&c);
    model_backward(&c.m, &c.b);
    /* the cross-attention K/V weights of every decoder layer get a gradient */
    for (int l = 0; l < 3; l++) {
        const DecoderLayerParams *g = &c.m.g.dec[l];
        double nk = 0, nv = 0;
        for (int i = 0; i < 64; i++) nk += fabs(g->cross_attn.w_k[i]), nv += fabs(g->cross_attn.w_v[i]);
        CHECK(nk > 0 && nv > 0, "decoder layer %d cross-attention K/V got no gradient", l);
    }
    int bad = check_all_tensors(&c, "3 decoder layers");
    model_free(&c.m);
    CHECK(bad == 0, "%d tensors with wrong gradients", bad);
}

/* Padding must not change the loss of the real tokens: garbage in padded slots is invisible. */
static void test_padding_is_invisible(void) {
    ModelCtx c;
    setup(&c, 0, 1, 0.0f, 2);
    double l1 = model_loss(&c);
    int src2[B * S], tgt_in2[B * T];
    memcpy(src2, src, sizeof src2);
    memcpy(tgt_in2, tgt_in, sizeof tgt_in2);
    src2[8] = 5, src2[9] = 6, tgt_in2[6] = 3, tgt_in2[7] = 8;
    c.b.src = src2, c.b.tgt_in = tgt_in2;
    double l2 = model_loss(&c);
    model_free(&c.m);
    CHECK(fabs(l1 - l2) < 1e-6, "loss changed from %.9f to %.9f when padded slots changed", l1, l2);
}

/* The table names the tensors the way exported weights are read elsewhere. */
static void test_table_names_and_sizes(void) {
    ModelCtx c;
    setup(&c, 0, 1, 0.0f, 2);
    const TensorInfo *t = model_find_tensor(&c.m, "decoder.layers.1.cross_attn.w_k");
    CHECK(t && t->shape[0] == 8 && t->shape[1] == 8, "cross-attention w_k missing or misshapen");
    CHECK(model_find_tensor(&c.m, "encoder.layers.0.self_attn.w_q"), "encoder w_q missing");
    CHECK(!model_find_tensor(&c.m, "generator"), "tied model has a separate generator");
    size_t sum = 0;
    for (int i = 0; i < c.m.n_tensors; i++) sum += c.m.tensors[i].size;
    CHECK(sum == c.m.n_params, "table sizes %zu != buffer %zu", sum, c.m.n_params);
    model_free(&c.m);
}

/* A random batch of FB rows (lengths falling row by row, to FS and FT wide) for a model
 * of 20 source and 23 target tokens, and that model: pre-LN, dropout 0.2. */
enum { FB = 5, FS = 30, FT = 40 };
typedef struct {
    int s[FB * FS], ti[FB * FT], to[FB * FT], sl[FB], tl[FB];
    ModelBatch b;
    Model m;
    int tokens; /* target tokens, padding excluded */
} RandBatch;

static void random_batch_norm(RandBatch *rb, int pre);
static void random_batch(RandBatch *rb) { random_batch_norm(rb, 1); }

static void random_batch_norm(RandBatch *rb, int pre) {
    ModelConfig cfg = fixture_config(20, 23, 16, 2, 24, 2, 2, 48);
    cfg.dropout = 0.2f, cfg.pre_norm = pre, cfg.label_smoothing = 0.1f;
    memset(rb, 0, sizeof *rb);
    Rng r = {5};
    for (int i = 0; i < FB; i++) {
        rb->sl[i] = FS - 3 * i, rb->tl[i] = FT - 4 * i;
        rb->tokens += rb->tl[i];
        for (int j = 0; j < rb->sl[i]; j++) rb->s[i * FS + j] = j == rb->sl[i] - 1 ? 2 : 4 + (int)rng_below(&r, 16);
        for (int j = 0; j < rb->tl[i]; j++)
            rb->ti[i * FT + j] = j ? rb->to[i * FT + j - 1] : 1,
                            rb->to[i * FT + j] = j == rb->tl[i] - 1 ? 2 : 4 + (int)rng_below(&r, 19);
    }
    rb->b = (ModelBatch){FB, FS, FT, rb->s, rb->sl, rb->ti, rb->to, rb->tl, 0};
    CHECK(model_init(&rb->m, &cfg) == 0, "init");
    model_init_weights(&rb->m, 9);
    model_reserve(&rb->m, model_arena_floats(&rb->m, FB, FS, FT));
}

/* A training step's fused passes give the loss and the gradients of model_forward +
 * model_backward bit for bit, over a batch of 160 target tokens (two classifier chunks),
 * with dropout and a normaliser from elsewhere (as parallel.c sets it). */
static void test_forward_backward_fused_is_forward_then_backward(void) {
    static RandBatch rb;
    random_batch(&rb);
    Model *m = &rb.m;
    /* fewer rows a chunk than the default (the arena is carved at the first pass), so
     * these 160 target tokens take two chunks */
    m->classifier_rows = 128;
    CHECK(rb.tokens > m->classifier_rows && rb.tokens <= 2 * m->classifier_rows, "not two chunks");
    float *g1 = xmalloc(sizeof(float) * m->n_params);
    model_zero_grad(m);
    double l1 = model_forward(m, &rb.b, 1, 4, 7);
    m->loss_tokens = 1000;
    model_backward(m, &rb.b);
    memcpy(g1, m->grads, sizeof(float) * m->n_params);
    model_zero_grad(m);
    m->loss_tokens = 1000;
    double l2 = model_forward_backward(m, &rb.b, 4, 7);
    int same = memcmp(g1, m->grads, sizeof(float) * m->n_params) == 0;
    double norm = 0;
    for (size_t i = 0; i < m->n_params; i++) norm += (double)g1[i] * g1[i];
    free(g1);
    model_free(m);
    CHECK(l1 == l2, "loss %.17g vs %.17g", l1, l2);
    CHECK(same && norm > 0, "gradients differ (norm %g)", norm);
}

/* The batch in passes of rows 0-1 and 2-4, each pass's gradients added to the last's,
 * against the whole batch at once: largest gradient difference over the largest
 * gradient, and the loss sums' relative difference. row0_known = 0 runs every pass as
 * if its rows began the batch. */
static double passes_against_whole(RandBatch *rb, int row0_known, double *loss_diff) {
    Model *m = &rb->m;
    float *whole = xmalloc(sizeof(float) * m->n_params);
    model_zero_grad(m);
    m->loss_tokens = rb->tokens;
    model_forward_backward(m, &rb->b, 4, 7);
    double whole_loss = m->loss_sum;
    memcpy(whole, m->grads, sizeof(float) * m->n_params);
    model_zero_grad(m);
    double loss = 0;
    const int cut[] = {0, 2, FB};
    for (int k = 0; k < 2; k++) {
        int first = cut[k];
        ModelBatch pass = {cut[k + 1] - first,
                           FS,
                           FT,
                           rb->s + first * FS,
                           rb->sl + first,
                           rb->ti + first * FT,
                           rb->to + first * FT,
                           rb->tl + first,
                           row0_known ? first : 0};
        m->loss_tokens = rb->tokens;
        model_forward_backward(m, &pass, 4, 7);
        loss += m->loss_sum;
    }
    double worst = 0, largest = 0;
    for (size_t i = 0; i < m->n_params; i++) {
        worst = fmax(worst, fabs((double)whole[i] - m->grads[i]));
        largest = fmax(largest, fabs((double)whole[i]));
    }
    free(whole);
    *loss_diff = fabs(loss - whole_loss) / fabs(whole_loss);
    return worst / largest;
}

/* A batch run in passes of fewer rows (train.pass_tokens), row0 telling each pass where
 * its rows sit, gives the whole batch's loss and gradients up to rounding, dropout on:
 * every pass drops what the whole batch drops there. Without row0 the passes repeat the
 * first rows' masks and the gradients differ, so the check can fail. */
static void test_passes_add_up_to_the_whole_batch(void) {
    static RandBatch rb;
    random_batch(&rb);
    double loss_diff, wrong_loss_diff;
    double diff = passes_against_whole(&rb, 1, &loss_diff);
    double wrong = passes_against_whole(&rb, 0, &wrong_loss_diff);
    model_free(&rb.m);
    CHECK(diff < 1e-5 && loss_diff < 1e-6, "passes differ from the whole batch: gradients %.3g, loss %.3g", diff,
          loss_diff);
    CHECK(wrong > 1e-3, "passes without their place in the batch match it too (%.3g): dropout does not show", wrong);
}

/* A training pass over packed rows (no padding position computed) gives the padded pass's
 * loss, parameter gradients and head-gate gradients up to rounding, dropout on (each
 * element keeps its padded place's mask), pre- and post-LN, gates away from 1. And it
 * computes fewer rows: exactly the sequences' lengths. */
static void test_packed_rows_match_padded(void) {
    for (int pre = 0; pre < 2; pre++) {
        static RandBatch rb;
        random_batch_norm(&rb, pre);
        Model *m = &rb.m;
        int heads = model_head_count(m);
        float *gates = xmalloc(sizeof(float) * (size_t)heads), *padded = xmalloc(sizeof(float) * m->n_params),
              *padded_gates = xmalloc(sizeof(float) * (size_t)heads);
        Rng r = {17};
        for (int i = 0; i < heads; i++) gates[i] = 0.5f + (float)rng_uniform(&r);
        model_set_head_gates(m, gates);
        double loss[2];
        for (int packed = 0; packed < 2; packed++) {
            m->keep_padding = !packed;
            model_zero_grad(m);
            m->loss_tokens = rb.tokens;
            loss[packed] = model_forward_backward(m, &rb.b, 4, 7);
            if (!packed) {
                memcpy(padded, m->grads, sizeof(float) * m->n_params);
                memcpy(padded_gates, model_head_gate_grads(m), sizeof(float) * (size_t)heads);
            }
        }
        int src_rows = 0, tgt_rows = 0;
        for (int i = 0; i < FB; i++) src_rows += rb.sl[i], tgt_rows += rb.tl[i];
        CHECK(m->a.src_pk && m->a.tgt_pk && m->a.src_rows.N == src_rows && m->a.tgt_rows.N == tgt_rows &&
                  tgt_rows < FB * FT,
              "packed pass over %d/%d rows, the sequences have %d/%d", m->a.src_rows.N, m->a.tgt_rows.N, src_rows,
              tgt_rows);
        double worst = 0, largest = 0, worst_gate = 0, largest_gate = 0;
        for (size_t i = 0; i < m->n_params; i++)
            worst = fmax(worst, fabs((double)padded[i] - m->grads[i])),
            largest = fmax(largest, fabs((double)padded[i]));
        const float *g = model_head_gate_grads(m);
        for (int i = 0; i < heads; i++)
            worst_gate = fmax(worst_gate, fabs((double)padded_gates[i] - g[i])),
            largest_gate = fmax(largest_gate, fabs((double)padded_gates[i]));
        free(gates), free(padded), free(padded_gates);
        model_free(m);
        CHECK(fabs(loss[1] - loss[0]) < 1e-6 * fabs(loss[0]), "pre %d: loss %.9g packed, %.9g padded", pre, loss[1],
              loss[0]);
        CHECK(largest > 0 && worst < 1e-5 * largest, "pre %d: gradients differ by %.3g of %.3g", pre, worst, largest);
        CHECK(largest_gate > 0 && worst_gate < 1e-5 * largest_gate, "pre %d: gate gradients differ by %.3g of %.3g",
              pre, worst_gate, largest_gate);
    }
}

/* The attention accessors name the sub-layer they claim to. Each (kind, layer)'s weights
 * are the table's tensors of that name; its acts are that layer's (the test may look
 * inside the arena); the scores a forward pass keeps for it are q . k / sqrt(d_head) of
 * those acts' own q and k, and their probabilities the softmax of those; and each
 * cross-attention's keys are the encoder output through that layer's own W_K. */
static void test_attention_accessors_name_their_layer(void) {
    enum { L = 2, H = 2, D = 8, DH = D / H };
    static const char *names[ATTN_KINDS] = {"encoder.layers.%d.self_attn.w_%c", "decoder.layers.%d.self_attn.w_%c",
                                            "decoder.layers.%d.cross_attn.w_%c"};
    const int rows[ATTN_KINDS] = {S, T, T}, cols[ATTN_KINDS] = {S, T, S};
    const int *kv_len[ATTN_KINDS] = {src_len, tgt_len, src_len};
    ModelCtx c;
    setup(&c, 0, 1, 0.0f, L);
    Model *m = &c.m;
    const AttnActs *want[ATTN_KINDS][L] = {{&m->a.enc[0].attn, &m->a.enc[1].attn},
                                           {&m->a.dec[0].self_attn, &m->a.dec[1].self_attn},
                                           {&m->a.dec[0].cross_attn, &m->a.dec[1].cross_attn}};
    float scores[ATTN_KINDS][L][B * H * S * S]; /* S >= T: room for every kind */
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < L; l++) {
            const AttnParams *w = model_attention_params(m, k, l);
            char name[96];
            snprintf(name, sizeof name, names[k], l, 'q');
            const TensorInfo *tq = model_find_tensor(m, name);
            snprintf(name, sizeof name, names[k], l, 'k');
            const TensorInfo *tk = model_find_tensor(m, name);
            CHECK(w && tq && tk && w->w_q == m->params + tq->offset && w->w_k == m->params + tk->offset,
                  "kind %d layer %d: the params are not the table's %s", k, l, name);
            CHECK(model_attention_acts(m, k, l) == want[k][l], "kind %d layer %d: the acts of another sub-layer", k, l);
            CHECK(model_attention_keep_scores(m, k, l, scores[k][l]) == 0, "kind %d layer %d: scores refused", k, l);
        }
    CHECK(!model_attention_acts(m, ATTN_ENC_SELF, L) && !model_attention_acts(m, ATTN_CROSS, -1) &&
              !model_attention_params(m, ATTN_DEC_SELF, L) && !model_attention_params(m, ATTN_KINDS, 0) &&
              model_attention_keep_scores(m, ATTN_CROSS, L, NULL) == -1,
          "a layer the model lacks was handed out");
    model_loss(&c);
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < L; l++) model_attention_keep_scores(m, k, l, NULL);
    double worst_score = 0.0, worst_p = 0.0, worst_key = 0.0;
    int masks_wrong = 0;
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < L; l++) {
            const AttnActs *a = model_attention_acts(m, k, l);
            int Tq = rows[k], Tk = cols[k];
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < Tq; i++) {
                        int n = kv_len[k][b];
                        if (k == ATTN_DEC_SELF && i + 1 < n) n = i + 1; /* causal */
                        size_t row = (((size_t)b * H + h) * Tq + i) * Tk;
                        const float *kept = scores[k][l] + row, *p = a->p + row;
                        double s[S], max = -INFINITY, sum = 0.0;
                        for (int j = 0; j < n; j++) {
                            s[j] = 0.0;
                            for (int e = 0; e < DH; e++)
                                s[j] += (double)a->q[((size_t)b * Tq + i) * D + h * DH + e] *
                                        a->k[((size_t)b * Tk + j) * D + h * DH + e];
                            s[j] /= sqrt((double)DH);
                            worst_score = fmax(worst_score, fabs(s[j] - kept[j]));
                            max = fmax(max, s[j]);
                        }
                        for (int j = 0; j < n; j++) sum += exp(s[j] - max);
                        for (int j = 0; j < n; j++) worst_p = fmax(worst_p, fabs(exp(s[j] - max) / sum - p[j]));
                        for (int j = n; j < Tk; j++) masks_wrong += kept[j] != -INFINITY || p[j] != 0.0f;
                    }
        }
    for (int l = 0; l < L; l++) {
        const AttnActs *a = model_attention_acts(m, ATTN_CROSS, l);
        const AttnParams *w = model_attention_params(m, ATTN_CROSS, l);
        for (int r = 0; r < B * S; r++)
            for (int j = 0; j < D; j++) {
                double key = w->b_k[j];
                for (int e = 0; e < D; e++) key += (double)m->a.src.out[(size_t)r * D + e] * w->w_k[(size_t)e * D + j];
                worst_key = fmax(worst_key, fabs(key - a->k[(size_t)r * D + j]));
            }
    }
    int differ = memcmp(model_attention_acts(m, ATTN_CROSS, 0)->p, model_attention_acts(m, ATTN_CROSS, 1)->p,
                        sizeof(float) * B * H * T * S) != 0;
    model_free(&c.m);
    CHECK(worst_score < 1e-5, "kept scores differ from q . k / sqrt(d_head) of the same acts by %g", worst_score);
    CHECK(worst_p < 1e-5, "probabilities differ from the softmax of the scores by %g", worst_p);
    CHECK(masks_wrong == 0, "%d masked keys with a score or a weight", masks_wrong);
    CHECK(worst_key < 1e-5, "cross-attention keys differ from the encoder output through that layer's W_K by %g",
          worst_key);
    CHECK(differ, "both decoder layers' cross-attention probabilities are the same");
}

/* ---- head gates ---- */

/* 1 if the n translations of a and b are the same tokens. */
static int seqs_equal(const Seq *a, const Seq *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].len != b[i].len || memcmp(a[i].ids, b[i].ids, sizeof(int) * (size_t)a[i].len) != 0) return 0;
    return 1;
}

/* Every head's gate (one of each kind and layer among them) against central differences of
 * the loss, at gates away from 1 (a gate of 1 would hide a missing factor) and at 0 (a
 * masked head still has a gradient). */
static void test_head_gate_grad(void) {
    ModelCtx c;
    setup(&c, 0, 1, 0.0f, 2);
    int n = model_head_count(&c.m);
    CHECK(n == (2 + 2 * 2) * 2, "%d heads", n);
    float *gates = xmalloc(sizeof(float) * (size_t)n), *num = xmalloc(sizeof(float) * (size_t)n);
    Rng r = {41};
    for (int i = 0; i < n; i++) gates[i] = i == 3 ? 0.0f : 0.5f + (float)rng_uniform(&r);
    model_set_head_gates(&c.m, gates);
    model_zero_grad(&c.m);
    model_loss(&c);
    model_backward(&c.m, &c.b);
    const float *g = model_head_gate_grads(&c.m);
    double worst = 0.0, largest = 0.0;
    for (int i = 0; i < n; i++) {
        /* two step sizes, the better kept: a ReLU kink crossed by the larger step, or
         * float32 rounding at the smaller, spoils one of them, not both */
        double best = INFINITY, keep = gates[i];
        for (int s = 0; s < 2; s++) {
            const float eps = s ? 2.5e-4f : 1e-3f;
            gates[i] = (float)keep + eps, model_set_head_gates(&c.m, gates);
            double lp = model_loss(&c);
            gates[i] = (float)keep - eps, model_set_head_gates(&c.m, gates);
            double lm = model_loss(&c);
            num[i] = (float)((lp - lm) / (2 * eps));
            double err = fabs(num[i] - g[i]) / fmax(fabs(num[i]) + fabs(g[i]), 1e-2);
            if (err < best) best = err;
        }
        gates[i] = (float)keep;
        if (best > worst) worst = best;
        if (fabs(g[i]) > largest) largest = fabs(g[i]);
    }
    model_free(&c.m);
    free(gates), free(num);
    CHECK(largest > 1e-3, "every gate gradient is ~0 (%g): the check would pass on nothing", largest);
    /* measured 3.3e-3 at worst; a gradient 3% off fails at 1.5e-2 */
    CHECK(worst < 6e-3, "gate gradient off by %.3g (relative)", worst);
}

/* Gates all 1 are the plain model, bit for bit: loss, every gradient, and the cached
 * decoding step's logits; and gating off again restores the plain path. */
static void test_head_gates_at_one_change_nothing(void) {
    ModelCtx a, b;
    setup(&a, 1, 0, 0.2f, 2);
    setup(&b, 1, 0, 0.2f, 2);
    int n = model_head_count(&b.m);
    float *ones = xmalloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) ones[i] = 1.0f;
    model_set_head_gates(&b.m, ones);
    free(ones);
    model_zero_grad(&a.m), model_zero_grad(&b.m);
    double la = model_loss(&a), lb = model_loss(&b);
    model_backward(&a.m, &a.b), model_backward(&b.m, &b.b);
    CHECK(la == lb, "loss %.17g gated, %.17g plain", lb, la);
    CHECK(memcmp(a.m.grads, b.m.grads, sizeof(float) * a.m.n_params) == 0, "gradients differ with gates at 1");
    Seq srcs[4], out_a[4], out_b[4];
    fixture_sources(srcs, 4);
    greedy_decode(&a.m, srcs, 4, out_a);
    greedy_decode(&b.m, srcs, 4, out_b);
    int same = seqs_equal(out_a, out_b, 4);
    for (int i = 0; i < 4; i++) free(srcs[i].ids), free(out_a[i].ids), free(out_b[i].ids);
    model_set_head_gates(&b.m, NULL);
    double off = model_loss(&b);
    model_free(&a.m), model_free(&b.m);
    CHECK(same, "greedy translations differ with gates at 1");
    CHECK(off == la && !model_head_gate_grads(&b.m), "gating off is not the plain model again");
}

/* Masking a head (gate 0) against the same model with that head's rows of W_O zeroed and
 * no gates: the same loss, and through incremental decoding the same translations. */
static void test_masked_head_is_zeroed_w_o_rows(void) {
    for (int kind = 0; kind < ATTN_KINDS; kind++) {
        Model gated, zeroed;
        fixture_model(&gated, 0);
        fixture_model(&zeroed, 0);
        int layer = kind == ATTN_ENC_SELF ? 0 : 1, head = 1, d = gated.cfg.d_model, dh = d / gated.cfg.heads;
        int n = model_head_count(&gated);
        float *gates = xmalloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++) gates[i] = 1.0f;
        gates[model_head_index(&gated, (AttnKind)kind, layer, head)] = 0.0f;
        model_set_head_gates(&gated, gates);
        /* W_O is (d, d) with the context's columns as rows: head h owns rows h*dh .. h*dh+dh-1 */
        float *w_o = model_attention_params(&zeroed, (AttnKind)kind, layer)->w_o;
        memset(w_o + (size_t)head * dh * d, 0, sizeof(float) * (size_t)dh * d);
        Seq srcs[6], out_g[6], out_z[6], out_plain[6];
        fixture_sources(srcs, 6);
        greedy_decode(&gated, srcs, 6, out_g);
        greedy_decode(&zeroed, srcs, 6, out_z);
        model_set_head_gates(&gated, NULL);
        greedy_decode(&gated, srcs, 6, out_plain);
        int same = seqs_equal(out_g, out_z, 6), differs = !seqs_equal(out_g, out_plain, 6);
        /* the full forward's loss, to the bit */
        int bs[2] = {4, 5}, bl[1] = {2}, ti[3] = {1, 6, 7}, to[3] = {6, 7, 2}, tl[1] = {3};
        ModelBatch mb = {1, 2, 3, bs, bl, ti, to, tl, 0};
        model_set_head_gates(&gated, gates);
        free(gates);
        double lg = model_forward(&gated, &mb, 0, 1, 1), lz = model_forward(&zeroed, &mb, 0, 1, 1);
        for (int i = 0; i < 6; i++) free(srcs[i].ids), free(out_g[i].ids), free(out_z[i].ids), free(out_plain[i].ids);
        model_free(&gated), model_free(&zeroed);
        CHECK(same, "kind %d: masking the head and zeroing its W_O rows translate differently", kind);
        CHECK(lg == lz, "kind %d: loss %.17g masked, %.17g with zero rows", kind, lg, lz);
        CHECK(differs || kind == ATTN_ENC_SELF, "kind %d: masking a head changed no translation: the test is blind",
              kind);
    }
}

const TestCase model_tests[] = {
    {"model_table_names_and_sizes", test_table_names_and_sizes},
    {"model_forward_backward_fused_bit_identical", test_forward_backward_fused_is_forward_then_backward},
    {"model_passes_add_up_to_the_whole_batch", test_passes_add_up_to_the_whole_batch},
    {"model_packed_rows_match_padded", test_packed_rows_match_padded},
    {"model_grad_every_tensor_post_ln_tied", test_grad_post_ln_tied},
    {"model_grad_every_tensor_pre_ln_untied_dropout", test_grad_pre_ln_untied_dropout},
    {"model_grad_encoder_through_every_cross_attention", test_grad_reaches_encoder_through_every_cross_attention},
    {"model_padding_is_invisible", test_padding_is_invisible},
    {"model_attention_accessors_name_their_layer", test_attention_accessors_name_their_layer},
    {"model_head_gate_grad", test_head_gate_grad},
    {"model_head_gates_at_one_change_nothing", test_head_gates_at_one_change_nothing},
    {"model_masked_head_is_zeroed_w_o_rows", test_masked_head_is_zeroed_w_o_rows},
    {NULL, NULL},
};
