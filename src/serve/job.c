/* job: see job.h. */
#include "serve/job.h"

#include <stdio.h>
#include <stdlib.h>

void job_free(Job *job) {
    if (!job) return;
    api_request_free(&job->req);
    work_size_free(&job->size);
    free(job->body), free(job);
}

void job_answer(Job *job, int status, char *body) {
    free(job->body);
    job->status = status, job->body = body;
    job->done(job);
}

void job_refuse(Job *job, int status, const char *fmt, const char *what) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, what);
    job_answer(job, status, api_error_json(msg));
}

const WorkSize *job_size(Job *job, const Run *r) {
    /* a checkpoint's vocabularies are its own whenever it is loaded: a count stays true */
    if (!job->size.counted) work_size(r, &job->req, &job->size);
    return &job->size;
}
