/* train: see train.h. */
#define _POSIX_C_SOURCE 200809L
#include "train.h"

#include <cblas.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "checkpoint.h"
#include "corpus.h"
#include "optim.h"
#include "run.h"
#include "util.h"

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

typedef struct {
    Corpus train, valid;
    int has_valid;
    Vocab src_vocab, tgt_vocab;
} TrainData;

static void free_data(TrainData *d) {
    corpus_free(&d->train), corpus_free(&d->valid);
    vocab_free(&d->src_vocab), vocab_free(&d->tgt_vocab);
}

static int read_split(Corpus *c, const PathPair *p, const Config *cfg, const char *what) {
    if (corpus_read(c, p->src, p->tgt, cfg->data.tokenizer, cfg->data.max_len) != 0) return -1;
    printf("%s: %d pairs from %d lines", what, c->n, c->lines);
    if (c->dropped_empty || c->dropped_long)
        printf(" (skipped %d with an empty side, %d longer than max_len %d)", c->dropped_empty, c->dropped_long,
               cfg->data.max_len);
    printf("\n");
    return 0;
}

/* Reads the corpora and builds the vocabularies from the training side. */
static int prepare_data(const Config *cfg, TrainData *d) {
    memset(d, 0, sizeof *d);
    if (read_split(&d->train, &cfg->data.train, cfg, "train") != 0) return -1;
    d->has_valid = cfg->data.valid.src[0] != '\0';
    if (d->has_valid && read_split(&d->valid, &cfg->data.valid, cfg, "valid") != 0) return -1;
    vocab_init(&d->src_vocab);
    vocab_init(&d->tgt_vocab);
    int tok = cfg->data.tokenizer;
    corpus_count(&d->train, 0, tok, &d->src_vocab);
    corpus_count(&d->train, 1, tok, cfg->data.shared_vocab ? &d->src_vocab : &d->tgt_vocab);
    vocab_prune(&d->src_vocab, cfg->data.vocab_size, cfg->data.min_freq);
    if (cfg->data.shared_vocab) {
        vocab_free(&d->tgt_vocab);
        vocab_init(&d->tgt_vocab);
        for (int i = VOCAB_N_SPECIAL; i < d->src_vocab.size; i++)
            vocab_count(&d->tgt_vocab, d->src_vocab.tokens[i], strlen(d->src_vocab.tokens[i]), 1);
    } else {
        vocab_prune(&d->tgt_vocab, cfg->data.vocab_size, cfg->data.min_freq);
    }
    printf("vocab: %d source, %d target tokens (%s)\n", d->src_vocab.size, d->tgt_vocab.size,
           cfg->data.shared_vocab ? "shared" : "separate");
    corpus_encode(&d->train, tok, &d->src_vocab, &d->tgt_vocab);
    if (d->has_valid) corpus_encode(&d->valid, tok, &d->src_vocab, &d->tgt_vocab);
    return 0;
}

double train_step(TrainStep *t, int64_t step, int *tokens, double *lr) {
    Model *m = t->model;
    ModelBatch b;
    *tokens = batcher_next(t->batches, &b);
    model_zero_grad(m);
    double loss = model_forward(m, &b, 1, t->seed, (uint64_t)step);
    model_backward(m, &b);
    clip_grad_norm(m->grads, m->n_params, t->clip_norm);
    *lr = lr_at(&t->sched, step);
    adam_step(t->adam, m->params, m->grads, m->tensors, m->n_tensors, *lr);
    return loss;
}

/* Plain negative log-likelihood per target token over the whole validation set. */
static double validate(Model *m, Batcher *vb) {
    double nll = 0.0;
    long tokens = 0;
    for (int k = 0; k < vb->n_batches; k++) {
        ModelBatch b;
        batcher_get(vb, k, &b);
        model_forward(m, &b, 0, 0, 0);
        nll += m->nll_sum;
        tokens += m->n_tokens;
    }
    return tokens ? nll / (double)tokens : 0.0;
}

static size_t arena_need(const Model *m, const Batcher *b, size_t need) {
    for (int k = 0; k < b->n_batches; k++) {
        size_t n = model_arena_floats(m, b->batches[k].count, b->batches[k].S, b->batches[k].T);
        if (n > need) need = n;
    }
    return need;
}

static void format_duration(char *buf, size_t n, double s) {
    if (s < 0 || !isfinite(s)) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

static int run_dir_ready(const Config *cfg, int force) {
    char p[CONFIG_PATH_MAX + 32];
    struct stat st;
    if (!force && stat(run_path(p, sizeof p, cfg->run_dir, "config.yaml"), &st) == 0)
        return err_set("%s: already holds a run; pass --force to start it over, or set another name", cfg->run_dir);
    return make_dirs(cfg->run_dir);
}

static int save_run_files(const Config *cfg, const TrainData *d) {
    char p[CONFIG_PATH_MAX + 32];
    if (config_write(cfg, run_path(p, sizeof p, cfg->run_dir, "config.yaml")) != 0) return -1;
    if (vocab_save(&d->src_vocab, run_path(p, sizeof p, cfg->run_dir, "src.vocab")) != 0) return -1;
    return vocab_save(&d->tgt_vocab, run_path(p, sizeof p, cfg->run_dir, "tgt.vocab"));
}

static int save_model(const Model *m, const Config *cfg, long step) {
    char p[CONFIG_PATH_MAX + 32], step_s[32];
    snprintf(step_s, sizeof step_s, "%ld", step);
    MetaEntry meta[] = {{"format", "qkv-weights-1"}, {"step", step_s}, {"name", cfg->name}};
    return ckpt_save_weights(m, run_path(p, sizeof p, cfg->run_dir, "model.safetensors"), meta, 3);
}

int train_main(Config *cfg, int force) {
    if (cfg->data.tokenizer == TOKENIZER_BPE) {
        fprintf(stderr, "qkv: %s: data.tokenizer: 'bpe' is not implemented yet; use word or char\n", cfg->source);
        return 2;
    }
    if (run_dir_ready(cfg, force) != 0) {
        fprintf(stderr, "qkv: %s\n", err_msg());
        return 2;
    }
    TrainData d;
    if (prepare_data(cfg, &d) != 0) {
        fprintf(stderr, "qkv: %s\n", err_msg());
        free_data(&d);
        return 2;
    }
    if (save_run_files(cfg, &d) != 0) {
        fprintf(stderr, "qkv: %s\n", err_msg());
        free_data(&d);
        return 1;
    }
    openblas_set_num_threads(cfg->train.threads);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    printf("openblas: %s kernels%s, %d threads\n", openblas_get_corename(),
           coretype ? " (OPENBLAS_CORETYPE set by the user)" : "", openblas_get_num_threads());

    Model m;
    ModelConfig mc = run_model_config(cfg, d.src_vocab.size, d.tgt_vocab.size);
    if (model_init(&m, &mc) != 0) {
        fprintf(stderr, "qkv: %s: %s\n", cfg->source, err_msg());
        free_data(&d);
        return 2;
    }
    model_init_weights(&m, (uint64_t)cfg->seed);
    Batcher tb, vb;
    batcher_init(&tb, &d.train, cfg->train.batch_tokens, (uint64_t)cfg->seed, 1);
    if (d.has_valid) batcher_init(&vb, &d.valid, cfg->train.batch_tokens, 0, 0);
    size_t need = arena_need(&m, &tb, 0);
    if (d.has_valid) need = arena_need(&m, &vb, need);
    model_reserve(&m, need);
    Adam adam;
    adam_init(&adam, m.n_params, cfg->train.adam.beta1, cfg->train.adam.beta2, cfg->train.adam.eps,
              cfg->train.adam.weight_decay);
    TrainStep ts = {&m, &adam, &tb,
                    {cfg->train.lr.schedule, cfg->train.lr.factor, cfg->train.lr.warmup, cfg->model.d_model,
                     cfg->train.lr.value},
                    cfg->train.clip_norm, (uint64_t)cfg->seed};
    printf("model: %.2fM parameters, d_model %d, %d heads, %d+%d layers, %s-LN; %d batches per epoch; "
           "activations %.1f MiB\n",
           (double)m.n_params / 1e6, mc.d_model, mc.heads, mc.encoder_layers, mc.decoder_layers,
           mc.pre_norm ? "pre" : "post", tb.n_batches, (double)m.arena_floats * 4 / (1 << 20));

    char mpath[CONFIG_PATH_MAX + 32];
    FILE *metrics = fopen(run_path(mpath, sizeof mpath, cfg->run_dir, "metrics.jsonl"), "w");
    if (!metrics) {
        fprintf(stderr, "qkv: %s: cannot write metrics\n", mpath);
        return 1;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int tty = isatty(STDOUT_FILENO);
    double t0 = now_seconds(), t_log = t0, t_draw = 0;
    double loss_acc = 0;
    long tok_acc = 0, loss_n = 0, step = 0;
    int steps = cfg->train.steps;
    for (step = 1; step <= steps && !stop_signal; step++) {
        int tokens;
        double lr, loss = train_step(&ts, step, &tokens, &lr);
        if (!isfinite(loss)) {
            fprintf(stderr, "\nqkv: loss is %g at step %ld: training diverged (lower the learning rate)\n", loss, step);
            fclose(metrics);
            return 1;
        }
        loss_acc += loss, loss_n++, tok_acc += tokens;
        double now = now_seconds(), elapsed = now - t0;
        int log_now = step % cfg->train.log_every == 0 || step == steps;
        int valid_now = d.has_valid && (step % cfg->train.valid_every == 0 || step == steps);
        if (tty && (now - t_draw > 0.1 || log_now)) {
            char eta[32];
            format_duration(eta, sizeof eta, elapsed / step * (steps - step));
            printf("\r\033[Kstep %ld/%d  loss %.4f  %.0f tok/s  lr %.2e  ETA %s", step, steps, loss,
                   tok_acc / fmax(now - t_log, 1e-9), lr, eta);
            fflush(stdout);
            t_draw = now;
        }
        if (log_now || valid_now) {
            double tps = tok_acc / fmax(now - t_log, 1e-9), mean = loss_acc / (double)loss_n;
            fprintf(metrics, "{\"step\": %ld, \"loss\": %.6f, \"lr\": %.6e, \"tokens_per_s\": %.1f, \"elapsed_s\": %.3f",
                    step, mean, lr, tps, elapsed);
            char vbuf[64] = "";
            if (valid_now) {
                double vl = validate(&m, &vb);
                fprintf(metrics, ", \"valid_loss\": %.6f, \"valid_ppl\": %.4f", vl, exp(vl));
                snprintf(vbuf, sizeof vbuf, "  valid %.4f (ppl %.2f)", vl, exp(vl));
            }
            fprintf(metrics, "}\n");
            fflush(metrics);
            if (tty) printf("\r\033[K");
            if (!tty || valid_now || step == steps)
                printf("step %ld/%d  loss %.4f  %.0f tok/s  lr %.2e  %.1fs%s\n", step, steps, mean, tps, lr, elapsed,
                       vbuf);
            fflush(stdout);
            loss_acc = 0, loss_n = 0, tok_acc = 0;
            t_log = now_seconds();
        }
    }
    step--;
    if (tty) printf("\r\033[K");
    int rc = 0;
    if (fclose(metrics) != 0) fprintf(stderr, "qkv: %s: write failed\n", mpath), rc = 1;
    if (save_model(&m, cfg, step) != 0) {
        fprintf(stderr, "qkv: %s\n", err_msg());
        rc = 1;
    } else if (stop_signal) {
        printf("stopped by signal %d after step %ld; weights saved to %s/model.safetensors\n", (int)stop_signal, step,
               cfg->run_dir);
    } else {
        printf("done: %ld steps in %.1fs; weights saved to %s/model.safetensors\n", step, now_seconds() - t0,
               cfg->run_dir);
    }
    adam_free(&adam);
    batcher_free(&tb);
    if (d.has_valid) batcher_free(&vb);
    model_free(&m);
    free_data(&d);
    return rc;
}
