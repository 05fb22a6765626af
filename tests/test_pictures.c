/* Pictures whose layout is computed: the attention map's width holds its title, patch.svg
 * holds its title, reads its axes and keys its colours, the report's epoch and resume
 * labels clear each other at a round stride, the training curves' legend keeps off a
 * rising BLEU, and every marker sits inside its plot and every label inside its picture.
 * Each reads the SVG's own numbers; a label's box is text_px's estimate of its width. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "check.h"
#include "explain/patch_view.h"
#include "report/chart.h"
#include "run/curves.h"
#include "util/text.h"

/* the number after `key` (e.g. `width="`) at its first place in s, or -1 */
static double attr(const char *s, const char *key) {
    const char *p = strstr(s, key);
    return p ? atof(p + strlen(key)) : -1;
}

/* the number after the last `key` before `at` (a label's own y), or -1 */
static double attr_before(const char *s, const char *at, const char *key) {
    if (!at) return -1;
    for (size_t back = 0; back <= (size_t)(at - s); back++) /* never a pointer before s */
        if (strncmp(at - back, key, strlen(key)) == 0) return atof(at - back + strlen(key));
    return -1;
}

/* the number after ` name="` inside the tag that starts at tag, or fallback */
static double tag_attr(const char *tag, const char *name, double fallback) {
    const char *end = strchr(tag, '>');
    char key[32];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *p = strstr(tag, key);
    return p && end && p < end ? atof(p + strlen(key)) : fallback;
}

static int tag_has(const char *tag, const char *what) {
    const char *end = strchr(tag, '>'), *p = strstr(tag, what);
    return p && end && p < end;
}

/* One label as drawn: its box (x0..x1, y0..y1) and its text, entities as one character. */
typedef struct {
    double x0, y0, x1, y1;
    char text[64];
} Label;

/* The unrotated <text> labels of svg (the font size its own or the picture's; the box from
 * 0.8 em above the baseline to 0.2 em below it, as wide as text_px says, where its anchor
 * puts it); class, when given, keeps those of that class only. Returns how many. */
static int labels_of(const char *svg, const char *class, Label *out, int max) {
    double font = tag_attr(svg, "font-size", 12);
    int n = 0;
    for (const char *p = svg; (p = strstr(p, "<text")) && n < max; p++) {
        if (tag_has(p, "transform=")) continue;
        if (class) {
            char want[64];
            snprintf(want, sizeof want, "class=\"%s\"", class);
            if (!tag_has(p, want)) continue;
        }
        const char *open = strchr(p, '>') + 1, *close = strstr(open, "</text>");
        Label *l = &out[n];
        int k = 0;
        for (const char *c = open; c < close && k < (int)sizeof l->text - 1; c++) {
            l->text[k++] = *c == '&' ? '#' : *c;
            if (*c == '&') c = strchr(c, ';');
        }
        l->text[k] = '\0';
        double fs = tag_attr(p, "font-size", font), w = text_px(l->text, (int)fs), x = tag_attr(p, "x", 0);
        double y = tag_attr(p, "y", 0);
        x -= tag_has(p, "text-anchor=\"middle\"") ? w / 2 : tag_has(p, "text-anchor=\"end\"") ? w : 0;
        l->x0 = x, l->x1 = x + w, l->y0 = y - 0.8 * fs, l->y1 = y + 0.2 * fs;
        n++;
    }
    return n;
}

/* "" when every label of svg is inside the picture and no two overlap, else what is wrong
 * (a static buffer) */
static const char *labels_fit(const char *svg) {
    static char why[256];
    static Label l[600];
    double w = tag_attr(svg, "width", 0), h = tag_attr(svg, "height", 0);
    int n = labels_of(svg, NULL, l, 600);
    for (int i = 0; i < n; i++) {
        if (l[i].x0 < -0.5 || l[i].x1 > w + 0.5 || l[i].y0 < -0.5 || l[i].y1 > h + 0.5) {
            snprintf(why, sizeof why, "'%s' (x %.1f..%.1f, y %.1f..%.1f) leaves the %gx%g picture", l[i].text, l[i].x0,
                     l[i].x1, l[i].y0, l[i].y1, w, h);
            return why;
        }
        for (int j = 0; j < i; j++)
            if (fmin(l[i].x1, l[j].x1) - fmax(l[i].x0, l[j].x0) > 0.5 &&
                fmin(l[i].y1, l[j].y1) - fmax(l[i].y0, l[j].y0) > 0.5) {
                snprintf(why, sizeof why, "'%s' (x %.1f..%.1f) and '%s' (x %.1f..%.1f) overlap at y %.1f", l[j].text,
                         l[j].x0, l[j].x1, l[i].text, l[i].x0, l[i].x1, l[i].y1);
                return why;
            }
    }
    return "";
}

/* "" when every <circle> of svg lies whole inside the frame drawn as the first
 * `<rect ... fill="none" stroke="#888"/>` at or after `from`, and before the next such
 * frame; else which one does not */
static const char *markers_inside(const char *svg, const char *from) {
    static char why[200];
    const char *frame = strstr(from, "fill=\"none\" stroke=\"#888\"");
    if (!frame) return "no frame";
    const char *next = strstr(frame + 1, "fill=\"none\" stroke=\"#888\"");
    while (frame > svg && strncmp(frame, "<rect", 5) != 0) frame--;
    double x = tag_attr(frame, "x", 0), y = tag_attr(frame, "y", 0), w = tag_attr(frame, "width", 0),
           h = tag_attr(frame, "height", 0);
    /* a panel's markers follow its frame (curves.svg) or come before the next one */
    for (const char *c = frame; (c = strstr(c, "<circle")) && (!next || c < next); c++) {
        double cx = tag_attr(c, "cx", 0), cy = tag_attr(c, "cy", 0), r = tag_attr(c, "r", 0);
        if (cx - r < x || cx + r > x + w || cy - r < y || cy + r > y + h) {
            snprintf(why, sizeof why, "a marker at (%.1f, %.1f) r %g crosses the frame x %g..%g, y %g..%g", cx, cy, r,
                     x, x + w, y, y + h);
            return why;
        }
    }
    return "";
}

static void test_text_px_counts_characters(void) {
    CHECK(text_px("abc", 10) == 18, "abc at 10 px: %d", text_px("abc", 10));
    /* é is two bytes and one character; ▁ three bytes and one */
    CHECK(text_px("\xc3\xa9\xe2\x96\x81", 10) == 12, "two characters: %d", text_px("\xc3\xa9\xe2\x96\x81", 10));
    CHECK(text_px("", 12) == 0, "empty");
}

static void test_attention_svg_holds_its_title(void) {
    float map[4] = {0.5f, 0.5f, 1, 0};
    char *rows[2] = {"a", "b"}, *cols[2] = {"x", "y"};
    const char *title = "cross-attention (Q: decoder, K/V: encoder), layer 0, head 2";
    char *svg = attnmap_svg(map, 2, 2, rows, cols, title);
    double width = attr(svg, "width=\"");
    CHECK(width >= 16 + text_px(title, 14) * 1.1, "width %g for a title of %d px", width, text_px(title, 14));
    free(svg);
}

static void test_patch_svg_title_axes_and_undefined_rho(void) {
    PatchComponent c[3] = {{"cross.L0.H0", 2, 0, 0, -1, 0.5, 0.4},
                           {"cross.L0.H1", 2, 0, 1, -1, -0.25, -0.2},
                           {"enc.L0@0", -1, 0, -1, 0, 0.1, 0.1}};
    PatchTable t = {.n = 3, .c = c, .rho = NAN};
    char *labels[1] = {"w"};
    char title[400];
    snprintf(title, sizeof title, "patching: %s -> %s",
             "a man in a blue shirt is standing on a ladder cleaning windows of a tall building",
             "a woman in a blue shirt is standing on a ladder cleaning windows of a tall building");
    char *svg = patch_svg(&t, title, labels, 1, 2);
    double width = attr(svg, "width=\"");
    CHECK(width >= text_px(title, 13), "width %g for a title of %d px", width, text_px(title, 13));
    CHECK(strstr(svg, "rho undefined (the effects, or the estimates, all the same)") && !strstr(svg, "nan"), "rho: %s",
          strstr(svg, "rho") ? strstr(svg, "rho") : "none");
    /* the scatter's axes run over round ticks past the effects (-0.25..0.5) and the
     * estimates (-0.2..0.4), and say what each is */
    CHECK(strstr(svg, ">-0.5</text>") && strstr(svg, ">0.5</text>") && strstr(svg, ">effect (patching)</text>") &&
              strstr(svg, ">estimate</text>"),
          "axes unlabelled");
    /* red for the head that raised the metric, blue for the one that lowered it */
    const char *up = strstr(svg, "cross.L0.H0: effect"), *down = strstr(svg, "cross.L0.H1: effect");
    CHECK(up && down, "cells");
    const char *fill_up = up, *fill_down = down;
    while (fill_up > svg && strncmp(fill_up, "fill=\"", 6) != 0) fill_up--;
    while (fill_down > svg && strncmp(fill_down, "fill=\"", 6) != 0) fill_down--;
    CHECK(strncmp(fill_up, "fill=\"rgb(255,", 14) == 0 &&
              strstr(fill_down, ",255)\"") == strchr(fill_down + 6, '"') - 5,
          "colours: %.30s / %.30s", fill_up, fill_down);
    free(svg);
}

static void test_patch_svg_keys_its_colours_and_scales_each_axis(void) {
    /* log p(target)'s effects run to -10, its estimates to a fortieth of that: on a shared
     * scale every estimate read 0 and the largest effects sat on the frame */
    PatchComponent c[8] = {{"enc.L0.H0", 0, 0, 0, -1, -10, -0.25},   {"enc.L0.H1", 0, 0, 1, -1, -6, 0.04},
                           {"cross.L0.H0", 2, 0, 0, -1, 0.05, 0.03}, {"cross.L0.H1", 2, 0, 1, -1, -1.3, -0.06},
                           {"enc.L0@0", -1, 0, -1, 0, -9.8, -0.2},   {"enc.L0@1", -1, 0, -1, 1, -0.1, 0.02},
                           {"enc.L1@0", -1, 1, -1, 0, -5.7, -0.19},  {"enc.L1@1", -1, 1, -1, 1, 0.01, 0.01}};
    PatchTable t = {.n = 8, .c = c, .rho = 0.7};
    char *labels[2] = {"bird", "<eos>"};
    char *svg = patch_svg(&t, "patching \"a b\" with \"c b\" (metric: log p(target))", labels, 2, 2);
    /* the key: full blue at -10, white at 0, full red at +10, numbered */
    const char *key = strstr(svg, "<g class=\"colour-key\">"), *key_end = key ? strstr(key, "</g>") : NULL;
    CHECK(key && key_end, "no colour key");
    const char *blue = strstr(key, "fill=\"rgb(55,55,255)\""), *red = strstr(key, "fill=\"rgb(255,55,55)\""),
               *lo = strstr(key, ">-10</text>"), *hi = strstr(key, ">10</text>");
    CHECK(blue && red && blue < red && red < key_end && lo && hi && hi < key_end, "key: %.*s", (int)(key_end - key),
          key);
    /* the scatter: every marker whole inside its frame, the estimates over most of its height */
    const char *frame = strstr(svg, "fill=\"none\" stroke=\"#bbb\"");
    CHECK(frame, "no scatter frame");
    while (strncmp(frame, "<rect", 5) != 0) frame--;
    double x = tag_attr(frame, "x", 0), y = tag_attr(frame, "y", 0), size = tag_attr(frame, "width", 0);
    double top = 1e9, bottom = -1e9;
    for (const char *p = frame; (p = strstr(p, "<circle")); p++) {
        double cx = tag_attr(p, "cx", 0), cy = tag_attr(p, "cy", 0), r = tag_attr(p, "r", 0);
        CHECK(cx - r > x && cx + r < x + size && cy - r > y && cy + r < y + size,
              "a marker at (%.1f, %.1f) on the frame", cx, cy);
        top = fmin(top, cy), bottom = fmax(bottom, cy);
    }
    CHECK(bottom - top > size / 2, "the estimates span %.1f px of %g", bottom - top, size);
    const char *fit = labels_fit(svg);
    CHECK(!fit[0], "%s", fit);
    free(svg);
}

static void test_chart_epoch_labels_clear_each_other(void) {
    Series epochs = {0}, loss = {0};
    for (int e = 1; e <= 40; e++) series_push(&epochs, 10.0 * e, e + 1);
    for (int s = 0; s <= 400; s += 10) series_push(&loss, s, 5.0 - s / 100.0);
    ChartAxis ax = {.x1 = 400, .epochs = &epochs};
    ChartLine line = {&loss, "loss", "#000", 0};
    StrBuf sb = {0};
    chart_panel(&sb, "loss", &ax, &line, 1);
    int lines = 0, labels = 0;
    for (const char *p = sb.buf; (p = strstr(p, "<line class=\"epoch\"")); p++) lines++;
    double last_end = -1e9;
    for (const char *p = sb.buf; (p = strstr(p, "<text class=\"epoch\" x=\"")); p++) {
        double x = atof(p + strlen("<text class=\"epoch\" x=\""));
        const char *open = strchr(p, '>') + 1, *close = strstr(open, "</text>");
        char label[48];
        snprintf(label, sizeof label, "%.*s", (int)(close - open), open);
        double half = text_px(label, 9) / 2.0;
        CHECK(x - half >= last_end, "label '%s' at %.1f runs into the one before (ending at %.1f)", label, x, last_end);
        last_end = x + half;
        labels++;
    }
    /* epoch 41 begins at step 400, the last: every one of the 40 has its line */
    CHECK(lines == 40 && labels >= 5 && labels < 40, "%d lines, %d labels", lines, labels);
    sb_free(&sb);
    series_free(&epochs), series_free(&loss);
}

/* "" when the epoch labels of a panel are every multiple of one round stride (1, 2, 5,
 * 10, ...) among the epochs drawn, the first saying "epoch", else what is wrong */
static const char *epochs_at_a_stride(const char *svg, const Series *epochs) {
    static char why[200];
    Label l[100];
    int n = labels_of(svg, "epoch", l, 100), at[100];
    if (n == 0) return "no epoch label";
    if (strncmp(l[0].text, "epoch ", 6) != 0) return "the first label does not say epoch";
    for (int i = 0; i < n; i++) at[i] = atoi(l[i].text + (i == 0 ? 6 : 0));
    int stride = n > 1 ? at[1] - at[0] : at[0];
    int round = 0;
    for (long r = 1; r <= 1000000 && !round; r *= 10) round = stride == r || stride == 2 * r || stride == 5 * r;
    if (!round) return snprintf(why, sizeof why, "a stride of %d", stride), why;
    for (int i = 0, k = 0; i < epochs->n; i++) {
        int e = (int)epochs->y[i];
        if (e % stride != 0) continue;
        if (k >= n || at[k] != e)
            return snprintf(why, sizeof why, "epoch %d (stride %d) is not labelled", e, stride), why;
        k++;
    }
    for (int i = 0; i < n; i++)
        if (at[i] % stride != 0) return snprintf(why, sizeof why, "label %d is off the stride %d", at[i], stride), why;
    return "";
}

static void test_chart_epoch_labels_at_a_round_stride(void) {
    /* epochs of 330 steps, seen at the steps logged (every 100): 30 of them, 14 to 19 px
     * apart; a label went wherever it cleared the one before (1, 3, 4, ... 11, 13, 14, 16) */
    Series epochs = {0}, loss = {0}, few = {0};
    for (int s = 0; s <= 10000; s += 100) {
        series_push(&loss, s, 5.0 - s / 3000.0);
        if (s / 330 > (s - 100) / 330 && s > 0) series_push(&epochs, s, s / 330);
    }
    for (int e = 1; e <= 4; e++) series_push(&few, 2400.0 * e, e);
    ChartLine line = {&loss, "loss", "#000", 0};
    const Series *cases[2] = {&epochs, &few};
    for (int c = 0; c < 2; c++) {
        ChartAxis ax = {.x1 = 10000, .epochs = cases[c]};
        StrBuf sb = {0};
        chart_panel(&sb, "loss", &ax, &line, 1);
        const char *why = epochs_at_a_stride(sb.buf, cases[c]), *fit = labels_fit(sb.buf);
        CHECK(!why[0] && !fit[0], "%d epochs: %s%s", cases[c]->n, why, fit);
        sb_free(&sb);
    }
    series_free(&epochs), series_free(&loss), series_free(&few);
}

static void test_chart_resume_labels_clear_each_other(void) {
    /* two resumes 116 steps apart (6 px), one at the last step: each keeps its line and
     * a label of its own, inside the panel */
    Series loss = {0};
    for (int s = 0; s <= 10000; s += 100) series_push(&loss, s, 5.0 - s / 3000.0);
    double resumes[3] = {8000, 8116, 10000};
    ChartAxis ax = {.x1 = 10000, .resumes = resumes, .n_resumes = 3};
    ChartLine line = {&loss, "loss", "#000", 0};
    StrBuf sb = {0};
    chart_panel(&sb, "loss", &ax, &line, 1);
    int lines = 0, labels = 0;
    for (const char *p = sb.buf; (p = strstr(p, "<line class=\"resume\"")); p++) lines++;
    for (const char *p = sb.buf; (p = strstr(p, ">resumed</text>")); p++) labels++;
    const char *fit = labels_fit(sb.buf);
    CHECK(lines == 3 && labels == 3 && !fit[0], "%d lines, %d labels: %s", lines, labels, fit);
    sb_free(&sb), series_free(&loss);
}

static void test_chart_markers_inside_the_plot(void) {
    /* validations at the last step, and one on a tick at the top: each dot whole inside */
    Series v = {0};
    series_push(&v, 500, 6.0), series_push(&v, 1000, 3.0), series_push(&v, 1500, 2.0);
    ChartAxis ax = {.x1 = 1500};
    ChartLine line = {&v, "validation loss", "#000", 1};
    StrBuf sb = {0};
    chart_panel(&sb, "loss", &ax, &line, 1);
    const char *why = markers_inside(sb.buf, sb.buf), *fit = labels_fit(sb.buf);
    sb_free(&sb), series_free(&v);
    CHECK(!why[0] && !fit[0], "%s%s", why, fit);
}

static void test_curves_markers_and_labels_inside(void) {
    /* 100,000 steps, validated at the last; the first validation loss on the top tick and a
     * BLEU of 0 on the bottom: every marker whole inside its plot, every label inside */
    StrBuf text = {0}, svg = {0};
    for (int s = 1000; s <= 100000; s += 1000) {
        sb_printf(&text, "{\"step\": %d, \"loss\": %g", s, 3.0 - s / 50000.0);
        if (s % 10000 == 0)
            sb_printf(&text, ", \"valid_loss\": %g, \"valid_bleu\": %g", s == 10000 ? 4.0 : 1.5, s / 4000.0 - 2.5);
        sb_printf(&text, "}\n");
    }
    CHECK(curves_svg(text.buf, "m", &svg) == 0, "no picture");
    const char *loss = markers_inside(svg.buf, svg.buf);
    CHECK(!loss[0], "loss panel: %s", loss);
    const char *second = strstr(svg.buf, "fill=\"none\" stroke=\"#888\"");
    CHECK(second && (second = strstr(second + 1, "fill=\"none\" stroke=\"#888\"")), "one panel");
    while (strncmp(second, "<rect", 5) != 0) second--;
    const char *bleu = markers_inside(svg.buf, second), *fit = labels_fit(svg.buf);
    CHECK(!bleu[0] && !fit[0], "BLEU panel: %s%s", bleu, fit);
    sb_free(&svg), sb_free(&text);
}

static void test_curves_legend_keeps_off_a_rising_bleu(void) {
    /* the loss falls; BLEU rises to its top at the last step, the top right corner of its
     * panel, where a legend used to be drawn over it */
    StrBuf text = {0}, svg = {0};
    for (int s = 10; s <= 200; s += 10) {
        sb_printf(&text, "{\"step\": %d, \"loss\": %g", s, 6.0 - s / 50.0);
        if (s % 50 == 0) sb_printf(&text, ", \"valid_bleu\": %d", s / 4);
        sb_printf(&text, "}\n");
    }
    CHECK(curves_svg(text.buf, "m", &svg) == 0, "no picture");
    /* the loss panel's plot spans y 40..370, the BLEU panel's 420..750 */
    double loss_key = attr_before(svg.buf, strstr(svg.buf, ">training loss"), "y=\""),
           bleu_key = attr_before(svg.buf, strstr(svg.buf, ">validation BLEU (greedy)"), "y=\"");
    CHECK(loss_key > 40 && loss_key < 205, "the falling loss's legend at y %g (its top half: 40..205)", loss_key);
    CHECK(bleu_key > 585 && bleu_key < 750, "the rising BLEU's legend at y %g (its bottom half: 585..750)", bleu_key);
    CHECK(strstr(svg.buf, ">loss (nats a token)</text>") && strstr(svg.buf, ">BLEU</text>"), "y axes unnamed");
    sb_free(&svg), sb_free(&text);
}

const TestCase pictures_tests[] = {
    {"pictures_text_px_counts_characters", test_text_px_counts_characters},
    {"pictures_attention_svg_holds_its_title", test_attention_svg_holds_its_title},
    {"pictures_patch_svg_title_axes_and_undefined_rho", test_patch_svg_title_axes_and_undefined_rho},
    {"pictures_patch_svg_keys_its_colours_and_scales_each_axis", test_patch_svg_keys_its_colours_and_scales_each_axis},
    {"pictures_chart_epoch_labels_clear_each_other", test_chart_epoch_labels_clear_each_other},
    {"pictures_chart_epoch_labels_at_a_round_stride", test_chart_epoch_labels_at_a_round_stride},
    {"pictures_chart_resume_labels_clear_each_other", test_chart_resume_labels_clear_each_other},
    {"pictures_chart_markers_inside_the_plot", test_chart_markers_inside_the_plot},
    {"pictures_curves_legend_keeps_off_a_rising_bleu", test_curves_legend_keeps_off_a_rising_bleu},
    {"pictures_curves_markers_and_labels_inside", test_curves_markers_and_labels_inside},
    {NULL, NULL},
};
