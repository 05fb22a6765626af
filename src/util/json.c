/* json: see json.h. */
#include "util/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

json_t *json_fmt(const char *fmt, double v) {
    if (!isfinite(v)) return json_null(); /* JSON has no inf or nan; readers skip a null */
    char buf[64];
    snprintf(buf, sizeof buf, fmt, v);
    return json_real(strtod(buf, NULL));
}

json_t *json_ints(const int *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

void json_put(json_t *o, const char *key, json_t *value) {
    if (value) json_object_set_new(o, key, value);
}
