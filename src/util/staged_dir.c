/* staged_dir: see staged_dir.h.
 *
 * A publish into a folder that already holds files is a list of renames, each one kept in
 * a journal: an old entry of the set moved aside into the staging folder, a new one moved
 * into its place. Any rename that fails undoes the journal backwards, so the old set stands
 * whole; the kinds of the entries (file against folder against link) are compared before
 * the first rename, so the usual refusals move nothing at all. Publishers into one folder
 * take turns through a lock on it, so the set a reader finds is one writer's. */
#include "util/staged_dir.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"

/* The directory, '/', a name of up to 255 bytes. */
#define ENTRY_MAX (STAGED_DIR_MAX + 256)
/* How long a publisher waits for another one into the same folder (whose renames take
 * milliseconds) before it gives up and says so. */
#define LOCK_WAIT_MS 60000
/* How deep a staging folder goes, its folder of old entries (.old/N) included. */
#define STAGING_LEVELS (STAGED_DIR_LEVELS + 1)

static void remove_dir(const char *dir) { remove_tree(dir, STAGING_LEVELS); }

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

/* Removes the staging folders "<out>.partial-<pid>" of processes that no longer exist (one
 * killed outright, SIGKILL or a power cut, while it wrote): they hold only what qkv staged
 * or set aside, never a user's file. A pid that lives again in another process keeps its
 * folder until that one ends. */
static void remove_dead_staging(const char *out) {
    size_t len = name_length(out);
    char parent[STAGED_DIR_MAX], base[STAGED_DIR_MAX], path[ENTRY_MAX];
    snprintf(parent, sizeof parent, "%.*s", (int)len, out);
    char *slash = strrchr(parent, '/');
    snprintf(base, sizeof base, "%s", slash ? slash + 1 : parent);
    if (!slash) snprintf(parent, sizeof parent, ".");
    else slash[slash == parent] = '\0'; /* "/x" keeps its "/" */
    size_t blen = strlen(base);
    DIR *d = opendir(parent);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *n = e->d_name;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".partial-", 9) != 0) continue;
        const char *digits = n + blen + 9;
        char *end;
        long pid = strtol(digits, &end, 10);
        if (!isdigit((unsigned char)*digits) || *end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        if (snprintf(path, sizeof path, "%s/%s", parent, n) < (int)sizeof path) remove_dir(path);
    }
    if (d) closedir(d);
}

/* A new directory beside out, its name into tmp: the files being written go into its
 * "new", the old entries they replace wait in its "old" until the set is in place. */
static int staging_dir(const char *out, const char *what, char *tmp, size_t n) {
    size_t len = name_length(out);
    if (n < STAGED_DIR_MAX || name_usable(out, what) != 0) return -1; /* tmp has room for a usable name */
    snprintf(tmp, n, "%.*s.partial-%d", (int)len, out, (int)getpid());
    remove_dir(tmp); /* a leftover of this pid's predecessor */
    remove_dead_staging(out);
    char parent[STAGED_DIR_MAX];
    snprintf(parent, sizeof parent, "%s", tmp);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        if (make_dirs(parent) != 0) return -1;
    }
    char set[STAGED_DIR_MAX + 8];
    snprintf(set, sizeof set, "%s/new", tmp);
    if (mkdir(tmp, 0777) != 0 || mkdir(set, 0777) != 0) {
        int e = errno;
        remove_dir(tmp);
        return err_set("%s: cannot create: %s", out, strerror(e)),
               err_io(e); /* the place named, not the staging name */
    }
    return 0;
}

static int not_dots(const struct dirent *e) { return strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0; }

/* 1 if path is a directory that holds nothing */
static int dir_empty(const char *path) {
    DIR *d = opendir(path);
    struct dirent *e;
    int empty = d != NULL;
    while (d && empty && (e = readdir(d))) empty = !not_dots(e);
    if (d) closedir(d);
    return empty;
}

/* Flushes a folder's entries to the disk (best effort: the renames are done either way). */
static void fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) fsync(fd), close(fd);
}

/* ---- the publish's journal ------------------------------------------------------------ */

/* One rename done: from -> to. Undone by to -> from. */
typedef struct {
    char *from, *to;
} Step;

typedef struct {
    Step *steps;
    int n, cap;
    char aside[ENTRY_MAX]; /* "<tmp>/old": where the old entries wait until the end */
    int n_aside;
    const char *out; /* the destination as the user named it, for the messages */
    int (*replaces)(const char *name);
} Journal;

static int journal_rename(Journal *j, const char *from, const char *to) {
    if (rename(from, to) != 0) {
        int e = errno;
        return err_set("%s: cannot move into place: %s", to, strerror(e)), err_io(e);
    }
    if (j->n == j->cap) j->cap = j->cap ? 2 * j->cap : 64, j->steps = xrealloc(j->steps, sizeof(Step) * (size_t)j->cap);
    j->steps[j->n++] = (Step){xstrdup(from), xstrdup(to)};
    return 0;
}

/* Moves an old entry of the set out of the way, into the staging folder. */
static int set_aside(Journal *j, const char *path) {
    char to[ENTRY_MAX + 16];
    snprintf(to, sizeof to, "%s/%d", j->aside, j->n_aside++);
    return journal_rename(j, path, to);
}

/* Every rename backwards: the old entries where they were, the new ones back in staging. */
static void journal_undo(Journal *j) {
    for (int i = j->n - 1; i >= 0; i--) rename(j->steps[i].to, j->steps[i].from);
}

static void journal_free(Journal *j) {
    for (int i = 0; i < j->n; i++) free(j->steps[i].from), free(j->steps[i].to);
    free(j->steps);
}

static const char *kind_name(mode_t m) {
    return S_ISREG(m) ? "file" : S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symbolic link" : "special file";
}

/* Before any rename: each staged entry's place in out is free or holds one of its kind (a
 * file for a file, a directory, not a link to one, for a directory), down the staged tree. */
static int check_kinds(Journal *j, const char *from_dir, const char *to_dir, int levels) {
    struct dirent **names = NULL;
    int n = scandir(from_dir, &names, not_dots, alphasort), rc = 0;
    if (n < 0) {
        int e = errno;
        return err_set("%s: cannot open: %s", from_dir, strerror(e)), err_io(e);
    }
    char from[ENTRY_MAX], to[ENTRY_MAX];
    struct stat sf, st;
    for (int i = 0; i < n; i++) {
        snprintf(from, sizeof from, "%s/%s", from_dir, names[i]->d_name);
        snprintf(to, sizeof to, "%s/%s", to_dir, names[i]->d_name);
        if (rc == 0 && lstat(from, &sf) == 0 && lstat(to, &st) == 0) {
            if ((sf.st_mode & S_IFMT) != (st.st_mode & S_IFMT))
                rc = err_set("%s: a %s where qkv writes a %s: nothing in %s was replaced (move it away)", to,
                             kind_name(st.st_mode), kind_name(sf.st_mode), j->out);
            else if (S_ISDIR(sf.st_mode) && levels > 1) rc = check_kinds(j, from, to, levels - 1);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

/* Takes the old set's entries that the new set lacks out of to_dir: each one replaces
 * claims (its name relative to out: "masks/x.txt"), a folder emptied of what it claims and
 * removed only when nothing else is left in it. */
static int clear_stale(Journal *j, const char *from_dir, const char *to_dir, const char *rel, int levels) {
    struct dirent **names = NULL;
    int n = scandir(to_dir, &names, not_dots, alphasort), rc = 0;
    if (n < 0) return 0; /* nothing of ours to clear */
    char from[ENTRY_MAX], to[ENTRY_MAX], name[ENTRY_MAX];
    struct stat st;
    for (int i = 0; i < n; i++) {
        snprintf(from, sizeof from, "%s/%s", from_dir, names[i]->d_name);
        snprintf(to, sizeof to, "%s/%s", to_dir, names[i]->d_name);
        snprintf(name, sizeof name, "%s%s", rel, names[i]->d_name);
        free(names[i]);
        if (rc != 0 || !j->replaces(name) || lstat(from, &st) == 0 || lstat(to, &st) != 0) continue;
        if (!S_ISDIR(st.st_mode)) {
            rc = set_aside(j, to); /* a link goes itself, never followed */
        } else if (levels > 1) {
            strcat(name, "/");
            rc = clear_stale(j, from, to, name, levels - 1);
            if (rc == 0 && dir_empty(to)) rc = set_aside(j, to); /* an undo brings it back */
        }
    }
    free(names);
    return rc;
}

/* Moves each staged entry of from_dir into to_dir: a place that is free takes it whole, an
 * old file is set aside first, an old folder takes the staged folder's entries one by one
 * (what a user keeps there stays). */
static int move_in(Journal *j, const char *from_dir, const char *to_dir, const char *rel, int levels) {
    if (clear_stale(j, from_dir, to_dir, rel, levels) != 0) return -1;
    struct dirent **names = NULL;
    int n = scandir(from_dir, &names, not_dots, alphasort), rc = 0;
    if (n < 0) {
        int e = errno;
        return err_set("%s: cannot open: %s", from_dir, strerror(e)), err_io(e);
    }
    char from[ENTRY_MAX], to[ENTRY_MAX], name[ENTRY_MAX];
    struct stat sf, st;
    for (int i = 0; i < n; i++) {
        snprintf(from, sizeof from, "%s/%s", from_dir, names[i]->d_name);
        snprintf(to, sizeof to, "%s/%s", to_dir, names[i]->d_name);
        snprintf(name, sizeof name, "%s%s/", rel, names[i]->d_name);
        free(names[i]);
        if (rc != 0 || lstat(from, &sf) != 0) continue;
        if (lstat(to, &st) != 0) rc = journal_rename(j, from, to);
        else if (S_ISDIR(sf.st_mode) && S_ISDIR(st.st_mode) && levels > 1) rc = move_in(j, from, to, name, levels - 1);
        else if ((rc = set_aside(j, to)) == 0) rc = journal_rename(j, from, to);
    }
    free(names);
    if (rc == 0) fsync_dir(to_dir);
    return rc;
}

static int no_claims(const char *name) {
    (void)name;
    return 0;
}

/* Waits its turn to publish into out: a lock on the folder itself, held until closed. */
static int lock_out(const char *out) {
    int fd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return err_set("%s: cannot open: %s", out, strerror(e)), err_io(e);
    }
    for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; waited += 10) {
        if (errno != EWOULDBLOCK && errno != EINTR) break; /* a file system without locks: go on */
        if (waited >= LOCK_WAIT_MS) {
            close(fd);
            return err_set("%s: another process has been writing it for %d s: try again once it is done", out,
                           LOCK_WAIT_MS / 1000);
        }
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    return fd;
}

/* Moves the staged set "<tmp>/new" into out, all of it or (the error set) none of it; tmp
 * is gone afterwards either way. */
static int publish(const char *tmp, const char *out, int (*replaces)(const char *name)) {
    char set[STAGED_DIR_MAX + 8];
    snprintf(set, sizeof set, "%s/new", tmp);
    if (rename(set, out) == 0) return remove_dir(tmp), fsync_parent_dir(out); /* out did not exist (or was empty) */
    int lock = lock_out(out);
    if (lock < 0) return remove_dir(tmp), -1;
    Journal j = {.out = out, .replaces = replaces ? replaces : no_claims};
    snprintf(j.aside, sizeof j.aside, "%s/old", tmp);
    int rc = check_kinds(&j, set, out, STAGED_DIR_LEVELS);
    if (rc == 0 && mkdir(j.aside, 0777) != 0) {
        int e = errno;
        rc = err_set("%s: cannot create: %s", j.aside, strerror(e)), err_io(e);
    }
    if (rc == 0 && (rc = move_in(&j, set, out, "", STAGED_DIR_LEVELS)) != 0) journal_undo(&j);
    journal_free(&j);
    close(lock);
    remove_dir(tmp);
    return rc;
}

int staged_dir_write(const char *out, const char *what, int (*fill)(const char *dir, void *arg), void *arg,
                     int (*replaces)(const char *name)) {
    char tmp[STAGED_DIR_MAX], set[STAGED_DIR_MAX + 8];
    signals_hold(); /* a stop lands once the staging directory is published or gone */
    int rc = staging_dir(out, what, tmp, sizeof tmp);
    if (rc == 0) {
        snprintf(set, sizeof set, "%s/new", tmp);
        if (fill(set, arg) == 0) rc = publish(tmp, out, replaces);
        else rc = -1, remove_dir(tmp);
    }
    signals_release();
    return rc;
}

typedef struct {
    const StagedPart *parts;
    int n;
} PartList;

static int fill_parts(const char *dir, void *arg) {
    const PartList *l = arg;
    char path[STAGED_DIR_MAX + 256];
    for (int i = 0; i < l->n; i++) {
        const char *slash = strchr(l->parts[i].name, '/');
        if (slash) { /* "sub/file": the subdirectory first, once */
            snprintf(path, sizeof path, "%s/%.*s", dir, (int)(slash - l->parts[i].name), l->parts[i].name);
            if (mkdir(path, 0777) != 0 && errno != EEXIST) {
                int e = errno;
                return err_set("%s: cannot create: %s", path, strerror(e)), err_io(e);
            }
        }
        snprintf(path, sizeof path, "%s/%s", dir, l->parts[i].name);
        if (write_file_atomic(path, l->parts[i].bytes, l->parts[i].len) != 0) return -1;
    }
    return 0;
}

int staged_dir_write_parts(const char *out, const char *what, const StagedPart *parts, int n,
                           int (*replaces)(const char *name)) {
    PartList l = {parts, n};
    return staged_dir_write(out, what, fill_parts, &l, replaces);
}
