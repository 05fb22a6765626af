#!/usr/bin/env bash
# Runs every test: the C unit tests, then the command-line suites. Each suite ends with
# "N passed, N failed[, N skipped]"; this script adds them up and ends with
# "N passed, N failed, N skipped". A suite is itself bounded (QKV_SUITE_TIMEOUT seconds,
# default 1200): one that hangs past every command's own bound fails by name, with the
# time, and the next suite runs.
set -uo pipefail
cd "$(dirname "$0")/.."
export QKV_TEST=${QKV_TEST:-build/qkv_test}
export QKV=${QKV:-build/qkv}
suite_limit=${QKV_SUITE_TIMEOUT:-1200}

passed=0
failed=0
skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# suite NAME COMMAND...: runs one suite, bounded, and adds up its last line.
suite() {
    local name=$1 start=$SECONDS rc last
    shift
    echo "== $name"
    timeout -k 10 "$suite_limit" "$@" >"$log" 2>&1
    rc=$?
    cat "$log"
    echo "-- $name took $((SECONDS - start)) s"
    last=$(tail -n 1 "$log")
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        echo "FAIL $name: still running after ${suite_limit}s, killed"
        failed=$((failed + 1))
    elif [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
        skipped=$((skipped + ${BASH_REMATCH[4]:-0}))
        if [[ $rc -ne 0 && ${BASH_REMATCH[2]} -eq 0 ]]; then
            echo "FAIL $name: exit $rc after reporting no failure"
            failed=$((failed + 1))
        fi
    else
        echo "FAIL $name ended without its summary line (exit $rc, after $((SECONDS - start))s)"
        failed=$((failed + 1))
    fi
}

# QKV_SUITES picks suites by name (unit golden fuzz cli resume ...); default: all of them
want() { [[ -z ${QKV_SUITES:-} || " $QKV_SUITES " == *" $1 "* ]]; }
# QKV_UNIT_FILTER runs only the unit tests whose names hold it
want unit && suite unit "$QKV_TEST" ${QKV_UNIT_FILTER:+"$QKV_UNIT_FILTER"}
# The golden losses are pinned for OpenBLAS's Haswell kernels: that run selects them for
# its own process, whatever this environment selects for everything else. It must have
# run exactly the golden test: a filter that matched nothing, or more, proves nothing.
golden=golden_losses_20_steps_bit_exact
if want golden; then
    suite golden env OPENBLAS_CORETYPE=Haswell QKV_GOLDEN_STRICT=1 "$QKV_TEST" "$golden"
    ran=$(grep -cE '^(ok  |FAIL) ' "$log")
    if [[ $ran -ne 1 ]] || ! grep -q "^ok   $golden\$" "$log"; then
        echo "FAIL golden: the pinned run must run exactly $golden, and it ran $ran test(s)"
        failed=$((failed + 1))
    fi
fi
# The gradient checks under each of OpenBLAS's kernel sets that qkv may choose on this CPU
# (util/cpu.h): Haswell's and Zen's where it has AVX2 and FMA, SkylakeX's with AVX-512 F/BW/
# DQ/VL, Cooperlake's with AVX512_BF16 too. Each set rounds its sums its own way; the
# gradients must hold under every one. Under a second each.
if want kernelsets; then
    flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
    sets=()
    has avx2 fma && sets+=(Haswell Zen)
    has avx512f avx512bw avx512dq avx512vl && sets+=(SkylakeX)
    has avx512f avx512bw avx512dq avx512vl avx512_bf16 && sets+=(Cooperlake)
    for set in "${sets[@]}"; do
        suite "kernels $set" env OPENBLAS_CORETYPE="$set" "$QKV_TEST" _grad
    done
fi
# Decoding's step and search tests again, its products by sgemm (as where OpenBLAS runs
# AVX-512 kernels: nn/panels.h), then by panels wherever the CPU can run them (as where it
# runs AVX2 kernels): each way is tested on any CPU, whichever this one takes by itself.
if want decode-ways; then
    for way in 0 1; do
        name=$([[ $way == 0 ]] && echo sgemm || echo panels)
        suite "decoding by $name" env QKV_DECODE_PANELS=$way "$QKV_TEST" decode
        suite "decoding steps by $name" env QKV_DECODE_PANELS=$way "$QKV_TEST" model_step
    done
fi
for s in house format fuzz cli resume progress attention heads explain translate onnx fetch readme serve report bundle threads signals mpi; do
    want $s && suite "tests/$s.sh" "tests/$s.sh"
done

echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
