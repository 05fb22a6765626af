/* search: see search.h. */
#include "decode/search.h"

#include <math.h>

#include "data/batch.h"
#include "nn/vecmath.h"
#include "util/err.h"
#include "util/mem.h"

DecodeOptions decode_defaults(void) {
    return (DecodeOptions){.beam = 5, .nbest = 1, .length_penalty = 1.0, .max_len_a = 2.0, .max_len_b = 10};
}

int decode_check(const DecodeOptions *o) {
    if (o->beam < 1 || o->beam > 64) return err_set("--beam: %d is not between 1 and 64", o->beam);
    if (o->nbest < 1 || o->nbest > o->beam)
        return err_set("--nbest: %d is not between 1 and the beam (%d)", o->nbest, o->beam);
    if (!(o->length_penalty >= 0.0 && o->length_penalty <= 10.0))
        return err_set("--length-penalty: %g is not between 0 and 10", o->length_penalty);
    if (!(o->max_len_a >= 0.0 && o->max_len_a <= 100.0) || o->max_len_b < 0 || o->max_len_b > 100000)
        return err_set("--max-len-a/--max-len-b: %g, %d out of range (0..100, 0..100000)", o->max_len_a, o->max_len_b);
    if (o->no_repeat_ngram < 0 || o->no_repeat_ngram > 100)
        return err_set("--no-repeat-ngram: %d is not between 0 and 100", o->no_repeat_ngram);
    return 0;
}

int decode_max_len(const Model *m, const DecodeOptions *o, int src_len) {
    double n = o->max_len_a * src_len + o->max_len_b;
    int cap = m->cfg.max_positions - 1;
    return n < cap ? (n < 1 ? 1 : (int)n) : cap;
}

void search_source_batch(const Seq *const *src, int n, int **ids_out, int **len_out, int *width) {
    int S = 1;
    for (int i = 0; i < n; i++)
        if (src[i]->len + 1 > S) S = src[i]->len + 1;
    int *ids = xmalloc(sizeof(int) * (size_t)n * S), *len = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) len[i] = batch_frame_source(src[i]->ids, src[i]->len, ids + (size_t)i * S, S);
    *ids_out = ids, *len_out = len, *width = S;
}

double search_log_normaliser(const float *logits, int V) {
    /* the maximum and the sum of exps in lanes (vector code): libm's expf, a call an
     * element, took a tenth of beam search's time over an 8,000-word vocabulary */
    float mx = vec_max(logits, V);
    return (double)mx + log(vec_sum_exp_double(logits, mx, V));
}
