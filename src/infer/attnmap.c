/* attnmap: capture, JSON and the terminal view; see attnmap.h. */
#include "infer/attnmap.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/corpus.h"
#include "data/tokenize.h"
#include "util.h"

static const char *kind_names[ATTN_KINDS] = {"encoder_self", "decoder_self", "cross"};
static const char *kind_titles[ATTN_KINDS] = {"encoder self-attention", "decoder masked self-attention",
                                              "cross-attention (Q: decoder, K/V: encoder)"};

const char *attnmap_kind_name(int kind) { return kind_names[kind]; }
const char *attnmap_kind_title(int kind) { return kind_titles[kind]; }

int attnmap_rows(const AttnMaps *a, int kind) { return kind == ATTN_ENC_SELF ? a->S : a->T; }
int attnmap_cols(const AttnMaps *a, int kind) { return kind == ATTN_DEC_SELF ? a->T : a->S; }

const float *attnmap_at(const AttnMaps *a, int kind, int layer, int head) {
    size_t per = (size_t)attnmap_rows(a, kind) * attnmap_cols(a, kind);
    return a->maps[kind] + ((size_t)layer * a->heads + head) * per;
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
char **attnmap_col_labels(const AttnMaps *a, int kind) {
    return kind == ATTN_DEC_SELF ? a->tgt_in : a->src;
}

/* Copies one attention's (B=1, H, Tq, Tk) probabilities into place. */
static void copy_probs(float *dst, const float *p, size_t n) { memcpy(dst, p, sizeof(float) * n); }

void attnmap_capture(Model *m, const Vocab *sv, const Vocab *tv, const int *src, int n_src, const int *tgt, int n_tgt,
                     AttnMaps *out) {
    memset(out, 0, sizeof *out);
    int S = n_src + 1, T = n_tgt + 1, H = m->cfg.heads;
    int *s = xmalloc(sizeof(int) * (size_t)S), *tin = xmalloc(sizeof(int) * (size_t)T),
        *tout = xmalloc(sizeof(int) * (size_t)T);
    batch_frame_source(src, n_src, s, S);
    batch_frame_target(tgt, n_tgt, tin, tout, T);
    ModelBatch b = {1, S, T, s, &S, tin, tout, &T};
    model_reserve(m, model_arena_floats(m, 1, S, T));
    model_forward(m, &b, 0, 0, 0);
    out->S = S, out->T = T, out->heads = H;
    out->layers[ATTN_ENC_SELF] = m->cfg.encoder_layers;
    out->layers[ATTN_DEC_SELF] = out->layers[ATTN_CROSS] = m->cfg.decoder_layers;
    for (int k = 0; k < ATTN_KINDS; k++) {
        size_t per = (size_t)H * attnmap_rows(out, k) * attnmap_cols(out, k);
        out->maps[k] = xmalloc(sizeof(float) * per * (size_t)out->layers[k]);
        for (int l = 0; l < out->layers[k]; l++) {
            const float *p = k == ATTN_ENC_SELF ? m->a.enc[l].attn.p
                           : k == ATTN_DEC_SELF ? m->a.dec[l].self_attn.p
                                                : m->a.dec[l].cross_attn.p;
            copy_probs(out->maps[k] + per * (size_t)l, p, per);
        }
    }
    out->src = xmalloc(sizeof(char *) * (size_t)S);
    out->tgt_in = xmalloc(sizeof(char *) * (size_t)T);
    out->tgt_out = xmalloc(sizeof(char *) * (size_t)T);
    for (int i = 0; i < S; i++) out->src[i] = xstrdup(vocab_token(sv, s[i]));
    for (int t = 0; t < T; t++) out->tgt_in[t] = xstrdup(vocab_token(tv, tin[t]));
    for (int t = 0; t < T; t++) out->tgt_out[t] = xstrdup(vocab_token(tv, tout[t]));
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

static void relabel(char **label, char *text) {
    free(*label);
    *label = text;
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
    for (int k = 0; k < ATTN_KINDS; k++) free(a->maps[k]);
    memset(a, 0, sizeof *a);
}

/* ---- JSON ------------------------------------------------------------------------------- */

/* Written with jansson, whose escaping is the one qkv's JSON gets. Tokens are UTF-8 (the
 * corpus is checked); a vocabulary edited by hand could hold other bytes, which JSON
 * cannot: such a token shows as U+FFFD rather than breaking the file. */
static json_t *json_token(const char *s) {
    json_t *j = json_string(s);
    return j ? j : json_string("\xEF\xBF\xBD");
}

static json_t *json_tokens(char **tokens, int n) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, json_token(tokens[i]));
    return arr;
}

/* One kind's maps as [layer][head][row][col]. */
static json_t *json_maps(const AttnMaps *a, int k) {
    int rows = attnmap_rows(a, k), cols = attnmap_cols(a, k);
    json_t *layers = json_array();
    for (int l = 0; l < a->layers[k]; l++) {
        json_t *heads = json_array();
        for (int h = 0; h < a->heads; h++) {
            const float *p = attnmap_at(a, k, l, h);
            json_t *m = json_array();
            for (int i = 0; i < rows; i++) {
                json_t *row = json_array();
                for (int j = 0; j < cols; j++) json_array_append_new(row, json_real(p[(size_t)i * cols + j]));
                json_array_append_new(m, row);
            }
            json_array_append_new(heads, m);
        }
        json_array_append_new(layers, heads);
    }
    return layers;
}

/* maps.json: see README ("Attention maps") for the schema. Six significant digits are
 * what a heatmap can show; keys keep this order (jansson preserves insertion order). */
static char *json_text(const AttnMaps *a, size_t flags) {
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string("qkv-attention-1"));
    json_object_set_new(root, "heads", json_integer(a->heads));
    json_object_set_new(root, "source", json_tokens(a->src, a->S));
    json_object_set_new(root, "target_in", json_tokens(a->tgt_in, a->T));
    json_object_set_new(root, "target_out", json_tokens(a->tgt_out, a->T));
    for (int k = 0; k < ATTN_KINDS; k++) json_object_set_new(root, kind_names[k], json_maps(a, k));
    char *text = xcheck(json_dumps(root, flags | JSON_REAL_PRECISION(6)));
    json_decref(root);
    return text;
}

char *attnmap_json(const AttnMaps *a) {
    /* compact: one number per line (jansson's only indented layout) would triple the file */
    char *text = json_text(a, JSON_COMPACT);
    StrBuf sb = {0};
    sb_append(&sb, text, strlen(text));
    sb_append(&sb, "\n", 1);
    free(text);
    return sb.buf;
}

int attnmap_write_json(const AttnMaps *a, const char *path) {
    char *text = attnmap_json(a);
    int rc = write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}

/* ---- terminal ---------------------------------------------------------------------------- */

void attnmap_print_terminal(const AttnMaps *a, FILE *f) {
    static const char *shades[] = {"  ", "░░", "▒▒", "▓▓", "██"};
    int L = a->layers[ATTN_CROSS], rows = a->T, cols = a->S;
    float *avg = xmalloc(sizeof(float) * (size_t)rows * cols);
    attnmap_head_average(a, ATTN_CROSS, L - 1, avg);
    int w = 6;
    for (int t = 0; t < rows; t++) {
        int n = (int)strlen(a->tgt_out[t]);
        if (n > w) w = n < 16 ? n : 16;
    }
    fprintf(f, "cross-attention, decoder layer %d, average of %d heads (rows: target words produced; columns: source "
               "words)\n",
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
        fprintf(f, "%*.*s ", w, 16, a->tgt_out[t]);
        int best = 0;
        for (int j = 0; j < cols; j++) {
            float p = avg[(size_t)t * cols + j];
            int level = p < 0.05f ? 0 : p < 0.25f ? 1 : p < 0.5f ? 2 : p < 0.75f ? 3 : 4;
            fputs(shades[level], f);
            if (p > avg[(size_t)t * cols + best]) best = j;
        }
        fprintf(f, "  -> %s\n", a->src[best]);
    }
    fprintf(f, "%*s ", w, "");
    for (int j = 0; j < cols; j++) fprintf(f, "%s%d=%s", j ? "  " : "", j, a->src[j]);
    fprintf(f, "\nshades: '  ' < 0.05 <= '░░' < 0.25 <= '▒▒' < 0.5 <= '▓▓' < 0.75 <= '██'\n");
    free(avg);
}
