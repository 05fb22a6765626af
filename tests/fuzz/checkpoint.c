/* Fuzz target: the checkpoint loader, as `qkv info`, `translate` and `resume` use it.
 * Before parsing, both checksums are recomputed and written into the input where it
 * has their places (the data section's, then the header's), so that mutated headers and
 * data get past the checksums to the JSON, the layout, the metadata and the tensors
 * (the checksums themselves are tested by tests/resume.sh's bit flips). A file that
 * verifies has its embedded config parsed, its vocabularies (an export's) loaded, and,
 * when the config describes a small model, its tensors read into one. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "data/vocab.h"
#include "fuzz.h"
#include "run/checkpoint.h"
#include "run/run.h"
#include "util/checksum.h"
#include "util/mem.h"
#include "util/text.h"

/* Writes 16 hex digits of v over the value of "key":" in the header, if it is there. */
static void put_hex(char *header, size_t hlen, const char *key, uint64_t v) {
    char *at = memmem(header, hlen, key, strlen(key));
    if (!at || at + strlen(key) + 16 > header + hlen) return;
    char digits[17];
    snprintf(digits, sizeof digits, "%016llx", (unsigned long long)v);
    memcpy(at + strlen(key), digits, 16);
}

static void fix_checksums(char *bytes, size_t len) {
    uint64_t hlen;
    if (len < 8) return;
    memcpy(&hlen, bytes, 8);
    if (hlen > len - 8) return;
    char *header = bytes + 8;
    put_hex(header, hlen, "\"checksum\":\"", checksum64(header + hlen, len - 8 - hlen));
    char *hc = memmem(header, hlen, "\"header_checksum\":\"", 19);
    if (!hc || hc + 19 + 16 > header + hlen) return;
    memset(hc + 19, '0', 16); /* the header checksum is taken with its own digits zeroed */
    put_hex(header, hlen, "\"header_checksum\":\"", checksum64(header, hlen));
}

/* One side's vocabulary as an export stores it: the file's text, or the model in hex. */
static int side_vocab(Vocab *v, const char *text, int tokenizer) {
    if (!tokenizer_is_subword(tokenizer)) {
        char *copy = xstrdup(text);
        int rc = vocab_parse(v, copy, strlen(copy), "vocab");
        free(copy);
        return rc;
    }
    char *bytes;
    size_t n;
    if (hex_decode(text, &bytes, &n) != 0) return -1;
    int rc = vocab_from_spm(v, bytes, n, "model");
    free(bytes);
    return rc;
}

static int embed_rows(const CkptFile *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0 && f->tensors[i].ndim == 2) return (int)f->tensors[i].shape[0];
    return -1;
}

static void load_weights(const CkptFile *f, const Config *cfg) {
    int sv = embed_rows(f, "encoder.embed_tokens"), tv = embed_rows(f, "decoder.embed_tokens");
    if (sv < 1 || tv < 1 || sv > 1000 || tv > 1000 || cfg->model.d_model > 64 || cfg->model.d_ff > 256 ||
        cfg->model.encoder_layers > 2 || cfg->model.decoder_layers > 2 || cfg->data.max_len > 256)
        return; /* a model too large to build for every input */
    ModelConfig mc = run_model_config(cfg, sv, tv);
    Model m;
    if (model_init(&m, &mc) != 0) return;
    ckpt_read(f, &m, NULL);
    model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *bytes = malloc(size ? size : 1);
    memcpy(bytes, data, size);
    fix_checksums(bytes, size);
    CkptFile f;
    if (ckpt_parse(&f, "fuzz.safetensors", bytes, size) != 0) return 0; /* f owns bytes */
    Config cfg;
    config_defaults(&cfg);
    if (config_parse(&cfg, f.meta.config, strlen(f.meta.config), "fuzz.safetensors") == 0 &&
        config_validate(&cfg, 0) == 0) {
        Vocab src, tgt;
        if (f.meta.src_vocab && side_vocab(&src, f.meta.src_vocab, cfg.data.tokenizer) == 0) {
            if (side_vocab(&tgt, f.meta.tgt_vocab, cfg.data.tokenizer) == 0) vocab_free(&tgt);
            vocab_free(&src);
        }
        load_weights(&f, &cfg);
    }
    ckpt_close(&f);
    return 0;
}
