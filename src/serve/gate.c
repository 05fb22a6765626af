/* gate: see gate.h. */
#define _GNU_SOURCE
#include "serve/gate.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "serve/api.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/mem.h"

/* ---- the head ------------------------------------------------------------------------------ */

static int refuse(GateVerdict *v, int status, const char *msg) {
    v->status = status;
    snprintf(v->error, sizeof v->error, "%s", msg);
    return 1;
}

/* RFC 9110's tchar: what a method and a header's name are made of. */
static int tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

#define METHOD_MAX 32 /* bytes of a method: past it, not one */

/* How many bytes of s[0..n) a method's characters run to. */
static size_t method_end(const char *s, size_t n) {
    size_t m = 0;
    while (m < n && tchar((unsigned char)s[m])) m++;
    return m;
}

/* How many pieces s[0..n) holds, cut at any of the bytes in seps: what libmicrohttpd
 * would keep an entry for each of (empty pieces counted too: more, never fewer). */
static size_t pieces(const char *s, size_t n, const char *seps) {
    size_t k = n > 0;
    for (size_t i = 0; i < n; i++) k += strchr(seps, s[i]) != NULL;
    return k;
}

/* The request line line[0..n) (no line end): 0, or 1 with the refusal in v. */
static int check_request_line(const char *line, size_t n, int *http11, GateVerdict *v) {
    size_t m = method_end(line, n);
    if (m == 0 || m > METHOD_MAX || m == n || line[m] != ' ')
        return refuse(v, 400, "the request line is not METHOD TARGET HTTP/1.1");
    size_t t = m + 1, target = t;
    while (t < n && (unsigned char)line[t] > 0x20 && (unsigned char)line[t] < 0x7f) t++;
    if (t == target || t == n || line[t] != ' ')
        return refuse(v, 400, "the request line is not METHOD TARGET HTTP/1.1");
    const char *query = memchr(line + target, '?', t - target);
    if (query) { /* libmicrohttpd splits it at '&' (';' too, by an older convention: counted alike) */
        query++;
        if (pieces(query, (size_t)(line + t - query), "&;") > GATE_ARGUMENTS_MAX) {
            char msg[96];
            snprintf(msg, sizeof msg, "the request's target has more than %d query arguments", GATE_ARGUMENTS_MAX);
            return refuse(v, 414, msg);
        }
    }
    const char *ver = line + t + 1;
    size_t vn = n - t - 1;
    if (vn == 8 && memcmp(ver, "HTTP/1.", 7) == 0 && (ver[7] == '0' || ver[7] == '1')) {
        *http11 = ver[7] == '1';
        return 0;
    }
    if (vn == 8 && memcmp(ver, "HTTP/", 5) == 0 && ver[5] >= '0' && ver[5] <= '9' && ver[6] == '.' && ver[7] >= '0' &&
        ver[7] <= '9')
        return refuse(v, 505, "only HTTP/1.0 and HTTP/1.1 are spoken here");
    return refuse(v, 400, "the request line is not METHOD TARGET HTTP/1.1");
}

/* Whether what has arrived of the request line so far can still become one: a first
 * line that is plainly not HTTP (a TLS hello, binary) is refused at once, not waited on. */
static int could_be_request_line(const char *s, size_t n) {
    size_t m = method_end(s, n);
    return m == n || (m > 0 && m <= METHOD_MAX && s[m] == ' ');
}

static int blank(char c) { return c == ' ' || c == '\t'; }

static int is_name(const char *name, size_t n, const char *want) {
    return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

/* One header line: NAME ":" VALUE. 0, or 1 with the refusal in v. Where libmicrohttpd
 * reads a value (Content-Length), it is read as strictly as libmicrohttpd does (no space
 * after it), so that no head passes here that the library would answer with a page of its
 * own. */
static int check_header(const char *line, size_t n, int *host, int *content_length, size_t *cookies, GateVerdict *v) {
    size_t m = 0;
    while (m < n && tchar((unsigned char)line[m])) m++;
    if (m == 0 || m == n || line[m] != ':') return refuse(v, 400, "a header line is not NAME: VALUE");
    const char *value = line + m + 1;
    size_t vn = n - m - 1;
    for (size_t i = 0; i < vn; i++) /* field-vchar, SP, HTAB, obs-text */
        if ((unsigned char)value[i] < 0x20 && value[i] != '\t') return refuse(v, 400, "a header holds a control byte");
    while (vn && blank(*value)) value++, vn--;
    const char *raw = value; /* as libmicrohttpd reads a value: the spaces after it kept */
    size_t raw_n = vn;
    while (vn && blank(value[vn - 1])) vn--;
    if (is_name(line, m, "Host")) {
        if (*host) return refuse(v, 400, "the request names its Host twice");
        *host = 1;
    } else if (is_name(line, m, "Content-Length")) {
        unsigned long long x = 0;
        if (raw_n == 0) return refuse(v, 400, "Content-Length is not a number of bytes");
        for (size_t i = 0; i < raw_n; i++) {
            if (raw[i] < '0' || raw[i] > '9') return refuse(v, 400, "Content-Length is not a number of bytes");
            x = x > (~0ull - 9) / 10 ? ~0ull : x * 10 + (unsigned long long)(raw[i] - '0');
        }
        if (*content_length && v->body != x) return refuse(v, 400, "Content-Length is given twice, apart");
        *content_length = 1, v->body = x;
    } else if (is_name(line, m, "Transfer-Encoding")) {
        /* a chunked body would be read by libmicrohttpd, whose faults there (a bad chunk
         * size, data past it) get pages of its own: a body comes whole, its length said */
        return refuse(v, 411, "send the body whole, with its Content-Length: no Transfer-Encoding is taken");
    } else if (is_name(line, m, "Cookie")) { /* a cookie a piece, cut at ';' (',' too: counted alike) */
        if ((*cookies += pieces(value, vn, ";,")) > GATE_COOKIES_MAX) {
            char msg[96];
            snprintf(msg, sizeof msg, "the request has more than %d cookies", GATE_COOKIES_MAX);
            return refuse(v, 431, msg);
        }
    } else if (is_name(line, m, "Expect")) {
        if (vn == 12 && strncasecmp(value, "100-continue", 12) == 0) v->expect_continue = 1;
    }
    return 0;
}

/* The end of the line that starts at s (its '\n'), within s[0..n); NULL when it has not
 * arrived. */
static const char *line_end(const char *s, size_t n) { return memchr(s, '\n', n); }

/* s[0..n) without its '\r' before the line end */
static size_t without_cr(const char *s, size_t n) { return n && s[n - 1] == '\r' ? n - 1 : n; }

int gate_check_head(const char *head, size_t n, unsigned long long body_max, GateVerdict *v) {
    memset(v, 0, sizeof *v);
    char msg[128];
    const char *eol = line_end(head, n < GATE_LINE_MAX + 2 ? n : GATE_LINE_MAX + 2);
    if (!eol) {
        if (!could_be_request_line(head, n)) return refuse(v, 400, "the request line is not METHOD TARGET HTTP/1.1");
        if (n <= GATE_LINE_MAX + 1) return 0;
        snprintf(msg, sizeof msg, "the request line is longer than %d bytes", GATE_LINE_MAX);
        return refuse(v, 414, msg);
    }
    int http11 = 0;
    if (check_request_line(head, without_cr(head, (size_t)(eol - head)), &http11, v)) return 1;
    int host = 0, content_length = 0, lines = 0;
    size_t cookies = 0;
    for (const char *at = eol + 1;;) {
        size_t left = (size_t)(head + n - at);
        const char *end = line_end(at, left);
        if (!end || end - head >= GATE_HEAD_MAX) {
            if (n <= GATE_HEAD_MAX && !end) return 0;
            snprintf(msg, sizeof msg, "the request's headers are longer than %d bytes", GATE_HEAD_MAX);
            return refuse(v, 431, msg);
        }
        size_t len = without_cr(at, (size_t)(end - at));
        if (len == 0) break; /* the empty line: the head is whole */
        if (at[0] == ' ' || at[0] == '\t') return refuse(v, 400, "a header line is folded onto the next");
        if (++lines > GATE_HEADERS_MAX) { /* each costs libmicrohttpd room in its connection's memory */
            snprintf(msg, sizeof msg, "the request has more than %d header lines", GATE_HEADERS_MAX);
            return refuse(v, 431, msg);
        }
        if (check_header(at, len, &host, &content_length, &cookies, v)) return 1;
        at = end + 1;
    }
    if (http11 && !host) return refuse(v, 400, "the request names no Host");
    /* a POST to the API without one would be read as an empty body, "malformed JSON at
     * byte 0"; elsewhere a POST is a 404 or a 405, said by the handler */
    if (!content_length && n >= 9 && memcmp(head, "POST /v1/", 9) == 0)
        return refuse(v, 411, "a POST's body needs its Content-Length");
    if (v->body > body_max) {
        snprintf(msg, sizeof msg, "the body is larger than the %llu bytes allowed", body_max);
        return refuse(v, 413, msg);
    }
    return 1;
}

static const char *reason(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 413: return "Content Too Large";
    case 411: return "Length Required";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

char *gate_answer(const GateVerdict *v, size_t *len) {
    char *json = api_error_json(v->error);
    size_t cap = strlen(json) + 256;
    char *out = xmalloc(cap);
    int n = snprintf(out, cap,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n%s",
                     v->status, reason(v->status), strlen(json), json);
    free(json);
    *len = (size_t)n;
    return out;
}

/* ---- the connections ------------------------------------------------------------------------- */

/* A connection the gate holds: its head is arriving, or it was refused and is drained. */
typedef struct Waiting {
    int fd;
    double since; /* accepted; or, draining, refused */
    int draining;
    size_t drained;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    struct Waiting *prev, *next;
} Waiting;

struct Gate {
    int listen_fd, epoll_fd, receive_seconds, max_connections, count;
    int paused;        /* the listening socket is out of the epoll set: max_connections are open */
    atomic_int handed; /* connections handed on and not closed yet */
    unsigned long long body_max;
    GateHandOn hand_on;
    void *ctx;
    Waiting *list;
    pthread_t thread;
    atomic_int stop, quiesce;
};

/* With max_connections open, new ones stay in the kernel's backlog (the listening socket
 * is left out of the epoll set) rather than being accepted and closed, or handed on past
 * what the server behind takes (libmicrohttpd 0.9.75 deadlocks on its own mutex when a
 * connection added from another thread passes its limit). */
static int full(Gate *g) { return g->count + atomic_load(&g->handed) >= g->max_connections; }

static void pause_accepting(Gate *g, int pause) {
    if (g->listen_fd < 0 || g->paused == pause) return;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(g->epoll_fd, pause ? EPOLL_CTL_DEL : EPOLL_CTL_ADD, g->listen_fd, &ev);
    g->paused = pause;
}

static void unlink_waiting(Gate *g, Waiting *w) {
    epoll_ctl(g->epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
    if (w->prev) w->prev->next = w->next;
    else g->list = w->next;
    if (w->next) w->next->prev = w->prev;
    g->count--;
    pause_accepting(g, full(g));
}

static void drop(Gate *g, Waiting *w) {
    unlink_waiting(g, w);
    close(w->fd);
    free(w);
}

/* Reads and drops what the client sends after its refusal, until it closes, or the
 * bounds are reached. */
static void drain(Gate *g, Waiting *w) {
    char buf[16384];
    for (;;) {
        ssize_t got = recv(w->fd, buf, sizeof buf, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (got <= 0 || (w->drained += (size_t)got) > GATE_DRAIN_MAX) return drop(g, w);
    }
}

/* New data on w: decide its head, or wait for more. */
static void on_data(Gate *g, Waiting *w) {
    if (w->draining) return drain(g, w);
    char head[GATE_HEAD_MAX + 1];
    ssize_t got;
    do got = recv(w->fd, head, sizeof head, MSG_PEEK);
    while (got < 0 && errno == EINTR);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got <= 0) return drop(g, w); /* gone before its request */
    GateVerdict v;
    if (!gate_check_head(head, (size_t)got, g->body_max, &v)) return;
    if (v.status == 0) {
        atomic_fetch_add(&g->handed, 1); /* before the unlink, which may start accepting again */
        unlink_waiting(g, w);
        if (g->hand_on(g->ctx, w->fd, (struct sockaddr *)&w->addr, w->addr_len, w->since) != 0)
            atomic_fetch_sub(&g->handed, 1);
        free(w);
        return;
    }
    size_t len;
    char *answer = gate_answer(&v, &len);
    ssize_t sent = send(w->fd, answer, len, MSG_NOSIGNAL | MSG_DONTWAIT); /* small: the socket's buffer takes it */
    free(answer);
    if (sent != (ssize_t)len) return drop(g, w);
    shutdown(w->fd, SHUT_WR);
    w->draining = 1, w->since = now_seconds();
    drain(g, w);
}

static void accept_all(Gate *g) {
    for (;;) {
        if (full(g)) return pause_accepting(g, 1);
        struct sockaddr_storage addr;
        socklen_t len = sizeof addr;
        int fd = accept4(g->listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return; /* EAGAIN; or out of descriptors: the next round tries again */
        }
        Waiting *w = xcalloc(1, sizeof *w);
        w->fd = fd, w->since = now_seconds(), w->addr = addr, w->addr_len = len;
        /* edge-triggered: a peek leaves the bytes where they are, so a level would report
         * them again and again; an edge reports only new ones */
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = w};
        if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd), free(w);
            continue;
        }
        w->next = g->list;
        if (g->list) g->list->prev = w;
        g->list = w, g->count++;
        on_data(g, w); /* what came with the connection */
    }
}

/* Connections past their time: a head that has not arrived, a refused client still
 * sending. */
static void sweep(Gate *g) {
    double now = now_seconds();
    for (Waiting *w = g->list, *next; w; w = next) {
        next = w->next;
        if (now - w->since > (w->draining ? GATE_DRAIN_SECONDS : g->receive_seconds)) drop(g, w);
    }
}

static void *run(void *arg) {
    Gate *g = arg;
    struct epoll_event ev[64];
    while (!atomic_load(&g->stop)) {
        if (atomic_load(&g->quiesce) && g->listen_fd >= 0) {
            pause_accepting(g, 1);
            close(g->listen_fd);
            g->listen_fd = -1;
        }
        if (g->paused && !full(g)) pause_accepting(g, 0); /* handed-on ones closed meanwhile */
        int n = epoll_wait(g->epoll_fd, ev, 64, 250);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == NULL) {
                if (g->listen_fd >= 0) accept_all(g);
            } else on_data(g, ev[i].data.ptr);
        }
        sweep(g);
    }
    return NULL;
}

Gate *gate_start(int listen_fd, unsigned long long body_max, int receive_seconds, int max_connections,
                 GateHandOn hand_on, void *ctx) {
    Gate *g = xcalloc(1, sizeof *g);
    g->listen_fd = listen_fd, g->body_max = body_max, g->receive_seconds = receive_seconds;
    g->max_connections = max_connections, g->hand_on = hand_on, g->ctx = ctx;
    g->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (g->epoll_fd < 0 || epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev) != 0 ||
        pthread_create(&g->thread, NULL, run, g) != 0) {
        err_set("cannot start the thread that accepts connections: %s", strerror(errno));
        if (g->epoll_fd >= 0) close(g->epoll_fd);
        close(listen_fd);
        free(g);
        return NULL;
    }
    return g;
}

void gate_quiesce(Gate *g) {
    if (g) atomic_store(&g->quiesce, 1);
}

void gate_handed_closed(Gate *g) {
    if (g) atomic_fetch_sub(&g->handed, 1);
}

void gate_close(Gate *g) {
    if (!g || atomic_load(&g->stop)) return;
    atomic_store(&g->stop, 1);
    pthread_join(g->thread, NULL);
    while (g->list) drop(g, g->list);
    if (g->listen_fd >= 0) close(g->listen_fd);
    g->listen_fd = -1;
    close(g->epoll_fd);
}

void gate_free(Gate *g) {
    gate_close(g);
    free(g);
}
