/* config: see config.h. One table describes every key; parsing, overrides, validation
 * and writing the resolved config all walk it. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "config_yaml.h"
#include "util/atomic_file.h"
#include "util/err.h"
#include "util/file.h"
#include "util/text.h"

/* KEY_INT, KEY_BOOL and KEY_ENUM are int fields; KEY_INT64 an int64_t (the seed). */
typedef enum { KEY_INT, KEY_INT64, KEY_FLOAT, KEY_BOOL, KEY_STRING, KEY_ENUM, KEY_WATCH } KeyType;

typedef struct {
    const char *path; /* dotted: "train.lr.warmup" */
    KeyType type;
    size_t offset;
    double def;             /* default: the number, 0/1 for a bool, a choice's index (strings, watch list: empty) */
    double min, max;        /* inclusive, except where open says */
    int open;               /* OPEN_MAX: max excluded */
    const char *choices[4]; /* KEY_ENUM: index = stored value */
    size_t size;            /* KEY_STRING: buffer size */
} KeySpec;

enum { OPEN_MAX = 1 };

/* One row per key: path, field, default, then range or choices. A double holds every
 * default exactly: whole numbers to 2^53 (the widest range, the seed's, stops at 2^31)
 * and the float literals as written. */
/* clang-format off: one row a key, as the table reads best */
#define OFF(field) offsetof(Config, field)
#define INT(p, f, def, lo, hi) \
    { p, KEY_INT, OFF(f), def, lo, hi, 0, {0}, 0 }
#define INT64(p, f, def, lo, hi) \
    { p, KEY_INT64, OFF(f), def, lo, hi, 0, {0}, 0 }
#define FLT(p, f, def, lo, hi, open) \
    { p, KEY_FLOAT, OFF(f), def, lo, hi, open, {0}, 0 }
#define BOOL(p, f, def) \
    { p, KEY_BOOL, OFF(f), def, 0, 1, 0, {0}, 0 }
#define STR(p, f) \
    { p, KEY_STRING, OFF(f), 0, 0, 0, 0, {0}, sizeof(((Config *)0)->f) }
#define ENUM(p, f, def, ...) \
    { p, KEY_ENUM, OFF(f), def, 0, 0, 0, {__VA_ARGS__}, 0 }
#define WATCH(p, f) \
    { p, KEY_WATCH, OFF(f), 0, 0, 0, 0, {0}, 0 }

static const KeySpec keys[] = {
    STR("name", name),
    STR("run_dir", run_dir),
    INT64("seed", seed, 1, 0, 2147483647.0),
    STR("data.train.src", data.train.src),
    STR("data.train.tgt", data.train.tgt),
    STR("data.valid.src", data.valid.src),
    STR("data.valid.tgt", data.valid.tgt),
    ENUM("data.tokenizer", data.tokenizer, TOKENIZER_WORD, "word", "char", "bpe", "unigram"),
    STR("data.spm_model.src", data.spm_model.src),
    STR("data.spm_model.tgt", data.spm_model.tgt),
    INT("data.vocab_size", data.vocab_size, 8000, 8, 1000000),
    INT("data.min_freq", data.min_freq, 1, 1, 1000000000),
    BOOL("data.shared_vocab", data.shared_vocab, 0),
    INT("data.max_len", data.max_len, 100, 1, 4096),
    INT("model.d_model", model.d_model, 128, 2, 8192),
    INT("model.heads", model.heads, 4, 1, 256),
    INT("model.d_ff", model.d_ff, 512, 1, 65536),
    INT("model.encoder_layers", model.encoder_layers, 3, 1, 16),
    INT("model.decoder_layers", model.decoder_layers, 3, 1, 16),
    FLT("model.dropout", model.dropout, 0.1, 0, 1, OPEN_MAX),
    ENUM("model.norm", model.norm, NORM_POST, "post", "pre"),
    BOOL("model.tie_embeddings", model.tie_embeddings, 1),
    INT("train.steps", train.steps, 4000, 1, 2000000000),
    FLT("train.minutes", train.minutes, 0, 0, 1e6, 0),
    INT("train.batch_tokens", train.batch_tokens, 2048, 1, 100000000),
    INT("train.pass_tokens", train.pass_tokens, 2048, 0, 100000000),
    ENUM("train.lr.schedule", train.lr.schedule, LR_NOAM, "noam", "constant"),
    FLT("train.lr.factor", train.lr.factor, 1.0, 0, 1000, 0),
    INT("train.lr.warmup", train.lr.warmup, 400, 1, 100000000),
    FLT("train.lr.value", train.lr.value, 3e-4, 0, 10, 0),
    FLT("train.lr.cooldown", train.lr.cooldown, 0, 0, 1, OPEN_MAX),
    FLT("train.adam.beta1", train.adam.beta1, 0.9, 0, 1, OPEN_MAX),
    FLT("train.adam.beta2", train.adam.beta2, 0.98, 0, 1, OPEN_MAX),
    FLT("train.adam.eps", train.adam.eps, 1e-9, 1e-30, 1, 0), /* not 0: a zero second moment would divide by 0 */
    FLT("train.adam.weight_decay", train.adam.weight_decay, 0.0, 0, 10, 0),
    FLT("train.clip_norm", train.clip_norm, 1.0, 0, 1e9, 0),
    FLT("train.label_smoothing", train.label_smoothing, 0.1, 0, 1, OPEN_MAX),
    INT("train.log_every", train.log_every, 50, 1, 2000000000),
    INT("train.valid_every", train.valid_every, 500, 1, 2000000000),
    INT("train.checkpoint_every", train.checkpoint_every, 500, 1, 2000000000),
    INT("train.keep_checkpoints", train.keep_checkpoints, 3, 1, 1000),
    INT("train.average_last", train.average_last, 0, 0, 1000),
    INT("train.threads", train.threads, 2, 1, CONFIG_THREADS_MAX),
    BOOL("train.valid_bleu", train.valid_bleu, 0),
    ENUM("train.best_by", train.best_by, BEST_BY_LOSS, "loss", "bleu"),
    WATCH("train.watch", train.watch),
    FLT("decode.length_penalty", decode.length_penalty, 1.0, 0, 10, 0),
};
/* clang-format on */
#define N_KEYS (sizeof keys / sizeof keys[0])
/* Config's set_line/set_col hold one entry per key */
_Static_assert(N_KEYS <= CONFIG_KEYS_MAX, "more keys than CONFIG_KEYS_MAX: raise it in config.h");

/* Whether v lies in the key's range: [min, max], or [min, max) for OPEN_MAX. */
static int in_range(const KeySpec *k, double v) {
    return v >= k->min && (k->open == OPEN_MAX ? v < k->max : v <= k->max);
}

/* Mappings that may appear, i.e. the proper prefixes of the keys above. */
static int is_section(const char *path) {
    size_t n = strlen(path);
    for (size_t i = 0; i < N_KEYS; i++)
        if (strncmp(keys[i].path, path, n) == 0 && keys[i].path[n] == '.') return 1;
    return 0;
}

static int find_key(const char *path) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].path, path) == 0) return (int)i;
    return -1;
}

void config_defaults(Config *c) {
    memset(c, 0, sizeof *c); /* strings, the watch list and where each key was set: empty */
    for (size_t i = 0; i < N_KEYS; i++) {
        const KeySpec *k = &keys[i];
        char *field = (char *)c + k->offset;
        switch (k->type) {
        case KEY_INT:
        case KEY_BOOL:
        case KEY_ENUM: *(int *)field = (int)k->def; break;
        case KEY_INT64: *(int64_t *)field = (int64_t)k->def; break;
        case KEY_FLOAT: *(double *)field = k->def; break;
        case KEY_STRING:
        case KEY_WATCH: break;
        }
    }
}

int config_check_keys(void) {
    for (size_t i = 0; i < N_KEYS; i++) {
        const KeySpec *k = &keys[i];
        int n_choices = 0;
        while (n_choices < 4 && k->choices[n_choices]) n_choices++;
        int whole = k->type != KEY_FLOAT && k->def == floor(k->def); /* an int field would drop a fraction */
        switch (k->type) {
        case KEY_INT:
        case KEY_INT64:
        case KEY_BOOL:
            if (!whole || !in_range(k, k->def))
                return err_set("config key table: %s: default %g is not a whole number in [%g, %g]", k->path, k->def,
                               k->min, k->max);
            break;
        case KEY_FLOAT:
            if (!isfinite(k->def) || !in_range(k, k->def))
                return err_set("config key table: %s: default %g is out of range [%g, %g%c", k->path, k->def, k->min,
                               k->max, k->open == OPEN_MAX ? ')' : ']');
            break;
        case KEY_ENUM:
            if (!whole || k->def < 0 || k->def >= n_choices)
                return err_set("config key table: %s: default %g is not the index of one of its %d choices", k->path,
                               k->def, n_choices);
            break;
        case KEY_STRING:
        case KEY_WATCH: break; /* start empty: their rows have no default */
        }
    }
    return 0;
}

/* Edit distance, to suggest the key the user probably meant. */
static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

static const char *suggest(const char *path) {
    const char *best = NULL;
    int best_d = 3;
    for (size_t i = 0; i < N_KEYS; i++) {
        int dd = edit_distance(path, keys[i].path);
        if (dd < best_d) best_d = dd, best = keys[i].path;
    }
    return best;
}

static int add_watch(Config *c, const char *src, const char *tgt, const char *where) {
    if (c->train.n_watch == CONFIG_WATCH_MAX)
        return err_set("%s: train.watch: more than %d sentences", where, CONFIG_WATCH_MAX);
    if (strspn(src, " \t") == strlen(src)) return err_set("%s: train.watch: a sentence is empty", where);
    if (strlen(src) >= CONFIG_WATCH_LEN || strlen(tgt) >= CONFIG_WATCH_LEN)
        return err_set("%s: train.watch: a sentence is longer than %d bytes", where, CONFIG_WATCH_LEN - 1);
    WatchSentence *w = &c->train.watch[c->train.n_watch++];
    strcpy(w->src, src);
    strcpy(w->tgt, tgt);
    return 0;
}

/* train.watch as YAML: a list whose items are a source sentence, or a mapping
 * {src: ..., tgt: ...} when the target to force is given. */
static int set_watch_list(Config *c, yaml_document_t *doc, yaml_node_t *list, const char *file) {
    char where[CONFIG_PATH_MAX + 32];
    c->train.n_watch = 0;
    for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
        yaml_node_t *n = yaml_document_get_node(doc, *it);
        snprintf(where, sizeof where, "%s:%zu:%zu", file, n->start_mark.line + 1, n->start_mark.column + 1);
        const char *src = NULL, *tgt = "";
        if (n->type == YAML_SCALAR_NODE) src = (const char *)n->data.scalar.value;
        for (yaml_node_pair_t *p = n->type == YAML_MAPPING_NODE ? n->data.mapping.pairs.start : NULL;
             p && p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *kn = yaml_document_get_node(doc, p->key), *vn = yaml_document_get_node(doc, p->value);
            const char *key = kn->type == YAML_SCALAR_NODE ? (const char *)kn->data.scalar.value : "";
            if (vn->type != YAML_SCALAR_NODE || (strcmp(key, "src") != 0 && strcmp(key, "tgt") != 0))
                return err_set("%s: train.watch: an item is a sentence or {src: ..., tgt: ...}", where);
            if (strcmp(key, "src") == 0) src = (const char *)vn->data.scalar.value;
            else tgt = (const char *)vn->data.scalar.value;
        }
        if (!src) return err_set("%s: train.watch: an item is a sentence or {src: ..., tgt: ...}", where);
        if (add_watch(c, src, tgt, where) != 0) return -1;
    }
    return 0;
}

/* Parses one scalar into the key's field. `where` prefixes the error. */
static int set_value(Config *c, const KeySpec *k, const char *text, const char *where) {
    char *field = (char *)c + k->offset;
    char *end;
    if (k->type != KEY_STRING && k->type != KEY_WATCH && *text == '\0')
        return err_set("%s: %s needs a value", where, k->path);
    switch (k->type) {
    case KEY_INT:
    case KEY_INT64: {
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (!*end && errno == ERANGE) /* digits past 64 bits: a number, and out of range */
            return err_set("%s: %s: %s is out of range [%.0f, %.0f]", where, k->path, text, k->min, k->max);
        if (*end || errno) return err_set("%s: %s: expected an integer, got '%s'", where, k->path, text);
        if (!in_range(k, (double)v))
            return err_set("%s: %s: %lld is out of range [%.0f, %.0f]", where, k->path, v, k->min, k->max);
        if (k->type == KEY_INT64) *(int64_t *)field = v;
        else *(int *)field = (int)v;
        return 0;
    }
    case KEY_FLOAT: {
        errno = 0;
        double v = strtod(text, &end);
        if (*end || errno || !isfinite(v)) return err_set("%s: %s: expected a number, got '%s'", where, k->path, text);
        if (!in_range(k, v))
            return err_set("%s: %s: %g is out of range [%g, %g%c", where, k->path, v, k->min, k->max,
                           k->open == OPEN_MAX ? ')' : ']');
        *(double *)field = v + 0.0; /* "-0" is 0: no schedule prints a learning rate of -0.00e+00 */
        return 0;
    }
    case KEY_BOOL: {
        static const char *yes[] = {"true", "yes", "on"}, *no[] = {"false", "no", "off"};
        for (int i = 0; i < 3; i++) {
            if (strcasecmp(text, yes[i]) == 0) return *(int *)field = 1, 0;
            if (strcasecmp(text, no[i]) == 0) return *(int *)field = 0, 0;
        }
        return err_set("%s: %s: expected true or false, got '%s'", where, k->path, text);
    }
    case KEY_STRING:
        if (strlen(text) >= k->size) return err_set("%s: %s: value is too long", where, k->path);
        strcpy(field, text);
        return 0;
    case KEY_WATCH: /* one sentence, as --set gives it; empty: none */
        c->train.n_watch = 0;
        return *text ? add_watch(c, text, "", where) : 0;
    case KEY_ENUM:
        for (int i = 0; i < 4 && k->choices[i]; i++)
            if (strcmp(text, k->choices[i]) == 0) return *(int *)field = i, 0;
        {
            char list[128] = "";
            for (int i = 0; i < 4 && k->choices[i]; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", k->choices[i]);
            return err_set("%s: %s: '%s' is not one of: %s", where, k->path, text, list);
        }
    }
    return -1;
}

static int walk(Config *c, yaml_document_t *doc, yaml_node_t *node, const char *prefix, const char *file) {
    char where[CONFIG_PATH_MAX + 32];
    snprintf(where, sizeof where, "%s:%zu:%zu", file, node->start_mark.line + 1, node->start_mark.column + 1);
    if (node->type != YAML_MAPPING_NODE) {
        if (*prefix) return err_set("%s: %s must be a mapping of keys", where, prefix);
        return err_set("%s: the config must be a mapping of keys", where);
    }
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(doc, p->key), *vn = yaml_document_get_node(doc, p->value);
        snprintf(where, sizeof where, "%s:%zu:%zu", file, kn->start_mark.line + 1, kn->start_mark.column + 1);
        if (kn->type != YAML_SCALAR_NODE) return err_set("%s: keys must be plain words", where);
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", (const char *)kn->data.scalar.value);
        for (yaml_node_pair_t *q = node->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *other = yaml_document_get_node(doc, q->key);
            if (other->type == YAML_SCALAR_NODE &&
                strcmp((const char *)other->data.scalar.value, (const char *)kn->data.scalar.value) == 0)
                return err_set("%s: duplicate key '%s'", where, path);
        }
        int idx = find_key(path);
        if (idx >= 0 && c->set_line[idx] > 0) /* the same key by another spelling, a dotted one */
            return err_set("%s: duplicate key '%s' (set at line %d too)", where, path, c->set_line[idx]);
        if (idx >= 0) {
            snprintf(where, sizeof where, "%s:%zu:%zu", file, vn->start_mark.line + 1, vn->start_mark.column + 1);
            if (keys[idx].type == KEY_WATCH && vn->type == YAML_SEQUENCE_NODE) {
                if (set_watch_list(c, doc, vn, file) != 0) return -1;
            } else if (vn->type != YAML_SCALAR_NODE) {
                return err_set("%s: %s: expected a single value", where, path);
            } else if (set_value(c, &keys[idx], (const char *)vn->data.scalar.value, where) != 0) {
                return -1;
            }
            c->set_line[idx] = (int)vn->start_mark.line + 1;
            c->set_col[idx] = (int)vn->start_mark.column + 1;
        } else if (is_section(path)) {
            if (walk(c, doc, vn, path, file) != 0) return -1;
        } else {
            const char *hint = suggest(path);
            if (hint) return err_set("%s: unknown key '%s' (did you mean '%s'?)", where, path, hint);
            return err_set("%s: unknown key '%s'", where, path);
        }
    }
    return 0;
}

int config_parse(Config *c, const char *text, size_t len, const char *name) {
    snprintf(c->source, sizeof c->source, "%s", name);
    yaml_document_t doc;
    if (config_yaml_load(text, len, CONFIG_TEXT_MAX, name, &doc) != 0) return -1;
    int rc = 0;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    /* where each key is set in this text alone, so that walk sees a key set twice however
     * spelled ("train.steps" and train: {steps}); where earlier texts set the others is kept */
    int before_line[CONFIG_KEYS_MAX], before_col[CONFIG_KEYS_MAX];
    memcpy(before_line, c->set_line, sizeof before_line), memcpy(before_col, c->set_col, sizeof before_col);
    memset(c->set_line, 0, sizeof c->set_line), memset(c->set_col, 0, sizeof c->set_col);
    if (root && !(root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0)) rc = walk(c, &doc, root, "", name);
    for (size_t i = 0; i < N_KEYS; i++)
        if (c->set_line[i] == 0) c->set_line[i] = before_line[i], c->set_col[i] = before_col[i];
    yaml_document_delete(&doc);
    if (rc == 0 && c->name[0] == '\0') {
        /* the run is named after its config file unless it says otherwise */
        const char *base = strrchr(name, '/');
        base = base ? base + 1 : name;
        size_t n = strcspn(base, ".");
        if (n >= sizeof c->name) n = sizeof c->name - 1;
        memcpy(c->name, base, n);
        c->name[n] = '\0';
    }
    return rc;
}

int config_load(Config *c, const char *path) {
    size_t len;
    char *text = read_file_max(path, CONFIG_TEXT_MAX, &len);
    if (!text) return -1;
    int rc = config_parse(c, text, len, path);
    free(text);
    return rc;
}

/* Whether key k holds the same value in a and b. */
static int key_equal(const KeySpec *k, const Config *a, const Config *b) {
    const char *x = (const char *)a + k->offset, *y = (const char *)b + k->offset;
    switch (k->type) {
    case KEY_INT64: return *(const int64_t *)x == *(const int64_t *)y;
    case KEY_FLOAT: return *(const double *)x == *(const double *)y;
    case KEY_STRING: return strcmp(x, y) == 0;
    case KEY_WATCH: {
        int same = a->train.n_watch == b->train.n_watch;
        for (int i = 0; same && i < a->train.n_watch; i++)
            same = strcmp(a->train.watch[i].src, b->train.watch[i].src) == 0 &&
                   strcmp(a->train.watch[i].tgt, b->train.watch[i].tgt) == 0;
        return same;
    }
    default: return *(const int *)x == *(const int *)y; /* int, bool, enum */
    }
}

int config_same_model(const Config *a, const Config *b, char *what, size_t n) {
    for (size_t i = 0; i < N_KEYS; i++) {
        const KeySpec *k = &keys[i];
        if (strncmp(k->path, "model.", 6) != 0 && strcmp(k->path, "data.tokenizer") != 0 &&
            strcmp(k->path, "data.shared_vocab") != 0)
            continue;
        if (strncmp(k->path, "model.dropout", 13) == 0) continue; /* no effect on the weights' meaning */
        if (!key_equal(k, a, b)) {
            snprintf(what, n, "%s", k->path);
            return 0;
        }
    }
    return 1;
}

void config_copy_keys(Config *dst, const Config *src, const char *const *paths) {
    for (; *paths; paths++) {
        int i = find_key(*paths);
        if (i < 0) continue;
        const KeySpec *k = &keys[i];
        size_t size = k->type == KEY_STRING  ? k->size
                      : k->type == KEY_INT64 ? sizeof(int64_t)
                      : k->type == KEY_FLOAT ? sizeof(double)
                      : k->type == KEY_WATCH ? sizeof dst->train.watch
                                             : sizeof(int);
        memcpy((char *)dst + k->offset, (const char *)src + k->offset, size);
        if (k->type == KEY_WATCH) dst->train.n_watch = src->train.n_watch;
        dst->set_line[i] = src->set_line[i], dst->set_col[i] = src->set_col[i];
    }
}

int config_differences(const Config *a, const Config *b, const char *const *skip, char *what, size_t n) {
    int count = 0;
    for (size_t i = 0; i < N_KEYS; i++) {
        int skipped = 0;
        for (const char *const *s = skip; s && *s && !skipped; s++) skipped = strcmp(*s, keys[i].path) == 0;
        if (skipped || key_equal(&keys[i], a, b)) continue;
        if (count++ == 0) snprintf(what, n, "%s", keys[i].path);
    }
    return count;
}

/* --set train.watch=[...]: the value as the file would hold it, a YAML flow list (of
 * sentences or {src: ..., tgt: ...}), under the file's limits; a value that is not a list
 * would otherwise be watched as one sentence, brackets and all. */
static int set_watch_flow(Config *c, const char *value, const char *where) {
    yaml_document_t doc;
    if (config_yaml_load(value, strlen(value), CONFIG_TEXT_MAX, where, &doc) != 0) return -1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    int rc = root && root->type == YAML_SEQUENCE_NODE
                 ? set_watch_list(c, &doc, root, where)
                 : err_set("%s: train.watch: expected a list [\"...\", {src: ..., tgt: ...}]", where);
    yaml_document_delete(&doc);
    return rc;
}

int config_set(Config *c, const char *assignment) {
    char where[300];
    snprintf(where, sizeof where, "--set %s", assignment);
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment) return err_set("%s: expected key=value", where);
    char path[256];
    size_t n = (size_t)(eq - assignment);
    if (n >= sizeof path) return err_set("%s: key too long", where);
    memcpy(path, assignment, n);
    path[n] = '\0';
    int idx = find_key(path);
    if (idx < 0) {
        /* a section ("train.lr") holds keys, not a value: name one of them */
        for (size_t i = 0; i < N_KEYS; i++)
            if (strncmp(keys[i].path, path, n) == 0 && keys[i].path[n] == '.')
                return err_set("%s: '%s' is a section, not a key: set one of its keys, such as '%s'", where, path,
                               keys[i].path);
        const char *hint = suggest(path);
        if (hint) return err_set("%s: unknown key '%s' (did you mean '%s'?)", where, path, hint);
        return err_set("%s: unknown key '%s'", where, path);
    }
    const char *value = eq + 1;
    if (keys[idx].type == KEY_WATCH && value[strspn(value, " \t")] == '[') {
        if (set_watch_flow(c, value, where) != 0) return -1;
    } else if (set_value(c, &keys[idx], value, where) != 0) {
        return -1;
    }
    c->set_line[idx] = -1; /* -1: set on the command line */
    return 0;
}

const char *config_where(const Config *c, const char *path, char *buf, size_t n) {
    int idx = find_key(path);
    if (idx >= 0 && c->set_line[idx] > 0) snprintf(buf, n, "%s:%d:%d", c->source, c->set_line[idx], c->set_col[idx]);
    else if (idx >= 0 && c->set_line[idx] < 0) snprintf(buf, n, "--set %s", path);
    else snprintf(buf, n, "%s", c->source[0] ? c->source : "config");
    return buf;
}

static int check_file(const Config *c, const char *key, const char *path) {
    char w[CONFIG_PATH_MAX + 32];
    struct stat st;
    if (stat(path, &st) != 0)
        return err_set("%s: %s: '%s': %s", config_where(c, key, w, sizeof w), key, path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return err_set("%s: %s: '%s' is not a regular file", config_where(c, key, w, sizeof w), key, path);
    return 0;
}

/* Whether two model files are one model: the same name, the same file, or the same
 * bytes. A file that cannot be read counts as the same: check_file then says why. */
static int same_model(const char *a, const char *b) {
    struct stat sa, sb;
    if (strcmp(a, b) == 0) return 1;
    if (!a[0]) return 0;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0 || !S_ISREG(sa.st_mode) || !S_ISREG(sb.st_mode)) return 1;
    if (sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino) return 1;
    if (sa.st_size != sb.st_size) return 0;
    size_t la, lb;
    char *x = read_file_max(a, READ_FILE_SMALL, &la), *y = x ? read_file_max(b, READ_FILE_SMALL, &lb) : NULL;
    int same = !x || !y || (la == lb && memcmp(x, y, la) == 0);
    free(x), free(y);
    return same;
}

int config_validate(Config *c, int check_files) {
    char w[CONFIG_PATH_MAX + 32];
    if (c->data.train.src[0] == '\0')
        return err_set("%s: data.train.src is required", config_where(c, "data", w, sizeof w));
    if (c->data.train.tgt[0] == '\0')
        return err_set("%s: data.train.tgt is required", config_where(c, "data", w, sizeof w));
    if ((c->data.valid.src[0] == '\0') != (c->data.valid.tgt[0] == '\0'))
        return err_set("%s: data.valid needs both src and tgt",
                       config_where(c, c->data.valid.src[0] ? "data.valid.src" : "data.valid.tgt", w, sizeof w));
    if (c->model.d_model % c->model.heads != 0)
        return err_set("%s: model.d_model (%d) must be divisible by model.heads (%d)",
                       config_where(c, "model.d_model", w, sizeof w), c->model.d_model, c->model.heads);
    /* with BLEU measured, the best checkpoint is the best by BLEU, unless the config says
     * which (a run's own config.yaml says it always, so a resumed run keeps its measure) */
    if (c->train.valid_bleu && c->set_line[find_key("train.best_by")] == 0) c->train.best_by = BEST_BY_BLEU;
    if (c->train.best_by == BEST_BY_BLEU && !c->train.valid_bleu)
        return err_set("%s: train.best_by: bleu needs train.valid_bleu: true",
                       config_where(c, "train.best_by", w, sizeof w));
    if (c->train.average_last > c->train.keep_checkpoints)
        return err_set("%s: train.average_last is %d, but train.keep_checkpoints keeps %d step checkpoints to average",
                       config_where(c, "train.average_last", w, sizeof w), c->train.average_last,
                       c->train.keep_checkpoints);
    if (c->name[0] == '\0') snprintf(c->name, sizeof c->name, "run");
    /* the name becomes a directory under runs/: a path component, printable */
    int dots = strcmp(c->name, ".") == 0 || strcmp(c->name, "..") == 0;
    for (const char *p = c->name; *p && !dots; p++) dots = *p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f;
    if (dots)
        return err_set("%s: name: must be a plain directory name: not '.' or '..', no '/', no control characters",
                       config_where(c, "name", w, sizeof w));
    if (c->run_dir[0] == '\0') snprintf(c->run_dir, sizeof c->run_dir, "runs/%s", c->name);
    /* a YAML file cannot hold other bytes, but --set and file names can: refuse them
     * here, before a run directory whose config.yaml could not say them is made */
    for (size_t i = 0; i < N_KEYS; i++) {
        const char *text = (const char *)c + keys[i].offset;
        if (keys[i].type == KEY_STRING && !utf8_valid(text, strlen(text)))
            return err_set("%s: %s: not valid UTF-8", config_where(c, keys[i].path, w, sizeof w), keys[i].path);
    }
    for (int i = 0; i < c->train.n_watch; i++)
        if (!utf8_valid(c->train.watch[i].src, strlen(c->train.watch[i].src)) ||
            !utf8_valid(c->train.watch[i].tgt, strlen(c->train.watch[i].tgt)))
            return err_set("%s: train.watch: sentence %d is not valid UTF-8",
                           config_where(c, "train.watch", w, sizeof w), i + 1);
    int subword = tokenizer_is_subword(c->data.tokenizer);
    if (!subword && (c->data.spm_model.src[0] || c->data.spm_model.tgt[0]))
        return err_set("%s: data.spm_model: SentencePiece models need data.tokenizer bpe or unigram",
                       config_where(c, c->data.spm_model.src[0] ? "data.spm_model.src" : "data.spm_model.tgt", w,
                                    sizeof w));
    /* a shared vocabulary is one model: a different second one would go unused. Checked
     * for a new run (check_files); a run's own config.yaml was trained with already */
    if (check_files && subword && c->data.shared_vocab && c->data.spm_model.tgt[0] &&
        !same_model(c->data.spm_model.src, c->data.spm_model.tgt))
        return err_set("%s: data.spm_model.tgt: '%s' differs from data.spm_model.src '%s': a shared vocabulary is one "
                       "model for both sides; give it as src alone, or set data.shared_vocab: false",
                       config_where(c, "data.spm_model.tgt", w, sizeof w), c->data.spm_model.tgt,
                       c->data.spm_model.src);
    if (subword && (c->data.spm_model.src[0] == '\0') != (c->data.spm_model.tgt[0] == '\0') && !c->data.shared_vocab)
        return err_set("%s: data.spm_model needs both src and tgt (or data.shared_vocab: true and src alone)",
                       config_where(c, c->data.spm_model.src[0] ? "data.spm_model.src" : "data.spm_model.tgt", w,
                                    sizeof w));
    /* a schedule's key given on the command line to a schedule that does not read it would
     * be ignored unseen (a file may hold both schedules' keys, to switch between them) */
    static const struct {
        const char *key;
        int schedule; /* the one that reads it */
    } lr_keys[] = {{"train.lr.factor", LR_NOAM}, {"train.lr.warmup", LR_NOAM}, {"train.lr.value", LR_CONSTANT}};
    static const char *const schedule_names[] = {[LR_NOAM] = "noam", [LR_CONSTANT] = "constant"};
    for (size_t i = 0; i < sizeof lr_keys / sizeof *lr_keys; i++)
        if (c->train.lr.schedule != lr_keys[i].schedule && c->set_line[find_key(lr_keys[i].key)] < 0)
            return err_set("--set %s: read by train.lr.schedule: %s alone (the schedule here is %s)", lr_keys[i].key,
                           schedule_names[lr_keys[i].schedule], schedule_names[c->train.lr.schedule]);
    /* the same for min_freq, which cuts word and char vocabularies alone */
    if (subword && c->set_line[find_key("data.min_freq")] < 0)
        return err_set("--set data.min_freq: read by data.tokenizer word and char alone (a SentencePiece vocabulary "
                       "has data.vocab_size pieces)");
    /* the BLEU is the validation set's: without one, nothing would be decoded, and with
     * best_by: bleu no checkpoint would ever be best. Checked for a new run, as above */
    if (check_files && c->train.valid_bleu && c->data.valid.src[0] == '\0')
        return err_set("%s: train.valid_bleu: true needs data.valid (the BLEU is of its translations)",
                       config_where(c, "train.valid_bleu", w, sizeof w));
    if (check_files) {
        if (check_file(c, "data.train.src", c->data.train.src) || check_file(c, "data.train.tgt", c->data.train.tgt))
            return -1;
        if ((c->data.spm_model.src[0] && check_file(c, "data.spm_model.src", c->data.spm_model.src)) ||
            (c->data.spm_model.tgt[0] && check_file(c, "data.spm_model.tgt", c->data.spm_model.tgt)))
            return -1;
        if (c->data.valid.src[0] &&
            (check_file(c, "data.valid.src", c->data.valid.src) || check_file(c, "data.valid.tgt", c->data.valid.tgt)))
            return -1;
    }
    return 0;
}

/* Characters YAML takes raw inside double quotes and gives back unchanged: printable
 * ones (YAML 1.1's c-printable) that are not line breaks, '"' or '\\'. A raw line
 * break would be folded into a space; controls are not allowed raw at all. */
static int yaml_raw_ok(uint32_t cp) {
    if (cp == '"' || cp == '\\') return 0;
    if (cp >= 0x20 && cp <= 0x7E) return 1;
    if (cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF) return 0; /* line/paragraph separators, BOM */
    return (cp >= 0xA0 && cp <= 0xD7FF) || (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

/* s as a YAML double-quoted scalar that reads back as exactly s: the one escaper of the
 * resolved config. s must be valid UTF-8 (YAML text is Unicode: an invalid byte has no
 * spelling); -1 if it is not. */
static int put_yaml_string(StrBuf *sb, const char *s) {
    size_t n = strlen(s);
    if (!utf8_valid(s, n)) return -1;
    sb_append(sb, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t len = *p < 0x80 ? 1 : *p < 0xE0 ? 2 : *p < 0xF0 ? 3 : 4;
        uint32_t cp = len == 1 ? *p : len == 2 ? *p & 0x1Fu : len == 3 ? *p & 0x0Fu : *p & 0x07u;
        for (size_t k = 1; k < len; k++) cp = cp << 6 | (p[k] & 0x3Fu);
        if (yaml_raw_ok(cp)) sb_append(sb, (const char *)p, len);
        else if (cp == '"' || cp == '\\') sb_printf(sb, "\\%c", (char)cp);
        else if (cp == '\t') sb_append(sb, "\\t", 2);
        else if (cp == '\n') sb_append(sb, "\\n", 2);
        else if (cp < 0x100) sb_printf(sb, "\\x%02X", (unsigned)cp);
        else sb_printf(sb, "\\u%04X", (unsigned)cp);
        p += len;
    }
    sb_append(sb, "\"", 1);
    return 0;
}

/* The shortest %g spelling of v that strtod reads back as v, bit for bit (0.1, where %.17g
 * writes 0.10000000000000001): the resolved config is read by people, and a resume, an
 * export or rank 1 reads the very double the run used. 17 digits always round-trip. */
static void put_float(StrBuf *sb, double v) {
    char buf[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    sb_printf(sb, "%s\n", buf);
}

int config_text_parts(const Config *c, const char *name, ConfigTextFn fn, void *ctx) {
    Config def;
    config_defaults(&def);
    StrBuf sb = {0};
    sb_printf(&sb, "# resolved config: every key, defaults included\n");
    char open[4][64] = {{0}}; /* the sections the previous key left open */
    int depth = 0;
    for (size_t i = 0; i < N_KEYS; i++) {
        const KeySpec *k = &keys[i];
        char parts[4][64];
        int np = 0;
        for (const char *s = k->path; np < 4;) {
            size_t n = strcspn(s, ".");
            snprintf(parts[np++], sizeof parts[0], "%.*s", (int)n, s);
            if (!s[n]) break;
            s += n + 1;
        }
        int same = 0;
        while (same < depth && same < np - 1 && strcmp(open[same], parts[same]) == 0) same++;
        for (int d = same; d < np - 1; d++) {
            sb_printf(&sb, "%*s%s:\n", 2 * d, "", parts[d]);
            memcpy(open[d], parts[d], sizeof open[d]);
        }
        fn(ctx, sb.buf, 0); /* the comment or the sections this key opens */
        sb.len = 0, sb.buf[0] = '\0';
        depth = np - 1;
        sb_printf(&sb, "%*s%s: ", 2 * depth, "", parts[np - 1]);
        const char *field = (const char *)c + k->offset;
        switch (k->type) {
        case KEY_INT: sb_printf(&sb, "%d\n", *(const int *)field); break;
        case KEY_INT64: sb_printf(&sb, "%lld\n", (long long)*(const int64_t *)field); break;
        case KEY_FLOAT: put_float(&sb, *(const double *)field); break;
        case KEY_BOOL: sb_printf(&sb, "%s\n", *(const int *)field ? "true" : "false"); break;
        case KEY_STRING:
            if (put_yaml_string(&sb, field) != 0) {
                sb_free(&sb);
                return err_set("%s: %s is not valid UTF-8, which YAML cannot hold", name, k->path);
            }
            sb_append(&sb, "\n", 1);
            break;
        case KEY_ENUM: sb_printf(&sb, "%s\n", k->choices[*(const int *)field]); break;
        case KEY_WATCH:
            if (c->train.n_watch == 0) sb_printf(&sb, "[]\n");
            else sb_append(&sb, "\n", 1);
            for (int i = 0; i < c->train.n_watch; i++) {
                /* valid UTF-8: config_validate checked */
                sb_printf(&sb, "%*s- src: ", 2 * depth + 2, "");
                put_yaml_string(&sb, c->train.watch[i].src);
                sb_printf(&sb, "\n%*s  tgt: ", 2 * depth + 2, "");
                put_yaml_string(&sb, c->train.watch[i].tgt);
                sb_append(&sb, "\n", 1);
            }
            break;
        }
        fn(ctx, sb.buf, !key_equal(k, c, &def));
        sb.len = 0, sb.buf[0] = '\0';
    }
    sb_free(&sb);
    return 0;
}

static void append_part(void *ctx, const char *text, int changed) {
    (void)changed;
    sb_append(ctx, text, strlen(text));
}

char *config_text(const Config *c, const char *name) {
    StrBuf sb = {0};
    if (config_text_parts(c, name, append_part, &sb) != 0) return sb_free(&sb), NULL;
    return sb.buf;
}

int config_write(const Config *c, const char *path) {
    char *text = config_text(c, path);
    if (!text) return -1;
    int rc = write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}
