/* decode_options: the decoding options translate, eval and heads share, as rows of their
 * option tables (cmdlib/options.h), and what each does to TranslateOptions; among them
 * --mask-heads, the heads masked while the model runs (decode/headmask.h), which attention
 * takes too. */
#ifndef QKV_DECODE_OPTIONS_H
#define QKV_DECODE_OPTIONS_H

#include "cmdlib/options.h"
#include "decode/translator.h"
#include "nn/model.h"
#include "util/text.h"

/* The rows (ended by a zero row): --greedy, --beam, --nbest, --length-penalty, ... */
extern const CmdOption decode_options[];

/* Beam search as decode_defaults() says, <unk> replaced where the vocabulary allows. */
TranslateOptions decode_options_defaults(void);
/* Applies the decode_options row keyed c with its value arg to o, or for --mask-heads
 * keeps arg (argv's, not copied; the last one given wins) in *mask_heads: 0; 1 when c is
 * no key of theirs; -1 for a bad value (error set). */
int decode_options_apply(int c, const char *arg, TranslateOptions *o, const char **mask_heads);

/* decode_check, and what a command line can ask that a search would not read: a length
 * penalty other than the default for greedy search (one hypothesis: nothing to rank).
 * 0, or -1 with the error set. */
int decode_options_check(const TranslateOptions *o);

/* The name of --replace-unk or --no-replace-unk when c is one of them, else NULL: a command
 * keeps the last one given for decode_options_check_unk. */
const char *decode_options_unk_name(int c);
/* 0, or -1 with the error set when an <unk> option was given (given: its name) for a run
 * whose tokenizer has no <unk> to replace (bpe, spm): taken and ignored, it would mislead. */
int decode_options_check_unk(const char *given, int tokenizer);

/* --mask-heads's help: its row here, and in attention's table. */
#define MASK_HEADS_HELP "mask these attention heads: KIND.LAYER.HEAD items (enc, dec, cross; * for all) or @FILE"
/* Masks the heads spec names on m (head_mask_parse, then model_set_head_gates) and appends
 * their canonical names to masked (may be NULL), a line each. Returns how many: 0 (spec
 * NULL, empty, or naming nothing) leaves the model ungated, as without the option; -1
 * for a bad spec, with the error set ("--mask-heads: ..."). */
int decode_options_mask_heads(Model *m, const char *spec, StrBuf *masked);

#endif
