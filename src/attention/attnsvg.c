/* attnsvg: attention heatmaps as standalone SVG files, token labels on both axes and a
 * colour scale with its legend. Each cell carries a <title>, so hovering it in a browser
 * shows the query, the key and the weight. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "util/atomic_file.h"
#include "util/mem.h"
#include "util/text.h"

/* viridis at five stops: perceptually even, readable in grey, kind to colour blindness */
static void colour(float p, char out[8]) {
    static const int stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    if (!(p > 0)) p = 0;
    if (p > 1) p = 1;
    float x = p * 4;
    int i = (int)x;
    if (i > 3) i = 3;
    float f = x - (float)i;
    int c[3];
    for (int k = 0; k < 3; k++) c[k] = (int)(stops[i][k] + f * (stops[i + 1][k] - stops[i][k]) + 0.5f);
    snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
}

/* Text into the SVG is valid UTF-8 that XML can hold (attnmap_utf8), then escaped.
 * Labels are made so where they are made; copies made here hold it for any caller. */
static char **clean_labels(char **labels, int n) {
    char **out = xmalloc(sizeof(char *) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) out[i] = attnmap_utf8(labels[i]);
    return out;
}

static void free_labels(char **labels, int n) {
    for (int i = 0; i < n; i++) free(labels[i]);
    free(labels);
}

static int longest(char **labels, int n) {
    int w = 1;
    for (int i = 0; i < n; i++) {
        int len = (int)strlen(labels[i]);
        if (len > w) w = len;
    }
    return w > 24 ? 24 : w;
}

#define NOTE "rows: queries; columns: keys; each row sums to 1"

char *attnmap_svg(const float *map, int rows, int cols, char **row_labels_in, char **col_labels_in,
                  const char *title_in) {
    char **row_labels = clean_labels(row_labels_in, rows), **col_labels = clean_labels(col_labels_in, cols);
    char *title = attnmap_utf8(title_in);
    int big = rows > cols ? rows : cols;
    int cell = big > 0 ? 640 / big : 28;
    if (cell > 32) cell = 32;
    if (cell < 8) cell = 8;
    int font = cell < 16 ? 9 : 12;
    int left = longest(row_labels, rows) * font * 6 / 10 + 16, top = longest(col_labels, cols) * font * 6 / 10 + 48;
    int width = left + cols * cell + 110, height = top + rows * cell + 40;
    /* wide enough for the title (14 px, bold: a tenth more) and the line under it */
    int title_w = 16 + (text_px(title, 14) * 11 + 9) / 10, note_w = 16 + text_px(NOTE, font);
    if (width < title_w) width = title_w;
    if (width < note_w) width = note_w;
    StrBuf sb = {0};
    sb_printf(&sb,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
              "font-family=\"sans-serif\" font-size=\"%d\">\n",
              width, height, width, height, font);
    sb_printf(&sb, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"8\" y=\"20\" font-size=\"14\" "
                   "font-weight=\"bold\">");
    sb_append_xml(&sb, title);
    sb_printf(&sb, "</text>\n<text x=\"8\" y=\"36\" fill=\"#555\">" NOTE "</text>\n");
    for (int j = 0; j < cols; j++) {
        int x = left + j * cell + cell / 2 + font / 3, y = top - 6;
        sb_printf(&sb, "<text x=\"%d\" y=\"%d\" transform=\"rotate(-60 %d %d)\">", x, y, x, y);
        sb_append_xml(&sb, col_labels[j]);
        sb_printf(&sb, "</text>\n");
    }
    for (int i = 0; i < rows; i++) {
        sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 6, top + i * cell + cell / 2 + font / 3);
        sb_append_xml(&sb, row_labels[i]);
        sb_printf(&sb, "</text>\n");
        for (int j = 0; j < cols; j++) {
            char c[8];
            float p = map[(size_t)i * cols + j];
            colour(p, c);
            sb_printf(&sb, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"><title>", left + j * cell,
                      top + i * cell, cell, cell, c);
            sb_append_xml(&sb, row_labels[i]);
            sb_printf(&sb, " \xe2\x86\x92 ");
            sb_append_xml(&sb, col_labels[j]);
            sb_printf(&sb, ": %.3f</title></rect>\n", p);
        }
    }
    /* legend: the colour scale from 0 to 1 */
    int lx = left + cols * cell + 30, ly = top, lh = rows * cell > 120 ? rows * cell : 120;
    sb_printf(&sb, "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">");
    for (int k = 0; k <= 4; k++) {
        char c[8];
        colour(k / 4.0f, c);
        sb_printf(&sb, "<stop offset=\"%d%%\" stop-color=\"%s\"/>", k * 25, c);
    }
    sb_printf(&sb,
              "</linearGradient></defs>\n<rect x=\"%d\" y=\"%d\" width=\"16\" height=\"%d\" fill=\"url(#scale)\" "
              "stroke=\"#888\"/>\n",
              lx, ly, lh);
    for (int k = 0; k <= 4; k++)
        sb_printf(&sb, "<text x=\"%d\" y=\"%d\">%.2f</text>\n", lx + 22, ly + lh - k * lh / 4 + font / 3, k / 4.0);
    sb_printf(&sb, "<text x=\"%d\" y=\"%d\" fill=\"#555\">weight</text>\n</svg>\n", lx - 4, ly + lh + 18);
    free_labels(row_labels, rows), free_labels(col_labels, cols), free(title);
    return sb.buf;
}

int attnmap_write_svgs(const AttnMaps *a, const char *dir, int *count) {
    *count = 0;
    for (int k = 0; k < ATTN_KINDS; k++) {
        int rows = attnmap_rows(a, k), cols = attnmap_cols(a, k);
        float *avg = xmalloc(sizeof(float) * (size_t)rows * cols);
        for (int l = 0; l < a->layers[k]; l++) {
            for (int h = -1; h < a->heads; h++) {
                char title[160], path[1200];
                const float *map = attnmap_at(a, k, l, h < 0 ? 0 : h);
                if (h < 0) {
                    attnmap_head_average(a, k, l, avg);
                    map = avg;
                    snprintf(title, sizeof title, "%s, layer %d, average of %d heads", attnmap_kind_title(k), l,
                             a->heads);
                    snprintf(path, sizeof path, "%s/%s-layer%d-avg.svg", dir, attnmap_kind_name(k), l);
                } else {
                    snprintf(title, sizeof title, "%s, layer %d, head %d", attnmap_kind_title(k), l, h);
                    snprintf(path, sizeof path, "%s/%s-layer%d-head%d.svg", dir, attnmap_kind_name(k), l, h);
                }
                char *svg = attnmap_svg(map, rows, cols, attnmap_row_labels(a, k), attnmap_col_labels(a, k), title);
                int rc = write_file_atomic(path, svg, strlen(svg));
                free(svg);
                if (rc != 0) {
                    free(avg);
                    return -1;
                }
                (*count)++;
            }
        }
        free(avg);
    }
    return 0;
}
