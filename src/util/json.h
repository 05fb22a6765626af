/* json: small helpers for the JSON files qkv writes with jansson (metrics.jsonl,
 * eval.jsonl, score --json, batch.json, the benchmark's output), so that none is printed
 * by hand. */
#ifndef QKV_UTIL_JSON_H
#define QKV_UTIL_JSON_H

#include <jansson.h>

/* Every writer passes these flags: keys in insertion order, "a": 1, "b": 2 spacing,
 * and 15 significant digits, which print a json_fmt value back exactly as formatted. */
#define JSON_WRITE_FLAGS (JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

/* v as it reads when printed with the printf format fmt ("%.6f", "%g", ...): a file
 * keeps the precision it means to, without the noise of the last binary digits.
 * null when v is not finite (JSON has no inf or nan). */
json_t *json_fmt(const char *fmt, double v);
/* s as a JSON string, each byte that starts no well-formed UTF-8 character replaced by
 * U+FFFD: jansson's json_string gives NULL for such text, and json_put would then drop
 * the key unseen (a file name that is not UTF-8 lost "src" from eval.jsonl). */
json_t *json_utf8(const char *s);
/* An array of n ints. */
json_t *json_ints(const int *v, int n);
/* An array of rows arrays of cols numbers, each json_fmt(fmt) of x[r * stride + c]. */
json_t *json_float_rows(const char *fmt, const float *x, int rows, int cols, size_t stride);
/* root as text ending in a newline (malloc'd), with flags; takes root's reference. */
char *json_text_line(json_t *root, size_t flags);
/* Sets key in o to value, taking the reference (json_object_set_new), ignoring NULL. */
void json_put(json_t *o, const char *key, json_t *value);

#endif
