/* decode: see decode.h.
 *
 * Greedy search with cached keys and values: the encoder runs once (the model's own
 * forward pass); then each step feeds only the newest token of every sentence through
 * the decoder, appending its self-attention key and value to a per-layer cache and
 * reading cross-attention keys and values computed once from the encoder output. The
 * arithmetic is the model's (same kernels, same order of operations per row), so the
 * tokens equal those of re-running the full decoder at every step; a test checks it. */
#include "infer/decode.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels.h"
#include "util.h"
#include "data/vocab.h"

#define GROUP 64 /* sentences decoded together (after sorting by length) */

int decode_max_len(const Model *m, int src_len) {
    int n = 2 * src_len + 10, cap = m->cfg.max_positions - 1;
    return n < cap ? n : cap;
}

typedef struct {
    float *k_self, *v_self;   /* (B, Tmax, d) */
    float *k_cross, *v_cross; /* (B, S, d) */
} LayerCache;

typedef struct {
    int B, S, Tmax, d, ff, H;
    LayerCache layer[QKV_MAX_LAYERS];
    float *x, *h, *q, *ctx, *o, *hidden, *scores, *logits, *mean, *rstd, *kv_tmp;
} Cache;

static void cache_init(Cache *c, const Model *m, int B, int S, int Tmax) {
    const ModelConfig *mc = &m->cfg;
    int d = mc->d_model;
    *c = (Cache){.B = B, .S = S, .Tmax = Tmax, .d = d, .ff = mc->d_ff, .H = mc->heads};
    for (int l = 0; l < mc->decoder_layers; l++) {
        LayerCache *lc = &c->layer[l];
        lc->k_self = xmalloc(sizeof(float) * (size_t)B * Tmax * d);
        lc->v_self = xmalloc(sizeof(float) * (size_t)B * Tmax * d);
        lc->k_cross = xmalloc(sizeof(float) * (size_t)B * S * d);
        lc->v_cross = xmalloc(sizeof(float) * (size_t)B * S * d);
    }
    size_t bd = (size_t)B * d;
    c->x = xmalloc(sizeof(float) * bd), c->h = xmalloc(sizeof(float) * bd), c->q = xmalloc(sizeof(float) * bd);
    c->ctx = xmalloc(sizeof(float) * bd), c->o = xmalloc(sizeof(float) * bd), c->kv_tmp = xmalloc(sizeof(float) * 2 * bd);
    c->hidden = xmalloc(sizeof(float) * (size_t)B * c->ff);
    c->scores = xmalloc(sizeof(float) * (size_t)(Tmax > S ? Tmax : S));
    c->logits = xmalloc(sizeof(float) * (size_t)B * mc->tgt_vocab);
    c->mean = xmalloc(sizeof(float) * (size_t)B), c->rstd = xmalloc(sizeof(float) * (size_t)B);
}

static void cache_free(Cache *c, int layers) {
    for (int l = 0; l < layers; l++) {
        free(c->layer[l].k_self), free(c->layer[l].v_self), free(c->layer[l].k_cross), free(c->layer[l].v_cross);
    }
    free(c->x), free(c->h), free(c->q), free(c->ctx), free(c->o), free(c->kv_tmp), free(c->hidden), free(c->scores);
    free(c->logits), free(c->mean), free(c->rstd);
}

/* One query row per sequence against n_keys[b] cached keys (row stride `stride` rows
 * per sequence): ctx = softmax(q k^T / sqrt(dh)) v, head by head. */
static void cached_attention(Cache *c, const float *q, const float *keys, const float *values, int stride,
                             const int *n_keys, int same_n) {
    int d = c->d, H = c->H, dh = d / H;
    float scale = 1.0f / sqrtf((float)dh);
    for (int b = 0; b < c->B; b++) {
        int n = same_n ? *n_keys : n_keys[b];
        const float *K = keys + (size_t)b * stride * d, *Vv = values + (size_t)b * stride * d;
        for (int h = 0; h < H; h++) {
            const float *qh = q + (size_t)b * d + h * dh;
            for (int j = 0; j < n; j++) {
                const float *kj = K + (size_t)j * d + h * dh;
                float s = 0.0f;
                for (int e = 0; e < dh; e++) s += qh[e] * kj[e];
                c->scores[j] = s * scale;
            }
            softmax_forward(c->scores, c->scores, n, n);
            float *out = c->ctx + (size_t)b * d + h * dh;
            memset(out, 0, sizeof(float) * (size_t)dh);
            for (int j = 0; j < n; j++) {
                const float *vj = Vv + (size_t)j * d + h * dh;
                float p = c->scores[j];
                for (int e = 0; e < dh; e++) out[e] += p * vj[e];
            }
        }
    }
}

/* The sub-layer input for pre-LN, or x itself. */
static const float *sub_in(Cache *c, const NormParams *n, int pre) {
    if (!pre) return c->x;
    layernorm_forward(c->h, c->mean, c->rstd, c->x, n->w, n->b, c->B, c->d);
    return c->h;
}

/* x = x + y (pre-LN) or LN(x + y) (post-LN). */
static void sub_out(Cache *c, const NormParams *n, const float *y, int pre) {
    size_t cnt = (size_t)c->B * c->d;
    for (size_t i = 0; i < cnt; i++) c->x[i] += y[i];
    if (!pre) layernorm_forward(c->x, c->mean, c->rstd, c->x, n->w, n->b, c->B, c->d);
}

/* Feeds token ids tok[b] at position t; leaves the logits of every sequence in c->logits. */
static void decode_step(Model *m, Cache *c, const int *tok, int t, const int *src_len) {
    const ModelConfig *mc = &m->cfg;
    int d = c->d, B = c->B, pre = mc->pre_norm;
    float scale = sqrtf((float)d);
    for (int b = 0; b < B; b++) {
        const float *e = m->p.tgt_embed + (size_t)tok[b] * d, *pe = m->pos_table + (size_t)t * d;
        for (int k = 0; k < d; k++) c->x[(size_t)b * d + k] = e[k] * scale + pe[k];
    }
    int n_self = t + 1;
    for (int l = 0; l < mc->decoder_layers; l++) {
        const DecoderLayerParams *w = &m->p.dec[l];
        LayerCache *lc = &c->layer[l];
        /* masked self-attention: the new key and value join the cache */
        const float *in = sub_in(c, &w->norm1, pre);
        matmul_forward(c->q, in, w->self_attn.w_q, w->self_attn.b_q, B, d, d);
        matmul_forward(c->kv_tmp, in, w->self_attn.w_k, w->self_attn.b_k, B, d, d);
        matmul_forward(c->kv_tmp + (size_t)B * d, in, w->self_attn.w_v, w->self_attn.b_v, B, d, d);
        for (int b = 0; b < B; b++) {
            memcpy(lc->k_self + ((size_t)b * c->Tmax + t) * d, c->kv_tmp + (size_t)b * d, sizeof(float) * (size_t)d);
            memcpy(lc->v_self + ((size_t)b * c->Tmax + t) * d, c->kv_tmp + ((size_t)B + b) * d, sizeof(float) * (size_t)d);
        }
        cached_attention(c, c->q, lc->k_self, lc->v_self, c->Tmax, &n_self, 1);
        matmul_forward(c->o, c->ctx, w->self_attn.w_o, w->self_attn.b_o, B, d, d);
        sub_out(c, &w->norm1, c->o, pre);
        /* cross-attention: Q from the decoder, K/V cached from the encoder output */
        in = sub_in(c, &w->norm2, pre);
        matmul_forward(c->q, in, w->cross_attn.w_q, w->cross_attn.b_q, B, d, d);
        cached_attention(c, c->q, lc->k_cross, lc->v_cross, c->S, src_len, 0);
        matmul_forward(c->o, c->ctx, w->cross_attn.w_o, w->cross_attn.b_o, B, d, d);
        sub_out(c, &w->norm2, c->o, pre);
        /* feed-forward */
        in = sub_in(c, &w->norm3, pre);
        matmul_forward(c->hidden, in, w->ffn.w_1, w->ffn.b_1, B, d, c->ff);
        relu_forward(c->hidden, c->hidden, (size_t)B * c->ff);
        matmul_forward(c->o, c->hidden, w->ffn.w_2, w->ffn.b_2, B, c->ff, d);
        sub_out(c, &w->norm3, c->o, pre);
    }
    const float *h = c->x;
    if (pre) {
        layernorm_forward(c->h, c->mean, c->rstd, c->x, m->p.dec_norm.w, m->p.dec_norm.b, B, d);
        h = c->h;
    }
    /* logits = h . generator^T, the same product as the model's */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, mc->tgt_vocab, d, 1.0f, h, d, m->p.generator, d, 0.0f,
                c->logits, mc->tgt_vocab);
}

static int argmax_token(const float *logits, int V) {
    int best = VOCAB_EOS;
    for (int v = VOCAB_N_SPECIAL; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    if (logits[VOCAB_UNK] > logits[best]) best = VOCAB_UNK;
    return best;
}

static void decode_group(Model *m, const Seq *const *src, int B, Seq *const *out) {
    int S = 1, Tmax = 1, d = m->cfg.d_model;
    for (int i = 0; i < B; i++) {
        if (src[i]->len + 1 > S) S = src[i]->len + 1;
        int t = decode_max_len(m, src[i]->len) + 1;
        if (t > Tmax) Tmax = t;
    }
    int *src_ids = xcalloc((size_t)B * S, sizeof(int)), *src_len = xmalloc(sizeof(int) * (size_t)B);
    int *tok = xmalloc(sizeof(int) * (size_t)B), *done = xcalloc((size_t)B, sizeof(int)), one = 1;
    for (int i = 0; i < B; i++) {
        memcpy(src_ids + (size_t)i * S, src[i]->ids, sizeof(int) * (size_t)src[i]->len);
        src_ids[(size_t)i * S + src[i]->len] = VOCAB_EOS;
        src_len[i] = src[i]->len + 1;
        out[i]->ids = xmalloc(sizeof(int) * (size_t)Tmax);
        out[i]->len = 0;
        tok[i] = VOCAB_BOS;
    }
    model_reserve(m, model_arena_floats(m, B, S, 1));
    ModelBatch b = {B, S, 1, src_ids, src_len, tok, NULL, &one};
    model_encode(m, &b);
    Cache c;
    cache_init(&c, m, B, S, Tmax);
    for (int l = 0; l < m->cfg.decoder_layers; l++) {
        const AttnParams *w = &m->p.dec[l].cross_attn;
        matmul_forward(c.layer[l].k_cross, m->a.src.out, w->w_k, w->b_k, B * S, d, d);
        matmul_forward(c.layer[l].v_cross, m->a.src.out, w->w_v, w->b_v, B * S, d, d);
    }
    int remaining = B, V = m->cfg.tgt_vocab;
    for (int t = 0; t < Tmax - 1 && remaining > 0; t++) {
        decode_step(m, &c, tok, t, src_len);
        for (int i = 0; i < B; i++) {
            if (done[i]) continue;
            int best = argmax_token(c.logits + (size_t)i * V, V);
            if (best != VOCAB_EOS) out[i]->ids[out[i]->len++] = tok[i] = best;
            if (best == VOCAB_EOS || out[i]->len >= decode_max_len(m, src[i]->len)) done[i] = 1, remaining--;
        }
    }
    cache_free(&c, m->cfg.decoder_layers);
    free(src_ids), free(src_len), free(tok), free(done);
}

static int by_src_len(const void *a, const void *b) {
    const Seq *x = *(const Seq *const *)a, *y = *(const Seq *const *)b;
    return (x->len > y->len) - (x->len < y->len);
}

void greedy_decode(Model *m, const Seq *src, int n, Seq *out) {
    /* similar lengths together: less padding in the encoder and fewer idle rows */
    const Seq **order = xmalloc(sizeof(Seq *) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) order[i] = &src[i];
    qsort(order, (size_t)n, sizeof(Seq *), by_src_len);
    Seq **outs = xmalloc(sizeof(Seq *) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) outs[i] = &out[order[i] - src];
    for (int i = 0; i < n; i += GROUP) decode_group(m, order + i, n - i < GROUP ? n - i : GROUP, outs + i);
    free(order), free(outs);
}
