/* train: `qkv train CONFIG` (a new run) and `qkv resume RUN` (continue one).
 *
 * Drives the phases of a Trainer (train/trainer.h) and does all the printing: the data,
 * vocabulary and model summaries, the live progress line on a terminal, a line per log
 * step, warnings, and how the run ended. With train.valid_bleu it also decodes the
 * validation set for the loop (which may not call the decoding and scoring rooms) and
 * shows sample translations. */
#include <cblas.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention/watch.h"
#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/decode_options.h"
#include "cmdlib/options.h"
#include "config.h"
#include "decode/translator.h"
#include "explain/contrib.h"
#include "report/runpage.h"
#include "run/journal.h"
#include "run/run.h"
#include "score/sacrebleu.h"
#include "train/dist.h"
#include "train/parallel.h"
#include "train/trainer.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"

/* ---- what the user sees ------------------------------------------------------------ */

static void print_split(const char *what, const Corpus *c, int max_len) {
    printf("%s: %d pairs from %d lines", what, c->n, c->lines);
    if (c->dropped_empty || c->dropped_long)
        printf(" (skipped %d with an empty side, %d longer than max_len %d)", c->dropped_empty, c->dropped_long,
               max_len);
    printf("\n");
}

/* The verdict of every rank on a phase each ran, as an exit status. code is this
 * process' status (its error set when not 0). Of the ranks that failed, the lowest
 * prints its one line (naming itself when it is not rank 0), so a fault all share is
 * said once; every rank returns the same status. One process: cmd_fail(code). */
static int agree(int code) {
    int speak, status;
    if (dist_verdict(code, &speak, &status) != 0) return cmd_fail(1);
    if (speak && dist_rank() > 0) fprintf(stderr, "qkv: rank %d: %s\n", dist_rank(), err_msg());
    else if (speak) cmd_fail(status);
    return status;
}

static int read_corpora(Trainer *t) {
    const Config *cfg = &t->run.cfg;
    if (trainer_read(t, 0) != 0) return -1;
    if (cfg->data.valid.src[0] != '\0' && trainer_read(t, 1) != 0) return -1;
    return 0;
}

/* Encodes the corpora (building the vocabularies if build), printing what each holds.
 * -1 with the error set. */
static int encode_data(Trainer *t, int build) {
    const Config *cfg = &t->run.cfg;
    /* given models are used as they are (config_validate saw to it that a shared
     * vocabulary names one); only missing ones are trained */
    const char *src_model = cfg->data.spm_model.src, *tgt_model = cfg->data.spm_model.tgt;
    if (tokenizer_is_subword(cfg->data.tokenizer) && build && cfg->data.shared_vocab && src_model[0])
        printf("using the SentencePiece model %s for both sides\n", src_model);
    else if (tokenizer_is_subword(cfg->data.tokenizer) && build && src_model[0])
        printf("using the SentencePiece models %s (source) and %s (target)\n", src_model, tgt_model);
    else if (tokenizer_is_subword(cfg->data.tokenizer) && build)
        printf("training SentencePiece %s model%s of %d pieces on the training text\n",
               cfg->data.tokenizer == TOKENIZER_BPE ? "bpe" : "unigram", cfg->data.shared_vocab ? "" : "s",
               cfg->data.vocab_size);
    if (trainer_encode(t, build) != 0) return -1;
    print_split("train", &t->train, cfg->data.max_len);
    if (t->has_valid) print_split("valid", &t->valid, cfg->data.max_len);
    printf("vocab: %d source, %d target tokens (%s)\n", t->run.src_vocab.size, t->run.tgt_vocab.size,
           cfg->data.shared_vocab ? "shared" : "separate");
    for (int side = 0; side < 2; side++)
        if (t->vocab_capped[side])
            printf("note: data.vocab_size %d is more pieces than the %s text gives: its model has %d, about the most\n",
                   cfg->data.vocab_size,
                   side                     ? "target"
                   : cfg->data.shared_vocab ? "training"
                                            : "source",
                   t->vocab_capped[side]);
    return 0;
}

/* The data of every rank: read by each; the vocabularies built by rank 0 (build) or
 * taken from the run, and handed to the others, so every rank encodes with the same;
 * then a check that every rank holds the same config and data. Returns the exit status. */
static int read_data(Trainer *t, int build) {
    int lead = dist_rank() == 0, rc, bad;
    if ((rc = agree(read_corpora(t) != 0 ? 2 : 0))) return rc;
    if ((rc = agree(lead && encode_data(t, build) != 0 ? err_status() : 0))) return rc;
    if ((rc = agree(trainer_share_vocabs(t) != 0 ? 1 : 0))) return rc;
    if ((rc = agree(!lead && encode_data(t, 0) != 0 ? err_status() : 0))) return rc;
    return agree(trainer_check_ranks(t, &bad) != 0 ? (bad ? 2 : 1) : 0);
}

/* trainer_setup between its two summary lines; returns the exit status. */
static int setup(Trainer *t) {
    const Config *cfg = &t->run.cfg;
    int cpus = cpu_usable_count();
    int threads = cfg->train.threads;
    if (threads == 1) printf("openblas: %s kernels%s; 1 thread", openblas_get_corename(), kernels_note());
    else
        printf("openblas: %s kernels%s; %d threads, each running its share of a batch's rows with one OpenBLAS thread",
               openblas_get_corename(), kernels_note(), threads);
    /* each step meets at barriers: a thread waiting for a CPU holds every other one up */
    if (threads > cpus)
        printf("; only %d CPU%s to run them on, so each step waits for the threads the OS runs late "
               "(train.threads: %d is likely faster)",
               cpus, cpus == 1 ? "" : "s", cpus);
    printf("\n");
    if (dist_size() > 1)
        printf("mpi: %d ranks x %d threads: each batch in %d shards, gradients summed in shard order\n", dist_size(),
               cfg->train.threads, dist_size() * cfg->train.threads);
    int rc = trainer_setup(t);
    if (rc != 0) return rc == -2 ? 1 : 2;
    const ModelConfig *mc = &t->m.cfg;
    printf("model: %.2fM parameters, d_model %d, %d heads, %d+%d layers, %s-LN; %d batches per epoch; "
           "activations %.1f MiB\n",
           (double)t->m.n_params / 1e6, mc->d_model, mc->heads, mc->encoder_layers, mc->decoder_layers,
           mc->pre_norm ? "pre" : "post", t->tb.n_batches, (double)t->m.arena_floats * 4 / (1 << 20));
    if (t->has_valid)
        printf("best: ckpt/best.safetensors is the best by validation %s (train.best_by)\n",
               cfg->train.best_by == BEST_BY_BLEU ? "BLEU" : "loss");
    if (cfg->train.minutes > 0)
        printf("budget: %g minutes of training (train.minutes), at most %d steps: the run ends at the first step that "
               "starts past it\n",
               cfg->train.minutes, cfg->train.steps);
    double f = cfg->train.lr.cooldown;
    if (f > 0 && cfg->train.minutes > 0)
        printf("cooldown: at %.3g of the %g minutes the learning rate begins to fall to 0, over as many steps again as "
               "a fraction %g of the run holds at the pace so far (train.lr.cooldown); its last step ends the run\n",
               (1 - f) * cfg->train.minutes, cfg->train.minutes, f);
    else if (f > 0) {
        LrSchedule by_steps = {0};
        lr_cooldown_by_steps(&by_steps, f, cfg->train.steps);
        printf("cooldown: the learning rate falls to 0 over steps %lld to %lld (train.lr.cooldown %g)\n",
               (long long)by_steps.cool_from + 1, (long long)by_steps.cool_to, f);
    }
    return 0;
}

#define N_SAMPLES 3

typedef struct {
    int tty;       /* stdout is a terminal: a live progress line, redrawn in place */
    double t_draw; /* when it was last drawn */
    Trainer *t;
    /* train.valid_bleu: the validation files as written, read again here rather than
     * kept by the Corpus (which frees its text once encoded, and drops pairs over
     * max_len): BLEU is then that of every line, the figure `qkv eval --greedy` prints */
    char **vsrc, **vref;
    int vn;
    int n_samples, sample_line[N_SAMPLES]; /* lines shown at each validation: the same ones, */
    char *sample_hyp[N_SAMPLES];           /* to watch them change; their last translations */
} Screen;

static void on_progress(void *ctx, const TrainProgress *p) {
    Screen *s = ctx;
    double now = now_seconds();
    if (p->cooldown_began) {
        printf("%scooldown: begun after step %lld, at %.1f minutes: the learning rate falls to 0 by step %d, the "
               "run's last\n",
               s->tty ? "\r\033[K" : "", (long long)p->step, p->elapsed_s / 60.0, p->steps);
        fflush(stdout);
    }
    if (!s->tty || !(now - s->t_draw > 0.1 || p->log_now)) return;
    char eta[32];
    format_duration(eta, sizeof eta, p->eta_s);
    printf("\r\033[Kstep %lld/%d  epoch %.2f  loss %.4f  %.0f tok/s  lr %.2e  ETA %s", (long long)p->step, p->steps,
           p->epoch, p->loss, p->tokens_per_s, p->lr, eta);
    fflush(stdout);
    s->t_draw = now;
}

static void on_warn(void *ctx, const char *msg);

/* The run's report, redrawn at each validation and at the end: like curves.svg, a
 * convenience, so a failure is a warning and training goes on. */
static void redraw_report(const Trainer *t, int running) {
    RunPageOptions o = {.running = running};
    if (runpage_write(t->run.cfg.run_dir, NULL, &o, NULL) != 0) on_warn(NULL, err_msg());
}

/* This validation's samples into RUN/samples.jsonl, for the report */
static void record_samples(const Screen *s, const TrainProgress *p) {
    json_t *o = json_object(), *list = json_array();
    json_put(o, "step", json_integer(p->step));
    json_put(o, "valid_bleu", json_fmt("%.2f", p->valid_bleu));
    for (int k = 0; k < s->n_samples; k++) {
        json_t *one = json_object();
        json_put(one, "line", json_integer(s->sample_line[k] + 1));
        json_put(one, "src", json_utf8(s->vsrc[s->sample_line[k]]));
        json_put(one, "ref", json_utf8(s->vref[s->sample_line[k]]));
        json_put(one, "hyp", json_utf8(s->sample_hyp[k]));
        json_array_append_new(list, one);
    }
    json_put(o, "samples", list);
    if (journal_append(s->t->run.cfg.run_dir, RUN_SAMPLES, o) != 0) on_warn(NULL, err_msg());
}

/* On a terminal only validation steps and the last keep a line; elsewhere every log step.
 * The samples of a validation with BLEU follow its line. */
static void on_log(void *ctx, const TrainProgress *p) {
    Screen *s = ctx;
    char vbuf[96] = "", eta[32];
    int bleu = p->validated && !isnan(p->valid_bleu);
    double ppl = p->validated ? exp(p->valid_loss) : 0.0; /* a diverging run's has 300 digits: then 3 of them */
    if (p->validated)
        snprintf(vbuf, sizeof vbuf, ppl < 1e6 ? "  valid %.4f (ppl %.2f)" : "  valid %.4f (ppl %.3g)", p->valid_loss,
                 ppl);
    if (bleu) snprintf(vbuf + strlen(vbuf), sizeof vbuf - strlen(vbuf), "  BLEU %.2f", p->valid_bleu);
    format_duration(eta, sizeof eta, p->eta_s);
    if (s->tty) printf("\r\033[K");
    if (!s->tty || p->validated || p->step == p->steps)
        printf("step %lld/%d  epoch %.2f  loss %.4f  %.0f tok/s  lr %.2e  %.1fs  ETA %s%s\n", (long long)p->step,
               p->steps, p->epoch, p->loss, p->tokens_per_s, p->lr, p->elapsed_s, eta, vbuf);
    for (int k = 0; bleu && k < s->n_samples; k++)
        printf("  src: %s\n  ref: %s\n  hyp: %s\n", s->vsrc[s->sample_line[k]], s->vref[s->sample_line[k]],
               s->sample_hyp[k]);
    fflush(stdout);
    if (bleu) record_samples(s, p);
    /* the last step's and a stop's page is drawn by note_end, with the end in it */
    if (p->validated && p->step != p->steps && !s->t->stopping) redraw_report(s->t, 1);
}

static void on_warn(void *ctx, const char *msg) {
    (void)ctx;
    fprintf(stderr, "qkv: warning: %s\n", msg);
}

/* ---- BLEU at validation ------------------------------------------------------------ */

/* The validation files for train.valid_bleu; -1 with the error set. */
static int read_valid_text(Screen *s) {
    const Config *cfg = &s->t->run.cfg;
    int n_ref;
    s->vsrc = read_file_lines(cfg->data.valid.src, &s->vn);
    if (!s->vsrc) return -1;
    s->vref = read_file_lines(cfg->data.valid.tgt, &n_ref);
    if (!s->vref) return -1;
    if (n_ref != s->vn)
        return err_set("%s: %d lines, but %s has %d", cfg->data.valid.tgt, n_ref, cfg->data.valid.src, s->vn);
    s->n_samples = s->vn < N_SAMPLES ? s->vn : N_SAMPLES;
    for (int k = 0; k < s->n_samples; k++) s->sample_line[k] = (int)((long long)k * s->vn / s->n_samples);
    return 0;
}

static void screen_free(Screen *s) {
    if (s->vsrc) free_lines(s->vsrc, s->vn);
    if (s->vref) free_lines(s->vref, s->vn);
    for (int k = 0; k < s->n_samples; k++) free(s->sample_hyp[k]);
}

/* Greedy translations of the validation set, scored as `qkv score` scores them. */
static double on_valid_bleu(void *ctx, Model *m) {
    Screen *s = ctx;
    const Run *run = &s->t->run;
    TranslateOptions o = decode_options_defaults();
    o.decode.beam = 1, o.decode.nbest = 1;
    TranslateStats st;
    char **hyp = translate_lines(m, run->cfg.data.tokenizer, &run->src_vocab, &run->tgt_vocab, s->vsrc, s->vn, &o, &st,
                                 NULL);
    BleuStats bs = {0};
    for (int i = 0; i < s->vn; i++) bleu_add(&bs, hyp[i], s->vref[i]);
    for (int k = 0; k < s->n_samples; k++) {
        free(s->sample_hyp[k]);
        s->sample_hyp[k] = xstrdup(hyp[s->sample_line[k]]);
    }
    free_lines(hyp, s->vn);
    return bleu_compute(&bs, 0).score;
}

/* ---- train.watch ------------------------------------------------------------------------ */

/* Each watched sentence's source share (contributions rolled out) and its last
 * cross-attention block's contributions (for the null decision of the watch view's AER),
 * from its capture's pass */
static void measure_share(Model *m, AttnMaps *a) {
    Contributions c;
    contrib_compute(m, a->S, a->T, &c);
    a->share = c.share, c.share = NULL;
    size_t per = (size_t)a->T * (a->S + 1);
    a->null_from = xmalloc(sizeof(float) * per);
    memcpy(a->null_from, contrib_last_cross(&c), sizeof(float) * per);
    contrib_free(&c);
}

static void on_watch(void *ctx, Model *m, int64_t step) {
    Screen *s = ctx;
    const Run *run = &s->t->run;
    const Config *cfg = &run->cfg;
    if (watch_record(m, cfg->data.tokenizer, &run->src_vocab, &run->tgt_vocab, cfg->train.watch, cfg->train.n_watch,
                     step, cfg->run_dir, measure_share) != 0)
        on_warn(ctx, err_msg());
}

/* Refuses watched sentences the model cannot read before any step is taken. */
static int check_watch(const Trainer *t) {
    const Config *cfg = &t->run.cfg;
    char *unknown;
    if (cfg->train.n_watch == 0) return 0;
    if (watch_check(&t->m, cfg->data.tokenizer, &t->run.src_vocab, &t->run.tgt_vocab, cfg->train.watch,
                    cfg->train.n_watch, &unknown) != 0)
        return -1;
    if (unknown)
        fprintf(stderr, "qkv: warning: train.watch: words not in the source vocabulary, read as <unk>: %s\n", unknown);
    free(unknown);
    printf("watching %d sentence%s: attention recorded in %s/watch at step 0 and every %d steps\n", cfg->train.n_watch,
           cfg->train.n_watch == 1 ? "" : "s", cfg->run_dir, cfg->train.valid_every);
    return 0;
}

/* ---- the loop ------------------------------------------------------------------------- */

/* Says how the loop ended; returns the exit status. */
static int report_end(Trainer *t, const Screen *screen, TrainEnd end) {
    const Config *cfg = &t->run.cfg;
    if (end == TRAIN_DIVERGED || end == TRAIN_CKPT_FAILED) {
        /* one line: the failed write says what and where; the last whole checkpoint stays */
        fprintf(stderr, "%sqkv: %s%s\n", screen->tty ? "\n" : "", err_msg(),
                end == TRAIN_CKPT_FAILED ? "; stopping: training cannot go on without checkpoints" : "");
        return 1;
    }
    if (screen->tty) printf("\r\033[K");
    if (end == TRAIN_WRITE_FAILED) {
        fprintf(stderr, "qkv: %s; stopped before another checkpoint: once it can be written, 'qkv resume %s' goes on\n",
                err_msg(), cfg->run_dir);
        return 1;
    }
    if (end == TRAIN_RANKS_FAILED) {
        fprintf(stderr, "qkv: %s; no checkpoint was written after step %lld; resume the run: qkv resume %s\n",
                err_msg(), (long long)(t->step - 1), cfg->run_dir);
        return 1;
    }
    char last[CONFIG_PATH_MAX + 64];
    run_step_checkpoint(last, sizeof last, cfg->run_dir, t->step);
    if (end == TRAIN_STOPPED && dist_size() > 1)
        printf("stopped by signal %d after step %lld; checkpoint %s\nresume with: mpirun -np %d qkv resume %s\n",
               t->stop_signal, (long long)t->step, last, dist_size(), cfg->run_dir);
    else if (end == TRAIN_STOPPED)
        printf("stopped by signal %d after step %lld; checkpoint %s\nresume with: qkv resume %s\n", t->stop_signal,
               (long long)t->step, last, cfg->run_dir);
    else if (t->cooldown_from > 0 && t->step == trainer_last_step(t) && t->step < cfg->train.steps)
        printf("done: step %lld, the last of the cooldown begun after step %lld (train.lr.cooldown %g), in %.1fs; "
               "checkpoint %s\n",
               (long long)t->step, (long long)t->cooldown_from, cfg->train.lr.cooldown, t->seconds, last);
    else if (t->budget_spent)
        printf("done: step %lld of at most %d, train.minutes (%g) spent, in %.1fs; checkpoint %s\n", (long long)t->step,
               cfg->train.steps, cfg->train.minutes, t->seconds, last);
    else
        printf("done: step %lld of %d in %.1fs; checkpoint %s\n", (long long)t->step, cfg->train.steps, t->seconds,
               last);
    if (dist_size() > 1) {
        double bytes, s = workers_comm(t->workers, &bytes);
        printf("mpi: rank 0 sent %.2f MB a step and received as much, in %.2f ms a step (waiting for the slowest rank "
               "included)\n",
               bytes / 1e6, s * 1e3);
    }
    return 0;
}

/* Under ranks, SIGINT or SIGTERM comes from the launcher ending the job: a rank died,
 * or the job was interrupted, and what is left is killed soon after, whatever it is
 * doing. So rank 0 says so at once, in one line written beforehand, and every rank
 * leaves: checkpoints are written atomically, so the last one whole is the one to
 * resume (a stray .tmp is swept by the resume). */
static char ended_line[CONFIG_PATH_MAX + 256];
static size_t ended_len;
static void on_launcher_signal(int sig) {
    (void)sig;
    if (ended_len && write(STDERR_FILENO, ended_line, ended_len) < 0) _exit(1);
    _exit(1);
}

static void catch_launcher_signals(const Trainer *t) {
    if (dist_size() == 1) return;
    if (dist_rank() == 0) {
        snprintf(ended_line, sizeof ended_line,
                 "qkv: stopped by the MPI launcher (a rank died, or the job was interrupted); to go on from the last "
                 "checkpoint: mpirun -np %d qkv resume %s\n",
                 dist_size(), t->run.cfg.run_dir);
        ended_len = strlen(ended_line);
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_launcher_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* RUN/journal.jsonl: where this train or resume began, on what machine and data */
static void note_begin(const Trainer *t) {
    if (journal_begin(&t->run, (long long)t->step, dist_size(), &t->train, t->has_valid ? &t->valid : NULL,
                      t->m.n_params) != 0)
        on_warn(NULL, err_msg());
}

/* ... and how it ended; then the report, drawn once more with the run's end in it */
static void note_end(const Trainer *t, TrainEnd end) {
    const char *how = end == TRAIN_DONE       ? "done"
                      : end == TRAIN_STOPPED  ? "stopped"
                      : end == TRAIN_DIVERGED ? "diverged"
                                              : "failed";
    const char *error = end != TRAIN_DONE && end != TRAIN_STOPPED ? err_msg() : NULL;
    if (journal_end(t->run.cfg.run_dir, (long long)t->step, how, t->stop_signal, error, t->seconds) != 0)
        on_warn(NULL, err_msg());
    redraw_report(t, 0);
}

/* Runs the loop and says how it ended; returns the exit status. *began (if given) says
 * whether training began: 0 when the checks before it refused. */
static int run_loop(Trainer *t, int *began) {
    catch_launcher_signals(t);
    /* under mpirun a rank's stdout is a pseudo-terminal wherever the job's output goes,
     * so a job of ranks logs line by line */
    Screen screen = {.tty = isatty(STDOUT_FILENO) && dist_size() == 1, .t = t};
    TrainReporter rep = {&screen, on_progress, on_log, on_warn, on_valid_bleu, on_watch};
    /* decoding the validation set and watching sentences are rank 0's alone */
    int bad = dist_rank() == 0 &&
              ((t->run.cfg.train.valid_bleu && t->has_valid && read_valid_text(&screen) != 0) || check_watch(t) != 0);
    int rc = agree(bad ? 2 : 0);
    if (began) *began = rc == 0;
    if (rc == 0) {
        if (dist_rank() == 0) note_begin(t);
        TrainEnd end = trainer_run(t, &rep);
        rc = report_end(t, &screen, end);
        if (dist_rank() == 0) note_end(t, end);
    }
    screen_free(&screen);
    return rc;
}

/* ---- the two commands -------------------------------------------------------------- */

/* A new run: directory, data, vocabularies, files, model; then the loop. Under ranks,
 * rank 0 alone makes and writes the run directory. */
static int train_new(Trainer *t, int force) {
    const Config *cfg = &t->run.cfg;
    RunFresh fresh = {0};
    int lead = dist_rank() == 0, created = lead ? run_create(cfg, force, &fresh) : 0, rc;
    if ((rc = agree(created < 0 ? 2 : 0))) return rc;
    if (created == 1) printf("%s: the run there stopped before its first checkpoint; starting it over\n", cfg->run_dir);
    /* a failure before training starts leaves nothing behind that would block the next train */
    if ((rc = read_data(t, 1)) || (rc = agree(lead && run_write_files(&t->run) != 0 ? err_status() : 0)) ||
        (rc = agree(setup(t))) || (rc = agree(trainer_open_metrics(t, 0) != 0 ? err_status() : 0))) {
        if (lead) run_abandon(cfg->run_dir, &fresh);
        return rc;
    }
    int began;
    if ((rc = run_loop(t, &began)) != 0 && !began && lead) run_abandon(cfg->run_dir, &fresh); /* refused: as above */
    return rc;
}

/* Joins the MPI job when launched as one; the other ranks' standard output goes to
 * /dev/null, as rank 0 speaks for the job. Returns an exit status. */
static int join_ranks(void) {
    /* a SIGUSR1 from here on is a stop request, not the rank's death in MPI's start-up */
    if (dist_launched_size() > 1) trainer_catch_stop(dist_launched_size());
    if (dist_start() != 0) {
        /* a build without MPI: each process would say it; the first says it for all */
        if (dist_launched_rank() == 0) cmd_fail(2);
        return 2;
    }
    if (dist_rank() != 0 && !freopen("/dev/null", "w", stdout))
        return err_set("cannot silence rank %d", dist_rank()), 1;
    /* nor says that the launcher stopped it: a job every rank refuses (a bad config) ends
     * with rank 0's line, and the launcher's SIGTERM to a rank still on its way out added
     * a second ("qkv: stopped by SIGTERM"). A signal ignored by whoever started the rank
     * stays ignored. */
    static const int stops[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; dist_rank() != 0 && i < sizeof stops / sizeof *stops; i++) {
        struct sigaction old;
        if (sigaction(stops[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) signal(stops[i], SIG_DFL);
    }
    return 0;
}

static const CmdOption train_options[] = {
    {'s', "set", "KEY=VALUE", "override one config key (repeatable), checked like the file's", NULL},
    {'f', "force", NULL, "replace an existing run there, or write over files of a run's names in a folder with none",
     NULL},
    {0},
};
const CmdSpec cmd_train_spec = {
    .name = "train",
    .operands = "CONFIG.yaml [--set key=value ...] [--force]",
    .summary = "train a new model from a config into its run directory",
    .about = "Writes runs/NAME/ (or the config's run_dir): config.yaml, metrics.jsonl, curves.svg and\n"
             "checkpoints. Ctrl-C finishes the step, writes a checkpoint and stops; qkv resume goes on\n"
             "bit-exactly. Under mpirun, every rank trains on its share of each batch.",
    .options = train_options,
    .example = "qkv train configs/toy.yaml --set train.steps=2000",
};

int cmd_train(int argc, char **argv) {
    int force = 0, c;
    char *sets[64];
    int n_sets = 0;
    while ((c = cmd_option_next(&cmd_train_spec, argc, argv)) >= 0) {
        if (c == 's' && n_sets == 64)
            return err_set("--set: more than 64 overrides; put them in the config"), cmd_fail(2);
        if (c == 's') sets[n_sets++] = optarg;
        else force = 1;
    }
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1) return cmd_usage_of(&cmd_train_spec);
    int rc = join_ranks();
    if (rc != 0) return rc;
    Trainer t = {0};
    Config *cfg = &t.run.cfg;
    config_defaults(cfg);
    int bad = config_load(cfg, argv[optind]) != 0;
    for (int i = 0; i < n_sets && !bad; i++) bad = config_set(cfg, sets[i]) != 0;
    bad = bad || config_validate(cfg, 1) != 0;
    if (!(rc = agree(bad ? 2 : 0))) {
        snprintf(t.run.dir, sizeof t.run.dir, "%s", cfg->run_dir);
        rc = train_new(&t, force);
    }
    trainer_free(&t);
    dist_end();
    return rc;
}

/* Rank 0 reads the checkpoint file; every rank restores from its bytes. */
static int restore(Trainer *t, const char *ckpt, int *threads) {
    int lead = dist_rank() == 0, rc;
    char *bytes = NULL, *path = lead ? xstrdup(ckpt) : NULL;
    size_t len = 0, path_len = lead ? strlen(path) : 0;
    if ((rc = agree(lead && !(bytes = read_file_max(ckpt, READ_FILE_ANY, &len)) ? 2 : 0))) return free(path), rc;
    if ((rc = agree(dist_bcast_blob(&path, &path_len) != 0 || dist_bcast_blob(&bytes, &len) != 0 ? 1 : 0)))
        return free(path), free(bytes), rc;
    rc = agree(trainer_restore(t, path, bytes, len, threads) != 0 ? 2 : 0);
    free(path);
    return rc;
}

/* An existing run from its latest checkpoint; steps > 0 moves the goal, minutes >= 0 the
 * time budget (0: none; below 0: the config's), threads > 0
 * changes the threads per process. Under ranks, rank 0 alone opens the run directory
 * and hands the others its config, vocabularies and checkpoint. */
static int resume(Trainer *t, const char *dir, int steps, double minutes, int threads) {
    char ckpt[CONFIG_PATH_MAX + 64] = "";
    int trained, lead = dist_rank() == 0, rc;
    const Config *cfg = &t->run.cfg;
    RunEdits edits = {0};
    snprintf(t->run.dir, sizeof t->run.dir, "%s", dir);
    if ((rc = agree(lead && run_open_for_training(&t->run, dir, ckpt, sizeof ckpt, &edits) != 0 ? 2 : 0))) return rc;
    if ((rc = agree(trainer_share_config(t) != 0 ? 1 : 0))) return rc;
    int goal = steps > 0 ? steps : cfg->train.steps, per_process = threads > 0 ? threads : cfg->train.threads;
    /* config.yaml says what the run trains with: edits in it that the checkpoint overrules go */
    double budget = minutes >= 0 ? minutes : cfg->train.minutes;
    int changed = goal != cfg->train.steps || budget != cfg->train.minutes || per_process != cfg->train.threads ||
                  edits.count > 0;
    t->run.cfg.train.threads = per_process;
    t->run.cfg.train.minutes = budget;
    if ((rc = read_data(t, 0)) || (rc = agree(setup(t))) || (rc = restore(t, ckpt, &trained))) return rc;
    /* a cooldown the clock began belongs to the budget it was set from: a new goal or
     * budget sets its own */
    int moved = goal != cfg->train.steps || budget != cfg->train.minutes;
    if (moved) t->cooldown_from = 0;
    if (!moved && t->cooldown_from > 0 && t->step >= trainer_last_step(t)) {
        printf("%s: already at step %lld, the last of the cooldown begun after step %lld; nothing to do, nothing "
               "changed (pass --minutes M or --steps N to train longer, with a cooldown of its own)\n",
               dir, (long long)t->step, (long long)t->cooldown_from);
        return 0;
    }
    /* a goal already reached leaves the run as it is: config.yaml included */
    if (t->step >= goal) {
        char past[48] = "";
        if (steps > 0 && steps < t->step) snprintf(past, sizeof past, ", past --steps %d", steps);
        printf("%s: already at step %lld%s; nothing to do, nothing changed (pass --steps N above %lld to train "
               "longer)\n",
               dir, (long long)t->step, past, (long long)t->step);
        return 0;
    }
    if (trainer_budget_spent(t, 0)) {
        printf("%s: already trained %.1f minutes, train.minutes is %g; nothing to do, nothing changed (pass "
               "--minutes M above %.1f, or 0 for no limit, to train longer)\n",
               dir, t->elapsed_before / 60.0, budget, t->elapsed_before / 60.0);
        return 0;
    }
    if (lead && edits.count > 0) {
        char which[128];
        if (edits.count == 1) snprintf(which, sizeof which, "%s differs", edits.first);
        else
            snprintf(which, sizeof which, "%s and %d other key%s differ", edits.first, edits.count - 1,
                     edits.count == 2 ? "" : "s");
        fprintf(stderr,
                "qkv: warning: %s/config.yaml: %s from the config %s was trained with: a resume goes on with the "
                "checkpoint's, and config.yaml is rewritten to it (a new run takes new settings)\n",
                dir, which, ckpt);
    }
    int shards = dist_size() * cfg->train.threads;
    if (lead && trained != shards)
        fprintf(stderr,
                "qkv: warning: trained with %d threads%s, resuming with %d: results will not be bit-identical\n",
                trained, dist_size() > 1 ? " in all (ranks x threads)" : "", shards);
    if ((rc = agree(lead && changed && run_set_steps(&t->run, goal) != 0 ? 1 : 0))) return rc;
    t->run.cfg.train.steps = goal;
    char within[64] = "";
    if (budget > 0) snprintf(within, sizeof within, ", %.1f of %g minutes", t->elapsed_before / 60.0, budget);
    printf("resuming %s from %s (step %lld of %d%s)\n", dir, ckpt, (long long)t->step, cfg->train.steps, within);
    if ((rc = agree(trainer_open_metrics(t, 1) != 0 ? err_status() : 0))) return rc;
    return run_loop(t, NULL);
}

/* PARALLEL_MAX as text, for the message: the threads one process can run */
#define THREADS_TEXT(n) #n
#define THREADS_MAX_TEXT_OF(n) THREADS_TEXT(n)
#define THREADS_MAX_TEXT THREADS_MAX_TEXT_OF(PARALLEL_MAX)

static const CmdOption resume_options[] = {
    {'s', "steps", "N", "train to step N instead of the config's train.steps", "the config's"},
    {'m', "minutes", "M",
     "train until M minutes of training in all instead of the config's train.minutes (0: no limit)", "the config's"},
    {'t', "threads", "N", "training threads per process (not bit-identical to the run's own count)", "the config's"},
    {0},
};
const CmdSpec cmd_resume_spec = {
    .name = "resume",
    .operands = "RUN_DIR [--steps N] [--minutes M] [--threads N]",
    .summary = "continue a run from its latest checkpoint, bit-exactly",
    .about = "The data order, dropout masks and optimizer state go on where the checkpoint left them; a\n"
             "run already at its goal is left as it is.",
    .options = resume_options,
    .example = "qkv resume runs/toy --steps 4000",
};

int cmd_resume(int argc, char **argv) {
    int steps = 0, threads = 0, c;
    double minutes = -1;
    while ((c = cmd_option_next(&cmd_resume_spec, argc, argv)) >= 0) {
        if (c == 's' && cmd_int("--steps", "a positive step count", optarg, 1, 2000000000, &steps) != 0)
            return cmd_fail(2);
        else if (c == 'm' && cmd_double("--minutes", "minutes from 0 to 1000000", optarg, 0, 1e6, &minutes) != 0)
            return cmd_fail(2);
        else if (c == 't' && cmd_int("--threads", "a thread count from 1 to " THREADS_MAX_TEXT, optarg, 1, PARALLEL_MAX,
                                     &threads) != 0)
            return cmd_fail(2);
    }
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1) return cmd_usage_of(&cmd_resume_spec);
    int rc = join_ranks();
    if (rc != 0) return rc;
    Trainer t = {0};
    rc = resume(&t, argv[optind], steps, minutes, threads);
    trainer_free(&t);
    dist_end();
    return rc;
}
