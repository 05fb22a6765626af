/* bench_ceiling: see bench_ceiling.h. Like bench_shapes.c, a cblas_sgemm outside nn/: it
 * measures the library itself, not a layer of the model.
 *
 * Why not OpenBLAS's own threads on one large product (what this measured before): at two
 * threads they agree, but at 16 one 1024 x 1024 product split 16 ways runs far below 16
 * products side by side, so the steps' products, which run side by side, beat it and the
 * MFU printed passed 100%. */
#include "cmdlib/bench_ceiling.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/clock.h"
#include "util/mem.h"

typedef struct {
    pthread_barrier_t *start, *end;
    pthread_mutex_t *go; /* held until the barriers are sized for the threads that started */
    const int *stop;     /* set before the start barrier that ends the rounds (the barrier orders it) */
    int n;
    float *a, *b, *c;
    double began, ended; /* this round's product, on the worker's own clock reads */
} Worker;

static void *multiply(void *arg) {
    Worker *w = arg;
    pthread_mutex_lock(w->go);
    pthread_mutex_unlock(w->go);
    for (;;) {
        pthread_barrier_wait(w->start);
        if (*w->stop) break;
        w->began = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, w->n, w->n, w->n, 1.0f, w->a, w->n, w->b, w->n, 0.0f,
                    w->c, w->n);
        w->ended = now_seconds();
        pthread_barrier_wait(w->end);
    }
    return NULL;
}

static int by_value(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* One size's timed rounds, warmed for warm_s first: their best, median and lowest into c; 0, or -1 when
 * a thread cannot start. */
static int rate(int threads, int n, double warm_s, Ceiling *c) {
    pthread_barrier_t start, end;
    pthread_mutex_t go = PTHREAD_MUTEX_INITIALIZER;
    int stop = 0;
    Worker *w = xcalloc((size_t)threads, sizeof *w);
    pthread_t *tid = xcalloc((size_t)threads, sizeof *tid);
    size_t nn = (size_t)n * n;
    for (int i = 0; i < threads; i++) {
        w[i] = (Worker){&start,
                        &end,
                        &go,
                        &stop,
                        n,
                        xmalloc(sizeof(float) * nn),
                        xmalloc(sizeof(float) * nn),
                        xmalloc(sizeof(float) * nn),
                        0,
                        0};
        for (size_t k = 0; k < nn; k++) w[i].a[k] = (float)(k % 7) * 0.1f, w[i].b[k] = (float)(k % 5) * 0.1f;
    }
    /* the threads wait at go until they are counted: one that cannot start leaves the
     * others no barrier to wait at for ever, only no rounds to run */
    pthread_mutex_lock(&go);
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, multiply, &w[started]) != 0) break;
    pthread_barrier_init(&start, NULL, (unsigned)started + 1);
    pthread_barrier_init(&end, NULL, (unsigned)started + 1);
    pthread_mutex_unlock(&go);
    double g[CEILING_ROUNDS];
    if (started == threads) {
        /* untimed rounds until the cores have run vector products for warm_s (at least one:
         * it also faults in the pages and fills the caches) */
        double t0 = now_seconds();
        do {
            pthread_barrier_wait(&start);
            pthread_barrier_wait(&end);
        } while (now_seconds() - t0 < warm_s);
        /* a round is timed by the workers' own reads, from the first start to the last end:
         * with as many workers as cores, this thread may be scheduled late after the
         * barrier, and its own reads made rounds look shorter than they were (2 threads at
         * 2.5 times one's rate) */
        for (int r = 0; r < CEILING_ROUNDS; r++) {
            pthread_barrier_wait(&start);
            pthread_barrier_wait(&end);
            double first = w[0].began, last = w[0].ended;
            for (int i = 1; i < threads; i++) first = fmin(first, w[i].began), last = fmax(last, w[i].ended);
            g[r] = 2.0 * threads * (double)n * n * n / (last - first) / 1e9;
        }
        qsort(g, CEILING_ROUNDS, sizeof *g, by_value);
        *c = (Ceiling){g[CEILING_ROUNDS - 1], (g[(CEILING_ROUNDS - 1) / 2] + g[CEILING_ROUNDS / 2]) / 2, g[0]};
    }
    stop = 1;
    pthread_barrier_wait(&start); /* every thread started sees stop and ends */
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    for (int i = 0; i < threads; i++) free(w[i].a), free(w[i].b), free(w[i].c);
    free(w), free(tid);
    pthread_barrier_destroy(&start), pthread_barrier_destroy(&end);
    pthread_mutex_destroy(&go);
    return started == threads ? 0 : -1;
}

void bench_ceiling_measure(int threads, Ceiling *c) {
    if (threads < 1) threads = 1;
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1); /* as each training thread runs its products */
    *c = (Ceiling){0};
    static const int sizes[] = {1024, 1536};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        Ceiling one;
        /* the warm-up before the first size only: the second follows without a pause */
        if (rate(threads, sizes[i], i == 0 ? CEILING_WARM_S : 0.0, &one) != 0) {
            *c = (Ceiling){0};
            break;
        }
        if (one.best > c->best) *c = one;
    }
    openblas_set_num_threads(blas_threads);
}

double bench_ceiling(int threads) {
    Ceiling c;
    bench_ceiling_measure(threads, &c);
    return c.best;
}

void ceiling_describe(const Ceiling *c, char *buf, size_t n) {
    snprintf(buf, n,
             "%.1f GFLOP/s (the best of %d rounds after %.1f s of warm-up; median %.1f, lowest %.1f: %.1f%% below the "
             "best)",
             c->best, CEILING_ROUNDS, CEILING_WARM_S, c->median, c->low,
             c->best > 0 ? 100.0 * (c->best - c->low) / c->best : 0.0);
}
