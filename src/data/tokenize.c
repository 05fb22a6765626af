/* tokenize: see tokenize.h. */
#include "data/tokenize.h"

#include <string.h>

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static size_t utf8_len(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c >> 5) == 6) return 2;
    if ((c >> 4) == 14) return 3;
    if ((c >> 3) == 30) return 4;
    return 1;
}

int tokenize_line(int kind, const char *line, TokenFn fn, void *ctx) {
    int count = 0;
    const char *p = line;
    while (*p && is_blank(*p)) p++;
    if (kind == TOKENIZER_CHAR) {
        while (*p) {
            if (is_blank(*p)) {
                while (*p && is_blank(*p)) p++;
                if (!*p) break; /* trailing blanks are dropped */
                fn(TOKENIZE_SPACE, 3, ctx), count++;
                continue;
            }
            size_t n = utf8_len((unsigned char)*p);
            size_t have = strnlen(p, n);
            fn(p, have, ctx), count++;
            p += have;
        }
        return count;
    }
    while (*p) {
        const char *start = p;
        while (*p && !is_blank(*p)) p++;
        fn(start, (size_t)(p - start), ctx), count++;
        while (*p && is_blank(*p)) p++;
    }
    return count;
}

void detokenize_append(StrBuf *out, int kind, const char *tok, int first) {
    if (kind == TOKENIZER_CHAR && strcmp(tok, TOKENIZE_SPACE) == 0) tok = " ";
    else if (kind != TOKENIZER_CHAR && !first) sb_append(out, " ", 1);
    sb_append(out, tok, strlen(tok));
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
