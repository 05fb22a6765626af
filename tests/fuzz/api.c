/* Fuzz target: a request body of qkv serve's API (serve/api.c), as a translate request
 * as an attention, an explain, a whatif and a patch request. Whatever the bytes: a refusal is a 400 or a 413 with one
 * line; a request that passes holds what the API promises (at most API_MAX_SENTENCES
 * sentences of well-formed UTF-8 within API_MAX_SENTENCE_BYTES, no line break, options
 * in their ranges, a mask that names no file, a contrast word within API_MAX_NAME, a pin's
 * weights a distribution, a patch's corrupted sentence held to the same bounds). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "serve/api.h"
#include "util/text.h"

static int d_beam(const ApiRequest *r) { return r->o.decode.beam; }

static void check(const ApiRequest *r, int kind) {
    if (r->n < 0 || r->n > API_MAX_SENTENCES || (kind != API_TRANSLATE && r->n != 1)) abort();
    if (kind == API_TRANSLATE && r->tgt) abort();
    if (kind != API_EXPLAIN && (r->contrast || r->ig_steps != 0)) abort();
    if (kind != API_WHATIF && (r->pin || r->pin_weights || r->top || r->lens || r->tree)) abort();
    if (kind == API_WHATIF && (r->top < 1 || r->top > API_MAX_WHATIF_TOP || d_beam(r) < 2 || d_beam(r) > 8)) abort();
    if (r->pin_weights) {
        double sum = 0;
        if (r->n_pin_weights < 1 || r->n_pin_weights > API_MAX_PIN_WEIGHTS || r->pin_key != -1) abort();
        for (int i = 0; i < r->n_pin_weights; i++) {
            if (!(r->pin_weights[i] >= 0 && r->pin_weights[i] <= 1)) abort();
            sum += r->pin_weights[i];
        }
        if (sum < 0.99 || sum > 1.01) abort();
    }
    if (r->pin && (r->pin_layer < 0 || r->pin_head < 0 || r->pin_query < 0 || (!r->pin_weights && r->pin_key < 0)))
        abort();
    if ((kind == API_PATCH) != (r->corrupt != NULL)) abort();
    if (r->corrupt && (strlen(r->corrupt) > API_MAX_SENTENCE_BYTES || strpbrk(r->corrupt, "\r\n"))) abort();
    if (kind != API_PATCH && (r->compare[0] || r->at)) abort();
    if ((r->compare[0] != NULL) != (r->compare[1] != NULL) || (!r->compare[0] && r->at)) abort();
    if (r->ig_steps < 0 || r->ig_steps > API_MAX_IG_STEPS) abort();
    if (r->contrast && strlen(r->contrast) > API_MAX_NAME) abort();
    for (int i = 0; i < r->n; i++) {
        size_t len = strlen(r->src[i]);
        if (len > API_MAX_SENTENCE_BYTES || !utf8_valid(r->src[i], len) || strpbrk(r->src[i], "\r\n")) abort();
    }
    const DecodeOptions *d = &r->o.decode;
    if (d->beam < 1 || d->beam > 64 || d->nbest < 1 || d->nbest > d->beam) abort();
    if (!(d->length_penalty >= 0.0 && d->length_penalty <= 10.0)) abort();
    if (r->mask_heads && (strchr(r->mask_heads, '@') || strlen(r->mask_heads) > API_MAX_NAME)) abort();
    if (r->checkpoint && strlen(r->checkpoint) > API_MAX_NAME) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int kind = API_TRANSLATE; kind <= API_PATCH; kind++) {
        ApiRequest r;
        char err[512];
        err[0] = '\0';
        int status = api_parse(kind, (const char *)data, size, &r, err, sizeof err);
        if (status == 0) {
            check(&r, kind);
            api_request_free(&r);
        } else if ((status != 400 && status != 413) || !err[0] || strchr(err, '\n') || r.src || r.n || r.contrast ||
                   r.corrupt || r.pin_weights || r.compare[0]) {
            abort();
        }
        char *json = api_error_json(err);
        if (!json) abort(); /* every refusal's line can be sent */
        free(json);
    }
    return 0;
}
