/* corpus_run: explain_corpus (corpus_run.h). */
#include "explain/corpus_run.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode.h"
#include "decode/fanout.h"
#include "explain/aligners.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/mem.h"

typedef struct {
    FaithTotals f;
    AlignCounts *aer;
    char *error; /* the pair's bad gold line, or NULL */
} PairResult;

typedef struct {
    const ExplainCorpus *in;
    PairResult *res;
    int next, done;
    pthread_mutex_t lock;
    void (*progress)(int, int, void *);
    void *arg;
} Job;

static void work(Model *m, int w, void *arg) {
    (void)w;
    Job *j = arg;
    const ExplainCorpus *in = j->in;
    int max = m->cfg.max_positions - 2;
    int *greedy = xmalloc(sizeof(int) * (size_t)(max + 1));
    for (;;) {
        pthread_mutex_lock(&j->lock);
        int i = j->next++;
        pthread_mutex_unlock(&j->lock);
        if (i >= in->n) break;
        const Seq *s = &in->src[i];
        const int *tgt = in->tgt ? in->tgt[i].ids : greedy;
        int nt = in->tgt ? in->tgt[i].len : greedy_ids(m, s->ids, s->len, greedy, max);
        PairExplanation e;
        explain_pair(m, in->sv, in->tv, s->ids, s->len, tgt, nt, &in->eo, &e);
        ExplainMethod *ms;
        int n_ms = explain_methods(&e, &ms);
        PairResult *r = &j->res[i];
        faith_init(&r->f, ms, n_ms, e.contrib.dec_layers, e.maps.heads, in->random_orders);
        faith_add(&r->f, m, &e, ms, 0x5eed + (uint64_t)in->line[i]);
        if (in->gold) {
            r->aer = xcalloc((size_t)n_ms, sizeof(AlignCounts));
            if (explain_align_score(&e, ms, n_ms, in->tokenizer, in->null, in->gold[i], in->gold_file, in->line[i],
                                    r->aer) != 0)
                r->error = xstrdup(err_msg());
        }
        explain_methods_free(ms, n_ms);
        explain_pair_free(&e);
        pthread_mutex_lock(&j->lock);
        j->done++;
        if (j->progress) j->progress(j->done, in->n, j->arg);
        pthread_mutex_unlock(&j->lock);
    }
    free(greedy);
}

/* Every gold line read, and its links checked against its pair's words, before any pair
 * is explained: a bad line is said at once, not after the corpus's minutes of work. */
static int gold_check(const ExplainCorpus *in) {
    int rc = 0;
    for (int i = 0; in->gold && i < in->n && rc == 0; i++) {
        const Seq *s = &in->src[i], *t = in->tgt ? &in->tgt[i] : NULL;
        /* a greedy target's words are known only once it is decoded: its links are checked then */
        int n_src = explain_side_words(s->ids, s->len, in->sv, in->tokenizer);
        int n_tgt = t ? explain_side_words(t->ids, t->len, in->tv, in->tokenizer) : INT_MAX;
        AlignLink *pairs;
        rc = explain_gold_links(in->gold[i], in->gold_file, in->line[i], n_src, n_tgt, &pairs) < 0 ? -1 : 0;
        free(pairs);
    }
    return rc;
}

int explain_corpus(Model *m, const ExplainCorpus *in, int threads, void (*progress)(int done, int total, void *arg),
                   void *arg, ExplainCorpusResult *out) {
    memset(out, 0, sizeof *out);
    if (gold_check(in) != 0) return -1;
    Job j = {.in = in, .res = xcalloc((size_t)in->n, sizeof(PairResult)), .progress = progress, .arg = arg};
    pthread_mutex_init(&j.lock, NULL);
    double t0 = now_seconds();
    fanout(m, threads < 1 ? 1 : threads, work, &j);
    out->seconds = now_seconds() - t0;
    pthread_mutex_destroy(&j.lock);
    int rc = 0;
    for (int i = 0; i < in->n; i++) {
        PairResult *r = &j.res[i];
        if (r->error && rc == 0) rc = err_set("%s", r->error);
        if (i == 0) {
            faith_init(&out->f, r->f.methods, r->f.n_methods, r->f.layers, r->f.heads, r->f.n_random);
            if (in->gold) out->aer = xcalloc((size_t)r->f.n_methods, sizeof(AlignCounts));
        }
        faith_merge(&out->f, &r->f);
        for (int k = 0; r->aer && k < r->f.n_methods; k++) {
            out->aer[k].hits += r->aer[k].hits;
            out->aer[k].predicted += r->aer[k].predicted;
            out->aer[k].gold += r->aer[k].gold;
            out->aer[k].words += r->aer[k].words;
        }
        faith_free(&r->f), free(r->aer), free(r->error);
    }
    free(j.res);
    return rc;
}

void explain_corpus_free(ExplainCorpusResult *r) {
    if (r->f.methods) faith_free(&r->f);
    free(r->aer);
    memset(r, 0, sizeof *r);
}
