/* headscore: what each attention head is worth and what it does, on a held-out set
 * (`qkv heads`).
 *
 * Importance, two ways, per head (nn/model.h's head gates, xi_h, 1 by default):
 *   - Michel et al. 2019's gradient score: I_h = mean over sentences of |dL/dxi_h| at
 *     xi = 1, L one sentence's reference NLL summed over its tokens (no label smoothing),
 *     each sentence's own gradient (model_head_gate_grads_by_row: batched passes, exact
 *     per-sentence values, not a batch's sum); then
 *     normalised per layer (a kind's layer: its H heads) by the L2 norm of that layer's
 *     scores, as in the paper;
 *   - dNLL: the reference's per-token NLL over the whole set with that head alone masked
 *     (xi_h = 0, every other 1), minus the same with none masked. Exact, one pass a head
 *     (a decoder head's runs the decoder alone: the encoder's output does not change).
 * Roles, from the probabilities of the same teacher-forced passes (Voita et al. 2019):
 * confidence (mean over queries of the largest weight), entropy (mean over queries, in
 * nats), the positional shares of the two self-attention kinds, the rare-token share of
 * the kinds whose keys are source tokens, the sink share (Clark et al. 2019), and with gold
 * links a cross head's AER. Three rules turn them into roles, each role named apart:
 *   - "voita": Voita et al.'s absolute thresholds below (a share at or past its threshold);
 *     they came from a model ten times larger than a small run's;
 *   - "relative": a share far out in the distribution of that share over the heads of the
 *     same kind in this model (heads_label_relative), and the kind's top head for it;
 *   - "clark": a sink, a head whose top key is one fixed key for most queries.
 *
 * Not here: the pruning curve (headcurve.h), the files (headreport.h), reading the user's
 * files and printing (cmd/heads.c). */
#ifndef QKV_HEADSCORE_H
#define QKV_HEADSCORE_H

#include "attention/align_model.h"
#include "data/corpus.h"
#include "data/vocab.h"
#include "nn/model.h"

/* A positional head ("previous", "current", "next"): its largest weight falls on that
 * position for at least this share of its queries (Voita et al.'s 0.8). */
#define HEADS_POSITIONAL_SHARE 0.8
/* A "rare" head: its largest weight falls on the sentence's least frequent source token
 * (training-corpus frequency) for at least this share of its queries. */
#define HEADS_RARE_SHARE 0.5
/* An "aligns" head (cross-attention, with gold links): AER at most this; one link per
 * target word, so with one gold link per word this is at least half the links right. */
#define HEADS_ALIGN_AER 0.5
/* A relative role ("rel:previous", ...): the head's share is at least its kind's mean plus
 * this many standard deviations (population, over the kind's heads that have the share)
 * and at least HEADS_RELATIVE_MIN_SHARE. Two deviations: with a kind's heads as the
 * sample, one head in about 40 of a normal spread passes by chance; the floor keeps a
 * kind of near-zero shares (all heads elsewhere) from naming a head that attends there
 * for a quarter of its queries. A head can stand at most (n - 1) / sqrt(n) deviations
 * above the mean of n: a kind of fewer than 6 heads has no relative head by this rule.
 * The kind's largest share, when above 0 and not every head's alike, is "top:previous"
 * etc. (the first such head by number): the head to look at first, whatever its size. */
#define HEADS_RELATIVE_SDS 2.0
#define HEADS_RELATIVE_MIN_SHARE 0.3
/* A "sink" (a no-op head, Clark et al. 2019): its largest weight falls on the sequence's
 * first key (the decoder's BOS, the encoder's first source token) or on the source's EOS
 * (encoder self and cross: the last key) for at least this share of its queries. Clark et
 * al. report BERT heads with over half their attention on [SEP]; 0.6 asks for a clear
 * majority of the queries, not of the weight. */
#define HEADS_SINK_SHARE 0.6

/* The held-out set: n pairs of ids without BOS/EOS, each side 1..cfg.max_positions - 2
 * tokens (borrowed). */
typedef struct {
    int n;
    const Seq *src, *ref;
} HeadSet;

/* One head's role counts, added up over queries and sentences (heads_roles_add). */
typedef struct {
    long long queries;           /* every query */
    double top_sum, entropy_sum; /* sums over queries of the largest weight and of the entropy */
    long long prev_n, prev_hits; /* queries that have an i-1; those whose top key is i-1 */
    long long cur_hits;          /* queries whose top key is i (every query has an i) */
    long long next_n, next_hits; /* queries that have an i+1 key; those whose top key is it */
    long long rare_n, rare_hits; /* queries of sentences with frequencies; top on the rarest */
    long long sink_n, sink_hits; /* queries with more than one key; top on the first key or EOS */
} HeadRoleCounts;

/* Role flags, in the order a role string lists them: Voita's (absolute thresholds), the
 * relative ones (rel:), the kind's top heads (top:, also of the relative rule), the sink. */
enum {
    HEAD_ROLE_PREVIOUS = 1 << 0,
    HEAD_ROLE_CURRENT = 1 << 1,
    HEAD_ROLE_NEXT = 1 << 2,
    HEAD_ROLE_RARE = 1 << 3,
    HEAD_ROLE_ALIGNS = 1 << 4,
    HEAD_ROLE_REL_PREVIOUS = 1 << 5,
    HEAD_ROLE_REL_CURRENT = 1 << 6,
    HEAD_ROLE_REL_NEXT = 1 << 7,
    HEAD_ROLE_REL_RARE = 1 << 8,
    HEAD_ROLE_TOP_PREVIOUS = 1 << 9,
    HEAD_ROLE_TOP_CURRENT = 1 << 10,
    HEAD_ROLE_TOP_NEXT = 1 << 11,
    HEAD_ROLE_TOP_RARE = 1 << 12,
    HEAD_ROLE_SINK = 1 << 13,
};
#define HEAD_ROLE_COUNT 14
#define HEAD_ROLES_VOITA 0x1f      /* previous .. aligns */
#define HEAD_ROLES_RELATIVE 0x1fe0 /* rel:* and top:* */
#define HEAD_ROLES_CLARK HEAD_ROLE_SINK

/* Role k's name (flag 1 << k): "previous", ..., "rel:previous", ..., "top:rare", "sink". */
const char *heads_role_name(int k);

typedef struct {
    int kind, layer, head;          /* AttnKind, 0-based layer within the kind, head */
    int index;                      /* model_head_index */
    double importance_raw;          /* mean over sentences of |dL/dxi_h| (L summed over the sentence's tokens) */
    double importance;              /* importance_raw over the L2 norm of its layer's; 0 when that norm is 0 */
    double delta_nll;               /* per-token reference NLL with the head masked, minus unmasked */
    double confidence;              /* mean over queries of the largest weight */
    double entropy;                 /* mean over queries of the weights' entropy, nats */
    double previous, current, next; /* positional shares; NAN for cross-attention */
    double rare;                    /* rare-token share; NAN for decoder self-attention or without frequencies */
    double sink;                    /* share of queries whose top key is the first key or the source's EOS */
    double aer;                     /* cross-attention with gold links; else NAN */
    int roles;                      /* HEAD_ROLE_* flags */
    char role[192];                 /* the role names joined by '+' ("previous+rel:previous"); "" for none */
} HeadStats;

/* Adds one head's map of one sentence to c. p: rows x cols probabilities, rows stride
 * floats apart (queries x keys;
 * for the self-attention kinds rows == cols, key i being query i's own position; the
 * decoder's keys past i have weight 0). rarest: NULL, or (cols) 1 for each key that holds
 * the sentence's least frequent source token, for kinds whose keys are source tokens. The
 * top key of a query is its first largest weight. A sink's keys are key 0 and, where the
 * keys are source tokens (encoder self, cross), key cols - 1 (EOS); a query with one key
 * only (the decoder's first, on BOS) has no choice and is not counted for it. */
void heads_roles_add(HeadRoleCounts *c, int kind, const float *p, int rows, int cols, int stride,
                     const unsigned char *rarest);
/* Shares, confidence and entropy from the counts into h (kind from h->kind), then its
 * label (heads_label). A share with no queries to count is NAN. */
void heads_roles_finish(const HeadRoleCounts *c, HeadStats *h);
/* h's Voita roles and sink from its shares and AER against the thresholds above, its
 * relative roles kept as they were; h->role rebuilt. */
void heads_label(HeadStats *h);
/* The relative roles (rel:*, top:*) of the n heads from the distribution of each share
 * over the heads of each kind (the HEADS_RELATIVE_* rule above), every other role kept;
 * each h->role rebuilt. */
void heads_label_relative(HeadStats *stats, int n);

/* Spearman's rank correlation of a and b (n each): Pearson's of their ranks, ties given
 * the mean of the ranks they span. NAN when n < 2 or either side is constant. */
double heads_spearman(const double *a, const double *b, int n);

/* How often each source id occurs in the lines (a training corpus) as encode_line encodes
 * them with v: (v->size) counts, malloc'd. */
long long *heads_source_frequencies(char **lines, int n, int tokenizer, const Vocab *v);

/* Every head's stats (model_head_count of them, in model_head_index order) on the set:
 * the gradient score, raw and normalised, dNLL and the roles (aer NAN: heads_aer adds
 * it). freq: NULL (no rare-token share), or heads_source_frequencies' counts, an <unk>
 * counting as 0 (a word the vocabulary lacks is rarer than any it holds). Label smoothing
 * is off for the passes and restored; the head gates are left off. *base_nll (may be
 * NULL) gets the per-token NLL with no head masked. threads: how many share the batches
 * (each with OpenBLAS at one thread, restored after); the figures depend on it only in
 * the last bits of a sum's order. */
void heads_score(Model *m, const HeadSet *set, const long long *freq, int threads, HeadStats *stats, double *base_nll);

/* The cross heads' AER against gold links, set into stats (heads_score's array) and
 * their labels refreshed: pairs[i] is the i-th pair's text with its gold line, as
 * align_model.h reads them. 0, or -1 with the error set (aligner_score's errors). */
int heads_aer(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *pairs, int n,
              HeadStats *stats);

#endif
