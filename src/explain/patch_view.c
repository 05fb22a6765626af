/* patch_view: patch.json and patch.svg (patch_view.h). */
#include "explain/patch_view.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/axis.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/text.h"

static const char *const kinds[ATTN_KINDS] = {"enc", "dec", "cross"};

char *patch_json(const PatchTable *t, const char *metric, char **src_labels, int S) {
    json_t *root = json_object(), *cs = json_array(), *src = json_array();
    json_put(root, "format", json_string("qkv-patch-1"));
    json_put(root, "metric", json_string(metric));
    json_put(root, "clean", json_fmt("%.6g", t->clean));
    json_put(root, "corrupt", json_fmt("%.6g", t->corrupt));
    json_put(root, "everything", json_fmt("%.6g", t->everything));
    json_put(root, "rho", json_fmt("%.4f", t->rho));
    for (int j = 0; j < S; j++) json_array_append_new(src, json_string(src_labels[j]));
    json_put(root, "source", src);
    for (int i = 0; i < t->n; i++) {
        const PatchComponent *c = &t->c[i];
        json_t *o = json_object();
        json_put(o, "name", json_string(c->name));
        json_put(o, "kind", json_string(c->kind < 0 ? "stream" : kinds[c->kind]));
        json_put(o, "layer", json_integer(c->layer));
        json_put(o, "head", json_integer(c->head));
        json_put(o, "pos", json_integer(c->pos));
        json_put(o, "effect", json_fmt("%.6g", c->effect));
        json_put(o, "atp", json_fmt("%.6g", c->atp));
        json_array_append_new(cs, o);
    }
    json_put(root, "components", cs);
    char *text = xcheck(json_dumps(root, JSON_WRITE_FLAGS | JSON_INDENT(1)));
    json_decref(root);
    return text;
}

/* red for a positive effect (the patch raises the metric), blue for a negative one */
static void colour(StrBuf *sb, double v, double top) {
    double x = top > 0 ? fmin(1, fabs(v) / top) : 0;
    int fade = (int)(255 - 200 * x);
    if (v >= 0) sb_printf(sb, "rgb(255,%d,%d)", fade, fade);
    else sb_printf(sb, "rgb(%d,%d,255)", fade, fade);
}

/* The key of the heatmaps' colours: cells from -top (blue) through 0 to +top (red), the
 * ends and the middle numbered, at (x, y) and 220 px wide. */
static void colour_key(StrBuf *sb, int x, int y, double top) {
    enum { CELLS = 11, CW = 20 };
    if (!(top > 0)) top = 1; /* nothing moved: the cells are all white, the key says the scale */
    sb_printf(sb, "<g class=\"colour-key\">\n<text x=\"%d\" y=\"%d\" text-anchor=\"end\">effect</text>\n", x - 6,
              y + 10);
    for (int k = 0; k < CELLS; k++) {
        sb_printf(sb, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"12\" fill=\"", x + k * CW, y, CW);
        colour(sb, top * (2.0 * k / (CELLS - 1) - 1), top);
        sb_printf(sb, "\"/>\n");
    }
    for (int k = -1; k <= 1; k++)
        sb_printf(sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%.3g</text>\n",
                  x + CW / 2 + (k + 1) * (CELLS - 1) * CW / 2, y + 25, k * top);
    sb_printf(sb, "</g>\n");
}

/* One axis of the scatter: from the lowest value (or 0) to the highest (or 0) at round
 * ticks, at most 5 of them. */
typedef struct {
    double lo, hi, step;
} ScatterAxis;

static ScatterAxis scatter_axis(const PatchTable *t, int estimates) {
    double lo = 0, hi = 0;
    for (int i = 0; i < t->n; i++) {
        double v = estimates ? t->c[i].atp : t->c[i].effect;
        if (isfinite(v)) lo = fmin(lo, v), hi = fmax(hi, v);
    }
    if (!(hi > lo)) return (ScatterAxis){-1, 1, 1}; /* all 0: nothing to scale */
    ScatterAxis a = {lo, hi, 0};
    for (int n = 4; n >= 1; n--) {
        a.step = axis_tick_step(lo, hi, n);
        a.lo = floor(lo / a.step) * a.step, a.hi = ceil(hi / a.step) * a.step;
        if (axis_tick_count(a.lo, a.hi, a.step) <= 5) break;
    }
    return a;
}

char *patch_svg(const PatchTable *t, const char *title, char **src_labels, int S, int heads) {
    StrBuf sb = {0};
    double top = 0, atop = 0;
    int head_rows = 0, stream_rows = 0;
    for (int i = 0; i < t->n; i++) {
        top = fmax(top, fabs(t->c[i].effect)), atop = fmax(atop, fabs(t->c[i].atp));
        if (t->c[i].kind >= 0 && t->c[i].head == 0) head_rows++;
        if (t->c[i].kind < 0 && t->c[i].pos == 0) stream_rows++;
    }
    int cell = 26, left = 90, y0 = 84, hw = left + heads * cell, sx = hw + 40, sw = left + S * (cell + 14);
    int height = y0 + 30 + (head_rows > stream_rows ? head_rows : stream_rows) * cell + 260;
    /* as wide as the maps, and as the title (the two sentences: it can be the longest) */
    int width = sx + sw + 20 > 980 ? sx + sw + 20 : 980, title_w = 12 + text_px(title, 13);
    if (width < title_w) width = title_w;
    sb_printf(&sb,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
              "font-size=\"11\">\n<text x=\"4\" y=\"16\" font-size=\"13\">",
              width, height);
    sb_append_xml(&sb, title);
    sb_printf(&sb,
              "</text>\n<text x=\"4\" y=\"32\" fill=\"#555\">change of the metric when one component is copied in "
              "from the corrupted run (red: up, blue: down; largest %.3g)</text>\n",
              top);
    colour_key(&sb, left, 42, top);
    /* heads: a row per kind and layer */
    sb_printf(&sb, "<text x=\"%d\" y=\"%d\">each head's output</text>\n", left, y0);
    int row = -1;
    for (int i = 0; i < t->n; i++) {
        const PatchComponent *c = &t->c[i];
        if (c->kind < 0) continue;
        if (c->head == 0) {
            row++;
            sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s L%d</text>\n", left - 4,
                      y0 + 8 + row * cell + cell / 2 + 4, kinds[c->kind], c->layer);
        }
        sb_printf(&sb, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" stroke=\"#fff\" fill=\"",
                  left + c->head * cell, y0 + 8 + row * cell, cell, cell);
        colour(&sb, c->effect, top);
        sb_printf(&sb, "\"><title>%s: effect %.4g, estimate %.4g</title></rect>\n", c->name, c->effect, c->atp);
    }
    for (int h = 0; h < heads; h++)
        sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">H%d</text>\n", left + h * cell + cell / 2,
                  y0 + 8 + (row + 1) * cell + 12, h);
    /* the encoder's stream: a row per layer, a column per source token */
    sb_printf(&sb, "<text x=\"%d\" y=\"%d\">the encoder's stream, by layer and source token</text>\n", sx + left, y0);
    int cw = cell + 14;
    for (int i = 0; i < t->n; i++) {
        const PatchComponent *c = &t->c[i];
        if (c->kind >= 0) continue;
        if (c->pos == 0)
            sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">enc L%d</text>\n", sx + left - 4,
                      y0 + 8 + c->layer * cell + cell / 2 + 4, c->layer);
        sb_printf(&sb, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" stroke=\"#fff\" fill=\"",
                  sx + left + c->pos * cw, y0 + 8 + c->layer * cell, cw, cell);
        colour(&sb, c->effect, top);
        sb_printf(&sb, "\"><title>%s: effect %.4g, estimate %.4g</title></rect>\n", c->name, c->effect, c->atp);
    }
    for (int j = 0; j < S; j++) {
        sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" transform=\"rotate(-40 %d %d)\">",
                  sx + left + j * cw + cw / 2, y0 + 8 + stream_rows * cell + 14, sx + left + j * cw + cw / 2,
                  y0 + 8 + stream_rows * cell + 14);
        sb_append_xml(&sb, src_labels[j]);
        sb_printf(&sb, "</text>\n");
    }
    /* the estimate against the measured effect, each on its own scale: a shared one put
     * every estimate of log p(target) at 0 (they were a fortieth of the effects) and the
     * largest effects on the frame. The data keep M px inside the frame. */
    enum { M = 6 };
    int py = height - 220, ps = 180, px = left;
    ScatterAxis ax = scatter_axis(t, 0), ay = scatter_axis(t, 1);
#define SX(v) (px + M + ((v)-ax.lo) / (ax.hi - ax.lo) * (ps - 2 * M))
#define SY(v) (py + ps - M - ((v)-ay.lo) / (ay.hi - ay.lo) * (ps - 2 * M))
    sb_printf(&sb, "<text x=\"%d\" y=\"%d\">attribution patching (y) against patching (x): Spearman rho ", px, py - 6);
    if (isnan(t->rho)) sb_printf(&sb, PATCH_RHO_UNDEFINED "</text>\n");
    else sb_printf(&sb, "%.3f</text>\n", t->rho);
    sb_printf(&sb,
              "<rect class=\"scatter\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#bbb\"/>\n",
              px, py, ps, ps);
    /* zero on each axis, and agreement (estimate = effect) where both scales reach */
    sb_printf(&sb, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n", SX(0.0), py, SX(0.0),
              py + ps);
    sb_printf(&sb, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>\n", px, SY(0.0), px + ps,
              SY(0.0));
    double a = fmax(ax.lo, ay.lo), b = fmin(ax.hi, ay.hi);
    sb_printf(&sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-dasharray=\"3 3\"/>\n",
              SX(a), SY(a), SX(b), SY(b));
    for (int k = 0, n = axis_tick_count(ax.lo, ax.hi, ax.step); k < n; k++) {
        double v = ax.lo + k * ax.step;
        sb_printf(&sb, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%.3g</text>\n", SX(v),
                  py + ps + 13, fabs(v) < 1e-9 * ax.step ? 0 : v);
    }
    for (int k = 0, n = axis_tick_count(ay.lo, ay.hi, ay.step); k < n; k++) {
        double v = ay.lo + k * ay.step;
        sb_printf(&sb, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%.3g</text>\n", px - 4, SY(v) + 4,
                  fabs(v) < 1e-9 * ay.step ? 0 : v);
    }
    sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">effect (patching)</text>\n", px + ps / 2,
              py + ps + 27);
    sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 %d %d)\">estimate</text>\n",
              px - 50, py + ps / 2, px - 50, py + ps / 2);
    for (int i = 0; i < t->n; i++)
        sb_printf(&sb,
                  "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>%s: effect %.4g, estimate "
                  "%.4g</title></circle>\n",
                  SX(t->c[i].effect), SY(t->c[i].atp), t->c[i].kind < 0 ? "#f58518" : "#4c78a8", t->c[i].name,
                  t->c[i].effect, t->c[i].atp);
#undef SX
#undef SY
    sb_printf(&sb,
              "<text x=\"%d\" y=\"%d\" fill=\"#555\">blue: heads, orange: stream positions; each axis has its own "
              "scale,</text>\n<text x=\"%d\" y=\"%d\" fill=\"#555\">the dashed line is agreement (estimate = "
              "effect)</text>\n</svg>\n",
              px + ps + 10, py + ps / 2, px + ps + 10, py + ps / 2 + 15);
    return sb.buf;
}
