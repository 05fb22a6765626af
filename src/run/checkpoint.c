/* checkpoint: see checkpoint.h. The JSON header is written and read with jansson. */
#define _GNU_SOURCE /* memmem, pread */
#include "run/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/checksum.h"
#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints store little-endian float32; add byte swapping for this machine"
#endif

#define HEADER_MAX 100000000u /* the safetensors limit: a header past 100 MB is no checkpoint */
#define HC_KEY "\"header_checksum\":\""

/* ---- writing ------------------------------------------------------------------------- */

static void meta_set(json_t *md, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void meta_set(json_t *md, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap); /* sized first: a value is never cut short */
    va_end(ap);
    char *buf = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
    json_object_set_new(md, key, json_string(buf));
    free(buf);
}

static void add_tensor(json_t *root, const char *name, const TensorInfo *t, size_t *offset) {
    json_t *shape = json_array();
    for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
    json_object_set_new(root, name,
                        json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32", "shape", shape, "data_offsets",
                                  (json_int_t)*offset, (json_int_t)(*offset + 4 * t->size)));
    *offset += 4 * t->size;
}

/* The file is written from the model's and the optimizer's own buffers: each group is
 * one contiguous buffer whose tensors lie in table order, as the file lays them out, so
 * saving copies no parameters (a copy would be the size of the checkpoint, at the peak of
 * training's memory). */
int ckpt_save(const char *path, const Model *m, const Adam *adam, const CkptMeta *meta) {
    int groups = adam ? 3 : 1;
    const float *bufs[3] = {m->params, adam ? adam->m : NULL, adam ? adam->v : NULL};
    const char *prefix[3] = {"", "optim.m.", "optim.v."};
    size_t group_len = 4 * m->n_params, data_len = group_len * (size_t)groups;
    json_t *root = json_object(), *md = json_object();
    json_object_set_new(root, "__metadata__", md);
    size_t offset = 0;
    Checksum sum;
    checksum_start(&sum, data_len);
    for (int g = 0; g < groups; g++) {
        for (int i = 0; i < m->n_tensors; i++) {
            const TensorInfo *t = &m->tensors[i];
            char name[128];
            snprintf(name, sizeof name, "%s%s", prefix[g], t->name);
            add_tensor(root, name, t, &offset);
        }
        checksum_add(&sum, bufs[g], group_len);
    }
    meta_set(md, "format", "%s", CKPT_FORMAT);
    meta_set(md, "step", "%" PRId64, meta->step);
    meta_set(md, "epoch", "%" PRId64, meta->epoch);
    meta_set(md, "batch_pos", "%d", meta->batch_pos);
    meta_set(md, "seed", "%" PRId64, meta->seed);
    meta_set(md, "rng", "counter-based: dropout = hash(seed, step, site, index); batch order = hash(seed, epoch)");
    meta_set(md, "threads", "%d", meta->threads);
    meta_set(md, "valid_loss", "%.17g", meta->valid_loss);
    meta_set(md, "best_valid_loss", "%.17g", meta->best_valid_loss);
    meta_set(md, "valid_bleu", "%.17g", meta->valid_bleu);
    meta_set(md, "best_valid_bleu", "%.17g", meta->best_valid_bleu);
    meta_set(md, "elapsed_s", "%.17g", meta->elapsed_s);
    if (meta->cooldown_from > 0) meta_set(md, "cooldown_from", "%" PRId64, meta->cooldown_from);
    meta_set(md, "vocab_hash", "%016" PRIx64, meta->vocab_hash);
    meta_set(md, "data_hash", "%016" PRIx64, meta->data_hash);
    meta_set(md, "optimizer", "%s", adam ? "adam" : "none");
    if (adam) meta_set(md, "adam_t", "%" PRId64, adam->t);
    json_object_set_new(md, "config", json_string(meta->config ? meta->config : ""));
    if (meta->src_vocab) json_object_set_new(md, "src_vocab", json_string(meta->src_vocab));
    if (meta->tgt_vocab) json_object_set_new(md, "tgt_vocab", json_string(meta->tgt_vocab));
    meta_set(md, "checksum", "%016" PRIx64, checksum_end(&sum));
    meta_set(md, "header_checksum", "%016d", 0);
    char *header = xcheck(json_dumps(root, JSON_COMPACT));
    json_decref(root);
    size_t hlen = strlen(header), padded = (hlen + 7) & ~(size_t)7; /* data starts 8-byte aligned */
    unsigned char *buf = xmalloc(8 + padded);
    uint64_t n = padded;
    memcpy(buf, &n, 8);
    memcpy(buf + 8, header, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    free(header);
    /* the header checksum covers the whole padded header with its own digits zeroed */
    char *hc = strstr((char *)buf + 8, HC_KEY) + strlen(HC_KEY);
    char digits[17];
    snprintf(digits, sizeof digits, "%016" PRIx64, checksum64(buf + 8, padded));
    memcpy(hc, digits, 16);
    FilePart parts[4] = {{buf, 8 + padded}};
    for (int g = 0; g < groups; g++) parts[1 + g] = (FilePart){bufs[g], group_len};
    int rc = write_file_atomic_parts(path, parts, 1 + groups);
    free(buf);
    return rc;
}

/* ---- reading ------------------------------------------------------------------------- */

static int fault(CkptFile *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fault(CkptFile *f, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set("%s: %s", f->path, msg);
}

static const char *meta_str(json_t *md, const char *key) { return json_string_value(json_object_get(md, key)); }

static int meta_int(CkptFile *f, json_t *md, const char *key, int64_t *out) {
    const char *s = meta_str(md, key);
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < 0) return fault(f, "metadata '%s' is missing or not a count", key);
    *out = v;
    return 0;
}

static int meta_hex(CkptFile *f, json_t *md, const char *key, uint64_t *out) {
    const char *s = meta_str(md, key);
    char *end;
    if (!s || strlen(s) != 16) return fault(f, "metadata '%s' is missing or malformed", key);
    errno = 0;
    *out = strtoull(s, &end, 16);
    if (*end || errno) return fault(f, "metadata '%s' is malformed", key);
    return 0;
}

static int meta_float(CkptFile *f, json_t *md, const char *key, double *out) {
    const char *s = meta_str(md, key);
    char *end;
    if (!s) return fault(f, "metadata '%s' is missing", key);
    *out = strtod(s, &end);
    if (!*s || *end) return fault(f, "metadata '%s' is malformed", key);
    return 0;
}

/* A key older checkpoints lack: missing gives dflt, present must parse. */
static int meta_float_opt(CkptFile *f, json_t *md, const char *key, double dflt, double *out) {
    if (!json_object_get(md, key)) {
        *out = dflt;
        return 0;
    }
    return meta_float(f, md, key, out);
}

static int by_begin(const void *a, const void *b) {
    const CkptTensor *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int parse_tensor(CkptFile *f, const char *name, json_t *e, CkptTensor *t) {
    memset(t, 0, sizeof *t);
    if (strlen(name) >= sizeof t->name) return fault(f, "tensor name '%.40s...' is too long", name);
    snprintf(t->name, sizeof t->name, "%s", name);
    const char *dtype = json_string_value(json_object_get(e, "dtype"));
    json_t *shape = json_object_get(e, "shape"), *offs = json_object_get(e, "data_offsets");
    if (!json_is_object(e) || !dtype || strcmp(dtype, "F32") != 0)
        return fault(f, "tensor '%s' has dtype %s, expected F32", name, dtype ? dtype : "(none)");
    if (!json_is_array(shape) || json_array_size(shape) > 4) return fault(f, "tensor '%s' has a malformed shape", name);
    t->ndim = (int)json_array_size(shape);
    uint64_t count = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_t *v = json_array_get(shape, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1ll << 40))
            return fault(f, "tensor '%s' has a malformed shape", name);
        t->shape[d] = json_integer_value(v);
        /* checked before multiplying: a product of large dimensions must not wrap */
        if (t->shape[d] && count > (1ull << 40) / (uint64_t)t->shape[d])
            return fault(f, "tensor '%s' is impossibly large", name);
        count *= (uint64_t)t->shape[d];
    }
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(json_array_get(offs, 0)) ||
        !json_is_integer(json_array_get(offs, 1)))
        return fault(f, "tensor '%s' has malformed data_offsets", name);
    json_int_t b = json_integer_value(json_array_get(offs, 0)), e2 = json_integer_value(json_array_get(offs, 1));
    if (b < 0 || e2 < b || (uint64_t)e2 > f->data_len)
        return fault(f, "tensor '%s' has data offsets [%lld, %lld] outside the data section (%zu bytes)", name,
                     (long long)b, (long long)e2, f->data_len);
    if ((uint64_t)(e2 - b) != 4 * count)
        return fault(f, "tensor '%s' spans %lld bytes but its shape needs %llu", name, (long long)(e2 - b),
                     (unsigned long long)(4 * count));
    t->begin = (size_t)b, t->end = (size_t)e2;
    return 0;
}

static int parse_meta(CkptFile *f, json_t *md) {
    CkptMeta *m = &f->meta;
    const char *format = meta_str(md, "format");
    if (!format || strcmp(format, CKPT_FORMAT) != 0)
        return fault(f, "format '%s' is not %s", format ? format : "(none)", CKPT_FORMAT);
    int64_t v = 0;
    if (meta_int(f, md, "step", &m->step) || meta_int(f, md, "epoch", &m->epoch) || meta_int(f, md, "seed", &m->seed))
        return -1;
    /* the step and epoch counters go on from here: room to count, never to overflow */
    if (m->step > INT_MAX) return fault(f, "metadata 'step' is out of range");
    if (m->epoch > INT_MAX) return fault(f, "metadata 'epoch' is out of range");
    if (meta_int(f, md, "batch_pos", &v)) return -1;
    if (v > INT_MAX) return fault(f, "metadata 'batch_pos' is out of range");
    m->batch_pos = (int)v;
    if (meta_int(f, md, "threads", &v)) return -1;
    if (v > INT_MAX) return fault(f, "metadata 'threads' is out of range");
    m->threads = (int)v;
    if (meta_float(f, md, "valid_loss", &m->valid_loss) || meta_float(f, md, "best_valid_loss", &m->best_valid_loss))
        return -1;
    if (meta_float_opt(f, md, "valid_bleu", NAN, &m->valid_bleu) ||
        meta_float_opt(f, md, "best_valid_bleu", NAN, &m->best_valid_bleu) ||
        meta_float_opt(f, md, "elapsed_s", 0.0, &m->elapsed_s))
        return -1;
    /* written once the clock has begun a cooldown: a step the run has passed */
    m->cooldown_from = 0;
    if (json_object_get(md, "cooldown_from") && meta_int(f, md, "cooldown_from", &m->cooldown_from)) return -1;
    if (m->cooldown_from > m->step) return fault(f, "metadata 'cooldown_from' is past its step");
    if (meta_hex(f, md, "vocab_hash", &m->vocab_hash) || meta_hex(f, md, "data_hash", &m->data_hash)) return -1;
    const char *config = meta_str(md, "config");
    if (!config) return fault(f, "metadata 'config' is missing");
    m->config = xstrdup(config);
    const char *sv = meta_str(md, "src_vocab"), *tv = meta_str(md, "tgt_vocab");
    if (!sv != !tv) return fault(f, "metadata has one side's vocabulary only");
    m->src_vocab = sv ? xstrdup(sv) : NULL;
    m->tgt_vocab = tv ? xstrdup(tv) : NULL;
    const char *opt = meta_str(md, "optimizer");
    f->has_optim = opt && strcmp(opt, "adam") == 0;
    return 0;
}

int ckpt_open(CkptFile *f, const char *path) {
    memset(f, 0, sizeof *f);
    /* opened once, and read from that descriptor: a rename or rotation of the name
     * meanwhile cannot swap the file under the check of its header length */
    size_t size;
    int fd = open_regular(path, READ_FILE_ANY, &size);
    if (fd < 0) return -1;
    /* the header's length first: a file that claims a header past the limit, or past its
     * own end, is refused before the rest of it is read */
    uint64_t hlen;
    ssize_t got;
    while ((got = pread(fd, &hlen, 8, 0)) < 0 && errno == EINTR) {}
    if (got < 0) {
        int e = errno;
        close(fd);
        return err_set("%s: %s", path, strerror(e)), err_io(e);
    }
    if (got == 8 && (hlen > HEADER_MAX || hlen > size - 8)) {
        close(fd);
        return err_set("%s: header length %llu does not fit the file (%zu bytes, headers up to %u): "
                       "not a checkpoint, or truncated",
                       path, (unsigned long long)hlen, size, HEADER_MAX);
    }
    size_t len;
    char *bytes = read_fd_max(fd, path, READ_FILE_ANY, &len);
    close(fd);
    if (!bytes) return -1;
    return ckpt_parse(f, path, bytes, len);
}

/* The header of f: its length against file_len (the whole file's, of which f->bytes
 * may hold only the length and the header), its checksum, its JSON, the metadata into
 * f->meta. *root gets the parsed header (the caller's) even on failure. */
static int parse_header(CkptFile *f, size_t file_len, json_t **root) {
    *root = NULL;
    if (file_len < 8) return fault(f, "too short to be a checkpoint (%zu bytes)", file_len);
    uint64_t hlen;
    memcpy(&hlen, f->bytes, 8);
    if (hlen < 2 || hlen > HEADER_MAX || hlen > file_len - 8 || hlen > f->len - 8)
        return fault(f,
                     "header length %llu does not fit the file (%zu bytes, headers up to %u): not a checkpoint, or "
                     "truncated",
                     (unsigned long long)hlen, file_len, HEADER_MAX);
    char *header = f->bytes + 8;
    if (header[0] != '{') return fault(f, "no JSON header: not a checkpoint");
    /* the header checksum first: any flipped header byte is caught here */
    char *hc = memmem(header, (size_t)hlen, HC_KEY, strlen(HC_KEY));
    if (!hc || hc + strlen(HC_KEY) + 16 > header + hlen)
        return fault(f, "header has no header_checksum: not a qkv checkpoint, or damaged");
    hc += strlen(HC_KEY);
    char stored[17], saved[16];
    memcpy(stored, hc, 16);
    stored[16] = '\0';
    memcpy(saved, hc, 16);
    memset(hc, '0', 16);
    uint64_t want = checksum64(header, (size_t)hlen);
    memcpy(hc, saved, 16);
    char *end;
    errno = 0;
    uint64_t got = strtoull(stored, &end, 16);
    if (*end || errno || got != want) return fault(f, "header checksum mismatch: the header is damaged");
    json_error_t jerr;
    *root = json_loadb(header, (size_t)hlen, 0, &jerr);
    if (!*root || !json_is_object(*root))
        return fault(f, "header is not a JSON object: %s", *root ? "wrong type" : jerr.text);
    f->data = header + hlen;
    f->data_len = file_len - 8 - (size_t)hlen;
    json_t *md = json_object_get(*root, "__metadata__");
    if (!json_is_object(md)) return fault(f, "header has no __metadata__");
    return parse_meta(f, md);
}

int ckpt_peek(const char *path, CkptMeta *meta) {
    CkptFile f = {0};
    snprintf(f.path, sizeof f.path, "%s", path);
    size_t size;
    int fd = open_regular(path, READ_FILE_ANY, &size);
    if (fd < 0) return -1;
    uint64_t hlen = 0;
    size_t want = 8, have = 0;
    int rc = 0;
    /* the length, then the header it gives (bounded by the file and the limit) */
    for (int part = 0; part < 2 && rc == 0; part++) {
        if (part == 1) {
            memcpy(&hlen, f.bytes, 8);
            want = size >= 8 && hlen <= HEADER_MAX && hlen <= size - 8 ? 8 + (size_t)hlen : 8;
        }
        f.bytes = xrealloc(f.bytes, want);
        while (have < want) {
            ssize_t got = pread(fd, f.bytes + have, want - have, (off_t)have);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) {
                int e = errno;
                rc = (err_set("%s: %s", path, strerror(e)), err_io(e));
            }
            if (got <= 0) break;
            have += (size_t)got;
        }
        f.len = have;
        if (rc == 0 && have < 8) rc = fault(&f, "too short to be a checkpoint (%zu bytes)", have);
    }
    close(fd);
    json_t *root = NULL;
    if (rc == 0) rc = parse_header(&f, size, &root);
    json_decref(root);
    if (rc == 0) *meta = ckpt_meta_take(&f);
    ckpt_close(&f);
    return rc;
}

int ckpt_parse(CkptFile *f, const char *path, char *bytes, size_t len) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->bytes = bytes;
    f->len = len;
    json_t *root = NULL;
    int rc = -1;
    if (parse_header(f, len, &root) != 0) goto done;
    json_t *md = json_object_get(root, "__metadata__");
    f->tensors = xmalloc(sizeof(CkptTensor) * (json_object_size(root) + 1));
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (strcmp(key, "__metadata__") == 0) continue;
        if (parse_tensor(f, key, value, &f->tensors[f->n_tensors]) != 0) goto done;
        f->n_tensors++;
    }
    /* the tensors must tile the data section exactly: no overlap, no gap, no tail */
    CkptTensor *sorted = xmalloc(sizeof(CkptTensor) * (size_t)(f->n_tensors + 1));
    memcpy(sorted, f->tensors, sizeof(CkptTensor) * (size_t)f->n_tensors);
    qsort(sorted, (size_t)f->n_tensors, sizeof(CkptTensor), by_begin);
    size_t at = 0;
    for (int i = 0; i < f->n_tensors && rc != -2; i++) {
        if (sorted[i].begin < at)
            rc = -2, fault(f, "tensors '%s' and '%s' overlap", sorted[i - 1].name, sorted[i].name);
        else if (sorted[i].begin > at) rc = -2, fault(f, "gap in the data section before tensor '%s'", sorted[i].name);
        at = sorted[i].end;
    }
    free(sorted);
    if (rc == -2) {
        rc = -1;
        goto done;
    }
    if (at != f->data_len) {
        fault(f, "data section is %zu bytes but the tensors cover %zu: truncated or extended", f->data_len, at);
        goto done;
    }
    uint64_t sum;
    if (meta_hex(f, md, "checksum", &sum) != 0) goto done;
    if (checksum64(f->data, f->data_len) != sum) {
        fault(f, "data checksum mismatch: the tensor data is damaged");
        goto done;
    }
    rc = 0;
done:
    json_decref(root);
    if (rc != 0) ckpt_close(f);
    return rc;
}

void ckpt_close(CkptFile *f) {
    if (!f) return;
    free(f->bytes);
    free(f->tensors);
    ckpt_meta_free(&f->meta);
    memset(f, 0, sizeof *f);
}

CkptMeta ckpt_meta_take(CkptFile *f) {
    CkptMeta m = f->meta;
    f->meta.config = f->meta.src_vocab = f->meta.tgt_vocab = NULL;
    return m;
}

void ckpt_meta_free(CkptMeta *meta) {
    if (!meta) return;
    free(meta->config), free(meta->src_vocab), free(meta->tgt_vocab);
    meta->config = meta->src_vocab = meta->tgt_vocab = NULL;
}

/* "[2, 3, 4]" into buf: every dimension, however many */
static const char *shape_text(char *buf, size_t n, const int64_t *shape, int ndim) {
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (at < n) snprintf(buf + at, n - at, "]");
    return buf;
}

static const CkptTensor *find(const CkptFile *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

int ckpt_read(const CkptFile *f, Model *m, Adam *adam) {
    CkptFile *cf = (CkptFile *)f; /* for fault(): only its path is read */
    if (adam && !f->has_optim) return fault(cf, "holds weights only, no optimizer state to resume from");
    int groups = f->has_optim ? 3 : 1;
    const char *prefix[3] = {"", "optim.m.", "optim.v."};
    if (f->n_tensors != groups * m->n_tensors)
        return fault(cf, "holds %d tensors, this model has %d%s: a checkpoint of another config", f->n_tensors,
                     groups * m->n_tensors, groups == 3 ? " (x3 with Adam's moments)" : "");
    float *staged = xmalloc(sizeof(float) * (m->n_params ? m->n_params : 1) * (size_t)groups);
    int rc = 0;
    for (int g = 0; g < groups && rc == 0; g++) {
        for (int i = 0; i < m->n_tensors && rc == 0; i++) {
            const TensorInfo *t = &m->tensors[i];
            char name[128];
            snprintf(name, sizeof name, "%s%s", prefix[g], t->name);
            const CkptTensor *c = find(f, name);
            if (!c) {
                rc = fault(cf, "tensor '%s' is missing: a checkpoint of another config", name);
                break;
            }
            int same = c->ndim == t->ndim;
            for (int d = 0; same && d < t->ndim; d++) same = c->shape[d] == t->shape[d];
            if (!same) {
                int64_t want[4] = {0};
                for (int d = 0; d < t->ndim; d++) want[d] = t->shape[d];
                char has[96], needs[96];
                rc = fault(cf, "tensor '%s' has shape %s, this config needs %s", name,
                           shape_text(has, sizeof has, c->shape, c->ndim),
                           shape_text(needs, sizeof needs, want, t->ndim));
                break;
            }
            float *dst = staged + (size_t)g * m->n_params + t->offset;
            memcpy(dst, f->data + c->begin, 4 * t->size);
            for (size_t k = 0; k < t->size && rc == 0; k++)
                if (!isfinite(dst[k])) rc = fault(cf, "tensor '%s' holds NaN or infinity", name);
                /* a second moment is a running mean of squares: a negative one would make
                 * Adam's sqrt(v) NaN at the first step after the resume */
                else if (g == 2 && dst[k] < 0)
                    rc = fault(cf, "tensor '%s' holds %g at [%zu]: Adam's second moments are never negative", name,
                               (double)dst[k], k);
        }
    }
    if (rc == 0) {
        memcpy(m->params, staged, sizeof(float) * m->n_params);
        if (adam) {
            memcpy(adam->m, staged + m->n_params, sizeof(float) * m->n_params);
            memcpy(adam->v, staged + 2 * m->n_params, sizeof(float) * m->n_params);
            adam->t = f->meta.step;
        }
    }
    free(staged);
    return rc;
}

int ckpt_load(const char *path, Model *m, Adam *adam, CkptMeta *meta) {
    CkptFile f;
    if (ckpt_open(&f, path) != 0) return -1;
    int rc = ckpt_read(&f, m, adam);
    if (rc == 0 && meta) {
        *meta = ckpt_meta_take(&f);
    }
    ckpt_close(&f);
    return rc;
}
