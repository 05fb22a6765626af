/* profile: see profile.h. */
#include "nn/profile.h"

atomic_int prof_enabled;
_Thread_local int prof_thread;
double prof_seconds[PROF_THREADS][PROF_N];
const char *prof_names[PROF_N] = {"matrix products",       "attention products", "softmax",   "layer norm",
                                  "relu/dropout/residual", "embedding/loss",     "optimizer", "threads waiting"};
