/* headscore: see headscore.h. */
#include "heads/headscore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "decode/fanout.h"
#include "util/mem.h"

/* ---- roles ----------------------------------------------------------------------------- */

void heads_roles_add(HeadRoleCounts *c, int kind, const float *p, int rows, int cols, int stride,
                     const unsigned char *rarest) {
    int self = kind != ATTN_CROSS;
    for (int i = 0; i < rows; i++) {
        const float *row = p + (size_t)i * stride;
        int top = 0;
        double entropy = 0.0;
        for (int j = 0; j < cols; j++) {
            if (row[j] > row[top]) top = j;
            if (row[j] > 0.0f) entropy -= (double)row[j] * log((double)row[j]);
        }
        c->queries++;
        c->top_sum += row[top];
        c->entropy_sum += entropy;
        if (self) {
            if (i >= 1) c->prev_n++, c->prev_hits += top == i - 1;
            c->cur_hits += top == i;
            if (i + 1 < cols) c->next_n++, c->next_hits += top == i + 1;
        }
        if (rarest) c->rare_n++, c->rare_hits += rarest[top] != 0;
        int keys = kind == ATTN_DEC_SELF ? i + 1 : cols; /* the decoder's query i sees keys 0..i */
        if (keys > 1) c->sink_n++, c->sink_hits += top == 0 || (kind != ATTN_DEC_SELF && top == cols - 1);
    }
}

static double share(long long hits, long long n) { return n ? (double)hits / (double)n : NAN; }

void heads_roles_finish(const HeadRoleCounts *c, HeadStats *h) {
    h->confidence = c->queries ? c->top_sum / (double)c->queries : NAN;
    h->entropy = c->queries ? c->entropy_sum / (double)c->queries : NAN;
    int self = h->kind != ATTN_CROSS;
    h->previous = self ? share(c->prev_hits, c->prev_n) : NAN;
    h->current = self ? share(c->cur_hits, c->queries) : NAN;
    h->next = self ? share(c->next_hits, c->next_n) : NAN;
    h->rare = h->kind != ATTN_DEC_SELF ? share(c->rare_hits, c->rare_n) : NAN;
    h->sink = share(c->sink_hits, c->sink_n);
    heads_label(h);
}

/* NAN compares false: a share that could not be counted gives no role */
static int at_least(double v, double threshold) { return v >= threshold; }

const char *heads_role_name(int k) {
    static const char *names[HEAD_ROLE_COUNT] = {"previous",     "current",     "next",     "rare",     "aligns",
                                                 "rel:previous", "rel:current", "rel:next", "rel:rare", "top:previous",
                                                 "top:current",  "top:next",    "top:rare", "sink"};
    return k >= 0 && k < HEAD_ROLE_COUNT ? names[k] : "";
}

static void role_text(HeadStats *h) {
    h->role[0] = '\0';
    size_t at = 0;
    for (int r = 0; r < HEAD_ROLE_COUNT; r++)
        if (h->roles & (1 << r) && at < sizeof h->role)
            at += (size_t)snprintf(h->role + at, sizeof h->role - at, "%s%s", at ? "+" : "", heads_role_name(r));
}

void heads_label(HeadStats *h) {
    h->roles = (h->roles & HEAD_ROLES_RELATIVE) |
               (at_least(h->previous, HEADS_POSITIONAL_SHARE) ? HEAD_ROLE_PREVIOUS : 0) |
               (at_least(h->current, HEADS_POSITIONAL_SHARE) ? HEAD_ROLE_CURRENT : 0) |
               (at_least(h->next, HEADS_POSITIONAL_SHARE) ? HEAD_ROLE_NEXT : 0) |
               (at_least(h->rare, HEADS_RARE_SHARE) ? HEAD_ROLE_RARE : 0) |
               (h->kind == ATTN_CROSS && h->aer <= HEADS_ALIGN_AER ? HEAD_ROLE_ALIGNS : 0) |
               (at_least(h->sink, HEADS_SINK_SHARE) ? HEAD_ROLE_SINK : 0);
    role_text(h);
}

/* the share s (0 previous, 1 current, 2 next, 3 rare) of h */
static double share_of(const HeadStats *h, int s) {
    return s == 0 ? h->previous : s == 1 ? h->current : s == 2 ? h->next : h->rare;
}

void heads_label_relative(HeadStats *stats, int n) {
    for (int i = 0; i < n; i++) stats[i].roles &= ~HEAD_ROLES_RELATIVE;
    for (int kind = 0; kind < ATTN_KINDS; kind++)
        for (int s = 0; s < 4; s++) {
            double sum = 0.0, sq = 0.0, least = 0.0;
            int count = 0, top = -1;
            for (int i = 0; i < n; i++) {
                double v = share_of(&stats[i], s);
                if (stats[i].kind != kind || isnan(v)) continue;
                sum += v, count++;
                if (top < 0 || v > share_of(&stats[top], s)) top = i;
                if (count == 1 || v < least) least = v;
            }
            /* a share every head of the kind has alike (the decoder's next, always 0) names
             * no head: compared exactly, not by a standard deviation of rounding noise */
            if (count == 0 || share_of(&stats[top], s) == least) continue;
            double mean = sum / count;
            for (int i = 0; i < n; i++) {
                double v = share_of(&stats[i], s);
                if (stats[i].kind == kind && !isnan(v)) sq += (v - mean) * (v - mean);
            }
            double bar = mean + HEADS_RELATIVE_SDS * sqrt(sq / count);
            for (int i = 0; i < n; i++) {
                double v = share_of(&stats[i], s);
                if (stats[i].kind == kind && v >= bar && v >= HEADS_RELATIVE_MIN_SHARE)
                    stats[i].roles |= HEAD_ROLE_REL_PREVIOUS << s;
            }
            if (share_of(&stats[top], s) > 0.0) stats[top].roles |= HEAD_ROLE_TOP_PREVIOUS << s;
        }
    for (int i = 0; i < n; i++) role_text(&stats[i]);
}

/* ---- Spearman ----------------------------------------------------------------------------- */

static const double *rank_keys;
static int by_key(const void *a, const void *b) {
    double x = rank_keys[*(const int *)a], y = rank_keys[*(const int *)b];
    return x < y ? -1 : x > y;
}

/* The ranks (1..n) of v into r; tied values share the mean of the ranks they span. */
static void ranks(const double *v, int n, double *r) {
    int *order = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) order[i] = i;
    rank_keys = v; /* qsort has no context argument in C11; single-threaded use */
    qsort(order, (size_t)n, sizeof(int), by_key);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && v[order[j + 1]] == v[order[i]]) j++;
        double mean = (i + j) / 2.0 + 1.0;
        for (int k = i; k <= j; k++) r[order[k]] = mean;
        i = j + 1;
    }
    free(order);
}

double heads_spearman(const double *a, const double *b, int n) {
    if (n < 2) return NAN;
    double *ra = xmalloc(sizeof(double) * (size_t)n), *rb = xmalloc(sizeof(double) * (size_t)n);
    ranks(a, n, ra), ranks(b, n, rb);
    double ma = 0.0, mb = 0.0, sab = 0.0, saa = 0.0, sbb = 0.0;
    for (int i = 0; i < n; i++) ma += ra[i] / n, mb += rb[i] / n;
    for (int i = 0; i < n; i++) {
        sab += (ra[i] - ma) * (rb[i] - mb);
        saa += (ra[i] - ma) * (ra[i] - ma);
        sbb += (rb[i] - mb) * (rb[i] - mb);
    }
    free(ra), free(rb);
    return saa > 0.0 && sbb > 0.0 ? sab / sqrt(saa * sbb) : NAN;
}

/* ---- frequencies -------------------------------------------------------------------------- */

long long *heads_source_frequencies(char **lines, int n, int tokenizer, const Vocab *v) {
    long long *freq = xcalloc((size_t)v->size, sizeof(long long));
    int cap = 0, *ids = NULL;
    for (int i = 0; i < n; i++) {
        int need = (int)strlen(lines[i]) + 2; /* a token is at least one byte */
        if (need > cap) ids = xrealloc(ids, sizeof(int) * (size_t)(cap = need));
        int len = encode_line(lines[i], tokenizer, v, ids, cap);
        for (int t = 0; t < len; t++)
            if (ids[t] >= 0 && ids[t] < v->size) freq[ids[t]]++;
    }
    free(ids);
    return freq;
}

/* rarest[j] = 1 for the source positions (EOS excluded) holding the least frequent
 * token; an <unk> counts 0. */
static void rarest_keys(const long long *freq, const int *ids, int len, int cols, unsigned char *rarest) {
    long long least = -1;
    for (int j = 0; j < len; j++) {
        long long f = ids[j] == VOCAB_UNK ? 0 : freq[ids[j]];
        if (least < 0 || f < least) least = f;
    }
    for (int j = 0; j < cols; j++) rarest[j] = j < len && (ids[j] == VOCAB_UNK ? 0 : freq[ids[j]]) == least;
}

/* ---- the passes ------------------------------------------------------------------------------ */

/* Padded source plus target tokens per batch: enough rows for OpenBLAS's threads to work
 * on, few enough that a batch's activations stay in cache-friendly sizes. */
enum { SCORE_BATCH_TOKENS = 2048 };

/* The set sorted by length and cut into batches, framed once; every pass runs them in
 * this order, so all sums add the same terms in the same order. */
typedef struct {
    ModelBatch b;
    int *mem;   /* s, tin, tout, slen, tlen in one block */
    int *which; /* (B) each row's index in the set */
} ScoreBatch;

static int layers_of(const Model *m, int kind) {
    return kind == ATTN_ENC_SELF ? m->cfg.encoder_layers : m->cfg.decoder_layers;
}

static const HeadSet *sort_set; /* qsort has no context argument in C11; single-threaded use */
static int by_lengths(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    int si = sort_set->src[i].len, sj = sort_set->src[j].len, ti = sort_set->ref[i].len, tj = sort_set->ref[j].len;
    return si != sj ? (si > sj) - (si < sj) : ti != tj ? (ti > tj) - (ti < tj) : (i > j) - (i < j);
}

static ScoreBatch frame_batch(const HeadSet *set, const int *which, int B) {
    int S = 1, T = 1;
    for (int i = 0; i < B; i++) {
        if (set->src[which[i]].len + 1 > S) S = set->src[which[i]].len + 1;
        if (set->ref[which[i]].len + 1 > T) T = set->ref[which[i]].len + 1;
    }
    ScoreBatch sb;
    sb.mem = xmalloc(sizeof(int) * ((size_t)B * (S + 2 * T) + 2 * (size_t)B));
    sb.which = xmalloc(sizeof(int) * (size_t)B);
    memcpy(sb.which, which, sizeof(int) * (size_t)B);
    int *s = sb.mem, *tin = s + (size_t)B * S, *tout = tin + (size_t)B * T, *slen = tout + (size_t)B * T,
        *tlen = slen + B;
    for (int i = 0; i < B; i++) {
        const Seq *src = &set->src[which[i]], *ref = &set->ref[which[i]];
        slen[i] = batch_frame_source(src->ids, src->len, s + (size_t)i * S, S);
        tlen[i] = batch_frame_target(ref->ids, ref->len, tin + (size_t)i * T, tout + (size_t)i * T, T);
    }
    sb.b = (ModelBatch){B, S, T, s, slen, tin, tout, tlen, 0};
    return sb;
}

/* The batches (*count of them, malloc'd); *max_rows: the largest batch's rows. */
static ScoreBatch *make_batches(const HeadSet *set, int *count, int *max_rows) {
    int *order = xmalloc(sizeof(int) * (size_t)(set->n > 0 ? set->n : 1));
    for (int i = 0; i < set->n; i++) order[i] = i;
    sort_set = set;
    qsort(order, (size_t)set->n, sizeof(int), by_lengths);
    ScoreBatch *batches = xmalloc(sizeof(ScoreBatch) * (size_t)(set->n > 0 ? set->n : 1));
    *count = *max_rows = 0;
    for (int first = 0; first < set->n;) {
        int B = 0, S = 1, T = 1;
        while (first + B < set->n) {
            const int at = order[first + B];
            int s = set->src[at].len + 1 > S ? set->src[at].len + 1 : S;
            int t = set->ref[at].len + 1 > T ? set->ref[at].len + 1 : T;
            if (B > 0 && (B + 1) * (s + t) > SCORE_BATCH_TOKENS) break;
            S = s, T = t, B++;
        }
        batches[(*count)++] = frame_batch(set, order + first, B);
        if (B > *max_rows) *max_rows = B;
        first += B;
    }
    free(order);
    return batches;
}

/* The roles of every head's maps of every row of the batch the last forward ran. */
static void add_roles(const Model *m, const HeadSet *set, const ScoreBatch *sb, const long long *freq,
                      unsigned char *rarest, HeadRoleCounts *rc) {
    const ModelBatch *b = &sb->b;
    int H = m->cfg.heads;
    for (int r = 0; r < b->B; r++) {
        const Seq *src = &set->src[sb->which[r]];
        int S = b->src_len[r], T = b->tgt_len[r];
        if (freq) rarest_keys(freq, src->ids, src->len, S, rarest);
        for (int k = 0; k < ATTN_KINDS; k++) {
            int rows = k == ATTN_ENC_SELF ? S : T, cols = k == ATTN_DEC_SELF ? T : S;
            int Tq = k == ATTN_ENC_SELF ? b->S : b->T, Tk = k == ATTN_DEC_SELF ? b->T : b->S;
            for (int l = 0; l < layers_of(m, k); l++) {
                const float *p = model_attention_acts(m, (AttnKind)k, l)->p; /* (B, H, Tq, Tk) */
                for (int h = 0; h < H; h++)
                    heads_roles_add(&rc[model_head_index(m, (AttnKind)k, l, h)], k, p + ((size_t)r * H + h) * Tq * Tk,
                                    rows, cols, Tk, freq && k != ATTN_DEC_SELF ? rarest : NULL);
            }
        }
    }
}

/* One batch, every gate at 1: the roles, and each row's |dL/dxi| into sum_abs (the loss
 * summed over the sentence's tokens, each row's gradient its own sentence's). */
static void gradient_pass(Model *m, const HeadSet *set, const ScoreBatch *sb, const long long *freq,
                          unsigned char *rarest, HeadRoleCounts *rc, float *by_row, double *sum_abs) {
    int nh = model_head_count(m);
    memset(by_row, 0, sizeof(float) * (size_t)sb->b.B * nh);
    model_zero_grad(m);
    model_forward(m, &sb->b, 0, 0, 0);
    add_roles(m, set, sb, freq, rarest, rc);
    m->loss_tokens = 1; /* the gradient of the sum over the tokens, not of the mean */
    model_backward(m, &sb->b);
    for (int r = 0; r < sb->b.B; r++)
        for (int i = 0; i < nh; i++) sum_abs[i] += fabs((double)by_row[(size_t)r * nh + i]);
}

/* One batch's NLL sums: none masked into *base (tokens into *tokens), then each head alone
 * masked into nll[head]. A decoder head leaves the encoder as it was, so its passes run the
 * decoder alone over the unmasked encoder output; an encoder head's run the whole model. */
static void masking_passes(Model *m, const ScoreBatch *sb, float *gates, double *base, long long *tokens, double *nll) {
    int nh = model_head_count(m), first_decoder = model_head_index(m, ATTN_DEC_SELF, 0, 0);
    model_set_head_gates(m, gates);
    model_encode(m, &sb->b);
    model_decode_loss(m, &sb->b);
    *base += m->nll_sum, *tokens += m->n_tokens;
    for (int i = first_decoder; i < nh; i++) {
        gates[i] = 0.0f;
        model_set_head_gates(m, gates);
        model_decode_loss(m, &sb->b);
        nll[i] += m->nll_sum;
        gates[i] = 1.0f;
    }
    for (int i = 0; i < first_decoder; i++) {
        gates[i] = 0.0f;
        model_set_head_gates(m, gates);
        model_forward(m, &sb->b, 0, 0, 0);
        nll[i] += m->nll_sum;
        gates[i] = 1.0f;
    }
}

/* One worker's share: batches w, w + n, w + 2n, ... through both phases, into sums of its
 * own (added up in worker order afterwards, so a given thread count gives the same figures
 * every run). */
typedef struct {
    HeadRoleCounts *rc;
    double *sum_abs, *nll, base;
    long long tokens;
} ScoreSums;

typedef struct {
    const HeadSet *set;
    const ScoreBatch *batches;
    int count, n, max_rows;
    size_t arena;
    const long long *freq;
    ScoreSums *sums; /* (n) */
} ScoreJob;

static void score_worker(Model *m, int w, void *arg) {
    ScoreJob *job = arg;
    ScoreSums *sum = &job->sums[w];
    int nh = model_head_count(m);
    float *gates = xmalloc(sizeof(float) * (size_t)nh);
    float *by_row = xmalloc(sizeof(float) * (size_t)(job->max_rows > 0 ? job->max_rows : 1) * nh);
    unsigned char *rarest = xmalloc((size_t)m->cfg.max_positions + 1);
    model_reserve(m, job->arena);
    for (int i = 0; i < nh; i++) gates[i] = 1.0f;
    model_set_head_gates(m, gates);
    model_head_gate_grads_by_row(m, by_row, job->max_rows);
    for (int i = w; i < job->count; i += job->n)
        gradient_pass(m, job->set, &job->batches[i], job->freq, rarest, sum->rc, by_row, sum->sum_abs);
    model_zero_grad(m);
    model_head_gate_grads_by_row(m, NULL, 0);
    for (int i = w; i < job->count; i += job->n)
        masking_passes(m, &job->batches[i], gates, &sum->base, &sum->tokens, sum->nll);
    model_set_head_gates(m, NULL);
    free(gates), free(by_row), free(rarest);
}

static void add_counts(HeadRoleCounts *to, const HeadRoleCounts *c) {
    to->queries += c->queries, to->top_sum += c->top_sum, to->entropy_sum += c->entropy_sum;
    to->prev_n += c->prev_n, to->prev_hits += c->prev_hits, to->cur_hits += c->cur_hits;
    to->next_n += c->next_n, to->next_hits += c->next_hits, to->rare_n += c->rare_n, to->rare_hits += c->rare_hits;
    to->sink_n += c->sink_n, to->sink_hits += c->sink_hits;
}

void heads_score(Model *m, const HeadSet *set, const long long *freq, int threads, HeadStats *stats, double *base_nll) {
    int nh = model_head_count(m), H = m->cfg.heads, count = 0, max_rows = 0;
    float smoothing = m->cfg.label_smoothing;
    m->cfg.label_smoothing = 0.0f; /* before the replicas copy the config */
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < layers_of(m, k); l++)
            for (int h = 0; h < H; h++) {
                int at = model_head_index(m, (AttnKind)k, l, h);
                memset(&stats[at], 0, sizeof stats[at]);
                stats[at].kind = k, stats[at].layer = l, stats[at].head = h, stats[at].index = at;
                stats[at].aer = NAN;
            }
    ScoreBatch *batches = make_batches(set, &count, &max_rows);
    size_t arena = 0;
    for (int i = 0; i < count; i++) {
        size_t need = model_arena_floats(m, batches[i].b.B, batches[i].b.S, batches[i].b.T);
        if (need > arena) arena = need;
    }
    int n = threads < 1 ? 1 : threads > count ? (count > 0 ? count : 1) : threads;
    ScoreJob job = {set, batches, count, n, max_rows, arena, freq, xcalloc((size_t)n, sizeof(ScoreSums))};
    for (int w = 0; w < n; w++) {
        job.sums[w].rc = xcalloc((size_t)nh, sizeof(HeadRoleCounts));
        job.sums[w].sum_abs = xcalloc((size_t)nh, sizeof(double));
        job.sums[w].nll = xcalloc((size_t)nh, sizeof(double));
    }
    fanout(m, n, score_worker, &job);
    HeadRoleCounts *rc = xcalloc((size_t)nh, sizeof(HeadRoleCounts));
    double *sum_abs = xcalloc((size_t)nh, sizeof(double)), *nll = xcalloc((size_t)nh, sizeof(double)), base = 0.0;
    long long tokens = 0;
    for (int w = 0; w < n; w++) {
        ScoreSums *sum = &job.sums[w];
        for (int i = 0; i < nh; i++)
            add_counts(&rc[i], &sum->rc[i]), sum_abs[i] += sum->sum_abs[i], nll[i] += sum->nll[i];
        base += sum->base, tokens += sum->tokens;
        free(sum->rc), free(sum->sum_abs), free(sum->nll);
    }
    free(job.sums);
    for (int i = 0; i < nh; i++) {
        stats[i].importance_raw = set->n ? sum_abs[i] / set->n : 0.0;
        stats[i].delta_nll = tokens ? (nll[i] - base) / (double)tokens : 0.0;
        heads_roles_finish(&rc[i], &stats[i]);
    }
    /* Michel et al.: each layer's scores over their L2 norm */
    for (int first = 0; first < nh; first += H) {
        double norm = 0.0;
        for (int h = 0; h < H; h++) norm += stats[first + h].importance_raw * stats[first + h].importance_raw;
        norm = sqrt(norm);
        for (int h = 0; h < H; h++)
            stats[first + h].importance = norm > 0.0 ? stats[first + h].importance_raw / norm : 0.0;
    }
    heads_label_relative(stats, nh);
    if (base_nll) *base_nll = tokens ? base / (double)tokens : 0.0;
    m->cfg.label_smoothing = smoothing;
    for (int i = 0; i < count; i++) free(batches[i].mem), free(batches[i].which);
    free(batches), free(rc), free(sum_abs), free(nll);
}

int heads_aer(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *pairs, int n,
              HeadStats *stats) {
    int L = m->cfg.decoder_layers, H = m->cfg.heads;
    AlignPick *picks = xmalloc(sizeof(AlignPick) * (size_t)(L * H > 0 ? L * H : 1));
    AlignCounts *counts = xcalloc((size_t)(L * H > 0 ? L * H : 1), sizeof(AlignCounts));
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) picks[l * H + h] = (AlignPick){l, h};
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = aligner_score(m, tokenizer, sv, tv, &pairs[i], picks, L * H, counts);
    for (int l = 0; l < L && rc == 0; l++)
        for (int h = 0; h < H; h++) {
            HeadStats *st = &stats[model_head_index(m, ATTN_CROSS, l, h)];
            st->aer = align_aer(&counts[l * H + h]);
            heads_label(st);
        }
    free(picks), free(counts);
    return rc;
}
