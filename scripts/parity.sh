#!/usr/bin/env bash
# make parity: qkv's loss and every gradient against PyTorch (float64 autograd) on the
# same weights and the same batch, for a post-LN tied and a pre-LN untied model.
# Installs Debian's python3-torch when missing. Not part of `make test` (the package is
# large); run it when the math changes.
set -euo pipefail
cd "$(dirname "$0")/.."
QKV_EXTRA_PACKAGES="python3-torch python3-yaml" scripts/deps.sh
QKV=${QKV:-build/qkv}
out=build/parity
rm -rf "$out"
mkdir -p "$out"
"$QKV" toy-data "$out/data" --train 2000 --valid 100 --test 10 >/dev/null
status=0
for variant in "post-tied:model.norm=post model.tie_embeddings=true" "pre-untied:model.norm=pre model.tie_embeddings=false"; do
    name=${variant%%:*}
    sets=()
    for s in ${variant#*:}; do sets+=(--set "$s"); done
    # a few steps so the weights are trained, not initial; dropout off for the comparison
    "$QKV" train configs/toy.yaml --set run_dir="$out/$name" --set train.steps=30 --set model.dropout=0 \
        --set data.train.src="$out/data/train.src" --set data.train.tgt="$out/data/train.tgt" \
        --set data.valid.src="$out/data/valid.src" --set data.valid.tgt="$out/data/valid.tgt" "${sets[@]}" >"$out/$name.log"
    echo "== $name"
    # the first batch from the 5th on with no ReLU input at the kink (parity.py exits 3)
    for batch in $(seq 5 20); do
        "$QKV" grads "$out/$name" --out "$out/$name/dump" --batch $batch >/dev/null
        rc=0
        OPENBLAS_NUM_THREADS=1 /usr/bin/python3 scripts/parity.py "$out/$name/dump" >"$out/$name.txt" || rc=$?
        [[ $rc -eq 3 ]] && echo "batch $batch: $(cat "$out/$name.txt")" && continue
        echo "batch $batch"
        cat "$out/$name.txt"
        break
    done
    [[ $rc -eq 0 ]] || status=1
    echo
done
exit $status
