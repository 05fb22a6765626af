/* file: reading files whole or by lines, refusing FIFOs and devices; mkdir -p. */
#ifndef QKV_UTIL_FILE_H
#define QKV_UTIL_FILE_H

#include <stddef.h>
#include <stdio.h>

/* Reads a whole regular file of at most max bytes; returns NULL and sets the error
 * (naming the path) on failure: a FIFO, device or directory is refused at once (never
 * waited on), a larger file before any of it is read. */
char *read_file_max(const char *path, size_t max, size_t *len_out);
#define READ_FILE_ANY ((size_t)1 << 40)    /* 1 TiB: any file memory could hold */
#define READ_FILE_SMALL ((size_t)64 << 20) /* 64 MiB: configs, vocabularies, tokenizer models */
char *read_file(const char *path, size_t *len_out);
/* The same checks, then an open descriptor (the caller closes it), *size_out (may be
 * NULL) the file's size; -1 with the error set. */
int open_regular(const char *path, size_t max, size_t *size_out);

/* The rest of an open regular file (from its offset to its end, at most max bytes) as
 * one NUL-terminated heap buffer, for a file opened once and read whatever happens to
 * its name meanwhile (the caller closes fd); NULL with the error set, naming path. */
char *read_fd_max(int fd, const char *path, size_t max, size_t *len_out);
/* 0 when path is absent or a regular file; else -1 with the error set ("<path>: a FIFO,
 * not a regular file"). Looks (stat), never opens: a FIFO is not waited on. */
int regular_or_absent(const char *path);
/* Opens path for writing as fopen does with mode "w" or "a", but refuses anything other
 * than a regular file at once: a FIFO is never opened to wait for a reader, a device
 * never truncated. NULL with the error set: "<path>: a FIFO, not a regular file" (bad
 * input), or "<path>: <doing>: <strerror>" for a failed open (err_io judged). */
FILE *fopen_regular(const char *path, const char *mode, const char *doing);
/* Appends text and a '\n' to the regular file at path (made if missing) in one write, or
 * not at all: a write cut short (a full disk, a file size limit) is truncated back to the
 * old end. 0, or -1 with the error set: fopen_regular's, or "<path>: <doing>: <strerror>"
 * (err_io judged). */
int append_line(const char *path, const char *text, const char *doing);
/* The same on a file kept open (a log written line by line): f is written through its
 * descriptor alone, never through its stdio buffer, so nothing is left to flush later. */
int append_line_open(FILE *f, const char *path, const char *text, const char *doing);
/* 1 if paths a and b name one file (links followed), 0 otherwise or if either is missing. */
int same_file(const char *a, const char *b);

/* All lines of f (read to its end), without their '\n' or "\r\n" (the last may lack
 * one) and without a UTF-8 byte order mark first; free_lines frees them. A read error
 * ends the lines early. */
char **read_lines(FILE *f, int *n_out);
/* The same, but a read error is an error: NULL with it set ("<name>: read failed: ...",
 * an I/O fault, exit 1), and none of the lines; so is a NUL byte ("<name>: line N holds a
 * NUL byte: not text", bad input). */
char **read_lines_checked(FILE *f, const char *name, int *n_out);
/* The same from the file at path, for text files: NULL with the error set, naming the
 * path, if it cannot be read or holds a NUL byte. */
char **read_file_lines(const char *path, int *n_out);
void free_lines(char **lines, int n);
/* Lines as they arrive on fd (a terminal, a pipe, a socket): waits for some bytes, then
 * returns the complete lines read so far (their '\n' or "\r\n" dropped); a partial last
 * line waits in *pending for the next call (start it NULL and 0, let only this function
 * size it, free it after). Linear: each byte is copied and searched a bounded number of
 * times, however many reads a line takes. At the end of input the partial line comes too,
 * and *done is set. NULL with the error set ("<name>: read failed: ...") on a read error,
 * or on a NUL byte ("<name>: line N holds a NUL byte: not text", N counted after the
 * line0 lines the caller has taken before). */
char **read_lines_arriving(int fd, const char *name, int line0, char **pending, size_t *pending_len, int *n_out,
                           int *done);

/* mkdir -p; 0 or -1 with the error set. */
/* Removes path: a file or link itself (a link is never followed), a directory with what it
 * holds, down to levels of subdirectories; what lies deeper stays, and so does its parent.
 * Best effort: nothing is reported. */
void remove_tree(const char *path, int levels);
int make_dirs(const char *path);

/* 1 if path names dir or something inside it (at any depth, there yet or not), other than
 * dir/except (NULL: no exception): by its own name with every directory on the way
 * resolved, or by what a symbolic link there points to, so "RUN/../RUN/config.yaml" and a
 * link to RUN/config.yaml are both inside RUN. 0 otherwise, or when dir cannot be resolved. */
int path_inside(const char *path, const char *dir, const char *except);

#endif
