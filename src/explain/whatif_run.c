/* whatif_run: see whatif_run.h. */
#include "explain/whatif_run.h"

#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "data/corpus.h"
#include "data/sentence_ids.h"
#include "decode/decode.h"
#include "explain/whatif_json.h"
#include "util/err.h"
#include "util/mem.h"

WhatifAsk whatif_ask(const char *text, const char *target, const Config *run) {
    return (WhatifAsk){.text = text,
                       .target = target,
                       .top = WHATIF_TOP,
                       .lens = 1,
                       .length_penalty = run->decode.length_penalty,
                       .text_name = "--text",
                       .target_name = "--target",
                       .pin_names = {"--pin", "--pin", "--pin", "--pin", "--pin"}};
}

enum { PIN_LAYER, PIN_HEAD, PIN_KEY, PIN_WEIGHTS, PIN_QUERY };

/* The pin's layer, head and source side against the model and a source of S positions. */
static int check_pin(const Model *m, const WhatifAsk *a, int S) {
    const WhatifPin *p = a->pin;
    const ModelConfig *c = &m->cfg;
    int bad = p->layer < 0 || p->layer >= c->decoder_layers ? PIN_LAYER
              : p->head < 0 || p->head >= c->heads          ? PIN_HEAD
                                                            : -1;
    if (bad >= 0)
        return err_set("%s: this model's cross-attention has layers 0..%d and heads 0..%d", a->pin_names[bad],
                       c->decoder_layers - 1, c->heads - 1);
    if (p->weights && p->n_weights != S)
        return err_set("%s: %d weights for a source of %d positions (its <eos> included)", a->pin_names[PIN_WEIGHTS],
                       p->n_weights, S);
    if (!p->weights && (p->key < 0 || p->key >= S))
        return err_set("%s: source position %d: the source has positions 0..%d (its <eos> included)",
                       a->pin_names[PIN_KEY], p->key, S - 1);
    return 0;
}

int whatif_prepare(const Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const WhatifAsk *a, WhatifResult *x,
                   int *too_long) {
    int max = m->cfg.max_positions - 2;
    memset(x, 0, sizeof *x);
    x->src = xmalloc(sizeof(int) * (size_t)(max + 1)), x->tgt = xmalloc(sizeof(int) * (size_t)(max + 1));
    if (sentence_pair_ids(a->text, a->target, a->given, tokenizer, sv, tv, max, x->src, &x->ns, x->tgt, &x->nt,
                          &x->unknown, a->text_name, a->target_name, "look at", too_long) != 0)
        return -1;
    return a->pin ? check_pin(m, a, x->ns + 1) : 0;
}

/* The text of ids for people: detokenized, valid UTF-8 (caller frees). */
static char *shown(const int *ids, int n, int tokenizer, const Vocab *tv) {
    char *words = decode_ids(ids, n, tokenizer, tv), *s = attnmap_utf8(words);
    free(words);
    return s;
}

void whatif_decode(Model *m, const WhatifAsk *a, WhatifResult *x) {
    if (!a->target) x->nt = greedy_ids(m, x->src, x->ns, x->tgt, m->cfg.max_positions - 2); /* as trained */
}

int whatif_check_query(const WhatifAsk *a, const WhatifResult *x) {
    if (a->pin && (a->pin->query < 0 || a->pin->query > x->nt))
        return err_set("%s: target position %d: the target has positions 0..%d", a->pin_names[PIN_QUERY], a->pin->query,
                       x->nt);
    return 0;
}

void whatif_run(Model *m, const Vocab *tv, int tokenizer, const WhatifAsk *a, WhatifResult *x) {
    int max = m->cfg.max_positions - 2, S = x->ns + 1;
    whatif_steps(m, x->src, x->ns, x->tgt, x->nt, a->top, &x->base);
    model_set_head_gates(m, a->gates);
    float *pin_w = NULL;
    AttnIntervene iv;
    if (a->pin) {
        pin_w = xmalloc(sizeof(float) * (size_t)S);
        whatif_pin(m, a->pin->layer, a->pin->head, a->pin->query, a->pin->weights ? 0 : a->pin->key, S, pin_w, &iv);
        if (a->pin->weights) memcpy(pin_w, a->pin->weights, sizeof(float) * (size_t)S); /* the caller's mix */
    }
    x->changed = a->gates || a->mask_given || a->pin;
    if (x->changed) whatif_steps(m, x->src, x->ns, x->tgt, x->nt, a->top, &x->after);
    if (a->gates) { /* heads off: the translation again, as the changed model writes it */
        int *alt = xmalloc(sizeof(int) * (size_t)(max + 1)), na = greedy_ids(m, x->src, x->ns, alt, max);
        x->translation_changed = shown(alt, na, tokenizer, tv);
        free(alt);
    }
    if (a->beam) {
        DecodeOptions d = decode_defaults();
        d.beam = a->beam, d.length_penalty = a->length_penalty, d.trace = &x->tree;
        Seq s = {x->src, x->ns}, best = {0};
        decode(m, &s, 1, &d, &best, &x->beam_score);
        x->beam_best = shown(best.ids, best.len, tokenizer, tv);
        free(best.ids);
    }
    whatif_clear(m);
    model_set_head_gates(m, NULL);
    free(pin_w);
    x->target_text = shown(x->tgt, x->nt, tokenizer, tv);
    WhatifView view = {.source = a->text,
                       .target = x->target_text,
                       .tgt = x->tgt,
                       .nt = x->nt,
                       .model = &x->base,
                       .changed = x->changed ? &x->after : NULL,
                       .lens = a->lens,
                       .translation_changed = x->translation_changed,
                       .tree = a->beam ? &x->tree : NULL,
                       .beam_best = x->beam_best,
                       .beam_length_penalty = a->length_penalty};
    x->json = whatif_json(&view, tv);
}

void whatif_result_free(WhatifResult *x) {
    whatif_steps_free(&x->base), whatif_steps_free(&x->after);
    beam_trace_free(&x->tree);
    sb_free(&x->unknown);
    json_decref(x->json);
    free(x->src), free(x->tgt), free(x->target_text), free(x->translation_changed), free(x->beam_best);
    memset(x, 0, sizeof *x);
}
