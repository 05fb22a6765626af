/* late_start: an LD_PRELOAD shim for the tests that makes every new thread start late.
 *
 * pthread_create is wrapped so that the new thread sleeps before its start routine runs:
 * QKV_LATE_START_MS milliseconds (default 200), or a random time up to that with
 * QKV_LATE_START_RANDOM=1. A thread handshake that assumes the new thread runs first
 * (a flag read before a barrier, a stop that waits for a thread that already left)
 * then fails every time instead of now and then. Nothing here is linked into qkv. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

typedef struct {
    void *(*start)(void *);
    void *arg;
    long delay_ns;
} Late;

static void *late_start(void *p) {
    Late l = *(Late *)p;
    free(p);
    struct timespec ts = {l.delay_ns / 1000000000L, l.delay_ns % 1000000000L};
    while (nanosleep(&ts, &ts) != 0) {}
    return l.start(l.arg);
}

static long delay_ns(void) {
    const char *ms = getenv("QKV_LATE_START_MS"), *rnd = getenv("QKV_LATE_START_RANDOM");
    long d = (ms ? atol(ms) : 200) * 1000000L;
    if (rnd && rnd[0] == '1' && d > 0) {
        static unsigned seed;
        if (!seed) seed = (unsigned)time(NULL) ^ (unsigned)(size_t)&seed;
        d = (long)(rand_r(&seed) % (d / 1000 + 1)) * 1000L;
    }
    return d;
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
    static create_fn real;
    if (!real) real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    Late *l = malloc(sizeof *l);
    if (!l) return real(t, attr, start, arg);
    *l = (Late){start, arg, delay_ns()};
    int rc = real(t, attr, late_start, l);
    if (rc != 0) free(l);
    return rc;
}
