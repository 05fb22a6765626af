/* Fuzz target: what a client sends first on a connection to qkv serve, as the gate reads
 * it (serve/gate.c), whole and in every prefix a read could stop at. Whatever the bytes:
 * a decision is a hand-on with a body within the bound, or one of the gate's statuses
 * with one line, whose answer is a whole HTTP response; a prefix of a head that was
 * waited for never holds a refusal its whole would not make. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "serve/gate.h"

#define BODY_MAX 4096

static void check(const GateVerdict *v) {
    static const int statuses[] = {0, 400, 411, 413, 414, 431, 505};
    int known = 0;
    for (size_t i = 0; i < sizeof statuses / sizeof *statuses; i++) known |= v->status == statuses[i];
    if (!known || (v->status == 0 && v->body > BODY_MAX) || (v->status && (!v->error[0] || strchr(v->error, '\n'))))
        abort();
    if (v->status) {
        size_t len;
        char *a = gate_answer(v, &len);
        if (len != strlen(a) || strncmp(a, "HTTP/1.1 ", 9) != 0 || !strstr(a, "\r\n\r\n{\"error\":")) abort();
        free(a);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    GateVerdict whole, part;
    int decided = gate_check_head((const char *)data, size, BODY_MAX, &whole);
    if (decided) check(&whole);
    /* the prefixes a read might have stopped at: each undecided, or decided as the whole
     * (a refusal seen early is one the whole makes too) */
    for (size_t n = 0; n < size && n < 512; n++) {
        if (!gate_check_head((const char *)data, n, BODY_MAX, &part)) continue;
        check(&part);
        if (!decided || part.status != whole.status) abort();
        break;
    }
    return 0;
}
