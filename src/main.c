/* main: the command table and dispatch, nothing else (git's git.c). Each command lives
 * in src/cmd/<name>.c, parses its own options and returns the exit status:
 * 0 success, 1 runtime failure, 2 usage/config/input error. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"

static int cmd_help(int argc, char **argv);

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"train", cmd_train, "train a new model from a config: qkv train CONFIG.yaml [--set key=value ...] [--force]"},
    {"resume", cmd_resume, "continue a run from its latest checkpoint: qkv resume RUN [--steps N] [--threads N]"},
    {"info", cmd_info, "what a checkpoint holds, verified: qkv info CHECKPOINT.safetensors"},
    {"translate", cmd_translate, "translate stdin to stdout: qkv translate RUN [--beam K | --greedy] [--nbest N]"},
    {"eval", cmd_eval, "translate a test set and score it: qkv eval RUN --src F --ref F [--beam K | --greedy]"},
    {"export", cmd_export, "weights for use, not resuming: qkv export RUN [--average N] --out FILE.safetensors"},
    {"score", cmd_score, "BLEU and chrF as sacrebleu computes them: qkv score HYP REF [--sentence] [--json]"},
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
    /* past a file size limit (ulimit -f) a write fails with EFBIG, reported as one line
     * with the tmp file removed, rather than the process dying half-way through it */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        cmd_help(0, NULL);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) name = "help";
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(commands[i].name, name) != 0) continue;
        /* getopt names argv[0] in its messages: make them read "qkv: train: ..." */
        char label[64];
        snprintf(label, sizeof label, "qkv: %s", commands[i].name);
        argv[1] = label;
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
