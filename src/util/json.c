/* json: see json.h. */
#include "util/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"
#include "util/text.h"

json_t *json_fmt(const char *fmt, double v) {
    if (!isfinite(v)) return json_null(); /* JSON has no inf or nan; readers skip a null */
    /* "%.6f" of a diverging run's 1e308 is 316 characters: a fixed buffer would cut
     * its digits and change the number, so a long one gets its own */
    char small[64], *buf = small;
    int n = snprintf(small, sizeof small, fmt, v);
    if (n >= (int)sizeof small) {
        buf = xmalloc((size_t)n + 1);
        snprintf(buf, (size_t)n + 1, fmt, v);
    }
    json_t *j = json_real(strtod(buf, NULL));
    if (buf != small) free(buf);
    return j;
}

json_t *json_utf8(const char *s) {
    json_t *j = json_string(s);
    if (j) return j;
    /* a byte that starts no well-formed character becomes U+FFFD; the rest is kept */
    StrBuf sb = {0};
    sb_append(&sb, "", 0);
    for (size_t i = 0, n = strlen(s); i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (len && i + len <= n && utf8_valid(s + i, len)) sb_append(&sb, s + i, len), i += len;
        else sb_append(&sb, "\xEF\xBF\xBD", 3), i++;
    }
    j = xcheck(json_string(sb.buf));
    free(sb.buf);
    return j;
}

json_t *json_ints(const int *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

json_t *json_float_rows(const char *fmt, const float *x, int rows, int cols, size_t stride) {
    json_t *a = json_array();
    for (int r = 0; r < rows; r++) {
        json_t *row = json_array();
        for (int c = 0; c < cols; c++) json_array_append_new(row, json_fmt(fmt, x[(size_t)r * stride + c]));
        json_array_append_new(a, row);
    }
    return a;
}

void json_put(json_t *o, const char *key, json_t *value) {
    if (value) json_object_set_new(o, key, value);
}

char *json_text_line(json_t *root, size_t flags) {
    char *text = xcheck(json_dumps(root, flags));
    json_decref(root);
    size_t n = strlen(text);
    char *line = xmalloc(n + 2);
    memcpy(line, text, n);
    line[n] = '\n', line[n + 1] = '\0';
    free(text);
    return line;
}
