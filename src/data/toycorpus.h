/* toycorpus: writes the synthetic toy corpora (see toycorpus.c for the grammar). */
#ifndef QKV_TOYCORPUS_H
#define QKV_TOYCORPUS_H

#include <stdint.h>

/* Writes DIR/{train,valid,test}.{src,tgt,align} for task "translate", "copy", "reverse"
 * or "particles" (translate's pairs with case particles no source word stands for, left
 * unaligned in the gold); the same seed always gives the same files. -1 with the error set. */
int toydata_write(const char *dir, const char *task, int n_train, int n_valid, int n_test, uint64_t seed);

#endif
