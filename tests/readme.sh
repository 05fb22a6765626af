#!/usr/bin/env bash
# README.md keeps its promises: its tour runs exactly as written, in a scratch folder laid
# out as a clone after `make demo` (build/qkv, configs/, data/toy/, runs/toy/ trained: here
# briefly, as the tour reads the run and does not judge its quality); every link to a file
# of the repository points at one; the front door stays short.
# Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
QKV=${QKV:-build/qkv}
T=$(mktemp -d /tmp/qkv-readme.XXXXXX)
[[ -n ${QKV_KEEP_TMP:-} ]] || trap 'rm -rf "$T"' EXIT
source tests/lib.sh

# ---- the tour --------------------------------------------------------------------------------
# the block after "## A tour": the first ```sh fence to its closing fence
awk '/^## A tour/ {tour = 1} tour && /^```sh$/ {inside = 1; next} inside && /^```$/ {exit} inside' README.md >"$T/tour.sh"
lines=$(grep -c . "$T/tour.sh")
mkdir -p "$T/clone/build"
cp -r configs "$T/clone/"
# build/qkv of the scratch clone is this suite's bounded qkv
printf '#!/bin/sh\nexec "%s" "$@"\n' "$QKV" >"$T/clone/build/qkv"
chmod +x "$T/clone/build/qkv"
(
    cd "$T/clone" || exit 1
    build/qkv toy-data data/toy --train 3000 --valid 100 --test 100 >/dev/null &&
        build/qkv train configs/toy.yaml --set train.steps=300 --set train.valid_every=100 \
            --set train.checkpoint_every=100 >train.log 2>&1
) || { echo "set-up failed: $(tail -3 "$T/clone/train.log" 2>/dev/null)"; exit 1; }
(cd "$T/clone" && "$BOUNDED" bash -e -o pipefail "$T/tour.sh") >"$T/tour.out" 2>"$T/tour.err" </dev/null
rc=$?
[[ $rc -eq 0 && $lines -ge 10 ]] && ok "readme_tour_runs_as_written ($lines commands)" ||
    bad "readme_tour_runs_as_written" "exit $rc after $lines lines: $(tail -3 "$T/tour.err")"
# what the tour says it leaves behind is there
missing=""
for f in hyp.txt attn/index.html explain/index.html heads/index.html patch/patch.svg toy.safetensors \
    runs/toy/report.html; do
    [[ -s $T/clone/$f ]] || missing+=" $f"
done
[[ -z $missing ]] && ok "readme_tour_leaves_what_it_says" || bad "readme_tour_leaves_what_it_says" "missing:$missing"

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
