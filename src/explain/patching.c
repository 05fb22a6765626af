/* patching: activation patching and attribution patching (patching.h). Every activation is the
 * model's own, kept or replaced through nn's intervention hooks; no layer is computed here. */
#include "explain/patching.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/vocab.h"
#include "util/err.h"
#include "util/mem.h"

static const char *const kind_tag[ATTN_KINDS] = {"enc", "dec", "cross"};

typedef struct {
    Model *m;
    int S, T, d, H;
    int *src_clean, *src_corrupt, *tin, *tout;
    const PatchMetric *metric;
    AttnIntervene iv[ATTN_KINDS][QKV_MAX_LAYERS];
} Runs;

static int kind_layers(const Model *m, int k) {
    return k == ATTN_ENC_SELF ? m->cfg.encoder_layers : m->cfg.decoder_layers;
}
static int kind_rows(const Runs *r, int k) { return k == ATTN_ENC_SELF ? r->S : r->T; }

/* The metric of one pass of src (one sentence) under the interventions set now. */
static double metric_of(Runs *r, const int *src) {
    int sl = r->S, tl = r->T;
    ModelBatch b = {1, r->S, r->T, src, &sl, r->tin, r->tout, &tl, 0};
    model_forward(r->m, &b, 0, 0, 0);
    if (r->metric->at < 0) return -r->m->nll_sum;
    float *lp = xmalloc(sizeof(float) * (size_t)r->m->cfg.tgt_vocab);
    model_row_log_probs(r->m, r->metric->at, lp);
    double v = (double)lp[r->metric->a] - lp[r->metric->b];
    free(lp);
    return v;
}

/* Every sub-layer's ctx kept into keep[k][l] by the next pass (NULL: none). */
static void keep_ctx(Runs *r, float *keep[ATTN_KINDS][QKV_MAX_LAYERS], float *dkeep[ATTN_KINDS][QKV_MAX_LAYERS]) {
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < kind_layers(r->m, k); l++) {
            r->iv[k][l] = (AttnIntervene){0};
            r->iv[k][l].ctx_keep = keep ? keep[k][l] : NULL;
            r->iv[k][l].dctx_keep = dkeep ? dkeep[k][l] : NULL;
            model_attention_intervene(r->m, (AttnKind)k, l, keep || dkeep ? &r->iv[k][l] : NULL);
        }
}

/* dmetric/d(ctx) of every sub-layer and d/d(encoder stream) of every layer, for the clean
 * run: one backward pass (two rows for a contrast: log p(a) and log p(b)). */
static void clean_gradients(Runs *r, float *dctx[ATTN_KINDS][QKV_MAX_LAYERS], float **denc) {
    Model *m = r->m;
    int S = r->S, T = r->T, d = r->d, rows = r->metric->at < 0 ? 1 : 2;
    float *scratch[ATTN_KINDS][QKV_MAX_LAYERS] = {{0}}, *enc_scratch[QKV_MAX_LAYERS] = {0};
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < kind_layers(m, k); l++)
            scratch[k][l] = xmalloc(sizeof(float) * (size_t)rows * kind_rows(r, k) * d);
    for (int l = 0; l < m->cfg.encoder_layers; l++) {
        enc_scratch[l] = xmalloc(sizeof(float) * (size_t)rows * S * d);
        model_stream_keep_grad(m, l, enc_scratch[l]);
    }
    keep_ctx(r, NULL, scratch);
    int *src = xmalloc(sizeof(int) * (size_t)rows * S), *tin = xmalloc(sizeof(int) * (size_t)rows * T);
    int *tout = xmalloc(sizeof(int) * (size_t)rows * T), sl[2] = {S, S}, tl[2] = {T, T};
    for (int i = 0; i < rows; i++) {
        memcpy(src + (size_t)i * S, r->src_clean, sizeof(int) * (size_t)S);
        memcpy(tin + (size_t)i * T, r->tin, sizeof(int) * (size_t)T);
        if (r->metric->at < 0) memcpy(tout + (size_t)i * T, r->tout, sizeof(int) * (size_t)T);
        else {
            for (int t = 0; t < T; t++) tout[(size_t)i * T + t] = VOCAB_PAD;
            tout[(size_t)i * T + r->metric->at] = i ? r->metric->b : r->metric->a;
        }
    }
    ModelBatch b = {rows, S, T, src, sl, tin, tout, tl, 0};
    model_reserve(m, model_arena_floats(m, rows, S, T));
    model_forward(m, &b, 0, 0, 0);
    m->loss_tokens = 1; /* the summed -log p, unscaled */
    model_backward(m, &b);
    model_zero_grad(m);
    /* the loss is -log p: the metric's gradient is minus row 0's, plus row 1's (log p(b)) */
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < kind_layers(m, k); l++) {
            size_t n = (size_t)kind_rows(r, k) * d;
            for (size_t i = 0; i < n; i++) dctx[k][l][i] = -scratch[k][l][i] + (rows == 2 ? scratch[k][l][n + i] : 0);
            free(scratch[k][l]);
        }
    for (int l = 0; l < m->cfg.encoder_layers; l++) {
        size_t n = (size_t)S * d;
        for (size_t i = 0; i < n; i++) denc[l][i] = -enc_scratch[l][i] + (rows == 2 ? enc_scratch[l][n + i] : 0);
        model_stream_keep_grad(m, l, NULL);
        free(enc_scratch[l]);
    }
    keep_ctx(r, NULL, NULL);
    free(src), free(tin), free(tout);
}

/* ranks (average ranks for ties) of x into rk */
static void ranks(const double *x, int n, double *rk) {
    int *ix = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) ix[i] = i;
    for (int i = 1; i < n; i++) {
        int v = ix[i], j = i;
        while (j > 0 && x[ix[j - 1]] > x[v]) ix[j] = ix[j - 1], j--;
        ix[j] = v;
    }
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && x[ix[j + 1]] == x[ix[i]]) j++;
        for (int k = i; k <= j; k++) rk[ix[k]] = (i + j) / 2.0;
        i = j + 1;
    }
    free(ix);
}

double spearman_rho(const double *x, const double *y, int n) {
    double *rx = xmalloc(sizeof(double) * (size_t)n), *ry = xmalloc(sizeof(double) * (size_t)n);
    ranks(x, n, rx), ranks(y, n, ry);
    double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) mx += rx[i], my += ry[i];
    mx /= n, my /= n;
    for (int i = 0; i < n; i++)
        sxy += (rx[i] - mx) * (ry[i] - my), sxx += (rx[i] - mx) * (rx[i] - mx), syy += (ry[i] - my) * (ry[i] - my);
    free(rx), free(ry);
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

int patch_run(Model *m, const int *clean, const int *corrupt, int ns, const int *tgt, int nt, const PatchMetric *metric,
              PatchTable *out) {
    memset(out, 0, sizeof *out);
    Runs r = {.m = m, .S = ns + 1, .T = nt + 1, .d = m->cfg.d_model, .H = m->cfg.heads, .metric = metric};
    int S = r.S, T = r.T, d = r.d, H = r.H, Le = m->cfg.encoder_layers;
    if (metric->at >= T) return err_set("the contrast's position %d is past the target's %d", metric->at, T);
    r.src_clean = xmalloc(sizeof(int) * (size_t)S), r.src_corrupt = xmalloc(sizeof(int) * (size_t)S);
    r.tin = xmalloc(sizeof(int) * (size_t)T), r.tout = xmalloc(sizeof(int) * (size_t)T);
    batch_frame_source(clean, ns, r.src_clean, S);
    batch_frame_source(corrupt, ns, r.src_corrupt, S);
    batch_frame_target(tgt, nt, r.tin, r.tout, T);
    float smoothing = m->cfg.label_smoothing;
    m->cfg.label_smoothing = 0.0f;
    model_reserve(m, model_arena_floats(m, 2, S, T));

    float *ctx[2][ATTN_KINDS][QKV_MAX_LAYERS] = {{{0}}}, *dctx[ATTN_KINDS][QKV_MAX_LAYERS] = {{0}};
    float *enc[2][QKV_MAX_LAYERS] = {{0}}, *denc[QKV_MAX_LAYERS] = {0};
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < kind_layers(m, k); l++) {
            size_t n = (size_t)kind_rows(&r, k) * d;
            ctx[0][k][l] = xmalloc(sizeof(float) * n), ctx[1][k][l] = xmalloc(sizeof(float) * n);
            dctx[k][l] = xmalloc(sizeof(float) * n);
        }
    for (int l = 0; l < Le; l++) {
        enc[0][l] = xmalloc(sizeof(float) * (size_t)S * d), enc[1][l] = xmalloc(sizeof(float) * (size_t)S * d);
        denc[l] = xmalloc(sizeof(float) * (size_t)S * d);
    }
    /* both runs, every activation kept: [0] clean, [1] corrupted */
    for (int run = 1; run >= 0; run--) {
        keep_ctx(&r, ctx[run], NULL);
        double v = metric_of(&r, run ? r.src_corrupt : r.src_clean);
        *(run ? &out->corrupt : &out->clean) = v;
        for (int l = 0; l < Le; l++) memcpy(enc[run][l], model_stream_output(m, 0, l), sizeof(float) * (size_t)S * d);
    }
    keep_ctx(&r, NULL, NULL);
    clean_gradients(&r, dctx, denc);

    /* the patches: the corrupted run's activations, or a fraction of the way to them */
    double f = metric->fraction > 0 ? metric->fraction : 1.0;
    float *ctx_to[ATTN_KINDS][QKV_MAX_LAYERS] = {{0}}, *enc_to[QKV_MAX_LAYERS] = {0};
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < kind_layers(m, k); l++) {
            size_t cnt = (size_t)kind_rows(&r, k) * d;
            ctx_to[k][l] = xmalloc(sizeof(float) * cnt);
            for (size_t i = 0; i < cnt; i++)
                ctx_to[k][l][i] = f == 1.0 ? ctx[1][k][l][i]
                                           : ctx[0][k][l][i] + (float)f * (ctx[1][k][l][i] - ctx[0][k][l][i]);
        }
    for (int l = 0; l < Le; l++) {
        enc_to[l] = xmalloc(sizeof(float) * (size_t)S * d);
        for (size_t i = 0; i < (size_t)S * d; i++)
            enc_to[l][i] = f == 1.0 ? enc[1][l][i] : enc[0][l][i] + (float)f * (enc[1][l][i] - enc[0][l][i]);
    }
    int n_heads = model_head_count(m), n = n_heads + Le * S;
    out->c = xcalloc((size_t)n, sizeof(PatchComponent));
    unsigned char *which = xcalloc((size_t)(S > H ? S : H), 1);
    int dh = d / H, at = 0;
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < kind_layers(m, k); l++)
            for (int h = 0; h < H; h++, at++) {
                PatchComponent *c = &out->c[at];
                snprintf(c->name, sizeof c->name, "%s.L%d.H%d", kind_tag[k], l, h);
                c->kind = k, c->layer = l, c->head = h, c->pos = -1;
                memset(which, 0, (size_t)H);
                which[h] = 1;
                r.iv[k][l] = (AttnIntervene){.ctx_from = ctx_to[k][l], .ctx_heads = which};
                model_attention_intervene(m, (AttnKind)k, l, &r.iv[k][l]);
                c->effect = metric_of(&r, r.src_clean) - out->clean;
                model_attention_intervene(m, (AttnKind)k, l, NULL);
                double e = 0;
                for (int row = 0; row < kind_rows(&r, k); row++)
                    for (int j = 0; j < dh; j++) {
                        size_t x = (size_t)row * d + (size_t)h * dh + j;
                        e += (double)dctx[k][l][x] * (ctx_to[k][l][x] - ctx[0][k][l][x]);
                    }
                c->atp = e;
            }
    for (int l = 0; l < Le; l++)
        for (int j = 0; j < S; j++, at++) {
            PatchComponent *c = &out->c[at];
            snprintf(c->name, sizeof c->name, "enc.L%d@%d", l, j);
            c->kind = -1, c->layer = l, c->head = -1, c->pos = j;
            memset(which, 0, (size_t)S);
            which[j] = 1;
            model_stream_patch(m, 0, l, enc_to[l], which);
            c->effect = metric_of(&r, r.src_clean) - out->clean;
            double e = 0;
            for (int x = 0; x < d; x++)
                e += (double)denc[l][(size_t)j * d + x] * (enc_to[l][(size_t)j * d + x] - enc[0][l][(size_t)j * d + x]);
            c->atp = e;
        }
    /* everything: the encoder's output, every position, patched (from the corrupted run) */
    memset(which, 1, (size_t)S);
    model_stream_patch(m, 0, Le - 1, enc_to[Le - 1], which);
    out->everything = metric_of(&r, r.src_clean);
    model_stream_patch(m, 0, 0, NULL, NULL);
    out->n = n;
    double *ef = xmalloc(sizeof(double) * (size_t)n), *ap = xmalloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) ef[i] = out->c[i].effect, ap[i] = out->c[i].atp;
    out->rho = spearman_rho(ef, ap, n);
    free(ef), free(ap), free(which);
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < kind_layers(m, k); l++)
            free(ctx[0][k][l]), free(ctx[1][k][l]), free(dctx[k][l]), free(ctx_to[k][l]);
    for (int l = 0; l < Le; l++) free(enc[0][l]), free(enc[1][l]), free(denc[l]), free(enc_to[l]);
    free(r.src_clean), free(r.src_corrupt), free(r.tin), free(r.tout);
    m->cfg.label_smoothing = smoothing;
    return 0;
}

void patch_free(PatchTable *t) {
    free(t->c);
    memset(t, 0, sizeof *t);
}
