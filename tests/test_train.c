/* The training step: it allocates nothing, and it learns. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cmdlib/bench_timeline.h"
#include "fixture.h"
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
    ModelConfig cfg = fixture_config(24, 24, 16, 2, 32, 2, 2, 32);
    cfg.dropout = 0.1f, cfg.label_smoothing = 0.1f;
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

/* The parameters' slices, one per shard, are equal to a cache line whatever the tensors:
 * the Multi30k model's 6,187,008 parameters (two 1,536,000-float embeddings first) in 16
 * slices each within 16 floats of the others, every cut on a 64-byte line, tiling them. */
static void test_param_slices_are_even(void) {
    size_t sizes[] = {6187008, 5583360, 17, 1000003};
    for (int z = 0; z < 4; z++)
        for (int N = 1; N <= 16; N++) {
            size_t begin[17], n = sizes[z], least = n, most = 0;
            param_slices(n, N, begin);
            CHECK(begin[0] == 0 && begin[N] == n, "%zu in %d: the slices do not tile", n, N);
            for (int i = 0; i < N; i++) {
                CHECK(begin[i] <= begin[i + 1] && begin[i] % 16 == 0, "%zu in %d: slice %d at %zu", n, N, i, begin[i]);
                size_t len = begin[i + 1] - begin[i];
                least = len < least ? len : least, most = len > most ? len : most;
            }
            CHECK(most - least <= 16 + (n % 16), "%zu in %d: slices of %zu to %zu", n, N, least, most);
        }
}

/* The timeline's account of a step, from marks set by hand: two threads, thread 1 ends its
 * shard 3 ms after thread 0 (each began 0.1 ms and 0.2 ms after the main thread arrived: the
 * wake at the start; thread 0 lags 3 ms, and leaves 0.1 ms after thread 1
 * arrives: the wake), both fold in 1 ms, thread 0's Adam takes 2 ms longer; the main
 * thread works alone 0.5 ms before and 0.25 after. Every wait is its own, waiting_share is
 * their sum over both threads' time, and the picture has a bar for each phase. */
static void test_timeline_accounts_each_wait(void) {
    enum { K = 2, N = 2 };
    double marks[K][N][N_MARKS], call[K * 2], work[K * N] = {1e9, 1e9, 1e9, 1e9};
    for (int k = 0; k < K; k++) {
        double t = 100.0 * k; /* seconds: the steps far apart */
        call[2 * k] = t, call[2 * k + 1] = t + 0.5e-3 + 0.020 + 0.25e-3;
        double a = t + 0.5e-3; /* the main thread arrives */
        for (int i = 0; i < N; i++) {
            double *m = marks[k][i], shard_end = a + (i == 0 ? 0.010 : 0.013);
            m[MARK_ARRIVE] = i == 0 ? a : t - 1.0; /* thread 1 idled since the step before */
            m[MARK_BEGIN] = a + (i == 0 ? 0.0001 : 0.0002);
            m[MARK_SHARD_END] = shard_end;
            m[MARK_FOLD_BEGIN] = a + 0.013 + (i == 0 ? 0.0001 : 0.0);
            m[MARK_FOLD_END] = m[MARK_FOLD_BEGIN] + 0.001;
            m[MARK_ADAM_BEGIN] = a + 0.0142;
            m[MARK_ADAM_END] = a + (i == 0 ? 0.0192 : 0.0172);
            m[MARK_LEAVE] = i == 0 ? a + 0.020 : 0.0;
        }
    }
    /* thread 1 leaves step 0 when it arrives at step 1's start */
    marks[1][1][MARK_ARRIVE] = 100.0 * 0 + 0.5e-3 + 0.0201;
    Timeline tl = {K, N, &marks[0][0][0], call, work};
    ThreadStep s0 = timeline_thread_step(&tl, 0, 0), s1 = timeline_thread_step(&tl, 0, 1);
    CHECK(fabs(s0.shard - 0.0099) < 1e-9 && fabs(s1.shard - 0.0128) < 1e-9, "shards %g %g", s0.shard, s1.shard);
    CHECK(fabs(s0.lag[TL_AFTER_SHARDS] - 0.003) < 1e-9 && s1.lag[TL_AFTER_SHARDS] < 1e-12,
          "lags after the shards %g %g", s0.lag[TL_AFTER_SHARDS], s1.lag[TL_AFTER_SHARDS]);
    CHECK(fabs(s0.wake[TL_AFTER_SHARDS] - 0.0001) < 1e-9, "thread 0's wake %g", s0.wake[TL_AFTER_SHARDS]);
    CHECK(fabs(s1.lag[TL_END] - 0.002) < 1e-9 && s0.lag[TL_END] < 1e-12, "lags at the end %g %g", s0.lag[TL_END],
          s1.lag[TL_END]);
    CHECK(fabs(s1.wake[TL_END] - 0.0009) < 1e-9, "thread 1 leaves step 0 at its next arrival: wake %g",
          s1.wake[TL_END]);
    /* thread 1 arrived long before the main thread: that was idling, not a wait of the step */
    CHECK(fabs(s1.lag[TL_START]) < 1e-12 && fabs(s1.wake[TL_START] - 0.0002) < 1e-9, "thread 1 at the start: %g %g",
          s1.lag[TL_START], s1.wake[TL_START]);
    CHECK(fabs(s0.serial - 0.75e-3) < 1e-9, "the main thread alone %g", s0.serial);
    double waited = 0;
    for (int k = 0; k < K; k++)
        for (int i = 0; i < N; i++) {
            ThreadStep s = timeline_thread_step(&tl, k, i);
            for (int b = 0; b < TL_BARRIERS; b++) waited += s.lag[b] + s.wake[b];
        }
    json_t *sum = timeline_summary(&tl);
    double share = json_real_value(json_object_get(sum, "waiting_share"));
    double want = waited / (K * N * (call[1] - call[0]));
    CHECK(fabs(share - want) < 1e-4 && want > 0.1, "waiting_share %g, by hand %g", share, want);
    CHECK(json_real_value(json_array_get(json_object_get(sum, "shard_last"), 1)) == 2,
          "thread 1's shard was the last in both steps");
    json_decref(sum);
    char *svg = timeline_svg(&tl, 0, K, "t");
    int rects = 0;
    for (const char *p = svg; (p = strstr(p, "<rect x=")); p++) rects++;
    /* per step: the main thread alone twice, each thread's 3 phases and 4 waits less thread
     * 1's wait after the shards (it was last: none), and one legend square per phase */
    CHECK(rects == 2 * (2 + 2 * 7 - 1) + 5 && strstr(svg, "</svg>"), "%d bars in the picture", rects);
    free(svg);
}

const TestCase train_tests[] = {
    {"train_shards_are_cut_by_work", test_shards_are_cut_by_work},
    {"train_param_slices_are_even", test_param_slices_are_even},
    {"train_timeline_accounts_each_wait", test_timeline_accounts_each_wait},
    {"train_step_allocates_nothing_and_learns", test_step_allocates_nothing_and_learns},
    {"train_step_in_passes_allocates_nothing_and_learns", test_step_in_passes_allocates_nothing_and_learns},
    {NULL, NULL},
};
