#!/usr/bin/env bash
# SIGINT and SIGTERM at random instants in the first 300 ms of a run, QKV_SIGNAL_RUNS
# times each (default 25: each make test draws new instants; QKV_SIGNAL_RUNS=200 for a
# longer storm) with 2 and 4 threads, every other run with threads started late
# by up to 100 ms (tests/shim): each run ends, with exit 0 (stopped after a step, with a
# checkpoint, or done) or, when the signal came before training began, the signal's own
# status (130, 143), at most "qkv: stopped by SIG..." on stderr, and nothing that blocks
# the next `qkv train`; every checkpoint
# written loads, and no tmp file is left. The same under mpirun, 2 ranks (SIGUSR1 is the
# stop there, its instants counted from when both ranks catch it; SIGINT/SIGTERM end the
# job). Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch signals
runs=${QKV_SIGNAL_RUNS:-25}
use_late_start || { echo "FAIL set-up: no late_start.so beside $QKV_BIN (make builds it)"; echo "0 passed, 1 failed"; exit 1; }

"$QKV" toy-data "$T/data" --train 300 --valid 20 --test 20 >/dev/null
tiny_config "$T/c.yaml" r "$T/data" "steps: 100000, log_every: 10, valid_every: 1000, checkpoint_every: 1000"

# signal_soon PID SIG [MS]: SIG to PID at a random instant in the first MS (300) ms of the
# program it runs; its exit status. The instants start once PID is that program, not the
# wrappers (env, tests/qkv, tests/bounded) that exec it: a signal to a wrapper's bash
# before its exec is that shell's, and lost to the program.
signal_soon() {
    local exe
    for _ in $(seq 200); do
        exe=$(readlink "/proc/$1/exe" 2>/dev/null) || break
        [[ $exe == */bash || $exe == */env ]] || break
        sleep 0.005
    done
    local ms=$((RANDOM * 32768 + RANDOM))
    ms=$((ms % ${3:-300}))
    sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
    kill -"$2" "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

# check_run DIR: every checkpoint loads and no tmp file is left; prints what is wrong
check_run() {
    local f
    for f in "$1"/ckpt/*.safetensors; do
        [[ -e $f ]] || continue
        "$QKV" info "$f" >/dev/null 2>&1 || echo "$f does not load"
    done
    find "$1" -name '*.tmp' | sed 's/$/ left behind/'
}

# storm SIG THREADS: $runs runs of `qkv train`, each signalled at a random instant
storm() {
    local sig=$1 n=$2 num fails=0 stopped=0 early=0 first="" i dir rc why
    num=$(kill -l "$sig")
    for ((i = 0; i < runs; i++)); do
        dir="$T/$sig-$n-$i"
        # a background job of a script starts with SIGINT ignored; a user's command does not
        if ((i % 2)); then
            LD_PRELOAD=$LATE_START QKV_LATE_START_MS=100 QKV_LATE_START_RANDOM=1 QKV_TIMEOUT=60 env --default-signal=INT \
                "$QKV" train "$T/c.yaml" --set run_dir="$dir" --set train.threads=$n >"$dir.out" 2>"$dir.err" &
        else
            QKV_TIMEOUT=60 env --default-signal=INT \
                "$QKV" train "$T/c.yaml" --set run_dir="$dir" --set train.threads=$n >"$dir.out" 2>"$dir.err" &
        fi
        signal_soon $! "$sig"
        rc=$?
        why=""
        if [[ $rc -eq 0 ]]; then
            grep -q "^stopped by signal $num after step [0-9]*; checkpoint " "$dir.out" || why="exit 0 without the stop line"
            stopped=$((stopped + 1))
        elif [[ $rc -eq $((128 + num)) ]]; then
            early=$((early + 1))
            # at most the one line that says so (none when it came before qkv could catch it)
            [[ -s $dir.err && $(cat "$dir.err") != "qkv: stopped by SIG$sig" ]] &&
                why="killed early, but said: $(head -2 "$dir.err")"
            # what it left must not block the next train in that directory
            [[ -z $why ]] && ! QKV_TIMEOUT=60 "$QKV" train "$T/c.yaml" --set run_dir="$dir" --set train.steps=2 \
                >/dev/null 2>"$dir.again" && why="the next train there failed: $(head -1 "$dir.again")"
        else
            why="exit $rc: $(head -2 "$dir.err")"
        fi
        [[ -z $why ]] && why=$(check_run "$dir" | head -2)
        if [[ -n $why ]]; then
            fails=$((fails + 1))
            [[ -n $first ]] || first="run $i: $why"
        fi
        [[ -n ${QKV_KEEP_TMP:-} ]] || rm -rf "$dir" "$dir".*
    done
    [[ $fails -eq 0 ]] && ok "sig${sig,,}_at_random_instants_${n}_threads ($stopped stopped with a checkpoint, $early before training)" ||
        bad "sig${sig,,}_at_random_instants_${n}_threads" "$fails of $runs runs; $first"
}

for n in 2 4; do
    storm INT $n
    storm TERM $n
done

# ---- SIGHUP (a terminal closed) stops with a checkpoint, as SIGINT does; a log reader that
# goes away (`| head`, a tee killed by the same Ctrl-C) takes the log, not the run ------------
dir=$T/hup
QKV_TIMEOUT=60 "$QKV" train "$T/c.yaml" --set run_dir="$dir" >"$dir.out" 2>"$dir.err" &
pid=$!
if wait_for "$dir.out" "^step 40/" 60; then
    kill -HUP $pid
    wait $pid
    rc=$?
    step=$(sed -n 's/^stopped by signal 1 after step \([0-9]*\); checkpoint .*/\1/p' "$dir.out")
    [[ $rc -eq 0 && -n $step && -f $dir/ckpt/step-$(printf '%06d' "$step").safetensors && -z $(check_run "$dir") ]] &&
        ok "sighup_stops_with_a_checkpoint (step $step)" ||
        bad "sighup_stops_with_a_checkpoint" "exit $rc: $(tail -2 "$dir.out") $(head -2 "$dir.err")"
else
    kill $pid 2>/dev/null
    bad "sighup_stops_with_a_checkpoint" "no step 40: $(tail -2 "$dir.out")"
fi
dir=$T/piped
QKV_TIMEOUT=120 "$QKV" train "$T/c.yaml" --set run_dir="$dir" --set train.steps=300 2>"$dir.err" | head -1 >"$dir.first"
rc=${PIPESTATUS[0]}
[[ $rc -eq 0 && -f $dir/ckpt/step-000300.safetensors && ! -s $dir.err && -s $dir.first ]] &&
    ok "train_into_a_closed_pipe_trains_to_its_end" ||
    bad "train_into_a_closed_pipe_trains_to_its_end" "exit $rc: $(head -2 "$dir.err"); $(ls "$dir/ckpt" 2>&1 | tail -2)"

# qkv bench --dump writes its batches file as it times the steps and publishes it at the
# end: a stop in between (the shell's Ctrl-C, a kill) ends the command with the signal's
# status and takes the half-written file with it, where a kill left F.batches.jsonl.PID.tmp
for sig in INT TERM; do
    dir=$T/bench-$sig
    mkdir -p "$dir"
    QKV_TIMEOUT=60 env --default-signal=INT "$QKV" bench "$T/c.yaml" --steps 100000 --decode 0 --ceiling 100 \
        --dump "$dir/F.json" >"$dir.out" 2>"$dir.err" &
    pid=$!
    for _ in $(seq 200); do compgen -G "$dir/F.json.batches.jsonl.*.tmp" >/dev/null && break; sleep 0.05; done
    made=$(compgen -G "$dir/F.json.batches.jsonl.*.tmp")
    sleep 0.3
    kill -"$sig" $pid
    wait $pid
    rc=$?
    left=$(ls -A "$dir")
    [[ -n $made && $rc -eq $((128 + $(kill -l $sig))) && -z $left && $(cat "$dir.err") == "qkv: stopped by SIG$sig" ]] &&
        ok "bench_stopped_by_sig${sig,,}_leaves_no_tmp" ||
        bad "bench_stopped_by_sig${sig,,}_leaves_no_tmp" "exit $rc; tmp seen: '${made}'; left: '${left}'; $(head -2 "$dir.err")"
done

# miss WHY: one run of a loop below gone wrong, counted; the first one's WHY is kept
miss() {
    fails=$((fails + 1))
    [[ -n $first ]] || first=$1
}
# ... and publishes its dump's set (batches, weights, the dump naming them) together at the
# very end: stopped at any instant of its run (timed once whole first), a run leaves all
# three or none, and no tmp file
bench_set=(bench "$T/c.yaml" --steps 20 --decode 300 --ceiling 100 --set data.valid.src="$T/data/train.src"
    --set data.valid.tgt="$T/data/train.tgt")
mkdir -p "$T/bench-whole"
start=$(date +%s%N)
"$QKV" "${bench_set[@]}" --dump "$T/bench-whole/F.json" >/dev/null 2>&1
whole_ms=$((($(date +%s%N) - start) / 1000000 + 50))
fails=0 first="" whole=0
for ((i = 0; i < runs; i++)); do
    dir=$T/bench-set-$i
    mkdir -p "$dir"
    QKV_TIMEOUT=60 env --default-signal=INT "$QKV" "${bench_set[@]}" --dump "$dir/F.json" >/dev/null 2>"$dir.err" &
    signal_soon $! INT $whole_ms
    rc=$?
    left=$(ls -A "$dir" | tr '\n' ' ')
    [[ -n $left ]] && whole=$((whole + 1))
    [[ ($left != "" && $left != "F.json F.json.batches.jsonl F.json.safetensors ") || ($rc -ne 0 && $rc -ne 130) ]] &&
        miss "run $i: exit $rc, left '$left'"
    rm -rf "$dir" "$dir.err"
done 2>/dev/null
[[ $fails -eq 0 ]] && ok "bench_stopped_leaves_its_dump_whole_or_none ($runs runs over ${whole_ms} ms, $whole with the set)" ||
    bad "bench_stopped_leaves_its_dump_whole_or_none" "$fails of $runs runs; $first"

# qkv toy-data writes its nine files as one set: stopped at any instant over a corpus of
# another seed, the folder holds the old set or the new, whole, and nothing half-made
"$QKV" toy-data "$T/td-new" >/dev/null && "$QKV" toy-data "$T/td-old" --seed 2 >/dev/null
sum_of() { (cd "$1" && cat {train,valid,test}.{src,tgt,align} 2>/dev/null | sha256sum | cut -c1-16); }
new_sum=$(sum_of "$T/td-new") old_sum=$(sum_of "$T/td-old") fails=0 first="" stopped=0
for ((i = 0; i < runs; i++)); do
    dir=$T/td-$i
    cp -r "$T/td-old" "$dir"
    [[ $((i % 2)) -eq 0 ]] && sig=INT || sig=TERM
    QKV_TIMEOUT=60 env --default-signal=INT "$QKV" toy-data "$dir" >/dev/null 2>"$dir.err" &
    signal_soon $! $sig
    rc=$?
    got=$(sum_of "$dir")
    [[ $rc -ne 0 ]] && stopped=$((stopped + 1))
    extra=$(ls -A "$T" | grep -F "td-$i.partial" ; ls -A "$dir" | grep -vxE '(train|valid|test)\.(src|tgt|align)')
    [[ ($got != "$new_sum" && $got != "$old_sum") || -n $extra || ($rc -ne 0 && $rc -ne 130 && $rc -ne 143) ]] &&
        miss "run $i ($sig): exit $rc, set $got, extra '$extra'"
    rm -rf "$dir" "$dir.err"
done 2>/dev/null
[[ $fails -eq 0 ]] && ok "toy_data_stopped_leaves_one_whole_set ($runs runs, $stopped stopped)" ||
    bad "toy_data_stopped_leaves_one_whole_set" "$fails of $runs runs; $first"

# ---- under mpirun --------------------------------------------------------------------------
if ! ldd "$QKV_BIN" 2>/dev/null | grep -q libmpi || ! command -v mpirun >/dev/null; then
    skip_missing mpi_signals "qkv without MPI, or no mpirun"
    finish
    exit
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI's own allocations outlive MPI_Finalize: under make sanitize, LeakSanitizer would
# fail every rank's exit for them (as in tests/mpi.sh)
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
mpi_runs=${QKV_MPI_SIGNAL_RUNS:-5}
# ranks_catch_usr1 PID: waits (at most 20 s) until the 2 qkv ranks under the launcher PID
# catch SIGUSR1 (its bit in /proc/*/status SigCgt), or until the launcher has ended.
# Before that a rank is a wrapper (a shell, the loader) and SIGUSR1 kills it; a rank killed
# while MPI starts can leave Open MPI's mpirun waiting for ever, which is not qkv's to
# test. qkv catches SIGUSR1 before it joins the ranks.
ranks_catch_usr1() {
    local k exe cgt catching
    for _ in $(seq 4000); do
        kill -0 "$1" 2>/dev/null || return
        catching=0
        for k in $(pgrep -P "$1"); do
            exe=$(readlink "/proc/$k/exe" 2>/dev/null) || continue
            [[ $exe == */qkv ]] || continue
            cgt=$(awk '/^SigCgt:/{print $2}' "/proc/$k/status" 2>/dev/null) || continue
            ((0x${cgt:-0} & 0x200)) && catching=$((catching + 1))
        done
        [[ $catching -ge 2 ]] && return
        sleep 0.005
    done
}

# mpi_storm SIG: SIGUSR1 stops every rank with a checkpoint (exit 0); SIGINT and SIGTERM
# end the job (not 0); either way the job ends and what it wrote loads
mpi_storm() {
    local sig=$1 fails=0 first="" i dir rc why
    for ((i = 0; i < mpi_runs; i++)); do
        dir="$T/mpi-$sig-$i"
        QKV_TIMEOUT=60 env --default-signal=INT "$BOUNDED" mpirun -q -np 2 "$QKV" train "$T/c.yaml" --set run_dir="$dir" \
            --set train.threads=2 --set train.steps=150 >"$dir.out" 2>"$dir.err" &
        # SIGUSR1's instants start once both ranks are qkv catching it (from before MPI starts)
        [[ $sig == USR1 ]] && ranks_catch_usr1 $!
        signal_soon $! "$sig"
        rc=$?
        why=""
        if [[ $rc -eq 137 ]]; then why="hung: $(tail -1 "$dir.err")"
        elif [[ $sig == USR1 && $rc -ne 0 ]] && grep -q "^step " "$dir.out"; then why="exit $rc after training began"
        fi
        [[ -z $why ]] && why=$(check_run "$dir" | grep -v '\.tmp left behind' | head -2)
        if [[ -n $why ]]; then
            fails=$((fails + 1))
            [[ -n $first ]] || first="run $i: $why"
        fi
        [[ -n ${QKV_KEEP_TMP:-} ]] || rm -rf "$dir" "$dir".*
    done 2>/dev/null
    [[ $fails -eq 0 ]] && ok "mpirun_sig${sig,,}_at_random_instants" || bad "mpirun_sig${sig,,}_at_random_instants" "$fails of $mpi_runs runs; $first"
}
for sig in USR1 INT TERM; do mpi_storm $sig; done
finish
