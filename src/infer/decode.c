/* decode: see decode.h.
 *
 * Search only: the network is the model's incremental step (model_step), the same code
 * that training runs, one query row per sentence with cached keys and values. */
#include "infer/decode.h"

#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "util.h"

#define GROUP 64 /* sentences decoded together (after sorting by length) */

int decode_max_len(const Model *m, int src_len) {
    int n = 2 * src_len + 10, cap = m->cfg.max_positions - 1;
    return n < cap ? n : cap;
}

static int argmax_token(const float *logits, int V) {
    int best = VOCAB_EOS;
    for (int v = VOCAB_N_SPECIAL; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    if (logits[VOCAB_UNK] > logits[best]) best = VOCAB_UNK;
    return best;
}

static void decode_group(Model *m, const Seq *const *src, int B, Seq *const *out) {
    int S = 1, Tmax = 1;
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
    ModelBatch b = {B, S, 1, src_ids, src_len, tok, NULL, &one};
    DecodeState st;
    model_step_begin(m, &st, &b, Tmax);
    int remaining = B, V = m->cfg.tgt_vocab;
    for (int t = 0; t < Tmax - 1 && remaining > 0; t++) {
        const float *logits = model_step(m, &st, tok);
        for (int i = 0; i < B; i++) {
            if (done[i]) continue;
            int best = argmax_token(logits + (size_t)i * V, V);
            if (best != VOCAB_EOS) out[i]->ids[out[i]->len++] = tok[i] = best;
            if (best == VOCAB_EOS || out[i]->len >= decode_max_len(m, src[i]->len)) done[i] = 1, remaining--;
        }
    }
    model_step_end(&st);
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
