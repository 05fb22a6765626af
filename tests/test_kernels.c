/* Every kernel's backward against central finite differences, attention in all three uses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcheck.h"
#include "nn/headprod.h"
#include "nn/kernels.h"
#include "nn/multihead.h"
#include "nn/panels.h"
#include "nn/vecmath.h"
#include "util/mem.h"
#include "util/rng.h"

#define TOL 2e-3

/* ---- matmul ---- */
typedef struct {
    int N, Cin, Cout;
    float *x, *w, *b, *out, *dw_out;
} MatmulCtx;
static double matmul_loss(void *p) {
    MatmulCtx *c = p;
    matmul_forward(c->out, c->x, c->w, c->b, c->N, c->Cin, c->Cout);
    return weighted_sum(c->dw_out, c->out, (size_t)c->N * c->Cout);
}
static void test_matmul(void) {
    Rng r = {1};
    MatmulCtx c = {.N = 5, .Cin = 4, .Cout = 3};
    float x[20], w[12], b[3], out[15], dout[15], dx[20] = {0}, dw[12] = {0}, db[3] = {0};
    fill_normal(x, 20, 1, &r), fill_normal(w, 12, 1, &r), fill_normal(b, 3, 1, &r), fill_normal(dout, 15, 1, &r);
    c.x = x, c.w = w, c.b = b, c.out = out, c.dw_out = dout;
    matmul_backward(dx, dw, db, dout, x, w, 5, 4, 3);
    CHECK(gradcheck(matmul_loss, &c, x, dx, 20, 1e-2f, 1e-1, NULL, NULL) < TOL, "d input");
    CHECK(gradcheck(matmul_loss, &c, w, dw, 12, 1e-2f, 1e-1, NULL, NULL) < TOL, "d weight");
    CHECK(gradcheck(matmul_loss, &c, b, db, 3, 1e-2f, 1e-1, NULL, NULL) < TOL, "d bias");
}

/* ---- logits against a row-per-class table ---- */
typedef struct {
    float *x, *table, *out, *w;
} LogitsCtx;
static double logits_loss(void *p) {
    LogitsCtx *c = p;
    logits_forward(c->out, c->x, c->table, 3, 4, 5);
    return weighted_sum(c->w, c->out, 15);
}
static void test_logits(void) {
    Rng r = {12};
    float x[12], table[20], out[15], dout[15], dx[12], dtable[20] = {0};
    fill_normal(x, 12, 1, &r), fill_normal(table, 20, 1, &r), fill_normal(dout, 15, 1, &r);
    fill_normal(dx, 12, 1, &r); /* backward adds into dinp: start from something */
    float dx0[12];
    memcpy(dx0, dx, sizeof dx);
    LogitsCtx c = {x, table, out, dout};
    logits_backward(dx, dtable, dout, x, table, 3, 4, 5);
    for (int i = 0; i < 12; i++) dx[i] -= dx0[i];
    CHECK(gradcheck(logits_loss, &c, x, dx, 12, 1e-2f, 1e-1, NULL, NULL) < TOL, "d input");
    CHECK(gradcheck(logits_loss, &c, table, dtable, 20, 1e-2f, 1e-1, NULL, NULL) < TOL, "d table");
}

/* The decoding step's logits against the table by column: the turned table holds every
 * element where it belongs (tiles of 32 with ragged edges on both sides), and the product
 * is the row-per-class one (the same sums in the same order; to rounding, as a kernel set
 * may cut the two forms differently). */
static void test_logits_by_column(void) {
    enum { N = 5, C = 45, V = 70 };
    Rng r = {13};
    float *x = xmalloc(sizeof(float) * N * C), *table = xmalloc(sizeof(float) * V * C);
    float *table_t = xmalloc(sizeof(float) * C * V), *want = xmalloc(sizeof(float) * N * V),
          *got = xmalloc(sizeof(float) * N * V);
    fill_normal(x, N * C, 1, &r), fill_normal(table, V * C, 1, &r);
    table_turn(table_t, table, V, C);
    int misplaced = 0;
    for (int v = 0; v < V; v++)
        for (int c = 0; c < C; c++) misplaced += table_t[c * V + v] != table[v * C + c];
    CHECK(misplaced == 0, "%d of %d elements of the turned table misplaced", misplaced, V * C);
    logits_forward(want, x, table, N, C, V);
    logits_forward_by_column(got, x, table_t, N, C, V);
    double worst = 0;
    for (int i = 0; i < N * V; i++) worst = fmax(worst, fabs(got[i] - want[i]) / (1 + fabs(want[i])));
    CHECK(worst < 1e-5, "by column differs from by row by %g", worst);
    free(x), free(table), free(table_t), free(want), free(got);
}

/* ---- softmax (one masked row) ---- */
typedef struct {
    int cols, valid;
    float *s, *p, *w;
} SoftmaxCtx;
static double softmax_loss(void *p) {
    SoftmaxCtx *c = p;
    softmax_forward(c->p, c->s, c->cols, c->valid);
    return weighted_sum(c->w, c->p, (size_t)c->cols);
}
static void test_softmax(void) {
    Rng r = {2};
    float s[7], p[7], w[7], ds[7];
    fill_normal(s, 7, 2, &r), fill_normal(w, 7, 1, &r);
    SoftmaxCtx c = {7, 5, s, p, w};
    softmax_loss(&c);
    CHECK(p[5] == 0.0f && p[6] == 0.0f, "masked entries must be exactly 0");
    double sum = 0;
    for (int j = 0; j < 7; j++) sum += p[j];
    CHECK(fabs(sum - 1.0) < 1e-6, "row sums to %g", sum);
    softmax_backward(ds, w, p, 7);
    CHECK(gradcheck(softmax_loss, &c, s, ds, 7, 1e-2f, 1e-1, NULL, NULL) < TOL, "d scores");
}

/* ---- layernorm ---- */
typedef struct {
    int N, C;
    float *x, *g, *b, *out, *mean, *rstd, *w;
} LnCtx;
static double ln_loss(void *p) {
    LnCtx *c = p;
    layernorm_forward(c->out, c->mean, c->rstd, c->x, c->g, c->b, c->N, c->C);
    return weighted_sum(c->w, c->out, (size_t)c->N * c->C);
}
static void test_layernorm(void) {
    Rng r = {3};
    enum { N = 3, C = 8 };
    float x[N * C], g[C], b[C], out[N * C], mean[N], rstd[N], w[N * C];
    float dx[N * C] = {0}, dg[C] = {0}, db[C] = {0};
    fill_normal(x, N * C, 1, &r), fill_normal(g, C, 1, &r), fill_normal(b, C, 1, &r), fill_normal(w, N * C, 1, &r);
    LnCtx c = {N, C, x, g, b, out, mean, rstd, w};
    ln_loss(&c);
    layernorm_backward(dx, dg, db, w, x, g, mean, rstd, N, C);
    CHECK(gradcheck(ln_loss, &c, x, dx, N * C, 1e-2f, 1e-1, NULL, NULL) < TOL, "d input");
    CHECK(gradcheck(ln_loss, &c, g, dg, C, 1e-2f, 1e-1, NULL, NULL) < TOL, "d gamma");
    CHECK(gradcheck(ln_loss, &c, b, db, C, 1e-2f, 1e-1, NULL, NULL) < TOL, "d beta");
}

/* The forward pass against its definition written out in double, y = (x - mean) /
 * sqrt(var + eps) * gamma + beta with the biased variance and eps = 1e-5 (PyTorch's):
 * one row's variance (9e-6) is about eps, where eps's place matters (1 / (sqrt(var) +
 * eps) is 45% off there), beside an ordinary row with a mean far from 0. */
static void test_layernorm_forward_by_definition(void) {
    enum { N = 2, C = 4 };
    const float x[N * C] = {0.003f, -0.003f, 0.003f, -0.003f, 2.0f, 3.5f, -1.0f, 0.5f};
    const float g[C] = {1.5f, -0.5f, 1.0f, 2.0f}, b[C] = {0.1f, 0.0f, -0.2f, 0.3f};
    float out[N * C], mean[N], rstd[N];
    layernorm_forward(out, mean, rstd, x, g, b, N, C);
    for (int n = 0; n < N; n++) {
        double m = 0, var = 0;
        for (int c = 0; c < C; c++) m += x[n * C + c];
        m /= C;
        for (int c = 0; c < C; c++) var += (x[n * C + c] - m) * (x[n * C + c] - m);
        var /= C;
        double r = 1.0 / sqrt(var + 1e-5);
        CHECK(fabs(mean[n] - m) < 1e-6 && fabs(rstd[n] - r) < 1e-4 * r, "row %d: mean %g rstd %g, want %g %g", n,
              mean[n], rstd[n], m, r);
        for (int c = 0; c < C; c++) {
            double want = (x[n * C + c] - m) * r * g[c] + b[c];
            CHECK(fabs(out[n * C + c] - want) < 1e-4 * (1 + fabs(want)), "row %d col %d: %.7g, by definition %.7g", n,
                  c, out[n * C + c], want);
        }
    }
}

/* ---- relu ---- */
typedef struct {
    float *x, *out, *w;
} ReluCtx;
static double relu_loss(void *p) {
    ReluCtx *c = p;
    relu_forward(c->out, c->x, 16);
    return weighted_sum(c->w, c->out, 16);
}
static int relu_kink(size_t i, void *p) { return fabsf(((ReluCtx *)p)->x[i]) < 0.05f; }
static void test_relu(void) {
    Rng r = {4};
    float x[16], out[16], w[16], dx[16] = {0};
    fill_normal(x, 16, 1, &r), fill_normal(w, 16, 1, &r);
    ReluCtx c = {x, out, w};
    relu_loss(&c);
    relu_backward(dx, w, out, 16);
    CHECK(gradcheck(relu_loss, &c, x, dx, 16, 1e-2f, 1e-1, relu_kink, NULL) < TOL, "d input");
    /* in place, as the feed-forward backward runs it: the same gradient */
    float inplace[16];
    memcpy(inplace, w, sizeof inplace);
    relu_backward(inplace, inplace, out, 16);
    CHECK(memcmp(inplace, dx, sizeof dx) == 0, "in-place backward differs");
}

/* ---- dropout ---- */
typedef struct {
    float *x, *out;
    uint8_t *mask;
    float *w;
} DropCtx;
static double drop_loss(void *p) {
    DropCtx *c = p;
    dropout_forward(c->out, c->mask, c->x, 64, 0.25f, 77, 0);
    return weighted_sum(c->w, c->out, 64);
}
static void test_dropout(void) {
    Rng r = {5};
    float x[64], out[64], w[64], dx[64] = {0};
    uint8_t mask[64];
    fill_normal(x, 64, 1, &r), fill_normal(w, 64, 1, &r);
    DropCtx c = {x, out, mask, w};
    drop_loss(&c);
    int zeros = 0;
    for (int i = 0; i < 64; i++) {
        CHECK(mask[i] <= 1, "mask value %d", mask[i]);
        CHECK(mask[i] ? fabsf(out[i] - x[i] / 0.75f) < 1e-5f : out[i] == 0.0f, "kept values scaled, dropped ones 0");
        zeros += mask[i] == 0;
    }
    CHECK(zeros > 4 && zeros < 32, "%d of 64 dropped at p=0.25", zeros);
    dropout_backward(dx, w, mask, 64, 0.25f);
    CHECK(gradcheck(drop_loss, &c, x, dx, 64, 1e-2f, 1e-1, NULL, NULL) < TOL, "d input");
    /* in place, as the residual and embedding backward passes run it */
    float inplace[64];
    memcpy(inplace, w, sizeof inplace);
    dropout_backward(inplace, inplace, mask, 64, 0.25f);
    CHECK(memcmp(inplace, dx, sizeof dx) == 0, "in-place backward differs");
    /* a part of the buffer, at any offset (not only multiples of 4), gets the whole
     * buffer's masks for its elements: shards and chunks of a batch drop what the whole
     * batch would */
    int cuts[] = {1, 7, 13, 30, 61};
    drop_loss(&c); /* out again at x itself: the gradient check left the last probe's */
    for (int c = 0; c < 5; c++) {
        float part_out[64];
        uint8_t part_mask[64];
        int at = cuts[c], len = 64 - at < 9 ? 64 - at : 9;
        dropout_forward(part_out, part_mask, x + at, (size_t)len, 0.25f, 77, (size_t)at);
        CHECK(memcmp(part_mask, mask + at, (size_t)len) == 0, "mask of the part at %d differs from the whole's", at);
        CHECK(memcmp(part_out, out + at, sizeof(float) * (size_t)len) == 0, "output of the part at %d differs", at);
        /* a residual's sum in one pass: the same mask, and dropout's output plus the residual */
        float sum[64];
        uint8_t sum_mask[64];
        dropout_residual_forward(sum, sum_mask, x + at, w + at, (size_t)len, 0.25f, 77, (size_t)at);
        CHECK(memcmp(sum_mask, part_mask, (size_t)len) == 0, "residual dropout's mask at %d differs", at);
        for (int i = 0; i < len; i++)
            CHECK(sum[i] == part_out[i] + w[at + i], "residual dropout at %d, element %d: %g, not %g", at, i,
                  (double)sum[i], (double)(part_out[i] + w[at + i]));
    }
}

/* ---- embedding ---- */
typedef struct {
    float *table, *pos, *out, *w;
    int *tok;
} EmbCtx;
static double emb_loss(void *p) {
    EmbCtx *c = p;
    embedding_forward(c->out, c->tok, c->table, c->pos, 2.0f, 2, 3, 4);
    return weighted_sum(c->w, c->out, 24);
}
static void test_embedding(void) {
    Rng r = {6};
    float table[5 * 4], pos[3 * 4], out[24], w[24], dtable[20] = {0};
    int tok[6] = {1, 3, 3, 0, 4, 1};
    fill_normal(table, 20, 1, &r), fill_normal(w, 24, 1, &r);
    positional_table(pos, 3, 4);
    EmbCtx c = {table, pos, out, w, tok};
    embedding_backward(dtable, w, tok, 2.0f, 6, 4);
    CHECK(gradcheck(emb_loss, &c, table, dtable, 20, 1e-2f, 1e-1, NULL, NULL) < TOL, "d table");
}

/* ---- label-smoothed cross-entropy ---- */
typedef struct {
    float *logits, *probs;
    int *tgt;
} CeCtx;
static double ce_loss(void *p) {
    CeCtx *c = p;
    int count;
    return crossentropy_forward(c->probs, c->logits, c->tgt, 4, 6, 0.1f, 0, &count, NULL);
}
static void test_crossentropy(void) {
    Rng r = {7};
    float logits[24], probs[24], d[24];
    int tgt[4] = {2, 0, 5, 1}; /* row 1 is padding */
    fill_normal(logits, 24, 2, &r);
    CeCtx c = {logits, probs, tgt};
    int count;
    double nll;
    crossentropy_forward(probs, logits, tgt, 4, 6, 0.1f, 0, &count, &nll);
    CHECK(count == 3, "pad row counted");
    crossentropy_backward(d, probs, tgt, 4, 6, 0.1f, 0, 1.0f);
    for (int v = 0; v < 6; v++) CHECK(d[6 + v] == 0.0f, "pad row has a gradient");
    CHECK(gradcheck(ce_loss, &c, logits, d, 24, 1e-2f, 1e-1, NULL, NULL) < TOL, "d logits");
    /* in place, as the model calls it: probabilities overwrite the logits */
    float inplace[24];
    memcpy(inplace, logits, sizeof inplace);
    double separate = crossentropy_forward(probs, logits, tgt, 4, 6, 0.1f, 0, &count, NULL);
    double aliased = crossentropy_forward(inplace, inplace, tgt, 4, 6, 0.1f, 0, &count, NULL);
    CHECK(separate == aliased, "in-place loss %.9g differs from %.9g", aliased, separate);
    /* with eps = 0 the loss is the plain negative log-likelihood */
    double plain = crossentropy_forward(probs, logits, tgt, 4, 6, 0.0f, 0, &count, &nll);
    CHECK(fabs(plain - nll) < 1e-9, "eps=0 loss %g != nll %g", plain, nll);
}

/* The training path's one pass per row gives the loss and the gradient of the forward and
 * backward apart, bit for bit: a vocabulary of no whole vector width, a pad row, a scale
 * not 1, in place as the classifier calls it. */
static void test_crossentropy_forward_backward_is_both(void) {
    enum { N = 5, V = 37 };
    Rng r = {11};
    float logits[N * V], probs[N * V], d[N * V], fused[N * V];
    int tgt[N] = {36, 0, 7, 0, 19}; /* rows 1 and 3 are padding */
    fill_normal(logits, N * V, 3, &r);
    memcpy(fused, logits, sizeof fused);
    fill_normal(d, N * V, 1, &r); /* the pad rows must be written, not left as they were */
    int count, count2;
    double nll, nll2;
    double apart = crossentropy_forward(probs, logits, tgt, N, V, 0.1f, 0, &count, &nll);
    crossentropy_backward(d, probs, tgt, N, V, 0.1f, 0, 0.37f);
    double both = crossentropy_forward_backward(fused, fused, tgt, N, V, 0.1f, 0, 0.37f, &count2, &nll2);
    CHECK(count == 3 && count2 == 3, "counted %d and %d rows, not 3", count, count2);
    CHECK(apart == both && nll == nll2, "loss %.17g / nll %.17g apart, %.17g / %.17g in one pass", apart, nll, both,
          nll2);
    int differ = 0;
    for (int i = 0; i < N * V; i++) differ += memcmp(&d[i], &fused[i], sizeof(float)) != 0;
    CHECK(differ == 0, "%d of %d gradient elements differ from forward then backward", differ, N * V);
}

/* ---- the fused classifier: 7 rows in chunks of 3 (the last one short), a pad row ---- */
typedef struct {
    float *x, *table;
    const ClassifierScratch *scratch;
    int *tgt;
} ClsCtx;
static double cls_loss(void *p) {
    ClsCtx *c = p;
    int count;
    return classifier_forward_backward(c->scratch, c->x, c->table, c->tgt, 7, 4, 6, 0.1f, 0, &count, NULL, NULL, NULL,
                                       0);
}
static void test_classifier_fused(void) {
    Rng r = {31};
    float x[28], table[24], logits_chunk[18], x_chunk[12], dx_chunk[12], dx[28], dtable[24] = {0}, logits[42];
    int rows[3], labels[3];
    ClassifierScratch scratch = {3, logits_chunk, x_chunk, dx_chunk, rows, labels};
    int tgt[7] = {2, 0, 5, 1, 3, 3, 4}; /* row 1 is padding */
    fill_normal(x, 28, 1, &r), fill_normal(table, 24, 1, &r);
    fill_normal(dx, 28, 1, &r); /* dinp is overwritten by nothing but added into: the kernel must add */
    float dx0[28];
    memcpy(dx0, dx, sizeof dx);
    ClsCtx c = {x, table, &scratch, tgt};
    int count, count2;
    double nll, nll2;
    double loss = classifier_forward_backward(&scratch, x, table, tgt, 7, 4, 6, 0.1f, 0, &count, &nll, dx, dtable,
                                              1.0f);
    for (int i = 0; i < 28; i++) dx[i] -= dx0[i];
    /* the same numbers as the separate kernels over the whole matrix */
    logits_forward(logits, x, table, 7, 4, 6);
    double whole = crossentropy_forward(logits, logits, tgt, 7, 6, 0.1f, 0, &count2, &nll2);
    CHECK(count == 6 && count2 == 6 && fabs(loss - whole) < 1e-9 && fabs(nll - nll2) < 1e-9, "loss %.12g vs %.12g",
          loss, whole);
    for (int k = 0; k < 4; k++) CHECK(dx[4 + k] == 0.0f, "pad row has an input gradient");
    CHECK(gradcheck(cls_loss, &c, x, dx, 28, 1e-2f, 1e-1, NULL, NULL) < TOL, "d input");
    CHECK(gradcheck(cls_loss, &c, table, dtable, 24, 1e-2f, 1e-1, NULL, NULL) < TOL, "d table");
    /* a pad row is never read: no product and no softmax spent on it (a NaN there would
     * reach the table's gradient through 0 x NaN if it were multiplied) */
    for (int k = 0; k < 4; k++) x[4 + k] = NAN;
    memset(dtable, 0, sizeof dtable);
    double with_nan = classifier_forward_backward(&scratch, x, table, tgt, 7, 4, 6, 0.1f, 0, &count, NULL, dx, dtable,
                                                  1.0f);
    int finite = isfinite(with_nan);
    for (int i = 0; i < 24; i++) finite &= isfinite(dtable[i]) != 0;
    CHECK(finite && with_nan == loss, "a pad row's input was used: loss %g", with_nan);
}

/* ---- attention: encoder self (padded), decoder masked self, cross ---- */
typedef struct {
    AttnShape s;
    AttnParams w;
    AttnActs a;
    float *xq, *xkv, *wout;
} AttnCtx;

static double attn_loss(void *p) {
    AttnCtx *c = p;
    attention_forward(&c->a, &c->w, c->xq, c->xkv, &c->s);
    return weighted_sum(c->wout, c->a.out, (size_t)c->s.B * c->s.Tq * c->s.d);
}

static float *alloc_normal(size_t n, Rng *r, float std) {
    float *p = xmalloc(n * sizeof(float));
    fill_normal(p, n, std, r);
    return p;
}

static void check_attention(int Tq, int Tk, int causal, int self, const char *what) {
    enum { B = 2, d = 8, H = 2 };
    Rng r = {8 + (uint64_t)Tq * 31 + (uint64_t)Tk + (uint64_t)causal};
    int kv_len[B] = {Tk, Tk > 2 ? Tk - 2 : 1};
    AttnCtx c = {.s = {B, Tq, Tk, d, H, kv_len, causal, Tk}};
    float **wp[8] = {&c.w.w_q, &c.w.b_q, &c.w.w_k, &c.w.b_k, &c.w.w_v, &c.w.b_v, &c.w.w_o, &c.w.b_o};
    AttnParams g;
    float **gp[8] = {&g.w_q, &g.b_q, &g.w_k, &g.b_k, &g.w_v, &g.b_v, &g.w_o, &g.b_o};
    for (int i = 0; i < 8; i++) {
        size_t n = i % 2 ? d : d * d;
        *wp[i] = alloc_normal(n, &r, 0.5f);
        *gp[i] = xcalloc(n, sizeof(float));
    }
    size_t nq = (size_t)B * Tq * d, nk = (size_t)B * Tk * d;
    c.xq = alloc_normal(nq, &r, 1);
    c.xkv = self ? c.xq : alloc_normal(nk, &r, 1);
    c.wout = alloc_normal(nq, &r, 1);
    c.a.q = xmalloc(nq * 4), c.a.k = xmalloc(nk * 4), c.a.v = xmalloc(nk * 4);
    c.a.p = xmalloc((size_t)B * H * Tq * Tk * 4), c.a.ctx = xmalloc(nq * 4), c.a.out = xmalloc(nq * 4);
    AttnScratch sc = {xmalloc(nq * 4), xmalloc(nk * 4), xmalloc(nk * 4), xmalloc(nq * 4),
                      xmalloc((size_t)B * H * Tq * Tk * 4)};
    float *dxq = xcalloc(nq, 4), *dxkv = self ? dxq : xcalloc(nk, 4);
    attn_loss(&c);
    /* probabilities: rows sum to one, masked keys exactly zero */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Tq; i++) {
                const float *row = c.a.p + (((size_t)b * H + h) * Tq + i) * Tk;
                int valid = attention_valid_keys(&c.s, b, i);
                double sum = 0;
                for (int j = 0; j < Tk; j++) {
                    if (j >= valid) CHECK(row[j] == 0.0f, "%s: masked key %d has p=%g", what, j, row[j]);
                    sum += row[j];
                }
                CHECK(fabs(sum - 1.0) < 1e-5, "%s: row sums to %g", what, sum);
            }
    attention_backward(&g, dxq, dxkv, c.wout, &c.a, &c.w, c.xq, c.xkv, &c.s, &sc);
    const char *names[8] = {"w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o"};
    for (int i = 0; i < 8; i++) {
        size_t n = i % 2 ? d : d * d;
        double e = gradcheck(attn_loss, &c, *wp[i], *gp[i], n, 1e-2f, 1e-1, NULL, NULL);
        CHECK(e < TOL, "%s: d %s error %.2e", what, names[i], e);
    }
    double e = gradcheck(attn_loss, &c, c.xq, dxq, nq, 1e-2f, 1e-1, NULL, NULL);
    CHECK(e < TOL, "%s: d x_q error %.2e", what, e);
    if (!self) {
        e = gradcheck(attn_loss, &c, c.xkv, dxkv, nk, 1e-2f, 1e-1, NULL, NULL);
        CHECK(e < TOL, "%s: d x_kv (the encoder output) error %.2e", what, e);
    }
    for (int i = 0; i < 8; i++) free(*wp[i]), free(*gp[i]);
    if (!self) free(c.xkv), free(dxkv);
    free(c.xq), free(c.wout), free(dxq);
    free(c.a.q), free(c.a.k), free(c.a.v), free(c.a.p), free(c.a.ctx), free(c.a.out);
    free(sc.dq), free(sc.dk), free(sc.dv), free(sc.dctx), free(sc.dp);
}

static void test_attention_encoder_self(void) { check_attention(5, 5, 0, 1, "encoder self"); }
static void test_attention_decoder_masked(void) { check_attention(5, 5, 1, 1, "decoder masked self"); }
static void test_attention_cross(void) { check_attention(4, 6, 0, 0, "cross"); }
/* one source position: P is a column, and P^T dO a product whose A has both strides 1 */
static void test_attention_cross_one_key(void) { check_attention(4, 1, 0, 0, "cross over one key"); }

/* ---- vecmath: exp against libm's double exp, the lane sums against their stated order ---- */
static void test_vec_exp(void) {
    enum { N = 200003 }; /* odd: the tail runs too */
    float *x = xmalloc(sizeof(float) * N), *y = xmalloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = -87.3f + 175.3f * (float)i / (float)(N - 1);
    vec_exp(y, x, 0.0f, N);
    double worst = 0.0;
    float at = 0.0f;
    for (int i = 0; i < N; i++) {
        double e = exp((double)x[i]), rel = fabs((double)y[i] - e) / e;
        if (rel > worst) worst = rel, at = x[i];
    }
    free(x), free(y);
    CHECK(worst < 2e-7, "exp's largest relative error %.3g (at %g) is over 2e-7", worst, (double)at);
    float in[6] = {0.0f, 1.0f, -100.0f, -INFINITY, NAN, 3.0f}, out[6];
    vec_exp(out, in, 1.0f, 6); /* shifted by 1: exp(-1), 1, ~0, 0, NaN, exp(2) */
    CHECK(out[1] == 1.0f, "exp(0) = %.9g, not 1", (double)out[1]);
    CHECK(out[2] == 0.0f && out[3] == 0.0f, "exp(-101) = %g and exp(-inf) = %g, not 0", (double)out[2], (double)out[3]);
    CHECK(isnan(out[4]), "exp(NaN) = %g: a NaN must reach the guards", (double)out[4]);
    CHECK(fabs(out[0] - exp(-1.0)) < 1e-7 && fabs(out[5] / exp(2.0) - 1.0) < 2e-7, "exp(-1) %.9g, exp(2) %.9g",
          (double)out[0], (double)out[5]);
}

/* ---- one head's small products ---- */

/* C (m, n) from A (m, k) with element (i, j) at a[i * a_row + j * a_col] and B (k, n) with
 * rows ldb apart, as headprod.h promises: each element one
 * chain of fmaf over j from zero, then times alpha, set or added; also the exact product
 * (double) into exact. */
static void head_prod_reference(float *c, double *exact, int ldc, const float *a, int a_row, int a_col, const float *b,
                                int ldb, int m, int n, int k, float alpha, HeadMode mode) {
    for (int i = 0; i < m; i++)
        for (int e = 0; e < n; e++) {
            float acc = 0.0f;
            double x = 0.0;
            for (int j = 0; j < k; j++) {
                float av = a[(size_t)i * a_row + (size_t)j * a_col], bv = b[(size_t)j * ldb + e];
                acc = fmaf(av, bv, acc);
                x += (double)av * bv;
            }
            float *ce = &c[(size_t)i * ldc + e];
            exact[(size_t)i * ldc + e] = (mode == HEAD_ADD ? *ce : 0.0) + (double)alpha * x;
            *ce = mode == HEAD_ADD ? *ce + alpha * acc : alpha * acc;
        }
}

/* head_prod (A as rows or transposed, set and added) against the chains bit for bit, and
 * against the exact product, over shapes with every kind of edge: rows not a multiple of
 * the block's four, widths that end in each of its blocks of 16, 8, 4 columns and fewer,
 * long inner sums; nothing outside C's m x n window is written. */
static void test_head_products(void) {
    static const int ms[] = {1, 3, 4, 5, 9}, ns[] = {1, 3, 4, 7, 8, 12, 15, 16, 17, 24, 28, 33}, ks[] = {1, 5, 40, 300};
    enum { PAD = 3 };
    Rng r = {91};
    int bad_bits = 0, bad_value = 0, bad_outside = 0, cases = 0;
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
                for (int kind = 0; kind < 3; kind++) { /* A rows set, A^T set, A^T added */
                    int m = ms[mi], n = ns[ni], k = ks[ki], ldc = n + PAD, transposed = kind > 0;
                    int lda = (transposed ? m : k) + PAD, ldb = n + PAD;
                    float *a = alloc_normal((size_t)(transposed ? k : m) * lda, &r, 1),
                          *b = alloc_normal((size_t)k * ldb, &r, 1);
                    float *c = alloc_normal((size_t)m * ldc, &r, 1), *want = xmalloc(sizeof(float) * (size_t)m * ldc);
                    double *exact = xmalloc(sizeof(double) * (size_t)m * ldc);
                    memcpy(want, c, sizeof(float) * (size_t)m * ldc);
                    float alpha = 0.37f;
                    HeadMode mode = kind == 2 ? HEAD_ADD : HEAD_SET;
                    int a_row = transposed ? 1 : lda, a_col = transposed ? lda : 1;
                    head_prod_reference(want, exact, ldc, a, a_row, a_col, b, ldb, m, n, k, alpha, mode);
                    head_prod(c, ldc, a, a_row, a_col, b, ldb, m, n, k, alpha, mode);
                    for (int i = 0; i < m; i++)
                        for (int e = 0; e < ldc; e++) {
                            size_t at = (size_t)i * ldc + e;
                            if (e >= n) {
                                bad_outside += memcmp(&c[at], &want[at], sizeof(float)) != 0;
                                continue;
                            }
                            bad_bits += memcmp(&c[at], &want[at], sizeof(float)) != 0;
                            bad_value += fabs(c[at] - exact[at]) > 1e-5 * (k + 1) * (1 + fabs(exact[at]));
                        }
                    cases++;
                    free(a), free(b), free(c), free(want), free(exact);
                }
    CHECK(bad_bits == 0, "%d elements differ from their fmaf chains in %d products", bad_bits, cases);
    CHECK(bad_value == 0, "%d elements differ from the exact product", bad_value);
    CHECK(bad_outside == 0, "%d elements outside the m x n window were written", bad_outside);
}

/* ---- panels (nn/panels.h): a decoding step's products ---- */
/* Each element of x . W + bias is one fmaf chain over k from zero, then the bias: the same
 * bits whatever the row count, the row's place, a partial last panel, a short last tile of
 * rows. The exact product bounds it too (a chain in the wrong order still agrees with
 * that; a wrong index does not). */
static void test_panels_product_is_its_fma_chains(void) {
    CpuFeatures f;
    cpu_features_read(&f);
    static const int ms[] = {1, 2, 5, 6, 7, 13, 60}, ks[] = {1, 3, 16, 33, 192}, ns[] = {1, 15, 16, 17, 40, 200};
    Rng r = {93};
    int bad_bits = 0, bad_value = 0, bad_alone = 0, cases = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
            int K = ks[ki], N = ns[ni];
            float *w = alloc_normal((size_t)K * N, &r, 1), *bias = alloc_normal((size_t)N, &r, 1);
            float *panels = xmalloc(sizeof(float) * panels_floats(K, N));
            panels_pack(panels, w, K, N);
            /* the packing: column c of row k at panel c / 16, row k, place c % 16; zeros past N */
            for (int k = 0; k < K; k++)
                for (int c = 0; c < (N + 15) / 16 * 16; c++) {
                    float got = panels[((size_t)(c / 16) * K + k) * 16 + c % 16];
                    bad_bits += memcmp(&got, c < N ? &w[(size_t)k * N + c] : &(float){0.0f}, sizeof got) != 0;
                }
            for (size_t mi = 0; mi < sizeof ms / sizeof *ms && panels_can_run(&f); mi++)
                for (int with_bias = 0; with_bias < 2; with_bias++) {
                    int M = ms[mi];
                    const float *b = with_bias ? bias : NULL;
                    float *x = alloc_normal((size_t)M * K, &r, 1), *out = xmalloc(sizeof(float) * (size_t)M * N),
                          *one = xmalloc(sizeof(float) * (size_t)N);
                    panels_product(out, x, panels, b, M, K, N);
                    for (int i = 0; i < M; i++) {
                        panels_product(one, x + (size_t)i * K, panels, b, 1, K, N); /* the row alone */
                        bad_alone += memcmp(one, out + (size_t)i * N, sizeof(float) * (size_t)N) != 0;
                        for (int c = 0; c < N; c++) {
                            float chain = 0.0f;
                            double exact = b ? b[c] : 0.0;
                            for (int k = 0; k < K; k++) {
                                chain = fmaf(x[(size_t)i * K + k], w[(size_t)k * N + c], chain);
                                exact += (double)x[(size_t)i * K + k] * w[(size_t)k * N + c];
                            }
                            if (b) chain += b[c];
                            bad_bits += memcmp(&chain, &out[(size_t)i * N + c], sizeof chain) != 0;
                            bad_value += fabs(out[(size_t)i * N + c] - exact) > 1e-5 * (K + 1) * (1 + fabs(exact));
                        }
                    }
                    cases++;
                    free(x), free(out), free(one);
                }
            /* the output table's packing: from the transpose, the same panels */
            float *wt = xmalloc(sizeof(float) * (size_t)K * N), *from_t = xmalloc(sizeof(float) * panels_floats(K, N));
            for (int k = 0; k < K; k++)
                for (int c = 0; c < N; c++) wt[(size_t)c * K + k] = w[(size_t)k * N + c];
            panels_pack_transposed(from_t, wt, K, N);
            bad_bits += memcmp(from_t, panels, sizeof(float) * panels_floats(K, N)) != 0;
            free(w), free(bias), free(panels), free(wt), free(from_t);
        }
    CHECK(bad_bits == 0, "%d elements differ from their fmaf chains (or packed wrong) in %d products", bad_bits, cases);
    CHECK(bad_value == 0, "%d elements differ from the exact product", bad_value);
    CHECK(bad_alone == 0, "%d rows differ from the same row multiplied alone", bad_alone);
    if (!panels_can_run(&f)) printf("note: this CPU has no AVX2 and FMA: the panel kernel's products were not run\n");
}

static void test_vec_sums_in_lanes(void) {
    Rng r = {77};
    float a[101], b[101];
    fill_normal(a, 101, 1, &r), fill_normal(b, 101, 1, &r);
    for (int step = 0; step <= 41; step++) {
        int n = step < 41 ? step : 101; /* every tail length, then several full blocks and a tail */
        float lane[VEC_LANES] = {0}, dlane[VEC_LANES] = {0}, sqlane[VEC_LANES] = {0}, mx = -INFINITY;
        double wide[VEC_LANES] = {0}, sqwide[VEC_LANES] = {0};
        for (int i = 0; i < n; i++) {
            lane[i % VEC_LANES] += a[i];
            wide[i % VEC_LANES] += a[i];
            sqwide[i % VEC_LANES] += (double)a[i] * a[i];
            dlane[i % VEC_LANES] += a[i] * b[i];
            sqlane[i % VEC_LANES] += (a[i] - 0.5f) * (a[i] - 0.5f);
            mx = a[i] > mx ? a[i] : mx;
        }
        float s = 0.0f, d = 0.0f, sq = 0.0f;
        double w = 0.0, sqw = 0.0;
        for (int k = 0; k < VEC_LANES; k++)
            s += lane[k], d += dlane[k], sq += sqlane[k], w += wide[k], sqw += sqwide[k];
        /* bit for bit: the order is the contract that makes results independent of vector width */
        CHECK(vec_sum(a, n) == s, "n %d: vec_sum %.9g, lanes in order %.9g", n, (double)vec_sum(a, n), (double)s);
        CHECK(vec_sum_double(a, n) == w, "n %d: vec_sum_double differs from its lanes", n);
        CHECK(vec_sum_squares_double(a, (size_t)n) == sqw, "n %d: vec_sum_squares_double differs from its lanes", n);
        CHECK(vec_dot(a, b, n) == d, "n %d: vec_dot differs from its lanes", n);
        CHECK(vec_sum_sq_dev(a, 0.5f, n) == sq, "n %d: vec_sum_sq_dev differs from its lanes", n);
        CHECK(vec_max(a, n) == mx, "n %d: vec_max %g, max %g", n, (double)vec_max(a, n), (double)mx);
        /* the sum of exps: vec_exp's values, added in double lanes in the same order, and
         * within float rounding of libm's (the decoder's log-softmax normaliser) */
        float e[101];
        vec_exp(e, a, mx, n);
        double elane[VEC_LANES] = {0}, ew = 0.0, libm = 0.0;
        for (int i = 0; i < n; i++) elane[i % VEC_LANES] += e[i], libm += exp((double)a[i] - mx);
        for (int k = 0; k < VEC_LANES; k++) ew += elane[k];
        CHECK(vec_sum_exp_double(a, mx, n) == ew, "n %d: vec_sum_exp_double %.17g, vec_exp's lanes %.17g", n,
              vec_sum_exp_double(a, mx, n), ew);
        CHECK(fabs(vec_sum_exp_double(a, mx, n) - libm) <= 2e-7 * libm, "n %d: sum of exps %.9g, libm's %.9g", n,
              vec_sum_exp_double(a, mx, n), libm);
        /* the loss row's fused pass: the same bits as the two passes it joins */
        double fused_sum = -1.0;
        float fused_max = vec_max_sum_double(a, n, &fused_sum);
        CHECK(fused_max == mx && fused_sum == w, "n %d: vec_max_sum_double %g, %.17g; max %g, lanes %.17g", n,
              (double)fused_max, fused_sum, (double)mx, w);
        double exact = 0.0;
        for (int i = 0; i < n; i++) exact += a[i];
        CHECK(fabs(vec_sum(a, n) - exact) < 1e-5, "n %d: vec_sum %.9g, exact %.9g", n, (double)vec_sum(a, n), exact);
    }
}

/* vec_first_equal against a scan from the front, for every place in and around its
 * blocks and for ties: the first equal element, -0 and +0 equal, n when none is. */
static void test_vec_first_equal(void) {
    float x[53];
    for (int n = 0; n <= 53; n++)
        for (int at = 0; at < n; at++) {
            for (int i = 0; i < n; i++) x[i] = (float)(i % 7) - 10.0f;
            x[at] = 5.0f;
            if (at + 17 < n) x[at + 17] = 5.0f; /* a later tie, in the next block or its tail */
            CHECK(vec_first_equal(x, n, 5.0f) == at, "n %d: found %d, not the first at %d", n,
                  vec_first_equal(x, n, 5.0f), at);
            CHECK(vec_first_equal(x, n, 6.0f) == n, "n %d: found %d for an absent value", n,
                  vec_first_equal(x, n, 6.0f));
        }
    float z[20] = {0};
    for (int i = 0; i < 20; i++) z[i] = -1.0f;
    z[18] = -0.0f, z[19] = 0.0f;
    CHECK(vec_first_equal(z, 20, 0.0f) == 18, "-0 and +0: found %d, not 18", vec_first_equal(z, 20, 0.0f));
}

/* head_prod_bt (C = alpha A B^T, B's rows along the inner index: the scores' shape)
 * against the same fmaf chains bit for bit, over the shapes above: key counts ending in
 * each of its blocks of 16 (a padded last block for those not a multiple of 4), inner sums
 * up to its largest, query counts past its tiles of 32 rows; nothing outside C's window is
 * written. */
static void test_head_products_bt(void) {
    static const int ms[] = {1, 3, 4, 5, 9, 37}, ns[] = {1, 3, 4, 7, 8, 12, 15, 16, 17, 24, 28, 33},
                     ks[] = {1, 5, 40, HEAD_PROD_BT_MAX_K};
    enum { PAD = 3 };
    Rng r = {92};
    int bad_bits = 0, bad_outside = 0, cases = 0;
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
                int m = ms[mi], n = ns[ni], k = ks[ki], lda = k + PAD, ldb = k + PAD, ldc = n + PAD;
                float *a = alloc_normal((size_t)m * lda, &r, 1), *b = alloc_normal((size_t)n * ldb, &r, 1);
                float *bt = xmalloc(sizeof(float) * (size_t)k * n); /* B^T for the reference */
                for (int j = 0; j < n; j++)
                    for (int e = 0; e < k; e++) bt[(size_t)e * n + j] = b[(size_t)j * ldb + e];
                float *c = alloc_normal((size_t)m * ldc, &r, 1), *want = xmalloc(sizeof(float) * (size_t)m * ldc);
                double *exact = xmalloc(sizeof(double) * (size_t)m * ldc);
                memcpy(want, c, sizeof(float) * (size_t)m * ldc);
                head_prod_reference(want, exact, ldc, a, lda, 1, bt, n, m, n, k, 0.37f, HEAD_SET);
                head_prod_bt(c, ldc, a, lda, b, ldb, m, n, k, 0.37f);
                for (int i = 0; i < m; i++)
                    for (int e = 0; e < ldc; e++) {
                        size_t at = (size_t)i * ldc + e;
                        int differs = memcmp(&c[at], &want[at], sizeof(float)) != 0;
                        if (e >= n) bad_outside += differs;
                        else bad_bits += differs;
                    }
                cases++;
                free(a), free(b), free(bt), free(c), free(want), free(exact);
            }
    CHECK(bad_bits == 0, "%d elements differ from their fmaf chains in %d products", bad_bits, cases);
    CHECK(bad_outside == 0, "%d elements outside the m x n window were written", bad_outside);
}

/* Decoding's one query a sequence against cached keys: with the keys stored by column
 * (k_tile), in one tile or in several, the probabilities and outputs are those of the keys
 * stored by row, bit for bit: each score is the same chain of adds. Three sequences of 7,
 * 5 and 1 keys, heads of 32 columns; the tiles of 4 keys leave the last tile part-filled,
 * and their sequences 8 keys apart (a whole number of tiles). */
static void test_attention_keys_by_column(void) {
    enum { B = 3, Tk = 7, W = 8, d = 64, H = 2, LAYOUTS = 3 };
    Rng r = {123};
    int kv_len[B] = {7, 5, 1};
    AttnParams w;
    float **wp[8] = {&w.w_q, &w.b_q, &w.w_k, &w.b_k, &w.w_v, &w.b_v, &w.w_o, &w.b_o};
    for (int i = 0; i < 8; i++) *wp[i] = alloc_normal(i % 2 ? d : d * d, &r, 0.3f);
    float *xq = alloc_normal((size_t)B * d, &r, 1), *k = alloc_normal((size_t)B * W * d, &r, 1);
    float *v = alloc_normal((size_t)B * W * d, &r, 1);
    /* by row, all of a sequence's keys in one tile, tiles of 4 */
    static const int tile[LAYOUTS] = {0, W, 4};
    float *keys[LAYOUTS] = {k, xmalloc(sizeof(float) * B * W * d), xmalloc(sizeof(float) * B * W * d)};
    for (int t = 1; t < LAYOUTS; t++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < W; j++)
                for (int c = 0; c < d; c++)
                    keys[t][(size_t)b * W * d + attn_key_at(tile[t], j, c, d)] = k[((size_t)b * W + j) * d + c];
    AttnShape s = {B, 1, Tk, d, H, kv_len, 0, W, NULL, NULL, 0, 0};
    float q[LAYOUTS][B * d], p[LAYOUTS][B * H * Tk], ctx[LAYOUTS][B * d], out[LAYOUTS][B * d];
    for (int t = 0; t < LAYOUTS; t++) {
        AttnActs a = {.q = q[t], .k = keys[t], .v = v, .p = p[t], .ctx = ctx[t], .out = out[t], .k_tile = tile[t]};
        attention_forward(&a, &w, xq, NULL, &s);
    }
    for (int t = 1; t < LAYOUTS; t++) {
        int same = 1;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int j = 0; j < kv_len[b]; j++) same &= p[0][(b * H + h) * Tk + j] == p[t][(b * H + h) * Tk + j];
        CHECK(same, "the probabilities differ with the keys by column in tiles of %d", tile[t]);
        CHECK(memcmp(out[0], out[t], sizeof out[0]) == 0 && memcmp(ctx[0], ctx[t], sizeof ctx[0]) == 0,
              "the outputs differ with the keys by column in tiles of %d", tile[t]);
    }
    for (int i = 0; i < 8; i++) free(*wp[i]);
    free(xq), free(k), free(v), free(keys[1]), free(keys[2]);
}

const TestCase kernel_tests[] = {
    {"attention_one_query_keys_by_column_same_bits", test_attention_keys_by_column},
    {"vec_exp_accurate_and_edges", test_vec_exp},
    {"vec_sums_in_lane_order", test_vec_sums_in_lanes},
    {"vec_first_equal_finds_the_first", test_vec_first_equal},
    {"classifier_fused_chunks_grad", test_classifier_fused},
    {"kernel_matmul_grad", test_matmul},
    {"kernel_logits_grad", test_logits},
    {"kernel_logits_by_column_is_by_row", test_logits_by_column},
    {"kernel_softmax_grad_and_mask", test_softmax},
    {"kernel_layernorm_grad", test_layernorm},
    {"kernel_layernorm_forward_by_definition", test_layernorm_forward_by_definition},
    {"kernel_relu_grad", test_relu},
    {"kernel_dropout_grad_and_rate", test_dropout},
    {"kernel_embedding_grad", test_embedding},
    {"kernel_crossentropy_grad", test_crossentropy},
    {"crossentropy_forward_backward_is_both", test_crossentropy_forward_backward_is_both},
    {"attention_encoder_self_grad", test_attention_encoder_self},
    {"attention_decoder_masked_grad", test_attention_decoder_masked},
    {"attention_cross_grad", test_attention_cross},
    {"attention_cross_one_key_grad", test_attention_cross_one_key},
    {"head_products_are_their_chains", test_head_products},
    {"head_products_bt_are_their_chains", test_head_products_bt},
    {"panels_product_is_its_fma_chains", test_panels_product_is_its_fma_chains},
    {NULL, NULL},
};
