/* checkpoint: model weights to and from files in the safetensors layout.
 *
 *   u64 little-endian header length N | N bytes of JSON header | raw float32 data
 *
 * The header maps each tensor name to {"dtype": "F32", "shape": [...], "data_offsets":
 * [begin, end]} (offsets relative to the data section) and holds "__metadata__", a
 * string -> string map. Loading verifies the whole file against the model's table
 * before it touches a single weight. */
#ifndef QKV_CHECKPOINT_H
#define QKV_CHECKPOINT_H

#include "model.h"

typedef struct {
    const char *key, *value;
} MetaEntry;

/* Writes the model's weights atomically, with the given metadata entries. */
int ckpt_save_weights(const Model *m, const char *path, const MetaEntry *meta, int n_meta);
/* Loads weights into m; on any fault returns -1 with "<path>: <fault>" and leaves m as it was. */
int ckpt_load_weights(Model *m, const char *path);

#endif
