/* translator: see translator.h. */
#include "decode/translator.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/corpus.h"
#include "data/tokenize.h"
#include "util/mem.h"
#include "util/text.h"

typedef struct {
    char **tok;
    int n, cap;
} Surface;

static void keep_surface(const char *tok, size_t len, void *ctx) {
    Surface *s = ctx;
    if (s->n == s->cap) s->tok = xrealloc(s->tok, sizeof(char *) * (size_t)(s->cap = s->cap ? 2 * s->cap : 16));
    char *t = xmalloc(len + 1);
    memcpy(t, tok, len);
    t[len] = '\0';
    s->tok[s->n++] = t;
}

/* For each <unk> in out, the source position whose cross-attention weight (last decoder
 * layer, heads averaged) is highest, excluding the source's EOS; -1 elsewhere. */
static void unk_sources(Model *m, const Seq *src, const Seq *out, int *where) {
    int S = src->len + 1, T = out->len + 1, H = m->cfg.heads, L = m->cfg.decoder_layers;
    int *s = xmalloc(sizeof(int) * (size_t)S), *tin = xmalloc(sizeof(int) * (size_t)T),
        *tout = xmalloc(sizeof(int) * (size_t)T);
    batch_frame_source(src->ids, src->len, s, S);
    batch_frame_target(out->ids, out->len, tin, tout, T);
    ModelBatch b = {1, S, T, s, &S, tin, NULL, &T, 0};
    model_reserve(m, model_arena_floats(m, 1, S, T));
    model_encode(m, &b);
    model_decode(m, &b);
    const float *p = model_attention_acts(m, ATTN_CROSS, L - 1)->p; /* (1, H, T, S) */
    for (int t = 0; t < out->len; t++) {
        where[t] = -1;
        if (out->ids[t] != VOCAB_UNK) continue;
        double best = -1.0;
        for (int j = 0; j < src->len; j++) {
            double w = 0.0;
            for (int h = 0; h < H; h++) w += p[((size_t)h * T + t) * S + j];
            if (w > best) best = w, where[t] = j;
        }
    }
    free(s), free(tin), free(tout);
}

/* The text of one hypothesis, with <unk>s replaced from the source when asked. */
static char *hypothesis_text(Model *m, int tokenizer, const Vocab *tv, const Seq *src, const Seq *out,
                             const Surface *surface, int replace, TranslateStats *st) {
    st->out_tokens += out->len;
    int unks = 0;
    for (int t = 0; t < out->len; t++) unks += out->ids[t] == VOCAB_UNK;
    if (!unks || !replace || tv->spm || surface->n != src->len) {
        st->out_unk += tv->spm ? 0 : unks;
        return decode_ids(out->ids, out->len, tokenizer, tv);
    }
    int *where = xmalloc(sizeof(int) * (size_t)out->len);
    unk_sources(m, src, out, where);
    StrBuf sb = {0};
    sb_append(&sb, "", 0);
    for (int t = 0; t < out->len; t++)
        detokenize_append(&sb, tokenizer, where[t] >= 0 ? surface->tok[where[t]] : vocab_token(tv, out->ids[t]),
                          t == 0);
    st->replaced_unk += unks;
    free(where);
    return sb.buf;
}

TranslateOptions translate_options_for_run(const TranslateOptions *o, const Config *c) {
    TranslateOptions run = *o;
    /* greedy search ranks one hypothesis: its score stays log P / length, as ever */
    if (!o->length_penalty_given && o->decode.beam > 1) run.decode.length_penalty = c->decode.length_penalty;
    return run;
}

char **translate_lines(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, char **lines, int n,
                       const TranslateOptions *o, TranslateStats *st, double *scores) {
    return translate_lines_ids(m, tokenizer, sv, tv, lines, NULL, n, o, st, scores, NULL);
}

Seq translator_source(const char *line, const SentenceTokens *given, int tokenizer, const Vocab *sv, int max_src,
                      int *cut) {
    int need = given ? given->n : (int)strlen(line) + 2, cap = need > max_src + 1 ? need : max_src + 1;
    int *ids = xmalloc(sizeof(int) * (size_t)cap), len;
    if (given) memcpy(ids, given->ids, sizeof(int) * (size_t)(len = given->n));
    else len = encode_line(line, tokenizer, sv, ids, cap);
    *cut = len > max_src;
    if (*cut) len = max_src;
    if (len == 0) free(ids), ids = NULL;
    return (Seq){ids, len};
}

char **translate_lines_ids(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, char **lines,
                           const SentenceTokens *given, int n, const TranslateOptions *o, TranslateStats *st,
                           double *scores, Seq *ids) {
    int K = o->decode.nbest, max_src = m->cfg.max_positions - 1;
    size_t slots = (size_t)(n ? n : 1);
    memset(st, 0, sizeof *st);
    st->lines = n;
    Seq *src = xmalloc(sizeof(Seq) * slots), *out = xmalloc(sizeof(Seq) * slots * K);
    Surface *surface = xcalloc(slots, sizeof(Surface));
    int *line_of = xmalloc(sizeof(int) * slots), k = 0;
    for (int i = 0; i < n; i++) {
        int cut;
        Seq s = translator_source(lines[i], given ? &given[i] : NULL, tokenizer, sv, max_src, &cut);
        st->truncated += cut;
        if (s.len == 0) {
            st->empty++;
            continue;
        }
        st->src_tokens += s.len;
        for (int t = 0; t < s.len; t++) st->src_unk += s.ids[t] == VOCAB_UNK;
        if (!sv->spm && o->replace_unk) tokenize_line(tokenizer, lines[i], keep_surface, &surface[k]);
        src[k] = s;
        line_of[k++] = i;
    }
    double *sc = xmalloc(sizeof(double) * slots * K);
    for (int i = 0; scores && i < n * K; i++) scores[i] = 0.0;
    for (int i = 0; ids && i < n * K; i++) ids[i] = (Seq){NULL, 0};
    /* scoring costs a softmax per step */
    decode_counting(m, src, k, &o->decode, out, scores ? sc : NULL, &st->flops);
    char **text = xmalloc(sizeof(char *) * slots * K);
    for (int i = 0; i < n * K; i++) text[i] = NULL;
    for (int j = 0; j < k; j++) {
        for (int b = 0; b < K; b++) {
            Seq *h = &out[(size_t)j * K + b];
            size_t at = (size_t)line_of[j] * K + b;
            text[at] = hypothesis_text(m, tokenizer, tv, &src[j], h, &surface[j], o->replace_unk, st);
            if (scores) scores[at] = sc[(size_t)j * K + b];
            if (ids) ids[at] = *h;
            else free(h->ids);
        }
        free(src[j].ids);
        for (int t = 0; t < surface[j].n; t++) free(surface[j].tok[t]);
        free(surface[j].tok);
    }
    for (int i = 0; i < n * K; i++)
        if (!text[i]) text[i] = xstrdup(""); /* an empty line translates to an empty line */
    free(src), free(out), free(surface), free(line_of), free(sc);
    return text;
}

double reference_nll(Model *m, const Seq *src, const Seq *ref, int n, long long *tokens) {
    enum { GROUP = 32 };
    double nll = 0.0;
    *tokens = 0;
    for (int first = 0; first < n; first += GROUP) {
        int B = n - first < GROUP ? n - first : GROUP, S = 1, T = 1;
        for (int i = 0; i < B; i++) {
            if (src[first + i].len + 1 > S) S = src[first + i].len + 1;
            if (ref[first + i].len + 1 > T) T = ref[first + i].len + 1;
        }
        int *s = xmalloc(sizeof(int) * (size_t)B * S), *tin = xmalloc(sizeof(int) * (size_t)B * T);
        int *tout = xmalloc(sizeof(int) * (size_t)B * T), *slen = xmalloc(sizeof(int) * (size_t)B),
            *tlen = xmalloc(sizeof(int) * (size_t)B);
        for (int i = 0; i < B; i++) {
            slen[i] = batch_frame_source(src[first + i].ids, src[first + i].len, s + (size_t)i * S, S);
            tlen[i] = batch_frame_target(ref[first + i].ids, ref[first + i].len, tin + (size_t)i * T,
                                         tout + (size_t)i * T, T);
        }
        ModelBatch b = {B, S, T, s, slen, tin, tout, tlen, 0};
        model_reserve(m, model_arena_floats(m, B, S, T));
        model_forward(m, &b, 0, 0, 0);
        nll += m->nll_sum;
        *tokens += m->n_tokens;
        free(s), free(tin), free(tout), free(slen), free(tlen);
    }
    return nll;
}
