#include "check.h"
const TestCase data_tests[] = {{NULL,NULL}};
const TestCase config_tests[] = {{NULL,NULL}};
