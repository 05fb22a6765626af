#!/usr/bin/env bash
# scripts/sweep.sh NAME [KEY=VALUE ...]: one point of the Multi30k recipe's sweep.
# Trains configs/multi30k.yaml with the given overrides (qkv train --set) into
# runs/sweep-NAME, scores the validation set with the run's default decoding (what
# translate and eval use: ckpt/average.safetensors when train.average_last is set) and
# appends one line to runs/sweep.tsv: name, overrides, val BLEU, chrF, steps, training
# seconds, tokens/s (the median of the logged rates), peak RSS. Only val is read: the test
# sets are kept for the chosen recipe (make multi30k).
set -euo pipefail
cd "$(dirname "$0")/.."
QKV=${QKV:-build/qkv}
M30K=data/multi30k
[[ $# -ge 1 ]] || { echo "usage: scripts/sweep.sh NAME [KEY=VALUE ...]" >&2; exit 2; }
name=$1
shift
run=runs/sweep-$name
scripts/multi30k_data.sh "$M30K"
sets=(--set "name=sweep-$name")
for kv in "$@"; do sets+=(--set "$kv"); done

mkdir -p runs
/usr/bin/time -v -o "runs/sweep-$name.time" "$QKV" train configs/multi30k.yaml "${sets[@]}" --force
"$QKV" eval "$run" --src $M30K/val.de --ref $M30K/val.en >"runs/sweep-$name.val"

rss_kb=$(awk -F': ' '/Maximum resident set size/{print $2}' "runs/sweep-$name.time")
last=$(tail -n 1 "$run/metrics.jsonl")
steps=$(sed -E 's/.*"step": ([0-9]+).*/\1/' <<<"$last")
secs=$(sed -E 's/.*"elapsed_s": ([0-9.]+).*/\1/' <<<"$last")
# the median of the logged rates: a pause (a suspended process, a busy machine) moves it little
toks=$(grep -o '"tokens_per_s": [0-9.]*' "$run/metrics.jsonl" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END{printf "%.0f", a[int((NR+1)/2)]}')
bleu=$(tail -n 1 "$run/eval.jsonl" | sed -E 's/.*"bleu": ([0-9.]+).*/\1/')
chrf=$(tail -n 1 "$run/eval.jsonl" | sed -E 's/.*"chrf": ([0-9.]+).*/\1/')
[[ -f runs/sweep.tsv ]] || printf 'name\toverrides\tval_bleu\tval_chrf\tsteps\ttrain_s\ttokens_per_s\tpeak_rss_mb\n' >runs/sweep.tsv
printf '%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%d\n' "$name" "${*:-(recipe)}" "$bleu" "$chrf" "$steps" "$secs" "$toks" \
    $((rss_kb / 1024)) | tee -a runs/sweep.tsv
