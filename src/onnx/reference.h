/* reference: what qkv itself computes for some lines, for checking another runtime of the
 * exported model against it (reference.json beside the graphs).
 *
 * Per line: the source ids as the encoder takes them (EOS appended), the encoder's output,
 * the ids qkv's greedy search chose, and the log-probabilities over the whole target
 * vocabulary at each step of that search, from qkv's own incremental decoding step. */
#ifndef QKV_ONNX_REFERENCE_H
#define QKV_ONNX_REFERENCE_H

#include "data/corpus.h"
#include "nn/model.h"

/* src[i] the sources (no EOS), out[i] qkv's greedy output for it (no EOS), i < n: the
 * document as JSON text (malloc'd) with format "qkv-onnx-reference-1" and "lines", each
 * {"source": ids, "output": ids, "encoder": (S, d_model), "log_probs": (len + 1, tgt_vocab)}:
 * row t is the distribution over the token at output position t, given the ones before. */
char *onnx_reference_json(Model *m, const Seq *src, const Seq *out, int n);

#endif
