/* startup: what must happen before any library starts, so before main; and, first thing in
 * main, the choice of OpenBLAS's kernels, which needs OpenBLAS started.
 *
 * OpenBLAS starts its pool of threads (one per core, each mapping a 128 MiB buffer) in a
 * library constructor, before main runs. Under an address-space limit (ulimit -v) too
 * small for that pool, a thread that cannot map its buffer retries for ever, and the
 * process hangs at its first BLAS call or at exit: every command, even `qkv help`. A
 * function in .preinit_array runs before any shared library's constructor (the ELF rule
 * for executables): when the limit cannot hold the pool, it starts qkv again, at once,
 * with OPENBLAS_NUM_THREADS=1 (unless the user chose a number), so no pool is made. qkv
 * trains with one OpenBLAS thread per training thread anyway; only decoding loses
 * OpenBLAS's own threads. A limit that cannot hold the work then fails in qkv's own one
 * line ("out of memory"); below about 60 MB the dynamic loader itself refuses to start
 * qkv (exit 127, its message).
 *
 * That function runs before the C library has set up the environment (getenv, setenv and
 * malloc are not to be used there): it reads envp itself and builds the new one on the
 * stack.
 *
 * OpenBLAS picks its kernels in the same constructor, from a table of CPU models: a CPU
 * newer than the library may get the generic SSE3 set whatever it supports (0.3.21 runs
 * Prescott on a Xeon of family 6 model 207, 3.6x slower than SkylakeX). Only once it has
 * picked (so in main) can qkv compare its choice with what the CPU supports
 * (util/cpu.h); when that is stronger, and the user has not set OPENBLAS_CORETYPE, qkv
 * starts itself again with OPENBLAS_CORETYPE naming that set and KERNELS_MARKER saying
 * what OpenBLAS had picked: one more exec, once (the marker stops a second). */
#include "startup.h"

#define _GNU_SOURCE
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/cpu.h"

extern char **environ;

/* one OpenBLAS thread's share (its buffer, stack and slack), and the rest of qkv */
#define PER_THREAD_BYTES (160ull << 20)
#define BASE_BYTES (512ull << 20)
#define ONE_THREAD "OPENBLAS_NUM_THREADS=1"

static int has_var(char **envp, const char *name) {
    size_t n = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return 1;
    return 0;
}

/* this executable's path, not /proc/self/exe: the process keeps its name (ps, top); 0 if unknown */
static int own_path(char *self, size_t size) {
    ssize_t len = readlink("/proc/self/exe", self, size - 1);
    if (len <= 0) return 0;
    self[len] = '\0';
    return 1;
}

/* Starts this program again with argv and env; returns only when that failed. Started
 * through a dynamic loader named on the command line (make bundle's launcher runs
 * lib/ld-linux-x86-64.so.2 --library-path lib bin/qkv), the executable is the loader, and
 * argv[0] the program it loaded: the loader is run again the same way, on the libraries
 * beside it, or the program would start on the machine's libraries, or not at all. No
 * malloc: this runs before the C library is set up too. */
static void start_again(char **argv, char **env) {
    char self[4096];
    if (!own_path(self, sizeof self)) return;
    const char *base = strrchr(self, '/') ? strrchr(self, '/') + 1 : self;
    if (strncmp(base, "ld-linux", 8) != 0) {
        execve(self, argv, env);
        return;
    }
    int n = 0;
    while (argv[n]) n++;
    if (n > 100000) return;
    char dir[4096];
    size_t dir_len = base > self ? (size_t)(base - self - 1) : 0;
    memcpy(dir, self, dir_len);
    dir[dir_len] = '\0';
    char *args[n + 4];
    args[0] = self, args[1] = "--library-path", args[2] = dir_len ? dir : ".";
    for (int i = 0; i < n; i++) args[3 + i] = argv[i];
    args[n + 3] = NULL;
    execve(self, args, env);
}

static void fit_openblas_to_address_limit(int argc, char **argv, char **envp) {
    (void)argc;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
    if (has_var(envp, "OPENBLAS_NUM_THREADS") || has_var(envp, "GOTO_NUM_THREADS") || has_var(envp, "OMP_NUM_THREADS"))
        return;
    int cores = cpu_usable_count();
    if ((unsigned long long)rl.rlim_cur >= (unsigned long long)cores * PER_THREAD_BYTES + BASE_BYTES) return;
    size_t n = 0;
    while (envp[n]) n++;
    if (n > 100000) return; /* an environment too large for the stack: keep the pool */
    char *env[n + 2];
    memcpy(env, envp, sizeof(char *) * n);
    env[n] = ONE_THREAD, env[n + 1] = NULL;
    start_again(argv, env); /* returns only when it failed: go on as we are */
}

typedef void (*PreinitFn)(int argc, char **argv, char **env);
static const PreinitFn run_before_libraries
    __attribute__((section(".preinit_array"), used)) = fit_openblas_to_address_limit;

/* QKV_TEST_PRETEND_OPENBLAS_CHOSE is a test hook (tests/cli.sh): the set to take as
 * OpenBLAS's choice in place of the one it made, so that the path below runs on a CPU
 * that OpenBLAS knows. */
void startup_choose_kernels(char **argv) {
    if (getenv(KERNELS_MARKER)) return; /* started again already, or a child of one */
    const char *pretend = getenv("QKV_TEST_PRETEND_OPENBLAS_CHOSE");
    const char *picked = pretend ? pretend : openblas_get_corename();
    CpuFeatures f;
    cpu_features_read(&f);
    const char *set = kernels_choose(picked, &f, getenv("OPENBLAS_CORETYPE"));
    char marker[128];
    if (!set) return;
    snprintf(marker, sizeof marker, "%s:%s", picked, set);
    if (setenv("OPENBLAS_CORETYPE", set, 1) == 0 && setenv(KERNELS_MARKER, marker, 1) == 0) start_again(argv, environ);
    /* only when it failed: go on with OpenBLAS's choice, and say that one */
    unsetenv("OPENBLAS_CORETYPE"), unsetenv(KERNELS_MARKER);
}
