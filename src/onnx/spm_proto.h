/* spm_proto: what the export's tokenizer needs from a SentencePiece model, read from its
 * serialized bytes (sentencepiece_model.proto): each piece's score and type, the model's
 * kind, byte fallback, and the normalizer's rule. data/spm.h runs a model; this only reads
 * one, so that the tokenizer.json written for transformers.js holds the same pieces with
 * the same scores. */
#ifndef QKV_ONNX_SPM_PROTO_H
#define QKV_ONNX_SPM_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* ModelProto.SentencePiece.Type and TrainerSpec.ModelType values */
enum { SPM_NORMAL = 1, SPM_UNKNOWN = 2, SPM_CONTROL = 3, SPM_USER_DEFINED = 4, SPM_UNUSED = 5, SPM_BYTE = 6 };
enum { SPM_UNIGRAM = 1, SPM_BPE = 2, SPM_WORD = 3, SPM_CHAR = 4 };

typedef struct {
    int n;        /* pieces */
    char **piece; /* (n) owned */
    float *score; /* (n) */
    int *type;    /* (n) SPM_NORMAL ... */
    int model_type, byte_fallback;
    char norm_name[64];      /* the normalization rule ("nmt_nfkc", "identity", ...) */
    const uint8_t *charsmap; /* the rule's precompiled map, inside the bytes read */
    size_t charsmap_len;
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
} SpmProto;

/* Reads bytes (which must outlive charsmap). -1 with the error set, naming `what`, when
 * they are not a model. */
int spm_proto_read(SpmProto *s, const void *bytes, size_t len, const char *what);
void spm_proto_free(SpmProto *s); /* zeroed or freed: no-op */

#endif
