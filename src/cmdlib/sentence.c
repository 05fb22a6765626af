/* sentence: see sentence.h. */
#include "cmdlib/sentence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "data/sentence_ids.h"
#include "decode/decode.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/text.h"

int cmd_unknown_source_words(const Run *r, const char *line, StrBuf *unknown) {
    return sentence_unknown_words(line, NULL, r->cfg.data.tokenizer, &r->src_vocab, unknown);
}

void cmd_warn_unknown(const char *option, const StrBuf *unknown) {
    if (unknown->len)
        fprintf(stderr, "qkv: warning: %s%snot in the source vocabulary, read as <unk>: %s\n", option ? option : "",
                option ? ": " : "", unknown->buf);
}

int cmd_target_token(const Run *r, const char *option, const char *word) {
    char why[128];
    int id = encode_target_word(word, r->cfg.data.tokenizer, &r->tgt_vocab, why, sizeof why);
    if (id < 0) return err_set("%s: '%s' %s", option, word, why), -1;
    return id;
}
