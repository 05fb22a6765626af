/* Interventions on every path a pass can take. A pass with one query row per sequence (an
 * empty target forced, an incremental step of greedy or beam search) runs attention's
 * one-query loops, a longer one its products; a pin, a patched head and a kept head output
 * must act the same on both, so each test runs target lengths 0, 1 and several, forced, and
 * where search applies, greedy and in the beam tree. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data/batch.h"
#include "decode/decode.h"
#include "decode/search.h"
#include "explain/intervene.h"
#include "explain/patching.h"
#include "fixture.h"
#include "nn/multihead.h"
#include "util/err.h"
#include "util/mem.h"

enum { NS = 4, MAXT = 3, LAYER = 1, HEAD = 1, KEY = 2 };
static const int src4[NS] = {4, 5, 6, 7}, tgt3[MAXT] = {4, 7, 8};

/* log p(tout[t]) at every position t of the target's nt ids forced, through the model's
 * incremental step (one query per step): what greedy and beam search read */
static void step_log_probs(Model *m, int nt, float *logp) {
    int S = NS + 1, T = nt + 1, V = m->cfg.tgt_vocab;
    int s[NS + 1], tin[MAXT + 1], tout[MAXT + 1];
    batch_frame_source(src4, NS, s, S);
    batch_frame_target(tgt3, nt, tin, tout, T);
    ModelBatch b = {1, S, T, s, &S, tin, tout, &T, 0};
    DecodeState st = {0};
    model_step_begin(m, &st, &b, 1);
    for (int t = 0; t < T; t++) {
        const float *z = model_step(m, &st, &tin[t]);
        logp[t] = (float)(z[tout[t]] - search_log_normaliser(z, V));
    }
    model_step_end(&st);
}

/* A pin at target position q (layer 1, head 1, onto source position 2) at target lengths
 * 0, 1 and 3: its row of weights is one-hot on the key in the forced pass, the word's log p
 * moves there, and the incremental step, fed the same words, gives the forced pass's
 * log-probabilities with the pin as without it. Before the one-query loops honoured pins,
 * a forced empty target and every search step ignored them. */
static void test_pin_every_target_length(void) {
    Model m;
    fixture_model(&m, 0);
    const int cases[][2] = {{0, 0}, {1, 0}, {1, 1}, {3, 0}, {3, 2}, {3, 3}}; /* target length, pinned position */
    int S = NS + 1;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int nt = cases[c][0], q = cases[c][1], T = nt + 1;
        WhatifSteps plain, pinned;
        whatif_steps(&m, src4, NS, tgt3, nt, 3, &plain);
        float w[NS + 1], step_plain[MAXT + 1], step_pinned[MAXT + 1];
        AttnIntervene iv;
        step_log_probs(&m, nt, step_plain);
        CHECK(whatif_pin(&m, LAYER, HEAD, q, KEY, S, w, &iv) == 0, "pin refused: %s", err_msg());
        whatif_steps(&m, src4, NS, tgt3, nt, 3, &pinned);
        const AttnActs *a = model_attention_acts(&m, ATTN_CROSS, LAYER);
        int one_hot = 1;
        for (int j = 0; j < S; j++) one_hot &= a->p[((size_t)HEAD * T + q) * S + j] == (j == KEY ? 1.0f : 0.0f);
        step_log_probs(&m, nt, step_pinned);
        whatif_clear(&m);
        double moved = fabs(pinned.logp[q] - plain.logp[q]), worst = 0.0, worst_plain = 0.0;
        for (int t = 0; t < T; t++) {
            worst = fmax(worst, fabs(step_pinned[t] - pinned.logp[t]));
            worst_plain = fmax(worst_plain, fabs(step_plain[t] - plain.logp[t]));
        }
        whatif_steps_free(&plain), whatif_steps_free(&pinned);
        CHECK(one_hot, "length %d: the pinned row at position %d is not one-hot on key %d", nt, q, KEY);
        CHECK(moved > 1e-3, "length %d: the pin at %d moved log p by %g: the test is blind", nt, q, moved);
        CHECK(worst_plain < 1e-4, "length %d: the step and the forced pass differ by %g unpinned", nt, worst_plain);
        CHECK(worst < 1e-4, "length %d: with the pin at %d, the step differs from the forced pass by %g", nt, q, worst);
    }
    model_free(&m);
}

/* Beam search's tree and greedy search under a pin at position 0: every extension of the
 * start has the pinned pass's log p of its token, and greedy takes the pinned pass's best
 * first word (the noisy fixture makes the pin change it). */
static void test_search_follows_the_pin(void) {
    Model m;
    fixture_model(&m, 0);
    int S = NS + 1, V = m.cfg.tgt_vocab;
    float w[NS + 1];
    AttnIntervene iv;
    WhatifSteps plain, pinned;
    whatif_steps(&m, src4, NS, tgt3, 0, V, &plain);
    CHECK(whatif_pin(&m, LAYER, HEAD, 0, KEY, S, w, &iv) == 0, "pin refused: %s", err_msg());
    whatif_steps(&m, src4, NS, tgt3, 0, V, &pinned);
    float *lp = xmalloc(sizeof(float) * (size_t)V);
    for (int i = 0; i < V; i++) lp[pinned.top[i]] = pinned.top_lp[i];
    BeamTrace trace = {0};
    DecodeOptions d = decode_defaults();
    d.beam = 3, d.trace = &trace;
    Seq s = {(int *)src4, NS}, out = {0}, greedy = {0};
    double score;
    decode(&m, &s, 1, &d, &out, &score);
    int first = 0;
    double worst = 0.0;
    for (int i = 0; i < trace.n; i++)
        if (trace.nodes[i].parent < 0)
            first++, worst = fmax(worst, fabs(trace.nodes[i].logp - lp[trace.nodes[i].token]));
    DecodeOptions g = decode_defaults();
    g.beam = 1;
    decode(&m, &s, 1, &g, &greedy, &score);
    int greedy_first = greedy.len > 0 ? greedy.ids[0] : VOCAB_EOS;
    int best_pinned = pinned.top[0], best_plain = plain.top[0];
    whatif_clear(&m);
    beam_trace_free(&trace);
    free(out.ids), free(greedy.ids), free(lp);
    whatif_steps_free(&plain), whatif_steps_free(&pinned);
    model_free(&m);
    CHECK(first > 0, "the tree has no first step");
    CHECK(worst < 1e-4, "the tree's first step differs from the pinned pass by %g", worst);
    CHECK(best_pinned != best_plain, "the pin leaves the best first word as it was: the test is blind");
    CHECK(greedy_first == best_pinned, "greedy's first word is %d, the pinned pass's best %d", greedy_first,
          best_pinned);
}

/* Patching at target lengths 0, 1 and 3: a sentence patched into itself changes nothing and
 * its estimates are exactly 0 (activations equal, difference 0); two sentences that differ
 * give some decoder head an effect. Before the one-query loops kept and replaced head
 * outputs, an empty target left the kept outputs unwritten (estimates of 1e31, different
 * each run) and every decoder and cross head's effect 0. */
static void test_patching_every_target_length(void) {
    Model m;
    fixture_model(&m, 0);
    const int other[NS] = {9, 10, 11, 4};
    PatchMetric metric = {.at = -1};
    for (int nt = 0; nt <= MAXT; nt += nt ? 2 : 1) {
        PatchTable self, diff;
        CHECK(patch_run(&m, src4, src4, NS, tgt3, nt, &metric, &self) == 0, "patch: %s", err_msg());
        CHECK(patch_run(&m, src4, other, NS, tgt3, nt, &metric, &diff) == 0, "patch: %s", err_msg());
        int still = 1, moved = 0;
        for (int i = 0; i < self.n; i++) still &= self.c[i].effect == 0.0 && self.c[i].atp == 0.0;
        for (int i = 0; i < diff.n; i++)
            moved |= diff.c[i].kind != ATTN_ENC_SELF && diff.c[i].kind >= 0 && fabs(diff.c[i].effect) > 1e-6;
        double gap = fabs(diff.clean - diff.corrupt);
        patch_free(&self), patch_free(&diff);
        CHECK(still, "length %d: a sentence patched into itself moved something", nt);
        CHECK(gap > 1e-3, "length %d: clean and corrupt agree (%g): the test is blind", nt, gap);
        CHECK(moved, "length %d: no decoder or cross head has an effect", nt);
    }
    model_free(&m);
}

const TestCase intervene_tests[] = {
    {"intervene_pin_every_target_length_forced_and_stepped", test_pin_every_target_length},
    {"intervene_search_follows_the_pin", test_search_follows_the_pin},
    {"intervene_patching_every_target_length", test_patching_every_target_length},
    {NULL, NULL},
};
