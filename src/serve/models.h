/* models: the checkpoints `qkv serve` offers, by name, each loaded on its first request.
 *
 * Serving a run directory offers its step checkpoints ("step-000400", ...), "best" when it
 * has one, and any exported weights in the run directory itself ("average4" for
 * RUN/average4.safetensors); the default is the one `qkv translate RUN` would use.
 * Serving one weights file offers that file alone. Loading happens once per checkpoint,
 * under its own lock, on whichever worker asks first; the Run it gives stays until
 * served_close, and is only read from then on (each worker decodes on a replica). */
#ifndef QKV_SERVE_MODELS_H
#define QKV_SERVE_MODELS_H

#include <jansson.h>
#include <pthread.h>

#include "run/run.h"

typedef struct {
    char name[96]; /* well-formed UTF-8, whatever the file's name holds */
    char path[CONFIG_PATH_MAX + 96];
    pthread_mutex_t lock;
    int state; /* 0 not loaded yet, 1 loaded, -1 could not be (error holds why) */
    Run run;
    char error[256];
} ServedCheckpoint;

typedef struct {
    ServedCheckpoint *ck;
    int n, fallback; /* fallback: the default's index */
} ServedModels;

/* path: a run directory or a weights file, as `qkv translate` takes it. Loads the default
 * now (so a bad path fails at start, with its one line). -1 with the error set. */
int served_open(ServedModels *s, const char *path);
/* The index of name, or -1. */
int served_find(const ServedModels *s, const char *name);
/* Checkpoint i, loaded if it was not; NULL with the reason in err when it cannot be. */
const Run *served_get(ServedModels *s, int i, char *err, size_t errn);
/* Checkpoint i if it is loaded, else NULL: never loads it, never waits for a load. */
const Run *served_peek(ServedModels *s, int i);
void served_close(ServedModels *s);
/* `qkv heads` output beside the default checkpoint's run (RUN/heads/heads.json, its path
 * into path), for the live page's head grid: 1 with *heads the object {"heads": [...],
 * "step", "set", "file"}; 0 when there is none; -1 with the error set when the file is
 * there but is not a qkv-heads-1 list of heads (the page then goes without the grid). */
int served_heads(const ServedModels *s, char *path, size_t n, json_t **heads);
/* util/err's one message buffer, shared by every thread of the server: held from a call
 * that may set it to the reading of the message. */
void served_error_lock(void);
void served_error_unlock(void);

#endif
