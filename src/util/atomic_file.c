/* atomic_file: see atomic_file.h. */
#include "util/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "util/file.h"

int fsync_parent_dir(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) strcpy(dir, ".");
    else {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1;
        if (n >= sizeof dir) return 0;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int fd = open(dir, O_RDONLY);
    if (fd < 0) return 0; /* nothing to sync we can reach; the rename already happened */
    fsync(fd);
    close(fd);
    return 0;
}

int tmp_name(char *buf, size_t n, const char *path) {
    /* the pid keeps two processes writing the same file from sharing (and deleting) one
     * tmp file, and tells a sweep whose leftover it is */
    if (snprintf(buf, n, "%s.%ld.tmp", path, (long)getpid()) >= (int)n) return err_set("%s: path too long", path);
    return 0;
}

int tmp_is_stale(const char *name) {
    size_t len = strlen(name);
    if (len < 4 || strcmp(name + len - 4, ".tmp") != 0) return 0;
    const char *end = name + len - 4, *p = end;
    while (p > name && p[-1] >= '0' && p[-1] <= '9') p--;
    if (p == end || p == name || p[-1] != '.' || end - p > 9) return 1; /* no pid: an older qkv's leftover */
    long pid = strtol(p, NULL, 10);
    return pid == (long)getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

/* ---- signals held over a write -------------------------------------------------------- */

static const int held_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_HELD (int)(sizeof held_signals / sizeof held_signals[0])
static struct sigaction held_old[N_HELD];
static int hold_depth;
static atomic_int held; /* the signal that came while held (lock-free: a handler writes it) */

static void on_held_signal(int sig) { atomic_store(&held, sig); }

void signals_hold(void) {
    if (hold_depth++ > 0) return;
    struct sigaction sa = {0};
    sa.sa_handler = on_held_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_HELD; i++) {
        sigaction(held_signals[i], NULL, &held_old[i]);
        if (held_old[i].sa_handler != SIG_IGN) sigaction(held_signals[i], &sa, NULL);
    }
}

void signals_release(void) {
    if (hold_depth == 0 || --hold_depth > 0) return;
    for (int i = 0; i < N_HELD; i++)
        if (held_old[i].sa_handler != SIG_IGN) sigaction(held_signals[i], &held_old[i], NULL);
    int sig = atomic_exchange(&held, 0);
    if (sig) raise(sig); /* to the handler the process had: a stop flag, or the default end */
}

int probe_writable(const char *path) {
    char tmp[4200];
    if (tmp_name(tmp, sizeof tmp, path) != 0) return -1;
    signals_hold();
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666), e = errno;
    if (fd >= 0) close(fd), unlink(tmp);
    signals_release();
    if (fd < 0) return err_set("%s: cannot create: %s", path, strerror(e)), err_io(e);
    return 0;
}

/* The written tmp file on fd, made path: fsync, close, rename, fsync of the directory.
 * On failure, the error set and the tmp file removed. */
static int publish(int fd, const char *tmp, const char *path) {
    int e;
    if (fsync(fd) != 0) {
        e = errno;
        err_set("%s: fsync failed: %s", tmp, strerror(e));
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        e = errno;
        err_set("%s: close failed: %s", tmp, strerror(e));
        goto fail;
    }
    fd = -1;
    if (rename_into_place(tmp, path) != 0) return unlink(tmp), -1; /* (gone already where it was renamed) */
    return 0;
fail:
    err_io(e);
    if (fd >= 0) close(fd);
    unlink(tmp);
    return -1;
}

/* Writes len bytes at p to fd: 0, or the errno of the write that failed. */
static int write_all(int fd, const char *p, size_t left) {
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        p += w;
        left -= (size_t)w;
    }
    return 0;
}

static int write_parts(const char *path, const FilePart *parts, int n_parts);
int write_file_atomic_parts(const char *path, const FilePart *parts, int n_parts) {
    signals_hold();
    int rc = write_parts(path, parts, n_parts);
    signals_release();
    return rc;
}

static int write_parts(const char *path, const FilePart *parts, int n_parts) {
    char tmp[4200];
    if (tmp_name(tmp, sizeof tmp, path) != 0) return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int e = errno;
    if (fd < 0) return err_set("%s: cannot create: %s", path, strerror(e)), err_io(e);
    for (int k = 0; k < n_parts; k++)
        if ((e = write_all(fd, parts[k].data, parts[k].len)) != 0) {
            err_set("%s: write failed: %s", tmp, strerror(e)), err_io(e);
            close(fd), unlink(tmp);
            return -1;
        }
    return publish(fd, tmp, path);
}

int write_file_atomic(const char *path, const void *data, size_t len) {
    FilePart part = {data, len};
    return write_file_atomic_parts(path, &part, 1);
}

/* The tmp files of the streams open now, for atomic_streams_discard: copied here (a stream
 * lives in its caller's frame), marked live only once the name is whole (the fence keeps
 * the copy before the mark), and before the file exists, so that no instant has a tmp
 * file the handler does not know (unlinking one not made yet is harmless). A process has
 * one stream open today (bench's batches); a fifth would go untracked, its tmp file then
 * left to tmp_is_stale's sweeps. */
#define STREAMS_MAX 4
static char stream_tmp[STREAMS_MAX][sizeof((AtomicStream *)0)->tmp];
static volatile sig_atomic_t stream_live[STREAMS_MAX];

static void stream_forget(AtomicStream *s) {
    if (s->slot >= 0) stream_live[s->slot] = 0;
    s->slot = -1;
}

void atomic_streams_discard(void) {
    for (int i = 0; i < STREAMS_MAX; i++)
        if (stream_live[i]) unlink(stream_tmp[i]); /* async-signal-safe */
}

int atomic_stream_open(AtomicStream *s, const char *path) {
    *s = (AtomicStream){.fd = -1, .slot = -1};
    if (tmp_name(s->tmp, sizeof s->tmp, path) != 0) return -1;
    for (int i = 0; i < STREAMS_MAX && s->slot < 0; i++)
        if (!stream_live[i]) {
            memcpy(stream_tmp[i], s->tmp, sizeof s->tmp);
            atomic_signal_fence(memory_order_release);
            stream_live[i] = 1, s->slot = i;
        }
    s->fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    int e = errno;
    if (s->fd < 0) return stream_forget(s), err_set("%s: cannot create: %s", path, strerror(e)), err_io(e);
    return 0;
}

int atomic_stream_write(AtomicStream *s, const void *data, size_t len) {
    if (s->err == 0) s->err = write_all(s->fd, data, len);
    return s->err ? -1 : 0;
}

int rename_into_place(const char *from, const char *to) {
    if (rename(from, to) != 0) {
        int e = errno;
        return err_set("%s: cannot rename into place: %s", to, strerror(e)), err_io(e);
    }
    return fsync_parent_dir(to);
}

void atomic_stream_abandon(AtomicStream *s) {
    if (s->fd >= 0) close(s->fd), unlink(s->tmp); /* removed, then forgotten: never a moment unknown */
    s->fd = -1;
    stream_forget(s);
}

int atomic_stream_commit(AtomicStream *s, const char *path) {
    if (s->err) {
        atomic_stream_abandon(s);
        return err_set("%s: write failed: %s", s->tmp, strerror(s->err)), err_io(s->err);
    }
    signals_hold();
    int rc = publish(s->fd, s->tmp, path);
    s->fd = -1;       /* publish closed it */
    stream_forget(s); /* renamed or removed: nothing of it for a stop to take away */
    signals_release();
    return rc;
}
