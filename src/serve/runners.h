/* runners: what a worker of `qkv serve` does with each kind of request, one function a
 * kind, each named in its route's row (routes.h). A runner checks the request against the
 * model that answers it (the mask, the lengths, the work bound, before any decoding),
 * makes the answer by the same library call as the command of the same name (translate,
 * attention --text, explain --text, whatif, patch), and answers the job (job.h) once. */
#ifndef QKV_SERVE_RUNNERS_H
#define QKV_SERVE_RUNNERS_H

#include "serve/job.h"
#include "serve/models.h"

/* What a runner works with: the served checkpoints, the work one request may ask (GFLOP),
 * and the worker's own replica of a checkpoint's model (made on first use; no two
 * workers share one). */
typedef struct {
    ServedModels *models;
    double max_gflop;
    Model *(*replica)(void *worker, int checkpoint, const Run *r);
    void *worker;
} RunEnv;

typedef void (*Runner)(const RunEnv *env, Job *job);

void runner_translate(const RunEnv *w, Job *job); /* POST /v1/translate */
void runner_attention(const RunEnv *w, Job *job); /* POST /v1/attention */
void runner_explain(const RunEnv *w, Job *job);   /* POST /v1/explain */
void runner_whatif(const RunEnv *w, Job *job);    /* POST /v1/whatif */
void runner_patch(const RunEnv *w, Job *job);     /* POST /v1/patch */

#endif
