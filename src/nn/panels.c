/* panels: see panels.h. */
#include "nn/panels.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nn/profile.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define PANELS_BUILT 1
#else
#define PANELS_BUILT 0 /* no kernel here (32-bit x86 has the features but not this build of it) */
#endif

int panels_can_run(const CpuFeatures *f) { return PANELS_BUILT && f->avx2 && f->fma && f->os_ymm; }

int panels_rule(const CpuFeatures *f, const char *kernels) {
    int rank = kernels ? kernels_rank(kernels) : -1;
    /* Zen 4 (AMD family 25 with AVX-512) runs a 512-bit instruction as two 256-bit halves:
     * OpenBLAS's AVX-512 sets gain no width there, and the panels, which pack nothing at a
     * step, decode faster (the Multi30k model on 2 cores, Cooperlake kernels: greedy 710-811
     * sentences/s against 619-639 by sgemm, beam 5 199 against 141) */
    int zen4 = strcmp(f->vendor, "AuthenticAMD") == 0 && f->family == 25 && f->avx512f;
    return panels_can_run(f) && rank >= 0 && (rank <= 2 || zen4);
}

static int enabled;
static pthread_once_t decided = PTHREAD_ONCE_INIT;

static void decide(void) {
    CpuFeatures f;
    cpu_features_read(&f);
    const char *env = getenv("QKV_DECODE_PANELS");
    if (env && strcmp(env, "0") == 0) enabled = 0;
    else if (env && strcmp(env, "1") == 0) enabled = panels_can_run(&f);
    else enabled = panels_rule(&f, openblas_get_corename());
}

int panels_enabled(void) {
    pthread_once(&decided, decide); /* a server's workers may ask first at once */
    return enabled;
}

static int panel_count(int N) { return (N + PANEL_COLS - 1) / PANEL_COLS; }

size_t panels_floats(int K, int N) { return (size_t)panel_count(N) * PANEL_COLS * (size_t)K; }

void panels_pack(float *panels, const float *w, int K, int N) {
    for (int p = 0; p < panel_count(N); p++)
        for (int k = 0; k < K; k++) {
            float *dst = panels + ((size_t)p * K + k) * PANEL_COLS;
            for (int j = 0; j < PANEL_COLS; j++) {
                int c = p * PANEL_COLS + j;
                dst[j] = c < N ? w[(size_t)k * N + c] : 0.0f;
            }
        }
}

void panels_pack_transposed(float *panels, const float *wt, int K, int N) {
    for (int p = 0; p < panel_count(N); p++)
        for (int j = 0; j < PANEL_COLS; j++) {
            int c = p * PANEL_COLS + j;
            for (int k = 0; k < K; k++)
                panels[((size_t)p * K + k) * PANEL_COLS + j] = c < N ? wt[(size_t)c * K + k] : 0.0f;
        }
}

#if PANELS_BUILT
#include <immintrin.h>

#define PANELS_TARGET __attribute__((target("avx2,fma")))

/* Rows r < R of x (row stride K) times one panel: 2R accumulators of 8 columns, named (an
 * array of them went through the stack at every k), and R a constant in each caller, so
 * the rows past R compile away. Each accumulator is one chain of fused multiply-adds over
 * k in order. The result goes to out (row stride ldo), ncol <= 16 columns of it. Row k of
 * the panel is one cache line; the same line of `next` (the panel after this one, or this
 * one at the end) is fetched meanwhile: without it the loads of the panel waited on L2
 * and L3 (a step's 12 MB of weights do not stay nearer), and a step's products of the
 * Multi30k model ran 5-20% slower on a Zen 3 (at 60 and 20 rows). */
static inline __attribute__((always_inline)) PANELS_TARGET void tile(const int R, float *out, int ldo, const float *x,
                                                                     int K, const float *panel, const float *next,
                                                                     const float *bias, int ncol) {
    __m256 z = _mm256_setzero_ps();
    __m256 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z, c41 = z, c50 = z, c51 = z;
    /* rows past R point at row 0: never read, and no pointer past the rows is formed */
    const float *x0 = x, *x1 = R > 1 ? x + (size_t)K : x, *x2 = R > 2 ? x + 2 * (size_t)K : x,
                *x3 = R > 3 ? x + 3 * (size_t)K : x, *x4 = R > 4 ? x + 4 * (size_t)K : x,
                *x5 = R > 5 ? x + 5 * (size_t)K : x;
    for (int k = 0; k < K; k++) {
        __m256 b0 = _mm256_loadu_ps(panel + (size_t)k * PANEL_COLS),
               b1 = _mm256_loadu_ps(panel + (size_t)k * PANEL_COLS + 8);
        __m256 a;
        _mm_prefetch((const char *)(next + (size_t)k * PANEL_COLS), _MM_HINT_T0);
#define ROW(r)                                     \
    if (R > r) {                                   \
        a = _mm256_broadcast_ss(x##r + k);         \
        c##r##0 = _mm256_fmadd_ps(a, b0, c##r##0); \
        c##r##1 = _mm256_fmadd_ps(a, b1, c##r##1); \
    }
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
    }
    float held[PANEL_COLS];
#define STORE(r)                                                                                \
    if (R > r) {                                                                                \
        if (bias)                                                                               \
            c##r##0 = _mm256_add_ps(c##r##0, _mm256_loadu_ps(bias)),                            \
            c##r##1 = _mm256_add_ps(c##r##1, _mm256_loadu_ps(bias + 8));                        \
        float *o = out + (size_t)r * ldo;                                                       \
        if (ncol == PANEL_COLS) _mm256_storeu_ps(o, c##r##0), _mm256_storeu_ps(o + 8, c##r##1); \
        else {                                                                                  \
            _mm256_storeu_ps(held, c##r##0), _mm256_storeu_ps(held + 8, c##r##1);               \
            memcpy(o, held, sizeof(float) * (size_t)ncol);                                      \
        }                                                                                       \
    }
    STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
#undef STORE
}

enum { TILE_ROWS = 6 };

/* Panels in groups that stay in L2 while every tile of rows passes over them, so a tile's
 * rows stay in L1 across the group. On a Zen 3 (512 KiB of L2), a step's products of the
 * Multi30k model at 60 and at 20 rows: 128 and 256 KiB about equal, 64 KiB up to 30%
 * slower, one panel at a time (the rows inside it) up to half as fast. */
enum { GROUP_BYTES = 128 << 10 };

PANELS_TARGET void panels_product(float *out, const float *x, const float *panels, const float *bias, int M, int K,
                                  int N) {
    double t0 = prof_start();
    int np = panel_count(N), group = (int)(GROUP_BYTES / ((size_t)K * PANEL_COLS * sizeof(float)));
    if (group < 1) group = 1;
    for (int p0 = 0; p0 < np; p0 += group) {
        int p1 = p0 + group < np ? p0 + group : np;
        for (int i = 0; i < M; i += TILE_ROWS) {
            const float *xi = x + (size_t)i * K;
            float *oi = out + (size_t)i * N;
            for (int p = p0; p < p1; p++) {
                int j0 = p * PANEL_COLS, ncol = N - j0 < PANEL_COLS ? N - j0 : PANEL_COLS;
                const float *panel = panels + (size_t)p * K * PANEL_COLS, *b = NULL;
                const float *next = p + 1 < np ? panel + (size_t)K * PANEL_COLS : panel;
                float last_bias[PANEL_COLS] = {0};
                if (bias && ncol == PANEL_COLS) b = bias + j0;
                else if (bias) memcpy(last_bias, bias + j0, sizeof(float) * (size_t)ncol), b = last_bias;
                switch (M - i < TILE_ROWS ? M - i : TILE_ROWS) {
                case 6: tile(6, oi + j0, N, xi, K, panel, next, b, ncol); break;
                case 5: tile(5, oi + j0, N, xi, K, panel, next, b, ncol); break;
                case 4: tile(4, oi + j0, N, xi, K, panel, next, b, ncol); break;
                case 3: tile(3, oi + j0, N, xi, K, panel, next, b, ncol); break;
                case 2: tile(2, oi + j0, N, xi, K, panel, next, b, ncol); break;
                default: tile(1, oi + j0, N, xi, K, panel, next, b, ncol); break;
                }
            }
        }
    }
    prof_stop(PROF_MATMUL, t0);
}

#else /* no kernel built: panels_can_run() and so panels_enabled() are 0, and this is never called */
void panels_product(float *out, const float *x, const float *panels, const float *bias, int M, int K, int N) {
    (void)out, (void)x, (void)panels, (void)bias, (void)M, (void)K, (void)N;
    abort();
}
#endif
