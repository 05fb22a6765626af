/* plot_frame: the frame and the ticks of every chart qkv draws as SVG (the training curves, the
 * report's panels): where a value lands in the frame, the gridlines with their numbers,
 * and the rule that keeps each number whole inside the picture. The tick steps are
 * axis.h's, so that the charts' scales read alike. */
#ifndef QKV_UTIL_PLOT_FRAME_H
#define QKV_UTIL_PLOT_FRAME_H

#include "util/text.h"

/* A plot area: its frame (left, top, width, height, in px), the margin the data keep
 * inside it (a marker at an end of the data is drawn whole), and the values at its ends. */
typedef struct {
    int left, top, width, height, margin;
    double x0, x1, y0, y1;
} PlotFrame;

double plot_x(const PlotFrame *f, double v);
double plot_y(const PlotFrame *f, double v);
/* x moved as little as it takes for a label of half-width half centred there to stay in [lo, hi] */
double plot_inside(double x, double half, double lo, double hi);
/* At every tick of step from y0: a light gridline across the frame and the tick's number
 * gap px left of it (font 11's baseline 4 px under the line). */
void plot_y_ticks(StrBuf *sb, const PlotFrame *f, double step, int gap);
/* At every tick of step from x0: the tick's number centred under it on baseline y, in font
 * font_px, kept whole inside a picture picture_width wide; with grid, a light gridline down
 * the frame first. */
void plot_x_ticks(StrBuf *sb, const PlotFrame *f, double step, int y, int font_px, int picture_width, int grid);

#endif
