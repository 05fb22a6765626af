/* file: see file.h. */
#define _DEFAULT_SOURCE /* realpath */
#include "util/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"
#include "util/mem.h"

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
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
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
    size_t cap = fstat(fd, &st) == 0 && st.st_size > 0 && (unsigned long long)st.st_size < max ? (size_t)st.st_size + 1
                                                                                               : 1 << 16;
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

/* "<name>: line N holds a NUL byte: not text", N counted from line0 + 1, if text[from..len)
 * holds one; else 0. A C string ends at a NUL, so a line with one would lose what follows
 * it without a word: translate would drop half a sentence and still answer a line for a line. */
static int refuse_nul(const char *name, const char *text, size_t from, size_t len, int line0) {
    const char *nul = memchr(text + from, '\0', len - from);
    if (!nul) return 0;
    int line = line0 + 1;
    for (const char *p = text; (p = memchr(p, '\n', (size_t)(nul - p))) != NULL; p++) line++;
    return err_set("%s: line %d holds a NUL byte: not text", name, line);
}

/* The one line splitter: text[0..len) cut at each '\n', one '\r' before it dropped (a
 * file written on Windows reads the same); a last line without '\n' still counts. Each
 * line is copied out (a NUL inside a line ends its copy: the readers that take input refuse one).
 * at_start: text begins the file, where a byte order mark can be. */
static char **split_lines(char *text, size_t len, int at_start, int *n_out) {
    int n = 0, cap = 256;
    char **lines = xmalloc(sizeof(char *) * (size_t)cap);
    char *p = text, *end = text + len;
    /* a byte order mark some editors put first is no text: it would join the first word */
    if (at_start && len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) p += 3;
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
    char **lines = split_lines(text, len, 1, n_out);
    free(text);
    return lines;
}

char **read_lines_arriving(int fd, const char *name, int line0, char **pending, size_t *pending_len, int *n_out,
                           int *done) {
    enum { READ = 1 << 16 };
    /* The buffer's size follows from its length, so no call need keep it: the least power
     * of two from 2 * READ with room for a read and a NUL past the length. It doubles as the
     * length crosses each power of two, so realloc copies a long line a few times in all,
     * not at each read; after the lines are taken, the shorter length fits the size it has. */
    size_t len = *pending_len, size = 2 * READ;
    while (size < len + READ + 1) size *= 2;
    if (!*pending) *pending = xmalloc(size);
    ssize_t got;
    while ((got = read(fd, *pending + len, READ)) < 0 && errno == EINTR) {}
    if (got < 0) {
        int e = errno;
        return err_set("%s: read failed: %s", name, strerror(e)), err_io(e), NULL;
    }
    *done = got == 0;
    size_t had = len, grown = size;
    len += (size_t)got;
    while (grown < len + READ + 1) grown *= 2;
    if (grown > size) *pending = xrealloc(*pending, grown);
    if (refuse_nul(name, *pending, had, len, line0) != 0) return NULL;
    /* the complete lines: up to the last '\n' (all of it at the end of input). The bytes
     * that waited hold none (each call keeps only what follows the last one), so only this
     * read's are searched: a line arriving in many reads is searched once, not at each */
    size_t upto = *done ? len : 0;
    for (size_t i = len; !*done && i > had; i--)
        if ((*pending)[i - 1] == '\n') {
            upto = i;
            break;
        }
    char **lines = split_lines(*pending, upto, line0 == 0, n_out);
    if (upto) memmove(*pending, *pending + upto, len - upto);
    *pending_len = len - upto;
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
    if (refuse_nul(name, text, 0, len, 0) != 0) return free(text), NULL;
    char **lines = split_lines(text, len, 1, n_out);
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

int append_line_open(FILE *f, const char *path, const char *text, const char *doing) {
    int fd = fileno(f), e = 0, cut = 0;
    struct stat st;
    size_t len = strlen(text);
    char *line = xmalloc(len + 1);
    memcpy(line, text, len);
    line[len] = '\n';
    if (fstat(fd, &st) != 0) e = errno;
    for (size_t done = 0; e == 0 && done < len + 1;) { /* one write, unless a short one */
        ssize_t w = write(fd, line + done, len + 1 - done);
        if (w > 0) done += (size_t)w;
        else if (w == 0) e = EIO;
        else if (errno != EINTR) e = errno;
        /* a line cut short by a full disk or a size limit is taken back: readers see none;
         * the offset too, for a file not opened to append */
        if (e != 0) cut = ftruncate(fd, st.st_size) != 0 || lseek(fd, st.st_size, SEEK_SET) < 0;
    }
    free(line);
    if (e == 0) return 0;
    return err_set("%s: %s: %s%s", path, doing, strerror(e), cut ? " (a cut line is left at its end)" : ""), err_io(e);
}

int append_line(const char *path, const char *text, const char *doing) {
    FILE *f = fopen_regular(path, "a", doing);
    if (!f) return -1;
    int rc = append_line_open(f, path, text, doing);
    if (fclose(f) != 0 && rc == 0) {
        int e = errno;
        return err_set("%s: %s: %s", path, doing, strerror(e)), err_io(e);
    }
    return rc;
}

int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
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
    char **lines = split_lines(text, len, 1, n_out);
    free(text);
    return lines;
}

void free_lines(char **lines, int n) {
    for (int i = 0; i < n && lines; i++) free(lines[i]);
    free(lines);
}

int make_dirs(const char *path) {
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp) return err_set("%s: bad directory name", path);
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            return err_set("%s: cannot create directory: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
        return err_set("%s: cannot create directory: %s", tmp, strerror(errno));
    struct stat st;
    if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode)) return err_set("%s: exists and is not a directory", tmp);
    return 0;
}

/* path's own name with its directory resolved (what a rename onto path replaces), whether
 * or not path exists; -1 when the directory cannot be resolved */
static int resolved_name(const char *path, char *out) {
    char copy[PATH_MAX], real[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof copy) return -1;
    memcpy(copy, path, n + 1);
    while (n > 1 && copy[n - 1] == '/') copy[--n] = '\0';
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || slash == copy + n - 1) /* "/", ".", "x/..": a directory */
        return realpath(copy, out) ? 0 : -1;
    if (slash) *slash = '\0';
    if (!realpath(!slash ? "." : slash == copy ? "/" : copy, real)) return -1;
    return snprintf(out, PATH_MAX, "%s/%s", strcmp(real, "/") == 0 ? "" : real, base) < PATH_MAX ? 0 : -1;
}

/* 1 if the resolved name is root or below it, and not skip */
static int name_inside(const char *name, const char *root, const char *skip) {
    size_t n = strlen(root);
    if (skip && strcmp(name, skip) == 0) return 0;
    return strncmp(name, root, n) == 0 && (name[n] == '\0' || name[n] == '/' || strcmp(root, "/") == 0);
}

int path_inside(const char *path, const char *dir, const char *except) {
    char root[PATH_MAX], skip[PATH_MAX + 256], name[PATH_MAX], target[PATH_MAX];
    if (!realpath(dir, root)) return 0;
    if (except) snprintf(skip, sizeof skip, "%s/%s", root, except);
    const char *sk = except ? skip : NULL;
    return (resolved_name(path, name) == 0 && name_inside(name, root, sk)) ||
           (realpath(path, target) && name_inside(target, root, sk));
}

void remove_tree(const char *path, int levels) {
    if (unlink(path) == 0 || (errno != EISDIR && errno != EPERM)) return;
    int fd = levels > 0 ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (fd >= 0 && !d) close(fd);
    struct dirent *e;
    char sub[PATH_MAX];
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < (int)sizeof sub) remove_tree(sub, levels - 1);
    }
    if (d) closedir(d);
    rmdir(path);
}
