/* run: see run.h. */
#define _DEFAULT_SOURCE /* DT_REG, linkat friends */
#include "run/run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/rng.h"
#include "util/text.h"

ModelConfig run_model_config(const Config *c, int src_vocab, int tgt_vocab) {
    return (ModelConfig){
        .src_vocab = src_vocab,
        .pad_id = VOCAB_PAD,
        .tgt_vocab = tgt_vocab,
        .d_model = c->model.d_model,
        .heads = c->model.heads,
        .d_ff = c->model.d_ff,
        .encoder_layers = c->model.encoder_layers,
        .decoder_layers = c->model.decoder_layers,
        .dropout = (float)c->model.dropout,
        .pre_norm = c->model.norm == NORM_PRE,
        .tie_embeddings = c->model.tie_embeddings,
        .label_smoothing = (float)c->train.label_smoothing,
        /* room for outputs up to twice the longest training sentence; the sinusoidal
         * table has no weights, so its length costs nothing in a checkpoint */
        .max_positions = 2 * c->data.max_len + 12,
    };
}

const char *run_path(char *buf, size_t n, const char *dir, const char *file) {
    snprintf(buf, n, "%s/%s", dir, file);
    return buf;
}

const char *run_step_checkpoint(char *buf, size_t n, const char *dir, long long step) {
    snprintf(buf, n, "%s/" RUN_CKPT_DIR "/step-%06lld.safetensors", dir, step);
    return buf;
}

uint64_t run_vocab_hash(const Vocab *src, const Vocab *tgt) { return hash64(vocab_hash(src), vocab_hash(tgt)); }

/* 1 if name is a step checkpoint's file name, step-<digits>.safetensors (zero-padded as
 * qkv writes them or not), its step in *step. */
static int step_name(const char *name, long long *step) {
    int end = 0;
    return strlen(name) < sizeof((StepFile *)0)->name && sscanf(name, "step-%lld.safetensors%n", step, &end) == 1 &&
           end > 0 && name[end] == '\0' && name[5] >= '0' && name[5] <= '9' && *step >= 0;
}

static int by_step(const void *a, const void *b) {
    const StepFile *x = a, *y = b;
    return x->step != y->step ? (x->step > y->step) - (x->step < y->step) : strcmp(x->name, y->name);
}

/* The run's step checkpoints as their names give them, by step; returns the count. The
 * files are listed by the names they have: step-40.safetensors is not step-000040. */
static int list_steps(const char *dir, StepFile **out) {
    char ck[CONFIG_PATH_MAX + 16];
    run_path(ck, sizeof ck, dir, RUN_CKPT_DIR);
    DIR *d = opendir(ck);
    int n = 0, cap = 16;
    StepFile *files = xmalloc(sizeof(StepFile) * (size_t)cap);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            long long s;
            if (!step_name(e->d_name, &s)) continue;
            if (n == cap) files = xrealloc(files, sizeof(StepFile) * (size_t)(cap *= 2));
            files[n].step = s;
            snprintf(files[n++].name, sizeof files->name, "%s", e->d_name); /* fits: step_name */
        }
        closedir(d);
    }
    qsort(files, (size_t)n, sizeof *files, by_step);
    *out = files;
    return n;
}

/* "<dir>/ckpt/<name>" into buf */
static const char *ckpt_file_path(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/" RUN_CKPT_DIR "/%s", dir, name);
    return buf;
}

/* run_step_checkpoints' paths, those of steps up to `until` alone */
static int step_checkpoints_until(const char *dir, long long until, char ***paths) {
    StepFile *files;
    int n = list_steps(dir, &files);
    while (n > 0 && files[n - 1].step > until) n--;
    *paths = xmalloc(sizeof(char *) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        char p[CONFIG_PATH_MAX + 96];
        (*paths)[i] = xstrdup(ckpt_file_path(p, sizeof p, dir, files[i].name));
    }
    free(files);
    return n;
}

int run_step_checkpoints(const char *dir, char ***paths) { return step_checkpoints_until(dir, LLONG_MAX, paths); }

int run_check_step_name(const char *path, int64_t step) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    long long named;
    if (!step_name(base, &named) || named == step) return 0;
    return err_set("%s: holds step %lld, not the step %lld its name says (renamed?); resume, rotation and "
                   "'latest' go by the names: remove it, or rename it step-%06lld.safetensors",
                   path, (long long)step, named, (long long)step);
}

int run_open_newest_checkpoints(const char *dir, long long until, int n, int *fds, char ***paths) {
    /* a train of the run may rotate the oldest away between the listing and the open:
     * then the listing is read again; each file once open stays readable */
    for (int attempt = 0; attempt < 1000; attempt++) {
        char **all;
        int have = step_checkpoints_until(dir, until, &all), take = have < n ? have : n, opened = 0, vanished = 0;
        if (have >= 0 && have < n && attempt < 20) {
            /* a listing made while a checkpoint is renamed in and an old one removed can
             * miss the new one (readdir over a changing directory): look again, briefly,
             * before saying there are fewer than n */
            free_lines(all, have);
            nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
            continue;
        }
        for (; opened < take; opened++) {
            const char *p = all[have - take + opened];
            struct stat st;
            if ((fds[opened] = open_regular(p, READ_FILE_ANY, NULL)) >= 0) continue;
            vanished = stat(p, &st) != 0 && errno == ENOENT;
            break;
        }
        if (opened == take) {
            *paths = xmalloc(sizeof(char *) * (size_t)(take ? take : 1));
            for (int i = 0; i < take; i++) (*paths)[i] = xstrdup(all[have - take + i]);
            free_lines(all, have);
            return take;
        }
        for (int i = 0; i < opened; i++) close(fds[i]);
        free_lines(all, have);
        if (!vanished) return -1; /* a fault of the file's own, set by open_regular */
    }
    return err_set("%s: the run's checkpoints kept vanishing while being opened", dir);
}

int run_in_its_run(const Run *r) {
    char cfg[CONFIG_PATH_MAX + 32];
    struct stat st;
    return !r->meta.src_vocab && stat(run_path(cfg, sizeof cfg, r->dir, RUN_CONFIG), &st) == 0;
}

/* run_out_replaces_own_file's checks against the run in dir (in_run: dir holds one, not
 * just exported weights) and the weights read (NULL: none), out given by option. */
static int out_replaces(const char *dir, int in_run, const char *weights, const char *out, const char *option,
                        const char *writer) {
    struct stat o;
    if (run_is_own_checkpoint(dir, out))
        return err_set("%s: %s is a checkpoint of the run %s, which %s would replace: choose another file", out, option,
                       dir, writer),
               1;
    if (weights && same_file(out, weights))
        return err_set("%s: %s is the weights file %s reads (%s): choose another file", out, option, writer, weights),
               1;
    /* an exported file read alone has no run: its directory is anyone's */
    if (in_run && lstat(out, &o) == 0 && path_inside(out, dir, NULL))
        return err_set("%s: %s is a file of the run %s, which %s would replace: choose another file", out, option, dir,
                       writer),
               1;
    return 0;
}

int run_out_replaces_own_file(const Run *r, const char *out, const char *writer) {
    return out_replaces(r->dir, run_in_its_run(r), r->weights, out, "--out", writer);
}

/* 1 if dir holds a run: its config.yaml and its ckpt/ folder */
static int holds_run(const char *dir) {
    char p[CONFIG_PATH_MAX + 128];
    struct stat st;
    return stat(run_path(p, sizeof p, dir, RUN_CONFIG), &st) == 0 && S_ISREG(st.st_mode) &&
           stat(run_path(p, sizeof p, dir, RUN_CKPT_DIR), &st) == 0 && S_ISDIR(st.st_mode);
}

int run_out_replaces_a_runs_file(const char *dir, const char *out, const char *option, const char *writer) {
    if (dir && dir[0] && out_replaces(dir, holds_run(dir), NULL, out, option, writer)) return 1;
    /* the folders above out, as spelled ("a/b/x": a/b, a, ., .., ../..), to the root */
    char up[CONFIG_PATH_MAX + 64], real[PATH_MAX];
    const char *slash = strrchr(out, '/');
    if (!slash) snprintf(up, sizeof up, ".");
    else snprintf(up, sizeof up, "%.*s", slash == out ? 1 : (int)(slash - out), out);
    for (int depth = 0; depth < 256 && strlen(up) + 4 < sizeof up; depth++) {
        if (holds_run(up) && out_replaces(up, 1, NULL, out, option, writer)) return 1;
        if (!realpath(up, real) || strcmp(real, "/") == 0) break;
        char *cut = strrchr(up, '/');
        const char *last = cut ? cut + 1 : up;
        if (strcmp(last, ".") == 0 && !cut) snprintf(up, sizeof up, "..");
        else if (strcmp(last, "..") == 0 || strcmp(last, ".") == 0 || !*last) strcat(up, "/..");
        else if (!cut) snprintf(up, sizeof up, ".");
        else if (cut == up) snprintf(up, sizeof up, "/");
        else *cut = '\0';
    }
    return 0;
}

int run_is_own_checkpoint(const char *dir, const char *path) {
    char ck[CONFIG_PATH_MAX + 16], p[CONFIG_PATH_MAX + 64];
    struct stat st, ck_st, other;
    run_path(ck, sizeof ck, dir, RUN_CKPT_DIR);
    if (stat(ck, &ck_st) != 0) return 0; /* no checkpoints: nothing to overwrite */
    if (stat(path, &st) == 0) {          /* the same file under any name, a hard link or a symbolic one */
        char **steps;
        int n = run_step_checkpoints(dir, &steps), same = 0;
        for (int i = 0; i < n && !same; i++)
            same = stat(steps[i], &other) == 0 && other.st_dev == st.st_dev && other.st_ino == st.st_ino;
        free_lines(steps, n);
        if (same || (stat(run_path(p, sizeof p, dir, RUN_BEST), &other) == 0 && other.st_dev == st.st_dev &&
                     other.st_ino == st.st_ino))
            return 1;
    }
    /* a name the run's ckpt/ uses, whether or not it is there yet: the directory resolved */
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    char parent[CONFIG_PATH_MAX + 64];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else snprintf(parent, sizeof parent, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    long long step;
    return (strcmp(base, RUN_BEST_NAME) == 0 || step_name(base, &step)) && stat(parent, &st) == 0 &&
           st.st_dev == ck_st.st_dev && st.st_ino == ck_st.st_ino;
}

int run_latest_checkpoint(const char *dir, char *buf, size_t n) {
    StepFile *files;
    int count = list_steps(dir, &files), rc = 0;
    if (count == 0) {
        /* a run pruned to its best by hand: that checkpoint carries the optimizer's state and
         * can go on, once it is a step file again (train would say "resume it": no loop) */
        char best[CONFIG_PATH_MAX + 64];
        CkptMeta meta = {0};
        if (ckpt_peek(run_path(best, sizeof best, dir, RUN_BEST), &meta) == 0)
            rc = err_set("%s: no step checkpoint in %s/ckpt, only best.safetensors (step %lld): to go on from it, "
                         "copy it to %s/ckpt/step-%06lld.safetensors and resume",
                         dir, dir, (long long)meta.step, dir, (long long)meta.step);
        else if (stat(run_path(best, sizeof best, dir, RUN_AVERAGE), &(struct stat){0}) == 0)
            rc = err_set("%s: no step checkpoint in %s/ckpt, only average.safetensors, which holds no optimizer "
                         "state: nothing to go on from ('qkv train %s/config.yaml --set run_dir=%s --force' starts "
                         "over; translate and export still read the average)",
                         dir, dir, dir, dir);
        else rc = err_set("%s: no checkpoint in %s/ckpt to go on from (train first)", dir, dir);
        ckpt_meta_free(&meta);
    } else if (count > 1 && files[count - 2].step == files[count - 1].step)
        rc = err_set("%s/" RUN_CKPT_DIR ": %s and %s are both step %lld: remove one", dir, files[count - 2].name,
                     files[count - 1].name, files[count - 1].step);
    else ckpt_file_path(buf, n, dir, files[count - 1].name);
    free(files);
    return rc;
}

void run_rotate_checkpoints(const char *dir, int keep) {
    StepFile *files;
    int count = list_steps(dir, &files);
    char p[CONFIG_PATH_MAX + 96];
    /* the newest `keep` whose header holds the step their name says stay; one that holds
     * another step (renamed, or copied in under a later name) is neither counted nor
     * removed, so it never pushes the run's real checkpoints out. keep 0: all go */
    for (int i = count - 1, kept = 0; i >= 0 && count > keep; i--) {
        CkptMeta meta = {0};
        ckpt_file_path(p, sizeof p, dir, files[i].name);
        int read = keep > 0 && ckpt_peek(p, &meta) == 0, truthful = read && meta.step == files[i].step;
        ckpt_meta_free(&meta);
        if (kept < keep) kept += truthful;
        else if (truthful || !read) unlink(p); /* past the kept ones: the run's old step, or damaged */
    }
    free(files);
    char ck[CONFIG_PATH_MAX + 16];
    DIR *d = opendir(run_path(ck, sizeof ck, dir, RUN_CKPT_DIR));
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char tmp[sizeof ck + sizeof e->d_name + 1];
        if (tmp_is_stale(e->d_name)) {
            snprintf(tmp, sizeof tmp, "%s/%s", ck, e->d_name);
            unlink(tmp);
        }
    }
    closedir(d);
}

void run_clear_checkpoints(const char *dir) {
    run_rotate_checkpoints(dir, 0);
    char p[CONFIG_PATH_MAX + 64];
    unlink(run_path(p, sizeof p, dir, RUN_BEST));
    unlink(run_path(p, sizeof p, dir, RUN_AVERAGE));
}

int run_mark_best(const char *dir, const char *ckpt_path) {
    char best[CONFIG_PATH_MAX + 64], tmp[CONFIG_PATH_MAX + 80];
    run_path(best, sizeof best, dir, RUN_BEST);
    if (tmp_name(tmp, sizeof tmp, best) != 0) return -1;
    unlink(tmp);
    signals_hold(); /* no tmp link left by a stop between link and rename */
    /* a hard link costs no space and survives the rotation deleting the step file */
    int rc = 0, e = 0;
    if (link(ckpt_path, tmp) != 0) {
        e = errno;
        signals_release();
        /* a file system without hard links (vfat, exFAT, many network and FUSE mounts):
         * a copy, written whole as every file is */
        if (e == EPERM || e == EXDEV || e == ENOTSUP || e == EOPNOTSUPP || e == EMLINK || e == ENOSYS) {
            size_t len;
            char *bytes = read_file_max(ckpt_path, READ_FILE_ANY, &len);
            rc = bytes ? write_file_atomic(best, bytes, len) : -1;
            free(bytes);
            return rc;
        }
        return err_set("%s: cannot link: %s", tmp, strerror(e));
    }
    if (rename(tmp, best) != 0) {
        e = errno;
        unlink(tmp);
        rc = err_set("%s: cannot rename into place: %s", best, strerror(e));
    }
    signals_release();
    return rc;
}

/* The run's lock: a write lock on <dir>/lock held by this process until it exits (the
 * kernel drops it however the process ends), the file holding the holder's pid. Taken
 * before the run's files are looked at, so two processes never share a run. */
static int run_lock(const char *dir) {
    char p[CONFIG_PATH_MAX + 32];
    run_path(p, sizeof p, dir, RUN_LOCK);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return err_set("%s: %s", p, strerror(errno));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        int e = errno;
        struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        long pid = fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK ? (long)who.l_pid : -1;
        close(fd);
        if (e != EACCES && e != EAGAIN) return err_set("%s: cannot lock: %s", p, strerror(e));
        return err_set("%s: in use by process %ld (a train or resume of this run); wait for it or stop it", dir, pid);
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    int written = ftruncate(fd, 0) == 0 && write(fd, pid, (size_t)n) == n;
    (void)written; /* the pid is only informative: the lock is what counts */
    return 0;      /* fd stays open: closing it would drop the lock */
}

/* 1 when <dir>/lock is absent or a run's: a process id and a line end, as run_lock writes
 * it (empty: one made and not yet written); 0 for anything else, someone's own file. */
static int lock_is_a_runs(const char *dir) {
    char p[CONFIG_PATH_MAX + 32], text[32];
    struct stat st;
    if (lstat(run_path(p, sizeof p, dir, RUN_LOCK), &st) != 0) return 1;
    if (!S_ISREG(st.st_mode) || st.st_size >= (off_t)sizeof text) return 0;
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n < 0) return 0;
    size_t i = 0;
    while (i < (size_t)n && text[i] >= '0' && text[i] <= '9') i++;
    return n == 0 || (i > 0 && i + 1 == (size_t)n && text[i] == '\n');
}

long run_lock_holder(const char *dir) {
    char p[CONFIG_PATH_MAX + 32];
    int fd = open(run_path(p, sizeof p, dir, RUN_LOCK), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    struct flock who = {.l_type = F_RDLCK, .l_whence = SEEK_SET}; /* a read lock conflicts with the write lock */
    long pid = fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK ? (long)who.l_pid : 0;
    close(fd);
    return pid;
}

/* Whether a run has a checkpoint to lose: a step file, best.safetensors, or the average
 * (a run pruned to it still translates). */
static int has_checkpoint(const char *dir) {
    char p[CONFIG_PATH_MAX + 64];
    struct stat st;
    StepFile *files;
    int n = list_steps(dir, &files);
    free(files);
    return n > 0 || stat(run_path(p, sizeof p, dir, RUN_BEST), &st) == 0 ||
           stat(run_path(p, sizeof p, dir, RUN_AVERAGE), &st) == 0;
}

/* The files a train writes before its first step: what run_abandon may take back. */
static const char *const early_files[] = {RUN_CONFIG,  RUN_SRC_VOCAB, RUN_TGT_VOCAB, RUN_SRC_SPM,
                                          RUN_TGT_SPM, RUN_METRICS,   RUN_CURVES,    RUN_LOCK};
#define N_EARLY (sizeof early_files / sizeof early_files[0])
_Static_assert(N_EARLY <= 8 * sizeof(unsigned), "RunFresh.had holds a bit per file");

/* The names a new train writes (or appends to) in its directory past early_files and
 * checkpoints. */
static const char *const later_files[] = {RUN_REPORT,    RUN_JOURNAL,   RUN_SAMPLES, RUN_EVAL,
                                          RUN_WATCH_DIR, RUN_HEADS_DIR, RUN_AVERAGE};

/* The first file of a run's names in dir (those of early_files its bits in had say are
 * there, the lock aside, then later_files), or NULL: in a directory that holds no run,
 * someone's file; but the config this train reads (source), put there to train from. */
static const char *someones_file(const char *dir, unsigned had, const char *source) {
    char p[CONFIG_PATH_MAX + 64];
    struct stat st;
    for (size_t i = 0; i < N_EARLY; i++) {
        if (!(had & 1u << i)) continue;
        if (strcmp(early_files[i], RUN_LOCK) == 0) { /* a run's lock is left by any train; a file of one's own is not */
            if (!lock_is_a_runs(dir)) return early_files[i];
            continue;
        }
        /* the same file however reached: RUN/config.yaml may be a link to it, or it to RUN/config.yaml */
        if (strcmp(early_files[i], RUN_CONFIG) == 0 && same_file(run_path(p, sizeof p, dir, RUN_CONFIG), source))
            continue;
        return early_files[i];
    }
    for (size_t i = 0; i < sizeof later_files / sizeof *later_files; i++)
        if (lstat(run_path(p, sizeof p, dir, later_files[i]), &st) == 0) return later_files[i];
    return NULL;
}

int run_create(const Config *cfg, int force, RunFresh *fresh) {
    char p[CONFIG_PATH_MAX + 32];
    struct stat st;
    memset(fresh, 0, sizeof *fresh);
    fresh->made = stat(cfg->run_dir, &st) != 0;
    if (make_dirs(cfg->run_dir) != 0) return -1;
    /* what is there before this train writes anything (the lock included) is not its own */
    for (size_t i = 0; i < N_EARLY; i++)
        if (lstat(run_path(p, sizeof p, cfg->run_dir, early_files[i]), &st) == 0) fresh->had |= 1u << i;
    fresh->had_ckpt_dir = lstat(run_path(p, sizeof p, cfg->run_dir, RUN_CKPT_DIR), &st) == 0;
    /* a run stopped before its first checkpoint (its ckpt/ is made before its config.yaml)
     * has nothing to resume from or to lose; a config.yaml alone is someone's file */
    int stopped_early = fresh->had_ckpt_dir && (fresh->had & 1u);
    /* a file of a run's name where no run is (run_dir: . in a project, a folder of one's
     * own) is not this train's to write over unasked; checked before the lock, which
     * would leave a file of ours there */
    const char *theirs = NULL;
    if (!force && !stopped_early && !has_checkpoint(cfg->run_dir))
        theirs = someones_file(cfg->run_dir, fresh->had, cfg->source);
    if (theirs)
        return err_set("%s: holds %s and no run: a new run would write over it; pass --force, or choose another "
                       "run_dir",
                       cfg->run_dir, theirs);
    if (run_lock(cfg->run_dir) != 0) return -1;
    if (regular_or_absent(run_path(p, sizeof p, cfg->run_dir, RUN_METRICS)) != 0) return -1;
    if (has_checkpoint(cfg->run_dir)) {
        if (!force)
            return err_set("%s: already holds a run; resume it with 'qkv resume %s', or pass --force to start over",
                           cfg->run_dir, cfg->run_dir);
        return 0;
    }
    return stopped_early ? 1 : 0;
}

void run_abandon(const char *dir, const RunFresh *fresh) {
    if (has_checkpoint(dir)) return;
    char p[CONFIG_PATH_MAX + 32];
    for (size_t i = 0; i < N_EARLY; i++)
        if (!(fresh->had & 1u << i)) unlink(run_path(p, sizeof p, dir, early_files[i]));
    run_rotate_checkpoints(dir, 0); /* this process' tmp files */
    if (!fresh->had_ckpt_dir) rmdir(run_path(p, sizeof p, dir, RUN_CKPT_DIR));
    if (fresh->made) rmdir(dir); /* only when empty: nothing of anyone else's goes */
}

/* What a run wrote of itself past its checkpoints: a new run in the folder (train
 * --force, or over a run stopped before its first checkpoint) starts without the old
 * one's journal, samples, evaluations, report and head analysis, which would otherwise
 * be read as the new model's. */
static void clear_history(const char *dir) {
    char p[CONFIG_PATH_MAX + 32];
    static const char *const files[] = {RUN_JOURNAL, RUN_SAMPLES, RUN_EVAL, RUN_REPORT};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) unlink(run_path(p, sizeof p, dir, files[i]));
    remove_tree(run_path(p, sizeof p, dir, RUN_HEADS_DIR), 2); /* heads/ and its masks/ */
}

int run_write_files(const Run *r) {
    const char *dir = r->cfg.run_dir;
    char p[CONFIG_PATH_MAX + 32];
    run_clear_checkpoints(dir);
    clear_history(dir);
    if (make_dirs(run_path(p, sizeof p, dir, RUN_CKPT_DIR)) != 0 ||
        config_write(&r->cfg, run_path(p, sizeof p, dir, RUN_CONFIG)) != 0 ||
        vocab_save(&r->src_vocab, run_path(p, sizeof p, dir, RUN_SRC_VOCAB)) != 0 ||
        vocab_save(&r->tgt_vocab, run_path(p, sizeof p, dir, RUN_TGT_VOCAB)) != 0)
        return -1;
    /* a subword run's tokenizers are its SentencePiece models, kept beside the piece lists */
    if (r->src_vocab.spm &&
        (write_file_atomic(run_path(p, sizeof p, dir, RUN_SRC_SPM), r->src_vocab.spm_model, r->src_vocab.spm_len) !=
             0 ||
         write_file_atomic(run_path(p, sizeof p, dir, RUN_TGT_SPM), r->tgt_vocab.spm_model, r->tgt_vocab.spm_len) != 0))
        return -1;
    return 0;
}

/* One side's vocabulary: the SentencePiece model of a subword run, else the token list. */
static int load_vocab(Run *r, Vocab *v, const char *side) {
    char p[CONFIG_PATH_MAX + 32], name[16];
    if (!tokenizer_is_subword(r->cfg.data.tokenizer)) {
        snprintf(name, sizeof name, "%s.vocab", side);
        return vocab_load(v, run_path(p, sizeof p, r->dir, name));
    }
    snprintf(name, sizeof name, "%s.model", side);
    size_t len;
    char *bytes = read_file_max(run_path(p, sizeof p, r->dir, name), READ_FILE_SMALL, &len);
    if (!bytes) return -1;
    int rc = vocab_from_spm(v, bytes, len, p);
    free(bytes);
    return rc;
}

/* The keys a resume takes from config.yaml rather than the checkpoint: where the run and
 * its data are (the training text is held to the checkpoint's data hash all the same; the
 * SentencePiece models a resume uses are the run's own copies), how
 * far it goes, in steps and minutes, and on how many threads (what resume's --steps, --minutes and
 * --threads record there); and how it decodes, which training never reads. */
static const char *const resume_own_keys[] =
    {"run_dir",        "data.train.src",     "data.train.tgt",        "data.valid.src",
     "data.valid.tgt", "data.spm_model.src", "data.spm_model.tgt",    "train.steps",
     "train.minutes",  "train.threads",      "decode.length_penalty", NULL};

/* The run's config becomes the one ckpt was trained with, but for resume_own_keys; the
 * keys config.yaml says otherwise counted in *edits. */
static int take_checkpoint_config(Run *r, const char *ckpt, RunEdits *edits) {
    CkptMeta meta = {0};
    if (ckpt_peek(ckpt, &meta) != 0) return -1;
    Config *theirs = xmalloc(sizeof *theirs);
    config_defaults(theirs);
    /* its vocabularies, its model and the step its name says first: they say more */
    int rc = run_check_checkpoint(r, ckpt, &meta);
    if (rc == 0) rc = config_parse(theirs, meta.config, strlen(meta.config), ckpt);
    if (rc == 0) {
        edits->count = config_differences(&r->cfg, theirs, resume_own_keys, edits->first, sizeof edits->first);
        config_copy_keys(theirs, &r->cfg, resume_own_keys);
        rc = config_validate(theirs, 0);
        /* data.valid is the run's own to edit, but a run that scores BLEU needs one */
        if (rc == 0 && theirs->train.valid_bleu && theirs->data.valid.src[0] == '\0')
            rc = err_set("%s/%s: data.valid is empty, and this run's train.valid_bleu decodes it", r->dir, RUN_CONFIG);
    }
    if (rc == 0) r->cfg = *theirs;
    free(theirs);
    ckpt_meta_free(&meta);
    return rc;
}

int run_open_for_training(Run *r, const char *dir, char *ckpt, size_t n, RunEdits *edits) {
    struct stat st;
    edits->count = 0, edits->first[0] = '\0';
    char p[CONFIG_PATH_MAX + 32];
    /* no run here: said before the lock, which would leave a file in someone's folder */
    if (stat(run_path(p, sizeof p, dir, RUN_CONFIG), &st) != 0)
        return err_set("%s: not a run directory (no config.yaml)", dir);
    if (!lock_is_a_runs(dir))
        return err_set("%s: holds a file named lock that is not a run's (not a process id): a resume would write "
                       "over it; move it away",
                       dir);
    if (run_lock(dir) != 0) return -1;
    if (run_load_config_and_vocab(r, dir) != 0) return -1;
    /* the file training appends to: a FIFO there would hold the run until a reader came */
    if (regular_or_absent(run_path(p, sizeof p, dir, RUN_METRICS)) != 0) return -1;
    snprintf(r->cfg.run_dir, sizeof r->cfg.run_dir, "%s", dir);
    run_rotate_checkpoints(dir, 1 << 30); /* only sweeps stale .tmp files of a killed run */
    if (!has_checkpoint(dir))
        return err_set("%s: no checkpoint yet: the run stopped before its first one; start it over with "
                       "'qkv train %s/config.yaml --set run_dir=%s'",
                       dir, dir, dir);
    if (run_latest_checkpoint(dir, ckpt, n) != 0) return -1;
    return take_checkpoint_config(r, ckpt, edits);
}

int run_set_steps(Run *r, int steps) {
    char p[CONFIG_PATH_MAX + 32];
    r->cfg.train.steps = steps;
    return config_write(&r->cfg, run_path(p, sizeof p, r->cfg.run_dir, RUN_CONFIG));
}

int run_load_config_and_vocab(Run *r, const char *dir) {
    struct stat st;
    char p[CONFIG_PATH_MAX + 32];
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    config_defaults(&r->cfg);
    run_path(p, sizeof p, r->dir, RUN_CONFIG);
    if (stat(p, &st) != 0) return err_set("%s: not a run directory (no config.yaml)", r->dir);
    if (config_load(&r->cfg, p) != 0 || config_validate(&r->cfg, 0) != 0) return -1;
    if (load_vocab(r, &r->src_vocab, "src") != 0) return -1;
    if (load_vocab(r, &r->tgt_vocab, "tgt") != 0) {
        vocab_free(&r->src_vocab);
        return -1;
    }
    return 0;
}

int run_check_checkpoint(const Run *r, const char *ckpt_path, const CkptMeta *meta) {
    if (meta->vocab_hash != run_vocab_hash(&r->src_vocab, &r->tgt_vocab))
        return err_set("%s: its vocabularies differ from those of %s: a checkpoint of another run", ckpt_path, r->dir);
    Config theirs;
    config_defaults(&theirs);
    if (config_parse(&theirs, meta->config, strlen(meta->config), ckpt_path) != 0)
        return err_set("%s: the config it holds does not parse", ckpt_path);
    char what[64];
    if (!config_same_model(&theirs, &r->cfg, what, sizeof what))
        return err_set("%s: trained with a different %s than %s/config.yaml says: a checkpoint of another config",
                       ckpt_path, what, r->dir);
    /* last: a checkpoint of another run is that first, whatever its name */
    return run_check_step_name(ckpt_path, meta->step);
}

/* One side's vocabulary from exported weights: the vocabulary file's text, or the
 * SentencePiece model in hex. */
static int vocab_from_export(Vocab *v, const char *text, int tokenizer, const char *what) {
    if (!tokenizer_is_subword(tokenizer)) {
        char *copy = xstrdup(text);
        int rc = vocab_parse(v, copy, strlen(copy), what);
        free(copy);
        return rc;
    }
    char *bytes;
    size_t len;
    if (hex_decode(text, &bytes, &len) != 0) return err_set("%s: not a hex-encoded model", what);
    int rc = vocab_from_spm(v, bytes, len, what);
    free(bytes);
    return rc;
}

/* Exported weights carry their config and vocabularies: the Run comes from the file. */
static int run_from_export(Run *r, const CkptFile *f, const char *path) {
    char what[CONFIG_PATH_MAX + 32];
    snprintf(r->dir, sizeof r->dir, "%s", path);
    char *slash = strrchr(r->dir, '/');
    if (slash) *slash = '\0';
    else snprintf(r->dir, sizeof r->dir, ".");
    config_defaults(&r->cfg);
    if (config_parse(&r->cfg, f->meta.config, strlen(f->meta.config), path) != 0 || config_validate(&r->cfg, 0) != 0)
        return -1;
    snprintf(what, sizeof what, "%s: src_vocab", path);
    if (vocab_from_export(&r->src_vocab, f->meta.src_vocab, r->cfg.data.tokenizer, what) != 0) return -1;
    snprintf(what, sizeof what, "%s: tgt_vocab", path);
    return vocab_from_export(&r->tgt_vocab, f->meta.tgt_vocab, r->cfg.data.tokenizer, what);
}

/* The folder above the one holding path, as a user would spell it ("run" for
 * "run/ckpt/x", ".." for "x") where that is the same folder, else "<its folder>/.." (a
 * link on the way: "run/ckpt/.." is where the link's target sits). */
static void folder_above(char *dir, size_t n, const char *path) {
    const char *slash = strrchr(path, '/');
    char up[CONFIG_PATH_MAX + 8];
    if (!slash) {
        snprintf(dir, n, "..");
        return;
    }
    snprintf(up, sizeof up, "%.*s/..", slash == path ? 1 : (int)(slash - path), path);
    snprintf(dir, n, "%.*s", (int)(slash - path), path);
    char *cut = strrchr(dir, '/');
    const char *last = cut ? cut + 1 : dir;
    struct stat a, b;
    if (slash == path || !*last || strcmp(last, ".") == 0 || strcmp(last, "..") == 0) {
        snprintf(dir, n, "%.*s", (int)n - 1, up);
        return;
    }
    if (!cut) snprintf(dir, n, ".");
    else if (cut == dir) snprintf(dir, n, "/");
    else *cut = '\0';
    if (stat(dir, &a) != 0 || stat(up, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        snprintf(dir, n, "%.*s", (int)n - 1, up);
}

/* For a checkpoint file: the run it belongs to (<run>/ckpt/<file>), or the file itself
 * when it was exported with its vocabularies. f is open afterwards (0) or closed (-1). */
static int run_for_file(Run *r, const char *path, CkptFile *f) {
    snprintf(r->weights, sizeof r->weights, "%s", path);
    r->which = "given";
    if (ckpt_open(f, path) != 0) return -1;
    int rc;
    if (f->meta.src_vocab) {
        rc = run_from_export(r, f, path);
    } else {
        /* <run>/ckpt/<file>: the file's directory, then one up */
        char dir[CONFIG_PATH_MAX];
        folder_above(dir, sizeof dir, path);
        char cfg[CONFIG_PATH_MAX + 32];
        struct stat st;
        /* weights without their vocabularies (a step checkpoint) are read from their run */
        if (stat(run_path(cfg, sizeof cfg, dir, RUN_CONFIG), &st) != 0 && errno == ENOENT)
            rc = err_set("%s: weights without their vocabularies, read from a run's ckpt/ folder (there is no "
                         "config.yaml one folder up); 'qkv export RUN' writes weights that are read alone",
                         path);
        else rc = run_load_config_and_vocab(r, dir);
    }
    if (rc != 0) ckpt_close(f);
    return rc;
}

/* For a run directory: its average (train.average_last), else its best checkpoint, else its
 * latest, opened into f. */
static int run_for_dir(Run *r, const char *dir, CkptFile *f) {
    struct stat st;
    if (run_load_config_and_vocab(r, dir) != 0) return -1;
    /* train.average_last's mean of the newest checkpoints, kept as the run trains, first */
    run_path(r->weights, sizeof r->weights, dir, RUN_AVERAGE);
    r->which = "average";
    if (r->cfg.train.average_last > 0 && stat(r->weights, &st) == 0) return ckpt_open(f, r->weights);
    run_path(r->weights, sizeof r->weights, dir, RUN_BEST);
    r->which = "best";
    if (stat(r->weights, &st) != 0) {
        r->which = "latest";
        if (run_latest_checkpoint(dir, r->weights, sizeof r->weights) != 0) return -1;
    }
    return ckpt_open(f, r->weights);
}

int run_open(Run *r, const char *path) {
    memset(r, 0, sizeof *r);
    struct stat st;
    if (stat(path, &st) != 0) return err_set("%s: %s", path, strerror(errno));
    CkptFile f;
    if ((S_ISDIR(st.st_mode) ? run_for_dir(r, path, &f) : run_for_file(r, path, &f)) != 0) {
        run_close(r);
        return -1;
    }
    ModelConfig mc = run_model_config(&r->cfg, r->src_vocab.size, r->tgt_vocab.size);
    int rc = model_init(&r->model, &mc);
    if (rc == 0) rc = run_check_checkpoint(r, r->weights, &f.meta);
    if (rc == 0) rc = ckpt_read(&f, &r->model, NULL);
    if (rc == 0) r->meta = ckpt_meta_take(&f);
    ckpt_close(&f);
    if (rc != 0) run_close(r);
    return rc;
}

void run_close(Run *r) {
    vocab_free(&r->src_vocab);
    vocab_free(&r->tgt_vocab);
    model_free(&r->model);
    ckpt_meta_free(&r->meta);
}
