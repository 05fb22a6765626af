/* main: dispatch, nothing else (git's git.c). The commands' table is cmd/commands.c;
 * each command lives in src/cmd/<name>.c, parses its own options and returns the exit
 * status: 0 success, 1 runtime failure, 2 usage/config/input error. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "startup.h"

int main(int argc, char **argv) {
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
    /* a full disk shows up here for anything written to stdout */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "qkv: error writing standard output: %s\n", strerror(errno));
        return rc ? rc : 1;
    }
    return rc;
}
