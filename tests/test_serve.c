/* Tests of qkv serve's request checks, without a socket or a model: the API's JSON
 * (serve/api.c) and the gate's reading of a request's head (serve/gate.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "explain/explain_sentence.h"
#include "explain/whatif_run.h"
#include "serve/api.h"
#include "serve/gate.h"
#include "util/text.h"

/* parse body as kind; the status, and the message in err */
static int parse(int kind, const char *body, ApiRequest *r, char *err, size_t n) {
    err[0] = '\0';
    return api_parse(kind, body, strlen(body), r, err, n);
}

/* Good requests: every key read, translate's defaults where one is left out. */
static void test_api_parse_good(void) {
    ApiRequest r;
    char err[512];
    int st = parse(API_TRANSLATE, "{\"src\": [\"a b\", \"\", \"c\"]}", &r, err, sizeof err);
    CHECK(st == 0 && r.n == 3 && strcmp(r.src[0], "a b") == 0 && r.src[1][0] == '\0' && r.o.decode.nbest == 1 &&
              r.o.decode.beam == decode_defaults().beam && !r.mask_heads && !r.checkpoint && !r.tgt,
          "defaults: %d %s", st, err);
    api_request_free(&r);
    st = parse(API_TRANSLATE,
               "{\"src\": [\"x\"], \"beam\": 6, \"nbest\": 6, \"length_penalty\": 0.5, \"mask_heads\": \"cross.*.0\", "
               "\"checkpoint\": \"step-000100\"}",
               &r, err, sizeof err);
    CHECK(st == 0 && r.o.decode.beam == 6 && r.o.decode.nbest == 6 && r.o.decode.length_penalty == 0.5 &&
              strcmp(r.mask_heads, "cross.*.0") == 0 && strcmp(r.checkpoint, "step-000100") == 0,
          "every key: %d %s", st, err);
    api_request_free(&r);
    st = parse(API_ATTENTION, "{\"src\": \"a\", \"tgt\": \"b c\"}", &r, err, sizeof err);
    CHECK(st == 0 && r.n == 1 && strcmp(r.src[0], "a") == 0 && strcmp(r.tgt, "b c") == 0, "attention: %d %s", st, err);
    api_request_free(&r);
    st = parse(API_ATTENTION, "{\"src\": \"a\", \"tgt\": null}", &r, err, sizeof err);
    CHECK(st == 0 && !r.tgt, "attention, tgt null: %d %s", st, err);
    api_request_free(&r);
    st = parse(API_EXPLAIN, "{\"src\": \"a b\"}", &r, err, sizeof err);
    CHECK(st == 0 && r.n == 1 && strcmp(r.src[0], "a b") == 0 && !r.tgt && !r.contrast &&
              r.ig_steps == EXPLAIN_IG_STEPS && !r.mask_heads && !r.checkpoint,
          "explain, defaults: %d %s", st, err);
    api_request_free(&r);
    st = parse(API_EXPLAIN,
               "{\"src\": \"a\", \"tgt\": \"b c\", \"contrast\": \"d\", \"ig_steps\": 64, \"mask_heads\": "
               "\"cross.1.0\", \"checkpoint\": \"best\"}",
               &r, err, sizeof err);
    CHECK(st == 0 && strcmp(r.tgt, "b c") == 0 && strcmp(r.contrast, "d") == 0 && r.ig_steps == 64 &&
              strcmp(r.mask_heads, "cross.1.0") == 0 && strcmp(r.checkpoint, "best") == 0,
          "explain, every key: %d %s", st, err);
    api_request_free(&r);
    st = parse(API_EXPLAIN, "{\"src\": \"a\", \"tgt\": null, \"contrast\": null, \"ig_steps\": 0}", &r, err,
               sizeof err);
    CHECK(st == 0 && !r.tgt && !r.contrast && r.ig_steps == 0, "explain, nulls and no steps: %d %s", st, err);
    api_request_free(&r);
    /* null is a key not sent, for every key: the defaults */
    st = parse(API_EXPLAIN, "{\"src\": \"a\", \"ig_steps\": null, \"mask_heads\": null, \"checkpoint\": null}", &r, err,
               sizeof err);
    CHECK(st == 0 && r.ig_steps == EXPLAIN_IG_STEPS && !r.mask_heads && !r.checkpoint, "explain, nulls: %d %s", st,
          err);
    api_request_free(&r);
    st = parse(API_TRANSLATE, "{\"src\": [\"a\"]}", &r, err, sizeof err);
    CHECK(st == 0 && r.ig_steps == 0 && !r.contrast, "translate takes no explain option: %d %s", st, err);
    api_request_free(&r);
}

/* Every refusal: its status and the start of its one line. */
static void test_api_parse_refusals(void) {
    char many[64 * 1024], *p = many;
    p += sprintf(p, "{\"src\": [");
    for (int i = 0; i <= API_MAX_SENTENCES; i++) p += sprintf(p, "%s\"a\"", i ? "," : "");
    sprintf(p, "]}");
    StrBuf longs = {0};
    sb_printf(&longs, "{\"src\": [\"");
    for (int i = 0; i <= API_MAX_SENTENCE_BYTES; i++) sb_append(&longs, "a", 1);
    sb_printf(&longs, "\"]}");
    StrBuf longword = {0};
    sb_printf(&longword, "{\"src\": \"a\", \"contrast\": \"");
    for (int i = 0; i <= API_MAX_NAME; i++) sb_append(&longword, "a", 1);
    sb_printf(&longword, "\"}");
    StrBuf longsrc = {0};
    sb_printf(&longsrc, "{\"src\": \"");
    for (int i = 0; i <= API_MAX_SENTENCE_BYTES; i++) sb_append(&longsrc, "a", 1);
    sb_printf(&longsrc, "\"}");
    StrBuf longname = {0};
    sb_printf(&longname, "{\"src\": [\"a\"], \"checkpoint\": \"");
    for (int i = 0; i <= API_MAX_NAME; i++) sb_append(&longname, "a", 1);
    sb_printf(&longname, "\"}");
    struct {
        int kind;
        const char *body;
        int status;
        const char *want;
    } cases[] = {
        {API_TRANSLATE, "", 400, "malformed JSON"},
        {API_TRANSLATE, "{bad", 400, "malformed JSON"},
        {API_TRANSLATE, "{\"a\\\nb\": 1}", 400,
         "invalid escape near '\"a\\\\x0a'"}, /* the reason quotes a line break */
        {API_TRANSLATE, "[1]", 400, "the body must be a JSON object"},
        {API_TRANSLATE, "{\"src\": [\"caf\xe9\"]}", 400, "not well-formed UTF-8"},
        {API_TRANSLATE, "{}", 400, "\"src\" is missing"},
        {API_TRANSLATE, "{\"src\": \"a\"}", 400, "\"src\" must be an array"},
        {API_TRANSLATE, "{\"src\": [\"a\", 5]}", 400, "\"src\"[1] must be a string"},
        {API_TRANSLATE, "{\"src\": [\"a\\u0000b\"]}", 400, "is not allowed without JSON_ALLOW_NUL"},
        {API_TRANSLATE, "{\"src\": [\"a\\nb\"]}", 400, "line break"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"src\": [\"b\"]}", 400, "malformed JSON"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"colour\": 1}", 400, "unknown key \"colour\""},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"tgt\": \"b\"}", 400, "unknown key \"tgt\""},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"beam\": \"5\"}", 400, "\"beam\" must be an integer"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"beam\": 65}", 400, "\"beam\" must be 1 to 64"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"beam\": 0}", 400, "\"beam\" must be 1 to 64"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"beam\": 2, \"nbest\": 3}", 400, "\"nbest\" must be 1 to 2"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"length_penalty\": -1}", 400, "\"length_penalty\" must be a number"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"length_penalty\": \"x\"}", 400, "\"length_penalty\" must be a number"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"mask_heads\": 3}", 400, "\"mask_heads\" must be a string"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"mask_heads\": \"@/etc/shadow\"}", 400,
         "\"mask_heads\" is a list of heads"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"mask_heads\": \" cross.0.0,@x\"}", 400, "the API reads no file"},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"checkpoint\": \"a\\u0000b\"}", 400, "malformed JSON"},
        {API_TRANSLATE, longname.buf, 400, "\"checkpoint\" is longer than"},
        {API_TRANSLATE, many, 413, "65 sentences, more than the 64"},
        {API_TRANSLATE, longs.buf, 413, "\"src\"[0] is 4097 bytes"},
        {API_ATTENTION, "{\"src\": [\"a\"]}", 400, "\"src\" must be a string"},
        {API_ATTENTION, "{\"src\": \"a\", \"tgt\": 1}", 400, "\"tgt\" must be a string"},
        {API_ATTENTION, "{\"src\": \"a\", \"ig_steps\": 4}", 400, "unknown key \"ig_steps\""},
        {API_ATTENTION, "{\"src\": \"a\", \"contrast\": \"b\"}", 400, "unknown key \"contrast\""},
        {API_TRANSLATE, "{\"src\": [\"a\"], \"contrast\": \"b\"}", 400, "unknown key \"contrast\""},
        {API_EXPLAIN, "", 400, "malformed JSON"},
        {API_EXPLAIN, "[\"a\"]", 400, "the body must be a JSON object"},
        {API_EXPLAIN, "{}", 400, "\"src\" is missing"},
        {API_EXPLAIN, "{\"src\": [\"a\"]}", 400, "\"src\" must be a string"},
        {API_EXPLAIN, "{\"src\": null}", 400, "\"src\" is missing"},
        {API_EXPLAIN, "{\"src\": \"a\\nb\"}", 400, "\"src\" holds a line break"},
        {API_EXPLAIN, longsrc.buf, 413, "\"src\" is 4097 bytes"},
        {API_EXPLAIN, "{\"src\": \"a\", \"tgt\": 1}", 400, "\"tgt\" must be a string"},
        {API_EXPLAIN, "{\"src\": \"a\", \"tgt\": \"b\\rc\"}", 400, "\"tgt\" holds a line break"},
        {API_EXPLAIN, "{\"src\": \"a\", \"colour\": 1}", 400, "unknown key \"colour\""},
        {API_EXPLAIN, "{\"src\": \"a\", \"beam\": 2}", 400, "unknown key \"beam\""},
        {API_EXPLAIN, "{\"src\": \"a\", \"nbest\": 1}", 400, "unknown key \"nbest\""},
        {API_EXPLAIN, "{\"src\": \"a\", \"length_penalty\": 1}", 400, "unknown key \"length_penalty\""},
        {API_EXPLAIN, "{\"src\": \"a\", \"ig_steps\": -1}", 400, "\"ig_steps\" must be 0 to 64, not -1"},
        {API_EXPLAIN, "{\"src\": \"a\", \"ig_steps\": 65}", 400, "\"ig_steps\" must be 0 to 64, not 65"},
        {API_EXPLAIN, "{\"src\": \"a\", \"ig_steps\": \"x\"}", 400, "\"ig_steps\" must be an integer"},
        {API_EXPLAIN, "{\"src\": \"a\", \"ig_steps\": 1.5}", 400, "\"ig_steps\" must be an integer"},
        {API_EXPLAIN, "{\"src\": \"a\", \"ig_steps\": 99999999999999999999}", 400, "malformed JSON"},
        {API_EXPLAIN, "{\"src\": \"a\", \"contrast\": 3}", 400, "\"contrast\" must be a string"},
        {API_EXPLAIN, longword.buf, 400, "\"contrast\" is longer than 128 bytes"},
        {API_EXPLAIN, "{\"src\": \"a\", \"mask_heads\": \"@/etc/passwd\"}", 400, "the API reads no file"},
        {API_EXPLAIN, "{\"src\": \"a\", \"checkpoint\": 1}", 400, "\"checkpoint\" must be a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ApiRequest r;
        char err[512];
        int st = parse(cases[i].kind, cases[i].body, &r, err, sizeof err);
        CHECK(st == cases[i].status && strstr(err, cases[i].want) && !strchr(err, '\n'),
              "case %zu: %d '%s' (want %d '%s')", i, st, err, cases[i].status, cases[i].want);
        CHECK(r.src == NULL && r.n == 0 && r.mask_heads == NULL && r.tgt == NULL && r.contrast == NULL,
              "case %zu: a refused request holds nothing", i);
    }
    /* the body's own bound, before any parsing */
    ApiRequest r;
    char err[256];
    char *big = calloc(API_MAX_BODY + 2, 1);
    memset(big, ' ', API_MAX_BODY + 1);
    int st = api_parse(API_TRANSLATE, big, API_MAX_BODY + 1, &r, err, sizeof err);
    CHECK(st == 413 && strstr(err, "more than the"), "a body over the bound: %d '%s'", st, err);
    free(big), sb_free(&longs), sb_free(&longname), sb_free(&longword), sb_free(&longsrc);
}

/* whatif and patch: every key read, the defaults where one is left out, every refusal. */
static void test_api_parse_whatif_and_patch(void) {
    ApiRequest r;
    char err[512];
    int st = parse(API_WHATIF, "{\"src\": \"a b\"}", &r, err, sizeof err);
    CHECK(st == 0 && r.n == 1 && strcmp(r.src[0], "a b") == 0 && !r.tgt && !r.pin && r.top == WHATIF_TOP && !r.lens &&
              !r.tree && r.o.decode.beam == WHATIF_BEAM && !r.mask_heads,
          "whatif, defaults: %d %s", st, err);
    api_request_free(&r);
    st = parse(API_WHATIF,
               "{\"src\": \"a\", \"tgt\": \"b\", \"mask_heads\": \"cross.1.0\", \"pin\": {\"layer\": 1, \"head\": 2, "
               "\"query\": 3, \"key\": 0}, \"top\": 20, \"lens\": true, \"tree\": true, \"beam\": 8, \"checkpoint\": "
               "\"best\"}",
               &r, err, sizeof err);
    CHECK(st == 0 && strcmp(r.tgt, "b") == 0 && r.pin && r.pin_layer == 1 && r.pin_head == 2 && r.pin_query == 3 &&
              r.pin_key == 0 && !r.pin_weights && r.top == 20 && r.lens && r.tree && r.o.decode.beam == 8 &&
              strcmp(r.mask_heads, "cross.1.0") == 0 && strcmp(r.checkpoint, "best") == 0,
          "whatif, every key: %d %s", st, err);
    api_request_free(&r);
    st = parse(API_WHATIF,
               "{\"src\": \"a\", \"pin\": {\"layer\": 0, \"head\": 0, \"query\": 0, \"weights\": [0.25, 0.75]}}", &r,
               err, sizeof err);
    CHECK(st == 0 && r.pin && r.pin_key == -1 && r.n_pin_weights == 2 && r.pin_weights[1] == 0.75f,
          "whatif, pinned weights: %d %s", st, err);
    api_request_free(&r);
    st = parse(API_PATCH, "{\"clean\": \"a b\", \"corrupt\": \"a c\"}", &r, err, sizeof err);
    CHECK(st == 0 && r.n == 1 && strcmp(r.src[0], "a b") == 0 && strcmp(r.corrupt, "a c") == 0 && !r.compare[0] &&
              r.at == 0 && !r.tgt,
          "patch, defaults: %d %s", st, err);
    api_request_free(&r);
    st = parse(API_PATCH,
               "{\"clean\": \"a\", \"corrupt\": \"b\", \"tgt\": \"c\", \"compare\": [\"x\", \"y\"], \"at\": 2, "
               "\"checkpoint\": \"step-000100\"}",
               &r, err, sizeof err);
    CHECK(st == 0 && strcmp(r.tgt, "c") == 0 && strcmp(r.compare[0], "x") == 0 && strcmp(r.compare[1], "y") == 0 &&
              r.at == 2 && strcmp(r.checkpoint, "step-000100") == 0,
          "patch, every key: %d %s", st, err);
    api_request_free(&r);
    struct {
        int kind;
        const char *body, *want;
    } cases[] = {
        {API_WHATIF, "{\"src\": [\"a\"]}", "\"src\" must be a string"},
        {API_WHATIF, "{\"src\": \"a\", \"nbest\": 2}", "unknown key \"nbest\""},
        {API_WHATIF, "{\"src\": \"a\", \"ig_steps\": 2}", "unknown key \"ig_steps\""},
        {API_WHATIF, "{\"src\": \"a\", \"top\": 0}", "\"top\" must be 1 to 20, not 0"},
        {API_WHATIF, "{\"src\": \"a\", \"top\": 21}", "\"top\" must be 1 to 20"},
        {API_WHATIF, "{\"src\": \"a\", \"tree\": true, \"beam\": 1}", "\"beam\" must be 2 to 8, not 1"},
        {API_WHATIF, "{\"src\": \"a\", \"tree\": true, \"beam\": 9}", "\"beam\" must be 2 to 8"},
        {API_WHATIF, "{\"src\": \"a\", \"beam\": 3}", "\"beam\" goes with \"tree\": true"},
        {API_WHATIF, "{\"src\": \"a\", \"tree\": false, \"beam\": 3}", "\"beam\" goes with \"tree\": true"},
        {API_WHATIF, "{\"src\": \"a\", \"lens\": 1}", "\"lens\" must be true or false"},
        {API_WHATIF, "{\"src\": \"a\", \"tree\": \"yes\"}", "\"tree\" must be true or false"},
        {API_WHATIF, "{\"src\": \"a\", \"pin\": 3}", "\"pin\" must be an object"},
        {API_WHATIF, "{\"src\": \"a\", \"pin\": {\"head\": 0, \"query\": 0, \"key\": 0}}", "\"pin.layer\" is missing"},
        {API_WHATIF, "{\"src\": \"a\", \"pin\": {\"layer\": -1, \"head\": 0, \"query\": 0, \"key\": 0}}",
         "\"pin.layer\" must be 0 to"},
        {API_WHATIF, "{\"src\": \"a\", \"pin\": {\"layer\": 0, \"head\": 0, \"query\": 0}}", "takes one of \"key\""},
        {API_WHATIF,
         "{\"src\": \"a\", \"pin\": {\"layer\": 0, \"head\": 0, \"query\": 0, \"key\": 0, \"weights\": [1]}}",
         "takes one of \"key\""},
        {API_WHATIF, "{\"src\": \"a\", \"pin\": {\"layer\": 0, \"head\": 0, \"query\": 0, \"kee\": 0}}",
         "\"pin\": unknown key \"kee\""},
        {API_WHATIF, "{\"src\": \"a\", \"pin\": {\"layer\": 0, \"head\": 0, \"query\": 0, \"weights\": [0.5, 0.4]}}",
         "\"pin.weights\" sum to 0.9, not 1"},
        {API_WHATIF, "{\"src\": \"a\", \"pin\": {\"layer\": 0, \"head\": 0, \"query\": 0, \"weights\": [2, -1]}}",
         "\"pin.weights\"[0] must be a number from 0 to 1"},
        {API_WHATIF, "{\"src\": \"a\", \"pin\": {\"layer\": 0, \"head\": 0, \"query\": 0, \"weights\": []}}",
         "\"pin.weights\" must be an array"},
        {API_WHATIF, "{\"src\": \"a\", \"mask_heads\": \"@x\"}", "the API reads no file"},
        {API_PATCH, "{\"src\": \"a\", \"corrupt\": \"b\"}", "unknown key \"src\""},
        {API_PATCH, "{\"corrupt\": \"b\"}", "\"clean\" is missing"},
        {API_PATCH, "{\"clean\": \"a\"}", "\"corrupt\" is missing"},
        {API_PATCH, "{\"clean\": \"a\", \"corrupt\": 1}", "\"corrupt\" must be a string"},
        {API_PATCH, "{\"clean\": \"a\", \"corrupt\": \"b\\nc\"}", "\"corrupt\" holds a line break"},
        {API_PATCH, "{\"clean\": \"a\", \"corrupt\": \"b\", \"compare\": [\"x\"]}", "\"compare\" must be two words"},
        {API_PATCH, "{\"clean\": \"a\", \"corrupt\": \"b\", \"compare\": [\"x\", 1]}",
         "\"compare[1]\" must be a string"},
        {API_PATCH, "{\"clean\": \"a\", \"corrupt\": \"b\", \"compare\": [\"\", \"y\"]}", "\"compare[0]\" is empty"},
        {API_PATCH, "{\"clean\": \"a\", \"corrupt\": \"b\", \"at\": 1}", "send both or neither"},
        {API_PATCH, "{\"clean\": \"a\", \"corrupt\": \"b\", \"compare\": [\"x\", \"y\"], \"at\": -1}",
         "\"at\" must be 0 to"},
        {API_PATCH, "{\"clean\": \"a\", \"corrupt\": \"b\", \"mask_heads\": \"enc.0.0\"}",
         "unknown key \"mask_heads\""},
        {API_EXPLAIN, "{\"src\": \"a\", \"pin\": {}}", "unknown key \"pin\""},
        {API_ATTENTION, "{\"src\": \"a\", \"top\": 3}", "unknown key \"top\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        st = parse(cases[i].kind, cases[i].body, &r, err, sizeof err);
        CHECK(st == 400 && strstr(err, cases[i].want) && !strchr(err, '\n'), "case %zu: %d '%s' (want 400 '%s')", i, st,
              err, cases[i].want);
        CHECK(r.src == NULL && r.n == 0 && r.pin_weights == NULL && r.corrupt == NULL && r.compare[0] == NULL,
              "case %zu: a refused request holds nothing", i);
    }
}

/* The error shape every refusal has: {"error": one line}, whatever the line holds: a
 * header's bytes that are not UTF-8, a key with a line break. */
static void test_api_error_json(void) {
    char *j = api_error_json("a \"quoted\" <b> line");
    CHECK(j && strcmp(j, "{\"error\":\"a \\\"quoted\\\" <b> line\"}") == 0, "%s", j ? j : "NULL");
    free(j);
    j = api_error_json("Host '\xff\xfe' and\na break");
    CHECK(j && strcmp(j, "{\"error\":\"Host '\xef\xbf\xbd\xef\xbf\xbd' and\\\\x0aa break\"}") == 0, "%s",
          j ? j : "NULL");
    free(j);
    char q[32];
    api_quote(q, sizeof q, "abc\tdef", 64);
    CHECK(strcmp(q, "abc\\x09def") == 0, "%s", q);
    api_quote(q, sizeof q, "abcdefgh", 4);
    CHECK(strcmp(q, "abcd...") == 0, "%s", q);
    api_quote(q, sizeof q, "ab\xc3\xa9\xc3\xa9", 5); /* é é: the second does not fit whole */
    CHECK(strcmp(q, "ab\xc3\xa9...") == 0, "%s", q);
    api_quote(q, 8, "aaaaaaaaaaaaaaaa", 64); /* the buffer bounds it too */
    CHECK(strlen(q) < 8, "%s", q);
}

/* ---- the gate ----------------------------------------------------------------------------- */

static int head(const char *text, GateVerdict *v) { return gate_check_head(text, strlen(text), 1000, v); }

static void test_gate_good_heads(void) {
    GateVerdict v;
    CHECK(head("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", &v) == 1 && v.status == 0, "GET: %d %s", v.status,
          v.error);
    CHECK(head("POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n{", &v) ==
                  1 &&
              v.status == 0 && v.body == 1000 && v.expect_continue,
          "POST at the bound: %d %s", v.status, v.error);
    CHECK(head("GET /x HTTP/1.0\n\n", &v) == 1 && v.status == 0, "HTTP/1.0 with bare line feeds, no Host: %d %s",
          v.status, v.error);
    CHECK(head("POST / HTTP/1.1\r\nhost: x\r\ncontent-length:  12\r\ncontent-type:application/json\r\n\r\n", &v) == 1 &&
              v.status == 0 && v.body == 12,
          "names in any case, spaces before a value: %d %s", v.status, v.error);
}

/* A head not all here yet is waited for; one that cannot become a request is refused at
 * once. */
static void test_gate_waits_for_the_head(void) {
    const char *parts[] = {"",
                           "G",
                           "GET",
                           "GET ",
                           "GET /v1/health",
                           "GET /v1/health HTTP/1.1",
                           "GET /v1/health HTTP/1.1\r\n",
                           "GET /v1/health HTTP/1.1\r\nHost: a",
                           "GET /v1/health HTTP/1.1\r\nHost: a\r\n",
                           "GET /v1/health HTTP/1.1\r\nHost: a\r\n\r"};
    GateVerdict v;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        CHECK(head(parts[i], &v) == 0, "'%s' decided (%d %s) before its end", parts[i], v.status, v.error);
    CHECK(head("\x16\x03\x01", &v) == 1 && v.status == 400, "a TLS hello waited for");
    CHECK(head("GET\x01", &v) == 1 && v.status == 400, "a control byte in the method waited for");
}

static void test_gate_refusals(void) {
    char *line = malloc(GATE_LINE_MAX + 64), *hdr = malloc(GATE_HEAD_MAX + 64), many[4096];
    int at = snprintf(many, sizeof many, "GET / HTTP/1.1\r\nHost: a\r\n"); /* 101 lines, 1 KB */
    for (int i = 1; i < GATE_HEADERS_MAX + 1; i++) at += snprintf(many + at, sizeof many - (size_t)at, "a:b\r\n");
    snprintf(many + at, sizeof many - (size_t)at, "\r\n");
    snprintf(line, GATE_LINE_MAX + 64, "GET /%0*d", GATE_LINE_MAX, 0);
    snprintf(hdr, GATE_HEAD_MAX + 64, "GET / HTTP/1.1\r\nHost: a\r\nX: %0*d\r\n\r\n", GATE_HEAD_MAX, 0);
    struct {
        const char *text;
        int status;
        const char *want;
    } cases[] = {
        {line, 414, "the request line is longer than 8192 bytes"},
        {hdr, 431, "the request's headers are longer than 16384 bytes"},
        {"HELLO\r\n\r\n", 400, "the request line is not"},
        {"GET /\r\n\r\n", 400, "the request line is not"},
        {"GET  / HTTP/1.1\r\n\r\n", 400, "the request line is not"},
        {"GET / HTTP/1.1 x\r\n\r\n", 400, "the request line is not"},
        {"GET / FTP/1.1\r\n\r\n", 400, "the request line is not"},
        {"GET /\x7f HTTP/1.1\r\n\r\n", 400, "the request line is not"},
        {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, "only HTTP/1.0 and HTTP/1.1"},
        {"GET / HTTP/1.1\r\n\r\n", 400, "names no Host"},
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host twice"},
        {"GET / HTTP/1.1\r\nHost a\r\n\r\n", 400, "not NAME: VALUE"},
        {"GET / HTTP/1.1\r\n: a\r\n\r\n", 400, "not NAME: VALUE"},
        {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400, "folded"},
        {"GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n", 400, "control byte"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length is not a number"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1e3\r\n\r\n", 400, "Content-Length is not a number"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", 400, "Content-Length is not a number"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, "twice, apart"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n", 413, "larger than the 1000 bytes"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000000000000000000000\r\n\r\n", 413, "larger than the"},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 411, "no Transfer-Encoding is taken"},
        {"POST /v1/translate HTTP/1.1\r\nHost: a\r\n\r\n{\"src\": [\"a\"]}", 411,
         "a POST's body needs its Content-Length"},
        {"POST /v1/translate HTTP/1.0\r\n\r\n", 411, "a POST's body needs its Content-Length"},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 411, "with its Content-Length"},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked \r\n\r\n", 411, "with its Content-Length"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 411,
         "Content-Length"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 20 \r\n\r\n", 400, "Content-Length is not a number"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 20\t\r\n\r\n", 400, "Content-Length is not a number"},
        {many, 431, "more than 100 header lines"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        GateVerdict v;
        int decided = head(cases[i].text, &v);
        CHECK(decided == 1 && v.status == cases[i].status && strstr(v.error, cases[i].want),
              "case %zu: %d %d '%s' (want %d '%s')", i, decided, v.status, v.error, cases[i].status, cases[i].want);
    }
    free(line), free(hdr);
}

/* What libmicrohttpd keeps an entry for besides header lines: query arguments and
 * cookies, counted up to their bounds and refused past them. */
static void test_gate_counts_arguments_and_cookies(void) {
    char args[2048], cookies[2048];
    GateVerdict v;
    for (int extra = 0; extra < 2; extra++) {
        int at = snprintf(args, sizeof args, "GET /v1/health?a=1");
        for (int i = 1; i < GATE_ARGUMENTS_MAX + extra; i++)
            at += snprintf(args + at, sizeof args - (size_t)at, "%sb", i % 2 ? "&" : ";");
        snprintf(args + at, sizeof args - (size_t)at, " HTTP/1.1\r\nHost: a\r\n\r\n");
        /* two Cookie headers, ';' and ',' apart: counted together */
        at = snprintf(cookies, sizeof cookies, "GET / HTTP/1.1\r\nHost: a\r\nCookie: a=1");
        for (int i = 1; i < GATE_COOKIES_MAX + extra; i++)
            at += snprintf(cookies + at, sizeof cookies - (size_t)at, "%s",
                           i == GATE_COOKIES_MAX / 2 ? "\r\nCookie: b"
                           : i % 2                   ? "; b=2"
                                                     : ",c");
        snprintf(cookies + at, sizeof cookies - (size_t)at, "\r\n\r\n");
        int decided = head(args, &v);
        CHECK(decided == 1 && v.status == (extra ? 414 : 0) &&
                  (!extra || strcmp(v.error, "the request's target has more than 100 query arguments") == 0),
              "%d query arguments: %d %d '%s'", GATE_ARGUMENTS_MAX + extra, decided, v.status, v.error);
        decided = head(cookies, &v);
        CHECK(decided == 1 && v.status == (extra ? 431 : 0) &&
                  (!extra || strcmp(v.error, "the request has more than 100 cookies") == 0),
              "%d cookies: %d %d '%s'", GATE_COOKIES_MAX + extra, decided, v.status, v.error);
    }
    CHECK(head("GET /a&b;c,d HTTP/1.1\r\nHost: a\r\nX-Not-A-Cookie: a;b\r\n\r\n", &v) == 1 && v.status == 0,
          "separators outside a query or a Cookie: %d %s", v.status, v.error);
}

/* A refusal's answer is a whole HTTP response whose body is the API's error JSON, of the
 * length it says, and it closes the connection. */
static void test_gate_answer(void) {
    GateVerdict v;
    head("GET / HTTP/9.9\r\n\r\n", &v);
    size_t len;
    char *a = gate_answer(&v, &len);
    const char *body = strstr(a, "\r\n\r\n");
    char want[64];
    snprintf(want, sizeof want, "Content-Length: %zu\r\n", body ? strlen(body + 4) : 0);
    CHECK(len == strlen(a) && strncmp(a, "HTTP/1.1 505 HTTP Version Not Supported\r\n", 41) == 0 && strstr(a, want) &&
              strstr(a, "Connection: close\r\n") && strstr(a, "Content-Type: application/json\r\n") && body &&
              strcmp(body + 4, "{\"error\":\"only HTTP/1.0 and HTTP/1.1 are spoken here\"}") == 0,
          "%s", a);
    free(a);
}

const TestCase serve_tests[] = {
    {"serve_api_parse_good", test_api_parse_good},
    {"serve_api_parse_refusals", test_api_parse_refusals},
    {"serve_api_parse_whatif_and_patch", test_api_parse_whatif_and_patch},
    {"serve_api_error_json", test_api_error_json},
    {"serve_gate_good_heads", test_gate_good_heads},
    {"serve_gate_waits_for_the_head", test_gate_waits_for_the_head},
    {"serve_gate_refusals", test_gate_refusals},
    {"serve_gate_counts_arguments_and_cookies", test_gate_counts_arguments_and_cookies},
    {"serve_gate_answer", test_gate_answer},
    {NULL, NULL},
};
