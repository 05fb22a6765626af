/* reference: see reference.h. Each line is decoded alone, through model_step as qkv's
 * searches run it, fed the output qkv chose (so the rows are those its greedy search saw). */
#include "onnx/reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "data/batch.h"
#include "data/vocab.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/rng.h"

/* z (V) to log-probabilities in lp, normalised in double */
static void log_softmax(float *lp, const float *z, int V) {
    float mx = z[0];
    for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
    double sum = 0.0;
    for (int v = 0; v < V; v++) sum += exp((double)z[v] - mx);
    double norm = mx + log(sum);
    for (int v = 0; v < V; v++) lp[v] = (float)((double)z[v] - norm);
}

/* The cross-attention weights of every decoder layer and head, [layer][head][step][source
 * position], as qkv's own forward pass over the output forced computes them (a step a row,
 * <eos>'s included; the same numbers its incremental decoding step gives). */
static json_t *cross_attentions(Model *m, const Vocab *sv, const Vocab *tv, const Seq *src, const Seq *out) {
    AttnMaps maps = {0};
    attnmap_capture(m, sv, tv, src->ids, src->len, out->ids, out->len, &maps);
    json_t *layers = json_array();
    size_t T = (size_t)maps.T, S = (size_t)maps.S;
    for (int l = 0; l < maps.layers[ATTN_CROSS]; l++) {
        json_t *heads = json_array();
        for (int h = 0; h < maps.heads; h++)
            json_array_append_new(heads,
                                  json_float_rows("%.9g", maps.maps[ATTN_CROSS] + ((size_t)l * maps.heads + h) * T * S,
                                                  maps.T, maps.S, S));
        json_array_append_new(layers, heads);
    }
    attnmap_free(&maps);
    return layers;
}

static json_t *one_line(Model *m, const JointVocab *jv, const Vocab *sv, const Vocab *tv, DecodeState *st,
                        const Seq *src, const Seq *out) {
    int S = src->len + 1, d = m->cfg.d_model, V = m->cfg.tgt_vocab, one = 1, tok = VOCAB_BOS;
    int *ids = xmalloc(sizeof(int) * (size_t)S), rows = out->len + 1;
    batch_frame_source(src->ids, src->len, ids, S);
    ModelBatch b = {1, S, 1, ids, &S, &tok, NULL, &one, 0};
    model_step_begin(m, st, &b, 1);
    json_t *line = json_object();
    int *export_ids = xmalloc(sizeof(int) * (size_t)S);
    for (int s = 0; s < S; s++) export_ids[s] = jv->of_source[ids[s]];
    json_put(line, "source", json_ints(export_ids, S)); /* output ids: target ids are the export's own */
    free(export_ids);
    json_put(line, "output", json_ints(out->ids, out->len));
    json_put(line, "encoder",
             json_float_rows("%.9g", m->a.src.out, S, d, (size_t)d)); /* model_step_begin's encoder pass */
    float *lp = xmalloc(sizeof(float) * (size_t)rows * V);
    for (int t = 0; t < rows; t++) {
        log_softmax(lp + (size_t)t * V, model_step(m, st, &tok), V);
        if (t < out->len) tok = out->ids[t];
    }
    json_put(line, "log_probs", json_float_rows("%.9g", lp, rows, V, (size_t)V));
    json_put(line, "cross_attentions", cross_attentions(m, sv, tv, src, out));
    free(lp), free(ids);
    return line;
}

/* How many id sequences "decoding" holds besides the hand-picked ones, and how long each is at most */
#define DECODING_RANDOM 200
#define DECODING_MAX_LEN 12

static void add_case(json_t *cases, const int *ids, int n, int tokenizer, const Vocab *tgt) {
    char *text = decode_ids(ids, n, tokenizer, tgt);
    json_array_append_new(cases, json_pack("{s:o, s:s}", "ids", json_ints(ids, (size_t)n), "text", text));
    free(text);
}

/* The target id of piece (-1 where the vocabulary lacks it). */
static int piece_id(const Vocab *v, const char *piece) {
    int id = vocab_lookup(v, piece, strlen(piece));
    return id == VOCAB_UNK && strcmp(piece, "<unk>") != 0 ? -1 : id;
}

/* Id sequences of the target vocabulary and qkv's text of each (decode_ids, as qkv
 * translate writes an output): for a SentencePiece vocabulary first the edges of its
 * decoding (runs of "▁" opening the text, a byte that spells a space, characters cut
 * short), then random sequences of ordinary ids, "▁" and byte pieces. */
static json_t *decoding_cases(const Vocab *tgt, int tokenizer) {
    json_t *cases = json_array();
    int space = tgt->spm ? piece_id(tgt, "\xE2\x96\x81") : -1, word = -1, n_bytes = 0;
    int *bytes = xmalloc(sizeof(int) * (size_t)tgt->size);
    for (int id = VOCAB_N_SPECIAL; id < tgt->size; id++) {
        const char *t = tgt->tokens[id];
        if (tgt->spm && strlen(t) == 6 && strncmp(t, "<0x", 3) == 0 && t[5] == '>') bytes[n_bytes++] = id;
        else if (word < 0 && strncmp(t, "\xE2\x96\x81", 3) == 0 && t[3]) word = id;
    }
    if (tgt->spm && space >= 0 && word >= 0) {
        int b20 = piece_id(tgt, "<0x20>"), e4 = piece_id(tgt, "<0xE4>"), b8 = piece_id(tgt, "<0xB8>"),
            ad = piece_id(tgt, "<0xAD>"), f0 = piece_id(tgt, "<0xF0>"), x9f = piece_id(tgt, "<0x9F>");
        /* each: its length, then the ids (-1 where the vocabulary lacks the piece) */
        const int edges[][6] = {{4, space, space, space, word},
                                {2, space, word},
                                {1, space},
                                {3, word, space, space},
                                {2, b20, word},
                                {3, space, b20, word},
                                {2, e4, b8},
                                {3, e4, b8, word},
                                {4, e4, b8, ad, e4},
                                {4, f0, x9f, space, word},
                                {2, b8, e4}};
        for (size_t c = 0; c < sizeof edges / sizeof *edges; c++) {
            int n = edges[c][0], usable = 1;
            for (int t = 1; t <= n; t++) usable &= edges[c][t] >= 0;
            if (usable) add_case(cases, edges[c] + 1, n, tokenizer, tgt);
        }
    }
    Rng rng;
    rng_seed(&rng, 1);
    int ids[DECODING_MAX_LEN];
    for (int c = 0; c < DECODING_RANDOM && tgt->size > VOCAB_N_SPECIAL; c++) {
        int n = 1 + (int)rng_below(&rng, DECODING_MAX_LEN);
        for (int t = 0; t < n; t++) {
            double u = rng_uniform(&rng);
            ids[t] = space >= 0 && u < 0.25 ? space
                     : n_bytes && u < 0.5
                         ? bytes[rng_below(&rng, (uint64_t)n_bytes)]
                         : VOCAB_N_SPECIAL + (int)rng_below(&rng, (uint64_t)(tgt->size - VOCAB_N_SPECIAL));
        }
        add_case(cases, ids, n, tokenizer, tgt);
    }
    free(bytes);
    return cases;
}

char *onnx_reference_json(Model *m, const JointVocab *jv, const Seq *src, const Seq *out, int n, const Vocab *sv,
                          const Vocab *tgt, int tokenizer) {
    json_t *root = json_object(), *lines = json_array();
    json_put(root, "format", json_string("qkv-onnx-reference-1"));
    json_put(root, "vocab_size", json_integer(jv->size));
    json_put(root, "target_vocab_size", json_integer(jv->n_target));
    json_put(root, "source_of_id", json_ints(jv->source_of, jv->size));
    DecodeState st = {0};
    for (int i = 0; i < n; i++) json_array_append_new(lines, one_line(m, jv, sv, tgt, &st, &src[i], &out[i]));
    model_step_end(&st);
    json_put(root, "lines", lines);
    json_put(root, "decoding", decoding_cases(tgt, tokenizer));
    return json_text_line(root, JSON_WRITE_FLAGS);
}
