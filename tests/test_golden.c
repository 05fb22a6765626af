/* The golden test: a fixed-seed tiny model trained for 20 steps on one fixed batch, its
 * losses pinned bit for bit. Every other test allows a tolerance; this one sees any change
 * in the arithmetic (an operation reordered, a float summed in another order, a dropout
 * mask drawn differently), so a refactor that claims to change nothing can prove it.
 *
 * Only src/nn/ is used (and config.h for the schedule's name), on one thread: model_forward (dropout on, label
 * smoothing on), model_backward, clip_grad_norm, adam_step with the noam schedule and weight decay.
 *
 * The pinned values were produced by running this test once on the code they pin
 * (QKV_GOLDEN_PRINT=1 build/qkv_test golden prints them in this file's format) and
 * pasting the output below (then make format, which aligns the comments). A change that is meant to change the numbers
 * must update them the same way and say so in its commit.
 *
 * qkv's own loops do not change with the CPU's vector width (-std=c11 means no FMA
 * contraction, no -ffast-math means no reassociation), but OpenBLAS's products depend on
 * the kernels it picks by CPU. The values are pinned for GOLDEN_CORE, the kernels the
 * reference runs use. tests/run.sh runs this test once more in a process of its own with
 * OPENBLAS_CORETYPE=Haswell and QKV_GOLDEN_STRICT=1, so the pinned comparison runs on every
 * machine with AVX2 whatever kernels the user's environment selects; in a run under other
 * kernels the comparison is left to that process (said on stderr), not failed as drift. */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "fixture.h"
#include "nn/model.h"
#include "nn/optim.h"

#define GOLDEN_STEPS 20
#define GOLDEN_CORE "Haswell" /* OpenBLAS kernels the values were produced with */
#define GB 3                  /* sequences */
#define GS 6                  /* source positions: tokens + EOS + padding */
#define GT 5                  /* decoder positions: BOS/EOS + tokens + padding */

/* Ids: 0 pad, 1 BOS, 2 EOS, 3 UNK, words 4..11; lengths differ so padding and masks count. */
static const int g_src[GB * GS] = {4, 5, 6, 7, 2, 0, /**/ 8, 9, 2, 0, 0, 0, /**/ 10, 11, 4, 5, 6, 2};
static const int g_src_len[GB] = {5, 3, 6};
static const int g_tgt_in[GB * GT] = {1, 11, 10, 9, 0, /**/ 1, 5, 0, 0, 0, /**/ 1, 6, 7, 8, 4};
static const int g_tgt_out[GB * GT] = {11, 10, 9, 2, 0, /**/ 5, 2, 0, 0, 0, /**/ 6, 7, 8, 4, 2};
static const int g_tgt_len[GB] = {4, 2, 5};

/* The losses of steps 1..20, as the exact doubles model_forward returned. */
static const double golden_losses[GOLDEN_STEPS] = {
    0x1.9d58d668418cfp+1, /* 3.22927361 */
    0x1.36f4aa6cb4679p+1, /* 2.42934161 */
    0x1.3f3fd74a0aa5fp+1, /* 2.49413577 */
    0x1.e7b02e7c5be6cp+0, /* 1.90503207 */
    0x1.45a70b9d86a04p+1, /* 2.54416032 */
    0x1.e6a14fc6fb2aap+0, /* 1.90089892 */
    0x1.acd384d18d82dp+0, /* 1.67510252 */
    0x1.017acd21a8d1cp+1, /* 2.0115601 */
    0x1.ae773887c96f4p+0, /* 1.68150667 */
    0x1.0f53b23c4312dp+1, /* 2.11974171 */
    0x1.24427f00642a9p+1, /* 2.2832793 */
    0x1.d3bd7dc2be757p+0, /* 1.82711016 */
    0x1.b98d165277346p+0, /* 1.72480907 */
    0x1.ac40821cfb6b6p+0, /* 1.67285932 */
    0x1.510735209bd62p+0, /* 1.31651623 */
    0x1.7f69e620e6154p+0, /* 1.49770964 */
    0x1.943e60e9d00f3p+0, /* 1.57907682 */
    0x1.62b336b361e0ep+0, /* 1.38554708 */
    0x1.6be5a864b15ap+0,  /* 1.42147305 */
    0x1.7532d61e402fap+0, /* 1.45780695 */
};

static void train_golden(double *losses) {
    ModelConfig cfg = fixture_config(12, 12, 16, 2, 32, 1, 1, 16);
    cfg.dropout = 0.1f, cfg.label_smoothing = 0.1f;
    const ModelBatch b = {GB, GS, GT, g_src, g_src_len, g_tgt_in, g_tgt_out, g_tgt_len, 0};
    const LrSchedule lr = {LR_NOAM, 1.0, 5, 16, 0.0};
    openblas_set_num_threads(1);
    Model m;
    if (model_init(&m, &cfg) != 0) abort();
    model_init_weights(&m, 20240601);
    model_reserve(&m, model_arena_floats(&m, GB, GS, GT));
    Adam adam;
    adam_init(&adam, m.n_params, 0.9, 0.98, 1e-9, 0.01);
    for (int step = 1; step <= GOLDEN_STEPS; step++) {
        model_zero_grad(&m);
        losses[step - 1] = model_forward(&m, &b, 1, 77, (uint64_t)step);
        model_backward(&m, &b);
        clip_grad_norm(m.grads, m.n_params, 1.0);
        adam_step(&adam, m.params, m.grads, m.tensors, m.n_tensors, lr_at(&lr, step));
    }
    adam_free(&adam);
    model_free(&m);
}

static void test_golden_losses(void) {
    double losses[GOLDEN_STEPS];
    train_golden(losses);
    if (getenv("QKV_GOLDEN_PRINT")) {
        for (int i = 0; i < GOLDEN_STEPS; i++) printf("    %a, /* %.9g */\n", losses[i], losses[i]);
    }
    /* the same run twice in one process: nothing may depend on leftover state */
    double again[GOLDEN_STEPS];
    train_golden(again);
    CHECK(memcmp(losses, again, sizeof losses) == 0, "two identical runs differ");
    CHECK(losses[GOLDEN_STEPS - 1] < losses[0], "no learning: %.9g -> %.9g", losses[0], losses[GOLDEN_STEPS - 1]);
    const char *core = openblas_get_corename();
    if (strcmp(core, GOLDEN_CORE) != 0 && !getenv("QKV_GOLDEN_STRICT")) {
        fprintf(stderr, "  note: OpenBLAS %s kernels here; the pinned %s losses are compared in the strict run\n", core,
                GOLDEN_CORE);
        return;
    }
    CHECK(strcmp(core, GOLDEN_CORE) == 0,
          "losses pinned with OpenBLAS %s kernels, this run has %s: run with OPENBLAS_CORETYPE=%s to compare",
          GOLDEN_CORE, core, GOLDEN_CORE);
    for (int i = 0; i < GOLDEN_STEPS; i++)
        CHECK(memcmp(&losses[i], &golden_losses[i], sizeof(double)) == 0,
              "step %d: loss %a (%.9g), pinned %a (%.9g): the arithmetic changed", i + 1, losses[i], losses[i],
              golden_losses[i], golden_losses[i]);
}

const TestCase golden_tests[] = {
    {"golden_losses_20_steps_bit_exact", test_golden_losses},
    {NULL, NULL},
};
