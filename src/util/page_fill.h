/* page_fill: a page written from data into its frame, a file built in as a string whose
 * {{name}} markers stand where the parts go. */
#ifndef QKV_UTIL_PAGE_FILL_H
#define QKV_UTIL_PAGE_FILL_H

#include "util/text.h"

/* One part of a page written from data: where "{{name}}" stands in the page's frame (a
 * file like the others, built in as a string), fill writes it. */
typedef struct {
    const char *name;
    void (*fill)(StrBuf *sb, const void *ctx);
} PageSlot;
/* Appends page with each {{name}} replaced by what its slot's fill writes (ctx passed on).
 * 0, or -1 with the error set when a {{...}} names no slot or a slot stands nowhere: the
 * frame and its writer out of step. */
int page_fill(StrBuf *sb, const char *page, const PageSlot *slots, int n, const void *ctx);

#endif
