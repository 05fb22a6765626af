#!/usr/bin/env bash
# The training threads' start and stop, with threads the OS runs late: every command that
# starts the threads and then refuses, fails or has nothing to do must end, in one line
# where it fails, within seconds, with 2 and 4 threads. build/late_start.so (tests/shim/)
# delays the start of every new thread by 200 ms, which turned a now-and-then deadlock
# (a stop requested before a worker first ran) into an every-time one. Ends with
# "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch threads
use_late_start || { echo "FAIL set-up: no late_start.so beside $QKV_BIN (make builds it)"; echo "0 passed, 1 failed"; exit 1; }

"$QKV" toy-data "$T/data" --train 300 --valid 20 --test 20 >/dev/null
cp -r "$T/data" "$T/moved"
tiny_config "$T/c.yaml" r "$T/data" "steps: 6, log_every: 3, valid_every: 3, checkpoint_every: 3"
tiny_config "$T/m.yaml" m "$T/moved" "steps: 6, log_every: 3, valid_every: 3, checkpoint_every: 3"
# finished runs to resume, trained with the threads they resume with (no warning line)
for n in 2 4; do
    "$QKV" train "$T/c.yaml" --set run_dir="$T/done$n" --set train.threads=$n >"$T/done.log" 2>&1 &&
        "$QKV" train "$T/m.yaml" --set run_dir="$T/moved-run$n" --set train.threads=$n >>"$T/done.log" 2>&1 ||
        { echo "FAIL set-up: $(tail -3 "$T/done.log")"; echo "0 passed, 1 failed"; exit 1; }
done
"$QKV" export "$T/done2" --out "$T/weights.safetensors" >>"$T/done.log" 2>&1 ||
    { echo "FAIL set-up: $(tail -3 "$T/done.log")"; echo "0 passed, 1 failed"; exit 1; }
long_watch="train.watch=$(printf 'the red cat %.0s' {1..8})" # 24 tokens, more than max_len 3 allows

# late NAME THREADS WANT_EXIT REGEX command...: under the shim, the command ends within
# 20 s with WANT_EXIT, and (REGEX not empty) exactly one stderr line matching REGEX
late() {
    local name="$1 ($2 threads)" want=$3 pattern=$4 start=$SECONDS err rc
    shift 4
    err=$(LD_PRELOAD=$LATE_START QKV_TIMEOUT=20 "$@" 2>&1 >/dev/null)
    rc=$?
    local took=$((SECONDS - start))
    if [[ $rc -eq 137 ]]; then bad "$name" "hung: $err"; return; fi
    if [[ $rc -ne $want ]]; then bad "$name" "exit $rc, expected $want, after ${took}s: $err"; return; fi
    if [[ -n $pattern ]] && { [[ $(printf '%s\n' "$err" | wc -l) -ne 1 ]] || ! grep -qE -- "$pattern" <<<"$err"; }; then
        bad "$name" "expected one line matching '$pattern': $err"
        return
    fi
    ok "$name, ${took}s"
}

for n in 2 4; do
    late "watch_sentence_too_long_refused" $n 2 "^qkv: train.watch: sentence 1 is longer than" \
        "$QKV" train "$T/c.yaml" --set run_dir="$T/w$n" --set train.threads=$n --set data.max_len=3 --set "$long_watch"
    # a run refused before training leaves nothing that would block the next train
    [[ ! -e $T/w$n ]] && ok "watch_refusal_leaves_no_run ($n threads)" || bad "watch_refusal_leaves_no_run ($n threads)" "$(ls "$T/w$n")"
    late "bench_batches_only_ends" $n 0 "" "$QKV" bench "$T/c.yaml" --set train.threads=$n --batches-only \
        --warmup 1 --steps 2 --decode 2 --dump "$T/job$n.json"
    late "bench_dump_nowhere_refused" $n 2 "^qkv: /sys/x.json" "$QKV" bench "$T/c.yaml" --set train.threads=$n \
        --batches-only --warmup 1 --steps 2 --decode 2 --dump /sys/x.json
    late "resume_of_finished_run_ends" $n 0 "" "$QKV" resume "$T/done$n" --threads $n
    cp -r "$T/done$n" "$T/damaged$n"
    printf '\xff\xff\xff\xff' | dd of="$T/damaged$n/ckpt/step-000006.safetensors" bs=1 seek=2000 conv=notrunc 2>/dev/null
    late "resume_of_damaged_checkpoint_refused" $n 2 "^qkv: .*step-000006.safetensors: " \
        "$QKV" resume "$T/damaged$n" --steps 9 --threads $n
    cp -r "$T/done$n" "$T/weights$n"
    cp "$T/weights.safetensors" "$T/weights$n/ckpt/step-000006.safetensors"
    late "resume_of_weights_only_file_refused" $n 2 "^qkv: .*step-000006.safetensors: " \
        "$QKV" resume "$T/weights$n" --steps 9 --threads $n
    cp -r "$T/moved-run$n" "$T/changed$n"
    sed -i 1d "$T/moved/train.src" && sed -i 1d "$T/moved/train.tgt"
    late "resume_on_changed_data_refused" $n 2 "training data differs" "$QKV" resume "$T/changed$n" --steps 9 --threads $n
    cp -r "$T/done$n" "$T/nometrics$n"
    rm "$T/nometrics$n/metrics.jsonl" && mkdir "$T/nometrics$n/metrics.jsonl"
    late "resume_without_metrics_file_refused" $n 2 "metrics.jsonl: a directory" "$QKV" resume "$T/nometrics$n" --steps 9 --threads $n
    mkdir -p "$T/fresh$n/metrics.jsonl" # --force: past the refusal of a folder with a run's names, to this one
    late "train_without_metrics_file_refused" $n 2 "metrics.jsonl: a directory" \
        "$QKV" train "$T/c.yaml" --set run_dir="$T/fresh$n" --set train.threads=$n --force
    # and a run that does train, from start to end, with every thread late
    late "train_with_late_threads_finishes" $n 0 "" "$QKV" train "$T/c.yaml" --set run_dir="$T/full$n" --set train.threads=$n
done
finish
