/* Fuzz target: a SentencePiece model's bytes, as spm_load takes them from src.model,
 * tgt.model or the file data.spm_model names. The input is the whole model. A model
 * that loads must then take any text: every byte value after every other (the normalizer
 * walks its character-map trie from each position), other scripts, whitespace and an
 * empty line are encoded, as ids and as pieces, and decoded back; every piece is listed
 * and every id decoded. Refusals are ordinary results.
 *
 * Stored inputs (tests/fuzz/spm_model/): toy-bpe.model, the src.model of `qkv train` on
 * data/toy with data.tokenizer bpe and data.vocab_size 300 (nmt_nfkc: 237 KB of it is the
 * character map, past libFuzzer's -max_len); small-bpe.model and small-unigram-denorm.model,
 * trained by the library with qkv's flags but a 66-rule normalization table (the second
 * with a denormalizer too), whole models of a few KB for libFuzzer to mutate; and
 * charsmap-*.model, small-bpe.model with one trie unit sent out of range, each of which
 * crashed SentencePiece itself before spm_load checked the map. */
#include <stdlib.h>
#include <string.h>

#include "data/spm.h"
#include "fuzz.h"

static void count_piece(const char *piece, size_t len, void *ctx) {
    (void)piece;
    *(size_t *)ctx += len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Spm *s = spm_load((const char *)data, size, "src.model");
    if (!s) return 0;
    char all[2 * 255 + 1];
    size_t k = 0;
    for (int c = 1; c < 256; c++) all[k++] = (char)c, all[k++] = (char)(256 - c);
    all[k] = '\0';
    const char *texts[] =
        {"",
         "a small red dog runs",
         "  two\t spaces \xC2\xA0 and tabs ",
         "\xCE\x96\xCF\x8E\xCE\xBF \xF0\x9F\x90\x95 \xE2\x84\x83 \xEF\xBC\xA1\xEF\xAC\x81 \xEF\xB7\xBA",
         "\xFF\xFE broken \xE2\x82 utf-8 \xC0\x80",
         all};
    int ids[4096];
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        int n = spm_encode(s, texts[t], ids, 4096);
        if (n >= 0) free(spm_decode(s, ids, n < 4096 ? n : 4096));
        size_t bytes = 0;
        spm_encode_pieces(s, texts[t], count_piece, &bytes);
    }
    /* every piece, by itself and all in a row */
    int n = spm_size(s);
    size_t total = 0;
    for (int id = 0; id < n && id < 4096; id++) {
        total += strlen(spm_piece(s, id));
        ids[id] = id;
        free(spm_decode(s, &ids[id], 1));
    }
    free(spm_decode(s, ids, n < 4096 ? n : 4096));
    (void)total;
    spm_free(s);
    return 0;
}
