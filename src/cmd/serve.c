/* serve: `qkv serve RUN|WEIGHTS [--host H] [--port P] [--workers N]`: the live viewer
 * and a JSON API over HTTP (serve/http.h), until SIGINT or SIGTERM; then it stops
 * accepting, answers what is in flight (within a bound: STOP_WAIT_FACTOR), and exits 0. A
 * repeated signal drops nothing. */
#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "cmdlib/options.h"
#include "decode/fanout.h"
#include "serve/http.h"
#include "serve/jobs.h"
#include "serve/models.h"
#include "serve/routes.h"
#include "util/clock.h"
#include "util/err.h"

/* A stop waits for the requests in flight at most twice the queue's wait (60 s by
 * default): a queued one is answered within the queue's wait (503 at its deadline at the
 * latest), and one a worker has taken by then has as long again. A decoding cannot be
 * interrupted, so past the bound the requests still being worked on are given up on (said,
 * with how many) and the process ends under their workers; answers already made have
 * STOP_SEND_SECONDS more to go out whole. */
#define STOP_WAIT_FACTOR 2
#define STOP_SEND_SECONDS 2

static const CmdOption options[] = {
    {'H', "host", "ADDR", "the address to listen on (loopback unless you say otherwise)", "127.0.0.1"},
    {'p', "port", "PORT", "the port; 0 picks a free one (the start-up line names it)", "8080"},
    {'w', "workers", "N", "threads that decode, each on its own core (and one more for light requests)",
     "OpenBLAS's thread count (the cores)"},
    {'q', "queue", "N", "requests that may wait for a worker; past it, 503 with Retry-After", "256"},
    {'W', "queue-wait", "SECONDS",
     "how long a request may wait for a worker; then 503 (a stop waits at most twice this)", "30"},
    {'g', "max-gflop", "N",
     "the most work one translate, explain, whatif or patch request may ask (estimated before it starts); past it, 413",
     "300"},
    {'a', "allow-host", "NAMES",
     "names a request's Host may give besides loopback names and the address (commas; * any; *.example.com its "
     "subdomains)",
     "none"},
    {0},
};
const CmdSpec cmd_serve_spec = {
    .name = "serve",
    .operands = "RUN_DIR|WEIGHTS [options]",
    .summary = "serve the live attention viewer and a JSON translation API over HTTP",
    .about = "GET / is the attention viewer, live: type a sentence, see its n-best list and every\n"
             "attention map of the translation, and change the model to see what changes. The POST\n"
             "routes take JSON (docs/server.md lists the keys and the bounds). Ctrl-C (or SIGTERM)\n"
             "stops accepting, answers what is in flight (waiting at most twice --queue-wait), and\n"
             "exits 0; a second Ctrl-C drops nothing. Requests must name this server in their Host\n"
             "(a loopback name or the address; --allow-host adds names), come from no other site's\n"
             "page (Origin), and send JSON; no request names a file.",
    .options = options,
    .example = "qkv serve runs/toy --port 8080   # then open http://127.0.0.1:8080/",
    .more = routes_print,
};

/* The stop signals, through a pipe: a handler runs on whichever thread the signal
 * reaches (OpenBLAS's threads, started before main, block nothing, so a mask and
 * sigwait would let a second signal kill the process there). */
static int signal_pipe[2] = {-1, -1};

static void on_stop_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    (void)!write(signal_pipe[1], &b, 1); /* a full pipe already holds a stop */
    errno = saved;
}

static int catch_stop_signals(void) {
    if (pipe(signal_pipe) != 0) return -1;
    for (int i = 0; i < 2; i++) fcntl(signal_pipe[i], F_SETFD, FD_CLOEXEC), fcntl(signal_pipe[i], F_SETFL, O_NONBLOCK);
    struct sigaction sa = {0};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGINT, &sa, NULL) | sigaction(SIGTERM, &sa, NULL);
}

/* The next stop signal within ms (-1: for ever), or 0 for none. */
static int next_stop_signal(int ms) {
    struct pollfd p = {.fd = signal_pipe[0], .events = POLLIN};
    for (;;) {
        int rc = poll(&p, 1, ms);
        if (rc < 0 && errno == EINTR) continue;
        unsigned char b;
        if (rc > 0 && read(signal_pipe[0], &b, 1) == 1) return b;
        return 0;
    }
}

static const char *signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

/* Waits (up to seconds) until at most n requests are in flight, saying so of each stop
 * signal meanwhile: the work in flight is answered all the same. */
static void wait_in_flight(HttpServer *http, int n, double seconds) {
    for (double until = now_seconds() + seconds; http_in_flight(http) > n && now_seconds() < until;) {
        int sig = next_stop_signal(50);
        if (sig)
            fprintf(stderr, "qkv: %s again: already stopping; still answering the %d in flight\n", signal_name(sig),
                    http_in_flight(http));
    }
}

int cmd_serve(int argc, char **argv) {
    const char *host = "127.0.0.1", *allow = NULL;
    int port = 8080, workers = fanout_threads(), queue = JOBS_QUEUE_MAX, c;
    double max_gflop = JOBS_MAX_GFLOP, queue_wait = JOBS_DEADLINE_SECONDS;
    while ((c = cmd_option_next(&cmd_serve_spec, argc, argv)) >= 0) {
        if (c == 'H') host = optarg;
        else if (c == 'p' && cmd_int("--port", "a port", optarg, 0, 65535, &port) != 0) return cmd_fail(2);
        else if (c == 'w' && cmd_int("--workers", "a thread count", optarg, 1, 64, &workers) != 0) return cmd_fail(2);
        else if (c == 'q' && cmd_int("--queue", "a request count", optarg, 1, 100000, &queue) != 0) return cmd_fail(2);
        else if (c == 'g' && cmd_double("--max-gflop", "a work bound in GFLOP", optarg, 1e-6, 1e9, &max_gflop) != 0)
            return cmd_fail(2);
        else if (c == 'W' && cmd_double("--queue-wait", "a time in seconds", optarg, 0.1, 86400, &queue_wait) != 0)
            return cmd_fail(2);
        else if (c == 'a') allow = optarg;
    }
    if (c != CMD_OPTIONS_END) return cmd_option_status(c);
    if (optind != argc - 1) return cmd_usage_of(&cmd_serve_spec);
    if (catch_stop_signals() != 0) {
        err_set("cannot catch SIGINT and SIGTERM: %s", strerror(errno));
        return cmd_fail(1);
    }
    signal(SIGPIPE, SIG_IGN);
    ServedModels models;
    if (served_open(&models, argv[optind]) != 0) return cmd_fail(err_status());
    openblas_set_num_threads(1); /* the workers decode side by side, a core each */
    Jobs *jobs = jobs_start(&models, workers, queue, max_gflop, queue_wait);
    if (!jobs) return served_close(&models), cmd_fail(1);
    char heads_path[CONFIG_PATH_MAX + 32];
    json_t *heads = NULL;
    char heads_warning[CONFIG_PATH_MAX + 256] = ""; /* said once the server is up: a failed start says one line */
    int have_heads = served_heads(&models, heads_path, sizeof heads_path, &heads);
    if (have_heads < 0) snprintf(heads_warning, sizeof heads_warning, "%s", err_msg());
    int bound = 0;
    HttpServer *http = http_start(&models, heads, jobs, host, port, allow, &bound);
    json_decref(heads);
    if (!http) return jobs_stop(jobs), served_close(&models), cmd_fail(2);
    const ServedCheckpoint *ck = &models.ck[models.fallback];
    const char *address = http_address(http);
    int v6 = strchr(address, ':') != NULL;
    fprintf(stderr,
            "qkv: serving %s (%s, step %lld; %d checkpoint%s) on http://%s%s%s:%d/ with %d worker%s and one for light "
            "requests; Ctrl-C stops\n",
            ck->run.weights, ck->name, (long long)ck->run.meta.step, models.n, models.n == 1 ? "" : "s", v6 ? "[" : "",
            address, v6 ? "]" : "", bound, workers, workers == 1 ? "" : "s");
    if (!http_loopback(http))
        fprintf(stderr,
                "qkv: warning: %s is not a loopback address: anyone who can reach this machine's port %d can use "
                "the server\n",
                address, bound);
    if (have_heads > 0) fprintf(stderr, "qkv: the page's head grid: %s\n", heads_path);
    if (have_heads < 0) fprintf(stderr, "qkv: warning: %s; the page goes without the head grid\n", heads_warning);
    int sig = next_stop_signal(-1);
    fprintf(stderr, "qkv: %s: no new requests; answering the %d in flight\n", signal_name(sig), http_in_flight(http));
    http_quiesce(http);
    double stop_bound = STOP_WAIT_FACTOR * queue_wait;
    wait_in_flight(http, 0, stop_bound);
    int cut = 0;
    if (http_in_flight(http) > 0) {
        cut = http_abandon(http); /* these get no answer now, whatever their workers do */
        wait_in_flight(http, cut, STOP_SEND_SECONDS);
    }
    int unsent = http_in_flight(http) - cut; /* answered, and not yet taken whole by their clients */
    if (cut > 0) {
        /* their workers are still decoding and use the models, the jobs and the requests:
         * nothing is freed under them, and the process ends without its exit handlers
         * (OpenBLAS's would free its buffers under them) */
        fprintf(stderr,
                "qkv: stopped at its %g s bound with %d request%s unanswered: %s (a decoding cannot be interrupted)\n",
                stop_bound, cut, cut == 1 ? "" : "s",
                cut == 1 ? "a worker was still on it" : "workers were still on them");
        if (unsent > 0) fprintf(stderr, "qkv: and %d answer%s not sent whole\n", unsent, unsent == 1 ? "" : "s");
        fflush(stdout), fflush(stderr);
        _exit(0);
    }
    jobs_stop(jobs); /* no job left: the workers are idle */
    http_stop(http);
    served_close(&models);
    if (unsent > 0)
        fprintf(stderr, "qkv: stopped after %g s with %d answer%s not sent whole\n", stop_bound + STOP_SEND_SECONDS,
                unsent, unsent == 1 ? "" : "s");
    else fprintf(stderr, "qkv: stopped\n");
    return 0;
}
