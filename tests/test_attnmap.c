/* Attention maps and alignments: shapes, row sums, masking, that the exported numbers
 * are the ones the model used, and the alignment scores. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention/align_map.h"
#include "attention/align_model.h"
#include "attention/attnmap.h"
#include "attention/watch.h"
#include "check.h"
#include "data/corpus.h"
#include "data/tokenize.h"
#include "data/toycorpus.h"
#include "fixture.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/text.h"

static void make_vocab(Vocab *v, int n) {
    vocab_init(v);
    char w[16];
    for (int i = 0; i < n; i++) snprintf(w, sizeof w, "w%d", i), vocab_count(v, w, strlen(w), 100 - i);
    vocab_prune(v, 1000, 1);
}

static void setup(Model *m, Vocab *sv, Vocab *tv) {
    make_vocab(sv, 10);
    make_vocab(tv, 12);
    ModelConfig cfg = fixture_config(sv->size, tv->size, 16, 4, 32, 2, 3, 32);
    model_init(m, &cfg);
    model_init_weights(m, 3);
}

static void test_capture_shapes_sums_masks_and_identity(void) {
    Model m;
    Vocab sv, tv;
    setup(&m, &sv, &tv);
    int src[5] = {4, 5, 6, 7, 8}, tgt[3] = {9, 4, 10};
    AttnMaps a;
    attnmap_capture(&m, &sv, &tv, src, 5, tgt, 3, &a);
    CHECK(a.S == 6 && a.T == 4 && a.heads == 4, "S %d T %d", a.S, a.T);
    CHECK(a.layers[ATTN_ENC_SELF] == 2 && a.layers[ATTN_DEC_SELF] == 3 && a.layers[ATTN_CROSS] == 3, "layers");
    CHECK(strcmp(a.src[5], "<eos>") == 0 && strcmp(a.tgt_in[0], "<bos>") == 0 && strcmp(a.tgt_out[3], "<eos>") == 0 &&
              strcmp(a.tgt_out[0], a.tgt_in[1]) == 0,
          "token labels");
    for (int k = 0; k < ATTN_KINDS; k++) {
        int rows = attnmap_rows(&a, k), cols = attnmap_cols(&a, k);
        for (int l = 0; l < a.layers[k]; l++)
            for (int h = 0; h < a.heads; h++) {
                const float *p = attnmap_at(&a, k, l, h);
                for (int i = 0; i < rows; i++) {
                    double sum = 0;
                    for (int j = 0; j < cols; j++) {
                        sum += p[i * cols + j];
                        if (k == ATTN_DEC_SELF && j > i)
                            CHECK(p[i * cols + j] == 0.0f, "decoder self: future key %d of query %d has %g", j, i,
                                  p[i * cols + j]);
                    }
                    CHECK(fabs(sum - 1.0) < 1e-5, "%s layer %d head %d row %d sums to %g", attnmap_kind_name(k), l, h,
                          i, sum);
                }
            }
    }
    /* the exported numbers are the model's own: the last forward's probabilities */
    const float *cross2 = attnmap_at(&a, ATTN_CROSS, 2, 1);
    CHECK(memcmp(cross2, m.a.dec[2].cross_attn.p + 1 * a.T * a.S, sizeof(float) * a.T * a.S) == 0,
          "cross map differs from the forward pass's probabilities");
    CHECK(memcmp(attnmap_at(&a, ATTN_ENC_SELF, 1, 3), m.a.enc[1].attn.p + 3 * a.S * a.S, sizeof(float) * a.S * a.S) ==
              0,
          "encoder map differs");
    /* and what JSON carries is the same to the printed precision */
    char *text = attnmap_json(&a);
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    CHECK(root, "maps.json does not parse: %s", err.text);
    json_t *c = json_object_get(root, "cross");
    CHECK(json_array_size(c) == 3 && json_array_size(json_array_get(c, 0)) == 4, "cross is [L][H]...");
    double worst = 0;
    for (int i = 0; i < a.T; i++)
        for (int j = 0; j < a.S; j++) {
            double v = json_real_value(json_array_get(json_array_get(json_array_get(json_array_get(c, 2), 1), i), j)) +
                       (double)json_integer_value(
                           json_array_get(json_array_get(json_array_get(json_array_get(c, 2), 1), i), j));
            worst = fmax(worst, fabs(v - cross2[i * a.S + j]));
        }
    CHECK(worst < 1e-6, "JSON differs from the map by %g", worst);
    CHECK(json_array_size(json_object_get(root, "source")) == 6 &&
              json_array_size(json_object_get(root, "target_out")) == 4,
          "token lists");
    json_decref(root);
    free(text);
    attnmap_free(&a);
    model_free(&m);
    vocab_free(&sv), vocab_free(&tv);
}

/* Tokens that JSON and HTML must escape come back from maps.json and from the data inside
 * index.html exactly; no token can end the page's <script>. */
static void test_json_and_html_escaping(void) {
    Model m;
    Vocab sv, tv;
    setup(&m, &sv, &tv);
    int src[2] = {4, 5}, tgt[1] = {6};
    AttnMaps a;
    attnmap_capture(&m, &sv, &tv, src, 2, tgt, 1, &a);
    const char *odd[3] = {"q\"b\\s\tc\x01", "</script><!--<script>", "\xc3\xa9/&amp;"};
    for (int i = 0; i < 3; i++) free(a.src[i]), a.src[i] = xstrdup(odd[i]);
    char *text = attnmap_json(&a);
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    CHECK(root, "maps.json does not parse: %s", err.text);
    for (int i = 0; i < 3; i++)
        CHECK(strcmp(json_string_value(json_array_get(json_object_get(root, "source"), i)), odd[i]) == 0,
              "token %d came back as '%s'", i, json_string_value(json_array_get(json_object_get(root, "source"), i)));
    CHECK(strcmp(json_string_value(json_object_get(root, "format")), "qkv-attention-2") == 0 &&
              json_integer_value(json_object_get(root, "heads")) == 4,
          "format and heads");
    json_decref(root);
    free(text);
    char path[80];
    snprintf(path, sizeof path, "/tmp/qkv-attn-html-%d.html", (int)getpid());
    CHECK(attnmap_write_html(&a, path) == 0, "%s", err_msg());
    char *html = read_file(path, NULL);
    unlink(path);
    CHECK(html, "%s", err_msg());
    const char *open = "<script id=\"attn-data\" type=\"application/json\">";
    char *start = strstr(html, open), *end = start ? strstr(start, "</script>") : NULL;
    CHECK(start && end, "no data script in the page");
    start += strlen(open);
    CHECK(!memchr(start, '<', (size_t)(end - start)), "markup inside the data script");
    root = json_loadb(start, (size_t)(end - start), 0, &err);
    CHECK(root, "page data does not parse: %s", err.text);
    for (int i = 0; i < 3; i++)
        CHECK(strcmp(json_string_value(json_array_get(json_object_get(root, "source"), i)), odd[i]) == 0,
              "page token %d differs", i);
    json_decref(root);
    free(html);
    attnmap_free(&a);
    model_free(&m);
    vocab_free(&sv), vocab_free(&tv);
}

/* The anatomy of every query: the softmax of the kept scores is the kept weights; a
 * contribution divided by its weight is the same down a key's column; and scores and
 * contributions recomputed here, in double, from the exported queries and keys, the
 * forward pass's values and W_O, agree with what was exported. */
static void test_anatomy_scores_contributions(void) {
    Model m;
    Vocab sv, tv;
    setup(&m, &sv, &tv);
    int src[5] = {4, 5, 6, 7, 8}, tgt[3] = {9, 4, 10};
    AttnMaps a;
    attnmap_capture(&m, &sv, &tv, src, 5, tgt, 3, &a);
    int H = a.heads, dh = a.d_head, d = m.cfg.d_model;
    CHECK(dh == 4, "d_head %d", dh);
    double worst_soft = 0, worst_ratio = 0, worst_score = 0, worst_contrib = 0;
    for (int k = 0; k < ATTN_KINDS; k++) {
        int rows = attnmap_rows(&a, k), cols = attnmap_cols(&a, k);
        for (int l = 0; l < a.layers[k]; l++) {
            const AttnActs *acts = k == ATTN_ENC_SELF   ? &m.a.enc[l].attn
                                   : k == ATTN_DEC_SELF ? &m.a.dec[l].self_attn
                                                        : &m.a.dec[l].cross_attn;
            const float *wo = (k == ATTN_ENC_SELF   ? &m.p.enc[l].self_attn
                               : k == ATTN_DEC_SELF ? &m.p.dec[l].self_attn
                                                    : &m.p.dec[l].cross_attn)
                                  ->w_o;
            for (int h = 0; h < H; h++) {
                const float *s = attnmap_slice(&a, a.scores, k, l, h), *p = attnmap_at(&a, k, l, h),
                            *c = attnmap_slice(&a, a.contrib, k, l, h);
                const float *q = a.queries[k] + ((size_t)l * H + h) * rows * dh,
                            *kk = a.keys[k] + ((size_t)l * H + h) * cols * dh;
                for (int i = 0; i < rows; i++) {
                    double max = -INFINITY, z = 0;
                    for (int j = 0; j < cols; j++)
                        if (isfinite(s[i * cols + j])) max = fmax(max, s[i * cols + j]);
                    for (int j = 0; j < cols; j++)
                        if (isfinite(s[i * cols + j])) z += exp(s[i * cols + j] - max);
                    for (int j = 0; j < cols; j++) {
                        int masked = k == ATTN_DEC_SELF && j > i;
                        CHECK(masked == !isfinite(s[i * cols + j]), "%s: key %d of query %d masked %d, score %g",
                              attnmap_kind_name(k), j, i, masked, s[i * cols + j]);
                        double soft = masked ? 0 : exp(s[i * cols + j] - max) / z;
                        worst_soft = fmax(worst_soft, fabs(soft - p[i * cols + j]));
                        if (masked) continue;
                        double dot = 0;
                        for (int e = 0; e < dh; e++) dot += (double)q[i * dh + e] * kk[j * dh + e];
                        worst_score = fmax(worst_score, fabs(dot / sqrt(dh) - s[i * cols + j]));
                        /* ||v_j^h W_O^h|| from the forward pass's v */
                        double sq = 0;
                        for (int o = 0; o < d; o++) {
                            double x = 0;
                            for (int e = 0; e < dh; e++)
                                x += (double)acts->v[j * d + h * dh + e] * wo[(size_t)(h * dh + e) * d + o];
                            sq += x * x;
                        }
                        double want = p[i * cols + j] * sqrt(sq);
                        worst_contrib = fmax(worst_contrib, fabs(want - c[i * cols + j]) / fmax(1e-6, want));
                        /* down the column, contrib / weight is one number */
                        int r2 = rows - 1; /* the last query sees every key */
                        if (p[i * cols + j] > 1e-6 && p[r2 * cols + j] > 1e-6) {
                            worst_ratio = fmax(worst_ratio, fabs(c[i * cols + j] / p[i * cols + j] -
                                                                 c[r2 * cols + j] / p[r2 * cols + j]) /
                                                                (c[r2 * cols + j] / p[r2 * cols + j]));
                        }
                    }
                }
            }
        }
    }
    CHECK(worst_soft <= 1e-5, "softmax(scores) differs from the weights by %g", worst_soft);
    CHECK(worst_score <= 1e-5, "q.k/sqrt(dh) differs from the kept scores by %g", worst_score);
    CHECK(worst_contrib <= 1e-4, "contributions differ by a relative %g", worst_contrib);
    CHECK(worst_ratio <= 1e-4, "contrib/weight varies down a column by a relative %g", worst_ratio);
    /* the queries are the real Q: encoder layer 0 (post-LN) reads the embedded source */
    double worst_q = 0;
    for (int i = 0; i < a.S; i++)
        for (int h = 0; h < H; h++)
            for (int e = 0; e < dh; e++) {
                int o = h * dh + e;
                double x = m.p.enc[0].self_attn.b_q[o];
                for (int r = 0; r < d; r++)
                    x += (double)m.a.src.x[i * d + r] * m.p.enc[0].self_attn.w_q[(size_t)r * d + o];
                worst_q = fmax(worst_q, fabs(x - a.queries[ATTN_ENC_SELF][((size_t)h * a.S + i) * dh + e]));
            }
    CHECK(worst_q <= 1e-5, "encoder layer 0 queries differ from x W_Q + b_Q by %g", worst_q);
    attnmap_free(&a);
    model_free(&m);
    vocab_free(&sv), vocab_free(&tv);
}

/* maps.json reads back into the same maps (masked scores as null), and a file with a
 * short row is refused with the place named. */
static void test_json_round_trip(void) {
    Model m;
    Vocab sv, tv;
    setup(&m, &sv, &tv);
    int src[4] = {4, 5, 6, 7}, tgt[2] = {9, 4};
    AttnMaps a, b;
    attnmap_capture(&m, &sv, &tv, src, 4, tgt, 2, &a);
    char *text = attnmap_json(&a);
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    CHECK(root, "maps.json does not parse: %s", err.text);
    CHECK(strcmp(json_string_value(json_object_get(root, "format")), "qkv-attention-2") == 0, "format");
    CHECK(json_is_null(
              json_array_get(json_array_get(json_array_get(json_array_get(json_object_get(root, "decoder_self_scores"),
                                                                          0),
                                                           0),
                                            0),
                             1)),
          "a masked score is not null");
    CHECK(attnmap_from_json(root, &b, "maps.json") == 0, "%s", err_msg());
    CHECK(b.S == a.S && b.T == a.T && b.heads == a.heads && b.d_head == a.d_head, "counts");
    double worst = 0;
    for (int k = 0; k < ATTN_KINDS; k++) {
        size_t n = (size_t)a.layers[k] * a.heads * attnmap_rows(&a, k) * attnmap_cols(&a, k);
        for (size_t i = 0; i < n; i++) {
            CHECK(isfinite(a.scores[k][i]) == isfinite(b.scores[k][i]), "mask lost at %zu", i);
            if (isfinite(a.scores[k][i]))
                worst = fmax(worst, fabs(a.scores[k][i] - b.scores[k][i]) / fmax(1, fabs(a.scores[k][i])));
            worst = fmax(worst, fabs(a.maps[k][i] - b.maps[k][i]));
            worst = fmax(worst, fabs(a.contrib[k][i] - b.contrib[k][i]) / fmax(1, fabs(a.contrib[k][i])));
        }
        size_t nq = (size_t)a.layers[k] * a.heads * attnmap_rows(&a, k) * a.d_head;
        for (size_t i = 0; i < nq; i++)
            worst = fmax(worst, fabs(a.queries[k][i] - b.queries[k][i]) / fmax(1, fabs(a.queries[k][i])));
    }
    CHECK(worst < 1e-6, "read back differs by %g", worst);
    CHECK(strcmp(b.tgt_out[0], a.tgt_out[0]) == 0 && strcmp(b.src[4], "<eos>") == 0, "tokens");
    attnmap_free(&b);
    /* a weight outside [0, 1], a number no float holds: refused, with the place */
    json_t *row = json_array_get(json_array_get(json_array_get(json_object_get(root, "cross"), 1), 0), 1);
    json_array_set_new(row, 2, json_real(2.5));
    CHECK(attnmap_from_json(root, &b, "x.json") != 0 &&
              strcmp(err_msg(), "x.json: 'cross'[1][0][1][2] is 2.5, not a weight in [0, 1]") == 0,
          "weight 2.5 accepted: %s", err_msg());
    json_array_set_new(row, 2, json_real(0.25));
    row = json_array_get(json_array_get(json_array_get(json_object_get(root, "encoder_self_keys"), 0), 0), 0);
    json_array_set_new(row, 0, json_real(1e300));
    CHECK(attnmap_from_json(root, &b, "x.json") != 0 &&
              strstr(err_msg(), "'encoder_self_keys'[0][0][0][0] is 1e+300, not a float"),
          "1e300 accepted: %s", err_msg());
    json_array_set_new(row, 0, json_real(0.5));
    CHECK(attnmap_from_json(root, &b, "x.json") == 0, "%s", err_msg());
    attnmap_free(&b);
    json_array_remove(json_array_get(json_array_get(json_array_get(json_object_get(root, "cross_contrib"), 1), 2), 0),
                      0);
    CHECK(attnmap_from_json(root, &b, "x.json") != 0 &&
              strstr(err_msg(), "x.json: 'cross_contrib'[1][2][0] does not hold"),
          "short row accepted: %s", err_msg());
    json_object_set_new(root, "format", json_string("qkv-attention-1"));
    CHECK(attnmap_from_json(root, &b, "x.json") != 0 && strstr(err_msg(), "expected qkv-attention-2"), "old format: %s",
          err_msg());
    json_decref(root);
    free(text);
    attnmap_free(&a);
    model_free(&m);
    vocab_free(&sv), vocab_free(&tv);
}

/* The page compiled into qkv is the viewer's parts joined (scripts/join_page.sh on
 * src/attention/viewer/page.html) byte for byte: the build's quoting of backslashes and
 * quotes loses nothing, and the build joined the parts there are now. */
extern const char attnview_html[];
static void test_viewer_page_compiled_verbatim(void) {
    FILE *f = popen("scripts/join_page.sh src/attention/viewer/page.html", "r");
    CHECK(f, "cannot run scripts/join_page.sh");
    StrBuf page = {0};
    char buf[8192];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) sb_append(&page, buf, n);
    CHECK(pclose(f) == 0 && page.len > 0, "scripts/join_page.sh failed");
    CHECK(strlen(attnview_html) == page.len && memcmp(attnview_html, page.buf, page.len) == 0,
          "compiled page differs from the joined parts");
    CHECK(memchr(page.buf, '\\', page.len), "the page has no backslash to test with");
    sb_free(&page);
}

static void test_svg_labels_legend_escaping(void) {
    float map[6] = {0.5f, 0.5f, 0, 0.2f, 0.3f, 0.5f};
    char *rows[2] = {"a<b", "c"}, *cols[3] = {"x", "y&z", "\"q\""};
    char *svg = attnmap_svg(map, 2, 3, rows, cols, "test <map>");
    CHECK(strstr(svg, "<svg") && strstr(svg, "</svg>"), "not an SVG");
    CHECK(strstr(svg, "a&lt;b") && strstr(svg, "y&amp;z") && strstr(svg, "&quot;q&quot;") &&
              strstr(svg, "test &lt;map&gt;"),
          "labels not escaped");
    CHECK(strstr(svg, "linearGradient") && strstr(svg, ">1.00<") && strstr(svg, ">0.00<"), "no colour legend");
    CHECK(strstr(svg, "a&lt;b \xe2\x86\x92 y&amp;z: 0.500"), "cell tooltips");
    int rects = 0;
    for (const char *p = svg; (p = strstr(p, "<rect x=")); p++) rects++;
    CHECK(rects == 6 + 1, "%d cell rects (6 cells + legend)", rects);
    free(svg);
}

static void test_alignment_scores(void) {
    int pairs[8][2];
    CHECK(align_parse("0-0 2-1 1-2", pairs, 8) == 3 && pairs[1][0] == 2 && pairs[1][1] == 1, "parse");
    CHECK(align_parse("0-0 x", pairs, 8) < 0 && align_parse("3", pairs, 8) < 0, "malformed accepted");
    CHECK(align_parse("", pairs, 8) == 0, "empty line");
    int links[3] = {0, 2, 0}; /* two of three right */
    AlignCounts c = {0};
    align_score(links, 3, pairs, align_parse("0-0 2-1 1-2", pairs, 8), &c);
    CHECK(c.hits == 2 && c.predicted == 3 && c.gold == 3, "counts %ld %ld %ld", c.hits, c.predicted, c.gold);
    CHECK(fabs(align_aer(&c) - (1.0 - 4.0 / 6.0)) < 1e-12 && fabs(align_precision(&c) - 2.0 / 3) < 1e-12, "AER");
    /* pooling pieces to words: char pieces with the space marker */
    char *toks[6] = {"a", "b", "\xE2\x96\x81", "c", "d", "<eos>"};
    int word_of[6];
    CHECK(align_words(toks, 6, TOKENIZER_CHAR, word_of) == 2 && word_of[1] == 0 && word_of[2] == -1 &&
              word_of[4] == 1 && word_of[5] == -1,
          "char pieces to words");
    CHECK(align_words(toks, 2, TOKENIZER_WORD, word_of) == 2 && word_of[1] == 1, "word tokens are words");
    /* subword pieces: a marked piece starts a word, a lone marker starts the next */
    char *pieces[7] = {TOKENIZE_SPACE "farm", "er", TOKENIZE_SPACE "sees", "\xE2\x96\x81", "x", "y", "<eos>"};
    int want[7] = {0, 0, 1, -1, 2, 2, -1}, piece_word[7];
    CHECK(align_words(pieces, 7, TOKENIZER_BPE, piece_word) == 3 && memcmp(piece_word, want, sizeof want) == 0,
          "pieces to words");
    /* a map whose target word 0 looks at source word 1 */
    float map[2 * 3] = {0.1f, 0.8f, 0.1f, 0.7f, 0.2f, 0.1f};
    int tw[2] = {0, 1}, sw[3] = {0, 1, -1}, out[2];
    align_from_map(map, 3, tw, 2, 2, sw, 3, 2, out);
    CHECK(out[0] == 1 && out[1] == 0, "links %d %d", out[0], out[1]);
}

/* Bytes that are not UTF-8 (or not XML characters) reach no file: each becomes U+FFFD in
 * labels, SVG, JSON and the page, and good text passes unchanged. */
static void test_labels_become_valid_utf8(void) {
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"\xff\xfe cat \xc3", "\xEF\xBF\xBD\xEF\xBF\xBD cat \xEF\xBF\xBD"},
        {"\xc0\xaf", "\xEF\xBF\xBD\xEF\xBF\xBD"},                     /* overlong '/' */
        {"a\xed\xa0\x80z", "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz"}, /* a surrogate */
        {"\xef\xbf\xbe", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},     /* U+FFFE: UTF-8, not XML */
        {"\xe2\x82", "\xEF\xBF\xBD\xEF\xBF\xBD"},                     /* cut off */
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *t = attnmap_utf8(cases[i].in);
        CHECK(strcmp(t, cases[i].out) == 0, "case %zu: '%s'", i, t);
        free(t);
    }
    float map[4] = {0.5f, 0.5f, 1, 0};
    char *rows[2] = {"\xff<", "ok"}, *cols[2] = {"\xc3", "\xef\xbf\xbf"};
    char *svg = attnmap_svg(map, 2, 2, rows, cols, "t\xfe");
    CHECK(utf8_valid(svg, strlen(svg)) && !strstr(svg, "\xef\xbf\xbf") && strstr(svg, "\xEF\xBF\xBD&lt;"),
          "SVG: %.200s", svg);
    free(svg);
    /* maps whose labels were set by hand: the JSON and the page keep every good byte */
    Model m;
    Vocab sv, tv;
    setup(&m, &sv, &tv);
    int src[2] = {4, 5}, tgt[1] = {6};
    AttnMaps a;
    attnmap_capture(&m, &sv, &tv, src, 2, tgt, 1, &a);
    free(a.src[0]), a.src[0] = xstrdup("x\xffy");
    char *text = attnmap_json(&a);
    CHECK(utf8_valid(text, strlen(text)) && strstr(text, "\"x\xEF\xBF\xBDy\""), "maps.json: %.120s", text);
    free(text);
    char path[80];
    snprintf(path, sizeof path, "/tmp/qkv-attn-utf8-%d.html", (int)getpid());
    CHECK(attnview_write("{\"a\":\"\xff<\"}", path) == 0, "%s", err_msg());
    size_t len;
    char *html = read_file(path, &len);
    unlink(path);
    CHECK(html && utf8_valid(html, len) && strstr(html, "\"\xEF\xBF\xBD\\u003c\""), "page not UTF-8");
    free(html);
    attnmap_free(&a);
    model_free(&m);
    vocab_free(&sv), vocab_free(&tv);
}

/* A small maps object that claims enormous shapes is refused by its shapes, before
 * anything is allocated for them (an allocation that size would end in out of memory). */
static void test_json_claims_checked_before_allocating(void) {
    json_t *root = json_object(), *toks = json_array();
    for (int i = 0; i < 4096; i++) json_array_append_new(toks, json_string("a"));
    json_object_set_new(root, "format", json_string("qkv-attention-2"));
    json_object_set_new(root, "heads", json_integer(256));
    json_object_set_new(root, "d_head", json_integer(8192));
    json_object_set(root, "source", toks);
    json_object_set(root, "target_in", toks);
    json_object_set_new(root, "target_out", toks);
    const char *kinds[3] = {"encoder_self", "decoder_self", "cross"};
    for (int k = 0; k < 3; k++) {
        json_t *layers = json_array();
        for (int l = 0; l < 16; l++) json_array_append_new(layers, json_array());
        json_object_set_new(root, kinds[k], layers);
    }
    AttnMaps b;
    CHECK(attnmap_from_json(root, &b, "big.json") != 0 &&
              strcmp(err_msg(), "big.json: 'encoder_self'[0] does not hold 256 heads") == 0,
          "%s", err_msg());
    json_decref(root);
}

/* Pharaoh links are digits, a dash, digits: nothing strtol would also take; a link written
 * twice counts once; a link past the sentence is found. */
static void test_alignment_links_strict_unique_in_range(void) {
    int pairs[8][2];
    const char *loose[] = {"1- 2", "+1-2", "1-+2", " 1-2x", "1--2", "0x1-2", "99999999999-0", "1-2-3"};
    for (size_t i = 0; i < sizeof loose / sizeof *loose; i++)
        CHECK(align_parse(loose[i], pairs, 8) < 0, "'%s' accepted", loose[i]);
    CHECK(align_parse(" 1-2\t3-4 ", pairs, 8) == 2 && pairs[1][0] == 3 && pairs[1][1] == 4, "blanks around links");
    int n = align_parse("2-1 0-0 2-1 0-0 1-1", pairs, 8);
    CHECK(n == 5 && align_unique(pairs, n) == 3 && pairs[0][0] == 0 && pairs[2][0] == 2, "repeats");
    int links[2] = {0, 1};
    AlignCounts c = {0};
    align_score(links, 2, pairs, align_unique(pairs, align_parse("0-0 0-0 1-1", pairs, 8)), &c);
    CHECK(c.gold == 2 && c.hits == 2 && align_aer(&c) == 0.0, "gold %ld hits %ld", c.gold, c.hits);
    n = align_parse("0-0 1-2 3-1", pairs, 8);
    CHECK(align_out_of_range(pairs, n, 4, 3) == -1 && align_out_of_range(pairs, n, 3, 3) == 2 &&
              align_out_of_range(pairs, n, 4, 2) == 1,
          "range");
}

/* The links of selection pk by the lower-level calls: one head's map, or head averages
 * (attnmap_head_average) of one layer or of all layers averaged, pooled by align_from_map. */
/* The links of pick pk as the lower-level calls give them; with null_word >= 0, that word
 * left unaligned and the rest matched one to one, as --null on reads them */
static void links_by_hand(const AttnMaps *a, AlignPick pk, const int *sw, int nsw, const int *tw, int ntw,
                          int null_word, int *links) {
    size_t per = (size_t)a->T * a->S;
    float *map = xcalloc(per, sizeof(float)), *avg = xmalloc(sizeof(float) * per);
    if (pk.head >= 0) memcpy(map, attnmap_at(a, ATTN_CROSS, pk.layer, pk.head), sizeof(float) * per);
    else if (pk.layer >= 0) attnmap_head_average(a, ATTN_CROSS, pk.layer, map);
    else
        for (int l = 0; l < a->layers[ATTN_CROSS]; l++) {
            attnmap_head_average(a, ATTN_CROSS, l, avg);
            for (size_t i = 0; i < per; i++) map[i] += avg[i] / (float)a->layers[ATTN_CROSS];
        }
    align_from_map(map, a->S, tw, a->T, ntw, sw, a->S, nsw, links);
    if (null_word >= 0) {
        double *weight = xmalloc(sizeof(double) * (size_t)(ntw ? ntw : 1));
        for (int w = 0; w < ntw; w++) weight[w] = w == null_word ? 0.0 : 1.0;
        align_match(map, a->S, tw, a->T, ntw, sw, a->S, nsw, weight, links);
        free(weight);
    }
    free(map), free(avg);
}

/* The links aligner_links reads off a sentence pair are those the lower-level calls give
 * for the same maps, for every selection; aligner_score's counts are align_score's on
 * those links; both refuse gold links past the pair, a malformed gold line and a side
 * longer than the positions, with the file and line, adding nothing. */
static void test_aligner_pair_links_and_scores(void) {
    Model m;
    Vocab sv, tv;
    setup(&m, &sv, &tv);
    AlignPick picks[3 * (4 + 1) + 1]; /* the model's 3 decoder layers of 4 heads */
    int n_picks = aligner_picks(3, 4, picks);
    CHECK(n_picks == 16 && picks[0].layer == 0 && picks[0].head == -1 && picks[1].head == 0 && picks[5].layer == 1 &&
              picks[10].layer == 2 && picks[10].head == -1 && picks[14].layer == 2 && picks[14].head == 3 &&
              picks[15].layer == -1 && picks[15].head == -1,
          "%d picks, not in report order", n_picks);
    /* the same pair by hand: ids, maps, words, each selection's links */
    AlignPair p = {"w0 w1 w2 w3", "w4 w5 w6", NULL, "a.src", "a.tgt", "a.gold", 7};
    int sid[8], tid[8];
    int ns = encode_line(p.src, TOKENIZER_WORD, &sv, sid, 8), nt = encode_line(p.tgt, TOKENIZER_WORD, &tv, tid, 8);
    CHECK(ns == 4 && nt == 3, "encoded %d and %d ids", ns, nt);
    AttnMaps a;
    attnmap_capture(&m, &sv, &tv, sid, ns, tid, nt, &a);
    int sw[8], tw[8], nsw = align_words(a.src, a.S, TOKENIZER_WORD, sw);
    int ntw = align_words(a.tgt_out, a.T, TOKENIZER_WORD, tw);
    int want[16][3], differ = 0;
    if (nsw == 4 && ntw == 3)
        for (int k = 0; k < n_picks; k++) links_by_hand(&a, picks[k], sw, nsw, tw, ntw, -1, want[k]);
    attnmap_free(&a);
    CHECK(nsw == 4 && ntw == 3, "%d source and %d target words", nsw, ntw);
    for (int k = 1; k < n_picks; k++) differ += memcmp(want[k], want[0], sizeof want[0]) != 0;
    CHECK(differ >= 8, "only %d selections link differently from the first: the check below would prove little",
          differ);
    for (int k = 0; k < n_picks; k++) {
        int *links = NULL, n = aligner_links(&m, TOKENIZER_WORD, &sv, &tv, &p, picks[k], &links);
        int same = n == 3 && memcmp(links, want[k], sizeof want[k]) == 0;
        free(links);
        CHECK(same, "pick (%d, %d): %d links, not those of the maps", picks[k].layer, picks[k].head, n);
    }
    /* gold: two links of layer 2's average (one written twice) and 3-2 */
    char gold[64];
    snprintf(gold, sizeof gold, "%d-0 %d-1 %d-0 3-2", want[10][0], want[10][1], want[10][0]);
    p.gold = gold;
    int pairs[8][2], ng = align_unique(pairs, align_parse(gold, pairs, 8));
    AlignCounts counts[16] = {{0}};
    CHECK(aligner_score(&m, TOKENIZER_WORD, &sv, &tv, &p, picks, n_picks, counts) == 0, "%s", err_msg());
    for (int k = 0; k < n_picks; k++) {
        AlignCounts c = {0};
        align_score(want[k], 3, pairs, ng, &c);
        CHECK(counts[k].hits == c.hits && counts[k].predicted == c.predicted && counts[k].gold == c.gold && c.gold == 3,
              "pick %d: %ld/%ld/%ld hits/predicted/gold, by hand %ld/%ld/%ld", k, counts[k].hits, counts[k].predicted,
              counts[k].gold, c.hits, c.predicted, c.gold);
    }
    CHECK(counts[10].hits >= 2, "layer 2's average: %ld hits", counts[10].hits);
    /* refused, with where, and nothing added */
    AlignCounts before[16];
    memcpy(before, counts, sizeof counts);
    p.gold = "0-0 4-1";
    CHECK(aligner_score(&m, TOKENIZER_WORD, &sv, &tv, &p, picks, n_picks, counts) == -1 &&
              strcmp(err_msg(), "a.gold:7: link 4-1 is out of range: the pair has 4 source and 3 target words") == 0,
          "out of range: %s", err_msg());
    p.gold = "0-0 1-x";
    CHECK(aligner_score(&m, TOKENIZER_WORD, &sv, &tv, &p, picks, n_picks, counts) == -1 &&
              strcmp(err_msg(), "a.gold:7: not Pharaoh alignments (i-j pairs)") == 0,
          "malformed: %s", err_msg());
    p.gold = "0-0", p.tgt = "";
    CHECK(aligner_score(&m, TOKENIZER_WORD, &sv, &tv, &p, picks, n_picks, counts) == -1 &&
              strcmp(err_msg(), "a.gold:7: link 0-0 is out of range: the pair has an empty side") == 0,
          "empty side: %s", err_msg());
    CHECK(memcmp(before, counts, sizeof counts) == 0, "a refused pair added to the counts");
    int *links = NULL;
    CHECK(aligner_links(&m, TOKENIZER_WORD, &sv, &tv, &p, picks[10], &links) == 0 && !links, "an empty side has links");
    char long_line[31 * 3 + 1] = "";
    for (int i = 0; i < 31; i++) strcat(long_line, "w1 ");
    p.src = long_line, p.tgt = "w4";
    CHECK(aligner_links(&m, TOKENIZER_WORD, &sv, &tv, &p, picks[10], &links) == -1 &&
              strcmp(err_msg(), "a.src:7: more than the 30 tokens this model has positions for") == 0,
          "too long: %s", err_msg());
    model_free(&m);
    vocab_free(&sv), vocab_free(&tv);
}

/* The null decision's weights on hand-built rows: a target word whose prefix column
 * outweighs every source word gets strongest / prefix, the others 1 (a tie, a source word
 * summed over its pieces that beats the prefix, a prefix that sent nothing); a target word
 * is read at its first row; EOS and pieces of no word count for nothing. */
static void test_null_weights_on_hand_built_rows(void) {
    /* 3 target pieces (word 0, word 1 in two pieces), source pieces s0 s1 | s2 (word 1 in
     * two pieces), EOS; the last column is what came from no source word */
    int tw[3] = {0, 1, 1}, sw[4] = {0, 1, 1, -1};
    float from[3 * 5] = {
        0.30f, 0.10f, 0.10f, 0.00f, 0.50f, /* word 0: prefix 0.5 > 0.3 and 0.2: 0.3 / 0.5 */
        0.10f, 0.20f, 0.20f, 0.00f, 0.50f, /* word 1, read at its first piece: source word 1 = 0.4 */
        0.90f, 0.00f, 0.00f, 0.00f, 0.05f, /* against the prefix's 0.5: 0.8 (its second piece counts for nothing) */
    };
    double weight[2];
    align_null_weights(from, 4, tw, 3, 2, sw, 2, weight);
    CHECK(fabs(weight[0] - 0.6) < 1e-6 && fabs(weight[1] - 0.8) < 1e-6, "weights %g %g, want 0.6 0.8", weight[0],
          weight[1]);
    /* a source word's pieces summed: 0.3 + 0.3 beat the prefix's 0.5 */
    float split[1 * 5] = {0.05f, 0.30f, 0.30f, 0.00f, 0.50f};
    int tw1[1] = {0};
    align_null_weights(split, 4, tw1, 1, 1, sw, 2, weight);
    CHECK(weight[0] == 1.0, "a source word of two pieces (0.6) lost to a prefix of 0.5: weight %g", weight[0]);
    /* a tie is no discount (a row of zeros, as a row whose every proximity clips) */
    float tie[1 * 5] = {0.5f, 0.0f, 0.0f, 0.0f, 0.5f};
    align_null_weights(tie, 4, tw1, 1, 1, sw, 2, weight);
    CHECK(weight[0] == 1.0, "a tie between the prefix and a source word discounted the word: %g", weight[0]);
    /* the EOS column counts for no source word: 0.1 + 0.1 against 0.3 */
    float eos[1 * 5] = {0.1f, 0.1f, 0.1f, 0.9f, 0.3f};
    align_null_weights(eos, 4, tw1, 1, 1, sw, 2, weight);
    CHECK(fabs(weight[0] - 0.2 / 0.3) < 1e-6, "the EOS column's 0.9 counted for a source word: %g", weight[0]);
    /* a target piece of no word is skipped */
    int tw2[2] = {-1, 0};
    float skip[2 * 5] = {0.0f, 0.0f, 0.0f, 0.0f, 9.0f, 0.6f, 0.1f, 0.1f, 0.0f, 0.2f};
    align_null_weights(skip, 4, tw2, 2, 1, sw, 2, weight);
    CHECK(weight[0] == 1.0, "a piece of no word (the EOS row) counted for word 0: %g", weight[0]);
    /* no source words: nothing to weigh */
    int none_sw[4] = {-1, -1, -1, -1};
    align_null_weights(eos, 4, tw1, 1, 1, none_sw, 0, weight);
    CHECK(weight[0] == 1.0, "a sentence without source words was discounted: %g", weight[0]);
    /* the scores count an unlinked word as no prediction, and say how many were left */
    AlignCounts c = {0};
    int gold[2][2] = {{1, 1}, {0, 2}}, scored[3] = {1, -1, 0};
    align_score(scored, 3, gold, 2, &c);
    CHECK(c.hits == 1 && c.predicted == 2 && c.gold == 2 && c.words == 3, "%ld/%ld/%ld/%ld hits/predicted/gold/words",
          c.hits, c.predicted, c.gold, c.words);
}

/* align_match on hand-built maps: as many words linked as there can be, one to one, and of
 * those linkings the one whose scores multiply to the most; a word's pairs weigh times its
 * weight, a word left over is unaligned under weights and keeps its argmax without, a word
 * is read at its first piece, and a source word given nothing is no link. */
static void test_match_on_hand_built_rows(void) {
    /* "Ein Mann" -> "A man" as a Multi30k model reads it: the determiner reads the noun
     * (for its gender) more than the noun's word does. Taking the strongest pair first
     * gives the noun to the determiner and the determiner to the noun (0.46 * 0.01); the
     * matching gives each its own (0.18 * 0.37) */
    int tw[3] = {0, 1, 2}, sw[3] = {0, 1, -1}, sw2[2] = {0, 1}, links[3];
    float ein_mann[2 * 2] = {0.18f, 0.46f, 0.01f, 0.37f};
    align_from_map(ein_mann, 2, tw, 2, 2, sw2, 2, 2, links);
    CHECK(links[0] == 1 && links[1] == 1, "argmax links %d %d, want 1 1", links[0], links[1]);
    align_match(ein_mann, 2, tw, 2, 2, sw2, 2, 2, NULL, links);
    CHECK(links[0] == 0 && links[1] == 1, "A %d (want 0), man %d (want 1)", links[0], links[1]);
    /* the scores multiply: 0.3 * 0.3 beats 0.9 * 0.02, a link the word gives almost nothing
     * (added up, 0.92 would beat 0.6) */
    float weak[2 * 2] = {0.9f, 0.3f, 0.3f, 0.02f};
    align_match(weak, 2, tw, 2, 2, sw2, 2, 2, NULL, links);
    CHECK(links[0] == 1 && links[1] == 0, "links %d %d, want 1 0 (the product)", links[0], links[1]);
    /* a determiner, its noun and a particle that reads the determiner most of all, two
     * source words: the particle's prefix sent it 5 times what the determiner did, so its
     * 0.9 weighs 0.18, and the determiner and the noun are linked (0.3 * 0.9 against the
     * noun and the particle's 0.9 * 0.18); the particle is left over, unaligned */
    float map[3 * 3] = {
        0.30f, 0.60f, 0.0f, /* det: argmax the noun */
        0.05f, 0.90f, 0.0f, /* noun: the noun, more strongly */
        0.90f, 0.05f, 9.0f, /* particle; the EOS column is no word */
    };
    double weight[3] = {1.0, 1.0, 0.2}, whole[3] = {1.0, 1.0, 1.0};
    align_from_map(map, 3, tw, 3, 3, sw, 3, 2, links);
    CHECK(links[0] == 1 && links[1] == 1 && links[2] == 0, "argmax links %d %d %d", links[0], links[1], links[2]);
    align_match(map, 3, tw, 3, 3, sw, 3, 2, weight, links);
    CHECK(links[0] == 0 && links[1] == 1 && links[2] == -1, "det %d (want 0), noun %d (want 1), particle %d (want -1)",
          links[0], links[1], links[2]);
    /* undiscounted, the noun and the particle win (0.9 * 0.9) and the determiner is left
     * over: unaligned under weights, its argmax without. The discount is what links it */
    align_from_map(map, 3, tw, 3, 3, sw, 3, 2, links);
    align_match(map, 3, tw, 3, 3, sw, 3, 2, whole, links);
    CHECK(links[0] == -1 && links[1] == 1 && links[2] == 0, "undiscounted: %d %d %d, want -1 1 0", links[0], links[1],
          links[2]);
    align_from_map(map, 3, tw, 3, 3, sw, 3, 2, links);
    align_match(map, 3, tw, 3, 3, sw, 3, 2, NULL, links);
    CHECK(links[0] == 1 && links[1] == 1 && links[2] == 0, "no weights: %d %d %d, want 1 1 0", links[0], links[1],
          links[2]);
    /* a word already unlinked (-1) takes nothing, whatever its weight */
    align_from_map(map, 3, tw, 3, 3, sw, 3, 2, links);
    links[1] = -1;
    align_match(map, 3, tw, 3, 3, sw, 3, 2, NULL, links);
    CHECK(links[0] == 1 && links[1] == -1 && links[2] == 0, "det %d, noun %d, particle %d: want 1 -1 0", links[0],
          links[1], links[2]);
    /* three words, two source words: 0.9 * 0.3 beats 0.9 * 0.2 and 0.8 * 0.3; the word left
     * over keeps its argmax without weights, and is unaligned under them */
    int three[3] = {0, 0, 0};
    float over[3 * 2] = {0.9f, 0.1f, 0.8f, 0.2f, 0.7f, 0.3f};
    align_match(over, 2, tw, 3, 3, sw2, 2, 2, NULL, three);
    CHECK(three[0] == 0 && three[1] == 0 && three[2] == 1, "links %d %d %d, want 0 0 1", three[0], three[1], three[2]);
    three[0] = three[1] = three[2] = 0;
    align_match(over, 2, tw, 3, 3, sw2, 2, 2, whole, three);
    CHECK(three[0] == 0 && three[1] == -1 && three[2] == 1, "weights 1: links %d %d %d, want 0 -1 1", three[0],
          three[1], three[2]);
    /* word 0 in two pieces, 0.6 then 0.95 on source 0, word 1 0.7: read at its first piece
     * word 0 takes source 1 (0.4 * 0.7 against 0.6 * 0.3; averaged, 0.775 would take 0) */
    int tw2[3] = {0, 0, 1}, two[2] = {0, 0};
    float pieces[3 * 2] = {0.6f, 0.4f, 0.95f, 0.05f, 0.7f, 0.3f};
    align_match(pieces, 2, tw2, 3, 2, sw2, 2, 2, NULL, two);
    CHECK(two[0] == 1 && two[1] == 0, "links %d %d, want 1 0 (a word read at its first piece)", two[0], two[1]);
    /* one link more wins over a stronger one: word 0 takes its second choice so that word 1,
     * which gives source 1 nothing, is linked too; a word of weight 0 claims nothing */
    float zero[2 * 2] = {1.0f, 0.5f, 1.0f, 0.0f};
    align_match(zero, 2, tw, 2, 2, sw2, 2, 2, NULL, two);
    CHECK(two[0] == 1 && two[1] == 0, "links %d %d, want 1 0", two[0], two[1]);
    double nothing[2] = {1.0, 0.0};
    two[0] = two[1] = 0;
    align_match(zero, 2, tw, 2, 2, sw2, 2, 2, nothing, two);
    CHECK(two[0] == 0 && two[1] == -1, "links %d %d, want 0 -1", two[0], two[1]);
    /* a target piece of no word weighs nothing; no source words: the links stay */
    int tw_eos[2] = {-1, 0}, one[1] = {1}, none_sw[2] = {-1, -1};
    float eos_row[2 * 2] = {9.0f, 0.0f, 0.2f, 0.8f};
    align_match(eos_row, 2, tw_eos, 2, 1, sw2, 2, 2, NULL, one);
    CHECK(one[0] == 1, "the EOS row counted: link %d", one[0]);
    one[0] = -1;
    align_match(eos_row, 2, tw_eos, 2, 1, none_sw, 2, 0, NULL, one);
    CHECK(one[0] == -1, "a sentence without source words got link %d", one[0]);
}

/* A null measure that says target position `null_position` came wholly from its prefix */
static int null_position;
static void prefix_at(Model *m, const AttnMaps *a, float *from) {
    (void)m;
    memset(from, 0, sizeof(float) * (size_t)a->T * (a->S + 1));
    for (int t = 0; t < a->T; t++) from[(size_t)t * (a->S + 1) + (t == null_position ? a->S : 0)] = 1.0f;
}

/* A measure whose target position t came from source position S - 2 - t (the last before
 * EOS first), but position 1, which got 0.5 from position 0's source word and twice that
 * from its prefix */
static void reversed(Model *m, const AttnMaps *a, float *from) {
    (void)m;
    memset(from, 0, sizeof(float) * (size_t)a->T * (a->S + 1));
    for (int t = 0; t < a->T && a->S - 2 - t >= 0; t++) {
        from[(size_t)t * (a->S + 1) + (a->S - 2 - (t == 1 ? 0 : t))] = 0.5f;
        if (t == 1) from[(size_t)t * (a->S + 1) + a->S] = 1.0f;
    }
}

/* aligner_links_null and aligner_score_null leave exactly the words their measure says
 * came from the prefix unlinked, and with no measure give aligner_links' links */
static void test_aligner_null_measure(void) {
    Model m;
    Vocab sv, tv;
    setup(&m, &sv, &tv);
    AlignPick picks[16];
    int n_picks = aligner_picks(3, 4, picks);
    AlignPair p = {"w0 w1 w2 w3", "w4 w5 w6", NULL, "a.src", "a.tgt", "a.gold", 7};
    int *plain = NULL, *off = NULL, *on = NULL;
    int n = aligner_links(&m, TOKENIZER_WORD, &sv, &tv, &p, picks[10], &plain);
    int n_off = aligner_links_null(&m, TOKENIZER_WORD, &sv, &tv, &p, picks[10], NULL, 0, &off);
    null_position = 1;
    int n_on = aligner_links_null(&m, TOKENIZER_WORD, &sv, &tv, &p, picks[10], prefix_at, 1, &on);
    int same = n == 3 && n_off == 3 && n_on == 3 && memcmp(plain, off, 3 * sizeof(int)) == 0;
    /* the others are linked, one to one (align_match: the source has four words) */
    int unlinked = n_on == 3 && on[0] >= 0 && on[1] == -1 && on[2] >= 0 && on[0] != on[2];
    free(plain), free(off), free(on);
    CHECK(same, "no measure changed the links");
    CHECK(unlinked, "the word the measure gives to its prefix is still linked, or another lost its link");
    /* every selection: the null word unaligned and the rest matched, as by hand; where two
     * words want the same source word, the matching moved one (else this proves little) */
    int sid[8], tid[8], moved = 0;
    int ns = encode_line(p.src, TOKENIZER_WORD, &sv, sid, 8), nt = encode_line(p.tgt, TOKENIZER_WORD, &tv, tid, 8);
    AttnMaps a;
    attnmap_capture(&m, &sv, &tv, sid, ns, tid, nt, &a);
    int sw[8], tw[8], nsw = align_words(a.src, a.S, TOKENIZER_WORD, sw),
                      ntw = align_words(a.tgt_out, a.T, TOKENIZER_WORD, tw);
    for (int k = 0; k < n_picks && nsw == 4 && ntw == 3; k++) {
        int want[3], argmax[3], *got = NULL;
        links_by_hand(&a, picks[k], sw, nsw, tw, ntw, 1, want);
        links_by_hand(&a, picks[k], sw, nsw, tw, ntw, -1, argmax);
        moved += want[0] != argmax[0] || want[2] != argmax[2];
        int n_got = aligner_links_null(&m, TOKENIZER_WORD, &sv, &tv, &p, picks[k], prefix_at, 1, &got);
        int same_links = n_got == 3 && memcmp(got, want, sizeof want) == 0;
        free(got);
        CHECK(same_links, "pick %d: the links are not the null word's and the matching's of the maps", k);
    }
    attnmap_free(&a);
    CHECK(nsw == 4 && ntw == 3 && moved >= 2, "%d source, %d target words; the matching moved %d selections' links",
          nsw, ntw, moved);
    AlignCounts with[16] = {{0}}, without[16] = {{0}};
    p.gold = "0-0 1-1 2-2";
    CHECK(aligner_score_null(&m, TOKENIZER_WORD, &sv, &tv, &p, picks, n_picks, prefix_at, 1, with) == 0 &&
              aligner_score(&m, TOKENIZER_WORD, &sv, &tv, &p, picks, n_picks, without) == 0,
          "%s", err_msg());
    for (int k = 0; k < n_picks; k++)
        CHECK(with[k].predicted == 2 && without[k].predicted == 3 && with[k].words == 3 && without[k].words == 3,
              "pick %d: %ld and %ld predicted of %ld words", k, with[k].predicted, without[k].predicted, with[k].words);
    /* the contributions pick reads the measure's source columns: target words 0 and 2 get
     * source words 3 and 1 from it, whatever the attention says, and word 1 word 0's; with
     * the null decision on, word 1 (its prefix outweighs it) loses that word to word 0 and
     * is left over, unaligned */
    AlignPick contrib = {ALIGN_CONTRIB, -1};
    int *byc = NULL, *byc_null = NULL;
    int nc = aligner_links_null(&m, TOKENIZER_WORD, &sv, &tv, &p, contrib, reversed, 0, &byc);
    int nc2 = aligner_links_null(&m, TOKENIZER_WORD, &sv, &tv, &p, contrib, reversed, 1, &byc_null);
    CHECK(nc == 3 && byc[0] == 3 && byc[1] == 3 && byc[2] == 1, "contributions pick: %d links %d %d %d, want 3 3 1", nc,
          byc ? byc[0] : -9, byc ? byc[1] : -9, byc ? byc[2] : -9);
    CHECK(nc2 == 3 && byc_null[0] == 3 && byc_null[1] == -1 && byc_null[2] == 1,
          "contributions pick, null on: links %d %d %d, want 3 -1 1", byc_null ? byc_null[0] : -9,
          byc_null ? byc_null[1] : -9, byc_null ? byc_null[2] : -9);
    free(byc), free(byc_null);
    model_free(&m);
    vocab_free(&sv), vocab_free(&tv);
}

/* The particles task's gold matches the sentences it writes: its pairs are translate's of
 * the same seed with "ga" and "wo" inserted, every other target word keeps translate's
 * link (index moved past the particles), and no particle is linked. The other tasks'
 * files are what the same seed always wrote (tests/attention.sh compares them whole). */
static void test_particles_gold_matches_sentences(void) {
    char base[] = "/tmp/qkv-toy-XXXXXX";
    CHECK(mkdtemp(base), "mkdtemp");
    char tdir[64], pdir[64], path[96];
    snprintf(tdir, sizeof tdir, "%s/t", base), snprintf(pdir, sizeof pdir, "%s/p", base);
    int rc = toydata_write(tdir, "translate", 300, 10, 10, 7) | toydata_write(pdir, "particles", 300, 10, 10, 7);
    char **f[2][3] = {{0}};
    int nl[2][3] = {{0}};
    const char *ext[3] = {"src", "tgt", "align"}, *dirs[2] = {tdir, pdir};
    for (int d = 0; d < 2; d++)
        for (int e = 0; e < 3; e++) {
            snprintf(path, sizeof path, "%s/train.%s", dirs[d], ext[e]);
            f[d][e] = read_file_lines(path, &nl[d][e]);
        }
    int ok = rc == 0, particles = 0, words = 0, line = -1;
    for (int i = 0; ok && i < 300; i++) {
        line = i + 1;
        ok = nl[0][0] == 300 && nl[1][0] == 300 && nl[1][1] == 300 && nl[1][2] == 300 &&
             strcmp(f[0][0][i], f[1][0][i]) == 0;
        char tbuf[512], pbuf[512];
        snprintf(tbuf, sizeof tbuf, "%s", f[0][1][i]), snprintf(pbuf, sizeof pbuf, "%s", f[1][1][i]);
        char *tw[64], *pw[64], *sp;
        int nt = 0, np = 0, moved[64];
        for (char *w = strtok_r(tbuf, " ", &sp); w && nt < 64; w = strtok_r(NULL, " ", &sp)) tw[nt++] = w;
        for (char *w = strtok_r(pbuf, " ", &sp); w && np < 64; w = strtok_r(NULL, " ", &sp)) pw[np++] = w;
        /* translate's words in order once the particles are out; moved[j] = their new index */
        int k = 0;
        for (int j = 0; ok && j < np; j++) {
            if (strcmp(pw[j], "ga") == 0 || strcmp(pw[j], "wo") == 0) {
                particles++;
                continue;
            }
            ok = k < nt && strcmp(pw[j], tw[k]) == 0;
            moved[k++] = j;
        }
        ok = ok && k == nt;
        int tl[64][2], pl[64][2];
        int ntl = align_parse(f[0][2][i], tl, 64), npl = align_parse(f[1][2][i], pl, 64);
        ok = ok && ntl == nt && npl == nt;
        for (int j = 0; ok && j < npl; j++) ok = pl[j][0] == tl[j][0] && pl[j][1] == moved[tl[j][1]];
        for (int j = 0; ok && j < npl; j++) ok = strcmp(pw[pl[j][1]], "ga") != 0 && strcmp(pw[pl[j][1]], "wo") != 0;
        /* where they go: one "ga" a clause ("e" joins two), one "wo" a transitive verb, each
         * right after a noun phrase's last word (a noun or adjective, not a determiner) */
        int ga = 0, wo = 0, clauses = 1, transitive = 0;
        for (int j = 0; j < np; j++) {
            int is_ga = strcmp(pw[j], "ga") == 0, is_wo = strcmp(pw[j], "wo") == 0;
            ga += is_ga, wo += is_wo, clauses += strcmp(pw[j], "e") == 0;
            char key[40];
            snprintf(key, sizeof key, " %s ", j ? pw[j - 1] : "");
            if ((is_ga || is_wo) && (j == 0 || strstr(" lo la los las un una unos unas e ga wo ", key))) ok = 0;
        }
        char sbuf[512];
        snprintf(sbuf, sizeof sbuf, "%s", f[1][0][i]);
        static const char *verbs = " sees see likes like finds find follows follow eats eat helps help ";
        for (char *w = strtok_r(sbuf, " ", &sp); w; w = strtok_r(NULL, " ", &sp)) {
            char key[40];
            snprintf(key, sizeof key, " %s ", w); /* a verb that takes an object */
            transitive += strstr(verbs, key) != NULL;
        }
        ok = ok && ga == clauses && wo == transitive;
        words += np;
    }
    for (int d = 0; d < 2; d++)
        for (int e = 0; e < 3; e++) free_lines(f[d][e], nl[d][e]);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    CHECK(system(cmd) == 0, "could not remove %s", base);
    CHECK(ok, "train line %d: the particles task is not translate's pair with particles, or its gold is not", line);
    /* the particles are a real share of the target, as function words are in real gold */
    CHECK(particles > words / 8 && particles < words / 3, "%d particles of %d target words", particles, words);
}

/* A measure as the trainer's: a source share for every (layer, position) and the last
 * cross block's contributions for every (position, source position and prefix), at their
 * longest */
static void long_shares(Model *m, AttnMaps *a) {
    (void)m;
    a->share = xmalloc(sizeof(float) * (size_t)a->layers[ATTN_CROSS] * a->T);
    for (int i = 0; i < a->layers[ATTN_CROSS] * a->T; i++) a->share[i] = 0.1234567f + 0.0000001f * (float)i;
    a->null_from = xmalloc(sizeof(float) * (size_t)a->T * (a->S + 1));
    for (int i = 0; i < a->T * (a->S + 1); i++) a->null_from[i] = 0.7654321f - 0.0000001f * (float)i;
}

/* watch_check's bound on a snapshot's size holds for what watch_record writes (the
 * source share and the last cross block's contributions included), and is not loose by
 * more than twice (it takes every number at its longest); both read back. */
static void test_watch_snapshot_bound(void) {
    Model m;
    Vocab sv, tv;
    setup(&m, &sv, &tv);
    WatchSentence w[2] = {{"w4 w5 w6 w7 w8 w9 w4", "w8 w9 w4 w5"}, {"w5 w6 \x01", "w7"}};
    char dir[80], path[120];
    snprintf(dir, sizeof dir, "/tmp/qkv-watch-bound-%d", (int)getpid());
    CHECK(watch_record(&m, TOKENIZER_WORD, &sv, &tv, w, 2, 7, dir, long_shares) == 0, "%s", err_msg());
    snprintf(path, sizeof path, "%s/watch/step-00000007.json", dir);
    size_t len;
    char *text = read_file(path, &len);
    WatchLog log;
    int loaded = watch_load(dir, &log) == 0;
    float back = loaded && log.snap[0].sentences[1].share ? log.snap[0].sentences[1].share[1] : -1;
    float null_back = loaded && log.snap[0].sentences[1].null_from ? log.snap[0].sentences[1].null_from[2] : -1;
    if (loaded) watch_free(&log);
    unlink(path);
    snprintf(path, sizeof path, "%s/watch", dir);
    rmdir(path), rmdir(dir);
    CHECK(text, "%s", err_msg());
    free(text);
    double bound = watch_snapshot_bound(&m, TOKENIZER_WORD, &sv, &tv, w, 2);
    CHECK(bound >= (double)len && bound <= 2.0 * (double)len, "%zu bytes written, bound %.0f", len, bound);
    CHECK(fabsf(back - 0.1234568f) < 1e-6f, "source share read back as %.7g, not 0.1234568", back);
    CHECK(fabsf(null_back - 0.7654319f) < 1e-6f,
          "the last cross block's contributions read back as %.7g, not 0.7654319", null_back);
    model_free(&m);
    vocab_free(&sv), vocab_free(&tv);
}

const TestCase attnmap_tests[] = {
    {"attention_capture_shapes_sums_masks_identity", test_capture_shapes_sums_masks_and_identity},
    {"attention_json_and_html_escaping", test_json_and_html_escaping},
    {"attention_anatomy_scores_softmax_contributions", test_anatomy_scores_contributions},
    {"attention_json_round_trip", test_json_round_trip},
    {"attention_viewer_page_compiled_verbatim", test_viewer_page_compiled_verbatim},
    {"attention_svg_labels_legend_escaping", test_svg_labels_legend_escaping},
    {"alignment_parse_score_aer_pooling", test_alignment_scores},
    {"attention_labels_become_valid_utf8", test_labels_become_valid_utf8},
    {"attention_json_claims_checked_before_allocating", test_json_claims_checked_before_allocating},
    {"alignment_links_strict_unique_in_range", test_alignment_links_strict_unique_in_range},
    {"alignment_aligner_pair_links_and_scores", test_aligner_pair_links_and_scores},
    {"alignment_null_weights_on_hand_built_rows", test_null_weights_on_hand_built_rows},
    {"alignment_match_on_hand_built_rows", test_match_on_hand_built_rows},
    {"alignment_aligner_null_measure", test_aligner_null_measure},
    {"toydata_particles_gold_matches_sentences", test_particles_gold_matches_sentences},
    {"watch_snapshot_bound_holds", test_watch_snapshot_bound},
    {NULL, NULL},
};
