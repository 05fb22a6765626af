/* run: a run directory, the unit of work (its files are named in run/files.h).
 *
 * Creates a run directory for `qkv train`, opens one for `qkv resume`, opens a run (or
 * one checkpoint inside one) for the commands that use a trained model, and keeps the
 * checkpoint directory: naming, finding, rotating. */
#ifndef QKV_RUN_H
#define QKV_RUN_H

#include "config.h"
#include "data/vocab.h"
#include "nn/model.h"
#include "run/checkpoint.h"
#include "run/files.h"

typedef struct {
    char dir[CONFIG_PATH_MAX];
    char weights[CONFIG_PATH_MAX + 64]; /* the checkpoint the model was loaded from */
    const char *which;                  /* a run directory's "average", "best" or "latest"; "given" for a file */
    Config cfg;
    Vocab src_vocab, tgt_vocab;
    Model model;
    CkptMeta meta;
} Run;

/* A step checkpoint's file name in <run>/ckpt and the step the name says. */
typedef struct {
    long long step;
    char name[64];
} StepFile;

/* The model's shape from the config and the vocabulary sizes. */
ModelConfig run_model_config(const Config *c, int src_vocab, int tgt_vocab);

/* path: a run directory (its average when train.average_last keeps one, else its best
 * checkpoint, else its latest; r->which says which), a checkpoint file in a run's ckpt/
 * directory, or weights `qkv export` wrote (they hold their config and vocabularies). The
 * model loaded, checked against the run's config and vocabularies (their hash). -1 with
 * the error set. */
int run_open(Run *r, const char *path);
void run_close(Run *r);

/* What was in a run directory before a train wrote to it: run_abandon leaves it there. */
typedef struct {
    int made;         /* the directory itself was not there */
    int had_ckpt_dir; /* nor (when 0) its ckpt/ */
    unsigned had;     /* a bit per file a train writes before its first step, set when it was there */
} RunFresh;
/* A new run in cfg->run_dir: makes the directory, notes in *fresh what was there before
 * and locks it for this process (a second train or resume of a live run is refused,
 * naming its pid); unless force, refuses a directory that holds a run with checkpoints
 * (they go when run_write_files runs) and one that holds no run but a file of a run's
 * names (the config trained from, as config.yaml, aside). 0: a new run (files of other
 * names may be there); 1: a run that stopped before its first checkpoint, to be started
 * over; -1 with the error set (a user error). */
int run_create(const Config *cfg, int force, RunFresh *fresh);
/* After a train that failed before its first checkpoint: removes the files it created
 * (never one that was there before run_create, such as the user's own config.yaml) and
 * the directory if it made it and it is empty, so nothing blocks the next train. Leaves a
 * run with checkpoints alone. */
void run_abandon(const char *dir, const RunFresh *fresh);
/* Starts the run's files over: removes old checkpoints and what the old run wrote of
 * itself (journal, samples, evaluations, report, heads/), makes ckpt/, writes the resolved
 * config.yaml and both vocabularies. Files of other names stay. -1 with the error set. */
int run_write_files(const Run *r);
/* Keys of config.yaml that differ from the checkpoint's config. */
typedef struct {
    int count;
    char first[64]; /* the first of them, in config.h's table order */
} RunEdits;
/* The run in dir, for training on: vocabularies loaded, stale .tmp files of a killed run
 * swept, its latest checkpoint's path in ckpt, and the config that checkpoint was trained
 * with as the run's: a resume goes on with it whatever config.yaml says now, but for the
 * directory given here, the data files' paths (the data is held to the checkpoint's hash),
 * train.steps and train.threads, which come from config.yaml. The other keys config.yaml
 * gives other values are in *edits. -1 with the error set. */
int run_open_for_training(Run *r, const char *dir, char *ckpt, size_t n, RunEdits *edits);
/* Moves the run's goal to `steps` and records it in its config.yaml. */
int run_set_steps(Run *r, int steps);

/* Loads the run's config.yaml and vocabularies (no model). */
int run_load_config_and_vocab(Run *r, const char *dir);

/* Checks a checkpoint's metadata against the run's vocabularies and config, and its file
 * name's step (a step-N name must hold step N). */
int run_check_checkpoint(const Run *r, const char *ckpt_path, const CkptMeta *meta);

/* 0 unless path's file name is a step checkpoint's whose step is not `step` (the step its
 * header holds): then -1 with the error set, naming both. */
int run_check_step_name(const char *path, int64_t step);

/* The pid of the process training the run in dir (holding its lock), 0 when none is. */
long run_lock_holder(const char *dir);
/* "<dir>/<file>" into buf. */
const char *run_path(char *buf, size_t n, const char *dir, const char *file);
/* "<dir>/ckpt/step-%06lld.safetensors" into buf. */
const char *run_step_checkpoint(char *buf, size_t n, const char *dir, long long step);
/* Paths of a run's step checkpoints, oldest first (free_lines(paths, n) frees them). */
int run_step_checkpoints(const char *dir, char ***paths);
/* The newest n step checkpoints of a run of steps up to `until` (LLONG_MAX: all of them),
 * opened for reading (fds[i], oldest first, the caller closes them) with their paths
 * (free_lines(paths, count) frees them): one that a train of the run rotates away between
 * the listing and its open makes a new listing, so every file returned exists and stays
 * readable. Returns the count, fewer than n when the run keeps fewer; -1 with the error set. */
int run_open_newest_checkpoints(const char *dir, long long until, int n, int *fds, char ***paths);
/* 1 if writing path would replace a checkpoint of the run in dir: path is the same file
 * as one of its step checkpoints or best.safetensors, or names one of those in its
 * ckpt/ (however the directory is spelled), there yet or not. */
int run_is_own_checkpoint(const char *dir, const char *path);
/* Whether r's weights were read in a run (r->dir holds its config.yaml), not an exported
 * file read alone, whose directory is anyone's. */
int run_in_its_run(const Run *r);
/* 1 (the error set, naming writer: "the export") when writing out would replace a file
 * that r reads or its run keeps: a checkpoint of the run (there yet or not), the very
 * weights read (an exported file given as the source), or any file already in the run's
 * directory (its config, metrics, vocabularies). A new file there is fine. */
int run_out_replaces_own_file(const Run *r, const char *out, const char *writer);
/* The same for a command that opened no run (bench's outputs, option naming which), with
 * no weights read: against the run in dir (NULL: none; a folder without config.yaml and
 * ckpt/ holds none) and any run a folder above out holds, however out spells its way. */
int run_out_replaces_a_runs_file(const char *dir, const char *out, const char *option, const char *writer);
/* The highest-step checkpoint of a run, by the steps the names say (whatever their
 * padding); -1 (error set) when there is none, or two names say that step. */
int run_latest_checkpoint(const char *dir, char *buf, size_t n);
/* Deletes step checkpoints beyond the newest `keep` that hold the step their name says
 * (one that holds another is neither counted nor deleted; keep 0 deletes every one), and
 * the .tmp files of ckpt/ that
 * are this process' own or a dead process' (never a live writer's). */
void run_rotate_checkpoints(const char *dir, int keep);
/* Makes ckpt/best.safetensors the same file as `ckpt_path` (atomically). */
int run_mark_best(const char *dir, const char *ckpt_path);
/* Removes every checkpoint of a run (for train --force). */
void run_clear_checkpoints(const char *dir);

uint64_t run_vocab_hash(const Vocab *src, const Vocab *tgt);

#endif
