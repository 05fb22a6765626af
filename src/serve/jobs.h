/* jobs: the bounded queue of `qkv serve` and the threads that empty it.
 *
 * A request becomes a job (serve/api.h's ApiRequest; its mask is read against the model
 * that answers it, by the worker, so the HTTP thread never waits on a model's load);
 * jobs_submit queues it without ever waiting: a full queue is the caller's 503. Each job
 * runs alone: a translate job's sentences are decoded as one batch, as `qkv translate`
 * batches lines, and never with another request's, so that an answer depends on its own
 * request alone, byte for byte (a sentence's score moves in its last digits with the other
 * sentences of its batch: the matrix products round differently over more rows). An
 * attention or explain job
 * is one sentence, run alone; an explanation's work (a backward pass per target token and
 * integration step) is estimated from the model's shape before it starts, and one past
 * the bound (JOBS_MAX_GFLOP) is refused; so is a whatif (a forced pass or two, the logit lens,
 * a greedy and a beam decoding) or a patch table (a forced pass per head and per encoder
 * position) past it, so that no request holds a worker (or a stop) for
 * minutes. Each worker decodes on replicas of its own (one per checkpoint it has used), so
 * no two threads share an arena; they multiply on one OpenBLAS thread each.
 *
 * Two lanes. The pool of workers takes jobs in the order they came, whatever their cost.
 * One more worker, the light lane's, takes only light jobs: those whose work, estimated
 * from their text before they run (their route's estimate, routes.h, on a checkpoint already loaded), is
 * at most 1/JOBS_LIGHT_SHARE of the bound; it takes the oldest of them, wherever it stands
 * in the queue. So a small request never waits behind heavy ones, however many one client
 * queues (an explanation runs for seconds and cannot be interrupted), and heavy ones are
 * never passed over for ever by light ones, which the pool takes in their turn.
 *
 * When a job is done (answered or refused), the worker (or, for a job still queued at its
 * deadline, the thread that watches the deadlines) fills its status and body and calls its
 * done callback, once. jobs_stop lets the workers finish every queued job, then joins
 * them. */
#ifndef QKV_SERVE_JOBS_H
#define QKV_SERVE_JOBS_H

#include "serve/job.h"
#include "serve/models.h"

#define JOBS_QUEUE_MAX 256       /* jobs waiting at once by default: past it, 503 with Retry-After */
#define JOBS_DEADLINE_SECONDS 30 /* a job still queued this long after it came is answered 503 */
#define JOBS_LIGHT_SHARE 30      /* a light job: estimated at most the work bound / this */
#define JOBS_MAX_GFLOP                                                                     \
    300 /* an explanation's, a whatif's or a patch's estimated work: past it, 413 (seconds \
           of one core, not minutes); qkv serve --max-gflop sets another */

typedef struct Jobs Jobs;

/* n workers (1..64) and the light lane's over the models, at most queue_max jobs waiting (0: JOBS_QUEUE_MAX), a
 * request's estimated work at most max_gflop (0: JOBS_MAX_GFLOP), a job answered 503 when
 * it is still queued deadline seconds after it came (0: JOBS_DEADLINE_SECONDS), at that
 * moment, whether or not a worker is free (a thread of its own watches the queue); NULL
 * with the error set when no thread starts. */
Jobs *jobs_start(ServedModels *models, int n, int queue_max, double max_gflop, double deadline);
/* 0: queued (done will be called); -1: the queue is full or stopping (done will not be). */
int jobs_submit(Jobs *j, Job *job);
/* Jobs waiting now, and jobs the workers (the light lane's included) are on. */
void jobs_counts(Jobs *j, int *waiting, int *working);
void jobs_stop(Jobs *j);

#endif
