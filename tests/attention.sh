#!/usr/bin/env bash
# Attention maps end to end: the files `qkv attention` writes, its bad-input handling,
# `qkv align` output, and a real-browser test of the HTML viewer in headless Chromium
# (skipped, loudly, only when Chromium is not installed). Ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
QKV=${QKV:-build/qkv}
T=$(mktemp -d /tmp/qkv-attn.XXXXXX)
[[ -n ${QKV_KEEP_TMP:-} ]] || trap 'rm -rf "$T"' EXIT
source tests/lib.sh

"$QKV" toy-data "$T/data" --train 1500 --valid 50 --test 50 >/dev/null
"$QKV" train configs/toy.yaml --set run_dir="$T/run" --set train.steps=150 --set model.d_model=32 \
    --set data.train.src="$T/data/train.src" --set data.train.tgt="$T/data/train.tgt" \
    --set data.valid.src="$T/data/valid.src" --set data.valid.tgt="$T/data/valid.tgt" >"$T/train.log" 2>&1 ||
    { echo "set-up failed: $(tail -3 "$T/train.log")"; exit 1; }

# ---- the files ------------------------------------------------------------------------------
out="$T/attn"
"$QKV" attention "$T/run" --text "the old farmer sees a red bird" --out "$out" >"$T/attn.log" 2>&1
rc=$?
svgs=$(ls "$out"/*.svg 2>/dev/null | wc -l)
# 2 encoder + 2 decoder self + 2 cross layers, each 4 heads + their average
if [[ $rc -eq 0 && -s $out/maps.json && -s $out/index.html && $svgs -eq 30 && -f $out/cross-layer1-avg.svg &&
    -f $out/encoder_self-layer0-head3.svg && -f $out/decoder_self-layer1-head0.svg ]]; then
    ok "attention_writes_json_svgs_html"
else
    bad "attention_writes_json_svgs_html" "exit $rc, $svgs SVGs; $(tail -2 "$T/attn.log")"
fi
grep -q "cross-attention, decoder layer 1, average of 4 heads" "$T/attn.log" && grep -q "██\|▓▓\|▒▒" "$T/attn.log" &&
    ok "attention_prints_terminal_heatmap" || bad "attention_prints_terminal_heatmap" "$(head -5 "$T/attn.log")"
if grep -qiE '(src|href)=["'"'"']?(https?:)?//' "$out/index.html" || grep -q '<link' "$out/index.html"; then
    bad "viewer_needs_no_network" "index.html refers to something outside itself"
else
    ok "viewer_needs_no_network"
fi
grep -q 'linearGradient' "$out/cross-layer0-head0.svg" && grep -q '>farmer<' "$out/cross-layer0-head0.svg" &&
    ok "svg_has_labels_and_legend" || bad "svg_has_labels_and_legend" "no legend or labels"
"$QKV" attention "$T/run" --text "the old farmer sees a red bird" --target "lo grano veto una avela ruba vida" \
    --out "$T/forced" >"$T/forced.log" 2>&1 && grep -q "target (forced): lo grano veto una avela ruba vida" "$T/forced.log" &&
    ok "attention_force_decodes_a_target" || bad "attention_force_decodes_a_target" "$(tail -2 "$T/forced.log")"
"$QKV" attention "$T/run" --text "the zebra sees a bird" --out "$T/unk" >"$T/unk.log" 2>&1 &&
    grep -q "not in the source vocabulary, read as <unk>: 'zebra'" "$T/unk.log" && ok "attention_unknown_words_warn" ||
    bad "attention_unknown_words_warn" "$(tail -2 "$T/unk.log")"
expect_error "attention_empty_text" 2 "^qkv: --text: nothing to attend to" "$QKV" attention "$T/run" --text "  " --out "$T/x"
expect_error "attention_target_not_in_vocabulary" 2 "^qkv: --target: not in the target vocabulary: 'zebrao'" \
    "$QKV" attention "$T/run" --text "the cat sleeps" --target "lo zebrao dorma" --out "$T/x"
mkdir -p "$T/empty"
cp "$T/run/config.yaml" "$T/run/src.vocab" "$T/run/tgt.vocab" "$T/empty/"
expect_error "attention_run_without_checkpoint" 2 "^qkv: $T/empty: no checkpoint" "$QKV" attention "$T/empty" --text "the cat" --out "$T/x"

# ---- align ------------------------------------------------------------------------------------
"$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" >"$T/test.align" 2>"$T/align.err"
rc=$?
good=$(paste -d'\t' "$T/data/test.tgt" "$T/test.align" | awk -F'\t' '{n = split($1, t, " "); m = split($2, a, " "); if (n == m) c++} END {print c+0}')
[[ $rc -eq 0 && $(wc -l <"$T/test.align") -eq 50 && $good -eq 50 ]] && ok "align_writes_one_link_per_target_word" ||
    bad "align_writes_one_link_per_target_word" "exit $rc, $good of 50 lines right; $(cat "$T/align.err")"
"$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/data/test.align" >"$T/aer.txt" 2>&1
grep -q "layer 1, average .*(default)" "$T/aer.txt" && grep -q "^best head: layer [01], head [0-3], AER 0\.[0-9]*" "$T/aer.txt" &&
    [[ $(grep -c "head [0-3] " "$T/aer.txt") -eq 8 ]] && ok "align_scores_every_layer_and_head" ||
    bad "align_scores_every_layer_and_head" "$(cat "$T/aer.txt")"
expect_error "align_ragged_input" 2 "must be line-aligned" "$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/train.tgt"
expect_error "align_bad_head" 2 "^qkv: --layer/--head: this model has layers 0..1 and heads 0..3" "$QKV" align "$T/run" \
    --src "$T/data/test.src" --tgt "$T/data/test.tgt" --head 9

# ---- the viewer in a real browser ------------------------------------------------------------------
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
    echo "SKIP browser test: Chromium is not installed and scripts/deps.sh could not install it"
    echo "SKIP browser test: SKIPPED, the HTML viewer was NOT tested in a browser"
else
    flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
        --disable-component-update --disable-sync --user-data-dir="$T/profile" --enable-logging=stderr --v=0)
    timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$out/index.html#selftest" >"$T/dom.html" 2>"$T/browser.err"
    result=$(grep -o '<pre id="selftest"[^<]*' "$T/dom.html" | sed 's/.*>//')
    console=$(grep -E 'CONSOLE|Uncaught' "$T/browser.err" | head -3)
    if [[ $result == *'"ok":true'* && $result == *'"errors":[]'* && -z $console ]]; then
        ok "browser_viewer_switching_changes_the_picture_no_errors"
    else
        bad "browser_viewer_switching_changes_the_picture_no_errors" "result: ${result:-none}; console: $console"
    fi
    mkdir -p build
    shot="build/attention-viewer.png"
    rm -f "$shot"
    timeout 120 "$browser" "${flags[@]}" --hide-scrollbars --window-size=1100,700 --screenshot="$shot" \
        "file://$out/index.html#kind=cross&layer=1&head=avg&view=heatmap" >/dev/null 2>&1
    [[ -s $shot && $(stat -c %s "$shot") -gt 10000 ]] && ok "browser_screenshot ($shot)" || bad "browser_screenshot" "no screenshot"
fi

finish
