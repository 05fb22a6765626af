/* bench_translate: `qkv bench RUN --translate FILE`, the decoding half of make bench. */
#ifndef QKV_BENCH_TRANSLATE_H
#define QKV_BENCH_TRANSLATE_H

/* Loads RUN (a run directory, with the weights translate would take, or a weights file),
 * translates FILE's lines with greedy search and with the default beam, each timed as
 * `qkv translate` runs it (tokenizing and detokenizing included), and prints one JSON line:
 * sentences/s, target tokens/s, GFLOP/s from the FLOPs the decoding ran, and their
 * fraction of `ceiling` (GFLOP/s; 0: measured on OpenBLAS's threads, once FILE and RUN
 * are read, so that a bad one is refused at once). Returns the exit status (the error
 * reported). */
int bench_translate(const char *run_path, const char *src_path, double ceiling);

#endif
