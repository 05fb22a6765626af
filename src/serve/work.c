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

double work_translate_request(const Run *r, const ApiRequest *q) {
    double work = 0.0;
    for (int i = 0; i < q->n; i++) work += work_translate_gflop(&r->model, &q->o.decode, tokens(r, q->src[i], 0));
    return work;
}

/* The lengths a one-sentence request may reach: its source's tokens, and the decoder's
 * positions (a forced target's, else the longest a greedy search may go). */
static void one_sentence(const Run *r, const ApiRequest *q, int *ns, int *T, int *longest) {
    DecodeOptions greedy = decode_defaults();
    greedy.beam = 1;
    *ns = tokens(r, q->src[0], 0), *longest = decode_max_len(&r->model, &greedy, *ns);
    *T = (q->tgt ? tokens(r, q->tgt, 1) : *longest) + 1;
}

/* An unforced target's greedy search, before the work on it. */
static double greedy_first(const Run *r, const ApiRequest *q, int ns) {
    DecodeOptions greedy = decode_defaults();
    greedy.beam = 1;
    return q->tgt ? 0.0 : work_translate_gflop(&r->model, &greedy, ns);
}

double work_attention_request(const Run *r, const ApiRequest *q) {
    int ns, T, longest; /* the search, then a forced pass for the maps */
    one_sentence(r, q, &ns, &T, &longest);
    return work_translate_gflop(&r->model, &q->o.decode, ns) + pass_gflop(&r->model.cfg, ns + 1, T);
}

double work_explain_request(const Run *r, const ApiRequest *q) {
    int ns, T, longest;
    one_sentence(r, q, &ns, &T, &longest);
    return greedy_first(r, q, ns) + work_explain_gflop(&r->model.cfg, ns + 1, T, q->ig_steps, q->contrast != NULL);
}

double work_whatif_request(const Run *r, const ApiRequest *q) {
    int ns, T, longest;
    one_sentence(r, q, &ns, &T, &longest);
    return work_whatif_gflop(&r->model.cfg, ns + 1, T, q->tgt != NULL, q->mask_heads || q->pin, q->mask_heads != NULL,
                             q->tree ? q->o.decode.beam : 0, longest);
}

double work_patch_request(const Run *r, const ApiRequest *q) {
    int ns, T, longest; /* the clean sentence's translation, and the table */
    one_sentence(r, q, &ns, &T, &longest);
    return greedy_first(r, q, ns) + work_patch_gflop(&r->model.cfg, ns + 1, T);
}
