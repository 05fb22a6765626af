/* headmask: which attention heads a user masks, as text and back. A SPEC (what
 * --mask-heads takes) is read against one model into its head gates (nn/model.h, "head
 * gates": 1 kept, 0 masked), and gates are written back as the canonical items, so that a
 * list `qkv heads` writes reads back with @FILE to the same gates.
 *
 * The SPEC: items separated by commas and/or whitespace, each KIND.LAYER.HEAD with
 *   KIND   enc, dec or cross (or the maps.json names encoder_self, decoder_self, cross)
 *   LAYER  a 0-based layer of that kind, decimal, or * for every layer
 *   HEAD   a 0-based head, decimal, or * for every head
 * e.g. "cross.2.5, enc.0.*, dec.*.3". "@FILE" as the whole SPEC reads the items from a
 * file instead: one a line, '#' starting a comment to the end of its line, blank lines
 * skipped. An empty SPEC, or a file with no items, masks nothing. A head named twice is
 * masked once.
 *
 * Owns the grammar and its messages, not the gates: the caller sets them on the model
 * (model_set_head_gates). Prints nothing; errors go through err_set (util/err.h). */
#ifndef QKV_HEADMASK_H
#define QKV_HEADMASK_H

#include "nn/model.h"
#include "util/text.h"

#define HEAD_MASK_FILE_MAX ((size_t)1 << 20) /* bytes of an @FILE */
#define HEAD_MASK_LINE_MAX 256               /* bytes of one of its lines */
#define HEAD_MASK_ITEM_MAX 64                /* bytes of one item */

/* Fills gates (model_head_count(m) floats, the caller's) from spec: 0 for each head it
 * names, 1 for the rest. Returns how many heads are masked (0 for an empty SPEC), or -1
 * with one line set, "--mask-heads: 'cross.7.1': this model's cross-attention has
 * layers 0..1" (a file's items also name FILE:LINE), for an unknown kind, an item not
 * KIND.LAYER.HEAD, a layer or head the model lacks, a file that is unreadable, not a
 * regular file, over HEAD_MASK_FILE_MAX, holds a NUL byte or a line over
 * HEAD_MASK_LINE_MAX; gates then holds nothing to use. */
int head_mask_parse(const Model *m, const char *spec, float *gates);
/* The same for a SPEC that may not name a file (a request to qkv serve): "@FILE" is
 * refused like any item not KIND.LAYER.HEAD, and no file is ever opened. */
int head_mask_parse_items(const Model *m, const char *spec, float *gates);

/* Appends to out one line "KIND.LAYER.HEAD\n" (kinds enc, dec, cross) for each head whose
 * gate is 0, in model_head_index order; head_mask_parse reads the lines back to the same
 * gates. Returns how many. */
int head_mask_format(const Model *m, const float *gates, StrBuf *out);

#endif
