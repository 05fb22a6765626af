/* Pictures whose layout is computed: the attention map's width holds its title, patch.svg
 * holds its title and reads its axes, the report's epoch labels clear each other, the
 * training curves' legend keeps off a rising BLEU. Each reads the SVG's own numbers. */
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
    /* the scatter's axes run from -0.5 to 0.5 (the largest effect or estimate), and say so */
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
    {"pictures_chart_epoch_labels_clear_each_other", test_chart_epoch_labels_clear_each_other},
    {"pictures_curves_legend_keeps_off_a_rising_bleu", test_curves_legend_keeps_off_a_rising_bleu},
    {NULL, NULL},
};
