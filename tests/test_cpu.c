/* Which of OpenBLAS's kernel sets qkv runs (util/cpu.h): the decision on a table of CPUs,
 * the marker a process started again carries, the note on the line that names the
 * kernels, and the CPUID reader against what Linux says of this CPU. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nn/panels.h"
#include "util/cpu.h"

/* feature sets, as CPUID and XGETBV report them */
enum { SSE, AVX, AVX2, AVX512, AVX512_BF16 };
static CpuFeatures cpu(const char *vendor, int family, int model, int level, int os_zmm) {
    CpuFeatures f = {.family = family, .model = model};
    strcpy(f.vendor, vendor);
    f.os_ymm = level >= AVX;
    f.avx = level >= AVX;
    f.avx2 = f.fma = level >= AVX2;
    f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = level >= AVX512;
    f.avx512_bf16 = level >= AVX512_BF16;
    f.os_zmm = level >= AVX512 && os_zmm;
    return f;
}

typedef struct {
    const char *what;
    CpuFeatures f;
    const char *picked; /* what OpenBLAS 0.3.21 picks there (or another library, said so) */
    const char *env;    /* OPENBLAS_CORETYPE, NULL when not set */
    const char *want;   /* what qkv runs instead; NULL: OpenBLAS's choice stands */
} Case;

static void test_kernels_choose_table(void) {
    CpuFeatures emerald = cpu("GenuineIntel", 6, 207, AVX512_BF16, 1);
    emerald.amx_tile = 1;
    CpuFeatures no_ymm = cpu("GenuineIntel", 6, 183, AVX2, 0); /* an OS that saves SSE state only */
    no_ymm.os_ymm = 0;
    const Case cases[] = {
        /* family 6 model 207 (0xCF: extended model 12, which 0.3.21's switch lacks, so it
         * falls through to the Pentium 4 case): Prescott, on a CPU with AVX-512, BF16, AMX */
        {"Xeon family 6 model 207", emerald, "Prescott", NULL, "Cooperlake"},
        {"the same, OPENBLAS_CORETYPE=Prescott by the user", emerald, "Prescott", "Prescott", NULL},
        {"the same, OPENBLAS_CORETYPE set empty", emerald, "Prescott", "", NULL},
        {"the same, name in other case", emerald, "prescott", NULL, "Cooperlake"},
        /* Raptor Lake (0xB7): AVX2 and FMA, no AVX-512; 0.3.21 falls through to Prescott */
        {"Core family 6 model 183", cpu("GenuineIntel", 6, 183, AVX2, 0), "Prescott", NULL, "Haswell"},
        /* AVX-512 on the CPU, but the OS does not save the ZMM and opmask state */
        {"AVX-512 without ZMM state", cpu("GenuineIntel", 6, 207, AVX512_BF16, 0), "Prescott", NULL, "Haswell"},
        {"AVX-512 without ZMM state, Haswell picked", cpu("GenuineIntel", 6, 207, AVX512_BF16, 0), "Haswell", NULL,
         NULL},
        {"AVX2 without YMM state", no_ymm, "Prescott", NULL, NULL},
        /* SSE only (an Atom, Goldmont 0x5C): nothing better to run */
        {"SSE-only CPU", cpu("GenuineIntel", 6, 92, SSE, 0), "Prescott", NULL, NULL},
        /* AVX without AVX2 (Sandy Bridge): left alone */
        {"AVX-only CPU", cpu("GenuineIntel", 6, 42, AVX, 0), "Prescott", NULL, NULL},
        {"AVX2 CPU, Sandybridge picked", cpu("GenuineIntel", 6, 183, AVX2, 0), "Sandybridge", NULL, "Haswell"},
        /* sets that already use what the CPU has */
        {"Haswell on Haswell", cpu("GenuineIntel", 6, 63, AVX2, 0), "Haswell", NULL, NULL},
        {"Zen 3 (family 25 model 1), Zen", cpu("AuthenticAMD", 25, 1, AVX2, 0), "Zen", NULL, NULL},
        {"Skylake-SP, SkylakeX", cpu("GenuineIntel", 6, 85, AVX512, 1), "SkylakeX", NULL, NULL},
        /* Zen 4 (family 25 model 17): 0.3.21 gives family 25 with AVX-512 and BF16
         * Cooperlake itself; where a library picks Zen there, its AVX2 set, Cooperlake's
         * AVX-512 kernels run correctly and are OpenBLAS's own choice for the CPU */
        {"Zen 4, Cooperlake", cpu("AuthenticAMD", 25, 17, AVX512_BF16, 1), "Cooperlake", NULL, NULL},
        {"Zen 4, Zen", cpu("AuthenticAMD", 25, 17, AVX512_BF16, 1), "Zen", NULL, "Cooperlake"},
        /* Zen 5 (family 26 model 2): 0.3.21 knows no family 26 and falls back on features:
         * Cooperlake; a user's OPENBLAS_CORETYPE=Haswell there stands */
        {"Zen 5, Cooperlake", cpu("AuthenticAMD", 26, 2, AVX512_BF16, 1), "Cooperlake", NULL, NULL},
        {"Zen 5, OPENBLAS_CORETYPE=Haswell", cpu("AuthenticAMD", 26, 2, AVX512_BF16, 1), "Haswell", "Haswell", NULL},
        {"Zen 5, Prescott", cpu("AuthenticAMD", 26, 2, AVX512_BF16, 1), "Prescott", NULL, "Cooperlake"},
        /* names not known here, and sets above what 0.3.21 has, are left alone */
        {"unknown name", emerald, "Unknown", NULL, NULL},
        {"a later library's set", emerald, "SapphireRapids", NULL, NULL},
        {"no name", emerald, NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const Case *c = &cases[i];
        const char *got = kernels_choose(c->picked, &c->f, c->env);
        CHECK((got == NULL) == (c->want == NULL) && (!got || strcmp(got, c->want) == 0), "%s: %s, want %s", c->what,
              got ? got : "(OpenBLAS's choice)", c->want ? c->want : "(OpenBLAS's choice)");
        /* never a set the CPU cannot run, never a weaker one */
        if (got) CHECK(kernels_rank(got) > kernels_rank(c->picked), "%s: %s is no upgrade", c->what, got);
    }
}

/* Where decoding multiplies by panels (nn/panels.h): an AVX2 and FMA CPU while OpenBLAS
 * runs a set no wider than AVX2; OpenBLAS's own AVX-512 kernels stay. */
static void test_panels_rule_table(void) {
    CpuFeatures no_ymm = cpu("GenuineIntel", 6, 183, AVX2, 0);
    no_ymm.os_ymm = 0;
    struct {
        const char *what;
        CpuFeatures f;
        const char *kernels;
        int want;
    } cases[] = {
        {"Zen 3, Zen", cpu("AuthenticAMD", 25, 1, AVX2, 0), "Zen", 1},
        {"Haswell, Haswell", cpu("GenuineIntel", 6, 63, AVX2, 0), "Haswell", 1},
        {"AVX2 CPU left on Prescott by the user", cpu("GenuineIntel", 6, 183, AVX2, 0), "Prescott", 1},
        {"Xeon family 6 model 207, Cooperlake", cpu("GenuineIntel", 6, 207, AVX512_BF16, 1), "Cooperlake", 0},
        {"Skylake-SP, SkylakeX", cpu("GenuineIntel", 6, 85, AVX512, 1), "SkylakeX", 0},
        {"Zen 5 with OPENBLAS_CORETYPE=Haswell", cpu("AuthenticAMD", 26, 2, AVX512_BF16, 1), "Haswell", 1},
        /* Zen 4 runs 512-bit instructions in halves: the panels decode faster there */
        {"Zen 4, Cooperlake", cpu("AuthenticAMD", 25, 17, AVX512_BF16, 1), "Cooperlake", 1},
        {"Zen 4, SkylakeX", cpu("AuthenticAMD", 25, 17, AVX512_BF16, 1), "SkylakeX", 1},
        {"Zen 4, a name not known here", cpu("AuthenticAMD", 25, 17, AVX512_BF16, 1), "Zen9", 0},
        {"Zen 5, Cooperlake", cpu("AuthenticAMD", 26, 2, AVX512_BF16, 1), "Cooperlake", 0},
        {"a later library's set", cpu("GenuineIntel", 6, 207, AVX512_BF16, 1), "SapphireRapids", 0},
        {"a name not known here", cpu("AuthenticAMD", 25, 1, AVX2, 0), "Zen9", 0},
        {"no name", cpu("AuthenticAMD", 25, 1, AVX2, 0), NULL, 0},
        {"AVX-only CPU", cpu("GenuineIntel", 6, 42, AVX, 0), "Sandybridge", 0},
        {"SSE-only CPU", cpu("GenuineIntel", 6, 92, SSE, 0), "Prescott", 0},
        {"AVX2 without YMM state", no_ymm, "Prescott", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int got = panels_rule(&cases[i].f, cases[i].kernels);
        CHECK(got == cases[i].want, "%s: panels %s, want %s", cases[i].what, got ? "taken" : "not taken",
              cases[i].want ? "taken" : "not taken");
    }
}

static void test_kernels_rank_orders_the_sets(void) {
    const char *order[][2] =
        {{"Prescott", "Sandybridge"}, {"Nehalem", "Sandybridge"}, {"Core2", "Piledriver"},
         {"Sandybridge", "Haswell"},  {"Excavator", "Zen"},       {"Haswell", "SkylakeX"},
         {"Zen", "SkylakeX"},         {"SkylakeX", "Cooperlake"}, {"Cooperlake", "SapphireRapids"}};
    for (size_t i = 0; i < sizeof order / sizeof *order; i++)
        CHECK(kernels_rank(order[i][0]) >= 0 && kernels_rank(order[i][0]) < kernels_rank(order[i][1]),
              "%s (%d) should rank below %s (%d)", order[i][0], kernels_rank(order[i][0]), order[i][1],
              kernels_rank(order[i][1]));
    CHECK(kernels_rank("Haswell") == kernels_rank("Zen"), "Haswell and Zen both use AVX2 and FMA");
    CHECK(kernels_rank("Prescott") == 0 && kernels_rank("Atom") == 0 && kernels_rank("Dunnington") == 0, "SSE sets");
    CHECK(kernels_rank("haswell") == kernels_rank("Haswell"), "case matters");
    CHECK(kernels_rank("Unknown") < 0 && kernels_rank("") < 0 && kernels_rank(NULL) < 0, "unknown names rank");
}

static void test_kernels_marker(void) {
    char picked[16] = "x";
    CHECK(kernels_marker_match("Prescott:Cooperlake", "Cooperlake", picked, sizeof picked) == 1 &&
              strcmp(picked, "Prescott") == 0,
          "the marker with its set in OPENBLAS_CORETYPE: '%s'", picked);
    CHECK(!kernels_marker_match("Prescott:Cooperlake", "Haswell", picked, sizeof picked),
          "OPENBLAS_CORETYPE changed since: the user's");
    CHECK(!kernels_marker_match("Prescott:Cooperlake", NULL, picked, sizeof picked), "no OPENBLAS_CORETYPE");
    CHECK(!kernels_marker_match("Prescott:Cooperlake", "Cooperlake2", picked, sizeof picked), "a longer name");
    CHECK(!kernels_marker_match(NULL, "Cooperlake", picked, sizeof picked), "no marker");
    CHECK(!kernels_marker_match("Prescott", "Prescott", picked, sizeof picked), "a marker without ':'");
    CHECK(!kernels_marker_match(":Cooperlake", "Cooperlake", picked, sizeof picked), "a marker without a choice");
    CHECK(kernels_marker_match("AVeryLongKernelSetName:Haswell", "Haswell", picked, 8) == 1 &&
              strcmp(picked, "AVeryLo") == 0,
          "cut to fit: '%s'", picked);
}

/* sets name to value (NULL: unsets it) */
static void put_env(const char *name, const char *value) {
    if (value) setenv(name, value, 1);
    else unsetenv(name);
}

static void test_kernels_note(void) {
    char *saved_core = getenv("OPENBLAS_CORETYPE") ? strdup(getenv("OPENBLAS_CORETYPE")) : NULL;
    char *saved_marker = getenv(KERNELS_MARKER) ? strdup(getenv(KERNELS_MARKER)) : NULL;
    CpuFeatures f;
    cpu_features_read(&f);
    char want[192], chosen[192], user[192], none[192];
    snprintf(want, sizeof want,
             " (OpenBLAS chose Prescott for this CPU, family %d model %d; set OPENBLAS_CORETYPE to choose)", f.family,
             f.model);
    put_env("OPENBLAS_CORETYPE", "Haswell"), put_env(KERNELS_MARKER, "Prescott:Haswell");
    snprintf(chosen, sizeof chosen, "%s", kernels_note());
    int picked_ok = kernels_openblas_picked() && strcmp(kernels_openblas_picked(), "Prescott") == 0;
    put_env("OPENBLAS_CORETYPE", "Zen");
    snprintf(user, sizeof user, "%s", kernels_note());
    int picked_none = kernels_openblas_picked() == NULL;
    put_env("OPENBLAS_CORETYPE", NULL);
    snprintf(none, sizeof none, "%s", kernels_note());
    put_env("OPENBLAS_CORETYPE", saved_core), put_env(KERNELS_MARKER, saved_marker);
    free(saved_core), free(saved_marker);
    CHECK(strcmp(chosen, want) == 0 && picked_ok, "qkv's choice: '%s'", chosen);
    CHECK(strcmp(user, " (OPENBLAS_CORETYPE from the environment)") == 0 && picked_none, "the user's: '%s'", user);
    CHECK(strcmp(none, "") == 0, "OpenBLAS's own: '%s'", none);
}

/* the value of "key : value" in /proc/cpuinfo's first CPU, or "" */
static void cpuinfo(const char *key, char *out, size_t size) {
    out[0] = '\0';
    FILE *fp = fopen("/proc/cpuinfo", "r");
    char line[8192];
    while (fp && fgets(line, sizeof line, fp)) {
        char *colon = strchr(line, ':');
        size_t n = strlen(key);
        if (!colon || strncmp(line, key, n) != 0 || (line[n] != ' ' && line[n] != '\t')) continue;
        snprintf(out, size, " %s", colon + 1 + strspn(colon + 1, " \t"));
        out[strcspn(out, "\n")] = ' ';
        break;
    }
    if (fp) fclose(fp);
}

static int has_flag(const char *flags, const char *flag) {
    char word[64];
    snprintf(word, sizeof word, " %s ", flag);
    return strstr(flags, word) != NULL;
}

static void test_cpu_features_read_this_cpu(void) {
#if defined(__x86_64__) || defined(__i386__)
    CpuFeatures f;
    cpu_features_read(&f);
    static char flags[8192];
    char family[64], model[64];
    cpuinfo("flags", flags, sizeof flags);
    cpuinfo("cpu family", family, sizeof family);
    cpuinfo("model", model, sizeof model);
    if (!flags[0]) {
        fprintf(stderr, "  note: no /proc/cpuinfo flags here: only the plain checks\n");
    } else {
        CHECK(f.family == atoi(family) && f.model == atoi(model), "family %d model %d, /proc/cpuinfo says%s/%s",
              f.family, f.model, family, model);
        /* Linux lists a vector extension only where the OS saves its registers */
        const struct {
            const char *flag;
            int got;
        } bits[] = {{"avx", f.avx && f.os_ymm},           {"fma", f.fma && f.os_ymm},
                    {"avx2", f.avx2 && f.os_ymm},         {"avx512f", f.avx512f && f.os_zmm},
                    {"avx512bw", f.avx512bw && f.os_zmm}, {"avx512dq", f.avx512dq && f.os_zmm},
                    {"avx512vl", f.avx512vl && f.os_zmm}, {"avx512_bf16", f.avx512_bf16 && f.os_zmm}};
        for (size_t i = 0; i < sizeof bits / sizeof *bits; i++)
            CHECK(bits[i].got == has_flag(flags, bits[i].flag), "%s: CPUID says %d, /proc/cpuinfo %d", bits[i].flag,
                  bits[i].got, has_flag(flags, bits[i].flag));
    }
    CHECK(strcmp(f.vendor, "GenuineIntel") == 0 || strcmp(f.vendor, "AuthenticAMD") == 0 ||
              strcmp(f.vendor, "HygonGenuine") == 0 || strlen(f.vendor) == 12,
          "vendor '%s'", f.vendor);
    CHECK(f.family >= 6, "family %d: an x86-64 CPU is family 6 or later", f.family);
    CHECK(!f.os_zmm || f.os_ymm, "ZMM state without YMM state");
    CHECK(!f.avx2 || f.avx, "AVX2 without AVX");
#else
    fprintf(stderr, "  note: not an x86 CPU: nothing to read\n");
#endif
}

const TestCase cpu_tests[] = {
    {"kernels_choose_table", test_kernels_choose_table},
    {"kernels_rank_orders_the_sets", test_kernels_rank_orders_the_sets},
    {"panels_rule_table", test_panels_rule_table},
    {"kernels_marker_names_qkv_s_choice", test_kernels_marker},
    {"kernels_note_says_who_chose", test_kernels_note},
    {"cpu_features_read_this_cpu", test_cpu_features_read_this_cpu},
    {NULL, NULL},
};
