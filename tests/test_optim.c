/* The optimizer: learning-rate schedules, gradient clipping, Adam's update. */
#include <math.h>

#include "check.h"
#include "config.h"
#include "nn/optim.h"

static void test_noam_schedule_and_clipping(void) {
    LrSchedule s = {LR_NOAM, 1.0, 400, 64, 0};
    double peak = lr_at(&s, 400);
    CHECK(fabs(peak - 1.0 / 8.0 / 20.0) < 1e-12, "peak %g", peak);
    CHECK(lr_at(&s, 200) < peak && lr_at(&s, 800) < peak, "warmup then decay");
    CHECK(fabs(lr_at(&s, 1600) - peak / 2) < 1e-12, "decay ~ step^-0.5");
    float g[4] = {3, 4, 0, 0};
    double norm = clip_grad_norm(g, 4, 1.0);
    CHECK(fabs(norm - 5.0) < 1e-6 && fabs(g[0] - 0.6f) < 1e-5 && fabs(g[1] - 0.8f) < 1e-5, "clip to norm 1");
}

/* One Adam step by hand: with bias correction the first update is lr * sign(g). */
static void test_adam_first_step(void) {
    TensorInfo t = {.name = "w", .ndim = 1, .shape = {3, 1}, .offset = 0, .size = 3};
    float w[3] = {1, 1, 1}, g[3] = {0.5f, -2.0f, 0.0f};
    Adam a;
    adam_init(&a, 3, 0.9, 0.98, 1e-9, 0.0);
    adam_step(&a, w, g, &t, 1, 0.1);
    CHECK(fabsf(w[0] - 0.9f) < 1e-6 && fabsf(w[1] - 1.1f) < 1e-6 && w[2] == 1.0f, "w = %g %g %g", w[0], w[1], w[2]);
    adam_free(&a);
}

const TestCase optim_tests[] = {
    {"optim_noam_and_clipping", test_noam_schedule_and_clipping},
    {"optim_adam_first_step", test_adam_first_step},
    {NULL, NULL},
};
