#!/usr/bin/env bash
# Runs every test: the C unit tests, then the command-line suites. Each suite ends with
# "N passed, N failed"; this script adds them up and ends with the same line.
set -uo pipefail
cd "$(dirname "$0")/.."
QKV_TEST=${QKV_TEST:-build/qkv_test}
export QKV=${QKV:-build/qkv}

passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The golden losses are pinned for OpenBLAS's Haswell kernels: that suite selects them for
# its own process, whatever this environment selects for everything else.
golden() { OPENBLAS_CORETYPE=Haswell QKV_GOLDEN_STRICT=1 "$QKV_TEST" golden; }
for suite in "$QKV_TEST" golden tests/fuzz.sh tests/cli.sh tests/resume.sh tests/progress.sh tests/attention.sh tests/translate.sh tests/mpi.sh; do
    echo "== $suite"
    "$suite" >"$log" 2>&1
    cat "$log"
    last=$(tail -n 1 "$log")
    if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
    else
        echo "FAIL $suite ended without its summary line"
        failed=$((failed + 1))
    fi
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
