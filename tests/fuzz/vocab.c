/* Fuzz target: the vocabulary loaders. The first byte picks what the rest is: a
 * vocabulary file (src.vocab, or the text an export carries), or a SentencePiece model
 * (src.model). A vocabulary that loads is written out and must load back the same. */
#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    Vocab v;
    if (data[0] & 1) {
        if (vocab_from_spm(&v, (const char *)data + 1, size - 1, "src.model") == 0) vocab_free(&v);
        return 0;
    }
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    if (vocab_parse(&v, text, size - 1, "src.vocab") == 0) {
        char *again = vocab_text(&v);
        Vocab back;
        if (vocab_parse(&back, again, strlen(again), "written") != 0) abort(); /* written but unreadable */
        if (vocab_hash(&back) != vocab_hash(&v)) abort();                      /* read back as another */
        vocab_free(&back);
        free(again);
        vocab_free(&v);
    }
    free(text);
    return 0;
}
