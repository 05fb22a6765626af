/* cmdutil: what every command shares: reporting a library error as one line and
 * returning the exit status, and reading numbers from options with a one-line error.
 * Only the command layer includes this. */
#ifndef QKV_CMDUTIL_H
#define QKV_CMDUTIL_H

#include <signal.h>

/* Prints "qkv: <err_msg()>" to stderr; returns code (1 runtime, 2 usage/input). */
int cmd_fail(int code);

/* What a long command is doing, on one redrawn line of a terminal's stderr ("qkv bench:
 * training step 3 of 35 ..."), so minutes of work before one line of results are not
 * silent; nothing when stderr is not a terminal, where the results are all there is.
 * fmt NULL clears the line (before results, or an error of its own). */
void cmd_progress(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 while cmd_progress's line is on the terminal, unfinished: a stop's message (main.c's
 * handler) starts a line of its own then */
extern volatile sig_atomic_t cmd_progress_shown;
/* 1 once cmd_fail has said why the command fails: a stop signal on its way out (an MPI
 * launcher ending the other ranks of a job one rank refused) adds no second line then */
extern volatile sig_atomic_t cmd_failure_said;

/* arg as a whole decimal integer in [lo, hi] into *out; otherwise -1 with the error
 * "<where>: '<arg>' is not <what>" set (e.g. "--steps", "a positive step count"). */
int cmd_long(const char *where, const char *what, const char *arg, long lo, long hi, long *out);
/* The same for an int. */
int cmd_int(const char *where, const char *what, const char *arg, int lo, int hi, int *out);
/* The same for a finite real number in [lo, hi]. */
int cmd_double(const char *where, const char *what, const char *arg, double lo, double hi, double *out);

/* Prints prefix, then s with its control bytes spelled as error messages spell them (\n,
 * \t, \xNN: a user's text must not move the cursor, colour or ring the terminal), then a
 * newline, to stdout. */
void cmd_print_text(const char *prefix, const char *s);
/* Prints s in a column `width` characters wide (UTF-8 characters, not bytes: a subword
 * label's "▁" is one), cut to the width and padded with spaces. */
void cmd_print_column(const char *s, int width);

/* The one line that says n source lines (none: nothing said) were cut to max tokens, the
 * model's positions: translate and eval say it the same way, on stderr. */
void cmd_warn_truncated(int n, int max);

/* Two files' lines, line-aligned and UTF-8 (what names the first file's role in the
 * message: "a translation"), or -1 with the error set. */
int cmd_read_aligned(const char *a_path, const char *b_path, const char *what, char ***a, char ***b, int *n);

#endif
