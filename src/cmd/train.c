/* train: `qkv train CONFIG` (a new run) and `qkv resume RUN` (continue one). */
#include <getopt.h>
#include <stdio.h>

#include "cmd/cmdutil.h"
#include "cmd/commands.h"
#include "config.h"
#include "train/train.h"

int cmd_train(int argc, char **argv) {
    static const struct option opts[] = {{"set", required_argument, 0, 's'}, {"force", no_argument, 0, 'f'}, {0}};
    int force = 0, c;
    char *sets[64];
    int n_sets = 0;
    while ((c = getopt_long(argc, argv, "s:f", opts, NULL)) != -1) {
        if (c == 's' && n_sets < 64) sets[n_sets++] = optarg;
        else if (c == 'f') force = 1;
        else return 2;
    }
    if (optind != argc - 1) return cmd_usage("qkv train CONFIG.yaml [--set key=value ...] [--force]");
    Config cfg;
    config_defaults(&cfg);
    if (config_load(&cfg, argv[optind]) != 0) return cmd_fail(2);
    for (int i = 0; i < n_sets; i++)
        if (config_set(&cfg, sets[i]) != 0) return cmd_fail(2);
    if (config_validate(&cfg, 1) != 0) return cmd_fail(2);
    return train_main(&cfg, force);
}

int cmd_resume(int argc, char **argv) {
    static const struct option opts[] = {{"steps", required_argument, 0, 's'}, {0}};
    int steps = 0, c;
    while ((c = getopt_long(argc, argv, "s:", opts, NULL)) != -1) {
        if (c != 's') return 2;
        if (cmd_int("--steps", "a positive step count", optarg, 1, 2000000000, &steps) != 0) return cmd_fail(2);
    }
    if (optind != argc - 1) return cmd_usage("qkv resume RUN_DIR [--steps N]");
    return resume_main(argv[optind], steps);
}
