/* check: the test harness. Each test is a function that returns early on the first failed
 * CHECK; the runner counts and ends with the line "N passed, N failed". */
#ifndef QKV_CHECK_H
#define QKV_CHECK_H

#include <stdio.h>

extern int check_failed_now;
void check_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define CHECK(cond, ...)                                 \
    do {                                                 \
        if (!(cond)) {                                   \
            check_fail(__FILE__, __LINE__, __VA_ARGS__); \
            return;                                      \
        }                                                \
    } while (0)

typedef struct {
    const char *name;
    void (*fn)(void);
} TestCase;

/* Each test file exports a NULL-terminated table. */
extern const TestCase kernel_tests[];
extern const TestCase model_tests[];
extern const TestCase data_tests[];
extern const TestCase config_tests[];
extern const TestCase optim_tests[];
extern const TestCase mem_tests[];
extern const TestCase train_tests[];
extern const TestCase checkpoint_tests[];
extern const TestCase attnmap_tests[];
extern const TestCase assignment_tests[];
extern const TestCase decode_tests[];
extern const TestCase score_tests[];
extern const TestCase golden_tests[];
extern const TestCase spm_tests[];
extern const TestCase files_tests[];
extern const TestCase options_tests[];
extern const TestCase intervene_tests[];
extern const TestCase headmask_tests[];
extern const TestCase explain_tests[];
extern const TestCase pictures_tests[];
extern const TestCase heads_tests[];
extern const TestCase serve_tests[];
extern const TestCase cpu_tests[];

/* Shared fixture (test_data.c): n encoded pairs of varying lengths, token ids 4..23. */
struct Corpus;
void make_corpus(struct Corpus *c, int n);
/* Shared fixture (test_config.c): "seed: " and a flow sequence nested depth deep (malloc'd). */
char *deep_yaml(size_t depth);

#endif
