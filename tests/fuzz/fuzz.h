/* fuzz: what every fuzz target defines. Each tests/fuzz/<target>.c is one libFuzzer
 * target (make fuzz builds it with clang, -fsanitize=fuzzer,address,undefined) and,
 * through replay.c, a plain program that runs it on the stored inputs in
 * tests/fuzz/<target>/ (make test). A target never prints and never exits: qkv's
 * refusals are ordinary results; only a sanitizer report, a crash or a hang is a finding. */
#ifndef QKV_FUZZ_H
#define QKV_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional one-time set-up (replay.c calls it when a target defines it). */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif
