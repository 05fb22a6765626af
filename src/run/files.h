/* files: the names of a run directory's files, relative to the run directory. Every
 * place that opens one of them names it through these, so a reader finds here what a
 * run directory holds and who writes it.
 *
 *   RUN/config.yaml                      the resolved config, every key (run.c)
 *   RUN/src.vocab, tgt.vocab             the vocabularies (run.c)
 *   RUN/src.model, tgt.model             the SentencePiece models, with that tokenizer (run.c)
 *   RUN/metrics.jsonl                    one JSON object per log step (train/trainer.c)
 *   RUN/curves.svg                       the loss curves, redrawn at each log (curves.c)
 *   RUN/eval.jsonl                       a line per qkv eval (cmd/eval.c)
 *   RUN/journal.jsonl, samples.jsonl     the run's account of itself (journal.h)
 *   RUN/report.html                      qkv report's page (report/runpage.c)
 *   RUN/lock                             held by the process training the run (run.c)
 *   RUN/ckpt/step-000500.safetensors     the last train.keep_checkpoints checkpoints
 *   RUN/ckpt/best.safetensors            the best by validation loss (a hard link)
 *   RUN/ckpt/average.safetensors         with train.average_last: the newest ones' mean
 *   RUN/watch/                           the watched sentences' maps (attention/watch.c)
 *   RUN/heads/                           qkv heads' analysis (heads.json, heads.svg, ...) */
#ifndef QKV_RUN_FILES_H
#define QKV_RUN_FILES_H

#define RUN_CONFIG "config.yaml"
#define RUN_SRC_VOCAB "src.vocab"
#define RUN_TGT_VOCAB "tgt.vocab"
#define RUN_SRC_SPM "src.model"
#define RUN_TGT_SPM "tgt.model"
#define RUN_METRICS "metrics.jsonl"
#define RUN_CURVES "curves.svg"
#define RUN_EVAL "eval.jsonl"
#define RUN_ALIGN "align.jsonl"
#define RUN_JOURNAL "journal.jsonl"
#define RUN_SAMPLES "samples.jsonl"
#define RUN_REPORT "report.html"
#define RUN_LOCK "lock"
#define RUN_CKPT_DIR "ckpt"
#define RUN_BEST_NAME "best.safetensors"
#define RUN_BEST RUN_CKPT_DIR "/" RUN_BEST_NAME
#define RUN_AVERAGE RUN_CKPT_DIR "/average.safetensors"
#define RUN_WATCH_DIR "watch"
#define RUN_HEADS_DIR "heads"

#endif
