/* Decoding: the incremental step (cached keys and values) against the full forward,
 * greedy and beam search, batches against each sentence alone, the search's FLOP count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data/batch.h"
#include "decode/beam.h"
#include "decode/decode.h"
#include "fixture.h"
#include "nn/model.h"
#include "nn/panels.h"
#include "util/mem.h"
#include "util/rng.h"

/* Greedy decoding with cached keys and values gives the tokens that re-running the full
 * decoder over each prefix would: at every position the full forward's argmax is the
 * decoded token (or EOS at the end), unless the top two logits are a near tie. */
static void test_cached_decoding_matches_full_forward(void) {
    for (int pre = 0; pre < 2; pre++) {
        ModelConfig cfg = fixture_config(12, 14, 16, 4, 24, 2, 2, 40);
        cfg.pre_norm = pre, cfg.tie_embeddings = !pre;
        Model m;
        model_init(&m, &cfg);
        model_init_weights(&m, 11 + (uint64_t)pre);
        Rng r = {5};
        enum { N = 7 };
        Seq src[N], out[N];
        for (int i = 0; i < N; i++) {
            src[i].len = 2 + (int)rng_below(&r, 6);
            src[i].ids = xmalloc(sizeof(int) * (size_t)src[i].len);
            for (int k = 0; k < src[i].len; k++) src[i].ids[k] = 4 + (int)rng_below(&r, 8);
        }
        greedy_decode(&m, src, N, out);
        for (int i = 0; i < N; i++) {
            int S = src[i].len + 1, T = out[i].len + 1;
            int *s = xmalloc(sizeof(int) * (size_t)S), *tin = xmalloc(sizeof(int) * (size_t)T);
            memcpy(s, src[i].ids, sizeof(int) * (size_t)src[i].len);
            s[S - 1] = 2;
            tin[0] = 1;
            memcpy(tin + 1, out[i].ids, sizeof(int) * (size_t)out[i].len);
            ModelBatch b = {1, S, T, s, &S, tin, NULL, &T, 0};
            model_reserve(&m, model_arena_floats(&m, 1, S, T));
            model_encode(&m, &b);
            model_decode(&m, &b);
            for (int t = 0; t < T; t++) {
                const float *z = model_logits_at(&m, 0, t);
                int want = t < out[i].len ? out[i].ids[t] : 2, best = 2;
                for (int v = 3; v < cfg.tgt_vocab; v++)
                    if (z[v] > z[best]) best = v;
                DecodeOptions o = decode_defaults();
                int capped = t == out[i].len && out[i].len == decode_max_len(&m, &o, src[i].len);
                CHECK(best == want || capped || fabsf(z[best] - z[want]) < 1e-4f,
                      "%s-LN: sentence %d position %d: cached decoding chose %d, the full forward %d",
                      pre ? "pre" : "post", i, t, want, best);
            }
            free(s), free(tin), free(out[i].ids), free(src[i].ids);
        }
        model_free(&m);
    }
}

/* The incremental step (one query per sequence, cached keys and values) computes the
 * logits the full forward pass computes at every position, for both norms, tied or not,
 * with sources of different lengths (padding) in one group. */
enum { SB = 3, SS = 6, ST = 7 };
static const int step_src[SB * SS] = {4, 5, 6, 7, 8, 2, 9, 4, 2, 0, 0, 0, 5, 5, 10, 2, 0, 0};
static const int step_src_len[SB] = {6, 3, 4};
static const int step_tgt[SB * ST] = {1, 4, 9, 5, 6, 12, 7, 1, 13, 4, 4, 8, 5, 6, 1, 7, 7, 11, 10, 9, 4};

static void step_model(Model *m, int pre, int tie) {
    ModelConfig cfg = fixture_config(12, 14, 16, 4, 24, 2, 3, 20);
    cfg.pre_norm = pre, cfg.tie_embeddings = tie;
    model_init(m, &cfg);
    model_init_weights(m, 21 + (uint64_t)(2 * pre + tie));
    Rng r = {17}; /* off the special point of unit norms and zero biases */
    for (size_t i = 0; i < m->n_params; i++) m->params[i] += 0.05f * rng_normal(&r);
}

static void test_step_matches_full_forward(void) {
    for (int pre = 0; pre < 2; pre++)
        for (int tie = 0; tie < 2; tie++) {
            Model m;
            step_model(&m, pre, tie);
            int V = m.cfg.tgt_vocab, tgt_len[SB] = {ST, ST, ST};
            ModelBatch b = {SB, SS, ST, step_src, step_src_len, step_tgt, NULL, tgt_len, 0};
            model_reserve(&m, model_arena_floats(&m, SB, SS, ST));
            model_encode(&m, &b);
            model_decode(&m, &b);
            float *full = xmalloc(sizeof(float) * SB * ST * (size_t)V);
            for (int i = 0; i < SB; i++)
                for (int t = 0; t < ST; t++)
                    memcpy(full + ((size_t)i * ST + t) * V, model_logits_at(&m, i, t), sizeof(float) * V);
            DecodeState st = {0};
            model_step_begin(&m, &st, &b, 1);
            double worst = 0.0;
            for (int t = 0; t < ST; t++) {
                int tok[SB];
                for (int i = 0; i < SB; i++) tok[i] = step_tgt[i * ST + t];
                const float *z = model_step(&m, &st, tok);
                for (int i = 0; i < SB; i++)
                    for (int v = 0; v < V; v++) {
                        double e = fabs((double)z[(size_t)i * V + v] - full[((size_t)i * ST + t) * V + v]);
                        worst = e > worst ? e : worst;
                    }
            }
            model_step_end(&st);
            free(full);
            model_free(&m);
            CHECK(worst < 1e-5, "%s-LN %s: step logits differ from the full forward by %g", pre ? "pre" : "post",
                  tie ? "tied" : "untied", worst);
        }
}

/* A model that keeps its step weights laid out (a server's) lends them to every decoding
 * state, its replicas' too, which neither lay out their own nor free them; the steps'
 * logits are those of a state that laid out its own, bit for bit. */
static void test_kept_step_weights_are_lent(void) {
    Model m, r;
    step_model(&m, 0, 1);
    int one = 1, V = m.cfg.tgt_vocab;
    ModelBatch b = {SB, SS, 1, step_src, step_src_len, step_tgt, NULL, &one, 0};
    DecodeState own = {0}, lent = {0};
    model_step_begin(&m, &own, &b, 1);
    model_keep_step_weights(&m);
    model_init_replica(&r, &m);
    model_step_begin(&r, &lent, &b, 1);
    CHECK(lent.weights.buf == m.step_weights->buf && own.weights.buf != m.step_weights->buf,
          "the state did not take the model's kept weights, or the first state had them before they were kept");
    int differ = 0;
    for (int t = 0; t < ST; t++) {
        int tok[SB];
        for (int i = 0; i < SB; i++) tok[i] = step_tgt[i * ST + t];
        const float *a = model_step(&m, &own, tok), *z = model_step(&r, &lent, tok);
        differ += memcmp(a, z, sizeof(float) * SB * V) != 0;
    }
    CHECK(differ == 0, "%d of %d steps' logits differ with the kept weights", differ, ST);
    model_step_end(&own), model_step_end(&lent);
    CHECK(m.step_weights && m.step_weights->buf, "ending a state freed the model's kept weights");
    model_free(&r);
    model_free(&m);
}

/* A decoding state's projections carry the laid-out weights (nn/panels.h) exactly where
 * panels_enabled() says, every one a step multiplies; else none, and sgemm multiplies.
 * Nothing else would tell: the two agree to rounding. */
static void test_step_takes_panels_where_enabled(void) {
    Model m;
    step_model(&m, 1, 0);
    int one = 1, on = panels_enabled();
    ModelBatch b = {SB, SS, 1, step_src, step_src_len, step_tgt, NULL, &one, 0};
    DecodeState st = {0};
    model_step_begin(&m, &st, &b, 1);
    int wrong = st.weights.panels != on;
    for (int l = 0; l < m.cfg.decoder_layers; l++) {
        const DecoderLayerActs *e = &st.layer[l];
        for (int i = 0; i < 4; i++) {
            wrong += e->self_attn.panels[i] != (on ? st.weights.self[l][i] : NULL) || (on && !e->self_attn.panels[i]);
            int cross_used = i == 0 || i == 3; /* its keys and values are projected once a group */
            wrong += e->cross_attn.panels[i] != (on && cross_used ? st.weights.cross[l][i] : NULL) ||
                     (on && cross_used && !e->cross_attn.panels[i]);
        }
        for (int i = 0; i < 2; i++)
            wrong += e->ffn.panels[i] != (on ? st.weights.ffn[l][i] : NULL) || (on && !e->ffn.panels[i]);
    }
    wrong += st.weights.generator == NULL;
    model_step_end(&st);
    model_free(&m);
    CHECK(wrong == 0, "%d of the step's weights are not laid out as panels_enabled() = %d says", wrong, on);
}

/* Reordering the cache (as beam search does) continues each sequence exactly as a state
 * that held the chosen rows from the start would. */
static void test_step_reorder(void) {
    Model m;
    step_model(&m, 1, 0);
    int V = m.cfg.tgt_vocab, one = 1, from[SB] = {2, 2, 0};
    ModelBatch b = {SB, SS, 1, step_src, step_src_len, step_tgt, NULL, &one, 0};
    int perm_src[SB * SS], perm_len[SB];
    for (int i = 0; i < SB; i++) {
        memcpy(perm_src + i * SS, step_src + from[i] * SS, sizeof(int) * SS);
        perm_len[i] = step_src_len[from[i]];
    }
    ModelBatch pb = {SB, SS, 1, perm_src, perm_len, step_tgt, NULL, &one, 0};
    DecodeState a = {0}, p = {0};
    model_step_begin(&m, &a, &b, 1);
    model_step_begin(&m, &p, &pb, 1);
    double worst = 0.0;
    for (int t = 0; t < ST; t++) {
        int tok[SB], ptok[SB];
        for (int i = 0; i < SB; i++) tok[i] = step_tgt[i * ST + t], ptok[i] = step_tgt[from[i] * ST + t];
        if (t == 3) model_step_reorder(&a, &m, from);
        const float *za = model_step(&m, &a, t < 3 ? tok : ptok), *zp = model_step(&m, &p, ptok);
        for (size_t k = 0; t >= 3 && k < (size_t)SB * V; k++) {
            double e = fabs((double)za[k] - zp[k]);
            worst = e > worst ? e : worst;
        }
    }
    model_step_end(&a), model_step_end(&p);
    model_free(&m);
    CHECK(worst < 1e-5, "reordered state differs from the permuted batch by %g", worst);
}

/* Sources for the search tests: lengths 1..9, ids 4..11. */
void fixture_sources(Seq *src, int n) {
    Rng r = {23};
    for (int i = 0; i < n; i++) {
        src[i].len = 1 + (int)rng_below(&r, 9);
        src[i].ids = xmalloc(sizeof(int) * (size_t)src[i].len);
        for (int k = 0; k < src[i].len; k++) src[i].ids[k] = 4 + (int)rng_below(&r, 8);
    }
}

void fixture_model(Model *m, int pre) {
    ModelConfig cfg = fixture_config(12, 9, 16, 2, 24, 1, 2, 24);
    cfg.pre_norm = pre;
    model_init(m, &cfg);
    model_init_weights(m, 31 + (uint64_t)pre);
    Rng r = {7};
    for (size_t i = 0; i < m->n_params; i++) m->params[i] += 1.0f * rng_normal(&r);
}

/* Beam search with one beam makes greedy search's choices, token for token. */
static void test_beam_one_is_greedy(void) {
    enum { N = 40 };
    for (int pre = 0; pre < 2; pre++) {
        Model m;
        fixture_model(&m, pre);
        Seq src[N], greedy[N], beam[N];
        fixture_sources(src, N);
        greedy_decode(&m, src, N, greedy);
        DecodeOptions o = decode_defaults();
        o.beam = 1;
        const Seq *ps[N];
        Seq *pb[N];
        for (int i = 0; i < N; i++) ps[i] = &src[i], pb[i] = &beam[i];
        DecodeState st = {0};
        beam_search_group(&m, &st, ps, N, &o, pb, NULL);
        model_step_end(&st);
        int same = 1, capped = 0;
        for (int i = 0; i < N; i++) {
            same &= greedy[i].len == beam[i].len &&
                    memcmp(greedy[i].ids, beam[i].ids, sizeof(int) * (size_t)beam[i].len) == 0;
            capped += greedy[i].len == decode_max_len(&m, &o, src[i].len);
            free(greedy[i].ids), free(beam[i].ids), free(src[i].ids);
        }
        model_free(&m);
        CHECK(same, "%s-LN: beam 1 and greedy differ", pre ? "pre" : "post");
        CHECK(capped < N, "every output ran to the length limit: the test sees no EOS decisions");
    }
}

/* Greedy search over a batch, where finished sentences leave the step as they end, gives
 * every sentence the tokens it gets decoded alone. */
static void test_greedy_batch_is_each_alone(void) {
    enum { N = 40 };
    Model m;
    fixture_model(&m, 0);
    Seq src[N], batch[N], alone;
    fixture_sources(src, N);
    greedy_decode(&m, src, N, batch);
    int same = 1, lens_differ = 0;
    for (int i = 0; i < N; i++) {
        greedy_decode(&m, &src[i], 1, &alone);
        same &= alone.len == batch[i].len && memcmp(alone.ids, batch[i].ids, sizeof(int) * (size_t)alone.len) == 0;
        lens_differ += batch[i].len != batch[0].len;
        free(alone.ids), free(batch[i].ids), free(src[i].ids);
    }
    model_free(&m);
    CHECK(same, "a sentence decoded in a batch differs from the same sentence decoded alone");
    CHECK(lens_differ > 0, "every output has one length: no sentence left the batch early");
}

/* Beam search over a batch, where finished sentences' blocks of rows leave the step, gives
 * every sentence the n-best list it gets decoded alone, with the same scores to rounding:
 * OpenBLAS rounds a row's product by where it falls in the kernel's row tiling (Haswell's
 * kernels give a row alone and the same row among four others different last bits), so a
 * sentence's log-probabilities in a batch may differ from its own in the 7th digit. A
 * wrong row, state or length gives scores that differ in the first digits. */
static void test_beam_batch_is_each_alone(void) {
    enum { N = 40, K = 3 };
    Model m;
    fixture_model(&m, 1);
    Seq src[N], batch[N * K], alone[K];
    double batch_score[N * K], alone_score[K];
    fixture_sources(src, N);
    DecodeOptions o = decode_defaults();
    o.beam = K, o.nbest = K;
    decode(&m, src, N, &o, batch, batch_score);
    int same = 1, lens_differ = 0;
    for (int i = 0; i < N; i++) {
        decode(&m, &src[i], 1, &o, alone, alone_score);
        for (int k = 0; k < K; k++) {
            const Seq *a = &alone[k], *b = &batch[i * K + k];
            same &= a->len == b->len && memcmp(a->ids, b->ids, sizeof(int) * (size_t)a->len) == 0 &&
                    fabs(alone_score[k] - batch_score[i * K + k]) <= 1e-5 * fabs(alone_score[k]);
            free(a->ids), free(b->ids);
        }
        lens_differ += batch[i * K].len != batch[0].len;
        free(src[i].ids);
    }
    model_free(&m);
    CHECK(same, "a sentence's beam search in a batch differs from the same sentence's alone");
    CHECK(lens_differ > 0, "every best output has one length: no sentence left the batch early");
}

/* The FLOPs decode_counting reports for one sentence decoded greedily are those of its
 * products, counted here from the shapes: the encoder over S = len + 1 positions (EOS),
 * each decoder layer's cross keys and values, then one step per output token and one for
 * EOS, each with its attention over the positions so far and over the source. */
static void test_decode_counts_its_flops(void) {
    enum { N = 40 };
    Model m;
    fixture_model(&m, 0);
    const ModelConfig *c = &m.cfg;
    Seq src[N];
    fixture_sources(src, N);
    DecodeOptions o = decode_defaults();
    o.beam = 1;
    double d = c->d_model, ff = c->d_ff, V = c->tgt_vocab;
    int ended_somewhere = 0;
    for (int i = 0; i < N; i++) {
        Seq out;
        double got;
        decode_counting(&m, &src[i], 1, &o, &out, NULL, &got);
        double S = src[i].len + 1, want = 0;
        want += c->encoder_layers * (S * (2 * 4 * d * d + 2 * 2 * d * ff) + 2 * 2 * S * S * d);
        want += c->decoder_layers * 2 * 2 * S * d * d;
        int ended = out.len < decode_max_len(&m, &o, src[i].len);
        ended_somewhere += ended;
        for (int t = 0; t < out.len + ended; t++)
            want += c->decoder_layers * (2 * 6 * d * d + 2 * 2 * (t + 1) * d + 2 * 2 * S * d + 2 * 2 * d * ff) +
                    2 * d * V;
        free(out.ids);
        CHECK(fabs(got - want) <= 1.0, "sentence %d: %.0f FLOPs counted, %.0f from the shapes", i, got, want);
    }
    for (int i = 0; i < N; i++) free(src[i].ids);
    model_free(&m);
    CHECK(ended_somewhere, "no sentence ended with EOS: the count of EOS's step is not seen");
}

/* Log P of ids (+ EOS when with_eos) given src, by the full forward pass. */
static double full_logp(Model *m, const Seq *src, const int *ids, int len, int with_eos) {
    int S = src->len + 1, T = len + with_eos;
    int *s = xmalloc(sizeof(int) * (size_t)S), *tin = xmalloc(sizeof(int) * (size_t)T),
        *tout = xmalloc(sizeof(int) * (size_t)T);
    memcpy(s, src->ids, sizeof(int) * (size_t)src->len);
    s[S - 1] = 2;
    tin[0] = 1;
    for (int t = 0; t < T; t++) {
        if (t + 1 < T) tin[t + 1] = ids[t];
        tout[t] = t < len ? ids[t] : 2;
    }
    ModelBatch b = {1, S, T, s, &S, tin, tout, &T, 0};
    model_reserve(m, model_arena_floats(m, 1, S, T));
    model_forward(m, &b, 0, 0, 0);
    free(s), free(tin), free(tout);
    return -m->nll_sum;
}

/* Beam 4 returns 4 distinct hypotheses per sentence, best first, each scored with its
 * own log-probability under the full forward pass divided by length^alpha; with
 * no-repeat-ngram 2 no bigram repeats. (Beam search is not promised to beat greedy search
 * sentence by sentence: the greedy prefix can fall out of the beam.) */
static void test_beam_scores_and_order(void) {
    enum { N = 12, K = 4 };
    Model m;
    fixture_model(&m, 0);
    Seq src[N], out[N * K];
    double score[N * K];
    fixture_sources(src, N);
    DecodeOptions o = decode_defaults();
    o.beam = K, o.nbest = K, o.length_penalty = 0.6;
    decode(&m, src, N, &o, out, score);
    double worst = 0.0;
    int ordered = 1, distinct = 1, eos = 0;
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < K; k++) {
            const Seq *h = &out[i * K + k];
            int ended = h->len < decode_max_len(&m, &o, src[i].len);
            eos += ended;
            double want = full_logp(&m, &src[i], h->ids, h->len, ended) / pow(h->len + ended, o.length_penalty);
            worst = fmax(worst, fabs(want - score[i * K + k]));
            if (k) ordered &= score[i * K + k] <= score[i * K + k - 1];
            for (int j = 0; j < k; j++)
                distinct &= !(out[i * K + j].len == h->len &&
                              memcmp(out[i * K + j].ids, h->ids, sizeof(int) * (size_t)h->len) == 0);
        }
    }
    CHECK(worst < 1e-4, "a beam score differs from the full forward's log P by %g", worst);
    CHECK(ordered && distinct, "n-best list not sorted or not distinct");
    CHECK(eos > 0, "no hypothesis ended with EOS: the test sees only the length limit");
    for (int i = 0; i < N * K; i++) free(out[i].ids);
    o.no_repeat_ngram = 2, o.nbest = 1;
    decode(&m, src, N, &o, out, NULL);
    int repeats = 0;
    for (int i = 0; i < N; i++) {
        for (int a = 0; a + 1 < out[i].len; a++)
            for (int b = a + 1; b + 1 < out[i].len; b++)
                repeats += out[i].ids[a] == out[i].ids[b] && out[i].ids[a + 1] == out[i].ids[b + 1];
        free(out[i].ids), free(src[i].ids);
    }
    model_free(&m);
    CHECK(repeats == 0, "%d repeated bigrams with --no-repeat-ngram 2", repeats);
}

/* The beam tree: each finished node's path from the root is a finished hypothesis whose
 * log P the full forward gives; the best one by score is the search's answer; no step keeps
 * more than K; every node's parent was kept; the trace changes nothing. */
static void test_beam_tree(void) {
    enum { N = 12, K = 5 };
    Model m;
    fixture_model(&m, 0);
    Seq src[N], plain, traced;
    fixture_sources(src, N);
    int trees = 0;
    for (int i = 0; i < N; i++) {
        DecodeOptions o = decode_defaults();
        o.beam = K;
        double s0, s1;
        decode(&m, &src[i], 1, &o, &plain, &s0);
        BeamTrace tr = {0};
        o.trace = &tr;
        decode(&m, &src[i], 1, &o, &traced, &s1);
        int same = plain.len == traced.len && memcmp(plain.ids, traced.ids, sizeof(int) * (size_t)plain.len) == 0 &&
                   s0 == s1;
        int kept_per_step[64] = {0}, parents_kept = 1, found = 0, worst_step = 0;
        double worst = 0;
        for (int n = 0; n < tr.n; n++) {
            const BeamNode *x = &tr.nodes[n];
            if ((x->fate == BEAM_KEPT || x->fate == BEAM_AT_LIMIT) && x->step < 64) kept_per_step[x->step]++;
            if (x->parent >= 0)
                parents_kept &= tr.nodes[x->parent].fate == BEAM_KEPT && tr.nodes[x->parent].step == x->step - 1;
            /* the path: tokens from the root to this node (a finished node's own is its EOS) */
            int fin = x->fate == BEAM_FINISHED, path[64], len = 0;
            for (int p = fin ? x->parent : n; p >= 0 && len < 64; p = tr.nodes[p].parent)
                path[len++] = tr.nodes[p].token;
            for (int a = 0; a < len / 2; a++) {
                int t = path[a];
                path[a] = path[len - 1 - a], path[len - 1 - a] = t;
            }
            worst = fmax(worst, fabs(full_logp(&m, &src[i], path, len, fin) - x->logp));
            found |= (fin || x->fate == BEAM_AT_LIMIT) && len == plain.len &&
                     memcmp(path, plain.ids, sizeof(int) * (size_t)len) == 0 &&
                     fabs(x->logp / pow(len + fin, o.length_penalty) - s0) < 1e-9;
        }
        for (int t = 0; t < 64; t++) worst_step = kept_per_step[t] > worst_step ? kept_per_step[t] : worst_step;
        trees += tr.n > 0;
        int ended = plain.len < decode_max_len(&m, &o, src[i].len);
        beam_trace_free(&tr);
        free(plain.ids), free(traced.ids);
        CHECK(same, "sentence %d: tracing changed the search", i);
        CHECK(parents_kept, "sentence %d: a node extends one that was not kept the step before", i);
        CHECK(worst_step <= K, "sentence %d: a step kept %d > %d", i, worst_step, K);
        CHECK(worst < 1e-4, "sentence %d: a finished node's log P is %.3g off the full forward's", i, worst);
        CHECK(found, "sentence %d (%s): the answer is no finished path of the tree", i,
              ended ? "ended" : "at the limit");
    }
    for (int i = 0; i < N; i++) free(src[i].ids);
    model_free(&m);
    CHECK(trees == N, "only %d of %d searches left a tree", trees, N);
}

/* The rule every candidate is ranked by (beam.h), written out again for the test. */
static int better(const BeamCand *a, const BeamCand *b) {
    if (a->score != b->score) return a->score > b->score;
    return a->beam != b->beam ? a->beam < b->beam : a->rank < b->rank;
}

/* A step's best 2K extensions are those of scanning every token of every live row: rows
 * of 1,000 logits on a coarse grid (many exact ties, across rows too: equal scores), one
 * dead row, the largest logit at a block's end and at the vocabulary's last token, with
 * and without the no-repeat rule (each row's history holds an earlier bigram). */
static void test_beam_extensions_are_the_exhaustive_best(void) {
    enum { K = 4, V = 1000, T = 3 };
    float z[K * V];
    double score[K] = {-1.5, -INFINITY, -1.5, -2.25};
    int hist[K * (T + 1)];
    Rng r = {2024};
    for (int i = 0; i < K * V; i++) z[i] = (float)(int)(8 * rng_uniform(&r)) * 0.5f;
    /* the best of three rows alone at the end of a block of 16 (blocks start at EOS, 2), the
     * rest of its block low: the vocabulary's last token, and tokens 49 and 33 */
    int planted[3][2] = {{0, 49}, {2, V - 1}, {3, 33}};
    for (int i = 0; i < 3; i++) {
        float *row = z + (size_t)planted[i][0] * V;
        for (int v = planted[i][1] - 15; v < planted[i][1]; v++) row[v] = 0.0f;
        row[planted[i][1]] = i == 2 ? 8.5f : 9.0f;
    }
    for (int k = 0; k < K; k++) hist[k * (T + 1)] = 5, hist[k * (T + 1) + 1] = 49, hist[k * (T + 1) + 2] = 5;
    for (int no_repeat = 0; no_repeat <= 2; no_repeat += 2) {
        BeamCand top[2 * K], all[K * V];
        int n = beam_best_extensions(z, score, hist, T, 0, K, V, no_repeat, top), m = 0;
        for (int k = 0; k < K; k++) {
            if (score[k] == -INFINITY) continue;
            const float *row = z + (size_t)k * V;
            double mx = row[0], sum = 0;
            for (int v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
            for (int v = 0; v < V; v++) sum += exp(row[v] - mx);
            for (int v = 2; v < V; v++) {           /* from EOS on: PAD and BOS are never chosen */
                if (no_repeat && v == 49) continue; /* "5 49" already occurred, and the row ends in 5 */
                all[m++] = (BeamCand){score[k] - (mx + log(sum)) + row[v], k, v, v == 2 ? 0 : v == 3 ? V : v};
            }
        }
        for (int i = 0; i < 2 * K; i++) { /* selection of the best 2K, in order */
            int best = i;
            for (int j = i + 1; j < m; j++)
                if (better(&all[j], &all[best])) best = j;
            BeamCand c = all[i];
            all[i] = all[best], all[best] = c;
        }
        CHECK(n == 2 * K, "no_repeat %d: %d extensions", no_repeat, n);
        for (int i = 0; i < n && i < 2 * K; i++)
            CHECK(top[i].beam == all[i].beam && top[i].token == all[i].token &&
                      fabs(top[i].score - all[i].score) < 1e-6,
                  "no_repeat %d: extension %d is beam %d token %d (%.7f), the scan's beam %d token %d (%.7f)",
                  no_repeat, i, top[i].beam, top[i].token, top[i].score, all[i].beam, all[i].token, all[i].score);
    }
}

/* Reserved for the largest group, a state and an arena are never grown by the begins of
 * the groups that follow, in any order (decode() hands them out longest first): the same
 * buffers, the same sizes, for beam copies and greedy rows alike. */
static void test_step_reserve_covers_every_group(void) {
    Model m;
    step_model(&m, 0, 0);
    int ids[12] = {4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 7};
    for (int copies = 1; copies <= 3; copies += 2) {
        DecodeState st = {0};
        model_step_reserve(&m, &st, 3, 13, copies); /* the last group: 3 sources of up to 12 + EOS */
        float *buf = st.buf, *arena = m.arena;
        size_t floats = st.buf_floats, arena_floats = m.arena_floats;
        for (int n = 0, lens[3] = {7, 12, 2}; n < 3; n++) {
            int len = lens[n];
            int src[3 * 13], src_len[3], one = 1, bos[9];
            for (int i = 0; i < 9; i++) bos[i] = VOCAB_BOS; /* one a row, widened rows too */
            for (int i = 0; i < 3; i++) src_len[i] = batch_frame_source(ids, len - i % 2, src + i * (len + 1), len + 1);
            ModelBatch b = {3, len + 1, 1, src, src_len, bos, NULL, &one, 0};
            model_step_begin(&m, &st, &b, copies);
            if (copies > 1) model_step_widen(&st, &m);
            model_step(&m, &st, bos);
            CHECK(st.buf == buf && st.buf_floats == floats && m.arena == arena && m.arena_floats == arena_floats,
                  "copies %d, sources of %d: the state or the arena grew after the reserve", copies, len);
        }
        model_step_end(&st);
    }
    model_free(&m);
}

const TestCase decode_tests[] = {
    {"decode_step_reserve_covers_every_group", test_step_reserve_covers_every_group},
    {"decode_beam_extensions_are_the_exhaustive_best", test_beam_extensions_are_the_exhaustive_best},
    {"decode_beam_tree_paths_scores_and_answer", test_beam_tree},
    {"decode_beam_one_is_greedy", test_beam_one_is_greedy},
    {"decode_greedy_batch_is_each_alone", test_greedy_batch_is_each_alone},
    {"decode_beam_batch_is_each_alone", test_beam_batch_is_each_alone},
    {"decode_counts_its_flops", test_decode_counts_its_flops},
    {"decode_beam_scores_order_and_no_repeat", test_beam_scores_and_order},
    {"decode_cached_matches_full_forward", test_cached_decoding_matches_full_forward},
    {"model_step_logits_equal_full_forward", test_step_matches_full_forward},
    {"model_step_reorder_follows_the_chosen_rows", test_step_reorder},
    {"model_step_uses_the_kept_step_weights", test_kept_step_weights_are_lent},
    {"model_step_takes_panels_where_enabled", test_step_takes_panels_where_enabled},
    {NULL, NULL},
};
