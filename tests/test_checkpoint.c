/* Checkpoints: exact round trip, and every kind of damage rejected with one message
 * naming the file, never a crash and never a partly loaded model. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fixture.h"
#include "run/checkpoint.h"
#include "util/checksum.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/rng.h"

/* the model every test here saves and loads */
static ModelConfig small_config(void) { return fixture_config(6, 7, 8, 2, 16, 1, 1, 8); }

typedef struct {
    Model m;
    Adam adam;
    char path[128];
} Saved;

static void save_one(Saved *s, uint64_t seed) {
    ModelConfig small = small_config();
    model_init(&s->m, &small);
    model_init_weights(&s->m, seed);
    adam_init(&s->adam, s->m.n_params, 0.9, 0.98, 1e-9, 0);
    Rng r = {seed};
    for (size_t i = 0; i < s->m.n_params; i++) s->adam.m[i] = rng_normal(&r), s->adam.v[i] = (float)rng_uniform(&r);
    snprintf(s->path, sizeof s->path, "/tmp/qkv-ckpt-test-%d-%llu.safetensors", (int)getpid(),
             (unsigned long long)seed);
    CkptMeta meta = {.step = 42,
                     .epoch = 3,
                     .batch_pos = 7,
                     .seed = 9,
                     .threads = 2,
                     .valid_loss = 1.5,
                     .best_valid_loss = 1.25,
                     .valid_bleu = NAN,
                     .best_valid_bleu = 12.5,
                     .elapsed_s = 3.25,
                     .vocab_hash = 0xABCDEF,
                     .data_hash = 0x123456,
                     .config = "name: x\n"};
    if (ckpt_save(s->path, &s->m, &s->adam, &meta) != 0) abort();
}

static void free_saved(Saved *s) {
    unlink(s->path);
    adam_free(&s->adam);
    model_free(&s->m);
}

static void test_round_trip(void) {
    Saved s;
    save_one(&s, 1);
    Model m;
    Adam a;
    ModelConfig small = small_config();
    model_init(&m, &small);
    adam_init(&a, m.n_params, 0.9, 0.98, 1e-9, 0);
    CkptMeta meta;
    CHECK(ckpt_load(s.path, &m, &a, &meta) == 0, "%s", err_msg());
    CHECK(memcmp(m.params, s.m.params, 4 * m.n_params) == 0, "weights differ");
    CHECK(memcmp(a.m, s.adam.m, 4 * m.n_params) == 0 && memcmp(a.v, s.adam.v, 4 * m.n_params) == 0, "moments differ");
    CHECK(meta.step == 42 && a.t == 42 && meta.epoch == 3 && meta.batch_pos == 7 && meta.seed == 9 && meta.threads == 2,
          "cursor or counters differ");
    CHECK(isnan(meta.valid_bleu) && meta.best_valid_bleu == 12.5 && meta.elapsed_s == 3.25,
          "BLEU or elapsed time differ");
    CHECK(meta.best_valid_loss == 1.25 && meta.vocab_hash == 0xABCDEF && meta.data_hash == 0x123456 &&
              strcmp(meta.config, "name: x\n") == 0,
          "metadata differs");
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", s.path);
    CHECK(access(tmp, F_OK) != 0, "tmp file left behind");
    ckpt_meta_free(&meta);
    adam_free(&a);
    model_free(&m);
    free_saved(&s);
}

/* Loads bytes (as if read from `path`) into a fresh model whose weights are set to a
 * marker first; the load must fail, name the file, fit on one line, and leave the
 * marker untouched. In memory: hundreds of damaged files need no disk. */
static int rejected_bytes(const char *path, const char *bytes, size_t len, const char **why) {
    Model m;
    Adam a;
    ModelConfig small = small_config();
    model_init(&m, &small);
    adam_init(&a, m.n_params, 0.9, 0.98, 1e-9, 0);
    for (size_t i = 0; i < m.n_params; i++) m.params[i] = 7.0f, a.m[i] = 7.0f;
    char *copy = xmalloc(len ? len : 1);
    memcpy(copy, bytes, len);
    CkptFile f;
    int failed = ckpt_parse(&f, path, copy, len) != 0;
    if (!failed) {
        failed = ckpt_read(&f, &m, &a) != 0;
        ckpt_close(&f);
    }
    int untouched = 1;
    for (size_t i = 0; i < m.n_params; i++) untouched &= m.params[i] == 7.0f && a.m[i] == 7.0f;
    adam_free(&a);
    model_free(&m);
    *why = !failed                                       ? "loaded"
           : !untouched                                  ? "model changed by a failed load"
           : strncmp(err_msg(), path, strlen(path)) != 0 ? "message does not start with the path"
           : strchr(err_msg(), '\n')                     ? "message is not one line"
                                                         : NULL;
    return *why == NULL;
}

/* The same through the file system. */
static int rejected(const char *path, const char **why) {
    size_t len;
    char *bytes = read_file(path, &len);
    if (!bytes) {
        *why = strncmp(err_msg(), path, strlen(path)) != 0 ? "message does not start with the path" : NULL;
        return *why == NULL;
    }
    int r = rejected_bytes(path, bytes, len, why);
    free(bytes);
    return r;
}

static void write_bytes(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(bytes, 1, n, f);
    fclose(f);
}

/* A checkpoint saved with seed, its bytes (malloc'd), their length and the header's, and
 * in bad (160 bytes) the name of a damaged copy beside it: its path and suffix. */
static char *saved_bytes(Saved *s, int seed, const char *suffix, char *bad, size_t *len, uint64_t *hlen) {
    save_one(s, seed);
    char *bytes = read_file(s->path, len);
    snprintf(bad, 160, "%s%s", s->path, suffix);
    memcpy(hlen, bytes, 8);
    return bytes;
}

static void test_truncated_at_every_header_byte_and_across_data(void) {
    Saved s;
    size_t len;
    uint64_t hlen;
    char bad[160], *bytes = saved_bytes(&s, 2, ".cut", bad, &len, &hlen);
    int data_cuts = 0;
    /* every cut inside the length and header, then 200 cuts spread over the data */
    for (size_t cut = 0; cut < len; cut += cut < 8 + hlen + 16 ? 1 : (len - 8 - hlen) / 200 + 1) {
        const char *why;
        CHECK(rejected_bytes(bad, bytes, cut, &why), "cut at %zu of %zu: %s (%s)", cut, len, why, err_msg());
        /* a short file is called short (or its tensors said to lie past the end), not
         * damaged in some other way */
        CHECK(strstr(err_msg(), cut < 8 ? "too short" : "truncated") ||
                  (cut >= 8 + hlen && strstr(err_msg(), "outside the data section")),
              "cut at %zu: '%s'", cut, err_msg());
        data_cuts += cut >= 8 + hlen;
    }
    CHECK(data_cuts >= 150, "only %d cuts inside the data section", data_cuts);
    /* one byte too many is damage too */
    char *longer = xmalloc(len + 1);
    memcpy(longer, bytes, len);
    longer[len] = 0;
    write_bytes(bad, longer, len + 1);
    const char *why;
    CHECK(rejected(bad, &why) && strstr(err_msg(), "extended"), "appended byte: %s (%s)", why, err_msg());
    free(longer), free(bytes);
    unlink(bad);
    free_saved(&s);
}

static void test_flipped_byte_anywhere(void) {
    Saved s;
    size_t len;
    uint64_t hlen;
    char bad[160], *bytes = saved_bytes(&s, 3, ".flip", bad, &len, &hlen);
    Rng r = {77};
    int in_length = 0, in_header = 0, in_data = 0;
    for (int k = 0; k < 400; k++) {
        /* half the flips in the first 8+header bytes, half anywhere */
        size_t at = k % 2 ? (size_t)rng_below(&r, len) : (size_t)rng_below(&r, 8 + hlen);
        unsigned char bit = (unsigned char)(1u << rng_below(&r, 8));
        bytes[at] ^= bit;
        const char *why;
        int ok = rejected_bytes(bad, bytes, len, &why);
        bytes[at] ^= bit;
        CHECK(ok, "bit flip at byte %zu of %zu: %s", at, len, why);
        /* and for the right reason: each checksum guards its own part of the file */
        if (at < 8) in_length++;
        else if (at < 8 + hlen) {
            in_header++;
            CHECK(strstr(err_msg(), "header"), "header flip at %zu: '%s' does not blame the header", at, err_msg());
        } else {
            in_data++;
            CHECK(strstr(err_msg(), "data checksum mismatch"), "data flip at %zu: '%s'", at, err_msg());
        }
    }
    /* the flips covered both checksums' ground (counts fixed by the seed and the layout) */
    CHECK(in_header >= 150 && in_data >= 100, "flips: %d in the length, %d in the header, %d in the data", in_length,
          in_header, in_data);
    free(bytes);
    unlink(bad);
    free_saved(&s);
}

static void test_foreign_files_and_other_configs(void) {
    char p[128];
    snprintf(p, sizeof p, "/tmp/qkv-ckpt-foreign-%d", (int)getpid());
    const char *why;
    write_bytes(p, "", 0);
    CHECK(rejected(p, &why), "empty file: %s", why);
    write_bytes(p, "name: toy\nseed: 1\n", 18);
    CHECK(rejected(p, &why), "a YAML file: %s", why);
    /* a well-formed safetensors file that is not ours */
    const char other[] = "\x1c\0\0\0\0\0\0\0{\"x\":{\"dtype\":\"F32\",\"shape\":[]}}";
    write_bytes(p, other, sizeof other - 1);
    CHECK(rejected(p, &why), "foreign safetensors: %s", why);
    CHECK(strstr(err_msg(), "header_checksum") || strstr(err_msg(), "header"), "says what: %s", err_msg());
    unlink(p);
    CHECK(rejected(p, &why) && strstr(err_msg(), "No such file"), "missing file: %s", err_msg());
    /* another config's checkpoint: same file format, different shapes */
    Saved s;
    save_one(&s, 4);
    ModelConfig wide = small_config();
    wide.d_model = 16;
    Model m;
    model_init(&m, &wide);
    CHECK(ckpt_load(s.path, &m, NULL, NULL) != 0 && strstr(err_msg(), "shape"), "wider model loaded: %s", err_msg());
    model_free(&m);
    ModelConfig deeper = small_config();
    deeper.encoder_layers = 2;
    model_init(&m, &deeper);
    CHECK(ckpt_load(s.path, &m, NULL, NULL) != 0 && strstr(err_msg(), "another config"), "deeper: %s", err_msg());
    model_free(&m);
    /* weights only cannot resume */
    CkptMeta meta = {.config = ""};
    ckpt_save(s.path, &s.m, NULL, &meta);
    ModelConfig small = small_config();
    model_init(&m, &small);
    Adam a;
    adam_init(&a, m.n_params, 0.9, 0.98, 1e-9, 0);
    CHECK(ckpt_load(s.path, &m, &a, NULL) != 0 && strstr(err_msg(), "no optimizer state"), "%s", err_msg());
    CHECK(ckpt_load(s.path, &m, NULL, NULL) == 0, "weights-only load for translation: %s", err_msg());
    /* counters a resume would carry on from, past where they can count: refused, not wrapped */
    CkptMeta huge = {.config = "", .epoch = INT64_MAX};
    ckpt_save(s.path, &s.m, NULL, &huge);
    CHECK(ckpt_load(s.path, &m, NULL, NULL) != 0 && strstr(err_msg(), "'epoch' is out of range"), "epoch: %s",
          err_msg());
    huge = (CkptMeta){.config = "", .step = INT64_MAX};
    ckpt_save(s.path, &s.m, NULL, &huge);
    CHECK(ckpt_load(s.path, &m, NULL, NULL) != 0 && strstr(err_msg(), "'step' is out of range"), "step: %s", err_msg());
    adam_free(&a);
    model_free(&m);
    free_saved(&s);
}

/* A checkpoint's bytes with tensor `name`'s header shape replaced by `shape` (its byte
 * count kept, so the file still parses), both checksums made right again: a crafted file
 * only the shape check can catch. malloc'd; *n_out its length. */
static char *with_shape(const char *bytes, size_t len, const char *name, const char *shape, size_t *n_out) {
    uint64_t hlen;
    memcpy(&hlen, bytes, 8);
    json_t *root = json_loadb(bytes + 8, (size_t)hlen, 0, NULL);
    json_object_set_new(json_object_get(root, name), "shape", json_loads(shape, 0, NULL));
    json_object_set_new(json_object_get(root, "__metadata__"), "header_checksum", json_string("0000000000000000"));
    char *header = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    size_t hl = strlen(header), padded = (hl + 7) & ~(size_t)7, data = len - 8 - (size_t)hlen;
    char *out = xmalloc(8 + padded + data);
    uint64_t n = padded;
    memcpy(out, &n, 8);
    memcpy(out + 8, header, hl);
    memset(out + 8 + hl, ' ', padded - hl);
    memcpy(out + 8 + padded, bytes + 8 + hlen, data);
    free(header);
    char digits[17];
    snprintf(digits, sizeof digits, "%016" PRIx64, checksum64(out + 8, padded));
    memcpy(strstr(out + 8, "\"header_checksum\":\"") + strlen("\"header_checksum\":\""), digits, 16);
    *n_out = 8 + padded + data;
    return out;
}

/* A shape mismatch names every dimension of both shapes, a rank-3 one included. */
static void test_shape_mismatch_names_every_dimension(void) {
    Saved s;
    save_one(&s, 5);
    const TensorInfo *t = NULL;
    for (int i = 0; i < s.m.n_tensors && !t; i++)
        if (s.m.tensors[i].ndim == 2 && s.m.tensors[i].shape[1] % 2 == 0) t = &s.m.tensors[i];
    CHECK(t, "no matrix with an even second dimension in the small model");
    char name[128], shape[64], want[320];
    snprintf(name, sizeof name, "optim.m.%s", t->name);
    snprintf(shape, sizeof shape, "[%d, %d, 2]", t->shape[0], t->shape[1] / 2);
    size_t len, n;
    char *bytes = read_file(s.path, &len), *bad = with_shape(bytes, len, name, shape, &n);
    const char *why;
    CHECK(rejected_bytes(s.path, bad, n, &why), "a rank-3 %s: %s (%s)", name, why, err_msg());
    snprintf(want, sizeof want, "tensor '%s' has shape %s, this config needs [%d, %d]", name, shape, t->shape[0],
             t->shape[1]);
    CHECK(strstr(err_msg(), want), "'%s' does not say '%s'", err_msg(), want);
    free(bytes), free(bad);
    free_saved(&s);
}

/* Adam's second moments are squares: a negative one (a crafted file; its checksums
 * right) is refused, in one line naming the tensor, before the model is touched. */
static void test_negative_second_moment_rejected(void) {
    Saved s;
    save_one(&s, 6);
    s.adam.v[s.m.n_params - 3] = -0.5f;
    CkptMeta meta = {.step = 1, .config = ""};
    CHECK(ckpt_save(s.path, &s.m, &s.adam, &meta) == 0, "%s", err_msg());
    const char *why;
    CHECK(rejected(s.path, &why), "a negative second moment: %s", why ? why : "loaded");
    CHECK(strstr(err_msg(), "tensor 'optim.v.") && strstr(err_msg(), "-0.5") && strstr(err_msg(), "never negative"),
          "'%s'", err_msg());
    /* a negative first moment is an ordinary value */
    s.adam.v[s.m.n_params - 3] = 0.5f, s.adam.m[0] = -0.5f;
    CHECK(ckpt_save(s.path, &s.m, &s.adam, &meta) == 0, "%s", err_msg());
    Model m;
    Adam a;
    ModelConfig small = small_config();
    model_init(&m, &small);
    adam_init(&a, m.n_params, 0.9, 0.98, 1e-9, 0);
    CHECK(ckpt_load(s.path, &m, &a, NULL) == 0, "negative first moment refused: %s", err_msg());
    adam_free(&a);
    model_free(&m);
    free_saved(&s);
}

/* The header alone: the metadata of a whole file; a cut or damaged header refused in one
 * line naming the file, as a whole read would refuse it. */
static void test_peek_reads_the_header_alone(void) {
    Saved s;
    save_one(&s, 7);
    CkptMeta meta = {0};
    CHECK(ckpt_peek(s.path, &meta) == 0, "%s", err_msg());
    CHECK(meta.step == 42 && meta.epoch == 3 && strcmp(meta.config, "name: x\n") == 0, "step %lld",
          (long long)meta.step);
    ckpt_meta_free(&meta);
    size_t len;
    char *bytes = read_file(s.path, &len);
    uint64_t hlen;
    memcpy(&hlen, bytes, 8);
    char bad[160];
    snprintf(bad, sizeof bad, "%s.peek", s.path);
    const size_t cuts[] = {0, 5, 8, 9, 8 + (size_t)hlen / 2, 8 + (size_t)hlen - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
        write_bytes(bad, bytes, cuts[k]);
        CHECK(ckpt_peek(bad, &meta) != 0 && strncmp(err_msg(), bad, strlen(bad)) == 0 && !strchr(err_msg(), '\n'),
              "cut at %zu: '%s'", cuts[k], err_msg());
    }
    bytes[8 + hlen / 3] ^= 0x20;
    write_bytes(bad, bytes, len);
    CHECK(ckpt_peek(bad, &meta) != 0 && strstr(err_msg(), "header"), "flipped header byte: '%s'", err_msg());
    bytes[8 + hlen / 3] ^= 0x20;
    bytes[len - 1] ^= 0x20; /* the data is not read: a peek does not see its damage */
    write_bytes(bad, bytes, len);
    CHECK(ckpt_peek(bad, &meta) == 0 && meta.step == 42, "flipped data byte: '%s'", err_msg());
    ckpt_meta_free(&meta);
    unlink(bad);
    free(bytes);
    free_saved(&s);
}

/* The checksum of data fed in parts (as a checkpoint is saved: header, then each buffer
 * where it lies) equals the checksum of the same bytes at once, for cuts anywhere, word
 * boundaries or not; and it still sees a flipped bit. */
static void test_checksum_in_parts(void) {
    enum { N = 1003 };
    unsigned char data[N];
    Rng r = {17};
    for (int i = 0; i < N; i++) data[i] = (unsigned char)rng_below(&r, 256);
    uint64_t whole = checksum64(data, N);
    const int widths[] = {1, 3, 7, 8, 9, 13, 64, 500};
    for (int k = 0; k < 8; k++) {
        Checksum c;
        checksum_start(&c, N);
        for (int at = 0; at < N; at += widths[k])
            checksum_add(&c, data + at, (size_t)(N - at < widths[k] ? N - at : widths[k]));
        CHECK(checksum_end(&c) == whole, "parts of %d bytes give another checksum", widths[k]);
    }
    Checksum c;
    checksum_start(&c, N);
    checksum_add(&c, data, 501);
    data[700] ^= 4;
    checksum_add(&c, data + 501, N - 501);
    CHECK(checksum_end(&c) != whole, "a flipped bit in the second part goes unseen");
}

const TestCase checkpoint_tests[] = {
    {"checkpoint_checksum_in_parts_equals_whole", test_checksum_in_parts},
    {"checkpoint_round_trip_weights_moments_metadata", test_round_trip},
    {"checkpoint_truncated_anywhere_rejected", test_truncated_at_every_header_byte_and_across_data},
    {"checkpoint_flipped_byte_anywhere_rejected", test_flipped_byte_anywhere},
    {"checkpoint_foreign_files_and_other_configs_rejected", test_foreign_files_and_other_configs},
    {"checkpoint_shape_mismatch_names_every_dimension", test_shape_mismatch_names_every_dimension},
    {"checkpoint_negative_second_moment_rejected", test_negative_second_moment_rejected},
    {"checkpoint_peek_reads_the_header_alone", test_peek_reads_the_header_alone},
    {NULL, NULL},
};
