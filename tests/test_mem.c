/* Memory: the big buffers (util/mem.h) that hold weights, gradients and the arena. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/mem.h"

/* Whether the kernel offers transparent huge pages to buffers that ask (madvise) or to all
 * (always): /sys/kernel/mm/transparent_hugepage/enabled names the mode in brackets. */
static int thp_offered(void) {
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    size_t n = fread(mode, 1, sizeof mode - 1, f);
    fclose(f);
    mode[n] = 0;
    return strstr(mode, "[madvise]") || strstr(mode, "[always]");
}

/* /proc/self/smaps' THPeligible for the mapping that holds p: 1, 0, or -1 if not found. */
static int thp_eligible(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int inside = 0, eligible = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (inside && sscanf(line, "THPeligible: %d", &eligible) == 1) break;
    }
    fclose(f);
    return eligible;
}

/* The weights', gradients' and arena's buffers: zeroed, grown with their prefix kept and
 * the rest zero, and (where the kernel offers huge pages to those that ask) asking. */
static void test_big_buffers(void) {
    size_t n = (9u << 20) / sizeof(float) + 5; /* over 9 MiB: whole 2 MiB pages inside, however placed */
    float *a = xcalloc_big(n, sizeof(float));
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += a[i] != 0.0f;
    int eligible = thp_eligible(a + n / 2);
    if (nonzero == 0 && thp_offered() && eligible != 1) {
        free(a);
        CHECK(0, "a %zu-byte buffer's mapping is not eligible for huge pages (THPeligible %d)", n * sizeof(float),
              eligible);
    }
    for (size_t i = 0; i < n; i++) a[i] = (float)(i % 1000) + 1.0f;
    float *b = xrealloc_big(a, n * sizeof(float), 2 * n * sizeof(float));
    size_t kept = 0, zero = 0;
    for (size_t i = 0; i < n; i++) kept += b[i] == (float)(i % 1000) + 1.0f;
    for (size_t i = n; i < 2 * n; i++) zero += b[i] == 0.0f;
    free(b);
    CHECK(nonzero == 0, "%zu of %zu floats not zero", nonzero, n);
    CHECK(kept == n && zero == n, "growing kept %zu of %zu floats and zeroed %zu of %zu", kept, n, zero, n);
    float *small = xcalloc_big(100, sizeof(float));
    float first = small[0], last = small[99];
    free(small);
    CHECK(first == 0.0f && last == 0.0f, "a small buffer is not zeroed");
}

const TestCase mem_tests[] = {
    {"mem_big_buffers_zeroed_grown_and_huge_paged", test_big_buffers},
    {NULL, NULL},
};
