/* checkpoint: everything a bit-exact resume needs, in one file in the safetensors layout.
 *
 *   u64 little-endian header length N | N bytes of JSON header | raw float32 data
 *
 * The header maps each tensor name to {"dtype": "F32", "shape": [...], "data_offsets":
 * [begin, end]} (relative to the data section). Model weights keep their table names;
 * Adam's moments are "optim.m.<name>" and "optim.v.<name>". "__metadata__" (string ->
 * string) holds the format, step, data cursor, RNG description, resolved config,
 * vocabulary and data hashes, validation losses and BLEU, the run's elapsed time, a checksum of the data section and a
 * checksum of the header itself (computed with its own 16 hex digits zeroed).
 *
 * Loading verifies the whole file (both checksums, bounds, overlaps, dtypes, shapes,
 * exact length) before touching the model; any fault is one message "<path>: <fault>".
 * Saving is atomic (util/atomic_file.h's write_file_atomic_parts). Knows nothing of run directories. */
#ifndef QKV_CHECKPOINT_H
#define QKV_CHECKPOINT_H

#include <stdint.h>

#include "nn/model.h"
#include "nn/optim.h"

#define CKPT_FORMAT "qkv-checkpoint-1"

typedef struct {
    int64_t step;      /* optimizer steps taken */
    int64_t epoch;     /* data cursor: epoch ... */
    int batch_pos;     /* ... and position in that epoch's batch order */
    int64_t seed;      /* dropout masks and batch order are pure functions of (seed, step/epoch) */
    int threads;       /* OpenBLAS threads used (resume is bit-exact with the same count) */
    double valid_loss; /* at this step, NAN if not validated */
    double best_valid_loss;
    double valid_bleu, best_valid_bleu; /* the same for BLEU, NAN when not computed */
    double elapsed_s;                   /* training time of the run so far, across resumes (0 in older files) */
    int64_t cooldown_from; /* 0, or the step after which the clock began train.lr.cooldown (0 in older files) */
    uint64_t vocab_hash, data_hash;
    char *config; /* resolved config YAML; owned (malloc) when loaded */
    /* weights exported for use (qkv export): each side's vocabulary file as text, or its
     * SentencePiece model as hex, so the file translates on its own; NULL otherwise */
    char *src_vocab, *tgt_vocab;
} CkptMeta;

typedef struct {
    char name[96];
    int ndim;
    int64_t shape[4];
    size_t begin, end; /* bytes within the data section */
} CkptTensor;

/* A verified file: header parsed, checksums and layout checked; tensors not yet read. */
typedef struct {
    char path[1100];
    char *bytes; /* the whole file */
    size_t len;
    const char *data;
    size_t data_len;
    CkptTensor *tensors;
    int n_tensors;
    CkptMeta meta;
    int has_optim;
} CkptFile;

/* Writes weights, moments (adam may be NULL for weights only) and metadata atomically. */
int ckpt_save(const char *path, const Model *m, const Adam *adam, const CkptMeta *meta);

/* Reads and verifies a file without a model (for `qkv info` and ckpt_load). */
int ckpt_open(CkptFile *f, const char *path);
/* The metadata of a file, from its header alone (its length, checksum and metadata
 * checked; the data not read): what a listing of checkpoints needs to know of each.
 * meta's strings are the caller's (ckpt_meta_free). -1 with the error set. */
int ckpt_peek(const char *path, CkptMeta *meta);
/* The same over bytes already in memory (malloc'd; f owns them from here, even on
 * failure); path names them in errors. */
int ckpt_parse(CkptFile *f, const char *path, char *bytes, size_t len);
void ckpt_close(CkptFile *f);

/* Copies a verified file into m (and adam when not NULL) after checking every tensor of
 * the model's table is there with its shape and nothing else is. All or nothing. */
int ckpt_read(const CkptFile *f, Model *m, Adam *adam);

/* ckpt_open + ckpt_read + ckpt_close; meta (may be NULL) gets the metadata. */
int ckpt_load(const char *path, Model *m, Adam *adam, CkptMeta *meta);

void ckpt_meta_free(CkptMeta *meta);
/* The metadata of f, its strings now the caller's (ckpt_close leaves them alone). */
CkptMeta ckpt_meta_take(CkptFile *f);

#endif
