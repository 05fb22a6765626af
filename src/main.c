/* main: dispatch, nothing else (git's git.c). The commands' table is cmd/commands.c;
 * each command lives in src/cmd/<name>.c, parses its own options and returns the exit
 * status: 0 success, 1 runtime failure, 2 usage/config/input error. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "cmdlib/cmdutil.h"
#include "startup.h"
#include "util/atomic_file.h"

/* A command stopped by Ctrl-C or a kill says so in one line, then dies of the signal as
 * it would have (status 128 + N): what it wrote whole stays, and its atomic writes hold
 * these signals until their file is in place or gone. train and serve set their own. */
static void on_stop_signal(int sig) {
    const char *msg = sig == SIGINT    ? "qkv: stopped by SIGINT\n"
                      : sig == SIGTERM ? "qkv: stopped by SIGTERM\n"
                                       : "qkv: stopped by SIGHUP\n";
    /* strlen and write are async-signal-safe; a progress line on the terminal is ended first;
     * a command that has said why it fails is on its way out, and says no more */
    if (!cmd_failure_said &&
        ((cmd_progress_shown && write(STDERR_FILENO, "\n", 1) < 0) || write(STDERR_FILENO, msg, strlen(msg)) < 0)) {
        /* nothing more to say it with */
    }
    atomic_streams_discard(); /* a file written as it was made, never published: gone with the process */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void say_stop_signals(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old, sa = {0};
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        /* a signal ignored by whoever started qkv (nohup, a shell's background job) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
    }
}

int main(int argc, char **argv) {
    /* first, so that a stop at once still says so in its one line (a start again below
     * puts the handlers back to the defaults, and this sets them again) */
    say_stop_signals();
    /* OpenBLAS's kernels, where it picked a set weaker than the CPU's (may start qkv again) */
    startup_choose_kernels(argv);
    /* past a file size limit (ulimit -f) a write fails with EFBIG, reported as one line
     * with the tmp file removed, rather than the process dying half-way through it */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) { /* a usage error: the list goes where errors go, as the status says */
        command_list(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) name = "help";
    const Command *cmd = command_find(name);
    if (!cmd) {
        fprintf(stderr, "qkv: '%s' is not a command; see 'qkv --help'\n", argv[1]);
        return 2;
    }
    /* getopt names argv[0] in its messages: make them read "qkv: train: ..." */
    char label[64];
    snprintf(label, sizeof label, "qkv: %s", cmd->spec->name);
    argv[1] = label;
    int rc = cmd->fn(argc - 1, argv + 1);
    /* a full disk shows up here for anything written to stdout; a reader that went away
     * (train's log into `| head`, where SIGPIPE is ignored) lost only what it left unread */
    errno = 0;
    int flushed = fflush(stdout) == 0, e = errno;
    if (!flushed || ferror(stdout)) {
        /* an earlier write failed and nothing is left to flush: a pipe with no reader says
         * POLLERR (e is that earlier write's EPIPE, long overwritten) */
        struct pollfd out = {.fd = STDOUT_FILENO, .events = POLLOUT};
        if (e == 0 && poll(&out, 1, 0) == 1 && (out.revents & POLLERR)) e = EPIPE;
        if (e == EPIPE) return rc;
        fprintf(stderr, "qkv: error writing standard output: %s\n", strerror(e));
        return rc ? rc : 1;
    }
    return rc;
}
