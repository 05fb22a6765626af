/* chart: the report's line charts as inline SVG: one panel per quantity against the
 * training step, epochs and resumes marked, every point's exact value kept on its line
 * (data-steps, data-values) for the hover read-out and for anyone checking the picture
 * against metrics.jsonl. */
#ifndef QKV_REPORT_CHART_H
#define QKV_REPORT_CHART_H

#include "run/curves.h"
#include "util/text.h"

typedef struct {
    const Series *s;
    const char *label, *colour;
    int dots; /* few points (validations): each marked */
} ChartLine;

typedef struct {
    double x1;             /* the last step: every panel shares [0, x1] */
    const Series *epochs;  /* x: the step where epoch y (1, 2, ...) begins */
    const double *resumes; /* steps where a resume took over */
    int n_resumes;
} ChartAxis;

/* One panel, an <svg class="chart"> of its own, titled; y from 0 (or the lowest value,
 * when below) to the highest, rounded to a tick. Nothing when no line has a point. */
void chart_panel(StrBuf *sb, const char *title, const ChartAxis *ax, const ChartLine *lines, int n);
/* A bar chart of counts[0..n) (an <svg>), e.g. sentence lengths in tokens. */
void chart_bars(StrBuf *sb, const char *title, const long long *counts, int n, const char *colour);

#endif
