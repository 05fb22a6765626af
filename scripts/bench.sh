#!/usr/bin/env bash
# make bench: qkv against PyTorch on the same batches, for three model sizes, with the
# machine's sgemm ceiling measured in the same run. Writes build/bench/table.txt.
# QKV_BENCH_SIZES="tiny small" limits the sizes; QKV_BENCH_SCALE=2 doubles the steps;
# QKV_BENCH_THREADS=N trains on N threads; QKV_BENCH_REPEAT=3 runs each measurement three
# times, qkv and PyTorch taking turns, and
# keeps each one's fastest, and the highest of the ceilings measured before each round: on a
# host whose other tenants come and go, a slow run is theirs.
set -euo pipefail
cd "$(dirname "$0")/.."
QKV_EXTRA_PACKAGES="python3-torch python3-yaml" scripts/deps.sh
QKV=${QKV:-build/qkv}
out=build/bench
mkdir -p "$out"
[[ -f data/toy/train.src ]] || "$QKV" toy-data data/toy >/dev/null
scale=${QKV_BENCH_SCALE:-1}
repeat=${QKV_BENCH_REPEAT:-1}
# QKV_BENCH_THREADS=N: every model trains on N threads (default: each config's), and the
# ceiling is measured on N
ceiling_threads=()
[[ -n ${QKV_BENCH_THREADS:-} ]] && ceiling_threads=(--set "train.threads=$QKV_BENCH_THREADS")

# The faster of two result files (by tokens_per_s), or the one given when the other is "".
faster() {
    /usr/bin/python3 -c 'import json,sys
a=[f for f in sys.argv[1:] if f]
print(max(a, key=lambda f: json.load(open(f))["tokens_per_s"]))' "$@"
}

declare -A sets=(
    [tiny]="model.d_model=64 model.heads=4 model.d_ff=256 model.encoder_layers=2 model.decoder_layers=2"
    [small]="model.d_model=128 model.heads=4 model.d_ff=512 model.encoder_layers=3 model.decoder_layers=3"
    [base]="model.d_model=256 model.heads=8 model.d_ff=1024 model.encoder_layers=3 model.decoder_layers=3"
    [multi30k]="train.threads=2"
)
declare -A steps=([tiny]=100 [small]=60 [base]=30 [multi30k]=20)
declare -A configs=([tiny]=configs/toy.yaml [small]=configs/toy.yaml [base]=configs/toy.yaml [multi30k]=configs/multi30k.yaml)
# PyTorch decodes one sentence at a time at about 1 sentence/s on the Multi30k model
declare -A decode=([tiny]=200 [small]=200 [base]=200 [multi30k]=40)

{
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
    echo "OPENBLAS_CORETYPE: ${OPENBLAS_CORETYPE:-(not set)}"
} | tee "$out/machine.txt"

# The ceiling, in a process of its own (its matrices would otherwise count in RSS): first,
# and with QKV_BENCH_REPEAT again before each round; the highest is the ceiling (a share of
# a ceiling measured while the host was busy would flatter every MFU).
ceiling=0
: >"$out/ceilings.jsonl" # every measurement, for the table's line on how much the ceiling moved
measure_ceiling() {
    "$QKV" bench configs/toy.yaml --peak "${ceiling_threads[@]}" >"$out/peak.json"
    cat "$out/peak.json" >>"$out/ceilings.jsonl"
    cat "$out/peak.json" >&2
    ceiling=$(/usr/bin/python3 -c 'import json,sys; print(max(float(sys.argv[2]), json.load(open(sys.argv[1]))["peak_gflops"]))' \
        "$out/peak.json" "$ceiling")
}
measure_ceiling

results=()
for size in ${QKV_BENCH_SIZES:-tiny small base multi30k}; do
    # the corpus fetched and checked (scripts/multi30k_data.sh); without it, the other rows
    if [[ $size == multi30k ]] && ! scripts/multi30k_data.sh data/multi30k >&2; then
        echo "SKIP multi30k: data/multi30k could not be had (the line above says why)" >&2
        continue
    fi
    args=()
    for s in ${sets[$size]}; do args+=(--set "$s"); done
    args+=("${ceiling_threads[@]}")
    n=$((steps[$size] * scale))
    best_q="" best_t=""
    for r in $(seq "$repeat"); do
        ((repeat == 1)) || measure_ceiling
        echo "== $size: qkv ($n steps), run $r of $repeat" >&2
        # the batches are the same in every run (the same seed): the dump is rewritten alike
        "$QKV" bench "${configs[$size]}" "${args[@]}" --steps "$n" --warmup 5 --decode "${decode[$size]}" --ceiling "$ceiling" \
            --dump "$out/$size.json" >"$out/$size.qkv.$r.json"
        cat "$out/$size.qkv.$r.json" >&2
        best_q=$(faster "$out/$size.qkv.$r.json" "$best_q")
        # PyTorch: one thread for both torch and OpenBLAS, and two torch threads; the faster is kept
        for t in 1 2; do
            echo "== $size: pytorch, $t thread(s), run $r of $repeat" >&2
            OPENBLAS_NUM_THREADS=1 /usr/bin/python3 scripts/bench_torch.py "$out/$size.json" "$t" >"$out/$size.torch$t.$r.json"
            cat "$out/$size.torch$t.$r.json" >&2
            best_t=$(faster "$out/$size.torch$t.$r.json" "$best_t")
        done
    done
    cp "$best_q" "$out/$size.qkv.json"
    cp "$best_t" "$out/$size.torch.json"
    results+=("$size:$out/$size.qkv.json:$out/$size.torch.json")
done

QKV_BENCH_CEILING=$ceiling QKV_BENCH_PEAK_OUT=$out/ceiling.txt QKV_BENCH_CEILINGS=$out/ceilings.jsonl /usr/bin/python3 - "${results[@]}" <<'EOF' | tee "$out/table.txt"
import json, os, sys
rows = []
for arg in sys.argv[1:]:
    size, q, t = arg.split(":")
    rows.append((size, json.load(open(q)), json.load(open(t))))
q0 = rows[0][1]
# the highest measured, here or by a qkv bench that found its products beat the ceiling it
# was given and measured again: every share is of it
peak = max([float(os.environ["QKV_BENCH_CEILING"])] + [q["peak_gflops"] for _, q, _ in rows])
# decoding (below) takes the same ceiling
with open(os.environ["QKV_BENCH_PEAK_OUT"], "w") as f:
    f.write(f"{peak}\n")
for _, q, _ in rows:
    q["peak_gflops"], q["mfu"] = peak, q["gflops"] / peak
chose = f" (chosen by qkv: OpenBLAS chose {q0['openblas_chose']})" if "openblas_chose" in q0 else ""
print(f"OpenBLAS {q0['corename']} kernels{chose}, {q0['threads']} threads; sgemm peak measured in this run: {peak:.1f} GFLOP/s "
      f"({q0.get('ceiling_threads', q0['threads'])} threads, each its own 1024- and 1536-square sgemm at once)")
# how much the ceiling moved: within the rounds of each measurement, and between measurements
measured = [json.loads(l) for l in open(os.environ["QKV_BENCH_CEILINGS"]) if l.strip()]
if measured:
    m = max(measured, key=lambda c: c["peak_gflops"])
    print(f"  its rounds (each {m.get('peak_rounds', '?')} after {m.get('peak_warm_s', '?')} s of warm-up): median "
          f"{m.get('peak_median_gflops', float('nan')):.1f}, lowest {m.get('peak_low_gflops', float('nan')):.1f}; "
          f"measured {len(measured)} time(s) before the rows, from {min(c['peak_gflops'] for c in measured):.1f} to "
          f"{max(c['peak_gflops'] for c in measured):.1f}")
remeasured = [size for size, q, _ in rows if q.get("ceiling_remeasured", 0)]
if remeasured:
    print(f"  measured again by qkv bench for {', '.join(remeasured)}: the step's products beat the ceiling it was given")
beaten = [size for size, q, _ in rows if q.get("ceiling_beaten")]
if beaten:
    print(f"  NOT A CEILING for {', '.join(beaten)}: the step's products ran faster than every measurement (MFU over 100%)")
repeat = int(os.environ.get("QKV_BENCH_REPEAT", "1"))
if repeat > 1:
    print(f"each implementation's row: the fastest of {repeat} runs, qkv and PyTorch taking turns (QKV_BENCH_REPEAT)")
print()
print(f"{'model':8s} {'impl':8s} {'tokens/s':>10s} {'step ms':>8s} {'GFLOP/s':>8s} {'MFU':>6s} {'RSS MB':>7s} {'decode sent/s':>14s} {'(tokens out)':>12s} {'beam 5 sent/s':>14s}")
for size, q, t in rows:
    print(f"{size:8s} {'qkv':8s} {q['tokens_per_s']:10.0f} {q['step_ms']:8.2f} {q['gflops']:8.1f} {100*q['mfu']:5.1f}% {q['peak_rss_mb']:7.1f} {q['decode_sentences_per_s']:14.1f} {q['decoded_tokens']:12d} {q['beam5_sentences_per_s']:14.1f}")
    gt = q['flops_per_step'] / (t['step_ms'] / 1e3) / 1e9
    print(f"{'':8s} {'pytorch':8s} {t['tokens_per_s']:10.0f} {t['step_ms']:8.2f} {gt:8.1f} {100*gt/q['peak_gflops']:5.1f}% {t['peak_rss_mb']:7.1f} {t['decode_sentences_per_s']:14.1f} {t['decoded_tokens']:12d}   ({t['threads']} torch thread(s), OPENBLAS_NUM_THREADS=1)")
    print(f"{'':8s} {'ratio':8s} {q['tokens_per_s']/t['tokens_per_s']:9.2f}x {'':8s} {'':8s} {'':6s} {t['peak_rss_mb']/q['peak_rss_mb']:6.1f}x {q['decode_sentences_per_s']/t['decode_sentences_per_s']:13.1f}x")
    if "decode_cached_sentences_per_s" in t:  # the peer with a key/value cache, as fairseq decodes
        c = t["decode_cached_sentences_per_s"]
        print(f"{'':8s} {'pytorch, key/value cache':42s} {c:14.1f} {'':12s}   ratio {q['decode_sentences_per_s']/c:.1f}x"
              + (f"; {t['decode_cached_differ']} sentence(s) differ by a near-tie" if t.get("decode_cached_differ") else ""))
print()
print("qkv time per step by kind of work (ms):")
names = list(rows[0][1]["breakdown_ms"].keys())
print(f"{'':24s}" + "".join(f"{size:>9s}" for size, _, _ in rows))
for n in names:
    print(f"{n:24s}" + "".join(f"{q['breakdown_ms'][n]:9.2f}" for _, q, _ in rows))
print(f"{'  all threads waiting':24s}" + "".join(f"{100*q['timeline']['waiting_share']:8.1f}%" for _, q, _ in rows))
print(f"{'  shards GFLOP/s by thread':24s}" + "".join(f"{'/'.join(f'{g:.0f}' for g in q['timeline']['shard_gflops']):>9s}" for _, q, _ in rows))
print(f"{'matrix products alone':24s}" + "".join(f"{q['products_alone_ms']:9.2f}" for _, q, _ in rows))
print(f"{'  their GFLOP/s, of peak':24s}" + "".join(f"{100*q['products_alone_gflops']/q['peak_gflops']:8.1f}%" for _, q, _ in rows))
print()
print("All threads waiting: every training thread's waits at the step's barriers, of all threads' time")
print("(qkv bench --timeline FILE.svg draws each thread's phases and waits); shards GFLOP/s: each thread's")
print("forward and backward rate on its shard's counted FLOPs.")
print()
print("Matrix products alone: the step's own product shapes (each pass's rows by d_model or d_ff, the")
print("classifier), forward and both backward products, run by sgemm on every thread at once with nothing")
print("else between them: the library's rate on these shapes bounds the MFU, whatever the rest costs.")
print()
print("padding (share of the padded batches' positions that hold no token; training packs its rows and computes none): " +
      ", ".join(f"{size} {100*q['padding_share']:.1f}%" for size, q, _ in rows))
print()
print("FLOPs per step are counted from every matrix product (forward 2mnk, backward twice that) as qkv runs")
print("them: over each sequence's real tokens, no padding; PyTorch's GFLOP/s is that same count over its time")
print("(it also computes the padding). MFU = achieved GFLOP/s / the sgemm peak above. RSS: peak resident set size.")
EOF

# Decoding with a trained model: the Multi30k recipe's run when there is one (make multi30k),
# else a short run of the same config trained here (once; kept in build/bench), long enough
# that its translations have realistic lengths. test_2016_flickr, greedy and beam 5.
M30K=data/multi30k
if [[ " ${QKV_BENCH_SIZES:-multi30k} " == *" multi30k "* && -f $M30K/test_2016_flickr.de ]]; then
    run=runs/multi30k
    if ! ls $run/ckpt/step-*.safetensors >/dev/null 2>&1; then
        run=$out/multi30k-run
        if ! ls $run/ckpt/step-*.safetensors >/dev/null 2>&1; then
            echo "== multi30k decoding: no runs/multi30k; training $run for 800 steps first (about 10 minutes)" >&2
            "$QKV" train configs/multi30k.yaml --force --set name=bench-multi30k --set "run_dir=$run" \
                --set train.steps=800 --set train.valid_every=800 --set train.checkpoint_every=800 \
                --set train.average_last=0 >&2
        fi
    fi
    echo "== multi30k decoding: $run on test_2016_flickr" >&2
    # the table's ceiling: the highest measured, the training rows' own measurements included
    [[ -s $out/ceiling.txt ]] && ceiling=$(cat "$out/ceiling.txt")
    "$QKV" bench "$run" --translate $M30K/test_2016_flickr.de --ceiling "$ceiling" >"$out/decode.json"
    /usr/bin/python3 - "$out/decode.json" <<'PYEOF' | tee -a "$out/table.txt"
import json, sys
r = json.load(open(sys.argv[1]))
print()
print(f"decoding {r['sentences']} sentences of {r['source']} with {r['weights']} (step {r['step']}), {r['threads']} threads, "
      f"each step's products by {r['step_products']}:")
print(f"{'search':8s} {'seconds':>8s} {'sent/s':>8s} {'tgt tok/s':>10s} {'GFLOP':>8s} {'GFLOP/s':>8s} {'of peak':>8s}")
for k in ("greedy", "beam"):
    s = r[k]
    name = "greedy" if s["beam"] == 1 else f"beam {s['beam']}"
    print(f"{name:8s} {s['seconds']:8.2f} {s['sentences_per_s']:8.1f} {s['target_tokens_per_s']:10.0f} {s['gflop']:8.1f} {s['gflops']:8.1f} {100*s['ceiling_fraction']:7.1f}%")
print("Decoding FLOPs: every matrix product run (encoder, cached cross keys/values, each step's rows")
print("at padded source width, the output projection); the time includes tokenizing and detokenizing.")
PYEOF
fi
