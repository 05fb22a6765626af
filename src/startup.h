/* startup: what runs before any command (src/startup.c says why). */
#ifndef QKV_STARTUP_H
#define QKV_STARTUP_H

/* Called first in main, with main's argv: where OpenBLAS picked kernels weaker than this
 * CPU runs (util/cpu.h) and the user has not set OPENBLAS_CORETYPE, starts qkv again with
 * the stronger set; returns only where it did not (nothing to change, or the exec failed:
 * then OpenBLAS's choice stands). */
void startup_choose_kernels(char **argv);

#endif
