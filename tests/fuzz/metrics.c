/* Fuzz target: the metrics reader `qkv plot` (and training) draw curves with: any text
 * as metrics.jsonl, drawn to an SVG of bounded size. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "run/curves.h"
#include "util/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    StrBuf svg = {0};
    curves_svg(text, "metrics.jsonl", &svg);
    /* bounded whatever the numbers: ticks, points and labels of ~70 bytes a line */
    if (svg.len > 64 * 1024 + 400 * size) abort();
    sb_free(&svg);
    free(text);
    return 0;
}
