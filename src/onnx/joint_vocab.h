/* joint_vocab: the one id space of an exported model. transformers.js encodes the source
 * and decodes the output with one tokenizer, while a qkv run has a source and a target
 * vocabulary (the same one only with data.shared_vocab), so the export numbers the union:
 *
 *   ids 0 .. n_target-1        the target vocabulary, at its own ids (specials 0..3 first)
 *   ids n_target .. size-1     the source tokens the target lacks, in source order
 *
 * The output ids are then qkv's own target ids; the encoder's graph maps each id to the
 * source id qkv would have read (source_of: a target-only token is <unk> to the source),
 * and the decoder's graph gives the ids past the target vocabulary a logit no token can
 * lose to (onnx/seq2seq.h). With a shared vocabulary the maps are the identity and the
 * graphs are qkv's as they are. Knows nothing of files or graphs. */
#ifndef QKV_ONNX_JOINT_VOCAB_H
#define QKV_ONNX_JOINT_VOCAB_H

#include "data/vocab.h"

typedef struct {
    int size;       /* ids in all */
    int n_target;   /* the target vocabulary's size: ids below it are target ids */
    int n_source;   /* the source vocabulary's size */
    int shared;     /* source and target vocabularies are the same list: every map the identity */
    char **tokens;  /* (size) each id's string, owned */
    int *source_of; /* (size) the source id each id stands for to the encoder (<unk> when none) */
    int *of_source; /* (n_source) each source id's id here */
} JointVocab;

void joint_vocab_build(JointVocab *j, const Vocab *src, const Vocab *tgt);
void joint_vocab_free(JointVocab *j); /* zeroed or freed: no-op */

#endif
