/* work: see work.h. */
#include "serve/work.h"

#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "util/mem.h"

/* The GFLOP of one forced pass over S source and T decoder positions: the model's products
 * per position and attention's own (QK^T and PV, length squared). */
static double pass_gflop(const ModelConfig *c, int S, int T) {
    double fs, ft;
    model_position_flops(c, &fs, &ft);
    double attn = 4.0 * c->d_model *
                  ((double)c->encoder_layers * S * S + (double)c->decoder_layers * ((double)T * T + (double)T * S));
    return (S * fs + T * ft + attn) / 1e9;
}

double work_translate_gflop(const Model *m, const DecodeOptions *o, int len) {
    const ModelConfig *c = &m->cfg;
    int S = len + 1, T = decode_max_len(m, o, len) + 1;
    double encoder = pass_gflop(c, S, 0); /* a pass over no target is the encoder's alone */
    return encoder + o->beam * (pass_gflop(c, S, T) - encoder);
}

double work_explain_gflop(const ModelConfig *c, int S, int T, int ig_steps, int foil) {
    double pass = pass_gflop(c, S, T), rows = (double)T * (ig_steps + 2) * (foil ? 2 : 1);
    return 3.0 * rows * pass + (S + 1.0) * pass;
}

double work_whatif_gflop(const ModelConfig *c, int S, int T, int forced, int changed, int masked, int beam,
                         int longest) {
    double lens = 2.0 * c->decoder_layers * T * (double)c->d_model * c->tgt_vocab / 1e9;
    double forward = pass_gflop(c, S, T) + lens, decoding = pass_gflop(c, S, longest);
    return (1 + changed) * forward + (!forced + masked + beam) * decoding;
}

double work_patch_gflop(const ModelConfig *c, int S, int T) {
    int heads = c->heads * (c->encoder_layers + 2 * c->decoder_layers), n = heads + c->encoder_layers * S;
    return (n + 3.0 + 2 * 3.0) * pass_gflop(c, S, T);
}

/* The tokens of text in v, at most the model's positions (a longer one is refused, at
 * once, by the worker). */
static int tokens(const Run *r, const char *text, int target) {
    int cap = (int)strlen(text) + 2, *ids = xmalloc(sizeof(int) * (size_t)cap), max = r->model.cfg.max_positions - 2;
    int n = encode_line(text, r->cfg.data.tokenizer, target ? &r->tgt_vocab : &r->src_vocab, ids, cap);
    free(ids);
    return n < max ? n : max;
}

double work_request_gflop(const Run *r, const ApiRequest *q) {
    const Model *m = &r->model;
    const ModelConfig *c = &m->cfg;
    DecodeOptions greedy = decode_defaults();
    greedy.beam = 1;
    double work = 0.0;
    if (q->kind == API_TRANSLATE) {
        for (int i = 0; i < q->n; i++) work += work_translate_gflop(m, &q->o.decode, tokens(r, q->src[i], 0));
        return work;
    }
    int ns = tokens(r, q->src[0], 0), S = ns + 1, longest = decode_max_len(m, &greedy, ns);
    int T = (q->tgt ? tokens(r, q->tgt, 1) : longest) + 1;
    switch (q->kind) {
    case API_ATTENTION: /* the search, then a forced pass for the maps */
        return work_translate_gflop(m, &q->o.decode, ns) + pass_gflop(c, S, T);
    case API_EXPLAIN:
        return (q->tgt ? 0.0 : work_translate_gflop(m, &greedy, ns)) +
               work_explain_gflop(c, S, T, q->ig_steps, q->contrast != NULL);
    case API_WHATIF:
        return work_whatif_gflop(c, S, T, q->tgt != NULL, q->mask_heads || q->pin, q->mask_heads != NULL,
                                 q->tree ? q->o.decode.beam : 0, longest);
    default: /* API_PATCH: the clean sentence's translation, and the table */
        return (q->tgt ? 0.0 : work_translate_gflop(m, &greedy, ns)) + work_patch_gflop(c, S, T);
    }
}
