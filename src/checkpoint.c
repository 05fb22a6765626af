/* checkpoint: see checkpoint.h. The JSON header is written and read with jansson. */
#include "checkpoint.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints store little-endian float32; add byte swapping for this machine"
#endif

#define HEADER_MAX (64u << 20) /* a header past 64 MiB is not one of ours */

int ckpt_save_weights(const Model *m, const char *path, const MetaEntry *meta, int n_meta) {
    json_t *root = json_object(), *md = json_object();
    for (int i = 0; i < n_meta; i++) json_object_set_new(md, meta[i].key, json_string(meta[i].value));
    json_object_set_new(root, "__metadata__", md);
    size_t offset = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        json_t *entry = json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32", "shape", shape, "data_offsets",
                                  (json_int_t)offset, (json_int_t)(offset + 4 * t->size));
        json_object_set_new(root, t->name, entry);
        offset += 4 * t->size;
    }
    char *header = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    size_t hlen = strlen(header), padded = (hlen + 7) & ~(size_t)7; /* data starts 8-byte aligned */
    size_t total = 8 + padded + offset;
    unsigned char *buf = xmalloc(total);
    uint64_t n = padded;
    memcpy(buf, &n, 8);
    memcpy(buf + 8, header, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    free(header);
    unsigned char *data = buf + 8 + padded;
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        memcpy(data, m->params + t->offset, 4 * t->size);
        data += 4 * t->size;
    }
    int rc = write_file_atomic(path, buf, total);
    free(buf);
    return rc;
}

typedef struct {
    size_t begin, end;
} Span;

static int by_begin(const void *a, const void *b) {
    const Span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

int ckpt_load_weights(Model *m, const char *path) {
    size_t len;
    char *file = read_file(path, &len);
    if (!file) return -1;
    int rc = -1;
    json_t *root = NULL;
    float *staged = NULL;
    Span *spans = NULL;
    if (len < 8) {
        err_set("%s: too short to be a checkpoint (%zu bytes)", path, len);
        goto done;
    }
    uint64_t hlen;
    memcpy(&hlen, file, 8);
    if (hlen == 0 || hlen > HEADER_MAX || hlen > len - 8) {
        err_set("%s: header length %llu does not fit the file (%zu bytes): not a checkpoint or truncated", path,
                (unsigned long long)hlen, len);
        goto done;
    }
    json_error_t jerr;
    root = json_loadb(file + 8, (size_t)hlen, 0, &jerr);
    if (!root || !json_is_object(root)) {
        err_set("%s: header is not a JSON object: %s", path, root ? "wrong type" : jerr.text);
        goto done;
    }
    const char *data = file + 8 + hlen;
    size_t data_len = len - 8 - (size_t)hlen;
    staged = xmalloc(sizeof(float) * (m->n_params ? m->n_params : 1));
    spans = xmalloc(sizeof(Span) * (size_t)(m->n_tensors ? m->n_tensors : 1));
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        json_t *e = json_object_get(root, t->name);
        if (!e || !json_is_object(e)) {
            err_set("%s: tensor '%s' is missing", path, t->name);
            goto done;
        }
        const char *dtype = json_string_value(json_object_get(e, "dtype"));
        json_t *shape = json_object_get(e, "shape"), *offs = json_object_get(e, "data_offsets");
        if (!dtype || strcmp(dtype, "F32") != 0) {
            err_set("%s: tensor '%s' has dtype %s, expected F32", path, t->name, dtype ? dtype : "(none)");
            goto done;
        }
        int shape_ok = json_is_array(shape) && (int)json_array_size(shape) == t->ndim;
        for (int d = 0; shape_ok && d < t->ndim; d++)
            shape_ok = json_is_integer(json_array_get(shape, (size_t)d)) &&
                       json_integer_value(json_array_get(shape, (size_t)d)) == t->shape[d];
        if (!shape_ok) {
            err_set("%s: tensor '%s' has the wrong shape for this config (expected [%d%s%.0d])", path, t->name,
                    t->shape[0], t->ndim == 2 ? ", " : "", t->ndim == 2 ? t->shape[1] : 0);
            goto done;
        }
        if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(json_array_get(offs, 0)) ||
            !json_is_integer(json_array_get(offs, 1))) {
            err_set("%s: tensor '%s' has malformed data_offsets", path, t->name);
            goto done;
        }
        json_int_t b = json_integer_value(json_array_get(offs, 0)), en = json_integer_value(json_array_get(offs, 1));
        if (b < 0 || en < b || (size_t)en > data_len || (size_t)(en - b) != 4 * t->size) {
            err_set("%s: tensor '%s' has data offsets [%lld, %lld] outside the data (%zu bytes) or of the wrong size",
                    path, t->name, (long long)b, (long long)en, data_len);
            goto done;
        }
        spans[i] = (Span){(size_t)b, (size_t)en};
        memcpy(staged + t->offset, data + b, 4 * t->size);
    }
    qsort(spans, (size_t)m->n_tensors, sizeof(Span), by_begin);
    for (int i = 1; i < m->n_tensors; i++)
        if (spans[i].begin < spans[i - 1].end) {
            err_set("%s: tensor data regions overlap", path);
            goto done;
        }
    for (size_t i = 0; i < m->n_params; i++)
        if (!(staged[i] == staged[i]) || staged[i] - staged[i] != 0.0f) {
            err_set("%s: weights contain NaN or infinity", path);
            goto done;
        }
    memcpy(m->params, staged, sizeof(float) * m->n_params);
    rc = 0;
done:
    json_decref(root);
    free(staged);
    free(spans);
    free(file);
    return rc;
}
