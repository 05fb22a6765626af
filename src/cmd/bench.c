/* bench: `qkv bench`, the measurements behind `make bench`.
 *
 * In one process: the machine's sgemm rate (the ceiling), then training steps of the
 * configured model on its corpus with a per-op time breakdown, achieved GFLOP/s from the
 * counted FLOPs of every matrix product, peak RSS, and greedy decoding speed. The
 * batches it trains on (and the sentences it decodes) can be written out so the PyTorch
 * reference (scripts/bench_torch.py) runs exactly the same work. Prints one JSON line. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "data/batch.h"
#include "train/checkpoint.h"
#include "cmd/commands.h"
#include "config.h"
#include "data/corpus.h"
#include "infer/decode.h"
#include "nn/optim.h"
#include "nn/profile.h"
#include "train/run.h"
#include "train/train.h"
#include "util.h"

/* Best of a few runs of an n x n x n product: what OpenBLAS gets on this machine. */
static double sgemm_gflops(int n) {
    float *a = xmalloc(sizeof(float) * (size_t)n * n), *b = xmalloc(sizeof(float) * (size_t)n * n),
          *c = xmalloc(sizeof(float) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    double best = 0;
    int reps = n >= 2048 ? 3 : 8;
    for (int r = 0; r < reps; r++) {
        double t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double g = 2.0 * n * n * (double)n / (now_seconds() - t0) / 1e9;
        if (r > 0 && g > best) best = g; /* the first run warms the threads and caches */
    }
    free(a), free(b), free(c);
    return best;
}

/* FLOPs of one training step: every matrix product forward (2mnk), and twice that
 * backward (the input and the weight gradients; for attention, the four products of
 * dP, dV, dQ, dK). Element-wise work is not counted. Padded shapes: what is computed. */
double bench_step_flops(const ModelConfig *c, int B, int S, int T) {
    double d = c->d_model, ff = c->d_ff, Ns = (double)B * S, Nt = (double)B * T, V = c->tgt_vocab;
    double enc = 4 * 2 * Ns * d * d + 2 * 2 * Ns * d * ff + 2 * 2 * (double)B * S * S * d;
    double dec = 4 * 2 * Nt * d * d + 2 * 2 * (double)B * T * T * d   /* masked self */
               + 2 * 2 * Nt * d * d + 2 * 2 * Ns * d * d + 2 * 2 * (double)B * T * S * d /* cross */
               + 2 * 2 * Nt * d * ff;
    double fwd = c->encoder_layers * enc + c->decoder_layers * dec + 2 * Nt * d * V;
    return 3 * fwd;
}

static void json_ints(FILE *f, const int *v, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", v[i]);
    fputc(']', f);
}

int cmd_bench(int argc, char **argv) {
    static const struct option opts[] = {{"set", required_argument, 0, 's'},    {"steps", required_argument, 0, 'n'},
                                         {"warmup", required_argument, 0, 'w'}, {"dump", required_argument, 0, 'd'},
                                         {"decode", required_argument, 0, 'k'}, {"peak", no_argument, 0, 'p'},
                                         {"ceiling", required_argument, 0, 'c'}, {0}};
    char *sets[64];
    int n_sets = 0, steps = 50, warmup = 5, n_decode = 200, peak_only = 0, c;
    double ceiling = 0;
    const char *dump = NULL;
    while ((c = getopt_long(argc, argv, "s:n:w:d:k:p", opts, NULL)) != -1) {
        switch (c) {
        case 's': if (n_sets < 64) sets[n_sets++] = optarg; break;
        case 'n': steps = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'd': dump = optarg; break;
        case 'k': n_decode = atoi(optarg); break;
        case 'p': peak_only = 1; break;
        case 'c': ceiling = atof(optarg); break;
        default: return 2;
        }
    }
    if (optind != argc - 1 || steps < 1 || warmup < 0 || n_decode < 0) {
        fprintf(stderr, "usage: qkv bench CONFIG.yaml [--set key=value ...] [--steps N] [--warmup N] [--decode N] "
                        "[--dump FILE.json] [--peak | --ceiling GFLOPS]\n");
        return 2;
    }
    Config cfg;
    config_defaults(&cfg);
    if (config_load(&cfg, argv[optind]) != 0) goto bad_input;
    for (int i = 0; i < n_sets; i++)
        if (config_set(&cfg, sets[i]) != 0) goto bad_input;
    if (config_validate(&cfg, 1) != 0) goto bad_input;
    openblas_set_num_threads(cfg.train.threads);
    /* the ceiling: measured here, or given (measured by an earlier `qkv bench --peak` in
     * the same benchmark run, so that its 48 MB of matrices do not count in peak RSS) */
    double peak = ceiling > 0 ? ceiling : fmax(sgemm_gflops(1024), sgemm_gflops(2048));
    if (peak_only) {
        printf("{\"corename\": \"%s\", \"threads\": %d, \"peak_gflops\": %.1f}\n", openblas_get_corename(),
               openblas_get_num_threads(), peak);
        return 0;
    }
    /* data and vocabularies as `qkv train` makes them, without a run directory */
    Corpus train, valid = {0};
    if (corpus_read(&train, cfg.data.train.src, cfg.data.train.tgt, cfg.data.tokenizer, cfg.data.max_len) != 0)
        goto bad_input;
    int has_valid = cfg.data.valid.src[0] != '\0';
    if (has_valid &&
        corpus_read(&valid, cfg.data.valid.src, cfg.data.valid.tgt, cfg.data.tokenizer, cfg.data.max_len) != 0)
        goto bad_input;
    Vocab sv, tv;
    corpus_build_vocabs(&train, cfg.data.tokenizer, cfg.data.vocab_size, cfg.data.min_freq, cfg.data.shared_vocab, &sv,
                        &tv);
    corpus_encode(&train, cfg.data.tokenizer, &sv, &tv);
    if (has_valid) corpus_encode(&valid, cfg.data.tokenizer, &sv, &tv);

    ModelConfig mc = run_model_config(&cfg, sv.size, tv.size);
    Model m;
    if (model_init(&m, &mc) != 0) goto bad_input;
    model_init_weights(&m, (uint64_t)cfg.seed);
    Batcher tb;
    batcher_init(&tb, &train, cfg.train.batch_tokens, (uint64_t)cfg.seed, 1);
    Adam adam;
    adam_init(&adam, m.n_params, cfg.train.adam.beta1, cfg.train.adam.beta2, cfg.train.adam.eps,
              cfg.train.adam.weight_decay);
    Workers *workers = train_workers(&m, &adam, cfg.train.threads, &tb, 0);
    if (!workers) {
        fprintf(stderr, "qkv: %s\n", err_msg());
        return 1;
    }
    TrainStep ts = {workers, &tb,
                    {cfg.train.lr.schedule, cfg.train.lr.factor, cfg.train.lr.warmup, cfg.model.d_model, cfg.train.lr.value},
                    cfg.train.clip_norm, (uint64_t)cfg.seed, {0}};
    FILE *df = NULL;
    if (dump) {
        df = fopen(dump, "w");
        if (!df) {
            err_set("%s: %s", dump, strerror(errno));
            goto bad_input;
        }
        fprintf(df, "{\"src_vocab\": %d, \"tgt_vocab\": %d, \"d_model\": %d, \"heads\": %d, \"d_ff\": %d, "
                    "\"encoder_layers\": %d, \"decoder_layers\": %d, \"dropout\": %g, \"pre_norm\": %d, "
                    "\"tie_embeddings\": %d, \"label_smoothing\": %g, \"clip_norm\": %g, \"lr_factor\": %g, "
                    "\"warmup\": %d, \"beta1\": %g, \"beta2\": %g, \"eps\": %g, \"warmup_steps\": %d, \"batches\": [",
                mc.src_vocab, mc.tgt_vocab, mc.d_model, mc.heads, mc.d_ff, mc.encoder_layers, mc.decoder_layers,
                mc.dropout, mc.pre_norm, mc.tie_embeddings, mc.label_smoothing, cfg.train.clip_norm, cfg.train.lr.factor,
                cfg.train.lr.warmup, cfg.train.adam.beta1, cfg.train.adam.beta2, cfg.train.adam.eps, warmup);
    }
    double flops = 0, t_train = 0;
    long tokens = 0;
    int tok, bmax = 0;
    double lr, loss = 0;
    for (int step = 1; step <= warmup + steps; step++) {
        /* peek at the batch this step will take, for the FLOP count and the dump */
        if (tb.pos >= tb.n_batches) batcher_seek(&tb, tb.epoch + 1, 0);
        int k = tb.perm[tb.pos];
        const BatchSpec *spec = &tb.batches[k];
        if (df) {
            ModelBatch mb;
            batcher_get(&tb, k, &mb);
            fprintf(df, "%s\n{\"B\": %d, \"S\": %d, \"T\": %d, \"tokens\": %d, \"src\": ", step > 1 ? "," : "", mb.B, mb.S,
                    mb.T, spec->tokens);
            json_ints(df, mb.src, mb.B * mb.S), fprintf(df, ", \"src_len\": "), json_ints(df, mb.src_len, mb.B);
            fprintf(df, ", \"tgt_in\": "), json_ints(df, mb.tgt_in, mb.B * mb.T);
            fprintf(df, ", \"tgt_out\": "), json_ints(df, mb.tgt_out, mb.B * mb.T);
            fprintf(df, ", \"tgt_len\": "), json_ints(df, mb.tgt_len, mb.B), fprintf(df, "}");
        }
        if (step == warmup + 1) {
            memset(prof_seconds, 0, sizeof prof_seconds);
            prof_enabled = 1;
        }
        double t0 = now_seconds();
        loss = train_step(&ts, step, &tok, &lr);
        double dt = now_seconds() - t0;
        if (step > warmup) {
            t_train += dt;
            tokens += tok;
            flops += bench_step_flops(&mc, spec->count, spec->S, spec->T);
            if (spec->count > bmax) bmax = spec->count;
        }
    }
    prof_enabled = 0;
    workers_stop(workers);
    /* the trained weights, so the peer decodes with the very same model (same work) */
    char weights[1100] = "";
    if (dump) {
        snprintf(weights, sizeof weights, "%s.safetensors", dump);
        CkptMeta meta = {.valid_loss = NAN, .best_valid_loss = NAN, .config = ""};
        if (ckpt_save(weights, &m, NULL, &meta) != 0) fprintf(stderr, "qkv: %s\n", err_msg()), weights[0] = '\0';
    }
    openblas_set_num_threads(cfg.train.threads); /* decoding uses OpenBLAS's own threads */
    /* greedy decoding of validation (else training) sources */
    const Corpus *dc = has_valid ? &valid : &train;
    int nd = n_decode < dc->n ? n_decode : dc->n;
    Seq *out = xmalloc(sizeof(Seq) * (size_t)(nd ? nd : 1));
    double t0 = now_seconds();
    greedy_decode(&m, dc->src, nd, out);
    double t_decode = now_seconds() - t0;
    long out_tokens = 0;
    for (int i = 0; i < nd; i++) out_tokens += out[i].len;
    if (df) {
        fprintf(df, "],\n\"decode_src\": [");
        for (int i = 0; i < nd; i++) fprintf(df, "%s", i ? "," : ""), json_ints(df, dc->src[i].ids, dc->src[i].len);
        fprintf(df, "],\n\"decode_out_tokens\": %ld, \"steps\": %d, \"weights\": \"%s\"}\n", out_tokens, steps, weights);
        if (fclose(df) != 0) fprintf(stderr, "qkv: %s: write failed\n", dump);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double prof_total = 0;
    for (int i = 0; i < PROF_N; i++) prof_total += prof_seconds[i];
    printf("{\"impl\": \"qkv\", \"corename\": \"%s\", \"threads\": %d, \"peak_gflops\": %.1f, \"params\": %zu, "
           "\"steps\": %d, \"tokens_per_s\": %.1f, \"step_ms\": %.3f, \"gflops\": %.2f, \"mfu\": %.4f, "
           "\"flops_per_step\": %.4g, \"peak_rss_mb\": %.1f, \"decode_sentences_per_s\": %.1f, \"decoded\": %d, \"decoded_tokens\": %ld, "
           "\"final_loss\": %.4f, \"arena_mb\": %.1f, \"weights\": \"%s\", \"breakdown_ms\": {",
           openblas_get_corename(), openblas_get_num_threads(), peak, m.n_params, steps, tokens / t_train,
           1e3 * t_train / steps, flops / t_train / 1e9, flops / t_train / 1e9 / peak, flops / steps,
           ru.ru_maxrss / 1024.0, nd / t_decode, nd, out_tokens, loss, m.arena_floats * 4.0 / (1 << 20), weights);
    for (int i = 0; i < PROF_N; i++) printf("%s\"%s\": %.3f", i ? ", " : "", prof_names[i], 1e3 * prof_seconds[i] / steps);
    printf(", \"other\": %.3f}}\n", 1e3 * (t_train - prof_total) / steps);
    for (int i = 0; i < nd; i++) free(out[i].ids);
    free(out);
    adam_free(&adam);
    batcher_free(&tb);
    model_free(&m);
    corpus_free(&train), corpus_free(&valid);
    vocab_free(&sv), vocab_free(&tv);
    return 0;
bad_input:
    fprintf(stderr, "qkv: %s\n", err_msg());
    return 2;
}
