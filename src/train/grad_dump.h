/* grad_dump: one batch's loss and gradients to files, for checking against a reference. */
#ifndef QKV_GRAD_DUMP_H
#define QKV_GRAD_DUMP_H

/* Writes OUT/grads.safetensors and OUT/batch.json for training batch `batch_index` of
 * the run (in length order), dropout off. -1 with the error set. */
int grad_dump_write(const char *run, const char *out_dir, int batch_index);

#endif
