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
    return sentence_unknown_words(line, r->cfg.data.tokenizer, &r->src_vocab, unknown);
}

void cmd_warn_unknown(const char *option, const StrBuf *unknown) {
    if (unknown->len)
        fprintf(stderr, "qkv: warning: %s%snot in the source vocabulary, read as <unk>: %s\n", option ? option : "",
                option ? ": " : "", unknown->buf);
}

int cmd_sentence_ids(Run *r, const char *text_option, const char *text, const char *target, int *src, int *n_src,
                     int *tgt, int *n_tgt) {
    int tok = r->cfg.data.tokenizer, max = r->model.cfg.max_positions - 2;
    StrBuf unknown = {0};
    SentenceFault f = sentence_ids(text, tok, &r->src_vocab, max, 0, src, n_src, &unknown);
    if (f != SENTENCE_OK) return sentence_fault_error(f, text_option, "attend to", max, NULL), sb_free(&unknown), -1;
    cmd_warn_unknown(NULL, &unknown);
    sb_free(&unknown);
    if (target) {
        f = sentence_ids(target, tok, &r->tgt_vocab, max, 1, tgt, n_tgt, &unknown);
        if (f != SENTENCE_OK) sentence_fault_error(f, "--target", "attend to", max, &unknown);
        sb_free(&unknown);
        return f == SENTENCE_OK ? 0 : -1;
    }
    *n_tgt = greedy_ids(&r->model, src, *n_src, tgt, max);
    return 0;
}

int cmd_target_token(const Run *r, const char *option, const char *word) {
    char why[128];
    int id = encode_target_word(word, r->cfg.data.tokenizer, &r->tgt_vocab, why, sizeof why);
    if (id < 0) return err_set("%s: '%s' %s", option, word, why), -1;
    return id;
}
