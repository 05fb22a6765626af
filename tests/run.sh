#!/usr/bin/env bash
# Runs every test: the C unit tests, then the command-line tests. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
QKV_TEST=${QKV_TEST:-build/qkv_test}
export QKV=${QKV:-build/qkv}

passed=0
failed=0
out=$("$QKV_TEST" 2>&1 | tee /dev/stderr | tail -n 1)
if [[ $out =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
else
    echo "FAIL unit test runner ended abnormally" >&2
    failed=$((failed + 1))
fi

for script in tests/cli.sh tests/resume.sh; do
    out=$("$script" 2>&1 | tee /dev/stderr | tail -n 1)
    if [[ $out =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
    else
        echo "FAIL $script ended abnormally" >&2
        failed=$((failed + 1))
    fi
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
