/* optim: see optim.h. */
#include "nn/optim.h"

#include <math.h>
#include <stdlib.h>

#include "config.h" /* LR_* */
#include "nn/vecmath.h"
#include "util/mem.h"

/* The cooldown's share of the schedule's rate at step: 1 until cool_from, then a line
 * down to one step's worth above 0 at cool_to. */
static double cooldown_share(const LrSchedule *s, int64_t step) {
    if (s->cool_to <= 0 || step <= s->cool_from) return 1.0;
    return fmax(0.0, (double)(s->cool_to - step + 1) / (double)(s->cool_to - s->cool_from + 1));
}

double lr_at(const LrSchedule *s, int64_t step) {
    if (s->kind == LR_CONSTANT) return s->value * cooldown_share(s, step);
    double st = step < 1 ? 1.0 : (double)step;
    double w = (double)s->warmup;
    return s->factor / sqrt((double)s->d_model) * fmin(1.0 / sqrt(st), st / (w * sqrt(w))) * cooldown_share(s, step);
}

void lr_cooldown_by_steps(LrSchedule *s, double fraction, int64_t last) {
    s->cool_from = (int64_t)floor((1.0 - fraction) * (double)last);
    s->cool_to = last;
}

int64_t lr_cooldown_end(int64_t from, double fraction) {
    return from + (int64_t)ceil((double)from * fraction / (1.0 - fraction));
}

void adam_init(Adam *a, size_t n, double beta1, double beta2, double eps, double weight_decay) {
    a->beta1 = beta1, a->beta2 = beta2, a->eps = eps, a->weight_decay = weight_decay;
    a->n = n;
    a->t = 0;
    a->m = xcalloc_big(n, sizeof(float));
    a->v = xcalloc_big(n, sizeof(float));
}

void adam_free(Adam *a) {
    if (!a) return;
    free(a->m), free(a->v);
    a->m = a->v = NULL;
}

void adam_update_range(const Adam *a, float *params, float *grads, const TensorInfo *tensors, int n_tensors, double lr,
                       int64_t t, size_t begin, size_t end, float grad_scale, int zero_grads) {
    float b1 = (float)a->beta1, b2 = (float)a->beta2;
    float c1 = (float)(1.0 / (1.0 - pow(a->beta1, (double)t)));
    float c2 = (float)(1.0 / (1.0 - pow(a->beta2, (double)t)));
    float eps = (float)a->eps, flr = (float)lr;
    for (int k = 0; k < n_tensors; k++) {
        const TensorInfo *ti = &tensors[k];
        size_t lo = ti->offset > begin ? ti->offset : begin,
               hi = ti->offset + ti->size < end ? ti->offset + ti->size : end;
        if (lo >= hi) continue;
        float decay = ti->ndim == 2 ? (float)(lr * a->weight_decay) : 0.0f;
        float *w = params, *m = a->m, *v = a->v;
        for (size_t i = lo; i < hi; i++) {
            float g = grads[i] * grad_scale;
            m[i] = b1 * m[i] + (1.0f - b1) * g;
            v[i] = b2 * v[i] + (1.0f - b2) * g * g;
            w[i] -= flr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps) + decay * w[i];
            if (zero_grads) grads[i] = 0.0f;
        }
    }
}

void adam_step(Adam *a, float *params, const float *grads, const TensorInfo *tensors, int n_tensors, double lr) {
    a->t++;
    size_t n = 0;
    for (int k = 0; k < n_tensors; k++)
        n = tensors[k].offset + tensors[k].size > n ? tensors[k].offset + tensors[k].size : n;
    adam_update_range(a, params, (float *)grads, tensors, n_tensors, lr, a->t, 0, n, 1.0f, 0);
}

float clip_scale(double norm, double max_norm) {
    return max_norm > 0 && norm > max_norm ? (float)(max_norm / (norm + 1e-6)) : 1.0f;
}

double clip_grad_norm(float *grads, size_t n, double max_norm) {
    double norm = sqrt(vec_sum_squares_double(grads, n));
    float scale = clip_scale(norm, max_norm);
    if (scale != 1.0f)
        for (size_t i = 0; i < n; i++) grads[i] *= scale;
    return norm;
}
