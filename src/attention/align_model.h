/* align_model: word alignments of sentence pairs, read from a model's cross-attention.
 *
 * For one pair of lines as read from line-aligned files: both sides encoded, the target
 * force-decoded to capture the maps (attnmap.h), one selection of the cross-attention
 * pooled to words and each target word linked to a source word (align_map.h); with gold
 * links, every selection scored against them. Reading files and printing are the
 * command's (cmd/align.c). */
#ifndef QKV_ALIGN_MODEL_H
#define QKV_ALIGN_MODEL_H

#include "attention/align_map.h"
#include "attention/attnmap.h"
#include "data/vocab.h"
#include "nn/model.h"

/* A cross-attention map to read links from: one (layer, head), a layer's heads averaged
 * (head -1), every layer's head average averaged (layer -1, head -1), or the last
 * cross-attention block's contributions (layer ALIGN_CONTRIB: what the null measure
 * measures, so it needs one; `qkv align`'s default reading). */
typedef struct {
    int layer, head; /* -1: averaged */
} AlignPick;
enum { ALIGN_CONTRIB = -2 };

/* What the null decision reads (align_map.h), measured right after a pair's capture,
 * while the capture's pass is the model's last (the caller's: contributions come from
 * explain/, above this room): from (a->T, a->S + 1) gets what each source position sent
 * each decoder position in the last cross-attention block, then what its prefix sent. */
typedef void (*AlignNullMeasure)(Model *m, const AttnMaps *a, float *from);

/* One line-aligned sentence pair and where it was read, named in messages as
 * "<file>:<line>: ..." (borrowed). */
typedef struct {
    const char *src, *tgt;
    const char *gold; /* a Pharaoh line of sure links, or NULL */
    const char *src_file, *tgt_file, *gold_file;
    int line; /* 1-based */
} AlignPair;

/* Every selection of a model with `layers` decoder layers of `heads` heads, in the order
 * a report lists them: per layer its average then each head, then all layers; picks has
 * room for layers * (heads + 1) + 1, the count returned. */
int aligner_picks(int layers, int heads, AlignPick *picks);

/* The pair's links under pick: *links (malloc'd, the caller frees; NULL when a side is
 * empty) gets each target word's source word. Returns the target word count (0 for an
 * empty side), or -1 with the error set: a side longer than the model's positions. */
int aligner_links(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *p, AlignPick pick,
                  int **links);
/* The same with measure's contributions at hand (NULL: none; an ALIGN_CONTRIB pick needs
 * them) and the null decision read from them when null is set (else every word linked); a
 * word left unaligned gets -1. */
int aligner_links_null(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *p, AlignPick pick,
                       AlignNullMeasure measure, int null, int **links);

/* Scores each of picks[0..n_picks)'s links for the pair against p->gold, adding into
 * counts[k] (n_picks of them). 0, or -1 with the error set and nothing added: a side
 * longer than the model's positions, a gold line that is not Pharaoh links or names a
 * word past the pair. */
int aligner_score(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *p, const AlignPick *picks,
                  int n_picks, AlignCounts *counts);
/* The same with measure and null as aligner_links_null takes them. */
int aligner_score_null(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const AlignPair *p,
                       const AlignPick *picks, int n_picks, AlignNullMeasure measure, int null, AlignCounts *counts);

#endif
