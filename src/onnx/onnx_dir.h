/* onnx_dir: the folder `qkv export --format onnx` writes, in the layout transformers.js and
 * Hugging Face's ONNX exports use for a translation model:
 *
 *   config.json                  the model's sizes and special ids (model_type "marian")
 *   generation_config.json       how qkv decodes: greedy, the ids it never emits, the length cap
 *   tokenizer.json               one tokenizer over the export's ids: onnx/tokenizer_json.h
 *   tokenizer_config.json
 *   index.html                   a page that translates in the browser (onnx/onnx_page.html)
 *   onnx/encoder_model.onnx      onnx/seq2seq.h
 *   onnx/decoder_model_merged.onnx
 *   reference.json               only when asked: onnx/reference.h
 *
 * Written whole or not at all (util/staged_dir.h). */
#ifndef QKV_ONNX_ONNX_DIR_H
#define QKV_ONNX_ONNX_DIR_H

#include "data/vocab.h"
#include "nn/model.h"
#include "onnx/joint_vocab.h"

typedef struct {
    const Model *m;
    const JointVocab *jv;       /* the export's ids (joint_vocab_build of the run's vocabularies) */
    const char *tokenizer_json; /* tokenizer.json's text (onnx/tokenizer_json.h), made first: a
                                   tokenizer the format cannot state is refused before long work */
    const char *reference_json; /* NULL, or reference.json's text */
} OnnxDir;

/* 0, or -1 with the error set (the disk's: err_status 1). */
int onnx_dir_write(const char *out, const OnnxDir *e);
/* Whether name ("onnx/x.onnx" inside onnx/) is an entry of the folder's own: a new export
 * replaces it, and leaves any other, a user's own graphs in onnx/ too (see staged_dir.h). */
int onnx_dir_entry(const char *name);

#endif
