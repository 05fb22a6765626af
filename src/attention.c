/* attention: see attention.h. Heads are column slices of the (tokens, d) projections, so
 * each head's products are strided sgemm calls with leading dimension d: no transposes,
 * no copies. */
#include "attention.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

void attention_forward(AttnActs *a, const AttnParams *w, const float *xq, const float *xkv, const AttnShape *s) {
    int B = s->B, Tq = s->Tq, Tk = s->Tk, d = s->d, H = s->heads, dh = d / H;
    float scale = 1.0f / sqrtf((float)dh);
    matmul_forward(a->q, xq, w->w_q, w->b_q, B * Tq, d, d);
    matmul_forward(a->k, xkv, w->w_k, w->b_k, B * Tk, d, d);
    matmul_forward(a->v, xkv, w->w_v, w->b_v, B * Tk, d, d);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const float *q = a->q + (size_t)b * Tq * d + h * dh;
            const float *k = a->k + (size_t)b * Tk * d + h * dh;
            const float *v = a->v + (size_t)b * Tk * d + h * dh;
            float *p = a->p + ((size_t)b * H + h) * Tq * Tk;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, dh, scale, q, d, k, d, 0.0f, p, Tk);
            for (int i = 0; i < Tq; i++) softmax_forward(p + (size_t)i * Tk, p + (size_t)i * Tk, Tk, attention_valid_keys(s, b, i));
            float *ctx = a->ctx + (size_t)b * Tq * d + h * dh;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, dh, Tk, 1.0f, p, Tk, v, d, 0.0f, ctx, d);
        }
    }
    matmul_forward(a->out, a->ctx, w->w_o, w->b_o, B * Tq, d, d);
}

void attention_backward(AttnParams *g, float *dxq, float *dxkv, const float *dout, const AttnActs *a,
                        const AttnParams *w, const float *xq, const float *xkv, const AttnShape *s,
                        const AttnScratch *sc) {
    int B = s->B, Tq = s->Tq, Tk = s->Tk, d = s->d, H = s->heads, dh = d / H;
    float scale = 1.0f / sqrtf((float)dh);
    size_t nq = (size_t)B * Tq * d, nk = (size_t)B * Tk * d;
    memset(sc->dctx, 0, sizeof(float) * nq);
    memset(sc->dk, 0, sizeof(float) * nk);
    memset(sc->dv, 0, sizeof(float) * nk);
    matmul_backward(sc->dctx, g->w_o, g->b_o, dout, a->ctx, w->w_o, B * Tq, d, d);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            size_t qoff = (size_t)b * Tq * d + h * dh, koff = (size_t)b * Tk * d + h * dh;
            const float *p = a->p + ((size_t)b * H + h) * Tq * Tk;
            const float *dctx = sc->dctx + qoff;
            /* dP = dO V^T and dV = P^T dO */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, dh, 1.0f, dctx, d, a->v + koff, d, 0.0f, sc->dp,
                        Tk);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, dh, Tq, 1.0f, p, Tk, dctx, d, 1.0f, sc->dv + koff, d);
            /* dS = P (dP - rowsum(dP P)); masked keys have P = 0, so their dS is 0 too */
            for (int i = 0; i < Tq; i++) softmax_backward(sc->dp + (size_t)i * Tk, sc->dp + (size_t)i * Tk, p + (size_t)i * Tk, Tk);
            /* dQ = dS K / sqrt(dh) and dK = dS^T Q / sqrt(dh) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, dh, Tk, scale, sc->dp, Tk, a->k + koff, d, 0.0f,
                        sc->dq + qoff, d);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, dh, Tq, scale, sc->dp, Tk, a->q + qoff, d, 1.0f,
                        sc->dk + koff, d);
        }
    }
    matmul_backward(dxq, g->w_q, g->b_q, sc->dq, xq, w->w_q, B * Tq, d, d);
    matmul_backward(dxkv, g->w_k, g->b_k, sc->dk, xkv, w->w_k, B * Tk, d, d);
    matmul_backward(dxkv, g->w_v, g->b_v, sc->dv, xkv, w->w_v, B * Tk, d, d);
}
