#!/usr/bin/env bash
# Checkpoints end to end: byte-identical resume (mid-epoch, across an epoch boundary,
# after SIGINT, after SIGKILL), rotation and best, disk-full handling, bad checkpoints
# through the command line. Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch resume

"$QKV" toy-data "$T/data" --train 1500 --valid 100 --test 50 >/dev/null
# a small, quick model; 1500 pairs at 1024 tokens a batch make ~30 batches an epoch
tiny_config "$T/r.yaml" r "$T/data" 'batch_tokens: 1024, log_every: 10, valid_every: 20, checkpoint_every: 10, keep_checkpoints: 3, threads: 2'

train() { # train RUN_DIR STEPS [more --set ...]
    local dir=$1 steps=$2
    shift 2
    "$QKV" train "$T/r.yaml" --set run_dir="$dir" --set train.steps="$steps" "$@" >"$dir.log" 2>&1
}

N=50
train "$T/straight" $N
epoch=$(sed -n 's/.* \([0-9]*\) batches per epoch.*/\1/p' "$T/straight.log")
straight="$T/straight/ckpt/step-0000$N.safetensors"
[[ -f $straight && $epoch -gt 10 && $epoch -lt $N ]] || { echo "set-up failed: $(tail -3 "$T/straight.log")"; exit 1; }

# ---- rotation and best ------------------------------------------------------------------
kept=$(cd "$T/straight/ckpt" && ls step-*.safetensors | tr '\n' ' ')
[[ $kept == "step-000030.safetensors step-000040.safetensors step-000050.safetensors " ]] &&
    ok "keeps_the_last_k_checkpoints" || bad "keeps_the_last_k_checkpoints" "$kept"
best_step=$("$QKV" info "$T/straight/ckpt/best.safetensors" | sed -n 's/^step \([0-9]*\) .*/\1/p')
best_loss=$(grep -o '"valid_loss": [0-9.]*' "$T/straight/metrics.jsonl" | awk '{print $2}' | sort -g | head -1)
grep -q "\"step\": $best_step,.*\"valid_loss\": $best_loss" "$T/straight/metrics.jsonl" &&
    ok "best_is_the_lowest_validation_loss" || bad "best_is_the_lowest_validation_loss" "best at step $best_step, lowest $best_loss"
# a file system without hard links (tests/shim/no_link.c: link fails as on vfat): best is a
# copy, byte for byte the same file, and the run trains to its end
NO_LINK=$(dirname "$QKV_BIN")/no_link.so
[[ -f $NO_LINK ]] || { echo "set-up failed: no no_link.so beside $QKV_BIN (make builds it)"; exit 1; }
LD_PRELOAD=$NO_LINK QKV_NO_LINK=1 ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0 train "$T/nolink" $N
# (the files hold their run_dir: compared with the run's own step file where it is kept)
best_copy=$T/nolink/ckpt/step-$(printf '%06d' "$best_step").safetensors
[[ -f $T/nolink/ckpt/step-0000$N.safetensors && -f $T/nolink/ckpt/best.safetensors ]] &&
    "$QKV" info "$T/nolink/ckpt/best.safetensors" 2>&1 | grep -q "^step $best_step " &&
    { [[ ! -f $best_copy ]] || cmp -s "$T/nolink/ckpt/best.safetensors" "$best_copy"; } &&
    [[ $(stat -c %h "$T/nolink/ckpt/best.safetensors") -eq 1 ]] && ok "best_is_a_copy_where_links_fail (step $best_step)" ||
    bad "best_is_a_copy_where_links_fail" "$(tail -2 "$T/nolink.log")"
"$QKV" info "$straight" >"$T/info.txt" 2>&1
grep -q "^step $N (epoch" "$T/info.txt" && grep -q "checksums: header OK, data OK" "$T/info.txt" &&
    grep -q "decoder.layers.1.cross_attn.w_k *F32 \[32, 32\]" "$T/info.txt" && ok "info_shows_step_tensors_checksums" ||
    bad "info_shows_step_tensors_checksums" "$(head -5 "$T/info.txt")"
"$QKV" translate "$T/straight" <"$T/data/test.src" 2>"$T/which.txt" >/dev/null
grep -q "ckpt/best.safetensors (best, step $best_step)" "$T/which.txt" && ok "translate_says_which_checkpoint" ||
    bad "translate_says_which_checkpoint" "$(cat "$T/which.txt")"

# ---- byte-identical resume ----------------------------------------------------------------
resume_case() { # NAME K: train K steps, resume to N, compare with the straight run
    local name=$1 k=$2 dir="$T/$1"
    train "$dir" "$k"
    "$QKV" resume "$dir" --steps $N >"$dir.resume.log" 2>&1
    if same_tensors "$dir/ckpt/step-0000$N.safetensors" "$straight"; then
        ok "$name"
    else
        bad "$name" "weights or moments differ after $k + $((N - k)) steps; $(tail -2 "$dir.resume.log")"
    fi
}
resume_case "resume_mid_epoch_is_byte_identical" 7
resume_case "resume_across_epoch_boundary_is_byte_identical" $((epoch - 3))
resume_case "resume_at_epoch_end_is_byte_identical" "$epoch"
"$QKV" resume "$T/straight" >"$T/again.log" 2>&1 && grep -q "nothing to do" "$T/again.log" &&
    ok "resume_when_done_does_nothing" || bad "resume_when_done_does_nothing" "$(cat "$T/again.log")"
# a goal below the run's step: nothing to do, and nothing on disk changes (config.yaml keeps its train.steps)
cp "$T/straight/config.yaml" "$T/config.before"
out=$(timeout 120 "$QKV" resume "$T/straight" --steps 10 2>&1)
rc=$?
[[ $rc -eq 0 ]] && grep -q "already at step $N, past --steps 10; nothing to do" <<<"$out" && cmp -s "$T/config.before" "$T/straight/config.yaml" &&
    ok "resume_below_the_step_changes_nothing" || bad "resume_below_the_step_changes_nothing" "exit $rc: $(tail -1 <<<"$out"); $(diff "$T/config.before" "$T/straight/config.yaml" | tail -2)"
# threads: no more than one process runs (train/parallel.h's PARALLEL_MAX), refused rather than quietly cut
expect_error "resume_threads_over_max" 2 "^qkv: --threads: '257' is not a thread count from 1 to 256$" \
    timeout 120 "$QKV" resume "$T/straight" --threads 257
expect_error "train_threads_over_max" 2 "^qkv: --set train.threads=257: train.threads: 257 is out of range \[1, 256\]$" \
    timeout 120 "$QKV" train "$T/r.yaml" --set run_dir="$T/t257" --set train.steps=2 --set train.threads=257
# a FIFO where training appends its metrics is refused at once, never opened to wait for a reader
cp -r "$T/straight" "$T/fifo" && rm "$T/fifo/metrics.jsonl" && mkfifo "$T/fifo/metrics.jsonl"
expect_error "resume_refuses_a_fifo_metrics_file" 2 "^qkv: $T/fifo/metrics.jsonl: a FIFO, not a regular file$" \
    timeout 120 "$QKV" resume "$T/fifo" --steps 60

# ---- train.average_last: the mean of the newest checkpoints, preferred, and resume untouched ---
train "$T/avg" $N --set train.average_last=3
"$QKV" export "$T/avg" --average 3 --out "$T/avg-export.safetensors" >/dev/null 2>&1
"$QKV" export "$T/avg/ckpt/step-0000$N.safetensors" --out "$T/avg-last.safetensors" >/dev/null 2>&1
same_tensors "$T/avg/ckpt/average.safetensors" "$T/avg-export.safetensors" &&
    ! same_tensors "$T/avg/ckpt/average.safetensors" "$T/avg-last.safetensors" &&
    ok average_last_is_the_mean_of_the_newest_checkpoints ||
    bad average_last_is_the_mean_of_the_newest_checkpoints "$(ls "$T/avg/ckpt"; tail -2 "$T/avg.log")"
"$QKV" translate "$T/avg" <"$T/data/test.src" 2>"$T/avg-which.txt" >"$T/avg-hyp.txt"
"$QKV" translate "$T/avg-export.safetensors" <"$T/data/test.src" 2>/dev/null >"$T/avg-export-hyp.txt"
grep -q "ckpt/average.safetensors (average, step $N)" "$T/avg-which.txt" && cmp -s "$T/avg-hyp.txt" "$T/avg-export-hyp.txt" &&
    ok average_last_is_what_translate_uses_and_names || bad average_last_is_what_translate_uses_and_names "$(cat "$T/avg-which.txt")"
train "$T/avg-resumed" 30 --set train.average_last=3
"$QKV" resume "$T/avg-resumed" --steps $N >"$T/avg-resumed.resume.log" 2>&1
same_tensors "$T/avg-resumed/ckpt/step-0000$N.safetensors" "$straight" &&
    same_tensors "$T/avg/ckpt/step-0000$N.safetensors" "$straight" &&
    same_tensors "$T/avg-resumed/ckpt/average.safetensors" "$T/avg/ckpt/average.safetensors" &&
    ok average_last_leaves_training_and_resume_bit_exact || bad average_last_leaves_training_and_resume_bit_exact "checkpoints differ"
expect_error average_last_over_keep_checkpoints 2 "train.average_last is 4, but train.keep_checkpoints keeps 3" \
    "$QKV" train "$T/r.yaml" --set run_dir="$T/avg-bad" --set train.average_last=4

# ---- train.minutes: a time budget ends the run as its last step would, and a resume keeps it ---
# the run ends at the first step that starts past 0.03 minutes (1.8 s): done, exit 0, that
# step validated and checkpointed; the remover of the budget (or a wrong clock) would run
# into the timeout
out=$(timeout 60 "$QKV" train "$T/r.yaml" --set run_dir="$T/budget" --set train.steps=1000000 --set train.minutes=0.03 2>&1)
rc=$?
k=$(sed -n 's/^done: step \([0-9]*\) of at most 1000000, train.minutes (0.03) spent, in .*/\1/p' <<<"$out")
last=$(tail -n 1 "$T/budget/metrics.jsonl")
secs=$(sed -E 's/.*"elapsed_s": ([0-9.]+).*/\1/' <<<"$last")
[[ $rc -eq 0 && -n $k && $k -gt 1 && -f $T/budget/ckpt/step-$(printf %06d "$k").safetensors ]] &&
    grep -q "^budget: 0.03 minutes of training (train.minutes), at most 1000000 steps" <<<"$out" &&
    [[ $last == "{\"step\": $k,"*'"valid_loss"'* ]] && awk -v s="$secs" 'BEGIN { exit !(s >= 1.8 && s < 30) }' &&
    ok "train_minutes_ends_the_run_done ($k steps, ${secs}s)" || bad "train_minutes_ends_the_run_done" "exit $rc, step '$k', ${secs}s: $(tail -2 <<<"$out")"
# spent: a resume does nothing and changes nothing; --minutes moves the budget and config.yaml says so
cp "$T/budget/config.yaml" "$T/budget.before"
out=$(timeout 60 "$QKV" resume "$T/budget" 2>&1)
[[ $? -eq 0 ]] && grep -q "already trained 0.0 minutes, train.minutes is 0.03; nothing to do, nothing changed" <<<"$out" &&
    cmp -s "$T/budget.before" "$T/budget/config.yaml" && ok "resume_with_the_budget_spent_does_nothing" ||
    bad "resume_with_the_budget_spent_does_nothing" "$(tail -1 <<<"$out")"
out=$(timeout 60 "$QKV" resume "$T/budget" --minutes 0.06 2>&1)
k2=$(sed -n 's/^done: step \([0-9]*\) of at most 1000000, train.minutes (0.06) spent, in .*/\1/p' <<<"$out")
secs=$(tail -n 1 "$T/budget/metrics.jsonl" | sed -E 's/.*"elapsed_s": ([0-9.]+).*/\1/')
[[ -n $k2 && $k2 -gt $k ]] && grep -q "^resuming .* (step $k of 1000000, 0.0 of 0.06 minutes)" <<<"$out" &&
    grep -q "^  minutes: 0.06$" "$T/budget/config.yaml" &&
    grep -q "<b>finished</b>: step $k2 of at most 1000000 in a budget of 0.06 minutes" "$T/budget/report.html" && awk -v s="$secs" 'BEGIN { exit !(s >= 3.6 && s < 40) }' &&
    ok "resume_minutes_moves_the_budget ($k -> $k2 steps, ${secs}s)" || bad "resume_minutes_moves_the_budget" "step '$k2', ${secs}s: $(tail -2 <<<"$out")"
# --minutes 0: no budget, the steps alone end it
out=$(timeout 60 "$QKV" resume "$T/budget" --minutes 0 --steps $((k2 + 3)) 2>&1)
grep -q "^done: step $((k2 + 3)) of $((k2 + 3)) in" <<<"$out" && grep -q "^  minutes: 0$" "$T/budget/config.yaml" &&
    ok "resume_minutes_0_lifts_the_budget" || bad "resume_minutes_0_lifts_the_budget" "$(tail -1 <<<"$out")"
expect_error "train_minutes_below_0" 2 "^qkv: --set train.minutes=-1: train.minutes: -1 is out of range \[0, 1e\+06\]$" \
    timeout 60 "$QKV" train "$T/r.yaml" --set run_dir="$T/neg" --set train.minutes=-1
expect_error "resume_minutes_not_a_number" 2 "^qkv: --minutes: 'soon' is not minutes from 0 to 1000000$" \
    timeout 60 "$QKV" resume "$T/budget" --minutes soon

# ---- train.lr.cooldown: the rate falls to 0 over the run's last fraction ------------------
# by steps: 0.5 of 50 cools from step 25, so step 50's rate is 1/26 of the plain schedule's
# and step 20's is the plain one; a resume from step 30 ends with the same weights
train "$T/cool" $N --set train.lr.cooldown=0.5
lr_of() { sed -n "s/^{\"step\": $2, .*\"lr\": \([0-9.e+-]*\),.*/\1/p" "$1/metrics.jsonl"; }
grep -q "^cooldown: the learning rate falls to 0 over steps 26 to $N (train.lr.cooldown 0.5)$" "$T/cool.log" &&
    awk -v a="$(lr_of "$T/cool" $N)" -v b="$(lr_of "$T/straight" $N)" -v c="$(lr_of "$T/cool" 20)" \
        -v d="$(lr_of "$T/straight" 20)" 'BEGIN { exit !(a > 0 && c > 0 && (a / b - 1 / 26) ^ 2 < 1e-10 && c == d) }' &&
    ok "cooldown_by_steps_falls_to_a_26th_at_the_last_step" ||
    bad "cooldown_by_steps_falls_to_a_26th_at_the_last_step" "lr at $N: $(lr_of "$T/cool" $N) against $(lr_of "$T/straight" $N)"
cp -r "$T/cool" "$T/cool-resumed"
rm -f "$T/cool-resumed/ckpt/step-000040.safetensors" "$T/cool-resumed/ckpt/step-0000$N.safetensors"
"$QKV" resume "$T/cool-resumed" >"$T/cool-resumed.log" 2>&1
same_tensors "$T/cool-resumed/ckpt/step-0000$N.safetensors" "$T/cool/ckpt/step-0000$N.safetensors" &&
    ! same_tensors "$T/cool/ckpt/step-0000$N.safetensors" "$straight" &&
    ok "cooldown_resume_bit_exact_and_not_the_plain_run" || bad "cooldown_resume_bit_exact_and_not_the_plain_run" "$(tail -1 "$T/cool-resumed.log")"
# by time: the clock begins it at half of 0.05 minutes, after some step S, and sets the run's
# last step to 2S (the second half at the first half's pace); the run ends there or when the
# minutes are spent. Warm-up 1: the plain rate goes as step^-0.5, so the last step's is the
# rate logged at step j <= S times sqrt(j / k) (2S - k + 1) / (S + 1). A resume does nothing
out=$(timeout 60 "$QKV" train "$T/r.yaml" --set run_dir="$T/cooltime" --set train.steps=1000000 --set train.minutes=0.05 \
    --set train.lr.cooldown=0.5 --set train.lr.warmup=1 2>&1)
rc=$?
s=$(sed -n 's/^cooldown: begun after step \([0-9]*\), at [0-9.]* minutes: the learning rate falls to 0 by step \([0-9]*\), the run.s last$/\1 \2/p' <<<"$out")
read -r from end <<<"$s"
k=$(sed -n 's/^done: step \([0-9]*\)[ ,].*/\1/p' <<<"$out")
j=$((${from:-0} / 10 * 10))
if [[ $rc -eq 0 && -n $from && -n $k && $j -gt 0 && $end -eq $((2 * from)) && $k -gt $from && $k -le $end ]] &&
    awk -v a="$(lr_of "$T/cooltime" "$k")" -v b="$(lr_of "$T/cooltime" "$j")" -v k="$k" -v e="$end" -v f="$from" -v j="$j" \
        'BEGIN { x = b * sqrt(j / k) * (e - k + 1) / (e - f + 1); exit !(a > 0 && (a / x - 1) ^ 2 < 1e-10) }'; then
    ok "cooldown_by_time_ends_the_run_by_twice_its_start ($from -> $k of $end)"
else
    bad "cooldown_by_time_ends_the_run_by_twice_its_start" "exit $rc, '$s', done at '$k', lr $(lr_of "$T/cooltime" "$k"): $(tail -2 <<<"$out")"
fi
out=$(timeout 60 "$QKV" resume "$T/cooltime" 2>&1)
[[ $? -eq 0 ]] &&
    grep -Eq "already (at step $k, the last of the cooldown begun after step $from|trained [0-9.]+ minutes, train.minutes is 0.05); nothing to do" <<<"$out" &&
    ok "cooldown_by_time_resume_does_nothing" || bad "cooldown_by_time_resume_does_nothing" "$(tail -1 <<<"$out")"
expect_error "cooldown_of_the_whole_run_refused" 2 "train.lr.cooldown: 1 is out of range \[0, 1)" \
    "$QKV" train "$T/r.yaml" --set run_dir="$T/cool1" --set train.lr.cooldown=1

# ---- SIGINT / SIGTERM: finish the step, checkpoint, exit 0, say how to resume -------------
for sig in INT TERM; do
    dir="$T/sig$sig"
    "$QKV" train "$T/r.yaml" --set run_dir="$dir" --set train.steps=100000 --set train.checkpoint_every=100000 >"$dir.log" 2>&1 &
    pid=$!
    wait_for "$dir.log" "^step 20/"
    kill -$sig $pid
    wait $pid
    rc=$?
    stopped=$(sed -n 's/^stopped by signal [0-9]* after step \([0-9]*\);.*/\1/p' "$dir.log")
    if [[ $rc -eq 0 && -n $stopped && -f $dir/ckpt/step-$(printf %06d "$stopped").safetensors ]] &&
        grep -q "^resume with: qkv resume $dir$" "$dir.log"; then
        ok "sig${sig}_checkpoints_and_exits_0"
    else
        bad "sig${sig}_checkpoints_and_exits_0" "exit $rc; $(tail -2 "$dir.log")"
    fi
done
dir="$T/sigINT"
stopped=$(sed -n 's/^stopped by signal [0-9]* after step \([0-9]*\);.*/\1/p' "$dir.log")
target=$((stopped + 15))
"$QKV" resume "$dir" --steps $target >"$dir.resume.log" 2>&1
train "$T/sigref" $target
same_tensors "$dir/ckpt/step-$(printf %06d $target).safetensors" "$T/sigref/ckpt/step-$(printf %06d $target).safetensors" &&
    ok "resume_after_sigint_is_byte_identical" || bad "resume_after_sigint_is_byte_identical" "$(tail -2 "$dir.resume.log")"

# ---- SIGKILL at arbitrary moments: a loadable checkpoint survives; replay gives the same --
dir="$T/killed"
M=300
train "$T/killref" $M
"$QKV" train "$T/r.yaml" --set run_dir="$dir" --set train.steps=$M --set train.checkpoint_every=5 >"$dir.log" 2>&1 &
pid=$!
kills=0
survived=1
for round in 1 2 3; do
    # wait for progress past the latest checkpoint, then kill at an arbitrary instant
    start=$(ls "$dir"/ckpt/step-*.safetensors 2>/dev/null | tail -1)
    for _ in $(seq 200); do
        now=$(ls "$dir"/ckpt/step-*.safetensors 2>/dev/null | tail -1)
        [[ -n $now && $now != "$start" ]] && break
        sleep 0.02
    done
    sleep "0.0$((RANDOM % 10))"
    kill -KILL $pid 2>/dev/null && kills=$((kills + 1))
    wait $pid 2>/dev/null
    latest=$(ls "$dir"/ckpt/step-*.safetensors 2>/dev/null | tail -1)
    if [[ -z $latest ]] || ! "$QKV" info "$latest" >/dev/null 2>&1; then survived=0; fi
    "$QKV" resume "$dir" >>"$dir.log" 2>&1 &
    pid=$!
done
wait $pid
[[ $survived -eq 1 && $kills -eq 3 ]] && ok "sigkill_leaves_a_loadable_checkpoint" || bad "sigkill_leaves_a_loadable_checkpoint" "$kills kills, survived=$survived"
same_tensors "$dir/ckpt/step-000$M.safetensors" "$T/killref/ckpt/step-000$M.safetensors" &&
    ok "resume_after_sigkill_is_byte_identical" || bad "resume_after_sigkill_is_byte_identical" "$(tail -3 "$dir.log")"

# metrics.jsonl after a kill: records logged past the checkpoint a resume goes on from are
# dropped (the resume logs those steps again), and so is a last line the kill cut short
dir="$T/killed-metrics"
train "$dir" 30 --set train.log_every=5
rm "$dir/ckpt/step-000030.safetensors" "$dir/ckpt/best.safetensors" # killed after logging step 30, before its checkpoint
printf '{"step": 3' >>"$dir/metrics.jsonl"
"$QKV" resume "$dir" --steps 40 >"$dir.resume.log" 2>&1
steps=$(grep -o '^{"step": [0-9]*' "$dir/metrics.jsonl" | grep -o '[0-9]*$' | tr '\n' ' ')
cut=$(grep -cv '^{"step": [0-9]*, .*}$' "$dir/metrics.jsonl")
[[ $steps == "5 10 15 20 25 30 35 40 " && $cut -eq 0 ]] && ok "resume_drops_metrics_past_its_checkpoint" ||
    bad "resume_drops_metrics_past_its_checkpoint" "steps: $steps; $cut lines not whole records; $(tail -1 "$dir.resume.log")"
[[ -z $(find "$dir" -name '*.tmp') ]] && ok "metrics_cut_leaves_no_tmp_file" || bad "metrics_cut_leaves_no_tmp_file" "$(find "$dir" -name '*.tmp')"
# samples.jsonl the same: the validation a killed run logged past its checkpoint is logged once
dir="$T/killed-samples"
train "$dir" 30 --set train.valid_every=10 --set train.valid_bleu=true
rm "$dir/ckpt/step-000030.safetensors" "$dir/ckpt/best.safetensors"
"$QKV" resume "$dir" --steps 40 >"$dir.resume.log" 2>&1
steps=$(grep -o '^{"step": [0-9]*' "$dir/samples.jsonl" | grep -o '[0-9]*$' | tr '\n' ' ')
[[ $steps == "10 20 30 40 " ]] && ok "resume_drops_samples_past_its_checkpoint" ||
    bad "resume_drops_samples_past_its_checkpoint" "steps: $steps; $(tail -1 "$dir.resume.log")"

# ---- a full disk: the write fails, the old checkpoint stays, training stops with exit 1 ----
dir="$T/full"
train "$dir" 10
cp "$dir/ckpt/step-000010.safetensors" "$T/before.safetensors"
size_kb=$(($(stat -c %s "$T/before.safetensors") / 1024))
err=$(trap '' XFSZ; ulimit -f $((size_kb / 2)); "$QKV" resume "$dir" --steps 30 2>&1 >/dev/null)
rc=$?
if [[ $rc -eq 1 && $(wc -l <<<"$err") -eq 1 ]] && grep -q "^qkv: $dir/ckpt/step-000020.safetensors.[0-9]*.tmp: write failed: File too large" <<<"$err" &&
    cmp -s "$dir/ckpt/step-000010.safetensors" "$T/before.safetensors" && [[ -z $(find "$dir" -name '*.tmp') ]] &&
    [[ ! -e $dir/ckpt/step-000020.safetensors ]]; then
    ok "disk_full_keeps_old_checkpoint_and_stops"
else
    bad "disk_full_keeps_old_checkpoint_and_stops" "exit $rc: $err"
fi
"$QKV" resume "$dir" --steps 30 >/dev/null 2>&1 && ok "resume_after_disk_full" || bad "resume_after_disk_full" "could not resume"
# the failed resume logged step 20 before its checkpoint failed; the next resume logs it
# again, and metrics.jsonl holds it once
steps=$(grep -o '^{"step": [0-9]*' "$dir/metrics.jsonl" | grep -o '[0-9]*$' | tr '\n' ' ')
[[ $steps == "10 20 30 " ]] && ok "metrics_hold_each_step_once_after_disk_full" || bad "metrics_hold_each_step_once_after_disk_full" "steps: $steps"
# the same without `trap '' XFSZ`: qkv itself ignores SIGXFSZ, so the write fails (EFBIG)
# with one line and exit 1 rather than the process dying (153) and leaving its tmp file
err=$(ulimit -f $((size_kb / 2)); timeout 120 "$QKV" resume "$dir" --steps 50 2>&1 >/dev/null)
rc=$?
if [[ $rc -eq 1 && $(wc -l <<<"$err") -eq 1 && $err == "qkv: $dir/ckpt/step-000040.safetensors."*".tmp: write failed: File too large"* ]] &&
    [[ -z $(find "$dir" -name '*.tmp') && -f $dir/ckpt/step-000030.safetensors && ! -e $dir/ckpt/step-000040.safetensors ]]; then
    ok "file_size_limit_without_trap_stops_with_one_line"
else
    bad "file_size_limit_without_trap_stops_with_one_line" "exit $rc: $err; $(find "$dir" -name '*.tmp')"
fi
# a metrics record that cannot be written (a file size limit, as a full disk) stops the
# run before another checkpoint, its cut line taken back: a resume then logs every step
# once. (It used to go on, say nothing until the end, and a checkpoint past the lost
# records left them lost; a disk that filled for a while joined two records in one line.)
# pad_near_kib FILE SLACK: a line padding FILE to SLACK bytes short of a whole KiB count K
# (2 past its size), K echoed: under `ulimit -f K` its next line of more than SLACK bytes fails
pad_near_kib() {
    local k=$(($(wc -c <"$1") / 1024 + 2))
    printf '{"pad": "%s"}\n' "$(printf 'x%.0s' $(seq $((k * 1024 - $2 - 12 - $(wc -c <"$1")))))" >>"$1" && echo $k
}
dir="$T/metricscut"
train "$dir" 10
m=$dir/metrics.jsonl
k=$(pad_near_kib "$m" 28) && cp "$m" "$T/metrics.before"
err=$(trap '' XFSZ; ulimit -f $k; timeout 120 "$QKV" resume "$dir" --steps 30 2>&1 >/dev/null)
rc=$?
if [[ $rc -eq 1 ]] && grep -qx "qkv: $m: write failed: File too large; stopped before another checkpoint: once it can be written, 'qkv resume $dir' goes on" <<<"$err" &&
    cmp -s "$m" "$T/metrics.before" && [[ ! -e $dir/ckpt/step-000020.safetensors && -z $(find "$dir" -name '*.tmp') ]]; then
    ok "metrics_write_failure_stops_before_a_checkpoint"
else
    bad "metrics_write_failure_stops_before_a_checkpoint" "exit $rc: $err; $(ls "$dir/ckpt"); $(tail -c 200 "$m")"
fi
timeout 120 "$QKV" resume "$dir" --steps 30 >/dev/null 2>&1
steps=$(grep -o '^{"step": [0-9]*' "$m" | grep -o '[0-9]*$' | tr '\n' ' ')
[[ $steps == "10 20 30 " ]] && ok "metrics_hold_each_step_once_after_a_failed_record" ||
    bad "metrics_hold_each_step_once_after_a_failed_record" "steps: $steps"
# a journal line cut short by a file size limit (K KiB, the old lines 10 bytes short of it)
# is taken back: journal.jsonl holds whole lines only, the failure said as a warning
dir="$T/journalcut"
train "$dir" 10
j=$dir/journal.jsonl
k=$(pad_near_kib "$j" 10) && cp "$j" "$T/journal.before"
err=$(trap '' XFSZ; ulimit -f $k; timeout 120 "$QKV" resume "$dir" --steps 20 2>&1 >/dev/null)
if cmp -s "$j" "$T/journal.before" && grep -q "^qkv: warning: $j: cannot append to it: File too large$" <<<"$err"; then
    ok "journal_cut_line_taken_back"
else
    bad "journal_cut_line_taken_back" "$(wc -c <"$j") bytes, was $(wc -c <"$T/journal.before"); $(grep journal <<<"$err" | head -1)"
fi

# ---- bad checkpoints through the command line -----------------------------------------------
ck="$T/straight/ckpt/step-000040.safetensors"
size=$(stat -c %s "$ck")
n_bad=0
for cut in 0 5 8 9 100 1000 $((size / 2)) $((size - 1)); do
    head -c $cut "$ck" >"$T/cut.safetensors"
    err=$("$QKV" info "$T/cut.safetensors" 2>&1 >/dev/null)
    [[ $? -eq 2 && $err == "qkv: $T/cut.safetensors: "* && $(wc -l <<<"$err") -eq 1 ]] || n_bad=$((n_bad + 1))
done
for at in 3 20 200 2000 $((size / 2)) $((size - 3)); do
    cp "$ck" "$T/flip.safetensors"
    printf '\x5a' | dd of="$T/flip.safetensors" bs=1 seek=$at conv=notrunc status=none
    cmp -s "$ck" "$T/flip.safetensors" && continue
    err=$("$QKV" info "$T/flip.safetensors" 2>&1 >/dev/null)
    [[ $? -eq 2 && $err == "qkv: $T/flip.safetensors: "* && $(wc -l <<<"$err") -eq 1 ]] || n_bad=$((n_bad + 1))
done
[[ $n_bad -eq 0 ]] && ok "info_rejects_truncated_and_flipped" || bad "info_rejects_truncated_and_flipped" "$n_bad accepted or crashed"
expect_error "info_rejects_a_config_file" 2 "^qkv: $T/r.yaml: " "$QKV" info "$T/r.yaml"
mkdir -p "$T/nockpt"
cp "$T/straight/config.yaml" "$T/straight/src.vocab" "$T/straight/tgt.vocab" "$T/nockpt/"
expect_error "resume_without_checkpoint" 2 "^qkv: $T/nockpt: no checkpoint yet: .* start it over with 'qkv train $T/nockpt/config.yaml --set run_dir=$T/nockpt'$" "$QKV" resume "$T/nockpt"
expect_error "translate_without_checkpoint" 2 "^qkv: $T/nockpt: no checkpoint" "$QKV" translate "$T/nockpt"
# a checkpoint of another config (wider model) dropped into this run
train "$T/wide" 10 --set model.d_model=64
mkdir -p "$T/nockpt/ckpt"
cp "$T/wide/ckpt/step-000010.safetensors" "$T/nockpt/ckpt/step-000099.safetensors"
expect_error "resume_rejects_other_config" 2 "^qkv: $T/nockpt/ckpt/step-000099.safetensors: trained with a different model.d_model" "$QKV" resume "$T/nockpt"
# a checkpoint of the same config over other data (other vocabulary)
"$QKV" toy-data "$T/other" --task copy --train 500 --valid 10 --test 10 >/dev/null
train "$T/othervocab" 10 --set data.train.src="$T/other/train.src" --set data.train.tgt="$T/other/train.tgt"
cp "$T/othervocab/ckpt/step-000010.safetensors" "$T/nockpt/ckpt/step-000099.safetensors"
expect_error "translate_rejects_other_vocabulary" 2 "^qkv: $T/nockpt/ckpt/step-000099.safetensors: its vocabularies differ" "$QKV" translate "$T/nockpt"

# ---- checkpoint names and the steps they hold -------------------------------------------------
# a checkpoint copied in under a later step's name: refused in one line naming it, and the
# run's real checkpoints stay (resuming from it would restart at its step, and rotation
# then deleted the newer real ones)
cp -r "$T/straight" "$T/renamed"
cp "$T/renamed/ckpt/step-000030.safetensors" "$T/renamed/ckpt/step-001000.safetensors"
expect_error "resume_refuses_a_checkpoint_named_for_another_step" 2 \
    "^qkv: $T/renamed/ckpt/step-001000.safetensors: holds step 30, not the step 1000 its name says" \
    "$QKV" resume "$T/renamed" --steps 70
expect_error "translate_refuses_a_checkpoint_named_for_another_step" 2 \
    "^qkv: $T/renamed/ckpt/step-001000.safetensors: holds step 30, not the step 1000 its name says" \
    "$QKV" translate "$T/renamed/ckpt/step-001000.safetensors" </dev/null
kept=$(cd "$T/renamed/ckpt" && ls step-*.safetensors | tr '\n' ' ')
[[ $kept == "step-000030.safetensors step-000040.safetensors step-000050.safetensors step-001000.safetensors " ]] &&
    ok "refused_renamed_checkpoint_leaves_the_run_alone" || bad "refused_renamed_checkpoint_leaves_the_run_alone" "$kept"
# one dropped in under a later name while the run trains: rotation neither counts it nor
# deletes it, so the newest train.keep_checkpoints real ones stay
dir="$T/dropped"
"$QKV" train "$T/r.yaml" --set run_dir="$dir" --set train.steps=200 >"$dir.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [[ -f $dir/ckpt/step-000010.safetensors ]] && break; sleep 0.02; done
cp "$T/straight/ckpt/step-000030.safetensors" "$dir/ckpt/step-009999.safetensors"
wait $pid
kept=$(cd "$dir/ckpt" && ls step-*.safetensors | tr '\n' ' ')
[[ $kept == "step-000180.safetensors step-000190.safetensors step-000200.safetensors step-009999.safetensors " ]] &&
    ok "rotation_keeps_real_checkpoints_past_a_renamed_one" || bad "rotation_keeps_real_checkpoints_past_a_renamed_one" "$kept; $(tail -1 "$dir.log")"
# a name without the zero padding qkv writes is the step it says: resumed from, by its name
cp -r "$T/straight" "$T/unpadded"
mv "$T/unpadded/ckpt/step-000050.safetensors" "$T/unpadded/ckpt/step-50.safetensors"
out=$(timeout 120 "$QKV" resume "$T/unpadded" --steps 60 2>&1)
rc=$?
[[ $rc -eq 0 ]] && grep -q "^resuming $T/unpadded from $T/unpadded/ckpt/step-50.safetensors (step 50 of 60)" <<<"$out" &&
    [[ -f $T/unpadded/ckpt/step-000060.safetensors ]] && ok "resume_from_an_unpadded_name" ||
    bad "resume_from_an_unpadded_name" "exit $rc: $(tail -2 <<<"$out")"
cp "$T/unpadded/ckpt/step-000060.safetensors" "$T/unpadded/ckpt/step-60.safetensors"
expect_error "two_names_for_the_latest_step_refused" 2 \
    "^qkv: $T/unpadded/ckpt: step-000060.safetensors and step-60.safetensors are both step 60: remove one$" \
    "$QKV" resume "$T/unpadded" --steps 70

# ---- one process per run: a live run is locked ------------------------------------------------
"$QKV" train "$T/r.yaml" --set run_dir="$T/live" --set train.steps=100000 >"$T/live.log" 2>&1 &
live=$!
for _ in $(seq 100); do grep -q "^step\|step [0-9]" "$T/live.log" 2>/dev/null && break; sleep 0.1; done
expect_error "live_run_refuses_a_second_train" 2 "^qkv: $T/live: in use by process $live " "$QKV" train "$T/r.yaml" --set run_dir="$T/live" --force
expect_error "live_run_refuses_resume" 2 "^qkv: $T/live: in use by process $live " "$QKV" resume "$T/live"
kill -INT $live
wait $live
"$QKV" resume "$T/live" --steps 1 >"$T/live.resume.log" 2>&1 && grep -q "already at step\|resuming" "$T/live.resume.log" &&
    ok "stopped_run_can_be_resumed" || bad "stopped_run_can_be_resumed" "$(tail -2 "$T/live.resume.log")"

# ---- a run killed before its first checkpoint: resume says what to do, train starts it over --
"$QKV" train "$T/r.yaml" --set run_dir="$T/early" --set train.steps=100000 --set train.checkpoint_every=100000 >"$T/early.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "^step " "$T/early.log" 2>/dev/null && break; sleep 0.1; done
kill -KILL $pid
wait $pid 2>/dev/null
expect_error "resume_before_first_checkpoint_says_what_to_do" 2 "^qkv: $T/early: no checkpoint yet: the run stopped before its first one; start it over with 'qkv train $T/early/config.yaml --set run_dir=$T/early'$" "$QKV" resume "$T/early"
"$QKV" train "$T/early/config.yaml" --set run_dir="$T/early" --set train.steps=5 >"$T/early2.log" 2>&1 &&
    grep -q "stopped before its first checkpoint; starting it over" "$T/early2.log" && [[ -f $T/early/ckpt/step-000005.safetensors ]] &&
    ok "train_starts_over_a_run_without_checkpoints" || bad "train_starts_over_a_run_without_checkpoints" "$(tail -2 "$T/early2.log")"

# ---- a train that fails before training leaves nothing that blocks the next one -----------
err=$("$QKV" train "$T/r.yaml" --set run_dir="$T/failed" --set data.min_freq=1000000 2>&1 >/dev/null)
rc=$?
[[ $rc -eq 2 && ! -e $T/failed ]] && ok "failed_train_leaves_no_run_directory" || bad "failed_train_leaves_no_run_directory" "exit $rc, $(ls "$T/failed" 2>&1): $err"

# a directory holding the user's own files of a run's names (a config.yaml to train from,
# notes), and no run: refused without --force; with it, a failed train removes only what
# it wrote, and calls it no stopped run
mkdir -p "$T/mine"
sed "s|^name: r$|name: r\nrun_dir: $T/mine|" "$T/r.yaml" >"$T/mine/config.yaml"
echo "my notes" >"$T/mine/curves.svg"
echo "my words" >"$T/mine/src.vocab"
cp "$T/mine/config.yaml" "$T/mine.config.before"
expect_error "train_refuses_own_files_without_force" 2 "^qkv: $T/mine: holds src.vocab and no run" \
    timeout 120 "$QKV" train "$T/mine/config.yaml"
out=$(timeout 120 "$QKV" train "$T/mine/config.yaml" --set data.min_freq=1000000 --force 2>&1)
rc=$?
left=$(cd "$T/mine" && ls | tr '\n' ' ')
[[ $rc -eq 2 && $left == "config.yaml curves.svg src.vocab " ]] && cmp -s "$T/mine/config.yaml" "$T/mine.config.before" &&
    grep -qx "my notes" "$T/mine/curves.svg" && grep -qx "my words" "$T/mine/src.vocab" && ! grep -q "stopped before" <<<"$out" &&
    grep -q "data.min_freq" <<<"$out" &&
    ok "failed_train_leaves_files_it_did_not_write" || bad "failed_train_leaves_files_it_did_not_write" "exit $rc, left: $left; $out"

# checkpoints without a config.yaml beside them are still a run's: not cleared without --force
cp -r "$T/straight" "$T/noconfig" && rm "$T/noconfig/config.yaml"
expect_error "train_refuses_checkpoints_without_config_yaml" 2 "^qkv: $T/noconfig: already holds a run" \
    "$QKV" train "$T/r.yaml" --set run_dir="$T/noconfig" --set train.steps=5
[[ -f $T/noconfig/ckpt/step-000050.safetensors ]] && ok "refused_train_keeps_the_checkpoints" ||
    bad "refused_train_keeps_the_checkpoints" "$(ls "$T/noconfig/ckpt")"
# a run pruned to its average (it still translates) is a run: not started over unasked
cp -r "$T/avg" "$T/avgonly" && rm -f "$T/avgonly/ckpt"/step-*.safetensors "$T/avgonly/ckpt/best.safetensors"
expect_error "train_refuses_a_run_pruned_to_its_average" 2 "^qkv: $T/avgonly: already holds a run" \
    "$QKV" train "$T/avgonly/config.yaml" --set run_dir="$T/avgonly" --set train.steps=5
expect_error "resume_of_a_run_pruned_to_its_average_says_why_not" 2 "^qkv: $T/avgonly: no step checkpoint in $T/avgonly/ckpt, only average.safetensors, which holds no optimizer state" \
    "$QKV" resume "$T/avgonly"
[[ -f $T/avgonly/ckpt/average.safetensors ]] && ok refused_train_keeps_the_average ||
    bad refused_train_keeps_the_average "$(ls "$T/avgonly/ckpt")"
# ... and one pruned to its best: resume says how to go on from it (train says "resume it"),
# and going on as it says works
cp -r "$T/straight" "$T/bestonly" && rm -f "$T/bestonly/ckpt"/step-*.safetensors
expect_error "resume_of_a_run_pruned_to_its_best_says_how" 2 "^qkv: $T/bestonly: no step checkpoint in $T/bestonly/ckpt, only best.safetensors \(step $best_step\): to go on from it, copy it to $T/bestonly/ckpt/step-$(printf '%06d' "$best_step").safetensors and resume$" \
    "$QKV" resume "$T/bestonly"
cp "$T/bestonly/ckpt/best.safetensors" "$T/bestonly/ckpt/step-$(printf '%06d' "$best_step").safetensors"
"$QKV" resume "$T/bestonly" --steps $((best_step + 5)) >"$T/bestonly.log" 2>&1 &&
    [[ -f $T/bestonly/ckpt/step-$(printf '%06d' $((best_step + 5))).safetensors ]] && ok "a_run_pruned_to_its_best_goes_on_as_told" ||
    bad "a_run_pruned_to_its_best_goes_on_as_told" "$(tail -2 "$T/bestonly.log")"

# ---- a run whose directory name needs quoting in YAML (quote, backslash, non-ASCII) -------
odd="$T/odd \"run\" \\ é"
"$QKV" train "$T/r.yaml" --set run_dir="$odd" --set train.steps=4 >"$T/odd.log" 2>&1 &&
    "$QKV" resume "$odd" --steps 6 >>"$T/odd.log" 2>&1 && "$QKV" translate "$odd" <"$T/data/test.src" >/dev/null 2>>"$T/odd.log" &&
    [[ -f $odd/ckpt/step-000006.safetensors ]] && ok "odd_run_dir_round_trip" || bad "odd_run_dir_round_trip" "$(tail -2 "$T/odd.log")"

# ---- the checkpoint holds the config in use, whatever happens to config.yaml meanwhile ------
"$QKV" train "$T/r.yaml" --set run_dir="$T/edited" --set train.steps=100000 --set train.checkpoint_every=100000 >"$T/edited.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "^step " "$T/edited.log" 2>/dev/null && break; sleep 0.1; done
echo "# edited while training" >"$T/edited/config.yaml"
kill -INT $pid
wait $pid
ck=$(ls "$T/edited"/ckpt/step-*.safetensors | tail -1)
"$QKV" info "$ck" 2>&1 | grep -q "^model: d_model 32, 4 heads, d_ff 64, 2+2 layers" &&
    ok "checkpoint_holds_the_config_in_memory" || bad "checkpoint_holds_the_config_in_memory" "$("$QKV" info "$ck" 2>&1 | grep -m1 model)"
grep -aq '"rng":"counter-based: dropout = hash(seed, step, site, index); batch order = hash(seed, epoch)"' "$ck" &&
    ok "rng_metadata_whole" || bad "rng_metadata_whole" "$(grep -ao '"rng":"[^"]*"' "$ck")"

# ---- a resume goes on with the checkpoint's config, whatever config.yaml says now ---------
# (but for where the data is, train.steps and train.threads: the data is moved here, and
# the goal raised in config.yaml rather than with --steps)
dir="$T/edited-keys"
cp -r "$T/data" "$T/data-a"
train "$dir" 20 --set data.train.src="$T/data-a/train.src" --set data.train.tgt="$T/data-a/train.tgt" \
    --set data.valid.src="$T/data-a/valid.src" --set data.valid.tgt="$T/data-a/valid.tgt"
mv "$T/data-a" "$T/data-b"
sed -i "s|$T/data-a/|$T/data-b/|; s/^seed: .*/seed: 7/; s/^  clip_norm: .*/  clip_norm: 0.25/; s/^  steps: .*/  steps: $N/" "$dir/config.yaml"
err=$(timeout 120 "$QKV" resume "$dir" 2>&1 >"$dir.resume.log")
rc=$?
[[ $rc -eq 0 && $err == "qkv: warning: $dir/config.yaml: seed and 1 other key differ from the config $dir/ckpt/step-000020.safetensors was trained with: a resume goes on with the checkpoint's, and config.yaml is rewritten to it (a new run takes new settings)" ]] &&
    ok "resume_says_which_edited_key_it_overrules" || bad "resume_says_which_edited_key_it_overrules" "exit $rc: $err"
same_tensors "$dir/ckpt/step-0000$N.safetensors" "$straight" && ok "resume_trains_with_the_checkpoints_seed_and_keys" ||
    bad "resume_trains_with_the_checkpoints_seed_and_keys" "weights or moments differ; $(tail -2 "$dir.resume.log")"
grep -q '^seed: 1$' "$dir/config.yaml" && grep -q '^  clip_norm: 1$' "$dir/config.yaml" && grep -q "^    src: \"$T/data-b/train.src\"$" "$dir/config.yaml" &&
    ok "config_yaml_rewritten_to_the_config_in_use" || bad "config_yaml_rewritten_to_the_config_in_use" "$(grep -E '^seed|clip_norm|train.src' "$dir/config.yaml")"

finish
