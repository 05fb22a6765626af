/* headmask: --mask-heads SPECs read against a model whose kinds have different layer
 * counts (1 encoder layer, 3 decoder layers, 4 heads), @FILE lists, the round trip
 * through head_mask_format, and every bad SPEC refused in one line naming the item. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "decode/headmask.h"
#include "fixture.h"
#include "nn/model.h"
#include "util/err.h"
#include "util/rng.h"
#include "util/text.h"

#define HEADS 4
#define ALL ((1 + 3 + 3) * HEADS)

static void tiny_model(Model *m) {
    ModelConfig cfg = fixture_config(10, 12, 16, HEADS, 32, 1, 3, 16);
    model_init(m, &cfg);
}

/* path: /tmp/qkv-headmask-PID-NAME holding text[0..n) */
static void write_file(char *path, size_t cap, const char *name, const char *text, size_t n) {
    snprintf(path, cap, "/tmp/qkv-headmask-%d-%s", (int)getpid(), name);
    FILE *f = fopen(path, "wb");
    if (f) fwrite(text, 1, n, f), fclose(f);
}

/* 1 when exactly the heads listed (kind, layer, head triples, ended by -1) are masked. */
static int masked_exactly(const Model *m, const float *g, const int *want) {
    float expect[ALL];
    for (int i = 0; i < ALL; i++) expect[i] = 1.0f;
    for (int i = 0; want[i] >= 0; i += 3) expect[model_head_index(m, (AttnKind)want[i], want[i + 1], want[i + 2])] = 0;
    return memcmp(expect, g, sizeof expect) == 0;
}

static void test_headmask_good_specs(void) {
    Model m;
    tiny_model(&m);
    CHECK(model_head_count(&m) == ALL, "%d heads, not %d", model_head_count(&m), ALL);
    float g[ALL];
    static const struct {
        const char *spec;
        int count;
        int heads[40]; /* (kind, layer, head) triples, -1 */
    } cases[] = {
        {"", 0, {-1}},
        {" ,\t, ", 0, {-1}},
        {"cross.2.3", 1, {ATTN_CROSS, 2, 3, -1}},
        {"dec.2.0", 1, {ATTN_DEC_SELF, 2, 0, -1}}, /* layer 2: valid for the decoder's kinds alone */
        {"enc.0.*", 4, {0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, -1}},
        {"dec.*.1", 3, {1, 0, 1, 1, 1, 1, 1, 2, 1, -1}},
        {"cross.*.*", 12, {2, 0, 0, 2, 0, 1, 2, 0, 2, 2, 0, 3, 2, 1, 0, 2, 1, 1, 2,
                           1, 2, 2, 1, 3, 2, 2, 0, 2, 2, 1, 2, 2, 2, 2, 2, 3, -1}},
        {"encoder_self.0.0,decoder_self.1.3 cross.0.2", 3, {0, 0, 0, 1, 1, 3, 2, 0, 2, -1}},
        {"  cross.1.1 ,, cross.1.1\n\tenc.0.3,\r\n", 2, {2, 1, 1, 0, 0, 3, -1}}, /* a head named twice: once */
        {"cross.1.*,cross.1.2", 4, {2, 1, 0, 2, 1, 1, 2, 1, 2, 2, 1, 3, -1}},
        {"cross.02.003", 1, {2, 2, 3, -1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = head_mask_parse(&m, cases[i].spec, g);
        CHECK(n == cases[i].count, "'%s': %d masked, want %d (%s)", cases[i].spec, n, cases[i].count,
              n < 0 ? err_msg() : "");
        CHECK(masked_exactly(&m, g, cases[i].heads), "'%s': not the heads it names", cases[i].spec);
    }
    model_free(&m);
}

static void test_headmask_file(void) {
    Model m;
    tiny_model(&m);
    float g[ALL];
    char path[3][256], spec[300];
    const char text[] = "# heads to mask\n"
                        "\n"
                        "cross.2.1\r\n"
                        "   # indented comment: cross.0.0\n"
                        "  dec.1.*   # trailing comment, enc.0.0\n"
                        "\t\n"
                        "encoder_self.0.3"; /* no final newline */
    write_file(path[0], sizeof path[0], "list", text, sizeof text - 1);
    write_file(path[1], sizeof path[1], "comments", "# nothing\n\n", 11);
    write_file(path[2], sizeof path[2], "empty", "", 0);
    snprintf(spec, sizeof spec, "@%s", path[0]);
    int n = head_mask_parse(&m, spec, g);
    int want[] = {2, 2, 1, 1, 1, 0, 1, 1, 1, 1, 1, 2, 1, 1, 3, 0, 0, 3, -1};
    CHECK(n == 6 && masked_exactly(&m, g, want), "@FILE: %d masked (%s)", n, n < 0 ? err_msg() : "");
    for (int i = 1; i < 3; i++) { /* comments and blank lines alone, or nothing: nothing masked */
        snprintf(spec, sizeof spec, "@%s", path[i]);
        n = head_mask_parse(&m, spec, g);
        CHECK(n == 0 && masked_exactly(&m, g, (int[]){-1}), "%s masked %d (%s)", path[i], n, n < 0 ? err_msg() : "");
    }
    for (int i = 0; i < 3; i++) unlink(path[i]);
    model_free(&m);
}

/* head_mask_parse_items (a server request's SPEC) never reads a file: "@FILE" naming a
 * good list is refused where head_mask_parse reads it, and its lines never reach the
 * message; the items themselves read as head_mask_parse reads them */
static void test_headmask_items_read_no_file(void) {
    Model m;
    tiny_model(&m);
    float g[ALL], h[ALL];
    char path[256], spec[300];
    write_file(path, sizeof path, "secret", "cross.2.1\n", 10);
    snprintf(spec, sizeof spec, "@%s", path);
    CHECK(head_mask_parse(&m, spec, g) == 1, "the file itself is a good list: %s", err_msg());
    for (int lead = 0; lead < 2; lead++) {
        snprintf(spec, sizeof spec, "%s@%s", lead ? "enc.0.0, " : "", path);
        int n = head_mask_parse_items(&m, spec, g);
        CHECK(n == -1 && strstr(err_msg(), "@FILE is a whole SPEC") && !strstr(err_msg(), "cross.2.1"),
              "'%s': %d masked, '%s'", spec, n, n < 0 ? err_msg() : "");
    }
    const char *items = "cross.2.1, dec.1.*";
    int a = head_mask_parse_items(&m, items, g), b = head_mask_parse(&m, items, h);
    CHECK(a == 5 && a == b && memcmp(g, h, sizeof g) == 0, "items: %d and %d masked", a, b);
    unlink(path);
    model_free(&m);
}

/* format writes the canonical items in model_head_index order; @FILE (and the text
 * itself as a SPEC) reads them back to the same gates */
static void test_headmask_format_round_trip(void) {
    Model m;
    tiny_model(&m);
    float g[ALL], back[ALL];
    for (int i = 0; i < ALL; i++) g[i] = 1.0f;
    g[model_head_index(&m, ATTN_ENC_SELF, 0, 1)] = 0, g[model_head_index(&m, ATTN_CROSS, 2, 3)] = 0;
    g[model_head_index(&m, ATTN_DEC_SELF, 2, 0)] = 0, g[model_head_index(&m, ATTN_CROSS, 0, 0)] = 0.5f; /* kept */
    StrBuf sb = {0};
    int n = head_mask_format(&m, g, &sb);
    CHECK(n == 3 && sb.buf && strcmp(sb.buf, "enc.0.1\ndec.2.0\ncross.2.3\n") == 0, "format: %d, '%s'", n,
          sb.buf ? sb.buf : "");
    sb_free(&sb);
    float ones[ALL];
    for (int i = 0; i < ALL; i++) ones[i] = 1.0f;
    CHECK(head_mask_format(&m, ones, &sb) == 0 && sb.len == 0, "nothing masked, yet %zu bytes", sb.len);
    Rng r;
    rng_seed(&r, 7);
    char path[256], spec[300];
    for (int trial = 0; trial < 50; trial++) {
        int want = 0;
        for (int i = 0; i < ALL; i++) g[i] = rng_uniform(&r) < (trial % 5) * 0.25 ? (want++, 0.0f) : 1.0f;
        sb_free(&sb);
        CHECK(head_mask_format(&m, g, &sb) == want, "trial %d: format counts wrong", trial);
        write_file(path, sizeof path, "round", sb.buf ? sb.buf : "", sb.len);
        snprintf(spec, sizeof spec, "@%s", path);
        n = head_mask_parse(&m, spec, back);
        CHECK(n == want && memcmp(g, back, sizeof g) == 0, "trial %d: @FILE read back %d of %d (%s)", trial, n, want,
              n < 0 ? err_msg() : "");
        n = head_mask_parse(&m, sb.buf ? sb.buf : "", back);
        CHECK(n == want && memcmp(g, back, sizeof g) == 0, "trial %d: the text as a SPEC read back %d of %d", trial, n,
              want);
    }
    sb_free(&sb);
    unlink(path);
    model_free(&m);
}

static void test_headmask_bad_specs_refused(void) {
    Model m;
    tiny_model(&m);
    float g[ALL];
    char dir[256], nul[256], longline[256], badline[256], fifo[256], spec[400];
    snprintf(dir, sizeof dir, "/tmp/qkv-headmask-%d-dir", (int)getpid());
    mkdir(dir, 0700);
    write_file(nul, sizeof nul, "nul", "cross.0.0\n\0\n", 12);
    char big[HEAD_MASK_LINE_MAX + 40];
    memset(big, ' ', sizeof big);
    memcpy(big, "cross.0.0\n", 10), memcpy(big + sizeof big - 10, "cross.0.1\n", 10);
    write_file(longline, sizeof longline, "long", big, sizeof big);
    write_file(badline, sizeof badline, "bad", "# ok so far\ncross.0.0\ncross.9.1\n", 32);
    snprintf(fifo, sizeof fifo, "/tmp/qkv-headmask-%d-fifo", (int)getpid());
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    char over[200];
    memset(over, 'x', sizeof over - 1), over[sizeof over - 1] = '\0';
    memcpy(over, "cross.0.", 8);
    static char specs[7][400];
    snprintf(specs[0], sizeof specs[0], "@%s", dir);
    snprintf(specs[1], sizeof specs[1], "@%s", nul);
    snprintf(specs[2], sizeof specs[2], "@%s", longline);
    snprintf(specs[3], sizeof specs[3], "@%s", badline);
    snprintf(specs[4], sizeof specs[4], "@%s", fifo);
    snprintf(specs[5], sizeof specs[5], "%s:2: a line of more than %d bytes", longline, HEAD_MASK_LINE_MAX);
    snprintf(specs[6], sizeof specs[6], "%s:3: 'cross.9.1': this model's cross-attention has layers 0..2", badline);
    struct {
        const char *spec, *want; /* want: a part of the message, after "--mask-heads: " */
    } cases[] = {
        {"bogus.0.0", "'bogus.0.0': unknown kind 'bogus': enc, dec or cross (or encoder_self, decoder_self)"},
        {"Cross.0.0", "'Cross.0.0': unknown kind 'Cross'"},
        {"*.0.0", "'*.0.0': unknown kind '*'"},
        {"cross.3.0", "'cross.3.0': this model's cross-attention has layers 0..2"},
        {"cross.0.0, enc.1.0", "'enc.1.0': this model's encoder self-attention has layers 0..0"},
        {"dec.0.4", "'dec.0.4': this model's decoder self-attention has heads 0..3"},
        {"cross.99999999999999999999.0", "has layers 0..2"},
        {"cross.0", "'cross.0': not KIND.LAYER.HEAD"},
        {"cross", "'cross': not KIND.LAYER.HEAD"},
        {"cross.0.0.0", "'cross.0.0.0': not KIND.LAYER.HEAD"},
        {"cross.x.0", "'cross.x.0': the layer 'x' is neither a number nor *"},
        {"cross..0", "'cross..0': the layer '' is neither"},
        {"cross.0.-1", "'cross.0.-1': the head '-1' is neither"},
        {"cross.0.+1", "the head '+1' is neither"},
        {"cross.0.**", "the head '**' is neither"},
        {"cross.0.0;1", "'cross.0.0;1': the head '0;1' is neither"},
        {"cross.0.0,@x", "'@x': @FILE is a whole SPEC"},
        {"cr\xce\xbfss.0.0", "'cr\\xce\\xbfss.0.0': unknown kind"},
        {over, "xxx...': not KIND.LAYER.HEAD"},
        {"@", "'@': no file name after the @"},
        {"@/nonexistent/heads.txt", "/nonexistent/heads.txt: No such file or directory"},
        {specs[0], "-dir: a directory, not a regular file"},
        {specs[1], "-nul: contains NUL bytes"},
        {specs[2], specs[5]},
        {specs[3], specs[6]},
        {specs[4], "-fifo: a FIFO, not a regular file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(spec, sizeof spec, "%s", cases[i].spec);
        int n = head_mask_parse(&m, spec, g);
        const char *msg = err_msg();
        CHECK(n == -1, "'%s' accepted (%d masked)", cases[i].spec, n);
        CHECK(strncmp(msg, "--mask-heads: ", 14) == 0 && strstr(msg, cases[i].want) && !strchr(msg, '\n'),
              "'%s': message '%s' lacks '%s'", cases[i].spec, msg, cases[i].want);
    }
    rmdir(dir), unlink(nul), unlink(longline), unlink(badline), unlink(fifo);
    model_free(&m);
}

const TestCase headmask_tests[] = {
    {"headmask_good_specs", test_headmask_good_specs},
    {"headmask_file", test_headmask_file},
    {"headmask_items_read_no_file", test_headmask_items_read_no_file},
    {"headmask_format_round_trip", test_headmask_format_round_trip},
    {"headmask_bad_specs_refused", test_headmask_bad_specs_refused},
    {NULL, NULL},
};
