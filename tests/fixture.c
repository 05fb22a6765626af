/* fixture: see fixture.h (the decoding tests' models and sources are in test_decode.c). */
#include "fixture.h"

ModelConfig fixture_config(int src_vocab, int tgt_vocab, int d_model, int heads, int d_ff, int encoder_layers,
                           int decoder_layers, int max_positions) {
    return (ModelConfig){.src_vocab = src_vocab,
                         .tgt_vocab = tgt_vocab,
                         .d_model = d_model,
                         .heads = heads,
                         .d_ff = d_ff,
                         .encoder_layers = encoder_layers,
                         .decoder_layers = decoder_layers,
                         .tie_embeddings = 1,
                         .max_positions = max_positions};
}
