/* trainer: the training loop behind `qkv train` and `qkv resume`.
 *
 * A Trainer is built in phases the command drives (read the corpora, encode them,
 * set up model/optimizer/threads, optionally restore a checkpoint, open the metrics),
 * then trainer_run runs the steps: batch -> forward -> backward -> clip -> Adam, with
 * validation, metrics.jsonl, curves.svg and checkpoints. It prints nothing: progress
 * and warnings go to a TrainReporter the command supplies. SIGINT/SIGTERM finish the
 * current step, write a checkpoint and stop; a resume continues bit-exactly.
 *
 * Under MPI ranks every rank runs the loop on the same batches (its shards of them);
 * rank 0 alone validates, writes metrics, curves and checkpoints, and reports. The stop
 * signal is then SIGUSR1 (mpirun passes it to every rank); the ranks agree on the step
 * after which they all stop. */
#ifndef QKV_TRAINER_H
#define QKV_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "data/batch.h"
#include "data/corpus.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "run/run.h"
#include "train/parallel.h"

/* What one optimisation step needs. */
typedef struct {
    Workers *workers; /* the model and Adam, over train.threads threads (parallel.h) */
    Batcher *batches;
    LrSchedule sched;
    double clip_norm;
    uint64_t seed;    /* dropout masks are keyed by (seed, step) */
    ModelBatch batch; /* the batch the last step took (valid until the next step) */
} TrainStep;

/* Starts the threads for m and adam and reserves every arena for the largest share of
 * any batch (and for extra_floats on the main model, e.g. validation). NULL with the
 * error set when the threads cannot be started. */
Workers *train_workers(Model *m, Adam *adam, int threads, int pass_tokens, const Batcher *b, size_t extra_floats);

/* One step: next batch, forward, backward, clip, Adam. Allocates nothing. Returns the
 * batch's mean loss; *tokens gets its real token count and *lr the rate used; *stop
 * as workers_step (parallel.h). */
double train_step(TrainStep *t, int64_t step, int *tokens, double *lr, int *stop);

/* Everything a training run holds; the Run carries config and vocabularies. */
typedef struct {
    Run run;
    Corpus train, valid;
    int has_valid;
    int vocab_capped[2]; /* 0, or the pieces a SentencePiece model of the source (0), the target
                            (1) side got when data.vocab_size asked more than its text gives */
    Model m;
    Adam adam;
    Batcher tb, vb;
    Workers *workers;
    TrainStep ts;
    int64_t step; /* steps done */
    /* 0, or the step after which the clock began train.lr.cooldown (a time budget): the
     * run then ends at lr_cooldown_end of it (checkpointed, so a resume ends there too) */
    int64_t cooldown_from;
    double last_valid, best_valid;
    double last_bleu, best_bleu; /* NAN until train.valid_bleu computes one */
    int64_t last_valid_step;
    double elapsed_before; /* training seconds of the run before this process (checkpoint) */
    double t0;             /* when this process' loop started */
    int stopping;          /* a signal arrived before this step's bookkeeping: validate, checkpoint, stop */
    uint64_t data_hash;
    FILE *metrics;
    /* why a metrics record could not be written, "" while all were: the run then stops
     * before its next checkpoint. Kept, as the step's other writes may set the error after */
    char metrics_error[512];
    int stop_signal;  /* after trainer_run: the signal that stopped it, else 0 */
    int budget_spent; /* after trainer_run: train.minutes ended it (TRAIN_DONE) */
    double seconds;   /* after trainer_run: how long it ran */
} Trainer;

/* Reads the training (valid = 0) or validation (valid = 1) corpus the config names. */
int trainer_read(Trainer *t, int valid);
/* Builds the vocabularies from the training corpus when build is set (else the Run's
 * loaded ones are used): counted words or characters, or SentencePiece models trained on
 * the text (or read from data.spm_model); then encodes both corpora. -1 with the error set
 * (a model file that is no model, a vocabulary size the text cannot fill). */
int trainer_encode(Trainer *t, int build);
/* Model, optimizer, batches, threads: everything but the weights' values (which are
 * initialised from the seed). -1: the config describes no model (error set, bad
 * input); -2: the threads could not start (error set, runtime). */
int trainer_setup(Trainer *t);
/* Restores weights, moments, step, best loss and data cursor from the checkpoint bytes
 * (malloc'd; taken over, even on failure) of the file `path`, after checking it belongs
 * to this run and data; *threads gets the shard count it was trained with (threads x
 * ranks). -1 with the error set. */
int trainer_restore(Trainer *t, const char *path, char *bytes, size_t len, int *threads);

/* Under MPI ranks (train/dist.h), where rank 0 alone reads the run directory: rank 0's
 * config (read from the run) to every other rank, and its vocabularies (built or read)
 * to every other rank. Every rank calls them. -1 with the error set. */
int trainer_share_config(Trainer *t);
int trainer_share_vocabs(Trainer *t);
/* Under ranks, after encoding: every rank's resolved config and training data must be
 * rank 0's. -1 with the error set: *bad_input when they differ, else the ranks could
 * not talk. */
int trainer_check_ranks(Trainer *t, int *bad_input);
/* Opens the run's metrics.jsonl, starting over, or appending after the records of the
 * steps up to t->step (those past it, logged after the checkpoint restored, are dropped,
 * atomically). -1 with the error set. */
int trainer_open_metrics(Trainer *t, int append);
void trainer_free(Trainer *t);

/* What the reporter hears after each step. */
typedef struct {
    int64_t step;
    int steps;
    double loss;          /* this step's loss; for a log, the mean since the last log */
    double tokens_per_s;  /* since the last log */
    double lr, elapsed_s; /* elapsed_s: training time of the whole run, across resumes */
    double epoch;         /* epochs of data seen: the batcher's epoch + position / batches per epoch */
    double eta_s;         /* at this session's pace */
    int log_now;          /* progress only: a log follows this step */
    int validated;        /* log only: valid_loss holds this step's validation loss */
    double valid_loss;
    double valid_bleu;  /* log only: with validated, BLEU when train.valid_bleu computed it, else NAN */
    int cooldown_began; /* progress only: the clock began the cooldown after this step; steps is its last */
} TrainProgress;

/* What the loop hands back to the command that runs it. Besides printing, two of these
 * are the loop's only ways into code above or beside it: valid_bleu (decoding the
 * validation set and scoring it) and watch (recording attention maps). cmd/train.c
 * supplies them all (on_progress, on_log, on_warn, on_valid_bleu, on_watch). */
typedef struct {
    void *ctx;
    void (*progress)(void *ctx, const TrainProgress *p); /* after every step */
    void (*log)(void *ctx, const TrainProgress *p);      /* at log steps, after metrics.jsonl has them */
    void (*warn)(void *ctx, const char *msg);            /* a fault training goes on after */
    /* With train.valid_bleu: corpus BLEU (0..100) of m's greedy translations of the
     * validation set, at each validation. It lives with the command (cmd/train.c's
     * on_valid_bleu: decode/translator.h, then score/sacrebleu.h), because decoding and
     * scoring are rooms this layer may not call. NAN when it cannot be computed (the
     * callback has warned); NULL: BLEU is never computed. Must leave m's weights alone. */
    double (*valid_bleu)(void *ctx, Model *m);
    /* With train.watch: record the watched sentences' attention with m's weights at this
     * step (cmd/train.c's on_watch: attention/watch.h), at step 0 and at every validation step. NULL: nothing is
     * recorded. Must leave m's weights alone; a failure is the callback's to report. */
    void (*watch)(void *ctx, Model *m, int64_t step);
} TrainReporter;

typedef enum {
    TRAIN_DONE,         /* train.steps reached */
    TRAIN_STOPPED,      /* by a signal, after a checkpoint */
    TRAIN_DIVERGED,     /* the loss is not finite (error set) */
    TRAIN_CKPT_FAILED,  /* a checkpoint could not be written (error set) */
    TRAIN_WRITE_FAILED, /* metrics.jsonl could not be written (error set) */
    TRAIN_RANKS_FAILED, /* the ranks lost contact (error set): no checkpoint was written */
} TrainEnd;

/* From now on the stop signal is caught and kept: SIGUSR1 with ranks > 1 (mpirun passes
 * it on to every rank), else SIGINT and SIGTERM. A request kept before the loop begins
 * stops it after its first step, with a checkpoint. trainer_run calls it; under an MPI
 * launcher, call it before the ranks join as well: a rank killed by a SIGUSR1 while MPI
 * starts up can leave Open MPI's mpirun waiting for it for ever. */
void trainer_catch_stop(int ranks);

/* The loop, from t->step to its last step (trainer_last_step), or to the first step that
 * starts with train.minutes spent (that step validates and checkpoints as the last one
 * would). Under a time budget with train.lr.cooldown F, rank 0's clock begins the
 * cooldown at the first step that starts past (1 - F) of the minutes, and the run's last
 * step becomes the cooldown's end (lr_cooldown_end): the run ends there or when the
 * minutes are spent, whichever comes first. */
TrainEnd trainer_run(Trainer *t, const TrainReporter *r);
/* The step the run ends at, the minutes aside: train.steps, or sooner the end of a
 * cooldown the clock began (t->cooldown_from). */
int64_t trainer_last_step(const Trainer *t);
/* Whether train.minutes is spent once this process has trained `seconds` (the run's
 * earlier processes counted from the checkpoint); never without a budget. */
int trainer_budget_spent(const Trainer *t, double seconds);

#endif
