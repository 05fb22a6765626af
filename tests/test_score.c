/* BLEU and chrF against sacrebleu 2.6.0's own figures for the files in tests/scoring
 * (expected.json): every corpus figure and the first five sentence BLEUs, to 1e-4. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "score/sacrebleu.h"
#include "util/file.h"
#include "util/text.h"

#define SCORING "tests/scoring/"
#define TOL 1e-4

static char **lines_of(const char *name, int *n) {
    char path[512];
    snprintf(path, sizeof path, SCORING "%s", name);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char **l = read_lines(f, n);
    fclose(f);
    return l;
}

static int near(double got, json_t *want) { return fabs(got - json_number_value(want)) <= TOL; }

/* One case of expected.json; returns a description of the first mismatch, or NULL. */
static const char *check_case(const char *name, json_t *c, char **ref, int n_ref, char *why, size_t why_n) {
    int n;
    char **hyp = lines_of(json_string_value(json_object_get(c, "file")), &n);
    if (!hyp || n != n_ref) return snprintf(why, why_n, "%s: cannot read it or %d lines", name, n), why;
    BleuStats b = {0};
    ChrfStats ch = {0};
    for (int i = 0; i < n; i++) bleu_add(&b, hyp[i], ref[i]), chrf_add(&ch, hyp[i], ref[i]);
    Bleu s = bleu_compute(&b, 0);
    const char *bad = NULL;
    if (!near(s.score, json_object_get(c, "bleu"))) bad = "bleu";
    else if (!near(s.bp, json_object_get(c, "bp"))) bad = "bp";
    else if (!near(chrf_compute(&ch), json_object_get(c, "chrf"))) bad = "chrf";
    else if (b.sys_len != json_integer_value(json_object_get(c, "sys_len"))) bad = "sys_len";
    else if (b.ref_len != json_integer_value(json_object_get(c, "ref_len"))) bad = "ref_len";
    for (int k = 0; !bad && k < BLEU_ORDER; k++) {
        if (b.counts[k] != json_integer_value(json_array_get(json_object_get(c, "counts"), k))) bad = "counts";
        else if (b.totals[k] != json_integer_value(json_array_get(json_object_get(c, "totals"), k))) bad = "totals";
        else if (!near(s.precisions[k], json_array_get(json_object_get(c, "precisions"), k))) bad = "precisions";
    }
    for (int i = 0; !bad && i < 5; i++) {
        BleuStats one = {0};
        bleu_add(&one, hyp[i], ref[i]);
        if (!near(bleu_compute(&one, 1).score, json_array_get(json_object_get(c, "sentence_bleu_first5"), i)))
            bad = "sentence bleu";
    }
    if (bad)
        snprintf(why, why_n, "%s: %s differs from sacrebleu (BLEU %.4f, chrF %.4f)", name, bad, s.score,
                 chrf_compute(&ch));
    free_lines(hyp, n);
    return bad ? why : NULL;
}

static void test_scores_equal_sacrebleu(void) {
    json_error_t e;
    json_t *root = json_load_file(SCORING "expected.json", 0, &e);
    CHECK(root, "cannot read " SCORING "expected.json: %s", e.text);
    int n_ref;
    char **ref = lines_of(json_string_value(json_object_get(root, "reference")), &n_ref);
    CHECK(ref && n_ref == 1000, "reference: %d lines", n_ref);
    CHECK(strcmp(json_string_value(json_object_get(root, "bleu_signature")), BLEU_SIGNATURE) == 0, "BLEU signature");
    CHECK(strcmp(json_string_value(json_object_get(root, "chrf_signature")), CHRF_SIGNATURE) == 0, "chrF signature");
    const char *name;
    json_t *c;
    char why[256];
    int cases = 0;
    const char *bad = NULL;
    json_object_foreach(json_object_get(root, "cases"), name, c) {
        bad = check_case(name, c, ref, n_ref, why, sizeof why);
        if (bad) break;
        cases++;
    }
    free_lines(ref, n_ref);
    json_decref(root);
    CHECK(!bad, "%s", bad);
    CHECK(cases >= 9, "only %d cases in expected.json", cases);
}

/* The 13a rules one by one, on strings whose tokenization is known from the rules. */
static void test_tokenize_13a(void) {
    static const char *cases[][2] = {
        {"Hello, world.", "Hello , world ."},
        {"It costs 3,5 km... (ok)?", "It costs 3,5 km . . . ( ok ) ?"},
        {"a-b 1-2 x/y &amp; &lt;b&gt;", "a-b 1 - 2 x / y & < b >"},
        {"  spaced\tout  ", "spaced out"},
        {"ä, “quoted” – dash", "ä , “quoted” – dash"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        StrBuf out = {0};
        bleu_tokenize_13a(cases[i][0], &out);
        int ok = strcmp(out.buf, cases[i][1]) == 0;
        CHECK(ok, "13a('%s') = '%s', want '%s'", cases[i][0], out.buf, cases[i][1]);
        sb_free(&out);
    }
}

const TestCase score_tests[] = {
    {"score_13a_tokenization", test_tokenize_13a},
    {"score_bleu_chrf_equal_sacrebleu", test_scores_equal_sacrebleu},
    {NULL, NULL},
};
