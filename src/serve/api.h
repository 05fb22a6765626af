/* api: the JSON of `qkv serve`'s API, without any HTTP or any model: a request body in,
 * checked against the bounds, a request out; the answers' JSON out. Kept apart so that
 * every byte a client can send reaches a plain function the tests and the fuzzer call.
 *
 *   POST /v1/translate  {"src": ["...", ...], "beam": 5, "nbest": 1, "length_penalty": 1,
 *                        "mask_heads": "cross.*.0", "checkpoint": "best"}
 *   POST /v1/attention  {"src": "...", "tgt": "..." (optional: a forced target), and the
 *                        same options}
 *   POST /v1/explain    {"src": "...", "tgt": "..." (optional), "contrast": "word",
 *                        "ig_steps": 16, "mask_heads", "checkpoint"}: no decoding options
 *                        (an explained translation is the greedy one, as `qkv explain`'s)
 *
 * Every key but "src" may be left out (translate's defaults). A key the API does not know,
 * or one another kind of request takes, is refused, so a misspelt option never passes
 * silently. "mask_heads" is a list of heads
 * only: no request names a file (--mask-heads @FILE is the command line's). It is read
 * against the model that answers (serve/jobs.c), not here. */
#ifndef QKV_SERVE_API_H
#define QKV_SERVE_API_H

#include <stddef.h>

#include "decode/translator.h"

/* The bounds a request is held to (the README lists them). */
#define API_MAX_BODY (256 * 1024)   /* bytes of a request body: past it, 413 */
#define API_MAX_SENTENCES 64        /* sentences in one translate request: past it, 413 */
#define API_MAX_SENTENCE_BYTES 4096 /* bytes of one sentence: past it, 413 (tokens: the model's positions) */
#define API_MAX_NAME 128            /* bytes of a checkpoint name, a mask spec or a contrast word */
#define API_IG_STEPS 16             /* explain: integrated gradients' steps when "ig_steps" is left out */
#define API_MAX_IG_STEPS 64         /* explain: most "ig_steps" (each step a backward pass per target token) */

enum { API_TRANSLATE, API_ATTENTION, API_EXPLAIN };

typedef struct {
    int kind;   /* API_TRANSLATE, API_ATTENTION, API_EXPLAIN */
    char **src; /* (n) the sentences, owned; attention, explain: n == 1 */
    int n;
    char *tgt;      /* attention, explain: the forced target, or NULL (the best, the greedy translation) */
    char *contrast; /* explain: the foil word, or NULL (read against the model's target vocabulary by the worker) */
    int ig_steps;   /* explain: 0..API_MAX_IG_STEPS */
    TranslateOptions o;
    char *mask_heads; /* NULL, or the --mask-heads spec */
    char *checkpoint; /* NULL (the served default), or a name GET /v1/model lists */
} ApiRequest;

/* body (len bytes, not 0-terminated) as a request of kind; 0, or the HTTP status (400 or
 * 413) with a one-line reason in err. */
int api_parse(int kind, const char *body, size_t len, ApiRequest *out, char *err, size_t errn);
void api_request_free(ApiRequest *r);
/* {"error": msg} as JSON text (malloc'd; never NULL): msg as one line of well-formed
 * UTF-8 whatever it holds (a control byte spelled \xNN, a bad byte U+FFFD). */
char *api_error_json(const char *msg);
/* What a client sent (a key, a header, a name), to quote in an error: at most max bytes
 * of s, cut at a character, "..." when cut, control bytes spelled \xNN; into out[n]. */
void api_quote(char *out, size_t n, const char *s, size_t max);

#endif
