/* util: errors, checked allocation, random numbers, clocks, small string helpers.
 * Small and boring on purpose; nothing here knows about models or files' contents. */
#ifndef QKV_UTIL_H
#define QKV_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Library code never prints or exits on a user error: it records one message with
 * err_set() and returns -1. The command layer prints "qkv: <message>" and exits. */
int err_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *err_msg(void);
/* After err_set for a failed system call: records whether errnum is a fault of the
 * machine (full disk, I/O error: exit 1) or of where the user pointed (exit 2). -1. */
int err_io(int errnum);
/* The exit status the last error calls for: 1 after err_io judged it a runtime fault,
 * else 2 (bad input, which is what err_set alone means). */
int err_status(void);

/* Out of memory is a runtime failure (exit 1), not something any caller can repair. */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* p, from an allocator outside qkv (json_dumps), or the same out-of-memory exit when NULL. */
void *xcheck(void *p);
/* Ends the process, as the x* allocators do, for a library that ran out of memory and
 * said so (msg): exit 1 with "qkv: msg". */
void exit_out_of_memory(const char *msg);

/* splitmix64: one 64-bit state, good enough for shuffling and initialisation, and its
 * state is a single number a checkpoint can store. */
typedef struct { uint64_t state; } Rng;
void rng_seed(Rng *r, uint64_t seed);
uint64_t rng_next(Rng *r);
double rng_uniform(Rng *r);            /* [0, 1) */
float rng_normal(Rng *r);              /* mean 0, std 1 */
uint64_t rng_below(Rng *r, uint64_t n); /* [0, n), n > 0 */

/* Counter-based hash: a pure function of its inputs, so a dropout mask depends only on
 * (seed, step, site, index) and is reproduced exactly after a resume. */
uint64_t hash64(uint64_t a, uint64_t b);

/* A 64-bit checksum of a byte range (word-at-a-time multiply-rotate mixing); fast
 * enough for checkpoint data, sensitive to every bit. Not cryptographic. */
uint64_t checksum64(const void *data, size_t n);
/* The same checksum over bytes that come in parts (total bytes known first): start, add
 * each part in order, end. Equals checksum64 of the parts laid end to end. */
typedef struct {
    uint64_t h;
    unsigned char carry[8];
    int carried;
} Checksum;
void checksum_start(Checksum *c, size_t total);
void checksum_add(Checksum *c, const void *data, size_t n);
uint64_t checksum_end(Checksum *c);

double now_seconds(void); /* monotonic */

/* Reads a whole regular file of at most max bytes; returns NULL and sets the error
 * (naming the path) on failure: a FIFO, device or directory is refused at once (never
 * waited on), a larger file before any of it is read. */
char *read_file_max(const char *path, size_t max, size_t *len_out);
#define READ_FILE_ANY ((size_t)1 << 40) /* 1 TiB: any file memory could hold */
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

/* All lines of f (read to its end), without their '\n' or "\r\n" (the last may lack
 * one); free_lines frees them. A read error ends the lines early. */
char **read_lines(FILE *f, int *n_out);
/* The same, but a read error is an error: NULL with it set ("<name>: read failed: ...",
 * an I/O fault, exit 1), and none of the lines. */
char **read_lines_checked(FILE *f, const char *name, int *n_out);
/* The same from the file at path, for text files: NULL with the error set, naming the
 * path, if it cannot be read or holds a NUL byte. */
char **read_file_lines(const char *path, int *n_out);
void free_lines(char **lines, int n);

/* Bytes as lower-case hex (malloc'd), and back (*out malloc'd; -1 on a bad digit). */
char *hex_encode(const void *data, size_t n);
int hex_decode(const char *hex, char **out, size_t *n);

/* mkdir -p; 0 or -1 with the error set. */
int make_dirs(const char *path);

/* Signals held while a file is half-written. Between signals_hold and signals_release,
 * SIGINT, SIGTERM and SIGHUP (unless ignored) are caught and kept, whichever thread
 * they land on; the release puts the process' handlers back and raises what came, so a
 * stop or a kill takes effect once the tmp file is renamed or removed, never between.
 * Nestable; main thread only. */
void signals_hold(void);
void signals_release(void);

/* Writes `len` bytes to `path` atomically: path.<pid>.tmp, fsync, rename, fsync of the
 * directory, with signals held throughout. On failure the old file (if any) is untouched
 * and no .tmp remains. */
int write_file_atomic(const char *path, const void *data, size_t len);
/* The same for a file made of parts laid end to end, written from where they are. */
typedef struct {
    const void *data;
    size_t len;
} FilePart;
int write_file_atomic_parts(const char *path, const FilePart *parts, int n_parts);
/* This process' tmp name for path: "<path>.<pid>.tmp". -1 with the error set if too long. */
int tmp_name(char *buf, size_t n, const char *path);
/* 1 if a file name is a tmp file this process may delete: its own, one of a process that
 * no longer exists, or one without a pid (left by an older qkv). */
int tmp_is_stale(const char *name);

/* Formats into a growing heap string (for building files in memory). */
typedef struct { char *buf; size_t len, cap; } StrBuf;
void sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_append(StrBuf *sb, const char *s, size_t n);
/* Appends s as XML/HTML text or attribute value (double-quoted): the one escaper of
 * every SVG and HTML qkv writes. & < > " become entities; control bytes, which XML 1.0
 * cannot hold, are dropped. */
void sb_append_xml(StrBuf *sb, const char *s);
void sb_free(StrBuf *sb);

#endif
