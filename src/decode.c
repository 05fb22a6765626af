/* decode: see decode.h. */
#include "decode.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "vocab.h"

#define GROUP 64 /* sentences decoded together */

int decode_max_len(const Model *m, int src_len) {
    int n = 2 * src_len + 10, cap = m->cfg.max_positions - 1;
    return n < cap ? n : cap;
}

static void decode_group(Model *m, const Seq *src, int B, Seq *out) {
    int S = 1, Tmax = 1;
    for (int i = 0; i < B; i++) {
        if (src[i].len + 1 > S) S = src[i].len + 1;
        int t = decode_max_len(m, src[i].len) + 1;
        if (t > Tmax) Tmax = t;
    }
    int *src_ids = xcalloc((size_t)B * S, sizeof(int)), *src_len = xmalloc(sizeof(int) * (size_t)B);
    int *tgt = xcalloc((size_t)B * Tmax, sizeof(int)), *tgt_len = xmalloc(sizeof(int) * (size_t)B);
    int *done = xcalloc((size_t)B, sizeof(int));
    for (int i = 0; i < B; i++) {
        memcpy(src_ids + (size_t)i * S, src[i].ids, sizeof(int) * (size_t)src[i].len);
        src_ids[(size_t)i * S + src[i].len] = VOCAB_EOS;
        src_len[i] = src[i].len + 1;
        out[i].ids = xmalloc(sizeof(int) * (size_t)Tmax);
        out[i].len = 0;
    }
    model_reserve(m, model_arena_floats(m, B, S, Tmax));
    ModelBatch b = {B, S, 1, src_ids, src_len, NULL, NULL, tgt_len};
    model_encode(m, &b);
    int remaining = B;
    for (int t = 1; t < Tmax && remaining > 0; t++) {
        /* rows of tgt have stride Tmax; the model wants stride t, so repack the prefix */
        int *prefix = xmalloc(sizeof(int) * (size_t)B * t);
        for (int i = 0; i < B; i++) {
            prefix[(size_t)i * t] = VOCAB_BOS;
            memcpy(prefix + (size_t)i * t + 1, tgt + (size_t)i * Tmax, sizeof(int) * (size_t)(t - 1));
            tgt_len[i] = t;
        }
        b.T = t;
        b.tgt_in = prefix;
        model_decode(m, &b);
        for (int i = 0; i < B; i++) {
            if (done[i]) continue;
            const float *logits = model_logits_at(m, i, t - 1);
            int best = VOCAB_EOS;
            float best_v = logits[VOCAB_EOS];
            for (int v = VOCAB_N_SPECIAL; v < m->cfg.tgt_vocab; v++)
                if (logits[v] > best_v) best_v = logits[v], best = v;
            if (logits[VOCAB_UNK] > best_v) best = VOCAB_UNK;
            if (best == VOCAB_EOS || t >= decode_max_len(m, src[i].len) + 1) {
                done[i] = 1;
                remaining--;
                if (best == VOCAB_EOS) continue;
            }
            tgt[(size_t)i * Tmax + t - 1] = best;
            out[i].ids[out[i].len++] = best;
        }
        free(prefix);
    }
    free(src_ids), free(src_len), free(tgt), free(tgt_len), free(done);
}

void greedy_decode(Model *m, const Seq *src, int n, Seq *out) {
    for (int i = 0; i < n; i += GROUP) decode_group(m, src + i, n - i < GROUP ? n - i : GROUP, out + i);
}
