/* toydata: `qkv toy-data DIR`, the synthetic corpora the tests and the demo train on. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "cmd/cmdutil.h"
#include "cmd/commands.h"
#include "data/toycorpus.h"
#include "util/err.h"

int cmd_toy_data(int argc, char **argv) {
    static const struct option opts[] = {{"task", required_argument, 0, 't'}, {"train", required_argument, 0, 'n'},
                                         {"valid", required_argument, 0, 'v'}, {"test", required_argument, 0, 'e'},
                                         {"seed", required_argument, 0, 's'}, {0}};
    const char *task = "translate";
    long n_train = 20000, n_valid = 500, n_test = 500, seed = 1;
    int c;
    while ((c = getopt_long(argc, argv, "t:n:v:e:s:", opts, NULL)) != -1) {
        long *dst = c == 'n' ? &n_train : c == 'v' ? &n_valid : c == 'e' ? &n_test : c == 's' ? &seed : NULL;
        if (c == 't') task = optarg;
        else if (!dst) return 2;
        else if (cmd_long("toy-data", "a count", optarg, 0, 10000000, dst) != 0) return cmd_fail(2);
    }
    if (optind != argc - 1)
        return cmd_usage("qkv toy-data DIR [--task translate|copy|reverse] [--train N] [--valid N] [--test N] [--seed S]");
    if (toydata_write(argv[optind], task, (int)n_train, (int)n_valid, (int)n_test, (uint64_t)seed) != 0)
        return cmd_fail(err_status());
    printf("wrote %s/{train,valid,test}.{src,tgt,align}: %ld/%ld/%ld pairs of the '%s' task\n", argv[optind], n_train,
           n_valid, n_test, task);
    return 0;
}
