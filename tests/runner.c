/* runner: runs every test table (or only tests whose name contains argv[1]; a name
 * that matches none is a failure). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int check_failed_now;

void check_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    check_failed_now = 1;
}

int main(int argc, char **argv) {
    const TestCase *tables[] = {kernel_tests,   model_tests,     data_tests,       optim_tests,   config_tests,
                                mem_tests,      train_tests,     checkpoint_tests, attnmap_tests, decode_tests,
                                score_tests,    golden_tests,    spm_tests,        files_tests,   options_tests,
                                headmask_tests, heads_tests,     serve_tests,      cpu_tests,     explain_tests,
                                pictures_tests, intervene_tests, assignment_tests};
    int passed = 0, failed = 0;
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++) {
        for (const TestCase *tc = tables[t]; tc->name; tc++) {
            if (argc > 1 && !strstr(tc->name, argv[1])) continue;
            check_failed_now = 0;
            tc->fn();
            printf("%s %s\n", check_failed_now ? "FAIL" : "ok  ", tc->name);
            fflush(stdout);
            if (check_failed_now) failed++;
            else passed++;
        }
    }
    if (argc > 1 && passed + failed == 0) {
        /* a filter that matches nothing proves nothing: a renamed test must not pass silently */
        printf("FAIL no test name contains '%s'\n0 passed, 1 failed\n", argv[1]);
        return 1;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
