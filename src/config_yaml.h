/* config_yaml: YAML text read as a config is, under a config's limits. libyaml's loader
 * slows to a crawl (quadratically) on deep flow nesting, so depth and size are checked on
 * its event stream as it is read, stopping at the first event past a limit, before the
 * text is loaded; errors name "name:line:col", also where libyaml's reader has no mark. */
#ifndef QKV_CONFIG_YAML_H
#define QKV_CONFIG_YAML_H

#include <stddef.h>
#include <yaml.h>

/* text (at most max bytes) as one YAML document of bounded depth and size whose scalars hold no NUL (a "\0"
 * escape would cut the string short unseen), nothing after it, not even after "...":
 * loaded into *doc (the caller deletes it, yaml_document_delete). 0, or -1 with the error
 * set ("name:line:col: ..."), syntax errors included. */
int config_yaml_load(const char *text, size_t len, size_t max, const char *name, yaml_document_t *doc);

#endif
