/* headmask tests (filled in with the feature). */
#include "check.h"

const TestCase headmask_tests[] = {
    {NULL, NULL},
};
