/* fanout: see fanout.h. */
#include "decode/fanout.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>

#include "util/mem.h"

typedef struct {
    Model replica;
    int w;
    void (*fn)(Model *m, int w, void *arg);
    void *arg;
} FanoutWorker;

static void *run_worker(void *p) {
    FanoutWorker *fw = p;
    fw->fn(&fw->replica, fw->w, fw->arg);
    return NULL;
}

int fanout_threads(void) {
    int n = openblas_get_num_threads();
    return n > 0 ? n : 1;
}

void fanout(Model *m, int n, void (*fn)(Model *m, int w, void *arg), void *arg) {
    if (n <= 1) {
        fn(m, 0, arg);
        return;
    }
    FanoutWorker *fw = xcalloc((size_t)n, sizeof(FanoutWorker));
    pthread_t *tid = xcalloc((size_t)n, sizeof(pthread_t));
    int *started = xcalloc((size_t)n, sizeof(int));
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    for (int w = 1; w < n; w++) {
        model_init_replica(&fw[w].replica, m);
        /* the caller's masked heads stay masked on every worker (translate --mask-heads) */
        if (m->head_gate) model_set_head_gates(&fw[w].replica, m->head_gate);
        fw[w].w = w, fw[w].fn = fn, fw[w].arg = arg;
        started[w] = pthread_create(&tid[w], NULL, run_worker, &fw[w]) == 0;
    }
    fn(m, 0, arg);
    for (int w = 1; w < n; w++) {
        if (started[w]) pthread_join(tid[w], NULL);
        else run_worker(&fw[w]);
        model_free(&fw[w].replica);
    }
    openblas_set_num_threads(blas_threads);
    free(fw), free(tid), free(started);
}
