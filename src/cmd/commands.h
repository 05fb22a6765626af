/* commands: one function per subcommand, one file each in src/cmd/; main.c's table
 * dispatches to them. Each parses its own options (getopt_long) and returns the exit
 * status: 0 success, 1 runtime failure, 2 usage/config/input error. */
#ifndef QKV_COMMANDS_H
#define QKV_COMMANDS_H

int cmd_train(int argc, char **argv);     /* train.c */
int cmd_resume(int argc, char **argv);    /* train.c */
int cmd_info(int argc, char **argv);      /* info.c */
int cmd_translate(int argc, char **argv); /* translate.c */
int cmd_score(int argc, char **argv);     /* score.c */
int cmd_eval(int argc, char **argv);      /* eval.c */
int cmd_export(int argc, char **argv);    /* export.c */
int cmd_attention(int argc, char **argv); /* attention.c */
int cmd_align(int argc, char **argv);     /* align.c */
int cmd_plot(int argc, char **argv);      /* plot.c */
int cmd_bench(int argc, char **argv);     /* bench.c */
int cmd_grads(int argc, char **argv);     /* grads.c */
int cmd_toy_data(int argc, char **argv);  /* toydata.c */

/* The decoding options translate and eval share (translate.c). */
#include <getopt.h>
#include "infer/translator.h"
extern const struct option translate_long_options[9];
TranslateOptions translate_defaults(void);
/* Applies one of translate_long_options: 0, 1 (not one of them), -1 (bad value, error set). */
int translate_parse_option(int c, const char *arg, TranslateOptions *o);

#endif
