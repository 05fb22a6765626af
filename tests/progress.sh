#!/usr/bin/env bash
# Training progress as a user reads it: epoch and elapsed time in metrics.jsonl (the time
# going on across a resume), the validation of a SIGINT stop logged, validation BLEU with
# sample translations, and best.safetensors chosen by BLEU. Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch progress

"$QKV" toy-data "$T/data" --train 1500 --valid 100 --test 60 >/dev/null
tiny_config "$T/p.yaml" p "$T/data" 'batch_tokens: 1024, log_every: 10, valid_every: 20, checkpoint_every: 20, threads: 2,
        lr: {schedule: constant, value: 3.0e-3}'

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
wait_for "$dir.log" "^step 20/"
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

# ---- validation BLEU -----------------------------------------------------------------------
dir="$T/bleu"
# best_by left out: with valid_bleu on, the best is the best by BLEU, and the log says so
"$QKV" train "$T/p.yaml" --set run_dir="$dir" --set train.steps=60 --set train.valid_bleu=true >"$dir.log" 2>&1
rc=$?
bleus=$(sed -n 's/.*"valid_bleu": \([0-9.]*\).*/\1/p' "$dir/metrics.jsonl" | tr '\n' ' ')
if [[ $rc -eq 0 && $(wc -w <<<"$bleus") -eq 3 ]] && awk -v b="$bleus" 'BEGIN { n = split(b, v, " "); for (i = 1; i <= n; i++) if (v[i] < 0 || v[i] > 100) exit 1 }'; then
    ok "valid_bleu_logged_in_range"
else
    bad "valid_bleu_logged_in_range" "exit $rc; BLEU '$bleus'; $(tail -2 "$dir.log")"
fi
# three samples after each validation line, the same source lines each time
if [[ $(grep -c "^  src: " "$dir.log") -eq 9 && $(grep -c "^  ref: " "$dir.log") -eq 9 && $(grep -c "^  hyp: " "$dir.log") -eq 9 ]] &&
    grep -A1 "^step 20/60 .*BLEU [0-9.]*$" "$dir.log" | grep -q "^  src: $(head -1 "$T/data/valid.src")$"; then
    ok "valid_bleu_prints_samples"
else
    bad "valid_bleu_prints_samples" "$(head -20 "$dir.log")"
fi
best_step=$("$QKV" info "$dir/ckpt/best.safetensors" | sed -n 's/^step \([0-9]*\) .*/\1/p')
top=$(sed -n 's/.*"step": \([0-9]*\),.*"valid_bleu": \([0-9.]*\).*/\2 \1/p' "$dir/metrics.jsonl" | sort -s -k1,1gr | head -1)
# the first validation reaching the highest BLEU (a tie does not replace the best)
first_top=$(sed -n 's/.*"step": \([0-9]*\),.*"valid_bleu": \([0-9.]*\).*/\2 \1/p' "$dir/metrics.jsonl" |
    awk -v m="${top%% *}" '$1 == m { print $2; exit }')
[[ -n $best_step && $best_step == "$first_top" ]] &&
    grep -q "^best: ckpt/best.safetensors is the best by validation BLEU (train.best_by)$" "$dir.log" &&
    "$QKV" info "$dir/ckpt/best.safetensors" | grep -q "^best checkpoint of the run: the best by validation BLEU" &&
    ok "best_by_bleu_keeps_the_highest_bleu" ||
    bad "best_by_bleu_keeps_the_highest_bleu" "best at step $best_step, highest BLEU at $first_top"
grep -q "validation BLEU" "$dir/curves.svg" && ok "curves_svg_draws_bleu" || bad "curves_svg_draws_bleu" "no BLEU panel"

# ---- config errors ---------------------------------------------------------------------------
expect_error "best_by_bleu_needs_valid_bleu" 2 "^qkv: --set train.best_by: train.best_by: bleu needs train.valid_bleu: true$" \
    "$QKV" train "$T/p.yaml" --set run_dir="$T/nope" --set train.best_by=bleu
printf 'data:\n  train: {src: %s/data/train.src, tgt: %s/data/train.tgt}\ntrain:\n  best_by: bleu\n' "$T" "$T" >"$T/b.yaml"
expect_error "best_by_bleu_needs_valid_bleu_in_file" 2 "^qkv: $T/b.yaml:4:12: train.best_by: bleu needs train.valid_bleu: true$" \
    "$QKV" train "$T/b.yaml" --set run_dir="$T/nope"
expect_error "valid_bleu_needs_valid_data" 2 "^qkv: --set train.valid_bleu: train.valid_bleu: true needs data.valid \(the BLEU is of its translations\)$" \
    "$QKV" train "$T/p.yaml" --set run_dir="$T/nope" --set data.valid.src= --set data.valid.tgt= --set train.valid_bleu=true \
    --set train.best_by=bleu
expect_error "lr_value_under_noam_refused" 2 "^qkv: --set train.lr.value: read by train.lr.schedule: constant alone \(the schedule here is noam\)$" \
    "$QKV" train "$T/p.yaml" --set run_dir="$T/nope" --set train.lr.schedule=noam --set train.lr.value=0.1
expect_error "lr_warmup_under_constant_refused" 2 "^qkv: --set train.lr.warmup: read by train.lr.schedule: noam alone \(the schedule here is constant\)$" \
    "$QKV" train "$T/p.yaml" --set run_dir="$T/nope" --set train.lr.warmup=10
# a run that scores BLEU, resumed after its config.yaml lost data.valid: refused, not run blind
cp -r "$T/bleu" "$T/bleu-novalid" && sed -i 's/^    src: ".*valid.src"$/    src: ""/; s/^    tgt: ".*valid.tgt"$/    tgt: ""/' "$T/bleu-novalid/config.yaml"
expect_error "resume_valid_bleu_without_valid_data" 2 "^qkv: $T/bleu-novalid/config.yaml: data.valid is empty, and this run's train.valid_bleu decodes it$" \
    "$QKV" resume "$T/bleu-novalid" --steps 80
[[ ! -e $T/nope ]] && ok "refused_config_makes_no_run" || bad "refused_config_makes_no_run" "$T/nope exists"

finish
