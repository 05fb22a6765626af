/* trainer: see trainer.h. */
#define _POSIX_C_SOURCE 200809L
#include "train/trainer.h"

#include "data/spm.h"
#include "run/files.h"
#include "util/atomic_file.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/rng.h"

#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "run/average.h"
#include "run/checkpoint.h"
#include "run/curves.h"
#include "train/dist.h"
#include "util/json.h"

/* Set by the handler on whichever thread the signal lands (a worker's, OpenBLAS's), read
 * by the main thread before each step: a lock-free atomic, which a handler may write. */
static atomic_int stop_signal;
/* Stop requests of rank 0's own, not a signal's: its metrics.jsonl could not be written;
 * train.minutes is spent (the run is done, not stopped). */
enum { STOP_METRICS_FAILED = -1, STOP_BUDGET = -2, STOP_COOLDOWN = -3 };
/* STOP_COOLDOWN stops nothing: rank 0's clock, carried to every rank by the step as a stop
 * request is, says the cooldown begins after it (train.lr.cooldown under train.minutes) */
static void on_signal(int sig) { atomic_store(&stop_signal, sig); }

double train_step(TrainStep *t, int64_t step, int *tokens, double *lr, int *stop) {
    ModelBatch b;
    *tokens = batcher_next(t->batches, &b);
    *lr = lr_at(&t->sched, step);
    t->batch = b;
    return workers_step(t->workers, &b, t->seed, (uint64_t)step, t->clip_norm, *lr, stop);
}

Workers *train_workers(Model *m, Adam *adam, int threads, int pass_tokens, const Batcher *b, size_t extra_floats) {
    Workers *w = workers_start(m, adam, threads, pass_tokens);
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

int trainer_read(Trainer *t, int valid) {
    const Config *cfg = &t->run.cfg;
    const PathPair *p = valid ? &cfg->data.valid : &cfg->data.train;
    if (valid) t->has_valid = 1;
    return corpus_read(valid ? &t->valid : &t->train, p->src, p->tgt, cfg->data.tokenizer, cfg->data.max_len);
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

/* A subword model for one side: the file data.spm_model names, else one trained on
 * the text (both sides' lines for a shared model). */
/* The pieces SentencePiece says a text gives at most, from its refusal of more ("Vocabulary
 * size too high (8000). Please set it to a value <= 375."), or 0 when it said something else. */
static int most_pieces(const char *msg) {
    static const char said[] = "Please set it to a value <= ";
    const char *p = strstr(msg, said);
    int most = p ? atoi(p + sizeof said - 1) : 0;
    return most > VOCAB_N_SPECIAL ? most : 0;
}

static int subword_vocab(Trainer *t, const char *model_path, char **a, int na, char **b, int nb, Vocab *v,
                         int *capped) {
    const Config *cfg = &t->run.cfg;
    if (model_path[0]) {
        size_t len;
        char *bytes = read_file_max(model_path, READ_FILE_SMALL, &len);
        if (!bytes) return -1;
        int rc = vocab_from_spm(v, bytes, len, model_path);
        free(bytes);
        return rc;
    }
    const char **lines = xmalloc(sizeof(char *) * (size_t)(na + nb + 1));
    for (int i = 0; i < na; i++) lines[i] = a[i];
    for (int i = 0; i < nb; i++) lines[na + i] = b[i];
    char *bytes;
    size_t len;
    const char *kind = cfg->data.tokenizer == TOKENIZER_BPE ? "bpe" : "unigram";
    /* a size the text cannot give is cut to the most it gives, said by the command: a first
     * config's vocab_size is a guess. SentencePiece's unigram trainer names a bound it then
     * refuses again (375, then 374): past the first, each try leaves a twentieth of room */
    int size = cfg->data.vocab_size, rc;
    for (int tries = 0; (rc = spm_train(lines, (size_t)(na + nb), kind, size, &bytes, &len)) != 0 && tries < 8;
         tries++) {
        int most = most_pieces(err_msg());
        if (!most || most >= size) break;
        size = tries == 0 ? most : most - most / 20;
    }
    if (rc == 0 && size != cfg->data.vocab_size) *capped = size;
    free(lines);
    char where[CONFIG_PATH_MAX + 32];
    if (rc != 0)
        return err_set("%s: data.vocab_size %d: %s", config_where(cfg, "data.vocab_size", where, sizeof where),
                       cfg->data.vocab_size, err_msg());
    rc = vocab_from_spm(v, bytes, len, "the trained model");
    free(bytes);
    return rc;
}

static int build_subword_vocabs(Trainer *t) {
    const Config *cfg = &t->run.cfg;
    Corpus *c = &t->train;
    Vocab *src = &t->run.src_vocab, *tgt = &t->run.tgt_vocab;
    if (cfg->data.shared_vocab && !cfg->data.spm_model.src[0]) {
        if (subword_vocab(t, "", c->src_text, c->n, c->tgt_text, c->n, src, &t->vocab_capped[0]) != 0) return -1;
        return vocab_from_spm(tgt, src->spm_model, src->spm_len, "the trained model");
    }
    if (subword_vocab(t, cfg->data.spm_model.src, c->src_text, c->n, NULL, 0, src, &t->vocab_capped[0]) != 0) return -1;
    const char *tgt_model = cfg->data.shared_vocab ? cfg->data.spm_model.src : cfg->data.spm_model.tgt;
    return subword_vocab(t, tgt_model, c->tgt_text, c->n, NULL, 0, tgt, &t->vocab_capped[1]);
}

int trainer_encode(Trainer *t, int build) {
    const Config *cfg = &t->run.cfg;
    if (build && tokenizer_is_subword(cfg->data.tokenizer)) {
        if (build_subword_vocabs(t) != 0) return -1;
    } else if (build) {
        corpus_build_vocabs(&t->train, cfg->data.tokenizer, cfg->data.vocab_size, cfg->data.min_freq,
                            cfg->data.shared_vocab, &t->run.src_vocab, &t->run.tgt_vocab);
        /* a vocabulary of the special tokens alone would train, then not load back */
        const char *empty = t->run.src_vocab.size <= VOCAB_N_SPECIAL   ? "source"
                            : t->run.tgt_vocab.size <= VOCAB_N_SPECIAL ? "target"
                                                                       : NULL;
        if (empty)
            return err_set("%s: data.min_freq %d: no %s token occurs that often in %s", cfg->source, cfg->data.min_freq,
                           empty, empty[0] == 's' ? cfg->data.train.src : cfg->data.train.tgt);
    }
    corpus_encode(&t->train, cfg->data.tokenizer, &t->run.src_vocab, &t->run.tgt_vocab, cfg->data.max_len);
    if (t->has_valid)
        corpus_encode(&t->valid, cfg->data.tokenizer, &t->run.src_vocab, &t->run.tgt_vocab, cfg->data.max_len);
    /* subword lengths are known only now: a split can empty out here */
    const Corpus *empty = t->train.n == 0 ? &t->train : t->has_valid && t->valid.n == 0 ? &t->valid : NULL;
    if (empty)
        return err_set("%s: no usable sentence pairs left after encoding (%d lines, %d empty, %d over max_len %d)",
                       empty == &t->train ? cfg->data.train.src : cfg->data.valid.src, empty->lines,
                       empty->dropped_empty, empty->dropped_long, cfg->data.max_len);
    t->data_hash = corpus_hash(&t->train);
    return 0;
}

/* ---- ranks: what rank 0 read, every rank gets ---------------------------------------------- */

/* One vocabulary from rank 0: its token list, or its SentencePiece model's bytes. */
static int share_vocab(Vocab *v, int subword) {
    int lead = dist_rank() == 0;
    char *bytes = NULL;
    size_t len = 0;
    if (lead) {
        if (subword) bytes = v->spm_model, len = v->spm_len;
        else bytes = vocab_text(v), len = strlen(bytes);
    }
    int rc = dist_bcast_blob(&bytes, &len);
    if (rc == 0 && !lead) {
        rc = subword ? vocab_from_spm(v, bytes, len, "rank 0's tokenizer model")
                     : vocab_parse(v, bytes, len, "rank 0's vocabulary");
    }
    if (!lead || !subword) free(bytes);
    return rc;
}

int trainer_share_config(Trainer *t) {
    Run *r = &t->run;
    if (dist_size() == 1) return 0;
    char *text = NULL;
    size_t len = 0;
    if (dist_rank() == 0 && !(text = config_text(&r->cfg, r->dir))) return -1;
    if (dist_rank() == 0) len = strlen(text);
    int rc = dist_bcast_blob(&text, &len);
    if (rc == 0 && dist_rank() != 0) {
        config_defaults(&r->cfg);
        rc = config_parse(&r->cfg, text, len, "rank 0's config");
        snprintf(r->cfg.run_dir, sizeof r->cfg.run_dir, "%s", r->dir);
    }
    free(text);
    return rc;
}

int trainer_share_vocabs(Trainer *t) {
    Run *r = &t->run;
    if (dist_size() == 1) return 0;
    int subword = tokenizer_is_subword(r->cfg.data.tokenizer);
    return share_vocab(&r->src_vocab, subword) != 0 || share_vocab(&r->tgt_vocab, subword) != 0 ? -1 : 0;
}

/* The lowest rank whose value differs from rank 0's, or 0 when all agree. */
static int differing_rank(uint64_t mine, int *rank) {
    int n = dist_size();
    uint64_t *all = xmalloc(sizeof(uint64_t) * (size_t)n);
    int rc = dist_allgather_u64(mine, all);
    *rank = 0;
    for (int q = 1; rc == 0 && q < n && !*rank; q++)
        if (all[q] != all[0]) *rank = q;
    free(all);
    return rc;
}

int trainer_check_ranks(Trainer *t, int *bad_input) {
    *bad_input = 0;
    if (dist_size() == 1) return 0;
    char *text = config_text(&t->run.cfg, "the config");
    uint64_t h = text ? checksum64(text, strlen(text)) : 0;
    free(text);
    int q;
    if (differing_rank(h, &q) != 0) return -1;
    if (q) {
        *bad_input = 1;
        return err_set("rank %d was started with another config than rank 0 (another file or --set); "
                       "every rank must run the same",
                       q);
    }
    if (differing_rank(t->data_hash, &q) != 0) return -1;
    if (q) {
        *bad_input = 1;
        return err_set("%s: rank %d reads other training data than rank 0; every machine needs the same files",
                       t->run.cfg.data.train.src, q);
    }
    return 0;
}

/* ---- set-up and tear-down ----------------------------------------------------------------- */

/* Validation runs its batches in passes of train.pass_tokens too, on the main model: its
 * arena then needs no more than a training pass's. */
static size_t arena_need(const Model *m, const Batcher *b, int pass_tokens) {
    size_t need = 0;
    for (int k = 0; k < b->n_batches; k++) {
        const BatchSpec *s = &b->batches[k];
        size_t n = model_arena_floats(m, pass_rows(pass_tokens, s->count, s->S, s->T), s->S, s->T);
        if (n > need) need = n;
    }
    return need;
}

int trainer_setup(Trainer *t) {
    const Config *cfg = &t->run.cfg;
    ModelConfig mc = run_model_config(cfg, t->run.src_vocab.size, t->run.tgt_vocab.size);
    if (model_init(&t->m, &mc) != 0) return err_status() == 1 ? -2 : err_set("%s: %s", cfg->source, err_msg());
    model_init_weights(&t->m, (uint64_t)cfg->seed);
    batcher_init(&t->tb, &t->train, cfg->train.batch_tokens, (uint64_t)cfg->seed, 1);
    if (t->has_valid) batcher_init(&t->vb, &t->valid, cfg->train.batch_tokens, 0, 0);
    /* only rank 0 validates: the others' activations need only their shards' */
    adam_init(&t->adam, t->m.n_params, cfg->train.adam.beta1, cfg->train.adam.beta2, cfg->train.adam.eps,
              cfg->train.adam.weight_decay);
    int validates = t->has_valid && dist_rank() == 0;
    int pass = cfg->train.pass_tokens;
    t->workers = train_workers(&t->m, &t->adam, cfg->train.threads, pass, &t->tb,
                               validates ? arena_need(&t->m, &t->vb, pass) : 0);
    if (!t->workers) return -2;
    t->ts = (TrainStep){t->workers,
                        &t->tb,
                        {cfg->train.lr.schedule, cfg->train.lr.factor, cfg->train.lr.warmup, cfg->model.d_model,
                         cfg->train.lr.value, 0, 0}, /* the cooldown: trainer_run plans it */
                        cfg->train.clip_norm,
                        (uint64_t)cfg->seed,
                        {0}};
    t->best_valid = t->last_valid = NAN;
    t->best_bleu = t->last_bleu = NAN;
    t->last_valid_step = -1;
    return 0;
}

void trainer_free(Trainer *t) {
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

/* Plain negative log-likelihood per target token over the whole validation set, and
 * the BLEU of its greedy translations when train.valid_bleu asks (through the reporter,
 * which can decode). */
static double validate(Trainer *t, const TrainReporter *r) {
    double nll = 0.0;
    long tokens = 0;
    for (int k = 0; k < t->vb.n_batches; k++) {
        ModelBatch b;
        batcher_get(&t->vb, k, &b);
        int rows = pass_rows(t->run.cfg.train.pass_tokens, b.B, b.S, b.T);
        for (int first = 0; first < b.B; first += rows) {
            ModelBatch pass = batch_rows(&b, first, b.B - first < rows ? b.B - first : rows);
            model_forward(&t->m, &pass, 0, 0, 0);
            nll += t->m.nll_sum;
            tokens += t->m.n_tokens;
        }
    }
    t->last_valid = tokens ? nll / (double)tokens : 0.0;
    t->last_valid_step = t->step;
    t->last_bleu = t->run.cfg.train.valid_bleu && r->valid_bleu ? r->valid_bleu(r->ctx, &t->m) : NAN;
    return t->last_valid;
}

/* Whether this step's validation beats the best so far by train.best_by; both bests
 * are kept either way (the checkpoint records them, so a resume goes on exactly). */
static int improved_best(Trainer *t) {
    int loss_better = isnan(t->best_valid) || t->last_valid < t->best_valid;
    int bleu_better = !isnan(t->last_bleu) && (isnan(t->best_bleu) || t->last_bleu > t->best_bleu);
    if (loss_better) t->best_valid = t->last_valid;
    if (bleu_better) t->best_bleu = t->last_bleu;
    return t->run.cfg.train.best_by == BEST_BY_BLEU ? bleu_better : loss_better;
}

/* Writes step-N, marks it best when validation improved, rotates the old ones. Under
 * ranks every rank comes here at the same step: rank 0 gathers the moments, writes, and
 * tells the others whether it could, so all stop together when it could not. */
static int save_checkpoint(Trainer *t, const TrainReporter *r);
static int checkpoint(Trainer *t, const TrainReporter *r) {
    if (workers_gather_moments(t->workers) != 0) return -2;
    /* -3: this step's metrics could not be written; a checkpoint past them would keep
     * a resume from ever logging them */
    int rc = dist_rank() != 0 ? 0 : t->metrics_error[0] ? (err_set("%s", t->metrics_error), -3) : save_checkpoint(t, r);
    if (dist_size() > 1 && dist_bcast(&rc, sizeof rc) != 0) return -2;
    if (rc != 0 && dist_rank() != 0) err_set("rank 0 could not write %s", rc == -3 ? "metrics.jsonl" : "a checkpoint");
    return rc;
}

static int save_checkpoint(Trainer *t, const TrainReporter *r) {
    const Config *cfg = &t->run.cfg;
    if (t->has_valid && t->last_valid_step != t->step) validate(t, r);
    int improved = t->has_valid && improved_best(t);
    /* the config in use, not config.yaml as it is on disk now (edited or gone) */
    char *config = config_text(cfg, "the config"), path[CONFIG_PATH_MAX + 64];
    if (!config) return -1;
    CkptMeta meta = {.step = t->step,
                     .epoch = t->tb.epoch,
                     .batch_pos = t->tb.pos,
                     .seed = cfg->seed,
                     .threads = workers_shards(t->workers),
                     .valid_loss = t->last_valid_step == t->step ? t->last_valid : NAN,
                     .best_valid_loss = t->best_valid,
                     .valid_bleu = t->last_valid_step == t->step ? t->last_bleu : NAN,
                     .best_valid_bleu = t->best_bleu,
                     .elapsed_s = t->elapsed_before + now_seconds() - t->t0,
                     .cooldown_from = t->cooldown_from,
                     .vocab_hash = run_vocab_hash(&t->run.src_vocab, &t->run.tgt_vocab),
                     .data_hash = t->data_hash,
                     .config = config};
    run_step_checkpoint(path, sizeof path, cfg->run_dir, t->step);
    int rc = ckpt_save(path, &t->m, &t->adam, &meta);
    free(config);
    if (rc != 0) return -1;
    if (improved && run_mark_best(cfg->run_dir, path) != 0) return -1;
    run_rotate_checkpoints(cfg->run_dir, cfg->train.keep_checkpoints);
    /* derived from the files just kept, never trained on: a failure costs the average only */
    if (cfg->train.average_last > 0 && average_write(&t->run, cfg->train.average_last) != 0) r->warn(r->ctx, err_msg());
    return 0;
}

/* curves.svg beside metrics.jsonl: a picture is only ever a convenience, so a failure
 * to draw it is reported and training goes on */
static void redraw_curves(Trainer *t, const TrainReporter *r) {
    char m[CONFIG_PATH_MAX + 32], s[CONFIG_PATH_MAX + 32];
    run_path(m, sizeof m, t->run.cfg.run_dir, RUN_METRICS);
    if (curves_plot(m, run_path(s, sizeof s, t->run.cfg.run_dir, RUN_CURVES)) != 0) r->warn(r->ctx, err_msg());
}

/* One line of metrics.jsonl: {"step": .., "loss": .., "lr": .., "tokens_per_s": ..,
 * "elapsed_s": .., "epoch": ..[, "valid_loss": .., "valid_ppl": ..[, "valid_bleu": ..]]}.
 * New keys go last: readers that match the line's start keep working. */
static int write_metrics(const Trainer *t, const TrainProgress *p) {
    json_t *o = json_object();
    json_put(o, "step", json_integer(p->step));
    json_put(o, "loss", json_fmt("%.6f", p->loss));
    json_put(o, "lr", json_fmt("%.6e", p->lr));
    json_put(o, "tokens_per_s", json_fmt("%.1f", p->tokens_per_s));
    json_put(o, "elapsed_s", json_fmt("%.3f", p->elapsed_s));
    json_put(o, "epoch", json_fmt("%.4f", p->epoch));
    if (p->validated) {
        json_put(o, "valid_loss", json_fmt("%.6f", p->valid_loss));
        json_put(o, "valid_ppl", json_fmt("%.4f", exp(p->valid_loss)));
        json_put(o, "valid_bleu", json_fmt("%.2f", p->valid_bleu)); /* dropped when NAN */
    }
    char *line = xcheck(json_dumps(o, JSON_WRITE_FLAGS)), path[CONFIG_PATH_MAX + 32];
    json_decref(o);
    /* whole lines on disk, one write each: a kill leaves at most the last one cut (plot
     * skips it), a full disk none (the cut line is taken back) */
    int rc = append_line_open(t->metrics, run_path(path, sizeof path, t->run.cfg.run_dir, RUN_METRICS), line,
                              "write failed");
    free(line);
    return rc;
}

/* One step and what follows it: the reporter, metrics and validation at log steps, a
 * checkpoint when one is due. *acc holds the sums since the last log. */
typedef struct {
    double t0, t_log, loss;
    long tokens, n;
    int64_t first;
} LoopAcc;

/* The learning rate's cooldown as the config and the clock have set it (optim.h): none, the
 * last fraction of train.steps, or from the step the clock chose to its end. */
static void plan_cooldown(Trainer *t) {
    double f = t->run.cfg.train.lr.cooldown;
    LrSchedule *s = &t->ts.sched;
    s->cool_from = s->cool_to = 0;
    if (f <= 0) return;
    lr_cooldown_by_steps(s, f, t->run.cfg.train.steps);
    if (t->cooldown_from > 0 && t->cooldown_from < s->cool_from)
        s->cool_from = t->cooldown_from, s->cool_to = trainer_last_step(t);
}

int64_t trainer_last_step(const Trainer *t) {
    double f = t->run.cfg.train.lr.cooldown;
    int64_t steps = t->run.cfg.train.steps;
    if (f <= 0 || t->cooldown_from <= 0) return steps;
    int64_t end = lr_cooldown_end(t->cooldown_from, f);
    return end < steps ? end : steps;
}

/* Whether rank 0's clock begins the cooldown before this step: a time budget with
 * train.lr.cooldown F, (1 - F) of it spent, none begun yet, and the steps' own cooldown
 * (the last F of train.steps) not reached first. */
static int cooldown_due(const Trainer *t, double seconds) {
    const Config *c = &t->run.cfg;
    double f = c->train.lr.cooldown;
    if (f <= 0 || c->train.minutes <= 0 || t->cooldown_from > 0 || t->step < 1) return 0;
    if (t->step >= t->ts.sched.cool_from) return 0; /* plan_cooldown's, by the steps */
    return t->elapsed_before + seconds >= (1.0 - f) * c->train.minutes * 60.0;
}

static TrainEnd one_step(Trainer *t, const TrainReporter *r, LoopAcc *acc) {
    const Config *cfg = &t->run.cfg;
    int tokens, steps = (int)trainer_last_step(t);
    /* read once, before the step: under ranks the step tells every rank of any rank's
     * request, so all stop after the same step; a signal arriving later is seen after
     * the next step, never between this step's validation and its checkpoint */
    int stop = t->metrics_error[0] ? STOP_METRICS_FAILED : atomic_load(&stop_signal);
    /* the time budget is rank 0's clock, so every rank ends at the step it says */
    if (stop == 0 && dist_rank() == 0 && trainer_budget_spent(t, now_seconds() - acc->t0)) stop = STOP_BUDGET;
    if (stop == 0 && dist_rank() == 0 && cooldown_due(t, now_seconds() - acc->t0)) stop = STOP_COOLDOWN;
    double lr, loss = train_step(&t->ts, ++t->step, &tokens, &lr, &stop);
    int64_t step = t->step;
    int began = stop == STOP_COOLDOWN;
    if (began) {
        t->cooldown_from = step, stop = 0;
        plan_cooldown(t);
        steps = (int)trainer_last_step(t);
    }
    t->stopping = stop;
    if (workers_failed(t->workers)) return TRAIN_RANKS_FAILED;
    /* rank 0 could not log the last step: every rank stops here, no checkpoint past it */
    if (stop == STOP_METRICS_FAILED) {
        if (dist_rank() == 0) err_set("%s", t->metrics_error);
        else err_set("rank 0 could not write metrics.jsonl");
        t->stopping = 0; /* no signal's */
        return TRAIN_WRITE_FAILED;
    }
    if (!isfinite(loss)) {
        err_set("loss is %g at step %lld: training diverged (lower the learning rate)", loss, (long long)step);
        return TRAIN_DIVERGED;
    }
    acc->loss += loss, acc->n++, acc->tokens += tokens;
    double now = now_seconds(), elapsed = now - acc->t0;
    double eta = elapsed / (double)(step - acc->first + 1) * (double)(steps - step);
    if (cfg->train.minutes > 0) eta = fmin(eta, fmax(0.0, cfg->train.minutes * 60.0 - t->elapsed_before - elapsed));
    TrainProgress p = {.step = step,
                       .steps = steps,
                       .loss = loss,
                       .tokens_per_s = acc->tokens / fmax(now - acc->t_log, 1e-9),
                       .lr = lr,
                       .elapsed_s = t->elapsed_before + elapsed,
                       .epoch = (double)t->tb.epoch + (double)t->tb.pos / (double)t->tb.n_batches,
                       .eta_s = t->stopping ? 0.0 : eta,
                       .log_now = step % cfg->train.log_every == 0 || step == steps,
                       .valid_bleu = NAN,
                       .cooldown_began = began};
    /* a stop validates too: best.safetensors must know the last checkpoint, and the
     * metrics must show the validation it was judged by */
    int valid_step = step % cfg->train.valid_every == 0 || step == steps || t->stopping;
    int valid_now = t->has_valid && valid_step;
    /* rank 0 alone validates, watches and writes; the others go on to the next step and
     * wait there */
    int lead = dist_rank() == 0;
    if (lead) r->progress(r->ctx, &p);
    if (lead && (p.log_now || valid_now)) {
        p.loss = acc->loss / (double)acc->n;
        if (valid_now) p.validated = 1, p.valid_loss = validate(t, r), p.valid_bleu = t->last_bleu;
        /* a metrics.jsonl that misses records could not be mended by a resume past them:
         * the run stops (every rank, at the next step) before a checkpoint could follow */
        if (write_metrics(t, &p) != 0) snprintf(t->metrics_error, sizeof t->metrics_error, "%s", err_msg());
        if (!t->metrics_error[0] && (valid_now || step == steps)) redraw_curves(t, r);
        r->log(r->ctx, &p);
        acc->loss = 0, acc->n = 0, acc->tokens = 0;
        acc->t_log = now_seconds();
    }
    if (lead && valid_step && cfg->train.n_watch && r->watch) r->watch(r->ctx, &t->m, step);
    if (step % cfg->train.checkpoint_every == 0 || step == steps || t->stopping) {
        int rc = checkpoint(t, r);
        if (rc != 0) return rc == -2 ? TRAIN_RANKS_FAILED : rc == -3 ? TRAIN_WRITE_FAILED : TRAIN_CKPT_FAILED;
    }
    return TRAIN_DONE;
}

int trainer_budget_spent(const Trainer *t, double seconds) {
    return t->run.cfg.train.minutes > 0 && t->elapsed_before + seconds >= t->run.cfg.train.minutes * 60.0;
}

void trainer_catch_stop(int ranks) {
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* a request is polled between steps: nothing waits on EINTR (MPI's start-up least) */
    /* Under ranks, SIGINT and SIGTERM are the launcher ending the job (it kills what is
     * left soon after), so they are the command's; a stop that checkpoints is asked
     * with SIGUSR1, which mpirun passes on to every rank. */
    if (ranks > 1) {
        sigaction(SIGUSR1, &sa, NULL);
    } else {
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL); /* a closed terminal or a lost SSH session: stop with a checkpoint */
    }
    /* the log's reader gone (`qkv train c.yaml | head`, a tee killed by the same Ctrl-C)
     * takes the log, not the run: writes to it fail, and training goes on to its stop */
    signal(SIGPIPE, SIG_IGN);
}

TrainEnd trainer_run(Trainer *t, const TrainReporter *r) {
    trainer_catch_stop(dist_size());
    LoopAcc acc = {.first = t->step + 1};
    acc.t0 = acc.t_log = t->t0 = now_seconds();
    TrainEnd end = TRAIN_DONE;
    if (t->step == 0 && t->run.cfg.train.n_watch && r->watch && dist_rank() == 0)
        r->watch(r->ctx, &t->m, 0); /* before any learning */
    plan_cooldown(t);
    while (t->step < trainer_last_step(t) && !t->stopping && end == TRAIN_DONE) end = one_step(t, r, &acc);
    t->seconds = now_seconds() - acc.t0;
    /* the budget's stop ends the run as its last step would: done, not stopped */
    t->budget_spent = t->stopping == STOP_BUDGET;
    if (t->budget_spent) t->stopping = 0;
    t->stop_signal = t->stopping;
    if (end != TRAIN_DONE) return end;
    return t->stopping ? TRAIN_STOPPED : TRAIN_DONE;
}

/* metrics.jsonl (or samples.jsonl) as it stands at `step`: without the records of later
 * steps (logged after the checkpoint a resume goes on from, by a run then killed or stopped
 * by a full disk, which the resume logs again) and without a last line a kill cut short
 * (the next record would be glued to it). Rewritten atomically, and only when something
 * goes; a line that is not a record with a step is kept as it is. -1 with the error set. */
static int cut_records(const char *path, int64_t step) {
    struct stat st;
    if (stat(path, &st) != 0) return 0; /* none yet: nothing to cut */
    size_t len, kept = 0;
    char *text = read_file_max(path, CURVES_METRICS_MAX, &len);
    if (!text) return -1;
    for (size_t at = 0; at < len;) {
        char *nl = memchr(text + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (text + at)) + 1 : len - at;
        json_t *o = nl ? json_loadb(text + at, n - 1, 0, NULL) : NULL;
        json_t *s = json_object_get(o, "step");
        int keep = nl && !(json_is_integer(s) && json_integer_value(s) > step);
        json_decref(o);
        if (keep) memmove(text + kept, text + at, n), kept += n;
        at += n;
    }
    int rc = kept == len ? 0 : write_file_atomic(path, text, kept);
    free(text);
    return rc;
}

int trainer_open_metrics(Trainer *t, int append) {
    char p[CONFIG_PATH_MAX + 32];
    if (dist_rank() != 0) return 0;
    run_path(p, sizeof p, t->run.cfg.run_dir, RUN_METRICS);
    if (append && cut_records(p, t->step) != 0) return -1;
    /* the validations' samples the same: a run killed after a validation logs it again */
    if (append && cut_records(run_path(p, sizeof p, t->run.cfg.run_dir, RUN_SAMPLES), t->step) != 0) return -1;
    /* never blocks on a FIFO put there, and refuses anything but a regular file */
    t->metrics = fopen_regular(run_path(p, sizeof p, t->run.cfg.run_dir, RUN_METRICS), append ? "a" : "w",
                               "cannot open for writing");
    return t->metrics ? 0 : -1;
}

int trainer_restore(Trainer *t, const char *ckpt, char *bytes, size_t len, int *threads) {
    CkptFile f;
    if (ckpt_parse(&f, ckpt, bytes, len) != 0) return -1;
    /* the run's own checks first: they say more than a shape mismatch would */
    int ok = run_check_checkpoint(&t->run, ckpt, &f.meta) == 0 && ckpt_read(&f, &t->m, &t->adam) == 0;
    CkptMeta meta = ckpt_meta_take(&f);
    ckpt_close(&f);
    if (ok && meta.data_hash != t->data_hash)
        ok = 0, err_set("%s: the training data differs from what this checkpoint was trained on", ckpt);
    if (ok && (meta.batch_pos < 0 || meta.batch_pos > t->tb.n_batches))
        ok = 0,
        err_set("%s: data cursor %d is outside the %d batches of an epoch", ckpt, meta.batch_pos, t->tb.n_batches);
    if (ok) {
        *threads = meta.threads;
        t->step = meta.step;
        t->best_valid = meta.best_valid_loss;
        t->best_bleu = meta.best_valid_bleu;
        t->elapsed_before = meta.elapsed_s;
        t->cooldown_from = meta.cooldown_from;
        batcher_seek(&t->tb, meta.epoch, meta.batch_pos);
    }
    ckpt_meta_free(&meta);
    return ok ? 0 : -1;
}
