/* job: one request of `qkv serve` on its way to an answer: the parsed request, the
 * checkpoint that answers it, and the answer once made. Whoever answers it (a runner,
 * runners.h, or the queue at a job's deadline) calls job_answer or job_refuse once; the
 * job's done callback then hands the answer back to the connection. */
#ifndef QKV_SERVE_JOB_H
#define QKV_SERVE_JOB_H

#include "run/run.h"
#include "serve/api.h"
#include "serve/work.h"

typedef struct Job {
    ApiRequest req;
    int checkpoint; /* served index */
    int light;      /* the light lane may take it (set by jobs_submit) */
    WorkSize size;  /* its text as its model reads it, read once (job_size) */
    double queued_at;
    int status; /* the answer: HTTP status and JSON body (malloc'd) */
    char *body;
    void (*done)(struct Job *job);
    void *conn; /* the caller's */
    struct Job *next;
} Job;

/* The answer: status and body (malloc'd, the job's from now on); calls done. */
void job_answer(Job *job, int status, char *body);
/* An error answer: the API's {"error": ...} of fmt with what in it (one %s). */
void job_refuse(Job *job, int status, const char *fmt, const char *what);
void job_free(Job *job);
/* The job's text counted on r, its checkpoint's model: counted the first time only. */
const WorkSize *job_size(Job *job, const Run *r);

#endif
