/* The optimizer: learning-rate schedules, gradient clipping, Adam's update. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "nn/optim.h"

static void test_noam_schedule_and_clipping(void) {
    LrSchedule s = {LR_NOAM, 1.0, 400, 64, 0, 0, 0};
    double peak = lr_at(&s, 400);
    CHECK(fabs(peak - 1.0 / 8.0 / 20.0) < 1e-12, "peak %g", peak);
    CHECK(lr_at(&s, 200) < peak && lr_at(&s, 800) < peak, "warmup then decay");
    CHECK(fabs(lr_at(&s, 1600) - peak / 2) < 1e-12, "decay ~ step^-0.5");
    float g[4] = {3, 4, 0, 0};
    double norm = clip_grad_norm(g, 4, 1.0);
    CHECK(fabs(norm - 5.0) < 1e-6 && fabs(g[0] - 0.6f) < 1e-5 && fabs(g[1] - 0.8f) < 1e-5, "clip to norm 1");
}

/* The cooldown by its definition: the plain rate until cool_from, then (to - step + 1) /
 * (to - from + 1) of it; by steps the last fraction of the goal; by the clock an end at
 * the pace so far (from / (1 - f) in all). */
static void test_cooldown(void) {
    LrSchedule plain = {LR_NOAM, 1.0, 10, 64, 0, 0, 0}, s = plain;
    lr_cooldown_by_steps(&s, 0.25, 100);
    CHECK(s.cool_from == 75 && s.cool_to == 100, "cooldown %lld..%lld", (long long)s.cool_from, (long long)s.cool_to);
    for (int step = 1; step <= 75; step++) CHECK(lr_at(&s, step) == lr_at(&plain, step), "step %d cooled early", step);
    CHECK(fabs(lr_at(&s, 76) - lr_at(&plain, 76) * 25.0 / 26.0) < 1e-15, "first cooled step");
    CHECK(fabs(lr_at(&s, 100) - lr_at(&plain, 100) / 26.0) < 1e-15, "last step: a 26th");
    CHECK(lr_at(&s, 101) == 0.0, "past the end: 0, never negative");
    LrSchedule c = {LR_CONSTANT, 0, 0, 0, 0.5, 10, 13};
    CHECK(lr_at(&c, 10) == 0.5 && lr_at(&c, 12) == 0.25 && lr_at(&c, 13) == 0.125, "constant %g %g", lr_at(&c, 12),
          lr_at(&c, 13));
    CHECK(lr_cooldown_end(800, 0.2) == 1000 && lr_cooldown_end(7, 0.5) == 14 && lr_cooldown_end(10, 0.3) == 15,
          "ends %lld %lld", (long long)lr_cooldown_end(800, 0.2), (long long)lr_cooldown_end(10, 0.3));
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

/* Two tensors as the model's table has them: a 2x3 matrix then a bias of 4. */
static const TensorInfo two_tensors[2] = {
    {.name = "w", .ndim = 2, .shape = {2, 3}, .offset = 0, .size = 6},
    {.name = "b", .ndim = 1, .shape = {4, 1}, .offset = 6, .size = 4},
};

/* Adam(W) written out in double from its definition: m and v the moving averages of g and
 * g^2 (beta1, beta2), bias-corrected by 1 - beta^t, the step lr * mhat / (sqrt(vhat) + eps),
 * and the decoupled decay lr * wd * w on matrices only (optim.h: "weight decay applies to
 * matrices only"), taken from w before the step. */
static void adam_by_hand(double *w, double *m, double *v, const double *g, int t, double lr, double b1, double b2,
                         double eps, double wd) {
    for (int k = 0; k < 2; k++) {
        const TensorInfo *ti = &two_tensors[k];
        for (size_t i = ti->offset; i < ti->offset + ti->size; i++) {
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            double mhat = m[i] / (1 - pow(b1, t)), vhat = v[i] / (1 - pow(b2, t));
            double decay = ti->ndim == 2 ? lr * wd * w[i] : 0.0;
            w[i] -= lr * mhat / (sqrt(vhat) + eps) + decay;
        }
    }
}

/* Three steps with weight decay and changing gradients on a matrix and a bias, against the
 * formulas by hand. After the first step (lr * sign(g) whatever the betas) the moments'
 * decay rates, where eps sits and which tensors decay all show: eps is large beside
 * sqrt(vhat) here so that moving it inside the root changes the step. */
static void test_adam_three_steps_by_hand(void) {
    enum { N = 10 };
    const double lr = 0.05, b1 = 0.9, b2 = 0.99, eps = 0.1, wd = 0.2;
    const float g_steps[3][N] = {{0.5f, -1.0f, 0.25f, 2.0f, -0.5f, 0.1f, 1.0f, -0.3f, 0.6f, -2.0f},
                                 {-0.2f, -0.8f, 0.9f, 1.0f, 0.4f, -0.6f, 0.3f, 0.7f, -1.5f, -0.1f},
                                 {0.3f, 0.2f, -0.4f, -1.2f, 0.8f, 0.5f, -0.9f, 0.05f, 0.2f, 1.1f}};
    float w[N] = {1.0f, -0.5f, 0.8f, 2.0f, -1.5f, 0.3f, 1.2f, -0.7f, 0.4f, 1.5f};
    double hw[N], hm[N] = {0}, hv[N] = {0}, hg[N];
    for (int i = 0; i < N; i++) hw[i] = w[i];
    Adam a;
    adam_init(&a, N, b1, b2, eps, wd);
    double worst = 0;
    for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < N; i++) hg[i] = g_steps[t - 1][i];
        adam_step(&a, w, g_steps[t - 1], two_tensors, 2, lr);
        adam_by_hand(hw, hm, hv, hg, t, lr, b1, b2, eps, wd);
        for (int i = 0; i < N; i++) {
            worst = fmax(worst, fabs(w[i] - hw[i]));
            worst = fmax(worst, fabs(a.m[i] - hm[i]) + fabs(a.v[i] - hv[i]));
        }
        CHECK(worst < 1e-6, "step %d: off the formulas by %.3g (w[0] %.9g, by hand %.9g; bias w[6] %.9g, by hand %.9g)",
              t, worst, w[0], hw[0], w[6], hw[6]);
    }
    CHECK(a.t == 3, "t = %lld after three steps", (long long)a.t);
    adam_free(&a);
}

/* The training path's update (parallel.c's workers): adam_update_range over slices, with
 * the clipping factor folded in as grad_scale and the gradients zeroed once used, is
 * clipping the gradients in memory then adam_step, and the formulas by hand with
 * g * clip / norm. The gradients' norm is far above the clip: one step taken unclipped
 * (the same at t = 1: lr * sign(g)) still leaves moments 50 times too large, and the
 * second step differs. */
static void test_adam_update_range_clips_with_grad_scale(void) {
    enum { N = 10 };
    const double lr = 0.01, b1 = 0.9, b2 = 0.98, eps = 1e-3, wd = 0.1, clip = 1.0;
    const float g_steps[2][N] = {{30.0f, -20.0f, 10.0f, 25.0f, -5.0f, 15.0f, -30.0f, 8.0f, 12.0f, -40.0f},
                                 {-10.0f, 35.0f, 5.0f, -20.0f, 30.0f, -8.0f, 4.0f, 22.0f, -16.0f, 9.0f}};
    float w_ref[N], w[N], g_ref[N], g[N];
    double hw[N], hm[N] = {0}, hv[N] = {0}, hg[N];
    for (int i = 0; i < N; i++) w_ref[i] = w[i] = (float)(0.1 * i - 0.3), hw[i] = w[i];
    Adam ref, sliced;
    adam_init(&ref, N, b1, b2, eps, wd), adam_init(&sliced, N, b1, b2, eps, wd);
    for (int t = 1; t <= 2; t++) {
        double sq = 0;
        for (int i = 0; i < N; i++) sq += (double)g_steps[t - 1][i] * g_steps[t - 1][i];
        double norm = sqrt(sq);
        CHECK(norm > 40 * clip, "norm %g is not far above the clip: the test is blind", norm);
        memcpy(g_ref, g_steps[t - 1], sizeof g_ref), memcpy(g, g_steps[t - 1], sizeof g);
        clip_grad_norm(g_ref, N, clip);
        adam_step(&ref, w_ref, g_ref, two_tensors, 2, lr);
        /* two slices, the cut inside the matrix, as two threads would take them */
        float scale = clip_scale(norm, clip);
        adam_update_range(&sliced, w, g, two_tensors, 2, lr, t, 0, 4, scale, 1);
        adam_update_range(&sliced, w, g, two_tensors, 2, lr, t, 4, N, scale, 1);
        for (int i = 0; i < N; i++) hg[i] = g_steps[t - 1][i] * (clip / norm);
        adam_by_hand(hw, hm, hv, hg, t, lr, b1, b2, eps, wd);
        double worst_ref = 0, worst_hand = 0;
        int zeroed = 1;
        for (int i = 0; i < N; i++) {
            worst_ref = fmax(worst_ref,
                             fabs(w[i] - w_ref[i]) + fabs(sliced.m[i] - ref.m[i]) + fabs(sliced.v[i] - ref.v[i]));
            worst_hand = fmax(worst_hand, fabs(w[i] - hw[i]) + fabs(sliced.m[i] - hm[i]) / fabs(hm[i]) +
                                              fabs(sliced.v[i] - hv[i]) / hv[i]);
            zeroed &= g[i] == 0.0f;
        }
        CHECK(worst_ref < 1e-6, "step %d: the sliced, scaled update is %.3g off clip_grad_norm + adam_step", t,
              worst_ref);
        CHECK(worst_hand < 1e-5, "step %d: %.3g off Adam by hand on g * clip / norm (m[0] %.6g, by hand %.6g)", t,
              worst_hand, sliced.m[0], hm[0]);
        CHECK(zeroed, "step %d: zero_grads left gradients behind", t);
    }
    adam_free(&ref), adam_free(&sliced);
}

const TestCase optim_tests[] = {
    {"optim_noam_and_clipping", test_noam_schedule_and_clipping},
    {"optim_cooldown", test_cooldown},
    {"optim_adam_first_step", test_adam_first_step},
    {"optim_adam_three_steps_by_hand", test_adam_three_steps_by_hand},
    {"optim_adam_update_range_clips_with_grad_scale", test_adam_update_range_clips_with_grad_scale},
    {NULL, NULL},
};
