/* The training step: it allocates nothing, and it learns. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train/trainer.h"
#include "util/err.h"

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

const TestCase train_tests[] = {
    {"train_step_allocates_nothing_and_learns", test_step_allocates_nothing_and_learns},
    {"train_step_in_passes_allocates_nothing_and_learns", test_step_in_passes_allocates_nothing_and_learns},
    {NULL, NULL},
};
