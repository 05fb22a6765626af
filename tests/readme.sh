#!/usr/bin/env bash
# README.md and docs/ keep their promises. `make demo` runs here as a user runs it, in a
# scratch folder laid out as a fresh clone; every figure README.md and docs/ quote from its run
# is computed again (scripts/doc_figures.sh) and looked for in its file; then README.md's tour
# runs exactly as written on that run; every link to a file of the repository points at one;
# the front door stays short.
#
# The demo trains with OpenBLAS's Haswell kernels and 2 threads wherever the CPU has AVX2 and
# FMA, so its bits are the same on every such machine. Its validation losses below say
# whether this machine made those bits; where it did not (no AVX2, another kernel set chosen
# by the user's OPENBLAS_CORETYPE, or a change to what the demo trains), the figures cannot
# match and are skipped, naming the losses found. After a change to training, write the new
# losses here and the new figures (scripts/doc_figures.sh prints them) into the docs.
# Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch readme
demo_valid_losses="500:0.2245 1000:0.078326 1500:0.082883 2000:0.071547 2500:0.072072 3000:0.072245 3500:0.073429 4000:0.074818"

# ---- make demo, in a scratch clone -------------------------------------------------------
mkdir -p "$T/clone/build" "$T/clone/scripts"
cp -r configs "$T/clone/"
cp scripts/demo.sh scripts/doc_figures.sh "$T/clone/scripts/"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$QKV" >"$T/clone/build/qkv"
chmod +x "$T/clone/build/qkv"
# QKV_SKIP_LEARN=1 (the sanitizer builds, many times slower) trains it 300 steps: the tour
# runs, and the learning test and the figures are skipped
demo_args=()
[[ ${QKV_SKIP_LEARN:-0} == 1 ]] && demo_args=(--set train.steps=300 --set train.valid_every=100 --set train.checkpoint_every=100)
start=$SECONDS
# on 2 threads, as on the machine the docs' figures came from, whatever this one's size or
# environment says (the config trains with 2 threads; decoding on more could round otherwise)
(cd "$T/clone" && OPENBLAS_NUM_THREADS=2 QKV=build/qkv "$BOUNDED" bash scripts/demo.sh "${demo_args[@]}") >"$T/demo.out" 2>&1 </dev/null
rc=$?
echo "-- make demo took $((SECONDS - start)) s"
run=$T/clone/runs/toy
[[ $rc -eq 0 && -s $run/report.html ]] && ok "demo_runs_in_a_fresh_clone" ||
    bad "demo_runs_in_a_fresh_clone" "exit $rc: $(tail -3 "$T/demo.out")"
# what the demo prints last is what the tutorial shows
tail -n 1 "$T/demo.out" | grep -q '^exact match: [0-9]* of 500 held-out sentences' &&
    ok "demo_ends_with_the_held_out_score" ||
    bad "demo_ends_with_the_held_out_score" "last line: $(tail -n 1 "$T/demo.out")"

# ---- learning: the demo's model translates the held-out sentences, and its attention aligns
if [[ ${QKV_SKIP_LEARN:-0} == 1 ]]; then
    skip learning "QKV_SKIP_LEARN=1: the demo trained 300 steps"
else
    em=$(tail -n 1 "$T/demo.out" | sed -n 's/.*(\([0-9.]*\)%)$/\1/p')
    awk -v em="${em:-0}" 'BEGIN { exit !(em >= 95) }' && ok "learns_toy_pair_95_percent_exact ($em%)" ||
        bad "learns_toy_pair_95_percent_exact" "$(tail -n 1 "$T/demo.out")"
    # every word linked (--null off): the cross-attention alone, the last layer's head average
    (cd "$T/clone" && "$QKV" align runs/toy --src data/toy/test.src --tgt data/toy/test.tgt --gold data/toy/test.align \
        --null off) >"$T/aer.txt" 2>&1
    aer=$(awk '/\(default\)/ { print $(NF - 1) }' "$T/aer.txt")
    [[ -n $aer ]] && awk -v a="$aer" 'BEGIN { exit !(a < 0.05) }' && ok "default_alignment_aer_below_0.05 ($aer)" ||
        bad "default_alignment_aer_below_0.05" "AER ${aer:-?}: $(tail -2 "$T/aer.txt")"
fi

# ---- the figures ---------------------------------------------------------------------------
losses=$(sed -n 's/.*"step": \([0-9]*\), .*"valid_loss": \([0-9.]*\).*/\1:\2/p' "$run/metrics.jsonl" 2>/dev/null | tr '\n' ' ')
losses=${losses% }
docs=(README.md docs/*.md)
if [[ ${QKV_SKIP_LEARN:-0} == 1 ]]; then
    skip "figures_of_the_docs" "QKV_SKIP_LEARN=1: the demo trained 300 steps"
elif [[ $losses != "$demo_valid_losses" ]]; then
    skip "figures_of_the_docs" "this machine's demo run is other bits (validation losses $losses; the docs' run: $demo_valid_losses)"
else
    start=$SECONDS
    (cd "$T/clone" && OPENBLAS_NUM_THREADS=2 QKV=build/qkv "$BOUNDED" bash scripts/doc_figures.sh runs/toy) >"$T/figures" 2>"$T/figures.err"
    rc=$?
    echo "-- scripts/doc_figures.sh took $((SECONDS - start)) s"
    n=$(grep -c $'\t' "$T/figures")
    [[ $rc -eq 0 && $n -ge 60 ]] && ok "doc_figures_script_runs ($n figures)" ||
        bad "doc_figures_script_runs" "exit $rc, $n figures: $(tail -3 "$T/figures.err")"
    # flat FILE: the file on one line, every run of blanks and line breaks one space
    flat() { tr -s ' \n' '  ' <"$1"; }
    for doc in "${docs[@]}"; do
        mapfile -t want < <(awk -F'\t' -v d="$doc" '$1 == d { print $2 }' "$T/figures")
        [[ ${#want[@]} -eq 0 ]] && continue
        text=$(flat "$doc")
        missing=""
        for w in "${want[@]}"; do
            w=$(tr -s ' ' ' ' <<<"$w")
            [[ $text == *"$w"* ]] || missing+=$'\n    '"$w"
        done
        name="figures_of_${doc//[\/.]/_} (${#want[@]})"
        [[ -z $missing ]] && ok "$name" || bad "$name" "not in $doc, as the demo run gives them:$missing"
    done
    # the pictures of docs/ come from the same run: the script makes each one, at its size
    if [[ -z $browser ]]; then
        skip_missing "pictures_of_the_docs" "Chromium is not installed: the docs' pictures were NOT made again"
    else
        (cd "$T/clone" && OPENBLAS_NUM_THREADS=2 QKV=build/qkv "$BOUNDED" timeout 300 bash scripts/doc_figures.sh \
            --pictures "$T/pictures" runs/toy) >"$T/pictures.out" 2>&1
        rc=$?
        # size PNG: "WIDTHxHEIGHT" from its header
        size() { od -An -tu1 -j16 -N8 "$1" | awk '{ printf "%dx%d", $1 * 16777216 + $2 * 65536 + $3 * 256 + $4, $5 * 16777216 + $6 * 65536 + $7 * 256 + $8 }'; }
        wrong=""
        for f in docs/*.png; do
            made=$T/pictures/${f#docs/}
            [[ -s $made ]] || { wrong+=" ${f#docs/} (not made)"; continue; }
            [[ $(size "$made") == "$(size "$f")" ]] || wrong+=" ${f#docs/} ($(size "$made"), the docs' $(size "$f"))"
        done
        [[ $rc -eq 0 && -z $wrong ]] && ok "pictures_of_the_docs_made_from_the_demo_run" ||
            bad "pictures_of_the_docs_made_from_the_demo_run" "exit $rc:$wrong $(tail -2 "$T/pictures.out")"
    fi
fi

# ---- the tour --------------------------------------------------------------------------------
# the block after "## A tour": the first ```sh fence to its closing fence
awk '/^## A tour/ {tour = 1} tour && /^```sh$/ {inside = 1; next} inside && /^```$/ {exit} inside' README.md >"$T/tour.sh"
lines=$(grep -c . "$T/tour.sh")
start=$SECONDS
before_tour=$(ls -A "$T/clone")
(cd "$T/clone" && "$BOUNDED" bash -e -o pipefail "$T/tour.sh") >"$T/tour.out" 2>"$T/tour.err" </dev/null
rc=$?
echo "-- the tour took $((SECONDS - start)) s"
[[ $rc -eq 0 && $lines -ge 10 ]] && ok "readme_tour_runs_as_written ($lines commands)" ||
    bad "readme_tour_runs_as_written" "exit $rc after $lines lines: $(tail -3 "$T/tour.err")"
# what the tour says it leaves behind is there
missing=""
for f in runs/toy/hyp.txt runs/toy/attn/index.html runs/toy/explain/index.html runs/toy/heads/index.html \
    runs/toy/patch/patch.svg runs/toy.safetensors runs/toy-onnx/onnx/encoder_model.onnx \
    runs/toy-onnx/onnx/decoder_model_merged.onnx runs/toy-onnx/tokenizer.json runs/toy-onnx/index.html \
    runs/toy/report.html; do
    [[ -s $T/clone/$f ]] || missing+=" $f"
done
[[ -z $missing ]] && ok "readme_tour_leaves_what_it_says" || bad "readme_tour_leaves_what_it_says" "missing:$missing"
# and nothing beside the repository's own folders: everything under runs/, which git ignores;
# the report shows the tour's head analysis
added=$(comm -13 <(echo "$before_tour") <(ls -A "$T/clone"))
[[ -z $added ]] && grep -q 'id="heads"' "$T/clone/runs/toy/report.html" && ! grep -q "No head analysis" "$T/clone/runs/toy/report.html" &&
    ok "readme_tour_writes_under_runs_and_the_report_shows_it" ||
    bad "readme_tour_writes_under_runs_and_the_report_shows_it" "new at the top: ${added//$'\n'/ }; $(grep -o 'No head analysis[^<]*' "$T/clone/runs/toy/report.html" | head -1)"
# the demo's config records no translations while it trains: the report shows the tour's eval's
rep=$T/clone/runs/toy/report.html
grep -q 'the last <code>qkv eval</code> kept its first 3' "$rep" && ! grep -q 'class="missing">No samples' "$rep" &&
    ok "readme_tour_report_shows_samples" ||
    bad "readme_tour_report_shows_samples" "$(grep -o 'No samples[^<]*' "$rep" | head -1)"

# ---- pictures: every text inside its picture, apart from the others and off the lines ---------
# measured in Chromium (tests/svg_fit.js): first on pictures made to fail it, then on every SVG
# file and page the tour wrote, then on a long sentence's maps, explanation and patching
if [[ -z $browser ]]; then
    skip_missing "pictures_texts_fit" "Chromium is not installed: the pictures were NOT measured"
else
    browser_flags "$T/profile"
    svg_fit cases "$PWD/tests/svg_fit_cases.html"
    want="edge: \"cut by the edge\" is cut by the picture's edge
over: \"first words\" lies over \"second\"
turned over: \"farmer\" lies over \"sees\"
line: a line runs through \"a dashed line\"
path: a path runs through \"a curve\""
    got=$(sed -n 's/^[^ ]*svg_fit_cases.html: //p' <<<"$faults" | sed 's/ (.*px out)$//')
    [[ $got == "$want" && $measured == " 6,12" ]] && ok "pictures_fit_checker_finds_each_fault_and_passes_a_fit" ||
        bad "pictures_fit_checker_finds_each_fault_and_passes_a_fit" "found: ${got//$'\n'/; } (measured$measured)"
    tour=$T/clone/runs/toy
    svg_fit tour $(find "$tour" -name '*.svg' | sort) "$tour/attn/index.html" "$tour/explain/index.html" \
        "$tour/heads/index.html" "$tour/report.html"
    [[ -z $faults && $measured != *" 0,"* ]] && ok "pictures_of_the_tour_fit (pages and pictures, texts:$measured)" ||
        bad "pictures_of_the_tour_fit" "$(head -5 <<<"$faults")"
    long="the old farmer sees a red bird and the young child finds the small dog near the big river while the happy teacher reads a long book"
    (cd "$T/clone" && "$BOUNDED" timeout 300 bash -e -c '
        build/qkv attention runs/toy --text "$1" --out runs/long/attn
        build/qkv explain runs/toy --text "$1" --out runs/long/explain
        build/qkv patch runs/toy --clean "$1" --corrupt "${1% book} bird" --out runs/long/patch' _ "$long") >"$T/long.out" 2>&1
    rc=$?
    svg_fit long $(find "$T/clone/runs/long" -name '*.svg' | sort) "$T/clone/runs/long/attn/index.html" \
        "$T/clone/runs/long/explain/index.html"
    [[ $rc -eq 0 && -z $faults ]] && ok "pictures_of_a_long_sentence_fit (texts:$measured)" ||
        bad "pictures_of_a_long_sentence_fit" "exit $rc; $(head -5 <<<"$faults") $(tail -2 "$T/long.out")"
fi

# docs/export.md's onnxruntime-node example, as written, on the tour's toy-onnx/: it prints
# the translation qkv translate --greedy gives the same line (its paths are the tour's;
# the modules are the onnx suite's, which make test installs)
NODE_MODULES=${QKV_NODE_MODULES:-$PWD/tests/onnx/node_modules}
awk '/^### onnxruntime/ {on = 1} on && /^```js$/ {inside = 1; next} inside && /^```$/ {exit} inside' docs/export.md \
    >"$T/clone/ort_example.mjs"
if [[ -f $NODE_MODULES/onnxruntime-node/package.json && -s $T/clone/runs/toy-onnx/tokenizer.json ]] && command -v node >/dev/null; then
    ln -sfn "$NODE_MODULES" "$T/clone/node_modules"
    line=$(sed -n "s/^const line = '\(.*\)';$/\1/p" "$T/clone/ort_example.mjs")
    got=$(cd "$T/clone" && "$BOUNDED" node ort_example.mjs 2>"$T/ort_example.err")
    want=$(cd "$T/clone" && echo "$line" | "$QKV" translate runs/toy --greedy 2>/dev/null)
    [[ -n $line && -n $want && $got == "$want" ]] && ok "export_md_onnxruntime_example_translates ($got)" ||
        bad "export_md_onnxruntime_example_translates" "'$line': got '$got', qkv '$want'; $(grep -m1 Error "$T/ort_example.err")"
else
    skip_missing "export_md_onnxruntime_example_translates" "no onnxruntime-node in $NODE_MODULES (scripts/deps.sh --with-onnx)"
fi

# ---- links and length ------------------------------------------------------------------------
# every relative link of README.md and docs/*.md names a file of the repository
broken=""
for doc in README.md docs/*.md src/README.md; do
    dir=$(dirname "$doc")
    while read -r target; do
        path=${target%%#*}
        [[ -z $path || $path == http* || $path == mailto:* ]] && continue
        [[ -e $dir/$path ]] || broken+=" $doc:$target"
    done < <(grep -o '\](\([^)]*\))' "$doc" | sed 's/^](\(.*\))$/\1/')
done
[[ -z $broken ]] && ok "doc_links_name_files" || bad "doc_links_name_files" "broken:$broken"
n=$(wc -l <README.md)
[[ $n -le 250 ]] && ok "readme_at_most_250_lines ($n)" || bad "readme_at_most_250_lines" "$n lines"

finish
