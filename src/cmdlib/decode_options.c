/* decode_options: see decode_options.h. */
#include "cmdlib/decode_options.h"

#include <stdlib.h>

#include "cmdlib/cmdutil.h"
#include "config.h"
#include "decode/headmask.h"
#include "util/err.h"
#include "util/mem.h"

/* The defaults shown are decode_defaults()'s (a unit test holds them to it). */
const CmdOption decode_options[] = {
    {'b', "beam", "K", "hypotheses kept per sentence, 1 to 64", "5"},
    {'g', "greedy", NULL, "greedy search: the same as --beam 1", NULL},
    {'n', "nbest", "N", "hypotheses printed per sentence, 1 to the beam", "1"},
    {'l', "length-penalty", "A", "a finished hypothesis scores log P / length^A; 0 ranks by log P",
     "the run's decode.length_penalty, 1 unless its config sets one"},
    {'a', "max-len-a", "A", "at most A * source length + B target tokens", "2"},
    {'B', "max-len-b", "B", "(see --max-len-a)", "10"},
    {'r', "no-repeat-ngram", "N", "no n-gram of N tokens twice in one hypothesis; 0: allowed", "0"},
    {'u', "replace-unk", NULL, "each <unk> becomes the source word cross-attention weighs most (word, char)", "on"},
    {'U', "no-replace-unk", NULL, "leave <unk> in the output", NULL},
    {'m', "mask-heads", "SPEC", MASK_HEADS_HELP, NULL},
    {0},
};

TranslateOptions decode_options_defaults(void) {
    return (TranslateOptions){.decode = decode_defaults(), .replace_unk = 1};
}

int decode_options_apply(int c, const char *arg, TranslateOptions *o, const char **mask_heads) {
    DecodeOptions *d = &o->decode;
    switch (c) {
    case 'g': d->beam = 1; return 0;
    case 'b': return cmd_int("--beam", "a beam size from 1 to 64", arg, 1, 64, &d->beam);
    case 'n': return cmd_int("--nbest", "a count from 1 to 64", arg, 1, 64, &d->nbest);
    case 'l':
        o->length_penalty_given = 1;
        return cmd_double("--length-penalty", "a number from 0 to 10", arg, 0, 10, &d->length_penalty);
    case 'a': return cmd_double("--max-len-a", "a number from 0 to 100", arg, 0, 100, &d->max_len_a);
    case 'B': return cmd_int("--max-len-b", "a count from 0 to 100000", arg, 0, 100000, &d->max_len_b);
    case 'r': return cmd_int("--no-repeat-ngram", "an n-gram size from 0 to 100", arg, 0, 100, &d->no_repeat_ngram);
    case 'u': o->replace_unk = 1; return 0;
    case 'U': o->replace_unk = 0; return 0;
    case 'm': *mask_heads = arg; return 0;
    default: return 1;
    }
}

int decode_options_mask_heads(Model *m, const char *spec, StrBuf *masked) {
    if (!spec) return 0;
    float *gates = xmalloc(sizeof(float) * (size_t)model_head_count(m));
    int n = head_mask_parse(m, spec, gates);
    if (n > 0) {
        model_set_head_gates(m, gates);
        if (masked) head_mask_format(m, gates, masked);
    }
    free(gates);
    return n;
}

const char *decode_options_unk_name(int c) { return c == 'u' ? "--replace-unk" : c == 'U' ? "--no-replace-unk" : NULL; }

int decode_options_check_unk(const char *given, int tokenizer) {
    if (given && tokenizer_is_subword(tokenizer))
        return err_set("%s: a %s run has no <unk> to replace (word and char runs only)", given,
                       tokenizer_name(tokenizer));
    return 0;
}

int decode_options_check(const TranslateOptions *o) {
    if (decode_check(&o->decode) != 0) return -1;
    if (o->decode.beam == 1 && o->length_penalty_given && o->decode.length_penalty != decode_defaults().length_penalty)
        return err_set("--length-penalty ranks the finished hypotheses of a beam: greedy search (--greedy, --beam 1) "
                       "has one");
    return 0;
}
