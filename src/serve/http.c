/* http: see http.h. */
#define _GNU_SOURCE
#include "serve/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "attention/attnmap.h"
#include "config.h"
#include "run/files.h"
#include "serve/api.h"
#include "serve/gate.h"
#include "serve/routes.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/text.h"

/* One connection: its socket and since when it has been receiving a request (0: not
 * receiving, its request is being answered): from its acceptance by the gate, so that the
 * time its head took there counts. On the list the reaper walks; between the hand-on and
 * libmicrohttpd's start of it, on the list of those handed on. */
typedef struct Conn {
    int fd;
    double receiving_since;
    struct Conn *prev, *next;
} Conn;

/* One request: its body so far, then its job. */
typedef struct {
    StrBuf body; /* at most the Content-Length the gate let pass (API_MAX_BODY): no chunked body comes */
    int post;
    int refused; /* decided when the headers came in, answered once the body is read */
    char refusal[256];
    Job *job;
    struct MHD_Connection *mc; /* to resume once the job is answered */
    atomic_int answered;       /* set by the worker before it resumes the connection */
    struct HttpServer *server;
    int status; /* a refusal decided while suspended (503 full queue) */
    char *error;
    int whole; /* the body is in: the next call queues the job (see handle) */
} Request;

struct HttpServer {
    struct MHD_Daemon *d;
    Gate *gate;
    char host[64];     /* the address bound, as --host named it */
    int host_loopback; /* it is a loopback address */
    char **allow;      /* --allow-host's names; "*" any */
    int n_allow;
    ServedModels *models;
    Jobs *jobs;
    char *page;       /* the live viewer page */
    char *model_json; /* GET /v1/model */
    atomic_int stopping, in_flight;
    pthread_mutex_t answer_lock; /* over the two below */
    int unanswered;              /* requests queued whose job no worker has answered */
    int abandoned;               /* the stop gave up on those: no answer is sent any more */
    pthread_mutex_t conns_lock;
    Conn *conns;
    Conn *handed; /* handed on, not started yet (next only): their acceptance times */
    pthread_t reaper;
    int reaper_started;
    atomic_int reaper_stop;
};

/* ---- answers --------------------------------------------------------------------------- */

/* Every answer closes its connection, so that the next request on it passes the gate
 * too (serve/gate.h): libmicrohttpd never reads a head the gate has not. allow: the
 * methods a 405 names, else NULL; type NULL: no body to describe (a 204). */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, const char *body, size_t len,
                             const char *allow) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    if (type) MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Connection", "close");
    if (status == 503) MHD_add_response_header(r, "Retry-After", HTTP_RETRY_AFTER);
    if (allow) MHD_add_response_header(r, "Allow", allow);
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, const char *json) {
    return reply(c, status, "application/json", json, strlen(json), NULL);
}

static enum MHD_Result reply_error_allow(struct MHD_Connection *c, unsigned status, const char *msg,
                                         const char *allow) {
    char *json = api_error_json(msg);
    enum MHD_Result rc = reply(c, status, "application/json", json, strlen(json), allow);
    free(json);
    return rc;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *msg) {
    return reply_error_allow(c, status, msg, NULL);
}

/* ---- who may ask: Host, Origin, Content-Type ------------------------------------------------- */

/* The name of a Host value "name[:port]" or "[v6][:port]", lower-cased, into out; 0 when
 * it is not of that form. */
static int host_name(const char *value, char *out, size_t n) {
    const char *name = value, *end;
    if (value[0] == '[') {
        name = value + 1;
        if (!(end = strchr(name, ']'))) return 0;
        if (end[1] && end[1] != ':') return 0;
    } else {
        end = strchr(value, ':');
        if (!end) end = value + strlen(value);
        else if (strchr(end + 1, ':')) return 0;
    }
    for (const char *p = *end == ']' ? end + 1 : end; *p; p++)
        if (p == (*end == ']' ? end + 1 : end) ? *p != ':' : (*p < '0' || *p > '9')) return 0;
    size_t len = (size_t)(end - name);
    if (len == 0 || len >= n) return 0;
    for (size_t i = 0; i < len; i++) out[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    out[len] = '\0';
    return 1;
}

static int is_loopback_address(const char *name) {
    struct in_addr v4;
    struct in6_addr v6;
    if (inet_pton(AF_INET, name, &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, name, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

static int is_address(const char *name) {
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}

/* Whether a request naming host (the Host header's name) is for this server. A name a
 * DNS server answers for could be any site's, rebound to this machine: only loopback
 * names, the address bound and the names --allow-host lists pass; a plain address cannot
 * be rebound, so on a server bound beyond loopback any address passes too. */
static int host_allowed(const HttpServer *s, const char *name) {
    if (strcmp(name, "localhost") == 0 || is_loopback_address(name) || strcmp(name, s->host) == 0) return 1;
    size_t n = strlen(name), suffix = strlen(".localhost");
    if (n > suffix && strcmp(name + n - suffix, ".localhost") == 0) return 1; /* RFC 6761: loopback */
    if (!s->host_loopback && is_address(name)) return 1;
    for (int i = 0; i < s->n_allow; i++) {
        const char *a = s->allow[i];
        size_t k = strlen(a) - 1; /* "*.example.com": ".example.com", after one label or more */
        if (strcmp(a, "*") == 0 || strcmp(a, name) == 0) return 1;
        if (a[0] == '*' && n > k && strcmp(name + n - k, a + 1) == 0) return 1;
    }
    return 0;
}

/* Counts the Origin headers into *cls: a browser sends one, and only the first would be
 * looked up. */
static enum MHD_Result count_origin(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind, (void)value;
    if (strcasecmp(key, "Origin") == 0) (*(int *)cls)++;
    return MHD_YES;
}

/* Why the request is refused before it is read (403 or 415), or 0. Another site's page
 * may post to a local server from the user's browser (a form; a fetch) and, through DNS
 * rebinding, read its answers: the Host must name this server, an Origin (sent by
 * browsers) must be this server's, and a body is JSON, which no form can send. */
static int refusal(const HttpServer *s, struct MHD_Connection *mc, int post, char *msg, size_t n) {
    const char *host = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    char name[256];
    if (host && (!host_name(host, name, sizeof name) || !host_allowed(s, name))) {
        char shown[96];
        api_quote(shown, sizeof shown, host, 64);
        snprintf(msg, n, "Host '%s' is not this server's name (qkv serve --allow-host NAME admits one)", shown);
        return 403;
    }
    int origins = 0;
    MHD_get_connection_values(mc, MHD_HEADER_KIND, count_origin, &origins);
    if (origins > 1) {
        snprintf(msg, n, "a request names more than one Origin");
        return 403;
    }
    const char *origin = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Origin");
    if (origin) {
        char own[300] = "";
        if (host) snprintf(own, sizeof own, "http://%s", host);
        int same = host && strcasecmp(origin, own) == 0;
        if (!same) {
            char shown[96];
            api_quote(shown, sizeof shown, origin, 64);
            snprintf(msg, n, "a request from another site (Origin '%s') is refused", shown);
            return 403;
        }
    }
    if (post) {
        const char *type = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        size_t k = strlen("application/json");
        const char *rest = type && strncasecmp(type, "application/json", k) == 0 ? type + k : NULL;
        while (rest && (*rest == ' ' || *rest == '\t')) rest++;
        if (!rest || (*rest && *rest != ';')) {
            snprintf(msg, n, "the body must be JSON, sent with Content-Type: application/json");
            return 415;
        }
    }
    return 0;
}

/* ---- the fixed answers ------------------------------------------------------------------ */

static char *model_json(ServedModels *sm) {
    const Run *r = &sm->ck[sm->fallback].run;
    const ModelConfig *mc = &r->model.cfg;
    json_t *cks = json_array();
    for (int i = 0; i < sm->n; i++) json_array_append_new(cks, json_string(sm->ck[i].name));
    static const char *tokenizers[] = {"word", "char", "bpe", "unigram"};
    int tok = r->cfg.data.tokenizer;
    char *raw = config_text(&r->cfg, RUN_CONFIG), *yaml = attnmap_utf8(raw ? raw : ""); /* paths may be any bytes */
    free(raw);
    json_t *o = json_pack("{s:s, s:s, s:I, s:i, s:i, s:s, s:o, s:{s:i, s:i, s:i, s:i, s:i, s:i}, s:i, s:s}", "format",
                          "qkv-model-1", "checkpoint", sm->ck[sm->fallback].name, "step", (json_int_t)r->meta.step,
                          "src_vocab", r->src_vocab.size, "tgt_vocab", r->tgt_vocab.size, "tokenizer",
                          tok >= 0 && tok < 4 ? tokenizers[tok] : "?", "checkpoints", cks, "model", "d_model",
                          mc->d_model, "heads", mc->heads, "d_ff", mc->d_ff, "encoder_layers", mc->encoder_layers,
                          "decoder_layers", mc->decoder_layers, "max_positions", mc->max_positions, "head_count",
                          model_head_count(&r->model), "config", yaml);
    free(yaml);
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    return s;
}

/* ---- the reaper: requests that take too long to arrive ---------------------------------- */

static void *reap(void *arg) {
    HttpServer *s = arg;
    while (!atomic_load(&s->reaper_stop)) {
        nanosleep(&(struct timespec){0, 250 * 1000 * 1000}, NULL);
        double now = now_seconds();
        pthread_mutex_lock(&s->conns_lock);
        for (Conn *c = s->conns; c; c = c->next)
            if (c->receiving_since > 0 && now - c->receiving_since > HTTP_RECEIVE_SECONDS) {
                /* shutdown, not close: the polling thread still owns the descriptor; it
                 * sees the end of the stream and closes the connection itself */
                shutdown(c->fd, SHUT_RDWR);
                c->receiving_since = 0;
            }
        pthread_mutex_unlock(&s->conns_lock);
    }
    return NULL;
}

static void set_receiving(HttpServer *s, Conn *c, double since) {
    if (!c) return;
    pthread_mutex_lock(&s->conns_lock);
    c->receiving_since = since;
    pthread_mutex_unlock(&s->conns_lock);
}

/* The connection handed on with socket fd, taken off that list (under conns_lock);
 * NULL when none is there. */
static Conn *take_handed(HttpServer *s, int fd) {
    for (Conn **p = &s->handed; *p; p = &(*p)->next)
        if ((*p)->fd == fd) {
            Conn *c = *p;
            *p = c->next, c->next = NULL;
            return c;
        }
    return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    HttpServer *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = info ? info->connect_fd : -1;
        pthread_mutex_lock(&s->conns_lock);
        Conn *c = take_handed(s, fd);
        if (!c) { /* never: every connection comes through the gate */
            c = xcalloc(1, sizeof *c);
            c->fd = fd, c->receiving_since = now_seconds();
        }
        c->next = s->conns;
        if (s->conns) s->conns->prev = c;
        s->conns = c;
        pthread_mutex_unlock(&s->conns_lock);
        *socket_context = c;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        gate_handed_closed(s->gate);
        Conn *c = *socket_context;
        pthread_mutex_lock(&s->conns_lock);
        if (c->prev) c->prev->next = c->next;
        else s->conns = c->next;
        if (c->next) c->next->prev = c->prev;
        pthread_mutex_unlock(&s->conns_lock);
        free(c);
        *socket_context = NULL;
    }
}

static Conn *conn_of(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

/* ---- requests ----------------------------------------------------------------------------- */

/* On a worker's thread: the answer is in job; the polling thread sends it. Unless the
 * stop has given up on it (http_abandon): then it is not sent, and counted unanswered. */
static void job_done(Job *job) {
    Request *q = job->conn;
    HttpServer *s = q->server;
    pthread_mutex_lock(&s->answer_lock);
    int send = !s->abandoned;
    if (send) s->unanswered--;
    pthread_mutex_unlock(&s->answer_lock);
    if (!send) return; /* its connection stays suspended until the process ends */
    atomic_store(&q->answered, 1);
    MHD_resume_connection(q->mc);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)toe;
    HttpServer *s = cls;
    Request *q = *con_cls;
    if (!q) return;
    if (q->job) atomic_fetch_sub(&s->in_flight, 1);
    job_free(q->job);
    sb_free(&q->body);
    free(q->error);
    free(q);
    *con_cls = NULL;
    set_receiving(s, conn_of(mc), now_seconds()); /* the next request on this connection */
}

/* A complete POST to an API path: checked, then queued with its connection suspended. */
static enum MHD_Result submit(HttpServer *s, struct MHD_Connection *mc, Request *q, int kind) {
    char err[512];
    Job *job = xcalloc(1, sizeof *job);
    int status = api_parse(kind, q->body.buf ? q->body.buf : "", q->body.len, &job->req, err, sizeof err);
    if (status) return free(job), reply_error(mc, (unsigned)status, err);
    job->checkpoint = s->models->fallback;
    if (job->req.checkpoint && (job->checkpoint = served_find(s->models, job->req.checkpoint)) < 0) {
        char shown[160];
        api_quote(shown, sizeof shown, job->req.checkpoint, API_MAX_NAME);
        snprintf(err, sizeof err, "no checkpoint \"%s\": GET /v1/model lists them", shown);
        return job_free(job), reply_error(mc, 400, err);
    }
    job->done = job_done;
    job->conn = q;
    q->job = job, q->mc = mc;
    atomic_fetch_add(&s->in_flight, 1);
    pthread_mutex_lock(&s->answer_lock);
    s->unanswered++;
    pthread_mutex_unlock(&s->answer_lock);
    MHD_suspend_connection(mc); /* before the job can be answered: a resume never precedes it */
    if (jobs_submit(s->jobs, job) != 0) {
        pthread_mutex_lock(&s->answer_lock);
        s->unanswered--;
        pthread_mutex_unlock(&s->answer_lock);
        q->status = 503;
        q->error = xstrdup(atomic_load(&s->stopping) ? "the server is stopping" : "the queue is full: try again");
        MHD_resume_connection(mc);
    }
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    HttpServer *s = cls;
    Request *q = *con_cls;
    if (!q) { /* the headers are in (the gate let the body pass: its Content-Length within API_MAX_BODY) */
        q = xcalloc(1, sizeof *q);
        *con_cls = q;
        q->server = s;
        q->post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
        /* answered once the body is read, not now: an answer before it would close the
         * connection under a client still sending, which then reads a reset */
        q->refused = refusal(s, mc, q->post, q->refusal, sizeof q->refusal);
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body: kept, or (refused) read and dropped */
        if (!q->refused) sb_append(&q->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (q->job) { /* resumed: the answer is in */
        if (q->status) return reply_error(mc, (unsigned)q->status, q->error);
        if (!atomic_load(&q->answered)) return MHD_YES; /* not ours: keep waiting */
        return reply_json(mc, (unsigned)q->job->status, q->job->body);
    }
    set_receiving(s, conn_of(mc), 0);
    if (q->refused) return reply_error(mc, (unsigned)q->refused, q->refusal);
    if (atomic_load(&s->stopping)) return reply_error(mc, 503, "the server is stopping");
    int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    const Route *route = route_find(url);
    if (!route) {
        StrBuf list = {0};
        sb_printf(&list, "no such path: the API is ");
        routes_list(&list);
        enum MHD_Result rc = reply_error(mc, 404, list.buf);
        sb_free(&list);
        return rc;
    }
    if (route->answer == ROUTE_JOB) {
        if (!q->post) return reply_error_allow(mc, 405, "use POST with a JSON body", "POST");
        if (!q->whole) {
            /* Not suspended from this call, the first with the whole body: libmicrohttpd 0.9.75
             * keeps a connection's last polling state while it is suspended, here "reading"
             * (the body), and once resumed reads first; a client that half-closed after
             * sending (nc -N) has its end of stream read then, and its connection closed
             * unanswered. Left without an answer, the connection goes to its state of a
             * request whole and unanswered, in which nothing is read, and comes back at once
             * (the next turn of the polling loop) for this call's second. */
            q->whole = 1;
            return MHD_YES;
        }
        return submit(s, mc, q, route->api);
    }
    if (!get) return reply_error_allow(mc, 405, "use GET", "GET, HEAD");
    switch (route->answer) {
    case ROUTE_PAGE: return reply(mc, 200, "text/html; charset=utf-8", s->page, strlen(s->page), NULL);
    case ROUTE_MODEL: return reply_json(mc, 200, s->model_json);
    case ROUTE_ICON: /* asked on every load of a page: nothing to show, said without a 404 (a console error) */
        return reply(mc, 204, NULL, "", 0, NULL);
    default: {
        char health[96];
        int waiting, working;
        jobs_counts(s->jobs, &waiting, &working);
        snprintf(health, sizeof health, "{\"status\":\"ok\",\"queued\":%d,\"working\":%d}", waiting, working);
        return reply_json(mc, 200, health);
    }
    }
}

/* ---- the server ---------------------------------------------------------------------------- */

/* The viewer page with {"format": "qkv-live-1", "model": GET /v1/model's object, and,
 * when heads is not NULL, "head_analysis": heads} for its data. */
static char *live_page(const char *model, const json_t *heads) {
    char *grid = heads ? json_dumps(heads, JSON_COMPACT) : NULL;
    size_t n = strlen(model) + (grid ? strlen(grid) : 0) + 96;
    char *json = xmalloc(n);
    snprintf(json, n, "{\"format\":\"qkv-live-1\",\"model\":%s%s%s}", model, grid ? ",\"head_analysis\":" : "",
             grid ? grid : "");
    StrBuf page = {0};
    attnview_page(json, &page);
    free(json), free(grid);
    return page.buf;
}

/* The gate's hand-on: a connection whose head is well-formed, to libmicrohttpd, which
 * starts it on its own thread later (on_connection). Its acceptance time waits for it on
 * the list of those handed on: the request must be whole within HTTP_RECEIVE_SECONDS of
 * that, not of the hand-on, or a client slow to send its head and then its body would
 * have the bound twice. */
static int hand_on(void *ctx, int fd, const struct sockaddr *addr, socklen_t len, double accepted) {
    HttpServer *s = ctx;
    pthread_mutex_lock(&s->conns_lock);
    Conn *c = take_handed(s, fd); /* one libmicrohttpd closed without starting: its fd is taken again */
    if (!c) c = xcalloc(1, sizeof *c);
    c->fd = fd, c->receiving_since = accepted;
    c->next = s->handed, s->handed = c;
    pthread_mutex_unlock(&s->conns_lock);
    if (MHD_add_connection(s->d, fd, addr, len) == MHD_YES) return 0;
    pthread_mutex_lock(&s->conns_lock); /* it closed fd: it cannot take it */
    free(take_handed(s, fd));
    pthread_mutex_unlock(&s->conns_lock);
    return -1;
}

/* A listening socket on addr, non-blocking; -1 with errno set. */
static int listen_on(const struct sockaddr *addr, socklen_t len) {
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (addr->sa_family == AF_INET6) { /* "::" is every interface, IPv4 ones included */
        int v6only = !IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)addr)->sin6_addr);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    }
    if (bind(fd, addr, len) != 0 || listen(fd, 511) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* One name of --allow-host (t, trimmed, not empty) as a Host's name is compared: lower-cased,
 * an IPv6 address out of its brackets; "*" as it is; "*.SUFFIX" as "*." and the suffix's
 * name. 0, or -1 with the error set: a name with a port (the port of a Host is never
 * compared, so a name kept with one would match nothing), a '*' anywhere else, or a
 * wildcard over an address or over a single label ("*.com" admits every site there). */
static int allow_name(const char *t, char *out, size_t n) {
    if (strcmp(t, "*") == 0) return snprintf(out, n, "*"), 0;
    int wild = strncmp(t, "*.", 2) == 0;
    const char *body = wild ? t + 2 : t;
    char name[256], inside[300];
    const char *entry = body;
    struct in6_addr v6;
    if (inet_pton(AF_INET6, body, &v6) == 1) /* an IPv6 address written bare: its colons are no port */
        snprintf(inside, sizeof inside, "[%s]", body), entry = inside;
    int bracketed = entry[0] == '[';
    if (strchr(body, '*') || !host_name(entry, name, sizeof name) ||
        (bracketed ? strchr(entry, ']')[1] != '\0' : strchr(entry, ':') != NULL)) {
        if (strchr(body, '*'))
            err_set("--allow-host: '%s': a '*' stands alone (any name) or opens a name (*.example.com: its "
                    "subdomains)",
                    t);
        else
            err_set("--allow-host: '%s' is not a host name or address without a port (the port of a request's Host "
                    "is not compared)",
                    t);
        return -1;
    }
    if (wild && (bracketed || is_address(name) || !strchr(name, '.'))) {
        err_set("--allow-host: '%s': a wildcard takes a domain of two labels or more (*.example.com), not an "
                "address or a top-level domain",
                t);
        return -1;
    }
    snprintf(out, n, "%s%s", wild ? "*." : "", name);
    return 0;
}

/* --allow-host's names: apart at commas (and spaces), each as allow_name reads it. An
 * empty name (",,", a comma first or last, nothing at all) is refused: it admits nothing,
 * and the list meant something else. */
static int split_allow(HttpServer *s, const char *list) {
    if (!list) return 0;
    char *copy = xstrdup(list);
    int rc = 0;
    for (char *piece = copy, *end; rc == 0 && piece; piece = end) {
        if ((end = strchr(piece, ','))) *end++ = '\0';
        int names = 0;
        char *save = NULL;
        for (char *t = strtok_r(piece, " \t", &save); rc == 0 && t; t = strtok_r(NULL, " \t", &save), names++) {
            char name[300];
            if ((rc = allow_name(t, name, sizeof name)) != 0) break;
            s->allow = xrealloc(s->allow, sizeof(char *) * (size_t)(s->n_allow + 1));
            s->allow[s->n_allow++] = xstrdup(name);
        }
        if (rc == 0 && names == 0) {
            err_set("--allow-host: an empty name in '%s' (names apart at commas; '*' admits any)", list);
            rc = -1;
        }
    }
    free(copy);
    return rc;
}

static void free_server(HttpServer *s) {
    while (s->handed) free(take_handed(s, s->handed->fd));
    for (int i = 0; i < s->n_allow; i++) free(s->allow[i]);
    free(s->allow), free(s->model_json), free(s->page);
    pthread_mutex_destroy(&s->conns_lock), pthread_mutex_destroy(&s->answer_lock);
    free(s);
}

HttpServer *http_start(ServedModels *models, const json_t *heads, Jobs *jobs, const char *host, int port,
                       const char *allow_hosts, int *bound) {
    HttpServer *s = xcalloc(1, sizeof *s);
    s->models = models, s->jobs = jobs;
    pthread_mutex_init(&s->conns_lock, NULL), pthread_mutex_init(&s->answer_lock, NULL);
    s->model_json = model_json(models);
    s->page = live_page(s->model_json, heads);
    if (split_allow(s, allow_hosts) != 0) return free_server(s), NULL;
    struct sockaddr_in v4 = {0};
    struct sockaddr_in6 v6 = {0};
    const struct sockaddr *addr;
    socklen_t addr_len;
    if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET, v4.sin_port = htons((uint16_t)port);
        addr = (const struct sockaddr *)&v4, addr_len = sizeof v4;
    } else if (inet_pton(AF_INET6, host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6, v6.sin6_port = htons((uint16_t)port);
        addr = (const struct sockaddr *)&v6, addr_len = sizeof v6;
    } else {
        err_set("--host: '%s' is not an IPv4 or IPv6 address (or localhost)", host);
        return free_server(s), NULL;
    }
    snprintf(s->host, sizeof s->host, "%s", host);
    for (char *p = s->host; *p; p++) *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    s->host_loopback = is_loopback_address(host);
    int fd = listen_on(addr, addr_len);
    if (fd < 0) {
        err_set("cannot listen on %s port %d: %s", host, port, strerror(errno));
        return free_server(s), NULL;
    }
    struct sockaddr_storage got;
    socklen_t got_len = sizeof got;
    getsockname(fd, (struct sockaddr *)&got, &got_len);
    *bound = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                             : ((struct sockaddr_in *)&got)->sin_port);
    /* libmicrohttpd listens on nothing: the gate accepts, reads each head, and hands on */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                     MHD_USE_NO_LISTEN_SOCKET;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)HTTP_RECEIVE_SECONDS, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)HTTP_MAX_CONNECTIONS + 16, /* never reached: the gate hands on at most the max */
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, HTTP_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    if (!s->d) {
        close(fd);
        err_set("cannot start the HTTP server");
        return free_server(s), NULL;
    }
    /* under the lock that hand_on takes first: the gate's thread hands nothing on before
     * s->gate is set, which on_connection reads when a connection closes */
    pthread_mutex_lock(&s->conns_lock);
    s->gate = gate_start(fd, API_MAX_BODY, HTTP_RECEIVE_SECONDS, HTTP_MAX_CONNECTIONS, hand_on, s);
    pthread_mutex_unlock(&s->conns_lock);
    if (!s->gate) {
        MHD_stop_daemon(s->d);
        return free_server(s), NULL;
    }
    s->reaper_started = pthread_create(&s->reaper, NULL, reap, s) == 0;
    return s;
}

void http_quiesce(HttpServer *s) {
    atomic_store(&s->stopping, 1);
    gate_quiesce(s->gate);
}

int http_in_flight(HttpServer *s) { return atomic_load(&s->in_flight); }

int http_abandon(HttpServer *s) {
    pthread_mutex_lock(&s->answer_lock);
    s->abandoned = 1;
    int n = s->unanswered;
    pthread_mutex_unlock(&s->answer_lock);
    return n;
}
const char *http_address(const HttpServer *s) { return s->host; }
int http_loopback(const HttpServer *s) { return s->host_loopback; }

void http_stop(HttpServer *s) {
    if (!s) return;
    atomic_store(&s->reaper_stop, 1);
    if (s->reaper_started) pthread_join(s->reaper, NULL);
    gate_close(s->gate); /* before the daemon: it hands connections on to it */
    MHD_stop_daemon(s->d);
    gate_free(s->gate); /* after: the daemon's closing connections tell the gate */
    free_server(s);
}
