/* grads: `qkv grads RUN --out DIR`, one batch's loss and gradients for parity checks
 * against another implementation (scripts/parity.py reads what it writes). */
#include <getopt.h>
#include <stdio.h>

#include "cmd/cmdutil.h"
#include "cmd/commands.h"
#include "train/grad_dump.h"
#include "util/err.h"

int cmd_grads(int argc, char **argv) {
    static const struct option opts[] = {{"out", required_argument, 0, 'o'}, {"batch", required_argument, 0, 'b'}, {0}};
    const char *out = NULL;
    int batch = 0, c;
    while ((c = getopt_long(argc, argv, "o:b:", opts, NULL)) != -1) {
        if (c == 'o') out = optarg;
        else if (c != 'b') return 2;
        else if (cmd_int("--batch", "a batch number", optarg, 0, 1000000000, &batch) != 0) return cmd_fail(2);
    }
    if (optind != argc - 1 || !out) return cmd_usage("qkv grads RUN --out DIR [--batch K]");
    if (grad_dump_write(argv[optind], out, batch) != 0) return cmd_fail(err_status());
    printf("wrote %s/grads.safetensors and %s/batch.json\n", out, out);
    return 0;
}
