/* tokenize: see tokenize.h. */
#include "data/tokenize.h"

#include <string.h>

#include "util/text.h"

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
