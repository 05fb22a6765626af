/* staged_dir: see staged_dir.h. */
#include "util/staged_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"

/* The directory, '/', a name of up to 255 bytes. */
#define ENTRY_MAX (STAGED_DIR_MAX + 256)
/* How often a subdirectory's move into place is tried, another writer's moved aside between. */
#define MOVE_TRIES 8

static void remove_dir(const char *dir) { remove_tree(dir, STAGED_DIR_LEVELS); }

/* out's length without its trailing slashes (a lone "/" kept) */
static size_t name_length(const char *out) {
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/') len--;
    return len;
}

/* A name staging has room for, and a directory or nothing there: what the write itself
 * checks (it then makes the staging folder, and hears from mkdir at once). */
static int name_usable(const char *out, const char *what) {
    size_t len = name_length(out);
    if (len == 0 || len + 32 >= STAGED_DIR_MAX) return err_set("%s: '%s' is not a usable directory name", what, out);
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode)) return err_set("%s: %s exists and is not a directory", what, out);
    return 0;
}

int staged_dir_usable(const char *out, const char *what) {
    if (name_usable(out, what) != 0) return -1;
    size_t len = name_length(out);
    struct stat st;
    /* the staging directory goes beside out: the nearest folder up that is there must take
     * it (a read-only file system, a folder not ours), found now rather than after the work */
    char up[STAGED_DIR_MAX];
    snprintf(up, sizeof up, "%.*s", (int)len, out);
    for (;;) {
        char *slash = strrchr(up, '/');
        if (!slash) snprintf(up, sizeof up, ".");
        else if (slash == up) up[1] = '\0';
        else *slash = '\0';
        if (stat(up, &st) == 0 || errno != ENOENT || strcmp(up, ".") == 0 || strcmp(up, "/") == 0) break;
    }
    /* a folder made there and removed at once: what mkdir will say, which access() does not
     * know (root on a read-only mount, a file system that refuses folders) */
    if (stat(up, &st) == 0 && !S_ISDIR(st.st_mode)) return err_set("%s: %s exists and is not a directory", what, up);
    char probe[STAGED_DIR_MAX + 32];
    snprintf(probe, sizeof probe, "%s/.qkv-probe-%d", up, (int)getpid());
    signals_hold(); /* a stop between the two calls would leave the probe */
    int made = mkdir(probe, 0700) == 0, e = errno;
    if (made) rmdir(probe);
    signals_release();
    if (!made && e != EEXIST) return err_set("%s: cannot create: %s", out, strerror(e)), err_io(e);
    return 0;
}

/* A new, empty directory beside out for the files being written, its name into tmp. */
static int staging_dir(const char *out, const char *what, char *tmp, size_t n) {
    size_t len = name_length(out);
    if (n < STAGED_DIR_MAX || name_usable(out, what) != 0) return -1; /* tmp has room for a usable name */
    snprintf(tmp, n, "%.*s.partial-%d", (int)len, out, (int)getpid());
    remove_dir(tmp); /* a leftover of this pid's predecessor */
    char parent[STAGED_DIR_MAX];
    snprintf(parent, sizeof parent, "%s", tmp);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        if (make_dirs(parent) != 0) return -1;
    }
    if (mkdir(tmp, 0777) != 0) {
        int e = errno;
        return err_set("%s: cannot create: %s", out, strerror(e)),
               err_io(e); /* the place named, not the staging name */
    }
    return 0;
}

/* Moves the staged subdirectory from to to. A directory already there (the old set's, or a
 * concurrent writer's just published) cannot be renamed over while it holds files: it is
 * moved aside into tmp, to go with it; as another writer may move its own in between, a few
 * tries. The last writer's subdirectory stands whole, never a mix of two. */
static int move_dir(const char *from, const char *to, const char *tmp) {
    char aside[ENTRY_MAX];
    int err = 0;
    for (int i = 0; i < MOVE_TRIES; i++) {
        if (rename(from, to) == 0) return 0;
        if ((err = errno) != ENOTEMPTY && err != EEXIST) break;
        snprintf(aside, sizeof aside, "%s/.old-%d", tmp, i);
        if (rename(to, aside) != 0 && (err = errno) != ENOENT) break;
        err = ENOTEMPTY;
    }
    return err_set("%s: cannot move into place: %s", to, strerror(err)), err_io(err);
}

static int not_dots(const struct dirent *e) { return strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0; }

/* Moves every entry of tmp into out (made if missing) and removes the old entries that
 * replaces claims and the new set does not have; tmp is gone afterwards. */
static int publish(const char *tmp, const char *out, int (*replaces)(const char *name)) {
    int rc = 0;
    if (rename(tmp, out) == 0) return 0; /* out did not exist (or was empty) */
    DIR *d = opendir(out);
    if (!d) {
        int e = errno;
        rc = err_set("%s: cannot open: %s", out, strerror(e)), err_io(e);
        remove_dir(tmp);
        return rc;
    }
    char from[ENTRY_MAX], to[ENTRY_MAX];
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d))) { /* stale entries of the old set first */
        snprintf(from, sizeof from, "%s/%s", tmp, e->d_name);
        snprintf(to, sizeof to, "%s/%s", out, e->d_name);
        if (replaces && not_dots(e) && replaces(e->d_name) && lstat(from, &st) != 0)
            remove_tree(to, STAGED_DIR_LEVELS - 1);
    }
    closedir(d);
    /* the names listed before any moves, as the moves aside add entries to tmp */
    struct dirent **names = NULL;
    int n = scandir(tmp, &names, not_dots, NULL);
    for (int i = 0; i < n; i++) {
        snprintf(from, sizeof from, "%s/%s", tmp, names[i]->d_name);
        snprintf(to, sizeof to, "%s/%s", out, names[i]->d_name);
        if (rc == 0 && lstat(from, &st) == 0 && S_ISDIR(st.st_mode)) rc = move_dir(from, to, tmp);
        else if (rc == 0 && rename(from, to) != 0) {
            int err = errno;
            rc = err_set("%s: cannot move into place: %s", to, strerror(err)), err_io(err);
        }
        free(names[i]);
    }
    free(names);
    if (n < 0) {
        int err = errno;
        rc = err_set("%s: cannot open: %s", tmp, strerror(err)), err_io(err);
    }
    remove_dir(tmp);
    return rc;
}

int staged_dir_write(const char *out, const char *what, int (*fill)(const char *dir, void *arg), void *arg,
                     int (*replaces)(const char *name)) {
    char tmp[STAGED_DIR_MAX];
    signals_hold(); /* a stop lands once the staging directory is published or gone */
    int rc = staging_dir(out, what, tmp, sizeof tmp);
    if (rc == 0) {
        if (fill(tmp, arg) == 0) rc = publish(tmp, out, replaces);
        else rc = -1, remove_dir(tmp);
    }
    signals_release();
    return rc;
}
