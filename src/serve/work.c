/* work: see work.h. */
#include "serve/work.h"

/* The GFLOP of one forced pass over S source and T decoder positions: the model's products
 * per position and attention's own (QK^T and PV, length squared). */
static double pass_gflop(const ModelConfig *c, int S, int T) {
    double fs, ft;
    model_position_flops(c, &fs, &ft);
    double attn = 4.0 * c->d_model *
                  ((double)c->encoder_layers * S * S + (double)c->decoder_layers * ((double)T * T + (double)T * S));
    return (S * fs + T * ft + attn) / 1e9;
}

double work_translate_gflop(const Model *m, const DecodeOptions *o, int len) {
    const ModelConfig *c = &m->cfg;
    int S = len + 1, T = decode_max_len(m, o, len) + 1;
    double encoder = pass_gflop(c, S, 0); /* a pass over no target is the encoder's alone */
    return encoder + o->beam * (pass_gflop(c, S, T) - encoder);
}

double work_explain_gflop(const ModelConfig *c, int S, int T, int ig_steps, int foil) {
    double pass = pass_gflop(c, S, T), rows = (double)T * (ig_steps + 2) * (foil ? 2 : 1);
    return 3.0 * rows * pass + (S + 1.0) * pass;
}

double work_whatif_gflop(const ModelConfig *c, int S, int T, int forced, int changed, int masked, int beam,
                         int longest) {
    double lens = 2.0 * c->decoder_layers * T * (double)c->d_model * c->tgt_vocab / 1e9;
    double forward = pass_gflop(c, S, T) + lens, decoding = pass_gflop(c, S, longest);
    return (1 + changed) * forward + (!forced + masked + beam) * decoding;
}

double work_patch_gflop(const ModelConfig *c, int S, int T) {
    int heads = c->heads * (c->encoder_layers + 2 * c->decoder_layers), n = heads + c->encoder_layers * S;
    return (n + 3.0 + 2 * 3.0) * pass_gflop(c, S, T);
}
