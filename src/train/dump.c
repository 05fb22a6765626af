/* dump: `qkv grads`, the hook for checking qkv against another implementation.
 *
 * Takes one training batch of a run, runs forward and backward with dropout off, and
 * writes what a reference needs to redo the same computation:
 *   OUT/grads.safetensors   every parameter's gradient, under the parameter's name
 *   OUT/batch.json          the loss, the token ids and lengths, the checkpoint used
 * scripts/parity.py reads these with the checkpoint's weights and compares. */
#include "train/dump.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "data/batch.h"
#include "train/checkpoint.h"
#include "data/corpus.h"
#include "train/run.h"
#include "util.h"

static void put_ints(StrBuf *sb, const char *key, const int *v, int n) {
    sb_printf(sb, "  \"%s\": [", key);
    for (int i = 0; i < n; i++) sb_printf(sb, "%s%d", i ? ", " : "", v[i]);
    sb_printf(sb, "],\n");
}

int dump_grads(const char *run_path_arg, const char *out_dir, int batch_index) {
    Run r;
    if (run_open(&r, run_path_arg) != 0) return -1;
    const Config *cfg = &r.cfg;
    Corpus c;
    if (corpus_read(&c, cfg->data.train.src, cfg->data.train.tgt, cfg->data.tokenizer, cfg->data.max_len) != 0) {
        run_close(&r);
        return -1;
    }
    corpus_encode(&c, cfg->data.tokenizer, &r.src_vocab, &r.tgt_vocab);
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
    double loss = model_forward(m, &mb, 0, 0, 0);
    double nll = m->nll_sum;
    int tokens = m->n_tokens;
    model_backward(m, &mb);
    if (make_dirs(out_dir) != 0) {
        rc = -1;
        goto done;
    }
    /* the gradients, written as if they were weights: same names, same layout */
    Model view = *m;
    view.params = m->grads;
    CkptMeta meta = {.step = r.meta.step, .valid_loss = NAN, .best_valid_loss = NAN, .config = r.meta.config};
    char path[2048];
    snprintf(path, sizeof path, "%s/grads.safetensors", out_dir);
    if (ckpt_save(path, &view, NULL, &meta) != 0) {
        rc = -1;
        goto done;
    }
    StrBuf sb = {0};
    sb_printf(&sb, "{\n  \"checkpoint\": \"%s\",\n  \"loss\": %.9g,\n  \"nll_sum\": %.9g,\n  \"tokens\": %d,\n", r.weights,
              loss, nll, tokens);
    sb_printf(&sb, "  \"B\": %d, \"S\": %d, \"T\": %d,\n  \"label_smoothing\": %.9g,\n", mb.B, mb.S, mb.T,
              (double)m->cfg.label_smoothing);
    sb_printf(&sb, "  \"heads\": %d, \"pre_norm\": %d, \"tie_embeddings\": %d,\n", m->cfg.heads, m->cfg.pre_norm,
              m->cfg.tie_embeddings);
    put_ints(&sb, "src_len", mb.src_len, mb.B);
    put_ints(&sb, "tgt_len", mb.tgt_len, mb.B);
    put_ints(&sb, "src", mb.src, mb.B * mb.S);
    put_ints(&sb, "tgt_in", mb.tgt_in, mb.B * mb.T);
    put_ints(&sb, "tgt_out", mb.tgt_out, mb.B * mb.T);
    sb_printf(&sb, "  \"end\": true\n}\n");
    snprintf(path, sizeof path, "%s/batch.json", out_dir);
    rc = write_file_atomic(path, sb.buf, sb.len);
    sb_free(&sb);
done:
    batcher_free(&b);
    corpus_free(&c);
    run_close(&r);
    return rc;
}
