/* commands: see commands.h. The table, and `qkv help [COMMAND]`, which reads it aloud (the
 * list of commands, or one command's help: the same text as `qkv COMMAND --help`); in one
 * file, as each needs the other. The order is the order `qkv help` lists them in. */
#include "cmd/commands.h"

#include <stdio.h>
#include <string.h>

#include "cmdlib/cmdutil.h"
#include "util/err.h"

const Command commands[] = {
    {cmd_train, &cmd_train_spec},         {cmd_resume, &cmd_resume_spec},       {cmd_info, &cmd_info_spec},
    {cmd_translate, &cmd_translate_spec}, {cmd_eval, &cmd_eval_spec},           {cmd_export, &cmd_export_spec},
    {cmd_score, &cmd_score_spec},         {cmd_attention, &cmd_attention_spec}, {cmd_align, &cmd_align_spec},
    {cmd_explain, &cmd_explain_spec},     {cmd_patch, &cmd_patch_spec},         {cmd_whatif, &cmd_whatif_spec},
    {cmd_heads, &cmd_heads_spec},         {cmd_serve, &cmd_serve_spec},         {cmd_report, &cmd_report_spec},
    {cmd_plot, &cmd_plot_spec},           {cmd_bench, &cmd_bench_spec},         {cmd_grads, &cmd_grads_spec},
    {cmd_toy_data, &cmd_toy_data_spec},   {cmd_help, &cmd_help_spec},
};
const int n_commands = (int)(sizeof commands / sizeof commands[0]);

const Command *command_find(const char *name) {
    for (int i = 0; i < n_commands; i++)
        if (strcmp(commands[i].spec->name, name) == 0) return &commands[i];
    return NULL;
}

static const CmdOption options[] = {{0}};
const CmdSpec cmd_help_spec = {
    .name = "help",
    .operands = "[COMMAND]",
    .summary = "the list of commands, or one command's usage, options and an example",
    .options = options,
    .example = "qkv help translate",
};

void command_list(FILE *out) {
    fprintf(out, "usage: qkv COMMAND [ARGS]   (qkv help COMMAND, or qkv COMMAND --help, for its options)\n\n");
    for (int i = 0; i < n_commands; i++)
        fprintf(out, "  %-10s %s\n", commands[i].spec->name, commands[i].spec->summary);
}

int cmd_help(int argc, char **argv) {
    int c = argc > 0 ? cmd_option_next(&cmd_help_spec, argc, argv) : CMD_OPTIONS_END;
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (argc <= 0 || optind == argc) {
        command_list(stdout);
        return 0;
    }
    if (optind != argc - 1) return cmd_usage_of(&cmd_help_spec);
    const Command *cmd = command_find(argv[optind]);
    if (!cmd) return err_set("'%s' is not a command; see 'qkv help'", argv[optind]), cmd_fail(2);
    cmd_help_print(cmd->spec, stdout);
    return 0;
}
