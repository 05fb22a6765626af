/* Fuzz target: the export's own reader of a SentencePiece model's bytes (onnx/spm_proto.h),
 * which takes each piece's score and type and the normalizer's rule for tokenizer.json. The
 * input is the whole model. A model read holds at least one piece, every piece a string,
 * and its character map lies inside the bytes read; anything else is refused with the one
 * error, and nothing is read past the end.
 *
 * Stored inputs (tests/fuzz/spm_proto/): small-bpe.model and small-unigram-denorm.model
 * (spm_model's, whole models of a few KB), small-bpe-cut.model (its first 3,000 bytes: a
 * field cut short), one-piece.model (a piece "abc", score -1, by hand) and
 * length-past-the-end.model (a length that runs past the end). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "onnx/spm_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    SpmProto s;
    if (spm_proto_read(&s, data, size, "src.model") != 0) return 0;
    if (s.n < 1) abort();
    for (int i = 0; i < s.n; i++)
        if (!s.piece[i]) abort();
    if (s.charsmap && (s.charsmap < data || s.charsmap + s.charsmap_len > data + size)) abort();
    spm_proto_free(&s);
    return 0;
}
