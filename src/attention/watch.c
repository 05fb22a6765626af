/* watch: see watch.h. */
#define _POSIX_C_SOURCE 200809L
#include "attention/watch.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention/align_map.h"
#include "data/corpus.h"
#include "decode/decode.h"
#include "run/files.h"
#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/text.h"

/* Encodes one watched sentence; NULL target: none given. Returns the counts. */
static void encode_watch(const Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w,
                         int *src, int *n_src, int *tgt, int *n_tgt) {
    int max = m->cfg.max_positions - 2;
    *n_src = encode_line(w->src, tokenizer, sv, src, max + 1);
    *n_tgt = w->tgt[0] ? encode_line(w->tgt, tokenizer, tv, tgt, max + 1) : 0;
}

/* ---- how large a snapshot can be -------------------------------------------------------- */

/* A number as a snapshot writes it takes at most 14 bytes with its comma: seven
 * significant digits of a float, sign and exponent ("-1.175494e-38,"). */
#define WATCH_NUMBER_BYTES 14.0

/* One [layers][heads][rows][cols] array under its key: each number with its comma, each
 * row's, head's and layer's brackets and comma, the key, its quotes and colon. */
static double grid_bytes(int layers, int heads, int rows, int cols) {
    return (double)layers * heads * rows * (cols * WATCH_NUMBER_BYTES + 3) + (double)layers * heads * 3 + layers * 3.0 +
           48;
}

/* The longest token of a vocabulary, in bytes. */
static size_t longest_token(const Vocab *v) {
    size_t n = 0;
    for (int i = 0; i < v->size; i++) {
        size_t len = strlen(vocab_token(v, i));
        if (len > n) n = len;
    }
    return n;
}

/* The most bytes one sentence's maps can take in a snapshot, S source positions and T
 * decoder positions: the arrays of attnmap_to_json, and its three token lists, each label
 * at most `label` bytes before JSON escapes it (\u0001: 6 bytes for 1). */
static double sentence_bytes(const Model *m, int S, int T, size_t label) {
    int H = m->cfg.heads, dh = m->cfg.d_model / H, Le = m->cfg.encoder_layers, Ld = m->cfg.decoder_layers;
    double b = 200 + (double)(S + 2 * T) * (6.0 * (double)label + 3);
    b += 3 * grid_bytes(Le, H, S, S) + 2 * grid_bytes(Le, H, S, dh);
    b += 3 * grid_bytes(Ld, H, T, T) + 2 * grid_bytes(Ld, H, T, dh);
    b += 3 * grid_bytes(Ld, H, T, S) + grid_bytes(Ld, H, T, dh) + grid_bytes(Ld, H, S, dh);
    b += grid_bytes(Ld, 1, 1, T);    /* the source share */
    b += grid_bytes(1, 1, T, S + 1); /* the last cross-attention block's contributions */
    return b;
}

double watch_snapshot_bound(const Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w,
                            int n) {
    int max = m->cfg.max_positions - 2;
    int *src = xmalloc(sizeof(int) * (size_t)(max + 1)), *tgt = xmalloc(sizeof(int) * (size_t)(max + 1));
    /* a label is a word of the text or a token of a vocabulary, or <eos>, U+FFFD: 16 more
     * bytes cover those */
    size_t vocab_label = longest_token(sv) > longest_token(tv) ? longest_token(sv) : longest_token(tv);
    double bytes = 64;
    for (int i = 0; i < n; i++) {
        int n_src, n_tgt;
        encode_watch(m, tokenizer, sv, tv, &w[i], src, &n_src, tgt, &n_tgt);
        size_t label = strlen(w[i].src) > strlen(w[i].tgt) ? strlen(w[i].src) : strlen(w[i].tgt);
        if (vocab_label > label) label = vocab_label;
        /* with no target given, the greedy translation may run to the model's last position */
        bytes += sentence_bytes(m, n_src + 1, (w[i].tgt[0] ? n_tgt : max) + 1, label + 16) + 1;
    }
    free(src), free(tgt);
    return bytes;
}

int watch_check(const Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w, int n,
                char **unknown) {
    int max = m->cfg.max_positions - 2, rc = 0, greedy = 0;
    int *src = xmalloc(sizeof(int) * (size_t)(max + 1)), *tgt = xmalloc(sizeof(int) * (size_t)(max + 1));
    StrBuf unk = {0};
    *unknown = NULL;
    for (int i = 0; i < n && rc == 0; i++) {
        int n_src, n_tgt;
        encode_watch(m, tokenizer, sv, tv, &w[i], src, &n_src, tgt, &n_tgt);
        if (n_src == 0) rc = err_set("train.watch: sentence %d has no tokens", i + 1);
        else if (n_src > max || n_tgt > max)
            rc = err_set("train.watch: sentence %d is longer than the %d tokens this model has positions for", i + 1,
                         max);
        for (int j = 0; j < n_tgt && rc == 0; j++)
            if (tgt[j] == VOCAB_UNK)
                rc = err_set("train.watch: the target of sentence %d has words not in the target vocabulary", i + 1);
        for (int j = 0; j < n_src && rc == 0; j++)
            if (src[j] == VOCAB_UNK) {
                sb_printf(&unk, "%ssentence %d", unk.len ? ", " : "", i + 1);
                break;
            }
        greedy += !w[i].tgt[0];
    }
    free(src), free(tgt);
    /* refused now rather than written at every validation and refused by the reader */
    double bytes = rc == 0 ? watch_snapshot_bound(m, tokenizer, sv, tv, w, n) : 0;
    if (rc == 0 && bytes > (double)READ_FILE_SMALL)
        rc = err_set("train.watch: a snapshot of these %d sentences could take %.0f bytes, more than the %zu "
                     "'qkv attention --watch' reads: watch fewer or shorter sentences%s",
                     n, bytes, (size_t)READ_FILE_SMALL, greedy ? ", or give their targets" : "");
    if (rc == 0 && unk.len) *unknown = unk.buf;
    else sb_free(&unk);
    return rc;
}

static int snapshot_name(const char *name, long long *step);

/* Step 0 starts a run's record: the snapshots of an earlier run in the same directory
 * (train --force, perhaps of another model) go, so that one watch/ never mixes runs. */
static int clear_snapshots(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        return err_set("%s: cannot open: %s", dir, strerror(e)), err_io(e);
    }
    struct dirent *e;
    char path[CONFIG_PATH_MAX + 300]; /* the directory, '/', a name of up to 255 bytes */
    int rc = 0;
    while ((e = readdir(d)) && rc == 0) {
        long long step;
        if (!snapshot_name(e->d_name, &step)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0 && errno != ENOENT) {
            int err = errno;
            rc = err_set("%s: cannot remove: %s", path, strerror(err)), err_io(err);
        }
    }
    closedir(d);
    return rc;
}

int watch_record(Model *m, int tokenizer, const Vocab *sv, const Vocab *tv, const WatchSentence *w, int n, int64_t step,
                 const char *run_dir, WatchMeasure measure) {
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
        if (measure) measure(m, &a);
        attnmap_surface_labels(&a, tokenizer, sv, tv, src, w[i].src, tgt, w[i].tgt[0] ? w[i].tgt : NULL);
        json_array_append_new(list, attnmap_to_json(&a));
        attnmap_free(&a);
    }
    json_object_set_new(root, "sentences", list);
    char *text = xcheck(json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(7)));
    json_decref(root);
    free(src), free(tgt);
    char dir[CONFIG_PATH_MAX + 16], path[CONFIG_PATH_MAX + 48];
    snprintf(dir, sizeof dir, "%s/" RUN_WATCH_DIR, run_dir);
    snprintf(path, sizeof path, "%s/step-%08lld.json", dir, (long long)step);
    int rc = 0;
    if (strlen(text) > READ_FILE_SMALL) /* watch_check bounds it; never a file the reader refuses */
        rc = err_set("%s: %zu bytes, more than the %zu 'qkv attention --watch' reads: not written", path, strlen(text),
                     (size_t)READ_FILE_SMALL);
    else if (make_dirs(dir) != 0 || (step == 0 && clear_snapshots(dir) != 0) ||
             write_file_atomic(path, text, strlen(text)) != 0)
        rc = -1;
    free(text);
    return rc;
}

/* step-NNNNNNNN.json names only; *step gets N. */
static int snapshot_name(const char *name, long long *step) {
    int end = 0;
    return strlen(name) < 64 && sscanf(name, "step-%lld.json%n", step, &end) == 1 && end > 0 && name[end] == '\0' &&
           *step >= 0 && name[5] >= '0' && name[5] <= '9';
}

typedef struct {
    long long step;
    char name[64];
} SnapshotName;

static int by_name_step(const void *a, const void *b) {
    long long x = ((const SnapshotName *)a)->step, y = ((const SnapshotName *)b)->step;
    return (x > y) - (x < y);
}

/* One snapshot file into s; -1 with the error set. */
static int load_snapshot(const char *path, long long name_step, WatchSnapshot *s, int *n_sentences) {
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
    if (!format || strcmp(format, "qkv-watch-1") != 0)
        rc = err_set("%s: not a qkv watch snapshot (format qkv-watch-1)", path);
    else if (!json_is_integer(json_object_get(root, "step")) || n < 1 || n > CONFIG_WATCH_MAX)
        rc = err_set("%s: needs a step and 1..%d sentences", path, CONFIG_WATCH_MAX);
    else if (json_integer_value(json_object_get(root, "step")) != name_step)
        rc = err_set("%s: holds step %lld, not the step %lld its name says", path,
                     (long long)json_integer_value(json_object_get(root, "step")), name_step);
    else if (*n_sentences && (int)n != *n_sentences)
        rc = err_set("%s: %zu sentences, but the other snapshots have %d (was train.watch changed?)", path, n,
                     *n_sentences);
    if (rc == 0) {
        s->step = json_integer_value(json_object_get(root, "step"));
        s->sentences = xcalloc(n, sizeof(AttnMaps));
        *n_sentences = (int)n;
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = attnmap_from_json(json_array_get(list, i), &s->sentences[i], path);
    }
    json_decref(root);
    return rc;
}

/* "2+2 layers, 4 heads of 8": the model shape a sentence's maps were recorded with. */
static void shape_text(const AttnMaps *a, char *buf, size_t n) {
    snprintf(buf, n, "%d+%d layers, %d heads of %d", a->layers[ATTN_ENC_SELF], a->layers[ATTN_CROSS], a->heads,
             a->d_head);
}

static int same_shape(const AttnMaps *a, const AttnMaps *b) {
    for (int k = 0; k < ATTN_KINDS; k++)
        if (a->layers[k] != b->layers[k]) return 0;
    return a->heads == b->heads && a->d_head == b->d_head;
}

int watch_load(const char *run_dir, WatchLog *out) {
    memset(out, 0, sizeof *out);
    char dir[CONFIG_PATH_MAX + 16], path[CONFIG_PATH_MAX + 96];
    snprintf(dir, sizeof dir, "%s/" RUN_WATCH_DIR, run_dir);
    DIR *d = opendir(dir);
    if (!d) return err_set("%s: no watched sentences recorded (list some under train.watch in the config)", run_dir);
    /* the names first, in step order: errors then name the same file whatever order the
     * directory lists them in, and the first step's model is the one all are held to */
    SnapshotName *names = NULL;
    struct dirent *e;
    int n = 0, cap = 0, rc = 0;
    while ((e = readdir(d)) && rc == 0) {
        long long step;
        if (!snapshot_name(e->d_name, &step)) continue;
        if (n == WATCH_MAX_SNAPSHOTS) rc = err_set("%s: more than %d snapshots", dir, WATCH_MAX_SNAPSHOTS);
        else {
            if (n == cap) names = xrealloc(names, sizeof *names * (size_t)(cap = cap ? 2 * cap : 16));
            names[n].step = step;
            memcpy(names[n++].name, e->d_name, strlen(e->d_name) + 1); /* under 64 bytes: snapshot_name */
        }
    }
    closedir(d);
    if (rc == 0 && n == 0)
        rc = err_set("%s: no snapshots yet (training writes one at step 0 and at every validation)", dir);
    if (rc == 0) qsort(names, (size_t)n, sizeof *names, by_name_step);
    for (int k = 1; k < n && rc == 0; k++)
        if (names[k].step == names[k - 1].step)
            rc = err_set("%s: %s and %s are both step %lld", dir, names[k - 1].name, names[k].name, names[k].step);
    if (rc == 0) out->snap = xcalloc((size_t)n, sizeof(WatchSnapshot));
    for (int k = 0; k < n && rc == 0; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k].name);
        out->n_snapshots = k + 1;
        rc = load_snapshot(path, names[k].step, &out->snap[k], &out->n_sentences);
        /* every sentence of every snapshot from one model: the readers index each by the
         * first one's layers and heads */
        for (int i = 0; i < out->n_sentences && rc == 0; i++) {
            const AttnMaps *ref = &out->snap[0].sentences[0], *a = &out->snap[k].sentences[i];
            if (same_shape(a, ref)) continue;
            char got[96], want[96];
            shape_text(a, got, sizeof got), shape_text(ref, want, sizeof want);
            rc = err_set("%s: sentence %d is from a model of %s, but %s from one of %s: snapshots of different models "
                         "(remove the stale ones)",
                         path, i + 1, got, names[0].name, want);
        }
    }
    free(names);
    if (rc != 0) {
        watch_free(out);
        return -1;
    }
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

/* A gold line's links (caller frees), in the line's order or de-duplicated; -1 when not
 * Pharaoh. */
static int gold_links(const char *line, AlignLink **pairs, int unique) {
    int cap = (int)(strlen(line) / 3 + 1);
    *pairs = xmalloc(sizeof(AlignLink) * (size_t)cap);
    int n = align_parse(line, *pairs, cap);
    return n < 0 ? -1 : unique ? align_unique(*pairs, n) : n;
}

int watch_gold_check(const WatchLog *w, int tokenizer, char **gold, const char *path, const int *forced,
                     int max_target) {
    int rc = 0;
    for (int i = 0; i < w->n_sentences && rc == 0; i++) {
        AlignLink *pairs;
        int n = gold_links(gold[i], &pairs, 0);
        if (n < 0) rc = err_set("%s:%d: not Pharaoh alignments (i-j pairs)", path, i + 1);
        for (int k = 0; k < w->n_snapshots && rc == 0; k++) {
            const AttnMaps *a = &w->snap[k].sentences[i];
            int *sw = xmalloc(sizeof(int) * (size_t)a->S), *tw = xmalloc(sizeof(int) * (size_t)a->T);
            int nsw = align_words(a->src, a->S, tokenizer, sw), ntw = align_words(a->tgt_out, a->T, tokenizer, tw);
            int bad = align_out_of_range(pairs, n, nsw, forced[i] ? ntw : max_target);
            if (bad >= 0 && forced[i])
                rc = err_set("%s:%d: link %d-%d is out of range: watched sentence %d has %d source and %d target words",
                             path, i + 1, pairs[bad][0], pairs[bad][1], i + 1, nsw, ntw);
            else if (bad >= 0) /* translated greedily: its words change, the model's positions bound them */
                rc = err_set("%s:%d: link %d-%d is out of range: watched sentence %d has %d source words and its "
                             "translation at most %d",
                             path, i + 1, pairs[bad][0], pairs[bad][1], i + 1, nsw, max_target);
            free(sw), free(tw);
        }
        free(pairs);
    }
    return rc;
}

int watch_null_recorded(const WatchLog *w) {
    int all = 1;
    for (int k = 0; k < w->n_snapshots; k++)
        for (int i = 0; i < w->n_sentences; i++) all &= w->snap[k].sentences[i].null_from != NULL;
    return all;
}

int watch_aer(const WatchLog *w, int k, int tokenizer, char **gold, int null, double *aer) {
    AlignCounts counts = {0};
    int rc = 0;
    for (int i = 0; i < w->n_sentences && rc == 0; i++) {
        const AttnMaps *a = &w->snap[k].sentences[i];
        AlignLink *pairs;
        int n_gold = gold_links(gold[i], &pairs, 1);
        int *sw = xmalloc(sizeof(int) * (size_t)a->S), *tw = xmalloc(sizeof(int) * (size_t)a->T);
        float *map = xmalloc(sizeof(float) * (size_t)a->S * a->T);
        if (n_gold < 0) rc = err_set("--gold: line %d: not Pharaoh alignments (i-j pairs)", i + 1);
        int nsw = align_words(a->src, a->S, tokenizer, sw), ntw = align_words(a->tgt_out, a->T, tokenizer, tw);
        int *links = xmalloc(sizeof(int) * (size_t)(ntw ? ntw : 1));
        if (rc == 0) {
            if (null) align_source_columns(a->null_from, a->T, a->S, map);
            else attnmap_head_average(a, ATTN_CROSS, a->layers[ATTN_CROSS] - 1, map);
            align_links(map, null ? a->null_from : NULL, tw, a->T, ntw, sw, a->S, nsw, links);
            align_score(links, ntw, pairs, n_gold, &counts);
        }
        free(pairs), free(sw), free(tw), free(map), free(links);
    }
    *aer = align_aer(&counts);
    return rc;
}

char *watch_view_json(const WatchLog *w, const double *aer, int aer_null) {
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
                    for (int h = 0; h < a->heads; h++)
                        json_array_append_new(heads, json_real(attnmap_entropy(a, kind, l, h)));
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
    json_object_set_new(root, "aer_null", json_boolean(aer && aer_null));
    char *text = xcheck(json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(7)));
    json_decref(root);
    return text;
}
