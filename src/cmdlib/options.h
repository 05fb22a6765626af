/* options: a command's options as one table that both parses its command line (through
 * getopt_long) and prints its help (`qkv CMD --help`, `qkv help CMD`), so the two cannot
 * drift: an option the parser takes is an option the help names, with its default.
 * Only the command layer includes this.
 *
 * A command's loop:
 *     int c;
 *     while ((c = cmd_option_next(&spec, argc, argv)) >= 0)
 *         switch (c) { case 'o': out = optarg; break; ... }
 *     if (c != CMD_OPTIONS_END) return cmd_option_status(c);
 * then its operands are argv[optind..argc). */
#ifndef QKV_OPTIONS_H
#define QKV_OPTIONS_H

#include <getopt.h> /* optarg, optind: what a command reads after cmd_option_next */
#include <stdio.h>

typedef struct {
    int key;           /* what cmd_option_next returns for it (a letter, as getopt's val); 0 ends a table */
    const char *name;  /* the long name, without "--" */
    const char *value; /* NULL: a flag; else the value's name in the help ("K", "FILE") */
    const char *help;  /* what it does, one line */
    const char *def;   /* its default as the help shows it; NULL: nothing to show (a flag, or required) */
} CmdOption;

typedef struct {
    const char *name;            /* the command, as typed: "translate" */
    const char *operands;        /* the usage line after the name: "RUN_DIR|WEIGHTS [options] < SOURCE.txt" */
    const char *summary;         /* one line for `qkv help`'s list */
    const char *about;           /* a few lines on what it does, or NULL */
    const CmdOption *options;    /* ended by a row whose key is 0 */
    const CmdOption *shared;     /* a second table another command parses too (translate's and eval's
                                    decoding options), or NULL */
    const char *const *unlisted; /* names of shared rows this command parses only to refuse them with
                                    its own reason: left out of its help (ended by NULL), or NULL */
    const char *example;         /* one command line */
    void (*more)(FILE *out);     /* NULL, or lines of help a command draws from a table of its own
                                    (serve's routes), after the about */
} CmdSpec;

enum {
    CMD_OPTIONS_END = -1,  /* no more options: the operands start at optind */
    CMD_OPTIONS_HELP = -2, /* --help or -h: the help is printed, exit 0 */
    CMD_OPTIONS_BAD = -3,  /* an unknown option or a missing value: getopt said which, exit 2 */
};

/* The next option of argv as its table key, with optarg holding its value, as getopt_long
 * does (starting from optind); one of CMD_OPTIONS_* (< 0) when there is none. --help
 * prints the help to stdout first. */
int cmd_option_next(const CmdSpec *spec, int argc, char **argv);
/* The exit status a command returns for what cmd_option_next ended with: 0 after the
 * help, 2 after a bad option. */
int cmd_option_status(int c);

/* The long name of table's row keyed key ("beam"), or NULL for none. */
const char *cmd_option_name(const CmdOption *table, int key);

/* The whole help of a command: usage, about, options with their defaults, the example. */
void cmd_help_print(const CmdSpec *spec, FILE *out);
/* "usage: qkv NAME OPERANDS" and where to read more, one line on stderr; returns 2. */
int cmd_usage_of(const CmdSpec *spec);

#endif
