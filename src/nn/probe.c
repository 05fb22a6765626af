/* probe: the model read and changed from outside nn, by name, never by walking the arena:
 * one attention sub-layer's acts, weights, block and interventions by (kind, layer), the
 * residual stream after a layer (read, patched, differentiated), the output distribution of
 * a row or of any decoder stream vector (the logit lens), the head gates, and the
 * attribution hooks on the embeddings. The passes themselves (model.c) consult the hooks set here. */
#define QKV_NN_INTERNAL
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels.h"
#include "nn/model.h"
#include "util/mem.h"

/* z (V) logits into log-probabilities, in place */
static void log_softmax(float *z, int V) {
    float top = z[0];
    for (int v = 1; v < V; v++) top = z[v] > top ? z[v] : top;
    double sum = 0;
    for (int v = 0; v < V; v++) sum += exp((double)z[v] - top);
    float lse = top + (float)log(sum);
    for (int v = 0; v < V; v++) z[v] -= lse;
}

void model_row_log_probs(const Model *m, int row, float *out) {
    int d = m->cfg.d_model, V = m->cfg.tgt_vocab;
    logits_forward(out, m->a.tgt.out + (size_t)row * d, m->p.generator, 1, d, V);
    log_softmax(out, V);
}

const AttnActs *model_attention_acts(const Model *m, AttnKind kind, int layer) {
    return attn_acts((Model *)m, kind, layer); /* the cast only shares the mapping: nothing is written */
}

const AttnParams *model_attention_params(const Model *m, AttnKind kind, int layer) {
    if (!attn_layer_exists(m, kind, layer)) return NULL;
    return kind == ATTN_ENC_SELF   ? &m->p.enc[layer].self_attn
           : kind == ATTN_DEC_SELF ? &m->p.dec[layer].self_attn
                                   : &m->p.dec[layer].cross_attn;
}

int model_attention_intervene(Model *m, AttnKind kind, int layer, const AttnIntervene *iv) {
    AttnActs *a = attn_acts(m, kind, layer);
    if (!a) return -1;
    a->iv = iv;
    return 0;
}

const float *model_stream_output(const Model *m, int stream, int layer) {
    if (stream == 0) return layer >= 0 && layer < m->cfg.encoder_layers ? m->a.enc[layer].r2.out : NULL;
    return layer >= 0 && layer < m->cfg.decoder_layers ? m->a.dec[layer].r3.out : NULL;
}

void model_stream_patch(Model *m, int stream, int layer, const float *rows, const unsigned char *which) {
    m->patch_stream = stream, m->patch_layer = layer, m->patch_rows = rows, m->patch_which = which;
}

void model_stream_keep_grad(Model *m, int layer, float *grad) {
    if (layer >= 0 && layer < QKV_MAX_LAYERS) m->grad_keep[layer] = grad;
}

void model_lens_log_probs(const Model *m, const float *h, float *out) {
    int d = m->cfg.d_model, V = m->cfg.tgt_vocab;
    float *x = xmalloc(sizeof(float) * (size_t)d), mean, rstd;
    if (m->cfg.pre_norm) layernorm_forward(x, &mean, &rstd, h, m->p.dec_norm.w, m->p.dec_norm.b, 1, d);
    else memcpy(x, h, sizeof(float) * (size_t)d);
    logits_forward(out, x, m->p.generator, 1, d, V);
    free(x);
    log_softmax(out, V);
}

int model_attention_block(const Model *m, AttnKind kind, int layer, AttnBlockView *v) {
    if (!attn_layer_exists(m, kind, layer)) return -1;
    const Acts *a = &m->a;
    const Residual *r;
    const NormParams *n;
    if (kind == ATTN_ENC_SELF) {
        r = &a->enc[layer].r1, n = &m->p.enc[layer].norm1;
        v->x = layer ? a->enc[layer - 1].r2.out : a->src.x;
    } else {
        const DecoderLayerActs *e = &a->dec[layer];
        r = kind == ATTN_DEC_SELF ? &e->r1 : &e->r2;
        n = kind == ATTN_DEC_SELF ? &m->p.dec[layer].norm1 : &m->p.dec[layer].norm2;
        v->x = kind == ATTN_CROSS ? e->r1.out : layer ? a->dec[layer - 1].r3.out : a->tgt.x;
    }
    v->pre_norm = m->cfg.pre_norm;
    v->sum = r->sum, v->out = r->out, v->mean = r->mean, v->rstd = r->rstd;
    v->norm_w = n->w, v->norm_b = n->b;
    v->kv = kind == ATTN_CROSS ? a->src.out : v->pre_norm ? r->ln : v->x;
    return 0;
}

void model_set_embedding_hooks(Model *m, const float *src_alpha, const float *tgt_alpha, float *src_grad,
                               float *tgt_grad) {
    m->embed_alpha[0] = src_alpha, m->embed_alpha[1] = tgt_alpha;
    m->embed_grad[0] = src_grad, m->embed_grad[1] = tgt_grad;
}

/* carve() never touches AttnActs.scores, so the pointer outlives re-carving for new shapes. */
int model_attention_keep_scores(Model *m, AttnKind kind, int layer, float *scores) {
    AttnActs *a = attn_acts(m, kind, layer);
    if (!a) return -1;
    a->scores = scores;
    return 0;
}

/* ---- head gates -------------------------------------------------------------------------- */

/* Points one sub-layer's acts at its heads' gates, or at none. */
void point_gates(const Model *m, AttnActs *a, AttnKind kind, int layer) {
    int at = model_head_index(m, kind, layer, 0);
    a->gate = m->head_gate ? m->head_gate + at : NULL;
    a->dgate = m->head_gate ? m->head_gate_grad + at : NULL;
    a->dgate_rows = m->head_gate && m->head_gate_rows ? m->head_gate_rows + at : NULL;
    a->dgate_stride = model_head_count(m);
    a->dgate_nrows = m->head_gate_nrows;
}

static void point_all_gates(Model *m) {
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < (k == ATTN_ENC_SELF ? m->cfg.encoder_layers : m->cfg.decoder_layers); l++)
            point_gates(m, attn_acts(m, (AttnKind)k, l), (AttnKind)k, l);
}

/* carve() never touches AttnActs.gate, so the pointers outlive re-carving; the
 * incremental decoder's acts get theirs in model_step_begin. */
void model_set_head_gates(Model *m, const float *gates) {
    if (gates && !m->head_gate) {
        m->head_gate = xmalloc(sizeof(float) * (size_t)model_head_count(m));
        m->head_gate_grad = xcalloc((size_t)model_head_count(m), sizeof(float));
    }
    if (gates) memcpy(m->head_gate, gates, sizeof(float) * (size_t)model_head_count(m));
    else {
        free(m->head_gate), free(m->head_gate_grad);
        m->head_gate = m->head_gate_grad = m->head_gate_rows = NULL;
        m->head_gate_nrows = 0;
    }
    point_all_gates(m);
}

void model_head_gate_grads_by_row(Model *m, float *rows, int nrows) {
    m->head_gate_rows = rows;
    m->head_gate_nrows = rows ? nrows : 0;
    point_all_gates(m);
}

const float *model_head_gate_grads(const Model *m) { return m->head_gate_grad; }
