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

/* text (NULL: none, n -1) as ids of r's source (target) vocabulary, all of them; *unknown,
 * when asked, how many read as <unk>. */
static SentenceTokens read_text(const Run *r, const char *text, int target, int *unknown) {
    if (!text) return (SentenceTokens){NULL, -1};
    int cap = (int)strlen(text) + 2, *ids = xmalloc(sizeof(int) * (size_t)cap);
    int n = encode_line(text, r->cfg.data.tokenizer, target ? &r->tgt_vocab : &r->src_vocab, ids, cap);
    if (unknown)
        for (int t = *unknown = 0; t < n; t++) *unknown += ids[t] == VOCAB_UNK;
    return (SentenceTokens){ids, n};
}

void work_size(const Run *r, const ApiRequest *q, WorkSize *z) {
    work_size_free(z);
    z->n = q->n;
    z->src = xmalloc(sizeof(SentenceTokens) * (size_t)(q->n ? q->n : 1));
    z->unknown = xmalloc(sizeof(int) * (size_t)(q->n ? q->n : 1));
    for (int i = 0; i < q->n; i++) z->src[i] = read_text(r, q->src[i], 0, &z->unknown[i]);
    z->tgt = read_text(r, q->tgt, 1, NULL);
    z->corrupt = read_text(r, q->corrupt, 0, NULL);
    z->counted = 1;
}

void work_size_free(WorkSize *z) {
    for (int i = 0; z->src && i < z->n; i++) free((void *)z->src[i].ids); /* read_text's */
    free(z->src), free(z->unknown), free((void *)z->tgt.ids), free((void *)z->corrupt.ids);
    *z = (WorkSize){0};
}

const SentenceTokens *work_given(const SentenceTokens *s) { return s->n >= 0 ? s : NULL; }

/* A count at most the model's positions (a longer sentence is refused, at once, by the
 * worker). */
static int capped(const Run *r, int n) {
    int max = r->model.cfg.max_positions - 2;
    return n < max ? n : max;
}

double work_translate_request(const Run *r, const ApiRequest *q, const WorkSize *z) {
    double work = 0.0;
    for (int i = 0; i < z->n; i++) work += work_translate_gflop(&r->model, &q->o.decode, capped(r, z->src[i].n));
    return work;
}

/* The lengths a one-sentence request may reach: its source's tokens, and the decoder's
 * positions (a forced target's, else the longest a greedy search may go). */
static void one_sentence(const Run *r, const WorkSize *z, int *ns, int *T, int *longest) {
    DecodeOptions greedy = decode_defaults();
    greedy.beam = 1;
    *ns = capped(r, z->src[0].n), *longest = decode_max_len(&r->model, &greedy, *ns);
    *T = (z->tgt.n >= 0 ? capped(r, z->tgt.n) : *longest) + 1;
}

/* An unforced target's greedy search, before the work on it. */
static double greedy_first(const Run *r, const ApiRequest *q, int ns) {
    DecodeOptions greedy = decode_defaults();
    greedy.beam = 1;
    return q->tgt ? 0.0 : work_translate_gflop(&r->model, &greedy, ns);
}

double work_attention_request(const Run *r, const ApiRequest *q, const WorkSize *z) {
    int ns, T, longest; /* the search, then a forced pass for the maps */
    one_sentence(r, z, &ns, &T, &longest);
    return work_translate_gflop(&r->model, &q->o.decode, ns) + pass_gflop(&r->model.cfg, ns + 1, T);
}

double work_explain_request(const Run *r, const ApiRequest *q, const WorkSize *z) {
    int ns, T, longest;
    one_sentence(r, z, &ns, &T, &longest);
    return greedy_first(r, q, ns) + work_explain_gflop(&r->model.cfg, ns + 1, T, q->ig_steps, q->contrast != NULL);
}

double work_whatif_request(const Run *r, const ApiRequest *q, const WorkSize *z) {
    int ns, T, longest;
    one_sentence(r, z, &ns, &T, &longest);
    return work_whatif_gflop(&r->model.cfg, ns + 1, T, q->tgt != NULL, q->mask_heads || q->pin, q->mask_heads != NULL,
                             q->tree ? q->o.decode.beam : 0, longest);
}

double work_patch_request(const Run *r, const ApiRequest *q, const WorkSize *z) {
    int ns, T, longest; /* the clean sentence's translation, and the table */
    one_sentence(r, z, &ns, &T, &longest);
    return greedy_first(r, q, ns) + work_patch_gflop(&r->model.cfg, ns + 1, T);
}
