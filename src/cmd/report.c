/* report: `qkv report RUN [--out FILE]`, one offline page that tells the story of a run
 * (report/runpage.h). Training rewrites RUN/report.html at each validation; this writes it
 * again, e.g. after qkv eval or qkv heads added to the run, or for a run copied here. */
#include <stdio.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/options.h"
#include "report/runpage.h"
#include "run/files.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/file.h"

static const CmdOption options[] = {
    {'o', "out", "FILE", "where the page goes", "RUN/report.html"},
    {0},
};
const CmdSpec cmd_report_spec = {
    .name = "report",
    .operands = "RUN_DIR [--out FILE]",
    .summary = "one offline page that tells a run's story: setup, curves, evaluations, samples, attention, heads",
    .about = "Built from the run directory alone (config.yaml, metrics.jsonl, journal.jsonl, eval.jsonl,\n"
             "samples.jsonl, watch/, heads/), with nothing loaded from elsewhere: it opens offline. A part\n"
             "the run lacks is named in its section. Training rewrites RUN/report.html at each validation.",
    .options = options,
    .example = "qkv report runs/toy   # then open runs/toy/report.html",
};

int cmd_report(int argc, char **argv) {
    const char *out = NULL;
    int c;
    while ((c = cmd_option_next(&cmd_report_spec, argc, argv)) >= 0) out = optarg;
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1) return cmd_usage_of(&cmd_report_spec);
    if (out && !out[0]) return err_set("--out: an empty file name"), cmd_fail(2);
    /* the page replaces what is at --out: never one of the files the page is made from */
    if (out && path_inside(out, argv[optind], RUN_REPORT))
        return err_set("%s: --out is inside the run %s, whose files the report would replace: choose a file outside "
                       "it, or its report.html",
                       out, argv[optind]),
               cmd_fail(2);
    double t0 = now_seconds();
    long bytes = 0;
    RunPageOptions o = {0};
    if (runpage_write(argv[optind], out, &o, &bytes) != 0) return cmd_fail(err_status());
    printf("wrote %s%s (%ld bytes) in %.2f s\n", out ? out : argv[optind], out ? "" : "/" RUN_REPORT, bytes,
           now_seconds() - t0);
    return 0;
}
