/* plot_frame: see plot_frame.h. */
#include "util/plot_frame.h"

#include <math.h>
#include <stdio.h>

#include "util/axis.h"

double plot_x(const PlotFrame *f, double v) {
    return f->left + f->margin + (v - f->x0) / (f->x1 - f->x0) * (f->width - 2 * f->margin);
}

double plot_y(const PlotFrame *f, double v) {
    return f->top + f->height - f->margin - (v - f->y0) / (f->y1 - f->y0) * (f->height - 2 * f->margin);
}

double plot_inside(double x, double half, double lo, double hi) { return fmax(lo + half, fmin(x, hi - half)); }

void plot_y_ticks(StrBuf *sb, const PlotFrame *f, double step, int gap) {
    for (int k = 0, nk = axis_tick_count(f->y0, f->y1, step); k < nk; k++) {
        double v = f->y0 + k * step, y = plot_y(f, v);
        sb_printf(sb,
                  "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%d\" y=\"%.1f\" "
                  "text-anchor=\"end\">%g</text>\n",
                  f->left, f->left + f->width, y, y, f->left - gap, y + 4, v);
    }
}

void plot_x_ticks(StrBuf *sb, const PlotFrame *f, double step, int y, int font_px, int picture_width, int grid) {
    for (int k = 0, nk = axis_tick_count(f->x0, f->x1, step); k < nk; k++) {
        double v = f->x0 + k * step, x = plot_x(f, v);
        char label[32];
        snprintf(label, sizeof label, "%g", v);
        /* the last tick's number ends inside the picture (100000 ran past its edge) */
        double at = plot_inside(x, text_px(label, font_px) / 2.0, 0, picture_width - 1);
        if (grid)
            sb_printf(sb, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/>", x, x, f->top,
                      f->top + f->height);
        sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", at, y, label);
    }
}
