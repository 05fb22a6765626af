/* parallel: see parallel.h. */
#define _POSIX_C_SOURCE 200809L
#include "train/parallel.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/profile.h"
#include "util.h"

typedef struct {
    struct Workers *w;
    int i;
} ThreadArg;

struct Workers {
    int n;
    ThreadArg arg[PARALLEL_MAX];
    Model *model;                   /* the main model: replica 0 */
    Model replica[PARALLEL_MAX];    /* [1..n-1] */
    Adam *adam;
    pthread_t thread[PARALLEL_MAX];
    pthread_barrier_t start, phase, done;
    pthread_mutex_t gate; /* held by workers_start until every thread is running */
    int quit;
    /* the current step */
    ModelBatch part[PARALLEL_MAX];
    uint64_t seed, step;
    double clip_norm, lr;
    double sumsq[PARALLEL_MAX];
    size_t begin[PARALLEL_MAX + 1]; /* each thread's slice of the parameters */
};

static Model *replica(Workers *w, int i) { return i == 0 ? w->model : &w->replica[i]; }

/* Rows of the batch for thread i: contiguous, the first B % n threads one more. */
static void share(int B, int n, int i, int *first, int *count) {
    int base = B / n, extra = B % n;
    *count = base + (i < extra);
    *first = i * base + (i < extra ? i : extra);
}

/* All threads meet here between phases (nothing to wait for with one). */
static void meet(Workers *w) {
    if (w->n > 1) pthread_barrier_wait(&w->phase);
}

static void work(Workers *w, int i) {
    Model *m = replica(w, i);
    const ModelBatch *b = &w->part[i];
    /* 1. forward, then backward on this thread's rows (the gradients are all zero here:
     * phases 2 and 3 of the previous step zeroed each slice once it was used) */
    if (b->B > 0) model_forward(m, b, 1, w->seed, w->step);
    meet(w);
    /* every replica's token count is known now: normalise by the whole batch's */
    int total = 0;
    for (int k = 0; k < w->n; k++) total += w->part[k].B > 0 ? replica(w, k)->n_tokens : 0;
    if (b->B > 0) {
        m->loss_tokens = total;
        model_backward(m, b);
    }
    meet(w);
    /* 2. this thread's slice of the gradients: sum over replicas, sum of squares */
    size_t lo = w->begin[i], hi = w->begin[i + 1];
    float *g = w->model->grads;
    double t0 = prof_start();
    for (int k = 1; k < w->n; k++) {
        float *gk = w->replica[k].grads;
        for (size_t j = lo; j < hi; j++) g[j] += gk[j], gk[j] = 0.0f;
    }
    w->sumsq[i] = grad_sumsq(g, lo, hi);
    prof_stop(PROF_OPTIM, t0);
    meet(w);
    /* 3. clip with the global norm (every thread computes it the same way, slices in
     * order), folding the factor into Adam's pass rather than scaling memory first */
    t0 = prof_start();
    double norm = 0.0;
    for (int k = 0; k < w->n; k++) norm += w->sumsq[k];
    float scale = clip_scale(sqrt(norm), w->clip_norm);
    adam_update_range(w->adam, w->model->params, g, w->model->tensors, w->model->n_tensors, w->lr, w->adam->t + 1, lo, hi,
                      scale, 1);
    prof_stop(PROF_OPTIM, t0);
}

static void *worker(void *p) {
    ThreadArg *a = p;
    prof_elsewhere = 1;
    /* wait until every thread has started (or one failed to, and we are told to quit) */
    pthread_mutex_lock(&a->w->gate);
    pthread_mutex_unlock(&a->w->gate);
    if (a->w->quit) return NULL;
    for (;;) {
        pthread_barrier_wait(&a->w->start);
        if (a->w->quit) break;
        work(a->w, a->i);
        pthread_barrier_wait(&a->w->done);
    }
    return NULL;
}

/* Starts threads 1..n-1. They first pass the gate, which stays locked until all are
 * running: if one cannot be started, those already running are told to quit there
 * instead of waiting forever at a barrier sized for n. */
static int start_threads(Workers *w) {
    int n = w->n, started = 1;
    if (pthread_barrier_init(&w->start, NULL, (unsigned)n) != 0) return err_set("cannot create thread barriers");
    if (pthread_barrier_init(&w->phase, NULL, (unsigned)n) != 0) {
        pthread_barrier_destroy(&w->start);
        return err_set("cannot create thread barriers");
    }
    if (pthread_barrier_init(&w->done, NULL, (unsigned)n) != 0) {
        pthread_barrier_destroy(&w->start), pthread_barrier_destroy(&w->phase);
        return err_set("cannot create thread barriers");
    }
    pthread_mutex_init(&w->gate, NULL);
    pthread_mutex_lock(&w->gate);
    int rc = 0;
    for (; started < n; started++) {
        w->arg[started] = (ThreadArg){w, started};
        if ((rc = pthread_create(&w->thread[started], NULL, worker, &w->arg[started])) != 0) break;
    }
    if (rc != 0) w->quit = 1;
    pthread_mutex_unlock(&w->gate);
    if (rc == 0) return 0;
    for (int i = 1; i < started; i++) pthread_join(w->thread[i], NULL);
    pthread_barrier_destroy(&w->start), pthread_barrier_destroy(&w->phase), pthread_barrier_destroy(&w->done);
    pthread_mutex_destroy(&w->gate);
    return err_set("cannot start %d training threads: %s", n, strerror(rc));
}

Workers *workers_start(Model *m, Adam *adam, int n) {
    if (n < 1) n = 1;
    if (n > PARALLEL_MAX) n = PARALLEL_MAX;
    Workers *w = xcalloc(1, sizeof *w);
    w->n = n;
    w->model = m;
    w->adam = adam;
    for (int i = 1; i < n; i++) model_init_replica(&w->replica[i], m);
    /* slices of the parameters, cut at tensor boundaries so each is about n_params / n */
    w->begin[0] = 0;
    for (int i = 1; i < n; i++) {
        size_t target = m->n_params * (size_t)i / (size_t)n, cut = m->n_params;
        for (int k = 0; k < m->n_tensors; k++)
            if (m->tensors[k].offset >= target) {
                cut = m->tensors[k].offset;
                break;
            }
        w->begin[i] = cut > w->begin[i - 1] ? cut : w->begin[i - 1];
    }
    w->begin[n] = m->n_params;
    openblas_set_num_threads(1);
    if (n > 1 && start_threads(w) != 0) {
        for (int i = 1; i < n; i++) model_free(&w->replica[i]);
        free(w);
        return NULL;
    }
    return w;
}

void workers_stop(Workers *w) {
    if (!w) return;
    if (w->n > 1) {
        w->quit = 1;
        pthread_barrier_wait(&w->start);
        for (int i = 1; i < w->n; i++) pthread_join(w->thread[i], NULL);
        pthread_barrier_destroy(&w->start);
        pthread_barrier_destroy(&w->phase);
        pthread_barrier_destroy(&w->done);
        pthread_mutex_destroy(&w->gate);
    }
    for (int i = 1; i < w->n; i++) model_free(&w->replica[i]);
    free(w);
}

int workers_count(const Workers *w) { return w->n; }

size_t workers_arena_floats(const Workers *w, int B, int S, int T) {
    int first, count;
    share(B, w->n, 0, &first, &count);
    return model_arena_floats(w->model, count, S, T);
}

void workers_reserve(Workers *w, size_t floats) {
    for (int i = 1; i < w->n; i++) model_reserve(&w->replica[i], floats);
}

double workers_step(Workers *w, const ModelBatch *b, uint64_t seed, uint64_t step, double clip_norm, double lr) {
    w->seed = seed, w->step = step, w->clip_norm = clip_norm, w->lr = lr;
    for (int i = 0; i < w->n; i++) {
        int first, count;
        share(b->B, w->n, i, &first, &count);
        w->part[i] = (ModelBatch){count, b->S, b->T, b->src + (size_t)first * b->S, b->src_len + first,
                                  b->tgt_in + (size_t)first * b->T, b->tgt_out ? b->tgt_out + (size_t)first * b->T : NULL,
                                  b->tgt_len + first};
    }
    if (w->n > 1) pthread_barrier_wait(&w->start);
    work(w, 0);
    if (w->n > 1) pthread_barrier_wait(&w->done);
    w->adam->t++;
    double loss = 0.0;
    int tokens = 0;
    for (int i = 0; i < w->n; i++)
        if (w->part[i].B > 0) loss += replica(w, i)->loss_sum, tokens += replica(w, i)->n_tokens;
    return tokens ? loss / tokens : 0.0;
}
