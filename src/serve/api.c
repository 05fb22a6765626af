/* api: see api.h. */
#include "serve/api.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "decode/search.h"
#include "explain/explain_sentence.h"
#include "explain/whatif_run.h"
#include "util/mem.h"
#include "util/text.h"

static int fail(int status, char *err, size_t errn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errn, fmt, ap);
    va_end(ap);
    return status;
}

/* Each key and the kinds of request that take it (a bit per kind): explain's translation
 * is the greedy one, so it takes no decoding option. */
#define KIND(k) (1u << (k))
#define SENTENCE_KINDS (KIND(API_ATTENTION) | KIND(API_EXPLAIN) | KIND(API_WHATIF))
static const struct {
    const char *name;
    unsigned kinds;
} known[] = {
    {"src", KIND(API_TRANSLATE) | SENTENCE_KINDS},
    {"tgt", SENTENCE_KINDS | KIND(API_PATCH)},
    {"beam", KIND(API_TRANSLATE) | KIND(API_ATTENTION) | KIND(API_WHATIF)},
    {"nbest", KIND(API_TRANSLATE) | KIND(API_ATTENTION)},
    {"length_penalty", KIND(API_TRANSLATE) | KIND(API_ATTENTION)},
    {"mask_heads", KIND(API_TRANSLATE) | SENTENCE_KINDS},
    {"checkpoint", KIND(API_TRANSLATE) | SENTENCE_KINDS | KIND(API_PATCH)},
    {"contrast", KIND(API_EXPLAIN)},
    {"ig_steps", KIND(API_EXPLAIN)},
    {"pin", KIND(API_WHATIF)},
    {"top", KIND(API_WHATIF)},
    {"lens", KIND(API_WHATIF)},
    {"tree", KIND(API_WHATIF)},
    {"clean", KIND(API_PATCH)},
    {"corrupt", KIND(API_PATCH)},
    {"compare", KIND(API_PATCH)},
    {"at", KIND(API_PATCH)},
};

static int known_key(const char *k, int kind) {
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strcmp(k, known[i].name) == 0) return (known[i].kinds & KIND(kind)) != 0;
    return 0;
}

/* A string that must be short: copied into *out; 0 or 400. */
static int short_string(json_t *v, const char *key, char **out, char *err, size_t errn) {
    if (!v) return 0;
    if (!json_is_string(v)) return fail(400, err, errn, "\"%s\" must be a string", key);
    if (json_string_length(v) > API_MAX_NAME)
        return fail(400, err, errn, "\"%s\" is longer than %d bytes", key, API_MAX_NAME);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return fail(400, err, errn, "\"%s\" holds a NUL character", key);
    *out = xstrdup(json_string_value(v));
    return 0;
}

/* One sentence: a string of well-formed UTF-8 with no NUL and no line break, within the
 * byte bound. 0, 400 or 413. */
static int sentence(json_t *v, const char *what, char **out, char *err, size_t errn) {
    if (!json_is_string(v)) return fail(400, err, errn, "%s must be a string", what);
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n > API_MAX_SENTENCE_BYTES)
        return fail(413, err, errn, "%s is %zu bytes, more than the %d allowed", what, n, API_MAX_SENTENCE_BYTES);
    if (strlen(s) != n) return fail(400, err, errn, "%s holds a NUL character", what);
    if (strpbrk(s, "\r\n")) return fail(400, err, errn, "%s holds a line break: send one sentence per string", what);
    *out = xstrdup(s);
    return 0;
}

static int integer(json_t *v, const char *key, int lo, int hi, int *out, char *err, size_t errn) {
    if (!v) return 0;
    if (!json_is_integer(v)) return fail(400, err, errn, "\"%s\" must be an integer", key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return fail(400, err, errn, "\"%s\" must be %d to %d, not %lld", key, lo, hi, (long long)x);
    *out = (int)x;
    return 0;
}

static int boolean(json_t *v, const char *key, int *out, char *err, size_t errn) {
    if (!v) return 0;
    if (!json_is_boolean(v)) return fail(400, err, errn, "\"%s\" must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* "pin": {"layer", "head", "query", and "key" or "weights"}: ranges against the model are
 * the worker's; here, integers, and weights that are a distribution. 0 or 400. */
static int pin_object(json_t *p, ApiRequest *out, char *err, size_t errn) {
    if (!json_is_object(p))
        return fail(400, err, errn, "\"pin\" must be an object {\"layer\", \"head\", \"query\", \"key\"}");
    const char *key;
    json_t *v;
    json_object_foreach(p, key, v) {
        if (strcmp(key, "layer") && strcmp(key, "head") && strcmp(key, "query") && strcmp(key, "key") &&
            strcmp(key, "weights")) {
            char shown[96];
            api_quote(shown, sizeof shown, key, 64);
            return fail(400, err, errn, "\"pin\": unknown key \"%s\"", shown);
        }
    }
    static const char *const need[] = {"layer", "head", "query"};
    int *to[] = {&out->pin_layer, &out->pin_head, &out->pin_query}, rc;
    char name[32];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "pin.%s", need[i]);
        if (!json_object_get(p, need[i])) return fail(400, err, errn, "\"%s\" is missing", name);
        if ((rc = integer(json_object_get(p, need[i]), name, 0, 100000, to[i], err, errn)) != 0) return rc;
    }
    json_t *k = json_object_get(p, "key"), *w = json_object_get(p, "weights");
    if ((k != NULL) == (w != NULL))
        return fail(400, err, errn, "\"pin\" takes one of \"key\" (a source position) and \"weights\"");
    out->pin = 1, out->pin_key = -1;
    if (k) return integer(k, "pin.key", 0, 100000, &out->pin_key, err, errn);
    if (!json_is_array(w) || json_array_size(w) == 0)
        return fail(400, err, errn, "\"pin.weights\" must be an array of numbers, one per source position");
    size_t n = json_array_size(w);
    if (n > API_MAX_PIN_WEIGHTS)
        return fail(400, err, errn, "\"pin.weights\" holds %zu numbers, more than the %d allowed", n,
                    API_MAX_PIN_WEIGHTS);
    out->pin_weights = xmalloc(sizeof(float) * n);
    out->n_pin_weights = (int)n;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(w, i);
        double y = json_is_number(x) ? json_number_value(x) : -1;
        if (!(y >= 0 && y <= 1)) return fail(400, err, errn, "\"pin.weights\"[%zu] must be a number from 0 to 1", i);
        out->pin_weights[i] = (float)y, sum += y;
    }
    if (fabs(sum - 1.0) > 1e-3) return fail(400, err, errn, "\"pin.weights\" sum to %.6g, not 1", sum);
    return 0;
}

/* "compare": ["A", "B"], two words (one token each, read by the worker) */
static int compare_pair(json_t *c, ApiRequest *out, char *err, size_t errn) {
    if (!json_is_array(c) || json_array_size(c) != 2)
        return fail(400, err, errn, "\"compare\" must be two words [\"A\", \"B\"] (log p(A) - log p(B) at \"at\")");
    for (int i = 0; i < 2; i++) {
        int rc = short_string(json_array_get(c, (size_t)i), i ? "compare[1]" : "compare[0]", &out->compare[i], err,
                              errn);
        if (rc) return rc;
        if (!out->compare[i][0]) return fail(400, err, errn, "\"compare[%d]\" is empty", i);
    }
    return 0;
}

int api_parse(int kind, const char *body, size_t len, ApiRequest *out, char *err, size_t errn) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->o.decode = decode_defaults();
    out->o.replace_unk = 1;
    out->ig_steps = kind == API_EXPLAIN ? EXPLAIN_IG_STEPS : 0; /* qkv explain's */
    out->top = kind == API_WHATIF ? WHATIF_TOP : 0;
    if (kind == API_WHATIF) out->o.decode.beam = WHATIF_BEAM;
    if (len > API_MAX_BODY)
        return fail(413, err, errn, "the body is %zu bytes, more than the %d allowed", len, API_MAX_BODY);
    if (!utf8_valid(body, len)) return fail(400, err, errn, "the body is not well-formed UTF-8");
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) { /* jansson's reason quotes the body near the fault: a line break may be there */
        char why[200];
        api_quote(why, sizeof why, je.text, 160);
        return fail(400, err, errn, "malformed JSON at byte %d: %s", je.position, why);
    }
    int rc = 0;
    if (!json_is_object(root)) {
        rc = fail(400, err, errn, "the body must be a JSON object");
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!known_key(key, kind)) {
            char shown[96];
            api_quote(shown, sizeof shown, key, 64);
            rc = fail(400, err, errn, "unknown key \"%s\"", shown);
            goto done;
        }
    }
    /* a key whose value is null is a key not sent, for every key alike */
    void *tmp;
    json_object_foreach_safe(root, tmp, key, v) if (json_is_null(v)) json_object_del(root, key);
    const char *src_key = kind == API_PATCH ? "clean" : "src";
    json_t *src = json_object_get(root, src_key);
    if (!src) {
        rc = fail(400, err, errn, "\"%s\" is missing", src_key);
        goto done;
    }
    if (kind == API_TRANSLATE) {
        if (!json_is_array(src)) {
            rc = fail(400, err, errn, "\"src\" must be an array of strings");
            goto done;
        }
        size_t n = json_array_size(src);
        if (n > API_MAX_SENTENCES) {
            rc = fail(413, err, errn, "%zu sentences, more than the %d allowed in one request", n, API_MAX_SENTENCES);
            goto done;
        }
        out->src = xcalloc(n ? n : 1, sizeof(char *));
        for (size_t i = 0; i < n; i++) {
            char what[48];
            snprintf(what, sizeof what, "\"src\"[%zu]", i);
            if ((rc = sentence(json_array_get(src, i), what, &out->src[i], err, errn)) != 0) goto done;
            out->n++;
        }
    } else {
        out->src = xcalloc(1, sizeof(char *));
        if ((rc = sentence(src, kind == API_PATCH ? "\"clean\"" : "\"src\"", &out->src[0], err, errn)) != 0) goto done;
        out->n = 1;
        json_t *tgt = json_object_get(root, "tgt");
        if (tgt && (rc = sentence(tgt, "\"tgt\"", &out->tgt, err, errn)) != 0) goto done;
    }
    if (kind == API_PATCH) {
        json_t *x = json_object_get(root, "corrupt"), *c = json_object_get(root, "compare");
        if (!x) {
            rc = fail(400, err, errn, "\"corrupt\" is missing");
            goto done;
        }
        if ((rc = sentence(x, "\"corrupt\"", &out->corrupt, err, errn)) != 0) goto done;
        if (c && (rc = compare_pair(c, out, err, errn)) != 0) goto done;
        json_t *at = json_object_get(root, "at");
        if (at && !out->compare[0]) {
            rc = fail(400, err, errn, "\"at\" is the position of \"compare\": send both or neither");
            goto done;
        }
        if ((rc = integer(at, "at", 0, 100000, &out->at, err, errn)) != 0) goto done;
    }
    if (kind == API_WHATIF) {
        json_t *p = json_object_get(root, "pin");
        if (p && (rc = pin_object(p, out, err, errn)) != 0) goto done;
        if ((rc = integer(json_object_get(root, "top"), "top", 1, API_MAX_WHATIF_TOP, &out->top, err, errn)) != 0 ||
            (rc = boolean(json_object_get(root, "lens"), "lens", &out->lens, err, errn)) != 0 ||
            (rc = boolean(json_object_get(root, "tree"), "tree", &out->tree, err, errn)) != 0)
            goto done;
    }
    if (kind == API_EXPLAIN) {
        json_t *c = json_object_get(root, "contrast");
        if (c && (rc = short_string(c, "contrast", &out->contrast, err, errn)) != 0) goto done;
        if ((rc = integer(json_object_get(root, "ig_steps"), "ig_steps", 0, API_MAX_IG_STEPS, &out->ig_steps, err,
                          errn)) != 0)
            goto done;
    }
    /* the greedy steps are what a whatif shows: a beam without the tree would change nothing */
    if (kind == API_WHATIF && json_object_get(root, "beam") && !out->tree) {
        rc = fail(400, err, errn, "\"beam\" goes with \"tree\": true (the beam search tree)");
        goto done;
    }
    DecodeOptions *d = &out->o.decode;
    if ((rc = integer(json_object_get(root, "beam"), "beam", kind == API_WHATIF ? 2 : 1,
                      kind == API_WHATIF ? API_MAX_WHATIF_BEAM : 64, &d->beam, err, errn)) != 0)
        goto done;
    if (json_object_get(root, "nbest") == NULL) d->nbest = 1;
    if ((rc = integer(json_object_get(root, "nbest"), "nbest", 1, d->beam, &d->nbest, err, errn)) != 0) goto done;
    json_t *lp = json_object_get(root, "length_penalty");
    if (lp) {
        if (!json_is_number(lp) || json_number_value(lp) < 0.0 || json_number_value(lp) > 10.0) {
            rc = fail(400, err, errn, "\"length_penalty\" must be a number from 0 to 10");
            goto done;
        }
        d->length_penalty = json_number_value(lp);
        out->o.length_penalty_given = 1;
    }
    if ((rc = short_string(json_object_get(root, "mask_heads"), "mask_heads", &out->mask_heads, err, errn)) != 0)
        goto done;
    /* --mask-heads @FILE reads a file; no request names one */
    if (out->mask_heads && strchr(out->mask_heads, '@')) {
        rc = fail(400, err, errn,
                  "\"mask_heads\" is a list of heads such as \"cross.1.0, enc.*.2\": the API reads no file");
        goto done;
    }
    if ((rc = short_string(json_object_get(root, "checkpoint"), "checkpoint", &out->checkpoint, err, errn)) != 0)
        goto done;
done:
    json_decref(root);
    if (rc) api_request_free(out);
    return rc;
}

void api_request_free(ApiRequest *r) {
    for (int i = 0; r->src && i < r->n; i++) free(r->src[i]);
    free(r->src), free(r->tgt), free(r->contrast), free(r->mask_heads), free(r->checkpoint);
    free(r->pin_weights), free(r->corrupt), free(r->compare[0]), free(r->compare[1]);
    memset(r, 0, sizeof *r);
}

void api_quote(char *out, size_t n, const char *s, size_t max) {
    size_t o = 0, i = 0;
    for (; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (i + len > max) break; /* a character cut would not be one */
        if (o + 8 > n) break;
        if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(out + o, n - o, "\\x%02x", c);
        else out[o++] = (char)c;
    }
    if (s[i] && o + 4 <= n) memcpy(out + o, "...", 3), o += 3;
    out[o < n ? o : n - 1] = '\0';
}

char *api_error_json(const char *msg) {
    char line[1024];
    api_quote(line, sizeof line, msg, sizeof line - 16);
    char *text = attnmap_utf8(line); /* a header's or a file name's bytes need not be UTF-8 */
    json_t *o = json_object();
    json_object_set_new(o, "error", json_string(text));
    free(text);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s ? s : xstrdup("{\"error\":\"an error\"}");
}
