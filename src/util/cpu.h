/* cpu: what this CPU and its operating system support (CPUID, XGETBV), and which of
 * OpenBLAS's kernel sets to run on it where OpenBLAS's own choice is weaker than that.
 *
 * OpenBLAS (a DYNAMIC_ARCH build) picks its kernels from a table of CPU models; a model
 * newer than the library may get the generic SSE3 set (Prescott) whatever it supports:
 * 0.3.21 gives Intel family 6 models of an extended model its table stops short of (11 and
 * up: Raptor Lake, Emerald Rapids, ...) Prescott. qkv then starts itself again with
 * OPENBLAS_CORETYPE naming the set the CPU can run (src/startup.c), and says so on the line
 * that names the kernels. */
#ifndef QKV_UTIL_CPU_H
#define QKV_UTIL_CPU_H

#include <stddef.h>

typedef struct {
    char vendor[13];   /* "GenuineIntel", "AuthenticAMD", ...; "" off x86 */
    int family, model; /* as /proc/cpuinfo prints them (extended fields folded in) */
    int avx, fma, avx2;
    int avx512f, avx512bw, avx512dq, avx512vl, avx512_bf16, amx_tile;
    int os_ymm; /* XCR0 has the SSE and AVX state (bits 1, 2): the OS saves YMM registers */
    int os_zmm; /* and the opmask and ZMM state (bits 5, 6, 7) */
} CpuFeatures;

/* Fills f from CPUID and XGETBV on this CPU (all zero off x86). */
void cpu_features_read(CpuFeatures *f);

/* The CPUs this process may run on (its affinity mask: taskset, cgroups' cpusets, an MPI
 * rank's binding); at least 1. */
int cpu_usable_count(void);

/* The rank of one of OpenBLAS's kernel sets by the instructions it uses: 0 SSE only
 * (Prescott, Core2, Nehalem, Atom, Barcelona, ...), 1 AVX (Sandybridge, the Bulldozer
 * family), 2 AVX2 and FMA (Haswell, Zen), 3 AVX-512 (SkylakeX), 4 AVX-512 with BF16
 * (Cooperlake), 5 SapphireRapids; -1 for a name not known here (case does not matter). */
int kernels_rank(const char *name);

/* The kernel set qkv runs instead of openblas_picked (what openblas_get_corename() says),
 * or NULL to leave OpenBLAS's choice alone: never when env_coretype is not NULL (the user
 * chose, even an empty value), nor for a set whose name is not known here; otherwise the
 * strongest set the CPU and its OS support (AVX-512 F/BW/DQ/VL with the ZMM state saved:
 * SkylakeX, Cooperlake where AVX512_BF16 too; AVX2 and FMA with the YMM state saved:
 * Haswell) when it ranks above openblas_picked. Only sets OpenBLAS 0.3.21 has. Pure. */
const char *kernels_choose(const char *openblas_picked, const CpuFeatures *f, const char *env_coretype);

/* The environment variable a process that qkv started again carries: "PICKED:CHOSEN",
 * what OpenBLAS picked and the set qkv put in OPENBLAS_CORETYPE. Its presence stops a
 * second start; a process it was passed on to reads it only while OPENBLAS_CORETYPE still
 * holds CHOSEN. */
#define KERNELS_MARKER "QKV_KERNELS_UPGRADED"

/* Whether marker (KERNELS_MARKER's value, or NULL) says that qkv set env_coretype (that of
 * OPENBLAS_CORETYPE, or NULL): 1, with OpenBLAS's own choice copied into picked (size
 * bytes, cut to fit); 0 otherwise. Pure. */
int kernels_marker_match(const char *marker, const char *env_coretype, char *picked, size_t size);

/* OpenBLAS's own choice where qkv chose another set for this process, else NULL (read
 * from the environment; a static buffer). */
const char *kernels_openblas_picked(void);

/* What follows "<set> kernels" on the line that names them: " (OpenBLAS chose Prescott for
 * this CPU, family 6 model 207; set OPENBLAS_CORETYPE to choose)" where qkv chose them,
 * " (OPENBLAS_CORETYPE from the environment)", or "" (a static buffer). */
const char *kernels_note(void);

#endif
