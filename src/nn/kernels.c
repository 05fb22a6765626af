/* kernels: see kernels.h. Matrix products go to OpenBLAS; the rest are plain loops. */
#include "nn/kernels.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/resource.h>

#include "nn/panels.h"
#include "nn/profile.h"
#include "nn/vecmath.h"
#include "util/err.h"
#include "util/rng.h"

/* a buffer, a stack and slack for each thread that multiplies, and the rest of qkv (its
 * libraries, a small model): measured on Debian 12's OpenBLAS 0.3.21, with room */
#define BLAS_BYTES_PER_CALLER (160ull << 20)
#define BLAS_BASE_BYTES (256ull << 20)

int blas_room_check(int callers) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
    unsigned long long need = BLAS_BASE_BYTES + (unsigned long long)(callers > 0 ? callers : 1) * BLAS_BYTES_PER_CALLER;
    if ((unsigned long long)rl.rlim_cur >= need) return 0;
    err_set("the address-space limit (ulimit -v) is %llu MiB, and %d thread%s multiplying matrices "
            "need%s at least %llu MiB (OpenBLAS maps a 128 MiB buffer for each): raise the limit%s",
            (unsigned long long)rl.rlim_cur >> 20, callers, callers == 1 ? "" : "s", callers == 1 ? "s" : "",
            need >> 20, callers > 1 ? ", or use fewer threads" : "");
    return err_io(ENOMEM);
}

void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int Cin, int Cout) {
    double t0_ = prof_start();
    if (bias) {
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * Cout, bias, sizeof(float) * (size_t)Cout);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Cout, Cin, 1.0f, inp, Cin, w, Cout, bias ? 1.0f : 0.0f,
                out, Cout);
    prof_stop(PROF_MATMUL, t0_);
}

void matmul_forward_with(float *out, const float *inp, const float *w, const float *w_panels, const float *bias, int N,
                         int Cin, int Cout) {
    if (w_panels) panels_product(out, inp, w_panels, bias, N, Cin, Cout);
    else matmul_forward(out, inp, w, bias, N, Cin, Cout);
}

/* dinp = dout . w^T + dinp_beta * dinp, and the weight and bias gradients added to */
static void matmul_backward_beta(float *dinp, float dinp_beta, float *dw, float *dbias, const float *dout,
                                 const float *inp, const float *w, int N, int Cin, int Cout) {
    double t0_ = prof_start();
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, Cin, Cout, 1.0f, dout, Cout, w, Cout, dinp_beta, dinp,
                    Cin);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Cin, Cout, N, 1.0f, inp, Cin, dout, Cout, 1.0f, dw, Cout);
    if (dbias) {
        for (int n = 0; n < N; n++) {
            const float *row = dout + (size_t)n * Cout;
            for (int c = 0; c < Cout; c++) dbias[c] += row[c];
        }
    }
    prof_stop(PROF_MATMUL, t0_);
}

void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w, int N,
                     int Cin, int Cout) {
    matmul_backward_beta(dinp, 1.0f, dw, dbias, dout, inp, w, N, Cin, Cout);
}

void matmul_backward_set(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                         int N, int Cin, int Cout) {
    matmul_backward_beta(dinp, 0.0f, dw, dbias, dout, inp, w, N, Cin, Cout);
}

void logits_forward(float *out, const float *inp, const float *table, int N, int C, int V) {
    double t0_ = prof_start();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, V, C, 1.0f, inp, C, table, C, 0.0f, out, V);
    prof_stop(PROF_MATMUL, t0_);
}

void logits_forward_by_column(float *out, const float *inp, const float *table_t, int N, int C, int V) {
    double t0_ = prof_start();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, V, C, 1.0f, inp, C, table_t, V, 0.0f, out, V);
    prof_stop(PROF_MATMUL, t0_);
}

void table_turn(float *table_t, const float *table, int V, int C) {
    enum { TILE = 32 }; /* 32 rows of 32 floats read, 32 columns written: both in L1 */
    for (int v0 = 0; v0 < V; v0 += TILE)
        for (int c0 = 0; c0 < C; c0 += TILE) {
            int v1 = v0 + TILE < V ? v0 + TILE : V, c1 = c0 + TILE < C ? c0 + TILE : C;
            for (int v = v0; v < v1; v++)
                for (int c = c0; c < c1; c++) table_t[(size_t)c * V + v] = table[(size_t)v * C + c];
        }
}

void logits_backward(float *dinp, float *dtable, const float *dout, const float *inp, const float *table, int N, int C,
                     int V) {
    double t0_ = prof_start();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, V, 1.0f, dout, V, table, C, 1.0f, dinp, C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, N, 1.0f, dout, V, inp, C, 1.0f, dtable, C);
    prof_stop(PROF_MATMUL, t0_);
}

void softmax_forward(float *p, const float *s, int cols, int valid) {
    float maxv = vec_max(s, valid);
    vec_exp(p, s, maxv, valid);
    float sum = vec_sum(p, valid);
    float inv = valid > 0 ? 1.0f / sum : 0.0f;
    for (int j = 0; j < valid; j++) p[j] *= inv;
    for (int j = valid; j < cols; j++) p[j] = 0.0f;
}

void softmax_backward(float *ds, const float *dp, const float *p, int cols) {
    float dot = vec_dot(dp, p, cols);
    for (int j = 0; j < cols; j++) ds[j] = p[j] * (dp[j] - dot);
}

#define LN_EPS 1e-5f /* PyTorch's default, so weights move between the two unchanged */

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *gamma, const float *beta,
                       int N, int C) {
    double t0_ = prof_start();
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float m = vec_sum(x, C) / (float)C;
        float v = vec_sum_sq_dev(x, m, C) / (float)C;
        float r = 1.0f / sqrtf(v + LN_EPS);
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * gamma[c] + beta[c];
        mean[n] = m;
        rstd[n] = r;
    }
    prof_stop(PROF_LAYERNORM, t0_);
}

/* dx = r * (g - mean(g) - xhat * mean(g * xhat)), with g = dy * gamma and xhat = (x - m) * r;
 * the two sums in lanes as vecmath.h's. in_place: dx is dy, and is overwritten (each
 * element's dy read before its dx is written); else dx is added to. */
static inline void layernorm_backward_row(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                                          const float *gamma, float m, float r, int C, int in_place) {
    float gsum = vec_dot(dy, gamma, C) / (float)C, gxsum = vec_dot_normed(dy, gamma, x, m, r, C) / (float)C;
    for (int c = 0; c < C; c++) {
        float xhat = (x[c] - m) * r;
        dgamma[c] += dy[c] * xhat;
        dbeta[c] += dy[c];
    }
    if (in_place) {
        /* through one pointer: dx and dy as two would fail the compiler's overlap check
         * and send the loop down its scalar path */
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            dx[c] = r * (dx[c] * gamma[c] - gsum - xhat * gxsum);
        }
        return;
    }
    for (int c = 0; c < C; c++) {
        float xhat = (x[c] - m) * r;
        dx[c] += r * (dy[c] * gamma[c] - gsum - xhat * gxsum);
    }
}

static void layernorm_backward_rows(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                    const float *gamma, const float *mean, const float *rstd, int N, int C,
                                    int in_place) {
    double t0_ = prof_start();
    for (int n = 0; n < N; n++)
        layernorm_backward_row(dinp + (size_t)n * C, dgamma, dbeta, dout + (size_t)n * C, inp + (size_t)n * C, gamma,
                               mean[n], rstd[n], C, in_place);
    prof_stop(PROF_LAYERNORM, t0_);
}

void layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                        const float *gamma, const float *mean, const float *rstd, int N, int C) {
    layernorm_backward_rows(dinp, dgamma, dbeta, dout, inp, gamma, mean, rstd, N, C, 0);
}

void layernorm_backward_inplace(float *d, float *dgamma, float *dbeta, const float *inp, const float *gamma,
                                const float *mean, const float *rstd, int N, int C) {
    layernorm_backward_rows(d, dgamma, dbeta, d, inp, gamma, mean, rstd, N, C, 1);
}

void relu_forward(float *out, const float *inp, size_t n) {
    double t0_ = prof_start();
    for (size_t i = 0; i < n; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
    prof_stop(PROF_ELEMENTWISE, t0_);
}

void relu_backward(float *dinp, const float *dout, const float *out, size_t n) {
    double t0_ = prof_start();
    for (size_t i = 0; i < n; i++) dinp[i] = out[i] > 0.0f ? dout[i] : 0.0f;
    prof_stop(PROF_ELEMENTWISE, t0_);
}

/* The k-th (0..3) of the four 16-bit uniforms one hash gives: its bits 16k .. 16k+15. */
static inline uint16_t hash_uniform(uint64_t h, size_t k) { return (uint16_t)(h >> (16 * k)); }

/* One element of a dropout, given its uniform: kept (scaled) or 0, plus the residual's
 * element when with_res (a constant wherever this is inlined). The input is read either
 * way: a conditional load would keep the loops from vectorising. */
static inline void dropout_one(float *out, uint8_t *mask, const float *inp, const float *res, int with_res, size_t i,
                               uint16_t uniform, uint32_t threshold, float keep_scale) {
    uint8_t keep = uniform >= threshold;
    float scaled = inp[i] * keep_scale, kept = keep ? scaled : 0.0f;
    mask[i] = keep;
    out[i] = with_res ? kept + res[i] : kept;
}

#define DROPOUT_BLOCK 256 /* elements whose uniforms are drawn before they are used */

/* Elements 0 .. n4-1 (n4 a multiple of 4), offset a multiple of 4: whole groups of four,
 * one hash each. */
static inline __attribute__((always_inline)) void dropout_groups(float *out, uint8_t *mask, const float *inp,
                                                                 const float *res, int with_res, size_t n4,
                                                                 uint64_t key, size_t offset, uint32_t threshold,
                                                                 float keep_scale) {
    /* A block's hashes first, each cut into its four 16-bit uniforms, then the block's
     * elements against them: loops that vectorise plainly, where one loop doing both
     * spread each hash over four elements by shuffles and ran at half the speed */
    uint64_t h[DROPOUT_BLOCK / 4];
    uint16_t u[DROPOUT_BLOCK];
    for (size_t at = 0; at < n4; at += DROPOUT_BLOCK) {
        size_t len = n4 - at < DROPOUT_BLOCK ? n4 - at : DROPOUT_BLOCK;
        for (size_t g = 0; g < len / 4; g++) h[g] = hash64(key, offset + at + 4 * g);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(u, h, sizeof(uint16_t) * len); /* hash_uniform(h, k) is a hash's k-th 16-bit word */
#else
        for (size_t i = 0; i < len; i++) u[i] = hash_uniform(h[i / 4], i % 4);
#endif
        for (size_t i = 0; i < len; i++)
            dropout_one(out + at, mask + at, inp + at, with_res ? res + at : NULL, with_res, i, u[i], threshold,
                        keep_scale);
    }
}

/* The mask loop of both dropouts: dropout(inp), or with_res dropout(inp) + res. One 64-bit
 * hash of (key, g rounded down to 4) gives four 16-bit uniforms, for batch elements
 * g .. g+3; a resolution of 1/65536 is plenty for p. Inlined into each caller with
 * with_res a constant. */
static inline __attribute__((always_inline)) void dropout_rows(float *out, uint8_t *mask, const float *inp,
                                                               const float *res, int with_res, size_t n, float p,
                                                               uint64_t key, size_t offset) {
    float keep_scale = dropout_scale(p);
    uint32_t threshold = (uint32_t)(p * 65536.0f);
    size_t head = (4 - (offset & 3)) & 3; /* the rest of a group begun before out[0] */
    if (head > n) head = n;
    for (size_t i = 0; i < head; i++)
        dropout_one(out, mask, inp, res, with_res, i,
                    hash_uniform(hash64(key, (offset + i) & ~(size_t)3), (offset + i) & 3), threshold, keep_scale);
    size_t n4 = (n - head) & ~(size_t)3;
    dropout_groups(out + head, mask + head, inp + head, with_res ? res + head : NULL, with_res, n4, key, offset + head,
                   threshold, keep_scale);
    for (size_t i = head + n4; i < n; i++) /* the first elements of a group that goes on past out[n-1] */
        dropout_one(out, mask, inp, res, with_res, i,
                    hash_uniform(hash64(key, (offset + i) & ~(size_t)3), (offset + i) & 3), threshold, keep_scale);
}

void dropout_forward(float *out, uint8_t *mask, const float *inp, size_t n, float p, uint64_t key, size_t offset) {
    double t0_ = prof_start();
    if (p <= 0.0f) {
        memset(mask, 1, n);
        if (out != inp) memcpy(out, inp, sizeof(float) * n);
    } else {
        dropout_rows(out, mask, inp, NULL, 0, n, p, key, offset);
    }
    prof_stop(PROF_ELEMENTWISE, t0_);
}

void dropout_residual_forward(float *out, uint8_t *mask, const float *inp, const float *res, size_t n, float p,
                              uint64_t key, size_t offset) {
    double t0_ = prof_start();
    if (p <= 0.0f) {
        memset(mask, 1, n);
        for (size_t i = 0; i < n; i++) out[i] = inp[i] + res[i];
    } else {
        dropout_rows(out, mask, inp, res, 1, n, p, key, offset);
    }
    prof_stop(PROF_ELEMENTWISE, t0_);
}

void dropout_backward(float *dinp, const float *dout, const uint8_t *mask, size_t n, float p) {
    double t0_ = prof_start();
    float scale = dropout_scale(p);
    for (size_t i = 0; i < n; i++) dinp[i] = mask[i] ? dout[i] * scale : 0.0f;
    prof_stop(PROF_ELEMENTWISE, t0_);
}

void embedding_forward(float *out, const int *tokens, const float *table, const float *pos, float scale, int B, int T,
                       int C) {
    double t0_ = prof_start();
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t row = (size_t)b * T + t;
            const float *e = table + (size_t)tokens[row] * C, *pe = pos + (size_t)t * C;
            float *o = out + row * C;
            for (int c = 0; c < C; c++) o[c] = e[c] * scale + pe[c];
        }
    }
    prof_stop(PROF_EMBED_LOSS, t0_);
}

void embedding_backward(float *dtable, const float *dout, const int *tokens, float scale, int N, int C) {
    double t0_ = prof_start();
    for (int n = 0; n < N; n++) {
        float *de = dtable + (size_t)tokens[n] * C;
        const float *d = dout + (size_t)n * C;
        for (int c = 0; c < C; c++) de[c] += d[c] * scale;
    }
    prof_stop(PROF_EMBED_LOSS, t0_);
}

/* One row's logits gradient from its unnormalised probabilities p and the normaliser
 * inv (1 for probabilities already normalised: p * 1 is p, bit for bit): the label-
 * smoothed target distribution subtracted, times scale. d may be p. */
static void crossentropy_grad_row(float *d, const float *p, float inv, int target, int V, float eps, float scale) {
    float off = eps / (float)V;
    for (int v = 0; v < V; v++) {
        float q = p[v] * inv;
        d[v] = (q - off) * scale;
    }
    d[target] -= (1.0f - eps) * scale;
}

/* The forward's rows, and with backward set the backward's too: each row's softmax turned
 * into its gradient while the row is still in the cache. A chunk of logits (512 rows of a
 * real vocabulary: 16 MB) does not stay there between a forward over all rows and a
 * backward over all rows. The gradient is crossentropy_backward's (crossentropy_grad_row,
 * with the normaliser not yet applied), so the bits are the same. */
static double crossentropy_rows(float *out, const float *logits, const int *targets, int N, int V, float eps, int pad,
                                int backward, float scale, int *count, double *nll_out) {
    double t0_ = prof_start();
    double loss = 0.0, nll = 0.0;
    int counted = 0;
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float *p = out + (size_t)n * V;
        if (backward && targets[n] == pad) {
            memset(p, 0, sizeof(float) * (size_t)V);
            continue;
        }
        double zsum;
        float maxv = vec_max_sum_double(z, V, &zsum);
        float z_target = targets[n] == pad ? 0.0f : z[targets[n]]; /* read before probs overwrite it */
        vec_exp(p, z, maxv, V);
        double sum = vec_sum_double(p, V);
        float inv = (float)(1.0 / sum);
        if (backward) crossentropy_grad_row(p, p, inv, targets[n], V, eps, scale);
        else
            for (int v = 0; v < V; v++) p[v] *= inv;
        if (targets[n] == pad) continue;
        double logz = maxv + log(sum);
        double nll_row = logz - z_target;
        double uniform_row = logz - zsum / V; /* mean over classes of -log p */
        loss += (1.0 - eps) * nll_row + eps * uniform_row;
        nll += nll_row;
        counted++;
    }
    *count = counted;
    if (nll_out) *nll_out = nll;
    prof_stop(PROF_EMBED_LOSS, t0_);
    return loss;
}

double crossentropy_forward(float *probs, const float *logits, const int *targets, int N, int V, float eps, int pad,
                            int *count, double *nll_out) {
    return crossentropy_rows(probs, logits, targets, N, V, eps, pad, 0, 0.0f, count, nll_out);
}

double crossentropy_forward_backward(float *dlogits, const float *logits, const int *targets, int N, int V, float eps,
                                     int pad, float scale, int *count, double *nll_out) {
    return crossentropy_rows(dlogits, logits, targets, N, V, eps, pad, 1, scale, count, nll_out);
}

void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int N, int V, float eps, int pad,
                           float scale) {
    double t0_ = prof_start();
    for (int n = 0; n < N; n++) {
        float *d = dlogits + (size_t)n * V;
        if (targets[n] == pad) memset(d, 0, sizeof(float) * (size_t)V);
        else crossentropy_grad_row(d, probs + (size_t)n * V, 1.0f, targets[n], V, eps, scale);
    }
    prof_stop(PROF_EMBED_LOSS, t0_);
}

double classifier_forward_backward(const ClassifierScratch *s, const float *inp, const float *table, const int *targets,
                                   int N, int C, int V, float eps, int pad, int *count, double *nll_out, float *dinp,
                                   float *dtable, float scale) {
    double loss = 0.0, nll = 0.0;
    int counted = 0;
    for (int r = 0; r < N;) {
        int n = 0, c;
        double chunk_nll;
        double t0 = prof_start();
        for (; r < N && n < s->chunk; r++) {
            if (targets[r] == pad) continue;
            s->rows[n] = r, s->labels[n] = targets[r];
            memcpy(s->x + (size_t)n * C, inp + (size_t)r * C, sizeof(float) * (size_t)C);
            n++;
        }
        prof_stop(PROF_EMBED_LOSS, t0);
        if (n == 0) break;
        logits_forward(s->logits, s->x, table, n, C, V);
        if (dinp)
            loss += crossentropy_forward_backward(s->logits, s->logits, s->labels, n, V, eps, pad, scale, &c,
                                                  &chunk_nll);
        else loss += crossentropy_forward(s->logits, s->logits, s->labels, n, V, eps, pad, &c, &chunk_nll);
        nll += chunk_nll, counted += c;
        if (!dinp) continue;
        memset(s->dx, 0, sizeof(float) * (size_t)n * C);
        logits_backward(s->dx, dtable, s->logits, s->x, table, n, C, V);
        t0 = prof_start();
        for (int i = 0; i < n; i++) {
            float *d = dinp + (size_t)s->rows[i] * C;
            const float *g = s->dx + (size_t)i * C;
            for (int k = 0; k < C; k++) d[k] += g[k];
        }
        prof_stop(PROF_EMBED_LOSS, t0);
    }
    *count = counted;
    if (nll_out) *nll_out = nll;
    return loss;
}

void positional_table(float *pe, int T, int C) {
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < C; i += 2) {
            double freq = exp(-log(10000.0) * (double)i / (double)C);
            pe[(size_t)t * C + i] = (float)sin(t * freq);
            if (i + 1 < C) pe[(size_t)t * C + i + 1] = (float)cos(t * freq);
        }
    }
}
