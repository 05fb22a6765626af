/* runners: see runners.h. */
#include "serve/runners.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "attention/sentence_maps.h"
#include "data/batch.h"
#include "data/corpus.h"
#include "data/sentence_ids.h"
#include "decode/decode.h"
#include "decode/headmask.h"
#include "explain/explain_json.h"
#include "explain/explain_sentence.h"
#include "explain/intervene.h"
#include "explain/pair.h"
#include "explain/patch_pair.h"
#include "explain/patch_view.h"
#include "explain/patching.h"
#include "explain/whatif_json.h"
#include "explain/whatif_run.h"
#include "serve/work.h"
#include "util/err.h"
#include "util/json.h"
#include "util/mem.h"
#include "util/text.h"

/* s as a JSON string: well-formed UTF-8 first (each bad byte a U+FFFD), so that no
 * text of a model, a file name or a vocabulary can make jansson refuse it. */
static json_t *json_text(const char *s) {
    char *t = attnmap_utf8(s);
    json_t *j = json_string(t);
    free(t);
    return j;
}

static json_t *hypothesis_json(const char *text, double score, const Seq *ids, const Vocab *tv) {
    json_t *tokens = json_array();
    for (int t = 0; t < ids->len; t++) json_array_append_new(tokens, json_text(vocab_token(tv, ids->ids[t])));
    json_t *o = json_object();
    json_object_set_new(o, "text", json_text(text));
    json_object_set_new(o, "score", isfinite(score) ? json_real(score) : json_null());
    json_object_set_new(o, "tokens", tokens);
    return o;
}

/* The n-best list of sentence i: nbest entries from [i * nbest]. Beam search marks a
 * place no hypothesis finished for with a score of -inf (as `qkv translate --nbest`
 * reads it); an empty translation is a hypothesis like any other. */
static json_t *nbest_json(char **text, const double *scores, const Seq *ids, int i, int nbest, const Vocab *tv) {
    json_t *list = json_array();
    for (int k = 0; k < nbest; k++) {
        size_t at = (size_t)i * nbest + k;
        if (k > 0 && !isfinite(scores[at])) break; /* fewer finished than asked for */
        json_array_append_new(list, hypothesis_json(text[at], scores[at], &ids[at], tv));
    }
    return list;
}

/* The end of a call made under served_error_lock(): its util/err message into err when it
 * failed (rc != 0), the lock given back; rc. Written as
 *     served_error_lock();
 *     int bad = kept_error(some_call(...), err, sizeof err);
 * so that the lock is held from the failing call to the reading of its message. */
static int kept_error(int rc, char *err, size_t n) {
    if (rc) snprintf(err, n, "%s", err_msg());
    served_error_unlock();
    return rc;
}

/* The head gates a request's "mask_heads" asks for, read against r's model: the one
 * that answers, whose heads may differ from the default checkpoint's. 0 with *gates
 * malloc'd (NULL for no mask), or -1 with the one-line reason in err. */
static int mask_gates(const ApiRequest *req, const Run *r, float **gates, char *err, size_t errn) {
    *gates = NULL;
    if (!req->mask_heads || !req->mask_heads[0]) return 0;
    float *g = xmalloc(sizeof(float) * (size_t)model_head_count(&r->model));
    served_error_lock(); /* util/err's one buffer, from the failing call to its reading */
    int rc = head_mask_parse_items(&r->model, req->mask_heads, g);
    if (rc < 0) {
        const char *why = err_msg(), *flag = "--mask-heads: ";
        snprintf(err, errn, "\"mask_heads\": %s", strncmp(why, flag, strlen(flag)) ? why : why + strlen(flag));
    }
    served_error_unlock();
    if (rc < 0) return free(g), -1;
    *gates = g;
    return 0;
}

static void add_model_keys(json_t *o, const ServedCheckpoint *c) {
    json_object_set_new(o, "checkpoint", json_text(c->name));
    json_object_set_new(o, "step", json_integer((json_int_t)c->run.meta.step));
}

/* An object's text (ending in "}" and perhaps a line end) with keys ("\"name\":value,...")
 * added last. Takes json and keys. */
static char *with_keys(char *json, StrBuf *keys) {
    if (!json) return sb_free(keys), NULL; /* jansson out of memory: no answer to add to */
    size_t len = strlen(json);
    while (len > 0 && json[len - 1] != '}') len--;
    StrBuf sb = {0};
    sb_append(&sb, json, len ? len - 1 : 0);
    sb_printf(&sb, ",%s}", keys->buf);
    free(json), sb_free(keys);
    return sb.buf;
}

/* explain.json's text (ending in "}\n") with "checkpoint" and "step" added as its last
 * keys, as every answer names the model that gave it. Takes json. */
static char *with_model_keys(char *json, const ServedCheckpoint *c) {
    json_t *name = json_text(c->name);
    char *quoted = json_dumps(name, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
    json_decref(name);
    StrBuf keys = {0};
    sb_printf(&keys, "\"checkpoint\":%s,\"step\":%lld", quoted ? quoted : "null", (long long)c->run.meta.step);
    free(quoted);
    return with_keys(json, &keys);
}

/* An explanation's text with its maps' "source_unk" (the positions attnmap_surface_labels
 * marked as read <unk>) added last at the top level too, where /v1/explain's answer carries
 * it. Takes json. */
static char *with_source_unk(char *json, const AttnMaps *maps) {
    StrBuf keys = {0};
    sb_printf(&keys, "\"source_unk\":[");
    const char *comma = "";
    for (int j = 0; j < maps->S; j++) {
        if (!maps->src_unk || !maps->src_unk[j]) continue;
        sb_printf(&keys, "%s%d", comma, j);
        comma = ",";
    }
    sb_printf(&keys, "]");
    return with_keys(json, &keys);
}

static char *dump(json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    return s;
}

/* A warning for a sentence the source vocabulary reads as <unk> from end to end (text of
 * another language, say): ids as the request was read, unknown of them <unk>; the model
 * translated nothing it knows. NULL when it knows any. */
static json_t *all_unknown_warning(const char *text, const SentenceTokens *ids, int unknown, int tokenizer,
                                   const Vocab *sv) {
    if (ids->n == 0 || unknown < ids->n) return NULL;
    StrBuf words = {0}, said = {0};
    sentence_unknown_words(text, ids, tokenizer, sv, &words);
    sb_printf(&said, "every word is unknown to the model's source vocabulary (read as <unk>): %.300s%s",
              words.buf ? words.buf : "", words.len > 300 ? "..." : "");
    json_t *w = json_text(said.buf);
    sb_free(&words), sb_free(&said);
    return w;
}

/* A translate job: its sentences as one batch, as `qkv translate` decodes its lines. */
void runner_translate(const RunEnv *w, Job *job) {
    ServedModels *sm = w->models;
    const ApiRequest *q = &job->req;
    char err[512];
    const Run *r = served_get(sm, job->checkpoint, err, sizeof err);
    if (!r) return job_refuse(job, 500, "%s", err);
    float *gates;
    if (mask_gates(q, r, &gates, err, sizeof err) != 0) return job_refuse(job, 400, "%s", err);
    int tok = r->cfg.data.tokenizer, max = r->model.cfg.max_positions - 2, n = q->n;
    const WorkSize *z = job_size(job, r);
    for (int i = 0; i < n; i++)
        if (z->src[i].n > max) {
            char what[64], msg[160];
            snprintf(what, sizeof what, "\"src\"[%d]", i);
            snprintf(msg, sizeof msg, "%%s has more tokens than the %d this model has positions for", max);
            return free(gates), job_refuse(job, 413, msg, what);
        }
    double work = work_translate_request(r, q, z); /* no sentence is cut: the sum of each one's */
    if (work > w->max_gflop) { /* checked before any decoding: a search once begun runs to its end */
        snprintf(err, sizeof err,
                 "this translation is about %.3g GFLOP, more than the %g one request may ask: send fewer or "
                 "shorter sentences, or a smaller \"beam\"",
                 work, w->max_gflop);
        return free(gates), job_refuse(job, 413, "%s", err);
    }
    int K = q->o.decode.nbest;
    size_t slots = (size_t)(n ? n : 1) * K;
    double *scores = xmalloc(sizeof(double) * slots);
    Seq *ids = xmalloc(sizeof(Seq) * slots);
    Model *m = w->replica(w->worker, job->checkpoint, r);
    model_set_head_gates(m, gates);
    TranslateStats st;
    TranslateOptions o = translate_options_for_run(&q->o, &r->cfg);
    char **text = translate_lines_ids(m, tok, &r->src_vocab, &r->tgt_vocab, q->src, z->src, n, &o, &st, scores, ids);
    model_set_head_gates(m, NULL);
    json_t *out = json_object(), *list = json_array();
    add_model_keys(out, &sm->ck[job->checkpoint]);
    for (int i = 0; i < n; i++) {
        size_t at = (size_t)i * K;
        json_t *one = hypothesis_json(text[at], scores[at], &ids[at], &r->tgt_vocab);
        if (K > 1) json_object_set_new(one, "nbest", nbest_json(text, scores, ids, i, K, &r->tgt_vocab));
        json_t *warning = all_unknown_warning(q->src[i], &z->src[i], z->unknown[i], tok, &r->src_vocab);
        if (warning) json_object_set_new(one, "warning", warning);
        json_array_append_new(list, one);
    }
    json_object_set_new(out, "translations", list);
    for (int i = 0; i < n * K; i++) free(text[i]), free(ids[i].ids);
    free(text), free(ids), free(scores), free(gates);
    job_answer(job, 200, dump(out));
}

/* One sentence's maps by the call `qkv attention --text` makes, with the request's search:
 * its n-best list, and the maps of its best (or of the forced target). */
void runner_attention(const RunEnv *w, Job *job) {
    ServedModels *sm = w->models;
    char err[512];
    const Run *r = served_get(sm, job->checkpoint, err, sizeof err);
    if (!r) return job_refuse(job, 500, "%s", err);
    float *gates;
    if (mask_gates(&job->req, r, &gates, err, sizeof err) != 0) return job_refuse(job, 400, "%s", err);
    int tok = r->cfg.data.tokenizer, too_long;
    const WorkSize *z = job_size(job, r);
    TranslateOptions search = translate_options_for_run(&job->req.o, &r->cfg);
    MapsAsk ask = {job->req.src[0], job->req.tgt, &search, "\"src\"", "\"tgt\"", {&z->src[0], work_given(&z->tgt)}};
    SentenceMaps x;
    served_error_lock();
    int bad = kept_error(sentence_maps_prepare(&r->model, &r->src_vocab, &r->tgt_vocab, tok, &ask, &x, &too_long), err,
                         sizeof err);
    if (bad) return sentence_maps_free(&x), free(gates), job_refuse(job, too_long ? 413 : 400, "%s", err);
    Model *m = w->replica(w->worker, job->checkpoint, r);
    model_set_head_gates(m, gates);
    sentence_maps_run(m, &r->src_vocab, &r->tgt_vocab, tok, &ask, &x);
    model_set_head_gates(m, NULL);
    json_t *out = attnmap_to_json(&x.maps);
    add_model_keys(out, &sm->ck[job->checkpoint]);
    json_object_set_new(out, "translations", nbest_json(x.hyp, x.scores, x.ids, 0, x.K, &r->tgt_vocab));
    json_object_set_new(out, "forced", json_boolean(job->req.tgt != NULL));
    char *json = dump(out); /* the maps carry "source_unk" */
    sentence_maps_free(&x), free(gates);
    job_answer(job, 200, json);
}

/* One sentence explained as `qkv explain --text` explains it, by the same call: the forced
 * target or the greedy translation, every method's scores, explain.json's object as the
 * answer, refused past the budget once the lengths are known. */
void runner_explain(const RunEnv *w, Job *job) {
    ServedModels *sm = w->models;
    char err[512];
    const Run *r = served_get(sm, job->checkpoint, err, sizeof err);
    if (!r) return job_refuse(job, 500, "%s", err);
    int tok = r->cfg.data.tokenizer, too_long;
    ExplainAsk ask = explain_ask(job->req.src[0], job->req.tgt, job->req.contrast);
    ask.ig_steps = job->req.ig_steps;
    ask.text_name = "\"src\"", ask.target_name = "\"tgt\"", ask.contrast_name = "\"contrast\"";
    const WorkSize *z = job_size(job, r);
    ask.given[0] = &z->src[0], ask.given[1] = work_given(&z->tgt);
    float *gates;
    if (mask_gates(&job->req, r, &gates, err, sizeof err) != 0) return job_refuse(job, 400, "%s", err);
    ExplainSentence x;
    served_error_lock();
    int bad = kept_error(explain_sentence_prepare(&r->model, &r->src_vocab, &r->tgt_vocab, tok, &ask, &x, &too_long),
                         err, sizeof err);
    if (bad) return explain_sentence_free(&x), free(gates), job_refuse(job, too_long ? 413 : 400, "%s", err);
    Model *m = w->replica(w->worker, job->checkpoint, r);
    model_set_head_gates(m, gates);
    explain_sentence_decode(m, &ask, &x);
    const ModelConfig *mc = &r->model.cfg;
    int S = x.ns + 1, T = x.nt + 1, ig = ask.ig_steps, foil = x.foil >= 0;
    double work = work_explain_gflop(mc, S, T, ig, foil);
    double cap = w->max_gflop;
    if (work > cap) {
        int fit = -1; /* the most steps that fit */
        while (fit < ig && work_explain_gflop(mc, S, T, fit + 1, foil) <= cap) fit++;
        model_set_head_gates(m, NULL);
        explain_sentence_free(&x), free(gates);
        if (fit >= 0)
            snprintf(err, sizeof err,
                     "explaining %d target tokens with %d \"ig_steps\" is about %.0f GFLOP, more than the %g one "
                     "request may ask: at most %d steps fit (or send a shorter sentence)",
                     T, ig, work, cap, fit);
        else
            snprintf(err, sizeof err,
                     "explaining %d target tokens from %d source tokens is about %.0f GFLOP even without "
                     "integrated gradients, more than the %g one request may ask: send a shorter sentence",
                     T, S, work_explain_gflop(mc, S, T, 0, foil), cap);
        return job_refuse(job, 413, "%s", err);
    }
    explain_sentence_run(m, &r->src_vocab, &r->tgt_vocab, tok, &ask, &x);
    model_set_head_gates(m, NULL);
    /* after the model's keys: the answer up to them stays the command's explain.json */
    char *json = with_source_unk(with_model_keys(x.json, &sm->ck[job->checkpoint]), &x.e.maps);
    x.json = NULL; /* taken over by with_model_keys */
    explain_sentence_free(&x), free(gates);
    job_answer(job, 200, json);
}

/* One sentence changed and read out by the call `qkv whatif` makes: whatif.json's object,
 * "forced" and the model's keys added, refused past the budget before anything runs. */
void runner_whatif(const RunEnv *w, Job *job) {
    ServedModels *sm = w->models;
    const ApiRequest *q = &job->req;
    char err[512];
    const Run *r = served_get(sm, job->checkpoint, err, sizeof err);
    if (!r) return job_refuse(job, 500, "%s", err);
    const ModelConfig *mc = &r->model.cfg;
    float *gates = NULL;
    WhatifPin pin = {q->pin_layer, q->pin_head, q->pin_query, q->pin_key, q->pin_weights, q->n_pin_weights};
    WhatifAsk ask = whatif_ask(q->src[0], q->tgt, &r->cfg);
    ask.top = q->top, ask.lens = q->lens, ask.beam = q->tree ? q->o.decode.beam : 0;
    ask.pin = q->pin ? &pin : NULL;
    /* a mask sent, even one naming no head, asks for the changed model's read-out: nothing
     * switched off then changes nothing, which a client can see */
    ask.mask_given = q->mask_heads != NULL;
    ask.text_name = "\"src\"", ask.target_name = "\"tgt\"";
    const WorkSize *z = job_size(job, r);
    ask.given[0] = &z->src[0], ask.given[1] = work_given(&z->tgt);
    const char *pin_names[5] = {"\"pin.layer\"", "\"pin.head\"", "\"pin.key\"", "\"pin.weights\"", "\"pin.query\""};
    memcpy(ask.pin_names, pin_names, sizeof pin_names);
    WhatifResult x;
    int too_long;
    served_error_lock();
    int bad = kept_error(whatif_prepare(&r->model, &r->src_vocab, &r->tgt_vocab, r->cfg.data.tokenizer, &ask, &x,
                                        &too_long),
                         err, sizeof err);
    if (bad) {
        job_refuse(job, too_long ? 413 : 400, "%s", err);
        goto done;
    }
    if (mask_gates(q, r, &gates, err, sizeof err) != 0) {
        job_refuse(job, 400, "%s", err);
        goto done;
    }
    ask.gates = gates;
    DecodeOptions d = decode_defaults();
    int longest = decode_max_len(&r->model, &d, x.ns), changed = gates || q->pin || q->mask_heads;
    double work = work_whatif_gflop(mc, x.ns + 1, (q->tgt ? x.nt : longest) + 1, q->tgt != NULL, changed, gates != NULL,
                                    ask.beam, longest);
    if (work > w->max_gflop) {
        snprintf(err, sizeof err,
                 "this whatif is about %.3g GFLOP, more than the %g one request may ask: send a shorter sentence, "
                 "or leave out \"tree\"",
                 work, w->max_gflop);
        job_refuse(job, 413, "%s", err);
        goto done;
    }
    Model *m = w->replica(w->worker, job->checkpoint, r);
    whatif_decode(m, &ask, &x);
    served_error_lock();
    bad = kept_error(whatif_check_query(&ask, &x), err, sizeof err);
    if (bad) {
        job_refuse(job, 400, "%s", err);
        goto done;
    }
    whatif_run(m, &r->tgt_vocab, r->cfg.data.tokenizer, &ask, &x);
    json_object_set_new(x.json, "forced", json_boolean(q->tgt != NULL));
    add_model_keys(x.json, &sm->ck[job->checkpoint]);
    /* whatif.json's numbers as the command writes them (json_fmt's digits), keys in its order */
    job_answer(job, 200, json_dumps(x.json, JSON_WRITE_FLAGS | JSON_COMPACT | JSON_ENSURE_ASCII));
done:
    whatif_result_free(&x);
    free(gates);
}

/* Activation patching between two sentences, by the call `qkv patch` makes: patch.json's
 * object, refused past the budget before the table runs. */
void runner_patch(const RunEnv *w, Job *job) {
    ServedModels *sm = w->models;
    const ApiRequest *q = &job->req;
    char err[512];
    const Run *r = served_get(sm, job->checkpoint, err, sizeof err);
    if (!r) return job_refuse(job, 500, "%s", err);
    PatchAsk ask = patch_ask(q->src[0], q->corrupt, q->tgt);
    ask.compare[0] = q->compare[0], ask.compare[1] = q->compare[1], ask.at = q->at;
    ask.clean_name = "\"clean\"", ask.corrupt_name = "\"corrupt\"", ask.target_name = "\"tgt\"";
    ask.compare_names[0] = "\"compare[0]\"", ask.compare_names[1] = "\"compare[1]\"", ask.at_name = "\"at\"";
    const WorkSize *z = job_size(job, r);
    ask.given[0] = &z->src[0], ask.given[1] = work_given(&z->corrupt), ask.given[2] = work_given(&z->tgt);
    PatchPair x;
    int too_long;
    served_error_lock();
    int bad = kept_error(patch_prepare(&r->model, &r->src_vocab, &r->tgt_vocab, r->cfg.data.tokenizer, &ask, &x,
                                       &too_long),
                         err, sizeof err);
    if (bad) {
        job_refuse(job, too_long ? 413 : 400, "%s", err);
        goto done;
    }
    DecodeOptions d = decode_defaults();
    int S = x.ns + 1, T = (q->tgt ? x.nt : decode_max_len(&r->model, &d, x.ns)) + 1;
    double work = work_patch_gflop(&r->model.cfg, S, T);
    if (work > w->max_gflop) {
        snprintf(err, sizeof err,
                 "patching %d source and %d target positions is about %.3g GFLOP, more than the %g one request may "
                 "ask: send shorter sentences",
                 S, T, work, w->max_gflop);
        job_refuse(job, 413, "%s", err);
        goto done;
    }
    Model *m = w->replica(w->worker, job->checkpoint, r);
    patch_decode(m, &ask, &x);
    served_error_lock();
    bad = kept_error(patch_check_at(&ask, &x) != 0 || patch_pair_run(m, &r->src_vocab, &x) != 0, err, sizeof err);
    if (bad) {
        job_refuse(job, 400, "%s", err);
        goto done;
    }
    job_answer(job, 200, with_model_keys(x.json, &sm->ck[job->checkpoint]));
    x.json = NULL; /* taken over by with_model_keys */
done:
    patch_pair_free(&x);
}
