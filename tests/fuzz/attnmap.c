/* Fuzz target: the attention files qkv reads back, and gold alignments. Any bytes as a
 * maps.json object (one sentence of a watch snapshot reads the same way): refused, or
 * read into maps whose every shape matches their arrays, then written out again and
 * read back; and any bytes as Pharaoh lines, parsed, made a set and range-checked. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/align_map.h"
#include "attention/attnmap.h"
#include "fuzz.h"

static void maps(const uint8_t *data, size_t size) {
    json_t *root = json_loadb((const char *)data, size, 0, NULL);
    if (!root) return;
    AttnMaps a = {0};
    if (attnmap_from_json(root, &a, "fuzz") == 0) {
        /* what was read is whole: it writes out and reads back the same way */
        char *text = attnmap_json(&a);
        json_t *again = json_loads(text, 0, NULL);
        AttnMaps b = {0};
        if (!again || attnmap_from_json(again, &b, "round trip") != 0) abort();
        FILE *null = fopen("/dev/null", "w");
        if (null) attnmap_print_terminal(&b, null), fclose(null);
        attnmap_free(&b);
        json_decref(again);
        free(text);
        attnmap_free(&a);
    }
    json_decref(root);
}

static void pharaoh(const uint8_t *data, size_t size) {
    char *line = malloc(size + 1);
    memcpy(line, data, size);
    line[size] = '\0';
    int max = (int)(size / 3 + 1);
    int(*pairs)[2] = malloc(sizeof *pairs * (size_t)max);
    int n = align_parse(line, pairs, max);
    if (n > max) abort();
    if (n > 0) {
        int u = align_unique(pairs, n);
        if (u < 1 || u > n) abort();
        for (int i = 1; i < u; i++)
            if (pairs[i][0] == pairs[i - 1][0] && pairs[i][1] == pairs[i - 1][1]) abort();
        align_out_of_range(pairs, u, 5, 5);
    }
    free(pairs), free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    maps(data, size);
    pharaoh(data, size);
    return 0;
}
