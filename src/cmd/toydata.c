/* toydata: `qkv toy-data DIR`, the synthetic corpora the tests and the demo train on. */
#include <stdint.h>
#include <stdio.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/options.h"
#include "data/toycorpus.h"
#include "util/err.h"

static const CmdOption options[] = {
    {'t', "task", "TASK",
     "translate (the toy language pair), copy, reverse, or particles (the pair with unaligned case particles)",
     "translate"},
    {'n', "train", "N", "training pairs", "20000"},
    {'v', "valid", "N", "validation pairs", "500"},
    {'e', "test", "N", "test pairs", "500"},
    {'s', "seed", "S", "the same seed writes the same files", "1"},
    {0},
};
const CmdSpec cmd_toy_data_spec = {
    .name = "toy-data",
    .operands = "DIR [options]",
    .summary = "write the synthetic toy corpora: DIR/{train,valid,test}.{src,tgt,align}",
    .about = "The translate task is a small language pair with gender and number agreement and its own\n"
             "word order (src/data/toycorpus.c), with gold word alignments for scoring attention. The\n"
             "particles task is the same pairs with two case particles in the target (\"ga\" after the\n"
             "subject, \"wo\" after the object) that no source word stands for: their gold leaves them\n"
             "unaligned, for scoring an aligner's decision to link nothing.",
    .options = options,
    .example = "qkv toy-data data/toy --train 20000 --seed 1",
};

int cmd_toy_data(int argc, char **argv) {
    const char *task = "translate";
    long n_train = 20000, n_valid = 500, n_test = 500, seed = 1;
    int c;
    while ((c = cmd_option_next(&cmd_toy_data_spec, argc, argv)) >= 0) {
        long *dst = c == 'n' ? &n_train : c == 'v' ? &n_valid : c == 'e' ? &n_test : &seed;
        const char *name = c == 'n' ? "--train" : c == 'v' ? "--valid" : c == 'e' ? "--test" : "--seed";
        if (c == 't') task = optarg;
        else if (cmd_long(name, c == 's' ? "a seed from 0 to 10000000" : "a count from 0 to 10000000", optarg, 0,
                          10000000, dst) != 0)
            return cmd_fail(2);
    }
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1) return cmd_usage_of(&cmd_toy_data_spec);
    if (toydata_write(argv[optind], task, (int)n_train, (int)n_valid, (int)n_test, (uint64_t)seed) != 0)
        return cmd_fail(err_status());
    printf("wrote %s/{train,valid,test}.{src,tgt,align}: %ld/%ld/%ld pairs of the '%s' task\n", argv[optind], n_train,
           n_valid, n_test, task);
    return 0;
}
