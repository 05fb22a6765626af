#!/usr/bin/env bash
# Runs each fuzz target for SECONDS, one after another with one process each (make fuzz
# FUZZ_SECONDS=N). Inputs that add coverage go to build/fuzz/corpus/<target> (the
# stored ones in tests/fuzz/<target>/ are read, never written); a crash, sanitizer
# report, leak, hang or runaway allocation is saved to build/fuzz/findings/<target>-*.
# Prints executions and findings per target; exits 1 if any target found anything.
# Usage: scripts/fuzz.sh SECONDS TARGET...
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=$1
shift
mkdir -p build/fuzz/findings build/fuzz/logs
found_any=0
printf '%-12s %12s %10s %9s\n' target executions exec/s findings
for t in "$@"; do
    mkdir -p "build/fuzz/corpus/$t"
    before=$(ls build/fuzz/findings | grep -c "^$t-")
    "build/fuzz/fuzzer/$t" "build/fuzz/corpus/$t" "tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -max_len=65536 \
        -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="build/fuzz/findings/$t-" \
        >"build/fuzz/logs/$t.log" 2>&1
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "build/fuzz/logs/$t.log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "build/fuzz/logs/$t.log" | tail -1)
    found=$(($(ls build/fuzz/findings | grep -c "^$t-") - before))
    ((found > 0)) && found_any=1
    printf '%-12s %12s %10s %9s\n' "$t" "${execs:-?}" "${rate:-?}" "$found"
done
((found_any == 0)) || echo "findings in build/fuzz/findings/ (logs in build/fuzz/logs/): fix each, then keep its input in tests/fuzz/<target>/"
exit $found_any
