/* watch: see watch.h. */
#define _POSIX_C_SOURCE 200809L
#include "infer/watch.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "infer/align.h"
#include "infer/decode.h"
#include "util.h"

/* Encodes one watched sentence; NULL target: none given. Returns the counts. */
static void encode_watch(const Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w,
                         int *src, int *n_src, int *tgt, int *n_tgt) {
    int max = m->cfg.max_positions - 2;
    *n_src = encode_line(w->src, tokenizer, sv, src, max + 1);
    *n_tgt = w->tgt[0] ? encode_line(w->tgt, tokenizer, tv, tgt, max + 1) : 0;
}

int watch_check(const Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w, int n,
                char **unknown) {
    int max = m->cfg.max_positions - 2, rc = 0;
    int *src = xmalloc(sizeof(int) * (size_t)(max + 1)), *tgt = xmalloc(sizeof(int) * (size_t)(max + 1));
    StrBuf unk = {0};
    *unknown = NULL;
    for (int i = 0; i < n && rc == 0; i++) {
        int n_src, n_tgt;
        encode_watch(m, tokenizer, sv, tv, &w[i], src, &n_src, tgt, &n_tgt);
        if (n_src == 0) rc = err_set("train.watch: sentence %d has no tokens", i + 1);
        else if (n_src > max || n_tgt > max)
            rc = err_set("train.watch: sentence %d is longer than the %d tokens this model has positions for", i + 1, max);
        for (int j = 0; j < n_tgt && rc == 0; j++)
            if (tgt[j] == VOCAB_UNK) rc = err_set("train.watch: the target of sentence %d has words not in the target vocabulary", i + 1);
        for (int j = 0; j < n_src && rc == 0; j++)
            if (src[j] == VOCAB_UNK) {
                sb_printf(&unk, "%ssentence %d", unk.len ? ", " : "", i + 1);
                break;
            }
    }
    free(src), free(tgt);
    if (rc == 0 && unk.len) *unknown = unk.buf;
    else sb_free(&unk);
    return rc;
}

int watch_record(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w, int n, int64_t step,
                 const char *run_dir) {
    int max = m->cfg.max_positions - 2;
    int *src = xmalloc(sizeof(int) * (size_t)(max + 1)), *tgt = xmalloc(sizeof(int) * (size_t)(max + 1));
    json_t *root = json_object(), *list = json_array();
    json_object_set_new(root, "format", json_string("qkv-watch-1"));
    json_object_set_new(root, "step", json_integer(step));
    for (int i = 0; i < n; i++) {
        int n_src, n_tgt;
        encode_watch(m, tokenizer, sv, tv, &w[i], src, &n_src, tgt, &n_tgt);
        if (n_src > max) n_src = max; /* watch_check refused these; a safe cut all the same */
        if (n_tgt > max) n_tgt = max;
        if (!w[i].tgt[0]) n_tgt = greedy_ids(m, src, n_src, tgt, max);
        AttnMaps a;
        attnmap_capture(m, sv, tv, src, n_src, tgt, n_tgt, &a);
        attnmap_surface_labels(&a, tokenizer, sv, tv, src, w[i].src, tgt, w[i].tgt[0] ? w[i].tgt : NULL);
        json_array_append_new(list, attnmap_to_json(&a));
        attnmap_free(&a);
    }
    json_object_set_new(root, "sentences", list);
    char *text = xcheck(json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(7)));
    json_decref(root);
    free(src), free(tgt);
    char dir[CONFIG_PATH_MAX + 16], path[CONFIG_PATH_MAX + 48];
    snprintf(dir, sizeof dir, "%s/watch", run_dir);
    snprintf(path, sizeof path, "%s/step-%08lld.json", dir, (long long)step);
    int rc = make_dirs(dir) == 0 && write_file_atomic(path, text, strlen(text)) == 0 ? 0 : -1;
    free(text);
    return rc;
}

/* step-NNNNNNNN.json names only; *step gets N. */
static int snapshot_name(const char *name, long long *step) {
    int end = 0;
    return sscanf(name, "step-%lld.json%n", step, &end) == 1 && end > 0 && name[end] == '\0' && *step >= 0 &&
           strlen(name) < 64;
}

static int by_step(const void *a, const void *b) {
    int64_t x = ((const WatchSnapshot *)a)->step, y = ((const WatchSnapshot *)b)->step;
    return (x > y) - (x < y);
}

/* One snapshot file into s; -1 with the error set. */
static int load_snapshot(const char *path, WatchSnapshot *s, int *n_sentences) {
    size_t len;
    char *text = read_file_max(path, READ_FILE_SMALL, &len);
    if (!text) return -1;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    if (!root) return err_set("%s:%d: not JSON: %s", path, jerr.line, jerr.text);
    int rc = 0;
    const char *format = json_string_value(json_object_get(root, "format"));
    json_t *list = json_object_get(root, "sentences");
    size_t n = json_array_size(list);
    if (!format || strcmp(format, "qkv-watch-1") != 0) rc = err_set("%s: not a qkv watch snapshot (format qkv-watch-1)", path);
    else if (!json_is_integer(json_object_get(root, "step")) || n < 1 || n > CONFIG_WATCH_MAX)
        rc = err_set("%s: needs a step and 1..%d sentences", path, CONFIG_WATCH_MAX);
    else if (*n_sentences && (int)n != *n_sentences)
        rc = err_set("%s: %zu sentences, but the other snapshots have %d (was train.watch changed?)", path, n, *n_sentences);
    if (rc == 0) {
        s->step = json_integer_value(json_object_get(root, "step"));
        s->sentences = xcalloc(n, sizeof(AttnMaps));
        *n_sentences = (int)n;
        for (size_t i = 0; i < n && rc == 0; i++) rc = attnmap_from_json(json_array_get(list, i), &s->sentences[i], path);
    }
    json_decref(root);
    return rc;
}

int watch_load(const char *run_dir, WatchLog *out) {
    memset(out, 0, sizeof *out);
    char dir[CONFIG_PATH_MAX + 16], path[CONFIG_PATH_MAX + 96];
    snprintf(dir, sizeof dir, "%s/watch", run_dir);
    DIR *d = opendir(dir);
    if (!d) return err_set("%s: no watched sentences recorded (list some under train.watch in the config)", run_dir);
    struct dirent *e;
    int cap = 0, rc = 0;
    while ((e = readdir(d)) && rc == 0) {
        long long step;
        if (!snapshot_name(e->d_name, &step)) continue;
        if (out->n_snapshots == WATCH_MAX_SNAPSHOTS) {
            rc = err_set("%s: more than %d snapshots", dir, WATCH_MAX_SNAPSHOTS);
            break;
        }
        if (out->n_snapshots == cap) out->snap = xrealloc(out->snap, sizeof(WatchSnapshot) * (size_t)(cap = cap ? 2 * cap : 16));
        WatchSnapshot *s = &out->snap[out->n_snapshots++];
        memset(s, 0, sizeof *s);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rc = load_snapshot(path, s, &out->n_sentences);
    }
    closedir(d);
    if (rc == 0 && out->n_snapshots == 0)
        rc = err_set("%s: no snapshots yet (training writes one at step 0 and at every validation)", dir);
    if (rc != 0) {
        watch_free(out);
        return -1;
    }
    qsort(out->snap, (size_t)out->n_snapshots, sizeof *out->snap, by_step);
    return 0;
}

void watch_free(WatchLog *w) {
    for (int k = 0; k < w->n_snapshots; k++) {
        for (int i = 0; w->snap[k].sentences && i < w->n_sentences; i++) attnmap_free(&w->snap[k].sentences[i]);
        free(w->snap[k].sentences);
    }
    free(w->snap);
    memset(w, 0, sizeof *w);
}

int watch_aer(const WatchLog *w, int k, int chars, char **gold, double *aer) {
    AlignCounts counts = {0};
    int rc = 0;
    for (int i = 0; i < w->n_sentences && rc == 0; i++) {
        const AttnMaps *a = &w->snap[k].sentences[i];
        int (*pairs)[2] = xmalloc(sizeof(int[2]) * (size_t)(a->S * a->T + 1));
        int *sw = xmalloc(sizeof(int) * (size_t)a->S), *tw = xmalloc(sizeof(int) * (size_t)a->T);
        float *map = xmalloc(sizeof(float) * (size_t)a->S * a->T);
        int n_gold = align_parse(gold[i], pairs, a->S * a->T + 1);
        if (n_gold < 0) rc = err_set("--gold: line %d: not Pharaoh alignments (i-j pairs) for this sentence", i + 1);
        int nsw = align_words(a->src, a->S, chars, sw), ntw = align_words(a->tgt_out, a->T, chars, tw);
        int *links = xmalloc(sizeof(int) * (size_t)(ntw ? ntw : 1));
        if (rc == 0) {
            attnmap_head_average(a, ATTN_CROSS, a->layers[ATTN_CROSS] - 1, map);
            align_from_map(map, a->S, tw, a->T, ntw, sw, a->S, nsw, links);
            align_score(links, ntw, pairs, n_gold, &counts);
        }
        free(pairs), free(sw), free(tw), free(map), free(links);
    }
    *aer = align_aer(&counts);
    return rc;
}

char *watch_view_json(const WatchLog *w, const double *aer) {
    json_t *root = json_object(), *snaps = json_array(), *ent = json_array();
    json_object_set_new(root, "format", json_string("qkv-watch-view-1"));
    for (int k = 0; k < w->n_snapshots; k++) {
        json_t *s = json_object(), *list = json_array();
        json_object_set_new(s, "step", json_integer(w->snap[k].step));
        for (int i = 0; i < w->n_sentences; i++) json_array_append_new(list, attnmap_to_json(&w->snap[k].sentences[i]));
        json_object_set_new(s, "sentences", list);
        json_array_append_new(snaps, s);
    }
    for (int i = 0; i < w->n_sentences; i++) {
        json_t *per_snap = json_array();
        for (int k = 0; k < w->n_snapshots; k++) {
            const AttnMaps *a = &w->snap[k].sentences[i];
            json_t *kinds = json_object();
            for (int kind = 0; kind < ATTN_KINDS; kind++) {
                json_t *layers = json_array();
                for (int l = 0; l < a->layers[kind]; l++) {
                    json_t *heads = json_array();
                    for (int h = 0; h < a->heads; h++) json_array_append_new(heads, json_real(attnmap_entropy(a, kind, l, h)));
                    json_array_append_new(layers, heads);
                }
                json_object_set_new(kinds, attnmap_kind_name(kind), layers);
            }
            json_array_append_new(per_snap, kinds);
        }
        json_array_append_new(ent, per_snap);
    }
    json_object_set_new(root, "snapshots", snaps);
    json_object_set_new(root, "entropy", ent);
    json_t *aers = aer ? json_array() : json_null();
    for (int k = 0; aer && k < w->n_snapshots; k++) json_array_append_new(aers, json_real(aer[k]));
    json_object_set_new(root, "aer", aers);
    char *text = xcheck(json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(7)));
    json_decref(root);
    return text;
}
