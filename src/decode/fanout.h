/* fanout: one job shared by threads, each on its own view of one model (the analyses of
 * `qkv heads`: many independent passes over a fixed model).
 *
 * fanout(m, n, fn, arg) calls fn(model, w, arg) for w = 0 .. n-1 at once: worker 0 on
 * the caller's thread with m itself, the others on threads of their own, each with a
 * replica of m (nn/model.h: the weights shared read-only; its own arena, gradients and
 * head gates, which start as m's). Meanwhile OpenBLAS runs at one thread, so that n workers use n cores
 * rather than contending with its pool; its setting is restored after. A thread that
 * cannot be started has its share run on the caller's thread once the others are done:
 * fewer cores, the same result. Returns when every share is done; the replicas are gone
 * by then, so fn must leave its results in arg, never in the model. */
#ifndef QKV_FANOUT_H
#define QKV_FANOUT_H

#include "nn/model.h"

/* The number of workers fanout is worth calling with: OpenBLAS's own thread count (all
 * cores unless OPENBLAS_NUM_THREADS or an address-space limit says fewer), at least 1. */
int fanout_threads(void);
void fanout(Model *m, int n, void (*fn)(Model *m, int w, void *arg), void *arg);

#endif
