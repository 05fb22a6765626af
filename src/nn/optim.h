/* optim: Adam/AdamW, learning-rate schedules, gradient-norm clipping.
 *
 * Works on flat float buffers described by the model's tensor table; knows nothing of
 * what the tensors mean beyond their rank (weight decay applies to matrices only). */
#ifndef QKV_OPTIM_H
#define QKV_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"

typedef struct {
    int kind; /* LR_NOAM or LR_CONSTANT (config.h: train.lr.schedule) */
    double factor;
    int warmup, d_model;
    double value;
    /* The cooldown (train.lr.cooldown): after step cool_from the rate falls linearly, to
     * 1 / (cool_to - cool_from + 1) of the schedule's at step cool_to, the last; 0 and 0:
     * none. Set from the step goal or, under a time budget, when the clock says so. */
    int64_t cool_from, cool_to;
} LrSchedule;

typedef struct {
    double beta1, beta2, eps, weight_decay;
    float *m, *v; /* first and second moments, (n) each */
    size_t n;
    int64_t t; /* steps taken */
} Adam;

/* lr at a 1-based step: noam is factor * d^-0.5 * min(step^-0.5, step * warmup^-1.5),
 * constant is value; either times (cool_to - step + 1) / (cool_to - cool_from + 1) past
 * cool_from (never below 0). */
double lr_at(const LrSchedule *s, int64_t step);
/* The cooldown of a run of `last` steps whose last fraction cools (0 < fraction < 1): from
 * step floor((1 - fraction) * last) to last. */
void lr_cooldown_by_steps(LrSchedule *s, double fraction, int64_t last);
/* The last step of a cooldown the clock began after step from: the one that makes it the
 * run's last fraction had the steps gone on at the pace they went until from, i.e.
 * from + ceil(from * fraction / (1 - fraction)). */
int64_t lr_cooldown_end(int64_t from, double fraction);

void adam_init(Adam *a, size_t n, double beta1, double beta2, double eps, double weight_decay);
void adam_free(Adam *a);
/* One update of params from grads with bias correction; decoupled weight decay (AdamW)
 * on 2-D tensors. */
void adam_step(Adam *a, float *params, const float *grads, const TensorInfo *tensors, int n_tensors, double lr);
/* The update of elements [begin, end) only, as step number t (1-based), with the
 * gradients multiplied by grad_scale (clipping) and, if zero_grads, zeroed once used
 * (saving the next step a pass over memory). adam_step is this over everything after
 * t++, scale 1, no zeroing. For splitting one update across threads. */
void adam_update_range(const Adam *a, float *params, float *grads, const TensorInfo *tensors, int n_tensors, double lr,
                       int64_t t, size_t begin, size_t end, float grad_scale, int zero_grads);

/* Scales grads so their global L2 norm (vec_sum_squares_double's, vecmath.h) is at most
 * max_norm (<= 0: no clipping). Returns the norm before clipping. A caller that holds the
 * gradients in slices (one per thread) adds the slices' sums of squares in slice order
 * and takes clip_scale of their root. */
double clip_grad_norm(float *grads, size_t n, double max_norm);
/* The factor clipping multiplies the gradients by for this global norm: 1 when
 * max_norm <= 0 or the norm is within it. */
float clip_scale(double norm, double max_norm);

#endif
