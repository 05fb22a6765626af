/* patch_pair: see patch_pair.h. */
#include "explain/patch_pair.h"

#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "data/batch.h"
#include "data/corpus.h"
#include "data/sentence_ids.h"
#include "decode/decode.h"
#include "explain/patch_view.h"
#include "util/err.h"
#include "util/mem.h"

PatchAsk patch_ask(const char *clean, const char *corrupt, const char *target) {
    return (PatchAsk){.clean = clean,
                      .corrupt = corrupt,
                      .target = target,
                      .at = -1,
                      .clean_name = "--clean",
                      .corrupt_name = "--corrupt",
                      .target_name = "--target",
                      .compare_names = {"--compare", "--compare"},
                      .at_name = "--at"};
}

/* One side read, its fault said; 0 or -1. */
static int side(const char *text, const SentenceTokens *given, const char *name, int tokenizer, const Vocab *v, int max,
                int target, int *ids, int *n, StrBuf *unknown, int *too_long) {
    StrBuf bad = {0};
    SentenceFault f = sentence_ids(text, given, tokenizer, v, max, target, ids, n, target ? &bad : unknown);
    if (f != SENTENCE_OK) {
        sentence_fault_error(f, name, "look at", max, &bad);
        if (too_long) *too_long = f == SENTENCE_TOO_LONG;
    }
    sb_free(&bad);
    return f == SENTENCE_OK ? 0 : -1;
}

int patch_prepare(const Model *m, const Vocab *sv, const Vocab *tv, int tokenizer, const PatchAsk *a, PatchPair *x,
                  int *too_long) {
    int max = m->cfg.max_positions - 2, nc;
    memset(x, 0, sizeof *x);
    x->metric.at = -1;
    size_t room = sizeof(int) * (size_t)(max + 1);
    x->clean = xmalloc(room), x->corrupt = xmalloc(room), x->tgt = xmalloc(room);
    if (too_long) *too_long = 0;
    int clean = side(a->clean, a->given[0], a->clean_name, tokenizer, sv, max, 0, x->clean, &x->ns, &x->unknown[0],
                     too_long);
    if (clean != 0) return -1;
    int corrupt = side(a->corrupt, a->given[1], a->corrupt_name, tokenizer, sv, max, 0, x->corrupt, &nc, &x->unknown[1],
                       too_long);
    if (corrupt != 0) return -1;
    if (nc != x->ns)
        return err_set("%s: %d tokens, %s %d: patching copies position for position, so they must match",
                       a->corrupt_name, nc, a->clean_name, x->ns);
    if (a->target &&
        side(a->target, a->given[2], a->target_name, tokenizer, tv, max, 1, x->tgt, &x->nt, NULL, too_long) != 0)
        return -1;
    if (!a->compare[0]) {
        x->metric_name = xstrdup("log p(target)");
        return 0;
    }
    int ids[2];
    for (int i = 0; i < 2; i++) {
        char why[128];
        if ((ids[i] = encode_target_word(a->compare[i], tokenizer, tv, why, sizeof why)) < 0) {
            StrBuf w = {0};
            sentence_quote(&w, a->compare[i]);
            err_set("%s: %s %s", a->compare_names[i], w.buf, why);
            return sb_free(&w), -1;
        }
    }
    x->metric = (PatchMetric){.at = a->at, .a = ids[0], .b = ids[1]};
    char *wa = attnmap_utf8(a->compare[0]), *wb = attnmap_utf8(a->compare[1]);
    StrBuf name = {0};
    sb_printf(&name, "log p(%s) - log p(%s) at target position %d", wa, wb, a->at);
    free(wa), free(wb);
    x->metric_name = name.buf;
    return 0;
}

void patch_decode(Model *m, const PatchAsk *a, PatchPair *x) {
    if (!a->target) x->nt = greedy_ids(m, x->clean, x->ns, x->tgt, m->cfg.max_positions - 2); /* the clean one's */
}

int patch_check_at(const PatchAsk *a, const PatchPair *x) {
    if (x->metric.at > x->nt)
        return err_set("%s: target position %d: the target has positions 0..%d", a->at_name, x->metric.at, x->nt);
    return 0;
}

int patch_pair_run(Model *m, const Vocab *sv, PatchPair *x) {
    if (patch_run(m, x->clean, x->corrupt, x->ns, x->tgt, x->nt, &x->metric, &x->table) != 0) return -1;
    int S = x->ns + 1, *framed = xmalloc(sizeof(int) * (size_t)S);
    batch_frame_source(x->clean, x->ns, framed, S);
    x->labels = xmalloc(sizeof(char *) * (size_t)S);
    for (int j = 0; j < S; j++) x->labels[j] = attnmap_utf8(vocab_token(sv, framed[j]));
    free(framed);
    x->json = patch_json(&x->table, x->metric_name, x->labels, S);
    return 0;
}

void patch_pair_free(PatchPair *x) {
    for (int j = 0; x->labels && j <= x->ns; j++) free(x->labels[j]);
    patch_free(&x->table);
    sb_free(&x->unknown[0]), sb_free(&x->unknown[1]);
    free(x->labels), free(x->metric_name), free(x->json), free(x->clean), free(x->corrupt), free(x->tgt);
    memset(x, 0, sizeof *x);
}
