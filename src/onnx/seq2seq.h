/* seq2seq: qkv's model as the two ONNX graphs a seq2seq runtime loads (the layout of
 * transformers.js and Hugging Face's exports): the encoder, and the decoder with a key/value
 * cache ("merged": one graph serves the first step, with empty pasts, and every later one).
 *
 *   encoder_model.onnx   input_ids, attention_mask     int64 (batch_size, encoder_sequence_length)
 *                        -> last_hidden_state          float (batch_size, encoder_sequence_length, d_model)
 *   decoder_model_merged.onnx
 *                        input_ids                     int64 (batch_size, decoder_sequence_length)
 *                        encoder_hidden_states         float (batch_size, encoder_sequence_length, d_model)
 *                        encoder_attention_mask        int64 (batch_size, encoder_sequence_length)
 *                        past_key_values.{i}.decoder.key|value
 *                                                      float (batch_size, heads, past_decoder_sequence_length, d_head)
 *                        -> logits                     float (batch_size, decoder_sequence_length, vocab)
 *                           present.{i}.decoder.key|value  the pasts with the new positions appended
 *
 * Ids are the export's (onnx/joint_vocab.h: the target vocabulary's, then the source
 * tokens it lacks), vocab their count. The decoder's positions start at the pasts' length. The graphs compute what
 * nn/model.c computes (the same weights, by their table names, as initializers), never reading the model's code: the
 * math is restated here in ONNX's operators. */
#ifndef QKV_ONNX_SEQ2SEQ_H
#define QKV_ONNX_SEQ2SEQ_H

#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"
#include "onnx/joint_vocab.h"

/* The protobuf bytes of each graph (*data malloc'd, the caller's). 0, or -1 with the error
 * set when the model cannot be written as one ONNX file. */
int onnx_encoder_model(const Model *m, const JointVocab *jv, uint8_t **data, size_t *len);
int onnx_decoder_model(const Model *m, const JointVocab *jv, uint8_t **data, size_t *len);

#endif
