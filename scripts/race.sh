#!/usr/bin/env bash
# make race: qkv and PyTorch trained for the same wall time on the same Multi30k subword
# ids, then both models decoded greedily by `qkv translate` and scored as sacrebleu does
# on test_2016_flickr. The question a user choosing between them asks: given N minutes on
# this machine, which translates better? QKV_RACE_MINUTES (default 20) each, one after
# the other. Writes build/race/result.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
QKV_EXTRA_PACKAGES="python3-torch python3-numpy" scripts/deps.sh
QKV=${QKV:-build/qkv}
corpus=data/multi30k
scripts/multi30k_data.sh "$corpus"
minutes=${QKV_RACE_MINUTES:-20}
seconds=$((minutes * 60))
out=build/race
rm -rf "$out"
mkdir -p "$out"
test_src=$corpus/test_2016_flickr.de
test_ref=$corpus/test_2016_flickr.en
{
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
    echo "OPENBLAS_CORETYPE: ${OPENBLAS_CORETYPE:-(not set)}"
} | tee "$out/machine.txt"

# 1. qkv: the recipe (configs/multi30k.yaml), stopped by SIGINT when the time is up; it
# checkpoints where it stops. No validation and no periodic checkpoints: the PyTorch
# side does neither. Its clock includes start-up (tokenizer training, reading the data).
echo "== qkv: ${minutes} min" >&2
rc=0
timeout -s INT "$seconds" "$QKV" train configs/multi30k.yaml --set run_dir="$out/qkv" --set train.steps=10000000 \
    --set train.valid_every=10000000 --set train.checkpoint_every=10000000 2>&1 | tee "$out/qkv.log" | grep -E '^(step [0-9]*0{2}/|done|qkv:)' >&2 || rc=$?
ckpt=$(ls "$out"/qkv/ckpt/step-*.safetensors | tail -1)
[[ -f $ckpt ]] || { echo "make race: qkv left no checkpoint (exit $rc)" >&2; exit 1; }

# 2. the batches qkv's trainer draws, in its order, over the same vocabulary (equal
# hashes prove the ids are the same)
echo "== the batches for PyTorch" >&2
"$QKV" bench configs/multi30k.yaml --batches-only --warmup 0 --steps "$seconds" --decode 0 --dump "$out/job.json" >/dev/null
/usr/bin/python3 - "$out/job.json" "$ckpt" <<'EOF'
import json, struct, sys
job = json.load(open(sys.argv[1]))
with open(sys.argv[2], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    meta = json.loads(f.read(n))["__metadata__"]
for key in ("vocab_hash", "data_hash"):
    if job[key] != meta[key]:
        sys.exit(f"make race: {key} differs between the batches ({job[key]}) and the qkv run ({meta[key]})")
print(f"same vocabulary ({job['vocab_hash']}) and training ids ({job['data_hash']}) on both sides", file=sys.stderr)
EOF

# 3. PyTorch, the same seconds of training; its weights go into a copy of the qkv run
echo "== pytorch: ${minutes} min" >&2
cp -r "$out/qkv" "$out/torch"
rm -f "$out"/torch/ckpt/*
OPENBLAS_NUM_THREADS=1 /usr/bin/python3 scripts/race_torch.py "$out/job.json" "$seconds" "$ckpt" \
    "$out/torch/ckpt/$(basename "$ckpt")" >"$out/torch.json"

# 4. both decoded greedily by qkv, both scored
for side in qkv torch; do
    "$QKV" translate "$out/$side" --greedy <"$test_src" >"$out/$side.hyp"
    "$QKV" score "$out/$side.hyp" "$test_ref" --json >"$out/$side.bleu.json"
done
/usr/bin/python3 - "$out" "$minutes" "$ckpt" <<'EOF' | tee "$out/result.txt"
import json, os, re, sys
out, minutes, ckpt = sys.argv[1:4]
q_steps = int(re.search(r"step-0*(\d+)", os.path.basename(ckpt)).group(1))
rates = [float(m.group(1)) for m in re.finditer(r" (\d+) tok/s", open(f"{out}/qkv.log").read())]
t = json.load(open(f"{out}/torch.json"))
score = {s: json.load(open(f"{out}/{s}.bleu.json")) for s in ("qkv", "torch")}
print(f"{minutes} minutes of training each; Multi30k de-en, configs/multi30k.yaml, the same subword ids;")
print("test_2016_flickr, greedy decoding by qkv translate for both, scored as sacrebleu scores")
print(f"{'':8s} {'steps':>6s} {'tok/s':>7s} {'BLEU':>6s} {'chrF':>6s}")
q_rate = sum(rates[-5:]) / len(rates[-5:]) if rates else float("nan")
print(f"{'qkv':8s} {q_steps:6d} {q_rate:7.0f} {score['qkv']['bleu']['score']:6.2f} {score['qkv']['chrf']['score']:6.2f}"
      "   (2 training threads; tok/s: the last progress lines)")
print(f"{'pytorch':8s} {t['steps']:6d} {t['tokens'] / t['seconds']:7.0f} {score['torch']['bleu']['score']:6.2f}"
      f" {score['torch']['chrf']['score']:6.2f}   ({t['threads']} torch thread(s), OPENBLAS_NUM_THREADS=1)")
EOF
