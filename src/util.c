/* util: see util.h. */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char err_buf[1024];
static int err_runtime; /* the last error is the machine's fault, not the input's */

int err_set(const char *fmt, ...) {
    /* formatted apart first: a message may wrap the previous one (err_msg() as an argument) */
    char tmp[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    /* one line, whatever a key, value or file name held: control bytes are spelled out */
    size_t o = 0;
    for (const char *s = tmp; *s && o + 5 < sizeof err_buf; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x20 && ch != 0x7f) err_buf[o++] = (char)ch;
        else o += (size_t)snprintf(err_buf + o, sizeof err_buf - o, ch == '\n' ? "\\n" : ch == '\t' ? "\\t" : "\\x%02x", ch);
    }
    err_buf[o] = '\0';
    err_runtime = 0;
    return -1;
}

int err_io(int errnum) {
    /* out of space or quota, a file past its size limit, a failing device: the machine's;
     * anything else (no such directory, not a directory, permission, a read-only file
     * system) says the place the user named cannot hold the file */
    err_runtime = errnum == ENOSPC || errnum == EDQUOT || errnum == EFBIG || errnum == EIO || errnum == ENOMEM;
    return -1;
}

int err_status(void) { return err_runtime ? 1 : 2; }

const char *err_msg(void) { return err_buf[0] ? err_buf : "unknown error"; }

void exit_out_of_memory(const char *msg) {
    fprintf(stderr, "qkv: %s\n", msg);
    exit(1);
}

static void out_of_memory(size_t n) {
    char msg[64];
    snprintf(msg, sizeof msg, "out of memory (asked for %zu bytes)", n);
    exit_out_of_memory(msg);
}

void *xcheck(void *p) {
    if (!p) out_of_memory(0);
    return p;
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n);
    return p;
}

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) out_of_memory(count * size);
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory(n);
    return q;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = xmalloc(n);
    memcpy(d, s, n);
    return d;
}

void rng_seed(Rng *r, uint64_t seed) { r->state = seed; }

uint64_t rng_next(Rng *r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double rng_uniform(Rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

float rng_normal(Rng *r) {
    /* Box-Muller; the second value is thrown away so the state advances by a fixed amount. */
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t rng_below(Rng *r, uint64_t n) { return rng_next(r) % n; }

uint64_t hash64(uint64_t a, uint64_t b) {
    Rng r = {a * 0xD1B54A32D192ED03ull ^ b};
    rng_next(&r);
    return rng_next(&r);
}

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static void mix_word(uint64_t *h, const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    *h = rotl64(*h ^ (w * 0x9E3779B185EBCA87ull), 31) * 0xC2B2AE3D27D4EB4Full;
}

void checksum_start(Checksum *c, size_t total) { *c = (Checksum){.h = 0x27D4EB2F165667C5ull ^ (uint64_t)total}; }

/* The data's words, 8 bytes at a time, whatever parts they come in: bytes short of a
 * word wait in the carry for the next part. */
void checksum_add(Checksum *c, const void *data, size_t n) {
    const unsigned char *p = data;
    if (c->carried > 0) { /* complete the word the last part began */
        size_t take = 8 - (size_t)c->carried < n ? 8 - (size_t)c->carried : n;
        memcpy(c->carry + c->carried, p, take);
        c->carried += (int)take, p += take, n -= take;
        if (c->carried < 8) return;
        mix_word(&c->h, c->carry), c->carried = 0;
    }
    for (; n >= 8; p += 8, n -= 8) mix_word(&c->h, p);
    if (n > 0) memcpy(c->carry, p, n), c->carried = (int)n; /* the carry is empty here */
}

uint64_t checksum_end(Checksum *c) {
    uint64_t h = c->h;
    for (int i = 0; i < c->carried; i++) h = rotl64(h ^ (c->carry[i] * 0x165667B19E3779F9ull), 23) * 0x9E3779B185EBCA87ull;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
}

uint64_t checksum64(const void *data, size_t n) {
    Checksum c;
    checksum_start(&c, n);
    checksum_add(&c, data, n);
    return checksum_end(&c);
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Reads f to its end into one NUL-terminated heap buffer; *failed is the errno of a read
 * error that cut it short (the buffer then holds what came before), else 0. */
static char *read_stream(FILE *f, size_t *len_out, int *failed) {
    size_t cap = 1 << 16, len = 0;
    char *buf = xmalloc(cap);
    errno = 0;
    for (;;) {
        if (len + 1 >= cap) buf = xrealloc(buf, cap *= 2);
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    *failed = ferror(f) ? (errno ? errno : EIO) : 0;
    buf[len] = '\0';
    *len_out = len;
    return buf;
}

/* What a path is, for the message when it is not a regular file. */
static const char *file_kind(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

int open_regular(const char *path, size_t max, size_t *size_out) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; a regular file ignores it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return err_set("%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err_set("%s: %s, not a regular file", path, fstat(fd, &st) != 0 ? strerror(errno) : file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    if ((unsigned long long)st.st_size > max) {
        err_set("%s: %lld bytes, more than the %zu this file may hold", path, (long long)st.st_size, max);
        close(fd);
        return -1;
    }
    if (size_out) *size_out = (size_t)st.st_size;
    return fd;
}

char *read_fd_max(int fd, const char *path, size_t max, size_t *len_out) {
    struct stat st;
    size_t cap = fstat(fd, &st) == 0 && st.st_size > 0 && (unsigned long long)st.st_size < max ? (size_t)st.st_size + 1 : 1 << 16;
    size_t len = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (len + 1 >= cap) buf = xrealloc(buf, cap *= 2);
        ssize_t got = read(fd, buf + len, cap - len - 1);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            return err_set("%s: %s", path, strerror(e)), err_io(e), NULL;
        }
        if (got == 0) break;
        len += (size_t)got;
        if (len > max) {
            free(buf);
            return err_set("%s: grew past its size limit while being read", path), NULL;
        }
    }
    buf[len] = '\0';
    if (len_out) *len_out = len;
    return buf;
}

char *read_file_max(const char *path, size_t max, size_t *len_out) {
    int fd = open_regular(path, max, NULL);
    if (fd < 0) return NULL;
    char *buf = read_fd_max(fd, path, max, len_out);
    close(fd);
    return buf;
}

char *read_file(const char *path, size_t *len_out) { return read_file_max(path, READ_FILE_ANY, len_out); }

/* The one line splitter: text[0..len) cut at each '\n', one '\r' before it dropped (a
 * file written on Windows reads the same); a last line without '\n' still counts. Each
 * line is copied out (a NUL inside a line ends its copy). */
static char **split_lines(char *text, size_t len, int *n_out) {
    int n = 0, cap = 256;
    char **lines = xmalloc(sizeof(char *) * (size_t)cap);
    char *p = text, *end = text + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end;
        *stop = '\0';
        if (stop > p && stop[-1] == '\r') stop[-1] = '\0';
        if (n == cap) lines = xrealloc(lines, sizeof(char *) * (size_t)(cap *= 2));
        lines[n++] = xstrdup(p);
        p = stop + 1;
    }
    *n_out = n;
    return lines;
}

char **read_lines(FILE *f, int *n_out) {
    size_t len;
    int failed; /* the lines before the error are still lines */
    char *text = read_stream(f, &len, &failed);
    char **lines = split_lines(text, len, n_out);
    free(text);
    return lines;
}

char **read_lines_checked(FILE *f, const char *name, int *n_out) {
    size_t len;
    int failed;
    char *text = read_stream(f, &len, &failed);
    if (failed) {
        free(text);
        return err_set("%s: read failed: %s", name, strerror(failed)), err_io(failed), NULL;
    }
    char **lines = split_lines(text, len, n_out);
    free(text);
    return lines;
}

int regular_or_absent(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0; /* absent: whoever opens it says why */
    return err_set("%s: %s, not a regular file", path, file_kind(st.st_mode));
}

FILE *fopen_regular(const char *path, const char *mode, const char *doing) {
    int append = mode[0] == 'a';
    /* O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) rather than waiting for
     * one, and one with a reader is refused below; no O_TRUNC before the file is known to
     * be regular */
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0), 0666);
    struct stat st;
    if (fd < 0) {
        int e = errno;
        if (e == ENXIO && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return err_set("%s: %s, not a regular file", path, file_kind(st.st_mode)), NULL;
        return err_set("%s: %s: %s", path, doing, strerror(e)), err_io(e), NULL;
    }
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set("%s: %s, not a regular file", path, file_kind(st.st_mode)), NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    FILE *f = NULL;
    if (flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 && (append || ftruncate(fd, 0) == 0))
        f = fdopen(fd, append ? "a" : "w");
    if (!f) {
        int e = errno;
        close(fd);
        return err_set("%s: %s: %s", path, doing, strerror(e)), err_io(e), NULL;
    }
    return f;
}

char **read_file_lines(const char *path, int *n_out) {
    size_t len;
    char *text = read_file(path, &len);
    if (!text) return NULL;
    if (memchr(text, '\0', len)) {
        free(text);
        err_set("%s: contains NUL bytes: not a text file", path);
        return NULL;
    }
    char **lines = split_lines(text, len, n_out);
    free(text);
    return lines;
}

void free_lines(char **lines, int n) {
    for (int i = 0; i < n && lines; i++) free(lines[i]);
    free(lines);
}

char *hex_encode(const void *data, size_t n) {
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = data;
    char *s = xmalloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) s[2 * i] = digits[b[i] >> 4], s[2 * i + 1] = digits[b[i] & 15];
    s[2 * n] = '\0';
    return s;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int hex_decode(const char *hex, char **out, size_t *n) {
    size_t len = strlen(hex);
    if (len % 2) return -1;
    char *b = xmalloc(len / 2 + 1);
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return free(b), -1;
        b[i] = (char)(hi << 4 | lo);
    }
    *out = b, *n = len / 2;
    return 0;
}

int make_dirs(const char *path) {
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp) return err_set("%s: bad directory name", path);
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return err_set("%s: cannot create directory: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return err_set("%s: cannot create directory: %s", tmp, strerror(errno));
    struct stat st;
    if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode)) return err_set("%s: exists and is not a directory", tmp);
    return 0;
}

static int fsync_parent_dir(const char *path) {
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
    for (int k = 0; k < n_parts; k++) {
        const char *p = parts[k].data;
        size_t left = parts[k].len;
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w < 0) {
                if (errno == EINTR) continue;
                e = errno;
                err_set("%s: write failed: %s", tmp, strerror(e));
                goto fail;
            }
            p += w;
            left -= (size_t)w;
        }
    }
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
    if (rename(tmp, path) != 0) {
        e = errno;
        err_set("%s: cannot rename into place: %s", path, strerror(e));
        goto fail;
    }
    return fsync_parent_dir(path);
fail:
    err_io(e);
    if (fd >= 0) close(fd);
    unlink(tmp);
    return -1;
}

int write_file_atomic(const char *path, const void *data, size_t len) {
    FilePart part = {data, len};
    return write_file_atomic_parts(path, &part, 1);
}

void sb_append(StrBuf *sb, const char *s, size_t n) {
    if (sb->len + n + 1 > sb->cap) {
        sb->cap = (sb->len + n + 1) * 2;
        sb->buf = xrealloc(sb->buf, sb->cap);
    }
    memcpy(sb->buf + sb->len, s, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
}

void sb_append_xml(StrBuf *sb, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': sb_append(sb, "&lt;", 4); break;
        case '>': sb_append(sb, "&gt;", 4); break;
        case '&': sb_append(sb, "&amp;", 5); break;
        case '"': sb_append(sb, "&quot;", 6); break;
        default:
            if ((unsigned char)*s >= 0x20) sb_append(sb, s, 1);
        }
    }
}

void sb_printf(StrBuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (sb->len + (size_t)n + 1 > sb->cap) {
        sb->cap = (sb->len + (size_t)n + 1) * 2;
        sb->buf = xrealloc(sb->buf, sb->cap);
    }
    va_start(ap, fmt);
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void sb_free(StrBuf *sb) {
    free(sb->buf);
    sb->buf = NULL;
    sb->len = sb->cap = 0;
}
