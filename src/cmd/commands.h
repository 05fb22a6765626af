/* commands: the table of qkv's commands, one file each in src/cmd/ (git's builtin/):
 * cmd/NAME.c holds cmd_NAME and cmd_NAME_spec, its options table (cmdlib/options.h) from
 * which both its parser and its --help come (toydata.c is `qkv toy-data`, and train.c
 * holds resume too). A command returns the exit status: 0
 * success, 1 runtime failure, 2 usage/config/input error.
 *
 * Adding a command: write src/cmd/NAME.c with its spec and function (copy a small one,
 * such as plot.c), declare both below, and add one row to commands[] in commands.c. The
 * help tests then check it: tests/test_options.c that its help names every option of its
 * table, tests/cli.sh that `qkv NAME --help` answers and the parser takes each option. */
#ifndef QKV_COMMANDS_H
#define QKV_COMMANDS_H

#include <stdio.h>

#include "cmdlib/options.h"

typedef struct {
    int (*fn)(int argc, char **argv);
    const CmdSpec *spec; /* its name, summary and options */
} Command;

extern const Command commands[];
extern const int n_commands;
/* The command named name, or NULL. */
const Command *command_find(const char *name);
/* The usage line and every command with its summary, to out. */
void command_list(FILE *out);

int cmd_train(int argc, char **argv);  /* train.c */
int cmd_resume(int argc, char **argv); /* train.c */
int cmd_info(int argc, char **argv);
int cmd_translate(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_attention(int argc, char **argv);
int cmd_align(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_patch(int argc, char **argv);
int cmd_whatif(int argc, char **argv);
int cmd_heads(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_grads(int argc, char **argv);
int cmd_toy_data(int argc, char **argv); /* toydata.c */
int cmd_help(int argc, char **argv);     /* commands.c */

extern const CmdSpec cmd_train_spec, cmd_resume_spec, cmd_info_spec, cmd_translate_spec, cmd_eval_spec, cmd_export_spec,
    cmd_score_spec, cmd_attention_spec, cmd_align_spec, cmd_explain_spec, cmd_patch_spec, cmd_whatif_spec,
    cmd_heads_spec, cmd_serve_spec, cmd_report_spec, cmd_plot_spec, cmd_bench_spec, cmd_grads_spec, cmd_toy_data_spec,
    cmd_help_spec;

#endif
