/* jobs: see jobs.h. */
#include "serve/jobs.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "serve/routes.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/mem.h"

#define MAX_WORKERS 64

typedef struct {
    struct Jobs *jobs;
    Model *replica; /* (models->n) one per checkpoint, made on first use */
    int *made;
    int light; /* the light lane's: takes light jobs only */
} Worker;

struct Jobs {
    ServedModels *models;
    pthread_mutex_t lock;
    pthread_cond_t more;                          /* the pool's: a job came, or the stop */
    pthread_cond_t light;                         /* the light lane's worker's: a light job came, or the stop */
    pthread_cond_t queued;                        /* the reaper's: a job came, or the reaper's end (CLOCK_MONOTONIC) */
    Job *head, *tail;                             /* in the order they came: the head is the oldest */
    int waiting, working, stopping, n, queue_max; /* n: the threads started, the light lane's last */
    double max_gflop;                             /* a request's estimated work, at most */
    double deadline;                              /* seconds a job may wait in the queue */
    pthread_t tid[MAX_WORKERS + 1];
    Worker w[MAX_WORKERS + 1];
    pthread_t reaper;
    int reaper_started, reaper_end;
};

/* Takes *at (prev before it, NULL at the head) off the queue; under the lock. */
static Job *unqueue(struct Jobs *j, Job **at, Job *prev) {
    Job *job = *at;
    *at = job->next;
    if (j->tail == job) j->tail = prev;
    job->next = NULL;
    j->waiting--;
    return job;
}

/* The job a worker takes next, off the queue, under the lock: the oldest, or for the
 * light lane's worker the oldest light one; NULL when there is none. */
static Job *take(struct Jobs *j, int light) {
    Job **at = &j->head, *prev = NULL;
    for (; *at && light && !(*at)->light; at = &(*at)->next) prev = *at;
    return *at ? unqueue(j, at, prev) : NULL;
}

static void refuse_late(Job *job) {
    job_refuse(job, 503, "%s", "the request waited past its deadline in the queue: try again");
}

/* The reaper: answers each job still queued at its deadline, when it falls due, not when
 * a worker comes free (behind long decodings, minutes later). It waits on the queue's
 * oldest job, the head. */
static void *reap(void *arg) {
    struct Jobs *j = arg;
    pthread_mutex_lock(&j->lock);
    while (!j->reaper_end) {
        Job *first = j->head;
        if (!first) {
            pthread_cond_wait(&j->queued, &j->lock);
            continue;
        }
        double due = first->queued_at + j->deadline;
        if (now_seconds() < due) {
            struct timespec at = {(time_t)due, (long)((due - (double)(time_t)due) * 1e9)};
            pthread_cond_timedwait(&j->queued, &j->lock, &at);
            continue;
        }
        unqueue(j, &j->head, NULL);
        pthread_mutex_unlock(&j->lock);
        refuse_late(first); /* its done callback, not under the lock */
        pthread_mutex_lock(&j->lock);
    }
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

/* The worker's replica of checkpoint k (a RunEnv's): made on its first use */
static Model *replica_of(void *worker, int k, const Run *r) {
    Worker *w = worker;
    if (!w->made[k]) model_init_replica(&w->replica[k], &r->model), w->made[k] = 1;
    return &w->replica[k];
}

/* The job's answer, by its route's runner */
static void run(Worker *w, Job *job) {
    RunEnv env = {w->jobs->models, w->jobs->max_gflop, replica_of, w};
    route_of_api(job->req.kind)->run(&env, job);
}

static void *work(void *arg) {
    Worker *w = arg;
    struct Jobs *j = w->jobs;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        Job *job;
        while (!(job = take(j, w->light)) && !j->stopping) pthread_cond_wait(w->light ? &j->light : &j->more, &j->lock);
        if (!job) { /* stopping, and nothing left for this worker */
            pthread_mutex_unlock(&j->lock);
            break;
        }
        j->working++;
        pthread_mutex_unlock(&j->lock);
        if (now_seconds() - job->queued_at > j->deadline) refuse_late(job); /* one the reaper has not come to yet */
        else run(w, job);
        pthread_mutex_lock(&j->lock);
        j->working--;
        pthread_mutex_unlock(&j->lock);
    }
    return NULL;
}

static void end_reaper(struct Jobs *j) {
    pthread_mutex_lock(&j->lock);
    j->reaper_end = 1;
    pthread_cond_signal(&j->queued);
    pthread_mutex_unlock(&j->lock);
    if (j->reaper_started) pthread_join(j->reaper, NULL);
}

static void free_jobs(struct Jobs *j) {
    pthread_mutex_destroy(&j->lock), pthread_cond_destroy(&j->more), pthread_cond_destroy(&j->light);
    pthread_cond_destroy(&j->queued);
    free(j);
}

Jobs *jobs_start(ServedModels *models, int n, int queue_max, double max_gflop, double deadline) {
    if (n < 1) n = 1;
    if (n > MAX_WORKERS) n = MAX_WORKERS;
    struct Jobs *j = xcalloc(1, sizeof *j);
    j->models = models;
    j->queue_max = queue_max > 0 ? queue_max : JOBS_QUEUE_MAX;
    j->max_gflop = max_gflop > 0 ? max_gflop : JOBS_MAX_GFLOP;
    j->deadline = deadline > 0 ? deadline : JOBS_DEADLINE_SECONDS;
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->more, NULL), pthread_cond_init(&j->light, NULL);
    pthread_condattr_t monotonic; /* the deadlines are on now_seconds()'s clock */
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&j->queued, &monotonic);
    pthread_condattr_destroy(&monotonic);
    if (pthread_create(&j->reaper, NULL, reap, j) != 0) {
        free_jobs(j);
        err_set("cannot start the thread that answers requests past their deadline");
        return NULL;
    }
    j->reaper_started = 1;
    for (int i = 0; i <= n; i++) { /* the pool, then the light lane's worker */
        j->w[i] = (Worker){j, xcalloc((size_t)models->n, sizeof(Model)), xcalloc((size_t)models->n, sizeof(int)),
                           i == n};
        if (pthread_create(&j->tid[i], NULL, work, &j->w[i]) != 0) {
            free(j->w[i].replica), free(j->w[i].made);
            break;
        }
        j->n++;
    }
    if (j->n == 0) { /* without the light lane's worker (or some of the pool's), the pool takes every job */
        end_reaper(j);
        free_jobs(j);
        err_set("cannot start a worker thread");
        return NULL;
    }
    return j;
}

int jobs_submit(Jobs *j, Job *job) {
    /* its lane, from its text on a model already loaded (never waiting for a load: a job
     * for a checkpoint not loaded yet is a heavy one) */
    const Run *r = served_peek(j->models, job->checkpoint);
    job->light = r &&
                 route_of_api(job->req.kind)->gflop(r, &job->req, job_size(job, r)) <= j->max_gflop / JOBS_LIGHT_SHARE;
    pthread_mutex_lock(&j->lock);
    if (j->stopping || j->waiting >= j->queue_max) {
        pthread_mutex_unlock(&j->lock);
        return -1;
    }
    job->next = NULL;
    job->queued_at = now_seconds();
    if (j->tail) j->tail->next = job;
    else j->head = job;
    j->tail = job;
    j->waiting++;
    pthread_cond_signal(&j->more);
    if (job->light) pthread_cond_signal(&j->light);
    if (j->head == job) pthread_cond_signal(&j->queued); /* the reaper waits on the head */
    pthread_mutex_unlock(&j->lock);
    return 0;
}

void jobs_counts(Jobs *j, int *waiting, int *working) {
    pthread_mutex_lock(&j->lock);
    *waiting = j->waiting, *working = j->working;
    pthread_mutex_unlock(&j->lock);
}

void jobs_stop(Jobs *j) {
    if (!j) return;
    pthread_mutex_lock(&j->lock);
    j->stopping = 1;
    pthread_cond_broadcast(&j->more), pthread_cond_broadcast(&j->light);
    pthread_mutex_unlock(&j->lock);
    for (int i = 0; i < j->n; i++) {
        pthread_join(j->tid[i], NULL);
        for (int k = 0; k < j->models->n; k++)
            if (j->w[i].made[k]) model_free(&j->w[i].replica[k]);
        free(j->w[i].replica), free(j->w[i].made);
    }
    end_reaper(j); /* after the workers, who leave the queue empty */
    free_jobs(j);
}
