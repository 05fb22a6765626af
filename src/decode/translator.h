/* translator: lines of text in, lines of text out, with the model of a run.
 *
 * Encodes each line with the source vocabulary (or its SentencePiece model), decodes all
 * of them (decode.h), and detokenizes. For word and char vocabularies, each <unk> in an
 * output can be replaced by the source token the cross-attention weighs most at that
 * position (the last decoder layer, heads averaged): the classic unknown-word
 * replacement, on the model's own alignments. */
#ifndef QKV_TRANSLATOR_H
#define QKV_TRANSLATOR_H

#include "config.h"
#include "data/sentence_ids.h"
#include "data/vocab.h"
#include "decode/decode.h"
#include "nn/model.h"

typedef struct {
    DecodeOptions decode;
    int replace_unk;          /* word/char vocabularies only */
    int length_penalty_given; /* decode.length_penalty was asked for, not the run's to take */
} TranslateOptions;

/* o with the run's decoding defaults where o did not ask (c's decode.length_penalty, for a
 * beam): what translate, eval, heads and the server's searches decode with, one rule for all. */
TranslateOptions translate_options_for_run(const TranslateOptions *o, const Config *c);

typedef struct {
    int lines, empty, truncated;   /* input lines, empty ones (empty output), cut to the position table */
    long long src_tokens, src_unk; /* source tokens and those the vocabulary lacks */
    long long out_tokens, out_unk; /* output tokens, and <unk>s left in the text */
    long long replaced_unk;        /* <unk>s replaced by a source token */
    double flops;                  /* the decoding's matrix-product FLOPs (decode_counting) */
} TranslateStats;

/* Line as the model reads it when translating: its source ids (given's, when it was read
 * already; else read here), cut to max_src (*cut 1 when they were); an empty line gives
 * {NULL, 0}. The caller frees .ids. */
Seq translator_source(const char *line, const SentenceTokens *given, int tokenizer, const Vocab *src_vocab, int max_src,
                      int *cut);

/* The model's hypotheses for lines[0..n): n * nbest strings (malloc'd; free_lines(.., n * nbest)),
 * line i's k-th best at [i * nbest + k]; scores (NULL or n * nbest) their ranking scores. */
char **translate_lines(Model *m, int tokenizer, const Vocab *src_vocab, const Vocab *tgt_vocab, char **lines, int n,
                       const TranslateOptions *o, TranslateStats *stats, double *scores);
/* As translate_lines, the lines read already when given is not NULL (n of them, the ids
 * encode_line gave), and ids (NULL, or n * nbest) gets each hypothesis's target ids
 * (without EOS; the caller frees each .ids; an empty line's is {NULL, 0}). */
char **translate_lines_ids(Model *m, int tokenizer, const Vocab *src_vocab, const Vocab *tgt_vocab, char **lines,
                           const SentenceTokens *given, int n, const TranslateOptions *o, TranslateStats *stats,
                           double *scores, Seq *ids);

/* -log P(ref | src) summed over n pairs' reference tokens and their EOS, by the full
 * forward pass (teacher forcing, no dropout); *tokens gets how many were scored. */
double reference_nll(Model *m, const Seq *src, const Seq *ref, int n, long long *tokens);

#endif
