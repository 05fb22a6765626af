/* gradattr: saliency, input x gradient (signed and its magnitude), integrated gradients and
 * their contrastive forms (gradattr.h states them). One batched pass gives many rows'
 * gradients: sentences in a batch never meet, so row r's embedding gradient is exactly the
 * gradient of row r's loss. Each row is the same pair at one point alpha of the integration
 * path, for y_t or for the foil; one forward pass serves every target position, each
 * backward pass scores one position t (every other target is padding, which carries no
 * loss). */
#include "explain/gradattr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "util/mem.h"

/* Rows a pass runs at most: bounds the arena (rows x (S + T) positions) */
enum { GRADATTR_ROWS = 48 };

typedef struct {
    int t, step, foil; /* step: -1 the input (alpha 1), -2 the baseline (alpha 0), else k of the path */
} RowJob;

static float job_alpha(const RowJob *j, int m) {
    return j->step == -1 ? 1.0f : j->step == -2 ? 0.0f : ((float)j->step + 0.5f) / (float)m;
}

void gradattr_compute(Model *m, const int *src, int S, const int *tin, const int *tout, int T, int foil, int ig_steps,
                      GradAttr *g) {
    int d = m->cfg.d_model, W = S + T, sides = foil >= 0 ? 2 : 1;
    memset(g, 0, sizeof *g);
    g->S = S, g->T = T, g->ig_steps = ig_steps, g->foil = foil;
    g->saliency = xcalloc((size_t)T * W, sizeof(float));
    g->input_x_grad = xcalloc((size_t)T * W, sizeof(float));
    g->input_x_grad_l2 = xcalloc((size_t)T * W, sizeof(float));
    g->ig = xcalloc((size_t)T * W, sizeof(float));
    g->f = xcalloc((size_t)T, sizeof(double));
    g->f_base = xcalloc((size_t)T, sizeof(double));
    g->ig_error = xcalloc((size_t)T, sizeof(double));
    g->foil_is_word = xcalloc((size_t)T, 1);

    /* every row to run: the input, the baseline and the m path points, each for y_t and
     * (contrastive) the foil; a pass runs some of them forward once, then backward once
     * per target position t (the activations stay; only the scored position changes) */
    int per_t = (ig_steps + 2) * sides, n_jobs = per_t;
    RowJob *jobs = xmalloc(sizeof(RowJob) * (size_t)n_jobs);
    int n = 0;
    for (int step = -2; step < ig_steps; step++)
        for (int s = 0; s < sides; s++) jobs[n++] = (RowJob){0, step, s};

    /* the tokens' scaled embeddings: what input x gradient and IG multiply by */
    float scale = sqrtf((float)d);
    float *emb = xmalloc(sizeof(float) * (size_t)W * d);
    for (int j = 0; j < W; j++) {
        const float *row = j < S ? m->p.src_embed + (size_t)src[j] * d : m->p.tgt_embed + (size_t)tin[j - S] * d;
        for (int c = 0; c < d; c++) emb[(size_t)j * d + c] = scale * row[c];
    }

    int R = GRADATTR_ROWS;
    int *bsrc = xmalloc(sizeof(int) * (size_t)R * S), *btin = xmalloc(sizeof(int) * (size_t)R * T);
    int *btout = xmalloc(sizeof(int) * (size_t)R * T), *slen = xmalloc(sizeof(int) * R),
        *tlen = xmalloc(sizeof(int) * R);
    float *asrc = xmalloc(sizeof(float) * (size_t)R * S), *atgt = xmalloc(sizeof(float) * (size_t)R * T);
    float *gsrc = xmalloc(sizeof(float) * (size_t)R * S * d), *gtgt = xmalloc(sizeof(float) * (size_t)R * T * d);
    float *lp = xmalloc(sizeof(float) * (size_t)m->cfg.tgt_vocab);
    /* df/dx of row t, summed over the path (IG) and at the input (saliency, x grad) */
    float *path = xcalloc((size_t)T * W * d, sizeof(float)), *at_input = xcalloc((size_t)T * W * d, sizeof(float));
    float smoothing = m->cfg.label_smoothing;
    m->cfg.label_smoothing = 0.0f;
    model_reserve(m, model_arena_floats(m, R, S, T));
    model_set_embedding_hooks(m, asrc, atgt, gsrc, gtgt);

    for (int first = 0; first < n_jobs; first += R) {
        int B = n_jobs - first < R ? n_jobs - first : R;
        for (int r = 0; r < B; r++) {
            const RowJob *j = &jobs[first + r];
            memcpy(bsrc + (size_t)r * S, src, sizeof(int) * (size_t)S);
            memcpy(btin + (size_t)r * T, tin, sizeof(int) * (size_t)T);
            for (int k = 0; k < T; k++) btout[(size_t)r * T + k] = VOCAB_PAD;
            slen[r] = S, tlen[r] = T;
            float a = job_alpha(j, ig_steps);
            for (int k = 0; k < S; k++) asrc[(size_t)r * S + k] = a;
            for (int k = 0; k < T; k++) atgt[(size_t)r * T + k] = a;
        }
        ModelBatch b = {B, S, T, bsrc, slen, btin, btout, tlen, 0};
        model_forward(m, &b, 0, 0, 0);
        for (int r = 0; r < B; r++) {
            const RowJob *j = &jobs[first + r];
            if (j->step >= 0) continue;
            for (int t = 0; t < T; t++) {
                model_row_log_probs(m, r * T + t, lp);
                double f = j->foil ? -lp[foil] : lp[tout[t]];
                if (j->step == -1) g->f[t] += f;
                else g->f_base[t] += f;
            }
        }
        for (int t = 0; t < T; t++) {
            /* score position t alone in every row: y_t, or the foil */
            for (int r = 0; r < B; r++) {
                const RowJob *j = &jobs[first + r];
                btout[(size_t)r * T + (t ? t - 1 : 0)] = VOCAB_PAD;
                btout[(size_t)r * T + t] = j->foil ? foil : tout[t];
            }
            m->loss_tokens = 1; /* each row's own -log p, unscaled */
            model_backward(m, &b);
            for (int r = 0; r < B; r++) {
                const RowJob *j = &jobs[first + r];
                if (j->step == -2) continue;
                /* the loss is -log p(word): df/dx is minus its gradient for y_t, plus it for the foil */
                float sign = j->foil ? 1.0f : -1.0f;
                float *into = (j->step == -1 ? at_input : path) + (size_t)t * W * d;
                const float *gs = gsrc + (size_t)r * S * d, *gt = gtgt + (size_t)r * T * d;
                for (size_t k = 0; k < (size_t)S * d; k++) into[k] += sign * gs[k];
                for (size_t k = 0; k < (size_t)T * d; k++) into[(size_t)S * d + k] += sign * gt[k];
            }
        }
    }
    model_set_embedding_hooks(m, NULL, NULL, NULL, NULL);
    m->cfg.label_smoothing = smoothing;
    model_zero_grad(m);

    for (int t = 0; t < T; t++) {
        if (foil >= 0 && tout[t] == foil) { /* f_t = 0 whatever the input: its gradient is 0 */
            g->foil_is_word[t] = 1;
            g->f[t] = g->f_base[t] = 0;
            g->ig_error[t] = ig_steps ? 0 : NAN;
            continue;
        }
        double total = 0;
        for (int j = 0; j < W; j++) {
            const float *gi = at_input + ((size_t)t * W + j) * d, *gp = path + ((size_t)t * W + j) * d;
            const float *e = emb + (size_t)j * d;
            double sal = 0, ixg = 0, ixg_sq = 0, ig = 0;
            for (int c = 0; c < d; c++) {
                double p = (double)e[c] * gi[c];
                sal += (double)gi[c] * gi[c];
                ixg += p, ixg_sq += p * p;
                ig += (double)e[c] * gp[c];
            }
            ig = ig_steps ? ig / ig_steps : 0;
            g->saliency[(size_t)t * W + j] = (float)sqrt(sal);
            g->input_x_grad[(size_t)t * W + j] = (float)ixg;
            g->input_x_grad_l2[(size_t)t * W + j] = (float)sqrt(ixg_sq);
            g->ig[(size_t)t * W + j] = (float)ig;
            total += ig;
        }
        g->ig_error[t] = ig_steps ? total - (g->f[t] - g->f_base[t]) : NAN;
    }
    free(jobs), free(emb), free(bsrc), free(btin), free(btout), free(slen), free(tlen), free(asrc), free(atgt);
    free(gsrc), free(gtgt), free(lp), free(path), free(at_input);
}

void gradattr_free(GradAttr *g) {
    free(g->saliency), free(g->input_x_grad), free(g->input_x_grad_l2), free(g->ig);
    free(g->f), free(g->f_base), free(g->ig_error), free(g->foil_is_word);
    memset(g, 0, sizeof *g);
}
