/* api: the JSON of `qkv serve`'s API, without any HTTP or any model: a request body in,
 * checked against the bounds, a request out; the answers' JSON out. Kept apart so that
 * every byte a client can send reaches a plain function the tests and the fuzzer call.
 *
 *   POST /v1/translate  {"src": ["...", ...], "beam": 5, "nbest": 1, "length_penalty": 1,
 *                        "mask_heads": "cross.*.0", "checkpoint": "best"}
 *   POST /v1/attention  {"src": "...", "tgt": "..." (optional: a forced target), and the
 *                        same options}
 *   POST /v1/explain    {"src": "...", "tgt": "..." (optional), "contrast": "word",
 *                        "ig_steps": 32, "mask_heads", "checkpoint"}: no decoding options
 *                        (an explained translation is the greedy one, as `qkv explain`'s)
 *   POST /v1/whatif     {"src": "...", "tgt": "..." (optional: a forced target or prefix),
 *                        "mask_heads", "pin": {"layer", "head", "query", "key"} (or
 *                        "weights": [S numbers summing to 1] for "key"), "top": 5, "lens":
 *                        false, "tree": false, "beam": 5 (2..8, the tree's), "checkpoint"}
 *   POST /v1/patch      {"clean": "...", "corrupt": "...", "tgt": "..." (optional),
 *                        "compare": ["A", "B"], "at": 0 (with "compare"), "checkpoint"}
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

/* The bounds a request is held to (docs/server.md lists them). */
#define API_MAX_BODY (256 * 1024)   /* bytes of a request body: past it, 413 */
#define API_MAX_SENTENCES 64        /* sentences in one translate request: past it, 413 */
#define API_MAX_SENTENCE_BYTES 4096 /* bytes of one sentence: past it, 413 (tokens: the model's positions) */
#define API_MAX_NAME 128            /* bytes of a checkpoint name, a mask spec or a contrast word */
#define API_MAX_IG_STEPS 64         /* explain: most "ig_steps" (each step a backward pass per target token) */
#define API_MAX_WHATIF_TOP 20       /* whatif: most "top" */
#define API_MAX_WHATIF_BEAM 8       /* whatif: the widest tree ("beam" 2..8) */
#define API_MAX_PIN_WEIGHTS 1024    /* whatif: most numbers in a pin's "weights" (the worker wants S of them) */

enum { API_TRANSLATE, API_ATTENTION, API_EXPLAIN, API_WHATIF, API_PATCH };

typedef struct {
    int kind;   /* API_TRANSLATE, ... API_PATCH */
    char **src; /* (n) the sentences, owned; every kind but translate: n == 1 (patch: the clean one) */
    int n;
    char *tgt; /* attention, explain, whatif, patch: the forced target, or NULL (the best, the greedy translation) */
    char *contrast; /* explain: the foil word, or NULL (read against the model's target vocabulary by the worker) */
    int ig_steps;   /* explain: 0..API_MAX_IG_STEPS */
    int top, lens, tree; /* whatif: next tokens per position (1..API_MAX_WHATIF_TOP), the lens, the beam tree
                            (its beam in o.decode.beam) */
    int pin;             /* whatif: 1 when "pin" was sent */
    int pin_layer, pin_head, pin_query, pin_key; /* whatif: cross-attention's; pin_key -1: pin_weights */
    float *pin_weights;                          /* whatif: (n_pin_weights) or NULL; checked against S by the worker */
    int n_pin_weights;
    char *corrupt;    /* patch: the corrupted sentence */
    char *compare[2]; /* patch: the words A and B of the metric log p(A) - log p(B), or NULL */
    int at;           /* patch: with compare, the target position */
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
