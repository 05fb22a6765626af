/* Fuzz target: the config parser and --set. The input is YAML; after its first NUL byte
 * (if any) come --set assignments, one a line, applied as `qkv train --set` applies them;
 * then the cross-key checks, and the resolved config written and read back (whatever
 * qkv accepts it must be able to write and reread the same). */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

static void round_trip(const Config *c) {
    char *yaml = config_text(c, "fuzz.yaml");
    if (!yaml) return; /* a value YAML cannot spell: refused, as config_write refuses it */
    Config back;
    config_defaults(&back);
    if (config_parse(&back, yaml, strlen(yaml), "resolved") != 0) abort(); /* written but unreadable */
    char *again = config_text(&back, "resolved");
    if (!again || strcmp(yaml, again) != 0) abort(); /* read back as something else */
    free(yaml), free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const char *nul = memchr(text, '\0', size);
    size_t yaml_len = nul ? (size_t)(nul - text) : size;
    Config c;
    config_defaults(&c);
    if (config_parse(&c, text, yaml_len, "fuzz.yaml") != 0) return 0;
    if (nul) {
        char *sets = malloc(size - yaml_len);
        memcpy(sets, nul + 1, size - yaml_len - 1);
        sets[size - yaml_len - 1] = '\0';
        int n = 0;
        for (char *line = strtok(sets, "\n"); line && n < 64; line = strtok(NULL, "\n"), n++)
            if (config_set(&c, line) != 0) break;
        free(sets);
    }
    if (config_validate(&c, 0) == 0) round_trip(&c);
    return 0;
}
