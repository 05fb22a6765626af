/* run: see run.h. */
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "util.h"

ModelConfig run_model_config(const Config *c, int src_vocab, int tgt_vocab) {
    return (ModelConfig){
        .src_vocab = src_vocab,
        .tgt_vocab = tgt_vocab,
        .d_model = c->model.d_model,
        .heads = c->model.heads,
        .d_ff = c->model.d_ff,
        .encoder_layers = c->model.encoder_layers,
        .decoder_layers = c->model.decoder_layers,
        .dropout = (float)c->model.dropout,
        .pre_norm = c->model.norm == NORM_PRE,
        .tie_embeddings = c->model.tie_embeddings,
        .label_smoothing = (float)c->train.label_smoothing,
        /* room for outputs up to twice the longest training sentence; the sinusoidal
         * table has no weights, so its length costs nothing in a checkpoint */
        .max_positions = 2 * c->data.max_len + 12,
    };
}

const char *run_path(char *buf, size_t n, const char *dir, const char *file) {
    snprintf(buf, n, "%s/%s", dir, file);
    return buf;
}

int run_open(Run *r, const char *path) {
    memset(r, 0, sizeof *r);
    struct stat st;
    if (stat(path, &st) != 0) return err_set("%s: %s", path, strerror(errno));
    char p[CONFIG_PATH_MAX + 32];
    if (S_ISDIR(st.st_mode)) {
        snprintf(r->dir, sizeof r->dir, "%s", path);
        run_path(r->weights, sizeof r->weights, r->dir, "model.safetensors");
    } else {
        snprintf(r->weights, sizeof r->weights, "%s", path);
        const char *slash = strrchr(path, '/');
        if (slash) snprintf(r->dir, sizeof r->dir, "%.*s", (int)(slash - path), path);
        else snprintf(r->dir, sizeof r->dir, ".");
    }
    config_defaults(&r->cfg);
    run_path(p, sizeof p, r->dir, "config.yaml");
    if (stat(p, &st) != 0) return err_set("%s: not a run directory (no config.yaml)", r->dir);
    if (config_load(&r->cfg, p) != 0 || config_validate(&r->cfg, 0) != 0) return -1;
    if (vocab_load(&r->src_vocab, run_path(p, sizeof p, r->dir, "src.vocab")) != 0) return -1;
    if (vocab_load(&r->tgt_vocab, run_path(p, sizeof p, r->dir, "tgt.vocab")) != 0) {
        vocab_free(&r->src_vocab);
        return -1;
    }
    ModelConfig mc = run_model_config(&r->cfg, r->src_vocab.size, r->tgt_vocab.size);
    if (model_init(&r->model, &mc) != 0 || ckpt_load_weights(&r->model, r->weights) != 0) {
        if (stat(r->weights, &st) != 0) err_set("%s: no trained model in this run (train it first)", r->dir);
        run_close(r);
        return -1;
    }
    return 0;
}

void run_close(Run *r) {
    vocab_free(&r->src_vocab);
    vocab_free(&r->tgt_vocab);
    model_free(&r->model);
}
