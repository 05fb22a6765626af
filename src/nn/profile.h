/* profile: where a step's time goes, by kind of work. Off unless prof_enabled is set
 * (by `qkv bench`); then each instrumented op adds its wall time to one bucket. */
#ifndef QKV_PROFILE_H
#define QKV_PROFILE_H

#include "util/clock.h"

enum {
    PROF_MATMUL,
    PROF_ATTENTION,
    PROF_SOFTMAX,
    PROF_LAYERNORM,
    PROF_ELEMENTWISE,
    PROF_EMBED_LOSS,
    PROF_OPTIM,
    PROF_WAIT, /* the main thread waiting at a barrier for the other training threads */
    PROF_N
};

extern int prof_enabled;
extern _Thread_local int prof_elsewhere; /* set on worker threads: only the main thread counts */
extern double prof_seconds[PROF_N];
extern const char *prof_names[PROF_N];

static inline double prof_start(void) { return prof_enabled && !prof_elsewhere ? now_seconds() : 0.0; }
static inline void prof_stop(int bucket, double t0) {
    if (prof_enabled && !prof_elsewhere) prof_seconds[bucket] += now_seconds() - t0;
}

#endif
