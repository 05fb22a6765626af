#!/usr/bin/env bash
# qkv explain on one sentence end to end: explain.json's keys and shapes (documented in
# src/explain/explain_json.h), the source shares in [0, 1], the refusals of bad options, and
# the viewer page's explain mode in headless Chromium (skipped, loudly, only when Chromium
# is not installed), with a screenshot in build/explain-page.png.
# Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch explain

small_toy_run

# ---- the files ------------------------------------------------------------------------------
# the toy pair's own translation, forced: a short run's greedy one may ramble
text="the old farmer sees a red bird" target="lo grano veto una avela ruba vida"
out="$T/ex"
"$QKV" explain "$T/run" --text "$text" --target "$target" --out "$out" >"$T/explain.log" 2>&1
rc=$?
[[ $rc -eq 0 && -s $out/explain.json && -s $out/index.html ]] && grep -q "^source share: " "$T/explain.log" &&
    grep -q "^source: $text\$" "$T/explain.log" && grep -q "^target (forced): $target\$" "$T/explain.log" &&
    ok "explain_writes_json_and_page" ||
    bad "explain_writes_json_and_page" "exit $rc; $(tail -2 "$T/explain.log")"

# check_json FILE [FOIL]: every documented key with its shape (S source, T target positions,
# L decoder layers, H heads); prints "ok ..." or what is wrong
check_json() {
    "$BOUNDED" "$PY" -c 'import json, math, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
foil = sys.argv[2] if len(sys.argv) > 2 else None
keys = {"format", "maps", "logp", "foil", "foil_is_word", "ig_steps", "f", "f_base", "ig_error", "share", "rollout",
        "methods", "prefix"}
assert set(d) == keys, "keys %s" % sorted(set(d) ^ keys)
assert d["format"] == "qkv-explain-1", d["format"]
m = d["maps"]
assert m["format"] == "qkv-attention-2", m["format"]
S, T, L, H = len(m["source"]), len(m["target_out"]), len(m["cross"]), m["heads"]
assert S >= 2 and T >= 2 and len(m["target_in"]) == T and m["source"][-1] == "<eos>" and m["target_out"][-1] == "<eos>"
assert all(len(m["cross"][l]) == H and all(len(r) == S for r in m["cross"][l][h]) and len(m["cross"][l][h]) == T
           for l in range(L) for h in range(H)), "cross maps not (L, H, T, S)"
num = lambda v: isinstance(v, (int, float)) and math.isfinite(v)
vec = lambda k: isinstance(d[k], list) and len(d[k]) == T
grid = lambda g, r, c: isinstance(g, list) and len(g) == r and all(isinstance(x, list) and len(x) == c and all(map(num, x)) for x in g)
assert vec("logp") and all(num(v) and v <= 1e-6 for v in d["logp"]), "logp: %s" % d["logp"]
assert d["foil"] == foil, "foil %r" % d["foil"]
steps = d["ig_steps"]
assert vec("f") and vec("f_base") and vec("ig_error") and all(num(v) for v in d["f"] + d["f_base"])
if steps: assert all(num(v) for v in d["ig_error"]), "ig_error %s" % d["ig_error"]
else: assert all(v is None for v in d["ig_error"]), "ig_error without steps %s" % d["ig_error"]
assert grid(d["share"], L, T), "share is not (%d, %d)" % (L, T)
assert grid(d["rollout"], T, S + T), "rollout is not (%d, %d)" % (T, S + T)
for t, row in enumerate(d["rollout"]):
    assert abs(sum(row) - 1) < 1e-3 and abs(sum(row[:S]) - d["share"][-1][t]) < 1e-3, "rollout row %d: %s" % (t, row)
    assert all(v == 0 for v in row[S + t + 1:]), "rollout row %d reads later target inputs" % t
want = ["L%d.H%d" % (l, h) for l in range(L) for h in range(H)]
want = [n for l in range(L) for n in want[l * H:(l + 1) * H] + ["L%d.avg" % l]] + ["shift.L%d" % l for l in range(L)]
grads = ["saliency", "x-gradient", "x-gradient-l2", "integrated-gradients"]
want += ["contrib.layer", "contrib.rollout"] + grads + ["leave-one-out"]
names = [x["name"] for x in d["methods"]]
assert names == want, "methods %s" % names
family = lambda n: "attention" if n.startswith(("L", "shift.")) else "contrib" if n.startswith("contrib.") else \
    "loo" if n == "leave-one-out" else "gradient"
for x in d["methods"]:
    assert x["family"] == family(x["name"]), "%s: family %s" % (x["name"], x["family"])
    assert grid(x["scores"], T, S), "%s: scores not (%d, %d)" % (x["name"], T, S)
assert [x["name"] for x in d["prefix"]] == grads, d["prefix"]
for x in d["prefix"]:
    assert grid(x["scores"], T, T) and all(v == 0 for t in range(T) for v in x["scores"][t][t + 1:]), "prefix %s" % x["name"]
# each gradient says what its score is: the signed x-gradient and its magnitude apart
said = {x["name"]: x.get("score") for x in d["methods"] if x["family"] == "gradient"}
assert said == {x["name"]: x["score"] for x in d["prefix"]}, said
assert "signed" in said["x-gradient"] and "magnitude" in said["x-gradient-l2"], said
assert all("score" not in x for x in d["methods"] if x["family"] != "gradient")
# a word that is the foil itself is flagged, and no gradient scores it: f = log p(w) - log p(w) is 0
assert d["foil_is_word"] == [w == foil for w in m["target_out"]], "foil_is_word %s" % d["foil_is_word"]
for t in (t for t in range(T) if d["foil_is_word"][t]):
    assert d["f"][t] == d["f_base"][t] == 0, "f of the foil word %d" % t
    assert all(v == 0 for x in d["methods"] + d["prefix"] if x["name"] in grads for v in x["scores"][t]), \
        "a gradient scores the foil word %d" % t
print("ok S=%d T=%d L=%d H=%d, %d methods" % (S, T, L, H, len(names)))' "$@" 2>&1 | tail -1
}
shape=$(check_json "$out/explain.json")
[[ $shape == ok* ]] && ok "explain_json_keys_and_shapes (${shape#ok })" || bad "explain_json_keys_and_shapes" "$shape"
shares=$("$BOUNDED" "$PY" -c 'import json, sys
s = json.load(open(sys.argv[1]))["share"]
v = [x for row in s for x in row]
print(len(v), sum(1 for x in v if not (isinstance(x, (int, float)) and 0 <= x <= 1)), min(v), max(v))' "$out/explain.json" 2>&1)
read -r n off lo hi <<<"$shares"
[[ ${n:-0} -gt 0 && $off == 0 ]] && ok "explain_source_share_in_0_1 ($n values, $lo..$hi)" ||
    bad "explain_source_share_in_0_1" "$shares"
# the terminal table's share column is the last row of share
first=$(awk '/^target +log p +share/{getline; print $3; exit}' "$T/explain.log")
json_first=$("$BOUNDED" "$PY" -c 'import json, sys; print("%.2f" % json.load(open(sys.argv[1]))["share"][-1][0])' "$out/explain.json")
[[ -n $first && $first == "$json_first" ]] && ok "explain_table_share_is_the_json_last_row" ||
    bad "explain_table_share_is_the_json_last_row" "table '$first', json '$json_first'"
"$QKV" explain "$T/run" --text "the cat sleeps" --contrast lo --ig-steps 0 --out "$T/foil" >"$T/foil.log" 2>&1
shape=$(check_json "$T/foil/explain.json" lo)
[[ $shape == ok* ]] && grep -q "log p(word) - log p(lo)" "$T/foil.log" && ok "explain_contrast_without_ig_json (${shape#ok })" ||
    bad "explain_contrast_without_ig_json" "$shape; $(tail -2 "$T/foil.log")"
# a foil that is one of the words (lo, the first): log p(lo) - log p(lo) is 0 whatever the
# input; the table ranks nothing in its gradient column for it and says why, the JSON flags it
"$QKV" explain "$T/run" --text "$text" --target "$target" --contrast lo --ig-steps 4 --out "$T/foilw" >"$T/foilw.log" 2>&1
rc=$?
shape=$(check_json "$T/foilw/explain.json" lo)
row=$(awk '/^target +log p +share/{getline; print; exit}' "$T/foilw.log")
said="'lo' (position 0) is the foil itself: log p(lo) - log p(lo) is 0 whatever the input, so the gradients rank nothing for it"
if [[ $rc -eq 0 && $shape == ok* && $row == lo\ *"  - (the foil)  "* ]] && grep -qxF "$said" "$T/foilw.log" &&
    [[ $(grep -c "(the foil)" "$T/foilw.log") -eq 1 ]]; then
    ok "explain_contrast_with_a_word_of_the_target_ranks_nothing_for_it"
else
    bad "explain_contrast_with_a_word_of_the_target_ranks_nothing_for_it" "exit $rc; $shape; row '$row'; $(tail -4 "$T/foilw.log")"
fi
# a gradient not computed ranks nothing either: with --ig-steps 0 its column (the third) is
# '-' on every row (a word that is the foil itself says why)
rows=$("$BOUNDED" "$PY" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["maps"]["target_out"]))' "$T/foil/explain.json")
igcol=$(awk -v rows="${rows:-0}" '/^target +log p +share/{on = 1; next} on && n++ < rows {print substr($0, 72, 17)}' \
    "$T/foil.log" | sed 's/ *$//' | sort -u | tr '\n' '|')
[[ $igcol == "-|" || $igcol == "-|- (the foil)|" ]] && ok "explain_no_ig_steps_no_ig_ranking" ||
    bad "explain_no_ig_steps_no_ig_ranking" "the integrated gradients' column: '$igcol'"
grep -q '"format":"qkv-explain-1"' "$out/index.html" && ! grep -q '__QKV_DATA__' "$out/index.html" &&
    ok "explain_page_holds_the_json" || bad "explain_page_holds_the_json" "no qkv-explain-1 data at the marker"
if grep -qiE '(src|href)=["'"'"']?(https?:)?//' "$out/index.html" || grep -q '<link' "$out/index.html"; then
    bad "explain_page_needs_no_network" "index.html refers to something outside itself"
else
    ok "explain_page_needs_no_network"
fi

# ---- refusals ---------------------------------------------------------------------------------
expect_error "explain_ref_with_text" 2 "^qkv: --ref goes with --src$" \
    "$QKV" explain "$T/run" --text "the cat" --ref "$T/data/test.tgt" --out "$T/x"
expect_error "explain_corpus_sizes_with_text" 2 "^qkv: --random-orders goes with --src$" \
    timeout 60 "$QKV" explain "$T/run" --text "the cat" --random-orders 5 --out "$T/x"
expect_error "explain_contrast_not_in_vocabulary" 2 "^qkv: --contrast: 'zebrao' is not in the target vocabulary$" \
    "$QKV" explain "$T/run" --text "the cat" --contrast zebrao --out "$T/x"
expect_error "explain_contrast_pad" 2 "^qkv: --contrast: '<pad>' is a token the model never writes \(of the special ones, only <eos> is a word\)$" \
    "$QKV" explain "$T/run" --text "the cat" --contrast "<pad>" --out "$T/x"
expect_error "explain_contrast_bos" 2 "^qkv: --contrast: '<bos>' is a token the model never writes" \
    "$QKV" explain "$T/run" --text "the cat" --contrast "<bos>" --out "$T/x"
expect_error "explain_target_not_in_vocabulary" 2 "^qkv: --target: not in the target vocabulary: 'zebrao'$" \
    "$QKV" explain "$T/run" --text "the cat sleeps" --target "lo zebrao dorma" --out "$T/x"
expect_error "explain_without_text_or_src" 2 "^usage: qkv explain RUN " "$QKV" explain "$T/run" --out "$T/x"
[[ ! -e $T/x ]] && ok "explain_refusals_write_nothing" || bad "explain_refusals_write_nothing" "$(ls -a "$T/x")"
printf 'not a directory\n' >"$T/file"
cp "$T/file" "$T/file.before"
# a place where nothing can be made (under a file) is refused before the work: no table printed
for cmd in explain whatif; do
    where=$T/file/x
    [[ $cmd == whatif ]] && where=$T/file/w.json
    printed=$(timeout 60 "$QKV" $cmd "$T/run" --text "the cat" --out "$where" 2>"$T/early.err")
    rc=$?
    [[ $rc -eq 2 && -z $printed && $(wc -l <"$T/early.err") -eq 1 && $(cat "$T/early.err") == "qkv: "*"$T/file"*[Nn]"ot a directory" ]] &&
        ok "${cmd}_out_that_cannot_be_made_refused_before_the_work" ||
        bad "${cmd}_out_that_cannot_be_made_refused_before_the_work" "exit $rc, $(wc -l <<<"$printed") lines out: $(cat "$T/early.err")"
done
err=$("$QKV" explain "$T/run" --text "the cat" --out "$T/file" 2>&1 >/dev/null)
rc=$?
if [[ $rc -ne 0 && $(wc -l <<<"$err") -eq 1 && $err == "qkv: "*"$T/file"* ]] && cmp -s "$T/file" "$T/file.before" &&
    [[ -z $(ls -d "$T/file".partial-* 2>/dev/null) ]]; then
    ok "explain_out_is_a_file_left_untouched ($err)"
else
    bad "explain_out_is_a_file_left_untouched" "exit $rc: $err; $(head -c 80 "$T/file")"
fi

# ---- a corpus: faithfulness, tau, shares, AER ----------------------------------------------------
# --out that cannot be a directory is refused before a corpus's work (nothing printed first)
: >"$T/afile"
printed=$(timeout 60 "$QKV" explain "$T/run" --src "$T/data/test.src" --max-sentences 12 --out "$T/afile" 2>"$T/afile.err")
rc=$?
if [[ $rc -eq 2 && -z $printed && $(cat "$T/afile.err") == "qkv: --out: $T/afile exists and is not a directory" ]]; then
    ok "explain_out_a_file_refused_before_the_work"
else
    bad "explain_out_a_file_refused_before_the_work" "exit $rc, $(wc -l <<<"$printed") lines out, $(head -c 200 "$T/afile.err")"
fi
# the same tables on one thread and on two (each pair's sums added in the pairs' order)
for th in 1 2; do
    OPENBLAS_NUM_THREADS=$th "$QKV" explain "$T/run" --src "$T/data/test.src" --ref "$T/data/test.tgt" \
        --gold "$T/data/test.align" --max-sentences 12 --ig-steps 4 --random-orders 3 --out "$T/corpus$th" \
        >"$T/corpus$th.log" 2>&1 || bad "explain_corpus_runs" "$(tail -2 "$T/corpus$th.log")"
done
"$BOUNDED" "$PY" -c 'import json, math, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for d in (a, b): d.pop("seconds")
assert a == b, "one thread and two differ"
assert a["format"] == "qkv-explain-corpus-1" and a["sentences"] == 12 and a["random"]["orders"] == 3
names = [m["name"] for m in a["methods"]]
for n in ("L1.avg", "shift.L1", "contrib.layer", "contrib.rollout", "saliency", "x-gradient", "integrated-gradients", "leave-one-out"):
    assert n in names, n
assert all(0 <= m["aer"] <= 1 and len(m["drop_at_k"]) == 4 for m in a["methods"])
# the table says which x-gradient is which: the signed one and its magnitude are two rows
said = {m["name"]: m.get("score") for m in a["methods"] if m.get("score")}
assert sorted(said) == ["integrated-gradients", "saliency", "x-gradient", "x-gradient-l2"], said
assert "signed" in said["x-gradient"] and "magnitude" in said["x-gradient-l2"], said
loo = next(m for m in a["methods"] if m["name"] == "leave-one-out")
assert loo["drop_at_k"][0] >= max(m["drop_at_k"][0] for m in a["methods"]) - 1e-3, "a method beats leave-one-out at k=1"
t = a["tau"]
assert len(t["cross_vs_loo"]) == 2 and all(len(r) == 4 and all(-1 <= v <= 1 for v in r) for r in t["cross_vs_loo"])
assert all(0 <= v <= 1 for v in a["source_share"]["by_layer"] + a["source_share"]["by_position"])' \
    "$T/corpus1/explain-corpus.json" "$T/corpus2/explain-corpus.json" 2>"$T/corpus.err"
[[ $? -eq 0 && -s $T/corpus1/aopc.svg ]] && grep -q "^random " "$T/corpus1.log" &&
    grep -q '^x-gradient-l2  ' "$T/corpus1.log" && grep -q '^  x-gradient  *e \. df/dx: signed' "$T/corpus1.log" &&
    grep -q '^  x-gradient-l2  *|e \* df/dx|_2: the magnitude' "$T/corpus1.log" &&
    grep -q '>x-gradient: e \. df/dx, signed .*x-gradient-l2: |e \* df/dx|_2, its magnitude</text>' "$T/corpus1/aopc.svg" &&
    ok "explain_corpus_tables_the_same_on_one_thread_and_two" ||
    bad "explain_corpus_tables_the_same_on_one_thread_and_two" "$(tail -3 "$T/corpus.err")"
# explain's AER column reads links as qkv align does, the null decision included: on the same
# pairs and gold, its last cross-attention block's contributions (contrib.layer) score what
# align's default reading scores, with the rule on (the default, said under the table) and
# off. A run of 600 steps, whose links the one-to-one matching moves (the toy pair
# has no unaligned words: how many the rule leaves is said, not required)
"$QKV" train configs/toy.yaml --set run_dir="$T/run600" --set train.steps=600 --set model.d_model=32 \
    --set train.watch= --set data.train.src="$T/data/train.src" --set data.train.tgt="$T/data/train.tgt" \
    --set data.valid.src="$T/data/valid.src" --set data.valid.tgt="$T/data/valid.tgt" >"$T/train600.log" 2>&1
aer_pair() { # explain's log, align's table -> "explain align"
    echo "$(awk '$1 == "contrib.layer" { print $7 }' "$1") $(awk '/\(default\)$/ { print $(NF - 1) }' "$2")"
}
for null in on off; do
    timeout 120 "$QKV" explain "$T/run600" --src "$T/data/test.src" --ref "$T/data/test.tgt" \
        --gold "$T/data/test.align" --ig-steps 0 --random-orders 1 --null $null --out "$T/null-$null" \
        >"$T/null-$null.log" 2>&1
    "$QKV" align "$T/run600" --src "$T/data/test.src" --tgt "$T/data/test.tgt" --gold "$T/data/test.align" \
        --null $null >"$T/align-$null.txt" 2>&1
done
on=$(aer_pair "$T/null-on.log" "$T/align-on.txt") off=$(aer_pair "$T/null-off.log" "$T/align-off.txt")
rule=$(grep '^null: words are linked' "$T/align-on.txt")
left=$(sed -n 's/^null: \([0-9]*\) of .*/\1/p' "$T/align-on.txt")
if [[ $on =~ ^(0\.[0-9]+)\ (0\.[0-9]+)$ && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" &&
    $off =~ ^(0\.[0-9]+)\ (0\.[0-9]+)$ && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" && $on != "$off" &&
    -n $left && -n $rule ]] && grep -qxF "$rule" "$T/null-on.log" && ! grep -q '^null: ' "$T/null-off.log" &&
    grep -q '"null": "on"' "$T/null-on/explain-corpus.json" && grep -q '"null": "off"' "$T/null-off/explain-corpus.json"; then
    ok "explain_corpus_aer_is_aligns_with_the_null_rule_on_and_off (on $on, off $off; $left words unaligned)"
else
    bad "explain_corpus_aer_is_aligns_with_the_null_rule_on_and_off" "explain align: on '$on', off '$off'; $left; rule '$rule'"
fi
expect_error "explain_null_goes_with_gold" 2 "^qkv: --null goes with --gold$" "$QKV" explain "$T/run" \
    --src "$T/data/test.src" --null off --out "$T/null-nogold"
expect_error "explain_null_bad_value" 2 "^qkv: --null: 'maybe' is not on or off$" "$QKV" explain "$T/run" \
    --src "$T/data/test.src" --ref "$T/data/test.tgt" --gold "$T/data/test.align" --null maybe --out "$T/null-bad"
# the picture says the random orders' mean as the log does, draws it over the bars (last),
# and keys the families and the axis
mean=$(sed -n 's/^random  *\([0-9.-]*\) .*/\1/p' "$T/corpus1.log")
svg=$T/corpus1/aopc.svg
last_bar=$(grep -n 'height="13" fill="#' "$svg" | tail -1 | cut -d: -f1) band=$(grep -n 'class="random"' "$svg" | cut -d: -f1)
[[ -n $mean && -n $last_bar && -n $band && $band -gt $last_bar ]] && grep -q "orders (3), mean $mean;" "$svg" &&
    grep -q '>contributions</text>' "$svg" && grep -q '>nats</text>' "$svg" && ok "explain_aopc_picture_shows_the_random_mean" ||
    bad "explain_aopc_picture_shows_the_random_mean" "mean '$mean', last bar line $last_bar, band line $band: $(grep -o 'dashed[^<]*' "$svg")"

# the two modes share a default folder: each replaces its own files and leaves the other's
# (and a file of neither) as they were
shared=$T/shared
mkdir -p "$shared" && echo "mine" >"$shared/notes.txt"
corpus_into() {
    timeout 120 "$QKV" explain "$T/run" --src "$T/data/test.src" --ref "$T/data/test.tgt" --max-sentences "$1" \
        --ig-steps 0 --random-orders 1 --out "$shared" >"$T/shared-corpus$1.log" 2>&1
}
corpus_into 3 && cp "$shared/explain-corpus.json" "$T/corpus.keep" && cp "$shared/aopc.svg" "$T/aopc.keep"
"$QKV" explain "$T/run" --text "$text" --ig-steps 0 --out "$shared" >"$T/shared-text.log" 2>&1
kept_corpus=$(cmp -s "$shared/explain-corpus.json" "$T/corpus.keep" && cmp -s "$shared/aopc.svg" "$T/aopc.keep" && echo yes)
cp "$shared/explain.json" "$T/sentence.keep" && cp "$shared/index.html" "$T/page.keep"
corpus_into 2
if [[ $kept_corpus == yes ]] && cmp -s "$shared/explain.json" "$T/sentence.keep" && cmp -s "$shared/index.html" "$T/page.keep" &&
    grep -q '"sentences": 2' "$shared/explain-corpus.json" && [[ $(cat "$shared/notes.txt") == mine ]]; then
    ok "explain_modes_in_one_folder_each_replaces_only_its_own_files"
else
    bad "explain_modes_in_one_folder_each_replaces_only_its_own_files" "corpus kept by --text: '${kept_corpus:-no}'; $(ls "$shared")"
fi
# a bad gold line is said before any pair is explained: no progress, nothing written
{ echo "0-0 not-a-link"; tail -n +2 "$T/data/test.align"; } >"$T/gold.bad"
expect_error "explain_corpus_bad_gold_line_refused_before_the_work" 2 "^qkv: $T/gold.bad:1: not Pharaoh alignments \(i-j pairs\)$" \
    timeout 120 "$QKV" explain "$T/run" --src "$T/data/test.src" --ref "$T/data/test.tgt" --gold "$T/gold.bad" \
    --max-sentences 25 --ig-steps 0 --random-orders 1 --out "$T/gold-bad"
# a link past its pair's words (line 3), likewise, with the pair's word counts
awk 'NR == 3 {print "0-0 0-99"; next} {print}' "$T/data/test.align" >"$T/gold.range"
expect_error "explain_corpus_gold_link_out_of_range_refused_before_the_work" 2 \
    "^qkv: $T/gold.range:3: link 0-99 is out of range: the pair has [0-9]+ source and [0-9]+ target words$" \
    timeout 120 "$QKV" explain "$T/run" --src "$T/data/test.src" --ref "$T/data/test.tgt" --gold "$T/gold.range" \
    --max-sentences 25 --ig-steps 0 --random-orders 1 --out "$T/gold-bad"
[[ ! -e $T/gold-bad ]] && ok "explain_corpus_bad_gold_writes_nothing" || bad "explain_corpus_bad_gold_writes_nothing" "$(ls -a "$T/gold-bad")"

# ---- qkv patch: activation patching between two sentences ------------------------------------
# a sentence patched into itself changes nothing; the encoder's output patched everywhere is
# the corrupted run; every head and every encoder position is a component
"$QKV" patch "$T/run" --clean "$text" --corrupt "$text" --target "$target" --out "$T/self" >"$T/self.log" 2>&1
rc=$?
"$BOUNDED" "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "qkv-patch-1"
assert all(c["effect"] == 0 and c["atp"] == 0 for c in d["components"]), "a self-patch moved the metric"
assert d["clean"] == d["corrupt"] == d["everything"]' "$T/self/patch.json" 2>"$T/self.err"
# every effect 0: rho is undefined, null in the JSON, and said so on the terminal (not "nan")
[[ $rc -eq 0 && $? -eq 0 ]] && grep -q "Spearman rho undefined (the effects, or the estimates, all the same) over" "$T/self.log" &&
    ok "patch_a_sentence_into_itself_changes_nothing" ||
    bad "patch_a_sentence_into_itself_changes_nothing" "exit $rc; $(tail -2 "$T/self.log" "$T/self.err")"
"$QKV" patch "$T/run" --clean "$text" --corrupt "the old farmers see a red bird" --target "$target" \
    --compare vida,vidan --at 6 --out "$T/pair" >"$T/pair.log" 2>&1
rc=$?
"$BOUNDED" "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
heads = [c for c in d["components"] if c["kind"] != "stream"]
stream = [c for c in d["components"] if c["kind"] == "stream"]
assert len(heads) == 3 * 2 * 4 and len(stream) == 2 * 8, (len(heads), len(stream))
assert abs(d["everything"] - d["corrupt"]) < 1e-4, (d["everything"], d["corrupt"])
assert d["clean"] != d["corrupt"] and any(c["effect"] != 0 for c in d["components"])
assert -1 <= d["rho"] <= 1' "$T/pair/patch.json" 2>"$T/pair.err"
[[ $rc -eq 0 && $? -eq 0 && -s $T/pair/patch.svg ]] && grep -q "^attribution patching against patching: Spearman rho" "$T/pair.log" &&
    ok "patch_every_head_and_position_everything_is_the_corrupted_run" ||
    bad "patch_every_head_and_position_everything_is_the_corrupted_run" "exit $rc; $(tail -2 "$T/pair.log" "$T/pair.err")"
expect_error "patch_sentences_of_different_lengths" 2 "^qkv: --corrupt: 3 tokens, --clean 7: patching copies position for position" \
    "$QKV" patch "$T/run" --clean "$text" --corrupt "a red bird" --out "$T/x"
# an unknown word in either sentence is said, naming the sentence's option
timeout 60 "$QKV" patch "$T/run" --clean "$text" --corrupt "the old zebra sees a red bird" --target "$target" \
    --compare vida,vidan --at 2 --out "$T/unk-patch" >/dev/null 2>"$T/unk-patch.err"
grep -qx "qkv: warning: --corrupt: not in the source vocabulary, read as <unk>: 'zebra'" "$T/unk-patch.err" &&
    ok patch_corrupt_unknown_words_warn || bad patch_corrupt_unknown_words_warn "$(cat "$T/unk-patch.err")"
expect_error "patch_compare_word_not_in_the_vocabulary" 2 "^qkv: --compare: 'zzqx' is not in the target vocabulary" \
    "$QKV" patch "$T/run" --clean "$text" --corrupt "$text" --compare zzqx,vida --out "$T/x"
expect_error "patch_compare_without_two_words" 2 "^qkv: --compare: 'A,B'" \
    "$QKV" patch "$T/run" --clean "$text" --corrupt "$text" --compare vida --out "$T/x"
expect_error "patch_at_without_compare" 2 "^qkv: --at is the position of --compare: give both$" \
    timeout 60 "$QKV" patch "$T/run" --clean "$text" --corrupt "$text" --at 2 --out "$T/x"
expect_error "patch_at_past_the_target" 2 "^qkv: --at: target position 40: the target has positions 0..7" \
    "$QKV" patch "$T/run" --clean "$text" --corrupt "$text" --target "$target" --compare vida,vidan --at 40 --out "$T/x"

# ---- qkv whatif: the model changed and read out ------------------------------------------------
"$QKV" whatif "$T/run" --text "$text" --lens --tree --out "$T/whatif.json" >"$T/whatif.log" 2>&1
rc=$?
printf '%s\n' "$text" | "$QKV" translate "$T/run" --beam 5 >"$T/beam.txt" 2>/dev/null
"$BOUNDED" "$PY" -c 'import json, math, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
beam = open(sys.argv[2], encoding="utf-8").read().strip()
assert d["format"] == "qkv-whatif-1" and "changed" not in d
m = d["model"]
words = d["target"].split() + ["<eos>"]
# greedy: the forced word is each position'"'"'s top token (the last may be the length limit'"'"'s EOS)
assert [row[0]["token"] for row in m["top"]][:-1] == words[:-1], ([row[0]["token"] for row in m["top"]], words)
# the last layer'"'"'s lens is the model'"'"'s own distribution
assert all(abs(c["word_logp"] - lp) < 1e-3 for c, lp in zip(m["lens"][-1], m["logp"])), "lens"
assert all(h >= 0 for h in m["entropy"])
assert d["beam_best"] == beam, (d["beam_best"], beam)
fates = {n["fate"] for n in d["beam_tree"]}
assert fates & {"finished", "limit"} and "kept" in fates, fates' "$T/whatif.json" "$T/beam.txt" 2>"$T/whatif.err"
[[ $rc -eq 0 && $? -eq 0 ]] && grep -q "^logit lens" "$T/whatif.log" && grep -q "^beam tree (beam 5)" "$T/whatif.log" &&
    ok "whatif_steps_lens_and_beam_tree" || bad "whatif_steps_lens_and_beam_tree" "exit $rc; $(tail -3 "$T/whatif.err" "$T/whatif.log")"
"$QKV" whatif "$T/run" --text "$text" --target "$target" --mask-heads "cross.*.*" --pin 1.0.2=3 --out "$T/whatif2.json" \
    >"$T/whatif2.log" 2>&1
rc=$?
"$BOUNDED" "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
a, b = d["model"]["logp"], d["changed"]["logp"]
assert len(a) == len(b) and any(abs(x - y) > 1e-3 for x, y in zip(a, b)), "nothing changed"
assert "translation_changed" in d' "$T/whatif2.json" 2>"$T/whatif2.err"
[[ $rc -eq 0 && $? -eq 0 ]] && grep -q "^pinned: cross-attention layer 1, head 0, at target position 2, onto source position 3" "$T/whatif2.log" &&
    ok "whatif_heads_off_and_a_pin_change_log_p" || bad "whatif_heads_off_and_a_pin_change_log_p" "exit $rc; $(tail -3 "$T/whatif2.err" "$T/whatif2.log")"
expect_error "whatif_pin_malformed" 2 "^qkv: --pin: '1.0.2' is not LAYER.HEAD.TARGET=SOURCE" \
    "$QKV" whatif "$T/run" --text "$text" --pin 1.0.2
# numbers past an int (which wrapped to small ones) and signs are not positions
i=0
for pin in 0.0.0=4294967299 4294967296.0.0=0 0.0.0=-1 0.+1.0=0 0.0.0=1x; do
    i=$((i + 1))
    expect_error "whatif_pin_not_a_position_$i" 2 "^qkv: --pin: '$pin' is not LAYER.HEAD.TARGET=SOURCE" \
        "$QKV" whatif "$T/run" --text "$text" --pin "$pin"
done
expect_error "whatif_pin_out_of_range" 2 "^qkv: --pin 5.0.1=1: this model's cross-attention has layers 0..1 and heads 0..3" \
    "$QKV" whatif "$T/run" --text "$text" --pin 5.0.1=1
long_text=$(printf 'vida %.0s' $(seq 300))
expect_error "whatif_text_past_the_positions" 2 "^qkv: --text: more than the [0-9]+ tokens this model has positions for$" \
    timeout 60 "$QKV" whatif "$T/run" --text "$long_text"
expect_error "patch_clean_past_the_positions_names_clean" 2 "^qkv: --clean: more than the [0-9]+ tokens this model has positions for$" \
    timeout 60 "$QKV" patch "$T/run" --clean "$long_text" --corrupt "$long_text" --out "$T/x"
# a text's control bytes reach the terminal spelled (\x1b, \x07), as errors spell them: never raw
ctl_text=$'the \e[31mold\a farmer'
for cmd in whatif attention explain; do
    timeout 120 "$QKV" $cmd "$T/run" --text "$ctl_text" --out "$T/ctl-$cmd" >"$T/ctl-$cmd.out" 2>/dev/null
    rc=$?
    if [[ $rc -eq 0 ]] && ! LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$T/ctl-$cmd.out" &&
        grep -qF 'source: the \x1b[31mold\x07 farmer' "$T/ctl-$cmd.out"; then
        ok "${cmd}_spells_control_bytes_on_the_terminal"
    else
        bad "${cmd}_spells_control_bytes_on_the_terminal" "exit $rc: $(head -3 "$T/ctl-$cmd.out" | cat -v)"
    fi
done
expect_error "whatif_beam_without_tree" 2 "^qkv: --beam goes with --tree \(the beam search tree\)$" \
    "$QKV" whatif "$T/run" --text "$text" --beam 3
expect_error "whatif_pin_twice" 2 "^qkv: --pin: one pin at a time \\(given twice\\)$" \
    timeout 60 "$QKV" whatif "$T/run" --text "$text" --pin 1.0.2=1 --pin 1.0.1=1
expect_error "whatif_pin_past_the_source" 2 "^qkv: --pin 1.0.1=30: source position 30: the source has positions 0..7" \
    "$QKV" whatif "$T/run" --text "$text" --pin 1.0.1=30
# --out replaces what is there: never a FIFO (a device is refused by the same check, and is
# left out here: a failing test would replace a system's device node), or a file the run keeps
mkfifo "$T/whatif.fifo"
cp "$T/run/config.yaml" "$T/config.before"
ckpt=$(ls "$T/run/ckpt/"step-*.safetensors | tail -1)
cp "$ckpt" "$T/ckpt.before"
expect_error "whatif_out_refuses_a_fifo" 2 "^qkv: $T/whatif.fifo: a FIFO, not a regular file" \
    timeout 60 "$QKV" whatif "$T/run" --text "$text" --out "$T/whatif.fifo"
expect_error "whatif_out_refuses_the_runs_config" 2 "^qkv: $T/run/config.yaml: --out is a file of the run $T/run, which the whatif would replace" \
    timeout 60 "$QKV" whatif "$T/run" --text "$text" --out "$T/run/config.yaml"
expect_error "whatif_out_refuses_a_checkpoint" 2 "^qkv: $ckpt: --out is a checkpoint of the run $T/run, which the whatif would replace" \
    timeout 60 "$QKV" whatif "$T/run" --text "$text" --out "$ckpt"
if [[ -p $T/whatif.fifo ]] && cmp -s "$T/config.before" "$T/run/config.yaml" && cmp -s "$T/ckpt.before" "$ckpt"; then
    ok "whatif_out_refused_leaves_them_as_they_were"
else
    bad "whatif_out_refused_leaves_them_as_they_were" "the FIFO, config.yaml or $ckpt changed"
fi

# ---- the page in a real browser ----------------------------------------------------------------
# explain.json's maps say which source positions the model read as <unk>, and the page marks them
"$QKV" explain "$T/run" --text "the zebra sleeps" --ig-steps 0 --out "$T/unkx" >"$T/unkx.log" 2>&1
grep -q '"source_unk":\[1\]' "$T/unkx/explain.json" && ok "explain_json_maps_name_the_words_read_as_unk" ||
    bad "explain_json_maps_name_the_words_read_as_unk" "$(grep -o '"source_unk":[^]]*]' "$T/unkx/explain.json"; tail -1 "$T/unkx.log")"

if [[ -z $browser ]]; then
    skip_missing browser "Chromium is not installed: the explain page was NOT tested in a browser"
    finish
    exit
fi
browser_flags "$T/profile"

# the faithfulness chart: every text inside it, apart from the others, off the bars and the dashed mean
svg_fit aopc "$T/corpus1/aopc.svg"
[[ -z $faults && $measured == " 1,"* ]] && ok "explain_aopc_picture_texts_fit ($measured)" ||
    bad "explain_aopc_picture_texts_fit" "measured '$measured': $faults"

# opened as a user opens it: one word box per target word, the chosen one, the source table
words=$("$BOUNDED" "$PY" -c 'import json, sys; m = json.load(open(sys.argv[1]))["maps"]; print(len(m["target_out"]), len(m["source"]))' \
    "$out/explain.json")
read -r nt ns <<<"$words"
browser_dom "file://$out/index.html" "$T/plain.html"
boxes=$(grep -o 'class="xword[ "]' "$T/plain.html" | wc -l)
chosen=$(grep -o 'class="xword chosen"' "$T/plain.html" | wc -l)
rows=$(grep -o '<table class="xt xsrc">.*</table>' "$T/plain.html" | sed 's#</table>.*##' | grep -o '<tr' | wc -l)
[[ $boxes -eq $nt && $chosen -eq 1 && $rows -eq $((ns + 1)) && -z $console ]] &&
    ok "browser_explain_one_box_per_target_word ($boxes words, $((rows - 1)) source rows)" ||
    bad "browser_explain_one_box_per_target_word" "$boxes boxes for $nt words, $chosen chosen, $rows rows for $ns tokens; console: $console"

# the page drives itself: a word's click, every method, a head's column into its map and back,
# then every control of the maps pane as for any sentence's maps
selftest "$out/index.html"
if has '"ok":true' && has '"errors":[]' && has '"explain":{' && [[ -z $console ]]; then
    ok "browser_explain_every_control_changes_the_picture_no_errors"
else
    bad "browser_explain_every_control_changes_the_picture_no_errors" "result: ${result:-none}; console: $console"
fi
has '"oneBoxPerWord":true' && has '"sharesInRange":true' && has '"rolloutIsShare":true' && has '"defaultColumns":true' &&
    ok "browser_explain_words_rings_and_scaled_bars" || bad "browser_explain_words_rings_and_scaled_bars" "${result:-none}"
has '"clickSelectsWord":true' && has '"completeness":true' && has '"everyMethod":true' &&
    ok "browser_explain_click_selects_a_word_and_says_its_share" || bad "browser_explain_click_selects_a_word_and_says_its_share" "${result:-none}"
has '"attentionLinks":true' && has '"headOpensMap":true' && has '"backToExplain":true' &&
    ok "browser_explain_head_column_opens_its_map_and_anatomy" || bad "browser_explain_head_column_opens_its_map_and_anatomy" "${result:-none}"

# a word that is the foil itself: the page says so and no gradient column outlines a token for it
selftest "$T/foilw/index.html"
has '"ok":true' && has '"foilWordRanksNothing":true' && [[ -z $console ]] &&
    ok "browser_explain_foil_word_ranks_nothing" || bad "browser_explain_foil_word_ranks_nothing" "result: ${result:-none}; console: $console"

# the check can fail: the same page with a source share past 1 must not pass
"$BOUNDED" "$PY" -c 'import sys, json
page = open(sys.argv[1], encoding="utf-8").read()
start = page.index(">", page.index("<script id=\"attn-data\"")) + 1
end = page.index("</script>", start)
data = json.loads(page[start:end])
data["share"][-1][0] = 1.5
data = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
open(sys.argv[2], "w", encoding="utf-8").write(page[:start] + data + page[end:])' "$out/index.html" "$T/bad.html" 2>"$T/bad.err"
selftest "$T/bad.html"
has '"ok":false' && has '"sharesInRange":false' && ok "browser_explain_selftest_fails_on_a_share_past_1" ||
    bad "browser_explain_selftest_fails_on_a_share_past_1" "result: ${result:-none}; $(head -2 "$T/bad.err")"

# a picture of the page, on the third word
mkdir -p build
shot=build/explain-page.png
browser_shot "file://$out/index.html#pane=explain&word=2" "$shot" 1300,1000
[[ -s $shot && $(stat -c %s "$shot") -gt 10000 ]] && ok "browser_explain_screenshot ($shot)" || bad "browser_explain_screenshot" "$shot"


# patch.svg of log p(target) (no --compare) as Chromium draws it: its estimates are a small
# fraction of its effects, and each axis of the scatter has its own scale, so they spread
# over the plot (on one scale every estimate read 0) and no marker sits on the frame; the
# heatmaps' colours have a key; every label is inside the picture, the unrotated ones
# clear of each other
"$QKV" patch "$T/run" --clean "$text" --corrupt "the old farmers see a red bird" --target "$target" \
    --out "$T/patch-lp" >"$T/patch-lp.log" 2>&1
{
    echo '<!DOCTYPE html><html><body style="margin:0">'
    cat "$T/patch-lp/patch.svg"
    cat <<'JSEOF'
<script>
const svg = document.querySelector("svg"), wrong = [], all = svg.getBoundingClientRect();
const inside = (b, f) => b.left >= f.left - 0.5 && b.top >= f.top - 0.5 && b.right <= f.right + 0.5 && b.bottom <= f.bottom + 0.5;
const texts = [...svg.querySelectorAll("text")].map(t => [t.textContent, t.getBoundingClientRect(), t.hasAttribute("transform")]);
texts.forEach(([t, b, turned], i) => {
  if (!inside(b, all)) wrong.push(`'${t}' leaves the picture`);
  for (const [u, c, also] of texts.slice(0, i))
    if (!turned && !also && Math.min(b.right, c.right) - Math.max(b.left, c.left) > 0.5 &&
        Math.min(b.bottom, c.bottom) - Math.max(b.top, c.top) > 0.5) wrong.push(`'${u}' and '${t}' overlap`);
});
const frame = svg.querySelector('rect[stroke="#bbb"]').getBoundingClientRect(), ys = [];
for (const c of svg.querySelectorAll("circle")) {
  const b = c.getBoundingClientRect();
  if (!(b.left > frame.left && b.right < frame.right && b.top > frame.top && b.bottom < frame.bottom)) wrong.push("a marker on the frame");
  ys.push(b.top);
}
if (Math.max(...ys) - Math.min(...ys) < frame.height / 4) wrong.push(`the estimates span ${Math.max(...ys) - Math.min(...ys)} px`);
if (svg.querySelectorAll(".colour-key rect").length < 3) wrong.push("no colour key");
document.body.setAttribute("data-pictures", wrong.length ? [...new Set(wrong)].slice(0, 4).join("; ") : "ok");
</script></body></html>
JSEOF
} >"$T/patch-lp/measured.html"
browser_dom "file://$T/patch-lp/measured.html" "$T/patch-lp.dom"
svg_check=$(grep -o 'data-pictures="[^"]*"' "$T/patch-lp.dom")
[[ $svg_check == 'data-pictures="ok"' ]] && ok browser_patch_svg_scatter_readable_and_colours_keyed ||
    bad browser_patch_svg_scatter_readable_and_colours_keyed "${svg_check:-no answer: $(tail -2 "$T/patch-lp.log" "$T/patch-lp.dom.err")}"

browser_dom "file://$T/unkx/index.html" "$T/unkx-dom.html"
marked=$(grep -o '<span class="unk"[^>]*>[^<]*' "$T/unkx-dom.html" | sed 's/.*>//')
[[ $marked == "zebra (&lt;unk&gt;)" ]] && ok "browser_explain_page_marks_the_words_read_as_unk" ||
    bad "browser_explain_page_marks_the_words_read_as_unk" "marked: '${marked:-nothing}'"

finish
