/* main: argument parsing and subcommand dispatch, nothing else.
 * Exit codes: 0 success, 1 runtime failure, 2 usage/config/input error. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"
#include "cmd/commands.h"
#include "config.h"
#include "data/corpus.h"
#include "infer/decode.h"
#include "train/plot.h"
#include "train/dump.h"
#include "train/run.h"
#include "data/tokenize.h"
#include "data/toydata.h"
#include "train/train.h"
#include "util.h"

static int fail(int code) {
    fprintf(stderr, "qkv: %s\n", err_msg());
    return code;
}

static int cmd_train(int argc, char **argv) {
    static const struct option opts[] = {{"set", required_argument, 0, 's'}, {"force", no_argument, 0, 'f'}, {0}};
    int force = 0, c;
    char *sets[64];
    int n_sets = 0;
    while ((c = getopt_long(argc, argv, "s:f", opts, NULL)) != -1) {
        if (c == 's' && n_sets < 64) sets[n_sets++] = optarg;
        else if (c == 'f') force = 1;
        else return 2;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: qkv train CONFIG.yaml [--set key=value ...] [--force]\n");
        return 2;
    }
    Config cfg;
    config_defaults(&cfg);
    if (config_load(&cfg, argv[optind]) != 0) return fail(2);
    for (int i = 0; i < n_sets; i++)
        if (config_set(&cfg, sets[i]) != 0) return fail(2);
    if (config_validate(&cfg, 1) != 0) return fail(2);
    return train_main(&cfg, force);
}

static int cmd_translate(int argc, char **argv) {
    static const struct option opts[] = {{"greedy", no_argument, 0, 'g'}, {"beam", required_argument, 0, 'b'}, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "gb:", opts, NULL)) != -1) {
        if (c == 'b') {
            fprintf(stderr, "qkv: --beam: beam search is not implemented yet; use --greedy\n");
            return 2;
        }
        if (c != 'g') return 2;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: qkv translate RUN_DIR|WEIGHTS [--greedy] < source.txt > translation.txt\n");
        return 2;
    }
    Run r;
    if (run_open(&r, argv[optind]) != 0) return fail(2);
    fprintf(stderr, "qkv: translating with %s (%s, step %lld)\n", r.weights, r.which, (long long)r.meta.step);
    int n;
    char **lines = read_lines(stdin, &n);
    int tok = r.cfg.data.tokenizer, max_src = r.model.cfg.max_positions - 1, truncated = 0;
    Seq *src = xmalloc(sizeof(Seq) * (size_t)(n ? n : 1)), *out = xmalloc(sizeof(Seq) * (size_t)(n ? n : 1));
    int *nonempty = xmalloc(sizeof(int) * (size_t)(n ? n : 1)), k = 0;
    for (int i = 0; i < n; i++) {
        int *ids = xmalloc(sizeof(int) * (size_t)(max_src + 1));
        int len = encode_line(lines[i], tok, &r.src_vocab, ids, max_src + 1);
        if (len > max_src) len = max_src, truncated++;
        if (len == 0) {
            free(ids);
            continue;
        }
        src[k] = (Seq){ids, len};
        nonempty[k++] = i;
    }
    if (truncated) fprintf(stderr, "qkv: warning: %d lines longer than %d tokens were truncated\n", truncated, max_src);
    greedy_decode(&r.model, src, k, out);
    size_t cap = 1 << 16;
    char *text = xmalloc(cap);
    for (int i = 0, j = 0; i < n; i++) {
        size_t len = 0;
        text[0] = '\0';
        if (j < k && nonempty[j] == i) {
            for (int t = 0; t < out[j].len; t++)
                detokenize_append(tok, text, cap, &len, vocab_token(&r.tgt_vocab, out[j].ids[t]), t == 0);
            free(out[j].ids), free(src[j].ids);
            j++;
        }
        printf("%s\n", text);
        free(lines[i]);
    }
    free(text), free(lines), free(src), free(out), free(nonempty);
    run_close(&r);
    return 0;
}

static int cmd_toy_data(int argc, char **argv) {
    static const struct option opts[] = {{"task", required_argument, 0, 't'}, {"train", required_argument, 0, 'n'},
                                         {"valid", required_argument, 0, 'v'}, {"test", required_argument, 0, 'e'},
                                         {"seed", required_argument, 0, 's'}, {0}};
    const char *task = "translate";
    long n_train = 20000, n_valid = 500, n_test = 500, seed = 1;
    int c;
    while ((c = getopt_long(argc, argv, "t:n:v:e:s:", opts, NULL)) != -1) {
        char *end;
        long v = 0;
        if (c != 't') {
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (*end || errno || v < 0 || v > 10000000) {
                fprintf(stderr, "qkv: toy-data: '%s' is not a count\n", optarg);
                return 2;
            }
        }
        switch (c) {
        case 't': task = optarg; break;
        case 'n': n_train = v; break;
        case 'v': n_valid = v; break;
        case 'e': n_test = v; break;
        case 's': seed = v; break;
        default: return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: qkv toy-data DIR [--task translate|copy|reverse] [--train N] [--valid N] [--test N] "
                        "[--seed S]\n");
        return 2;
    }
    if (toydata_write(argv[optind], task, (int)n_train, (int)n_valid, (int)n_test, (uint64_t)seed) != 0)
        return fail(2);
    printf("wrote %s/{train,valid,test}.{src,tgt,align}: %ld/%ld/%ld pairs of the '%s' task\n", argv[optind], n_train,
           n_valid, n_test, task);
    return 0;
}

static int cmd_resume(int argc, char **argv) {
    static const struct option opts[] = {{"steps", required_argument, 0, 's'}, {0}};
    long steps = 0;
    int c;
    while ((c = getopt_long(argc, argv, "s:", opts, NULL)) != -1) {
        char *end;
        if (c != 's') return 2;
        errno = 0;
        steps = strtol(optarg, &end, 10);
        if (*end || errno || steps < 1 || steps > 2000000000) {
            fprintf(stderr, "qkv: --steps: '%s' is not a positive step count\n", optarg);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: qkv resume RUN_DIR [--steps N]\n");
        return 2;
    }
    return resume_main(argv[optind], (int)steps);
}

static int cmd_info(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: qkv info CHECKPOINT.safetensors\n");
        return 2;
    }
    CkptFile f;
    if (ckpt_open(&f, argv[1]) != 0) return fail(2);
    const CkptMeta *m = &f.meta;
    printf("%s: %s, %.2f MB\n", f.path, CKPT_FORMAT, (double)f.len / 1e6);
    printf("step %lld (epoch %lld, batch %d of the epoch), seed %lld, %d threads\n", (long long)m->step,
           (long long)m->epoch, m->batch_pos, (long long)m->seed, m->threads);
    printf("validation loss %.4f at this step, best %.4f\n", m->valid_loss, m->best_valid_loss);
    Config cfg;
    config_defaults(&cfg);
    if (config_parse(&cfg, m->config, strlen(m->config), "config") == 0)
        printf("model: d_model %d, %d heads, d_ff %d, %d+%d layers, %s-LN, %s embeddings; %s tokenizer; run %s\n",
               cfg.model.d_model, cfg.model.heads, cfg.model.d_ff, cfg.model.encoder_layers, cfg.model.decoder_layers,
               cfg.model.norm == NORM_PRE ? "pre" : "post", cfg.model.tie_embeddings ? "tied" : "separate",
               cfg.data.tokenizer == TOKENIZER_CHAR ? "char" : "word", cfg.name);
    size_t params = 0;
    int weights = 0;
    for (int i = 0; i < f.n_tensors; i++)
        if (strncmp(f.tensors[i].name, "optim.", 6) != 0) weights++, params += (f.tensors[i].end - f.tensors[i].begin) / 4;
    printf("tensors: %d weights (%zu parameters)%s\n", weights, params, f.has_optim ? " + Adam moments for each" : "");
    for (int i = 0; i < f.n_tensors; i++) {
        const CkptTensor *t = &f.tensors[i];
        if (strncmp(t->name, "optim.", 6) == 0) continue;
        char shape[64] = "";
        for (int d = 0; d < t->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        printf("  %-44s F32 [%s]\n", t->name, shape);
    }
    printf("checksums: header OK, data OK\n");
    ckpt_close(&f);
    return 0;
}

static int cmd_grads(int argc, char **argv) {
    static const struct option opts[] = {{"out", required_argument, 0, 'o'}, {"batch", required_argument, 0, 'b'}, {0}};
    const char *out = NULL;
    long batch = 0;
    int c;
    while ((c = getopt_long(argc, argv, "o:b:", opts, NULL)) != -1) {
        char *end;
        if (c == 'o') out = optarg;
        else if (c == 'b') {
            errno = 0;
            batch = strtol(optarg, &end, 10);
            if (*end || errno || batch < 0 || batch > 1000000000) {
                fprintf(stderr, "qkv: --batch: '%s' is not a batch number\n", optarg);
                return 2;
            }
        } else return 2;
    }
    if (optind != argc - 1 || !out) {
        fprintf(stderr, "usage: qkv grads RUN --out DIR [--batch K]\n");
        return 2;
    }
    if (dump_grads(argv[optind], out, (int)batch) != 0) return fail(2);
    printf("wrote %s/grads.safetensors and %s/batch.json\n", out, out);
    return 0;
}

static int cmd_plot(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: qkv plot RUN_DIR   (writes RUN_DIR/curves.svg from RUN_DIR/metrics.jsonl)\n");
        return 2;
    }
    char m[2048], s[2048];
    snprintf(m, sizeof m, "%s/metrics.jsonl", argv[1]);
    snprintf(s, sizeof s, "%s/curves.svg", argv[1]);
    if (plot_metrics(m, s) != 0) return fail(2);
    printf("wrote %s\n", s);
    return 0;
}

static int cmd_help(int argc, char **argv);

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"train", cmd_train, "train a new model from a config: qkv train CONFIG.yaml [--set key=value ...] [--force]"},
    {"resume", cmd_resume, "continue a run from its latest checkpoint: qkv resume RUN [--steps N]"},
    {"info", cmd_info, "what a checkpoint holds, verified: qkv info CHECKPOINT.safetensors"},
    {"translate", cmd_translate, "translate stdin to stdout: qkv translate RUN [--greedy]"},
    {"attention", cmd_attention, "attention maps of one sentence: qkv attention RUN --text \"...\" [--target \"...\"] [--out DIR]"},
    {"align", cmd_align, "word alignments from cross-attention: qkv align RUN --src F --tgt F [--gold F] [--layer L --head H]"},
    {"plot", cmd_plot, "training curves as a picture: qkv plot RUN (RUN/curves.svg; train draws it too)"},
    {"bench", cmd_bench, "training and decoding speed, the sgemm ceiling, a per-op breakdown (make bench)"},
    {"grads", cmd_grads, "one batch's loss and gradients, for parity checks: qkv grads RUN --out DIR [--batch K]"},
    {"toy-data", cmd_toy_data, "write the synthetic toy corpora: qkv toy-data DIR [--task translate|copy|reverse]"},
    {"help", cmd_help, "this list"},
};

static int cmd_help(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("usage: qkv COMMAND [ARGS]\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) printf("  %-10s %s\n", commands[i].name, commands[i].help);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        cmd_help(0, NULL);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) name = "help";
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(commands[i].name, name) != 0) continue;
        int rc = commands[i].fn(argc - 1, argv + 1);
        /* a full disk shows up here for anything written to stdout */
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "qkv: error writing standard output: %s\n", strerror(errno));
            return rc ? rc : 1;
        }
        return rc;
    }
    fprintf(stderr, "qkv: '%s' is not a command; see 'qkv --help'\n", argv[1]);
    return 2;
}
