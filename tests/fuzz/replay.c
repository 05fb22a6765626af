/* replay: runs a fuzz target on stored inputs without libFuzzer (any C compiler), so the
 * seeds and every finding kept in tests/fuzz/<target>/ are replayed by make test.
 * Usage: <target>-replay FILE...; exit 0 when every input ran to its end. */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "util/err.h"
#include "util/file.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        size_t len;
        char *bytes = read_file(argv[i], &len);
        if (!bytes) {
            fprintf(stderr, "replay: %s\n", err_msg());
            return 2;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)bytes, len);
        free(bytes);
    }
    printf("replayed %d inputs\n", argc - 1);
    return 0;
}
