#!/usr/bin/env bash
# make bench-onnx: greedy decoding of the same lines by qkv and by onnxruntime-node running
# qkv's own ONNX export of the same model, on the same threads (a benchmark, not a test).
#
# Two models, trained here once and reused (build/bench-onnx/, remove it to train again):
#   toy       configs/toy.yaml (the demo's model, 4,000 steps), data/toy/test.src;
#   multi30k  configs/multi30k.yaml's model and vocabulary, trained QKV_BENCH_ONNX_STEPS
#             steps (default 800: a model that stops its sentences, not the recipe's), the
#             first 500 lines of data/multi30k/test_2016_flickr.de; skipped, said so, when
#             the corpus cannot be had (scripts/multi30k_data.sh).
# qkv: `qkv eval --greedy` (its sentences/s: decoding alone, the model loaded). onnxruntime:
# tests/onnx/ort_bench.mjs (graph optimizations on, intra-op threads = qkv's, 64 lines at a
# time sorted by length as qkv groups them). Each side's fastest of QKV_BENCH_ONNX_REPEAT
# runs (default 3). QKV_BENCH_ONNX_THREADS (default 2) threads each. The last line:
# "qkv/onnxruntime greedy: R×", R the smaller of the models' ratios. Writes
# build/bench-onnx/table.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
QKV=${QKV:-build/qkv}
out=build/bench-onnx
threads=${QKV_BENCH_ONNX_THREADS:-2}
repeat=${QKV_BENCH_ONNX_REPEAT:-3}
steps=${QKV_BENCH_ONNX_STEPS:-800}
export NODE_MODULES=$PWD/tests/onnx/node_modules OPENBLAS_NUM_THREADS=$threads
[[ -d $NODE_MODULES/onnxruntime-node && -d $NODE_MODULES/@huggingface/transformers ]] || {
    echo "make bench-onnx: onnxruntime-node is not in tests/onnx/node_modules (scripts/deps.sh --with-onnx)" >&2
    exit 1
}
mkdir -p "$out"
[[ -f data/toy/test.src ]] || "$QKV" toy-data data/toy >/dev/null

# train NAME CONFIG [--set ...]: build/bench-onnx/NAME, trained unless it holds a best checkpoint
train() {
    local name=$1 config=$2
    shift 2
    [[ -f $out/$name/ckpt/best.safetensors ]] && return 0
    echo "== training $name ($config)" >&2
    "$QKV" train "$config" --force --set "run_dir=$out/$name" "$@" >"$out/$name.train.log" 2>&1 ||
        { tail -3 "$out/$name.train.log" >&2; return 1; }
}

# bench NAME SRC REF: both runtimes on SRC; appends the row to the table, prints the ratio
bench() {
    local name=$1 src=$2 ref=$3 best=0 k qkv_s ort
    rm -rf "$out/$name-onnx"
    "$QKV" export "$out/$name" --format onnx --out "$out/$name-onnx" >/dev/null 2>&1
    for ((k = 1; k <= repeat; k++)); do
        qkv_s=$("$QKV" eval "$out/$name" --src "$src" --ref "$ref" --greedy 2>/dev/null |
            sed -n 's/.*; \([0-9.]*\) sentences\/s$/\1/p')
        best=$(awk -v a="$best" -v b="$qkv_s" 'BEGIN { print (b > a ? b : a) }')
    done
    "$QKV" translate "$out/$name" --greedy <"$src" >"$out/$name.qkv.txt" 2>/dev/null
    ort=$(node tests/onnx/ort_bench.mjs "$out/$name-onnx" "$src" "$threads" "$out/$name.ort.txt" "$repeat")
    local ort_s same lines ratio
    ort_s=$(sed -n 's/.*"sentences_per_second":\([0-9.e+-]*\).*/\1/p' <<<"$ort")
    lines=$(wc -l <"$src")
    same=$(paste -d'\t' "$out/$name.qkv.txt" "$out/$name.ort.txt" | awk -F'\t' '$1 == $2' | wc -l)
    ratio=$(awk -v q="$best" -v o="$ort_s" 'BEGIN { printf "%.2f", q / o }')
    printf '%-9s %6d lines  qkv %8.1f sentences/s  onnxruntime %8.1f  qkv/onnxruntime %5s×  identical %d of %d\n' \
        "$name" "$lines" "$best" "$ort_s" "$ratio" "$same" "$lines" | tee -a "$out/table.txt" >&2
    echo "$ratio"
}

{
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "threads: $threads each; onnxruntime-node $(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$NODE_MODULES/onnxruntime-node/package.json")"
} | tee "$out/table.txt" >&2
ratios=()
train toy configs/toy.yaml
ratios+=("$(bench toy data/toy/test.src data/toy/test.tgt)")
if scripts/multi30k_data.sh data/multi30k >&2; then
    head -n 500 data/multi30k/test_2016_flickr.de >"$out/multi30k.src"
    head -n 500 data/multi30k/test_2016_flickr.en >"$out/multi30k.ref"
    train multi30k configs/multi30k.yaml --set "train.steps=$steps" --set train.average_last=0 --set train.valid_bleu=false
    ratios+=("$(bench multi30k "$out/multi30k.src" "$out/multi30k.ref")")
else
    echo "SKIP multi30k: data/multi30k could not be had (the line above says why)" | tee -a "$out/table.txt" >&2
fi
r=$(printf '%s\n' "${ratios[@]}" | sort -g | head -1)
echo "qkv/onnxruntime greedy: ${r}×" | tee -a "$out/table.txt"
