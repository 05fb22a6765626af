/* beam: beam search over the model's incremental step, batched over sentences.
 *
 * Each sentence keeps K live hypotheses, a block of K rows of one DecodeState (rows g*K ..
 * g*K+K-1 for sentence g until finished sentences' blocks leave the step). At each
 * step every live row's next-token log-probabilities extend its score; of the best 2K
 * extensions of a sentence, an EOS among the first K finishes a hypothesis (scored
 * log P / length^alpha, the length counting the EOS: fairseq's rule), and the best K
 * others become the next live hypotheses (the cache rows are reordered to follow them).
 * A sentence is done when K hypotheses have finished, or at its length limit, where the
 * live ones finish as they are. Ties go to the earlier beam, then EOS, then the ordinary
 * tokens in id order, then UNK: the order greedy search uses, so beam 1 is greedy. */
#include "decode/beam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "decode/search.h"
#include "util/mem.h"

typedef struct {
    int *ids, len;
    double score; /* normalised */
    int order;    /* when it finished: ties go to the earlier */
} Finished;

typedef struct {
    Finished *fin; /* up to K */
    int n_fin, done, max_len;
} Sentence;

/* Tie order within one beam: EOS, ordinary tokens by id, UNK last. */
static int token_rank(int v, int V) { return v == VOCAB_EOS ? 0 : v == VOCAB_UNK ? V : v; }

/* a before b in the search's order */
static int cand_better(const BeamCand *a, const BeamCand *b) {
    if (a->score != b->score) return a->score > b->score;
    if (a->beam != b->beam) return a->beam < b->beam;
    return a->rank < b->rank;
}

/* Inserts c into top[0..*n) (best first), keeping at most cap. */
static void top_insert(BeamCand *top, int *n, int cap, BeamCand c) {
    if (*n == cap && !cand_better(&c, &top[cap - 1])) return;
    int i = *n < cap ? (*n)++ : cap - 1;
    while (i > 0 && cand_better(&c, &top[i - 1])) top[i] = top[i - 1], i--;
    top[i] = c;
}

/* Whether token v would repeat an n-gram of the hypothesis hist[0..len). */
static int repeats_ngram(const int *hist, int len, int n, int v) {
    if (n <= 0 || len < n - 1) return 0;
    const int *tail = hist + len - (n - 1);
    for (int j = 0; j + n - 1 < len; j++)
        if (hist[j + n - 1] == v && memcmp(hist + j, tail, sizeof(int) * (size_t)(n - 1)) == 0) return 1;
    return 0;
}

static void finish(Sentence *s, const int *hist, int len, double logp, int with_eos, double alpha) {
    Finished *f = &s->fin[s->n_fin];
    f->ids = xmalloc(sizeof(int) * (size_t)(len ? len : 1));
    memcpy(f->ids, hist, sizeof(int) * (size_t)len);
    f->len = len;
    f->score = logp / pow(len + with_eos, alpha);
    f->order = s->n_fin++;
}

int beam_best_extensions(const float *logits, const double *score, const int *hist, int t, int j, int K, int V,
                         int no_repeat, BeamCand *top) {
    int n = 0;
    for (int k = 0; k < K; k++) {
        int row = j * K + k;
        if (score[row] == -INFINITY) continue;
        const float *z = logits + (size_t)row * V;
        double base = score[row] - search_log_normaliser(z, V);
        const int *h = hist + (size_t)row * (t + 1);
        /* Blocks of 16 tokens: once 2K candidates are held, a block whose best score is
         * below the last one's holds none that could enter (not even by a tie), so its
         * tokens are not looked at one by one. The same candidates as a token-by-token
         * scan; most of an 8,000-word row is passed over at the cost of a maximum. */
        enum { BLOCK = 16 };
        for (int v0 = VOCAB_EOS; v0 < V; v0 += BLOCK) {
            int v1 = V - v0 < BLOCK ? V : v0 + BLOCK;
            if (n == 2 * K) {
                float mx = z[v0];
                for (int v = v0 + 1; v < v1; v++) mx = z[v] > mx ? z[v] : mx;
                if (base + mx < top[n - 1].score) continue;
            }
            for (int v = v0; v < v1; v++) {
                BeamCand c = {base + z[v], k, v, token_rank(v, V)};
                if (n == 2 * K && !cand_better(&c, &top[n - 1])) continue;
                if (v != VOCAB_EOS && repeats_ngram(h, t, no_repeat, v)) continue;
                top_insert(top, &n, 2 * K, c);
            }
        }
    }
    return n;
}

/* Adds a node to the trace; returns its number. */
static int trace_add(BeamTrace *tr, int step, int parent, int token, int fate, double logp) {
    if (tr->n == tr->cap)
        tr->cap = tr->cap ? 2 * tr->cap : 64, tr->nodes = xrealloc(tr->nodes, sizeof(BeamNode) * tr->cap);
    tr->nodes[tr->n] = (BeamNode){step, parent, token, fate, logp};
    return tr->n++;
}

void beam_trace_free(BeamTrace *t) {
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

/* One step's choice for sentence s, in block j: finishes hypotheses, picks the next live
 * rows (from[], tok[], new_score[]), and says whether the sentence is done. With a trace,
 * every candidate becomes a node (node[row]: the node of each live row, old and new). */
static void choose(Sentence *s, const BeamCand *top, int n, const int *hist, int t, int j, int K,
                   const DecodeOptions *o, int *from, int *tok, double *new_score, const int *node, int *new_node) {
    int live = 0, i = 0;
    for (; i < n && live < K && s->n_fin < K; i++) {
        const BeamCand *c = &top[i];
        const int *h = hist + (size_t)(j * K + c->beam) * (t + 1);
        int parent = node ? node[j * K + c->beam] : -1;
        if (c->token == VOCAB_EOS) {
            if (i < K) finish(s, h, t, c->score, 1, o->length_penalty);
            if (node) trace_add(o->trace, t, parent, c->token, i < K ? BEAM_FINISHED : BEAM_DROPPED, c->score);
            continue;
        }
        int row = j * K + live++;
        from[row] = j * K + c->beam, tok[row] = c->token, new_score[row] = c->score;
        if (node) new_node[row] = trace_add(o->trace, t, parent, c->token, BEAM_KEPT, c->score);
    }
    for (; node && i < n; i++)
        trace_add(o->trace, t, node[j * K + top[i].beam], top[i].token, BEAM_DROPPED, top[i].score);
    for (int k = live; k < K; k++)
        from[j * K + k] = j * K, tok[j * K + k] = VOCAB_PAD, new_score[j * K + k] = -INFINITY;
    if (s->n_fin >= K || live == 0) s->done = 1;
}

static void sentences_free(Sentence *s, int n) {
    for (int g = 0; g < n; g++) {
        for (int k = 0; k < s[g].n_fin; k++) free(s[g].fin[k].ids);
        free(s[g].fin);
    }
    free(s);
}

static int by_score(const void *a, const void *b) {
    const Finished *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return x->order - y->order;
}

void beam_search_group(Model *m, DecodeState *st, const Seq *const *src, int G, const DecodeOptions *o, Seq *const *out,
                       double *const *scores) {
    int K = o->beam, B = G * K, V = m->cfg.tgt_vocab, Tmax = 1, one = 1;
    Sentence *sent = xcalloc((size_t)G, sizeof(Sentence));
    for (int g = 0; g < G; g++) {
        sent[g].max_len = decode_max_len(m, o, src[g]->len);
        sent[g].fin = xmalloc(sizeof(Finished) * (size_t)(2 * K));
        if (sent[g].max_len + 1 > Tmax) Tmax = sent[g].max_len + 1;
    }
    int *src_ids, *src_len, S;
    search_source_batch(src, G, &src_ids, &src_len, &S);
    ModelBatch b = {G, S, 1, src_ids, src_len, NULL, NULL, &one, 0};
    model_step_begin(m, st, &b, K);
    /* hist: row r's tokens so far; rewritten each step with stride t+1 */
    int *hist = xcalloc((size_t)B * Tmax, sizeof(int)), *next_hist = xcalloc((size_t)B * Tmax, sizeof(int));
    int *tok = xmalloc(sizeof(int) * (size_t)B), *from = xmalloc(sizeof(int) * (size_t)B);
    double *score = xmalloc(sizeof(double) * (size_t)B), *new_score = xmalloc(sizeof(double) * (size_t)B);
    BeamCand *top = xmalloc(sizeof(BeamCand) * (size_t)(2 * K));
    /* the tree of a single sentence: each live row's node, before and after a step */
    int traced = o->trace && G == 1;
    int *node = traced ? xmalloc(sizeof(int) * (size_t)B) : NULL,
        *new_node = traced ? xmalloc(sizeof(int) * (size_t)B) : NULL;
    for (int r = 0; traced && r < B; r++) node[r] = -1;
    for (int r = 0; r < B; r++) tok[r] = VOCAB_BOS, score[r] = r % K ? -INFINITY : 0.0; /* one live row to start */
    /* block j of K rows is sentence blk[j]; finished sentences' blocks leave the step once an
     * eighth of the blocks are done (as in greedy search) */
    int *blk = xmalloc(sizeof(int) * (size_t)G), *keep = xmalloc(sizeof(int) * (size_t)B);
    for (int g = 0; g < G; g++) blk[g] = g;
    int remaining = G, blocks = G, idle = 0;
    for (int t = 0; t < Tmax - 1 && remaining > 0; t++) {
        const float *logits = model_step(m, st, tok);
        /* the first position is fed once per sentence (its K hypotheses start alike) */
        if (t == 0) logits = model_step_widen(st, m);
        for (int j = 0; j < blocks; j++) {
            Sentence *s = &sent[blk[j]];
            if (s->done) {
                for (int k = 0; k < K; k++)
                    from[j * K + k] = j * K + k, tok[j * K + k] = VOCAB_PAD, new_score[j * K + k] = -INFINITY;
                continue;
            }
            int n = beam_best_extensions(logits, score, hist, t, j, K, V, o->no_repeat_ngram, top);
            choose(s, top, n, hist, t, j, K, o, from, tok, new_score, node, new_node);
            if (!s->done && t + 1 >= s->max_len) {
                /* the length limit: the live hypotheses finish as they are */
                for (int k = 0; k < K && s->n_fin < 2 * K; k++) {
                    int r = j * K + k;
                    if (new_score[r] == -INFINITY) continue;
                    int *h = next_hist + (size_t)r * (t + 2);
                    memcpy(h, hist + (size_t)from[r] * (t + 1), sizeof(int) * (size_t)t);
                    h[t] = tok[r];
                    finish(s, h, t + 1, new_score[r], 0, o->length_penalty);
                    if (traced) o->trace->nodes[new_node[r]].fate = BEAM_AT_LIMIT;
                }
                s->done = 1;
            }
            remaining -= s->done, idle += s->done;
        }
        int rows = blocks * K;
        for (int r = 0; r < rows; r++) {
            memcpy(next_hist + (size_t)r * (t + 2), hist + (size_t)from[r] * (t + 1), sizeof(int) * (size_t)t);
            next_hist[(size_t)r * (t + 2) + t] = tok[r];
            score[r] = new_score[r];
        }
        int *swap = hist;
        hist = next_hist, next_hist = swap;
        if (traced) swap = node, node = new_node, new_node = swap;
        model_step_reorder(st, m, from);
        for (int r = 0; r < rows; r++)
            if (tok[r] == VOCAB_PAD) tok[r] = VOCAB_EOS; /* a dead row still feeds some token */
        if (remaining > 0 && idle > 0 && idle * 8 >= blocks) {
            int n = 0;
            for (int j = 0; j < blocks; j++)
                for (int k = 0; k < K && !sent[blk[j]].done; k++) keep[n++] = j * K + k;
            model_step_keep(st, m, keep, n);
            for (int i = 0; i < n; i++) { /* keep ascends: row keep[i] is read before it is written */
                int r = keep[i];
                if (i % K == 0) blk[i / K] = blk[r / K];
                memmove(hist + (size_t)i * (t + 2), hist + (size_t)r * (t + 2), sizeof(int) * (size_t)(t + 1));
                score[i] = score[r], tok[i] = tok[r];
            }
            blocks = n / K, idle = 0;
        }
    }
    for (int g = 0; g < G; g++) {
        Sentence *s = &sent[g];
        qsort(s->fin, (size_t)s->n_fin, sizeof(Finished), by_score);
        for (int k = 0; k < o->nbest; k++) {
            Seq *dst = out[(size_t)g * o->nbest + k];
            if (k < s->n_fin) {
                *dst = (Seq){s->fin[k].ids, s->fin[k].len};
                s->fin[k].ids = NULL;
            } else {
                *dst = (Seq){xmalloc(sizeof(int)), 0};
            }
            if (scores) *scores[(size_t)g * o->nbest + k] = k < s->n_fin ? s->fin[k].score : -INFINITY;
        }
    }
    sentences_free(sent, G);
    free(src_ids), free(src_len), free(hist), free(next_hist), free(tok), free(from), free(score), free(new_score),
        free(top), free(blk), free(keep), free(node), free(new_node);
}
