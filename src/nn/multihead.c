/* multihead: see multihead.h. Heads are column slices of the (tokens, d) projections, so
 * each head's products read them with leading dimension d: no transposes, no copies. */
#include "nn/multihead.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nn/headprod.h"
#include "nn/kernels.h"
#include "nn/profile.h"
#include "util/mem.h"

void attention_project_kv(float *k, float *v, const AttnParams *w, const float *xkv, int rows, int d) {
    matmul_forward(k, xkv, w->w_k, w->b_k, rows, d, d);
    matmul_forward(v, xkv, w->w_v, w->b_v, rows, d, d);
}

/* Whether OpenBLAS's kernels here have a path of their own for small matrices: in 0.3.21
 * SkylakeX's, which Cooperlake's (and later SapphireRapids') build on. Decided by the
 * kernels' name, so every run, rank and thread of one environment makes the same choice
 * (and resumes keep their bits). */
static int blas_has_small_kernels(void) {
    static const char *const with[] = {"skylakex", "cooperlake", "sapphirerapids"};
    const char *name = openblas_get_corename();
    for (size_t i = 0; name && i < sizeof with / sizeof *with; i++)
        if (strcasecmp(name, with[i]) == 0) return 1;
    return 0;
}

/* One head's product whose result runs along the head's columns (P V, and of the backward
 * P^T dO, dS K, dS^T Q), in head_prod's terms: A's element (i, j) at a[i * a_row + j *
 * a_col], one of the strides 1. Where OpenBLAS has small-matrix kernels sgemm is faster at
 * these sizes (a 12 x 32 x 12 product 0.057 us against head_prod's 0.070, 24 rows 0.157
 * against 0.252; Zen 5, one thread); where it has none (Haswell's, Zen's) it costs more to
 * set up than to compute, and head_prod is twice as fast (0.145 us against 0.075). */
static void head_product(int by_hand, float *c, int ldc, const float *a, int a_row, int a_col, const float *b, int ldb,
                         int m, int n, int k, float alpha, HeadMode mode) {
    if (by_hand) {
        head_prod(c, ldc, a, a_row, a_col, b, ldb, m, n, k, alpha, mode);
        return;
    }
    /* A is transposed when its columns are the strided ones; with both strides 1 (one row,
     * or one column) whichever form keeps the leading dimension legal */
    int trans = a_col != 1 || (a_row == 1 && k > 1);
    cblas_sgemm(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, CblasNoTrans, m, n, k, alpha, a,
                trans ? a_col : a_row, b, ldb, mode == HEAD_ADD ? 1.0f : 0.0f, c, ldc);
}

/* C = alpha A B^T (A's and B's rows along the inner index), by hand (head_prod_bt) where
 * head_product would go by hand and the head is narrow enough for its buffer, else sgemm. */
static void head_product_bt(int by_hand, float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m,
                            int n, int k, float alpha) {
    if (by_hand && k <= HEAD_PROD_BT_MAX_K) {
        head_prod_bt(c, ldc, a, lda, b, ldb, m, n, k, alpha);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc);
}

/* One row of scores as the softmax receives it: keys past `valid` are masked. */
static void keep_scores(float *dst, const float *s, int cols, int valid) {
    for (int j = 0; j < cols; j++) dst[j] = j < valid ? s[j] : -INFINITY;
}

/* c[0..16) = sum over keys j < n of p[j] v_j[0..16), v_j = V + j * stride, summed in the
 * order of j, in registers. Kept out of line: inlined into the loops around it, gcc 12
 * multiplied the sixteen products one at a time and packed them into vectors (a third of
 * decoding's attention time); alone it broadcasts p[j] and multiplies whole vectors. The
 * same operations in the same order: the same bits. */
static __attribute__((noinline)) void weigh_16_values(float *c, const float *p, const float *V, int n, size_t stride) {
    float acc[16] = {0};
    for (int j = 0; j < n; j++) {
        const float *v = V + (size_t)j * stride;
        float w = p[j];
        for (int e = 0; e < 16; e++) acc[e] += w * v[e];
    }
    memcpy(c, acc, sizeof acc);
}

/* The weights that replace head h's softmax at query row i (of every sequence), or NULL
 * when the pass has no pin there: pins name a query by its target position. */
static const float *pinned_row(const AttnActs *a, const AttnShape *s, int h, int i) {
    const AttnIntervene *iv = a->iv;
    if (!iv || !iv->pin_weights || iv->pin_head != h || iv->pin_query != s->q_pos + i) return NULL;
    return iv->pin_weights;
}

/* S, P and O for one query row per sequence: the same three phases as below, as loops
 * over the keys a query may see. Every sum is taken in the order of the plain loop (over
 * e for a score, over the keys for an output), so the figures are those of one key and
 * one column at a time, bit for bit; only the order of independent sums changes. */
static void attention_one_query(AttnActs *a, const AttnShape *s, size_t kv_rows, float scale) {
    int d = s->d, H = s->heads, dh = d / H, Tk = s->Tk;
    for (int b = 0; b < s->B; b++) {
        int n = attention_valid_keys(s, b, 0);
        size_t kb = (size_t)(s->kv_share > 1 ? b / s->kv_share : b);
        const float *K = a->k + kb * kv_rows * d, *V = a->v + kb * kv_rows * d, *q = a->q + (size_t)b * d;
        float *P = a->p + (size_t)b * H * Tk, *ctx = a->ctx + (size_t)b * d;
        /* scores four keys at a time, all heads of those keys before the next four (their
         * rows read once, in order): four independent chains of adds instead of one. With
         * the keys by column, every key's chain of a tile runs at once, a lane each: the
         * same sums in the same order, so the same bits. */
        int j = a->k_tile ? n : 0, tile = a->k_tile;
        for (int h = 0; tile && h < H; h++) {
            float *p = P + (size_t)h * Tk;
            for (int i = 0; i < n; i++) p[i] = 0.0f;
            for (int i0 = 0; i0 < n; i0 += tile) {
                const float *qh = q + h * dh, *col = K + (size_t)i0 * d + (size_t)h * dh * tile;
                float *pt = p + i0;
                int keys = n - i0 < tile ? n - i0 : tile;
                for (int e = 0; e < dh; e++, col += tile) {
                    float qe = qh[e];
                    for (int i = 0; i < keys; i++) pt[i] += qe * col[i];
                }
            }
            for (int i = 0; i < n; i++) p[i] *= scale;
        }
        for (; j + 4 <= n; j += 4)
            for (int h = 0; h < H; h++) {
                const float *qh = q + h * dh, *k0 = K + (size_t)j * d + h * dh, *k1 = k0 + d, *k2 = k1 + d,
                            *k3 = k2 + d;
                float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
                for (int e = 0; e < dh; e++)
                    s0 += qh[e] * k0[e], s1 += qh[e] * k1[e], s2 += qh[e] * k2[e], s3 += qh[e] * k3[e];
                float *p = P + (size_t)h * Tk + j;
                p[0] = s0 * scale, p[1] = s1 * scale, p[2] = s2 * scale, p[3] = s3 * scale;
            }
        for (; j < n; j++)
            for (int h = 0; h < H; h++) {
                const float *qh = q + h * dh, *k = K + (size_t)j * d + h * dh;
                float dot = 0.0f;
                for (int e = 0; e < dh; e++) dot += qh[e] * k[e];
                P[(size_t)h * Tk + j] = dot * scale;
            }
        for (int h = 0; h < H; h++) {
            float *p = P + (size_t)h * Tk;
            if (a->scores) keep_scores(a->scores + ((size_t)b * H + h) * Tk, p, Tk, n);
            softmax_forward(p, p, Tk, n);
            const float *pin = pinned_row(a, s, h, 0);
            if (pin) memcpy(p, pin, sizeof(float) * (size_t)Tk);
        }
        /* outputs sixteen columns at a time, summed over the keys in registers (in memory,
         * each key's adds would wait for the last key's stores) */
        for (int h = 0; h < H; h++) {
            const float *p = P + (size_t)h * Tk;
            float *c = ctx + h * dh;
            int e0 = 0;
            for (; e0 + 16 <= dh; e0 += 16) weigh_16_values(c + e0, p, V + h * dh + e0, n, (size_t)d);
            if (e0 < dh) memset(c + e0, 0, sizeof(float) * (size_t)(dh - e0));
            for (int j = 0; e0 < dh && j < n; j++) {
                const float *v = V + (size_t)j * d + h * dh;
                float w = p[j]; /* read once: c might alias p as far as the compiler knows */
                for (int e = e0; e < dh; e++) c[e] += w * v[e];
            }
        }
    }
}

/* Head h's columns of ctx (rows of d) times gate[h]. */
static void gate_ctx(float *ctx, const float *gate, size_t rows, int d, int H) {
    int dh = d / H;
    for (size_t r = 0; r < rows; r++)
        for (int h = 0; h < H; h++)
            for (int e = 0; e < dh; e++) ctx[r * d + (size_t)h * dh + e] *= gate[h];
}

/* The pin and the patch of a->iv, after the softmax and after the weighted values. */
static void intervene_weights(AttnActs *a, const AttnShape *s) {
    const AttnIntervene *iv = a->iv;
    if (!iv || !iv->pin_weights) return;
    int i = iv->pin_query - s->q_pos;
    if (i < 0 || i >= s->Tq) return;
    for (int b = 0; b < s->B; b++)
        memcpy(a->p + (((size_t)b * s->heads + iv->pin_head) * s->Tq + i) * s->Tk, iv->pin_weights,
               sizeof(float) * (size_t)s->Tk);
}

static void intervene_ctx(AttnActs *a, size_t rows, int d, int H) {
    const AttnIntervene *iv = a->iv;
    if (!iv) return;
    int dh = d / H;
    for (int h = 0; iv->ctx_from && h < H; h++)
        if (iv->ctx_heads[h])
            for (size_t r = 0; r < rows; r++)
                memcpy(a->ctx + r * d + (size_t)h * dh, iv->ctx_from + r * d + (size_t)h * dh, sizeof(float) * dh);
    if (iv->ctx_keep) memcpy(iv->ctx_keep, a->ctx, sizeof(float) * rows * d);
}

/* Rows of queries and of keys a pass projects: the packed streams' or B padded blocks. */
static int query_rows(const AttnShape *s) { return s->q ? s->q->N : s->B * s->Tq; }
static int key_rows(const AttnShape *s) { return s->kv ? s->kv->N : s->B * s->Tk; }

/* Three phases over all (sequence, head) pairs: scores, softmax, weighted values. Kept
 * apart so each kind of work is one loop (and one profile bucket). */
void attention_forward(AttnActs *a, const AttnParams *w, const float *xq, const float *xkv, const AttnShape *s) {
    int B = s->B, Tq = s->Tq, Tk = s->Tk, d = s->d, H = s->heads, dh = d / H, nq_all = query_rows(s);
    size_t kv_rows = (size_t)(s->kv_stride ? s->kv_stride : Tk);
    float scale = 1.0f / sqrtf((float)dh);
    matmul_forward_with(a->q, xq, w->w_q, a->panels[0], w->b_q, nq_all, d, d);
    if (xkv) attention_project_kv(a->k, a->v, w, xkv, key_rows(s), d);
    double t0 = prof_start();
    if (Tq == 1 && !s->q) {
        /* One query row per sequence (incremental decoding, a pass over an empty target or
         * source): plain loops. A BLAS call per (sequence, head) costs more than its
         * arithmetic at this size. The interventions as below: pins inside, at the softmax. */
        attention_one_query(a, s, kv_rows, scale);
        prof_stop(PROF_ATTENTION, t0);
        if (a->gate) gate_ctx(a->ctx, a->gate, (size_t)B, d, H);
        intervene_ctx(a, (size_t)B, d, H);
        matmul_forward_with(a->out, a->ctx, w->w_o, a->panels[3], w->b_o, B, d, d);
        return;
    }
    int by_hand = !blas_has_small_kernels();
    for (int b = 0; b < B; b++) {
        AttnSeq q = attention_seq(s, b);
        for (int h = 0; h < H; h++)
            head_product_bt(by_hand, a->p + ((size_t)b * H + h) * Tq * Tk, Tk, a->q + q.q_row * d + h * dh, d,
                            a->k + q.kv_row * d + h * dh, d, q.nq, q.nk, dh, scale);
    }
    prof_stop(PROF_ATTENTION, t0);
    t0 = prof_start();
    for (int b = 0; b < B; b++) {
        AttnSeq q = attention_seq(s, b);
        for (int h = 0; h < H; h++) {
            float *p = a->p + ((size_t)b * H + h) * Tq * Tk;
            for (int i = 0; i < q.nq; i++) {
                int n = attention_valid_keys(s, b, i);
                if (a->scores)
                    keep_scores(a->scores + ((size_t)b * H + h) * Tq * Tk + (size_t)i * Tk, p + (size_t)i * Tk, q.nk,
                                n);
                softmax_forward(p + (size_t)i * Tk, p + (size_t)i * Tk, q.nk, n);
            }
        }
    }
    prof_stop(PROF_SOFTMAX, t0);
    intervene_weights(a, s);
    t0 = prof_start();
    for (int b = 0; b < B; b++) {
        AttnSeq q = attention_seq(s, b);
        for (int h = 0; h < H; h++)
            head_product(by_hand, a->ctx + q.q_row * d + h * dh, d, a->p + ((size_t)b * H + h) * Tq * Tk, Tk, 1,
                         a->v + q.kv_row * d + h * dh, d, q.nq, dh, q.nk, 1.0f, HEAD_SET);
    }
    prof_stop(PROF_ATTENTION, t0);
    if (a->gate) gate_ctx(a->ctx, a->gate, (size_t)nq_all, d, H);
    intervene_ctx(a, (size_t)nq_all, d, H);
    matmul_forward(a->out, a->ctx, w->w_o, w->b_o, nq_all, d, d);
}

void attention_value_norms(float *out, const AttnActs *a, const AttnParams *w, const AttnShape *s) {
    int d = s->d, H = s->heads, dh = d / H;
    size_t kv_rows = (size_t)(s->kv_stride ? s->kv_stride : s->Tk);
    float *row = xmalloc(sizeof(float) * (size_t)d);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < H; h++)
            for (int j = 0; j < s->Tk; j++) {
                /* row = v_j^h W_O^h: head h's slice of the value times W_O's rows for it */
                const float *v = a->v + ((size_t)b * kv_rows + j) * d + h * dh;
                cblas_sgemv(CblasRowMajor, CblasTrans, dh, d, 1.0f, w->w_o + (size_t)h * dh * d, d, v, 1, 0.0f, row, 1);
                double sq = 0.0;
                for (int e = 0; e < d; e++) sq += (double)row[e] * row[e];
                /* a gated head sends gate times as much (nothing when masked) */
                out[((size_t)b * H + h) * s->Tk + j] = (float)sqrt(sq) * (a->gate ? fabsf(a->gate[h]) : 1.0f);
            }
    free(row);
}

/* Whether the sequences' key rows, taken in order, are rows 0..nk_all-1 each once: then
 * the (sequence, head) products of the backward write every element of dK and dV once,
 * and set them (HEAD_SET) rather than add to zeroed buffers. Packed rows always do; so do
 * padded blocks whose stride is their width. */
static int keys_tile(const AttnShape *s, size_t nk_all) {
    size_t next = 0;
    for (int b = 0; b < s->B; b++) {
        AttnSeq q = attention_seq(s, b);
        if (q.kv_row != next) return 0;
        next += (size_t)q.nk;
    }
    return next == nk_all;
}

void attention_backward(AttnParams *g, float *dxq, float *dxkv, const float *dout, const AttnActs *a,
                        const AttnParams *w, const float *xq, const float *xkv, const AttnShape *s,
                        const AttnScratch *sc) {
    int B = s->B, Tq = s->Tq, Tk = s->Tk, d = s->d, H = s->heads, dh = d / H, nq_all = query_rows(s),
        nk_all = key_rows(s);
    float scale = 1.0f / sqrtf((float)dh);
    size_t per = (size_t)Tq * Tk;
    int by_hand = !blas_has_small_kernels();
    HeadMode kv_mode = keys_tile(s, (size_t)nk_all) ? HEAD_SET : HEAD_ADD;
    if (kv_mode == HEAD_ADD) {
        memset(sc->dk, 0, sizeof(float) * (size_t)nk_all * d);
        memset(sc->dv, 0, sizeof(float) * (size_t)nk_all * d);
    }
    matmul_backward_set(sc->dctx, g->w_o, g->b_o, dout, a->ctx, w->w_o, nq_all, d, d);
    if (a->iv && a->iv->dctx_keep) memcpy(a->iv->dctx_keep, sc->dctx, sizeof(float) * (size_t)nq_all * d);
    double t0 = prof_start();
    /* dP = dO V^T and dV = P^T dO. dctx is G, the gradient at the gated O: with a gate g,
     * dO = g G, so dP = g (G V^T), dV = g P^T G, and dL/dg = sum P . (G V^T) */
    for (int b = 0; b < B; b++) {
        AttnSeq q = attention_seq(s, b);
        for (int h = 0; h < H; h++) {
            size_t qoff = q.q_row * d + h * dh, koff = q.kv_row * d + h * dh, poff = ((size_t)b * H + h) * per;
            head_product_bt(by_hand, sc->dp + poff, Tk, sc->dctx + qoff, d, a->v + koff, d, q.nq, q.nk, dh, 1.0f);
            float g = 1.0f;
            if (a->gate) {
                g = a->gate[h];
                double dg = 0.0;
                for (size_t i = 0; i < (size_t)q.nq; i++)
                    for (size_t j = 0; j < (size_t)q.nk; j++)
                        dg += (double)a->p[poff + i * Tk + j] * sc->dp[poff + i * Tk + j];
                a->dgate[h] += (float)dg;
                if (a->dgate_rows && b < a->dgate_nrows) a->dgate_rows[(size_t)b * a->dgate_stride + h] += (float)dg;
                for (size_t i = 0; i < (size_t)q.nq; i++)
                    for (size_t j = 0; j < (size_t)q.nk; j++) sc->dp[poff + i * Tk + j] *= g;
            }
            head_product(by_hand, sc->dv + koff, d, a->p + poff, 1, Tk, sc->dctx + qoff, d, q.nk, dh, q.nq, g, kv_mode);
        }
    }
    prof_stop(PROF_ATTENTION, t0);
    /* dS = P (dP - rowsum(dP P)); masked keys have P = 0, so their dS is 0 too */
    t0 = prof_start();
    for (int b = 0; b < B; b++) {
        AttnSeq q = attention_seq(s, b);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < q.nq; i++) {
                size_t r = ((size_t)b * H + h) * Tq + i;
                softmax_backward(sc->dp + r * Tk, sc->dp + r * Tk, a->p + r * Tk, q.nk);
            }
    }
    prof_stop(PROF_SOFTMAX, t0);
    /* dQ = dS K / sqrt(dh) and dK = dS^T Q / sqrt(dh) */
    t0 = prof_start();
    for (int b = 0; b < B; b++) {
        AttnSeq q = attention_seq(s, b);
        for (int h = 0; h < H; h++) {
            size_t qoff = q.q_row * d + h * dh, koff = q.kv_row * d + h * dh, poff = ((size_t)b * H + h) * per;
            head_product(by_hand, sc->dq + qoff, d, sc->dp + poff, Tk, 1, a->k + koff, d, q.nq, dh, q.nk, scale,
                         HEAD_SET);
            head_product(by_hand, sc->dk + koff, d, sc->dp + poff, 1, Tk, a->q + qoff, d, q.nk, dh, q.nq, scale,
                         kv_mode);
        }
    }
    prof_stop(PROF_ATTENTION, t0);
    matmul_backward(dxq, g->w_q, g->b_q, sc->dq, xq, w->w_q, nq_all, d, d);
    matmul_backward(dxkv, g->w_k, g->b_k, sc->dk, xkv, w->w_k, nk_all, d, d);
    matmul_backward(dxkv, g->w_v, g->b_v, sc->dv, xkv, w->w_v, nk_all, d, d);
}
