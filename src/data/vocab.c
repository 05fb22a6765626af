/* vocab: see vocab.h. */
#include "data/vocab.h"

#include <stdlib.h>
#include <string.h>

#include "data/spm.h"
#include "util/atomic_file.h"
#include "util/checksum.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"
#include "util/rng.h"
#include "util/text.h"

static const char *special_names[VOCAB_N_SPECIAL] = {"<pad>", "<bos>", "<eos>", "<unk>"};

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static void rehash(Vocab *v, size_t n_slots) {
    free(v->slots);
    v->n_slots = n_slots;
    v->slots = xmalloc(sizeof(int) * n_slots);
    for (size_t i = 0; i < n_slots; i++) v->slots[i] = -1;
    for (int id = 0; id < v->size; id++) {
        size_t s = hash_bytes(v->tokens[id], strlen(v->tokens[id])) & (n_slots - 1);
        while (v->slots[s] >= 0) s = (s + 1) & (n_slots - 1);
        v->slots[s] = id;
    }
}

static size_t find_slot(const Vocab *v, const char *tok, size_t len) {
    size_t s = hash_bytes(tok, len) & (v->n_slots - 1);
    while (v->slots[s] >= 0) {
        const char *t = v->tokens[v->slots[s]];
        if (strlen(t) == len && memcmp(t, tok, len) == 0) break;
        s = (s + 1) & (v->n_slots - 1);
    }
    return s;
}

static int add_token(Vocab *v, const char *tok, size_t len) {
    if (v->size == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 64;
        v->tokens = xrealloc(v->tokens, sizeof(char *) * (size_t)v->cap);
        v->counts = xrealloc(v->counts, sizeof(int64_t) * (size_t)v->cap);
    }
    char *t = xmalloc(len + 1);
    memcpy(t, tok, len);
    t[len] = '\0';
    int id = v->size++;
    v->tokens[id] = t;
    v->counts[id] = 0;
    if ((size_t)v->size * 2 > v->n_slots) rehash(v, v->n_slots ? 2 * v->n_slots : 256);
    else v->slots[find_slot(v, tok, len)] = id;
    return id;
}

void vocab_init(Vocab *v) {
    memset(v, 0, sizeof *v);
    rehash(v, 256);
    for (int i = 0; i < VOCAB_N_SPECIAL; i++) add_token(v, special_names[i], strlen(special_names[i]));
}

void vocab_free(Vocab *v) {
    if (!v) return;
    spm_free(v->spm);
    free(v->spm_model);
    for (int i = 0; i < v->size; i++) free(v->tokens[i]);
    free(v->tokens);
    free(v->counts);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

void vocab_count(Vocab *v, const char *tok, size_t len, int64_t count) {
    size_t s = find_slot(v, tok, len);
    int id = v->slots[s] >= 0 ? v->slots[s] : add_token(v, tok, len);
    if (id >= VOCAB_N_SPECIAL) v->counts[id] += count;
}

int vocab_lookup(const Vocab *v, const char *tok, size_t len) {
    int id = v->slots[find_slot(v, tok, len)];
    return id >= 0 ? id : VOCAB_UNK;
}

const char *vocab_token(const Vocab *v, int id) { return id >= 0 && id < v->size ? v->tokens[id] : "<unk>"; }

static const Vocab *sort_vocab;
static int by_count(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    int64_t cx = sort_vocab->counts[x], cy = sort_vocab->counts[y];
    if (cx != cy) return cx > cy ? -1 : 1;
    return strcmp(sort_vocab->tokens[x], sort_vocab->tokens[y]);
}

void vocab_prune(Vocab *v, int max_size, int min_freq) {
    int n = v->size - VOCAB_N_SPECIAL;
    int *ids = xmalloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) ids[i] = i + VOCAB_N_SPECIAL;
    sort_vocab = v;
    qsort(ids, (size_t)n, sizeof(int), by_count);
    Vocab out;
    vocab_init(&out);
    for (int i = 0; i < n && out.size < max_size; i++) {
        if (v->counts[ids[i]] < min_freq) break;
        const char *t = v->tokens[ids[i]];
        int id = add_token(&out, t, strlen(t));
        out.counts[id] = v->counts[ids[i]];
    }
    free(ids);
    vocab_free(v);
    *v = out;
}

uint64_t vocab_hash(const Vocab *v) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < v->size; i++) h = hash64(h, hash_bytes(v->tokens[i], strlen(v->tokens[i]) + 1));
    /* a model's normalisation rules are part of what a token means */
    if (v->spm) h = hash64(h, checksum64(v->spm_model, v->spm_len));
    return h;
}

char *vocab_text(const Vocab *v) {
    StrBuf sb = {0};
    sb_append(&sb, "", 0);
    for (int i = 0; i < v->size; i++) sb_printf(&sb, "%s\n", v->tokens[i]);
    return sb.buf;
}

int vocab_save(const Vocab *v, const char *path) {
    char *text = vocab_text(v);
    int rc = write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}

int vocab_parse(Vocab *v, char *text, size_t len, const char *what) {
    vocab_init(v);
    int rc = 0, lineno = 0;
    for (char *line = text; rc == 0 && line < text + len; lineno++) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        if (!nl) {
            rc = err_set("%s: last line is not terminated (truncated file?)", what);
            break;
        }
        *nl = '\0';
        if (lineno < VOCAB_N_SPECIAL) {
            if (strcmp(line, special_names[lineno]) != 0)
                rc = err_set("%s:%d: expected '%s', found '%.40s': not a qkv vocabulary", what, lineno + 1,
                             special_names[lineno], line);
        } else if (line[0] == '\0' || v->slots[find_slot(v, line, strlen(line))] >= 0) {
            rc = err_set("%s:%d: duplicate or empty token", what, lineno + 1);
        } else {
            add_token(v, line, strlen(line));
        }
        line = nl + 1;
    }
    if (rc == 0 && v->size < VOCAB_N_SPECIAL + 1)
        rc = err_set("%s: only %d tokens: not a trained vocabulary", what, v->size);
    if (rc != 0) vocab_free(v);
    return rc;
}

int vocab_load(Vocab *v, const char *path) {
    size_t len;
    char *text = read_file_max(path, READ_FILE_SMALL, &len);
    if (!text) return -1;
    int rc = vocab_parse(v, text, len, path);
    free(text);
    return rc;
}

int vocab_from_spm(Vocab *v, const char *bytes, size_t len, const char *what) {
    Spm *spm = spm_load(bytes, len, what);
    if (!spm) return -1;
    vocab_init(v);
    int n = spm_size(spm);
    for (int id = VOCAB_N_SPECIAL; id < n; id++) {
        const char *piece = spm_piece(spm, id);
        if (v->slots[find_slot(v, piece, strlen(piece))] >= 0) {
            err_set("%s: piece %d ('%.40s') clashes with a token qkv reserves or an earlier piece", what, id, piece);
            spm_free(spm); /* after the message: piece points into the model */
            vocab_free(v);
            return -1;
        }
        add_token(v, piece, strlen(piece));
    }
    v->spm = spm;
    v->spm_model = xmalloc(len ? len : 1);
    memcpy(v->spm_model, bytes, len);
    v->spm_len = len;
    return 0;
}
