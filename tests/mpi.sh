#!/usr/bin/env bash
# Training over MPI ranks end to end: 2 ranks x 1 thread give the bytes of 1 process x 2
# threads (weights and Adam moments, dropout on); resumes under mpirun, and across rank
# counts with the same shard count, are byte-identical; a killed rank ends the job with
# one line and leaves checkpoints that resume; SIGUSR1 stops all ranks with a
# checkpoint; ranks started with different configs are refused. A build without MPI is
# checked to refuse to run as one of several ranks. Skipped, loudly, without mpirun or
# without MPI in the build. Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch mpi

# The launcher's root check and its one-slot-per-core rule would stop the tests on a
# small machine run as root; these variables are Open MPI's (the Debian package).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# the sanitizer build: the MPI library leaves allocations at exit, in plugins it has
# unloaded by then (no suppression can name them); qkv's own are checked by the other suites
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

"$QKV" toy-data "$T/data" --train 1500 --valid 100 --test 50 >/dev/null
tiny_config "$T/r.yaml" r "$T/data" 'batch_tokens: 1024, log_every: 10, valid_every: 20, checkpoint_every: 10, keep_checkpoints: 20'

if ! ldd "$QKV_BIN" 2>/dev/null | grep -q libmpi; then
    # as if an MPI launcher had started two processes: each refuses; rank 0 says why
    expect_error "no_mpi_build_refuses_to_run_as_a_rank" 2 "^qkv: started as one of 2 MPI processes, but this qkv was built without MPI" \
        env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$QKV" train "$T/r.yaml" --set run_dir="$T/x"
    skip_missing mpi "$QKV_BIN is built without MPI (install libopenmpi-dev, then make MPI=1): MPI training was NOT tested"
    finish
    exit
fi
if ! command -v mpirun >/dev/null; then
    skip_missing mpi "mpirun is not installed (scripts/deps.sh --with-mpi): MPI training was NOT tested"
    finish
    exit
fi

train() { # train RUN_DIR STEPS THREADS [more --set ...]: one process
    local dir=$1 steps=$2 threads=$3
    shift 3
    "$QKV" train "$T/r.yaml" --set run_dir="$dir" --set train.steps="$steps" --set train.threads="$threads" "$@" >"$dir.log" 2>&1
}
mpi_train() { # mpi_train RANKS RUN_DIR STEPS THREADS [more --set ...]
    local np=$1 dir=$2 steps=$3 threads=$4
    shift 4
    "$BOUNDED" mpirun -q -np "$np" "$QKV" train "$T/r.yaml" --set run_dir="$dir" --set train.steps="$steps" --set train.threads="$threads" "$@" >"$dir.log" 2>&1
}
step_file() { printf '%s/ckpt/step-%06d.safetensors' "$1" "$2"; }

# ---- the same shards, the same bits --------------------------------------------------------
N=60
train "$T/one" $N 2
mpi_train 2 "$T/two" $N 1
rc=$?
[[ -f $(step_file "$T/one" $N) ]] || { echo "set-up failed: $(tail -3 "$T/one.log")"; exit 1; }
if [[ $rc -eq 0 ]] && same_tensors "$(step_file "$T/one" $N)" "$(step_file "$T/two" $N)"; then
    ok "two_ranks_x1_equal_one_process_x2"
else
    bad "two_ranks_x1_equal_one_process_x2" "exit $rc; $(tail -2 "$T/two.log")"
fi
losses() { grep -o '"loss": [0-9.]*\|"valid_loss": [0-9.]*' "$1/metrics.jsonl"; }
[[ -n $(losses "$T/one") && $(losses "$T/one") == "$(losses "$T/two")" ]] && ok "same_losses_in_metrics" ||
    bad "same_losses_in_metrics" "$(diff <(losses "$T/one") <(losses "$T/two") | head -3)"
[[ $(grep -c '^done: step' "$T/two.log") -eq 1 && $(grep -c '^model: ' "$T/two.log") -eq 1 ]] &&
    grep -q '^mpi: 2 ranks x 1 threads' "$T/two.log" && ok "rank_0_alone_reports" ||
    bad "rank_0_alone_reports" "$(grep -c '^done: step' "$T/two.log") done lines"
train "$T/four" 30 4
mpi_train 2 "$T/twobytwo" 30 2
same_tensors "$(step_file "$T/four" 30)" "$(step_file "$T/twobytwo" 30)" && ok "two_ranks_x2_equal_one_process_x4" ||
    bad "two_ranks_x2_equal_one_process_x4" "$(tail -2 "$T/twobytwo.log")"

# ---- resume: under mpirun, and with another rank count but the same shards -----------------
K=25
resume_case() { # NAME HOW_TRAIN HOW_RESUME: K steps one way, then to N the other
    local name=$1 dir=$T/$1
    if [[ $2 == mpi ]]; then mpi_train 2 "$dir" $K 1; else train "$dir" $K 2; fi
    if [[ $3 == mpi ]]; then
        "$BOUNDED" mpirun -q -np 2 "$QKV" resume "$dir" --steps $N --threads 1 >"$dir.resume.log" 2>&1
    else
        "$QKV" resume "$dir" --steps $N --threads 2 >"$dir.resume.log" 2>&1
    fi
    if same_tensors "$(step_file "$dir" $N)" "$(step_file "$T/one" $N)" && ! grep -q warning "$dir.resume.log"; then
        ok "$name"
    else
        bad "$name" "differs after $K + $((N - K)) steps; $(tail -2 "$dir.resume.log")"
    fi
}
resume_case "resume_under_mpirun_is_byte_identical" mpi mpi
resume_case "one_process_run_resumed_by_two_ranks" one mpi
resume_case "two_rank_run_resumed_by_one_process" mpi one

# ---- SIGUSR1 to mpirun: every rank stops after the same step, rank 0 checkpoints ------------
dir="$T/usr1"
"$BOUNDED" mpirun -q -np 2 "$QKV" train "$T/r.yaml" --set run_dir="$dir" --set train.steps=100000 --set train.threads=1 \
    --set train.checkpoint_every=100000 >"$dir.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do grep -q "^step 20/" "$dir.log" 2>/dev/null && break; sleep 0.05; done
kill -USR1 $launcher
wait $launcher
rc=$?
stopped=$(sed -n 's/^stopped by signal [0-9]* after step \([0-9]*\);.*/\1/p' "$dir.log")
if [[ $rc -eq 0 && -n $stopped && -f $(step_file "$dir" "$stopped") ]] && grep -q "^resume with: mpirun -np 2 qkv resume $dir$" "$dir.log"; then
    ok "sigusr1_stops_every_rank_with_a_checkpoint"
    target=$((stopped + 10))
    "$BOUNDED" mpirun -q -np 2 "$QKV" resume "$dir" --steps $target >"$dir.resume.log" 2>&1
    train "$T/usr1ref" $target 2
    same_tensors "$(step_file "$dir" $target)" "$(step_file "$T/usr1ref" $target)" && ok "resume_after_sigusr1_is_byte_identical" ||
        bad "resume_after_sigusr1_is_byte_identical" "$(tail -2 "$dir.resume.log")"
else
    bad "sigusr1_stops_every_rank_with_a_checkpoint" "exit $rc; $(tail -2 "$dir.log")"
fi

# ---- train.minutes under mpirun: rank 0's clock ends every rank at the same step, done -----
dir="$T/budget"
"$BOUNDED" mpirun -q -np 2 "$QKV" train "$T/r.yaml" --set run_dir="$dir" --set train.steps=100000 --set train.threads=1 \
    --set train.minutes=0.03 >"$dir.log" 2>&1
rc=$?
k=$(sed -n 's/^done: step \([0-9]*\) of at most 100000, train.minutes (0.03) spent, in .*/\1/p' "$dir.log")
[[ $rc -eq 0 && -n $k && -f $(step_file "$dir" "$k") ]] && ok "train_minutes_ends_every_rank_at_one_step ($k steps)" ||
    bad "train_minutes_ends_every_rank_at_one_step" "exit $rc; $(tail -2 "$dir.log")"
# the cooldown the clock begins: rank 0's clock, every rank's last step (one that ended
# elsewhere would leave the others waiting for it until the bound)
dir="$T/cooldown"
"$BOUNDED" mpirun -q -np 2 "$QKV" train "$T/r.yaml" --set run_dir="$dir" --set train.steps=100000 --set train.threads=1 \
    --set train.minutes=0.05 --set train.lr.cooldown=0.5 >"$dir.log" 2>&1
rc=$?
k=$(sed -n 's/^done: step \([0-9]*\)[ ,].*/\1/p' "$dir.log")
[[ $rc -eq 0 && -n $k && -f $(step_file "$dir" "$k") ]] && grep -q "^cooldown: begun after step [0-9]*, at" "$dir.log" &&
    ok "train_cooldown_by_time_ends_every_rank_at_one_step ($k steps)" ||
    bad "train_cooldown_by_time_ends_every_rank_at_one_step" "exit $rc; $(tail -2 "$dir.log")"

# ---- a rank killed: one line, no half-written checkpoint, the last one resumes ---------------
M=150
dir="$T/killed"
train "$T/killref" $M 2
"$BOUNDED" mpirun -q -np 2 "$QKV" train "$T/r.yaml" --set run_dir="$dir" --set train.steps=$M --set train.threads=1 \
    --set train.checkpoint_every=5 >"$dir.out" 2>"$dir.err" &
launcher=$!
for _ in $(seq 600); do [[ -f $(step_file "$dir" 30) ]] && break; sleep 0.05; done
victim=""
for p in $(pgrep -P $launcher); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && victim=$p
done
[[ -n $victim ]] && kill -KILL "$victim"
wait $launcher
rc=$?
# qkv's one line; the MPI library itself may add a diagnostic of the broken transfer
# ("[host:pid] Read -1, ..."), which is not qkv's to silence
n_lines=$(grep -vc '^\[[^]]*:[0-9]*\] ' "$dir.err")
if [[ -n $victim && $rc -ne 0 && $n_lines -eq 1 ]] && grep -q "^qkv: stopped by the MPI launcher (a rank died, or the job was interrupted); to go on from the last checkpoint: mpirun -np 2 qkv resume $dir$" "$dir.err"; then
    ok "killed_rank_ends_the_job_in_one_line"
else
    bad "killed_rank_ends_the_job_in_one_line" "victim '$victim', exit $rc, stderr: $(head -3 "$dir.err")"
fi
n_bad=0
for f in "$dir"/ckpt/step-*.safetensors; do "$QKV" info "$f" >/dev/null 2>&1 || n_bad=$((n_bad + 1)); done
[[ $n_bad -eq 0 && -n $(ls "$dir"/ckpt/step-*.safetensors 2>/dev/null) ]] && ok "killed_rank_leaves_whole_checkpoints" ||
    bad "killed_rank_leaves_whole_checkpoints" "$n_bad checkpoints do not load"
"$BOUNDED" mpirun -q -np 2 "$QKV" resume "$dir" >"$dir.resume.log" 2>&1
same_tensors "$(step_file "$dir" $M)" "$(step_file "$T/killref" $M)" && [[ -z $(find "$dir" -name '*.tmp') ]] &&
    ok "resume_after_killed_rank_is_byte_identical" || bad "resume_after_killed_rank_is_byte_identical" "$(tail -2 "$dir.resume.log")"

# ---- threads the OS starts late (tests/shim): a resume with nothing to do, and one of a
# damaged checkpoint, still end under mpirun, 2 ranks x 2 threads
use_late_start
for what in finished damaged; do
    cp -r "$dir" "$T/late-$what"
    [[ $what == damaged ]] &&
        printf '\xff\xff\xff\xff' | dd of="$(step_file "$T/late-$what" $M)" bs=1 seek=2000 conv=notrunc 2>/dev/null
    start=$SECONDS
    LD_PRELOAD=$LATE_START QKV_TIMEOUT=60 "$BOUNDED" mpirun -q -np 2 -x LD_PRELOAD "$QKV" resume "$T/late-$what" --steps $M \
        --threads 2 >"$T/late-$what.log" 2>&1
    rc=$?
    want=$([[ $what == damaged ]] && echo 2 || echo 0)
    [[ $rc -eq $want ]] && ok "resume_of_${what}_run_under_mpirun_with_late_threads_ends ($((SECONDS - start))s)" ||
        bad "resume_of_${what}_run_under_mpirun_with_late_threads_ends" "exit $rc, expected $want: $(tail -2 "$T/late-$what.log")"
done

# ---- every rank must run the same config ---------------------------------------------------------
expect_error "ranks_with_other_configs_are_refused" 2 "^qkv: rank 1 was started with another config than rank 0" \
    "$BOUNDED" mpirun -q -np 1 "$QKV" train "$T/r.yaml" --set run_dir="$T/mixed" --set train.threads=1 : \
    -np 1 "$QKV" train "$T/r.yaml" --set run_dir="$T/mixed" --set train.threads=1 --set train.lr.factor=2
expect_error "bad_config_said_once_by_rank_0" 2 "^qkv: .*unknown key" \
    "$BOUNDED" mpirun -q -np 2 "$QKV" train "$T/r.yaml" --set train.stepz=5
[[ ! -e $T/mixed/ckpt ]] && ok "refused_job_wrote_no_run" || bad "refused_job_wrote_no_run" "$(ls "$T/mixed")"

finish
