#!/usr/bin/env bash
# make demo: generate the toy pair, train on it, translate a few held-out sentences and
# score the whole held-out split. Runs $QKV (default build/qkv), which must be built:
# make demo builds it alone (make's `qkv` target) and passes its BUILD's.
set -euo pipefail
cd "$(dirname "$0")/.."
QKV=${QKV:-build/qkv}
# The same bits on every machine that can run them: the toy config trains with 2 threads,
# and OpenBLAS's Haswell kernels are taken wherever the CPU has AVX2 and FMA (each kernel
# set rounds its sums its own way), so the figures the docs show are the ones this run
# prints. An OPENBLAS_CORETYPE already set is the user's choice and is kept.
if [[ -z ${OPENBLAS_CORETYPE:-} ]] && grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
    echo "== OpenBLAS's Haswell kernels (OPENBLAS_CORETYPE=Haswell): the same bits on every CPU with AVX2"
fi
# The commands after training decode on 2 threads too, as many as the config trains with, on a
# machine of any size (an OPENBLAS_NUM_THREADS already set is kept)
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}

if [[ ! -f data/toy/test.tgt ]]; then
    "$QKV" toy-data data/toy
fi
echo "== training configs/toy.yaml (runs/toy)"
"$QKV" train configs/toy.yaml --force "$@"

echo
echo "== a few held-out sentences"
head -n 5 data/toy/test.src >runs/toy/demo.src
"$QKV" translate runs/toy --greedy <runs/toy/demo.src >runs/toy/demo.hyp 2>/dev/null
paste -d'\n' runs/toy/demo.src runs/toy/demo.hyp <(head -n 5 data/toy/test.tgt) /dev/null |
    awk 'NR%4==1{print "  source:     " $0} NR%4==2{h=$0; print "  qkv:        " $0} NR%4==3{print "  reference:  " $0 (h==$0 ? "   (exact)" : "   (differs)")} NR%4==0{print ""}'

echo "== what the model looks at: cross-attention of a held-out sentence"
"$QKV" attention runs/toy --text "$(sed -n 3p data/toy/test.src)" --out runs/toy/attention 2>/dev/null | tail -n +4
echo

echo "== how the cross-attention formed over training (the sentences under train.watch)"
"$QKV" attention runs/toy --watch --out runs/toy/watch-view 2>/dev/null | head -n 14
echo

"$QKV" report runs/toy >/dev/null
echo "== the run's story on one page: runs/toy/report.html (setup, curves, attention over training);"
echo "   training curves: runs/toy/curves.svg; attention viewer: runs/toy/attention/index.html;"
echo "   attention over training: runs/toy/watch-view/index.html (move the step slider)"
echo

echo "== the whole held-out split"
"$QKV" translate runs/toy --greedy <data/toy/test.src >runs/toy/test.hyp
awk 'NR==FNR{h[NR]=$0;next}{n++; if(h[FNR]==$0)c++}END{printf "exact match: %d of %d held-out sentences (%.1f%%)\n", c, n, 100*c/n}' \
    runs/toy/test.hyp data/toy/test.tgt
