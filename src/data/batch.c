/* batch: see batch.h. */
#include "data/batch.h"

#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "util/mem.h"
#include "util/rng.h"

static const Corpus *sort_corpus;
static const int *sort_rank;
static int by_length(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    const Corpus *c = sort_corpus;
    if (c->src[x].len != c->src[y].len) return c->src[x].len - c->src[y].len;
    if (c->tgt[x].len != c->tgt[y].len) return c->tgt[x].len - c->tgt[y].len;
    return sort_rank[x] - sort_rank[y];
}

static void shuffle(int *a, int n, Rng *r) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint64_t)i + 1);
        int t = a[i];
        a[i] = a[j], a[j] = t;
    }
}

int batch_frame_source(const int *ids, int len, int *out, int width) {
    for (int t = 0; t < width; t++) out[t] = t < len ? ids[t] : t == len ? VOCAB_EOS : VOCAB_PAD;
    return len + 1;
}

int batch_frame_target(const int *ids, int len, int *tgt_in, int *tgt_out, int width) {
    for (int t = 0; t < width; t++) {
        tgt_in[t] = t == 0 ? VOCAB_BOS : t <= len ? ids[t - 1] : VOCAB_PAD;
        tgt_out[t] = t < len ? ids[t] : t == len ? VOCAB_EOS : VOCAB_PAD;
    }
    return len + 1;
}

void batcher_init(Batcher *b, const Corpus *c, int batch_tokens, uint64_t seed, int shuffle_batches) {
    memset(b, 0, sizeof *b);
    b->corpus = c;
    b->seed = shuffle_batches ? seed : 0;
    int n = c->n;
    b->order = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    int *rank = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) rank[i] = i;
    if (shuffle_batches) {
        Rng r;
        rng_seed(&r, hash64(seed, 0xBA7C4));
        shuffle(rank, n, &r);
    }
    for (int i = 0; i < n; i++) b->order[i] = i;
    sort_corpus = c, sort_rank = rank;
    qsort(b->order, (size_t)n, sizeof(int), by_length);
    free(rank);
    b->batches = xmalloc(sizeof(BatchSpec) * (size_t)(n ? n : 1));
    for (int i = 0; i < n;) {
        BatchSpec *s = &b->batches[b->n_batches++];
        *s = (BatchSpec){.first = i};
        while (i < n) {
            int k = b->order[i];
            int tok = c->src[k].len + 1 + c->tgt[k].len + 1;
            if (s->count > 0 && s->tokens + tok > batch_tokens) break;
            s->tokens += tok;
            if (c->src[k].len + 1 > s->S) s->S = c->src[k].len + 1;
            if (c->tgt[k].len + 1 > s->T) s->T = c->tgt[k].len + 1;
            s->count++, i++;
        }
        if (s->count > b->max_B) b->max_B = s->count;
        if (s->S > b->max_S) b->max_S = s->S;
        if (s->T > b->max_T) b->max_T = s->T;
    }
    size_t ns = (size_t)b->max_B * b->max_S, nt = (size_t)b->max_B * b->max_T;
    b->src = xmalloc(sizeof(int) * (ns ? ns : 1));
    b->tgt_in = xmalloc(sizeof(int) * (nt ? nt : 1));
    b->tgt_out = xmalloc(sizeof(int) * (nt ? nt : 1));
    b->src_len = xmalloc(sizeof(int) * (size_t)(b->max_B ? b->max_B : 1));
    b->tgt_len = xmalloc(sizeof(int) * (size_t)(b->max_B ? b->max_B : 1));
    b->perm = xmalloc(sizeof(int) * (size_t)(b->n_batches ? b->n_batches : 1));
    batcher_seek(b, 0, 0);
}

void batcher_free(Batcher *b) {
    if (!b) return;
    free(b->order), free(b->batches), free(b->perm);
    free(b->src), free(b->src_len), free(b->tgt_in), free(b->tgt_out), free(b->tgt_len);
    memset(b, 0, sizeof *b);
}

void batcher_get(Batcher *b, int k, ModelBatch *out) {
    const BatchSpec *s = &b->batches[k];
    const Corpus *c = b->corpus;
    int S = s->S, T = s->T;
    for (int i = 0; i < s->count; i++) {
        int idx = b->order[s->first + i];
        const Seq *x = &c->src[idx], *y = &c->tgt[idx];
        b->src_len[i] = batch_frame_source(x->ids, x->len, b->src + (size_t)i * S, S);
        b->tgt_len[i] = batch_frame_target(y->ids, y->len, b->tgt_in + (size_t)i * T, b->tgt_out + (size_t)i * T, T);
    }
    *out = (ModelBatch){s->count, S, T, b->src, b->src_len, b->tgt_in, b->tgt_out, b->tgt_len, 0};
}

void batcher_seek(Batcher *b, int64_t epoch, int pos) {
    b->epoch = epoch;
    b->pos = pos;
    for (int i = 0; i < b->n_batches; i++) b->perm[i] = i;
    if (b->seed) {
        Rng r;
        rng_seed(&r, hash64(b->seed, (uint64_t)epoch + 1));
        shuffle(b->perm, b->n_batches, &r);
    }
}

int batcher_next(Batcher *b, ModelBatch *out) {
    if (b->pos >= b->n_batches) batcher_seek(b, b->epoch + 1, 0);
    int k = b->perm[b->pos++];
    batcher_get(b, k, out);
    return b->batches[k].tokens;
}
