/* bench: `qkv bench`, the measurements behind `make bench`.
 *
 * In one process: the machine's sgemm rate (the ceiling), then training steps of the
 * configured model on its corpus with a per-op time breakdown, achieved GFLOP/s from the
 * counted FLOPs of every matrix product, peak RSS, and greedy and beam-5 decoding speed. The
 * batches it trains on (and the sentences it decodes) can be written out so the PyTorch
 * reference (scripts/bench_torch.py) runs exactly the same work. Prints one JSON line
 * (scripts/bench.sh reads it). The set-up is the training set-up of train/trainer.h,
 * without a run directory. */
#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "cmdlib/bench_ceiling.h"
#include "cmdlib/bench_shapes.h"
#include "cmdlib/bench_timeline.h"
#include "cmdlib/bench_translate.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/options.h"
#include "config.h"
#include "decode/decode.h"
#include "nn/panels.h"
#include "nn/profile.h"
#include "run/checkpoint.h"
#include "run/run.h"
#include "train/parallel.h" /* shard_batch, pass_rows, the timeline's marks */
#include "train/trainer.h"
#include "util/atomic_file.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"

/* cmd_progress for this command. */
#define progress(...) cmd_progress("bench", __VA_ARGS__)

/* FLOPs of one training step: every matrix product forward (2mnk), and twice that
 * backward (the input and the weight gradients; for attention, the four products of
 * dP, dV, dQ, dK). Element-wise work is not counted. What is computed: a training pass
 * packs its rows (model.h), so every layer runs over each sequence's real positions
 * only, attention over its real length squared (source s, target t), and the classifier
 * over the real targets; no padding is counted, none is computed. */
static double step_flops(const ModelConfig *c, const ModelBatch *mb) {
    double d = c->d_model, per_src, per_tgt, fwd = 0;
    model_position_flops(c, &per_src, &per_tgt);
    for (int i = 0; i < mb->B; i++) {
        double s = mb->src_len[i], t = mb->tgt_len[i];
        /* attention's QK^T and PV: encoder s x s, masked self t x t, cross t x s */
        double attention = c->encoder_layers * 2 * 2 * s * s * d + c->decoder_layers * 2 * 2 * (t * t + t * s) * d;
        fwd += s * per_src + t * per_tgt + attention;
    }
    return 3 * fwd;
}

typedef struct {
    char *sets[64];
    int n_sets, steps, warmup, n_decode, peak_only, batches_only;
    double ceiling;
    const char *config, *dump, *translate, *timeline;
    char batches[1100], weights[1100]; /* the files --dump writes beside its own */
} BenchOpts;

static const CmdOption options[] = {
    {'s', "set", "KEY=VALUE", "override one config key (repeatable)", NULL},
    {'n', "steps", "N", "training steps timed", "50"},
    {'w', "warmup", "N", "steps run first and not timed", "5"},
    {'k', "decode", "N", "validation sentences decoded, greedy and beam 5; 0: no decoding", "200"},
    {'d', "dump", "FILE.json", "also write the figures (and with --batches-only, the batches) as JSON", NULL},
    {'b', "batches-only", NULL, "write the run's batches to --dump and time nothing (for a peer)", NULL},
    {'p', "peak", NULL, "measure the sgemm ceiling only", NULL},
    {'l', "timeline", "FILE.svg",
     "also draw the training threads' timed steps: each thread's phases and waits on one time axis", NULL},
    {'c', "ceiling", "GFLOPS", "take this ceiling instead of measuring it", "measured"},
    {'t', "translate", "FILE.txt",
     "time translating FILE's lines, greedy and beam search, with a trained model: the argument is then a run "
     "directory or weights, not a config",
     NULL},
    {0},
};
const CmdSpec cmd_bench_spec = {
    .name = "bench",
    .operands = "CONFIG.yaml [options] | RUN_DIR|WEIGHTS --translate FILE.txt",
    .summary = "training and decoding speed, the sgemm ceiling, a per-op breakdown (make bench)",
    .about = "One process measures the machine's sgemm rate, times training steps of the config's model\n"
             "with a per-op breakdown and FLOP counts, and times greedy and beam decoding. With --translate,\n"
             "it times translating a file with a trained model instead, greedy and with the default beam:\n"
             "sentences/s, target tokens/s, GFLOP/s and their fraction of the ceiling.",
    .options = options,
    .example = "qkv bench configs/toy.yaml --steps 20 --decode 50",
};

/* -1 to go on with the options in o; else the exit status to return now (0 after --help). */
static int parse_options(int argc, char **argv, BenchOpts *o) {
    *o = (BenchOpts){.steps = 50, .warmup = 5, .n_decode = 200};
    int c, rc = 0;
    char given[128] = {0}; /* by key: the options on the command line */
    while (rc == 0 && (c = cmd_option_next(&cmd_bench_spec, argc, argv)) >= 0) {
        given[c & 127] = 1;
        switch (c) {
        case 's':
            if (o->n_sets == 64) return err_set("--set: more than 64 overrides; put them in the config"), cmd_fail(2);
            o->sets[o->n_sets++] = optarg;
            break;
        case 'n': rc = cmd_int("--steps", "a positive step count", optarg, 1, 100000000, &o->steps); break;
        case 'w': rc = cmd_int("--warmup", "a step count", optarg, 0, 100000000, &o->warmup); break;
        case 'd': o->dump = optarg; break;
        case 'k': rc = cmd_int("--decode", "a sentence count", optarg, 0, 100000000, &o->n_decode); break;
        case 'p': o->peak_only = 1; break;
        case 'b': o->batches_only = 1; break;
        case 'c': rc = cmd_double("--ceiling", "a GFLOP/s figure", optarg, 0, 1e9, &o->ceiling); break;
        case 't': o->translate = optarg; break;
        case 'l': o->timeline = optarg; break;
        }
    }
    if (rc != 0) return cmd_fail(2);
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1) return cmd_usage_of(&cmd_bench_spec);
    if (o->batches_only && !o->dump) return err_set("--batches-only writes a dump: give --dump FILE.json"), cmd_fail(2);
    /* each mode reads some options: one given to a mode that would not read it is refused,
     * not ignored (a figure would seem to come from a run it did not). By key: --translate
     * reads --ceiling alone, --peak reads --set alone (the threads) and measures */
    if (o->translate && o->peak_only) return err_set("--peak goes with a config, not --translate"), cmd_fail(2);
    const char *mode = o->translate ? "--translate" : o->peak_only ? "--peak" : NULL;
    const char *unread = o->translate ? "snwkdbl" : "nwkdblc";
    for (const char *k = unread; mode && *k; k++)
        if (given[(int)*k])
            return (*k == 'c'
                        ? err_set("--ceiling: --peak measures the ceiling; it takes none")
                        : err_set("--%s goes with the training benchmark, not %s", cmd_option_name(options, *k), mode)),
                   cmd_fail(2);
    o->config = argv[optind];
    if (o->dump && (snprintf(o->batches, sizeof o->batches, "%s.batches.jsonl", o->dump) >= (int)sizeof o->batches ||
                    snprintf(o->weights, sizeof o->weights, "%s.safetensors", o->dump) >= (int)sizeof o->weights))
        return err_set("%s: --dump: name too long", o->dump), cmd_fail(2);
    return -1;
}

/* Every file the benchmark would write, checked before any work (the ceiling, the set-up,
 * minutes of steps) as export and whatif check --out: a name; not a FIFO or a device (the
 * rename would put the file in its place); not a checkpoint or a file already in a run
 * (the config's run, or one a folder above the name holds); in a folder that takes a new
 * file; no two the same. 0, or the exit status (the error reported). */
static int check_outputs(const BenchOpts *o, const char *run_dir) {
    const char *names[] = {o->dump, o->dump ? o->batches : NULL, o->dump && !o->batches_only ? o->weights : NULL,
                           o->timeline};
    const char *what[] = {"--dump", "--dump's batches file", "--dump's weights file", "--timeline"};
    for (int i = 0; i < 4; i++) {
        if (!names[i]) continue;
        if (!names[i][0]) return err_set("%s: an empty file name", what[i]), cmd_fail(2);
        for (int k = 0; k < i; k++)
            if (names[k] && strcmp(names[k], names[i]) == 0)
                return err_set("%s: both %s and %s: choose another file for one", names[i], what[k], what[i]),
                       cmd_fail(2);
        if (regular_or_absent(names[i]) != 0 ||
            run_out_replaces_a_runs_file(run_dir, names[i], what[i], "the benchmark"))
            return cmd_fail(2);
    }
    /* each name refused or taken before any folder is tried with a file */
    for (int i = 0; i < 4; i++)
        if (names[i] && probe_writable(names[i]) != 0) return cmd_fail(err_status());
    return 0;
}

/* A write that failed: said at once (figures still come), and the exit status to return,
 * the first failure's. */
static int write_failed(int status) {
    int now = cmd_fail(err_status());
    return status ? status : now;
}

static int load_config(Config *cfg, const BenchOpts *o) {
    config_defaults(cfg);
    if (config_load(cfg, o->config) != 0) return -1;
    for (int i = 0; i < o->n_sets; i++)
        if (config_set(cfg, o->sets[i]) != 0) return -1;
    return config_validate(cfg, 1);
}

/* Data, vocabularies, model, optimizer and threads as `qkv train` makes them, with no
 * run directory; the validation corpus (for decoding only) into *valid. 0, or the
 * exit status to return (the error reported). */
static int bench_setup(Trainer *t, Corpus *valid, int *has_valid) {
    const Config *cfg = &t->run.cfg;
    /* the trainer gets no validation set: it would reserve arena for validating, which
     * a benchmark of training steps does not do */
    *has_valid = cfg->data.valid.src[0] != '\0';
    if (trainer_read(t, 0) != 0) return cmd_fail(2);
    if (*has_valid &&
        corpus_read(valid, cfg->data.valid.src, cfg->data.valid.tgt, cfg->data.tokenizer, cfg->data.max_len) != 0)
        return cmd_fail(2);
    if (trainer_encode(t, 1) != 0) return cmd_fail(2);
    if (*has_valid) corpus_encode(valid, cfg->data.tokenizer, &t->run.src_vocab, &t->run.tgt_vocab, cfg->data.max_len);
    int rc = trainer_setup(t);
    return rc == 0 ? 0 : cmd_fail(rc == -2 ? 1 : 2);
}

/* The model and optimizer settings the PyTorch peer needs, as the dump's first keys. */
static json_t *dump_header(const Trainer *t, int warmup) {
    const ModelConfig *mc = &t->m.cfg;
    const Config *cfg = &t->run.cfg;
    json_t *o = json_object();
    json_put(o, "src_vocab", json_integer(mc->src_vocab));
    json_put(o, "tgt_vocab", json_integer(mc->tgt_vocab));
    json_put(o, "d_model", json_integer(mc->d_model));
    json_put(o, "heads", json_integer(mc->heads));
    json_put(o, "d_ff", json_integer(mc->d_ff));
    json_put(o, "encoder_layers", json_integer(mc->encoder_layers));
    json_put(o, "decoder_layers", json_integer(mc->decoder_layers));
    json_put(o, "dropout", json_fmt("%g", mc->dropout));
    json_put(o, "pre_norm", json_integer(mc->pre_norm));
    json_put(o, "tie_embeddings", json_integer(mc->tie_embeddings));
    json_put(o, "label_smoothing", json_fmt("%g", mc->label_smoothing));
    json_put(o, "clip_norm", json_fmt("%g", cfg->train.clip_norm));
    json_put(o, "lr_factor", json_fmt("%g", cfg->train.lr.factor));
    json_put(o, "warmup", json_integer(cfg->train.lr.warmup));
    json_put(o, "beta1", json_fmt("%g", cfg->train.adam.beta1));
    json_put(o, "beta2", json_fmt("%g", cfg->train.adam.beta2));
    json_put(o, "eps", json_fmt("%g", cfg->train.adam.eps));
    json_put(o, "warmup_steps", json_integer(warmup));
    /* what a qkv run's checkpoints record too: equal hashes, equal ids */
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, run_vocab_hash(&t->run.src_vocab, &t->run.tgt_vocab));
    json_put(o, "vocab_hash", json_string(hex));
    snprintf(hex, sizeof hex, "%016" PRIx64, t->data_hash);
    json_put(o, "data_hash", json_string(hex));
    return o;
}

/* The first n_decode sentences of dc (all of them if fewer): the ones decoded, whose ids
 * the dump carries for the peer. */
static int decode_count(const BenchOpts *o, const Corpus *dc) { return o->n_decode < dc->n ? o->n_decode : dc->n; }

static void put_decode_sources(json_t *dump, const Corpus *dc, int nd) {
    json_t *src = json_array();
    for (int i = 0; i < nd; i++) json_array_append_new(src, json_ints(dc->src[i].ids, dc->src[i].len));
    json_put(dump, "decode_src", src);
}

/* Writes the dump's one JSON line, whole or not at all; -1 with the error set. */
static int finish_dump(const json_t *dump, const char *path) {
    char *text = xcheck(json_dumps(dump, JSON_WRITE_FLAGS));
    FilePart parts[] = {{text, strlen(text)}, {"\n", 1}};
    int rc = write_file_atomic_parts(path, parts, 2);
    free(text);
    return rc;
}

static json_t *dump_batch(const ModelBatch *mb, int tokens) {
    json_t *o = json_object();
    json_put(o, "B", json_integer(mb->B));
    json_put(o, "S", json_integer(mb->S));
    json_put(o, "T", json_integer(mb->T));
    json_put(o, "tokens", json_integer(tokens));
    json_put(o, "src", json_ints(mb->src, mb->B * mb->S));
    json_put(o, "src_len", json_ints(mb->src_len, mb->B));
    json_put(o, "tgt_in", json_ints(mb->tgt_in, mb->B * mb->T));
    json_put(o, "tgt_out", json_ints(mb->tgt_out, mb->B * mb->T));
    json_put(o, "tgt_len", json_ints(mb->tgt_len, mb->B));
    return o;
}

typedef struct {
    double flops, seconds, loss;
    long tokens;      /* source + target positions holding a token (EOS and BOS counted): the batcher's count */
    long padded_rows; /* source + target positions of the padded batches (training computes only the tokens) */
    long src_positions, tgt_positions; /* the rows the steps' layers ran over, each side */
    long passes;                       /* forward-backward passes, all shards (parallel.h) */
    Timeline tl;                       /* the timed steps' threads (bench_timeline.h), owned */
} TrainTimes;

/* The passes a step runs: each shard's rows (cut by work), in passes of at most
 * pass_tokens padded tokens, as train/parallel.c cuts them. */
static long step_passes(const ModelBatch *mb, const ModelConfig *c, int shards, int pass_tokens) {
    long passes = 0;
    for (int k = 0; k < shards; k++) {
        int count = shard_batch(mb, c, shards, k).B, rows = pass_rows(pass_tokens, count, mb->S, mb->T);
        if (count > 0) passes += (count + rows - 1) / rows; /* a batch of fewer rows than shards leaves some empty */
    }
    return passes;
}

/* warmup + steps training steps, the last `steps` timed and profiled; each step's batch
 * appended to batches (may be NULL). */
/* Each step's batch goes to the batches file as one JSON line at once, so the benchmark's
 * own memory does not grow with the steps it records (its peak RSS is a figure it reports). */
static void write_batch(AtomicStream *bf, const ModelBatch *mb, int tokens) {
    json_t *b = dump_batch(mb, tokens);
    char *line = xcheck(json_dumps(b, JSON_WRITE_FLAGS | JSON_COMPACT));
    /* a failed write is kept for the commit to report */
    if (atomic_stream_write(bf, line, strlen(line)) == 0) atomic_stream_write(bf, "\n", 1);
    free(line);
    json_decref(b);
}

/* The counted FLOPs of each thread's shard of batch mb, as train/parallel.c cuts it. */
static void shard_work(const ModelConfig *c, const ModelBatch *mb, int n, double *work) {
    for (int i = 0; i < n; i++) {
        ModelBatch part = shard_batch(mb, c, n, i);
        work[i] = step_flops(c, &part);
    }
}

/* The timeline's marks out of the workers, before they stop. */
static void keep_marks(TrainTimes *r, const Workers *w) {
    Timeline *tl = &r->tl;
    tl->steps = workers_recorded(w);
    double *marks = xcalloc((size_t)tl->steps * tl->threads * N_MARKS + 1, sizeof(double));
    for (int k = 0; k < tl->steps; k++)
        for (int i = 0; i < tl->threads; i++)
            memcpy(marks + ((size_t)k * tl->threads + i) * N_MARKS, workers_marks(w, k, i), sizeof(double) * N_MARKS);
    tl->marks = marks;
    workers_record((Workers *)w, 0);
}

static void free_times(TrainTimes *r) { free((void *)r->tl.marks), free((void *)r->tl.call), free((void *)r->tl.work); }

static TrainTimes time_training(Trainer *t, const BenchOpts *o, AtomicStream *bf) {
    TrainTimes r = {0};
    /* single-process threads only: under ranks a step has more meetings than the timeline draws */
    int n = workers_count(t->workers);
    double *call = xcalloc((size_t)o->steps * 2, sizeof(double)), *work = xcalloc((size_t)o->steps * n, sizeof(double));
    r.tl = (Timeline){.threads = n, .call = call, .work = work};
    /* under ranks, shards are cut for every rank's threads: no timeline of this process' */
    int record = workers_shards(t->workers) == n;
    int total = o->warmup + o->steps;
    double start = now_seconds();
    for (int step = 1; step <= total; step++) {
        char eta[32] = "?";
        if (step > 1) format_duration(eta, sizeof eta, (now_seconds() - start) / (step - 1) * (total - step + 1));
        progress("training step %d of %d (%d warm-up), ETA %s", step, total, o->warmup, eta);
        if (step == o->warmup + 1) {
            memset(prof_seconds, 0, sizeof prof_seconds);
            atomic_store(&prof_enabled, 1);
            if (record) workers_record(t->workers, o->steps);
        }
        int tok;
        double lr, t0 = now_seconds();
        int stop = 0;
        r.loss = train_step(&t->ts, step, &tok, &lr, &stop);
        double t1 = now_seconds(), dt = t1 - t0;
        const ModelBatch *mb = &t->ts.batch; /* still the step's batch: untimed from here */
        if (bf) write_batch(bf, mb, tok);
        if (step > o->warmup) {
            int k = step - o->warmup - 1;
            call[2 * k] = t0, call[2 * k + 1] = t1;
            shard_work(&t->m.cfg, mb, n, work + (size_t)k * n);
            r.seconds += dt;
            r.tokens += tok;
            r.flops += step_flops(&t->m.cfg, mb);
            r.padded_rows += (long)mb->B * (mb->S + mb->T);
            for (int i = 0; i < mb->B; i++) r.src_positions += mb->src_len[i], r.tgt_positions += mb->tgt_len[i];
            r.passes += step_passes(mb, &t->m.cfg, t->run.cfg.train.threads, t->run.cfg.train.pass_tokens);
        }
    }
    atomic_store(&prof_enabled, 0);
    keep_marks(&r, t->workers);
    progress(NULL); /* a message after it starts a line of its own */
    return r;
}

/* The result line (scripts/bench.sh and the table read these keys). */
static void print_result(const Trainer *t, const BenchOpts *o, double peak, const TrainTimes *tr, double t_decode,
                         int nd, long out_tokens, double t_beam, const char *weights) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* before the products alone, whose matrices are not the model's */
    int shards = t->run.cfg.train.threads;
    double passes = tr->passes > 0 ? (double)tr->passes : 1.0;
    progress("the step's matrix products alone");
    ShapesAlone alone = products_alone(&t->m.cfg, (int)(tr->src_positions / passes + 0.5),
                                       (int)(tr->tgt_positions / passes + 0.5), shards);
    /* a pass's products, times the passes a shard runs a step */
    double per_step = passes / ((double)o->steps * shards);
    alone.seconds *= per_step, alone.flops *= per_step;
    double prof_total = 0, secs = tr->seconds;
    /* A share above 100% is a ceiling measured low (a busy moment, a cold start): measured
     * again, and the highest kept, rather than such an MFU printed. */
    double step_gflops = tr->flops / secs / 1e9,
           alone_gflops = alone.seconds > 0 ? alone.flops / alone.seconds / 1e9 : 0;
    int remeasured = 0;
    for (; remeasured < 3 && fmax(step_gflops, alone_gflops) > peak; remeasured++) {
        progress("the sgemm ceiling again: the products beat %.1f GFLOP/s", peak);
        peak = fmax(peak, bench_ceiling(shards));
    }
    progress(NULL);
    for (int i = 0; i < PROF_N; i++) prof_total += prof_seconds[0][i];
    json_t *r = json_object(), *b = json_object();
    json_put(r, "impl", json_string("qkv"));
    json_put(r, "corename", json_string(openblas_get_corename()));
    if (kernels_openblas_picked()) json_put(r, "openblas_chose", json_string(kernels_openblas_picked()));
    json_put(r, "threads", json_integer(openblas_get_num_threads()));
    json_put(r, "peak_gflops", json_fmt("%.1f", peak));
    json_put(r, "ceiling_threads", json_integer(shards));
    json_put(r, "ceiling_remeasured", json_integer(remeasured));
    /* still beaten after three more measurements: the figure says so rather than hide it */
    json_put(r, "ceiling_beaten", json_boolean(fmax(step_gflops, alone_gflops) > peak));
    json_put(r, "params", json_integer((json_int_t)t->m.n_params));
    json_put(r, "steps", json_integer(o->steps));
    json_put(r, "tokens_per_s", json_fmt("%.1f", tr->tokens / secs));
    json_put(r, "step_ms", json_fmt("%.3f", 1e3 * secs / o->steps));
    json_put(r, "gflops", json_fmt("%.2f", tr->flops / secs / 1e9));
    json_put(r, "mfu", json_fmt("%.4f", tr->flops / secs / 1e9 / peak));
    json_put(r, "flops_per_step", json_fmt("%.4g", tr->flops / o->steps));
    /* the share of the rows every linear layer runs over that are padding */
    json_put(r, "padding_share", json_fmt("%.4f", tr->padded_rows ? 1.0 - (double)tr->tokens / tr->padded_rows : 0.0));
    json_put(r, "peak_rss_mb", json_fmt("%.1f", ru.ru_maxrss / 1024.0));
    json_put(r, "decode_step_products", json_string(panels_enabled() ? "panels" : "sgemm"));
    json_put(r, "decode_sentences_per_s", json_fmt("%.1f", nd / t_decode));
    json_put(r, "decoded", json_integer(nd));
    json_put(r, "decoded_tokens", json_integer(out_tokens));
    json_put(r, "beam5_sentences_per_s", json_fmt("%.1f", nd / t_beam));
    json_put(r, "final_loss", json_fmt("%.4f", tr->loss));
    json_put(r, "arena_mb", json_fmt("%.1f", t->m.arena_floats * 4.0 / (1 << 20)));
    json_put(r, "weights", json_utf8(weights));
    for (int i = 0; i < PROF_N; i++) json_put(b, prof_names[i], json_fmt("%.3f", 1e3 * prof_seconds[0][i] / o->steps));
    json_put(b, "other", json_fmt("%.3f", 1e3 * (secs - prof_total) / o->steps));
    json_put(r, "breakdown_ms", b);
    /* the same buckets for every training thread (the first is the main thread's, above) */
    json_t *bt = json_array();
    for (int k = 0; k < shards && k < PROF_THREADS; k++) {
        json_t *o1 = json_object();
        for (int i = 0; i < PROF_N; i++)
            json_put(o1, prof_names[i], json_fmt("%.3f", 1e3 * prof_seconds[k][i] / o->steps));
        json_array_append_new(bt, o1);
    }
    json_put(r, "breakdown_ms_by_thread", bt);
    json_t *tls = timeline_summary(&tr->tl);
    if (o->timeline) json_put(tls, "per_step", timeline_steps(&tr->tl));
    json_put(r, "timeline", tls);
    /* the step's products as sgemm runs them alone (bench_shapes.h); 0 if not measured */
    json_put(r, "products_alone_ms", json_fmt("%.3f", 1e3 * alone.seconds));
    json_put(r, "products_alone_flops_per_step", json_fmt("%.4g", alone.flops));
    json_put(r, "products_alone_gflops", json_fmt("%.2f", alone.seconds > 0 ? alone.flops / alone.seconds / 1e9 : 0.0));
    char *text = xcheck(json_dumps(r, JSON_WRITE_FLAGS));
    printf("%s\n", text);
    free(text);
    json_decref(r);
}

/* The dump's files published as one set, the stop signals held over it: the batches file
 * (bf, written as the steps ran), the trained weights (with_weights: so that the peer
 * decodes with the very same model) and the dump that names them. The weights and the dump
 * are written beside their places first, then the batches file is committed, and only then
 * are the other two renamed into place: one that cannot be written (a full disk) leaves an
 * earlier run's set whole, never a dump beside another run's batches or weights. 0, or -1
 * with the error set. */
static int publish_dump(Trainer *t, const BenchOpts *o, AtomicStream *bf, const json_t *dump, int with_weights) {
    char weights_tmp[1200], dump_tmp[1200];
    if (tmp_name(weights_tmp, sizeof weights_tmp, o->weights) != 0 || tmp_name(dump_tmp, sizeof dump_tmp, o->dump) != 0)
        return atomic_stream_abandon(bf), -1;
    signals_hold();
    /* a write that failed as the steps ran: its error, and nothing more written */
    int rc = bf->err ? atomic_stream_commit(bf, o->batches) : 0;
    if (rc == 0 && with_weights) {
        CkptMeta meta = {.valid_loss = NAN,
                         .best_valid_loss = NAN,
                         .valid_bleu = NAN,
                         .best_valid_bleu = NAN,
                         .config = ""};
        rc = ckpt_save(weights_tmp, &t->m, NULL, &meta);
    }
    if (rc == 0) rc = finish_dump(dump, dump_tmp);
    if (rc == 0) rc = atomic_stream_commit(bf, o->batches);
    else atomic_stream_abandon(bf); /* nothing, where the commit above closed it */
    /* renames in one folder: nothing left to run out of */
    if (rc == 0 && with_weights) rc = rename_into_place(weights_tmp, o->weights);
    if (rc == 0) rc = rename_into_place(dump_tmp, o->dump);
    if (rc != 0) unlink(weights_tmp), unlink(dump_tmp);
    signals_release();
    return rc;
}

/* After training: decode, then publish the dump's set (publish_dump), then print. The exit
 * status: 0, or status (a failed write before), or a failed write's here. */
static int decode_and_report(Trainer *t, const BenchOpts *o, const Corpus *dc, double peak, const TrainTimes *tr,
                             json_t *dump, AtomicStream *bf, int status) {
    openblas_set_num_threads(t->run.cfg.train.threads); /* decoding uses OpenBLAS's own threads */
    int nd = decode_count(o, dc);
    Seq *out = xmalloc(sizeof(Seq) * (size_t)(nd ? nd : 1));
    progress("greedy decoding of %d sentences", nd);
    double t0 = now_seconds();
    greedy_decode(&t->m, dc->src, nd, out);
    double t_decode = now_seconds() - t0;
    long out_tokens = 0;
    for (int i = 0; i < nd; i++) out_tokens += out[i].len, free(out[i].ids);
    /* beam search as translate runs it by default */
    DecodeOptions beam = decode_defaults();
    progress("beam search of %d sentences", nd);
    t0 = now_seconds();
    decode(&t->m, dc->src, nd, &beam, out, NULL);
    double t_beam = now_seconds() - t0;
    for (int i = 0; i < nd; i++) free(out[i].ids);
    free(out);
    progress(NULL); /* an error of the dump's write starts a line of its own */
    const char *weights = "";
    if (dump) {
        put_decode_sources(dump, dc, nd);
        json_put(dump, "decode_out_tokens", json_integer(out_tokens));
        json_put(dump, "steps", json_integer(o->steps));
        json_put(dump, "weights", json_utf8(o->weights));
        if (publish_dump(t, o, bf, dump, 1) != 0) status = write_failed(status);
        else weights = o->weights;
    }
    print_result(t, o, peak, tr, t_decode, nd, out_tokens, t_beam, weights);
    return status;
}

/* --batches-only: the dump of warmup + steps batches in training order, untrained, for a
 * peer that trains on its own clock (scripts/race_torch.py). */
static int write_batches_only(Trainer *t, const BenchOpts *o, const Corpus *dc, json_t *dump, AtomicStream *bf) {
    for (int step = 1; step <= o->warmup + o->steps; step++) {
        ModelBatch mb;
        int tok = batcher_next(&t->tb, &mb);
        write_batch(bf, &mb, tok);
    }
    put_decode_sources(dump, dc, decode_count(o, dc));
    json_put(dump, "steps", json_integer(o->steps));
    json_put(dump, "batches_file", json_utf8(o->batches));
    int rc = publish_dump(t, o, bf, dump, 0);
    json_decref(dump);
    if (rc != 0) return cmd_fail(err_status());
    json_t *r = json_object();
    json_put(r, "batches", json_integer(o->warmup + o->steps));
    json_put(r, "dump", json_utf8(o->dump));
    char *text = xcheck(json_dumps(r, JSON_WRITE_FLAGS));
    printf("%s\n", text);
    free(text);
    json_decref(r);
    return 0;
}

/* --timeline: the last (at most) eight timed steps, drawn; -1 with the error set. */
static int write_timeline(const char *path, const Timeline *tl) {
    enum { SHOWN = 8 };
    int first = tl->steps > SHOWN ? tl->steps - SHOWN : 0;
    char title[160];
    json_t *sum = timeline_summary(tl);
    /* the share is over every timed step, the picture of the last few: the title says both */
    snprintf(title, sizeof title,
             "%d training threads, steps %d-%d of %d timed shown; over all %d, %.1f%% of their "
             "time waiting",
             tl->threads, first + 1, tl->steps, tl->steps, tl->steps,
             100 * json_real_value(json_object_get(sum, "waiting_share")));
    json_decref(sum);
    char *svg = timeline_svg(tl, first, tl->steps - first, title);
    int rc = write_file_atomic(path, svg, strlen(svg));
    free(svg);
    return rc;
}

/* Everything after the ceiling: set-up, training, decoding. Returns the exit status. */
static int bench(Trainer *t, const BenchOpts *o, double peak, Corpus *valid) {
    int has_valid, rc = bench_setup(t, valid, &has_valid);
    if (rc != 0) return rc;
    /* the batches are written as the steps run, into a tmp file published with the dump at the end */
    AtomicStream stream, *bf = o->dump ? &stream : NULL;
    if (bf && atomic_stream_open(bf, o->batches) != 0) return cmd_fail(err_status());
    json_t *dump = bf ? dump_header(t, o->warmup) : NULL;
    if (o->batches_only) return write_batches_only(t, o, has_valid ? valid : &t->train, dump, bf);
    TrainTimes tr = time_training(t, o, bf);
    /* a failed write makes the exit status; the figures are out either way */
    int status = o->timeline && write_timeline(o->timeline, &tr.tl) != 0 ? write_failed(0) : 0;
    workers_stop(t->workers); /* the training threads are idle from here on */
    t->workers = t->ts.workers = NULL;
    if (dump) json_put(dump, "batches_file", json_utf8(o->batches));
    status = decode_and_report(t, o, has_valid ? valid : &t->train, peak, &tr, dump, bf, status);
    json_decref(dump);
    free_times(&tr);
    return status;
}

int cmd_bench(int argc, char **argv) {
    BenchOpts o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0) return rc;
    if (o.translate) return bench_translate(o.config, o.translate, o.ceiling);
    Trainer t = {0};
    if (load_config(&t.run.cfg, &o) != 0) return cmd_fail(2);
    if ((rc = check_outputs(&o, t.run.cfg.run_dir)) != 0) return rc;
    openblas_set_num_threads(t.run.cfg.train.threads);
    /* the ceiling at the training threads' count: measured here, or given (measured by an
     * earlier `qkv bench --peak` in the same benchmark run, so that its matrices do not
     * count in peak RSS) */
    int threads = t.run.cfg.train.threads;
    if (o.ceiling <= 0) progress("the sgemm ceiling on %d thread%s", threads, threads == 1 ? "" : "s");
    Ceiling ceiling = {.best = o.ceiling};
    if (o.ceiling <= 0) bench_ceiling_measure(threads, &ceiling);
    double peak = ceiling.best;
    progress(NULL);
    if (o.peak_only) {
        json_t *r = json_object();
        json_put(r, "corename", json_string(openblas_get_corename()));
        if (kernels_openblas_picked()) json_put(r, "openblas_chose", json_string(kernels_openblas_picked()));
        json_put(r, "threads", json_integer(threads));
        json_put(r, "peak_gflops", json_fmt("%.1f", peak));
        /* how much the rounds moved: a ceiling is read beside its spread */
        json_put(r, "peak_median_gflops", json_fmt("%.1f", ceiling.median));
        json_put(r, "peak_low_gflops", json_fmt("%.1f", ceiling.low));
        json_put(r, "peak_rounds", json_integer(CEILING_ROUNDS));
        json_put(r, "peak_warm_s", json_fmt("%.1f", CEILING_WARM_S));
        /* one thread's, so that a share of it per thread can be read beside */
        double one = threads == 1 ? peak : bench_ceiling(1);
        json_put(r, "peak_1thread_gflops", json_fmt("%.1f", one));
        char *text = xcheck(json_dumps(r, JSON_WRITE_FLAGS));
        /* for a person on stderr, the JSON alone on stdout for a script */
        char said[256];
        ceiling_describe(&ceiling, said, sizeof said);
        fprintf(stderr, "sgemm ceiling on %d thread%s: %s; %.1f on one (OpenBLAS %s kernels)\n", threads,
                threads == 1 ? "" : "s", said, one, openblas_get_corename());
        printf("%s\n", text);
        free(text);
        json_decref(r);
        return 0;
    }
    Corpus valid = {0};
    rc = bench(&t, &o, peak, &valid);
    corpus_free(&valid);
    trainer_free(&t);
    return rc;
}
