/* whatif_json: see whatif_json.h. */
#include "explain/whatif_json.h"

#include <stdlib.h>

#include "attention/attnmap.h"
#include "util/json.h"

/* a target token for people: valid UTF-8 */
static json_t *label(const Vocab *tv, int id) {
    char *s = attnmap_utf8(id < 0 ? "" : vocab_token(tv, id));
    json_t *j = json_string(s);
    free(s);
    return j;
}

static json_t *steps_json(const Vocab *tv, const WhatifSteps *w, int lens) {
    json_t *o = json_object(), *lp = json_array(), *ent = json_array(), *top = json_array();
    for (int t = 0; t < w->T; t++) {
        json_array_append_new(lp, json_fmt("%.5g", w->logp[t]));
        json_array_append_new(ent, json_fmt("%.5g", w->entropy[t]));
        json_t *row = json_array();
        for (int i = 0; i < w->k && w->top[t * w->k + i] >= 0; i++) {
            json_t *c = json_object();
            json_put(c, "token", label(tv, w->top[t * w->k + i]));
            json_put(c, "logp", json_fmt("%.5g", w->top_lp[t * w->k + i]));
            json_array_append_new(row, c);
        }
        json_array_append_new(top, row);
    }
    json_put(o, "logp", lp), json_put(o, "entropy", ent), json_put(o, "top", top);
    if (!lens) return o;
    json_t *layers = json_array();
    for (int l = 0; l < w->L; l++) {
        json_t *layer = json_array();
        for (int t = 0; t < w->T; t++) {
            json_t *c = json_object();
            json_put(c, "top", label(tv, w->lens_top[((size_t)l * w->T + t) * w->k]));
            json_put(c, "top_logp", json_fmt("%.5g", w->lens_lp[((size_t)l * w->T + t) * w->k]));
            json_put(c, "word_logp", json_fmt("%.5g", w->lens_word[(size_t)l * w->T + t]));
            json_array_append_new(layer, c);
        }
        json_array_append_new(layers, layer);
    }
    json_put(o, "lens", layers);
    return o;
}

static json_t *text(const char *s) {
    char *u = attnmap_utf8(s);
    json_t *j = json_string(u);
    free(u);
    return j;
}

json_t *whatif_json(const WhatifView *v, const Vocab *tv) {
    json_t *root = json_object();
    json_put(root, "format", json_string("qkv-whatif-1"));
    json_put(root, "source", text(v->source));
    json_put(root, "target", text(v->target));
    json_t *tokens = json_array();
    for (int t = 0; t <= v->nt; t++) json_array_append_new(tokens, label(tv, t < v->nt ? v->tgt[t] : VOCAB_EOS));
    json_put(root, "tokens", tokens);
    if (v->translation_changed) json_put(root, "translation_changed", text(v->translation_changed));
    json_put(root, "model", steps_json(tv, v->model, v->lens));
    if (v->changed) {
        json_put(root, "changed", steps_json(tv, v->changed, v->lens));
        json_t *change = json_array();
        for (int t = 0; t < v->model->T; t++)
            json_array_append_new(change, json_fmt("%.5g", (double)v->changed->logp[t] - v->model->logp[t]));
        json_put(root, "change", change);
    }
    if (v->tree) {
        static const char *const fate[] = {"kept", "finished", "dropped", "limit"};
        json_t *nodes = json_array();
        for (int i = 0; i < v->tree->n; i++) {
            const BeamNode *n = &v->tree->nodes[i];
            json_t *x = json_object();
            json_put(x, "step", json_integer(n->step));
            json_put(x, "parent", json_integer(n->parent));
            json_put(x, "token", label(tv, n->token));
            json_put(x, "fate", json_string(fate[n->fate]));
            json_put(x, "logp", json_fmt("%.5g", n->logp));
            json_array_append_new(nodes, x);
        }
        json_put(root, "beam_tree", nodes);
        json_put(root, "beam_best", text(v->beam_best ? v->beam_best : ""));
        json_put(root, "beam_length_penalty", json_fmt("%.5g", v->beam_length_penalty));
    }
    return root;
}
