/* headreport: see headreport.h. */
#include "heads/headreport.h"

#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "score/sacrebleu.h"
#include "util/axis.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/text.h"

/* ---- heads.json ------------------------------------------------------------------------------- */

/* a list of the names of h's roles among the flags of mask */
static json_t *role_list(const HeadStats *h, int mask) {
    json_t *list = json_array();
    for (int k = 0; k < HEAD_ROLE_COUNT; k++)
        if (h->roles & mask & (1 << k)) json_array_append_new(list, json_string(heads_role_name(k)));
    return list;
}

json_t *heads_json_array(const HeadReport *r) {
    int *order = xmalloc(sizeof(int) * (size_t)(r->n_heads ? r->n_heads : 1)),
        *rank = xmalloc(sizeof(int) * (size_t)(r->n_heads ? r->n_heads : 1));
    heads_rank_order(r->stats, r->n_heads, r->default_order, order);
    for (int i = 0; i < r->n_heads; i++) rank[order[i]] = i + 1;
    json_t *list = json_array();
    for (int i = 0; i < r->n_heads; i++) {
        const HeadStats *h = &r->stats[i];
        json_t *o = json_object(), *rules = json_object();
        json_put(o, "kind", json_string(attnmap_kind_name(h->kind)));
        json_put(o, "layer", json_integer(h->layer));
        json_put(o, "head", json_integer(h->head));
        json_put(o, "rank", json_integer(rank[i]));
        json_put(o, "importance", json_fmt("%.6g", h->importance));
        json_put(o, "importance_raw", json_fmt("%.6g", h->importance_raw));
        json_put(o, "delta_nll", json_fmt("%.6g", h->delta_nll));
        json_put(o, "confidence", json_fmt("%.4f", h->confidence));
        json_put(o, "entropy", json_fmt("%.4f", h->entropy));
        json_put(o, "previous", json_fmt("%.4f", h->previous));
        json_put(o, "current", json_fmt("%.4f", h->current));
        json_put(o, "next", json_fmt("%.4f", h->next));
        json_put(o, "rare", json_fmt("%.4f", h->rare));
        json_put(o, "sink", json_fmt("%.4f", h->sink));
        json_put(o, "aer", json_fmt("%.4f", h->aer));
        json_put(o, "role", json_utf8(h->role));
        json_put(o, "roles", role_list(h, ~0));
        json_put(rules, "voita", role_list(h, HEAD_ROLES_VOITA));
        json_put(rules, "relative", role_list(h, HEAD_ROLES_RELATIVE));
        json_put(rules, "clark", role_list(h, HEAD_ROLES_CLARK));
        json_put(o, "roles_by_rule", rules);
        json_array_append_new(list, o);
    }
    free(order), free(rank);
    return list;
}

json_t *heads_curve_json(const HeadReport *r) {
    const HeadCurves *c = r->curves;
    if (!c) return json_null();
    json_t *o = json_object(), *curves = json_array();
    json_put(o, "x", json_string("percent of the scope's heads removed (gate 0)"));
    json_put(o, "orders",
             json_string("importance, importance_raw, delta_nll: that score increasing (the least important "
                         "first); random: a permutation seeded by seed"));
    json_put(o, "area",
             json_string("each curve's area: the mean BLEU over 0..100% removed, by trapezoids between the points"));
    json_put(o, "seed", json_integer((json_int_t)c->seed));
    json_t *d = json_object();
    json_put(d, "beam", json_integer(r->decoding->beam));
    json_put(d, "length_penalty", json_real(r->decoding->length_penalty));
    json_put(d, "max_len_a", json_real(r->decoding->max_len_a));
    json_put(d, "max_len_b", json_integer(r->decoding->max_len_b));
    json_put(d, "no_repeat_ngram", json_integer(r->decoding->no_repeat_ngram));
    json_put(o, "decoding", d);
    json_put(o, "bleu_signature", json_string(BLEU_SIGNATURE));
    json_put(o, "evaluations", json_integer(c->evaluations));
    for (int i = 0; i < c->n_curves; i++) {
        const HeadCurve *cv = &c->curves[i];
        json_t *co = json_object(), *points = json_array();
        json_put(co, "order", json_string(heads_order_name(cv->order)));
        json_put(co, "scope", json_string(heads_scope_name(cv->scope)));
        json_put(co, "heads", json_integer(cv->heads));
        json_put(co, "area", json_fmt("%.4f", heads_curve_area(cv)));
        for (int k = 0; k < HEADS_CURVE_POINTS; k++) {
            const HeadCurvePoint *p = &cv->points[k];
            json_t *po = json_object();
            json_put(po, "pct", json_integer(p->pct));
            json_put(po, "removed", json_integer(p->removed));
            json_put(po, "bleu", json_fmt("%.4f", p->bleu));
            json_put(po, "nll", json_fmt("%.5f", p->nll));
            json_put(po, "mask", json_utf8(p->mask));
            json_array_append_new(points, po);
        }
        json_put(co, "points", points);
        json_array_append_new(curves, co);
    }
    json_put(o, "curves", curves);
    return o;
}

json_t *heads_report_json(const HeadReport *r) {
    json_t *root = json_object(), *model = json_object(), *set = json_object(), *th = json_object(),
           *secs = json_object();
    json_put(root, "format", json_string("qkv-heads-1"));
    json_put(model, "weights", json_utf8(r->weights));
    json_put(model, "step", json_integer(r->step));
    json_put(root, "model", model);
    json_put(set, "src", json_utf8(r->src_path));
    json_put(set, "ref", json_utf8(r->ref_path));
    json_put(set, "gold", r->gold_path ? json_utf8(r->gold_path) : json_null());
    json_put(set, "sentences", json_integer(r->sentences));
    json_put(set, "skipped", json_integer(r->skipped));
    json_put(set, "ref_tokens", json_integer(r->ref_tokens));
    json_put(root, "set", set);
    json_put(root, "importance",
             json_string("importance_raw: mean over the set's sentences of |dL/dxi_h| at xi = 1, L the sentence's "
                         "reference NLL summed over its tokens, label smoothing 0, each sentence's own gradient "
                         "(batched passes that keep each row's gate gradient apart) "
                         "(Michel et al. 2019); importance: importance_raw over the L2 norm of its layer's "
                         "importance_raw (the heads of one kind's layer), as in the paper"));
    json_put(root, "delta_nll",
             json_string("per-token reference NLL over the set with this head alone masked (gate 0), minus the "
                         "same with no head masked"));
    json_put(root, "entropy_unit", json_string("nats"));
    json_put(root, "rare_frequencies", r->freq_path ? json_utf8(r->freq_path) : json_null());
    json_put(th, "previous", json_real(HEADS_POSITIONAL_SHARE));
    json_put(th, "current", json_real(HEADS_POSITIONAL_SHARE));
    json_put(th, "next", json_real(HEADS_POSITIONAL_SHARE));
    json_put(th, "rare", json_real(HEADS_RARE_SHARE));
    json_put(th, "aligns_max_aer", json_real(HEADS_ALIGN_AER));
    json_put(th, "sink", json_real(HEADS_SINK_SHARE));
    json_put(th, "relative_sds", json_real(HEADS_RELATIVE_SDS));
    json_put(th, "relative_min_share", json_real(HEADS_RELATIVE_MIN_SHARE));
    json_put(root, "thresholds", th);
    json_put(root, "roles",
             json_string("voita: previous, current, next, rare, aligns at Voita et al.'s absolute thresholds; "
                         "relative: rel:SHARE when the share is at least its kind's mean + relative_sds standard "
                         "deviations over the kind's heads and at least relative_min_share, top:SHARE for the "
                         "kind's largest share; clark: sink when the share of queries whose top key is the first "
                         "key (BOS, the first source token) or the source's EOS is at least the sink threshold"));
    json_put(root, "default_order", json_string(heads_order_name(r->default_order)));
    json_put(root, "default_order_rule",
             json_string(r->areas ? "the score order whose BLEU curve over all heads has the largest area (ties: "
                                    "delta_nll, importance_raw, importance)"
                                  : "no curve measured (--no-curve): delta_nll, the exact score"));
    json_t *areas = json_null();
    if (r->areas) {
        areas = json_object();
        for (int o = 0; o < HEADS_ORDERS; o++) json_put(areas, heads_order_name(o), json_fmt("%.4f", r->areas[o]));
    }
    json_put(root, "order_areas", areas);
    json_put(root, "base_nll", json_fmt("%.6f", r->base_nll));
    json_put(root, "spearman", json_fmt("%.4f", r->spearman));
    json_put(root, "spearman_raw", json_fmt("%.4f", r->spearman_raw));
    json_put(secs, "scores", json_fmt("%.3f", r->score_seconds));
    json_put(secs, "curve", r->curves ? json_fmt("%.3f", r->curve_seconds) : json_null());
    json_put(root, "seconds", secs);
    json_put(root, "heads", heads_json_array(r));
    json_put(root, "curve", heads_curve_json(r));
    return root;
}

char *heads_view_json(const HeadReport *r, Model *m, int tokenizer, const Vocab *sv, const Vocab *tv,
                      const HeadSet *set, char **src_text, char **ref_text) {
    json_t *root = json_object(), *sentences = json_array();
    json_put(root, "format", json_string("qkv-heads-view-1"));
    json_put(root, "heads", heads_json_array(r));
    json_put(root, "curve", heads_curve_json(r));
    json_put(root, "default_order", json_string(heads_order_name(r->default_order)));
    for (int i = 0; i < set->n && i < HEADS_VIEW_SENTENCES; i++) {
        AttnMaps a;
        const Seq *s = &set->src[i], *t = &set->ref[i];
        attnmap_capture(m, sv, tv, s->ids, s->len, t->ids, t->len, &a);
        attnmap_surface_labels(&a, tokenizer, sv, tv, s->ids, src_text[i], t->ids, ref_text[i]);
        json_array_append_new(sentences, attnmap_to_json(&a));
        attnmap_free(&a);
    }
    json_put(root, "sentences", sentences);
    char *text = xcheck(json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(7)));
    json_decref(root);
    return text;
}

/* ---- heads.svg ---------------------------------------------------------------------------------- */

enum { PANEL_W = 300, PANEL_H = 250, PLOT_L = 50, PLOT_R = 14, PLOT_T = 40, PLOT_B = 46, TOP = 56 };

static const char *order_colour(int order) {
    static const char *colours[HEADS_ORDERS] = {"#1f5fa8", "#2e8b57", "#8e44ad", "#c0392b"};
    return colours[order];
}

static const char *scope_title(int scope) {
    static const char *titles[HEADS_SCOPES] = {"all heads", "encoder self-attention", "decoder self-attention",
                                               "cross-attention"};
    return titles[scope + 1];
}

char *heads_svg(const HeadCurves *c, int default_order) {
    int scopes[HEADS_SCOPES], n_scopes = 0;
    double top = 0.0;
    for (int i = 0; i < c->n_curves; i++) {
        int seen = 0;
        for (int s = 0; s < n_scopes; s++) seen |= scopes[s] == c->curves[i].scope;
        if (!seen) scopes[n_scopes++] = c->curves[i].scope;
        for (int k = 0; k < HEADS_CURVE_POINTS; k++)
            if (c->curves[i].points[k].bleu > top) top = c->curves[i].points[k].bleu;
    }
    /* one y scale for every panel, ticked as every chart of qkv is (util/axis.h) */
    double ystep = axis_tick_step(0, top > 0 ? top : 1, 5), ymax = axis_top(top > 0 ? top : 1, ystep);
    int yticks = axis_tick_count(0, ymax, ystep);
    int width = n_scopes * PANEL_W + 20 > 1100 ? n_scopes * PANEL_W + 20 : 1100, height = TOP + PANEL_H + 10;
    int pw = PANEL_W - PLOT_L - PLOT_R, ph = PANEL_H - PLOT_T - PLOT_B;
    StrBuf sb = {0};
    sb_printf(&sb,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
              "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
              width, height, width, height);
    sb_printf(&sb, "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">");
    sb_append_xml(&sb, "BLEU as heads are removed (Michel et al. 2019, Fig. 2)");
    sb_printf(&sb, "</text>\n");
    for (int o = 0; o < HEADS_ORDERS; o++) { /* the legend, one entry an order */
        char label[96];
        snprintf(label, sizeof label, "%s order%s", heads_order_name(o),
                 o == default_order        ? " (the default)"
                 : o == HEADS_ORDER_RANDOM ? " (the baseline)"
                                           : "");
        int x = 10 + o * 270;
        sb_printf(&sb,
                  "<line x1=\"%d\" y1=\"38\" x2=\"%d\" y2=\"38\" stroke=\"%s\" stroke-width=\"%d\"%s/>"
                  "<text x=\"%d\" y=\"42\">",
                  x, x + 30, order_colour(o), o == default_order ? 3 : 2,
                  o == HEADS_ORDER_RANDOM ? " stroke-dasharray=\"6 4\"" : "", x + 36);
        sb_append_xml(&sb, label);
        sb_printf(&sb, "</text>\n");
    }
    for (int s = 0; s < n_scopes; s++) {
        int x0 = 10 + s * PANEL_W + PLOT_L, y0 = TOP + PLOT_T, heads = 0;
        for (int i = 0; i < c->n_curves; i++)
            if (c->curves[i].scope == scopes[s]) heads = c->curves[i].heads;
        char title[96];
        snprintf(title, sizeof title, "%s (%d heads)", scope_title(scopes[s]), heads);
        sb_printf(&sb, "<g class=\"panel\" data-scope=\"%s\">\n<text x=\"%d\" y=\"%d\" font-weight=\"bold\">",
                  heads_scope_name(scopes[s]), x0 - PLOT_L + 8, TOP + 18);
        sb_append_xml(&sb, title);
        sb_printf(&sb, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n",
                  x0, y0, pw, ph);
        for (int t = 0, n = axis_tick_count(0, 100, 20); t < n; t++) { /* x: 0..100 % by 20 */
            int x = x0 + t * pw / 5;
            sb_printf(&sb,
                      "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#eee\"/>"
                      "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%d</text>\n",
                      x, y0, x, y0 + ph, x, y0 + ph + 14, t * 20);
        }
        for (int t = 0; t < yticks; t++) {
            double v = t * ystep, y = y0 + ph - v / ymax * ph;
            sb_printf(&sb,
                      "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>"
                      "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n",
                      x0, y, x0 + pw, y, x0 - 4, y + 4, v);
        }
        sb_printf(&sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", x0 + pw / 2, y0 + ph + 32);
        sb_append_xml(&sb, "% of heads removed");
        sb_printf(&sb, "</text>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 %d %d)\">",
                  x0 - 36, y0 + ph / 2, x0 - 36, y0 + ph / 2);
        sb_append_xml(&sb, "BLEU");
        sb_printf(&sb, "</text>\n");
        for (int i = 0; i < c->n_curves; i++) {
            const HeadCurve *cv = &c->curves[i];
            if (cv->scope != scopes[s]) continue;
            const char *colour = order_colour(cv->order);
            sb_printf(&sb, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%d\"%s points=\"",
                      heads_order_name(cv->order), colour, cv->order == default_order ? 3 : 2,
                      cv->order == HEADS_ORDER_RANDOM ? " stroke-dasharray=\"6 4\"" : "");
            for (int k = 0; k < HEADS_CURVE_POINTS; k++)
                sb_printf(&sb, "%s%.1f,%.1f", k ? " " : "", x0 + cv->points[k].pct * pw / 100.0,
                          y0 + ph - (cv->points[k].bleu / ymax) * ph);
            sb_printf(&sb, "\"/>\n");
            for (int k = 0; k < HEADS_CURVE_POINTS; k++) {
                const HeadCurvePoint *p = &cv->points[k];
                char tip[192];
                snprintf(tip, sizeof tip, "%s order, %d%% (%d of %d heads) removed: BLEU %.2f, NLL %.4f, %s",
                         heads_order_name(cv->order), p->pct, p->removed, cv->heads, p->bleu, p->nll, p->mask);
                sb_printf(&sb, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>",
                          x0 + p->pct * pw / 100.0, y0 + ph - (p->bleu / ymax) * ph, colour);
                sb_append_xml(&sb, tip);
                sb_printf(&sb, "</title></circle>\n");
            }
        }
        sb_printf(&sb, "</g>\n");
    }
    sb_printf(&sb, "</svg>\n");
    return sb.buf;
}

/* a head entry the grid can place: its kind one of the three, its layer and head counts */
static int is_head(json_t *h) {
    const char *kind = json_string_value(json_object_get(h, "kind"));
    json_t *layer = json_object_get(h, "layer"), *head = json_object_get(h, "head");
    return kind &&
           (strcmp(kind, "encoder_self") == 0 || strcmp(kind, "decoder_self") == 0 || strcmp(kind, "cross") == 0) &&
           json_is_integer(layer) && json_integer_value(layer) >= 0 && json_integer_value(layer) < 1024 &&
           json_is_integer(head) && json_integer_value(head) >= 0 && json_integer_value(head) < 1024;
}

json_t *heads_read(const char *path) {
    size_t len = 0;
    char *text = read_file_max(path, READ_FILE_SMALL, &len);
    if (!text) return NULL;
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    free(text);
    if (!root) return err_set("%s:%d:%d: %s", path, je.line, je.column, je.text), NULL;
    const char *format = json_string_value(json_object_get(root, "format"));
    json_t *list = json_object_get(root, "heads");
    int ok = format && strcmp(format, "qkv-heads-1") == 0 && json_is_array(list) && json_array_size(list) > 0;
    for (size_t i = 0; ok && i < json_array_size(list); i++) ok = is_head(json_array_get(list, i));
    if (!ok) {
        json_decref(root);
        return err_set("%s: not a list of heads written by qkv heads (format qkv-heads-1)", path), NULL;
    }
    return root;
}
