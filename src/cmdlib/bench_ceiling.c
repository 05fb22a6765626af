/* bench_ceiling: see bench_ceiling.h. Like bench_shapes.c, a cblas_sgemm outside nn/: it
 * measures the library itself, not a layer of the model.
 *
 * Why not OpenBLAS's own threads on one large product (what this measured before): at two
 * threads they agree, but at 16 one 1024 x 1024 product split 16 ways runs far below 16
 * products side by side, so the steps' products, which run side by side, beat it and the
 * MFU printed passed 100%. */
#include "cmdlib/bench_ceiling.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>

#include "util/clock.h"
#include "util/mem.h"

#define ROUNDS 6

typedef struct {
    pthread_barrier_t *start, *end;
    pthread_mutex_t *go; /* held until the barriers are sized for the threads that started */
    const int *rounds;
    int n;
    float *a, *b, *c;
} Worker;

static void *multiply(void *arg) {
    Worker *w = arg;
    pthread_mutex_lock(w->go);
    pthread_mutex_unlock(w->go);
    for (int r = 0; r < *w->rounds; r++) {
        pthread_barrier_wait(w->start);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, w->n, w->n, w->n, 1.0f, w->a, w->n, w->b, w->n, 0.0f,
                    w->c, w->n);
        pthread_barrier_wait(w->end);
    }
    return NULL;
}

/* The best round's rate at one size; 0 when a thread cannot start. */
static double rate(int threads, int n) {
    pthread_barrier_t start, end;
    pthread_mutex_t go = PTHREAD_MUTEX_INITIALIZER;
    int rounds = 0;
    Worker *w = xcalloc((size_t)threads, sizeof *w);
    pthread_t *tid = xcalloc((size_t)threads, sizeof *tid);
    size_t nn = (size_t)n * n;
    for (int i = 0; i < threads; i++) {
        w[i] = (Worker){&start,
                        &end,
                        &go,
                        &rounds,
                        n,
                        xmalloc(sizeof(float) * nn),
                        xmalloc(sizeof(float) * nn),
                        xmalloc(sizeof(float) * nn)};
        for (size_t k = 0; k < nn; k++) w[i].a[k] = (float)(k % 7) * 0.1f, w[i].b[k] = (float)(k % 5) * 0.1f;
    }
    /* the threads wait at go until they are counted: one that cannot start leaves the
     * others no barrier to wait at for ever, only no rounds to run */
    pthread_mutex_lock(&go);
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, multiply, &w[started]) != 0) break;
    rounds = started == threads ? ROUNDS : 0;
    pthread_barrier_init(&start, NULL, (unsigned)started + 1);
    pthread_barrier_init(&end, NULL, (unsigned)started + 1);
    pthread_mutex_unlock(&go);
    double best = 0;
    for (int r = 0; r < rounds; r++) {
        pthread_barrier_wait(&start);
        double t0 = now_seconds();
        pthread_barrier_wait(&end);
        double g = 2.0 * threads * (double)n * n * n / (now_seconds() - t0) / 1e9;
        if (r > 0 && g > best) best = g; /* the first round warms the caches and pages */
    }
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    for (int i = 0; i < threads; i++) free(w[i].a), free(w[i].b), free(w[i].c);
    free(w), free(tid);
    pthread_barrier_destroy(&start), pthread_barrier_destroy(&end);
    pthread_mutex_destroy(&go);
    return best;
}

double bench_ceiling(int threads) {
    if (threads < 1) threads = 1;
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1); /* as each training thread runs its products */
    double best = 0;
    static const int sizes[] = {1024, 1536};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        double g = rate(threads, sizes[i]);
        if (g > best) best = g;
    }
    openblas_set_num_threads(blas_threads);
    return best;
}
