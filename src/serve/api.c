/* api: see api.h. */
#include "serve/api.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "decode/search.h"
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
static const struct {
    const char *name;
    unsigned kinds;
} known[] = {
    {"src", KIND(API_TRANSLATE) | KIND(API_ATTENTION) | KIND(API_EXPLAIN)},
    {"tgt", KIND(API_ATTENTION) | KIND(API_EXPLAIN)},
    {"beam", KIND(API_TRANSLATE) | KIND(API_ATTENTION)},
    {"nbest", KIND(API_TRANSLATE) | KIND(API_ATTENTION)},
    {"length_penalty", KIND(API_TRANSLATE) | KIND(API_ATTENTION)},
    {"mask_heads", KIND(API_TRANSLATE) | KIND(API_ATTENTION) | KIND(API_EXPLAIN)},
    {"checkpoint", KIND(API_TRANSLATE) | KIND(API_ATTENTION) | KIND(API_EXPLAIN)},
    {"contrast", KIND(API_EXPLAIN)},
    {"ig_steps", KIND(API_EXPLAIN)},
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

int api_parse(int kind, const char *body, size_t len, ApiRequest *out, char *err, size_t errn) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->o.decode = decode_defaults();
    out->o.replace_unk = 1;
    out->ig_steps = kind == API_EXPLAIN ? API_IG_STEPS : 0;
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
    json_t *src = json_object_get(root, "src");
    if (!src) {
        rc = fail(400, err, errn, "\"src\" is missing");
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
        if ((rc = sentence(src, "\"src\"", &out->src[0], err, errn)) != 0) goto done;
        out->n = 1;
        json_t *tgt = json_object_get(root, "tgt");
        if (tgt && !json_is_null(tgt) && (rc = sentence(tgt, "\"tgt\"", &out->tgt, err, errn)) != 0) goto done;
    }
    if (kind == API_EXPLAIN) {
        json_t *c = json_object_get(root, "contrast");
        if (c && !json_is_null(c) && (rc = short_string(c, "contrast", &out->contrast, err, errn)) != 0) goto done;
        if ((rc = integer(json_object_get(root, "ig_steps"), "ig_steps", 0, API_MAX_IG_STEPS, &out->ig_steps, err,
                          errn)) != 0)
            goto done;
    }
    DecodeOptions *d = &out->o.decode;
    if ((rc = integer(json_object_get(root, "beam"), "beam", 1, 64, &d->beam, err, errn)) != 0) goto done;
    if (json_object_get(root, "nbest") == NULL) d->nbest = 1;
    if ((rc = integer(json_object_get(root, "nbest"), "nbest", 1, d->beam, &d->nbest, err, errn)) != 0) goto done;
    json_t *lp = json_object_get(root, "length_penalty");
    if (lp) {
        if (!json_is_number(lp) || json_number_value(lp) < 0.0 || json_number_value(lp) > 10.0) {
            rc = fail(400, err, errn, "\"length_penalty\" must be a number from 0 to 10");
            goto done;
        }
        d->length_penalty = json_number_value(lp);
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
