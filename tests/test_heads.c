/* heads tests (filled in with the feature). */
#include "check.h"

const TestCase heads_tests[] = {
    {NULL, NULL},
};
