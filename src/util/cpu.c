/* cpu: see cpu.h. The ranks follow OpenBLAS 0.3.21's kernel sets (driver/others/dynamic.c,
 * its corename[] table) and what each set's sgemm kernels need; the decision is pure so that
 * a table of CPUs tests it (tests/test_cpu.c). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "util/cpu.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xcr0(void) {
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (unsigned long long)hi << 32 | lo;
}

void cpu_features_read(CpuFeatures *f) {
    memset(f, 0, sizeof *f);
    unsigned int max, a, b, c, d;
    if (!__get_cpuid(0, &max, &b, &c, &d)) return;
    memcpy(f->vendor, &b, 4), memcpy(f->vendor + 4, &d, 4), memcpy(f->vendor + 8, &c, 4);
    if (max < 1 || !__get_cpuid(1, &a, &b, &c, &d)) return;
    int base = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
    f->family = base == 0xf ? base + (int)((a >> 20) & 0xff) : base;
    f->model = base == 0x6 || base == 0xf ? model | (int)((a >> 16) & 0xf) << 4 : model;
    f->fma = (c >> 12) & 1;
    f->avx = (c >> 28) & 1;
    /* XGETBV exists only where the OS has turned XSAVE on (OSXSAVE) */
    unsigned long long x = (c >> 27) & 1 ? xcr0() : 0;
    f->os_ymm = (x & 0x6) == 0x6;
    f->os_zmm = (x & 0xe6) == 0xe6;
    if (max < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    unsigned int leaves7 = a;
    f->avx2 = (b >> 5) & 1;
    f->avx512f = (b >> 16) & 1;
    f->avx512dq = (b >> 17) & 1;
    f->avx512bw = (b >> 30) & 1;
    f->avx512vl = (b >> 31) & 1;
    f->amx_tile = (d >> 24) & 1;
    if (leaves7 >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        f->avx512_bf16 = (a >> 5) & 1;
    }
}
#else
void cpu_features_read(CpuFeatures *f) { memset(f, 0, sizeof *f); }
#endif

static const struct {
    const char *name;
    int rank;
} sets[] = {
    {"Katmai", 0},         {"Coppermine", 0},  {"Northwood", 0},    {"Prescott", 0},   {"Banias", 0},
    {"Atom", 0},           {"Core2", 0},       {"Penryn", 0},       {"Dunnington", 0}, {"Nehalem", 0},
    {"Athlon", 0},         {"Opteron", 0},     {"Opteron_SSE3", 0}, {"Barcelona", 0},  {"Nano", 0},
    {"Bobcat", 0},         {"Sandybridge", 1}, {"Bulldozer", 1},    {"Piledriver", 1}, {"Steamroller", 1},
    {"Excavator", 1},      {"Haswell", 2},     {"Zen", 2},          {"SkylakeX", 3},   {"Cooperlake", 4},
    {"SapphireRapids", 5},
};

int cpu_usable_count(void) {
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    return n > 0 ? n : 1;
}

int kernels_rank(const char *name) {
    for (size_t i = 0; name && i < sizeof sets / sizeof *sets; i++)
        if (strcasecmp(name, sets[i].name) == 0) return sets[i].rank;
    return -1;
}

/* The strongest set of 0.3.21's that this CPU and OS can run, or NULL for none above SSE
 * worth naming. Cooperlake's sgemm is SkylakeX's kernel with other block sizes; it is the
 * set 0.3.21 itself gives every AVX-512 CPU with BF16 it knows (Cooper Lake, Ice Lake SP,
 * Sapphire Rapids, Zen 4) and, by its fallback on features, an AMD one it does not (Zen 5).
 * 0.3.21's OPENBLAS_CORETYPE does not accept the name Cooperlake (its loop stops one short)
 * and then falls back on the same features, which give Cooperlake on such a CPU: either way
 * the process runs Cooperlake, and the line that names the kernels says what it got. */
static const char *strongest(const CpuFeatures *f) {
    int avx2 = f->os_ymm && f->avx && f->avx2 && f->fma;
    if (avx2 && f->os_zmm && f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl)
        return f->avx512_bf16 ? "Cooperlake" : "SkylakeX";
    return avx2 ? "Haswell" : NULL;
}

const char *kernels_choose(const char *openblas_picked, const CpuFeatures *f, const char *env_coretype) {
    if (env_coretype) return NULL;
    int picked = kernels_rank(openblas_picked);
    const char *best = strongest(f);
    if (picked < 0 || !best || kernels_rank(best) <= picked) return NULL;
    return best;
}

int kernels_marker_match(const char *marker, const char *env_coretype, char *picked, size_t size) {
    const char *colon = marker ? strchr(marker, ':') : NULL;
    if (!colon || colon == marker || !env_coretype || strcmp(colon + 1, env_coretype) != 0) return 0;
    size_t n = (size_t)(colon - marker);
    if (size == 0) return 1;
    if (n >= size) n = size - 1;
    memcpy(picked, marker, n);
    picked[n] = '\0';
    return 1;
}

const char *kernels_openblas_picked(void) {
    static char picked[64];
    return kernels_marker_match(getenv(KERNELS_MARKER), getenv("OPENBLAS_CORETYPE"), picked, sizeof picked) ? picked
                                                                                                            : NULL;
}

const char *kernels_note(void) {
    static char note[192];
    const char *picked = kernels_openblas_picked();
    if (picked) {
        CpuFeatures f;
        cpu_features_read(&f);
        snprintf(note, sizeof note,
                 " (OpenBLAS chose %s for this CPU, family %d model %d; set OPENBLAS_CORETYPE to choose)", picked,
                 f.family, f.model);
        return note;
    }
    return getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE from the environment)" : "";
}
