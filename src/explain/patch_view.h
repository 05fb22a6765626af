/* patch_view: a patching table as people read it: patch.json ("qkv-patch-1") and
 * patch.svg, two heatmaps of the measured effects (every head by kind and layer; the
 * encoder's stream by layer and source token) and a scatter of attribution patching's
 * estimates against them.
 *
 * patch.json: {"format": "qkv-patch-1", "metric": "...", "clean": m, "corrupt": m,
 * "everything": m, "rho": r, "source": [labels], "components": [{name, kind ("enc",
 * "dec", "cross" for heads, "stream"), layer, head, pos, effect, atp}]}. */
#ifndef QKV_EXPLAIN_PATCH_VIEW_H
#define QKV_EXPLAIN_PATCH_VIEW_H

#include "explain/patching.h"

/* The file's text (malloc'd); metric: how the metric reads ("log p(target)", ...). */
char *patch_json(const PatchTable *t, const char *metric, char **src_labels, int S);
/* The picture (malloc'd); title says which sentences. */
char *patch_svg(const PatchTable *t, const char *title, char **src_labels, int S, int heads);

#endif
