/* vecmath: see vecmath.h. Each loop is branch-free (selects, not ifs) so that it
 * vectorises; `gcc -fopt-info-vec` lists them. */
#include "nn/vecmath.h"

#include <math.h>
#include <stdint.h>

#define EXP_LO -87.3365447504f /* exp below this is under FLT_MIN: 0 */
#define EXP_HI 88.0f           /* 2^n stays a normal float: n <= 127 */

/* Cody and Waite's reduction x = n ln2 + r (ln2 split in two so n ln2 is exact to
 * float's width), then exp(r) on |r| <= ln2/2 by Cephes' degree-7 polynomial, times 2^n
 * built in the exponent bits. n is rounded to nearest by adding and subtracting 1.5 2^23
 * (floorf does not vectorise without -ffast-math). */
static inline float exp_one(float x) {
    float xc = x < EXP_LO ? EXP_LO : x;
    xc = xc <= EXP_HI ? xc : EXP_HI; /* NaN too: converting NaN to an int is undefined */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } two_n = {.i = ((int32_t)n + 127) << 23};
    float y = p * two_n.f;
    return x < EXP_LO ? 0.0f : x == x ? y : x; /* a NaN stays NaN */
}

void vec_exp(float *out, const float *in, float shift, int n) {
    for (int i = 0; i < n; i++) out[i] = exp_one(in[i] - shift);
}

float vec_max(const float *x, int n) {
    float lane[VEC_LANES];
    for (int k = 0; k < VEC_LANES; k++) lane[k] = -INFINITY;
    int i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int k = 0; k < VEC_LANES; k++) lane[k] = x[i + k] > lane[k] ? x[i + k] : lane[k];
    for (; i < n; i++) lane[i % VEC_LANES] = x[i] > lane[i % VEC_LANES] ? x[i] : lane[i % VEC_LANES];
    float m = lane[0];
    for (int k = 1; k < VEC_LANES; k++) m = lane[k] > m ? lane[k] : m;
    return m;
}

float vec_max_sum_double(const float *x, int n, double *sum) {
    float top[VEC_LANES];
    double lane[VEC_LANES] = {0};
    for (int k = 0; k < VEC_LANES; k++) top[k] = -INFINITY;
    int i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int k = 0; k < VEC_LANES; k++) {
            top[k] = x[i + k] > top[k] ? x[i + k] : top[k];
            lane[k] += x[i + k];
        }
    for (; i < n; i++) {
        top[i % VEC_LANES] = x[i] > top[i % VEC_LANES] ? x[i] : top[i % VEC_LANES];
        lane[i % VEC_LANES] += x[i];
    }
    float m = top[0];
    double s = lane[0];
    for (int k = 1; k < VEC_LANES; k++) m = top[k] > m ? top[k] : m, s += lane[k];
    *sum = s;
    return m;
}

int vec_first_equal(const float *x, int n, float v) {
    int i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES) {
        int hit = 0; /* the whole block, no early exit: the form that vectorises */
        for (int k = 0; k < VEC_LANES; k++) hit |= x[i + k] == v;
        if (hit) break;
    }
    for (; i < n; i++)
        if (x[i] == v) return i;
    return n;
}

/* The lane loops: element i goes to lane i % VEC_LANES, the tail included, and the lanes
 * are added 0, 1, ... at the end. */
float vec_sum(const float *x, int n) {
    float lane[VEC_LANES] = {0};
    int i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int k = 0; k < VEC_LANES; k++) lane[k] += x[i + k];
    for (; i < n; i++) lane[i % VEC_LANES] += x[i];
    float s = 0.0f;
    for (int k = 0; k < VEC_LANES; k++) s += lane[k];
    return s;
}

double vec_sum_double(const float *x, int n) {
    double lane[VEC_LANES] = {0};
    int i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int k = 0; k < VEC_LANES; k++) lane[k] += x[i + k];
    for (; i < n; i++) lane[i % VEC_LANES] += x[i];
    double s = 0.0;
    for (int k = 0; k < VEC_LANES; k++) s += lane[k];
    return s;
}

double vec_sum_exp_double(const float *x, float shift, int n) {
    double lane[VEC_LANES] = {0};
    int i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int k = 0; k < VEC_LANES; k++) lane[k] += exp_one(x[i + k] - shift);
    for (; i < n; i++) lane[i % VEC_LANES] += exp_one(x[i] - shift);
    double s = 0.0;
    for (int k = 0; k < VEC_LANES; k++) s += lane[k];
    return s;
}

void vec_sum_squares_lanes(double lane[VEC_LANES], const float *x, size_t n) {
    size_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int k = 0; k < VEC_LANES; k++) lane[k] += (double)x[i + k] * x[i + k];
    for (; i < n; i++) lane[i % VEC_LANES] += (double)x[i] * x[i];
}

double vec_sum_squares_double(const float *x, size_t n) {
    double lane[VEC_LANES] = {0};
    vec_sum_squares_lanes(lane, x, n);
    double s = 0.0;
    for (int k = 0; k < VEC_LANES; k++) s += lane[k];
    return s;
}

float vec_dot(const float *a, const float *b, int n) {
    float lane[VEC_LANES] = {0};
    int i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int k = 0; k < VEC_LANES; k++) lane[k] += a[i + k] * b[i + k];
    for (; i < n; i++) lane[i % VEC_LANES] += a[i] * b[i];
    float s = 0.0f;
    for (int k = 0; k < VEC_LANES; k++) s += lane[k];
    return s;
}

float vec_sum_sq_dev(const float *x, float m, int n) {
    float lane[VEC_LANES] = {0};
    int i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int k = 0; k < VEC_LANES; k++) lane[k] += (x[i + k] - m) * (x[i + k] - m);
    for (; i < n; i++) lane[i % VEC_LANES] += (x[i] - m) * (x[i] - m);
    float s = 0.0f;
    for (int k = 0; k < VEC_LANES; k++) s += lane[k];
    return s;
}

float vec_dot_normed(const float *a, const float *b, const float *x, float m, float r, int n) {
    float lane[VEC_LANES] = {0};
    int i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int k = 0; k < VEC_LANES; k++) lane[k] += (a[i + k] * b[i + k]) * ((x[i + k] - m) * r);
    for (; i < n; i++) lane[i % VEC_LANES] += (a[i] * b[i]) * ((x[i] - m) * r);
    float s = 0.0f;
    for (int k = 0; k < VEC_LANES; k++) s += lane[k];
    return s;
}
