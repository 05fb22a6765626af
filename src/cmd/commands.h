/* commands: the subcommands that live in files of their own (main.c dispatches). Each
 * parses its own options and returns the exit status. */
#ifndef QKV_COMMANDS_H
#define QKV_COMMANDS_H

int cmd_attention(int argc, char **argv);
int cmd_align(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
