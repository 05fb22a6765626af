/* panels: a decoding step's matrix products against weights laid out once, in panels of
 * 16 columns, instead of sgemm packing them again at every step.
 *
 * Why: a decoding step multiplies a few dozen rows (one per hypothesis) by every weight of
 * the decoder and by the output table, 12 MB on the Multi30k recipe's model. sgemm packs
 * its operands for each call, and at 60 rows that packing was 14-16% of beam and greedy
 * decoding's time on AVX2 CPUs (perf, sgemm_itcopy), besides zeroing or copying the output
 * first. The weights do not change while a model decodes, so they are laid out once for
 * the kernel here, and each step streams them through it.
 *
 * Where: x86-64 CPUs with AVX2 and FMA, while OpenBLAS runs a kernel set no wider than
 * AVX2 (Haswell, Zen, or weaker: panels_rule). Where OpenBLAS runs its AVX-512 kernels,
 * they do twice the work per instruction of this AVX2 kernel, and decoding keeps them;
 * but on Zen 4, which runs a 512-bit instruction in two halves, the panels still win.
 * QKV_DECODE_PANELS=0 in the environment keeps sgemm anywhere, and QKV_DECODE_PANELS=1
 * takes panels on any CPU that can run them (for comparing the two, and for testing the
 * kernel where the rule would not take it).
 *
 * What it computes: out = x . W + bias, every element one chain of fused multiply-adds over
 * k = 0, 1, ..., K-1 from zero, then the bias added: the same bits as C's fmaf in that order
 * (a test checks), whatever the row's place among the rows or how many rows there are. So
 * a step's products give a hypothesis the same bits alone and in a batch (the encoder's
 * products, still sgemm's over all of a group's source positions, need not). sgemm's bits
 * differ from these in the last place for some elements (OpenBLAS's Zen kernels round by a
 * row's place among the rows of the call), so the logits move by rounding when panels are
 * taken. The panels start on a 64-byte line: each panel row of 16 floats is one line. */
#ifndef QKV_PANELS_H
#define QKV_PANELS_H

#include <stddef.h>

#include "util/cpu.h"

enum { PANEL_COLS = 16 };

/* Whether the panel kernel can run on a CPU with these features: AVX2 and FMA with the
 * YMM state saved. Pure. */
int panels_can_run(const CpuFeatures *f);

/* Whether decoding takes panels on such a CPU with OpenBLAS running the kernel set named
 * kernels (openblas_get_corename()): it can run them, and the set is one of util/cpu.h's
 * ranks 0-2 (SSE, AVX, AVX2: Prescott ... Haswell, Zen), or any set known here on Zen 4
 * (AMD family 25 with AVX-512); not an AVX-512 set elsewhere, nor a name not known here.
 * Pure. */
int panels_rule(const CpuFeatures *f, const char *kernels);

/* Whether this process uses panels for decoding: panels_rule for this CPU and the kernels
 * OpenBLAS runs, unless QKV_DECODE_PANELS is "0" (no) or "1" (wherever panels_can_run).
 * Decided once. */
int panels_enabled(void);

/* Floats the panels of a (K, N) matrix take: N rounded up to whole panels, times K. */
size_t panels_floats(int K, int N);

/* w (K, N) row-major into panels: panel p holds columns 16p..16p+15 of every row k, one
 * row's 16 after another; the last panel's columns past N are zero. */
void panels_pack(float *panels, const float *w, int K, int N);

/* The same from w's transpose: wt (N, K) row-major, as the output table is stored. */
void panels_pack_transposed(float *panels, const float *wt, int K, int N);

/* out (M, N) = x (M, K) . W + bias (N, or NULL), W packed by panels_pack. Only where
 * panels_enabled(). */
void panels_product(float *out, const float *x, const float *panels, const float *bias, int M, int K, int N);

#endif
