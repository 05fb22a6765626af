/* explain_json: explain.json (explain_json.h says what each key holds). */
#include "explain/explain_json.h"

#include "util/json.h"

static json_t *doubles(const double *x, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_fmt("%.7g", x[i]));
    return a;
}

static const char *family_name(int f) {
    return f == EXPLAIN_ATTENTION  ? "attention"
           : f == EXPLAIN_CONTRIB  ? "contrib"
           : f == EXPLAIN_GRADIENT ? "gradient"
                                   : "loo";
}

char *explain_json(const PairExplanation *e, const ExplainMethod *methods, int n_methods, const char *foil) {
    int S = e->S, T = e->T, W = S + T;
    json_t *root = json_object();
    json_put(root, "format", json_string("qkv-explain-1"));
    json_put(root, "maps", attnmap_to_json(&e->maps));
    json_t *lp = json_array();
    for (int t = 0; t < T; t++) json_array_append_new(lp, json_fmt("%.7g", e->logp[t]));
    json_put(root, "logp", lp);
    json_put(root, "foil", foil ? json_string(foil) : json_null());
    json_t *same = json_array();
    for (int t = 0; t < T; t++) json_array_append_new(same, json_boolean(e->grad.foil_is_word[t]));
    json_put(root, "foil_is_word", same);
    json_put(root, "ig_steps", json_integer(e->grad.ig_steps));
    json_put(root, "f", doubles(e->grad.f, T));
    json_put(root, "f_base", doubles(e->grad.f_base, T));
    json_put(root, "ig_error", doubles(e->grad.ig_error, T));
    json_put(root, "share", json_float_rows("%.7g", e->contrib.share, e->contrib.dec_layers, T, (size_t)T));
    json_put(root, "rollout", json_float_rows("%.7g", e->contrib.dec_roll, T, W, (size_t)W));
    json_t *ms = json_array();
    for (int i = 0; i < n_methods; i++) {
        json_t *m = json_object();
        json_put(m, "name", json_string(methods[i].name));
        json_put(m, "family", json_string(family_name(methods[i].family)));
        const char *said = explain_gradient_said(methods[i].name);
        if (said) json_put(m, "score", json_string(said));
        json_put(m, "scores", json_float_rows("%.7g", methods[i].scores, T, S, (size_t)S));
        json_array_append_new(ms, m);
    }
    json_put(root, "methods", ms);
    json_t *px = json_array();
    for (int k = 0; k < EXPLAIN_GRADIENTS; k++) {
        json_t *m = json_object();
        json_put(m, "name", json_string(explain_gradients[k].name));
        json_put(m, "score", json_string(explain_gradients[k].score));
        json_put(m, "scores", json_float_rows("%.7g", explain_gradient_scores(&e->grad, k) + S, T, T, (size_t)W));
        json_array_append_new(px, m);
    }
    json_put(root, "prefix", px);
    return json_text_line(root, JSON_COMPACT | JSON_REAL_PRECISION(7));
}
