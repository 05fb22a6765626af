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
#include "onnx/joint_vocab.h"

/* src[i] the sources (no EOS), out[i] qkv's greedy output for it (no EOS), i < n, in
 * qkv's ids: the document as JSON text (malloc'd) in the export's ids (jv), with format
 * "qkv-onnx-reference-1", "vocab_size" (the export's ids), "target_vocab_size",
 * "source_of_id" (each export id's source id, as the encoder reads it) and "lines", each
 * {"source": ids, "output": ids, "encoder": (S, d_model), "log_probs": (len + 1, tgt_vocab),
 * "cross_attentions": (decoder layers, heads, len + 1, S), the weights after the softmax}:
 * row t is the distribution over the token at output position t, given the ones before,
 * over the target vocabulary (the export's ids below target_vocab_size; the others have
 * probability 0). "decoding" lists id sequences of the target vocabulary (tgt, a run of
 * tokenizer kind tokenizer) with qkv's text of each, {"ids", "text"}: SentencePiece's edges
 * (runs of "▁" opening the text, a byte spelling a space, characters cut short), then 200
 * random ones, the same every export; a runtime's decoder, specials skipped, must give the
 * same text. */
char *onnx_reference_json(Model *m, const JointVocab *jv, const Seq *src, const Seq *out, int n, const Vocab *sv,
                          const Vocab *tgt, int tokenizer);

#endif
