/* The training step: it allocates nothing, and it learns. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train/parallel.h"
#include "train/trainer.h"
#include "util/err.h"
#include "util/mem.h"

/* The test binary is linked with --wrap for the allocator (see the Makefile), so every
 * malloc/calloc/realloc made by qkv's own code is counted here. */
static long allocations;
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n) { return allocations++, __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t s) { return allocations++, __real_calloc(n, s); }
void *__wrap_realloc(void *p, size_t n) { return allocations++, __real_realloc(p, n); }

/* Three epochs of steps, each shard run in passes of at most pass_tokens (0: at once). */
static void steps_allocate_nothing_and_learn(int pass_tokens) {
    Corpus c;
    make_corpus(&c, 200);
    ModelConfig cfg = {.src_vocab = 24,
                       .tgt_vocab = 24,
                       .d_model = 16,
                       .heads = 2,
                       .d_ff = 32,
                       .encoder_layers = 2,
                       .decoder_layers = 2,
                       .dropout = 0.1f,
                       .tie_embeddings = 1,
                       .label_smoothing = 0.1f,
                       .max_positions = 32};
    Model m;
    CHECK(model_init(&m, &cfg) == 0, "%s", err_msg());
    model_init_weights(&m, 1);
    Batcher b;
    batcher_init(&b, &c, 200, 3, 1);
    Adam adam;
    adam_init(&adam, m.n_params, 0.9, 0.98, 1e-9, 0.0);
    TrainStep ts = {train_workers(&m, &adam, 2, pass_tokens, &b, 0), &b, {LR_CONSTANT, 0, 1, 16, 3e-3}, 1.0, 5, {0}};
    int tokens, stop = 0;
    double lr, first = 0, last = 0;
    for (int step = 1; step <= 3; step++) first += train_step(&ts, step, &tokens, &lr, &stop); /* warm-up */
    long before = allocations;
    for (int step = 4; step <= 3 * b.n_batches; step++) last = train_step(&ts, step, &tokens, &lr, &stop);
    long during = allocations - before;
    int regrowths = m.arena_regrowths;
    workers_stop(ts.workers);
    adam_free(&adam);
    batcher_free(&b);
    model_free(&m);
    corpus_free(&c);
    CHECK(during == 0 && regrowths == 0, "pass_tokens %d: %ld allocations inside training steps, %d arena regrowths",
          pass_tokens, during, regrowths);
    CHECK(last < 0.7 * first / 3, "pass_tokens %d: loss went from %.3f to %.3f in three epochs", pass_tokens, first / 3,
          last);
}

static void test_step_allocates_nothing_and_learns(void) { steps_allocate_nothing_and_learn(0); }
/* batches of 200 tokens: shards of about 7 rows of up to 26 padded tokens, in passes of 1-3 rows */
static void test_step_in_passes_allocates_nothing_and_learns(void) { steps_allocate_nothing_and_learn(40); }

/* Shards follow work, not rows: over a batch whose rows grow longer, each shard's work is
 * within one row of an equal share (rows split evenly would miss it by far), every shard
 * has a row, the shards tile the batch, and with fewer rows than shards each has one row. */
static void test_shards_are_cut_by_work(void) {
    enum { B = 12 };
    int src_len[B], tgt_len[B];
    for (int i = 0; i < B; i++) src_len[i] = 2 + 2 * i, tgt_len[i] = 3 + 3 * i;
    ModelBatch b = {B, 30, 40, NULL, src_len, NULL, NULL, tgt_len, 0};
    ModelConfig c = {.d_model = 16, .d_ff = 32, .encoder_layers = 2, .decoder_layers = 3, .tgt_vocab = 50};
    /* a row's work, as the cut counts it (parallel.h) */
    double cs = 2 * (4 * 16 * 16 + 2 * 16 * 32) + 3 * 2 * 16 * 16, ct = 3 * (6 * 16 * 16 + 2 * 16 * 32) + 16 * 50;
    for (int n = 2; n <= 4; n++) {
        double total = 0, largest = 0;
        for (int i = 0; i < B; i++) total += cs * src_len[i] + ct * tgt_len[i];
        largest = cs * src_len[B - 1] + ct * tgt_len[B - 1];
        CHECK(shard_first_row(&b, &c, n, 0) == 0 && shard_first_row(&b, &c, n, n) == B, "n %d: shards do not tile", n);
        for (int k = 0; k < n; k++) {
            int first = shard_first_row(&b, &c, n, k), end = shard_first_row(&b, &c, n, k + 1);
            double work = 0;
            for (int i = first; i < end; i++) work += cs * src_len[i] + ct * tgt_len[i];
            CHECK(end > first, "n %d: shard %d has no row", n, k);
            CHECK(fabs(work - total / n) <= largest, "n %d: shard %d (rows %d..%d) does %.0f of a share of %.0f", n, k,
                  first, end - 1, work, total / n);
        }
        /* the last shard has the longest rows: fewer of them than an even split gives */
        CHECK(B - shard_first_row(&b, &c, n, n - 1) < B / n, "n %d: the longest rows' shard has %d rows", n,
              B - shard_first_row(&b, &c, n, n - 1));
    }
    ModelBatch two = {2, 30, 40, NULL, src_len, NULL, NULL, tgt_len, 0};
    for (int k = 0; k <= 4; k++) {
        int want = k < 2 ? k : 2;
        CHECK(shard_first_row(&two, &c, 4, k) == want, "2 rows, 4 shards: shard %d starts at %d", k,
              shard_first_row(&two, &c, 4, k));
    }
}

const TestCase train_tests[] = {
    {"train_shards_are_cut_by_work", test_shards_are_cut_by_work},
    {"train_step_allocates_nothing_and_learns", test_step_allocates_nothing_and_learns},
    {"train_step_in_passes_allocates_nothing_and_learns", test_step_in_passes_allocates_nothing_and_learns},
    {NULL, NULL},
};
