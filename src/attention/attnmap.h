/* attnmap: the anatomy of every attention of one sentence pair, and the ways out of qkv:
 * JSON (attnmap.c, read back by attnmap_from_json), SVG heatmaps (attnsvg.c), a one-file
 * HTML viewer (attnview.c) and terminal views (attnmap.c).
 *
 * For each kind, layer and head it holds
 *   weights   p_ij = softmax_j(s_ij), the probabilities the forward pass kept for its
 *             backward pass (AttnActs.p);
 *   scores    s_ij = q_i . k_j / sqrt(d_head), what that softmax received (-INFINITY
 *             where the key is masked), kept by the same forward pass (AttnActs.scores);
 *   contrib   ||p_ij v_j W_O^h||, the length of what key j adds to query i's output;
 *   queries and keys: the q_i and k_j of the head (d_head numbers each).
 * Everything is read from the one forward pass: there is no second implementation of
 * attention here.
 *
 * Rows are queries, columns keys. Decoder position t reads tgt_in[t] (BOS, y1, ...) and
 * predicts tgt_out[t] (y1, ..., EOS); cross-attention row t is therefore what the model
 * looked at in the source while producing the target word tgt_out[t]. */
#ifndef QKV_ATTNMAP_H
#define QKV_ATTNMAP_H

#include <stdio.h>

#include "data/vocab.h"
#include "nn/model.h"
#include "util/text.h"

/* Kinds are nn's AttnKind (nn/model.h): ATTN_ENC_SELF, ATTN_DEC_SELF, ATTN_CROSS. */

typedef struct {
    int S, T; /* source positions (tokens + EOS), decoder positions (target tokens + 1) */
    int layers[ATTN_KINDS], heads;
    char **src;     /* (S) source tokens, EOS last */
    char **tgt_in;  /* (T) what each decoder position reads */
    char **tgt_out; /* (T) what each decoder position predicts */
    int d_head;
    float *maps[ATTN_KINDS];    /* weights: enc self (Le,H,S,S), dec self (Ld,H,T,T), cross (Ld,H,T,S) */
    float *scores[ATTN_KINDS];  /* the same shapes */
    float *contrib[ATTN_KINDS]; /* the same shapes */
    float *queries[ATTN_KINDS]; /* (L, H, rows, d_head) */
    float *keys[ATTN_KINDS];    /* (L, H, cols, d_head) */
    float *share;               /* NULL, or (decoder layers, T): each decoder position's source share
                                   after each layer, when its maker measured it (explain/contrib.h);
                                   maps.json's "source_share" */
    float *null_from;           /* NULL, or (T, S + 1): the last cross-attention block's contributions,
                                   the source positions then the prefix, when its maker measured them
                                   (explain/contrib.h): what align's null decision reads
                                   (align_map.h); maps.json's "null_contributions" */
    unsigned char *src_unk;     /* NULL, or (S) 1 where the model read the source token as <unk>
                                   (its label is the text's own word): maps.json's "source_unk",
                                   so that a page marks the words the model never saw */
} AttnMaps;

/* Runs the model on src (n_src ids) force-decoding tgt (n_tgt ids) and copies every
 * layer's and head's probabilities. */
void attnmap_capture(Model *m, const Vocab *sv, const Vocab *tv, const int *src, int n_src, const int *tgt, int n_tgt,
                     AttnMaps *out);
/* Labels for people instead of vocabulary entries: a subword piece as the text it stands
 * for; with word/char vocabularies the words of src_text (and of tgt_text when the target
 * was forced), so an unknown word shows as itself (and src_unk says the model read <unk>
 * there); an <unk> the model produced shows as the source word its cross-attention (last
 * layer, heads averaged) weighs most. src and tgt are the ids the maps were captured with. */
void attnmap_surface_labels(AttnMaps *a, int tokenizer, const Vocab *sv, const Vocab *tv, const int *src,
                            const char *src_text, const int *tgt, const char *tgt_text);
void attnmap_free(AttnMaps *a);

/* Query and key counts of a kind, and one (layer, head) map of it. */
int attnmap_rows(const AttnMaps *a, int kind);
int attnmap_cols(const AttnMaps *a, int kind);
const float *attnmap_at(const AttnMaps *a, int kind, int layer, int head);
/* The same (layer, head) slice of another of the arrays above (maps, scores, contrib). */
float *attnmap_slice(const AttnMaps *a, float *const *arrays, int kind, int layer, int head);
/* Mean over queries of the entropy (nats) of one head's weights; head < 0: of the
 * heads' average. */
double attnmap_entropy(const AttnMaps *a, int kind, int layer, int head);
/* Head average of one layer into out (rows x cols). */
void attnmap_head_average(const AttnMaps *a, int kind, int layer, float *out);
/* Row and column labels of a kind. */
char **attnmap_row_labels(const AttnMaps *a, int kind);
char **attnmap_col_labels(const AttnMaps *a, int kind);
const char *attnmap_kind_name(int kind); /* "encoder_self", "decoder_self", "cross" */
const char *attnmap_kind_title(int kind);

/* maps.json text (caller frees), and the file. */
char *attnmap_json(const AttnMaps *a);
int attnmap_write_json(const AttnMaps *a, const char *path);
/* The maps.json object as a tree (for files that hold several), and back. Reading
 * checks every shape against the counts; -1 with the error set (`what` names the source). */
struct json_t;
struct json_t *attnmap_to_json(const AttnMaps *a);
int attnmap_from_json(struct json_t *root, AttnMaps *out, const char *what);
/* One SVG per (kind, layer, head) and per (kind, layer) head average, into dir. */
int attnmap_write_svgs(const AttnMaps *a, const char *dir, int *count);
int attnmap_write_html(const AttnMaps *a, const char *path);
/* The viewer page around any JSON it reads (one maps.json object, or a watch view). */
int attnview_write(const char *json, const char *path);
/* The same page as text (sb_free it); -1 with the error set. */
int attnview_page(const char *json, StrBuf *out);
/* The last decoder layer's head-averaged cross-attention in Unicode shades. */
void attnmap_print_terminal(const AttnMaps *a, FILE *f);
/* One query's anatomy: for each key its score, weight and contribution, the softmax
 * written out, and the keys ranked by each. */
void attnmap_print_query(const AttnMaps *a, int kind, int layer, int head, int query, FILE *f);

/* s as text every writer can carry (caller frees): well-formed UTF-8 that XML 1.0 can
 * hold. Each byte that does not start a well-formed sequence (a stray continuation, an
 * overlong form, a surrogate, a cut-off sequence), and the non-characters U+FFFE and
 * U+FFFF, become U+FFFD; control bytes are kept (JSON escapes them, the XML escaper
 * drops them). Labels are made so once, where they are made or read. */
char *attnmap_utf8(const char *s);

/* SVG text of one heatmap (caller frees); shared by the SVG files and the tests. Labels
 * and title go through attnmap_utf8, whoever made them. */
char *attnmap_svg(const float *map, int rows, int cols, char **row_labels, char **col_labels, const char *title);

#endif
