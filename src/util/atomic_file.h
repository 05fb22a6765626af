/* atomic_file: files that are either wholly written or not there: tmp file, fsync,
 * rename, with the stop signals held meanwhile. A directory of such files published
 * whole is staged_dir's. */
#ifndef QKV_UTIL_ATOMIC_FILE_H
#define QKV_UTIL_ATOMIC_FILE_H

#include <stddef.h>

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
/* A file written as it is made (a line at a time, for minutes) and published whole:
 * atomic_stream_open creates path's tmp file; atomic_stream_write appends to it (after a
 * failed write, nothing more: the first fault is kept); atomic_stream_commit, if every
 * write went through, fsyncs, closes and renames it to path (the directory fsynced, the
 * stop signals held over it), else removes it. Each 0, or -1 (commit and open with the
 * error set: "<tmp>: write failed: ...", err_io judged). A process stopped by a signal
 * between open and commit removes the tmp file (atomic_streams_discard, from main's stop
 * handler: train and serve set handlers of their own, which stop rather than exit); one
 * killed outright leaves a tmp file that tmp_is_stale knows. */
typedef struct {
    int fd, err;    /* err: the errno of the first write that failed */
    int slot;       /* its place among the open streams atomic_streams_discard removes, or -1 */
    char tmp[4200]; /* the tmp file's name */
} AtomicStream;
int atomic_stream_open(AtomicStream *s, const char *path);
int atomic_stream_write(AtomicStream *s, const void *data, size_t len);
int atomic_stream_commit(AtomicStream *s, const char *path);
/* rename(from, to), then the folder fsynced: publishing a file written whole under another
 * name. 0, or -1 with the error set ("<to>: cannot rename into place: ...", err_io judged). */
int rename_into_place(const char *from, const char *to);
/* Flushes the folder that holds path (its entries: a rename into it, a file made there) to
 * the disk; best effort, 0. */
int fsync_parent_dir(const char *path);
/* Closes and removes the stream's tmp file: what was written is not to be published. */
void atomic_stream_abandon(AtomicStream *s);
/* Removes the tmp file of every stream opened and not yet committed: for a handler of a
 * signal that ends the process (async-signal-safe: unlink alone). */
void atomic_streams_discard(void);
/* Whether write_file_atomic could create path's tmp file now (it makes it and removes it):
 * 0, or -1 with its error set, before minutes of work whose result goes there. */
int probe_writable(const char *path);
/* This process' tmp name for path: "<path>.<pid>.tmp". -1 with the error set if too long. */
int tmp_name(char *buf, size_t n, const char *path);
/* 1 if a file name is a tmp file this process may delete: its own, one of a process that
 * no longer exists, or one without a pid (left by an older qkv). */
int tmp_is_stale(const char *name);

#endif
