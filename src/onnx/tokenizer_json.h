/* tokenizer_json: tokenizer.json and tokenizer_config.json, the Hugging Face tokenizers
 * format in which transformers.js (and Python's tokenizers) read a tokenizer, for the
 * export's joint vocabulary (onnx/joint_vocab.h): one tokenizer encodes the source and
 * decodes the output, as those runtimes do.
 *
 *   word      WordLevel over the words, split at whitespace, joined with one space
 *   char      WordLevel over the characters, each blank run one "▁", "▁" back to a space
 *   unigram   Unigram with the source model's pieces and scores (Metaspace, NFKC)
 *   bpe       BPE with merges read from the source model's pieces, in their score order
 *
 * The source is framed as qkv frames it: its ids, then <eos>. Ids the source model lacks
 * (the target's own pieces, byte and control pieces) get a score no source segmentation
 * can lose to (unigram) or no merge that makes them (bpe), so the tokenizer picks the
 * pieces qkv's source model picks. */
#ifndef QKV_ONNX_TOKENIZER_JSON_H
#define QKV_ONNX_TOKENIZER_JSON_H

#include "data/vocab.h"
#include "onnx/joint_vocab.h"

/* The files' text (malloc'd) for a run of tokenizer kind (config.h's TOKENIZER_*) with
 * source vocabulary src, max_length the longest input. NULL with the error set (status
 * 2, one line saying why) when the tokenizer cannot be written in that format. */
char *tokenizer_json(const JointVocab *jv, int kind, const Vocab *src);
char *tokenizer_config_json(const JointVocab *jv, int max_length);

#endif
