/* run: a run directory, the unit of work.
 *
 *   runs/<name>/config.yaml        the resolved config (every key)
 *   runs/<name>/src.vocab, tgt.vocab
 *   runs/<name>/metrics.jsonl      one JSON object per log step
 *   runs/<name>/model.safetensors  the trained weights
 *
 * Opens a run (or a weights file inside one) for the commands that use a trained model. */
#ifndef QKV_RUN_H
#define QKV_RUN_H

#include "config.h"
#include "model.h"
#include "vocab.h"

typedef struct {
    char dir[CONFIG_PATH_MAX];
    char weights[CONFIG_PATH_MAX + 32]; /* the file the model was loaded from */
    Config cfg;
    Vocab src_vocab, tgt_vocab;
    Model model;
} Run;

/* The model's shape from the config and the vocabulary sizes. */
ModelConfig run_model_config(const Config *c, int src_vocab, int tgt_vocab);

/* path: a run directory, or a .safetensors file inside one. -1 with the error set. */
int run_open(Run *r, const char *path);
void run_close(Run *r);

/* "<dir>/<file>" into buf. */
const char *run_path(char *buf, size_t n, const char *dir, const char *file);

#endif
