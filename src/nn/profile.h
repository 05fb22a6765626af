/* profile: where a step's time goes, by kind of work and by training thread. Off unless
 * prof_enabled is set (by `qkv bench`); then each instrumented op adds its wall time to
 * one bucket of the thread that ran it. */
#ifndef QKV_PROFILE_H
#define QKV_PROFILE_H

#include <stdatomic.h>

#include "util/clock.h"

enum {
    PROF_MATMUL,
    PROF_ATTENTION,
    PROF_SOFTMAX,
    PROF_LAYERNORM,
    PROF_ELEMENTWISE,
    PROF_EMBED_LOSS,
    PROF_OPTIM,
    PROF_WAIT, /* a training thread waiting at a barrier for the others */
    PROF_N
};

/* Training threads with buckets of their own; thread 0 is the main thread, and a thread
 * past the last counts in none. */
#define PROF_THREADS 64

/* switched by the main thread while the training threads run: read relaxed (x86: a plain load) */
extern atomic_int prof_enabled;
/* This thread's training index (0 unless train/parallel.c set it; -1: not counted). */
extern _Thread_local int prof_thread;
extern double prof_seconds[PROF_THREADS][PROF_N];
extern const char *prof_names[PROF_N];

static inline int prof_counts(void) {
    return atomic_load_explicit(&prof_enabled, memory_order_relaxed) && prof_thread >= 0 && prof_thread < PROF_THREADS;
}
static inline double prof_start(void) { return prof_counts() ? now_seconds() : 0.0; }
/* t0 is 0 when the timing began before profiling was switched on (another thread may
 * switch it on in between): that one is not counted */
static inline void prof_stop(int bucket, double t0) {
    if (prof_counts() && t0 > 0) prof_seconds[prof_thread][bucket] += now_seconds() - t0;
}

#endif
