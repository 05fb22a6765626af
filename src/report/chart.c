/* chart: see chart.h. */
#include "report/chart.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/axis.h"
#include "util/mem.h"
#include "util/plot_frame.h"

/* M: the margin between the frame and the data, so that a marker at an end of the data
 * (the last validation, a value on the top tick) is drawn whole inside the frame */
enum { W = 560, H = 260, L = 64, R = 16, T = 46, B = 36, M = 6, PW = W - L - R, PH = H - T - B };

/* the round number after s: 1, 2, 5, 10, 20, 50, ... */
static long long next_round(long long s) {
    long long mag = 1;
    while (mag * 10 <= s) mag *= 10;
    return s / mag == 2 ? 5 * mag : 2 * s;
}

/* The epochs that are multiples of stride get a label ("epoch N" first, then N), each
 * inside the panel over the plot; 0 when two would print over each other. With draw, the
 * labels are written. */
static int epoch_labels(StrBuf *sb, const ChartAxis *ax, const PlotFrame *sc, long long stride, int draw) {
    double end = -INFINITY;
    int first = 1;
    for (int i = 0; ax->epochs && i < ax->epochs->n; i++) {
        double x = ax->epochs->x[i];
        long long e = (long long)ax->epochs->y[i];
        if (x <= sc->x0 || x > sc->x1 || e % stride != 0) continue;
        char label[48];
        snprintf(label, sizeof label, "%s%lld", first ? "epoch " : "", e);
        double half = text_px(label, 9) / 2.0, at = plot_inside(plot_x(sc, x), half, L, W - 1);
        if (at - half < end + 4) return 0;
        end = at + half, first = 0;
        if (draw)
            sb_printf(sb,
                      "<text class=\"epoch\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#888\" "
                      "font-size=\"9\">%s</text>\n",
                      at, T - 3, label);
    }
    return 1;
}

/* Each resume's dashed line, and its label on the lowest row (from the bottom of the plot
 * up) where it clears the labels already there: two resumes a few steps apart printed
 * "resumed" over each other. A label past the right edge goes on the left of its line. */
static void resume_marks(StrBuf *sb, const ChartAxis *ax, const PlotFrame *sc) {
    enum { ROWS = 8 };
    double *placed = xcalloc((size_t)ax->n_resumes + 1, 3 * sizeof(double)); /* x0, x1, row */
    int n_placed = 0;
    const double w = text_px("resumed", 9);
    for (int i = 0; i < ax->n_resumes; i++) {
        double x = ax->resumes[i];
        if (x < sc->x0 || x > sc->x1) continue;
        double at = plot_x(sc, x), x0 = at + 2 + w > W - 1 ? at - 2 - w : at + 2;
        sb_printf(sb,
                  "<line class=\"resume\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#c00\" "
                  "stroke-dasharray=\"4 3\"><title>resumed at step %g</title></line>",
                  at, at, T, T + PH, x);
        int row = 0;
        for (int k = 0; k < n_placed; k++)
            if (placed[3 * k + 2] == row && placed[3 * k] < x0 + w + 3 && x0 < placed[3 * k + 1] + 3) row++, k = -1;
        if (row < ROWS) {
            placed[3 * n_placed] = x0, placed[3 * n_placed + 1] = x0 + w, placed[3 * n_placed + 2] = row, n_placed++;
            sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" fill=\"#c00\" font-size=\"9\">resumed</text>", x0,
                      T + PH - 4 - 11 * row);
        }
        sb_printf(sb, "\n");
    }
    free(placed);
}

void chart_panel(StrBuf *sb, const char *title, const ChartAxis *ax, const ChartLine *lines, int n) {
    double y0 = INFINITY, y1 = -INFINITY;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < lines[k].s->n; i++)
            if (isfinite(lines[k].s->y[i])) y0 = fmin(y0, lines[k].s->y[i]), y1 = fmax(y1, lines[k].s->y[i]);
    if (!isfinite(y0)) return;
    y0 = fmin(y0, 0);
    double ys = axis_tick_step(y0, y1, 5);
    if (ys > 0 && isfinite(ys)) y0 = floor(y0 / ys) * ys, y1 = ceil(y1 / ys) * ys;
    if (!(y1 > y0)) y1 = y0 + 1;
    double x0 = 0, x1 = ax->x1 > 0 ? ax->x1 : 1, xs = axis_tick_step(x0, x1, 6);
    const PlotFrame sc = {L, T, PW, PH, M, x0, x1, y0, y1};
    const int pw = PW, ph = PH;
#define PX(v) plot_x(&sc, (v))
#define PY(v) plot_y(&sc, (v))
    sb_printf(sb,
              "<svg class=\"chart\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"11\" "
              "data-x0=\"%g\" data-x1=\"%.17g\" data-left=\"%d\" data-width=\"%d\">\n",
              W, H, x0, x1, L + M, pw - 2 * M);
    sb_printf(sb, "<text x=\"%d\" y=\"14\" font-size=\"13\" font-weight=\"bold\">", L);
    sb_append_xml(sb, title);
    sb_printf(sb, "</text>\n");
    plot_y_ticks(sb, &sc, ys, 4);
    plot_x_ticks(sb, &sc, xs, T + ph + 14, 11, W, 0);
    sb_printf(sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">step</text>\n", L + pw / 2, H - 4);
    /* epochs along the top, resumes as dashed lines; every epoch has its line, and the
     * epochs of a round stride their labels (short epochs would print them over each
     * other; a label wherever it cleared the one before read 1, 3, 4, ... 11, 13, 14) */
    for (int i = 0; ax->epochs && i < ax->epochs->n; i++) {
        double x = ax->epochs->x[i];
        if (x <= x0 || x > x1) continue;
        sb_printf(sb, "<line class=\"epoch\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#ccc\"/>\n", PX(x),
                  PX(x), T, T + ph);
    }
    long long stride = 1;
    while (stride < (1LL << 50) && !epoch_labels(sb, ax, &sc, stride, 0)) stride = next_round(stride);
    epoch_labels(sb, ax, &sc, stride, 1);
    resume_marks(sb, ax, &sc);
    sb_printf(sb, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", L, T, pw, ph);
    int legend_x = L;
    for (int k = 0; k < n; k++) {
        const Series *s = lines[k].s;
        if (s->n == 0) continue;
        sb_printf(sb, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" data-label=\"", lines[k].colour);
        sb_append_xml(sb, lines[k].label);
        sb_printf(sb, "\" data-steps=\"");
        for (int i = 0; i < s->n; i++) sb_printf(sb, "%s%.17g", i ? " " : "", s->x[i]);
        sb_printf(sb, "\" data-values=\"");
        for (int i = 0; i < s->n; i++) sb_printf(sb, "%s%.17g", i ? " " : "", s->y[i]);
        sb_printf(sb, "\" points=\"");
        for (int i = 0; i < s->n; i++)
            if (isfinite(s->y[i])) sb_printf(sb, "%.1f,%.1f ", PX(s->x[i]), PY(s->y[i]));
        sb_printf(sb, "\"/>\n");
        for (int i = 0; lines[k].dots && i < s->n; i++)
            if (isfinite(s->y[i]))
                sb_printf(sb, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", PX(s->x[i]), PY(s->y[i]),
                          lines[k].colour);
        /* the legend in a row between the title and the plot, clear of both */
        sb_printf(sb, "<rect x=\"%d\" y=\"23\" width=\"12\" height=\"3\" fill=\"%s\"/><text x=\"%d\" y=\"28\">",
                  legend_x, lines[k].colour, legend_x + 16);
        sb_append_xml(sb, lines[k].label);
        sb_printf(sb, "</text>\n");
        legend_x += 16 + 6 * (int)strlen(lines[k].label) + 14;
    }
    sb_printf(sb,
              "<line class=\"cursor\" x1=\"0\" x2=\"0\" y1=\"%d\" y2=\"%d\" stroke=\"#444\" visibility=\"hidden\"/>\n"
              "</svg>\n",
              T, T + ph);
#undef PX
#undef PY
}

void chart_bars(StrBuf *sb, const char *title, const long long *counts, int n, const char *colour) {
    long long top = 0;
    int last = 0;
    for (int i = 0; i < n; i++)
        if (counts[i] > 0) top = counts[i] > top ? counts[i] : top, last = i;
    const int w = 360, h = 160, l = 48, t = 24, b = 28, pw = w - l - 10, ph = h - t - b;
    sb_printf(sb, "<svg width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"11\">\n", w, h);
    sb_printf(sb, "<text x=\"%d\" y=\"14\" font-size=\"12\" font-weight=\"bold\">", l);
    sb_append_xml(sb, title);
    sb_printf(sb, "</text>\n");
    int bins = last + 1;
    double bw = (double)pw / (bins > 0 ? bins : 1);
    for (int i = 0; i < bins && top > 0; i++) {
        double bh = (double)counts[i] / (double)top * ph;
        sb_printf(sb,
                  "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"><title>%d tokens: %lld "
                  "pairs</title></rect>\n",
                  l + i * bw, t + ph - bh, bw > 1.5 ? bw - 0.5 : bw, bh, colour, i, counts[i]);
    }
    sb_printf(sb,
              "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>"
              "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%lld</text><text x=\"%d\" y=\"%d\" "
              "text-anchor=\"end\">0</text><text x=\"%d\" y=\"%d\">0</text><text x=\"%d\" y=\"%d\" "
              "text-anchor=\"end\">%d tokens</text>\n</svg>\n",
              l, t, pw, ph, l - 4, t + 8, top, l - 4, t + ph, l, t + ph + 14, l + pw, t + ph + 14, last);
}
