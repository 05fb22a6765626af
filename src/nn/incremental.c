/* incremental: the model's incremental decoding step (model.h, "incremental decoding"): the
 * decoder one position at a time over B sequences with cached keys and values, through
 * the same layer code as training (model.h's QKV_NN_INTERNAL part: model.c's pieces). */
#include <stdlib.h>
#include <string.h>

#define QKV_NN_INTERNAL /* the pieces of model.c it runs (model.h) */
#include "nn/model.h"
#include "nn/multihead.h"
#include "nn/panels.h"
#include "util/mem.h"

/* The step's activations: B rows. Nothing runs backward, so every sub-layer of every
 * layer shares one residual, one set of attention and feed-forward buffers (a
 * post-LN sum reads the previous LN output, a pre-LN sum adds into itself in place),
 * which keeps the step's working set in cache; only the keys and values are per layer,
 * carved at cache size. */
static size_t carve_step(const Model *m, DecodeState *st, float *base) {
    const ModelConfig *c = &m->cfg;
    int d = c->d_model, H = c->heads, pre = c->pre_norm, B = st->B;
    /* the cross-attention's keys and values, one block a source, shared by its copies */
    int sources = st->widen > 1 ? B / st->widen : B;
    int widest = st->max_len > st->S ? st->max_len : st->S;
    Carver cv = {.base = base};
    Residual r;
    carve_residual(&cv, &r, (size_t)B, d, pre);
    AttnActs shared = {.q = carver_take(&cv, (size_t)B * d),
                       .p = carver_take(&cv, (size_t)B * H * widest),
                       .ctx = carver_take(&cv, (size_t)B * d),
                       .out = carver_take(&cv, (size_t)B * d)};
    float *hidden = carver_take(&cv, (size_t)B * c->d_ff);
    for (int l = 0; l < c->decoder_layers; l++) {
        DecoderLayerActs *e = &st->layer[l];
        e->r1 = e->r2 = e->r3 = r;
        e->self_attn = e->cross_attn = shared;
        e->self_attn.k = carver_take(&cv, (size_t)B * st->max_len * d);
        e->self_attn.v = carver_take(&cv, (size_t)B * st->max_len * d);
        e->cross_attn.k = carver_take(&cv, (size_t)sources * st->S * d);
        e->cross_attn.v = carver_take(&cv, (size_t)sources * st->S * d);
        e->ffn = (FfnActs){.hidden = hidden, .out = shared.out};
        memcpy(e->self_attn.panels, st->weights.self[l], sizeof e->self_attn.panels);
        memcpy(e->cross_attn.panels, st->weights.cross[l], sizeof e->cross_attn.panels);
        memcpy(e->ffn.panels, st->weights.ffn[l], sizeof e->ffn.panels);
    }
    carve_stack(&cv, &st->tgt, (size_t)B, d);
    st->kv_new = carver_take(&cv, 2 * (size_t)B * d);
    st->logits = carver_take(&cv, (size_t)B * c->tgt_vocab);
    st->scratch = carver_take(&cv, 2 * (size_t)B * widest * d);
    st->src_len = (int *)carver_take(&cv, 2 * (size_t)B); /* ints, as wide as floats */
    st->self_len = base ? st->src_len + B : NULL;
    return cv.used;
}

/* FLOPs of the matrix products (2mnk each) the encoder and the cross-attention key/value
 * projections run on G sources S wide: a source position's (model_position_flops), and
 * the encoder's self-attention, QK^T and PV over the S keys. */
static double begin_flops(const ModelConfig *c, int G, int S) {
    double src, tgt, d = c->d_model, N = (double)G * S;
    model_position_flops(c, &src, &tgt);
    return N * (src + c->encoder_layers * 2 * 2 * (double)S * d);
}

/* FLOPs of one step of B rows at position t against sources S wide: a target position's
 * (model_position_flops: every decoder layer's projections and feed-forward, then the
 * output projection), and per decoder layer QK^T and PV over its t + 1 cached keys and
 * the S source keys. */
static double step_flops(const ModelConfig *c, int B, int t, int S) {
    double src, tgt, d = c->d_model;
    model_position_flops(c, &src, &tgt);
    return B * (tgt + c->decoder_layers * 2 * 2 * (t + 1.0 + S) * d);
}

/* Self-attention's cached keys are stored by column in tiles of SELF_TILE positions
 * (multihead.h: k_tile): the cache holds whole tiles, and a prefix of positions is copied
 * as its whole tiles. */
enum { SELF_TILE = 16 };
static int round_to_tile(int t) { return (t + SELF_TILE - 1) / SELF_TILE * SELF_TILE; }

/* The step's weights laid out (StepWeights), once per state or once per served model.
 * In panels: what a step multiplies, every decoder layer's self-attention W_Q, W_K, W_V,
 * W_O, cross-attention W_Q and W_O (its keys and values are projected once a group, by
 * sgemm over all the source positions), W_1 and W_2, and the output table. Otherwise the
 * output table by column: a step's few rows against the whole vocabulary go 1.2-1.5 times
 * faster against it through sgemm (kernels.h). */
static void lay_out_step_weights(const Model *m, StepWeights *w) {
    const ModelConfig *c = &m->cfg;
    int d = c->d_model, ff = c->d_ff, V = c->tgt_vocab;
    memset(w, 0, sizeof *w);
    w->panels = panels_enabled();
    if (!w->panels) {
        w->buf = xmalloc(sizeof(float) * (size_t)d * V);
        table_turn(w->buf, m->p.generator, V, d);
        w->generator = w->buf;
        return;
    }
    size_t layer = 6 * panels_floats(d, d) + panels_floats(d, ff) + panels_floats(ff, d);
    /* on a cache line, as each panel is whole lines (panels.h); malloc gives 16 bytes */
    void *buf = NULL;
    if (posix_memalign(&buf, 64, sizeof(float) * (c->decoder_layers * layer + panels_floats(d, V))) != 0) buf = NULL;
    float *at = w->buf = xcheck(buf);
#define LAY_OUT(slot, weight, K, N) (panels_pack(at, weight, K, N), slot = at, at += panels_floats(K, N))
    for (int l = 0; l < c->decoder_layers; l++) {
        const DecoderLayerParams *p = &m->p.dec[l];
        LAY_OUT(w->self[l][0], p->self_attn.w_q, d, d);
        LAY_OUT(w->self[l][1], p->self_attn.w_k, d, d);
        LAY_OUT(w->self[l][2], p->self_attn.w_v, d, d);
        LAY_OUT(w->self[l][3], p->self_attn.w_o, d, d);
        LAY_OUT(w->cross[l][0], p->cross_attn.w_q, d, d);
        LAY_OUT(w->cross[l][3], p->cross_attn.w_o, d, d);
        LAY_OUT(w->ffn[l][0], p->ffn.w_1, d, ff);
        LAY_OUT(w->ffn[l][1], p->ffn.w_2, ff, d);
    }
#undef LAY_OUT
    panels_pack_transposed(at, m->p.generator, d, V);
    w->generator = at;
}

static void prepare_step_weights(const Model *m, DecodeState *st) {
    if (st->weights.generator) return;
    const StepWeights *kept = m->step_weights;
    st->weights_kept = kept != NULL;
    if (kept) st->weights = *kept;
    else lay_out_step_weights(m, &st->weights);
}

void model_keep_step_weights(Model *m) {
    if (m->step_weights || m->is_replica) return;
    m->step_weights = xmalloc(sizeof *m->step_weights);
    lay_out_step_weights(m, m->step_weights);
}

void model_step_reserve(Model *m, DecodeState *st, int G, int S, int copies) {
    prepare_step_weights(m, st);
    DecodeState shape = {.B = G * copies, .S = S, .max_len = round_to_tile(m->cfg.max_positions), .widen = copies};
    size_t need = carve_step(m, &shape, NULL);
    if (need > st->buf_floats) free(st->buf), st->buf = xmalloc(sizeof(float) * need), st->buf_floats = need;
    model_reserve(m, model_encode_lean_floats(m, G, S));
}

/* A pin set on the model's full passes (model_attention_intervene) holds in its steps too,
 * at its position: search then follows the model as changed. Only the pin: a patch's rows
 * are a full pass's positions, which a step's rows (hypotheses) are not. */
static void point_pin(Model *m, DecodeState *st, int l, AttnKind kind) {
    int cross = kind == ATTN_CROSS;
    AttnActs *a = cross ? &st->layer[l].cross_attn : &st->layer[l].self_attn;
    const AttnIntervene *iv = attn_acts(m, kind, l)->iv;
    a->iv = NULL;
    if (!iv || !iv->pin_weights) return;
    st->pins[l][cross] = (AttnIntervene){.pin_head = iv->pin_head,
                                         .pin_query = iv->pin_query,
                                         .pin_weights = iv->pin_weights};
    a->iv = &st->pins[l][cross];
}

void model_step_begin(Model *m, DecodeState *st, const ModelBatch *b, int copies) {
    int G = b->B, S = b->S, d = m->cfg.d_model;
    /* every group's caches get the same layout, the longest the position table allows:
     * the next group then reuses the pages this one touched instead of faulting in new
     * ones (only the rows a group fills are ever touched) */
    int max_len = round_to_tile(m->cfg.max_positions);
    /* the memory of an earlier group is reused: a fresh one for every group would be
     * mapped and page-faulted anew each time (it is larger than malloc keeps for reuse) */
    float *buf = st->buf;
    size_t cap = st->buf_floats;
    double flops = st->flops;
    prepare_step_weights(m, st);
    StepWeights weights = st->weights;
    int weights_kept = st->weights_kept;
    /* carved for every copy; one row per source until model_step_widen */
    *st = (DecodeState){.B = G * copies,
                        .S = S,
                        .max_len = max_len,
                        .copies = 1,
                        .widen = copies,
                        .flops = flops,
                        .weights = weights,
                        .weights_kept = weights_kept};
    size_t need = carve_step(m, st, NULL);
    /* a state not reserved for its largest group grows as groups need more: by half again */
    if (need > cap) free(buf), cap = need + need / 2, buf = xmalloc(sizeof(float) * cap);
    /* not zeroed: every value is written before it is read (caches up to what is filled) */
    st->buf = buf, st->buf_floats = cap;
    carve_step(m, st, st->buf);
    st->B = G;
    for (int l = 0; l < m->cfg.decoder_layers; l++) {
        point_gates(m, &st->layer[l].self_attn, ATTN_DEC_SELF, l);
        point_gates(m, &st->layer[l].cross_attn, ATTN_CROSS, l);
        point_pin(m, st, l, ATTN_DEC_SELF);
        point_pin(m, st, l, ATTN_CROSS);
    }
    for (int i = 0; i < G; i++) st->src_len[i] = b->src_len[i];
    model_reserve(m, model_encode_lean_floats(m, G, S));
    model_encode_lean(m, b);
    st->flops += begin_flops(&m->cfg, G, S);
    /* each source's keys and values, projected once into its row's cache; the keys then
     * by column in one tile (multihead.h: k_tile), a row's block transposed through the
     * scratch */
    for (int l = 0; l < m->cfg.decoder_layers; l++) {
        AttnActs *x = &st->layer[l].cross_attn;
        attention_project_kv(x->k, x->v, &m->p.dec[l].cross_attn, m->a.src.out, G * S, d);
        for (int i = 0; i < G; i++) {
            float *block = x->k + (size_t)i * S * d;
            memcpy(st->scratch, block, sizeof(float) * (size_t)S * d);
            for (int j = 0; j < S; j++)
                for (int c = 0; c < d; c++) block[attn_key_at(S, j, c, d)] = st->scratch[(size_t)j * d + c];
        }
        x->k_tile = S;
        st->layer[l].self_attn.k_tile = SELF_TILE;
    }
}

const float *model_step_widen(DecodeState *st, const Model *m) {
    int G = st->B, K = st->widen, d = m->cfg.d_model, V = m->cfg.tgt_vocab;
    size_t self = (size_t)st->max_len * d, filled = (size_t)st->t * d, filled_k = (size_t)round_to_tile(st->t) * d;
    /* row i to rows i*K .. i*K+K-1, last row first: every row written is one already read
     * (i*K + c >= i, and rows below i are still to come) */
    for (int i = G - 1; i >= 0; i--)
        for (int c = K - 1; c >= 0; c--) {
            size_t r = (size_t)i * K + c;
            if (r == (size_t)i) continue;
            for (int l = 0; l < m->cfg.decoder_layers; l++) {
                DecoderLayerActs *e = &st->layer[l];
                memcpy(e->self_attn.k + r * self, e->self_attn.k + i * self, sizeof(float) * filled_k);
                memcpy(e->self_attn.v + r * self, e->self_attn.v + i * self, sizeof(float) * filled);
            }
            st->src_len[r] = st->src_len[i];
            memcpy(st->logits + r * V, st->logits + (size_t)i * V, sizeof(float) * (size_t)V);
        }
    st->B = G * K, st->copies = K, st->widen = 1;
    return st->logits;
}

const float *model_step(Model *m, DecodeState *st, const int *tokens) {
    const ModelConfig *c = &m->cfg;
    int B = st->B, t = st->t, d = c->d_model;
    DropKeys none = {0, 0}; /* decoding drops nothing */
    stack_embed(m, &st->tgt, m->p.tgt_embed, tokens, B, 1, t, 0.0f, drop_site(&none, 2), NULL);
    for (int i = 0; i < B; i++) st->self_len[i] = t + 1;
    /* one query per sequence: position t sees the cached positions 0..t, all of them */
    AttnShape self = {B, 1, t + 1, d, c->heads, st->self_len, 0, st->max_len, NULL, NULL, 0, t};
    AttnShape cross = {B, 1, st->S, d, c->heads, st->src_len, 0, st->S, NULL, NULL, st->copies, t};
    const float *x = st->tgt.x;
    for (int l = 0; l < c->decoder_layers; l++)
        x = decoder_layer_forward(m, l, &st->layer[l], x, NULL, &self, &cross, st, 0.0f, &none);
    decoder_head(m, &st->tgt, x, B, &st->weights, st->logits);
    st->flops += step_flops(c, B, t, st->S);
    st->t++;
    return st->logits;
}

/* rows (B, per, d): the first `used` rows of block i become those of block from[i],
 * through tmp; blocks that keep their own rows are not copied. When every block takes
 * its own rows or a later block's (from[i] >= i: finished sequences leaving the step, and
 * many beam reorders), first to last reads only blocks not yet written: copied directly.
 * Otherwise only the blocks that are both overwritten and read by another are kept in tmp
 * first (in beam search, a hypothesis that two extensions continue while its own block
 * takes another's), and every block is then written once from wherever its source is. */
static void gather_rows(float *rows, float *tmp, const int *from, int B, int per, int used, int d) {
    size_t block = (size_t)per * d, n = (size_t)used * d;
    int forward = 1;
    for (int i = 0; i < B && forward; i++) forward = from[i] >= i;
    for (int i = 0; forward && i < B; i++)
        if (from[i] != i) memcpy(rows + i * block, rows + (size_t)from[i] * block, sizeof(float) * n);
    if (forward) return;
    for (int i = 0; i < B; i++) {
        int s = from[i], first = 1;
        if (s == i || from[s] == s) continue; /* not moved, or its source stays put */
        for (int j = 0; j < i && first; j++) first = !(from[j] == s && j != s);
        if (first) memcpy(tmp + s * block, rows + (size_t)s * block, sizeof(float) * n);
    }
    for (int i = 0; i < B; i++) {
        int s = from[i];
        if (s != i) memcpy(rows + i * block, (from[s] == s ? rows : tmp) + (size_t)s * block, sizeof(float) * n);
    }
}

void model_step_reorder(DecodeState *st, const Model *m, const int *from) {
    int B = st->B, d = m->cfg.d_model, same_source = 1;
    float *tmp = st->scratch;
    /* rows of one source share their cross-attention keys and values (one block a source
     * once widened: model.h has every row keep its source then), so none are copied while
     * every row takes its state from a row of the same source */
    for (int i = 0; i < B; i++) same_source &= from[i] / st->copies == i / st->copies;
    for (int l = 0; l < m->cfg.decoder_layers; l++) {
        DecoderLayerActs *e = &st->layer[l];
        gather_rows(e->self_attn.k, tmp, from, B, st->max_len, round_to_tile(st->t), d);
        gather_rows(e->self_attn.v, tmp, from, B, st->max_len, st->t, d);
        if (same_source || st->copies > 1) continue;
        gather_rows(e->cross_attn.k, tmp, from, B, st->S, st->S, d);
        gather_rows(e->cross_attn.v, tmp, from, B, st->S, st->S, d);
    }
    int *len = (int *)tmp;
    for (int i = 0; i < B; i++) len[i] = st->src_len[from[i]];
    memcpy(st->src_len, len, sizeof(int) * (size_t)B);
}

void model_step_keep(DecodeState *st, const Model *m, const int *keep, int n) {
    /* the first n rows become rows keep[0..n), as a reorder of n rows would make them; the
     * buffers stay carved for the larger B, and rows past n are simply not used. keep
     * holds whole blocks of copies rows: block j's source is then the source of row
     * keep[j * copies], at or after block j (keep ascends), so the blocks of keys and
     * values are copied first to last. */
    int d = m->cfg.d_model, copies = st->copies;
    size_t cross = (size_t)st->S * d;
    for (int l = 0; l < m->cfg.decoder_layers; l++) {
        DecoderLayerActs *e = &st->layer[l];
        gather_rows(e->self_attn.k, st->scratch, keep, n, st->max_len, round_to_tile(st->t), d);
        gather_rows(e->self_attn.v, st->scratch, keep, n, st->max_len, st->t, d);
        for (int j = 0; j < n / copies; j++) {
            size_t from = (size_t)(keep[j * copies] / copies);
            if (from == (size_t)j) continue;
            memcpy(e->cross_attn.k + j * cross, e->cross_attn.k + from * cross, sizeof(float) * cross);
            memcpy(e->cross_attn.v + j * cross, e->cross_attn.v + from * cross, sizeof(float) * cross);
        }
    }
    for (int i = 0; i < n; i++) st->src_len[i] = st->src_len[keep[i]]; /* keep ascends: read before written */
    st->B = n;
}

void model_step_end(DecodeState *st) {
    if (!st) return;
    free(st->buf);
    if (!st->weights_kept) free(st->weights.buf);
    memset(st, 0, sizeof *st);
}
