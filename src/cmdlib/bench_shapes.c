/* bench_shapes: see bench_shapes.h. Like the ceiling in bench.c, these cblas_sgemm calls
 * measure the library itself, outside nn/, on the shapes nn/ runs. */
#define _POSIX_C_SOURCE 200809L
#include "cmdlib/bench_shapes.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>

#include "nn/kernels.h"
#include "train/parallel.h" /* PARALLEL_MAX */
#include "util/clock.h"
#include "util/mem.h"

enum { LINEAR, CLASSIFIER };
enum { MAX_SHAPES = MODEL_PRODUCT_SHAPES, WARM = 1, TIMED = 5 };

/* One kind of product a step runs `count` times per shard: a linear layer of rows x k
 * inputs x m outputs (kernels.c: matmul_forward/backward), or the classifier of rows x k
 * (d_model) against m words (logits_forward/backward). */
typedef struct {
    int kind, rows, k, m, count;
} Shape;

typedef struct {
    Shape shape[MAX_SHAPES];
    int n_shapes, threads;
    pthread_barrier_t meet; /* every thread starts each shape with the others */
    pthread_mutex_t lock;
    pthread_cond_t go;
    int started, go_now, abandon;
    double seconds[PARALLEL_MAX]; /* each thread's step of products */
} Job;

typedef struct {
    Job *job;
    int i;
} JobArg;

static double shape_flops(const Shape *s) { return 3.0 * 2.0 * s->rows * (double)s->k * s->m; }

/* The three products of one shape: forward, the input's gradient, the weights'. */
static void run_shape(const Shape *s, float *x, float *dx, float *y, float *w, float *dw) {
    int n = s->rows, k = s->k, m = s->m;
    if (s->kind == LINEAR) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, m, k, 1.0f, x, k, w, m, 1.0f, y, m);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, k, m, 1.0f, y, m, w, m, 1.0f, dx, k);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, m, n, 1.0f, x, k, y, m, 1.0f, dw, m);
    } else { /* the table is (m words, k) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, x, k, w, k, 0.0f, y, m);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, m, 1.0f, y, m, w, k, 1.0f, dx, k);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, k, n, 1.0f, y, m, x, k, 1.0f, dw, k);
    }
}

static float *filled(size_t n) {
    float *a = xmalloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) a[i] = 0.01f * (float)(i % 7); /* small: no overflow, no denormals */
    return a;
}

static void measure(Job *job, int i) {
    size_t xs = 0, ys = 0, ws = 0;
    for (int k = 0; k < job->n_shapes; k++) {
        const Shape *s = &job->shape[k];
        size_t x = (size_t)s->rows * s->k, y = (size_t)s->rows * s->m, w = (size_t)s->k * s->m;
        xs = x > xs ? x : xs, ys = y > ys ? y : ys, ws = w > ws ? w : ws;
    }
    float *x = filled(xs), *dx = filled(xs), *y = filled(ys), *w = filled(ws), *dw = filled(ws);
    double total = 0.0;
    for (int k = 0; k < job->n_shapes; k++) {
        const Shape *s = &job->shape[k];
        /* the threads meet before each shape's first run, then run back to back (a wait
         * between timed runs would let a core idle and time its waking); the fastest of
         * the timed runs counts: the host's other work only ever slows one */
        if (job->threads > 1) pthread_barrier_wait(&job->meet);
        for (int r = 0; r < WARM; r++) run_shape(s, x, dx, y, w, dw);
        double best = 0.0;
        for (int r = 0; r < TIMED; r++) {
            double t0 = now_seconds();
            run_shape(s, x, dx, y, w, dw);
            double dt = now_seconds() - t0;
            best = r == 0 || dt < best ? dt : best;
        }
        total += best * s->count;
    }
    job->seconds[i] = total;
    free(x), free(dx), free(y), free(w), free(dw);
}

static void *worker(void *p) {
    JobArg *a = p;
    Job *job = a->job;
    pthread_mutex_lock(&job->lock);
    while (!job->go_now) pthread_cond_wait(&job->go, &job->lock);
    int abandon = job->abandon;
    pthread_mutex_unlock(&job->lock);
    if (!abandon) measure(job, a->i);
    return NULL;
}

/* A pass's products (model_product_shapes) over ns source and nt target rows. */
static int step_shapes(const ModelConfig *c, int ns, int nt, Shape *sh) {
    ProductShape ps[MODEL_PRODUCT_SHAPES];
    int n = model_product_shapes(c, ps);
    for (int i = 0; i < n; i++)
        sh[i] = (Shape){ps[i].classifier ? CLASSIFIER : LINEAR, ps[i].target ? nt : ns, ps[i].k, ps[i].m, ps[i].count};
    return n;
}

ShapesAlone products_alone(const ModelConfig *c, int src_rows, int tgt_rows, int threads) {
    ShapesAlone r = {0, 0};
    if (threads < 1) threads = 1;
    if (threads > PARALLEL_MAX) threads = PARALLEL_MAX;
    if (src_rows < 1 || tgt_rows < 1 || blas_room_check(threads) != 0) return r;
    Job job = {.threads = threads};
    job.n_shapes = step_shapes(c, src_rows, tgt_rows, job.shape);
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1); /* as each training thread runs its products */
    pthread_mutex_init(&job.lock, NULL);
    pthread_cond_init(&job.go, NULL);
    pthread_t tid[PARALLEL_MAX];
    JobArg arg[PARALLEL_MAX];
    int started = 1;
    for (; started < threads; started++) {
        arg[started] = (JobArg){&job, started};
        if (pthread_create(&tid[started], NULL, worker, &arg[started]) != 0) break;
    }
    /* the barrier is sized for the threads that exist; if one could not start, the others
     * are told to leave before they wait at it */
    int ok = started == threads && (threads == 1 || pthread_barrier_init(&job.meet, NULL, (unsigned)threads) == 0);
    pthread_mutex_lock(&job.lock);
    job.abandon = !ok;
    job.go_now = 1;
    pthread_cond_broadcast(&job.go);
    pthread_mutex_unlock(&job.lock);
    if (ok) measure(&job, 0);
    for (int i = 1; i < started; i++) pthread_join(tid[i], NULL);
    if (ok && threads > 1) pthread_barrier_destroy(&job.meet);
    pthread_cond_destroy(&job.go);
    pthread_mutex_destroy(&job.lock);
    openblas_set_num_threads(blas_threads);
    if (!ok) return r;
    for (int i = 0; i < threads; i++) r.seconds = job.seconds[i] > r.seconds ? job.seconds[i] : r.seconds;
    for (int k = 0; k < job.n_shapes; k++) r.flops += shape_flops(&job.shape[k]) * job.shape[k].count * threads;
    return r;
}
