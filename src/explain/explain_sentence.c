/* explain_sentence: see explain_sentence.h. */
#include "explain/explain_sentence.h"

#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "data/corpus.h"
#include "data/sentence_ids.h"
#include "decode/decode.h"
#include "explain/explain_json.h"
#include "util/err.h"
#include "util/mem.h"

ExplainAsk explain_ask(const char *text, const char *target, const char *contrast) {
    return (ExplainAsk){text, target, contrast, EXPLAIN_IG_STEPS, "--text", "--target", "--contrast", {NULL, NULL}};
}

int explain_sentence_prepare(const Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const ExplainAsk *a,
                             ExplainSentence *x, int *too_long) {
    int max = m->cfg.max_positions - 2;
    memset(x, 0, sizeof *x);
    x->foil = -1;
    x->src = xmalloc(sizeof(int) * (size_t)(max + 1)), x->tgt = xmalloc(sizeof(int) * (size_t)(max + 1));
    if (too_long) *too_long = 0;
    if (a->contrast) {
        char why[128];
        if ((x->foil = encode_target_word(a->contrast, tokenizer, tv, why, sizeof why)) < 0) {
            StrBuf word = {0};
            sentence_quote(&word, a->contrast);
            err_set("%s: %s %s", a->contrast_name, word.buf, why);
            return sb_free(&word), -1;
        }
    }
    return sentence_pair_ids(a->text, a->target, a->given, tokenizer, sv, tv, max, x->src, &x->ns, x->tgt, &x->nt,
                             &x->unknown, a->text_name, a->target_name, "explain", too_long);
}

void explain_sentence_decode(Model *m, const ExplainAsk *a, ExplainSentence *x) {
    if (!a->target) x->nt = greedy_ids(m, x->src, x->ns, x->tgt, m->cfg.max_positions - 2);
}

void explain_sentence_run(Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const ExplainAsk *a,
                          ExplainSentence *x) {
    ExplainOptions eo = {.foil = x->foil, .ig_steps = a->ig_steps, .loo = 1};
    explain_pair(m, sv, tv, x->src, x->ns, x->tgt, x->nt, &eo, &x->e);
    attnmap_surface_labels(&x->e.maps, tokenizer, sv, tv, x->src, a->text, x->tgt, a->target);
    x->n_methods = explain_methods(&x->e, &x->methods);
    x->json = explain_json(&x->e, x->methods, x->n_methods, a->contrast);
}

void explain_sentence_free(ExplainSentence *x) {
    if (x->methods) explain_methods_free(x->methods, x->n_methods);
    if (x->e.src) explain_pair_free(&x->e);
    sb_free(&x->unknown);
    free(x->json), free(x->src), free(x->tgt);
    memset(x, 0, sizeof *x);
}
