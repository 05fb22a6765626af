/* onnx_dir: see onnx_dir.h. The two JSON files say what a runtime needs to decode as qkv
 * does: the special ids (0 <pad>, 1 <bos>, 2 <eos>, 3 <unk>; every qkv vocabulary starts
 * with them), decoding starting from <bos>, and greedy search's rules that a runtime's
 * settings can state (never <pad> nor <bos>; at most max_positions - 1 tokens). */
#include "onnx/onnx_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "onnx/seq2seq.h"
#include "onnx/tokenizer_json.h"
#include "util/atomic_file.h"
#include "util/file.h"
#include "util/json.h"
#include "util/staged_dir.h"

/* onnx/onnx_page.html, built in as a string: the folder's index.html */
extern const char onnx_page_html[];

static json_t *special_ids(json_t *o) {
    json_put(o, "pad_token_id", json_integer(VOCAB_PAD));
    json_put(o, "bos_token_id", json_integer(VOCAB_BOS));
    json_put(o, "eos_token_id", json_integer(VOCAB_EOS));
    json_put(o, "decoder_start_token_id", json_integer(VOCAB_BOS));
    json_put(o, "forced_eos_token_id", json_integer(VOCAB_EOS));
    return o;
}

static char *config_json(const ModelConfig *c, const JointVocab *jv) {
    json_t *o = json_object();
    json_put(o, "architectures", json_pack("[s]", "MarianMTModel"));
    json_put(o, "model_type", json_string("marian"));
    json_put(o, "is_encoder_decoder", json_true());
    /* the sizes under the names Marian's config gives them (transformers.js reads the
     * decoder's layers, heads and d_model to shape the empty caches of a first step) */
    const struct {
        const char *key;
        int value;
    } sizes[] = {{"d_model", c->d_model},
                 {"encoder_layers", c->encoder_layers},
                 {"decoder_layers", c->decoder_layers},
                 {"encoder_attention_heads", c->heads},
                 {"decoder_attention_heads", c->heads},
                 {"encoder_ffn_dim", c->d_ff},
                 {"decoder_ffn_dim", c->d_ff},
                 {"vocab_size", jv->size}, /* the export's ids: onnx/joint_vocab.h */
                 {"decoder_vocab_size", jv->size},
                 {"target_vocab_size", c->tgt_vocab},
                 {"source_vocab_size", c->src_vocab},
                 {"max_position_embeddings", c->max_positions}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) json_put(o, sizes[i].key, json_integer(sizes[i].value));
    json_put(o, "activation_function", json_string("relu"));
    json_put(o, "scale_embedding", json_true());
    json_put(o, "normalize_before", json_boolean(c->pre_norm));
    json_put(o, "tie_word_embeddings", json_boolean(c->tie_embeddings));
    json_put(o, "share_encoder_decoder_embeddings", json_boolean(jv->shared));
    json_put(o, "use_cache", json_true());
    return json_text_line(special_ids(o), JSON_WRITE_FLAGS);
}

static char *generation_json(const ModelConfig *c) {
    json_t *o = special_ids(json_object());
    json_put(o, "max_length", json_integer(c->max_positions)); /* <bos> and max_positions - 1 tokens */
    json_put(o, "num_beams", json_integer(1));
    json_put(o, "do_sample", json_false());
    json_put(o, "bad_words_ids", json_pack("[[i], [i]]", VOCAB_PAD, VOCAB_BOS));
    return json_text_line(o, JSON_WRITE_FLAGS);
}

static int write_text(const char *dir, const char *name, const char *text) {
    char path[STAGED_DIR_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return write_file_atomic(path, text, strlen(text));
}

static int write_graph(const char *dir, const char *name,
                       int (*make)(const Model *, const JointVocab *, uint8_t **, size_t *), const OnnxDir *e) {
    uint8_t *data;
    size_t len;
    if (make(e->m, e->jv, &data, &len) != 0) return -1;
    char path[STAGED_DIR_MAX + 256];
    snprintf(path, sizeof path, "%s/onnx/%s", dir, name);
    int rc = write_file_atomic(path, data, len);
    free(data);
    return rc;
}

/* What fill writes beside the folder's description */
typedef struct {
    const OnnxDir *e;
    char *tokenizer_config;
} Fill;

static int fill(const char *dir, void *arg) {
    const Fill *f = arg;
    const OnnxDir *e = f->e;
    char sub[STAGED_DIR_MAX + 256];
    snprintf(sub, sizeof sub, "%s/onnx", dir);
    if (make_dirs(sub) != 0 || write_graph(dir, "encoder_model.onnx", onnx_encoder_model, e) != 0 ||
        write_graph(dir, "decoder_model_merged.onnx", onnx_decoder_model, e) != 0)
        return -1;
    char *config = config_json(&e->m->cfg, e->jv), *generation = generation_json(&e->m->cfg);
    int rc = write_text(dir, "config.json", config) != 0 ||
                     write_text(dir, "generation_config.json", generation) != 0 ||
                     write_text(dir, "tokenizer.json", e->tokenizer_json) != 0 ||
                     write_text(dir, "tokenizer_config.json", f->tokenizer_config) != 0 ||
                     write_text(dir, "index.html", onnx_page_html) != 0 ||
                     (e->reference_json && write_text(dir, "reference.json", e->reference_json) != 0)
                 ? -1
                 : 0;
    free(config), free(generation);
    return rc;
}

int onnx_dir_entry(const char *name) {
    static const char *const own[] =
        {"config.json", "generation_config.json", "tokenizer.json",          "tokenizer_config.json",
         "onnx",        "reference.json",         "onnx/encoder_model.onnx", "onnx/decoder_model_merged.onnx"};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (strcmp(name, own[i]) == 0) return 1;
    return 0;
}

int onnx_dir_write(const char *out, const OnnxDir *e) {
    Fill f = {e, tokenizer_config_json(e->jv, e->m->cfg.max_positions - 1)};
    int rc = staged_dir_write(out, "--out", fill, &f, onnx_dir_entry);
    free(f.tokenizer_config);
    return rc;
}
