/* bench_timeline: where the training threads' time goes, step by step, from the marks
 * train/parallel.c records (workers_record): each thread's work in each phase (its shard's
 * forward and backward, its slice of the gradient sum, its slice of Adam), its wait at
 * each of the step's barriers, split into the lag (waiting for the last thread to arrive:
 * the price of an uneven cut) and the wake (from the last arrival to this thread leaving:
 * the barrier's own cost), and the main thread's work between steps, while the others
 * idle. `qkv bench` puts the summary in its JSON and, with --timeline, draws the steps. */
#ifndef QKV_CMDLIB_BENCH_TIMELINE_H
#define QKV_CMDLIB_BENCH_TIMELINE_H

#include <jansson.h>

typedef struct {
    int steps, threads;
    const double *marks; /* steps x threads x N_MARKS (train/parallel.h), copied out */
    const double *call;  /* steps x 2: the main thread's clock when the step was called and returned */
    const double *work;  /* steps x threads: the FLOPs of each thread's shard */
} Timeline;

/* The barriers of a step, in order (with one rank). */
enum { TL_START, TL_AFTER_SHARDS, TL_AFTER_FOLD, TL_END, TL_BARRIERS };

/* One step's account for one thread, in seconds. */
typedef struct {
    double shard, fold, adam; /* work */
    double lag[TL_BARRIERS];  /* waiting for the last thread to arrive */
    double wake[TL_BARRIERS]; /* from the last arrival until this thread leaves */
    double serial;            /* the main thread alone between steps (others: idle then) */
} ThreadStep;

/* Thread i's account in step k (lags and wakes at the start count from the main thread's
 * arrival: before it, the others idle while it works alone). */
ThreadStep timeline_thread_step(const Timeline *tl, int k, int i);

/* The means over the recorded steps: per thread, per phase and barrier (ms), the share of
 * all threads' time spent waiting (lag + wake, every barrier) and idle while the main
 * thread works alone, each thread's shard rate (GFLOP/s), how often each thread's shard
 * was the last to finish, and how often that was the shard with the most counted work. */
json_t *timeline_summary(const Timeline *tl);

/* Every recorded step: its wall time, and each thread's shard FLOPs, phases and waits, and
 * the span (from_ms, to_ms after the step's call) they fill. */
json_t *timeline_steps(const Timeline *tl);

/* An SVG of steps first .. first+count-1: a lane per thread, its phases and waits as bars
 * on one time axis (malloc'd). */
char *timeline_svg(const Timeline *tl, int first, int count, const char *title);

#endif
