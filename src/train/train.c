/* train: see train.h. */
#define _POSIX_C_SOURCE 200809L
#include "train/train.h"

#include <cblas.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/checkpoint.h"
#include "data/corpus.h"
#include "train/plot.h"
#include "nn/profile.h"
#include "train/run.h"
#include "util.h"

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

/* Everything a training run holds; the Run carries config and vocabularies. */
typedef struct {
    Run run;
    Corpus train, valid;
    int has_valid;
    Model m;
    Adam adam;
    Batcher tb, vb;
    Workers *workers;
    TrainStep ts;
    int64_t step; /* steps done */
    double last_valid, best_valid;
    int64_t last_valid_step;
    uint64_t data_hash;
    FILE *metrics;
} Trainer;

double train_step(TrainStep *t, int64_t step, int *tokens, double *lr) {
    ModelBatch b;
    *tokens = batcher_next(t->batches, &b);
    *lr = lr_at(&t->sched, step);
    return workers_step(t->workers, &b, t->seed, (uint64_t)step, t->clip_norm, *lr);
}

Workers *train_workers(Model *m, Adam *adam, int threads, const Batcher *b, size_t extra_floats) {
    Workers *w = workers_start(m, adam, threads);
    if (!w) return NULL;
    size_t need = 0;
    for (int k = 0; k < b->n_batches; k++) {
        size_t n = workers_arena_floats(w, b->batches[k].count, b->batches[k].S, b->batches[k].T);
        if (n > need) need = n;
    }
    workers_reserve(w, need);
    model_reserve(m, need > extra_floats ? need : extra_floats);
    return w;
}

/* ---- data ---------------------------------------------------------------------------- */

static int read_split(Corpus *c, const PathPair *p, const Config *cfg, const char *what) {
    if (corpus_read(c, p->src, p->tgt, cfg->data.tokenizer, cfg->data.max_len) != 0) return -1;
    printf("%s: %d pairs from %d lines", what, c->n, c->lines);
    if (c->dropped_empty || c->dropped_long)
        printf(" (skipped %d with an empty side, %d longer than max_len %d)", c->dropped_empty, c->dropped_long,
               cfg->data.max_len);
    printf("\n");
    return 0;
}

/* What the batches are made of: a resume must see exactly the same training data. */
static uint64_t corpus_hash(const Corpus *c) {
    uint64_t h = (uint64_t)c->n;
    for (int i = 0; i < c->n; i++) {
        h = hash64(h, checksum64(c->src[i].ids, sizeof(int) * (size_t)c->src[i].len));
        h = hash64(h, checksum64(c->tgt[i].ids, sizeof(int) * (size_t)c->tgt[i].len));
    }
    return h;
}

/* Reads the corpora; builds vocabularies when the run has none yet; encodes. */
static int load_data(Trainer *t, int build) {
    const Config *cfg = &t->run.cfg;
    if (read_split(&t->train, &cfg->data.train, cfg, "train") != 0) return -1;
    t->has_valid = cfg->data.valid.src[0] != '\0';
    if (t->has_valid && read_split(&t->valid, &cfg->data.valid, cfg, "valid") != 0) return -1;
    if (build)
        corpus_build_vocabs(&t->train, cfg->data.tokenizer, cfg->data.vocab_size, cfg->data.min_freq,
                            cfg->data.shared_vocab, &t->run.src_vocab, &t->run.tgt_vocab);
    printf("vocab: %d source, %d target tokens (%s)\n", t->run.src_vocab.size, t->run.tgt_vocab.size,
           cfg->data.shared_vocab ? "shared" : "separate");
    corpus_encode(&t->train, cfg->data.tokenizer, &t->run.src_vocab, &t->run.tgt_vocab);
    if (t->has_valid) corpus_encode(&t->valid, cfg->data.tokenizer, &t->run.src_vocab, &t->run.tgt_vocab);
    t->data_hash = corpus_hash(&t->train);
    return 0;
}

/* ---- set-up and tear-down ----------------------------------------------------------------- */

static size_t arena_need(const Model *m, const Batcher *b, size_t need) {
    for (int k = 0; k < b->n_batches; k++) {
        size_t n = model_arena_floats(m, b->batches[k].count, b->batches[k].S, b->batches[k].T);
        if (n > need) need = n;
    }
    return need;
}

/* Model, optimizer, batches, arena: everything but the weights' values. */
static int setup(Trainer *t) {
    const Config *cfg = &t->run.cfg;
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    printf("openblas: %s kernels%s; %d threads, each running its share of a batch's rows with one OpenBLAS thread\n",
           openblas_get_corename(), coretype ? " (OPENBLAS_CORETYPE set by the user)" : "", cfg->train.threads);
    ModelConfig mc = run_model_config(cfg, t->run.src_vocab.size, t->run.tgt_vocab.size);
    if (model_init(&t->m, &mc) != 0) return err_set("%s: %s", cfg->source, err_msg());
    model_init_weights(&t->m, (uint64_t)cfg->seed);
    batcher_init(&t->tb, &t->train, cfg->train.batch_tokens, (uint64_t)cfg->seed, 1);
    if (t->has_valid) batcher_init(&t->vb, &t->valid, cfg->train.batch_tokens, 0, 0);
    adam_init(&t->adam, t->m.n_params, cfg->train.adam.beta1, cfg->train.adam.beta2, cfg->train.adam.eps,
              cfg->train.adam.weight_decay);
    t->workers = train_workers(&t->m, &t->adam, cfg->train.threads, &t->tb, t->has_valid ? arena_need(&t->m, &t->vb, 0) : 0);
    if (!t->workers) return -1;
    t->ts = (TrainStep){t->workers, &t->tb,
                        {cfg->train.lr.schedule, cfg->train.lr.factor, cfg->train.lr.warmup, cfg->model.d_model,
                         cfg->train.lr.value},
                        cfg->train.clip_norm, (uint64_t)cfg->seed};
    t->best_valid = t->last_valid = NAN;
    t->last_valid_step = -1;
    printf("model: %.2fM parameters, d_model %d, %d heads, %d+%d layers, %s-LN; %d batches per epoch; "
           "activations %.1f MiB\n",
           (double)t->m.n_params / 1e6, mc.d_model, mc.heads, mc.encoder_layers, mc.decoder_layers,
           mc.pre_norm ? "pre" : "post", t->tb.n_batches, (double)t->m.arena_floats * 4 / (1 << 20));
    return 0;
}

static void trainer_free(Trainer *t) {
    if (t->metrics) fclose(t->metrics);
    workers_stop(t->workers);
    adam_free(&t->adam);
    batcher_free(&t->tb);
    if (t->has_valid) batcher_free(&t->vb);
    model_free(&t->m);
    corpus_free(&t->train), corpus_free(&t->valid);
    run_close(&t->run);
}

/* ---- the loop ------------------------------------------------------------------------ */

/* Plain negative log-likelihood per target token over the whole validation set. */
static double validate(Trainer *t) {
    double nll = 0.0;
    long tokens = 0;
    for (int k = 0; k < t->vb.n_batches; k++) {
        ModelBatch b;
        batcher_get(&t->vb, k, &b);
        model_forward(&t->m, &b, 0, 0, 0);
        nll += t->m.nll_sum;
        tokens += t->m.n_tokens;
    }
    t->last_valid = tokens ? nll / (double)tokens : 0.0;
    t->last_valid_step = t->step;
    return t->last_valid;
}

/* Writes step-N, marks it best when validation improved, rotates the old ones. */
static int checkpoint(Trainer *t) {
    const Config *cfg = &t->run.cfg;
    if (t->has_valid && t->last_valid_step != t->step) validate(t);
    int improved = t->has_valid && (isnan(t->best_valid) || t->last_valid < t->best_valid);
    if (improved) t->best_valid = t->last_valid;
    StrBuf config_text = {0};
    char path[CONFIG_PATH_MAX + 64];
    run_path(path, sizeof path, cfg->run_dir, "config.yaml");
    size_t len;
    char *text = read_file(path, &len);
    if (!text) return -1;
    sb_append(&config_text, text, len);
    free(text);
    CkptMeta meta = {.step = t->step, .epoch = t->tb.epoch, .batch_pos = t->tb.pos, .seed = cfg->seed,
                     .threads = cfg->train.threads, .valid_loss = t->last_valid_step == t->step ? t->last_valid : NAN,
                     .best_valid_loss = t->best_valid, .vocab_hash = run_vocab_hash(&t->run.src_vocab, &t->run.tgt_vocab),
                     .data_hash = t->data_hash, .config = config_text.buf};
    run_step_checkpoint(path, sizeof path, cfg->run_dir, t->step);
    int rc = ckpt_save(path, &t->m, &t->adam, &meta);
    sb_free(&config_text);
    if (rc != 0) return -1;
    if (improved && run_mark_best(cfg->run_dir, path) != 0) return -1;
    run_rotate_checkpoints(cfg->run_dir, cfg->train.keep_checkpoints);
    return 0;
}

/* curves.svg beside metrics.jsonl: a picture is only ever a convenience, so a failure
 * to draw it is reported and training goes on */
static void redraw_curves(Trainer *t) {
    char m[CONFIG_PATH_MAX + 32], s[CONFIG_PATH_MAX + 32];
    run_path(m, sizeof m, t->run.cfg.run_dir, "metrics.jsonl");
    if (plot_metrics(m, run_path(s, sizeof s, t->run.cfg.run_dir, "curves.svg")) != 0)
        fprintf(stderr, "qkv: warning: %s\n", err_msg());
}

static void format_duration(char *buf, size_t n, double s) {
    if (s < 0 || !isfinite(s)) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

static int loop(Trainer *t) {
    const Config *cfg = &t->run.cfg;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int tty = isatty(STDOUT_FILENO), steps = cfg->train.steps;
    int64_t first = t->step + 1;
    double t0 = now_seconds(), t_log = t0, t_draw = 0, loss_acc = 0;
    long tok_acc = 0, loss_n = 0;
    while (t->step < steps && !stop_signal) {
        int tokens;
        double lr, loss = train_step(&t->ts, ++t->step, &tokens, &lr);
        int64_t step = t->step;
        if (!isfinite(loss)) {
            fprintf(stderr, "%sqkv: loss is %g at step %lld: training diverged (lower the learning rate)\n",
                    tty ? "\n" : "", loss, (long long)step);
            return 1;
        }
        loss_acc += loss, loss_n++, tok_acc += tokens;
        double now = now_seconds(), elapsed = now - t0;
        int log_now = step % cfg->train.log_every == 0 || step == steps;
        int valid_now = t->has_valid && (step % cfg->train.valid_every == 0 || step == steps);
        if (tty && (now - t_draw > 0.1 || log_now)) {
            char eta[32];
            format_duration(eta, sizeof eta, elapsed / (double)(step - first + 1) * (double)(steps - step));
            printf("\r\033[Kstep %lld/%d  loss %.4f  %.0f tok/s  lr %.2e  ETA %s", (long long)step, steps, loss,
                   tok_acc / fmax(now - t_log, 1e-9), lr, eta);
            fflush(stdout);
            t_draw = now;
        }
        if (log_now || valid_now) {
            double tps = tok_acc / fmax(now - t_log, 1e-9), mean = loss_acc / (double)loss_n;
            fprintf(t->metrics, "{\"step\": %lld, \"loss\": %.6f, \"lr\": %.6e, \"tokens_per_s\": %.1f, \"elapsed_s\": %.3f",
                    (long long)step, mean, lr, tps, elapsed);
            char vbuf[64] = "";
            if (valid_now) {
                double vl = validate(t);
                fprintf(t->metrics, ", \"valid_loss\": %.6f, \"valid_ppl\": %.4f", vl, exp(vl));
                snprintf(vbuf, sizeof vbuf, "  valid %.4f (ppl %.2f)", vl, exp(vl));
            }
            fprintf(t->metrics, "}\n");
            fflush(t->metrics);
            if (valid_now || step == steps) redraw_curves(t);
            if (tty) printf("\r\033[K");
            if (!tty || valid_now || step == steps)
                printf("step %lld/%d  loss %.4f  %.0f tok/s  lr %.2e  %.1fs%s\n", (long long)step, steps, mean, tps, lr,
                       elapsed, vbuf);
            fflush(stdout);
            loss_acc = 0, loss_n = 0, tok_acc = 0;
            t_log = now_seconds();
        }
        if (step % cfg->train.checkpoint_every == 0 || step == steps || stop_signal) {
            if (checkpoint(t) != 0) {
                fprintf(stderr, "%sqkv: %s\nqkv: stopping: training cannot go on without checkpoints\n",
                        tty ? "\n" : "", err_msg());
                return 1;
            }
        }
    }
    if (tty) printf("\r\033[K");
    if (ferror(t->metrics)) {
        fprintf(stderr, "qkv: %s/metrics.jsonl: write failed\n", cfg->run_dir);
        return 1;
    }
    char last[CONFIG_PATH_MAX + 64];
    run_step_checkpoint(last, sizeof last, cfg->run_dir, t->step);
    if (stop_signal) {
        printf("stopped by signal %d after step %lld; checkpoint %s\nresume with: qkv resume %s\n", (int)stop_signal,
               (long long)t->step, last, cfg->run_dir);
    } else {
        printf("done: step %lld of %d in %.1fs; checkpoint %s\n", (long long)t->step, steps, now_seconds() - t0, last);
    }
    return 0;
}

/* ---- the two commands ------------------------------------------------------------------- */

/* The end of both commands: on success run the loop (metrics opened with `mode`), on
 * failure report; either way free everything. Returns the exit status. */
static int finish(Trainer *t, int rc, const char *mode) {
    char p[CONFIG_PATH_MAX + 32];
    if (rc == 0) {
        t->metrics = fopen(run_path(p, sizeof p, t->run.cfg.run_dir, "metrics.jsonl"), mode);
        if (t->metrics) rc = loop(t);
        else rc = 1, err_set("%s: cannot open for writing", p);
    }
    if (rc != 0 && !t->metrics) fprintf(stderr, "qkv: %s\n", err_msg());
    trainer_free(t);
    return rc;
}

int train_main(Config *cfg, int force) {
    if (cfg->data.tokenizer == TOKENIZER_BPE) {
        fprintf(stderr, "qkv: %s: data.tokenizer: 'bpe' is not implemented yet; use word or char\n", cfg->source);
        return 2;
    }
    Trainer t = {0};
    t.run.cfg = *cfg;
    snprintf(t.run.dir, sizeof t.run.dir, "%s", cfg->run_dir);
    char p[CONFIG_PATH_MAX + 32];
    struct stat st;
    int rc = 2;
    if (!force && stat(run_path(p, sizeof p, cfg->run_dir, "config.yaml"), &st) == 0) {
        err_set("%s: already holds a run; resume it with 'qkv resume %s', or pass --force to start over", cfg->run_dir,
                cfg->run_dir);
        goto fail;
    }
    if (make_dirs(cfg->run_dir) != 0 || load_data(&t, 1) != 0) goto fail;
    rc = 1;
    run_clear_checkpoints(cfg->run_dir);
    if (make_dirs(run_path(p, sizeof p, cfg->run_dir, "ckpt")) != 0 ||
        config_write(cfg, run_path(p, sizeof p, cfg->run_dir, "config.yaml")) != 0 ||
        vocab_save(&t.run.src_vocab, run_path(p, sizeof p, cfg->run_dir, "src.vocab")) != 0 ||
        vocab_save(&t.run.tgt_vocab, run_path(p, sizeof p, cfg->run_dir, "tgt.vocab")) != 0)
        goto fail;
    if (setup(&t) != 0) {
        rc = 2;
        goto fail;
    }
    return finish(&t, 0, "w");
fail:
    return finish(&t, rc, NULL);
}

int resume_main(const char *run_dir, int steps) {
    Trainer t = {0};
    int rc = 2;
    char ckpt[CONFIG_PATH_MAX + 64], p[CONFIG_PATH_MAX + 32];
    if (run_load_config_and_vocab(&t.run, run_dir) != 0) goto fail;
    Config *cfg = &t.run.cfg;
    /* the run directory given on the command line wins over the one recorded */
    snprintf(cfg->run_dir, sizeof cfg->run_dir, "%s", run_dir);
    run_rotate_checkpoints(run_dir, 1 << 30); /* only sweeps stale .tmp files of a killed run */
    if (run_latest_checkpoint(run_dir, ckpt, sizeof ckpt) != 0) goto fail;
    if (load_data(&t, 0) != 0 || setup(&t) != 0) goto fail;
    CkptFile f;
    if (ckpt_open(&f, ckpt) != 0) goto fail;
    /* the run's own checks first: they say more than a shape mismatch would */
    int ok = run_check_checkpoint(&t.run, ckpt, &f.meta) == 0 && ckpt_read(&f, &t.m, &t.adam) == 0;
    CkptMeta meta = f.meta;
    f.meta.config = NULL;
    ckpt_close(&f);
    if (ok && meta.data_hash != t.data_hash)
        ok = 0, err_set("%s: the training data differs from what this checkpoint was trained on", ckpt);
    if (ok && (meta.batch_pos < 0 || meta.batch_pos > t.tb.n_batches))
        ok = 0, err_set("%s: data cursor %d is outside the %d batches of an epoch", ckpt, meta.batch_pos, t.tb.n_batches);
    if (!ok) {
        ckpt_meta_free(&meta);
        goto fail;
    }
    if (meta.threads != cfg->train.threads)
        fprintf(stderr, "qkv: warning: trained with %d threads, resuming with %d: results will not be bit-identical\n",
                meta.threads, cfg->train.threads);
    t.step = meta.step;
    t.best_valid = meta.best_valid_loss;
    batcher_seek(&t.tb, meta.epoch, meta.batch_pos);
    ckpt_meta_free(&meta);
    rc = 1;
    if (steps > 0 && steps != cfg->train.steps) {
        cfg->train.steps = steps;
        if (config_write(cfg, run_path(p, sizeof p, run_dir, "config.yaml")) != 0) goto fail;
    }
    printf("resuming %s from %s (step %lld of %d)\n", run_dir, ckpt, (long long)t.step, cfg->train.steps);
    if (t.step >= cfg->train.steps) {
        printf("already at step %lld; nothing to do (pass --steps N to train longer)\n", (long long)t.step);
        trainer_free(&t);
        return 0;
    }
    return finish(&t, 0, "a");
fail:
    return finish(&t, rc, NULL);
}
