/* contrib: contributions through whole attention layers and their rollout (contrib.h
 * states the formulas). Everything is read from the last forward pass (weights, values,
 * the layer norm's statistics): no layer is computed again. */
#include "explain/contrib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

/* (Tq, Tk) of a kind in the model's current padded shape */
static void kind_shape(const Model *m, AttnKind kind, int *Tq, int *Tk) {
    *Tq = kind == ATTN_ENC_SELF ? m->S : m->T;
    *Tk = kind == ATTN_DEC_SELF ? m->T : m->S;
}

/* The layer norm's linear part at a row: gamma * (z - mean(z)) * rstd, in place. */
static void norm_linear(float *z, const float *gamma, float rstd, int d) {
    double mean = 0;
    for (int c = 0; c < d; c++) mean += z[c];
    mean /= d;
    for (int c = 0; c < d; c++) z[c] = gamma[c] * (float)(z[c] - mean) * rstd;
}

void contrib_key_vectors(const Model *m, AttnKind kind, int layer, int b, float *keys) {
    const AttnActs *a = model_attention_acts(m, kind, layer);
    const AttnParams *w = model_attention_params(m, kind, layer);
    int d = m->cfg.d_model, H = m->cfg.heads, dh = d / H, Tq, Tk;
    kind_shape(m, kind, &Tq, &Tk);
    memset(keys, 0, sizeof(float) * (size_t)Tk * H * d);
    for (int j = 0; j < Tk; j++) {
        const float *v = a->v + ((size_t)b * Tk + j) * d;
        for (int h = 0; h < H; h++)
            for (int e = 0; e < dh; e++) {
                float ve = v[h * dh + e];
                const float *wo = w->w_o + (size_t)(h * dh + e) * d;
                float *u = keys + ((size_t)j * H + h) * d;
                for (int c = 0; c < d; c++) u[c] += ve * wo[c];
            }
    }
}

void contrib_vectors(const Model *m, AttnKind kind, int layer, int b, int i, int nk, const float *keys, float *vec,
                     float *bias) {
    const AttnActs *a = model_attention_acts(m, kind, layer);
    const AttnParams *w = model_attention_params(m, kind, layer);
    AttnBlockView blk;
    model_attention_block(m, kind, layer, &blk);
    int d = m->cfg.d_model, H = m->cfg.heads, Tq, Tk;
    kind_shape(m, kind, &Tq, &Tk);
    size_t row = (size_t)b * Tq + i;
    float rstd = blk.rstd[row];
    for (int j = 0; j < nk; j++) {
        float *t = vec + (size_t)j * d;
        memset(t, 0, sizeof(float) * (size_t)d);
        for (int h = 0; h < H; h++) {
            float p = a->p[(((size_t)b * H + h) * Tq + i) * Tk + j] * (a->gate ? a->gate[h] : 1.0f);
            const float *u = keys + ((size_t)j * H + h) * d;
            for (int c = 0; c < d; c++) t[c] += p * u[c];
        }
        if (!blk.pre_norm) norm_linear(t, blk.norm_w, rstd, d);
    }
    float *res = vec + (size_t)nk * d;
    memcpy(res, blk.x + row * d, sizeof(float) * (size_t)d);
    memcpy(bias, w->b_o, sizeof(float) * (size_t)d);
    if (!blk.pre_norm) {
        norm_linear(res, blk.norm_w, rstd, d);
        norm_linear(bias, blk.norm_w, rstd, d);
        for (int c = 0; c < d; c++) bias[c] += blk.norm_b[c];
    }
}

void contrib_from_vectors(const float *vec, const float *out, int nk, int d, int own, float *c) {
    double norm = 0, total = 0;
    for (int k = 0; k < d; k++) norm += fabsf(out[k]);
    for (int j = 0; j <= nk; j++) {
        const float *t = vec + (size_t)j * d;
        double dist = 0;
        for (int k = 0; k < d; k++) dist += fabsf(out[k] - t[k]);
        double prox = norm - dist;
        c[j] = prox > 0 ? (float)prox : 0.0f;
        total += c[j];
    }
    if (total > 0)
        for (int j = 0; j <= nk; j++) c[j] = (float)(c[j] / total);
    else
        for (int j = 0; j <= nk; j++) c[j] = j == own; /* nothing is near the output: all its own */
}

/* One block's contribution rows for sentence 0: self kinds (Tq, Tk) with the residual
 * merged into key i, cross (T, S + 1). */
static void block_rows(const Model *m, AttnKind kind, int layer, float *out_rows, float *vec, float *bias, float *keys,
                       float *c) {
    int d = m->cfg.d_model, Tq, Tk;
    kind_shape(m, kind, &Tq, &Tk);
    AttnBlockView blk;
    model_attention_block(m, kind, layer, &blk);
    contrib_key_vectors(m, kind, layer, 0, keys); /* once a block: every query row reads them */
    for (int i = 0; i < Tq; i++) {
        int nk = kind == ATTN_DEC_SELF ? i + 1 : Tk;
        contrib_vectors(m, kind, layer, 0, i, nk, keys, vec, bias);
        const float *out = blk.out + (size_t)i * d;
        if (kind == ATTN_CROSS) {
            contrib_from_vectors(vec, out, nk, d, nk, c);
            memcpy(out_rows + (size_t)i * (Tk + 1), c, sizeof(float) * (size_t)(Tk + 1));
            continue;
        }
        /* self-attention: the residual is key i's own, one input with it */
        float *ti = vec + (size_t)i * d, *ri = vec + (size_t)nk * d;
        for (int k = 0; k < d; k++) ti[k] += ri[k];
        contrib_from_vectors(vec, out, nk - 1, d, i, c); /* keys 0..nk-1, no separate residual */
        float *row = out_rows + (size_t)i * Tk;
        memset(row, 0, sizeof(float) * (size_t)Tk);
        memcpy(row, c, sizeof(float) * (size_t)nk);
    }
}

/* out (n, k) = a (n, m) . b (m, k) */
static void mat_mul(float *out, const float *a, const float *b, int n, int mm, int k) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k; j++) {
            double s = 0;
            for (int t = 0; t < mm; t++) s += (double)a[(size_t)i * mm + t] * b[(size_t)t * k + j];
            out[(size_t)i * k + j] = (float)s;
        }
}

void contrib_rollout(Contributions *c) {
    int S = c->S, T = c->T, W = S + T;
    float *tmp = xmalloc(sizeof(float) * ((size_t)T * W + (size_t)S * S));
    memset(c->enc_roll, 0, sizeof(float) * (size_t)S * S);
    for (int i = 0; i < S; i++) c->enc_roll[(size_t)i * S + i] = 1;
    for (int l = 0; l < c->enc_layers; l++) {
        mat_mul(tmp, c->enc + (size_t)l * S * S, c->enc_roll, S, S, S);
        memcpy(c->enc_roll, tmp, sizeof(float) * (size_t)S * S);
    }
    memset(c->dec_roll, 0, sizeof(float) * (size_t)T * W);
    for (int t = 0; t < T; t++) c->dec_roll[(size_t)t * W + S + t] = 1;
    for (int l = 0; l < c->dec_layers; l++) {
        const float *Cx = c->cross + (size_t)l * T * (S + 1);
        mat_mul(tmp, c->dec_self + (size_t)l * T * T, c->dec_roll, T, T, W);
        memcpy(c->dec_roll, tmp, sizeof(float) * (size_t)T * W);
        for (int t = 0; t < T; t++) {
            float *r = c->dec_roll + (size_t)t * W;
            const float *x = Cx + (size_t)t * (S + 1);
            for (int k = 0; k < W; k++) r[k] *= x[S];
            for (int j = 0; j < S; j++)
                for (int k = 0; k < S; k++) r[k] += x[j] * c->enc_roll[(size_t)j * S + k];
            double share = 0;
            for (int k = 0; k < S; k++) share += r[k];
            c->share[(size_t)l * T + t] = (float)share;
        }
    }
    free(tmp);
}

void contrib_alloc(Contributions *c, int S, int T, int enc_layers, int dec_layers) {
    memset(c, 0, sizeof *c);
    c->S = S, c->T = T, c->enc_layers = enc_layers, c->dec_layers = dec_layers;
    c->enc = xcalloc((size_t)enc_layers * S * S, sizeof(float));
    c->dec_self = xcalloc((size_t)dec_layers * T * T, sizeof(float));
    c->cross = xcalloc((size_t)dec_layers * T * (S + 1), sizeof(float));
    c->enc_roll = xcalloc((size_t)S * S, sizeof(float));
    c->dec_roll = xcalloc((size_t)T * (S + T), sizeof(float));
    c->share = xcalloc((size_t)dec_layers * T, sizeof(float));
}

void contrib_compute(const Model *m, int S, int T, Contributions *c) {
    int d = m->cfg.d_model, Le = m->cfg.encoder_layers, Ld = m->cfg.decoder_layers;
    int most = S > T ? S : T;
    contrib_alloc(c, S, T, Le, Ld);
    float *vec = xmalloc(sizeof(float) * (size_t)(most + 1) * d), *bias = xmalloc(sizeof(float) * (size_t)d);
    float *keys = xmalloc(sizeof(float) * (size_t)most * m->cfg.heads * d),
          *cr = xmalloc(sizeof(float) * (size_t)(most + 1));

    for (int l = 0; l < Le; l++) block_rows(m, ATTN_ENC_SELF, l, c->enc + (size_t)l * S * S, vec, bias, keys, cr);
    for (int l = 0; l < Ld; l++) {
        block_rows(m, ATTN_DEC_SELF, l, c->dec_self + (size_t)l * T * T, vec, bias, keys, cr);
        block_rows(m, ATTN_CROSS, l, c->cross + (size_t)l * T * (S + 1), vec, bias, keys, cr);
    }
    contrib_rollout(c);
    free(vec), free(bias), free(keys), free(cr);
}

void contrib_free(Contributions *c) {
    free(c->enc), free(c->dec_self), free(c->cross), free(c->enc_roll), free(c->dec_roll), free(c->share);
    memset(c, 0, sizeof *c);
}

const float *contrib_last_cross(const Contributions *c) {
    return c->cross + (size_t)(c->dec_layers - 1) * c->T * (c->S + 1);
}
