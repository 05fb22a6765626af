/* model: see model.h.
 *
 * The parameter table and the activation arena are both described by one "bind"
 * function each, written once and used for every buffer (params, grads; counting and
 * carving), so the forward and the backward pass can never disagree about layout. */
#define QKV_NN_INTERNAL /* the pieces incremental.c shares (model.h) */
#include "nn/model.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h> /* snprintf */
#include <stdlib.h>
#include <string.h>

#include "nn/kernels.h"
#include "nn/panels.h"
#include "nn/profile.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/rng.h"

/* ---- parameter table ---------------------------------------------------------------- */

typedef struct {
    Model *m;
    float *base; /* NULL while building the table */
    int index;   /* next tensor */
    int building;
} Binder;

static float *tensor(Binder *bd, const char *name, int rows, int cols) {
    Model *m = bd->m;
    if (bd->building) {
        m->tensors = xrealloc(m->tensors, sizeof(TensorInfo) * (size_t)(m->n_tensors + 1));
        TensorInfo *t = &m->tensors[m->n_tensors++];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ndim = cols > 0 ? 2 : 1;
        t->shape[0] = rows;
        t->shape[1] = cols > 0 ? cols : 1;
        t->size = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
        t->offset = m->n_params;
        m->n_params += t->size;
        return NULL;
    }
    TensorInfo *t = &m->tensors[bd->index++];
    return bd->base + t->offset;
}

static void bind_attn(Binder *bd, AttnParams *a, const char *prefix, int d) {
    char n[96];
#define T2(field) (snprintf(n, sizeof n, "%s." #field, prefix), a->field = tensor(bd, n, d, d))
#define T1(field) (snprintf(n, sizeof n, "%s." #field, prefix), a->field = tensor(bd, n, d, 0))
    T2(w_q), T1(b_q), T2(w_k), T1(b_k), T2(w_v), T1(b_v), T2(w_o), T1(b_o);
#undef T2
#undef T1
}

static void bind_norm(Binder *bd, NormParams *p, const char *prefix, int d) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", prefix);
    p->w = tensor(bd, n, d, 0);
    snprintf(n, sizeof n, "%s.bias", prefix);
    p->b = tensor(bd, n, d, 0);
}

static void bind_ffn(Binder *bd, FfnParams *p, const char *prefix, int d, int ff) {
    char n[96];
    snprintf(n, sizeof n, "%s.w_1", prefix);
    p->w_1 = tensor(bd, n, d, ff);
    snprintf(n, sizeof n, "%s.b_1", prefix);
    p->b_1 = tensor(bd, n, ff, 0);
    snprintf(n, sizeof n, "%s.w_2", prefix);
    p->w_2 = tensor(bd, n, ff, d);
    snprintf(n, sizeof n, "%s.b_2", prefix);
    p->b_2 = tensor(bd, n, d, 0);
}

static void bind_params(Binder *bd, Params *p) {
    const ModelConfig *c = &bd->m->cfg;
    int d = c->d_model;
    char n[64];
    p->src_embed = tensor(bd, "encoder.embed_tokens", c->src_vocab, d);
    p->tgt_embed = tensor(bd, "decoder.embed_tokens", c->tgt_vocab, d);
    p->generator = c->tie_embeddings ? p->tgt_embed : tensor(bd, "generator", c->tgt_vocab, d);
    for (int l = 0; l < c->encoder_layers; l++) {
        EncoderLayerParams *e = &p->enc[l];
        snprintf(n, sizeof n, "encoder.layers.%d.self_attn", l), bind_attn(bd, &e->self_attn, n, d);
        snprintf(n, sizeof n, "encoder.layers.%d.norm1", l), bind_norm(bd, &e->norm1, n, d);
        snprintf(n, sizeof n, "encoder.layers.%d.ffn", l), bind_ffn(bd, &e->ffn, n, d, c->d_ff);
        snprintf(n, sizeof n, "encoder.layers.%d.norm2", l), bind_norm(bd, &e->norm2, n, d);
    }
    for (int l = 0; l < c->decoder_layers; l++) {
        DecoderLayerParams *e = &p->dec[l];
        snprintf(n, sizeof n, "decoder.layers.%d.self_attn", l), bind_attn(bd, &e->self_attn, n, d);
        snprintf(n, sizeof n, "decoder.layers.%d.norm1", l), bind_norm(bd, &e->norm1, n, d);
        snprintf(n, sizeof n, "decoder.layers.%d.cross_attn", l), bind_attn(bd, &e->cross_attn, n, d);
        snprintf(n, sizeof n, "decoder.layers.%d.norm2", l), bind_norm(bd, &e->norm2, n, d);
        snprintf(n, sizeof n, "decoder.layers.%d.ffn", l), bind_ffn(bd, &e->ffn, n, d, c->d_ff);
        snprintf(n, sizeof n, "decoder.layers.%d.norm3", l), bind_norm(bd, &e->norm3, n, d);
    }
    if (c->pre_norm) {
        bind_norm(bd, &p->enc_norm, "encoder.norm", d);
        bind_norm(bd, &p->dec_norm, "decoder.norm", d);
    }
}

int model_product_shapes(const ModelConfig *c, ProductShape *out) {
    int d = c->d_model, ff = c->d_ff, E = c->encoder_layers, D = c->decoder_layers, n = 0;
    out[n++] = (ProductShape){0, 0, d, d, 4 * E + 2 * D}; /* encoder Q K V O, cross K V */
    out[n++] = (ProductShape){0, 0, d, ff, E};
    out[n++] = (ProductShape){0, 0, ff, d, E};
    out[n++] = (ProductShape){1, 0, d, d, 6 * D}; /* self Q K V O, cross Q O */
    out[n++] = (ProductShape){1, 0, d, ff, D};
    out[n++] = (ProductShape){1, 0, ff, d, D};
    out[n++] = (ProductShape){1, 1, d, c->tgt_vocab, 1};
    return n;
}

void model_position_flops(const ModelConfig *c, double *src, double *tgt) {
    ProductShape sh[MODEL_PRODUCT_SHAPES];
    int n = model_product_shapes(c, sh);
    *src = *tgt = 0.0;
    for (int i = 0; i < n; i++) *(sh[i].target ? tgt : src) += 2.0 * sh[i].k * sh[i].m * sh[i].count;
}

int model_init(Model *m, const ModelConfig *cfg) {
    memset(m, 0, sizeof *m); /* first: a model that failed here is still safe to model_free */
    /* decoding multiplies on OpenBLAS's own threads: there must be room for their buffers */
    if (blas_room_check(openblas_get_num_threads()) != 0) return -1;
    m->cfg = *cfg;
    m->classifier_rows = MODEL_CLASSIFIER_ROWS;
    const ModelConfig *c = cfg;
    if (c->d_model <= 0 || c->heads <= 0 || c->d_model % c->heads != 0)
        return err_set("d_model must be a positive multiple of heads");
    if (c->encoder_layers < 1 || c->encoder_layers > QKV_MAX_LAYERS || c->decoder_layers < 1 ||
        c->decoder_layers > QKV_MAX_LAYERS)
        return err_set("layer counts must be between 1 and %d", QKV_MAX_LAYERS);
    if (c->src_vocab < 4 || c->tgt_vocab < 4 || c->d_ff <= 0 || c->max_positions <= 0)
        return err_set("bad model sizes");
    Binder bd = {.m = m, .building = 1};
    bind_params(&bd, &m->p);
    m->params = xcalloc_big(m->n_params, sizeof(float));
    m->grads = xcalloc_big(m->n_params, sizeof(float));
    bd = (Binder){.m = m, .base = m->params};
    bind_params(&bd, &m->p);
    bd = (Binder){.m = m, .base = m->grads};
    bind_params(&bd, &m->g);
    m->pos_table = xmalloc(sizeof(float) * (size_t)c->max_positions * c->d_model);
    positional_table(m->pos_table, c->max_positions, c->d_model);
    return 0;
}

void model_init_replica(Model *r, const Model *m) {
    *r = *m;
    r->is_replica = 1;
    r->grads = xcalloc_big(m->n_params, sizeof(float));
    Binder bd = {.m = r, .base = r->grads};
    bind_params(&bd, &r->g);
    r->arena = NULL;
    r->arena_floats = 0;
    r->decode_logits = NULL;
    r->decode_logits_floats = 0;
    r->B = r->S = r->T = -1;
    /* a replica starts ungated; gates set on it later are its own */
    r->head_gate = r->head_gate_grad = r->head_gate_rows = NULL;
    r->head_gate_nrows = 0;
    memset(r->embed_alpha, 0, sizeof r->embed_alpha), memset(r->embed_grad, 0, sizeof r->embed_grad);
    r->patch_rows = NULL, r->patch_which = NULL;
    memset(r->grad_keep, 0, sizeof r->grad_keep);
    for (int l = 0; l < QKV_MAX_LAYERS; l++) {
        r->a.enc[l].attn.gate = r->a.dec[l].self_attn.gate = r->a.dec[l].cross_attn.gate = NULL;
        r->a.enc[l].attn.dgate = r->a.dec[l].self_attn.dgate = r->a.dec[l].cross_attn.dgate = NULL;
        r->a.enc[l].attn.dgate_rows = r->a.dec[l].self_attn.dgate_rows = r->a.dec[l].cross_attn.dgate_rows = NULL;
        r->a.enc[l].attn.iv = r->a.dec[l].self_attn.iv = r->a.dec[l].cross_attn.iv = NULL;
        r->a.enc[l].attn.scores = r->a.dec[l].self_attn.scores = r->a.dec[l].cross_attn.scores = NULL;
    }
}

void model_free(Model *m) {
    if (!m) return;
    if (!m->is_replica) {
        free(m->tensors);
        free(m->params);
        free(m->pos_table);
        if (m->step_weights) free(m->step_weights->buf);
        free(m->step_weights);
    }
    free(m->head_gate); /* a replica's are its own: it starts without */
    free(m->head_gate_grad);
    free(m->grads);
    free(m->arena);
    free(m->decode_logits);
    memset(m, 0, sizeof *m);
}

void model_init_weights(Model *m, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        float *w = m->params + t->offset;
        const char *leaf = strrchr(t->name, '.');
        leaf = leaf ? leaf + 1 : t->name;
        if (strstr(t->name, "embed_tokens") || strcmp(t->name, "generator") == 0) {
            float std = 1.0f / sqrtf((float)m->cfg.d_model);
            for (size_t j = 0; j < t->size; j++) w[j] = std * rng_normal(&r);
        } else if (t->ndim == 2) {
            float a = sqrtf(6.0f / (float)(t->shape[0] + t->shape[1]));
            for (size_t j = 0; j < t->size; j++) w[j] = a * (2.0f * (float)rng_uniform(&r) - 1.0f);
        } else if (strcmp(leaf, "weight") == 0) {
            for (size_t j = 0; j < t->size; j++) w[j] = 1.0f;
        } else {
            memset(w, 0, sizeof(float) * t->size);
        }
    }
}

const TensorInfo *model_find_tensor(const Model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

/* ---- activation arena ---------------------------------------------------------------- */

/* n bytes, for masks */
static uint8_t *carver_take_bytes(Carver *cv, size_t n) { return (uint8_t *)carver_take(cv, (n + 3) / 4); }

float *carver_take(Carver *cv, size_t n) {
    float *p = cv->base ? cv->base + cv->used : NULL;
    cv->used += (n + 15) & ~(size_t)15; /* slices start at multiples of 64 bytes from the arena start */
    return p;
}

void carve_residual(Carver *cv, Residual *r, size_t N, int d, int pre) {
    r->ln = carver_take(cv, N * d);
    r->mean = carver_take(cv, N);
    r->rstd = carver_take(cv, N);
    r->mask = carver_take_bytes(cv, N * d);
    r->sum = carver_take(cv, N * d);
    r->out = pre ? r->sum : r->ln;
}

/* `out` is only read by the residual right after it is written, never by a backward
 * pass, so every sub-layer's output shares one buffer. */
static void carve_attn(Carver *cv, AttnActs *a, int B, int Tq, int Tk, int d, int H, float *shared_out) {
    a->q = carver_take(cv, (size_t)B * Tq * d);
    a->k = carver_take(cv, (size_t)B * Tk * d);
    a->v = carver_take(cv, (size_t)B * Tk * d);
    a->p = carver_take(cv, (size_t)B * H * Tq * Tk);
    a->ctx = carver_take(cv, (size_t)B * Tq * d);
    a->out = shared_out;
}

void carve_stack(Carver *cv, StackActs *s, size_t N, int d) {
    s->emb = carver_take(cv, N * d);
    s->emb_mask = carver_take_bytes(cv, N * d);
    s->x = carver_take(cv, N * d);
    s->out = carver_take(cv, N * d);
    s->norm_mean = carver_take(cv, N);
    s->norm_rstd = carver_take(cv, N);
}

/* Encoder activations come first and depend only on (B, S), so re-carving for a longer
 * target while decoding leaves the encoder output where it is. Lean (the encoder alone,
 * forward only): every layer gets the first one's buffers, and the carve stops after the
 * encoder. A layer reads its input (the last layer's r2.out) only before it writes its own
 * r2, and r1 and r2 stay apart, so the sharing changes no value. */
static size_t carve(const Model *m, Acts *a, float *base, int B, int S, int T, int lean) {
    const ModelConfig *c = &m->cfg;
    int d = c->d_model, H = c->heads, ff = c->d_ff, pre = c->pre_norm;
    size_t Ns = (size_t)B * S, Nt = (size_t)B * T, Nmax = Ns > Nt ? Ns : Nt;
    Carver cv = {.base = base};
    float *shared_out = NULL; /* carved after the encoder's part, set just below */
    carve_stack(&cv, &a->src, Ns, d);
    for (int l = 0; l < c->encoder_layers; l++) {
        EncoderLayerActs *e = &a->enc[l], *first = &a->enc[0];
        if (lean && l > 0) {
            e->r1 = first->r1, e->r2 = first->r2, e->ffn.hidden = first->ffn.hidden;
            e->attn.q = first->attn.q, e->attn.k = first->attn.k, e->attn.v = first->attn.v;
            e->attn.p = first->attn.p, e->attn.ctx = first->attn.ctx;
            continue;
        }
        carve_residual(&cv, &e->r1, Ns, d, pre);
        carve_attn(&cv, &e->attn, B, S, S, d, H, shared_out);
        carve_residual(&cv, &e->r2, Ns, d, pre);
        e->ffn.hidden = carver_take(&cv, Ns * ff);
    }
    shared_out = carver_take(&cv, Nmax * d);
    for (int l = 0; l < c->encoder_layers; l++) a->enc[l].attn.out = a->enc[l].ffn.out = shared_out;
    if (lean) return cv.used;
    carve_stack(&cv, &a->tgt, Nt, d);
    for (int l = 0; l < c->decoder_layers; l++) {
        DecoderLayerActs *e = &a->dec[l];
        carve_residual(&cv, &e->r1, Nt, d, pre);
        carve_attn(&cv, &e->self_attn, B, T, T, d, H, shared_out);
        carve_residual(&cv, &e->r2, Nt, d, pre);
        carve_attn(&cv, &e->cross_attn, B, T, S, d, H, shared_out);
        carve_residual(&cv, &e->r3, Nt, d, pre);
        e->ffn.hidden = carver_take(&cv, Nt * ff);
        e->ffn.out = shared_out;
    }
    size_t chunk = Nt < (size_t)m->classifier_rows ? Nt : (size_t)m->classifier_rows;
    a->cls.chunk = (int)chunk;
    a->cls.logits = carver_take(&cv, chunk * c->tgt_vocab);
    a->cls.x = carver_take(&cv, chunk * d);
    a->cls.dx = carver_take(&cv, chunk * d);
    a->cls.rows = (int *)carver_take_bytes(&cv, chunk * sizeof(int));
    a->cls.labels = (int *)carver_take_bytes(&cv, chunk * sizeof(int));
    /* the decoder's stream gradient is dead once the encoder's backward starts: they share
     * a buffer */
    a->d_src = a->d_tgt = carver_take(&cv, Nmax * d);
    a->d_enc_out = carver_take(&cv, Ns * d);
    a->d_sub = carver_take(&cv, Nmax * d);
    a->d_in = carver_take(&cv, Nmax * d); /* pre-LN: the sub-layer's input gradient */
    int Tmax = S > T ? S : T;
    /* the feed-forward and the attention backward passes never run at once: their
     * scratch shares one block */
    float *block = carver_take(&cv, Nmax * (ff > 4 * d ? ff : 4 * d));
    a->d_hidden = block;
    a->attn.dq = block;
    a->attn.dk = block + Nmax * d;
    a->attn.dv = block + 2 * Nmax * d;
    a->attn.dctx = block + 3 * Nmax * d;
    a->attn.dp = carver_take(&cv, (size_t)B * H * Tmax * Tmax);
    a->src_first = (int *)carver_take_bytes(&cv, (size_t)B * sizeof(int));
    a->tgt_first = (int *)carver_take_bytes(&cv, (size_t)B * sizeof(int));
    a->labels = (int *)carver_take_bytes(&cv, Nt * sizeof(int));
    return cv.used;
}

size_t model_arena_floats(const Model *m, int B, int S, int T) {
    Acts scratch;
    return carve(m, &scratch, NULL, B, S, T, 0);
}

size_t model_encode_lean_floats(const Model *m, int B, int S) {
    Acts scratch;
    return carve(m, &scratch, NULL, B, S, 1, 1);
}

void model_reserve(Model *m, size_t need) {
    if (need > m->arena_floats) {
        /* the prefix is kept, so an encoder output survives a longer decoder shape */
        m->arena = xrealloc_big(m->arena, m->arena_floats * sizeof(float), need * sizeof(float));
        m->arena_floats = need;
        m->B = m->S = m->T = -1;
    }
}

static void use_shape_as(Model *m, int B, int S, int T, int lean) {
    if (m->B == B && m->S == S && m->T == T && m->lean == lean) return;
    size_t need = lean ? model_encode_lean_floats(m, B, S) : model_arena_floats(m, B, S, T);
    if (need > m->arena_floats) {
        /* A caller forgot model_reserve: grow rather than corrupt memory, and count it (the
         * allocation tests see it; a training step must never get here). */
        m->arena_regrowths++;
        model_reserve(m, need);
    }
    carve(m, &m->a, m->arena, B, S, T, lean);
    m->B = B, m->S = S, m->T = T, m->lean = lean;
}

static void use_shape(Model *m, int B, int S, int T) { use_shape_as(m, B, S, T, 0); }

/* ---- residual blocks ------------------------------------------------------------------ */

/* Returns what the sub-layer reads: LN(x) for pre-LN, x itself for post-LN. */
static const float *residual_in(Residual *r, const NormParams *n, const float *x, int N, int d, int pre) {
    if (!pre) return x;
    layernorm_forward(r->ln, r->mean, r->rstd, x, n->w, n->b, N, d);
    return r->ln;
}

/* out = dropout(inp) (+ res) over a stream's N rows. A site's mask element follows the
 * padded (B, T, d) layout whatever the rows: a packed sequence b starts at element b*T*d,
 * so packing drops exactly the elements the padded pass drops. */
static void stream_dropout(float *out, uint8_t *mask, const float *inp, const float *res, const PackedRows *pk, int N,
                           int T, int d, float p, DropSite site) {
    for (int b = 0; b < (pk ? pk->B : 1); b++) {
        size_t at = pk ? (size_t)pk->row[b] * d : 0, n = (size_t)(pk ? pk->len[b] : N) * d;
        size_t offset = site.offset + (pk ? (size_t)b * T * d : 0);
        if (res) dropout_residual_forward(out + at, mask + at, inp + at, res + at, n, p, site.key, offset);
        else dropout_forward(out + at, mask + at, inp + at, n, p, site.key, offset);
    }
}

/* rows: the stream's layout, as the sub-layer's attention shape gives it (pk NULL: padded) */
typedef struct {
    const PackedRows *pk;
    int N, T;
} StreamRows;

static void residual_out(Residual *r, const NormParams *n, const float *x, const float *y, StreamRows rows, int d,
                         int pre, float p, DropSite site) {
    stream_dropout(r->sum, r->mask, y, x, rows.pk, rows.N, rows.T, d, p, site);
    if (!pre) layernorm_forward(r->ln, r->mean, r->rstd, r->sum, n->w, n->b, rows.N, d);
}

/* Backward of residual_out. On entry dx holds the gradient of the block output; on exit
 * it holds the residual path's share of the gradient of x, and dsub the gradient of the
 * sub-layer output. Returns where the sub-layer must add the gradient of its input. */
static float *residual_out_backward(Residual *r, const NormParams *n, NormParams *gn, float *dx, float *dsub,
                                    float *tmp_in, int N, int d, int pre, float p) {
    size_t cnt = (size_t)N * d;
    if (!pre) layernorm_backward_inplace(dx, gn->w, gn->b, r->sum, n->w, r->mean, r->rstd, N, d);
    dropout_backward(dsub, dx, r->mask, cnt, p);
    if (pre) memset(tmp_in, 0, sizeof(float) * cnt);
    return pre ? tmp_in : dx;
}

/* Backward of residual_in: for pre-LN, push the sub-layer's input gradient through LN. */
static void residual_in_backward(Residual *r, const NormParams *n, NormParams *gn, float *dx, const float *dsub_in,
                                 const float *x, int N, int d, int pre) {
    if (pre) layernorm_backward(dx, gn->w, gn->b, dsub_in, x, n->w, r->mean, r->rstd, N, d);
}

static void ffn_forward(FfnActs *f, const FfnParams *w, const float *x, int N, int d, int ff) {
    matmul_forward_with(f->hidden, x, w->w_1, f->panels[0], w->b_1, N, d, ff);
    relu_forward(f->hidden, f->hidden, (size_t)N * ff);
    matmul_forward_with(f->out, f->hidden, w->w_2, f->panels[1], w->b_2, N, ff, d);
}

static void ffn_backward(FfnParams *g, float *dx, const float *dout, float *dhidden, const FfnActs *f,
                         const FfnParams *w, const float *x, int N, int d, int ff) {
    matmul_backward_set(dhidden, g->w_2, g->b_2, dout, f->hidden, w->w_2, N, ff, d);
    relu_backward(dhidden, dhidden, f->hidden, (size_t)N * ff);
    matmul_backward(dx, g->w_1, g->b_1, dhidden, x, w->w_1, N, d, ff);
}

/* Backward of a feed-forward block of input x (the FFN inside its residual, dropout and
 * layer norm): dx, the block output's gradient on entry, becomes its input's. */
static void ffn_block_backward(Model *m, Residual *r, const NormParams *n, NormParams *gn, FfnParams *g,
                               const FfnActs *f, const FfnParams *w, float *dx, const float *x, int N) {
    Acts *a = &m->a;
    int d = m->cfg.d_model, pre = m->cfg.pre_norm;
    float *din = residual_out_backward(r, n, gn, dx, a->d_sub, a->d_in, N, d, pre, m->dropout_p);
    ffn_backward(g, din, a->d_sub, a->d_hidden, f, w, pre ? r->ln : x, N, d, m->cfg.d_ff);
    residual_in_backward(r, n, gn, dx, din, x, N, d, pre);
}

/* ---- forward ------------------------------------------------------------------------- */

DropSite drop_site(const DropKeys *k, int site) { return (DropSite){hash64(k->step_key, (uint64_t)site), k->offset}; }

static DropKeys drop_keys(const Model *m, uint64_t seed, uint64_t step, int row0, int T) {
    return (DropKeys){hash64(seed, step), (size_t)row0 * (size_t)T * (size_t)m->cfg.d_model};
}

/* The what-if patch of the residual stream: flagged rows replaced (model_stream_patch). */
static void patch_stream_rows(const Model *m, float *out, int N) {
    int d = m->cfg.d_model;
    for (int r = 0; r < N; r++)
        if (m->patch_which[r]) memcpy(out + (size_t)r * d, m->patch_rows + (size_t)r * d, sizeof(float) * (size_t)d);
}

/* Rows are positions first..first+T-1 of B sequences. */
void stack_embed(const Model *m, StackActs *s, const float *table, const int *tokens, int B, int T, int first, float p,
                 DropSite site, const PackedRows *pk) {
    int d = m->cfg.d_model;
    const float *pos = m->pos_table + (size_t)first * d;
    if (pk)
        for (int b = 0; b < B; b++)
            embedding_forward(s->emb + (size_t)pk->row[b] * d, tokens + (size_t)b * T, table, pos, sqrtf((float)d), 1,
                              pk->len[b], d);
    else embedding_forward(s->emb, tokens, table, pos, sqrtf((float)d), B, T, d);
    /* the full passes' streams only: incremental decoding embeds into a state of its own */
    const float *alpha = s == &m->a.src ? m->embed_alpha[0] : s == &m->a.tgt ? m->embed_alpha[1] : NULL;
    if (alpha && !pk) /* the attribution hook: scaled token embeddings, positions unchanged */
        for (int r = 0; r < B * T; r++) {
            const float *e = table + (size_t)tokens[r] * d, *pe = pos + (size_t)(r % T) * d;
            float *o = s->emb + (size_t)r * d, k = alpha[r] * sqrtf((float)d);
            for (int c = 0; c < d; c++) o[c] = k * e[c] + pe[c];
        }
    stream_dropout(s->x, s->emb_mask, s->emb, NULL, pk, B * T, T, d, p, site);
}

/* The stream's rows for this pass: packed (pk) or B padded blocks of T. */
static StreamRows stream_rows(const PackedRows *pk, int B, int T) { return (StreamRows){pk, pk ? pk->N : B * T, T}; }

static void encoder_forward(Model *m, const ModelBatch *b, float p, uint64_t seed, uint64_t step) {
    const ModelConfig *c = &m->cfg;
    Acts *a = &m->a;
    const PackedRows *pk = a->src_pk;
    int d = c->d_model, B = b->B, S = b->S, pre = c->pre_norm;
    StreamRows rows = stream_rows(pk, B, S);
    int N = rows.N;
    DropKeys keys = drop_keys(m, seed, step, b->row0, S);
    stack_embed(m, &a->src, m->p.src_embed, b->src, B, S, 0, p, drop_site(&keys, 1), pk);
    AttnShape shape = {B, S, S, d, c->heads, b->src_len, 0, S, pk, pk, 0, 0};
    const float *x = a->src.x;
    for (int l = 0; l < c->encoder_layers; l++) {
        EncoderLayerActs *e = &a->enc[l];
        const EncoderLayerParams *w = &m->p.enc[l];
        const float *in = residual_in(&e->r1, &w->norm1, x, N, d, pre);
        attention_forward(&e->attn, &w->self_attn, in, in, &shape);
        residual_out(&e->r1, &w->norm1, x, e->attn.out, rows, d, pre, p, drop_site(&keys, 100 + 4 * l));
        x = e->r1.out;
        in = residual_in(&e->r2, &w->norm2, x, N, d, pre);
        ffn_forward(&e->ffn, &w->ffn, in, N, d, c->d_ff);
        residual_out(&e->r2, &w->norm2, x, e->ffn.out, rows, d, pre, p, drop_site(&keys, 101 + 4 * l));
        x = e->r2.out;
        if (m->patch_rows && m->patch_stream == 0 && m->patch_layer == l && !pk) patch_stream_rows(m, e->r2.out, N);
    }
    if (pre)
        layernorm_forward(a->src.out, a->src.norm_mean, a->src.norm_rstd, x, m->p.enc_norm.w, m->p.enc_norm.b, N, d);
    else memcpy(a->src.out, x, sizeof(float) * (size_t)N * d);
}

/* One decoder layer over the rows of x. Without a DecodeState, its keys and values come
 * from this pass (training, the full forward): self-attention from its own input,
 * cross-attention from the encoder output mem. With one (incremental decoding), the new
 * rows' self-attention keys and values join the cache at position st->t and the
 * cross-attention reads the cached encoder keys and values. */
const float *decoder_layer_forward(const Model *m, int l, DecoderLayerActs *e, const float *x, const float *mem,
                                   const AttnShape *self, const AttnShape *cross, DecodeState *st, float p,
                                   const DropKeys *keys) {
    const DecoderLayerParams *w = &m->p.dec[l];
    StreamRows rows = stream_rows(self->q, self->B, self->Tq);
    int d = m->cfg.d_model, N = rows.N, pre = m->cfg.pre_norm;
    const float *in = residual_in(&e->r1, &w->norm1, x, N, d, pre);
    if (st) {
        float *k_new = st->kv_new, *v_new = st->kv_new + (size_t)N * d;
        const AttnParams *a = &w->self_attn;
        matmul_forward_with(k_new, in, a->w_k, e->self_attn.panels[1], a->b_k, N, d, d);
        matmul_forward_with(v_new, in, a->w_v, e->self_attn.panels[2], a->b_v, N, d, d);
        for (int b = 0; b < N; b++) {
            size_t block = (size_t)b * st->max_len * d;
            float *k = e->self_attn.k + block;
            for (int c = 0; c < d; c++) k[attn_key_at(e->self_attn.k_tile, st->t, c, d)] = k_new[(size_t)b * d + c];
            memcpy(e->self_attn.v + block + (size_t)st->t * d, v_new + (size_t)b * d, sizeof(float) * (size_t)d);
        }
    }
    attention_forward(&e->self_attn, &w->self_attn, in, st ? NULL : in, self);
    residual_out(&e->r1, &w->norm1, x, e->self_attn.out, rows, d, pre, p, drop_site(keys, 500 + 4 * l));
    x = e->r1.out;
    in = residual_in(&e->r2, &w->norm2, x, N, d, pre);
    attention_forward(&e->cross_attn, &w->cross_attn, in, st ? NULL : mem, cross);
    residual_out(&e->r2, &w->norm2, x, e->cross_attn.out, rows, d, pre, p, drop_site(keys, 501 + 4 * l));
    x = e->r2.out;
    in = residual_in(&e->r3, &w->norm3, x, N, d, pre);
    ffn_forward(&e->ffn, &w->ffn, in, N, d, m->cfg.d_ff);
    residual_out(&e->r3, &w->norm3, x, e->ffn.out, rows, d, pre, p, drop_site(keys, 502 + 4 * l));
    return e->r3.out;
}

/* The decoder stack's output (after the final norm for pre-LN) into s->out. */
static void decoder_out(const Model *m, StackActs *s, const float *x, int N) {
    int d = m->cfg.d_model;
    if (m->cfg.pre_norm)
        layernorm_forward(s->out, s->norm_mean, s->norm_rstd, x, m->p.dec_norm.w, m->p.dec_norm.b, N, d);
    else memcpy(s->out, x, sizeof(float) * (size_t)N * d);
}

/* The stack's output and all N rows of logits (decoding: no loss, N is small). */
void decoder_head(const Model *m, StackActs *s, const float *x, int N, const StepWeights *w, float *logits) {
    decoder_out(m, s, x, N);
    if (w->panels) panels_product(logits, s->out, w->generator, NULL, N, m->cfg.d_model, m->cfg.tgt_vocab);
    else logits_forward_by_column(logits, s->out, w->generator, N, m->cfg.d_model, m->cfg.tgt_vocab);
}

static void decoder_forward(Model *m, const ModelBatch *b, float p, uint64_t seed, uint64_t step) {
    const ModelConfig *c = &m->cfg;
    Acts *a = &m->a;
    const PackedRows *pt = a->tgt_pk, *ps = a->src_pk;
    int d = c->d_model, B = b->B, T = b->T;
    DropKeys keys = drop_keys(m, seed, step, b->row0, T);
    stack_embed(m, &a->tgt, m->p.tgt_embed, b->tgt_in, B, T, 0, p, drop_site(&keys, 2), pt);
    AttnShape self = {B, T, T, d, c->heads, b->tgt_len, 1, T, pt, pt, 0, 0};
    AttnShape cross = {B, T, b->S, d, c->heads, b->src_len, 0, b->S, pt, ps, 0, 0};
    const float *x = a->tgt.x;
    for (int l = 0; l < c->decoder_layers; l++) {
        x = decoder_layer_forward(m, l, &a->dec[l], x, a->src.out, &self, &cross, NULL, p, &keys);
        if (m->patch_rows && m->patch_stream == 1 && m->patch_layer == l && !pt)
            patch_stream_rows(m, a->dec[l].r3.out, B * T);
    }
    decoder_out(m, &a->tgt, x, stream_rows(pt, B, T).N);
}

/* The loss over the decoder's output; with dx, also the classifier's gradients (dx
 * overwritten, the generator's added), scaled by 1 / loss_tokens. */
static int classifier(Model *m, const ModelBatch *b, float *dx, float scale) {
    const ModelConfig *c = &m->cfg;
    const PackedRows *pk = m->a.tgt_pk;
    int N = pk ? pk->N : b->B * b->T, count = 0;
    const int *labels = pk ? m->a.labels : b->tgt_out;
    if (dx) memset(dx, 0, sizeof(float) * (size_t)N * c->d_model);
    m->loss_sum = classifier_forward_backward(&m->a.cls, m->a.tgt.out, m->p.generator, labels, N, c->d_model,
                                              c->tgt_vocab, c->label_smoothing, c->pad_id, &count, &m->nll_sum, dx,
                                              dx ? m->g.generator : NULL, scale);
    m->n_tokens = count;
    return count;
}

/* The packed streams' rows for b and its targets packed alike, or none (packed = 0). */
static void lay_out_rows(Acts *a, const ModelBatch *b, int packed) {
    a->src_pk = a->tgt_pk = NULL;
    if (!packed) return;
    a->src_rows = (PackedRows){a->src_first, b->src_len, b->B, 0};
    a->tgt_rows = (PackedRows){a->tgt_first, b->tgt_len, b->B, 0};
    for (int i = 0; i < b->B; i++) {
        a->src_first[i] = a->src_rows.N, a->src_rows.N += b->src_len[i];
        a->tgt_first[i] = a->tgt_rows.N, a->tgt_rows.N += b->tgt_len[i];
        memcpy(a->labels + a->tgt_first[i], b->tgt_out + (size_t)i * b->T, sizeof(int) * (size_t)b->tgt_len[i]);
    }
    a->src_pk = &a->src_rows, a->tgt_pk = &a->tgt_rows;
}

static void forward_stacks(Model *m, const ModelBatch *b, float p, uint64_t seed, uint64_t step, int packed) {
    m->dropout_p = p;
    use_shape(m, b->B, b->S, b->T);
    lay_out_rows(&m->a, b, packed && !m->keep_padding);
    encoder_forward(m, b, p, seed, step);
    decoder_forward(m, b, p, seed, step);
}

double model_forward(Model *m, const ModelBatch *b, int train, uint64_t seed, uint64_t step) {
    forward_stacks(m, b, train ? m->cfg.dropout : 0.0f, seed, step, train);
    int count = classifier(m, b, NULL, 0.0f);
    m->loss_tokens = count;
    return count ? m->loss_sum / count : 0.0;
}

double model_decode_loss(Model *m, const ModelBatch *b) {
    m->dropout_p = 0.0f;
    use_shape(m, b->B, b->S, b->T);
    lay_out_rows(&m->a, b, 0);
    decoder_forward(m, b, 0.0f, 0, 0);
    int count = classifier(m, b, NULL, 0.0f);
    m->loss_tokens = count;
    return count ? m->loss_sum / count : 0.0;
}

void model_encode(Model *m, const ModelBatch *b) {
    use_shape(m, b->B, b->S, b->T);
    lay_out_rows(&m->a, b, 0);
    encoder_forward(m, b, 0.0f, 0, 0);
}

void model_encode_lean(Model *m, const ModelBatch *b) {
    use_shape_as(m, b->B, b->S, 1, 1);
    lay_out_rows(&m->a, b, 0);
    encoder_forward(m, b, 0.0f, 0, 0);
}

void model_decode(Model *m, const ModelBatch *b) {
    use_shape(m, b->B, b->S, b->T);
    lay_out_rows(&m->a, b, 0);
    decoder_forward(m, b, 0.0f, 0, 0);
    /* every row's logits, which training never keeps: a buffer of decoding's own */
    size_t need = (size_t)b->B * b->T * m->cfg.tgt_vocab;
    if (need > m->decode_logits_floats)
        m->decode_logits = xrealloc(m->decode_logits, sizeof(float) * need), m->decode_logits_floats = need;
    logits_forward(m->decode_logits, m->a.tgt.out, m->p.generator, b->B * b->T, m->cfg.d_model, m->cfg.tgt_vocab);
}

const float *model_logits_at(Model *m, int i, int t) {
    return m->decode_logits + ((size_t)i * m->T + t) * m->cfg.tgt_vocab;
}

/* ---- one attention sub-layer by (kind, layer): nn/probe.c reads and changes it --------------- */

int attn_layer_exists(const Model *m, AttnKind kind, int layer) {
    int n = kind == ATTN_ENC_SELF                         ? m->cfg.encoder_layers
            : kind == ATTN_DEC_SELF || kind == ATTN_CROSS ? m->cfg.decoder_layers
                                                          : 0;
    return layer >= 0 && layer < n;
}

/* The one place (kind, layer) is mapped onto the arena; the public getter hands it out
 * read-only, the scores setter writes one pointer through it. */
AttnActs *attn_acts(Model *m, AttnKind kind, int layer) {
    if (!attn_layer_exists(m, kind, layer)) return NULL;
    return kind == ATTN_ENC_SELF   ? &m->a.enc[layer].attn
           : kind == ATTN_DEC_SELF ? &m->a.dec[layer].self_attn
                                   : &m->a.dec[layer].cross_attn;
}

/* ---- backward ------------------------------------------------------------------------ */

int model_head_count(const Model *m) { return (m->cfg.encoder_layers + 2 * m->cfg.decoder_layers) * m->cfg.heads; }

int model_head_index(const Model *m, AttnKind kind, int layer, int head) {
    if (!attn_layer_exists(m, kind, layer) || head < 0 || head >= m->cfg.heads) return -1;
    int first = kind == ATTN_ENC_SELF   ? 0
                : kind == ATTN_DEC_SELF ? m->cfg.encoder_layers
                                        : m->cfg.encoder_layers + m->cfg.decoder_layers;
    return (first + layer) * m->cfg.heads + head;
}

void model_zero_grad(Model *m) {
    memset(m->grads, 0, sizeof(float) * m->n_params);
    if (m->head_gate_grad) memset(m->head_gate_grad, 0, sizeof(float) * (size_t)model_head_count(m));
}

static void stack_embed_backward(Model *m, StackActs *s, float *dtable, float *dx, const int *tokens, StreamRows rows) {
    int d = m->cfg.d_model;
    dropout_backward(dx, dx, s->emb_mask, (size_t)rows.N * d, m->dropout_p);
    float *hook = m->embed_grad[s == &m->a.tgt]; /* the backward runs over the full passes' streams only */
    if (hook && !rows.pk) memcpy(hook, dx, sizeof(float) * (size_t)rows.N * d);
    if (!rows.pk) embedding_backward(dtable, dx, tokens, sqrtf((float)d), rows.N, d);
    else
        for (int b = 0; b < rows.pk->B; b++)
            embedding_backward(dtable, dx + (size_t)rows.pk->row[b] * d, tokens + (size_t)b * rows.T, sqrtf((float)d),
                               rows.pk->len[b], d);
}

/* From the gradient of the decoder's output (dx = a->d_tgt, which the classifier wrote)
 * down to the target embedding and into d_enc_out. */
static void decoder_backward(Model *m, const ModelBatch *b) {
    const ModelConfig *c = &m->cfg;
    Acts *a = &m->a;
    const PackedRows *pt = a->tgt_pk, *ps = a->src_pk;
    int d = c->d_model, B = b->B, T = b->T, pre = c->pre_norm;
    StreamRows rows = stream_rows(pt, B, T);
    int N = rows.N;
    float *dx = a->d_tgt;
    if (pre) {
        const float *last = c->decoder_layers ? a->dec[c->decoder_layers - 1].r3.out : a->tgt.x;
        layernorm_backward_inplace(dx, m->g.dec_norm.w, m->g.dec_norm.b, last, m->p.dec_norm.w, a->tgt.norm_mean,
                                   a->tgt.norm_rstd, N, d);
    }
    AttnShape self = {B, T, T, d, c->heads, b->tgt_len, 1, T, pt, pt, 0, 0};
    AttnShape cross = {B, T, b->S, d, c->heads, b->src_len, 0, b->S, pt, ps, 0, 0};
    memset(a->d_enc_out, 0, sizeof(float) * (size_t)stream_rows(ps, B, b->S).N * d);
    for (int l = c->decoder_layers - 1; l >= 0; l--) {
        DecoderLayerActs *e = &a->dec[l];
        const DecoderLayerParams *w = &m->p.dec[l];
        DecoderLayerParams *g = &m->g.dec[l];
        const float *x1 = l ? a->dec[l - 1].r3.out : a->tgt.x, *x2 = e->r1.out, *x3 = e->r2.out;
        ffn_block_backward(m, &e->r3, &w->norm3, &g->norm3, &g->ffn, &e->ffn, &w->ffn, dx, x3, N);
        /* cross-attention block: K/V gradients flow into the encoder output */
        float *din = residual_out_backward(&e->r2, &w->norm2, &g->norm2, dx, a->d_sub, a->d_in, N, d, pre,
                                           m->dropout_p);
        const float *in = pre ? e->r2.ln : x2;
        attention_backward(&g->cross_attn, din, a->d_enc_out, a->d_sub, &e->cross_attn, &w->cross_attn, in, a->src.out,
                           &cross, &a->attn);
        residual_in_backward(&e->r2, &w->norm2, &g->norm2, dx, din, x2, N, d, pre);
        /* masked self-attention block */
        din = residual_out_backward(&e->r1, &w->norm1, &g->norm1, dx, a->d_sub, a->d_in, N, d, pre, m->dropout_p);
        in = pre ? e->r1.ln : x1;
        attention_backward(&g->self_attn, din, din, a->d_sub, &e->self_attn, &w->self_attn, in, in, &self, &a->attn);
        residual_in_backward(&e->r1, &w->norm1, &g->norm1, dx, din, x1, N, d, pre);
    }
    stack_embed_backward(m, &a->tgt, m->g.tgt_embed, dx, b->tgt_in, rows);
}

static void encoder_backward(Model *m, const ModelBatch *b) {
    const ModelConfig *c = &m->cfg;
    Acts *a = &m->a;
    const PackedRows *pk = a->src_pk;
    int d = c->d_model, B = b->B, S = b->S, pre = c->pre_norm;
    StreamRows rows = stream_rows(pk, B, S);
    int N = rows.N;
    float *dx = a->d_src;
    if (pre) {
        const float *last = a->enc[c->encoder_layers - 1].r2.out;
        memset(dx, 0, sizeof(float) * (size_t)N * d);
        layernorm_backward(dx, m->g.enc_norm.w, m->g.enc_norm.b, a->d_enc_out, last, m->p.enc_norm.w, a->src.norm_mean,
                           a->src.norm_rstd, N, d);
    } else {
        memcpy(dx, a->d_enc_out, sizeof(float) * (size_t)N * d);
    }
    AttnShape shape = {B, S, S, d, c->heads, b->src_len, 0, S, pk, pk, 0, 0};
    for (int l = c->encoder_layers - 1; l >= 0; l--) {
        EncoderLayerActs *e = &a->enc[l];
        const EncoderLayerParams *w = &m->p.enc[l];
        EncoderLayerParams *g = &m->g.enc[l];
        if (m->grad_keep[l] && !pk) memcpy(m->grad_keep[l], dx, sizeof(float) * (size_t)N * d);
        const float *x1 = l ? a->enc[l - 1].r2.out : a->src.x, *x2 = e->r1.out;
        ffn_block_backward(m, &e->r2, &w->norm2, &g->norm2, &g->ffn, &e->ffn, &w->ffn, dx, x2, N);
        float *din = residual_out_backward(&e->r1, &w->norm1, &g->norm1, dx, a->d_sub, a->d_in, N, d, pre,
                                           m->dropout_p);
        const float *in = pre ? e->r1.ln : x1;
        attention_backward(&g->self_attn, din, din, a->d_sub, &e->attn, &w->self_attn, in, in, &shape, &a->attn);
        residual_in_backward(&e->r1, &w->norm1, &g->norm1, dx, din, x1, N, d, pre);
    }
    stack_embed_backward(m, &a->src, m->g.src_embed, dx, b->src, rows);
}

static float loss_scale(const Model *m) { return m->loss_tokens ? 1.0f / (float)m->loss_tokens : 0.0f; }

void model_backward(Model *m, const ModelBatch *b) {
    /* the forward's logits again, chunk by chunk, and their gradient; the loss it records
     * is the forward's, bit for bit (the same inputs, the same order) */
    classifier(m, b, m->a.d_tgt, loss_scale(m));
    decoder_backward(m, b);
    encoder_backward(m, b);
}

double model_forward_backward(Model *m, const ModelBatch *b, uint64_t seed, uint64_t step) {
    forward_stacks(m, b, m->cfg.dropout, seed, step, 1);
    if (m->loss_tokens == 0)
        for (int i = 0; i < b->B * b->T; i++) m->loss_tokens += b->tgt_out[i] != m->cfg.pad_id;
    int count = classifier(m, b, m->a.d_tgt, loss_scale(m));
    decoder_backward(m, b);
    encoder_backward(m, b);
    return count ? m->loss_sum / count : 0.0;
}
