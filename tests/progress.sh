#!/usr/bin/env bash
# Training progress as a user reads it: epoch and elapsed time in metrics.jsonl (the time
# going on across a resume) and the validation of a SIGINT stop logged. Ends with
# "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
QKV=${QKV:-build/qkv}
T=$(mktemp -d /tmp/qkv-progress.XXXXXX)
[[ -n ${QKV_KEEP_TMP:-} ]] || trap 'rm -rf "$T"' EXIT
source tests/lib.sh

"$QKV" toy-data "$T/data" --train 1500 --valid 100 --test 60 >/dev/null
printf 'name: p
data:
  train: {src: %s/data/train.src, tgt: %s/data/train.tgt}
  valid: {src: %s/data/valid.src, tgt: %s/data/valid.tgt}
model: {d_model: 32, heads: 4, d_ff: 64, encoder_layers: 2, decoder_layers: 2, dropout: 0.1}
train: {batch_tokens: 1024, log_every: 10, valid_every: 20, checkpoint_every: 20, threads: 2,
        lr: {schedule: constant, value: 3.0e-3}}
' "$T" "$T" "$T" "$T" >"$T/p.yaml"

# ---- epoch and elapsed_s ------------------------------------------------------------------
dir="$T/plain"
"$QKV" train "$T/p.yaml" --set run_dir="$dir" --set train.steps=40 >"$dir.log" 2>&1
per_epoch=$(sed -n 's/.* \([0-9]*\) batches per epoch.*/\1/p' "$dir.log")
# each line: epoch = batches taken / batches per epoch (one batch a step), elapsed_s growing
if [[ -n $per_epoch ]] && awk -v n="$per_epoch" '
    { if (!match($0, /"epoch": [0-9.]+/)) exit 1; e = substr($0, RSTART + 9, RLENGTH - 9)
      if (!match($0, /"elapsed_s": [0-9.]+/)) exit 1; t = substr($0, RSTART + 13, RLENGTH - 13)
      match($0, /"step": [0-9]+/); s = substr($0, RSTART + 8, RLENGTH - 8)
      if (e - s / n > 0.0001 || s / n - e > 0.0001 || t < last) exit 1; last = t }
    END { exit NR != 4 }' "$dir/metrics.jsonl"; then
    ok "metrics_have_epoch_and_elapsed_s"
else
    bad "metrics_have_epoch_and_elapsed_s" "$per_epoch batches an epoch; $(cat "$dir/metrics.jsonl")"
fi
grep -q "^step 40/40  epoch [0-9.]*  loss" "$dir.log" && ok "log_line_shows_epoch" || bad "log_line_shows_epoch" "$(tail -2 "$dir.log")"

elapsed() { sed -n 's/.*"elapsed_s": \([0-9.]*\).*/\1/p' "$1"; }
before=$(elapsed "$dir/metrics.jsonl" | tail -1)
"$QKV" resume "$dir" --steps 60 >"$dir.resume.log" 2>&1
after=$(elapsed "$dir/metrics.jsonl" | sed -n 5p)
if [[ -n $after ]] && awk -v a="$after" -v b="$before" 'BEGIN { exit !(a > b) }'; then
    ok "elapsed_s_goes_on_after_resume"
else
    bad "elapsed_s_goes_on_after_resume" "$before before the stop, then $after"
fi

# ---- a SIGINT stop validates and logs it ---------------------------------------------------
dir="$T/sig"
"$QKV" train "$T/p.yaml" --set run_dir="$dir" --set train.steps=100000 --set train.checkpoint_every=100000 >"$dir.log" 2>&1 &
pid=$!
while ! grep -q "^step 20/" "$dir.log" 2>/dev/null; do sleep 0.05; done
sleep 0.1
kill -INT $pid
wait $pid
stopped=$(sed -n 's/^stopped by signal [0-9]* after step \([0-9]*\);.*/\1/p' "$dir.log")
last=$(tail -1 "$dir/metrics.jsonl")
if [[ -n $stopped ]] && grep -q "^{\"step\": $stopped, .*\"valid_loss\": [0-9.]*" <<<"$last"; then
    ok "sigint_stop_logs_its_validation"
else
    bad "sigint_stop_logs_its_validation" "stopped after ${stopped:-?}; last line $last"
fi

finish
