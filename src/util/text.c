/* text: see text.h. */
#include "util/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

void sb_append(StrBuf *sb, const char *s, size_t n) {
    if (sb->len + n + 1 > sb->cap) {
        sb->cap = (sb->len + n + 1) * 2;
        sb->buf = xrealloc(sb->buf, sb->cap);
    }
    memcpy(sb->buf + sb->len, s, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
}

void sb_append_xml(StrBuf *sb, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': sb_append(sb, "&lt;", 4); break;
        case '>': sb_append(sb, "&gt;", 4); break;
        case '&': sb_append(sb, "&amp;", 5); break;
        case '"': sb_append(sb, "&quot;", 6); break;
        default:
            if ((unsigned char)*s >= 0x20) sb_append(sb, s, 1);
        }
    }
}

int text_px(const char *s, int font) {
    int chars = 0;
    for (; *s; s++) chars += ((unsigned char)*s & 0xc0) != 0x80; /* continuation bytes are not characters */
    return (chars * font * 6 + 9) / 10;
}

void sb_printf(StrBuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (sb->len + (size_t)n + 1 > sb->cap) {
        sb->cap = (sb->len + (size_t)n + 1) * 2;
        sb->buf = xrealloc(sb->buf, sb->cap);
    }
    va_start(ap, fmt);
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void sb_free(StrBuf *sb) {
    free(sb->buf);
    sb->buf = NULL;
    sb->len = sb->cap = 0;
}

char *hex_encode(const void *data, size_t n) {
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = data;
    char *s = xmalloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) s[2 * i] = digits[b[i] >> 4], s[2 * i + 1] = digits[b[i] & 15];
    s[2 * n] = '\0';
    return s;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

int hex_decode(const char *hex, char **out, size_t *n) {
    size_t len = strlen(hex);
    if (len % 2) return -1;
    char *b = xmalloc(len / 2 + 1);
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return free(b), -1;
        b[i] = (char)(hi << 4 | lo);
    }
    *out = b, *n = len / 2;
    return 0;
}

int spell_control(char out[8], unsigned char ch) {
    if (ch == '\t' || ch == '\n') return snprintf(out, 8, "%s", ch == '\t' ? "\\t" : "\\n");
    return snprintf(out, 8, "\\x%02x", ch);
}

void fput_spelled(FILE *f, const char *s, size_t n) {
    char spelled[8];
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != 0x7f) fputc(ch, f);
        else spell_control(spelled, ch), fputs(spelled, f);
    }
}

int utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned cp, min;
        if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
        else return 0;
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += len;
    }
    return 1;
}

void sb_append_base64(StrBuf *sb, const void *data, size_t n) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i += 3) {
        unsigned long v = (unsigned long)b[i] << 16 | (i + 1 < n ? (unsigned long)b[i + 1] << 8 : 0) |
                          (i + 2 < n ? b[i + 2] : 0);
        char four[4] = {digits[v >> 18], digits[v >> 12 & 63], i + 1 < n ? digits[v >> 6 & 63] : '=',
                        i + 2 < n ? digits[v & 63] : '='};
        sb_append(sb, four, 4);
    }
}

size_t utf8_char(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0], cp, min;
    size_t len;
    if (c == 0) return 0;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    for (size_t k = 1; k < len; k++) { /* a NUL is no continuation byte: a cut-off sequence stops here */
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF) return 0;
    return len;
}
