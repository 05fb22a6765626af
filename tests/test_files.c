/* Files qkv writes and reads: tmp files named per process and swept only when their
 * writer is gone; a checkpoint's header length judged before the file is read; a
 * directory's files published whole or not at all; lines read as they arrive; a NUL byte
 * in them refused. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "fixture.h"
#include "run/checkpoint.h"
#include "run/run.h"
#include "util/atomic_file.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/page_fill.h"
#include "util/staged_dir.h"

/* A pid that no process has now: a child that has exited and been reaped. */
static long dead_pid(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return (long)p;
}

static void touch(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) close(fd);
}

static void test_tmp_names_and_sweep(void) {
    char name[64], path[4200];
    CHECK(tmp_name(name, sizeof name, "a") == 0, "%s", err_msg());
    snprintf(path, sizeof path, "a.%ld.tmp", (long)getpid());
    CHECK(strcmp(name, path) == 0, "tmp name '%s', expected '%s'", name, path);
    long dead = dead_pid(), live = (long)getppid();
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/qkv-files-test-%d", (int)getpid());
    CHECK(make_dirs(dir) == 0 && make_dirs(run_path(path, sizeof path, dir, "ckpt")) == 0, "%s", err_msg());
    const char *names[4] = {"own", "dead", "live", "old"};
    char files[4][256];
    snprintf(files[0], sizeof files[0], "%s/ckpt/step-000001.safetensors.%ld.tmp", dir, (long)getpid());
    snprintf(files[1], sizeof files[1], "%s/ckpt/step-000002.safetensors.%ld.tmp", dir, dead);
    snprintf(files[2], sizeof files[2], "%s/ckpt/export.safetensors.%ld.tmp", dir, live);
    snprintf(files[3], sizeof files[3], "%s/ckpt/step-000003.safetensors.tmp", dir);
    for (int i = 0; i < 4; i++) touch(files[i]);
    run_rotate_checkpoints(dir, 3);
    struct stat st;
    for (int i = 0; i < 4; i++) {
        int there = stat(files[i], &st) == 0;
        CHECK(there == (i == 2), "the %s tmp file was %s", names[i], there ? "kept" : "deleted");
    }
    unlink(files[2]);
    rmdir(path);
    rmdir(dir);
}

/* A 2 GiB sparse file whose header claims a terabyte: refused without reading it. */
static void test_header_length_judged_first(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/qkv-files-huge-%d.safetensors", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    uint64_t hlen = (uint64_t)1 << 40;
    int ok = fd >= 0 && write(fd, &hlen, 8) == 8 && ftruncate(fd, (off_t)2 << 30) == 0;
    if (fd >= 0) close(fd);
    CHECK(ok, "cannot make the sparse file");
    CkptFile f;
    double t0 = now_seconds();
    int rc = ckpt_open(&f, path);
    double took = now_seconds() - t0;
    unlink(path);
    CHECK(rc != 0 && strstr(err_msg(), "header length 1099511627776 does not fit") &&
              strstr(err_msg(), "headers up to 100000000"),
          "%s", rc ? err_msg() : "accepted");
    CHECK(took < 0.5, "took %.2fs: the file was read", took);
}

/* The config a checkpoint carries goes through the same YAML limits as a config file:
 * 200,000 levels of nesting in its metadata are refused at once, not parsed for ever. */
static void test_deep_config_in_checkpoint(void) {
    const ModelConfig mc = fixture_config(6, 6, 4, 1, 4, 1, 1, 8);
    Model m;
    CHECK(model_init(&m, &mc) == 0, "%s", err_msg());
    char *config = deep_yaml(200000);
    char path[64];
    snprintf(path, sizeof path, "/tmp/qkv-files-deep-%d.safetensors", (int)getpid());
    CkptMeta meta = {.step = 1, .valid_loss = 1, .best_valid_loss = 1, .config = config};
    int saved = ckpt_save(path, &m, NULL, &meta) == 0;
    free(config);
    model_free(&m);
    CHECK(saved, "%s", err_msg());
    CkptFile f;
    CHECK(ckpt_open(&f, path) == 0, "%s", err_msg());
    unlink(path);
    Config c;
    config_defaults(&c);
    double t0 = now_seconds();
    int rc = config_parse(&c, f.meta.config, strlen(f.meta.config), path);
    double took = now_seconds() - t0;
    ckpt_close(&f);
    CHECK(rc != 0 && strstr(err_msg(), "nested more than 16 levels deep"), "%s", rc ? err_msg() : "accepted");
    CHECK(took < 1, "took %.1fs", took);
}

/* ---- staged directories ------------------------------------------------------------------ */

typedef struct {
    const char *names[2]; /* the files to write (NULL: none) */
    const char *text;     /* what each holds */
    int fail;             /* fail after writing them, as a full disk would */
} StageFill;

static volatile sig_atomic_t stage_signal;
static int stage_signal_seen; /* whether the signal landed while fill ran */
static void on_stage_signal(int sig) { stage_signal = sig; }

static int stage_fill(const char *dir, void *arg) {
    const StageFill *f = arg;
    char path[STAGED_DIR_MAX + 256];
    for (int i = 0; i < 2 && f->names[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, f->names[i]);
        if (write_file_atomic(path, f->text, strlen(f->text)) != 0) return -1;
    }
    raise(SIGTERM); /* held: lands once the directory is published or gone */
    stage_signal_seen = stage_signal != 0;
    return f->fail ? err_set("%s: write failed: no space left on device", dir) : 0;
}

static int stage_replaces(const char *name) { return strcmp(name, "a.txt") == 0 || strcmp(name, "b.txt") == 0; }

/* "<dir>/<name>" holds text, or is absent when text is NULL. */
static int holds(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len;
    char *got = read_file(path, &len);
    int same = text ? got && strcmp(got, text) == 0 : !got;
    free(got);
    return same;
}

/* How many "*.partial-*" entries dir holds. */
static int staging_left(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) n += strstr(e->d_name, ".partial-") != NULL;
    if (d) closedir(d);
    return n;
}

static void test_staged_dir_whole_or_not_at_all(void) {
    char base[64], out[128], blocker[128], path[160];
    snprintf(base, sizeof base, "/tmp/qkv-staged-%d", (int)getpid());
    snprintf(out, sizeof out, "%s/sub/out/", base); /* parents missing; a trailing slash */
    snprintf(blocker, sizeof blocker, "%s/file", base);
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_stage_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old);
    /* a new directory, parents and all; the stop signal held until it is in place */
    StageFill first = {{"a.txt", "b.txt"}, "one", 0};
    stage_signal = 0;
    int rc = staged_dir_write(out, "--out", stage_fill, &first, stage_replaces);
    int seen = stage_signal_seen, after = stage_signal != 0;
    snprintf(path, sizeof path, "%s/sub", base);
    int ok1 = rc == 0 && holds(out, "a.txt", "one") && holds(out, "b.txt", "one") && staging_left(path) == 0;
    /* over the old one: a file it had and the new set lacks goes, one not claimed stays */
    snprintf(path, sizeof path, "%s/keep.txt", out);
    touch(path);
    StageFill second = {{"a.txt", NULL}, "two", 0};
    int rc2 = staged_dir_write(out, "--out", stage_fill, &second, stage_replaces);
    /* a write that fails partway leaves the old files whole and no staging directory */
    StageFill third = {{"a.txt", "b.txt"}, "three", 1};
    int rc3 = staged_dir_write(out, "--out", stage_fill, &third, stage_replaces);
    char msg3[256];
    snprintf(msg3, sizeof msg3, "%s", err_msg());
    /* a file where a parent directory should be: refused before anything is written */
    touch(blocker);
    snprintf(path, sizeof path, "%s/out", blocker);
    stage_signal = 0;
    int rc4 = staged_dir_write(path, "--out", stage_fill, &first, stage_replaces);
    char msg4[256];
    snprintf(msg4, sizeof msg4, "%s", err_msg());
    /* a file where the directory should be */
    int rc5 = staged_dir_write(blocker, "--out", stage_fill, &first, stage_replaces);
    char msg5[256], want5[200];
    snprintf(msg5, sizeof msg5, "%s", err_msg());
    snprintf(want5, sizeof want5, "--out: %s exists and is not a directory", blocker);
    sigaction(SIGTERM, &old, NULL);
    snprintf(path, sizeof path, "%s/sub", base);
    int left = staging_left(path) + staging_left(base);
    int ok2 = holds(out, "a.txt", "two") && holds(out, "b.txt", NULL) && holds(out, "keep.txt", "");
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", base);
    CHECK(ok1, "first write: rc %d, %s", rc, rc ? err_msg() : "files or staging wrong");
    CHECK(!seen && after, "SIGTERM %s while the files were written, %s after", seen ? "landed" : "held",
          after ? "landed" : "lost");
    CHECK(rc2 == 0 && ok2, "second write: rc %d; a.txt new, b.txt gone, keep.txt kept: %d", rc2, ok2);
    CHECK(rc3 == -1 && strstr(msg3, "write failed: no space left on device"), "failed fill: rc %d, %s", rc3, msg3);
    CHECK(rc4 == -1 && strstr(msg4, "exists and is not a directory") && stage_signal == 0,
          "a file for a parent: rc %d, %s", rc4, msg4);
    CHECK(rc5 == -1 && strcmp(msg5, want5) == 0, "a file for the directory: rc %d, %s", rc5, msg5);
    CHECK(left == 0, "%d staging directories left behind", left);
}

/* A set of one file and a subdirectory sub/ holding one file (sub NULL: no sub/). */
typedef struct {
    const char *sub;  /* the file's name in sub/ */
    const char *text; /* what both hold */
    int fail;         /* fail once written, as a full disk would */
} StageSub;

static int stage_sub_fill(const char *dir, void *arg) {
    const StageSub *f = arg;
    char path[STAGED_DIR_MAX + 256];
    snprintf(path, sizeof path, "%s/a.txt", dir);
    if (write_file_atomic(path, f->text, strlen(f->text)) != 0) return -1;
    if (f->sub) {
        snprintf(path, sizeof path, "%s/sub", dir);
        if (mkdir(path, 0777) != 0) return err_set("%s: cannot create", path);
        snprintf(path, sizeof path, "%s/sub/%s", dir, f->sub);
        if (write_file_atomic(path, f->text, strlen(f->text)) != 0) return -1;
    }
    return f->fail ? err_set("%s: write failed: no space left on device", dir) : 0;
}

/* Claims a.txt, sub/ and the .txt files in it, and link; anything else is a user's. */
static int stage_sub_replaces(const char *name) {
    size_t n = strlen(name);
    return strcmp(name, "a.txt") == 0 || strcmp(name, "sub") == 0 || strcmp(name, "link") == 0 ||
           (strncmp(name, "sub/", 4) == 0 && !strchr(name + 4, '/') && n > 8 && strcmp(name + n - 4, ".txt") == 0);
}

/* A subdirectory is replaced whole: the old one's files go, the new one's come, a failed
 * write leaves the old one, a set without it removes it, and a link is removed, not followed. */
static void test_staged_dir_subdirectory_replaced(void) {
    char base[64], out[128], path[192], target[128];
    snprintf(base, sizeof base, "/tmp/qkv-staged-sub-%d", (int)getpid());
    snprintf(out, sizeof out, "%s/out", base);
    snprintf(path, sizeof path, "%s/sub", out);
    StageSub one = {"x.txt", "one", 0}, two = {"y.txt", "two", 0}, three = {"z.txt", "three", 1};
    StageSub none = {NULL, "four", 0};
    int rc1 = staged_dir_write(out, "--out", stage_sub_fill, &one, stage_sub_replaces);
    int rc2 = staged_dir_write(out, "--out", stage_sub_fill, &two, stage_sub_replaces);
    char msg2[256];
    snprintf(msg2, sizeof msg2, "%s", rc2 ? err_msg() : "");
    int status2 = rc2 ? err_status() : 0;
    int ok2 = holds(path, "y.txt", "two") && holds(path, "x.txt", NULL) && staging_left(base) == 0;
    int rc3 = staged_dir_write(out, "--out", stage_sub_fill, &three, stage_sub_replaces);
    int ok3 = holds(path, "y.txt", "two") && holds(path, "z.txt", NULL) && staging_left(base) == 0;
    /* a link to someone else's directory, claimed and not in the new set: the link goes */
    snprintf(target, sizeof target, "%s/theirs", base);
    make_dirs(target);
    char theirs[192], link_path[192];
    snprintf(theirs, sizeof theirs, "%s/keep.txt", target);
    touch(theirs);
    snprintf(link_path, sizeof link_path, "%s/link", out);
    int linked = symlink(target, link_path) == 0;
    int rc4 = staged_dir_write(out, "--out", stage_sub_fill, &none, stage_sub_replaces);
    struct stat st;
    int ok4 = holds(out, "a.txt", "four") && stat(path, &st) != 0 && lstat(link_path, &st) != 0 &&
              holds(target, "keep.txt", "") && staging_left(base) == 0;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", base);
    CHECK(rc1 == 0, "first write: %s", err_msg());
    CHECK(rc2 == 0 && ok2, "sub/ replaced: rc %d (exit %d), %s; x.txt gone, y.txt new, no staging left: %d", rc2,
          status2, msg2, ok2);
    CHECK(rc3 == -1 && ok3, "a failed write: rc %d; the old sub/ whole, no staging left: %d", rc3, ok3);
    CHECK(linked && rc4 == 0 && ok4, "a set without sub/: rc %d; sub/ and the link gone, their file kept: %d", rc4,
          ok4);
}

/* The old set stays whole when the new one cannot go in: an entry of another kind where the
 * set puts one is refused before anything moves. What a user keeps in the folder or in a
 * subdirectory of the set stays through a publish, a nested folder of theirs too, and a
 * staging folder of a process that died writing is removed by the next write. */
static void test_staged_dir_refuses_and_keeps(void) {
    char base[64], out[128], path[192], msg[512];
    snprintf(base, sizeof base, "/tmp/qkv-staged-keep-%d", (int)getpid());
    snprintf(out, sizeof out, "%s/out", base);
    StageSub one = {"x.txt", "one", 0}, two = {"x.txt", "two", 0};
    int rc1 = staged_dir_write(out, "--out", stage_sub_fill, &one, stage_sub_replaces);
    /* a user's file and folder in sub/, a folder of a dead writer beside out */
    snprintf(path, sizeof path, "%s/sub/mine.md", out);
    touch(path);
    snprintf(path, sizeof path, "%s/sub/deep/deeper", out);
    make_dirs(path);
    snprintf(path, sizeof path, "%s/sub/deep/deeper/theirs.txt", out);
    touch(path);
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    snprintf(path, sizeof path, "%s.partial-%d/sub", out, (int)dead);
    make_dirs(path);
    snprintf(path, sizeof path, "%s.partial-%d/sub/x.txt", out, (int)dead);
    touch(path);
    int rc2 = staged_dir_write(out, "--out", stage_sub_fill, &two, stage_sub_replaces);
    snprintf(path, sizeof path, "%s/sub", out);
    int kept = holds(path, "x.txt", "two") && holds(path, "mine.md", "") && holds(path, "deep/deeper/theirs.txt", "") &&
               holds(out, "a.txt", "two") && staging_left(base) == 0;
    /* sub/x.txt a folder: refused, naming it, and a.txt (first in order) not replaced */
    snprintf(path, sizeof path, "%s/sub/x.txt", out);
    rename(path, "/tmp/qkv-staged-keep-x"), mkdir(path, 0777);
    int rc3 = staged_dir_write(out, "--out", stage_sub_fill, &one, stage_sub_replaces);
    snprintf(msg, sizeof msg, "%s", err_msg());
    int whole3 = holds(out, "a.txt", "two") && staging_left(base) == 0;
    rmdir(path), rename("/tmp/qkv-staged-keep-x", path);
    /* sub/ a link to a folder: refused, the folder it points to untouched */
    char real_sub[192], target[192];
    snprintf(real_sub, sizeof real_sub, "%s/real-sub", base);
    snprintf(path, sizeof path, "%s/sub", out);
    rename(path, real_sub);
    snprintf(target, sizeof target, "../real-sub");
    int linked = symlink(target, path) == 0;
    int rc4 = staged_dir_write(out, "--out", stage_sub_fill, &one, stage_sub_replaces);
    char msg4[512];
    snprintf(msg4, sizeof msg4, "%s", err_msg());
    int whole4 = holds(out, "a.txt", "two") && holds(real_sub, "x.txt", "two") && staging_left(base) == 0;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", base);
    CHECK(rc1 == 0 && rc2 == 0 && kept, "publish over a user's files: rc %d %d; theirs kept, no staging left: %d", rc1,
          rc2, kept);
    CHECK(rc3 == -1 && strstr(msg, "sub/x.txt: a directory where qkv writes a file: nothing in") && whole3,
          "a folder for a file: rc %d, '%s', old set whole: %d", rc3, msg, whole3);
    CHECK(linked && rc4 == -1 && strstr(msg4, "out/sub: a symbolic link where qkv writes a directory") && whole4,
          "a link for a folder: rc %d, '%s', old set whole: %d", rc4, msg4, whole4);
}

/* A table of parts is a set like any other: each part whole under its name, and a second
 * table replaces the first's files (those replaces() claims) and leaves the others. */
static void test_staged_dir_parts(void) {
    char base[64], out[128];
    snprintf(base, sizeof base, "/tmp/qkv-parts-%d", (int)getpid());
    snprintf(out, sizeof out, "%s/out", base);
    const StagedPart one[] = {{"a.txt", "first a", 7}, {"b.txt", "first b and more", 7}};
    int rc1 = staged_dir_write_parts(out, "--out", one, 2, stage_replaces);
    int first = holds(out, "a.txt", "first a") && holds(out, "b.txt", "first b");
    const StagedPart two[] = {{"a.txt", "second", 6}};
    int rc2 = staged_dir_write_parts(out, "--out", two, 1, stage_replaces);
    int second = holds(out, "a.txt", "second") && holds(out, "b.txt", NULL) && staging_left(base) == 0;
    /* "sub/name" parts: their subdirectory made once, each file in it */
    char out3[160], sub3[192];
    snprintf(out3, sizeof out3, "%s/out3", base), snprintf(sub3, sizeof sub3, "%s/sub", out3);
    const StagedPart three[] = {{"top.txt", "top", 3}, {"sub/c.txt", "c", 1}, {"sub/d.txt", "d", 1}};
    int rc3 = staged_dir_write_parts(out3, "--out", three, 3, NULL);
    int third = holds(out3, "top.txt", "top") && holds(sub3, "c.txt", "c") && holds(sub3, "d.txt", "d");
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", base);
    CHECK(rc1 == 0 && first, "the parts written: rc %d, each whole and cut at its length: %d", rc1, first);
    CHECK(rc2 == 0 && second, "a second table: rc %d, its file replaced, the claimed one it lacks removed: %d", rc2,
          second);
    CHECK(rc3 == 0 && third, "parts in a subdirectory: rc %d, each whole in it: %d", rc3, third);
}

/* One call of read_lines_arriving after piece (NULL: the writer closes the pipe) goes in:
 * its lines joined with '|', into got. */
static int arrive(int fds[2], const char *piece, char **pending, size_t *pending_len, int *done, char *got,
                  size_t size) {
    if (piece && write(fds[1], piece, strlen(piece)) != (ssize_t)strlen(piece)) return -1;
    if (!piece) close(fds[1]), fds[1] = -1;
    int n;
    char **lines = read_lines_arriving(fds[0], "pipe", 0, pending, pending_len, &n, done);
    if (!lines) return -1;
    got[0] = '\0';
    for (int i = 0; i < n; i++) snprintf(got + strlen(got), size - strlen(got), "%s%s", i ? "|" : "", lines[i]);
    free_lines(lines, n);
    return n;
}

/* Lines as they arrive: a line, and a "\r\n", split across reads; an empty line; the last
 * line without its '\n' comes at the end of input. */
static void test_lines_arriving_in_pieces(void) {
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    const char *pieces[] = {"one\ntw", "o\r", "\n\nth", "ree\r\nfour", NULL};
    const char *want[] = {"one", "", "two|", "three", "four"};
    char *pending = NULL, got[64] = "";
    size_t pending_len = 0;
    int done = 0, step = 0, n = 0;
    for (; step < 5 && n >= 0; step++) {
        n = arrive(fds, pieces[step], &pending, &pending_len, &done, got, sizeof got);
        if (n < 0 || strcmp(got, want[step]) != 0 || done != (step == 4)) break;
    }
    close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    free(pending);
    CHECK(step == 5 && pending_len == 0, "read %d: got '%s', want '%s', done %d, %zu bytes pending", step,
          n < 0 ? err_msg() : got, step < 5 ? want[step] : "", done, pending_len);
}

/* A line of 4 MiB arriving 4 KiB at a time takes time linear in its length: each read
 * looks for the '\n' in what it read, not through all of the line so far (1,024 reads
 * that way took 1.5 to 3 s, against 0.02 s), and the line's buffer doubles rather than
 * growing by a read. */
static void test_long_line_arriving_in_pieces(void) {
    enum { PIECE = 4096, PIECES = 1024 };
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    char piece[PIECE + 1];
    memset(piece, 'x', PIECE), piece[PIECE] = '\0';
    char *pending = NULL, got[64] = "";
    size_t pending_len = 0;
    int done = 0, early = 0, n = 0;
    double t0 = now_seconds();
    for (int i = 0; i < PIECES && n >= 0; i++) {
        n = write(fds[1], piece, PIECE) == PIECE ? 0 : -1;
        int k = 0;
        char **lines = n < 0 ? NULL : read_lines_arriving(fds[0], "pipe", 0, &pending, &pending_len, &k, &done);
        if (!lines) n = -1;
        early += k;
        if (lines) free_lines(lines, k);
    }
    double took = now_seconds() - t0;
    int nl = -1, last = -1;
    size_t line_len = 0;
    char *line = NULL;
    if (n >= 0 && write(fds[1], "\nend", 4) == 4) {
        int k;
        char **lines = read_lines_arriving(fds[0], "pipe", 0, &pending, &pending_len, &k, &done);
        if (lines && k == 1) line_len = strlen(lines[0]), line = lines[0], lines[0] = NULL;
        if (lines) free_lines(lines, k);
        nl = k;
        last = arrive(fds, NULL, &pending, &pending_len, &done, got, sizeof got);
    }
    close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    free(pending);
    size_t xs = 0;
    while (line && xs < line_len && line[xs] == 'x') xs++;
    free(line);
    CHECK(n >= 0 && early == 0, "%s; %d lines before the newline", n < 0 ? err_msg() : "read", early);
    CHECK(nl == 1 && line_len == (size_t)PIECE * PIECES && xs == line_len, "%d lines at the newline, of %zu bytes", nl,
          line_len);
    CHECK(last == 1 && done && strcmp(got, "end") == 0, "at the end: %d lines, '%s'", last, got);
    CHECK(took < 0.2, "%.2f s for a line of %d KiB in %d reads", took, PIECE * PIECES / 1024, PIECES);
}

/* A byte order mark first in a file is not part of its first line (it would join the
 * first word: a vocabulary's "\xEF\xBB\xBFthe" beside "the"); one further on is text. */
static void test_byte_order_mark_first_is_dropped(void) {
    static const char text[] = "\xEF\xBB\xBFthe cat\n\xEF\xBB\xBFsat\n";
    FILE *f = fmemopen((void *)text, sizeof text - 1, "r");
    int n = -1;
    char **lines = f ? read_lines_checked(f, "in.txt", &n) : NULL;
    if (f) fclose(f);
    CHECK(lines && n == 2, "%d lines", n);
    int ok = strcmp(lines[0], "the cat") == 0 && strcmp(lines[1], "\xEF\xBB\xBFsat") == 0;
    free_lines(lines, n);
    CHECK(ok, "the mark first dropped, the later one kept");
    /* as lines arrive: first in the input only */
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    char *pending = NULL;
    size_t pending_len = 0;
    int done = 0, k = -1;
    lines = write(fds[1], text, sizeof text - 1) == (ssize_t)(sizeof text - 1)
                ? read_lines_arriving(fds[0], "pipe", 0, &pending, &pending_len, &k, &done)
                : NULL;
    close(fds[0]), close(fds[1]), free(pending);
    CHECK(lines && k == 2, "%d lines arriving", k);
    ok = strcmp(lines[0], "the cat") == 0 && strcmp(lines[1], "\xEF\xBB\xBFsat") == 0;
    free_lines(lines, k);
    CHECK(ok, "arriving: the mark first dropped, the later one kept");
    /* the mark and the first line in pieces: a call before the first line ends takes none */
    CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    pending = NULL, pending_len = 0, done = 0;
    int first = -1, second = -1;
    char **none = write(fds[1], "\xEF\xBB", 2) == 2
                      ? read_lines_arriving(fds[0], "pipe", 0, &pending, &pending_len, &first, &done)
                      : NULL;
    lines = none && write(fds[1],
                          "\xBF"
                          "cat\n",
                          5) == 5
                ? read_lines_arriving(fds[0], "pipe", 0, &pending, &pending_len, &second, &done)
                : NULL;
    close(fds[0]), close(fds[1]), free(pending);
    ok = none && first == 0 && lines && second == 1 && strcmp(lines[0], "cat") == 0;
    if (none) free_lines(none, first);
    if (lines) free_lines(lines, second);
    CHECK(ok, "arriving in pieces: %d then %d lines", first, second);
}

/* A NUL byte in the input is refused with its line's number, where a C string would end
 * the line at it and drop the rest unseen: read whole (the second line of three), and as
 * lines arrive (the NUL in the fifth line overall, two lines after the seven taken before,
 * behind a partial line that waited). Text without one reads as before. */
static void test_nul_byte_refused_with_its_line(void) {
    static const char whole[] = "one\ntw\0o\nthree\n";
    FILE *f = fmemopen((void *)whole, sizeof whole - 1, "r");
    int n = -1;
    char **lines = f ? read_lines_checked(f, "in.txt", &n) : NULL;
    char msg[128];
    snprintf(msg, sizeof msg, "%s", lines ? "" : err_msg());
    if (lines) free_lines(lines, n);
    if (f) fclose(f);
    CHECK(!lines && strcmp(msg, "in.txt: line 2 holds a NUL byte: not text") == 0, "read whole: %s", msg);
    CHECK(err_status() == 2, "a NUL byte is bad input, exit %d", err_status());

    int fds[2];
    CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    char *pending = NULL;
    size_t pending_len = 0;
    int done = 0, k = -1;
    lines = write(fds[1], "a\nb\nc", 5) == 5 ? read_lines_arriving(fds[0], "pipe", 7, &pending, &pending_len, &k, &done)
                                             : NULL;
    int first = lines ? k : -1;
    if (lines) free_lines(lines, k);
    lines = write(fds[1], "c\nd\0d\n", 7) == 7
                ? read_lines_arriving(fds[0], "pipe", 7 + first, &pending, &pending_len, &k, &done)
                : NULL;
    snprintf(msg, sizeof msg, "%s", lines ? "" : err_msg());
    if (lines) free_lines(lines, k);
    close(fds[0]), close(fds[1]), free(pending);
    CHECK(first == 2 && !lines && strcmp(msg, "pipe: line 11 holds a NUL byte: not text") == 0,
          "arriving: %d lines first, then %s", first, msg);
}

/* json_fmt keeps a number's printed digits however long the text: a diverging run's
 * valid_ppl of 1.05e308 as "%.4f" is 314 characters, and a cut buffer wrote 1.05e62. */
static void test_json_numbers_keep_their_size(void) {
    static const double v[] = {1.0517e308, 3.25e59, 12.5, -7.125e200};
    for (int i = 0; i < 4; i++) {
        json_t *j = json_fmt("%.4f", v[i]);
        double got = j ? json_real_value(j) : 0.0;
        json_decref(j);
        CHECK(got == v[i], "%.6g written as %.6g", v[i], got);
    }
    json_t *inf = json_fmt("%.4f", INFINITY);
    CHECK(json_is_null(inf), "infinity is not null");
    json_decref(inf);
}

/* A name or a line that is not UTF-8 keeps its key in a JSON file, each bad byte U+FFFD
 * (json_string gives NULL for it, and json_put would drop the key); good text, a cut-off
 * sequence at the end and an overlong form included. */
static void test_json_utf8_keeps_the_key(void) {
    static const struct {
        const char *in, *want;
    } cases[] = {{"s\xff"
                  "5.src",
                  "s\xef\xbf\xbd"
                  "5.src"},
                 {"caf\xc3\xa9", "caf\xc3\xa9"},
                 {"ab\xe2\x82", "ab\xef\xbf\xbd\xef\xbf\xbd"},
                 {"\xc0\xafx", "\xef\xbf\xbd\xef\xbf\xbdx"},
                 {"", ""}};
    for (int i = 0; i < 5; i++) {
        json_t *o = json_object();
        json_put(o, "src", json_utf8(cases[i].in));
        const char *got = json_string_value(json_object_get(o, "src"));
        CHECK(got && strcmp(got, cases[i].want) == 0, "case %d: '%s'", i, got ? got : "(no key)");
        json_decref(o);
    }
}

/* A page's frame filled part by part: each marker replaced where it stands (twice if it
 * stands twice), the rest kept byte for byte; a marker no part fills, or a part with no
 * marker, refused (the frame and its writer out of step). */
static void fill_who(StrBuf *sb, const void *ctx) { sb_printf(sb, "<b>%s</b>", (const char *)ctx); }
static void fill_n(StrBuf *sb, const void *ctx) { sb_printf(sb, "%zu", strlen(ctx)); }
static void test_page_fill_parts_where_they_stand(void) {
    const PageSlot slots[] = {{"who", fill_who}, {"n", fill_n}};
    StrBuf sb = {0};
    CHECK(page_fill(&sb, "a {{who}} b{{n}}{ c } {{who}}", slots, 2, "qkv") == 0, "%s", err_msg());
    CHECK(sb.buf && strcmp(sb.buf, "a <b>qkv</b> b3{ c } <b>qkv</b>") == 0, "got '%s'", sb.buf ? sb.buf : "");
    sb_free(&sb);
    CHECK(page_fill(&sb, "{{who}} {{what}} {{n}}", slots, 2, "x") == -1, "a marker no part fills was taken");
    CHECK(strstr(err_msg(), "{{what}}"), "the error does not name the marker: %s", err_msg());
    sb_free(&sb);
    CHECK(page_fill(&sb, "just {{who}}", slots, 2, "x") == -1, "a part with no place was taken");
    CHECK(strstr(err_msg(), "{{n}}"), "the error does not name the part: %s", err_msg());
    sb_free(&sb);
    CHECK(page_fill(&sb, "no end {{who", slots, 1, "x") == -1, "an unclosed marker was read as a place");
    sb_free(&sb);
}

const TestCase files_tests[] = {
    {"files_deep_config_in_checkpoint_refused_quickly", test_deep_config_in_checkpoint},
    {"files_tmp_names_per_process_and_sweep", test_tmp_names_and_sweep},
    {"files_checkpoint_header_length_judged_first", test_header_length_judged_first},
    {"files_staged_dir_whole_or_not_at_all", test_staged_dir_whole_or_not_at_all},
    {"files_staged_dir_subdirectory_replaced", test_staged_dir_subdirectory_replaced},
    {"files_staged_dir_refuses_and_keeps", test_staged_dir_refuses_and_keeps},
    {"files_staged_dir_parts", test_staged_dir_parts},
    {"files_lines_arriving_in_pieces", test_lines_arriving_in_pieces},
    {"files_long_line_arriving_in_pieces_is_linear", test_long_line_arriving_in_pieces},
    {"files_byte_order_mark_first_is_dropped", test_byte_order_mark_first_is_dropped},
    {"files_nul_byte_refused_with_its_line", test_nul_byte_refused_with_its_line},
    {"files_json_numbers_keep_their_size", test_json_numbers_keep_their_size},
    {"files_json_utf8_keeps_the_key", test_json_utf8_keeps_the_key},
    {"files_page_fill_parts_where_they_stand", test_page_fill_parts_where_they_stand},
    {NULL, NULL},
};
