#!/usr/bin/env bash
# Attention maps end to end: the files `qkv attention` writes, its bad-input handling,
# `qkv align` output, and a real-browser test of the HTML viewer in headless Chromium
# (skipped, loudly, only when Chromium is not installed). Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch attn

small_toy_run

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
# maps.json says which source positions the model read as <unk> (none: an empty list), so
# that the viewer marks them (below, in Chromium)
grep -q '"source":\["the","zebra",' "$T/unk/maps.json" && grep -q '"source_unk":\[1\]' "$T/unk/maps.json" &&
    grep -q '"source_unk":\[\]' "$out/maps.json" && ok "maps_json_source_unk_names_the_positions_read_as_unk" ||
    bad "maps_json_source_unk_names_the_positions_read_as_unk" "$(grep -o '"source_unk":[^]]*]' "$T/unk/maps.json" "$out/maps.json")"
expect_error "attention_empty_text" 2 "^qkv: --text: nothing to attend to" "$QKV" attention "$T/run" --text "  " --out "$T/x"
expect_error "attention_target_not_in_vocabulary" 2 "^qkv: --target: not in the target vocabulary: 'zebrao'" \
    "$QKV" attention "$T/run" --text "the cat sleeps" --target "lo zebrao dorma" --out "$T/x"
mkdir -p "$T/empty"
cp "$T/run/config.yaml" "$T/run/src.vocab" "$T/run/tgt.vocab" "$T/empty/"
expect_error "attention_run_without_checkpoint" 2 "^qkv: $T/empty: no checkpoint" "$QKV" attention "$T/empty" --text "the cat" --out "$T/x"

# ---- the anatomy of one query ---------------------------------------------------------------
# The table's scores, pushed through a softmax here, give its weights; contributions over
# weights are one number per key whichever query asks (||v_j W_O[head h]||).
"$QKV" attention "$T/run" --text "the old farmer sees a red bird" --query 2 --kind cross --layer 1 --head 3 \
    --out "$T/q" >"$T/q2.log" 2>&1
"$QKV" attention "$T/run" --text "the old farmer sees a red bird" --query 4 --kind cross --layer 1 --head 3 \
    --out "$T/q" >"$T/q4.log" 2>&1
table() { awk '/^ key /{on=1; next} /^score_j/{on=0} on' "$1"; }
check=$(table "$T/q2.log" | awk '{s[NR]=$3; w[NR]=$4; if (NR==1 || $3>m) m=$3} END {
    for (i = 1; i <= NR; i++) z += exp(s[i] - m); for (i = 1; i <= NR; i++) { d = exp(s[i] - m) / z - w[i];
    if (d < 0) d = -d; if (d > worst) worst = d; sum += w[i] } printf "%d %.2g %.6f", NR, worst, sum }')
read -r n worst sum <<<"$check"
[[ $n -eq 8 ]] && awk -v w="$worst" -v s="$sum" 'BEGIN { exit !(w <= 1e-5 && s > 0.99999 && s < 1.00001) }' &&
    grep -q "cross-attention (Q: decoder, K/V: encoder), layer 1, head 3, query 2" "$T/q2.log" &&
    grep -q "^  by contrib: " "$T/q2.log" && ok "attention_query_softmax_of_scores_is_weights ($n keys, max error $worst)" ||
    bad "attention_query_softmax_of_scores_is_weights" "$n keys, worst $worst, sum $sum; $(head -20 "$T/q2.log")"
# the head is named in brackets: "W_O^3" read as W_O to the third power
grep -q 'contrib_j = weight_j \* ||v_j W_O\[head 3\]||' "$T/q2.log" && ! grep -q 'W_O^' "$T/q2.log" &&
    ok "attention_query_formula_names_the_head_not_a_power" ||
    bad "attention_query_formula_names_the_head_not_a_power" "$(grep '^score_j' "$T/q2.log")"
ratios=$(paste <(table "$T/q2.log") <(table "$T/q4.log") | awk '$4 > 1e-3 && $9 > 1e-3 {
    r = ($5 / $4) / ($10 / $9); if (r < 0.999 || r > 1.001) bad++; n++ } END { print n + 0, bad + 0 }')
[[ ${ratios% *} -ge 4 && ${ratios#* } -eq 0 ]] && ok "attention_contribution_over_weight_is_a_key_constant" ||
    bad "attention_contribution_over_weight_is_a_key_constant" "keys compared / off: $ratios"
grep -q '"format":"qkv-attention-2"' "$T/q/maps.json" && grep -q '"cross_scores":\[' "$T/q/maps.json" &&
    grep -q '"decoder_self_scores":\[\[\[\[[-0-9.e]*,null' "$T/q/maps.json" && grep -q '"encoder_self_contrib":' "$T/q/maps.json" &&
    ok "maps_json_format_2_scores_null_where_masked" || bad "maps_json_format_2_scores_null_where_masked" "$(head -c 300 "$T/q/maps.json")"
expect_error "attention_query_out_of_range" 2 "^qkv: --query: cross has queries 0\.\.[0-9]+ for this sentence" \
    "$QKV" attention "$T/run" --text "the cat" --query 40 --out "$T/x"
expect_error "attention_bad_kind" 2 "^qkv: --kind: 'self' is not one of" "$QKV" attention "$T/run" --text "the cat" --query 0 --kind self
expect_error "attention_read_only_out" 2 "^qkv: /sys/attn: cannot create: " "$QKV" attention "$T/run" --text "the cat" --out /sys/attn
expect_error "attention_empty_out" 2 "^qkv: --out: an empty directory name" "$QKV" attention "$T/run" --text "the cat" --out ""

# ---- an export replaces the old one whole, or not at all ----------------------------------------
cp -r "$out" "$T/before"
# a file size limit with room for the new maps.json and its SVGs, not for index.html
"$QKV" attention "$T/run" --text "the red cat sleeps" --out "$T/sizes" >/dev/null 2>&1
limit=$((($(stat -c %s "$T/sizes/maps.json") + $(stat -c %s "$T/sizes/index.html")) / 2048))
err=$(trap '' XFSZ; ulimit -f $limit; "$QKV" attention "$T/run" --text "the red cat sleeps" --out "$out" 2>&1 >/dev/null)
rc=$?
leftover=$(ls -d "$out".partial-* 2>/dev/null)
if [[ $rc -eq 1 && $(wc -l <<<"$err") -eq 1 && $err == qkv:*"File too large"* && -z $leftover ]] && diff -r -q "$out" "$T/before" >/dev/null; then
    ok "attention_full_disk_leaves_old_export_whole"
else
    bad "attention_full_disk_leaves_old_export_whole" "exit $rc: $err; leftover '$leftover'; $(diff -r -q "$out" "$T/before" | head -2)"
fi
"$QKV" attention "$T/run" --text "the cat" --out "$out" >/dev/null 2>&1
grep -q '"source":\["the","cat","<eos>"\]' "$out/maps.json" && grep -qF '["the","cat","\u003ceos>"]' "$out/index.html" &&
    [[ $(ls "$out"/*.svg | wc -l) -eq 30 && -z $(ls -d "$out".partial-* 2>/dev/null) ]] &&
    ok "attention_export_over_old_one_is_all_new" || bad "attention_export_over_old_one_is_all_new" "$(ls "$out" | head)"

# ---- watching attention form over training ------------------------------------------------------
# Two watched sentences (one with its target forced), a snapshot at step 0 and every 60 steps;
# the last decoder layer's head-averaged cross-attention must sharpen by 30% or more.
ws=$(sed -n 3p "$T/data/test.src") wt=$(sed -n 3p "$T/data/test.tgt")
# one gold line per watched sentence, in the order they are watched (test line 7, then 3)
{ sed -n 7p "$T/data/test.align"; sed -n 3p "$T/data/test.align"; } >"$T/watch.gold"
wcfg="train.watch=$(printf 'the red cat %.0s' {1..8})" # 24 tokens; max_len 3 gives 16 positions
tiny_config "$T/watch.yaml" watch "$T/data" "steps: 480, valid_every: 60, checkpoint_every: 240,
  watch: [\"$(sed -n 7p "$T/data/test.src")\", {src: \"$ws\", tgt: \"$wt\"}]"
echo "seed: 3" >>"$T/watch.yaml"
"$QKV" train "$T/watch.yaml" --set run_dir="$T/watched" >"$T/watch-train.log" 2>&1 &&
    "$QKV" attention "$T/watched" --watch --gold "$T/watch.gold" --out "$T/wview" >"$T/watch.log" 2>&1
rc=$?
snaps=$(ls "$T/watched/watch"/step-*.json 2>/dev/null | wc -l)
drop=$(awk '/^ *step  sentence 1/{if (seen++) exit; on=1; next} on && $1 ~ /^[0-9]+$/ && NF >= 3 {n++; if (n == 1) {a = $2; b = $3} x = $2; y = $3}
    END { if (n) printf "%.3f %.3f", 1 - x / a, 1 - y / b }' "$T/watch.log")
if [[ $rc -eq 0 && $snaps -ge 4 && -f $T/watched/watch/step-00000000.json && -s $T/wview/index.html ]] &&
    awk -v d="$drop" 'BEGIN { split(d, x, " "); exit !(x[1] >= 0.30 && x[2] >= 0.30) }'; then
    ok "watch_cross_attention_sharpens_over_training ($snaps snapshots, entropy falls by $drop)"
else
    bad "watch_cross_attention_sharpens_over_training" "exit $rc, $snaps snapshots, drop '$drop'; $(tail -3 "$T/watch.log")"
fi
# one mode's export never replaces the other's: --watch into a --text export's folder, and
# the reverse, are refused before any work, the folder as it was
"$QKV" attention "$T/watched" --text "the cat sleeps" --out "$T/textview" >/dev/null 2>&1
before=$(ls "$T/textview" | tr '\n' ' ')
expect_error "watch_refuses_a_text_exports_folder" 2 "^qkv: --out: .*textview holds qkv attention --text's export \(maps.json\): give --watch an --out of its own$" \
    "$QKV" attention "$T/watched" --watch --out "$T/textview"
expect_error "text_refuses_a_watch_exports_folder" 2 "^qkv: --out: .*wview holds qkv attention --watch's export \(watch.json\): give --text an --out of its own$" \
    "$QKV" attention "$T/watched" --text "the cat sleeps" --out "$T/wview"
[[ $(ls "$T/textview" | tr '\n' ' ') == "$before" && -n $(ls "$T/textview"/*.svg 2>/dev/null) ]] &&
    ok "refused_mode_leaves_the_other_export_whole" || bad "refused_mode_leaves_the_other_export_whole" "$(ls "$T/textview")"
grep -q "AER" "$T/watch.log" && grep -q "watching 2 sentences" "$T/watch-train.log" && ok "watch_reports_aer_and_says_it_watches" ||
    bad "watch_reports_aer_and_says_it_watches" "$(head -3 "$T/watch.log")"
# the AER of the last snapshot (step 480) is qkv align's on the same pairs and weights, the
# null decision included (training records the contributions it reads): sentence 1's
# target is the step's greedy translation, sentence 2's the forced one
sed -n 7p "$T/data/test.src" >"$T/watch2.src" && echo "$ws" >>"$T/watch2.src"
{ sed -n 7p "$T/data/test.src" | "$QKV" translate "$T/watched/ckpt/step-000480.safetensors" --greedy; echo "$wt"; } \
    >"$T/watch2.tgt" 2>/dev/null
last=$(awk '/^ *step  sentence 1/{on=1; next} on && $1 == "480" {print $NF; exit}' "$T/watch.log")
for n in on off; do
    "$QKV" align "$T/watched/ckpt/step-000480.safetensors" --src "$T/watch2.src" --tgt "$T/watch2.tgt" \
        --gold "$T/watch.gold" --null $n >"$T/watch2-$n.txt" 2>&1
done
on=$(awk '/\(default\)$/ { print $(NF - 1) }' "$T/watch2-on.txt") off=$(awk '/\(default\)$/ { print $(NF - 1) }' "$T/watch2-off.txt")
[[ -n $last && $last == "$on" ]] && grep -q '^AER: .*(the null decision on)' "$T/watch.log" &&
    grep -q '"aer_null":true' "$T/wview/watch.json" &&
    ok "watch_aer_is_aligns_with_the_null_rule ($last; --null off $off)" ||
    bad "watch_aer_is_aligns_with_the_null_rule" "watch '$last', align '$on' (off '$off'); $(grep '^AER' "$T/watch.log")"

# each snapshot records the watched sentences' source share: a second table, every mean in
# [0, 1], and the view's data holds it for its chart
shares=$(awk '/^source share:/{on=1; next} on && $1 ~ /^[0-9]+$/ {for (i = 2; i <= NF; i++) print $i}' "$T/watch.log")
if [[ -n $shares ]] && [[ $(wc -l <<<"$shares") -eq $((2 * snaps)) ]] &&
    awk '{ if (!($1 >= 0 && $1 <= 1)) bad = 1 } END { exit bad }' <<<"$shares" &&
    [[ $(grep -o '"source_share"' "$T/wview/watch.json" | wc -l) -eq $((2 * snaps)) ]]; then
    ok "watch_records_the_source_share ($(tail -n 2 <<<"$shares" | tr '\n' ' '))"
else
    bad "watch_records_the_source_share" "shares '$(head -c 200 <<<"$shares")'"
fi
# recording costs a forward pass, never the training arithmetic: the same weights without it
sed 's/^train: .*/train: {steps: 480, valid_every: 60, checkpoint_every: 240}/' "$T/watch.yaml" |
    grep -v '^  watch' >"$T/nowatch.yaml"
"$QKV" train "$T/nowatch.yaml" --set run_dir="$T/unwatched" >/dev/null 2>&1 &&
    same_tensors "$T/watched/ckpt/step-000480.safetensors" "$T/unwatched/ckpt/step-000480.safetensors" &&
    ok "watch_leaves_weights_byte_identical" || bad "watch_leaves_weights_byte_identical" "checkpoints differ"
expect_error "watch_without_snapshots" 2 "no watched sentences recorded" "$QKV" attention "$T/run" --watch --out "$T/x"
expect_error "watch_sentence_too_long" 2 "^qkv: train.watch: sentence 1 is longer than" timeout 120 "$QKV" train "$T/watch.yaml" \
    --set run_dir="$T/toolong" --set data.max_len=3 --set "$wcfg"

# ---- align ------------------------------------------------------------------------------------
"$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --null off >"$T/test.align" 2>"$T/align.err"
rc=$?
good=$(paste -d'\t' "$T/data/test.tgt" "$T/test.align" | awk -F'\t' '{n = split($1, t, " "); m = split($2, a, " "); if (n == m) c++} END {print c+0}')
[[ $rc -eq 0 && $(wc -l <"$T/test.align") -eq 50 && $good -eq 50 ]] && ok "align_writes_one_link_per_target_word" ||
    bad "align_writes_one_link_per_target_word" "exit $rc, $good of 50 lines right; $(cat "$T/align.err")"
"$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/data/test.align" --method output \
    >"$T/aer.txt" 2>&1
grep -q "layer 1, average .*(default)" "$T/aer.txt" && grep -q "^best head: layer [01], head [0-3], AER 0\.[0-9]*" "$T/aer.txt" &&
    [[ $(grep -c "head [0-3] " "$T/aer.txt") -eq 8 ]] && ok "align_scores_every_layer_and_head" ||
    bad "align_scores_every_layer_and_head" "$(cat "$T/aer.txt")"
# --method: the other readings, each scored; links from the default reading, one line a pair
"$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/data/test.align" --method contrib \
    >"$T/aer-contrib.txt" 2>&1
"$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/data/test.align" --method shift \
    >"$T/aer-shift.txt" 2>&1
if grep -q "^contrib.layer .*(default)" "$T/aer-contrib.txt" && grep -q "^contrib.rollout " "$T/aer-contrib.txt" &&
    [[ $(grep -c "^shift.L[01] " "$T/aer-shift.txt") -eq 2 ]] &&
    awk '$1 ~ /^(contrib|shift)\./ { n++; for (i = 2; i <= 4; i++) if (!($i >= 0 && $i <= 1)) bad = 1 } END { exit bad || n != 4 }' \
        "$T/aer-contrib.txt" "$T/aer-shift.txt"; then
    ok "align_method_contrib_and_shift_scored ($(awk '/\(default\)/{print $1, $4}' "$T/aer-contrib.txt"))"
else
    bad "align_method_contrib_and_shift_scored" "$(cat "$T/aer-contrib.txt" "$T/aer-shift.txt" | head -8)"
fi
# --method grad scores every gradient reading: saliency, x-gradient signed and by magnitude, IG
"$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/data/test.align" --method grad \
    >"$T/aer-grad.txt" 2>&1
[[ $(grep -cE "^(saliency|x-gradient|x-gradient-l2|integrated-gradients) " "$T/aer-grad.txt") -eq 4 ]] &&
    grep -q "^saliency .*(default)" "$T/aer-grad.txt" && ok "align_method_grad_scores_every_reading" ||
    bad "align_method_grad_scores_every_reading" "$(head -8 "$T/aer-grad.txt")"
head -n 5 "$T/data/test.src" >"$T/five.src" && head -n 5 "$T/data/test.tgt" >"$T/five.tgt"
"$QKV" align "$T/run" --src "$T/five.src" --tgt "$T/five.tgt" --method grad --null off >"$T/five.links" 2>"$T/five.err"
[[ $? -eq 0 && $(wc -l <"$T/five.links") -eq 5 ]] && ! grep -qv '^[0-9]\+-[0-9]\+\( [0-9]\+-[0-9]\+\)*$' "$T/five.links" &&
    ok "align_method_grad_writes_links" || bad "align_method_grad_writes_links" "$(head -3 "$T/five.links" "$T/five.err")"
expect_error "align_method_unknown" 2 "^qkv: --method: 'bogus' is not one of output, shift, contrib, grad" "$QKV" align \
    "$T/run" --src "$T/five.src" --tgt "$T/five.tgt" --method bogus
expect_error "align_method_with_head" 2 "^qkv: --layer/--head pick a head for --method output" "$QKV" align "$T/run" \
    --src "$T/five.src" --tgt "$T/five.tgt" --method contrib --head 1
expect_error "align_ragged_input" 2 "must be line-aligned" "$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/train.tgt"
expect_error "align_ragged_gold_names_its_count" 2 "^qkv: $T/five.src has 5 lines, $T/five.tgt 5, $T/data/test.align 50: they must be line-aligned$" \
    "$QKV" align "$T/run" --src "$T/five.src" --tgt "$T/five.tgt" --gold "$T/data/test.align"
expect_error "align_bad_head" 2 "^qkv: --layer/--head: this model has layers 0..1 and heads 0..3" "$QKV" align "$T/run" \
    --src "$T/data/test.src" --tgt "$T/data/test.tgt" --head 9

# The default reading is the last cross-attention block's contributions: the links align
# prints (read off the null measure's own numbers) score, against the gold, exactly what its
# --gold table gives contrib.layer (read through explain's contributions)
"$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" >"$T/default.align" 2>/dev/null
"$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/data/test.align" >"$T/aer-default.txt" 2>&1
mine=$(paste -d'\t' "$T/default.align" "$T/data/test.align" | awk -F'\t' '{ m = split($1, a, " "); g = split($2, b, " ")
    delete gold; for (i = 1; i <= g; i++) gold[b[i]] = 1; for (i = 1; i <= m; i++) if (a[i] in gold) hits++
    predicted += m; sure += g } END { printf "%.3f", 1 - 2 * hits / (predicted + sure) }')
table=$(awk '/^contrib.layer .*\(default\)$/ { print $(NF - 1) }' "$T/aer-default.txt")
output=$(awk '/\(default\)$/ { print $(NF - 1) }' "$T/aer.txt")
[[ -n $table && $mine == "$table" && $mine != "$output" ]] && ok "align_default_reads_the_contributions ($mine; attention $output)" ||
    bad "align_default_reads_the_contributions" "links score '$mine', the table's contrib.layer '$table', attention '$output'"

# ---- the null decision: a target word its prefix wrote is left unaligned -----------------------
# --null off is the aligner as it was: every target word linked to its strongest source word
# (above), nothing said about a null; --null on (the default) says its rule where links are
# printed under the scores, with how many words it left unaligned (links go out as Pharaoh
# lines alone). What it links is checked on the particles task's model below.
"$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/data/test.align" --method output \
    --null off >"$T/aer-off.txt" 2>&1
if grep -q '^null: words are linked one to one' "$T/aer.txt" &&
    grep -qE '^null: [0-9]+ of [0-9]+ target words left unaligned' "$T/aer.txt" &&
    ! grep -q 'null' "$T/aer-off.txt" && diff <(awk '/^(layer|all) /{ print substr($0, 1, 24) }' "$T/aer.txt") \
        <(awk '/^(layer|all) /{ print substr($0, 1, 24) }' "$T/aer-off.txt") >/dev/null; then
    ok "align_null_states_its_rule"
else
    bad "align_null_states_its_rule" "$(grep -v 'head [0-9]' "$T/aer.txt" "$T/aer-off.txt")"
fi
expect_error "align_null_bad_value" 2 "^qkv: --null: 'maybe' is not on or off$" "$QKV" align "$T/run" \
    --src "$T/five.src" --tgt "$T/five.tgt" --null maybe

# data/multi30k-val40.align, the hand-written gold of Multi30k's first 40 validation pairs:
# 40 Pharaoh lines; where the corpus is at hand (fetched, or beside the project), the lines
# it was written for hash to the sums data/README.md gives, and every link names a word of
# its pair (a gold that drifted from its text would score nonsense without a word)
gold40=data/multi30k-val40.align
shape=$(grep -cE '^[0-9]+-[0-9]+( [0-9]+-[0-9]+)*$' "$gold40")
[[ $shape -eq 40 && $(wc -l <"$gold40") -eq 40 ]] && ok "multi30k_gold_is_40_pharaoh_lines" ||
    bad "multi30k_gold_is_40_pharaoh_lines" "$shape well-formed of $(wc -l <"$gold40")"
corpus=""
for d in data/multi30k ../shared/corpora/multi30k; do [[ -f $d/val.de && -f $d/val.en ]] && corpus=$d && break; done
if [[ -n $corpus ]]; then
    sums=$(for l in de en; do head -40 "$corpus/val.$l" | sha256sum | cut -c1-64; done)
    out=$(paste -d'\t' <(head -40 "$corpus/val.de") <(head -40 "$corpus/val.en") "$gold40" | awk -F'\t' '{
        ns = split($1, s, " "); nt = split($2, t, " "); m = split($3, l, " ")
        for (k = 1; k <= m; k++) { split(l[k], ij, "-"); if (ij[1] >= ns || ij[2] >= nt) bad = bad NR ":" l[k] " " } }
        END { print bad }')
    missing=""
    for sum in $sums; do grep -q "$sum" data/README.md || missing+="$sum "; done
    [[ -z $out && -z $missing ]] && ok "multi30k_gold_fits_its_pairs ($corpus)" ||
        bad "multi30k_gold_fits_its_pairs" "out of range: ${out:-none}; sums not in data/README.md: ${missing:-none}"
fi # a bare clone has no corpus: the shape above is all there is to check

# The toy tasks that were there write the files they always wrote (the particles task added
# no draw to them): checksums of a fixed seed's files, as written before it came.
pins="translate 56e902e3d02b35e9 copy 20c92bcc2d986735 reverse a93b7974eecc93b0"
wrong=""
while read -r task sum; do
    "$QKV" toy-data "$T/pin-$task" --task "$task" --train 200 --valid 20 --test 20 --seed 3 >/dev/null
    got=$(cd "$T/pin-$task" && cat train.{src,tgt,align} valid.{src,tgt,align} test.{src,tgt,align} | sha256sum | cut -c1-16)
    [[ $got == "$sum" ]] || wrong+="$task $got; "
done < <(xargs -n 2 <<<"$pins")
[[ -z $wrong ]] && ok "toy_data_old_tasks_unchanged" || bad "toy_data_old_tasks_unchanged" "$wrong"

# The particles task: a model trained briefly on it leaves its particles ("ga", "wo": no
# source word, no gold link) unaligned, and the null decision raises the precision.
"$QKV" toy-data "$T/pdata" --task particles --train 1500 --valid 50 --test 50 >/dev/null
# (it watches test pairs 1-4 with their targets forced: the watch view's AER, below)
pwatch=$(paste -d'\t' <(head -4 "$T/pdata/test.src") <(head -4 "$T/pdata/test.tgt") |
    awk -F'\t' '{ printf "%s{src: \"%s\", tgt: \"%s\"}", (NR > 1 ? ", " : ""), $1, $2 }')
"$QKV" train configs/toy.yaml --set run_dir="$T/prun" --set train.steps=300 --set model.d_model=32 \
    --set "train.watch=[$pwatch]" --set train.valid_every=150 \
    --set data.train.src="$T/pdata/train.src" --set data.train.tgt="$T/pdata/train.tgt" \
    --set data.valid.src="$T/pdata/valid.src" --set data.valid.tgt="$T/pdata/valid.tgt" >"$T/ptrain.log" 2>&1
"$QKV" align "$T/prun" --src "$T/pdata/test.src" --tgt "$T/pdata/test.tgt" >"$T/p.align" 2>/dev/null
left=$(paste -d'\t' "$T/pdata/test.tgt" "$T/p.align" | awk -F'\t' '{ n = split($1, w, " "); m = split($2, l, " ")
    delete linked; for (i = 1; i <= m; i++) { split(l[i], ij, "-"); linked[ij[2] + 1] = 1 }
    for (j = 1; j <= n; j++) if (w[j] == "ga" || w[j] == "wo") { p++; if (!(j in linked)) u++ } }
    END { printf "%d %d", u, p }')
for n in on off; do
    "$QKV" align "$T/prun" --src "$T/pdata/test.src" --tgt "$T/pdata/test.tgt" --gold "$T/pdata/test.align" --null $n \
        >"$T/paer-$n.txt" 2>&1
done
prec=$(awk '/\(default\)/ { printf "%s ", $(NF - 3) }' "$T/paer-on.txt" "$T/paer-off.txt")
read -r u p <<<"$left"
read -r p_on p_off <<<"$prec"
[[ ${p:-0} -gt 50 && $((u * 4)) -ge $((p * 3)) ]] && awk -v a="$p_on" -v b="$p_off" 'BEGIN { exit !(a > b + 0.1) }' &&
    ok "align_null_leaves_particles_unaligned ($u of $p; precision $p_off -> $p_on)" ||
    bad "align_null_leaves_particles_unaligned" "$u of $p particles unaligned, precision $p_off -> $p_on; $(tail -2 "$T/ptrain.log")"

# The watch view's AER at the last snapshot is align's on the watched pairs, with the null
# rule (the particles model is one where it moves the links: --null off scores otherwise)
head -4 "$T/pdata/test.src" >"$T/p4.src" && head -4 "$T/pdata/test.tgt" >"$T/p4.tgt" && head -4 "$T/pdata/test.align" >"$T/p4.gold"
"$QKV" attention "$T/prun" --watch --gold "$T/p4.gold" --out "$T/pview" >"$T/pwatch.log" 2>&1
last=$(awk '/^ *step  sentence 1/{on=1; next} on && $1 == "300" {print $NF; exit}' "$T/pwatch.log")
for n in on off; do
    "$QKV" align "$T/prun/ckpt/step-000300.safetensors" --src "$T/p4.src" --tgt "$T/p4.tgt" --gold "$T/p4.gold" \
        --null $n >"$T/p4-$n.txt" 2>&1
done
on=$(awk '/\(default\)$/ { print $(NF - 1) }' "$T/p4-on.txt") off=$(awk '/\(default\)$/ { print $(NF - 1) }' "$T/p4-off.txt")
[[ -n $last && $last == "$on" && $on != "$off" ]] && grep -q '"aer_null":true' "$T/pview/watch.json" &&
    ok "watch_aer_reads_the_null_rule_on_particles ($last; --null off $off)" ||
    bad "watch_aer_reads_the_null_rule_on_particles" "watch '$last', align '$on', off '$off'; $(tail -2 "$T/pwatch.log")"

# The words the rule leaves linked are linked one to one: no source word twice in a line
# while the line has source words no link takes (the particles model links a good part of its words)
"$QKV" align "$T/prun" --src "$T/pdata/test.src" --tgt "$T/pdata/test.tgt" >"$T/null.align" 2>"$T/null.err"
kept=$(paste -d'\t' "$T/pdata/test.src" "$T/null.align" | awk -F'\t' '{ ns = split($1, s, " "); m = split($2, on, " ")
    delete used; twice = 0; for (i = 1; i <= m; i++) { split(on[i], ij, "-"); twice += used[ij[1]]++ > 0; if (ij[1] >= ns) bad++ }
    if (twice && m <= ns) bad++; kept += m } END { print (bad ? -1 : kept) }')
total=$(wc -w <"$T/pdata/test.tgt")
[[ ! -s $T/align.err && ! -s $T/null.err && $(wc -l <"$T/null.align") -eq 50 && $((kept * 4)) -ge $total && $kept -le $total ]] &&
    ok "align_null_links_one_to_one ($kept of $total words linked)" ||
    bad "align_null_links_one_to_one" "$kept of $total; $(head -2 "$T/null.err" "$T/align.err")"
# The count under the table is the default reading's: the words its Pharaoh lines leave out
# (not the best head's, whose links nobody printed)
left_out=$(($(wc -w <"$T/pdata/test.tgt") - $(wc -w <"$T/null.align")))
said=$(sed -n 's/^null: \([0-9]*\) of [0-9]* target words left unaligned.* by the default reading$/\1/p' "$T/paer-on.txt")
[[ -n $said && $said == "$left_out" ]] && ok "align_null_counts_the_default_reading ($said)" ||
    bad "align_null_counts_the_default_reading" "said '${said}', the default links leave out $left_out"
"$QKV" align "$T/prun" --src "$T/pdata/test.src" --tgt "$T/pdata/test.tgt" --method output --null off \
    >"$T/p-off.align" 2>/dev/null
# --method output --null off is the attention's argmax: each target word linked to the source word the
# last layer's heads, averaged, weigh most, as qkv attention's maps.json holds them (python3
# is Debian's own, not a test dependency; it reads what the viewer reads)
argmax_links() { # maps.json -> the Pharaoh line of its last cross layer's head average
    /usr/bin/python3 -c 'import json, sys
m = json.load(open(sys.argv[1])); last = m["cross"][-1]; S = len(m["source"]) - 1; T = len(m["target_out"]) - 1
avg = [[sum(h[t][s] for h in last) / len(last) for s in range(S)] for t in range(T)]
print(" ".join("%d-%d" % (max(range(S), key=lambda s: (avg[t][s], -s)), t) for t in range(T)))' "$1"
}
same=0
for i in 1 2 3 4 5; do
    "$QKV" attention "$T/prun" --text "$(sed -n ${i}p "$T/pdata/test.src")" --target "$(sed -n ${i}p "$T/pdata/test.tgt")" \
        --out "$T/off-maps-$i" >/dev/null 2>&1
    [[ $(argmax_links "$T/off-maps-$i/maps.json") == "$(sed -n ${i}p "$T/p-off.align")" ]] && same=$((same + 1))
done
[[ $same -eq 5 ]] && ok "align_null_off_is_the_argmax_of_the_maps" ||
    bad "align_null_off_is_the_argmax_of_the_maps" "$same of 5 lines are the maps' argmax"

# ---- odd inputs: snapshots of other models, huge claims, stray bytes, gold links off the sentence ----
# utf8_ok FILE...: every file is well-formed UTF-8 (python3 is Debian's own, not a test dependency)
utf8_ok() { /usr/bin/python3 -c 'import sys; [open(f, "rb").read().decode("utf-8") for f in sys.argv[1:]]' "$@" 2>/dev/null; }
# the watched sentences again, through a model with one decoder layer, 3 snapshots (steps 0, 1, 2)
tiny_config "$T/shallow.yaml" shallow "$T/data" "steps: 2, valid_every: 1, checkpoint_every: 2,
  watch: [\"$(sed -n 7p "$T/data/test.src")\", {src: \"$ws\", tgt: \"$wt\"}]"
sed -i 's/decoder_layers: 2/decoder_layers: 1/' "$T/shallow.yaml"
timeout 120 "$QKV" train "$T/shallow.yaml" --set run_dir="$T/shallow" >"$T/shallow.log" 2>&1 ||
    bad "watch_shallow_setup" "$(tail -2 "$T/shallow.log")"
cp -r "$T/watched" "$T/mixed"
cp "$T/shallow/watch/step-00000001.json" "$T/mixed/watch/"
expect_error "watch_snapshots_of_two_model_shapes" 2 \
    "^qkv: $T/mixed/watch/step-00000001\.json: sentence 1 is from a model of 2\+1 layers, 4 heads of 8, but step-00000000\.json from one of 2\+2 layers" \
    timeout 120 "$QKV" attention "$T/mixed" --watch --out "$T/x"
# train --force over a watched run with another model: its record starts over at step 0
cp -r "$T/watched" "$T/reforced"
timeout 120 "$QKV" train "$T/shallow.yaml" --set run_dir="$T/reforced" --force >"$T/reforced.log" 2>&1 &&
    timeout 120 "$QKV" attention "$T/reforced" --watch --out "$T/reforced-view" >>"$T/reforced.log" 2>&1
rc=$? snaps=$(ls "$T/reforced/watch" | tr '\n' ' ')
[[ $rc -eq 0 && $snaps == "step-00000000.json step-00000001.json step-00000002.json " ]] &&
    ok "watch_train_force_starts_a_new_record" || bad "watch_train_force_starts_a_new_record" "exit $rc, $snaps; $(tail -2 "$T/reforced.log")"
cp -r "$T/watched" "$T/renamed"
mv "$T/renamed/watch/step-00000060.json" "$T/renamed/watch/step-00000061.json"
expect_error "watch_snapshot_step_differs_from_its_name" 2 "^qkv: $T/renamed/watch/step-00000061\.json: holds step 60, not the step 61" \
    timeout 120 "$QKV" attention "$T/renamed" --watch --out "$T/x"
# a small file claiming 16 layers of 256 heads of 8192 over 4096 tokens: refused before any allocation
mkdir -p "$T/claims" && cp -r "$T/watched/"{config.yaml,src.vocab,tgt.vocab,ckpt} "$T/claims/" && mkdir -p "$T/claims/watch"
/usr/bin/python3 -c 'import json; t = ["a"] * 4096
d = {"format": "qkv-attention-2", "heads": 256, "d_head": 8192, "source": t, "target_in": t, "target_out": t}
for k in ["encoder_self", "decoder_self", "cross"]: d[k] = [[]] * 16
print(json.dumps({"format": "qkv-watch-1", "step": 0, "sentences": [d]}, separators=(",", ":")))' \
    >"$T/claims/watch/step-00000000.json"
expect_error "watch_snapshot_claims_huge_shapes ($(stat -c %s "$T/claims/watch/step-00000000.json") bytes)" 2 \
    "^qkv: $T/claims/watch/step-00000000\.json: 'encoder_self'\[0\] does not hold 256 heads" \
    timeout 120 "$QKV" attention "$T/claims" --watch --out "$T/x"
# eight 511-byte sentences: a snapshot larger than the reader takes is refused before step 0
long=$(printf 'the red cat sees a bird %.0s' {1..22})
long=${long:0:511}
tiny_config "$T/big.yaml" big "$T/data" "steps: 1, valid_every: 1, checkpoint_every: 1,
  watch: [$(for i in 1 2 3 4 5 6 7 8; do printf '"%s"%s' "$long" "$([[ $i -lt 8 ]] && echo ', ')"; done)]"
expect_error "watch_snapshot_larger_than_the_reader_takes" 2 \
    "^qkv: train\.watch: a snapshot of these 8 sentences could take [0-9]+ bytes, more than the 67108864 'qkv attention --watch' reads" \
    timeout 120 "$QKV" train "$T/big.yaml" --set run_dir="$T/big" --set data.max_len=80
[[ ! -e $T/big/watch ]] && ok "watch_refused_list_writes_no_snapshot" || bad "watch_refused_list_writes_no_snapshot" "$(ls "$T/big/watch")"

# bytes that are not UTF-8: every SVG parses as XML, every file is UTF-8, the warning spells them
timeout 120 "$QKV" attention "$T/run" --text $'\xff\xfe cat \xc3' --out "$T/utf8" >"$T/utf8.log" 2>"$T/utf8.err"
rc=$?
parsed=$(/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as ET
ok = 0
for f in sys.argv[1:]:
    try: ET.parse(f); ok += 1
    except Exception as e: print(f, e, file=sys.stderr)
print(ok)' "$T"/utf8/*.svg 2>"$T/utf8.xml")
[[ $rc -eq 0 && $parsed -eq 30 ]] && utf8_ok "$T/utf8/maps.json" "$T/utf8/index.html" "$T/utf8.log" &&
    grep -q '"source":\["\\ufffd\\ufffd","cat","\\ufffd"\|"source":\["��","cat","�"' "$T/utf8/maps.json" &&
    ok "attention_invalid_utf8_svgs_parse_files_are_utf8" ||
    bad "attention_invalid_utf8_svgs_parse_files_are_utf8" "exit $rc, $parsed of 30 SVGs parse; $(head -2 "$T/utf8.xml")"
grep -qF "read as <unk>: '\xff\xfe', '\xc3'" "$T/utf8.err" && [[ $(wc -l <"$T/utf8.err") -eq 1 ]] &&
    ok "attention_warning_spells_bytes_not_utf8" || bad "attention_warning_spells_bytes_not_utf8" "$(cat -v "$T/utf8.err")"
# a long word is cut to its column on a character boundary
timeout 120 "$QKV" attention "$T/run" --text "a$(printf 'é%.0s' {1..15}) cat" --query 1 --kind encoder_self --layer 0 \
    --out "$T/wide" >"$T/wide.log" 2>/dev/null && utf8_ok "$T/wide.log" && ok "attention_query_table_cuts_labels_whole" ||
    bad "attention_query_table_cuts_labels_whole" "$(grep -a '^   0' "$T/wide.log" | cat -v)"
expect_error "attention_layer_without_query" 2 "^qkv: --kind/--layer/--head pick the map of --query N" \
    timeout 120 "$QKV" attention "$T/run" --text "the cat" --layer 7 --out "$T/x"
expect_error "attention_target_with_watch" 2 "^qkv: --target goes with --text, not --watch" \
    timeout 120 "$QKV" attention "$T/watched" --watch --target "lo gato" --out "$T/x"

# gold links past the sentence: refused with the file, line and link, by align and by --watch
awk 'NR == 3 {$0 = $0 " 99-0"} 1' "$T/data/test.align" >"$T/oob-src.align"
expect_error "align_gold_source_link_out_of_range" 2 \
    "^qkv: $T/oob-src\.align:3: link 99-0 is out of range: the pair has [0-9]+ source and [0-9]+ target words" \
    timeout 120 "$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/oob-src.align"
awk 'NR == 5 {$0 = "0-99 " $0} 1' "$T/data/test.align" >"$T/oob-tgt.align"
expect_error "align_gold_target_link_out_of_range" 2 "^qkv: $T/oob-tgt\.align:5: link 0-99 is out of range" \
    timeout 120 "$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/oob-tgt.align"
sed '2s/$/ 0-40/' "$T/watch.gold" >"$T/watch-oob-tgt.gold"
expect_error "watch_gold_target_link_out_of_range" 2 \
    "^qkv: $T/watch-oob-tgt\.gold:2: link 0-40 is out of range: watched sentence 2 has [0-9]+ source and [0-9]+ target words" \
    timeout 120 "$QKV" attention "$T/watched" --watch --gold "$T/watch-oob-tgt.gold" --out "$T/x"
sed '1s/$/ 30-0/' "$T/watch.gold" >"$T/watch-oob-src.gold"
expect_error "watch_gold_source_link_out_of_range" 2 "^qkv: $T/watch-oob-src\.gold:1: link 30-0 is out of range: watched sentence 1 has" \
    timeout 120 "$QKV" attention "$T/watched" --watch --gold "$T/watch-oob-src.gold" --out "$T/x"
printf '%s\n' "0-0 1- 2" "0-0" >"$T/watch-loose.gold"
expect_error "watch_gold_link_with_a_blank_inside" 2 "^qkv: $T/watch-loose\.gold:1: not Pharaoh alignments" \
    timeout 120 "$QKV" attention "$T/watched" --watch --gold "$T/watch-loose.gold" --out "$T/x"
# a link written twice is one sure link: the same scores as the file without repeats
awk '{print $0, $0}' "$T/data/test.align" >"$T/twice.align"
# (the default reading, and the attention's)
timeout 120 "$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/twice.align" >"$T/twice.txt" 2>&1 &&
    timeout 120 "$QKV" align "$T/run" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/twice.align" \
        --method output >"$T/twice-output.txt" 2>&1 &&
    diff -q "$T/aer-default.txt" "$T/twice.txt" >/dev/null && diff -q "$T/aer.txt" "$T/twice-output.txt" >/dev/null &&
    ok "align_gold_repeated_links_count_once" ||
    bad "align_gold_repeated_links_count_once" "$(diff "$T/aer-default.txt" "$T/twice.txt" | head -4)"
# a line past the model's positions is refused, not cut short
printf 'the cat %.0s' {1..60} >"$T/long.src" && printf 'lo gato %.0s' {1..60} >"$T/long.tgt"
expect_error "align_line_longer_than_positions" 2 "^qkv: $T/long\.src:1: more than the [0-9]+ tokens this model has positions for" \
    timeout 120 "$QKV" align "$T/run" --src "$T/long.src" --tgt "$T/long.tgt"

# a word the text spells "<eos>" is still a word: four target words, four links
printf 'the cat <eos> sleeps\n' >"$T/eos.src" && printf 'lo gato <eos> dorma\n' >"$T/eos.tgt"
links=$(timeout 120 "$QKV" align "$T/run" --src "$T/eos.src" --tgt "$T/eos.tgt" --null off 2>&1)
[[ $links =~ ^[0-3]-0\ [0-3]-1\ [0-3]-2\ [0-3]-3$ ]] && ok "align_word_spelled_eos_keeps_numbering" ||
    bad "align_word_spelled_eos_keeps_numbering" "'$links'"

# subword pieces are pooled to words: one link per target word, each to a source word
tiny_config "$T/bpe.yaml" bpe "$T/data" "steps: 20, valid_every: 20, checkpoint_every: 20, watch: [{src: \"$ws\", tgt: \"$wt\"}]"
timeout 120 "$QKV" train "$T/bpe.yaml" --set run_dir="$T/bpe" --set data.tokenizer=bpe --set data.vocab_size=400 >"$T/bpe.log" 2>&1 ||
    bad "bpe_setup" "$(tail -2 "$T/bpe.log")"
timeout 120 "$QKV" align "$T/bpe" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --null off >"$T/bpe.align" 2>&1
good=$(paste -d'\t' "$T/data/test.src" "$T/data/test.tgt" "$T/bpe.align" | awk -F'\t' '{
    ns = split($1, s, " "); nt = split($2, t, " "); m = split($3, a, " "); fine = m == nt
    for (k = 1; k <= m; k++) { split(a[k], p, "-"); if (p[1] >= ns || p[2] != k - 1) fine = 0 } c += fine } END { print c + 0 }')
[[ $good -eq 50 ]] && ok "align_subword_pieces_pool_to_words" || bad "align_subword_pieces_pool_to_words" "$good of 50 lines; $(head -2 "$T/bpe.align")"
echo "0-0" >"$T/bpe.gold"
expect_error "watch_gold_refused_where_snapshots_lost_word_starts" 2 "^qkv: --gold: the snapshots of a bpe run do not keep where words start" \
    timeout 120 "$QKV" attention "$T/bpe" --watch --gold "$T/bpe.gold" --out "$T/x"

# ---- the viewer in a real browser ------------------------------------------------------------------
# the page a user gets holds none of the checks (tests/viewer_selftest.js, added to a copy)
grep -q 'selftest()\|function selftest' "$T/q/index.html" && bad "viewer_page_holds_no_selftest" "$T/q/index.html" ||
    ok "viewer_page_holds_no_selftest"
if [[ -z $browser ]]; then
    skip_missing browser "Chromium is not installed and scripts/deps.sh could not install it: the HTML viewer was NOT tested in a browser"
else
    browser_flags "$T/profile"
    # the page drives itself (#selftest): every control, a click on a query, weights/scores/
    # contributions, sorting the keys, the PCA view and, for a watch view, the step slider
    for page in "$T/q/index.html" "$T/wview/index.html"; do
        name=$([[ $page == *wview* ]] && echo watch || echo one_sentence)
        selftest "$page"
        if [[ $result == *'"ok":true'* && $result == *'"errors":[]'* && -z $console ]]; then
            ok "browser_viewer_${name}_every_control_changes_the_picture_no_errors"
        else
            bad "browser_viewer_${name}_every_control_changes_the_picture_no_errors" "result: ${result:-none}; console: $console"
        fi
    done
    [[ $result == *'"headNotPower":true'* ]] && ok "browser_anatomy_formula_names_the_head_not_a_power" ||
        bad "browser_anatomy_formula_names_the_head_not_a_power" "${result:-none}"
    [[ $result == *'"change":"step slider to the start","changed":true'* ]] && ok "browser_watch_step_slider_moves" ||
        bad "browser_watch_step_slider_moves" "${result:-none}"
    # the watch view's charts as drawn (tests/watch_charts.js, added to a copy of the page):
    # every label inside its SVG (the legend's "after layer 1" was cut), y ticks at a round
    # step (0.5, 1, 1.5; not a quarter of the top, 0.51, 1.02, 1.53)
    with_script "$T/wview/index.html" tests/watch_charts.js "$T/wview/charts.html"
    browser_dom "file://$T/wview/charts.html" "$T/charts-dom.html"
    charts=$(grep -o 'data-pictures="[^"]*"' "$T/charts-dom.html" | head -1)
    [[ $charts == 'data-pictures="ok"' ]] && ok "browser_watch_charts_labels_inside_round_ticks" ||
        bad "browser_watch_charts_labels_inside_round_ticks" "${charts:-no verdict}"
    mkdir -p build
    shots=0
    for view in "attention-viewer.png file://$T/q/index.html#kind=cross&layer=1&head=avg&view=heatmap" \
        "attention-anatomy.png file://$T/q/index.html#kind=cross&layer=1&head=2&view=heatmap&value=contrib&query=3" \
        "attention-qk.png file://$T/q/index.html#kind=cross&layer=1&head=2&view=qk&query=3" \
        "attention-watch.png file://$T/wview/index.html#kind=cross&layer=1&head=avg&view=heatmap&query=2&sentence=1"; do
        shot="build/${view%% *}"
        browser_shot "${view#* }" "$shot" 1300,1000
        [[ -s $shot && $(stat -c %s "$shot") -gt 10000 ]] && shots=$((shots + 1))
    done
    [[ $shots -eq 4 ]] && ok "browser_screenshots (build/attention-*.png)" || bad "browser_screenshots" "$shots of 4"
    # the static page marks a word the model read as <unk> in its source line, as the live page does
    browser_dom "file://$T/unk/index.html" "$T/unk-dom.html"
    marked=$(grep -o '<span class="unk"[^>]*>[^<]*' "$T/unk-dom.html" | sed 's/.*>//')
    [[ $marked == "zebra (&lt;unk&gt;)" ]] && ok "browser_viewer_marks_the_words_read_as_unk" ||
        bad "browser_viewer_marks_the_words_read_as_unk" "marked: '${marked:-nothing}'"
fi

finish
