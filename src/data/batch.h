/* batch: length-bucketed, token-budgeted batches over a corpus, in a seeded order.
 *
 * Batches are formed once: pairs sorted by length (ties in a seeded random order) and
 * cut so each batch holds at most `batch_tokens` real tokens (source + EOS, target +
 * EOS; padding excluded). Each epoch visits the batches in a permutation that depends
 * only on (seed, epoch), so the cursor (epoch, position) is all a resume needs. */
#ifndef QKV_BATCH_H
#define QKV_BATCH_H

#include <stdint.h>

#include "data/corpus.h"
#include "nn/model.h"

typedef struct {
    int first, count; /* a run of `order` */
    int S, T;         /* padded lengths: longest source + EOS, longest target + 1 */
    int tokens;       /* real tokens */
} BatchSpec;

typedef struct {
    const Corpus *corpus;
    int *order; /* pair indices, sorted by length */
    BatchSpec *batches;
    int n_batches;
    int max_B, max_S, max_T;
    uint64_t seed;
    /* cursor */
    int64_t epoch;
    int pos;
    int *perm; /* (n_batches) this epoch's order */
    /* one materialised batch, sized for the largest */
    int *src, *src_len, *tgt_in, *tgt_out, *tgt_len;
} Batcher;

/* The one place a sentence is framed for the model (training, attention maps, decoding):
 * out[0..width) = ids, EOS, PAD...; returns the framed length len + 1 (<= width). */
int batch_frame_source(const int *ids, int len, int *out, int width);
/* Decoder input and output of one target: tgt_in = BOS, ids, PAD...; tgt_out = ids,
 * EOS, PAD... (tgt_in shifted left by one); each of width; returns len + 1 (<= width). */
int batch_frame_target(const int *ids, int len, int *tgt_in, int *tgt_out, int width);

void batcher_init(Batcher *b, const Corpus *c, int batch_tokens, uint64_t seed, int shuffle);
void batcher_free(Batcher *b);
/* Fills `out` with batch k (in sorted order, not the epoch's permutation). */
void batcher_get(Batcher *b, int k, ModelBatch *out);
/* The next batch of the epoch order, moving to the next epoch at the end; returns its
 * real token count. */
int batcher_next(Batcher *b, ModelBatch *out);
/* Puts the cursor at (epoch, pos). */
void batcher_seek(Batcher *b, int64_t epoch, int pos);

#endif
