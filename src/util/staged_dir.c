/* staged_dir: see staged_dir.h. */
#include "util/staged_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"

/* The directory, '/', a name of up to 255 bytes. */
#define ENTRY_MAX (STAGED_DIR_MAX + 256)

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[ENTRY_MAX];
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* A new, empty directory beside out for the files being written, its name into tmp. */
static int staging_dir(const char *out, const char *what, char *tmp, size_t n) {
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/') len--;
    if (len == 0 || len + 32 >= n) return err_set("%s: '%s' is not a usable directory name", what, out);
    snprintf(tmp, n, "%.*s.partial-%d", (int)len, out, (int)getpid());
    remove_dir(tmp); /* a leftover of this pid's predecessor */
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode)) return err_set("%s: %s exists and is not a directory", what, out);
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

/* Moves every file of tmp into out (made if missing) and removes the old files that
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
    while ((e = readdir(d))) { /* stale files of the old set first */
        snprintf(from, sizeof from, "%s/%s", tmp, e->d_name);
        snprintf(to, sizeof to, "%s/%s", out, e->d_name);
        if (replaces && replaces(e->d_name) && access(from, F_OK) != 0) unlink(to);
    }
    closedir(d);
    d = opendir(tmp);
    while (d && (e = readdir(d)) && rc == 0) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(from, sizeof from, "%s/%s", tmp, e->d_name);
        snprintf(to, sizeof to, "%s/%s", out, e->d_name);
        if (rename(from, to) != 0) {
            int err = errno;
            rc = err_set("%s: cannot move into place: %s", to, strerror(err)), err_io(err);
        }
    }
    if (d) closedir(d);
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
