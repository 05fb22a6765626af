/* reference: see reference.h. Each line is decoded alone, through model_step as qkv's
 * searches run it, fed the output qkv chose (so the rows are those its greedy search saw). */
#include "onnx/reference.h"

#include <math.h>
#include <stdlib.h>

#include "data/batch.h"
#include "data/vocab.h"
#include "util/json.h"
#include "util/mem.h"

/* z (V) to log-probabilities in lp, normalised in double */
static void log_softmax(float *lp, const float *z, int V) {
    float mx = z[0];
    for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
    double sum = 0.0;
    for (int v = 0; v < V; v++) sum += exp((double)z[v] - mx);
    double norm = mx + log(sum);
    for (int v = 0; v < V; v++) lp[v] = (float)((double)z[v] - norm);
}

static json_t *one_line(Model *m, const JointVocab *jv, DecodeState *st, const Seq *src, const Seq *out) {
    int S = src->len + 1, d = m->cfg.d_model, V = m->cfg.tgt_vocab, one = 1, tok = VOCAB_BOS;
    int *ids = xmalloc(sizeof(int) * (size_t)S), rows = out->len + 1;
    batch_frame_source(src->ids, src->len, ids, S);
    ModelBatch b = {1, S, 1, ids, &S, &tok, NULL, &one, 0};
    model_step_begin(m, st, &b, 1);
    json_t *line = json_object();
    int *export_ids = xmalloc(sizeof(int) * (size_t)S);
    for (int s = 0; s < S; s++) export_ids[s] = jv->of_source[ids[s]];
    json_put(line, "source", json_ints(export_ids, S)); /* output ids: target ids are the export's own */
    free(export_ids);
    json_put(line, "output", json_ints(out->ids, out->len));
    json_put(line, "encoder",
             json_float_rows("%.9g", m->a.src.out, S, d, (size_t)d)); /* model_step_begin's encoder pass */
    float *lp = xmalloc(sizeof(float) * (size_t)rows * V);
    for (int t = 0; t < rows; t++) {
        log_softmax(lp + (size_t)t * V, model_step(m, st, &tok), V);
        if (t < out->len) tok = out->ids[t];
    }
    json_put(line, "log_probs", json_float_rows("%.9g", lp, rows, V, (size_t)V));
    free(lp), free(ids);
    return line;
}

char *onnx_reference_json(Model *m, const JointVocab *jv, const Seq *src, const Seq *out, int n) {
    json_t *root = json_object(), *lines = json_array();
    json_put(root, "format", json_string("qkv-onnx-reference-1"));
    json_put(root, "vocab_size", json_integer(jv->size));
    json_put(root, "target_vocab_size", json_integer(jv->n_target));
    json_put(root, "source_of_id", json_ints(jv->source_of, jv->size));
    DecodeState st = {0};
    for (int i = 0; i < n; i++) json_array_append_new(lines, one_line(m, jv, &st, &src[i], &out[i]));
    model_step_end(&st);
    json_put(root, "lines", lines);
    return json_text_line(root, JSON_WRITE_FLAGS);
}
