/* headmask: see headmask.h. */
#include "decode/headmask.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/file.h"
#include "util/mem.h"

/* In AttnKind order: the canonical name, the maps.json name, what a message calls it. */
static const struct {
    const char *name, *long_name, *what;
} kinds[ATTN_KINDS] = {
    {"enc", "encoder_self", "encoder self-attention"},
    {"dec", "decoder_self", "decoder self-attention"},
    {"cross", "cross", "cross-attention"},
};

/* Between items: a comma and/or whitespace. */
static int separator(char c) { return c == ',' || c == ' ' || (c >= '\t' && c <= '\r'); }

/* What the items are read into, and where they come from, for the messages. */
typedef struct {
    const Model *m;
    float *gates;
    const char *file; /* NULL: the SPEC itself */
    int line;         /* with file: 1-based */
} Reader;

static int layers_of(const Model *m, int kind) {
    return kind == ATTN_ENC_SELF ? m->cfg.encoder_layers : m->cfg.decoder_layers;
}

/* s[0..n) as a message shows it (malloc'd): every byte outside printable ASCII as \xNN
 * (no good item has one: a look-alike letter shows for what it is), cut after
 * HEAD_MASK_ITEM_MAX bytes with "...". */
static char *escaped(const char *s, size_t n) {
    StrBuf sb = {0};
    for (size_t i = 0; i < n && i < HEAD_MASK_ITEM_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) sb_append(&sb, &s[i], 1);
        else sb_printf(&sb, "\\x%02x", c);
    }
    if (n > HEAD_MASK_ITEM_MAX) sb_append(&sb, "...", 3);
    return sb.buf ? sb.buf : xstrdup("");
}

/* "--mask-heads: [FILE:LINE: ]'ITEM': WHY" as the error, WHY from fmt. */
static int item_error(const Reader *r, const char *item, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int item_error(const Reader *r, const char *item, size_t n, const char *fmt, ...) {
    char where[300] = "", why[256], *shown = escaped(item, n);
    if (r->file) snprintf(where, sizeof where, "%s:%d: ", r->file, r->line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    err_set("--mask-heads: %s'%s': %s", where, shown, why);
    free(shown);
    return -1;
}

/* The same, WHY naming part[0..part_n) of the item with its one %s. */
static int part_error(const Reader *r, const char *item, size_t n, const char *fmt, const char *part, size_t part_n) {
    char *shown = escaped(part, part_n);
    item_error(r, item, n, fmt, shown);
    free(shown);
    return -1;
}

/* A LAYER or HEAD field s[0..n): 1 for '*'; 0 with *v its value (numbers past 9 digits
 * read as 999999999, which no model has); -1 when it is neither. */
static int read_field(const char *s, size_t n, int *v) {
    if (n == 1 && s[0] == '*') return 1;
    if (n == 0) return -1;
    long x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        if (x < 100000000L) x = x * 10 + (s[i] - '0');
        else x = 999999999L;
    }
    *v = (int)x;
    return 0;
}

/* One item s[0..n): sets its heads' gates to 0; -1 with the error set. */
static int read_item(Reader *r, const char *s, size_t n) {
    const Model *m = r->m;
    if (s[0] == '@') return item_error(r, s, n, "@FILE is a whole SPEC, not one item among others");
    const char *dot1 = memchr(s, '.', n), *dot2 = dot1 ? memchr(dot1 + 1, '.', (size_t)(s + n - dot1 - 1)) : NULL;
    if (n > HEAD_MASK_ITEM_MAX || !dot2 || memchr(dot2 + 1, '.', (size_t)(s + n - dot2 - 1)))
        return item_error(r, s, n, "not KIND.LAYER.HEAD (such as cross.2.5; * for every layer or head)");
    size_t kn = (size_t)(dot1 - s);
    int kind = -1;
    for (int k = 0; k < ATTN_KINDS && kind < 0; k++)
        if ((strlen(kinds[k].name) == kn && memcmp(s, kinds[k].name, kn) == 0) ||
            (strlen(kinds[k].long_name) == kn && memcmp(s, kinds[k].long_name, kn) == 0))
            kind = k;
    if (kind < 0)
        return part_error(r, s, n, "unknown kind '%s': enc, dec or cross (or encoder_self, decoder_self)", s, kn);
    const char *ls = dot1 + 1, *hs = dot2 + 1;
    size_t ln = (size_t)(dot2 - ls), hn = (size_t)(s + n - hs);
    int layer = 0, head = 0, all_layers = read_field(ls, ln, &layer), all_heads = read_field(hs, hn, &head);
    if (all_layers < 0) return part_error(r, s, n, "the layer '%s' is neither a number nor *", ls, ln);
    if (all_heads < 0) return part_error(r, s, n, "the head '%s' is neither a number nor *", hs, hn);
    int layers = layers_of(m, kind), heads = m->cfg.heads;
    if (layers == 0) return item_error(r, s, n, "this model has no %s", kinds[kind].what);
    if (!all_layers && layer >= layers)
        return item_error(r, s, n, "this model's %s has layers 0..%d", kinds[kind].what, layers - 1);
    if (!all_heads && head >= heads)
        return item_error(r, s, n, "this model's %s has heads 0..%d", kinds[kind].what, heads - 1);
    for (int l = all_layers ? 0 : layer; l <= (all_layers ? layers - 1 : layer); l++)
        for (int h = all_heads ? 0 : head; h <= (all_heads ? heads - 1 : head); h++)
            r->gates[model_head_index(m, (AttnKind)kind, l, h)] = 0.0f;
    return 0;
}

/* The items of text[0..n), separated by commas and/or whitespace. */
static int read_items(Reader *r, const char *text, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (separator(text[i])) {
            i++;
            continue;
        }
        size_t start = i;
        while (i < n && !separator(text[i])) i++;
        if (read_item(r, text + start, i - start) != 0) return -1;
    }
    return 0;
}

/* The items of the file at path, one a line, '#' starting a comment. */
static int read_items_file(Reader *r, const char *path) {
    if (!path[0]) return err_set("--mask-heads: '@': no file name after the @");
    size_t len;
    char *text = read_file_max(path, HEAD_MASK_FILE_MAX, &len);
    if (!text) {
        int status = err_status(); /* an I/O fault stays one (exit 1) */
        err_set("--mask-heads: %s", err_msg());
        if (status == 1) err_io(EIO);
        return -1;
    }
    int rc = 0;
    if (memchr(text, '\0', len)) rc = err_set("--mask-heads: %s: contains NUL bytes: not a list of heads", path);
    r->file = path;
    for (size_t at = 0, end; rc == 0 && at < len; at = end + 1) {
        const char *nl = memchr(text + at, '\n', len - at), *hash;
        end = nl ? (size_t)(nl - text) : len;
        r->line++;
        if (end - at > HEAD_MASK_LINE_MAX)
            rc = err_set("--mask-heads: %s:%d: a line of more than %d bytes", path, r->line, HEAD_MASK_LINE_MAX);
        else if ((hash = memchr(text + at, '#', end - at))) rc = read_items(r, text + at, (size_t)(hash - text) - at);
        else rc = read_items(r, text + at, end - at);
    }
    free(text);
    return rc;
}

static int parse(const Model *m, const char *spec, float *gates, int files) {
    int n = model_head_count(m);
    for (int i = 0; i < n; i++) gates[i] = 1.0f;
    Reader r = {.m = m, .gates = gates};
    int rc = files && spec[0] == '@' ? read_items_file(&r, spec + 1) : read_items(&r, spec, strlen(spec));
    if (rc != 0) return -1;
    int masked = 0;
    for (int i = 0; i < n; i++) masked += gates[i] == 0.0f;
    return masked;
}

int head_mask_parse(const Model *m, const char *spec, float *gates) { return parse(m, spec, gates, 1); }
int head_mask_parse_items(const Model *m, const char *spec, float *gates) { return parse(m, spec, gates, 0); }

int head_mask_format(const Model *m, const float *gates, StrBuf *out) {
    int count = 0;
    for (int k = 0; k < ATTN_KINDS; k++)
        for (int l = 0; l < layers_of(m, k); l++)
            for (int h = 0; h < m->cfg.heads; h++)
                if (gates[model_head_index(m, (AttnKind)k, l, h)] == 0.0f) {
                    sb_printf(out, "%s.%d.%d\n", kinds[k].name, l, h);
                    count++;
                }
    return count;
}
