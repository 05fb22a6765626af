#!/usr/bin/env bash
# The multithreaded tests under ThreadSanitizer (make tsan): training steps with 2-4
# threads, in passes, with train.watch and train.valid_bleu, resumes, SIGINT and SIGTERM
# stops, every refusal after the threads start, with threads started late; qkv heads on
# its worker threads; qkv serve under concurrent clients, bad ones and SIGTERM. Any report
# on qkv's own code fails the run: each is printed, and counted as a failure.
#
# OpenBLAS is not instrumented. Its pool of threads would look to TSan like memory shared
# without synchronisation, so it runs with OPENBLAS_NUM_THREADS=1: no pool at all. qkv's
# own training threads already call it single-threaded (workers_start sets one OpenBLAS
# thread), so this is the code they run anyway. No report is suppressed.
set -uo pipefail
cd "$(dirname "$0")/.."
export QKV=${QKV:-build/tsan/qkv} QKV_TEST=${QKV_TEST:-build/tsan/qkv_test}
reports=$(mktemp -d /tmp/qkv-tsan.XXXXXX)
trap 'rm -rf "$reports"' EXIT
export OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS="log_path=$reports/report halt_on_error=0 second_deadlock_stack=1"
# TSan runs code 5-15 times slower: longer bounds, fewer signal storms, no learning test (a
# 300-step demo where the readme suite runs)
export QKV_TIMEOUT=${QKV_TIMEOUT:-1200} QKV_SIGNAL_RUNS=${QKV_SIGNAL_RUNS:-10} QKV_SKIP_LEARN=1
# of the unit tests, those that step over threads (the rest are single-threaded maths)
QKV_UNIT_FILTER=train_step QKV_SUITES=${QKV_SUITES:-"unit threads resume progress attention signals heads serve"} tests/run.sh | tee "$reports/run.log"
n=$(cat "$reports"/report.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer')
for f in "$reports"/report.*; do [[ -e $f ]] && cat "$f"; done
last=$(tail -n 1 "$reports/run.log")
[[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]] || { echo "FAIL tsan: no summary line"; exit 1; }
echo "ThreadSanitizer: $n report(s)"
echo "${BASH_REMATCH[1]} passed, $((BASH_REMATCH[2] + n)) failed, ${BASH_REMATCH[3]} skipped"
[[ $((BASH_REMATCH[2] + n)) -eq 0 ]]
