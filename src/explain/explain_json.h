/* explain_json: one explained pair as explain.json ("qkv-explain-1"), the file the
 * viewer's explain mode reads:
 *
 *   format        "qkv-explain-1"
 *   maps          the pair's attention maps, as maps.json holds them ("qkv-attention-2":
 *                 source, target_in, target_out labels, every head's weights, scores and
 *                 contributions), for the anatomy a click opens
 *   logp          (T) log p(y_t) of each target token as forced
 *   foil          null, or the foil word the gradients contrast y_t with
 *   foil_is_word  (T) true where the foil is y_t itself: f_t = log p(y_t) - log p(y_t) is 0
 *                 for any input, every gradient score of that row is 0 and ranks nothing
 *   ig_steps, f, f_base, ig_error
 *                 the integrated gradients' steps, and per target token f_t, f_t at the
 *                 baseline and the completeness error (sum of IG - (f - f_base))
 *   share         (decoder layers, T) each target token's source share after each layer;
 *                 the last row is the answer
 *   rollout       (T, S + T) each target token's contributions rolled out: source tokens,
 *                 then the target inputs (BOS, y_1, ...)
 *   methods       [{name, family, scores (T, S)}]: every method's scores of the source
 *                 tokens for each target token (explain/pair.h's list; family attention,
 *                 contrib, gradient or loo); a gradient's also says what its score is
 *                 (score: x-gradient is signed, x-gradient-l2 its magnitude)
 *   prefix        [{name, score, scores (T, T)}]: the gradients (saliency, x-gradient,
 *                 x-gradient-l2, integrated gradients) of the target inputs (row t: inputs
 *                 0..t; later ones 0)
 *
 * Rows are decoder positions t, predicting target_out[t]. Numbers are written with seven
 * significant digits.
 *
 * explain-corpus.json ("qkv-explain-corpus-1", qkv explain --src, written by the command)
 * says with --gold how its AER was read, as qkv align reads it:
 *   null          "on" or "off": the null decision (aligners.h) on every method's links
 *   null_rule     with "on": the rule in the one line printed under the table
 *   methods[].aer, methods[].unaligned
 *                 the method's AER, and the target words the rule left unaligned (0 off) */
#ifndef QKV_EXPLAIN_JSON_H
#define QKV_EXPLAIN_JSON_H

#include "explain/pair.h"

/* The file's text (malloc'd, ends in a newline); foil: the foil's label or NULL. */
char *explain_json(const PairExplanation *e, const ExplainMethod *methods, int n_methods, const char *foil);

#endif
