/* attnview: the one-file HTML viewer. The page itself is the folder src/attention/viewer/
 * (readable HTML, CSS and JavaScript, joined into one page and turned into the string
 * attnview_html at build time); this file puts the maps' JSON where the page's marker is. */
#include <stdlib.h>
#include <string.h>

#include "attention/attnmap.h"
#include "util/atomic_file.h"
#include "util/err.h"
#include "util/text.h"

extern const char attnview_html[];

#define MARKER "__QKV_DATA__"

int attnmap_write_html(const AttnMaps *a, const char *path) {
    char *json = attnmap_json(a);
    int rc = attnview_write(json, path);
    free(json);
    return rc;
}

int attnview_write(const char *json, const char *path) {
    StrBuf sb = {0};
    if (attnview_page(json, &sb) != 0) return -1;
    int rc = write_file_atomic(path, sb.buf, sb.len);
    sb_free(&sb);
    return rc;
}

int attnview_page(const char *json, StrBuf *out) {
    const char *at = strstr(attnview_html, MARKER);
    if (!at) return err_set("built without the viewer page's data marker");
    StrBuf sb = {0};
    sb_append(&sb, attnview_html, (size_t)(at - attnview_html));
    /* JSON inside <script> is not HTML text: entities are not decoded there, so the XML
     * escaper does not apply. What must not appear is markup ("</script>", "<!--"); a '<'
     * can only occur inside a JSON string, where \u003c means the same character. */
    for (const char *p = json; *p;) {
        size_t n = utf8_char(p); /* jansson writes UTF-8; any other writer's bad byte becomes U+FFFD */
        if (*p == '<') sb_append(&sb, "\\u003c", 6);
        else if (n) sb_append(&sb, p, n);
        else sb_append(&sb, "\xEF\xBF\xBD", 3);
        p += n ? n : 1;
    }
    const char *rest = at + strlen(MARKER);
    sb_append(&sb, rest, strlen(rest));
    *out = sb;
    return 0;
}
