#!/usr/bin/env bash
# Replays every stored fuzz input (the seeds and each finding kept as a regression input,
# tests/fuzz/<target>/) through the targets' plain replay programs, built beside qkv
# (so make sanitize replays them under ASan and UBSan). Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
# every target: one directory of inputs beside each tests/fuzz/<target>.c
for src in tests/fuzz/*.c; do
    t=$(basename "$src" .c)
    [[ -d tests/fuzz/$t ]] || continue
    out=$("$BOUNDED" "$(dirname "$QKV_BIN")/fuzz-replay/$t" tests/fuzz/$t/* 2>&1)
    rc=$?
    [[ $rc -eq 0 ]] && ok "fuzz_replay_$t ($out)" || bad "fuzz_replay_$t" "exit $rc: $(tail -5 <<<"$out")"
done
finish
