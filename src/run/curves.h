/* curves: training curves (loss, validation loss) from metrics.jsonl as an SVG file. */
#ifndef QKV_CURVES_H
#define QKV_CURVES_H

#include "util/text.h"

/* metrics.jsonl grows a line (~150 bytes) per log step: this is millions of them. */
#define CURVES_METRICS_MAX ((size_t)256 << 20)

/* A line's points, grown as they come (also the report's charts, report/chart.h). */
typedef struct {
    double *x, *y;
    int n, cap;
} Series;
void series_push(Series *s, double x, double y);
void series_free(Series *s);

/* -1 with the error set when the metrics cannot be read or hold nothing yet. */
int curves_plot(const char *metrics_path, const char *svg_path);
/* The SVG of metrics.jsonl's text (cut into lines in place), appended to svg; lines that
 * are not JSON objects with numbers are skipped. -1 with the error set (naming what)
 * when no line holds a step and a loss. */
int curves_svg(char *text, const char *what, StrBuf *svg);

#endif
