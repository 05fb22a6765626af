/* readout: steps, the logit lens and pins (readout.h). */
#include "explain/readout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "util/err.h"
#include "util/mem.h"

/* the k best of lp (V) into ids and values, best first; ties by id */
static void top_k(const float *lp, int V, int k, int *ids, float *vals) {
    int n = 0;
    for (int v = 0; v < V; v++) {
        if (n == k && lp[v] <= vals[n - 1]) continue;
        int i = n < k ? n++ : k - 1;
        while (i > 0 && lp[v] > vals[i - 1]) ids[i] = ids[i - 1], vals[i] = vals[i - 1], i--;
        ids[i] = v, vals[i] = lp[v];
    }
    for (int i = n; i < k; i++) ids[i] = -1, vals[i] = -INFINITY;
}

void whatif_steps(Model *m, const int *src, int ns, const int *tgt, int nt, int k, WhatifSteps *out) {
    int S = ns + 1, T = nt + 1, V = m->cfg.tgt_vocab, L = m->cfg.decoder_layers, d = m->cfg.d_model;
    memset(out, 0, sizeof *out);
    out->T = T, out->k = k, out->L = L;
    int *s = xmalloc(sizeof(int) * (size_t)S), *tin = xmalloc(sizeof(int) * (size_t)T),
        *tout = xmalloc(sizeof(int) * (size_t)T);
    batch_frame_source(src, ns, s, S);
    batch_frame_target(tgt, nt, tin, tout, T);
    ModelBatch b = {1, S, T, s, &S, tin, tout, &T, 0};
    model_reserve(m, model_arena_floats(m, 1, S, T));
    model_forward(m, &b, 0, 0, 0);
    out->logp = xmalloc(sizeof(float) * (size_t)T), out->entropy = xmalloc(sizeof(float) * (size_t)T);
    out->top = xmalloc(sizeof(int) * (size_t)T * k), out->top_lp = xmalloc(sizeof(float) * (size_t)T * k);
    out->lens_top = xmalloc(sizeof(int) * (size_t)L * T * k), out->lens_lp = xmalloc(sizeof(float) * (size_t)L * T * k);
    out->lens_word = xmalloc(sizeof(float) * (size_t)L * T);
    float *lp = xmalloc(sizeof(float) * (size_t)V);
    for (int t = 0; t < T; t++) {
        model_row_log_probs(m, t, lp);
        double h = 0;
        for (int v = 0; v < V; v++) h -= lp[v] > -INFINITY ? exp(lp[v]) * lp[v] : 0;
        out->entropy[t] = (float)h, out->logp[t] = lp[tout[t]];
        top_k(lp, V, k, out->top + (size_t)t * k, out->top_lp + (size_t)t * k);
    }
    for (int l = 0; l < L; l++)
        for (int t = 0; t < T; t++) {
            model_lens_log_probs(m, model_stream_output(m, 1, l) + (size_t)t * d, lp);
            out->lens_word[(size_t)l * T + t] = lp[tout[t]];
            top_k(lp, V, k, out->lens_top + ((size_t)l * T + t) * k, out->lens_lp + ((size_t)l * T + t) * k);
        }
    free(lp), free(s), free(tin), free(tout);
}

void whatif_steps_free(WhatifSteps *w) {
    free(w->logp), free(w->entropy), free(w->top), free(w->top_lp), free(w->lens_top), free(w->lens_lp),
        free(w->lens_word);
    memset(w, 0, sizeof *w);
}

int whatif_pin(Model *m, int layer, int head, int query, int key, int S, float *weights, AttnIntervene *iv) {
    if (layer < 0 || layer >= m->cfg.decoder_layers || head < 0 || head >= m->cfg.heads)
        return err_set("pin: this model's cross-attention has layers 0..%d and heads 0..%d", m->cfg.decoder_layers - 1,
                       m->cfg.heads - 1);
    if (key < 0 || key >= S) return err_set("pin: source position %d: the source has positions 0..%d", key, S - 1);
    if (query < 0) return err_set("pin: target position %d is not one", query);
    for (int j = 0; j < S; j++) weights[j] = j == key;
    *iv = (AttnIntervene){.pin_head = head, .pin_query = query, .pin_weights = weights};
    model_attention_intervene(m, ATTN_CROSS, layer, iv);
    return 0;
}

void whatif_clear(Model *m) {
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < (k == ATTN_ENC_SELF ? m->cfg.encoder_layers : m->cfg.decoder_layers); l++)
            model_attention_intervene(m, (AttnKind)k, l, NULL);
    model_stream_patch(m, 0, 0, NULL, NULL);
}
