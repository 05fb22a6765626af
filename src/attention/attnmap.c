/* attnmap: capture, JSON and the terminal view; see attnmap.h. */
#include "attention/attnmap.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/corpus.h"
#include "data/tokenize.h"
#include "util/atomic_file.h"
#include "util/err.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/text.h"

/* ---- text every writer can carry ----------------------------------------------------------- */

/* utf8_char (util/text.h) is the character attnmap_utf8 keeps as it is; a byte where it
 * gives 0 becomes U+FFFD. */
char *attnmap_utf8(const char *s) {
    StrBuf sb = {0};
    sb_append(&sb, "", 0);
    while (*s) {
        size_t n = utf8_char(s);
        if (n) sb_append(&sb, s, n), s += n;
        else sb_append(&sb, "\xEF\xBF\xBD", 3), s++;
    }
    return sb.buf;
}

/* Characters of s (as attnmap_utf8 counts them: a replaced byte is one). */
static int utf8_chars(const char *s) {
    int n = 0;
    for (size_t k; *s; s += k ? k : 1, n++) k = utf8_char(s);
    return n;
}

/* s in a field of `width` characters, right-aligned or left, cut to at most `max`
 * characters: a label longer than the column never splits a character in two. */
static void put_label(FILE *f, const char *s, int width, int max, int right) {
    int n = 0;
    const char *end = s;
    for (size_t k; *end && n < max; end += k ? k : 1, n++) k = utf8_char(end);
    int pad = width > n ? width - n : 0;
    if (right) fprintf(f, "%*s", pad, "");
    fput_spelled(f, s, (size_t)(end - s)); /* a control byte then takes its spelling's columns */
    if (!right) fprintf(f, "%*s", pad, "");
}

static const char *kind_names[ATTN_KINDS] = {"encoder_self", "decoder_self", "cross"};
static const char *kind_titles[ATTN_KINDS] = {"encoder self-attention", "decoder masked self-attention",
                                              "cross-attention (Q: decoder, K/V: encoder)"};

const char *attnmap_kind_name(int kind) { return kind_names[kind]; }
const char *attnmap_kind_title(int kind) { return kind_titles[kind]; }

int attnmap_rows(const AttnMaps *a, int kind) { return kind == ATTN_ENC_SELF ? a->S : a->T; }
int attnmap_cols(const AttnMaps *a, int kind) { return kind == ATTN_DEC_SELF ? a->T : a->S; }

const float *attnmap_at(const AttnMaps *a, int kind, int layer, int head) {
    return attnmap_slice(a, a->maps, kind, layer, head);
}

void attnmap_head_average(const AttnMaps *a, int kind, int layer, float *out) {
    size_t per = (size_t)attnmap_rows(a, kind) * attnmap_cols(a, kind);
    memset(out, 0, sizeof(float) * per);
    for (int h = 0; h < a->heads; h++) {
        const float *p = attnmap_at(a, kind, layer, h);
        for (size_t i = 0; i < per; i++) out[i] += p[i] / (float)a->heads;
    }
}

char **attnmap_row_labels(const AttnMaps *a, int kind) { return kind == ATTN_ENC_SELF ? a->src : a->tgt_out; }
char **attnmap_col_labels(const AttnMaps *a, int kind) { return kind == ATTN_DEC_SELF ? a->tgt_in : a->src; }

float *attnmap_slice(const AttnMaps *a, float *const *arrays, int kind, int layer, int head) {
    size_t per = (size_t)attnmap_rows(a, kind) * attnmap_cols(a, kind);
    return arrays[kind] + ((size_t)layer * a->heads + head) * per;
}

double attnmap_entropy(const AttnMaps *a, int kind, int layer, int head) {
    int rows = attnmap_rows(a, kind), cols = attnmap_cols(a, kind);
    float *avg = NULL;
    const float *p = head >= 0 ? attnmap_at(a, kind, layer, head) : NULL;
    if (!p) {
        avg = xmalloc(sizeof(float) * (size_t)rows * cols);
        attnmap_head_average(a, kind, layer, avg);
        p = avg;
    }
    double sum = 0.0;
    for (int i = 0; i < rows * cols; i++)
        if (p[i] > 0.0f) sum -= (double)p[i] * log((double)p[i]);
    free(avg);
    return sum / rows;
}

/* Head h's columns of x (n rows of d) as n rows of dh. */
static void copy_head(float *dst, const float *x, int n, int d, int h, int dh) {
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)i * dh, x + (size_t)i * d + (size_t)h * dh, sizeof(float) * (size_t)dh);
}

/* Everything but the weights, which the forward pass left in the acts: contributions from
 * the value norms, and each head's queries and keys. */
static void capture_anatomy(AttnMaps *out, const Model *m, int k, int l) {
    int rows = attnmap_rows(out, k), cols = attnmap_cols(out, k), H = out->heads, d = m->cfg.d_model, dh = out->d_head;
    size_t per = (size_t)rows * cols;
    const AttnActs *a = model_attention_acts(m, k, l);
    int kv_len = cols;
    AttnShape shape = {1, rows, cols, d, H, &kv_len, k == ATTN_DEC_SELF, 0, NULL, NULL, 0, 0};
    float *norms = xmalloc(sizeof(float) * (size_t)H * cols);
    attention_value_norms(norms, a, model_attention_params(m, k, l), &shape);
    for (int h = 0; h < H; h++) {
        const float *p = attnmap_at(out, k, l, h);
        float *c = attnmap_slice(out, out->contrib, k, l, h);
        for (size_t i = 0; i < per; i++) c[i] = p[i] * norms[(size_t)h * cols + i % cols];
    }
    for (int h = 0; h < H; h++) {
        copy_head(out->queries[k] + ((size_t)l * H + h) * rows * dh, a->q, rows, d, h, dh);
        copy_head(out->keys[k] + ((size_t)l * H + h) * cols * dh, a->k, cols, d, h, dh);
    }
    free(norms);
}

static void alloc_maps(AttnMaps *out) {
    for (int k = 0; k < ATTN_KINDS; k++) {
        size_t per = (size_t)out->heads * out->layers[k];
        size_t n = per * attnmap_rows(out, k) * attnmap_cols(out, k);
        out->maps[k] = xmalloc(sizeof(float) * n);
        out->scores[k] = xmalloc(sizeof(float) * n);
        out->contrib[k] = xmalloc(sizeof(float) * n);
        out->queries[k] = xmalloc(sizeof(float) * per * attnmap_rows(out, k) * out->d_head);
        out->keys[k] = xmalloc(sizeof(float) * per * attnmap_cols(out, k) * out->d_head);
    }
}

void attnmap_capture(Model *m, const Vocab *sv, const Vocab *tv, const int *src, int n_src, const int *tgt, int n_tgt,
                     AttnMaps *out) {
    memset(out, 0, sizeof *out);
    int S = n_src + 1, T = n_tgt + 1, H = m->cfg.heads;
    int *s = xmalloc(sizeof(int) * (size_t)S), *tin = xmalloc(sizeof(int) * (size_t)T),
        *tout = xmalloc(sizeof(int) * (size_t)T);
    batch_frame_source(src, n_src, s, S);
    batch_frame_target(tgt, n_tgt, tin, tout, T);
    ModelBatch b = {1, S, T, s, &S, tin, tout, &T, 0};
    out->S = S, out->T = T, out->heads = H, out->d_head = m->cfg.d_model / H;
    out->layers[ATTN_ENC_SELF] = m->cfg.encoder_layers;
    out->layers[ATTN_DEC_SELF] = out->layers[ATTN_CROSS] = m->cfg.decoder_layers;
    alloc_maps(out);
    /* the forward pass writes its scores straight into place, then forgets where */
    for (int k = 0; k < ATTN_KINDS; k++) {
        size_t per = (size_t)H * attnmap_rows(out, k) * attnmap_cols(out, k);
        for (int l = 0; l < out->layers[k]; l++) model_attention_keep_scores(m, k, l, out->scores[k] + per * (size_t)l);
    }
    model_reserve(m, model_arena_floats(m, 1, S, T));
    model_forward(m, &b, 0, 0, 0);
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < out->layers[k]; l++) model_attention_keep_scores(m, k, l, NULL);
    for (int k = 0; k < ATTN_KINDS; k++) {
        size_t per = (size_t)H * attnmap_rows(out, k) * attnmap_cols(out, k);
        for (int l = 0; l < out->layers[k]; l++) {
            memcpy(out->maps[k] + per * (size_t)l, model_attention_acts(m, k, l)->p, sizeof(float) * per);
            capture_anatomy(out, m, k, l);
        }
    }
    out->src = xmalloc(sizeof(char *) * (size_t)S);
    out->tgt_in = xmalloc(sizeof(char *) * (size_t)T);
    out->tgt_out = xmalloc(sizeof(char *) * (size_t)T);
    /* a vocabulary edited by hand may hold any bytes: labels are valid UTF-8 from here on */
    for (int i = 0; i < S; i++) out->src[i] = attnmap_utf8(vocab_token(sv, s[i]));
    for (int t = 0; t < T; t++) out->tgt_in[t] = attnmap_utf8(vocab_token(tv, tin[t]));
    for (int t = 0; t < T; t++) out->tgt_out[t] = attnmap_utf8(vocab_token(tv, tout[t]));
    free(s), free(tin), free(tout);
}

typedef struct {
    char **tok;
    int n, max;
} Words;

static void collect_word(const char *tok, size_t len, void *ctx) {
    Words *w = ctx;
    if (w->n >= w->max) return;
    char *t = xmalloc(len + 1);
    memcpy(t, tok, len);
    t[len] = '\0';
    w->tok[w->n++] = t;
}

/* Replaces a label by text (which it takes), as valid UTF-8: the text given on the
 * command line may hold any bytes. */
static void relabel(char **label, char *text) {
    free(*label);
    *label = attnmap_utf8(text);
    free(text);
}

/* Word/char vocabularies: labels 0..n-1 become the text's own tokens, when the text has
 * exactly the tokens the ids came from. */
static void label_words(char **labels, int n, int tokenizer, const char *text) {
    Words w = {xmalloc(sizeof(char *) * (size_t)(n + 1)), 0, n + 1};
    tokenize_line(tokenizer, text, collect_word, &w);
    for (int i = 0; i < w.n; i++) {
        if (w.n == n) relabel(&labels[i], w.tok[i]);
        else free(w.tok[i]);
    }
    free(w.tok);
}

void attnmap_surface_labels(AttnMaps *a, int tokenizer, const Vocab *sv, const Vocab *tv, const int *src,
                            const char *src_text, const int *tgt, const char *tgt_text) {
    int n_src = a->S - 1, n_tgt = a->T - 1;
    free(a->src_unk);
    a->src_unk = xcalloc((size_t)a->S, 1);
    for (int i = 0; i < n_src; i++) a->src_unk[i] = src[i] == VOCAB_UNK;
    if (sv->spm) {
        for (int i = 0; i < n_src; i++) relabel(&a->src[i], decode_ids(&src[i], 1, tokenizer, sv));
    } else {
        label_words(a->src, n_src, tokenizer, src_text);
    }
    if (tv->spm) {
        for (int t = 0; t < n_tgt; t++) relabel(&a->tgt_out[t], decode_ids(&tgt[t], 1, tokenizer, tv));
    } else if (tgt_text) {
        label_words(a->tgt_out, n_tgt, tokenizer, tgt_text);
    } else {
        /* a produced <unk>: the source word the last layer's cross-attention weighs most */
        int L = a->layers[ATTN_CROSS], S = a->S;
        float *avg = xmalloc(sizeof(float) * (size_t)a->T * S);
        attnmap_head_average(a, ATTN_CROSS, L - 1, avg);
        for (int t = 0; t < n_tgt; t++) {
            if (tgt[t] != VOCAB_UNK) continue;
            int best = 0;
            for (int j = 1; j < n_src; j++)
                if (avg[(size_t)t * S + j] > avg[(size_t)t * S + best]) best = j;
            relabel(&a->tgt_out[t], xstrdup(a->src[best]));
        }
        free(avg);
    }
    for (int t = 1; t < a->T; t++) relabel(&a->tgt_in[t], xstrdup(a->tgt_out[t - 1])); /* BOS y1 .. yn */
}

void attnmap_free(AttnMaps *a) {
    if (!a) return;
    for (int i = 0; i < a->S && a->src; i++) free(a->src[i]);
    for (int t = 0; t < a->T && a->tgt_in; t++) free(a->tgt_in[t]), free(a->tgt_out[t]);
    free(a->src), free(a->tgt_in), free(a->tgt_out);
    for (int k = 0; k < ATTN_KINDS; k++)
        free(a->maps[k]), free(a->scores[k]), free(a->contrib[k]), free(a->queries[k]), free(a->keys[k]);
    free(a->share), free(a->null_from), free(a->src_unk);
    memset(a, 0, sizeof *a);
}

/* ---- JSON ------------------------------------------------------------------------------- */

/* Written with jansson, whose escaping is the one qkv's JSON gets. Labels are made valid
 * UTF-8 where they are made; maps built elsewhere (the tests) get the same treatment
 * here, each bad byte a U+FFFD, rather than a file jansson would refuse to write. */
static json_t *json_token(const char *s) {
    char *t = attnmap_utf8(s);
    json_t *j = xcheck(json_string(t));
    free(t);
    return j;
}

static json_t *json_tokens(char **tokens, int n) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, json_token(tokens[i]));
    return arr;
}

/* A number as the file says it: masked scores (-inf) are null, which JSON can say. */
static json_t *json_number(float v) { return isfinite(v) ? json_real(v) : json_null(); }

/* One kind's array (maps, scores or contrib) as [layer][head][row][col]; with cols set
 * to d_head and rows to the query or key count, the queries and keys as
 * [layer][head][position][d_head]. */
static json_t *json_grid(const float *x, int layers, int heads, int rows, int cols) {
    json_t *ls = json_array();
    for (int l = 0; l < layers; l++) {
        json_t *hs = json_array();
        for (int h = 0; h < heads; h++) {
            const float *p = x + ((size_t)l * heads + h) * rows * cols;
            json_t *m = json_array();
            for (int i = 0; i < rows; i++) {
                json_t *row = json_array();
                for (int j = 0; j < cols; j++) json_array_append_new(row, json_number(p[(size_t)i * cols + j]));
                json_array_append_new(m, row);
            }
            json_array_append_new(hs, m);
        }
        json_array_append_new(ls, hs);
    }
    return ls;
}

/* The arrays a kind has in maps.json, with their keys' suffixes and shapes: the one list
 * the writer and the reader go through. */
enum { KIND_ARRAYS = 5 };
/* What an array's entries may be: any float; a float or null, where a key is masked
 * (scores); a probability (weights: entropies take their logarithms). */
enum { VALUES_FLOAT, VALUES_MASKABLE, VALUES_WEIGHT };
typedef struct {
    char key[32]; /* the kind's name and the array's suffix: "cross_scores" */
    float *x;
    int rows, cols;
    int values;
} KindArray;

static void kind_arrays(const AttnMaps *a, int k, KindArray out[KIND_ARRAYS]) {
    int rows = attnmap_rows(a, k), cols = attnmap_cols(a, k);
    static const char *suffix[KIND_ARRAYS] = {"", "_scores", "_contrib", "_queries", "_keys"};
    out[0] = (KindArray){"", a->maps[k], rows, cols, VALUES_WEIGHT};
    out[1] = (KindArray){"", a->scores[k], rows, cols, VALUES_MASKABLE};
    out[2] = (KindArray){"", a->contrib[k], rows, cols, VALUES_FLOAT};
    out[3] = (KindArray){"", a->queries[k], rows, a->d_head, VALUES_FLOAT};
    out[4] = (KindArray){"", a->keys[k], cols, a->d_head, VALUES_FLOAT};
    for (int i = 0; i < KIND_ARRAYS; i++) snprintf(out[i].key, sizeof out[i].key, "%s%s", kind_names[k], suffix[i]);
}

/* A (rows, cols) array as rows of numbers */
static json_t *json_rows(const float *x, int rows, int cols) {
    json_t *g = json_array();
    for (int r = 0; r < rows; r++) {
        json_t *row = json_array();
        for (int c = 0; c < cols; c++) json_array_append_new(row, json_real(x[(size_t)r * cols + c]));
        json_array_append_new(g, row);
    }
    return g;
}

/* maps.json: see docs/attention.md ("Attention maps") for the schema. Keys keep this order
 * (jansson preserves insertion order); format 1's keys are all still there. */
json_t *attnmap_to_json(const AttnMaps *a) {
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string("qkv-attention-2"));
    json_object_set_new(root, "heads", json_integer(a->heads));
    json_object_set_new(root, "d_head", json_integer(a->d_head));
    json_object_set_new(root, "source", json_tokens(a->src, a->S));
    json_object_set_new(root, "target_in", json_tokens(a->tgt_in, a->T));
    json_object_set_new(root, "target_out", json_tokens(a->tgt_out, a->T));
    for (int k = 0; k < ATTN_KINDS; k++) {
        KindArray arr[KIND_ARRAYS];
        kind_arrays(a, k, arr);
        /* an array is absent only where a page left it out (a report's earlier snapshots) */
        for (int i = 0; i < KIND_ARRAYS; i++)
            if (arr[i].x)
                json_object_set_new(root, arr[i].key,
                                    json_grid(arr[i].x, a->layers[k], a->heads, arr[i].rows, arr[i].cols));
    }
    if (a->share) json_object_set_new(root, "source_share", json_rows(a->share, a->layers[ATTN_CROSS], a->T));
    if (a->null_from) json_object_set_new(root, "null_contributions", json_rows(a->null_from, a->T, a->S + 1));
    if (a->src_unk) {
        json_t *u = json_array();
        for (int j = 0; j < a->S; j++)
            if (a->src_unk[j]) json_array_append_new(u, json_integer(j));
        json_object_set_new(root, "source_unk", u);
    }
    return root;
}

char *attnmap_json(const AttnMaps *a) {
    /* compact: one number per line (jansson's only indented layout) would triple the
     * file. Seven significant digits: a score of 10 then carries 1e-6, so the softmax of
     * the written scores still matches the written weights to 1e-5. */
    return json_text_line(attnmap_to_json(a), JSON_COMPACT | JSON_REAL_PRECISION(7));
}

int attnmap_write_json(const AttnMaps *a, const char *path) {
    char *text = attnmap_json(a);
    int rc = write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}

/* ---- reading maps.json back --------------------------------------------------------------- */

static int read_tokens(json_t *root, const char *key, int max, char ***out, int *n, const char *what) {
    json_t *arr = json_object_get(root, key);
    if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > (size_t)max)
        return err_set("%s: '%s' is not a list of 1..%d tokens", what, key, max);
    *n = (int)json_array_size(arr);
    *out = xcalloc((size_t)*n, sizeof(char *));
    for (int i = 0; i < *n; i++) {
        const char *t = json_string_value(json_array_get(arr, (size_t)i));
        if (!t) return err_set("%s: '%s'[%d] is not a string", what, key, i);
        (*out)[i] = attnmap_utf8(t); /* jansson allows U+FFFE, XML does not */
    }
    return 0;
}

/* Fills x from a [layers][heads][rows][cols] array of numbers as `values` allows (null:
 * -INFINITY); x NULL: only checks the shape and every entry. */
static int read_grid(json_t *root, const char *key, float *x, int layers, int heads, int rows, int cols, int values,
                     const char *what) {
    json_t *ls = json_object_get(root, key);
    if (json_array_size(ls) != (size_t)layers) return err_set("%s: '%s' does not hold %d layers", what, key, layers);
    for (int l = 0; l < layers; l++) {
        json_t *hs = json_array_get(ls, (size_t)l);
        if (json_array_size(hs) != (size_t)heads)
            return err_set("%s: '%s'[%d] does not hold %d heads", what, key, l, heads);
        for (int h = 0; h < heads; h++) {
            json_t *m = json_array_get(hs, (size_t)h);
            if (json_array_size(m) != (size_t)rows)
                return err_set("%s: '%s'[%d][%d] does not hold %d rows", what, key, l, h, rows);
            for (int i = 0; i < rows; i++) {
                json_t *row = json_array_get(m, (size_t)i);
                if (json_array_size(row) != (size_t)cols)
                    return err_set("%s: '%s'[%d][%d][%d] does not hold %d numbers", what, key, l, h, i, cols);
                float *dst = x ? x + (((size_t)l * heads + h) * rows + i) * cols : NULL;
                for (int j = 0; j < cols; j++) {
                    json_t *v = json_array_get(row, (size_t)j);
                    float f = json_is_number(v) ? (float)json_number_value(v) : -INFINITY;
                    if (!json_is_number(v) && !(values == VALUES_MASKABLE && json_is_null(v)))
                        return err_set("%s: '%s'[%d][%d][%d][%d] is not a number", what, key, l, h, i, j);
                    if (json_is_number(v) && (!isfinite(f) || (values == VALUES_WEIGHT && !(f >= 0.0f && f <= 1.0f))))
                        return err_set("%s: '%s'[%d][%d][%d][%d] is %g, not %s", what, key, l, h, i, j,
                                       json_number_value(v),
                                       values == VALUES_WEIGHT ? "a weight in [0, 1]" : "a float");
                    if (x) dst[j] = f;
                }
            }
        }
    }
    return 0;
}

/* An optional (rows, cols) array of shares in [0, 1] under key: *out stays NULL when the
 * key is absent, else it is allocated once the shape is checked */
static int read_shares(json_t *root, const char *key, int rows, int cols, float **out, const char *what) {
    json_t *g = json_object_get(root, key);
    if (!g) return 0;
    if (!json_is_array(g) || (int)json_array_size(g) != rows)
        return err_set("%s: '%s' does not hold %d rows", what, key, rows);
    for (int r = 0; r < rows; r++) {
        json_t *row = json_array_get(g, (size_t)r);
        if (!json_is_array(row) || (int)json_array_size(row) != cols)
            return err_set("%s: '%s' row %d does not hold %d numbers", what, key, r, cols);
    }
    *out = xmalloc(sizeof(float) * (size_t)rows * cols);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            json_t *v = json_array_get(json_array_get(g, (size_t)r), (size_t)c);
            double x = json_number_value(v);
            if (!json_is_number(v) || !(x >= 0 && x <= 1.0001))
                return err_set("%s: '%s' holds something that is not a share in [0, 1]", what, key);
            (*out)[(size_t)r * cols + c] = (float)x;
        }
    return 0;
}

int attnmap_from_json(json_t *root, AttnMaps *out, const char *what) {
    memset(out, 0, sizeof *out);
    const char *format = json_string_value(json_object_get(root, "format"));
    if (!format || strcmp(format, "qkv-attention-2") != 0)
        return err_set("%s: not qkv attention maps (format '%s', expected qkv-attention-2)", what,
                       format ? format : "none");
    json_int_t heads = json_integer_value(json_object_get(root, "heads")),
               d_head = json_integer_value(json_object_get(root, "d_head"));
    if (heads < 1 || heads > 256 || d_head < 1 || d_head > 8192)
        return err_set("%s: heads or d_head out of range", what);
    out->heads = (int)heads, out->d_head = (int)d_head;
    int n_in;
    char **tgt_in = NULL;
    if (read_tokens(root, "source", 4096, &out->src, &out->S, what) != 0 ||
        read_tokens(root, "target_out", 4096, &out->tgt_out, &out->T, what) != 0)
        goto fail;
    if (read_tokens(root, "target_in", 4096, &tgt_in, &n_in, what) != 0 || n_in != out->T) {
        if (tgt_in && n_in != out->T) err_set("%s: target_in has %d tokens, target_out %d", what, n_in, out->T);
        for (int i = 0; tgt_in && i < n_in; i++) free(tgt_in[i]);
        free(tgt_in);
        out->tgt_in = xcalloc((size_t)out->T, sizeof(char *)); /* for attnmap_free */
        goto fail;
    }
    out->tgt_in = tgt_in;
    for (int k = 0; k < ATTN_KINDS; k++) {
        size_t layers = json_array_size(json_object_get(root, kind_names[k]));
        if (layers < 1 || layers > 16) {
            err_set("%s: '%s' does not hold 1..16 layers", what, kind_names[k]);
            goto fail;
        }
        out->layers[k] = (int)layers;
    }
    if (out->layers[ATTN_DEC_SELF] != out->layers[ATTN_CROSS]) {
        err_set("%s: decoder_self and cross have different layer counts", what);
        goto fail;
    }
    /* every shape is checked against the arrays the file holds before anything is
     * allocated: what the counts declare is then at most one float per number present,
     * never what a small file merely claims (heads 256 x d_head 8192 x 4096 tokens) */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) alloc_maps(out);
        for (int k = 0; k < ATTN_KINDS; k++) {
            KindArray arr[KIND_ARRAYS];
            kind_arrays(out, k, arr);
            for (int i = 0; i < KIND_ARRAYS; i++) {
                if (read_grid(root, arr[i].key, pass ? arr[i].x : NULL, out->layers[k], out->heads, arr[i].rows,
                              arr[i].cols, arr[i].values, what) != 0)
                    goto fail;
            }
        }
    }
    if (read_shares(root, "source_share", out->layers[ATTN_CROSS], out->T, &out->share, what) != 0 ||
        read_shares(root, "null_contributions", out->T, out->S + 1, &out->null_from, what) != 0)
        goto fail;
    return 0;
fail:
    attnmap_free(out);
    return -1;
}

/* ---- terminal ---------------------------------------------------------------------------- */

void attnmap_print_terminal(const AttnMaps *a, FILE *f) {
    static const char *shades[] = {"  ", "░░", "▒▒", "▓▓", "██"};
    int L = a->layers[ATTN_CROSS], rows = a->T, cols = a->S;
    float *avg = xmalloc(sizeof(float) * (size_t)rows * cols);
    attnmap_head_average(a, ATTN_CROSS, L - 1, avg);
    int w = 6;
    for (int t = 0; t < rows; t++) {
        int n = utf8_chars(a->tgt_out[t]);
        if (n > w) w = n < 16 ? n : 16;
    }
    fprintf(f,
            "cross-attention, decoder layer %d, average of %d heads "
            "(rows: target words produced; columns: source words)\n",
            L - 1, a->heads);
    if (cols > 10) { /* column numbers past 9 get a tens line above the units */
        fprintf(f, "%*s ", w, "");
        for (int j = 0; j < cols; j++) j >= 10 ? fprintf(f, "%2d", j / 10 % 10) : fprintf(f, "  ");
        fprintf(f, "\n");
    }
    fprintf(f, "%*s ", w, "");
    for (int j = 0; j < cols; j++) fprintf(f, "%2d", j % 10);
    fprintf(f, "\n");
    for (int t = 0; t < rows; t++) {
        put_label(f, a->tgt_out[t], w, 16, 1);
        fputc(' ', f);
        int best = 0;
        for (int j = 0; j < cols; j++) {
            float p = avg[(size_t)t * cols + j];
            int level = p < 0.05f ? 0 : p < 0.25f ? 1 : p < 0.5f ? 2 : p < 0.75f ? 3 : 4;
            fputs(shades[level], f);
            if (p > avg[(size_t)t * cols + best]) best = j;
        }
        fputs("  -> ", f), fput_spelled(f, a->src[best], strlen(a->src[best])), fputc('\n', f);
    }
    fprintf(f, "%*s ", w, "");
    for (int j = 0; j < cols; j++) fprintf(f, "%s%d=", j ? "  " : "", j), fput_spelled(f, a->src[j], strlen(a->src[j]));
    fprintf(f, "\nshades: '  ' < 0.05 <= '░░' < 0.25 <= '▒▒' < 0.5 <= '▓▓' < 0.75 <= '██'\n");
    free(avg);
}

/* Key indices sorted by x, largest first (insertion sort: a sentence's keys). */
static void rank_keys(const float *x, int n, int *order) {
    for (int j = 0; j < n; j++) {
        int k = j;
        while (k > 0 && x[order[k - 1]] < x[j]) order[k] = order[k - 1], k--;
        order[k] = j;
    }
}

static void print_ranking(FILE *f, const char *what, const float *x, int n, char **labels) {
    int *order = xmalloc(sizeof(int) * (size_t)n);
    rank_keys(x, n, order);
    fprintf(f, "  by %-12s", what);
    for (int r = 0; r < n; r++) fprintf(f, "%s%s", r ? " > " : "", labels[order[r]]);
    fprintf(f, "\n");
    free(order);
}

void attnmap_print_query(const AttnMaps *a, int kind, int layer, int head, int query, FILE *f) {
    int cols = attnmap_cols(a, kind), w = 8;
    char **rl = attnmap_row_labels(a, kind), **cl = attnmap_col_labels(a, kind);
    const float *s = attnmap_slice(a, a->scores, kind, layer, head) + (size_t)query * cols,
                *p = attnmap_slice(a, a->maps, kind, layer, head) + (size_t)query * cols,
                *c = attnmap_slice(a, a->contrib, kind, layer, head) + (size_t)query * cols;
    for (int j = 0; j < cols; j++) {
        int n = utf8_chars(cl[j]);
        if (n > w) w = n < 24 ? n : 24;
    }
    fprintf(f, "%s, layer %d, head %d, query %d '%s' (d_head %d)\n", kind_titles[kind], layer, head, query, rl[query],
            a->d_head);
    fprintf(f, "%4s  %-*s  %12s  %10s  %12s\n", "key", w, "token", "score", "weight", "contrib");
    /* the softmax written out over the visible keys, in double, beside the kept weights */
    double max = -INFINITY, z = 0.0, sum_w = 0.0, worst = 0.0;
    for (int j = 0; j < cols; j++)
        if (isfinite(s[j]) && s[j] > max) max = s[j];
    for (int j = 0; j < cols; j++)
        if (isfinite(s[j])) z += exp((double)s[j] - max);
    for (int j = 0; j < cols; j++) {
        double soft = isfinite(s[j]) ? exp((double)s[j] - max) / z : 0.0;
        worst = fmax(worst, fabs(soft - p[j]));
        sum_w += p[j];
        fprintf(f, "%4d  ", j);
        put_label(f, cl[j], w, 24, 0);
        if (isfinite(s[j])) fprintf(f, "  %12.6f  %10.6f  %12.6f\n", s[j], p[j], c[j]);
        else fprintf(f, "  %12s  %10.6f  %12.6f\n", "masked", p[j], c[j]);
    }
    fprintf(f,
            "score_j = q.k_j / sqrt(%d); weight_j = exp(score_j) / sum_k exp(score_k); "
            "contrib_j = weight_j * ||v_j W_O[head %d]||\n",
            a->d_head, head);
    fprintf(f, "sum of weights %.6f; softmax(scores) - weights: max %.1e\n", sum_w, worst);
    float *masked = xmalloc(sizeof(float) * (size_t)cols);
    for (int j = 0; j < cols; j++) masked[j] = isfinite(s[j]) ? s[j] : -FLT_MAX;
    fprintf(f, "keys ranked\n");
    print_ranking(f, "score:", masked, cols, cl);
    print_ranking(f, "weight:", p, cols, cl);
    print_ranking(f, "contrib:", c, cols, cl);
    free(masked);
}
