/* sacrebleu: see sacrebleu.h.
 *
 * Python's string rules are reproduced on UTF-8 bytes where they agree (every pattern of
 * the 13a rules is ASCII, and a non-ASCII code point never matches one), and on code points
 * where they do not: whitespace is what Python's str.split() splits on, and chrF's
 * characters are code points. N-grams are counted exactly, by sorting, never by hash. */
#include "score/sacrebleu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"
#include "util/text.h"

/* ---- text helpers ----------------------------------------------------------------------- */

/* Length of the UTF-8 sequence starting at s (1 for a stray byte). */
static size_t cp_len(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    size_t n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 1;
    return n;
}

static unsigned cp_value(const unsigned char *s, size_t n) {
    if (n == 1) return s[0];
    unsigned v = s[0] & (0xFF >> (n + 1));
    for (size_t i = 1; i < n; i++) v = (v << 6) | (s[i] & 0x3F);
    return v;
}

/* Python's str.isspace(), which str.split() splits on. */
static int is_space_cp(unsigned c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Width of the whitespace code point at s, or 0. */
static size_t space_at(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = cp_len(u);
    return is_space_cp(cp_value(u, n)) ? n : 0;
}

/* Python's s.replace(from, to) over the whole string. */
static char *replace_all(char *s, const char *from, const char *to) {
    if (!strstr(s, from)) return s;
    StrBuf b = {0};
    size_t nf = strlen(from), nt = strlen(to);
    for (const char *p = s, *hit;; p = hit + nf) {
        hit = strstr(p, from);
        if (!hit) {
            sb_append(&b, p, strlen(p));
            break;
        }
        sb_append(&b, p, (size_t)(hit - p));
        sb_append(&b, to, nt);
    }
    free(s);
    return b.buf ? b.buf : xstrdup("");
}

/* ---- 13a tokenization ------------------------------------------------------------------- */

/* Rule 1's class: { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * + : ; < = > ? @ / */
static int is_13a_symbol(unsigned char c) {
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
           (c >= ':' && c <= '@') || c == '/';
}
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_period_comma(unsigned char c) { return c == '.' || c == ','; }

/* One regex rule of two characters, applied as re.sub does: leftmost match first, scanning
 * on after the end of each match. kind 1: digit then '-'; kind 2: non-digit then [.,];
 * kind 3: [.,] then non-digit. */
static char *apply_pair_rule(char *s, int kind) {
    StrBuf b = {0};
    size_t n = strlen(s), i = 0;
    while (i < n) {
        unsigned char x = (unsigned char)s[i], y = i + 1 < n ? (unsigned char)s[i + 1] : 0;
        int hit = i + 1 < n && (kind == 1   ? is_digit(x) && y == '-'
                                : kind == 2 ? !is_digit(x) && is_period_comma(y)
                                            : is_period_comma(x) && !is_digit(y));
        if (!hit) {
            sb_append(&b, s + i, 1);
            i++;
            continue;
        }
        /* kind 1 and 2: "\1 \2 "; kind 3: " \1 \2" */
        if (kind == 3) sb_append(&b, " ", 1);
        sb_append(&b, s + i, 1);
        sb_append(&b, " ", 1);
        sb_append(&b, s + i + 1, 1);
        if (kind != 3) sb_append(&b, " ", 1);
        i += 2;
    }
    free(s);
    return b.buf ? b.buf : xstrdup("");
}

void bleu_tokenize_13a(const char *line, StrBuf *out) {
    char *s = xstrdup(line);
    s = replace_all(s, "<skipped>", "");
    s = replace_all(s, "-\n", "");
    s = replace_all(s, "\n", " ");
    if (strchr(s, '&')) {
        s = replace_all(s, "&quot;", "\"");
        s = replace_all(s, "&amp;", "&");
        s = replace_all(s, "&lt;", "<");
        s = replace_all(s, "&gt;", ">");
    }
    StrBuf b = {0};
    sb_append(&b, " ", 1);
    for (const char *p = s; *p; p++) {
        if (is_13a_symbol((unsigned char)*p)) {
            sb_append(&b, " ", 1), sb_append(&b, p, 1), sb_append(&b, " ", 1);
        } else {
            sb_append(&b, p, 1);
        }
    }
    sb_append(&b, " ", 1);
    free(s);
    s = apply_pair_rule(b.buf, 2);
    s = apply_pair_rule(s, 3);
    s = apply_pair_rule(s, 1);
    /* ' '.join(s.split()) */
    int first = 1;
    for (const char *p = s; *p;) {
        size_t w = space_at(p);
        if (w) {
            p += w;
            continue;
        }
        const char *start = p;
        while (*p && !space_at(p)) p += cp_len((const unsigned char *)p);
        if (!first) sb_append(out, " ", 1);
        sb_append(out, start, (size_t)(p - start));
        first = 0;
    }
    if (!out->buf) sb_append(out, "", 0);
    free(s);
}

/* ---- exact n-gram counting ------------------------------------------------------------ */

/* An n-gram is n consecutive units of a sentence; a unit is a byte range (a token or a
 * code point). Two n-grams are equal when their units are, byte for byte. */
typedef struct {
    const char *start;
    size_t len;
} Unit;
typedef struct {
    const Unit *u;
    int n;
} Gram;

static int unit_cmp(const Unit *a, const Unit *b) {
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->start, b->start, n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static int gram_cmp(const void *pa, const void *pb) {
    const Gram *a = pa, *b = pb;
    for (int i = 0; i < a->n; i++) {
        int c = unit_cmp(&a->u[i], &b->u[i]);
        if (c) return c;
    }
    return 0;
}

/* The sorted n-grams of order n over units[0..count). */
static Gram *sorted_grams(const Unit *units, int count, int n, int *out_n) {
    int k = count - n + 1 > 0 ? count - n + 1 : 0;
    Gram *g = xmalloc(sizeof(Gram) * (size_t)(k ? k : 1));
    for (int i = 0; i < k; i++) g[i] = (Gram){units + i, n};
    qsort(g, (size_t)k, sizeof(Gram), gram_cmp);
    *out_n = k;
    return g;
}

/* Sum over distinct n-grams of min(count in hyp, count in ref), both of order n. */
static long long clipped_matches(const Unit *hyp, int nh, const Unit *ref, int nr, int n) {
    int kh, kr;
    Gram *h = sorted_grams(hyp, nh, n, &kh), *r = sorted_grams(ref, nr, n, &kr);
    long long matches = 0;
    int i = 0, j = 0;
    while (i < kh && j < kr) {
        int c = gram_cmp(&h[i], &r[j]);
        if (c < 0) i++;
        else if (c > 0) j++;
        else {
            int ci = 1, cj = 1;
            while (i + ci < kh && gram_cmp(&h[i], &h[i + ci]) == 0) ci++;
            while (j + cj < kr && gram_cmp(&r[j], &r[j + cj]) == 0) cj++;
            matches += ci < cj ? ci : cj;
            i += ci, j += cj;
        }
    }
    free(h), free(r);
    return matches;
}

/* Space-separated tokens of s as units. */
static Unit *split_tokens(const char *s, int *count) {
    int cap = 16, n = 0;
    Unit *u = xmalloc(sizeof(Unit) * (size_t)cap);
    for (const char *p = s; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        const char *start = p;
        while (*p && *p != ' ') p++;
        if (n == cap) u = xrealloc(u, sizeof(Unit) * (size_t)(cap *= 2));
        u[n++] = (Unit){start, (size_t)(p - start)};
    }
    *count = n;
    return u;
}

/* Code points of s with whitespace removed, as units. */
static Unit *split_chars(const char *s, int *count) {
    size_t len = strlen(s);
    Unit *u = xmalloc(sizeof(Unit) * (len ? len : 1));
    int n = 0;
    for (const char *p = s; *p;) {
        size_t w = cp_len((const unsigned char *)p);
        if (!space_at(p)) u[n++] = (Unit){p, w};
        p += w;
    }
    *count = n;
    return u;
}

/* ---- BLEU ----------------------------------------------------------------------------- */

void bleu_add(BleuStats *s, const char *hyp, const char *ref) {
    StrBuf th = {0}, tr = {0};
    bleu_tokenize_13a(hyp, &th);
    bleu_tokenize_13a(ref, &tr);
    int nh, nr;
    Unit *h = split_tokens(th.buf, &nh), *r = split_tokens(tr.buf, &nr);
    s->sys_len += nh;
    s->ref_len += nr;
    for (int n = 1; n <= BLEU_ORDER; n++) {
        s->totals[n - 1] += nh - n + 1 > 0 ? nh - n + 1 : 0;
        s->counts[n - 1] += clipped_matches(h, nh, r, nr, n);
    }
    free(h), free(r);
    sb_free(&th), sb_free(&tr);
}

Bleu bleu_compute(const BleuStats *s, int effective_order) {
    Bleu b = {0};
    if (s->sys_len < s->ref_len) b.bp = s->sys_len > 0 ? exp(1.0 - (double)s->ref_len / (double)s->sys_len) : 0.0;
    else b.bp = 1.0;
    /* sacrebleu: an order with no hypothesis n-grams ends the loop; with effective order
     * the mean runs over the orders before it, otherwise its zero precision zeroes BLEU */
    int order = BLEU_ORDER;
    double smooth = 1.0;
    for (int n = 1; n <= BLEU_ORDER; n++) {
        if (s->totals[n - 1] == 0) break;
        if (effective_order) order = n;
        if (s->counts[n - 1] == 0) {
            smooth *= 2.0;
            b.precisions[n - 1] = 100.0 / (smooth * (double)s->totals[n - 1]);
        } else {
            b.precisions[n - 1] = 100.0 * (double)s->counts[n - 1] / (double)s->totals[n - 1];
        }
    }
    double log_sum = 0.0;
    for (int n = 0; n < order; n++) log_sum += b.precisions[n] > 0.0 ? log(b.precisions[n]) : -9999999999.0;
    b.score = b.bp * exp(log_sum / order);
    return b;
}

/* ---- chrF ----------------------------------------------------------------------------- */

void chrf_add(ChrfStats *s, const char *hyp, const char *ref) {
    int nh, nr;
    Unit *h = split_chars(hyp, &nh), *r = split_chars(ref, &nr);
    for (int n = 1; n <= CHRF_ORDER; n++) {
        s->hyp[n - 1] += nh - n + 1 > 0 ? nh - n + 1 : 0;
        s->ref[n - 1] += nr - n + 1 > 0 ? nr - n + 1 : 0;
        s->match[n - 1] += clipped_matches(h, nh, r, nr, n);
    }
    free(h), free(r);
}

double chrf_compute(const ChrfStats *s) {
    double beta2 = CHRF_BETA * CHRF_BETA, prec = 0.0, rec = 0.0;
    int orders = 0;
    for (int n = 0; n < CHRF_ORDER; n++) {
        if (s->hyp[n] == 0 || s->ref[n] == 0) continue;
        prec += (double)s->match[n] / (double)s->hyp[n];
        rec += (double)s->match[n] / (double)s->ref[n];
        orders++;
    }
    if (orders == 0) return 0.0;
    prec /= orders, rec /= orders;
    if (prec + rec == 0.0) return 0.0;
    return 100.0 * (1.0 + beta2) * prec * rec / (beta2 * prec + rec);
}
