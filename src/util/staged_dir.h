/* staged_dir: a directory of files that a reader sees whole or not at all.
 *
 * The files are written into a fresh directory beside the destination, "<out>.partial-<pid>",
 * and moved into place only when all are written: a full disk leaves the old files whole,
 * and a new set never shows beside the files of an old one. Renames within one file system
 * cannot run out of space, and a rename that fails all the same (an entry of another kind
 * in the way, a folder not writable) puts back every one done before it: the old set stays
 * whole. Files and one level of subdirectories of files. What a user keeps in the folder or
 * in one of its subdirectories (a file the set does not claim, a folder of their own) stays
 * where it is; a link is never followed. Single files written whole are atomic_file's. */
#ifndef QKV_UTIL_STAGED_DIR_H
#define QKV_UTIL_STAGED_DIR_H

#include <stddef.h>

/* Room for a staging directory's name, NUL included: a destination of up to
 * STAGED_DIR_MAX - 33 bytes is taken; a writer's "<dir>/<file>" fits STAGED_DIR_MAX + 256. */
#define STAGED_DIR_MAX 1088
/* How deep a staging directory goes: its files, and the files of its subdirectories. */
#define STAGED_DIR_LEVELS 2

/* Writes out's files through fill(dir, arg) (0, or -1 with the error set) into a staging
 * directory, then moves each into out (made if missing, its parents too): a file replaces
 * the file of its name, a subdirectory's files go into the subdirectory of its name. An
 * entry out already holds that replaces(name) claims (NULL: none; name relative to out,
 * "sub/file" inside a subdirectory) and the new set lacks is removed, a subdirectory once
 * nothing is left in it; any other is left. An entry of another kind where the set puts one
 * (a folder or a link where it writes a file, a file or a link where it writes a folder) is
 * refused before anything moves. Two writers into one out take turns. Stop signals are held
 * throughout (signals_hold). 0, or -1 with the error set, fill's or one naming out (what,
 * e.g. "--out", opens the messages about its name; a failed system call is err_io judged);
 * either way no staging directory of this process remains, nor of one that died writing. */
int staged_dir_write(const char *out, const char *what, int (*fill)(const char *dir, void *arg), void *arg,
                     int (*replaces)(const char *name));
/* One file of a set that staged_dir_write_parts writes: its name in the set ("file", or
 * "sub/file" in a subdirectory of the set) and its bytes. */
typedef struct {
    const char *name;
    const char *bytes;
    size_t len;
} StagedPart;
/* staged_dir_write of the files parts[0..n), each written whole in that order: the table a
 * writer lists instead of a fill callback of its own. A callback is left to writers that
 * stream what they would otherwise hold twice (the ONNX graphs, a gradient dump) or whose
 * files another module writes (a sentence's SVG maps). */
int staged_dir_write_parts(const char *out, const char *what, const StagedPart *parts, int n,
                           int (*replaces)(const char *name));
/* 0 if staged_dir_write could take out: a name it has room for, a directory or nothing
 * there, and a folder above it that takes a new folder (one is made there and removed);
 * else -1 with the error it would give. A command checks it before its work, not only
 * after minutes of it. */
int staged_dir_usable(const char *out, const char *what);

#endif
