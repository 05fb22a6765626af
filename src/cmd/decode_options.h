/* decode_options: the decoding options translate and eval share, as rows of their option
 * tables (cmd/options.h), and what each does to TranslateOptions. */
#ifndef QKV_DECODE_OPTIONS_H
#define QKV_DECODE_OPTIONS_H

#include "cmd/options.h"
#include "infer/translator.h"

/* The rows (ended by a zero row): --greedy, --beam, --nbest, --length-penalty, ... */
extern const CmdOption decode_options[];

/* Beam search as decode_defaults() says, <unk> replaced where the vocabulary allows. */
TranslateOptions decode_options_defaults(void);
/* Applies the decode_options row keyed c with its value arg: 0; 1 when c is no key of
 * theirs; -1 for a bad value (error set). */
int decode_options_apply(int c, const char *arg, TranslateOptions *o);

#endif
