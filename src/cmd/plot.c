/* plot: `qkv plot RUN`, redraws RUN/curves.svg from RUN/metrics.jsonl. */
#include <stdio.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/options.h"
#include "run/curves.h"
#include "util/err.h"

static const CmdOption options[] = {{0}};
const CmdSpec cmd_plot_spec = {
    .name = "plot",
    .operands = "RUN_DIR",
    .summary = "training curves as a picture: RUN_DIR/curves.svg from RUN_DIR/metrics.jsonl",
    .about = "Training redraws the same picture at each validation; this draws it again, e.g. for a run\n"
             "copied from another machine.",
    .options = options,
    .example = "qkv plot runs/toy",
};

int cmd_plot(int argc, char **argv) {
    int c = cmd_option_next(&cmd_plot_spec, argc, argv);
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1) return cmd_usage_of(&cmd_plot_spec);
    char m[2048], s[2048];
    snprintf(m, sizeof m, "%s/metrics.jsonl", argv[optind]);
    snprintf(s, sizeof s, "%s/curves.svg", argv[optind]);
    if (curves_plot(m, s) != 0) return cmd_fail(err_status());
    printf("wrote %s\n", s);
    return 0;
}
