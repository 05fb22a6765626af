/* grad_dump: `qkv grads`, the hook for checking qkv against another implementation.
 *
 * Takes one training batch of a run, runs forward and backward with dropout off, and
 * writes what a reference needs to redo the same computation:
 *   OUT/grads.safetensors   every parameter's gradient, under the parameter's name
 *   OUT/batch.json          the loss, the token ids and lengths, the checkpoint used
 * scripts/parity.py reads these with the checkpoint's weights and compares. */
#include "train/grad_dump.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/corpus.h"
#include "run/checkpoint.h"
#include "run/run.h"
#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/staged_dir.h"
#include "util/text.h"

/* OUT/batch.json: the checkpoint used, the loss, the model switches the reference
 * needs, and the batch's token ids and lengths. */
static int write_batch_json(const char *path, const Run *r, const ModelBatch *mb, double loss, double nll, int tokens) {
    const ModelConfig *mc = &r->model.cfg;
    json_t *o = json_object();
    json_put(o, "checkpoint", json_utf8(r->weights));
    json_put(o, "loss", json_fmt("%.9g", loss));
    json_put(o, "nll_sum", json_fmt("%.9g", nll));
    json_put(o, "tokens", json_integer(tokens));
    json_put(o, "B", json_integer(mb->B));
    json_put(o, "S", json_integer(mb->S));
    json_put(o, "T", json_integer(mb->T));
    json_put(o, "label_smoothing", json_fmt("%.9g", mc->label_smoothing));
    json_put(o, "heads", json_integer(mc->heads));
    json_put(o, "pre_norm", json_integer(mc->pre_norm));
    json_put(o, "tie_embeddings", json_integer(mc->tie_embeddings));
    json_put(o, "src_len", json_ints(mb->src_len, mb->B));
    json_put(o, "tgt_len", json_ints(mb->tgt_len, mb->B));
    json_put(o, "src", json_ints(mb->src, mb->B * mb->S));
    json_put(o, "tgt_in", json_ints(mb->tgt_in, mb->B * mb->T));
    json_put(o, "tgt_out", json_ints(mb->tgt_out, mb->B * mb->T));
    json_put(o, "end", json_true());
    StrBuf sb = {0};
    char *text = json_dumps(o, JSON_WRITE_FLAGS);
    json_decref(o);
    sb_printf(&sb, "%s\n", text);
    free(text);
    int rc = write_file_atomic(path, sb.buf, sb.len);
    sb_free(&sb);
    return rc;
}

typedef struct {
    const Run *r;
    const ModelBatch *mb;
    double loss, nll;
    int tokens;
} Dump;

/* The gradients, written as if they were weights (same names, same layout), and the batch. */
static int write_dump(const char *dir, void *arg) {
    const Dump *d = arg;
    Model view = d->r->model;
    view.params = d->r->model.grads;
    CkptMeta meta = {.step = d->r->meta.step,
                     .valid_loss = NAN,
                     .best_valid_loss = NAN,
                     .valid_bleu = NAN,
                     .best_valid_bleu = NAN,
                     .config = d->r->meta.config};
    char path[STAGED_DIR_MAX + 256];
    snprintf(path, sizeof path, "%s/grads.safetensors", dir);
    if (ckpt_save(path, &view, NULL, &meta) != 0) return -1;
    snprintf(path, sizeof path, "%s/batch.json", dir);
    return write_batch_json(path, d->r, d->mb, d->loss, d->nll, d->tokens);
}

/* a dump's own files: a new dump replaces them, and leaves anything else in --out */
static int dump_file(const char *name) {
    return strcmp(name, "grads.safetensors") == 0 || strcmp(name, "batch.json") == 0;
}

int grad_dump_write(const char *run_path_arg, const char *out_dir, int batch_index) {
    if (staged_dir_usable(out_dir, "--out") != 0) return -1; /* before the work, not after it */
    Run r;
    if (run_open(&r, run_path_arg) != 0) return -1;
    const Config *cfg = &r.cfg;
    Corpus c;
    if (corpus_read(&c, cfg->data.train.src, cfg->data.train.tgt, cfg->data.tokenizer, cfg->data.max_len) != 0) {
        run_close(&r);
        return -1;
    }
    corpus_encode(&c, cfg->data.tokenizer, &r.src_vocab, &r.tgt_vocab, cfg->data.max_len);
    Batcher b;
    batcher_init(&b, &c, cfg->train.batch_tokens, (uint64_t)cfg->seed, 1);
    int rc = 0;
    if (batch_index < 0 || batch_index >= b.n_batches) {
        rc = err_set("--batch %d: the run has batches 0..%d", batch_index, b.n_batches - 1);
        goto done;
    }
    ModelBatch mb;
    batcher_get(&b, batch_index, &mb);
    Model *m = &r.model;
    model_reserve(m, model_arena_floats(m, mb.B, mb.S, mb.T));
    model_zero_grad(m);
    /* the passes a training step runs (packed rows, the classifier's backward fused into
     * its forward), dropout off so that a reference can match them */
    m->cfg.dropout = 0.0f;
    m->loss_tokens = 0;
    double loss = model_forward_backward(m, &mb, 0, 0);
    double nll = m->nll_sum;
    int tokens = m->n_tokens;
    /* both files or neither: a full disk leaves no gradients without their batch */
    Dump d = {&r, &mb, loss, nll, tokens};
    rc = staged_dir_write(out_dir, "--out", write_dump, &d, dump_file);
done:
    batcher_free(&b);
    corpus_free(&c);
    run_close(&r);
    return rc;
}
