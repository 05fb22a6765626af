/* grads: `qkv grads RUN --out DIR`, one batch's loss and gradients for parity checks
 * against another implementation (scripts/parity.py reads what it writes). */
#include <stdio.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/options.h"
#include "train/grad_dump.h"
#include "util/err.h"

static const CmdOption options[] = {
    {'o', "out", "DIR", "where grads.safetensors and batch.json go (required)", NULL},
    {'b', "batch", "K", "which training batch, in length order", "0"},
    {0},
};
const CmdSpec cmd_grads_spec = {
    .name = "grads",
    .operands = "RUN --out DIR [--batch K]",
    .summary = "one batch's loss and gradients, for parity checks against another implementation",
    .about = "Runs training batch K of the run's corpus through the model of its latest checkpoint,\n"
             "dropout off, and writes the loss and every parameter's gradient (scripts/parity.py\n"
             "compares them with PyTorch's).",
    .options = options,
    .example = "qkv grads runs/toy --out /tmp/grads --batch 3",
};

int cmd_grads(int argc, char **argv) {
    const char *out = NULL;
    int batch = 0, c;
    while ((c = cmd_option_next(&cmd_grads_spec, argc, argv)) >= 0) {
        if (c == 'o') out = optarg;
        else if (cmd_int("--batch", "a batch number", optarg, 0, 1000000000, &batch) != 0) return cmd_fail(2);
    }
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1 || !out) return cmd_usage_of(&cmd_grads_spec);
    if (grad_dump_write(argv[optind], out, batch) != 0) return cmd_fail(err_status());
    printf("wrote %s/grads.safetensors and %s/batch.json\n", out, out);
    return 0;
}
