/* curves: the training curves of a run as an SVG picture, from its metrics.jsonl.
 * Training loss and validation loss against the step, on shared axes with ticks; when
 * the run logs valid_bleu, a second panel below shows BLEU on its own scale (0..100 is
 * not a loss scale) over the same steps. */
#include "run/curves.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/atomic_file.h"
#include "util/axis.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/plot_frame.h"
#include "util/text.h"

void series_push(Series *s, double x, double y) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->x = xrealloc(s->x, sizeof(double) * (size_t)s->cap);
        s->y = xrealloc(s->y, sizeof(double) * (size_t)s->cap);
    }
    s->x[s->n] = x, s->y[s->n] = y, s->n++;
}

void series_free(Series *s) {
    free(s->x), free(s->y);
    *s = (Series){0};
}

typedef struct {
    const Series *s;
    const char *colour, *label;
    int dots; /* validation points are few: mark each, with its value as a tooltip */
} Curve;

/* One panel of curves at vertical offset top, x over [x0, x1], y from 0 to the largest
 * value rounded up to a tick. The data keep M px off the frame, so that a marker at an end
 * (the last validation, a value on the top tick, a BLEU of 0) is drawn whole inside it. */
static void panel(StrBuf *sb, int top, double x0, double x1, const Curve *c, int n, const char *fmt,
                  const char *y_label) {
    const int W = 720, L = 60, R = 20, T = top, B = 50, M = 6, pw = W - L - R, ph = 420 - 40 - B;
    double y0 = 0, y1 = 0;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < c[k].s->n; i++) y1 = fmax(y1, c[k].s->y[i]);
    double ys = axis_tick_step(y0, y1, 5), xs = axis_tick_step(x0, x1, 6);
    y1 = axis_top(y1, ys);
    if (!(y1 > 0) || !isfinite(y1)) y1 = 1;
    const PlotFrame fr = {L, T, pw, ph, M, x0, x1, y0, y1};
#define PX(v) plot_x(&fr, (v))
#define PY(v) plot_y(&fr, (v))
    plot_y_ticks(sb, &fr, ys, 6);
    plot_x_ticks(sb, &fr, xs, T + ph + 16, 12, W, 1);
    sb_printf(sb, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", L, T, pw, ph);
    sb_printf(sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", L + pw / 2, T + ph + B - 12);
    sb_printf(sb, "<text x=\"16\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">%s</text>\n",
              T + ph / 2, T + ph / 2, y_label);
    /* the legend goes in the top right corner, or the bottom right where the curves end
     * high there (a rising BLEU, a loss that never fell) */
    int ends_high = 0;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < c[k].s->n; i++)
            if (PX(c[k].s->x[i]) > L + pw - 240 && PY(c[k].s->y[i]) < T + 24 + 18 * n) ends_high = 1;
    int legend_y = ends_high ? T + ph - 10 - 18 * n : T;
    for (int k = 0; k < n; k++) {
        const Series *s = c[k].s;
        if (s->n == 0) continue;
        sb_printf(sb, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c[k].colour);
        for (int i = 0; i < s->n; i++) sb_printf(sb, "%.1f,%.1f ", PX(s->x[i]), PY(s->y[i]));
        sb_printf(sb, "\"/>\n");
        for (int i = 0; i < s->n && c[k].dots; i++) {
            sb_printf(sb, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>step %g: ", PX(s->x[i]),
                      PY(s->y[i]), c[k].colour, s->x[i]);
            sb_printf(sb, fmt, s->y[i]);
            sb_printf(sb, "</title></circle>\n");
        }
    }
    /* on a white box drawn over the grid lines, so that no line runs through a word */
    sb_printf(sb, "<rect x=\"%d\" y=\"%d\" width=\"228\" height=\"%d\" fill=\"white\"/>\n", L + pw - 234, legend_y + 5,
              18 * n + 2);
    for (int k = 0; k < n; k++)
        if (c[k].s->n > 0)
            sb_printf(sb,
                      "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"3\" fill=\"%s\"/><text x=\"%d\" "
                      "y=\"%d\">%s</text>\n",
                      L + pw - 230, legend_y + 14 + 18 * k, c[k].colour, L + pw - 210, legend_y + 19 + 18 * k,
                      c[k].label);
#undef PX
#undef PY
}

int curves_svg(char *text, const char *what, StrBuf *svg) {
    Series train = {0}, valid = {0}, bleu = {0};
    int line_no = 0, first_bad = 0; /* a file of none but bad lines is damaged, not empty */
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        line_no++;
        json_t *o = line[0] ? json_loads(line, 0, NULL) : NULL;
        json_t *step = json_object_get(o, "step"), *loss = json_object_get(o, "loss");
        if (line[0] && !(json_is_number(step) && json_is_number(loss)) && !first_bad) first_bad = line_no;
        if (!o) continue; /* a line cut by a kill: skip it */
        json_t *vl = json_object_get(o, "valid_loss");
        json_t *vb = json_object_get(o, "valid_bleu");
        if (json_is_number(step) && json_is_number(loss))
            series_push(&train, json_number_value(step), json_number_value(loss));
        if (json_is_number(step) && json_is_number(vl))
            series_push(&valid, json_number_value(step), json_number_value(vl));
        if (json_is_number(step) && json_is_number(vb))
            series_push(&bleu, json_number_value(step), json_number_value(vb));
        json_decref(o);
    }
    int rc = -1;
    if (train.n == 0 && first_bad) {
        err_set("%s:%d: not a metrics record (a JSON object with a numeric step and loss), and no line is", what,
                first_bad);
        goto done;
    }
    if (train.n == 0) {
        err_set("%s: no metrics to plot yet", what);
        goto done;
    }
    double x0 = 0, x1 = train.x[train.n - 1];
    for (int i = 0; i < valid.n; i++) x1 = fmax(x1, valid.x[i]);
    for (int i = 0; i < bleu.n; i++) x1 = fmax(x1, bleu.x[i]);
    if (x1 <= x0) x1 = x0 + 1;
    const int W = 720, H = 420, panel_h = H - 40; /* a second panel adds its plot and axis below */
    sb_printf(svg,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
              "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
              W, H + (bleu.n ? panel_h : 0));
    sb_printf(svg, "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">training curves</text>\n", 60);
    const Curve losses[2] = {{&train, "#3b528b", "training loss (label-smoothed)", 0},
                             {&valid, "#e6550d", "validation loss (NLL)", 1}};
    panel(svg, 40, x0, x1, losses, 2, "%.4f", "loss (nats a token)");
    const Curve bleus[1] = {{&bleu, "#31a354", "validation BLEU (greedy)", 1}};
    if (bleu.n) panel(svg, H, x0, x1, bleus, 1, "%.2f", "BLEU");
    sb_printf(svg, "</svg>\n");
    rc = 0;
done:
    series_free(&train), series_free(&valid), series_free(&bleu);
    return rc;
}

int curves_plot(const char *metrics_path, const char *svg_path) {
    char *text = read_file_max(metrics_path, CURVES_METRICS_MAX, NULL);
    if (!text) return -1;
    StrBuf sb = {0};
    int rc = curves_svg(text, metrics_path, &sb);
    free(text);
    if (rc == 0) rc = write_file_atomic(svg_path, sb.buf, sb.len);
    sb_free(&sb);
    return rc;
}
