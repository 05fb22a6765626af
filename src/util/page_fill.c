/* page_fill: see page_fill.h. */
#include "util/page_fill.h"

#include <string.h>

#include "util/err.h"

int page_fill(StrBuf *sb, const char *page, const PageSlot *slots, int n, const void *ctx) {
    int used[64] = {0};
    if (n > 64) return err_set("a page of %d parts: at most 64", n);
    for (const char *p = page;;) {
        const char *at = strstr(p, "{{"), *end = at ? strstr(at + 2, "}}") : NULL;
        if (!at || !end) {
            sb_append(sb, p, strlen(p));
            break;
        }
        sb_append(sb, p, (size_t)(at - p));
        size_t len = (size_t)(end - at - 2);
        int k = 0;
        while (k < n && !(strlen(slots[k].name) == len && memcmp(slots[k].name, at + 2, len) == 0)) k++;
        if (k == n)
            return err_set("the page names a part {{%.*s}} no writer fills", (int)(len < 40 ? len : 40), at + 2);
        slots[k].fill(sb, ctx);
        used[k] = 1;
        p = end + 2;
    }
    for (int k = 0; k < n; k++)
        if (!used[k]) return err_set("the page has no place for its part {{%s}}", slots[k].name);
    return 0;
}
