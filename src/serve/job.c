/* job: see job.h. */
#include "serve/job.h"

#include <stdio.h>
#include <stdlib.h>

void job_free(Job *job) {
    if (!job) return;
    api_request_free(&job->req);
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
