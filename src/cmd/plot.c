/* plot: `qkv plot RUN`, redraws RUN/curves.svg from RUN/metrics.jsonl. */
#include <stdio.h>

#include "cmd/cmdutil.h"
#include "cmd/commands.h"
#include "train/curves.h"
#include "util/err.h"

int cmd_plot(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-')
        return cmd_usage("qkv plot RUN_DIR   (writes RUN_DIR/curves.svg from RUN_DIR/metrics.jsonl)");
    char m[2048], s[2048];
    snprintf(m, sizeof m, "%s/metrics.jsonl", argv[1]);
    snprintf(s, sizeof s, "%s/curves.svg", argv[1]);
    if (curves_plot(m, s) != 0) return cmd_fail(err_status());
    printf("wrote %s\n", s);
    return 0;
}
